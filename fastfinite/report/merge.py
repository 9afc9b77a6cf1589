"""Merging reports of separate runs (one per file, per SLURM task, per day of data).

Reports of arrays that differ only in their first dimension merge as the scan of their
concatenation along axis 0: counts add, locations, regions and replays shift by the rows
before them, statistics combine by Chan's formula, per-slice statistics concatenate (``by``
holding axis 0) or combine slice by slice (other ``by`` axes), and the slice findings are
derived again from the merged statistics. Anything else merges as a group: one report per
input in ``arrays`` and their totals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..compute.limits import overflow_dtypes, rounding_eps
from ..errors import InvalidArgumentError
from ..kernels.slices_numpy import max_abs_z
from ..model.kinds import is_slice_kind
from ..model.stats import combine
from .findings import slice_findings
from .model import Finding, Localization, Location, ScanReport, SliceReport, combined_counts


def _concatenable(reports: list[ScanReport]) -> bool:
    """Arrays of one shape but the first dimension, one dtype, scanned alike, whose missing
    chunks (those that have any) read alike: as NaN or inf in all, or in none (one report
    has one ``fill_nonfinite``: missing chunks of both kinds stay a group's two arrays)."""
    first = reports[0]
    fills = {r.fill_nonfinite for r in reports if r.missing_chunks}
    return len(fills) <= 1 and all(
        len(r.shape) >= 1
        and r.shape[1:] == first.shape[1:]
        and r.dtype == first.dtype
        and not r.arrays
        and list(r.cast) == list(first.cast)
        and r.by == first.by
        for r in reports
    )


def merge_reports(reports: Sequence[ScanReport], *, name: str | None = None) -> ScanReport:
    """Merge reports of separate runs into one.

    Parameters
    ----------
    reports : sequence of ScanReport
        Reports (for instance read back with ``ScanReport.from_json``).
    name : str, optional
        Name of the merged report (default: the names joined with ``+``).

    Returns
    -------
    ScanReport
        The report of the concatenation along axis 0 when the arrays differ only in their
        first dimension (same dtype, scanned with the same ``cast`` and ``by``, missing
        chunks read as NaN or inf in all that have any, or in none); otherwise a group
        report with each input in ``arrays``.
    """
    reports = list(reports)
    if not reports:
        raise InvalidArgumentError("merge_reports needs at least one report")
    if not all(isinstance(r, ScanReport) for r in reports):
        raise InvalidArgumentError("merge_reports takes ScanReport objects")
    name = name or " + ".join(r.name or f"report {i}" for i, r in enumerate(reports))
    if not _concatenable(reports):
        arrays = {}
        for i, r in enumerate(reports):
            key = r.name or f"report {i}"
            arrays[key if key not in arrays else f"{key} ({i})"] = r
        return ScanReport.total(name, arrays)
    return _concatenate(reports, name)


def _concatenate(reports: list[ScanReport], name: str) -> ScanReport:
    first = reports[0]
    cap = max(r.max_locations for r in reports)
    offsets = np.cumsum([0] + [r.shape[0] for r in reports[:-1]]).tolist()
    shape = (sum(r.shape[0] for r in reports), *first.shape[1:])

    def shift(index, off):
        return (index[0] + off, *index[1:]) if index else index

    locations: dict[str, list[Location]] = {}
    for r, off in zip(reports, offsets):
        for loc in r.locations:
            locations.setdefault(loc.kind, []).append(
                Location(loc.kind, shift(loc.index, off), loc.value, loc.labels, loc.array)
            )
    kinds_order = {k: i for i, k in enumerate(first.counts())}
    merged_locs = [
        loc for locs in locations.values() for loc in sorted(locs, key=lambda x: x.index)[:cap]
    ]
    merged_locs.sort(key=lambda x: (x.index, kinds_order.get(x.kind, 99)))

    by = first.by
    slices = _merge_slices(reports) if by is not None else None
    findings = []
    for r in reports:
        for f in r.findings:
            if is_slice_kind(f.kind):
                continue
            findings.append(
                Finding(f.kind, f.where, f.message, f.array or r.name or None, f.severity)
            )
    merged = ScanReport(
        name=name,
        shape=shape,
        dtype=first.dtype,
        **combined_counts(reports),
        locations=merged_locs,
        sum=sum(r.sum for r in reports),
        elements=sum(r.elements for r in reports),
        max_locations=cap,
        findings=findings,
        missing_chunks=sum(r.missing_chunks for r in reports),
        fill_nonfinite=any(r.fill_nonfinite for r in reports if r.missing_chunks),
        complete=all(r.complete for r in reports),
        by=by,
        slices=slices,
        localized=[
            Localization(
                x.op,
                x.error,
                shift(x.index, off),
                x.message,
                shift(x.where, off) if by and 0 in by else x.where,
            )
            for r, off in zip(reports, offsets)
            for x in r.localized
        ],
        chunks=first.chunks if all(r.chunks == first.chunks for r in reports) else None,
        regions=[
            (shift(a, off), shift(b, off), c)
            for r, off in zip(reports, offsets)
            for a, b, c in r.regions
        ],
        z_threshold=first.z_threshold,
    )
    if slices is not None:
        dtype = np.dtype(merged.dtype)
        merged.findings += slice_findings(
            slices,
            overflow_dtypes(dtype, tuple(merged.cast)),
            merged.z_threshold,
            rounding_eps(dtype),
        )
    return merged


def _merge_slices(reports: list[ScanReport]) -> SliceReport:
    by = reports[0].by
    parts = [r.slices for r in reports]
    for r, p in zip(reports, parts):
        if p is None:  # a report written without them (the demo's report.json)
            raise InvalidArgumentError(
                f"{r.name or 'a report'} holds no per-slice statistics (by={list(by)}): "
                "reports scanned with by merge only with them"
            )
    if 0 in by:  # slices along axis 0 are new slices: concatenate
        return SliceReport(
            by,
            *[np.concatenate([getattr(p, a) for p in parts], axis=0) for a in SliceReport.ARRAYS],
        )
    # the same slices over more rows: combine slice by slice
    n = np.zeros(parts[0].shape, np.int64)
    mean = np.zeros(parts[0].shape)
    std = np.zeros(parts[0].shape)
    for p in parts:
        n, mean, std = combine(n, mean, std, p.count, np.nan_to_num(p.mean), np.nan_to_num(p.std))
    mean = np.where(n > 0, mean, np.nan)
    std = np.where(n > 0, std, np.nan)
    mn = np.fmin.reduce([p.min for p in parts])
    mx = np.fmax.reduce([p.max for p in parts])
    z = max_abs_z(mean, std, mn, mx)
    return SliceReport(
        by,
        sum(p.nan for p in parts),
        sum(p.posinf for p in parts),
        sum(p.neginf for p in parts),
        n,
        mean,
        std,
        mn,
        mx,
        z,
        parts[0].names,
    )
