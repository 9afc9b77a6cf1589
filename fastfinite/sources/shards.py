"""Shard sets: a directory, a glob (``"parts/*.npy"``, ``"train/**/*.npy"``) or a list of
paths of array files of any kind, scanned as one dataset.

Each file is a member, keyed by its path relative to the directory (to the glob's fixed
prefix: the components before the first one with ``*``, ``?`` or ``[``; to the listed
files' common folder); a file of several arrays (``.npz``, safetensors, HDF5, a Zarr group,
a table's columns, a tar shard's members) gives one member per array, keyed
``"rel/path.npz/name"`` (``"rel/path.h5:/group/x"`` for HDF5, as fastfinite names a
dataset in a file). Entries that are not array files are members whose factory raises
``SkippedMemberError`` saying what they are: ``report.skipped`` lists them. The walk is
``walk``'s: bounded, links never followed, Zarr stores never entered.

A file that cannot be opened is a ``SourceError`` naming it; with ``on_error="report"`` a
member listed in ``skipped`` with an ``unreadable_member`` finding, and the rest is scanned.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from fnmatch import fnmatchcase
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import Any

from ..compute.pools import collector_paused
from ..errors import (
    FastFiniteError,
    InvalidArgumentError,
    SkippedMemberError,
    SourceError,
    UnsupportedDtypeError,
)
from .base import reader_errors
from .ndarray import open_npy
from .walk import ARRAY_KINDS, path_kind, walk

GLOB_CHARS = "*?["

Members = list[tuple[str, Any]]  # [(key, factory), ...]


class ShardSet(list):
    """The ``(key, factory)`` members of a shard set (its type tells the local engine to
    count progress over the whole set), ``paths``, the local array files it reads,
    ``raw``, how to read its small members whole (a tar's, a checkpoint's tensors), by key
    (``small.RawNpy``), ``files``, the path of each ``.npy`` file member, by key (read
    whole when small), and ``skips``, the error of each entry that is not scanned (a
    label, a link...); ``raw`` and ``skips`` default to what the factories tell
    (``factory.raw_npy``, ``factory.skip``)."""

    def __init__(
        self,
        members,
        paths: list[str],
        raw: dict | None = None,
        skips: dict | None = None,
        files: dict | None = None,
        only_files: bool = False,
        reopen: list | None = None,
    ):
        super().__init__(members)
        self.paths = paths
        if raw is None:  # what the factories tell: how to read their members whole
            raw = {k: f.raw_npy for k, f in self if getattr(f, "raw_npy", None)}
        self.raw = raw
        # the entries that are not scanned, by key: the error their factory raises
        if skips is None:
            skips = {k: f.skip for k, f in self if getattr(f, "skip", None) is not None}
        self.skips = skips
        # the plain ``.npy`` files of the set, by key: their paths (read whole when small,
        # ``raw_dtype`` the scan's; their name in a report is their path)
        self.files = files if files is not None else {}

        # every entry a ``.npy`` file: ``files`` and ``paths`` its entries' keys and paths,
        # in order (``npy_files``)
        self.only_files = only_files
        # files whose members may be opened again elsewhere (a part of a tar scanned where
        # a task runs, ``engines.dask``): ``(first, stop, opener)``, entries ``first:stop``
        # the ``(key, factory)`` pairs ``opener()`` gives (a ``partial``, the file's path
        # its first argument)
        self.reopen = reopen if reopen is not None else []


def is_glob(path: str) -> bool:
    """A local path with glob characters that names no file as it is."""
    return "://" not in path and any(c in path for c in GLOB_CHARS) and not os.path.exists(path)


def glob_prefix(pattern: str) -> tuple[str, list[str]]:
    """The fixed folder of a glob (its components before the first with a glob
    character) and the pattern's components below it."""
    parts = pattern.split("/")
    i = next(i for i, p in enumerate(parts) if any(c in p for c in GLOB_CHARS))
    root = "/".join(parts[:i]) or ("/" if pattern.startswith("/") else ".")
    return root, [p for p in parts[i:] if p not in ("", ".")]


