"""``fastfinite demo``: build a training set with planted problems, scan it, check the finds.

The data: a Zarr store ``train.zarr`` holding ``images``, (samples, 64, 64) float64, about
1 GB, with a few corrupted samples (NaN, +inf, -inf), a constant feature (pixel (0, 0) is
always 0.5), a blank sample, values that overflow float32, and one chunk never written. It
is scanned per sample (``by=0``, with the errstate replay) and per feature (``by=(1, 2)``);
``report.json`` and ``report.png`` land beside it. A second run reuses the data.
"""

from __future__ import annotations

import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .api import scan

SIDE = 64
CHUNK_SAMPLES = 256


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
    """Write (or reuse) ``train.zarr`` in ``directory``; return what was planted."""
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

    def write(c: int) -> None:
        if c != plan["unwritten_chunk"]:
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

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(write, range(nchunks)))
    if bar is not None:
        bar.close()
    a.attrs["planted"] = plan
    return {"path": path, "planted": plan, "reused": False}


def run_demo(directory: str | None = None, size_mb: int = 1024, progress: bool = True) -> int:
    """Build the demo data, scan it, print the report, write report.json and report.png.

    Returns 0 when every planted problem was found, else 1.
    """
    if directory is None:
        directory = tempfile.mkdtemp(prefix="fastfinite-demo-")
    os.makedirs(directory, exist_ok=True)
    demo = make_demo_data(directory, size_mb, progress)
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
    with open(json_path, "w") as fh:
        fh.write(report.to_json() + "\n")
    print(f"\nreport written to {json_path}")
    try:
        png = report.plot(os.path.join(directory, "report.png"), also=[features])
        print(f"picture written to {png}")
    except Exception as e:  # matplotlib missing: the demo still works
        print(f"no picture: {e}")
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
    if missed:
        print(f"demo: planted problems not found: {missed}")
        return 1
    print(
        "demo: every planted problem was found: NaN, +inf, -inf, a float32 overflow, a blank "
        "sample, a constant feature"
        + (", an unwritten chunk" if plan["unwritten_chunk"] is not None else "")
        + "."
    )
    print(json.dumps({"bad_samples": report.bad_slices()[:20]}))
    return 0
