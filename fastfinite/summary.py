"""The mergeable per-block summary and the function that fills one from a block.

``merge`` is associative: counts add, location lists are sorted by C-order flat index and cut
to the cap, and statistics combine by Chan et al.'s pairwise formula. Any chunking and any
reduction tree give the same counts and locations, and statistics equal to rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import kinds
from .blocks import Block, component_dtype, memory_view
from .casts import risk_thresholds
from .kinds import BASE_KINDS  # noqa: E402
from .parts import PARALLEL_BLOCK_BYTES, PartedScan


@dataclass(frozen=True)
class ScanSpec:
    """What a scan looks for, fixed before the first block is read."""

    shape: tuple[int, ...]
    dtype: np.dtype
    cast: tuple[str, ...] = ("float32",)
    max_locations: int = 100
    by: tuple[int, ...] | None = None  # normalized, sorted axes of the per-slice statistics
    z_threshold: float = 10.0

    @property
    def by_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[a] for a in self.by or ())

    @property
    def kinds(self) -> tuple[str, ...]:
        """Names of the kernel's counter slots; ``""`` for unused target slots."""
        names = list(BASE_KINDS)
        for slot in range(kinds.N_TARGET_SLOTS):
            if slot < len(self.cast):
                names += [f"overflow:{self.cast[slot]}", f"underflow:{self.cast[slot]}"]
            else:
                names += ["", ""]
        return tuple(names)

    @cached_property
    def thresholds(self) -> np.ndarray:
        """The six cast thresholds, in the kernel's dtype for this data."""
        comp = component_dtype(self.dtype)
        source = comp if self.dtype.kind == "c" else self.dtype  # integers keep their range
        thr = [math.inf, -1.0] * kinds.N_TARGET_SLOTS
        for slot, target in enumerate(self.cast[: kinds.N_TARGET_SLOTS]):
            thr[2 * slot : 2 * slot + 2] = risk_thresholds(source, target)
        return np.array(thr, dtype=np.float64 if comp.itemsize == 8 else np.float32)


@dataclass
class SliceStats:
    """Statistics of the slices a part of the array touches, by flat slice index (sorted)."""

    idx: np.ndarray
    n: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    min: np.ndarray
    max: np.ndarray
    nan: np.ndarray
    posinf: np.ndarray
    neginf: np.ndarray

    FIELDS = ("n", "mean", "m2", "min", "max", "nan", "posinf", "neginf")

    @classmethod
    def from_partials(cls, idx, length, stats, counts) -> tuple[SliceStats, tuple]:
        """From kernel outputs: per slice ``[shift, s1, s2, min, max]`` (``stats``, 5 rows)
        and NaN/+inf/-inf counts (``counts``, 3 rows), ``length`` values per slice. Returns
        the slices and their totals ``(n, mean, m2, min, max, sum)``."""
        m = len(idx)
        if m == 1:  # a plain scan's one row: Python floats, no numba, little call overhead
            return cls._one(idx, length, stats, counts)
        from .kernels import finish_slices  # several slices: ``by``, whose kernels load numba

        n, mean, m2 = np.empty(m, np.int64), np.empty(m), np.empty(m)
        totals = finish_slices(length, stats, counts, n, mean, m2)
        mn, mx = stats[3], stats[4]
        nan, pos, neg = counts[0], counts[1], counts[2]
        if not (idx[1:] > idx[:-1]).all():
            o = np.argsort(idx, kind="stable")
            idx, n, mean, m2, mn, mx = idx[o], n[o], mean[o], m2[o], mn[o], mx[o]
            nan, pos, neg = nan[o], pos[o], neg[o]
        return cls(idx, n, mean, m2, mn, mx, nan, pos, neg), totals

    @classmethod
    def _one(cls, idx, length, stats, counts) -> tuple[SliceStats, tuple]:
        """``from_partials`` for a single slice: ``kernels.finish_slices``'s formulas."""
        c = int(length - counts[0, 0] - counts[1, 0] - counts[2, 0])
        mean = m2 = 0.0
        if c > 0:
            s1 = float(stats[1, 0])
            mean = float(stats[0, 0]) + s1 / c
            v = float(stats[2, 0]) - s1 * (s1 / c)
            m2 = math.inf if math.isnan(v) else max(v, 0.0)  # inf - inf: the squares overflow
        mn, mx = float(stats[3, 0]), float(stats[4, 0])
        out = cls(
            idx,
            np.array([c], np.int64),
            np.array([mean]),
            np.array([m2]),
            stats[3],
            stats[4],
            counts[0],
            counts[1],
            counts[2],
        )
        return out, (c, mean, m2, mn, mx, c * mean)


