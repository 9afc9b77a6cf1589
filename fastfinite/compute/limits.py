"""The limits a slice's statistics are flagged against (``kernels.slice_flags``): the
float types its sums are checked in, their overflow thresholds, the rounding unit of the
near-zero-variance bound."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..model.cast_forms import sum_threshold
from ..model.casts import TARGETS
from .blocks import component_dtype

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
    thresholds = overflow_thresholds(overflow_dtypes(dtype, cast))
    return rounding_eps(dtype), float(z_threshold), thresholds


@lru_cache(maxsize=64)
def overflow_thresholds(dtypes: tuple[str, ...]) -> np.ndarray:
    """The overflow threshold of each dtype, in float64 (the kernels' argument: shared
    by the calls, never written)."""
    return np.array([sum_threshold(t) for t in dtypes], np.float64)
