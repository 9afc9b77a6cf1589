"""Variance anomalies: what will go wrong when each slice is standardized,
``(x - mean) / (std + eps)``, predicted from the one-pass statistics alone."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ._format import fmt_index
from .blocks import component_dtype
from .casts import TARGETS
from .report import Finding

EPS64 = float(np.finfo(np.float64).eps)


def overflow_dtypes(dtype: np.dtype, cast: tuple[str, ...]) -> tuple[str, ...]:
    """Float types the sums are checked in: the data's own type when it is float16/float32,
    and each cast target that is narrower than the data."""
    comp = component_dtype(dtype)  # float64 for integers: no narrower type of their own
    out: list[str] = []
    if comp.itemsize in (2, 4):
        out.append(comp.name)
    src_max = float(np.finfo(comp).max)
    for t in cast:
        if TARGETS[t].max < src_max and t not in out:
            out.append(t)
    return tuple(out)


def rounding_eps(dtype: np.dtype) -> float:
    """Machine epsilon of the type the statistics are computed in: the data's own float type
    (its parts for complex), float64 for integers and bool."""
    return float(np.finfo(component_dtype(dtype)).eps)


@lru_cache(maxsize=64)  # asked for by every region of a scan
def flag_limits(
    dtype: np.dtype, cast: tuple[str, ...], z_threshold: float
) -> tuple[float, float, np.ndarray]:
    """``kernels.slice_flags``'s limits for data of ``dtype`` scanned with ``cast``: the
    rounding unit, the z threshold and the overflow threshold of each ``overflow_dtypes``."""
    thresholds = _thresholds(overflow_dtypes(dtype, cast))
    return rounding_eps(dtype), float(z_threshold), thresholds


@lru_cache(maxsize=64)
def _thresholds(dtypes: tuple[str, ...]) -> np.ndarray:
    """The overflow threshold of each dtype, in float64 (the kernels' argument: shared
    by the calls, never written)."""
    return np.array([TARGETS[t].overflow_threshold for t in dtypes], np.float64)


def slice_kinds(dtypes: tuple[str, ...]) -> list[str]:
    """The slice finding kinds in the order of ``kernels.slice_flags``'s bits. A slice with
    ``n`` finite values, mean ``m``, variance ``v`` (population) has:

    - ``nonfinite``: a NaN or inf;
    - ``zero_variance``: ``n > 1`` and ``v == 0`` (one value has no variance to speak of);
    - ``near_zero_variance``: ``n > 1``, ``0 < v <= n * eps * v + (n * m * eps) ** 2``,
      ``v`` finite (tested on the std, so that stds whose squares underflow count):
      scikit-learn's test for a constant feature (``_is_constant_feature``), the variance
      rounding alone produces for that mean and count;
    - ``sum_overflow:T`` / ``variance_overflow:T``: ``|n * m|`` / ``n * v`` reaches T's
      overflow threshold, for each dtype T in ``dtypes``;
    - ``outlier``: ``n > 1`` and the largest |z| exceeds ``z_threshold``.
    """
    kinds = ["nonfinite", "zero_variance", "near_zero_variance"]
    for t in dtypes:
        kinds += [f"sum_overflow:{t}", f"variance_overflow:{t}"]
    return kinds + ["outlier"]


def slice_findings(
    slices,
    dtypes: tuple[str, ...],
    z_threshold: float,
    eps: float = EPS64,
    limit: int | None = None,
    threads: int | None = None,
    flagged: tuple[np.ndarray, np.ndarray] | None = None,
):
    """Findings per slice, in slice order then kind order (``limit`` findings at most).
    ``eps``: the rounding unit of the near-zero-variance bound (see ``rounding_eps``);
    ``threads``: at most this many cores (all by default); ``flagged``: the flagged slices'
    flat indices (increasing) and bits, when the scan found them already
    (``kernels.finish_whole_slices``)."""
    kinds = slice_kinds(dtypes)
    count, mean, std, max_z, nan, pos, neg = (
        np.ascontiguousarray(a).reshape(-1)
        for a in (
            slices.count,
            slices.mean,
            slices.std,
            slices.max_z,
            slices.nan,
            slices.posinf,
            slices.neginf,
        )
    )
    if flagged is not None:
        at, bits = flagged
    else:
        at, bits = _flagged(
            (count, mean, std, max_z, nan, pos, neg), dtypes, z_threshold, eps, threads
        )
    if limit is not None:  # each flagged slice gives a finding at least
        at, bits = at[:limit], bits[:limit]
    # what the messages say, gathered for the flagged slices at once: a store whose
    # unwritten chunks read as NaN can flag 1e4 slices, and a report lists each
    lo, hi = (np.ascontiguousarray(a).reshape(-1)[at] for a in (slices.min, slices.max))
    with np.errstate(over="ignore", invalid="ignore"):
        total, m2 = mean[at] * count[at], std[at] * std[at] * count[at]
    gathered = (*(a[at] for a in (count, mean, std, nan, pos, neg, max_z)), lo, hi, total, m2)
    values = map(_Values._make, zip(*(a.tolist() for a in gathered)))
    coords = zip(*(c.tolist() for c in np.unravel_index(at, slices.count.shape)))
    out: list[Finding] = []
    raised: dict[int, list[str]] = {}  # the kinds of each set of bits
    with _collector_paused():
        for i, f, where, v in zip(at.tolist(), bits.tolist(), coords, values):
            w = fmt_index(where) + (f" ({slices.names[i]!r})" if slices.names else "")
            if f not in raised:
                raised[f] = [kind for bit, kind in enumerate(kinds) if (f >> bit) & 1]
            for kind in raised[f]:
                out.append(Finding(kind, where, _message(kind, w, v, z_threshold)))
                if limit is not None and len(out) >= limit:
                    return out
    return out


@contextmanager
def _collector_paused():
    """Python's cycle collector off while findings are made: they hold no cycles, and 1e6
    of them (every sample of a table with a NaN feature) set off collections that walk
    every object of the process again and again (a third of their time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Values(NamedTuple):
    """One flagged slice's statistics, as its messages quote them."""

    count: int
    mean: float
    std: float
    nan: int
    posinf: int
    neginf: int
    max_z: float
    min: float
    max: float
    total: float  # mean * count
    m2: float  # std**2 * count


def _flagged(cols, dtypes, z_threshold, eps, threads) -> tuple[np.ndarray, np.ndarray]:
    """``kernels.slice_flags`` over the report's columns ``cols`` (1-D, in its argument
    order), in parts on ``threads`` cores: the flagged slices' indices and bits."""
    from .kernels import slice_flags
    from .parts import in_parts

    size = len(cols[0])
    # pages of these are touched only where a part flags slices
    at, bits = np.empty(size, np.int64), np.empty(size, np.int64)
    thresholds, limits = _thresholds(dtypes), (float(eps), float(z_threshold))
    found: dict[int, int] = {}  # part's first slice -> how many of its slices it flagged

    def flag(a: int, b: int) -> None:
        found[a] = slice_flags(*(c[a:b] for c in cols), *limits, thresholds, at[a:b], bits[a:b])

    in_parts(flag, size, threads)
    parts = [slice(a, a + found[a]) for a in sorted(found)]
    at = np.concatenate([at[p] + p.start for p in parts])
    return at, np.concatenate([bits[p] for p in parts])


def _message(kind: str, w: str, v: _Values, z_threshold: float) -> str:
    cnt, mean, std, total, m2 = v.count, v.mean, v.std, v.total, v.m2
    if kind == "nonfinite":
        return (
            f"slice {w} holds {v.nan} NaN, {v.posinf} +inf and "
            f"{v.neginf} -inf: its mean, std and every standardized value "
            "become NaN or inf"
        )
    if kind == "zero_variance":
        return (
            f"all {cnt} finite values of slice {w} equal {mean:.6g}: std is 0, so "
            "standardizing divides by eps (0/0 = NaN when eps is 0)"
        )
    if kind == "near_zero_variance":
        return (
            f"slice {w} has std {std:.3g}, below the rounding noise of its mean "
            f"{mean:.6g} over {cnt} values (scikit-learn's constant-feature bound): its std "
            "is numerical noise, and standardizing blows the noise up"
        )
    if kind.startswith("sum_overflow:"):
        t = kind.split(":", 1)[1]
        what = (
            "x.sum() in float16 overflows to inf (x.mean() does not: NumPy accumulates a "
            "float16 mean in float32)"
            if t == "float16"
            else f"x.sum() and x.mean() in {t} overflow to inf"
        )
        return (
            f"the sum of slice {w} is {total:.4g}, beyond the {t} maximum {TARGETS[t].max:.4g}"
            f": {what} although every value is finite"
        )
    if kind.startswith("variance_overflow:"):
        t = kind.split(":", 1)[1]
        return (
            f"the sum of squared deviations of slice {w} is {m2:.4g}, beyond the {t} maximum "
            f"{TARGETS[t].max:.4g}: its std computed in {t} overflows to inf although every "
            "value is finite"
        )
    return (
        f"slice {w} has a value {v.max_z:.3g} standard deviations from its mean (threshold "
        f"{z_threshold:g}; min {v.min:.6g}, max {v.max:.6g}, "
        f"mean {mean:.6g}, std {std:.6g}): one value dominates the slice's statistics"
    )
