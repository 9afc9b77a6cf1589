"""Checkpoints, one member per tensor: safetensors (one file, sharded through an index),
GGUF, ``.npz``, PyTorch zip and legacy checkpoints (written by hand: ``torchfiles``), and
dicts of arrays; every count, location and statistic against the NumPy oracle on the same
values, the totals against the sums of the tensors', files in memory (``open_buffer``) as on
disk, and the command line.

Part: ``fastfinite/sources/files.py`` and its readers (``safetensors``, ``gguf``, ``npz``,
``torch_zip``, ``unpickle``, ``tensors``).
"""

from __future__ import annotations

import json
import math
import os
import zipfile

import numpy as np
import pytest

import fastfinite
from fastfinite.sources.files import ARRAY_FILE_SUFFIXES, open_buffer, open_file
from fastfinite.sources.tensors import MappedTensor

from . import torchfiles as tf
from .helpers import assert_matches_oracle, run_cli

ml = pytest.importorskip("ml_dtypes")

CASTS = ("float16", "bfloat16", "float8_e4m3fn")


def planted(dtype, shape=(40, 50), seed=0) -> np.ndarray:
    """Values of ``dtype`` with NaN, +inf, -inf, values past float16 and bfloat16's range
    and tiny ones where the format has them."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True)
        x = x.astype(dtype)
        x.flat[-1] = info.max  # past float16 for the wide ones
        return x
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    n = x.size
    x.flat[[1, n // 2, n - 1]] = [np.nan, np.inf, -np.inf]
    x.flat[n - 2] = 1e38 if dtype.itemsize >= 2 else 400.0
    x.flat[n - 3] = 70000.0 if dtype.itemsize >= 2 else 300.0
    x.flat[n - 4] = 1e-30 if dtype.itemsize >= 2 else 0.001
    with np.errstate(all="ignore"):
        out = x.astype(dtype)
    if dtype.kind == "c":
        out.imag = x[::-1].reshape(shape)
    return out


def assert_group_matches(report, arrays: dict, cast=("float32",)):
    """Each member against the oracle, and the totals the sums of the members'."""
    assert list(report.arrays) == list(arrays)
    for key, x in arrays.items():
        assert_matches_oracle(report.arrays[key], x, cast=cast)
    subs = list(report.arrays.values())
    assert report.count == sum(r.count for r in subs)
    assert report.elements == sum(r.elements for r in subs)
    for kind, n in report.counts().items():
        assert n == sum(r.counts()[kind] for r in subs), kind
    for kind in report.counts():  # the first locations of each kind, in the members' order
        want = [(k, loc.index) for k, r in report.arrays.items() for loc in r.locations_of(kind)]
        got = [(loc.array, loc.index) for loc in report.locations_of(kind)]
        assert got == want[: report.max_locations], kind


# -- safetensors ---------------------------------------------------------------------------

ST_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
             "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
             "complex64")  # fmt: skip


def _dtype(name):
    return np.dtype(getattr(ml, name)) if not hasattr(np, name) else np.dtype(name)


