"""Shard sets (issue 44, parts 2-4): directories, globs and lists of array files, WebDataset
``.tar`` shards, Arrow IPC / Feather files and ``datasets`` folders, the skip-list
(``bad_samples``, ``--bad-samples``), and the same sets on a Dask cluster and with a cache.
Real files written by numpy, pyarrow, h5py, zarr and tarfile; every count, location and
statistic checked against NumPy on the same values.

Part: ``fastfinite/sources/shards.py``, ``tars.py``, ``arrow.py``, ``report/samples.py``.
"""

from __future__ import annotations

import io
import json
import os
import tarfile

import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite import InvalidArgumentError, SourceError

from .helpers import assert_one_line_error, run_cli

pa = pytest.importorskip("pyarrow")
h5py = pytest.importorskip("h5py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*args, cwd=None):
    return run_cli("scan", *args, cwd=cwd)


def _stats(values: list[np.ndarray]):
    """count, min, max, mean, std of the finite values, as NumPy gives them."""
    x = np.concatenate([np.asarray(v, np.float64).ravel() for v in values])
    f = x[np.isfinite(x)]
    return f.size, f.min(), f.max(), f.mean(), f.std()


def _assert_stats(r, values):
    count, mn, mx, mean, std = _stats(values)
    assert r.count == count
    assert (r.min, r.max) == (mn, mx)
    assert r.mean == pytest.approx(mean, rel=1e-12)
    assert r.std == pytest.approx(std, rel=1e-9)


@pytest.fixture
def npy_dir(tmp_path):
    """A directory of .npy files: NaN and inf at known places, a README beside them."""
    rng = np.random.default_rng(0)
    d = tmp_path / "parts"
    (d / "sub").mkdir(parents=True)
    a = rng.normal(size=(10, 3))
    a[4, 1] = np.nan
    b = rng.normal(size=7).astype(np.float32)
    b[6] = np.inf
    c = np.asfortranarray(rng.normal(size=(4, 5)))
    c[2, 3] = -np.inf
    np.save(d / "a.npy", a)
    np.save(d / "b.npy", b)
    np.save(d / "sub" / "c.npy", c)
    (d / "README.md").write_text("not data")
    return d, {"a.npy": a, "b.npy": b, "sub/c.npy": c}


# -- directories, globs, lists --------------------------------------------------------


def test_a_directory_of_npy_files_is_one_dataset(npy_dir):
    d, arrays = npy_dir
    r = fastfinite.scan(str(d))
    assert list(r.arrays) == ["a.npy", "b.npy", "sub/c.npy"]
    assert (r.nan, r.posinf, r.neginf) == (1, 1, 1)
    assert [(loc.kind, loc.array, loc.index) for loc in r.locations] == [
        ("nan", "a.npy", (4, 1)),
        ("posinf", "b.npy", (6,)),
        ("neginf", "sub/c.npy", (2, 3)),
    ]
    assert r.skipped == {"README.md": "not an array file (by its name)"}
    _assert_stats(r, list(arrays.values()))
    for key, x in arrays.items():
        _assert_stats(r.arrays[key], [x])
    assert r.arrays["b.npy"].dtype == "float32" and r.arrays["sub/c.npy"].shape == (4, 5)


def test_a_glob_is_keyed_below_its_fixed_prefix(npy_dir):
    d, arrays = npy_dir
    r = fastfinite.scan(f"{d}/*.npy")
    assert (list(r.arrays), r.skipped) == (["a.npy", "b.npy"], {})
    r = fastfinite.scan(f"{d}/**/*.npy")
    assert list(r.arrays) == ["a.npy", "b.npy", "sub/c.npy"]
    r = fastfinite.scan(f"{d.parent}/*/sub/*.npy")  # the prefix is the folder above
    assert list(r.arrays) == ["parts/sub/c.npy"] and r.neginf == 1
    r = fastfinite.scan(f"{d}/*")  # what a glob matches and is no array: skipped
    assert list(r.skipped) == ["README.md"]


def test_an_empty_glob_is_an_error(npy_dir, tmp_path):
    d, _ = npy_dir
    with pytest.raises(SourceError, match=r"no file matches .*\*\.npz$"):
        fastfinite.scan(f"{d}/*.npz")
    with pytest.raises(SourceError, match="no file matches .*: .* is not a directory"):
        fastfinite.scan(f"{tmp_path}/nowhere/*.npy")


def test_a_glob_never_follows_a_link(npy_dir, tmp_path):
    d, _ = npy_dir
    outside = tmp_path / "outside"
    outside.mkdir()
    np.save(outside / "x.npy", np.array([np.nan]))
    os.symlink(outside, d / "link")
    os.symlink(outside / "x.npy", d / "x.npy")
    r = fastfinite.scan(f"{d}/**/*.npy")
    assert r.nan == 1  # a.npy's, never x.npy's
    assert r.skipped == {"x.npy": "a symbolic link: never followed"}


def test_a_list_of_paths_is_keyed_below_their_common_folder(npy_dir):
    d, arrays = npy_dir
    r = fastfinite.scan([d / "a.npy", str(d / "sub" / "c.npy")])
    assert list(r.arrays) == ["a.npy", "sub/c.npy"]
    assert r.name == f"{d} (2 paths)"
    _assert_stats(r, [arrays["a.npy"], arrays["sub/c.npy"]])
    with pytest.raises(InvalidArgumentError, match="a.npy is listed twice"):
        fastfinite.scan([d / "a.npy", d / "sub" / ".." / "a.npy"])
    with pytest.raises(SourceError, match="no such file: .*gone.npy"):
        fastfinite.scan([d / "a.npy", d / "gone.npy"])


def test_a_list_names_a_file_listed_twice_through_links(npy_dir, tmp_path):
    """One file listed twice is an error however the paths reach it: through a folder
    that is a link, or as a link to it (each path's real path, its folders' looked up
    once)."""
    d, _ = npy_dir
    (tmp_path / "via").symlink_to(d / "sub")
    (tmp_path / "c-link.npy").symlink_to(d / "sub" / "c.npy")
    for twice in (tmp_path / "via" / "c.npy", tmp_path / "c-link.npy"):
        with pytest.raises(InvalidArgumentError, match="is listed twice"):
            fastfinite.scan([d / "sub" / "c.npy", twice])
    r = fastfinite.scan([d / "a.npy", tmp_path / "via" / "c.npy"])  # two files
    assert list(r.arrays) == ["parts/a.npy", "via/c.npy"] and r.neginf == 1


def test_a_directory_of_every_kind(tmp_path):
    d = tmp_path / "mixed"
    d.mkdir()
    x = np.array([1.0, np.nan, 3.0])
    np.save(d / "x.npy", x)
    with h5py.File(d / "f.h5", "w") as f:
        f["g/y"] = np.array([np.inf, 1.0])
        f["z"] = np.arange(3.0)
    zarr.create_array(store=str(d / "s.zarr"), data=np.array([-np.inf, 0.0]))
    g = zarr.open_group(str(d / "grp.zarr"), mode="w")
    g.create_array("w", data=np.array([2.0, np.nan]))
    pa.parquet = pytest.importorskip("pyarrow.parquet")
    pa.parquet.write_table(pa.table({"p": [1.0, None]}), d / "t.parquet")
    with pa.ipc.new_file(d / "t.arrow", pa.schema([("q", pa.float32())])) as w:
        w.write_table(pa.table({"q": pa.array([np.inf, 1.0], pa.float32())}))
    r = fastfinite.scan(str(d))
    assert list(r.arrays) == [
        "f.h5:/g/y", "f.h5:/z", "grp.zarr/w", "s.zarr", "t.arrow/q", "t.parquet/p", "x.npy",
    ]  # fmt: skip
    assert (r.nan, r.posinf, r.neginf) == (3, 2, 1)
    assert r.member("f.h5:/g/y").posinf == 1 and r.member("grp.zarr/w").nan == 1
    assert r.arrays["t.parquet/p"].locations[0].labels == {"row": 1, "column": "p"}


def test_a_file_of_a_set_that_cannot_be_read(npy_dir):
    d, _ = npy_dir
    (d / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    with pytest.raises(SourceError, match=r"bad\.npy is not a valid \.npy"):
        fastfinite.scan(str(d))
    r = fastfinite.scan(str(d), on_error="report")  # the rest is scanned
    assert (r.nan, r.posinf, r.neginf) == (1, 1, 1)
    assert r.skipped["bad.npy"].startswith("cannot be read: ")
    assert [(f.kind, f.severity) for f in r.findings] == [("unreadable_member", "error")]
    assert not r.ok and "bad.npy" in r.bad_samples()


def test_the_command_line_takes_a_directory_a_glob_and_several_paths(npy_dir):
    d, _ = npy_dir
    for args in ([d], [f"{d}/**/*.npy"], [d / "a.npy", d / "b.npy"]):
        r = _cli(*args, "--json", "-")
        assert r.returncode == 1, r.stderr
        assert json.loads(r.stdout)["nan"] == 1
    assert_one_line_error(_cli(f"{d}/*.npz"), "no file matches")


# -- WebDataset tars -------------------------------------------------------------------


def _npy_bytes(x: np.ndarray) -> bytes:
    b = io.BytesIO()
    np.save(b, x)
    return b.getvalue()


def _add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def _shard(path, samples: dict[str, np.ndarray], extra: bool = True) -> None:
    with tarfile.open(path, "w") as tf:
        for key, x in samples.items():
            _add(tf, f"{key}.x.npy", _npy_bytes(x))
            if extra:
                _add(tf, f"{key}.cls", b"7")


@pytest.fixture
def shards(tmp_path):
    rng = np.random.default_rng(1)
    d = tmp_path / "shards"
    d.mkdir()
    values = {}
    for s in range(2):
        samples = {f"{i:06d}": rng.normal(size=(3, 4)).astype(np.float32) for i in range(4)}
        if s == 1:
            samples["000002"][1, 2] = np.nan
            samples["000003"] = np.asfortranarray(samples["000003"])
            samples["000003"][0, 3] = np.inf
        _shard(d / f"shard-{s:06d}.tar", samples)
        values.update({f"shard-{s:06d}.tar/{k}.x.npy": v for k, v in samples.items()})
    return d, values


def test_a_tar_shard_is_scanned_in_place_member_by_member(shards):
    d, values = shards
    r = fastfinite.scan(str(d / "shard-000001.tar"))
    keys = [k for k in values if k.startswith("shard-000001")]
    assert list(r.arrays) == keys
    assert (r.nan, r.posinf) == (1, 1)
    assert [(loc.array, loc.index) for loc in r.locations] == [
        ("shard-000001.tar/000002.x.npy", (1, 2)),
        ("shard-000001.tar/000003.x.npy", (0, 3)),
    ]
    assert r.skipped["shard-000001.tar/000000.cls"] == "a .cls member, not an array"
    _assert_stats(r, [values[k] for k in keys])
    assert r.bad_samples() == ["shard-000001.tar/000002", "shard-000001.tar/000003"]


def test_a_directory_of_tar_shards(shards):
    d, values = shards
    r = fastfinite.scan(str(d))
    assert list(r.arrays) == list(values)
    _assert_stats(r, list(values.values()))
    assert fastfinite.scan(f"{d}/shard-*.tar").to_dict() == r.to_dict() | {
        "name": f"{d}/shard-*.tar"
    }


def test_a_truncated_tar_names_the_member(shards, tmp_path):
    d, _ = shards
    data = (d / "shard-000001.tar").read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[: 512 * 9 + 100])  # inside the data of the fifth member
    with pytest.raises(SourceError, match=r"cut\.tar, member 000002\.x\.npy: its data ends"):
        fastfinite.scan(str(cut))
    r = fastfinite.scan(str(cut), on_error="report")
    assert len(r.arrays) == 2 and r.nan == 0
    assert "past the end of the file" in r.skipped["cut.tar/000002.x.npy"]
    assert [f.kind for f in r.findings] == ["unreadable_member"]
    assert r.bad_samples() == ["cut.tar/000002"]
    r = _cli(cut)
    assert_one_line_error(r, "cut.tar, member 000002.x.npy", "truncated")


def test_a_tar_cut_between_members_is_not_whole(shards, tmp_path):
    d, _ = shards
    data = (d / "shard-000000.tar").read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[: 512 * 4])  # two whole members, no end-of-archive blocks
    with pytest.raises(SourceError, match=r"cut\.tar is truncated or corrupt after member"):
        fastfinite.scan(str(cut))
    r = fastfinite.scan(str(cut), on_error="report")
    assert list(r.arrays) == ["cut.tar/000000.x.npy"]
    assert list(r.skipped)[-1] == "cut.tar/000000.cls (the rest of the tar)"
    assert r.bad_samples()[-1] == "cut.tar/000000.cls (the rest of the tar)"


