"""``scan`` and ``assert_finite``: open the input, run the engine, build the report."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .casts import parse_cast
from .engine import run
from .errors import InvalidArgumentError, NonFiniteError, SourceError, UnsupportedDtypeError
from .report import Finding, Location, ScanReport, _fmt_index
from .summary import ScanSpec

Target = Any  # a source, or a list of (path, source factory) for a group


def open_source(data: Any) -> Target:
    """Return a source for ``data``, or ``[(path, factory), ...]`` for a group of arrays.

    Accepts numpy arrays and memmaps, ``.npy`` paths, Zarr arrays and groups and paths or
    URLs to them, h5py datasets and groups and ``"file.h5:/dataset"`` paths, and xarray
    DataArrays and Datasets.
    """
    from .sources import hdf5, tables, xarray, zarr
    from .sources.ndarray import ArraySource

    if isinstance(data, (str, os.PathLike)):
        return _open_path(os.fspath(data))
    if isinstance(data, np.ndarray):
        return ArraySource(data, name=getattr(data, "filename", None) or "")
    if zarr.is_zarr_array(data):
        return zarr.ZarrSource(data)
    if zarr.is_zarr_group(data):
        return zarr.group_members(data, zarr.array_name(data))
    if hdf5.is_h5_dataset(data):
        return hdf5.H5Source.from_dataset(data)
    if hdf5.is_h5_group(data):
        return hdf5.group_datasets(data)
    if xarray.is_dataarray(data):
        return xarray.XarraySource(data)
    if xarray.is_dataset(data):
        return xarray.dataset_variables(data)
    if tables.is_dataframe(data):
        return tables.dataframe_columns(data)
    if tables.is_series(data):
        return tables.series_source(data)
    if isinstance(data, (list, tuple, int, float, complex, bool, np.generic)) or hasattr(
        data, "__array__"
    ):
        return ArraySource(np.asarray(data))
    raise SourceError(
        f"do not know how to scan an object of type {type(data).__module__}."
        f"{type(data).__qualname__}"
    )


def _open_path(path: str) -> Target:
    from .sources import hdf5, tables, zarr
    from .sources.ndarray import open_npy

    if "://" not in path:
        if path.endswith(".npy"):
            return open_npy(path)
        if path.lower().endswith(tables.PARQUET_SUFFIXES) or (
            os.path.isdir(path) and not _looks_like_zarr(path) and _has_parquet(path)
        ):
            return tables.open_parquet(path)
        h5 = hdf5.split_h5_path(path)
        if h5 is not None:
            return hdf5.open_h5(*h5)
    node = zarr.open_zarr(path)
    if zarr.is_zarr_group(node):
        return zarr.group_members(node, path.rstrip("/"))
    return zarr.ZarrSource(node, name=path)


def _parse_max_locations(max_locations: int) -> int:
    if isinstance(max_locations, bool) or not isinstance(max_locations, (int, np.integer)):
        raise InvalidArgumentError(f"max_locations must be an int >= 0, got {max_locations!r}")
    if max_locations < 0:
        raise InvalidArgumentError(f"max_locations must be >= 0, got {max_locations}")
    return int(max_locations)


def _parse_on_error(on_error: str) -> str:
    if on_error not in ("raise", "report"):
        raise InvalidArgumentError(f"on_error must be 'raise' or 'report', got {on_error!r}")
    return on_error


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
        ``"file.h5:/group/dataset"``.
    cast : str or tuple of str, optional
        Narrower float formats to check casts to: ``"float32"``, ``"float16"``,
        ``"bfloat16"``. ``None`` or ``()`` checks none.
    max_locations : int
        Positions recorded per kind of finding.
    workers : int, optional
        Threads to use; by default every core for large input and one for small input.
    progress : bool
        Show a progress bar (tqdm) in bytes.
    fail_fast : bool
        Stop at the first region holding a non-finite value; ``report.complete`` is then
        False unless that was the last region.
    on_error : {"raise", "report"}
        A chunk that cannot be read raises ``ChunkReadError``, or becomes an
        ``"unreadable_chunk"`` finding.
    region_bytes : int, optional
        Size of the regions read and scanned at once: by default 64 MiB for arrays in
        memory, whose regions are views, and 1 GiB for a float32/float64 array in RAM,
        contiguous in any order, scanned on several cores (each region is cut into one part
        of at most 64 MiB per core, and findings are flagged by part); 4 MiB for stores,
        rounded to whole storage chunks. Peak memory is about ``2 * workers`` regions read
        (none for views).
    scheduler : str or distributed.Client, optional
        Run the scan as a Dask graph on this scheduler: ``"threads"``, ``"processes"``,
        ``"synchronous"``, a ``distributed.Client``, or a scheduler address
        ``"tcp://host:port"``. Dask arrays always run as a graph, on the active scheduler by
        default. For Zarr, HDF5 and ``.npy`` sources each task opens the store and reads its
        own chunks.
    compute : bool
        False returns a ``dask.delayed`` object whose result is the ScanReport.
    split_every : int, optional
        Fan-in of the graph's tree reduction of summaries (default 8).
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
    targets = parse_cast(cast)
    cap = _parse_max_locations(max_locations)
    on_error = _parse_on_error(on_error)
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise InvalidArgumentError(f"workers must be an int >= 1, got {workers!r}")
    if region_bytes is not None and (not isinstance(region_bytes, int) or region_bytes < 1):
        raise InvalidArgumentError(f"region_bytes must be an int >= 1, got {region_bytes!r}")
    by = parse_by(by)
    z_threshold = _parse_float("z_threshold", z_threshold, strict=True)
    eps = _parse_float("eps", eps, strict=False)
    from .dask_graph import is_dask_array

    if is_dask_array(data) or scheduler is not None or not compute:
        if fail_fast:
            raise InvalidArgumentError(
                "fail_fast stops a sequential scan; it cannot be combined with a Dask graph "
                "(a dask array, scheduler= or compute=False)"
            )
        if localize and not compute:
            raise InvalidArgumentError(
                "localize=True re-reads the flagged data after the scan: it needs "
                "compute=True (call fastfinite.localize(data, report) on the computed report)"
            )
        from .dask_graph import compute_scan, delayed_scan

        lazy = delayed_scan(
            data, targets, cap, on_error, region_bytes, split_every, by, z_threshold
        )
        if not compute:
            return lazy
        report = compute_scan(lazy, scheduler, progress)
        return _localized(data, report, eps) if localize else report
    options = {
        "workers": workers,
        "progress": progress,
        "fail_fast": fail_fast,
        "on_error": on_error,
        "region_bytes": region_bytes,
        "by": by,
        "z_threshold": z_threshold,
    }
    target = open_source(data)
    if isinstance(target, list):
        report = _scan_group(target, group_name(data), targets, cap, options)
        _as_table(report, target, cap)
    else:
        report = scan_source(target, targets, cap, **options)
    return _localized(data, report, eps) if localize else report


def _as_table(report: ScanReport, target: Any, cap: int) -> None:
    """A DataFrame or Parquet table: its shape, and locations as (row, column) positions
    with labels."""
    from .sources import tables

    if not isinstance(target, tables.TableColumns):
        return
    columns = [p for p, _ in target]
    report.shape = (int(target.rows), len(columns))
    report.dtype = target.kind
    report.locations = tables.table_locations(report, columns, cap)


def _localized(data: Any, report: ScanReport, eps: float) -> ScanReport:
    from .localize import localize

    if not report.ok:
        localize(data, report, eps=eps)
    return report


def parse_by(by: Any) -> tuple[int, ...] | None:
    """``by`` as a tuple of ints (axes not yet checked against the array)."""
    if by is None:
        return None
    items = (by,) if isinstance(by, (int, np.integer)) and not isinstance(by, bool) else by
    try:
        axes = tuple(items)
    except TypeError:
        raise InvalidArgumentError(f"by must be an int or a tuple of ints, got {by!r}") from None
    if not axes or not all(
        isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in axes
    ):
        raise InvalidArgumentError(f"by must be an int or a tuple of ints, got {by!r}")
    return tuple(int(a) for a in axes)


def resolve_by(by: tuple[int, ...] | None, ndim: int, name: str) -> tuple[int, ...] | None:
    """Normalize ``by`` for an array of ``ndim`` dimensions (negative axes, duplicates)."""
    if by is None:
        return None
    out = []
    for a in by:
        if not -ndim <= a < ndim:
            raise InvalidArgumentError(
                f"by={by!r}: axis {a} is out of range for {name or 'the array'}, which has "
                f"{ndim} dimension{'s' if ndim != 1 else ''}"
            )
        a = a % ndim
        if a in out:
            raise InvalidArgumentError(f"by={by!r} names axis {a} twice")
        out.append(a)
    return tuple(sorted(out))


def _parse_float(name: str, v: Any, *, strict: bool) -> float:
    """A number > 0 (``strict``) or >= 0, else ``InvalidArgumentError`` showing the value."""
    bound = "> 0" if strict else ">= 0"
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = float("nan")
    if not (f > 0 if strict else f >= 0):
        raise InvalidArgumentError(f"{name} must be a number {bound}, got {v!r}")
    return f


def make_spec(source, targets, cap, by=None, z_threshold=10.0) -> ScanSpec:
    """The ScanSpec for one source (``by`` checked against its dimensions)."""
    return ScanSpec(
        source.shape,
        source.dtype,
        targets,
        cap,
        resolve_by(by, len(source.shape), source.name),
        z_threshold,
    )


def _looks_like_zarr(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, m)) for m in ("zarr.json", ".zgroup", ".zarray"))


def _has_parquet(path: str) -> bool:
    from .sources.tables import PARQUET_SUFFIXES

    return any(f.lower().endswith(PARQUET_SUFFIXES) for _, _, fs in os.walk(path) for f in fs)


def group_name(data: Any) -> str:
    if isinstance(data, (str, os.PathLike)):
        return os.fspath(data)
    from .sources.tables import is_dataframe

    if is_dataframe(data):
        return "DataFrame"
    for attr in ("store_path", "filename", "name"):
        v = getattr(data, attr, None)
        if (
            isinstance(v, str)
            and v
            or (v is not None and not isinstance(v, str) and type(v).__name__ == "StorePath")
        ):
            return str(v)
    return type(data).__name__


def _scan_group(members, name: str, targets, cap: int, options: dict) -> ScanReport:
    arrays: dict[str, ScanReport] = {}
    skipped: dict[str, str] = {}
    stopped = False
    for path, factory in members:
        if stopped:
            skipped[path] = "not scanned: fail_fast stopped at an earlier array"
            continue
        try:
            source = factory()
        except UnsupportedDtypeError as e:
            skipped[path] = str(e)
            continue
        report = scan_source(source, targets, cap, **options)
        arrays[path] = report
        stopped = options["fail_fast"] and (report.nonfinite > 0 or not report.complete)
    total = ScanReport.total(name, arrays, skipped)
    if stopped:
        total.complete = False
    return total


def scan_source(
    source,
    targets: tuple[str, ...],
    cap: int,
    *,
    workers: int | None = None,
    progress: bool = False,
    fail_fast: bool = False,
    on_error: str = "raise",
    region_bytes: int | None = None,
    by: tuple[int, ...] | None = None,
    z_threshold: float = 10.0,
) -> ScanReport:
    """Scan one opened source on the local engine and build its report."""
    spec = make_spec(source, targets, cap, by, z_threshold)
    listing = None
    if hasattr(source, "missing_units"):  # list the store while the scan runs
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(1, thread_name_prefix="fastfinite-listing")
        listing = pool.submit(source.missing_units)
        pool.shutdown(wait=False)
    result = run(
        source,
        spec,
        workers=workers,
        region_bytes=region_bytes,
        progress=progress,
        fail_fast=fail_fast,
        on_error=on_error,
    )
    missing = listing.result() if listing is not None else None
    meta = report_meta(source)
    return build_report(
        spec, meta, result.summary, result.failed, missing, result.complete, consume=True
    )


def report_meta(source) -> dict[str, Any]:
    """What the report needs of a source besides the summary (small, picklable)."""
    return {
        "name": source.name,
        "unit": getattr(source, "unit_kind", "chunk"),
        "fill_value": getattr(source, "fill_value", None),
        "labels": getattr(source, "labels", None),
        "chunks": _chunk_shape(source),
    }


def _chunk_shape(source) -> tuple[int, ...] | None:
    grid = getattr(source, "storage", None)
    return tuple(int(u) for u in grid.unit) if grid is not None else None


def build_report(
    spec, meta, summary, errors, missing, complete, consume: bool = False
) -> ScanReport:
    """The ScanReport of one array: counts and locations from the summary, findings for
    missing (``missing``: grid coordinates) and unreadable (``errors``) chunks. With
    ``consume`` the summary is spent (see ``ScanReport.from_summary``)."""
    cap = spec.max_locations
    findings = []
    fill = "" if meta["fill_value"] is None else f" {meta['fill_value']!r}"
    for coords in (missing or [])[:cap]:
        findings.append(
            Finding(
                "missing_chunk",
                coords,
                f"{meta['unit']} {_fmt_index(coords)} is not in the store: never written (or "
                f"written as all fill_value); it reads as the fill value{fill}",
            )
        )
    findings += [Finding("unreadable_chunk", e.chunk, str(e)) for e in errors]
    report = ScanReport.from_summary(
        summary,
        spec,
        name=meta["name"],
        findings=findings,
        missing_chunks=len(missing or []),
        complete=complete,
        chunks=meta.get("chunks"),
        consume=consume,
    )
    if spec.by is not None:
        from .anomalies import overflow_dtypes, rounding_eps, slice_findings

        report.findings += slice_findings(
            report.slices,
            overflow_dtypes(spec.dtype, spec.cast),
            spec.z_threshold,
            rounding_eps(spec.dtype),
        )
    labels = meta["labels"]
    if labels is not None:
        report.locations = [
            Location(loc.kind, loc.index, loc.value, labels(loc.index)) for loc in report.locations
        ]
    return report


def assert_finite(data: Any, **kwargs: Any) -> ScanReport:
    """Scan ``data`` and return the report if nothing was found, else raise.

    Parameters
    ----------
    data : array_like or path
        As for :func:`scan`.
    **kwargs
        Passed to :func:`scan`.

    Raises
    ------
    NonFiniteError
        With the counts and the first coordinates, e.g. ``nan 1 at (2, 1)``.
    """
    report = scan(data, **kwargs)
    if report.ok:
        return report
    raise NonFiniteError(failure_message(report), report)


def failure_message(report: ScanReport) -> str:
    """``"x.npy: nan 2 at (2, 1), (4, 0); overflow:float32 1 at (0,)"``."""
    parts = []
    counts = report.counts()
    for kind, idx in report.first_locations().items():
        more = "..." if counts.get(kind, 0) > len(idx) else ""
        parts.append(f"{kind} {counts[kind]} at " + ", ".join(_fmt_index(i) for i in idx) + more)
    for f in report.findings:
        parts.append(f"{f.kind} {_fmt_index(f.where)}")
    name = report.name or f"{report.dtype} array {report.shape}"
    return f"{name}: " + "; ".join(parts)
