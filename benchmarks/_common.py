"""Helpers the benchmark scripts share: the machine's description and RESULTS.md sections."""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

import fastfinite

HERE = os.path.dirname(os.path.abspath(__file__))


def _llvm_cpu() -> str:
    """The CPU as Numba compiles for it, and its widest vectors: the kernels' speed differs
    between machines that report the same model name."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    simd = next((f for f in ("avx512f", "avx2", "sse4.2", "neon") if features.get(f)), "")
    return f"{llvm.get_host_cpu_name()}, {simd.upper()}" if simd else llvm.get_host_cpu_name()


def machine() -> str:
    import platform

    import numba

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu} ({_llvm_cpu()}), {os.cpu_count()} cores, {mem:.0f} GiB; "
        f"Python {platform.python_version()}, "
        f"NumPy {np.__version__}, Numba {numba.__version__}, fastfinite {fastfinite.__version__}"
    )


RESULTS = os.path.join(HERE, "RESULTS.md")
_MARKER = re.compile(r"<!-- (?P<owner>.+?): (?P<edge>begin|end) -->")


class MarkerError(ValueError):
    """RESULTS.md's section markers are not in pairs, or a section would break them."""


def _marker(line: str) -> tuple[str, str] | None:
    """``(owner, "begin" | "end")`` when ``line`` is a section marker; an error when it
    looks like one but is not exactly one."""
    m = _MARKER.fullmatch(line.rstrip("\n"))
    if m:
        return m["owner"], m["edge"]
    if line.lstrip().startswith("<!--") and re.search(r": (begin|end) -->", line):
        raise MarkerError(f"not a marker line (a marker stands alone on its line): {line!r}")
    return None


def sections(text: str, name: str = "RESULTS.md") -> dict[str, tuple[int, int]]:
    """Each owner's section in ``text``: the indices of its begin and end marker lines.
    Refuses (``MarkerError``, naming ``name`` and the line) markers that are not in
    pairs: an end without its begin, a begin inside another section, a section without
    its end, an owner twice."""
    found: dict[str, tuple[int, int]] = {}
    open_owner, open_at = None, 0
    for i, line in enumerate(text.splitlines()):
        where = f"{name}, line {i + 1}"
        try:
            mark = _marker(line)
        except MarkerError as e:
            raise MarkerError(f"{where}: {e}") from None
        if mark is None:
            continue
        owner, edge = mark
        if edge == "begin":
            if open_owner is not None:
                raise MarkerError(f"{where}: {owner!r} begins inside {open_owner!r}")
            if owner in found:
                raise MarkerError(f"{where}: {owner!r} has a section already")
            open_owner, open_at = owner, i
        elif open_owner != owner:
            raise MarkerError(f"{where}: {owner!r} ends where it did not begin")
        else:
            found[owner] = (open_at, i)
            open_owner = None
    if open_owner is not None:
        raise MarkerError(f"{name}, line {open_at + 1}: {open_owner!r} has no end")
    return found


def write_section(owner: str, section: str, path: str = RESULTS) -> None:
    """Record ``section`` as ``owner``'s in RESULTS.md: replace what lies between its
    markers (``<!-- owner: begin -->``, ``<!-- owner: end -->``), or append it within new
    ones. Every other byte of the file stays as it was; unbalanced markers anywhere are an
    error (``MarkerError``) and the file is left untouched. ``owner`` is the script and the
    option that makes the section, e.g. ``"bench_memory.py --slices"``."""
    name = os.path.basename(path)
    if not owner or "\n" in owner or "-->" in owner:
        raise MarkerError(f"not a section owner: {owner!r}")
    if any(_marker(line) for line in section.splitlines()):
        raise MarkerError(f"{owner!r}'s section holds a marker line")
    body = section.strip("\n") + "\n"
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    found = sections(text, name)
    if owner in found:
        begin, end = found[owner]
        text = "".join(lines[: begin + 1]) + body + "".join(lines[end:])
    else:
        heading = body.splitlines()[0]
        if heading.startswith("#") and heading in (line.rstrip("\n") for line in lines):
            raise MarkerError(f"{name} has {heading!r} outside {owner!r}'s markers")
        if text and not text.endswith("\n"):
            text += "\n"
        text += f"\n<!-- {owner}: begin -->\n{body}<!-- {owner}: end -->\n"
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def command() -> str:
    """The command that ran this script, as RESULTS.md records it."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), os.path.dirname(HERE))
    return shlex.join(["python", script, *sys.argv[1:]])


def results_section(heading: str, rows: Sequence[str], about: str = "") -> str:
    """A RESULTS.md section as every script writes it: the heading, then the command that
    made it, today's date and the machine, what was measured (``about``), the tables."""
    head = [
        heading,
        "",
        f"- Command: `{command()}`",
        f"- Date: {time.strftime('%Y-%m-%d')}",
        f"- Machine: {machine()}",
        "",
    ]
    text = "\n".join([*head, *([about, ""] if about else []), *rows]).strip("\n") + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def best_time(fn: Callable[[], object], repeat: int, warm: bool = True) -> float:
    """Best wall time of ``repeat`` calls (after one warm-up call: compile, fault pages in)."""
    return best_times({"fn": fn}, repeat, pause=0.0, warm=warm)["fn"]


def best_times(
    fns: dict[str, Callable[[], object]], repeat: int, pause: float = 0.05, warm: bool = True
) -> dict[str, float]:
    """Best wall time of each function over ``repeat`` rounds, the functions called in turn
    within each round (after one warm-up call each, unless not ``warm``): on a shared, noisy
    machine every method then meets the same quiet and busy moments. ``pause`` seconds
    before each call: the OpenMP threads of a ``prange`` kernel keep spinning for a while
    after it returns, and would slow whatever runs next."""
    if warm:
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            time.sleep(pause)
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: min(t) for name, t in times.items()}