def _matches(parts: list[str], pats: list[str]) -> bool:
    """Whether path components match pattern components (``**``: any number of folders;
    ``*``, ``?``, ``[...]`` never cross a ``/``), as the shell's glob matches them: a
    name starting with ``.`` only by a part starting with ``.`` (never by ``**``)."""
    if not pats:
        return not parts
    if pats[0] == "**":
        deeper = bool(parts) and parts[0][:1] != "." and _matches(parts[1:], pats)
        return _matches(parts, pats[1:]) or deeper
    if not parts or (parts[0][:1] == "." and pats[0][:1] != "."):
        return False
    return fnmatchcase(parts[0], pats[0]) and _matches(parts[1:], pats[1:])


def open_glob(pattern: str, options) -> ShardSet:
    """The members of the files and Zarr stores a glob matches, below its fixed prefix;
    a ``SourceError`` when it matches nothing."""
    root, pats = glob_prefix(pattern)
    if not os.path.isdir(root):
        raise SourceError(f"no file matches {pattern}: {root} is not a directory")
    levels = None if "**" in pats else len(pats)
    # the shell's rule: ``*`` matches names starting with ``_``, and with ``.`` only where
    # the pattern's part starts with one too
    contents = walk(root, levels, "" if any(p.startswith(".") for p in pats) else ".")
    if contents.stopped:
        raise SourceError(
            f"{pattern}: fastfinite stopped looking after {contents.stopped} in {root}; "
            "give a narrower pattern"
        )
    items = [(rel, kind) for rel, kind in contents.items() if _matches(rel.split("/"), pats)]
    if not items:
        raise SourceError(f"no file matches {pattern}")
    return _set(root, items, options, root)


def open_directory(root: str, contents, options) -> ShardSet:
    """The members of a directory that ``walk`` found to be a shard set."""
    npy = contents.only(".npy file")
    if npy is not None:  # most sets: their paths sorted, not paired with their kind
        with collector_paused():
            return _npy_set(root, npy, options)
    return _set(root, contents.items(), options, root)


def open_list(paths: list, options) -> ShardSet:
    """The members of listed files, stores and directories, keyed by their path relative to
    their common folder."""
    given = [os.fspath(p) for p in paths]
    for p in given:
        if "://" in p:
            raise InvalidArgumentError(
                f"a list of paths holds the URL {p}: list local files, or scan a URL alone"
            )
        if not os.path.lexists(p):
            raise SourceError(f"no such file: {p}")
    absolute = [os.path.abspath(p) for p in given]
    seen: dict[str, str] = {}
    folders: dict[str, str] = {}  # each folder's real path, looked up once
    for p, a in zip(given, absolute):
        folder, name = os.path.split(a)
        if folder not in folders:
            folders[folder] = os.path.realpath(folder)
        # ``realpath(a)``: its folder's, joined to its name unless that is a link
        real = os.path.realpath(a) if os.path.islink(a) else os.path.join(folders[folder], name)
        if real in seen:
            raise InvalidArgumentError(f"{p} is listed twice (also as {seen[real]})")
        seen[real] = p
    common = os.path.commonpath(list(folders))
    below = os.path.join(common, "")  # each path starts with it (its folder is below)
    items = []
    for a in absolute:
        rel = a[len(below) :] if a.startswith(below) else os.path.relpath(a, common)
        rel = rel.replace(os.sep, "/")
        kind = path_kind(a)
        if kind == "directory":
            contents = walk(a)
            if contents.stopped:
                raise SourceError(contents.describe())
            items += [(f"{rel}/{r}", k) for r, k in contents.items()]
        else:
            items.append((rel, kind))
    return _set(common, items, options)


def _set(root: str, items: list[tuple[str, str]], options, within: str | None = None):
    """The set of ``items`` below ``root``; ``within``: the folder given (a directory, a
    glob's fixed prefix), which no file's links may lead out of."""
    with collector_paused():  # tens of thousands of factories, no cycle
        return _members_of(root, items, options, within)


