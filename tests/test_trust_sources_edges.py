"""The readers' edges a review of issue 42 found (each test failed before its fix): members
of a group that cannot be reached (HDF5 links that lead nowhere, files in a Zarr store that
are not part of it) are findings, not only lines in ``skipped``; groups reached through
external and soft links are named by the path asked for and by their real names; masked
blocks of a dask array; HTTP stores that are not there; sharded arrays' rescanned units; a
cache inside the input.

Part: ``fastfinite/sources/``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import fastfinite
from fastfinite import ScanReport

from .helpers import assert_one_line_error, run_cli

h5py = pytest.importorskip("h5py")


def _scan_cli(*args):
    return run_cli("scan", *args)


# -- HDF5 members that cannot be reached are findings ---------------------------------------


@pytest.fixture
def moved(tmp_path):
    """The review's file: ``ext`` links to a NaN dataset in e.h5, which was then renamed."""
    with h5py.File(tmp_path / "e.h5", "w") as f:
        f["d"] = np.array([np.nan])
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["a"] = np.zeros(3)
        f["ext"] = h5py.ExternalLink("e.h5", "/d")
    os.rename(tmp_path / "e.h5", tmp_path / "e_moved.h5")
    return tmp_path / "f.h5"


def test_an_external_file_that_cannot_be_opened_is_an_error(moved):
    r = fastfinite.scan(str(moved))
    assert not r.ok and not r.clean
    assert {"unreadable_member", "error"} <= r.kinds_found()
    why = "an external link to e.h5:/d, which cannot be opened (can't open file)"
    assert r.skipped == {"/ext": why}  # still listed
    (f,) = r.findings
    assert (f.kind, f.severity, f.where, f.array) == ("unreadable_member", "error", (), None)
    assert f.message == f"/ext: {why}"
    assert r.severity_counts() == {"error": {"unreadable_member": 1}}


def test_an_external_file_that_cannot_be_opened_fails_the_command_line(moved):
    for flags in ((), ("--fail-on", "warning"), ("--fail-on", "unreadable_member")):
        r = _scan_cli(moved, *flags)
        assert r.returncode == 1, (flags, r.stdout, r.stderr)
        assert "errors: unreadable_member 1" in r.stdout
        assert "unreadable_member: /ext: an external link to e.h5:/d" in r.stdout
    assert _scan_cli(moved, "--fail-on", "nonfinite").returncode == 0  # asked for NaN only


def test_the_external_file_back_in_place_is_scanned(moved):
    os.rename(moved.parent / "e_moved.h5", moved.parent / "e.h5")
    r = fastfinite.scan(str(moved))
    assert (r.nan, r.skipped, r.findings) == (1, {}, [])


@pytest.fixture
def dangling(tmp_path):
    p = tmp_path / "s.h5"
    with h5py.File(p, "w") as f:
        f["a"] = np.ones(2)
        f["x"] = h5py.SoftLink("/gone")
    return p


def test_a_soft_link_to_nothing_is_a_warning(dangling):
    r = fastfinite.scan(str(dangling))
    assert r.ok and not r.clean
    assert r.kinds_found() == {"missing_member", "warning"}
    assert r.skipped == {"/x": "a soft link to /gone, which does not exist"}
    assert [(f.kind, f.severity) for f in r.findings] == [("missing_member", "warning")]


def test_a_soft_link_to_nothing_on_the_command_line(dangling):
    r = _scan_cli(dangling)
    assert r.returncode == 0 and "WARNINGS" in r.stdout and "warnings: missing_member 1" in r.stdout
    assert "missing_member: /x: a soft link to /gone, which does not exist" in r.stdout
    for kinds in ("warning", "missing_member"):
        assert _scan_cli(dangling, "--fail-on", kinds).returncode == 1


def _kinds(path, **kw):
    r = fastfinite.scan(str(path), **kw)
    return {f.message.split(":")[0]: f.kind for f in r.findings if f.array is None}


