"""The per-row scan: each row's counts, positions and shifted sums in one pass.

A plain scan is one row (or the parts of a run of regions, each a row); ``by`` on the
slices that are rows of the block (``by=-1`` on C-ordered data) is many. Row ``r`` holds
``x[r * n : (r + 1) * n]``.

What a row's statistics are, bit for bit (``twins.scan_rows`` does the same in NumPy):

- the shift ``k``: the row's first finite value (0 when it has none);
- ``d = float64(v) - float64(k)`` for each finite ``v`` (0.0 for the others);
- the row in sub-blocks of ``SUB`` values, each summed in ``L`` lanes from 0.0
  (``lanes``: lane ``j`` takes the values at ``j``, ``j + L``, ...; the last sub-block's
  missing values are 0.0); the row's lanes are the sub-blocks' added in order to 0.0;
  ``s1`` is their ``fold``; ``s2`` the same of ``d * d``;
- the extrema of the finite values (+inf and -inf when there is none).

How it stays fast: one branch-free pass over each sub-block takes the sums of every value,
the extrema and (with a cast target that can underflow) the count of magnitudes under the
largest underflow threshold. A NaN or inf makes the sums non-finite, so finite sums and
extrema inside the overflow thresholds prove the sub-block clean; only a sub-block that is
not goes through the exact path (``exact``): its counts of every kind, its sums over its
finite values and its first positions.

Compile time is the user's time: each function here is compiled on its own and linked
into its callers, so there are few of them, without NumPy allocations or the scalar
``min``/``max`` builtins (each of those compiles a function of its own).
"""

from __future__ import annotations

import numpy as np

from ..kinds import N_KINDS, N_TARGET_SLOTS, NAN, NEGINF, POSINF
from ..stats import SUB
from .jit import helper, kernel
from .lanes import (
    L,
    add,
    anyof,
    below,
    both,
    finite,
    fold,
    ge,
    greatest,
    gt,
    le,
    least,
    load,
    load_part,
    mul,
    ne,
    negate,
    ones,
    select,
    splat,
    sub,
    vabs,
    vmax,
    vmin,
    wide,
)  # fmt: skip
from .lanes import eq as lanes_eq

assert SUB % L == 0


@helper(inline="always")
def _keep(locs, vals, nlocs, found, kind, p, v):
    """Record position ``p`` and value ``v`` of ``kind`` when it was found and is still
    short of the cap."""
    j = nlocs[kind]
    if found[kind] > 0 and j < locs.shape[1]:
        locs[kind, j] = p
        vals[kind, j] = v
        nlocs[kind] = j + 1


