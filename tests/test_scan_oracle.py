"""Differential tests: fastfinite.scan against the NumPy oracle over dtypes, layouts, values.

Part: ``fastfinite/api.py`` (``scan``) against ``fastfinite/reference/oracle.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fastfinite
from fastfinite import reference
from fastfinite.model.casts import TARGETS

from .helpers import assert_matches_oracle, twin_max

F32_OVER = TARGETS["float32"].overflow_threshold
F16_OVER = TARGETS["float16"].overflow_threshold
BF16_OVER = TARGETS["bfloat16"].overflow_threshold


def _around(v: float) -> list[float]:
    return [v, float(np.nextafter(v, 0)), float(np.nextafter(v, np.inf))]


SPECIAL = (
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 1e100, -1e300, 1e-300, 5e-324]
    + _around(F32_OVER)
    + _around(F16_OVER)
    + _around(BF16_OVER)
    + _around(TARGETS["float32"].underflow_threshold)
    + _around(TARGETS["float16"].underflow_threshold)
    + _around(TARGETS["bfloat16"].underflow_threshold)
    + [-F32_OVER, -F16_OVER, 65504.0, 65519.0, 3.4028235e38, 3.4028236e38]
)

DTYPES = [
    "<f2",
    ">f2",
    "<f4",
    ">f4",
    "<f8",
    ">f8",
    "<c8",
    ">c16",
    "<c16",
    "i1",
    "<i4",
    ">i8",
    "u2",
    "<u8",
    "bool",
]


def values(dtype: np.dtype):
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        edge = [
            v for v in (0, 1, 65519, 65520, 65535, info.min, info.max) if info.min <= v <= info.max
        ]
        return st.one_of(st.integers(int(info.min), int(info.max)), st.sampled_from(edge))
    return st.one_of(
        st.sampled_from(SPECIAL),
        st.floats(-1e6, 1e6, allow_nan=False),
        st.floats(allow_nan=True, allow_infinity=True, width=64),
    )


@st.composite
def arrays(draw):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=7))
    vals = draw(st.lists(values(dtype), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    with np.errstate(all="ignore"):
        if dtype.kind == "c":
            parts = np.array(vals, dtype=np.float64)
            x = (parts + 1j * parts[::-1]).astype(dtype).reshape(shape)
        else:
            x = (
                np.array(vals, dtype=object)
                .astype(np.float64 if dtype.kind == "f" else dtype)
                .astype(dtype)
                .reshape(shape)
            )
    layout = draw(st.sampled_from(["C", "F", "T", "strided", "neg", "mixed"]))
    if layout == "F":
        x = np.asfortranarray(x)
    elif layout == "T":
        x = x.T
    elif layout == "strided" and x.ndim:
        big = np.repeat(x, 2, axis=-1)
        x = big[..., ::2]
    elif layout == "neg" and x.ndim:
        x = x[::-1]
    elif layout == "mixed" and x.ndim >= 2:
        x = np.asfortranarray(x)[::-1, ..., ::-1].swapaxes(0, -1)
    return x


CASTS = st.sampled_from(
    [("float32",), ("float16",), ("bfloat16",), ("float32", "float16", "bfloat16"), ()]
)


@given(
    x=arrays(),
    cast=CASTS,
    max_locations=st.sampled_from([0, 1, 3, 100]),
    region=st.sampled_from([1, 8, 24, 1 << 20]),
)
def test_matches_numpy_oracle(x, cast, max_locations, region):
    if (
        "bfloat16" in cast
        and x.dtype.kind in "fc"
        and x.dtype.itemsize // (2 if x.dtype.kind == "c" else 1) == 8
    ):
        cast = tuple(c for c in cast if c != "bfloat16")  # see test_bfloat16_from_float64
    before = x.copy()
    report = fastfinite.scan(x, cast=cast, max_locations=max_locations, region_bytes=region)
    np.testing.assert_array_equal(x, before)
    assert_matches_oracle(report, x, cast=cast, max_locations=max_locations)


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "c8", "c16", "i8", "u1", "bool"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_region_size_invariance(dtype, order):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((37, 11, 5)) * 1e4).astype(dtype, order=order)
    if x.dtype.kind in "fc":
        x.flat[rng.integers(0, x.size, 40)] = np.nan
        x.flat[rng.integers(0, x.size, 10)] = np.inf
        x.flat[rng.integers(0, x.size, 10)] = -np.inf
    ref = fastfinite.scan(x, cast=("float16",), max_locations=7)
    for region in (1, 3, 64, 1000, 5000):
        for workers in (1, 2):
            r = fastfinite.scan(
                x, cast=("float16",), max_locations=7, region_bytes=region, workers=workers
            )
            assert r.counts() == ref.counts()
            assert r.locations == ref.locations
            assert r.count == ref.count and r.min == ref.min and r.max == ref.max
            assert r.mean == pytest.approx(ref.mean, rel=1e-12, abs=1e-9)
            assert r.std == pytest.approx(ref.std, rel=1e-12)
    assert_matches_oracle(ref, x, cast=("float16",), max_locations=7)


def test_bfloat16_from_float64_is_judged_by_both_roundings():
    """float64 -> bfloat16 rounds once (ml_dtypes >= 0.7) or through float32 (PyTorch,
    older ml_dtypes): just below the one-rounding threshold the first rounding reaches it.
    A risk of either cast is reported, so neither framework's cast escapes."""
    ml = pytest.importorskip("ml_dtypes")
    t = TARGETS["bfloat16"]
    over, under = t.overflow_threshold, t.underflow_threshold
    x = np.array([over, np.nextafter(over, 0), -over, under, np.nextafter(under, 1), 2 * under])
    r = fastfinite.scan(x, cast="bfloat16")
    with np.errstate(all="ignore"):
        once = x.astype(ml.bfloat16).astype(np.float64)
        twice = x.astype(np.float32).astype(ml.bfloat16).astype(np.float64)
    assert np.isinf(twice).sum() == 3 and (twice == 0).sum() == 2
    assert r.cast["bfloat16"].overflow == int((np.isinf(once) | np.isinf(twice)).sum()) == 3
    assert r.cast["bfloat16"].underflow == int(((once == 0) | (twice == 0)).sum()) == 2
    kinds = [(loc.kind, loc.index) for loc in r.locations]
    assert kinds == [
        ("overflow:bfloat16", (0,)),
        ("overflow:bfloat16", (1,)),
        ("overflow:bfloat16", (2,)),
        ("underflow:bfloat16", (3,)),
        ("underflow:bfloat16", (4,)),
    ]


