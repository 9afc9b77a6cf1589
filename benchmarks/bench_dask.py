"""fastfinite's Dask graph against dask's native isnan/isinf on the same LocalCluster, and its
scaling from 1 to 2 workers.

    python benchmarks/bench_dask.py              # a 4 GB float32 Zarr store (zstd, 1 MB chunks)
    python benchmarks/bench_dask.py --quick      # 0.1 GB
    python benchmarks/bench_dask.py --write      # also record benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))

from _common import best_time, machine, results_section, write_section  # noqa: E402
from make_large_zarr import make  # noqa: E402


def main() -> None:

    import dask.array as da
    import numpy as np
    from distributed import Client, LocalCluster

    import fastfinite

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write", action="store_true")
    p.add_argument("--size-gb", type=float, default=None)
    args = p.parse_args()
    size = args.size_gb or (0.1 if args.quick else 4.0)
    repeat = 1 if args.quick else 2
    print(machine())
    root = tempfile.mkdtemp(prefix="fastfinite-bench-dask-")
    path = os.path.join(root, "s.zarr")
    rows = []
    try:
        info = make(path, size, "float32", 1.0, "zstd")
        gb = info["shape"][0] * info["shape"][1] * 4 / 1e9
        x = da.from_zarr(path)
        print(f"store: {gb:.2f} GB float32, zstd, 1 MB chunks, {x.npartitions} chunks")
        results = {}
        for n in (1, 2):
            with (
                LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
                ) as cluster,
                Client(cluster) as client,
            ):
                # load numba on the workers before timing
                fastfinite.scan(np.zeros(1 << 17, np.float32), scheduler=client)

                def ff(client=client):
                    return fastfinite.scan(path, scheduler=client)

                def native(client=client):
                    y = da.from_zarr(path)
                    return client.compute([da.isnan(y).sum(), da.isinf(y).sum()], sync=True)

                results[("fastfinite", n)] = best_time(ff, repeat, warm=False)
                results[("dask", n)] = best_time(native, repeat, warm=False)
                lazy = fastfinite.scan(path, compute=False)
                ntasks = len(dict(lazy.__dask_graph__()))
            print(
                f"  {n} worker(s): fastfinite {results[('fastfinite', n)]:.2f} s, "
                f"dask isnan+isinf {results[('dask', n)]:.2f} s"
            )
        rows.append(
            f"\n{gb:.2f} GB float32 Zarr store (zstd, 1 MB chunks, {x.npartitions} "
            f"chunks); LocalCluster(n_workers=N, threads_per_worker=1); fastfinite's "
            f"graph has {ntasks} tasks (4 MB regions, split_every=8)\n"
        )
        rows.append(
            "| workers | fastfinite (s) | GB/s | dask isnan+isinf (s) | GB/s | "
            "fastfinite speed-up |"
        )
        rows.append("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in (1, 2):
            f, d = results[("fastfinite", n)], results[("dask", n)]
            rows.append(f"| {n} | {f:.2f} | {gb / f:.2f} | {d:.2f} | {gb / d:.2f} | {d / f:.2f}x |")
        scale = results[("fastfinite", 1)] / results[("fastfinite", 2)]
        rows.append(f"\nScaling of fastfinite from 1 to 2 workers: {scale:.2f}x.")
        print(f"  scaling 1 -> 2 workers: {scale:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.write:
        write_section("bench_dask.py", results_section("## Dask cluster (issue 4)", rows))


if __name__ == "__main__":
    main()