def test_a_corrupt_npy_member_names_it_and_the_rest_goes_on(tmp_path):
    liar = bytearray(_npy_bytes(np.zeros((2, 2))))
    liar[liar.index(b"(2, 2)") : liar.index(b"(2, 2)") + 6] = b"(9, 9)"  # more than it holds
    with tarfile.open(tmp_path / "s.tar", "w") as tf:
        _add(tf, "a.x.npy", _npy_bytes(np.array([np.nan])))
        _add(tf, "b.x.npy", bytes(liar))
        _add(tf, "c.x.npy", b"not an npy at all")
    with pytest.raises(
        SourceError, match=r"s\.tar, member b\.x\.npy: its header says float64 \(9, 9\)"
    ):
        fastfinite.scan(str(tmp_path / "s.tar"))
    r = fastfinite.scan(str(tmp_path / "s.tar"), on_error="report")
    assert (list(r.arrays), r.nan) == (["s.tar/a.x.npy"], 1)
    assert "not a valid .npy" in r.skipped["s.tar/c.x.npy"]
    assert r.bad_samples() == ["s.tar/a", "s.tar/b", "s.tar/c"]


def test_a_compressed_or_empty_tar_is_an_error(tmp_path):
    with tarfile.open(tmp_path / "z.tar", "w:gz") as tf:
        _add(tf, "a.npy", _npy_bytes(np.zeros(2)))
    with pytest.raises(SourceError, match="z.tar is a gzip-compressed tar"):
        fastfinite.scan(str(tmp_path / "z.tar"))
    with tarfile.open(tmp_path / "e.tar", "w"):
        pass
    with pytest.raises(SourceError, match="e.tar is an empty tar"):
        fastfinite.scan(str(tmp_path / "e.tar"))
    (tmp_path / "n.tar").write_bytes(b"x" * 2000)
    with pytest.raises(SourceError, match="n.tar is truncated or corrupt: not a tar file"):
        fastfinite.scan(str(tmp_path / "n.tar"))


