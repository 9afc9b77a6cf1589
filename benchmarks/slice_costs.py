"""Where a ``by=0`` scan of short rows spends its time, on one thread, stage by stage.

Each stage adds one cost to the one before, best of ``--repeat``, in ns per slice::

    python benchmarks/slice_costs.py 1e6,100 float32

- read every byte (``bench_memory``'s bandwidth kernel on one thread): the machine's limit;
- and write the six rows a finished slice takes (count, mean, std, min, max, largest |z|;
  its number is shared) into a canvas taken as the scan takes it, row by row as the data
  is read: the floor of ``by=0``;
- the plain scan (one worker);
- the pass of ``scan_rows``: each row's shifted sums and extrema, written to memory that is
  already faulted in;
- and the finishing in the kernel (``scan_rows_finished``: moments, largest |z|, flags,
  block by block) into a canvas that is already faulted in;
- and a fresh canvas (``pages.canvas_buffer(..., spare=False)``, as a process's first scan
  takes it: its pages are faulted in by the kernel's writes);
- or the spare canvas (``pages.canvas_buffer``, as every later scan takes it: the mapping
  the last one left);
- the ``by=0`` scan (one worker).

One thread, so that each cost is its own (a scan on two threads runs the same stages on
each thread's regions). What ``by=0`` adds to the plain scan is the difference between
their rows; issue 19 asks for at most 0.3x of it.
"""

from __future__ import annotations

import argparse

import numba
import numpy as np
from _common import best_times
from bench_memory import bandwidth_kernel

import fastfinite
from fastfinite import kernels
from fastfinite.anomalies import flag_limits
from fastfinite.kinds import N_KINDS
from fastfinite.pages import canvas_buffer
from fastfinite.summary import CANVAS_ROWS, ScanSpec


def _found() -> tuple:
    """A kernel's counts and its kept positions, values and their numbers."""
    n = N_KINDS
    return np.zeros(n, np.int64), np.empty((n, 1024), np.int64), np.empty((n, 1024)), np.zeros(n, np.int64)  # fmt: skip


def _finished_args(x: np.ndarray, spec: ScanSpec, buf: np.ndarray) -> tuple:
    """``scan_rows_finished``'s arguments, its columns in the canvas buffer ``buf`` as
    ``summarize`` lends them (the largest |z| in the row of the shifts)."""
    rows = x.shape[0]
    _, n, mean, std, mn, mx, *counts = (buf[i] for i in CANVAS_ROWS)
    f64 = [a.view(np.float64) for a in (buf[7], mn, mx, mean, std)]
    xi = x.view(np.int32 if x.itemsize == 4 else np.int64)
    found = _found()
    limits = flag_limits(spec.dtype, spec.cast, spec.z_threshold)
    where, flags = np.empty(rows, np.int64), np.empty(rows, np.int64)
    return (
        x, xi, spec.thresholds, found[0], *f64[:3], buf[4:7], *counts, *found[1:],
        n, *f64[3:], *limits, where, flags,
    )  # fmt: skip


@numba.njit(nogil=True, cache=True, fastmath=True)  # the sum in vectors: it is not a result
def _read_and_write_rows(x, out, which):
    """Every value of each row of ``x`` read (their sum, so that the read is kept), and
    written to the rows ``which`` of ``out`` in that row's column."""
    for r in range(x.shape[0]):
        s = 0.0
        for j in range(x.shape[1]):
            s += x[r, j]
        for c in which:
            out[c, r] = s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shape", help="comma-separated rows,cols, e.g. 1e6,100")
    p.add_argument("dtype", choices=["float32", "float64"])
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    rows, cols = (int(float(v)) for v in args.shape.split(","))
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(args.dtype)
    spec = ScanSpec(x.shape, x.dtype, by=(0,))
    xi = x.view(np.int32 if x.itemsize == 4 else np.int64)
    thr = spec.thresholds
    stats, counts = np.zeros((5, rows)), np.zeros((3, rows), np.int64)
    found = _found()
    resident = canvas_buffer(rows, spare=False)
    resident[:] = 0
    bw = bandwidth_kernel()
    flat = x.reshape(-1)

    def canvas(take):
        return lambda: kernels.scan_rows_finished(*_finished_args(x, spec, take()))

    written = np.array([1, 2, 3, 7, 10, 11])  # count, mean, std, largest |z|, min, max

    stages = {
        "read every byte": lambda: bw(flat),
        "+ rows written": lambda: _read_and_write_rows(
            x, canvas_buffer(rows).view(np.float64), written
        ),
        "plain scan": lambda: fastfinite.scan(x, workers=1),
        "pass": lambda: kernels.scan_rows(x, xi, thr, found[0], stats, counts, *found[1:]),
        "+ finishing": lambda: kernels.scan_rows_finished(*_finished_args(x, spec, resident)),
        "+ fresh canvas": canvas(lambda: canvas_buffer(rows, spare=False)),
        "or spare canvas": canvas(lambda: canvas_buffer(rows)),
        "by=0 scan": lambda: fastfinite.scan(x, by=0, workers=1),
    }
    numba.set_num_threads(1)
    best = best_times(stages, args.repeat)
    plain = best["plain scan"]
    print(f"{(rows, cols)} {args.dtype}, one thread (ns per slice, multiple of the plain scan)")
    for name, t in best.items():
        print(f"  {name:16s} {t / rows * 1e9:7.1f}  {t / plain:5.2f}x")


if __name__ == "__main__":
    main()