def test_what_a_soft_link_leads_to_decides_its_kind(tmp_path):
    p = tmp_path / "k.h5"
    with h5py.File(p, "w") as f:
        f["g/d"] = np.ones(1)
        f["ext"] = h5py.ExternalLink("nofile.h5", "/g")
        f["through_ext"] = h5py.SoftLink("/ext/d")  # into a file not found here: unchecked
        f["chain"] = h5py.SoftLink("/chain2")  # to a soft link to nothing
        f["chain2"] = h5py.SoftLink("/gone")
        f["g"]["rel"] = h5py.SoftLink("nothere")  # relative to its group
        f["g"]["rel_ok"] = h5py.SoftLink("d")  # a second name of /g/d
        f["past_data"] = h5py.SoftLink("/g/d/x")  # a dataset on the way: names nothing
        f["loop1"] = h5py.SoftLink("/loop2")  # soft links in a circle
        f["loop2"] = h5py.SoftLink("/loop1")
    assert _kinds(p) == {
        "/chain": "missing_member",
        "/chain2": "missing_member",
        "/ext": "unreadable_member",
        "/g/rel": "missing_member",
        "/loop1": "unreadable_member",
        "/loop2": "unreadable_member",
        "/past_data": "missing_member",
        "/through_ext": "unreadable_member",
    }
    skipped = fastfinite.scan(str(p)).skipped
    assert skipped["/g/rel_ok"] == "the same dataset as /g/d (scanned there)"
    assert skipped["/through_ext"] == (
        "a soft link to /ext/d, which cannot be followed (can't open file)"
    )
    assert skipped["/loop1"] == (
        "a soft link to /loop2, which cannot be followed "
        "(Special link traversal failed (too many links))"
    )
    with pytest.raises(fastfinite.SourceError, match="k.h5:/loop1 is a soft link to /loop2, which"):
        fastfinite.scan(f"{p}:/loop1")


def test_members_skipped_on_purpose_are_no_finding(tmp_path):
    p = tmp_path / "t.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.ones(3)
        f["names"] = np.array([b"a", b"b"])  # text: not numbers
        f["again"] = h5py.SoftLink("/x")  # a second name
    r = fastfinite.scan(str(p))
    assert r.clean and r.findings == [] and sorted(r.skipped) == ["/again", "/names"]


@pytest.mark.parametrize(
    "kw", [dict(scheduler="synchronous"), dict(cache="CACHE")], ids=["dask", "cache"]
)
def test_every_engine_reports_the_members(moved, kw, tmp_path):
    if "cache" in kw:
        kw = dict(cache=str(tmp_path / "cache"))
    r = fastfinite.scan(str(moved), **kw)
    assert [f.kind for f in r.findings] == ["unreadable_member"] and "/ext" in r.skipped


def test_the_findings_survive_json_and_merge(moved, dangling):
    a, b = fastfinite.scan(str(moved)), fastfinite.scan(str(dangling))
    back = ScanReport.from_json(a.to_json())
    assert back.findings == a.findings and not back.ok and back.skipped == a.skipped
    merged = fastfinite.merge_reports([a, b])
    assert {"unreadable_member", "missing_member"} <= merged.kinds_found()
    assert merged.severity_counts() == {
        "error": {"unreadable_member": 1},
        "warning": {"missing_member": 1},
    }


# -- HDF5 groups: the path asked for, the real names ---------------------------------------


def test_a_group_through_an_external_link_is_named_by_the_path_asked(tmp_path):
    with h5py.File(tmp_path / "x2.h5", "w") as f:
        f["g/e"] = np.array([np.inf])
    with h5py.File(tmp_path / "x1.h5", "w") as f:
        f["extg"] = h5py.ExternalLink("x2.h5", "/g")
        f["g/e"] = np.array([0.0])  # the name the other file's group has, here clean
    for asked in ("/extg", "/extg/", "extg"):
        r = fastfinite.scan(f"{tmp_path / 'x1.h5'}:{asked}")
        assert (list(r.arrays), r.posinf) == (["/extg/e"], 1), asked
        assert r.locations[0].array == "/extg/e"
        assert r.arrays["/extg/e"].name == f"{tmp_path / 'x2.h5'}:/g/e"  # where it is read
    r = _scan_cli(f"{tmp_path / 'x1.h5'}:/extg")
    assert r.returncode == 1 and "[/extg/e]" in r.stdout and "[/g/e]" not in r.stdout


