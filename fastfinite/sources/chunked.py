"""What chunked sources (Zarr, HDF5) share: the storage grid, regions of whole units, and
reading a failed region again unit by unit to name the unit that cannot be read."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from ..compute.blocks import Region, plan_regions


class ChunkGrid:
    """A regular grid of storage units (chunks, or shards) over an array.

    Parameters
    ----------
    shape : tuple of int
        The array's shape.
    unit : tuple of int
        The shape of one unit (the last units along each axis may be cut by the array's edge).
    """

    def __init__(self, shape: tuple[int, ...], unit: tuple[int, ...]):
        self.shape = tuple(int(s) for s in shape)
        self.unit = tuple(max(1, int(u)) for u in unit)
        self.grid = tuple(math.ceil(s / u) for s, u in zip(self.shape, self.unit))

    def regions(self, itemsize: int, budget_bytes: int) -> Iterator[Region]:
        """Hyperrectangles of whole units, about ``budget_bytes`` each, in C order."""
        unit_bytes = itemsize * math.prod(self.unit)
        per_region = max(1, budget_bytes // max(1, unit_bytes))
        for units in plan_regions(self.grid, tuple(range(len(self.grid))), per_region):
            yield self.to_elements(units)

    def to_elements(self, units: Region) -> Region:
        """The element slices covered by a region of unit coordinates."""
        return tuple(
            slice(u.start * n, min(u.stop * n, s)) for u, n, s in zip(units, self.unit, self.shape)
        )

    def units_in(self, region: Region) -> Iterator[tuple[int, ...]]:
        """Grid coordinates of the units a region of elements covers."""
        return itertools.product(
            *[range(r.start // n, -(-r.stop // n)) for r, n in zip(region, self.unit)]
        )

    def unit_region(self, coords: tuple[int, ...]) -> Region:
        """The element slices of one unit."""
        return self.to_elements(tuple(slice(c, c + 1) for c in coords))


def key_parser(encode, ndim: int):
    """Build a parser from storage keys to grid coordinates, given the store's encoder.

    ``encode((7, 7))`` might give ``"c/7/7"`` (Zarr 3), ``"7.7"`` (Zarr 2) or ``"7/7"``: the
    text before the first 7 is the prefix and the text between 7s the separator.
    """
    if ndim == 0:
        key0 = encode(())

        def parse0(key: str):
            return () if key == key0 else None

        return parse0
    sample = encode((7,) * ndim)
    prefix = sample[: sample.index("7")]
    rest = sample[len(prefix) :]
    sep = rest[1 : rest.index("7", 1)] if ndim > 1 else ""

    def parse(key: str):
        if not key.startswith(prefix):
            return None
        body = key[len(prefix) :]
        parts = body.split(sep) if ndim > 1 else [body]
        if len(parts) != ndim or not all(p.isdigit() for p in parts):
            return None
        return tuple(int(p) for p in parts)

    return parse
