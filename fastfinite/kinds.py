"""The names of what a scan finds: the kernels' counter slots and the slice finding kinds
(no numba, no numpy here)."""

NAN, POSINF, NEGINF = 0, 1, 2
N_TARGET_SLOTS = 5  # cast targets per pass; unused slots get thresholds that never hold
N_KINDS = 3 + 2 * N_TARGET_SLOTS
BASE_KINDS = ("nan", "posinf", "neginf")

SLICE_KINDS = ("nonfinite", "zero_variance", "near_zero_variance", "outlier")
CHUNK_KINDS = ("missing_chunk", "unreadable_chunk")
GROUP_KINDS = ("nothing_scanned",)  # said of a group or table as a whole
KIND_GROUPS = ("nonfinite", "cast", "overflow", "underflow")  # names for several kinds
PER_DTYPE_SLICE_KINDS = ("sum_overflow:", "variance_overflow:")


def is_slice_kind(kind: str) -> bool:
    """Whether a finding kind is about a slice (``by``), not a chunk."""
    return kind in SLICE_KINDS or kind.startswith(PER_DTYPE_SLICE_KINDS)
