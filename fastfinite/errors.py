"""The exceptions fastfinite raises. All derive from ``FastFiniteError``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .indices import fmt_index


class FastFiniteError(Exception):
    """Base class of every fastfinite exception."""


class InvalidArgumentError(FastFiniteError, ValueError):
    """An argument has a value fastfinite cannot use (the message shows it)."""


class UnsupportedDtypeError(FastFiniteError, TypeError):
    """The data's dtype cannot hold NaN or numbers (object, string, structured...)."""


class SourceError(FastFiniteError, ValueError):
    """The data source cannot be opened: missing file, unknown format, bad path."""


class SkippedMemberError(SourceError):
    """A member of a group that is not scanned (an HDF5 link that leads nowhere, a second
    name of a dataset or group scanned under its first, a file in a Zarr store that is not
    part of it): a group's report lists it in ``skipped`` with the reason; asked for alone,
    it is a ``SourceError``.

    Attributes
    ----------
    kind : str or None
        The finding kind the group's report gets for it (``"unreadable_member"``,
        ``"missing_member"``, ``"stray_file"``: a member that cannot be checked), or None
        for one skipped on purpose (a second name of a dataset or group scanned under its
        first).
    """

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.kind = kind

    def __reduce__(self):
        return (type(self), (str(self), self.kind))


class ChunkReadError(FastFiniteError, OSError):
    """A chunk of the source could not be read or decoded.

    Attributes
    ----------
    array : str
        The array's name or path.
    chunk : tuple of int
        The chunk's coordinates in the chunk grid.
    """

    def __init__(
        self, array: str, chunk: tuple[int, ...], cause: BaseException | str, unit: str = "chunk"
    ):
        self.array = array
        self.chunk = tuple(int(c) for c in chunk)
        self.cause = cause
        self.unit = unit
        super().__init__(f"cannot read {unit} {fmt_index(self.chunk)} of {array}: {cause}")

    def __reduce__(self):
        return (type(self), (self.array, self.chunk, str(self.cause), self.unit))


class NonFiniteError(FastFiniteError, ValueError):
    """Raised by :func:`fastfinite.assert_finite` when the data has findings.

    Attributes
    ----------
    report : ScanReport
        The full report of the scan.
    """

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report

    def __reduce__(self):
        return (type(self), (str(self), self.report))


def close_matches(word: str, names: Iterable[Any]) -> list[str]:
    """The names close to a mistyped ``word`` (``difflib``'s ratio of at least 0.6), the
    closest first; at most three."""
    import difflib

    return difflib.get_close_matches(word, [str(n) for n in names], n=3)


def did_you_mean(word: Any, names: Iterable[Any]) -> str:
    """``" (did you mean nonfinite?)"`` for a ``word`` close to one of ``names``, else
    ``""``: what an error about an unknown name adds after the name."""
    close = close_matches(str(word), names) if isinstance(word, str) else []
    return f" (did you mean {close[0]}?)" if close else ""
