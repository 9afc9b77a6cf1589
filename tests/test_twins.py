"""Every Numba kernel against its NumPy twin (``fastfinite.reference.twins.TWINS``), walked from
that one table: the same outputs, bit for bit, on inputs planted at the edges (NaN,
infinities, zeros, values at and beside every cast threshold, empty and one-value slices,
more findings than the cap, lanes, sub-blocks, chunks and tiles cut anywhere). A scan that
starts on the twins and goes on with the kernels gives a warm scan's report because of
what these tests hold."""

from __future__ import annotations

import ast
import copy
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastfinite import kernels
from fastfinite.compute.blocks import read_only, widen_table
from fastfinite.compute.positions import record_positions
from fastfinite.compute.summary import ScanSpec
from fastfinite.kernels import jit
from fastfinite.model.cast_forms import scaled_bounds
from fastfinite.model.casts import TARGETS, source_thresholds
from fastfinite.model.kinds import N_KINDS
from fastfinite.model.stats import CHUNK, LANES, SLICE_BLOCK, SUB, TILE
from fastfinite.reference.twins import TWINS, widen

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 1e-300, 7e-46, 1e20, 3e38, 1e300]
for _t in TARGETS.values():
    for _v in (_t.overflow_threshold, _t.underflow_threshold):
        SPECIAL += [_v, float(np.nextafter(_v, 0)), float(np.nextafter(_v, np.inf)), -_v]
CASTS = st.lists(st.sampled_from(sorted(TARGETS)), max_size=3, unique=True).map(tuple)
CAPS = st.sampled_from([0, 1, 3, 100])


def same(a, b) -> bool:
    """Equal, NaN equal to NaN (and 0.0 to -0.0: a report compares them so)."""
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


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


@st.composite
def blocks(draw, shapes):
    """A 2-D block of float32 or float64 with special values planted, and its thresholds."""
    dtype = np.dtype(draw(st.sampled_from(["f4", "f8"])))
    rows, cols = draw(st.sampled_from(shapes))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, (rows, cols)) * 10.0 ** draw(st.integers(-3, 6))
    plant = draw(st.lists(st.tuples(st.integers(0, rows - 1), st.integers(0, cols - 1), st.sampled_from(SPECIAL)), max_size=40))  # fmt: skip
    for r, c, v in plant:
        x[r, c] = v
    if draw(st.booleans()):  # a line of NaN, as a chunk never written reads
        if draw(st.booleans()):
            x[draw(st.integers(0, rows - 1))] = np.nan
        else:
            x[:, draw(st.integers(0, cols - 1))] = np.nan
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    thr = ScanSpec(x.shape, x.dtype, draw(CASTS)).thresholds
    return x, thr


def _finds(cap: int, spans: int):
    """A scan's ``(counts, cap, seen, blocks)``."""
    return [np.zeros(N_KINDS, np.int64), cap, np.zeros(N_KINDS, np.int64), np.zeros((3, spans), np.int64)]  # fmt: skip


def _stats(m: int):
    return [*(np.full(m, 7.0) for _ in range(5)), *(np.zeros(m, np.int64) for _ in range(3))]


ROWS = [(1, 1), (1, 17), (4, 300), (30, 40), (3, SUB - 1), (2, SUB + LANES + 3), (1, 2 * SUB + 45), (80, 256), (65, 40)]  # fmt: skip
COLS = [(1, 5), (30, 40), (CHUNK + 1, 17), (2 * CHUNK + 3, LANES + 1), (3, TILE + 33), (0, 7)]


