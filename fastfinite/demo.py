"""``fastfinite demo``: write a small dataset with planted problems, scan it, check the finds."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from .api import scan


def make_demo_data(directory: str) -> dict[str, object]:
    """Write ``features.npy``, a float64 training matrix with planted problems.

    Returns what was planted: coordinates of a NaN, a +inf, a -inf and of a value that
    overflows float32.
    """
    rng = np.random.default_rng(2024)
    x = rng.standard_normal((20_000, 64))
    planted = {
        "nan": (1234, 5),
        "posinf": (777, 63),
        "neginf": (15_000, 0),
        "overflow:float32": (4321, 17),
    }
    x[planted["nan"]] = np.nan
    x[planted["posinf"]] = np.inf
    x[planted["neginf"]] = -np.inf
    x[planted["overflow:float32"]] = 1e100  # becomes inf in x.astype(np.float32)
    path = os.path.join(directory, "features.npy")
    np.save(path, x)
    return {"path": path, "planted": planted}


def run_demo(directory: str | None = None) -> int:
    """Write the demo data, scan it, print the report; 0 when every planted problem is found."""
    if directory is None:
        directory = tempfile.mkdtemp(prefix="fastfinite-demo-")
    os.makedirs(directory, exist_ok=True)
    demo = make_demo_data(directory)
    print(f"demo data written to {demo['path']}")
    report = scan(demo["path"])
    print(report)
    found = {(loc.kind, loc.index) for loc in report.locations}
    missed = [k for k, idx in demo["planted"].items() if (k, idx) not in found]
    if missed:
        print(f"demo: planted problems not found: {missed}")
        return 1
    print(
        f"demo: all {len(demo['planted'])} planted problems found "
        "(scan a file of your own: fastfinite scan PATH.npy)"
    )
    return 0
