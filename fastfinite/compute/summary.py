"""The mergeable summary of a part of an array, what a scan looks for (``ScanSpec``) and the
per-slice statistics.

``merge`` is associative: counts add, location lists are sorted by C-order flat index and cut
to the cap, and statistics combine by Chan et al.'s pairwise formula. Any chunking and any
reduction tree give the same counts and locations, and statistics equal to rounding.
"""

from __future__ import annotations

import bisect
import math
import threading
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..model import kinds
from ..model.cast_forms import kernel_thresholds
from ..model.stats import chan, scaled_moments
from .blocks import component_dtype
from .pages import COUNT_ROWS, canvas_buffer, slice_numbers

TWIN_MAX = 1 << 16


@dataclass(frozen=True)
class ScanSpec:
    """What a scan looks for, fixed before the first block is read."""

    shape: tuple[int, ...]
    dtype: np.dtype
    cast: tuple[str, ...] = ("float32",)
    max_locations: int = 100
    by: tuple[int, ...] | None = None  # normalized, sorted axes of the per-slice statistics
    z_threshold: float = 10.0
    # blocks of at most this many values, scanned without ``by``, go through the kernel's
    # NumPy twin: loading numba costs more (about half a second, once per process)
    twin_max: int = TWIN_MAX

    @property
    def by_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[a] for a in self.by or ())

    @property
    def kinds(self) -> tuple[str, ...]:
        """Names of the kernel's counter slots; ``""`` for unused target slots."""
        return kinds.slot_names(self.cast)

    @cached_property
    def thresholds(self) -> np.ndarray:
        """The six cast thresholds, in the kernel's dtype for this data."""
        comp = component_dtype(self.dtype)
        source = comp if self.dtype.kind == "c" else self.dtype  # integers keep their range
        return kernel_thresholds(source, comp, self.cast)


@dataclass
class SliceStats:
    """Statistics of the slices a part of the array touches, by flat slice index (sorted)."""

    idx: np.ndarray
    n: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    nan: np.ndarray
    posinf: np.ndarray
    neginf: np.ndarray

    # where the columns sit in a ``SliceCanvas``: (its buffer, first column, its index row),
    # else None
    home: tuple[np.ndarray, int, np.ndarray] | None = field(default=None, repr=False, compare=False)
    # slices finished in their canvas by their kernel (``summarize``): the flagged ones'
    # indices and bits, and how many hold no finite value; their largest |z| is ``spare``
    finished: tuple[np.ndarray, np.ndarray, int] | None = field(
        default=None, repr=False, compare=False
    )
    _made: tuple = field(default=(), repr=False, compare=False)  # the columns ``within`` made

    FIELDS = ("n", "mean", "std", "min", "max", "nan", "posinf", "neginf")

    @classmethod
    def alloc(cls, size: int) -> SliceStats:
        """Uninitialized columns for ``size`` slices, in one allocation: NumPy asks for huge
        pages from 4 MiB on, and a fresh page costs more than the fold that writes it."""
        return cls._columns_of(np.empty((9, size), np.int64), range(9))

    @classmethod
    def _columns_of(cls, cols: np.ndarray, rows, home=None) -> SliceStats:
        """The columns in rows ``rows`` of ``cols`` (int64), in the order idx, ``FIELDS``."""
        out = [cols[i] for i in rows]
        for j in range(2, 6):  # mean, std, min, max
            out[j] = out[j].view(np.float64)
        return cls(*out, home=home)

    @classmethod
    def within(cls, buf: np.ndarray, first: int, stop: int, index: np.ndarray) -> SliceStats:
        """Slices ``first:stop`` as views of the canvas buffer ``buf`` (``CANVAS_ROWS``),
        their indices a view of the canvas's index row ``index``."""
        out = cls._columns_of(buf[:, first:stop], CANVAS_ROWS, (buf, first, index))
        out.idx = index[first:stop]
        out._made = (out.idx, *out.columns())
        return out

    def kernel_outputs(self) -> tuple[np.ndarray, np.ndarray]:
        """For slices lent by a canvas: the kernels' per-slice outputs ``(stats, counts)``
        (``scan_rows``) as views of the canvas, the counts zero (a canvas's count rows start
        zeroed, ``pages.canvas_buffer``, and it lends each slice once):
        ``from_partials(..., into=self)`` finishes them into these columns."""
        buf, first, _ = self.home
        stop = first + len(self.idx)
        counts = buf[COUNT_ROWS, first:stop]
        return buf[_SHIFTS : _SHIFTS + 5, first:stop].view(np.float64), counts

    def spare(self) -> np.ndarray | None:
        """A float64 column per slice that nothing reads any more, for a report's column:
        for finished slices in their canvas, the row of their kernels' shifts (the row is
        written already: no fresh page), else None."""
        if self.home is None or not self._at_home():
            return None
        buf, first, _ = self.home
        return buf[_SHIFTS, first : first + len(self.idx)].view(np.float64)

    @classmethod
    def empty(cls, idx: np.ndarray) -> SliceStats:
        """Slices ``idx`` with no value yet."""
        out = cls.alloc(len(idx))
        out.idx[:] = idx
        for f, v in zip(cls.FIELDS, (0, 0.0, 0.0, math.inf, -math.inf, 0, 0, 0)):
            getattr(out, f).fill(v)
        return out

    def _at_home(self) -> bool:
        """Whether every column is still the view of its canvas ``within`` made (the
        objects themselves: comparing addresses cost a third of a by=0 report's build)."""
        cols = (self.idx, *self.columns())
        return len(self._made) == len(cols) and all(a is b for a, b in zip(self._made, cols))

    def columns(self) -> tuple[np.ndarray, ...]:
        """The arrays, in the order of ``FIELDS`` (the kernels' argument order)."""
        return tuple(getattr(self, f) for f in self.FIELDS)

    def keep_finished(self, where: np.ndarray, flags: np.ndarray, empty: int) -> SliceStats:
        """These slices, finished in their canvas: ``finished`` set from the flagged ones'
        positions among them and bits (``kernels.finish_whole_slices``)."""
        self.finished = (self.idx[where], flags.copy(), int(empty))
        return self

    @classmethod
    def from_partials(cls, idx, length, stats, counts, into=None) -> tuple[SliceStats, tuple, int]:
        """From kernel outputs: per slice ``[shift, s1, s2, min, max]`` (``stats``, 5 rows)
        and NaN/+inf/-inf counts (``counts``, 3 rows), ``length`` values per slice, ``idx``
        sorted. Returns the slices, their totals ``(n, mean, std, min, max, sum)`` and how
        many of them ``rescued`` takes again. ``into``: the slices whose ``kernel_outputs``
        these are, finished in place (each slice's sums are read before its moments are
        written)."""
        m = len(idx)
        finish_slices = _per_slice("finish_slices", m)
        if into is not None:
            *totals, rescue = finish_slices(length, *stats, *counts, into.n, into.mean, into.std)
            return into, tuple(totals), rescue
        n, mean, std = np.empty(m, np.int64), np.empty(m), np.empty(m)
        *totals, rescue = finish_slices(length, *stats, *counts, n, mean, std)
        return cls(idx, n, mean, std, stats[3], stats[4], *counts), tuple(totals), rescue


