"""The per-column scan: each column's counts and shifted sums, the rows read in order.

The slices are the columns of a block of ``rows`` rows of ``cols`` values, row ``r`` at
``x[r * pitch : r * pitch + cols]`` (``by=0`` on C-ordered data; a box of an array read
in place has ``pitch > cols``). Each row is read once, in memory order, and added to the
accumulators of its columns ``L`` at a time: the lanes here are columns, so each column's
sums are plain sums down the column.

What a column's statistics are, bit for bit (``twins.scan_cols`` does the same in NumPy):

- the shift ``k``: the column's first finite value (0 when it has none);
- ``d = float64(v) - float64(k)`` for each finite ``v`` (0.0 for the others);
- the rows in chunks of ``CHUNK`` rows; a chunk's sums of ``d`` and ``d * d`` are added
  row after row from 0.0, and the column's are the chunks' added in order to 0.0;
- the extrema of the finite values (+inf and -inf when there is none).

Columns are taken in tiles of ``TILE`` (their accumulators stay in L1), a tile's rows a
chunk at a time. A chunk is added at once (``_add_chunk``: no test but the loop's), and
checked after (``_chunk_clean``): finite sums and extrema inside the overflow thresholds
prove it clean (a NaN or inf makes a sum non-finite). A chunk that is not clean is added
again from its first row on the exact path (``_add_rows``): per column its finite values
only and its NaN and inf counts, every kind counted and the first positions recorded, in C
order within the tile (tile after tile past the first).
"""

from __future__ import annotations

import numpy as np

from ..model.stats import CHUNK, TILE
from .jit import helper, kernel
from .lanes import (
    L,
    add,
    anyof,
    below,
    both,
    either,
    eq,
    finite,
    fold,
    ge,
    gt,
    le,
    load,
    load_part,
    mul,
    ne,
    negate,
    ones,
    prefetch,
    select,
    splat,
    store,
    sub,
    vabs,
    vmax,
    vmin,
    wide,
)  # fmt: skip
from .rows import (
    _NAN,
    _NEGINF,
    _OVERFLOW,
    _PER_TARGET,
    _POSINF,
    _UNDERFLOW,
    _found,
    _risks,
    _row_start,
    bounds,
)

AHEAD = 4096  # bytes of rows asked for ahead of the reads: 4 to 16 rows (a wide tile's rows are pages of their own)
assert TILE % L == 0  # a tile's chunk accumulators (32 KB) stay in L1
# the rows of the float64 scratch (``kernels.SCRATCH``: lanes past a tile's last column);
# the int32 scratch (``kernels.COUNTS``) holds NaN, +inf, -inf per column, a chunk's
# underflows
K, T1, T2, TMN, TMX, C1, C2, CMN, CMX = range(9)


@helper(forceinline=True)
def _take(v, kk, a1, a2, lo, hi, cnt, tiny, u, zero):
    """One row's values ``v`` (float64 lanes) into a group of columns' accumulators."""
    d = sub(v, kk)
    a1 = add(a1, d)
    a2 = add(a2, mul(d, d))
    lo = vmin(lo, v)
    hi = vmax(hi, v)
    if tiny:
        m = vabs(v)
        cnt = add(cnt, ones(both(le(m, u), gt(m, zero))))
    return a1, a2, lo, hi, cnt


