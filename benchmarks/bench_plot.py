"""The time to draw a report's picture (``report.plot``): the picture of a million slices (a
by=0 scan of a (1e6, 8) float32 array with problems in 2% of its rows) and of a
1e9-element scan's report ((1e6, 1000) float32, 4 GB in RAM, with NaN, inf and float16
overflows in a thousand rows). The scans are not timed: the picture is, in two steps
(``picture``: the data drawn; ``draw`` and saving the PNG); the issue asks for under 5 s.

    python benchmarks/bench_plot.py            # 1e6 slices and 1e9 elements
    python benchmarks/bench_plot.py --quick    # 1e5 slices and 1e8 elements
    python benchmarks/bench_plot.py --write    # also record benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import results_section, write_section  # noqa: E402

import fastfinite  # noqa: E402
from fastfinite.report.picture import picture  # noqa: E402
from fastfinite.report.plot import draw  # noqa: E402

LIMIT = 5.0  # seconds, the issue's


def _slices(n: int) -> np.ndarray:
    """(n, 8) float32: NaN in n/100 rows, -inf in one, n/100 constant rows."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 8), dtype=np.float32)
    k = n // 100
    rows = rng.choice(n, size=2 * k + 1, replace=False)
    x[rows[:k], 3] = np.nan
    x[rows[k : 2 * k]] = 0.25  # blank samples
    x[rows[-1], 0] = -np.inf
    return x


def _elements(n: int) -> np.ndarray:
    """(n / 1000, 1000) float32: NaN, +inf and float16 overflows in a thousand rows."""
    rows = n // 1000
    x = np.zeros((rows, 1000), dtype=np.float32)
    rng = np.random.default_rng(1)
    picks = rng.choice(rows, size=1000, replace=False)
    x[picks[:400], 7] = np.nan
    x[picks[400:700], 500] = np.inf
    x[picks[700:], 999] = 1e5  # over float16's largest, 65504
    return x


def _time(report, repeat: int) -> tuple[float, float, int]:
    """Best seconds of ``picture`` and of drawing and saving the PNG; the PNG's size."""
    import matplotlib.pyplot as plt

    best_pic, best_draw = float("inf"), float("inf")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.png")
        for _ in range(repeat):
            t0 = time.perf_counter()
            pic = picture(report)
            t1 = time.perf_counter()
            fig = draw(pic)
            fig.savefig(path, dpi=100)
            plt.close(fig)
            t2 = time.perf_counter()
            best_pic, best_draw = min(best_pic, t1 - t0), min(best_draw, t2 - t1)
        size = os.path.getsize(path)
    return best_pic, best_draw, size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    n_slices = 100_000 if args.quick else 1_000_000
    n_elements = 100_000_000 if args.quick else 1_000_000_000
    repeat = 3
    # matplotlib's import and first figure are paid once per process, not per picture
    draw(picture(fastfinite.scan(np.zeros((4, 4))))).clf()

    cases = []
    x = _slices(n_slices)
    r = fastfinite.scan(x, by=0, progress=False)
    what = f"by=0 scan of ({n_slices:,}, 8) float32: {len(r.findings):,} slice findings"
    cases.append((what, r))
    del x
    x = _elements(n_elements)
    r = fastfinite.scan(x, cast="float16", progress=False)
    what = (
        f"scan of {n_elements:,} elements (float32 {x.shape}): {len(r.regions)} regions, "
        f"{len(r.locations)} locations"
    )
    cases.append((what, r))
    del x

    rows = [
        f"\nBest of {repeat}; the scans are not timed. Limit: {LIMIT:g} s.\n",
        "| report | picture (s) | draw + PNG (s) | total (s) | PNG (KB) | under the limit |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for what, report in cases:
        t_pic, t_draw, size = _time(report, repeat)
        total = t_pic + t_draw
        ok = "yes" if total < LIMIT else "NO"
        rows.append(
            f"| {what} | {t_pic:.3f} | {t_draw:.3f} | {total:.3f} | {size / 1024:.0f} | {ok} |"
        )
        print(f"  {what}\n    picture {t_pic:.3f} s, draw + PNG {t_draw:.3f} s: {ok}")
    if args.write:
        write_section("bench_plot.py", results_section("## Pictures of reports (issue 45)", rows))


if __name__ == "__main__":
    main()
