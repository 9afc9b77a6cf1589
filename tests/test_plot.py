"""The picture of a report (``fastfinite/report/plot.py``): every planted problem has a mark at
its position, checked in the ``Picture`` (the data drawn) and in the matplotlib artists drawn
from it (their offsets and extents), for the demo's seven problems and a 1000 x 50 array's
two, from NumPy, HDF5 and Zarr; a clean array's picture says so.

Part: ``fastfinite/report/plot.py`` and ``ScanReport.plot``."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import fastfinite
from fastfinite.errors import InvalidArgumentError, SourceError

pytest.importorskip("matplotlib")

from fastfinite.report.picture import picture  # noqa: E402
from fastfinite.report.plot import draw, plot_report  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def artists(fig, gid: str) -> list:
    """Every artist of the figure with ``gid``."""
    return [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]


def offsets(fig, gid: str) -> set[tuple[float, float]]:
    """The points drawn by the markers with ``gid`` (data coordinates)."""
    return {tuple(map(float, p)) for a in artists(fig, gid) for p in a.get_offsets()}


def label_texts(fig) -> list[str]:
    return [a.get_text() for a in artists(fig, "label")]


def legend_texts(fig) -> str:
    return " | ".join(
        t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()
    )


# -- the demo --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from fastfinite.demo import make_demo_data

    d = make_demo_data(str(tmp_path_factory.mktemp("demo")), size_mb=16, progress=False)
    images = d["path"] + "/images"
    old = os.environ.get("FASTFINITE_NUMPY_TWIN_MAX")
    os.environ["FASTFINITE_NUMPY_TWIN_MAX"] = "0"
    try:
        report = fastfinite.scan(images, by=0, localize=True, progress=False)
        features = fastfinite.scan(images, by=(1, 2), progress=False, max_locations=5)
    finally:
        if old is None:
            del os.environ["FASTFINITE_NUMPY_TWIN_MAX"]
        else:
            os.environ["FASTFINITE_NUMPY_TWIN_MAX"] = old
    return d["planted"], report, features


@pytest.mark.parametrize("kind", ["nan", "posinf", "neginf", "overflow:float32"])
def test_the_demo_s_single_values_are_marked_and_labelled_at_their_positions(demo, kind):
    plan, report, features = demo
    pic = picture(report, also=[features])
    fig = draw(pic)
    s, i, _ = plan[kind]
    point = (s + 0.5, i + 0.5)  # x: axis 0 (the sample), y: axis 1; axis 2 projected
    assert pic.axes == (0, 1) and pic.size == (plan["samples"], 64)
    assert point in {tuple(p) for p in pic.layers[kind].positions}
    assert point in offsets(fig, f"loc:{kind}")
    assert f"{kind} at {tuple(plan[kind])}" in label_texts(fig)
    assert f"{kind}: " in legend_texts(fig)
    assert kind in fig._suptitle.get_text()


def test_the_demo_s_unwritten_chunk_is_a_box_with_a_marker_and_a_label(demo):
    plan, report, features = demo
    pic = picture(report, also=[features])
    fig = draw(pic)
    c = plan["unwritten_chunk"]
    lo, hi = c * 256, min((c + 1) * 256, plan["samples"])
    assert [(b.kind, b.where, b.extent) for b in pic.boxes] == [
        ("missing_chunk", (c, 0, 0), (lo, hi, 0, 64))
    ]
    (box,) = artists(fig, "box:missing_chunk")
    assert (box.get_x(), box.get_width(), box.get_y(), box.get_height()) == (lo, hi - lo, 0, 64)
    assert offsets(fig, "chunk:missing_chunk") == {((lo + hi) / 2, 32.0)}
    assert f"missing_chunk {(c, 0, 0)}" in label_texts(fig)
    assert "missing_chunk (chunk never written): 1" in legend_texts(fig)


def test_the_demo_s_blank_sample_and_constant_feature_are_in_strips_named_by_kind(demo):
    plan, report, features = demo
    pic = picture(report, also=[features])
    fig = draw(pic)
    samples, per_feature = pic.strips
    assert (samples.by, samples.shares_x, per_feature.by) == ((0,), True, (1, 2))
    blank = plan["blank_sample"]
    rows = {r.kind: r for r in samples.rows}
    assert blank in rows["zero_variance"].slices.tolist()
    feature_rows = {r.kind: r for r in per_feature.rows}
    assert feature_rows["zero_variance"].slices.tolist() == [0]  # pixel (0, 0), flat 0
    slice_marks = {
        ax.get_title(loc="left"): {tuple(map(float, p)) for a in ax.get_children()
                                   if a.get_gid() == "slice:zero_variance" for p in a.get_offsets()}
        for ax in fig.axes[1:]
    }  # fmt: skip
    y = list(rows).index("zero_variance") + 0.5
    assert (blank + 0.5, y) in slice_marks[samples.title]
    y = list(feature_rows).index("zero_variance") + 0.5
    assert (0.5, y) in slice_marks[per_feature.title]
    texts = label_texts(fig)
    assert f"zero_variance at ({blank},)" in texts and "zero_variance at (0, 0)" in texts
    ticks = [t.get_text() for ax in fig.axes[1:] for t in ax.get_yticklabels()]
    assert "zero_variance (1)" in ticks
    assert "per slice along by=(1, 2)" in fig._suptitle.get_text()


def test_the_demo_writes_its_picture(tmp_path):
    from fastfinite.demo import run_demo

    assert run_demo(str(tmp_path), size_mb=8, progress=False) == 0
    png = tmp_path / "report.png"
    assert png.exists() and png.stat().st_size > 20_000


# -- a small array ---------------------------------------------------------------------------


def _small() -> np.ndarray:
    x = np.random.default_rng(0).standard_normal((1000, 50))
    x[10, 3] = np.nan
    x[999, 40] = np.inf
    return x


def _write(tmp_path, fmt: str) -> str:
    x = _small()
    if fmt == "numpy":
        np.save(tmp_path / "x.npy", x)
        return str(tmp_path / "x.npy")
    if fmt == "hdf5":
        h5py = pytest.importorskip("h5py")
        with h5py.File(tmp_path / "x.h5", "w") as f:
            f.create_dataset("x", data=x, chunks=(100, 50))
        return str(tmp_path / "x.h5") + ":/x"
    zarr = pytest.importorskip("zarr")
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=x.shape, chunks=(100, 50), dtype="f8")
    z[:] = x
    return str(tmp_path / "x.zarr")


@pytest.mark.parametrize("fmt", ["numpy", "hdf5", "zarr"])
def test_a_small_array_s_two_values_are_marked_at_their_rows(tmp_path, fmt):
    report = fastfinite.scan(_write(tmp_path, fmt))
    pic = picture(report)
    fig = draw(pic)
    assert pic.size == (1000, 50) and pic.tint is None  # every value drawn where it is
    assert pic.layers["nan"].positions.tolist() == [[10.5, 3.5]]
    assert pic.layers["posinf"].positions.tolist() == [[999.5, 40.5]]
    assert offsets(fig, "loc:nan") == {(10.5, 3.5)}
    assert offsets(fig, "loc:posinf") == {(999.5, 40.5)}
    assert sorted(label_texts(fig)) == ["nan at (10, 3)", "posinf at (999, 40)"]
    path = plot_report(report, str(tmp_path / "x.png"))
    assert os.path.getsize(path) > 10_000


def test_a_small_array_per_row_marks_its_two_rows(tmp_path):
    report = fastfinite.scan(_small(), by=0)
    fig = draw(pic := picture(report))
    (strip,) = pic.strips
    assert [(r.kind, r.slices.tolist()) for r in strip.rows] == [("nonfinite", [10, 999])]
    assert strip.rows[0].bins.nonzero()[0].tolist() == [10, 999]  # a bin per row: exact
    assert offsets(fig, "slice:nonfinite") == {(10.5, 0.5), (999.5, 0.5)}
    assert [t.get_text() for t in fig.axes[1].get_yticklabels()] == ["nonfinite (2)"]


def test_a_clean_array_s_picture_says_no_problems_found(tmp_path):
    report = fastfinite.scan(np.random.default_rng(1).standard_normal((1000, 50)), by=0)
    pic = picture(report)
    fig = draw(pic)
    assert pic.clean and pic.found == "no problems found" and not pic.layers
    assert [a.get_text() for a in artists(fig, "clean")] == ["no problems found"]
    assert "no problems found" in fig._suptitle.get_text()
    assert not any(artists(fig, g) for g in ("label", "tint"))


# -- any size --------------------------------------------------------------------------------


def test_one_value_in_a_million_is_a_marker_at_its_place_and_its_row_a_bin():
    x = np.zeros((250_000, 4), dtype=np.float32)
    x[123_456, 2] = -np.inf
    x[200_000] = 7.0  # a blank sample among varied ones
    x[:, 0] = np.arange(1, x.shape[0] + 1)
    x[200_000, 0] = 7.0
    report = fastfinite.scan(x, by=0)
    pic = picture(report)
    fig = draw(pic)
    assert pic.layers["neginf"].positions.tolist() == [[123_456.5, 2.5]]
    assert offsets(fig, "loc:neginf") == {(123_456.5, 2.5)}
    rows = {r.kind: r for r in pic.strips[0].rows}
    assert rows["nonfinite"].slices.tolist() == [123_456]
    assert rows["nonfinite"].bins.size == 2000 and rows["nonfinite"].bins.sum() == 1
    assert rows["nonfinite"].bins.nonzero()[0].tolist() == [123_456 * 2000 // 250_000]
    assert rows["zero_variance"].slices.tolist() == [200_000]


def test_values_not_all_recorded_tint_the_regions_that_hold_them():
    x = np.zeros(1_000_000)
    x[500_000:500_300] = np.nan  # 300 NaN, 100 recorded
    report = fastfinite.scan(x, max_locations=100)
    pic = picture(report)
    fig = draw(pic)
    layer = pic.layers["nan"]
    assert (layer.count, len(layer.positions), layer.complete) == (300, 100, False)
    assert pic.tint is not None and pic.tint.any()
    assert artists(fig, "tint")
    assert "nan: 300 (first 100 drawn)" in legend_texts(fig)
    assert "nan at (500000,) (+99 near)" in label_texts(fig)


def test_an_unreadable_chunk_is_a_crossed_box(tmp_path):
    zarr = pytest.importorskip("zarr")
    path = str(tmp_path / "c.zarr")
    a = zarr.create_array(store=path, shape=(8, 8), chunks=(4, 4), dtype="f4")
    a[:] = 1.0
    with open(os.path.join(path, "c", "1", "0"), "wb") as f:
        f.write(b"\x00garbage, not a chunk\xff" * 3)
    pic = picture(fastfinite.scan(path, on_error="report"))
    fig = draw(pic)
    assert [(b.kind, b.where, b.extent) for b in pic.boxes] == [
        ("unreadable_chunk", (1, 0), (4, 8, 0, 4))
    ]
    (box,) = artists(fig, "box:unreadable_chunk")
    assert (box.get_x(), box.get_width(), box.get_y(), box.get_height()) == (4, 4, 0, 4)
    assert offsets(fig, "chunk:unreadable_chunk") == {(6.0, 2.0)}
    assert "unreadable_chunk (1, 0)" in label_texts(fig)


# -- errors ----------------------------------------------------------------------------------


def test_a_scan_of_another_array_or_without_by_is_refused_as_also():
    report = fastfinite.scan(_small(), by=0)
    other = fastfinite.scan(np.zeros((10, 50)), by=1)
    with pytest.raises(InvalidArgumentError, match=r"also= takes scans of the same array"):
        picture(report, also=[other])
    with pytest.raises(InvalidArgumentError, match=r"also= takes scans with by="):
        picture(report, also=[fastfinite.scan(_small())])


def test_without_matplotlib_the_error_names_the_extra(tmp_path, monkeypatch):
    report = fastfinite.scan(_small())
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an install without it raises
    with pytest.raises(SourceError, match=r"fastfinite\[plot\]"):
        report.plot(str(tmp_path / "x.png"))
    assert not (tmp_path / "x.png").exists()


def test_the_readme_shows_a_small_picture():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    png = os.path.join(root, "docs", "img", "picture.png")
    assert "](docs/img/picture.png)" in open(os.path.join(root, "README.md")).read()
    assert 10_000 < os.path.getsize(png) < 150_000


# -- other shapes and inputs ------------------------------------------------------------------


@pytest.mark.parametrize(
    "axes, point", [((1, 2), (6.5, 7.5)), ((2, 1), (7.5, 6.5)), (None, (5.5, 6.5))]
)
def test_the_axes_asked_for_are_the_map_s_x_and_y(axes, point):
    x = np.zeros((40, 30, 20))
    x[5, 6, 7] = np.nan
    pic = picture(fastfinite.scan(x), axes=axes)
    fig = draw(pic)
    assert offsets(fig, "loc:nan") == {point}
    assert pic.xlabel.startswith(f"axis {pic.axes[0]} ") and f"axis {pic.axes[1]} " in pic.ylabel


def test_a_table_s_columns_are_named_in_its_strip():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [1.0, np.nan, 3.0], "b": [2.0, 2.0, 2.0], "c": [1.0, 2.0, np.inf]})
    pic = picture(fastfinite.scan(df, by=-1))
    fig = draw(pic)
    assert [(r.kind, r.slices.tolist()) for r in pic.strips[0].rows] == [
        ("nonfinite", [0, 2]),
        ("zero_variance", [1]),
    ]
    texts = label_texts(fig)
    assert "nonfinite at (0,) 'a'" in texts and "zero_variance at (1,) 'b'" in texts
    assert offsets(fig, "loc:nan") == {(1.5, 0.5)} and offsets(fig, "loc:posinf") == {(2.5, 2.5)}


def test_a_report_read_back_from_json_draws_the_same_picture(demo):
    _, report, features = demo
    back = fastfinite.ScanReport.from_json(report.to_json())
    a, b = picture(report, also=[features]), picture(back, also=[features])
    assert {k: v.positions.tolist() for k, v in a.layers.items()} == {
        k: v.positions.tolist() for k, v in b.layers.items()
    }
    assert a.boxes == b.boxes and a.labels == b.labels and a.found == b.found
    assert [[r.slices.tolist() for r in s.rows] for s in a.strips] == [
        [r.slices.tolist() for r in s.rows] for s in b.strips
    ]


@pytest.mark.parametrize("data", [np.zeros((0, 3)), np.array(1.0), np.arange(10)])
def test_empty_0_d_and_integer_arrays_draw_a_clean_picture(data, tmp_path):
    import warnings

    report = fastfinite.scan(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no singular limits or the like
        path = plot_report(report, str(tmp_path / "p.png"))
    assert picture(report).clean and os.path.getsize(path) > 5_000


def test_a_0_d_nan_is_marked():
    pic = picture(fastfinite.scan(np.array(np.nan)))
    assert pic.size == (1, 1) and pic.layers["nan"].positions.tolist() == [[0.5, 0.5]]
    assert offsets(draw(pic), "loc:nan") == {(0.5, 0.5)}


def test_never_written_chunks_past_those_listed_are_counted_in_the_legend_and_title(tmp_path):
    zarr = pytest.importorskip("zarr")
    path = str(tmp_path / "m.zarr")
    a = zarr.create_array(store=path, shape=(100, 10), chunks=(10, 10), dtype="f4")
    a[:10] = 1.0  # chunks 1 to 9 never written
    report = fastfinite.scan(path, max_locations=3)
    assert report.missing_chunks == 9
    pic = picture(report)
    fig = draw(pic)
    assert [(b.where, b.extent) for b in pic.boxes] == [
        ((1, 0), (10, 20, 0, 10)),
        ((2, 0), (20, 30, 0, 10)),
        ((3, 0), (30, 40, 0, 10)),
    ]
    assert offsets(fig, "chunk:missing_chunk") == {(15.0, 5.0), (25.0, 5.0), (35.0, 5.0)}
    assert "missing_chunk (chunk never written): 9 (first 3 drawn)" in legend_texts(fig)
    assert "(9 never-written chunks, 3 listed and drawn)" in pic.found
    assert not pic.clean
