"""A set's small ``.npy`` members (files of a directory or glob, members of tar shards,
the small tensors of ``.npz`` and safetensors checkpoints: ``sources.small.RawNpy``)
scanned together on the local engine: about 1 ms of Python a member (a map, a source, a
twin's call, a summary's merge, a report's build) made a set of 10,000 files of 1 KB a
hundred times slower than reading them; every microsecond a member counts against the 5
it takes to read it.

The members of a window of the set are read whole (``sources.small``: a set of files
only reads each file of its first file's kind into its row of one array), their ``.npy``
headers parsed once per distinct header, and those of one dtype and shape are stacked as
the rows of one block, scanned by the kernels (or twins) every scan calls
(``compute.batch``). A member with nothing to report keeps its row's statistics in
columns (``report.members.MemberReports``): its report, built when first asked for, is
the one its own scan builds (its statistics are its row's, to the last bit; the rest is
the report of the first such member of its kind, ``build_report``'s, copied), and the
group's totals are taken from the columns. A member with something to report has its
row's counts and statistics, its first positions looked for in its bytes (as
``compute.batch.found_summary`` looks for them), and its report built; one whose sums
overflowed (or are too small, or that holds no finite value) is scanned again alone,
from its bytes. An entry that is not scanned (a label, a link) is recorded from the
error its factory would raise; every other entry (a header this path does not take, a
file too large or that cannot be read, a member of another kind) goes the ordinary way,
scanned alone by the engine. The reports, skipped entries and findings keep the set's
order.
"""

from __future__ import annotations

import functools
import gc
import io
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ..compute.batch import found_summary, scan_stacked, small_data, takes_twin
from ..compute.blocks import check_dtype, first_where
from ..compute.pools import collector_paused
from ..compute.positions import kind_mask
from ..compute.summarize import summarize
from ..compute.summary import PairwiseMerger, ScanSpec, Summary
from ..model import kinds
from ..report.build import build_report, report_meta
from ..report.members import MemberReports, like
from ..report.model import CastRisk, Location, ScanReport
from ..sources.ndarray import ArraySource
from ..sources.small import RawNpy, read_files, read_rows
from .plan import ScanPlan

WINDOW = 4096  # entries of a set read before they are scanned
WINDOW_BYTES = 64 << 20  # at most this many bytes of members held at once
STACK_VALUES = 1 << 20  # values of members stacked in one block


def applies(plan: ScanPlan) -> bool:
    """Whether a plan's members may be scanned together: a set of files (or tar shards,
    or a checkpoint with small tensors: ``sources.open``'s ``ShardSet``s) scanned without
    ``by``, ``fail_fast``, a cache or a region size (each of those scans its members one
    by one, as before)."""
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
    collecting = gc.isenabled()

    def collected(entries: list) -> list:  # scanned alone (zarr, fsspec...): cycles, collected
        if collecting:
            gc.enable()
        try:
            return list(alone(entries))
        finally:
            gc.disable()

    with collector_paused():  # tens of thousands of reports, no cycle
        return _scan_set(plan, collected, bar)


def set_bytes(plan: ScanPlan) -> int:
    """The bytes of the arrays of a set, what its progress bar counts: a small ``.npy``
    member's from its header, any other member's from its source opened (and let go, as
    the one-by-one path counts them); entries not scanned count nothing."""
    headers: dict = {}
    total = 0
    skips = plan.target.skips
    others = []
    for path, factory in plan.entries:
        raw = _raw(plan, path)
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


def _raw(plan: ScanPlan, key: str) -> RawNpy | None:
    """How to read a member's bytes whole: a small ``.npy`` file, or a tar's member."""
    path = plan.target.files.get(key)
    if path is not None:
        return RawNpy(path, path, None, plan.options.raw_dtype)
    return plan.target.raw.get(key)


class _Rows:
    """The members of a set, by their position in it: the clean ones scanned together as
    columns (``MemberReports``), the others' reports (``built``)."""

    def __init__(self, size: int):
        self.cols = (np.zeros(size, np.int64), *(np.zeros(size) for _ in range(5)))
        self.tid = np.full(size, -1, np.int32)
        self.names: list = [None] * size
        self.built: dict[int, ScanReport] = {}
        self.templates: list = []
        self.kinds: dict = {}  # (dtype, shape) -> index in templates

    def reports(self, entries: list, files: dict | None = None) -> MemberReports:
        """The members' reports in the set's order (those of neither kind left out);
        ``files``: the set's files by key, when they are all its entries, in order."""
        slots: list = list(range(len(entries)))
        rows = np.arange(len(entries))  # each slot's row, -1 for a built report
        for p, r in self.built.items():
            slots[p] = r
            rows[p] = -1
        keys = list(files) if files is not None else [k for k, _ in entries]
        has = self.tid >= 0
        if self.built:
            has[list(self.built)] = True
        if not has.all():
            keep = np.flatnonzero(has)
            rows = rows[keep]
            keep = keep.tolist()
            keys, slots = [keys[p] for p in keep], [slots[p] for p in keep]
        return MemberReports(
            dict(zip(keys, slots)), self.cols, self.tid, self.templates, self.names, rows
        )