# -- Arrow and datasets folders ---------------------------------------------------------


def _table():
    return pa.table(
        {
            "x": pa.array([1.0, None, 3.0, 4.0], pa.float64()),
            "i": pa.array([1, 2, None, 4], pa.int32()),
            "emb": pa.array([[1, 2], [3, np.inf], [5, 6], [7, 8]], pa.list_(pa.float32(), 2)),
            "vec": pa.array([[1.0, 2.0, 3.0], None, [np.nan, 0.0, 1.0], [1.0, 1.0, 1.0]]),
            "ragged": pa.array([[1.0], [1.0, 2.0], [], [3.0]]),
            "s": pa.array(["a", "b", "c", "d"]),
        }
    )


@pytest.mark.parametrize("writer", ["file", "stream", "feather"])
def test_an_arrow_file_is_a_table(tmp_path, writer):
    t = _table()
    path = tmp_path / "t.arrow"
    if writer == "feather":
        import pyarrow.feather as feather

        feather.write_feather(t, path, chunksize=3)
    else:
        new = pa.ipc.new_file if writer == "file" else pa.ipc.new_stream
        with new(path, t.schema) as w:
            w.write_table(t, max_chunksize=3)
    r = fastfinite.scan(str(path))
    assert (r.dtype, r.shape) == ("Arrow", (4, 6))
    assert list(r.arrays) == ["x", "i", "emb", "vec"]
    assert r.skipped == {
        "ragged": "lists of 0 to 2 values (ragged): not a 2-D array, not scanned",
        "s": "not numeric: Arrow type string",
    }
    assert r.arrays["emb"].shape == (4, 2) and r.arrays["emb"].dtype == "float32"
    assert r.arrays["vec"].shape == (4, 3)
    # nulls read as NaN, as pandas reads them; a null list as a row of NaN
    assert (r.arrays["x"].nan, r.arrays["i"].nan, r.arrays["vec"].nan) == (1, 1, 4)
    assert r.arrays["i"].dtype == "float64"
    assert [(loc.array, loc.index) for loc in r.arrays["emb"].locations] == [(None, (1, 1))]
    vec = np.array([[1, 2, 3], [np.nan] * 3, [np.nan, 0, 1], [1, 1, 1]])
    x, i = np.array([1, np.nan, 3, 4]), np.array([1, 2, np.nan, 4])
    emb = np.array([[1, 2], [3, np.inf], [5, 6], [7, 8]], np.float32)
    _assert_stats(r, [x, i, emb, vec])
    assert sorted(r.bad_samples()) == [(str(path), 1), (str(path), 2)]


