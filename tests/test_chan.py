"""Chan's combination (``fastfinite.model.stats``): ``combine``, the elementwise NumPy form
that summaries and reports merge with and the twin of the kernels' loop, gives ``chan``'s
bits element by element (``chan`` is the Python source the kernels compile), on random
inputs and at the edges: means near the float64 maximum of both signs, spreads near it,
tiny spreads (scaled under ``TINY``), subnormals, equal means, empty parts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastfinite.model.stats import TINY, chan, combine

BIG = float(np.finfo(np.float64).max)
EDGES = [0.0, -0.0, 1.0, -1.5, 5e-324, -5e-324, 2.2e-308, TINY, TINY / 3, 1e-200, 1e200, 1e307, 1.3e308, BIG, -BIG, np.nextafter(BIG, 0)]  # fmt: skip
SPREADS = [0.0, 5e-324, 1e-300, TINY / 7, TINY, 1e-20, 1.0, 1e154, 1e200, 1e308, BIG / 2, BIG]


def _bits(v) -> np.ndarray:
    return np.asarray(v, np.float64).view(np.int64)


def _pinned(na, ma, sa, nb, mb, sb) -> None:
    """Every element of ``combine`` equals ``chan`` of its scalars, to the bit."""
    n, mean, std = combine(na, ma, sa, nb, mb, sb)
    for i in range(len(na)):
        args = (int(na[i]), float(ma[i]), float(sa[i]), int(nb[i]), float(mb[i]), float(sb[i]))
        want = chan(*args)
        assert int(n[i]) == want[0], args
        assert _bits(mean[i]) == _bits(want[1]), (args, mean[i], want[1])
        assert _bits(std[i]) == _bits(want[2]), (args, std[i], want[2])


def test_every_edge_pair():
    """All pairs of edge means and spreads, with counts from empty to 2**40."""
    rng = np.random.default_rng(1)
    ms = np.array(EDGES)
    ss = np.array(SPREADS)
    grid = np.array(np.meshgrid(np.arange(len(ms)), np.arange(len(ms)), np.arange(len(ss)), np.arange(len(ss)))).reshape(4, -1)  # fmt: skip
    size = grid.shape[1]
    counts = np.array([0, 1, 2, 3, 1000, 2**40])
    na, nb = counts[rng.integers(0, len(counts), size)], counts[rng.integers(0, len(counts), size)]  # fmt: skip
    ma, mb, sa, sb = ms[grid[0]], ms[grid[1]], ss[grid[2]], ss[grid[3]]
    n, mean, std = combine(na, ma, sa, nb, mb, sb)
    # the scaled path and the opposite-sign path are taken, so they are what is pinned
    with np.errstate(all="ignore"):
        assert ((np.abs(mb - ma) == np.inf) & (na > 0) & (nb > 0)).any()
    assert ((std < TINY) & (std > 0)).any() and (std > 1e300).any()
    _pinned(na, ma, sa, nb, mb, sb)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 400))
def test_random_inputs(seed, size):
    """Random counts, and means and spreads of random magnitudes from 1e-320 to 1e308."""
    rng = np.random.default_rng(seed)
    na, nb = rng.integers(0, 3, size) * rng.integers(1, 10**9, size), rng.integers(0, 3, size) * rng.integers(1, 10**9, size)  # fmt: skip

    def magnitude():
        return 10.0 ** rng.uniform(-320, 308, size)

    ma, mb = rng.standard_normal(size) * magnitude(), rng.standard_normal(size) * magnitude()
    near = rng.random(size) < 0.3  # near-equal means, tiny spreads
    mb[near] = ma[near] * (1 + 1e-15)
    sa, sb = magnitude() * rng.random(size), magnitude() * rng.random(size)
    _pinned(na, ma, sa, nb, mb, sb)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((3, BIG, 0.0), (5, -BIG, 0.0)),  # the means' difference overflows
        ((2, 1e308, 1e308), (2, -1e308, 1e308)),  # the squares overflow: scaled
        ((7, 1.0, 1e-300), (9, 1.0, 3e-300)),  # the squares underflow: scaled
        ((0, 0.0, 0.0), (4, 2.0, 0.5)),  # an empty first part
        ((4, 2.0, 0.5), (0, 0.0, 0.0)),  # an empty second part
        ((0, 1.0, 2.0), (0, 3.0, 4.0)),  # both empty: the first
    ],
)
def test_scalars_give_chans_bits(a, b):
    """On scalars (0-d results), ``combine`` gives ``chan``'s answer."""
    n, mean, std = combine(*a, *b)
    want = chan(*a, *b)
    assert int(n) == want[0]
    assert _bits(mean) == _bits(want[1]) and _bits(std) == _bits(want[2])
    assert np.isfinite(std) or not np.isfinite(want[2])