def test_a_group_through_a_soft_link_is_named_by_the_path_asked(tmp_path):
    p = tmp_path / "s.h5"
    with h5py.File(p, "w") as f:
        f["z/ds"] = np.array([np.nan])
        f["s"] = h5py.SoftLink("/z")
    assert list(fastfinite.scan(f"{p}:/s").arrays) == ["/s/ds"]


def test_a_soft_link_to_a_group_does_not_hide_its_real_name(tmp_path):
    p = tmp_path / "r.h5"
    with h5py.File(p, "w") as f:
        f["z/ds"] = np.array([np.nan, 1.0])
        f["a_link"] = h5py.SoftLink("/z")  # sorts first
        f["b_dl"] = h5py.SoftLink("/z/ds")
    r = fastfinite.scan(str(p))
    assert (list(r.arrays), r.nan, r.locations[0].array) == (["/z/ds"], 1, "/z/ds")
    assert r.skipped == {
        "/a_link": "the same group as /z (scanned there)",
        "/b_dl": "the same dataset as /z/ds (scanned there)",
    }
    assert r.findings == []  # second names are no finding


def test_hard_names_win_at_any_depth(tmp_path):
    p = tmp_path / "d.h5"
    with h5py.File(p, "w") as f:
        f["a/b/c/ds"] = np.array([np.inf])
        f["0"] = h5py.SoftLink("/a/b")  # a shorter soft name, sorted first
        f["a/0"] = h5py.SoftLink("/a/b/c/ds")
        f["g1/x"] = np.ones(2)
        f["g2"] = f["g1"]  # a second hard link to one group: its first name wins
    r = fastfinite.scan(str(p))
    assert sorted(r.arrays) == ["/a/b/c/ds", "/g1/x"]
    assert r.skipped == {
        "/0": "the same group as /a/b (scanned there)",
        "/a/0": "the same dataset as /a/b/c/ds (scanned there)",
        "/g2": "the same group as /g1 (scanned there)",
    }


def test_a_soft_link_into_an_external_file_group(tmp_path):
    with h5py.File(tmp_path / "o.h5", "w") as f:
        f["g/v"] = np.array([np.nan])
    p = tmp_path / "m.h5"
    with h5py.File(p, "w") as f:
        f["ext"] = h5py.ExternalLink("o.h5", "/g")
        f["a_soft"] = h5py.SoftLink("/ext")  # sorts first, but soft: the external name wins
    r = fastfinite.scan(str(p))
    assert (list(r.arrays), r.nan) == (["/ext/v"], 1)
    assert r.skipped == {"/a_soft": "the same group as /ext (scanned there)"}


# -- dask arrays: every computed block is checked for a mask -------------------------------


def _masked_behind_plain_meta(values, chunks=1):
    """A dask array whose ``_meta`` is a plain ndarray and whose blocks are masked arrays."""
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.array(values), chunks=chunks)
    return x.map_blocks(np.ma.masked_invalid, meta=np.array((), "f8"))


@pytest.mark.parametrize("scheduler", [None, "synchronous", "threads"])
def test_masked_blocks_behind_a_plain_meta_are_refused(scheduler):
    x = _masked_behind_plain_meta([1.0, np.nan])
    with pytest.raises(fastfinite.InvalidArgumentError) as e:
        fastfinite.scan(x, scheduler=scheduler)
    assert str(e.value).startswith(
        "the block at (1,) of dask array is a numpy masked array with 1 masked element(s) of 1"
    )
    assert "da.ma.filled(x, value)" in str(e.value) and "da.ma.getdata(x)" in str(e.value)


def test_masked_blocks_on_a_cluster_are_refused(local_cluster):
    distributed = pytest.importorskip("distributed")
    x = _masked_behind_plain_meta([1.0, 2.0, np.nan, 4.0], chunks=2)
    with local_cluster(workers=1) as cluster, distributed.Client(cluster) as client:
        with pytest.raises(fastfinite.InvalidArgumentError, match=r"block at \(2,\) of dask array"):
            fastfinite.scan(x, scheduler=client)


