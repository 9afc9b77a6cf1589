"""What changed between two scans of the same data (``fastfinite diff OLD.json NEW.json``).

Findings (missing and unreadable chunks, slice anomalies) are listed whole in a report, so
a finding is new or gone by its kind, where and array. Value locations are the first
``max_locations`` of each kind in C order: where the older list was cut, a location after
its last entry may have been there all along, so it is counted as maybe new, never called
new (and the same for gone); ``has_new`` counts it, so a check fails when unsure. Counts are compared exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError
from ..indices import fmt_index
from ..model.kinds import ERROR, checked_severity, severity_of, with_groups
from ..report.model import ScanReport, member_path


@dataclass(frozen=True)
class Change:
    """One difference between two reports.

    Attributes
    ----------
    kind : str
        A location kind (``"nan"``, ``"overflow:float32"``...) or a finding kind
        (``"missing_chunk"``, ``"zero_variance"``...).
    where : tuple of int
        The element's index (locations) or the finding's coordinates.
    array : str or None
        The array's path in a group's report.
    what : str
        ``"location"`` or ``"finding"``.
    severity : str
        ``"error"`` or ``"warning"``: the finding's, or the location kind's.
    """

    kind: str
    where: tuple[int, ...]
    array: str | None = None
    what: str = "location"
    severity: str = field(default=None, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        _set_severity(self)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "what": self.what,
            "kind": self.kind,
            "severity": self.severity,
            "where": list(self.where),
        }
        return d if self.array is None else {**d, "array": self.array}

    def __str__(self) -> str:
        at = f"{self.array}: " if self.array else ""
        noun = "at" if self.what == "location" else "of"
        return f"{at}{self.kind} {noun} {fmt_index(self.where)}"


@dataclass(frozen=True)
class CountChange:
    """A count that differs: ``kind`` in ``array`` went from ``old`` to ``new``
    (``severity``: the kind's, ``"error"`` or ``"warning"``)."""

    kind: str
    old: int
    new: int
    array: str | None = None
    severity: str = field(default=None, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        _set_severity(self)

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind, "severity": self.severity, "old": self.old, "new": self.new}
        return d if self.array is None else {**d, "array": self.array}

    def __str__(self) -> str:
        at = f"{self.array}: " if self.array else ""
        return f"{at}{self.kind} {self.old} -> {self.new}"


def _set_severity(change: Change | CountChange) -> None:
    """A change's severity: the one given, checked, else its kind's (as a Finding's)."""
    object.__setattr__(change, "severity", checked_severity(change.kind, change.severity))


@dataclass
class ReportChanges:
    """The differences between an older and a newer report of the same data.

    Attributes
    ----------
    new, gone : list of Change
        Locations and findings in one report and not the other.
    counts : list of CountChange
        Counts of each location kind and of missing chunks that differ.
    maybe_new, maybe_gone : dict of str to int
        Per kind, locations listed in one report that the other's list, cut at its
        ``max_locations``, stops before: they may be new (or gone), or only unlisted.
    arrays_added, arrays_removed : list of str
        A group's arrays present in one report only.
    notes : list of str
        What was not compared (a cast target scanned in one report only).
    rescanned : dict of str to list of tuple of int
        With a cache: per array (its name), the grid coordinates of the storage units read
        again (every unit on a first scan); the others were recalled.
    regions_scanned, regions_recalled : int
        With a cache: the regions read and scanned, and those recalled.
    cache_bytes : int or None
        With a cache: its size on disk after the scan.
    """

    old_name: str
    new_name: str
    new: list[Change] = field(default_factory=list)
    gone: list[Change] = field(default_factory=list)
    counts: list[CountChange] = field(default_factory=list)
    maybe_new: dict[str, int] = field(default_factory=dict)
    maybe_gone: dict[str, int] = field(default_factory=dict)
    arrays_added: list[str] = field(default_factory=list)
    arrays_removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rescanned: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    regions_scanned: int = 0
    regions_recalled: int = 0
    cache_bytes: int | None = None

    @property
    def has_new(self) -> bool:
        """Anything the newer scan found that the older did not, or may have: a new location
        or finding, a count that grew, or a listed location the older list cannot rule out."""
        return bool(self.new or self.maybe_new or any(c.new > c.old for c in self.counts))

    def new_kinds(self) -> set[str]:
        """The kinds of what is new (or may be), with their groups (``nonfinite``, ``cast``,
        ``overflow``, ``underflow``) and severities (``error``, ``warning``), as
        ``--fail-on`` names them."""
        changed = self.new + [c for c in self.counts if c.new > c.old]
        maybe = {_kind_of(key) for key in self.maybe_new}
        kinds = {c.kind for c in changed} | maybe
        return with_groups(kinds, {c.severity for c in changed} | {_severity(k) for k in maybe})

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old_name,
            "new_name": self.new_name,
            "has_new": self.has_new,
            "new": [c.to_dict() for c in self.new],
            "gone": [c.to_dict() for c in self.gone],
            "counts": [c.to_dict() for c in self.counts],
            "maybe_new": dict(self.maybe_new),
            "maybe_gone": dict(self.maybe_gone),
            "arrays_added": list(self.arrays_added),
            "arrays_removed": list(self.arrays_removed),
            "notes": list(self.notes),
            "rescanned": {k: [list(c) for c in v] for k, v in self.rescanned.items()},
            "regions_scanned": self.regions_scanned,
            "regions_recalled": self.regions_recalled,
            "cache_bytes": self.cache_bytes,
        }

    def __str__(self) -> str:
        lines = [
            f"changes from {self.old_name} to the newer"
            if self.old_name
            else "changes: all is new (no earlier scan)"
        ]
        if not (self.new or self.gone or self.counts or self.arrays_added or self.arrays_removed):
            lines.append("  nothing changed")
        for title, items in (
            ("arrays added", self.arrays_added),
            ("arrays removed", self.arrays_removed),
            ("counts", self.counts),
            ("new", self.new),
            ("gone", self.gone),
        ):
            if items:
                lines.append(f"  {title} ({len(items)}):")
                lines.extend(f"    {c}" for c in items[:50])
                if len(items) > 50:
                    lines.append(f"    ... and {len(items) - 50} more")
        for title, maybe in (("new", self.maybe_new), ("gone", self.maybe_gone)):
            for kind, n in maybe.items():
                lines.append(
                    f"  {kind}: {n} location(s) maybe {title}: past the end of the other "
                    "report's list, cut at max_locations"
                )
        lines.extend(f"  note: {n}" for n in self.notes)
        if self.cache_bytes is not None:
            units = sum(len(v) for v in self.rescanned.values())
            lines.append(
                f"  cache: {self.regions_recalled} region(s) recalled, {self.regions_scanned} "
                f"scanned ({units} unit(s) read); {_size(self.cache_bytes)} on disk"
            )
        return "\n".join(lines)


