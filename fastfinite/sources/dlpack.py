"""Tensors of any framework (JAX, PyTorch, CuPy, NumPy): objects with ``__dlpack__`` or
``__array__``, read without a copy where they live on the CPU.

NumPy's ``from_dlpack`` takes only the dtypes NumPy has; a bfloat16 or float8 tensor is
read here from the DLPack capsule itself (its data pointer, shape, strides and dtype code)
as an array of ml_dtypes' dtype, the capsule kept alive with it. A tensor on an accelerator
is an error naming its device, or, with ``device_copy=True``, a source that copies one
region at a time to the host (``DeviceSource``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..compute.blocks import Region, check_dtype, memory_regions
from ..errors import SourceError
from .base import Source

HOST_DEVICES = (1, 3, 11)  # kDLCPU, kDLCUDAHost, kDLROCMHost: memory the CPU reads
DEVICE_NAMES = {
    2: "cuda", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm", 12: "ext_dev",
    13: "cuda_managed", 14: "oneapi", 15: "webgpu", 16: "hexagon", 17: "maia",
}  # fmt: skip
# DLPack dtype codes of the formats NumPy lacks (dlpack.h 1.1), by (code, bits)
NARROW_CODES = {
    (4, 16): "bfloat16", (7, 8): "float8_e3m4", (8, 8): "float8_e4m3",
    (9, 8): "float8_e4m3b11fnuz", (10, 8): "float8_e4m3fn", (11, 8): "float8_e4m3fnuz",
    (12, 8): "float8_e5m2", (13, 8): "float8_e5m2fnuz",
}  # fmt: skip


def is_tensor(obj: Any) -> bool:
    return hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")


def device_of(obj: Any) -> tuple[int, int]:
    kind, index = obj.__dlpack_device__()
    return int(kind), int(index)


def device_name(device: tuple[int, int]) -> str:
    return f"{DEVICE_NAMES.get(device[0], f'device type {device[0]}')}:{device[1]}"


def host_array(obj: Any, what: str = "") -> np.ndarray:
    """A tensor on the CPU as a NumPy array sharing its memory (bfloat16 and float8 with
    ml_dtypes' dtypes). A tensor elsewhere raises ``SourceError`` naming its device."""
    device = device_of(obj)
    if device[0] not in HOST_DEVICES:
        raise SourceError(
            f"{what or type(obj).__name__} lives on {device_name(device)}, not in host "
            "memory: move it to the CPU, or pass device_copy=True to copy it one region "
            "at a time"
        )
    try:
        return np.from_dlpack(obj)
    except (BufferError, TypeError, ValueError, RuntimeError) as e:
        narrow = _from_capsule(obj)
        if narrow is not None:
            return narrow
        try:
            return np.asarray(obj)
        except Exception:
            raise SourceError(f"cannot read {what or type(obj).__name__} on the CPU: {e}") from None


class DeviceSource(Source):
    """A tensor on an accelerator, copied to the host one region at a time (``device_copy``):
    host memory stays bounded by the regions in flight."""

    def __init__(self, tensor: Any, name: str = ""):
        self.tensor = tensor
        self.device = device_name(device_of(tensor))
        self.name = name or f"{type(tensor).__name__} on {self.device}"
        self.shape = tuple(int(n) for n in tensor.shape)
        first = self._host(tensor[tuple(slice(0, min(1, n)) for n in self.shape)])
        self.dtype = check_dtype(first.dtype, self.name)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        self.region_bytes = 16 << 20

    def regions(self, budget_bytes: int) -> Iterator[Region]:
        template = np.lib.stride_tricks.as_strided(np.empty(1, self.dtype), self.shape)
        return memory_regions(template, budget_bytes // max(1, self.dtype.itemsize))

    def read(self, region: Region) -> np.ndarray:
        return self._host(self.tensor[region])

    @staticmethod
    def _host(part: Any) -> np.ndarray:
        try:
            return np.from_dlpack(part, device="cpu", copy=True)
        except Exception:
            for move in ("cpu", "get"):  # torch, cupy
                if hasattr(part, move):
                    moved = getattr(part, move)()
                    return host_array(moved) if is_tensor(moved) else np.asarray(moved)
            raise


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_capsule(obj: Any) -> np.ndarray | None:
    """A CPU tensor of a format NumPy lacks, read from its DLPack capsule as an array of
    ml_dtypes' dtype without a copy; None when it is not such a tensor."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    try:
        try:
            capsule, versioned = obj.__dlpack__(max_version=(1, 1)), True
        except TypeError:  # a producer before DLPack 1.0
            capsule, versioned = obj.__dlpack__(), False
    except BufferError:  # nothing DLPack can carry
        return None
    name = b"dltensor_versioned" if versioned else b"dltensor"
    try:
        ptr = _get_pointer(capsule, name)
    except ValueError:  # the producer gave the other kind of capsule
        versioned = not versioned
        ptr = _get_pointer(capsule, b"dltensor_versioned" if versioned else b"dltensor")
    # DLManagedTensorVersioned starts with its version, manager context, deleter, flags
    offset = ctypes.sizeof(_Version) + 3 * ctypes.sizeof(ctypes.c_void_p) if versioned else 0
    t = _DLTensor.from_address(ptr + offset)
    fmt = NARROW_CODES.get((t.code, t.bits))
    if fmt is None or t.lanes != 1 or t.device_type not in HOST_DEVICES:
        return None
    dtype = np.dtype(getattr(ml_dtypes, fmt))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    size = dtype.itemsize
    if t.strides:
        strides = tuple(t.strides[i] * size for i in range(t.ndim))
    else:
        strides = tuple(int(np.prod(shape[i + 1 :])) * size for i in range(t.ndim))
    interface = {
        "data": (t.data + t.byte_offset, True),  # read-only: input is never modified
        "shape": shape,
        "strides": strides,
        "typestr": f"<u{size}",
        "version": 3,
    }
    return np.asarray(_Memory(capsule, interface)).view(dtype)


class _Memory:
    """The producer's memory as an array's base: the capsule, kept alive with the array,
    frees it (through the producer's deleter) when the array is gone."""

    def __init__(self, capsule: Any, interface: dict):
        self.capsule = capsule
        self.__array_interface__ = interface
