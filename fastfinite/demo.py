"""``fastfinite demo``: build a training set with planted problems, scan it, check the finds.

The data: a Zarr store ``train.zarr`` holding ``images``, (samples, 64, 64) float64, about
1 GB, with a few corrupted samples (NaN, +inf, -inf), a constant feature (pixel (0, 0) is
always 0.5), a blank sample, values that overflow float32, and one chunk never written. It
is scanned per sample (``by=0``, with the errstate replay) and per feature (``by=(1, 2)``);
``report.json`` and ``report.png`` land beside it. The data this run wrote is removed at the
end, after an error or a Ctrl-C too, unless ``keep``: then a later run in the same directory
reuses it. ``report.json`` leaves out the per-slice statistics (a column of 32768 samples
each: 5.5 MB), unless ``full_report``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .api import scan

SIDE = 64
CHUNK_SAMPLES = 256
SHOWN = 20  # bad samples listed at the end


def _plan(samples: int) -> dict:
    """What to plant, scaled to the number of samples."""
    nchunks = -(-samples // CHUNK_SAMPLES)
    missing = nchunks // 2 if nchunks >= 2 else None
    # planted samples stay out of the unwritten chunk, and apart from each other
    written = [i for i in range(samples) if i // CHUNK_SAMPLES != missing]
    pick = [written[int(len(written) * f)] for f in (0.04, 0.3, 0.55, 0.8, 0.9)]
    return {
        "nan": [pick[0], 7, 9],
        "posinf": [pick[1], 31, 2],
        "neginf": [pick[2], 0, 40],
        "overflow:float32": [pick[3], 12, 12],
        "blank_sample": pick[4],
        "constant_feature": [0, 0],
        "unwritten_chunk": missing,
        "samples": samples,
    }


def make_demo_data(directory: str, size_mb: int = 1024, progress: bool = True) -> dict:
    """Write (or reuse) ``train.zarr`` in ``directory``; return what was planted. Data that
    could not be written whole (an error, Ctrl-C) is removed."""
    import zarr

    path = os.path.join(directory, "train.zarr")
    samples = max(CHUNK_SAMPLES, int(size_mb * 2**20 // (SIDE * SIDE * 8)))
    plan = _plan(samples)
    try:
        existing = zarr.open_array(path, mode="r", path="images") if os.path.exists(path) else None
        if existing is not None and existing.attrs.get("planted") == plan:
            return {"path": path, "planted": plan, "reused": True}
    except Exception:
        existing = None
    try:
        _write(path, samples, plan, progress)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return {"path": path, "planted": plan, "reused": False}


def _write(path: str, samples: int, plan: dict, progress: bool) -> None:
    import zarr

    root = zarr.open_group(path, mode="w")
    a = root.create_array(
        "images",
        shape=(samples, SIDE, SIDE),
        chunks=(CHUNK_SAMPLES, SIDE, SIDE),
        dtype="f8",
        fill_value=np.nan,
        compressors=zarr.codecs.ZstdCodec(level=1),
    )
    nchunks = -(-samples // CHUNK_SAMPLES)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=nchunks, desc="writing demo data", unit="chunk", leave=False)

    stop = threading.Event()  # Ctrl-C: the chunks not yet started are not written

    def write(c: int) -> None:
        if c != plan["unwritten_chunk"] and not stop.is_set():
            lo, hi = c * CHUNK_SAMPLES, min((c + 1) * CHUNK_SAMPLES, samples)
            rng = np.random.default_rng(1000 + c)
            block = rng.standard_normal((hi - lo, SIDE, SIDE))
            block[:, 0, 0] = 0.5  # a constant feature
            for kind, value in (
                ("nan", np.nan),
                ("posinf", np.inf),
                ("neginf", -np.inf),
                ("overflow:float32", 1e100),
            ):
                s, i, j = plan[kind]
                if lo <= s < hi:
                    block[s - lo, i, j] = value
            if lo <= plan["blank_sample"] < hi:
                block[plan["blank_sample"] - lo] = 0.5  # constant: also keeps the feature so
            a[lo:hi] = block
        if bar is not None:
            bar.update(1)

    pool = ThreadPoolExecutor(2)
    try:
        list(pool.map(write, range(nchunks)))
    finally:
        stop.set()
        pool.shutdown(cancel_futures=True)
        if bar is not None:
            bar.close()
    a.attrs["planted"] = plan


def run_demo(
    directory: str | None = None,
    size_mb: int = 1024,
    progress: bool = True,
    *,
    keep: bool = False,
    full_report: bool = False,
) -> int:
    """Build the demo data, scan it, print the report, write report.json and report.png.

    Parameters
    ----------
    directory : str, optional
        Where to write (default: a fresh temporary directory).
    size_mb : int
        The size of the data.
    progress : bool
        Progress bars (the command line shows them on a terminal only).
    keep : bool
        Keep the data this run wrote (a later run in ``directory`` reuses it); by default
        it is removed at the end, after an error or a Ctrl-C too. Data reused from an
        earlier run is never removed.
    full_report : bool
        Write ``report.json`` whole, with the per-slice statistics of every sample (5.5 MB
        for 1 GB); by default they are left out, and the printed line says so.

    Returns
    -------
    int
        0 when every planted problem was found, else 1.
    """
    made = directory is None
    if directory is None:
        directory = tempfile.mkdtemp(prefix="fastfinite-demo-")
    os.makedirs(directory, exist_ok=True)
    data = os.path.join(directory, "train.zarr")
    wrote = not os.path.exists(data)  # until it is known whether the data is reused
    try:
        demo = make_demo_data(directory, size_mb, progress)
        wrote = not demo["reused"]
        code = _scan_demo(demo, directory, progress, full_report)
    finally:
        if wrote and not keep:
            shutil.rmtree(data, ignore_errors=True)
        if made and not os.listdir(directory):
            os.rmdir(directory)
    if wrote and not keep:
        print(f"demo data removed: {data} (--keep keeps it, for a later run to reuse)")
    return code


def _scan_demo(demo: dict, directory: str, progress: bool, full_report: bool) -> int:
    """Scan the demo data, print and write what was found; 0 when every planted problem
    was found, else 1."""
    plan = demo["planted"]
    print(
        f"demo data {'reused' if demo['reused'] else 'written'}: {demo['path']}/images "
        f"({plan['samples']} samples of {SIDE}x{SIDE} float64)"
    )
    images = demo["path"] + "/images"
    report = scan(images, by=0, localize=True, progress=progress)
    print(report)
    features = scan(images, by=(1, 2), progress=progress, max_locations=5)
    print("\nper feature (by=(1, 2)):")
    for f in features.findings:
        if f.kind in ("zero_variance", "near_zero_variance"):
            print(f"  {f.kind} at feature {f.where}: {f.message}")
    json_path = os.path.join(directory, "report.json")
    _write_report(report, json_path, full_report)
    try:
        png = report.plot(os.path.join(directory, "report.png"), also=[features])
        print(f"picture written to {png}")
    except Exception as e:  # matplotlib missing: the demo still works
        print(f"no picture: {e}")
    missed = _missed(plan, report, features)
    if missed:
        print(f"demo: planted problems not found: {missed}")
        return 1
    print(
        "demo: every planted problem was found: NaN, +inf, -inf, a float32 overflow, a blank "
        "sample, a constant feature"
        + (", an unwritten chunk" if plan["unwritten_chunk"] is not None else "")
        + "."
    )
    print(bad_samples_line(report.bad_slices()))
    return 0


def _write_report(report, path: str, full: bool) -> None:
    """``report.json``: the report's ``to_dict()``, but for the per-slice statistics (one
    number per sample and statistic) unless ``full``; the line printed says which."""
    import json

    d = report.to_dict()
    note = ""
    if not full and d.get("slices") is not None:
        d["slices"] = None
        note = (
            f": the per-slice statistics of its {report.slices.nan.size} samples left out, "
            "--full-report writes them"
        )
    with open(path, "w") as fh:
        fh.write(json.dumps(d, indent=2) + "\n")
    print(f"\nreport written to {path} ({os.path.getsize(path) / 1e3:.0f} kB{note})")


def bad_samples_line(bad: list, shown: int = SHOWN) -> str:
    """The bad samples, the first ``shown`` of them, saying how many more there are."""
    more = f" ... and {len(bad) - shown} more bad samples" if len(bad) > shown else ""
    return f"bad samples ({len(bad)}): {', '.join(map(str, bad[:shown]))}{more}"


def _missed(plan: dict, report, features) -> list[str]:
    """The planted problems the scans did not find."""
    found = {(loc.kind, loc.index) for loc in report.locations}
    missed = [
        k
        for k in ("nan", "posinf", "neginf", "overflow:float32")
        if (k, tuple(plan[k])) not in found
    ]
    kinds = {(f.kind, f.where) for f in report.findings}
    if ("zero_variance", (plan["blank_sample"],)) not in kinds:
        missed.append("blank_sample")
    if plan["unwritten_chunk"] is not None and report.missing_chunks != 1:
        missed.append("unwritten_chunk")
    if ("zero_variance", tuple(plan["constant_feature"])) not in {
        (f.kind, f.where) for f in features.findings
    }:
        missed.append("constant_feature")
    return missed