def _kind_of(key: str) -> str:
    """The kind in a ``maybe_new`` key (``kind``, or ``path:kind`` in a group)."""
    from ..options import known_kinds

    known = set(known_kinds())
    if key in known:
        return key
    return next(
        (key[i + 1 :] for i, c in enumerate(key) if c == ":" and key[i + 1 :] in known), key
    )


def _severity(kind: str) -> str:
    """A location kind's severity; an error for a name it cannot tell (unsure: fail)."""
    try:
        return severity_of(kind)
    except ValueError:
        return ERROR


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def diff_reports(old: ScanReport | None, new: ScanReport) -> ReportChanges:
    """What changed from an older scan of some data to a newer one.

    Parameters
    ----------
    old, new : ScanReport
        Reports of the same array or group (for instance read back with
        ``ScanReport.from_json``), scanned with the same ``by`` and ``z_threshold``; the
        newer may have more rows (appended data). ``old`` None: there is no earlier scan,
        and everything the newer found is new.

    Returns
    -------
    ReportChanges
        New and gone locations and findings, changed counts, and what cannot be told.

    Raises
    ------
    InvalidArgumentError
        The reports are of different data, or were scanned with other ``by`` or
        ``z_threshold`` (their slice findings would not mean the same).
    """
    if not (isinstance(old, (ScanReport, type(None))) and isinstance(new, ScanReport)):
        raise InvalidArgumentError("diff_reports takes two ScanReport objects")
    if old is None:
        out = ReportChanges("", new.name, notes=["no earlier scan to compare: all is new"])
        _diff_tree(None, new, None, out)
        return out
    if old.name != new.name:
        raise InvalidArgumentError(
            f"the reports are of different data: {old.name!r} and {new.name!r}"
        )
    out = ReportChanges(old.name, new.name)
    for label, r in (("older", old), ("newer", new)):
        if not r.complete:
            out.notes.append(
                f"the {label} scan stopped early (fail_fast): what it did not scan is not compared"
            )
    _diff_tree(old, new, None, out)
    return out


