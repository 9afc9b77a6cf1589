"""The readers as a hostile user meets them (issue 42, the readers' part): directories that
are not one store or dataset, HDF5 links (soft, external, dangling, looping), numpy masked
arrays, sharded Zarr arrays with chunks never written, netCDF times, and the errors of a
reader: each is the exact right answer, or an error of fastfinite naming the file, the
member and what is wrong (on the command line: exit 2 and one line on stderr).

Part: ``fastfinite/sources/``.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pytest
import zarr

import fastfinite
from fastfinite import InvalidArgumentError, SourceError
from fastfinite.sources import walk

from .helpers import assert_one_line_error, run_cli

h5py = pytest.importorskip("h5py")
pytest.importorskip("pyarrow")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*args, timeout=120, cwd=None):
    return run_cli("scan", *args, timeout=timeout, cwd=cwd)


def _parquet(path, **columns):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pd.DataFrame(columns).to_parquet(path)
    return str(path)


def _nan_npy(path):
    x = np.zeros(4)
    x[1] = np.nan
    np.save(path, x)
    return str(path)


# -- directories: one walker, one rule ---------------------------------------------------


@pytest.fixture
def mixed(tmp_path):
    """The issue's directory: a NaN .npy, a Zarr store with inf, one clean Parquet file."""
    d = tmp_path / "mixed"
    d.mkdir()
    _nan_npy(d / "a.npy")
    z = zarr.create_array(store=str(d / "sub" / "x.zarr"), shape=(4,), chunks=(2,), dtype="f8")
    z[:] = [0, np.inf, 0, 0]
    _parquet(d / "deep" / "deeper" / "t.parquet", a=[1.0, 2.0])
    return d


# issue 44 changed the rule: a directory of array files of several kinds is a shard set,
# each file scanned on its own (it was an error that named them); see test_shard_sets.py
def test_a_mixed_directory_is_a_set_of_its_array_files(mixed):
    r = fastfinite.scan(str(mixed))
    assert list(r.arrays) == ["a.npy", "deep/deeper/t.parquet/a", "sub/x.zarr"]
    assert (r.nan, r.posinf, r.count, r.skipped) == (1, 1, 3 + 2 + 3, {})


def test_a_mixed_directory_on_the_command_line(mixed):
    r = _cli(mixed)
    assert r.returncode == 1, r.stderr
    assert "a.npy" in r.stdout and "sub/x.zarr" in r.stdout and r.stderr == ""


def test_the_parquet_listing_and_the_open_path_share_the_walker(mixed):
    from fastfinite.sources.tables import open_parquet, parquet_files

    for call in (parquet_files, open_parquet):
        with pytest.raises(SourceError, match=r"1 \.npy file \(a\.npy\)"):
            call(str(mixed))


def test_an_empty_directory(tmp_path):
    (tmp_path / "e").mkdir()
    with pytest.raises(
        SourceError,
        match=r"e is not a Zarr store, a Parquet dataset or a set of array files: it is empty$",
    ):
        fastfinite.scan(str(tmp_path / "e"))


def test_a_directory_of_names_starting_with_dot_or_underscore(tmp_path):
    d = tmp_path / "h"
    d.mkdir()
    (d / "_SUCCESS").write_text("")
    _nan_npy(d / ".hidden.npy")
    with pytest.raises(SourceError, match="only names starting with . or _, which are not data"):
        fastfinite.scan(str(d))


def test_a_directory_of_files_that_are_no_arrays(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "README.md").write_text("hello")
    (d / "notes.txt").write_text("x" * 100)
    with pytest.raises(SourceError, match=r"it holds 2 other files \(README\.md, notes\.txt\)"):
        fastfinite.scan(str(d))


