"""The small tensors of ``.npz`` and safetensors checkpoints scanned together
(``engines.batched``: ``factory.raw_npy``) give, tensor by tensor, the very reports the
member-by-member path gives: real files written by ``safetensors.numpy``, ``np.savez`` and
``np.savez_compressed`` (and by hand for the hostile ones), one file, a sharded index, and
such files in a folder or a tar, every dtype the batched path scans, values planted where
they are found, small tensors beside large ones."""

from __future__ import annotations

import json
import os
import pickle
import struct
import tempfile
import zipfile

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy
from hypothesis import given, settings
from hypothesis import strategies as st

import fastfinite
from fastfinite.errors import SourceError
from fastfinite.sources.open import open_source
from fastfinite.sources.shards import ShardSet
from fastfinite.sources.small import SMALL_NPY

from .helpers import calls_of, peak_growth
from .test_batched_sets import PLANTS, _npy, _one_by_one, _same, _tar, _together, _values

ST_DTYPES = ["<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"]
NPZ_DTYPES = [*ST_DTYPES, ">f4", ">f8", ">f2", "<c8", ">c16", ">i4"]
SHAPES = [(), (1,), (0,), (5,), (3, 4), (2, 0, 3), (2, 1, 3), (40,)]


def _tensors(rng, dtypes, shapes, n, plant_every, big=()) -> dict:
    """``n`` tensors of the dtypes and shapes in turn (NaN, inf, cast risks planted in
    every ``plant_every``-th), and a large one after each index in ``big``."""
    out = {}
    for i in range(n):
        dtype = np.dtype(dtypes[i % len(dtypes)])
        plants = []
        if plant_every and i % plant_every == 1:
            plants = [(int(rng.integers(0, 1 << 20)), PLANTS[int(rng.integers(len(PLANTS)))])]
        out[f"layers.{i}.w"] = _values(rng, dtype, shapes[i % len(shapes)], plants)
        if i in big:
            x = rng.standard_normal(SMALL_NPY // 4 + 3).astype(np.float32)
            x[7] = np.inf
            out[f"layers.{i}.big"] = x
    return out


def _st(path, tensors: dict) -> str:
    safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, path)
    return str(path)


def _check(monkeypatch, data, least: int = 1, **kw):
    """The batched scan of ``data`` is the member-by-member one, and scanned at least
    ``least`` tensors together; the batched report."""
    want = _one_by_one(monkeypatch, data, **kw)
    got, together = _together(monkeypatch, data, **kw)
    _same(got, want)
    assert together >= least
    return got


@settings(max_examples=40, deadline=None)
@given(
    dtypes=st.lists(st.sampled_from(ST_DTYPES), min_size=1, max_size=4),
    shapes=st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3),
    n=st.integers(1, 25),
    plant_every=st.sampled_from([0, 2, 3]),
    cast=st.sampled_from([None, ("float16",), ("bfloat16", "float8_e4m3fn")]),
    seed=st.integers(0, 2**32 - 1),
    bf16=st.booleans(),
)
def test_a_safetensors_file_scanned_together_is_it_scanned_one_by_one(
    dtypes, shapes, n, plant_every, cast, seed, bf16
):
    rng = np.random.default_rng(seed)
    tensors = _tensors(rng, dtypes, shapes, n, plant_every)
    if bf16:  # bfloat16 goes alone, in the middle of the others
        tensors[f"layers.{n // 2}.bf16"] = (rng.standard_normal(6) * 1e3).astype(ml_dtypes.bfloat16)
    kw = {} if cast is None else {"cast": cast}
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as d:
        path = _st(os.path.join(d, "model.safetensors"), tensors)
        _check(mp, path, least=0, **kw)


@settings(max_examples=30, deadline=None)
@given(
    dtypes=st.lists(st.sampled_from(NPZ_DTYPES), min_size=1, max_size=4),
    shapes=st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3),
    n=st.integers(1, 20),
    plant_every=st.sampled_from([0, 2, 3]),
    compressed=st.booleans(),
    fortran=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_an_npz_scanned_together_is_it_scanned_one_by_one(
    dtypes, shapes, n, plant_every, compressed, fortran, seed
):
    rng = np.random.default_rng(seed)
    tensors = _tensors(rng, dtypes, shapes, n, plant_every)
    if fortran:  # a Fortran-ordered 2-D member goes alone
        tensors = {k: np.asfortranarray(v) for k, v in tensors.items()}
    save = np.savez_compressed if compressed else np.savez
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "a.npz")
        save(path, **tensors)
        _check(mp, path, least=0, cast=("float16", "bfloat16"))


