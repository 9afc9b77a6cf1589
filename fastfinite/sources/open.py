"""Any input to a source: ``open_source`` picks the adapter by type, or by path and its
contents, and ``group_name`` names the inputs that open as groups."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..compute.pools import collector_paused
from ..errors import SourceError
from ..options import ScanOptions
from .base import Source, of_type, reader_errors
from .walk import ARROW_SUFFIXES, PARQUET_SUFFIXES, TAR_SUFFIXES, is_zarr_store, walk

STORES = ("FsspecStore", "LocalStore", "ZipStore", "ObjectStore", "MemoryStore")

Target = Any  # a Source, or [(path, factory), ...] for a group (``tables.TableColumns``)


def open_source(data: Any, options: ScanOptions | None = None) -> Target:
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
    (``reader_errors``).
    """
    name = group_name(data)
    with reader_errors(name):
        target = _open(data, options)
    if isinstance(target, list):  # each member opens later, alone: its errors name it
        with collector_paused():  # a set of 100,000 files: as many factories, no cycle
            target[:] = [(path, _named(factory, name, path)) for path, factory in target]
    return target


def _named(factory: Callable[[], Any], name: str, member: str) -> Callable[[], Any]:
    def opened():
        with reader_errors(name, member):
            return factory()

    return opened


def _open(data: Any, options: ScanOptions | None) -> Target:
    from . import dask, dlpack, hdf5, shards, tables, xarray, zarr
    from .ndarray import ArraySource, as_raw_dtype

    if isinstance(data, Source):
        return data
    if isinstance(data, (str, os.PathLike)):
        return _open_path(os.fspath(data), options or ScanOptions())
    if shards.is_path_list(data):  # a list of files: a shard set
        return shards.open_list(list(data), options or ScanOptions())
    if isinstance(data, dict):  # nested dicts too, keyed "layers.0.w", as ``guard`` takes
        from .tensors import dict_members

        return dict_members(data, options, _open)
    if of_type(data, "zarr", *STORES):  # a store object: what it holds, named by its URL
        from .remote import store_url

        node = zarr.open_store_node(data)
        name = store_url(data)
        if of_type(node, "zarr", "Group"):
            return zarr.group_members(node, name)
        return zarr.ZarrSource(node, name)
    if isinstance(data, np.ndarray):
        name = getattr(data, "filename", None) or ""
        if options is not None and options.raw_dtype:
            data = as_raw_dtype(data, options.raw_dtype, name or "the array")
        return ArraySource(data, name=name)
    if of_type(data, "dask", "Array"):
        return dask.DaskArraySource(data)
    if of_type(data, "zarr", "Array"):
        return zarr.ZarrSource(data)
    if of_type(data, "zarr", "Group"):
        return zarr.group_members(data, zarr.array_name(data))
    if of_type(data, "h5py", "Dataset"):
        return hdf5.H5Source.from_dataset(data)
    if of_type(data, "h5py", "Group", "File"):
        return hdf5.group_datasets(data)
    if of_type(data, "xarray", "DataArray"):
        return xarray.XarraySource(data)
    if of_type(data, "xarray", "Dataset"):
        return xarray.dataset_variables(data)
    if of_type(data, "pandas", "DataFrame"):
        return tables.dataframe_columns(data)
    if of_type(data, "pandas", "Series"):
        return tables.series_source(data)
    if dlpack.is_tensor(data):  # JAX, PyTorch, CuPy...: in place on the CPU
        if dlpack.device_of(data)[0] not in dlpack.HOST_DEVICES and (
            options is not None and options.device_copy
        ):
            return dlpack.DeviceSource(data)
        return ArraySource(dlpack.host_array(data))
    if isinstance(data, (list, tuple, int, float, complex, bool, np.generic)) or hasattr(
        data, "__array__"
    ):
        return ArraySource(np.asarray(data))
    raise SourceError(
        f"do not know how to scan an object of type {type(data).__module__}."
        f"{type(data).__qualname__}"
    )


def _open_path(path: str, options: ScanOptions) -> Target:
    from . import hdf5, shards, tables, zarr
    from .files import open_file
    from .remote import LOCAL_PROTOCOLS, protocol, storage_defaults, without_secrets

    if "://" not in path:
        if shards.is_glob(path):
            return shards.open_glob(path, options)
        target = open_file(path, options)  # .npy, .npz, checkpoints (``files``)
        if target is not None:
            return target
        lower = path.lower()
        if lower.endswith(TAR_SUFFIXES):
            from .tars import open_tar

            base = os.path.basename(path.rstrip("/"))
            members = [(f"{base}/{k}", f) for k, f in open_tar(path, options)]
            return shards.ShardSet(members, [os.path.abspath(path)])
        if lower.endswith(ARROW_SUFFIXES):
            from .arrow import open_arrow

            return open_arrow(path)
        if os.path.isdir(path) and not is_zarr_store(path):
            return _open_directory(path, options)
        if lower.endswith(PARQUET_SUFFIXES):
            return tables.open_parquet(path)
        h5 = hdf5.split_h5_path(path)
        if h5 is not None:
            return hdf5.open_h5(*h5)
    storage = storage_defaults(path, options.storage_options, options.concurrency, options.timeout)
    node = zarr.open_zarr(path, storage)
    url = path.rstrip("/") if protocol(path) not in LOCAL_PROTOCOLS else None
    sent = storage if options.send_credentials else without_secrets(storage)
    if of_type(node, "zarr", "Group"):
        return zarr.group_members(node, path.rstrip("/"), url, sent)
    return zarr.ZarrSource(node, path, url, sent)


def _open_directory(path: str, options: ScanOptions) -> Target:
    """A directory: a Parquet dataset, a Hugging Face ``datasets`` folder, a shard set,
    else an error saying what it holds (``walk``'s rule)."""
    from . import shards, tables
    from .arrow import is_datasets_folder, open_datasets_folder

    contents = walk(path)
    if contents.is_parquet_dataset:
        return tables.open_parquet(path)
    if is_datasets_folder(path, contents):
        return open_datasets_folder(path, contents)
    if contents.is_shard_set:
        return shards.open_directory(path, contents, options)
    raise SourceError(contents.describe())


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
    from .shards import is_path_list, list_name

    if is_path_list(data):
        return list_name(data)
    if of_type(data, "pandas", "DataFrame"):  # a column may be named "name"
        return "DataFrame"
    for attr in ("store_path", "filename", "name"):  # zarr, h5py, other
        v = getattr(data, attr, None)
        if (isinstance(v, str) or type(v).__name__ == "StorePath") and str(v):
            return str(v)
    return type(data).__name__
