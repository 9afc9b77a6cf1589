"""Checkpoints and shard sets attacked: values at the exact edges of the casts in every
dtype a format defines, byte orders and layouts its writers allow, names that hide other
names, links, and skip-lists of samples in folders with dots. Each answer is checked
against NumPy (``helpers.assert_matches_oracle``, bfloat16/float8 through ml_dtypes), each
hostile file against the exact error naming the file and the member.

Part: ``fastfinite/sources/safetensors.py``, ``npz.py``, ``unpickle.py``, ``torch_zip.py``,
``tars.py``, ``arrow.py``, ``gguf.py``, ``fastfinite/report/samples.py``.
"""

from __future__ import annotations

import io
import json
import os
import struct
import tarfile
import warnings
import zipfile

import numpy as np
import pytest

import fastfinite
from fastfinite.errors import InvalidArgumentError, SourceError

from . import torchfiles as tf
from .helpers import assert_matches_oracle, assert_one_line_error, run_cli
from .test_checkpoints import assert_group_matches
from .test_checkpoints_hostile import PWNED, no_pwn  # noqa: F401 - no_pwn: a fixture

ml = pytest.importorskip("ml_dtypes")

CASTS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
# the edges of the casts: float16's max and its rounding edge (65520 rounds to inf), its
# smallest subnormal and half of it, float8's max (448, 57344) and their rounding edges,
# float32's max, and values no float fits
EDGES = np.array([65504, 65519.99, 65520, -65520, 5.96e-8, 2.98e-8, 3e-8, 448, 464, -464,
                  57344, 61440, 3.39e38, 3.4e38, 1e-40, 1e-300, 1e300, 0, -0.0,
                  np.nan, np.inf, -np.inf])  # fmt: skip
FLOATS = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def edge_arrays() -> dict[str, np.ndarray]:
    """The edges in every float dtype, the integer extremes and the edges in every integer
    dtype, a bool, a 0-d, an empty tensor, and names holding ``/``, ``:`` and ``.``."""
    out = {}
    with np.errstate(all="ignore"):
        for name in FLOATS:
            out[name] = EDGES.astype(getattr(ml, name, None) or name)
    for name in INTS:
        info = np.iinfo(name)
        ints = [info.min, info.max, 0, 1, 448, 464, 65504, 65520, 57344, 61440]
        out[name] = np.array([min(max(v, info.min), info.max) for v in ints], dtype=name)
    out["bool"] = np.array([True, False, True])
    out["scalar"] = np.array(np.float32(np.nan))
    out["empty"] = np.zeros((0, 3), np.float32)
    out["layers/0:attn.w"] = np.array([[np.inf, 65520]], np.float32)
    return out


def _npy(x: np.ndarray) -> bytes:
    f = io.BytesIO()
    np.save(f, x)
    return f.getvalue()


def _tar(path, members: list[tuple[str, bytes]]) -> str:
    with tarfile.open(path, "w") as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return str(path)


def _safetensors(path, text: bytes, data: bytes) -> str:
    """A safetensors file of exactly this header text (no padding added)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    return str(path)


# -- safetensors ---------------------------------------------------------------------------


def test_safetensors_cast_edges_in_every_dtype(tmp_path):
    from safetensors.numpy import save_file

    arrays = edge_arrays()
    save_file(arrays, str(tmp_path / "m.safetensors"))
    r = fastfinite.scan(str(tmp_path / "m.safetensors"), cast=CASTS)
    assert sorted(r.arrays) == sorted(arrays) and not r.skipped
    for key, x in arrays.items():
        assert_matches_oracle(r.arrays[key], x, cast=CASTS)
    # by hand, without the oracle: float32 -> float16 overflows at 65520, not at 65519.99
    f32 = arrays["float32"]
    with np.errstate(over="ignore"):
        want = np.isfinite(f32) & ~np.isfinite(f32.astype(np.float16))
    assert r.arrays["float32"].cast["float16"].overflow == int(want.sum()) == 4  # +-65520, e38
    assert r.arrays["layers/0:attn.w"].cast["float16"].overflow == 1
    assert r.arrays["scalar"].nan == 1 and r.arrays["empty"].count == 0


def test_safetensors_every_bit_pattern_of_the_small_floats(tmp_path):
    """All 256 float8 and all 65,536 float16 and bfloat16 bit patterns (every NaN encoding,
    subnormal, infinity), each location, count and statistic against NumPy."""
    b8, b16 = np.arange(256, dtype=np.uint8), np.arange(65536, dtype=np.uint16)
    arrays = {"F8_E4M3": b8.view(ml.float8_e4m3fn), "F8_E5M2": b8.view(ml.float8_e5m2),
              "BF16": b16.view(ml.bfloat16), "F16": b16.view(np.float16)}  # fmt: skip
    header, data = {}, b""
    for code, x in arrays.items():
        header[code] = {"dtype": code, "shape": [x.size], "data_offsets": [len(data), len(data) + x.nbytes]}  # fmt: skip
        data += x.tobytes()
    text = json.dumps(header).encode()
    path = _safetensors(tmp_path / "m.safetensors", text + b" " * (-len(text) % 8), data)
    r = fastfinite.scan(path, cast=CASTS, max_locations=70_000)
    for code, x in arrays.items():
        assert_matches_oracle(r.arrays[code], x, cast=CASTS, max_locations=70_000)
    assert [r.arrays[c].nan for c in arrays] == [2, 6, 254, 2046]


def test_safetensors_header_naming_a_tensor_twice_is_an_error(tmp_path):
    """JSON keeps the last of two entries of one name: the first tensor's bytes (its NaN)
    were silently never scanned."""
    a = np.array([np.nan, 1, 2, 3], np.float32)
    b = np.array([1, 2, 3, 4], np.float32)
    text = (b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
            b'"w":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}}')  # fmt: skip
    path = _safetensors(tmp_path / "m.safetensors", text, a.tobytes() + b.tobytes())
    for on_error in ("raise", "report"):  # the header itself is ambiguous
        with pytest.raises(SourceError, match=r"m\.safetensors: its header names 'w' twice"):
            fastfinite.scan(path, on_error=on_error)
    assert_one_line_error(run_cli("scan", path), "m.safetensors", "'w' twice")


def test_safetensors_header_spaces_metadata_and_order(tmp_path):
    """Trailing spaces after the JSON, ``__metadata__``, entries listed out of the order of
    their bytes, an empty tensor whose offsets lie inside another's: all read as written."""
    a = np.array([np.nan, 1, 2, 3], np.float32)
    b = np.array([-np.inf, 70000.0], np.float64)
    header = {
        "b": {"dtype": "F64", "shape": [2], "data_offsets": [16, 32]},
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
        "e": {"dtype": "F16", "shape": [0, 4], "data_offsets": [8, 8]},
    }
    text = json.dumps(header).encode() + b"   "
    path = _safetensors(tmp_path / "m.safetensors", text, a.tobytes() + b.tobytes())
    r = fastfinite.scan(path, cast=CASTS)
    assert_group_matches(
        r, {"a": a.reshape(2, 2), "e": np.zeros((0, 4), np.float16), "b": b}, cast=CASTS
    )