@pytest.mark.parametrize("kind", ["safetensors", "npz", "npz_compressed"])
def test_small_tensors_beside_large_ones_keep_their_order(tmp_path, monkeypatch, kind):
    rng = np.random.default_rng(1)
    tensors = _tensors(rng, ["<f4", "<f2", "<i8"], [(4, 3), (), (0,)], 40, 5, big=(3, 20))
    if kind == "safetensors":
        path = _st(tmp_path / "m.safetensors", tensors)
        name = lambda k: f"{path}:{k}"  # noqa: E731
    else:
        path = str(tmp_path / "m.npz")
        (np.savez if kind == "npz" else np.savez_compressed)(path, **tensors)
        name = lambda k: f"{path}:{k}.npy"  # noqa: E731
    got = _check(monkeypatch, path, least=15, cast=("float16",))
    if kind == "safetensors":  # in the order of their bytes (the writer's, by dtype)
        assert sorted(got.arrays) == sorted(tensors)
    else:
        assert list(got.arrays) == list(tensors)
    assert got.arrays["layers.3.big"].posinf == 1 and got.arrays["layers.20.big"].posinf == 1
    assert got.arrays["layers.0.w"].name == name("layers.0.w")
    x = tensors["layers.1.w"]  # planted: its report is its own scan's
    assert got.arrays["layers.1.w"].nan == int(np.isnan(x).sum())


