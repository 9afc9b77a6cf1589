"""NumPy ``.npz`` archives, one member per array: a member stored uncompressed
(``np.savez``) is memory-mapped at its data's offset in the file (the zip's local header
parsed here; its CRC-32 checked when its turn comes, as ``np.load`` checks it), a compressed one (``np.savez_compressed``) is read whole when its turn comes,
one at a time. Members are keyed as ``np.load`` names them (``"x"`` for ``x.npy``)."""

from __future__ import annotations

import io
import os
import zipfile
from functools import partial
from typing import Any

import numpy as np

from ..compute.pools import collector_paused
from ..errors import SkippedMemberError, SourceError, UnsupportedDtypeError
from .base import regular_file
from .ndarray import ArraySource, as_raw_dtype
from .small import SMALL_NPY, RawNpy
from .tensors import (
    HeldMember,
    MappedTensor,
    Members,
    checked_group,
    crc_checked,
    failing,
    file_data_start,
    inflated,
    member_bytes,
    member_error,
    shared_map,
    stored_check,
    unique_keys,
)

MAX_HEADER = 1 << 20  # the largest .npy header read (NumPy's default is 10 kB)


def npy_header(f, name: str) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """``(dtype, shape, fortran_order, header_length)`` of the ``.npy`` at ``f``'s position,
    the header checked: a ``SourceError`` naming ``name`` when it is not one."""
    start = f.tell()
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f, max_header_size=MAX_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(f, max_header_size=MAX_HEADER)
        else:
            from numpy.lib import _format_impl

            shape, fortran, dtype = _format_impl._read_array_header(f, version, MAX_HEADER)
    except Exception as e:
        raise SourceError(f"{name} is not a valid .npy: {e}") from None
    if dtype.hasobject:
        raise UnsupportedDtypeError(f"cannot scan {name}: it holds Python objects")
    return dtype, tuple(shape), bool(fortran), f.tell() - start


def _header_once(f, name: str, known: dict) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """``npy_header``, parsed once per distinct header's bytes (``known``): the members of
    an ``.npz`` of many small arrays mostly share a few."""
    start = f.tell()
    first = f.read(12)
    if len(first) == 12 and first[6] in (1, 2):
        n = 10 + int.from_bytes(first[8:10], "little")
        if first[6] == 2:
            n = 12 + int.from_bytes(first[8:12], "little")
        if n <= MAX_HEADER:
            f.seek(start)
            key = f.read(n)
            got = known.get(key)
            if got is not None:
                return got
            f.seek(start)
            got = npy_header(f, name)
            if got[3] == n:
                known[key] = got
            return got
    f.seek(start)
    return npy_header(f, name)


def _raw(dtype: np.dtype, options: Any, name: str) -> np.dtype:
    raw = getattr(options, "raw_dtype", None)
    return as_raw_dtype(np.empty(0, dtype), raw, name).dtype if raw else dtype


def open_npz(path: str, name: str, options: Any = None) -> Members:
    """The arrays of the ``.npz`` file ``path`` as a group ``[(key, factory), ...]``
    (``name``: what the report calls the file)."""
    path = regular_file(path, name)
    size = os.path.getsize(path)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise SourceError(f"{name} is not a valid .npz (zip) file: {e}") from None
    members, problems = [], {}
    infos = [i for i in infos if not i.is_dir()]
    mapped = shared_map(path)  # small members' bytes, read whole (``engines.batched``)
    raw_dtype = getattr(options, "raw_dtype", None)
    known: dict = {}  # a .npy header's bytes -> npy_header's answer
    with collector_paused(), open(path, "rb") as f:  # thousands of members, no cycle
        for info, (key, member) in zip(infos, _names(infos)):
            where = f"{name}, member {member}"
            if not info.filename.endswith(".npy"):
                members.append((key, _skipped(f"{info.filename} is not a .npy member")))
            elif info.flag_bits & 1:
                members.append((key, None))
                problems[key] = f"cannot read {where}: it is encrypted"
            elif info.compress_type == zipfile.ZIP_STORED:
                try:
                    factory, start = _stored(
                        path, info, size, member, where, options, f, known, mapped
                    )
                except UnsupportedDtypeError as e:
                    members.append((key, failing(e)))
                except SourceError as e:
                    members.append((key, None))
                    problems[key] = str(e)
                else:
                    if info.file_size <= SMALL_NPY:
                        view = partial(crc_checked, mapped, start, info)
                        factory.raw_npy = RawNpy(_named(where), view=view, raw_dtype=raw_dtype)
                    members.append((key, factory))
            else:
                small = mapped if info.file_size <= SMALL_NPY else None

                def factory(i=info, m=member, small=small):
                    return _inflated(path, i, m, name, options, small)

                if info.compress_type == zipfile.ZIP_DEFLATED and info.file_size <= SMALL_NPY:
                    view = lambda i=info: inflated(memoryview(mapped()), i)  # noqa: E731
                    factory.raw_npy = RawNpy(_named(where), view=view, raw_dtype=raw_dtype)
                members.append((key, factory))
    return checked_group(members, problems, options)


