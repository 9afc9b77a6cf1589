"""Per-slice work after the scan: moments from the shifted sums, the totals over slices,
the largest |z|, the findings' bits, and slices merged by Chan's formula.

Every loop here is elementwise (LLVM runs it in vectors without reordering anything), and
every sum over slices is taken in ``L`` lanes and folded (``lanes``), so each result has
the bits of its NumPy twin (``twins``): the totals of a block of ``SLICE_BLOCK`` slices
are lane sums, and blocks are combined in order by ``stats.chan``, which the kernels
compile from the same Python source the twins run.
"""

from __future__ import annotations

import math

import numpy as np

from ..stats import SLICE_BLOCK, TINY, chan
from .jit import helper, kernel
from .lanes import L, add, div, fold, load, load_part, mul, splat, sub, tofloat

_chan = helper(chan)
_NO, _YES = np.bool_(False), np.bool_(True)
BIG = float(np.finfo(np.float64).max)


@helper
def _lane_sums(n, mean, std, tmean, spread):
    """Over slices, in ``L`` lanes folded (missing lanes add 0.0): ``sum(n * mean)``, or
    with ``spread`` ``sum((n / tn) * (std**2 + (mean - tmean)**2))``, ``tn = sum(n)``; and
    ``tn``."""
    m = n.shape[0]
    tn = np.int64(0)
    for r in range(m):
        tn += n[r]
    acc = splat(0.0)
    ftn = splat(np.float64(tn))
    tm = splat(tmean)
    for i in range(0, m, L):
        q = m - i
        if q >= L:
            fn, mu, sd = tofloat(load(n, i)), load(mean, i), load(std, i)
        else:
            fn = tofloat(load_part(n, i, q, 0))
            mu, sd = load_part(mean, i, q, 0.0), load_part(std, i, q, 0.0)
        if spread:
            d = sub(mu, tm)
            acc = add(acc, mul(div(fn, ftn), add(mul(sd, sd), mul(d, d))))
        else:
            acc = add(acc, mul(fn, mu))
    return fold(acc), tn


@helper
def totals(n, mean, std, mn, mx):
    """``(count, mean, std, min, max, sum, ok)`` over slices of counts ``n``, means and
    stds; not ``ok`` where the sum or a square overflows or the spread's squares fall under
    ``TINY``: then ``twins.totals`` takes them (its mean of the means, its spread scaled)."""
    if n.shape[0] == 1:
        return n[0], mean[0], std[0], mn[0], mx[0], n[0] * mean[0], True
    lo = math.inf
    hi = -math.inf
    for r in range(n.shape[0]):
        lo = mn[r] if mn[r] < lo else lo
        hi = mx[r] if mx[r] > hi else hi
    tsum, tn = _lane_sums(n, mean, std, 0.0, _NO)
    if tn == 0:
        return tn, 0.0, 0.0, math.inf, -math.inf, tsum, True
    tmean = tsum / tn
    var, _ = _lane_sums(n, mean, std, tmean, _YES)
    ok = abs(tmean) < math.inf and var < math.inf and not math.sqrt(var) < TINY
    return tn, tmean, math.sqrt(var), lo, hi, tsum, ok


@helper
def _moments(length, shift, s1, s2, cnan, cpos, cneg, n, mean, std):
    """Per slice the count, mean and std of its finite values from its shifted sums (a NaN
    mean and std where the sums are not finite: they overflowed)."""
    for r in range(n.shape[0]):
        c = length - cnan[r] - cpos[r] - cneg[r]
        cs = np.float64(c if c > 1 else 1)
        a = s1[r]
        b = s2[r]
        ok = abs(a) < math.inf and b < math.inf
        q = a / cs
        v = b - a * q
        m = shift[r] + q
        sd = math.sqrt((v if v > 0 else 0.0) / cs)
        n[r] = c
        mean[r] = (m if ok else math.nan) if c > 0 else 0.0
        std[r] = (sd if ok else math.nan) if c > 0 else 0.0


