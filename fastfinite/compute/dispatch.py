"""THE choice, for each kernel call, of the Numba kernel or its NumPy twin.

No scan waits on the compiler. The first time a scan asks for a group of kernels
(``kernels.GROUPS``) for a dtype, one background thread loads it from Numba's cache, while
the scan goes on with the twins; once the group is ready, every later call takes the
kernels. A group not in the cache is compiled into it by a helper process (``_aside``:
numba's compiler is Python, and in this process it would hold the GIL the twins need
between their NumPy calls), then loaded; with no cache to share, or no helper, it is
compiled here. A twin gives its kernel's bits (``reference.twins``), so a report does not
depend on which ran where. Nothing here imports numba until a group is asked for.

``policy`` (for tests and benchmarks): ``"auto"`` as above; ``"kernels"``: wait for the
kernels; ``"twins"``: never the kernels.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from ..reference import twins

log = logging.getLogger("fastfinite")

POLICIES = ("auto", "kernels", "twins")
policy = "auto"
SLOW_SECONDS = 0.5  # a group not ready after this long is being compiled, not loaded


class _Group:
    """One group of kernels for one dtype: ready, failed, or being prepared."""

    def __init__(self, group: str, dtype: str):
        self.group, self.dtype = group, dtype
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.started: float | None = None
        self.seconds: float | None = None  # how long it took
        self.fresh: bool | None = None  # compiled (not in the cache), once known
        self.began: float | None = None  # when it started, in seconds since the epoch
        self.aside = False  # this process waits for the helper process to compile it
        self.sent = None  # the helper process it was sent to (``_hand_over``)


_groups: dict[tuple[str, str], _Group] = {}
_queue: list[_Group] = []
_lock = threading.Lock()
_wake = threading.Condition(_lock)
_thread: threading.Thread | None = None
_closing = False  # the process is ending: no group is started any more
_aside = None  # the helper process that compiles groups into the cache (``kernels.compilers.HelperCompiler``)
_helpless = False  # no helper process: no cache to share, or none could start
_sending = threading.Lock()


def kernel_dtype(dtype) -> str:
    """The dtype a kernel of data of ``dtype`` (as the kernels see it) is compiled for."""
    dt = np.dtype(dtype)
    return (
        "float32"
        if dt.kind == "f" and dt.itemsize == 4
        else ("float64" if dt.kind == "f" else f"uint{8 * dt.itemsize}")
    )


def _compiler() -> None:
    """The background thread: prepares queued groups, one after another."""
    while True:
        with _lock:
            while not _queue and not _closing:
                _wake.wait()
            if _closing:
                return
            g = _queue[0]
            g.started, g.began = time.perf_counter(), time.time()
        try:
            from .. import kernels
            from ..kernels.compilers import cached

            _hand_over()
            if g.fresh is None:
                g.fresh = not cached(g.group, g.dtype)
            if g.sent is not None:
                with _lock:
                    g.aside = not _closing
                if g.aside:
                    try:
                        g.sent.answer()  # in the cache now
                    except Exception as e:  # noqa: BLE001 - the helper failed: compiled here
                        log.debug("fastfinite: the helper process failed: %s", e)
                with _lock:
                    g.aside = False
                    if _closing:  # the process is ending: nothing more is loaded
                        g.error = RuntimeError("the process ended first")
                        g.ready.set()
                        return
            kernels.prepare(g.group, g.dtype)  # loaded from the cache, or compiled here
        except BaseException as e:  # a kernel that cannot compile: the twins carry on
            g.error = e
            log.warning(
                "fastfinite: the %s kernels for %s did not compile (%s: %s); their NumPy "
                "twins scan instead, with the same results, more slowly",
                g.group, g.dtype, type(e).__name__, e,
            )  # fmt: skip
        g.seconds = time.perf_counter() - g.started
        with _lock:
            _queue.pop(0)
            g.ready.set()


def _hand_over() -> bool:
    """Every queued group not in the cache, sent to the helper process (started on first use:
    Python's and numba's start-up, about half a second). It compiles them into the cache
    one after another, each then loaded from there by this process's thread, while the
    scan's twins keep this process's GIL (numba's compiler is Python); a group already
    cached it only loads, and what it was sent it finishes after this process has ended,
    for the next one. Nothing is sent with no cache to share, nor when the helper cannot
    start (``_helpless``: the groups are compiled here). Returns whether there is a
    helper."""
    global _aside, _helpless
    with _sending:
        if _helpless:
            return False
        try:
            from ..kernels import cache_directory
            from ..kernels.compilers import HelperCompiler, cached

            with _lock:
                todo = [g for g in _queue if g.sent is None]
            if cache_directory() is None:
                _helpless = True
                return False
            for g in todo:
                if g.fresh is None:
                    g.fresh = not cached(g.group, g.dtype)
            todo = [g for g in todo if g.fresh]
            if todo and (_aside is None or _aside.proc.poll() is not None):
                _aside = HelperCompiler()
            for g in todo:
                _aside.send(g.group, g.dtype)
                g.sent = _aside
        except Exception as e:  # noqa: BLE001 - compiled in this process instead
            _helpless = True
            log.debug("fastfinite: no helper process to compile in: %s", e)
            return False
        return True


def _request(group: str, dtype: str) -> _Group:
    """The state of ``group`` for ``dtype``, queued for the background thread when new."""
    global _thread
    key = (group, dtype)
    g = _groups.get(key)
    if g is not None:
        return g
    with _lock:
        g = _groups.get(key)
        if g is None:
            g = _groups[key] = _Group(group, dtype)
            _queue.append(g)
            if _thread is None or not _thread.is_alive():
                _thread = threading.Thread(target=_compiler, name="fastfinite-compile", daemon=True)  # fmt: skip
                _thread.start()
            _wake.notify()
    return g


def _group(name: str) -> str:
    from ..kernels import group_of  # the table alone: no numba

    return group_of(name)


def prepare(group: str, dtype) -> None:
    """Ask for ``group``'s kernels for data of ``dtype`` ahead of a scan (returns at once)."""
    if policy != "twins":
        _request(group, kernel_dtype(dtype))


def wait(group: str, dtype, timeout: float | None = None) -> bool:
    """Prepare ``group`` for ``dtype`` and wait for it: whether its kernels are usable."""
    g = _request(group, kernel_dtype(dtype))
    return g.ready.wait(timeout) and g.error is None


def loaded(group: str, dtype) -> bool:
    """Whether ``group``'s kernels for data of ``dtype`` are ready in this process (asking
    for nothing: small data that may take them when they are there, never loads numba)."""
    if policy != "auto":
        return policy == "kernels"
    g = _groups.get((group, kernel_dtype(dtype)))
    return g is not None and g.ready.is_set() and g.error is None


def pick(name: str, dtype, small: bool = False) -> Callable:
    """Kernel ``name`` for data of ``dtype`` when its group is ready, else its twin (always
    for ``small`` data: numba costs more than it saves there)."""
    if small or policy == "twins":
        return getattr(twins, name)
    g = _request(_group(name), kernel_dtype(dtype))
    if not g.ready.is_set() and policy == "kernels":
        g.ready.wait()
        if g.error is not None:
            raise g.error
    if g.ready.is_set() and g.error is None:
        from .. import kernels

        return getattr(kernels, name)
    return getattr(twins, name)


def is_twin(fn: Callable) -> bool:
    """Whether ``fn`` (from ``pick``) is a NumPy twin rather than a Numba kernel."""
    return getattr(fn, "__module__", None) == twins.__name__


def compiling() -> bool:
    """Whether kernels are being compiled (the first use on this machine): a group asked
    for is not in the cache, or its load from the cache has taken longer than one does."""
    with _lock:
        queued = list(_queue)
    now = time.perf_counter()
    return any(
        g.fresh or (g.fresh is None and g.started is not None and now - g.started > SLOW_SECONDS)
        for g in queued
    )


def in_flight() -> bool:
    """Whether a group is queued or being prepared."""
    with _lock:
        return bool(_queue)


@contextmanager
def using(p: str) -> Iterator[None]:
    """Run with dispatch ``policy`` ``p`` (``POLICIES``)."""
    global policy
    if p not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, not {p!r}")
    was, policy = policy, p
    try:
        yield
    finally:
        policy = was


def _finish_at_exit() -> None:
    """When the process ends: no group is started any more, and the one being compiled here
    is finished (and written to the cache, for the next process; the helper process
    finishes its own group after this one has gone). Stopped in the middle, the
    compiling thread would hold LLVM's lock while the interpreter's last collection needs
    it (a hang at exit)."""
    global _closing
    with _lock:
        _closing = True
        pending = any(g.sent is None for g in _queue)
        _wake.notify_all()
    if pending:  # the helper compiles them for the next process (it outlives this one)
        _hand_over()
    with _sending:
        if _aside is not None and _aside.proc.poll() is None:
            _aside.let_go()
    with _lock:
        g = _queue[0] if _queue and _queue[0].started is not None else None
        if g is not None and g.aside:  # the thread only waits for the helper: let it be
            g = None
    if g is not None:
        g.ready.wait()


def _after_fork() -> None:
    """In a forked child the compiling thread does not exist: groups ready in the parent
    stay ready (their machine code was copied), the others are asked for again."""
    global _lock, _wake, _thread, _closing, _queue, _groups, _aside, _helpless, _sending
    _lock, _sending = threading.Lock(), threading.Lock()
    _wake = threading.Condition(_lock)
    _thread, _closing, _queue, _aside, _helpless = None, False, [], None, False
    _groups = {k: g for k, g in _groups.items() if g.ready.is_set()}


atexit.register(_finish_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
