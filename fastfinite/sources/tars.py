"""WebDataset shards: plain ``.tar`` files whose array members are scanned where they lie,
never extracted.

The tar's headers are read once (``tarfile``, one member at a time); the file is mapped
read-only, and each array member is read in place at its data offset: a ``.npy`` member
as an array over the mapped bytes (``TarNpySource``), a ``.npz``, safetensors or PyTorch
member through ``files.open_buffer`` over a view of them. Members are keyed by the tar's
name and their own (``"shard-000000.tar/000005.x.npy"``; a member of several arrays adds
``/name``); other members (images, labels, text) are listed in ``skipped`` with what they
are. A compressed tar cannot be mapped: it is an error saying so.

Hostile tars are errors naming the tar and the member: a truncated tar (a member's data
past the end of the file, a header cut short, no end-of-archive blocks), a ``.npy`` member
whose header lies (its shape needs more bytes than the member holds); with
``on_error="report"`` they are skipped members with an ``unreadable_member`` finding.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
from typing import Any

import numpy as np

from ..compute.blocks import check_dtype
from ..errors import SkippedMemberError, SourceError, UnsupportedDtypeError
from ..model.tar_keys import ARRAY_SUFFIXES, BUFFER_SUFFIXES, REST_OF_TAR
from .base import regular_file
from .ndarray import ArraySource
from .small import SMALL_NPY, RawNpy
from .tensors import shared_map, unique_keys

_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ": "xz", b"\x28\xb5\x2f\xfd": "zstd"}


def _base_map(path: str) -> np.ndarray:
    """The whole tar mapped read-only, as bytes (one map per tar, shared by its members)."""
    return np.memmap(path, dtype=np.uint8, mode="r")


def open_tar(path: str, options=None, key: str | None = None) -> list[tuple[str, Any]]:
    """``(member, factory)`` of every file in a plain tar, in the tar's order: array
    members open as sources, others raise ``SkippedMemberError`` saying what they are.
    Errors of the tar itself name it (and the last member read)."""
    name = key or path
    path = regular_file(path, name)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, what in _COMPRESSED.items():
        if head.startswith(magic):
            raise SourceError(
                f"{name} is a {what}-compressed tar: fastfinite reads plain .tar shards in "
                "place; decompress it first"
            )
    infos, problem = _headers(path, size)
    if infos and infos[-1].offset_data + infos[-1].size > size:
        problem = None  # cut inside the last member's data: its member says so
    out: list[tuple[str, Any]] = []
    mapped = shared_map(path)  # one map of the tar, on first use, shared by its members

    for key, info in zip(member_keys(infos), infos):
        lower = info.name.lower()
        if info.isfile() and info.sparse is not None and lower.endswith(ARRAY_SUFFIXES):
            why = (f"cannot read {name}, member {info.name}: it is a sparse member (tar -S): "
                   "its holes are not stored, so its bytes cannot be read in place")  # fmt: skip
            out.append((key, _raise(_unreadable(why, options))))
        elif info.isfile() and lower.endswith(BUFFER_SUFFIXES) and _inside(info, size):
            out += [
                (key + k[len(info.name) :], f)
                for k, f in _buffer_members(name, info, mapped, options)
            ]
        else:
            out.append((key, _member(path, name, info, size, mapped, options)))
    if problem is not None:
        last = f" after member {infos[-1].name}" if infos else ""
        why = f"{name} is truncated or corrupt{last}: {problem}"
        if options is None or options.on_error != "report":
            raise SourceError(why)
        out.append(
            (f"{infos[-1].name} {REST_OF_TAR}" if infos else REST_OF_TAR,
             _raise(SkippedMemberError(f"cannot be read: {why}", "unreadable_member")))
        )  # fmt: skip
    if not infos and problem is None:
        raise SourceError(f"{name} is an empty tar: it holds no member")
    return _unique(out)


def _unique(members: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The members, a key met again (a member ``a.npz/x`` beside the array ``x`` of the
    member ``a.npz``) made unique (``unique_keys``)."""
    return list(zip(unique_keys([k for k, _ in members]), (f for _, f in members)))