def _members_of(root: str, items: list[tuple[str, str]], options, within=None) -> ShardSet:
    if items and set(map(itemgetter(1), items)) == {".npy file"}:
        return _npy_set(root, [rel for rel, _ in items], options)
    out, paths, files, reopen = [], [], {}, []
    posix = os.sep == "/"
    prefix = os.path.join(root, "")  # root and its separator: ``os.path.join(root, rel)``
    for rel, kind in items:
        path = prefix + rel if posix else os.path.join(root, *rel.split("/"))
        if kind == ".npy file":  # one array: mapped when its member is scanned, not before
            paths.append(path)
            out.append((rel, partial(_open_npy_member, path, options)))  # _npy_factory
            files[rel] = path  # and read whole, when small
        elif kind in ARRAY_KINDS:
            paths.append(path)
            members = file_members(path, rel, kind, options, within)
            if kind in REOPENED:
                opener = partial(file_members, path, rel, kind, options, within)
                reopen.append((len(out), len(out) + len(members), opener))
            out += members
        else:
            out.append((rel, _skip(_WHY.get(kind, f"{_article(kind)}"), _kind_of(kind))))
    keys = [k for k, _ in out]
    if len(set(keys)) < len(keys):  # one member's report would replace the other's
        seen: set = set()
        twice = next(k for k in keys if k in seen or seen.add(k))
        raise SourceError(f"{root}: two members are both keyed {twice!r}: one would hide the other")
    return ShardSet(out, paths, files=files, reopen=reopen)  # raw and skips: the factories'


def open_tar_set(path: str, options) -> ShardSet:
    """A tar scanned alone: its members keyed below its name, a set."""
    members = tar_members(path, options)
    opener = partial(tar_members, path, options)
    return ShardSet(members, [os.path.abspath(path)], reopen=[(0, len(members), opener)])


def tar_members(path: str, options) -> Members:
    """A tar's members keyed below its name (``open_tar_set``)."""
    from .tars import open_tar

    base = os.path.basename(path.rstrip("/"))
    return [(f"{base}/{k}", f) for k, f in open_tar(path, options)]


# the kinds of file whose members a set may open again where a part is scanned (their
# small members are read whole: many to a task)
REOPENED = frozenset({".tar file", ".npz file", "checkpoint file"})


def _npy_set(root: str, rels: list[str], options) -> ShardSet:
    """``_members_of`` a set of ``.npy`` files only, made without a loop of Python."""
    if os.sep == "/":
        prefix = os.path.join(root, "")
        paths = [prefix + rel for rel in rels]
    else:
        paths = [os.path.join(root, *rel.split("/")) for rel in rels]
    return npy_files(rels, paths, options)


def npy_files(keys: list[str], paths: list[str], options) -> ShardSet:
    """The set of the ``.npy`` files ``paths``, keyed ``keys`` (a part of a set, scanned
    where it is sent: ``engines.dask``)."""
    factories = map(partial, repeat(_open_npy_member), paths, repeat(options))  # _npy_factory
    return ShardSet(list(zip(keys, factories)), paths, {}, {}, dict(zip(keys, paths)), True)


_WHY = {  # why an entry of a set is not scanned, by its ``walk`` kind
    "other file": "not an array file (by its name)",
    ".zip file": "a .zip file: not scanned in a set (a zipped Zarr store: scan it alone)",
    "symbolic link (never followed)": "a symbolic link: never followed",
    "FIFO, socket or device": "a FIFO, socket or device: not a file",
    "directory it cannot read": "a directory fastfinite cannot read",
    "file it cannot read": "a file fastfinite cannot read",
    "entry it cannot read": "an entry fastfinite cannot read",
}


def _kind_of(kind: str) -> str | None:
    """The finding a skipped entry gets: none for a file that holds no array, or a link
    (never followed, on purpose); ``unreadable_member`` for one that could not be read."""
    return "unreadable_member" if "cannot read" in kind else None


