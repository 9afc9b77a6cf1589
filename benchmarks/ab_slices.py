"""One cell of the per-slice table, alone: the plain scan and ``by`` scans of one array,
alternated in one process, best of ``--repeat``, as multiples of the plain scan.

``bench_memory.py --slices`` runs every cell in one process with NumPy's and bottleneck's
passes and the floors; this runs one cell alone, for A/B runs of two checkouts
(``PYTHONPATH=...``)::

    python benchmarks/ab_slices.py 1e6,100 float32 C 0 -1
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import best_times
from bench_memory import make_array

import fastfinite


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shape", help="comma-separated, e.g. 1e6,100")
    p.add_argument("dtype", choices=["float32", "float64"])
    p.add_argument("order", choices=["C", "F"])
    p.add_argument("by", nargs="+", type=int, help="axes, one scan each")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument(
        "--planted", action="store_true",
        help="bench_memory's data: NaN, inf, -inf (and float32 overflows) in the last 1%%",
    )  # fmt: skip
    p.add_argument(
        "--nan-feature", action="store_true",
        help="a NaN in every row of column 1: by=0 flags every row (a finding each)",
    )  # fmt: skip
    args = p.parse_args()
    shape = tuple(int(float(v)) for v in args.shape.split(","))
    if args.planted:
        x = make_array(shape[0] * shape[1], args.dtype).reshape(shape)
    else:
        x = np.random.default_rng(0).standard_normal(shape).astype(args.dtype)
    x = np.asarray(x, order=args.order)
    if args.nan_feature:
        x[:, 1] = np.nan
    scans = {"plain": lambda: fastfinite.scan(x)}
    scans.update({f"by={b}": (lambda b=b: fastfinite.scan(x, by=b)) for b in args.by})
    best = best_times(scans, args.repeat)
    plain = best.pop("plain")
    ratios = " ".join(f"{name}: {t / plain:.2f}x" for name, t in best.items())
    print(f"{shape} {args.dtype} {args.order}: plain {plain * 1e3:.1f} ms; {ratios}")


if __name__ == "__main__":
    main()
