"""Stores in an S3-compatible server (moto's, started on 127.0.0.1 by the tests): exact
reports on the local engine and a real cluster, credentials by each route, missing and
corrupt objects, and failures that name the store (an outage mid-scan, an endpoint that does
not answer, a missing bucket) with exit code 2 on one line, in bounded time.

Part: ``fastfinite/sources/remote.py`` and the Zarr source on object stores.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zarr

import fastfinite

from .helpers import assert_one_line_error

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts"))
s3 = pytest.importorskip("s3_server")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

CHUNKS = (8, 100)


def _values():
    x = np.random.default_rng(3).standard_normal((64, 100))
    x[3, 7], x[40, 2], x[60, 99] = np.nan, np.inf, 1e100
    return x


def _write(url_or_path, x, options=None, unwritten=((3, 0),)):
    a = zarr.create_array(
        store=url_or_path, storage_options=options, shape=x.shape, chunks=CHUNKS,
        dtype=x.dtype, fill_value=np.nan, overwrite=True,
    )  # fmt: skip
    for i in range(x.shape[0] // CHUNKS[0]):
        if (i, 0) not in unwritten:
            a[i * 8 : (i + 1) * 8] = x[i * 8 : (i + 1) * 8]


@pytest.fixture(scope="module")
def server(s3_endpoint):
    """The shared moto server (conftest), with the store ``s3://bkt/x.zarr``."""
    _write("s3://bkt/x.zarr", _values(), s3.storage_options(s3_endpoint))
    return s3_endpoint


@pytest.fixture(scope="module")
def local_copy(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("copy") / "x.zarr")
    _write(path, _values())
    return fastfinite.scan(path).to_dict()


def _same(report, local, name="s3://bkt/x.zarr"):
    got = report.to_dict()
    assert got["name"] == name
    assert {**got, "name": ""} == {**local, "name": ""}


def test_s3_store_equals_its_local_copy(server, local_copy):
    r = fastfinite.scan("s3://bkt/x.zarr", storage_options=s3.storage_options(server))
    assert (r.nan, r.posinf, r.missing_chunks) == (1 + 800, 1, 1)
    _same(r, local_copy)


def test_a_store_object_is_named_by_its_url(server, local_copy):
    store = zarr.storage.FsspecStore.from_url(
        "s3://bkt/x.zarr", storage_options=s3.storage_options(server), read_only=True
    )
    _same(fastfinite.scan(store), local_copy)
    _same(fastfinite.scan(zarr.open_array(store, mode="r")), local_copy)


def test_an_obstore_store_is_read_and_named_by_its_url(server, local_copy):
    obstore = pytest.importorskip("obstore")
    inner = obstore.store.S3Store(
        "bkt", prefix="x.zarr", endpoint=server, access_key_id="testing",
        secret_access_key="testing", region="us-east-1", client_options={"allow_http": True},
    )  # fmt: skip
    _same(fastfinite.scan(zarr.storage.ObjectStore(inner, read_only=True)), local_copy)


def test_local_store_objects_are_named_by_their_path(tmp_path, local_copy):
    path = str(tmp_path / "x.zarr")
    _write(path, _values())
    _same(fastfinite.scan(zarr.storage.LocalStore(path, read_only=True)), local_copy, path)
    zpath = str(tmp_path / "x.zip")
    with zarr.storage.ZipStore(zpath, mode="w") as z:
        _write(z, _values())
    with zarr.storage.ZipStore(zpath, mode="r") as z:
        _same(fastfinite.scan(z), local_copy, zpath)
    obstore = pytest.importorskip("obstore")
    store = zarr.storage.ObjectStore(obstore.store.LocalStore(path), read_only=True)
    _same(fastfinite.scan(store), local_copy, path)


def test_credentials_from_the_environment(server, local_copy, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    options = s3.storage_options(server, credentials=False)
    _same(fastfinite.scan("s3://bkt/x.zarr", storage_options=options), local_copy)


def test_on_a_cluster_secrets_stay_out_of_the_graph_when_asked(server, local_copy, local_cluster):
    distributed = pytest.importorskip("distributed")
    options = s3.storage_options(server)
    options["secret"] = "a-secret-never-sent"  # moto takes any secret
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "from-the-worker"}
    lazy = fastfinite.scan(
        "s3://bkt/x.zarr", storage_options=options, compute=False, send_credentials=False
    )
    graph = pickle.dumps(dict(lazy.__dask_graph__()))
    assert b"a-secret-never-sent" not in graph
    sent = fastfinite.scan("s3://bkt/x.zarr", storage_options=options, compute=False)
    assert b"a-secret-never-sent" in pickle.dumps(dict(sent.__dask_graph__()))
    # a cluster of its own: its workers' environment holds the credentials
    with local_cluster(env=env) as cluster, distributed.Client(cluster) as client:
        _same(client.compute(lazy).result(), local_copy)
        _same(client.compute(sent).result(), local_copy)