# rows of a canvas's buffer: idx (unless the canvas shares ``slice_numbers``), then
# ``SliceStats.FIELDS``; the kernels' shifted sums
# (rows 7 to 9) sit between the counts and the extrema, so that ``scan_rows``'s outputs
# are two runs of rows, and its moments are finished into rows of their own
CANVAS_ROWS = (0, 1, 2, 3, 10, 11, 4, 5, 6)
_SHIFTS = 7  # the canvas row of the kernels' shifts, then their two sums


class SliceCanvas:
    """Dense per-slice columns of one array's scan by one axis, lent to its regions in
    runs: a region's kernel writes its slices' statistics straight into their place, and
    runs that end side by side join without a copy (``join_slices``), so 1e6 slices cost
    no gather at the end. A run is lent once: a region whose slices overlap a run lent
    before gets columns of its own, merged as without a canvas."""

    def __init__(self, size: int):
        self.size = size
        self._buf: np.ndarray | None = None  # allocated at the first loan
        self._index: np.ndarray | None = None  # the slices' numbers: shared, or row 0
        self._lent: list[tuple[int, int]] = []  # sorted, disjoint (first, stop)
        self._lock = threading.Lock()

    def lend(self, first: int, count: int) -> SliceStats | None:
        """Slices ``first:first + count`` (``idx`` set, the rest uninitialized), or None
        when some of them were lent before."""
        stop = first + count
        if count < 2 or first < 0 or stop > self.size:
            return None
        with self._lock:
            i = bisect.bisect_left(self._lent, (first, stop))
            if (i and self._lent[i - 1][1] > first) or (
                i < len(self._lent) and self._lent[i][0] < stop
            ):
                return None
            self._lent.insert(i, (first, stop))
            if self._buf is None:
                self._buf = canvas_buffer(self.size)
                shared = slice_numbers(self.size)
                self._index = self._buf[0] if shared is None else shared
            buf, index = self._buf, self._index
        if index.flags.writeable:  # the canvas's own row: each loan numbers its slices
            index[first:stop] = np.arange(first, stop)
        return SliceStats.within(buf, first, stop, index)


