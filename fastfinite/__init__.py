"""fastfinite: find the NaN, inf and cast overflows that break training, at scale."""

from ._version import __version__ as __version__
from .api import assert_finite, scan
from .cache.changes import Change, CountChange, ReportChanges, diff_reports
from .compute.compiling import CompileReport, compile
from .errors import (
    ChunkReadError,
    FastFiniteError,
    InvalidArgumentError,
    NonFiniteError,
    SourceError,
    UnsupportedDtypeError,
)
from .guard import BadBatchWarning, Guard, guard
from .passes.localize import localize
from .report.merge import merge_reports
from .report.model import CastRisk, Finding, Localization, Location, ScanReport, SliceReport

__all__ = [
    "BadBatchWarning",
    "Guard",
    "guard",
    "CastRisk",
    "Change",
    "CompileReport",
    "CountChange",
    "ChunkReadError",
    "FastFiniteError",
    "Finding",
    "InvalidArgumentError",
    "Localization",
    "Location",
    "NonFiniteError",
    "ReportChanges",
    "ScanReport",
    "SliceReport",
    "SourceError",
    "UnsupportedDtypeError",
    "assert_finite",
    "compile",
    "diff_reports",
    "localize",
    "merge_reports",
    "scan",
]
