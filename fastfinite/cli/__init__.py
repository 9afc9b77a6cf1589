"""The ``fastfinite`` command: ``scan``, ``merge``, ``diff``, ``compile`` and ``demo``.

Exit codes: 0 no error found (warnings are printed), 1 an error found (with ``--fail-on``,
something of those kinds), 2 usage or read error, 130 interrupted (Ctrl-C).

``grammar``: the flags and how each value is checked; ``commands``: what scan, merge and
diff do with them; ``files``: the reports read back and the files written; ``exits``: the
exit codes.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from ..errors import FastFiniteError
from .commands import diff_main, merge_main, scan_main, use_color
from .exits import EXIT_ERROR, EXIT_FOUND, EXIT_INTERRUPTED, EXIT_OK
from .files import read_report
from .grammar import INPUT_KINDS, build_parser

__all__ = [
    "EXIT_ERROR", "EXIT_FOUND", "EXIT_INTERRUPTED", "EXIT_OK", "INPUT_KINDS", "build_parser",
    "main", "read_report", "use_color",
]  # fmt: skip


def _error(msg: str) -> int:
    print(f"fastfinite: error: {' '.join(str(msg).split())}", file=sys.stderr)
    # what a failed store leaves behind (coroutines whose errors nobody awaited) is not
    # printed at exit: the line above said what broke
    sys.unraisablehook = lambda unraisable: None
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    return EXIT_ERROR


def _interrupted(leave: bool) -> int:
    """Ctrl-C: one line on stderr, exit code 130. From the command line (``leave``) the
    process ends at once (``os._exit``, what was being written already removed): Python's
    own exit would wait for each thread of the scan to finish its region, and a read that
    hangs (a store that does not answer, a dead mount) would keep it from ever ending."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    wipe = "\r\033[K" if sys.stderr.isatty() and os.environ.get("TERM") != "dumb" else ""
    print(f"{wipe}fastfinite: interrupted", file=sys.stderr, flush=True)  # over a bar's line
    if leave:
        os._exit(EXIT_INTERRUPTED)
    return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``argv``, by default ``sys.argv[1:]``); return the exit code."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return _interrupted(leave=argv is None)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "scan":
            return scan_main(args)
        if args.command == "merge":
            return merge_main(args)
        if args.command == "diff":
            return diff_main(args)
        if args.command == "compile":
            from ..compute.compiling import compile_main

            progress = not args.no_progress and sys.stderr.isatty()
            return compile_main(args.mode, list(args.dtype), args.processes, progress)
        if args.command == "demo":
            from ..demo import run_demo

            progress = not args.no_progress and sys.stderr.isatty()
            return run_demo(
                args.dir,
                size_mb=args.size_mb,
                progress=progress,
                keep=args.keep,
                full_report=args.full_report,
            )
    except FastFiniteError as e:
        return _error(str(e))
    except OSError as e:
        return _error(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))
    except Exception as e:  # a failure nothing above names: still one line and exit 2
        if os.environ.get("FASTFINITE_DEBUG"):
            raise
        return _error(f"{type(e).__name__}: {e}")
    return EXIT_ERROR
