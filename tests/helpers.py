"""Comparison of a ScanReport with the NumPy oracle (``fastfinite.reference``)."""

from __future__ import annotations

import math
import os
import select
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager

import numpy as np

from fastfinite import reference


def assert_one_line_error(r, *words: str) -> None:
    """A CLI run (``subprocess.run`` result) failed as a user should see it: exit 2 and one
    line on stderr, no traceback, holding each of ``words``."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def assert_matches_oracle(report, x, cast=("float32",), max_locations=100, rtol=1e-9):
    ref = reference.scan(x, cast=cast, max_locations=max_locations)
    got = report.counts()
    assert got == ref["counts"], (got, ref["counts"])
    assert {t: (r.overflow, r.underflow) for t, r in report.cast.items()} == ref["cast"]
    for kind, idx in ref["locations"].items():
        assert [loc.index for loc in report.locations_of(kind)] == idx, kind
    flat = [np.ravel_multi_index(loc.index, x.shape) if x.ndim else 0 for loc in report.locations]
    assert flat == sorted(flat)
    stats = ref["stats"]
    assert report.count == stats["count"]
    if stats["count"]:
        assert report.min == stats["min"]
        assert report.max == stats["max"]
        # the oracle's mean and std are those of the scaled values: finite for any finite
        # data, as the report's must be (a sum's rounding is relative to its terms)
        scale = max(abs(stats["min"]), abs(stats["max"]), 1e-300)
        assert math.isclose(report.mean, stats["mean"], rel_tol=rtol, abs_tol=scale * 1e-12)
        assert math.isclose(report.std, stats["std"], rel_tol=1e-7, abs_tol=scale * 1e-7)
    else:
        assert math.isnan(report.mean) and math.isnan(report.min)


@contextmanager
def twin_max(values: int):
    """Scans inside use the NumPy twin for blocks of at most ``values`` values (the documented
    ``FASTFINITE_NUMPY_TWIN_MAX``); for hypothesis tests, which cannot take monkeypatch."""
    saved = os.environ.get("FASTFINITE_NUMPY_TWIN_MAX")
    os.environ["FASTFINITE_NUMPY_TWIN_MAX"] = str(values)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["FASTFINITE_NUMPY_TWIN_MAX"]
        else:
            os.environ["FASTFINITE_NUMPY_TWIN_MAX"] = saved


@contextmanager
def calls_of(name: str, module: str = ""):
    """Count the calls of Python functions named ``name`` (in a file ending with ``module``)
    in this thread: a profiler, the function itself is not replaced."""
    seen = [0]

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_name == name and code.co_filename.endswith(module):
            seen[0] += 1

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


_PEAK_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, fastfinite, fastfinite.compute.dispatch
    def hwm():  # peak resident set (kB) of this process image; ru_maxrss keeps the parent's
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    {setup}
    with fastfinite.compute.dispatch.using("kernels"):  # numba's kernels loaded: not the scan's
        for dt in (np.float32, np.float64):
            fastfinite.scan(np.zeros(1 << 17, dt))
    base = hwm()
    r = fastfinite.scan(sys.argv[1], {kwargs})
    print(hwm() - base, r.nan, r.count)
    """
)


def peak_growth(target: str, kwargs: str = "", setup: str = "") -> tuple[int, int, int]:
    """Scan ``target`` in a fresh process: ``(peak RSS growth in kB, nan, count)``. ``setup``
    runs before the baseline (imports whose memory is not the scan's)."""
    code = _PEAK_CHILD.format(setup=setup, kwargs=kwargs)
    out = subprocess.run(
        [sys.executable, "-c", code, target],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout.split()
    return int(out[0]), int(out[1]), int(out[2])


def run_cli(*args, timeout: float = 300, cwd=None, env=None, fresh: bool = False):
    """``fastfinite ARGS`` as a user runs it: a ``CompletedProcess`` (exit code, stdout and
    stderr as text).

    By default in this process: ``fastfinite.cli.main``, the function the console script
    runs, with its output captured, ``env`` (a whole environment) as ``os.environ`` and
    ``cwd`` as the working directory for the run, warnings printed as a fresh process
    prints them, and what the command changes of the process's state put back. A fresh
    interpreter costs a second (NumPy, Numba and the kernels loaded again) on every call.
    With ``fresh`` (or ``FASTFINITE_TEST_CLI=process`` for all): ``python -m fastfinite`` in
    a process of its own that imports this checkout, ended after ``timeout`` seconds. What
    only a process shows (Ctrl-C, a terminal, the console script, a cold cache, a hung read)
    is tested in processes."""
    args = [str(a) for a in args]
    if fresh or os.environ.get("FASTFINITE_TEST_CLI") == "process":
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ if env is None else env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        return subprocess.run(
            [sys.executable, "-m", "fastfinite", *args],
            capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
        )  # fmt: skip
    return _run_cli_here(args, cwd, env)


# CPython's warning filters in a fresh process (``python -W`` unset), last applied first
_FRESH_FILTERS = [
    ("ignore", ResourceWarning),
    ("ignore", ImportWarning),
    ("ignore", PendingDeprecationWarning),
    ("ignore", DeprecationWarning),
]


def _run_cli_here(args: list[str], cwd, env) -> subprocess.CompletedProcess:
    import io
    import logging
    import tempfile
    import traceback
    import warnings

    from fastfinite import cli

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved = sys.stdout, sys.stderr, sys.unraisablehook, tempfile.tempdir
    loggers = [logging.getLogger(), *logging.root.manager.loggerDict.values()]
    levels = [(g, g.level) for g in loggers if isinstance(g, logging.Logger)]

    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
            tempfile.tempdir = None  # found again from TMPDIR, as a new process would
        if cwd is not None:
            os.chdir(cwd)
        sys.stdout, sys.stderr = out, err
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category in _FRESH_FILTERS:
                warnings.filterwarnings(action, category=category)
            warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
            warnings.showwarning = show
            try:
                code = cli.main(args)
            except SystemExit as e:  # argparse's errors and --help
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if isinstance(e.code, str):
                    err.write(e.code + "\n")
            except Exception:  # what a process would print before it died
                err.write(traceback.format_exc())
                code = 1
    finally:
        sys.stdout, sys.stderr, sys.unraisablehook, tempfile.tempdir = saved
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for logger, level in levels:
            logger.setLevel(level)
        known = {id(g) for g, _ in levels}
        for g in logging.root.manager.loggerDict.values():  # made during the run (distributed)
            if isinstance(g, logging.Logger) and id(g) not in known:
                g.setLevel(logging.NOTSET)
    text = [b.buffer.getvalue().decode("utf-8", "replace") for b in (out, err)]
    return subprocess.CompletedProcess(["fastfinite", *args], code, text[0], text[1])


def read_terminal(master: int, timeout: float) -> bytes:
    """What a process wrote to the pseudo-terminal whose master end is ``master``, until it
    closed its side or ``timeout`` seconds passed; ``master`` is closed."""
    out = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not select.select([master], [], [], 1)[0]:
            continue
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return out
