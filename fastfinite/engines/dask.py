"""The Dask engine: a plan as a graph. One kernel task per region of each member (the
``local`` engine's regions), a tree reduction of the small summaries (fan-in
``split_every``), a task that builds each member's report and one that puts them together.
A set of files has its small ``.npy`` files and its tars' members scanned together, many
to a task, as the local engine scans them (``engines.batched``).

The leaves take their values where they are:

- a dask array's own blocks, computed where the graph computes them;
- an array in this process: its regions, carried by the graph (each task ships its block);
- a store or file (Zarr, HDF5, ``.npy``, Parquet): each task opens it and reads its own
  region where it runs, so on a cluster no array data leaves the client.

Building the graph computes nothing; keys are derived from a token of the inputs, so the
same scan gives the same keys. Kernels run serially inside tasks: Dask owns the cores.
"""

from __future__ import annotations

import functools
import os
import socket
import stat
import sys
import threading
import time
import uuid
from concurrent.futures import CancelledError
from itertools import accumulate

import numpy as np

from ..compute.blocks import memory_view
from ..compute.summarize import kernel_groups, scan_region_or_units, summarize
from ..compute.summary import ScanSpec, Summary, merge_all
from ..errors import FastFiniteError, InvalidArgumentError, SkippedMemberError, SourceError
from ..options import LOCAL_SCHEDULERS, parse_address
from ..report.build import build_report, finish, report_meta
from ..report.members import MemberReports
from ..sources.base import reader_errors
from ..sources.dask import dask_block
from . import batched
from .local import scan_member
from .plan import Member, ScanPlan


def delayed_scan(plan: ScanPlan):
    """The scan as a ``dask.delayed`` ScanReport (nothing is computed). The kernel groups
    its tasks will call first are kept in ``plan.groups`` (``compute`` has every worker
    start on them at once)."""
    from dask import delayed

    if batched.applies(plan):  # a set of files: its small members together
        return _delayed_set(plan)
    reports = {}
    for m in plan.members():
        reports[m.path] = _member_graph(m, plan)
        plan.groups += [g for g in kernel_groups(m.spec) if g not in plan.groups]
        if m.path is not None and m.source.reads_in_tasks:  # its tasks open it again
            m.source.unmap()  # a set of 100,000 .npy files: no map held per file here
    findings = list(plan.findings.values())
    return delayed(_finish_set, pure=True)(plan.layout, reports, dict(plan.skipped), True, findings)


def prepare_kernels(groups) -> int:
    """In a worker: start compiling (or loading) the kernel ``groups`` in the background,
    as ``dispatch`` does, and return at once; its tasks meanwhile take the twins."""
    from ..compute import dispatch

    for group, dtype in groups:
        dispatch.prepare(group, dtype)
    return os.getpid()


def _prepare_workers(client, groups) -> None:
    """Every worker of ``client`` starts on the kernel ``groups`` now, all at once: a fresh
    cluster compiles once per worker, in parallel, before its first task asks (a worker that
    joins later compiles when its first task asks, once)."""
    if groups:
        try:
            client.run(prepare_kernels, list(groups))
        except Exception:  # noqa: BLE001 - the tasks ask for them anyway
            pass


def _task(fn):
    """A function the graph runs in a task: with NumPy's errors ignored, as the local
    engine's threads (``compute/pools.py``): a worker's error state is not ours to change,
    and the data's overflows are findings."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return run


@_task
def _leaf_block(
    block: np.ndarray, start: tuple[int, ...], spec: ScanSpec, order=None, flips=(), name=None
):
    """Scan a block; ``order`` and ``flips``: it was shipped as its memory view (a pickle
    copies a view in C order), laid out again here as the local engine sees it; ``name``:
    it is a dask array's block, computed here (``dask_block`` checks what it is)."""
    if name is not None:
        block = dask_block(block, start, name)
    if order is not None:
        block = np.flip(block.transpose(np.argsort(order)), flips)
    return summarize(block, start, spec), []


@_task
def _in_task(fn, run: str, source, *args):
    """``fn(source, *args)`` in a task, after checking (once per process and graph: ``run``,
    new for every graph built, which the keys do not depend on) that the source can be read
    here: a store that this worker cannot open is an error naming the store and the worker,
    never chunks read as their fill value."""
    if run not in _VERIFIED:
        try:
            source.verify()
        except Exception as e:
            raise SourceError(f"cannot read {source.name} on {_here()}: {e}") from None
        _VERIFIED.add(run)
    return fn(source, *args)


