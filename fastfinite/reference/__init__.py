"""NumPy, the slow and obvious way: the whole-scan oracle (``reference.scan``) and the twin of
each Numba kernel (``reference.twins``), which the tests hold the kernels to and which scan
small blocks and the first blocks of a scan while the kernels compile."""

from .oracle import scan

__all__ = ["scan"]
