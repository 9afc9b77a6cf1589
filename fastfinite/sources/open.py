"""Any input to a source: ``open_source`` opens it by the first row of an opener table that
recognizes it (``OBJECT_OPENERS`` by type, ``PATH_OPENERS`` by a path's glob, suffix or
directory, a URL or any other path as Zarr), and ``group_name`` names the inputs that open
as groups. To add an input kind: one row, above the rows that would take it over; its
opener imports its reader (zarr, h5py, pandas...) inside."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from ..compute.pools import collector_paused
from ..errors import SourceError
from ..options import ScanOptions
from . import dask, dlpack, hdf5
from .base import Source, of_type, reader_errors
from .files import OPENERS, open_file, suffix_of
from .ndarray import ArraySource, as_raw_dtype
from .walk import ARROW_SUFFIXES, PARQUET_SUFFIXES, TAR_SUFFIXES, is_zarr_store, walk

STORES = ("FsspecStore", "LocalStore", "ZipStore", "ObjectStore", "MemoryStore")

Target = Any  # a Source, or [(path, factory), ...] for a group (``tables.TableColumns``)


def open_source(data: Any, options: ScanOptions | None = None, name: str | None = None) -> Target:
    """A source for ``data``, or ``[(path, factory), ...]`` for a group of arrays; URLs are
    opened with ``options``' storage options, concurrency and timeout.

    Accepts numpy arrays and memmaps, dask arrays, ``.npy`` paths, Zarr arrays and groups and
    paths or URLs to them, h5py datasets and groups and ``"file.h5:/dataset"`` paths, xarray
    DataArrays and Datasets, pandas DataFrames and Series, Parquet files and datasets,
    tensors of any framework (``__dlpack__``, ``__array__``), checkpoints (``.safetensors``
    and their ``*.index.json`` or its directory, ``.gguf``, ``.npz``, PyTorch ``.pt``,
    ``.pth``, ``.bin``: one member per tensor, ``files.open_file``) and dicts (nested too)
    of arrays, keyed ``"layers.0.w"``.

    Whatever a reader raises while the input or a member of it is opened (h5py, zarr,
    pandas, pyarrow...) is a ``SourceError`` naming the input and the member
    (``reader_errors``): ``name``, ``group_name(data)`` when the caller has it already.
    """
    name = group_name(data) if name is None else name
    with reader_errors(name):
        target = _open(data, options)
    if isinstance(target, list):  # each member opens later, alone: its errors name it
        own = getattr(target, "files", {})  # a set's .npy files: their factories name them
        if len(own) < len(target):
            with collector_paused():  # a set of 100,000 files: as many factories, no cycle
                target[:] = named_members(target, name, own)
    return target


def named_members(members: list, name: str, own=()) -> list:
    """``(path, factory)`` of ``members``, each factory's errors naming the input ``name``
    and the member (``reader_errors``), but those of ``own`` (which name themselves)."""
    return [(path, factory if path in own else _named(factory, name, path)) for path, factory in members]  # fmt: skip


def _named(factory: Callable[[], Any], name: str, member: str) -> Callable[[], Any]:
    def opened():
        with reader_errors(name, member):
            return factory()

    return opened


def is_path_list(data: Any) -> bool:
    """A non-empty list or tuple of paths (``str`` or ``os.PathLike``)."""
    return (
        isinstance(data, (list, tuple))
        and bool(data)
        and all(isinstance(p, (str, os.PathLike)) for p in data)
    )


def list_name(paths: list) -> str:
    """The name of a list of paths: their common folder and how many they are."""
    try:
        common = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])
    except ValueError:
        common = "?"
    return f"{common} ({len(paths)} paths)"


class Opener(NamedTuple):
    """One row of an opener table: what it opens, how such an input is recognized
    (``recognizes(data)``: by its type, its suffix, what a directory holds...) and the
    function that opens it, ``open(data, options)``. The rows are asked in order, so a row
    that recognizes more (an array-like) stands below the rows it must not take over."""

    kind: str
    recognizes: Callable[[Any], bool]
    open: Callable[[Any, Any], Target]


def _of(module: str, *names: str) -> Callable[[Any], bool]:
    """Recognizes an object by its class's package and names (``base.of_type``): the
    package is never imported to ask."""
    return lambda data: of_type(data, module, *names)


def _path(data: Any, options: ScanOptions | None) -> Target:
    return _open_path(os.fspath(data), options or ScanOptions())


def _path_list(data: Any, options: ScanOptions | None) -> Target:
    from .shards import open_list

    return open_list(list(data), options or ScanOptions())


def _dict(data: dict, options: ScanOptions | None) -> Target:
    from .tensors import dict_members

    return dict_members(data, options, _open)


def _zarr_store(store: Any, options: ScanOptions | None) -> Target:
    from .zarr import open_store

    return open_store(store)


def _ndarray(array: np.ndarray, options: ScanOptions | None) -> Target:
    name = getattr(array, "filename", None) or ""  # a memmap's file
    if options is not None and options.raw_dtype:
        array = as_raw_dtype(array, options.raw_dtype, name or "the array")
    return ArraySource(array, name=name)


def _dask_array(array: Any, options: ScanOptions | None) -> Target:
    return dask.DaskArraySource(array)


def _zarr_array(array: Any, options: ScanOptions | None) -> Target:
    from .zarr import ZarrSource

    return ZarrSource(array)


def _zarr_group(group: Any, options: ScanOptions | None) -> Target:
    from .zarr import array_name, group_members

    return group_members(group, array_name(group))


def _h5_dataset(dataset: Any, options: ScanOptions | None) -> Target:
    return hdf5.H5Source.from_dataset(dataset)


def _h5_group(group: Any, options: ScanOptions | None) -> Target:
    return hdf5.group_datasets(group)


def _data_array(array: Any, options: ScanOptions | None) -> Target:
    from .xarray import XarraySource

    return XarraySource(array)


def _dataset(dataset: Any, options: ScanOptions | None) -> Target:
    from .xarray import dataset_variables

    return dataset_variables(dataset)


def _dataframe(frame: Any, options: ScanOptions | None) -> Target:
    from .tables import dataframe_columns

    return dataframe_columns(frame)


def _series(series: Any, options: ScanOptions | None) -> Target:
    from .tables import series_source

    return series_source(series)


def _tensor(tensor: Any, options: ScanOptions | None) -> Target:
    """JAX, PyTorch, CuPy...: in place on the CPU; a device's tensor copied when asked."""
    off_host = dlpack.device_of(tensor)[0] not in dlpack.HOST_DEVICES
    if off_host and options is not None and options.device_copy:
        return dlpack.DeviceSource(tensor)
    return ArraySource(dlpack.host_array(tensor))