def _chan(na, mean_a, m2a, nb, mean_b, m2b):
    """Chan et al.'s pairwise combination of (count, mean, M2), vectorized."""
    n = na + nb
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        delta = mean_b - mean_a
        frac = np.where(n > 0, nb / np.maximum(n, 1), 0.0)
        mean = np.where(na == 0, mean_b, np.where(nb == 0, mean_a, mean_a + delta * frac))
        m2 = m2a + m2b + np.where((na > 0) & (nb > 0), delta * delta * na * frac, 0.0)
    return n, mean, np.where(np.isnan(m2), np.inf, m2)


def _as_index(idx: np.ndarray):
    """A sorted unique index array as a slice when it is a contiguous run (views are much
    cheaper than gathers and scatters)."""
    if len(idx) and idx[-1] - idx[0] + 1 == len(idx):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


class DenseSlices:
    """Slice statistics accumulated in place over every slice (the local engine's merger:
    cheaper than growing sparse unions when regions arrive one by one). The eight columns
    share one allocation: a fresh page costs more than the fold writing it, and NumPy asks
    for huge pages from 4 MiB on."""

    def __init__(self, size: int):
        buf = np.zeros(8 * size, np.int64)
        ints = buf[: 4 * size].reshape(4, size)
        floats = buf[4 * size :].view(np.float64).reshape(4, size)  # zeros bits are 0.0
        self.n, self.nan, self.posinf, self.neginf = ints
        self.mean, self.m2, self.min, self.max = floats
        self.min.fill(math.inf)
        self.max.fill(-math.inf)

    def add(self, part: SliceStats) -> None:
        from .kernels import fold_slices

        fold_slices(
            part.idx,
            *(getattr(part, f) for f in SliceStats.FIELDS),
            *(getattr(self, f) for f in SliceStats.FIELDS),
        )

    def stats(self) -> SliceStats:
        idx = np.arange(len(self.n), dtype=np.int64)
        return SliceStats(idx, **{f: getattr(self, f) for f in SliceStats.FIELDS})


def merge_slices(a: SliceStats | None, b: SliceStats | None) -> SliceStats | None:
    """Union of two slice sets; slices present in both combine by Chan's formula."""
    if a is None or len(a.idx) == 0:
        return b
    if b is None or len(b.idx) == 0:
        return a
    if a.idx[-1] < b.idx[0] or b.idx[-1] < a.idx[0]:  # disjoint runs, as with by=0
        first, second = (a, b) if a.idx[-1] < b.idx[0] else (b, a)
        return SliceStats(
            np.concatenate([first.idx, second.idx]),
            **{
                f: np.concatenate([getattr(first, f), getattr(second, f)])
                for f in SliceStats.FIELDS
            },
        )
    idx = np.concatenate([a.idx, b.idx])
    cols = {f: np.concatenate([getattr(a, f), getattr(b, f)]) for f in SliceStats.FIELDS}
    order = np.argsort(idx, kind="stable")
    idx = idx[order]
    cols = {f: v[order] for f, v in cols.items()}
    dup = np.flatnonzero(idx[1:] == idx[:-1])  # pairs (dup, dup + 1): each index twice at most
    if len(dup):
        i, j = dup, dup + 1
        n, mean, m2 = _chan(
            cols["n"][i],
            cols["mean"][i],
            cols["m2"][i],
            cols["n"][j],
            cols["mean"][j],
            cols["m2"][j],
        )
        cols["n"][i] = n
        cols["mean"][i] = mean
        cols["m2"][i] = m2
        cols["min"][i] = np.minimum(cols["min"][i], cols["min"][j])
        cols["max"][i] = np.maximum(cols["max"][i], cols["max"][j])
        for f in ("nan", "posinf", "neginf"):
            cols[f][i] = cols[f][i] + cols[f][j]
        keep = np.ones(len(idx), dtype=bool)
        keep[j] = False
        idx = idx[keep]
        cols = {f: v[keep] for f, v in cols.items()}
    return SliceStats(idx, **cols)


