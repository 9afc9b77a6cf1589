"""Checkpoints that lie, are cut short or carry code: an error naming the file and the
tensor (the command line: exit 2, one line), or with ``on_error="report"`` an
``unreadable_member`` finding naming them, listed in ``skipped``, the other tensors scanned.
A pickle's code is never run.

Part: ``fastfinite/sources/safetensors.py``, ``npz.py``, ``torch_zip.py``, ``unpickle.py``,
``gguf.py``, ``tensors.checked_group``.
"""

from __future__ import annotations

import json
import os
import struct
import zipfile

import numpy as np
import pytest

import fastfinite
from fastfinite.errors import SourceError

from . import torchfiles as tf
from .helpers import assert_matches_oracle, assert_one_line_error, run_cli


def safetensors_file(path, header: dict, data: bytes, pad: bool = True) -> str:
    """A safetensors file written by hand: whatever its header says."""
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    return str(path)


GOOD = np.arange(6, dtype=np.float32)
GOOD[2] = np.nan


def lying(path, entry: dict, data_extra: bytes = b"") -> str:
    """A file of a good tensor ``good`` (bytes [0, 24)) and a lying one, ``bad``."""
    header = {"good": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}, "bad": entry}
    return safetensors_file(path, header, GOOD.tobytes() + b"\0" * 16 + data_extra)


