"""Indices and shapes as text, the one way every message writes them, and the names of a
group's arrays (``member_path``)."""

from __future__ import annotations

from collections.abc import Sequence


def fmt_index(index: Sequence[int]) -> str:
    """An index or a shape as Python writes a tuple: ``(2, 1)``, ``(5,)``, ``()``."""
    return repr(tuple(map(int, index)))  # Python's ints: NumPy 2's repr names its types


def member_path(path: str, inner: str | None = None) -> str:
    """The name, in a group, of what ``inner`` names in its member ``path``: ``path``
    itself for the member's own (``inner`` None); in a member that is itself a group (the
    groups ``merge_reports`` makes of groups), the two joined as fastfinite paths are, the
    path that scans it: ``m1.h5:/x`` for an HDF5 path (starting with ``/``), ``g.zarr/y/z``
    for a Zarr path or a variable's name. ``ScanReport.member`` finds the array it names."""
    if inner is None:
        return path
    return f"{path}:{inner}" if inner.startswith("/") else f"{path}/{inner}"
