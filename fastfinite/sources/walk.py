"""The one walk of a directory given as input: what it holds, without ever leaving it.

The rule (the README's "What is an error"): a directory is scanned as one Zarr store
(``zarr.json``, ``.zgroup`` or ``.zarray`` at its top: zarr reads it), as one Parquet
dataset when every file below it is Parquet (by its suffix, or by its magic bytes ``PAR1``
for files without one, as Hive writes them), else as a shard set (``shards``) when it holds
array files of any kind (``ARRAY_KINDS``): each scanned on its own, the other entries listed
in ``skipped`` with what they are. Names starting with ``.`` or ``_`` are not data, as
pyarrow reads a dataset (``_SUCCESS``, ``_common_metadata``, ``.crc`` files, Spark's
``_temporary``). A directory that holds no array file is an error that says what it holds.
The walk:

- never leaves the directory: symbolic links are not followed (a link is not a Parquet file
  of the dataset, whatever it points to), nor are the insides of the Zarr stores it meets;
- is bounded: past ``MAX_ENTRIES`` files and directories, or ``MAX_DEPTH`` levels, it stops
  and the directory is an error (``fastfinite scan /`` answers at once), never a scan of
  the part it saw.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter

from ..compute.pools import collector_paused
from ..errors import SourceError
from .files import ARRAY_FILE_SUFFIXES
from .hdf5 import H5_SUFFIXES

MAX_ENTRIES = 100_000  # files and directories looked at
MAX_DEPTH = 32
ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")
PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")
TAR_SUFFIXES = (".tar",)
# checkpoints read by ``files.open_file`` (safetensors, GGUF, PyTorch); not a sharded
# checkpoint's index, whose shards a set scans as files of their own
CHECKPOINT_SUFFIXES = tuple(
    s for s in ARRAY_FILE_SUFFIXES if s not in (".npy", ".npz", ".index.json")
)
_MAGIC = {b"PAR1": "Parquet file", b"\x93NUM": ".npy file", b"\x89HDF": "HDF5 file"}
# the kinds a shard set scans (a ``.zip`` may be a zipped Zarr store: scanned alone, by path)
ARRAY_KINDS = frozenset({
    ".npy file", ".npz file", "HDF5 file", "Zarr store", "Parquet file", "Arrow file",
    ".tar file", "checkpoint file",
})  # fmt: skip
_SHOWN = 3  # paths named per kind in a message
KINDS = (  # what the error names, in this order
    ".npy file", ".npz file", "HDF5 file", "Zarr store", ".zip file", "Parquet file",
    "Arrow file", ".tar file", "checkpoint file", "other file", "symbolic link (never followed)", "FIFO, socket or device",
    "directory it cannot read", "file it cannot read", "entry it cannot read",
)  # fmt: skip


def is_zarr_store(path: str) -> bool:
    """Whether the directory ``path`` has Zarr metadata at its top."""
    return any(os.path.exists(os.path.join(path, m)) for m in ZARR_MARKERS)


@dataclass
class DirContents:
    """What a directory holds: paths relative to it, in sorted walk order."""

    root: str
    parquet: list[str] = field(default_factory=list)
    other: dict[str, list[str]] = field(default_factory=dict)  # kind -> paths
    entries: int = 0
    stopped: str = ""  # why the walk stopped early ("" when it saw everything)

    @property
    def is_parquet_dataset(self) -> bool:
        return bool(self.parquet) and not self.other and not self.stopped

    def parquet_paths(self) -> list[str]:
        """The absolute paths of its Parquet files, sorted."""
        return [os.path.join(os.path.abspath(self.root), *p.split("/")) for p in self.parquet]

    @property
    def is_shard_set(self) -> bool:
        """It holds array files (``ARRAY_KINDS``) of which some are not Parquet, or others
        beside its Parquet files: each is scanned on its own (``shards``)."""
        arrays = self.parquet or any(k in ARRAY_KINDS for k in self.other)
        return bool(arrays) and not self.is_parquet_dataset and not self.stopped

    def items(self) -> list[tuple[str, str]]:
        """``(path, kind)`` of every entry it holds (directories but Zarr stores walked
        into), sorted by path."""
        held = dict(self.other, **{"Parquet file": self.parquet})
        pairs: list[tuple[str, str]] = []
        with collector_paused():  # as many pairs as entries, no cycle
            for kind, paths in held.items():
                pairs += zip(paths, repeat(kind))
        pairs.sort()  # paths are unique: by path
        return pairs

    def only(self, kind: str) -> list[str] | None:
        """The paths of its entries, sorted, when every one is a ``kind`` (``items``'
        paths then), else None."""
        paths = self.other.get(kind)
        if not paths or self.parquet or len(self.other) > 1 or self.stopped:
            return None
        return sorted(paths)

    def holdings(self) -> list[str]:
        """What it holds, kind by kind: ``["1 .npy file (a.npy)", "2 Parquet files (...)"]``."""
        held = dict(self.other, **{"Parquet file": self.parquet})
        return [_count(kind, held[kind]) for kind in KINDS if held.get(kind)]

    def describe(self) -> str:
        """The error of a directory that is not one Zarr store, Parquet dataset or shard
        set."""
        head = f"{self.root} is not a Zarr store, a Parquet dataset or a set of array files"
        parts = self.holdings()
        if self.stopped:
            seen = f": it holds at least {', '.join(parts)}" if parts else ""
            return (
                f"{head}: fastfinite stopped looking after {self.stopped}{seen}; scan its "
                "files or stores one by one"
            )
        if not parts:
            if not self.entries:
                return f"{head}: it is empty"
            return f"{head}: it holds only names starting with . or _, which are not data"
        return f"{head}: it holds {', '.join(parts)}"


def _count(kind: str, paths: list[str]) -> str:
    n = len(paths)
    shown = ", ".join(paths[:_SHOWN]) + (f", +{n - _SHOWN} more" if n > _SHOWN else "")
    plural = kind if n == 1 else _plural(kind)
    return f"{n} {plural} ({shown})"


_PLURALS = {
    "file it cannot read": "files it cannot read",
    "symbolic link (never followed)": "symbolic links (never followed)",
    "FIFO, socket or device": "FIFOs, sockets or devices",
    "directory it cannot read": "directories it cannot read",
    "entry it cannot read": "entries it cannot read",
}


def _plural(kind: str) -> str:
    return _PLURALS.get(kind, kind + "s")  # ".npy file", "Zarr store", "HDF5 file"...


def walk(root: str, levels: int | None = None, hidden: str = "._") -> DirContents:
    """What the directory ``root`` holds, by the rule of this module (never following a
    link, never entering a Zarr store, at most ``MAX_ENTRIES`` entries and ``MAX_DEPTH``
    levels); ``levels``: look only that many levels down (a glob without ``**``);
    ``hidden``: names starting with these are left out (a directory's, as pyarrow leaves
    them; a glob's as the shell does: ``"."``)."""
    with collector_paused():  # 100,000 entries, no cycle
        return _walk(root, levels, hidden)


def _walk(root: str, levels: int | None, hidden: str) -> DirContents:
    out = DirContents(root)

    def note(kind: str, rel: str) -> None:
        out.other.setdefault(kind, []).append(rel)

    stack = [("", 0)]
    while stack:
        rel_dir, depth = stack.pop()
        here = os.path.join(root, rel_dir) if rel_dir else root
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=_NAME)
        except OSError as e:
            if not rel_dir:
                raise SourceError(f"cannot read the directory {root}: {e.strerror or e}") from None
            note("directory it cannot read", rel_dir)
            continue
        # the regular .npy files (most entries of most sets) taken at once; the others
        # one by one, each seeing what the walk saw before it (``mixed``)
        npy = _npy_files(entries, hidden) if out.entries + len(entries) <= MAX_ENTRIES else None
        if npy is not None and entries and all(npy):  # .npy files only: most of a set's
            out.entries += len(entries)
            pre = f"{rel_dir}/" if rel_dir else ""
            out.other.setdefault(".npy file", []).extend([pre + e.name for e in entries])
            continue
        first = npy.index(True) if npy is not None and True in npy else len(entries)
        rest: Iterable = enumerate(entries)
        if first < len(entries):
            out.entries += len(entries)
            rest = [(i, e) for i, (e, is_npy) in enumerate(zip(entries, npy)) if not is_npy]
            pre = f"{rel_dir}/" if rel_dir else ""
            npys = out.other.setdefault(".npy file", [])
            before = bool(npys)
            # this directory's .npy files, by position: noted in order with those of its
            # other entries that are .npy files too (by their magic bytes, ``X.NPY``...)
            here_npy = [pre + e.name for e, is_npy in zip(entries, npy) if is_npy]
            extra: list[tuple[int, str]] = []  # (position, path) of the others that are
        subdirs = []
        for i, entry in rest:
            if first == len(entries):  # counted one by one
                out.entries += 1
                if out.entries > MAX_ENTRIES:
                    out.stopped = f"{MAX_ENTRIES} files and directories"
                    return out
            name = entry.name
            if name[0] in hidden:
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if first < len(entries):  # what the walk had noted before this entry
                mixed = (
                    first < i
                    or before
                    or bool(extra)
                    or any(v for k, v in out.other.items() if k != ".npy file")
                )
            else:
                mixed = bool(out.other)
            kind = entry_kind(entry, mixed)
            if kind == "directory":
                if levels is not None and depth + 1 >= levels:
                    continue
                if depth + 1 >= MAX_DEPTH:
                    out.stopped = f"{MAX_DEPTH} levels of directories ({rel})"
                    if first < len(entries):  # the .npy files before it, as noted
                        npys += [r for at, r in _in_order(npy, here_npy, extra) if at < i]
                    return out
                subdirs.append(rel)
            elif kind == "Parquet file":
                out.parquet.append(rel)
            elif kind == ".npy file" and first < len(entries):
                extra.append((i, rel))
            else:
                note(kind, rel)
        if first < len(entries):
            npys += [r for _, r in _in_order(npy, here_npy, extra)] if extra else here_npy
        stack += [(d, depth + 1) for d in reversed(subdirs)]  # sorted, depth first
    out.parquet.sort()
    return out


