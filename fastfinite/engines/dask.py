"""The Dask engine: a plan as a graph. One kernel task per region of each member (the
``local`` engine's regions), a tree reduction of the small summaries (fan-in
``split_every``), a task that builds each member's report and one that puts them together.

The leaves take their values where they are:

- a dask array's own blocks, computed where the graph computes them;
- an array in this process: its regions, carried by the graph (each task ships its block);
- a store or file (Zarr, HDF5, ``.npy``, Parquet): each task opens it and reads its own
  region where it runs, so on a cluster no array data leaves the client.

Building the graph computes nothing; keys are derived from a token of the inputs, so the
same scan gives the same keys. Kernels run serially inside tasks: Dask owns the cores.
"""

from __future__ import annotations

import os
import socket
from itertools import accumulate

import numpy as np

from ..blocks import memory_view
from ..build import build_report, finish, report_meta
from ..errors import InvalidArgumentError, SourceError
from ..plan import Member, ScanPlan
from ..summarize import scan_region_or_units, summarize
from ..summary import ScanSpec, Summary, merge_all

LOCAL_SCHEDULERS = ("threads", "processes", "synchronous", "sync", "single-threaded")


def delayed_scan(plan: ScanPlan):
    """The scan as a ``dask.delayed`` ScanReport (nothing is computed)."""
    from dask import delayed

    reports = {m.path: _member_graph(m, plan) for m in plan.members()}
    return delayed(finish, pure=True)(plan.layout, reports, dict(plan.skipped))


def _leaf_block(block: np.ndarray, start: tuple[int, ...], spec: ScanSpec, order=None, flips=()):
    """Scan a block; ``order`` and ``flips``: it was shipped as its memory view (a pickle
    copies a view in C order), laid out again here as the local engine sees it."""
    if order is not None:
        block = np.flip(block.transpose(np.argsort(order)), flips)
    return summarize(block, start, spec), []


def _in_task(fn, source, *args):
    """``fn(source, *args)`` in a task, after checking the source can be read here: a store
    that this worker cannot open is an error naming the store and the worker, never chunks
    read as their fill value."""
    try:
        source.verify()
    except Exception as e:
        raise SourceError(f"cannot read {source.name} on {_here()}: {e}") from None
    return fn(source, *args)


def _here() -> str:
    try:
        from distributed import get_worker

        return f"worker {get_worker().address}"
    except (ImportError, ValueError):  # not in a distributed worker
        return f"{socket.gethostname()} (process {os.getpid()})"


def _combine(cap: int, *parts: tuple[Summary, list]) -> tuple[Summary, list]:
    errors = [e for _, errs in parts for e in errs]
    return merge_all([s for s, _ in parts], cap), errors


def _finish_member(part: tuple[Summary, list], missing, spec: ScanSpec, meta: dict):
    summary, errors = part
    return build_report(spec, meta, summary, errors, missing, True)


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
            (_leaf_block, (x.name, *idx), tuple(int(o[i]) for o, i in zip(offsets, idx)), spec)
            for idx in np.ndindex(*x.numblocks)
        ]
    elif not source.reads_in_tasks:  # values in this process: the graph carries them
        blocks = [(r, source.read(r)) for r in member.regions()]
        token = tokenize("fastfinite-blocks", [b for _, b in blocks], spec, opts.split_every)
        leaves = [
            (_leaf_block, view, tuple(s.start for s in r), spec, order, flips)
            for r, (view, order, flips) in ((r, memory_view(b)) for r, b in blocks)
        ]
    else:
        token = tokenize(
            "fastfinite-source", source.name, source.shape, str(source.dtype), spec,
            member.region_bytes, opts.on_error, opts.split_every,
        )  # fmt: skip
        skey = f"fastfinite-source-{token}"
        dsk[skey] = source
        if source.storage is not None:
            missing = f"fastfinite-missing-{token}"
            dsk[missing] = (_in_task, type(source).missing_units, skey)
        leaves = [
            (_in_task, scan_region_or_units, skey, r, spec, opts.on_error) for r in member.regions()
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
    final = f"fastfinite-report-{token}"
    dsk[final] = (_finish_member, keys[0], missing, spec, report_meta(source))
    deps = [x] if x is not None else []
    return Delayed(final, HighLevelGraph.from_collections(final, dsk, dependencies=deps))


def compute(lazy, scheduler, progress: bool):
    """Compute a delayed scan on ``scheduler`` (see ``scan``)."""
    if scheduler is None or (isinstance(scheduler, str) and scheduler in LOCAL_SCHEDULERS):
        if progress:
            from dask.diagnostics import ProgressBar

            with ProgressBar():
                return lazy.compute(scheduler=scheduler)
        return lazy.compute(scheduler=scheduler)
    if isinstance(scheduler, str):
        if "://" not in scheduler:
            raise InvalidArgumentError(
                f"scheduler must be 'threads', 'processes', 'synchronous', a distributed "
                f"Client or an address like 'tcp://host:port'; got {scheduler!r}"
            )
        from distributed import Client

        try:
            client = Client(scheduler, timeout="10s", set_as_default=False)
        except OSError as e:
            raise SourceError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
        with client:
            return _on_client(client, lazy, progress)
    if type(scheduler).__name__ == "Client":
        return _on_client(scheduler, lazy, progress)
    raise InvalidArgumentError(
        f"scheduler {scheduler!r} is not a scheduler name, Client or address"
    )


def _on_client(client, lazy, progress: bool):
    future = client.compute(lazy)
    if progress:
        from distributed import progress as show

        show(future)
    return future.result()