def test_an_arrow_table_by_row(tmp_path):
    t = pa.table({"a": [1.0, np.nan, 2.0], "b": [0.0, 1.0, np.inf]})
    with pa.ipc.new_file(tmp_path / "t.arrow", t.schema) as w:
        w.write_table(t)
    r = fastfinite.scan(str(tmp_path / "t.arrow"), by=0)
    assert r.bad_slices() == [1, 2]
    assert r.bad_samples() == [(str(tmp_path / "t.arrow"), 1), (str(tmp_path / "t.arrow"), 2)]


def _datasets_folder(d, splits: dict[str, list[pa.Table]]):
    d.mkdir()
    (d / "dataset_info.json").write_text(json.dumps({"features": {}}))
    (d / "state.json").write_text("{}")
    for split, tables in splits.items():
        for k, t in enumerate(tables):
            suffix = f"-{k:05d}-of-{len(tables):05d}" if len(tables) > 1 else ""
            with pa.ipc.new_stream(d / f"{split}{suffix}.arrow", t.schema) as w:
                w.write_table(t, max_chunksize=2)


def test_a_datasets_folder_is_one_table_per_split(tmp_path):
    t1 = pa.table({"v": [1.0, 2.0, 3.0]})
    t2 = pa.table({"v": [4.0, np.nan]})
    _datasets_folder(tmp_path / "one", {"data": [t1, t2]})
    r = fastfinite.scan(str(tmp_path / "one"))
    assert (r.shape, r.nan, list(r.arrays)) == ((5, 1), 1, ["v"])
    assert r.locations[0].index == (4, 0)  # its row in the split, as datasets counts it
    assert r.bad_samples() == [(str(tmp_path / "one"), 4)]
    _datasets_folder(tmp_path / "two", {"ds-train": [t1, t2], "ds-test": [t2]})
    r = fastfinite.scan(str(tmp_path / "two"))
    assert list(r.arrays) == ["ds-test/v", "ds-train/v"] and r.nan == 2
    assert r.bad_samples() == [("ds-test", 1), ("ds-train", 4)]


