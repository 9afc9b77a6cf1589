"""The scan's contract: inputs, errors, merging, statistics, the report.

Part: ``fastfinite/api.py`` (``scan``) end to end.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import fastfinite
from fastfinite.compute.summarize import summarize
from fastfinite.compute.summary import ScanSpec, merge, merge_all

from .helpers import assert_matches_oracle


def test_report_contract_names():
    x = np.zeros((3, 4))
    x[2, 1] = np.nan
    x[0, 3] = np.inf
    x[1, 0] = -np.inf
    x[1, 1] = 1e100
    r = fastfinite.scan(x)
    assert (r.nan, r.posinf, r.neginf, r.nonfinite) == (1, 1, 1, 3)
    assert isinstance(r.nan, int) and isinstance(r.nonfinite, int)
    assert r.cast["float32"].overflow == 1 and r.cast["float32"].underflow == 0
    assert [(loc.kind, loc.index) for loc in r.locations] == [
        ("posinf", (0, 3)),
        ("neginf", (1, 0)),
        ("overflow:float32", (1, 1)),
        ("nan", (2, 1)),
    ]
    assert all(isinstance(i, int) for loc in r.locations for i in loc.index)
    assert r.count == 9 and r.min == 0.0 and r.max == 1e100
    assert r.mean == pytest.approx(1e100 / 9)
    assert r.std == pytest.approx(np.std(x[np.isfinite(x)]))
    assert not r.ok
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["schema"] == "fastfinite.report/2"
    text = str(r)
    assert "(2, 1)" in text and "nan 1" in text


def test_clean_report_is_ok():
    r = fastfinite.scan(np.arange(10.0))
    assert r.ok and r.nonfinite == 0 and r.cast["float32"].overflow == 0
    assert r.locations == []
    assert r.complete


def test_default_cast_is_float32_only_and_opt_in_targets():
    x = np.array([1e5, 1e-30], dtype=np.float64)
    assert list(fastfinite.scan(x).cast) == ["float32"]
    r = fastfinite.scan(x, cast=("float16", "bfloat16", "float32"))
    assert list(r.cast) == ["float16", "bfloat16", "float32"]
    assert r.cast["float16"].overflow == 1 and r.cast["float16"].underflow == 1
    assert r.cast["bfloat16"].overflow == 0 and r.cast["bfloat16"].underflow == 0
    assert fastfinite.scan(x, cast=None).cast == {}


def test_float32_data_has_no_float32_cast_risk():
    x = np.array([np.finfo(np.float32).max, 1e-45], dtype=np.float32)
    r = fastfinite.scan(x)
    assert r.ok and r.cast["float32"].overflow == 0


def test_zero_d_and_empty():
    r = fastfinite.scan(np.float64(np.inf))
    assert r.posinf == 1 and r.locations[0].index == ()
    r = fastfinite.scan(np.array(3.0))
    assert r.ok and r.count == 1 and r.mean == 3.0 and r.std == 0.0
    r = fastfinite.scan(np.empty((0, 5), dtype=np.float32))
    assert r.ok and r.count == 0 and math.isnan(r.mean) and r.elements == 0
    assert fastfinite.scan([]).ok


def test_complex_counts_both_parts():
    x = np.array([1 + 1j, complex(np.nan, np.nan), complex(1, np.inf), complex(1e100, 0)])
    r = fastfinite.scan(x)
    assert r.nan == 2 and r.posinf == 1
    assert [loc.index for loc in r.locations_of("nan")] == [(1,)]
    assert r.cast["float32"].overflow == 1
    assert_matches_oracle(r, x)


@pytest.mark.parametrize("dtype", ["i1", "u2", "i4", "u8", "i8", "bool"])
def test_integers_and_bool_get_statistics(dtype):
    x = np.arange(-5, 20).astype(dtype)
    r = fastfinite.scan(x)
    assert r.nonfinite == 0 and r.count == x.size
    assert r.mean == pytest.approx(x.astype(np.float64).mean())
    assert r.min == x.min() and r.max == x.max()


def test_int_to_float16_overflow():
    x = np.array([65519, 65520, 70000, -70000], dtype=np.int32)
    r = fastfinite.scan(x, cast="float16")
    with np.errstate(over="ignore"):
        assert r.cast["float16"].overflow == np.isinf(x.astype(np.float16)).sum() == 3


@pytest.mark.parametrize(
    "bad",
    [
        np.array(["a", "b"]),
        np.array([b"a"]),
        np.array([1, "x"], dtype=object),
        np.zeros(2, dtype=[("a", "f8"), ("b", "i4")]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
    ],
)
def test_unsupported_dtypes_raise_type_error_naming_dtype(bad):
    with pytest.raises(TypeError) as e:
        fastfinite.scan(bad)
    assert str(bad.dtype) in str(e.value)


def test_longdouble_is_refused_not_truncated():
    x = np.array([1.0], dtype=np.longdouble)
    if x.dtype.itemsize == 8:
        pytest.skip("longdouble is float64 here")
    with pytest.raises(TypeError, match="float128|longdouble"):
        fastfinite.scan(x)


def test_bad_arguments():
    with pytest.raises(ValueError, match="float8"):
        fastfinite.scan(np.zeros(2), cast="float8")
    with pytest.raises(ValueError, match="max_locations"):
        fastfinite.scan(np.zeros(2), max_locations=-1)
    with pytest.raises(ValueError, match="on_error"):
        fastfinite.scan(np.zeros(2), on_error="ignore")
    with pytest.raises(fastfinite.SourceError, match="no such file"):
        fastfinite.scan("/nonexistent/x.npy")
    with pytest.raises(fastfinite.SourceError, match="type"):
        fastfinite.scan(object())


def test_input_never_modified_and_read_only_accepted():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((50, 40)).astype(">f4")
    x[3, 3] = np.nan
    x.setflags(write=False)
    before = x.copy()
    r = fastfinite.scan(x[::-1, ::3], cast=("float16",))
    np.testing.assert_array_equal(x, before)
    assert r.nan == 1 and r.locations[0].index == (46, 1)


def test_stable_with_large_offset():
    rng = np.random.default_rng(0)
    x = 1e9 + rng.standard_normal(1_000_000)
    r = fastfinite.scan(x, region_bytes=1 << 16)
    assert r.mean == pytest.approx(np.mean(x), rel=1e-14)
    assert r.std == pytest.approx(np.std(x), rel=1e-9)
    x32 = (1e4 + rng.standard_normal(1_000_000)).astype(np.float32)
    r = fastfinite.scan(x32)
    assert r.std == pytest.approx(np.std(x32.astype(np.float64)), rel=1e-9)


def test_merge_is_associative_and_order_free():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(3000) * 100
    x[rng.integers(0, 3000, 30)] = np.nan
    x[rng.integers(0, 3000, 5)] = 1e300
    spec = ScanSpec(x.shape, x.dtype, ("float32", "float16"), 4)
    cuts = [0, 10, 11, 700, 1500, 2999, 3000]
    parts = [summarize(x[a:b], (a,), spec) for a, b in zip(cuts[:-1], cuts[1:])]
    whole = summarize(x, (0,), spec)
    left = parts[0]
    for p in parts[1:]:
        left = merge(left, p, 4)
    right = parts[-1]
    for p in reversed(parts[:-1]):
        right = merge(p, right, 4)
    shuffled = merge_all([parts[i] for i in (3, 0, 5, 1, 4, 2)], 4)
    for s in (left, right, shuffled, merge_all(parts, 4)):
        np.testing.assert_array_equal(s.counts, whole.counts)
        for a, b in zip(s.loc_index, whole.loc_index):
            np.testing.assert_array_equal(a, b)
        assert s.n == whole.n and s.min == whole.min and s.max == whole.max
        assert s.mean == pytest.approx(whole.mean, rel=1e-12)
        assert s.std == pytest.approx(whole.std, rel=1e-12)


def test_large_array_threaded_equals_serial():
    rng = np.random.default_rng(7)
    x = rng.standard_normal(6_000_000).astype(np.float64)  # 48 MB: above the threading bar
    x[rng.integers(0, x.size, 500)] = np.nan
    x[rng.integers(0, x.size, 50)] = -1e200
    par = fastfinite.scan(x, max_locations=20)
    ser = fastfinite.scan(x, max_locations=20, workers=1)
    assert par.counts() == ser.counts() and par.locations == ser.locations
    assert par.mean == pytest.approx(ser.mean, rel=1e-12)
    ref = np.isnan(x).sum()
    assert par.nan == ref


def test_npy_path_and_memmap(tmp_path):
    x = np.arange(1000, dtype=np.float32).reshape(10, 100)
    x[4, 7] = np.nan
    path = tmp_path / "a.npy"
    np.save(path, x)
    r = fastfinite.scan(str(path))
    assert r.nan == 1 and r.locations[0].index == (4, 7)
    assert r.name == str(path)
    r = fastfinite.scan(path)
    assert r.nan == 1
    mm = np.load(path, mmap_mode="r")
    assert fastfinite.scan(mm).nan == 1
    fortran = tmp_path / "f.npy"
    np.save(fortran, np.asfortranarray(x))
    assert fastfinite.scan(fortran).locations[0].index == (4, 7)


def test_a_npy_scan_imports_nothing_it_does_not_read(tmp_path):
    """``import fastfinite`` and a scan of a ``.npy`` stay fast: the modules of other inputs
    (zarr and its data types from ml_dtypes, dask, h5py, the tables) are not imported."""
    import subprocess
    import sys

    path = tmp_path / "a.npy"
    np.save(path, np.array([1.0, np.nan]))
    heavy = ("zarr", "ml_dtypes", "dask", "distributed", "h5py", "xarray", "pandas", "pyarrow")
    code = (
        f"import sys, fastfinite; assert fastfinite.scan({str(path)!r}).nan == 1; "
        f"print(*[m for m in {heavy!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []


def test_assert_finite():
    x = np.ones((3, 3))
    assert fastfinite.assert_finite(x).ok
    x[2, 1] = np.nan
    with pytest.raises(fastfinite.NonFiniteError, match=r"nan 1 at \(2, 1\)") as e:
        fastfinite.assert_finite(x)
    assert isinstance(e.value, ValueError)
    assert e.value.report.nan == 1
    with pytest.raises(fastfinite.NonFiniteError, match="overflow:float32"):
        fastfinite.assert_finite(np.array([1e100]))
    assert fastfinite.assert_finite(np.array([1e100]), cast=None).ok


def test_max_locations_per_kind_first_in_c_order():
    x = np.full((6, 6), np.nan, order="F")
    x[0, 0] = np.inf
    r = fastfinite.scan(x, max_locations=3)
    assert r.nan == 35
    assert [loc.index for loc in r.locations_of("nan")] == [(0, 1), (0, 2), (0, 3)]
    assert [loc.index for loc in r.locations_of("posinf")] == [(0, 0)]
    assert fastfinite.scan(x, max_locations=0).locations == []


def test_fail_fast_marks_incomplete():
    x = np.zeros(4_000_000, dtype=np.float32)
    x[10] = np.nan
    x[-1] = np.nan
    r = fastfinite.scan(x, fail_fast=True, region_bytes=1 << 16, workers=1)
    assert not r.complete and r.nan == 1 and not r.ok
    assert fastfinite.scan(x, region_bytes=1 << 16).complete


def test_every_entry_point_validates_its_options_with_the_same_messages(capsys):
    """``scan``, ``localize``, ``guard`` and the CLI share ``options``' validators: a bad
    value is an InvalidArgumentError (a ValueError) that shows it, wherever it is given."""
    x = np.zeros(4)
    r = fastfinite.scan(x)
    bad = [
        (lambda: fastfinite.scan(x, split_every=1), "split_every must be an int >= 2, got 1"),
        (lambda: fastfinite.scan(x, workers=0), "workers must be an int >= 1, got 0"),
        (lambda: fastfinite.scan(x, region_bytes="1"), "region_bytes must be an int >= 1"),
        (lambda: fastfinite.scan(x, z_threshold=True), "z_threshold must be a number > 0"),
        (lambda: fastfinite.localize(x, r, max_locations=-1), "max_locations must be an int >= 0"),
        (lambda: fastfinite.localize(x, r, eps=-1.0), "eps must be a number >= 0, got -1.0"),
        (lambda: fastfinite.guard([x], max_locations="5"), "max_locations must be an int >= 0"),
        (lambda: fastfinite.guard([x], by="0"), "by must be an int or a tuple of ints, got '0'"),
        (lambda: fastfinite.guard([x], on_bad="ignore"), "on_bad must be one of 'raise'"),
        (lambda: fastfinite.guard([x], prefetch=-2), "prefetch must be an int >= 0, got -2"),
    ]
    for call, message in bad:
        with pytest.raises(fastfinite.InvalidArgumentError, match=re.escape(message)):
            call()
    from fastfinite.cli import main

    with pytest.raises(SystemExit) as e:
        main(["scan", "x.npy", "--split-every", "1"])
    assert e.value.code == 2
    assert "--split-every must be an int >= 2, got 1" in capsys.readouterr().err