def member_keys(infos: list[tarfile.TarInfo]) -> list[str]:
    """The members' keys: their names without a leading ``./``; a name the tar holds
    twice (tar keeps both; extracting keeps the last) made unique (``unique_keys``)."""
    return unique_keys(
        [posixpath.normpath(i.name) if i.name.startswith("./") else i.name for i in infos]
    )


def _headers(path: str, size: int) -> tuple[list[tarfile.TarInfo], str | None]:
    """The tar's file members (and links, to be named) and what went wrong reading its
    headers (None when it ends as a tar should)."""
    infos: list[tarfile.TarInfo] = []
    try:
        with tarfile.open(path, "r:") as tf:
            for info in tf:
                if not info.isdir():
                    infos.append(info)
            end = tf.offset
    except tarfile.ReadError as e:
        if not infos and "empty file" in str(e):
            return [], None
        return infos, f"{e}" if infos else f"not a tar file ({e})"
    except (tarfile.TarError, OSError, ValueError) as e:
        return infos, f"{type(e).__name__}: {e}"
    if size < end + 2 * tarfile.BLOCKSIZE:  # no end-of-archive blocks: cut at a member
        return infos, "it ends without tar's end-of-archive blocks (cut short?)"
    return infos, _after_the_end(path, end)


def _after_the_end(path: str, end: int) -> str | None:
    """What is wrong with the bytes from ``end``, where ``tarfile`` stopped reading
    headers: they must be zeros to the end of the file (the end-of-archive blocks and the
    record's padding). ``tarfile`` also stops, without a word, at a header it cannot
    read (a bad checksum): the members after it would be left out unseen."""
    with open(path, "rb") as f:
        f.seek(end)
        first = f.read(2 * tarfile.BLOCKSIZE)
        if any(first):
            return f"a header that cannot be read at byte {end} (a bad checksum or garbage)"
        at = end + len(first)
        while block := f.read(1 << 20):
            if any(block):
                at += len(block) - len(block.lstrip(b"\0"))
                return (
                    f"data after its end-of-archive blocks, at byte {at} (tars written one "
                    "after the other?): it would be left out"
                )
            at += len(block)
    return None


def _inside(info: tarfile.TarInfo, size: int) -> bool:
    return info.offset_data + info.size <= size


def _buffer_members(name: str, info: tarfile.TarInfo, mapped, options) -> list:
    """The arrays of a ``.npz``, safetensors or PyTorch member, read in place from the
    mapped tar (``files.open_buffer``), keyed ``member/array``; one that cannot be read is
    an error naming the tar and the member (or, with ``on_error="report"``, a skipped
    member with an ``unreadable_member`` finding)."""
    from ..errors import FastFiniteError
    from .base import reader_errors
    from .files import open_buffer

    view = memoryview(mapped())[info.offset_data : info.offset_data + info.size]
    try:
        with reader_errors(name, info.name):
            target = open_buffer(f"{name}/{info.name}", view, options)
    except FastFiniteError as e:
        if isinstance(e, UnsupportedDtypeError):
            return [(info.name, _raise(e))]
        if options is None or options.on_error != "report":
            raise
        return [
            (info.name, _raise(SkippedMemberError(f"cannot be read: {e}", "unreadable_member")))
        ]
    if isinstance(target, list):
        return [(f"{info.name}/{k}", f) for k, f in target] or [
            (info.name, _raise(SkippedMemberError("it holds no array")))
        ]
    return [(info.name, lambda: target)]


def _raise(error: Exception):
    def raised():
        raise error

    if isinstance(error, (SkippedMemberError, UnsupportedDtypeError)):
        raised.skip = error  # what it raises, known without calling it (``ShardSet.skips``)
    return raised


