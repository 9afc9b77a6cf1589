"""Variance anomalies: what will go wrong when each slice is standardized,
``(x - mean) / (std + eps)``, predicted from the one-pass statistics alone."""

from __future__ import annotations

import numpy as np

from ..compute.limits import EPS64, overflow_thresholds
from ..compute.pools import collector_paused
from ..indices import fmt_index
from ..model.casts import TARGETS
from ..model.kinds import slice_kinds, slice_message
from .model import findings_of


def slice_findings(
    slices,
    dtypes: tuple[str, ...],
    z_threshold: float,
    eps: float = EPS64,
    limit: int | None = None,
    threads: int | None = None,
    flagged: tuple[np.ndarray, np.ndarray] | None = None,
):
    """Findings per slice, in slice order then kind order (``limit`` findings at most).
    ``eps``: the rounding unit of the near-zero-variance bound (see ``rounding_eps``);
    ``threads``: at most this many cores (all by default); ``flagged``: the flagged slices'
    flat indices (increasing) and bits, when the scan found them already
    (``kernels.finish_whole_slices``)."""
    kinds = slice_kinds(dtypes)
    count, mean, std, max_z, nan, pos, neg = (
        np.ascontiguousarray(a).reshape(-1)
        for a in (
            slices.count,
            slices.mean,
            slices.std,
            slices.max_z,
            slices.nan,
            slices.posinf,
            slices.neginf,
        )
    )
    if flagged is not None:
        at, bits = flagged
    else:
        at, bits = _flagged(
            (count, mean, std, max_z, nan, pos, neg), dtypes, z_threshold, eps, threads
        )
    if limit is not None:  # each flagged slice gives a finding at least
        at, bits = at[:limit], bits[:limit]
    if not len(at):
        return []
    # Made kind by kind, in bulk: a table with a NaN feature flags every sample (1e6
    # findings). A slice's findings follow those of the slices before it, in kind order:
    # the finding of bit b of slice j goes to start[j] plus the bits of j below b.
    nkinds = _ones(bits, len(kinds))
    start = np.cumsum(nkinds) - nkinds
    size = int(nkinds.sum()) if limit is None else min(int(nkinds.sum()), limit)
    wheres = list(zip(*(c.tolist() for c in np.unravel_index(at, slices.count.shape))))
    texts = _where_texts(wheres, at, slices.names)
    lo, hi = (np.ascontiguousarray(a).reshape(-1) for a in (slices.min, slices.max))
    cols = {
        "count": count, "mean": mean, "std": std, "nan": nan, "posinf": pos, "neginf": neg,
        "max_z": max_z, "min": lo, "max": hi,
    }  # fmt: skip
    out: list = [None] * size
    with collector_paused():  # 1e6 findings (a table with a NaN feature): no cycles
        for b, kind in enumerate(kinds):
            js = np.flatnonzero((bits >> b) & 1)
            places = start[js] + _ones(bits[js], b)
            js, places = js[places < size], places[places < size]
            if not len(js):
                continue
            jl = js.tolist()
            said = _messages(kind, [texts[j] for j in jl], _Gather(cols, at[js]), z_threshold)
            made = findings_of(kind, [wheres[j] for j in jl], said)
            first = int(places[0])
            if places[-1] - first == len(places) - 1:  # in a run: one kind per slice, mostly
                out[first : first + len(made)] = made
            else:
                for p, f in zip(places.tolist(), made):
                    out[p] = f
    return out


def _ones(bits: np.ndarray, below: int) -> np.ndarray:
    """How many of the bits ``0 .. below - 1`` each element of ``bits`` has set."""
    n = np.zeros(len(bits), np.int64)
    for b in range(below):
        n += (bits >> b) & 1
    return n


def _where_texts(wheres: list[tuple[int, ...]], at: np.ndarray, names) -> list[str]:
    """How messages name each slice: its index as Python writes a tuple (``fmt_index``),
    then its label when the slices have names."""
    if len(wheres) and len(wheres[0]) == 1:
        texts = [f"({i},)" for i in at.tolist()]  # fmt_index of (i,), 1e6 times at once
    else:
        texts = [fmt_index(w) for w in wheres]
    if names:
        texts = [f"{t} ({names[i]!r})" for t, i in zip(texts, at.tolist())]
    return texts


class _Gather:
    """The statistics of the slices at ``at`` that a kind's messages quote (``cols``: the
    report's columns, flat), each column gathered and made Python numbers only when asked
    for; ``"total"`` and ``"m2"`` are what the sum and the sum of squares come to."""

    def __init__(self, cols: dict[str, np.ndarray], at: np.ndarray):
        self.cols, self.at = cols, at

    def __call__(self, name: str) -> list:
        if name in ("total", "m2"):
            n, m, sd = (self.cols[c][self.at] for c in ("count", "mean", "std"))
            with np.errstate(over="ignore", invalid="ignore"):
                return (m * n if name == "total" else sd * sd * n).tolist()
        return self.cols[name][self.at].tolist()


def _flagged(cols, dtypes, z_threshold, eps, threads) -> tuple[np.ndarray, np.ndarray]:
    """``kernels.slice_flags`` over the report's columns ``cols`` (1-D, in its argument
    order), in parts on ``threads`` cores: the flagged slices' indices and bits."""
    from ..compute import dispatch
    from ..compute.parts import in_parts

    size = len(cols[0])
    slice_flags = dispatch.pick("slice_flags", np.float64, size == 1)
    # pages of these are touched only where a part flags slices
    at, bits = np.empty(size, np.int64), np.empty(size, np.int64)
    thresholds, limits = overflow_thresholds(dtypes), (float(eps), float(z_threshold))
    found: dict[int, int] = {}  # part's first slice -> how many of its slices it flagged

    def flag(a: int, b: int) -> None:
        found[a] = slice_flags(*(c[a:b] for c in cols), *limits, thresholds, at[a:b], bits[a:b])

    in_parts(flag, size, threads)
    parts = [slice(a, a + found[a]) for a in sorted(found)]
    at = np.concatenate([at[p] + p.start for p in parts])
    return at, np.concatenate([bits[p] for p in parts])


def _messages(kind: str, w: list[str], v: _Gather, z_threshold: float) -> list[str]:
    """The messages of findings of ``kind`` about slices named ``w`` (``_where_texts``),
    quoting their statistics ``v``: its message in the table of kinds
    (``kinds.slice_message``), each field a column of ``v`` but the slice's text ``s``,
    ``t``, ``t_max`` and ``z_threshold``, written in once."""
    t = kind.partition(":")[2]
    given = {"t": t, "t_max": TARGETS[t].max if t else None, "z_threshold": z_threshold}
    say, fields = slice_message(kind, given)
    return list(map(say, *(w if f == "s" else v(f) for f in fields)))
