"""What the checkpoint readers share: a tensor stored raw at an offset of a file, read in
place through a memory map (``MappedTensor``), or read whole from a compressed member
(``HeldMember``); where a zip member's bytes start (``zip_data_start``, ``member_bytes``:
in place in a buffer) and whether they are those the zip recorded (``check_crc``: a stored
member is never inflated, so nothing else checks its CRC-32); the errors of a tensor that cannot be read (``member_error``: a
``SourceError``, or with ``on_error="report"`` a member listed in ``skipped`` with an
``unreadable_member`` finding); a group of members checked at once (``checked_group``); and
a nested ``dict`` of arrays as a group (``dict_members``)."""

from __future__ import annotations

import copy
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, SkippedMemberError, SourceError, UnsupportedDtypeError
from ..model.casts import cast_dtype
from .base import Source
from .ndarray import ArraySource

Members = list  # [(key, factory), ...]: the group mechanism of ``open.Target``


def format_dtype(name: str, where: str, code: str | None = None) -> np.dtype:
    """The NumPy dtype of format ``name`` (bfloat16 and float8: ml_dtypes', through
    ``casts.cast_dtype``); without ml_dtypes an ``UnsupportedDtypeError`` naming ``where``
    and the checkpoint's own ``code`` for the format."""
    try:
        return cast_dtype(name)
    except InvalidArgumentError:
        raise UnsupportedDtypeError(
            f"cannot scan {where}: {code or name} data is read with ml_dtypes: pip install "
            "ml_dtypes"
        ) from None


class MappedTensor(ArraySource):
    """One array stored raw (C or Fortran order, or by ``strides`` in elements: a view of a
    PyTorch storage) at byte ``offset`` of the file ``path``, read in place through a
    read-only memory map of its bytes alone, or (``shared``: ``shared_map``'s ``mapped``)
    a view of one map of the whole file that the file's tensors share, rather than a map
    each (300 tensors of a 2 GB checkpoint: a tenth of its scan; each region's pages are
    given back after it is scanned, ``release``, as with a map of its own); it pickles as
    where it is and maps its bytes again where it is unpickled (a Dask task)."""

    def __init__(
        self,
        path: str,
        offset: int,
        dtype: np.dtype,
        shape: tuple[int, ...],
        name: str,
        order: str = "C",
        kind: str = "tensor",
        member: str = "",
        strides: tuple[int, ...] | None = None,
        crc: tuple | None = None,
        shared: Callable[[], np.ndarray] | None = None,
    ):
        self.offset, self.order, self.kind, self.strides = int(offset), order, kind, strides
        self.crc = crc  # ``stored_check``'s, when the member's CRC-32 is checked at its first read
        self.member = member or str(self.offset)  # its name in the file
        self._planned = (np.dtype(dtype), tuple(int(n) for n in shape))
        self._shared = shared if strides is None else None
        super().__init__(self._map(path), name=name, path=path)

    def __reduce__(self):  # mapped again where it is unpickled
        return (_remapped, (self.__dict__ | {"_array": None, "_shared": None},))

    def _map(self, path: str) -> np.ndarray:
        dtype, shape = self._planned
        if self._shared is not None and _span(shape, None) and dtype.itemsize:
            n = _span(shape, None) * dtype.itemsize
            flat = self._shared()[self.offset : self.offset + n]
            if len(flat) != n:  # the file is shorter than when it was listed
                raise SourceError(f"cannot read {path}, member {self.member}: the file is now "
                                  "shorter than its header says")  # fmt: skip
            return flat.view(dtype).reshape(shape, order=self.order)
        return _mapped(path, self.offset, dtype, shape, self.order, self.strides)

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = self._map(self.path)
        return self._array

    def read(self, region):
        if self.crc is not None:
            self._check_crc()
        return super().read(region)

    def _check_crc(self) -> None:
        with _CRC_LOCK:  # once, on one thread: a region's thread runs it alone
            if self.crc is None:
                return
            start, size, crc, message = self.crc
            if file_crc(self.path, start, size, 1) != crc:
                raise SourceError(message)
            self.crc = None

    def verify(self) -> None:
        """The file is still there and still holds the tensor's bytes."""
        dtype, shape = self._planned
        end = self.offset + _span(shape, self.strides) * dtype.itemsize
        try:
            size = os.stat(self.path).st_size
        except OSError as e:
            raise SourceError(f"cannot read {self.name}: {e.strerror or e}") from None
        if size < end:
            raise SourceError(f"{self.name}: the file is now {size} bytes, shorter than {end}")

    @property
    def location(self) -> str:
        """The file and the tensor's name in it: tensors of one file are other arrays to a
        cache and to Dask's keys."""
        return f"{os.path.abspath(self.path)}:{self.member}"

    def identity(self) -> dict:
        dtype, shape = self._planned
        return {"kind": self.kind, "path": os.path.abspath(self.path), "offset": self.offset,
                "dtype": dtype.str, "shape": list(shape), "order": self.order,
                "strides": self.strides and list(self.strides),
                "location": self.location}  # fmt: skip