_VERIFIED: set[str] = set()  # the graphs whose sources this process has verified


def _here() -> str:
    try:
        from distributed import get_worker

        return f"worker {get_worker().address}"
    except (ImportError, ValueError):  # not in a distributed worker
        return f"{socket.gethostname()} (process {os.getpid()})"


@_task
def _combine(cap: int, *parts: tuple[Summary, list]) -> tuple[Summary, list]:
    errors = [e for _, errs in parts for e in errs]
    return merge_all([s for s, _ in parts], cap), errors


@_task
def _finish_member(part: tuple[Summary, list], missing, spec: ScanSpec, meta: dict):
    summary, errors = part
    return build_report(spec, meta, summary, errors, missing, True)


@_task
def _finish_set(*args):
    """``report.build.finish`` of a set's reports, in a task."""
    return finish(*args)


SET_PART = 1024  # small members of a set a task scans together


def _delayed_set(plan: ScanPlan):
    """A set of files as a graph: its small ``.npy`` files (``SMALL_NPY`` bytes at most, by
    their size here) and the small members of its tars and checkpoints (those read whole,
    and labels) in tasks of ``SET_PART``, each part scanned together where it runs as the
    local engine scans it (``engines.batched``: a task a member cost a hundred times their
    scan, 100 s for 10,000 files of 1 KB on two workers); any other member its own graph;
    a last task puts their reports in the set's order."""
    from dask import delayed

    entries, target = plan.entries, plan.target
    files, reopen = target.files, {first: span for first, *span in target.reopen}
    together = target.raw.keys() | target.skips.keys()  # a file's members read whole, labels
    opts, twin = plan.options, plan.twin_max
    parts: list = []
    run: list[int] = []  # consecutive small .npy files

    def flush() -> None:
        if run:
            keys = [entries[i][0] for i in run]
            task = delayed(_scan_files, pure=True)(plan.layout, keys, [files[k] for k in keys], opts, twin)  # fmt: skip
            parts.append(("together", task))
            run.clear()

    def alone(i: int) -> bool:
        """A member's own graph; False when it cannot be opened (the error kept in
        ``parts``: a part before it may hold the set's first error)."""
        try:
            for m in plan.members([entries[i]]):  # one with a skip reason: skipped here
                parts.append(("alone", m.path, _member_graph(m, plan)))
                plan.groups += [g for g in kernel_groups(m.spec) if g not in plan.groups]
                if m.source.reads_in_tasks:
                    m.source.unmap()
        except FastFiniteError as e:
            parts.append(("error", e))
            return False
        return True

    i, opened = 0, True
    while i < len(entries) and opened:
        key = entries[i][0]
        if i in reopen:  # a file's members (a tar's, a checkpoint's): runs of small ones
            flush()
            stop, opener = reopen[i]
            j = i
            while j < stop and opened:
                k = j
                while k < stop and k - j < SET_PART and entries[k][0] in together:
                    k += 1
                if k == j:
                    opened = alone(j)
                    j += 1
                    continue
                keys = [name for name, _ in entries[j:k]]
                task = delayed(_scan_reopened, pure=True)(plan.layout, opener, j - i, keys, opts, twin)  # fmt: skip
                parts.append(("together", task))
                j = k
            i = stop
            continue
        if key in files and _small_file(files[key]):
            run.append(i)
            if len(run) == SET_PART:
                flush()
        else:
            flush()
            opened = alone(i)
        i += 1
    flush()
    keys = [k for k, _ in entries]
    return delayed(_finish_files, pure=True)(
        plan.layout, parts, keys, dict(plan.skipped), dict(plan.findings)
    )


def _small_file(path: str) -> bool:
    """A file the batched scan reads whole (or one it cannot look at: a task says why)."""
    from ..sources.small import SMALL_NPY

    try:
        return os.stat(path).st_size <= SMALL_NPY
    except OSError:
        return True


@_task
def _scan_files(layout, keys: list[str], paths: list[str], options, twin_max: int) -> tuple:
    """Small ``.npy`` files of a set scanned together (``_scan_part``)."""
    from ..sources.shards import npy_files

    return _scan_part(layout, npy_files(keys, paths, options), options, twin_max)


