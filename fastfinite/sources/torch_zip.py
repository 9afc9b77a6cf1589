"""PyTorch checkpoints (``torch.save``: ``.pt``, ``.pth``, ``.bin``) read without torch and
without executing their pickle.

A checkpoint is a zip: ``<archive>/data.pkl`` (the object, pickled), ``<archive>/data/<key>``
(each storage's raw bytes, stored uncompressed) and ``<archive>/byteorder``, each member's
CRC-32 checked (but a CRC of 0: ``torch.save`` writes it when told to compute none). The
pickle is read by ``unpickle.TensorUnpickler``, which refuses any global but the tensor rebuild
functions, storages and plain containers; each tensor is then a memory map of its bytes in
its storage's member (a strided view where its strides say so), keyed by its path in the
nested dicts (``"model.layers.0.w"``). Legacy (non-zip) checkpoints, as torch < 1.6 wrote
them, are read the same way: their pickles restricted alike, their storages mapped where
they follow the pickles.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import SkippedMemberError, SourceError, UnsupportedDtypeError
from .base import regular_file
from .ndarray import ArraySource
from .tensors import (
    HeldMember,
    MappedTensor,
    Members,
    checked_group,
    failing,
    file_data_start,
    format_dtype,
    member_bytes,
    member_error,
    stored_check,
    strided_view,
    zip_read,
)
from .unpickle import TensorRef, UnreadTensor, itemsize, load, tensors_of

MAX_PICKLE = 256 << 20  # the largest data.pkl read (a state dict's is kilobytes)
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def storage_dtype(ref: TensorRef, byteorder: str, where: str) -> np.dtype:
    """The NumPy dtype of a tensor (its own, or its storage's), in the checkpoint's byte
    order (``UnsupportedDtypeError`` for bfloat16 and float8 without ml_dtypes)."""
    dtype = format_dtype(ref.dtype or ref.storage.type.dtype, where)
    return dtype.newbyteorder("<" if byteorder == "little" else ">")


def tensor_span(ref: TensorRef, where: str, dtype: np.dtype) -> int:
    """The elements (of ``dtype``) of its storage a tensor reaches (0 when it is empty),
    its size and stride checked against the storage (``SourceError`` naming it)."""
    if len(ref.size) != len(ref.stride):
        raise SourceError(f"cannot read {where}: size {ref.size} and stride {ref.stride} differ "
                          "in length")  # fmt: skip
    if any(n < 0 for n in ref.size) or any(s < 0 for s in ref.stride) or ref.offset < 0:
        raise SourceError(f"cannot read {where}: a negative size, stride or offset "
                          f"({ref.size}, {ref.stride}, {ref.offset})")  # fmt: skip
    if 0 in ref.size:
        return 0
    end = ref.offset + 1 + sum((n - 1) * s for n, s in zip(ref.size, ref.stride))
    held = ref.storage.nbytes // dtype.itemsize
    if end > held:
        raise SourceError(f"cannot read {where}: it reaches element {end} of its storage "
                          f"{ref.storage.key}, which holds {held}")  # fmt: skip
    return end


def _contiguous(ref: TensorRef) -> str | None:
    """``"C"`` or ``"F"`` when the tensor's strides are those of a dense array."""
    size, stride = ref.size, ref.stride
    for order, dims in (("C", range(len(size) - 1, -1, -1)), ("F", range(len(size)))):
        step, ok = 1, True
        for d in dims:
            if size[d] != 1 and stride[d] != step:
                ok = False
                break
            step *= size[d]
        if ok:
            return order
    return None


def strided(base: np.ndarray, ref: TensorRef) -> np.ndarray:
    """The tensor's values, a read-only view of ``base`` (its storage from the tensor's
    first element) by its size and stride."""
    item = base.dtype.itemsize
    return strided_view(base, ref.size, tuple(s * item for s in ref.stride))


def _archive(names: list[str], name: str) -> str:
    """The folder of ``data.pkl`` in the zip (``archive``, or the name torch gave it)."""
    pkls = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if len(pkls) != 1:
        raise SourceError(
            f"{name} is not a PyTorch checkpoint: "
            + ("no <archive>/data.pkl in the zip" if not pkls else "several data.pkl in the zip")
        )
    return pkls[0][: -len("data.pkl")]


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, limit: int) -> bytes:
    if info.file_size > limit:
        raise SourceError(f"cannot read {where}: {info.file_size} bytes, more than {limit}")
    try:
        return zip_read(zf, info, True)
    except Exception as e:  # a corrupt stream, a bad CRC, a file cut short
        raise SourceError(f"cannot read {where}: {type(e).__name__}: {e}") from None