def _diff_tree(old: ScanReport | None, new: ScanReport, path, out: ReportChanges) -> None:
    """Add what changed in one report (``path``: its name in the group compared, None at
    the top): an array's counts, locations and findings; a group's own findings, then each
    of its arrays', a member that is itself a group (``merge_reports`` of groups) array by
    array too, named by ``member_path``. An array only the newer has is all new (listed in
    ``arrays_added`` when there is an older report at all)."""
    if old is not None and bool(old.arrays) != bool(new.arrays):
        raise InvalidArgumentError(
            f"one report of {path or old.name!r} is of a group, the other not"
        )
    if not new.arrays:
        _diff_one(old, new, path, out)
        return
    _diff_one(old, new, path, out, per_array=False)  # the group's own findings
    before = old.arrays if old is not None else {}
    for key in sorted(set(before) | set(new.arrays)):
        name = member_path(path, key) if path else key
        if key not in new.arrays:
            out.arrays_removed.append(name)
            continue
        if key not in before and old is not None:
            out.arrays_added.append(name)
        _diff_tree(before.get(key), new.arrays[key], name, out)


def _diff_one(old: ScanReport | None, new: ScanReport, path, out: ReportChanges, per_array=True):
    """Add what changed in one array's report (``old`` None: an array only the newer report
    has; with ``per_array`` False, only a group's own findings: its counts are its arrays'
    totals, compared array by array)."""
    comparable = None  # every kind, for an array the older report does not have
    if old is None:
        old = ScanReport(name=new.name)
    else:
        for attr in ("by", "z_threshold"):
            if getattr(old, attr) != getattr(new, attr):
                raise InvalidArgumentError(
                    f"the reports of {path or old.name!r} were scanned with other {attr}: "
                    f"{getattr(old, attr)!r} and {getattr(new, attr)!r}"
                )
        for t in sorted(set(old.cast) ^ set(new.cast)):
            out.notes.append(f"{path + ': ' if path else ''}cast target {t} in one report only")
        comparable = _location_kinds(set(old.cast) & set(new.cast))
    old_counts, new_counts = old.counts(), new.counts()
    for kind in sorted(set(old_counts) | set(new_counts)) if per_array else ():
        if comparable is not None and kind not in comparable:
            continue
        a, b = old_counts.get(kind, 0), new_counts.get(kind, 0)
        if a != b:
            out.counts.append(CountChange(kind, int(a), int(b), path))
    if per_array and old.missing_chunks != new.missing_chunks:
        severity = (new if new.missing_chunks else old).missing_severity
        out.counts.append(
            CountChange("missing_chunk", old.missing_chunks, new.missing_chunks, path, severity)
        )
    if per_array:
        _diff_locations(old, new, path, out, comparable, old_counts, new_counts)
    was = {(f.kind, tuple(f.where)): f.severity for f in old.findings if f.array is None}
    now = {(f.kind, tuple(f.where)): f.severity for f in new.findings if f.array is None}
    for kind, where in sorted(now.keys() - was.keys()):
        out.new.append(Change(kind, where, path, "finding", now[kind, where]))
    for kind, where in sorted(was.keys() - now.keys()):
        out.gone.append(Change(kind, where, path, "finding", was[kind, where]))


def _location_kinds(targets) -> set[str]:
    """The location kinds two reports both count, given the cast targets both scanned."""
    return {"nan", "posinf", "neginf"} | {
        f"{d}:{t}" for t in targets for d in ("overflow", "underflow")
    }


def _diff_locations(old, new, path, out, comparable, old_counts, new_counts) -> None:
    kinds = {loc.kind for loc in old.locations} | {loc.kind for loc in new.locations}
    for kind in sorted(kinds):
        if comparable is not None and kind not in comparable:
            continue
        a = sorted(tuple(loc.index) for loc in old.locations if loc.kind == kind)
        b = sorted(tuple(loc.index) for loc in new.locations if loc.kind == kind)
        a_cut = old_counts.get(kind, 0) > len(a)  # the list stops before the last one
        b_cut = new_counts.get(kind, 0) > len(b)
        new_for_sure, maybe_new = _absent_from(b, a, a_cut)
        gone_for_sure, maybe_gone = _absent_from(a, b, b_cut)
        out.new.extend(Change(kind, idx, path) for idx in new_for_sure)
        out.gone.extend(Change(kind, idx, path) for idx in gone_for_sure)
        key = f"{path}:{kind}" if path else kind
        if maybe_new:
            out.maybe_new[key] = maybe_new
        if maybe_gone:
            out.maybe_gone[key] = maybe_gone
        if a_cut or b_cut:
            out.notes.append(
                f"{key}: positions past the first {min(len(a), len(b))} listed are compared "
                "by count only (a larger max_locations lists more)"
            )


def _absent_from(listed: list, other: list, other_cut: bool) -> tuple[list, int]:
    """The positions of ``listed`` not in ``other`` (both sorted, C order): those ``other``
    would hold if they were there, and the count of those past the end of ``other``'s
    list when it was cut (they may be there, unlisted)."""
    known, maybe = [], 0
    seen = set(other)
    for idx in listed:
        if idx in seen:
            continue
        if other_cut and (not other or idx > other[-1]):
            maybe += 1
        else:
            known.append(idx)
    return known, maybe
