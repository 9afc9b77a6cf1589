"""The obvious NumPy version of a whole scan: the test oracle, and the benchmark's NumPy
baseline. It shares nothing with the scan but the names of the cast targets.

Whole-array temporaries everywhere: fine for tests and for measuring what fastfinite saves.
Cast risks are judged by NumPy's own ``astype`` (bfloat16 and float8 through ``ml_dtypes``):
an overflow is a finite value cast to inf, or to NaN in formats without inf. float64 values
cast to bfloat16 and float8 are judged both directly and through float32 (the two ways the
ecosystem rounds them): a risk of either cast is a risk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.casts import cast_dtype
from ..options import parse_cast


def _parts(x: np.ndarray) -> list[np.ndarray]:
    if x.dtype.kind == "c":
        return [x.real, x.imag]
    return [x]


def scan(x: Any, cast=("float32",), max_locations: int = 100) -> dict[str, Any]:
    """Counts, cast risks, statistics and first locations, computed with plain NumPy."""
    x = np.asarray(x)
    parts = _parts(x)
    with np.errstate(invalid="ignore"):  # ml_dtypes' NaN
        fl = [
            p if p.dtype.kind == "f" and p.dtype.itemsize >= 2 else p.astype(np.float64)
            for p in parts
        ]
    masks: dict[str, list[np.ndarray]] = {
        "nan": [np.isnan(p) for p in fl],
        "posinf": [np.isposinf(p) for p in fl],
        "neginf": [np.isneginf(p) for p in fl],
    }
    casts = {}
    for t in parse_cast(cast):
        over, under = [], []
        for p, pf in zip(parts, fl):
            with np.errstate(all="ignore"):
                ways = [p]
                if p.dtype == np.float64 and cast_dtype(t).itemsize <= 2 and t != "float16":
                    ways.append(p.astype(np.float32))  # overflows to inf, as it rounds
                o = u = np.zeros(p.shape, bool)
                for w in ways:
                    c = w.astype(cast_dtype(t)).astype(np.float64)
                    o = o | (np.isfinite(pf) & ~np.isfinite(c))  # inf, or NaN where no inf
                    u = u | ((pf != 0) & (c == 0))
            over.append(o)
            under.append(u)
        masks[f"overflow:{t}"] = over
        masks[f"underflow:{t}"] = under
        casts[t] = (int(sum(m.sum() for m in over)), int(sum(m.sum() for m in under)))
    counts = {k: int(sum(m.sum() for m in v)) for k, v in masks.items()}
    locations = {}
    for k, v in masks.items():
        any_part = np.logical_or.reduce(v) if len(v) > 1 else v[0]
        locations[k] = [tuple(int(i) for i in row) for row in np.argwhere(any_part)[:max_locations]]
    finite = np.concatenate([p[np.isfinite(p)].astype(np.float64).ravel() for p in fl])
    with np.errstate(over="ignore", invalid="ignore"):
        stats = _stats(finite)
    return {"counts": counts, "cast": casts, "locations": locations, "stats": stats}


def _stats(finite: np.ndarray) -> dict[str, float]:
    """The finite values' statistics; the mean and std of the values divided by a power of
    two near their largest magnitude, then multiplied back (no sum or square overflows)."""
    n = finite.size
    top = float(np.abs(finite).max()) if n else 0.0
    k = 2.0 ** (np.frexp(top)[1] - 1) if top else 1.0
    return {
        "count": n,
        "min": float(finite.min()) if n else np.nan,
        "max": float(finite.max()) if n else np.nan,
        "mean": float((finite / k).mean() * k) if n else np.nan,
        "std": float((finite / k).std() * k) if n else np.nan,
        "sum": float(finite.sum()) if n else 0.0,
    }
