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

from ..model.kinds import slice_shift
from ..model.stats import SLICE_BLOCK, TINY, chan
from .jit import helper, kernel
from .lanes import (
    L,
    add,
    anyof,
    below,
    both,
    div,
    either,
    eq,
    fold,
    ge,
    greatest,
    gt,
    le,
    least,
    load,
    load_part,
    lt,
    mul,
    ne,
    negate,
    ones,
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
# each slice kind's flag bit is ``1 << (base + step * n)`` (``kinds.slice_shift``: ``n`` the
# dtype's index for the kinds per dtype, the number of dtypes for the others): int64
# globals, constants to numba


def _bit(kind: str) -> tuple[np.int64, np.int64]:
    base, step = slice_shift(kind)
    return np.int64(base), np.int64(step)


_NONFINITE, _NONFINITE_STEP = _bit("nonfinite")
_ZERO, _ZERO_STEP = _bit("zero_variance")
_NEAR, _NEAR_STEP = _bit("near_zero_variance")
_SUM, _SUM_STEP = _bit("sum_overflow:")
_VAR, _VAR_STEP = _bit("variance_overflow:")
_OUTLIER, _OUTLIER_STEP = _bit("outlier")


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
def totals(n, mean, std, lo, hi):
    """``(count, mean, std, min, max, sum, ok)`` over slices of counts ``n``, means and
    stds, whose extrema are ``lo`` and ``hi`` (``_moments``'s), the spread scaled when its
    squares leave float64's range; not ``ok`` when the sum overflows: then
    ``slices_numpy.totals`` takes them (the mean of the means)."""
    if n.shape[0] == 1:
        return n[0], mean[0], std[0], lo, hi, n[0] * mean[0], True
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
def _moments(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std):
    """Per slice the count, mean and std of its finite values from its shifted sums (a NaN
    mean and std where the sums are not finite: they overflowed), in lanes; returns the
    smallest of ``mn``, the largest of ``mx`` (never NaN) and how many slices' moments are
    taken again, scaled (``slices_numpy.rescue_rows``: a finite value and a NaN mean, or
    magnitudes all under ``TINY`` and not all equal)."""
    m = n.shape[0]
    ln, one, none = splat(np.int64(length)), splat(np.int64(1)), splat(np.int64(0))
    zero, nan, inf, small = splat(0.0), splat(math.nan), splat(math.inf), splat(TINY)
    lo, hi = inf, splat(-math.inf)
    again = splat(np.int32(0))
    for i in range(0, m, L):
        q = m - i
        if q >= L:
            c = sub(ln, add(add(load(cnan, i), load(cpos, i)), load(cneg, i)))
            a, b, k = load(s1, i), load(s2, i), load(shift, i)
            vlo, vhi = load(mn, i), load(mx, i)
        else:
            bad = add(add(load_part(cnan, i, q, 0), load_part(cpos, i, q, 0)), load_part(cneg, i, q, 0))  # fmt: skip
            c = sub(ln, bad)
            a, b, k = load_part(s1, i, q, 0.0), load_part(s2, i, q, 0.0), load_part(shift, i, q, 0.0)  # fmt: skip
            vlo, vhi = load_part(mn, i, q, math.inf), load_part(mx, i, q, -math.inf)
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
        lo, hi = vmin(lo, vlo), vmax(hi, vhi)
        top = vmax(vabs(vhi), vabs(vlo))
        redo = either(ne(mu, mu), both(lt(top, small), ne(vlo, vhi)))
        again = add(again, ones(both(has, redo)))
    return least(lo), greatest(hi), fold(again)


@helper
def max_z(mean, std, mn, mx):
    """A slice's largest |z|, ``max((max - mean) / std, (mean - min) / std)`` taken as
    ``max(max - mean, mean - min) / std`` (a division by a positive number keeps the order:
    the same bits): 0 when std is 0 or a quotient NaN, +-inf clipped to the float64
    maximum (``_max_zs`` in lanes)."""
    a = mx - mean
    b = mean - mn
    z = (a if a >= b else b) / std
    z = -BIG if z < -BIG else (BIG if z > BIG else z)
    ok = (std > 0) & (a == a) & (b == b) & ((std < math.inf) | ((abs(a) < math.inf) & (abs(b) < math.inf)))  # fmt: skip
    return z if ok else 0.0


@helper
def _max_zs(n, mean, std, mn, mx, z):
    """Each slice's largest |z| (``max_z``) into ``z``, 0 for a slice without a finite
    value; returns how many have none."""
    m = n.shape[0]
    empty = np.int64(0)
    none, zero, inf, big = splat(np.int64(0)), splat(0.0), splat(math.inf), splat(BIG)
    for i in range(0, m, L):
        q = m - i
        if q >= L:
            c, mu, sd, lo, hi = load(n, i), load(mean, i), load(std, i), load(mn, i), load(mx, i)
        else:
            c, mu, sd = load_part(n, i, q, 0), load_part(mean, i, q, 0.0), load_part(std, i, q, 0.0)  # fmt: skip
            lo, hi = load_part(mn, i, q, 0.0), load_part(mx, i, q, 0.0)
        a = sub(hi, mu)
        b = sub(mu, lo)
        v = div(select(ge(a, b), a, b), sd)
        v = select(lt(v, splat(-BIG)), splat(-BIG), select(gt(v, big), big, v))
        ok = both(gt(sd, zero), both(eq(a, a), eq(b, b)))
        ok = both(ok, either(lt(sd, inf), both(lt(vabs(a), inf), lt(vabs(b), inf))))
        has = gt(c, none)
        v = select(both(has, ok), v, zero)
        if q >= L:
            store(z, i, v)
        else:
            store_part(z, i, q, v)
        empty += fold(ones(both(negate(has), below(q))))
    return empty


@helper
def _flag_block(n, mean, std, z, cnan, cpos, cneg, eps, z_threshold, thresholds, bits):
    """The finding bits of slices (``kinds.slice_kinds`` gives their order and
    meaning) into ``bits``: non-finite values, zero and near-zero variance, each dtype's
    sum and variance overflow, an outlier; in lanes, the overflow bits only when a slice
    reaches the lowest threshold. Returns whether any slice is flagged."""
    nt = thresholds.shape[0]
    low = math.inf
    for t in range(nt):
        low = thresholds[t] if thresholds[t] < low else low
    m = n.shape[0]
    flagged = False
    over = False
    none, one = splat(np.int64(0)), splat(np.int64(1))
    b0 = splat(np.int64(1) << (_NONFINITE + _NONFINITE_STEP * nt))
    b1 = splat(np.int64(1) << (_ZERO + _ZERO_STEP * nt))
    b2 = splat(np.int64(1) << (_NEAR + _NEAR_STEP * nt))
    bz = splat(np.int64(1) << (_OUTLIER + _OUTLIER_STEP * nt))
    zero, unit, inf, ev, lv, zt = splat(0.0), splat(1.0), splat(math.inf), splat(eps), splat(low), splat(z_threshold)  # fmt: skip
    for i in range(0, m, L):
        q = m - i
        if q >= L:
            c, mu, sd, zz = load(n, i), load(mean, i), load(std, i), load(z, i)
            bad = add(add(load(cnan, i), load(cpos, i)), load(cneg, i))
        else:
            c, mu, sd = load_part(n, i, q, 0), load_part(mean, i, q, 0.0), load_part(std, i, q, 0.0)  # fmt: skip
            zz = load_part(z, i, q, 0.0)
            bad = add(add(load_part(cnan, i, q, 0), load_part(cpos, i, q, 0)), load_part(cneg, i, q, 0))  # fmt: skip
        fn = tofloat(c)
        spread = gt(c, one)
        # var <= n*eps*var + (n*m*eps)**2 without squares, for any magnitude (the square of
        # a std below 1e-154 is 0 in float64): std * sqrt(1 - n*eps) <= n*|m|*eps; the
        # root only where std alone is above the bound (std * r <= std: r <= 1)
        fe = mul(fn, ev)
        t = mul(mul(fn, vabs(mu)), ev)
        near = either(ge(fe, unit), le(sd, t))
        if anyof(both(negate(near), spread)):
            near = either(near, le(mul(sd, vsqrt(sub(unit, fe))), t))
        f = select(gt(bad, none), b0, none)
        f = add(f, select(both(spread, eq(sd, zero)), b1, none))
        f = add(f, select(both(both(spread, ne(sd, zero)), both(lt(sd, inf), near)), b2, none))
        f = add(f, select(both(spread, gt(zz, zt)), bz, none))
        if q >= L:
            store(bits, i, f)
        else:
            store_part(bits, i, q, f)
        flagged |= anyof(ne(f, none))
        big = either(ge(vabs(mul(mu, fn)), lv), ge(mul(mul(sd, sd), fn), lv))
        over |= anyof(both(gt(c, none), big))
    if over:
        for t in range(nt):
            th = thresholds[t]
            for j in range(m):
                fn = np.float64(n[j])
                has = n[j] > 0
                total = abs(mean[j] * fn) >= th
                m2 = std[j] * std[j] * fn >= th
                bits[j] |= (np.int64(has & total) << (_SUM + _SUM_STEP * t)) | (np.int64(has & m2) << (_VAR + _VAR_STEP * t))  # fmt: skip
    return flagged | over


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
    number of slices to rescue (``slices_numpy.rescue_rows``: a slice whose sums overflowed gets
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
        clo, chi, again = _moments(length, shift[b0:b1], s1[b0:b1], s2[b0:b1], bmn, bmx, bnan, bpos, bneg, bn, bmean, bstd)  # fmt: skip
        c, cm, cs, clo, chi, csum, ok = totals(bn, bmean, bstd, clo, chi)
        whole = whole and ok
        tn, tmean, tstd = _chan(tn, tmean, tstd, c, cm, cs)
        lo = clo if clo < lo else lo
        hi = chi if chi > hi else hi
        tsum += csum
        rescue += again
        if not final:
            continue
        bz = z[b0:b1]  # it may be shift's memory: each shift was read above
        empty += _max_zs(bn, bmean, bstd, bmn, bmx, bz)
        if _flag_block(bn, bmean, bstd, bz, bnan, bpos, bneg, eps, z_threshold, thresholds, bits):  # fmt: skip
            k = _flagged(bits, b1 - b0, b0, where, flags, k)
    return tn, tmean, tstd, lo, hi, tsum, rescue, k, empty, whole


def finish_whole_slices(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, z, eps, z_threshold, thresholds, where, flags):  # fmt: skip
    """Per slice count, mean and std of the finite values (into ``n``, ``mean``, ``std``)
    from a scan's outputs, over all of them ``(count, mean, std, min, max, sum)``, the
    slices to rescue, the flagged slices and the empty ones (``_finish``); the rare totals
    whose sums overflow are taken by ``slices_numpy.slice_totals`` (the same bits)."""
    *out, whole = _finish(length, shift, s1, s2, mn, mx, cnan, cpos, cneg, n, mean, std, z, eps, z_threshold, thresholds, where, flags)  # fmt: skip
    if not whole:
        from .slices_numpy import slice_totals

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
