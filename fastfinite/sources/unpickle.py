"""A pickle of a PyTorch checkpoint read without executing it and without torch.

``TensorUnpickler`` is a ``pickle.Unpickler`` whose ``find_class`` resolves only the names a
state dict is made of: the tensor rebuild functions of ``torch._utils``, the storage types
(``torch.FloatStorage``, ``torch.BFloat16Storage``..., ``torch.storage.UntypedStorage``),
``collections.OrderedDict`` and a few plain builtins; each becomes a stand-in of this
module, never the real thing. Any other global (``os.system``, ``builtins.eval``, a class
of a training script) is refused with a ``SourceError`` naming it, before anything is
called. Storages (the ``persistent_load`` ids) become ``StorageRef``, tensors ``TensorRef``:
where their bytes are and how they are laid out, for a reader to map.
"""

from __future__ import annotations

import io
import pickle
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..errors import SourceError

# storage type -> NumPy dtype name (bfloat16 and float8: ml_dtypes)
STORAGES = {
    "DoubleStorage": "f8", "FloatStorage": "f4", "HalfStorage": "f2",
    "BFloat16Storage": "bfloat16", "LongStorage": "i8", "IntStorage": "i4",
    "ShortStorage": "i2", "CharStorage": "i1", "ByteStorage": "u1", "BoolStorage": "?",
    "ComplexFloatStorage": "c8", "ComplexDoubleStorage": "c16",
    "UInt16Storage": "u2", "UInt32Storage": "u4", "UInt64Storage": "u8",
    "Float8_e4m3fnStorage": "float8_e4m3fn", "Float8_e5m2Storage": "float8_e5m2",
    "Float8_e4m3fnuzStorage": "float8_e4m3fnuz", "Float8_e5m2fnuzStorage": "float8_e5m2fnuz",
    "UntypedStorage": "u1", "QInt8Storage": "i1", "QUInt8Storage": "u1",
    "QInt32Storage": "i4", "QUInt4x2Storage": "u1", "QUInt2x4Storage": "u1",
}  # fmt: skip
# torch's rebuilds of tensors that are not dense data in a storage: never called; each such
# tensor is a member listed in ``skipped`` with what it is
UNREAD = {
    "_rebuild_qtensor": "a quantized tensor", "_rebuild_sparse_tensor": "a sparse tensor",
    "_rebuild_nested_tensor": "a nested tensor", "_rebuild_wrapper_subclass": "a tensor subclass",
    "_rebuild_meta_tensor_no_storage": "a meta tensor (it holds no data)",
    "_rebuild_device_tensor_from_cpu_tensor": "a tensor of a device (rebuilt by torch)",
}  # fmt: skip
# names of torch the arguments of those rebuilds use: layouts and quantization schemes
TORCH_NAMES = (
    "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc",
    "per_tensor_affine", "per_channel_affine", "per_tensor_symmetric",
    "per_channel_symmetric", "per_channel_affine_float_qparams",
)  # fmt: skip
# torch's dtypes (``torch.float8_e4m3fn``, named by ``_rebuild_tensor_v3``) -> NumPy's
DTYPES = {
    "float64": "f8", "float32": "f4", "float16": "f2", "bfloat16": "bfloat16", "int64": "i8",
    "int32": "i4", "int16": "i2", "int8": "i1", "uint8": "u1", "bool": "?",
    "complex64": "c8", "complex128": "c16", "uint16": "u2", "uint32": "u4", "uint64": "u8",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
}  # fmt: skip
MAX_DEPTH = 64  # nested containers walked
MAX_VISITS = 1 << 21  # tensors and containers walked, each counted along every path to it


def itemsize(name: str) -> int:
    """Bytes per element of a NumPy dtype name of ``STORAGES`` or ``DTYPES`` (bfloat16 and
    float8 without ml_dtypes)."""
    if name == "bfloat16":
        return 2
    return 1 if name.startswith("float8") else int(name[1:]) if name[0] in "fiuc" else 1


class _Frozen:
    """A stand-in whose state a pickle cannot set (``BUILD``)."""

    def __setstate__(self, state):
        raise SourceError(f"refused to set the state of a {type(self).__name__}")


@dataclass(frozen=True)
class StorageType(_Frozen):
    """The stand-in of a storage class (``torch.FloatStorage``): its element dtype."""

    name: str
    dtype: str


