"""Cast targets and their exact round-to-nearest-even thresholds.

A finite value ``x`` overflows a binary float format when ``|x|`` is at least the midpoint
between the format's largest finite value and the next power of two (the midpoint itself
rounds to the odd-mantissa maximum's even neighbour: infinity). A non-zero value underflows
when ``|x|`` is at most half the smallest subnormal (the midpoint rounds to even: zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidArgumentError


@dataclass(frozen=True)
class CastTarget:
    """A narrower float format that data may be cast to."""

    name: str
    exponent_bits: int
    mantissa_bits: int

    @property
    def max(self) -> float:
        """Largest finite value."""
        emax = 2 ** (self.exponent_bits - 1) - 1
        return math.ldexp(2.0 - 2.0**-self.mantissa_bits, emax)

    @property
    def overflow_threshold(self) -> float:
        """Smallest magnitude that rounds to infinity."""
        emax = 2 ** (self.exponent_bits - 1) - 1
        return math.ldexp(2.0 - 2.0 ** -(self.mantissa_bits + 1), emax)

    @property
    def smallest_subnormal(self) -> float:
        emin = 2 - 2 ** (self.exponent_bits - 1)
        return math.ldexp(1.0, emin - self.mantissa_bits)

    @property
    def underflow_threshold(self) -> float:
        """Largest magnitude that rounds to zero."""
        return self.smallest_subnormal / 2.0


FORMATS: dict[str, CastTarget] = {
    t.name: t
    for t in (
        CastTarget("float64", 11, 52),
        CastTarget("float32", 8, 23),
        CastTarget("float16", 5, 10),
        CastTarget("bfloat16", 8, 7),
    )
}
TARGETS = {name: FORMATS[name] for name in ("float32", "float16", "bfloat16")}


def cast_dtype(target: str) -> Any:
    """The NumPy dtype of a cast target (bfloat16 from ``ml_dtypes``)."""
    if target != "bfloat16":
        return np.dtype(target)
    try:
        import ml_dtypes
    except ImportError:
        raise InvalidArgumentError(
            "bfloat16 casts are replayed with ml_dtypes: pip install ml_dtypes"
        ) from None
    return ml_dtypes.bfloat16


def risk_thresholds(component: np.dtype, target: str) -> tuple[float, float]:
    """Return ``(overflow, underflow)`` thresholds for casting ``component`` data to ``target``.

    A value ``v`` is an overflow risk when ``overflow <= |v| < inf`` and an underflow risk when
    ``0 < |v| <= underflow``. Targets that cannot overflow (or underflow) for this source get
    ``inf`` (or ``-1``) so the comparison never holds. Integer and bool data are compared as
    float64 (exact for the thresholds involved).
    """
    t = TARGETS[target]
    component = np.dtype(component)
    if component.kind == "f":
        src = FORMATS[component.name]
        src_max, src_tiny = src.max, src.smallest_subnormal
    else:  # integers and bool: finite, |v| >= 1 when non-zero
        info = np.iinfo(component) if component.kind in "iu" else None
        src_max = float(max(abs(info.min), info.max)) if info is not None else 1.0
        src_tiny = 1.0
    over = t.overflow_threshold if src_max >= t.overflow_threshold else math.inf
    under = t.underflow_threshold if src_tiny <= t.underflow_threshold else -1.0
    return over, under
