"""In-memory scans side by side: fastfinite against NumPy, scikit-learn, bottleneck and the
machine's limit (a parallel Numba loop that reads every element once).

    python benchmarks/bench_memory.py            # 1e8 float32, 5e7 float64, a 4 GB .npy
    python benchmarks/bench_memory.py --quick    # small smoke run (CI)

Prints GB/s and ratios; with ``--write`` records them in benchmarks/RESULTS.md.
Problems are planted in the last 1% of each array, so functions that stop at the first NaN
(bottleneck's ``anynan``) still read almost everything.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable

import numpy as np
from _common import best_time, best_times, machine, results_section, write_section

import fastfinite
import fastfinite.compute.dispatch
from fastfinite import reference


@functools.cache
def bandwidth_kernel():
    from numba import njit, prange

    @njit(parallel=True, nogil=True, cache=True)
    def count_self_unequal(x):
        c = 0
        for i in prange(x.shape[0]):
            c += x[i] != x[i]
        return c

    return count_self_unequal


@functools.cache
def fill_kernel():
    from numba import njit, prange

    @njit(parallel=True, nogil=True, cache=True)
    def fill_rows(out, v):
        for r in prange(out.shape[0]):
            for i in range(out.shape[1]):
                out[r, i] = v

    return fill_rows


def read_and_write_floor(x: np.ndarray, slices: int):
    """The machine's floor for a scan with ``slices`` per-slice results: every byte of
    ``x`` read (the bandwidth kernel), then the six float64 rows a scan that finishes its
    slices writes (count, mean, std, min, max, largest |z|; their numbers are shared) into
    a canvas taken as the scan takes it (``pages.canvas_buffer``: the mapping the last one
    left, its count rows given back, from the second run on)."""
    from fastfinite.compute.pages import canvas_buffer

    bw, fill = bandwidth_kernel(), fill_kernel()
    flat = x.reshape(-1, order="A")

    def run():
        buf = canvas_buffer(slices).view(np.float64)
        v = float(bw(flat))
        fill(buf[1:4], v)
        fill(buf[9:12], v)

    return run


def make_array(n: int, dtype) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(dtype)
    tail = n - max(1, n // 100)
    idx = rng.integers(tail, n, 40)
    x[idx[:10]] = np.nan
    x[idx[10:20]] = np.inf
    x[idx[20:30]] = -np.inf
    if np.dtype(dtype).itemsize == 8:
        x[idx[30:]] = 1e100  # float32 overflow
    return x


def peers(x: np.ndarray) -> dict[str, Callable[[], object]]:
    bw = bandwidth_kernel()
    out: dict[str, Callable[[], object]] = {
        "bandwidth (parallel x != x)": lambda: bw(x),
        "fastfinite.scan (full report)": lambda: fastfinite.scan(x),
        "np.isfinite(x).all()": lambda: np.isfinite(x).all(),
        "NumPy full report": lambda: reference.scan(x, cast=("float32",)),
    }
    try:
        from sklearn.utils import assert_all_finite

        def sk():
            try:
                assert_all_finite(x)
            except ValueError:
                pass

        out["sklearn assert_all_finite"] = sk
    except ImportError:
        print("  (scikit-learn not installed: skipped)")
    try:
        import bottleneck as bn

        out["bottleneck.anynan"] = lambda: bn.anynan(x)
    except ImportError:
        print("  (bottleneck not installed: skipped)")
    return out


def run_memory(n32: int, n64: int, repeat: int) -> list[str]:
    rows = []
    for dtype, n in ((np.float32, n32), (np.float64, n64)):
        x = make_array(n, dtype)
        gb = x.nbytes / 1e9
        print(f"\n{np.dtype(dtype).name}: {n:.0e} elements, {gb:.2f} GB")
        fns = peers(x)
        slow_name = "NumPy full report"  # seconds a call: once, after the others
        times = best_times({k: f for k, f in fns.items() if k != slow_name}, repeat)
        times[slow_name] = best_time(fns[slow_name], 1)
        times = {name: times[name] for name in fns}
        t_ff = times["fastfinite.scan (full report)"]
        t_bw = times["bandwidth (parallel x != x)"]
        rows.append(f"\n**{np.dtype(dtype).name}, {n:.0e} elements ({gb:.2f} GB)**\n")
        rows.append("| method | time (s) | GB/s | fastfinite speed-up | share of bandwidth |")
        rows.append("| --- | ---: | ---: | ---: | ---: |")
        for name, t in times.items():
            line = f"| {name} | {t:.4f} | {gb / t:.2f} | {t / t_ff:.2f}x | {t_bw / t:.2f} |"
            rows.append(line)
            print(
                f"  {name:32s} {t:8.4f} s  {gb / t:6.2f} GB/s  "
                f"fastfinite is {t / t_ff:6.2f}x faster  ({t_bw / t:.2f} of bandwidth)"
            )
        del x
    return rows


def slice_peers(y: np.ndarray, by: int) -> dict[str, Callable[[], object]]:
    """NumPy's and bottleneck's per-slice statistics along the same axis as ``by``: what a
    user computes by hand (``nanmean`` + ``nanstd`` + the NaN count per slice)."""
    axis = 1 if by == 0 else 0  # per row: reduce over the columns; per column: the rows
    out: dict[str, Callable[[], object]] = {
        "numpy": lambda: (
            np.nanmean(y, axis=axis),
            np.nanstd(y, axis=axis),
            np.isnan(y).sum(axis=axis),
        ),
    }
    try:
        import bottleneck as bn

        out["bottleneck"] = lambda: (bn.nanmean(y, axis=axis), bn.nanstd(y, axis=axis))
    except ImportError:
        pass
    return out


# fastfinite's scans of the per-slice table take 20-40 ms: best of this many, alternated among
# themselves (a best of 3 of them still moved a ratio by 0.1-0.2 between runs); the peers,
# seconds each, best of ``repeat``
FAST_REPEAT = 7


def slice_shapes(n: int) -> list[tuple[int, int]]:
    side = int(round(n**0.5))
    return [(n // 1000, 1000), (n // 100, 100), (side, side)]


def run_slices(n: int, repeat: int, peers: bool = True) -> list[str]:
    """``by=0`` and ``by=-1`` against the plain scan on the same data (float32 and float64, C
    and Fortran order), and against NumPy's and bottleneck's per-axis statistics. Beside
    them, the machine's floor for the per-slice output: the report's nine per-slice columns
    (``SliceReport``, 8 bytes a slice each) written once into fresh memory; and the floor
    of the whole scan, every byte read then the finished slices' rows written
    (``read_and_write_floor``)."""
    rows = [
        "",
        "| data | plain scan (s) | by=0 / plain | by=-1 / plain | columns by=0 / plain "
        "| columns by=-1 / plain | floor by=0 / plain | floor by=-1 / plain "
        "| NumPy by=0 / fastfinite | NumPy by=-1 / fastfinite "
        "| bottleneck by=0 / fastfinite | bottleneck by=-1 / fastfinite |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for dtype in (np.float32, np.float64):
        for shape in slice_shapes(n):
            base = make_array(shape[0] * shape[1], dtype).reshape(shape)
            for order in "CF":
                y = np.asarray(base, order=order)
                fns = {
                    "plain": lambda y=y: fastfinite.scan(y),
                    "by=0": lambda y=y: fastfinite.scan(y, by=0),
                    "by=-1": lambda y=y: fastfinite.scan(y, by=-1),
                    "columns by=0": lambda m=shape[0]: np.empty((9, m), np.int64).fill(1),
                    "columns by=-1": lambda m=shape[1]: np.empty((9, m), np.int64).fill(1),
                    "floor by=0": read_and_write_floor(y, shape[0]),
                    "floor by=-1": read_and_write_floor(y, shape[1]),
                }
                t = best_times(fns, max(repeat, FAST_REPEAT))
                if peers:
                    slow = {}
                    for by in (0, -1):
                        for name, fn in slice_peers(y, by).items():
                            slow[f"{name} by={by}"] = fn
                    with np.errstate(invalid="ignore"):  # NumPy's nanstd of a slice with inf
                        t.update(best_times(slow, repeat))
                t0 = t["plain"]
                label = f"{np.dtype(dtype).name} {shape} {order}"
                cells = [
                    f"{t[k] / t0:.2f}"
                    for k in (
                        "by=0", "by=-1", "columns by=0", "columns by=-1", "floor by=0",
                        "floor by=-1",
                    )
                ]  # fmt: skip
                for name in ("numpy", "bottleneck"):
                    for by in (0, -1):
                        key = f"{name} by={by}"
                        cells.append(f"{t[key] / t[f'by={by}']:.1f}x" if key in t else "-")
                print(f"  {label}: plain {t0:.4f} s; " + ", ".join(cells))
                rows.append(f"| {label} | {t0:.4f} | " + " | ".join(cells) + " |")
                del y
            del base
    return rows


def run_slice_tuples(n: int, repeat: int) -> list[str]:
    """``by`` over two axes of float32 3-D arrays against the plain scan, beside the same
    slices as one axis of the array seen as 2-D (the form the layout reduces them to)."""
    rows = [
        "",
        "| data | plain scan (s) | by / plain | 2-D twin / plain |",
        "| --- | ---: | ---: | ---: |",
    ]
    a = max(1, n // 1_000_000)
    base = make_array(a * 1_000_000, np.float32)
    cases = [  # shape, by, the 2-D twin's shape and axis
        ((a, 1000, 1000), (1, 2), (a, 1_000_000), -1),
        ((10 * a, 100, 1000), (1, 2), (10 * a, 100_000), -1),
        ((10 * a, 1000, 100), (0, 1), (10_000 * a, 100), 0),
    ]
    for shape, by, flat, axis in cases:
        y, y2 = base.reshape(shape), base.reshape(flat)
        fns = {
            "plain": lambda: fastfinite.scan(base),
            "by": lambda y=y, by=by: fastfinite.scan(y, by=by),
            "twin": lambda y2=y2, axis=axis: fastfinite.scan(y2, by=axis),
        }
        t = best_times(fns, max(repeat, FAST_REPEAT))
        label = f"float32 {shape} by={by} (twin {flat} by={axis})"
        cells = [f"{t[k] / t['plain']:.2f}" for k in ("by", "twin")]
        print(f"  {label}: plain {t['plain']:.4f} s; " + ", ".join(cells))
        rows.append(f"| {label} | {t['plain']:.4f} | " + " | ".join(cells) + " |")
    return rows


FIRST_SCAN = (
    "import numpy as np, fastfinite; x = np.random.default_rng(0).standard_normal(10**7); "
    "x[5] = np.nan; assert fastfinite.scan(x).nan == 1"
)


def run_cli_times() -> list[str]:
    """Cold (fresh Numba cache) and warm starts in fresh processes: ``fastfinite scan
    small.npy`` (NumPy's twin, no numba), and a first scan of 1e7 float64 values in RAM (the
    kernels: compiled on the first run, loaded from the cache after)."""
    rows = []
    with tempfile.TemporaryDirectory() as d:
        small = os.path.join(d, "small.npy")
        np.save(small, make_array(10_000, np.float64))
        env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(d, "numba-cache"))
        runs = [
            (
                "`fastfinite scan small.npy`",
                [sys.executable, "-m", "fastfinite", "scan", small, "--no-progress"],
            ),
            ("python: first `scan` of 1e7 float64 in RAM", [sys.executable, "-c", FIRST_SCAN]),
        ]
        for what, cmd in runs:
            for label in ("cold (empty Numba cache)", "warm", "warm"):
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, capture_output=True, check=False)
                t = time.perf_counter() - t0
                print(f"  {what}, {label}: {t:.2f} s")
                rows.append(f"| {what}, {label} | {t:.2f} s |")
    return rows


NPY_CHILD = textwrap.dedent(
    """
    import sys, time, numpy as np, fastfinite
    def hwm():  # peak resident set (kB) of this process image; ru_maxrss keeps the parent's
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    fastfinite.scan(np.zeros(1 << 17, np.float32))  # load numba before the baseline
    base = hwm()
    t0 = time.perf_counter()
    r = fastfinite.scan(sys.argv[1])
    t = time.perf_counter() - t0
    peak = hwm()
    print(base, peak, t, r.nonfinite)
    """
)


def run_npy(gb: float) -> list[str]:
    """Peak resident memory scanning a large .npy file (a read-only memmap)."""
    n = int(gb * 1e9 / 4)
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        path = os.path.join(d, "big.npy")
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n,))
        step = 1 << 24
        rng = np.random.default_rng(1)
        for a in range(0, n, step):
            mm[a : a + step] = rng.standard_normal(min(step, n - a), dtype=np.float32)
        mm[n // 2] = np.nan
        mm.flush()
        del mm
        out = subprocess.run(
            [sys.executable, "-c", NPY_CHILD, path], capture_output=True, text=True, check=True
        ).stdout.split()
    base, peak, t, nonfinite = int(out[0]), int(out[1]), float(out[2]), int(out[3])
    above = (peak - base) / 1024
    print(
        f"\n.npy {gb:.1f} GB: {t:.2f} s ({n * 4 / 1e9 / t:.2f} GB/s), peak RSS "
        f"{peak / 1024:.0f} MB, {above:.0f} MB above the baseline; nonfinite {nonfinite}"
    )
    return [
        f"| `.npy` of {gb:.1f} GB float32, read-only memmap | {t:.2f} s, "
        f"{n * 4 / 1e9 / t:.2f} GB/s | peak RSS {above:.0f} MB above the baseline "
        f"({base / 1024:.0f} MB) |"
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small arrays, for a smoke run")
    p.add_argument("--write", action="store_true", help="write benchmarks/RESULTS.md's section")
    p.add_argument("--npy-gb", type=float, default=None, help="size of the .npy test (GB)")
    p.add_argument(
        "--slices", action="store_true", help="only the per-slice section (issue 19), written alone"
    )
    args = p.parse_args()
    if args.quick:
        n32, n64, repeat, npy_gb = 1_000_000, 500_000, 2, args.npy_gb or 0.05
    else:
        n32, n64, repeat, npy_gb = 100_000_000, 50_000_000, 9, args.npy_gb or 4.0
    print(machine())
    if args.slices:
        print("\nper-slice statistics:")
        rows = run_slices(n32, min(repeat, 3)) + run_slice_tuples(n32, min(repeat, 3))
        about = (
            f"fastfinite's scans best of {FAST_REPEAT} and NumPy's and bottleneck's best of "
            f"{min(repeat, 3)}, each alternated in one process; by=0 and by=-1 as multiples of "
            "the plain scan of the same array (target <= 1.3), and NumPy's `nanmean` + "
            "`nanstd` + `isnan(...).sum(axis)` and bottleneck's `nanmean` + `nanstd` along the "
            'same axis as multiples of fastfinite\'s time (target >= 5x). "columns": the '
            'report\'s nine per-slice columns written once into fresh memory; "floor": every '
            "byte read, then the finished slices' rows written; both as multiples of the plain "
            "scan. The second table: `by` over two axes of 3-D arrays beside the same slices "
            "as one axis of the array seen as 2-D."
        )
        if args.write:
            section = results_section("## Per-slice statistics (issue 19)", rows, about)
            write_section("bench_memory.py --slices", section)
        return
    rows = run_memory(n32, n64, repeat)
    print("\nper-slice statistics:")
    rows += ["", "Per-slice statistics (issue 5):", *run_slices(n32, repeat, peers=False)]
    rows += ["", "| start-up | wall |", "| --- | ---: |", *run_cli_times()]
    rows += ["", "| out of core | time | memory |", "| --- | --- | --- |", *run_npy(npy_gb)]
    if args.write:
        about = (
            "Arrays in RAM, their NaN, inf and -inf (and float32 overflows in float64) in the "
            f"last 1%; the methods timed in turn, best of {repeat} (NumPy's full report once). "
            "\"share of bandwidth\": the bandwidth kernel's time over the method's. Then by=0 "
            "and by=-1 against the plain scan (issue 5), fresh processes' start-up, and the "
            "peak RSS of a fresh process scanning a `.npy` file (a read-only memmap)."
        )
        section = results_section("## In memory (issue 2)", rows, about)
        write_section("bench_memory.py", section)


if __name__ == "__main__":
    with fastfinite.compute.dispatch.using("kernels"):  # warm: the kernels, never their twins
        main()
