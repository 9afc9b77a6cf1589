"""Stores reached over a network (S3 and other fsspec or obstore URLs): the options that
keep many requests in flight and fail in bounded time, URLs as names, and storage options
with their secrets taken out (what a Dask graph may carry)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def store_url(store: Any) -> str:
    """A zarr store as a URL: ``s3://bucket/data.zarr``, a folder, a zip file."""
    fs = getattr(store, "fs", None)
    if fs is not None:
        return f"{_fs_protocol(fs)}://{str(store.path).strip('/')}"
    for attr in ("root", "path"):
        v = getattr(store, attr, None)
        if v is not None and str(v):
            return str(v)
    inner = getattr(store, "store", None)  # zarr's ObjectStore around an obstore store
    return _obstore_url(inner) if inner is not None else type(store).__name__


def over_network(store: Any) -> bool:
    """Whether a zarr store is reached over a network: not a local folder, not one in
    memory or a zip file, and, through fsspec, not on a local or memory filesystem."""
    if type(store).__name__ in ("LocalStore", "MemoryStore", "ZipStore"):
        return False
    fs = getattr(store, "fs", None)
    if fs is not None:
        return _fs_protocol(fs).lower() not in LOCAL_PROTOCOLS
    return True


def _fs_protocol(fs: Any) -> str:
    """An fsspec filesystem's protocol (its first name, when it has several)."""
    return fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol


OBSTORE_SCHEMES = {"S3Store": ("s3", "bucket"), "GCSStore": ("gs", "bucket"),
                   "AzureStore": ("az", "container_name")}  # fmt: skip


def _obstore_url(inner: Any) -> str:
    prefix = str(getattr(inner, "prefix", None) or "").strip("/")
    config = getattr(inner, "config", None) or {}
    scheme, key = OBSTORE_SCHEMES.get(type(inner).__name__, (None, None))
    if scheme and config.get(key):
        return f"{scheme}://{config[key]}" + (f"/{prefix}" if prefix else "")
    url = getattr(inner, "url", None) or (config.get("url") if isinstance(config, dict) else None)
    return str(url or (f"/{prefix}" if prefix else type(inner).__name__))
