"""Reports people read and machines parse: JSON, merging, the summary, exit codes, pictures,
and the demo.

Part: ``fastfinite/report/`` (model, merge, render, plot) and ``fastfinite/demo.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite import ScanReport, merge_reports

from .helpers import run_cli


def _fields_equal(a, b):
    """Every dataclass field equal, NaN equal to NaN, arrays elementwise."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b)
        for f in dataclasses.fields(a):
            _fields_equal(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float):
        assert (math.isnan(a) and math.isnan(b)) or a == b, (a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _fields_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b) and type(a) is type(b), (a, b)
        for x, y in zip(a, b):
            _fields_equal(x, y)
    else:
        assert a == b, (a, b)


def _rich_report(tmp_path):
    x = np.random.default_rng(0).standard_normal((24, 6)).astype(np.float32)
    x[2, 3] = np.nan
    x[5, 1] = np.inf
    x[7, :] = 3.0
    path = str(tmp_path / "a.zarr")
    a = zarr.create_array(store=path, shape=x.shape, chunks=(4, 3), dtype="f4", fill_value=np.nan)
    a[:20] = x[:20]
    with open(os.path.join(path, "c", "1", "1"), "wb") as f:
        f.write(b"garbage" * 5)
    return fastfinite.scan(
        path, by=0, localize=True, on_error="report", cast=("float32", "float16", "bfloat16")
    )


def test_json_round_trip_of_every_field(tmp_path):
    r = _rich_report(tmp_path)
    assert r.missing_chunks and r.localized and r.slices is not None and r.regions
    assert any(f.kind == "unreadable_chunk" for f in r.findings)
    text = r.to_json()
    d = json.loads(text)
    assert d["schema"] == "fastfinite.report/2"
    back = ScanReport.from_json(text)
    _fields_equal(r, back)
    assert back.to_json() == text
    group = fastfinite.scan(str(tmp_path / "a.zarr"), on_error="report")
    _fields_equal(group, ScanReport.from_json(group.to_json()))
    with pytest.raises(ValueError, match="schema"):
        ScanReport.from_json('{"schema": "something/else"}')


@pytest.mark.parametrize("by", [None, 0, -1])
def test_merge_equals_scan_of_concatenation(by):
    rng = np.random.default_rng(1)
    parts = [rng.standard_normal((n, 5, 3)) * 10 for n in (7, 1, 12)]
    parts[0][3, 1, 2] = np.nan
    parts[1][0, 0, 0] = np.inf
    parts[2][11, 4, 2] = 1e100
    parts[2][5, :, :] = 2.0
    whole = fastfinite.scan(np.concatenate(parts), by=by, max_locations=3)
    merged = merge_reports([fastfinite.scan(p, by=by, max_locations=3) for p in parts])
    assert merged.shape == whole.shape and merged.counts() == whole.counts()
    assert merged.locations == whole.locations
    assert merged.count == whole.count and merged.min == whole.min and merged.max == whole.max
    assert merged.mean == pytest.approx(whole.mean, rel=1e-12)
    assert merged.std == pytest.approx(whole.std, rel=1e-12)
    assert [(f.kind, f.where) for f in merged.findings] == [
        (f.kind, f.where) for f in whole.findings
    ]
    if by is not None:
        for name in ("nan", "posinf", "count"):
            np.testing.assert_array_equal(getattr(merged.slices, name), getattr(whole.slices, name))
        np.testing.assert_allclose(merged.slices.std, whole.slices.std, rtol=1e-12)
        assert merged.bad_slices() == whole.bad_slices()


def test_merge_of_different_shapes_is_a_group():
    a = fastfinite.scan(np.array([1.0, np.nan]))
    b = fastfinite.scan(np.ones((2, 2)))
    m = merge_reports([a, b])
    assert m.nan == 1 and len(m.arrays) == 2 and not m.ok
    with pytest.raises(ValueError):
        merge_reports([])


def test_summary_fits_100_columns(tmp_path):
    r = _rich_report(tmp_path)
    text = str(r)
    assert all(len(line) <= 100 for line in text.splitlines())
    for needle in (
        "nan",
        "cast to float16",
        "missing chunks",
        "unreadable chunk",
        "slices with findings",
        "errstate replay",
        "mean",
    ):
        assert needle in text
    from fastfinite.report.render import render

    colored = render(r, color=True)
    assert "\033[" in colored and "\033[" not in text


