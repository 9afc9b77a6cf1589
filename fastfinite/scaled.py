"""Scaled casts (``scan(..., scale=)``): the cast risks FP8 training recipes meet, where a
tensor is multiplied by a scale before it is cast (per tensor, with the scale
``target max / amax``, or per slice).

The cast modelled is ``(x.astype(float32) * scale).astype(target)``: the product rounded in
float32, as the recipes compute it, then the cast to the target, whose exact thresholds for
float32 values ``casts.source_thresholds`` gives. ``scale="amax"`` needs each tensor's (or
slice's) largest magnitude first: the scan's own statistics give it, so the scaled check is
a second pass over the data, in NumPy, region by region (memory stays bounded).
"""

from __future__ import annotations

import math

import numpy as np

from .casts import FORMATS, source_thresholds
from .errors import InvalidArgumentError
from .report import CastRisk, DynamicRange, Location, ScanReport

COUNTS = ("overflow", "underflow", "subnormal", "nonzero")


def scaled_target(target, report: ScanReport, targets, scale, by, budget_of) -> None:
    """Fill ``report.cast``, the locations and ``report.dynamic_range`` of each of
    ``targets`` for a scaled scan. ``target``: the opened input (a source, or a group's
    ``[(path, factory)]``); ``budget_of(source)``: the region size to read it in."""
    if report.arrays:
        members = dict(target)
        for path, sub in report.arrays.items():
            scaled_source(members[path](), sub, targets, scale, by and sub.by, budget_of)
        for t in targets:
            risks = [sub.cast[t] for sub in report.arrays.values() if t in sub.cast]
            report.cast[t] = CastRisk(
                sum(r.overflow for r in risks), sum(r.underflow for r in risks)
            )
        return
    if isinstance(target, list):
        raise InvalidArgumentError("scale= found a group where the report holds one array")
    scaled_source(target, report, targets, scale, by and report.by, budget_of)


def scaled_source(source, report: ScanReport, targets, scale, by, budget_of) -> None:
    """The scaled check of one array against its report (which gives ``amax``)."""
    per_slice = scale == "amax" and by is not None and report.slices is not None
    if per_slice:
        sl = report.slices
        amax = np.fmax(np.abs(sl.min), np.abs(sl.max)).astype(np.float64)
    else:
        amax = np.float64(np.fmax(abs(report.min), abs(report.max)))
    amax = np.where(np.isfinite(amax), amax, 0.0)
    shape, cap = tuple(source.shape), report.max_locations
    found = {t: {c: np.zeros(amax.shape, np.int64) for c in COUNTS} for t in targets}
    first: dict[str, list[np.ndarray]] = {f"{k}:{t}": [] for t in targets for k in COUNTS[:2]}
    values: dict[str, list[np.ndarray]] = {k: [] for k in first}
    scales = {t: _scale(t, scale, amax) for t in targets}
    limits = {t: source_thresholds("float32", t) for t in targets}
    for region in source.regions(budget_of(source)):
        data = np.asarray(source.read(region))
        source.release(region)
        start = tuple(r.start for r in region)
        for t in targets:
            s = scales[t]
            if per_slice:  # the region's slices' scales, along the by axes
                s = s[tuple(region[a] for a in by)]
                s = s.reshape([data.shape[a] if a in by else 1 for a in range(data.ndim)])
            masks = _masks(data, s, limits[t], FORMATS[t].smallest_normal)
            for c, m in masks.items():
                if per_slice:
                    other = tuple(a for a in range(data.ndim) if a not in by)
                    found[t][c][tuple(region[a] for a in by)] += m.sum(axis=other)
                else:
                    found[t][c] += int(m.sum())
                if c in ("overflow", "underflow") and len(first[f"{c}:{t}"]) < cap:
                    local = np.flatnonzero(m)[:cap]
                    if len(local):
                        idx = np.unravel_index(local, m.shape)
                        glob = [i + a for i, a in zip(idx, start)]
                        flat = np.ravel_multi_index(glob, shape) if shape else np.zeros(1, int)
                        first[f"{c}:{t}"].append(flat)
                        values[f"{c}:{t}"].append(_values(data, local))
    _fill(report, targets, found, first, values, scales, amax, per_slice, shape, cap)


def _values(data: np.ndarray, local: np.ndarray) -> np.ndarray:
    """The values at flat positions ``local`` of ``data`` as float64 (complex: NaN)."""
    if data.dtype.kind == "c":
        return np.full(len(local), np.nan)
    with np.errstate(invalid="ignore"):
        return data.reshape(-1)[local].astype(np.float64)


def _scale(target: str, scale, amax: np.ndarray) -> np.ndarray:
    """The float32 scale per tensor (0-d) or per slice: ``scale`` itself, or ``target max /
    amax`` (1 where amax is 0: nothing to scale)."""
    if scale != "amax":
        return np.asarray(np.float32(scale))
    with np.errstate(divide="ignore", over="ignore"):
        s = np.where(amax > 0, FORMATS[target].max / np.where(amax > 0, amax, 1.0), 1.0)
    return s.astype(np.float32)


def _masks(data: np.ndarray, s, limits: tuple[float, float], normal: float) -> dict:
    """Per element (complex: either part) of ``data`` scaled by ``s``: overflow, underflow,
    subnormal and finite non-zero masks."""
    over, under = limits
    out = {c: np.zeros(data.shape, bool) for c in COUNTS}
    parts = (data.real, data.imag) if data.dtype.kind == "c" else (data,)
    for p in parts:
        with np.errstate(all="ignore"):
            wide = p.astype(np.float64)  # exact for every format: finite is finite
            y = np.abs(p.astype(np.float32) * s)
        nonzero = np.isfinite(wide) & (wide != 0)
        o = nonzero & ((y >= over) | ~np.isfinite(y))
        u = nonzero & (y <= max(under, 0.0))
        out["overflow"] |= o
        out["underflow"] |= u
        out["subnormal"] |= nonzero & ~u & (y < normal)
        out["nonzero"] |= nonzero
    return out


def _fill(report, targets, found, first, values, scales, amax, per_slice, shape, cap) -> None:
    kept = [loc for loc in report.locations if loc.kind.split(":")[-1] not in targets]
    for t in targets:
        total = {c: int(found[t][c].sum()) for c in COUNTS}
        report.cast[t] = CastRisk(total["overflow"], total["underflow"])
        s = scales[t]
        fmt = FORMATS[t]
        tensor_scale = float(s) if s.ndim == 0 else math.nan
        report.dynamic_range[t] = DynamicRange(
            target=t,
            scale=tensor_scale,
            amax=float(np.max(amax)) if amax.size else 0.0,
            smallest_normal=fmt.smallest_normal / tensor_scale,
            **total,
            slices=(
                {"scale": s.astype(np.float64), "amax": amax, **found[t]} if per_slice else None
            ),
        )
        for c in ("overflow", "underflow"):
            k = f"{c}:{t}"
            if not first[k]:
                continue
            flat, vals = np.concatenate(first[k]), np.concatenate(values[k])
            for j in np.argsort(flat, kind="stable")[:cap]:
                index = tuple(int(i) for i in np.unravel_index(flat[j], shape)) if shape else ()
                kept.append(Location(k, index, float(vals[j])))
    order = {k: i for i, k in enumerate(report.counts())}
    report.locations = sorted(kept, key=lambda loc: (loc.index, order.get(loc.kind, len(order))))
