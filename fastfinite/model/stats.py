"""Two parts' (count, mean, std) combined into the whole's, Chan et al.'s formula, in one
place: ``chan`` on scalars, plain Python that the kernels compile as it is (``kernels.slices``
jits this very function: its Python and Numba forms are one definition), and ``combine``,
the same operations elementwise in NumPy (the twin of the kernels' loop over ``chan``, and
what summaries and reports merge with).

The standard deviation, not the sum of squared deviations, is what summaries keep: for
finite float64 data it always fits a float64 (it is at most half the range), where the sum
of squares of values near 1e308 does not. The spread is combined unscaled, and again scaled
by a power of two when a square overflows (or is too small to keep its digits, ``TINY``): a
scaled computation's answer, at no cost to data whose squares fit."""

from __future__ import annotations

import math

import numpy as np

# The squares of smaller magnitudes come near float64's subnormals (2**-1022) and lose their
# digits, down to 0: spreads that small are combined scaled as well.
TINY = 2.0**-480

# The totals over many slices are taken in blocks of this many (in L1 while the per-slice
# moments are finished), and the blocks combined in order by ``chan``.
SLICE_BLOCK = 512

# The order of the additions in every sum (the kernels and their NumPy twins follow it, so
# that both give the same bits on any machine): values summed in LANES lanes (lane j takes
# the values at j, j + LANES, ... in order from 0.0) and the lanes folded by halves; a row
# in sub-blocks of SUB values, each summed so, the sub-blocks' lanes added in order; a
# column's values added down the column in chunks of CHUNK rows, the chunks added in order.
# Columns are scanned in tiles of TILE: positions come in C order within each tile.
LANES = 16
SUB = 2048
CHUNK = 256
TILE = 1024


def combine(na, mean_a, std_a, nb, mean_b, std_b):
    """``(n, mean, std)`` of two disjoint parts, elementwise over arrays or on scalars (0-d
    results): ``chan`` elementwise, the same operations in the same order, so each element
    has ``chan``'s bits (``tests/test_chan.py`` pins them). It is the twin of the kernels'
    loop over ``chan`` (``reference.twins.fold_slices`` of ``kernels.fold_slices``), and
    what summaries and reports merge with. A part without values leaves the other as it is
    (both without: the first)."""
    na, nb = np.asarray(na), np.asarray(nb)
    ma, sa, mb, sb = (np.asarray(v, np.float64) for v in (mean_a, std_a, mean_b, std_b))
    with np.errstate(all="ignore"):
        n = na + nb
        fn = np.maximum(n, 1).astype(np.float64)
        wa, wb = na / fn, nb / fn
        delta = mb - ma
        mean = np.where(np.abs(delta) < np.inf, ma + delta * wb, ma * wa + mb * wb)
        s = np.sqrt(wa * sa * sa + wb * sb * sb + wa * wb * delta * delta)
        top = np.where(np.abs(ma) > np.abs(mb), np.abs(ma), np.abs(mb))
        top = np.where(top > sa, top, sa)
        top = np.where(top > sb, top, sb)
        scale = ~(s < np.inf) | ((s < TINY) & (top > 0))
        if scale.any():  # a square out of range: again, scaled by a power of two
            k = np.ldexp(1.0, np.frexp(top)[1] - 1)
            sa2, sb2, d = sa / k, sb / k, mb / k - ma / k
            s = np.where(scale, np.sqrt(wa * sa2 * sa2 + wb * sb2 * sb2 + wa * wb * d * d) * k, s)
    first, second = nb == 0, (na == 0) & (nb != 0)
    mean = np.where(first, ma, np.where(second, mb, mean))
    s = np.where(first, sa, np.where(second, sb, s))
    return n, mean, s


