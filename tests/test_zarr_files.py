"""Reading chunk files straight from disk (``ChunkFiles``) against zarr's own read of the same
real stores: every supported layout, unaligned regions, missing and edge chunks, and chunks
whose bytes or size are wrong.

Part: ``fastfinite/sources/zarr_files.py``.
"""

from __future__ import annotations

import os

import numcodecs
import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite import ChunkReadError
from fastfinite.sources import zarr_files
from fastfinite.sources.zarr import ZarrSource
from fastfinite.sources.zarr_files import ChunkFiles, _zstd_content_size

from .helpers import assert_matches_oracle


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-100 if dtype.kind == "i" else 0, 100, shape).astype(dtype)
    x = rng.standard_normal(shape) * 10
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    x = x.astype(dtype)
    flat = x.reshape(-1)
    if flat.size and dtype.kind in "fc":
        picks = rng.choice(flat.size, size=min(5, flat.size), replace=False)
        flat[picks[:3]] = [np.nan, np.inf, -np.inf][: len(picks[:3])]
        if dtype.itemsize >= 8 and dtype.kind == "f":
            flat[picks[3:]] = 1e100  # overflows float32
    return x


def _store(path, shape, chunks, dtype, zarr_format=3, skip=(), seed=0, **kwargs):
    """A store on disk with some chunks never written; returns the array and its contents
    as zarr presents them."""
    fill = kwargs.pop("fill_value", np.nan if np.dtype(dtype).kind in "fc" else 0)
    a = zarr.create_array(
        store=path,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        zarr_format=zarr_format,
        fill_value=fill,
        **kwargs,
    )
    x = _values(shape, dtype, seed)
    grid = a.cdata_shape
    for i, coords in enumerate(np.ndindex(*grid)):
        if i in skip:
            continue
        sl = tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, chunks))
        a[sl] = x[sl]
    return zarr.open_array(path, mode="r")


LAYOUTS = {
    "v3 zstd f4 3-D": dict(shape=(13, 7, 5), chunks=(4, 3, 2), dtype="f4"),
    "v3 raw big-endian f8": dict(
        shape=(11, 9),
        chunks=(4, 4),
        dtype="f8",
        compressors=None,
        serializer=zarr.codecs.BytesCodec(endian="big"),
    ),
    "v3 blosc i2": dict(
        shape=(30, 6), chunks=(7, 4), dtype="i2", compressors=zarr.codecs.BloscCodec()
    ),
    "v3 gzip c8": dict(
        shape=(10, 10), chunks=(3, 4), dtype="c8", compressors=zarr.codecs.GzipCodec()
    ),
    "v3 zstd checksum 4-D f2": dict(
        shape=(3, 4, 5, 6),
        chunks=(2, 3, 2, 4),
        dtype="f2",
        compressors=zarr.codecs.ZstdCodec(checksum=True),
    ),
    "v3 0-d": dict(shape=(), chunks=(), dtype="f8", skip=()),
    "v2 zstd F-order >f8": dict(
        shape=(10, 7), chunks=(4, 3), dtype=">f8", zarr_format=2, order="F"
    ),
    "v2 blosc bool": dict(
        shape=(17, 5), chunks=(5, 5), dtype="bool", zarr_format=2, compressors=numcodecs.Blosc()
    ),
    "v2 zlib f4": dict(
        shape=(9, 8), chunks=(4, 3), dtype="f4", zarr_format=2, compressors=numcodecs.Zlib()
    ),
    "v2 raw 1-D <u4": dict(shape=(50,), chunks=(8,), dtype="u4", zarr_format=2, compressors=None),
}


@pytest.fixture(params=[False, True], ids=["read", "mapped"])
def mapped(request, monkeypatch):
    """Chunk files read, or mapped (as files of MAP_MIN_BYTES and more are)."""
    if request.param:
        monkeypatch.setattr(zarr_files, "MAP_MIN_BYTES", 0)
    return request.param


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_chunk_files_read_what_zarr_reads(tmp_path, name, mapped):
    kwargs = dict(LAYOUTS[name])
    skip = kwargs.pop("skip", (1, 4))
    path = str(tmp_path / "s.zarr")
    a = _store(path, skip=skip, **kwargs)
    files = ChunkFiles.for_array(a)
    assert files is not None, name
    full = np.asarray(a[...])
    got = files.read(tuple(slice(0, n) for n in a.shape))
    np.testing.assert_array_equal(got, full)
    assert got.dtype.newbyteorder("=") == full.dtype.newbyteorder("=")
    rng = np.random.default_rng(1)
    for _ in range(40):  # regions of any alignment, empty ones included
        region = []
        for n in a.shape:
            lo = int(rng.integers(0, n + 1))
            region.append(slice(lo, int(rng.integers(lo, n + 1))))
        region = tuple(region)
        np.testing.assert_array_equal(files.read(region), full[region])
    r = fastfinite.scan(path, cast=("float32", "float16"), region_bytes=256)
    assert_matches_oracle(r, full, cast=("float32", "float16"))
    assert r.missing_chunks == len([i for i in skip if i < np.prod(a.cdata_shape)])