class HeldMember(ArraySource):
    """An array read whole from a compressed member of the file ``path`` (a member of a
    ``.npz`` of ``np.savez_compressed``), held in RAM while it is scanned; a cache knows it
    by the file and the member."""

    def __init__(self, array: np.ndarray, name: str, path: str, member: str, kind: str):
        super().__init__(array, name=name)
        self.file, self.member, self.kind = os.path.abspath(path), member, kind

    @property
    def location(self) -> str:
        return f"{self.file}:{self.member}"

    def identity(self) -> dict:
        return {"kind": self.kind, "path": self.file, "member": self.member,
                "dtype": self.dtype.str, "shape": list(self.shape),
                "location": self.location}  # fmt: skip

    def fingerprints(self):
        from .fingerprints import whole_file

        return whole_file(self.file)


_CRC_LOCK = threading.Lock()


def shared_map(path: str) -> Callable[[], np.ndarray]:
    """``mapped()``: the whole file ``path`` mapped read-only as bytes, on first use, one
    map shared by the members read from it (``small.RawNpy``, ``MappedTensor``) rather
    than a map each."""
    base: list[np.ndarray] = []

    def mapped() -> np.ndarray:
        if not base:
            base.append(np.memmap(path, dtype=np.uint8, mode="r"))
        return base[0]

    return mapped


def _remapped(state: dict) -> MappedTensor:
    source = MappedTensor.__new__(MappedTensor)
    source.__dict__.update(state)
    return source


def _span(shape, strides) -> int:
    """Elements from the first a tensor reaches to its last, inclusive (0 when empty)."""
    if 0 in shape:
        return 0
    if strides is None:
        return int(np.prod(shape, dtype=np.int64))
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def _mapped(path: str, offset: int, dtype, shape, order: str, strides=None) -> np.ndarray:
    dtype = np.dtype(dtype)
    if _span(shape, strides) == 0 or dtype.itemsize == 0:
        return np.zeros(shape, dtype)  # nothing to map (mmap refuses a length of 0)
    if strides is None:
        return np.memmap(path, dtype, "r", offset=offset, shape=tuple(shape), order=order)
    base = np.memmap(path, dtype, "r", offset=offset, shape=(_span(shape, strides),))
    return strided_view(base, tuple(shape), tuple(s * dtype.itemsize for s in strides))


def strided_view(base: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]):
    """``np.lib.stride_tricks.as_strided`` (read-only) for every dtype: taken over bytes of
    the item's size and viewed back, since ml_dtypes' ``float8_e5m2`` has an array
    interface type (``<f1``) that ``as_strided`` cannot read back."""
    raw = base.view(np.dtype(f"V{base.dtype.itemsize}"))
    view = np.lib.stride_tricks.as_strided(raw, shape, strides, writeable=False)
    return view.view(base.dtype)


_LOCAL = struct.Struct("<4s22xHH")  # a zip local header: signature ... name and extra lengths


