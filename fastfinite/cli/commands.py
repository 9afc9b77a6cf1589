"""What ``scan``, ``merge`` and ``diff`` do with their flags: the checks the flags need
together, the work, what is printed and written, and the exit code."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidArgumentError
from .exits import EXIT_FOUND, EXIT_OK
from .files import read_report, write_bad_samples, write_text, writing
from .grammar import nested_options


def use_color(choice: str = "auto", stream: Any = None) -> bool:
    """Whether to colour what is printed to ``stream`` (stdout by default): ``--color
    always`` or ``never`` as given; ``auto`` by the environment, as no-color.org and
    force-color.org say, then by the terminal. ``NO_COLOR`` set to anything but the empty
    string turns colour off, ``FORCE_COLOR`` so set turns it on where the stream is not a
    terminal (``NO_COLOR`` wins when both are, as in CPython's own colours); otherwise
    colour when the stream is a terminal that is not ``TERM=dumb``."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = sys.stdout if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        tty = False
    return tty and os.environ.get("TERM") != "dumb"


def exit_code(found: set[str], fail_on: frozenset[str] | None) -> int:
    """The exit code for the kinds ``found``: 1 when any is of the ``--fail-on`` kinds
    (by default, of severity error: ``kinds.fails``)."""
    from ..model.kinds import fails

    return EXIT_FOUND if fails(found, fail_on) else EXIT_OK


def finish(report, args: argparse.Namespace) -> int:
    """Print and write the report as asked (with what changed, after a scan with a cache);
    return the exit code. With ``--json -`` the standard output holds the JSON alone."""
    import json

    from ..report.render import render

    to_stdout = args.json == "-"
    changes = report.changes
    if not args.quiet and not to_stdout:
        print(render(report, color=use_color(args.color)))
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
            write_text(args.json, text)
    if getattr(args, "plot", None):
        with writing(args.plot) as path:
            report.plot(path, axes=tuple(args.plot_axes) if args.plot_axes else None)
        if not args.quiet:
            print(f"plot written to {args.plot}", file=sys.stderr if to_stdout else sys.stdout)
    if getattr(args, "html", None):
        with writing(args.html) as path:
            report.to_html(path)
        if not args.quiet:
            print(f"html written to {args.html}", file=sys.stderr if to_stdout else sys.stdout)
    found = changes.new_kinds() if getattr(args, "fail_on_new", False) else report.kinds_found()
    return exit_code(found, args.fail_on)


def merge_main(args: argparse.Namespace) -> int:
    from ..report.merge import merge_reports

    check_outputs(args, [(p, p) for p in args.reports])
    return finish(merge_reports([read_report(p) for p in args.reports]), args)


def diff_main(args: argparse.Namespace) -> int:
    import json

    from ..cache.changes import diff_reports

    check_outputs(args, [(args.old, args.old), (args.new, args.new)])
    changes = diff_reports(read_report(args.old), read_report(args.new))
    text = json.dumps(changes.to_dict(), indent=2) if args.json else ""
    if args.json == "-":
        print(text)
    elif not args.quiet:
        print(changes)
    if args.json and args.json != "-":
        write_text(args.json, text)
    return exit_code(changes.new_kinds(), args.fail_on)


def _scan_on_local_cluster(path: str, n: int, kwargs: dict):
    from distributed import Client, LocalCluster

    from ..api import scan

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
    from ..sources.open import input_roots

    check_outputs(args, input_roots(args.path))


def check_outputs(args: argparse.Namespace, inputs: Sequence[tuple[str, str]]) -> None:
    """Every output flag given (``_add_output``), checked together before any work: no two
    write the same file, and none writes into an input (``inputs``: each as given, and
    the file or folder it is read from): ``InvalidArgumentError`` naming the flag and the
    path."""
    roots = [(path, os.path.realpath(root)) for path, root in inputs]
    seen: dict[str, str] = {}
    for flag, dest in getattr(args, "outputs", ()):
        value = getattr(args, dest, None)
        if not value or value == "-":
            continue
        real = os.path.realpath(value)
        if real in seen:
            raise InvalidArgumentError(f"{seen[real]} and {flag} both write {value}")
        seen[real] = flag
        for path, root in roots:
            if _inside(real, root):
                raise InvalidArgumentError(
                    f"{flag} {value} would write into the input {path}: fastfinite never "
                    "modifies its input"
                )


def scan_main(args: argparse.Namespace) -> int:
    from ..api import scan

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
        storage_options=nested_options(args.storage_options),
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
        write_bad_samples(report, args.bad_samples)
    return finish(report, args)