_NAME = attrgetter("name")


def _in_order(npy: list[bool], paths: list[str], extra: list) -> list[tuple[int, str]]:
    """``(position, path)`` of a directory's ``.npy`` files (``paths``, those ``npy``
    marks) and of its ``extra`` ones, in the directory's order."""
    return sorted([*zip((i for i, is_npy in enumerate(npy) if is_npy), paths), *extra])


def _npy_files(entries: list[os.DirEntry], hidden: str) -> list[bool] | None:
    """Whether each entry of a directory is a regular file named ``*.npy`` (not starting
    with a ``hidden`` character), by the type its listing gave; None when a type cannot be
    read."""
    try:
        return [
            e.name.endswith(".npy") and e.name[0] not in hidden and e.is_file(follow_symlinks=False)
            for e in entries
        ]
    except OSError:
        return None


def entry_kind(entry: os.DirEntry, mixed: bool = False) -> str:
    """``path_kind`` of a directory's entry, from the type its listing gave (no ``lstat``
    a file: 10,000 files cost a tenth of a second less) for a link, a directory or a
    regular file with a suffix; else ``path_kind``."""
    try:
        if entry.is_symlink():
            return "symbolic link (never followed)"
        if entry.is_dir(follow_symlinks=False):
            return "Zarr store" if is_zarr_store(entry.path) else "directory"
        if entry.is_file(follow_symlinks=False) and "." in entry.name.lstrip("."):
            return name_kind(entry.name)  # a suffix: the name says what it is
    except OSError:
        pass
    return path_kind(entry.path, mixed)


