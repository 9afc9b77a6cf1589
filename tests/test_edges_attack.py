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
import warnings
import zipfile

import numpy as np
import pytest

import fastfinite
from fastfinite.errors import ChunkReadError, SourceError

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


def test_npz_corrupted_between_two_scans_of_one_process(tmp_path, monkeypatch):
    """A member's CRC-32 is taken once while its file is unchanged (and not written within
    a tick of the clock: here, ten seconds on): a byte flipped after a scan, its times set
    back as they were (``touch -r``), is still found."""
    import time
    import types

    from fastfinite.sources import tensors

    later = types.SimpleNamespace(time_ns=lambda: time.time_ns() + 10**10)
    monkeypatch.setattr(tensors, "time", later)
    path = str(tmp_path / "b.npz")
    np.savez(path, x=np.arange(1000, dtype=np.float32))
    old = os.stat(path)
    assert fastfinite.scan(path).ok
    assert fastfinite.scan(path).ok  # checked once
    _poke(path, _data_start(path, "x.npy") + 128 + 4 * 500, np.float32(7.5).tobytes())
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    with pytest.raises(SourceError, match=r"b\.npz, member x\.npy: Bad CRC-32"):
        fastfinite.scan(path)


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


def _zero_crcs(path) -> None:
    """Every CRC-32 of the zip ``path`` set to 0, in the local and the central headers, as
    ``torch.save`` writes them with ``torch.utils.serialization.config.save.compute_crc32 =
    False`` (``torch.load`` reads such a file)."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    for info in infos:
        raw[info.header_offset + 14 : info.header_offset + 18] = bytes(4)
    at = raw.find(b"PK\x01\x02")
    while at >= 0:
        raw[at + 16 : at + 20] = bytes(4)
        at = raw.find(b"PK\x01\x02", at + 46)
    with open(path, "wb") as f:
        f.write(raw)
    with zipfile.ZipFile(path) as zf:
        assert {i.CRC for i in zf.infolist()} == {0}


def test_torch_checkpoint_saved_without_crcs_is_read(tmp_path):
    """A CRC-32 of 0 is one torch did not compute: read as torch.load reads it, alone, in
    a tar and with a cache (data.pkl was refused with "Bad CRC-32": a false alarm)."""
    path = str(tmp_path / "m.pt")
    w = np.arange(12, dtype=np.float32)
    tf.write_zip(path, {"w": tf.Tensor(tf.Storage(w, "0"), size=(3, 4)),
                        "b": tf.Tensor(tf.Storage(np.array([np.nan, 1], np.float32), "1"))})  # fmt: skip
    _zero_crcs(path)
    r = fastfinite.scan(path)
    assert_matches_oracle(r.arrays["w"], w.reshape(3, 4))
    assert r.arrays["b"].nan == 1 and r.bad_samples() == ["b"]
    with open(path, "rb") as f:
        data = f.read()
    shard = str(tmp_path / "shard-000000.tar")
    with tarfile.open(shard, "w") as t:
        info = tarfile.TarInfo("000001.model.pth")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    r = fastfinite.scan(shard)
    assert_matches_oracle(r.arrays["shard-000000.tar/000001.model.pth/w"], w.reshape(3, 4))
    r = fastfinite.scan(path, cache=str(tmp_path / "cache"))
    assert_matches_oracle(r.arrays["w"], w.reshape(3, 4))


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


# HDF5 links and virtual datasets of a set's files: never out of the folder given, and a
# virtual dataset's missing source never read as its fill value


def _h5_linking_out(tmp_path):
    """``set/a.h5`` with a dataset of its own, and an external link (absolute and relative)
    and a virtual dataset leading to ``outside/secret.h5`` (NaN); ``set/b.npy``."""
    h5py = pytest.importorskip("h5py")
    (tmp_path / "outside").mkdir()
    (tmp_path / "set").mkdir()
    secret = str(tmp_path / "outside" / "secret.h5")
    with h5py.File(secret, "w") as f:
        f["x"] = np.array([np.nan, 1e300, 2.0])
    with h5py.File(tmp_path / "set" / "a.h5", "w") as f:
        f["own"] = np.arange(3.0)
        f["ext"] = h5py.ExternalLink(secret, "/x")
        f["extrel"] = h5py.ExternalLink("../outside/secret.h5", "/x")
        f["extg"] = h5py.ExternalLink(secret, "/")
        f["soft"] = h5py.SoftLink("/extg/x")  # through the external link
        layout = h5py.VirtualLayout(shape=(3,), dtype="f8")
        layout[:] = h5py.VirtualSource(secret, "x", shape=(3,))
        f.create_virtual_dataset("vds", layout, fillvalue=0)
    np.save(tmp_path / "set" / "b.npy", np.arange(4.0))
    return tmp_path / "set"


@pytest.mark.parametrize("given", ["folder", "glob"])
def test_a_set_never_follows_hdf5_links_out_of_its_folder(tmp_path, given):
    folder = _h5_linking_out(tmp_path)
    r = fastfinite.scan(str(folder) if given == "folder" else str(folder / "*.h5"))
    assert sorted(r.arrays) == (["a.h5:/own", "b.npy"] if given == "folder" else ["a.h5:/own"])
    assert r.nan == 0 and r.max == (3.0 if given == "folder" else 2.0)
    assert sorted(r.skipped) == ["a.h5:/ext", "a.h5:/extg", "a.h5:/extrel", "a.h5:/soft",
                                 "a.h5:/vds"]  # fmt: skip
    assert "a link that leads to" in r.skipped["a.h5:/soft"]
    assert "external link to ../outside/secret.h5:/x" in r.skipped["a.h5:/extrel"]
    assert "never followed" in r.skipped["a.h5:/ext"]
    assert "virtual dataset whose source" in r.skipped["a.h5:/vds"]
    assert "never read" in r.skipped["a.h5:/vds"]


def test_a_set_follows_hdf5_links_inside_its_folder(tmp_path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "data.h5", "w") as f:
        f["x"] = np.array([np.nan, 1.0])
    with h5py.File(tmp_path / "view.h5", "w") as f:
        f["link"] = h5py.ExternalLink("data.h5", "/x")
        layout = h5py.VirtualLayout(shape=(2,), dtype="f8")
        layout[:] = h5py.VirtualSource("data.h5", "x", shape=(2,))
        f.create_virtual_dataset("vds", layout, fillvalue=0)
    r = fastfinite.scan(str(tmp_path))
    assert {k: v.nan for k, v in r.arrays.items()} == {
        "data.h5:/x": 1, "view.h5:/link": 1, "view.h5:/vds": 1
    }  # fmt: skip


def test_hdf5_virtual_dataset_with_a_missing_source(tmp_path):
    """HDF5 reads the part of a missing source as the fill value: three zeros that are not
    data; the dataset is not scanned, and the report says why."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "src.h5", "w") as f:
        f["x"] = np.arange(3.0)
    path = str(tmp_path / "vds.h5")
    with h5py.File(path, "w") as f:
        layout = h5py.VirtualLayout(shape=(6,), dtype="f8")
        layout[0:3] = h5py.VirtualSource("src.h5", "x", shape=(3,))
        layout[3:6] = h5py.VirtualSource("missing.h5", "x", shape=(3,))
        f.create_virtual_dataset("vds", layout, fillvalue=0)
        f["fine"] = np.ones(2)
    r = fastfinite.scan(path)
    assert list(r.arrays) == ["/fine"] and not r.ok
    assert [f.kind for f in r.findings] == ["unreadable_member"]
    assert "missing.h5:x cannot be opened here" in r.skipped["/vds"]
    assert "fill value 0" in r.skipped["/vds"]
    with pytest.raises(SourceError, match=r"vds\.h5:/vds is a virtual dataset whose source "
                       r"missing\.h5:x cannot be opened here"):  # fmt: skip
        fastfinite.scan(path + ":/vds")