def zip_data_start(head: bytes, info: Any, size: int, where: str, length: int | None = None) -> int:
    """Where the bytes of the zip member ``info`` start, from ``head`` (the bytes at its
    local header's offset, its name included), in a zip of ``size`` bytes; a
    ``SourceError`` naming ``where`` when the header is not there, names another member
    (as ``zipfile`` refuses it) or its ``length`` bytes (default: its ``file_size``, a
    stored member's) run past the end."""
    if len(head) < _LOCAL.size or bytes(head[:4]) != b"PK\x03\x04":
        raise SourceError(f"cannot read {where}: the local zip header of {info.filename} is "
                          f"not at offset {info.header_offset}")  # fmt: skip
    n, m = _LOCAL.unpack(bytes(head[: _LOCAL.size]))[1:]
    name = bytes(head[_LOCAL.size : _LOCAL.size + n])
    if name.decode("utf-8" if info.flag_bits & 0x800 else "cp437", "replace") != info.orig_filename:
        raise SourceError(f"cannot read {where}: the local zip header at offset "
                          f"{info.header_offset} names {name!r}, not {info.filename}")  # fmt: skip
    start = info.header_offset + _LOCAL.size + n + m
    length = info.file_size if length is None else length
    if start + length > size:
        raise SourceError(f"cannot read {where}: {info.filename}'s {length} bytes at "
                          f"offset {start} run past the end of the file ({size} bytes)")  # fmt: skip
    return start


def file_data_start(path: str, info: Any, size: int, where: str, f: Any = None) -> int:
    """``zip_data_start`` of a member of the zip file ``path`` (``f``: the file, opened
    already)."""
    if f is None:
        with open(path, "rb") as f:
            return file_data_start(path, info, size, where, f)
    f.seek(info.header_offset)
    head = f.read(_LOCAL.size)
    if len(head) == _LOCAL.size:
        head += f.read(_LOCAL.unpack(head)[1])  # its name
    return zip_data_start(head, info, size, where)


def inflated(view: memoryview, info: Any) -> bytes:
    """The bytes of the deflated member ``info`` of a zip held in ``view`` (a map of the
    file), inflated to its ``file_size`` at most (never further: a zip bomb) and checked
    against its size and CRC; ``SourceError`` or zlib's error when they do not match."""
    import zlib

    head = view[info.header_offset :][: _LOCAL.size + 0xFFFF]
    start = zip_data_start(head, info, len(view), info.filename, info.compress_size)
    stream = zlib.decompressobj(-15)
    data = stream.decompress(view[start : start + info.compress_size], info.file_size + 1)
    if not stream.eof or len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise SourceError(f"{info.filename}: its inflated bytes are not the ones it names")
    return data


def crc_checked(mapped: Callable[[], np.ndarray], start: int, info: Any) -> memoryview | None:
    """The bytes of a small stored member at ``start`` of ``mapped()`` (the file's one
    map, ``shared_map``) when their CRC-32 is the zip's, else None: the member is then
    scanned alone, and its factory says what is wrong (``stored_check``)."""
    view = memoryview(mapped())[start : start + info.file_size]
    return view if len(view) == info.file_size and zlib.crc32(view) == info.CRC else None


CRC_CHUNK = 1 << 22  # a stored member's CRC-32 is taken in chunks of this many bytes


def crc_message(where: str, filename: str) -> str:
    return (f"cannot read {where}: Bad CRC-32 for {filename} (its bytes are not those the "
            "zip recorded: the file is corrupt)")  # fmt: skip


def check_crc(data: Any, info: Any, where: str, options: Any, zero_unset: bool = False) -> None:
    """Raise ``member_error`` when the CRC-32 of a stored zip member's bytes is not the
    one its zip recorded (``zipfile`` and ``np.load`` refuse such a member: "Bad CRC-32").
    ``data``: its bytes in memory, or ``(path, start)``: where they are in a file, read in
    chunks on every core (``zlib.crc32`` runs without the GIL), memory bounded.
    ``zero_unset``: a CRC-32 of 0 says none was computed (``unset_crc``)."""
    if unset_crc(info, zero_unset):
        return
    if not isinstance(data, tuple):
        crc = zlib.crc32(data)
    else:  # a file: checked once while it is unchanged (a set's progress bar, a replay)
        st = os.stat(data[0])
        seen = (*data, info.file_size, info.CRC, st.st_ino, st.st_size, st.st_mtime_ns,
                st.st_ctime_ns)  # fmt: skip
        if seen in _CHECKED:
            return
        crc = file_crc(*data, info.file_size)
    if crc != info.CRC:
        raise member_error(options, crc_message(where, info.filename))
    if isinstance(data, tuple) and time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > 2e9:
        _CHECKED.add(seen)  # not when written within a tick of the clock: unseen rewrites