@dataclass
class StorageRef(_Frozen):
    """A storage of the checkpoint: ``key`` (its ``data/<key>`` member, or its place in a
    legacy file), its dtype and its length in elements."""

    key: str
    type: StorageType
    numel: int

    @property
    def nbytes(self) -> int:
        return self.numel * itemsize(self.type.dtype)


@dataclass(frozen=True)
class TorchDtype(_Frozen):
    """The stand-in of a dtype (``torch.float8_e4m3fn``): its NumPy name."""

    dtype: str


@dataclass
class TensorRef(_Frozen):
    """A tensor: ``size`` elements laid out by ``stride`` (in elements) from ``offset``
    of ``storage``; ``dtype``: its own NumPy dtype name when it is not its storage's (a
    tensor of an untyped storage, ``_rebuild_tensor_v3``)."""

    storage: StorageRef
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str | None = None


def _ints(v: Any, what: str) -> tuple[int, ...]:
    if not isinstance(v, (tuple, list)) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in v
    ):
        raise SourceError(f"a tensor's {what} is not a tuple of integers: {v!r}")
    return tuple(v)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, *rest):
    """``torch._utils._rebuild_tensor_v2``'s stand-in (its hooks and metadata ignored)."""
    if not isinstance(storage, StorageRef):
        raise SourceError(f"a tensor is rebuilt from {type(storage).__name__}, not a storage")
    if not isinstance(storage_offset, int) or isinstance(storage_offset, bool):
        raise SourceError(f"a tensor's storage offset is not an integer: {storage_offset!r}")
    return TensorRef(storage, storage_offset, _ints(size, "size"), _ints(stride, "stride"))


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, hooks, dtype, *rest):
    """``torch._utils._rebuild_tensor_v3``'s stand-in: a tensor of its own dtype (float8
    tensors are saved so, over an untyped storage)."""
    if not isinstance(dtype, TorchDtype):
        raise SourceError(f"a tensor's dtype is {type(dtype).__name__}, not a torch dtype")
    ref = _rebuild_tensor_v2(storage, storage_offset, size, stride)
    ref.dtype = dtype.dtype
    return ref


@dataclass(frozen=True)
class UnreadTensor(_Frozen):
    """A tensor fastfinite does not read (quantized, sparse...): ``what`` it is and the
    rebuild that names it."""

    what: str
    rebuild: str


@dataclass(frozen=True)
class _Unread(_Frozen):
    rebuild: str

    def __call__(self, *args):
        return UnreadTensor(UNREAD[self.rebuild], f"torch._utils.{self.rebuild}")


@dataclass(frozen=True)
class TorchName(_Frozen):
    """A name of torch that is a value (a layout, a quantization scheme, a device)."""

    name: str


def _device(*args):
    return TorchName(f"device{args!r}")


def _layout(name):
    """``torch.serialization._get_layout``'s stand-in: a layout by its name."""
    return TorchName(str(name))


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None, *state):
    return data  # a Parameter is its tensor


def _bytes(text, encoding="latin1"):
    """``_codecs.encode``, which protocol 2 pickles bytes with: latin-1 of text only."""
    if not isinstance(text, str) or encoding != "latin1":
        raise SourceError(f"refused to call _codecs.encode with {encoding!r}")
    return text.encode("latin1")


ALLOWED: dict[tuple[str, str], Any] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("collections", "OrderedDict"): OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("_codecs", "encode"): _bytes,
}
for _name, _dtype in STORAGES.items():
    _module = "torch.storage" if _name == "UntypedStorage" else "torch"
    ALLOWED[(_module, _name)] = StorageType(_name, _dtype)
ALLOWED[("torch", "UntypedStorage")] = ALLOWED[("torch.storage", "UntypedStorage")]
for _name, _dtype in DTYPES.items():
    ALLOWED[("torch", _name)] = TorchDtype(_dtype)
for _name in UNREAD:
    ALLOWED[("torch._utils", _name)] = _Unread(_name)
for _name in TORCH_NAMES:
    ALLOWED[("torch", _name)] = TorchName(_name)
ALLOWED[("torch", "device")] = _device
ALLOWED[("torch.serialization", "_get_layout")] = _layout
ALLOWED[("torch", "Size")] = tuple


