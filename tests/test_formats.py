"""The number formats training runs in: bfloat16 and float8 as data and as cast targets,
against ml_dtypes' own casts value by value, through every engine and Zarr.

Part: ``fastfinite/model/casts.py`` and the kernels' cast counts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastfinite
from fastfinite.model.casts import FORMATS, NARROW, TARGETS, cast_dtype, source_thresholds

from .helpers import assert_matches_oracle, run_cli, twin_max

ml = pytest.importorskip("ml_dtypes")

SOURCES = tuple(FORMATS)  # float64 ... float8_e3m4
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _step(v, dtype, up: bool):
    """The next value of ``dtype`` above (or below) the positive value ``v``."""
    bits = np.array([v], dtype).view(UINT[np.dtype(dtype).itemsize]).astype(np.int64)
    return (bits + (1 if up else -1)).astype(UINT[np.dtype(dtype).itemsize]).view(dtype)[0]


def _casts(v, src, dst) -> list[float]:
    """``v`` cast every way the ecosystem rounds it: float64 to bfloat16 and float8 both
    directly (ml_dtypes >= 0.7) and through float32 (PyTorch, older ml_dtypes)."""
    x = np.array([v], src)
    ways = [x]
    if np.dtype(src) == np.float64 and np.dtype(dst).itemsize <= 2 and dst != np.float16:
        ways.append(x.astype(np.float32))
    with np.errstate(all="ignore"):
        return [float(w.astype(dst).astype(np.float64)[0]) for w in ways]


def _overflows(v, src, dst) -> bool:
    return not all(math.isfinite(c) for c in _casts(v, src, dst))


def _underflows(v, src, dst) -> bool:
    return any(c == 0 for c in _casts(v, src, dst))


@pytest.mark.parametrize("source", SOURCES)
def test_thresholds_are_those_of_ml_dtypes_casts(source):
    """For every source format and target: the overflow threshold's cast is not finite and
    its lower neighbour's is; the underflow threshold's cast is 0 and its upper
    neighbour's is not, by any of the ways the cast is rounded. Derived from the formats,
    checked against the casts."""
    src = cast_dtype(source)
    for target in TARGETS:
        dst = cast_dtype(target)
        over, under = source_thresholds(source, target)
        if over == math.inf:
            assert not _overflows(ml.finfo(src).max, src, dst), (source, target)
        else:
            assert float(np.array([over], src)[0]) == over  # a value of the source format
            assert _overflows(over, src, dst), (source, target, over)
            assert not _overflows(_step(over, src, False), src, dst), (source, target)
        if under < 0:
            assert not _underflows(ml.finfo(src).smallest_subnormal, src, dst), (source, target)
        else:
            assert float(np.array([under], src)[0]) == under
            assert _underflows(under, src, dst), (source, target, under)
            assert not _underflows(_step(under, src, True), src, dst), (source, target)


def test_the_issues_example_and_the_float8_maxima():
    x = np.array([np.nextafter(3.39617752923046e38, 0)])
    assert fastfinite.scan(x, cast="bfloat16").cast["bfloat16"].overflow == 1
    assert np.isinf(x.astype(np.float32).astype(ml.bfloat16).astype(np.float64)).all()
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


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize(
    "targets",
    [("float8_e5m2",), ("float32", "float8_e4m3fn", "float8_e5m2"), ("float16", *NARROW[1:4])],
    ids=["one", "two", "more"],
)
def test_clean_data_with_sparse_underflows(dtype, targets):
    """No non-finite value, underflows a few per sub-block or rarer: the fast pass counts
    them and takes their first positions without the slow path; positions and counts as
    the oracle's, for every number of underflow targets a pass is written for."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(600_003) * np.where(rng.random(600_003) < 0.9999, 1.0, 1e-7)
    x = x.astype(cast_dtype(dtype))
    for workers, cap in ((1, 1), (2, 100), (2, 5000)):
        with twin_max(0):
            r = fastfinite.scan(x, cast=targets, workers=workers, max_locations=cap)
        assert_matches_oracle(r, x, cast=targets, max_locations=cap)


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

    from fastfinite.sources.zarr_dtypes import register

    assert register()  # zarr-python writes these formats once they are registered
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