@_task
def _scan_reopened(layout, opener, first: int, keys: list[str], options, twin_max: int):
    """The members ``first:first + len(keys)`` of a file of a set, opened again here
    (``opener``: ``ShardSet.reopen``'s), scanned together (``_scan_part``); an error when
    they are no longer those keys."""
    from ..sources.open import named_members
    from ..sources.shards import ShardSet

    path = opener.args[0]
    try:
        with reader_errors(path):
            part = _listing(opener)[first : first + len(keys)]
        if [k for k, _ in part] != keys:
            raise SourceError(f"{path} changed while it was scanned: its members are not those listed")  # fmt: skip
    except FastFiniteError as e:
        if options.on_error != "report":
            return e  # raised by ``_finish_files`` if no member before it failed
        lost = ScanPlan(layout, [], options, [])
        for key in keys:  # each member listed as unreadable, as a file that cannot be
            lost.skip(key, SkippedMemberError(f"cannot be read: {e}", "unreadable_member"))
        return MemberReports.joined([]), lost.skipped, lost.findings
    target = ShardSet(part, [path])  # its raw and skips, from the factories
    target[:] = named_members(part, layout.name)  # as ``open_source`` names them
    return _scan_part(layout, target, options, twin_max)


def _listing(opener) -> list:
    """``opener()``, the members of a file, listed once per process while the file is
    unchanged (by its stat): the tasks of the parts of one file that land on one worker
    list it once (a checkpoint of 60,000 tensors: a second each). Only a file that holds
    its members' bytes itself (not a sharded checkpoint's index or folder, whose shards
    may change under it), not written within a tick of the clock."""
    import pickle

    path = opener.args[0]
    st = os.stat(path)
    key = (pickle.dumps(opener), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _LISTED_LOCK:
        got = _LISTED.get(key)
    if got is None:
        got = opener()
        settled = time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > 2e9
        if stat.S_ISREG(st.st_mode) and not path.endswith(".json") and settled:
            with _LISTED_LOCK:
                _LISTED.clear()  # one file's members kept, the last one's
                _LISTED[key] = got
    return got


_LISTED: dict = {}
_LISTED_LOCK = threading.Lock()


def _scan_part(layout, target, options, twin_max: int) -> tuple:
    """A part of a set scanned together (``batched.scan_set``) in this task, on one thread
    (Dask owns the cores): ``(its members' reports, skipped, findings)``."""
    from dataclasses import replace

    part = ScanPlan(layout, target, replace(options, workers=1), list(target), twin_max)

    def alone(entries: list):
        for m in part.members(entries):
            yield m, scan_member(m, part)

    try:
        reports = batched.scan_set(part, alone)
    except FastFiniteError as e:  # raised by ``_finish_files`` if no member before it failed
        return e
    return reports, part.skipped, part.findings


@_task
def _finish_files(layout, parts: list, keys: list[str], skipped: dict, findings: dict):
    """The report of a set of files from its parts, in the set's order (``_delayed_set``):
    the skipped entries and findings in its order too, as the local engine gives them;
    the first error of a part, in the set's order, raised."""
    members: list = []
    for how, *got in parts:
        if how == "error" or isinstance(got[0], FastFiniteError):  # the set's first, in order
            raise got[0]
        if how == "together":  # (its members' reports, skipped, findings)
            reports, part_skipped, part_findings = got[0]
            members.append(reports)
            skipped.update(part_skipped)
            findings.update(part_findings)
        else:  # (key, report)
            members.append(tuple(got))
    batched.in_set_order(keys, skipped, findings)
    reports = MemberReports.joined(members)
    return finish(layout, reports, skipped, True, list(findings.values()))


def _member_graph(member: Member, plan: ScanPlan):
    """One member's graph: leaves, the tree reduction, its report."""
    from dask.base import tokenize
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    opts, source, spec = plan.options, member.source, member.spec
    dsk: dict = {}
    missing = None
    x = source.dask_array
    if x is not None:
        token = tokenize("fastfinite-array", x.name, spec, opts.split_every)
        offsets = [list(accumulate(ax, initial=0)) for ax in x.chunks]
        leaves = [
            (
                _leaf_block,
                (x.name, *idx),
                tuple(int(o[i]) for o, i in zip(offsets, idx)),
                spec,
                None,
                (),
                source.name,
            )  # fmt: skip
            for idx in np.ndindex(*x.numblocks)
        ]
    elif not source.reads_in_tasks:  # values in this process: the graph carries them
        blocks = [(r, source.read(r)) for r in member.regions()]
        token = tokenize("fastfinite-blocks", blocks, spec, opts.split_every)  # regions, values
        leaves = [
            (_leaf_block, view, tuple(s.start for s in r), spec, order, flips)
            for r, (view, order, flips) in ((r, memory_view(b)) for r, b in blocks)
        ]
    else:
        token = tokenize(
            "fastfinite-source", source.location, source.shape, str(source.dtype), spec,
            member.region_bytes, opts.on_error, opts.split_every,
        )  # fmt: skip
        skey = f"fastfinite-source-{token}"
        run = uuid.uuid4().hex
        dsk[skey] = source
        if source.storage is not None:
            missing = f"fastfinite-missing-{token}"
            dsk[missing] = (_in_task, type(source).missing_units, run, skey)
        leaves = [
            (_in_task, scan_region_or_units, run, skey, r, spec, opts.on_error)
            for r in member.regions()
        ]
    keys = []
    for i, task in enumerate(leaves or [(_combine, 0)]):  # no region: an empty summary
        dsk[(f"fastfinite-chunk-{token}", i)] = task
        keys.append((f"fastfinite-chunk-{token}", i))
    # a fan-in of a power of two makes the tree the local engine's (``merge_all``'s)
    fan = 1 << (opts.split_every.bit_length() - 1)
    level = 0
    while len(keys) > 1:
        name = f"fastfinite-combine-{level}-{token}"
        keys, below = [], keys
        for j in range(0, len(below), fan):
            dsk[(name, j // fan)] = (_combine, spec.max_locations, *below[j : j + fan])
            keys.append((name, j // fan))
        level += 1
    meta = report_meta(source)  # the values' token does not cover the name and labels
    final = f"fastfinite-report-{tokenize(token, {**meta, 'labels': source.labels_token()})}"
    dsk[final] = (_finish_member, keys[0], missing, spec, meta)
    deps = [x] if x is not None else []
    return Delayed(final, HighLevelGraph.from_collections(final, dsk, dependencies=deps))


def compute(lazy, scheduler, progress: bool, timeout: float = 30.0, groups=()):
    """Compute a delayed scan on ``scheduler`` (see ``scan``). A scheduler that cannot be
    reached, is not a Dask scheduler, is lost, or has no workers for ``timeout`` seconds is
    a ``SourceError`` that says so, in bounded time."""
    if scheduler is None or (isinstance(scheduler, str) and scheduler in LOCAL_SCHEDULERS):
        if progress:
            from dask.diagnostics import ProgressBar

            with ProgressBar(out=sys.stderr):  # stdout may be the report (--json -)
                return lazy.compute(scheduler=scheduler)
        return lazy.compute(scheduler=scheduler)
    if isinstance(scheduler, str):
        address = parse_address(scheduler)
        with _connect(address, timeout) as client:
            return _on_client(client, lazy, progress, timeout, address, groups)
    if type(scheduler).__name__ == "Client":
        return _on_client(scheduler, lazy, progress, timeout, scheduler.scheduler.address, groups)  # fmt: skip
    raise InvalidArgumentError(
        f"scheduler {scheduler!r} is not a scheduler name, Client or address"
    )


def _connect(address: str, timeout: float):
    """A ``distributed.Client`` of the scheduler at ``address``, in bounded time."""
    import dask
    from distributed import Client

    made: dict = {}

    def connect() -> None:  # in a thread: a silent peer holds distributed's handshake
        try:
            with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}):
                made["client"] = Client(address, timeout=timeout, set_as_default=False)
        except Exception as e:
            made["error"] = e

    thread = threading.Thread(target=connect, name="fastfinite-connect", daemon=True)
    thread.start()
    thread.join(timeout + 5)
    if "client" not in made:
        e = made.get("error")
        why = f"{type(e).__name__}: {e}".strip() if e else f"no answer in {timeout:g} s"
        raise SourceError(f"cannot reach a Dask scheduler at {address} ({why})")
    return made["client"]


def _wait_for_workers(client, timeout: float, address: str) -> None:
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise SourceError(
            f"the Dask scheduler at {address} has no workers ({timeout:g} s)"
        ) from None


def _on_client(client, lazy, progress: bool, timeout: float, address: str, groups=()):
    """The scan's result from ``client``, watching the scheduler and its workers."""
    _wait_for_workers(client, timeout, address)
    _prepare_workers(client, groups)
    future = client.compute(lazy)
    if progress:
        _show(client, future)
    since = None  # when the scheduler went away, or its last worker
    while True:
        try:
            return future.result(timeout=1)
        except TimeoutError:
            pass
        except (CancelledError, OSError) as e:  # the connection to the scheduler is gone
            if future.status not in ("pending", "finished", "error") or client.status != "running":
                raise SourceError(
                    f"lost the Dask scheduler at {address} ({type(e).__name__})"
                ) from None
            raise
        workers = client.scheduler_info().get("workers", {}) if client.status == "running" else {}
        since = None if workers else since or time.monotonic()
        if since is not None and time.monotonic() - since > timeout:
            future.cancel()
            what = "lost" if client.status != "running" else "no workers at"
            raise SourceError(f"{what} the Dask scheduler at {address} for {timeout:g} s")


def _show(client, futures) -> None:
    """distributed's progress bar of ``futures``, watching ``client``'s scheduler (by
    default it looks for a default client, which a client of ours is not), drawn on stderr
    as every progress bar of a scan (it writes to stdout, which may be the report)."""
    from contextlib import redirect_stdout

    from distributed import progress as show

    with redirect_stdout(sys.stderr):
        show(futures, scheduler=client.scheduler.address)


def cached_scan(plan: ScanPlan, scheduler, progress: bool, timeout: float = 30.0):
    """A scan with a cache on ``scheduler``: the regions the cache does not recall are Dask
    tasks, each summary is written to the cache as it arrives, so a lost cluster loses no
    finished work, and the client folds recalled and new summaries in the local engine's
    tree (the same report)."""
    client, own = None, False
    if isinstance(scheduler, str) and scheduler not in LOCAL_SCHEDULERS:
        client, own = _connect(parse_address(scheduler), timeout), True
    elif type(scheduler).__name__ == "Client":
        client = scheduler
    elif scheduler is not None and not isinstance(scheduler, str):
        raise InvalidArgumentError(
            f"scheduler {scheduler!r} is not a scheduler name, Client or address"
        )
    try:
        reports = {}
        for member in plan.members():
            memory = member.memory
            source, spec = member.source, member.spec
            if client is not None:
                _prepare_workers(client, kernel_groups(spec))
            steps = memory.steps
            todo = [st for st in steps if not st.cached]
            run = uuid.uuid4().hex
            skey = f"fastfinite-source-{run}"
            on_error = plan.options.on_error
            leaves: dict = {
                (f"fastfinite-cached-{run}", i): (
                    _in_task,
                    scan_region_or_units,
                    run,
                    skey,
                    st.regions[0],
                    spec,
                    on_error,
                )
                for i, st in enumerate(todo)
            }
            done: dict[int, tuple] = {}
            try:
                for (_, i), result in _results(
                    leaves, skey, source, client, scheduler, timeout, progress
                ):
                    summary, errors = result
                    done[i] = (summary, errors, memory.leaf(todo[i], summary, errors))
            finally:
                memory.flush()
            merger = memory.merger  # the leaves were kept as they came: folded in order
            failed: list = []
            fresh = iter(range(len(todo)))
            for st in steps:
                if st.cached:
                    merger.add(st.summary, st.level, st.key)
                    continue
                summary, errors, key = done[next(fresh)]
                failed.extend(errors)
                merger.add(summary, 0, key)
            missing = memory.fingerprints.missing()
            if missing is None and source.storage is not None:
                missing = source.missing_units()
            memory.end(True)
            summary, meta = merger.result(), report_meta(source)
            reports[member.path] = build_report(spec, meta, summary, failed, missing, True, True)
        return finish(plan.layout, reports, dict(plan.skipped), True, list(plan.findings.values()))
    finally:
        if own:
            client.close()


def _results(leaves: dict, skey: str, source, client, scheduler, timeout: float, progress):
    """``(key, result)`` of each task of ``leaves`` (which read ``source``, held at
    ``skey``) as it finishes: on a distributed client as they come, else in batches on the
    local scheduler."""
    if not leaves:
        return
    keys = list(leaves)
    leaves = {skey: source, **leaves}
    if client is None:
        from dask.base import get_scheduler

        get = get_scheduler(scheduler=scheduler) or get_scheduler(scheduler="threads")
        batch = 4 * (os.cpu_count() or 1)
        for i in range(0, len(keys), batch):
            part = keys[i : i + batch]
            yield from zip(part, get({skey: source, **{k: leaves[k] for k in part}}, part))
        return
    from distributed import as_completed

    address = client.scheduler.address
    _wait_for_workers(client, timeout, address)
    futures = client.get(leaves, keys, sync=False)
    if progress:
        _show(client, futures)
    index = {f.key: k for f, k in zip(futures, keys)}
    try:
        # on ``client``'s loop: a client connected to an address is nobody's default
        for f in as_completed(futures, loop=client.loop):
            yield index[f.key], f.result()
    except (CancelledError, OSError) as e:
        raise SourceError(f"lost the Dask scheduler at {address} ({type(e).__name__})") from None
