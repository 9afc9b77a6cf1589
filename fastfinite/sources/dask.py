"""Dask arrays: a graph scans their blocks where they are computed."""

from __future__ import annotations

import math
from itertools import accumulate
from typing import Any

import numpy as np

from ..compute.blocks import Region, check_dtype
from ..indices import fmt_index
from .base import Source
from .ndarray import DASK_REMEDY, unmasked


class DaskArraySource(Source):
    """A ``dask.array.Array``: one region per block (``localize`` computes the ones it reads)."""

    def __init__(self, x: Any, name: str = "dask array"):
        self.dask_array = x
        self.name = name
        self.shape = tuple(int(s) for s in x.shape)
        self.dtype = check_dtype(x.dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize

    def regions(self, budget_bytes: int = 0):
        return block_regions(self.dask_array.chunks)

    def read(self, region: Region) -> np.ndarray:
        return np.asarray(dask_block(self.dask_array[region].compute(), region, self.name))


def dask_block(block: Any, region: Region | tuple[int, ...], name: str) -> Any:
    """A computed block of a dask array as it can be scanned: a numpy masked array that masks
    something is an error (``ndarray.unmasked``: a block function may return one whatever
    the array's ``_meta`` says), one that masks nothing its values."""
    start = tuple(s.start if isinstance(s, slice) else s for s in region)
    return unmasked(block, f"the block at {fmt_index(start)} of {name}", DASK_REMEDY)


def block_regions(chunks: tuple[tuple[int, ...], ...]):
    """One region per dask block, in C order."""
    edges = [list(accumulate(ax, initial=0)) for ax in chunks]
    for idx in np.ndindex(*[len(ax) for ax in chunks]):
        yield tuple(slice(e[i], e[i + 1]) for e, i in zip(edges, idx))
