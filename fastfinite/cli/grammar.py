"""The ``fastfinite`` command's flags: each subcommand's parser (``build_parser``) and how
each value is read and checked as it is parsed (a usage error: one line, exit code 2)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from .. import options
from ..errors import InvalidArgumentError, close_matches, did_you_mean
from .exits import EXIT_ERROR

# What ``scan PATH`` reads, as ``--help`` lists it: (name, examples, what), one line each. A
# new kind of input (``sources/open.py``) adds its line here.
INPUT_KINDS: tuple[tuple[str, str, str], ...] = (
    ("NumPy", "file.npy, arrays.npz", "a .npy file (memory-mapped), or the arrays of a .npz"),
    ("Zarr", "data.zarr, data.zarr/train/x, data.zip/train/x",
     "a Zarr v2/v3 store (a directory or a zip), or an array or group in it"),
    ("HDF5", "file.h5, file.h5:/group/dataset, file.nc",
     "an HDF5 or NetCDF4 file (.h5 .hdf5 .hdf .he5 .nc .nc4), or a dataset or group in it"),
    ("Parquet", "t.parquet, t.pq, t.parq, folder/", "a Parquet file, or a folder of them"),
    ("Arrow", "t.arrow, t.feather, t.ipc", "an Arrow IPC (Feather v2) file"),
    ("checkpoints", "model.safetensors, model.safetensors.index.json, model.gguf, model.pt",
     "safetensors (one or sharded), GGUF (needs gguf), PyTorch .pt/.pth/.bin (without torch)"),
    ("shards", "shard-000.tar, 'train/**/*.npy', folder/, a.npy b.npy",
     "WebDataset .tar shards, a quoted glob, a folder or several paths: one set of files"),
    ("object stores", "s3://bucket/data.zarr, gs://..., file://..., memory://...",
     "a Zarr store by fsspec URL (reached with --storage-option KEY=VALUE)"),
)  # fmt: skip


def _arg(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from one of ``options``' validators (its message as argparse's)."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except InvalidArgumentError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def _int(text: str) -> int | str:
    return int(text) if text.strip().lstrip("+-").isdigit() else text


def _list(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _names(flag: str, what: str) -> Callable[[str], Any]:
    """A comma-separated list of at least one name: an empty one is refused, never read as
    "none of them"."""

    def parse(text: str) -> tuple[str, ...]:
        names = _list(text)
        if not names:
            raise InvalidArgumentError(f"{flag} takes {what}, got {text!r}")
        return names

    return _arg(parse)


def _whole(name: str, minimum: int) -> Callable[[str], Any]:
    return _arg(lambda t: options.parse_int(name, _int(t), minimum))


def _axes(name: str) -> Callable[[str], Any]:
    return _arg(lambda t: options.parse_by(tuple(_int(a) for a in _list(t)), name))


def nested_options(pairs: list) -> dict | None:
    """``--storage-option`` pairs as one dict (``a.b=1``: ``{"a": {"b": 1}}``). A key given
    twice, or both as a value and as a group (``a=1`` and ``a.b=2``), is an error: which
    one was meant is not ours to guess."""
    out: dict = {}
    for keys, value in pairs:
        here = out
        for i, k in enumerate(keys[:-1]):
            here = here.setdefault(k, {})
            if not isinstance(here, dict):
                raise InvalidArgumentError(
                    f"--storage-option {'.'.join(keys)}: {'.'.join(keys[: i + 1])} is "
                    "already given a value"
                )
        if keys[-1] in here:
            raise InvalidArgumentError(f"--storage-option {'.'.join(keys)} is given twice")
        here[keys[-1]] = value
    return out or None


def _casts(text: str) -> tuple[str, ...]:
    """``--cast``: targets, or ``none``; an empty value is refused (it used to turn the
    check off, which the API's ``cast=""`` never did)."""
    if text.strip().lower() == "none":
        return ()
    names = _list(text)
    if not names:
        raise InvalidArgumentError(
            f"--cast takes comma-separated cast targets (float32, float16, bfloat16, ...) "
            f"or none; got {text!r}"
        )
    return options.parse_cast(names)


def _number(flag: str, strict: bool) -> Callable[[str], Any]:
    return _arg(lambda t: options.parse_float(flag, t, strict=strict))


def _plot_axes(text: str) -> tuple[int, ...]:
    axes = options.parse_by(tuple(_int(a) for a in _list(text)), "--plot-axes")
    if len(axes) != 2 or axes[0] == axes[1]:
        raise InvalidArgumentError(f"--plot-axes takes two different axes A,B, got {text!r}")
    return axes


def _output(flag: str, stdout: bool = False) -> Callable[[str], Any]:
    """A file written at the end, checked at once (``options.parse_output_file``)."""
    return _arg(lambda t: options.parse_output_file(flag, t, stdout=stdout))


def _address(text: str) -> str:
    """``--scheduler``: the address of a running Dask scheduler, and only that. The API's
    local names (``scheduler="threads"``...) have flags of their own here: local threads
    are the default (``--threads``), local worker processes ``--workers``."""
    if text.strip() in options.LOCAL_SCHEDULERS:
        raise InvalidArgumentError(
            f"--scheduler takes the address of a running Dask scheduler (tcp://host:8786), "
            f"not {text!r}: local threads are the default (--threads N), local worker "
            "processes --workers N"
        )
    return options.parse_address(text, "--scheduler")


def _directory(flag: str) -> Callable[[str], Any]:
    return _arg(lambda t: options.parse_directory(flag, t))


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error on one line (exit code 2), and "did you mean" for a
    mistyped subcommand, choice or flag (argparse has it from Python 3.14 only)."""

    commands: dict[str, argparse.ArgumentParser] = {}  # the subcommands' parsers, by name

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own check of a value against ``choices`` (3.10 to 3.14 alike)
        choices = action.choices
        if choices is None or value in choices or not isinstance(value, str):
            return super()._check_value(action, value)
        names = ", ".join(map(str, choices))
        raise argparse.ArgumentError(
            action,
            f"invalid choice: {value!r}{did_you_mean(value, choices)}; choose from {names}",
        )

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            parser = self.commands.get(getattr(ns, "command", None), self)
            flags = [f for a in parser._actions for f in a.option_strings if f.startswith("--")]
            typos = [t.partition("=")[0] for t in extra if t.startswith("--")]
            hints = dict.fromkeys(c[0] for t in typos if (c := close_matches(t, flags)))
            hint = f" (did you mean {' or '.join(hints)}?)" if hints else ""
            self.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
        return ns


def _scan_description() -> str:
    """``scan --help``'s description: every kind of input, from ``INPUT_KINDS``."""
    width = max(len(name) for name, _, _ in INPUT_KINDS) + 4
    lines = [
        f"  {name:<{width - 2}}{what}\n{'':<{width}}{examples}"
        for name, examples, what in INPUT_KINDS
    ]
    return (
        "Scan PATH (or several: one set of files) and print a summary. PATH is one of:\n"
        + "\n".join(lines)
    )


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    p = _Parser(
        prog="fastfinite",
        description="Find NaN, inf and cast overflows in large arrays, in one streaming pass.",
        epilog="Exit codes: 0 no error found (warnings are printed), 1 an error found: NaN, "
        "inf, a cast overflow, an unreadable chunk... (with --fail-on, something of those "
        "kinds), 2 usage or read error, 130 interrupted (Ctrl-C).",
    )
    p.add_argument("--version", action="version", version=f"fastfinite {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p.commands = sub.choices
    kinds = ", ".join(name for name, _, _ in INPUT_KINDS)
    s = sub.add_parser(
        "scan",
        help=f"scan an array file or store ({kinds}) and print what was found",
        description=_scan_description(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("path", metavar="PATH", nargs="+", help="what to scan")
    s.add_argument(
        "--cast",
        type=_arg(_casts),
        default=("float32",),
        metavar="TARGETS",
        help="comma-separated cast targets to check (at most 5): float32, float16, "
        "bfloat16, float8_e4m3fn, float8_e5m2 (and the other float8 formats of ml_dtypes), "
        "or none (default: float32)",
    )
    s.add_argument(
        "--max-locations",
        type=_whole("--max-locations", 0),
        default=100,
        metavar="N",
        help="positions recorded per kind (default: 100)",
    )
    s.add_argument(
        "--threads",
        type=_whole("--threads", 1),
        default=None,
        metavar="N",
        help="local threads (default: every core for large input)",
    )
    cluster = s.add_mutually_exclusive_group()
    cluster.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        type=_arg(_address),
        default=None,
        help="run on an existing Dask cluster: its scheduler's address, e.g. tcp://HOST:8786 "
        "(every worker must reach PATH); for local threads see --threads, for local worker "
        "processes --workers",
    )
    cluster.add_argument(
        "--workers",
        type=_whole("--workers", 1),
        default=None,
        metavar="N",
        help="start a local Dask cluster of N worker processes for the scan",
    )
    s.add_argument(
        "--split-every",
        type=_whole("--split-every", 2),
        default=None,
        metavar="N",
        help="fan-in of the Dask tree reduction (default: 8)",
    )
    s.add_argument(
        "--storage-option",
        dest="storage_options",
        type=_arg(options.parse_storage_option_text),
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="how to reach a store given by URL, repeatable: endpoint_url=http://host:9000, "
        "client_kwargs.region_name=eu-west-1, anon=true (values are read as JSON when they are)",
    )
    s.add_argument(
        "--region-bytes",
        type=_whole("--region-bytes", 1),
        default=None,
        metavar="N",
        help="bytes read and scanned at once (default: 4 MiB of whole chunks for stores)",
    )
    s.add_argument(
        "--concurrency",
        type=_whole("--concurrency", 1),
        default=64,
        metavar="N",
        help="requests in flight to a store reached over a network (default: 64)",
    )
    s.add_argument(
        "--timeout",
        type=_arg(lambda t: options.parse_float("--timeout", t, strict=True, finite=True)),
        default=30.0,
        metavar="SECONDS",
        help="a store or Dask scheduler that does not answer, or a cluster without workers, "
        "is an error after this long (default: 30)",
    )
    s.add_argument(
        "--no-send-credentials",
        dest="send_credentials",
        action="store_false",
        help="with a Dask cluster, keep the storage options' secrets out of the task graph: "
        "each worker reads with credentials of its own",
    )
    s.add_argument(
        "--scale",
        type=_arg(options.parse_scale),
        default=None,
        metavar="NUMBER|amax",
        help="check the casts of x * scale, as FP8 training recipes cast (amax: target max "
        "/ amax, per tensor, or per slice with --by); a second pass over the data",
    )
    s.add_argument(
        "--raw-dtype",
        type=_arg(options.parse_raw_dtype),
        default=None,
        metavar="FORMAT",
        help="the format of a .npy that holds raw bytes (np.save of ml_dtypes' bfloat16 or "
        "float8 writes |V2 or |V1): bfloat16, float8_e4m3fn, ...",
    )
    s.add_argument(
        "--by",
        type=_axes("--by"),
        default=None,
        metavar="AXES",
        help="statistics and anomalies per slice along these axes, e.g. 0 (per sample), "
        "-1 (per feature) or 0,1",
    )
    s.add_argument(
        "--z-threshold",
        type=_number("--z-threshold", strict=True),
        default=10.0,
        metavar="Z",
        help="a slice whose largest |z| exceeds Z is an outlier (default: 10)",
    )
    s.add_argument(
        "--localize",
        action="store_true",
        help="replay the standardization under np.errstate(all='raise') on flagged slices "
        "and show where NumPy fails",
    )
    s.add_argument(
        "--eps",
        type=_number("--eps", strict=False),
        default=1e-8,
        metavar="EPS",
        help="the eps of (x - mean) / (std + eps) in the replay (default: 1e-8)",
    )
    s.add_argument(
        "--fail-fast", action="store_true", help="stop at the first region with a non-finite value"
    )
    s.add_argument(
        "--on-error",
        choices=("raise", "report"),
        default="raise",
        help="unreadable chunk, or tensor of a checkpoint: stop with exit code 2 (raise), "
        "or report it and scan the rest (report)",
    )
    _add_output(
        s,
        "--cache",
        directory=True,
        metavar="DIR",
        help="keep the summaries of what was scanned in DIR: the next scan reads only the "
        "chunks that changed, resumes an interrupted scan, and says what is new",
    )
    s.add_argument(
        "--fail-on-new",
        action="store_true",
        help="with --cache: exit code 1 only for what is new since the last scan in the "
        "cache (an error, or of the --fail-on kinds when given); everything is new on a "
        "first scan",
    )
    s.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        help="show a progress bar, or never (default: when stderr is a terminal)",
    )
    _output_options(s)
    _add_output(
        s, "--plot", metavar="PNG", help="draw where the problems sit into PNG (needs matplotlib)"
    )
    _add_output(
        s,
        "--html",
        metavar="FILE",
        help="write the report as one self-contained HTML page: summary, picture (with "
        "matplotlib), findings, locations and per-slice statistics as tables",
    )
    _add_output(
        s,
        "--bad-samples",
        metavar="FILE",
        help="write the keys of the samples or members with an error to FILE, one a line "
        "(a table's rows as TABLE<TAB>ROW), for a loader to skip or replay",
    )
    s.add_argument(
        "--plot-axes",
        type=_arg(_plot_axes),
        default=None,
        metavar="A,B",
        help="the two array axes of the heat map (default: the two with most chunks)",
    )

    m = sub.add_parser(
        "merge",
        help="merge JSON reports of separate runs and print the merged summary",
        description="Merge reports written with 'fastfinite scan --json' (one per file, per "
        "task, per day...). Arrays that differ only in their first dimension merge as their "
        "concatenation along axis 0; others as a group.",
    )
    m.add_argument("reports", nargs="+", metavar="REPORT.json")
    _output_options(m)

    c = sub.add_parser(
        "diff",
        help="what changed between two JSON reports of the same data; exit 1 when the "
        "newer holds a new error",
        description="Compare two reports written with 'fastfinite scan --json' of the same "
        "array or group (yesterday's and today's): locations and findings that are new or "
        "gone, and counts that changed. Exit code 0: no new error; 1: a new error (a new "
        "location or finding of severity error, or such a count that grew; with --fail-on, "
        "of those kinds: --fail-on warning for anything new); 2: an error.",
    )
    c.add_argument("old", metavar="OLD.json")
    c.add_argument("new", metavar="NEW.json")
    _add_output(
        c,
        "--json",
        stdout=True,
        metavar="FILE",
        help="also write the changes as JSON to FILE ('-' for stdout)",
    )
    c.add_argument("-q", "--quiet", action="store_true", help="print nothing: the exit code only")
    _fail_on_option(c)

    k = sub.add_parser(
        "compile",
        help="compile every kernel into Numba's cache (for Docker images, CI caches, "
        "cluster images): later processes load them instead of compiling",
        description="Compile the kernels scans call into Numba's cache for this CPU, in as "
        "many processes at once as there are cores. A scan never waits for its kernels (it "
        "starts on their NumPy twins), but a fresh process runs at full speed only once they "
        "are compiled: this pays for that once, ahead of time. The cache is NUMBA_CACHE_DIR, "
        "else __pycache__ beside fastfinite's source, else ~/.cache/fastfinite.",
    )
    k.add_argument(
        "--mode",
        type=_names("--mode", "comma-separated modes (plain, by=0, by=-1, ...)"),
        default=None,
        metavar="MODES",
        help="comma-separated kinds of scan to compile for: plain, by=0, by=-1, localize, "
        "scale, narrow (bfloat16 and float8 data), guard; also cast, complex, integer "
        "(plain's kernels) and 'by tuples' (by=-1's) (default: all)",
    )
    k.add_argument(
        "--dtype",
        type=_names("--dtype", "float32 and/or float64"),
        default=("float32", "float64"),
        metavar="DTYPES",
        help="float32 and/or float64, the data's type as the kernels see it (float16 and "
        "bfloat16 data as float32, integers as float64) (default: both)",
    )
    k.add_argument(
        "--processes",
        type=_whole("--processes", 1),
        default=None,
        metavar="N",
        help="groups of kernels compiled at once (default: one per core)",
    )
    k.add_argument("--no-progress", action="store_true", help="no progress bar")

    d = sub.add_parser(
        "demo",
        help="write a demo dataset with planted problems and scan it",
        description="Write a demo dataset with planted problems and scan it.",
    )
    d.add_argument(
        "--dir",
        type=_directory("--dir"),
        metavar="DIR",
        default=None,
        help="where to write the data and the reports (default: a fresh temporary "
        "directory); a later run there reuses data kept by --keep",
    )
    d.add_argument(
        "--size-mb",
        type=_whole("--size-mb", 1),
        default=1024,
        metavar="MB",
        help="size of the demo training set (default: 1024)",
    )
    d.add_argument(
        "--keep",
        action="store_true",
        help="keep the data written (by default removed at the end, after an error or a "
        "Ctrl-C too; the reports stay)",
    )
    d.add_argument(
        "--full-report",
        action="store_true",
        help="write report.json whole, with the per-slice statistics of every sample (5.5 "
        "MB for 1 GB; by default they are left out)",
    )
    d.add_argument(
        "--no-progress", action="store_true", help="no progress bars (default: on a terminal)"
    )
    return p


def _add_output(
    p: argparse.ArgumentParser,
    flag: str,
    *,
    stdout: bool = False,
    directory: bool = False,
    **kwargs: Any,
) -> None:
    """Add a flag that writes a file (or, ``directory``, in a directory): its value is checked
    as it is parsed (``options.parse_output_file``: a file that can be written, ``-`` for
    stdout where ``stdout``; ``options.parse_directory``), and the flag joins the outputs
    ``check_outputs`` checks together before any work. Every output flag is added here."""
    check = _directory(flag) if directory else _output(flag, stdout=stdout)
    action = p.add_argument(flag, type=check, default=None, **kwargs)
    p.set_defaults(outputs=(*(p.get_default("outputs") or ()), (flag, action.dest)))


def _output_options(p: argparse.ArgumentParser) -> None:
    _add_output(
        p,
        "--json",
        stdout=True,
        metavar="FILE",
        help="also write the report as JSON to FILE ('-' for stdout)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing: the exit code only")
    _fail_on_option(p)
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the summary (default: when stdout is a terminal, unless the "
        "environment sets NO_COLOR; FORCE_COLOR colours it elsewhere too)",
    )


def _fail_on_option(p: argparse.ArgumentParser) -> None:
    from ..model.kinds import kinds_help

    p.add_argument(
        "--fail-on",
        type=_arg(lambda t: options.parse_kinds(_list(t))),
        default=None,
        metavar="KINDS",
        help="comma-separated kinds that make the exit code 1 (default: error), e.g. "
        "error (NaN, inf, cast overflow, unreadable chunks...), warning (everything: "
        f"warnings and errors), {kinds_help()}",
    )
