"""The per-row scan: each row's counts and shifted sums in one pass, and the blocks where
the first positions of what it found lie.

A plain scan is one row (or the parts of a run of regions, each a row); ``by`` on the
slices that are rows of the block (``by=0`` on C-ordered data) is many. Row ``r`` holds
``x[r * n : (r + 1) * n]``.

What a row's statistics are, bit for bit (``twins.scan_rows`` does the same in NumPy):

- the shift ``k``: the row's first finite value (0 when it has none);
- ``d = float64(v) - float64(k)`` for each finite ``v`` (0.0 for the others);
- the row in sub-blocks of ``SUB`` values, each summed in ``L`` lanes from 0.0
  (``lanes``: lane ``j`` takes the values at ``j``, ``j + L``, ...; the last sub-block's
  missing values are 0.0); the row's lanes are the sub-blocks' added in order to 0.0;
  ``s1`` is their ``fold``; ``s2`` the same of ``d * d``;
- the extrema of the finite values (+inf and -inf when there is none).

How it stays fast: one branch-free pass over each sub-block (four side by side in long
rows) takes the sums of every value, the extrema and the smallest non-zero magnitude. A NaN
or inf makes the sums non-finite, so finite sums and extrema and magnitudes inside the cast
thresholds prove the sub-block clean. Only a sub-block that is not is read again: its sums
over its finite values and its non-finite values counted (``_masked``), its cast risks
counted (``_risks``), all in lanes. Positions are not looked for here: a sub-block holding
a kind whose first positions are still wanted is listed, and the listed sub-blocks are
looked into afterwards, in order (``compute.positions.record_positions``, NumPy: a few of them).

Compile time is the user's time: each function here is compiled on its own and linked
into its callers, so there are few of them, without NumPy allocations or the scalar
``min``/``max`` builtins (each of those compiles a function of its own).
"""

from __future__ import annotations

import numpy as np

