"""The NumPy twin of each Numba kernel: the same signature and outputs (statistics equal to
rounding), written the obvious way. A twin runs where numba would cost more than it saves
(small blocks: ``scan_rows``, one slice: ``finish_slices``), and ``TWINS`` lists every kernel
beside its twin for the test that compares them."""

from __future__ import annotations

import math

import numpy as np

from ..kinds import N_KINDS
from ..stats import SLICE_BLOCK, TINY, combine

BIG = float(np.finfo(np.float64).max)


def kind_mask(x: np.ndarray, k: int, thr: np.ndarray) -> np.ndarray:
    """The mask of counter slot ``k`` over ``x``: NaN, +inf, -inf, then per cast target a
    finite ``|x| >= over`` (overflow) and ``0 < |x| <= under`` (underflow), thresholds
    ``thr`` as in the kernels: the NumPy form of their predicates."""
    if k < 3:
        return np.isnan(x) if k == 0 else x == (np.inf if k == 1 else -np.inf)
    with np.errstate(invalid="ignore"):
        a = np.abs(x)
        if k % 2:  # overflow: slots 3, 5, 7
            return (a >= thr[k - 3]) & np.isfinite(x)
        return (a <= thr[k - 3]) & (a > 0)


def kind_masks(x: np.ndarray, thr: np.ndarray) -> list[np.ndarray]:
    """The masks of every counter slot over ``x`` (``kind_mask``)."""
    return [kind_mask(x, k, thr) for k in range(N_KINDS)]


def scan_rows(x, xi, thr, counts, rstats, rcounts, locs, vals, nlocs) -> None:
    """``kernels.scan_rows``: counts, per-row ``[shift, s1, s2, min, max]`` over the finite
    values (shifted by the row's first finite value), per-row NaN/+inf/-inf counts, and the
    first positions (flat in ``x``) up to the cap. ``xi`` is not used."""
    rows, n = x.shape
    cap = locs.shape[1]
    for r in range(rows):
        row = x[r]
        masks = kind_masks(row, thr)
        for k, m in enumerate(masks):
            c = int(np.count_nonzero(m))
            counts[k] += c
            if k < 3:
                rcounts[k, r] += c
            take = min(c, cap - int(nlocs[k]))
            if take > 0:
                pos = np.flatnonzero(m)[:take]
                locs[k, nlocs[k] : nlocs[k] + take] = pos + r * n
                vals[k, nlocs[k] : nlocs[k] + take] = row[pos]
                nlocs[k] += take
        y = row[np.isfinite(row)]
        if y.size:
            with np.errstate(over="ignore", invalid="ignore"):
                d = y.astype(np.float64) - np.float64(y[0])
                rstats[:, r] = (y[0], d.sum(), (d * d).sum(), y.min(), y.max())
        else:
            rstats[:, r] = (0.0, 0.0, 0.0, math.inf, -math.inf)


def scan_cols(x, xi, thr, counts, cstats, ccounts, locs, vals, nlocs) -> None:
    """``kernels.scan_cols``: ``scan_rows``'s outputs per column, positions in C order (the
    kernel takes tiles of columns in turn: past one tile, other positions of the kinds)."""
    none = np.zeros((len(counts), 0), np.int64), np.zeros((len(counts), 0))
    scan_rows(np.ascontiguousarray(x.T), xi, thr, counts * 0, cstats, ccounts, *none, nlocs * 0)
    one = np.empty((5, 1)), np.zeros((3, 1), np.int64)
    scan_rows(x.reshape(1, -1), xi, thr, counts, *one, locs, vals, nlocs)


def scan_cols_pitched(xf, xi, rows, cols, pitch, thr, counts, cstats, ccounts, locs, vals, nlocs):
    """``kernels.scan_cols_pitched``: ``scan_cols`` of the rows ``pitch`` values apart in
    ``xf``, taken out as a contiguous block."""
    take = np.lib.stride_tricks.as_strided
    item = xf.itemsize
    x = np.ascontiguousarray(take(xf, (rows, cols), (pitch * item, item)))
    scan_cols(x, x.view(xi.dtype), thr, counts, cstats, ccounts, locs, vals, nlocs)


def quick_check(x, xi, thr) -> bool:
    """``kernels.quick_check``: no non-finite value and no cast risk in 1-D ``x``."""
    return not any(m.any() for m in kind_masks(x, thr))