def test_masked_blocks_that_mask_nothing_are_their_values():
    da = pytest.importorskip("dask.array")
    x = da.ma.masked_invalid(da.from_array(np.array([1.0, 2.0, np.inf]), chunks=2))
    with pytest.raises(fastfinite.InvalidArgumentError, match=r"block at \(2,\)"):
        fastfinite.scan(x)  # the masked_invalid _meta is no error by itself: a block is
    r = fastfinite.scan(da.ma.masked_invalid(da.from_array(np.array([1.0, 2.0, 3.0]), chunks=2)))
    assert (r.nan, r.count, r.sum) == (0, 3, 6.0)


def test_localize_reads_masked_blocks_through_the_same_check():
    da = pytest.importorskip("dask.array")
    report = fastfinite.scan(da.from_array(np.array([np.nan, 1.0]), chunks=1))
    with pytest.raises(fastfinite.InvalidArgumentError, match=r"block at \(0,\) of dask array"):
        fastfinite.localize(_masked_behind_plain_meta([np.nan, 1.0]), report)


# -- HTTP stores: no bucket to blame ------------------------------------------------------


@pytest.fixture(scope="module")
def http_root(tmp_path_factory):
    """``python -m http.server`` serving a folder that holds one Zarr store, ``x.zarr``;
    yields (folder, base URL) and stops the server by its process id."""
    import subprocess
    import sys
    import time
    import urllib.request

    zarr = pytest.importorskip("zarr")
    pytest.importorskip("aiohttp")
    root = tmp_path_factory.mktemp("http")
    a = zarr.create_array(store=str(root / "x.zarr"), shape=(4,), chunks=(2,), dtype="f8")
    a[:] = [1.0, np.nan, 3.0, 4.0]
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).close()
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "http.server did not start"
                time.sleep(0.1)
        yield root, url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_http_store_that_is_not_there_blames_no_bucket(http_root):
    _, url = http_root
    with pytest.raises(fastfinite.SourceError) as e:
        fastfinite.scan(f"{url}/nothing.zarr")
    assert str(e.value) == (
        f"no Zarr array or group at {url}/nothing.zarr: the server has no zarr.json, .zgroup "
        "or .zarray at that URL"
    )
    r = _scan_cli(f"{url}/nothing.zarr/x")
    assert_one_line_error(r, f"no Zarr array or group at {url}/nothing.zarr/x: the server has")
    assert "bucket" not in r.stderr


def test_an_http_store_that_is_there_is_scanned(http_root):
    _, url = http_root
    r = fastfinite.scan(f"{url}/x.zarr")
    assert (r.nan, r.count, r.locations[0].index) == (1, 3, (1,))


# -- Zarr stores holding files that are not part of them -----------------------------------


def _group(path, values=(1.0, 2.0, 3.0), **kw):
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(path), mode="w", **kw)
    g.create_array("x", shape=(len(values),), chunks=(2,), dtype="f8")[:] = values
    return g