def test_thresholds_from_the_issue():
    x = np.array([3.4028235e38, 3.4028236e38, 1e100, -1e100, 65519.0, 65520.0])
    r = fastfinite.scan(x, cast=("float32", "float16"))
    assert r.cast["float32"].overflow == 3
    assert [loc.index for loc in r.locations_of("overflow:float32")] == [(1,), (2,), (3,)]
    assert r.cast["float16"].overflow == 5
    assert [loc.index for loc in r.locations_of("overflow:float16")] == [
        (0,),
        (1,),
        (2,),
        (3,),
        (5,),
    ]
    with np.errstate(over="ignore"):
        assert np.isinf(x.astype(np.float32)).sum() == 3
        assert np.isinf(x.astype(np.float16)).sum() == 5


def test_underflow_thresholds_match_astype():
    for target, dt in (("float32", np.float32), ("float16", np.float16)):
        u = TARGETS[target].underflow_threshold
        x = np.array([u, np.nextafter(u, 0), np.nextafter(u, 1), -u, 0.0, 1e-320])
        r = fastfinite.scan(x, cast=target)
        with np.errstate(under="ignore"):
            expect = int(((x != 0) & (x.astype(dt) == 0)).sum())
        assert r.cast[target].underflow == expect


@pytest.mark.numpy_twin
@given(x=arrays(), cast=CASTS, max_locations=st.sampled_from([0, 2, 100]))
def test_numpy_twin_matches_kernels_and_oracle(x, cast, max_locations):
    """Small blocks skip numba: the twin must give what the kernels give."""
    cast = tuple(c for c in cast if c != "bfloat16") if x.dtype.itemsize >= 8 else cast
    twin = fastfinite.scan(x, cast=cast, max_locations=max_locations)
    with twin_max(0):
        kern = fastfinite.scan(x, cast=cast, max_locations=max_locations)
    assert twin.counts() == kern.counts() and twin.locations == kern.locations
    assert twin.count == kern.count
    if twin.count:
        assert twin.min == kern.min and twin.max == kern.max
        # sums near the float64 maximum overflow, or not, depending on their order; a sum's
        # rounding is relative to its terms, not to a mean that cancels
        scale = max(abs(twin.min), abs(twin.max))
        extreme = scale * twin.count > np.finfo(np.float64).max / 4
        assert twin.mean == pytest.approx(kern.mean, rel=1e-9, abs=scale * 1e-12) or (
            extreme and not (np.isfinite(twin.mean) and np.isfinite(kern.mean))
        )
    assert_matches_oracle(twin, x, cast=cast, max_locations=max_locations)