def test_sixty_tiny_tensors_are_scanned_together(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    tensors = {f"layer.{i}.w": rng.standard_normal(8).astype(np.float32) for i in range(60)}
    tensors["layer.7.w"][3] = np.nan
    tensors["layer.9.w"][0] = np.float32(1e5)
    path = _st(tmp_path / "m.safetensors", tensors)
    target = open_source(path)
    assert isinstance(target, ShardSet) and len(target.raw) == 60
    got = _check(monkeypatch, path, least=58, cast=("float16",))
    assert got.bad_samples() == ["layer.7.w", "layer.9.w"]
    assert got.arrays["layer.7.w"].locations[0].index == (3,)
    assert got.arrays["layer.3.w"].mean == pytest.approx(float(tensors["layer.3.w"].mean()))


def test_bfloat16_and_float8_tensors_go_alone(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    tensors = {
        "a": rng.standard_normal(5).astype(ml_dtypes.bfloat16),
        "b": rng.standard_normal(5).astype(ml_dtypes.float8_e4m3fn),
        "c": rng.standard_normal(5).astype(np.float32),
    }
    path = _st(tmp_path / "m.safetensors", tensors)
    assert list(open_source(path).raw) == ["c"]
    _check(monkeypatch, path, least=1)


def test_duplicate_looking_npz_members(tmp_path, monkeypatch):
    """``x`` beside ``x.npy``, a member the zip holds twice, a member that is no ``.npy``."""
    path = tmp_path / "d.npz"
    with pytest.warns(UserWarning, match="Duplicate name"):
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("x.npy", _npy(np.arange(4.0)))
            zf.writestr("x.npy.npy", _npy(np.arange(3.0)))
            zf.writestr("x.npy", _npy(np.array([1.0, np.nan])))
            zf.writestr("notes.txt", b"hello")
            zf.writestr("y.npy", _npy(np.ones((2, 2), np.float32)), zipfile.ZIP_DEFLATED)
    got = _check(monkeypatch, str(path), least=2, on_error="report")
    assert list(got.arrays) == ["x", "x.npy", "x (2)", "y"]
    assert got.arrays["x (2)"].nan == 1 and "notes.txt" in str(got.skipped)


def test_a_sharded_index_a_folder_and_a_tar_of_checkpoints(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    t1 = _tensors(rng, ["<f4", "<f2"], [(3,), (2, 2)], 12, 4)
    t2 = _tensors(rng, ["<f8", "<i4"], [(5,), ()], 12, 4)
    t2 = {k.replace("layers", "head"): v for k, v in t2.items()}
    _st(folder / "model-00001-of-00002.safetensors", t1)
    _st(folder / "model-00002-of-00002.safetensors", t2)
    wmap = {k: "model-00001-of-00002.safetensors" for k in t1}
    wmap |= {k: "model-00002-of-00002.safetensors" for k in t2}
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    got = _check(monkeypatch, str(index), least=10)
    assert sorted(got.arrays) == sorted(wmap)
    _check(monkeypatch, str(folder), least=10)

    shards = tmp_path / "set"
    shards.mkdir()
    _st(shards / "a.safetensors", t1)
    np.savez(shards / "b.npz", **t2)
    np.savez_compressed(shards / "c.npz", **t1)
    np.save(shards / "d.npy", np.arange(6.0))
    got = _check(monkeypatch, str(shards), least=30, cast=("float16",))
    assert "a.safetensors/layers.0.w" in got.arrays and "c.npz/layers.0.w" in got.arrays

    members = {"000000.model.safetensors": open(shards / "a.safetensors", "rb").read()}
    members["000001.b.npz"] = open(shards / "b.npz", "rb").read()
    members["000002.c.npz"] = open(shards / "c.npz", "rb").read()
    _tar(tmp_path / "shard-000000.tar", members)
    got = _check(monkeypatch, str(tmp_path / "shard-000000.tar"), least=30)
    assert "shard-000000.tar/000001.b.npz/head.1.w" in got.arrays
    # raw_dtype reads .npy bytes: the safetensors tensors (which name their dtype) still
    # scanned together, the .npz members' float bytes refused, as one by one
    got = _check(monkeypatch, str(tmp_path / "shard-000000.tar"), least=5, raw_dtype="bfloat16",
                 on_error="report")  # fmt: skip
    assert "shard-000000.tar/000001.b.npz/head.1.w" in got.skipped


def test_raw_bfloat16_npz_members(tmp_path, monkeypatch):
    """``np.savez`` keeps ml_dtypes' bytes as ``|V2``: read as bfloat16 with ``raw_dtype``
    (a member of another dtype is an error, or with ``on_error="report"`` skipped)."""
    rng = np.random.default_rng(5)
    xs = {f"w{i}": (rng.standard_normal(9) * 1e3).astype(ml_dtypes.bfloat16) for i in range(8)}
    xs["w3"][2] = np.nan
    xs["other"] = np.zeros(3, np.float32)
    for save in (np.savez, np.savez_compressed):
        save(tmp_path / "r.npz", **xs)
        got = _check(
            monkeypatch, str(tmp_path / "r.npz"), least=6, raw_dtype="bfloat16", on_error="report"
        )
        assert got.arrays["w3"].nan == 1 and "other" in got.skipped


def test_the_dask_engine_and_a_cache_give_the_batched_report(tmp_path, monkeypatch):
    rng = np.random.default_rng(6)
    tensors = _tensors(rng, ["<f4", "<f8"], [(6,), (2, 3)], 20, 3)
    path = _st(tmp_path / "m.safetensors", tensors)
    got, together = _together(monkeypatch, path)
    assert together > 0
    graph = fastfinite.scan(path, scheduler="synchronous")
    cached = fastfinite.scan(path, cache=str(tmp_path / "cache"))
    for other in (graph, cached):
        _same(other, got)


# hostile files: the batched path says what the member-by-member path says


def _header_file(path, header: dict, data: bytes) -> str:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return str(path)


def test_offsets_that_overlap_or_run_past_the_end(tmp_path, monkeypatch):
    data = np.arange(8, dtype=np.float32).tobytes()
    header = {
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},  # overlaps a
        "c": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]},
        "d": {"dtype": "F32", "shape": [4], "data_offsets": [24, 40]},  # past the end
    }
    path = _header_file(tmp_path / "h.safetensors", header, data)
    with pytest.raises(SourceError, match=r"h.safetensors, tensor [bd]: its"):
        fastfinite.scan(path)
    got = _check(monkeypatch, path, least=2, on_error="report")
    assert list(got.arrays) == ["a", "c"]
    assert sorted(got.skipped) == ["b", "d"] and "past the end" in got.skipped["d"]


