"""THE table of what a scan finds (``KINDS``): each kind's name, what it is said of, its
severity, its counter slot or flag bit, and the message of its findings, from which all
the rest is derived (no numba, no numpy here).

- the kernels' counter slots (``SLOT_*``, ``N_KINDS``) and the slice flags' bits
  (``slice_shift``): module-level integers the kernels read as constants;
- the slice kinds in their bit order (``slice_kinds``), their messages (``slice_message``);
- the severities (``SEVERITY``), the names a report may hold (``SLICE_KINDS``,
  ``CHUNK_KINDS``, ``GROUP_KINDS``..., which ``options.known_kinds`` and the command
  line's ``--fail-on`` help list), the groups ``fail_on`` matches (``with_groups``).

Adding a finding kind is one row here, its predicate in the kernel that computes its
group (``kernels/slices.py``'s ``_flag_block`` for a slice kind, ``kernels/rows.py`` and
``cols.py`` for a counted kind) and the same predicate in its twin
(``reference/twins.py``); ``tests/test_kinds_table.py`` checks every row is computed by
both.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidArgumentError

ERROR, WARNING = "error", "warning"
SEVERITIES = (ERROR, WARNING)

# what a kind is said of, and so where its place comes from
VALUE = "value"  # values the scan kernels count: a counter slot each
CAST = "cast"  # values at risk per cast target: a counter slot per target slot
SLICE = "slice"  # a slice (``by``): a flag bit each (per dtype checked, for a prefix)
CHUNK = "chunk"  # a storage unit of an array
MEMBER = "member"  # a group or table as a whole (the members named in a message)

N_TARGET_SLOTS = 5  # cast targets per pass; unused slots get thresholds that never hold


@dataclass(frozen=True)
class Kind:
    """One kind of finding or location.

    Attributes
    ----------
    name : str
        Its name in a report; ending in ``":"``, the prefix of a kind per cast target
        (``overflow:float32``) or per dtype a slice's sums are checked in.
    group : str
        What it is said of: ``VALUE``, ``CAST``, ``SLICE``, ``CHUNK`` or ``MEMBER``.
    severity : str
        ``"error"`` (it makes NaN or inf, or fastfinite could not tell the data is clean)
        or ``"warning"`` (worth a line, not a failed job).
    place : int or None
        Its counter slot (``VALUE``; for ``CAST``, its offset in each target slot's
        pair) or its flag bit (``SLICE``: see ``slice_shift``); derived from the row's
        place among its group's rows, None for the others.
    message : str or None
        The message of its findings (``SLICE``), fields named as ``report.findings``
        quotes them: ``{s}`` the slice, ``{t}`` and ``{t_max}`` the dtype and its maximum,
        ``{z_threshold}``, and the slice's statistics (``{count}``, ``{mean}``...).
        None where the finding's message is written where it is found.
    per_target : dict
        Messages for particular dtypes (``{t}``) instead of ``message``.
    names : tuple of str
        The names of groups of kinds ``fail_on`` matches it by (``nonfinite``, ``cast``...).
    """

    name: str
    group: str
    severity: str
    message: str | None = None
    names: tuple[str, ...] = ()
    per_target: tuple[tuple[str, str], ...] = ()
    place: int | None = None


_ROWS = (
    Kind("nan", VALUE, ERROR, names=("nonfinite",)),
    Kind("posinf", VALUE, ERROR, names=("nonfinite",)),
    Kind("neginf", VALUE, ERROR, names=("nonfinite",)),
    Kind("overflow:", CAST, ERROR, names=("cast", "overflow")),
    Kind("underflow:", CAST, WARNING, names=("cast", "underflow")),
    # an error when its fill is NaN or inf: ``missing_chunk_severity``
    Kind("missing_chunk", CHUNK, WARNING),
    Kind("unreadable_chunk", CHUNK, ERROR),
    Kind("nothing_scanned", MEMBER, ERROR),
    # an HDF5 external link not followed here: data unchecked
    Kind("unreadable_member", MEMBER, ERROR),
    # a Zarr array that consolidated metadata hides: not scanned
    Kind("unlisted_member", MEMBER, ERROR),
    Kind("missing_member", MEMBER, WARNING),  # an HDF5 soft link to nothing: no data there
    Kind("stray_file", MEMBER, WARNING),  # in a Zarr store, not part of it: no reader sees it
    # the slice kinds, in the order of their bits and of a slice's findings
    Kind(
        "nonfinite", SLICE, ERROR,
        "slice {s} holds {nan} NaN, {posinf} +inf and {neginf} -inf: its mean, std and every "
        "standardized value become NaN or inf",
    ),
    Kind(
        "zero_variance", SLICE, WARNING,
        "all {count} finite values of slice {s} equal {mean:.6g}: std is 0, so standardizing "
        "divides by eps (0/0 = NaN when eps is 0)",
    ),
    Kind(
        "near_zero_variance", SLICE, WARNING,
        "slice {s} has std {std:.3g}, below the rounding noise of its mean {mean:.6g} over "
        "{count} values (scikit-learn's constant-feature bound): its std is numerical noise, "
        "and standardizing blows the noise up",
    ),
    Kind(
        "sum_overflow:", SLICE, ERROR,
        "the sum of slice {s} is {total:.4g}, beyond the {t} maximum {t_max:.4g}: x.sum() and "
        "x.mean() in {t} overflow to inf although every value is finite",
        per_target=(
            ("float16", "the sum of slice {s} is {total:.4g}, beyond the {t} maximum "
             "{t_max:.4g}: x.sum() in float16 overflows to inf (x.mean() does not: NumPy "
             "accumulates a float16 mean in float32) although every value is finite"),
        ),
    ),
    Kind(
        "variance_overflow:", SLICE, ERROR,
        "the sum of squared deviations of slice {s} is {m2:.4g}, beyond the {t} maximum "
        "{t_max:.4g}: its std computed in {t} overflows to inf although every value is finite",
    ),
    Kind(
        "outlier", SLICE, WARNING,
        "slice {s} has a value {max_z:.3g} standard deviations from its mean (threshold "
        "{z_threshold:g}; min {min:.6g}, max {max:.6g}, mean {mean:.6g}, std {std:.6g}): one "
        "value dominates the slice's statistics",
    ),
)  # fmt: skip


def _placed(rows: tuple[Kind, ...]) -> tuple[Kind, ...]:
    """The rows with their places: each counted, cast and slice kind numbered in the order
    of its group's rows (the kinds per dtype of a slice, after the slice kinds above
    them)."""
    seen: dict[str, int] = {}
    out = []
    for k in rows:
        if k.group in (VALUE, CAST, SLICE):
            sub = (k.group, k.name.endswith(":")) if k.group == SLICE else k.group
            n = seen.get(sub, 0)
            seen[sub] = n + 1
            k = replace(k, place=n)
        out.append(k)
    return tuple(out)


KINDS: dict[str, Kind] = {k.name: k for k in _placed(_ROWS)}


def _of(group: str, per: bool | None = None) -> tuple[str, ...]:
    return tuple(
        n for n, k in KINDS.items() if k.group == group and (per is None or n.endswith(":") == per)
    )


# -- the kernels' counter slots ----------------------------------------------------------
BASE_KINDS = _of(VALUE)  # ("nan", "posinf", "neginf")
CAST_KINDS = _of(CAST)  # ("overflow:", "underflow:"): a pair per target slot
SLOT_NAN, SLOT_POSINF, SLOT_NEGINF = (KINDS[n].place for n in ("nan", "posinf", "neginf"))
NAN, POSINF, NEGINF = SLOT_NAN, SLOT_POSINF, SLOT_NEGINF
SLOTS_PER_TARGET = len(CAST_KINDS)
FIRST_CAST_SLOT = len(BASE_KINDS)
# target slot ``t``'s overflow and underflow counters: ``SLOT_* + SLOTS_PER_TARGET * t``
SLOT_OVERFLOW = FIRST_CAST_SLOT + KINDS["overflow:"].place
SLOT_UNDERFLOW = FIRST_CAST_SLOT + KINDS["underflow:"].place
N_KINDS = FIRST_CAST_SLOT + SLOTS_PER_TARGET * N_TARGET_SLOTS


def cast_slot(kind: str, t: int) -> int:
    """The counter slot of cast kind ``kind`` (``"overflow:"`` or ``"underflow:"``) for
    target slot ``t``."""
    return FIRST_CAST_SLOT + SLOTS_PER_TARGET * t + KINDS[kind].place


def slot_names(cast: tuple[str, ...]) -> tuple[str, ...]:
    """The kind counted in each counter slot of a scan of ``cast`` targets (``""`` for an
    unused target slot)."""
    names = list(BASE_KINDS)
    for t in range(N_TARGET_SLOTS):
        target = cast[t] if t < len(cast) else ""
        names += [f"{p}{target}" if target else "" for p in CAST_KINDS]
    return tuple(names)


def slot_target(k: int) -> tuple[str, int] | None:
    """``(cast kind, target slot)`` of counter slot ``k``, None for a value kind's."""
    if k < FIRST_CAST_SLOT:
        return None
    t, j = divmod(k - FIRST_CAST_SLOT, SLOTS_PER_TARGET)
    return CAST_KINDS[j], t