LIES = {
    "offsets past the end": ({"dtype": "F32", "shape": [100], "data_offsets": [24, 424]},
                             "run past the end"),
    "overlapping": ({"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}, "overlap"),
    "shape not its bytes": ({"dtype": "F32", "shape": [3, 3], "data_offsets": [24, 40]},
                            "is 36 bytes"),
    "negative shape": ({"dtype": "F32", "shape": [-4], "data_offsets": [24, 40]},
                       "negative"),
    "unknown dtype": ({"dtype": "F13", "shape": [4], "data_offsets": [24, 40]},
                      "unknown dtype 'F13'"),
    "offsets reversed": ({"dtype": "F32", "shape": [0], "data_offsets": [40, 24]},
                         "data_offsets"),
    "shape of text": ({"dtype": "F32", "shape": "4", "data_offsets": [24, 40]},
                      "not a list of integers"),
}  # fmt: skip


@pytest.mark.parametrize("lie", sorted(LIES))
def test_safetensors_header_that_lies(tmp_path, lie):
    entry, words = LIES[lie]
    path = lying(tmp_path / "m.safetensors", entry)
    with pytest.raises(SourceError) as e:
        fastfinite.scan(path)
    assert "m.safetensors, tensor bad" in str(e.value) and words in str(e.value), str(e.value)
    r = fastfinite.scan(path, on_error="report")
    assert list(r.arrays) == ["good"]
    assert_matches_oracle(r.arrays["good"], GOOD)
    assert words in r.skipped["bad"]
    (f,) = [f for f in r.findings if f.kind == "unreadable_member"]
    assert "tensor bad" in f.message and f.severity == "error" and not r.ok


@pytest.mark.parametrize(
    "content, words",
    [
        (b"", "shorter than its 8-byte header length"),
        (b"\x05\0\0", "shorter than its 8-byte header length"),
        (struct.pack("<Q", 1 << 40) + b"{}", "header length 1099511627776 runs past the end"),
        (struct.pack("<Q", 4) + b"{{{{", "not valid JSON"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 4) + b"\xff\xfe{}", "not valid JSON"),
    ],
    ids=["empty", "short", "length past the end", "bad json", "json list", "not utf-8"],
)
def test_safetensors_unreadable_header_is_an_error_either_way(tmp_path, content, words):
    path = tmp_path / "m.safetensors"
    path.write_bytes(content)
    for on_error in ("raise", "report"):
        with pytest.raises(SourceError, match=words) as e:
            fastfinite.scan(str(path), on_error=on_error)
        assert "m.safetensors" in str(e.value)


def test_safetensors_truncated_file(tmp_path):
    from safetensors.numpy import save_file

    save_file({"a": np.ones(10, np.float32), "b": np.ones(1000, np.float32)},
              str(tmp_path / "m.safetensors"))  # fmt: skip
    data = (tmp_path / "m.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:-100])
    with pytest.raises(SourceError, match=r"cut.safetensors, tensor b: .*run past the end"):
        fastfinite.scan(str(tmp_path / "cut.safetensors"))
    r = fastfinite.scan(str(tmp_path / "cut.safetensors"), on_error="report")
    assert list(r.arrays) == ["a"] and "b" in r.skipped


def _shards(d, missing=False, outside=False):
    from safetensors.numpy import save_file

    d.mkdir()
    save_file({"a": np.ones(4, np.float32)}, str(d / "s1.safetensors"))
    if not missing:
        save_file({"b": np.ones(4, np.float32)}, str(d / "s2.safetensors"))
    wmap = {"a": "s1.safetensors", "b": "s2.safetensors"}
    if outside:
        save_file({"c": np.ones(4, np.float32)}, str(d.parent / "evil.safetensors"))
        wmap["c"] = "../evil.safetensors"
    (d / "m.safetensors.index.json").write_text(json.dumps({"weight_map": wmap}))
    return str(d / "m.safetensors.index.json")


def test_shard_missing_from_an_index(tmp_path):
    index = _shards(tmp_path / "ckpt", missing=True)
    with pytest.raises(SourceError, match=r"tensor b: the shard .*s2.safetensors is missing"):
        fastfinite.scan(index)
    r = fastfinite.scan(str(tmp_path / "ckpt"), on_error="report")
    assert list(r.arrays) == ["a"] and "s2.safetensors is missing" in r.skipped["b"]
    assert [f.kind for f in r.findings] == ["unreadable_member"]


def test_index_never_leaves_its_folder(tmp_path):
    index = _shards(tmp_path / "ckpt", outside=True)
    with pytest.raises(SourceError, match=r"tensor c: .*evil.safetensors is outside the index"):
        fastfinite.scan(index)


def test_index_that_does_not_hold_its_tensor(tmp_path):
    index = _shards(tmp_path / "ckpt")
    wmap = json.loads(open(index).read())["weight_map"]
    wmap["z"] = "s1.safetensors"
    open(index, "w").write(json.dumps({"weight_map": wmap}))
    with pytest.raises(SourceError, match=r"tensor z: the index puts it in .*s1.safetensors"):
        fastfinite.scan(index)


def test_index_that_is_no_index(tmp_path):
    (tmp_path / "m.safetensors.index.json").write_text('{"weights": 1}')
    with pytest.raises(SourceError, match="no weight_map"):
        fastfinite.scan(str(tmp_path / "m.safetensors.index.json"))


# -- .npz ----------------------------------------------------------------------------------


def _corrupt_member(path, member: str) -> None:
    """Flip bytes in the middle of a member's compressed stream."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    raw = bytearray(open(path, "rb").read())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    mid = start + info.compress_size // 2
    raw[mid : mid + 8] = b"\xff" * 8
    open(path, "wb").write(bytes(raw))


def test_npz_corrupt_compressed_member(tmp_path):
    rng = np.random.default_rng(0)
    good = rng.standard_normal(1000)
    np.savez_compressed(tmp_path / "a.npz", good=good, bad=rng.standard_normal(1000))
    _corrupt_member(tmp_path / "a.npz", "bad.npy")
    with pytest.raises(SourceError, match=r"a.npz, member bad.npy"):
        fastfinite.scan(str(tmp_path / "a.npz"))
    r = fastfinite.scan(str(tmp_path / "a.npz"), on_error="report")
    assert list(r.arrays) == ["good"] and "bad" in r.skipped
    assert_matches_oracle(r.arrays["good"], good)


def test_npz_stored_member_whose_header_lies(tmp_path):
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (1000,), }"
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 80
    with zipfile.ZipFile(tmp_path / "a.npz", "w") as zf:
        zf.writestr("x.npy", npy)
        zf.writestr("ok.npy", _npy(np.ones(3)))
    with pytest.raises(SourceError, match=r"a.npz, member x.npy: its header says float64"):
        fastfinite.scan(str(tmp_path / "a.npz"))
    r = fastfinite.scan(str(tmp_path / "a.npz"), on_error="report")
    assert list(r.arrays) == ["ok"] and "x" in r.skipped


def _npy(x) -> bytes:
    import io

    f = io.BytesIO()
    np.save(f, x)
    return f.getvalue()


def test_truncated_npz(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.ones(100))
    data = (tmp_path / "a.npz").read_bytes()
    (tmp_path / "a.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match="a.npz is not a valid .npz"):
        fastfinite.scan(str(tmp_path / "a.npz"))


# -- PyTorch -------------------------------------------------------------------------------

PWNED = "/tmp/fastfinite_pwned_by_a_pickle"


@pytest.fixture
def no_pwn():
    if os.path.exists(PWNED):
        os.remove(PWNED)
    yield
    assert not os.path.exists(PWNED), "a pickle's code ran"


CODE = {
    "os.system": tf.Code("os", "system", (f"touch {PWNED}",)),
    "posix.system": tf.Code("posix", "system", (f"touch {PWNED}",)),
    "builtins.eval": tf.Code("builtins", "eval", (f"open({PWNED!r}, 'w')",)),
    "subprocess.call": tf.Code("subprocess", "call", (["touch", PWNED],)),
    "__main__.Model": tf.Code("__main__", "Model", ()),
    "torch.load": tf.Code("torch", "load", (PWNED,)),
}


@pytest.mark.parametrize("glob", sorted(CODE))
@pytest.mark.parametrize("layout", ["zip", "legacy", "plain pickle"])
def test_pickle_with_code_is_refused_and_never_run(tmp_path, no_pwn, glob, layout):
    x = tf.Tensor(tf.Storage(np.ones(4, np.float32), "0"))
    obj = {"w": x, "hook": CODE[glob]}
    path = tmp_path / "model.pt"
    if layout == "zip":
        tf.write_zip(path, obj)
    elif layout == "legacy":
        tf.write_legacy(path, obj)
    else:
        path.write_bytes(tf.dumps(obj))
    for on_error in ("raise", "report"):
        with pytest.raises(SourceError, match=f"refused to load global {glob}") as e:
            fastfinite.scan(str(path), on_error=on_error)
        assert "model.pt" in str(e.value)
    r = run_cli("scan", path)
    assert_one_line_error(r, "model.pt", f"refused to load global {glob}")


def test_persistent_id_that_is_not_a_storage(tmp_path, no_pwn):
    class Odd(tf._Pickler):
        def persistent_id(self, obj):
            return ("module", tf.Global("os", "system")) if isinstance(obj, tf.Storage) else None

    import io

    f = io.BytesIO()
    Odd(f, protocol=2).dump({"w": tf.Tensor(tf.Storage(np.ones(2, np.float32), "0"))})
    with zipfile.ZipFile(tmp_path / "m.pt", "w") as zf:
        zf.writestr("archive/data.pkl", f.getvalue())
    with pytest.raises(SourceError, match="refused to load global os.system"):
        fastfinite.scan(str(tmp_path / "m.pt"))


def test_pickle_that_sets_the_state_of_a_stand_in(tmp_path):
    """BUILD on a rebuilt tensor (its size made text after its checks) is refused."""

    class Built(tf.Tensor):
        def __reduce__(self):
            return (*super().__reduce__(), {"size": "a lie"})

    tf.write_zip(tmp_path / "m.pt", {"w": Built(tf.Storage(np.ones(4, np.float32), "0"))})
    with pytest.raises(SourceError, match="refused to set the state of a TensorRef"):
        fastfinite.scan(str(tmp_path / "m.pt"))


TORCH_LIES = {
    "storage missing": (lambda p: _without(p, "archive/data/1"), "its storage archive/data/1 is "
                        "not in the zip"),
    "storage short": (lambda p: tf.write_zip(p, _state(), data={"1": b"\0" * 8}), "holds 8 bytes"),
    "tensor past its storage": (lambda p: tf.write_zip(p, _state(bad_size=(99,))),
                                "reaches element 99"),
    "negative stride": (lambda p: tf.write_zip(p, _state(bad_size=(2,), bad_stride=(-1,))),
                        "negative"),
}  # fmt: skip


def _state(bad_size=(4,), bad_stride=None):
    good = tf.Tensor(tf.Storage(GOOD, "0"))
    bad = tf.Tensor(tf.Storage(np.ones(4, np.float32), "1"), 0, bad_size, bad_stride)
    return {"good": good, "bad": bad}


def _without(path, member):
    tf.write_zip(str(path) + ".full", _state())
    with zipfile.ZipFile(str(path) + ".full") as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            if info.filename != member:
                dst.writestr(info, src.read(info))


@pytest.mark.parametrize("lie", sorted(TORCH_LIES))
def test_torch_checkpoint_that_lies(tmp_path, lie):
    write, words = TORCH_LIES[lie]
    path = tmp_path / "model.pt"
    write(path)
    with pytest.raises(SourceError, match=words) as e:
        fastfinite.scan(str(path))
    assert "model.pt, tensor bad" in str(e.value)
    r = fastfinite.scan(str(path), on_error="report")
    assert list(r.arrays) == ["good"] and "bad" in r.skipped
    assert_matches_oracle(r.arrays["good"], GOOD)
    assert [f.kind for f in r.findings] == ["unreadable_member"]


def test_torch_corrupt_compressed_storage(tmp_path):
    tf.write_zip(tmp_path / "m.pt", _state(), compress=True)
    _corrupt_member(tmp_path / "m.pt", "archive/data/1")
    with pytest.raises(SourceError, match=r"m.pt:bad"):
        fastfinite.scan(str(tmp_path / "m.pt"))
    r = fastfinite.scan(str(tmp_path / "m.pt"), on_error="report")
    assert list(r.arrays) == ["good"] and "bad" in r.skipped


def test_truncated_torch_checkpoint(tmp_path):
    tf.write_zip(tmp_path / "m.pt", _state())
    data = (tmp_path / "m.pt").read_bytes()
    (tmp_path / "m.pt").write_bytes(data[: len(data) - 40])
    with pytest.raises(SourceError, match="m.pt is not a valid PyTorch"):
        fastfinite.scan(str(tmp_path / "m.pt"))
    (tmp_path / "m.pt").write_bytes(b"garbage, not a checkpoint")
    with pytest.raises(SourceError, match="m.pt is not a PyTorch checkpoint"):
        fastfinite.scan(str(tmp_path / "m.pt"))


def test_truncated_pickle(tmp_path):
    with zipfile.ZipFile(tmp_path / "m.pt", "w") as zf:
        zf.writestr("archive/data.pkl", tf.dumps(_state())[:-20])
    with pytest.raises(SourceError, match="m.pt, member archive/data.pkl: not a valid pickle"):
        fastfinite.scan(str(tmp_path / "m.pt"))


# -- GGUF and the command line ---------------------------------------------------------------


def _gguf_file(path) -> bytes:
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("good", GOOD)
    w.add_tensor("weird", np.ones((64, 64), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def test_truncated_gguf(tmp_path):
    data = _gguf_file(tmp_path / "m.gguf")
    (tmp_path / "m.gguf").write_bytes(data[:-1000])
    with pytest.raises(SourceError, match=r"m.gguf, tensor weird: its 16384 bytes .* past the end"):
        fastfinite.scan(str(tmp_path / "m.gguf"))
    r = fastfinite.scan(str(tmp_path / "m.gguf"), on_error="report")
    assert list(r.arrays) == ["good"] and "weird" in r.skipped
    assert_matches_oracle(r.arrays["good"], GOOD)
    for cut in (40, 3, 0):  # in the header: the file as a whole
        (tmp_path / "m.gguf").write_bytes(data[:cut])
        with pytest.raises(SourceError, match="m.gguf is not a valid GGUF file"):
            fastfinite.scan(str(tmp_path / "m.gguf"), on_error="report")


@pytest.mark.parametrize("lie, words", [("type", "unknown tensor type 99"),
                                        ("rows", "its 281474976710656 bytes at offset")])  # fmt: skip
def test_gguf_tensor_info_that_lies(tmp_path, lie, words):
    data = bytearray(_gguf_file(tmp_path / "m.gguf"))
    at = data.index(struct.pack("<Q", 5) + b"weird") + 13  # n_dims, dims, type, offset
    n = struct.unpack_from("<I", data, at)[0]
    if lie == "type":
        struct.pack_into("<I", data, at + 4 + 8 * n, 99)
    else:
        struct.pack_into("<Q", data, at + 4, 1 << 40)
    (tmp_path / "m.gguf").write_bytes(bytes(data))
    with pytest.raises(SourceError, match=f"m.gguf, tensor weird: {words}"):
        fastfinite.scan(str(tmp_path / "m.gguf"))
    r = fastfinite.scan(str(tmp_path / "m.gguf"), on_error="report")
    assert list(r.arrays) == ["good"] and words in r.skipped["weird"]


def test_cli_hostile_checkpoint_is_one_line_exit_2(tmp_path):
    path = lying(tmp_path / "m.safetensors", LIES["offsets past the end"][0])
    assert_one_line_error(run_cli("scan", path), "m.safetensors, tensor bad", "past the end")
    r = run_cli("scan", path, "--on-error", "report")
    assert r.returncode == 1 and "unreadable_member" in r.stdout, (r.stdout, r.stderr)


def test_truncated_legacy_checkpoint(tmp_path):
    tf.write_legacy(tmp_path / "m.pt", _state())
    data = (tmp_path / "m.pt").read_bytes()
    (tmp_path / "m.pt").write_bytes(data[:-8])
    with pytest.raises(SourceError, match=r"m.pt: storage 1 of 4 elements runs past the end"):
        fastfinite.scan(str(tmp_path / "m.pt"))


def _checkpoints(tmp_path) -> dict[str, bytes]:
    from safetensors.numpy import save_file

    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    save_file({"a": x, "b": x[:2]}, str(tmp_path / "m.safetensors"))
    np.savez(tmp_path / "m.npz", a=x, b=x[:2])
    tf.write_zip(tmp_path / "m.pt", _state())
    tf.write_legacy(tmp_path / "l.pt", _state())
    return {n: (tmp_path / n).read_bytes() for n in ("m.safetensors", "m.npz", "m.pt", "l.pt")}


@pytest.mark.parametrize("on_error", ["raise", "report"])
def test_flipped_bytes_are_a_report_or_an_error_of_fastfinite(tmp_path, no_pwn, on_error):
    """Bytes flipped anywhere in a checkpoint (its header, its pickle, its zip
    directory, its data): a report, or an error of fastfinite naming the file; never
    another exception, never code run."""
    rng = np.random.default_rng(44)
    for name, data in _checkpoints(tmp_path).items():
        errors = 0
        for i in range(40):
            bad = bytearray(data)
            # in the headers at the start, the zip's directory at the end, or anywhere
            lo, hi = [(0, 256), (len(bad) - 256, len(bad)), (0, len(bad))][i % 3]
            for at in rng.integers(max(lo, 0), hi, rng.integers(1, 4)):
                bad[at] = int(rng.integers(0, 256))
            path = tmp_path / f"x{os.path.splitext(name)[1]}"
            path.write_bytes(bytes(bad))
            try:
                r = fastfinite.scan(str(path), on_error=on_error)
            except fastfinite.errors.FastFiniteError as e:
                assert str(path) in str(e) or path.name in str(e), str(e)
                errors += 1
            else:
                assert r.dtype == "group"
        assert errors, name  # the flips did reach what is checked