def test_safetensors_tensors_at_unaligned_offsets(tmp_path):
    """Offsets the format allows but its writer never makes: float32 and float64 at byte 3
    after 3 bytes of uint8, large enough to be scanned in parts; alone and in a tar."""
    rng = np.random.default_rng(5)
    f = rng.standard_normal(300_001).astype(np.float32)
    f[[7, 100_000, 300_000]] = np.nan, np.inf, 70000
    d = f[:50_001].astype(np.float64)
    d[3] = -np.inf
    u = np.array([1, 2, 3], np.uint8)
    header = {
        "u": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]},
        "f": {"dtype": "F32", "shape": [f.size], "data_offsets": [3, 3 + f.nbytes]},
        "d": {"dtype": "F64", "shape": [d.size], "data_offsets": [3 + f.nbytes, 3 + f.nbytes + d.nbytes]},
    }  # fmt: skip
    text = json.dumps(header).encode()
    data = u.tobytes() + f.tobytes() + d.tobytes()
    path = _safetensors(tmp_path / "m.safetensors", text + b" " * (-len(text) % 8), data)
    want = {"u": u, "f": f, "d": d}
    assert_group_matches(fastfinite.scan(path, cast=CASTS), want, cast=CASTS)
    tar = _tar(tmp_path / "s.tar", [("000001.m.safetensors", open(path, "rb").read())])
    r = fastfinite.scan(tar, cast=CASTS)
    assert_group_matches(r, {f"s.tar/000001.m.safetensors/{k}": x for k, x in want.items()}, CASTS)


def test_safetensors_header_longer_than_64_kib_alone_and_in_a_tar(tmp_path):
    """1,500 tensors (a real model's shard): its header is 147 kB. In a tar it was "cannot
    read ... TypeError: unsupported operand type(s) for +=: 'memoryview' and 'memoryview'"."""
    from safetensors.numpy import save

    arrays = {f"model.layers.{i}.self_attn.q_proj.weight": np.full(2, i, np.float32)
              for i in range(1500)}  # fmt: skip
    arrays["model.layers.7.x"] = np.array([np.nan, -np.inf], np.float32)
    data = save(arrays)
    assert struct.unpack("<Q", data[:8])[0] > 1 << 16
    (tmp_path / "m.safetensors").write_bytes(data)
    path = _tar(tmp_path / "s.tar", [("000001.m.safetensors", data)])
    for target, prefix in ((tmp_path / "m.safetensors", ""), (path, "s.tar/000001.m.safetensors/")):
        r = fastfinite.scan(str(target))
        assert sorted(r.arrays) == sorted(prefix + k for k in arrays)
        assert (r.nan, r.neginf, r.count) == (1, 1, 3000)
        assert_matches_oracle(r.arrays[prefix + "model.layers.7.x"], arrays["model.layers.7.x"])


def test_a_hugging_face_cache_snapshot(tmp_path):
    """A Hugging Face hub snapshot: its index and shards are links into ``../../blobs``.
    The index names its shards inside its folder, so they are read where the links lead;
    a shard named outside the folder (``../x``) is still refused."""
    from safetensors.numpy import save_file

    (tmp_path / "blobs").mkdir()
    snap = tmp_path / "snapshots" / "0123abc"
    snap.mkdir(parents=True)
    x = np.array([np.nan, 1.0], np.float32)
    save_file({"a": x}, str(tmp_path / "blobs" / "9f1e"))
    index = {"weight_map": {"a": "model-00001-of-00001.safetensors"}}
    (tmp_path / "blobs" / "77aa").write_text(json.dumps(index))
    os.symlink("../../blobs/9f1e", snap / "model-00001-of-00001.safetensors")
    os.symlink("../../blobs/77aa", snap / "model.safetensors.index.json")
    assert_group_matches(fastfinite.scan(str(snap)), {"a": x})
    assert_group_matches(fastfinite.scan(str(snap / "model.safetensors.index.json")), {"a": x})
    (snap / "model.safetensors.index.json").unlink()
    (snap / "m.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "../../blobs/9f1e"}})
    )
    with pytest.raises(SourceError, match="outside the index's folder"):
        fastfinite.scan(str(snap / "m.safetensors.index.json"))


def test_safetensors_index_naming_one_shard_two_ways_or_a_tensor_in_two(tmp_path):
    """``./s2.safetensors`` and ``s2.safetensors`` are one shard (each of its tensors was
    an error, "both ./s2.safetensors and s2.safetensors hold it"); a tensor two shards hold
    is an error naming both, or with ``on_error="report"`` a finding."""
    from safetensors.numpy import save_file

    d = tmp_path / "ckpt"
    d.mkdir()
    x, y = np.array([np.nan, 1.0], np.float32), np.array([np.inf], np.float32)
    save_file({"a": x}, str(d / "s1.safetensors"))
    save_file({"b": y, "c": x}, str(d / "s2.safetensors"))
    index = d / "m.safetensors.index.json"
    wmap = {"a": "s1.safetensors", "b": "./s2.safetensors", "c": "s2.safetensors"}
    index.write_text(json.dumps({"weight_map": wmap}))
    assert_group_matches(fastfinite.scan(str(index)), {"a": x, "b": y, "c": x})
    save_file({"a": y, "b": y, "c": x}, str(d / "s2.safetensors"))  # now a in both
    with pytest.raises(SourceError, match=r"tensor a: both .*s1\.safetensors and .*s2\.safe"):
        fastfinite.scan(str(index))
    r = fastfinite.scan(str(index), on_error="report")
    assert_group_matches(r, {"b": y, "c": x})
    assert "both" in r.skipped["a"] and [f.kind for f in r.findings] == ["unreadable_member"]
    assert_one_line_error(run_cli("scan", index), "tensor a: both")


