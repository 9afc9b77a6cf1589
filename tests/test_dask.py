"""Scans as Dask graphs: local schedulers, a real LocalCluster of processes, a worker killed
mid-scan, and real ``dask scheduler`` / ``dask worker`` processes driven by the CLI.

Part: ``fastfinite/engines/dask.py`` and ``fastfinite/sources/dask.py``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading

import dask.array as da
import numpy as np
import pytest
import zarr
from dask.delayed import Delayed
from hypothesis import given, settings
from hypothesis import strategies as st

import fastfinite
from fastfinite import ChunkReadError

from .helpers import assert_matches_oracle, run_cli


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10
    flat = x.reshape(-1)
    if flat.size:
        k = max(1, flat.size // 20)
        flat[rng.integers(0, flat.size, k)] = np.nan
        flat[rng.integers(0, flat.size, k)] = np.inf
        flat[rng.integers(0, flat.size, k)] = 1e100
    return x


def _same(a, b):
    assert a.counts() == b.counts()
    assert a.locations == b.locations
    assert a.count == b.count
    if a.count:
        assert a.min == b.min and a.max == b.max
        assert a.mean == pytest.approx(b.mean, rel=1e-9)
        assert a.std == pytest.approx(b.std, rel=1e-9)


@st.composite
def chunked(draw):
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=1, max_size=3)))
    chunks = []
    for n in shape:
        sizes = []
        left = n
        while left > 0:
            c = draw(st.integers(1, left))
            sizes.append(c)
            left -= c
        chunks.append(tuple(sizes) or (0,))
    return shape, tuple(chunks)


@settings(max_examples=40)
@given(
    case=chunked(), split_every=st.sampled_from([2, 3, 8]), max_locations=st.sampled_from([1, 5])
)
def test_irregular_chunks_equal_in_memory_scan(case, split_every, max_locations):
    shape, chunks = case
    x = _data(shape, seed=len(shape))
    ref = fastfinite.scan(x, max_locations=max_locations, cast=("float32", "float16"))
    d = da.from_array(x, chunks=chunks)
    r = fastfinite.scan(
        d,
        split_every=split_every,
        max_locations=max_locations,
        cast=("float32", "float16"),
        scheduler="synchronous",
    )
    _same(r, ref)
    assert_matches_oracle(r, x, cast=("float32", "float16"), max_locations=max_locations)


def test_schedulers_and_numpy_input():
    x = _data((30, 7), seed=1)
    ref = fastfinite.scan(x)
    for scheduler in ("threads", "processes", "synchronous"):
        _same(fastfinite.scan(x, scheduler=scheduler, region_bytes=256), ref)
    _same(fastfinite.scan(da.from_array(x, chunks=(4, 3))), ref)


def test_graph_building_computes_nothing_and_keys_are_deterministic():
    calls = []

    def spy(block):
        calls.append(1)
        return block

    x = da.from_array(_data((20, 20)), chunks=(5, 5)).map_blocks(spy, meta=np.array((), float))
    lazy = fastfinite.scan(x, compute=False, split_every=2)
    again = fastfinite.scan(x, compute=False, split_every=2)
    assert calls == []
    assert isinstance(lazy, Delayed)
    assert lazy.key == again.key
    assert set(lazy.__dask_graph__()) == set(again.__dask_graph__())
    other = fastfinite.scan(x, compute=False, split_every=3)
    assert other.key != lazy.key
    report = lazy.compute(scheduler="synchronous")
    assert len(calls) == 16 and report.nan > 0


def _labelled_twins():
    """Pairs of inputs that hold the same values under other labels (row labels, coordinates,
    names): their reports differ only in those labels."""
    pd, xr = pytest.importorskip("pandas"), pytest.importorskip("xarray")
    x = _data((12, 3), seed=5)
    return {
        "DataFrame": [pd.DataFrame(x, index=np.arange(12) + k) for k in (0, 100)],
        "Series": [pd.Series(x.ravel(), index=[f"{k}{i}" for i in range(36)]) for k in "ab"],
        "xarray": [xr.DataArray(x, dims=("t", "f"), coords={"t": np.arange(12) * k})
                   for k in (1, 10)],
        "xarray on dask": [xr.DataArray(x, dims=("t", "f"), coords={"t": np.arange(12) * k})
                           .chunk({"t": 5}) for k in (1, 10)],
        "names": [xr.DataArray(x, dims=("t", "f"), name=n) for n in "ab"],
    }  # fmt: skip


@pytest.mark.parametrize("kind", ["DataFrame", "Series", "xarray", "xarray on dask", "names"])
def test_same_values_under_other_labels_make_other_keys(dask_cluster, kind):
    """A report's key covers its name and labels: two inputs of equal values and other labels in one
    graph on one cluster get each its own report, not the one whose key came first."""
    a, b = _labelled_twins()[kind]
    refs = [fastfinite.scan(v) for v in (a, b)]
    assert refs[0].locations and refs[0].to_dict() != refs[1].to_dict()
    lazy = [fastfinite.scan(v, compute=False) for v in (a, b)]
    assert lazy[0].key != lazy[1].key
    assert lazy[0].key == fastfinite.scan(a, compute=False).key
    with distributed.Client(dask_cluster) as client:
        got = client.compute(lazy, sync=True)
    assert [r.to_dict() for r in got] == [r.to_dict() for r in refs]


def test_task_count_and_fan_in():
    x = da.from_array(np.zeros((40, 40)), chunks=(5, 4))  # 80 blocks
    lazy = fastfinite.scan(x, compute=False, split_every=4)
    graph = dict(lazy.__dask_graph__())
    ours = {k: v for k, v in graph.items() if "fastfinite" in (k[0] if isinstance(k, tuple) else k)}
    leaves = [k for k in ours if isinstance(k, tuple) and k[0].startswith("fastfinite-chunk")]
    combines = [k for k in ours if isinstance(k, tuple) and k[0].startswith("fastfinite-comb")]
    assert len(leaves) == 80
    assert len(combines) == 20 + 5 + 2 + 1  # 80 -> 20 -> 5 -> 2 -> 1
    lazy.__dask_graph__()  # the graph holds O(chunks) tasks
    assert len(ours) <= 2 * 80 + 2


def test_source_graph_reads_in_tasks(tmp_path):
    x = _data((24, 10), seed=2)
    path = str(tmp_path / "a.zarr")
    a = zarr.create_array(store=path, shape=x.shape, chunks=(6, 5), dtype="f8", fill_value=np.nan)
    a[:18] = x[:18]
    ref = fastfinite.scan(path)
    lazy = fastfinite.scan(path, compute=False, region_bytes=1)
    r = lazy.compute(scheduler="processes")
    _same(r, ref)
    assert r.missing_chunks == ref.missing_chunks == 2
    npy = str(tmp_path / "a.npy")
    np.save(npy, x)
    _same(fastfinite.scan(npy, scheduler="processes", region_bytes=200), fastfinite.scan(x))


def test_unreadable_chunk_follows_on_error(tmp_path):
    x = _data((12, 12), seed=3)
    path = str(tmp_path / "c.zarr")
    zarr.create_array(store=path, data=x, chunks=(4, 4))
    with open(os.path.join(path, "c", "1", "2"), "wb") as f:
        f.write(b"\x00not zstd\xff" * 4)
    with pytest.raises(ChunkReadError, match=r"\(1, 2\)"):
        fastfinite.scan(path, scheduler="threads")
    r = fastfinite.scan(path, scheduler="processes", on_error="report")
    assert [(f.kind, f.where) for f in r.findings] == [("unreadable_chunk", (1, 2))]


def test_fail_fast_is_refused_with_dask():
    with pytest.raises(ValueError, match="fail_fast"):
        fastfinite.scan(da.zeros(4), fail_fast=True)


distributed = pytest.importorskip("distributed")


def test_local_cluster_scheduler_client_and_futures(dask_cluster, tmp_path):
    x = _data((40, 12), seed=4)
    path = str(tmp_path / "a.zarr")
    zarr.create_array(store=path, data=x, chunks=(5, 6))
    ref = fastfinite.scan(x)
    with distributed.Client(dask_cluster) as client:
        _same(fastfinite.scan(path, scheduler=client, region_bytes=1), ref)
        _same(fastfinite.scan(path, scheduler=dask_cluster.scheduler_address), ref)
        # an active client is used by default for dask arrays
        _same(fastfinite.scan(da.from_zarr(path)), ref)
        future = client.compute(fastfinite.scan(path, compute=False, region_bytes=1))
        assert isinstance(future, distributed.Future)
        _same(future.result(), ref)


def test_worker_killed_mid_scan_result_still_exact(local_cluster, tmp_path):
    from zarr.storage import LocalStore
    from zarr.testing.store import LatencyStore

    x = _data((60, 8), seed=5)
    path = str(tmp_path / "slow.zarr")
    zarr.create_array(store=path, data=x, chunks=(2, 8))  # 30 chunks
    slow = zarr.open_array(
        LatencyStore(LocalStore(path, read_only=True), get_latency=0.25), mode="r"
    )
    ref = fastfinite.scan(x)
    # a cluster of its own: this test kills one of its workers
    with local_cluster() as cluster, distributed.Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        killer = threading.Timer(1.5, os.kill, args=(pids[0], signal.SIGKILL))
        killer.start()
        try:
            r = fastfinite.scan(slow, scheduler=client, region_bytes=1)
        finally:
            killer.cancel()
        client.wait_for_workers(2, timeout=60)
        assert pids[0] not in list(distributed.Client(cluster).run(os.getpid).values())
    _same(r, ref)
    assert r.complete


def _cli(*args, timeout=300):
    return run_cli("scan", *args, timeout=timeout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_real_dask_scheduler_and_worker_processes_with_cli(tmp_path, dask_processes):
    x = _data((50, 10), seed=6)
    path = str(tmp_path / "a.zarr")
    zarr.create_array(store=path, data=x, chunks=(10, 5))
    with dask_processes(str(tmp_path)) as address:
        r = _cli(path, "--scheduler", address, "--json", str(tmp_path / "r.json"), "--no-progress")
        assert r.returncode == 1, r.stderr
        d = json.loads((tmp_path / "r.json").read_text())
        ref = fastfinite.scan(x)
        assert d["nan"] == ref.nan and d["posinf"] == ref.posinf
        assert d["cast"]["float32"]["overflow"] == ref.cast["float32"].overflow
        bad = _cli(path, "--scheduler", f"tcp://127.0.0.1:{_free_port()}", "--timeout", "3")
        assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_cli_local_cluster(tmp_path):
    x = _data((20, 10), seed=7)
    path = str(tmp_path / "a.zarr")
    zarr.create_array(store=path, data=x, chunks=(5, 5))
    r = _cli(path, "--workers", "2", "--json", "-", "--no-progress")
    assert r.returncode == 1, r.stderr
    assert f'"nan": {int(np.isnan(x).sum())}' in r.stdout
