"""A set's small ``.npy`` members (files of a directory or glob, members of tar shards)
scanned together on the local engine: about 1 ms of Python a member (a map, a source, a
twin's call, a summary's merge, a report's build) made a set of 10,000 files of 1 KB a
hundred times slower than reading them.

The members of a window of the set are read whole (``sources.small``), their ``.npy``
headers parsed once per distinct header, and those of one dtype and shape are stacked as
the rows of one block, scanned by the kernels (or twins) every scan calls
(``compute.batch``). A member with nothing to report gets the report its own scan would
build: its statistics are its row's, to the last bit, and the rest is the report of the
first such member of its kind (``build_report``), copied. A member with something to
report has its row's counts and statistics, its first positions looked for in its bytes
(``compute.batch.found_summary``), and its report built; one whose sums overflowed (or
are too small, or that holds no finite value) is scanned again alone, from its bytes. An
entry that is not scanned (a label, a link) is recorded from the error its factory
would raise; every other entry (a header this path does not take, a file too large or
that cannot be read, a member of another kind) goes the ordinary way, scanned alone by
the engine. The reports, skipped entries and findings keep the set's order.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ..compute.batch import found_summary, scan_stacked, small_data
from ..compute.blocks import check_dtype
from ..compute.pools import collector_paused
from ..compute.summarize import summarize
from ..compute.summary import PairwiseMerger, ScanSpec, Summary
from ..model import kinds
from ..report.build import build_report, report_meta
from ..report.model import ScanReport
from ..sources.ndarray import ArraySource
from .plan import ScanPlan

WINDOW = 4096  # entries of a set read before they are scanned
WINDOW_BYTES = 64 << 20  # at most this many bytes of members held at once
STACK_VALUES = 1 << 20  # values of members stacked in one block


def applies(plan: ScanPlan) -> bool:
    """Whether a plan's members may be scanned together: a set of files (or tar shards)
    scanned without ``by``, ``fail_fast``, a cache or a region size (each of those scans
    its members one by one, as before)."""
    from ..sources.shards import ShardSet

    opts = plan.options
    return (
        isinstance(plan.target, ShardSet)
        and opts.by is None
        and not opts.fail_fast
        and plan.cache is None
        and opts.region_bytes is None
    )


def scan_set(
    plan: ScanPlan, alone: Callable[[list], Iterable[tuple[Any, ScanReport]]], bar=None
) -> dict:
    """The reports of a set's members by path, in the set's order: small ``.npy`` members
    scanned together, the other entries by ``alone(entries)`` (the engine's ``(member,
    report)`` of each, recording skipped entries in the plan); ``bar``: the set's progress
    bar (``alone`` counts its own members on it)."""
    with collector_paused():  # tens of thousands of reports, no cycle
        return _scan_set(plan, alone, bar)


def set_bytes(plan: ScanPlan) -> int:
    """The bytes of the arrays of a set, what its progress bar counts: a small ``.npy``
    member's from its header, any other member's from its source opened (and let go, as
    the one-by-one path counts them); entries not scanned count nothing."""
    headers: dict = {}
    total = 0
    raws, skips = plan.target.raw, plan.target.skips
    others = []
    for path, factory in plan.entries:
        raw = raws.get(path)
        got = raw.head() if raw is not None else None  # the header: not the values twice
        parsed = _parse(got[0], raw.raw_dtype, headers, got[1]) if got is not None else None
        if parsed is not None:
            total += math.prod(parsed[1]) * parsed[0].itemsize
        elif path not in skips:
            others.append((path, factory))
    for m in plan.members(others):
        total += m.source.nbytes
        m.source.unmap()
    return total


def _scan_set(plan: ScanPlan, alone, bar) -> dict:
    reports: dict = {}
    headers: dict = {}  # a header's bytes -> (dtype, shape, nbytes), or None
    templates: dict = {}  # (dtype, shape) -> a clean member's report, to copy
    skips = plan.target.skips
    for window, data in _windows(plan.entries, plan.target.raw):
        clean = _scan_window(window, data, plan, headers, templates)
        rest = []
        for j, (path, factory) in enumerate(window):
            if path in skips:  # a label, a link...: what its factory would raise
                plan.skip(path, skips[path])
            elif j not in clean:
                rest.append((path, factory))
        if bar is not None:
            bar.update(sum(nbytes for _, nbytes in clean.values()))
        others = {m.path: r for m, r in alone(rest)} if rest else {}
        for j, (path, _) in enumerate(window):
            if j in clean:
                reports[path] = clean[j][0]
            elif path in others:
                reports[path] = others[path]
    order = {path: i for i, (path, _) in enumerate(plan.entries)}  # as one by one
    for said in (plan.skipped, plan.findings):
        items = sorted(said.items(), key=lambda kv: order.get(kv[0], len(order)))
        said.clear()
        said.update(items)
    return reports


def _windows(entries: list, raws: dict) -> Iterator[tuple[list, list]]:
    """Runs of entries and their small ``.npy`` members (``raws`` by path) as ``(raw,
    bytes)`` (None for the others), at most ``WINDOW`` entries and about ``WINDOW_BYTES``
    bytes a run. (Reading the next run on a thread while one is scanned gained nothing:
    10,000 files, 0.27 s either way.)"""
    first = 0
    while first < len(entries):
        window, data, first = _read_window(entries, first, raws)
        yield window, data


def _read_window(entries: list, first: int, raws: dict) -> tuple[list, list, int]:
    """The run of entries from ``first`` (``_windows``), and where the next starts."""
    data: list = []
    held = 0
    stop = first
    for path, _ in entries[first : first + WINDOW]:
        stop += 1
        raw = raws.get(path)
        got = raw.read() if raw is not None else None
        data.append((raw, got) if got is not None else None)
        held += len(got) if got is not None else 0
        if held >= WINDOW_BYTES:
            break
    return entries[first:stop], data, stop


def _scan_window(window, data, plan: ScanPlan, headers: dict, templates: dict) -> dict:
    """``{index in window: (report, nbytes)}`` of the window's small ``.npy`` members this
    path takes (``_parse``), scanned together."""
    opts = plan.options
    groups: dict = {}
    for j, read in enumerate(data):
        if read is None:
            continue
        raw, got = read
        parsed = _parse(got, raw.raw_dtype, headers)
        if parsed is not None:
            dtype, shape, start = parsed
            groups.setdefault((dtype, shape), []).append((j, raw.name, got, start))
    out: dict = {}
    for (dtype, shape), members in groups.items():
        spec = ScanSpec(
            shape, dtype, opts.cast, opts.max_locations, None, opts.z_threshold, plan.twin_max
        )
        k = math.prod(shape)
        nbytes = k * dtype.itemsize
        per = max(1, STACK_VALUES // (k * (2 if dtype.kind == "c" else 1)))
        for b in range(0, len(members), per):
            run = members[b : b + per]
            # the members' values one after the other: one copy, read-only (as a map is)
            joined = b"".join([memoryview(got)[start:] for _, _, got, start in run])
            x2 = np.frombuffer(joined, dtype).reshape(len(run), k)
            rows = scan_stacked(x2, spec)
            with np.errstate(over="ignore"):
                totals = rows.n * rows.mean  # as ``totals`` of one slice
            ns, means, stds, los, his, tots = (
                a.tolist() for a in (rows.n, rows.mean, rows.std, rows.min, rows.max, totals)
            )
            template, alone = templates.get((dtype, shape)), rows.alone.tolist()
            found = rows.counts.any(axis=1).tolist()
            for r, (j, name, _, _) in enumerate(run):
                if alone[r]:
                    out[j] = _alone(spec, x2[r], name), nbytes
                    continue
                stats = ns[r], means[r], stds[r], los[r], his[r], tots[r]
                if found[r]:
                    out[j] = _found(spec, x2[r], name, rows.counts[r], stats), nbytes
                    continue
                if template is None:
                    template = templates[(dtype, shape)] = _first_report(spec, x2[r], name, stats)
                out[j] = _like(template, name, *stats), nbytes
    return out


def _alone(spec: ScanSpec, row: np.ndarray, name: str) -> ScanReport:
    """The report of a member with something to report, scanned alone as the local engine
    scans a small array (``scan_member``: one region, its summary merged, its report
    built), from its bytes read already (``small_data``: the kernels when they are
    loaded, though it is small)."""
    x = row.reshape(spec.shape)
    merger = PairwiseMerger(spec.max_locations)
    merger.add(summarize(x, (0,) * x.ndim, small_data(spec, x.size)))
    meta = report_meta(ArraySource(x, name=name))
    return build_report(spec, meta, merger.result(), [], None, True, consume=True, threads=1)


def _found(spec: ScanSpec, row: np.ndarray, name: str, counts: np.ndarray, stats) -> ScanReport:
    """The report of a member with findings, as its own scan builds it, from its row's
    counts and statistics (``found_summary``)."""
    x = row.reshape(spec.shape)
    merger = PairwiseMerger(spec.max_locations)
    merger.add(found_summary(x, spec, counts, stats))
    meta = report_meta(ArraySource(x, name=name))
    return build_report(spec, meta, merger.result(), [], None, True, consume=True, threads=1)


def _parse(data, raw_dtype: str | None, headers: dict, size: int | None = None) -> tuple | None:
    """``(dtype, shape, data offset)`` of a ``.npy`` member's bytes (``data``, or its first
    bytes of ``size`` in all), when this path takes it: a header numpy reads (version 1 or
    2), C order (or at most one axis), a dtype the kernels scan (``raw_dtype`` applied as
    ``open_npy`` does), values present and exactly the bytes the header says. Else None:
    its factory opens it, and says what is wrong."""
    if len(data) < 12:  # a header of 10 bytes or 12, then at least its dictionary
        return None
    if data[6] == 1:
        start = 10 + data[8] + (data[9] << 8)
    elif data[6] == 2:
        start = 12 + int.from_bytes(data[8:12], "little")
    else:
        return None
    key = bytes(data[:start])  # the magic string and version too: checked when parsed
    known = headers.setdefault(raw_dtype, {})
    got = known.get(key, False)
    if got is False:
        got = known[key] = _read_header(key, raw_dtype)
    if got is None or (len(data) if size is None else size) != start + got[2]:
        return None
    return got[0], got[1], start


def _read_header(header: bytes, raw_dtype: str | None) -> tuple | None:
    """``(dtype, shape, nbytes)`` of a ``.npy`` header this path takes, else None."""
    from numpy.lib import format as npf

    try:
        f = io.BytesIO(header)
        version = npf.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            return None
        read = npf.read_array_header_1_0 if version == (1, 0) else npf.read_array_header_2_0
        shape, fortran, dtype = read(f)
        if f.tell() != len(header):
            return None
    except Exception:  # noqa: BLE001 - its factory says what is wrong with it
        return None
    if (fortran and len(shape) > 1) or dtype.hasobject:
        return None
    if raw_dtype:
        from ..model.casts import cast_dtype

        want = cast_dtype(raw_dtype)
        if dtype.kind != "V" or dtype.names is not None or dtype.itemsize != want.itemsize:
            return None
        dtype = want
    try:
        check_dtype(dtype)
    except Exception:  # noqa: BLE001 - its factory raises it, naming the member
        return None
    k = math.prod(shape)
    if k == 0:
        return None
    return dtype, tuple(int(n) for n in shape), k * dtype.itemsize


def _first_report(spec: ScanSpec, row: np.ndarray, name: str, stats: tuple) -> ScanReport:
    """The report of a clean member, built as its own scan builds it."""
    n, mean, std, lo, hi, total = stats
    s = Summary(np.zeros(kinds.N_KINDS, np.int64), n, mean, std, total, lo, hi, row.size)
    source = ArraySource(row.reshape(spec.shape), name=name)
    return build_report(spec, report_meta(source), s, [], None, True, consume=True, threads=1)


def _like(template: ScanReport, name: str, n, mean, std, lo, hi, total) -> ScanReport:
    """A copy of ``template`` (a clean member's report of the same kind) with the name and
    statistics of another clean member, and containers of its own."""
    out = object.__new__(ScanReport)
    d = out.__dict__
    d.update(template.__dict__)
    d["name"], d["count"], d["mean"], d["std"], d["min"], d["max"], d["sum"] = (
        name, n, mean, std, lo, hi, total
    )  # fmt: skip
    d["cast"] = dict(template.cast)
    d["locations"], d["findings"], d["localized"], d["regions"] = [], [], [], []
    d["arrays"], d["skipped"], d["dynamic_range"] = {}, {}, {}
    return out
