"""A report's per-slice columns from the merged slice statistics of a scan by axis: every
slice in order, its moments finished by the ``slice_columns`` kernel (or taken as they are
when the scan finished every slice in its canvas), written over the statistics when they
are spent (``consume``)."""

from __future__ import annotations

import numpy as np

from . import dispatch
from .parts import in_parts
from .summary import SliceStats, every_slice, finished_flags, join_slices


def slice_columns(
    runs: list[SliceStats] | None, size: int, consume: bool = False, threads: int | None = None
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, np.ndarray] | None]:
    """The columns ``(nan, posinf, neginf, count, mean, std, min, max, max_z)`` of ``size``
    slices from the merged ``runs`` (disjoint, in slice order), and the flagged slices'
    ``(indices, bits)`` when the scan found them already (every slice finished in its
    canvas: ``SliceStats.finished``), else None. With ``consume`` the runs are spent: the
    columns are written over their own arrays where they fit (1e5 slices' fresh columns cost
    more than the kernel that fills them). ``threads``: at most this many cores."""
    stats = join_slices(runs) if runs else None
    done = finished_flags(runs, stats, size) if consume and runs else None
    if done is not None:
        at, bits, empty = done
        if empty:  # slices without a finite value
            gone = np.flatnonzero(stats.n == 0)
            for c in (stats.mean, stats.std, stats.min, stats.max):
                c[gone] = np.nan
        cols = (stats.nan, stats.posinf, stats.neginf, stats.n, stats.mean, stats.std)
        return (*cols, stats.min, stats.max, stats.spare()), (at, bits)
    full = every_slice(stats, size)
    if consume or full is not stats:  # each slice's inputs are read before its outputs
        z = full.spare() if consume else None
        z = np.empty(size) if z is None else z
        mean, std, mn, mx = full.mean, full.std, full.min, full.max
    else:
        mean, std, mn, mx, z = (np.empty(size) for _ in range(5))
    ins, outs = (full.n, full.mean, full.std, full.min, full.max), (mean, std, mn, mx, z)
    kernel = dispatch.pick("slice_columns", np.float64, size == 1)
    in_parts(lambda a, b: kernel(*(c[a:b] for c in ins + outs)), size, threads)
    return (full.nan, full.posinf, full.neginf, full.n, mean, std, mn, mx, z), None