def _is_array_like(data: Any) -> bool:
    scalars = (list, tuple, int, float, complex, bool, np.generic)
    return isinstance(data, scalars) or hasattr(data, "__array__")


def _array_like(data: Any, options: ScanOptions | None) -> Target:
    return ArraySource(np.asarray(data))


# The inputs that are objects, in the order they are asked (a memmap is an ndarray, a list
# of paths is a list, a tensor may have ``__array__``).
OBJECT_OPENERS: tuple[Opener, ...] = (
    Opener("a source", lambda data: isinstance(data, Source), lambda data, options: data),
    Opener("a path", lambda data: isinstance(data, (str, os.PathLike)), _path),
    Opener("a list of paths: a shard set", is_path_list, _path_list),
    Opener("a dict of arrays, nested too", lambda data: isinstance(data, dict), _dict),
    Opener("a Zarr store", _of("zarr", *STORES), _zarr_store),
    Opener("a NumPy array or memmap", lambda data: isinstance(data, np.ndarray), _ndarray),
    Opener("a Dask array", _of("dask", "Array"), _dask_array),
    Opener("a Zarr array", _of("zarr", "Array"), _zarr_array),
    Opener("a Zarr group", _of("zarr", "Group"), _zarr_group),
    Opener("an HDF5 dataset", _of("h5py", "Dataset"), _h5_dataset),
    Opener("an HDF5 group or file", _of("h5py", "Group", "File"), _h5_group),
    Opener("an xarray DataArray", _of("xarray", "DataArray"), _data_array),
    Opener("an xarray Dataset", _of("xarray", "Dataset"), _dataset),
    Opener("a pandas DataFrame", _of("pandas", "DataFrame"), _dataframe),
    Opener("a pandas Series", _of("pandas", "Series"), _series),
    Opener("a tensor (__dlpack__)", dlpack.is_tensor, _tensor),
    Opener("an array-like or a number", _is_array_like, _array_like),
)


def _open(data: Any, options: ScanOptions | None) -> Target:
    """``data`` opened by the first row of ``OBJECT_OPENERS`` that recognizes it."""
    for row in OBJECT_OPENERS:
        if row.recognizes(data):
            return row.open(data, options)
    raise SourceError(
        f"do not know how to scan an object of type {type(data).__module__}."
        f"{type(data).__qualname__}"
    )


def _has_suffix(*suffixes: str) -> Callable[[str], bool]:
    return lambda path: path.lower().endswith(suffixes)


def _glob(pattern: str, options: ScanOptions) -> Target:
    from .shards import open_glob

    return open_glob(pattern, options)


def _is_glob(path: str) -> bool:
    from .shards import is_glob

    return is_glob(path)


def _could_be_array_file(path: str) -> bool:
    """A suffix of ``files.OPENERS``, or a directory (a sharded checkpoint's, maybe)."""
    return suffix_of(path) in OPENERS or os.path.isdir(path)


def _array_file(path: str, options: ScanOptions) -> Target:
    """``files.open_file``; a checkpoint whose small tensors can be read whole (``.npz``,
    safetensors: ``factory.raw_npy``) as a ``ShardSet``, as a tar is, so that
    ``engines.batched`` scans them together."""
    target = open_file(path, options)
    if not isinstance(target, list):
        return target
    from .shards import ShardSet

    if not any(getattr(f, "raw_npy", None) for _, f in target):  # none read whole
        return target
    opener = partial(open_file, path, options)  # its tensors listed again where they are scanned
    return ShardSet(target, [os.path.abspath(path)], reopen=[(0, len(target), opener)])


