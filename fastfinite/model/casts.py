"""Float formats, cast targets and their exact round-to-nearest-even thresholds.

A format is its exponent and mantissa bits, its bias and its flavour: ``ieee`` (inf and NaN
at the top exponent: float64 to float16, bfloat16, float8_e5m2, float8_e4m3, float8_e3m4),
``fn`` (no inf; NaN only at all ones, so the top exponent holds finite values:
float8_e4m3fn) or ``fnuz`` (no inf, no negative zero; NaN is the pattern of -0:
float8_e4m3fnuz, float8_e5m2fnuz, float8_e4m3b11fnuz).

A cast overflows when the rounded value leaves the finite range (inf, or NaN where the
format has no inf): the boundary is the midpoint between the largest finite value and the
next value on the format's grid above it, and the midpoint itself overflows when rounding
to even goes up (the largest value's mantissa is odd: every flavour but ``fn``). A non-zero
value underflows when it rounds to zero: at most half the smallest subnormal.

The casts modelled are the ecosystem's: NumPy's ``astype`` (one rounding) to float32 and
float16. From float64 to bfloat16 and float8 the ecosystem rounds in two ways: once
(ml_dtypes >= 0.7, JAX to float8) or through float32 (ml_dtypes < 0.7, PyTorch, JAX to
bfloat16). They differ only within half a float32 ulp of a threshold; a value is a risk when
either cast makes it one, so no framework's cast escapes the report. The thresholds below
are the smallest (or largest) values *of the source format* whose cast overflows (or
underflows), derived exactly by pulling each rounding's condition back through the path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError

Bound = tuple[Fraction, bool]  # a real bound and whether the bound itself satisfies


@dataclass(frozen=True)
class CastTarget:
    """A binary float format: data may be in it, and data may be cast to it."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    flavour: str = "ieee"
    bias_: int | None = None

    @property
    def bias(self) -> int:
        return self.bias_ if self.bias_ is not None else 2 ** (self.exponent_bits - 1) - 1

    @property
    def has_inf(self) -> bool:
        return self.flavour == "ieee"

    @property
    def emax(self) -> int:
        top = 2**self.exponent_bits - (2 if self.flavour == "ieee" else 1)
        return top - self.bias

    @cached_property
    def max(self) -> float:
        """Largest finite value."""
        return float(self._max)

    @cached_property  # a frozen format: asked for by every scan, made of Fractions
    def _max(self) -> Fraction:
        units = 2 ** (self.mantissa_bits + 1) - (2 if self.flavour == "fn" else 1)
        return Fraction(units) * _pow2(self.emax - self.mantissa_bits)

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, 1 - self.bias)

    @property
    def smallest_subnormal(self) -> float:
        return math.ldexp(1.0, 1 - self.bias - self.mantissa_bits)

    @cached_property
    def overflow_threshold(self) -> float:
        """Smallest magnitude whose one rounding to this format overflows (for ``fn``
        formats, the next float64 above the midpoint, which itself rounds down)."""
        bound, inclusive = self.overflow_bound()
        return float(bound) if inclusive else math.nextafter(float(bound), math.inf)

    @property
    def underflow_threshold(self) -> float:
        """Largest magnitude that rounds to zero."""
        return self.smallest_subnormal / 2.0

    # -- the grid of positive values, exactly ------------------------------------------
    def _ulp(self, v: Fraction) -> Fraction:
        e = max(_floor_log2(v), 1 - self.bias) if v > 0 else 1 - self.bias
        return _pow2(e - self.mantissa_bits)

    def _top(self) -> Fraction:
        """The grid point above the largest finite value: where a rounding overflows."""
        return self._max + self._ulp(self._max)

    def _even(self, v: Fraction) -> bool:
        if v == 0:
            return True
        ulp = self._ulp(self._max) if v == self._top() else self._ulp(v)
        return (v / ulp).numerator % 2 == 0

    def _pred(self, v: Fraction) -> Fraction:
        """The grid value below ``v > 0`` (the top's is the largest finite value)."""
        if v == self._top():
            return self._max
        below = self._ulp(v - self._ulp(v) / 2)
        return v - below

    def _succ(self, v: Fraction) -> Fraction:
        return v + self._ulp(v) if v > 0 else self._ulp(Fraction(0))

    def ceil(self, bound: Bound) -> Fraction | None:
        """The smallest grid value satisfying ``r >= b`` (``r > b`` when not inclusive);
        the top when none is finite."""
        b, inclusive = bound
        if b <= 0:
            return Fraction(0) if (inclusive or b < 0) else self._succ(Fraction(0))
        u = self._ulp(b)
        c = math.ceil(b / u) * u
        if c == b and not inclusive:
            c = self._succ(c)
        return min(c, self._top())

    def floor(self, bound: Bound) -> Fraction:
        """The largest grid value satisfying ``r <= b`` (``r < b`` when not inclusive)."""
        b, inclusive = bound
        if b <= 0:
            return Fraction(0)
        c = min(math.floor(b / self._ulp(b)) * self._ulp(b), self._max)
        if c == b and not inclusive:
            c = self._pred(c) if c > 0 else Fraction(0)
        return c

    def overflow_bound(self) -> Bound:
        """Rounding a real ``r`` to this format overflows exactly when ``r`` is at least
        (or, not inclusive, above) the bound."""
        top = self._top()
        return (self._max + top) / 2, self._even(top)

    def rounds_to_at_least(self, c: Fraction) -> Bound:
        """``round(r) >= c`` (``c`` on the grid, or the top) as a bound on ``r``."""
        if c == 0:
            return Fraction(0), True
        return (self._pred(c) + c) / 2, self._even(c)

    def rounds_to_at_most(self, c: Fraction) -> Bound:
        """``round(r) <= c`` (``c`` on the grid) as a bound on ``r``."""
        return (c + self._succ(c)) / 2, self._even(c)


