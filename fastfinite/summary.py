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
from .blocks import Block, component_dtype
from .casts import risk_thresholds
from .kinds import BASE_KINDS  # noqa: E402


@dataclass(frozen=True)
class ScanSpec:
    """What a scan looks for, fixed before the first block is read."""

    shape: tuple[int, ...]
    dtype: np.dtype
    cast: tuple[str, ...] = ("float32",)
    max_locations: int = 100

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


def summarize(data: np.ndarray, start: tuple[int, ...], spec: ScanSpec) -> Summary:
    """Scan one region's data (any layout and dtype) whose first element is at ``start``."""
    from . import kernels  # numba loads on the first scan, not on ``import fastfinite``

    block = Block(data, start)
    x = block.x
    cap = spec.max_locations
    thr = spec.thresholds.astype(x.dtype, copy=False)
    counts = np.zeros(kinds.N_KINDS, np.int64)
    stats = np.empty(5, np.float64)
    # complex parts: both parts of one element may hold the same kind
    locs = np.empty((kinds.N_KINDS, cap * block.ncomp), np.int64)
    vals = np.empty((kinds.N_KINDS, cap * block.ncomp), np.float64)
    nlocs = np.zeros(kinds.N_KINDS, np.int64)
    if x.size:
        kernels.scan_block(x, block.xi, thr, counts, stats, locs, vals, nlocs)
    else:
        stats[:] = (0.0, 0.0, 0.0, math.inf, -math.inf)
    s = Summary(counts=counts, elements=x.size // block.ncomp)
    for k in np.flatnonzero(counts):
        pos, val = locs[k, : nlocs[k]], vals[k, : nlocs[k]]
        if counts[k] > nlocs[k] and not block.in_c_order:
            # the first ``cap`` in memory order need not be the first in C order: take all
            pos = np.flatnonzero(_kind_mask(x, k, thr))
            val = x[pos].astype(np.float64)
        s.loc_index[k], s.loc_value[k] = _first(block.to_global(pos, spec.shape), val, cap)
    n = int(x.size - counts[0] - counts[1] - counts[2])
    shift, s1, s2, mn, mx = (float(v) for v in stats)
    s.n, s.min, s.max = n, mn, mx
    if n:
        s.mean = shift + s1 / n
        m2 = s2 - s1 * (s1 / n)
        s.m2 = math.inf if math.isnan(m2) else max(m2, 0.0)  # inf - inf: the squares overflow
        s.total = shift * n + s1
    return s