# -- the slice flags' bits ---------------------------------------------------------------
SLICE_KINDS = _of(SLICE, per=False)  # ("nonfinite", "zero_variance", ...)
PER_DTYPE_SLICE_KINDS = _of(SLICE, per=True)  # ("sum_overflow:", "variance_overflow:")
_SLICE_ROWS = [n for n, k in KINDS.items() if k.group == SLICE]
# the kinds per dtype come together: a pair of bits per dtype, between the slice kinds above
# them in the table and those below
_FIRST_PER_DTYPE = _SLICE_ROWS.index(PER_DTYPE_SLICE_KINDS[0]) if PER_DTYPE_SLICE_KINDS else 0
assert _SLICE_ROWS[_FIRST_PER_DTYPE : _FIRST_PER_DTYPE + len(PER_DTYPE_SLICE_KINDS)] == list(
    PER_DTYPE_SLICE_KINDS
), "the slice kinds per dtype must be rows one after another"


def slice_shift(kind: str) -> tuple[int, int]:
    """``(base, step)``: a slice kind's flag is bit ``base + step * n``, ``n`` the index of
    the dtype for a kind per dtype (``sum_overflow:``), the number of dtypes checked for the
    others (zero for those above the kinds per dtype in the table). The kernels take these
    as constants (``kernels.slices``)."""
    k = KINDS[kind]
    per = len(PER_DTYPE_SLICE_KINDS)
    if kind.endswith(":"):
        return _FIRST_PER_DTYPE + k.place, per
    return k.place, (per if _SLICE_ROWS.index(kind) > _FIRST_PER_DTYPE else 0)