from ..model.cast_forms import extrema_bounds
from ..model.kinds import (
    N_KINDS,
    SLOT_NAN,
    SLOT_NEGINF,
    SLOT_OVERFLOW,
    SLOT_POSINF,
    SLOT_UNDERFLOW,
    SLOTS_PER_TARGET,
)
from ..model.stats import SUB
from .jit import helper, kernel
from .lanes import (
    L,
    add,
    anyof,
    below,
    both,
    eq,
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

assert SUB % L == 0
# short rows at least this long are read four side by side (``_short4``); shorter ones, one
# from each quarter of the block in turn (rows of 100 float32: 4x faster than side by side)
SIDE_BY_SIDE = 768
# the counter slots of the kinds (``model.kinds``) as int64 globals, constants to numba:
# literal arguments would compile ``_found`` once each. Cast target ``t``'s slots are
# ``_OVERFLOW + _PER_TARGET * t`` and ``_UNDERFLOW + _PER_TARGET * t``.
_NAN, _POSINF, _NEGINF = np.int64(SLOT_NAN), np.int64(SLOT_POSINF), np.int64(SLOT_NEGINF)
_OVERFLOW, _UNDERFLOW = np.int64(SLOT_OVERFLOW), np.int64(SLOT_UNDERFLOW)
_PER_TARGET = np.int64(SLOTS_PER_TARGET)
# ``(over, under, targets)`` of a scan's cast thresholds: the extrema form's bounds
bounds = helper(extrema_bounds)


@helper(forceinline=True)
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


@helper(forceinline=True)
def _ends(a1, a2, mn, mx, mz, k, over, under, tiny):
    """A short row's results from its fast pass's lanes: ``(s1, s2, min, max, clean)``,
    clean when its first value ``k`` and its sums are finite, its extrema inside the
    overflow thresholds and, with ``tiny``, no magnitude at or under ``under``."""
    lo, hi = least(mn), greatest(mx)
    ok = ((k - k) == 0) & (lo > -over) & (hi < over) & (not anyof(negate(finite(a1))))
    if tiny:
        ok = ok & (least(mz) > under)
    return fold(a1), fold(a2), lo, hi, ok  # 0.0 + a1: a1, as the row's lanes would be


@helper
def _short4(x, s, n, k, over, under, tiny):
    """``_ends`` of the passes of four rows of ``n`` values (offsets ``s``, shifts ``k``: 4-tuples),
    side by side in one loop: four chains of additions and four streams of reads at once,
    where one row's additions wait for its last reads and the next row's reads queue
    behind them."""
    T = x.dtype.type
    z = splat(0.0)
    inf = splat(T(np.inf))
    ninf = splat(T(-np.inf))
    zero = splat(T(0))
    k0, k1, k2, k3 = splat(np.float64(k[0])), splat(np.float64(k[1])), splat(np.float64(k[2])), splat(np.float64(k[3]))  # fmt: skip
    a1, b1, c1, d1 = z, z, z, z
    a2, b2, c2, d2 = z, z, z, z
    amn, bmn, cmn, dmn = inf, inf, inf, inf
    amx, bmx, cmx, dmx = ninf, ninf, ninf, ninf
    amz, bmz, cmz, dmz = inf, inf, inf, inf
    full = n // L * L
    for i in range(0, n, L):
        if i < full:
            v, w, y, q = load(x, s[0] + i), load(x, s[1] + i), load(x, s[2] + i), load(x, s[3] + i)
        else:
            v = load_part(x, s[0] + i, n - i, k[0])
            w = load_part(x, s[1] + i, n - i, k[1])
            y = load_part(x, s[2] + i, n - i, k[2])
            q = load_part(x, s[3] + i, n - i, k[3])
        d = sub(wide(v), k0)
        a1, a2 = add(a1, d), add(a2, mul(d, d))
        d = sub(wide(w), k1)
        b1, b2 = add(b1, d), add(b2, mul(d, d))
        d = sub(wide(y), k2)
        c1, c2 = add(c1, d), add(c2, mul(d, d))
        d = sub(wide(q), k3)
        d1, d2 = add(d1, d), add(d2, mul(d, d))
        amn, bmn, cmn, dmn = vmin(amn, v), vmin(bmn, w), vmin(cmn, y), vmin(dmn, q)
        amx, bmx, cmx, dmx = vmax(amx, v), vmax(bmx, w), vmax(cmx, y), vmax(dmx, q)
        if tiny:
            m = vabs(v)
            amz = vmin(amz, select(gt(m, zero), m, inf))
            m = vabs(w)
            bmz = vmin(bmz, select(gt(m, zero), m, inf))
            m = vabs(y)
            cmz = vmin(cmz, select(gt(m, zero), m, inf))
            m = vabs(q)
            dmz = vmin(dmz, select(gt(m, zero), m, inf))
    return (
        _ends(a1, a2, amn, amx, amz, k[0], over, under, tiny),
        _ends(b1, b2, bmn, bmx, bmz, k[1], over, under, tiny),
        _ends(c1, c2, cmn, cmx, cmz, k[2], over, under, tiny),
        _ends(d1, d2, dmn, dmx, dmz, k[3], over, under, tiny),
    )


@helper(forceinline=True)
def _put(r, k, ends, shift, s1, s2, mn, mx):
    """A clean short row's results written; whether it was clean."""
    a, b, lo, hi, ok = ends
    if ok:
        shift[r] = k
        s1[r] = a
        s2[r] = b
        mn[r] = lo
        mx[r] = hi
    return ok


@helper
def _masked(x, a, b, k):
    """``_pass`` over the finite values of ``x[a:b]`` alone, and the counts of NaN, +inf
    and -inf there (a sub-block holding some)."""
    T = x.dtype.type
    kk = splat(np.float64(k))
    z = splat(0.0)
    s1 = z
    s2 = z
    inf = splat(T(np.inf))
    ninf = splat(T(-np.inf))
    mn = inf
    mx = ninf
    mz = inf
    zero = splat(T(0))
    zi = splat(np.int32(0))
    cn = zi
    cp = zi
    cg = zi
    for i in range(a, b, L):
        m = b - i if b - i < L else L
        inside = below(m)
        v = load(x, i) if m == L else load_part(x, i, m, k)
        f = both(finite(v), inside)
        d = select(f, sub(wide(v), kk), z)
        s1 = add(s1, d)
        s2 = add(s2, mul(d, d))
        mn = vmin(mn, select(f, v, inf))
        mx = vmax(mx, select(f, v, ninf))
        g = vabs(v)
        mz = vmin(mz, select(both(f, gt(g, zero)), g, inf))
        cn = add(cn, ones(both(ne(v, v), inside)))
        cp = add(cp, ones(both(eq(v, inf), inside)))
        cg = add(cg, ones(both(eq(v, ninf), inside)))
    return s1, s2, mn, mx, mz, fold(cn), fold(cp), fold(cg)


@helper
def _risks(x, a, b, over, under):
    """The values of ``x[a:b]`` one cast target overflows (finite, ``|v| >= over``) and
    underflows (``0 < |v| <= under``)."""
    T = x.dtype.type
    o = splat(over)
    u = splat(under)
    zero = splat(T(0))
    co = splat(np.int32(0))
    cu = co
    for i in range(a, b, L):
        v = load(x, i) if i + L <= b else load_part(x, i, b - i, T(0))  # 0: neither
        m = vabs(v)
        co = add(co, ones(both(ge(m, o), finite(v))))
        cu = add(cu, ones(both(le(m, u), gt(m, zero))))
    return fold(co), fold(cu)


@helper
def _found(counts, seen, kind, c, cap):
    """``c`` values of ``kind`` found: counted; whether positions of theirs are still
    wanted (``seen``: those counted before in this call)."""
    counts[kind] += c
    wanted = c > 0 and seen[kind] < cap
    seen[kind] += c
    return wanted


@helper
def _settle(x, a, b, k, p0, lanes, thr, over, under, targets, counts, cap, seen, blocks, m):  # fmt: skip
    """A sub-block ``x[a:b]`` (its first value at position ``p0``) after its fast pass
    (``lanes``): taken again over its finite values when its sums are not finite, its cast
    risks counted when its extrema or smallest magnitude reach a threshold, and listed in
    ``blocks`` (``[start, stop, p0]`` at column ``m``) when it holds a kind whose positions
    are still wanted. Returns its lanes, its NaN, +inf, -inf counts and ``m`` after it."""
    s1, s2, mn, mx, mz = lanes
    c0, c1, c2 = np.int64(0), np.int64(0), np.int64(0)
    if anyof(negate(finite(s1))):
        s1, s2, mn, mx, mz, c0, c1, c2 = _masked(x, a, b, k)
    listed = _found(counts, seen, _NAN, c0, cap)
    listed |= _found(counts, seen, _POSINF, c1, cap)
    listed |= _found(counts, seen, _NEGINF, c2, cap)
    if least(mn) <= -over or greatest(mx) >= over or least(mz) <= under:
        for t in range(targets):
            co, cu = _risks(x, a, b, thr[2 * t], thr[2 * t + 1])
            listed |= _found(counts, seen, _OVERFLOW + _PER_TARGET * t, co, cap)
            listed |= _found(counts, seen, _UNDERFLOW + _PER_TARGET * t, cu, cap)
    if listed:
        blocks[0, m] = a
        blocks[1, m] = b
        blocks[2, m] = p0
        m += 1
    return s1, s2, mn, mx, c0, c1, c2, m


@helper(forceinline=True)
def _end_row(r, k, r1, r2, lo, hi, c0, c1, c2, shift, s1, s2, mn, mx, cnan, cpos, cneg):
    """A row's results written from its lanes (sums, extrema) and its non-finite counts."""
    shift[r] = k
    s1[r] = fold(r1)
    s2[r] = fold(r2)
    mn[r] = least(lo)
    mx[r] = greatest(hi)
    cnan[r] += c0
    cpos[r] += c1
    cneg[r] += c2


@helper
def _row_start(seen):
    for kind in range(N_KINDS):
        seen[kind] = 0


@helper
def _row(x, r, n, thr, over, under, targets, tiny, counts, cap, seen, blocks, m, shift, s1, s2, mn, mx, cnan, cpos, cneg):  # fmt: skip
    """Row ``r`` of ``scan_rows``, whatever it holds: its sub-blocks four at a time while
    they are clean, else one by one (``_settle``). Returns ``m`` after its listed
    sub-blocks."""
    T = x.dtype.type
    s = r * n
    e = s + n
    k = T(0)  # the shift: the row's first finite value
    for i in range(s, e):
        if (x[i] - x[i]) == 0:
            k = x[i]
            break
    r1 = splat(0.0)
    r2 = r1
    lo = splat(T(np.inf))
    hi = splat(T(-np.inf))
    c0, c1, c2 = np.int64(0), np.int64(0), np.int64(0)
    a = s
    while a < e:
        if a + 4 * SUB <= e:
            p1, p2, qmn, qmx, qmz = _pass4(x, a, k, tiny)
            clean = least(qmn) > -over and greatest(qmx) < over and least(qmz) > under
            # a NaN or inf in a sub-block's sums makes their sum one too (a sum that
            # overflows only sends the four to be taken one by one)
            clean = clean and not anyof(negate(finite(add(add(p1[0], p1[1]), add(p1[2], p1[3])))))  # fmt: skip
            if clean:  # the four sub-blocks' lanes, in order
                r1 = add(add(add(add(r1, p1[0]), p1[1]), p1[2]), p1[3])
                r2 = add(add(add(add(r2, p2[0]), p2[1]), p2[2]), p2[3])
                lo = vmin(lo, qmn)
                hi = vmax(hi, qmx)
                a += 4 * SUB
                continue
            stop = a + 4 * SUB  # something to look at: each sub-block alone
        else:
            stop = e
        while a < stop:
            b = a + SUB if a + SUB < e else e
            a1, a2, smn, smx, smz = _pass(x, a, b, k, tiny)
            n0, n1, n2 = np.int64(0), np.int64(0), np.int64(0)
            clean = least(smn) > -over and greatest(smx) < over and least(smz) > under
            if not (clean and not anyof(negate(finite(a1)))):  # something to look at
                a1, a2, smn, smx, n0, n1, n2, m = _settle(
                    x, a, b, k, a, (a1, a2, smn, smx, smz), thr, over, under, targets,
                    counts, cap, seen, blocks, m,
                )  # fmt: skip
            r1 = add(r1, a1)
            r2 = add(r2, a2)
            lo = vmin(lo, smn)
            hi = vmax(hi, smx)
            c0 += n0
            c1 += n1
            c2 += n2
            a = b
    _end_row(r, k, r1, r2, lo, hi, c0, c1, c2, shift, s1, s2, mn, mx, cnan, cpos, cneg)
    return m


@kernel
def scan_rows(x, rows, n, thr, counts, cap, seen, blocks, shift, s1, s2, mn, mx, cnan, cpos, cneg):  # fmt: skip
    """Scan ``rows`` rows of ``n`` values of the flat block ``x`` (float32 or float64).

    Counts of each kind are added to ``counts`` (NaN, +inf, -inf, then overflow and
    underflow per cast slot of ``thr``: ``(over, under)`` thresholds in ``x``'s type,
    ``(inf, -1)`` for an unused slot); per row, its statistics (module docstring) into
    ``shift``, ``s1``, ``s2``, ``mn``, ``mx`` and its non-finite counts added to ``cnan``,
    ``cpos``, ``cneg``. The sub-blocks holding the first ``cap`` values of each kind are
    listed in ``blocks`` (int64 ``(3, m)``: start, stop, first position), in order;
    returns ``m``. ``seen``: int64 scratch of ``N_KINDS``.

    Short rows (one sub-block) are read four at a time, a row from each quarter of the block
    (``_short4``; rows under ``SIDE_BY_SIDE`` values one after another), each written
    when it is clean; the others are taken after, in order, as long rows are (``_row``)."""
    over, under, targets = bounds(thr)
    tiny = under >= 0
    _row_start(seen)
    m = np.int64(0)
    if n > SUB or rows < 4:
        for r in range(rows):
            m = _row(x, r, n, thr, over, under, targets, tiny, counts, cap, seen, blocks, m, shift, s1, s2, mn, mx, cnan, cpos, cneg)  # fmt: skip
        return m
    done = np.empty(rows, np.bool_)
    q = rows // 4
    if n < SIDE_BY_SIDE:  # a row of each quarter of the block in turn: four streams of reads
        for t in range(rows):
            r = t // 4 + (t % 4) * q if t < 4 * q else t
            s = r * n
            k1 = x[s]
            done[r] = False
            if not (k1 - k1) == 0:  # the first value is not finite: the row is taken after
                continue
            a1, a2, smn, smx, smz = _pass(x, s, s + n, k1, tiny)
            lo, hi = least(smn), greatest(smx)
            if not (lo > -over and hi < over) or anyof(negate(finite(a1))):
                continue
            if tiny and not least(smz) > under:
                continue
            shift[r] = k1
            s1[r] = fold(a1)  # 0.0 + a1: a1, as the row's lanes would be
            s2[r] = fold(a2)
            mn[r] = lo
            mx[r] = hi
            done[r] = True
        q = 0
    else:
        for r in range(4 * q, rows):  # the last rows (at most three) are taken as long ones
            done[r] = False
    for i in range(q):  # row i of each quarter of the block, side by side in one loop
        rs = (i, i + q, i + 2 * q, i + 3 * q)
        o = (rs[0] * n, rs[1] * n, rs[2] * n, rs[3] * n)
        k = (x[o[0]], x[o[1]], x[o[2]], x[o[3]])
        e0, e1, e2, e3 = _short4(x, o, n, k, over, under, tiny)
        done[rs[0]] = _put(rs[0], k[0], e0, shift, s1, s2, mn, mx)
        done[rs[1]] = _put(rs[1], k[1], e1, shift, s1, s2, mn, mx)
        done[rs[2]] = _put(rs[2], k[2], e2, shift, s1, s2, mn, mx)
        done[rs[3]] = _put(rs[3], k[3], e3, shift, s1, s2, mn, mx)
    for r in range(rows):
        if not done[r]:
            m = _row(x, r, n, thr, over, under, targets, tiny, counts, cap, seen, blocks, m, shift, s1, s2, mn, mx, cnan, cpos, cneg)  # fmt: skip
    return m


@helper
def _widen(src, table, s, e, out, outu):
    """``src[s:e]``, bfloat16 or float8 bits, as float32 values in ``out[:e - s]``
    (``outu``: the same memory as uint32): bfloat16 is float32's top half; a float8 value
    is looked up in ``table``, its 256 values."""
    part = src[s:e]  # indexed from 0: ``src[s + i]`` kept LLVM from vectorizing (4x slower)
    if table.shape[0] == 0:
        for i in range(part.shape[0]):
            outu[i] = np.uint32(part[i]) << np.uint32(16)
    else:
        for i in range(part.shape[0]):
            out[i] = table[part[i]]


@kernel
def scan_narrow(src, table, rows, n, thr, counts, cap, seen, blocks, shift, s1, s2, mn, mx, cnan, cpos, cneg, buf):  # fmt: skip
    """``scan_rows`` over bfloat16 or float8 data: ``src``, their bits (uint16 or uint8,
    flat), each sub-block widened to float32 (``_widen``; ``table``: float8's values,
    empty for bfloat16) in ``buf`` (``SUB`` float32, in cache), then scanned as
    ``scan_rows`` scans float32 (the same bits as the widened data's). Listed sub-blocks
    are spans of ``src``."""
    over, under, targets = bounds(thr)
    tiny = under >= 0
    _row_start(seen)
    m = np.int64(0)
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
        c0, c1, c2 = np.int64(0), np.int64(0), np.int64(0)
        for a in range(s, e, SUB):
            b = a + SUB if a + SUB < e else e
            _widen(src, table, a, b, buf, bufu)
            lanes = _pass(buf, 0, b - a, k, tiny)
            a1, a2, smn, smx, n0, n1, n2, mm = _settle(
                buf, 0, b - a, k, a, lanes, thr, over, under, targets, counts, cap, seen, blocks, m
            )
            if mm > m:  # the span of src, not of the buffer
                blocks[0, m] = a
                blocks[1, m] = b
            m = mm
            r1 = add(r1, a1)
            r2 = add(r2, a2)
            lo = vmin(lo, smn)
            hi = vmax(hi, smx)
            c0 += n0
            c1 += n1
            c2 += n2
        _end_row(r, k, r1, r2, lo, hi, c0, c1, c2, shift, s1, s2, mn, mx, cnan, cpos, cneg)
    return m
