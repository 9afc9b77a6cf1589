"""Entries of a Zarr group's tree in its store that are not part of the Zarr hierarchy: a
``.npy`` or Parquet file dropped into a store, a folder without Zarr metadata. zarr never
reads them (zarr-python only warns, once per entry, while it lists a group), so a scan lists
them in ``report.skipped`` with what they are, and the group's report has a ``stray_file``
finding (a warning) for each: it is not ``clean``. A folder with Zarr metadata that the
group's consolidated metadata does not list is data that zarr reads or not depending on how
the store is opened: an ``unlisted_member`` (an error: it is not scanned).

Looked at: the top of each group's folder (names that are no member and no metadata) and
the top of each array's folder (names that begin no chunk key of its encoding); names
starting with ``.`` are not looked at (``.zattrs``, ``.zmetadata``, ``.DS_Store``...). A
store that cannot be listed, or not reliably (HTTP: an HTML index scraped for links), has
none found.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from ..errors import SourceError
from .base import of_type
from .chunked import key_parser
from .walk import ZARR_MARKERS, name_kind, path_kind, walk
from .zarr_files import local_folder

METADATA = ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")


def stray_entries(group: Any, nodes: list[tuple[str, Any]]) -> dict[str, tuple[str, str]]:
    """``{path: (what it is, finding kind)}`` of the entries below ``group`` that are not
    part of its Zarr hierarchy, by path relative to the group (``nodes``: the group's
    members at any depth, ``(path, array or group)``, as ``group.members(max_depth=None)``
    gives them). The kind is ``stray_file``, or ``unlisted_member`` for a folder with Zarr
    metadata that the group's (consolidated) metadata does not list."""
    from zarr.core.sync import sync

    store = group.store_path.store
    protocols = getattr(getattr(store, "fs", None), "protocol", ())
    protocols = {protocols} if isinstance(protocols, str) else set(protocols)
    if protocols & {"http", "https"}:
        return {}  # its listing is a scraped HTML index: sort links, folders as "x/"
    root = group.store_path.path.strip("/")
    known = {p for p, _ in nodes}
    # (path of a group or array, which of its names are part of the store)
    folders: list[tuple[str, Callable[[str], bool]]] = [("", lambda n: n in METADATA)]
    for path, node in nodes:
        if of_type(node, "zarr", "Array"):
            folders.append((path, _array_names(node)))
        else:
            folders.append((path, lambda n: n in METADATA))

    def key(path: str) -> str:
        return "/".join(p for p in (root, path) if p)

    async def names(prefix: str) -> list[str] | None:
        try:
            return [k async for k in store.list_dir(prefix)]
        except Exception:  # a store that cannot be listed: nothing is known to be stray
            return None

    async def listings() -> list[list[str] | None]:
        return await asyncio.gather(*(names(key(path)) for path, _ in folders))

    strays = []
    for (path, part_of_store), found in zip(folders, sync(listings())):
        for name in (n.rstrip("/") for n in found or ()):
            rel = f"{path}/{name}" if path else name
            if not (name.startswith(".") or rel in known or part_of_store(name)):
                strays.append(rel)

    async def has_metadata(rel: str) -> bool:  # a node zarr's listing did not show
        if name_kind(rel) != "other file":
            return False  # a .npy, Parquet, HDF5... file by its name: no folder to look in
        try:
            found = await asyncio.gather(*(store.exists(f"{key(rel)}/{m}") for m in ZARR_MARKERS))
        except Exception:
            return False
        return any(found)

    async def nodes_among() -> list[bool]:
        return await asyncio.gather(*(has_metadata(rel) for rel in strays))

    marked = sync(nodes_among()) if strays else []
    folder = local_folder(group) if strays else None
    return {rel: _what(folder, rel, node) for rel, node in sorted(zip(strays, marked))}


def _array_names(array: Any) -> Callable[[str], bool]:
    """Whether a name at the top of an array's folder is part of it: its metadata, or the
    beginning of a chunk key (``c`` of ``c/0/1``, ``0`` of ``0/1``, all of ``0.1``)."""
    encode = array.metadata.encode_chunk_key
    ndim = len(array.shape)
    sample = encode((7,) * ndim)
    if "/" not in sample:
        parse = key_parser(encode, ndim)
        return lambda n: n in METADATA or parse(n) is not None
    head = sample.split("/", 1)[0]
    if "7" not in head:
        return lambda n: n in METADATA or n == head
    return lambda n: n in METADATA or n.isdigit()


def _what(folder: str | None, rel: str, node: bool) -> tuple[str, str]:
    """What a stray entry is (``"a .npy file, not part of the Zarr store"``; a local folder
    says what it holds, by ``walk``'s rule), and its finding kind; ``folder``: the group's
    on a local disk, else None; ``node``: it holds Zarr metadata."""
    if node:
        return (
            "a Zarr array or group that the group's consolidated metadata does not list: "
            "zarr reading that metadata never reads it (opened without it, it does); not "
            "scanned",
            "unlisted_member",
        )
    kind = name_kind(rel.rsplit("/", 1)[-1])
    held = ""
    if folder is not None:
        path = os.path.join(folder, *rel.split("/"))
        kind = path_kind(path)
        if kind == "directory":
            try:
                parts = walk(path).holdings()
                held = f": it holds {', '.join(parts)}" if parts else ": it is empty"
            except SourceError:  # a folder it cannot read
                kind = "directory it cannot read"
    elif kind == "other file":
        kind = "file or folder"
    return f"{_article(kind)}, not part of the Zarr store{held}", "stray_file"


_NAMES = {
    "other file": "file",
    "directory": "folder",
    "directory it cannot read": "folder it cannot read",
}


def _article(kind: str) -> str:
    kind = _NAMES.get(kind, kind)
    return ("an " if kind[0] in "aeiouH" else "a ") + kind
