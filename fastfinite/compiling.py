"""``fastfinite.compile`` and ``fastfinite compile``: every kernel compiled into Numba's cache
ahead of the first scan, for Docker images, CI caches and cluster images.

The kernels are compiled in groups (``kernels.GROUPS``), each group for the dtypes the data
may take, in as many processes at once as the machine has cores: Numba compiles on one core
at a time. A later process loads them from the cache (milliseconds) instead of compiling
them (seconds). ``MODES`` says which groups each kind of scan needs.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .errors import InvalidArgumentError

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
# seconds a group takes to compile, about (the longest are started first)
COST = {"rows": 1.9, "narrow": 1.8, "cols": 1.8, "finish": 1.7, "flags": 0.7, "merge": 0.5, "scaled": 0.3, "guard": 0.2}  # fmt: skip
# other names for a mode: these scans call the same kernels (other thresholds, values)
ALIASES = {
    "by": "by=0", "by tuples": "by=-1", "cast": "plain", "complex": "plain",
    "integer": "plain", "bfloat16": "narrow", "float8": "narrow",
}  # fmt: skip


@dataclass
class CompileReport:
    """What ``compile`` did: seconds per group and dtype (compiled, or loaded when the
    cache held them), the wall time, where the kernels are cached, and any group that
    failed with its error (its NumPy twins scan in its place)."""

    seconds: dict[tuple[str, str], float] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)
    wall: float = 0.0
    cache: str | None = None
    failed: dict[tuple[str, str], str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{g} {d}: {self.seconds[g, d]:.2f} s" for g, d in self.order if (g, d) in self.seconds]
        lines += [f"{g} {d}: FAILED {e}" for (g, d), e in self.failed.items()]
        where = self.cache or "nowhere (each process compiles again)"
        return "\n".join([*lines, f"{len(self.seconds)} groups in {self.wall:.2f} s; cached in {where}"])  # fmt: skip


def groups_of(modes: Iterable[str] | None = None, dtypes: Iterable[str] = FLOATS) -> list[tuple[str, str]]:  # fmt: skip
    """The ``(group, dtype)`` pairs the ``modes`` (all by default) need for data of
    ``dtypes``, each once, in a stable order."""
    names = list(MODES) if modes is None else [ALIASES.get(m, m) for m in modes]
    bad = [m for m in names if m not in MODES]
    if bad:
        known = ", ".join([*MODES, *ALIASES])
        raise InvalidArgumentError(f"unknown compile mode {bad[0]!r}: one of {known}")
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


_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])  # the parent's fastfinite, wherever it was imported from
from numba import njit
njit(lambda v: v + 1)(1.0)  # numba's own start-up, while the parent looks at its cache
from fastfinite import kernels
def say(*words):  # the parent may have ended: what it sent is compiled all the same
    try:
        print(*words, flush=True)
    except OSError:
        pass
for line in sys.stdin:
    group, dtype = line.split()
    t = time.perf_counter()
    try:
        kernels.prepare(group, dtype)
    except Exception as e:
        say("failed", type(e).__name__, str(e).replace(chr(10), " "))
    else:
        say("done", time.perf_counter() - t)
"""


class _Forked:
    """A process forked from this one (numba already imported) that compiles the groups it
    is sent into the shared cache, one after another. Forked at once, before this process
    compiles anything: a fork taken while another thread held LLVM's lock would leave the
    child waiting for it forever."""

    def __init__(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
        self.pool.submit(int).result()  # the fork, now

    def __call__(self, group: str, dtype: str) -> float:
        return self.pool.submit(_in_this, group, dtype).result()

    def close(self) -> None:
        self.pool.shutdown()


class _Child:
    """A process that compiles the groups it is sent into the shared cache, one after
    another: its start (Python, numba) is paid once, not once a group. (Where a process
    cannot be forked.)"""

    def __init__(self):
        import os

        home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, home], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, bufsize=1,
        )  # fmt: skip

    def __call__(self, group: str, dtype: str) -> float:
        self.send(group, dtype)
        return self.answer()

    def send(self, group: str, dtype: str) -> None:
        """Ask for a group (it is compiled, into the cache, even after this process ends)."""
        self.proc.stdin.write(f"{group} {dtype}\n")
        self.proc.stdin.flush()

    def answer(self) -> float:
        """The seconds the oldest group asked for took, once it is in the cache."""
        answer = self.proc.stdout.readline().split(maxsplit=1)
        if not answer:
            raise RuntimeError(f"the compiling process ended (exit {self.proc.poll()})")
        if answer[0] != "done":
            raise RuntimeError(answer[1] if len(answer) > 1 else "failed")
        return float(answer[1])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()

    def let_go(self) -> None:
        """This process is ending: the helper compiles what it was sent, then ends on its
        own (the end of its input). Not waited for, so not said to be "still running"."""
        try:
            self.proc.stdin.close()
        except OSError:  # it has ended already
            pass
        self.proc.returncode = 0  # Popen would warn at its collection; it is not ours now


def _in_this(group: str, dtype: str) -> float:
    from . import kernels

    t = time.perf_counter()
    kernels.prepare(group, dtype)
    return time.perf_counter() - t


def cached(group: str, dtype: str) -> bool:
    """Whether every kernel of ``group`` for ``dtype`` is in Numba's cache for this CPU
    (read from the cache's index: nothing compiled or loaded)."""
    from numba import typeof

    from . import kernels

    try:
        for name, args in kernels.entries(group, dtype):
            disp = getattr(kernels, name)
            cache = disp._cache
            sig = tuple(typeof(a) for a in args)
            key = cache._index_key(sig, disp.targetctx.codegen())
            if key not in cache._cache_file._load_index():
                return False
        return True
    except Exception:  # noqa: BLE001 - another numba, no cache: compile to be sure
        return False


def compile(  # noqa: A001 - the name the command line and the issue give it
    modes: Iterable[str] | str | None = None,
    dtypes: Iterable[str] | str = FLOATS,
    *,
    processes: int | None = None,
    progress: bool = False,
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

    Returns
    -------
    CompileReport
        Seconds per group, the wall time and where the kernels are cached. This process
        has every group loaded when it returns.
    """
    from . import dispatch
    from .kernels import cache_directory
    from .options import parse_bool, parse_int
    from .parts import default_workers

    progress = parse_bool("progress", progress)
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
    # what the cache holds is loaded here; the rest is compiled by this process and, with
    # a cache to share, by processes beside it (one per other core), started first: their
    # start-up runs while this one reads the cache's index
    workers = max(1, min(processes or default_workers(), len(todo)))
    fresh = [p for p in todo if not cached(*p)]  # (numba imported here: the forks have it)
    forks = sys.platform.startswith("linux") and not dispatch.in_flight()
    helper = _Forked if forks else _Child  # a fork skips Python's and numba's start-up
    helpers = [helper() for _ in range(min(workers, len(fresh)) - 1)] if report.cache else []
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

    try:
        with ThreadPoolExecutor(len(helpers) + 1) as pool:
            for f in [pool.submit(work, run) for run in (_in_this, *helpers)]:
                f.result()
        for pair in todo:  # this process has them all: loaded from the cache just filled
            if pair not in report.failed:
                t = time.perf_counter()
                dispatch.wait(*pair)
                report.seconds.setdefault(pair, time.perf_counter() - t)
                if bar is not None and pair not in fresh:
                    bar.update(1)
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
    report = compile(modes, dtypes, processes=processes, progress=progress)
    print(report)
    return 2 if report.failed else 0

