"""Array and checkpoint files by their suffix: the one table of openers (``OPENERS``,
``BUFFER_OPENERS``) that ``open.PATH_OPENERS``, directories and tar shards use.

``open_file(path, options)`` gives a ``.npy``'s source, or the group ``[(key, factory),
...]`` of a checkpoint's tensors (``.safetensors``, a safetensors ``*.index.json`` or a
directory holding one, ``.gguf``, ``.npz``, PyTorch ``.pt``/``.pth``/``.bin``), each tensor
keyed by its name; ``open_buffer(name, data)`` the same from bytes in memory (a member of a
tar): ``.npy``, ``.npz``, ``.safetensors``, ``.pt``/``.pth``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from ..errors import SourceError
from ..options import ScanOptions

Target = Any  # a Source, or [(key, factory), ...] (``open.Target``)


def _npy(path: str, name: str, options: ScanOptions) -> Target:
    from .ndarray import open_npy

    return open_npy(path, name, options.raw_dtype)


def _lazy(module: str, function: str) -> Callable[..., Target]:
    """``module.function``, its module imported on the first call (the readers import
    numpy's zip, json, gguf... only when a file of their kind is opened)."""

    def call(*args: Any) -> Target:
        return getattr(importlib.import_module(f".{module}", __package__), function)(*args)

    call.__name__ = function
    return call


_torch = _lazy("torch_zip", "open_torch")


OPENERS: dict[str, Callable[[str, str, ScanOptions], Target]] = {
    ".npy": _npy,
    ".npz": _lazy("npz", "open_npz"),
    ".safetensors": _lazy("safetensors", "open_safetensors"),
    ".index.json": _lazy("safetensors", "open_index"),
    ".pt": _torch,
    ".pth": _torch,
    ".bin": _torch,
    ".gguf": _lazy("gguf", "open_gguf"),
}

# a directory: a sharded checkpoint when it holds one index, else None
DIR_OPENERS: dict[str, Callable[[str, str, ScanOptions], Target]] = {
    "dir": _lazy("safetensors", "open_folder")
}

_torch_bytes = _lazy("torch_zip", "torch_bytes")
BUFFER_OPENERS: dict[str, Callable[[bytes | memoryview, str, Any], Target]] = {
    ".npy": _lazy("npz", "npy_bytes"),
    ".npz": _lazy("npz", "npz_bytes"),
    ".safetensors": _lazy("safetensors", "safetensors_bytes"),
    ".pt": _torch_bytes,
    ".pth": _torch_bytes,
}

ARRAY_FILE_SUFFIXES: tuple[str, ...] = tuple(OPENERS)


def suffix_of(path: str) -> str:
    """The suffix ``open_file`` goes by, lower case (``.index.json`` of a safetensors index)."""
    low = path.lower()
    if low.endswith(".safetensors.index.json"):
        return ".index.json"
    return os.path.splitext(low)[1]


def open_file(path: str, options: ScanOptions | None = None, name: str | None = None) -> Target:
    """The source of an array file, or the group ``[(key, factory), ...]`` of a checkpoint's
    tensors, by the suffix of ``path``; None when the suffix is none of
    ``ARRAY_FILE_SUFFIXES``.

    Parameters
    ----------
    path : str
        A local file (or a directory holding one safetensors ``*.index.json``).
    options : ScanOptions, optional
        ``raw_dtype`` and ``on_error`` are used (a member that cannot be read is a
        ``SourceError``, or with ``on_error="report"`` a member listed in ``skipped``).
    name : str, optional
        What the report calls the file (default: ``path`` as given).
    """
    options = options or ScanOptions()
    name = path if name is None else name
    opener = OPENERS.get(suffix_of(path))
    if opener is None and os.path.isdir(path):
        opener = DIR_OPENERS.get("dir")
    return None if opener is None else opener(path, name, options)


def open_buffer(name: str, data: bytes | memoryview, options: ScanOptions | None = None) -> Target:
    """``open_file`` of bytes in memory, kept and viewed in place (never copied): a
    ``.npy``'s source or the group of the arrays of a ``.npz``, ``.safetensors`` or
    ``.pt``/``.pth`` named ``name``; ``SourceError`` for another suffix."""
    opener = BUFFER_OPENERS.get(suffix_of(name))
    if opener is None:
        known = ", ".join(sorted(BUFFER_OPENERS))
        raise SourceError(f"{name}: cannot read arrays from a file of this kind in memory "
                          f"(known: {known})")  # fmt: skip
    return opener(data, name, options or ScanOptions())