def finish_slices(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std):
    """``kernels.finish_slices``: per slice count, mean and std of the finite values from the
    shifted sums (NaN where the sums overflowed), over all of them ``totals`` of each
    ``SLICE_BLOCK`` slices combined in order, then how many slices to rescue."""
    c = length - cnan - cpos - cneg
    with np.errstate(all="ignore"):
        cs = np.maximum(c, 1)
        ok = (np.abs(s1) < np.inf) & (s2 < np.inf)
        v = s2 - s1 * (s1 / cs)
        n[:] = c
        mean[:] = np.where(c > 0, np.where(ok, shift + s1 / cs, np.nan), 0.0)
        std[:] = np.where(c > 0, np.where(ok, np.sqrt(np.maximum(v, 0.0) / cs), np.nan), 0.0)
    tn, tmean, tstd, lo, hi, tsum = 0, 0.0, 0.0, math.inf, -math.inf, 0.0
    for b in range(0, len(n), SLICE_BLOCK):
        part = (a[b : b + SLICE_BLOCK] for a in (n, mean, std, mn, mx))
        bn, bmean, bstd, blo, bhi, bsum = totals(*part)
        if tn == 0:  # as the kernels' ``_chan``: nothing yet, the block's own
            tn, tmean, tstd = bn, bmean, bstd
        else:
            tn, tmean, tstd = (v.item() for v in combine(tn, tmean, tstd, bn, bmean, bstd))
        lo, hi, tsum = min(lo, blo), max(hi, bhi), tsum + bsum
    return tn, tmean, tstd, lo, hi, tsum, len(rescue_rows(n, mean, mn, mx))


def finish_whole_slices(
    length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std,
    z, eps, z_threshold, thresholds, where, flags,
):  # fmt: skip
    """``kernels.finish_whole_slices``: ``finish_slices``, then ``slice_columns``'s largest
    |z| in ``z`` and ``slice_flags``'s flagged slices; also how many were flagged and how
    many hold no finite value."""
    out = finish_slices(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std)
    z[:] = np.where(n > 0, max_abs_z(mean, std, mn, mx), 0.0)
    k = slice_flags(n, mean, std, z, cnan, cpos, cneg, eps, z_threshold, thresholds, where, flags)
    return (*out, k, int((n == 0).sum()))


def rescue_rows(n, mean, mn, mx) -> np.ndarray:
    """``kernels.rescue_rows``: slices with a finite value and a NaN mean, or whose
    magnitudes all lie under ``TINY`` and are not all equal."""
    with np.errstate(invalid="ignore"):
        tiny = (np.fmax(np.abs(mn), np.abs(mx)) < TINY) & (mn != mx)
    return np.flatnonzero((n > 0) & (np.isnan(mean) | tiny))


def totals(n, mean, std, mn, mx) -> tuple:
    """``kernels._totals``: ``(count, mean, std, min, max, sum)`` over rows."""
    tn = int(n.sum())
    with np.errstate(all="ignore"):
        if len(n) == 1:
            return (
                tn,
                float(mean[0]),
                float(std[0]),
                float(mn[0]),
                float(mx[0]),
                float(n[0] * mean[0]),
            )
        tsum = float((n * mean).sum())
        if tn == 0:
            return 0, 0.0, 0.0, math.inf, -math.inf, tsum
        w = n / tn
        tmean = tsum / tn
        if not math.isfinite(tmean):  # n * mean overflowed: average the means instead
            tmean = float((w * mean).sum())
        var = float((w * (std * std + (mean - tmean) ** 2)).sum())
        used = n > 0
        top = max(abs(tmean), *np.abs(mean[used]), *std[used])
        if not var < math.inf or (math.sqrt(var) < TINY and top > 0):  # squares out of range
            k = math.ldexp(1.0, math.frexp(top)[1] - 1)
            scaled = float((w * ((std / k) ** 2 + (mean / k - tmean / k) ** 2)).sum())
            return tn, tmean, math.sqrt(scaled) * k, float(mn.min()), float(mx.max()), tsum
    return tn, tmean, math.sqrt(var), float(mn.min()), float(mx.max()), tsum


