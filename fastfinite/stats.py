"""Chan et al.'s pairwise combination of (count, mean, M2): its one Python form. The kernels
hold its Numba twin (``kernels.fold_slices``), and the twin test compares the two."""

from __future__ import annotations

import numpy as np


def chan(na, mean_a, m2a, nb, mean_b, m2b):
    """``(n, mean, M2)`` of two disjoint parts, elementwise over arrays or on scalars (0-d
    results). A part without values leaves the other as it is; a spread beyond float64
    (``inf - inf`` in the mean) gives an infinite M2."""
    na, nb = np.asarray(na), np.asarray(nb)
    n = na + nb
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        delta = np.subtract(mean_b, mean_a)
        frac = np.where(n > 0, nb / np.maximum(n, 1), 0.0)
        mean = np.where(na == 0, mean_b, np.where(nb == 0, mean_a, mean_a + delta * frac))
        m2 = np.add(m2a, m2b) + np.where((na > 0) & (nb > 0), delta * delta * na * frac, 0.0)
    return n, mean, np.where(np.isnan(m2), np.inf, m2)
