"""The number formats training runs in (issue 17): bfloat16 and float8 data in RAM against
the machine's limit and against what a user writes today, and the cost of float8 cast
targets on float32 data.

    python benchmarks/bench_formats.py            # 1e9 bfloat16, 1e9 float8, 1e8 float32
    python benchmarks/bench_formats.py --quick    # small smoke run (CI)

The limit is ``bench_memory``'s parallel read-every-byte kernel on the same bytes seen as
float32. Prints times and ratios; with ``--write`` records them in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse

import ml_dtypes
import numpy as np
from _common import best_times, machine, results_section, write_section
from bench_memory import bandwidth_kernel, make_array

import fastfinite

F8_TARGETS = ("float32", "float8_e4m3fn", "float8_e5m2")


def make_narrow(n: int, fmt: str) -> np.ndarray:
    """``n`` standard normal values in ``fmt``, made a slice at a time (no float32 copy of
    the whole), NaN and infinities (where the format has them) in the last 1%."""
    rng = np.random.default_rng(0)
    dtype = np.dtype(getattr(ml_dtypes, fmt))
    out = np.empty(n, dtype)
    step = 50_000_000
    for i in range(0, n, step):
        out[i : i + step] = rng.standard_normal(min(step, n - i), np.float32).astype(dtype)
    idx = rng.integers(n - max(1, n // 100), n, 30)
    with np.errstate(invalid="ignore", over="ignore"):
        out[idx[:10]] = np.float32(np.nan)
        out[idx[10:20]] = np.float32(np.inf)
        out[idx[20:]] = np.float32(-np.inf)
    return out


def run_narrow(fmt: str, n: int, repeat: int) -> list[str]:
    x = make_narrow(n, fmt)
    gb = x.nbytes / 1e9
    print(f"\n{fmt}: {n:.0e} values, {gb:.2f} GB")
    bw = bandwidth_kernel()
    as_f32 = x.view(np.uint8)[: x.nbytes // 4 * 4].view(np.float32)
    fns = {
        "bandwidth (parallel x != x)": lambda: bw(as_f32),
        "fastfinite.scan (full report)": lambda: fastfinite.scan(x),
        "np.isfinite(x.astype(np.float32))": lambda: np.isfinite(x.astype(np.float32)).all(),
    }
    times = best_times(fns, repeat)
    report = fastfinite.scan(x)
    expected = int(np.isnan(x.astype(np.float32)).sum())
    assert report.nan == expected, (report.nan, expected)  # a fast wrong answer is no answer
    t_ff, t_bw = times["fastfinite.scan (full report)"], times["bandwidth (parallel x != x)"]
    rows = [
        f"\n**{fmt}, {n:.0e} values ({gb:.2f} GB)**\n",
        "| method | time (s) | GB/s | fastfinite speed-up | share of bandwidth |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, t in times.items():
        rows.append(f"| {name} | {t:.4f} | {gb / t:.2f} | {t / t_ff:.2f}x | {t_bw / t:.2f} |")
        print(f"  {name:36s} {t:8.4f} s  {gb / t:6.2f} GB/s  {t_bw / t:.2f} of bandwidth")
    return rows


def run_targets(n: int, repeat: int) -> list[str]:
    """float32 data: the default cast target, then float8 targets added to it."""
    x = make_array(n, np.float32)
    print(f"\nfloat32: {n:.0e} values, cast targets")
    times = best_times(
        {
            "cast='float32' (default)": lambda: fastfinite.scan(x),
            f"cast={F8_TARGETS}": lambda: fastfinite.scan(x, cast=F8_TARGETS),
            "scale='amax', float8_e4m3fn": lambda: fastfinite.scan(
                x, cast="float8_e4m3fn", scale="amax"
            ),
        },
        repeat,
    )
    base = times["cast='float32' (default)"]
    rows = [
        f"\n**float32, {n:.0e} values ({x.nbytes / 1e9:.2f} GB): cast targets**\n",
        "| cast | time (s) | / default |",
        "| --- | ---: | ---: |",
    ]
    for name, t in times.items():
        rows.append(f"| {name} | {t:.4f} | {t / base:.2f}x |")
        print(f"  {name:40s} {t:8.4f} s  {t / base:.2f}x the default")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small arrays, for a smoke run")
    p.add_argument("--write", action="store_true", help="write benchmarks/RESULTS.md's section")
    args = p.parse_args()
    n_narrow, n32, repeat = (1_000_000, 1_000_000, 2) if args.quick else (10**9, 10**8, 7)
    print(machine())
    rows = run_narrow("bfloat16", n_narrow, repeat)
    rows += run_narrow("float8_e4m3fn", n_narrow, repeat)
    rows += run_targets(n32, repeat)
    if args.write:
        about = (
            "The limit is the bandwidth kernel on the same bytes seen as float32; NumPy's path "
            "goes through float32. Each scan's NaN count is checked against NumPy's in the run."
        )
        section = results_section("## Training formats (issue 17)", rows, about)
        write_section("bench_formats.py", section)


if __name__ == "__main__":
    main()