def test_a_parquet_dataset_is_scanned_whole_with_the_metadata_left_out(tmp_path):
    d = tmp_path / "ds"
    _parquet(d / "year=2023" / "part-0.parquet", v=[1.0, np.nan])
    _parquet(d / "year=2024" / "part-0.parquet", v=[np.inf, 2.0, np.nan])
    (d / "_SUCCESS").write_text("")
    (d / "_common_metadata").write_bytes(b"PAR1 metadata")
    (d / "year=2024" / ".part-0.parquet.crc").write_bytes(b"crc")
    r = fastfinite.scan(str(d))
    assert (r.nan, r.posinf, r.count, r.shape) == (2, 1, 2, (5, 1))
    assert [loc.index for loc in r.locations] == [(1, 0), (2, 0), (4, 0)]  # files in order


def test_a_hive_part_file_without_a_suffix_is_parquet_by_its_bytes(tmp_path):
    d = tmp_path / "hive"
    d.mkdir()
    pd.DataFrame({"v": [np.nan, 1.0]}).to_parquet(d / "000000_0")
    _parquet(d / "000001_0.parquet", v=[3.0])
    r = fastfinite.scan(str(d))
    assert (r.nan, r.count, r.shape) == (1, 2, (3, 1))


def test_a_file_without_a_suffix_that_is_not_parquet_is_named(tmp_path):
    d = tmp_path / "ds"
    _parquet(d / "a.parquet", v=[1.0])
    (d / "000001_0").write_bytes(b"not parquet at all")
    r = fastfinite.scan(str(d))  # not a Parquet dataset: a set, the stranger skipped
    assert list(r.arrays) == ["a.parquet/v"]
    assert r.skipped == {"000001_0": "not an array file (by its name)"}


def test_a_npy_without_a_suffix_is_named_by_its_bytes(tmp_path):
    d = tmp_path / "ds"
    _parquet(d / "a.parquet", v=[1.0])
    np.save(d / "x.npy", np.array([0.0, np.nan, 0.0]))
    os.rename(d / "x.npy", d / "x")
    r = fastfinite.scan(str(d))
    assert (list(r.arrays), r.nan) == (["a.parquet/v", "x"], 1)


def test_a_link_out_of_the_directory_is_never_followed(tmp_path):
    outside = tmp_path / "outside"
    _parquet(outside / "nan.parquet", v=[np.nan])
    d = tmp_path / "ds"
    _parquet(d / "a.parquet", v=[1.0])
    os.symlink(outside / "nan.parquet", d / "b.parquet")
    os.symlink(outside, d / "more")
    r = fastfinite.scan(str(d))  # a set: the links listed, never followed
    assert (list(r.arrays), r.nan) == (["a.parquet/v"], 0)
    why = "a symbolic link: never followed"
    assert r.skipped == {"b.parquet": why, "more": why}


def test_a_link_to_the_root_of_the_file_system_is_not_walked(tmp_path):
    d = tmp_path / "ds"
    _parquet(d / "a.parquet", v=[1.0])
    os.symlink("/", d / "root")
    start = time.time()
    assert fastfinite.scan(str(d)).skipped == {"root": "a symbolic link: never followed"}
    assert time.time() - start < 5


def test_a_link_loop_is_not_a_hang(tmp_path):
    d = tmp_path / "ds"
    _parquet(d / "a.parquet", v=[1.0])
    os.symlink(d, d / "again")
    assert list(fastfinite.scan(str(d)).skipped) == ["again"]


def test_a_zarr_store_inside_a_parquet_dataset(tmp_path):
    d = tmp_path / "ds"
    _parquet(d / "a.parquet", v=[1.0])
    _parquet(d / "b.parquet", v=[2.0])
    zarr.create_array(store=str(d / "inner" / "z.zarr"), data=np.array([np.nan]))
    r = fastfinite.scan(str(d))  # not one dataset: a set of two tables and a store
    assert (list(r.arrays), r.nan) == (["a.parquet/v", "b.parquet/v", "inner/z.zarr"], 1)


def test_a_directory_that_holds_one_zarr_store_is_a_set_of_one(tmp_path):
    zarr.create_array(store=str(tmp_path / "outer" / "x.zarr"), data=np.array([np.nan]))
    r = fastfinite.scan(str(tmp_path / "outer"))
    assert (list(r.arrays), r.nan) == (["x.zarr"], 1)
    assert fastfinite.scan(str(tmp_path / "outer" / "x.zarr")).nan == 1


