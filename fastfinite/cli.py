"""The ``fastfinite`` command: ``scan`` and ``demo``.

Exit codes: 0 nothing found, 1 something found, 2 usage or read error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


def _casts(text: str) -> tuple[str, ...]:
    from .casts import parse_cast

    if text.lower() in ("", "none"):
        return ()
    try:
        return parse_cast(tuple(t.strip() for t in text.split(",") if t.strip()))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {v}")
    return v


def _nonnegative(text: str) -> int:
    return 0 if text.strip() == "0" else _positive(text)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(
        prog="fastfinite",
        description="Find NaN, inf and cast overflows in large arrays, in one streaming pass.",
        epilog="Exit codes: 0 nothing found, 1 something found, 2 usage or read error.",
    )
    p.add_argument("--version", action="version", version=f"fastfinite {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser(
        "scan",
        help="scan an array file and print what was found",
        description="Scan PATH (a .npy file) and print a summary.",
    )
    s.add_argument("path", metavar="PATH", help="a .npy file")
    s.add_argument(
        "--cast",
        type=_casts,
        default=("float32",),
        metavar="TARGETS",
        help="comma-separated cast targets to check: float32, float16, bfloat16, "
        "or none (default: float32)",
    )
    s.add_argument(
        "--max-locations",
        type=_nonnegative,
        default=100,
        metavar="N",
        help="positions recorded per kind (default: 100)",
    )
    s.add_argument(
        "--workers",
        type=_positive,
        default=None,
        metavar="N",
        help="threads (default: every core for large input)",
    )
    s.add_argument(
        "--fail-fast", action="store_true", help="stop at the first region with a non-finite value"
    )
    s.add_argument(
        "--on-error",
        choices=("raise", "report"),
        default="raise",
        help="unreadable chunk: stop with exit code 2 (raise), or report it and "
        "scan the rest (report)",
    )
    prog = s.add_mutually_exclusive_group()
    prog.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show a progress bar (default: when stderr is a terminal)",
    )
    prog.add_argument(
        "--no-progress", dest="progress", action="store_false", help="never show a progress bar"
    )
    s.add_argument(
        "--json", metavar="FILE", help="also write the report as JSON to FILE ('-' for stdout)"
    )

    d = sub.add_parser(
        "demo",
        help="write a demo dataset with planted problems and scan it",
        description="Write a demo dataset with planted problems and scan it.",
    )
    d.add_argument(
        "--dir",
        metavar="DIR",
        default=None,
        help="where to write the data (default: a fresh temporary directory)",
    )
    return p


def _error(msg: str) -> int:
    print(f"fastfinite: error: {msg}", file=sys.stderr)
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    from .errors import FastFiniteError

    try:
        if args.command == "scan":
            return _scan(args)
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(args.dir)
    except FastFiniteError as e:
        return _error(str(e))
    except OSError as e:
        return _error(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))
    except KeyboardInterrupt:
        return _error("interrupted")
    return EXIT_ERROR


def _scan(args: argparse.Namespace) -> int:
    from .api import scan

    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    report = scan(
        args.path,
        cast=args.cast,
        max_locations=args.max_locations,
        workers=args.workers,
        progress=progress,
        fail_fast=args.fail_fast,
        on_error=args.on_error,
    )
    print(report)
    if args.json:
        text = report.to_json()
        if args.json == "-":
            print(text)
        else:
            with open(os.fspath(args.json), "w") as f:
                f.write(text + "\n")
    return EXIT_OK if report.ok else EXIT_FOUND
