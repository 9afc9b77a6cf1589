"""Thread pools started once per process: starting one costs about as much as scanning a few
megabytes. A scan's members, its regions (``bounded_map``) and the parts a region is split into
(``parts.in_parts``, ``PartedScan``) have a pool each, because a region's task waits on its parts: one pool for
both could fill with regions that wait.

Their threads compute with NumPy's floating-point errors ignored (``quiet_numpy``): the twins
and passes meet overflow and invalid operations on purpose (the data's), and a caller's
``np.seterr(all="raise")`` or ``-W error`` must not turn the scan of bad data into a
crash."""

from __future__ import annotations

import gc
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TypeVar

import numpy as np

_pools: dict[str, tuple[ThreadPoolExecutor, int]] = {}
_lock = threading.Lock()

T = TypeVar("T")
R = TypeVar("R")


def shared_pool(kind: str, threads: int) -> ThreadPoolExecutor:
    """The pool of ``kind`` ("region" or "part"), with at least ``threads`` threads."""
    with _lock:
        pool, size = _pools.get(kind, (None, 0))
        if pool is None or size < threads:
            if pool is not None:  # what it runs finishes; new work goes to the larger one
                pool.shutdown(wait=False)
            pool = ThreadPoolExecutor(
                threads, thread_name_prefix=f"fastfinite-{kind}", initializer=quiet_numpy
            )
            _pools[kind] = (pool, threads)
        return pool


def bounded_map(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """``map(fn, items)`` in order, on ``workers`` threads of the shared pool, at most
    ``2 * workers`` in flight."""
    if workers <= 1:
        yield from map(fn, items)
        return
    pool = shared_pool("region", workers)
    pending: deque = deque()
    interrupted = False
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:  # stopped early: nothing of this scan runs on after it returns
        for f in pending:
            f.cancel()
        if not interrupted:  # Ctrl-C: not waiting for a read that may hang
            wait(pending)


def quiet_numpy() -> None:
    """NumPy's floating-point errors ignored in this thread (its own error state)."""
    np.seterr(all="ignore")


def _forget_pools() -> None:
    """In a forked child the pools' threads do not exist: new pools are started when needed."""
    global _lock
    _pools.clear()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)


@contextmanager
def collector_paused() -> Iterator[None]:
    """CPython's cyclic garbage collector paused (and started again if it ran before):
    for loops that make tens of thousands of long-lived objects and no cycles (a set's
    members, their reports), during which it would walk every object of the process again
    and again (a third of the time of a set of 10,000 small files)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