def fold_slices(idx, n, mean, std, mn, mx, nan, pos, neg, *dense) -> None:
    """``kernels.fold_slices``: slice statistics merged into dense per-slice arrays in place
    (``stats.combine``; ``idx`` holds each slice once)."""
    dn, dmean, dstd, dmn, dmx, dnan, dpos, dneg = dense
    dn[idx], dmean[idx], dstd[idx] = combine(dn[idx], dmean[idx], dstd[idx], n, mean, std)
    dmn[idx] = np.minimum(dmn[idx], mn)
    dmx[idx] = np.maximum(dmx[idx], mx)
    for d, v in ((dnan, nan), (dpos, pos), (dneg, neg)):
        d[idx] += v


def max_abs_z(mean, std, mn, mx) -> np.ndarray:
    """The largest |z| of each slice, ``max((max - mean) / std, (mean - min) / std)``: 0 where
    std is 0 or the quotient NaN, infinities clipped to the float64 maximum."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = np.maximum((mx - mean) / std, (mean - mn) / std)
    return np.clip(np.where((std > 0) & ~np.isnan(z), z, 0.0), -BIG, BIG)


def slice_columns(n, mean, std, mn, mx, out_mean, out_std, out_min, out_max, out_z) -> None:
    """``kernels.slice_columns``: a report's per-slice columns (the largest |z|, NaN for the
    statistics of slices without a finite value)."""
    has = n > 0
    z = np.where(has, max_abs_z(mean, std, mn, mx), 0.0)
    cols = [np.where(has, c, np.nan) for c in (mean, std, mn, mx)]
    for out, c in zip((out_mean, out_std, out_min, out_max, out_z), (*cols, z)):
        out[:] = c


def slice_flags(
    count, mean, std, max_z, nan, pos, neg, eps, z_threshold, thresholds, where, flags
) -> int:
    """``kernels.slice_flags``: the flagged slices' positions and bits (bit ``j`` for the
    ``j``-th kind of ``anomalies.slice_kinds``, whose docstring gives the conditions) in
    ``where`` and ``flags``; returns how many."""
    has = count > 0
    with np.errstate(all="ignore"):
        var = std * std
        spread = count > 1  # one value has no variance to speak of
        # var <= n*eps*var + (n*m*eps)**2 in terms of the std: squares of tiny stds are 0
        noise = (count * eps >= 1) | (std * np.sqrt(1 - count * eps) <= count * np.abs(mean) * eps)
        bits = [
            nan + pos + neg > 0,
            spread & (std == 0),
            spread & (std > 0) & (std < np.inf) & noise,
        ]
        for t in thresholds:
            bits += [has & (np.abs(mean * count) >= t), has & (var * count >= t)]
        bits.append(has & (count > 1) & (max_z > z_threshold))
    every = sum(b.astype(np.int64) << j for j, b in enumerate(bits))
    found = np.flatnonzero(every)
    where[: len(found)], flags[: len(found)] = found, every[found]
    return len(found)


def scaled_counts(x, lim, counts, locs, nlocs) -> None:
    """``kernels.scaled_counts``: on ``f = |float32(v)|`` of the finite non-zero values,
    overflow ``f >= over``, underflow ``f <= under``, subnormal between it and ``normal``."""
    over, under, normal = lim
    with np.errstate(all="ignore"):
        nonzero = np.isfinite(x) & (x != 0)
        f = np.abs(x.astype(np.float32))
    o = nonzero & (f >= over)
    u = nonzero & ~o & (f <= under)
    counts += [o.sum(), u.sum(), (nonzero & ~o & ~u & (f < normal)).sum(), nonzero.sum()]
    for row, m in enumerate((o, u)):
        found = np.flatnonzero(m)[: locs.shape[1] - nlocs[row]]
        locs[row, nlocs[row] : nlocs[row] + len(found)] = found
        nlocs[row] += len(found)


TWINS = {
    "scan_rows": scan_rows,
    "scan_cols": scan_cols,
    "scan_cols_pitched": scan_cols_pitched,
    "quick_check": quick_check,
    "finish_slices": finish_slices,
    "finish_whole_slices": finish_whole_slices,
    "rescue_rows": rescue_rows,
    "fold_slices": fold_slices,
    "slice_columns": slice_columns,
    "slice_flags": slice_flags,
    "scaled_counts": scaled_counts,
}