def _scan_set(plan: ScanPlan, alone, bar) -> MemberReports:
    entries = plan.entries
    rows = _Rows(len(entries))
    headers: dict = {}  # a header's bytes -> (dtype, shape, nbytes), or None
    skips = plan.target.skips
    for first, data, raw_dtypes, stacked in _windows(plan, rows.names, headers):
        done, nbytes = _scan_window(first, data, raw_dtypes, stacked, plan, headers, rows)
        if bar is not None:
            bar.update(nbytes)
        rest = []
        for j in np.flatnonzero(~done).tolist():
            path, factory = entries[first + j]
            if path in skips:  # a label, a link...: what its factory would raise
                plan.skip(path, skips[path])
            else:
                rest.append((first + j, path, factory))
        if rest:
            where = {path: p for p, path, _ in rest}
            for m, r in alone([(path, factory) for _, path, factory in rest]):
                rows.built[where[m.path]] = r
    if plan.skipped or plan.findings:  # as one by one
        in_set_order([path for path, _ in entries], plan.skipped, plan.findings)
    return rows.reports(entries, plan.target.files if only_files(plan) else None)


def in_set_order(keys: list, *said: dict) -> None:
    """Each dict of ``said`` (skipped entries, findings: by member) put in the order of
    the set's ``keys`` in place, any other key after them, as a scan one by one says them."""
    order = {k: i for i, k in enumerate(keys)}
    for d in said:
        items = sorted(d.items(), key=lambda kv: order.get(kv[0], len(order)))
        d.clear()
        d.update(items)


def only_files(plan: ScanPlan) -> bool:
    """Whether the plan's entries are the set's ``.npy`` files, all and in order."""
    return plan.target.only_files and len(plan.entries) == len(plan.target)


