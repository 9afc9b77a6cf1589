"""xarray DataArrays and Datasets (the optional extra ``xarray``).

Regions follow the data's chunks: dask chunks when the variable is dask-backed, else the
storage chunks the backend reports (``encoding["chunks"]`` for Zarr, ``"chunksizes"`` for
netCDF/HDF5), else C-order slabs. Reads go through xarray's own lazy indexing, so a region
is all that is loaded. Locations also get coordinate labels.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..compute.blocks import Region, check_dtype, plan_regions
from .base import Source
from .chunked import ChunkGrid
from .dask import block_regions


class XarraySource(Source):
    """One ``xarray.DataArray`` (or a Dataset's data variable)."""

    def __init__(self, da: Any, name: str | None = None):
        self.da = da
        self.variable = da.variable
        self.name = name or str(da.name or "DataArray")
        self.shape = tuple(int(s) for s in da.shape)
        self.dtype = check_dtype(da.dtype, self.name)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self.in_memory = isinstance(self.variable._data, np.ndarray)
        self.reads_in_tasks = not self.in_memory  # else a graph carries the blocks themselves
        self.dims = tuple(da.dims)
        chunks = da.chunks
        self.dask_array = da.data if chunks else None
        enc = da.encoding
        storage = enc.get("chunks") or enc.get("chunksizes") or enc.get("preferred_chunks")
        if isinstance(storage, dict):
            storage = tuple(storage.get(d, n) for d, n in zip(self.dims, self.shape))
        self.storage = (
            ChunkGrid(self.shape, tuple(storage))
            if storage and len(storage) == len(self.shape)
            else None
        )

    def regions(self, budget_bytes: int) -> Iterator[Region]:
        if self.dask_array is not None:
            return block_regions(self.dask_array.chunks)
        if self.storage is not None:
            return self.storage.regions(self.dtype.itemsize, budget_bytes)
        return plan_regions(
            self.shape, tuple(range(len(self.shape))), budget_bytes // self.dtype.itemsize
        )

    def read(self, region: Region) -> np.ndarray:
        return np.asarray(self.variable[region].values)

    def labels(self, index: tuple[int, ...]) -> dict[str, Any]:
        """Coordinate labels of one position, for the dimensions that have an index."""
        out = {}
        for dim, i in zip(self.dims, index):
            if dim in self.da.coords and self.da.coords[dim].ndim == 1:
                out[dim] = coordinate_label(self.da.coords[dim].values[i])
        return out

    def labels_token(self):
        """The coordinates ``labels`` reads: those of a dimension, one value per position."""
        from dask.base import normalize_token

        coords = self.da.coords
        return [(d, normalize_token(coords[d].values)) for d in self.dims
                if d in coords and coords[d].ndim == 1]  # fmt: skip


def coordinate_label(v: Any) -> Any:
    """A coordinate value as the user sees it in ``coords[dim].values``: numbers as Python
    numbers, dates and durations as ``numpy.datetime64`` / ``timedelta64`` (``.item()``
    would turn nanosecond ones into integers; JSON writes them as ISO text), other objects
    (cftime dates, text) as they are."""
    if isinstance(v, (np.datetime64, np.timedelta64)):
        return v
    return v.item() if isinstance(v, np.generic) else v


def dataset_variables(ds: Any) -> list[tuple[str, Any]]:
    """The data variables of a Dataset as ``(name, factory)``."""
    return [
        (str(name), lambda v=ds[name], n=str(name): XarraySource(v, n)) for name in ds.data_vars
    ]
