"""The number formats training runs in: bfloat16 and float8 as data and as cast targets,
against ml_dtypes' own casts value by value, through every engine and Zarr."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastfinite
from fastfinite.casts import FORMATS, NARROW, TARGETS, cast_dtype, source_thresholds

from .helpers import assert_matches_oracle, twin_max

ml = pytest.importorskip("ml_dtypes")

SOURCES = tuple(FORMATS)  # float64 ... float8_e3m4
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _step(v, dtype, up: bool):
    """The next value of ``dtype`` above (or below) the positive value ``v``."""
    bits = np.array([v], dtype).view(UINT[np.dtype(dtype).itemsize]).astype(np.int64)
    return (bits + (1 if up else -1)).astype(UINT[np.dtype(dtype).itemsize]).view(dtype)[0]


def _cast(v, src, dst):
    with np.errstate(all="ignore"):
        return float(np.array([v], src).astype(dst).astype(np.float64)[0])


@pytest.mark.parametrize("source", SOURCES)
def test_thresholds_are_those_of_ml_dtypes_casts(source):
    """For every source format and target: the overflow threshold's cast is not finite and
    its lower neighbour's is; the underflow threshold's cast is 0 and its upper
    neighbour's is not. Derived from the formats, checked against the casts."""
    src = cast_dtype(source)
    for target in TARGETS:
        dst = cast_dtype(target)
        over, under = source_thresholds(source, target)
        if over == math.inf:
            assert math.isfinite(_cast(ml.finfo(src).max, src, dst)), (source, target)
        else:
            assert float(np.array([over], src)[0]) == over  # a value of the source format
            assert not math.isfinite(_cast(over, src, dst)), (source, target, over)
            assert math.isfinite(_cast(_step(over, src, False), src, dst)), (source, target)
        if under < 0:
            assert _cast(ml.finfo(src).smallest_subnormal, src, dst) != 0, (source, target)
        else:
            assert float(np.array([under], src)[0]) == under
            assert _cast(under, src, dst) == 0, (source, target, under)
            assert _cast(_step(under, src, True), src, dst) != 0, (source, target)


def test_the_issues_example_and_the_float8_maxima():
    x = np.array([np.nextafter(3.39617752923046e38, 0)])
    assert fastfinite.scan(x, cast="bfloat16").cast["bfloat16"].overflow == 1
    assert np.isinf(x.astype(ml.bfloat16).astype(np.float64)).all()
    assert (TARGETS["float8_e4m3fn"].max, TARGETS["float8_e5m2"].max) == (448.0, 57344.0)
    for name in NARROW:
        assert TARGETS[name].max == float(ml.finfo(cast_dtype(name)).max), name
        assert TARGETS[name].smallest_subnormal == float(
            ml.finfo(cast_dtype(name)).smallest_subnormal
        ), name


def _planted(source: str, targets) -> np.ndarray:
    """Every threshold of ``targets`` for ``source`` data and its neighbours, both signs, with
    zeros, the source's extremes and its non-finite values."""
    src = cast_dtype(source)
    vals = [0.0, 1.0, float(ml.finfo(src).max), float(ml.finfo(src).smallest_subnormal)]
    for t in targets:
        over, under = source_thresholds(source, t)
        for v in (over, under):
            if 0 < v < math.inf:
                vals += [v, float(_step(v, src, True)), float(_step(v, src, False))]
    vals += [-v for v in vals]
    x = np.array(vals, np.float64).astype(src)
    specials = [np.nan] + ([np.inf, -np.inf] if FORMATS[source].has_inf else [])
    return np.concatenate([x, np.array(specials).astype(src)])


TARGET_SETS = [
    ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"),
    ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4"),
]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("targets", TARGET_SETS, ids=["main", "others"])
@pytest.mark.parametrize("kernel", ["numba", "twin"])
def test_planted_values_match_the_casts(source, targets, kernel):
    x = _planted(source, targets)
    with twin_max(0 if kernel == "numba" else 10**9):
        r = fastfinite.scan(x, cast=targets)
    assert_matches_oracle(r, x, cast=targets)


def _bits(draw, dtype, shape):
    n = int(np.prod(shape))
    size = np.dtype(dtype).itemsize
    raw = draw(st.binary(min_size=n * size, max_size=n * size))
    return np.frombuffer(raw, UINT[size]).view(dtype).reshape(shape)