def test_safetensors_index_through_a_linked_folder(tmp_path):
    """A checkpoint folder reached through a link to it: its shards are in its folder (they
    were refused as "outside the index's folder"); a shard is held to the folder by its
    name, not by where a link in the folder leads."""
    from safetensors.numpy import save_file

    real = tmp_path / "real"
    real.mkdir()
    x = np.array([np.nan, 1.0], np.float32)
    save_file({"a": x}, str(real / "s1.safetensors"))
    (real / "m.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "s1.safetensors"}})
    )
    os.symlink(real, tmp_path / "link")
    for target in (tmp_path / "link" / "m.safetensors.index.json", tmp_path / "link"):
        r = fastfinite.scan(str(target))
        assert_group_matches(r, {"a": x})
    # a shard named in the folder is read where its link leads (a Hugging Face snapshot);
    # a shard named outside it never is
    save_file({"c": x}, str(tmp_path / "blob.safetensors"))
    os.symlink(tmp_path / "blob.safetensors", real / "s2.safetensors")
    wmap = {"a": "s1.safetensors", "c": "s2.safetensors"}
    (real / "m.safetensors.index.json").write_text(json.dumps({"weight_map": wmap}))
    assert_group_matches(fastfinite.scan(str(tmp_path / "link")), {"a": x, "c": x})
    wmap["c"] = "../blob.safetensors"
    (real / "m.safetensors.index.json").write_text(json.dumps({"weight_map": wmap}))
    with pytest.raises(SourceError, match=r"tensor c: .*blob\.safetensors is outside the index"):
        fastfinite.scan(str(tmp_path / "link"))


def test_a_checkpoint_folder_never_hides_the_files_its_index_does_not_name(tmp_path):
    """A folder of a sharded checkpoint also holding a ``consolidated.safetensors`` (with a
    NaN), a ``.npy`` and an ``original/`` folder: the scan said nothing of them (nan 0,
    nothing skipped); they are listed in ``skipped`` with a ``stray_file`` warning."""
    from safetensors.numpy import save_file

    d = tmp_path / "ckpt"
    (d / "original").mkdir(parents=True)
    x = np.array([1.0, 2.0], np.float32)
    save_file({"a": x}, str(d / "model-00001-of-00001.safetensors"))
    save_file({"a": np.array([np.nan], np.float32)}, str(d / "consolidated.safetensors"))
    np.save(d / "extra.npy", np.array([np.inf]))
    (d / "config.json").write_text("{}")
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00001.safetensors"}})
    )
    r = fastfinite.scan(str(d))
    assert_group_matches(r, {"a": x})
    what = "that model.safetensors.index.json does not name: not scanned (scan it alone)"
    assert r.skipped == {
        "consolidated.safetensors": f"a checkpoint file {what}",
        "extra.npy": f"a .npy file {what}",
        "original": f"a folder {what}",
    }
    assert [(f.kind, f.severity) for f in r.findings] == [("stray_file", "warning")] * 3
    # the index given alone is the checkpoint alone
    r = fastfinite.scan(str(d / "model.safetensors.index.json"))
    assert list(r.arrays) == ["a"] and not r.skipped


# -- .npz ------------------------------------------------------------------------------------


def _layouts() -> dict[str, np.ndarray]:
    x = np.random.default_rng(4).standard_normal((5, 7)) * 30000
    x[1, 2], x[3, 4], x[0, 6] = np.nan, np.inf, 65520
    with np.errstate(over="ignore"):
        half = x.astype(">f2")
    return {
        "big": x.astype(">f8"),
        "fortran": np.asfortranarray(x.astype(np.float32)),
        "big_fortran": np.asfortranarray(x.astype(">f4")),
        "big_half": half,
        "big_int": np.arange(-5, 5).astype(">i4"),
        "empty": np.zeros((3, 0)),
        "scalar": np.array(np.inf),
    }


def _zip(path, arrays: dict, compress=lambda i: False, zip64=False) -> str:
    with zipfile.ZipFile(path, "w", allowZip64=True) as zf:
        for i, (k, x) in enumerate(arrays.items()):
            kind = zipfile.ZIP_DEFLATED if compress(i) else zipfile.ZIP_STORED
            if zip64:
                info = zipfile.ZipInfo(k + ".npy")
                info.compress_type = kind
                with zf.open(info, "w", force_zip64=True) as f:
                    f.write(_npy(x))
            else:
                zf.writestr(k + ".npy", _npy(x), kind)
    return str(path)


@pytest.mark.parametrize("layout", ["stored", "compressed", "mixed", "zip64"])
def test_npz_byte_orders_and_layouts(tmp_path, layout):
    arrays = _layouts()
    compress = {"stored": lambda i: False, "compressed": lambda i: True,
                "mixed": lambda i: i % 2 == 1, "zip64": lambda i: i % 2 == 0}[layout]  # fmt: skip
    path = _zip(tmp_path / "a.npz", arrays, compress, zip64=layout == "zip64")
    r = fastfinite.scan(path, cast=CASTS)
    assert_group_matches(r, arrays, cast=CASTS)


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_member_named_twice_hides_nothing(tmp_path, compressed):
    """A zip may hold a name twice (np.load reads the last): the first member, with its
    NaN, was silently never scanned."""
    first, second = np.array([np.nan, 1.0]), np.array([np.inf])
    kind = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile: "Duplicate name"
        with zipfile.ZipFile(tmp_path / "a.npz", "w", kind) as zf:
            zf.writestr("x.npy", _npy(first))
            zf.writestr("x.npy", _npy(second))
    r = fastfinite.scan(str(tmp_path / "a.npz"))
    assert_group_matches(r, {"x": first, "x (2)": second})
    assert r.bad_samples() == ["x", "x (2)"]
    # the same .npz as a member of a tar
    _tar(tmp_path / "s.tar", [("000001.a.npz", (tmp_path / "a.npz").read_bytes())])
    r = fastfinite.scan(str(tmp_path / "s.tar"))
    assert_group_matches(r, {"s.tar/000001.a.npz/x": first, "s.tar/000001.a.npz/x (2)": second})


def _central_offset_to_first(path) -> None:
    """Point the central directory's second entry at the first member's local header."""
    raw = bytearray(open(path, "rb").read())
    second = raw.index(b"PK\x01\x02", raw.index(b"PK\x01\x02") + 4)
    struct.pack_into("<I", raw, second + 42, 0)
    open(path, "wb").write(bytes(raw))


