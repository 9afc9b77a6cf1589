"""Dask arrays: a graph scans their blocks where they are computed."""

from __future__ import annotations

import math
from itertools import accumulate
from typing import Any

import numpy as np

from ..blocks import Region, check_dtype
from .base import Source


class DaskArraySource(Source):
    """A ``dask.array.Array``: one region per block (``localize`` computes the ones it reads)."""

    def __init__(self, x: Any, name: str = "dask array"):
        if isinstance(getattr(x, "_meta", None), np.ma.MaskedArray):
            from ..errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"{name} has blocks that are numpy masked arrays: fastfinite scans every "
                "value and does not skip masked ones; scan da.ma.filled(x, value) or "
                "da.ma.getdata(x) (the values as stored, masked ones included)"
            )
        self.dask_array = x
        self.name = name
        self.shape = tuple(int(s) for s in x.shape)
        self.dtype = check_dtype(x.dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize

    def regions(self, budget_bytes: int = 0):
        return block_regions(self.dask_array.chunks)

    def read(self, region: Region) -> np.ndarray:
        return np.asarray(self.dask_array[region].compute())


def block_regions(chunks: tuple[tuple[int, ...], ...]):
    """One region per dask block, in C order."""
    edges = [list(accumulate(ax, initial=0)) for ax in chunks]
    for idx in np.ndindex(*[len(ax) for ax in chunks]):
        yield tuple(slice(e[i], e[i + 1]) for e, i in zip(edges, idx))
