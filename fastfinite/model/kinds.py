"""The names of what a scan finds: the kernels' counter slots, the slice finding kinds, and
the one table of their severities (no numba, no numpy here)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Set
from typing import Any

from ..errors import InvalidArgumentError

NAN, POSINF, NEGINF = 0, 1, 2
N_TARGET_SLOTS = 5  # cast targets per pass; unused slots get thresholds that never hold
N_KINDS = 3 + 2 * N_TARGET_SLOTS
BASE_KINDS = ("nan", "posinf", "neginf")

SLICE_KINDS = ("nonfinite", "zero_variance", "near_zero_variance", "outlier")
CHUNK_KINDS = ("missing_chunk", "unreadable_chunk")
# said of a group or table as a whole (the members named in a message, and in ``skipped``)
GROUP_KINDS = (
    "nothing_scanned", "unreadable_member", "unlisted_member", "missing_member", "stray_file",
)  # fmt: skip
PER_DTYPE_SLICE_KINDS = ("sum_overflow:", "variance_overflow:")

ERROR, WARNING = "error", "warning"
SEVERITIES = (ERROR, WARNING)
# names for several kinds; ``warning`` names everything (warnings and errors, as a log level)
KIND_GROUPS = ("nonfinite", "cast", "overflow", "underflow", *SEVERITIES)
# what fails a check unless told otherwise (``fail_on=None``): the errors; ``report.ok``
# says a report has none, and the command line, ``assert_finite`` and ``guard`` use it
DEFAULT_FAIL_ON = frozenset({ERROR})

# THE severity of each kind (a key ending in ":" is the prefix of a kind per dtype or cast
# target). "error": it makes NaN or inf, or fastfinite could not tell the data is clean;
# "warning": worth a line, not a failed job.
SEVERITY = {
    "nan": ERROR,
    "posinf": ERROR,
    "neginf": ERROR,
    "nonfinite": ERROR,
    "overflow:": ERROR,
    "sum_overflow:": ERROR,
    "variance_overflow:": ERROR,
    "unreadable_chunk": ERROR,
    "nothing_scanned": ERROR,
    "unreadable_member": ERROR,  # an HDF5 external link not followed here: data unchecked
    "unlisted_member": ERROR,  # a Zarr array that consolidated metadata hides: not scanned
    "missing_member": WARNING,  # an HDF5 soft link to nothing: no data there to check
    "stray_file": WARNING,  # in a Zarr store, not part of it: no Zarr reader sees it
    "missing_chunk": WARNING,  # an error when its fill is NaN or inf: missing_chunk_severity
    "underflow:": WARNING,
    "zero_variance": WARNING,
    "near_zero_variance": WARNING,
    "outlier": WARNING,
}


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
        if kind in BASE_KINDS:
            out.add("nonfinite")
        head, sep, _ = kind.partition(":")
        if sep and head in ("overflow", "underflow"):
            out |= {"cast", head}
    return out | set(severities)


def fails(found: Set[str], fail_on: Set[str] | None = None) -> bool:
    """Whether the kinds ``found`` (``with_groups``'s names) fail a check of ``fail_on``
    kinds; None: the default, ``DEFAULT_FAIL_ON`` (any error)."""
    return not found.isdisjoint(DEFAULT_FAIL_ON if fail_on is None else fail_on)


def is_slice_kind(kind: str) -> bool:
    """Whether a finding kind is about a slice (``by``), not a chunk."""
    return kind in SLICE_KINDS or kind.startswith(PER_DTYPE_SLICE_KINDS)