def slice_kinds(dtypes: Iterable[str]) -> list[str]:
    """The slice finding kinds in the order of the flags' bits (and of a slice's findings)
    when the sums are checked in ``dtypes``. A slice with ``n`` finite values, mean ``m``,
    variance ``v`` (population) has:

    - ``nonfinite``: a NaN or inf;
    - ``zero_variance``: ``n > 1`` and ``v == 0`` (one value has no variance to speak of);
    - ``near_zero_variance``: ``n > 1``, ``0 < v <= n * eps * v + (n * m * eps) ** 2``,
      ``v`` finite (tested on the std, so that stds whose squares underflow count):
      scikit-learn's test for a constant feature (``_is_constant_feature``), the variance
      rounding alone produces for that mean and count;
    - ``sum_overflow:T`` / ``variance_overflow:T``: ``|n * m|`` / ``n * v`` reaches T's
      overflow threshold, for each dtype T in ``dtypes``;
    - ``outlier``: ``n > 1`` and the largest |z| exceeds ``z_threshold``.
    """
    dtypes = tuple(dtypes)
    bits: dict[int, str] = {}
    for kind in _SLICE_ROWS:
        base, step = slice_shift(kind)
        if kind.endswith(":"):
            bits.update({base + step * t: f"{kind}{d}" for t, d in enumerate(dtypes)})
        else:
            bits[base + step * len(dtypes)] = kind
    return [bits[b] for b in sorted(bits)]


def _escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _speaker(template: str, given: Mapping[str, Any]) -> tuple[Callable[..., str], tuple[str, ...]]:
    """A message template as a function of its fields but those ``given`` (written in
    once), and the names of its arguments. The function is an f-string compiled from the
    template (the table's own text, fields checked to be names): 1e6 findings of a table
    with a NaN feature are said 1.7 times faster than by ``str.format``."""
    out, names = [], []
    for text, field, spec, conv in string.Formatter().parse(template):
        out.append(_escaped(text))
        if field is None:
            continue
        if field in given:
            value = given[field]
            value = repr(value) if conv == "r" else str(value) if conv == "s" else value
            out.append(_escaped(format(value, spec or "")))
            continue
        if not field.isidentifier():
            raise ValueError(f"{field!r} in a message of the table of kinds is not a name")
        if field not in names:
            names.append(field)
        out.append("{" + field + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}")  # fmt: skip
    source = f"lambda {', '.join(names)}: f{''.join(out)!r}"
    return eval(source, {"__builtins__": {}}), tuple(names)  # noqa: S307 - the table's text


def slice_message(
    kind: str, given: Mapping[str, Any] | None = None
) -> tuple[Callable[..., str], tuple[str, ...]]:
    """The message of findings of slice kind ``kind`` (``sum_overflow:float16``...) as a
    function of its fields, those ``given`` (the same for every slice: ``t``, ``t_max``,
    ``z_threshold``) written in, and the names of its arguments in their order
    (``Kind.message``)."""
    head, sep, t = kind.partition(":")
    row = KINDS[head + sep]
    return _speaker(dict(row.per_target).get(t, row.message), given or {})


