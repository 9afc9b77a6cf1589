"""The plan of a scan, made once from the opened input and the validated options: the
members (one array, or a group's arrays opened one by one), each with its source, spec and
regions, and how their reports come together (``build.Layout``). Both engines run a plan and
take nothing else from above them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..compute.parts import default_workers
from ..compute.summary import TWIN_MAX, ScanSpec
from ..errors import InvalidArgumentError, SkippedMemberError, UnsupportedDtypeError
from ..options import ScanOptions, resolve_by
from ..report.build import Layout
from ..report.model import Finding
from ..sources.base import Source
from ..sources.dask import DaskArraySource
from ..sources.ndarray import MAX_REGION_BYTES
from ..sources.open import Target, group_name, input_roots, open_source

TWIN_ENV = "FASTFINITE_NUMPY_TWIN_MAX"  # blocks up to this many values use the NumPy twin


@dataclass
class Member:
    """One array of a plan: its source, what to look for, and its regions."""

    path: str | None  # its path in the group; None for a single array
    source: Source
    spec: ScanSpec
    region_bytes: int
    # makes what a scan with a cache recalls of it and keeps of it (``memory``), else None
    remember: Callable[[Member], Any] | None = None
    _memory: Any = None

    @property
    def memory(self) -> Any:
        """What a scan with a cache recalls of it and keeps of it (``recall.MemberMemory``:
        its steps, prepared before any unit is read), made when its scan first asks: a
        set's members counted for its progress bar first hold none; else None."""
        if self._memory is None and self.remember is not None:
            self._memory = self.remember(self)
        return self._memory

    def regions(self) -> Iterator:
        """The regions both engines scan (their boxes are what ``report.regions`` flags)."""
        by = self.spec.by
        if by is not None:
            return self.source.slice_regions(self.region_bytes, by)
        return self.source.regions(self.region_bytes)


@dataclass
class ScanPlan:
    """What a scan will do. ``members()`` opens the arrays (a group's one at a time, so a
    table's columns are not all converted at once) and records the ones that cannot be
    scanned in ``skipped``; those that could not be checked (an HDF5 link that leads nowhere,
    a file in a Zarr store that is not part of it) get a finding of the group's too, in
    ``findings``."""

    layout: Layout
    target: Target  # the opened input: what ``localize`` reads again
    options: ScanOptions
    entries: list[tuple[str | None, Any]]  # (path, factory of its source)
    twin_max: int = TWIN_MAX
    skipped: dict[str, str] = field(default_factory=dict)
    findings: dict[str, Finding] = field(default_factory=dict)  # path -> the group's finding
    cache: Any = None  # the open ``cache.ScanCache`` of ``scan(cache=)``
    recalled: dict = field(default_factory=dict)  # path -> its ``recall.MemberMemory``
    groups: list = field(default_factory=list)  # kernel groups the graph's tasks call first

    @property
    def lazy(self) -> bool:
        """The input is a dask array: it is scanned as a graph."""
        return isinstance(self.target, DaskArraySource)

    def skip(self, path: str, error: Exception) -> None:
        """Record the member ``path`` as not scanned, for the reason ``error`` gives (with a
        finding of the group's when the error has a kind)."""
        self.skipped[path] = str(error)
        kind = getattr(error, "kind", None)
        if kind is not None:
            self.findings[path] = Finding(kind, (), f"{path}: {error}")

    def members(self, entries: list | None = None) -> Iterator[Member]:
        """The members of ``entries`` (default: all the plan's), opened one at a time, each
        with all an engine needs: its source, spec, region budget and, when the scan has a
        cache, its ``memory`` (what the cache recalls of it), made when its scan starts,
        its units' fingerprints taken then, before any is read."""
        opts = self.options
        for path, factory in self.entries if entries is None else entries:
            try:
                source = factory()
            except (UnsupportedDtypeError, SkippedMemberError) as e:
                if path is None:
                    raise
                self.skip(path, e)
                continue
            budget = opts.region_bytes or source.region_bytes
            if opts.by is not None and source.in_memory and not opts.region_bytes:
                budget = slice_budget(source.nbytes, budget, opts.workers)
            # a group's scalar (a checkpoint's step count) has one value and no slice: whole
            by = None if path is not None and not source.shape else opts.by
            spec = ScanSpec(
                source.shape,
                source.dtype,
                opts.cast,
                opts.max_locations,
                resolve_by(by, len(source.shape), source.name),
                opts.z_threshold,
                self.twin_max,
            )
            remember = self._remember if self.cache is not None else None
            yield Member(path, source, spec, budget, remember)

    def _remember(self, member: Member) -> Any:
        from ..cache.recall import MemberMemory

        memory = self.recalled[member.path] = MemberMemory(self.cache, member)
        return memory


def check_cache_outside(data: Any, cache: str) -> None:
    """An ``InvalidArgumentError`` naming both when the cache folder is inside the input (or
    is it): fastfinite never writes into its input, and a cache inside a Parquet dataset or
    a Zarr store would be read as part of it by the next scan."""
    there = os.path.realpath(cache)
    for item, root in input_roots(data):
        if there == root or there.startswith(root.rstrip(os.sep) + os.sep):
            raise InvalidArgumentError(
                f"cache={cache!r} is inside the input {os.fspath(item)!r} ({root}): "
                "fastfinite never writes into its input; give a cache folder outside it"
            )


def slice_budget(nbytes: int, budget: int, workers: int | None) -> int:
    """The region budget of an array in RAM scanned by slices: the whole of one up to
    ``MAX_REGION_BYTES``; past it, regions of at most twice that, as many as a multiple of
    the workers. Each region costs its thread a loan, a kernel's start and the Python around
    it, and an odd one out runs alone: by=0 on (1e6, 100) float32, six regions of 64 MiB
    on two cores took 1.44-1.47x the plain scan, four of 100 MB 1.37-1.41x."""
    if nbytes <= MAX_REGION_BYTES:
        return max(budget, nbytes)
    w = workers or default_workers()
    k = -(-nbytes // (2 * MAX_REGION_BYTES))  # regions of at most twice the budget
    k = -(-k // w) * w
    share = -(-nbytes // k)
    return max(budget, share + share // 64)  # room for a region cut at a whole slice


def make_plan(data: Any, options: ScanOptions) -> ScanPlan:
    """Open ``data`` and plan its scan with ``options`` (already validated)."""
    from ..sources.tables import TableColumns, table_source

    if options.cache is not None:
        check_cache_outside(data, options.cache)
    name = group_name(data)  # of a group, or of a table scanned as one 2-D array
    target = open_source(data, options, name)
    skipped: dict[str, str] = {}
    if isinstance(target, TableColumns) and options.by is not None:
        # per row or per column: the table's numeric columns as one 2-D array
        source, skipped = table_source(target, name)
        target = source if source is not None else TableColumns([], target.kind, target.rows)
    if isinstance(target, list):
        table = None
        if isinstance(target, TableColumns):
            table = (target.kind, int(target.rows), tuple(p for p, _ in target))
        layout = Layout(name, True, table)
        entries = list(target)
    else:
        layout = Layout(target.name)
        entries = [(None, lambda: target)]
    twin = int(os.environ.get(TWIN_ENV, TWIN_MAX))
    return ScanPlan(layout, target, options, entries, twin, skipped)