def _per_slice(name: str, slices: int):
    """The per-slice kernel ``name`` (``dispatch``): its NumPy twin for a plain scan's one
    row (no numba to load), the Numba kernel for ``by``'s slices once it is ready."""
    from . import dispatch

    return dispatch.pick(name, np.float64, slices == 1)


def rescued(part: SliceStats, values, rows_are_slices: bool = True) -> tuple | None:
    """Slices whose sums overflowed (finite values near the float64 maximum: the kernels
    give them a NaN mean and std), or whose squares fall below float64's normal range
    (magnitudes under ``TINY``, not all equal: the std would lose its digits, down to 0),
    get both again, scaled (``stats.scaled_moments``), from ``values()``, the 2-D values;
    then the totals over all slices are returned, else None."""
    from ..kernels.slices_numpy import rescue_rows, totals  # NumPy: slices that overflowed

    bad = rescue_rows(part.n, part.mean, part.min, part.max)
    if not len(bad):
        return None
    x2 = values()
    for r in bad:
        v = x2[r] if rows_are_slices else x2[:, r]
        part.mean[r], part.std[r] = scaled_moments(v[np.isfinite(v)])
    part.finished = None  # their z and flags are taken again with the rest
    return totals(part.n, part.mean, part.std, part.min, part.max)


def _as_index(idx: np.ndarray):
    """A sorted unique index array as a slice when it is a contiguous run (views are much
    cheaper than gathers and scatters)."""
    if len(idx) and idx[-1] - idx[0] + 1 == len(idx):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def every_slice(stats: SliceStats | None, size: int) -> SliceStats:
    """One run of all ``size`` slices in order: ``stats`` itself when it holds them all,
    sorted, else a new run with its slices in their places and the others empty."""
    if stats is not None and len(stats.idx) == size and (size == 0 or stats.idx[-1] == size - 1):
        return stats
    full = SliceStats.empty(np.arange(size, dtype=np.int64))
    if stats is not None and len(stats.idx):
        i = _as_index(stats.idx)
        for f in SliceStats.FIELDS:
            getattr(full, f)[i] = getattr(stats, f)
    return full


def finished_flags(runs: list[SliceStats], joined: SliceStats, size: int):
    """``(indices, bits, empty)`` of the flagged slices when every slice was finished in
    its canvas (``SliceStats.finished``) and ``joined``, the runs joined, holds all ``size``
    of them in it; else None."""
    if any(p.finished is None for p in runs):
        return None
    if len(joined.idx) != size or joined.spare() is None:
        return None
    at, bits, empty = zip(*(p.finished for p in runs))
    return np.concatenate(at), np.concatenate(bits), sum(empty)


def join_slices(runs: list[SliceStats]) -> SliceStats:
    """One run from runs that are disjoint and in increasing slice order: a view when they
    lie side by side in one canvas, else a copy."""
    if len(runs) == 1:
        return runs[0]
    joined = _side_by_side(runs)
    if joined is not None:
        return joined
    out = SliceStats.alloc(sum(len(r.idx) for r in runs))
    for f in ("idx", *SliceStats.FIELDS):
        np.concatenate([getattr(r, f) for r in runs], out=getattr(out, f))
    return out


def _side_by_side(runs: list[SliceStats]) -> SliceStats | None:
    """The runs as one view of their canvas, when each starts where the one before ends."""
    if runs[0].home is None:
        return None
    buf, first, index = runs[0].home
    stop = first
    for r in runs:
        if r.home is None or r.home[0] is not buf or r.home[1] != stop or not r._at_home():
            return None
        stop += len(r.idx)
    return SliceStats.within(buf, first, stop, index)


def merge_slices(a: list | None, b: list | None, spend: bool = False) -> list | None:
    """Union of two slice sets, each a list of runs of slices (disjoint, in increasing slice
    order). Sets that do not overlap are only listed; where they do, the slices in both
    combine by Chan's formula (``kernels.fold_slices``), ``a``'s first: into ``a``'s own
    arrays with ``spend`` when both hold the same slices (the same bits)."""
    if not a:
        return b
    if not b:
        return a
    if a[-1].idx[-1] < b[0].idx[0] or b[-1].idx[-1] < a[0].idx[0]:
        return a + b if a[-1].idx[-1] < b[0].idx[0] else b + a
    x, y = join_slices(a), join_slices(b)
    same = len(x.idx) == len(y.idx) and (x.idx == y.idx).all()
    if spend and same:  # ``y`` folded into ``x``
        x.finished = None  # more values: its z and flags are taken again
        out, parts = x, (y,)
    else:
        out, parts = SliceStats.empty(x.idx if same else np.union1d(x.idx, y.idx)), (x, y)
    fold_slices = _per_slice("fold_slices", len(x.idx) + len(y.idx))
    for part in parts:
        at = np.arange(len(x.idx)) if out is x else np.searchsorted(out.idx, part.idx)
        fold_slices(at, *part.columns(), *out.columns())
    return [out]


