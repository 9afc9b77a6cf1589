"""HDF5 datasets through h5py (the optional extra ``hdf5``).

Chunked datasets are read in regions of whole chunks, and chunks HDF5 never allocated are
reported as missing (HDF5 presents them as the fill value). Contiguous datasets are read in
C-order slabs. h5py serializes reads on its global lock, so one thread reads while the
others run kernels.
"""

from __future__ import annotations

import heapq
import math
import os
from typing import Any

import numpy as np

from ..compute.blocks import Region, check_dtype, plan_regions
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


def open_h5(filename: str, dataset: str | None, within: str | None = None):
    """An H5Source for a dataset, or a list of ``(path, factory)`` for a file or group;
    ``within``: the folder of a set, which no link of the file may lead out of
    (``group_datasets``)."""
    regular_file(filename, filename)
    obj = _open_node(filename, dataset or "/")
    if isinstance(obj, _h5py().Dataset):
        problem = _virtual_problem(obj, None)
        if problem is not None:
            raise SourceError(f"{filename}:{obj.name} is {problem[0]}")
        there = obj.file.filename  # another file's, through an external link
        same = os.path.abspath(there) == os.path.abspath(filename)
        return H5Source(filename if same else there, obj.name, _ds=obj)
    return group_datasets(obj, dataset or "/", within)


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
    except _LINK_ERRORS as e:
        why = _dead_link(f, path, e)
        if why is None:
            raise SourceError(f"no dataset {path!r} in {filename}") from None
        raise SourceError(f"{filename}:{path} is {why}") from None


# what h5py raises for a link it cannot follow (RuntimeError: soft links in a circle)
_LINK_ERRORS = (KeyError, OSError, ValueError, RuntimeError)


def _dead_link(group: Any, name: str, error: BaseException) -> str | None:
    """What a link that cannot be followed is (``"a soft link to /x, which does not
    exist"``), or None when there is no link of that name."""
    h5py = _h5py()
    try:
        link = group.get(name, getlink=True)
    except _LINK_ERRORS:  # a group on the way is missing: no link
        return None
    if isinstance(link, h5py.SoftLink):
        if _leads_nowhere(group, name):
            return f"a soft link to {link.path}, which does not exist"
        return f"a soft link to {link.path}, which cannot be followed ({_reason(error)})"
    if isinstance(link, h5py.ExternalLink):
        return (
            f"an external link to {link.filename}:{link.path}, which cannot be opened "
            f"({_reason(error)})"
        )
    return None if link is None else f"a link that cannot be followed ({_reason(error)})"


def _reason(error: BaseException) -> str:
    text = str(error.args[0] if isinstance(error, KeyError) and error.args else error)
    text = text.removeprefix("Unable to synchronously open object ")
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


MAX_LINK_DEPTH = 64  # groups within groups, through links too
# the names of an object, best first: of hard links only, through an external link (or a
# link of a user-defined class), through a soft link (an alias of another name, always)
_RANK = {"HardLink": 0, "ExternalLink": 1, "SoftLink": 2}


def group_datasets(
    group: Any, base: str | None = None, within: str | None = None
) -> list[tuple[str, Any]]:
    """Every dataset below an h5py group, reached by any link: hard, soft (to anywhere in
    the file) or external (to another file), as ``(path, factory)`` sorted by path;
    ``factory()`` opens its source (and raises ``UnsupportedDtypeError`` for string or
    compound datasets). Paths start from ``base``, the path the group was asked for
    (default: the group's name in its file, which for a group reached through an external
    link is its name in the other file).

    A dataset or group reached under several names is scanned once, under its first name
    in a walk that takes names of hard links only first, then names through external links,
    then names through soft links (so a soft link that sorts first does not hide the real
    name). Its other names, and links that lead nowhere,
    are members whose factory raises ``SkippedMemberError``: they are listed in
    ``report.skipped`` with the reason, and those that lead nowhere get a finding of the
    group's: ``missing_member`` for a soft link to nothing in the file,
    ``unreadable_member`` for an external link that cannot be followed here (HDF5 looks for
    its file by ``HDF5_EXT_PREFIX``, the file's folder and the working directory: elsewhere
    it may lead to data) or an object that cannot be opened, and a virtual dataset whose
    source cannot be opened here (HDF5 would read its part as the fill value). With
    ``within`` (the folder of a set), an external link or a virtual dataset's source that
    leads out of it is never followed: listed in ``skipped``, as a symbolic link is."""
    from ..errors import SkippedMemberError

    h5py = _h5py()
    base = "/" + (group.name if base is None else base).strip("/")
    found: list[tuple[str, Any]] = []
    skipped: dict[str, tuple[str, str | None]] = {}  # path -> (why, finding kind)
    first: dict[Any, str] = {}  # object -> the name it is scanned under
    # (rank, path, depth, n, object), rank the worst link on the way (``_RANK``): each
    # name after the names it extends, so an object's first name is popped first
    heap = [(0, base.rstrip("/"), 0, 0, group)]
    n = 0
    while heap:
        rank, path, depth, _, obj = heapq.heappop(heap)
        group_like = isinstance(obj, h5py.Group)
        if obj.id in first:
            what = "group" if group_like else "dataset"
            skipped[path] = (f"the same {what} as {first[obj.id] or '/'} (scanned there)", None)
            continue
        first[obj.id] = path
        if not group_like:
            problem = _virtual_problem(obj, within)
            if problem is not None:
                skipped[path] = problem
                continue
            found.append((path, lambda obj=obj: H5Source.from_dataset(obj)))
            continue
        if depth > MAX_LINK_DEPTH:
            raise SourceError(
                f"{obj.file.filename}:{path or '/'} has groups more than {MAX_LINK_DEPTH} deep"
            )
        for name in sorted(obj):
            child = f"{path}/{name}"
            try:
                link = obj.get(name, getlink=True)
                if within is not None and isinstance(link, h5py.ExternalLink):
                    there = _link_file(link.filename, obj.file.filename, "HDF5_EXT_PREFIX")
                    if there is not None and not _inside(there, within):
                        skipped[child] = (f"an external link to {link.filename}:{link.path}, "
                                          f"out of {within}: never followed", None)  # fmt: skip
                        continue
                target = obj[name]
                if within is not None and not _inside(target.file.filename, within):
                    # a soft link through an external link: led out all the same
                    skipped[child] = (f"a link that leads to {target.file.filename}, out "
                                      f"of {within}: never followed", None)  # fmt: skip
                    continue
            except _LINK_ERRORS as e:
                why = _dead_link(obj, name, e) or f"cannot be opened ({_reason(e)})"
                kind = "missing_member" if _leads_nowhere(obj, name) else "unreadable_member"
                skipped[child] = (why, kind)
                continue
            if isinstance(target, (h5py.Group, h5py.Dataset)):  # not a named datatype
                n += 1
                this = _RANK.get(type(link).__name__, 1)
                heapq.heappush(heap, (max(rank, this), child, depth + 1, n, target))
    for path, (why, kind) in skipped.items():

        def skip(why=why, kind=kind):
            raise SkippedMemberError(why, kind)

        found.append((path, skip))
    return sorted(found, key=lambda t: t[0])


