"""URLs of stores reached over a network (S3 and other fsspec URLs): the options that keep
many requests in flight and fail in bounded time, a bucket that does not exist, and storage
options with their secrets taken out (what a Dask graph may carry). A zarr store object's
own URL and whether it is reached over a network are ``zarr.store_url`` and
``zarr.over_network``."""

from __future__ import annotations

from collections.abc import Mapping

SECRETS = {
    "key", "secret", "token", "password", "account_key", "sas_token", "client_secret",
    "credentials", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
}  # fmt: skip
LOCAL_PROTOCOLS = ("file", "local", "memory")
# object stores whose URLs start with a bucket (or container): ``s3://bucket/key``
BUCKET_PROTOCOLS = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "oss")


def protocol(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def storage_defaults(url: str, options: Mapping | None, concurrency: int, timeout: float) -> dict:
    """``options`` for ``url`` with fastfinite's defaults where they say nothing: for S3, a
    connection pool of ``concurrency`` (botocore's default of 10 caps the requests in flight),
    connect and read timeouts of ``timeout`` seconds and bounded retries, so that an
    endpoint that does not answer is an error in bounded time, and one request an object."""
    out = dict(options or {})
    if protocol(url) in ("s3", "s3a"):
        config = {
            "max_pool_connections": concurrency,
            "connect_timeout": timeout / 3,
            "read_timeout": timeout,
            "retries": {"max_attempts": 3, "mode": "standard"},
        }
        out["config_kwargs"] = {**config, **dict(out.get("config_kwargs") or {})}
        # one GET an object: s3fs otherwise asks each object's size first (a HEAD), to cut
        # large objects in ranges; the requests in flight are many objects at once here
        out.setdefault("max_concurrency", 1)
    return out


def missing_bucket(url: str, options: Mapping | None) -> str | None:
    """The bucket (or container) of ``url`` when its store answers that it does not exist;
    None when it exists, when ``url`` has none (a local, memory or HTTP URL: only the
    ``BUCKET_PROTOCOLS`` have one), or when the store cannot tell (refused credentials, no
    answer): a store that could not be opened is then explained by its bucket, not by the
    array or group missing in it. ``options``: the scan's storage options, its timeouts
    (``storage_defaults``) included."""
    proto = protocol(url)
    if proto not in BUCKET_PROTOCOLS or "://" not in url:
        return None
    bucket = url.split("://", 1)[1].split("/", 1)[0]
    try:
        import fsspec

        fsspec.filesystem(proto, **dict(options or {})).info(bucket)
    except FileNotFoundError:
        return bucket
    except Exception:
        return None
    return None


def without_secrets(options: Mapping | None) -> dict:
    """``options`` with every credential taken out (keys in ``SECRETS``, at any depth)."""
    return {
        k: without_secrets(v) if isinstance(v, Mapping) else v
        for k, v in (options or {}).items()
        if k not in SECRETS
    }
