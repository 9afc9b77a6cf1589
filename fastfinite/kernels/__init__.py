"""The Numba kernels, and the one table of what a scan compiles.

``GROUPS`` names the kernels each kind of scan calls and, for each, arguments of the exact
types a scan passes (``examples``): compiling a group is calling its kernels on those
(``prepare``), so a process that did so (or loaded them from the cache) never compiles
again mid-scan, and ``fastfinite compile`` fills the cache with every group for every
dtype. The table needs no numba: the kernels' modules (which load it) are imported when a
kernel is first asked for (``kernels.scan_rows``).
"""

from __future__ import annotations

import importlib

import numpy as np

from ..model.kinds import N_KINDS, N_TARGET_SLOTS
from ..model.stats import LANES, SUB, TILE

# the groups of kernels, by what a scan of some data calls; the dtype is the data's as the
# kernels see it (float32 or float64; uint16/uint8 for bfloat16/float8's bits)
GROUPS = {
    "rows": ("scan_rows",),
    "narrow": ("scan_narrow",),
    "cols": ("scan_cols",),
    "finish": ("finish_slices", "finish_whole_slices"),
    "merge": ("fold_slices", "slice_columns"),
    "flags": ("slice_flags",),
    "guard": ("quick_check",),
    "scaled": ("scaled_counts",),
}
KERNEL_DTYPES = {
    "rows": ("float32", "float64"),
    "narrow": ("uint16", "uint8"),
    "cols": ("float32", "float64"),
    "finish": ("float64",),
    "merge": ("float64",),
    "flags": ("float64",),
    "guard": ("float32", "float64"),
    "scaled": ("float32", "float64"),
}


_HOMES = {
    "scan_rows": "rows", "scan_narrow": "rows", "scan_cols": "cols", "quick_check": "checks",
    "scaled_counts": "checks", "finish_whole_slices": "slices", "finish_slices": "slices",
    "fold_slices": "slices", "slice_columns": "slices",
    "slice_flags": "slices", "_finish": "slices", "cache_directory": "jit",
}  # fmt: skip
SCRATCH = (9, TILE + LANES)  # scan_cols's float64 scratch
COUNTS = (4, TILE + LANES)  # and its int32 scratch


def __getattr__(name: str):
    """A kernel, its module imported (with numba) on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)


def group_of(name: str) -> str:
    """The group kernel ``name`` is compiled with."""
    return next(g for g, names in GROUPS.items() if name in names)


def read_only(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


def _finds(spans: int = 8):
    """``(counts, cap, seen, blocks)``, as a scan passes them."""
    return np.zeros(N_KINDS, np.int64), 2, np.zeros(N_KINDS, np.int64), np.zeros((3, spans), np.int64)  # fmt: skip


def _stats(m: int):
    return (*(np.zeros(m) for _ in range(5)), *(np.zeros(m, np.int64) for _ in range(3)))


def examples(name: str, dtype: str) -> tuple:
    """Arguments of the types a scan passes to kernel ``name`` for data of ``dtype``."""
    dt = np.dtype(dtype)
    thr = np.array([np.inf, -1.0] * N_TARGET_SLOTS, np.float32 if dt.itemsize != 8 else dt)
    x = read_only(np.zeros(2 * SUB + 3, dt))
    if name == "scan_rows":
        return (x, 1, x.size, thr, *_finds(), *_stats(1))
    if name == "scan_narrow":
        table = np.zeros(0 if dt.itemsize == 2 else 256, np.float32)
        return (x, table, 1, x.size, thr, *_finds(), *_stats(1), np.empty(SUB, np.float32))
    if name == "scan_cols":
        return (x, 2, 20, 21, thr, *_finds(), *_stats(20), np.empty(SCRATCH), np.empty(COUNTS, np.int32))  # fmt: skip
    if name == "quick_check":
        return (x, thr)
    if name == "scaled_counts":
        return (x, np.zeros(3, np.float32), np.zeros(4, np.int64), np.zeros((2, 2), np.int64), np.zeros(2, np.int64))  # fmt: skip
    m = 3
    f64, i64 = (lambda: np.zeros(m)), (lambda: np.zeros(m, np.int64))
    base = (4, f64(), f64(), f64(), f64(), f64(), i64(), i64(), i64(), i64(), f64(), f64())
    flags = (1e-7, 10.0, np.array([65504.0]), i64(), i64())
    if name == "finish_slices":
        return base
    if name == "finish_whole_slices":
        return (*base, f64(), *flags)
    if name == "fold_slices":
        cols = (i64(), f64(), f64(), f64(), f64(), i64(), i64(), i64())
        return (np.arange(m, dtype=np.int64), *cols, *cols)
    if name == "slice_columns":
        return (i64(), *(f64() for _ in range(9)))
    if name == "slice_flags":
        return (i64(), f64(), f64(), f64(), i64(), i64(), i64(), *flags)
    raise KeyError(name)


def entries(group: str, dtype: str) -> list[tuple[str, tuple]]:
    """The kernels (numba's dispatchers, by name) ``group`` compiles for ``dtype``, with
    arguments of the types a scan gives them."""
    out = []
    for name in GROUPS[group]:
        if name == "finish_slices":  # finish_whole_slices's kernel, called another way
            continue
        args = examples(name, dtype)
        out.append(("_finish" if name == "finish_whole_slices" else name, args))
    return out


def prepare(group: str, dtype: str) -> None:
    """Compile (or load from the cache) every kernel of ``group`` for ``dtype``."""
    for name in GROUPS[group]:
        __getattr__(name)(*examples(name, dtype))


__all__ = ["GROUPS", "KERNEL_DTYPES", "examples", "group_of", "prepare", *_HOMES]