@dataclass
class Summary:
    """Counts, statistics and first locations of a part of an array."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(kinds.N_KINDS, np.int64))
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
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
    slices: SliceStats | None = None
    # regions holding a value finding, as (start, stop, count): the map of where problems
    # sit (plots) and what the replay re-reads
    flagged: list = field(default_factory=list)


def merge(a: Summary, b: Summary, cap: int) -> Summary:
    """Combine two summaries of disjoint parts; associative, exact for counts and locations."""
    n = a.n + b.n
    if a.n == 0:
        mean, m2 = b.mean, b.m2
    elif b.n == 0:
        mean, m2 = a.mean, a.m2
    else:
        delta = b.mean - a.mean
        mean = a.mean + delta * (b.n / n)
        m2 = a.m2 + b.m2 + delta * delta * (a.n * (b.n / n))
        if math.isnan(m2):  # inf - inf in an overflowed mean: the spread is beyond float64
            m2 = math.inf
    idx, val = [], []
    for k in range(kinds.N_KINDS):
        if not len(b.loc_index[k]):
            i, v = a.loc_index[k], a.loc_value[k]
        elif not len(a.loc_index[k]):
            i, v = b.loc_index[k], b.loc_value[k]
        else:
            i, v = _first(
                np.concatenate([a.loc_index[k], b.loc_index[k]]),
                np.concatenate([a.loc_value[k], b.loc_value[k]]),
                cap,
            )
        idx.append(i)
        val.append(v)
    return Summary(
        counts=a.counts + b.counts,
        n=n,
        mean=mean,
        m2=m2,
        total=a.total + b.total,
        min=min(a.min, b.min),
        max=max(a.max, b.max),
        elements=a.elements + b.elements,
        loc_index=idx,
        loc_value=val,
        slices=merge_slices(a.slices, b.slices),
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


def _first(index: np.ndarray, value: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique positions (first value kept), cut to ``cap``."""
    if len(index) == 0:
        return index, value
    order = np.argsort(index, kind="stable")
    index, value = index[order], value[order]
    keep = np.ones(len(index), dtype=bool)
    keep[1:] = index[1:] != index[:-1]
    return index[keep][:cap], value[keep][:cap]


def _kind_mask(x: np.ndarray, kind: int, thr: np.ndarray) -> np.ndarray:
    if kind == kinds.NAN:
        return np.isnan(x)
    if kind == kinds.POSINF:
        return x == np.inf
    if kind == kinds.NEGINF:
        return x == -np.inf
    a = np.abs(x)
    t = thr[kind - 3]
    if (kind - 3) % 2 == 0:
        return (a >= t) & np.isfinite(a)
    return (a <= t) & (a > 0)


