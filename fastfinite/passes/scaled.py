"""Scaled casts (``scan(..., scale=)``): the cast risks FP8 training recipes meet, where a
tensor is multiplied by a scale before it is cast (per tensor, with the scale
``target max / amax``, or per slice).

The cast modelled is ``(x.astype(float32) * scale).astype(target)``: the product rounded in
float32, as the recipes compute it, then the cast to the target, whose exact thresholds for
float32 values ``casts.source_thresholds`` gives. ``scale="amax"`` needs each tensor's (or
slice's) largest magnitude first: the scan's own statistics give it, so the scaled check is
a second pass over the data, region by region (memory stays bounded): a kernel on each
value's float32 magnitude against bounds found once (``cast_forms.scaled_bounds``) for a scale per tensor,
NumPy's masks (``cast_forms.scaled_form``) for scales per slice and complex data.
"""

from __future__ import annotations

import math

import numpy as np

from ..compute.blocks import narrow_format, read_only, widen, widen_table
from ..compute.summary import first_positions
from ..errors import InvalidArgumentError
from ..model.cast_forms import SCALED_COUNTS, scaled_bounds, scaled_form
from ..model.casts import FORMATS, source_thresholds
from ..report.model import CastRisk, DynamicRange, Location, ScanReport

COUNTS = SCALED_COUNTS
KERNEL_LOCATIONS = 1024  # positions of each kind a region's kernel call keeps


def scaled_target(target, report: ScanReport, targets, scale, by, budget_of, map_regions=map):
    """Fill ``report.cast``, the locations and ``report.dynamic_range`` of each of
    ``targets`` for a scaled scan. ``target``: the opened input (a source, or a group's
    ``[(path, factory)]``); ``budget_of(source)``: the region size to read it in;
    ``map_regions(fn, regions)``: ``map``, or one that runs ``fn`` on several threads."""
    if report.arrays:  # each of a group's arrays, opened one at a time
        members = dict(target)
        arrays = ((members[path](), sub) for path, sub in report.arrays.items())
    elif isinstance(target, list):
        raise InvalidArgumentError("scale= found a group where the report holds one array")
    else:
        arrays = iter([(target, report)])
    for source, sub in arrays:
        scaled_source(source, sub, targets, scale, by and sub.by, budget_of, map_regions)
    if report.arrays:
        for t in targets:
            risks = [sub.cast[t] for sub in report.arrays.values() if t in sub.cast]
            report.cast[t] = CastRisk(
                sum(r.overflow for r in risks), sum(r.underflow for r in risks)
            )


def scaled_source(source, report: ScanReport, targets, scale, by, budget_of, map_regions=map):
    """The scaled check of one array against its report (which gives ``amax``)."""
    per_slice = scale == "amax" and by is not None and report.slices is not None
    if per_slice:
        sl = report.slices
        amax = np.fmax(np.abs(sl.min), np.abs(sl.max)).astype(np.float64)
    else:
        amax = np.float64(np.fmax(abs(report.min), abs(report.max)))
    amax = np.where(np.isfinite(amax), amax, 0.0)
    shape, cap = tuple(source.shape), report.max_locations
    scales = {t: _scale(t, scale, amax) for t in targets}
    limits = {t: source_thresholds("float32", t) for t in targets}
    fast = not per_slice and np.dtype(source.dtype).kind != "c"
    bounds = {
        t: scaled_bounds(scales[t], limits[t], FORMATS[t].smallest_normal) for t in targets if fast
    }

    def region_risks(region) -> tuple:
        """Per target: the region's counts, and the first positions (flat in the array)
        and values of its overflows and underflows."""
        data = np.asarray(source.read(region))
        source.release(region)
        start = tuple(r.start for r in region)
        flat = _flat(data) if fast else None
        out = {}
        for t in targets:
            if fast:
                counts, local = _kernel_counts(flat, bounds[t], cap)
            else:
                s = scales[t]
                if per_slice:  # the region's slices' scales, along the by axes
                    s = s[tuple(region[a] for a in by)]
                    s = s.reshape([data.shape[a] if a in by else 1 for a in range(data.ndim)])
                masks = scaled_form(data, s, limits[t], FORMATS[t].smallest_normal)
                other = tuple(a for a in range(data.ndim) if a not in (by or ()))
                counts = {c: m.sum(axis=other) if per_slice else int(m.sum()) for c, m in masks.items()}  # fmt: skip
                local = [np.flatnonzero(masks[c])[:cap] for c in COUNTS[:2]]
            found = [(_global(p, data.shape, start, shape), _values(data, p)) for p in local]
            out[t] = counts, found
        return region, out

    found = {t: {c: np.zeros(amax.shape, np.int64) for c in COUNTS} for t in targets}
    first: dict[str, tuple] = {}
    for region, out in map_regions(region_risks, source.regions(budget_of(source))):
        at = tuple(region[a] for a in by) if per_slice else ()
        for t, (counts, positions) in out.items():
            for c, n in counts.items():
                found[t][c][at] += n
            for c, (flat, vals) in zip(COUNTS[:2], positions):
                if f"{c}:{t}" in first:  # regions come in any order (memory order, threads)
                    kept = first[f"{c}:{t}"]
                    flat, vals = np.concatenate([kept[0], flat]), np.concatenate([kept[1], vals])
                first[f"{c}:{t}"] = first_positions(flat, vals, cap)
    _fill(report, targets, found, first, scales, amax, per_slice, shape, cap)


