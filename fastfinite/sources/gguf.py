"""GGUF checkpoints (llama.cpp) through the ``gguf`` package (the ``gguf`` extra), one
member per tensor keyed by its name.

Tensors of a plain type (F64/F32/F16/BF16, integers) are memory-mapped in place
(``tensors.MappedTensor``). Quantized tensors (Q8_0, Q4_K...) are dequantized to float32 by
``gguf.quants.dequantize``, a range of rows at a time (``DequantizedTensor``: memory bounded
by the region, never the whole tensor); a type gguf cannot dequantize is listed in
``report.skipped`` with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..compute.blocks import Region
from ..errors import SkippedMemberError, SourceError, UnsupportedDtypeError
from .base import Source, regular_file
from .tensors import MappedTensor, Members, checked_group, format_dtype

PLAIN = {"F64": "f8", "F32": "f4", "F16": "f2", "BF16": "bfloat16",
         "I8": "i1", "I16": "i2", "I32": "i4", "I64": "i8"}  # fmt: skip
REGION_BYTES = 16 << 20  # float32 values dequantized per region


def _gguf():
    try:
        import gguf
    except ImportError:
        raise SourceError("reading GGUF files needs the gguf package: pip install gguf") from None
    return gguf


class DequantizedTensor(Source):
    """A quantized tensor of a GGUF file, read as float32 a range of rows at a time
    (``gguf.quants.dequantize`` on the rows' blocks)."""

    reads_in_tasks = True
    region_bytes = REGION_BYTES

    def __init__(self, path: str, offset: int, qtype: int, shape: tuple[int, ...], name: str):
        gguf = _gguf()
        self.path, self.offset, self.qtype, self.name = path, int(offset), int(qtype), name
        self.shape = tuple(shape)
        self.dtype = np.dtype(np.float32)
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * 4
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(qtype)]
        self._block, self._bsize = block, size
        self._raw: np.ndarray | None = None

    def __getstate__(self):
        return self.__dict__ | {"_raw": None}

    @property
    def raw(self) -> np.ndarray:
        """The tensor's bytes, rows of blocks (``(..., row bytes)``), memory-mapped."""
        if self._raw is None:
            row = self.shape[-1] // self._block * self._bsize
            shape = (*self.shape[:-1], row)
            self._raw = np.memmap(self.path, np.uint8, "r", offset=self.offset, shape=shape)
        return self._raw

    def _rows(self) -> tuple[int, int]:
        """``(n, values per unit)`` of the units along axis 0 regions are cut into: rows,
        or the blocks of a 1-D tensor."""
        if len(self.shape) == 1:
            return self.shape[0] // self._block, self._block
        return self.shape[0], int(np.prod(self.shape[1:], dtype=np.int64))

    def regions(self, budget_bytes: int) -> Iterator[Region]:
        n, per = self._rows()
        step = max(1, budget_bytes // max(1, per * 4))
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            if len(self.shape) == 1:
                yield (slice(lo * self._block, hi * self._block),)
            else:
                yield (slice(lo, hi), *(slice(0, d) for d in self.shape[1:]))

    def read(self, region: Region) -> np.ndarray:
        gguf = _gguf()
        qtype = gguf.GGMLQuantizationType(self.qtype)
        first = region[0]
        if len(self.shape) == 1:  # the blocks holding the region (a replay's: any range)
            lo, hi = first.start // self._block, -(-first.stop // self._block)
            raw = np.asarray(self.raw[lo * self._bsize : hi * self._bsize])
            values = gguf.quants.dequantize(raw, qtype)
            return values[first.start - lo * self._block : first.stop - lo * self._block]
        values = gguf.quants.dequantize(np.asarray(self.raw[first]), qtype)
        return values[(slice(None), *region[1:])]

    @property
    def location(self) -> str:
        return f"{os.path.abspath(self.path)}:{self.name}"

    def identity(self) -> dict:
        return {"kind": "gguf", "path": os.path.abspath(self.path), "offset": self.offset,
                "qtype": self.qtype, "shape": list(self.shape), "location": self.location}  # fmt: skip

    def fingerprints(self):
        from .fingerprints import whole_file

        return whole_file(self.path)


def _tensor_infos(gguf, path: str):
    """``(reader, [(name, raw type, numpy shape, data offset), ...])`` of a GGUF file: its
    header read by ``gguf.GGUFReader``, but no tensor's data viewed (which would fail as a
    whole, naming no tensor, on one that lies): each is checked here."""

    class InfoReader(gguf.GGUFReader):
        def _build_tensors(self, start_offs: int, fields: list) -> None:
            self.infos = []
            for field in fields:
                _, name, _, dims, raw, offset = field.parts
                shape = tuple(int(d) for d in reversed(dims.tolist()))
                text = bytes(name).decode("utf-8", "replace")
                self.infos.append((text, int(raw[0]), shape, int(start_offs + offset[0])))
            self.tensors = []

    reader = InfoReader(path, "r")
    return reader, reader.infos


def open_gguf(path: str, name: str, options: Any = None) -> Members:
    """The tensors of a GGUF file as a group ``[(name, factory), ...]`` in the file's
    order; a tensor whose type is unknown, whose row is not whole blocks or whose bytes run
    past the end of the file is an error naming it (``on_error="report"``: listed in
    ``skipped``, with a finding)."""
    gguf = _gguf()
    path = regular_file(path, name)
    size = os.path.getsize(path)
    try:
        reader, infos = _tensor_infos(gguf, path)
    except Exception as e:  # truncated, a header that lies
        text = str(e)[:300]
        raise SourceError(f"{name} is not a valid GGUF file: {type(e).__name__}: {text}") from None
    swapped = reader.byte_order == "S"
    members, problems = [], {}
    for key, raw, shape, offset in infos:
        where = f"{name}:{key}"
        try:
            if key in problems or any(k == key for k, _ in members):
                raise ValueError("a second tensor of this name")
            try:
                qtype = gguf.GGMLQuantizationType(raw)
            except ValueError:
                raise ValueError(f"unknown tensor type {raw}") from None
            block, bsize = gguf.GGML_QUANT_SIZES[qtype]
            if shape and shape[-1] % block:
                raise ValueError(f"its rows of {shape[-1]} are not whole {qtype.name} blocks "
                                 f"of {block}")  # fmt: skip
            nbytes = int(np.prod(shape, dtype=object)) * bsize // block
            if offset + nbytes > size:
                raise ValueError(f"its {nbytes} bytes at offset {offset} run past the end of "
                                 f"the file ({size} bytes)")  # fmt: skip
        except ValueError as why:
            problems[key] = f"cannot read {name}, tensor {key}: {why}"
            members.append((key, None))
            continue
        members.append((key, _factory(gguf, path, qtype, shape, offset, where, swapped)))
    return checked_group(members, problems, options)


def _factory(gguf, path: str, qtype, shape: tuple, offset: int, where: str, swapped: bool):
    qname = qtype.name
    if qname in PLAIN:
        dtype = _plain_dtype(PLAIN[qname], swapped, where)
        key = where.rsplit(":", 1)[-1]

        def plain():
            if isinstance(dtype, Exception):
                raise dtype
            return MappedTensor(path, offset, dtype, shape, where, "C", "gguf", key)

        return plain

    def quantized():
        if swapped:
            raise SkippedMemberError(f"{where}: {qname} of a big-endian GGUF file is not "
                                     "dequantized here")  # fmt: skip
        try:  # one block first: a type gguf cannot dequantize is skipped, said why
            gguf.quants.dequantize(np.zeros(gguf.GGML_QUANT_SIZES[qtype][1], np.uint8), qtype)
        except NotImplementedError as e:
            raise SkippedMemberError(f"{where}: {qname} is not dequantized by gguf "
                                     f"{_version(gguf)}: {e}") from None  # fmt: skip
        return DequantizedTensor(path, offset, qtype, shape, where)

    return quantized


def _plain_dtype(name: str, swapped: bool, where: str) -> Any:
    try:
        dtype = format_dtype(name, where, "BF16")
    except UnsupportedDtypeError as e:  # said when the tensor is opened
        return e
    return dtype.newbyteorder(">" if swapped else "<")


def _version(gguf) -> str:
    try:
        from importlib.metadata import version

        return version("gguf")
    except Exception:
        return getattr(gguf, "__version__", "")
