"""The local engine: a plan's regions on a bounded thread pool in this process.

Reads and kernels overlap (both release the GIL); at most ``2 * workers`` regions are in
flight, so memory stays O(workers x region). Summaries are folded as they arrive, in region
order, by a streaming pairwise merge (O(log n) partial summaries held). An array in RAM has
nothing to read: runs of its regions are scanned one after the other, each in parts on every
core (``summarize_parts``), so the Python between regions does not compete with the kernels.
A group's small members (a checkpoint's tensors, a set's files), each scanned on one
thread, run side by side, one per core (``_side_by_side``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait

from ..cache.recall import Step
from ..compute import dispatch
from ..compute.blocks import Block
from ..compute.parts import default_workers
from ..compute.pools import bounded_map, shared_pool
from ..compute.summarize import (
    kernel_groups,
    scan_region_or_units,
    scanned_in_parts,
    summarize_parts,
)
from ..compute.summary import PairwiseMerger, SliceCanvas
from ..model.kinds import FIRST_CAST_SLOT
from ..report.build import build_report, finish, report_meta
from ..report.model import ScanReport
from ..sources.base import SMALL_BYTES
from . import batched
from .plan import Member, ScanPlan

RUN_BYTES = 1 << 30  # regions of an array in RAM scanned together in parts
INFLIGHT_BYTES = 256 << 20  # regions of a remote store read at once, decoded
ZARR_REQUESTS = 10  # requests zarr keeps in flight for one region (async.concurrency)


def run(plan: ScanPlan) -> ScanReport:
    """Scan every member of a plan (small ones side by side) and build the report."""
    if batched.applies(plan):  # a set's small .npy files or tar members: together
        reports, complete = _scan_set(plan), True
    else:
        reports, complete = _scan_members(plan)
    return finish(plan.layout, reports, plan.skipped, complete, list(plan.findings.values()))


def _scan_set(plan: ScanPlan) -> dict:
    """The reports of a set's members by path, its small files read and scanned together
    (``batched``), the others as members are."""
    bar = _set_bar(plan.layout.name, batched.set_bytes(plan)) if plan.options.progress else None
    try:
        alone = lambda entries: _side_by_side(plan.members(entries), plan, bar)  # noqa: E731
        return batched.scan_set(plan, alone, bar)
    finally:
        if bar is not None:
            bar.close()


def _scan_members(plan: ScanPlan) -> tuple[dict, bool]:
    """The members' reports by path, and whether every member was scanned (``fail_fast``
    stops at the first array holding NaN or inf: the others are skipped)."""
    reports: dict = {}
    whole = plan.options.progress and _counted_whole(plan.target)
    members, bar = plan.members(), None
    if whole:
        members = list(members)  # opened first: the bar counts the bytes of the whole set
        bar = _set_bar(plan.layout.name, sum(m.source.nbytes for m in members))
        for m in members:  # a .npy maps again when scanned: 100,000 maps at once would not
            m.source.unmap()
    try:
        for member, report in _side_by_side(members, plan, bar):
            reports[member.path] = report
            if plan.options.fail_fast and (report.nonfinite > 0 or not report.complete):
                why = "not scanned: fail_fast stopped at an earlier array"
                rest = [p for p, _ in plan.entries if p not in reports and p not in plan.skipped]
                plan.skipped.update(dict.fromkeys(rest, why))
                return reports, False
    finally:
        if bar is not None:
            bar.close()
    return reports, True


def _alone(member: Member, opts) -> bool:
    """Whether a member is scanned on one thread (small and in this process: a tensor of
    a checkpoint, a file of a set), so that members like it run side by side."""
    source = member.source
    return (
        opts.workers is None
        and source.in_memory
        and source.nbytes < SMALL_BYTES
        and not source.remote
        and member.spec.by is None
    )


def _side_by_side(members: Iterable[Member], plan: ScanPlan, bar) -> Iterator:
    """``(member, report)`` in the members' order. Members a thread scans alone
    (``_alone``: a checkpoint's tensors, a set's small files) are scanned side by side, one
    per core, at most ``2 * workers`` in flight; the others one at a time, each on every
    core. Each report is its member's alone, so the reports are those of a scan in turn,
    to the last bit. In turn when the scan stops early (``fail_fast``), keeps a cache or
    draws a progress bar (counted from one thread)."""
    opts = plan.options
    workers = default_workers()
    in_turn = workers <= 1 or opts.fail_fast or plan.cache is not None or opts.progress
    pool = None if in_turn else shared_pool("member", workers)
    pending: deque = deque()
    try:
        for member in members:
            if in_turn or not _alone(member, opts):
                while pending:
                    done = pending.popleft()
                    yield done[0], done[1].result()
                yield member, scan_member(member, plan, bar)
                continue
            pending.append((member, pool.submit(scan_member, member, plan, bar)))
            if len(pending) >= 2 * workers:
                done = pending.popleft()
                yield done[0], done[1].result()
        while pending:
            done = pending.popleft()
            yield done[0], done[1].result()
    finally:  # stopped early: nothing of this scan runs on after it returns
        for _, f in pending:
            f.cancel()
        wait([f for _, f in pending])


def _counted_whole(target) -> bool:
    """A set of files (``shards.ShardSet``): one progress bar counts all of it."""
    from ..sources.shards import ShardSet

    return isinstance(target, ShardSet)


def _set_bar(name: str, total: int):
    from tqdm.auto import tqdm

    bar = dict(unit="B", unit_scale=True, unit_divisor=1024, dynamic_ncols=True, leave=False)
    return tqdm(total=total, desc=name, **bar)


def scan_member(member: Member, plan: ScanPlan, shared_bar=None) -> ScanReport:
    """Scan one member's regions (those a cache does not recall), merge the summaries and
    build its report; ``shared_bar``: the progress bar of a whole set, counting on."""
    opts, source, spec = plan.options, member.source, member.spec
    for group, dtype in kernel_groups(spec):  # compiled (or loaded) while regions are read
        dispatch.prepare(group, dtype)
    memory = member.memory  # made before any unit was read: their fingerprints
    listing = None
    missing = memory.fingerprints.missing() if memory is not None else None
    if missing is None and source.storage is not None:  # list the store's units while the scan runs
        pool = ThreadPoolExecutor(1, thread_name_prefix="fastfinite-listing")
        listing = pool.submit(source.missing_units)
        pool.shutdown(wait=False)
    workers = opts.workers
    if workers is None:
        small = source.in_memory and source.nbytes < SMALL_BYTES
        workers = 1 if small else default_workers()
    if source.remote:  # round trips: as many regions in flight as the requests allow
        unit = math.prod(source.storage.unit) * source.dtype.itemsize if source.storage else 1
        per_region = min(ZARR_REQUESTS, max(1, member.region_bytes // unit))
        room = INFLIGHT_BYTES // (2 * member.region_bytes)  # bounded_map holds 2 x workers
        workers = max(workers, min(opts.concurrency // per_region, room))
    bar = shared_bar if shared_bar is not None else _progress_bar(source, opts.progress)
    ram = source.ram_array
    canvas = SliceCanvas(math.prod(spec.by_shape)) if spec.by else None
    if memory is None and workers > 1 and ram is not None and scanned_in_parts(ram, spec.by):
        block = Block(ram, (0,) * ram.ndim)  # in place: contiguous in memory order
        regions = list(member.regions())
        k = RUN_BYTES // (_size(regions[0]) * ram.itemsize) if regions else 1
        k = 1 << max(0, k.bit_length() - 1)  # runs of 2**j regions: subtrees of the merge tree
        batches = (regions[i : i + k] for i in range(0, len(regions), k))
        results: Iterator = (
            (b, summarize_parts(block, b, spec, workers), [], None) for b in batches
        )
    else:  # a task a region, or a step of the cache's (a region to scan, or recalled)
        if memory is not None:

            def one(st: Step):
                if st.cached:
                    return st.regions, st.summary, [], st
                scanned = scan_region_or_units(source, st.regions[0], spec, opts.on_error, canvas)
                return st.regions, *scanned, st

            items = memory.steps
        else:

            def one(r):
                return [r], *scan_region_or_units(source, r, spec, opts.on_error, canvas), None

            items = member.regions()
        results = bounded_map(one, items, workers)
    failed: list = []
    merger = memory.merger if memory is not None else PairwiseMerger(spec.max_locations)
    done, ended = 0, False
    try:
        for scanned, summary, errors, st in results:
            failed.extend(errors)
            if st is None:
                merger.add(summary)
            else:
                memory.add(st, summary, errors)
            nbytes = sum(_size(r) for r in scanned) * source.dtype.itemsize
            done += nbytes
            if bar is not None:
                if bar is not shared_bar:
                    _describe(bar, source)
                bar.update(nbytes)
            if opts.fail_fast and summary.counts[:FIRST_CAST_SLOT].sum():  # NaN or inf
                break
        ended = True
    finally:
        results.close()
        if bar is not None and bar is not shared_bar:
            bar.close()
        if memory is not None:  # what was scanned is kept, even when the scan stops here
            memory.end(ended and done >= source.nbytes)
    if listing is not None:
        missing = listing.result()
    summary, meta = merger.result(), report_meta(source)
    return build_report(
        spec, meta, summary, failed, missing, done >= source.nbytes, consume=True, threads=workers
    )


def _size(region) -> int:
    return math.prod(s.stop - s.start for s in region)


COMPILING = "compiling kernels, first use on this machine"


def _progress_bar(source, progress: bool):
    if not progress:
        return None
    from tqdm.auto import tqdm

    bar = dict(unit="B", unit_scale=True, unit_divisor=1024, dynamic_ncols=True, leave=False)
    return tqdm(total=source.nbytes, desc=_phase(source), **bar)


def _phase(source) -> str:
    """The bar's description, which names the phase: while kernels compile (the first scan
    on this machine), the data goes on through their NumPy twins, and its rate (the ETA)
    is the data's."""
    name = source.name or "scan"
    return f"{name} ({COMPILING})" if dispatch.compiling() else name


def _describe(bar, source) -> None:
    want = _phase(source)
    if bar.desc != want:
        bar.set_description_str(want, refresh=False)