def _pow2(e: int) -> Fraction:
    return Fraction(2) ** e


def _floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if _pow2(e) <= v else e - 1


FORMATS: dict[str, CastTarget] = {
    t.name: t
    for t in (
        CastTarget("float64", 11, 52),
        CastTarget("float32", 8, 23),
        CastTarget("float16", 5, 10),
        CastTarget("bfloat16", 8, 7),
        CastTarget("float8_e4m3fn", 4, 3, "fn"),
        CastTarget("float8_e5m2", 5, 2),
        CastTarget("float8_e4m3fnuz", 4, 3, "fnuz", 8),
        CastTarget("float8_e5m2fnuz", 5, 2, "fnuz", 16),
        CastTarget("float8_e4m3b11fnuz", 4, 3, "fnuz", 11),
        CastTarget("float8_e4m3", 4, 3),
        CastTarget("float8_e3m4", 3, 4),
    )
}
TARGETS = {name: f for name, f in FORMATS.items() if name != "float64"}
# formats NumPy has no dtype for (ml_dtypes gives them): data in them is widened to float32
NARROW = tuple(n for n in FORMATS if n == "bfloat16" or n.startswith("float8"))


def cast_paths(source: str, target: str) -> tuple[tuple[str, ...], ...]:
    """The ways a cast from ``source`` to ``target`` is rounded in the ecosystem, each the
    formats it rounds to on its way: from float64 to bfloat16 and float8 both directly
    (ml_dtypes >= 0.7) and through float32 (ml_dtypes < 0.7, PyTorch)."""
    if source == "float64" and target in NARROW:
        return (), ("float32",)
    return ((),)


def cast_dtype(target: str) -> Any:
    """The NumPy dtype of a format (bfloat16 and float8 from ``ml_dtypes``)."""
    if target not in NARROW:
        return np.dtype(target)
    try:
        import ml_dtypes
    except ImportError:
        raise InvalidArgumentError(
            f"{target} casts are replayed with ml_dtypes: pip install ml_dtypes"
        ) from None
    return np.dtype(getattr(ml_dtypes, target))


@lru_cache(maxsize=256)  # exact arithmetic on Fractions: a fifth of a millisecond a scan
def source_thresholds(source: str, target: str) -> tuple[float, float]:
    """``(overflow, underflow)``: the smallest finite value of format ``source`` whose cast
    to ``target`` overflows, and the largest whose cast underflows to zero (``inf`` and
    ``-1`` when there is none), by any of ``cast_paths``."""
    found = [_path_thresholds(source, target, path) for path in cast_paths(source, target)]
    return min(o for o, _ in found), max(u for _, u in found)


def _path_thresholds(source: str, target: str, path: tuple[str, ...]) -> tuple[float, float]:
    src, dst = FORMATS[source], FORMATS[target]
    over = dst.overflow_bound()
    under = dst.rounds_to_at_most(Fraction(0))
    for fmt in reversed([FORMATS[f] for f in path]):  # each rounding pulled back to its input
        over = fmt.rounds_to_at_least(fmt.ceil(over))
        under = fmt.rounds_to_at_most(fmt.floor(under))
    o = src.ceil(over)
    u = src.floor(under)
    return (math.inf if o > src._max else float(o)), (float(u) if u > 0 else -1.0)


def risk_thresholds(component: np.dtype | str, target: str) -> tuple[float, float]:
    """Return ``(overflow, underflow)`` thresholds for casting ``component`` data to ``target``.

    A value ``v`` is an overflow risk when ``overflow <= |v| < inf`` and an underflow risk when
    ``0 < |v| <= underflow``. Targets that cannot overflow (or underflow) for this source get
    ``inf`` (or ``-1``) so the comparison never holds. Integer and bool data are compared as
    float64: their thresholds are the integers just past the bounds.
    """
    name = component if isinstance(component, str) else np.dtype(component).name
    if name in FORMATS:
        return source_thresholds(name, target)
    component = np.dtype(component)
    dst = FORMATS[target]
    b, inclusive = dst.overflow_bound()
    first = math.ceil(b) if (inclusive or b != int(b)) else int(b) + 1
    info = np.iinfo(component) if component.kind in "iu" else None
    top = max(abs(info.min), info.max) if info is not None else 1
    return (float(first) if first <= top else math.inf), -1.0  # |v| >= 1: no underflow
