"""HDF5 datasets through h5py (the optional extra ``hdf5``).

Chunked datasets are read in regions of whole chunks, and chunks HDF5 never allocated are
reported as missing (HDF5 presents them as the fill value). Contiguous datasets are read in
C-order slabs. h5py serializes reads on its global lock, so one thread reads while the
others run kernels.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..blocks import Region, check_dtype, plan_regions
from ..errors import SourceError
from .base import Source, regular_file
from .chunked import ChunkGrid

H5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5", ".nc", ".nc4")


def _h5py():
    try:
        import h5py
    except ImportError:
        raise SourceError("reading HDF5 needs h5py: pip install 'fastfinite[hdf5]'") from None
    return h5py


class H5Source(Source):
    """One HDF5 dataset, opened by file name and dataset path (so it pickles: each process
    opens the file itself)."""

    def __init__(self, filename: str, dataset: str, _ds: Any = None):
        self.filename = os.path.abspath(filename)  # a task elsewhere opens the same file
        self.dataset = dataset
        self._ds = _ds
        ds = self.ds
        self.name = f"{filename}:{dataset}"
        self.shape = tuple(int(s) for s in ds.shape)
        self.dtype = check_dtype(ds.dtype, self.name)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self.chunks = tuple(ds.chunks) if ds.chunks else None
        fill = ds.fillvalue
        self.fill_value = fill.item() if hasattr(fill, "item") else fill
        self.storage = ChunkGrid(self.shape, self.chunks) if self.chunks else None

    @classmethod
    def from_dataset(cls, ds: Any) -> H5Source:
        return cls(ds.file.filename, ds.name, _ds=ds)

    @property
    def ds(self):
        if self._ds is None:
            obj = _open_node(self.filename, self.dataset)
            if not isinstance(obj, _h5py().Dataset):
                raise SourceError(f"{self.filename}:{self.dataset} is a group, not a dataset")
            self._ds = obj
        return self._ds

    def verify(self) -> None:
        """The file is still there, and holds what the scan was planned on."""
        ds = self.ds
        if (tuple(ds.shape), np.dtype(ds.dtype)) != (self.shape, self.dtype):
            raise SourceError(f"{self.name} now holds {ds.dtype} {ds.shape}, not the planned")

    def identity(self) -> dict:
        """The file and dataset, dtype, shape and chunks (any write to an HDF5 file changes
        the file's fingerprint: its regions are all scanned again)."""
        return {"kind": "hdf5", "path": self.filename, "dataset": self.dataset,
                "dtype": self.dtype.str, "shape": list(self.shape), "chunks": self.chunks}  # fmt: skip

    def fingerprints(self):
        from .fingerprints import whole_file

        return whole_file(self.filename)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_ds"] = None
        return state

    def regions(self, budget_bytes: int):
        if self.storage is not None:
            return self.storage.regions(self.dtype.itemsize, budget_bytes)
        order = tuple(range(len(self.shape)))
        return plan_regions(self.shape, order, budget_bytes // self.dtype.itemsize)

    def read(self, region: Region) -> np.ndarray:
        if len(self.shape) == 0:
            return np.asarray(self.ds[()])
        return self.ds[region]

    def units(self, region: Region):
        if self.storage is None:
            yield "region", tuple(s.start for s in region), region
            return
        for coords in self.storage.units_in(region):
            yield "chunk", coords, self.storage.unit_region(coords)

    def missing_units(self) -> list[tuple[int, ...]] | None:
        """Chunks HDF5 never allocated, in C order (None for contiguous datasets)."""
        if self.storage is None:
            return None
        present = np.zeros(self.storage.grid, dtype=bool)
        unit = self.storage.unit
        dsid = self.ds.id

        def mark(info):
            present[tuple(o // u for o, u in zip(info.chunk_offset, unit))] = True

        try:
            dsid.chunk_iter(mark)
        except Exception:  # an older h5py, or an older HDF5 library under a newer h5py
            for i in range(dsid.get_num_chunks()):
                mark(dsid.get_chunk_info(i))
        return [tuple(int(i) for i in c) for c in np.argwhere(~present)]


def split_h5_path(path: str) -> tuple[str, str | None] | None:
    """``"file.h5:/group/dataset"`` -> (``file.h5``, ``/group/dataset``); ``file.h5`` ->
    (``file.h5``, None); anything else -> None."""
    if ":" in path:
        head, _, tail = path.rpartition(":")
        if head.lower().endswith(H5_SUFFIXES):
            return head, tail or "/"
    if path.lower().endswith(H5_SUFFIXES):
        return path, None
    return None


def open_h5(filename: str, dataset: str | None):
    """An H5Source for a dataset, or a list of ``(path, factory)`` for a file or group."""
    regular_file(filename, filename)
    obj = _open_node(filename, dataset or "/")
    if isinstance(obj, _h5py().Dataset):
        there = obj.file.filename  # another file's, through an external link
        same = os.path.abspath(there) == os.path.abspath(filename)
        return H5Source(filename if same else there, obj.name, _ds=obj)
    return group_datasets(obj)


def _open_node(filename: str, path: str):
    """The h5py object at ``path`` in ``filename`` (errors name both, and say where a link
    that leads nowhere leads)."""
    h5py = _h5py()
    try:
        f = h5py.File(filename, "r")
    except OSError as e:
        raise SourceError(f"cannot open {filename} as HDF5: {e}") from None
    try:
        return f[path]
    except (KeyError, OSError, ValueError) as e:
        why = _dead_link(f, path, e)
        if why is None:
            raise SourceError(f"no dataset {path!r} in {filename}") from None
        raise SourceError(f"{filename}:{path} is {why}") from None


def _dead_link(group: Any, name: str, error: BaseException) -> str | None:
    """What a link that cannot be followed is (``"a soft link to /x, which does not
    exist"``), or None when there is no link of that name."""
    h5py = _h5py()
    try:
        link = group.get(name, getlink=True)
    except (KeyError, OSError, ValueError):  # a group on the way is missing: no link
        return None
    if isinstance(link, h5py.SoftLink):
        return f"a soft link to {link.path}, which does not exist"
    if isinstance(link, h5py.ExternalLink):
        return (
            f"an external link to {link.filename}:{link.path}, which cannot be opened "
            f"({_reason(error)})"
        )
    return None if link is None else f"a link that cannot be followed ({_reason(error)})"


def _reason(error: BaseException) -> str:
    text = str(error.args[0] if isinstance(error, KeyError) and error.args else error)
    return text.removeprefix("Unable to synchronously open object ").strip("()")


MAX_LINK_DEPTH = 64  # groups within groups, through links too


def group_datasets(group: Any) -> list[tuple[str, Any]]:
    """Every dataset below an h5py group, reached by any link: hard, soft (to anywhere in
    the file) or external (to another file), as ``(path, factory)`` sorted by path;
    ``factory()`` opens its source (and raises ``UnsupportedDtypeError`` for string or
    compound datasets).

    A dataset reached under several names is scanned once, under its first hard-linked
    name; its other names, and links that lead nowhere (a soft link to nothing, an external
    link to a file or object that cannot be opened), are members whose factory raises
    ``SkippedMemberError``: they are listed in ``report.skipped`` with the reason."""
    from ..errors import SkippedMemberError

    h5py = _h5py()
    links: list[tuple[str, bool, Any]] = []  # (path, hard link, dataset)
    dead: dict[str, str] = {}
    seen_groups = set()

    def visit(g: Any, base: str, depth: int) -> None:
        if depth > MAX_LINK_DEPTH:
            raise SourceError(
                f"{g.file.filename}:{base or '/'} has groups more than {MAX_LINK_DEPTH} deep"
            )
        for name in sorted(g):
            path = f"{base}/{name}"
            try:
                obj = g[name]
            except (KeyError, OSError, ValueError) as e:
                dead[path] = _dead_link(g, name, e) or f"cannot be opened ({_reason(e)})"
                continue
            hard = isinstance(g.get(name, getlink=True), h5py.HardLink)
            if isinstance(obj, h5py.Dataset):
                links.append((path, hard, obj))
            elif isinstance(obj, h5py.Group) and obj.id not in seen_groups:
                seen_groups.add(obj.id)  # a link back up (or to a group seen) is not a loop
                visit(obj, path, depth + 1)

    seen_groups.add(group.id)
    visit(group, group.name.rstrip("/"), 0)
    first: dict[Any, str] = {}
    for path, _, obj in sorted(links, key=lambda t: (not t[1], t[0])):
        first.setdefault(obj.id, path)
    found = []
    for path, _, obj in links:
        if first[obj.id] == path:
            found.append((path, lambda obj=obj: H5Source.from_dataset(obj)))
        else:
            dead[path] = f"the same dataset as {first[obj.id]} (scanned there)"
    for path, why in dead.items():

        def skipped(why=why):
            raise SkippedMemberError(why)

        found.append((path, skipped))
    return sorted(found, key=lambda t: t[0])
