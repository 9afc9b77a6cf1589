"""Every Numba kernel against its NumPy twin (``fastfinite.slow.twins.TWINS``), walked from
that one table: the same outputs on inputs planted at the edges (NaN, infinities, zeros,
values at and beside every cast threshold, empty and one-value slices, more findings than
the cap, rows wider than a column tile)."""

from __future__ import annotations

import ast
import copy
import inspect
import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastfinite import kernels
from fastfinite.anomalies import flag_limits
from fastfinite.blocks import read_only
from fastfinite.casts import TARGETS, source_thresholds
from fastfinite.kinds import N_KINDS, NAN
from fastfinite.scaled import limits_of
from fastfinite.slow.twins import TWINS
from fastfinite.summary import ScanSpec

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 1e-300, 7e-46, 1e20, 3e38, 1e300]
for _t in TARGETS.values():
    for _v in (_t.overflow_threshold, _t.underflow_threshold):
        SPECIAL += [_v, float(np.nextafter(_v, 0)), float(np.nextafter(_v, np.inf)), -_v]
CASTS = st.lists(st.sampled_from(sorted(TARGETS)), max_size=3, unique=True).map(tuple)


@st.composite
def blocks(draw, max_rows=4, max_cols=300):
    """A 2-D block of float32 or float64 with special values planted, and its thresholds."""
    dtype = np.dtype(draw(st.sampled_from(["f4", "f8"])))
    rows, cols = draw(st.integers(1, max_rows)), draw(st.integers(1, max_cols))
    seed = draw(st.integers(0, 2**16))
    x = np.random.default_rng(seed).uniform(-3, 3, (rows, cols))
    for r, c, v in draw(st.lists(st.tuples(st.integers(0, rows - 1), st.integers(0, cols - 1), st.sampled_from(SPECIAL)), max_size=40)):  # fmt: skip
        x[r, c] = v
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    thr = ScanSpec(x.shape, x.dtype, draw(CASTS)).thresholds.astype(dtype)
    xi = x.view(np.int32 if dtype.itemsize == 4 else np.int64)
    return read_only(x), read_only(xi), thr  # as a scan gives them to the kernels


def _copies(args: list) -> list[list]:
    """Two deep copies of a kernel's arguments (for the kernel and its twin), read-only
    arrays kept read-only: the kernels are compiled for the inputs a scan gives them."""
    out = []
    for _ in range(2):
        c = copy.deepcopy(args)
        for a, b in zip(args, c):
            if isinstance(a, np.ndarray) and not a.flags.writeable:
                b.flags.writeable = False
        out.append(c)
    return out


def _scan_args(x, xi, thr, cap, slices):
    return [x, xi, thr, np.zeros(N_KINDS, np.int64), np.zeros((5, slices)),
            np.zeros((3, slices), np.int64), np.zeros((N_KINDS, cap), np.int64),
            np.zeros((N_KINDS, cap)), np.zeros(N_KINDS, np.int64)]  # fmt: skip


@st.composite
def scan_rows_args(draw):
    # many short rows (each in one call of its own loop, taken again when it has findings),
    # past one batch of SLICE_BLOCK rows (dirty rows taken again after each batch, in order,
    # the positions' cap reached in one batch), or a few rows past one sub-block
    shape = draw(st.sampled_from([(4, 300), (30, 40), (2 * kernels.SLICE_BLOCK + 76, 3), (3, 20000)]))  # fmt: skip
    x, xi, thr = draw(blocks(*shape))
    return _scan_args(x, xi, thr, draw(st.sampled_from([0, 1, 3, 100])), x.shape[0])


@st.composite
def scan_cols_args(draw):
    # rows added four (eight in wide tiles) at a time when they are clean: groups, a
    # remainder, dirty rows between; past one column tile, positions come tile by tile;
    # short rows taken side by side as one wide row (FOLD_VALUES), with rows left over
    shape = draw(st.sampled_from([(30, 40), (18, 2100), (3, kernels.COL_TILE + 300), (850, 40), (100, 700)]))  # fmt: skip
    x, xi, thr = draw(blocks(*shape))
    return _scan_args(x, xi, thr, draw(st.sampled_from([0, 1, 3, 100])), x.shape[1])


@st.composite
def scan_cols_pitched_args(draw):
    # the block's rows inside a wider array whose other values hold every special value: a
    # region of an array whose slice axis is innermost, read in place
    # wide tiles (eight rows at a time) past the first group, or many short rows
    x, xi, thr = draw(blocks(*draw(st.sampled_from([(20, 700), (30, 40)]))))
    args = _scan_args(x, xi, thr, draw(st.sampled_from([0, 1, 3, 100])), x.shape[1])
    rows, cols = x.shape
    pitch = cols + draw(st.integers(1, 50))
    wide = np.full((rows, pitch), np.nan, x.dtype)
    with np.errstate(over="ignore"):  # 1e300 in float32: inf, one of the specials anyway
        wide[:, cols:] = np.resize(np.array(SPECIAL).astype(x.dtype), (rows, pitch - cols))
    wide[:, :cols] = x
    xf = wide.reshape(-1)[: (rows - 1) * pitch + cols]
    return [read_only(xf), read_only(xf.view(args[1].dtype)), rows, cols, pitch, *args[2:]]


@st.composite
def quick_check_args(draw):
    x, xi, thr = draw(blocks(max_rows=1))
    return [x[0], xi[0], thr]


STAT = st.sampled_from([0.0, -0.0, 1.0, -2.5, 1e-300, 1e20, 3e38, 1e200, 1e308, np.inf, np.nan])