def test_a_corrupt_arrow_file_is_named(tmp_path):
    (tmp_path / "bad.arrow").write_bytes(b"ARROW1" + b"\0" * 50)
    with pytest.raises(SourceError, match=r"bad\.arrow is not a valid Arrow IPC file"):
        fastfinite.scan(str(tmp_path / "bad.arrow"))


# -- the skip-list ----------------------------------------------------------------------


def test_bad_samples_of_a_set_and_by_row(npy_dir):
    d, _ = npy_dir
    r = fastfinite.scan(str(d))
    assert r.bad_samples() == ["a.npy", "b.npy", "sub/c.npy"] and r.bad_samples().complete
    r = fastfinite.scan(str(d / "a.npy"), by=0)
    assert r.bad_samples() == [4]
    x = np.zeros((6, 2))
    x[[1, 4], 0] = np.nan
    assert fastfinite.scan(x, by=0).bad_samples() == [1, 4]
    assert fastfinite.scan(np.zeros(3)).bad_samples() == []
    assert fastfinite.scan(str(d / "a.npy")).bad_samples() == [str(d / "a.npy")]


def test_bad_samples_never_truncated_without_saying_so(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"v": [np.nan, np.nan, 1.0, np.nan]}), tmp_path / "t.parquet")
    r = fastfinite.scan(str(tmp_path / "t.parquet"), max_locations=2)
    keys = r.bad_samples()
    assert keys == [(str(tmp_path / "t.parquet"), 0), (str(tmp_path / "t.parquet"), 1)]
    assert not keys.complete
    assert "3 nan values, 2 locations recorded (max_locations=2)" in keys.notes[0]
    keys = fastfinite.scan(str(tmp_path / "t.parquet"), max_locations=2, by=0).bad_samples()
    assert [row for _, row in keys] == [0, 1, 3] and keys.complete


