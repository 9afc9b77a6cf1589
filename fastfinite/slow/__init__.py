"""NumPy, the slow and obvious way: the whole-scan oracle (``slow.scan``) and the twin of each
Numba kernel (``slow.twins``)."""

from .oracle import scan

__all__ = ["scan"]
