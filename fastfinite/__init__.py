"""fastfinite: find the NaN, inf and cast overflows that break training, at scale."""

from .api import assert_finite, scan
from .errors import (
    ChunkReadError,
    FastFiniteError,
    InvalidArgumentError,
    NonFiniteError,
    SourceError,
    UnsupportedDtypeError,
)
from .report import CastRisk, Finding, Location, ScanReport

__version__ = "0.1.0"

__all__ = [
    "CastRisk",
    "ChunkReadError",
    "FastFiniteError",
    "Finding",
    "InvalidArgumentError",
    "Location",
    "NonFiniteError",
    "ScanReport",
    "SourceError",
    "UnsupportedDtypeError",
    "assert_finite",
    "scan",
]
