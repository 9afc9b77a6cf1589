"""Sample skip-lists: the keys of the samples or members of a report with an error-severity
finding (``ScanReport.bad_samples``), for a loader to skip or replay.

A key is, by what was scanned:

- a member of a group (a file of a shard set, a tensor of a checkpoint, an array of a
  store): its key in ``report.arrays`` (``"train/a.npy"``, ``"layers.0.attn.w"``);
- a member of a WebDataset tar: its sample, the member's path up to the first dot of its
  file name (``"shard-000000.tar/000005"`` for ``000005.x.npy`` and ``000005.y.npz/a``);
- a value in a table (Parquet, Arrow, a DataFrame), alone or in a set: ``(table, row)``,
  the table's name or key and the row (a DataFrame's: its index label, text or a
  timestamp as it is; scanned with ``by=0``, its position, as the per-row findings give
  it);
- an array scanned with ``by=0``: its row index (an ``int``), or ``(key, row)`` in a group
  (a table scanned with ``by=0``: ``(table, row)``);
- an array alone, without ``by``: its name.

Rows come from the per-slice findings of ``by=0`` (every slice is listed), or else from the
recorded locations; when a kind has more values than locations recorded
(``max_locations``), the rows of the others are unknown: the list is then not
``complete``, and ``notes`` say which member and how to get them all (``by=0``, or a larger
``max_locations``). Never truncated without saying so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..model.kinds import ERROR, severity_of
from ..model.tar_keys import ARRAY_SUFFIXES, REST_OF_TAR

Key = Any  # str, int, or (str, int)
# the name of a tar's member holding arrays, `` (2)`` when twice (``tensors.unique_keys``)
_ARRAY_MEMBER = re.compile("(" + "|".join(re.escape(s) for s in ARRAY_SUFFIXES) + r")( \(\d+\))?$")


class BadSamples(list):
    """The bad samples' keys, in the order of the report, each once; ``complete`` False
    (with ``notes`` saying why) when some could not be listed."""

    def __init__(self, keys=(), notes: list[str] | None = None):
        super().__init__(keys)
        self.notes = list(notes or [])

    @property
    def complete(self) -> bool:
        return not self.notes


def bad_samples(report) -> BadSamples:
    """The keys of the samples with an error-severity finding in ``report`` (see the
    module's docstring)."""
    keys: list[Key] = []
    notes: list[str] = []
    if not report.complete:
        notes.append(f"{report.name}: the scan stopped early (fail_fast); the rest is unchecked")
    # a group (a table without by: its columns); a table scanned with by is one array,
    # its text columns in ``skipped`` (its rows were never listed)
    if report.arrays or report.dtype == "group" or (report.skipped and report.by is None):
        table = len(report.shape) == 2  # a table's columns (a group's shape is ())
        for key, sub in members_found(report.arrays):  # the others: no key of theirs is bad
            if table:
                keys += [(report.name, row) for row in _rows(sub, key, notes)]
            else:
                keys += _member_keys(key, sub, notes)
        keys += _unreadable_members(report)
    else:
        keys += _array_keys(report, notes)
    return BadSamples(_unique(keys), notes)


def members_found(arrays) -> Iterable[tuple[str, Any]]:
    """``(key, report)`` of a group's members that may hold something found: all of them,
    or of a set's lazily built members (``members.MemberReports``) those built, the others
    clean by construction (nothing counted, nothing found) and left unbuilt."""
    return arrays.built() if is_lazy(arrays) else arrays.items()


def is_lazy(arrays) -> bool:
    """Whether a group's ``arrays`` are a set's lazily built members
    (``members.MemberReports``), told by what they offer: ``report/model.py`` imports no
    module that imports it."""
    return callable(getattr(arrays, "built", None))


def _unique(keys: list[Key]) -> list[Key]:
    seen: set = set()
    out = []
    for k in keys:
        if k not in seen:
            seen.add(k)
            out.append(k)
    return out


def _errors(report) -> bool:
    """Whether a report (a member's, not its group's) has anything of severity error."""
    return not report.ok


def _array_keys(report, notes: list[str]) -> list[Key]:
    """An array alone: its rows with ``by=0``, else its name (a table with no numeric
    column has none)."""
    if not _errors(report) or any(f.kind == "nothing_scanned" for f in report.findings):
        return []
    if report.by == (0,) or _is_table_column(report):  # a table's rows, by any axis too
        rows = _rows(report, report.name, notes)
        return [(report.name, r) for r in rows] if _is_table_column(report) else rows
    return [report.name]


def _member_keys(key: str, sub, notes: list[str]) -> list[Key]:
    if not _errors(sub):
        return []
    tar = _tar_sample(key)
    if tar is not None:
        return [tar]
    if sub.by == (0,) or _is_table_column(sub):
        table = _table_of(key, sub) if _is_table_column(sub) else key
        return [(table, row) for row in _rows(sub, key, notes)]
    return [key]


def _table_of(key: str, sub) -> str:
    """The table of the column ``key`` (``"t.feather/emb/v1"`` -> ``"t.feather"``: the
    column's own name, from its locations' labels, may hold a ``/``)."""
    for loc in sub.locations:
        column = str((loc.labels or {}).get("column", ""))
        if column and key.endswith("/" + column):
            return key[: -len(column) - 1]
    return key.rsplit("/", 1)[0] if "/" in key else key


def _is_table_column(report) -> bool:
    return any(loc.labels and "row" in loc.labels for loc in report.locations)


def write_keys(keys: BadSamples, path: str) -> None:
    r"""``--bad-samples FILE``: one key a line; ``(table, row)`` as ``table<TAB>row``; a
    backslash, tab or newline in a key written ``\\``, ``\t``, ``\n``."""

    def text(k: Key) -> str:
        if isinstance(k, tuple):
            return "\t".join(text(p) for p in k)
        s = str(k)
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")

    with open(path, "w", encoding="utf-8") as f:
        f.writelines(text(k) + "\n" for k in keys)


def _tar_sample(key: str) -> str | None:
    """``"shard.tar/dir.v1/000005.x.npz/a"`` -> ``"shard.tar/dir.v1/000005"`` (the
    member's folders, then its file name up to its first dot, as WebDataset keys it);
    None for a key not in a tar."""
    at = key.lower().find(".tar/")
    if at < 0:
        return None
    tar, rest = key[: at + 4], key[at + 5 :]
    parts = rest.split("/")
    # the member's file: the first part named as an array member (a folder may hold dots)
    i = next((i for i, p in enumerate(parts) if _ARRAY_MEMBER.search(p.lower())), None)
    if i is None:
        i = len(parts) - 1
    return "/".join([tar, *parts[:i], parts[i].split(".", 1)[0]])


def _rows(report, key: str, notes: list[str]) -> list[Key]:
    """The rows of an array or table column with an error: from its per-row findings
    (``by=0``: every row is listed) and its recorded locations; a note when some kind has
    more values than locations recorded (and no per-row finding covers it)."""
    rows: set[Key] = set()
    covered: set[str] = set()
    if report.by == (0,):
        for f in report.findings:
            if f.severity == ERROR and f.where:
                rows.add(int(f.where[0]))
        covered = {"nan", "posinf", "neginf"}  # the ``nonfinite`` rows: all of them
    for f in report.findings:
        if f.severity == ERROR and not f.where and report.by != (0,):
            notes.append(f"{key}: {f.kind} ({f.message}): which rows, unknown")
    recorded: dict[str, int] = {}
    for loc in report.locations:
        if severity_of(loc.kind) != ERROR:
            continue
        recorded[loc.kind] = recorded.get(loc.kind, 0) + 1
        if loc.index:  # with by=0 the rows are positions, as its findings give them
            rows.add(int(loc.index[0]) if report.by == (0,) else _row(loc))
    for kind, n in report.counts().items():
        if n and severity_of(kind) == ERROR and kind not in covered and recorded.get(kind, 0) < n:
            notes.append(
                f"{key}: {n} {kind} values, {recorded.get(kind, 0)} locations recorded "
                f"(max_locations={report.max_locations}): the rows of the others are not "
                "listed; scan with by=0 or a larger max_locations"
            )
    for f in report.findings:  # unreadable chunks: rows unknown
        if f.severity == ERROR and f.kind in ("unreadable_chunk", "missing_chunk"):
            notes.append(f"{key}: {f.kind} at {tuple(f.where)}: its rows are not listed")
    try:
        return sorted(rows)
    except TypeError:  # labels of several types (an index of numbers and text)
        return sorted(rows, key=repr)


def _row(loc) -> Key:
    """The row of a location: its label when it has one (a DataFrame's index: an integer,
    text, a timestamp...), else its position."""
    if not (loc.labels and "row" in loc.labels):
        return loc.index[0]
    label = loc.labels["row"]
    return int(label) if isinstance(label, (int, np.integer)) else label


def _unreadable_members(report) -> list[str]:
    """Skipped members that could not be read (an error finding of the group's own, whose
    message starts with the member's key)."""
    out = []
    for f in report.findings:
        if f.severity != ERROR or f.array is not None or f.kind == "nothing_scanned":
            continue
        for key in report.skipped:
            if f.message.startswith(f"{key}: "):
                rest = key.endswith(REST_OF_TAR)  # no sample to name: the key itself
                out.append(key if rest else _tar_sample(key) or key)
                break
    return out
