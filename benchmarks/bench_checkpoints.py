"""Checkpoints and shard sets at rest (issue 44), side by side in one run: each case a row of
``CASES`` (a name and the function that measures it).

    python benchmarks/bench_checkpoints.py            # a 2 GB safetensors checkpoint, ...
    python benchmarks/bench_checkpoints.py --quick    # small smoke run (CI)
    python benchmarks/bench_checkpoints.py --case safetensors

safetensors: a checkpoint of a few hundred tensors, float32 and bfloat16 in turn, written
a tensor at a time (never whole in RAM), scanned by ``fastfinite.scan(path)`` against
reading its bytes once from the page cache (``readinto`` 16 MiB at a time) and against
``safetensors.numpy.load_file`` plus ``np.isnan``/``np.isinf`` per tensor; the peak
resident memory of a fresh process scanning it, above its baseline. Each scan's NaN count is
checked against the count planted. With ``--write`` the table goes to benchmarks/RESULTS.md.

npy_dir: a directory of 10,000 small ``.npy`` files, and tar_shards: a set of WebDataset
``.tar`` shards, each scanned by ``fastfinite.scan(directory)`` against opening and reading
each file (each member, through ``tarfile``) once.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable

import ml_dtypes
import numpy as np
from _common import best_times, machine, results_section, write_section

import fastfinite

BF16 = np.dtype(ml_dtypes.bfloat16)


def write_checkpoint(path: str, gb: float, tensors: int) -> int:
    """A safetensors file of about ``gb`` GB in ``tensors`` tensors of shape (rows, 4096),
    float32 and bfloat16 in turn, written one tensor at a time; returns the NaN planted
    (one in every seventh tensor)."""
    cols = 4096
    per = int(gb * 1e9 / tensors)
    header, offset, specs = {}, 0, []
    for i in range(tensors):
        dtype = np.dtype(np.float32) if i % 2 == 0 else BF16
        rows = max(1, per // (cols * dtype.itemsize))
        n = rows * cols * dtype.itemsize
        name = f"model.layers.{i // 4}.{('q', 'k', 'v', 'o')[i % 4]}.weight"
        header[name] = {"dtype": "F32" if dtype == np.float32 else "BF16",
                        "shape": [rows, cols], "data_offsets": [offset, offset + n]}  # fmt: skip
        specs.append((name, dtype, rows))
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(0)
    nan = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for i, (_, dtype, rows) in enumerate(specs):
            x = (rng.standard_normal((rows, cols), np.float32) * 0.02).astype(dtype)
            if i % 7 == 3:
                x[rows // 2, 17] = np.nan
                nan += 1
            f.write(x.tobytes())
    return nan


def read_once(path: str) -> int:
    """Every byte of the file read once (16 MiB at a time into one buffer)."""
    buf = bytearray(16 << 20)
    total = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            total += n
    return total


def load_and_check(path: str) -> int:
    """What a user writes today: load every tensor, then NaN and inf per tensor."""
    from safetensors.numpy import load_file

    bad = 0
    for x in load_file(path).values():
        bad += int(np.isnan(x).sum()) + int(np.isinf(x).sum())
    return bad


PEAK_CHILD = textwrap.dedent(
    """
    import sys, time, numpy as np, fastfinite
    def hwm():  # peak resident set (kB) of this process image
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    fastfinite.scan(np.zeros(1 << 17, np.float32))  # numba loaded before the baseline
    import ml_dtypes
    fastfinite.scan(np.zeros(1 << 17, ml_dtypes.bfloat16))
    base = hwm()
    t0 = time.perf_counter()
    r = fastfinite.scan(sys.argv[1])
    t = time.perf_counter() - t0
    print(base, hwm(), t, r.nan)
    """
)


def case_safetensors(quick: bool, repeat: int) -> list[str]:
    gb, tensors = (0.04, 24) if quick else (2.0, 300)
    rows = []
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        path = os.path.join(d, "model.safetensors")
        nan = write_checkpoint(path, gb, tensors)
        size = os.path.getsize(path)
        print(f"\nsafetensors: {tensors} tensors, {size / 1e9:.2f} GB (float32 and bfloat16)")
        report = fastfinite.scan(path)
        assert report.nan == nan and len(report.arrays) == tensors, (report.nan, nan)
        fns: dict[str, Callable[[], object]] = {
            "read its bytes once (page cache)": lambda: read_once(path),
            "fastfinite.scan(path)": lambda: fastfinite.scan(path),
            "safetensors.numpy.load_file + np.isnan/np.isinf": lambda: load_and_check(path),
        }
        times = best_times(fns, repeat)
        out = subprocess.run([sys.executable, "-c", PEAK_CHILD, path], capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
        base, peak, t_child = int(out[0]), int(out[1]), float(out[2])
    t_read, t_ff = times["read its bytes once (page cache)"], times["fastfinite.scan(path)"]
    rows += [
        f"\n**safetensors, {tensors} tensors, {size / 1e9:.2f} GB, float32 and bfloat16**\n",
        "| method | time (s) | GB/s | fastfinite speed-up |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, t in times.items():
        rows.append(f"| {name} | {t:.3f} | {size / 1e9 / t:.2f} | {t / t_ff:.2f}x |")
        print(f"  {name:50s} {t:8.3f} s  {size / 1e9 / t:6.2f} GB/s")
    above = (peak - base) / 1024
    rows.append(
        f"\nScan at {t_read / t_ff:.2f}x the speed of one read of its bytes; peak resident "
        f"memory of a fresh process scanning it: {above:.0f} MB above its baseline "
        f"({base / 1024:.0f} MB), in {t_child:.2f} s (cold: kernels loaded from the cache)."
    )
    print(f"  scan / read: {t_read / t_ff:.2f}x; peak RSS {above:.0f} MB above the baseline")
    return rows


def write_npy_dir(d: str, files: int, values: int) -> int:
    """``files`` small float32 ``.npy`` files in ``d`` (100 to a folder); returns the NaN
    planted (one in every 97th file)."""
    rng = np.random.default_rng(1)
    nan = 0
    for i in range(files):
        sub = os.path.join(d, f"{i // 100:03d}")
        os.makedirs(sub, exist_ok=True)
        x = rng.standard_normal(values).astype(np.float32)
        if i % 97 == 5:
            x[values // 2] = np.nan
            nan += 1
        np.save(os.path.join(sub, f"{i:06d}.npy"), x)
    return nan


def read_files_once(paths: list[str]) -> int:
    """Open each file and read its bytes once: what any scan of the set must at least do."""
    total = 0
    for p in paths:
        with open(p, "rb") as f:
            total += len(f.read())
    return total


def write_tar_shards(d: str, shards: int, samples: int, values: int) -> int:
    """WebDataset shards: ``samples`` samples a shard, each a float32 ``.npy`` and a
    ``.cls`` label; returns the NaN planted."""
    import io
    import tarfile

    rng = np.random.default_rng(2)
    nan = 0
    for s in range(shards):
        with tarfile.open(os.path.join(d, f"shard-{s:06d}.tar"), "w") as tf:
            for i in range(samples):
                x = rng.standard_normal(values).astype(np.float32)
                if (s * samples + i) % 97 == 5:
                    x[3] = np.nan
                    nan += 1
                for name, data in ((f"{i:06d}.x.npy", _npy(x)), (f"{i:06d}.cls", b"1")):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
    return nan


def _npy(x: np.ndarray) -> bytes:
    import io

    b = io.BytesIO()
    np.save(b, x)
    return b.getvalue()


def read_members_once(paths: list[str]) -> int:
    """Each tar's members read once, in order (``tarfile``)."""
    import tarfile

    total = 0
    for p in paths:
        with tarfile.open(p, "r:") as tf:
            for info in tf:
                total += len(tf.extractfile(info).read())
    return total


