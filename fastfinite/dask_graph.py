"""Scans as Dask graphs: one kernel task per block (or source region), a tree reduction of the
small summaries (fan-in ``split_every``), and a last task that builds the ScanReport.

Two kinds of leaves:

- a dask array: each task receives one block from the array's own graph and scans it with the
  block's global offset, so locations carry global coordinates;
- a source (Zarr, HDF5, ``.npy``): each task reads its own region from the store, so on a
  distributed cluster the workers read their chunks and no array data leaves the client.

Building the graph computes nothing; keys are derived from a token of the inputs, so the
same scan gives the same keys. Kernels run serially inside tasks: Dask owns the cores.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import numpy as np

from .summary import ScanSpec, Summary, merge_all, summarize

DEFAULT_SPLIT_EVERY = 8


def is_dask_array(obj: Any) -> bool:
    return type(obj).__module__.startswith("dask") and type(obj).__name__ == "Array"


def _leaf_block(block: np.ndarray, start: tuple[int, ...], spec: ScanSpec):
    return summarize(block, start, spec), []


def _leaf_region(source, region, spec: ScanSpec, on_error: str):
    """Read one region of a source in the worker and scan it (see ``engine.scan_region``)."""
    from .engine import scan_region_or_units

    return scan_region_or_units(source, region, spec, on_error)


def _combine(cap: int, *parts: tuple[Summary, list]) -> tuple[Summary, list]:
    errors = [e for _, errs in parts for e in errs]
    return merge_all([s for s, _ in parts], cap), errors


def build_graph(
    leaves: list[tuple],
    spec: ScanSpec,
    finish: tuple,
    token: str,
    split_every: int = DEFAULT_SPLIT_EVERY,
    dependencies: tuple = (),
    literals: dict | None = None,
):
    """Return a ``dask.delayed`` object whose result is ``_finish(root, *finish)``: the
    ScanReport.

    ``leaves`` are task tuples producing ``(Summary, [ChunkReadError, ...])``; ``literals``
    are extra graph entries (a source object, referred to by key from every leaf).
    """
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    if not isinstance(split_every, int) or split_every < 2:
        raise ValueError(f"split_every must be an int >= 2, got {split_every!r}")
    chunk = f"fastfinite-chunk-{token}"
    dsk: dict = dict(literals or {})
    keys = []
    for i, task in enumerate(leaves or [(_empty,)]):
        dsk[(chunk, i)] = task
        keys.append((chunk, i))
    level = 0
    while len(keys) > 1:
        name = f"fastfinite-combine-{level}-{token}"
        nxt = []
        for j in range(0, len(keys), split_every):
            key = (name, j // split_every)
            dsk[key] = (_combine, spec.max_locations, *keys[j : j + split_every])
            nxt.append(key)
        keys = nxt
        level += 1
    final = f"fastfinite-report-{token}"
    dsk[final] = (_finish, keys[0], *finish)
    # one layer holding every task, named for the final key (as Delayed requires)
    graph = HighLevelGraph.from_collections(final, dsk, dependencies=list(dependencies))
    return Delayed(final, graph)


def _empty():
    return Summary(), []


def array_leaves(x, spec: ScanSpec) -> list[tuple]:
    """One task per block of a dask array: ``(_leaf_block, (name, *index), offset, spec)``."""
    offsets = [list(accumulate(ax, initial=0)) for ax in x.chunks]
    leaves = []
    for idx in np.ndindex(*x.numblocks):
        start = tuple(int(o[i]) for o, i in zip(offsets, idx))
        leaves.append((_leaf_block, (x.name, *idx), start, spec))
    return leaves


def source_leaves(
    source_key: str, source, spec: ScanSpec, region_bytes: int, on_error: str
) -> list[tuple]:
    """One task per region of a source; each reads its own region where it runs. The source
    itself sits in the graph once, under ``source_key``."""
    return [
        (_leaf_region, source_key, region, spec, on_error)
        for region in source.regions(region_bytes)
    ]


def _missing(source):
    return source.missing_units() if hasattr(source, "missing_units") else None


def _finish(part: tuple[Summary, list], missing, spec: ScanSpec, meta: dict):
    from .api import build_report

    summary, errors = part
    return build_report(spec, meta, summary, errors, missing, True)


def _token(*parts: Any) -> str:
    from dask.base import tokenize

    return tokenize(*parts)


def delayed_array(x, targets, cap: int, split_every: int, meta: dict, by=None, z=10.0):
    """The scan of a dask array as a ``dask.delayed`` ScanReport."""
    from .api import resolve_by
    from .blocks import check_dtype

    shape = tuple(int(s) for s in x.shape)
    spec = ScanSpec(
        shape, check_dtype(x.dtype), targets, cap, resolve_by(by, len(shape), meta["name"]), z
    )
    token = _token("fastfinite-array", x.name, repr(spec), split_every)
    return build_graph(
        array_leaves(x, spec),
        spec,
        (None, spec, meta),
        token,
        split_every,
        dependencies=(x,),
    )


def delayed_source(
    source,
    targets,
    cap: int,
    on_error: str,
    region_bytes: int | None,
    split_every: int,
    by=None,
    z=10.0,
):
    """The scan of a source (each task reads its own region) as a ``dask.delayed``."""
    from .api import make_spec, report_meta
    from .engine import REGION_BYTES

    spec = make_spec(source, targets, cap, by, z)
    region_bytes = region_bytes or REGION_BYTES
    token = _token(
        "fastfinite-source",
        source.name,
        source.shape,
        str(source.dtype),
        spec,
        region_bytes,
        on_error,
        split_every,
    )
    skey = f"fastfinite-source-{token}"
    mkey = f"fastfinite-missing-{token}"
    leaves = source_leaves(skey, source, spec, region_bytes, on_error)
    return build_graph(
        leaves,
        spec,
        (mkey, spec, report_meta(source)),
        token,
        split_every,
        literals={skey: source, mkey: (_missing, skey)},
    )


def delayed_scan(
    data,
    targets,
    cap: int,
    on_error: str,
    region_bytes: int | None,
    split_every: int | None,
    by=None,
    z=10.0,
):
    """Build (never compute) the graph of a scan of ``data``; a ``dask.delayed`` ScanReport."""
    from dask import delayed

    from .api import group_name, open_source
    from .errors import UnsupportedDtypeError
    from .report import ScanReport

    split_every = DEFAULT_SPLIT_EVERY if split_every is None else split_every
    if is_dask_array(data):
        meta = {"name": "dask array", "unit": "chunk", "fill_value": None, "labels": None}
        return delayed_array(data, targets, cap, split_every, meta, by, z)
    target = open_source(data)
    if isinstance(target, list):
        reports, skipped = {}, {}
        for path, factory in target:
            try:
                source = factory()
            except UnsupportedDtypeError as e:
                skipped[path] = str(e)
                continue
            reports[path] = _delayed_one(
                source, targets, cap, on_error, region_bytes, split_every, by, z
            )
        return delayed(ScanReport.total, pure=True)(group_name(data), reports, skipped)
    return _delayed_one(target, targets, cap, on_error, region_bytes, split_every, by, z)


def _delayed_one(source, targets, cap, on_error, region_bytes, split_every, by, z):
    from .api import report_meta
    from .sources.ndarray import ArraySource
    from .sources.xarray import XarraySource

    if isinstance(source, ArraySource) and source.path is None:
        # in-memory data: let dask cut it into blocks, so a task ships its block only
        import dask.array as da

        from .engine import REGION_BYTES

        chunks = _block_shape(source.shape, source.dtype.itemsize, region_bytes or REGION_BYTES)
        x = da.from_array(source.array, chunks=chunks, name=False)
        return delayed_array(x, targets, cap, split_every, report_meta(source), by, z)
    if isinstance(source, XarraySource) and source.dask_data is not None:
        return delayed_array(
            source.dask_data, targets, cap, split_every, report_meta(source), by, z
        )
    return delayed_source(source, targets, cap, on_error, region_bytes, split_every, by, z)


def _block_shape(shape, itemsize: int, budget: int) -> tuple[int, ...]:
    """Blocks of about ``budget`` bytes, cut along the first axes (C order)."""
    out = list(shape)
    size = itemsize * int(np.prod(shape)) if shape else itemsize
    for ax in range(len(shape)):
        if size <= budget:
            break
        inner = size // max(1, shape[ax])
        out[ax] = max(1, budget // max(1, inner))
        size = inner * out[ax]
    return tuple(max(1, c) for c in out)


def compute_scan(lazy, scheduler, progress: bool):
    """Compute a delayed scan on ``scheduler`` (see ``scan``)."""
    from .errors import InvalidArgumentError

    local = ("threads", "processes", "synchronous", "sync", "single-threaded")
    if scheduler is None or (isinstance(scheduler, str) and scheduler in local):
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
            from .errors import SourceError

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
