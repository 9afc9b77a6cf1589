"""Many small arrays of one dtype and shape (the files of a set, the ``.npy`` members of tar
shards) scanned together: stacked as the rows of one 2-D block, each row one array, through
the same per-row kernel (or twin) and per-slice moments a scan of each alone takes, so that
each row's statistics have the bits of its array's own scan (a whole-array scan is one row:
``summarize._scan``). No new kernel: ``scan_rows`` and ``finish_slices`` are those every
scan calls.

The kernel keeps each row's NaN and inf counts, and its statistics; a block that holds a
cast risk has its rows' counts of it taken by the predicate pinned to the kernels'
(``positions.kind_mask``). A row with findings gets its first positions as ``_scan``
looks for those a kernel did not keep (``found_summary``); a row whose sums overflowed or
are too small to keep their digits (``rescued``), or that holds no finite value, is to be
scanned again alone (``alone``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..model import kinds
from . import dispatch
from .blocks import Block, component_dtype
from .positions import kind_mask
from .summarize import _scan, kernel_groups, scan_call
from .summary import ScanSpec, Summary


@dataclass
class StackedRows:
    """Per-row results of ``scan_stacked``: each row's finite statistics and counts (what
    its own scan would report), and ``alone``, the rows to scan again alone (their sums
    overflowed or are too small, or they hold no finite value: their statistics here are
    not to be used)."""

    n: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    counts: np.ndarray  # (rows, kinds.N_KINDS)
    alone: np.ndarray  # bool per row


def small_data(spec: ScanSpec, values: int) -> ScanSpec:
    """``spec`` for arrays of ``values`` values each, scanned together: arrays that alone
    take the NumPy twin (``spec.twin_max``) take it together, numba costing more to load
    than their values to scan, unless their kernels are loaded already (then ``twin_max``
    is 0: the kernels, the same bits)."""
    if values * (2 if spec.dtype.kind == "c" else 1) > spec.twin_max or not spec.twin_max:
        return spec  # alone, they would ask for the kernels
    groups = kernel_groups(replace(spec, twin_max=0))
    if all(dispatch.loaded(group, dtype) for group, dtype in groups):
        return replace(spec, twin_max=0)
    return replace(spec, twin_max=1 << 62)


def takes_twin(spec: ScanSpec, rows: int, values: int) -> bool:
    """Whether ``scan_stacked`` scans ``rows`` arrays of ``values`` values of ``spec``
    (real floats) with the kernels' NumPy twin (their kernels not loaded, or the twin's
    size): a hint, for what runs faster on one or the other."""
    small = rows * values <= small_data(spec, values).twin_max
    kind = component_dtype(spec.dtype)  # what the kernels see: integers as float64
    return dispatch.is_twin(dispatch.pick("scan_rows", kind, small))


def scan_stacked(x2: np.ndarray, spec: ScanSpec) -> StackedRows:
    """Scan the rows of ``x2`` (C-contiguous, shape ``(arrays, values)``), each the values
    of one array of ``spec`` (its shape, dtype, casts) in C order, as each array's own scan
    would: the kernels' NumPy twin or the kernels as for one of them (``small_data``)."""
    rows = x2.shape[0]
    spec = small_data(spec, x2.size // max(rows, 1))
    for group, dtype in kernel_groups(replace(spec, shape=x2.shape)):
        dispatch.prepare(group, dtype)
    block = Block(x2, (0, 0))
    size = block.size
    cols = size // max(rows, 1)
    thr = spec.thresholds
    counts = np.zeros(kinds.N_KINDS, np.int64)
    sstats, scounts = np.empty((5, rows), np.float64), np.zeros((3, rows), np.int64)
    scan, _, spans = scan_call(block, 0, size, (rows, cols), spec, True)
    blocks = np.empty((3, spans), np.int64)
    scan(thr, counts, 1, np.empty(kinds.N_KINDS, np.int64), blocks, *sstats, *scounts)
    # each row's moments, as ``SliceStats.from_partials`` finishes them: elementwise, so
    # the twin's bits are the kernel's; the twin, so that no other kernel group loads
    n, mean, std = np.empty(rows, np.int64), np.empty(rows), np.empty(rows)
    dispatch.pick("finish_slices", np.float64, True)(cols, *sstats, *scounts, n, mean, std)
    lo, hi = sstats[3], sstats[4]
    # each row's counts: NaN and inf the kernel's own per row, the cast risks (when the
    # block holds any) by the predicate pinned to the kernels' counts (``kind_mask``)
    per_row = np.zeros((rows, kinds.N_KINDS), np.int64)
    per_row[:, [kinds.SLOT_NAN, kinds.SLOT_POSINF, kinds.SLOT_NEGINF]] = scounts.T
    for k in np.flatnonzero(counts[kinds.FIRST_CAST_SLOT :]) + kinds.FIRST_CAST_SLOT:
        per_row[:, k] = kind_mask(block.x.reshape(rows, cols), int(k), thr).sum(axis=1)
    from ..kernels.slices_numpy import rescue_rows

    alone = n == 0
    alone[rescue_rows(n, mean, lo, hi)] = True
    return StackedRows(n, mean, std, lo, hi, per_row, alone)


def found_summary(x: np.ndarray, spec: ScanSpec, counts: np.ndarray, stats: tuple) -> Summary:
    """The summary the scan of the one region of ``x`` (an array of ``spec``, C order)
    makes, from its row's ``counts`` and ``stats`` (``n, mean, std, min, max, sum``) in a
    stack (``scan_stacked``; not a row it says to scan alone): its first positions of each
    kind looked for as ``_scan`` looks for those its kernel did not keep."""
    block = Block(x, (0,) * x.ndim)

    def run(thr, into, locs, vals, nlocs):  # the counts; no position kept
        into[:] = counts

    s = _scan(block, 0, block.size, (1, block.size), spec, True, block.in_c_order, run=run)
    s.n, s.mean, s.std, s.min, s.max, s.total = stats
    if counts.any():
        s.flagged = [((0,) * x.ndim, tuple(int(n) for n in block.dshape), int(counts.sum()))]
    return s