def test_an_array_of_a_narrow_format_unpickled_where_zarr_never_heard_of_it():
    """A source of a zarr array the caller opened (in memory here) goes to a Dask worker
    with its array: its data type's class pickles by name, and a fresh process that looks
    the name up registers the formats then."""
    import pickle
    import subprocess
    import sys

    import zarr

    from fastfinite.sources.open import open_source
    from fastfinite.sources.zarr_dtypes import register

    assert register()
    x = np.array([[1.5, np.nan], [3e38, -2.0]], ml.bfloat16)
    a = zarr.create_array(store=zarr.storage.MemoryStore(), shape=x.shape, dtype=x.dtype)
    a[:] = x
    blob = pickle.dumps(open_source(a))
    code = (
        "import pickle, sys\n"
        "s = pickle.loads(sys.stdin.buffer.read())\n"
        "sys.stdout.buffer.write(s.read((slice(0, 2), slice(0, 2))).tobytes())"
    )
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True)
    assert out.returncode == 0, out.stderr.decode()
    np.testing.assert_array_equal(np.frombuffer(out.stdout, x.dtype).reshape(x.shape), x)


def test_a_store_of_core_types_never_imports_ml_dtypes_and_one_of_bfloat16_does(tmp_path):
    """Importing ml_dtypes takes about a second; a fresh process scanning a float32 store
    must not pay it, and one scanning a bfloat16 store reads it as bfloat16."""
    import subprocess
    import sys

    import zarr

    from fastfinite.sources.zarr_dtypes import register

    assert register()
    plain, narrow = str(tmp_path / "f4.zarr"), str(tmp_path / "bf16.zarr")
    zarr.create_array(store=plain, data=np.array([1.0, np.nan], "f4"))
    x = np.array([1.5, np.inf, 3e38], ml.bfloat16)
    zarr.create_array(store=narrow, shape=x.shape, dtype=x.dtype)[:] = x
    code = (
        "import sys, fastfinite\n"
        "r = fastfinite.scan(sys.argv[1])\n"
        "print(r.dtype, r.nan, r.posinf, 'ml_dtypes' in sys.modules)"
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", code, p], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in (plain, narrow)
    ]  # fmt: skip
    outs = [r.communicate(timeout=300) for r in runs]
    assert [o[0].split() for o in outs] == [
        ["float32", "1", "0", "False"],
        ["bfloat16", "0", "1", "True"],
    ], [o[1] for o in outs]


def test_a_store_written_by_tensorstore(tmp_path):
    ts = pytest.importorskip("tensorstore")
    x = np.array([1, np.nan, 500, 2**-12], ml.float8_e5m2)
    path = str(tmp_path / "t.zarr")
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}
    t = ts.open(spec, create=True, dtype="float8_e5m2", shape=[4]).result()
    t[:] = x
    r = fastfinite.scan(path, cast="float8_e4m3fn")
    assert (r.nan, r.cast["float8_e4m3fn"].overflow, r.cast["float8_e4m3fn"].underflow) == (1, 1, 1)


def _scaled_oracle(x, target, s):
    """What FP8 recipes do: the product in float32, then the cast."""
    with np.errstate(all="ignore"):
        wide = x.astype(np.float64)
        c = (x.astype(np.float32) * np.float32(s)).astype(cast_dtype(target))
        c = c.astype(np.float64)
    nonzero = np.isfinite(wide) & (wide != 0)
    return nonzero & ~np.isfinite(c), nonzero & (c == 0)


@st.composite
def scaled_cases(draw):
    target = draw(st.sampled_from(("float8_e4m3fn", "float8_e5m2", "bfloat16", "float16")))
    dtype = draw(st.sampled_from(("float64", "float32", "bfloat16", "float16", "int32")))
    s = draw(st.sampled_from((1.0, 0.5, 3.0, 1000.0, 2.0**-7, 1 / 3)))
    over, under = source_thresholds("float32", target)
    around = []
    for v in (over / s, under / s, TARGETS[target].smallest_normal / s):
        around += [v * (1 + e) for e in (-1e-3, -1e-7, 0, 1e-7, 1e-3)]
    vals = draw(st.lists(st.sampled_from(around + [0.0, 1.0, np.nan, np.inf]), min_size=1))
    signs = draw(st.lists(st.sampled_from((1.0, -1.0)), min_size=len(vals), max_size=len(vals)))
    with np.errstate(all="ignore"):
        x = np.array(vals) * np.array(signs)
        x = x.astype(np.int32) if dtype == "int32" else x.astype(cast_dtype(dtype))
    return x, target, s


@settings(max_examples=150, deadline=None)
@given(case=scaled_cases())
def test_a_numeric_scale_matches_the_recipes_cast(case):
    x, target, s = case
    r = fastfinite.scan(x, cast=target, scale=s)
    over, under = _scaled_oracle(x, target, s)
    assert (r.cast[target].overflow, r.cast[target].underflow) == (over.sum(), under.sum())
    assert [loc.index for loc in r.locations_of(f"overflow:{target}")] == [
        (int(i),) for i in np.flatnonzero(over)[:100]
    ]
    assert [loc.index for loc in r.locations_of(f"underflow:{target}")] == [
        (int(i),) for i in np.flatnonzero(under)[:100]
    ]