def _windows(plan: ScanPlan, names: list, headers: dict) -> Iterator[tuple]:
    """Runs of a set's entries read: ``(position of the first, the bytes of each small
    ``.npy`` member or None, the ``raw_dtype`` of each, the run's files of its kind or
    None)``, at most ``WINDOW`` entries and about ``WINDOW_BYTES`` bytes a
    run; ``names``: each member's name, filled in. The files of a set of files only are
    read each into its row of one array (``read_rows``) when they are of the run's kind:
    its first file's, kept while at least half the run is of it (the others' bytes as
    they are). (Reading the next run on a thread while one is
    scanned gained nothing, nor did reading on two threads: the GIL.)"""
    entries, files, raws = plan.entries, plan.target.files, plan.target.raw
    raw_dtype = plan.options.raw_dtype
    kind = None  # the first file's: (its size, header, parsed header)
    first = 0
    while first < len(entries):
        window = entries[first : first + WINDOW]
        if only_files(plan):
            paths = plan.target.paths[first : first + WINDOW]
        else:
            paths = [files.get(k) for k, _ in window]
        if not raws and kind is None:
            kind = _kind_of_first(paths, raw_dtype, headers)
        if not raws and kind is not None:
            paths = paths[: max(1, WINDOW_BYTES // kind[0])]
            data, stacked = _read_rows(paths, kind)
            names[first : first + len(data)] = paths
            if stacked is None or 2 * len(stacked[1]) < len(data):  # not the common kind
                kind = None  # the next run's first file's, then
            yield first, data, [raw_dtype] * len(data), stacked
            first += len(data)
            continue
        data = read_files(paths, WINDOW_BYTES)
        names[first : first + len(data)] = paths[: len(data)]
        kinds = [raw_dtype] * len(data)
        if raws:
            held = sum(len(d) for d in data if d is not None)
            for j, (key, _) in enumerate(window[: len(data)]):
                raw = raws.get(key)
                if raw is None:
                    continue
                if held >= WINDOW_BYTES and j:
                    data, kinds = data[:j], kinds[:j]
                    break
                got = data[j] = raw.read()
                names[first + j], kinds[j] = raw.name, raw.raw_dtype
                held += len(got) if got is not None else 0
        yield first, data, kinds, None
        first += len(data)


def _kind_of_first(paths: list, raw_dtype, headers: dict) -> tuple | None:
    """``(size, header, parsed)`` of the first of ``paths`` when this path takes it
    (``_parse``), else None."""
    path = next((p for p in paths if p is not None), None)
    got = read_files([path], WINDOW_BYTES)[0] if path is not None else None
    parsed = _parse(got, raw_dtype, headers) if got is not None else None
    return None if parsed is None else (len(got), bytes(got[: parsed[2]]), parsed)


def _read_rows(paths: list, kind: tuple) -> tuple[list, tuple | None]:
    """The files ``paths`` read (``read_rows``): those of ``kind`` (its size and header)
    as ``(kind, their positions, their rows)``, the others' bytes (or None) in a list as
    ``read_files`` gives them (None for those of ``kind``)."""
    size, header, _ = kind
    rows, got, longer = read_rows(paths, size)
    n = np.asarray(got, np.int64)
    same = n == size
    if same.any():
        same &= (rows[:, : len(header)] == np.frombuffer(header, np.uint8)).all(axis=1)
    data: list = [None] * len(paths)
    for i in np.flatnonzero(~same & (n >= 0)).tolist():
        data[i] = longer.get(i) if n[i] > size else bytes(rows[i, : n[i]])
    at = np.flatnonzero(same)
    if not len(at):
        return data, None
    return data, (kind, at, rows if len(at) == len(rows) else rows[at])


def _scan_window(
    first: int,
    data: list,
    raw_dtypes: list,
    stacked: tuple | None,
    plan: ScanPlan,
    headers: dict,
    rows: _Rows,
):
    """The window's small ``.npy`` members this path takes (``_parse``) scanned together,
    grouped by their header (``stacked``: ``(kind, positions, their bytes as rows)`` of
    the files of the run's kind, read so: ``_windows``): the clean ones' statistics in
    ``rows``' columns, the others' reports in ``rows.built``; ``(which of the window were,
    their bytes of values)``."""
    opts = plan.options
    done = np.zeros(len(data), bool)
    groups: dict = {}  # (raw_dtype, header) -> (positions, bytes, (dtype, shape, start))
    if stacked is not None:
        kind, at, stack = stacked
        groups[None] = (at, stack, kind[2])
    # the header of the last member parsed, its size, raw_dtype and its group's lists
    head, size, rd, add_position, add_bytes = None, 0, None, list.append, list.append
    whole = stacked is not None and len(stacked[1]) == len(data)  # no other bytes read
    for j, got in enumerate(() if whole else data):
        if got is None:
            continue
        if (  # the header of the member before: its group's
            head is not None
            and type(got) is bytes
            and len(got) == size
            and raw_dtypes[j] == rd
            and got.startswith(head)
        ):
            add_position(j)
            add_bytes(got)
            continue
        parsed = _parse(got, raw_dtypes[j], headers)
        if parsed is None:  # taken alone; the next is compared with no header
            head = None
            continue
        rd = raw_dtypes[j]
        key = (rd, bytes(got[: parsed[2]]))
        group = groups.get(key)
        if group is None:
            group = groups[key] = ([], [], parsed)
        group[0].append(j)
        group[1].append(got)
        head, size, add_position, add_bytes = key[1], len(got), group[0].append, group[1].append
    nbytes = 0
    for positions, got, (dtype, shape, start) in groups.values():
        spec = ScanSpec(
            shape, dtype, opts.cast, opts.max_locations, None, opts.z_threshold, plan.twin_max
        )
        k = math.prod(shape)
        m = len(got)
        if isinstance(got, np.ndarray):  # read as rows
            view = got[:, start:].view(dtype).reshape(m, k)
        else:  # each member's values, in place in the joined bytes
            joined = b"".join(got)
            view = np.ndarray((m, k), dtype, joined, start, (len(joined) // m, dtype.itemsize))
        where = first + np.asarray(positions, np.int64)
        done[where - first] = True
        nbytes += m * k * dtype.itemsize
        per = max(1, STACK_VALUES // (k * (2 if dtype.kind == "c" else 1)))
        for rows_of, values in _stacks(view, functools.partial(takes_twin, spec, m, k)):
            values.flags.writeable = False  # read-only, as a map is
            at = where[rows_of] if rows_of is not None else where
            for b in range(0, len(values), per):
                _scan_rows(values[b : b + per], at[b : b + per], spec, rows)
    return done, nbytes


def _stacks(
    view: np.ndarray, twin: Callable[[], bool]
) -> list[tuple[np.ndarray | None, np.ndarray]]:
    """The rows of ``view`` copied into stacks to scan: ``(which rows, their values)``
    (None: all, in order). Of float values of 4 bytes or more, for the twin (``twin()``,
    asked only then), the rows that may hold a NaN or an inf (their sum is not finite)
    apart from the others: a stack of finite rows takes the twin's quick way, whatever a
    few rows hold.
    Each row's results are its own, whichever rows it is stacked with."""
    if view.dtype.kind == "f" and view.dtype.itemsize >= 4 and twin():
        with np.errstate(all="ignore"):
            finite = np.isfinite(view.sum(axis=1))
        if not finite.all():
            ok, bad = np.flatnonzero(finite), np.flatnonzero(~finite)
            return [(rows_of, view[rows_of]) for rows_of in (ok, bad) if len(rows_of)]
    return [(None, np.ascontiguousarray(view))]


def _scan_rows(x2: np.ndarray, at: np.ndarray, spec: ScanSpec, rows: _Rows) -> None:
    """Rows of members of one kind (``x2``, each member's values; ``at``: their positions
    in the set) scanned together: the clean ones' statistics into ``rows``' columns (the
    first such one of its kind building the template), the others' reports built."""
    got = scan_stacked(x2, spec)
    with np.errstate(over="ignore"):
        totals = got.n * got.mean  # as ``totals`` of one slice
    stats = (got.n, got.mean, got.std, got.min, got.max, totals)
    special = got.alone | got.counts.any(axis=1)
    clean = np.flatnonzero(~special)
    kind = (spec.dtype, spec.shape)
    tid = rows.kinds.get(kind)
    if tid is None and len(clean):
        r = int(clean[0])
        one = tuple(c[r].item() for c in stats)
        tid = rows.kinds[kind] = len(rows.templates)
        rows.templates.append(_first_report(spec, x2[r], rows.names[int(at[r])], one))
    for r in np.flatnonzero(special).tolist():
        p = int(at[r])
        name = rows.names[p]
        if got.alone[r]:
            rows.built[p] = _alone(spec, x2[r], name)
            continue
        one = tuple(c[r].item() for c in stats)
        if tid is not None and spec.dtype.kind == "f":
            rows.built[p] = _found_like(rows.templates[tid], spec, x2[r], name, got.counts[r], one)
        else:
            rows.built[p] = _found(spec, x2[r], name, got.counts[r], one)
    if len(clean):
        where = at[clean]
        for col, c in zip(rows.cols, stats):
            col[where] = c[clean]
        rows.tid[where] = tid


def _found_like(
    template: ScanReport, spec: ScanSpec, row: np.ndarray, name: str, counts, stats
) -> ScanReport:
    """The report of a member of real floats with findings (``_found``'s), from the
    template of its kind: its statistics, its row's counts, its first positions of each
    kind as ``found_summary`` looks for them (the first ``max_locations`` where the
    kind's predicate holds, in C order, in one region: the whole array), laid out as
    ``build_report`` lays them out. A tenth of ``_found``'s time."""
    out = like(template, name, *stats)
    thr, cap, shape = spec.thresholds, spec.max_locations, spec.shape
    locs = []
    for k in np.flatnonzero(counts).tolist():
        kind = spec.kinds[k]
        if not kind:
            continue
        got = first_where(row, lambda v, k=k: kind_mask(v, k, thr), cap)
        for flat, val in zip(got.tolist(), row[got].astype(np.float64).tolist()):
            index = tuple(int(i) for i in np.unravel_index(flat, shape))
            locs.append((flat, k, Location(kind, index, float(val), None)))
    locs.sort(key=lambda t: (t[0], t[1]))
    d = out.__dict__
    d["nan"], d["posinf"], d["neginf"] = (
        int(counts[kinds.SLOT_NAN]), int(counts[kinds.SLOT_POSINF]), int(counts[kinds.SLOT_NEGINF])
    )  # fmt: skip
    d["cast"] = {
        t: CastRisk(*(int(counts[kinds.cast_slot(c, i)]) for c in ("overflow:", "underflow:")))
        for i, t in enumerate(spec.cast)
    }
    d["locations"] = [t[2] for t in locs]
    d["regions"] = [((0,) * len(shape), tuple(int(n) for n in shape), int(counts.sum()))]
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
    if (fortran and len(shape) > 1) or dtype.hasobject or len(shape) > _max_dims():
        return None  # (more axes than NumPy's arrays hold: its factory says so)
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


@functools.cache
def _max_dims() -> int:
    """The most axes a NumPy array may have (32 before NumPy 2, 64 since)."""
    return next(n for n in (64, 32) if _holds(n))


def _holds(n: int) -> bool:
    try:
        np.empty((0,) * n)
    except ValueError:
        return False
    return True


def _first_report(spec: ScanSpec, row: np.ndarray, name: str, stats: tuple) -> ScanReport:
    """The report of a clean member, built as its own scan builds it."""
    n, mean, std, lo, hi, total = stats
    s = Summary(np.zeros(kinds.N_KINDS, np.int64), n, mean, std, total, lo, hi, row.size)
    source = ArraySource(row.reshape(spec.shape), name=name)
    return build_report(spec, report_meta(source), s, [], None, True, consume=True, threads=1)
