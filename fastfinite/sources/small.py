"""Small ``.npy`` members of a set (a file, a tar shard's member) as bytes read whole: what
``engines.batched`` scans many of together. Each member's factory, which opens it as a
source, stays what scans it alone; ``RawNpy`` says how to read its bytes whole (a tar
member's, an ``.npz`` member's, a small safetensors tensor's with a header made for it
(``tensor_raw``) ride beside its factory, ``factory.raw_npy``; a file's is made by
``engines.batched`` from its path, ``ShardSet.files``), and ``read_rows`` reads files of one
kind each into its row of one array."""

from __future__ import annotations

import functools
import io
import math
import os
import stat
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

SMALL_NPY = 1 << 20  # .npy members of at most this many bytes may be scanned together


class RawNpy(NamedTuple):
    """How to read a small ``.npy`` member's bytes whole (``engines.batched``), beside its
    factory, which stays what scans it alone: ``name``, what its source is called; the
    file ``path``, or ``view()``, a view of a tar member's bytes; ``raw_dtype``: the scan's
    ``raw_dtype``, for a file."""

    name: str
    path: str | None = None
    view: Callable[[], Any] | None = None
    raw_dtype: str | None = None

    def read(self) -> Any:
        """Its bytes, or None when it is not small (``SMALL_NPY``) or cannot be read (its
        factory says why)."""
        if self.path is not None:
            return read_small_file(self.path)
        try:
            return self.view()
        except Exception:  # noqa: BLE001 - a tar gone since it was listed: its factory says so
            return None

    def head(self) -> tuple[Any, int] | None:
        """``(its first bytes, its size)``: enough for its header (``HEAD`` bytes of a
        file, a tar member's view whole: nothing is read until used); None as ``read``."""
        if self.path is not None:
            return read_small_file(self.path, HEAD)
        data = self.read()
        return None if data is None else (data, len(data))


HEAD = 4096  # bytes of a file read for its .npy header alone (the header is ~128 bytes)


def tensor_raw(name: str, dtype: np.dtype, shape: tuple, view: Callable[[], Any]) -> RawNpy | None:
    """The ``RawNpy`` of a small tensor stored raw in C order without a ``.npy`` header (a
    safetensors tensor): ``view()``, its bytes, joined to a header made for them
    (``npy_head``); None when it is not small or its dtype is none that a ``.npy`` header
    names as it is (bfloat16, float8: ml_dtypes', scanned alone)."""
    head = npy_head(np.dtype(dtype), tuple(shape))
    if head is None or math.prod(shape) * dtype.itemsize > SMALL_NPY:
        return None
    return RawNpy(name, view=lambda: head + view())


@functools.lru_cache(maxsize=1024)
def npy_head(dtype: np.dtype, shape: tuple) -> bytes | None:
    """The ``.npy`` header (version 1.0, C order) of an array of ``dtype`` and ``shape``,
    or None when ``dtype`` would not read back from it as it is."""
    fmt = np.lib.format
    descr = fmt.dtype_to_descr(dtype)
    try:
        if fmt.descr_to_dtype(descr) != dtype or dtype.hasobject:
            return None
    except (TypeError, ValueError):
        return None
    f = io.BytesIO()
    try:
        fmt.write_array_header_1_0(f, {"descr": descr, "fortran_order": False, "shape": shape})
    except ValueError:  # a header past 64 kB (thousands of axes): scanned alone
        return None
    return f.getvalue()


def read_small_file(path: str, head: int | None = None) -> Any:
    """The bytes of the file ``path`` when it holds at most ``SMALL_NPY`` bytes, else (or
    when it cannot be read) None; with ``head``, ``(its first head bytes, its size)``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO never waits
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        size = st.st_size
        if not stat.S_ISREG(st.st_mode) or size > SMALL_NPY:
            return None
        if head is not None:
            return os.read(fd, min(head, size)), size
        data = os.read(fd, size + 1)
        return data if len(data) == size else None
    except OSError:
        return None
    finally:
        os.close(fd)


FIRST = 1 << 14  # bytes first read of each file of ``read_files``


def read_files(paths: list, budget: int) -> list:
    """The bytes of the files ``paths`` in order (None for a path that is None, a file
    larger than ``SMALL_NPY`` or one that cannot be read), as ``read_small_file`` reads
    them, until ``budget`` bytes are read: the list may end before ``paths`` does. A file
    of fewer than ``FIRST`` bytes is read in one call, without ``fstat`` (its entry's type
    said it is a regular file; a FIFO put in its place gives nothing, not open as
    non-blocking)."""
    out: list = []
    append = out.append
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    open_, read, close = os.open, os.read, os.close
    held = 0
    for path in paths:
        if path is None:
            append(None)
            continue
        try:
            fd = open_(path, flags)
        except OSError:
            append(None)
            continue
        try:
            data = read(fd, FIRST)
            if len(data) == FIRST:
                data = _rest(fd, data)
        except OSError:
            data = None
        finally:
            close(fd)
        append(data)
        if data is not None:
            held += len(data)
            if held >= budget:
                break
    return out


def _rest(fd: int, first: bytes) -> bytes | None:
    """A file's bytes after its ``first`` ones, read as ``read_small_file`` reads it."""
    st = os.fstat(fd)
    size = st.st_size
    if not stat.S_ISREG(st.st_mode) or size > SMALL_NPY or size < len(first):
        return None
    rest = os.read(fd, size - len(first) + 1)
    return first + rest if len(first) + len(rest) == size else None


def read_rows(paths: list, size: int) -> tuple[np.ndarray, list[int], dict[int, Any]]:
    """The files ``paths`` (None: not a file to read) read each into its row of ``size``
    bytes of one array (the size most files of a set share: no bytes object a file, no
    copy to stack them): ``(rows, got, longer)``, ``got`` the bytes read of each file (-1
    when it cannot be opened or read, as ``read_files``'s None), ``longer`` the bytes of
    each file longer than ``size`` (None past ``SMALL_NPY``), as ``read_files`` reads it."""
    rows = np.empty((len(paths), size), np.uint8)
    flat = memoryview(rows.reshape(-1))
    extra = memoryview(bytearray(FIRST))  # what a file holds past its row
    got: list[int] = []
    append = got.append
    longer: dict[int, Any] = {}
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    open_, readv, close = os.open, os.readv, os.close
    at = 0
    for i, path in enumerate(paths):
        row = flat[at : at + size]
        at += size
        if path is None:
            append(-1)
            continue
        try:
            fd = open_(path, flags)
        except OSError:
            append(-1)
            continue
        try:
            n = readv(fd, [row, extra])
            if n > size:
                first = bytes(row) + bytes(extra[: n - size])
                longer[i] = _rest(fd, first) if n == size + FIRST else first
        except OSError:
            n = -1
        finally:
            close(fd)
        append(n)
    return rows, got, longer