@st.composite
def scan_rows_args(draw):
    x, thr = draw(blocks(ROWS))
    rows, n = x.shape
    return [read_only(x.reshape(-1)), rows, n, thr, *_finds(draw(CAPS), rows + x.size // SUB + 1), *_stats(rows)]  # fmt: skip


@st.composite
def scan_narrow_args(draw):
    """bfloat16 or float8 bits: every pattern of the format somewhere, and runs of one."""
    import ml_dtypes

    fmt = draw(st.sampled_from(["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz"]))
    dt = np.dtype(getattr(ml_dtypes, fmt))
    rows, n = draw(st.sampled_from([(1, 300), (3, SUB + 5), (40, 20)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    bits = rng.integers(0, 1 << (8 * dt.itemsize), rows * n).astype(f"u{dt.itemsize}")
    if draw(st.booleans()):  # mostly ordinary values: the fast pass
        ordinary = rng.uniform(-2, 2, rows * n).astype(dt).view(bits.dtype)
        keep = rng.random(rows * n) < 0.99
        bits = np.where(keep, ordinary, bits)
    thr = ScanSpec((rows, n), dt, draw(CASTS)).thresholds
    spans = rows + bits.size // SUB + 1
    return [read_only(bits), widen_table(dt), rows, n, thr, *_finds(draw(CAPS), spans), *_stats(rows), np.empty(SUB, np.float32)]  # fmt: skip


@st.composite
def scan_cols_args(draw):
    x, thr = draw(blocks([s for s in COLS if s[0]]))
    rows, cols = x.shape
    pitch = cols + draw(st.sampled_from([0, 0, 13]))
    wide = np.full((rows, pitch), np.nan, x.dtype)  # the gaps hold what must not be read
    wide[:, :cols] = x
    flat = wide.reshape(-1)[: (rows - 1) * pitch + cols]
    scratch = [np.empty(kernels.SCRATCH), np.empty(kernels.COUNTS, np.int32)]
    spans = rows * -(-cols // TILE) + 1
    return [read_only(flat), rows, cols, pitch, thr, *_finds(draw(CAPS), spans), *_stats(cols), *scratch]  # fmt: skip


@st.composite
def quick_check_args(draw):
    x, thr = draw(blocks(ROWS))
    return [read_only(x.reshape(-1)), thr]


STAT = st.sampled_from([0.0, -0.0, 1.0, -2.5, 1e-300, 1e-160, 1e20, 3e38, 1e200, 1e308, np.inf, np.nan])  # fmt: skip
SLICES = st.sampled_from([1, 2, 5, 30, SLICE_BLOCK + 1, 2 * SLICE_BLOCK + 17])


@st.composite
def slice_inputs(draw):
    """A scan's per-slice outputs: shifts, sums, extrema and counts, at the edges."""
    m, length = draw(SLICES), draw(st.integers(0, 50))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    counts = rng.integers(0, length // 3 + 1, (3, m))
    pick = np.array(draw(st.lists(STAT, min_size=13, max_size=13)))
    with np.errstate(over="ignore", invalid="ignore"):
        stats = pick[rng.integers(0, 13, (5, m))] * rng.choice([1.0, -1.0, 3.3], (5, m))
        if draw(st.booleans()):
            stats = rng.standard_normal((5, m)) * 10.0 ** draw(st.integers(-300, 300))
        stats[2] = np.abs(stats[2])  # a sum of squares
        stats[3:] = np.where(np.isnan(stats[3:]), np.inf, stats[3:])  # extrema, never NaN
    return length, stats, counts


def _flag_args(draw, m):
    dtypes = draw(st.lists(st.sampled_from(sorted(TARGETS)), max_size=3, unique=True))
    thr = np.array([TARGETS[t].overflow_threshold for t in dtypes])
    eps = draw(st.sampled_from([float(np.finfo(np.float32).eps), float(np.finfo(float).eps)]))
    return [eps, draw(st.sampled_from([0.0, 3.0, 10.0])), thr, np.zeros(m, np.int64), np.zeros(m, np.int64)]  # fmt: skip


@st.composite
def finish_slices_args(draw):
    length, stats, counts = draw(slice_inputs())
    m = stats.shape[1]
    return [length, *stats, *counts, np.empty(m, np.int64), np.empty(m), np.empty(m)]


@st.composite
def finish_whole_slices_args(draw):
    args = draw(finish_slices_args())
    m = len(args[-1])
    return [*args, args[1].copy() if draw(st.booleans()) else np.empty(m), *_flag_args(draw, m)]


@st.composite
def fold_slices_args(draw):
    size = draw(SLICES)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    idx = np.sort(rng.choice(size, draw(st.integers(1, size)), replace=False)).astype(np.int64)
    pick = np.array(draw(st.lists(STAT, min_size=6, max_size=6)))

    def columns(k):
        n = rng.integers(0, 6, k)
        with np.errstate(over="ignore", invalid="ignore"):
            f = [pick[rng.integers(0, 6, k)] * rng.standard_normal(k) for _ in range(4)]
        f[0] = np.where(np.isnan(f[0]) | (n == 0), 0.0, f[0])  # a mean: finite or inf
        f[1] = np.where(n > 1, np.abs(np.nan_to_num(f[1])), 0.0)  # a std: finite, >= 0
        f[2], f[3] = np.nan_to_num(f[2], nan=np.inf), np.nan_to_num(f[3], nan=-np.inf)
        return [n, *f, *(rng.integers(0, 3, k) for _ in range(3))]

    return [idx, *columns(len(idx)), *columns(size)]


@st.composite
def slice_rows(draw):
    """A report's per-slice columns at zeros, overflow thresholds, infinite spreads."""
    m = draw(SLICES)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    pick = np.array(draw(st.lists(STAT, min_size=8, max_size=8)))
    n = rng.integers(0, 4, m) * rng.choice([1, 10**6], m)
    with np.errstate(over="ignore", invalid="ignore"):
        mean, std, mn, mx = (pick[rng.integers(0, 8, m)] * rng.standard_normal(m) for _ in range(4))
    return n, np.where(np.isnan(mean), 0.0, mean), np.nan_to_num(np.abs(std)), mn, mx


@st.composite
def slice_columns_args(draw):
    n, mean, std, mn, mx = draw(slice_rows())
    return [n, mean, std, mn, mx, *(np.empty(len(n)) for _ in range(5))]


@st.composite
def slice_flags_args(draw):
    n, mean, std, mn, mx = draw(slice_rows())
    m = len(n)
    z = TWINS["slice_columns"]  # the largest |z| as the report has it
    cols = [np.empty(m) for _ in range(5)]
    z(n, mean, std, mn, mx, *cols)
    bad = np.random.default_rng(draw(st.integers(0, 99))).integers(0, 2, m)
    return [n, cols[0], cols[1], cols[4], bad, bad * 0, bad, *_flag_args(draw, m)]


@st.composite
def scaled_counts_args(draw):
    """Values at and beside the scaled thresholds of a target, with the kernel's bounds."""
    target = draw(st.sampled_from(("float8_e4m3fn", "float8_e5m2", "bfloat16", "float16")))
    s = np.float32(draw(st.sampled_from((1.0, 1 / 3, 1000.0, 2.0**-7, 3e38))))
    lim = scaled_bounds(s, source_thresholds("float32", target), TARGETS[target].smallest_normal)
    edges = [float(v) * m for v in lim if v > 0 for m in (1, 1 - 1e-7, 1 + 1e-7, -1)]
    vals = draw(st.lists(st.sampled_from(SPECIAL + edges), max_size=600))
    dtype = draw(st.sampled_from(["f4", "f8"]))
    with np.errstate(over="ignore"):
        x = read_only(np.array(vals, np.float64).astype(dtype))
    cap = draw(CAPS)
    return [x, lim, np.zeros(4, np.int64), np.zeros((2, cap), np.int64), np.zeros(2, np.int64)]


INPUTS = {
    "scan_rows": scan_rows_args(),
    "scan_narrow": scan_narrow_args(),
    "scan_cols": scan_cols_args(),
    "quick_check": quick_check_args(),
    "finish_slices": finish_slices_args(),
    "finish_whole_slices": finish_whole_slices_args(),
    "fold_slices": fold_slices_args(),
    "slice_columns": slice_columns_args(),
    "slice_flags": slice_flags_args(),
    "scaled_counts": scaled_counts_args(),
}


def _positions(name, args, m):
    """The first positions and values a scan's listed spans hold (``record_positions``)."""
    at = {"scan_rows": 4, "scan_narrow": 5, "scan_cols": 5}[name]
    cap, blocks = args[at + 1], args[at + 3]
    thr = args[at - 1]
    if name == "scan_narrow":
        values = lambda a, b: widen(args[0][a:b], args[1])  # noqa: E731
    else:
        values = lambda a, b: args[0][a:b]  # noqa: E731
    locs, vals, nlocs = np.zeros((N_KINDS, cap), np.int64), np.zeros((N_KINDS, cap)), np.zeros(N_KINDS, np.int64)  # fmt: skip
    record_positions(values, blocks, m, thr, locs, vals, nlocs)
    return [nlocs, *(locs[k, : nlocs[k]] for k in range(N_KINDS)), *(vals[k, : nlocs[k]] for k in range(N_KINDS))]  # fmt: skip


def outputs(name, args, result) -> list:
    """What a kernel gives: its result and every argument it writes (a scan: its counts,
    statistics, and the positions its listed spans hold)."""
    if name in ("scan_rows", "scan_narrow", "scan_cols"):
        at = {"scan_rows": 4, "scan_narrow": 5, "scan_cols": 5}[name]
        return [args[at], *_positions(name, args, result), *args[at + 4 : at + 12]]
    if name == "scaled_counts":
        n = args[4]
        return [args[2], n, args[3][0, : n[0]], args[3][1, : n[1]]]
    if name == "finish_whole_slices":
        k = result[7]
        return [result, *args[9:13], args[-2][:k], args[-1][:k]]
    if name == "slice_flags":
        return [result, args[-2][:result], args[-1][:result]]
    writes = {"finish_slices": 9, "fold_slices": 9, "slice_columns": 5}.get(name)
    return [result] + ([] if writes is None else args[writes:])


def test_every_kernel_has_a_twin_and_inputs():
    assert set(TWINS) == set(INPUTS)
    assert all(callable(getattr(kernels, name)) for name in TWINS)
    assert {n for group in kernels.GROUPS.values() for n in group} == set(TWINS)


def test_every_public_kernel_and_every_kernel_production_picks_is_in_the_table():
    """The kernels' public names (``kernels.__all__`` but the table's helpers) are the twin
    table's, and every kernel named where production picks one (``dispatch.pick``, and
    ``summary._per_slice`` which calls it) is in it: no kernel runs without a twin the
    test above holds it to."""
    helpers = {"GROUPS", "KERNEL_DTYPES", "examples", "group_of", "prepare", "cache_directory"}
    public = {n for n in kernels.__all__ if not n.startswith("_")} - helpers
    assert public == set(TWINS)
    picked = set()
    root = Path(kernels.__file__).parent.parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("pick", "_per_slice"):  # fmt: skip
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant):
                    picked.add(first.value)
    assert picked and picked <= set(TWINS), picked - set(TWINS)


@pytest.mark.parametrize("name", sorted(TWINS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_kernel_equals_its_numpy_twin(name, data):
    args = data.draw(INPUTS[name])
    k_args, t_args = _copies(args)
    k_out = outputs(name, k_args, getattr(kernels, name)(*k_args))
    t_out = outputs(name, t_args, TWINS[name](*t_args))
    for i, (a, b) in enumerate(zip(k_out, t_out)):
        assert same(a, b), (name, i, a, b)


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_a_value_in_any_lane_of_any_sub_block_is_found(dtype):
    """The row kernel reads ``LANES`` values a step and proves a sub-block clean from its
    lanes: a NaN, an infinity, an overflow or an underflow in each lane of a sub-block's
    first, middle and last group, and in the row's tail, is counted and placed exactly."""
    n = 2 * SUB + LANES + 5
    thr = ScanSpec((n,), np.dtype(dtype), ("float16",)).thresholds
    over, under = float(thr[0]), float(thr[1])
    for value in (np.nan, np.inf, -np.inf, over, -over, under, -under):
        for lane in range(LANES):
            for at in (lane, SUB + SUB // 2 + lane, 2 * SUB - LANES + lane, n - 1 - lane % 5):
                x = np.ones(n, dtype)
                x[at] = value
                ka, ta = _copies([read_only(x), 1, n, thr, *_finds(3, n // SUB + 2), *_stats(1)])
                ko, to = kernels.scan_rows(*ka), TWINS["scan_rows"](*ta)
                got = outputs("scan_rows", ka, ko)
                assert same(got, outputs("scan_rows", ta, to))
                kind = np.flatnonzero(ka[4])[0]
                assert ka[4].sum() == 1 and got[2 + kind].tolist() == [at]


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_rows_longer_than_the_twins_piece_sum_in_one_order(dtype):
    """The twin takes a long row in pieces (``PIECE``): the row's lanes go on from piece
    to piece, sub-block after sub-block, as the kernel's do (a row of 1e6 values, clean
    and with a NaN, four sub-blocks at a time and not)."""
    from fastfinite.reference.twins import PIECE

    n = 2 * PIECE + 3 * SUB + 17
    x = np.random.default_rng(4).standard_normal(n).astype(dtype)
    for planted in (None, 5):
        if planted is not None:
            x[planted] = np.nan
        thr = ScanSpec(x.shape, x.dtype, ("float16",)).thresholds
        ka, ta = _copies([read_only(x), 1, n, thr, *_finds(3, n // SUB + 2), *_stats(1)])
        ko, to = kernels.scan_rows(*ka), TWINS["scan_rows"](*ta)
        assert same(outputs("scan_rows", ka, ko), outputs("scan_rows", ta, to))


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_a_dirty_chunk_is_added_again_and_the_others_are_not(dtype):
    """Columns are added a chunk of rows at a time and checked after: a NaN in the last row
    of one chunk, an overflow in the first of the next, and a clean chunk between them on
    a tile boundary give the twin's sums, counts and positions (in C order per tile)."""
    rows, cols = 3 * CHUNK, TILE + 40
    x = np.random.default_rng(1).uniform(-1, 1, (rows, cols)).astype(dtype)
    x[CHUNK - 1, 5] = np.nan
    x[CHUNK, TILE + 3] = 7e4  # over float16's maximum
    x[2 * CHUNK + 7, TILE - 1] = -np.inf
    thr = ScanSpec(x.shape, x.dtype, ("float16",)).thresholds
    scratch = [np.empty(kernels.SCRATCH), np.empty(kernels.COUNTS, np.int32)]
    args = [read_only(x.reshape(-1)), rows, cols, cols, thr, *_finds(5, 2 * rows + 1), *_stats(cols), *scratch]  # fmt: skip
    ka, ta = _copies(args)
    ko, to = kernels.scan_cols(*ka), TWINS["scan_cols"](*ta)
    assert same(outputs("scan_cols", ka, ko), outputs("scan_cols", ta, to))
    assert ka[5][:4].tolist() == [1, 0, 1, 1]


@pytest.mark.parametrize("rows", [2, 3, 40])
def test_totals_keep_their_fallbacks(rows):
    """Slices whose ``n * mean`` overflow take the mean of the means, and those whose
    spread's squares do, their spread scaled: finite totals, the twin's bits."""
    shift = np.zeros((2, rows))
    shift[0, 1::2], shift[1, :] = 1e308, np.linspace(1e299, 1e300, rows)
    for sh in shift:
        zeros, counts = np.zeros(rows), np.zeros(rows, np.int64)
        args = [2, sh, zeros, zeros, sh, sh, counts, counts, counts]
        outs = [[np.empty(rows, np.int64), np.empty(rows), np.empty(rows)] for _ in range(2)]
        got = kernels.finish_slices(*args, *outs[0])
        want = TWINS["finish_slices"](*args, *outs[1])
        assert same(got, want) and np.isfinite(got[1]) and np.isfinite(got[2])


CACHED_KERNEL = (
    "import numpy as np; from fastfinite import kernels; "
    "assert kernels.quick_check(np.zeros(3), np.array([np.inf, -1.0] * 5))"
)


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
    run = subprocess.run([sys.executable, "-c", CACHED_KERNEL], env=env, capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert bool(list(tmp_path.rglob("checks.quick_check-*.nbi"))) is cached


def test_the_cache_is_keyed_on_every_source_the_kernels_are_made_of(tmp_path):
    """numba keys a kernel's cache on its own file; a kernel inlines helpers and constants
    from other files. Every module a kernel module imports from is part of the key
    (``jit._SOURCES``): a copy of the package whose helper module (``lanes``) changed
    compiles again rather than load what the unchanged one cached."""
    import shutil

    here = Path(jit.__file__).parent
    imported = {here / "__init__.py"}
    for path in here.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.level:
                base = here if node.level == 1 else here.parent
                imported.add(base / f"{(node.module or '__init__').replace('.', '/')}.py")
    assert imported <= set(jit._SOURCES), imported - set(jit._SOURCES)
    copy_ = tmp_path / "src" / "fastfinite"
    shutil.copytree(here.parent, copy_, ignore=shutil.ignore_patterns("__pycache__"))
    probe = CACHED_KERNEL + "; print(sum(kernels.quick_check.stats.cache_misses.values()))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(tmp_path / "src"))
    misses = []
    for change in (False, False, True):
        if change:
            with open(copy_ / "kernels" / "lanes.py", "a") as f:
                f.write("\n# a change in a helper module\n")
        run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
        assert run.returncode == 0, run.stderr
        misses.append(int(run.stdout.split()[-1]))
    assert misses == [1, 0, 1], misses


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("shape", [(80, 256), (65, 40), (200, 48), (1, 32), (3, 2032)])
def test_many_short_rows_sum_their_lanes_in_one_order(dtype, shape):
    """Many rows shorter than a sub-block (a set's small files stacked): the twin adds
    each row's sub-blocks in turn, the kernel's order (``_short_lanes`` for rows of whole
    lanes, ``_lane_sums`` for the others), with values of every size and special ones
    planted, and without."""
    rows, n = shape
    rng = np.random.default_rng(9)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 30, shape)).astype(dtype)
    for planted in (False, True):
        if planted:
            x[3 % rows, 5], x[7 % rows, -1], x[-1, 0] = np.nan, np.inf, -np.inf
        thr = ScanSpec(x.shape, x.dtype, ("float16",)).thresholds
        args = [read_only(x.reshape(-1)), rows, n, thr, *_finds(3, rows + 1), *_stats(rows)]
        ka, ta = _copies(args)
        ko, to = kernels.scan_rows(*ka), TWINS["scan_rows"](*ta)
        assert same(outputs("scan_rows", ka, ko), outputs("scan_rows", ta, to))