def _with_strays(path):
    """The review's store: a clean array beside a NaN .npy and an inf Parquet file."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    _group(path)
    np.save(path / "stray.npy", [np.nan])
    pd.DataFrame({"v": [np.inf]}).to_parquet(path / "t.parquet")
    return path


STRAYS = {
    "stray.npy": "a .npy file, not part of the Zarr store",
    "t.parquet": "a Parquet file, not part of the Zarr store",
}


def test_files_in_a_zarr_store_that_are_not_part_of_it_are_listed_and_found(tmp_path):
    import warnings

    zg = _with_strays(tmp_path / "zg")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # zarr's "not recognized" warning stays inside
        r = fastfinite.scan(str(zg))
    assert (list(r.arrays), r.nan, r.posinf) == (["x"], 0, 0)
    assert r.ok and not r.clean and r.skipped == STRAYS
    assert r.kinds_found() == {"stray_file", "warning"}
    assert [(f.kind, f.message) for f in r.findings] == [
        ("stray_file", "stray.npy: a .npy file, not part of the Zarr store"),
        ("stray_file", "t.parquet: a Parquet file, not part of the Zarr store"),
    ]


def test_the_reviews_store_written_with_zeros(tmp_path):
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(tmp_path / "zg"), mode="w")
    g.create_array("x", shape=(3,), dtype="f8")[:] = 0  # all fill: never written
    np.save(tmp_path / "zg" / "stray.npy", [np.nan])
    r = fastfinite.scan(str(tmp_path / "zg"))
    assert r.skipped == {"stray.npy": STRAYS["stray.npy"]}
    assert {"stray_file", "missing_chunk"} <= r.kinds_found()


def test_stray_files_on_the_command_line(tmp_path):
    zg = _with_strays(tmp_path / "zg")
    r = _scan_cli(zg)
    assert (r.returncode, r.stderr) == (0, "")  # no zarr warning either
    assert "WARNINGS" in r.stdout and "warnings: stray_file 2" in r.stdout
    assert "stray_file: stray.npy: a .npy file, not part of the Zarr store" in r.stdout
    for kinds in ("warning", "stray_file"):
        assert _scan_cli(zg, "--fail-on", kinds).returncode == 1


def test_what_a_stray_is_and_where(tmp_path):
    zarr = pytest.importorskip("zarr")
    g = _group(tmp_path / "s")
    sub = g.create_group("sub")
    sub.create_array("y", shape=(4, 2), chunks=(2, 2), dtype="f4")[:] = 1.0
    np.save(tmp_path / "s" / "raw.npy", [1.0])
    (tmp_path / "s" / "raw" / "deep").mkdir(parents=True)
    np.save(tmp_path / "s" / "raw" / "deep" / "a.npy", [np.nan])
    (tmp_path / "s" / "empty").mkdir()
    (tmp_path / "s" / "sub" / "README").write_text("about the data")  # in a subgroup
    (tmp_path / "s" / "x" / "notes.h5").write_bytes(b"\x89HDF")  # in an array's folder
    (tmp_path / "s" / ".DS_Store").write_text("hidden: not looked at")
    r = fastfinite.scan(str(tmp_path / "s"))
    assert sorted(r.arrays) == ["sub/y", "x"] and r.ok
    assert r.skipped == {
        "empty": "a folder, not part of the Zarr store: it is empty",
        "raw": "a folder, not part of the Zarr store: it holds 1 .npy file (deep/a.npy)",
        "raw.npy": "a .npy file, not part of the Zarr store",
        "sub/README": "a file, not part of the Zarr store",
        "x/notes.h5": "an HDF5 file, not part of the Zarr store",
    }
    # a Zarr group object, and the subgroup alone, are looked at the same way
    assert fastfinite.scan(zarr.open_group(str(tmp_path / "s"), mode="r")).skipped == r.skipped
    assert fastfinite.scan(str(tmp_path / "s" / "sub")).skipped == {
        "README": "a file, not part of the Zarr store"
    }


@pytest.mark.parametrize(
    "layout",
    [
        dict(zarr_format=3),
        dict(zarr_format=3, chunk_key_encoding={"name": "default", "separator": "."}),
        dict(zarr_format=3, chunk_key_encoding={"name": "v2", "separator": "/"}),
        dict(zarr_format=3, shards=(4, 6)),
        dict(zarr_format=2),
        dict(zarr_format=2, chunk_key_encoding={"name": "v2", "separator": "/"}),
    ],
    ids=["v3", "v3-dots", "v3-v2-keys", "sharded", "v2", "v2-slashes"],
)
def test_a_store_of_any_layout_holds_no_stray(tmp_path, layout):
    zarr = pytest.importorskip("zarr")
    fmt = layout.pop("zarr_format")
    g = zarr.open_group(str(tmp_path / "g"), mode="w", zarr_format=fmt)
    g.create_array("a", shape=(8, 6), chunks=(2, 3), dtype="f8", **layout)[:] = 1.0
    if "shards" not in layout:
        g.create_array("zero_d", shape=(), dtype="f8", **layout)[()] = 2.0
    g.create_group("s").create_array("b", shape=(5,), chunks=(2,), dtype="f4")[:] = 3.0
    zarr.consolidate_metadata(str(tmp_path / "g"))
    r = fastfinite.scan(str(tmp_path / "g"))
    assert (r.skipped, r.findings, r.clean) == ({}, [], True)


def test_an_array_consolidated_metadata_does_not_list_is_an_error(tmp_path):
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(tmp_path / "c"), mode="w", zarr_format=2)
    g.create_array("a", shape=(2,), dtype="f8")[:] = 1.0
    zarr.consolidate_metadata(str(tmp_path / "c"))
    late = zarr.open_group(str(tmp_path / "c"), mode="a", use_consolidated=False)
    late.create_array("late", shape=(2,), dtype="f8")[:] = np.nan  # never consolidated
    r = fastfinite.scan(str(tmp_path / "c"))
    assert (list(r.arrays), r.nan, r.ok) == (["a"], 0, False)
    assert r.kinds_found() == {"unlisted_member", "error"}
    assert r.skipped["late"].startswith(
        "a Zarr array or group that the group's consolidated metadata does not list"
    )


def test_a_zip_store_with_a_stray(tmp_path):
    import zipfile

    _group(tmp_path / "z")
    np.save(tmp_path / "z" / "stray.npy", [np.nan])
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as zf:
        for folder, _, files in os.walk(tmp_path / "z"):
            for f in files:
                full = os.path.join(folder, f)
                zf.write(full, os.path.relpath(full, tmp_path / "z"))
    r = fastfinite.scan(str(tmp_path / "z.zip"))
    assert (list(r.arrays), r.skipped) == (["x"], {"stray.npy": STRAYS["stray.npy"]})


def test_an_http_store_is_no_false_alarm(http_root):
    root, url = http_root
    _group(root / "g.zarr")
    (root / "g.zarr" / "notes").write_text("not data")  # its listing is not to be trusted
    r = fastfinite.scan(f"{url}/g.zarr")  # the index lists folders as x/, c/
    assert (list(r.arrays), r.skipped, r.findings, r.clean) == (["x"], {}, [], True)


@pytest.fixture(scope="module")
def s3_options(s3, s3_endpoint):
    """Storage options of the shared moto server (its bucket ``bkt``)."""
    return s3.storage_options(s3_endpoint)


def test_an_s3_store_with_a_stray(s3_options):
    import fsspec

    zarr = pytest.importorskip("zarr")
    g = zarr.open_group("s3://bkt/g.zarr", mode="w", storage_options=s3_options)
    g.create_array("x", shape=(2,), dtype="f8")[:] = [1.0, 2.0]
    fs = fsspec.filesystem("s3", **s3_options)
    fs.pipe("bkt/g.zarr/stray.npy", b"\x93NUMPY")
    fs.pipe("bkt/g.zarr/x/extra.parquet", b"PAR1")
    r = fastfinite.scan("s3://bkt/g.zarr", storage_options=s3_options)
    assert (list(r.arrays), r.count) == (["x"], 2)
    assert r.skipped == {
        "stray.npy": "a .npy file, not part of the Zarr store",
        "x/extra.parquet": "a Parquet file, not part of the Zarr store",
    }


# -- a sharded array's rescanned units are chunks, as its report's ---------------------------


@pytest.mark.parametrize("shards", [(8,), None], ids=["sharded", "unsharded"])
def test_rescanned_units_are_in_the_grid_of_the_reports_chunks(tmp_path, shards):
    zarr = pytest.importorskip("zarr")
    path, cache = str(tmp_path / "s.zarr"), str(tmp_path / "cache")
    a = zarr.create_array(
        store=path, shape=(16,), chunks=(2,), shards=shards, dtype="f8", fill_value=np.nan
    )
    a[:10] = 1.0  # chunks 5, 6, 7 never written
    kw = dict(cache=cache, region_bytes=64)  # a region is a shard (8 values)
    first = fastfinite.scan(path, **kw)
    assert (first.chunks, first.missing_chunks) == ((2,), 3)
    assert first.changes.rescanned == {path: [(i,) for i in range(8)]}
    a[12:14] = 2.0  # chunk 6 written, in the second shard
    r = fastfinite.scan(path, **kw)
    gone = [c.where for c in r.changes.gone if c.what == "finding"]
    assert gone == [(6,)] and (6,) in r.changes.rescanned[path]
    assert r.changes.rescanned == {path: [(4,), (5,), (6,), (7,)]}  # the second shard's chunks


# -- a cache inside the input is refused, in the API as on the command line -----------------


def test_a_cache_inside_a_parquet_dataset_is_refused(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    (tmp_path / "ds").mkdir()
    pd.DataFrame({"v": [1.0, 2.0]}).to_parquet(tmp_path / "ds" / "p.parquet")
    monkeypatch.chdir(tmp_path)
    for cache in ("ds/c", "ds", str(tmp_path / "ds" / "deeper" / "c")):
        with pytest.raises(fastfinite.InvalidArgumentError) as e:
            fastfinite.scan("ds", cache=cache)
        where = os.path.abspath(cache)  # as the options have it
        assert str(e.value).startswith(f"cache={where!r} is inside the input 'ds'")
    assert os.listdir(tmp_path / "ds") == ["p.parquet"]  # nothing written
    assert fastfinite.scan("ds").clean  # the next scan is not broken
    os.symlink(tmp_path / "ds", tmp_path / "link")  # through a link, the same folder
    with pytest.raises(fastfinite.InvalidArgumentError, match="is inside the input 'ds'"):
        fastfinite.scan("ds", cache="link/c")


def test_a_cache_inside_the_store_of_a_member_is_refused(tmp_path):
    g = _group(tmp_path / "s.zarr")
    g.create_group("sub").create_array("y", shape=(2,), dtype="f8")[:] = 1.0
    inside = str(tmp_path / "s.zarr" / "c")
    for asked in ("s.zarr", "s.zarr/sub", "s.zarr/sub/y", "s.zarr/x"):
        with pytest.raises(fastfinite.InvalidArgumentError, match=f"({tmp_path / 's.zarr'})"):
            fastfinite.scan(str(tmp_path / asked), cache=inside)
    assert sorted(os.listdir(tmp_path / "s.zarr")) == ["sub", "x", "zarr.json"]
    r = fastfinite.scan(str(tmp_path / "s.zarr" / "sub"), cache=str(tmp_path / "c"))
    assert (r.skipped, r.clean) == ({}, True)


def test_the_cache_and_the_command_line_outputs_know_the_same_input_roots(tmp_path):
    """``open.input_roots``: each path of a list, a glob's folder, the outermost Zarr store of
    a path inside one; URLs, missing paths and objects have none. The CLI's outputs and the
    cache are refused where it says."""
    from fastfinite.sources.open import input_roots

    _group(tmp_path / "s.zarr").create_group("sub").create_array("y", shape=(2,), dtype="f8")
    (tmp_path / "d").mkdir()
    for name in ("a", "b"):
        np.save(tmp_path / "d" / f"{name}.npy", np.zeros(3))
    a, glob, y = (str(tmp_path / p) for p in ("d/a.npy", "d/*.npy", "s.zarr/sub/y"))
    listed = [a, "s3://bucket/x.zarr", str(tmp_path / "missing.npy")]
    assert input_roots(listed) == [(a, os.path.realpath(a))]
    assert input_roots(glob) == [(glob, os.path.realpath(tmp_path / "d"))]
    assert input_roots(y) == [(y, os.path.realpath(tmp_path / "s.zarr"))]
    assert input_roots(np.zeros(3)) == []
    in_store = str(tmp_path / "s.zarr" / "r.json")
    assert_one_line_error(_scan_cli(y, "--json", in_store), "--json", "would write into")
    with pytest.raises(fastfinite.InvalidArgumentError, match="is inside the input"):
        fastfinite.scan(glob, cache=str(tmp_path / "d" / "c"))
    assert not os.path.exists(in_store) and not os.path.exists(tmp_path / "d" / "c")
