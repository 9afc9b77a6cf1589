"""The same scans on two commits of fastfinite, alternated in one run: a refactoring's
before/after record (issue 43: "speed unchanged").

Each commit is checked out into a temporary git worktree; each case runs in a fresh process
importing that tree (its kernels compiled once into a cache of its own before timing), best
of ``--repeat`` in the process, and the processes alternate between the commits ``--rounds``
times; the table gives each commit's best over the rounds and the ratio after / before.

The cases: a 1 GB float32 array in RAM (plain, ``by=0``, ``by=-1`` of its (2.5e6, 100) view,
and of (1e5, 1000)), and a 1 GB float32 Zarr store on disk (in the page cache) plain and
``by=0``.

    python benchmarks/ab_commits.py BEFORE [AFTER] [--rounds 2] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CASES = {  # name -> (data, scan arguments)
    "RAM 1 GB plain": ("ram", {}),
    "RAM (2.5e6, 100) by=0": ("ram", {"by": 0}),
    "RAM (2.5e6, 100) by=-1": ("ram", {"by": -1}),
    "RAM (1e5, 1000) by=0": ("wide", {"by": 0}),
    "RAM (1e5, 1000) by=-1": ("wide", {"by": -1}),
    "Zarr 1 GB plain": ("store", {}),
    "Zarr 1 GB by=0": ("store", {"by": 0}),
}

CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import fastfinite
assert fastfinite.__file__.startswith(sys.argv[1]), fastfinite.__file__
cases, store, repeat, n = json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rng = np.random.default_rng(0)
x = rng.standard_normal(n, dtype=np.float32)
x[-1000] = np.nan
data = {"ram": x.reshape(-1, 100), "wide": x[: n // 2500 * 1000].reshape(-1, 1000), "store": store}
fastfinite.compile()  # every kernel, so that no scan timed runs on the twins meanwhile
out = {}
for name, (what, kw) in cases.items():
    fastfinite.scan(data[what], **kw)  # compiled (or loaded) and warm
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fastfinite.scan(data[what], **kw)
        best = min(best, time.perf_counter() - t)
    out[name] = best
print(json.dumps(out))
"""


def worktree(commit: str, where: str, i: int) -> str:
    """A checkout of ``commit`` under ``where`` (a git worktree, detached), the ``i``-th."""
    path = os.path.join(where, f"tree{i}")
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", path, commit], check=True)  # fmt: skip
    return path


def make_store(path: str, n: int) -> None:
    import numpy as np
    import zarr

    x = np.random.default_rng(1).standard_normal((n // 100, 100), dtype=np.float32)
    x[-3, 5] = np.inf
    zarr.create_array(store=path, data=x, chunks=(min(100_000, n // 1000), 100))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before", help="a commit (the older)")
    p.add_argument("after", nargs="?", default="HEAD", help="a commit (default HEAD)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--write", action="store_true", help="write RESULTS.md's section")
    p.add_argument("--quick", action="store_true", help="10 MB instead of 1 GB: a smoke run")
    args = p.parse_args()
    n = 2_500_000 if args.quick else 250_000_000
    tmp = tempfile.mkdtemp(prefix="fastfinite-ab-")
    trees: list[str] = []
    try:
        trees = [worktree(c, tmp, i) for i, c in enumerate((args.before, args.after))]
        store = os.path.join(tmp, "x.zarr")
        make_store(store, n)
        best: list[dict[str, float]] = [{}, {}]
        for r in range(args.rounds):
            for i, tree in enumerate(trees):
                env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, f"cache{i}"))
                run = subprocess.run(
                    [sys.executable, "-c", CHILD, tree, json.dumps(CASES), store, str(args.repeat), str(n)],
                    env=env, capture_output=True, text=True, check=True,
                )  # fmt: skip
                got = json.loads(run.stdout.strip().splitlines()[-1])
                for k, v in got.items():
                    best[i][k] = min(v, best[i].get(k, float("inf")))
                print(f"round {r + 1}, {(args.before, args.after)[i]}: " + ", ".join(f"{k} {v:.3f}" for k, v in got.items()), flush=True)  # fmt: skip
        rows = [
            f"| scan | {args.before} (s) | {args.after} (s) | after / before |",
            "| --- | ---: | ---: | ---: |",
        ]
        for k in CASES:
            a, b = best[0][k], best[1][k]
            rows.append(f"| {k} | {a:.3f} | {b:.3f} | {b / a:.2f} |")
        print("\n".join(rows))
        if args.write:
            sys.path.insert(0, HERE)
            from _common import results_section, write_section

            about = (
                f"The same scans on two commits, alternated ({args.rounds} rounds, each case "
                f"best of {args.repeat} in a fresh process per commit and round, best over "
                "the rounds); the store in the page cache."
            )
            write_section("ab_commits.py", results_section("## Before and after a change (issue 43)", rows, about))  # fmt: skip
    finally:
        for tree in trees:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], check=False)  # fmt: skip
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
