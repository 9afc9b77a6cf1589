"""What a scan with a cache recalls of one member, and what it leaves for the next scan.

The member's regions are the leaves of the merge tree both engines fold
(``summary.PairwiseMerger``). A leaf's key is the fingerprint of its box and of its storage
units, taken before any is read; a subtree's key is made from its halves'. The scan takes
from the cache the largest subtrees whose keys it holds, scans the other leaves, and folds
both in the same tree, so its report is the report of a full scan, bit for bit. Every leaf
scanned and every subtree formed is written as the scan goes (at least once a second), so a
scan that is killed is resumed by the next one.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

from ..compute.blocks import Region
from ..compute.digests import tree_keys
from ..compute.summary import PairwiseMerger, Summary
from ..compute.summary_bytes import from_bytes, to_bytes
from ..errors import InvalidArgumentError
from .store import ScanCache

SLICE_NODE_MAX = 4096  # subtrees holding more slices are not kept (their leaves are)
FLUSH_SECONDS = 1.0
FLUSH_ROWS = 512


@dataclass
class Step:
    """Leaves of the tree taken together: one region to scan, or a subtree of ``2**level``
    regions recalled from the cache with its summary."""

    regions: list[Region]
    level: int
    key: bytes | None
    summary: Summary | None = None  # recalled

    @property
    def cached(self) -> bool:
        return self.summary is not None


def options_key(member: Any) -> dict:
    """The options that change a member's summaries (with the versions that make them)."""
    from .._version import KERNELS, __version__
    from ..compute.summary_bytes import FORMAT

    spec = member.spec
    return {
        "cast": list(spec.cast), "by": None if spec.by is None else list(spec.by),
        "max_locations": spec.max_locations, "z_threshold": spec.z_threshold,
        "region_bytes": member.region_bytes, "twin_max": spec.twin_max,
        "fastfinite": __version__, "summary_format": FORMAT, "kernels": KERNELS,
    }  # fmt: skip


class MemberMemory:
    """One member's entries in the cache, for one scan: which steps it takes (``steps``,
    prepared when it is made, before any unit is read), and the writes of what it scans
    (``add``, ``flush``, ``end``): its steps' summaries are folded in its ``merger``, the
    merge tree of both engines, which hands it each subtree it forms (``node``)."""

    def __init__(self, cache: ScanCache, member: Any):
        source = member.source
        identity = source.identity()
        if identity is None:
            raise InvalidArgumentError(
                f"cache= remembers data kept in files or stores, so that a later scan can tell "
                f"what changed; {source.name or 'this ' + type(source).__name__} is not (scan "
                "a .npy, Zarr or HDF5 path instead)"
            )
        self.cache = cache
        self.source = source
        self.fingerprints = source.fingerprints()  # before any unit is read
        self.name = identity.get("location") or identity.get("path") or source.name
        options = options_key(member)
        # what the cache holds of this array
        self.akey, self.rebuilt = cache.array_key(self.name, identity, options)
        cache.update_racy(self.akey, *self.fingerprints.settle(cache.racy(self.akey)))
        self.known = cache.node_keys(self.akey)
        # this scan's tree
        self.regions = list(member.regions())
        self.levels = tree_keys([self.fingerprints.of(r) for r in self.regions])
        self._pending: list[tuple[bytes, bytes, int, bytes]] = []
        self._flushed = time.monotonic()
        self.scanned: list[Region] = []
        self.reused = 0  # regions recalled
        self.steps = self._steps()
        self.merger = PairwiseMerger(member.spec.max_locations, self.node)

    def _steps(self) -> list[Step]:
        """The scan's steps in region order: the largest cached subtrees, the leaves left."""
        wanted: list[tuple[int, int]] = []
        self._cover(wanted, lambda j, m: self.levels[j][m] in self.known)
        try:
            held = {
                k: from_bytes(v)
                for k, v in self.cache.load_many(
                    self.akey, [self.levels[j][m] for j, m in wanted]
                ).items()
            }
        except ValueError as e:  # not what a scan wrote: nothing of this array is trusted
            note = f"{self.name}: an entry of the cache cannot be read ({e}): scanned anew"
            warnings.warn(note, stacklevel=5)
            self.rebuilt = note
            self.cache.retain(self.akey, set(), set())
            self.known, held = set(), {}
        out: list[Step] = []
        cover: list[tuple[int, int]] = []
        self._cover(cover, lambda j, m: self.levels[j][m] in held)  # what is still there
        for j, m in cover:
            key = self.levels[j][m]
            regions = self.regions[m << j : (m + 1) << j]
            out.append(Step(regions, j, key, held.get(key)))
            if key in held:
                self.reused += len(regions)
        return out

    def _cover(self, out: list, cached) -> None:
        n, pos = len(self.regions), 0
        for j in reversed(range(n.bit_length())):
            if n >> j & 1:
                self._cover_block(j, pos >> j, cached, out)
                pos += 1 << j

    def _cover_block(self, j: int, m: int, cached, out: list) -> None:
        if j == 0 or cached(j, m):
            out.append((j, m))
            return
        self._cover_block(j - 1, 2 * m, cached, out)
        self._cover_block(j - 1, 2 * m + 1, cached, out)

    def add(self, step: Step, summary: Summary, errors: list) -> None:
        """Fold a step's summary, recalled or scanned, in ``merger``, in the steps' order."""
        key = step.key if step.cached else self.leaf(step, summary, errors)
        self.merger.add(summary, step.level, key)

    def leaf(self, step: Step, summary: Summary, errors: list) -> bytes | None:
        """A region was scanned: keep its summary (not when a unit could not be read: that
        region is read again next time). Returns its key for the merge, None if not kept."""
        self.scanned.extend(step.regions)
        if errors:
            return None
        self.node(0, step.key, summary)
        return step.key

    def node(self, level: int, key: bytes, summary: Summary) -> None:
        """A subtree was formed: keep it unless it is already kept, or holds many slices."""
        if key in self.known:
            return
        if level and summary.slices and sum(len(s.idx) for s in summary.slices) > SLICE_NODE_MAX:
            return
        self.known.add(key)
        self._pending.append((self.akey, key, level, to_bytes(summary)))
        now = time.monotonic()
        if len(self._pending) >= FLUSH_ROWS or now - self._flushed >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self.cache.store(self._pending)
            self._pending = []
        self._flushed = time.monotonic()

    def end(self, complete: bool) -> None:
        """The scan of the member ended (or stopped): write what is pending; after a
        complete scan keep only the current tree. Its steps and merge tree are let go (the
        memory stays in ``ScanPlan.recalled`` until the scan's record)."""
        self.steps, self.merger = [], None
        self.flush()
        if complete and (self.scanned or self.rebuilt):  # else nothing was written
            keep = {k for level in self.levels for k in level}
            self.cache.retain(self.akey, keep, self.fingerprints.current())

    def rescanned_units(self) -> list[tuple[int, ...]]:
        """Grid coordinates of the chunks read, in the grid of ``report.chunks`` and of the
        missing and unreadable chunks (a sharded array is fingerprinted by shards, and every
        chunk of a shard read again is listed); the regions' starts for a source without
        a grid (a ``.npy`` or HDF5 file is one unit)."""
        grid = self.fingerprints.grid
        if grid is not None:
            grid = self.source.storage or grid
        seen: dict = {}
        for r in self.scanned:
            if grid is None:
                seen[tuple(s.start for s in r)] = None
            else:
                seen.update(dict.fromkeys(grid.units_in(r)))
        return sorted(seen)


