"""The public face of a scan: ScanReport, Location, CastRisk, Finding."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..indices import member_path  # the name of a group's array (cache/changes takes it here)
from ..model.kinds import (
    BASE_KINDS,
    CHUNK_KINDS,
    ERROR,
    GROUP_KINDS,
    PER_DTYPE_SLICE_KINDS,
    SLICE_KINDS,
    WARNING,
    checked_severity,
    fails,
    is_slice_kind,
    missing_chunk_severity,
    severity_of,
    with_groups,
)
from ..model.stats import chan_fold

SCHEMA = "fastfinite.report/2"
SCHEMAS = ("fastfinite.report/1", SCHEMA)  # what ``from_dict`` reads: /1 has no severities
FIRST_PER_KIND = 3  # locations of each kind a message or the summary shows


def check_schema(d: Any) -> str:
    """The schema of the report dict ``d`` when ``from_dict`` reads it (one of
    ``SCHEMAS``), the one place that knows which; else an ``InvalidArgumentError`` saying
    what ``d`` is instead: no JSON object, not a fastfinite report, a schema of no known
    version, or one newer than this fastfinite reads (upgrade)."""
    from .._version import __version__

    known = ", ".join(repr(s) for s in SCHEMAS)
    if not isinstance(d, dict):
        raise InvalidArgumentError(
            f"not a fastfinite report: a JSON {type(d).__name__}, not an object"
        )
    schema = d.get("schema")
    if schema in SCHEMAS:
        return schema
    family, _, version = str(schema).rpartition("/")
    newest = SCHEMA.rpartition("/")
    if family != newest[0]:
        raise InvalidArgumentError(
            f"not a fastfinite report: schema {schema!r}, expected one of {known}"
        )
    if version.isdigit() and int(version) > int(newest[2]):
        raise InvalidArgumentError(
            f"a report of schema {schema!r}, which fastfinite {__version__} cannot read (it "
            f"writes {SCHEMA!r}): upgrade fastfinite"
        )
    raise InvalidArgumentError(f"unknown schema {schema!r}; fastfinite {__version__} reads {known}")


@dataclass(frozen=True)
class Location:
    """Where one finding sits.

    Attributes
    ----------
    kind : str
        ``"nan"``, ``"posinf"``, ``"neginf"``, ``"overflow:TARGET"`` or ``"underflow:TARGET"``.
    index : tuple of int
        Coordinates in the scanned array (``()`` for a 0-d array); in a group's top-level
        ``locations``, in the array named by ``array``.
    value : float
        The value found there (for complex data, the offending part).
    labels : dict or None
        Coordinate labels (xarray, tables).
    array : str or None
        In a group's report, the path of the array the location is in (None: this report's
        own array, or a table's (row, column)).
    severity : str
        ``"error"`` (NaN, inf, cast overflow) or ``"warning"`` (cast underflow), from the
        kind (``kinds.severity_of``).
    """

    kind: str
    index: tuple[int, ...]
    value: float = field(default=math.nan, compare=False)
    labels: dict[str, Any] | None = field(default=None, compare=False)
    array: str | None = field(default=None, compare=False)

    @property
    def severity(self) -> str:
        return severity_of(self.kind)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "kind": self.kind,
            "severity": self.severity,
            "index": list(self.index),
            "value": _num(self.value),
        }
        if self.labels is not None:
            d["labels"] = {k: _label(v) for k, v in self.labels.items()}
        if self.array is not None:
            d["array"] = self.array
        return d


@dataclass(frozen=True)
class CastRisk:
    """Finite values that become inf (``overflow``) or non-zero values that become 0
    (``underflow``) when cast to a narrower float."""

    overflow: int = 0
    underflow: int = 0

    def __bool__(self) -> bool:
        return bool(self.overflow or self.underflow)


@dataclass(frozen=True)
class Finding:
    """Something wrong that is not a single value: a missing chunk, an unreadable chunk, a
    slice that will not standardize.

    Attributes
    ----------
    kind : str
        e.g. ``"missing_chunk"``, ``"unreadable_chunk"``, ``"zero_variance"``.
    where : tuple of int
        Grid coordinates of the chunk (or index of the slice) concerned.
    message : str
        What happened and what it means.
    array : str or None
        In a group's report, the path of the array it is about (None for the group itself).
    severity : str
        ``"error"`` when it makes NaN or inf (or the data could not be checked),
        ``"warning"`` otherwise. Given at creation where the kind alone does not tell (a
        ``missing_chunk`` is an error when its fill value is NaN or inf); by default the
        kind's (``kinds.severity_of``).
    """

    kind: str
    where: tuple[int, ...]
    message: str
    array: str | None = None
    severity: str = field(default=None, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", checked_severity(self.kind, self.severity))

    def to_dict(self) -> dict[str, Any]:
        d = {
            "kind": self.kind,
            "severity": self.severity,
            "where": list(self.where),
            "message": self.message,
        }
        return d if self.array is None else {**d, "array": self.array}


def findings_of(kind: str, wheres: list, messages: list[str]) -> list[Finding]:
    """``[Finding(kind, w, m) for w, m in zip(wheres, messages)]``, twice as fast: the
    fields set in each instance's ``__dict__``, as a frozen dataclass's ``__init__`` does
    through ``object.__setattr__`` (a table with a NaN feature flags every sample, and
    the report lists 1e6 findings)."""
    new = object.__new__
    severity = severity_of(kind)
    out = []
    for w, m in zip(wheres, messages):
        f = new(Finding)
        d = f.__dict__
        d["kind"] = kind
        d["where"] = w
        d["message"] = m
        d["array"] = None
        d["severity"] = severity
        out.append(f)
    return out


@dataclass(frozen=True)
class Localization:
    """One element at which the replayed standardization fails, as NumPy reports it.

    Attributes
    ----------
    op : str
        The NumPy operation that raised: ``"cast"``, ``"add"``, ``"subtract"``,
        ``"multiply"``, ``"divide"``; ``"isnan"`` for NaN already in the data (errstate cannot
        see NaN, so those are reported directly).
    error : str
        NumPy's category: ``"invalid"``, ``"overflow"``, ``"divide"``, ``"underflow"``.
    index : tuple of int
        Global coordinates of the offending element.
    message : str
        NumPy's own text (``"overflow encountered in cast"``), with the step that raised.
    where : tuple of int
        The slice (or, without ``by``, the region's first element) that was replayed.
    """

    op: str
    error: str
    index: tuple[int, ...]
    message: str
    where: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass
class DynamicRange:
    """What a scaled cast to a narrow format keeps (``scan(..., scale=)``): values are
    modelled as ``(x.astype(float32) * scale).astype(target)``, as FP8 training recipes
    cast.

    Attributes
    ----------
    target : str
        The format cast to (``"float8_e4m3fn"``...).
    scale : float
        The scale applied (for ``scale="amax"``, ``target max / amax``; per slice in
        ``slices`` with ``by``).
    amax : float
        The largest finite magnitude in the data.
    smallest_normal : float
        The smallest magnitude, in the data's units, that stays a normal number of the
        target after scaling (below it, precision is lost; at half its smallest subnormal, all
        of it).
    overflow, underflow, subnormal : int
        Finite values that still overflow after scaling, non-zero values that flush to zero,
        and those that land among the target's subnormals.
    nonzero : int
        Finite non-zero values (what ``underflow_fraction`` is a fraction of).
    slices : dict of str to ndarray, optional
        With ``by`` and ``scale="amax"``: ``scale``, ``amax``, ``overflow``, ``underflow``,
        ``subnormal`` and ``nonzero`` per slice.
    """

    target: str
    scale: float
    amax: float
    smallest_normal: float
    overflow: int = 0
    underflow: int = 0
    subnormal: int = 0
    nonzero: int = 0
    slices: dict[str, np.ndarray] | None = None

    @property
    def underflow_fraction(self) -> float:
        return self.underflow / self.nonzero if self.nonzero else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in DYNAMIC_FIELDS}
        out = {k: _num(v) if isinstance(v, float) else v for k, v in out.items()}
        out["underflow_fraction"] = self.underflow_fraction
        out["slices"] = (
            None if self.slices is None else {k: v.tolist() for k, v in self.slices.items()}
        )
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DynamicRange:
        kw = {k: _unnum(d[k]) if k in DYNAMIC_FLOATS else d[k] for k in DYNAMIC_FIELDS}
        sl = d.get("slices")
        return cls(**kw, slices=None if sl is None else {k: np.array(v) for k, v in sl.items()})


DYNAMIC_FLOATS = ("scale", "amax", "smallest_normal")
DYNAMIC_FIELDS = (
    "target", *DYNAMIC_FLOATS, "overflow", "underflow", "subnormal", "nonzero",
)  # fmt: skip


@dataclass
class SliceReport:
    """Statistics per slice along the ``by`` axes: numpy arrays shaped like those axes.

    Attributes
    ----------
    by : tuple of int
    nan, posinf, neginf, count : int64 arrays
    mean, std, min, max : float64 arrays (NaN where a slice has no finite value)
    max_z : float64 array
        The largest |z| of each slice, ``max((max - mean) / std, (mean - min) / std)``.
    names : list of str or None
        The slices' names, when they are a table's columns (``by=-1`` on a DataFrame).
    """

    by: tuple[int, ...]
    nan: np.ndarray
    posinf: np.ndarray
    neginf: np.ndarray
    count: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    max_z: np.ndarray
    names: list[str] | None = None  # the slices' names: a table's columns (by=-1)

    ARRAYS = ("nan", "posinf", "neginf", "count", "mean", "std", "min", "max", "max_z")

    @property
    def shape(self) -> tuple[int, ...]:
        return self.count.shape

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"by": list(self.by), "shape": list(self.shape)}
        for name in self.ARRAYS:
            a = getattr(self, name)
            out[name] = a.ravel().tolist() if a.dtype.kind in "iu" else [_num(v) for v in a.ravel()]
        return out if self.names is None else {**out, "names": list(self.names)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SliceReport:
        def column(name: str) -> np.ndarray:
            if name in ("nan", "posinf", "neginf", "count"):
                return np.array(d[name], dtype=np.int64).reshape(d["shape"])
            return np.array([_unnum(v) for v in d[name]], dtype=np.float64).reshape(d["shape"])

        return cls(tuple(d["by"]), *(column(name) for name in cls.ARRAYS), d.get("names"))

    def to_pandas(self) -> Any:
        """One row per slice (``count, nan, posinf, neginf, mean, std, min, max, max_z,
        findings``): see :func:`fastfinite.report.tables.slices_to_pandas`."""
        from .tables import slices_to_pandas

        return slices_to_pandas(self, self.__dict__.get("_findings"))

    def to_xarray(self, like: Any = None) -> Any:
        """The columns of ``to_pandas`` as an ``xarray.Dataset`` over the ``by`` axes (with
        ``like``, the scanned DataArray's dims and coordinates): see
        :func:`fastfinite.report.tables.slices_to_xarray`."""
        from .tables import slices_to_xarray

        return slices_to_xarray(self, self.__dict__.get("_findings"), like)


def _num(v: float) -> float | None | str:
    """A float as JSON allows: NaN becomes None, infinities the strings "inf"/"-inf"."""
    v = float(v)
    if math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _unnum(v: Any) -> float:
    """Inverse of ``_num``."""
    if v is None:
        return math.nan
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    return float(v)


def _label(v: Any) -> Any:
    """A coordinate label as JSON allows (dates and other objects become strings)."""
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, float):
        return _num(v)
    return str(v)


@dataclass
class ScanReport:
    """What a scan found.

    Attributes
    ----------
    nan, posinf, neginf : int
        Exact counts (complex data: counted per part).
    cast : dict of str to CastRisk
        Cast risks per requested target.
    locations : list of Location
        First positions of each kind (at most ``max_locations`` each), sorted in C order.
        For a group: those of its arrays, in the order of ``arrays`` (each naming its
        array, its index in that array); for a table: (row, column) of the table.
    count, min, max, mean, std, sum : statistics of the finite values (population std).
    findings : list of Finding
        Missing or unreadable chunks and other problems that are not single values.
    missing_chunks : int
        Chunks the store never wrote (read as its fill value).
    fill_nonfinite : bool
        The store's fill value, what a never-written chunk reads as, is NaN or inf: its
        missing chunks are errors, else warnings (``missing_severity``), however many are
        listed in ``findings``. False for data without a fill value; for a group, True when
        any of its arrays with missing chunks has such a fill.
    complete : bool
        False when the scan stopped early (``fail_fast``).
    ok : bool
        No error found (NaN, inf, cast overflow, error findings); warnings allowed.
    clean : bool
        Nothing at all found, warnings included.
    arrays : dict of str to ScanReport
        For a group: one report per array, by path; the top-level counts are the totals.
    skipped : dict of str to str
        For a group: members that were not scanned (non-numeric), with the reason.
    by : tuple of int or None
        The axes of the per-slice statistics.
    slices : SliceReport or None
        Statistics per slice along ``by``.
    localized : list of Localization
        Where the replayed standardization fails (``localize=True``).
    chunks : tuple of int or None
        The storage chunk shape (the inner chunk of a sharded Zarr array), when the data has one.
    changes : ReportChanges or None
        With ``cache=``: what is new or gone since the last complete scan kept in the
        cache, and which storage units were read again (not in ``to_dict``: its own).
    regions : list of (start, stop, count)
        The scanned regions (for a float array in RAM scanned on several cores, the parts
        of at most 64 MiB each region was cut into) that hold value findings, with their
        number: where problems sit (``plot``), and what ``localize`` reads again.
    """

    name: str = ""
    shape: tuple[int, ...] = ()
    dtype: str = ""
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    cast: dict[str, CastRisk] = field(default_factory=dict)
    locations: list[Location] = field(default_factory=list)
    count: int = 0
    min: float = math.nan
    max: float = math.nan
    mean: float = math.nan
    std: float = math.nan
    sum: float = 0.0
    elements: int = 0
    max_locations: int = 100
    findings: list[Finding] = field(default_factory=list)
    missing_chunks: int = 0
    fill_nonfinite: bool = False
    complete: bool = True
    arrays: dict[str, ScanReport] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    by: tuple[int, ...] | None = None
    slices: SliceReport | None = None
    localized: list[Localization] = field(default_factory=list)
    chunks: tuple[int, ...] | None = None
    regions: list[tuple[tuple[int, ...], tuple[int, ...], int]] = field(default_factory=list)
    z_threshold: float = 10.0
    dynamic_range: dict[str, DynamicRange] = field(default_factory=dict)
    # what changed since the last scan kept in the cache (``changes.ReportChanges``): a
    # history of the scans, not part of the data's report (``to_dict`` leaves it out)
    changes: Any = field(default=None, compare=False, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        # the slices know the findings of the report they belong to (``to_pandas``'s
        # ``findings`` column); slices linked to other findings (another report's) are copied
        object.__setattr__(self, name, value)
        if name in ("slices", "findings") and self.__dict__.get("slices") is not None:
            slices = self.slices
            if slices.__dict__.get("_findings", self.findings) is not self.findings:
                slices = copy.copy(slices)
                object.__setattr__(self, "slices", slices)
            slices.__dict__["_findings"] = self.findings

    @property
    def nonfinite(self) -> int:
        """NaN, +inf and -inf together."""
        return self.nan + self.posinf + self.neginf

    @property
    def missing_severity(self) -> str:
        """The severity of this array's missing chunks, listed or not: ``"error"`` when
        they read as NaN or inf (``fill_nonfinite``), else ``"warning"``."""
        return missing_chunk_severity(self.fill_nonfinite)

    @property
    def ok(self) -> bool:
        """True when nothing of severity ``"error"`` was found: no NaN or inf, no cast
        overflow, no error finding (unreadable or NaN-filled missing chunks, non-finite
        slices, sum or variance overflow, ``nothing_scanned``), in every array of a group.
        Warnings (outliers, constant features, cast underflow, missing chunks with a finite
        fill) leave it True: see ``clean``."""
        return not fails(self.kinds_found())  # what fails a check by default

    @property
    def clean(self) -> bool:
        """True when nothing at all was found: no error and no warning."""
        return not self.kinds_found()

    def bad_slices(self) -> list:
        """Sorted indices of the slices with any finding (ints for one ``by`` axis, else
        tuples); empty without ``by``."""
        if self.by is None:
            return []
        bad = sorted({f.where for f in self.findings if is_slice_kind(f.kind)})
        return [w[0] for w in bad] if len(self.by) == 1 else bad

    def bad_samples(self) -> list:
        """The keys of the samples or members with an error-severity finding, for a loader
        to skip or replay: a member's key (a file of a set, a tensor), a WebDataset sample
        (``"shard-000000.tar/000005"``), ``(table, row)`` for tables, the row index of an
        array scanned with ``by=0``. A ``samples.BadSamples`` list: ``complete`` is False,
        and ``notes`` say why, when some rows are not known (more values than
        ``max_locations``). See :mod:`fastfinite.report.samples`."""
        from .samples import bad_samples

        return bad_samples(self)

    def mask(self) -> np.ndarray:
        """Boolean array over the ``by`` axes, True where a slice is bad (to drop samples)."""
        if self.by is None or self.slices is None:
            raise ValueError("mask() needs a scan with by=AXIS")
        m = np.zeros(self.slices.shape, dtype=bool)
        for w in self.bad_slices():
            m[w] = True
        return m

    def member(self, path: str) -> ScanReport:
        """The report of the array ``path`` names: a key of ``arrays``, or, in a group of
        groups, keys joined by ``member_path`` (``"m1.h5:/x"``: the array ``/x`` of the
        member ``m1.h5``); what a location's or finding's ``array`` names.

        Raises
        ------
        KeyError
            ``path`` names no array of this report.
        """
        found, rest = self._descend(path)
        if rest is not None:
            raise KeyError(path)
        return found

    def _descend(self, path: str) -> tuple[ScanReport, str | None]:
        """The deepest report ``path`` leads to from this one, and what of ``path`` names
        nothing in it (None: ``path`` names that report; ``(self, path)``: nothing)."""
        if path in self.arrays:
            return self.arrays[path], None
        best: tuple[ScanReport, str | None] = (self, path)
        for key in sorted(self.arrays, key=len, reverse=True):  # the longest name first
            sep = path[len(key) : len(key) + 1]
            inner = path[len(key) + 1 :]
            if path.startswith(key) and sep in (":", "/") and (sep == ":") == inner.startswith("/"):
                found, rest = self.arrays[key]._descend(inner)
                if rest is None:
                    return found, None
                if best[0] is self:
                    best = (found, rest)
        return best

    def locations_of(self, kind: str) -> list[Location]:
        """The recorded locations of one kind."""
        return [loc for loc in self.locations if loc.kind == kind]

    def counts(self) -> dict[str, int]:
        """Count per location kind (``nan``, ``posinf``, ``overflow:float32``...)."""
        out = {k: getattr(self, k) for k in BASE_KINDS}
        for t, risk in self.cast.items():
            out[f"overflow:{t}"] = risk.overflow
            out[f"underflow:{t}"] = risk.underflow
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (NaN statistics become ``None``, infinite ones
        ``"inf"``/``"-inf"``, coordinate labels other than numbers, text and bools their
        ``str``: see ``from_json``)."""
        return {
            "schema": SCHEMA,
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "ok": self.ok,
            "clean": self.clean,
            "complete": self.complete,
            "elements": self.elements,
            "nan": self.nan,
            "posinf": self.posinf,
            "neginf": self.neginf,
            "nonfinite": self.nonfinite,
            "cast": {
                t: {"overflow": r.overflow, "underflow": r.underflow} for t, r in self.cast.items()
            },
            "stats": {
                "count": self.count,
                "min": _num(self.min),
                "max": _num(self.max),
                "mean": _num(self.mean),
                "std": _num(self.std),
                "sum": _num(self.sum),
            },
            "max_locations": self.max_locations,
            "locations": [loc.to_dict() for loc in self.locations],
            "missing_chunks": self.missing_chunks,
            "fill_nonfinite": self.fill_nonfinite,
            "findings": [f.to_dict() for f in self.findings],
            "arrays": {k: r.to_dict() for k, r in self.arrays.items()},
            "skipped": dict(self.skipped),
            "by": None if self.by is None else list(self.by),
            "slices": None if self.slices is None else self.slices.to_dict(),
            "localized": [loc.to_dict() for loc in self.localized],
            "chunks": None if self.chunks is None else list(self.chunks),
            "regions": [[list(a), list(b), int(c)] for a, b, c in self.regions],
            "z_threshold": self.z_threshold,
            "dynamic_range": {t: d.to_dict() for t, d in self.dynamic_range.items()},
        }

    def to_json(self, **kwargs: Any) -> str:
        """The report as JSON text (schema ``fastfinite.report/2``, see the README)."""
        kwargs.setdefault("indent", 2)
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScanReport:
        """Rebuild a report from ``to_dict()`` output (lossless but for coordinate labels:
        see ``from_json``). Reports of the schema
        ``fastfinite.report/1`` (before severities) are read too: each finding's severity
        is then its kind's, and ``fill_nonfinite`` (with a missing chunk's severity) what
        the fill value its message names says; a ``/2`` report written before
        ``fill_nonfinite`` gets it from its missing chunks' severities.

        Raises
        ------
        InvalidArgumentError
            The report disagrees with itself or with the table of kinds, naming the field
            (``arrays['/a'].findings[0].severity``): a count or shape that is not a whole
            number >= 0, a location kind the report does not count, a finding kind that is
            no kind, a severity other than its kind's (a missing chunk's: its report's
            ``fill_nonfinite``'s), an ``ok`` or ``clean`` other than what it holds says.
        """
        return cls._read(d, "")

    @classmethod
    def _read(cls, d: dict[str, Any], where: str) -> ScanReport:
        """``from_dict`` of the report at ``where`` (``""``, ``"arrays['/a']."``...)."""
        v1 = check_schema(d) == SCHEMAS[0]
        missing = [f for f in d["findings"] if f["kind"] == "missing_chunk"]
        if v1:
            fill_nonfinite = any(_v1_fill_nonfinite(f["message"]) for f in missing)
        elif "fill_nonfinite" in d:
            fill_nonfinite = d["fill_nonfinite"]
        else:  # written before the field: what its listed missing chunks say
            fill_nonfinite = any(f["severity"] == ERROR for f in missing)

        def severity(f: dict[str, Any]) -> str:
            if not v1:
                return f["severity"]
            if f["kind"] == "missing_chunk":
                return missing_chunk_severity(_v1_fill_nonfinite(f["message"]))
            return severity_of(f["kind"])

        st = d["stats"]
        by = d.get("by")
        report = cls(
            name=d["name"],
            shape=tuple(d["shape"]),
            dtype=d["dtype"],
            nan=d["nan"],
            posinf=d["posinf"],
            neginf=d["neginf"],
            cast={t: CastRisk(r["overflow"], r["underflow"]) for t, r in d["cast"].items()},
            locations=[
                Location(
                    loc["kind"],
                    tuple(loc["index"]),
                    _unnum(loc["value"]),
                    loc.get("labels"),
                    loc.get("array"),
                )
                for loc in d["locations"]
            ],
            count=st["count"],
            min=_unnum(st["min"]),
            max=_unnum(st["max"]),
            mean=_unnum(st["mean"]),
            std=_unnum(st["std"]),
            sum=_unnum(st["sum"]),
            elements=d["elements"],
            max_locations=d["max_locations"],
            findings=[
                Finding(
                    f["kind"],
                    tuple(f["where"]),
                    f["message"],
                    f.get("array"),
                    severity(f),
                )
                for f in d["findings"]
            ],
            missing_chunks=d["missing_chunks"],
            fill_nonfinite=fill_nonfinite,
            complete=d["complete"],
            arrays={
                k: cls._read(v, f"{where}arrays[{k!r}].") for k, v in d.get("arrays", {}).items()
            },
            skipped=dict(d.get("skipped", {})),
            by=None if by is None else tuple(by),
            slices=None if d.get("slices") is None else SliceReport.from_dict(d["slices"]),
            localized=[
                Localization(
                    x["op"], x["error"], tuple(x["index"]), x["message"], tuple(x.get("where", ()))
                )
                for x in d.get("localized", [])
            ],
            chunks=None if d.get("chunks") is None else tuple(d["chunks"]),
            regions=[(tuple(a), tuple(b), int(c)) for a, b, c in d.get("regions", [])],
            z_threshold=float(d.get("z_threshold", 10.0)),
            dynamic_range={
                t: DynamicRange.from_dict(v) for t, v in d.get("dynamic_range", {}).items()
            },
        )
        wrong = _wrong_field(report) or _disagreement(report, d, v1)
        if wrong:
            raise InvalidArgumentError(f"{where}{wrong}")
        return report

    @classmethod
    def from_json(cls, text: str) -> ScanReport:
        """Read a report written by ``to_json`` (or ``fastfinite scan --json``).

        What round-trips: every field but ``changes`` (never written) compares equal, and
        ``from_json(r.to_json()).to_json() == r.to_json()``; NaN and infinite statistics and
        values come back as they were. Except coordinate labels (``Location.labels``), which
        JSON has no type for: ints, floats, text, bools and None come back as they were (a
        NaN label as None, an infinite one as the text ``"inf"`` or ``"-inf"``), anything
        else as its ``str``: a ``numpy.datetime64`` as ISO text
        (``"2024-01-21T00:00:00.000000000"``, not a datetime64: nothing in the JSON tells it
        from a text label), a pandas ``Timestamp`` as ``"2024-01-21 00:00:00"``, a
        ``timedelta64``, a tuple of a MultiIndex row, a cftime date as Python prints them.
        """
        return cls.from_dict(json.loads(text))

    def first_of_each_kind(
        self, per_kind: int = FIRST_PER_KIND, *, own: bool = False
    ) -> dict[str, list[Location]]:
        """The first ``per_kind`` locations of each kind, in the order listed: what
        messages and the summary show. ``own``: only those of this report itself, not
        those naming an array of its group (the summary says them under each array)."""
        out: dict[str, list[Location]] = {}
        for loc in self.locations:
            if own and loc.array is not None:
                continue
            lst = out.setdefault(loc.kind, [])
            if len(lst) < per_kind:
                lst.append(loc)
        return out

    def first_locations(
        self, per_kind: int = FIRST_PER_KIND
    ) -> Mapping[str, list[tuple[int, ...]]]:
        """The first coordinates of each kind, for messages (``first_of_each_kind``)."""
        return {k: [loc.index for loc in v] for k, v in self.first_of_each_kind(per_kind).items()}

    def problems(self) -> str:
        """One line: the counts of what was found, e.g. ``nan 2, posinf 1``."""
        parts = [f"{k} {v}" for k, v in self.counts().items() if v]
        if self.missing_chunks:
            parts.append(f"missing chunks {self.missing_chunks}")
        other = [f for f in self.findings if f.kind != "missing_chunk"]
        if other:
            parts.append(f"other findings {len(other)}")
        return ", ".join(parts) if parts else "nothing found"

    def __str__(self) -> str:
        from .render import render

        return render(self)

    def kinds_found(self) -> set[str]:
        """Every kind of problem present: location kinds (``nan``, ``overflow:float32``...),
        finding kinds (``missing_chunk``, ``zero_variance``...), the groups ``nonfinite``,
        ``cast``, ``overflow`` and ``underflow``, and the severities present, ``error`` and
        ``warning``; for a group, those of its arrays too."""
        counted = [k for k, v in self.counts().items() if v]
        kinds = {*counted, *map(attrgetter("kind"), self.findings)}
        severities = {*map(severity_of, counted), *map(attrgetter("severity"), self.findings)}
        if self.missing_chunks and not self.arrays:  # none listed with max_locations=0
            kinds.add("missing_chunk")
            severities.add(self.missing_severity)
        from .samples import members_found

        found = with_groups(kinds, severities)
        for _, sub in members_found(self.arrays):
            found |= sub.kinds_found()
        return found

    def severity_counts(self) -> dict[str, dict[str, int]]:
        """What was found, by severity: ``{"error": {kind: n}, "warning": {kind: n}}`` (a
        severity with nothing is left out), n the count of a location kind, the number of
        missing chunks, or the number of findings of a kind; a group's are its arrays'
        added up, with its own findings."""
        out: dict[str, dict[str, int]] = {ERROR: {}, WARNING: {}}

        def add(severity: str, kind: str, n: int) -> None:
            out[severity][kind] = out[severity].get(kind, 0) + n

        if self.arrays:
            from .samples import members_found

            for _, sub in members_found(self.arrays):
                for severity, kinds in sub.severity_counts().items():
                    for kind, n in kinds.items():
                        add(severity, kind, n)
            own = [f for f in self.findings if f.array is None]
        else:
            for kind, n in self.counts().items():
                if n:
                    add(severity_of(kind), kind, n)
            if self.missing_chunks:  # listed up to max_locations: the count is the whole
                add(self.missing_severity, "missing_chunk", self.missing_chunks)
            own = [f for f in self.findings if f.kind != "missing_chunk"]
        for f in own:
            add(f.severity, f.kind, 1)
        return {s: kinds for s, kinds in out.items() if kinds}

    def plot(
        self,
        path: str,
        *,
        axes: tuple[int, int] | None = None,
        also: list[ScanReport] | tuple[ScanReport, ...] = (),
    ) -> str:
        """Draw where the problems sit and write a PNG (needs matplotlib: the ``plot`` extra).

        A map over two axes of the array with a marker per recorded location (NaN, inf,
        cast risks), never-written and unreadable chunks boxed, and with ``by`` a strip of
        the per-slice findings, one row per kind; the title says what was found. See
        :func:`fastfinite.report.plot.plot_report`.

        Parameters
        ----------
        path : str
            The PNG to write.
        axes : (int, int), optional
            The axes the map spans (x, y); default: the two with most chunks.
        also : sequence of ScanReport
            Other scans of the same array with another ``by`` (per feature, say): their
            per-slice findings get a strip each.

        Returns
        -------
        str
            ``path``.
        """
        from .plot import plot_report

        return plot_report(self, path, axes=axes, also=also)

    def locations_frame(self) -> Any:
        """The recorded locations as a pandas DataFrame (``kind, index, value, labels,
        array``): see :func:`fastfinite.report.tables.locations_frame`."""
        from .tables import locations_frame

        return locations_frame(self)

    def slices_frame(self) -> Any:
        """``slices.to_pandas()``, for a group its arrays' with an ``array`` index level:
        see :func:`fastfinite.report.tables.slices_frame`."""
        from .tables import slices_frame

        return slices_frame(self)

    def to_html(self, path: str | None = None, **kwargs: Any) -> str:
        """The report as one self-contained HTML page, written to ``path`` (returned), or
        returned as text without one: see :func:`fastfinite.report.html.to_html`."""
        from .html import to_html

        return to_html(self, path, **kwargs)

    def _repr_html_(self) -> str:
        from .html import summary_html

        return summary_html(self)

    @classmethod
    def total(
        cls, name: str, arrays: dict[str, ScanReport], skipped: dict[str, str] | None = None
    ) -> ScanReport:
        """The report of a group: per-array reports and their totals (statistics merged by
        Chan's formula; locations are the arrays', the first ``max_locations`` of each kind
        in the order of ``arrays``, each naming its array; findings name their array too,
        an array of a member that is itself a group by ``member_path``: ``member`` finds
        it). A group in which nothing numeric was scanned has a ``nothing_scanned``
        finding."""
        from .samples import is_lazy

        lazy = is_lazy(arrays)  # the members not built are clean, counted from columns
        if lazy:
            items, shared = arrays.built(), arrays.templates()
            subs = [r for _, r in items]
            counts, total_sum, elements = arrays.group_counts()
        else:
            arrays = dict(arrays)
            items, shared = list(arrays.items()), []
            subs = [r for _, r in items]
            counts = combined_counts(subs)
            total_sum, elements = sum(r.sum for r in subs), sum(r.elements for r in subs)
        findings = [
            Finding(f.kind, f.where, f.message, member_path(path, f.array), f.severity)
            for path, r in items
            for f in r.findings
        ]
        subs += shared
        cap = max((r.max_locations for r in subs), default=100)
        if not subs:
            why = f"all {len(skipped)} members were skipped" if skipped else "it is empty"
            findings.append(Finding("nothing_scanned", (), f"no numeric array was scanned: {why}"))
        by, z = {r.by for r in subs}, {r.z_threshold for r in subs}
        return cls(
            by=by.pop() if len(by) == 1 else None,
            z_threshold=z.pop() if len(z) == 1 else 10.0,
            name=name,
            shape=(),
            dtype="group",
            **counts,
            sum=total_sum,
            elements=elements,
            locations=group_locations(dict(items) if lazy else arrays, cap),
            max_locations=cap,
            findings=findings,
            missing_chunks=sum(r.missing_chunks for r in subs),
            fill_nonfinite=any(r.fill_nonfinite for r in subs if r.missing_chunks),
            complete=all(r.complete for r in subs),
            arrays=arrays,
            skipped=dict(skipped or {}),
        )


def group_locations(arrays: dict[str, ScanReport], cap: int) -> list[Location]:
    """A group's top-level locations: its arrays' (in the order of ``arrays``, each array's
    in its own order), at most ``cap`` of each kind, each naming its array (in an array that
    is itself a group, its array's name joined to the member's: ``member_path``)."""
    taken: dict[str, int] = {}
    out = []
    for path, r in arrays.items():
        for loc in r.locations:
            if taken.get(loc.kind, 0) >= cap:
                continue
            taken[loc.kind] = taken.get(loc.kind, 0) + 1
            array = member_path(path, loc.array)
            out.append(Location(loc.kind, loc.index, loc.value, loc.labels, array))
    return out


def table_locations(arrays: dict[str, ScanReport], columns: list[str], cap: int) -> list:
    """A table's top-level locations, from its columns' reports (``arrays``): (row
    position, column position), with labels, at most ``cap`` of each kind."""
    pos = {c: i for i, c in enumerate(columns)}
    by_kind: dict[str, list] = {}
    for col, sub in arrays.items():
        for loc in sub.locations:
            nested = loc.labels is not None and "item" in loc.labels  # a value in a list
            by_kind.setdefault(loc.kind, []).append(
                Location(
                    loc.kind,
                    (loc.labels["row"] if nested else loc.index[0], pos[col]),
                    loc.value,
                    dict(loc.labels or {}, column=col),
                )
            )
    out = []
    for locs in by_kind.values():
        out += sorted(locs, key=lambda x: x.index)[:cap]
    return sorted(out, key=lambda x: x.index)


def _wrong_field(report: ScanReport) -> str | None:
    """The first count or shape of ``report`` that is not a whole number >= 0, said as
    ``nan is 'x'``; None when all are (its arrays are read, and checked, on their own)."""
    from numbers import Integral

    def whole(v: Any) -> bool:
        return isinstance(v, Integral) and not isinstance(v, bool) and v >= 0

    fields = ("nan", "posinf", "neginf", "count", "elements", "missing_chunks", "max_locations")
    for name in fields:
        if not whole(getattr(report, name)):
            return f"{name} is {getattr(report, name)!r}"
    if not all(whole(n) for n in report.shape):
        return f"shape is {report.shape!r}"
    for target, risk in report.cast.items():
        if not (whole(risk.overflow) and whole(risk.underflow)):
            return f"cast {target} is {risk!r}"
    return None


def _disagreement(report: ScanReport, d: dict[str, Any], v1: bool) -> str | None:
    """Where the report read from ``d`` disagrees with the table of kinds or with itself,
    said as ``findings[0].severity is 'warning', but ...``; None when it does not. Every
    location's kind is one the report counts, every finding's a kind of finding; in
    ``/2``, every severity is its kind's (a missing chunk's, as its array's fill says),
    and ``ok`` and ``clean`` are what the report holds says."""
    from ..options import known_kinds

    if not isinstance(report.fill_nonfinite, bool):
        return f"fill_nonfinite is {report.fill_nonfinite!r}, not true or false"
    counted = report.counts()
    for i, (loc, raw) in enumerate(zip(report.locations, d["locations"])):
        if loc.kind not in counted:
            return (
                f"locations[{i}].kind is {loc.kind!r}, not a kind this report counts "
                f"({', '.join(counted)})"
            )
        said = raw.get("severity", loc.severity) if not v1 else loc.severity
        if said != loc.severity:
            return f"locations[{i}].severity is {said!r}, but {loc.kind} is {_a(loc.severity)}"
    for i, f in enumerate(report.findings):
        if f.kind not in (*CHUNK_KINDS, *GROUP_KINDS, *SLICE_KINDS) and not (
            f.kind.startswith(PER_DTYPE_SLICE_KINDS) and f.kind in known_kinds()
        ):
            return f"findings[{i}].kind is {f.kind!r}, not a kind of finding"
        if f.kind != "missing_chunk":
            want, why = severity_of(f.kind), ""
        else:
            # the array it names, or the deepest report on its way: the findings of merged
            # runs of one array name the input they came from, in no array of its report
            owner = report._descend(f.array)[0] if f.array is not None else report
            want = owner.missing_severity
            why = f" (its fill value is{'' if owner.fill_nonfinite else ' not'} NaN or inf)"
        if f.severity != want:
            return f"findings[{i}].severity is {f.severity!r}, but this {f.kind} is {_a(want)}{why}"
    for name in ("ok", "clean") if not v1 else ():
        if name in d and d[name] != getattr(report, name):
            holds = report.severity_counts() or "nothing"
            return f"{name} is {d[name]!r}, but the report holds {holds}"
    return None


def _a(severity: str) -> str:
    return f"an {severity}" if severity == ERROR else f"a {severity}"


def _v1_fill_nonfinite(message: str) -> bool:
    """Whether the missing chunk of a ``fastfinite.report/1`` finding, which has no severity
    and whose report has no ``fill_nonfinite``, reads as NaN or inf: its message ends with
    the fill value (``... it reads as the fill value nan``; ``0.0`` or none named: no)."""
    fill = message.rpartition("fill value")[2].lower()
    return "nan" in fill or "inf" in fill


def combined_counts(reports: list[ScanReport]) -> dict[str, Any]:
    """Counts, cast risks and finite statistics of several reports taken together
    (statistics by Chan et al.'s pairwise formula)."""
    return fold_counts(
        sum(r.nan for r in reports),
        sum(r.posinf for r in reports),
        sum(r.neginf for r in reports),
        [r.cast for r in reports],
        *([getattr(r, f) for r in reports] for f in ("count", "mean", "std", "min", "max")),
    )


def fold_counts(nan, posinf, neginf, casts: list, ns, means, stds, los, his) -> dict[str, Any]:
    """``combined_counts`` from its parts (the lazily built members' too,
    ``members.MemberReports``): the NaN, +inf and -inf totals, the members' cast risks in
    their order, and each member's count, mean, std, min and max."""
    sums: dict[str, list[int]] = {}
    for cast in casts:
        for t, risk in cast.items():
            c = sums.setdefault(t, [0, 0])
            c[0] += risk.overflow
            c[1] += risk.underflow
    ns = np.asarray(ns, np.int64)
    n, mean, std = chan_fold(ns, means, stds)
    los, his = np.asarray(los, np.float64), np.asarray(his, np.float64)
    if not ns.all():  # the extrema of the members with a value
        los, his = los[ns != 0], his[ns != 0]
    return {
        "nan": nan,
        "posinf": posinf,
        "neginf": neginf,
        "cast": {t: CastRisk(*c) for t, c in sums.items()},
        "count": int(n),
        "min": _extreme(los, min),
        "max": _extreme(his, max),
        "mean": float(mean) if n else math.nan,
        "std": float(std) if n else math.nan,
    }


def _extreme(v: np.ndarray, which) -> float:
    """``which(v)`` (``min`` or ``max``; NaN for none) as Python's gives it on the list:
    of equal values the first, so that a zero's sign is the first zero's."""
    if not len(v):
        return math.nan
    got = v.min() if which is min else v.max()
    if got == 0:
        got = v[np.flatnonzero(v == 0)[0]]
    elif got != got:  # a NaN among them: Python's answer depends on where it lies
        return float(which(v.tolist()))
    return float(got)
