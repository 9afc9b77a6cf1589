"""Make the README's screenshot of the HTML report (``docs/img/html-report.png``).

    python scripts/html_screenshot.py [OUT.png] [--keep-html]

Scans a small Zarr store of training features with planted problems (a NaN, +inf, -inf, a
float32 overflow, a constant feature, an outlier, a chunk never written) per feature, writes
the HTML page beside OUT and photographs it in Debian's headless Chromium
(``/usr/bin/chromium``). The PNG is reduced to 256 colours to stay small (< 200 KB).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = "/usr/bin/chromium"


def make_store(path: str) -> None:
    import zarr

    rng = np.random.default_rng(11)
    x = (10 + 2 * rng.standard_normal((4000, 24))).astype(np.float64)
    x[120, 3] = np.nan
    x[3950, 7] = np.inf
    x[777, 11] = -np.inf
    x[1500, 15] = 1e39  # beyond float32
    x[:, 18] = 0.0  # a constant feature (the unwritten chunk reads 0.0 too)
    x[3333, 21] = 95.0  # an outlier
    z = zarr.create_array(path, shape=x.shape, chunks=(500, 24), dtype="f8", fill_value=0.0)
    for start in range(0, 4000, 500):
        if start != 2500:  # chunk (5, 0) is never written
            z[start : start + 500] = x[start : start + 500]


def main(out: str) -> None:
    sys.path.insert(0, ROOT)
    import fastfinite

    with tempfile.TemporaryDirectory(prefix="fastfinite-shot-") as tmp:
        store = os.path.join(tmp, "features.zarr")
        make_store(store)
        report = fastfinite.scan(store, by=1)
        report.name = "features.zarr"
        page = os.path.join(tmp, "report.html")
        report.to_html(page)
        shot = os.path.join(tmp, "shot.png")
        cmd = [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={os.path.join(tmp, 'profile')}",
            "--hide-scrollbars", "--window-size=1100,1500", f"--screenshot={shot}",
            "file://" + page + "#sort=slices:max_z:descending",
        ]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
        from PIL import Image

        with Image.open(shot) as im:
            im.convert("RGB").quantize(colors=256).save(out, optimize=True)
        if "--keep-html" in sys.argv:  # the page too, beside the PNG
            shutil.copy(page, os.path.splitext(out)[0] + ".html")
    print(f"{out}: {os.path.getsize(out) // 1024} KB")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else os.path.join(ROOT, "docs", "img", "html-report.png"))
