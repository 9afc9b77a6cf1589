"""``scan`` and ``assert_finite``: open the input, run the engine, build the report."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .casts import parse_cast
from .engine import REGION_BYTES, run
from .errors import InvalidArgumentError, NonFiniteError, SourceError
from .report import Finding, ScanReport, _fmt_index
from .summary import ScanSpec


def open_source(data: Any):
    """Return a source for ``data``: an array, a memmap, or a path to a ``.npy`` file."""
    from .sources.ndarray import ArraySource, open_npy

    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        if path.endswith(".npy"):
            return open_npy(path)
        if not os.path.exists(path):
            raise SourceError(f"no such file or directory: {path}")
        raise SourceError(f"do not know how to scan {path!r}: expected a .npy file")
    if isinstance(data, np.ndarray):
        return ArraySource(data, name=getattr(data, "filename", None) or "")
    if isinstance(data, (list, tuple, int, float, complex, bool, np.generic)):
        return ArraySource(np.asarray(data))
    raise SourceError(
        f"do not know how to scan an object of type {type(data).__module__}."
        f"{type(data).__qualname__}"
    )


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
) -> ScanReport:
    """Scan ``data`` for NaN, inf and cast risks in one streaming pass.

    Parameters
    ----------
    data : array_like, numpy.memmap, or str
        A numpy array of any shape, layout and byte order, or a path to a ``.npy`` file
        (opened as a read-only memmap).
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
        Size of the regions read and scanned at once (default 32 MiB for arrays in memory,
        whose regions are views; 4 MiB for stores, rounded to whole storage chunks). Peak
        memory is about ``2 * workers`` regions.

    Returns
    -------
    ScanReport

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
    source = open_source(data)
    spec = ScanSpec(source.shape, source.dtype, targets, cap)
    if region_bytes is not None and (not isinstance(region_bytes, int) or region_bytes < 1):
        raise InvalidArgumentError(f"region_bytes must be an int >= 1, got {region_bytes!r}")
    result = run(
        source,
        spec,
        workers=workers,
        region_bytes=region_bytes or getattr(source, "region_bytes", REGION_BYTES),
        progress=progress,
        fail_fast=fail_fast,
        on_error=on_error,
    )
    findings = [Finding("unreadable_chunk", err.chunk, str(err)) for _, err in result.failed]
    return ScanReport.from_summary(
        result.summary,
        spec,
        name=source.name,
        findings=findings,
        complete=result.complete,
    )


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
