"""The memory a scan's per-slice columns take: the canvas's mapping, the slice numbers every
canvas shares, and the spare canvas mapping a process keeps for its next scan.

A by=0 scan of (1e6, 100) float32 writes six rows of 1e6 float64: 48 MB of fresh pages
whose zeroing by the kernel cost as much as a fifth of the plain scan. Freed memory under
32 MiB comes back to NumPy from glibc's heap, used; a canvas's mapping did not, so it is
kept here once its report is gone (``MADV_FREE``: the kernel takes its pages back when
memory runs short), and the next canvas takes it with its count rows zeroed.
"""

from __future__ import annotations

import mmap
import sys
import threading
import weakref

import numpy as np

HUGE_FROM = 1 << 22  # bytes from which NumPy, too, asks for huge pages
HUGE_PAGE = 1 << 21  # a canvas's rows of 2 MiB or more start on huge pages of their own
KEPT_NUMBERS = 1 << 22  # slice numbers a process keeps for its next scans (32 MiB)
KEPT_CANVAS_BYTES = 1 << 28  # the largest canvas mapping a process keeps for its next scan
N_ROWS = 12  # the rows of a canvas's buffer (``summary.CANVAS_ROWS`` names them)
COUNT_ROWS = slice(4, 7)  # the rows a canvas lends zeroed: its counts of NaN and infinities

# only Linux promises zeros where MADV_DONTNEED gave private anonymous pages back
_REUSE = sys.platform.startswith("linux") and hasattr(mmap, "MADV_FREE")
_numbers = np.arange(0, dtype=np.int64)
_spare: mmap.mmap | None = None
_spare_lock = threading.RLock()  # ``_keep`` runs where a collection frees a canvas


def slice_numbers(size: int) -> np.ndarray | None:
    """``0, 1, ...``: at least ``size`` of them, read-only, shared by every canvas of up to
    ``KEPT_NUMBERS`` slices, so that their index rows cost no page from the second scan on
    (1e6 slices: 8 MB of fresh pages each scan); None above that."""
    global _numbers
    if size > KEPT_NUMBERS:
        return None
    have = _numbers
    if len(have) < size:
        have = np.arange(min(max(size, 2 * len(have)), KEPT_NUMBERS), dtype=np.int64)
        have.flags.writeable = False
        _numbers = have  # threads that grow it at once each get numbers that are right
    return have


def _mapping(nbytes: int) -> mmap.mmap | None:
    """A private anonymous mapping asked for huge pages, or None without POSIX mmap."""
    private = getattr(mmap, "MAP_PRIVATE", None)
    if private is None:  # Windows
        return None
    m = mmap.mmap(-1, nbytes, flags=private | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        m.madvise(mmap.MADV_HUGEPAGE)
    return m


def canvas_buffer(size: int, spare: bool = True) -> np.ndarray:
    """The int64 buffer of a canvas of ``size`` slices, ``N_ROWS`` rows: those of
    ``COUNT_ROWS`` zero, the others as a former canvas left them (each is written before it
    is read). A large one is a mapping whose rows start on pages of their own (rows of 2 MiB
    or more on huge pages): the spare one when it is large enough and ``spare`` (its count
    rows given back to the kernel, so that they read zero and cost a page only where written
    again), else a new one, whose pages are zeroed as they are first written (as a process's
    first scan takes it); when the buffer and every view of it are gone, its mapping becomes
    the spare."""
    if N_ROWS * size * 8 < HUGE_FROM:
        return _small(size)
    unit = HUGE_PAGE if size * 8 >= HUGE_PAGE else mmap.PAGESIZE  # short rows share one
    pitch = -(-size * 8 // unit) * unit
    need = N_ROWS * pitch
    m = _take_spare(need) if spare else None
    if m is not None:  # Linux: the pages given back read zero when next touched
        rows = COUNT_ROWS
        m.madvise(mmap.MADV_DONTNEED, rows.start * pitch, (rows.stop - rows.start) * pitch)
    else:
        m = _mapping(need)
        if m is None:
            return _small(size)
    whole = np.frombuffer(m, np.int64, need // 8)
    weakref.finalize(whole, _keep, m)
    return whole.reshape(N_ROWS, pitch // 8)[:, :size]


def _small(size: int) -> np.ndarray:
    """A canvas buffer in NumPy's memory, zeroed, its rows one value further apart than
    they are long, as a mapping's rows are: the views a kernel takes of several rows (the
    count rows) are then never contiguous, so a small canvas and a large one call the same
    compiled kernel, not two (each loaded, or on a fresh cache compiled, on its first
    call: a large by=0 scan of a store took 50 ms more for it in a process whose first
    by=0 scan was small)."""
    return np.zeros((N_ROWS, size + 1), np.int64)[:, :size]


def _take_spare(need: int) -> mmap.mmap | None:
    """The spare mapping when it holds ``need`` bytes (it is then no longer the spare)."""
    global _spare
    with _spare_lock:
        m = _spare
        if m is None or len(m) < need:
            return None
        _spare = None
        return m


def _keep(m: mmap.mmap) -> None:
    """Keep a canvas's mapping, its pages lazily given back, as the spare (replacing the
    one before, which is then unmapped), when it is at most ``KEPT_CANVAS_BYTES``."""
    global _spare
    if len(m) > KEPT_CANVAS_BYTES or not _REUSE:
        return
    try:
        m.madvise(mmap.MADV_FREE)
    except OSError:  # a kernel before 4.5: not kept
        return
    with _spare_lock:
        _spare = m
