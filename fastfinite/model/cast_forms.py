"""The cast-risk predicate in every form the code tests it, side by side.

THE predicate is the float form: a finite value ``v`` of format ``S`` risks an overflow when
cast to ``T`` when ``|v| >= over``, an underflow when ``0 < |v| <= under``, where ``(over,
under) = casts.risk_thresholds(S, T)`` are derived exactly, in rationals, from NumPy's (and
ml_dtypes') round to nearest even (``inf`` / ``-1``: no value can). Every other form is an
encoding of it, for speed; ``tests/test_cast_forms.py`` pins each one to the float form,
and the float form to ``astype``, at the exact thresholds of each target.

1. **Float form** (``float_form``), NumPy masks: ``compute/positions.kind_mask`` (the
   positions of each kind in the spans the kernels list); ``reference/twins._risks`` keeps
   its own copy of the same comparisons, so that the twin tests do not test positions
   against themselves.
2. **Lanes form**: the same comparisons, value by value in the kernels' lanes, in the data's
   own float type, on thresholds from ``kernel_thresholds`` (``ScanSpec.thresholds``): each
   threshold is a value of the source format, so it is exact in float32 for float32 data:
   ``kernels/rows._risks``, ``kernels/cols._add_rows``, ``kernels/checks.quick_check``.
3. **Extrema form**: a block holds no risk for any target exactly when its smallest value
   is above ``-over``, its largest below ``over`` and its smallest non-zero magnitude above
   ``under``, ``over`` the lowest and ``under`` the highest of the targets'
   (``extrema_bounds``, which the kernels jit: ``kernels.rows.bounds``). The scan kernels'
   fast paths prove blocks clean with it (``rows._ends``, ``rows._row``, ``rows._settle``,
   ``cols._chunk_clean``), and ``quick_check`` uses its bounds.
4. **Column form**: ``cols._add_chunk`` counts ``0 < |v| <= under`` per column and
   ``cols._chunk_clean`` compares each column's extrema with ``over``, both widened to
   float64 (exact), before a chunk is taken value by value in the lanes form.
5. **Sum form**: a slice's sum ``|n * mean|`` and ``n * var``, in float64, against ``T``'s
   overflow threshold from float64 (``sum_threshold``): ``kernels/slices._flag_block`` and
   ``twins._bits`` (``sum_overflow:T``, ``variance_overflow:T``; ``compute.limits``).
6. **Scaled counts**: ``scan(scale=)`` casts ``float32(v) * s``; the product is monotone in
   ``f = |float32(v)|``, so it is the float form on ``f`` against bounds found once per
   scale (``scaled_bounds``): ``kernels/checks.scaled_counts`` and its twin.
7. **Scaled float form** (``scaled_form``): the product itself, NumPy masks, for scales per
   slice and complex data (``passes/scaled``).
8. **Integer sources**: ``casts.risk_thresholds`` of an integer dtype is the first integer
   past the bound, compared as float64 in forms 2-4 (integers are scanned as float64).

The thresholds' layout for the kernels (``kernel_thresholds``): per target slot ``t`` of
``kinds.N_TARGET_SLOTS``, ``thr[2 * t]`` is ``over`` and ``thr[2 * t + 1]`` ``under``;
``(inf, -1)`` for an unused slot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .casts import TARGETS, risk_thresholds
from .kinds import N_TARGET_SLOTS


def float_form(v: np.ndarray, over: float, under: float) -> tuple[np.ndarray, np.ndarray]:
    """``(overflow, underflow)`` masks of ``v``: finite ``|v| >= over``, ``0 < |v| <=
    under`` (form 1)."""
    with np.errstate(invalid="ignore"):
        a = np.abs(v)
        return (a >= over) & np.isfinite(v), (a <= under) & (a > 0)


def kernel_thresholds(source, kernel_dtype, cast: Sequence[str]) -> np.ndarray:
    """The kernels' thresholds (form 2): ``(over, under)`` per target slot of data of format
    ``source`` (a dtype or a format's name; complex: its parts' format) cast to each of
    ``cast``, in the kernels' float type for it (``kernel_dtype``: float32 or float64)."""
    thr = [math.inf, -1.0] * N_TARGET_SLOTS
    for slot, target in enumerate(cast[:N_TARGET_SLOTS]):
        thr[2 * slot : 2 * slot + 2] = risk_thresholds(source, target)
    return np.array(thr, dtype=np.float64 if np.dtype(kernel_dtype).itemsize == 8 else np.float32)