@helper
def _add_chunk(x, rows, r0, r1, pitch, c, w, k, c1, c2, cmn, cmx, tiny, under, cu):
    """Rows ``r0:r1`` of the tile's ``w`` columns from ``c`` added, every value, to the
    chunk's sums ``c1``, ``c2`` and extrema ``cmn``, ``cmx`` (shifts ``k``); with
    ``tiny``, ``cu`` (int32) counts ``0 < |v| <= under`` per column. Four rows at a time:
    each column's accumulators are read and written once for the four (the same
    additions, in row order: the same bits). Lanes past the tile's last column hold
    what no check and no result reads."""
    T = x.dtype.type
    u = splat(np.float64(under))
    zero = splat(0.0)
    full = w // L * L
    wide_lines = x.itemsize * L > 64
    ahead = AHEAD // (w * x.itemsize)
    ahead = 4 if ahead < 4 else (16 if ahead > 16 else ahead)
    r = r0
    while r < r1:
        four = r + 4 <= r1
        o0 = r * pitch + c
        o1, o2, o3 = o0 + pitch, o0 + 2 * pitch, o0 + 3 * pitch
        p = r + ahead  # past the tile's last row: the next tile's first rows
        p0 = p * pitch + c if p < rows else (p - rows) * pitch + c + w
        for j in range(0, w, L):
            prefetch(x, p0 + j)
            prefetch(x, p0 + pitch + j)
            prefetch(x, p0 + 2 * pitch + j)
            prefetch(x, p0 + 3 * pitch + j)
            if wide_lines:
                prefetch(x, p0 + j + L // 2)
                prefetch(x, p0 + pitch + j + L // 2)
                prefetch(x, p0 + 2 * pitch + j + L // 2)
                prefetch(x, p0 + 3 * pitch + j + L // 2)
            kk = load(k, j)
            a1, a2, lo, hi, cnt = load(c1, j), load(c2, j), load(cmn, j), load(cmx, j), load(cu, j)
            if j < full:
                v = wide(load(x, o0 + j))
            else:
                v = wide(load_part(x, o0 + j, w - j, T(0)))
            a1, a2, lo, hi, cnt = _take(v, kk, a1, a2, lo, hi, cnt, tiny, u, zero)
            if four and j < full:
                v1, v2, v3 = wide(load(x, o1 + j)), wide(load(x, o2 + j)), wide(load(x, o3 + j))
                a1, a2, lo, hi, cnt = _take(v1, kk, a1, a2, lo, hi, cnt, tiny, u, zero)
                a1, a2, lo, hi, cnt = _take(v2, kk, a1, a2, lo, hi, cnt, tiny, u, zero)
                a1, a2, lo, hi, cnt = _take(v3, kk, a1, a2, lo, hi, cnt, tiny, u, zero)
            elif four:
                v1 = wide(load_part(x, o1 + j, w - j, T(0)))
                v2 = wide(load_part(x, o2 + j, w - j, T(0)))
                v3 = wide(load_part(x, o3 + j, w - j, T(0)))
                a1, a2, lo, hi, cnt = _take(v1, kk, a1, a2, lo, hi, cnt, tiny, u, zero)
                a1, a2, lo, hi, cnt = _take(v2, kk, a1, a2, lo, hi, cnt, tiny, u, zero)
                a1, a2, lo, hi, cnt = _take(v3, kk, a1, a2, lo, hi, cnt, tiny, u, zero)
            store(c1, j, a1)
            store(c2, j, a2)
            store(cmn, j, lo)
            store(cmx, j, hi)
            store(cu, j, cnt)
        r += 4 if four else 1


@helper
def _chunk_clean(w, c1, cmn, cmx, cu, over, tiny):
    """Whether the chunk just added to the tile's ``w`` columns is clean: finite sums,
    extrema inside the overflow thresholds and, with ``tiny``, no underflow."""
    o = splat(np.float64(over))
    no = splat(-np.float64(over))
    zi = splat(np.int32(0))
    bad = False
    for j in range(0, w, L):
        b = either(negate(finite(load(c1, j))), ge(load(cmx, j), o))
        b = either(b, le(load(cmn, j), no))
        if tiny:
            b = either(b, gt(load(cu, j), zi))
        bad |= anyof(both(b, below(w - j)))
    return not bad


@helper
def _add_rows(x, r0, r1, pitch, c, w, cols, k, c1, c2, cmn, cmx, cnt, thr, targets, over, under, counts, cap, seen, blocks, m):  # fmt: skip
    """Rows ``r0:r1`` of the tile on the exact path: per column its finite values added to
    the chunk's sums and extrema, its NaN, +inf and -inf counted in ``cnt`` (int32 rows
    0-2); every kind counted into ``counts``, and each row's span listed in ``blocks``
    (``rows.scan_rows``'s) when it holds a kind whose first positions (``r * cols +
    column``) are still wanted. Returns ``m`` after them."""
    T = x.dtype.type
    pinf = splat(np.inf)
    ninf = splat(-np.inf)
    zero = splat(0.0)
    zi = splat(np.int32(0))
    ov = splat(np.float64(over))
    un = splat(np.float64(under))
    cn, cp, cg = cnt[0], cnt[1], cnt[2]
    for r in range(r0, r1):
        o = r * pitch + c
        risky = False
        rn, rp, rg = zi, zi, zi
        for j in range(0, w, L):
            kk = load(k, j)
            inside = below(w - j)
            v = wide(load(x, o + j)) if j + L <= w else wide(load_part(x, o + j, w - j, T(0)))
            f = both(finite(v), inside)
            d = select(f, sub(v, kk), zero)
            store(c1, j, add(load(c1, j), d))
            store(c2, j, add(load(c2, j), mul(d, d)))
            store(cmn, j, vmin(load(cmn, j), select(f, v, pinf)))
            store(cmx, j, vmax(load(cmx, j), select(f, v, ninf)))
            n0, n1, n2 = ones(both(ne(v, v), inside)), ones(eq(v, pinf)), ones(eq(v, ninf))
            store(cn, j, add(load(cn, j), n0))
            store(cp, j, add(load(cp, j), n1))
            store(cg, j, add(load(cg, j), n2))
            rn, rp, rg = add(rn, n0), add(rp, n1), add(rg, n2)
            g = vabs(v)
            risky |= anyof(both(either(ge(g, ov), both(le(g, un), gt(g, zero))), f))
        listed = _found(counts, seen, _NAN, fold(rn), cap)
        listed |= _found(counts, seen, _POSINF, fold(rp), cap)
        listed |= _found(counts, seen, _NEGINF, fold(rg), cap)
        if risky:
            for t in range(targets):
                co, cu = _risks(x, o, o + w, thr[2 * t], thr[2 * t + 1])
                listed |= _found(counts, seen, _OVERFLOW + _PER_TARGET * t, co, cap)
                listed |= _found(counts, seen, _UNDERFLOW + _PER_TARGET * t, cu, cap)
        if listed:
            blocks[0, m] = o
            blocks[1, m] = o + w
            blocks[2, m] = r * cols + c
            m += 1
    return m


@helper
def _shifts(x, rows, pitch, c, w, k, todo):
    """Each of the tile's columns' first finite value into ``k`` (0 for none): the first
    row, then row by row for the columns still without one (a region of NaN, as a chunk
    never written reads, is then read in memory order, not down each column)."""
    m = 0
    for j in range(w):
        v = x[c + j]
        if (v - v) == 0:
            k[j] = v
        else:
            k[j] = 0.0
            todo[m] = j
            m += 1
    r = 1
    while m > 0 and r < rows:
        o = r * pitch + c
        left = 0
        for i in range(m):
            j = todo[i]
            v = x[o + j]
            if (v - v) == 0:
                k[j] = v
            else:
                todo[left] = j
                left += 1
        m = left
        r += 1


@helper
def _reset(s1, s2, mn, mx, w):
    """The first ``w`` sums from 0.0 and extrema from +-inf."""
    for j in range(w):
        s1[j] = 0.0
        s2[j] = 0.0
        mn[j] = np.inf
        mx[j] = -np.inf


@kernel
def scan_cols(x, rows, cols, pitch, thr, counts, cap, seen, blocks, shift, s1, s2, mn, mx, cnan, cpos, cneg, sc, ci):  # fmt: skip
    """Scan a block of ``rows`` rows of ``cols`` values, row ``r`` at ``x[r * pitch :
    r * pitch + cols]`` (float32 or float64), keeping statistics per column.

    As ``rows.scan_rows`` with the slices along the columns: per column its statistics
    (module docstring) into ``shift``, ``s1``, ``s2``, ``mn``, ``mx`` and its non-finite
    counts added to ``cnan``, ``cpos``, ``cneg``; positions are flat indices of the
    ``(rows, cols)`` block. ``sc`` and ``ci``: scratch of shapes ``kernels.SCRATCH``
    (float64) and ``kernels.COUNTS`` (int32)."""
    over, under, targets = bounds(thr)
    tiny = under >= 0
    _row_start(seen)
    m = np.int64(0)
    k, t1, t2, tmn, tmx, c1, c2, cmn, cmx = sc[K], sc[T1], sc[T2], sc[TMN], sc[TMX], sc[C1], sc[C2], sc[CMN], sc[CMX]  # fmt: skip
    cu = ci[3]
    todo = np.empty(TILE, np.int64)
    for q in range(4):
        cq = ci[q]
        for j in range(TILE + L):
            cq[j] = 0
    one = rows <= CHUNK  # a tile's one chunk is its total (0.0 + a sum is the sum)
    a1, a2, amn, amx = (c1, c2, cmn, cmx) if one else (t1, t2, tmn, tmx)
    for c in range(0, cols, TILE):
        w = cols - c if cols - c < TILE else TILE
        if rows > 0:
            _shifts(x, rows, pitch, c, w, k, todo)
        for j in range(w, TILE + L):
            k[j] = 0.0
        if not one:
            _reset(t1, t2, tmn, tmx, w + L)
        dirty = False
        for r0 in range(0, rows, CHUNK):
            r1 = r0 + CHUNK if r0 + CHUNK < rows else rows
            _reset(c1, c2, cmn, cmx, w + L)
            _add_chunk(x, rows, r0, r1, pitch, c, w, k, c1, c2, cmn, cmx, tiny, under, cu)
            if not _chunk_clean(w, c1, cmn, cmx, cu, over, tiny):
                _reset(c1, c2, cmn, cmx, w + L)
                m = _add_rows(
                    x, r0, r1, pitch, c, w, cols, k, c1, c2, cmn, cmx, ci, thr, targets,
                    over, under, counts, cap, seen, blocks, m,
                )  # fmt: skip
                dirty = True
            if tiny:
                for j in range(w + L):
                    cu[j] = 0
            if not one:
                for j in range(0, w, L):
                    store(t1, j, add(load(t1, j), load(c1, j)))
                    store(t2, j, add(load(t2, j), load(c2, j)))
                    store(tmn, j, vmin(load(tmn, j), load(cmn, j)))
                    store(tmx, j, vmax(load(tmx, j), load(cmx, j)))
        for j in range(w):
            shift[c + j] = k[j]
            s1[c + j] = a1[j]
            s2[c + j] = a2[j]
            mn[c + j] = amn[j]
            mx[c + j] = amx[j]
        if dirty:  # the tile's NaN and inf counts (then zero again)
            for j in range(w):
                cnan[c + j] += ci[0, j]
                cpos[c + j] += ci[1, j]
                cneg[c + j] += ci[2, j]
                ci[0, j], ci[1, j], ci[2, j] = 0, 0, 0
    return m
