"""The opener tables of ``open_source``: every kind of input is recognized by its own row,
and no row above it takes it over (a memmap is an ndarray, a list of paths is a list, a
tensor may have ``__array__``); each opens as its adapter, and an input that no row takes
is an error naming its type.

Part: ``fastfinite/sources/open.py``.
"""

from __future__ import annotations

import tarfile

import dask.array as da
import h5py
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import xarray as xr
import zarr

from fastfinite import SourceError
from fastfinite.options import ScanOptions
from fastfinite.sources.dask import DaskArraySource
from fastfinite.sources.hdf5 import H5Source
from fastfinite.sources.ndarray import ArraySource
from fastfinite.sources.open import OBJECT_OPENERS, PATH_OPENERS, open_source
from fastfinite.sources.shards import ShardSet
from fastfinite.sources.tables import TableColumns
from fastfinite.sources.xarray import XarraySource
from fastfinite.sources.zarr import ZarrSource

X = np.arange(6.0).reshape(2, 3)


class Tensor:
    """What JAX, PyTorch or CuPy hand over: DLPack, and no NumPy base class."""

    def __init__(self, a: np.ndarray):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def _first_row(table, data) -> str:
    return next(row.kind for row in table if row.recognizes(data))


@pytest.fixture
def objects(tmp_path):
    """``{row kind: (input, what open_source gives)}`` for every row of OBJECT_OPENERS."""
    np.save(tmp_path / "x.npy", X)
    memmap = np.load(tmp_path / "x.npy", mmap_mode="r")
    zarr.save_array(str(tmp_path / "a.zarr"), X)
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("x", data=X)
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["x"] = X
    h5 = h5py.File(tmp_path / "f.h5", "r")
    source = ArraySource(X)
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, np.nan]})
    yield {
        "a source": (source, source),
        "a path": (str(tmp_path / "x.npy"), ArraySource),
        "a list of paths: a shard set": ([str(tmp_path / "x.npy")], ShardSet),
        "a dict of arrays, nested too": ({"w": X, "b": {"c": X}}, list),
        "a Zarr store": (zarr.storage.LocalStore(str(tmp_path / "a.zarr")), ZarrSource),
        "a NumPy array or memmap": (memmap, ArraySource),
        "a Dask array": (da.from_array(X, chunks=1), DaskArraySource),
        "a Zarr array": (zarr.open_array(str(tmp_path / "a.zarr"), mode="r"), ZarrSource),
        "a Zarr group": (group, list),
        "an HDF5 dataset": (h5["x"], H5Source),
        "an HDF5 group or file": (h5, list),
        "an xarray DataArray": (xr.DataArray(X), XarraySource),
        "an xarray Dataset": (xr.Dataset({"v": (("a", "b"), X)}), list),
        "a pandas DataFrame": (frame, TableColumns),
        "a pandas Series": (frame["b"], ArraySource),
        "a tensor (__dlpack__)": (Tensor(X), ArraySource),
        "an array-like or a number": ([[1.0, np.inf]], ArraySource),
    }
    h5.close()


def test_every_object_kind_is_taken_by_its_own_row(objects):
    assert [row.kind for row in OBJECT_OPENERS] == list(objects)
    for kind, (data, _) in objects.items():
        assert _first_row(OBJECT_OPENERS, data) == kind, kind


def test_every_object_kind_opens_as_its_adapter(objects):
    for kind, (data, opened) in objects.items():
        target = open_source(data, ScanOptions())
        if isinstance(opened, type):
            assert isinstance(target, opened), kind
        else:
            assert target is opened
    memmap = objects["a NumPy array or memmap"][0]
    assert open_source(memmap).name == memmap.filename
    assert np.array_equal(open_source(Tensor(X)).read((slice(0, 2), slice(0, 3))), X)


def test_an_object_no_row_takes_names_its_type():
    class Opaque:
        pass

    with pytest.raises(SourceError) as e:
        open_source(Opaque())
    assert str(e.value) == (
        f"do not know how to scan an object of type {__name__}."
        "test_an_object_no_row_takes_names_its_type.<locals>.Opaque"
    )


def test_every_path_kind_is_taken_by_its_own_row(tmp_path):
    np.save(tmp_path / "x.npy", X)
    with tarfile.open(tmp_path / "s.tar", "w") as t:
        t.add(tmp_path / "x.npy", "x.npy")
    table = pa.table({"a": [1.0, 2.0]})
    feather.write_feather(table, tmp_path / "t.arrow")
    pq.write_table(table, tmp_path / "t.parquet")
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["x"] = X
    (tmp_path / "set").mkdir()
    np.save(tmp_path / "set" / "y.npy", X)
    paths = {
        "a glob: a shard set": (str(tmp_path / "*.npy"), ShardSet),
        "an array or checkpoint file (files.OPENERS)": (str(tmp_path / "x.npy"), ArraySource),
        "a tar: a shard set": (str(tmp_path / "s.tar"), ShardSet),
        "an Arrow file": (str(tmp_path / "t.arrow"), TableColumns),
        "a directory": (str(tmp_path / "set"), ShardSet),
        "a Parquet file": (str(tmp_path / "t.parquet"), TableColumns),
        "an HDF5 file, or a dataset or group in one": (f"{tmp_path / 'f.h5'}:/x", H5Source),
    }
    assert [row.kind for row in PATH_OPENERS] == list(paths)
    for kind, (path, opened) in paths.items():
        first = _first_row(PATH_OPENERS, path)
        # a directory is asked first whether it is a sharded checkpoint (it is not: passed on)
        assert first == (kind if kind != "a directory" else PATH_OPENERS[1].kind), kind
        assert isinstance(open_source(path, ScanOptions()), opened), kind
    zarr.save_array(str(tmp_path / "a.zarr"), X)  # no row: Zarr, as every URL
    assert not any(row.recognizes(str(tmp_path / "a.zarr")) for row in PATH_OPENERS[2:])
    assert isinstance(open_source(str(tmp_path / "a.zarr")), ZarrSource)
