"""Whole chunks of a local, unsharded Zarr array, read straight from their files.

zarr-python reads a chunk through its event loop and decodes it into a freshly allocated
buffer; for chunk files on a local disk that costs up to twice the decompression itself. For
the common layout -- a ``LocalStore``, no sharding, the ``bytes`` codec (Zarr 3) or no filters
(Zarr 2), and at most one compressor -- :class:`ChunkFiles` maps each chunk file and
decompresses it with numcodecs (the library zarr itself uses) straight into the region's
array, in the calling thread. Any other layout is left to zarr.

A decoded chunk must have exactly the chunk's size: a valid chunk of the wrong size is an error,
as it is for zarr, never a partly filled region.
"""

from __future__ import annotations

import math
import mmap
import os
from typing import Any

import numpy as np

from ..compute.blocks import Region
from .chunked import ChunkGrid

# Chunk files at least this large are mapped rather than read: no copy of the compressed bytes
# and no buffer to allocate (blosc, 16 MB chunks: 10-15% faster here). Smaller ones are read:
# unmapping costs a TLB shootdown on every core running the process, more than the copy.
MAP_MIN_BYTES = 4 << 20


class ChunkFiles:
    """Read regions of a Zarr array from its chunk files.

    Parameters
    ----------
    folder : str
        The array's folder on disk.
    encode_key : callable
        Grid coordinates -> the chunk's key (its path below ``folder``).
    shape, chunks : tuple of int
        The array's shape and chunk shape.
    dtype : numpy.dtype
        The dtype of the stored bytes (byte order included).
    order : {"C", "F"}
        The element order inside a chunk.
    codec : numcodecs codec or None
        The compressor; None for raw chunks.
    fill_value : scalar
        What a chunk that was never written holds.
    """

    def __init__(
        self,
        folder: str,
        encode_key,
        shape: tuple[int, ...],
        chunks: tuple[int, ...],
        dtype: np.dtype,
        order: str,
        codec: Any,
        fill_value: Any,
    ):
        self.folder = folder
        self.encode_key = encode_key
        self.grid = ChunkGrid(shape, chunks)
        self.chunks = self.grid.unit
        self.dtype = dtype
        self.order = order
        self.codec = codec
        self.fill_value = fill_value
        self.chunk_bytes = math.prod(self.chunks) * dtype.itemsize

    @classmethod
    def for_array(cls, array: Any, folder: str | None = None) -> ChunkFiles | None:
        """A reader for ``array`` when its layout allows, else None (read it with zarr);
        ``folder``: the array's (``local_folder``), looked up when not given."""
        folder = folder or local_folder(array)
        if folder is None or getattr(array, "shards", None) or array.fill_value is None:
            return None
        meta = array.metadata
        dtype = np.dtype(array.dtype)
        if meta.zarr_format == 3:
            found = _v3_layout(meta.codecs, dtype)
            if found is None:
                return None
            dtype, codec = found
            order = "C"
        else:
            if meta.filters or meta.order not in ("C", "F"):
                return None
            codec, order = meta.compressor, meta.order
        return cls(
            folder,
            meta.encode_chunk_key,
            tuple(int(s) for s in array.shape),
            tuple(int(c) for c in array.chunks),
            dtype,
            order,
            codec,
            array.fill_value,
        )

    def read(self, region: Region) -> np.ndarray:
        """The elements of ``region`` (a tuple of slices with steps of 1)."""
        out = np.empty(tuple(r.stop - r.start for r in region), self.dtype, order=self.order)
        for coords in self.grid.units_in(region):
            unit = self.grid.unit_region(coords)
            part = tuple(
                slice(max(u.start, r.start), min(u.stop, r.stop)) for u, r in zip(unit, region)
            )
            # the Ellipsis keeps a 0-d result a view, not a scalar
            dest = out[
                (*(slice(p.start - r.start, p.stop - r.start) for p, r in zip(part, region)), ...)
            ]
            contiguous = dest.flags.c_contiguous if self.order == "C" else dest.flags.f_contiguous
            if dest.shape == self.chunks and contiguous:
                if not self._decode(coords, dest.reshape(-1, order="A").view(np.uint8)):
                    dest[...] = self.fill_value
                continue
            whole = np.empty(self.chunk_bytes, np.uint8)  # an edge chunk, or a partial one
            if not self._decode(coords, whole):
                dest[...] = self.fill_value
                continue
            chunk = whole.view(self.dtype).reshape(self.chunks, order=self.order)
            dest[...] = chunk[
                tuple(slice(p.start - u.start, p.stop - u.start) for p, u in zip(part, unit))
            ]
        return out

    def _decode(self, coords: tuple[int, ...], buf: np.ndarray) -> bool:
        """Decode one chunk into ``buf`` (bytes); False when the chunk has no file."""
        path = os.path.join(self.folder, *self.encode_key(coords).split("/"))
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            return False
        with f:
            if self.codec is None:
                n = f.readinto(buf)
                if n != len(buf) or f.read(1):
                    raise ValueError(f"raw chunk file is not {len(buf)} bytes long")
                return True
            if os.fstat(f.fileno()).st_size >= MAP_MIN_BYTES:
                enc = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            else:
                enc = f.read()
        try:
            self._decompress(enc, buf)
        finally:
            if isinstance(enc, mmap.mmap):
                try:
                    enc.close()
                except BufferError:  # a view of it lives on in a traceback; GC unmaps it
                    pass
        return True

    def _decompress(self, enc: Any, buf: np.ndarray) -> None:
        known = _decoded_size(self.codec, enc)
        if known is not None and known != len(buf):
            raise ValueError(f"chunk decodes to {known} bytes, expected {len(buf)}")
        if known is not None:
            self.codec.decode(enc, out=buf)
            return
        raw = np.frombuffer(self.codec.decode(enc), np.uint8)
        if len(raw) != len(buf):
            raise ValueError(f"chunk decodes to {len(raw)} bytes, expected {len(buf)}")
        buf[:] = raw


