"""Indices and shapes as text, the one way every message writes them."""

from __future__ import annotations

from collections.abc import Sequence


def fmt_index(index: Sequence[int]) -> str:
    """An index or a shape as Python writes a tuple: ``(2, 1)``, ``(5,)``, ``()``."""
    return repr(tuple(map(int, index)))  # Python's ints: NumPy 2's repr names its types