class TensorUnpickler(pickle.Unpickler):
    """Unpickles a checkpoint's ``data.pkl`` into containers of ``TensorRef``; any global
    not in ``ALLOWED`` is refused (``SourceError`` naming it)."""

    def __init__(self, file, name: str):
        super().__init__(file)
        self.name = name
        self.storages: dict[str, StorageRef] = {}

    def find_class(self, module: str, name: str) -> Any:
        found = ALLOWED.get((module, name))
        if found is None:
            raise SourceError(
                f"{self.name}: refused to load global {module}.{name}: fastfinite rebuilds "
                "only tensors, storages and plain containers and never runs a pickle's code"
            )
        return found

    def persistent_load(self, pid: Any) -> StorageRef:
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise SourceError(f"{self.name}: a persistent id that is not a storage: {pid!r}")
        storage_type, key, numel = pid[1], pid[2], pid[4]
        if not isinstance(storage_type, StorageType) or not isinstance(key, (str, int)):
            raise SourceError(f"{self.name}: a storage of an unknown type: {pid!r}")
        if not isinstance(numel, int) or isinstance(numel, bool) or numel < 0:
            raise SourceError(f"{self.name}: storage {key} has a length of {numel!r}")
        if len(pid) > 5 and pid[5] is not None:  # a legacy view of another storage
            raise SourceError(f"{self.name}: storage {key} is a view of another (a legacy "
                              "layout fastfinite does not read)")  # fmt: skip
        key = str(key)
        if key not in self.storages:
            self.storages[key] = StorageRef(key, storage_type, numel)
        return self.storages[key]


def load(data: bytes, name: str) -> Any:
    """The object of one pickle (``name``: what errors call it), its globals restricted."""
    try:
        return TensorUnpickler(io.BytesIO(data), name).load()
    except SourceError:
        raise
    except RecursionError:
        raise SourceError(f"{name}: its pickle is nested too deep") from None
    except Exception as e:  # a truncated or malformed pickle
        raise SourceError(f"{name}: not a valid pickle: {type(e).__name__}: {e}") from None


_WALKED = (TensorRef, UnreadTensor, dict, list, tuple)


def tensors_of(obj: Any, name: str) -> list[tuple[str, TensorRef | UnreadTensor]]:
    """``(key, tensor)`` of every tensor in nested dicts, lists and tuples, keyed by their
    path joined with ``.`` (``"model.layers.0.w"``; ``""`` for a tensor pickled alone);
    ``UnreadTensor`` for those that are not dense data; other values (numbers, text) are
    not arrays and are passed over. Two tensors under one key are an error naming it."""
    out: list[tuple[str, TensorRef | UnreadTensor]] = []
    # (key, value, depth, the containers it is inside): a container pickled under two keys
    # is walked under each (as torch.load gives both), one inside itself is not walked again
    stack: list[tuple[str, Any, int, frozenset]] = [("", obj, 0, frozenset())]
    visited = 0
    while stack:
        key, value, depth, inside = stack.pop()
        visited += 1
        if visited > MAX_VISITS:  # containers shared 2**64 ways would never end
            raise SourceError(f"{name}: more than {MAX_VISITS} tensors and containers, "
                              "counted along every path to them (containers shared many ways)")  # fmt: skip
        if isinstance(value, (TensorRef, UnreadTensor)):
            out.append((key, value))
            continue
        if isinstance(value, dict):
            items = list(value.items())
        elif isinstance(value, (list, tuple)):
            items = list(enumerate(value))
        else:
            continue
        if id(value) in inside:  # a container that holds itself
            continue
        if depth >= MAX_DEPTH:
            raise SourceError(f"{name}: containers nested more than {MAX_DEPTH} deep")
        inside = inside | {id(value)}
        for k, v in reversed(items):
            if isinstance(v, _WALKED):  # numbers and text are passed over here
                stack.append((f"{key}.{k}" if key else str(k), v, depth + 1, inside))
    seen_keys: set[str] = set()
    for key, _ in out:  # {"a.b": x, "a": {"b": y}}: one would hide the other
        if key in seen_keys:
            raise SourceError(f"{name}: two tensors under the key {key!r} (nested keys are "
                              "joined with '.')")  # fmt: skip
        seen_keys.add(key)
    return out