@helper
def exact(x, s, e, k, pos, thr, targets, found, counts, locs, vals, nlocs):
    """The exact path of ``x[s:e]`` with shift ``k``: the counts of each kind into
    ``found`` and added to ``counts``, the first positions (``pos + i - s``) and values of
    the kinds still short of the cap recorded; returns the lanes of the sums over the
    finite values and their extrema (+-inf where there is none)."""
    T = x.dtype.type
    inf = T(np.inf)
    kk = splat(np.float64(k))
    z = splat(0.0)
    s1 = z
    s2 = z
    pinf = splat(inf)
    ninf = splat(-inf)
    mn = pinf
    mx = ninf
    zi = splat(np.int32(0))
    cn = zi
    cp = zi
    cg = zi
    for i in range(s, e, L):
        m = e - i if e - i < L else L
        v = load(x, i) if m == L else load_part(x, i, m, k)
        inside = below(m)
        f = both(finite(v), inside)
        d = select(f, sub(wide(v), kk), z)
        s1 = add(s1, d)
        s2 = add(s2, mul(d, d))
        mn = vmin(mn, select(f, v, pinf))
        mx = vmax(mx, select(f, v, ninf))
        cn = add(cn, ones(both(ne(v, v), inside)))
        cp = add(cp, ones(both(lanes_eq(v, pinf), inside)))
        cg = add(cg, ones(both(lanes_eq(v, ninf), inside)))
    found[NAN] = fold(cn)
    found[POSINF] = fold(cp)
    found[NEGINF] = fold(cg)
    zero = splat(T(0))
    over = inf
    under = T(-1)
    for t in range(N_TARGET_SLOTS):
        found[3 + 2 * t] = 0
        found[4 + 2 * t] = 0
        if t >= targets:
            continue
        ot = thr[2 * t]
        ut = thr[2 * t + 1]
        over = ot if ot < over else over
        under = ut if ut > under else under
        o = splat(ot)
        u = splat(ut)
        co = zi
        cu = zi
        for i in range(s, e, L):
            m = e - i if e - i < L else L
            v = load(x, i) if m == L else load_part(x, i, m, T(0))  # 0: neither risk
            a = vabs(v)
            co = add(co, ones(both(ge(a, o), finite(v))))
            cu = add(cu, ones(both(le(a, u), gt(a, zero))))
        found[3 + 2 * t] = fold(co)
        found[4 + 2 * t] = fold(cu)
    cap = locs.shape[1]
    need = False
    for kind in range(N_KINDS):
        counts[kind] += found[kind]
        need |= found[kind] > 0 and nlocs[kind] < cap
    if need:
        for i in range(s, e):
            v = x[i]
            a = abs(v)
            if a < over and (a > under or a == 0):  # finite, no cast risk: most values
                continue
            if v != v:
                _keep(locs, vals, nlocs, found, NAN, pos + i - s, v)
            elif a == inf:
                _keep(locs, vals, nlocs, found, POSINF if v > 0 else NEGINF, pos + i - s, v)
            else:
                for t in range(targets):
                    if a >= thr[2 * t]:
                        _keep(locs, vals, nlocs, found, 3 + 2 * t, pos + i - s, v)
                    elif a > 0 and a <= thr[2 * t + 1]:
                        _keep(locs, vals, nlocs, found, 4 + 2 * t, pos + i - s, v)
    return s1, s2, mn, mx


@helper
def _pass(x, a, b, k, tiny):
    """The fast pass over ``x[a:b]`` (at most ``SUB`` values) in lanes: the sums of ``d``
    and ``d * d`` over every value (``d = v - k``), the extrema (a NaN is never taken)
    and, with ``tiny``, the smallest non-zero magnitude. Values past ``b`` read as ``k``
    (they add 0.0 and leave the extrema be)."""
    T = x.dtype.type
    kk = splat(np.float64(k))
    s1 = splat(0.0)
    s2 = s1
    inf = splat(T(np.inf))
    mn = inf
    mx = splat(T(-np.inf))
    mz = inf
    zero = splat(T(0))
    full = a + (b - a) // L * L
    for i in range(a, b, L):
        v = load(x, i) if i < full else load_part(x, i, b - i, k)
        d = sub(wide(v), kk)
        s1 = add(s1, d)
        s2 = add(s2, mul(d, d))
        mn = vmin(mn, v)
        mx = vmax(mx, v)
        if tiny:
            m = vabs(v)
            mz = vmin(mz, select(gt(m, zero), m, inf))
    return s1, s2, mn, mx, mz


@helper
def _pass4(x, a, k, tiny):
    """``_pass`` over four whole sub-blocks from ``a``, side by side in one loop: four
    streams of reads keep the hardware prefetchers ahead of it (1e8 float32 on two threads
    of a Xeon, one stream 16.9 GB/s, four 25.3; float64 22.4, 26.5). Each sub-block's sums;
    the extrema and smallest magnitude of the four together (when they show something, each
    sub-block is taken again on its own)."""
    T = x.dtype.type
    kk = splat(np.float64(k))
    z = splat(0.0)
    inf = splat(T(np.inf))
    zero = splat(T(0))
    a1, a2, b1, b2, c1, c2, d1, d2 = z, z, z, z, z, z, z, z
    mn, mz = inf, inf
    mx = splat(T(-np.inf))
    for i in range(a, a + SUB, L):
        v = load(x, i)
        w = load(x, i + SUB)
        y = load(x, i + 2 * SUB)
        q = load(x, i + 3 * SUB)
        d = sub(wide(v), kk)
        a1 = add(a1, d)
        a2 = add(a2, mul(d, d))
        d = sub(wide(w), kk)
        b1 = add(b1, d)
        b2 = add(b2, mul(d, d))
        d = sub(wide(y), kk)
        c1 = add(c1, d)
        c2 = add(c2, mul(d, d))
        d = sub(wide(q), kk)
        d1 = add(d1, d)
        d2 = add(d2, mul(d, d))
        mn = vmin(vmin(mn, v), vmin(vmin(w, y), q))
        mx = vmax(vmax(mx, v), vmax(vmax(w, y), q))
        if tiny:
            m = vmin(vmin(vabs(v), vabs(w)), vmin(vabs(y), vabs(q)))
            m = select(gt(m, zero), m, inf)  # a zero here: each sub-block is looked at alone
            mz = vmin(mz, m)
    return (a1, b1, c1, d1), (a2, b2, c2, d2), mn, mx, mz


