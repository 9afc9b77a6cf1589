"""The errstate replay: standardize the flagged slices (or regions) again, exactly as NumPy
would, under ``np.errstate(all="raise")``, and point at the elements that make it fail.

Only what the scan flagged is read again: slices with findings when the scan had ``by``,
else the regions holding the recorded locations. Per piece, in order:

1. the cast to each ``cast`` target the scan found at risk (``x.astype(target)``);
2. ``mean = x.mean()``, ``std = x.std()`` and ``(x - mean) / (std + eps)`` in the data's
   own dtype. The first ``FloatingPointError`` names the operation and NumPy's category; the
   offending elements are then found by evaluating that one operation with errors ignored.

NaN raises nothing under errstate, so NaN positions are reported directly (op ``"isnan"``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..compute.blocks import first_where
from ..engines.plan import make_plan
from ..errors import InvalidArgumentError
from ..indices import fmt_index
from ..model.casts import cast_dtype
from ..options import (
    ScanOptions,
    parse_float,
    parse_int,
    parse_raw_dtype,
    parse_storage_options,
)
from ..report.model import Localization, ScanReport
from ..sources.open import Target

# NumPy's messages: "overflow encountered in multiply", "invalid value encountered in
# subtract", "divide by zero encountered in divide", "underflow encountered in cast".
_CATEGORIES = (
    ("overflow", "overflow"),
    ("invalid", "invalid"),
    ("divide by zero", "divide"),
    ("underflow", "underflow"),
)
_OPS = {"reduce": "add", "true_divide": "divide", "square": "multiply"}


def parse_fpe(err: FloatingPointError) -> tuple[str, str]:
    """``(op, error)`` from NumPy's message."""
    text = str(err)
    error = next((cat for prefix, cat in _CATEGORIES if text.startswith(prefix)), "invalid")
    op = text.rsplit(" ", 1)[-1].strip()
    return _OPS.get(op, op), error


def _offenders(
    op: str,
    error: str,
    x: np.ndarray,
    mean,
    std,
    eps: float,
    step: str,
    limit: int,
    block: int = 1 << 16,
) -> np.ndarray:
    """Flat positions of the first ``limit`` elements at which ``op`` fails with ``error`` in
    ``step`` (a sum's overflow: the first only), looked for ``block`` elements at a time."""
    cast = step.startswith("cast:")
    if op == "add" and not cast:
        if step == "mean":
            return _first_overflow(x, error)
        with np.errstate(all="ignore"):
            d = x - mean
            return _first_overflow(d * d, error)
    # resolved once here, not per block
    target = cast_dtype(step.split(":", 1)[1]) if cast else None
    with np.errstate(all="ignore"):
        den = std + x.dtype.type(eps) if x.dtype.kind == "f" else std + eps

    def bad(xb: np.ndarray) -> np.ndarray:
        if cast and xb.dtype.kind == "c":  # a complex value casts as its two parts
            return bad(xb.real) | bad(xb.imag)
        if cast:
            c = xb.astype(target)
            if error == "overflow":
                return np.isfinite(xb) & np.isinf(c)
            return (xb != 0) & (c == 0)
        d = xb - mean
        if op == "subtract":
            if error == "invalid":
                return np.isnan(d) & ~np.isnan(xb)
            return np.isinf(d) & np.isfinite(xb)
        if op == "multiply":
            sq = d * d
            if error == "overflow":
                return np.isinf(sq) & np.isfinite(d)
            if error == "underflow":
                tiny = np.finfo(sq.dtype).tiny if sq.dtype.kind == "f" else 0
                return (np.abs(sq) < tiny) & (d != 0)
            return np.isnan(sq) & ~np.isnan(d)
        if op == "divide":
            q = d / den
            if error == "divide":
                return (den == 0) & (d != 0)
            if error == "invalid":
                return np.isnan(q) & ~np.isnan(d)
            if error == "overflow":
                return np.isinf(q) & np.isfinite(d)
            return (q == 0) & (d != 0)
        return np.zeros(xb.shape, bool)

    with np.errstate(all="ignore"):
        return first_where(x, bad, limit, block)