def extrema_bounds(thr):
    """``(over, under, targets)`` of the kernels' thresholds ``thr`` (form 3): a finite
    ``|v| >= over`` risks some target's overflow, ``0 < |v| <= under`` some target's
    underflow (``under < 0``: none can); ``targets``: the slots up to the last one used.
    Plain Python the kernels jit (``kernels.rows.bounds``): the same source for both."""
    inf = thr.dtype.type(np.inf)
    over = inf
    under = thr.dtype.type(-1)
    targets = np.int64(0)
    for t in range(N_TARGET_SLOTS):
        ot = thr[2 * t]
        ut = thr[2 * t + 1]
        over = ot if ot < over else over
        under = ut if ut > under else under
        if ot < inf or ut >= 0:
            targets = t + 1
    return over, under, targets


def extrema_form(lo: float, hi: float, tiny: float, over: float, under: float) -> bool:
    """Whether a block whose finite values lie in ``[lo, hi]``, its smallest non-zero
    magnitude ``tiny``, may hold a risk (form 3; False: it holds none)."""
    return not (lo > -over and hi < over and tiny > under)


def sum_threshold(target: str) -> float:
    """The smallest float64 magnitude of a slice's sum (or sum of squared deviations) whose
    cast to ``target`` overflows (form 5: one rounding from float64)."""
    return TARGETS[target].overflow_threshold


def scaled_bounds(s, limits: tuple[float, float], normal: float) -> np.ndarray:
    """``kernels.scaled_counts``'s bounds on ``f = |float32(v)|`` for the float32 scale
    ``s`` (form 6): the smallest ``f`` whose product ``f * s`` (rounded in float32)
    overflows (at least ``over``, or inf), the largest whose product is at most ``under``,
    and the smallest whose product is normal; ``limits``: ``(over, under)`` of float32
    values cast to the target. The product is monotone in ``f``: each is found by bisection
    over float32's non-negative bit patterns, in NumPy's own float32 arithmetic."""
    over, under = limits
    s = np.float32(s)

    def product(bits: int) -> np.float32:
        with np.errstate(over="ignore"):
            return np.uint32(bits).view(np.float32) * s

    def first(holds) -> np.float32:  # the smallest f in [0, inf] where holds(f * s)
        lo, hi = 0, 0x7F800000
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if holds(product(mid)) else (mid + 1, hi)
        return np.uint32(lo).view(np.float32)

    o = first(lambda y: not y < over)  # y >= over, or inf
    u = first(lambda y: y > max(under, 0.0))  # the first past ``under``: one below is the last
    n = first(lambda y: y >= normal)
    below = np.uint32(max(int(np.float32(u).view(np.uint32)) - 1, 0)).view(np.float32)
    return np.array([o, below if u > 0 else np.float32(-1), n], np.float32)


SCALED_COUNTS = ("overflow", "underflow", "subnormal", "nonzero")


def scaled_form(data: np.ndarray, s, limits: tuple[float, float], normal: float) -> dict:
    """Per element (complex: either part) of ``data`` scaled by ``s`` (float32, broadcast):
    overflow, underflow, subnormal and finite non-zero masks (form 7, ``SCALED_COUNTS``);
    ``limits``: ``(over, under)`` of float32 values cast to the target, ``normal`` its
    smallest normal."""
    over, under = limits
    out = {c: np.zeros(data.shape, bool) for c in SCALED_COUNTS}
    parts = (data.real, data.imag) if data.dtype.kind == "c" else (data,)
    for p in parts:
        with np.errstate(all="ignore"):
            wide = p.astype(np.float64)  # exact for every format: finite is finite
            y = np.abs(p.astype(np.float32) * s)
        nonzero = np.isfinite(wide) & (wide != 0)
        o = nonzero & ((y >= over) | ~np.isfinite(y))
        u = nonzero & (y <= max(under, 0.0))
        out["overflow"] |= o
        out["underflow"] |= u
        out["subnormal"] |= nonzero & ~u & (y < normal)
        out["nonzero"] |= nonzero
    return out