def test_the_bad_samples_file(shards, tmp_path):
    d, _ = shards
    out = tmp_path / "bad.txt"
    r = _cli(d, "--bad-samples", out)
    assert r.returncode == 1, r.stderr
    assert out.read_text() == "shard-000001.tar/000002\nshard-000001.tar/000003\n"
    # the output is checked before the scan starts
    assert_one_line_error(
        _cli(d, "--bad-samples", tmp_path / "no" / "dir" / "f.txt"), "--bad-samples"
    )
    assert_one_line_error(_cli(d, "--bad-samples", d / "bad.txt"), "would write into the input")
    assert not (d / "bad.txt").exists()


def test_the_bad_samples_file_of_a_table_and_an_incomplete_one(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"v": [np.nan, 1.0, np.nan]}), tmp_path / "t.parquet")
    out = tmp_path / "bad.txt"
    r = _cli(tmp_path / "t.parquet", "--bad-samples", out, "--max-locations", "1")
    assert r.returncode == 1
    assert out.read_text() == f"{tmp_path / 't.parquet'}\t0\n"
    assert r.stderr.startswith(f"fastfinite: warning: {out} is incomplete: ")
    assert len(r.stderr.splitlines()) == 1


# -- at scale: Dask, cache, progress -----------------------------------------------------


def test_a_set_on_a_dask_cluster_gives_the_same_report(npy_dir, shards, dask_client):
    for target in (str(npy_dir[0]), str(shards[0])):
        local = fastfinite.scan(target)
        remote = fastfinite.scan(target, scheduler=dask_client)
        assert remote.to_dict() == local.to_dict()


def test_a_cache_reads_again_only_the_files_that_changed(npy_dir, tmp_path):
    d, arrays = npy_dir
    cache = str(tmp_path / "cache")
    first = fastfinite.scan(str(d), cache=cache)
    read = lambda r: [k for k, units in r.changes.rescanned.items() if units]  # noqa: E731
    assert read(first) == list(arrays)
    b = arrays["b.npy"].copy()
    b[0] = np.nan
    np.save(d / "b.npy", b)
    second = fastfinite.scan(str(d), cache=cache)
    assert read(second) == ["b.npy"] and second.changes.regions_recalled == 2
    assert second.nan == 2 and second.to_dict() == fastfinite.scan(str(d)).to_dict()


# -- checkpoints in sets and tars (files.open_file / open_buffer) -----------------------


