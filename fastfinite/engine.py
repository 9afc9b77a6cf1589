"""Run the kernel over a source's regions: serially, or on a bounded local thread pool.

Reads and kernels overlap (both release the GIL); at most ``2 * workers`` regions are in
flight, so memory stays O(workers x region). Summaries are folded as they arrive, in region
order, by a streaming pairwise merge (O(log n) partial summaries held).
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .summary import DenseSlices, Summary, merge, merge_all, scanned_in_parts

T = TypeVar("T")
R = TypeVar("R")

# Below this many bytes, threads cost more than they save.
PARALLEL_MIN_BYTES = 32 << 20
REGION_BYTES = 4 << 20
# A region of an array in RAM scanned in parts (``summary.scanned_in_parts``): large,
# because the Python around each region runs on cold caches (about 0.5 ms), and findings
# are located to its parts of ``parts.PART_BYTES`` anyway.
VIEW_REGION_BYTES = 1 << 30


def default_workers() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def bounded_map(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """``map(fn, items)`` in order, on ``workers`` threads, at most ``2 * workers`` in flight."""
    if workers <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fastfinite") as pool:
        pending: deque = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


class PairwiseMerger:
    """Fold summaries as they come, merging equal-sized partial results like a binary counter.

    Per-slice statistics (``by``) go into one dense accumulator instead, in place.
    """

    def __init__(self, cap: int, n_slices: int | None = None):
        self.cap = cap
        self._stack: list[tuple[int, Summary]] = []
        self._n_slices = n_slices
        self._slices: DenseSlices | None = None  # made at the first add, while kernels run

    def add(self, s: Summary) -> None:
        if self._n_slices is not None and s.slices is not None:
            if self._slices is None:
                self._slices = DenseSlices(self._n_slices)
            self._slices.add(s.slices)
            s.slices = None
        level = 0
        while self._stack and self._stack[-1][0] == level:
            _, top = self._stack.pop()
            s = merge(top, s, self.cap)
            level += 1
        self._stack.append((level, s))

    def result(self) -> Summary:
        out = Summary()
        for _, s in reversed(self._stack):
            out = merge(s, out, self.cap)
        if self._n_slices is not None:
            out.slices = (self._slices or DenseSlices(self._n_slices)).stats()
        return out


class RunResult:
    """What a local run produced besides the merged summary."""

    __slots__ = ("summary", "failed", "complete")

    def __init__(self, summary: Summary, failed: list, complete: bool):
        self.summary = summary
        self.failed = failed  # ChunkReadErrors, when on_error="report"
        self.complete = complete


def run(
    source,
    spec,
    *,
    workers: int | None = None,
    region_bytes: int | None = None,
    progress: bool = False,
    fail_fast: bool = False,
    on_error: str = "raise",
) -> RunResult:
    """Scan every region of ``source`` and merge the summaries.

    Parameters
    ----------
    source : a source (see ``fastfinite.sources``)
    spec : ScanSpec
    workers : int, optional
        Threads; default all cores for large or out-of-core input, 1 for small arrays.
    region_bytes : int, optional
        Target size of one region (default: the source's ``region_bytes``, or
        ``VIEW_REGION_BYTES`` for an array in RAM scanned on several cores).
    progress : bool
        Show a tqdm bar in bytes.
    fail_fast : bool
        Stop after the first region holding a non-finite value.
    on_error : {"raise", "report"}
        What to do with a chunk that cannot be read.
    """
    if workers is None:
        small = getattr(source, "in_memory", False) and source.nbytes < PARALLEL_MIN_BYTES
        workers = 1 if small else default_workers()
    threads = 1
    ram = getattr(source, "ram_array", None)
    if workers > 1 and ram is not None and scanned_in_parts(ram, spec.by):
        # nothing to read: regions one at a time, each in parts on every core, without the
        # Python of other regions competing for the GIL and the cores
        threads, workers = workers, 1
    if region_bytes is None:
        region_bytes = (
            VIEW_REGION_BYTES if threads > 1 else getattr(source, "region_bytes", REGION_BYTES)
        )
    bar = _progress_bar(source, progress)
    failed: list = []

    def task(region):
        return region, *scan_region_or_units(source, region, spec, on_error, threads)

    n_slices = None if spec.by is None else math.prod(spec.by_shape)
    merger = PairwiseMerger(spec.max_locations, n_slices)
    done = 0
    results = bounded_map(task, source.regions(region_bytes), workers)
    try:
        for region, summary, errors in results:
            failed.extend(errors)
            merger.add(summary)
            nbytes = _region_bytes(region, source.dtype.itemsize)
            done += nbytes
            if bar is not None:
                bar.update(nbytes)
            if fail_fast and summary.counts[:3].sum():
                break
    finally:
        results.close()
        if bar is not None:
            bar.close()
    return RunResult(merger.result(), failed, done >= source.nbytes)


def scan_region(source, region, spec, threads: int = 1) -> Summary:
    """Read one region of a source and scan it (on ``threads`` cores)."""
    from .summary import summarize

    summary = summarize(source.read(region), tuple(s.start for s in region), spec, threads)
    release = getattr(source, "release", None)
    if release is not None:
        release(region)
    return summary


def scan_region_or_units(
    source, region, spec, on_error: str, threads: int = 1
) -> tuple[Summary, list]:
    """Scan a region; when it cannot be read, read its storage units one by one so the error
    names the unit: raise ``ChunkReadError``, or with ``on_error="report"`` return the
    summary of the readable units and the errors."""
    from .errors import ChunkReadError

    try:
        return scan_region(source, region, spec, threads), []
    except Exception as e:
        units = getattr(source, "units", None)
        if units is None:
            raise
        first_error = e
    parts, errors = [], []
    for kind, coords, unit in units(region):
        try:
            parts.append(scan_region(source, unit, spec))
        except Exception as e:
            err = ChunkReadError(source.name, coords, f"{type(e).__name__}: {e}", kind)
            if on_error != "report":
                raise err from e
            errors.append(err)
    if not errors:  # the region failed but each unit reads: not a chunk's fault
        raise first_error
    return merge_all(parts, spec.max_locations), errors


def _region_bytes(region, itemsize: int) -> int:
    n = itemsize
    for s in region:
        n *= s.stop - s.start
    return n


def _progress_bar(source, progress: bool):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(
        total=source.nbytes,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=source.name or "scan",
        dynamic_ncols=True,
        leave=False,
    )