LANE_VALUES = [np.nan, np.inf, -np.inf, -0.0, 1e30, -1e30, 1e100, 3.4028236e38, 1e-300, 7e-46]


@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<f8", ">f8"])
def test_kernel_finds_a_value_at_every_lane_and_sub_block_edge(dtype):
    """The pass reads ``LANES`` values a step and takes the extrema of clean sub-blocks
    from its lanes: a special value (or a new extremum, or a value at or next to a cast
    threshold) at any lane, at either edge of a sub-block or in the loop's tail must still
    be found and counted exactly."""
    from fastfinite.model.stats import SUB as sub

    dt = np.dtype(dtype)
    n = 2 * sub + 45
    base = np.random.default_rng(3).uniform(0.5, 2.0, n).astype(dt)
    positions = sorted({*range(33), sub - 1, sub, sub + 1, 2 * sub - 1, 2 * sub, n - 2, n - 1})
    cast = ("float32", "float16", "bfloat16") if dt.itemsize == 4 else ("float32", "float16")
    with np.errstate(all="ignore"):
        planted = {float(dt.type(v)) for v in LANE_VALUES}
        for t in TARGETS.values():  # each cast threshold and its neighbours in x's dtype
            for v in (dt.type(t.underflow_threshold), dt.type(t.overflow_threshold)):
                planted |= {float(np.nextafter(v, dt.type(d))) for d in (0, np.inf)} | {float(v)}
    for value in planted:
        for pos in positions:
            x = base.copy()
            x[pos] = value
            x[(pos * 7 + 11) % n] = -value  # a second one, elsewhere in the vector step
            report = fastfinite.scan(x, cast=cast, max_locations=3)
            assert_matches_oracle(report, x, cast=cast, max_locations=3)


@pytest.mark.parametrize("chunks", [None, 1])
def test_tiny_values_keep_their_spread(chunks):
    """Squares of values below 1e-162 underflow to 0: the spread of such values is still
    theirs (rescaled), in one block, merged across chunks, and per slice."""
    x = np.array([[0.0, 7.8e-262], [3e-300, -5e-290]])
    import dask.array as da

    data = x if chunks is None else da.from_array(x, chunks=chunks)
    r = fastfinite.scan(data, by=0)
    ref = reference.scan(x)["stats"]
    assert r.std > 0 and r.std == pytest.approx(ref["std"], rel=1e-12)
    for i in range(2):
        assert r.slices.std[i] == pytest.approx(np.std(x[i] / 2.0**-860) * 2.0**-860, rel=1e-12)
    assert not any(f.kind == "zero_variance" for f in r.findings)