def test_a_directory_of_npz_and_safetensors_files(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    d = tmp_path / "ck"
    d.mkdir()
    x, y = np.array([1.0, np.nan]), np.array([[np.inf, 2.0]], np.float32)
    np.savez(d / "a.npz", x=x, y=y)
    w = np.array([3.0, -np.inf], np.float32)
    st.save_file({"layers.0.w": w}, str(d / "m.safetensors"))
    r = fastfinite.scan(str(d))
    assert list(r.arrays) == ["a.npz/x", "a.npz/y", "m.safetensors/layers.0.w"]
    assert (r.nan, r.posinf, r.neginf) == (1, 1, 1)
    _assert_stats(r, [x, y, w])
    assert r.bad_samples() == ["a.npz/x", "a.npz/y", "m.safetensors/layers.0.w"]


def test_npz_and_safetensors_members_of_a_tar(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    x = np.array([[1.0, np.nan], [0.0, 2.0]])
    b = io.BytesIO()
    np.savez(b, emb=x)
    w = np.array([np.inf, 1.0], np.float32)
    with tarfile.open(tmp_path / "s.tar", "w") as tf:
        _add(tf, "000000.a.npz", b.getvalue())
        _add(tf, "000001.b.safetensors", st.save({"w": w}))
        _add(tf, "000002.c.npz", b"PK not a zip")
    with pytest.raises(SourceError, match=r"000002\.c\.npz"):
        fastfinite.scan(str(tmp_path / "s.tar"))
    r = fastfinite.scan(str(tmp_path / "s.tar"), on_error="report")
    assert list(r.arrays) == ["s.tar/000000.a.npz/emb", "s.tar/000001.b.safetensors/w"]
    assert (r.nan, r.posinf) == (1, 1)
    assert r.arrays["s.tar/000000.a.npz/emb"].locations[0].index == (0, 1)
    _assert_stats(r, [x, w])
    assert r.bad_samples() == ["s.tar/000000", "s.tar/000001", "s.tar/000002"]


def test_the_progress_bar_counts_the_whole_set(tmp_path, capsys):
    d = tmp_path / "set"
    d.mkdir()
    for i in range(4):
        np.save(d / f"{i}.npy", np.zeros(1024, np.float32))  # 4 KiB each
    fastfinite.scan(str(d), progress=True)
    err = capsys.readouterr().err
    assert "16.0k" in err and "4.00k" not in err  # one bar over the set, not one a file
    assert err.count(str(d)) >= 1


def test_every_kind_of_member_on_a_dask_cluster(tmp_path, dask_client):
    st = pytest.importorskip("safetensors.numpy")
    d = tmp_path / "all"
    d.mkdir()
    np.save(d / "a.npy", np.array([1.0, np.nan]))
    b = io.BytesIO()
    np.savez(b, e=np.array([np.inf, 2.0]))
    with tarfile.open(d / "s.tar", "w") as tf:
        _add(tf, "000000.x.npy", _npy_bytes(np.array([[0.0, -np.inf]])))
        _add(tf, "000001.y.npz", b.getvalue())
        _add(tf, "000002.z.safetensors", st.save({"w": np.array([np.nan], np.float32)}))
    with pa.ipc.new_stream(d / "t.arrow", pa.schema([("v", pa.list_(pa.float32(), 2))])) as w:
        w.write_table(pa.table({"v": pa.array([[1, np.nan]], pa.list_(pa.float32(), 2))}))
    with h5py.File(d / "f.h5", "w") as f:
        f["x"] = np.array([np.inf])
    local = fastfinite.scan(str(d))
    assert (local.nan, local.posinf, local.neginf, len(local.arrays)) == (3, 2, 1, 6)
    assert fastfinite.scan(str(d), scheduler=dask_client).to_dict() == local.to_dict()


def test_a_cache_of_tar_shards_and_arrow_files(shards, tmp_path):
    d, values = shards
    t = pa.table({"v": [1.0, 2.0]})
    with pa.ipc.new_file(d / "t.arrow", t.schema) as w:
        w.write_table(t)
    cache = str(tmp_path / "cache")
    first = fastfinite.scan(str(d), cache=cache)
    again = fastfinite.scan(str(d), cache=cache)
    assert not any(again.changes.rescanned.values())
    assert again.to_dict() == first.to_dict()
    _shard(d / "shard-000000.tar", {"000000": np.array([np.nan], np.float32)})
    third = fastfinite.scan(str(d), cache=cache)
    assert [k for k, v in third.changes.rescanned.items() if v] == ["shard-000000.tar/000000.x.npy"]
    assert third.to_dict() == fastfinite.scan(str(d)).to_dict() and third.nan == 2


def test_bad_samples_of_a_set_scanned_by_row(npy_dir):
    d, arrays = npy_dir
    r = fastfinite.scan(str(d), by=0)
    keys = r.bad_samples()
    assert keys == [("a.npy", 4), ("b.npy", 6), ("sub/c.npy", 2)] and keys.complete
    for key, row in keys:  # each row of each file holds a non-finite value, and no other
        bad = ~np.isfinite(arrays[key]).reshape(arrays[key].shape[0], -1).all(axis=1)
        assert np.flatnonzero(bad).tolist() == [row]


@pytest.mark.parametrize("writer", ["file", "stream"])
def test_a_cut_arrow_file_in_a_set(tmp_path, writer):
    d = tmp_path / "set"
    d.mkdir()
    np.save(d / "a.npy", np.array([np.nan]))
    t = pa.table({"v": np.arange(1000.0)})
    new = pa.ipc.new_file if writer == "file" else pa.ipc.new_stream
    with new(d / "t.arrow", t.schema) as w:
        w.write_table(t, max_chunksize=100)
    data = (d / "t.arrow").read_bytes()
    (d / "t.arrow").write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match=r"t\.arrow is not a valid Arrow IPC file or stream"):
        fastfinite.scan(str(d))
    r = fastfinite.scan(str(d), on_error="report")
    assert (list(r.arrays), r.nan) == (["a.npy"], 1)
    assert r.skipped["t.arrow"].startswith("cannot be read: ")
    assert r.bad_samples() == ["a.npy", "t.arrow"]


def test_a_bad_header_in_the_middle_of_a_tar_is_not_its_end(shards, tmp_path):
    d, _ = shards
    data = bytearray((d / "shard-000000.tar").read_bytes())
    data[512 * 4 + 3] ^= 0xFF  # the name of the third member: its checksum fails
    (tmp_path / "bad.tar").write_bytes(bytes(data))
    with pytest.raises(SourceError, match=r"after member 000000\.cls: a header that cannot be "):
        fastfinite.scan(str(tmp_path / "bad.tar"))  # tarfile alone stops there, silently
    r = fastfinite.scan(str(tmp_path / "bad.tar"), on_error="report")
    assert list(r.arrays) == ["bad.tar/000000.x.npy"] and [f.kind for f in r.findings] == [
        "unreadable_member"
    ]
    whole = (d / "shard-000000.tar").read_bytes()
    (tmp_path / "two.tar").write_bytes(whole + whole)  # `cat a.tar b.tar`
    with pytest.raises(
        SourceError, match=f"data after its end-of-archive blocks, at byte {len(whole)}"
    ):
        fastfinite.scan(str(tmp_path / "two.tar"))


def test_the_progress_bar_holds_no_file_open_before_its_turn(npy_dir, capsys):
    d, _ = npy_dir
    from fastfinite.engines.plan import make_plan
    from fastfinite.options import scan_options

    plan = make_plan(str(d), scan_options(progress=True))
    members = list(plan.members())
    for m in members:
        m.source.unmap()
    assert all(m.source._array is None for m in members)  # what the bar's count leaves
    assert fastfinite.scan(str(d), progress=True).to_dict() == fastfinite.scan(str(d)).to_dict()


def test_tar_members_named_twice_or_with_a_dot(tmp_path):
    with tarfile.open(tmp_path / "s.tar", "w") as tf:
        _add(tf, "./000000.x.npy", _npy_bytes(np.array([1.0])))
        _add(tf, "000001.x.npy", _npy_bytes(np.array([np.nan])))
        _add(tf, "000001.x.npy", _npy_bytes(np.array([np.inf, 2.0])))  # tar keeps both
    r = fastfinite.scan(str(tmp_path / "s.tar"))
    assert list(r.arrays) == ["s.tar/000000.x.npy", "s.tar/000001.x.npy", "s.tar/000001.x.npy (2)"]
    assert (r.nan, r.posinf, r.count) == (1, 1, 2)
    assert r.bad_samples() == ["s.tar/000001"]