def test_a_truncated_file(tmp_path, monkeypatch):
    tensors = {f"t{i}": np.full(4, i, np.float32) for i in range(6)}
    path = _st(tmp_path / "m.safetensors", tensors)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 20)
    got = _check(monkeypatch, path, least=4, on_error="report")
    assert list(got.arrays) == [f"t{i}" for i in range(4)]
    assert "run past the end" in got.skipped["t5"]
    npz = tmp_path / "m.npz"
    np.savez(npz, **tensors)
    cut = npz.read_bytes()[:-300]  # the central directory gone: not a zip
    npz.write_bytes(cut)
    with pytest.raises(SourceError, match="m.npz is not a valid .npz"):
        fastfinite.scan(str(npz))


def test_a_corrupt_compressed_member_goes_alone_and_says_so(tmp_path, monkeypatch):
    path = tmp_path / "c.npz"
    np.savez_compressed(path, **{f"m{i}": np.arange(50.0) + i for i in range(5)})
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("m2.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    raw[start + 20 : start + 30] = b"\x00" * 10  # its deflated stream broken
    path.write_bytes(bytes(raw))
    with pytest.raises(SourceError, match="member m2.npy"):
        fastfinite.scan(str(path))
    got = _check(monkeypatch, str(path), least=4, on_error="report")
    assert list(got.arrays) == ["m0", "m1", "m3", "m4"] and "m2" in got.skipped


# tensors scanned one by one (bfloat16, ``by``, ``fail_fast``...): small ones share one map


def test_tensors_scanned_one_by_one_share_one_map_of_the_file(tmp_path):
    """Every tensor of a file is a view of its one map (300 tensors of 2 GB: a map each
    cost a tenth of the scan), small and large alike; a pickled one maps its own bytes."""
    rng = np.random.default_rng(7)
    tensors = {f"t{i}": (rng.standard_normal((3, 5)) * 100).astype(ml_dtypes.bfloat16)
               for i in range(20)}  # fmt: skip
    tensors["t4"][1, 2] = np.nan
    tensors["big"] = rng.standard_normal(SMALL_NPY // 4 + 1).astype(np.float32)
    path = _st(tmp_path / "m.safetensors", tensors)
    with calls_of("__new__", "memmap.py") as maps:
        got = fastfinite.scan(path, by=0)
    assert maps[0] == 1  # the file's one map
    assert got.arrays["t4"].nan == 1 and got.arrays["t4"].locations[0].index == (1, 2)
    for key, x in tensors.items():
        r, want = got.arrays[key], x.astype(np.float64)
        assert r.count == x.size - r.nan and r.nan == int(np.isnan(want).sum()), key
        if key != "t4":
            assert r.mean == pytest.approx(float(want.mean()), rel=1e-9), key
    source = dict(open_source(path))["t7"]()  # pickled for a Dask worker: mapped there alone
    again = pickle.loads(pickle.dumps(source))
    assert again._shared is None and np.array_equal(again.array, tensors["t7"])


def test_a_file_cut_after_it_was_listed(tmp_path):
    tensors = {f"t{i}": np.full(4, i, np.float32) for i in range(6)}
    path = _st(tmp_path / "m.safetensors", tensors)
    members = open_source(path)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 20)
    with pytest.raises(SourceError, match="m.safetensors, member t5: the file is now shorter"):
        dict(members)["t5"]()
    got = fastfinite.scan(path, on_error="report")  # listed again: its header lies now
    assert list(got.arrays) == [f"t{i}" for i in range(4)] and "t5" in got.skipped


def test_a_header_of_more_axes_than_numpy_holds(tmp_path, monkeypatch):
    """A tensor (or a ``.npy`` file of a folder) whose header names 70 axes is an error
    naming it, as one by one, never NumPy's ``ValueError`` out of the batched path."""
    header = {"a": {"dtype": "F32", "shape": [1] * 70, "data_offsets": [0, 4]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}  # fmt: skip
    path = _header_file(tmp_path / "d.safetensors", header, np.zeros(3, np.float32).tobytes())
    for scan in (fastfinite.scan, lambda p: _one_by_one(monkeypatch, p)):
        with pytest.raises(SourceError, match="d.safetensors, member a: ValueError: maximum"):
            scan(path)
    folder = tmp_path / "set"
    folder.mkdir()
    with open(folder / "a.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": (1,) * 70}
        )
        f.write(np.float32(1).tobytes())
    np.save(folder / "b.npy", np.arange(3.0))
    got = _check(monkeypatch, str(folder), least=1, on_error="report")
    assert list(got.arrays) == ["b.npy"] and "found 70" in got.skipped["a.npy"]


@pytest.mark.parametrize("kind", ["safetensors", "npz", "npz_compressed", "folder"])
def test_checkpoints_on_dask_go_many_tensors_to_a_task(tmp_path, monkeypatch, kind, dask_client):
    """A checkpoint on the Dask engine (alone, or in a folder beside a .npy file): its
    small tensors ``SET_PART`` to a task, the file listed again where the task runs, its
    large ones each their own graph; the local engine's report, in a few tasks."""
    from fastfinite.engines import dask as dask_engine

    rng = np.random.default_rng(3)
    tensors = _tensors(rng, ["<f4", "<f2", "<i8"], [(4, 3), (), (0,)], 60, 5, big=(3, 40))
    tensors["layers.9.bf"] = np.ones(4, ml_dtypes.bfloat16)  # alone: its own graph
    if kind in ("safetensors", "folder"):
        path = _st(tmp_path / "m.safetensors", tensors)
    else:
        path = str(tmp_path / "m.npz")
        (np.savez if kind == "npz" else np.savez_compressed)(path, **tensors)
    if kind == "folder":
        np.save(tmp_path / "x.npy", np.array([np.nan, 1.0]))
        path = str(tmp_path)
    monkeypatch.setattr(dask_engine, "SET_PART", 16)
    kw = {"cast": ("float16",), "on_error": "report"}
    local = fastfinite.scan(path, **kw)
    _same(fastfinite.scan(path, scheduler="synchronous", **kw), local)
    remote = fastfinite.scan(path, scheduler=dask_client, **kw)  # NaN extrema: not ``is``
    assert json.dumps(remote.to_dict(), default=str) == json.dumps(local.to_dict(), default=str)
    assert list(remote.skipped.items()) == list(local.skipped.items())
    assert list(remote.bad_samples()) == list(local.bad_samples())
    tasks = len(dict(fastfinite.scan(path, compute=False, **kw).dask))
    assert tasks <= 61 // 16 + 1 + 3 * 6 + 12, tasks  # parts, and 3 large members' graphs


def test_a_sharded_checkpoint_rewritten_between_scans_on_dask(tmp_path, monkeypatch):
    """A process keeps a file's listing for the parts of one file; a sharded checkpoint's
    shards may change under an unchanged index: a shard rewritten (a tensor grown, a NaN
    planted) is read as it is now, on Dask as here."""
    import time

    st = pytest.importorskip("safetensors.numpy")
    a, b = np.ones(4, np.float32), np.ones(8, np.float32)
    st.save_file({"a": a, "b": b}, str(tmp_path / "s1.safetensors"))
    st.save_file({"c": np.ones(4, np.float32)}, str(tmp_path / "s2.safetensors"))
    index = tmp_path / "m.safetensors.index.json"
    weights = {"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}
    index.write_text(json.dumps({"metadata": {}, "weight_map": weights}))
    later = time.time_ns() + 10**10
    monkeypatch.setattr(time, "time_ns", lambda: later)  # the files look settled
    for data in (index, tmp_path):
        assert fastfinite.scan(data, scheduler="synchronous").ok
        b[5] = np.nan
        st.save_file({"a": np.ones(100, np.float32), "b": b}, str(tmp_path / "s1.safetensors"))
        here = fastfinite.scan(data)
        there = fastfinite.scan(data, scheduler="synchronous")
        assert here.nan == 1 and here.arrays["a"].shape == (100,)
        assert there.to_dict() == here.to_dict()
        b[5] = 1.0
        st.save_file({"a": a, "b": b}, str(tmp_path / "s1.safetensors"))


def test_a_checkpoints_one_map_gives_each_tensors_pages_back(tmp_path):
    """The tensors of a checkpoint are views of one map of the file: each region's pages
    are given back once it is scanned, so scanning 8x the bytes takes little more memory
    (a map that kept them would hold the whole file)."""
    grown = {}
    for n in (1, 8):
        tensors = {f"t{i}": np.full(6 << 20, i, np.float32) for i in range(n)}  # 24 MB each
        tensors["t0"][7] = np.nan
        path = _st(tmp_path / f"m{n}.safetensors", tensors)
        grown[n], nan, count = peak_growth(path)
        assert nan == 1 and count == n * (6 << 20) - 1
    extra = grown[8] - grown[1]
    assert extra < 64 * 1024, f"8x the bytes took {extra / 1024:.0f} MB more"
