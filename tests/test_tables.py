"""Reports as tables: per-slice statistics for pandas and xarray, locations for pandas.

Part: ``fastfinite/report/tables.py`` (and the thin methods of ``report/model.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import sys
import warnings

import h5py
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import fastfinite
from fastfinite.errors import InvalidArgumentError, SourceError
from fastfinite.report.model import ScanReport, SliceReport

COLUMNS = ["count", "nan", "posinf", "neginf", "mean", "std", "min", "max", "max_z", "findings"]


def _numpy_slices(x: np.ndarray, by: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Per-slice statistics computed by NumPy on the same array (the oracle)."""
    other = tuple(a for a in range(x.ndim) if a not in by)
    xf = x.astype(np.float64)
    fin = np.where(np.isfinite(xf), xf, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, std = np.nanmean(fin, axis=other), np.nanstd(fin, axis=other)
        mn, mx = np.nanmin(fin, axis=other), np.nanmax(fin, axis=other)
        z = np.maximum((mx - mean) / std, (mean - mn) / std)
    z[(std == 0) & (mx == mn)] = 0.0  # a constant slice: every value is its mean
    return {
        "count": np.isfinite(xf).sum(axis=other),
        "nan": np.isnan(xf).sum(axis=other),
        "posinf": np.isposinf(xf).sum(axis=other),
        "neginf": np.isneginf(xf).sum(axis=other),
        "mean": mean,
        "std": std,
        "min": mn,
        "max": mx,
        "max_z": z,
    }


def _planted() -> np.ndarray:
    """(300, 6): a NaN in column 1, +inf and -inf in column 2, column 3 constant, column 4
    one outlier (z about 17), the rest normal."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((300, 6))
    x[17, 1] = np.nan
    x[5, 2], x[250, 2] = np.inf, -np.inf
    x[:, 3] = 2.5
    x[100, 4] = 40.0
    return x


def _assert_matches_numpy(df: pd.DataFrame, x: np.ndarray, by: tuple[int, ...]) -> None:
    ref = _numpy_slices(x, by)
    assert list(df.columns) == COLUMNS
    for name in ("count", "nan", "posinf", "neginf"):
        np.testing.assert_array_equal(df[name].to_numpy(), ref[name].ravel(), err_msg=name)
        assert df[name].dtype == np.int64
    for name in ("mean", "std", "min", "max", "max_z"):
        np.testing.assert_allclose(
            df[name].to_numpy(), ref[name].ravel(), rtol=1e-9, atol=1e-12, equal_nan=True,
            err_msg=name,
        )  # fmt: skip


def test_to_pandas_is_numpys_per_slice_statistics_with_the_findings_of_each_slice():
    x = _planted()
    report = fastfinite.scan(x, by=1)
    df = report.slices.to_pandas()
    assert len(df) == 6 and df.index.name == "axis_1"
    assert df.index.tolist() == list(range(6))
    _assert_matches_numpy(df, x, (1,))
    # the NaN and inf slices have no finite std once they hold non-finite values
    assert df["findings"].tolist() == ["", "nonfinite", "nonfinite", "zero_variance", "outlier", ""]


def test_to_pandas_per_row_and_over_two_axes_matches_numpy():
    x = _planted()
    df = fastfinite.scan(x, by=0).slices.to_pandas()
    assert len(df) == 300 and df.index.name == "axis_0"
    _assert_matches_numpy(df, x, (0,))
    bad = {i for i, f in df["findings"].items() if f}
    assert {17, 5, 250} <= bad  # NaN and inf rows: nonfinite
    assert df.loc[17, "findings"].split(", ")[0] == "nonfinite"

    cube = np.random.default_rng(1).standard_normal((4, 5, 3))
    cube[2, 1, 0] = np.nan
    df = fastfinite.scan(cube, by=(0, 2)).slices.to_pandas()
    assert df.index.names == ["axis_0", "axis_2"]
    assert df.index.tolist() == [(i, k) for i in range(4) for k in range(3)]
    _assert_matches_numpy(df, cube, (0, 2))
    assert df.loc[(2, 0), "nan"] == 1 and df.loc[(2, 0), "findings"] == "nonfinite"
    assert (df.drop(index=(2, 0))["findings"] == "").all()


def test_a_table_by_column_is_indexed_by_the_column_names():
    x = _planted()
    frame = pd.DataFrame(x, columns=["a", "b", "<c>", "d", "e", "f"])
    report = fastfinite.scan(frame, by=-1)
    df = report.slices.to_pandas()
    assert df.index.name == "column" and df.index.tolist() == ["a", "b", "<c>", "d", "e", "f"]
    _assert_matches_numpy(df, x, (1,))
    assert df.loc["d", "findings"] == "zero_variance"
    ds = report.slices.to_xarray()
    assert ds["count"].dims == ("column",)
    assert ds["column"].values.tolist() == ["a", "b", "<c>", "d", "e", "f"]


def test_to_xarray_holds_the_same_columns_over_the_by_axes():
    x = _planted()
    report = fastfinite.scan(x, by=1)
    ds = report.slices.to_xarray()
    df = report.slices.to_pandas()
    assert set(ds.data_vars) == set(COLUMNS)
    for name in COLUMNS:
        assert ds[name].dims == ("axis_1",)
        if name == "findings":
            assert ds[name].values.tolist() == df[name].tolist()
        else:
            np.testing.assert_array_equal(ds[name].values, df[name].to_numpy())

    cube = np.random.default_rng(1).standard_normal((4, 5, 3))
    ds = fastfinite.scan(cube, by=(0, 2)).slices.to_xarray()
    assert ds["mean"].dims == ("axis_0", "axis_2") and ds["mean"].shape == (4, 3)
    np.testing.assert_allclose(ds["mean"].values, cube.mean(axis=1), rtol=1e-12)


def test_to_xarray_like_the_scanned_dataarray_takes_its_dims_and_coordinates():
    x = _planted()
    times = pd.date_range("2024-01-01", periods=300, freq="h")
    da = xr.DataArray(
        x, dims=("time", "feature"),
        coords={"time": times, "feature": list("abcdef"), "hour": ("time", times.hour)},
    )  # fmt: skip
    report = fastfinite.scan(da, by=0)
    ds = report.slices.to_xarray(like=da)
    assert ds["nan"].dims == ("time",)
    assert (ds["time"].values == times.values).all()
    assert ds["hour"].values.tolist() == times.hour.tolist()
    assert "feature" not in ds.coords  # not a by axis
    assert int(ds["nan"].sel(time=times[17])) == 1
    assert ds["findings"].sel(time=times[5]).item().startswith("nonfinite")
    per_feature = fastfinite.scan(da, by=1).slices.to_xarray(like=da)
    assert per_feature["findings"].sel(feature="d").item() == "zero_variance"

    with pytest.raises(
        InvalidArgumentError, match=r"like= has shape \(300, 6\).*\(300,\) along the by-axes \(1,\)"
    ):
        fastfinite.scan(x[:, :6].T.copy(), by=1).slices.to_xarray(like=da)
    with pytest.raises(InvalidArgumentError, match="like= must be the xarray.DataArray"):
        report.slices.to_xarray(like=x)


def _where_locations(x: np.ndarray) -> list[tuple[str, tuple[int, ...], float]]:
    """The locations NumPy finds, kind by kind, each in C order (np.where)."""
    out = []
    with np.errstate(over="ignore"):
        over = np.isfinite(x) & ~np.isfinite(x.astype(np.float32))
    for kind, mask in (
        ("nan", np.isnan(x)),
        ("posinf", np.isposinf(x)),
        ("neginf", np.isneginf(x)),
        ("overflow:float32", over),
    ):
        for idx in zip(*np.where(mask)):
            idx = tuple(int(i) for i in idx)
            out.append((kind, idx, float(x[idx])))
    return out


def test_locations_frame_is_np_where_kind_by_kind():
    x = np.random.default_rng(3).standard_normal((40, 7, 3))
    x[1, 2, 0] = x[30, 6, 2] = x[0, 0, 1] = np.nan
    x[5, 5, 0] = np.inf
    x[39, 0, 0] = -np.inf
    x[7, 1, 1] = 1e300
    report = fastfinite.scan(x)
    df = report.locations_frame()
    assert list(df.columns) == ["kind", "index", "value", "labels", "array"]
    got = sorted(zip(df["kind"], df["index"], df["value"]), key=lambda t: (t[0], t[1]))
    want = sorted(_where_locations(x), key=lambda t: (t[0], t[1]))
    assert [(k, i) for k, i, _ in got] == [(k, i) for k, i, _ in want]
    for (_, _, v), (_, _, w) in zip(got, want):
        assert v == w or (np.isnan(v) and np.isnan(w))
    assert df["labels"].isna().all() and df["array"].isna().all()
    assert df["value"].dtype == np.float64


def test_locations_frame_keeps_what_the_report_records_and_the_labels():
    x = np.zeros((50, 4))
    x[::2, 1] = np.nan  # 25 NaN
    report = fastfinite.scan(x, max_locations=10)
    df = report.locations_frame()
    assert len(df) == 10
    rows, cols = np.where(np.isnan(x))
    assert df["index"].tolist() == list(zip(rows.tolist(), cols.tolist()))[:10]
    frame = pd.DataFrame(
        {"a": [1.0, np.nan, 3.0], "b": [np.inf, 1.0, 2.0]}, index=["r0", "r1", "r2"]
    )
    df = fastfinite.scan(frame).locations_frame()
    assert df[["kind", "index"]].values.tolist() == [["posinf", (0, 1)], ["nan", (1, 0)]] or (
        df[["kind", "index"]].values.tolist() == [["nan", (1, 0)], ["posinf", (0, 1)]]
    )
    labels = {k: lab for k, lab in zip(df["kind"], df["labels"])}
    assert labels["nan"] == {"row": "r1", "column": "a"}
    assert labels["posinf"] == {"row": "r0", "column": "b"}
    empty = fastfinite.scan(np.ones(5)).locations_frame()
    assert list(empty.columns) == ["kind", "index", "value", "labels", "array"] and empty.empty


def test_a_group_names_the_array_of_each_location_and_slice(tmp_path):
    path = tmp_path / "g.h5"
    a = np.random.default_rng(0).standard_normal((20, 3))
    a[4, 2] = np.nan
    b = np.random.default_rng(1).standard_normal((10, 3))
    b[:, 0] = 1.0
    b[9, 1] = -np.inf
    with h5py.File(path, "w") as f:
        f["x/a"] = a
        f["b"] = b
    report = fastfinite.scan(str(path), by=1)
    assert report.arrays and report.slices is None
    locs = report.locations_frame()
    assert sorted(zip(locs["array"], locs["kind"], locs["index"])) == [
        ("/b", "neginf", (9, 1)),
        ("/x/a", "nan", (4, 2)),
    ]
    frame = report.slices_frame()
    assert frame.index.names == ["array", "axis_1"]
    assert sorted(set(frame.index.get_level_values("array"))) == ["/b", "/x/a"]
    _assert_matches_numpy(frame.loc["/x/a"], a, (1,))
    _assert_matches_numpy(frame.loc["/b"], b, (1,))
    assert frame.loc["/b"]["findings"].tolist() == ["zero_variance", "nonfinite", ""]
    assert frame.loc["/x/a"]["findings"].tolist() == ["", "", "nonfinite"]
    # each array's own slices know their own findings
    assert report.member("/b").slices.to_pandas()["findings"].tolist()[0] == "zero_variance"


def test_slices_frame_without_by_is_an_error_naming_by():
    with pytest.raises(InvalidArgumentError, match="by=AXIS"):
        fastfinite.scan(np.ones(4)).slices_frame()
    assert fastfinite.scan(np.ones((4, 2)), by=0).slices_frame().shape == (4, 10)


def test_the_findings_column_survives_json_merges_and_copies():
    x = _planted()
    report = fastfinite.scan(x, by=1)
    want = report.slices.to_pandas()
    back = ScanReport.from_json(report.to_json())
    pd.testing.assert_frame_equal(back.slices.to_pandas(), want)
    top, bottom = fastfinite.scan(x[:150], by=1), fastfinite.scan(x[150:], by=1)
    merged = fastfinite.merge_reports([top, bottom])
    pd.testing.assert_frame_equal(merged.slices.to_pandas(), want, check_exact=False, rtol=1e-9)
    pd.testing.assert_frame_equal(copy.deepcopy(report).slices.to_pandas(), want)
    # another report holding the same slices with other findings: each keeps its own
    other = dataclasses.replace(report, findings=[])
    assert (other.slices.to_pandas()["findings"] == "").all()
    pd.testing.assert_frame_equal(report.slices.to_pandas(), want)
    # findings set after the slices
    later = fastfinite.scan(x, by=1)
    later.findings = [f for f in later.findings if f.kind != "outlier"]
    assert later.slices.to_pandas()["findings"].tolist()[4] == ""


def test_slices_of_no_report_say_their_findings_are_unknown():
    s = fastfinite.scan(_planted(), by=1).slices
    alone = SliceReport(s.by, *(getattr(s, a) for a in SliceReport.ARRAYS))
    with pytest.raises(InvalidArgumentError, match="belong to no report"):
        alone.to_pandas()


def test_without_pandas_or_xarray_the_error_says_what_to_install(monkeypatch):
    report = fastfinite.scan(_planted(), by=1)
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an absent package looks like
    with pytest.raises(SourceError, match=r"pip install 'fastfinite\[pandas\]'"):
        report.slices.to_pandas()
    with pytest.raises(SourceError, match=r"fastfinite\[pandas\]"):
        report.locations_frame()
    monkeypatch.setitem(sys.modules, "xarray", None)
    with pytest.raises(SourceError, match=r"pip install 'fastfinite\[xarray\]'"):
        report.slices.to_xarray()


def test_import_fastfinite_loads_neither_pandas_nor_xarray():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        "import sys, fastfinite, numpy as np; r = fastfinite.scan(np.ones(3)); "
        "r._repr_html_(); print('pandas' in sys.modules, 'xarray' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=root),
    )  # fmt: skip
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_a_group_of_groups_names_arrays_as_member_finds_them(tmp_path):
    reports = []
    for k in (1, 2):
        with h5py.File(tmp_path / f"m{k}.h5", "w") as f:
            a = np.arange(10.0).reshape(5, 2)
            a[k, 0] = np.nan
            f["x"] = a
        reports.append(fastfinite.scan(str(tmp_path / f"m{k}.h5"), by=1))
    merged = fastfinite.merge_reports(reports)
    frame = merged.slices_frame()
    names = [f"{tmp_path / 'm1.h5'}:/x", f"{tmp_path / 'm2.h5'}:/x"]
    assert list(dict.fromkeys(frame.index.get_level_values("array"))) == names
    assert frame["nan"].tolist() == [1, 0, 1, 0]
    assert frame["findings"].tolist() == ["nonfinite", "", "nonfinite", ""]
    locs = merged.locations_frame()
    assert list(zip(locs["array"], locs["index"])) == [(names[0], (1, 0)), (names[1], (2, 0))]
    assert all(merged.member(name).shape == (5, 2) for name in names)


def test_a_shallow_copy_given_other_findings_leaves_the_original_alone():
    report = fastfinite.scan(_planted(), by=1)
    want = report.slices.to_pandas()
    twin = copy.copy(report)  # the same slices and the same findings list
    twin.findings = []
    assert (twin.slices.to_pandas()["findings"] == "").all()
    pd.testing.assert_frame_equal(report.slices.to_pandas(), want)
    assert twin.slices == report.slices  # the same statistics
    report.findings.append(report.findings[0])  # in place: the slices see it
    assert report.slices.to_pandas()["findings"][1] == "nonfinite, nonfinite"