@st.composite
def finish_slices_args(draw):
    m, length = draw(st.integers(1, 30)), draw(st.integers(0, 50))
    counts = np.array(draw(st.lists(st.lists(st.integers(0, length // 3), min_size=m, max_size=m), min_size=3, max_size=3)), np.int64)  # fmt: skip
    stats = np.array(draw(st.lists(st.lists(STAT, min_size=m, max_size=m), min_size=5, max_size=5)))  # fmt: skip
    stats[2] = np.abs(stats[2])  # a sum of squares
    stats[3:] = np.where(np.isnan(stats[3:]), np.inf, stats[3:])  # extrema of finite values
    return [length, *stats, *counts, np.empty(m, np.int64), np.empty(m), np.empty(m)]


@st.composite
def finish_whole_slices_args(draw):
    args = draw(finish_slices_args())
    m = len(args[-1])
    dtypes = draw(st.lists(st.sampled_from(sorted(TARGETS)), max_size=3, unique=True))
    thr = np.array([TARGETS[t].overflow_threshold for t in dtypes])
    eps = draw(st.sampled_from([float(np.finfo(np.float32).eps), float(np.finfo(float).eps)]))
    z = draw(st.sampled_from([0.0, 3.0, 10.0]))
    outs = [np.empty(m, np.int64) for _ in range(2)]
    return [*args, np.empty(m), eps, z, thr, *outs]


@st.composite
def fold_slices_args(draw):
    size = draw(st.integers(1, 30))
    idx = np.array(sorted(draw(st.sets(st.integers(0, size - 1), min_size=1))), np.int64)

    def columns(k):
        n = np.array(draw(st.lists(st.integers(0, 5), min_size=k, max_size=k)), np.int64)
        f = [np.array(draw(st.lists(STAT, min_size=k, max_size=k))) for _ in range(4)]
        f[0] = np.where(np.isnan(f[0]) | (n == 0), 0.0, f[0])  # a mean: finite or inf
        f[1] = np.where(n > 1, np.abs(np.nan_to_num(f[1])), 0.0)  # a std: finite, >= 0
        f[2], f[3] = np.nan_to_num(f[2], nan=np.inf), np.nan_to_num(f[3], nan=-np.inf)
        ints = [np.array(draw(st.lists(st.integers(0, 3), min_size=k, max_size=k)), np.int64) for _ in range(3)]  # fmt: skip
        return [n, *f, *ints]

    return [idx, *columns(len(idx)), *columns(size)]


@st.composite
def slice_rows(draw):
    """Per-slice columns at zeros, overflow thresholds, infinite M2 and empty slices."""
    rows = draw(st.lists(st.tuples(st.integers(0, 10**6), STAT, STAT, STAT, STAT, st.integers(0, 2)), max_size=40))  # fmt: skip
    n = np.array([r[0] for r in rows], np.int64)
    mean, std, mn, mx = (np.array([r[i] for r in rows], np.float64) for i in (1, 2, 3, 4))
    return n, np.where(np.isnan(mean), 0.0, mean), np.nan_to_num(np.abs(std)), mn, mx, rows


@st.composite
def rescue_rows_args(draw):
    rows = draw(st.lists(st.tuples(st.integers(0, 3), STAT, STAT, STAT), max_size=40))
    n = np.array([r[0] for r in rows], np.int64)
    mean, lo, hi = (np.array([r[i] for r in rows], np.float64) for i in (1, 2, 3))
    return [n, mean, np.fmin(lo, hi), np.fmax(lo, hi)]


@st.composite
def slice_columns_args(draw):
    n, mean, std, mn, mx, rows = draw(slice_rows())
    return [n, mean, std, mn, mx, *(np.empty(len(rows)) for _ in range(5))]


@st.composite
def slice_flags_args(draw):
    n, mean, std, mn, mx, rows = draw(slice_rows())
    out = [np.empty(len(rows)) for _ in range(5)]
    kernels.slice_columns(n, mean, std, mn, mx, *out)
    bad = np.array([r[5] for r in rows], np.int64)
    dtypes = draw(st.lists(st.sampled_from(sorted(TARGETS)), max_size=3, unique=True))
    thr = np.array([TARGETS[t].overflow_threshold for t in dtypes])
    eps = draw(st.sampled_from([float(np.finfo(np.float32).eps), float(np.finfo(float).eps)]))
    z = draw(st.sampled_from([0.0, 3.0, 10.0]))
    outs = [np.empty(len(rows), np.int64) for _ in range(2)]
    return [n, out[0], out[1], out[4], bad, bad, bad, eps, z, thr, *outs]


@st.composite
def scaled_counts_args(draw):
    """Values at and beside the scaled thresholds of a target, with the kernel's bounds."""
    target = draw(st.sampled_from(("float8_e4m3fn", "float8_e5m2", "bfloat16", "float16")))
    s = np.float32(draw(st.sampled_from((1.0, 1 / 3, 1000.0, 2.0**-7, 3e38))))
    lim = limits_of(s, source_thresholds("float32", target), TARGETS[target].smallest_normal)
    edges = [float(v) * m for v in lim if v > 0 for m in (1, 1 - 1e-7, 1 + 1e-7, -1)]
    vals = draw(st.lists(st.sampled_from(SPECIAL + edges), max_size=80))
    dtype = draw(st.sampled_from(["f4", "f8"]))
    with np.errstate(over="ignore"):
        x = np.array(vals, np.float64).astype(dtype)
    cap = draw(st.sampled_from([0, 1, 3, 100]))
    return [x, lim, np.zeros(4, np.int64), np.zeros((2, cap), np.int64), np.zeros(2, np.int64)]


def _compare_scaled(k_args, t_args):
    _close(k_args[2], t_args[2], "counts")
    _close(k_args[4], t_args[4], "nlocs")
    for row in range(2):
        n = k_args[4][row]
        _close(k_args[3][row, :n], t_args[3][row, :n], "positions")


INPUTS = {
    "scan_rows": scan_rows_args(),
    "scan_cols": scan_cols_args(),
    "scan_cols_pitched": scan_cols_pitched_args(),
    "quick_check": quick_check_args(),
    "finish_slices": finish_slices_args(),
    "finish_whole_slices": finish_whole_slices_args(),
    "rescue_rows": rescue_rows_args(),
    "fold_slices": fold_slices_args(),
    "slice_columns": slice_columns_args(),
    "slice_flags": slice_flags_args(),
    "scaled_counts": scaled_counts_args(),
}


def _close(a, b, name):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-300, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(a, b, err_msg=name)


def _positions(k_args, t_args):
    """Positions: the twin's are the first in C order; the kernel's, past one column tile,
    are other positions of the same kinds (the report then takes them again in order)."""
    counts, locs, vals, nlocs = k_args[3], k_args[6], k_args[7], k_args[8]
    _close(nlocs, t_args[8], "nlocs")
    for k in range(N_KINDS):
        kp, tp = locs[k, : nlocs[k]], t_args[6][k, : nlocs[k]]
        if counts[k] <= locs.shape[1]:  # all of them were kept: the same set
            assert sorted(kp) == sorted(tp), k
        x = k_args[0].reshape(-1)
        np.testing.assert_array_equal(x[kp], vals[k, : nlocs[k]], err_msg=f"values {k}")


def _compare_whole(k_args, t_args, k_out, t_out):
    """Moments, largest |z|, totals and counts; the flagged slices' positions and bits."""
    for i, (a, b) in enumerate(zip(k_args[9:13], t_args[9:13])):
        _close(a, b, f"column {i}")
    _close(k_out, t_out, "totals and counts")
    k = t_out[7]
    for a, b in zip(k_args[-2:], t_args[-2:]):
        _close(a[:k], b[:k], "flags")


def _compact(k_args, t_args):
    """``scan_cols_pitched``'s arguments as ``scan_cols``'s, its rows taken out as a block."""
    xf, xi, rows, cols, pitch = k_args[:5]
    x = np.stack([xf[r * pitch : r * pitch + cols] for r in range(rows)])
    return [x, None, *k_args[5:]], [x, None, *t_args[5:]]


def _compare_scan(k_args, t_args, k_out, t_out, ordered):
    _close(k_args[3], t_args[3], "counts")
    _close(k_args[5], t_args[5], "per-slice non-finite counts")
    st_k, st_t = k_args[4], t_args[4]
    for row, name in ((0, "shift"), (3, "min"), (4, "max")):
        _close(st_k[row], st_t[row], name)
    with np.errstate(all="ignore"):  # sums of squares may overflow: then both do
        scale = np.maximum(np.abs(st_k[3]), np.abs(st_k[4]))
        scale = np.where(np.isfinite(scale), scale, 1.0) * max(1, k_args[0].size)
        for row, name in ((1, "s1"), (2, "s2")):
            diff = np.abs(st_k[row] - st_t[row])
            ok = np.isclose(st_k[row], st_t[row], rtol=1e-9, atol=0) | (diff <= scale**row * 1e-12)
            ok |= ~np.isfinite(st_t[row]) & ~np.isfinite(st_k[row])
            assert ok.all(), (name, st_k[row], st_t[row])
    if ordered:
        _close(k_args[6], t_args[6], "positions")
    _positions(k_args, t_args)


COMPARE = {
    "scan_rows": lambda k, t, ko, to: _compare_scan(k, t, ko, to, True),
    "scan_cols": lambda k, t, ko, to: _compare_scan(k, t, ko, to, False),
    "scan_cols_pitched": lambda k, t, ko, to: _compare_scan(*_compact(k, t), ko, to, False),
    "quick_check": lambda k, t, ko, to: _close(bool(ko), bool(to), "clean"),
    "finish_slices": lambda k, t, ko, to: [_close(a, b, "slices") for a, b in zip(k[9:], t[9:])] + [_close(ko, to, "totals")],
    "finish_whole_slices": _compare_whole,
    "fold_slices": lambda k, t, ko, to: [_close(a, b, f"dense {i}") for i, (a, b) in enumerate(zip(k[9:], t[9:]))],
    "slice_columns": lambda k, t, ko, to: [_close(a, b, "columns") for a, b in zip(k[5:], t[5:])],
    "slice_flags": lambda k, t, ko, to: [_close(ko, to, "flagged")] + [_close(a[:to], b[:to], "flags") for a, b in zip(k[-2:], t[-2:])],
    "rescue_rows": lambda k, t, ko, to: _close(ko, to, "slices to rescue"),
    "scaled_counts": lambda k, t, ko, to: _compare_scaled(k, t),
}  # fmt: skip


def test_every_kernel_twin_is_compared():
    assert set(TWINS) == set(INPUTS) == set(COMPARE)
    assert all(callable(getattr(kernels, name)) for name in TWINS)


@pytest.mark.parametrize("name", sorted(TWINS))
@settings(max_examples=60)
@given(data=st.data())
def test_kernel_equals_its_numpy_twin(name, data):
    args = data.draw(INPUTS[name])
    k_args, t_args = _copies(args)
    k_out = getattr(kernels, name)(*k_args)
    t_out = TWINS[name](*t_args)
    COMPARE[name](k_args, t_args, k_out, t_out)


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_wide_rows_read_in_place_eight_at_a_time(dtype):
    """Rows of a wide block spaced wider than they are, past the first group of eight
    clean rows, a NaN in a later group: the kernel against its twin."""
    rng = np.random.default_rng(5)
    wide = rng.uniform(-3, 3, (40, 700)).astype(dtype)
    wide[:, 600:] = np.nan  # not the block's: it must never be read as its
    wide[29, 17] = np.nan
    rows, cols, pitch = 37, 600, 700
    xf = wide.reshape(-1)[: (rows - 1) * pitch + cols]
    xf, xi = read_only(xf), read_only(xf.view(f"i{xf.itemsize}"))
    thr = ScanSpec((rows, cols), xf.dtype, ("float16",)).thresholds.astype(dtype)
    args = [xf, xi, rows, cols, pitch, *_scan_args(xf[:cols].reshape(1, -1), xi, thr, 3, cols)[2:]]
    k_args, t_args = _copies(args)
    kernels.scan_cols_pitched(*k_args)
    TWINS["scan_cols_pitched"](*t_args)
    COMPARE["scan_cols_pitched"](k_args, t_args, None, None)


F16 = TARGETS["float16"]


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize(
    "planted",
    [np.nan, np.inf, -np.inf, F16.overflow_threshold, -F16.overflow_threshold,
     F16.underflow_threshold, -F16.underflow_threshold, 1e200, None],
)  # fmt: skip
def test_wide_tiles_add_chunks_before_checking_them(dtype, planted):
    """Wide tiles add a chunk of rows before they check it: clean chunks, then one holding
    a NaN, an infinity, a value at a cast threshold (float16's overflow, its underflow:
    what only the extrema or the smallest magnitudes show) or one whose square overflows,
    taken again row by row; in every chunk (``None``: a NaN in each, so the checks back
    off); the rows of two tiles. The kernel against its twin."""
    cols = kernels.WIDE_TILE + 88
    chunk = kernels.wide_chunk(cols)
    rows = 4 * chunk + 5
    rng = np.random.default_rng(11)
    with np.errstate(over="ignore"):
        x = rng.uniform(-3, 3, (rows, cols)).astype(dtype)
        if planted is None:
            x[np.arange(0, rows, chunk // 2), np.arange(0, rows, chunk // 2) % cols] = np.nan
        else:
            x[2 * chunk + 7, 33] = planted
            x[3 * chunk + 1, 500] = planted
    tile = x[2 * chunk - 60 : 2 * chunk + 40]  # the first planted row in a third chunk
    two_tiles = np.tile(tile, (1, kernels.COL_TILE // cols + 1))[:, : kernels.COL_TILE + 300]
    # x's rows with a gap after each (read in place): not folded side by side into one chunk
    gapped = np.pad(x, ((0, 0), (0, 8)))
    for block, cols_ in ((gapped, cols), (two_tiles, two_tiles.shape[1])):
        k_args = _pitched_against_twin(block, cols_, ("float16",), 3)
        assert k_args[6].sum() > 0  # each planted value is one to report


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_each_chunk_of_a_wide_tile_is_checked_on_what_it_added(dtype):
    """A value at a cast threshold counted in one chunk of a wide tile stays in its
    column's extrema, and the chunks after it are checked on their own values: later
    findings in the same column (a NaN, another overflow) and in others are counted and
    recorded, and clean chunks between keep the extrema of the ones before. Rows read in
    place with a gap between them, so that they are not folded into fewer, wider rows (one
    chunk). The kernel against its twin, the extrema against NumPy's."""
    cols = kernels.WIDE_TILE + 88
    chunk = kernels.wide_chunk(cols)
    rows = 5 * chunk + 3
    pitch = cols + 8  # rows read in place, a gap between: not folded side by side
    whole = np.random.default_rng(12).uniform(-3, 3, (rows, pitch)).astype(dtype)
    x = whole[:, :cols]
    big, small = 2 * F16.overflow_threshold, F16.underflow_threshold / 2
    x[3, 33] = big  # the first chunk: an overflow, counted
    x[chunk + 9, 40] = small  # the second: an underflow
    x[3 * chunk + 2, 33] = np.nan  # the fourth: a NaN where the overflow was
    x[4 * chunk + 1, 33] = -big  # the fifth: another overflow there, and one beside it
    x[4 * chunk + 5, 34] = big
    k_args = _pitched_against_twin(whole, cols, ("float16",), 100)
    counts, cstats = k_args[6], k_args[7]
    assert counts[NAN] == 1 and counts[3] == 3 and counts[4] == 1
    np.testing.assert_array_equal(cstats[3:], [np.nanmin(x, axis=0), np.nanmax(x, axis=0)])


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("planted", [np.nan, -np.inf, F16.overflow_threshold, F16.underflow_threshold])  # fmt: skip
def test_the_last_rows_of_a_wide_tile_join_its_last_chunk(dtype, planted):
    """The last rows of a wide tile, fewer than eight, are added with its last chunk before
    they are checked (four at once, then one by one), in a tile's first chunk (nothing
    saved before it) and in a later one: a value planted in the first or the last of them
    (a NaN, an infinity, a cast overflow, an underflow that only the smallest magnitudes
    show) is counted and recorded, and every sum has the twin's bits. Rows read in place
    with a gap between them (not folded into fewer, wider rows)."""
    cols = kernels.WIDE_TILE + 88
    chunk = kernels.wide_chunk(cols)
    rng = np.random.default_rng(13)
    for first_rows in (16, chunk):  # the leftover rows in the tile's first chunk, its second
        for left in range(1, 8):
            rows = first_rows + left
            pitch = cols + 8
            whole = rng.uniform(-3, 3, (rows, pitch)).astype(dtype)
            x = whole[:, :cols]
            for at in {rows - left, rows - 1}:
                x[at, 7 + at % 50] = planted
            k_args = _pitched_against_twin(whole, cols, ("float16",), 100)
            assert k_args[6].sum() == (1 if left == 1 else 2), (first_rows, left)


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("planted", [np.nan, np.inf, F16.overflow_threshold, F16.underflow_threshold])  # fmt: skip
def test_a_clean_columns_sums_do_not_depend_on_its_rows_elsewhere(dtype, planted):
    """A wide tile takes a dirty chunk again only from its first to its last dirty column
    (a narrow span in one chunk, nearly the whole tile in another): the columns that hold
    nothing to report keep, bit for bit, the sums, extrema and counts of the same data
    without the planted values; the others, and every count and position, are the twin's."""
    cols = kernels.WIDE_TILE + 88
    chunk = kernels.wide_chunk(cols)
    rows = 3 * chunk + 5
    with np.errstate(over="ignore"):
        clean = np.random.default_rng(5).uniform(-3, 3, (rows, cols)).astype(dtype)
        dirty = clean.copy()
        spots = [(chunk + 3, 100), (chunk + 9, 104), (chunk + 20, 109)]  # a narrow span
        spots += [(2 * chunk + 1, 2), (2 * chunk + 50, cols - 3)]  # a wide one
        for r, c in spots:
            dirty[r, c] = planted
    thr = ScanSpec(clean.shape, clean.dtype, ("float16",)).thresholds.astype(dtype)
    outs = []
    for block in (clean, dirty):
        xi = block.view(f"i{block.itemsize}")
        args = [read_only(block.reshape(-1)), read_only(xi.reshape(-1)), rows, cols, cols]
        args += _scan_args(block, xi, thr, 10, cols)[2:]
        k_args, t_args = _copies(args)
        kernels.scan_cols_pitched(*k_args)
        TWINS["scan_cols_pitched"](*t_args)
        COMPARE["scan_cols_pitched"](k_args, t_args, None, None)
        outs.append(k_args)
    touched = [c for _, c in spots]
    kept = np.setdiff1d(np.arange(cols), touched)
    for i in (7, 8):  # cstats, ccounts
        np.testing.assert_array_equal(outs[0][i][:, kept], outs[1][i][:, kept])
    assert outs[1][6].sum() >= len(spots)  # each planted value is one to report


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("shape", [(1000, 40), (400, 100), (93, 1000)])
@pytest.mark.parametrize("planted", [np.nan, -np.inf, F16.overflow_threshold, F16.underflow_threshold, None])  # fmt: skip
def test_short_rows_side_by_side_fold_into_their_columns(dtype, shape, planted):
    """Short contiguous rows are taken ``FOLD_VALUES`` at a time as one wide row, the
    leftover rows on their own: per-column sums, extrema, NaN and inf counts and the first
    positions in C order as the twin's, with special values in the folded rows and in the
    leftover ones (``None``: none at all)."""
    rows, cols = shape
    fold = kernels.FOLD_VALUES // cols + 1
    assert rows // fold >= 8 and rows % fold  # folded rows and leftover ones
    x = np.random.default_rng(7).uniform(-3, 3, shape).astype(dtype)
    if planted is not None:
        for r, c in ((3, 1), (fold + 2, cols - 1), (rows // 2, cols // 2), (rows - 1, 0), (rows - 2, 3)):  # fmt: skip
            x[r, c] = planted
    x, xi = read_only(x), read_only(x.view(f"i{x.itemsize}"))
    thr = ScanSpec(x.shape, x.dtype, ("float16",)).thresholds.astype(dtype)
    args = _scan_args(x, xi, thr, 100, cols)  # every position kept: the leftover rows' too
    k_args, t_args = _copies(args)
    kernels.scan_cols(*k_args)
    TWINS["scan_cols"](*t_args)
    _compare_scan(k_args, t_args, None, None, True)
    assert (k_args[3].sum() > 0) == (planted is not None)


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("shape", [(3 * 520 + 5, kernels.WIDE_TILE + 300), (2000, 1000)])
def test_columns_dirty_in_every_row_are_taken_again_alone(dtype, shape):
    """A feature with a NaN in every row (and another far from it: two runs of dirty
    columns; four copies of each when short rows are folded side by side) is taken again
    on its own, not the tile across: the twin's counts, sums and first positions, which
    interleave the runs row by row in C order (a cap of 3 NaN: rows 0 and 1)."""
    rows, cols = shape
    x = np.random.default_rng(9).uniform(-3, 3, shape).astype(dtype)
    x[:, 5] = np.nan
    x[:, cols - 7] = np.nan
    x[::3, cols // 2] = -np.inf
    x[rows // 2, 9] = F16.overflow_threshold
    x, xi = read_only(x), read_only(x.view(f"i{x.itemsize}"))
    thr = ScanSpec(x.shape, x.dtype, ("float16",)).thresholds.astype(dtype)
    args = _scan_args(x, xi, thr, 3, cols)
    k_args, t_args = _copies(args)
    kernels.scan_cols(*k_args)
    TWINS["scan_cols"](*t_args)
    _compare_scan(k_args, t_args, None, None, True)
    first = k_args[6][0, :3]  # NaN
    assert list(first) == [5, cols - 7, cols + 5]
    # the same rows read in place from a wider array (a NaN in the columns between them)
    wide = np.full((rows, cols + 13), np.nan, x.dtype)
    wide[:, :cols] = x
    flat, flat_i = read_only(wide.reshape(-1)), read_only(wide.view(xi.dtype).reshape(-1))
    args = [flat, flat_i, rows, cols, cols + 13, *_scan_args(x, xi, thr, 3, cols)[2:]]
    p_args, q_args = _copies(args)
    kernels.scan_cols_pitched(*p_args)
    TWINS["scan_cols_pitched"](*q_args)
    COMPARE["scan_cols_pitched"](p_args, q_args, None, None)
    np.testing.assert_array_equal(p_args[9][0, :3], first)  # positions in the block
    for i in (6, 8, 11):  # counts, per-column counts, numbers of positions: as read packed
        np.testing.assert_array_equal(p_args[i], k_args[i - 3])
    for kind, n in enumerate(k_args[8]):  # the same first positions of every kind
        np.testing.assert_array_equal(p_args[9][kind, :n], k_args[6][kind, :n])


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("cols", [kernels.WIDE_TILE + 40, 37])
def test_columns_under_rows_of_nan_take_their_first_finite_value(dtype, cols):
    """Rows of nothing but NaN (a chunk never written, at the top and between), of -NaN,
    of +inf, and columns whose first finite value comes late or never: each column's
    shift is its first finite value (0 for none), found row by row; its NaN counted
    without its sums; the twin's shifts, counts, sums and first positions, read packed
    and in place."""
    chunk = kernels.wide_chunk(kernels.WIDE_TILE + 40)
    rows = 2 * chunk + 9
    x = np.random.default_rng(4).uniform(-3, 3, (rows, cols)).astype(dtype)
    x[: chunk // 2] = np.nan  # never written
    x[chunk // 2] = np.nan
    x[chunk // 2, 2] = 1.25  # then a row with one finite value: column 2's shift
    x[chunk + 3 : chunk + 40] = np.nan
    x[chunk + 50] = np.copysign(np.nan, -1.0)  # NaN with its sign bit set
    x[chunk + 51] = np.inf
    for j, depth in [(0, chunk // 2 + 1), (3, chunk + 45), (cols - 1, rows - 1), (7, rows)]:
        x[:depth, j] = np.nan  # the first finite value further down, or none (column 7)
    thr = ScanSpec(x.shape, x.dtype, ("float16",)).thresholds.astype(dtype)
    xi = x.view(f"i{x.itemsize}")
    k_args, t_args = _copies(_scan_args(read_only(x), read_only(xi), thr, 3, cols))
    kernels.scan_cols(*k_args)
    TWINS["scan_cols"](*t_args)
    _compare_scan(k_args, t_args, None, None, True)
    shifts = k_args[4][0]
    assert shifts[7] == 0 and shifts[cols - 1] == x[rows - 1, cols - 1]
    assert shifts[3] == x[chunk + 45, 3] and shifts[2] == 1.25
    np.testing.assert_array_equal(k_args[5][0], np.isnan(x).sum(axis=0))
    wide = np.full((rows, cols + 5), np.nan, x.dtype)  # in place, NaN between the rows
    wide[:, :cols] = x
    flat, flat_i = wide.reshape(-1), wide.view(xi.dtype).reshape(-1)
    args = [read_only(flat), read_only(flat_i), rows, cols, cols + 5]
    p_args, q_args = _copies(args + _scan_args(x, xi, thr, 3, cols)[2:])
    kernels.scan_cols_pitched(*p_args)
    TWINS["scan_cols_pitched"](*q_args)
    COMPARE["scan_cols_pitched"](p_args, q_args, None, None)
    np.testing.assert_array_equal(p_args[7][0], shifts)


def _pitched_against_twin(whole, cols, casts, cap):
    """``kernels.scan_cols_pitched`` over the first ``cols`` values of each row of ``whole``
    (read in place, read-only: the rest of a row is the gap before the next), for the cast
    targets ``casts``, compared with its twin, positions kept up to ``cap``: the kernel's
    arguments after the scan."""
    x = whole[:, :cols]
    rows, pitch = whole.shape
    thr = ScanSpec(x.shape, x.dtype, casts).thresholds.astype(x.dtype)
    wi = whole.view(f"i{x.itemsize}")
    args = [read_only(whole.reshape(-1)), read_only(wi.reshape(-1)), rows, cols, pitch,
            *_scan_args(x, wi, thr, cap, cols)[2:]]  # fmt: skip
    k_args, t_args = _copies(args)
    kernels.scan_cols_pitched(*k_args)
    TWINS["scan_cols_pitched"](*t_args)
    COMPARE["scan_cols_pitched"](k_args, t_args, None, None)
    return k_args


def _scan_rows_against_twin(x, casts, cap):
    """``kernels.scan_rows`` over the rows of ``x`` (read-only), for the cast targets
    ``casts``, compared with its twin, positions kept up to ``cap``: the kernel's
    arguments after the scan, in ``_scan_args``'s order."""
    thr = ScanSpec(x.shape, x.dtype, casts).thresholds.astype(x.dtype)
    xi = x.view(f"i{x.itemsize}")
    k_args, t_args = _copies(_scan_args(read_only(x), read_only(xi), thr, cap, x.shape[0]))
    kernels.scan_rows(*k_args)
    TWINS["scan_rows"](*t_args)
    COMPARE["scan_rows"](k_args, t_args, None, None)
    return k_args


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("cap", [3, 100])
def test_long_rows_of_nan_are_counted_without_the_slow_path(dtype, cap):
    """Sub-blocks of nothing but NaN (a chunk never written) are counted and their first
    positions recorded without ``_pieces``; rows whose first finite value comes after 255,
    256, 300 or no NaN at all (found 256 values at a time): the twin's counts, shifts, sums
    and positions, in order."""
    sub = kernels.SUB_BLOCK_BYTES // np.dtype(dtype).itemsize
    n = 3 * sub + 77
    x = np.random.default_rng(6).uniform(-3, 3, (6, n)).astype(dtype)
    x[0, : 2 * sub] = np.nan  # two whole sub-blocks of NaN, then values
    x[1, :] = np.nan  # nothing but NaN: shift 0, no finite value
    x[2, :255] = np.nan
    x[3, :256] = np.nan
    x[4, :300] = np.nan
    x[4, 300 + sub : 300 + 2 * sub] = np.nan  # NaN across two sub-blocks, with an inf in it
    x[4, 300 + sub + 5] = np.inf
    x[5, sub : 2 * sub] = np.copysign(np.nan, -1.0)
    k_args = _scan_rows_against_twin(x, ("float16",), cap)
    np.testing.assert_array_equal(k_args[5][0], np.isnan(x).sum(axis=1))
    assert k_args[4][0, 1] == 0 and k_args[4][0, 3] == x[3, 256]


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("casts", [(), ("float16",), ("float16", "bfloat16", "float8_e4m3fn")])
@pytest.mark.parametrize("longer", [False, True])
def test_long_rows_sub_blocks_are_read_in_halves(dtype, casts, longer):
    """A long row's sub-block is read as its two halves side by side (``_pass_halves``),
    the odd value of a row's last sub-block alone: what lies in either half or in that
    value (NaN, inf, an overflow, underflows) is counted, and the positions, sums and
    extrema are the twin's, with no underflow target, one or several; in rows the fast
    pass reads first and in rows longer than ``FAST_ROW_BYTES`` (``longer``), which it
    does not."""
    item = np.dtype(dtype).itemsize
    sub = kernels.SUB_BLOCK_BYTES // item
    more = kernels.FAST_ROW_BYTES // item if longer else 0  # whole sub-blocks more
    rows, n = 5, 2 * sub + 7 + more  # whole sub-blocks, then one of 7 values: 3 beside 3, 1 alone
    x = np.random.default_rng(9).uniform(-3, 3, (rows, n)).astype(dtype)
    h = sub // 2
    x[0, 10] = x[0, h + 10] = x[0, sub + h + 1] = 1e-30  # under float16's and float8's smallest
    x[1, n - 1] = np.nan  # the odd value
    x[2, n - 1] = 1e-30
    x[2, sub + h] = -np.inf  # the first of a second half
    x[3, h - 1] = 7e4  # the last of a first half: over float16's largest
    x[4, n - 4] = np.inf  # the first of the last sub-block's second half
    k_args = _scan_rows_against_twin(x, casts, 3)
    assert k_args[3][NAN] == 1 and k_args[3][1] == 1 and k_args[3][2] == 1
    if casts:
        assert k_args[3][4] == 4 and k_args[3][3] == 1  # float16: four underflows, one overflow
    clean = x[0].astype(np.float64)  # row 0: every value finite; its extrema
    np.testing.assert_array_equal(k_args[4][3:, 0], [clean.min(), clean.max()])


def test_a_multiply_add_by_the_opaque_one_adds_the_same_bits():
    """``_take``'s first sum is ``_muladd(d, _opaque(1.0), s)``: the same bits as ``s + d``
    for every pair of special values, subnormals, infinities and NaN included (a NaN's
    bits aside: NaN either way)."""

    @numba.njit
    def both(d, s):
        one = kernels._opaque(1.0)
        out = np.empty((2, d.shape[0]))
        for i in range(d.shape[0]):
            out[0, i] = kernels._muladd(d[i], one, s[i])
            out[1, i] = s[i] + d[i]
        return out

    v = np.array(SPECIAL + [5e-324, -5e-324, 2.0**-1022, np.finfo(np.float64).max])
    d, s = (a.ravel() for a in np.meshgrid(v, v))
    out = both(d, s)
    assert np.isnan(out[1]).sum() > 0
    np.testing.assert_array_equal(out[0].view(np.int64)[~np.isnan(out[1])], out[1].view(np.int64)[~np.isnan(out[1])])  # fmt: skip
    np.testing.assert_array_equal(np.isnan(out[0]), np.isnan(out[1]))


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("casts", [(), ("float16",), ("float16", "bfloat16", "float8_e4m3fn")])
@pytest.mark.parametrize("cap", [3, 100])
def test_short_rows_read_four_at_a_time_are_taken_again_in_order(dtype, casts, cap):
    """``_fast_rows`` reads row ``i`` of each quarter of a batch side by side (the last rows
    of a batch not divisible by four alone), with no underflow target, one or several:
    the rows it lists (non-finite values, underflows, in every quarter, at a quarter's
    first and last row, and in the rows alone) are taken again in order, so the positions
    kept are the twin's, the first in C order, and every count and sum is the twin's."""
    block = kernels.SLICE_BLOCK
    q = block // 4
    rows, n = 2 * block + 7, 12  # two whole batches, then 7 rows: four side by side, three alone
    x = np.random.default_rng(8).uniform(-3, 3, (rows, n)).astype(dtype)
    x[block - 3, 4] = x[block + 3, 1] = x[q + 5, 0] = 1e-30  # under float16's and float8's
    for r, c, v in [(400, 2, np.nan), (5, 7, np.nan), (3 * q - 1, 0, np.inf), (2 * q, 3, np.nan),
                    (q, 6, -np.inf), (block - 1, 11, np.nan), (2 * block + 3, 5, np.nan),
                    (2 * block + 1, 9, -np.inf), (2 * block + 6, 0, np.nan),
                    (2 * block + 4, 2, np.inf), (block + 2 * q + 4, 11, np.nan)]:  # fmt: skip
        x[r, c] = v
    k_args = _scan_rows_against_twin(x, casts, cap)
    nan_rows = np.flatnonzero(np.isnan(x).any(axis=1))
    kept = nan_rows[:cap]
    np.testing.assert_array_equal(k_args[6][NAN][:len(kept)], kept * n + np.argmax(np.isnan(x[kept]), axis=1))  # fmt: skip


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("casts", [(), ("float16",), ("float16", "bfloat16", "float8_e4m3fn")])
@pytest.mark.parametrize("cap", [3, 100])
def test_long_rows_read_four_at_a_time_are_taken_again_in_order(dtype, casts, cap):
    """Rows longer than a sub-block are read by the fast pass alone too, a batch of about
    ``FAST_BATCH_BYTES`` at a time (four rows side by side, the last ones alone); a row it
    lists is taken again in sub-blocks: NaN, inf, overflows and underflows in every
    quarter and in the rows alone, at a row's first and last value and either side of a
    sub-block's edge, give the twin's counts, sums, extrema and positions, in order."""
    item = np.dtype(dtype).itemsize
    sub = kernels.SUB_BLOCK_BYTES // item
    n = sub + 50
    batch = max(4, kernels.FAST_BATCH_BYTES // (n * item))
    rows = 2 * batch + 6  # two whole batches, then 6 rows: four side by side, two alone
    q = batch // 4
    x = np.random.default_rng(12).uniform(-3, 3, (rows, n)).astype(dtype)
    for r, c, v in [(0, n - 1, np.nan), (q, 0, np.inf), (2 * q + 1, sub - 1, -np.inf),
                    (2 * q + 1, sub, np.nan), (3 * q, 7, 7e4), (batch - 1, 3, 1e-30),
                    (batch + q, sub + 1, 1e-30), (2 * batch + 1, 9, np.nan),
                    (2 * batch + 4, n - 2, np.nan), (rows - 1, 0, -np.inf)]:  # fmt: skip
        x[r, c] = v
    k_args = _scan_rows_against_twin(x, casts, cap)
    np.testing.assert_array_equal(k_args[5][0], np.isnan(x).sum(axis=1))
    clean = x[1].astype(np.float64)
    np.testing.assert_array_equal(k_args[4][3:, 1], [clean.min(), clean.max()])


def test_flagged_slices_are_found_in_every_block():
    """``slice_flags`` takes ``FLAG_BLOCK`` slices at a time and looks only into blocks
    with a flagged slice: a slice of each kind at the first and last place of blocks, and
    blocks with none between them, give the twin's positions and bits."""
    block = kernels.FLAG_BLOCK
    m = 4 * block + 17
    rng = np.random.default_rng(11)
    n = np.full(m, 50, np.int64)
    mean, std, z = rng.uniform(-1, 1, m), rng.uniform(0.5, 1, m), rng.uniform(0, 3, m)
    bad = np.zeros(m, np.int64)
    bad[0] = 1  # nonfinite
    std[block - 1] = 0.0  # zero variance
    std[block], mean[block] = 1e-17, 1.0  # near-zero variance
    mean[3 * block] = 1e5  # sum overflow: float16
    std[3 * block + 1] = 1e4  # variance overflow: float16
    z[m - 1] = 50.0  # outlier
    thr = np.array([TARGETS[t].overflow_threshold for t in ("float16", "float32")])
    args = [n, mean, std, z, bad, bad, bad, float(np.finfo(float).eps), 10.0, thr]
    outs = [[np.empty(m, np.int64) for _ in range(2)] for _ in range(2)]
    k = kernels.slice_flags(*args, *outs[0])
    t = TWINS["slice_flags"](*args, *outs[1])
    assert k == t == 6
    np.testing.assert_array_equal(outs[0][0][:k], [0, block - 1, block, 3 * block, 3 * block + 1, m - 1])  # fmt: skip
    np.testing.assert_array_equal(outs[0][1][:k], [1, 2, 4, 8, 16, 1 << 7])
    for a, b in zip(outs[0], outs[1]):
        np.testing.assert_array_equal(a[:k], b[:k])


@pytest.mark.parametrize("rows", [2, 3, 40])
def test_totals_keep_their_fallbacks_in_order(rows):
    """The totals' sums run reordered; the fallbacks they send to must not be: slices whose
    ``n * mean`` overflow (the mean of the means) and whose spread's squares do (scaled)."""
    shift = np.zeros((2, rows))
    shift[0, 1::2], shift[1, :] = 1e308, np.linspace(1e299, 1e300, rows)
    for sh in shift:
        zeros, counts = np.zeros(rows), np.zeros(rows, np.int64)
        args = [2, sh, zeros, zeros, sh, sh, counts, counts, counts]
        outs = [[np.empty(rows, np.int64), np.empty(rows), np.empty(rows)] for _ in range(2)]
        got = kernels.finish_slices(*args, *outs[0])
        want = TWINS["finish_slices"](*args, *outs[1])
        _close(got, want, "totals")
        assert np.isfinite(got[1]) and np.isfinite(got[2])


@pytest.mark.parametrize("kernel", ["finish_slices", "finish_whole_slices"])
def test_slices_are_finished_block_by_block(kernel):
    """Past one ``SLICE_BLOCK`` the totals are the blocks' combined in order, and the
    flags of every block are found: the kernel against its twin on slices of several
    blocks, with the largest |z| written over the shifts (as into a canvas), flagged and
    empty slices at the first and last places of blocks."""
    block = kernels.SLICE_BLOCK
    m = 3 * block + 5
    rng = np.random.default_rng(3)
    length = 40
    counts = np.zeros((3, m), np.int64)
    counts[0, [0, block, m - 1]] = 1, 2, length  # NaN; the last slice has no finite value
    shift = rng.uniform(-1e3, 1e3, m)
    s1 = rng.normal(0, 1, m)
    s2 = rng.uniform(1, 40, m)
    s2[block - 1], s1[block - 1] = 0.0, 0.0  # zero variance
    mn, mx = shift - rng.uniform(1, 3, m), shift + rng.uniform(1, 3, m)
    mx[2 * block] = shift[2 * block] + 1e4  # outlier
    mn[m - 1], mx[m - 1] = np.inf, -np.inf
    thr = np.array([TARGETS["float16"].overflow_threshold])

    def args():
        sh = shift.copy()
        cols = [np.empty(m, np.int64), np.empty(m), np.empty(m)]
        out = [length, sh, s1, s2, mn, mx, *counts, *cols]
        if kernel == "finish_whole_slices":
            out += [sh, float(np.finfo(float).eps), 10.0, thr, np.empty(m, np.int64), np.empty(m, np.int64)]  # fmt: skip
        return out

    ka, ta = args(), args()
    ko, to = getattr(kernels, kernel)(*ka), TWINS[kernel](*ta)
    for i in range(9, len(ka) if kernel == "finish_slices" else 13):
        _close(ka[i], ta[i], f"column {i}")
    _close(ko, to, "totals")
    if kernel == "finish_whole_slices":
        k = to[7]
        assert ko[8] == to[8] == 1
        flagged = ta[-2][:k].tolist()
        assert {0, block - 1, block, 2 * block, m - 1} <= set(flagged)
        for a, b in zip(ka[-2:], ta[-2:]):
            np.testing.assert_array_equal(a[:k], b[:k])


@pytest.mark.parametrize("dirty", ["nan", "posinf"])
def test_clean_blocks_take_a_shortcut_to_the_same_bits(dirty):
    """A block whose slices share their count converts it to float64 once (AVX2 converts
    int64 one at a time), for the moments, the totals' sums and the flags, and takes its
    largest |z| (with one division), flags and slices to rescue in one loop
    (``_finish_clean``): its slices get the bits they get when one slice of the block
    holds a non-finite value and every count is converted on its own. Large means and
    spreads near zero set every flag's test close to its edge; sums that overflowed and
    values under ``TINY`` send slices to be rescued on both paths."""
    block = kernels.SLICE_BLOCK
    m = 2 * block
    rng = np.random.default_rng(5)
    length = 64
    eps = float(np.finfo(np.float32).eps)
    shift = rng.uniform(-1e6, 1e6, m)
    shift[:block] = rng.uniform(-500, 500, block)  # sums under float16's maximum...
    shift[5] = 1030.0  # ...but one: 64 * 1030 is over it
    s1 = rng.normal(0, 1e-3, m)
    # stds within 1e-6 of the edge of "near zero variance" (``_flag_block``)
    edge = length * np.abs(shift) * eps / np.sqrt(1 - length * eps)
    sd = edge * (1 + rng.uniform(-1e-6, 1e-6, m))
    s2 = length * sd * sd + s1 * s1 / length
    s2[::7] = s1[::7] * s1[::7] / length  # no spread
    mn, mx = shift - rng.uniform(0, 1e-6, m), shift + rng.uniform(0, 40, m) * edge
    mn[1::2], mx[1::2] = 2 * shift[1::2] - mx[1::2], 2 * shift[1::2] - mn[1::2]  # z below
    for i in (3, block + 3):  # sums that overflowed: a NaN mean, rescued
        s1[i] = np.inf
    for i in (9, block + 9):  # values under TINY, rescued
        shift[i], s1[i], s2[i], mn[i], mx[i] = 1e-160, 1e-162, 0.0, 1e-160, 2e-160
    thr = np.array([TARGETS["float16"].overflow_threshold, 1e7])

    def finish(counts):
        cols = [np.empty(m, np.int64), np.empty(m), np.empty(m), shift.copy()]
        where, flags = np.empty(m, np.int64), np.empty(m, np.int64)
        out = kernels.finish_whole_slices(
            length, cols[3], s1, s2, mn, mx, *counts, *cols[:3], cols[3], eps, 3.0, thr,
            where, flags,
        )  # fmt: skip
        k = out[7]
        return cols, dict(zip(where[:k].tolist(), flags[:k].tolist())), out

    clean = np.zeros((3, m), np.int64)
    one = clean.copy()
    one[0 if dirty == "nan" else 1, block] = 1  # the second block takes the long way
    (a, fa, ta), (b, fb, out_b) = finish(clean), finish(one)
    keep = np.r_[0:block, block + 1 : m]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x[keep].view(np.int64), y[keep].view(np.int64))
    fa_, fb_ = ({i: f for i, f in d.items() if i != block} for d in (fa, fb))
    assert fa_ == fb_
    assert len(fa) > 10 and fb[block] & 1  # flags were set on both paths
    assert ta[6] == out_b[6] >= 4  # the same slices to rescue
    assert np.isnan(a[1][[3, block + 3]]).all()
    np.testing.assert_array_equal(np.unique(list(fa.values())) > 0, True)
    where, flags = np.empty(m, np.int64), np.empty(m, np.int64)
    want = TWINS["finish_whole_slices"](
        length, shift.copy(), s1, s2, mn, mx, *clean, *(np.empty(m, np.int64), np.empty(m), np.empty(m)),
        shift.copy(), eps, 3.0, thr, where, flags,
    )  # fmt: skip
    _close(ta[:6], want[:6], "totals")
    assert fa == dict(zip(where[: want[7]].tolist(), flags[: want[7]].tolist()))
    assert fa[5] & (1 << 3)  # the float16 overflow of its sum


@settings(max_examples=60)
@given(args=scan_cols_args(), pad=st.sampled_from([0, 13]), z_threshold=st.sampled_from([1.5, 10.0]))  # fmt: skip
def test_columns_finished_tile_by_tile_equal_the_scan_then_its_finishing(args, pad, z_threshold):
    """``scan_cols_finished`` finishes each tile of columns while its sums are in cache
    (they are never written out); ``scan_cols`` then ``finish_whole_slices`` finish them
    after: the same bits for counts, positions, moments, totals, largest |z| and flags,
    in one tile and several, on short rows folded side by side, read in place (``pad``:
    rows spaced wider than they are) or not."""
    x, xi, thr = args[:3]
    rows, cols = x.shape
    if pad:
        wide = np.zeros((rows, cols + pad), x.dtype)
        wide[:, :cols] = x
        flat = wide.reshape(-1)
        lead = (read_only(flat), read_only(flat.view(xi.dtype)), rows, cols, cols + pad)
        scan, fused = kernels.scan_cols_pitched, kernels.scan_cols_pitched_finished
    else:
        lead, scan, fused = (x, xi), kernels.scan_cols, kernels.scan_cols_finished
    limits = flag_limits(x.dtype, ("float16",), z_threshold)

    def finishing():
        return [np.empty(cols, np.int64), np.empty(cols), np.empty(cols), *limits,
                np.empty(cols, np.int64), np.empty(cols, np.int64)]  # fmt: skip

    two, one = _copies(args)
    f2, f1 = finishing(), finishing()
    scan(*lead, *two[2:])
    want = kernels.finish_whole_slices(rows, *two[4], *two[5], *f2[:3], two[4][0], *f2[3:])
    thr_, counts, cstats, ccounts, locs, vals, nlocs = one[2:]
    stats = (cstats[0], cstats[3], cstats[4])  # the rows the fused kernel writes, contiguous
    got = fused(*lead, thr_, counts, *stats, ccounts, *ccounts, locs, vals, nlocs, *f1)
    np.testing.assert_array_equal(np.array(got, float), np.array(want, float))
    # the stats' largest |z| (over the shifts) and extrema: the sums are not written out
    np.testing.assert_array_equal(one[4][[0, 3, 4]], two[4][[0, 3, 4]])
    for i in (3, 5, 6, 7, 8):  # counts, column counts, positions
        np.testing.assert_array_equal(one[i], two[i])
    k = want[7]
    for a, b in zip(f1[:3], f2[:3]):  # count, mean, std
        np.testing.assert_array_equal(a, b)
    for a, b in zip(f1[-2:], f2[-2:]):  # the flagged slices and their bits
        np.testing.assert_array_equal(a[:k], b[:k])


CACHED_KERNEL = "from fastfinite import kernels; assert kernels._pow2(3.0) == 2.0"


@pytest.mark.parametrize(
    "setting, cached",
    [
        ({}, True),
        ({"NUMBA_ENABLE_PROFILING": "1"}, False),
        ({"NUMBA_DEBUGINFO": "1"}, False),
        ({"NUMBA_OPT": "0"}, False),
    ],
    ids=["default", "profiling", "debuginfo", "opt0"],
)
def test_kernels_compiled_off_numba_defaults_stay_out_of_its_cache(tmp_path, setting, cached):
    """numba's cache key leaves out the settings that change its code: a kernel compiled
    for a profiler (not inlined, not in vectors) and cached was loaded by every later
    process, 20x slower. A process with such a setting compiles without the cache, so it
    writes nothing there; a default one writes its kernels."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(setting, NUMBA_CACHE_DIR=str(tmp_path))
    run = subprocess.run(
        [sys.executable, "-c", CACHED_KERNEL], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert bool(list(tmp_path.rglob("kernels._pow2-*.nbi"))) is cached


def test_every_constant_the_kernels_import_is_pinned_in_their_source():
    """numba keys its cache on kernels.py's text alone, and bakes the constants the kernels
    import into what it caches: each name kernels.py takes from another fastfinite module
    is checked against ``_BAKED``, whose values are written in that text."""
    tree = ast.parse(inspect.getsource(kernels))
    imported = {
        a.asname or a.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 1
        for a in node.names
    }
    checks = [
        node.test.left
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.comparators[0], ast.Name)
        and node.test.comparators[0].id == "_BAKED"
    ]
    assert len(checks) == 1
    assert {e.id for e in checks[0].elts} == imported
    assert tuple(getattr(kernels, e.id) for e in checks[0].elts) == kernels._BAKED
