"""Small kernels beside the scans: the guard's check of a batch and a scaled cast's
risks."""

from __future__ import annotations

import numpy as np

from .jit import kernel
from .lanes import (
    L,
    anyof,
    both,
    either,
    finite,
    ge,
    gt,
    le,
    load,
    load_part,
    negate,
    splat,
    vabs,
)  # fmt: skip
from .rows import bounds

RUN = 256  # values scaled_counts counts at once before it looks for positions


@kernel
def quick_check(x, thr):
    """True when the 1-D float32 or float64 block ``x`` holds no non-finite value and no
    value at risk for the cast thresholds ``thr`` (no sums, no positions: the guard's
    check of each batch)."""
    over, under, _ = bounds(thr)
    o = splat(over)
    u = splat(under)
    zero = splat(x.dtype.type(0))
    n = x.shape[0]
    for i in range(0, n, L):
        v = load(x, i) if i + L <= n else load_part(x, i, n - i, x.dtype.type(0))
        a = vabs(v)
        bad = either(negate(finite(v)), ge(a, o))
        if anyof(either(bad, both(le(a, u), gt(a, zero)))):
            return False
    return True


@kernel
def scaled_counts(x, lim, counts, locs, nlocs):
    """A scaled cast's risks over ``x`` (float32 or float64, flat), on ``f = |float32(v)|``
    against ``lim``, float32 ``(over, under, normal)`` such that the scaled value ``f *
    scale`` (in float32) overflows when ``f >= over``, flushes to zero when ``f <= under``
    and is subnormal below ``normal`` (``cast_forms.scaled_bounds``: the product is monotone in
    ``f``). Adds ``(overflow, underflow, subnormal, nonzero)`` to ``counts`` over finite
    non-zero values, and records the first positions of overflows (row 0 of ``locs``) and
    underflows (row 1). Runs of ``RUN`` values are counted branch-free and taken again for
    positions only when they hold some that are still wanted."""
    over, under, normal = lim[0], lim[1], lim[2]
    cap = locs.shape[1]
    n = x.shape[0]
    for c in range(0, n, RUN):
        e = c + RUN if c + RUN < n else n
        co = 0
        cu = 0
        cs = 0
        cn = 0
        for i in range(c, e):
            v = x[i]
            f = abs(np.float32(v))
            nz = ((v - v) == 0) & (v != 0)
            o = f >= over
            co += nz & o
            cu += nz & ~o & (f <= under)
            cs += nz & ~o & (f > under) & (f < normal)
            cn += nz
        counts[0] += co
        counts[1] += cu
        counts[2] += cs
        counts[3] += cn
        if (co > 0 and nlocs[0] < cap) or (cu > 0 and nlocs[1] < cap):
            for i in range(c, e):
                v = x[i]
                f = abs(np.float32(v))
                if (v - v) == 0 and v != 0:
                    row = 0 if f >= over else (1 if f <= under else -1)
                    if row >= 0 and nlocs[row] < cap:
                        locs[row, nlocs[row]] = i
                        nlocs[row] += 1
