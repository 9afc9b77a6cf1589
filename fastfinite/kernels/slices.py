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
from .lanes import (
    L,
    add,
    both,
    div,
    fold,
    greatest,
    gt,
    least,
    load,
    load_part,
    lt,
    mul,
    select,
    splat,
    store,
    store_part,
    sub,
    tofloat,
    vabs,
    vmax,
    vmin,
    vsqrt,
)  # fmt: skip

_chan = helper(chan)
_NO, _YES = np.bool_(False), np.bool_(True)
BIG = float(np.finfo(np.float64).max)


@helper
def _lane_sums(n, mean, std, tmean, k, spread):
    """Over slices, in ``L`` lanes folded (missing lanes add 0.0): ``sum(n * mean)``, or
    with ``spread`` ``sum((n / tn) * ((std / k)**2 + (mean / k - tmean / k)**2))`` (the
    squares scaled by ``k``: 1, or a power of two when they leave float64's range), ``tn
    = sum(n)``; and ``tn``."""
    m = n.shape[0]
    tn = np.int64(0)
    for r in range(m):
        tn += n[r]
    acc = splat(0.0)
    ftn = splat(np.float64(tn))
    kk = splat(k)
    tm = div(splat(tmean), kk)
    for i in range(0, m, L):
        q = m - i
        if q >= L:
            fn, mu, sd = tofloat(load(n, i)), load(mean, i), load(std, i)
        else:
            fn = tofloat(load_part(n, i, q, 0))
            mu, sd = load_part(mean, i, q, 0.0), load_part(std, i, q, 0.0)
        if spread and k == 1.0:  # (v / 1.0 is v: the same bits)
            d = sub(mu, tm)
            acc = add(acc, mul(div(fn, ftn), add(mul(sd, sd), mul(d, d))))
        elif spread:
            s = div(sd, kk)
            d = sub(div(mu, kk), tm)
            acc = add(acc, mul(div(fn, ftn), add(mul(s, s), mul(d, d))))
        else:
            acc = add(acc, mul(fn, mu))
    return fold(acc), tn


@helper
def _extrema(mn, mx):
    """The smallest of ``mn`` and the largest of ``mx`` (never NaN), in lanes."""
    m = mn.shape[0]
    lo = splat(math.inf)
    hi = splat(-math.inf)
    for i in range(0, m, L):
        if m - i >= L:
            lo, hi = vmin(lo, load(mn, i)), vmax(hi, load(mx, i))
        else:
            lo = vmin(lo, load_part(mn, i, m - i, math.inf))
            hi = vmax(hi, load_part(mx, i, m - i, -math.inf))
    return least(lo), greatest(hi)


@helper
def totals(n, mean, std, mn, mx):
    """``(count, mean, std, min, max, sum, ok)`` over slices of counts ``n``, means and
    stds, the spread scaled when its squares leave float64's range; not ``ok`` when the
    sum overflows: then ``twins.totals`` takes them (the mean of the means)."""
    if n.shape[0] == 1:
        return n[0], mean[0], std[0], mn[0], mx[0], n[0] * mean[0], True
    lo, hi = _extrema(mn, mx)
    tsum, tn = _lane_sums(n, mean, std, 0.0, 1.0, _NO)
    if tn == 0:
        return tn, 0.0, 0.0, math.inf, -math.inf, tsum, True
    tmean = tsum / tn
    if not abs(tmean) < math.inf:
        return tn, tmean, 0.0, lo, hi, tsum, False
    var, _ = _lane_sums(n, mean, std, tmean, 1.0, _YES)
    if var < math.inf and not math.sqrt(var) < TINY:
        return tn, tmean, math.sqrt(var), lo, hi, tsum, True
    top = abs(tmean)
    for r in range(n.shape[0]):
        if n[r] > 0:
            a = abs(mean[r])
            top = a if a > top else top
            top = std[r] if std[r] > top else top
    if not var < math.inf or top > 0:  # a square out of range: again, scaled
        k = math.ldexp(1.0, math.frexp(top)[1] - 1)
        var, _ = _lane_sums(n, mean, std, tmean, k, _YES)
        return tn, tmean, math.sqrt(var) * k, lo, hi, tsum, True
    return tn, tmean, math.sqrt(var), lo, hi, tsum, True