def path_kind(path: str, mixed: bool = False) -> str:
    """What the entry at ``path`` is, its link never followed: ``"directory"`` (to walk),
    ``"Parquet file"``, or a kind named in the error (``.npy file``, ``Zarr store``,
    ``symbolic link``...); ``mixed``: other kinds were seen, so a file without a suffix is
    not opened to read its magic bytes."""
    try:
        st = os.lstat(path)
    except OSError:
        return "entry it cannot read"
    if stat.S_ISLNK(st.st_mode):
        return "symbolic link (never followed)"
    if stat.S_ISDIR(st.st_mode):
        return "Zarr store" if is_zarr_store(path) else "directory"
    if not stat.S_ISREG(st.st_mode):
        return "FIFO, socket or device"
    name = os.path.basename(path)
    kind = name_kind(name)
    if kind == "other file" and not os.path.splitext(name)[1] and not mixed and st.st_size >= 8:
        try:  # Hive's part files have no suffix
            with open(path, "rb") as f:
                magic = f.read(4)
        except OSError:
            return "file it cannot read"
        return _MAGIC.get(magic, kind)
    return kind


def name_kind(name: str) -> str:
    """What a file is by its name's suffix: ``"Parquet file"``, ``".npy file"``, ``".npz
    file"``, ``".zip file"``, ``".tar file"``, ``"HDF5 file"``, ``"Arrow file"``,
    ``"checkpoint file"``, else ``"other file"``."""
    name = name.lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "Parquet file"
    suffix = os.path.splitext(name)[1]
    if suffix in (".npy", ".npz", ".zip", ".tar"):
        return suffix + " file"
    if suffix in ARROW_SUFFIXES:
        return "Arrow file"
    if suffix in CHECKPOINT_SUFFIXES:
        return "checkpoint file"
    if suffix in H5_SUFFIXES:
        return "HDF5 file"
    return "other file"


def parquet_dataset(root: str) -> list[str]:
    """The absolute paths of the Parquet files of the dataset ``root``, sorted; a
    ``SourceError`` saying what it holds when it is not one (``walk``'s rule)."""
    contents = walk(root)
    if not contents.is_parquet_dataset:
        raise SourceError(contents.describe())
    return contents.parquet_paths()
