"""The memory of per-slice columns (``fastfinite.compute.pages``): the spare canvas a process keeps
for its next scan, taken again with its counts zero, and never while a report uses it."""

from __future__ import annotations

import gc
import mmap
import sys

import numpy as np
import pytest

import fastfinite
from fastfinite.compute import pages
from fastfinite.compute.summary import _SHIFTS

ROWS = 60_000  # a canvas of 60000 slices: 5.8 MB, a mapping of its own (``HUGE_FROM``)

linux = pytest.mark.skipif(not pages._REUSE, reason="canvases are kept on Linux only")


def _columns(report) -> dict[str, np.ndarray]:
    return {f: np.array(getattr(report.slices, f)) for f in report.slices.ARRAYS}


def _dirty() -> np.ndarray:
    """NaN, +inf and -inf in every row: every count of a canvas written."""
    x = np.random.default_rng(1).standard_normal((ROWS, 5)).astype(np.float32)
    x[:, 0], x[:, 1], x[:, 2] = np.nan, np.inf, -np.inf
    return x


@pytest.fixture
def no_spare(monkeypatch):
    monkeypatch.setattr(pages, "_spare", None)
    gc.collect()


@linux
@pytest.mark.parametrize("by", [0, 1])
def test_a_spare_canvas_is_taken_again_with_its_counts_zero(no_spare, by):
    """Every count of the first scan's canvas was written; the second scan takes its
    mapping (no spare is left) and reports what a scan on fresh memory reports."""
    x = np.random.default_rng(2).standard_normal((ROWS, 5)).astype(np.float32)
    x[7, 3] = np.nan  # one count of its own
    y = x if by == 0 else np.ascontiguousarray(x.T)
    fresh = _columns(fastfinite.scan(y, by=by))
    gc.collect()
    pages._spare = None
    dirty = fastfinite.scan(_dirty() if by == 0 else np.ascontiguousarray(_dirty().T), by=by)
    assert dirty.slices.nan.min() == 1 and pages._spare is None
    del dirty
    gc.collect()
    assert pages._spare is not None  # its mapping, kept
    again = fastfinite.scan(y, by=by)
    assert pages._spare is None  # taken
    for f, col in _columns(again).items():
        np.testing.assert_array_equal(col, fresh[f], f)
    assert again.slices.nan.sum() == 1 and again.counts()["nan"] == 1


@linux
def test_a_report_keeps_its_canvas_from_the_next_scan(no_spare):
    """While a report's columns live, their mapping is not the spare: a later scan writes
    elsewhere, and the report reads what it read."""
    first = fastfinite.scan(_dirty(), by=0)
    before = _columns(first)
    gc.collect()
    assert pages._spare is None
    second = fastfinite.scan(np.zeros((ROWS, 5), np.float32), by=0)
    for f, col in _columns(first).items():
        np.testing.assert_array_equal(col, before[f], f)
    assert not np.shares_memory(first.slices.mean, second.slices.mean)
    mean = first.slices.mean  # a column outlives its report
    del first
    gc.collect()
    assert pages._spare is None
    del mean
    gc.collect()
    assert pages._spare is not None


@linux
def test_a_canvas_past_the_kept_size_is_given_back(no_spare, monkeypatch):
    monkeypatch.setattr(pages, "KEPT_CANVAS_BYTES", 1 << 20)
    fastfinite.scan(_dirty(), by=0)
    gc.collect()
    assert pages._spare is None


@pytest.mark.parametrize("size", [10, 50_000, 300_000])
def test_canvas_rows_are_columns_of_one_buffer_with_counts_zero(no_spare, size):
    """Small canvases are NumPy's; large ones rows of a mapping, each from a huge page."""
    buf = pages.canvas_buffer(size)
    assert buf.shape == (pages.N_ROWS, size) and buf.dtype == np.int64
    assert not buf[pages.COUNT_ROWS].any()
    if size * pages.N_ROWS * 8 >= pages.HUGE_FROM and sys.platform.startswith("linux"):
        unit = pages.HUGE_PAGE if size * 8 >= pages.HUGE_PAGE else mmap.PAGESIZE
        assert buf.strides[0] % unit == 0 and buf.strides[0] - size * 8 < unit
    buf[:] = 7  # every row written: the next canvas must still read zero counts
    del buf
    gc.collect()
    assert not pages.canvas_buffer(size)[pages.COUNT_ROWS].any()


def test_small_and_large_canvases_lend_the_kernels_one_layout(no_spare):
    """The views of a canvas's rows that the kernels take (its count rows, its statistics'
    rows, lent whole) have one numba type whatever the canvas's size: a small canvas and a
    large one call the same compiled kernel (a second one is loaded, or compiled, on its
    first call)."""
    from numba import typeof

    types = set()
    for size in (10, 300_000):
        buf = pages.canvas_buffer(size)
        stats = buf[_SHIFTS : _SHIFTS + 5].view(np.float64)  # as ``kernel_outputs`` lends
        types.add((typeof(buf[pages.COUNT_ROWS]), typeof(stats)))
    assert len(types) == 1, types


@linux
def test_a_canvas_asked_fresh_leaves_the_spare(no_spare):
    """``spare=False`` (a process's first scan, as the benchmarks take it) maps new pages:
    the spare stays for the next scan."""
    fastfinite.scan(_dirty(), by=0)
    gc.collect()
    kept = pages._spare
    assert kept is not None
    buf = pages.canvas_buffer(ROWS, spare=False)
    assert pages._spare is kept and not buf[pages.COUNT_ROWS].any()
