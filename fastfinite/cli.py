"""The ``fastfinite`` command: ``scan``, ``merge``, ``diff``, ``compile`` and ``demo``.

Exit codes: 0 no error found (warnings are printed), 1 an error found (with ``--fail-on``,
something of those kinds), 2 usage or read error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import options
from .errors import FastFiniteError, InvalidArgumentError, SourceError

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


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


def _nested(pairs: list) -> dict | None:
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
    """argparse, with a usage error on one line (exit code 2)."""

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    p = _Parser(
        prog="fastfinite",
        description="Find NaN, inf and cast overflows in large arrays, in one streaming pass.",
        epilog="Exit codes: 0 no error found (warnings are printed), 1 an error found: NaN, "
        "inf, a cast overflow, an unreadable chunk... (with --fail-on, something of those "
        "kinds), 2 usage or read error.",
    )
    p.add_argument("--version", action="version", version=f"fastfinite {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser(
        "scan",
        help="scan an array file or store and print what was found",
        description="Scan PATH and print a summary. PATH is a .npy file, a Zarr store or an "
        "array or group inside it (data.zarr, data.zarr/train/x, data.zip, s3://...), an "
        "HDF5 dataset (file.h5:/group/dataset) or file, a Parquet or Arrow file, a .tar "
        "shard, a directory or a quoted glob ('parts/*.npy') of array files; several PATHs "
        "are one set of files.",
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
    s.add_argument(
        "--cache",
        type=_directory("--cache"),
        metavar="DIR",
        default=None,
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
    s.add_argument(
        "--plot",
        type=_output("--plot"),
        metavar="PNG",
        help="draw where the problems sit into PNG (needs matplotlib)",
    )
    s.add_argument(
        "--html",
        type=_output("--html"),
        metavar="FILE",
        help="write the report as one self-contained HTML page: summary, picture (with "
        "matplotlib), findings, locations and per-slice statistics as tables",
    )
    s.add_argument(
        "--bad-samples",
        type=_output("--bad-samples"),
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
    c.add_argument(
        "--json",
        type=_output("--json", stdout=True),
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
        help="where to write the data (default: a fresh temporary directory); a second run "
        "reuses the data there",
    )
    d.add_argument(
        "--size-mb",
        type=_whole("--size-mb", 1),
        default=1024,
        metavar="MB",
        help="size of the demo training set (default: 1024)",
    )
    d.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json",
        type=_output("--json", stdout=True),
        metavar="FILE",
        help="also write the report as JSON to FILE ('-' for stdout)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing: the exit code only")
    _fail_on_option(p)
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the summary (default: when stdout is a terminal)",
    )


def _fail_on_option(p: argparse.ArgumentParser) -> None:
    from .model.kinds import kinds_help

    p.add_argument(
        "--fail-on",
        type=_arg(lambda t: options.parse_kinds(_list(t))),
        default=None,
        metavar="KINDS",
        help="comma-separated kinds that make the exit code 1 (default: error), e.g. "
        "error (NaN, inf, cast overflow, unreadable chunks...), warning (everything: "
        f"warnings and errors), {kinds_help()}",
    )


def _failed(found: set[str], fail_on: frozenset[str] | None) -> int:
    """The exit code for the kinds ``found``: 1 when any is of the ``--fail-on`` kinds
    (by default, of severity error: ``kinds.fails``)."""
    from .model.kinds import fails

    return EXIT_FOUND if fails(found, fail_on) else EXIT_OK


def _finish(report, args: argparse.Namespace) -> int:
    """Print and write the report as asked (with what changed, after a scan with a cache);
    return the exit code. With ``--json -`` the standard output holds the JSON alone."""
    import json

    from .report.render import render

    to_stdout = args.json == "-"
    changes = report.changes
    if not args.quiet and not to_stdout:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        print(render(report, color=color))
        if changes is not None:
            print(changes)
    if args.json:
        d = report.to_dict()
        if changes is not None:
            d["changes"] = changes.to_dict()
        text = json.dumps(d, indent=2)
        if to_stdout:
            print(text)
        else:
            with open(os.fspath(args.json), "w") as f:
                f.write(text + "\n")
    if getattr(args, "plot", None):
        report.plot(args.plot, axes=tuple(args.plot_axes) if args.plot_axes else None)
        if not args.quiet:
            print(f"plot written to {args.plot}", file=sys.stderr if to_stdout else sys.stdout)
    if getattr(args, "html", None):
        report.to_html(args.html)
        if not args.quiet:
            print(f"html written to {args.html}", file=sys.stderr if to_stdout else sys.stdout)
    found = changes.new_kinds() if getattr(args, "fail_on_new", False) else report.kinds_found()
    return _failed(found, args.fail_on)


def read_report(path: str):
    """The report in the JSON file ``path`` (written by ``scan --json`` or ``to_json``), or
    a ``SourceError`` naming the file and saying what it holds instead: missing, a
    directory, empty, binary, not JSON, JSON of another shape, a report of a newer schema.
    ``merge`` and ``diff`` read reports here, and only here."""
    import json
    import stat

    from .report.model import ScanReport, check_schema

    def refuse(why: str) -> SourceError:
        return SourceError(f"{path} is not a fastfinite JSON report: {why}")

    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise SourceError(f"cannot read the report {path}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise refuse("it is a directory")
    if not stat.S_ISREG(mode):  # a FIFO would block the read forever
        raise refuse("it is not a regular file")
    try:
        with open(path, "rb") as f:
            head = first = f.read(64).removeprefix(b"\xef\xbb\xbf")  # a BOM: editors write it
            while head and not head.strip():  # white space before the JSON is fine
                head = f.read(1 << 16)
            if not head:
                raise refuse("it is empty" if not first else "it holds only white space")
            if head.startswith(b"\x93NUMPY"):
                raise refuse("it is a .npy file (scan it with 'fastfinite scan')")
            if not head.lstrip().startswith(b"{"):
                binary = b"\0" in head or not _text(head)
                raise refuse("it holds binary data" if binary else "it is not a JSON object")
            raw = head + f.read()
    except OSError as e:
        raise SourceError(f"cannot read the report {path}: {e.strerror or e}") from None
    try:
        d = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise refuse("it is not UTF-8 text") from None
    except ValueError as e:
        raise refuse(f"it is not JSON ({e})") from None
    try:
        schema = check_schema(d)  # what schemas are read is the report's to say
    except InvalidArgumentError as e:
        raise SourceError(f"{path}: {e}") from None
    try:
        return ScanReport.from_dict(d)
    except KeyError as e:
        raise refuse(f"schema {schema!r} but no {e} field") from None
    except InvalidArgumentError as e:  # it disagrees with itself: the field is named
        raise refuse(f"schema {schema!r} but {e}") from None
    except (ValueError, TypeError, AttributeError, IndexError) as e:
        raise refuse(f"schema {schema!r} but {type(e).__name__}: {e}") from None


def _text(head: bytes) -> bool:
    """The start of a file reads as UTF-8 text (a character cut at the end is fine)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3
    return True