def test_chunk_files_in_a_group_array(tmp_path):
    path = str(tmp_path / "g.zarr")
    g = zarr.open_group(path, mode="w")
    a = g.create_array("train/x", shape=(9, 4), chunks=(2, 4), dtype="f4", fill_value=np.nan)
    x = _values((9, 4), "f4", 3)
    a[:4] = x[:4]
    a = zarr.open_array(path, path="train/x", mode="r")
    assert ChunkFiles.for_array(a) is not None
    expect = np.asarray(a[...])
    np.testing.assert_array_equal(ZarrSource(a).read((slice(0, 9), slice(0, 4))), expect)
    assert fastfinite.scan(path + "/train/x").missing_chunks == 3


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(shards=(8, 8)),
        dict(compressors=[zarr.codecs.ZstdCodec(), zarr.codecs.Crc32cCodec()]),
        dict(filters=[zarr.codecs.TransposeCodec(order=(1, 0))]),
        dict(zarr_format=2, filters=[numcodecs.Shuffle(elementsize=4)]),
    ],
    ids=["sharded", "crc32c", "transpose", "v2 filter"],
)
def test_other_layouts_are_read_by_zarr(tmp_path, kwargs):
    path = str(tmp_path / "o.zarr")
    a = _store(path, shape=(16, 8), chunks=(4, 4), dtype="f4", **kwargs)
    assert ChunkFiles.for_array(a) is None
    assert ZarrSource(a).files is None
    assert_matches_oracle(fastfinite.scan(path), np.asarray(a[...]))


def test_memory_store_is_read_by_zarr():
    a = zarr.create_array(store={}, shape=(8,), chunks=(4,), dtype="f4")
    assert ChunkFiles.for_array(a) is None


def _chunk_path(path, a, coords):
    return os.path.join(path, *a.metadata.encode_chunk_key(coords).split("/"))


@pytest.mark.parametrize(
    "compressor", [zarr.codecs.ZstdCodec(), zarr.codecs.BloscCodec(), zarr.codecs.GzipCodec(), None]
)
@pytest.mark.parametrize("content", ["half-size chunk", "empty file", "garbage"])
def test_chunk_of_the_wrong_size_or_bytes_is_an_error_not_a_partial_region(
    tmp_path, compressor, content, mapped
):
    path = str(tmp_path / "w.zarr")
    a = _store(path, shape=(12, 12), chunks=(4, 4), dtype="f4", compressors=compressor)
    codec = ChunkFiles.for_array(a).codec
    small = np.zeros(8, "f4")  # a valid chunk, half the size: from another chunk shape
    data = {
        "half-size chunk": small.tobytes() if codec is None else codec.encode(small),
        "empty file": b"",
        "garbage": b"\x28\xb5\x2f\xfd not a chunk" * 3,
    }[content]
    with open(_chunk_path(path, a, (1, 2)), "wb") as f:
        f.write(data)
    with pytest.raises(ChunkReadError, match=r"\(1, 2\)"):
        fastfinite.scan(path)
    r = fastfinite.scan(path, on_error="report")
    assert [f.where for f in r.findings if f.kind == "unreadable_chunk"] == [(1, 2)]
    cells = [(i, j) for i in range(3) for j in range(3) if (i, j) != (1, 2)]
    others = [a[4 * i : 4 * i + 4, 4 * j : 4 * j + 4] for i, j in cells]  # not the bad one
    assert r.count == sum(int(np.isfinite(o).sum()) for o in others)


def test_zstd_frame_content_size_matches_numcodecs():
    for n in (0, 1, 255, 256, 300, 65791, 70000, 1 << 20):
        enc = bytes(numcodecs.Zstd().encode(np.zeros(n, np.uint8)))
        assert _zstd_content_size(enc) == n
    assert _zstd_content_size(b"not zstd at all") is None
