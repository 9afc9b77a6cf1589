"""Zarr arrays and groups (zarr-python 3; stores written in Zarr format 2 or 3, sharded too).

Regions are hyperrectangles of whole storage units: shards when the array is sharded and a
shard fits the region budget, else chunks. Which units exist is learnt from the store's
listing, without reading data: a unit that is not listed was never written (or was written
as all ``fill_value``, which zarr does not store), and zarr presents it as ``fill_value``.
"""

from __future__ import annotations

import math
import os
import threading
import uuid
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from ..compute.blocks import Region, check_dtype
from ..errors import SourceError
from . import remote
from .base import Source, of_type
from .chunked import ChunkGrid, key_parser
from .zarr_dtypes import register as register_dtypes
from .zarr_files import ChunkFiles, local_folder

# zarr learns bfloat16 and float8 (register_dtypes) where this module opens a store, and
# where a pickle names one of their classes; not at import: ml_dtypes takes most of a second


class ZarrSource(Source):
    """One ``zarr.Array``, read region by region.

    Chunk files of a local, unsharded array with a plain codec chain are read and decompressed
    in the calling thread (:class:`~fastfinite.sources.zarr_files.ChunkFiles`); any other
    array through ``array[region]``, zarr decompressing on its own I/O loop and threads.
    """

    def __init__(self, array: Any, name: str | None = None, url: str | None = None, options=None):
        self._array = array
        self.name = name or array_name(array)
        self.remote = over_network(array.store_path.store)
        # the array's folder on a local disk (a ``LocalStore``), else None: looked up once,
        # its chunk files read straight when their layout allows (``ChunkFiles``)
        self.folder = local_folder(array)
        self.files = None if self.folder is None else ChunkFiles.for_array(array, self.folder)
        # a store opened from a URL is opened again from it in a Dask task, with ``options``
        # (the caller's storage options, its secrets taken out unless they are to be sent)
        self.url, self.options = url, options
        self._token = uuid.uuid4().hex  # one scan's source: its copies share one opening
        self._format = array.metadata.zarr_format
        self.shape = tuple(int(s) for s in array.shape)
        self.dtype = check_dtype(np.dtype(array.dtype), self.name)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self.fill_value = _plain(array.fill_value)
        shards = getattr(array, "shards", None)
        # the chunks: what the report's ``chunks``, missing and unreadable chunks are in;
        # a sharded array is stored (listed, fingerprinted, read when they fit) by shards
        self.storage = ChunkGrid(self.shape, tuple(array.chunks))
        self.shards = ChunkGrid(self.shape, tuple(shards)) if shards else None

    @property
    def array(self) -> Any:
        if self._array is None:  # opened again from its URL where it is read
            self._array = _opened(self._token, self._open)
        return self._array

    def _open(self) -> Any:
        import zarr

        register_dtypes()
        try:
            return zarr.open_array(
                store=self.url, mode="r", storage_options=self.options, zarr_format=self._format
            )
        except Exception as e:
            raise SourceError(f"cannot open {self.url}: {type(e).__name__}: {e}") from None

    @property
    def location(self) -> str:
        return self.url or array_name(self.array)

    def __reduce_ex__(self, protocol):
        if self.url is None:
            return super().__reduce_ex__(protocol)
        return (_reopened, (self.__dict__ | {"_array": None},))

    def regions(self, budget_bytes: int):
        """Regions of whole shards when a shard fits a few region budgets, else of chunks."""
        grid = self.storage
        if self.shards is not None:
            shard_bytes = math.prod(self.shards.unit) * self.dtype.itemsize
            grid = self.shards if shard_bytes <= 4 * budget_bytes else self.storage
        return grid.regions(self.dtype.itemsize, budget_bytes)

    def read(self, region: Region) -> np.ndarray:
        if self.files is not None:
            return self.files.read(region)
        return np.asarray(self.array[region])

    def units(self, region: Region):
        """``(kind, grid coordinates, region)`` of each chunk in a region (the chunks inside
        the shards of a sharded array: one can be unreadable while the others are fine)."""
        for coords in self.storage.units_in(region):
            yield "chunk", coords, self.storage.unit_region(coords)

    def verify(self) -> None:
        """The array's metadata is still in its store: a store that is gone (or a relative
        path read elsewhere) would read as all fill_value."""
        from zarr.core.sync import sync

        if self._array is None:
            _ = self.array  # opening it reads its metadata: that is the check
            return
        store_path = self.array.store_path
        prefix = store_path.path.strip("/")
        meta = "zarr.json" if self.array.metadata.zarr_format == 3 else ".zarray"
        key = f"{prefix}/{meta}" if prefix else meta
        from zarr.core.buffer import default_buffer_prototype

        try:  # a read, not ``exists``: a filesystem may answer that from its listing cache
            there = sync(store_path.store.get(key, default_buffer_prototype())) is not None
        except Exception as e:
            raise SourceError(f"{type(e).__name__}: {e}") from None
        if not there:
            raise SourceError(f"the store of {self.name} no longer holds the array ({key})")

    def identity(self) -> dict:
        """The array's URL and its metadata but for its attributes and the length of axis 0
        (dtype, chunk grid, shards, codecs, fill value, key encoding: anything that changes
        what a unit decodes to)."""
        import json

        meta = dict(self.array.metadata.to_dict())
        meta.pop("attributes", None)
        meta["shape"] = list(self.shape[1:])
        location = self.location
        if not self.remote and "://" not in location and os.path.exists(location):
            location = os.path.abspath(location)
        return {"kind": "zarr", "location": location,
                "metadata": json.loads(json.dumps(meta, default=str, sort_keys=True))}  # fmt: skip

    def fingerprints(self):
        """A fingerprint per storage unit, taken now: its file's times on a local disk, its
        ETag and time in an object store, else its bytes' hash."""
        from .fingerprints import Fingerprints, grid_fingerprints, store_fingerprints

        array = self.array
        folder = self.folder
        store = array.store_path.store
        if folder is None and type(getattr(store, "fs", None)).__name__ == "LocalFileSystem":
            folder = f"{str(store.path).rstrip('/')}/{array.store_path.path.strip('/')}"
        encode = array.metadata.encode_chunk_key
        grid = self.shards or self.storage  # the objects of the store
        if folder is not None:
            fps = grid_fingerprints(folder, encode, grid)
        else:
            found, racy = store_fingerprints(array.store_path)
            fps = Fingerprints.from_keys(found, racy, key_parser(encode, len(self.shape)), grid)
        if self.shards is not None:
            fps.chunks_missing = self._chunks_missing
        return fps

    def missing_units(self) -> list[tuple[int, ...]] | None:
        """Grid coordinates of the chunks the store does not hold, in C order (of a sharded
        array: the chunks of the shards it does not hold, and those the index of each shard
        it holds says were never written); None when the store cannot be listed."""
        from zarr.core.sync import sync

        array = self.array
        store_path = array.store_path
        prefix = store_path.path.strip("/")
        parse = key_parser(array.metadata.encode_chunk_key, len(self.shape))

        async def listing():
            out = []
            async for key in store_path.store.list_prefix(prefix + "/" if prefix else ""):
                out.append(key)
            return out

        try:
            if self.folder is not None:
                keys = _file_keys(self.folder)
            else:
                strip = len(prefix) + 1 if prefix else 0
                keys = [k[strip:] for k in sync(listing())]
        except Exception as e:  # a store that cannot list (plain HTTP, say)
            warnings.warn(
                f"cannot list the store of {self.name} ({e}); missing chunks are not reported",
                stacklevel=3,
            )
            return None
        grid = self.shards or self.storage
        present = np.zeros(grid.grid, dtype=bool)
        for key in keys:
            coords = parse(key)
            if coords is not None and all(c < g for c, g in zip(coords, grid.grid)):
                present[coords] = True
        if math.prod(grid.grid) == 0:
            return []
        missing = [tuple(int(i) for i in c) for c in np.argwhere(~present)]
        return missing if self.shards is None else self._chunks_missing(missing)

    def _chunks_missing(self, missing_shards: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        """The chunks a sharded array's store does not hold, in C order: every chunk of the
        shards it does not hold (``missing_shards``), and in each shard it holds the chunks
        its index marks as never written."""
        per = tuple(s // c for s, c in zip(self.shards.unit, self.storage.unit))
        absent = np.zeros(self.storage.grid, dtype=bool)

        def box(shard):
            return tuple(slice(i * k, (i + 1) * k) for i, k in zip(shard, per))

        for shard in missing_shards:
            absent[box(shard)] = True
        gone = set(missing_shards)
        held = [c for c in np.ndindex(*self.shards.grid) if c not in gone]
        for shard, written in self._shard_maps(held, per).items():
            cell = absent[box(shard)]  # cut by the array's edge in the last shards
            absent[box(shard)] = ~written[tuple(slice(0, n) for n in cell.shape)]
        return [tuple(int(i) for i in c) for c in np.argwhere(absent)]

    def _shard_maps(self, shards: list, per: tuple[int, ...]) -> dict:
        """``{shard: which of its chunks were written}`` from each shard's index (a shard
        gone since it was listed: none); a shard whose index cannot be read is left out,
        its chunks counted as there (reading them says what is wrong)."""
        import asyncio

        from zarr.codecs import ShardingCodec
        from zarr.core.sync import sync

        array = self.array
        codecs = array.metadata.codecs
        load = getattr(codecs[0] if codecs else None, "_load_shard_index_maybe", None)
        if not shards:
            return {}
        if not isinstance(codecs[0], ShardingCodec) or load is None:
            warnings.warn(
                f"cannot read the shard indexes of {self.name} (codecs {codecs}); chunks "
                "never written inside the shards it holds are not reported",
                stacklevel=3,
            )
            return {}
        encode, store_path = array.metadata.encode_chunk_key, array.store_path

        async def one(shard, limit):
            async with limit:
                try:
                    index = await load(store_path / encode(shard), per)
                except Exception:
                    return shard, None
            return shard, np.zeros(per, bool) if index is None else index.get_full_chunk_map()

        async def every():
            limit = asyncio.Semaphore(64)  # index reads in flight
            return await asyncio.gather(*(one(s, limit) for s in shards))

        return {s: m for s, m in sync(every()) if m is not None}


def _file_keys(folder: str) -> list[str]:
    """The keys below an array's folder on disk, from the file system: zarr's async listing
    costs about 0.1 ms a key, a few percent of a scan of 1 MB chunks."""
    if not os.path.isdir(folder):
        raise SourceError(f"the array's folder {folder} is not there")
    keys = []
    for sub, _, files in os.walk(folder):
        rel = os.path.relpath(sub, folder).replace(os.sep, "/")
        keys += [f if rel == "." else f"{rel}/{f}" for f in files]
    return keys


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


_OPENED: OrderedDict[str, Any] = OrderedDict()  # token -> array, the latest few scans' arrays
_OPENING: dict[str, threading.Lock] = {}
_LOCK = threading.Lock()


def _opened(token: str, open_array) -> Any:
    """The array of one planned source, opened once per process: a worker unpickles a source
    with each batch of tasks it receives, and each copy would otherwise read the metadata."""
    with _LOCK:
        if token in _OPENED:
            _OPENED.move_to_end(token)
            return _OPENED[token]
        lock = _OPENING.setdefault(token, threading.Lock())
    with lock:
        with _LOCK:
            if token in _OPENED:
                return _OPENED[token]
        array = open_array()
        with _LOCK:
            _OPENED[token] = array
            _OPENING.pop(token, None)
            while len(_OPENED) > 64:
                _OPENED.popitem(last=False)
        return array


def _reopened(state: dict) -> ZarrSource:
    """A source opened from a URL, unpickled: it opens the store when first read (not where
    a graph is unpickled: a scheduler need not reach the store)."""
    source = ZarrSource.__new__(ZarrSource)
    source.__dict__.update(state)
    return source


def array_name(array: Any) -> str:
    """An array's URL (its store's, and its path in it)."""
    try:
        path = array.store_path.path.strip("/")
        base = store_url(array.store_path.store).rstrip("/")
        return f"{base}/{path}" if path else base
    except Exception:
        return getattr(array, "name", "") or "zarr array"


def store_url(store: Any) -> str:
    """A zarr store as a URL: ``s3://bucket/data.zarr``, a folder, a zip file."""
    fs = getattr(store, "fs", None)
    if fs is not None:
        return f"{_fs_protocol(fs)}://{str(store.path).strip('/')}"
    for attr in ("root", "path"):
        v = getattr(store, attr, None)
        if v is not None and str(v):
            return str(v)
    inner = getattr(store, "store", None)  # zarr's ObjectStore around an obstore store
    return _obstore_url(inner) if inner is not None else type(store).__name__


def over_network(store: Any) -> bool:
    """Whether a zarr store is reached over a network: not a local folder, not one in
    memory or a zip file, and, through fsspec, not on a local or memory filesystem."""
    if type(store).__name__ in ("LocalStore", "MemoryStore", "ZipStore"):
        return False
    fs = getattr(store, "fs", None)
    if fs is not None:
        return _fs_protocol(fs).lower() not in remote.LOCAL_PROTOCOLS
    return True


def _fs_protocol(fs: Any) -> str:
    """An fsspec filesystem's protocol (its first name, when it has several)."""
    return fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol


OBSTORE_SCHEMES = {"S3Store": ("s3", "bucket"), "GCSStore": ("gs", "bucket"),
                   "AzureStore": ("az", "container_name")}  # fmt: skip


def _obstore_url(inner: Any) -> str:
    prefix = str(getattr(inner, "prefix", None) or "").strip("/")
    config = getattr(inner, "config", None) or {}
    scheme, key = OBSTORE_SCHEMES.get(type(inner).__name__, (None, None))
    if scheme and config.get(key):
        return f"{scheme}://{config[key]}" + (f"/{prefix}" if prefix else "")
    url = getattr(inner, "url", None) or (config.get("url") if isinstance(config, dict) else None)
    return str(url or (f"/{prefix}" if prefix else type(inner).__name__))


def open_path(path: str, options: Any) -> Any:
    """A Zarr store, group or array at a local path or a URL: its ``ZarrSource``, or a
    group's members (``group_members``). Read with the scan's storage options
    (``options``, a ``ScanOptions``, with fastfinite's defaults: ``remote.storage_defaults``);
    a source opened from a URL is opened again from it in a Dask task, with those options,
    their secrets taken out unless ``options.send_credentials``."""
    node, storage = open_zarr(path, options)
    sent = storage if options.send_credentials else remote.without_secrets(storage)
    url = path.rstrip("/") if remote.protocol(path) not in remote.LOCAL_PROTOCOLS else None
    if of_type(node, "zarr", "Group"):
        return group_members(node, path.rstrip("/"), url, sent)
    return ZarrSource(node, path, url, sent)


def open_store(store: Any) -> Any:
    """A zarr store object (``LocalStore``, ``FsspecStore``, ``ZipStore``...): the array or
    the group's members at its root, named by the store's URL."""
    node, name = open_store_node(store), store_url(store)
    if of_type(node, "zarr", "Group"):
        return group_members(node, name)
    return ZarrSource(node, name)


def open_zarr(path: str, options: Any = None) -> tuple[Any, dict]:
    """Open a Zarr array or group read-only from a path or fsspec URL: ``(node, storage
    options)``, those a URL's filesystem is opened with (credentials, endpoint, pool): the
    scan's (``options``, a ``ScanOptions``) with fastfinite's defaults
    (``remote.storage_defaults``), none without ``options``.

    ``data.zarr``, ``data.zarr/train/x``, ``data.zip`` (a zip store) and ``data.zip/train/x``,
    ``file://``, ``memory://`` and other fsspec URLs (with the fsspec backend installed).
    """
    import zarr

    register_dtypes()
    store: Any = path
    inner = ""
    if "://" not in path:  # absolute: a task elsewhere (a cluster worker) opens the same
        zip_path, inner = split_zip(path)
        if zip_path is not None:
            from zarr.storage import ZipStore

            store = ZipStore(os.path.abspath(zip_path), mode="r")
        elif not os.path.exists(path):
            raise SourceError(f"no such file or directory: {path}")
        else:
            store = os.path.abspath(path)
    storage = {}
    if options is not None:
        storage = remote.storage_defaults(
            path, options.storage_options, options.concurrency, options.timeout
        )
    kwargs = {"storage_options": storage} if storage and "://" in path else {}
    try:
        if inner:
            return zarr.open(store=store, path=inner, mode="r"), storage
        return zarr.open(store=store, mode="r", **kwargs), storage
    except Exception as e:
        missing = isinstance(e, (FileNotFoundError, KeyError)) or type(e).__name__ in (
            "GroupNotFoundError", "ArrayNotFoundError", "NodeNotFoundError",
        )  # fmt: skip
        bucket = remote.missing_bucket(path, storage) if missing else None
        if bucket is not None:
            raise SourceError(f"the bucket {bucket!r} of {path} does not exist") from None
        if missing and remote.protocol(path) in ("http", "https"):
            raise SourceError(
                f"no Zarr array or group at {path}: the server has no zarr.json, .zgroup or "
                ".zarray at that URL"
            ) from None
        if isinstance(e, (FileNotFoundError, KeyError)):
            raise SourceError(f"no Zarr array or group at {path}: {e}") from None
        if missing:
            raise SourceError(f"no Zarr array or group at {path}") from None
        if "://" in path and _unreachable(e):
            raise SourceError(f"cannot reach the store of {path}: {e}") from None
        raise SourceError(f"cannot open {path} as Zarr: {e}") from None


_CONNECTION_ERRORS = {
    "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
    "ConnectionClosedError", "ClientConnectorError", "ServerDisconnectedError",
}  # fmt: skip


def _unreachable(e: BaseException) -> bool:
    """Whether ``e`` (or what caused it) says the store did not answer, not that it lacks
    something: the store is down or unreachable, its data is not in question."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (ConnectionError, TimeoutError)) or type(e).__name__ in _CONNECTION_ERRORS:
            return True
        e = e.__cause__ or e.__context__
    return False


def open_store_node(store: Any) -> Any:
    """The array or group at the root of a zarr store object, read-only."""
    import zarr

    register_dtypes()
    try:
        return zarr.open(store=store, mode="r")
    except Exception as e:
        raise SourceError(f"cannot open {store!r} as Zarr: {type(e).__name__}: {e}") from None


def split_zip(path: str) -> tuple[str | None, str]:
    """``data.zip/train/x`` -> (``data.zip``, ``train/x``) when ``data.zip`` is a file."""
    parts = path.replace(os.sep, "/").split("/")
    for i in range(len(parts), 0, -1):
        head = "/".join(parts[:i])
        if head.endswith(".zip") and os.path.isfile(head):
            return head, "/".join(parts[i:])
    return None, ""


def group_nodes(group: Any) -> list[tuple[str, Any]]:
    """Every array and group below a group, recursively, as ``(path, node)`` sorted by path
    (zarr's warning for each entry of the store that is none, ``Object at ... is not
    recognized``, is not shown: ``zarr_strays`` lists them)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Object at .* is not recognized as a component")
        nodes = list(group.members(max_depth=None))
    return sorted(nodes, key=lambda t: t[0])


def group_members(group: Any, base: str, url=None, options=None) -> list[tuple[str, Any]]:
    """``(path, factory)`` of every array below a group; sources are named ``base/path``
    (and, opened from ``url``, are opened again from ``url/path`` in a Dask task). Entries
    of the store below the group that are not part of it are members too, whose factory
    raises ``SkippedMemberError`` saying what they are (``zarr_strays``)."""
    from ..errors import SkippedMemberError
    from .zarr_strays import stray_entries

    nodes = group_nodes(group)
    out = [
        (p, lambda a=a, p=p: ZarrSource(a, f"{base}/{p}", url and f"{url}/{p}", options))
        for p, a in nodes
        if of_type(a, "zarr", "Array")
    ]
    for path, (what, kind) in stray_entries(group, nodes).items():

        def stray(what=what, kind=kind):
            raise SkippedMemberError(what, kind)

        out.append((path, stray))
    return sorted(out, key=lambda t: t[0])