@helper
def _to_rescue(n, mean, mn, mx):
    """Whether a slice's moments are taken again, scaled (``twins.rescue_rows``)."""
    top = abs(mn) if abs(mn) > abs(mx) else abs(mx)
    return n > 0 and (mean != mean or (top < TINY and mn != mx))


@helper
def max_z(mean, std, mn, mx):
    """A slice's largest |z|, ``max((max - mean) / std, (mean - min) / std)``: 0 when std
    is 0 or a quotient NaN, +-inf clipped to the float64 maximum."""
    a = (mx - mean) / std
    b = (mean - mn) / std
    z = a if a >= b else b
    z = -BIG if z < -BIG else (BIG if z > BIG else z)
    return z if std > 0 and a == a and b == b else 0.0


@helper
def _bits(n, mean, std, z, bad, eps, z_threshold, thresholds):
    """A slice's finding bits (``anomalies.slice_kinds`` gives their order and meaning):
    ``bad`` non-finite values, zero and near-zero variance, each dtype's sum and variance
    overflow, and an outlier."""
    fn = np.float64(n)
    spread = n > 1
    f = np.int64(bad > 0)
    # var <= n*eps*var + (n*m*eps)**2 without squares: for any magnitude (the square of a
    # std below 1e-154 is 0 in float64)
    r = math.sqrt(1.0 - fn * eps) if fn * eps < 1.0 else 0.0
    near = fn * eps >= 1.0 or std * r <= fn * abs(mean) * eps
    f |= np.int64(spread and std == 0) << 1
    f |= np.int64(spread and std != 0 and std < math.inf and near) << 2
    nt = thresholds.shape[0]
    if n > 0:
        total = abs(mean * fn)
        m2 = std * std * fn
        for t in range(nt):
            f |= np.int64(total >= thresholds[t]) << (3 + 2 * t)
            f |= np.int64(m2 >= thresholds[t]) << (4 + 2 * t)
    return f | (np.int64(spread and z > z_threshold) << (3 + 2 * nt))


@kernel
def _finish(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, z, eps, z_threshold, thresholds, where, flags):  # fmt: skip
    """Per slice count, mean and std of the finite values (into ``n``, ``mean``, ``std``)
    from a scan's outputs (``length`` values per slice; ``mn``, ``mx``: the extrema of
    its finite values), and over all of them ``(count, mean, std, min, max, sum)``, the
    number of slices to rescue (``twins.rescue_rows``: a slice whose sums overflowed gets a NaN
    mean and std, and is taken again, scaled, by ``summary.rescued``); then, for slices
    whose values all lie in this block (nothing else will be merged into them: ``z`` has a
    place for each), the largest |z| of each in ``z`` (it may be ``shift``'s memory) and
    the flagged slices' positions and bits in ``where`` and ``flags`` (``slice_flags``'s),
    how many were flagged and how many hold no finite value. A block of ``SLICE_BLOCK``
    slices at a time, its columns in cache from the moments to the flags; the blocks'
    totals combined in order (``stats.chan``). Returns whether the totals are all there
    (``totals``'s ``ok``: when not, ``finish_whole_slices`` takes them in Python)."""
    final = z.shape[0] == n.shape[0]  # (for no slice at all, either way: nothing to do)
    tn = np.int64(0)
    tmean = 0.0
    tstd = 0.0
    lo = math.inf
    hi = -math.inf
    tsum = 0.0
    rescue = np.int64(0)
    k = np.int64(0)
    empty = np.int64(0)
    whole = True
    m = n.shape[0]
    for b0 in range(0, m, SLICE_BLOCK):
        b1 = b0 + SLICE_BLOCK if b0 + SLICE_BLOCK < m else m
        bn, bmean, bstd, bmn, bmx = n[b0:b1], mean[b0:b1], std[b0:b1], mn[b0:b1], mx[b0:b1]
        _moments(length, shift[b0:b1], s1[b0:b1], s2[b0:b1], cnan[b0:b1], cpos[b0:b1], cneg[b0:b1], bn, bmean, bstd)  # fmt: skip
        c, cm, cs, clo, chi, csum, ok = totals(bn, bmean, bstd, bmn, bmx)
        whole = whole and ok
        tn, tmean, tstd = _chan(tn, tmean, tstd, c, cm, cs)
        lo = clo if clo < lo else lo
        hi = chi if chi > hi else hi
        tsum += csum
        for r in range(b0, b1):
            rescue += _to_rescue(n[r], mean[r], mn[r], mx[r])
        if not final:
            continue
        for r in range(b0, b1):  # z may be shift's memory: each shift was read above
            z[r] = max_z(mean[r], std[r], mn[r], mx[r]) if n[r] > 0 else 0.0
        for r in range(b0, b1):
            empty += n[r] == 0
            f = _bits(n[r], mean[r], std[r], z[r], cnan[r] + cpos[r] + cneg[r], eps, z_threshold, thresholds)  # fmt: skip
            if f:
                where[k] = r
                flags[k] = f
                k += 1
    return tn, tmean, tstd, lo, hi, tsum, rescue, k, empty, whole


