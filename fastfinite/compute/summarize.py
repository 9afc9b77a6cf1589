"""One region to a ``Summary``, the leaf of both engines: its values read from the source
(unit by unit when the region cannot be read, so the error names the unit) and scanned by a
kernel, its NumPy twin for small blocks, or, for a run of regions of an array in RAM, in
parts on several cores (``parts``)."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ChunkReadError, SourceError
from ..model import kinds
from ..model.stats import SUB, TILE
from . import dispatch
from .blocks import (
    Block,
    Region,
    component_dtype,
    first_where,
    memory_order,
    memory_view,
    narrow_format,
    widen,
)
from .positions import kind_mask, record_positions
from .summary import ScanSpec, SliceCanvas, SliceStats, Summary, first_positions, merge_all, rescued

KEPT = 1 << 10  # positions of each kind a kernel keeps; more are looked for when wanted


def kernel_groups(spec: ScanSpec) -> list[tuple[str, np.dtype]]:
    """The kernel groups a scan of ``spec`` will call first, with the dtype they are compiled
    for: asked for before the first region is read, so that they compile while it is read
    (``dispatch.prepare``). None for data the twins take whole."""
    if math.prod(spec.shape) <= spec.twin_max:
        return []
    comp = component_dtype(spec.dtype)
    if narrow_format(spec.dtype):
        first = ("narrow", np.dtype(f"u{np.dtype(spec.dtype).itemsize}"))
    else:
        first = ("rows", comp)
    return [first] if spec.by is None else [first, ("finish", np.dtype(np.float64))]


def scan_region(
    source, region: Region, spec: ScanSpec, canvas: SliceCanvas | None = None
) -> Summary:
    """Read one region of a source and scan it (``canvas``: see ``summarize``)."""
    summary = summarize(source.read(region), tuple(s.start for s in region), spec, canvas)
    source.release(region)
    return summary


def scan_region_or_units(
    source, region: Region, spec: ScanSpec, on_error: str, canvas: SliceCanvas | None = None
):
    """``(summary, errors)`` of a region. When it cannot be read, each storage unit is read
    on its own: an unreadable one raises ``ChunkReadError`` naming it or, with
    ``on_error="report"``, is returned in ``errors`` beside the summary of the others. A
    store reached over a network is asked first whether it still answers: one that does
    not (an outage, expired credentials) is an error of the store, never of its chunks."""
    try:
        return scan_region(source, region, spec, canvas), []
    except Exception as e:
        if source.remote:
            try:
                source.verify()
            except Exception as why:
                raise SourceError(f"cannot reach the store of {source.name}: {why}") from e
        units = source.units(region)
        if units is None:
            raise
        first_error = e
    parts, errors = [], []
    for kind, coords, unit in units:
        try:
            parts.append(scan_region(source, unit, spec))
        except Exception as e:
            err = ChunkReadError(source.name, coords, f"{type(e).__name__}: {e}", kind)
            if on_error != "report":
                raise err from e
            errors.append(err)
    if not errors:  # the region failed but each unit reads: not a unit's fault
        raise first_error
    return merge_all(parts, spec.max_locations), errors


def summarize(
    data: np.ndarray, start: tuple[int, ...], spec: ScanSpec, canvas: SliceCanvas | None = None
) -> Summary:
    """Scan one region's values (any layout and dtype) whose first element is at ``start``;
    with ``by`` one axis, its slices' statistics in ``canvas`` when it lends them."""
    data = np.asarray(data)
    by = spec.by
    if by is None:
        block = Block(data, start)
        return _scan(block, 0, block.size, (1, block.size), spec, True, block.in_c_order)
    other = tuple(ax for ax in range(data.ndim) if ax not in by)
    # by the layout alone (not by contiguity), so a copy of the region scans the same way
    use_cols = data.dtype.kind != "c" and memory_order(data.strides, data.shape) == other + by
    nb = math.prod(data.shape[a] for a in by)
    order = other + by if use_cols else by + other
    block = Block(data, start, order=order, in_place=use_cols, cols=nb)
    if use_cols:  # the kernel takes tiles of columns in turn: positions in C order per tile
        ordered = block.in_c_order and nb <= TILE
        shape, rows_are_slices = (block.size // max(nb, 1), nb), False
    else:
        ordered = block.in_c_order
        shape, rows_are_slices = (nb, block.size // max(nb, 1)), True
    # slices a run of the flat slice index when the region holds the axes after by[0] whole
    inner = math.prod(spec.shape[a] for a in by[1:])
    whole = all(data.shape[a] == spec.shape[a] for a in by[1:])
    lent = canvas.lend(start[by[0]] * inner, nb) if canvas is not None and whole else None
    limits = None
    if lent is not None and all(data.shape[a] == spec.shape[a] for a in other):
        from .limits import flag_limits  # every value of its slices: finished here

        limits = flag_limits(spec.dtype, spec.cast, spec.z_threshold)
    return _scan(block, 0, block.size, shape, spec, rows_are_slices, ordered, lent, limits)


def summarize_parts(block: Block, boxes: list[Region], spec: ScanSpec, threads: int) -> Summary:
    """Scan a run of consecutive regions ``boxes`` of ``block`` (a whole array in RAM,
    contiguous in memory order) as one row, in parts on ``threads`` cores; each region
    holding findings is flagged on its own."""
    from .parts import PartedScan

    parts = PartedScan(block, boxes, threads, spec.twin_max)
    lo, hi = int(parts.bounds[0]), int(parts.bounds[-1])
    s = _scan(block, lo, hi - lo, (1, hi - lo), spec, True, block.in_c_order, run=parts.scan)
    # statistics merged as the regions' own would be: the same tree, the same bits
    t = merge_all(parts.summaries(), 0)
    s.n, s.mean, s.std, s.min, s.max, s.total = t.n, t.mean, t.std, t.min, t.max, t.total
    s.flagged = parts.flagged()
    return s


def scan_call(block: Block, lo: int, size: int, shape: tuple[int, int], spec: ScanSpec, rows_are_slices: bool):  # fmt: skip
    """The kernel (or its twin: ``dispatch``) for ``size`` values of ``block`` from ``lo``,
    seen as ``shape`` (rows, columns): ``(scan, values, spans)``. ``scan`` takes ``(thr,
    counts, cap, seen, blocks, shift, s1, s2, mn, mx, cnan, cpos, cneg)`` and returns how
    many spans it listed in ``blocks`` (at most ``spans``); ``values(a, b)`` are the floats
    a span covers."""
    small = size <= spec.twin_max
    rows, cols = shape
    if block.pitched is not None or not rows_are_slices:
        if block.pitched is not None:  # the whole block, in place
            _, _, pitch, x, _ = block.pitched
        else:
            x, pitch = block.x[lo : lo + size], cols
        fn = dispatch.pick("scan_cols", x.dtype, small)
        spans = rows * -(-cols // TILE) + 1
        return (lambda *a: fn(x, rows, cols, pitch, *a, *_col_scratch())), (lambda a, b: x[a:b]), spans  # fmt: skip
    spans = rows + size // SUB + 1
    if block.bits is not None:  # bfloat16 and float8: their bits, widened by the kernel
        bits, table = block.bits[lo : lo + size], block.table
        fn = dispatch.pick("scan_narrow", bits.dtype, small)
        buf = np.empty(SUB, np.float32)
        return (lambda *a: fn(bits, table, rows, cols, *a, buf)), (lambda a, b: widen(bits[a:b], table)), spans  # fmt: skip
    x = block.x[lo : lo + size]
    fn = dispatch.pick("scan_rows", x.dtype, small)
    return (lambda *a: fn(x, rows, cols, *a)), (lambda a, b: x[a:b]), spans


def _col_scratch():
    from ..kernels import COUNTS, SCRATCH

    return np.empty(SCRATCH), np.empty(COUNTS, np.int32)


def _scan(
    block: Block, lo: int, size: int, shape: tuple[int, int], spec: ScanSpec,
    rows_are_slices: bool, ordered, lent: SliceStats | None = None, limits: tuple | None = None,
    run=None,
):  # fmt: skip
    """Scan the ``size`` values of the block from ``lo``, seen as 2-D ``shape`` (rows,
    columns; the slices are its rows or its columns), and make the Summary; ``ordered``:
    positions come in the global C order. ``lent``: the slices' columns in a canvas, which
    the kernel writes into; ``limits``: its slices hold all their values here, and are
    finished for the report here (``finish_whole_slices``). ``run``: a scan of the block's
    one row that takes no statistics (``PartedScan.scan``)."""
    cap, start = spec.max_locations, block.start
    nsl = shape[0] if rows_are_slices else shape[1]
    counts = np.zeros(kinds.N_KINDS, np.int64)
    if lent is not None:
        sstats, scounts = lent.kernel_outputs()
    else:
        sstats, scounts = np.empty((5, nsl), np.float64), np.zeros((3, nsl), np.int64)
    # kept by the kernel (complex: both parts of an element may hold the same kind); more
    # are looked for again below, so memory grows with what is found, not with the cap
    keep = min(cap, KEPT) * block.ncomp
    locs = np.empty((kinds.N_KINDS, keep), np.int64)
    vals = np.empty((kinds.N_KINDS, keep), np.float64)
    nlocs = np.zeros(kinds.N_KINDS, np.int64)
    thr = spec.thresholds
    if size and run is not None:
        run(thr, counts, locs, vals, nlocs)
    elif size:
        scan, values, spans = scan_call(block, lo, size, shape, spec, rows_are_slices)
        blocks = np.empty((3, spans), np.int64)
        m = scan(thr, counts, keep, np.empty(kinds.N_KINDS, np.int64), blocks, *sstats, *scounts)
        record_positions(values, blocks, m, thr, locs, vals, nlocs)
    s = Summary(counts=counts, elements=size // block.ncomp)
    a = None
    for k in np.flatnonzero(counts):  # the first positions of each kind, in C order
        pos, val = lo + locs[k, : nlocs[k]], vals[k, : nlocs[k]]
        if counts[k] > nlocs[k] and (not ordered or nlocs[k] < cap * block.ncomp):
            want = counts[k] if not ordered else cap * block.ncomp
            if a is None:
                a = block.x[lo : lo + size]
            got = first_where(a, lambda v, k=k: kind_mask(v, k, thr), want)
            pos, val = lo + got, a[got].astype(np.float64)
        s.loc_index[k], s.loc_value[k] = first_positions(block.to_global(pos, spec.shape), val, cap)
    if size == 0 or run is not None:
        return s
    by = spec.by
    if lent is not None:  # the canvas set the slices' indices
        idx = lent.idx
    elif by is None:
        idx = np.zeros(1, np.int64)
    elif len(by) == 1:  # the region's slices are a run along the one axis
        idx = np.arange(start[by[0]], start[by[0]] + nsl, dtype=np.int64)
    else:
        local = np.unravel_index(np.arange(nsl), tuple(block.dshape[a] for a in by))
        glob = [c + start[a] for c, a in zip(local, by)]
        idx = np.ravel_multi_index(glob, spec.by_shape).astype(np.int64)
    length = shape[1] if rows_are_slices else shape[0]
    if limits is not None:
        fin = dispatch.pick("finish_whole_slices", np.float64, nsl == 1)
        z = sstats[0]  # the shifts' row: read before the largest |z| is written over it
        where, flags = np.empty(nsl, np.int64), np.empty(nsl, np.int64)
        *totals, rescue, k, empty = fin(
            length, *sstats, *scounts, lent.n, lent.mean, lent.std, z, *limits, where, flags
        )
        part = lent.keep_finished(where[:k], flags[:k], empty)
    else:
        part, totals, rescue = SliceStats.from_partials(idx, length, sstats, scounts, lent)
    if rescue:
        rows = shape[0]
        x2 = lambda: block.x[lo : lo + size].reshape(rows, -1)  # noqa: E731
        totals = rescued(part, x2, rows_are_slices) or totals
    s.n, s.mean, s.std, s.min, s.max, s.total = totals
    if by is not None:
        s.slices = [part]
    if counts.any():
        stop = tuple(int(a + n) for a, n in zip(start, block.dshape))
        s.flagged = [(tuple(int(a) for a in start), stop, int(counts.sum()))]
    return s


def scanned_in_parts(data: np.ndarray, by: tuple[int, ...] | None) -> bool:
    """Whether runs of regions of ``data`` can be scanned in place and in parts on several
    threads (``summarize_parts``): without ``by``, native float32/float64 data contiguous in
    some order. (With ``by``, the per-slice work after the kernel is better spread over
    regions on parallel threads.)"""
    native = data.dtype in (np.dtype("=f4"), np.dtype("=f8")) or (
        narrow_format(data.dtype) and data.dtype.isnative
    )
    return by is None and bool(native) and memory_view(data)[0].flags.c_contiguous