def _set_rows(title: str, times: dict, size: int) -> list[str]:
    base, ff = list(times.values())
    rows = [f"\n**{title}**\n", "| method | time (s) | fastfinite is |", "| --- | ---: | ---: |"]
    for name, t in times.items():
        rows.append(f"| {name} | {t:.3f} | {base / ff:.3f}x of it |" if t is ff else
                    f"| {name} | {t:.3f} | - |")  # fmt: skip
        print(f"  {name:50s} {t:8.3f} s")
    rows.append(f"\nThe scan at {base / ff:.3f}x the speed of one read of each (target >= 0.7x).")
    print(f"  scan / read: {base / ff:.3f}x ({size / 1e6:.1f} MB)")
    return rows


def case_npy_dir(quick: bool, repeat: int) -> list[str]:
    files, values = (500, 256) if quick else (10_000, 256)
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        nan = write_npy_dir(d, files, values)
        paths = sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs)
        size = sum(os.path.getsize(p) for p in paths)
        print(f"\nnpy directory: {files} files of {values} float32, {size / 1e6:.1f} MB")
        report = fastfinite.scan(d)
        assert report.nan == nan and len(report.arrays) == files, (report.nan, nan)
        times = best_times(
            {"open and read each file once": lambda: read_files_once(paths),
             "fastfinite.scan(directory)": lambda: fastfinite.scan(d)},
            repeat,
        )  # fmt: skip
    return _set_rows(f"a directory of {files} .npy files of {values} float32", times, size)


def case_tar_shards(quick: bool, repeat: int) -> list[str]:
    shards, samples, values = (4, 250, 256) if quick else (10, 1000, 256)
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        nan = write_tar_shards(d, shards, samples, values)
        paths = sorted(os.path.join(d, f) for f in os.listdir(d))
        size = sum(os.path.getsize(p) for p in paths)
        print(f"\ntar shards: {shards} x {samples} samples, {size / 1e6:.1f} MB")
        report = fastfinite.scan(d)
        assert report.nan == nan and len(report.arrays) == shards * samples, (report.nan, nan)
        times = best_times(
            {"read each member once (tarfile)": lambda: read_members_once(paths),
             "fastfinite.scan(directory of shards)": lambda: fastfinite.scan(d)},
            repeat,
        )  # fmt: skip
    title = f"{shards} tar shards of {samples} samples (.npy of {values} float32 + .cls)"
    return _set_rows(title, times, size)


CASES: dict[str, Callable[[bool, int], list[str]]] = {
    "safetensors": case_safetensors,
    "npy_dir": case_npy_dir,
    "tar_shards": case_tar_shards,
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small files, for a smoke run")
    p.add_argument("--write", action="store_true", help="write benchmarks/RESULTS.md's section")
    p.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases")
    args = p.parse_args()
    repeat = 2 if args.quick else 5
    print(machine())
    rows: list[str] = []
    for name in args.case or CASES:
        rows += CASES[name](args.quick, repeat)
    if args.write:
        about = (
            "Each case beside reading the same bytes once, and beside what a user writes "
            "today; the NaN counts are checked against those planted."
        )
        section = results_section("## Checkpoints and shard sets (issue 44)", rows, about)
        write_section("bench_checkpoints.py", section)


if __name__ == "__main__":
    main()
