"""The kernel's counter slots, shared by the kernels and the summaries (no numba here)."""

NAN, POSINF, NEGINF = 0, 1, 2
N_TARGET_SLOTS = 3  # cast targets per pass; unused slots get thresholds that never hold
N_KINDS = 3 + 2 * N_TARGET_SLOTS
BASE_KINDS = ("nan", "posinf", "neginf")