def _merge(args: argparse.Namespace) -> int:
    from .report.merge import merge_reports

    return _finish(merge_reports([read_report(p) for p in args.reports]), args)


def _diff(args: argparse.Namespace) -> int:
    import json

    from .cache.changes import diff_reports

    changes = diff_reports(read_report(args.old), read_report(args.new))
    text = json.dumps(changes.to_dict(), indent=2) if args.json else ""
    if args.json == "-":
        print(text)
    elif not args.quiet:
        print(changes)
    if args.json and args.json != "-":
        with open(os.fspath(args.json), "w") as f:
            f.write(text + "\n")
    return _failed(changes.new_kinds(), args.fail_on)


def _error(msg: str) -> int:
    print(f"fastfinite: error: {' '.join(str(msg).split())}", file=sys.stderr)
    # what a failed store leaves behind (coroutines whose errors nobody awaited) is not
    # printed at exit: the line above said what broke
    sys.unraisablehook = lambda unraisable: None
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "scan":
            return _scan(args)
        if args.command == "merge":
            return _merge(args)
        if args.command == "diff":
            return _diff(args)
        if args.command == "compile":
            from .compute.compiling import compile_main

            progress = not args.no_progress and sys.stderr.isatty()
            return compile_main(args.mode, list(args.dtype), args.processes, progress)
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(args.dir, size_mb=args.size_mb, progress=not args.no_progress)
    except FastFiniteError as e:
        return _error(str(e))
    except OSError as e:
        return _error(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))
    except KeyboardInterrupt:
        return _error("interrupted")
    except Exception as e:  # a failure nothing above names: still one line and exit 2
        if os.environ.get("FASTFINITE_DEBUG"):
            raise
        return _error(f"{type(e).__name__}: {e}")
    return EXIT_ERROR


