"""From merged summaries to the ScanReport: one array's report (counts, locations,
statistics, per-slice columns and findings, missing and unreadable units, labels), the
report of a group or a table from its members', and the message of a failed check. Both
engines end here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compute.columns import slice_columns
from ..compute.limits import overflow_dtypes, rounding_eps
from ..compute.summary import ScanSpec, SliceStats, Summary
from ..indices import fmt_index
from ..model.kinds import SLOT_NAN, SLOT_NEGINF, SLOT_POSINF, cast_slot, is_nonfinite
from .findings import slice_findings
from .model import CastRisk, Finding, Location, ScanReport, SliceReport, table_locations


@dataclass(frozen=True)
class Layout:
    """How a scan's reports come together (small and picklable: a Dask task uses it)."""

    name: str
    group: bool = False  # a group: the members' reports in ``arrays``, their totals on top
    table: tuple[str, int, tuple[str, ...]] | None = None  # (kind, rows, columns) of a table


def report_meta(source) -> dict[str, Any]:
    """What the report needs of a source besides the summary (small, picklable)."""
    grid = source.storage
    return {
        "name": source.name,
        "unit": source.unit_kind,
        "fill_value": source.fill_value,
        "labels": source.labels,
        "chunks": tuple(int(u) for u in grid.unit) if grid is not None else None,
        "axis_names": source.axis_names,
    }


def build_report(
    spec: ScanSpec,
    meta: dict,
    s: Summary,
    errors,
    missing,
    complete,
    consume: bool = False,
    threads: int | None = None,
) -> ScanReport:
    """The ScanReport of one array from its merged summary, with findings for the units the
    store does not hold (``missing``: grid coordinates) and those that could not be read
    (``errors``). With ``consume`` the summary is spent: the per-slice columns are written
    over its slice statistics. ``threads``: at most this many cores for the per-slice
    columns and findings (a scan's ``workers``; all by default)."""
    slices = flagged = None
    if spec.by is not None:  # the statistics' columns first: they may spend ``s.slices``
        slices, flagged = slice_report(spec, s.slices, consume, meta["axis_names"], threads)
    cap = spec.max_locations
    fill = "" if meta["fill_value"] is None else f" {meta['fill_value']!r}"
    # a unit the listing does not show but that raised when read is there, and unreadable
    unreadable = {e.chunk for e in errors}
    missing = [c for c in missing or [] if c not in unreadable]
    labels = meta["labels"]
    locs = []
    for k, kind in enumerate(spec.kinds):
        for flat, val in zip(s.loc_index[k], s.loc_value[k]) if kind else ():
            index = tuple(int(i) for i in np.unravel_index(int(flat), spec.shape))
            loc = Location(kind, index, float(val), labels(index) if labels else None)
            locs.append((int(flat), k, loc))
    locs.sort(key=lambda t: (t[0], t[1]))
    n = int(s.n)
    report = ScanReport(
        name=meta["name"],
        shape=tuple(int(d) for d in spec.shape),
        dtype=str(spec.dtype),
        nan=int(s.counts[SLOT_NAN]),
        posinf=int(s.counts[SLOT_POSINF]),
        neginf=int(s.counts[SLOT_NEGINF]),
        cast={
            t: CastRisk(*(int(s.counts[cast_slot(k, i)]) for k in ("overflow:", "underflow:")))
            for i, t in enumerate(spec.cast)
        },
        locations=[t[2] for t in locs],
        count=n,
        min=float(s.min) if n else math.nan,
        max=float(s.max) if n else math.nan,
        mean=float(s.mean) if n else math.nan,
        std=float(s.std) if n else math.nan,
        sum=float(s.total),
        elements=int(s.elements),
        max_locations=cap,
        missing_chunks=len(missing),
        fill_nonfinite=is_nonfinite(meta["fill_value"]),
        complete=complete,
        by=spec.by,
        slices=slices,
        chunks=meta["chunks"],
        regions=sorted(s.flagged),
        z_threshold=spec.z_threshold,
    )
    report.findings = [
        Finding(
            "missing_chunk",
            coords,
            f"{meta['unit']} {fmt_index(coords)} is not in the store: never written (or "
            f"written as all fill_value); it reads as the fill value{fill}",
            severity=report.missing_severity,
        )
        for coords in missing[:cap]
    ]
    report.findings += [Finding("unreadable_chunk", e.chunk, str(e)) for e in errors]
    if slices is not None:
        report.findings += slice_findings(
            report.slices,
            overflow_dtypes(spec.dtype, spec.cast),
            spec.z_threshold,
            rounding_eps(spec.dtype),
            threads=threads,
            flagged=flagged,
        )
    return report


def slice_report(
    spec: ScanSpec,
    runs: list[SliceStats] | None,
    consume: bool = False,
    axis_names=None,
    threads: int | None = None,
) -> tuple[SliceReport, tuple | None]:
    """The report's per-slice columns from the merged runs of slices (``columns``), and the
    flagged slices' ``(indices, bits)`` when the scan found them already; with ``consume``
    the runs are spent, their arrays written over."""
    shape = spec.by_shape
    names = (axis_names or {}).get(spec.by[0]) if len(spec.by) == 1 else None
    cols, flagged = slice_columns(runs, math.prod(shape), consume, threads)
    return SliceReport(spec.by, *(np.asarray(c).reshape(shape) for c in cols), names), flagged


def finish(
    layout: Layout,
    reports: dict,
    skipped: dict[str, str],
    complete: bool = True,
    findings: Sequence[Finding] = (),
) -> ScanReport:
    """The scan's report from its members' (``reports`` by path): the one report of a single
    array, else the group's totals over its members, laid out as a table for a DataFrame or
    Parquet file (shape rows x columns, locations as (row, column) with labels), with
    ``findings`` of its own (members that could not be checked: ``ScanPlan.findings``)."""
    if not layout.group:
        (report,) = reports.values()
        report.skipped.update(skipped)  # a table's columns left out of its 2-D array
        return report
    total = ScanReport.total(layout.name, reports, skipped)
    total.findings += findings
    total.complete = total.complete and complete
    if layout.table is not None:
        kind, rows, columns = layout.table
        total.shape, total.dtype = (rows, len(columns)), kind
        total.locations = table_locations(total.arrays, list(columns), total.max_locations)
    return total


def failure_message(report: ScanReport) -> str:
    """``"x.npy: nan 2 at (2, 1), (4, 0); overflow:float32 1 at (0,)"`` (in a group,
    each location after its array: ``nan 1 at /x (3,)``)."""
    parts = []
    counts = report.counts()
    for kind, locs in report.first_of_each_kind().items():
        idx = [(f"{loc.array} " if loc.array else "") + fmt_index(loc.index) for loc in locs]
        more = "..." if counts.get(kind, 0) > len(idx) else ""
        parts.append(f"{kind} {counts[kind]} at " + ", ".join(idx) + more)
    for f in report.findings:
        parts.append(f"{f.array + ': ' if f.array else ''}{f.kind} {fmt_index(f.where)}")
    name = report.name or f"{report.dtype} array {report.shape}"
    return f"{name}: " + "; ".join(parts)