def test_a_zip_whose_directory_points_at_another_member(tmp_path):
    """The central directory says ``b.npy`` is at the local header of ``a.npy`` (zipfile and
    np.load refuse it): a's bytes, and its NaN, were scanned as b's, b's never."""
    with zipfile.ZipFile(tmp_path / "m.npz", "w") as zf:
        zf.writestr("a.npy", _npy(np.array([np.nan, 1.0])))
        zf.writestr("b.npy", _npy(np.array([2.0, 3.0])))
    _central_offset_to_first(tmp_path / "m.npz")
    words = r"m\.npz, member b\.npy: the local zip header at offset 0 names b'a\.npy'"
    with pytest.raises(SourceError, match=words):
        fastfinite.scan(str(tmp_path / "m.npz"))
    r = fastfinite.scan(str(tmp_path / "m.npz"), on_error="report")
    assert list(r.arrays) == ["a"] and "names b'a.npy'" in r.skipped["b"]
    _tar(tmp_path / "s.tar", [("000001.m.npz", (tmp_path / "m.npz").read_bytes())])
    with pytest.raises(SourceError, match=r"000001\.m\.npz:b\.npy: the local zip header"):
        fastfinite.scan(str(tmp_path / "s.tar"))
    # a torch checkpoint: storage 1's entry pointed at data.pkl's header
    s0, s1 = tf.Storage(np.ones(2, np.float32), "0"), tf.Storage(np.ones(2, np.float32), "1")
    tf.write_zip(tmp_path / "m.pt", {"a": tf.Tensor(s0), "b": tf.Tensor(s1)})
    with zipfile.ZipFile(tmp_path / "m.pt") as zf:
        names = [i.filename for i in zf.infolist()]
    assert names[:1] == ["archive/data.pkl"]
    raw = bytearray((tmp_path / "m.pt").read_bytes())
    entry = raw.index(b"archive/data/1", raw.index(b"PK\x01\x02")) - 46  # its central entry
    struct.pack_into("<I", raw, entry + 42, 0)
    (tmp_path / "m.pt").write_bytes(bytes(raw))
    with pytest.raises(SourceError, match=r"m\.pt, tensor b: the local zip header at offset 0"):
        fastfinite.scan(str(tmp_path / "m.pt"))


# -- tars ------------------------------------------------------------------------------------


def test_tar_members_of_every_byte_order_and_layout(tmp_path):
    arrays = _layouts()
    npz = _zip(tmp_path / "m.npz", arrays, lambda i: i % 2 == 1)
    members = [(f"000001.{k}.npy", _npy(x)) for k, x in arrays.items()]
    path = _tar(tmp_path / "s.tar", members + [("000002.m.npz", open(npz, "rb").read())])
    r = fastfinite.scan(path, cast=CASTS)
    want = {f"s.tar/000001.{k}.npy": x for k, x in arrays.items()}
    want |= {f"s.tar/000002.m.npz/{k}": x for k, x in arrays.items()}
    assert_group_matches(r, want, cast=CASTS)
    assert r.bad_samples() == ["s.tar/000001", "s.tar/000002"]


def test_a_tar_member_named_as_an_array_of_another_hides_nothing(tmp_path):
    """A member ``000001.a.npz/x`` beside the member ``000001.a.npz`` (array ``x``, a NaN):
    both were keyed ``s.tar/000001.a.npz/x``, and the skipped one hid the array: nothing
    scanned, nan 0."""
    npz = _zip(tmp_path / "a.npz", {"x": np.array([np.nan])})
    for other in (b"a label", _npy(np.array([np.inf]))):
        path = _tar(tmp_path / "s.tar", [("000001.a.npz", open(npz, "rb").read()),
                                          ("000001.a.npz/x", other)])  # fmt: skip
        r = fastfinite.scan(path)
        assert (list(r.arrays), r.nan) == (["s.tar/000001.a.npz/x"], 1)
        assert list(r.skipped) == ["s.tar/000001.a.npz/x (2)"]
        assert r.bad_samples() == ["s.tar/000001"]


def test_bad_samples_of_tar_members_in_folders_with_dots(tmp_path):
    """WebDataset keys a member by its folders and its file name up to the first dot: a
    folder ``dir.v1`` made every sample of it ``s.tar/dir`` (one that does not exist)."""
    bad, good = np.array([1.0, np.nan]), np.ones(2)
    npz = _zip(tmp_path / "a.npz", {"a.b": bad})
    path = _tar(tmp_path / "s.tar", [
        ("dir.v1/000005.x.npy", _npy(bad)),
        ("dir.v1/000006.x.npy", _npy(good)),
        ("dir.v1/000007.y.npz", open(npz, "rb").read()),
    ])  # fmt: skip
    r = fastfinite.scan(path)
    assert list(r.arrays) == ["s.tar/dir.v1/000005.x.npy", "s.tar/dir.v1/000006.x.npy",
                              "s.tar/dir.v1/000007.y.npz/a.b"]  # fmt: skip
    assert r.bad_samples() == ["s.tar/dir.v1/000005", "s.tar/dir.v1/000007"]
    out = tmp_path / "bad.txt"
    cli = run_cli("scan", path, "--bad-samples", out)
    assert cli.returncode == 1, cli.stderr
    assert out.read_text() == "s.tar/dir.v1/000005\ns.tar/dir.v1/000007\n"


def test_one_sample_key_in_two_shards(tmp_path):
    d = tmp_path / "shards"
    d.mkdir()
    a, b = np.array([np.nan, 1.0]), np.array([2.0, -np.inf])
    _tar(d / "shard-000000.tar", [("000001.x.npy", _npy(a))])
    _tar(d / "shard-000001.tar", [("000001.x.npy", _npy(b))])
    r = fastfinite.scan(str(d))
    assert_group_matches(r, {"shard-000000.tar/000001.x.npy": a,
                             "shard-000001.tar/000001.x.npy": b})  # fmt: skip
    assert r.bad_samples() == ["shard-000000.tar/000001", "shard-000001.tar/000001"]


@pytest.mark.parametrize("fmt", ["gnu", "posix"])
def test_a_sparse_tar_member_is_never_read_as_its_stored_bytes(tmp_path, fmt):
    """GNU tar -S stores a member's data without its holes: its bytes in the tar are not
    its contents. They were read in place, the holes' length taken from the members after
    it: garbage scanned silently (here a NaN and values of 1e294 that the file lacks)."""
    import shutil
    import subprocess

    if not shutil.which("tar"):
        pytest.skip("no tar program to write a sparse member")
    src = tmp_path / "src"
    src.mkdir()
    x = np.zeros(300_000)
    x[[5, -1]] = np.inf, np.nan
    data = _npy(x)
    with open(src / "000001.x.npy", "wb") as f:  # a file with a hole: its zeros not written
        f.write(data[:4096])
        f.truncate(len(data))
        f.seek(len(data) - 8)
        f.write(data[-8:])
    np.save(src / "000002.z.npy", np.ones(400_000))  # after it: what the holes read
    path = tmp_path / "s.tar"
    cmd = ["tar", "-S", f"--format={fmt}", "-cf", str(path),
           "000001.x.npy", "000002.z.npy"]  # fmt: skip
    if subprocess.run(cmd, cwd=src, capture_output=True).returncode:
        pytest.skip("this tar cannot write sparse members")
    with tarfile.open(path) as t:
        if t.getmember("000001.x.npy").sparse is None:
            pytest.skip("tar wrote no holes")
    with pytest.raises(SourceError, match=r"s\.tar, member 000001\.x\.npy: it is a sparse"):
        fastfinite.scan(str(path))
    r = fastfinite.scan(str(path), on_error="report")
    assert_group_matches(r, {"s.tar/000002.z.npy": np.ones(400_000)})
    assert "sparse member" in r.skipped["s.tar/000001.x.npy"]
    assert r.bad_samples() == ["s.tar/000001"]
    assert_one_line_error(run_cli("scan", path), "s.tar, member 000001.x.npy", "sparse")