@helper
def _moments(length, shift, s1, s2, cnan, cpos, cneg, n, mean, std):
    """Per slice the count, mean and std of its finite values from its shifted sums (a NaN
    mean and std where the sums are not finite: they overflowed), in lanes."""
    m = n.shape[0]
    ln, one, none = splat(np.int64(length)), splat(np.int64(1)), splat(np.int64(0))
    zero, nan, inf = splat(0.0), splat(math.nan), splat(math.inf)
    for i in range(0, m, L):
        q = m - i
        if q >= L:
            c = sub(ln, add(add(load(cnan, i), load(cpos, i)), load(cneg, i)))
            a, b, k = load(s1, i), load(s2, i), load(shift, i)
        else:
            bad = add(add(load_part(cnan, i, q, 0), load_part(cpos, i, q, 0)), load_part(cneg, i, q, 0))  # fmt: skip
            c = sub(ln, bad)
            a, b, k = load_part(s1, i, q, 0.0), load_part(s2, i, q, 0.0), load_part(shift, i, q, 0.0)  # fmt: skip
        cs = tofloat(select(gt(c, one), c, one))
        ok = both(lt(vabs(a), inf), lt(b, inf))
        u = div(a, cs)
        v = sub(b, mul(a, u))
        sd = vsqrt(div(select(gt(v, zero), v, zero), cs))
        has = gt(c, none)
        mu = select(has, select(ok, add(k, u), nan), zero)
        sd = select(has, select(ok, sd, nan), zero)
        if q >= L:
            store(n, i, c)
            store(mean, i, mu)
            store(std, i, sd)
        else:
            store_part(n, i, q, c)
            store_part(mean, i, q, mu)
            store_part(std, i, q, sd)


@helper
def _to_rescue(n, mean, mn, mx):
    """Whether a slice's moments are taken again, scaled (``twins.rescue_rows``)."""
    top = abs(mn) if abs(mn) > abs(mx) else abs(mx)
    return (n > 0) & ((mean != mean) | ((top < TINY) & (mn != mx)))


@helper
def max_z(mean, std, mn, mx):
    """A slice's largest |z|, ``max((max - mean) / std, (mean - min) / std)``: 0 when std
    is 0 or a quotient NaN, +-inf clipped to the float64 maximum."""
    a = (mx - mean) / std
    b = (mean - mn) / std
    z = a if a >= b else b
    z = -BIG if z < -BIG else (BIG if z > BIG else z)
    return z if (std > 0) & (a == a) & (b == b) else 0.0


@helper
def _flag_block(n, mean, std, z, cnan, cpos, cneg, eps, z_threshold, thresholds, bits):
    """The finding bits of slices (``anomalies.slice_kinds`` gives their order and
    meaning) into ``bits``: non-finite values, zero and near-zero variance, each dtype's
    sum and variance overflow, an outlier; a loop without a branch (in vectors), the
    overflow bits only when a slice reaches the lowest threshold. Returns whether any
    slice is flagged."""
    nt = thresholds.shape[0]
    low = math.inf
    for t in range(nt):
        low = thresholds[t] if thresholds[t] < low else low
    seen = np.int64(0)
    over = False
    for j in range(n.shape[0]):
        fn = np.float64(n[j])
        mu = mean[j]
        sd = std[j]
        spread = n[j] > 1
        # var <= n*eps*var + (n*m*eps)**2 without squares: for any magnitude (the square
        # of a std below 1e-154 is 0 in float64)
        r = math.sqrt(1.0 - fn * eps) if fn * eps < 1.0 else 0.0
        near = (fn * eps >= 1.0) | (sd * r <= fn * abs(mu) * eps)
        f = np.int64(cnan[j] + cpos[j] + cneg[j] > 0)
        f |= np.int64(spread & (sd == 0)) << 1
        f |= np.int64(spread & (sd != 0) & (sd < math.inf) & near) << 2
        f |= np.int64(spread & (z[j] > z_threshold)) << (3 + 2 * nt)
        bits[j] = f
        seen |= f
        over |= (n[j] > 0) & ((abs(mu * fn) >= low) | (sd * sd * fn >= low))
    if over:
        for t in range(nt):
            th = thresholds[t]
            for j in range(n.shape[0]):
                fn = np.float64(n[j])
                has = n[j] > 0
                total = abs(mean[j] * fn) >= th
                m2 = std[j] * std[j] * fn >= th
                bits[j] |= (np.int64(has & total) << (3 + 2 * t)) | (np.int64(has & m2) << (4 + 2 * t))  # fmt: skip
    return (seen != 0) | over