# -- severities and the names that group the kinds ---------------------------------------
# THE severity of each kind (a key ending in ":" is the prefix of a kind per dtype or cast
# target)
SEVERITY = {n: k.severity for n, k in KINDS.items()}
CHUNK_KINDS = _of(CHUNK)
# said of a group or table as a whole (the members named in a message, and in ``skipped``)
GROUP_KINDS = _of(MEMBER)
# names for several kinds; ``warning`` names everything (warnings and errors, as a log level)
KIND_GROUPS = (*dict.fromkeys(g for k in KINDS.values() for g in k.names), *SEVERITIES)
# what fails a check unless told otherwise (``fail_on=None``): the errors; ``report.ok``
# says a report has none, and the command line, ``assert_finite`` and ``guard`` use it
DEFAULT_FAIL_ON = frozenset({ERROR})
_GROUP_NAMES = {n: k.names for n, k in KINDS.items() if k.names}


def kinds_help(example: str = "float32") -> str:
    """The kinds and the names of groups of them, for the command line's help, in the
    table's order (each group's name before its first kind; a kind per target or dtype
    named for ``example``)."""
    out: list[str] = []
    for name, k in KINDS.items():
        out += k.names
        out.append(name + example if name.endswith(":") else name)
    return ", ".join(dict.fromkeys(out))


def severity_of(kind: str, fill_value: Any = None) -> str:
    """``"error"`` or ``"warning"``: the severity of a location or finding kind.

    Parameters
    ----------
    kind : str
        ``"nan"``, ``"overflow:float32"``, ``"missing_chunk"``, ``"outlier"``...
    fill_value : scalar, optional
        For ``missing_chunk``: what the never-written chunk reads as
        (``missing_chunk_severity``).

    Raises
    ------
    ValueError
        For a name that is no kind.
    """
    if kind == "missing_chunk":
        return missing_chunk_severity(is_nonfinite(fill_value))
    severity = SEVERITY.get(kind)
    if severity is None and ":" in kind:
        severity = SEVERITY.get(kind.split(":", 1)[0] + ":")
    if severity is None:
        raise ValueError(f"{kind!r} is not a kind of finding; no severity")
    return severity


def missing_chunk_severity(fill_nonfinite: bool) -> str:
    """The severity of a never-written chunk, the one place it is decided: an error when it
    reads as NaN or inf (its store's fill value is not finite: ``ScanReport.fill_nonfinite``),
    else a warning (a finite fill, or none known: the values read are counted either way)."""
    return ERROR if fill_nonfinite else SEVERITY["missing_chunk"]


def is_nonfinite(v: Any) -> bool:
    """Whether ``v`` is a number with a NaN or infinite part (in either part of a complex);
    False for None and anything that is no number."""
    if v is None:
        return False
    try:
        c = complex(v)
    except (TypeError, ValueError, OverflowError):
        return False
    return not (math.isfinite(c.real) and math.isfinite(c.imag))


def checked_severity(kind: str, severity: str | None) -> str:
    """The severity of a finding or change of ``kind``: ``severity`` when given (one of
    ``SEVERITIES``, else ``InvalidArgumentError``), else its kind's."""
    if severity is None:
        return severity_of(kind)
    if severity not in SEVERITIES:
        raise InvalidArgumentError(
            f"severity must be one of {', '.join(SEVERITIES)}, got {severity!r}"
        )
    return severity


def with_groups(kinds: Iterable[str], severities: Iterable[str]) -> set[str]:
    """``kinds`` and the ``severities`` of what was found, with the names that group the
    kinds, as ``fail_on`` matches them: ``nonfinite`` for NaN and inf, ``cast`` and
    ``overflow`` or ``underflow`` for a cast risk (``overflow:float32``)."""
    out = set(kinds)
    for kind in list(out):
        head, sep, _ = kind.partition(":")
        out.update(_GROUP_NAMES.get(head + sep, ()))
    return out | set(severities)


def fails(found: Set[str], fail_on: Set[str] | None = None) -> bool:
    """Whether the kinds ``found`` (``with_groups``'s names) fail a check of ``fail_on``
    kinds; None: the default, ``DEFAULT_FAIL_ON`` (any error)."""
    return not found.isdisjoint(DEFAULT_FAIL_ON if fail_on is None else fail_on)


def is_slice_kind(kind: str) -> bool:
    """Whether a finding kind is about a slice (``by``), not a chunk."""
    return kind in SLICE_KINDS or kind.startswith(PER_DTYPE_SLICE_KINDS)