# -- PyTorch ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["zip", "legacy"])
def test_torch_keys_that_join_to_one_name_are_an_error(tmp_path, layout):
    """``{"a.b": x, "a": {"b": y}}``: both are ``a.b`` once joined; one tensor (x's NaN)
    was silently never scanned."""
    x = tf.Tensor(tf.Storage(np.array([np.nan, 1.0], np.float32), "0"))
    y = tf.Tensor(tf.Storage(np.array([2.0, -np.inf], np.float32), "1"))
    path = tmp_path / "model.pt"
    (tf.write_zip if layout == "zip" else tf.write_legacy)(path, {"a.b": x, "a": {"b": y}})
    for on_error in ("raise", "report"):
        with pytest.raises(SourceError, match=r"model\.pt: two tensors under the key 'a\.b'"):
            fastfinite.scan(str(path), on_error=on_error)
    assert_one_line_error(run_cli("scan", path), "model.pt", "two tensors under the key")


def test_torch_dict_pickled_under_two_keys(tmp_path):
    """``{"model": d, "ema": d}``, one dict pickled once: its tensors were listed under
    ``model`` only, ``ema.w`` missing from the report (the walk passed a container seen
    before over)."""
    x = np.array([np.nan, 1.0], np.float32)
    shared = {"w": tf.Tensor(tf.Storage(x, "0"))}
    tf.write_zip(tmp_path / "m.pt", {"model": shared, "ema": shared})
    r = fastfinite.scan(str(tmp_path / "m.pt"))
    assert_group_matches(r, {"model.w": x, "ema.w": x})


def test_torch_containers_shared_a_billion_ways_are_an_error(tmp_path, monkeypatch):
    """64 levels of a list holding one list twice: 2**64 paths, a pickle of a few hundred
    bytes. Walked along every path, it is stopped by a bound, with an error."""
    from fastfinite.sources import unpickle

    monkeypatch.setattr(unpickle, "MAX_VISITS", 10_000)
    storage = tf.Storage(np.ones(2, np.float32), "0")
    leaf = [tf.Tensor(storage)]
    for _ in range(40):
        leaf = [leaf, leaf]
    with zipfile.ZipFile(tmp_path / "m.pt", "w") as zf:  # tf.write_zip walks every path
        zf.writestr("archive/data.pkl", tf.dumps({"w": leaf}))
        zf.writestr("archive/data/0", storage.array.tobytes())
    with pytest.raises(
        SourceError, match=r"m\.pt: more than 10000 tensors and containers, counted"
    ):
        fastfinite.scan(str(tmp_path / "m.pt"))


@pytest.mark.parametrize("layout", ["zip", "compressed", "legacy"])
def test_torch_views_of_zero_strides_and_no_dimensions(tmp_path, layout):
    x = np.array([np.nan, 1.0, 2.0, np.inf], np.float32)
    s = tf.Storage(x, "0")
    obj = {
        "expanded": tf.Tensor(s, 1, (3, 3), (0, 1)),  # torch's expand(): a stride of 0
        "empty": tf.Tensor(s, 100, (0, 5), (5, 1)),  # empty: its offset reaches nothing
        "scalar": tf.Tensor(s, 3, (), ()),
        "one": tf.Tensor(s, 3, (1, 1), (7, 9)),  # strides of length-1 axes mean nothing
        "back": tf.Tensor(s, 0, (2, 2), (1, 2)),  # the transpose of a 2x2
    }
    path = tmp_path / "m.pt"
    if layout == "legacy":
        tf.write_legacy(path, obj)
    else:
        tf.write_zip(path, obj, compress=layout == "compressed")
    as_strided = np.lib.stride_tricks.as_strided
    want = {
        "expanded": as_strided(x[1:], (3, 3), (0, 4)),
        "empty": np.zeros((0, 5), np.float32),
        "scalar": np.array(x[3]),
        "one": x[3:].reshape(1, 1),
        "back": x.reshape(2, 2).T,
    }
    assert_group_matches(fastfinite.scan(str(path), cast=CASTS), want, cast=CASTS)


