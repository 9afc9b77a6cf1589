"""Every public argument's validator. A ``parse_*`` returns the value in the form the code
uses, or raises ``InvalidArgumentError`` showing the bad value; ``scan``, ``localize``,
``guard``, ``merge_reports`` and the command line all call these."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, did_you_mean
from .model.casts import TARGETS
from .model.kinds import (
    BASE_KINDS,
    CHUNK_KINDS,
    ERROR,
    GROUP_KINDS,
    KIND_GROUPS,
    N_TARGET_SLOTS,
    PER_DTYPE_SLICE_KINDS,
    SLICE_KINDS,
    WARNING,
)

DEFAULT_SPLIT_EVERY = 8


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def parse_int(name: str, v: Any, minimum: int = 0, *, optional: bool = False) -> int | None:
    """An int ``>= minimum`` (None passes when ``optional``)."""
    if v is None and optional:
        return None
    if not _is_int(v) or v < minimum:
        raise InvalidArgumentError(f"{name} must be an int >= {minimum}, got {v!r}")
    return int(v)


def parse_bool(name: str, v: Any) -> bool:
    """A flag: ``True`` or ``False`` (a ``bool`` or a ``numpy.bool_``). Nothing else passes,
    not even 0 and 1: ``"no"`` and ``"false"`` are true to Python, and ``progress=1`` may
    mean a level elsewhere; one rule, and the caller says what it meant."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise InvalidArgumentError(f"{name} must be True or False, got {v!r}")


def parse_choice(name: str, v: Any, choices: Sequence[str]) -> str:
    if not isinstance(v, str) or v not in choices:
        raise InvalidArgumentError(
            f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {v!r}"
            f"{did_you_mean(v, choices)}"
        )
    return v