def _link_file(name: str, parent: str, env: str) -> str | None:
    """The file HDF5 opens for the file name ``name`` of an external link (``env``:
    ``"HDF5_EXT_PREFIX"``) or a virtual dataset's source (``"HDF5_VDS_PREFIX"``) in the
    file ``parent``, in HDF5's order: an absolute name as it is, then its last part (or
    a relative name) in each folder of ``env``, in ``parent``'s folder, in the working
    directory; None when there is none."""
    rel = name
    tries = []
    if os.path.isabs(name):
        tries.append(name)
        rel = os.path.basename(name)
    tries += [os.path.join(p, rel) for p in os.environ.get(env, "").split(os.pathsep) if p]
    tries += [os.path.join(os.path.dirname(os.path.abspath(parent)), rel), os.path.abspath(rel)]
    return next((t for t in tries if os.path.isfile(t)), None)


def _inside(path: str, folder: str) -> bool:
    """Whether ``path``, its links resolved, is in ``folder``."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _virtual_problem(ds: Any, within: str | None) -> tuple[str, str | None] | None:
    """Why the dataset ``ds`` is not scanned, and its finding kind, when it is virtual: a
    source file or dataset that cannot be opened here (HDF5 reads its part as the fill
    value, data that is not there: ``unreadable_member``), or, with ``within``, a source
    out of that folder (never read, as a symbolic link: no finding). None otherwise, and
    for sources named by a pattern (``%b``), which HDF5 expands as it reads."""
    if not ds.is_virtual:
        return None
    h5py = _h5py()
    seen: set[tuple[str, str]] = set()
    for vs in ds.virtual_sources():
        if "%" in vs.file_name or "%" in vs.dset_name or (vs.file_name, vs.dset_name) in seen:
            continue
        seen.add((vs.file_name, vs.dset_name))
        where = f"{vs.file_name}:{vs.dset_name}"
        if vs.file_name == ".":
            there = ds.file.filename
        else:
            there = _link_file(vs.file_name, ds.file.filename, "HDF5_VDS_PREFIX")
        if there is not None and within is not None and not _inside(there, within):
            return f"a virtual dataset whose source {where} is out of {within}: never read", None
        try:
            if there is None:
                raise OSError("no such file")
            with h5py.File(there, "r") as f:
                if not isinstance(f.get(vs.dset_name), h5py.Dataset):
                    raise KeyError("no such dataset")
        except _LINK_ERRORS as e:
            fill = ds.fillvalue.item() if hasattr(ds.fillvalue, "item") else ds.fillvalue
            return (
                f"a virtual dataset whose source {where} cannot be opened here "
                f"({_reason(e)}): HDF5 would read its part as the fill value {fill}",
                "unreadable_member",
            )
    return None


def _leads_nowhere(group: Any, name: str, depth: int = 0) -> bool:
    """Whether the link ``name`` of ``group`` is a soft link to nothing in its file: its
    target path, followed link by link (soft links too), meets a name that is not there.
    False when it meets an external link or a link that cannot be followed: what it leads
    to could not be checked."""
    h5py = _h5py()
    try:
        link = group.get(name, getlink=True)
    except _LINK_ERRORS:
        return False
    if not isinstance(link, h5py.SoftLink) or depth > MAX_LINK_DEPTH:
        return False
    g = group.file["/"] if link.path.startswith("/") else group
    parts = [p for p in link.path.split("/") if p and p != "."]
    for i, part in enumerate(parts):
        try:
            step = g.get(part, getlink=True)
        except _LINK_ERRORS:
            return False
        if step is None:
            return True
        if isinstance(step, h5py.SoftLink) and i == len(parts) - 1:
            return _leads_nowhere(g, part, depth + 1)
        if not isinstance(step, (h5py.SoftLink, h5py.HardLink)):
            return False  # an external link, or one of a user-defined class
        try:
            g = g[part]
        except _LINK_ERRORS:
            return isinstance(step, h5py.SoftLink) and _leads_nowhere(g, part, depth + 1)
        if i < len(parts) - 1 and not isinstance(g, h5py.Group):
            return True  # a dataset on the way: the path names nothing
    return False