def _zip_contents(zf: zipfile.ZipFile, name: str):
    infos = {i.filename: i for i in zf.infolist()}
    prefix = _archive(list(infos), name)
    pkl = _read_member(
        zf, infos[prefix + "data.pkl"], f"{name}, member {prefix}data.pkl", MAX_PICKLE
    )
    order = infos.get(prefix + "byteorder")
    byteorder = "little"
    if order is not None:
        byteorder = _read_member(zf, order, f"{name}, member {prefix}byteorder", 16).decode(
            "ascii", "replace"
        )
        if byteorder not in ("little", "big"):
            raise SourceError(f"{name}: its byteorder is {byteorder!r}, not little or big")
    tensors = tensors_of(load(pkl, f"{name}, member {prefix}data.pkl"), name)
    return infos, prefix, byteorder, tensors


def open_torch(path: str, name: str, options: Any = None) -> Members:
    """The tensors of a PyTorch checkpoint file as a group ``[(key, factory), ...]``, each
    mapped in place from its storage's member (a tensor pickled alone: the key ``""``
    becomes ``"tensor"``)."""
    path = regular_file(path, name)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic[:2] != b"PK":
        return open_legacy(path, name, options)
    size = os.path.getsize(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise SourceError(f"{name} is not a valid PyTorch (zip) checkpoint: {e}") from None
    starts: dict[str, int] = {}
    checked: set[str] = set()  # the storages whose CRC-32 matched (a storage of many views)

    def factory(key, ref, info, dtype, span, member, where):
        if info.compress_type != zipfile.ZIP_STORED:
            return _inflating(path, info, ref, dtype, f"{name}:{key}", options)
        if info.flag_bits & 1:
            raise SourceError(f"cannot read {where}: its storage {member} is encrypted")
        if member not in starts:
            starts[member] = file_data_start(path, info, size, where)
        mapped = _mapping(path, starts[member], ref, dtype, span, f"{name}:{key}")

        def opened():
            crc = None
            if member not in checked:
                crc = stored_check(path, starts[member], info, f"{where} ({member})", options, True)
                if crc is None:
                    checked.add(member)
            return mapped(crc)

        return opened

    with zf:
        return _zip_members(zf, name, options, factory)


def _zip_members(zf: zipfile.ZipFile, name: str, options: Any, factory: Callable) -> Members:
    """The group of a zip checkpoint's tensors: each checked against its storage's member
    (there, of a dtype fastfinite reads, within its bytes), then opened by
    ``factory(key, ref, info, dtype, span, member, where)``."""
    infos, prefix, byteorder, tensors = _zip_contents(zf, name)
    members, problems = [], {}
    for key, ref in tensors:
        key = key or "tensor"
        if isinstance(ref, UnreadTensor):
            members.append((key, _unread(name, key, ref)))
            continue
        where = f"{name}, tensor {key}"
        member = f"{prefix}data/{ref.storage.key}"
        try:
            info = infos.get(member)
            if info is None:
                raise SourceError(f"cannot read {where}: its storage {member} is not in the zip")
            dtype = storage_dtype(ref, byteorder, where)
            span = tensor_span(ref, where, dtype)
            if ref.storage.nbytes > info.file_size:
                raise SourceError(
                    f"cannot read {where}: its storage {member} holds {info.file_size} "
                    f"bytes, not the {ref.storage.nbytes} it says"
                )
            opened = factory(key, ref, info, dtype, span, member, where)
        except UnsupportedDtypeError as e:
            opened = failing(e)
        except SourceError as e:
            problems[key] = str(e)
            opened = None
        members.append((key, opened))
    return checked_group(members, problems, options)


def _unread(name: str, key: str, ref: UnreadTensor):
    """The factory of a tensor that is not dense data: listed in ``skipped``, saying why."""
    why = f"{name}, tensor {key}: {ref.what} ({ref.rebuild}): fastfinite reads dense tensors"
    return failing(SkippedMemberError(why))


def _mapping(path: str, start: int, ref: TensorRef, dtype: np.dtype, span: int, name: str):
    order = _contiguous(ref)
    first = start + ref.offset * dtype.itemsize

    strides = None if order is not None or span == 0 else ref.stride

    def opened(crc: tuple | None = None):  # crc: ``tensors.stored_check``'s
        return MappedTensor(path, first, dtype, ref.size, name, order or "C", "torch", name,
                            strides, crc)  # fmt: skip

    return opened


def _inflating(path: str, info, ref: TensorRef, dtype: np.dtype, name: str, options: Any):
    def opened():
        try:
            with zipfile.ZipFile(path) as zf:
                data = zip_read(zf, info, True)
        except Exception as e:
            raise member_error(options, f"cannot read {name}: {type(e).__name__}: {e}") from None
        return HeldMember(_from_bytes(data, ref, dtype), name, path, info.filename, "torch")

    return opened


def _from_bytes(data, ref: TensorRef, dtype: np.dtype) -> np.ndarray:
    if 0 in ref.size:
        return np.zeros(ref.size, dtype)
    base = np.frombuffer(data, dtype, ref.storage.nbytes // dtype.itemsize)[ref.offset :]
    return strided(base, ref)


def torch_bytes(data: bytes | memoryview, name: str, options: Any = None) -> Members:
    """The tensors of a PyTorch zip checkpoint held in memory (a member of a tar), each
    viewed in place in the bytes of its storage (read out when compressed)."""
    view = memoryview(data)
    try:
        zf = zipfile.ZipFile(io.BytesIO(view))
    except (zipfile.BadZipFile, ValueError, EOFError) as e:
        raise SourceError(f"{name} is not a valid PyTorch (zip) checkpoint: {e}") from None

    def factory(key, ref, info, dtype, span, member, where):
        def opened():
            raw = member_bytes(view, zf, info, where, options, True)
            return ArraySource(_from_bytes(raw, ref, dtype), name=f"{name}:{key}")

        return opened

    try:
        return _zip_members(zf, name, options, factory)
    except SourceError:  # a refused global, a lying tensor: said as it is
        raise
    except (zipfile.BadZipFile, ValueError, EOFError) as e:
        raise SourceError(f"{name} is not a valid PyTorch (zip) checkpoint: {e}") from None


def open_legacy(path: str, name: str, options: Any = None) -> Members:
    """A legacy (non-zip) checkpoint: pickles of its magic number, protocol and system
    information, then the object, then the storage keys, then each storage as an 8-byte
    element count and its bytes; each pickle restricted as in a zip checkpoint."""
    from .unpickle import TensorUnpickler

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        try:  # restricted from the first pickle on: a plain pickle with code is refused here
            magic = TensorUnpickler(f, name).load() if _plain_int(f) else None
        except SourceError:
            raise
        except Exception:
            magic = None
        if magic != LEGACY_MAGIC:
            raise SourceError(f"{name} is not a PyTorch checkpoint: neither a zip nor a "
                              "legacy torch.save file")  # fmt: skip
        unpickler = TensorUnpickler(f, name)
        try:
            unpickler.load()  # protocol version
            unpickler.load()  # system information: a dict of plain values
            obj = unpickler.load()
            keys = TensorUnpickler(f, name).load()
        except SourceError:
            raise
        except Exception as e:
            raise SourceError(f"{name}: not a valid pickle: {type(e).__name__}: {e}") from None
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise SourceError(f"{name}: its storage keys are not a list of strings")
        starts: dict[str, int] = {}
        for key in keys:
            ref = unpickler.storages.get(key)
            head = f.read(8)
            if ref is None or len(head) < 8:
                raise SourceError(f"{name}: storage {key} is not where its keys say (truncated?)")
            (numel,) = struct.unpack("<q", head)
            starts[key] = f.tell()
            end = f.tell() + numel * itemsize(ref.type.dtype)
            if numel != ref.numel or end > size:
                raise SourceError(f"{name}: storage {key} of {numel} elements runs past the end "
                                  f"of the file ({size} bytes) or differs from its pickle")  # fmt: skip
            f.seek(end)
    members, problems = [], {}
    for key, ref in tensors_of(obj, name):
        key = key or "tensor"
        if isinstance(ref, UnreadTensor):
            members.append((key, _unread(name, key, ref)))
            continue
        where = f"{name}, tensor {key}"
        try:
            if ref.storage.key not in starts:
                raise SourceError(f"cannot read {where}: its storage {ref.storage.key} is not "
                                  "in the file")  # fmt: skip
            dtype = storage_dtype(ref, "little", where)
            span = tensor_span(ref, where, dtype)
            factory = _mapping(path, starts[ref.storage.key], ref, dtype, span, f"{name}:{key}")
        except UnsupportedDtypeError as e:
            factory = failing(e)
        except SourceError as e:
            problems[key], factory = str(e), None
        members.append((key, factory))
    return checked_group(members, problems, options)


def _plain_int(f) -> bool:
    """Whether the file starts like a pickle (``\\x80`` and a protocol number), rewound."""
    head = f.read(2)
    f.seek(0)
    return len(head) == 2 and head[0] == 0x80 and head[1] <= 5