def test_a_fifo_in_a_dataset_is_named_and_never_opened(tmp_path):
    d = tmp_path / "ds"
    _parquet(d / "a.parquet", v=[1.0])
    os.mkfifo(d / "pipe")
    start = time.time()
    assert fastfinite.scan(str(d)).skipped == {"pipe": "a FIFO, socket or device: not a file"}
    assert time.time() - start < 5


def test_a_spark_output_directory_named_parquet(tmp_path):
    d = tmp_path / "out.parquet"
    _parquet(d / "part-00000.snappy.parquet", v=[1.0, np.nan])
    _parquet(d / "part-00001.snappy.parquet", v=[np.nan])
    (d / "_SUCCESS").write_text("")
    assert fastfinite.scan(str(d)).nan == 2


def test_the_walk_stops_at_its_bound_and_says_so(tmp_path, monkeypatch):
    d = tmp_path / "many"
    for i in range(12):
        _parquet(d / f"p{i:02d}.parquet", v=[1.0])
    monkeypatch.setattr(walk, "MAX_ENTRIES", 10)
    with pytest.raises(SourceError, match="stopped looking after 10 files and directories"):
        fastfinite.scan(str(d))
    monkeypatch.setattr(walk, "MAX_ENTRIES", 12)
    assert fastfinite.scan(str(d)).count == 12  # at the bound: all of it


def test_the_walk_stops_at_its_depth(tmp_path, monkeypatch):
    deep = tmp_path / "d" / "a" / "b" / "c" / "e"
    _parquet(deep / "x.parquet", v=[1.0])
    monkeypatch.setattr(walk, "MAX_DEPTH", 3)
    with pytest.raises(SourceError, match=r"after 3 levels of directories \(a/b/c\)"):
        fastfinite.scan(str(tmp_path / "d"))


def test_scanning_the_root_of_the_file_system_errs_at_once():
    start = time.time()
    with pytest.raises(SourceError, match="/ is not a Zarr store, a Parquet dataset"):
        fastfinite.scan("/")
    assert time.time() - start < 30


# -- HDF5 links ---------------------------------------------------------------------------


@pytest.fixture
def linked(tmp_path):
    """f.h5 with a hard dataset, links to a NaN dataset in ext.h5 (a dataset and a group),
    dangling soft and external links, an alias and a loop."""
    d = tmp_path / "h5"
    d.mkdir()
    with h5py.File(d / "ext.h5", "w") as f:
        f["d"] = np.array([1.0, np.nan, 2.0])
        f.create_group("g")["e"] = np.array([np.inf])
        f["g"]["back"] = h5py.ExternalLink("f.h5", "/")  # a loop through two files
    with h5py.File(d / "f.h5", "w") as f:
        f["a"] = np.array([0.0, -np.inf])
        f["ext"] = h5py.ExternalLink("ext.h5", "/d")
        f["extg"] = h5py.ExternalLink("ext.h5", "/g")
        f["no_file"] = h5py.ExternalLink("nofile.h5", "/d")
        f["no_object"] = h5py.ExternalLink("ext.h5", "/nothing")
        f["dangling"] = h5py.SoftLink("/nothere")
        f["alias"] = h5py.SoftLink("/a")
        f["loop"] = h5py.SoftLink("/")
    return d


