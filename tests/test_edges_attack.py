"""Edges attacked where earlier attacks did not look: stored zip members whose bytes are
not those their zip recorded (a flipped byte that ``np.load`` refuses with "Bad CRC-32"),
in ``.npz`` files, PyTorch checkpoints and tar shards, with and without a cache.

Part: ``fastfinite/sources/tensors.py`` (``check_crc``, ``stored_check``), ``npz.py``,
``torch_zip.py``.
"""

from __future__ import annotations

import io
import os
import struct
import tarfile
import zipfile

import numpy as np
import pytest

import fastfinite
from fastfinite.errors import SourceError

from . import torchfiles as tf
from .helpers import assert_matches_oracle, assert_one_line_error, run_cli


def _data_start(path, member: str) -> int:
    """Where the bytes of the zip member ``member`` start in the file ``path``."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        n, m = struct.unpack("<26xHH", f.read(30))
    return info.header_offset + 30 + n + m


def _poke(path, offset: int, data: bytes) -> None:
    """``data`` written over the file's bytes at ``offset`` (the zip's CRC left as it was)."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _corrupt_npz(tmp_path, name="b.npz", n=1000, at=500):
    """An ``np.savez`` file of ``x`` (float32 0..n-1) and ``y`` (float64 ones), then the value
    ``x[at]`` changed to another finite value, as a flipped bit does: the scan of the bytes
    alone finds nothing wrong, the zip's CRC-32 does."""
    path = str(tmp_path / name)
    x = np.arange(n, dtype=np.float32)
    np.savez(path, x=x, y=np.ones(10))
    _poke(path, _data_start(path, "x.npy") + 128 + 4 * at, np.float32(7.5).tobytes())
    with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
        np.load(path)["x"]
    return path


def test_npz_stored_member_with_a_flipped_byte_is_an_error(tmp_path):
    path = _corrupt_npz(tmp_path)
    with pytest.raises(SourceError, match=r"b\.npz, member x\.npy: Bad CRC-32"):
        fastfinite.scan(path)
    r = fastfinite.scan(path, on_error="report")
    assert list(r.skipped) == ["x"] and "Bad CRC-32 for x.npy" in r.skipped["x"]
    assert [f.kind for f in r.findings] == ["unreadable_member"]
    assert_matches_oracle(r.arrays["y"], np.ones(10))


def test_npz_stored_member_past_one_crc_chunk(tmp_path):
    """A member of several of the chunks whose CRCs are joined (the last byte flipped), and
    the same member intact: its CRC-32 taken in chunks is the zip's."""
    from fastfinite.sources.tensors import CRC_CHUNK

    n = (2 * CRC_CHUNK + 12345) // 4
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    good = str(tmp_path / "good.npz")
    np.savez(good, x=x)
    assert_matches_oracle(fastfinite.scan(good).arrays["x"], x)
    bad = str(tmp_path / "bad.npz")
    np.savez(bad, x=x)
    _poke(bad, _data_start(bad, "x.npy") + 128 + 4 * (n - 1), np.float32(1.0).tobytes())
    with pytest.raises(SourceError, match=r"bad\.npz, member x\.npy: Bad CRC-32"):
        fastfinite.scan(bad)


def test_npz_stored_member_with_a_flipped_byte_and_a_cache(tmp_path):
    """With a cache the CRC-32 is checked when the member is first read; an intact file
    recalled from the cache is not read again."""
    path = _corrupt_npz(tmp_path)
    with pytest.raises(SourceError, match=r"b\.npz, member x\.npy: Bad CRC-32"):
        fastfinite.scan(path, cache=str(tmp_path / "cache"))
    good = str(tmp_path / "good.npz")
    np.savez(good, x=np.arange(10.0))
    first = fastfinite.scan(good, cache=str(tmp_path / "cache"))
    again = fastfinite.scan(good, cache=str(tmp_path / "cache"))
    assert again.to_dict() == first.to_dict()


def test_npz_with_a_flipped_byte_on_the_command_line(tmp_path):
    path = _corrupt_npz(tmp_path)
    assert_one_line_error(run_cli("scan", path), "b.npz, member x.npy", "Bad CRC-32")


def test_torch_storage_with_a_flipped_byte_is_an_error(tmp_path):
    path = str(tmp_path / "m.pt")
    w = tf.Storage(np.arange(12, dtype=np.float32), "0")
    b = tf.Storage(np.zeros(3, dtype=np.float32), "1")
    tf.write_zip(path, {"w": tf.Tensor(w, size=(3, 4)), "w_t": tf.Tensor(w, size=(4, 3),
                 stride=(1, 4)), "b": tf.Tensor(b)})  # fmt: skip
    _poke(path, _data_start(path, "archive/data/0") + 4 * 5, np.float32(-1.0).tobytes())
    with pytest.raises(SourceError, match=r"m\.pt, tensor w \(archive/data/0\): Bad CRC-32"):
        fastfinite.scan(path)
    r = fastfinite.scan(path, on_error="report")
    assert sorted(r.skipped) == ["w", "w_t"]  # both views of the storage
    assert_matches_oracle(r.arrays["b"], np.zeros(3, np.float32))


def test_torch_storage_encrypted_is_an_error(tmp_path):
    path = str(tmp_path / "m.pt")
    tf.write_zip(path, {"w": tf.Tensor(tf.Storage(np.arange(4, dtype=np.float32), "0"))})
    with zipfile.ZipFile(path) as zf:
        offset = zf.getinfo("archive/data/0").header_offset
    with open(path, "rb") as f:  # the encrypted bit, in the local and the central header
        raw = bytearray(f.read())
    raw[offset + 6] |= 1
    for at in [i for i in range(len(raw)) if raw[i : i + 4] == b"PK\x01\x02"]:
        n = struct.unpack("<H", raw[at + 28 : at + 30])[0]
        if raw[at + 46 : at + 46 + n] == b"archive/data/0":
            raw[at + 8] |= 1
    with open(path, "wb") as f:
        f.write(raw)
    with pytest.raises(SourceError, match=r"m\.pt, tensor w: its storage archive/data/0 is "
                       "encrypted"):  # fmt: skip
        fastfinite.scan(path)


def test_tar_member_npz_with_a_flipped_byte_is_an_error(tmp_path):
    path = _corrupt_npz(tmp_path)
    with open(path, "rb") as f:
        data = f.read()
    shard = str(tmp_path / "shard-000000.tar")
    with tarfile.open(shard, "w") as t:
        info = tarfile.TarInfo("000001.arrays.npz")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    os.remove(path)
    with pytest.raises(SourceError, match=r"000001\.arrays\.npz:x\.npy: Bad CRC-32"):
        fastfinite.scan(shard)
