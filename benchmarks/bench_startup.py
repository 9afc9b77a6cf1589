"""First contact: what a fresh process pays before its first report (issue 41).

Every figure is a fresh process (``python -c``), with an empty Numba cache (cold) or one
``fastfinite compile`` filled (warm), beside numbagg's first calls and NumPy's
``isnan``/``isinf`` sums, ``nanmean`` and ``nanstd`` in the same situation:

- ``fastfinite compile`` of each mode, one dtype and both, and of every mode (the
  compile alone, as it reports it);
- the time to report of ``scan`` for 1e6, 1e8 and 2.5e8 (1 GB) float32 elements in RAM,
  cold and warm, NumPy's and numbagg's for the same array;
- a warm process's ``import fastfinite`` and first scan;
- two fresh Dask worker processes on an empty cache scanning a Zarr store, then another
  store of the same size (the warm scan: no task of the first to reuse).

    python benchmarks/bench_startup.py            # the table (about 5 minutes)
    python benchmarks/bench_startup.py --quick    # a smoke run (CI)
    python benchmarks/bench_startup.py --write    # and record it in RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

from _common import machine, results_section, write_section

MODES = ["plain", "by=0", "by=-1", "localize", "scale", "narrow", "guard"]

MAKE = "x = np.random.default_rng(0).standard_normal({n}, dtype=np.float32); x[12345] = np.nan\n"
CHILD = {
    "fastfinite": "import fastfinite\nt = time.perf_counter()\nr = fastfinite.scan(x{kw})\n",
    "numpy": (
        "t = time.perf_counter()\n"
        "r = (np.isnan(x).sum(), np.isinf(x).sum(), np.nanmean(x), np.nanstd(x))\n"
    ),
    "numbagg": (
        "import numbagg\nt = time.perf_counter()\n"
        "r = (numbagg.nancount(x), numbagg.nanmean(x), numbagg.nanstd(x))\n"
    ),
}


def _scratch() -> tempfile.TemporaryDirectory:
    """A temporary folder (an empty Numba cache, a store) whose removal never fails the run:
    a compile helper a finished child started may still be writing its kernels there
    (it finishes what it was sent after that process ends, for the next one)."""
    return tempfile.TemporaryDirectory(ignore_cleanup_errors=True)


def child(code: str, env: dict, timeout: float = 900) -> dict:
    """Run ``code`` in a fresh process; it prints one JSON line, which is returned."""
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout
    )
    if run.returncode:
        raise RuntimeError(run.stderr.strip().splitlines()[-1] if run.stderr else "failed")
    return json.loads(run.stdout.strip().splitlines()[-1])


def cold_env(cache: str) -> dict:
    return dict(os.environ, NUMBA_CACHE_DIR=cache)


def compile_times(dtypes_per_mode: list[str], modes: list[str] = MODES, every: bool = True) -> list[str]:  # fmt: skip
    """``fastfinite compile`` of each mode (and, with ``every``, of all of them), each on an
    empty cache."""
    rows = ["| `fastfinite compile` (empty cache) | compile (s) | process (s) |", "| --- | ---: | ---: |"]  # fmt: skip
    cases = [(m, d) for m in modes for d in dtypes_per_mode]
    cases += [("all modes", "float32,float64")] if every else []
    for mode, dtypes in cases:
        with _scratch() as cache:
            args = ["--dtype", dtypes] + ([] if mode == "all modes" else ["--mode", mode])
            code = textwrap.dedent(
                f"""
                import json, subprocess, sys, time
                t = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "fastfinite", "compile", "--no-progress", *{args!r}],
                                     capture_output=True, text=True).stdout
                wall = time.perf_counter() - t
                print(json.dumps({{"compile": float(out.split(" groups in ")[1].split(" s")[0]), "wall": wall}}))
                """
            )
            got = child(code, cold_env(cache))
        label = f"{mode} ({dtypes})"
        print(
            f"  compile {label}: {got['compile']:.2f} s ({got['wall']:.2f} s with Python's start)"
        )
        rows.append(f"| {label} | {got['compile']:.2f} | {got['wall']:.2f} |")
    return rows


def report_times(sizes: list[int]) -> list[str]:
    """Time to report in a fresh process: fastfinite cold and warm, NumPy, numbagg cold."""
    rows = [
        "| float32 elements | fastfinite cold (s) | fastfinite warm (s) | NumPy (s) | numbagg cold (s) | fastfinite cold / NumPy |",  # fmt: skip
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in sizes:
        got = {}
        with _scratch() as cache:
            env = cold_env(cache)
            for name in ("numpy", "fastfinite", "numbagg"):
                code = "import json, time, numpy as np\n" + MAKE.format(n=n) + CHILD[name].format(kw="")  # fmt: skip
                code += "print(json.dumps({'s': time.perf_counter() - t}))\n"
                try:
                    got[name] = child(code, env)["s"]
                except RuntimeError as e:  # numbagg not installed
                    print(f"  ({name}: {e})")
                    got[name] = float("nan")
            subprocess.run([sys.executable, "-m", "fastfinite", "compile", "--no-progress", "--mode", "plain", "--dtype", "float32"], env=env, capture_output=True)  # fmt: skip
            code = "import json, time, numpy as np\n" + MAKE.format(n=n) + CHILD["fastfinite"].format(kw="")  # fmt: skip
            got["warm"] = child(code + "print(json.dumps({'s': time.perf_counter() - t}))\n", env)["s"]  # fmt: skip
        ratio = got["fastfinite"] / got["numpy"]
        print(f"  {n:.2g} float32: fastfinite cold {got['fastfinite']:.2f} s, warm {got['warm']:.2f} s; NumPy {got['numpy']:.2f} s; numbagg cold {got['numbagg']:.2f} s")  # fmt: skip
        rows.append(f"| {n:.2g} | {got['fastfinite']:.2f} | {got['warm']:.2f} | {got['numpy']:.2f} | {got['numbagg']:.2f} | {ratio:.2f} |")  # fmt: skip
    return rows


WARM_START = textwrap.dedent(
    """
    import json, time
    t0 = time.perf_counter()
    import numpy as np
    x = np.random.default_rng(0).standard_normal((2000, 100)).astype(np.float32)
    t1 = time.perf_counter()
    import fastfinite
    t2 = time.perf_counter()
    r = fastfinite.scan(x{kw})
    t3 = time.perf_counter()
    print(json.dumps({{"import": t2 - t1, "first scan": t3 - t2}}))
    """
)


def warm_start() -> list[str]:
    """A process with a filled cache: ``import fastfinite`` and its first scan."""
    rows = ["| warm process, (2000, 100) float32 | import (s) | first scan (s) | import + scan (s) |", "| --- | ---: | ---: | ---: |"]  # fmt: skip
    with _scratch() as cache:
        env = cold_env(cache)
        subprocess.run([sys.executable, "-m", "fastfinite", "compile", "--no-progress"], env=env, capture_output=True)  # fmt: skip
        for kw in ("", ", by=0", ", by=-1"):
            best = min((child(WARM_START.format(kw=kw), env) for _ in range(3)), key=lambda d: d["import"] + d["first scan"])  # fmt: skip
            total = best["import"] + best["first scan"]
            print(f"  warm scan(x{kw}): import {best['import']:.3f} s, first scan {best['first scan']:.3f} s")  # fmt: skip
            rows.append(f"| scan(x{kw}) | {best['import']:.3f} | {best['first scan']:.3f} | {total:.3f} |")  # fmt: skip
    return rows


CLUSTER = textwrap.dedent(
    """
    import json, os, sys, time, numpy as np, zarr, fastfinite
    from distributed import Client, LocalCluster
    def main():
        paths = [sys.argv[1] + "-1", sys.argv[1] + "-2"]  # the second scan reads other chunks
        for i, path in enumerate(paths):
            x = np.random.default_rng(i).standard_normal(({rows}, 1000)).astype(np.float32)
            x[77, 7] = np.nan
            zarr.create_array(store=path, data=x, chunks=(500, 1000))
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, Client(cl) as c:
            c.run(lambda: None)
            took = []
            for path in paths:
                t = time.perf_counter(); r = fastfinite.scan(path, scheduler=c); took.append(time.perf_counter() - t)
                assert r.nan == 1, r.nan
        print(json.dumps({{"first": took[0], "second": took[1]}}))
    if __name__ == "__main__":
        main()
    """
)


def cluster(rows: int) -> list[str]:
    """Two fresh worker processes, an empty cache: a store's first scan, then another
    store's of the same size (nothing of the first's tasks to reuse: the warm scan)."""
    with _scratch() as d:
        with open(os.path.join(d, "c.py"), "w") as f:
            f.write(CLUSTER.format(rows=rows))
        run = subprocess.run([sys.executable, os.path.join(d, "c.py"), os.path.join(d, "x.zarr")], env=cold_env(os.path.join(d, "numba")), capture_output=True, text=True, timeout=900)  # fmt: skip
        got = json.loads(run.stdout.strip().splitlines()[-1])
    mb = rows * 1000 * 4 / 1e6
    print(f"  2 fresh dask workers, {mb:.0f} MB Zarr store: first {got['first']:.2f} s, another store {got['second']:.2f} s")  # fmt: skip
    return [
        "| 2 fresh `dask worker` processes, empty cache | first scan (s) | then another store (s) |",
        "| --- | ---: | ---: |",
        f"| {mb:.0f} MB float32 Zarr store | {got['first']:.2f} | {got['second']:.2f} |",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a smoke run (CI)")
    p.add_argument("--write", action="store_true", help="write RESULTS.md's section")
    args = p.parse_args()
    print(machine())
    if args.quick:
        rows = compile_times(["float32"], ["plain"], every=False) + [""] + report_times([1_000_000]) + [""] + cluster(2000)  # fmt: skip
    else:
        rows = compile_times(["float32", "float64"]) + [""]
        rows += report_times([1_000_000, 100_000_000, 250_000_000]) + [""]
        rows += warm_start() + [""] + cluster(100_000)
    if args.write and not args.quick:
        about = (
            "Every figure a fresh process, "
            "with an empty Numba cache (cold) or one `fastfinite compile` filled (warm). "
            "Targets: each mode's compile within 3 s, every mode for both dtypes within 10 "
            "s; a warm process's first scan within 0.3 s of `import fastfinite`; 1 GB "
            "float32 cold: time to report at most NumPy's (`isnan(x).sum()`, "
            "`isinf(x).sum()`, `nanmean`, `nanstd`) in a fresh process."
        )  # fmt: skip
        section = results_section("## First contact (issue 41)", rows, about)
        write_section("bench_startup.py", section)


if __name__ == "__main__":
    main()