def record(plan: Any, report: Any, data: Any) -> None:
    """Set ``report.changes``: against the last complete report of the input ``data`` in
    the cache (``cache_target``), with the units each member read; keep ``report`` as the
    last when it is complete."""
    import json

    from ..compute.digests import digest
    from ..report.model import ScanReport
    from .changes import diff_reports

    cache: ScanCache = plan.cache
    target = cache_target(data, plan.layout.name)
    okey = digest("report", json.dumps(sorted(report_options(plan).items()), default=str))
    rescanned, scanned, recalled, rebuilt = _tally(plan.recalled)
    # all that a diff compares: the slices' columns are left out
    kept = json.dumps(_without_slices(report.to_dict())) if report.complete else None
    text, why = cache.swap_report(target, okey, kept)
    cache_bytes = cache.nbytes()
    old = ScanReport.from_json(text) if text is not None else None
    try:
        changes = diff_reports(old, report)
    except InvalidArgumentError as e:  # the same name, other data (a store written anew)
        changes = diff_reports(None, report)
        changes.notes.append(f"the last cached report is not comparable: {e}")
    if why:
        changes.notes.append(why)
    changes.notes += cache.notes + rebuilt
    changes.rescanned = rescanned
    changes.regions_scanned, changes.regions_recalled = scanned, recalled
    changes.cache_bytes = cache_bytes
    report.changes = changes


def cache_target(data: Any, name: str) -> str:
    """What the cache keeps the last report of: the input's absolute path or URL, else
    ``name``, the plan's name of it."""
    if isinstance(data, (str, os.PathLike)) and "://" not in os.fspath(data):
        return os.path.abspath(os.fspath(data))
    return name


def _tally(recalled: dict) -> tuple[dict, int, int, list[str]]:
    """What the members of a scan read: the units each read again (by member name), the
    regions scanned and recalled, and why a member's entries were made anew."""
    rescanned: dict[str, list[tuple[int, ...]]] = {}
    scanned = reused = 0
    rebuilt: list[str] = []
    for path, memory in recalled.items():
        name = memory.source.name if path is None else path
        rescanned[name] = memory.rescanned_units()
        scanned += len(memory.scanned)
        reused += memory.reused
        if memory.rebuilt:
            rebuilt.append(memory.rebuilt)
    return rescanned, scanned, reused, rebuilt


def _without_slices(d: dict) -> dict:
    d["slices"] = None
    for sub in d.get("arrays", {}).values():
        _without_slices(sub)
    return d


def report_options(plan: Any) -> dict:
    """The options that change a report (a group's members each have their own key)."""
    o = plan.options
    return {"cast": o.cast, "by": o.by, "max_locations": o.max_locations,
            "z_threshold": o.z_threshold, "region_bytes": o.region_bytes,
            "scale": o.scale}  # fmt: skip