def test_safetensors_every_dtype_per_tensor(tmp_path):
    from safetensors.numpy import save_file

    arrays = {
        f"layers.{i}.{name}": planted(_dtype(name), seed=i) for i, name in enumerate(ST_DTYPES)
    }
    arrays["scalar"] = np.array(np.inf, np.float32)
    arrays["empty"] = np.zeros((0, 3), np.float32)
    path = tmp_path / "model.safetensors"
    save_file(arrays, str(path))
    r = fastfinite.scan(str(path), cast=CASTS)
    # in the order of their bytes: save_file writes them by dtype size, then name
    header = json.loads(path.read_bytes()[8 : 8 + int.from_bytes(path.read_bytes()[:8], "little")])
    order = sorted(
        (k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"]
    )
    assert_group_matches(r, {k: arrays[k] for k in order}, cast=CASTS)
    assert r.arrays["layers.3.bfloat16"].dtype == "bfloat16"
    assert r.arrays["layers.3.bfloat16"].name == f"{path}:layers.3.bfloat16"
    assert not r.skipped


def test_safetensors_tensors_are_mapped_not_read(tmp_path):
    """Each tensor a memory map of its own bytes (the file is never read whole), in
    regions: the kernels' path on several regions agrees with the oracle."""
    from safetensors.numpy import save_file

    big = planted(np.float32, (600, 1000), seed=3)
    save_file({"a": big, "b": planted(ml.bfloat16, (300, 1000))}, str(tmp_path / "m.safetensors"))
    group = open_file(str(tmp_path / "m.safetensors"))
    source = dict(group)["a"]()
    assert isinstance(source, MappedTensor) and isinstance(source.array, np.memmap)
    assert source.array.base is not None or source.array.offset >= 0
    r = fastfinite.scan(str(tmp_path / "m.safetensors"), region_bytes=1 << 16, workers=2)
    assert_matches_oracle(r.arrays["a"], big)
    assert r.arrays["b"].count == 300 * 1000 - 3


def test_safetensors_sharded_through_index_and_directory(tmp_path):
    from safetensors.numpy import save_file

    d = tmp_path / "ckpt"
    d.mkdir()
    a, b, c = planted(np.float32, seed=1), planted(ml.bfloat16, seed=2), planted(np.float16, seed=3)
    save_file({"model.a": a, "model.b": b}, str(d / "model-00001-of-00002.safetensors"))
    save_file({"model.c": c}, str(d / "model-00002-of-00002.safetensors"))
    index = {"metadata": {"total_size": 1}, "weight_map": {
        "model.a": "model-00001-of-00002.safetensors", "model.b": "model-00001-of-00002.safetensors",
        "model.c": "model-00002-of-00002.safetensors"}}  # fmt: skip
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    for target in (d / "model.safetensors.index.json", d):
        r = fastfinite.scan(str(target))
        assert_group_matches(r, {"model.a": a, "model.b": b, "model.c": c})
    assert r.arrays["model.c"].name == os.path.join(
        str(d), "model-00002-of-00002.safetensors:model.c"
    )


def test_checkpoints_on_dask_processes_are_the_local_report(tmp_path):
    """A tensor pickles as where it is and is mapped (or dequantized) again in a worker
    process: the same report to the last bit, for each kind of checkpoint."""
    from safetensors.numpy import save_file

    x, y = planted(np.float32, (200, 300)), planted(ml.bfloat16, (100, 30))
    save_file({"x": x, "y": y}, str(tmp_path / "m.safetensors"))
    obj, _ = _torch_state()
    tf.write_zip(tmp_path / "m.pt", obj)
    _gguf_file(tmp_path / "m.gguf")
    np.savez_compressed(tmp_path / "m.npz", x=x)
    for name in ("m.safetensors", "m.pt", "m.gguf", "m.npz"):
        path = str(tmp_path / name)
        local = fastfinite.scan(path, region_bytes=1 << 12)
        graph = fastfinite.scan(path, region_bytes=1 << 12, scheduler="processes")
        assert graph.to_dict() == local.to_dict(), name


# -- .npz ----------------------------------------------------------------------------------


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_per_member(tmp_path, compressed):
    arrays = {"w": planted(np.float32), "f": np.asfortranarray(planted(np.float64, (30, 7))),
              "i": planted(np.int16), "s": np.array(np.nan)}  # fmt: skip
    path = tmp_path / "a.npz"
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    r = fastfinite.scan(str(path))
    assert_group_matches(r, arrays)
    source = dict(open_file(str(path)))["w"]()
    assert isinstance(source, MappedTensor) is not compressed  # stored: mapped in place


def test_npz_raw_bfloat16_members(tmp_path):
    """np.savez keeps bfloat16 as raw bytes (|V2): raw_dtype names them, as for .npy."""
    x = planted(ml.bfloat16)
    np.savez(tmp_path / "b.npz", x=x)
    r = fastfinite.scan(str(tmp_path / "b.npz"), raw_dtype="bfloat16")
    assert_matches_oracle(r.arrays["x"], x)
    plain = fastfinite.scan(str(tmp_path / "b.npz"))
    assert "x" in plain.skipped and "raw_dtype" in plain.skipped["x"]


# -- dicts ---------------------------------------------------------------------------------


def test_nested_dict_keys_joined_with_dots():
    x, y, z = planted(np.float32), planted(np.float64, (5, 5)), planted(ml.bfloat16, (9,))
    r = fastfinite.scan({"layers": {"0": {"w": x}, "1": {"w": y}}, "head": z, "name": "m"})
    assert list(r.arrays) == ["layers.0.w", "layers.1.w", "head"]
    assert_group_matches(r, {"layers.0.w": x, "layers.1.w": y, "head": z})
    assert "name" in r.skipped


def test_dict_with_one_key_twice_is_an_error():
    with pytest.raises(fastfinite.errors.SourceError, match="'a.b'"):
        fastfinite.scan({"a.b": np.zeros(2), "a": {"b": np.zeros(2)}})


# -- PyTorch -------------------------------------------------------------------------------


def _torch_state():
    w = planted(np.float32, (12, 10)).reshape(-1)
    s = tf.Storage(w, "0")
    bf = tf.Storage(planted(ml.bfloat16, (8, 4)), "1")
    h = tf.Storage(planted(np.float16, (50,)), "2")
    f8 = tf.Storage(planted(ml.float8_e4m3fn, (6, 5)), "3", "UntypedStorage")
    obj = {
        "model": tf.OrderedDict([
            ("layers", [
                {"w": tf.Tensor(s, 0, (12, 10))},
                {"w": tf.Tensor(s, 3, (5, 4), (1, 10))},  # a strided view of the same storage
                {"w": tf.Tensor(s, 0, (10, 12), (1, 10))},  # the transpose: Fortran order
            ]),
            ("bf", tf.Tensor(bf, 0, (8, 4), parameter=True)),
            ("h", tf.Tensor(h, 10, (20,))),
            ("f8", tf.Tensor(f8, 5, (5, 5), v3=True)),  # _rebuild_tensor_v3, as torch saves it
        ]),
        "epoch": 3, "lr": 0.1, "note": "text",
    }  # fmt: skip
    as_strided = np.lib.stride_tricks.as_strided
    want = {
        "model.layers.0.w": w.reshape(12, 10),
        "model.layers.1.w": as_strided(w[3:], (5, 4), (4, 40)),
        "model.layers.2.w": w.reshape(12, 10).T,
        "model.bf": bf.array.reshape(8, 4),
        "model.h": h.array[10:30],
        "model.f8": f8.array[5:].reshape(5, 5),
    }
    return obj, want


@pytest.mark.parametrize("layout", ["zip", "big-endian", "compressed", "legacy"])
def test_torch_checkpoint_without_torch(tmp_path, layout):
    obj, want = _torch_state()
    path = tmp_path / "model.pt"
    if layout == "legacy":
        tf.write_legacy(path, obj)
    else:
        tf.write_zip(path, obj, byteorder="big" if layout == "big-endian" else "little",
                     compress=layout == "compressed")  # fmt: skip
    r = fastfinite.scan(str(path), cast=CASTS)
    assert_group_matches(r, want, cast=CASTS)
    if layout in ("zip", "legacy"):  # in place: a map of the storage's bytes
        assert isinstance(dict(open_file(str(path)))["model.layers.0.w"](), MappedTensor)


def test_torch_tensor_pickled_alone_and_other_archive_names(tmp_path):
    x = planted(np.float64, (7, 3))
    tf.write_zip(tmp_path / "t.pth", tf.Tensor(tf.Storage(x, "0"), 0, (7, 3)), archive="t")
    r = fastfinite.scan(str(tmp_path / "t.pth"))
    assert_group_matches(r, {"tensor": x})


def test_torch_tensors_that_are_not_dense_are_listed_in_skipped(tmp_path):
    """Quantized, sparse and meta tensors: their torch rebuilds are never called, each is
    listed in ``skipped`` saying what it is, the dense ones are scanned."""
    w = planted(np.float32, (4, 4))
    layout = tf.Code("torch.serialization", "_get_layout", ("torch.sparse_coo",))
    odd = {
        "q": tf.Code("torch._utils", "_rebuild_qtensor", (
            tf.Storage(np.ones(4, np.int8), "1", "QInt8Storage"), 0, (4,), (1,),
            (tf.Global("torch", "per_tensor_affine"), 0.1, 0), False, tf.OrderedDict())),
        "sp": tf.Code("torch._utils", "_rebuild_sparse_tensor", (layout, ())),
        "meta": tf.Code("torch._utils", "_rebuild_meta_tensor_no_storage", (
            tf.Global("torch", "float32"), (2,), (1,), False)),
    }  # fmt: skip
    tf.write_zip(tmp_path / "m.pt", {"w": tf.Tensor(tf.Storage(w, "0"), 0, (4, 4)), **odd})
    r = fastfinite.scan(str(tmp_path / "m.pt"))
    assert_group_matches(r, {"w": w})
    assert r.skipped == {
        "q": f"{tmp_path / 'm.pt'}, tensor q: a quantized tensor (torch._utils._rebuild_qtensor): "
        "fastfinite reads dense tensors",
        "sp": f"{tmp_path / 'm.pt'}, tensor sp: a sparse tensor "
        "(torch._utils._rebuild_sparse_tensor): fastfinite reads dense tensors",
        "meta": f"{tmp_path / 'm.pt'}, tensor meta: a meta tensor (it holds no data) "
        "(torch._utils._rebuild_meta_tensor_no_storage): fastfinite reads dense tensors",
    }
    assert not r.findings


def test_torch_bin_suffix(tmp_path):
    obj, want = _torch_state()
    tf.write_zip(tmp_path / "pytorch_model.bin", obj)
    assert_group_matches(fastfinite.scan(str(tmp_path / "pytorch_model.bin")), want)


def test_real_torch_checkpoints_bit_for_bit(tmp_path):
    """Where torch is installed: its own files, zip and legacy, read without it, every
    tensor the same bits (checked by hand here with torch 2.13.0+cpu)."""
    torch = pytest.importorskip("torch")
    state = {"model": torch.nn.Linear(8, 4).state_dict(), "emb": torch.randn(5, 3).bfloat16(),
             "t": torch.arange(12.0).reshape(3, 4).t(), "sl": torch.arange(10.0)[2:8:2],
             "f8": torch.tensor([1.0, 500.0]).to(torch.float8_e4m3fn), "i": torch.arange(5),
             "epoch": 3}  # fmt: skip
    state["model"]["weight"][1, 2] = float("nan")
    state["q"] = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
    state["sp"] = torch.eye(3).to_sparse()
    for legacy in (False, True):
        path = tmp_path / f"m{legacy}.pt"
        torch.save(state, path, _use_new_zipfile_serialization=not legacy)
        got = {k: f() for k, f in open_file(str(path)) if k not in ("q", "sp")}
        assert list(got) == ["model.weight", "model.bias", "emb", "t", "sl", "f8", "i"]
        for key, source in got.items():
            t = state["model"][key[6:]] if key.startswith("model.") else state[key]
            want = t.detach().contiguous().view(torch.uint8).numpy().tobytes()
            assert np.ascontiguousarray(source.array).tobytes() == want, key
        r = fastfinite.scan(str(path))
        assert r.arrays["model.weight"].nan == 1 and list(r.skipped) == ["q", "sp"]


# -- GGUF ----------------------------------------------------------------------------------


def _gguf_file(path):
    gguf = pytest.importorskip("gguf")
    Q = gguf.GGMLQuantizationType
    a, h = planted(np.float32, (6, 32)), planted(np.float16, (64,))
    bf = planted(ml.bfloat16, (4, 8))
    rng = np.random.default_rng(5)
    q = (rng.standard_normal((40, 64)) * 2).astype(np.float32)
    q1 = (rng.standard_normal(256)).astype(np.float32)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("a", a)
    w.add_tensor("h", h)
    w.add_tensor("bf", bf.view(np.int16), raw_shape=bf.shape, raw_dtype=Q.BF16)
    w.add_tensor("q8", gguf.quants.quantize(q, Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("q4", gguf.quants.quantize(q1, Q.Q4_0), raw_dtype=Q.Q4_0)
    w.add_tensor("q81", np.zeros((2, 40), np.uint8), raw_dtype=Q.Q8_1)  # gguf cannot dequantize
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    dq = {"q8": gguf.quants.dequantize(gguf.quants.quantize(q, Q.Q8_0), Q.Q8_0),
          "q4": gguf.quants.dequantize(gguf.quants.quantize(q1, Q.Q4_0), Q.Q4_0)}  # fmt: skip
    return {"a": a, "h": h, "bf": bf, **dq}


def test_gguf_float_tensors_in_place_quantized_dequantized(tmp_path):
    want = _gguf_file(tmp_path / "m.gguf")
    for region_bytes in (None, 1024):  # rows of blocks a few at a time, and all at once
        r = fastfinite.scan(str(tmp_path / "m.gguf"), region_bytes=region_bytes)
        assert_group_matches(r, want)
        assert list(r.skipped) == ["q81"] and "Q8_1" in r.skipped["q81"]
    assert isinstance(dict(open_file(str(tmp_path / "m.gguf")))["bf"](), MappedTensor)


@pytest.mark.parametrize("kind", ["safetensors", "npz", "npz compressed", "pt", "pt strided"])
def test_cache_knows_each_tensor_of_a_file(tmp_path, kind):
    """A second scan recalls every tensor; a file rewritten is read again, its new NaN
    found (tensors of one file are other arrays to the cache)."""
    from safetensors.numpy import save_file

    x, y = planted(np.float32, (30, 20)), np.ones((4, 5))
    path = str(tmp_path / f"m.{kind.split()[0]}")

    def write(x):
        if kind == "safetensors":
            save_file({"x": x, "y": y}, path)
        elif kind.startswith("npz"):
            (np.savez_compressed if "compressed" in kind else np.savez)(path, x=x, y=y)
        else:
            s = tf.Storage(x, "0")
            t = (
                tf.Tensor(s, 0, (20, 30), (1, 20))
                if "strided" in kind
                else tf.Tensor(s, 0, x.shape)
            )
            tf.write_zip(path, {"x": t, "y": tf.Tensor(tf.Storage(y, "1"), 0, y.shape)})

    write(x)
    cache = str(tmp_path / "cache")
    first = fastfinite.scan(path, cache=cache)
    again = fastfinite.scan(path, cache=cache)
    assert again.counts() == first.counts()
    assert again.changes.rescanned == {"x": [], "y": []}
    x2 = x.copy()
    x2[0, 0] = np.nan
    write(x2)
    later = fastfinite.scan(path, cache=cache)
    assert later.nan == first.nan + 1


# -- in memory, the table, the command line --------------------------------------------------


def test_open_buffer_gives_what_the_file_gives(tmp_path):
    from safetensors.numpy import save_file

    x, y = planted(np.float32), planted(ml.bfloat16, (3, 5))
    save_file({"x": x, "y": y}, str(tmp_path / "m.safetensors"))
    np.savez(tmp_path / "m.npz", x=x, y=planted(np.int32))
    np.save(tmp_path / "m.npy", x)
    obj, _ = _torch_state()
    tf.write_zip(tmp_path / "m.pt", obj)
    for name in ("m.safetensors", "m.npz", "m.npy", "m.pt"):
        data = (tmp_path / name).read_bytes()
        mem, disk = open_buffer(name, data), open_file(str(tmp_path / name))
        if not isinstance(mem, list):
            mem, disk = [("", lambda m=mem: m)], [("", lambda d=disk: d)]
        assert [k for k, _ in mem] == [k for k, _ in disk]
        for (_, fm), (_, fd) in zip(mem, disk):
            a, b = fm(), fd()
            assert a.dtype == b.dtype and a.shape == b.shape
            assert np.asarray(a.array).tobytes() == np.asarray(b.array).tobytes()
            if a.nbytes:  # viewed in place in the bytes given, never copied
                assert np.shares_memory(np.frombuffer(data, np.uint8), a.array), name
    with pytest.raises(fastfinite.errors.SourceError, match="m.gguf"):
        open_buffer("m.gguf", b"GGUF")


def test_the_table_knows_its_suffixes(tmp_path):
    assert set(ARRAY_FILE_SUFFIXES) >= {".safetensors", ".gguf", ".npz", ".pt", ".pth",
                                        ".bin", ".npy"}  # fmt: skip
    assert open_file(str(tmp_path / "a.txt")) is None
    assert open_file(str(tmp_path)) is None  # a directory without a safetensors index


def test_cli_scan_checkpoint_exit_codes(tmp_path):
    from safetensors.numpy import save_file

    save_file({"w": np.ones((3, 3), np.float32)}, str(tmp_path / "ok.safetensors"))
    save_file({"w": np.ones(3, np.float32), "b": planted(ml.bfloat16, (4, 50))},
              str(tmp_path / "bad.safetensors"))  # fmt: skip
    ok = run_cli("scan", tmp_path / "ok.safetensors")
    assert ok.returncode == 0, ok.stderr
    bad = run_cli("scan", tmp_path / "bad.safetensors")
    assert bad.returncode == 1 and "[b]" in bad.stdout, bad.stdout
    np.savez(tmp_path / "a.npz", x=np.ones(3))
    assert run_cli("scan", tmp_path / "a.npz").returncode == 0


def test_statistics_of_members_and_totals(tmp_path):
    """The group's statistics are Chan's merge of the tensors': the mean and std of all
    their finite values."""
    from safetensors.numpy import save_file

    a, b = planted(np.float32, seed=1), planted(np.float64, (7, 9), seed=2)
    save_file({"a": a, "b": b}, str(tmp_path / "m.safetensors"))
    r = fastfinite.scan(str(tmp_path / "m.safetensors"))
    values = np.concatenate([a.ravel().astype(np.float64), b.ravel()])
    values = values[np.isfinite(values)]
    assert r.count == values.size
    assert math.isclose(r.mean, values.mean(), rel_tol=1e-9)
    assert math.isclose(r.std, values.std(), rel_tol=1e-7)
    assert r.min == values.min() and r.max == values.max()


def test_zip_that_is_no_checkpoint(tmp_path):
    with zipfile.ZipFile(tmp_path / "x.pt", "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(fastfinite.errors.SourceError, match="x.pt is not a PyTorch checkpoint"):
        fastfinite.scan(str(tmp_path / "x.pt"))


def test_small_tensors_side_by_side_give_the_reports_of_a_scan_in_turn(tmp_path, monkeypatch):
    """A checkpoint's small tensors are scanned side by side, one per core, a large one
    alone on every core between them: the report is a scan in turn's, to the last bit."""
    from safetensors.numpy import save_file

    import fastfinite.engines.local as local

    arrays = {f"t{i:02d}": planted(np.float32 if i % 2 else ml.bfloat16, (50, 40), seed=i)
              for i in range(13)}  # fmt: skip
    save_file(arrays, str(tmp_path / "m.safetensors"))
    big = np.zeros(9_000_000, np.float32)  # 36 MB: scanned alone, in parts
    big[8_999_999] = np.inf
    data = {"a": arrays["t00"], "big": big, **{k: v for k, v in arrays.items() if k != "t00"}}
    side = [fastfinite.scan(str(tmp_path / "m.safetensors")), fastfinite.scan(data)]
    monkeypatch.setattr(local, "default_workers", lambda: 1)
    in_turn = [fastfinite.scan(str(tmp_path / "m.safetensors")), fastfinite.scan(data)]
    assert [r.to_dict() for r in side] == [r.to_dict() for r in in_turn]
    assert list(side[1].arrays) == list(data) and side[1].arrays["big"].posinf == 1
