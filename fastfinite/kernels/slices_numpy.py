"""The per-slice arithmetic that runs in NumPy in production, with the kernels' bits: the
sums in the order ``stats`` fixes (lanes folded by halves, ``fold``, ``in_order``,
``lane_sum``), the totals over slices (``totals``, ``slice_totals``: what
``kernels.slices.finish_whole_slices`` falls back to when a kernel's sums overflow, and what
``compute.summary.rescued`` takes after a rescue), the slices to rescue (``rescue_rows``)
and the largest |z| (``max_abs_z``, for merged reports).

NumPy, no numba: it lives beside the kernels because a kernel calls it (imports run down:
``compute/`` and ``report/`` import it from here). ``reference.twins`` builds the twins of
``finish_slices``, ``finish_whole_slices`` and ``slice_columns`` from these functions, so
the twin tests hold them to the kernels bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from ..model.stats import LANES, SLICE_BLOCK, TINY, chan, pow2

BIG = float(np.finfo(np.float64).max)


def fold(v: np.ndarray):
    """The lanes of ``v`` (last axis) summed by halves, as ``lanes.fold``."""
    while v.shape[-1] > 1:
        h = v.shape[-1] // 2
        v = v[..., :h] + v[..., h:]
    return v[..., 0]


def _adds_in_order() -> bool:
    """Whether ``np.add.reduce`` over an axis that is not the last (the last holding two
    values or more) adds one row after another, as NumPy's reductions do (only a reduction
    along the last, contiguous axis is paired up): checked on values whose sum tells the
    two orders apart, so a NumPy that changed would not silently give other bits."""
    v = np.array([1e16, 1.0, -1e16, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # fmt: skip
    col = np.stack([v, v[::-1]], axis=1)
    want = [0.0, 0.0]
    for row in col:
        want = [want[0] + row[0], want[1] + row[1]]
    return np.add.reduce(col, axis=0, initial=0.0).tolist() == want


ADDS_IN_ORDER = _adds_in_order()


def in_order(v: np.ndarray, axis: int) -> np.ndarray:
    """The sum of ``v`` along ``axis`` (not the last) from 0.0, one value after another."""
    if v.shape[axis] == 0:
        return np.zeros(np.delete(v.shape, axis))
    if ADDS_IN_ORDER and v.shape[-1] > 1 and axis != v.ndim - 1:
        return np.add.reduce(v, axis=axis, initial=0.0)
    return np.take(np.add.accumulate(v + 0.0, axis=axis), -1, axis=axis)  # 0.0 + v[0] first


def lane_sum(v: np.ndarray) -> float:
    """``v`` (1-D float64) summed in lanes and folded, missing lanes 0.0."""
    pad = np.zeros(-(-len(v) // LANES) * LANES)
    pad[: len(v)] = v
    return float(fold(in_order(pad.reshape(-1, LANES), 0)))


def totals(n, mean, std, mn, mx) -> tuple:
    """``kernels.slices.totals``: ``(count, mean, std, min, max, sum)`` over slices (the
    mean of the means when the sum overflows; the spread scaled when a square does)."""
    if len(n) == 1:
        with np.errstate(over="ignore"):
            total = float(n[0] * mean[0])
        return int(n[0]), float(mean[0]), float(std[0]), float(mn[0]), float(mx[0]), total
    tn = int(n.sum())
    lo, hi = float(mn.min(initial=np.inf)), float(mx.max(initial=-np.inf))
    fn = n.astype(np.float64)
    with np.errstate(all="ignore"):
        tsum = lane_sum(fn * mean)
        if tn == 0:
            return 0, 0.0, 0.0, math.inf, -math.inf, tsum
        w = fn / np.float64(tn)
        tmean = tsum / tn
        if not abs(tmean) < math.inf:  # n * mean overflowed: average the means instead
            tmean = lane_sum(w * mean)
        d = mean / 1.0 - tmean / 1.0
        s = std / 1.0
        var = lane_sum(w * (s * s + d * d))
        if var < math.inf and not math.sqrt(var) < TINY:
            return tn, tmean, math.sqrt(var), lo, hi, tsum
        used = n > 0
        top = max(abs(tmean), *np.abs(mean[used]), *std[used])
        if not var < math.inf or top > 0:
            k = pow2(top)
            s = std / k
            d = mean / k - tmean / k
            return tn, tmean, math.sqrt(lane_sum(w * (s * s + d * d))) * k, lo, hi, tsum
    return tn, tmean, math.sqrt(var), lo, hi, tsum


def max_abs_z(mean, std, mn, mx) -> np.ndarray:
    """``kernels.slices.max_z`` elementwise: the largest |z|, 0 where std is 0 or a
    quotient NaN, infinities clipped to the float64 maximum."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a = mx - mean
        b = mean - mn
        z = np.clip(np.where(a >= b, a, b) / std, -BIG, BIG)
        finite = (np.abs(a) < np.inf) & (np.abs(b) < np.inf)
    return np.where((std > 0) & (a == a) & (b == b) & ((std < np.inf) | finite), z, 0.0)


def _rescue(n, mean, mn, mx) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        top = np.where(np.abs(mn) > np.abs(mx), np.abs(mn), np.abs(mx))
        return (n > 0) & ((mean != mean) | ((top < TINY) & (mn != mx)))


def rescue_rows(n, mean, mn, mx) -> np.ndarray:
    """The slices whose moments are taken again, scaled (``summary.rescued``): those with a
    finite value and a NaN mean (their sums overflowed), or whose magnitudes all lie under
    ``TINY`` and are not all equal (``kernels.slices._to_rescue`` counts them)."""
    return np.flatnonzero(_rescue(n, mean, mn, mx))


def slice_totals(n, mean, std, mn, mx) -> tuple:
    """``(count, mean, std, min, max, sum)`` over slices: ``totals`` of each block of
    ``SLICE_BLOCK`` slices, combined in order by ``stats.chan``."""
    tn, tmean, tstd, lo, hi, tsum = 0, 0.0, 0.0, math.inf, -math.inf, 0.0
    for b in range(0, len(n), SLICE_BLOCK):
        part = slice(b, b + SLICE_BLOCK)
        c, cm, cs, clo, chi, csum = totals(n[part], mean[part], std[part], mn[part], mx[part])
        tn, tmean, tstd = chan(tn, tmean, tstd, c, cm, cs)
        lo, hi, tsum = min(lo, clo), max(hi, chi), tsum + csum
    return tn, tmean, tstd, lo, hi, tsum