def _tar(path: str, options: ScanOptions) -> Target:
    from .shards import open_tar_set

    return open_tar_set(path, options)


def _arrow(path: str, options: ScanOptions) -> Target:
    from .arrow import open_arrow

    return open_arrow(path)


def _is_directory(path: str) -> bool:
    """A directory that is not one Zarr store (a store opens as Zarr, below the table)."""
    return os.path.isdir(path) and not is_zarr_store(path)


def _parquet(path: str, options: ScanOptions) -> Target:
    from .tables import open_parquet

    return open_parquet(path)


def _is_h5_path(path: str) -> bool:
    return hdf5.split_h5_path(path) is not None


def _h5_path(path: str, options: ScanOptions) -> Target:
    return hdf5.open_h5(*hdf5.split_h5_path(path))


def _open_directory(path: str, options: ScanOptions) -> Target:
    """A directory: a Parquet dataset, a Hugging Face ``datasets`` folder, a shard set,
    else an error saying what it holds (``walk``'s rule)."""
    from . import shards, tables
    from .arrow import is_datasets_folder, open_datasets_folder

    contents = walk(path)
    if contents.is_parquet_dataset:
        files = contents.parquet_paths()
        return tables.parquet_columns(path, files)
    if is_datasets_folder(path, contents):
        return open_datasets_folder(path, contents)
    if contents.is_shard_set:
        return shards.open_directory(path, contents, options)
    raise SourceError(contents.describe())


# The local paths, in the order they are asked; a row whose opener gives None passes the
# path on (``files.open_file`` of a directory that holds no checkpoint). A path no row
# takes, and every URL, is a Zarr store, group or array (``zarr.open_path``).
PATH_OPENERS: tuple[Opener, ...] = (
    Opener("a glob: a shard set", _is_glob, _glob),
    Opener("an array or checkpoint file (files.OPENERS)", _could_be_array_file, _array_file),
    Opener("a tar: a shard set", _has_suffix(*TAR_SUFFIXES), _tar),
    Opener("an Arrow file", _has_suffix(*ARROW_SUFFIXES), _arrow),
    Opener("a directory", _is_directory, _open_directory),
    Opener("a Parquet file", _has_suffix(*PARQUET_SUFFIXES), _parquet),
    Opener("an HDF5 file, or a dataset or group in one", _is_h5_path, _h5_path),
)


def _open_path(path: str, options: ScanOptions) -> Target:
    """``path`` opened by the first row of ``PATH_OPENERS`` that recognizes it and opens it;
    a URL, or a path no row takes, as Zarr."""
    if "://" not in path:
        for row in PATH_OPENERS:
            if row.recognizes(path):
                target = row.open(path, options)
                if target is not None:
                    return target
    from .zarr import open_path

    return open_path(path, options)


def input_roots(data: Any) -> list[tuple[Any, str]]:
    """Each input a scan of ``data`` reads (each path of a list of paths, else ``data``)
    with the real path of the local file or folder it is read from (``input_root``), where
    a scan never writes; those without one (a URL, a missing path, an object) left out."""
    items = data if is_path_list(data) else [data]
    return [(item, root) for item in items if (root := input_root(item)) is not None]


def input_root(data: Any) -> str | None:
    """The real path of the local file or folder a path input is read from (``f.h5`` of
    ``f.h5:/x``, ``data.zip`` of ``data.zip/train/x``, the outermost Zarr store of
    ``data.zarr/train/x``, the ``.npy``, Parquet file or dataset itself), or None for a URL,
    a path that does not exist, or an object: where a scan must never write."""
    from . import hdf5, zarr
    from .walk import is_zarr_store

    if not isinstance(data, (str, os.PathLike)):
        return None
    path = os.fspath(data)
    if "://" in path:
        return None
    from .shards import glob_prefix, is_glob

    if is_glob(path):  # a glob: the folder it matches below
        path = glob_prefix(path)[0]
    h5 = hdf5.split_h5_path(path)
    zip_path = zarr.split_zip(path)[0]
    path = h5[0] if h5 is not None else zip_path or path
    if not os.path.exists(path):
        return None
    path = os.path.realpath(path)
    up = os.path.dirname(path)
    while up != path and os.path.isdir(path) and is_zarr_store(up):
        path, up = up, os.path.dirname(up)  # a group or array inside a store: the store
    return path


def group_name(data: Any) -> str:
    """The name of an input that opens as a group (its path, store or file name)."""
    if isinstance(data, (str, os.PathLike)):
        return os.fspath(data)
    if is_path_list(data):
        return list_name(data)
    if of_type(data, "pandas", "DataFrame"):  # a column may be named "name"
        return "DataFrame"
    for attr in ("store_path", "filename", "name"):  # zarr, h5py, other
        v = getattr(data, attr, None)
        if (isinstance(v, str) or type(v).__name__ == "StorePath") and str(v):
            return str(v)
    return type(data).__name__