@st.composite
def narrow_arrays(draw):
    dtype = cast_dtype(draw(st.sampled_from(NARROW)))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=3)))
    x = _bits(draw, dtype, shape).copy()
    layout = draw(st.sampled_from(["c", "f", "strided", "reversed"]))
    if layout == "f":
        x = np.asfortranarray(x)
    elif layout == "strided":
        x = np.repeat(x, 2, axis=0)[::2]
    elif layout == "reversed":
        x = x[::-1]
    return x


@settings(max_examples=120, deadline=None)
@given(x=narrow_arrays(), targets=st.sampled_from(TARGET_SETS), kernel=st.booleans())
def test_any_bits_of_any_narrow_format(x, targets, kernel):
    """Random bits: every NaN pattern, both zeros, subnormals, in any layout."""
    with twin_max(0 if kernel else 10**9):
        r = fastfinite.scan(x, cast=targets, max_locations=5)
    assert_matches_oracle(r, x, cast=targets, max_locations=5)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2fnuz"])
def test_large_narrow_arrays_on_every_core(name):
    """Sub-blocks, parts on two threads, more findings than a kernel keeps."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(700_001) * 100).astype(cast_dtype(name))
    x[rng.integers(0, x.size, 3000)] = np.nan
    targets = ("float16", "float8_e4m3fn", "float8_e5m2")
    for workers in (1, 2):
        r = fastfinite.scan(x, cast=targets, workers=workers, max_locations=2000)
        assert_matches_oracle(r, x, cast=targets, max_locations=2000)


def test_big_endian_bfloat16():
    x = _planted("bfloat16", TARGET_SETS[0])
    swapped = x.astype(x.dtype.newbyteorder(">"))
    assert swapped.view(np.uint8)[1] == x.view(np.uint8)[0]
    r = fastfinite.scan(swapped, cast=TARGET_SETS[0])
    assert_matches_oracle(r, x, cast=TARGET_SETS[0])


def test_with_by_and_statistics():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((50, 40)).astype(ml.bfloat16)
    x[3, 4] = np.nan
    x[:, 7] = 5
    r = fastfinite.scan(x, by=1, cast="float8_e4m3fn")
    f = x.astype(np.float64)
    assert r.slices.count.tolist() == np.isfinite(f).sum(0).tolist()
    assert np.allclose(r.slices.mean, np.nanmean(f, 0))
    assert {f.where for f in r.findings if f.kind == "zero_variance"} == {(7,)}


def test_more_targets_than_a_pass_holds_is_an_error():
    with pytest.raises(fastfinite.InvalidArgumentError, match="at most 5 cast targets"):
        fastfinite.scan(np.zeros(3), cast=TARGET_SETS[0] + ("float8_e3m4",))


def test_through_zarr_and_dask(tmp_path):
    import dask.array as da
    import zarr

    rng = np.random.default_rng(1)
    for name in ("bfloat16", "float8_e4m3fn"):
        x = (rng.standard_normal((64, 30)) * 300).astype(cast_dtype(name))
        x[5, 5] = np.nan
        path = str(tmp_path / f"{name}.zarr")
        a = zarr.create_array(store=path, shape=x.shape, chunks=(16, 30), dtype=x.dtype)
        a[:] = x
        for got in (
            fastfinite.scan(path, cast=TARGET_SETS[0]),
            fastfinite.scan(path, cast=TARGET_SETS[0], scheduler="threads"),
            fastfinite.scan(da.from_array(x, chunks=(16, 15)), cast=TARGET_SETS[0]),
        ):
            assert_matches_oracle(got, x, cast=TARGET_SETS[0])


def test_a_store_written_by_tensorstore(tmp_path):
    ts = pytest.importorskip("tensorstore")
    x = np.array([1, np.nan, 500, 2**-12], ml.float8_e5m2)
    path = str(tmp_path / "t.zarr")
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}
    t = ts.open(spec, create=True, dtype="float8_e5m2", shape=[4]).result()
    t[:] = x
    r = fastfinite.scan(path, cast="float8_e4m3fn")
    assert (r.nan, r.cast["float8_e4m3fn"].overflow, r.cast["float8_e4m3fn"].underflow) == (1, 1, 1)