def _first_overflow(terms: np.ndarray, error: str) -> np.ndarray:
    """Where a running sum first turns inf (overflow) or NaN (inf + -inf)."""
    with np.errstate(all="ignore"):
        c = np.cumsum(terms.ravel(), dtype=terms.dtype)
    bad = np.isinf(c) if error == "overflow" else np.isnan(c)
    first = np.flatnonzero(bad & ~np.isnan(terms.ravel()))
    return first[:1]


def replay(
    block: np.ndarray,
    to_global: Callable[[np.ndarray], list[tuple[int, ...]]],
    cast_risks: dict[str, tuple[str, ...]],
    eps: float,
    where: tuple[int, ...],
    limit: int,
    taken: dict[tuple[str, str], int] | None = None,
) -> list[Localization]:
    """Replay one flagged piece of data: at most ``limit`` localizations of each kind (op,
    error), counting those already ``taken`` (updated). ``cast_risks``: the risks the scan
    found, per cast target (``"overflow"``, ``"underflow"``)."""
    taken = {} if taken is None else taken
    x = np.ascontiguousarray(block).ravel()
    if not x.dtype.isnative:  # not ``byteorder``: zarr's native dtypes say "<", not "="
        x = x.astype(x.dtype.newbyteorder("="))
    out: list[Localization] = []

    def room(op: str, error: str) -> int:
        return max(0, limit - taken.get((op, error), 0))

    def add(op, error, positions, message):
        for idx in to_global(positions[: room(op, error)]):
            out.append(Localization(op, error, idx, message, where))
            taken[op, error] = taken.get((op, error), 0) + 1

    if x.dtype.kind in "fc" and room("isnan", "invalid"):
        nan = first_where(x, np.isnan, room("isnan", "invalid"))
        add(
            "isnan",
            "invalid",
            nan,
            "NaN in the data (errstate cannot see NaN: it raises nothing, it only spreads)",
        )
    parts = x.view(x.real.dtype) if x.dtype.kind == "c" else x  # complex: both parts cast
    for t, errors in cast_risks.items():
        for error in (e for e in errors if room("cast", e)):
            try:  # each category on its own: the first raised would hide the other
                with np.errstate(**{"over" if error == "overflow" else "under": "raise"}):
                    parts.astype(cast_dtype(t))
            except FloatingPointError as e:
                op, error = parse_fpe(e)
                found = _offenders(op, error, x, 0, 0, eps, f"cast:{t}", room(op, error))
                add("cast", error, found, f"{e} (x.astype({t}))")
    if x.size == 0:
        return out
    step, mean, std = "mean", None, None
    try:
        with np.errstate(all="raise"):
            mean = x.mean()
            step = "std"
            std = x.std()
            step = "standardize"
            d, den = x - mean, std + eps
            # (x - mean) / (std + eps), in d's buffer unless NumPy's result type differs
            np.divide(d, den, out=d if np.result_type(d, den) == d.dtype else None)
    except FloatingPointError as e:
        op, error = parse_fpe(e)
        if room(op, error):
            with np.errstate(all="ignore"):
                mean = x.mean() if mean is None else mean
                std = x.std() if std is None else std
            found = _offenders(op, error, x, mean, std, eps, step, room(op, error))
            add(op, error, found, f"{e} (while computing {_STEPS[step]})")
        else:
            taken.setdefault((op, error), limit)
    return out


_STEPS = {"mean": "x.mean()", "std": "x.std()", "standardize": "(x - mean) / (std + eps)"}


def localize(
    data: Any,
    report: ScanReport,
    *,
    eps: float = 1e-8,
    max_locations: int | None = None,
    storage_options: dict | None = None,
    raw_dtype: str | None = None,
) -> list[Localization]:
    """Replay the standardization on what ``report`` flagged and return (and store in
    ``report.localized``) where it fails.

    Parameters
    ----------
    data : the data that was scanned (as given to :func:`fastfinite.scan`)
    report : ScanReport
        The report of that scan: its flagged slices (with ``by``) or locations (without)
        decide what is read again; nothing else is.
    eps : float
        The ``eps`` of ``(x - mean) / (std + eps)``.
    max_locations : int, optional
        At most this many localizations of each kind (default: the scan's).
    storage_options : dict, optional
        How to reach a store given by URL, as for :func:`fastfinite.scan`.
    raw_dtype : str, optional
        The format of a ``.npy`` of raw bytes, as for :func:`fastfinite.scan`.

    Returns
    -------
    list of Localization
    """
    eps = parse_float("eps", eps, strict=False)
    limit = parse_int("max_locations", max_locations, 0, optional=True)
    opts = ScanOptions(
        by=report.by,
        storage_options=parse_storage_options(storage_options),
        raw_dtype=parse_raw_dtype(raw_dtype),
    )
    target = make_plan(data, opts).target  # opened as the scan opened it
    return localize_target(target, report, eps, limit)


