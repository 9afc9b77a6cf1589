"""Where a ``by=0`` scan of short rows spends its time, on one thread, stage by stage.

Each stage adds one cost to the one before, best of ``--repeat``, in ns per slice::

    python benchmarks/slice_costs.py 1e6,100 float32

- read every byte (``bench_memory``'s bandwidth kernel on one thread): the machine's limit;
- and write the six rows a finished slice takes (count, mean, std, min, max, largest |z|;
  its number is shared) into a canvas taken as the scan takes it, row by row as the data
  is read: the floor of ``by=0``;
- the plain scan (one worker);
- the pass (``summarize.scan_call``, the kernel the scan picks for these rows): each row's
  shifted sums and extrema, written to memory that is already faulted in;
- and the finishing (``summarize.summarize`` with a canvas, as the local engine lends it:
  moments, largest |z|, flags) into a fresh canvas (its pages faulted in by the writes);
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
from fastfinite.compute import dispatch
from fastfinite.compute.blocks import Block
from fastfinite.compute.pages import canvas_buffer
from fastfinite.compute.summarize import scan_call, summarize
from fastfinite.compute.summary import ScanSpec, SliceCanvas
from fastfinite.model import kinds


def _pass(x: np.ndarray, spec: ScanSpec):
    """The scan's kernel for the rows of ``x`` as slices, with the outputs it is given."""
    block = Block(x, (0, 0), order=(0, 1))
    scan, _, spans = scan_call(block, 0, x.size, x.shape, spec, True)
    rows, n = x.shape[0], kinds.N_KINDS
    stats, counts = np.zeros((5, rows)), np.zeros((3, rows), np.int64)
    found = np.zeros(n, np.int64), 1024, np.zeros(n, np.int64), np.empty((3, spans), np.int64)
    return lambda: scan(spec.thresholds, *found, *stats, *counts)


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
    with dispatch.using("kernels"):  # the kernels, never their twins
        _main()


def _main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shape", help="comma-separated rows,cols, e.g. 1e6,100")
    p.add_argument("dtype", choices=["float32", "float64"])
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    rows, cols = (int(float(v)) for v in args.shape.split(","))
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(args.dtype)
    spec = ScanSpec(x.shape, x.dtype, by=(0,))
    bw = bandwidth_kernel()
    flat = x.reshape(-1)

    written = np.array([1, 2, 3, 7, 10, 11])  # count, mean, std, largest |z|, min, max

    stages = {
        "read every byte": lambda: bw(flat),
        "+ rows written": lambda: _read_and_write_rows(
            x, canvas_buffer(rows).view(np.float64), written
        ),
        "plain scan": lambda: fastfinite.scan(x, workers=1),
        "pass": _pass(x, spec),
        "+ finishing": lambda: summarize(x, (0, 0), spec, SliceCanvas(rows)),
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