def test_missing_and_corrupt_objects(server):
    options = s3.storage_options(server)
    _write("s3://bkt/bad.zarr", _values(), options)
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    fs.pipe("bkt/bad.zarr/c/5/0", b"\x00 not zstd \xff" * 4)
    with pytest.raises(fastfinite.ChunkReadError, match=r"chunk \(5, 0\) of s3://bkt/bad.zarr"):
        fastfinite.scan("s3://bkt/bad.zarr", storage_options=options)
    r = fastfinite.scan("s3://bkt/bad.zarr", storage_options=options, on_error="report")
    kinds = sorted((f.kind, f.where) for f in r.findings)
    assert kinds == [("missing_chunk", (3, 0)), ("unreadable_chunk", (5, 0))]


def _cli(*args, timeout=120):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__)))
    return subprocess.run(
        [sys.executable, "-m", "fastfinite", "scan", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def _options_args(endpoint, credentials=True):
    args = ["--storage-option", f"client_kwargs.endpoint_url={endpoint}"]
    args += ["--storage-option", "client_kwargs.region_name=us-east-1"]
    if credentials:
        args += ["--storage-option", "key=testing", "--storage-option", "secret=testing"]
    return args


def test_cli_storage_options(server, local_copy):
    r = _cli("s3://bkt/x.zarr", *_options_args(server), "--json", "-")
    assert r.returncode == 1, r.stderr
    assert {**json.loads(r.stdout), "name": ""} == {**local_copy, "name": ""}


def test_an_endpoint_that_does_not_answer(tmp_path):
    port = s3.free_port()
    start = time.time()
    r = _cli("s3://bkt/x.zarr", *_options_args(f"http://127.0.0.1:{port}"), "--timeout", "3")
    assert_one_line_error(r, "cannot reach the store of s3://bkt/x.zarr")
    assert time.time() - start < 40


def test_a_missing_bucket(server):
    assert_one_line_error(
        _cli("s3://nobucket/x.zarr", *_options_args(server), "--timeout", "3"), "nobucket"
    )


def test_refused_credentials():
    with s3.moto_server(check_credentials=True) as strict:
        start = time.time()
        r = _cli("s3://bkt/x.zarr", *_options_args(strict), "--timeout", "3")
        assert_one_line_error(r, "s3://bkt/x.zarr", "Access Key")
        assert time.time() - start < 40


def _kill_after(proxy, stats, requests: int) -> None:
    """Stop the proxy once it has passed ``requests`` requests: mid-scan, whatever the
    machine's start-up time."""

    def watch():
        deadline = time.time() + 60
        while proxy.poll() is None and time.time() < deadline:
            if stats()["requests"] >= requests:
                proxy.kill()
                return

    threading.Thread(target=watch, daemon=True).start()


def test_an_outage_mid_scan_names_the_store_not_a_chunk(server):
    """The server goes away while the scan reads chunks (a proxy with 100 ms a request,
    stopped after the metadata and a few chunks of 64): an error of the store in bounded
    time, with or without on_error="report"."""
    x = np.random.default_rng(5).standard_normal((64 * CHUNKS[0], CHUNKS[1]))
    _write("s3://bkt/long.zarr", x, s3.storage_options(server), unwritten=())
    for extra in ([], ["--on-error", "report"]):
        with s3.latency_proxy(server, 100) as (slow, stats, proxy):
            _kill_after(proxy, stats, 12)
            start = time.time()
            r = _cli("s3://bkt/long.zarr", *_options_args(slow), "--timeout", "3",
                     "--concurrency", "1", *extra)  # fmt: skip
            assert_one_line_error(r, "cannot reach the store of s3://bkt/long.zarr")
            assert time.time() - start < 60
            assert stats()["requests"] < 40  # it stopped mid-scan: not a scan that finished


def _asked(stats, before: dict) -> dict:
    """``METHOD /path`` -> requests since ``before`` (a stats() snapshot)."""
    now = stats()["paths"]
    return {
        k: n - before["paths"].get(k, 0) for k, n in now.items() if n > before["paths"].get(k, 0)
    }


def test_a_cluster_reads_each_object_once(server, local_cluster):
    distributed = pytest.importorskip("distributed")
    workers = 2
    with s3.latency_proxy(server, 0) as (endpoint, stats, _):
        options = s3.storage_options(endpoint)
        before = stats()
        fastfinite.scan("s3://bkt/x.zarr", storage_options=options)
        local = _asked(stats, before)
        # a cluster of its own: fresh workers, none has opened the array yet
        with local_cluster(workers=workers) as cluster, distributed.Client(cluster) as client:
            before = stats()
            fastfinite.scan(
                "s3://bkt/x.zarr", storage_options=options, scheduler=client, region_bytes=1
            )
            clustered = _asked(stats, before)
    chunks = {k for k in local if "/x.zarr/c/" in k}
    assert len(chunks) >= 7 and all(local[k] == 1 for k in chunks), local
    # every chunk object is read once, by one worker; only the metadata is read by each
    # process that opens the array (the client and every worker)
    assert {k: clustered.get(k) for k in chunks} == dict.fromkeys(chunks, 1), clustered
    assert set(clustered) <= set(local), (clustered, local)
    for key in set(local) - chunks:
        assert clustered.get(key, 0) <= local[key] * (1 + workers), (key, clustered, local)