def _member(path, name, info: tarfile.TarInfo, size: int, mapped, options):
    """The factory of one member."""
    if not info.isfile():
        what = "a link" if info.issym() or info.islnk() else "not a regular file"
        return _raise(SkippedMemberError(f"{what} in the tar, not an array"))
    if info.offset_data + info.size > size:
        return _raise(
            _unreadable(
                f"cannot read {name}, member {info.name}: its data ends at byte "
                f"{info.offset_data + info.size}, "
                f"past the end of the file ({size} bytes): the tar is truncated",
                options,
            )
        )
    if info.name.lower().endswith(".npy"):
        factory = lambda: _npy_member(path, name, info, mapped, options)  # noqa: E731
        if info.size <= SMALL_NPY:
            a, b = info.offset_data, info.offset_data + info.size
            factory.raw_npy = RawNpy(f"{name}/{info.name}", view=lambda: memoryview(mapped())[a:b])
        return factory
    suffix = "." + info.name.rsplit("/", 1)[-1].split(".", 1)[-1] if "." in info.name else ""
    return _raise(SkippedMemberError(f"a {suffix or 'file'} member, not an array"))


def _unreadable(why: str, options) -> SourceError:
    if options is not None and options.on_error == "report":
        return SkippedMemberError(why, "unreadable_member")
    return SourceError(why)


def _npy_member(path, name, info, mapped, options) -> ArraySource:
    """A ``.npy`` member, over the mapped tar; its header checked against its size."""
    from numpy.lib import format as npf

    where = f"{name}, member {info.name}"
    raw = np.asarray(mapped()[info.offset_data : info.offset_data + info.size])
    try:
        import io

        f = io.BytesIO(raw[: min(len(raw), 1 << 20)].tobytes())
        version = npf.read_magic(f)
        reader = npf.read_array_header_1_0 if version == (1, 0) else npf.read_array_header_2_0
        shape, fortran, dtype = reader(f)
        header = f.tell()
    except Exception as e:  # noqa: BLE001 - any lie of a header
        text = str(e)
        raise _unreadable(f"{where} is not a valid .npy: {text[:200]}", options) from None
    if dtype.hasobject:
        raise UnsupportedDtypeError(f"cannot scan {where}: it holds Python objects")
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if header + need > info.size:
        raise _unreadable(
            f"{where}: its header says {dtype} {shape} ({need} bytes), the member holds "
            f"{info.size - header} bytes of data",
            options,
        )
    return TarNpySource(
        path, name, info.name, info.offset_data + header, shape, dtype, fortran, mapped()
    )


class TarNpySource(ArraySource):
    """A ``.npy`` member of a plain tar, read in place from the mapped tar; it pickles as
    where it lies and maps the tar again where it is unpickled (a Dask worker)."""

    def __init__(self, tar, name, member, offset, shape, dtype, fortran, base=None):
        self.tar, self.member, self.offset, self.fortran = tar, member, offset, fortran
        self._shape, self._dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        arr = self._map(base)
        super().__init__(arr, name=f"{name}/{member}")
        self.reads_in_tasks = True

    def _map(self, base=None) -> np.ndarray:
        base = _base_map(self.tar) if base is None else base
        n = int(np.prod(self._shape, dtype=np.int64))
        flat = base[self.offset : self.offset + n * self._dtype.itemsize].view(self._dtype)
        check_dtype(self._dtype, self.member)
        if self.fortran:
            return flat.reshape(self._shape[::-1]).T
        return flat.reshape(self._shape)

    def __reduce__(self):
        return (
            TarNpySource,
            (self.tar, self.name.rsplit("/" + self.member, 1)[0], self.member, self.offset,
             self._shape, self._dtype, self.fortran),
        )  # fmt: skip

    @property
    def array(self) -> np.ndarray:
        return self._array

    def identity(self) -> dict | None:
        # "location": what a cache keeps it under (the tar's members, each its own)
        return {"kind": "tar-npy", "location": f"{self.tar}/{self.member}", "member": self.member,
                "offset": self.offset, "dtype": self.dtype.str, "shape": list(self.shape)}  # fmt: skip

    def fingerprints(self):
        from .fingerprints import whole_file

        return whole_file(self.tar)

    def verify(self) -> None:
        regular_file(self.tar, self.tar)