@helper
def _count_under(x, a, b, under):
    """The values of ``x[a:b]`` with ``0 < |v| <= under``."""
    T = x.dtype.type
    u = splat(under)
    zero = splat(T(0))
    c = splat(np.int32(0))
    for i in range(a, b, L):
        m = vabs(load(x, i) if i + L <= b else load_part(x, i, b - i, T(0)))
        c = add(c, ones(both(le(m, u), gt(m, zero))))
    return fold(c)


@helper
def _settle(x, a, b, k, pos, lanes, thr, over, under, targets, found, counts, locs, vals, nlocs):  # fmt: skip
    """A sub-block ``x[a:b]`` (positions from ``pos``) after its fast pass (``lanes``):
    clean when its sums are finite, its extrema inside the overflow thresholds and no
    magnitude at or under an underflow threshold (or only the one target's, counted here
    when it wants no position); else taken again on the exact path. Returns its sums' and
    extrema's lanes over its finite values and its NaN, +inf, -inf counts."""
    s1, s2, mn, mx, mz = lanes
    clean = not anyof(negate(finite(s1))) and least(mn) > -over and greatest(mx) < over
    if clean and under >= 0 and least(mz) <= under:
        slot = 2 + 2 * targets  # the last target's underflow
        clean = targets == 1 and nlocs[slot] >= locs.shape[1]
        if clean:
            counts[slot] += _count_under(x, a, b, under)
    if clean:
        return s1, s2, mn, mx, np.int64(0), np.int64(0), np.int64(0)
    s1, s2, mn, mx = exact(x, a, b, k, pos, thr, targets, found, counts, locs, vals, nlocs)
    return s1, s2, mn, mx, found[NAN], found[POSINF], found[NEGINF]


@helper
def _added(r1, r2, lo, hi, c, got):
    """A row's lanes with a sub-block's (``_settle``'s) added, its counts added to ``c``."""
    a1, a2, smn, smx, n0, n1, n2 = got
    c[0] += n0
    c[1] += n1
    c[2] += n2
    return add(r1, a1), add(r2, a2), vmin(lo, smn), vmax(hi, smx)


@helper
def bounds(thr):
    """``(over, under, targets)`` of cast thresholds ``thr`` (per slot ``(over, under)``
    in the data's type, ``(inf, -1)`` for an unused slot): a finite ``|v| >= over`` risks
    an overflow, ``0 < |v| <= under`` an underflow (``under < 0``: no target can);
    ``targets``: the slots up to the last one used."""
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