def parse_float(name: str, v: Any, *, strict: bool, finite: bool = False) -> float:
    """A number > 0 (``strict``) or >= 0; not inf where ``finite``."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = float("nan")
    if (
        isinstance(v, (bool, np.bool_))
        or not (f > 0 if strict else f >= 0)
        or (finite and f == float("inf"))
    ):
        what = "finite number" if finite else "number"
        raise InvalidArgumentError(
            f"{name} must be a {what} {'>' if strict else '>='} 0, got {v!r}"
        )
    return f


def parse_cast(cast: Any) -> tuple[str, ...]:
    """Cast target names, duplicates removed: a name (``"float16"``), a dtype
    (``np.float16``), a sequence of them, or None for none."""
    if cast is None:
        return ()
    if isinstance(cast, str) or not isinstance(cast, Iterable):
        cast = (cast,)
    names: list[str] = []
    for c in cast:
        name = c if isinstance(c, str) and c in TARGETS else _dtype_name(c)
        if name not in TARGETS:
            raise InvalidArgumentError(
                f"cast target {c!r} is not supported{did_you_mean(c, TARGETS)}; choose from "
                f"{sorted(TARGETS)}"
            )
        if name not in names:
            names.append(name)
    if len(names) > N_TARGET_SLOTS:
        raise InvalidArgumentError(
            f"at most {N_TARGET_SLOTS} cast targets per scan, not {len(names)}: {', '.join(names)}"
        )
    return tuple(names)


def _dtype_name(c: object) -> str:
    try:
        return np.dtype(c).name  # np.float32, "f4", ...
    except TypeError:
        return str(c)


def parse_by(by: Any, name: str = "by") -> tuple[int, ...] | None:
    """Axes as a tuple of ints (not yet checked against the array: ``resolve_by``)."""
    if by is None:
        return None
    try:
        axes = (by,) if _is_int(by) else tuple(by)
    except TypeError:
        axes = ()
    if not axes or not all(_is_int(a) for a in axes):
        raise InvalidArgumentError(f"{name} must be an int or a tuple of ints, got {by!r}")
    return tuple(int(a) for a in axes)


def resolve_by(by: tuple[int, ...] | None, ndim: int, name: str) -> tuple[int, ...] | None:
    """``by`` for an array of ``ndim`` dimensions: negative axes resolved, sorted."""
    if by is None:
        return None
    out: list[int] = []
    for a in by:
        if not -ndim <= a < ndim:
            raise InvalidArgumentError(
                f"by={by!r}: axis {a} is out of range for {name or 'the array'}, which has "
                f"{ndim} dimension{'s' if ndim != 1 else ''}"
            )
        if a % ndim in out:
            raise InvalidArgumentError(f"by={by!r} names axis {a % ndim} twice")
        out.append(a % ndim)
    return tuple(sorted(out))


def known_kinds() -> tuple[str, ...]:
    """Every kind a report can hold, and the names of the groups of them."""
    cast = [f"{p}:{t}" for p in ("overflow", "underflow") for t in TARGETS]
    dtypes = sorted({*TARGETS, "float16", "float32"})
    sums = [f"{p}{t}" for p in PER_DTYPE_SLICE_KINDS for t in dtypes]
    return (*BASE_KINDS, *cast, *CHUNK_KINDS, *GROUP_KINDS, *SLICE_KINDS, *sums, *KIND_GROUPS)


def parse_kinds(kinds: Any) -> frozenset[str] | None:
    """Kinds that fail a check (``fail_on``): a name (one kind), names, or None for the
    default; an unknown name is an error that lists the known ones. The severities are
    groups too: ``error`` names every kind of severity error, ``warning`` everything (the
    warnings and the errors, as a log level: the set returned holds ``error`` too)."""
    if kinds is None:
        return None
    names = frozenset((kinds,) if isinstance(kinds, str) else kinds)
    known = known_kinds()
    for name in sorted(names, key=str):
        if name not in known:
            raise InvalidArgumentError(
                f"unknown kind {name!r}{did_you_mean(name, known)}; the kinds are "
                f"{', '.join(dict.fromkeys(known))}"
            )
    if not names:
        raise InvalidArgumentError("expected at least one kind")
    return names | {ERROR} if WARNING in names else names


def parse_raw_dtype(v: Any) -> str | None:
    """``raw_dtype``: None, or a format NumPy has no dtype for (bfloat16, float8)."""
    from .model.casts import NARROW

    if v is None:
        return None
    name = str(v).strip().lower()
    if name not in NARROW:
        raise InvalidArgumentError(f"raw_dtype must be one of {', '.join(NARROW)}, not {v!r}")
    return name


def parse_scale(v: Any) -> float | str | None:
    """``scale``: None, a positive finite number, or ``"amax"``."""
    if v is None or (isinstance(v, str) and v.strip().lower() == "amax"):
        return None if v is None else "amax"
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise InvalidArgumentError(
                f"scale must be a positive number or 'amax', not {v!r}"
            ) from None
    value = parse_float("scale", v, strict=True)
    if not value > 0:
        raise InvalidArgumentError(f"scale must be a positive number or 'amax', not {v!r}")
    return value


def parse_storage_options(v: Any) -> dict | None:
    """Options of the filesystem a URL is opened with (credentials, endpoint): a mapping
    with string keys, or None."""
    if v is None:
        return None
    if not isinstance(v, Mapping) or not all(isinstance(k, str) for k in v):
        raise InvalidArgumentError(f"storage_options must be a dict with str keys, got {v!r}")
    return dict(v)


def parse_storage_option_text(text: str) -> tuple[list[str], Any]:
    """``KEY=VALUE`` of the command line: ``a.b=1`` sets ``{"a": {"b": 1}}``; the value is
    read as JSON when it is JSON (numbers, true, {...}), else kept as text."""
    import json

    key, sep, value = text.partition("=")
    keys = key.strip().split(".")
    if not sep or not all(k.strip() for k in keys):
        raise InvalidArgumentError(
            f"a storage option is KEY=VALUE (KEY may be a.b for nested options), got {text!r}"
        )
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return [k.strip() for k in keys], parsed


def parse_cache(v: Any, name: str = "cache") -> str | None:
    """``cache``: None, or the path of a directory (made when it does not exist:
    ``parse_directory``)."""
    return None if v is None else parse_directory(name, v)


def _nearest_existing(path: str) -> str:
    """``path``, or the closest of its ancestors that exists."""
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def parse_output_file(name: str, v: Any, *, stdout: bool = False) -> str:
    """A file to write (``--json``, ``--plot``), checked before any work: not a directory;
    a file that exists and can be written (it is written in place: ``/dev/stdout``, a file
    in a directory one cannot add to), or a new file in a directory that exists and can be
    written in; ``"-"`` is the standard output where ``stdout``. The error names ``name``
    and the path."""
    if not isinstance(v, (str, os.PathLike)) or not os.fspath(v):
        raise InvalidArgumentError(f"{name} must be the path of a file to write, got {v!r}")
    text = os.fspath(v)
    if stdout and text == "-":
        return text
    path = os.path.abspath(text)
    parent = os.path.dirname(path)
    if os.path.isdir(path):
        raise InvalidArgumentError(f"{name} {text}: is a directory, not a file")
    if os.path.exists(path):
        if not os.access(path, os.W_OK):
            raise InvalidArgumentError(f"{name} {text}: the file cannot be written")
        return text
    if not os.path.isdir(parent):
        found = _nearest_existing(parent)
        why = (
            f"{found} is not a directory"
            if os.path.exists(found) and not os.path.isdir(found)
            else f"the directory {parent} does not exist"
        )
        raise InvalidArgumentError(f"{name} {text}: {why}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidArgumentError(f"{name} {text}: cannot write in the directory {parent}")
    return text


def parse_directory(name: str, v: Any) -> str:
    """A directory to write in (``cache``, the demo's ``--dir``), made when it does not
    exist: it is a directory, or its closest existing ancestor is one that can be written
    in. Returns the absolute path; the error names ``name`` and the path."""
    if not isinstance(v, (str, os.PathLike)) or not os.fspath(v):
        raise InvalidArgumentError(f"{name} must be the path of a directory, got {v!r}")
    text = os.fspath(v)
    path = os.path.abspath(text)
    found = _nearest_existing(path)
    if not os.path.isdir(found):
        what = "is a file" if found == path else f"is under {found}, which is a file"
        raise InvalidArgumentError(f"{name} {text}: {what}, not a directory")
    if not os.access(found, os.W_OK | os.X_OK):
        raise InvalidArgumentError(f"{name} {text}: cannot write in the directory {found}")
    return path


LOCAL_SCHEDULERS = ("threads", "processes", "synchronous", "sync", "single-threaded")
_ADDRESS = re.compile(r"^(tcp|tls|ws|wss|ucx|inproc)://(\[[^\]]+\]|[^/:\[\]]+):(\d+)$")


def _schedulers(name: str) -> str:
    """What ``name`` takes: the API's ``scheduler`` a local scheduler's name, a Client or
    an address; a command-line flag (``--scheduler``) an address only."""
    if name.startswith("--"):
        return f"{name} must be the address of a Dask scheduler, like"
    client = ", a distributed Client" if name == "scheduler" else ""
    return f"{name} must be 'threads', 'processes', 'synchronous'{client} or an address like"


def parse_address(text: str, name: str = "scheduler") -> str:
    """A scheduler address, ``tcp://host:port``; anything else is an error saying why."""
    m = _ADDRESS.match(text)
    if not m:
        raise InvalidArgumentError(
            f"{_schedulers(name)} tcp://host:8786 (with its port); got {text!r}"
        )
    if m.group(1) in ("tls", "wss"):
        where = "in Python, " if name.startswith("--") else ""  # no flag takes a Client
        raise InvalidArgumentError(
            f"{text} needs a security configuration: {where}connect a distributed.Client "
            "with it and pass the client as scheduler="
        )
    return text


def parse_scheduler(v: Any, name: str = "scheduler") -> Any:
    """``scheduler``: None, a local scheduler's name, an address (``parse_address``) or a
    ``distributed.Client``, checked before anything is opened."""
    if v is None or type(v).__name__ == "Client":
        return v
    if isinstance(v, str):
        return v if v in LOCAL_SCHEDULERS else parse_address(v, name)
    raise InvalidArgumentError(f"{_schedulers(name)} tcp://host:8786; got {v!r}")


@dataclass(frozen=True)
class ScanOptions:
    """The validated options of one scan (see :func:`fastfinite.scan` for each)."""

    cast: tuple[str, ...] = ("float32",)
    max_locations: int = 100
    workers: int | None = None
    progress: bool = False
    fail_fast: bool = False
    on_error: str = "raise"
    region_bytes: int | None = None
    split_every: int = DEFAULT_SPLIT_EVERY
    by: tuple[int, ...] | None = None
    z_threshold: float = 10.0
    eps: float = 1e-8
    storage_options: dict | None = None
    concurrency: int = 64
    timeout: float = 30.0
    send_credentials: bool = True
    scale: float | str | None = None
    device_copy: bool = False
    raw_dtype: str | None = None
    cache: str | None = None


def scan_options(**raw: Any) -> ScanOptions:
    """Validate the options of a scan (``scan``'s arguments, by name)."""
    parse = {
        "cast": parse_cast,
        "max_locations": lambda v: parse_int("max_locations", v, 0),
        "workers": lambda v: parse_int("workers", v, 1, optional=True),
        "progress": lambda v: parse_bool("progress", v),
        "fail_fast": lambda v: parse_bool("fail_fast", v),
        "on_error": lambda v: parse_choice("on_error", v, ("raise", "report")),
        "region_bytes": lambda v: parse_int("region_bytes", v, 1, optional=True),
        "split_every": lambda v: parse_int(
            "split_every", DEFAULT_SPLIT_EVERY if v is None else v, 2
        ),
        "by": parse_by,
        "z_threshold": lambda v: parse_float("z_threshold", v, strict=True),
        "eps": lambda v: parse_float("eps", v, strict=False),
        "storage_options": parse_storage_options,
        "concurrency": lambda v: parse_int("concurrency", v, 1),
        "timeout": lambda v: parse_float("timeout", v, strict=True, finite=True),
        "send_credentials": lambda v: parse_bool("send_credentials", v),
        "scale": parse_scale,
        "device_copy": lambda v: parse_bool("device_copy", v),
        "raw_dtype": parse_raw_dtype,
        "cache": parse_cache,
    }
    return ScanOptions(**{k: parse[k](v) for k, v in raw.items()})