@helper
def _flagged(bits, m, b0, where, flags, k):
    """The slices of ``bits[:m]`` with a bit set (from slice ``b0``) appended to
    ``where`` and ``flags`` from ``k``; returns the new ``k``."""
    for j in range(m):
        if bits[j]:
            where[k] = b0 + j
            flags[k] = bits[j]
            k += 1
    return k


@kernel
def _finish(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, z, eps, z_threshold, thresholds, where, flags):  # fmt: skip
    """Per slice count, mean and std of the finite values (into ``n``, ``mean``, ``std``)
    from a scan's outputs (``length`` values per slice; ``mn``, ``mx``: the extrema of
    its finite values), and over all of them ``(count, mean, std, min, max, sum)``, the
    number of slices to rescue (``twins.rescue_rows``: a slice whose sums overflowed gets
    a NaN mean and std, and is taken again, scaled, by ``summary.rescued``); then, for
    slices whose values all lie in this block (nothing else will be merged into them: ``z``
    has a place for each), the largest |z| of each in ``z`` (it may be ``shift``'s memory)
    and the flagged slices' positions and bits in ``where`` and ``flags``
    (``slice_flags``'s), how many were flagged and how many hold no finite value. A block
    of ``SLICE_BLOCK`` slices at a time, its columns in cache from the moments to the
    flags; the blocks' totals combined in order (``stats.chan``). Returns whether the
    totals are all there (``totals``'s ``ok``: when not, ``finish_whole_slices`` takes
    them in Python)."""
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
    bits = np.empty(SLICE_BLOCK, np.int64)
    m = n.shape[0]
    for b0 in range(0, m, SLICE_BLOCK):
        b1 = b0 + SLICE_BLOCK if b0 + SLICE_BLOCK < m else m
        bn, bmean, bstd, bmn, bmx = n[b0:b1], mean[b0:b1], std[b0:b1], mn[b0:b1], mx[b0:b1]
        bnan, bpos, bneg = cnan[b0:b1], cpos[b0:b1], cneg[b0:b1]
        _moments(length, shift[b0:b1], s1[b0:b1], s2[b0:b1], bnan, bpos, bneg, bn, bmean, bstd)  # fmt: skip
        c, cm, cs, clo, chi, csum, ok = totals(bn, bmean, bstd, bmn, bmx)
        whole = whole and ok
        tn, tmean, tstd = _chan(tn, tmean, tstd, c, cm, cs)
        lo = clo if clo < lo else lo
        hi = chi if chi > hi else hi
        tsum += csum
        for j in range(b1 - b0):
            rescue += _to_rescue(bn[j], bmean[j], bmn[j], bmx[j])
        if not final:
            continue
        bz = z[b0:b1]  # it may be shift's memory: each shift was read above
        for j in range(b1 - b0):
            empty += bn[j] == 0
            bz[j] = max_z(bmean[j], bstd[j], bmn[j], bmx[j]) if bn[j] > 0 else 0.0
        if _flag_block(bn, bmean, bstd, bz, bnan, bpos, bneg, eps, z_threshold, thresholds, bits):  # fmt: skip
            k = _flagged(bits, b1 - b0, b0, where, flags, k)
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
    """The slices with a finding (``_flag_block``), in order: their positions in
    ``where[:k]`` and their bits in ``flags[:k]``; returns ``k``."""
    bits = np.empty(SLICE_BLOCK, np.int64)
    k = np.int64(0)
    m = count.shape[0]
    for b0 in range(0, m, SLICE_BLOCK):
        b1 = b0 + SLICE_BLOCK if b0 + SLICE_BLOCK < m else m
        b = slice(b0, b1)
        if _flag_block(count[b], mean[b], std[b], z[b], nan[b], pos[b], neg[b], eps, z_threshold, thresholds, bits):  # fmt: skip
            k = _flagged(bits, b1 - b0, b0, where, flags, k)
    return k