def localize_target(
    target: Target, report: ScanReport, eps: float, limit: int | None = None
) -> list[Localization]:
    """``localize`` on an input already opened (``sources.open.open_source``)."""
    limit = report.max_locations if limit is None else limit
    if report.arrays:  # a group: replay each array against its own report
        members = dict(target) if isinstance(target, list) else {}
        found = []
        for path, sub in report.arrays.items():
            if path not in members:
                raise InvalidArgumentError(f"the report's array {path!r} is not in this data")
            if not sub.clean:
                sub.localized = localize_source(members[path](), sub, eps, limit)
                found += sub.localized
        report.localized = found
        return found
    if isinstance(target, list):
        raise InvalidArgumentError("the report is of one array, the data a group of arrays")
    report.localized = localize_source(target, report, eps, limit)
    return report.localized


def localize_source(source, report: ScanReport, eps: float, limit: int) -> list[Localization]:
    """The replay for one opened source and its report: at most ``limit`` localizations of
    each kind (op, error). Pieces are read until every kind the report promises (NaN, each
    cast risk) and every kind met so far has its ``limit``."""
    shape = tuple(source.shape)
    if shape != tuple(report.shape) or str(source.dtype) != report.dtype:
        raise InvalidArgumentError(
            f"the report is of a {report.dtype} array {fmt_index(report.shape)}, not of "
            f"{source.name or 'this data'} ({source.dtype} {fmt_index(shape)})"
        )
    risks = {
        t: tuple(e for e, n in (("overflow", r.overflow), ("underflow", r.underflow)) if n)
        for t, r in report.cast.items()
        if r
    }
    promised = {("cast", e) for errors in risks.values() for e in errors}
    promised |= {("isnan", "invalid")} if report.nan else set()
    taken: dict[tuple[str, str], int] = {}
    out: list[Localization] = []
    for region, where in _pieces(source, report, shape):
        if limit == 0 or (taken and all(taken.get(k, 0) >= limit for k in promised | set(taken))):
            break
        try:
            block = np.asarray(source.read(region))
        except Exception:
            if not any(f.kind == "unreadable_chunk" for f in report.findings):
                raise
            # the piece holds a chunk the scan already reported unreadable: replay the rest
            continue
        start = tuple(s.start for s in region)
        bshape = tuple(s.stop - s.start for s in region)

        def to_global(pos, start=start, bshape=bshape):
            if len(bshape) == 0:
                return [() for _ in pos]
            coords = np.unravel_index(np.asarray(pos, dtype=np.int64), bshape)
            return [tuple(int(c[i]) + s for c, s in zip(coords, start)) for i in range(len(pos))]

        out += replay(block.reshape(bshape), to_global, risks, eps, where, limit, taken)
    return out


def _pieces(source, report: ScanReport, shape):
    """``(region, where)`` of every flagged piece: bad slices with ``by``, else the regions
    (of the scan's own plan) holding recorded locations."""
    if report.by is not None:
        bad = report.bad_slices()
        for w in bad:
            w = (w,) if not isinstance(w, tuple) else w
            region = [slice(0, n) for n in shape]
            for ax, i in zip(report.by, w):
                region[ax] = slice(i, i + 1)
            yield tuple(region), w
        return
    if report.regions:  # the regions the scan found problems in, and only those
        for start, stop, _ in report.regions:
            yield tuple(slice(a, b) for a, b in zip(start, stop)), tuple(start)
        return
    for idx in sorted({loc.index for loc in report.locations}):  # a report without regions
        yield tuple(slice(i, i + 1) for i in idx), idx