def summarize(
    data: np.ndarray, start: tuple[int, ...], spec: ScanSpec, threads: int = 1
) -> Summary:
    """Scan one region's data (any layout and dtype) whose first element is at ``start``;
    a large region in parts on ``threads`` cores when ``scanned_in_parts``."""
    data = np.asarray(data)
    by = spec.by
    parts = None
    if by is None:
        block = Block(data, start)
        x2 = block.x.reshape(1, -1)
        rows_are_slices = True
        if block.x.size <= SMALL_BLOCK:  # NumPy's twin: no numba start-up for small data
            kernel = scan_row_numpy
        elif threads > 1 and block.x.nbytes >= PARALLEL_BLOCK_BYTES:
            parts = PartedScan(block, threads)
            kernel = parts.scan
        else:
            from . import kernels  # numba loads on the first large scan, not on import

            kernel = kernels.scan_rows
    else:
        from . import kernels

        other = tuple(ax for ax in range(data.ndim) if ax not in by)
        cols_view = data.transpose(other + by)
        use_cols = data.dtype.kind != "c" and cols_view.flags.c_contiguous
        order = other + by if use_cols else by + other
        block = Block(data, start, order=order)
        nb = math.prod(data.shape[a] for a in by)
        x2 = block.x.reshape(-1, nb) if use_cols else block.x.reshape(nb, -1)
        kernel = kernels.scan_cols if use_cols else kernels.scan_rows
        rows_are_slices = not use_cols
    x = block.x
    xi2 = block.xi.reshape(x2.shape)
    cap = spec.max_locations
    thr = spec.thresholds.astype(x.dtype, copy=False)
    nsl = x2.shape[0] if rows_are_slices else x2.shape[1]
    counts = np.zeros(kinds.N_KINDS, np.int64)
    sstats = np.empty((5, nsl), np.float64)
    scounts = np.zeros((3, nsl), np.int64)
    # complex parts: both parts of one element may hold the same kind
    locs = np.empty((kinds.N_KINDS, cap * block.ncomp), np.int64)
    vals = np.empty((kinds.N_KINDS, cap * block.ncomp), np.float64)
    nlocs = np.zeros(kinds.N_KINDS, np.int64)
    if x.size:
        kernel(x2, xi2, thr, counts, sstats, scounts, locs, vals, nlocs)
    length = x2.shape[1] if rows_are_slices else x2.shape[0]
    s = Summary(counts=counts, elements=x.size // block.ncomp)
    for k in np.flatnonzero(counts):
        pos, val = locs[k, : nlocs[k]], vals[k, : nlocs[k]]
        if counts[k] > nlocs[k] and not block.in_c_order:
            # the first ``cap`` in memory order need not be the first in C order: take all
            pos = np.flatnonzero(_kind_mask(x, k, thr))
            val = x[pos].astype(np.float64)
        s.loc_index[k], s.loc_value[k] = _first(block.to_global(pos, spec.shape), val, cap)
    if x.size == 0:
        return s
    if by is None:
        idx = np.zeros(1, np.int64)
    elif len(by) == 1:  # the region's slices are a run along the one axis
        idx = np.arange(start[by[0]], start[by[0]] + nsl, dtype=np.int64)
    else:
        local = np.unravel_index(np.arange(nsl), tuple(data.shape[a] for a in by))
        glob = [c + start[a] for c, a in zip(local, by)]
        idx = np.ravel_multi_index(glob, spec.by_shape).astype(np.int64)
    part, totals = SliceStats.from_partials(idx, length, sstats, scounts)
    s.n, s.mean, s.m2, s.min, s.max, s.total = totals
    if by is not None:
        s.slices = part
    if counts.any():
        stop = tuple(int(a + n) for a, n in zip(start, data.shape))
        s.flagged = [(tuple(int(a) for a in start), stop, int(counts.sum()))]
        if parts is not None:
            s.flagged = parts.flagged()
    return s


def scanned_in_parts(data: np.ndarray, by: tuple[int, ...] | None) -> bool:
    """Whether ``summarize(..., threads > 1)`` scans (large) regions of ``data`` in place and
    in parts on several threads: without ``by``, native float32/float64 data whose blocks
    need no copy. (With ``by``, the per-slice work after the kernel is better spread over
    regions on parallel threads.)"""
    return (
        by is None
        and data.dtype.kind == "f"
        and data.dtype.itemsize in (4, 8)
        and data.dtype.isnative
        and memory_view(data)[0].flags.c_contiguous
    )


# Blocks of at most this many values, scanned without ``by``, go through ``scan_row_numpy``:
# loading numba and its cached kernels costs more (about half a second, once per process)
# than NumPy needs for them.
SMALL_BLOCK = 1 << 16


def scan_row_numpy(x2, xi2, thr, counts, rstats, rcounts, locs, vals, nlocs) -> None:
    """The NumPy twin of ``kernels.scan_rows`` for a single row: same outputs (statistics equal
    to rounding), positions recorded in the row's order."""
    x = x2[0]
    cap = locs.shape[1]
    with np.errstate(all="ignore"):
        fin = np.isfinite(x)
        a = np.abs(x)
        masks = [np.isnan(x), x == np.inf, x == -np.inf]
        for slot in range(kinds.N_TARGET_SLOTS):
            masks.append((a >= thr[2 * slot]) & fin)
            masks.append((a <= thr[2 * slot + 1]) & (a > 0))
        for k, m in enumerate(masks):
            c = int(np.count_nonzero(m))
            counts[k] += c
            if c and cap:
                pos = np.flatnonzero(m)[:cap]
                locs[k, : len(pos)] = pos
                vals[k, : len(pos)] = x[pos]
                nlocs[k] = len(pos)
        rcounts[:, 0] = counts[:3]
        y = x[fin]
        if y.size:
            d = y.astype(np.float64) - np.float64(y[0])
            rstats[:, 0] = (y[0], d.sum(), (d * d).sum(), y.min(), y.max())
        else:
            rstats[:, 0] = (0.0, 0.0, 0.0, math.inf, -math.inf)
