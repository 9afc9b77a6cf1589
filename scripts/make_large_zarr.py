"""Write a large Zarr store with planted problems, for benchmarks and trials.

    python scripts/make_large_zarr.py /tmp/big.zarr                    # 4 GB float32, zstd
    python scripts/make_large_zarr.py /tmp/big.zarr --size-gb 1 --codec blosc-lz4 --chunk-mb 16
    python scripts/make_large_zarr.py /tmp/big.zarr --dtype float64    # + float32 overflows

The array is (rows, 1024), chunked along rows to about ``--chunk-mb``. Planted: NaN, +inf
and -inf at known positions, a few chunks left unwritten (they read as the NaN fill value),
values of 1e20 (float16 overflows; their squares overflow float32) and, for float64 data,
1e100 (float32 cast overflows). What was planted is printed as JSON and saved in the store's
attributes (``planted``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

COLS = 1024


def codecs(name: str):
    import zarr

    if name == "zstd":
        return [zarr.codecs.ZstdCodec(level=1)]
    if name == "blosc-lz4":
        return [zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]
    if name == "none":
        return None
    raise SystemExit(f"unknown codec {name!r}: zstd, blosc-lz4 or none")


def make(
    path: str,
    size_gb: float = 4.0,
    dtype: str = "float32",
    chunk_mb: float = 1.0,
    codec: str = "zstd",
    seed: int = 0,
    workers: int = 2,
) -> dict:
    """Write the store; return what was planted."""
    import zarr

    itemsize = np.dtype(dtype).itemsize
    rows = max(1, int(size_gb * 1e9 / (COLS * itemsize)))
    chunk_rows = max(1, int(chunk_mb * 2**20 / (COLS * itemsize)))
    a = zarr.create_array(
        store=path,
        shape=(rows, COLS),
        chunks=(chunk_rows, COLS),
        dtype=dtype,
        fill_value=np.nan,
        compressors=codecs(codec),
        overwrite=True,
    )
    nchunks = math.ceil(rows / chunk_rows)
    rng = np.random.default_rng(seed)
    skip = sorted(
        {int(c) for c in rng.choice(nchunks, size=min(3, max(0, nchunks - 1)), replace=False)} - {0}
    )
    planted = {
        "nan": [[int(rng.integers(rows)), int(rng.integers(COLS))] for _ in range(5)],
        "posinf": [[int(rng.integers(rows)), int(rng.integers(COLS))] for _ in range(3)],
        "neginf": [[int(rng.integers(rows)), int(rng.integers(COLS))] for _ in range(2)],
        "1e20": [[int(rng.integers(rows)), int(rng.integers(COLS))] for _ in range(2)],
        "overflow:float32": (
            [[int(rng.integers(rows)), int(rng.integers(COLS))] for _ in range(4)]
            if itemsize == 8
            else []
        ),
        "unwritten_chunks": [[c, 0] for c in skip],
    }
    values = {
        "nan": np.nan,
        "posinf": np.inf,
        "neginf": -np.inf,
        "1e20": 1e20,
        "overflow:float32": 1e100,
    }
    for kind in list(planted):
        if kind in values:  # positions inside unwritten chunks would be lost: move them
            planted[kind] = [p for p in planted[kind] if p[0] // chunk_rows not in skip]

    def write(c: int) -> None:
        if c in skip:
            return
        lo, hi = c * chunk_rows, min((c + 1) * chunk_rows, rows)
        block = np.random.default_rng(seed + 1 + c).standard_normal((hi - lo, COLS)).astype(dtype)
        for kind, v in values.items():
            for r, col in planted[kind]:
                if lo <= r < hi:
                    block[r - lo, col] = v
        a[lo:hi] = block

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(write, range(nchunks)))
    a.attrs["planted"] = planted
    planted["bad_chunks"] = len({p[0] // chunk_rows for k in values for p in planted[k]})
    planted["seconds"] = round(time.perf_counter() - t0, 1)
    planted["shape"] = [rows, COLS]
    planted["chunks"] = [chunk_rows, COLS]
    return planted


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--size-gb", type=float, default=4.0)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--chunk-mb", type=float, default=1.0)
    p.add_argument("--codec", default="zstd", choices=["zstd", "blosc-lz4", "none"])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    planted = make(args.path, args.size_gb, args.dtype, args.chunk_mb, args.codec, args.seed)
    print(json.dumps(planted))


if __name__ == "__main__":
    main()