def run(*args, cwd=None):
    return run_cli(*args, cwd=cwd)


def test_cli_exit_codes_fail_on_quiet_and_merge(tmp_path):
    x = np.random.default_rng(2).standard_normal((50, 4))
    x[3, 2] = 1e100  # a float32 cast risk, no NaN
    np.save(tmp_path / "risk.npy", x)
    y = x.copy()
    y[4, 0] = np.nan
    np.save(tmp_path / "nan.npy", y)
    r = run("scan", str(tmp_path / "risk.npy"))
    assert r.returncode == 1
    r = run("scan", str(tmp_path / "risk.npy"), "--fail-on", "nonfinite")
    assert r.returncode == 0  # only non-finite values count as failure
    r = run("scan", str(tmp_path / "nan.npy"), "--fail-on", "nonfinite", "--quiet")
    assert r.returncode == 1 and r.stdout == ""
    r = run("scan", str(tmp_path / "nan.npy"), "--fail-on", "overflow:float32,missing_chunk")
    assert r.returncode == 1
    r = run("scan", str(tmp_path / "nan.npy"), "--fail-on", "missing_chunk")
    assert r.returncode == 0
    for name in ("risk", "nan"):
        assert (
            run(
                "scan",
                str(tmp_path / f"{name}.npy"),
                "--json",
                str(tmp_path / f"{name}.json"),
                "-q",
            ).returncode
            == 1
        )
    r = run(
        "merge",
        str(tmp_path / "risk.json"),
        str(tmp_path / "nan.json"),
        "--json",
        str(tmp_path / "m.json"),
    )
    assert r.returncode == 1 and "(100, 4)" in r.stdout
    m = ScanReport.from_json((tmp_path / "m.json").read_text())
    assert m.nan == 1 and m.cast["float32"].overflow == 2 and m.shape == (100, 4)
    assert [loc.index for loc in m.locations_of("nan")] == [(54, 0)]
    clean = np.ones((3, 3))
    np.save(tmp_path / "clean.npy", clean)
    run("scan", str(tmp_path / "clean.npy"), "--json", str(tmp_path / "c.json"))
    assert run("merge", str(tmp_path / "c.json"), str(tmp_path / "c.json")).returncode == 0
    r = run("merge", str(tmp_path / "nope.json"))
    assert r.returncode == 2 and "nope.json" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "bad.json").write_text("{}")
    r = run("merge", str(tmp_path / "bad.json"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_plot_png(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.image as mpimg

    r = _rich_report(tmp_path)
    path = r.plot(str(tmp_path / "r.png"))
    img = mpimg.imread(path)
    assert os.path.getsize(path) > 20_000
    assert img.shape[0] > 300 and img.shape[1] > 600
    rgb = img[..., :3]
    assert (rgb < 0.95).any(axis=-1).mean() > 0.02  # not a blank canvas
    reddish = (rgb[..., 0] > 0.6) & (rgb[..., 1] < 0.4) & (rgb[..., 2] < 0.4)
    assert reddish.any()  # the problems are drawn
    x = np.zeros((40, 30, 20))
    x[5, 6, 7] = np.nan
    out = tmp_path / "cli.png"
    np.save(tmp_path / "x.npy", x)
    assert (
        run(
            "scan", str(tmp_path / "x.npy"), "--plot", str(out), "--plot-axes", "1,2", "-q"
        ).returncode
        == 1
    )
    assert out.stat().st_size > 10_000


def test_demo_small_and_reused(tmp_path):
    r = run("demo", "--dir", str(tmp_path), "--size-mb", "16", "--no-progress", "--keep")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every planted problem was found" in r.stdout
    assert (tmp_path / "report.json").exists()
    assert ScanReport.from_json((tmp_path / "report.json").read_text()).missing_chunks == 1
    r = run("demo", "--dir", str(tmp_path), "--size-mb", "16", "--no-progress")
    assert r.returncode == 0 and "demo data reused" in r.stdout