@pytest.mark.parametrize("layout", ["zip", "big-endian", "compressed", "legacy"])
def test_torch_cast_edges_in_every_storage_dtype(tmp_path, layout):
    """Views of float8_e5m2 (strided, or read from a compressed storage) were "TypeError:
    data type '<f1' not understood": ml_dtypes' typestr that ``as_strided`` cannot read."""
    arrays = {k: x for k, x in edge_arrays().items() if k in tf.STORAGE_OF}
    obj, want = {}, {}
    for i, (k, x) in enumerate(arrays.items()):
        if k.startswith("float8"):  # as torch saves them: an untyped storage, the dtype named
            s = tf.Storage(x, str(i), "UntypedStorage")
            obj[k] = tf.Tensor(s, 0, x.shape, v3=True)
            obj[k + "[1::2]"] = tf.Tensor(s, 1, (x.size // 2,), (2,), v3=True)  # a view
            want[k + "[1::2]"] = x[1::2]
        else:
            obj[k] = tf.Tensor(tf.Storage(x, str(i)), 0, x.shape)
        want[k] = x
    want = {k: want[k] for k in obj}  # in the checkpoint's order
    path = tmp_path / "m.pt"
    if layout == "legacy":
        tf.write_legacy(path, obj)
    else:
        tf.write_zip(path, obj, byteorder="big" if layout == "big-endian" else "little",
                     compress=layout == "compressed")  # fmt: skip
    assert_group_matches(fastfinite.scan(str(path), cast=CASTS), want, cast=CASTS)


@pytest.mark.parametrize("glob", ["numpy.core.multiarray._reconstruct",
                                  "torch.nn.modules.linear.Linear",
                                  "collections.defaultdict", "builtins.getattr"])  # fmt: skip
def test_pickle_global_of_another_module_is_refused(tmp_path, glob):
    module, name = glob.rsplit(".", 1)
    obj = {"w": tf.Tensor(tf.Storage(np.ones(2, np.float32), "0")),
           "extra": tf.Code(module, name, ())}  # fmt: skip
    tf.write_zip(tmp_path / "m.pt", obj)
    for on_error in ("raise", "report"):
        with pytest.raises(SourceError, match=f"m.pt, member archive/data.pkl: refused to "
                                              f"load global {glob}"):  # fmt: skip
            fastfinite.scan(str(tmp_path / "m.pt"), on_error=on_error)


@pytest.mark.usefixtures("no_pwn")
def test_torch_members_of_a_tar_views_and_code(tmp_path):
    """``.pth`` members of a tar: big-endian, compressed, strided views, read in place; one
    with code is refused naming the tar, the member and the global (it was called "not a
    valid PyTorch (zip) checkpoint", which it is)."""
    x = np.array([np.nan, 1, 2, np.inf, 5, 6], np.float32)
    s = tf.Storage(x, "0")
    obj = {"t": tf.Tensor(s, 1, (2, 2), (1, 2)), "e": tf.Tensor(s, 2, (3,), (0,))}
    tf.write_zip(tmp_path / "big.pth", obj, byteorder="big")
    tf.write_zip(tmp_path / "comp.pth", obj, compress=True)
    tf.write_zip(tmp_path / "evil.pth", {"w": tf.Tensor(s), "h": tf.Code(args=(f"touch {PWNED}",))})
    path = _tar(tmp_path / "s.tar", [(f"00000{i}.{n}.pth", (tmp_path / f"{n}.pth").read_bytes())
                                     for i, n in enumerate(("big", "comp", "evil"))])  # fmt: skip
    as_strided = np.lib.stride_tricks.as_strided
    want = {"t": as_strided(x[1:], (2, 2), (4, 8)), "e": as_strided(x[2:], (3,), (0,))}
    words = r"s\.tar/000002\.evil\.pth, member archive/data\.pkl: refused to load global os\.system"
    with pytest.raises(SourceError, match=words) as e:
        fastfinite.scan(path)
    assert "not a valid" not in str(e.value)
    r = fastfinite.scan(path, on_error="report")
    assert_group_matches(r, {f"s.tar/00000{i}.{n}.pth/{k}": v for i, n in enumerate(("big", "comp"))
                             for k, v in want.items()})  # fmt: skip
    assert "refused to load global os.system" in r.skipped["s.tar/000002.evil.pth"]
    assert r.bad_samples() == ["s.tar/000000", "s.tar/000001", "s.tar/000002"]


# -- GGUF ------------------------------------------------------------------------------------


@pytest.mark.parametrize("endian", ["LITTLE", "BIG"])
def test_gguf_cast_edges_in_both_byte_orders(tmp_path, endian):
    gguf = pytest.importorskip("gguf")
    with np.errstate(over="ignore"):
        f = EDGES.astype(np.float32).reshape(2, 11)
        arrays = {"f32": f, "f16": f.astype(np.float16), "f64": EDGES.reshape(2, 11),
                  "i8": np.array([[-128, 127, 0, 5]], np.int8),
                  "i16": np.array([-(2**15), 2**15 - 1, 448, 464], np.int16),
                  "i32": np.array([2**31 - 1, -(2**31), 65520, 0], np.int32),
                  "i64": np.array([2**63 - 1, -(2**63), 65504, 65520], np.int64)}  # fmt: skip
        bf = EDGES.astype(ml.bfloat16).reshape(2, 11)
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama",
                        endianess=getattr(gguf.GGUFEndian, endian))  # fmt: skip
    for k, x in arrays.items():
        w.add_tensor(k, x.copy())  # the writer swaps the bytes of a big-endian file in place
    w.add_tensor("bf16", bf.view(np.uint16).copy(), raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = fastfinite.scan(str(tmp_path / "m.gguf"), cast=CASTS)
    assert_group_matches(r, arrays | {"bf16": bf}, cast=CASTS)


# -- Arrow -------------------------------------------------------------------------------------


def test_arrow_lists_with_nulls_and_fixed_size_lists_of_float16(tmp_path):
    pa = pytest.importorskip("pyarrow")
    from pyarrow import feather

    child = pa.array(np.array([1, 2, np.inf, 65504, -65504, np.nan, 7, 8, 9, 1, 1, 1],
                              np.float16))  # fmt: skip
    half = pa.FixedSizeListArray.from_arrays(child, 3, mask=pa.array([False, False, True, False]))
    table = pa.table({
        "half": half,  # a null row over child values 7, 8, 9: a row of NaN
        "f": pa.array([[1.0, None, 3.0], None, [np.inf, 5.0, 70000.0], [1e-9, 2.0, 3.0]],
                      pa.list_(pa.float32())),
        "i": pa.array([[1, None, 3], None, [4, 5, 6], [7, 8, 9]], pa.list_(pa.int64())),
        "fi": pa.array([[1, 2], None, [3, 4], [5, 6]], pa.list_(pa.int32(), 2)),
    })  # fmt: skip
    nan3 = [np.nan] * 3
    want = {
        "half": np.array([[1, 2, np.inf], [65504, -65504, np.nan], nan3, [1, 1, 1]], np.float16),
        "f": np.array([[1, np.nan, 3], nan3, [np.inf, 5, 70000], [1e-9, 2, 3]], np.float32),
        "i": np.array([[1, np.nan, 3], nan3, [4, 5, 6], [7, 8, 9]]),
        "fi": np.array([[1, 2], [np.nan, np.nan], [3, 4], [5, 6]]),
    }
    path = str(tmp_path / "t.feather")
    feather.write_feather(pa.concat_tables([table.slice(1, 2), table]), path, chunksize=2)
    r = fastfinite.scan(path, cast=CASTS)
    assert list(r.arrays) == list(want)
    for key, x in want.items():
        assert_matches_oracle(r.arrays[key], np.concatenate([x[1:3], x]), cast=CASTS)
    assert r.nan == sum(sub.nan for sub in r.arrays.values()) == 26  # null rows count as NaN
    assert r.bad_samples() == [(path, row) for row in range(5)]  # the last row is finite


def test_arrow_integers_past_2_53_with_nulls(tmp_path):
    """Integers with nulls read as float64, rounded, as pandas and the Parquet reader read
    them: pyarrow's checked cast raised its own ArrowInvalid, a traceback."""
    pa = pytest.importorskip("pyarrow")
    from pyarrow import feather, parquet

    table = pa.table({
        "u": pa.array([2**64 - 1, None, 3], pa.uint64()),
        "i": pa.array([2**63 - 1, None, -(2**63)], pa.int64()),
        "l": pa.array([[2**62 + 1, None], None, [1, 2]], pa.list_(pa.int64())),
    })  # fmt: skip
    want = {
        "u": np.array([2.0**64, np.nan, 3.0]),
        "i": np.array([2.0**63, np.nan, -(2.0**63)]),
        "l": np.array([[2.0**62, np.nan], [np.nan, np.nan], [1.0, 2.0]]),
    }
    feather.write_feather(table, str(tmp_path / "t.feather"))
    parquet.write_table(table.select(["u", "i"]), str(tmp_path / "t.parquet"))
    r = fastfinite.scan(str(tmp_path / "t.feather"), cast=CASTS)
    assert list(r.arrays) == list(want)
    for key, x in want.items():
        assert_matches_oracle(r.arrays[key], x, cast=CASTS)
    p = fastfinite.scan(str(tmp_path / "t.parquet"), cast=CASTS)
    for key in ("u", "i"):
        assert p.arrays[key].counts() == r.arrays[key].counts()
        assert (p.arrays[key].min, p.arrays[key].max) == (r.arrays[key].min, r.arrays[key].max)


def test_a_datasets_split_with_a_file_missing(tmp_path):
    """``data-00000-of-00002.arrow`` missing (a download cut short): the other file's rows
    were numbered from 0, so the skip-list named row 1 for datasets' row 4."""
    pa = pytest.importorskip("pyarrow")
    d = tmp_path / "ds"
    d.mkdir()
    (d / "dataset_info.json").write_text("{}")
    (d / "state.json").write_text("{}")
    t1, t2 = pa.table({"v": [1.0, 2.0, 3.0]}), pa.table({"v": [4.0, np.nan]})
    for k, t in enumerate((t1, t2)):
        with pa.ipc.new_stream(d / f"data-{k:05d}-of-00002.arrow", t.schema) as w:
            w.write_table(t)
    assert fastfinite.scan(str(d)).bad_samples() == [(str(d), 4)]
    (d / "data-00000-of-00002.arrow").unlink()
    with pytest.raises(SourceError, match=r"ds: its split data has 2 files, 1 missing "
                                          r"\(-00000-of-00002\.arrow"):  # fmt: skip
        fastfinite.scan(str(d))
    assert_one_line_error(run_cli("scan", d), "split data has 2 files, 1 missing")


def test_bad_samples_of_tables_whose_column_names_hold_a_slash(tmp_path):
    """In a set, a table's column is keyed ``"t.feather/emb/v1"``: its rows were named
    ``("t.feather/emb", row)``, a table that does not exist."""
    pa = pytest.importorskip("pyarrow")
    from pyarrow import feather, parquet

    d = tmp_path / "set"
    d.mkdir()
    table = pa.table({"emb/v1": [1.0, np.nan, 3.0], "ok": [np.inf, 1.0, 1.0]})
    feather.write_feather(table, str(d / "t.feather"))
    parquet.write_table(table, str(d / "p.parquet"))
    np.save(d / "a.npy", np.zeros(2))
    r = fastfinite.scan(str(d))
    assert list(r.arrays) == ["a.npy", "p.parquet/emb/v1", "p.parquet/ok", "t.feather/emb/v1",
                              "t.feather/ok"]  # fmt: skip
    assert r.bad_samples() == [("p.parquet", 1), ("p.parquet", 0), ("t.feather", 1),
                               ("t.feather", 0)]  # fmt: skip
    out = tmp_path / "bad.txt"
    assert run_cli("scan", d, "--bad-samples", out).returncode == 1
    assert out.read_text() == "p.parquet\t1\np.parquet\t0\nt.feather\t1\nt.feather\t0\n"


def test_bad_samples_of_a_dataframe_indexed_by_text_or_time():
    """A DataFrame's rows are its index labels: text and timestamps raised ValueError and
    TypeError out of ``bad_samples()`` (``int(label)``)."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"x": [1.0, np.nan, 3.0], "y": [np.inf, 1.0, 1.0]}, index=["a", "b", "c"])
    assert fastfinite.scan(df).bad_samples() == [("DataFrame", "b"), ("DataFrame", "a")]
    days = pd.date_range("2020-01-01", periods=3)
    df = pd.DataFrame({"x": [1.0, np.nan, 3.0]}, index=days)
    assert fastfinite.scan(df).bad_samples() == [("DataFrame", days[1])]
    df = pd.DataFrame({"x": [np.nan, np.nan, 3.0]}, index=[1, "a", 2])  # labels of two types
    assert sorted(fastfinite.scan(df).bad_samples(), key=repr) == [("DataFrame", "a"),
                                                                    ("DataFrame", 1)]  # fmt: skip
    df = pd.DataFrame({"x": [1.0, np.nan]}, index=[10, 20])
    assert fastfinite.scan(df).bad_samples() == [("DataFrame", 20)]
    # by=0: positions, every one (labels and positions were mixed: 4 keys for 2 rows)
    df = pd.DataFrame({"x": [1.0, np.nan, 3.0], "y": [np.inf, 1, 1]}, index=[10, 20, 30])
    assert fastfinite.scan(df, by=0).bad_samples() == [("DataFrame", 0), ("DataFrame", 1)]


# -- sets: on_error="report", links, and a Dask cluster ---------------------------------------


def _mixed_set(d) -> dict[str, np.ndarray]:
    """A folder of every checkpoint kind, with the layouts above; the arrays by key."""
    from safetensors.numpy import save_file

    d.mkdir()
    arrays = _layouts()
    want = {}
    _zip(d / "a.npz", arrays, lambda i: i % 2 == 1)
    want |= {f"a.npz/{k}": x for k, x in arrays.items()}
    edges = edge_arrays()
    save_file(edges, str(d / "e.safetensors"))
    want |= {f"e.safetensors/{k}": edges[k] for k in sorted(edges)}
    _tar(d / "s.tar", [(f"000001.{k}.npy", _npy(x)) for k, x in arrays.items()])
    want |= {f"s.tar/000001.{k}.npy": x for k, x in arrays.items()}
    x = np.array([np.nan, 1.0, 2.0, np.inf], np.float32)
    tf.write_zip(d / "t.pt", {"v": tf.Tensor(tf.Storage(x, "0"), 0, (2, 2), (1, 2))})
    want["t.pt/v"] = x.reshape(2, 2).T
    return want


def test_a_set_with_a_lying_member_reports_it_and_scans_the_rest(tmp_path):
    d = tmp_path / "set"
    want = _mixed_set(d)
    text = b'{"bad":{"dtype":"F32","shape":[100],"data_offsets":[0,400]}}'
    _safetensors(d / "z.safetensors", text, b"\0" * 16)
    with pytest.raises(SourceError, match=r"z\.safetensors, tensor bad: .*run past the end"):
        fastfinite.scan(str(d), cast=CASTS)
    r = fastfinite.scan(str(d), cast=CASTS, on_error="report")
    assert sorted(r.arrays) == sorted(want)
    for key, x in want.items():
        assert_matches_oracle(r.arrays[key], x, cast=CASTS)
    (f,) = [f for f in r.findings if f.kind == "unreadable_member"]
    assert "z.safetensors, tensor bad" in f.message and f.severity == "error"
    assert "z.safetensors/bad" in r.bad_samples()


def test_a_set_never_leaves_its_folder_through_links(tmp_path):
    from safetensors.numpy import save_file

    outside = tmp_path / "outside"
    outside.mkdir()
    save_file({"w": np.array([np.nan], np.float32)}, str(outside / "o.safetensors"))
    _tar(outside / "o.tar", [("000001.x.npy", _npy(np.array([np.inf])))])
    d = tmp_path / "set"
    d.mkdir()
    np.save(d / "ok.npy", np.array([1.0, -np.inf]))
    os.symlink(outside / "o.safetensors", d / "o.safetensors")
    os.symlink(outside / "o.tar", d / "o.tar")
    os.symlink(outside, d / "sub")
    r = fastfinite.scan(str(d))
    assert list(r.arrays) == ["ok.npy"] and (r.nan, r.posinf, r.neginf) == (0, 0, 1)
    assert sorted(r.skipped) == ["o.safetensors", "o.tar", "sub"]


def test_a_glob_matches_names_starting_with_an_underscore(tmp_path):
    """A glob matches as the shell's does (``glob.glob``): ``*`` takes names starting with
    ``_``, and names starting with ``.`` only where the pattern's part starts with one (a
    directory's walk leaves both out, as pyarrow does)."""
    import glob

    d = tmp_path / "parts"
    d.mkdir()
    np.save(d / "_a.npy", np.array([np.nan]))
    np.save(d / ".h.npy", np.array([np.inf]))
    np.save(d / "b.npy", np.ones(2))
    (d / ".c").mkdir()
    np.save(d / ".c" / "a.npy", np.ones(1))
    np.save(d / ".c" / ".h.npy", np.ones(1))
    for pattern in ("*.npy", "_*.npy", ".*.npy", "[._]*.npy", ".*/*.npy", "**/*.npy", ".c/.*"):
        found = glob.glob(f"{d}/{pattern}", recursive=True)
        want = sorted(os.path.relpath(p, d) for p in found)
        prefix = ".c/" if pattern.startswith(".c/") else ""
        assert sorted(prefix + k for k in fastfinite.scan(f"{d}/{pattern}").arrays) == want, pattern
    r = fastfinite.scan(f"{d}/*.npy")
    assert list(r.arrays) == ["_a.npy", "b.npy"] and (r.nan, r.posinf) == (1, 0)
    assert list(fastfinite.scan(str(d)).arrays) == ["b.npy"]


def test_a_set_on_a_dask_cluster_gives_the_local_report(tmp_path, dask_client):
    d = tmp_path / "set"
    _mixed_set(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile: "Duplicate name"
        with zipfile.ZipFile(d / "dup.npz", "w") as zf:
            zf.writestr("x.npy", _npy(np.array([np.nan, 1.0])))
            zf.writestr("x.npy", _npy(np.array([np.inf])), zipfile.ZIP_DEFLATED)
    for target in (str(d), f"{d}/*.npz", str(d / "s.tar")):
        local = fastfinite.scan(target, cast=CASTS)
        remote = fastfinite.scan(target, cast=CASTS, scheduler=dask_client)
        assert remote.to_dict() == local.to_dict(), target
    text = b'{"bad":{"dtype":"F32","shape":[100],"data_offsets":[0,400]}}'
    _safetensors(d / "z.safetensors", text, b"\0" * 16)
    local = fastfinite.scan(str(d), on_error="report")
    remote = fastfinite.scan(str(d), on_error="report", scheduler=dask_client)
    assert remote.to_dict() == local.to_dict()
    assert remote.bad_samples() == local.bad_samples()
    # a sharded checkpoint's folder with a file its index does not name
    (d / "m.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"float32": "e.safetensors", "bool": "e.safetensors"}})
    )
    local = fastfinite.scan(str(d), cast=CASTS)
    assert "a.npz" in local.skipped and local.arrays["float32"].count == 18
    assert fastfinite.scan(str(d), cast=CASTS, scheduler=dask_client).to_dict() == local.to_dict()


def test_an_npz_member_beside_one_of_its_key_hides_nothing(tmp_path):
    """``x`` (not a ``.npy`` member, skipped) beside ``x.npy`` (an array) would share the
    key ``x``: in a set, the skip hid the array and its NaN was never counted. The array's
    key is ``x (2)``."""
    d = tmp_path / "set"
    d.mkdir()
    with zipfile.ZipFile(d / "a.npz", "w") as zf:
        zf.writestr("x", b"not an array")
        zf.writestr("x.npy", _npy(np.array([np.nan, 1.0])))
    np.save(d / "c.npy", np.ones(3))
    alone = fastfinite.scan(str(d / "a.npz"))
    assert list(alone.arrays) == ["x (2)"] and list(alone.skipped) == ["x"] and alone.nan == 1
    r = fastfinite.scan(str(d))
    assert sorted(r.arrays) == ["a.npz/x (2)", "c.npy"] and list(r.skipped) == ["a.npz/x"]
    assert (r.nan, r.count) == (1, 4)


def test_a_repeated_name_is_never_given_a_key_another_member_holds(tmp_path):
    """``x.npy``, ``x (2).npy``, ``x.npy`` again: the repeat is keyed ``x (3)``, not
    ``x (2)``, whose array (and its NaN) it would hide."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile: "Duplicate name"
        with zipfile.ZipFile(tmp_path / "d.npz", "w") as zf:
            zf.writestr("x.npy", _npy(np.zeros(2)))
            zf.writestr("x (2).npy", _npy(np.array([np.nan])))
            zf.writestr("x.npy", _npy(np.zeros(3)))
    r = fastfinite.scan(str(tmp_path / "d.npz"))
    assert list(r.arrays) == ["x", "x (2)", "x (3)"]
    assert (r.nan, r.count, r.arrays["x (2)"].nan, r.arrays["x (3)"].count) == (1, 5, 1, 3)


def test_by_on_a_checkpoint_scans_its_scalars_whole(tmp_path):
    """``by=0`` on a checkpoint: each tensor's rows, and a 0-d tensor (BatchNorm's
    ``num_batches_tracked``) scanned whole, as it has no row: the whole scan failed on it.
    An array alone that is 0-d is still an error with ``by=0``."""
    from safetensors.numpy import save_file

    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    w[1, 2] = np.nan
    save_file({"w": w, "step": np.array(np.inf, np.float32)}, str(tmp_path / "m.safetensors"))
    r = fastfinite.scan(str(tmp_path / "m.safetensors"), by=0)
    assert r.arrays["step"].by is None and (r.arrays["step"].posinf, r.arrays["step"].count) == (
        1,
        0,
    )
    assert r.arrays["w"].by == (0,)
    assert r.arrays["w"].slices.nan.tolist() == np.isnan(w).sum(axis=1).tolist()
    assert (r.nan, r.posinf, r.count) == (1, 1, 11)
    assert list(r.arrays) == ["step", "w"] and r.bad_samples() == ["step", ("w", 1)]
    with pytest.raises(InvalidArgumentError, match="axis 0 is out of range"):
        fastfinite.scan(np.array(5.0), by=0)