def _named(where: str) -> str:
    """What a member's source is called: ``"file.npz:x.npy"``."""
    return where.replace(", member ", ":")


def _key(filename: str) -> str:
    return filename[:-4] if filename.endswith(".npy") else filename


def _names(infos: list[zipfile.ZipInfo]) -> list[tuple[str, str]]:
    """``(key, member)`` of each member: ``np.load``'s name (``"x"`` for ``x.npy``) and the
    member's, each made unique (``unique_keys``): a name the zip holds twice (``np.load``
    reads the last), ``x`` beside ``x.npy``."""
    keys = unique_keys([_key(i.filename) for i in infos])
    return list(zip(keys, unique_keys([i.filename for i in infos])))


def _skipped(why: str):
    return failing(SkippedMemberError(why))


def _stored(
    path: str,
    info: zipfile.ZipInfo,
    size: int,
    member: str,
    where: str,
    options: Any,
    f,
    known: dict,
    mapped,
):
    """``(the factory of a stored member, where its bytes start)``, its headers checked
    now (read from ``f``, the file opened; ``known``: the ``.npy`` headers parsed so far):
    the local header's offset and the ``.npy`` header inside, the array within the member
    and the file; a small member is read through ``mapped``, the file's one map."""
    start = file_data_start(path, info, size, where, f)
    f.seek(start)
    dtype, shape, fortran, head = _header_once(f, where, known)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if head + nbytes != info.file_size:
        raise SourceError(f"cannot read {where}: its header says {dtype} {shape} "
                          f"({nbytes} bytes), the member holds {info.file_size - head}")  # fmt: skip
    name = _named(where)
    dtype = _raw(dtype, options, name)
    order = "F" if fortran else "C"

    def opened():
        crc = stored_check(path, start, info, where, options)
        return MappedTensor(path, start + head, dtype, shape, name, order, "npz", member,
                            None, crc, shared=mapped)  # fmt: skip

    return opened, start


def _inflated(path: str, info: zipfile.ZipInfo, member: str, name: str, options: Any, mapped=None):
    """A compressed member, read whole (it is the one member in memory): a small deflated
    one from ``mapped``, the file's one map (no zip opened again, its whole directory read,
    for each of thousands of members), else (or when that fails) through ``zipfile``,
    which says what is wrong."""
    where = f"{name}, member {member}"
    data = None
    if mapped is not None and info.compress_type == zipfile.ZIP_DEFLATED:
        try:
            data = inflated(memoryview(mapped()), info)
        except Exception:  # noqa: BLE001 - zipfile reads it again, and names the problem
            data = None
    try:
        if data is None:
            with zipfile.ZipFile(path) as zf, zf.open(info) as f:
                data = f.read()
    except Exception as e:  # a corrupt stream, a bad CRC, a file cut short
        raise member_error(options, f"cannot read {where}: {type(e).__name__}: {e}") from None
    source = npy_bytes(data, where.replace(", member ", ":"), options)
    return HeldMember(source.array, source.name, path, member, "npz")


def npy_bytes(data: bytes | memoryview, name: str, options: Any = None) -> ArraySource:
    """An array from the bytes of a ``.npy`` (a member in memory), viewed in place."""
    f = io.BytesIO(data)
    dtype, shape, fortran, head = npy_header(f, name)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if head + nbytes != len(data):
        raise SourceError(f"{name}: its header says {dtype} {shape} ({nbytes} bytes), it "
                          f"holds {len(data) - head}")  # fmt: skip
    arr = np.frombuffer(data, dtype, int(np.prod(shape, dtype=np.int64)), head)
    arr = arr.reshape(shape, order="F" if fortran else "C")
    if getattr(options, "raw_dtype", None):
        arr = as_raw_dtype(arr, options.raw_dtype, name)
    return ArraySource(arr, name=name)


def npz_bytes(data: bytes | memoryview, name: str, options: Any = None) -> Members:
    """The arrays of a ``.npz`` held in memory (a member of a tar), one at a time: stored
    members viewed in place, compressed ones read out."""
    view = memoryview(data)
    try:
        zf = zipfile.ZipFile(io.BytesIO(view))
        infos = [i for i in zf.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, ValueError, EOFError) as e:
        raise SourceError(f"{name} is not a valid .npz (zip) file: {e}") from None

    def opened(info, member):
        where = f"{name}:{member}"
        if not info.filename.endswith(".npy"):
            raise SkippedMemberError(f"{info.filename} is not a .npy member")
        return npy_bytes(member_bytes(view, zf, info, where, options), where, options)

    out = []
    raw_dtype = getattr(options, "raw_dtype", None)
    for i, (key, m) in zip(infos, _names(infos)):
        factory = lambda i=i, m=m: opened(i, m)  # noqa: E731
        if i.filename.endswith(".npy") and i.file_size <= SMALL_NPY and not i.flag_bits & 1:
            where = f"{name}:{m}"
            read = lambda i=i, w=where: member_bytes(view, zf, i, w, options)  # noqa: E731
            factory.raw_npy = RawNpy(where, view=read, raw_dtype=raw_dtype)
        out.append((key, factory))
    return out
