"""The Source protocol: what every input adapter provides. The required members are abstract;
the optional ones have their defaults here, so the engines ask a source and never probe it."""

from __future__ import annotations

import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..compute.blocks import Region
from ..errors import FastFiniteError, SourceError

REGION_BYTES = 4 << 20  # regions of a store, in whole storage units, when the scan sets none
SMALL_BYTES = 32 << 20  # an array in this process smaller than this is one region, one thread


def regular_file(path: str, name: str) -> str:
    """The absolute path of a file that exists and is a regular file, else ``SourceError``
    (a FIFO or a device would block, a directory is not a file)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise SourceError(f"no such file: {name}") from None
    except OSError as e:
        raise SourceError(f"cannot read {name}: {e.strerror or e}") from None
    if not stat.S_ISREG(mode):
        raise SourceError(f"{name} is not a regular file (a directory, FIFO or device)")
    return os.path.abspath(path)


def of_type(obj: Any, module: str, *names: str) -> bool:
    """Whether ``obj`` is of a class named one of ``names`` from package ``module``, without
    importing that package."""
    return type(obj).__module__.startswith(module) and type(obj).__name__ in names


class Source(ABC):
    """One array to scan.

    Required: ``name`` (str), ``shape`` (tuple of int), ``dtype`` (checked with
    ``blocks.check_dtype``), ``nbytes`` (int), ``regions(budget_bytes)`` (boxes of about that
    many bytes covering the array, in the order they are best read) and ``read(region)``
    (the region's values as an ndarray).

    Optional, with the defaults below: what the engines and the report use when a source
    has it.
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int
    region_bytes: int = REGION_BYTES  # the region size when the scan gives none
    in_memory: bool = False  # the values are in this process (RAM or a memory map)
    ram_array: np.ndarray | None = None  # the array, when in RAM and scannable in parts
    reads_in_tasks: bool = True  # a Dask task can open and read it where it runs
    remote: bool = False  # reached over a network: many requests are kept in flight
    dask_array: Any = None  # the values as a dask array: a graph takes its blocks
    unit_kind: str = "chunk"  # what ``units`` and ``missing_units`` name
    fill_value: Any = None  # what a unit that was never written reads as
    storage: Any = None  # the storage grid (``chunked.ChunkGrid``): the report's chunks
    labels: Callable[[tuple[int, ...]], dict[str, Any]] | None = None  # a position's labels
    axis_names: dict[int, list[str]] | None = None  # names along an axis (table columns)

    @property
    def location(self) -> str:
        """Where the data is (an absolute path or URL; the name when nothing else): two
        sources of one name in other places make other Dask keys."""
        for attr in ("path", "filename", "files"):
            v = self.__dict__.get(attr)
            if v:
                return f"{v}:{self.__dict__.get('dataset', '')}{self.__dict__.get('column', '')}"
        return self.name

    @abstractmethod
    def regions(self, budget_bytes: int) -> Iterator[Region]:
        """Regions of about ``budget_bytes`` covering the array once."""

    def slice_regions(self, budget_bytes: int, axes: tuple[int, ...]) -> Iterator[Region]:
        """``regions`` for statistics per slice along ``axes`` (``by``): the same, unless a
        source can cut them so that each holds whole slices (``ArraySource``)."""
        return self.regions(budget_bytes)

    @abstractmethod
    def read(self, region: Region) -> np.ndarray:
        """The values of one region."""

    def unmap(self) -> None:
        """Let go of what the source holds open (a file's memory map) until it is read
        again; by default nothing."""
        return None

    def release(self, region: Region) -> None:
        """Called after a region is scanned (a memory map unmaps its pages)."""
        return None

    def units(self, region: Region) -> Iterator[tuple[str, tuple[int, ...], Region]] | None:
        """``(kind, grid coordinates, region)`` of each storage unit of a region, read one by
        one to name the unit that cannot be read; None when the source has no units."""
        return None

    def verify(self) -> None:
        """Raise when the source cannot be read where this runs (a Dask task on a worker
        opens it again): a store or file that is gone, or that changed since it was planned."""
        return None

    def identity(self) -> dict[str, Any] | None:
        """What makes a later opening the same array to a cache: where it is, its dtype, its
        storage layout and codecs, its shape but for the length of axis 0 (which appends
        grow). None: nothing can tell a later opening of this data apart from other data
        (an array in RAM), so it cannot be cached."""
        return None

    def labels_token(self) -> Any:
        """What ``labels`` depend on, for ``dask.base.tokenize``: a report's Dask key covers
        it, so that arrays of equal values under other labels (row labels, coordinates) never
        share one report on a cluster. By default ``labels`` itself (a bound method is
        hashed with its whole source); a source whose labels come from a small part of it
        names that part."""
        return self.labels

    def fingerprints(self) -> Any:
        """The ``fingerprints.Fingerprints`` of the units, taken now (before any is read);
        None when the source has none."""
        return None

    def missing_units(self) -> list[tuple[int, ...]] | None:
        """Grid coordinates of the units the store does not hold (C order); None when the
        source cannot tell."""
        return None


@contextmanager
def reader_errors(name: str, member: str | None = None) -> Iterator[None]:
    """The one place where an exception of a reader becomes a ``SourceError`` naming what
    failed: ``cannot read NAME, member MEMBER: KeyError: ...``. fastfinite's own errors,
    which name it already, and ``MemoryError`` pass as they are."""
    try:
        yield
    except (FastFiniteError, MemoryError):
        raise
    except Exception as e:
        where = name if member is None else f"{name}, member {member}"
        text = str(e)
        text = text if len(text) <= 300 else text[:300] + "..."
        raise SourceError(f"cannot read {where}: {type(e).__name__}: {text}") from e