def test_an_external_link_to_nan_is_scanned(linked, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the link is found next to its file, not in the cwd
    r = fastfinite.scan(str(linked / "f.h5"))
    assert sorted(r.arrays) == ["/a", "/ext", "/extg/e"]
    assert (r.nan, r.posinf, r.neginf) == (1, 1, 1)
    assert [loc.index for loc in r.arrays["/ext"].locations] == [(1,)]
    assert r.arrays["/ext"].name == f"{linked / 'ext.h5'}:/d"


def test_dangling_links_are_listed_with_the_reason(linked):
    r = fastfinite.scan(str(linked / "f.h5"))
    assert r.skipped == {
        "/alias": "the same dataset as /a (scanned there)",
        "/dangling": "a soft link to /nothere, which does not exist",
        "/extg/back": "the same group as / (scanned there)",  # the loop through two files
        "/loop": "the same group as / (scanned there)",
        "/no_file": "an external link to nofile.h5:/d, which cannot be opened (can't open file)",
        "/no_object": (
            "an external link to ext.h5:/nothing, which cannot be opened "
            "(object 'nothing' doesn't exist)"
        ),
    }
    # the links that lead nowhere are findings of the group; second names are not
    assert [(f.kind, f.severity, f.message) for f in r.findings if f.array is None] == [
        ("missing_member", "warning", "/dangling: " + r.skipped["/dangling"]),
        ("unreadable_member", "error", "/no_file: " + r.skipped["/no_file"]),
        ("unreadable_member", "error", "/no_object: " + r.skipped["/no_object"]),
    ]


def test_a_dataset_path_through_an_external_link(linked):
    r = fastfinite.scan(f"{linked / 'f.h5'}:/ext")
    assert (r.nan, r.shape, r.locations[0].index) == (1, (3,), (1,))
    assert fastfinite.scan(f"{linked / 'f.h5'}:/extg/e").posinf == 1


@pytest.mark.parametrize(
    "link,words",
    [
        ("/dangling", "is a soft link to /nothere, which does not exist"),
        ("/no_file", "is an external link to nofile.h5:/d, which cannot be opened"),
        ("/no_object", "is an external link to ext.h5:/nothing"),
    ],
)
def test_a_dangling_link_asked_for_names_the_file_and_the_link(linked, link, words):
    with pytest.raises(SourceError) as e:
        fastfinite.scan(f"{linked / 'f.h5'}:{link}")
    assert str(e.value).startswith(f"{linked / 'f.h5'}:{link} {words}")


def test_a_dangling_link_on_the_command_line(linked):
    r = _cli(f"{linked / 'f.h5'}:/dangling")
    assert_one_line_error(r, "f.h5:/dangling", "soft link to /nothere")
    assert "KeyError" not in r.stderr


def test_a_missing_path_inside_a_file_is_still_named(linked):
    with pytest.raises(SourceError, match=r"no dataset '/nope/deeper' in .*f\.h5"):
        fastfinite.scan(f"{linked / 'f.h5'}:/nope/deeper")


def test_an_h5py_group_object_follows_its_links(linked):
    with h5py.File(linked / "f.h5", "r") as f:
        r = fastfinite.scan(f)
        assert (r.nan, r.posinf, sorted(r.arrays)) == (1, 1, ["/a", "/ext", "/extg/e"])
        assert "/dangling" in r.skipped


def test_a_soft_link_out_of_the_group_scanned(tmp_path):
    p = tmp_path / "s.h5"
    with h5py.File(p, "w") as f:
        f["outside"] = np.array([np.nan, np.nan])
        f.create_group("g")["own"] = np.zeros(2)
        f["g"]["l"] = h5py.SoftLink("/outside")
    r = fastfinite.scan(f"{p}:/g")
    assert (sorted(r.arrays), r.nan, r.skipped) == (["/g/l", "/g/own"], 2, {})


def test_a_file_of_dangling_links_only_is_not_clean(tmp_path):
    p = tmp_path / "d.h5"
    with h5py.File(p, "w") as f:
        f["x"] = h5py.SoftLink("/gone")
        f["y"] = h5py.ExternalLink("gone.h5", "/z")
    r = fastfinite.scan(str(p))
    assert sorted(r.skipped) == ["/x", "/y"]
    assert "nothing_scanned" in r.kinds_found() and not r.ok


def test_an_alias_counts_once(tmp_path):
    p = tmp_path / "a.h5"
    with h5py.File(p, "w") as f:
        f["z_data"] = np.array([np.nan])
        f["a_alias"] = h5py.SoftLink("/z_data")  # sorts first; the hard name is scanned
        f["hard_too"] = f["z_data"]
    r = fastfinite.scan(str(p))
    assert (list(r.arrays), r.nan) == (["/hard_too"], 1)
    assert r.skipped == {
        "/a_alias": "the same dataset as /hard_too (scanned there)",
        "/z_data": "the same dataset as /hard_too (scanned there)",
    }


# -- masked arrays -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f8", "f4", "f2", "c16", "i4", "u1", "bool"])
def test_a_masked_array_that_masks_something_is_refused(dtype):
    x = np.ma.masked_array(np.zeros(5, dtype), mask=[0, 1, 0, 1, 0])
    if x.dtype.kind in "fc":
        x.data[1] = np.nan  # a masked-out NaN
    before = (x.data.copy(), x.mask.copy())
    with pytest.raises(InvalidArgumentError) as e:
        fastfinite.scan(x)
    assert "masked array with 2 masked element(s) of 5" in str(e.value)
    assert "np.ma.filled" in str(e.value) and "x.compressed()" in str(e.value)
    np.testing.assert_array_equal(x.data, before[0])
    np.testing.assert_array_equal(x.mask, before[1])


def test_an_unmasked_nan_in_a_masked_array_that_masks_nothing_is_found():
    for m in (
        np.ma.masked_array([1.0, np.nan, 3.0]),
        np.ma.masked_array([1.0, np.nan, 3.0], mask=[0, 0, 0]),
    ):
        r = fastfinite.scan(m)
        assert (r.nan, r.locations[0].index, r.count, r.mean) == (1, (1,), 2, 2.0)


def test_an_unmasked_nan_beside_a_masked_element_is_no_half_answer():
    x = np.ma.masked_array([np.nan, 1.0, 5.0], mask=[0, 0, 1])
    with pytest.raises(InvalidArgumentError, match="1 masked element"):
        fastfinite.scan(x)
    assert fastfinite.scan(np.ma.filled(x, 0.0)).nan == 1  # what the message proposes
    assert fastfinite.scan(x.compressed()).nan == 1


def test_a_2d_masked_array_and_assert_finite():
    x = np.ma.masked_invalid(np.array([[1.0, np.nan], [np.inf, 2.0]]))
    with pytest.raises(InvalidArgumentError, match="2 masked element"):
        fastfinite.assert_finite(x)


def test_a_dask_array_of_masked_blocks_is_refused():
    da = pytest.importorskip("dask.array")
    x = da.ma.masked_equal(da.from_array(np.array([1.0, 2.0, np.nan, 4.0]), chunks=2), 2.0)
    with pytest.raises(InvalidArgumentError, match=r"the block at \(0,\) of dask array is a numpy"):
        fastfinite.scan(x)


def test_a_masked_batch_in_the_guard_is_refused():
    x = np.ma.masked_array([1.0, np.nan], mask=[0, 1])
    with pytest.raises(InvalidArgumentError, match=r"batch 0, element 0 \('x'\) is a numpy masked"):
        list(fastfinite.guard([{"x": x}]))


# -- sharded Zarr: chunks never written inside shards --------------------------------------


def _pair(tmp_path, shape, chunks, shards, writes, fill=np.nan):
    """The same writes to a sharded and an unsharded array."""
    out = []
    for name, kw in (("s", {"shards": shards}), ("u", {})):
        a = zarr.create_array(
            store=str(tmp_path / f"{name}.zarr"), shape=shape, chunks=chunks, dtype="f8",
            fill_value=fill, **kw,
        )  # fmt: skip
        for box, value in writes:
            a[box] = value
        out.append(str(tmp_path / f"{name}.zarr"))
    return out


def _missing(r):
    return r.missing_chunks, [f.where for f in r.findings if f.kind == "missing_chunk"], r.chunks


@pytest.mark.parametrize(
    "shape,chunks,shards",
    [((8, 8), (2, 2), (4, 4)), ((10, 7), (2, 2), (4, 4)), ((12,), (3,), (6,))],
)
def test_a_sharded_array_reports_its_missing_chunks_as_unsharded(tmp_path, shape, chunks, shards):
    writes = [
        (tuple(slice(0, c) for c in chunks), 1.0),
        (tuple(slice(s - 1, s) for s in shape), np.nan),
    ]
    sharded, plain = _pair(tmp_path, shape, chunks, shards, writes)
    rs, ru = fastfinite.scan(sharded), fastfinite.scan(plain)
    assert _missing(rs) == _missing(ru)
    assert rs.missing_chunks > 0 and rs.nan == ru.nan
    assert all(f.message.startswith("chunk (") for f in rs.findings if f.kind == "missing_chunk")


def test_the_issue_case_three_chunks_never_written(tmp_path):
    writes = [((slice(0, 2),), 1.0)]  # one of the 4 chunks of the one shard
    sharded, plain = _pair(tmp_path, (8,), (2,), (8,), writes)
    r = fastfinite.scan(sharded)
    assert (r.missing_chunks, r.nan) == (3, 6)
    assert [f.where for f in r.findings] == [(1,), (2,), (3,)]
    assert _missing(r) == _missing(fastfinite.scan(plain))


def test_a_finite_fill_value_still_counts_missing_chunks(tmp_path):
    writes = [((slice(0, 2), slice(0, 2)), 5.0)]
    sharded, plain = _pair(tmp_path, (4, 4), (2, 2), (4, 4), writes, fill=0.0)
    r = fastfinite.scan(sharded)
    assert (r.missing_chunks, r.nan, r.count) == (3, 0, 16)
    assert _missing(r) == _missing(fastfinite.scan(plain))


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_sharded_missing_chunks_on_a_dask_graph(tmp_path, scheduler):
    writes = [((slice(0, 2), slice(0, 4)), 1.0), ((slice(6, 8), slice(6, 8)), 2.0)]
    sharded, plain = _pair(tmp_path, (8, 8), (2, 2), (4, 4), writes)
    assert _missing(fastfinite.scan(sharded, scheduler=scheduler)) == _missing(
        fastfinite.scan(plain)
    )


def test_sharded_missing_chunks_with_a_cache(tmp_path):
    writes = [((slice(0, 2), slice(0, 4)), 1.0)]
    sharded, plain = _pair(tmp_path, (8, 8), (2, 2), (4, 4), writes)
    want = _missing(fastfinite.scan(plain))
    cache = str(tmp_path / "cache")
    first = fastfinite.scan(sharded, cache=cache)
    second = fastfinite.scan(sharded, cache=cache)
    assert _missing(first) == _missing(second) == want
    assert second.changes.regions_scanned == 0


def test_a_sharded_array_in_memory(tmp_path):
    a = zarr.create_array(
        store={}, shape=(6,), chunks=(1,), shards=(3,), dtype="f4", fill_value=np.nan
    )
    a[0] = 1.0
    r = fastfinite.scan(a)
    assert (r.missing_chunks, [f.where for f in r.findings]) == (5, [(1,), (2,), (3,), (4,), (5,)])


def test_a_corrupt_shard_is_unreadable_not_missing(tmp_path):
    sharded, _ = _pair(tmp_path, (8,), (2,), (4,), [((slice(0, 8),), 1.0)])
    with open(os.path.join(sharded, "c", "1"), "wb") as f:
        f.write(b"\x00 not a shard \xff" * 8)
    r = fastfinite.scan(sharded, on_error="report")
    assert r.missing_chunks == 0
    assert [(f.kind, f.where) for f in r.findings] == [
        ("unreadable_chunk", (2,)),
        ("unreadable_chunk", (3,)),
    ]
    assert r.count == 4


# -- xarray: labels as the user sees them -------------------------------------------------


def test_netcdf_times_are_datetimes_not_integers(tmp_path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("scipy")
    times = pd.to_datetime(["2024-01-20", "2024-01-21"])
    ds = xr.Dataset({"v": (("time",), np.array([1.0, np.nan]))}, coords={"time": times})
    ds.to_netcdf(tmp_path / "t.nc", engine="scipy")
    with xr.open_dataset(tmp_path / "t.nc", engine="scipy") as opened:
        r = fastfinite.scan(opened)
    label = r.arrays["v"].locations[0].labels["time"]
    assert label == np.datetime64("2024-01-21T00:00:00") and isinstance(label, np.datetime64)
    got = json.loads(r.to_json())["arrays"]["v"]["locations"][0]["labels"]["time"]
    assert got.startswith("2024-01-21T00:00:00")


def test_timedelta_integer_and_text_coordinates(tmp_path):
    xr = pytest.importorskip("xarray")
    da = xr.DataArray(
        np.array([[0.0, np.nan], [1.0, 2.0]]), dims=("lag", "name"),
        coords={"lag": np.array([1, 2], "timedelta64[ns]"), "name": ["a", "b"]},
    )  # fmt: skip
    labels = fastfinite.scan(da).locations[0].labels
    assert labels == {"lag": np.timedelta64(1, "ns"), "name": "b"}
    assert type(labels["name"]) is str
    ints = xr.DataArray(np.array([np.nan]), dims="i", coords={"i": np.array([7], "int64")})
    label = fastfinite.scan(ints).locations[0].labels["i"]
    assert label == 7 and type(label) is int


# -- errors that name what failed -----------------------------------------------------------


def _npy_header(text: str) -> bytes:
    h = text.encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h


GOOD = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"


@pytest.mark.parametrize(
    "content,words",
    [
        (_npy_header("{'descr': '<f8', 'fortr"), "not a valid .npy header"),
        (_npy_header("{'descr': '<f8', 'shape': ((((3,), }\n"), "not a valid .npy header"),
        (_npy_header("{'descr': '<f8' 'fortran_order': False}\n"), "Cannot parse header"),
        (_npy_header(GOOD)[:30], "expected"),
        (_npy_header("[1, 2, 3]\n"), "Header is not a dictionary"),
        (_npy_header("{'descr': 'zz', 'fortran_order': False, 'shape': (3,), }\n"), "'zz'"),
        (_npy_header(GOOD.replace("(3,)", "(-3,)") + "\n"), "negative dimensions"),
        (_npy_header(GOOD + "\n") + b"\x00" * 8, "shorter than its header says"),
        (b"\x93NUMPY\x01\x00\x10", "EOF"),
    ],
    ids=[
        "cut in the dict",
        "unbalanced",
        "no comma",
        "cut header",
        "a list",
        "bad descr",
        "negative shape",
        "short body",
        "short length",
    ],  # fmt: skip
)
def test_a_corrupt_npy_names_the_file(tmp_path, content, words):
    p = tmp_path / "bad.npy"
    p.write_bytes(content)
    with pytest.raises(SourceError) as e:
        fastfinite.scan(str(p))
    assert str(e.value).startswith(f"{p} is not a valid .npy file: ") and words in str(e.value)


def test_a_header_cut_in_its_dict_on_the_command_line(tmp_path):
    (tmp_path / "cut.npy").write_bytes(_npy_header("{'descr': '<f8', 'fortr"))
    r = _cli(tmp_path / "cut.npy")
    assert_one_line_error(r, "cut.npy is not a valid .npy file", "not a valid .npy header")
    assert "TokenError" not in r.stderr


@pytest.mark.parametrize("shape", [(2**62,), (2**40, 2**40)])
def test_an_impossible_shape_is_one_error_and_no_warning(tmp_path, shape):
    p = tmp_path / "big.npy"
    p.write_bytes(_npy_header(f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would raise here instead of the error
        with pytest.raises(
            SourceError, match=r"big\.npy is not a valid \.npy file: array is too big"
        ):
            fastfinite.scan(str(p))
    r = _cli(p)
    assert_one_line_error(r, "big.npy", "too big")
    assert "RuntimeWarning" not in r.stderr


@pytest.mark.parametrize("by", [None, 0])
def test_an_int_beyond_float64_in_an_object_column_names_column_and_row(by):
    df = pd.DataFrame({"ok": [1.0, 2.0, 3.0], "big": pd.Series([1, 2, 10**400], dtype=object)})
    df.index = ["x", "y", "z"]
    with pytest.raises(SourceError) as e:
        fastfinite.scan(df, by=by)
    assert "column 'big', row 'z' holds an int of about 10**400, beyond float64" in str(e.value)


def test_a_negative_int_beyond_float64_in_a_series():
    s = pd.Series([-(10**309), 0], dtype=object, name="s")
    with pytest.raises(SourceError, match=r"column 's', row 0 holds an int of about -10\*\*309"):
        fastfinite.scan(s)


class _Odd:
    def __float__(self):
        raise RuntimeError("a reader's own failure")


def test_a_reader_error_in_a_member_names_the_input_and_the_member():
    df = pd.DataFrame({"fine": [1.0, 2.0], "odd": pd.Series([_Odd(), 1.0], dtype=object)})
    with pytest.raises(SourceError) as e:
        fastfinite.scan(df)
    assert str(e.value) == (
        "cannot read DataFrame, member odd: RuntimeError: a reader's own failure"
    )
    assert isinstance(e.value.__cause__, RuntimeError)  # the reader's error is kept


# -- S3: a bucket that does not exist ------------------------------------------------------


def test_a_missing_bucket_is_named(s3, s3_endpoint):
    options = s3.storage_options(s3_endpoint)
    with pytest.raises(
        SourceError, match="the bucket 'nobucket' of s3://nobucket/a.zarr does not exist"
    ):
        fastfinite.scan("s3://nobucket/a.zarr", storage_options=options)
    with pytest.raises(SourceError, match=r"no Zarr array or group at s3://bkt/a\.zarr"):
        fastfinite.scan("s3://bkt/a.zarr", storage_options=options)  # the bucket is there


def test_a_missing_bucket_leaves_nothing_on_stderr(s3, s3_endpoint):
    options = s3.storage_options(s3_endpoint)
    code = (
        "import fastfinite, json, sys\n"
        "try:\n"
        f"    fastfinite.scan('s3://nobucket/a.zarr', storage_options=json.loads({json.dumps(json.dumps(options))}))\n"
        "except fastfinite.SourceError as e:\n"
        "    print(e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )  # fmt: skip
    assert "the bucket 'nobucket'" in r.stdout
    assert r.stderr == "", r.stderr


def test_a_missing_bucket_on_the_command_line(s3_endpoint):
    endpoint = s3_endpoint
    r = _cli(
        "s3://nobucket/a.zarr", "--storage-option", f"client_kwargs.endpoint_url={endpoint}",
        "--storage-option", "client_kwargs.region_name=us-east-1",
        "--storage-option", "key=testing", "--storage-option", "secret=testing",
    )  # fmt: skip
    assert_one_line_error(r, "the bucket 'nobucket' of s3://nobucket/a.zarr does not exist")


def test_a_link_named_by_the_user_is_followed_but_none_inside(tmp_path):
    d = tmp_path / "ds"
    _parquet(d / "a.parquet", v=[np.nan, 1.0])
    os.symlink(d, tmp_path / "latest")  # the user names the link: it is what they mean
    assert fastfinite.scan(str(tmp_path / "latest")).nan == 1


def _cli_case(tmp_path, case):
    if case == "empty directory":
        (tmp_path / "e").mkdir()
        return tmp_path / "e", ("e is not a Zarr store, a Parquet dataset or a set of array",)
    if case == "directory of text":
        (tmp_path / "t").mkdir()
        (tmp_path / "t" / "a.csv").write_text("1,2\n")
        return tmp_path / "t", ("1 other file (a.csv)",)
    if case == "link in a directory of text":  # a link is never followed, even to data
        _parquet(tmp_path / "o" / "x.parquet", v=[np.nan])
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "a.txt").write_text("1")
        os.symlink(tmp_path / "o" / "x.parquet", tmp_path / "d" / "x.parquet")
        return tmp_path / "d", ("1 symbolic link (never followed) (x.parquet)",)
    p = tmp_path / "f.h5"
    with h5py.File(p, "w") as f:
        f["gone"] = h5py.ExternalLink("missing.h5", "/x")
    return f"{p}:/gone", ("f.h5:/gone is an external link to missing.h5:/x",)


@pytest.mark.parametrize(
    "case",
    ["empty directory", "directory of text", "link in a directory of text", "dangling external"],
)
def test_reader_errors_on_the_command_line_are_one_line(tmp_path, case):
    target, words = _cli_case(tmp_path, case)
    r = _cli(target)
    assert_one_line_error(r, *words)
    assert r.stdout == ""
