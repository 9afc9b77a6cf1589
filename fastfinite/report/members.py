"""A group's member reports, built when first asked for: ``report.arrays`` of a set of
10,000 small files scanned together (``engines.batched``), where building each clean
member's report took longer than reading its file.

A clean member (nothing found, statistics of its own) is kept as its row of columns
(count, mean, std, min, max, sum) and the report of the first clean member of its kind
(dtype and shape), its template; its own report, asked for, is the template's copy with
its name and statistics (``like``): what its own scan builds, to the last bit. The
group's totals (``ScanReport.total``) are taken from the columns and the built reports,
in the members' order, as they are from the reports themselves (``group_counts``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import numpy as np

from .model import ScanReport, fold_counts


class MemberReports(MutableMapping):
    """``{key: ScanReport}`` in the members' order, clean members' reports built on first
    access (``like``), then kept; a ``dict`` to its users (``==`` compares the reports).

    ``slots``: key -> a built report, or the clean member's row (an int) in the columns
    ``cols`` (``n, mean, std, min, max, sum``, NumPy arrays), ``tid`` (its template's
    index in ``templates``) and ``names`` (its report's name); ``rows``: each slot's row,
    -1 for a built report, in order (None: read from ``slots``)."""

    def __init__(
        self,
        slots: dict,
        cols: tuple,
        tid: np.ndarray,
        templates: list,
        names: list,
        rows: np.ndarray | None = None,
    ):
        self._slots = slots
        self._cols = cols
        self._tid = tid
        self._templates = templates
        self._names = names
        self._rows = rows

    @classmethod
    def joined(cls, parts: list) -> MemberReports:
        """One mapping of the members of ``parts`` in order, each part a set's
        ``MemberReports`` (a part of a set scanned where it was sent) or a ``(key,
        report)`` pair: the parts' columns, templates and names put end to end."""
        slots: dict = {}
        cols: list[list] = [[] for _ in range(6)]
        tids, rows, templates, names = [], [], [], []
        offset = 0
        for part in parts:
            if not isinstance(part, MemberReports):
                key, report = part
                slots[key] = report
                rows.append(np.array([-1], np.int64))
                continue
            own = part._slot_rows()
            for (key, v), row in zip(part._slots.items(), own.tolist()):
                slots[key] = v if row < 0 else row + offset
            rows.append(np.where(own >= 0, own + offset, -1))
            for col, c in zip(cols, part._cols):
                col.append(c)
            tids.append(np.where(part._tid >= 0, part._tid + len(templates), -1))
            templates += part._templates
            names += part._names
            offset += len(part._tid)
        dtypes = (np.int64, *[np.float64] * 5)
        joined = tuple(np.concatenate([np.empty(0, d), *c]) for c, d in zip(cols, dtypes))
        tid = np.concatenate([np.empty(0, np.int32), *tids]).astype(np.int32)
        row_of = np.concatenate([np.empty(0, np.int64), *rows])
        return cls(slots, joined, tid, templates, names, row_of)

    def __getitem__(self, key: str) -> ScanReport:
        got = self._slots[key]
        if type(got) is int:
            got = self._slots[key] = self._build(got)
            self._rows = None  # a report handed out may be changed in place (``scale=``)
        return got

    def _build(self, row: int) -> ScanReport:
        n, mean, std, lo, hi, total = (c[row].item() for c in self._cols)
        return like(self._templates[self._tid[row]], self._names[row], n, mean, std, lo, hi, total)

    def __setitem__(self, key: str, report: ScanReport) -> None:
        self._slots[key] = report
        self._rows = None

    def __delitem__(self, key: str) -> None:
        del self._slots[key]
        self._rows = None

    def _slot_rows(self) -> np.ndarray:
        """Each slot's row in the columns, -1 for a report set in it, in order."""
        if self._rows is None:
            self._rows = np.asarray(
                [v if type(v) is int else -1 for v in self._slots.values()], np.int64
            )
        return self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, key: object) -> bool:
        return key in self._slots

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def __copy__(self) -> MemberReports:
        """A mapping of its own (``copy.copy``), the columns shared: setting a member in
        one leaves the other as it was."""
        return MemberReports(
            dict(self._slots), self._cols, self._tid, self._templates, self._names, self._rows
        )

    def copy(self) -> dict[str, ScanReport]:
        """A ``dict`` of every member's report (each built), as ``dict.copy`` gives."""
        return dict(self.items())

    def __or__(self, other):
        return self.copy() | other if isinstance(other, Mapping) else NotImplemented

    def __ror__(self, other):
        return dict(other) | self.copy() if isinstance(other, Mapping) else NotImplemented

    def pending(self) -> int:
        """How many members' reports are not built yet."""
        return sum(type(v) is int for v in self._slots.values())

    def built(self) -> list[tuple[str, ScanReport]]:
        """``(key, report)`` of the members whose reports are built, in order: the others
        (rows of the columns, never handed out) are clean, with no location, finding, cast
        risk or missing chunk."""
        idx = self._slot_rows()
        if (idx >= 0).all():
            return []
        keys = list(self._slots)
        return [(keys[i], self[keys[i]]) for i in np.flatnonzero(idx < 0).tolist()]

    def templates(self) -> list[ScanReport]:
        """The templates of the members not built (what they share: ``by``,
        ``z_threshold``, ``max_locations``, ``complete``...)."""
        idx = self._slot_rows()
        rows = idx[idx >= 0]
        return [self._templates[t] for t in np.unique(self._tid[rows])] if len(rows) else []

    def group_counts(self) -> tuple[dict[str, Any], Any, Any]:
        """``(model.combined_counts(reports), sum of sums, sum of elements)`` over every
        member's report in order, from the columns where they are not built."""
        idx = self._slot_rows()
        pending = idx >= 0
        at = idx[pending]
        stats = [np.zeros(len(idx), c.dtype) for c in self._cols]
        for col, c in zip(stats, self._cols):
            col[pending] = c[at]
        elements = 0
        nan = posinf = neginf = 0
        cast_keys = [(int(i), self._templates[t].cast) for t, i in self._first_rows(idx)]
        if not pending.all():
            slots = list(self._slots.values())
            for i in np.flatnonzero(~pending).tolist():
                r = slots[i]
                for col, v in zip(stats, (r.count, r.mean, r.std, r.min, r.max, r.sum)):
                    col[i] = v
                nan, posinf, neginf = nan + r.nan, posinf + r.posinf, neginf + r.neginf
                elements += r.elements
                cast_keys.append((i, r.cast))
        if pending.any():
            tids, per = np.unique(self._tid[at], return_counts=True)
            for t, k in zip(tids.tolist(), per.tolist()):
                elements += self._templates[t].elements * k
        casts = [cast for _, cast in sorted(cast_keys, key=lambda ic: ic[0])]  # keys in order
        ns, means, stds, los, his, tots = stats
        counts = fold_counts(nan, posinf, neginf, casts, ns, means, stds, los, his)
        return counts, sum(tots.tolist()), elements

    def _first_rows(self, idx: np.ndarray) -> list[tuple[int, int]]:
        """``(template, position of its first member in idx)`` of the templates of the
        members not built."""
        pending = np.flatnonzero(idx >= 0)
        if not len(pending):
            return []
        tids, first = np.unique(self._tid[idx[pending]], return_index=True)
        return list(zip(tids.tolist(), pending[first].tolist()))


def like(template: ScanReport, name: str, n, mean, std, lo, hi, total) -> ScanReport:
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
