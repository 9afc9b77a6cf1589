"""Where the kinds are, in NumPy: the predicate of each counter slot as a mask
(``kind_mask``), the first positions of each kind in the spans a kernel listed
(``record_positions``), and a part's positions folded into its run's (``fold_part``).

Production code, not a twin: the kernels count, these find the few positions wanted after
them. The kernels' twins (``reference.twins``) keep their own form of the predicate, so
that the twin tests do not test this module against itself; ``tests/test_twins.py`` pins
``kind_mask`` to the kernels' counts.
"""

from __future__ import annotations

import numpy as np

from ..model import kinds
from ..model.cast_forms import float_form
from ..model.kinds import N_KINDS, slot_target


def kind_mask(x: np.ndarray, k: int, thr: np.ndarray) -> np.ndarray:
    """The mask of counter slot ``k`` over ``x``: NaN, +inf, -inf, then per cast target a
    finite ``|x| >= over`` (overflow) and ``0 < |x| <= under`` (underflow), thresholds
    ``thr`` as in the kernels: the NumPy form of their predicates."""
    cast = slot_target(k)
    if cast is None:
        if k == kinds.SLOT_NAN:
            return np.isnan(x)
        return x == (np.inf if k == kinds.SLOT_POSINF else -np.inf)
    kind, t = cast
    over, under = float_form(x, thr[2 * t], thr[2 * t + 1])
    return over if kind == "overflow:" else under


def _unused(k: int, thr: np.ndarray) -> bool:
    """Whether counter slot ``k`` counts nothing with thresholds ``thr`` (an unused target
    slot, or a target that cannot overflow or underflow)."""
    cast = slot_target(k)
    if cast is None:
        return False
    kind, t = cast
    return thr[2 * t] == np.inf if kind == "overflow:" else thr[2 * t + 1] < 0


def record_positions(values, blocks, m, thr, locs, vals, nlocs) -> None:
    """The first positions and values of each kind in the listed spans (a scan's
    ``blocks[:, :m]``: start, stop, first position), in order, up to the width of
    ``locs``; ``values(start, stop)``: the span's values as floats."""
    cap = locs.shape[1]
    for j in range(m):
        a, b, p0 = (int(v) for v in blocks[:, j])
        if (nlocs >= cap).all():
            return
        v = values(a, b)
        for k in range(N_KINDS):
            if nlocs[k] >= cap or _unused(k, thr):
                continue
            at = np.flatnonzero(kind_mask(v, k, thr))[: cap - nlocs[k]]
            if len(at):
                locs[k, nlocs[k] : nlocs[k] + len(at)] = p0 + at
                with np.errstate(invalid="ignore"):  # a float8 NaN pattern widened: signalling
                    vals[k, nlocs[k] : nlocs[k] + len(at)] = v[at]
                nlocs[k] += len(at)


def fold_part(offset, pc, pl, pv, pn, counts, locs, vals, nlocs) -> int:
    """A part's counts and positions folded into its run's (``parts.PartedScan``: a few
    small arrays a part, so no kernel)."""
    cap = locs.shape[1]
    counts += pc
    for k in range(N_KINDS):
        take = min(int(pn[k]), cap - int(nlocs[k]))
        if take > 0:
            locs[k, nlocs[k] : nlocs[k] + take] = offset + pl[k, :take]
            vals[k, nlocs[k] : nlocs[k] + take] = pv[k, :take]
            nlocs[k] += take
    return int(pc.sum())