def local_folder(array: Any) -> str | None:
    """The folder of ``array`` when its store is a ``zarr.storage.LocalStore``, else None."""
    from zarr.storage import LocalStore

    store_path = array.store_path
    if not isinstance(store_path.store, LocalStore):
        return None
    return os.path.join(str(store_path.store.root), *store_path.path.strip("/").split("/"))


def _v3_layout(codecs, dtype: np.dtype):
    """``(stored dtype, numcodecs codec or None)`` for ``[bytes]`` or ``[bytes, compressor]``
    with zstd, blosc or gzip; None for any other codec chain."""
    import numcodecs
    from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, ZstdCodec

    codecs = list(codecs)
    if not 1 <= len(codecs) <= 2 or type(codecs[0]) is not BytesCodec:
        return None
    endian = codecs[0].endian
    if endian is not None:
        dtype = dtype.newbyteorder("<" if endian.value == "little" else ">")
    if len(codecs) == 1:
        return dtype, None
    plain = {ZstdCodec: numcodecs.Zstd, BloscCodec: numcodecs.Blosc, GzipCodec: numcodecs.GZip}
    make = plain.get(type(codecs[1]))
    return None if make is None else (dtype, make())


def _decoded_size(codec: Any, enc: Any) -> int | None:
    """The decoded size a zstd or blosc header states (the decompressor checks it holds);
    None for other codecs or a header without it."""
    name = getattr(codec, "codec_id", "")
    if name == "blosc" and len(enc) >= 16:
        return int.from_bytes(enc[4:8], "little")  # blosc1 header: nbytes
    if name == "zstd":
        return _zstd_content_size(enc)
    return None


def _zstd_content_size(b: Any) -> int | None:
    """Frame_Content_Size of the first zstd frame (RFC 8878, 3.1.1.1), None when absent.

    Further frames make the total larger, which the decompressor rejects for an exact buffer.
    """
    if len(b) < 6 or b[:4] != b"\x28\xb5\x2f\xfd":
        return None
    desc = int(b[4])
    single = (desc >> 5) & 1
    width = (single, 2, 4, 8)[desc >> 6]
    at = 5 + (0 if single else 1) + (0, 1, 2, 4)[desc & 3]
    if width == 0 or len(b) < at + width:
        return None
    value = int.from_bytes(b[at : at + width], "little")
    return value + 256 if width == 2 else value
