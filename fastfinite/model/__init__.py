"""The facts a scan is about, with no numba and no I/O: the kinds of finding and their
severities (``kinds``), the cast formats and their thresholds (``casts``), and Chan's
combination of (count, mean, std) and the kernels' block sizes (``stats``), and how a tar
shard's members are keyed (``tar_keys``)."""