_CHECKED: set[tuple] = set()  # the stored members whose CRC-32 matched, by where and stat


def stored_check(path: str, start: int, info: Any, where: str, options: Any, zero_unset=False):
    """The CRC-32 check of a stored member of the zip file ``path`` (its bytes at
    ``start``): done now, or, when the scan keeps a cache, ``(start, size, crc, message)``
    for ``MappedTensor``, which checks it when it is first read (a file the cache recalls
    is not read again: its bytes, checked when it was scanned, have not changed); None
    when there is nothing left to check (``zero_unset``: see ``unset_crc``)."""
    if unset_crc(info, zero_unset):
        return None
    if options is not None and getattr(options, "cache", None) is not None:
        return (start, info.file_size, info.CRC, crc_message(where, info.filename))
    check_crc((path, start), info, where, options)
    return None


def unset_crc(info: Any, zero_unset: bool) -> bool:
    """Whether the zip recorded no CRC-32 for the member ``info``: with ``zero_unset``, a
    CRC of 0 (``torch.save`` with ``compute_crc32=False`` writes 0 for every member, and
    ``torch.load`` reads them; a member whose true CRC is 0, one in 2**32, goes unchecked)."""
    return zero_unset and info.CRC == 0


def zip_read(zf: Any, info: Any, zero_unset: bool = False) -> bytes:
    """``zf.read(info)``, its CRC-32 checked unless ``unset_crc``."""
    if unset_crc(info, zero_unset):
        info = copy.copy(info)
        del info.CRC  # zipfile checks the CRC-32 of a member that has one
    return zf.read(info)


def file_crc(path: str, start: int, size: int, workers: int | None = None) -> int:
    """The CRC-32 of ``size`` bytes at ``start`` of the file ``path``: a head of less than
    ``CRC_CHUNK`` bytes, then whole chunks on ``workers`` threads (default: every core),
    joined by ``_CHUNK_SHIFT``; -1 when the file is now shorter."""
    from ..compute.parts import default_workers
    from ..compute.pools import bounded_map

    head = size % CRC_CHUNK
    fd = os.open(path, os.O_RDONLY)
    try:

        def crc_at(offset: int, n: int = CRC_CHUNK) -> int:
            data = os.pread(fd, n, offset)
            return zlib.crc32(data) if len(data) == n else -1  # -1: the file is now shorter

        crc = crc_at(start, head)
        offsets = range(start + head, start + size, CRC_CHUNK)
        for part in bounded_map(crc_at, offsets, workers or default_workers()):
            if crc < 0 or part < 0:
                return -1
            crc = _shifted(_CHUNK_SHIFT, crc) ^ part
        return crc
    finally:
        os.close(fd)


def _shifted(op: list[int], crc: int) -> int:
    """``op`` (32 columns over GF(2)) applied to ``crc``."""
    out, i = 0, 0
    while crc:
        if crc & 1:
            out ^= op[i]
        crc, i = crc >> 1, i + 1
    return out


def _shift_op(nbytes: int) -> list[int]:
    """The linear map ``c -> crc32(zeros, c) ^ crc32(zeros, 0)`` for ``nbytes`` (a power
    of two) zero bytes: ``crc32(a + b) == crc32(b) ^ op(crc32(a))`` for ``len(b) == nbytes``
    (zlib's ``crc32_combine``, which Python's ``zlib`` does not offer)."""
    op = [zlib.crc32(b"\0", 1 << i) ^ zlib.crc32(b"\0") for i in range(32)]
    for _ in range(nbytes.bit_length() - 1):  # squared: twice as many zeros
        op = [_shifted(op, c) for c in op]
    return op


_CHUNK_SHIFT = _shift_op(CRC_CHUNK)