@dataclass
class Summary:
    """Counts, statistics and first locations of a part of an array."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(kinds.N_KINDS, np.int64))
    n: int = 0
    mean: float = 0.0
    std: float = 0.0
    total: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    elements: int = 0
    loc_index: list[np.ndarray] = field(
        default_factory=lambda: [np.empty(0, np.int64) for _ in range(kinds.N_KINDS)]
    )
    loc_value: list[np.ndarray] = field(
        default_factory=lambda: [np.empty(0, np.float64) for _ in range(kinds.N_KINDS)]
    )
    slices: list[SliceStats] | None = None  # runs of slices (``merge_slices``)
    # regions holding a value finding, as (start, stop, count): the map of where problems
    # sit (plots) and what the replay re-reads
    flagged: list = field(default_factory=list)


def merge(a: Summary, b: Summary, cap: int, spend: bool = False) -> Summary:
    """Combine two summaries of disjoint parts; associative, exact for counts and locations.
    With ``spend``, ``a``'s slice statistics may be merged into in place."""
    idx, val = [], []
    for k in range(kinds.N_KINDS):
        if not len(b.loc_index[k]):
            i, v = a.loc_index[k], a.loc_value[k]
        elif not len(a.loc_index[k]):
            i, v = b.loc_index[k], b.loc_value[k]
        else:
            i, v = first_positions(
                np.concatenate([a.loc_index[k], b.loc_index[k]]),
                np.concatenate([a.loc_value[k], b.loc_value[k]]),
                cap,
            )
        idx.append(i)
        val.append(v)
    slices = merge_slices(a.slices, b.slices, spend)
    # ``chan``: ``combine``'s bits on scalars (tests/test_chan.py), without NumPy's calls
    n, mean, std = chan(
        int(a.n), float(a.mean), float(a.std), int(b.n), float(b.mean), float(b.std)
    )
    return Summary(
        counts=a.counts + b.counts,
        n=int(n),
        mean=float(mean),
        std=float(std),
        total=a.total + b.total,
        min=min(a.min, b.min),
        max=max(a.max, b.max),
        elements=a.elements + b.elements,
        loc_index=idx,
        loc_value=val,
        slices=slices,
        flagged=a.flagged + b.flagged,
    )


def merge_all(parts, cap: int) -> Summary:
    """Merge summaries pairwise (a balanced tree keeps rounding low)."""
    parts = list(parts)
    if not parts:
        return Summary()
    while len(parts) > 1:
        nxt = [merge(parts[i], parts[i + 1], cap) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


class PairwiseMerger:
    """Fold summaries as they come, merging equal-sized partial results like a binary counter:
    the tree of ``merge_all`` (and of the Dask engine's reduction), so both engines merge in
    the same order and give the same bits.

    A summary of a whole subtree (``2**level`` regions, recalled from a cache) is added at
    its level, where it takes the place of its regions. With keys (``add(..., key=)``) each
    subtree formed gets the key ``digests.node_key(left, right)`` (the keys a cache holds,
    ``digests.tree_keys``) and is passed to ``on_node(level, key, summary)`` before anything
    spends it."""

    def __init__(self, cap: int, on_node=None):
        self.cap = cap
        self.on_node = on_node
        self._stack: list[tuple[int, Summary, bytes | None]] = []

    def add(self, s: Summary, level: int = 0, key: bytes | None = None) -> None:
        while self._stack and self._stack[-1][0] == level:
            _, top, left = self._stack.pop()
            s = merge(top, s, self.cap, spend=True)
            level += 1
            if left is None or key is None:
                key = None
                continue
            from .digests import node_key  # hashlib: only when a scan has a cache

            key = node_key(left, key)
            if self.on_node is not None:
                self.on_node(level, key, s)
        self._stack.append((level, s, key))

    def result(self) -> Summary:
        out = Summary()
        for _, s, _ in reversed(self._stack):
            out = merge(s, out, self.cap, spend=True)
        return out


def first_positions(
    index: np.ndarray, value: np.ndarray, cap: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique positions (first value kept), cut to ``cap``."""
    if len(index) == 0:
        return index, value
    order = np.argsort(index, kind="stable")
    index, value = index[order], value[order]
    keep = np.ones(len(index), dtype=bool)
    keep[1:] = index[1:] != index[:-1]
    return index[keep][:cap], value[keep][:cap]
