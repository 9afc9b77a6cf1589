"""Helpers the benchmark scripts share: the machine's description and RESULTS.md sections."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

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


def write_section(section: str, heading: str) -> None:
    """Replace (or append) one ``## `` section of RESULTS.md."""
    path = os.path.join(HERE, "RESULTS.md")
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n\n"
    start = text.find(heading)
    if start >= 0:
        end = text.find("\n## ", start + len(heading))
        rest = text[end + 1 :] if end >= 0 else ""
        text = text[:start] + section.rstrip("\n") + "\n" + ("\n" + rest if rest else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


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