def member_bytes(view: memoryview, zf: Any, info: Any, where: str, options: Any, zero_unset=False):
    """The bytes of a member of a zip held in ``view``: a slice of it when the member is
    stored (in place, never copied), else read out (``member_error`` when it cannot be, or
    when its CRC-32 is not the zip's; ``zero_unset``: see ``unset_crc``)."""
    import zipfile

    try:
        if info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 1:
            start = zip_data_start(
                view[info.header_offset :][: _LOCAL.size + 0xFFFF], info, len(view), where
            )
            data = view[start : start + info.file_size]
            check_crc(data, info, where, options, zero_unset)
            return data
        return zip_read(zf, info, zero_unset)
    except SourceError as e:
        raise member_error(options, str(e)) from None
    except Exception as e:  # a corrupt stream, a bad CRC
        raise member_error(options, f"cannot read {where}: {type(e).__name__}: {e}") from None


def member_error(options: Any, message: str) -> SourceError:
    """The error of a member that cannot be read (``message`` names the file and the
    member): a ``SourceError``, or with ``on_error="report"`` a ``SkippedMemberError`` that
    a group's plan lists in ``skipped`` with an ``unreadable_member`` finding, the other
    members scanned."""
    if options is not None and getattr(options, "on_error", "raise") == "report":
        return SkippedMemberError(message, "unreadable_member")
    return SourceError(message)


def failing(error: Exception) -> Callable[[], Source]:
    """A member's factory that raises ``error``."""

    def opened():
        raise error

    return opened


def unique_keys(keys: list[str]) -> list[str]:
    """``keys`` in order, each met again given `` (2)``, `` (3)``... (the first such that
    is no other key), so that no member hides another: a name an archive holds twice, a
    member beside another's array of its key (``x`` beside ``x.npy`` in an ``.npz``)."""
    taken = set(keys)
    seen: dict[str, int] = {}
    out = []
    for key in keys:
        n = seen.get(key, 0)
        if n:
            while f"{key} ({n + 1})" in taken:
                n += 1
            taken.add(f"{key} ({n + 1})")
            out.append(f"{key} ({n + 1})")
        else:
            out.append(key)
        seen[key] = n + 1
    return out


def checked_group(members: Members, problems: dict[str, str], options: Any) -> Members:
    """``members`` (``(key, factory)``, in their order) with those in ``problems`` (key ->
    message naming the file and the member) failing: at once, on the first, unless
    ``on_error="report"``, where each is listed in ``skipped`` with an
    ``unreadable_member`` finding and the rest are scanned."""
    for message in problems.values():
        error = member_error(options, message)
        if not isinstance(error, SkippedMemberError):
            raise error
    return [(k, failing(member_error(options, problems[k])) if k in problems else f)
            for k, f in members]  # fmt: skip


def nested_items(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(key, value)`` of the leaves of nested dicts, keys joined with ``.``
    (``{"layers": {"0": {"w": x}}}`` -> ``("layers.0.w", x)``)."""
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            yield from nested_items(v, key)
        else:
            yield key, v


def dict_members(data: dict, options: Any, open_value: Callable[[Any, Any], Any]) -> Members:
    """A ``dict`` (and nested dicts) of arrays as a group keyed by their path
    (``"layers.0.w"``), in the dict's order; ``open_value(value, options)`` opens one.
    Two values of one key (``{"a.b": x, "a": {"b": y}}``) are an error."""
    out: Members = []
    seen: set[str] = set()
    for key, value in nested_items(data):
        if key in seen:
            raise SourceError(f"the dict has two arrays under the key {key!r} (nested keys are "
                              "joined with '.')")  # fmt: skip
        seen.add(key)

        def opened(value=value, key=key):
            if value is None or isinstance(value, (str, bytes)):
                raise UnsupportedDtypeError(f"{key} is {type(value).__name__}, not an array")
            if isinstance(value, np.ndarray) and not (options is not None and options.raw_dtype):
                return ArraySource(value, name=key)
            source = open_value(value, options)
            if isinstance(source, list):
                raise SourceError(f"{key} is a group of arrays: scan it on its own")
            if not getattr(source, "name", ""):
                source.name = key
            return source

        out.append((key, opened))
    return out
