"""Every form of the cast-risk predicate (``fastfinite.model.cast_forms``) pinned to the float
form, and the float form to the true cast (NumPy's ``astype``, ml_dtypes' for bfloat16 and
float8), on values planted at and around each target's exact thresholds: the largest finite
value that rounds to the target's maximum, the first that overflows, the smallest subnormal
of the target and half of it, and their neighbours, for float16, bfloat16, float8 e4m3fn and
e5m2 from float64 and float32, and float32 from float64.

Part: ``fastfinite/model/cast_forms.py`` (and the kernels, twins and passes that use its
forms).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastfinite
from fastfinite.compute import dispatch
from fastfinite.compute.summary import ScanSpec
from fastfinite.model.cast_forms import (
    extrema_bounds,
    extrema_form,
    float_form,
    kernel_thresholds,
    scaled_bounds,
    scaled_form,
    sum_threshold,
)
from fastfinite.model.casts import FORMATS, TARGETS, cast_dtype, cast_paths, risk_thresholds

from .helpers import twin_max

NARROW = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
PAIRS = [("float64", t) for t in (*NARROW, "float32")] + [("float32", t) for t in NARROW]


def _cast(v: np.ndarray, source: str, target: str) -> list[np.ndarray]:
    """``v`` (of ``source``) cast to ``target`` each way the ecosystem rounds it
    (``casts.cast_paths``: directly, and through float32 from float64 to bfloat16 and
    float8)."""
    out = []
    with np.errstate(over="ignore", invalid="ignore"):
        for path in cast_paths(source, target):
            w = v
            for step in path:
                w = w.astype(step)
            out.append(w.astype(cast_dtype(target)).astype(np.float64))
    return out


def truth(v: np.ndarray, source: str, target: str) -> tuple[np.ndarray, np.ndarray]:
    """``(overflow, underflow)`` as the casts make them: a finite value that becomes inf or
    NaN by any path, a non-zero one that becomes zero by any."""
    fin = np.isfinite(v)
    casts = _cast(v, source, target)
    over = np.logical_or.reduce([fin & ~np.isfinite(c) for c in casts])
    under = np.logical_or.reduce([(v != 0) & (c == 0) for c in casts])
    return over, under


def edges(source: str, target: str) -> list[float]:
    """The values of ``source`` at and around ``target``'s thresholds (both signs): the
    largest that rounds to its maximum and the first that overflows, its maximum, its
    smallest subnormal and half of it, each with its two neighbours on each side."""
    dt = np.dtype(source)
    over, under = risk_thresholds(source, target)
    f = TARGETS[target]
    base = [f.max, f.smallest_subnormal, f.smallest_subnormal / 2, under]
    if over < np.inf:
        base += [over, float(np.nextafter(dt.type(over), dt.type(0)))]  # the last that rounds down
    out = []
    for b in base:
        v = dt.type(b)
        near = [v]
        for direction in (dt.type(np.inf), dt.type(0)):
            w = v
            for _ in range(2):
                w = np.nextafter(w, direction)
                near.append(w)
        out += [float(w) for w in near] + [-float(w) for w in near]
    return out


@st.composite
def planted(draw, pairs=PAIRS):
    """A source format, a target and values of the source at and around its thresholds."""
    source, target = draw(st.sampled_from(pairs))
    vals = draw(st.lists(st.sampled_from(edges(source, target)), min_size=1, max_size=40))
    return source, target, np.array(vals, np.float64).astype(source)


@settings(max_examples=200, deadline=None)
@given(case=planted())
def test_the_float_form_is_the_cast(case):
    source, target, v = case
    over, under = risk_thresholds(source, target)
    got = float_form(v, over, under)
    want = truth(v, source, target)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_the_edges_hold_both_sides_of_every_threshold():
    """The planted values are no idle sample: each pair's holds values that overflow and
    values that do not, values that underflow and non-zero values that do not."""
    for source, target in PAIRS:
        v = np.array(edges(source, target), np.float64).astype(source)
        over, under = truth(v, source, target)
        assert over.any() and (~over).any(), (source, target)
        assert under.any() and (~under & (v != 0)).any(), (source, target)


@pytest.mark.parametrize("source", ["float32", "float64"])
def test_kernel_thresholds_are_the_float_forms_in_the_data_type(source):
    """Form 2: the kernels' thresholds are the float form's, exactly, in the data's type."""
    cast = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
    thr = kernel_thresholds(source, source, cast)
    assert thr.dtype == np.dtype(source)
    for t, target in enumerate(cast):
        assert (float(thr[2 * t]), float(thr[2 * t + 1])) == risk_thresholds(source, target)
    assert list(thr[2 * len(cast) :]) == [np.inf, -1.0] * (len(thr) // 2 - len(cast))
    np.testing.assert_array_equal(thr, ScanSpec((1,), np.dtype(source), cast).thresholds)


@settings(max_examples=200, deadline=None)
@given(case=planted(), more=st.lists(st.sampled_from(NARROW), max_size=2, unique=True))
def test_the_extrema_form_is_any_targets_float_form(case, more):
    """Form 3: a block may hold a risk by its extrema exactly when the float form finds one
    for some target."""
    source, target, v = case
    cast = (target, *(t for t in more if t != target and TARGETS[t].max < FORMATS[source].max))
    thr = kernel_thresholds(source, source, cast)
    over, under, used = extrema_bounds(thr)
    assert used == len(cast)
    fin = v[np.isfinite(v)]
    if not len(fin):
        return
    mags = np.abs(fin)
    tiny = mags[mags > 0].min() if (mags > 0).any() else np.inf
    risky = any(m.any() for t in cast for m in float_form(v, *risk_thresholds(source, t)))
    assert extrema_form(fin.min(), fin.max(), tiny, over, under) == risky


@settings(max_examples=30, deadline=None)
@given(
    case=planted([p for p in PAIRS if p[0] == "float32"] + [("float64", "float32")]),
    by=st.sampled_from([None, 0, -1]),
    policy=st.sampled_from(["kernels", "twins"]),
)
def test_the_scans_forms_count_and_place_what_the_cast_makes(case, by, policy):
    """Forms 2-4 and the positions (``kind_mask``): a scan on the kernels (rows for a whole
    array and ``by=0``, columns for ``by=-1``) or on the twins counts exactly the values the cast
    overflows and underflows, and records their positions."""
    source, target, v = case
    x = np.linspace(1.0, 2.0, 4 * 1024 * 3).astype(source).reshape(4 * 1024, 3)
    flat = x.reshape(-1)
    at = np.random.default_rng(len(v)).choice(flat.size, len(v), replace=False)
    flat[at] = v
    with twin_max(0), dispatch.using(policy):
        r = fastfinite.scan(x, cast=(target,), by=by, max_locations=100)
    over, under = truth(flat, source, target)
    assert (r.cast[target].overflow, r.cast[target].underflow) == (over.sum(), under.sum())
    for kind, mask in (("overflow", over), ("underflow", under)):
        found = sorted(np.ravel_multi_index(loc.index, x.shape) for loc in r.locations if loc.kind == f"{kind}:{target}")  # fmt: skip
        assert found == list(np.flatnonzero(mask))


@settings(max_examples=30, deadline=None)
@given(case=planted([p for p in PAIRS if p[0] == "float32"]), policy=st.sampled_from(["kernels", "twins"]))  # fmt: skip
def test_the_guards_check_is_the_float_form(case, policy):
    """Forms 2-3 in ``quick_check`` (the guard's check of each batch)."""
    source, target, v = case
    thr = kernel_thresholds(source, source, (target,))
    if policy == "kernels":
        dispatch.wait("guard", v.dtype)
        check = dispatch.pick("quick_check", v.dtype)
        assert not dispatch.is_twin(check)
    else:
        from fastfinite.reference.twins import quick_check as check
    over, under = truth(v, source, target)
    assert check(np.ascontiguousarray(v), thr) == (not over.any() and not under.any())


@pytest.mark.parametrize("target", ["float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2"])  # fmt: skip
def test_the_sum_form_is_one_rounding_from_float64(target):
    """Form 5: a float64 sum at or past ``sum_threshold`` overflows when cast (once) to the
    target, one just below does not."""
    th = sum_threshold(target)
    v = np.array([th, np.nextafter(th, np.inf), np.nextafter(th, 0), np.nextafter(np.nextafter(th, 0), 0), TARGETS[target].max])  # fmt: skip
    with np.errstate(over="ignore"):
        cast = v.astype(cast_dtype(target)).astype(np.float64)
    np.testing.assert_array_equal(v >= th, ~np.isfinite(cast))


@settings(max_examples=100, deadline=None)
@given(
    target=st.sampled_from(NARROW),
    s=st.sampled_from([1.0, 1 / 3, 1000.0, 2.0**-7, 448 / 3.7e5, 3e38]),
    data=st.data(),
)
def test_the_scaled_forms_are_the_cast_of_the_product(target, s, data):
    """Forms 6 and 7: the bounds on ``|float32(v)|`` and the masks of the product give what
    ``(float32(v) * s).astype(target)`` does."""
    s = np.float32(s)
    limits = risk_thresholds("float32", target)
    normal = TARGETS[target].smallest_normal
    lo = scaled_bounds(s, limits, normal)
    near = [np.float32(b) for b in lo if b > 0]
    with np.errstate(over="ignore"):
        near += [np.float32(e) / s for e in edges("float32", target) if e > 0]
    pool = []
    for b in near:
        w = b
        for _ in range(3):
            pool += [float(w), -float(w)]
            w = np.nextafter(w, np.float32(np.inf))
        w = b
        for _ in range(3):
            w = np.nextafter(w, np.float32(0))
            pool.append(float(w))
    with np.errstate(over="ignore"):
        v = np.array(data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=30)), np.float32)  # fmt: skip
        product = v * s
    masks = scaled_form(v, s, limits, normal)
    over, under = truth(product, "float32", target)
    nonzero = np.isfinite(v) & (v != 0)
    over |= nonzero & ~np.isfinite(product)
    np.testing.assert_array_equal(masks["overflow"], over)
    np.testing.assert_array_equal(masks["underflow"], nonzero & ~over & ((product == 0) | under))
    f = np.abs(v)
    np.testing.assert_array_equal(nonzero & (f >= lo[0]), masks["overflow"])
    np.testing.assert_array_equal(nonzero & (f < lo[0]) & (f <= lo[1]), masks["underflow"])


@pytest.mark.parametrize("source", ["int16", "int32", "int64", "uint64"])
@pytest.mark.parametrize("target", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_integer_sources_overflow_at_the_first_integer_past_the_bound(source, target):
    """Form 8: an integer at the threshold overflows when cast, the one below it does not
    (integers are scanned as float64)."""
    over, under = risk_thresholds(source, target)
    assert under == -1.0
    info = np.iinfo(source)
    if over == np.inf:
        assert TARGETS[target].max > info.max
        return
    v = np.array([int(over) - 1, int(over)], source)
    with np.errstate(over="ignore"):
        cast = v.astype(np.float64).astype(cast_dtype(target)).astype(np.float64)
        direct = v.astype(cast_dtype(target)).astype(np.float64) if target == "float16" else cast
    assert list(~np.isfinite(cast)) == [False, True] and list(~np.isfinite(direct)) == [False, True]
    assert list(float_form(v.astype(np.float64), over, under)[0]) == [False, True]