def test_amax_scaling_per_tensor_and_per_slice():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((300, 6)) * np.array([1e-6, 1e-3, 1, 10, 1e3, 1e5])).astype("f4")
    x[[4, 9], [2, 3]] = 0.0
    x[7, 5] = np.nan
    target = "float8_e4m3fn"
    amax = np.nanmax(np.abs(x))
    r = fastfinite.scan(x, cast=target, scale="amax")
    s = np.float32(448 / amax)
    over, under = _scaled_oracle(x, target, s)
    d = r.dynamic_range[target]
    assert (d.overflow, d.underflow, r.cast[target].underflow) == (0, under.sum(), under.sum())
    assert d.scale == float(s) and d.amax == float(amax)
    assert d.nonzero == int((np.isfinite(x) & (x != 0)).sum())
    assert d.underflow_fraction == pytest.approx(under.sum() / d.nonzero)
    by = fastfinite.scan(x, cast=target, scale="amax", by=1)
    sl = by.dynamic_range[target].slices
    for j in range(x.shape[1]):
        col = x[:, j]
        sj = np.float32(448 / np.nanmax(np.abs(col)))
        o, u = _scaled_oracle(col, target, sj)
        assert (sl["scale"][j], sl["overflow"][j], sl["underflow"][j]) == (sj, o.sum(), u.sum())
    assert by.cast[target].underflow == sl["underflow"].sum()
    again = fastfinite.ScanReport.from_json(by.to_json())
    assert again.dynamic_range[target].slices["underflow"].tolist() == sl["underflow"].tolist()


def test_scale_errors():
    x = np.ones(4)
    for bad in (0, -1.0, math.nan, "max"):
        with pytest.raises(fastfinite.InvalidArgumentError, match="scale"):
            fastfinite.scan(x, scale=bad)
    with pytest.raises(fastfinite.InvalidArgumentError, match="scale"):
        fastfinite.scan(x, scale=2.0, scheduler="synchronous")
    with pytest.raises(fastfinite.InvalidArgumentError, match="scale"):
        fastfinite.scan(x, scale=2.0, localize=True)


class _Exported:
    """Only the DLPack protocol of a NumPy array (NumPy's own ``__dlpack__``)."""

    def __init__(self, a, device=(1, 0)):
        self.a, self.device, self.shape = a, device, a.shape

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kw):
        if self.device[0] != 1 and not (kw.get("dl_device") == (1, 0) and kw.get("copy")):
            raise BufferError("the data is on the device")
        return (self.a.copy() if self.device[0] != 1 else self.a).__dlpack__()

    def __getitem__(self, key):
        self.reads = getattr(self, "reads", 0) + 1
        return _Exported(self.a[key], self.device)


def test_numpys_own_dlpack_is_read_in_place():
    from fastfinite.sources.dlpack import host_array

    a = np.arange(12.0).reshape(3, 4)[:, ::2]
    a[1, 1] = np.nan
    t = _Exported(a)
    assert np.shares_memory(host_array(t), a)
    assert_matches_oracle(fastfinite.scan(t), a)


def test_a_tensor_on_an_accelerator():
    """No accelerator here: a stand-in that answers DLPack as a CUDA tensor does."""
    a = np.arange(40.0).reshape(10, 4)
    a[7, 1] = np.inf
    with pytest.raises(fastfinite.SourceError, match="cuda:0.*device_copy=True"):
        fastfinite.scan(_Exported(a, (2, 0)))
    with pytest.raises(fastfinite.SourceError, match="batch 0, element 0: .*cuda:0"):
        list(fastfinite.guard([_Exported(a, (2, 0))]))
    t = _Exported(a, (2, 0))
    r = fastfinite.scan(t, device_copy=True, region_bytes=64)
    assert_matches_oracle(r, a)
    assert t.reads > 2  # one region at a time
    g = fastfinite.guard([_Exported(a, (2, 0))], device_copy=True, on_bad="skip")
    assert list(g) == [] and g.bad == 1


