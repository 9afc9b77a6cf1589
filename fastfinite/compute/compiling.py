"""``fastfinite.compile`` and ``fastfinite compile``: every kernel compiled into Numba's cache
ahead of the first scan, for Docker images, CI caches and cluster images.

The kernels are compiled in groups (``kernels.GROUPS``), each group for the dtypes the data
may take, in as many processes at once as the machine has cores: Numba compiles on one core
at a time. A later process loads them from the cache (milliseconds) instead of compiling
them (seconds). ``MODES`` says which groups each kind of scan needs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import InvalidArgumentError, did_you_mean
from ..kernels.compilers import ForkedCompiler, HelperCompiler, cached, compile_here

FLOATS = ("float32", "float64")
# what each kind of scan of C-ordered data calls, for data of dtype D (float32 or float64 as
# the kernels see it: float16 and complex64 as float32, integers and complex128 as
# float64); in Fortran order by=0 and by=-1 trade kernels (all modes: both)
MODES: dict[str, tuple[tuple[str, str], ...]] = {
    "plain": (("rows", "D"),),
    "by=0": (("rows", "D"), ("finish", "float64")),
    "by=-1": (("cols", "D"), ("finish", "float64"), ("merge", "float64"), ("flags", "float64")),
    "localize": (("rows", "D"), ("finish", "float64")),  # as the example: by=0 too
    "scale": (("rows", "D"), ("scaled", "D")),
    "narrow": (("narrow", "uint16"), ("narrow", "uint8")),  # bfloat16, float8 data
    "guard": (("guard", "D"),),
}
# seconds a group takes to compile, about (the longest are started first; measured one
# after another in one process, 2026-12-06)
COST = {"rows": 1.8, "narrow": 1.7, "cols": 1.6, "finish": 1.5, "merge": 0.45, "flags": 0.25, "scaled": 0.2, "guard": 0.1}  # fmt: skip
# other names for a mode: these scans call the same kernels (other thresholds, values)
ALIASES = {
    "by": "by=0", "by tuples": "by=-1", "cast": "plain", "complex": "plain",
    "integer": "plain", "bfloat16": "narrow", "float8": "narrow",
}  # fmt: skip


@dataclass
class CompileReport:
    """What ``compile`` did: seconds per group and dtype (compiled, or loaded when the
    cache held them), the groups the cache held already (``cached``: not loaded, when
    ``compile`` was asked not to load), the wall time, where the kernels are cached, and
    any group that failed with its error (its NumPy twins scan in its place)."""

    seconds: dict[tuple[str, str], float] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)
    wall: float = 0.0
    cache: str | None = None
    failed: dict[tuple[str, str], str] = field(default_factory=dict)
    cached: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = []
        for g, d in self.order:
            if (g, d) in self.seconds:
                lines.append(f"{g} {d}: {self.seconds[g, d]:.2f} s")
            elif (g, d) in self.cached:
                lines.append(f"{g} {d}: in the cache already")
        lines += [f"{g} {d}: FAILED {e}" for (g, d), e in self.failed.items()]
        where = self.cache or "nowhere (each process compiles again)"
        done = len(self.seconds) + len([p for p in self.cached if p not in self.seconds])
        return "\n".join([*lines, f"{done} groups in {self.wall:.2f} s; cached in {where}"])


def groups_of(modes: Iterable[str] | None = None, dtypes: Iterable[str] = FLOATS) -> list[tuple[str, str]]:  # fmt: skip
    """The ``(group, dtype)`` pairs the ``modes`` (all by default) need for data of
    ``dtypes``, each once, in a stable order."""
    names = list(MODES) if modes is None else [ALIASES.get(m, m) for m in modes]
    bad = [m for m in names if m not in MODES]
    if bad:
        known = ", ".join([*MODES, *ALIASES])
        hint = did_you_mean(bad[0], [*MODES, *ALIASES])
        raise InvalidArgumentError(f"unknown compile mode {bad[0]!r}{hint}: one of {known}")
    dts = list(dtypes)
    wrong = [d for d in dts if d not in FLOATS]
    if wrong:
        raise InvalidArgumentError(f"dtype must be float32 or float64, not {wrong[0]!r}")
    out: list[tuple[str, str]] = []
    for m in names:
        for group, dt in MODES[m]:
            for d in dts if dt == "D" else (dt,):
                if (group, d) not in out:
                    out.append((group, d))
    return out


def compile(  # noqa: A001 - the name the command line and the issue give it
    modes: Iterable[str] | str | None = None,
    dtypes: Iterable[str] | str = FLOATS,
    *,
    processes: int | None = None,
    progress: bool = False,
    load: bool = True,
) -> CompileReport:
    """Compile the kernels scans call into Numba's cache, for this CPU.

    Parameters
    ----------
    modes : str or iterable of str, optional
        The kinds of scan to compile for (``MODES``: ``"plain"``, ``"by=0"``, ``"by=-1"``,
        ``"scale"``, ``"narrow"``, ``"guard"``, and their aliases ``"localize"``,
        ``"cast"``, ``"complex"``, ``"integer"``...); all of them by default.
    dtypes : str or iterable of str
        ``"float32"`` and/or ``"float64"``: the data's type as the kernels see it.
    processes : int, optional
        Groups compiled at once, each in a process of its own (default: the cores this
        process may use; 1 compiles in this process).
    progress : bool
        Show a progress bar (``True`` or ``False`` only, as every flag of
        :func:`fastfinite.scan`).
    load : bool
        Load every group into this process too (``True``, the default: its next scan
        compiles and loads nothing); ``False`` only fills the cache (``fastfinite
        compile``: the process ends after).

    Returns
    -------
    CompileReport
        Seconds per group, the wall time and where the kernels are cached.
    """
    from ..kernels import cache_directory
    from ..options import parse_bool, parse_int
    from . import dispatch
    from .parts import default_workers

    progress = parse_bool("progress", progress)
    load = parse_bool("load", load)
    processes = parse_int("processes", processes, 1, optional=True)
    modes = [modes] if isinstance(modes, str) else modes
    dtypes = [dtypes] if isinstance(dtypes, str) else dtypes
    t0 = time.perf_counter()
    todo = groups_of(modes, dtypes)
    report = CompileReport(cache=cache_directory())
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="compiling kernels", unit="group", leave=False)
    # what the cache holds is loaded here (``load``); the rest is compiled by this process
    # and, with a cache to share, by processes beside it (one per other core), started
    # first: their start-up (numba's, without SciPy: ``warm_up``) runs while this one reads
    # the cache's index
    workers = max(1, min(processes or default_workers(), len(todo)))
    forks = sys.platform.startswith("linux") and not dispatch.in_flight()
    helper = ForkedCompiler if forks else HelperCompiler  # a fork skips Python's start-up
    helpers: list = []
    try:
        if report.cache is not None:
            helpers = [helper() for _ in range(workers - 1)]
        fresh = [p for p in todo if not cached(*p)]
        report.cached = [p for p in todo if p not in fresh]
        spare, helpers = helpers[max(0, len(fresh) - 1) :], helpers[: max(0, len(fresh) - 1)]
        for h in spare:
            h.let_go()  # no group for it
        queue = sorted(fresh, key=lambda p: -COST.get(p[0], 1.0))  # the longest first

        def work(run) -> None:
            while queue:
                pair = queue.pop(0)
                try:
                    report.seconds[pair] = run(*pair)
                except Exception as e:  # noqa: BLE001 - said in the report; twins scan instead
                    report.failed[pair] = f"{type(e).__name__}: {e}"
                if bar is not None:
                    bar.update(1)

        with ThreadPoolExecutor(len(helpers) + 1) as pool:
            for f in [pool.submit(work, run) for run in (compile_here, *helpers)]:
                f.result()
        for pair in todo if load else ():  # this process has them all, from the cache
            if pair not in report.failed:
                t = time.perf_counter()
                dispatch.wait(*pair)
                report.seconds.setdefault(pair, time.perf_counter() - t)
        if bar is not None:
            bar.update(len(report.cached))
    finally:
        for h in helpers:
            h.close()
        if bar is not None:
            bar.close()
    report.order = todo
    report.wall = time.perf_counter() - t0
    return report


def compile_main(modes: list[str] | None, dtypes: list[str], processes: int | None, progress: bool) -> int:  # fmt: skip
    """``fastfinite compile``: print what was compiled; exit 2 when a group failed."""
    from ..kernels.compilers import blas_refused

    with blas_refused():  # this process runs no user's code, and ends after
        report = compile(modes, dtypes, processes=processes, progress=progress, load=False)
    print(report)
    return 2 if report.failed else 0
