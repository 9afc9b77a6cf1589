"""A report as tables: per-slice statistics for pandas and xarray, locations for pandas.

pandas and xarray are optional (the extras ``pandas`` and ``xarray``): imported in the
functions that need them. The report is not imported here: it imports this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, SourceError
from ..indices import member_path
from ..model.kinds import is_slice_kind

SLICE_COLUMNS = ("count", "nan", "posinf", "neginf", "mean", "std", "min", "max", "max_z")
LOCATION_COLUMNS = ("kind", "index", "value", "labels", "array")


def _pandas():
    try:
        import pandas
    except ImportError:
        raise SourceError("tables need pandas: pip install 'fastfinite[pandas]'") from None
    return pandas


def _xarray():
    try:
        import xarray
    except ImportError:
        raise SourceError("to_xarray needs xarray: pip install 'fastfinite[xarray]'") from None
    return xarray


def slice_kinds_by_slice(slices: Any, findings: list | None) -> np.ndarray:
    """The kinds of finding of each slice, joined by ``", "`` (``""``: none), an object
    array shaped like the slices. ``findings``: the report's (only its slice kinds count)."""
    out = np.full(slices.shape, "", dtype=object)
    if findings is None:
        raise InvalidArgumentError(
            "these slices belong to no report, so their findings are not known: take them "
            "from a scan's report (report.slices)"
        )
    for f in findings:
        if is_slice_kind(f.kind) and f.array is None:
            at = tuple(f.where)
            out[at] = f"{out[at]}, {f.kind}" if out[at] else f.kind
    return out


def axis_dims(slices: Any) -> list[str]:
    """The names of the slices' axes: ``column`` for a table's columns, else ``axis_A``
    for the scanned array's axis A."""
    if slices.names is not None:
        return ["column"]
    return [f"axis_{a}" for a in slices.by]


def slices_to_pandas(slices: Any, findings: list | None) -> Any:
    """One row per slice: ``count, nan, posinf, neginf, mean, std, min, max, max_z`` and
    ``findings`` (the kinds of finding of the slice, joined by ``", "``; ``""``: none).

    The index is the slice's position along the ``by`` axis, named ``axis_A`` (a
    MultiIndex, one level per axis, for several ``by`` axes); for a table scanned by
    column, the columns' names, named ``column``.
    """
    pd = _pandas()
    kinds = slice_kinds_by_slice(slices, findings)
    data = {name: np.asarray(getattr(slices, name)).ravel() for name in SLICE_COLUMNS}
    data["findings"] = kinds.ravel()
    dims = axis_dims(slices)
    if slices.names is not None:
        index = pd.Index(list(slices.names), name=dims[0])
    elif len(slices.by) == 1:
        index = pd.RangeIndex(slices.shape[0], name=dims[0])
    else:
        index = pd.MultiIndex.from_product([range(n) for n in slices.shape], names=dims)
    return pd.DataFrame(data, index=index)


def slices_to_xarray(slices: Any, findings: list | None, like: Any = None) -> Any:
    """The per-slice columns of ``slices_to_pandas`` as an ``xarray.Dataset`` over the
    ``by`` axes: dims ``axis_A`` (``column`` for a table's columns, with their names as
    coordinate), or, with ``like`` (the DataArray that was scanned), its dimension names
    and its one-dimensional coordinates along them."""
    xr = _xarray()
    kinds = slice_kinds_by_slice(slices, findings)
    dims = axis_dims(slices)
    coords: dict[str, Any] = {}
    if slices.names is not None:
        coords[dims[0]] = list(slices.names)
    if like is not None:
        dims, coords = _like(slices, like)
    data = {name: (dims, np.asarray(getattr(slices, name))) for name in SLICE_COLUMNS}
    data["findings"] = (dims, kinds.astype(str))
    return xr.Dataset(data, coords=coords)


def _like(slices: Any, like: Any) -> tuple[list[str], dict[str, Any]]:
    """Dimension names and 1-d coordinates of ``like`` along the ``by`` axes, checked
    against the slices' shape."""
    if not (hasattr(like, "dims") and hasattr(like, "coords") and hasattr(like, "shape")):
        raise InvalidArgumentError(
            f"like= must be the xarray.DataArray that was scanned, got {type(like).__name__}"
        )
    if any(a >= len(like.shape) for a in slices.by) or tuple(
        like.shape[a] for a in slices.by
    ) != tuple(slices.shape):
        raise InvalidArgumentError(
            f"like= has shape {tuple(like.shape)}, which does not match the slices: "
            f"{tuple(slices.shape)} along the by-axes {tuple(slices.by)}"
        )
    dims = [str(like.dims[a]) for a in slices.by]
    coords = {}
    for name, c in like.coords.items():
        if c.ndim == 1 and c.dims[0] in dims:
            coords[name] = (c.dims[0], np.asarray(c.values))
    return dims, coords


def array_reports(report: Any, prefix: str | None = None) -> Iterator[tuple[str | None, Any]]:
    """``(path, report)`` of each array of a group (in the order of ``arrays``, arrays of
    a member that is itself a group named by ``member_path``), or ``(None, report)`` for
    a report of one array."""
    if not report.arrays:
        yield prefix, report
        return
    for path, sub in report.arrays.items():
        yield from array_reports(sub, path if prefix is None else member_path(prefix, path))


def slices_frame(report: Any) -> Any:
    """``report.slices.to_pandas()``; for a group, those of its arrays scanned with ``by``
    one after the other, with the array's path as the first index level, ``array``."""
    pd = _pandas()
    if not report.arrays:
        if report.slices is None:
            raise InvalidArgumentError("per-slice statistics need a scan with by=AXIS")
        return report.slices.to_pandas()
    frames = {p: r.slices.to_pandas() for p, r in array_reports(report) if r.slices is not None}
    if not frames:
        raise InvalidArgumentError(
            "per-slice statistics need a scan with by=AXIS: no array of this group has them"
        )
    # arrays of other shapes have index levels of other names: positions, named ``slice``
    levels = {tuple(f.index.names) for f in frames.values()}
    if len(levels) > 1:
        frames = {p: f.reset_index(drop=True).rename_axis("slice") for p, f in frames.items()}
    return pd.concat(frames, names=["array"])


def locations_frame(report: Any) -> Any:
    """One row per recorded location (``report.locations``): ``kind``, ``index`` (a tuple),
    ``value``, ``labels`` (a dict, or None) and ``array`` (in a group, the path of the
    array the index is in; else None)."""
    pd = _pandas()
    rows = {
        "kind": [loc.kind for loc in report.locations],
        "index": [tuple(loc.index) for loc in report.locations],
        "value": np.array([loc.value for loc in report.locations], dtype=np.float64),
        "labels": [loc.labels for loc in report.locations],
        "array": [loc.array for loc in report.locations],
    }
    return pd.DataFrame(rows, columns=list(LOCATION_COLUMNS))