def _scan_on_local_cluster(path: str, n: int, kwargs: dict):
    from distributed import Client, LocalCluster

    from .api import scan

    with (
        LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        return scan(path, scheduler=client, **kwargs)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _check_scan(args: argparse.Namespace) -> None:
    """What the flags ask for together, checked before the scan starts (each flag's own
    value was checked by argparse): ``InvalidArgumentError`` naming the flags."""
    import importlib.util

    clustered = args.scheduler is not None or args.workers is not None
    if args.fail_on_new and not args.cache:
        raise InvalidArgumentError(
            "--fail-on-new compares with the last scan kept by --cache DIR: give both"
        )
    if args.threads is not None and clustered:
        flag = "--scheduler" if args.scheduler is not None else "--workers"
        raise InvalidArgumentError(f"--threads counts local threads: it has no use with {flag}")
    if args.fail_fast and clustered:
        raise InvalidArgumentError("--fail-fast cannot be combined with a Dask cluster")
    if args.plot_axes is not None and not args.plot:
        raise InvalidArgumentError("--plot-axes chooses the axes of --plot PNG: give both")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise InvalidArgumentError("--plot needs matplotlib: pip install 'fastfinite[plot]'")
    given = (
        ("--json", args.json),
        ("--plot", args.plot),
        ("--html", args.html),
        ("--bad-samples", args.bad_samples),
        ("--cache", args.cache),
    )
    outputs = [(flag, value) for flag, value in given if value and value != "-"]
    real = {f: os.path.realpath(v) for f, v in outputs}
    files = [(f, r) for f, r in real.items() if f != "--cache"]
    for i, (flag, there) in enumerate(files):
        for other, elsewhere in files[i + 1 :]:
            if there == elsewhere:
                raise InvalidArgumentError(f"{flag} and {other} both write {dict(outputs)[flag]}")
    from .sources.shards import glob_prefix, is_glob

    for path in args.path if isinstance(args.path, list) else [args.path]:
        source = path if os.path.exists(path) else path.rpartition(":")[0]
        if is_glob(path):
            source = glob_prefix(path)[0]
        if "://" not in path and source and os.path.exists(source):
            for flag, value in outputs:
                if _inside(real[flag], os.path.realpath(source)):
                    raise InvalidArgumentError(
                        f"{flag} {value} would write into the input {path}: fastfinite "
                        "never modifies its input"
                    )


def _scan(args: argparse.Namespace) -> int:
    from .api import scan

    args.path = args.path[0] if len(args.path) == 1 else args.path  # several: a set of files
    _check_scan(args)
    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    progress = progress and not args.quiet
    kwargs = dict(
        cast=args.cast,
        max_locations=args.max_locations,
        progress=progress,
        on_error=args.on_error,
        by=args.by,
        z_threshold=args.z_threshold,
        localize=args.localize,
        eps=args.eps,
        storage_options=_nested(args.storage_options),
        concurrency=args.concurrency,
        region_bytes=args.region_bytes,
        timeout=args.timeout,
        send_credentials=args.send_credentials,
        scale=args.scale,
        raw_dtype=args.raw_dtype,
        cache=args.cache,
    )
    if args.scheduler is not None or args.workers is not None:
        # distributed logs every reconnection attempt, with tracebacks: the one line that
        # says what broke is ours
        import distributed  # noqa: F401  (it sets up its loggers on import)

        for name in list(logging.root.manager.loggerDict):
            if name.split(".")[0] == "distributed":
                logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        kwargs["split_every"] = args.split_every
        if args.workers:
            report = _scan_on_local_cluster(args.path, args.workers, kwargs)
        else:
            report = scan(args.path, scheduler=args.scheduler, **kwargs)
    else:
        report = scan(args.path, workers=args.threads, fail_fast=args.fail_fast, **kwargs)
    if args.bad_samples:
        _write_bad_samples(report, args.bad_samples)
    return _finish(report, args)


def _write_bad_samples(report, path: str) -> None:
    """``--bad-samples FILE``; a list that could not be complete says so on stderr."""
    from .report.samples import write_keys

    keys = report.bad_samples()
    write_keys(keys, path)
    if not keys.complete:
        more = f" (+{len(keys.notes) - 1} more)" if len(keys.notes) > 1 else ""
        print(f"fastfinite: warning: {path} is incomplete: {keys.notes[0]}{more}", file=sys.stderr)
