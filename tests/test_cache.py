"""``scan(cache=)``: a re-scan reads only the storage units that changed and gives the report of
a full scan, bit for bit, on real stores on disk (Zarr v2, v3, sharded; .npy; HDF5), after
rewrites, appends, deletions, other options, a corrupt cache, two scans at once, a scan
killed with SIGKILL, and on a real Dask cluster.

Part: ``fastfinite/cache/`` (store, recall, changes), through ``scan(cache=)``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite import InvalidArgumentError
from fastfinite.cache.store import FILENAME
from fastfinite.compute.summary_bytes import from_bytes, to_bytes

from .helpers import assert_matches_oracle, assert_one_line_error, run_cli

# the kernels, as in this process (conftest): the NumPy twins' statistics may differ in the
# last bit, so a cache keeps the twins' and the kernels' apart
ENV = dict(
    os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__)), FASTFINITE_NUMPY_TWIN_MAX="0"
)
KW = dict(region_bytes=200)  # one chunk per region: the units read are the regions scanned


def _data(rows=120, cols=10, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[3 % rows, 1] = x[77 % rows, 6] = np.nan
    x[40 % rows, 2] = np.inf
    x[99 % rows, 0] = -np.inf
    return x


def _store(path, x, chunks=(10, 5), **kw):
    a = zarr.create_array(path, shape=x.shape, chunks=chunks, dtype=x.dtype, **kw)
    a[:] = x
    return a


def _same(got, path, **kw):
    """``got`` is the report of a full scan of ``path`` without a cache."""
    full = fastfinite.scan(path, **KW, **kw)
    assert got.to_dict() == full.to_dict()
    return full


def _units(rows: slice, cols: slice, chunks=(10, 5)):
    return sorted(
        (i, j)
        for i in range(rows.start // chunks[0], -(-rows.stop // chunks[0]))
        for j in range(cols.start // chunks[1], -(-cols.stop // chunks[1]))
    )


@pytest.mark.parametrize(
    "layout",
    [dict(zarr_format=3), dict(zarr_format=2), dict(zarr_format=3, shards=(20, 10))],
    ids=["v3", "v2", "sharded"],
)
def test_an_unchanged_store_is_recalled_whole(tmp_path, layout):
    x = _data()
    path = str(tmp_path / "x.zarr")
    _store(path, x, **layout)
    cache = str(tmp_path / "cache")
    first = fastfinite.scan(path, cache=cache, **KW)
    _same(first, path)
    assert_matches_oracle(first, x)
    assert first.changes.regions_recalled == 0 and first.changes.has_new  # all is new
    second = fastfinite.scan(path, cache=cache, **KW)
    _same(second, path)
    assert second.changes.regions_scanned == 0
    assert second.changes.rescanned == {path: []}
    assert not second.changes.has_new and not second.changes.new
    on_disk = sum(os.path.getsize(os.path.join(cache, f)) for f in os.listdir(cache))
    assert 0 < second.changes.cache_bytes and on_disk > 0


def test_rewritten_chunks_are_the_only_ones_read(tmp_path):
    x = _data()
    path = str(tmp_path / "x.zarr")
    a = _store(path, x)
    cache = str(tmp_path / "cache")
    fastfinite.scan(path, cache=cache, **KW)
    y = x.copy()
    y[50:60, 0:5] = 2.0
    y[55, 3] = np.nan  # new
    y[3, 1] = 0.0  # gone: chunk (0, 0) rewritten too
    a[50:60, 0:5] = y[50:60, 0:5]
    a[0:10, 0:5] = y[0:10, 0:5]
    r = fastfinite.scan(path, cache=cache, **KW)
    _same(r, path)
    assert_matches_oracle(r, y)
    assert r.changes.rescanned[path] == [(0, 0), (5, 0)]
    assert {(c.kind, c.where) for c in r.changes.new} == {("nan", (55, 3))}
    assert {(c.kind, c.where) for c in r.changes.gone} == {("nan", (3, 1))}
    assert r.changes.has_new


def test_appended_rows_extend_the_per_slice_statistics(tmp_path):
    x = _data(rows=95)  # the last chunk row is cut by the edge: rewritten by the append
    path = str(tmp_path / "x.zarr")
    a = _store(path, x)
    cache = str(tmp_path / "cache")
    for by in (0, -1):
        fastfinite.scan(path, cache=cache, by=by, **KW)
    more = _data(rows=30, seed=5)
    more[4, 4] = np.nan
    a.resize((125, 10))
    a[95:] = more
    y = np.concatenate([x, more])
    for by in (0, -1):
        fastfinite.scan(path, cache=cache, by=by, **KW)  # options changed: rebuilt
        r = fastfinite.scan(path, cache=cache, by=by, **KW)
        assert r.changes.regions_scanned == 0
    a.resize((135, 10))
    a[125:] = 1.0
    y = np.concatenate([y, np.ones((10, 10), np.float32)])
    r = fastfinite.scan(path, cache=cache, by=-1, **KW)
    _same(r, path, by=-1)
    assert r.changes.rescanned[path] == _units(slice(120, 135), slice(0, 10))
    assert np.array_equal(r.slices.nan, np.isnan(y).sum(axis=0))
    np.testing.assert_allclose(r.slices.mean, np.nanmean(np.where(np.isinf(y), np.nan, y), 0), 1e-5)


def test_a_deleted_chunk_is_a_new_missing_chunk(tmp_path):
    x = _data()
    path = str(tmp_path / "x.zarr")
    _store(path, x, fill_value=np.nan)
    cache = str(tmp_path / "cache")
    fastfinite.scan(path, cache=cache, **KW)
    os.remove(os.path.join(path, "c", "7", "1"))
    r = fastfinite.scan(path, cache=cache, **KW)
    _same(r, path)
    y = x.copy()
    y[70:80, 5:10] = np.nan
    assert_matches_oracle(r, y)
    assert r.changes.rescanned[path] == [(7, 1)]
    assert ("missing_chunk", (7, 1)) in {(c.kind, c.where) for c in r.changes.new}


@pytest.mark.parametrize(
    "option",
    [dict(cast=("float16",)), dict(by=0), dict(max_locations=1), dict(z_threshold=2.0)],
    ids=lambda d: next(iter(d)),
)
def test_other_options_rebuild_the_cache(tmp_path, option):
    x = _data()
    path = str(tmp_path / "x.zarr")
    _store(path, x)
    cache = str(tmp_path / "cache")
    fastfinite.scan(path, cache=cache, **KW)
    r = fastfinite.scan(path, cache=cache, **KW, **option)
    _same(r, path, **option)
    assert r.changes.regions_recalled == 0
    assert any("rebuilt" in n for n in r.changes.notes), r.changes.notes
    again = fastfinite.scan(path, cache=cache, **KW, **option)
    assert again.changes.regions_scanned == 0
    _same(again, path, **option)


def test_the_last_report_is_kept_per_options_and_only_when_complete(tmp_path):
    """``ScanCache.swap_report`` gives the report it replaces; a report of other options is
    no comparison, and says so; an incomplete report is not kept."""
    from fastfinite.cache.store import ScanCache

    cache = ScanCache(str(tmp_path / "c"))
    other = "the last cached report of it was made with other options"
    try:
        assert cache.swap_report("t", b"k1", "one") == (None, None)
        assert cache.swap_report("t", b"k1", None) == ("one", None)  # incomplete: not kept
        assert cache.swap_report("t", b"k1", "two") == ("one", None)
        assert cache.swap_report("t", b"k2", "three") == (None, other)
        assert cache.swap_report("t", b"k2", None) == ("three", None)
        assert cache.swap_report("u", b"k2", None) == (None, None)
    finally:
        cache.close()
    path = str(tmp_path / "x.zarr")
    _store(path, _data())
    fastfinite.scan(path, cache=str(tmp_path / "c2"), **KW)
    r = fastfinite.scan(path, cache=str(tmp_path / "c2"), cast=("float16",), **KW)
    assert r.changes.notes[:2] == ["no earlier scan to compare: all is new", other]
    assert "changed since the cached scan" in r.changes.notes[2]  # the member's own note


def test_two_scans_ending_at_once_each_compare_with_the_report_they_replace(tmp_path):
    """A scan whose report is written while another's write is under way waits for it and
    compares with that report, not the one both read before: no report goes unseen."""
    import threading

    from fastfinite.cache.store import ScanCache

    def second_scan():  # (a connection is used by the thread that made it)
        second = ScanCache(str(tmp_path / "c"))
        opened.set()
        go.wait(30)
        try:
            got.append(second.swap_report("t", b"k", "b"))
        finally:
            second.close()

    got: list = []
    opened, go = threading.Event(), threading.Event()
    first = ScanCache(str(tmp_path / "c"))
    try:
        first.swap_report("t", b"k", "old")
        waiting = threading.Thread(target=second_scan)
        waiting.start()
        opened.wait(30)
        first.db.execute("BEGIN IMMEDIATE")  # the other scan, mid-way through its write
        go.set()
        time.sleep(0.5)  # the second scan has asked for the lock by now
        first.db.execute("INSERT OR REPLACE INTO reports VALUES ('t', ?, 'a', 0)", (b"k",))
        first.db.execute("COMMIT")
        waiting.join(30)
        assert got == [("a", None)]
        assert first.swap_report("t", b"k", None) == ("b", None)
    finally:
        first.close()


def test_a_corrupt_cache_is_moved_aside_and_made_anew(tmp_path):
    x = _data()
    path = str(tmp_path / "x.zarr")
    _store(path, x)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / FILENAME).write_bytes(b"not a database, " * 100)
    with pytest.warns(UserWarning, match="not usable"):
        r = fastfinite.scan(path, cache=str(cache), **KW)
    _same(r, path)
    aside = [p for p in os.listdir(cache) if ".unusable-" in p]
    assert len(aside) == 1 and (cache / aside[0]).read_bytes().startswith(b"not a database")
    # a cache of another format version: not read, moved aside the same way
    db = sqlite3.connect(cache / FILENAME)
    db.execute("UPDATE meta SET value='fastfinite-cache/0' WHERE key='format'")
    db.commit()
    db.close()
    with pytest.warns(UserWarning, match="format"):
        r = fastfinite.scan(path, cache=str(cache), **KW)
    assert r.changes.regions_recalled == 0
    _same(r, path)


def test_a_garbled_entry_is_scanned_again_never_recalled(tmp_path):
    x = _data()
    path = str(tmp_path / "x.zarr")
    _store(path, x)
    cache = str(tmp_path / "cache")
    fastfinite.scan(path, cache=cache, **KW)
    db = sqlite3.connect(os.path.join(cache, FILENAME))
    db.execute("UPDATE nodes SET data = substr(data, 1, 40)")
    db.commit()
    db.close()
    with pytest.warns(UserWarning, match="cannot be read"):
        r = fastfinite.scan(path, cache=cache, **KW)
    assert r.changes.regions_recalled == 0
    _same(r, path)


def test_a_cache_path_that_is_a_file_or_data_in_memory_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("mine")
    with pytest.raises(InvalidArgumentError, match="is a file"):
        fastfinite.scan(np.zeros(3), cache=str(f))
    assert f.read_text() == "mine"
    with pytest.raises(InvalidArgumentError, match="files or stores"):
        fastfinite.scan(np.zeros(3), cache=str(tmp_path / "c"))
    with pytest.raises(InvalidArgumentError, match="fail_fast"):
        fastfinite.scan(np.zeros(3), cache=str(tmp_path / "c"), fail_fast=True)


def test_npy_and_hdf5_files_are_one_unit(tmp_path):
    h5py = pytest.importorskip("h5py")
    x = _data()
    npy, h5 = str(tmp_path / "x.npy"), str(tmp_path / "x.h5")
    np.save(npy, x)
    with h5py.File(h5, "w") as f:
        f.create_dataset("x", data=x, chunks=(10, 5))
    cache = str(tmp_path / "cache")
    for path in (npy, f"{h5}:/x"):
        first = fastfinite.scan(path, cache=cache, **KW)
        second = fastfinite.scan(path, cache=cache, **KW)
        assert second.changes.regions_scanned == 0 and first.changes.regions_recalled == 0
        assert second.to_dict() == first.to_dict() == fastfinite.scan(path, **KW).to_dict()
    y = x.copy()
    y[0, 0] = np.nan
    np.save(npy, y)
    r = fastfinite.scan(npy, cache=cache, **KW)
    assert r.changes.regions_recalled == 0 and r.nan == 3
    assert {(c.kind, c.where) for c in r.changes.new} == {("nan", (0, 0))}


def test_two_scans_at_once_share_the_cache(tmp_path):
    x = _data(rows=400)
    path = str(tmp_path / "x.zarr")
    _store(path, x)
    cache = str(tmp_path / "cache")
    code = f"import fastfinite, json; r = fastfinite.scan({path!r}, cache={cache!r}, region_bytes=4000); print(json.dumps(r.to_dict()))"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    full = fastfinite.scan(path, region_bytes=4000).to_dict()
    assert [json.loads(o) for o in outs] == [full, full]
    r = fastfinite.scan(path, cache=cache, region_bytes=4000)
    assert r.changes.regions_scanned == 0 and r.to_dict() == full


KILLED = textwrap.dedent(
    """
    import sys, time
    import fastfinite
    from fastfinite.sources.zarr import ZarrSource
    read = ZarrSource.read
    def slow(self, region):  # a slow disk: the scan is still running when it is killed
        time.sleep(0.05)
        return read(self, region)
    ZarrSource.read = slow
    fastfinite.scan(sys.argv[1], cache=sys.argv[2], region_bytes=200, workers=1)
    """
)


def test_a_scan_killed_mid_way_is_resumed(tmp_path):
    x = _data(rows=800)
    path = str(tmp_path / "x.zarr")
    _store(path, x)
    cache = str(tmp_path / "cache")
    proc = subprocess.Popen([sys.executable, "-c", KILLED, path, cache], env=ENV)
    db_file = os.path.join(cache, FILENAME)
    deadline = time.monotonic() + 120
    kept = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(db_file):
            try:
                with sqlite3.connect(db_file, timeout=5) as db:
                    kept = db.execute("SELECT count(*) FROM nodes WHERE level=0").fetchone()[0]
            except sqlite3.OperationalError:
                kept = 0
            if kept >= 10:
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL and kept >= 10
    r = fastfinite.scan(path, cache=cache, **KW)
    total = r.changes.regions_scanned + r.changes.regions_recalled
    assert r.changes.regions_recalled >= 10 and r.changes.regions_scanned > 0
    assert total == 160  # 800 x 10 float32 in chunks of 10 x 5, one a region
    _same(r, path)
    assert_matches_oracle(r, x)
    assert r.changes.old_name == ""  # the killed scan left no report to compare with


def test_a_dask_cluster_scan_writes_the_cache_and_the_local_engine_recalls_it(
    tmp_path, dask_client
):
    client = dask_client
    x = _data(rows=300)
    path = str(tmp_path / "x.zarr")
    a = _store(path, x)
    cache = str(tmp_path / "cache")
    r = fastfinite.scan(path, cache=cache, scheduler=client, **KW)
    _same(r, path)
    a[100:110, 5:10] = 0.0
    again = fastfinite.scan(path, cache=cache, scheduler=client, **KW)
    assert again.changes.rescanned[path] == [(10, 1)]
    _same(again, path)
    local = fastfinite.scan(path, cache=cache, **KW)
    assert local.changes.regions_scanned == 0
    _same(local, path)


def test_a_group_keeps_each_array(tmp_path):
    root = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    xs = {"a": _data(), "b/c": _data(seed=3)}
    for name, x in xs.items():
        arr = root.create_array(name, shape=x.shape, chunks=(10, 5), dtype=x.dtype)
        arr[:] = x
    path = str(tmp_path / "g.zarr")
    cache = str(tmp_path / "cache")
    fastfinite.scan(path, cache=cache, **KW)
    root["b/c"][0, 0] = np.nan
    r = fastfinite.scan(path, cache=cache, **KW)
    _same(r, path)
    assert r.changes.rescanned == {"a": [], "b/c": [(0, 0)]}
    assert {(c.kind, c.where, c.array) for c in r.changes.new} == {("nan", (0, 0), "b/c")}


def test_summaries_keep_their_bits_through_bytes(tmp_path):
    from fastfinite.compute.summarize import scan_region
    from fastfinite.engines.plan import make_plan

    x = _data()
    x[5, 5] = 1e-310  # subnormal: rescued statistics
    path = str(tmp_path / "x.zarr")
    _store(path, x)
    for by in (None, 0, (0, 1)):
        from fastfinite.options import scan_options

        member = next(make_plan(path, scan_options(by=by, region_bytes=4000)).members())
        for region in list(member.regions())[:3]:
            s = scan_region(member.source, region, member.spec)
            t = from_bytes(to_bytes(s))
            assert to_bytes(t) == to_bytes(s)
            assert (t.n, t.mean, t.std, t.min, t.max, t.total) == (
                s.n, s.mean, s.std, s.min, s.max, s.total
            )  # fmt: skip
            assert t.flagged == s.flagged
            assert [list(i) for i in t.loc_index] == [list(i) for i in s.loc_index]


def test_content_rewritten_within_a_clock_tick_is_seen(tmp_path):
    """A unit listed just after it was written is hashed; at the next scan, the same times
    with other bytes give another fingerprint, and the same bytes the same one."""
    from fastfinite.sources.chunked import ChunkGrid
    from fastfinite.sources.fingerprints import Fingerprints, file_fingerprint, file_hash

    unit = tmp_path / "0"
    unit.write_bytes(b"a" * 64)
    fp, h = file_fingerprint(str(unit), os.stat(unit), time.time_ns())
    assert h == file_hash(str(unit))  # racy: just written

    def listed(racy):
        return Fingerprints({(0,): fp}, ChunkGrid((4,), (4,)), racy=racy,
                            rehash=lambda c: file_hash(str(unit)))  # fmt: skip

    region = (slice(0, 4),)
    same = listed({})
    key = same.of(region)
    assert same.settle({fp: h}) == ([], [fp])  # checked, no longer racy: record dropped
    assert same.of(region) == key
    unit.write_bytes(b"b" * 64)  # the times a listing would see are taken as unchanged
    other = listed({})
    assert other.settle({fp: h}) == ([], [])
    assert other.of(region) != key
    now = listed({(0,): file_hash(str(unit))})
    assert now.settle({}) == ([(fp, file_hash(str(unit)))], [])


def test_the_command_line_fails_on_new_findings_only(tmp_path):
    x = _data()
    path = str(tmp_path / "x.zarr")
    a = _store(path, x)
    cache = str(tmp_path / "cache")

    def run(*more):
        return run_cli("scan", path, "--cache", cache, "--fail-on-new", *more)

    first = run()
    assert first.returncode == 1 and "all is new" in first.stdout  # nothing to compare with
    second = run("--json", str(tmp_path / "r.json"))
    assert second.returncode == 0, second.stdout  # the same problems, nothing new
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["changes"]["has_new"] is False and saved["nan"] == 2
    a[60, 0] = np.inf
    third = run()
    assert third.returncode == 1 and "posinf at (60, 0)" in third.stdout
    assert run("--fail-on", "nan").returncode == 0  # nothing new of that kind
    a[61, 0] = np.nan
    assert run("--fail-on", "nan").returncode == 1
    assert_one_line_error(run_cli("scan", path, "--fail-on-new"), "--cache")


def test_an_object_store_is_fingerprinted_by_etag(tmp_path, s3, s3_endpoint):
    """A real S3-compatible server (moto's, on 127.0.0.1): the listing's ETags and times
    tell which objects were rewritten; the re-scan reads only those."""
    x = _data()
    endpoint = s3_endpoint
    s3.make_bucket(endpoint, "cache")
    options = s3.storage_options(endpoint)
    url = "s3://cache/x.zarr"
    a = zarr.create_array(
        store=url, storage_options=options, shape=x.shape, chunks=(10, 5), dtype=x.dtype
    )
    a[:] = x
    cache = str(tmp_path / "cache")
    kw = dict(storage_options=options, cache=cache, **KW)
    first = fastfinite.scan(url, **kw)
    assert first.to_dict() == fastfinite.scan(url, storage_options=options, **KW).to_dict()
    second = fastfinite.scan(url, **kw)
    assert second.changes.regions_scanned == 0
    a[30:40, 5:10] = np.nan
    third = fastfinite.scan(url, **kw)
    assert third.changes.rescanned[url] == [(3, 1)]
    assert third.to_dict() == fastfinite.scan(url, storage_options=options, **KW).to_dict()
    assert third.nan == 2 + 50


@pytest.mark.parametrize("seed", range(4))
def test_a_cache_file_damaged_anywhere_is_never_read(tmp_path, seed):
    """4 KB of random bytes written over the cache file at a random place: the scan warns,
    moves the file aside and gives the full scan's report."""
    x = _data(rows=400)
    path = str(tmp_path / "x.zarr")
    _store(path, x)
    cache = str(tmp_path / "cache")
    fastfinite.scan(path, cache=cache, **KW)
    db = os.path.join(cache, FILENAME)
    rng = np.random.default_rng(seed)
    with open(db, "r+b") as f:
        f.seek(int(rng.integers(0, os.path.getsize(db) - 4096)))
        f.write(rng.bytes(4096))
    with pytest.warns(UserWarning, match="not usable|cannot be read"):
        r = fastfinite.scan(path, cache=cache, **KW)
    _same(r, path)
    assert r.changes.regions_recalled == 0
