"""A large block scanned on several cores: cut into parts, ``kernels.scan_rows`` on each part
in a shared thread pool (the kernel releases the GIL), the parts' outputs folded in order.

For arrays in RAM the engine hands whole regions of ``VIEW_REGION_BYTES`` to ``PartedScan``
instead of scanning regions on parallel threads: the Python around a region then runs once
per gigabyte, not once per part, and the parts still flag where findings are, so
``localize`` replays pieces of at most ``PART_BYTES``.
"""

from __future__ import annotations

import math
import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import kinds
from .blocks import Block, plan_regions

# A block of at least this many bytes is worth cutting into one part per thread ...
PARALLEL_BLOCK_BYTES = 4 << 20
# ... and into parts of at most this many: where findings are located (``flagged``).
PART_BYTES = 64 << 20

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def part_pool(threads: int) -> ThreadPoolExecutor:
    """The shared pool, with at least ``threads`` threads (started once per process)."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < threads:
            old = _pool
            _pool = ThreadPoolExecutor(threads, thread_name_prefix="fastfinite-part")
            _pool_size = threads
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def _forget_pool() -> None:
    """In a forked child the pool's threads do not exist: start a new pool when needed."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


class PartedScan:
    """``kernels.scan_rows`` over a single-row block on ``threads`` threads, in parts of at
    most ``PART_BYTES`` planned like regions (``plan_regions`` over the block's own shape: each
    part a box, contiguous in the block), at most ``2 * threads`` in flight, with
    ``scan_rows``'s outputs; ``flagged()`` then gives the boxes of the parts with findings."""

    def __init__(self, block: Block, threads: int):
        self.block = block
        self.threads = threads
        shape = block.bshape
        per_part = min(PART_BYTES, -(-block.x.nbytes // threads))  # a part for every thread
        budget = per_part // (block.x.itemsize * block.ncomp)
        self.parts = list(plan_regions(shape, tuple(range(len(shape))), budget))
        starts = [np.ravel_multi_index([r.start for r in part], shape) for part in self.parts]
        self.bounds = np.array([*starts, math.prod(shape)], np.int64) * block.ncomp
        self.found = np.zeros(len(self.parts), np.int64)

    def scan(self, x2, xi2, thr, counts, rstats, rcounts, locs, vals, nlocs) -> None:
        """``scan_rows(x2, xi2, thr, counts, rstats, rcounts, locs, vals, nlocs)`` for
        ``x2`` of one row, the row's statistics given shifted by its mean. Parts are folded
        in order as they finish, while the next ones run."""
        from . import kernels

        pool = part_pool(self.threads)
        b, cap, nparts = self.bounds, locs.shape[1], len(self.bounds) - 1
        slots = min(nparts, 2 * self.threads)
        pc = np.empty((slots, kinds.N_KINDS), np.int64)
        ps = np.empty((slots, 5, 1))
        prc = np.empty((slots, 3, 1), np.int64)
        pl = np.empty((slots, kinds.N_KINDS, cap), np.int64)
        pv = np.empty((slots, kinds.N_KINDS, cap))
        pn = np.empty((slots, kinds.N_KINDS), np.int64)
        moments = np.empty((5, nparts))  # per part: finite count, mean, M2, min, max

        def start(p: int):
            q, part = p % slots, slice(b[p], b[p + 1])
            pc[q], prc[q], pn[q] = 0, 0, 0
            return pool.submit(
                kernels.scan_rows, x2[:, part], xi2[:, part], thr,
                pc[q], ps[q], prc[q], pl[q], pv[q], pn[q],
            )  # fmt: skip

        def fold(p: int) -> None:
            q = p % slots
            self.found[p] = kernels.fold_part(
                b[p], pc[q], pl[q], pv[q], pn[q], counts, locs, vals, nlocs
            )
            kernels.part_moments(b[p + 1] - b[p], ps[q], prc[q], moments, p)
            rcounts[:] += prc[q]

        running = deque(start(p) for p in range(slots))
        for p in range(nparts):
            running.popleft().result()
            fold(p)
            if p + slots < nparts:
                running.append(start(p + slots))
        kernels.finish_parts(moments, rstats)

    def flagged(self) -> list:
        """``(start, stop, count)`` of the parts with findings, as boxes of the array."""
        return [
            (*self.block.global_box(self.parts[p]), int(self.found[p]))
            for p in np.flatnonzero(self.found)
        ]
