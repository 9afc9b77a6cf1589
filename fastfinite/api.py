"""``scan`` and ``assert_finite``: validate the options, plan the scan, run it on an engine,
replay the standardization where asked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, NonFiniteError
from .model.kinds import fails
from .options import parse_bool, parse_kinds, parse_scheduler, scan_options
from .report.build import failure_message
from .report.model import ScanReport


def scan(
    data: Any,
    *,
    cast: str | tuple[str, ...] | None = ("float32",),
    max_locations: int = 100,
    workers: int | None = None,
    progress: bool = False,
    fail_fast: bool = False,
    on_error: str = "raise",
    region_bytes: int | None = None,
    scheduler: Any = None,
    compute: bool = True,
    split_every: int | None = None,
    by: int | tuple[int, ...] | None = None,
    z_threshold: float = 10.0,
    localize: bool = False,
    eps: float = 1e-8,
    storage_options: dict | None = None,
    concurrency: int = 64,
    timeout: float = 30.0,
    send_credentials: bool = True,
    scale: float | str | None = None,
    device_copy: bool = False,
    raw_dtype: str | None = None,
    cache: str | None = None,
) -> ScanReport:
    """Scan ``data`` for NaN, inf and cast risks in one streaming pass.

    Parameters
    ----------
    data : array_like, numpy.memmap, zarr.Array, zarr.Group, h5py.Dataset, xarray object, or str
        A numpy array of any shape, layout and byte order; a ``zarr.Array`` or ``zarr.Group``
        (every array in it, recursively: ``report.arrays``); an ``h5py.Dataset`` or group; an
        ``xarray.DataArray`` or ``Dataset``; or a path: a ``.npy`` file (opened as a read-only
        memmap), a Zarr store or an array or group inside it (``"data.zarr/train/x"``, a
        ``.zip`` store, or an fsspec URL such as ``"s3://bucket/data.zarr"``), or
        ``"file.h5:/group/dataset"``. Checkpoints, one member of ``report.arrays`` per
        tensor keyed by its name: a ``.safetensors`` file, a sharded one through its
        ``*.safetensors.index.json`` or the directory holding it, a ``.gguf`` file (the
        ``gguf`` package; quantized tensors dequantized block by block), a ``.npz``, a
        PyTorch ``.pt``/``.pth``/``.bin`` (read without torch; its pickle is never run:
        any global but tensors, storages and plain containers is refused); and a ``dict``
        (nested dicts too) of arrays, keyed ``"layers.0.w"``. Shard sets, one member per
        file (per array of a file of several), keyed by its path relative to the folder: a
        directory of array files of any kind, a glob (``"train/**/*.npy"``) or a list of
        paths; WebDataset ``.tar`` shards, read in place (``"shard-000000.tar/000005.x.npy"``);
        Arrow IPC / Feather files and ``datasets`` folders, as tables (lists of numbers of
        one length as 2-D arrays). ``report.bad_samples()`` lists the bad ones' keys.
    cast : str or tuple of str, optional
        Narrower float formats to check casts to: ``"float32"``, ``"float16"``,
        ``"bfloat16"``. ``None`` or ``()`` checks none.
    max_locations : int
        Positions recorded per kind of finding.
    workers : int, optional
        Threads to use; by default every core for large input and one for small input.
    progress : bool
        Show a progress bar (tqdm) in bytes (one over the whole of a set of files). This and every other flag (``fail_fast``,
        ``compute``, ``localize``, ``send_credentials``, ``device_copy``) is ``True`` or
        ``False`` (or a ``numpy.bool_``): anything else, ``"no"``, ``None``, even ``0`` or
        ``1``, is an ``InvalidArgumentError`` naming the option.
    fail_fast : bool
        Stop at the first region holding a non-finite value; ``report.complete`` is then
        False unless that was the last region.
    on_error : {"raise", "report"}
        A chunk that cannot be read raises ``ChunkReadError``, or becomes an
        ``"unreadable_chunk"`` finding; a tensor of a checkpoint that cannot be read (a
        header that lies, a missing shard) raises ``SourceError`` naming the file and the
        tensor, or is listed in ``report.skipped`` with an ``"unreadable_member"`` finding,
        the other tensors scanned.
    region_bytes : int, optional
        Size of the regions read and scanned at once, by every engine (findings are flagged
        by region): for arrays in memory, whose regions are views, the whole array below 32
        MiB, else an eighth of it, 4 to 64 MiB (with ``by``: the whole array up to 64 MiB,
        else up to 128 MiB, as many regions as a multiple of ``workers``); 4 MiB for stores,
        rounded to whole storage chunks. Peak memory is about ``2 * workers`` regions read
        (none for views).
    scheduler : str or distributed.Client, optional
        Run the scan as a Dask graph on this scheduler: ``"threads"``, ``"processes"``,
        ``"synchronous"``, a ``distributed.Client``, or a scheduler address
        ``"tcp://host:port"`` (a client is connected to it for the scan's duration, with or
        without ``cache``). Dask arrays always run as a graph, on the active scheduler by
        default. For Zarr, HDF5 and ``.npy`` sources each task opens the store and reads its
        own chunks.
    compute : bool
        False returns a ``dask.delayed`` object whose result is the ScanReport.
    split_every : int, optional
        Fan-in of the graph's tree reduction of summaries (default 8), rounded down to a
        power of two: the local engine's merge order, so every engine gives the same bits.
    by : int or tuple of int, optional
        Keep statistics per slice along these axes (``by=0``: per sample, ``by=-1``: per
        feature), in the same pass: ``report.slices``; and report the variance anomalies
        that make standardizing a slice explode as findings (``nonfinite``,
        ``zero_variance``, ``near_zero_variance``, ``sum_overflow:DTYPE``,
        ``variance_overflow:DTYPE``, ``outlier``).
    z_threshold : float
        A slice whose largest |z| exceeds this is an ``outlier`` (default 10).
    localize : bool
        Afterwards, replay ``(x - mean) / (std + eps)`` under ``np.errstate(all="raise")`` on
        the flagged slices or regions only, and record where NumPy fails in
        ``report.localized`` (see :func:`fastfinite.localize`).
    eps : float
        The ``eps`` of that replay (default 1e-8).
    storage_options : dict, optional
        How to reach a store given by URL (``s3://...``): the options of its fsspec
        filesystem, e.g. ``{"key": ..., "secret": ..., "endpoint_url": ...}``.
    concurrency : int
        Requests kept in flight to a store reached over a network (default 64; its
        connection pool is sized to match). Decoded regions in flight stay under 256 MiB.
    timeout : float
        Seconds before a store or a Dask scheduler that does not answer, or a cluster without
        workers, is an error (default 30).
    send_credentials : bool
        With a Dask scheduler, whether the secrets of ``storage_options`` (key, secret,
        token...) travel in the task graph (default); False keeps them out of it: each
        worker then reads with credentials of its own (environment, profile, instance role).
    scale : float or "amax", optional
        Check each cast target on ``x`` scaled as FP8 training recipes scale it:
        ``(x.astype(float32) * scale).astype(target)``. ``"amax"``: the scale is
        ``target max / amax`` per tensor, or per slice with ``by``. The risks found are
        ``report.cast``; ``report.dynamic_range`` gives amax, the scale, the smallest normal
        magnitude in the data's units and how many values underflow. A second pass over
        the data on the local engine (a kernel for a scale per tensor; NumPy per slice).
    device_copy : bool
        A tensor on an accelerator (``__dlpack_device__`` not the CPU) is copied to the host
        one region at a time; by default it is an error naming its device.
    raw_dtype : str, optional
        The format of data held as raw bytes: ``np.save`` of an ml_dtypes array writes
        ``|V2`` (bfloat16) or ``|V1`` (float8) and no more, so a ``.npy`` of bfloat16 data
        is read as bfloat16 with ``raw_dtype="bfloat16"``. Data whose dtype is not raw
        bytes of the format's size is an error.

    Returns
    -------
    ScanReport, or a ``dask.delayed`` of one when ``compute=False``

    Examples
    --------
    >>> import numpy as np, fastfinite
    >>> x = np.zeros((3, 4)); x[2, 1] = np.nan
    >>> r = fastfinite.scan(x)
    >>> r.nan, r.locations[0].index
    (1, (2, 1))
    """
    opts = scan_options(
        cast=cast,
        max_locations=max_locations,
        workers=workers,
        progress=progress,
        fail_fast=fail_fast,
        on_error=on_error,
        region_bytes=region_bytes,
        split_every=split_every,
        by=by,
        z_threshold=z_threshold,
        eps=eps,
        storage_options=storage_options,
        concurrency=concurrency,
        timeout=timeout,
        send_credentials=send_credentials,
        scale=scale,
        device_copy=device_copy,
        raw_dtype=raw_dtype,
        cache=cache,
    )
    compute, localize = parse_bool("compute", compute), parse_bool("localize", localize)
    scheduler = parse_scheduler(scheduler)
    if localize and not compute:
        raise InvalidArgumentError(
            "localize=True re-reads the flagged data after the scan: it needs "
            "compute=True (call fastfinite.localize(data, report) on the computed report)"
        )
    if opts.scale is not None and localize:
        raise InvalidArgumentError(
            "localize replays the unscaled casts; it cannot be combined with scale="
        )
    if opts.scale is not None and (scheduler is not None or not compute):
        raise InvalidArgumentError(
            "scale= checks the scaled casts in a second pass on the local engine: it "
            "cannot be combined with scheduler= or compute=False"
        )
    targets = opts.cast
    if opts.scale is not None:  # the first pass checks no unscaled cast
        opts = replace(opts, cast=())
    if opts.cache is not None and (fail_fast or not compute):
        raise InvalidArgumentError(
            "cache= keeps whole scans, written as they run: it cannot be combined with "
            + ("fail_fast" if fail_fast else "compute=False")
        )
    return _run(data, opts, scheduler, compute, progress, localize, targets)


def _run(data, opts, scheduler, compute, progress, localize, targets):
    """Plan the scan of ``data`` with ``opts`` (checked), run it on its engine, then the
    scaled casts, the replay and the cache's record of it."""
    from .engines.plan import make_plan

    plan = make_plan(data, opts)
    graph = scheduler is not None or not compute or plan.lazy
    if graph and opts.fail_fast:
        raise InvalidArgumentError(
            "fail_fast stops a sequential scan; it cannot be combined with a Dask graph "
            "(a dask array, scheduler= or compute=False)"
        )
    if opts.cache is not None:
        from .cache.store import ScanCache

        plan.cache = ScanCache(opts.cache)
    try:
        with np.errstate(all="ignore"):  # the data's overflows are findings (compute/pools.py)
            if graph:
                from .engines import dask

                if not compute:
                    return dask.delayed_scan(plan)
                report = (
                    dask.compute(
                        dask.delayed_scan(plan), scheduler, progress, opts.timeout, plan.groups
                    )
                    if plan.cache is None
                    else dask.cached_scan(plan, scheduler, progress, opts.timeout)
                )
            else:
                from .engines import local

                report = local.run(plan)
            if opts.scale is not None:
                from .compute.parts import default_workers
                from .compute.pools import bounded_map
                from .passes.scaled import scaled_target

                budget = lambda source: opts.region_bytes or source.region_bytes  # noqa: E731
                workers = opts.workers or default_workers()
                mapper = lambda fn, regions: bounded_map(fn, regions, workers)  # noqa: E731
                scaled_target(plan.target, report, targets, opts.scale, opts.by, budget, mapper)
            if localize and not report.clean:  # outliers and constant slices are replayed too
                from .passes.localize import localize_target

                localize_target(plan.target, report, opts.eps)
            if plan.cache is not None:
                from .cache.recall import record

                record(plan, report, data)
            return report
    finally:
        if plan.cache is not None:
            plan.cache.close()


def assert_finite(data: Any, *, fail_on: Any = None, **kwargs: Any) -> ScanReport:
    """Scan ``data`` and return the report if no error was found, else raise.

    Parameters
    ----------
    data : array_like or path
        As for :func:`scan`.
    fail_on : str or set of str, optional
        The kinds that fail the check (default: ``"error"``, what makes NaN or inf: the
        report is not ``ok``), as ``--fail-on`` takes them: ``"nonfinite"``,
        ``{"nan", "overflow:float16"}``, ``"warning"`` (everything found)... An unknown
        name is an error.
    **kwargs
        Passed to :func:`scan`.

    Raises
    ------
    NonFiniteError
        With the counts and the first coordinates, e.g. ``nan 1 at (2, 1)``.
    """
    kinds = parse_kinds(fail_on)
    report = scan(data, **kwargs)
    if not fails(report.kinds_found(), kinds):
        return report
    raise NonFiniteError(failure_message(report), report)