@kernel
def scan_rows(x, rows, n, thr, counts, locs, vals, nlocs, shift, s1, s2, mn, mx, cnan, cpos, cneg):  # fmt: skip
    """Scan ``rows`` rows of ``n`` values of the flat block ``x`` (float32 or float64).

    Counts of each kind are added to ``counts`` (NaN, +inf, -inf, then overflow and
    underflow per cast slot of ``thr``: ``(over, under)`` thresholds in ``x``'s type,
    ``(inf, -1)`` for an unused slot), the first positions (flat in ``x``) and values of
    each kind kept in ``locs``/``vals`` up to their width (``nlocs`` of each); per row,
    its statistics (module docstring) into ``shift``, ``s1``, ``s2``, ``mn``, ``mx`` and
    its non-finite counts added to ``cnan``, ``cpos``, ``cneg``. A row's whole sub-blocks
    are read four at a time (``_pass4``)."""
    T = x.dtype.type
    over, under, targets = bounds(thr)
    tiny = under >= 0
    found = np.empty(N_KINDS, np.int64)
    z = splat(0.0)
    for r in range(rows):
        s = r * n
        e = s + n
        k = T(0)  # the shift: the row's first finite value
        for i in range(s, e):
            if (x[i] - x[i]) == 0:
                k = x[i]
                break
        r1 = z
        r2 = z
        lo = splat(T(np.inf))
        hi = splat(T(-np.inf))
        c = np.zeros(3, np.int64)
        a = s
        while a < e:
            if a + 4 * SUB <= e:
                p1, p2, qmn, qmx, qmz = _pass4(x, a, k, tiny)
                clean = least(qmn) > -over and greatest(qmx) < over and least(qmz) > under
                for j in range(4):
                    clean = clean and not anyof(negate(finite(p1[j])))
                if clean:  # the four sub-blocks' lanes, in order
                    for j in range(4):
                        r1 = add(r1, p1[j])
                        r2 = add(r2, p2[j])
                    lo = vmin(lo, qmn)
                    hi = vmax(hi, qmx)
                    a += 4 * SUB
                    continue
                stop = a + 4 * SUB  # something to look at: each sub-block alone
            else:
                stop = e
            while a < stop:
                b = a + SUB if a + SUB < e else e
                lanes = _pass(x, a, b, k, tiny)
                got = _settle(x, a, b, k, a, lanes, thr, over, under, targets, found, counts, locs, vals, nlocs)  # fmt: skip
                r1, r2, lo, hi = _added(r1, r2, lo, hi, c, got)
                a = b
        shift[r] = k
        s1[r] = fold(r1)
        s2[r] = fold(r2)
        mn[r] = least(lo)
        mx[r] = greatest(hi)
        cnan[r] += c[0]
        cpos[r] += c[1]
        cneg[r] += c[2]


@helper
def _widen(src, table, s, e, out, outu):
    """``src[s:e]``, bfloat16 or float8 bits, as float32 values in ``out[:e - s]``
    (``outu``: the same memory as uint32): bfloat16 is float32's top half; a float8 value
    is looked up in ``table``, its 256 values."""
    if table.shape[0] == 0:
        for i in range(e - s):
            outu[i] = np.uint32(src[s + i]) << np.uint32(16)
    else:
        for i in range(e - s):
            out[i] = table[src[s + i]]


@kernel
def scan_narrow(src, table, rows, n, thr, counts, locs, vals, nlocs, shift, s1, s2, mn, mx, cnan, cpos, cneg):  # fmt: skip
    """``scan_rows`` over bfloat16 or float8 data: ``src``, their bits (uint16 or uint8,
    flat), each sub-block widened to float32 (``_widen``; ``table``: float8's values,
    empty for bfloat16) in a buffer that stays in cache, then scanned as ``scan_rows``
    scans float32 (the same bits as the widened data's). Positions are flat in ``src``."""
    over, under, targets = bounds(thr)
    tiny = under >= 0
    found = np.empty(N_KINDS, np.int64)
    buf = np.empty(SUB, np.float32)
    bufu = buf.view(np.uint32)
    z = splat(0.0)
    for r in range(rows):
        s = r * n
        e = s + n
        k = np.float32(0)  # the shift: the row's first finite value
        for a in range(s, e, SUB):
            b = a + SUB if a + SUB < e else e
            _widen(src, table, a, b, buf, bufu)
            q = -1
            for i in range(b - a):
                if (buf[i] - buf[i]) == 0:
                    q = i
                    break
            if q >= 0:
                k = buf[q]
                break
        r1 = z
        r2 = z
        lo = splat(np.float32(np.inf))
        hi = splat(np.float32(-np.inf))
        c = np.zeros(3, np.int64)
        for a in range(s, e, SUB):
            b = a + SUB if a + SUB < e else e
            _widen(src, table, a, b, buf, bufu)
            lanes = _pass(buf, 0, b - a, k, tiny)
            got = _settle(buf, 0, b - a, k, a, lanes, thr, over, under, targets, found, counts, locs, vals, nlocs)  # fmt: skip
            r1, r2, lo, hi = _added(r1, r2, lo, hi, c, got)
        shift[r] = k
        s1[r] = fold(r1)
        s2[r] = fold(r2)
        mn[r] = least(lo)
        mx[r] = greatest(hi)
        cnan[r] += c[0]
        cpos[r] += c[1]
        cneg[r] += c[2]
