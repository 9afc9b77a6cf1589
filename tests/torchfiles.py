"""PyTorch checkpoints written by hand, without torch, in the exact layout ``torch.save``
writes: a zip of ``<archive>/data.pkl`` (pickle protocol 2, tensors as
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)``,
storages as persistent ids ``("storage", torch.FloatStorage, key, "cpu", numel)``),
``<archive>/data/<key>`` (each storage's raw bytes, stored) and ``<archive>/byteorder``;
and the legacy (non-zip) layout of torch < 1.6."""

from __future__ import annotations

import io
import pickle
import struct
import zipfile
from collections import OrderedDict

import numpy as np

STORAGE_OF = {
    "float64": "DoubleStorage", "float32": "FloatStorage", "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
    "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
    "float8_e4m3fn": "Float8_e4m3fnStorage", "float8_e5m2": "Float8_e5m2Storage",
}  # fmt: skip


class Global:
    """A global of another package, written as ``GLOBAL module name`` (nothing imported)."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle wants a callable; never called
        raise AssertionError("a Global is only written")


class Storage:
    def __init__(self, array: np.ndarray, key: str, kind: str | None = None):
        self.array, self.key = np.ascontiguousarray(array).reshape(-1), key
        self.kind = kind or STORAGE_OF[self.array.dtype.name]


class Tensor:
    """A tensor of ``size`` and ``stride`` (elements) from ``offset`` of ``storage``."""

    def __init__(self, storage: Storage, offset=0, size=None, stride=None, parameter=False,
                 v3=False):  # fmt: skip
        n = storage.array.size
        self.storage, self.offset = storage, offset
        self.size = tuple(size if size is not None else (n,))
        if stride is None:
            stride, step = [], 1
            for d in reversed(self.size):
                stride.insert(0, step)
                step *= d
        self.stride = tuple(stride)
        self.parameter, self.v3 = parameter, v3

    def __reduce__(self):
        args = (self.storage, self.offset, self.size, self.stride, False, OrderedDict())
        t = (Global("torch._utils", "_rebuild_tensor_v2"), args)
        if self.v3:  # as torch saves float8: an untyped storage, the tensor's own dtype
            dtype = Global("torch", self.storage.array.dtype.name)
            t = (Global("torch._utils", "_rebuild_tensor_v3"), (*args, dtype))
        if self.parameter:
            return Global("torch._utils", "_rebuild_parameter"), (_Reduced(t), False, OrderedDict())
        return t


class _Reduced:
    def __init__(self, t):
        self.t = t

    def __reduce__(self):
        return self.t


class Code:
    """An object whose pickle calls ``module.name(*args)`` when loaded (never here)."""

    def __init__(self, module="os", name="system", args=("echo pwned > /tmp/ff_pwned",)):
        self.g, self.args = Global(module, name), args

    def __reduce__(self):
        return self.g, self.args


class _Pickler(pickle._Pickler):
    dispatch = pickle._Pickler.dispatch.copy()

    def _save_global_ref(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[Global] = _save_global_ref

    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            if obj.kind == "UntypedStorage":  # its length in bytes
                kind = Global("torch.storage", "UntypedStorage")
                return ("storage", kind, obj.key, "cpu", obj.array.nbytes)
            return ("storage", Global("torch", obj.kind), obj.key, "cpu", obj.array.size)
        return None


def dumps(obj) -> bytes:
    f = io.BytesIO()
    _Pickler(f, protocol=2).dump(obj)
    return f.getvalue()


def storages_of(obj, out=None) -> dict[str, Storage]:
    out = {} if out is None else out
    if isinstance(obj, Tensor):
        out[obj.storage.key] = obj.storage
    elif isinstance(obj, dict):
        for v in obj.values():
            storages_of(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            storages_of(v, out)
    return out


def write_zip(path, obj, archive="archive", byteorder="little", compress=False, data=None):
    """``torch.save``'s zip layout of ``obj`` (nested dicts and lists of ``Tensor``);
    ``data``: the storage members' bytes, when a test wants others."""
    kind = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{archive}/data.pkl", dumps(obj), zipfile.ZIP_STORED)
        zf.writestr(f"{archive}/byteorder", byteorder)
        for key, s in storages_of(obj).items():
            raw = s.array.astype(s.array.dtype.newbyteorder(">")).tobytes() if byteorder == "big" \
                else s.array.tobytes()  # fmt: skip
            if data is not None and key in data:
                raw = data[key]
            zf.writestr(f"{archive}/data/{key}", raw, kind)
        zf.writestr(f"{archive}/version", "3\n")


def write_legacy(path, obj):
    """The legacy layout: magic number, protocol, system info, the object, the storage
    keys, then each storage as an int64 element count and its bytes."""
    stores = storages_of(obj)
    with open(path, "wb") as f:
        for head in (0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001,
                                                     "little_endian": True}):  # fmt: skip
            f.write(dumps(head))
        f.write(dumps(obj))
        f.write(dumps(list(stores)))
        for s in stores.values():
            f.write(struct.pack("<q", s.array.size))
            f.write(s.array.tobytes())