def _flat(data: np.ndarray) -> np.ndarray:
    """A region's values in C order as float32 or float64 for ``kernels.scaled_counts``: the
    same float32 values as ``astype(float32)`` gives, float64 kept (its tiny values are
    non-zero though they round to a float32 0)."""
    if data.dtype in (np.float32, np.float64):
        return np.ascontiguousarray(data).reshape(-1)
    if narrow_format(data.dtype):
        bits = np.ascontiguousarray(data).reshape(-1).view(f"u{data.dtype.itemsize}")
        return widen(bits, widen_table(data.dtype))
    return data.astype(np.float32).reshape(-1)


def _kernel_counts(flat: np.ndarray, lim: np.ndarray, cap: int) -> tuple[dict, list]:
    """A region's counts (``COUNTS``) and the first positions of its overflows and
    underflows (flat, in the region). The kernel keeps up to ``KERNEL_LOCATIONS`` of each;
    more are looked for in NumPy only when the cap asks for them."""
    counts = np.zeros(4, np.int64)
    kcap = min(cap, KERNEL_LOCATIONS)
    locs = np.empty((2, kcap), np.int64)
    nlocs = np.zeros(2, np.int64)
    from ..compute import dispatch

    dispatch.pick("scaled_counts", flat.dtype)(read_only(flat), lim, counts, locs, nlocs)
    local = [locs[k, : nlocs[k]] for k in range(2)]
    for k in range(2):
        if nlocs[k] == kcap < min(cap, counts[k]):
            with np.errstate(invalid="ignore"):
                f = np.abs(flat.astype(np.float32))
                nz = np.isfinite(flat) & (flat != 0)
            mask = nz & (f >= lim[0]) if k == 0 else nz & (f < lim[0]) & (f <= lim[1])
            local[k] = np.flatnonzero(mask)[:cap]
    return dict(zip(COUNTS, (int(c) for c in counts))), local


def _global(local: np.ndarray, region_shape, start, shape) -> np.ndarray:
    """Flat positions in a region of ``region_shape`` at ``start`` as flat positions in the
    array of ``shape``."""
    if not shape:
        return np.zeros(len(local), np.int64)
    idx = np.unravel_index(local, region_shape)
    return np.ravel_multi_index([i + a for i, a in zip(idx, start)], shape)


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


def _fill(report, targets, found, first, scales, amax, per_slice, shape, cap) -> None:
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
            # a scale that underflowed float32 (amax past 3e38 x the format's max): no
            # value stays normal
            smallest_normal=fmt.smallest_normal / tensor_scale if tensor_scale else math.inf,
            **total,
            slices=(
                {"scale": s.astype(np.float64), "amax": amax, **found[t]} if per_slice else None
            ),
        )
        for c in ("overflow", "underflow"):
            k = f"{c}:{t}"
            for p, v in zip(*first.get(k, ((), ()))):
                index = tuple(int(i) for i in np.unravel_index(p, shape)) if shape else ()
                kept.append(Location(k, index, float(v)))
    order = {k: i for i, k in enumerate(report.counts())}
    report.locations = sorted(kept, key=lambda loc: (loc.index, order.get(loc.kind, len(order))))
