"""A run of regions of an array in RAM scanned as one block on several cores: each region
a part, ``kernels.scan_rows`` on each part in a shared thread pool (the kernel releases the
GIL), the parts' outputs folded in order.

The local engine hands runs of up to a gigabyte to ``PartedScan`` instead of scanning regions
on parallel threads: the Python around a run then runs once per gigabyte, not once per part,
and each part (a region of the plan) still flags its findings on its own, as a Dask task
scanning that region would.
"""

from __future__ import annotations

import math
import os
import threading
from collections import deque
from collections.abc import Callable

import numpy as np

from ..model import kinds
from ..model.stats import SUB
from .blocks import Block, Region, widen
from .pools import shared_pool
from .summary import SliceStats, Summary, rescued


def default_workers() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


SLICES_PER_PART = 1 << 16  # per-slice finishing: fewer slices are done on one thread
SLOT_GAP = 16  # int64s between two parts' counts: no cache line holds both


def _apart(slots: int, *shape: int) -> np.ndarray:
    """``slots`` int64 arrays of ``shape`` (each C-contiguous), ``SLOT_GAP`` values apart:
    parts running on two threads write their counts as they go (a sub-block's underflows),
    and counts side by side in one cache line would send it back and forth between cores."""
    return np.empty((slots, shape[0] + SLOT_GAP, *shape[1:]), np.int64)[:, : shape[0]]


def in_parts(call: Callable[[int, int], object], size: int, threads: int | None = None) -> None:
    """``call(lo, hi)`` over ``0:size`` in parts on the shared pool, one per core (at most
    ``threads``, a scan's ``workers``): for per-slice kernels, which release the GIL (1e6
    slices' columns and findings cost as much as the scan that found them, on one core)."""
    cores = default_workers()
    threads = min(threads or cores, cores, size // SLICES_PER_PART)
    if threads <= 1:
        call(0, size)
        return
    bounds = [size * i // threads for i in range(threads + 1)]
    for f in [shared_pool("part", threads).submit(call, a, b) for a, b in zip(bounds, bounds[1:])]:
        f.result()


class PartedScan:
    """``kernels.scan_rows`` (its NumPy twin for parts of at most ``twin_max`` values, and
    while the kernels are not ready: ``dispatch``) over
    consecutive regions ``boxes`` of ``block`` (boxes of the global array, adjacent in the
    block's memory order) on ``threads`` threads, at most ``2 * threads`` in flight. Counts
    and positions are folded in order; each part's statistics are kept as a region's would
    be (``summaries``), and ``flagged()`` gives the boxes with findings."""

    def __init__(self, block: Block, boxes: list[Region], threads: int, twin_max: int):
        self.block = block
        self.boxes = boxes
        self.threads = threads
        self.twin_max = twin_max
        parts = [block.block_box(b) for b in boxes]
        starts = [np.ravel_multi_index([r.start for r in p], block.bshape) for p in parts]
        sizes = [math.prod(r.stop - r.start for r in p) for p in parts]
        self.bounds = np.cumsum([starts[0], *sizes], dtype=np.int64) * block.ncomp
        if list(self.bounds[:-1]) != [s * block.ncomp for s in starts]:
            raise ValueError("PartedScan needs regions adjacent in memory order")
        self.found = np.zeros(len(parts), np.int64)
        self.stats = np.empty((5, len(parts)))  # per part, as ``scan_rows`` gives a row's
        self.scounts = np.zeros((3, len(parts)), np.int64)

    def scan(self, thr, counts, locs, vals, nlocs) -> None:
        """Scan the block's run, one row holding the parts: counts added to ``counts``,
        the first positions in ``locs``/``vals``/``nlocs``. Parts are folded in order as
        they finish, while the next ones run."""
        from . import dispatch
        from .positions import fold_part, record_positions  # a few small arrays a part

        block = self.block
        pool = shared_pool("part", self.threads)
        lo, cap, nparts = self.bounds[0], locs.shape[1], len(self.bounds) - 1
        slots = min(nparts, 2 * self.threads)
        pc = _apart(slots, kinds.N_KINDS)  # counts the kernels write as they go
        ps = np.empty((slots, 5, 1))
        prc = _apart(slots, 3, 1)
        pl = np.empty((slots, kinds.N_KINDS, cap), np.int64)
        pv = np.empty((slots, kinds.N_KINDS, cap))
        pn = _apart(slots, kinds.N_KINDS)
        narrow = block.bits is not None  # bfloat16 or float8: their bits

        def scan(p: int) -> None:  # the kernel or its twin, as it is when the part starts
            q, a, b = p % slots, self.bounds[p], self.bounds[p + 1]
            small = b - a <= self.twin_max
            spans = np.empty((3, 2 + (b - a) // SUB), np.int64)
            finds = (pc[q], cap, np.empty(kinds.N_KINDS, np.int64), spans, *ps[q], *prc[q])
            if narrow:
                fn = dispatch.pick("scan_narrow", block.bits.dtype, small)
                bits, table = block.bits[a:b], block.table
                args = (bits, table, 1, b - a, thr, *finds, np.empty(SUB, np.float32))
                values = lambda s, e: widen(bits[s:e], table)  # noqa: E731
            else:
                fn = dispatch.pick("scan_rows", block.x.dtype, small)
                args = (block.x[a:b], 1, b - a, thr, *finds)
                values = lambda s, e: block.x[a + s : a + e]  # noqa: E731
            if dispatch.is_twin(fn) and not small:  # one at a time: the compiler
                with _twin_turn:  # needs a core, and the GIL, to finish
                    m = fn(*args)
            else:
                m = fn(*args)
            record_positions(values, spans, m, thr, pl[q], pv[q], pn[q])

        def start(p: int):
            q = p % slots
            pc[q], prc[q], pn[q] = 0, 0, 0
            return pool.submit(scan, p)

        running = deque(start(p) for p in range(slots))
        for p in range(nparts):
            running.popleft().result()
            q = p % slots
            self.found[p] = fold_part(
                self.bounds[p] - lo, pc[q], pl[q], pv[q], pn[q], counts, locs, vals, nlocs
            )
            self.stats[:, p], self.scounts[:, p] = ps[q][:, 0], prc[q][:, 0]
            if p + slots < nparts:
                running.append(start(p + slots))

    def summaries(self) -> list[Summary]:
        """Each part's statistics as a Summary, exactly as scanning it alone gives them."""

        out = []
        for p in range(len(self.boxes)):
            length = int(self.bounds[p + 1] - self.bounds[p])
            one = slice(p, p + 1)
            part, t, rescue = SliceStats.from_partials(
                ZERO, length, self.stats[:, one], self.scounts[:, one]
            )
            lo, hi = self.bounds[p], self.bounds[p + 1]
            if rescue:
                t = rescued(part, lambda lo=lo, hi=hi: self.block.x[lo:hi].reshape(1, -1)) or t
            out.append(Summary(n=t[0], mean=t[1], std=t[2], min=t[3], max=t[4], total=t[5]))
        return out

    def flagged(self) -> list:
        """``(start, stop, count)`` of the regions with findings."""
        return [
            (tuple(r.start for r in self.boxes[p]), tuple(r.stop for r in self.boxes[p]), int(n))
            for p, n in enumerate(self.found)
            if n
        ]


ZERO = np.zeros(1, np.int64)
_twin_turn = threading.Lock()
