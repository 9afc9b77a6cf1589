"""The processes that compile groups of kernels into Numba's cache (``compiling.compile``
for ``fastfinite compile``; ``dispatch`` while a scan runs on the twins), and whether a group
is there already. No numba at import."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

# what numba imports at its start-up to know whether np.correlate may call BLAS
BLAS = "scipy.linalg.cython_blas"

_HELPER = """
import sys, time
sys.path.insert(0, sys.argv[1])  # the parent's fastfinite, wherever it was imported from
from fastfinite.kernels.compilers import warm_up
warm_up()  # numba's own start-up, while the parent looks at its cache
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


class ForkedCompiler:
    """A process forked from this one (numba already imported) that compiles the groups it
    is sent into the shared cache, one after another. Forked at once, before this process
    compiles anything: a fork taken while another thread held LLVM's lock would leave the
    child waiting for it forever."""

    def __init__(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
        self.pool.submit(int).result()  # the fork, now
        self.pool.submit(warm_up)  # while this process looks at its cache

    def __call__(self, group: str, dtype: str) -> float:
        return self.pool.submit(compile_here, group, dtype).result()

    def close(self) -> None:
        self.pool.shutdown()

    def let_go(self) -> None:
        """Not needed after all: it ends once its start-up is done, not waited for."""
        self.pool.shutdown(wait=False, cancel_futures=True)


class HelperCompiler:
    """A process that compiles the groups it is sent into the shared cache, one after
    another: its start (Python, numba) is paid once, not once a group. (Where a process
    cannot be forked.)"""

    def __init__(self):
        home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HELPER, home], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
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


@contextmanager
def blas_refused() -> Iterator[None]:
    """Numba's start-up (its first compile or cache load, in the block) without SciPy's
    BLAS, in a process that runs kernels and nothing else (a helper, a fork,
    ``fastfinite compile``). Numba imports it then (when SciPy is installed) only to know
    whether its ``np.correlate`` and ``np.convolve`` may call it: half of its start-up
    (0.15 s of 0.3 here), for functions no kernel calls. The import is refused in the
    block, unless SciPy's linear algebra is loaded already (numba then takes its own loop
    for those two functions); importable again after. Never in a user's process."""
    refuse = BLAS not in sys.modules
    if refuse:
        sys.modules[BLAS] = None  # an import of it fails at once, its packages unread
    try:
        yield
    finally:
        if refuse and BLAS in sys.modules and sys.modules[BLAS] is None:
            del sys.modules[BLAS]


def warm_up() -> None:
    """Numba's own start-up (its first compile) in a process that compiles kernels and
    nothing else, without SciPy (``blas_refused``)."""
    with blas_refused():
        from numba import njit

        njit(lambda v: v + 1)(1.0)


def compile_here(group: str, dtype: str) -> float:
    import fastfinite.kernels as kernels

    t = time.perf_counter()
    kernels.prepare(group, dtype)
    return time.perf_counter() - t


def cached(group: str, dtype: str) -> bool:
    """Whether every kernel of ``group`` for ``dtype`` is in Numba's cache for this CPU
    (read from the cache's index: nothing compiled or loaded)."""
    from numba import typeof

    import fastfinite.kernels as kernels

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
