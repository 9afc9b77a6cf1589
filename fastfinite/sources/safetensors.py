"""safetensors checkpoints, one member per tensor, read in place.

The header is parsed here (8 bytes of little-endian length, then JSON: each tensor's dtype,
shape and ``data_offsets`` after the header) and checked before anything is read: a
length past the end, offsets past the end or overlapping, a shape that does not match its
bytes, a negative shape or an unknown dtype is an error naming the file and the tensor (or,
with ``on_error="report"``, a member listed in ``skipped`` with a finding). Each tensor is a
memory map of its own bytes (``tensors.MappedTensor``), never a copy. A sharded checkpoint
is opened through its ``*.safetensors.index.json`` (``weight_map``: tensor -> shard file),
or a directory holding one index.
"""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Any

import numpy as np

from ..compute.pools import collector_paused
from ..errors import SkippedMemberError, SourceError, UnsupportedDtypeError
from .base import regular_file
from .ndarray import ArraySource
from .small import tensor_raw
from .tensors import MappedTensor, Members, checked_group, failing, format_dtype, shared_map

MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header
DTYPES = {  # the format's dtype names -> NumPy's (bfloat16 and float8: ml_dtypes)
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "C64": "<c8",
    "I8": "i1", "I16": "<i2", "I32": "<i4", "I64": "<i8",
    "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "?",
}  # fmt: skip
UNSCANNED = ("F8_E8M0", "F4", "F6_E2M3", "F6_E3M2")  # defined by the format, not scanned here
_ITEMSIZE = {"BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1}


def numpy_dtype(code: str, where: str) -> np.dtype:
    """The NumPy dtype of a safetensors dtype name (``UnsupportedDtypeError`` for bfloat16
    and float8 without ml_dtypes, and for the formats fastfinite does not scan)."""
    if code in UNSCANNED:
        raise UnsupportedDtypeError(f"cannot scan {where}: fastfinite does not scan {code} data")
    return format_dtype(DTYPES[code], where, code)


def read_header(head: bytes, size: int, name: str, read=None) -> tuple[dict, int]:
    """``(header, data_start)`` of a safetensors file of ``size`` bytes whose first bytes
    are ``head`` (``read(n)``: the next ``n`` bytes when the header is longer)."""
    if size < 8:
        raise SourceError(f"{name} is not a safetensors file: {size} bytes, shorter than "
                          "its 8-byte header length")  # fmt: skip
    (n,) = struct.unpack("<Q", head[:8])
    if n > size - 8:
        raise SourceError(f"{name}: its header length {n} runs past the end of the file "
                          f"({size} bytes): truncated, or not a safetensors file")  # fmt: skip
    if n > MAX_HEADER:
        raise SourceError(f"{name}: its header length {n} is past safetensors' limit "
                          f"of {MAX_HEADER} bytes")  # fmt: skip
    text = bytes(head[8 : 8 + n])  # head may be a memoryview (a member of a tar)
    if len(text) < n:
        text += bytes(read(n - len(text)))
    try:
        header = json.loads(text, object_pairs_hook=_once)
    except _Twice as e:
        raise SourceError(f"{name}: its header names {e.args[0]!r} twice: one entry would "
                          "hide the other") from None  # fmt: skip
    except (UnicodeDecodeError, ValueError) as e:
        raise SourceError(f"{name}: its header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise SourceError(f"{name}: its header is not a JSON object")
    return header, 8 + n


class _Twice(Exception):
    """A JSON object of the header holds a name twice (``json`` keeps the last)."""


def _once(pairs: list) -> dict:
    """``json``'s ``object_pairs_hook``: the object, or ``_Twice`` naming a repeated name."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set = set()
        raise _Twice(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return out


def entries(header: dict, data_size: int, name: str) -> tuple[list, dict[str, str]]:
    """``([(tensor, code, shape, begin), ...] in the order of their bytes, problems)``:
    ``problems`` maps a tensor whose entry lies (``data_size``: the bytes after the header)
    to a message naming the file and the tensor."""
    out, problems = [], {}
    for key, e in header.items():
        if key == "__metadata__":
            continue
        where = f"{name}, tensor {key}"
        try:
            out.append((key, *_entry(e, data_size, where)))
        except ValueError as why:
            problems[key] = f"cannot read {where}: {why}"
            out.append((key, None, (), -1, -1))
    out.sort(key=lambda t: (t[3], t[4]))
    last, last_key = 0, None
    for key, code, _, begin, end in out:
        if code is None or begin == end:
            continue
        if begin < last:
            problems[key] = (f"cannot read {name}, tensor {key}: its bytes [{begin}, {end}) "
                             f"overlap those of tensor {last_key}")  # fmt: skip
        if end > last:
            last, last_key = end, key
    return [(k, c, s, b) for k, c, s, b, _ in out], problems


def _entry(e: Any, data_size: int, where: str) -> tuple[str, tuple[int, ...], int, int]:
    if not isinstance(e, dict):
        raise ValueError("its header entry is not a JSON object")
    code, shape, offsets = e.get("dtype"), e.get("shape"), e.get("data_offsets")
    if code not in DTYPES and code not in UNSCANNED:
        raise ValueError(f"unknown dtype {code!r}")
    if not isinstance(shape, list) or not all(_is_int(n) for n in shape):
        raise ValueError(f"its shape {shape!r} is not a list of integers")
    if any(n < 0 for n in shape):
        raise ValueError(f"its shape {shape} has a negative length")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(n) for n in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise ValueError(
            f"its data_offsets {offsets!r} are not [begin, end] with 0 <= begin <= end"
        )
    begin, end = offsets
    if end > data_size:
        raise ValueError(f"its data_offsets [{begin}, {end}) run past the end of the file's "
                         f"{data_size} bytes of data: truncated, or a header that lies")  # fmt: skip
    itemsize = _ITEMSIZE.get(code) or (np.dtype(DTYPES[code]).itemsize if code in DTYPES else 0)
    if itemsize:
        n = 1
        for d in shape:
            n *= d
        if n * itemsize != end - begin:
            raise ValueError(f"its shape {shape} of {code} is {n * itemsize} bytes, its "
                             f"data_offsets hold {end - begin}")  # fmt: skip
    return code, tuple(shape), begin, end


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def open_safetensors(path: str, name: str, options: Any = None) -> Members:
    """The tensors of one safetensors file as a group ``[(tensor, factory), ...]`` in the
    order of their bytes, each memory-mapped alone."""
    path = regular_file(path, name)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        header, start = read_header(f.read(1 << 16), size, name, f.read)
    with collector_paused():  # tens of thousands of tensors: as many factories, no cycle
        found, problems = entries(header, size - start, name)
        return checked_group(_members(found, path, start, name, problems), problems, options)


def _members(found: list, path: str, start: int, name: str, problems: dict) -> Members:
    out = []
    mapped = shared_map(path)
    for key, code, shape, begin in found:
        if key in problems:
            out.append((key, None))
            continue
        where = f"{name}:{key}"

        def opened(code=code, shape=shape, begin=begin, where=where, key=key):
            dtype = numpy_dtype(code, where)  # a view of the file's one map
            return MappedTensor(path, start + begin, dtype, shape, where, "C", "safetensors",
                                key, shared=mapped)  # fmt: skip

        _small(opened, code, shape, where, lambda a, b: memoryview(mapped())[a:b], start + begin)
        out.append((key, opened))
    return out


def _small(factory, code: str, shape: tuple, where: str, view, at: int) -> None:
    """``factory.raw_npy`` (``small.tensor_raw``) of a small tensor whose bytes start at
    ``at`` of a buffer (``view(begin, end)``): what ``engines.batched`` scans many of
    together; a dtype a ``.npy`` header does not name (bfloat16, float8) goes alone."""
    if code not in DTYPES or code in _ITEMSIZE:
        return
    dtype = np.dtype(DTYPES[code])
    end = at + math.prod(shape) * dtype.itemsize
    raw = tensor_raw(where, dtype, shape, lambda: view(at, end))
    if raw is not None:
        factory.raw_npy = raw


def safetensors_bytes(data: bytes | memoryview, name: str, options: Any = None) -> Members:
    """The tensors of a safetensors file held in memory (a member of a tar), viewed in
    place."""
    view = memoryview(data)
    header, start = read_header(view[: 1 << 16], len(view), name, lambda n: view[1 << 16 :][:n])
    found, problems = entries(header, len(view) - start, name)
    out = []
    for key, code, shape, begin in found:
        if key in problems:
            out.append((key, None))
            continue

        def opened(code=code, shape=shape, begin=begin, where=f"{name}:{key}"):
            dtype = numpy_dtype(code, where)
            n = int(np.prod(shape, dtype=np.int64))
            arr = np.frombuffer(view, dtype, n, start + begin).reshape(shape)
            return ArraySource(arr, name=where)

        _small(opened, code, shape, f"{name}:{key}", lambda a, b: view[a:b], start + begin)
        out.append((key, opened))
    return checked_group(out, problems, options)


def open_index(path: str, name: str, options: Any = None) -> Members:
    """The tensors of a sharded checkpoint through its index (``weight_map``: tensor ->
    shard file, in the index's folder): every tensor of every shard it names, keyed by the
    tensor's name. A shard that is missing, outside the folder or unreadable, and a tensor
    the index puts in a shard that does not hold it, is an error naming both (or with
    ``on_error="report"`` a member listed in ``skipped``, with a finding)."""
    path = regular_file(path, name)
    return _index_members(path, name, read_weight_map(path, name), options)


def read_weight_map(path: str, name: str) -> dict[str, str]:
    """The ``weight_map`` (tensor -> shard file) of the index at ``path``, read once."""
    try:
        with open(path, "rb") as f:
            index = json.loads(f.read(MAX_HEADER + 1))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SourceError(f"{name} is not a safetensors index (JSON): {e}") from None
    wmap = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wmap, dict) or not all(isinstance(v, str) for v in wmap.values()):
        raise SourceError(f"{name} is not a safetensors index: no weight_map of tensor -> file")
    return wmap


def _index_members(path: str, name: str, wmap: dict[str, str], options: Any) -> Members:
    # a shard is named inside the folder (its name, not where a link in the folder leads:
    # a Hugging Face snapshot's shards are links into its cache's blobs)
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    shards: dict[str, list[str]] = {}
    for tensor, shard in wmap.items():  # "./s1.safetensors" and "s1.safetensors": one shard
        shards.setdefault(os.path.normpath(shard) if shard else shard, []).append(tensor)
    members, problems, seen = [], {}, {}
    for shard, named in shards.items():
        where = os.path.join(os.path.dirname(name), shard)
        shard_path = os.path.normpath(os.path.join(folder, shard))
        try:
            if os.path.isabs(shard) or not shard_path.startswith(folder + os.sep):
                raise SourceError(f"{where} is outside the index's folder {folder}: not read")
            group = open_safetensors(shard_path, where, options)
        except SourceError as e:
            why = str(e) if os.path.exists(shard_path) else f"the shard {where} is missing"
            for tensor in named:
                members.append((tensor, None))
                problems[tensor] = f"cannot read {name}, tensor {tensor}: {why}"
            continue
        held = {k for k, _ in group}
        for tensor in named:
            if tensor not in held:
                members.append((tensor, None))
                problems[tensor] = (f"cannot read {name}, tensor {tensor}: the index puts it in "
                                    f"{where}, which does not hold it")  # fmt: skip
        for key, factory in group:
            if key in seen:
                problems[key] = (f"cannot read {name}, tensor {key}: both {seen[key]} and "
                                 f"{where} hold it")  # fmt: skip
                continue
            seen[key] = where
            members.append((key, factory))
    return checked_group(members, problems, options)


def open_folder(path: str, name: str, options: Any = None) -> Members | None:
    """A directory holding one ``*.safetensors.index.json``: that sharded checkpoint; None
    for any other directory. The folder's other array files and folders, which the index
    does not name (a ``consolidated.safetensors``, an ``original/`` folder), are members
    listed in ``skipped`` with a ``stray_file`` finding: not scanned, never hidden."""
    try:
        found = [e for e in os.listdir(path) if e.endswith(".safetensors.index.json")]
    except OSError:
        return None
    if len(found) != 1:
        return None
    where = os.path.join(name, found[0])
    index = regular_file(os.path.join(path, found[0]), where)
    wmap = read_weight_map(index, where)
    members = _index_members(index, where, wmap, options)
    return members + _strays(path, found[0], wmap, {k for k, _ in members})


def _strays(path: str, index: str, wmap: dict[str, str], tensors: set[str]) -> Members:
    """The entries of a checkpoint's folder holding arrays that its index (its
    ``weight_map``) does not name."""
    from .walk import ARRAY_KINDS, name_kind

    named = {os.path.normpath(v).split(os.sep)[0] for v in wmap.values()}
    out = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.name.startswith((".", "_")) or entry.name in named or entry.name == index:
            continue
        folder = entry.is_dir(follow_symlinks=False)
        kind = "folder" if folder else name_kind(entry.name)
        if entry.name in tensors or not (folder or kind in ARRAY_KINDS):
            continue
        why = (f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} that {index} does not name: "
               "not scanned (scan it alone)")  # fmt: skip
        out.append((entry.name, failing(SkippedMemberError(why, "stray_file"))))
    return out