def scaled_moments(values: np.ndarray) -> tuple[float, float]:
    """The mean and std of finite values, computed on the values scaled by a power of two
    (no sum or square overflows, for any finite float64 data): the kernels' sums overflow
    for values near the float64 maximum, and such rows are taken again with this."""
    y = np.asarray(values, np.float64)
    k = np.ldexp(1.0, np.frexp(np.abs(y).max())[1] - 1)  # y / k < 2
    ys = y / k
    m = ys.mean()
    return float(m * k), float(np.sqrt(((ys - m) ** 2).mean()) * k)


def pow2(v: float) -> float:
    """A power of two at most ``v`` and above half of it: a scale that keeps squares in
    range (``2.0**1024`` would overflow)."""
    return math.ldexp(1.0, math.frexp(v)[1] - 1)


def chan(na, ma, sa, nb, mb, sb):
    """Chan et al.'s combination of two disjoint parts' ``(n, mean, std)`` on scalars, one
    operation after another: plain Python that the kernels compile as it is
    (``kernels.slices``: ``_chan = helper(chan)``), so that Python and the kernels give the
    same bits; ``combine`` is it elementwise. Counts are ints, the rest floats."""
    if nb == 0:
        return na, ma, sa
    if na == 0:
        return nb, mb, sb
    wa = na / (na + nb)
    wb = nb / (na + nb)
    delta = mb - ma
    if abs(delta) < math.inf:
        mean = ma + delta * wb
    else:  # means of opposite signs near the maximum
        mean = ma * wa + mb * wb
    s = math.sqrt(wa * sa * sa + wb * sb * sb + wa * wb * delta * delta)
    top = abs(ma) if abs(ma) > abs(mb) else abs(mb)
    top = top if top > sa else sa
    top = top if top > sb else sb
    if not s < math.inf or (s < TINY and top > 0):  # a square out of range
        k = math.ldexp(1.0, math.frexp(top)[1] - 1)  # pow2(top): plain math, for numba
        sa, sb, d = sa / k, sb / k, mb / k - ma / k
        s = math.sqrt(wa * sa * sa + wb * sb * sb + wa * wb * d * d) * k
    return na + nb, mean, s


def chan_fold(ns, means, stds) -> tuple:
    """``chan`` folded over parts pairwise, the parts without a value (``n == 0``) left
    out: the parts paired in order (the first with the second, the third with the fourth,
    an odd last one carried up as it is), the pairs' results paired again, to one;
    ``(n, mean, std)``, ``(0, 0.0, 0.0)`` for none. Each pairing's rounding meets values
    of like weight (a running fold adds a 10,000th member's moments to 9,999 members'),
    and a level of many pairs is taken at once by ``combine``, which has ``chan``'s bits
    (for counts under 2**53, which a float64 holds exactly):
    10,000 members fold in a millisecond, not in a Python loop of ten thousand steps."""
    ns = np.asarray(ns, np.int64)
    keep = ns != 0
    if keep.all():
        n, m, s = ns, np.asarray(means, np.float64), np.asarray(stds, np.float64)
    else:
        n = ns[keep]
        m, s = np.asarray(means, np.float64)[keep], np.asarray(stds, np.float64)[keep]
    while len(n) >= _LEVEL_AT_ONCE:
        half = len(n) // 2
        a, b = slice(0, 2 * half, 2), slice(1, 2 * half, 2)
        pn, pm, ps = combine(n[a], m[a], s[a], n[b], m[b], s[b])
        if len(n) % 2:
            pn, pm, ps = (np.append(p, q[-1]) for p, q in ((pn, n), (pm, m), (ps, s)))
        n, m, s = pn, pm, ps
    parts = list(zip(n.tolist(), m.tolist(), s.tolist()))
    while len(parts) > 1:
        paired = [chan(*parts[i], *parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        parts = paired + parts[-1:] if len(parts) % 2 else paired
    return parts[0] if parts else (0, 0.0, 0.0)


# Levels of at least this many parts are paired by ``combine`` (NumPy), shorter ones by
# ``chan`` (Python): the same bits, whichever is quicker.
_LEVEL_AT_ONCE = 64
