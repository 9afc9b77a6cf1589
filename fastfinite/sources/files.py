"""Array and checkpoint files by their suffix: the one table of openers (``OPENERS``,
``BUFFER_OPENERS``) that ``open._open_path``, directories and tar shards use.

``open_file(path, options)`` gives a ``.npy``'s source, or the group ``[(key, factory),
...]`` of a checkpoint's tensors (``.safetensors``, a safetensors ``*.index.json`` or a
directory holding one, ``.gguf``, ``.npz``, PyTorch ``.pt``/``.pth``/``.bin``), each tensor
keyed by its name; ``open_buffer(name, data)`` the same from bytes in memory (a member of a
tar): ``.npy``, ``.npz``, ``.safetensors``, ``.pt``/``.pth``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..errors import SourceError
from ..options import ScanOptions

Target = Any  # a Source, or [(key, factory), ...] (``open.Target``)


def _npy(path: str, name: str, options: ScanOptions) -> Target:
    from .ndarray import open_npy

    return open_npy(path, name, options.raw_dtype)


def _npz(path: str, name: str, options: ScanOptions) -> Target:
    from .npz import open_npz

    return open_npz(path, name, options)


def _safetensors(path: str, name: str, options: ScanOptions) -> Target:
    from .safetensors import open_safetensors

    return open_safetensors(path, name, options)


def _index(path: str, name: str, options: ScanOptions) -> Target:
    from .safetensors import open_index

    return open_index(path, name, options)


def _folder(path: str, name: str, options: ScanOptions) -> Target:
    from .safetensors import open_folder

    return open_folder(path, name, options)


def _torch(path: str, name: str, options: ScanOptions) -> Target:
    from .torch_zip import open_torch

    return open_torch(path, name, options)


def _gguf(path: str, name: str, options: ScanOptions) -> Target:
    from .gguf import open_gguf

    return open_gguf(path, name, options)


OPENERS: dict[str, Callable[[str, str, ScanOptions], Target]] = {
    ".npy": _npy,
    ".npz": _npz,
    ".safetensors": _safetensors,
    ".index.json": _index,
    ".pt": _torch,
    ".pth": _torch,
    ".bin": _torch,
    ".gguf": _gguf,
}

# a directory: a sharded checkpoint when it holds one index, else None
DIR_OPENERS: dict[str, Callable[[str, str, ScanOptions], Target]] = {"dir": _folder}

BUFFER_OPENERS: dict[str, Callable[[bytes | memoryview, str, Any], Target]] = {}


def _npy_buffer(data, name, options):
    from .npz import npy_bytes

    return npy_bytes(data, name, options)


def _npz_buffer(data, name, options):
    from .npz import npz_bytes

    return npz_bytes(data, name, options)


def _safetensors_buffer(data, name, options):
    from .safetensors import safetensors_bytes

    return safetensors_bytes(data, name, options)


def _torch_buffer(data, name, options):
    from .torch_zip import torch_bytes

    return torch_bytes(data, name, options)


BUFFER_OPENERS.update(
    {".npy": _npy_buffer, ".npz": _npz_buffer, ".safetensors": _safetensors_buffer,
     ".pt": _torch_buffer, ".pth": _torch_buffer}
)  # fmt: skip

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