JAX_CHECK = """
import sys
import numpy as np
import jax.numpy as jnp
import fastfinite
from fastfinite.sources.dlpack import host_array
from tests.helpers import assert_matches_oracle

x = np.arange(-20.0, 20.0).reshape(8, 5) * 37.0
x[2, 3] = np.nan
j = jnp.asarray(x.astype(np.float32)).astype(getattr(jnp, sys.argv[1]))
ref = np.asarray(j)
assert host_array(j).ctypes.data == ref.ctypes.data  # no copy
targets = ("float16", "float8_e4m3fn")
for t in (j, j.T):
    assert_matches_oracle(fastfinite.scan(t, cast=targets), np.asarray(t), cast=targets)
g = fastfinite.guard([j], on_bad="skip", cast=targets)
assert list(g) == [] and g.bad == 1
print("ok")
"""


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_jax_arrays_on_the_cpu(dtype):
    """In a child process: JAX's threads must not meet the forks other tests make."""
    import os
    import subprocess
    import sys

    pytest.importorskip("jax")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=root)
    out = subprocess.run(
        [sys.executable, "-c", JAX_CHECK, dtype], capture_output=True, text=True, env=env,
        cwd=root, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn"])
def test_npy_of_raw_bytes_with_raw_dtype(tmp_path, fmt):
    """np.save keeps only the raw bytes of ml_dtypes arrays (|V2, |V1): without raw_dtype
    an error that says so; with it, the scan of the array, in every engine and after the
    source travels to a worker (pickled)."""
    import pickle

    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 0.5, 1e-9]], np.float32)
    if fmt == "float8_e4m3fn":
        x[1, 0] = 470.0  # NaN in a format without inf
    with np.errstate(all="ignore"):
        y = x.astype(cast_dtype(fmt))
    path = tmp_path / "x.npy"
    np.save(path, y)
    with pytest.raises(fastfinite.UnsupportedDtypeError, match="raw_dtype"):
        fastfinite.scan(str(path))
    want = fastfinite.scan(y).to_dict()
    for kw in ({}, {"scheduler": "synchronous"}):
        got = fastfinite.scan(str(path), raw_dtype=fmt, **kw).to_dict()
        assert {**got, "name": ""} == {**want, "name": ""}
    from fastfinite.sources.ndarray import open_npy

    again = pickle.loads(pickle.dumps(open_npy(path, raw_dtype=fmt)))
    assert again.array.dtype == y.dtype and again.array.tobytes() == y.tobytes()
    with pytest.raises(fastfinite.UnsupportedDtypeError, match="raw bytes of"):
        fastfinite.scan(x, raw_dtype=fmt)  # float32 data is never reinterpreted
    with pytest.raises(fastfinite.InvalidArgumentError, match="raw_dtype must be one of"):
        fastfinite.scan(str(path), raw_dtype="bfloat17")
    run = ["scan", str(path), "--json", "-"]
    r = run_cli(*run, "--raw-dtype", fmt)
    assert r.returncode == 1 and '"nan"' in r.stdout, r.stderr
    r = run_cli(*run)
    assert r.returncode == 2 and "--raw-dtype" in r.stderr and "Traceback" not in r.stderr


def test_amax_past_what_a_float32_scale_holds_is_reported_not_a_crash():
    """float8's max / 1e308 underflows float32: the scale is 0, no value stays normal
    (smallest_normal inf), and the scan reports it rather than dividing by zero."""
    x = np.array([1e308, 1e308, 1.0, 2.0, 3.0])
    r = fastfinite.scan(x, scale="amax", cast="float8_e4m3fn")
    d = r.dynamic_range["float8_e4m3fn"]
    assert d.scale == 0.0 and d.smallest_normal == math.inf and d.amax == 1e308
    assert r.cast["float8_e4m3fn"].underflow == 3  # 1, 2, 3 scaled by 0


@pytest.mark.parametrize("kw", [{}, {"by": 0}, {"by": -1}, {"localize": True},
                                {"scale": "amax", "cast": "float8_e4m3fn"}])  # fmt: skip
@pytest.mark.parametrize("policy", ["twins", "kernels"])
def test_the_callers_numpy_error_state_and_warning_filters_change_nothing(kw, policy):
    """The classic debugging set-up, ``np.seterr(all="raise")`` and ``-W error``, around a
    scan of the very values it hunts for (overflowing sums, NaN, inf), on one thread and on
    many: the same report as without, never a FloatingPointError or a RuntimeWarning."""
    import warnings

    from fastfinite.compute import dispatch

    rng = np.random.default_rng(3)
    x = rng.standard_normal((4000, 60)) * 1e307
    x[::97, 3] = np.nan
    x[5, ::7] = np.inf
    small = np.array([1e308, 1e308, 1.0, 2.0, 3.0])
    with dispatch.using(policy):
        quiet = [fastfinite.scan(a, **kw).to_dict() for a in (x, small)]
    old = np.seterr(all="raise")
    try:
        with warnings.catch_warnings(), dispatch.using(policy):
            warnings.simplefilter("error")
            loud = [fastfinite.scan(a, **kw).to_dict() for a in (x, small)]
            if not {"scale", "localize"} & set(kw):  # a Dask graph's tasks too
                import dask

                graphs = [fastfinite.scan(a, compute=False, **kw) for a in (x, small)]
                got = dask.compute(*graphs, scheduler="sync")
                assert [r.to_dict() for r in got] == quiet
            assert list(fastfinite.guard([small], cast=("float16",), on_bad="skip")) == []
    finally:
        np.seterr(**old)
    assert loud == quiet