def _article(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _skip(why: str, kind: str | None = None) -> Callable[[], Any]:
    error = SkippedMemberError(why, kind)

    def skipped():
        raise error

    skipped.skip = error  # what it raises, known without calling it (``ShardSet.skips``)
    return skipped


def join(rel: str, inner: str) -> str:
    """The key of the array ``inner`` of the file ``rel``: ``rel:/x`` for an HDF5 path,
    else ``rel/inner`` (``report.member`` finds either)."""
    return f"{rel}:{inner}" if inner.startswith("/") else f"{rel}/{inner.strip('/')}"


def file_members(path: str, rel: str, kind: str, options, within: str | None = None) -> Members:
    """The members of one array file or store of a set, keyed below ``rel``; a file that
    cannot be opened is an error naming it, or with ``on_error="report"`` one member whose
    factory raises ``SkippedMemberError`` (an ``unreadable_member`` finding). ``within``:
    the folder no link of an HDF5 file may lead out of."""
    if kind == ".npy file":
        return [(rel, _npy_factory(path, options))]
    try:
        with reader_errors(path):
            target = _open_file(path, kind, options, within)
    except SkippedMemberError as e:
        return [(rel, _skip(str(e), e.kind))]
    except FastFiniteError as e:
        if options is None or options.on_error != "report":
            raise
        return [(rel, _skip(f"cannot be read: {e}", "unreadable_member"))]
    if target is None:
        return [(rel, _skip(f"{_article(kind)} that fastfinite cannot read"))]
    if isinstance(target, list):
        members = [
            (join(rel, key), _guarded(factory, path, key, options)) for key, factory in target
        ]
        return members or [(rel, _skip("it holds no array"))]
    return [(rel, lambda: target)]


def _npy_factory(path: str, options) -> Callable[[], Any]:
    """The factory of a ``.npy`` file: mapped when its member is scanned, not before (a
    ``partial``: 10,000 of them cost little to make)."""
    return partial(_open_npy_member, path, options)


def _open_npy_member(path: str, options) -> Any:
    """A ``.npy`` file of a set opened (``_guarded``'s errors: naming the file, or with
    ``on_error="report"`` a skipped member)."""
    raw = getattr(options, "raw_dtype", None)
    return _guarded(partial(open_npy, path, raw_dtype=raw), path, None, options)()


def _guarded(factory, path: str, key: str | None, options) -> Callable[[], Any]:
    """A member's factory whose errors name the file and the member, and which, with
    ``on_error="report"``, makes them a skipped member with an ``unreadable_member``
    finding (a factory that only raises what it says it does, ``skip``, as it is)."""
    if getattr(factory, "skip", None) is not None:
        return factory

    def opened():
        try:
            with reader_errors(path, key):
                return factory()
        except (UnsupportedDtypeError, SkippedMemberError):
            raise
        except FastFiniteError as e:
            if options is None or options.on_error != "report":
                raise
            raise SkippedMemberError(f"cannot be read: {e}", "unreadable_member") from None

    for attr in ("raw_npy", "skip"):  # what the factory tells without being called
        if getattr(factory, attr, None) is not None:
            setattr(opened, attr, getattr(factory, attr))
    return opened


def _open_file(path: str, kind: str, options, within: str | None = None) -> Any:
    """What one file of a set opens as: a source, ``[(key, factory), ...]``, or None."""
    from . import hdf5, tables

    if kind == "Parquet file":
        return list(tables.open_parquet(path))
    if kind == "Arrow file":
        from .arrow import open_arrow

        return list(open_arrow(path))
    if kind == ".tar file":
        from .tars import open_tar

        return open_tar(path, options)
    if kind == "HDF5 file":  # its links never lead out of the set's folder
        return hdf5.open_h5(path, None, within)
    if kind == "Zarr store":
        from . import zarr
        from .base import of_type

        node, _ = zarr.open_zarr(path)
        if of_type(node, "zarr", "Group"):
            return zarr.group_members(node, path)
        return zarr.ZarrSource(node, path)
    from . import files

    return files.open_file(path, options)
