"""The cost of fastfinite.guard on a training loop's batches: 1 MB float32 batches, a loop
that only touches the data (sums each batch) with and without the guard, checking in the
loop's thread (the default) and in a background thread reading ahead (``prefetch``).

    python benchmarks/bench_guard.py            # 2000 batches (2 GB)
    python benchmarks/bench_guard.py --quick    # 200 batches
    python benchmarks/bench_guard.py --write    # also record benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import results_section, write_section  # noqa: E402

import fastfinite  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    n = 200 if args.quick else 2000
    rows_per = 1024  # (1024, 256) float32 = 1 MiB
    data = np.random.default_rng(0).standard_normal((256 * rows_per, 256)).astype(np.float32)

    def batches():
        for i in range(n):
            j = i % 256
            yield data[j * rows_per : (j + 1) * rows_per]

    def loop(it):
        total = 0.0
        for b in it:
            total += float(b.sum())
        return total

    fastfinite.guard([data[:4]]).check(data[:4], "warm-up")
    loops = {
        "plain loop (sum of each batch)": lambda: batches(),
        "guarded loop": lambda: fastfinite.guard(batches()),
        "guarded, by=None": lambda: fastfinite.guard(batches(), by=None),
        "guarded, prefetch=2": lambda: fastfinite.guard(batches(), prefetch=2),
        "guarded, prefetch=4": lambda: fastfinite.guard(batches(), prefetch=4),
    }
    results = dict.fromkeys(loops, float("inf"))
    for _ in range(7):  # round robin: the machine's drift touches every loop alike
        for name, make in loops.items():
            t0 = time.perf_counter()
            loop(make())
            results[name] = min(results[name], time.perf_counter() - t0)
    base = results["plain loop (sum of each batch)"]
    rows = [
        f"\n{n} batches of 1 MiB float32 (1024 x 256); best of 7, round robin\n",
        "| loop | time (s) | per batch (us) | overhead |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, t in results.items():
        rows.append(f"| {name} | {t:.3f} | {t / n * 1e6:.0f} | {(t / base - 1) * 100:+.0f}% |")
        print(f"  {name:34s} {t:7.3f} s  {t / n * 1e6:7.0f} us/batch  {(t / base - 1) * 100:+.0f}%")
    if args.write:
        write_section("bench_guard.py", results_section("## Guards (issue 7)", rows))


if __name__ == "__main__":
    main()
