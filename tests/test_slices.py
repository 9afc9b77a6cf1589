"""Per-slice statistics, variance anomalies, the errstate replay and the training masks.

Part: ``fastfinite/kernels/slices.py``, ``report/findings.py``, ``passes/localize.py``.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from collections import Counter
from types import SimpleNamespace

import dask.array as da
import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite.compute.blocks import first_where
from fastfinite.model.stats import SLICE_BLOCK, TILE


def _expected(x, by):
    """NumPy's per-slice statistics in float64 (the oracle)."""
    other = tuple(a for a in range(x.ndim) if a not in by)
    xf = x.astype(np.float64)
    fin = np.where(np.isfinite(xf), xf, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = {
            "nan": np.isnan(xf).sum(axis=other),
            "posinf": np.isposinf(xf).sum(axis=other),
            "neginf": np.isneginf(xf).sum(axis=other),
            "count": np.isfinite(xf).sum(axis=other),
            "mean": np.nanmean(fin, axis=other),
            "std": np.nanstd(fin, axis=other),
            "min": np.nanmin(fin, axis=other),
            "max": np.nanmax(fin, axis=other),
        }
    return out


def _check(report, x, by):
    ref = _expected(x, tuple(a % x.ndim for a in by))
    s = report.slices
    for name in ("nan", "posinf", "neginf", "count"):
        np.testing.assert_array_equal(getattr(s, name), ref[name], err_msg=name)
    for name in ("mean", "std", "min", "max"):
        np.testing.assert_allclose(
            getattr(s, name), ref[name], rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=name
        )


def _data(shape, seed=0, dtype="f8"):
    rng = np.random.default_rng(seed)
    x = (5 + 3 * rng.standard_normal(shape)).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, max(1, flat.size // 40))] = np.nan
    flat[rng.integers(0, flat.size, max(1, flat.size // 90))] = np.inf
    flat[rng.integers(0, flat.size, max(1, flat.size // 90))] = -np.inf
    return x


@pytest.mark.parametrize("by", [0, -1, 1, (0, 2), (1, 2), (0, 1, 2)])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["f8", "f4", "f2", "i4", "c8"])
def test_slices_equal_numpy_for_every_region_size(by, order, dtype):
    base = "f8" if dtype in ("c8", "i4") else dtype
    x = np.asarray(_data((13, 7, 5), seed=1, dtype=base), order=order)
    if dtype == "c8":
        x = x.astype("c8")
    if dtype == "i4":
        x = np.nan_to_num(x, nan=0, posinf=9, neginf=-9).astype("i4")
    by_t = by if isinstance(by, tuple) else (by,)
    ref = None
    for region in (8, 100, 1 << 20):
        r = fastfinite.scan(x, by=by, region_bytes=region)
        assert r.by == tuple(sorted(a % 3 for a in by_t))
        if x.dtype.kind != "c":
            _check(r, x, by_t)
        if ref is None:
            ref = r
        assert r.counts() == ref.counts() and r.locations == ref.locations
        assert [(f.kind, f.where) for f in r.findings] == [(f.kind, f.where) for f in ref.findings]


@pytest.mark.parametrize("by", [0, -1, (0, 1)])
def test_slices_from_zarr_and_dask(tmp_path, by):
    x = _data((20, 9, 4), seed=2)
    path = str(tmp_path / "a.zarr")
    zarr.create_array(store=path, data=x, chunks=(3, 4, 4))
    by_t = by if isinstance(by, tuple) else (by,)
    for report in (
        fastfinite.scan(path, by=by, region_bytes=1),
        fastfinite.scan(path, by=by, scheduler="threads", region_bytes=200),
        fastfinite.scan(da.from_array(x, chunks=(7, 2, 3)), by=by, split_every=2),
    ):
        _check(report, x, by_t)


@pytest.mark.parametrize("dtype", ["f8", "f4"])
@pytest.mark.parametrize("by, shape, order, whole", [
    (0, (100_000, 6), "F", True), (-1, (6, 100_000), "C", True),  # the slice axis is cut
    (0, (100_000, 6), "C", True), (-1, (100_000, 6), "C", False),  # the layout's regions
    (0, (20_000, 100), "F", False),  # cut, the runs in memory would be too short
    (0, (50_000, 12), "F", True),  # runs of 87 KB: as long in float64 as in float32
])  # fmt: skip
def test_many_slices_in_many_regions_equal_numpy(by, shape, order, whole, dtype):
    """Slices over several regions: where the slice axis is innermost in memory the regions
    cut it, so each holds whole slices (their columns lent by the canvas and joined without
    a copy); elsewhere each region holds a part of every slice, and they are merged."""
    from fastfinite.compute.blocks import memory_regions

    x = np.asarray(_data(shape, seed=3, dtype=dtype), order=order)
    axis = by % 2
    regions = list(memory_regions(x, (1 << 20) // x.itemsize, across=(axis,)))
    assert len(regions) > 2
    assert all(r[1 - axis] == slice(0, shape[1 - axis]) for r in regions) == whole
    r = fastfinite.scan(x, by=by, region_bytes=1 << 20)
    _check(r, x, (by,))
    one = fastfinite.scan(x, by=by, region_bytes=1 << 30)
    assert r.counts() == one.counts() and r.locations == one.locations
    assert [(f.kind, f.where) for f in r.findings] == [(f.kind, f.where) for f in one.findings]


@pytest.mark.parametrize("dtype", ["f8", "f4"])
@pytest.mark.parametrize("by, order, runs, shape", [
    ((1, 2), "C", True, (10, 300, 300)),  # the slice axes innermost, in order: cut the first
    ((0, 2), "C", True, (10, 300, 300)),  # the layout's regions already hold runs of slices
    ((0, 1), "F", False, (300, 300, 10)),  # innermost, other order: each region holds all
    # runs of 50 KB in the budget: the regions grow (up to twice it) so that they reach 64 KB
    ((1, 2), "C", True, (20, 200, 300)),
])  # fmt: skip
def test_slices_over_several_axes_in_many_regions_equal_numpy(by, order, runs, shape, dtype):
    """``by`` a tuple: where its axes are the innermost in memory the regions cut the first
    of them and take the other axes whole, so each region's slices are a run of the flat
    slice index (lent by the canvas); else they are merged. The report is the oracle's,
    and one region's."""
    from fastfinite.compute.blocks import memory_regions

    x = np.asarray(_data(shape, seed=5, dtype=dtype).reshape(shape), order=order)
    regions = list(memory_regions(x, (1 << 20) // x.itemsize, across=by))
    whole = [a for a in range(3) if a != by[0]]  # a run of slices: all but by[0] whole
    assert len(regions) > 2
    assert all(r[a] == slice(0, shape[a]) for r in regions for a in whole) == runs
    r = fastfinite.scan(x, by=by, region_bytes=1 << 20)
    _check(r, x, by)
    one = fastfinite.scan(x, by=by, region_bytes=1 << 30)
    assert r.counts() == one.counts() and r.locations == one.locations
    assert [(f.kind, f.where) for f in r.findings] == [(f.kind, f.where) for f in one.findings]


@pytest.mark.parametrize("kept", [None, 8])
def test_canvas_lends_each_slice_once_and_joins_side_by_side_runs_without_a_copy(kept, monkeypatch):
    """Up to ``KEPT_NUMBERS`` slices a canvas's runs number their slices with views of the
    numbers every canvas shares (read-only); past it (``kept``=8) with its own row."""
    from fastfinite.compute import pages
    from fastfinite.compute.summary import SliceCanvas, join_slices

    if kept is not None:
        monkeypatch.setattr(pages, "KEPT_NUMBERS", kept)
    canvas = SliceCanvas(20)
    a, b, c = canvas.lend(0, 5), canvas.lend(5, 4), canvas.lend(12, 3)
    assert canvas.lend(3, 4) is None and canvas.lend(14, 2) is None and canvas.lend(18, 5) is None
    for run in (a, b, c):
        for col in run.columns():
            col[:] = (
                np.arange(len(run.idx)) + 100 * run.idx[0] + (0.5 if col.dtype.kind == "f" else 0)
            )
    shared = pages.slice_numbers(20)
    for run in (a, b, c):
        assert np.shares_memory(run.idx, shared) == (kept is None)
        assert run.idx.flags.writeable == (kept is not None)
    joined = join_slices([a, b])
    assert np.shares_memory(joined.mean, a.mean) and np.shares_memory(joined.mean, b.mean)
    assert np.shares_memory(joined.idx, a.idx) and np.shares_memory(joined.idx, b.idx)
    apart = join_slices([a, c])  # not side by side: a copy
    assert not np.shares_memory(apart.mean, a.mean)
    for j, runs in ((joined, [a, b]), (apart, [a, c])):
        for f in ("idx", *j.FIELDS):
            np.testing.assert_array_equal(
                getattr(j, f), np.concatenate([getattr(r, f) for r in runs])
            )


@pytest.mark.parametrize("by", [0, 1])
def test_scans_past_the_kept_slice_numbers_equal_those_within(by, monkeypatch):
    """A canvas of more slices than a process keeps numbers for numbers them in its own
    row, loan by loan: the same report, over many regions, as with the shared numbers."""
    from fastfinite.compute import pages

    x = np.random.default_rng(4).standard_normal((3000, 700)).astype(np.float32)
    x[17, 3], x[2900, 650], x[:, 5] = np.nan, np.inf, 1.5  # a NaN, an inf, a constant
    within = fastfinite.scan(x, by=by, region_bytes=1 << 16)
    monkeypatch.setattr(pages, "KEPT_NUMBERS", 16)
    past = fastfinite.scan(x, by=by, region_bytes=1 << 16)
    for f in past.slices.ARRAYS:
        np.testing.assert_array_equal(getattr(past.slices, f), getattr(within.slices, f), f)
    assert [(f.kind, f.where) for f in past.findings] == [
        (f.kind, f.where) for f in within.findings
    ]
    assert len(within.findings) >= 2


@pytest.mark.parametrize("size", [1000, 100_000, 1 << 20])
def test_canvas_lends_zero_counts_even_after_the_heap_held_other_values(size):
    """The kernels only add to a slice's counts where it holds NaN or infinities: a loan
    must start at zero, whatever memory the process freed before (``np.empty`` would hand
    it back dirty)."""
    from fastfinite.compute.summary import SliceCanvas

    dirty = np.full((12, size), -1, np.int64)
    del dirty
    canvas = SliceCanvas(size)
    run = canvas.lend(0, size)
    _, counts = run.kernel_outputs()
    assert counts.shape == (3, size) and not counts.any()
    counts[:, ::7] += 1  # writable, and only where written
    assert counts.sum() == 3 * len(range(0, size, 7))
    np.testing.assert_array_equal(run.idx, np.arange(size))
    x = np.zeros((size, 3), np.float32)  # a scan's counts through such a canvas
    x[size // 2, 1], x[-1, 0] = np.nan, -np.inf
    sl = fastfinite.scan(x, by=0).slices
    assert sl.nan.sum() == 1 and sl.nan[size // 2] == 1 and sl.neginf[-1] == 1
    assert sl.posinf.sum() == 0 and sl.neginf.sum() == 1


def test_report_columns_spend_the_summary_only_when_told():
    """The local engine's report writes its columns over the merged slice statistics it
    owns (``consume``); without it (dask's summaries live in the graph) they stay intact,
    and both give the same columns, slices without a finite value included."""
    from fastfinite.compute.summary import ScanSpec, SliceStats, join_slices, merge_slices
    from fastfinite.report.build import slice_report

    x = _data((6, 40), seed=4)
    x[2] = np.nan  # a slice with no finite value
    runs = None
    for rows in (slice(0, 3), slice(3, 6)):  # two regions, merged like the engines do
        part = fastfinite.scan(x[rows], by=0).slices
        idx = np.arange(rows.start, rows.stop, dtype=np.int64)
        std = part.std.astype(np.float64)
        cols = (part.count, part.mean, std, part.min, part.max, part.nan, part.posinf, part.neginf)
        runs = merge_slices(runs, [SliceStats(idx, *cols)])
    stats = join_slices(runs)
    before = {f: getattr(stats, f).copy() for f in SliceStats.FIELDS}
    spec = ScanSpec(x.shape, x.dtype, by=(0,))
    kept, _ = slice_report(spec, [stats])
    for f in SliceStats.FIELDS:
        np.testing.assert_array_equal(getattr(stats, f), before[f], err_msg=f)
    spent, _ = slice_report(spec, [stats], consume=True)
    for name in spent.ARRAYS:
        np.testing.assert_array_equal(getattr(spent, name), getattr(kept, name), err_msg=name)
    _check(SimpleNamespace(slices=spent), x, (0,))
    assert np.shares_memory(spent.mean, stats.mean) and not np.shares_memory(kept.mean, stats.mean)


def test_clean_gaussian_flags_nothing():
    x = np.random.default_rng(0).standard_normal((10_000, 1_000))
    for by in (0, -1):
        r = fastfinite.scan(x, by=by)
        assert r.findings == [] and r.ok and r.bad_slices() == []
        assert not r.mask().any()


def test_findings_leave_the_cycle_collector_as_they_found_it():
    """Findings are made with Python's cycle collector paused; it is on again after, and a
    caller's own choice to keep it off is kept."""
    import gc

    x = np.random.default_rng(1).standard_normal((50, 20))
    x[:, 3] = np.nan  # every row flagged
    assert gc.isenabled()
    assert len(fastfinite.scan(x, by=0).findings) == 50
    assert gc.isenabled()
    gc.disable()
    try:
        assert len(fastfinite.scan(x, by=0).findings) == 50
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_every_finding_kind():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 200)).astype(np.float32)
    x[1, 5] = np.nan  # nonfinite
    x[2, :] = 4.0  # zero variance
    x[3, :] = np.float32(1e6)  # near-zero variance: one ulp of noise on a big mean
    x[3, 7] = np.nextafter(np.float32(1e6), np.float32(2e6))
    x[4, :] = np.float32(3e36)  # sum overflows float32 (200 * 3e36)
    x[5, :] = rng.standard_normal(200).astype(np.float32) * np.float32(1e20)  # squares overflow
    x[6, 0] = 1e4  # outlier: |z| about 14
    r = fastfinite.scan(x, by=0)
    kinds = {(f.kind, f.where) for f in r.findings}
    assert ("nonfinite", (1,)) in kinds
    assert ("zero_variance", (2,)) in kinds
    assert ("near_zero_variance", (3,)) in kinds
    assert ("sum_overflow:float32", (4,)) in kinds
    assert ("variance_overflow:float32", (5,)) in kinds
    assert ("outlier", (6,)) in kinds
    assert all(f.where != (0,) and f.where != (7,) for f in r.findings)
    assert r.bad_slices() == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(r.mask(), [False, True, True, True, True, True, True, False])
    for f in r.findings:
        assert str(f.where[0]) in f.message and len(f.message) > 30
    # each message quotes its own slice's statistics (gathered for all flagged slices at once)
    said = {(f.kind, f.where[0]): f.message for f in r.findings}
    s = r.slices
    assert "slice (1,) holds 1 NaN, 0 +inf and 0 -inf" in said["nonfinite", 1]
    assert f"all {s.count[2]} finite values of slice (2,) equal 4:" in said["zero_variance", 2]
    assert f"of its mean {s.mean[3]:.6g} over {s.count[3]} values" in said["near_zero_variance", 3]
    assert f"slice (4,) is {s.mean[4] * s.count[4]:.4g}," in said["sum_overflow:float32", 4]
    m2 = s.std[5] ** 2 * s.count[5]
    assert f"slice (5,) is {m2:.4g}," in said["variance_overflow:float32", 5]
    quoted = f"min {s.min[6]:.6g}, max {s.max[6]:.6g}, mean {s.mean[6]:.6g}, std {s.std[6]:.6g}"
    assert f"slice (6,) has a value {s.max_z[6]:.3g} standard" in said["outlier", 6]
    assert quoted in said["outlier", 6]
    # np.std in float32 really does overflow where predicted
    with np.errstate(over="ignore"):
        assert np.isinf(x[5].std()) and np.isinf(x[4].sum())
    # float64 data: the cast target float32 is checked
    r64 = fastfinite.scan(x.astype(np.float64), by=0)
    assert ("variance_overflow:float32", (5,)) in {(f.kind, f.where) for f in r64.findings}
    assert fastfinite.scan(x, by=0, z_threshold=100).bad_slices() == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("by", [(0,), (0, 1)])
def test_findings_come_in_slice_order_then_kind_order_and_a_limit_cuts_there(by):
    """Findings are made kind by kind, in bulk, then put in place: slice order, then the
    order of ``slice_kinds``, as the NumPy twin's flags give them, with slices holding
    several kinds; ``limit`` keeps the first of them, whatever the kinds."""
    from fastfinite.compute.limits import overflow_dtypes, overflow_thresholds, rounding_eps
    from fastfinite.reference import twins
    from fastfinite.report.findings import slice_findings, slice_kinds

    rng = np.random.default_rng(11)
    x = rng.standard_normal((12, 3, 50)).astype(np.float32)
    x[0] = np.float32(3e36)  # zero variance, its sum overflows float32, float16, bfloat16
    x[2, 1, 4] = np.nan
    x[5, :, :] = 2.0
    x[5, 2, 0] = np.inf  # non-finite, and zero variance where it holds no inf
    x[7, 0, :] = rng.standard_normal(50).astype(np.float32) * np.float32(1e20)
    x[9, 2, 3] = 1e4  # an outlier
    cast = ("float16", "bfloat16")
    r = fastfinite.scan(x, by=by, cast=cast)
    s = r.slices
    dtypes = overflow_dtypes(x.dtype, cast)
    eps, cols = rounding_eps(x.dtype), [s.count, s.mean, s.std, s.max_z, s.nan, s.posinf, s.neginf]
    cols = [np.ascontiguousarray(c).reshape(-1) for c in cols]
    at, bits = np.empty(len(cols[0]), np.int64), np.empty(len(cols[0]), np.int64)
    k = twins.slice_flags(*cols, eps, r.z_threshold, overflow_thresholds(dtypes), at, bits)
    kinds = slice_kinds(dtypes)
    shape = s.count.shape
    want = [
        (kind, tuple(int(c) for c in np.unravel_index(i, shape)))
        for i, f in zip(at[:k], bits[:k])
        for b, kind in enumerate(kinds)
        if (f >> b) & 1
    ]
    got = [(f.kind, f.where) for f in r.findings]
    assert got == want
    assert len({w for _, w in want}) < len(want)  # some slices hold several kinds
    for limit in range(len(want) + 2):
        cut = slice_findings(s, dtypes, r.z_threshold, eps, limit=limit)
        assert cut == r.findings[:limit]


def test_findings_made_in_bulk_are_the_findings_a_constructor_makes():
    """``findings_of`` fills each instance as the frozen dataclass's ``__init__`` does:
    equal, with equal hashes, reprs, dicts and pickles, still frozen; what ``__post_init__``
    does (the severity from the kind) is done for it."""
    import dataclasses
    import pickle

    from fastfinite.report.model import Finding, findings_of

    wheres, said = [(3,), (1, 2)], ["slice (3,) holds 1 NaN", "slice (1, 2) ..."]
    made = findings_of("nonfinite", wheres, said)
    built = [Finding("nonfinite", w, m) for w, m in zip(wheres, said)]
    assert made == built and [hash(f) for f in made] == [hash(f) for f in built]
    assert [repr(f) for f in made] == [repr(f) for f in built]
    assert [f.to_dict() for f in made] == [f.to_dict() for f in built]
    assert pickle.loads(pickle.dumps(made)) == built
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].kind = "other"
    assert [f.severity for f in made] == [f.severity for f in built] == ["error", "error"]
    assert [f.severity for f in findings_of("outlier", wheres, said)] == ["warning"] * 2


def test_overflowed_variance_is_not_near_zero():
    x = np.full((2, 100), 1e200)
    x[:, ::2] = -1e200  # squares overflow float64: M2 is inf
    kinds = {f.kind for f in fastfinite.scan(x, by=0).findings}
    assert "near_zero_variance" not in kinds and "zero_variance" not in kinds
    assert "variance_overflow:float32" in kinds


def test_article_example_inf():
    X = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    X[1, 0, 0] = np.inf
    r = fastfinite.scan(X, by=0, localize=True)
    assert r.posinf == 1 and [loc.index for loc in r.locations] == [(1, 0, 0)]
    np.testing.assert_array_equal(r.slices.posinf, [0, 1, 0, 0])
    assert [(f.kind, f.where) for f in r.findings] == [("nonfinite", (1,))]
    assert [(loc.op, loc.error, loc.index) for loc in r.localized] == [
        ("subtract", "invalid", (1, 0, 0))
    ]
    assert "invalid value encountered in subtract" in r.localized[0].message
    assert r.bad_slices() == [1]


def test_article_example_cast():
    r = fastfinite.scan(np.array([1e100]), localize=True)
    assert [(loc.kind, loc.index) for loc in r.locations] == [("overflow:float32", (0,))]
    assert [(loc.op, loc.error, loc.index) for loc in r.localized] == [("cast", "overflow", (0,))]


def test_replay_nan_square_overflow_zero_variance():
    x = np.ones((3, 5), dtype=np.float32)
    x[0, 2] = np.nan
    x[1] = [1e20, -1e20, 3e19, 0, 1]  # float32: (x - mean)**2 overflows
    x[2] = 7.0  # zero variance
    r = fastfinite.scan(x, by=0)
    locs = fastfinite.localize(x, r, eps=0.0)
    assert locs is r.localized
    got = {(loc.op, loc.error, loc.index) for loc in locs}
    assert ("isnan", "invalid", (0, 2)) in got
    assert ("multiply", "overflow", (1, 0)) in got and ("multiply", "overflow", (1, 1)) in got
    assert {("divide", "invalid", (2, j)) for j in range(5)} <= got
    # eps > 0 rescues the constant slice
    again = fastfinite.localize(x, r, eps=1e-8)
    assert not any(loc.where == (2,) for loc in again)
    capped = fastfinite.localize(x, r, eps=0.0, max_locations=2)  # at most 2 of each kind
    kinds = Counter((loc.op, loc.error) for loc in capped)
    assert kinds == {("isnan", "invalid"): 1, ("multiply", "overflow"): 2, ("divide", "invalid"): 2}
    # a float64 eps makes NumPy divide in float64, as the replay does: the same findings
    strong = fastfinite.localize(x, r, eps=np.float64(0.0))
    assert {(loc.op, loc.error, loc.index) for loc in strong} == got


@pytest.mark.parametrize("limit", [1, 7, 40, 10_000])
def test_replay_offenders_blockwise_equal_whole_array(limit):
    """The replay looks for offending elements block by block and stops at ``limit``: the
    same positions, in order, as the whole array at once, across block edges."""
    loc = importlib.import_module("fastfinite.passes.localize")
    rng = np.random.default_rng(11)
    x = rng.standard_normal(5000).astype(np.float32)
    x[rng.choice(5000, 40, replace=False)] = np.nan
    x[rng.choice(5000, 30, replace=False)] = np.inf
    x[rng.choice(5000, 30, replace=False)] = 3e38  # (x - mean)**2 overflows float32
    x[rng.choice(5000, 30, replace=False)] = 1e-30  # squares underflow
    wide = x.astype(np.float64)
    wide[rng.choice(5000, 30, replace=False)] = 1e300  # cast overflow to float32
    with np.errstate(all="ignore"):
        mean, std = np.float32(0.5), np.float32(0.0)
    cases = [(wide, "cast", err, "cast:float32") for err in ("overflow", "underflow")]
    cases += [(x, "subtract", err, "std") for err in ("invalid", "overflow")]
    cases += [(x, "multiply", err, "std") for err in ("overflow", "underflow", "invalid")]
    cases += [(x, "divide", e, "standardize") for e in ("divide", "invalid", "overflow", "x")]
    checked = 0
    for data, op, error, step in cases:
        whole = loc._offenders(op, error, data, mean, std, 0.0, step, data.size, 1 << 30)
        blocks = loc._offenders(op, error, data, mean, std, 0.0, step, limit, 64)
        np.testing.assert_array_equal(blocks, whole[:limit], err_msg=f"{op} {error}")
        checked += len(whole) > limit
    assert checked >= 3 or limit > 30  # small limits cut lists short
    np.testing.assert_array_equal(
        first_where(x, np.isnan, limit, 64), np.flatnonzero(np.isnan(x))[:limit]
    )


def test_replay_never_reads_unflagged_chunks(tmp_path):
    path = str(tmp_path / "a.zarr")
    x = np.random.default_rng(4).standard_normal((40, 10))
    x[13, 4] = np.inf
    zarr.create_array(store=path, data=x, chunks=(5, 10))
    logged = zarr.storage.LoggingStore(zarr.storage.LocalStore(path, read_only=True))
    a = zarr.open_array(logged, mode="r")
    r = fastfinite.scan(a, by=0)
    before = logged.counter["get"]
    fastfinite.localize(a, r)
    assert logged.counter["get"] - before <= 2  # the one chunk holding row 13 (+ metadata)
    assert [(loc.op, loc.index) for loc in r.localized] == [("subtract", (13, 4))]


def test_bad_by_arguments():
    x = np.zeros((3, 4))
    with pytest.raises(ValueError, match="out of range"):
        fastfinite.scan(x, by=2)
    with pytest.raises(ValueError, match="twice"):
        fastfinite.scan(x, by=(0, -2))
    with pytest.raises(ValueError, match="by must be"):
        fastfinite.scan(x, by="rows")
    with pytest.raises(ValueError, match="z_threshold"):
        fastfinite.scan(x, by=0, z_threshold=0)
    with pytest.raises(ValueError, match="mask"):
        fastfinite.scan(x).mask()


def test_cli_by_localize(tmp_path):
    X = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    X[1, 0, 0] = np.inf
    p = tmp_path / "x.npy"
    np.save(p, X)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "fastfinite",
            "scan",
            str(p),
            "--by",
            "0",
            "--localize",
            "--z-threshold",
            "5",
            "--json",
            "-",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)  # --json -: the JSON alone on stdout
    assert {"op": "subtract", "index": [1, 0, 0]}.items() <= d["localized"][0].items()
    assert [(f["kind"], f["where"]) for f in d["findings"]] == [("nonfinite", [1])]


@pytest.mark.parametrize("shape", [(850, 40), (20, TILE + 700)])
def test_columns_finished_in_their_region_equal_the_merged_ones(shape):
    """by=-1 on C data held in one region: the column kernel's slices (in chunks of rows;
    a tile of ``TILE`` columns and one after) finished in the scan, the Dask engine's after
    the merge: the same report, bit for bit."""
    x = _data(shape, seed=5, dtype="f4")
    x[:, 3] = 2.5  # zero variance
    x[:, -1] = np.nan  # no finite value
    x[0, 7] = 7e4  # its sum overflows float16
    local = fastfinite.scan(x, by=-1, cast=("float16",))
    merged = fastfinite.scan(x, by=-1, cast=("float16",), scheduler="threads")
    assert local.to_dict() == merged.to_dict()
    _check(local, x, (-1,))
    kinds = {(f.kind, f.where) for f in local.findings}
    assert {("zero_variance", (3,)), ("sum_overflow:float16", (7,))} <= kinds


@pytest.mark.parametrize("order", ["C", "F"])
def test_slices_finished_in_their_regions_equal_the_merged_ones(order):
    """Regions holding whole slices finish them in the scan (moments, largest |z|, flags,
    ``SLICE_BLOCK`` at a time, after the row kernel in C order, after the column
    kernel in F order); the Dask engine merges the same regions' slices and finishes them
    after: the same report, bit for bit, with flagged and empty slices in many blocks."""
    x = np.asarray(_data((6 * SLICE_BLOCK + 3, 8), seed=7, dtype="f8"), order=order)
    x[SLICE_BLOCK - 1] = 2.5  # zero variance, at the end of a block
    x[2 * SLICE_BLOCK] = np.nan  # no finite value, at the start of one
    x[3 * SLICE_BLOCK + 7, 3] = 1e5  # its sum overflows float16
    x[-1, :7] = 0.0
    x[-1, 7] = 1e3  # the last slice's largest |z|: sqrt(7)
    local = fastfinite.scan(x, by=0, region_bytes=1 << 16, cast=("float16",))
    merged = fastfinite.scan(x, by=0, region_bytes=1 << 16, cast=("float16",), scheduler="threads")
    assert local.to_dict() == merged.to_dict()
    _check(local, x, (0,))
    kinds = {(f.kind, f.where) for f in local.findings}
    want = [("zero_variance", SLICE_BLOCK - 1), ("nonfinite", 2 * SLICE_BLOCK)]
    want += [("sum_overflow:float16", 3 * SLICE_BLOCK + 7)]
    assert {(k, (i,)) for k, i in want} <= kinds
    assert local.slices.max_z[-1] == pytest.approx(7**0.5)
    assert np.isnan(local.slices.mean[2 * SLICE_BLOCK]) and local.slices.count[2 * SLICE_BLOCK] == 0