def finish_whole_slices(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, z, eps, z_threshold, thresholds, where, flags):  # fmt: skip
    """Per slice count, mean and std of the finite values (into ``n``, ``mean``, ``std``)
    from a scan's outputs, over all of them ``(count, mean, std, min, max, sum)``, the
    slices to rescue, the flagged slices and the empty ones (``_finish``); the rare totals
    whose sums overflow are taken by ``twins.slice_totals`` (the same bits)."""
    *out, whole = _finish(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, z, eps, z_threshold, thresholds, where, flags)  # fmt: skip
    if not whole:
        from ..slow.twins import slice_totals

        out[:6] = slice_totals(n, mean, std, mn, mx)
    return tuple(out)


_NO_Z, _NO_FLAGS = np.empty(0), np.empty(0, np.int64)


def finish_slices(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std):
    """``finish_whole_slices``'s moments, totals and slices to rescue alone, for slices
    that other parts of the array may add to (one kernel compiled for both: an empty ``z``
    asks for no more)."""
    t = finish_whole_slices(
        length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, _NO_Z, 0.0, 0.0,
        _NO_Z, _NO_FLAGS, _NO_FLAGS,
    )  # fmt: skip
    return t[:7]


@kernel
def fold_slices(idx, n, mean, std, mn, mx, nan, pos, neg, dn, dmean, dstd, dmn, dmx, dnan, dpos, dneg):  # fmt: skip
    """Merge slice statistics into dense per-slice arrays in place (``stats.chan``; ``idx``
    holds each slice once)."""
    for r in range(idx.shape[0]):
        i = idx[r]
        dn[i], dmean[i], dstd[i] = _chan(dn[i], dmean[i], dstd[i], n[r], mean[r], std[r])
        dmn[i] = mn[r] if mn[r] < dmn[i] else dmn[i]
        dmx[i] = mx[r] if mx[r] > dmx[i] else dmx[i]
        dnan[i] += nan[r]
        dpos[i] += pos[r]
        dneg[i] += neg[r]


@kernel
def slice_columns(n, mean, std, mn, mx, out_mean, out_std, out_min, out_max, out_z):
    """A report's per-slice columns from merged statistics: the largest |z| (``max_z``)
    and NaN for the mean, std, min and max of slices without a finite value."""
    for i in range(n.shape[0]):
        has = n[i] > 0
        out_mean[i] = mean[i] if has else math.nan
        out_std[i] = std[i] if has else math.nan
        out_min[i] = mn[i] if has else math.nan
        out_max[i] = mx[i] if has else math.nan
        out_z[i] = max_z(mean[i], std[i], mn[i], mx[i]) if has else 0.0


@kernel
def slice_flags(count, mean, std, z, nan, pos, neg, eps, z_threshold, thresholds, where, flags):
    """The slices with a finding (``_bits``), in order: their positions in ``where[:k]``
    and their bits in ``flags[:k]``; returns ``k``."""
    k = 0
    for r in range(count.shape[0]):
        f = _bits(count[r], mean[r], std[r], z[r], nan[r] + pos[r] + neg[r], eps, z_threshold, thresholds)  # fmt: skip
        if f:
            where[k] = r
            flags[k] = f
            k += 1
    return k
