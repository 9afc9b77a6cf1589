"""The names of what a scan finds: the kernels' counter slots, the slice finding kinds, and
the one table of their severities (no numba, no numpy here)."""

from __future__ import annotations

import math
from typing import Any

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
    "missing_chunk": WARNING,  # an error when its fill value is NaN or inf: severity_of
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
        For ``missing_chunk``: what the never-written chunk reads as. NaN or inf (in either
        part of a complex) makes it an error; a finite fill, or none known, a warning (the
        values read are counted either way).

    Raises
    ------
    ValueError
        For a name that is no kind.
    """
    if kind == "missing_chunk" and _nonfinite(fill_value):
        return ERROR
    severity = SEVERITY.get(kind)
    if severity is None and ":" in kind:
        severity = SEVERITY.get(kind.split(":", 1)[0] + ":")
    if severity is None:
        raise ValueError(f"{kind!r} is not a kind of finding; no severity")
    return severity


def _nonfinite(v: Any) -> bool:
    """Whether ``v`` is a number with a NaN or infinite part."""
    if v is None:
        return False
    try:
        c = complex(v)
    except (TypeError, ValueError, OverflowError):
        return False
    return not (math.isfinite(c.real) and math.isfinite(c.imag))


def is_slice_kind(kind: str) -> bool:
    """Whether a finding kind is about a slice (``by``), not a chunk."""
    return kind in SLICE_KINDS or kind.startswith(PER_DTYPE_SLICE_KINDS)