# the errstate replay of a complex array's casts: both parts, as the scan counts them


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_localize_replays_the_cast_of_both_parts_of_complex_values(dtype):
    """The scan counts an element whose imaginary part overflows float16; the replay cast
    the complex values to float16 whole, which drops the imaginary part (NumPy's
    ComplexWarning, twice), and named neither (0,) nor the underflow at (3,)."""
    x = np.array([1 + 1e5j, 2 + 0j, 1e5 + 1j, 3 + 1e-9j, -7e4j], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = fastfinite.scan(x, cast=("float16",), localize=True)
    assert r.to_dict()["cast"]["float16"] == {"overflow": 3, "underflow": 1}
    got = [(loc.error, loc.index) for loc in r.localized if loc.op == "cast"]
    assert got == [("overflow", (0,)), ("overflow", (2,)), ("overflow", (4,)),
                   ("underflow", (3,))]  # fmt: skip


# a null list in a Parquet column: missing values, never no values


def test_parquet_null_lists_count_as_nan(tmp_path):
    """A null row of a list column (an embedding that is not there) was flattened away: no
    count, no location, not in the skip-list, where the same table as Feather reads a row
    of NaN."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({
        "emb": pa.array([[1.0, 2.0], None, [np.nan, 4.0], [5.0, None], []],
                        pa.list_(pa.float32())),
        "fx": pa.array([[1.0, 2.0], None, [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]],
                       pa.list_(pa.float64(), 2)),
        "nested": pa.array([[[1.0], None], [[2.0, 3.0]], None, [[4.0]], [[5.0]]],
                           pa.list_(pa.list_(pa.float64()))),
    })  # fmt: skip
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path, row_group_size=2)
    r = fastfinite.scan(path)
    want = {
        "emb": np.array([1, 2, np.nan, np.nan, 4, 5, np.nan], np.float32),
        "fx": np.array([1, 2, np.nan, np.nan, 3, 4, 5, 6, 7, 8]),
        "nested": np.array([1, np.nan, 2, 3, np.nan, 4, 5]),
    }
    for key, x in want.items():
        assert_matches_oracle(r.arrays[key], x)
    emb = [(loc.labels["row"], loc.labels["item"]) for loc in r.arrays["emb"].locations]
    assert emb == [(1, 0), (2, 0), (3, 1)]
    assert sorted(r.bad_samples()) == [(path, 0), (path, 1), (path, 2), (path, 3)]


# the errstate replay of tables: any range of rows, any of a list column's values


@pytest.mark.parametrize("by", [0, -1])
def test_localize_tables_by_slices_alone_and_in_a_set(tmp_path, by):
    """The replay reads a bad slice: one row of a Parquet column (not a whole row group:
    StopIteration), every row of a Parquet table (several row groups: "row group holds 2
    values"), one value of each row of an Arrow list column (all of them were read: a
    reshape error)."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    from pyarrow import feather

    table = pa.table({
        "c": [1.0, 2.0, 3.0, None, 5.0],
        "e": pa.array([[1.0, 2.0], [3.0, np.nan], [1.0, 1.0], [1.0, 1.0], [2.0, 2.0]],
                      pa.list_(pa.float64(), 2)),
    })  # fmt: skip
    (tmp_path / "s").mkdir()
    pq.write_table(table, tmp_path / "s" / "t.parquet", row_group_size=2)
    feather.write_feather(table, str(tmp_path / "s" / "t.feather"), chunksize=2)
    r = fastfinite.scan(str(tmp_path / "s"), by=by, localize=True)
    got = {k: [(loc.index, loc.where) for loc in sub.localized] for k, sub in r.arrays.items()}
    assert got == {
        "t.feather/c": [((3,), (3,))],
        "t.feather/e": [((1, 1), (1,))],  # row 1, or column 1
        "t.parquet/c": [((3,), (3,))],
        "t.parquet/e": [((3,), (3,))],  # flattened: the values of its lists
    }
    alone = fastfinite.scan(str(tmp_path / "s" / "t.parquet"), by=by, localize=True)
    assert [(loc.index, loc.where) for loc in alone.localized] == [
        ((3, 0), (3,) if by == 0 else (0,))
    ]
    feather_alone = fastfinite.scan(str(tmp_path / "s" / "t.feather"), by=by)
    assert feather_alone.skipped == {  # was "5 values in lists over 5 rows"
        "e": "lists of 2 values: not one value per row, so not in the table that by scans"
    }


def test_localize_a_quantized_gguf_vector_by_element(tmp_path):
    """The replay of a 1-D quantized tensor reads single values: the blocks holding them
    (it read the whole blocks below the region's start only: an empty read, a crash in
    gguf's dequantize)."""
    gguf = pytest.importorskip("gguf")
    Q = gguf.GGMLQuantizationType
    x = np.linspace(-2, 2, 96, dtype=np.float32)
    x[40] = np.nan  # its block's scale is NaN: values 32 to 63 dequantize to NaN
    q = gguf.quants.quantize(x, Q.Q8_0)
    want = gguf.quants.dequantize(q, Q.Q8_0)
    path = str(tmp_path / "m.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_tensor("v", q, raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for by in (0, -1):
        r = fastfinite.scan(path, by=by, localize=True)
        assert_matches_oracle(r.arrays["v"], want)
        got = [(loc.index, loc.where) for loc in r.localized]
        assert got == [((i,), (i,)) for i in np.flatnonzero(np.isnan(want))]


# the skip-list of a table scanned by rows or columns, with a text column beside


@pytest.mark.parametrize("by", [0, -1])
def test_bad_samples_of_a_table_with_a_text_column_scanned_by_slices(tmp_path, by):
    """A text column (in ``skipped``) made the report look like a group with no member:
    ``bad_samples()`` was empty, and ``--bad-samples`` wrote an empty file, beside a NaN
    in row 1."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    df = pd.DataFrame({"x": [1.0, np.nan, 3.0], "y": [0.0, 1.0, np.inf], "name": list("abc")})
    path = str(tmp_path / "t.parquet")
    df.to_parquet(path)
    assert fastfinite.scan(df, by=by).bad_samples() == [("DataFrame", 1), ("DataFrame", 2)]
    r = fastfinite.scan(path, by=by)
    assert r.skipped and r.bad_samples() == [(path, 1), (path, 2)]
    out = tmp_path / "bad.txt"
    run_cli("scan", path, "--by", str(by), "--bad-samples", out)
    assert out.read_text() == f"{path}\t1\n{path}\t2\n"
    text = pd.DataFrame({"name": list("abc")})
    assert fastfinite.scan(text, by=by).bad_samples() == []  # nothing scanned: no sample


def test_parquet_page_with_a_flipped_byte_is_an_error(tmp_path):
    """A page whose writer gave it a checksum (Spark does by default) and whose bytes
    changed: pyarrow reads it as other values unless told to verify; 600.0 read as 601.5
    was a clean scan."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    x = np.arange(1000, dtype=np.float64)
    path = str(tmp_path / "c.parquet")
    pq.write_table(pa.table({"x": x, "y": x}), path, compression="none", use_dictionary=False,
                   write_page_checksum=True, write_statistics=False, row_group_size=500)  # fmt: skip
    with open(path, "rb") as f:
        at = f.read().find(np.float64(600.0).tobytes())
    _poke(path, at, np.float64(601.5).tobytes())
    with pytest.raises(ChunkReadError, match=r"row group \(1,\) of .*c\.parquet:x: .*CRC checksum"):
        fastfinite.scan(path)
    r = fastfinite.scan(path, on_error="report")
    assert [f.kind for f in r.findings] == ["unreadable_chunk"]
    assert_matches_oracle(r.arrays["y"], x)


def test_arrow_dictionary_and_fixed_shape_tensor_columns_are_scanned(tmp_path):
    """A dictionary-encoded float column (pandas' category of floats in Feather) and a
    fixed-shape tensor column (embeddings as Arrow's canonical extension type) were listed
    in ``skipped`` as "not numeric": their NaN and inf were never counted."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    from pyarrow import feather

    emb = np.array([[1.0, np.inf], [3.0, 4.0], [5.0, 6.0]], np.float32)
    storage = pa.array(emb.tolist(), pa.list_(pa.float32(), 2))
    table = pa.table({
        "d": pa.array([1.0, np.nan, 1.0]).dictionary_encode(),
        "t": pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), (2,)), storage),
    })  # fmt: skip
    feather.write_feather(table, str(tmp_path / "t.feather"))
    pq.write_table(table, tmp_path / "t.parquet")
    r = fastfinite.scan(str(tmp_path / "t.feather"))
    assert not r.skipped
    assert_matches_oracle(r.arrays["d"], np.array([1.0, np.nan, 1.0]))
    assert_matches_oracle(r.arrays["t"], emb)
    r = fastfinite.scan(str(tmp_path / "t.parquet"))
    assert not r.skipped
    assert_matches_oracle(r.arrays["t"], emb.reshape(-1))  # Parquet's lists: flattened
