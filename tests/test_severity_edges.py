"""The edges of severities and of reports read back (review of issue 42): the text of a diff,
missing chunks whose severity never depends on what is listed, the names of a merged group of
groups, reports whose severities or kinds disagree with the table, the one place of the
default fail set, the command line's --scheduler and output paths. Real files and stores.

Part: ``fastfinite/model/kinds.py`` and ``fastfinite/report/``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager

import h5py
import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite import cli
from fastfinite.cache.changes import Change, CountChange, diff_reports
from fastfinite.errors import InvalidArgumentError, NonFiniteError, SourceError
from fastfinite.model import kinds
from fastfinite.options import parse_output_file
from fastfinite.report.build import failure_message
from fastfinite.report.model import Finding, ScanReport

from .helpers import assert_one_line_error, run_cli

ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__)))


def _main(capsys, *args) -> tuple[int, str]:
    """The command line in this process: its exit code and what it printed."""
    code = cli.main([str(a) for a in args])
    return code, capsys.readouterr().out


def _scan_twice(tmp_path, before: np.ndarray, after: np.ndarray) -> tuple[str, str]:
    """Reports of one .npy file before and after it changed, written as JSON."""
    data = str(tmp_path / "d.npy")
    paths = []
    for i, x in enumerate((before, after)):
        np.save(data, x)
        p = tmp_path / f"d{i}.json"
        p.write_text(fastfinite.scan(data).to_json())
        paths.append(str(p))
    return paths[0], paths[1]


# -- 1. the text of a diff -------------------------------------------------------------------


def test_a_count_change_reads_as_a_line():
    assert str(CountChange("nan", 0, 1)) == "nan 0 -> 1"
    assert str(CountChange("missing_chunk", 2, 0, "/a", "error")) == "/a: missing_chunk 2 -> 0"


def test_diff_prints_counts_as_text_not_reprs(tmp_path, capsys):
    x = np.zeros(4)
    y = x.copy()
    y[1] = np.nan
    old, new = _scan_twice(tmp_path, x, y)
    changes = diff_reports(*(fastfinite.ScanReport.from_json(open(p).read()) for p in (old, new)))
    assert str(changes).splitlines() == [
        f"changes from {tmp_path / 'd.npy'} to the newer", "  counts (1):", "    nan 0 -> 1",
        "  new (1):", "    nan at (1,)",
    ]  # fmt: skip
    code, out = _main(capsys, "diff", old, new)
    assert code == 1 and out == str(changes) + "\n" and "CountChange(" not in out


# -- 2. a missing chunk's severity is the report's, whatever is listed -------------------------


def _half_written(path: str, fill, dtype="f8") -> str:
    """A store of 2 chunks, the second never written (it reads as ``fill``)."""
    a = zarr.create_array(store=path, shape=(4,), chunks=(2,), dtype=dtype, fill_value=fill)
    a[:2] = 1.0
    assert sorted(os.listdir(os.path.join(path, "c"))) == ["0"]
    return path


@pytest.mark.parametrize("max_locations", [0, 1, 100])
def test_a_nan_filled_missing_chunk_is_an_error_however_many_are_listed(tmp_path, max_locations):
    path = _half_written(str(tmp_path / "n.zarr"), np.nan)
    r = fastfinite.scan(path, max_locations=max_locations)
    assert r.fill_nonfinite is True and r.missing_severity == "error"
    assert r.severity_counts() == {"error": {"nan": 2, "missing_chunk": 1}}
    assert "warning" not in r.kinds_found()
    assert len(r.findings) == min(max_locations, 1)
    d = json.loads(r.to_json())
    assert d["fill_nonfinite"] is True
    back = ScanReport.from_json(r.to_json())
    assert back.fill_nonfinite is True
    assert back.severity_counts() == r.severity_counts() and back.to_dict() == d


@pytest.mark.parametrize("fill", [0.0, -2.5])
def test_a_finite_filled_missing_chunk_is_a_warning_however_many_are_listed(tmp_path, fill):
    path = _half_written(str(tmp_path / "f.zarr"), fill)
    for cap in (0, 100):
        r = fastfinite.scan(path, max_locations=cap)
        assert r.fill_nonfinite is False and r.missing_severity == "warning"
        assert r.severity_counts() == {"warning": {"missing_chunk": 1}}
        assert r.ok and not r.clean
        assert ScanReport.from_json(r.to_json()).severity_counts() == r.severity_counts()


def test_an_inf_filled_complex_store_is_an_error_with_nothing_listed(tmp_path):
    path = _half_written(str(tmp_path / "c.zarr"), complex(0.0, np.inf), dtype="c16")
    r = fastfinite.scan(path, max_locations=0)
    assert r.fill_nonfinite is True
    assert r.severity_counts()["error"]["missing_chunk"] == 1


def test_a_group_counts_each_arrays_missing_chunks_by_its_own_fill(tmp_path):
    path = str(tmp_path / "g.zarr")
    zarr.open_group(path, mode="w")
    _half_written(os.path.join(path, "nanfill"), np.nan)
    _half_written(os.path.join(path, "zerofill"), 0.0)
    r = fastfinite.scan(path, max_locations=0)
    assert r.arrays["nanfill"].fill_nonfinite and not r.arrays["zerofill"].fill_nonfinite
    assert r.fill_nonfinite is True  # some of its missing chunks read as NaN
    assert r.severity_counts() == {
        "error": {"nan": 2, "missing_chunk": 1}, "warning": {"missing_chunk": 1},
    }  # fmt: skip
    assert ScanReport.from_json(r.to_json()).severity_counts() == r.severity_counts()


def test_diff_of_unlisted_missing_chunks_has_their_fills_severity(tmp_path, capsys):
    path = str(tmp_path / "n.zarr")
    a = zarr.create_array(store=path, shape=(4,), chunks=(2,), dtype="f8", fill_value=np.nan)
    a[:] = 1.0
    old = fastfinite.scan(path, max_locations=0)
    os.remove(os.path.join(path, "c", "1"))
    new = fastfinite.scan(path, max_locations=0)
    changes = diff_reports(old, new)
    missing = [c for c in changes.counts if c.kind == "missing_chunk"]
    assert [(c.old, c.new, c.severity) for c in missing] == [(0, 1, "error")]
    assert {"missing_chunk", "error"} <= changes.new_kinds()


def test_a_v2_report_without_fill_nonfinite_takes_it_from_its_findings(tmp_path):
    path = _half_written(str(tmp_path / "n.zarr"), np.nan)
    d = fastfinite.scan(path).to_dict()
    del d["fill_nonfinite"]  # as main wrote /2 before the field
    r = ScanReport.from_dict(d)
    assert r.fill_nonfinite is True and r.missing_severity == "error"


def test_merge_concatenates_missing_chunks_only_when_they_read_alike(tmp_path):
    nan1 = fastfinite.scan(_half_written(str(tmp_path / "n1.zarr"), np.nan), max_locations=0)
    nan2 = fastfinite.scan(_half_written(str(tmp_path / "n2.zarr"), np.nan), max_locations=0)
    zero = fastfinite.scan(_half_written(str(tmp_path / "z.zarr"), 0.0), max_locations=0)
    m = fastfinite.merge_reports([nan1, nan2])
    assert m.shape == (8,) and m.fill_nonfinite is True
    assert m.severity_counts() == {"error": {"nan": 4, "missing_chunk": 2}}
    g = fastfinite.merge_reports([nan1, zero])
    assert g.dtype == "group" and list(g.arrays) == [nan1.name, zero.name]
    assert g.severity_counts() == {
        "error": {"nan": 2, "missing_chunk": 1}, "warning": {"missing_chunk": 1},
    }  # fmt: skip


# -- 3. a merged group of groups names arrays that resolve -------------------------------------


def _h5(path: str, **datasets) -> str:
    with h5py.File(path, "w") as f:
        for name, values in datasets.items():
            f[name] = np.asarray(values, dtype=float)
    return path


def test_a_merged_group_of_hdf5_files_names_each_location_by_its_file_and_path(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    _h5("m1.h5", x=[0.0, np.nan])
    _h5("m2.h5", x=[np.nan, 0.0])
    r = fastfinite.merge_reports([fastfinite.scan("m1.h5"), fastfinite.scan("m2.h5")])
    assert list(r.arrays) == ["m1.h5", "m2.h5"]
    assert [(x.array, x.index) for x in r.locations] == [("m1.h5:/x", (1,)), ("m2.h5:/x", (0,))]
    for loc in r.locations:
        sub = r.member(loc.array)
        assert sub.dtype == "float64" and sub.locations_of("nan")[0].index == loc.index
    assert r.member("m1.h5:/x") is r.arrays["m1.h5"].arrays["/x"]
    assert r.member("m1.h5") is r.arrays["m1.h5"]
    assert failure_message(r) == "m1.h5 + m2.h5: nan 2 at m1.h5:/x (1,), m2.h5:/x (0,)"
    back = ScanReport.from_json(r.to_json())
    assert [x.array for x in back.locations] == ["m1.h5:/x", "m2.h5:/x"]
    assert back.member("m2.h5:/x").nan == 1
    # the summary says each location under its array, the inner ones too
    text = str(r)
    assert "      [/x] float64 (2,): nan 1\n          nan at (1,)" in text
    assert "          nan at (0,)" in text


@pytest.mark.parametrize("name", ["nope", "m1.h5:/y", "m1.h5/x", "m1.h5:x", "m1.h5:", "/x"])
def test_member_refuses_a_name_of_no_array(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    _h5("m1.h5", x=[0.0, np.nan])
    r = fastfinite.merge_reports([fastfinite.scan("m1.h5"), fastfinite.scan(np.zeros(3))])
    with pytest.raises(KeyError):
        r.member(name)


def test_merged_zarr_groups_name_findings_and_locations_by_nested_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("g1.zarr", "g2.zarr"):
        zarr.open_group(name, mode="w").create_group("y")
        _half_written(f"{name}/y/z", np.nan)
    r = fastfinite.merge_reports([fastfinite.scan("g1.zarr"), fastfinite.scan("g2.zarr")])
    assert [(f.kind, f.array, f.severity) for f in r.findings] == [
        ("missing_chunk", "g1.zarr/y/z", "error"), ("missing_chunk", "g2.zarr/y/z", "error"),
    ]  # fmt: skip
    for f in r.findings:
        assert [(g.kind, g.where) for g in r.member(f.array).findings] == [(f.kind, f.where)]
    assert {x.array for x in r.locations} == {"g1.zarr/y/z", "g2.zarr/y/z"}
    assert failure_message(r).endswith(
        "g1.zarr/y/z: missing_chunk (1,); g2.zarr/y/z: missing_chunk (1,)"
    )


def test_diff_of_merged_groups_compares_array_by_array(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _h5("m2.h5", x=[0.0, 0.0])

    def merged():
        return fastfinite.merge_reports([fastfinite.scan("m1.h5"), fastfinite.scan("m2.h5")])

    _h5("m1.h5", x=[0.0, np.nan], y=[0.0, 0.0])
    old = merged()
    # the NaN moved to another array (a new file put in place: a scan may hold the old open)
    os.replace(_h5("new.h5", x=[0.0, 0.0], y=[0.0, np.nan]), "m1.h5")
    changes = diff_reports(old, merged())
    assert [(c.array, c.kind, c.old, c.new) for c in changes.counts] == [
        ("m1.h5:/x", "nan", 1, 0), ("m1.h5:/y", "nan", 0, 1),
    ]  # fmt: skip
    assert [(c.array, c.kind, c.where) for c in changes.new] == [("m1.h5:/y", "nan", (1,))]
    assert [(c.array, c.kind, c.where) for c in changes.gone] == [("m1.h5:/x", "nan", (1,))]
    assert changes.has_new
    first = diff_reports(None, merged())  # a first scan: all is new, no array 'added'
    assert first.arrays_added == [] and [c.array for c in first.new] == ["m1.h5:/y"]


# -- 4. a report read back agrees with the table of kinds, or is refused ---------------------


def _nan_fill_group(tmp_path) -> dict:
    """A Zarr group's report: 'x' with a NaN-filled missing chunk, 'y' with a 1e100."""
    path = str(tmp_path / "g.zarr")
    zarr.open_group(path, mode="w").create_array("y", data=np.array([1.0, 1e100]))
    _half_written(os.path.join(path, "x"), np.nan)
    return fastfinite.scan(path).to_dict()


def _refused(d: dict, *fragments: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        ScanReport.from_dict(json.loads(json.dumps(d)))
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


def _with(d: dict, path: str, value) -> dict:
    """``d`` with the field at ``path`` (``findings.0.severity``) set to ``value``."""
    d = json.loads(json.dumps(d))
    *parents, last = path.split(".")
    here = d
    for key in parents:
        here = here[int(key)] if isinstance(here, list) else here[key]
    here[int(last) if isinstance(here, list) else last] = value
    return d


@pytest.mark.parametrize(
    "path,value,fragments",
    [
        ("arrays.x.findings.0.severity", "warning",
         ["arrays['x'].findings[0].severity is 'warning'", "missing_chunk is an error",
          "fill value is NaN or inf"]),
        ("findings.0.severity", "warning", ["findings[0].severity is 'warning'"]),
        ("arrays.x.fill_nonfinite", False,
         ["arrays['x'].findings[0].severity is 'error'", "is a warning", "is not NaN"]),
        ("arrays.x.fill_nonfinite", "yes", ["arrays['x'].fill_nonfinite is 'yes'"]),
        ("arrays.x.findings.0.kind", "missing_chunks",
         ["arrays['x'].findings[0].kind is 'missing_chunks', not a kind of finding"]),
        ("arrays.x.findings.0.kind", "nan", ["findings[0].kind is 'nan', not a kind of finding"]),
        ("arrays.x.findings.0.kind", "error", ["findings[0].kind is 'error'"]),
        ("arrays.x.locations.0.kind", "nanx",
         ["arrays['x'].locations[0].kind is 'nanx', not a kind this report counts"]),
        ("locations.0.kind", "overflow:float16", ["locations[0].kind is 'overflow:float16'"]),
        ("arrays.y.locations.0.severity", "warning",
         ["arrays['y'].locations[0].severity is 'warning', but overflow:float32 is an error"]),
        ("ok", True, ["ok is True, but the report holds", "'nan': 2"]),
        ("arrays.y.clean", True, ["arrays['y'].clean is True", "overflow:float32"]),
    ],
)  # fmt: skip
def test_a_report_that_disagrees_with_the_table_is_refused_naming_the_field(
    tmp_path, path, value, fragments
):
    d = _nan_fill_group(tmp_path)
    assert ScanReport.from_dict(d).to_dict() == d  # as written, it is read
    _refused(_with(d, path, value), *fragments)


def test_an_unreadable_chunk_called_a_warning_does_not_make_a_report_ok(tmp_path):
    d = fastfinite.scan(np.zeros(3)).to_dict()
    d["findings"] = [
        {"kind": "unreadable_chunk", "severity": "warning", "where": [0], "message": "m"}
    ]
    _refused(d, "findings[0].severity is 'warning', but this unreadable_chunk is an error")
    d["findings"][0]["severity"] = "error"
    d["ok"], d["clean"] = False, False
    assert ScanReport.from_dict(d).ok is False


def test_merge_of_a_report_that_disagrees_names_the_file_and_field(tmp_path):
    d = fastfinite.scan(np.array([np.nan, 1.0])).to_dict()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_with(d, "locations.0.kind", "nanx")))
    r = run_cli("merge", bad)
    assert_one_line_error(
        r, str(bad), "not a fastfinite JSON report", "locations[0].kind is 'nanx'"
    )


def test_every_kind_of_finding_a_scan_makes_is_read_back(tmp_path):
    x = np.zeros((6, 5), np.float32)
    x[:, 0] = 3e38  # sum overflows float32
    x[:3, 1], x[3:, 1] = 1e20, -1e20  # variance overflows
    x[:, 2] = 0.5  # constant
    x[:, 3] = np.nan
    y = np.zeros((2, 200))
    y[0] = np.linspace(0.0, 1.0, 200)
    y[1, 0] = 1000.0  # 14 standard deviations out
    near = np.array([[0.1, 0.1 + 1e-17, 0.1]])
    path = _half_written(str(tmp_path / "z.zarr"), 0.0)
    reports = [fastfinite.scan(a, by=b) for a, b in ((x, -1), (y, 0), (near, 0))]
    reports.append(fastfinite.scan(path))
    kinds = {f.kind for r in reports for f in r.findings}
    assert kinds >= {
        "sum_overflow:float32", "variance_overflow:float32", "near_zero_variance",
        "zero_variance", "nonfinite", "outlier", "missing_chunk",
    }  # fmt: skip
    for r in reports:
        assert ScanReport.from_json(r.to_json()).to_dict() == r.to_dict()


# -- 5. one place each: the default fail set, kind groups, first locations, schemas ----------


def test_the_default_fail_set_is_one_place(tmp_path, capsys, monkeypatch):
    x = np.array([[1e-50, 1.0]])  # a cast underflow: a warning, nothing else
    path = str(tmp_path / "u.npy")
    np.save(path, x)
    r = fastfinite.scan(x)
    assert r.ok and not r.clean and r.ok == ("error" not in r.kinds_found())
    assert _main(capsys, "scan", path, "-q")[0] == 0
    fastfinite.assert_finite(x)
    assert list(fastfinite.guard([x], on_bad="skip")) == [x]
    # what fails by default is said once: every check follows it
    monkeypatch.setattr(kinds, "DEFAULT_FAIL_ON", frozenset({"underflow"}))
    assert not r.ok
    assert _main(capsys, "scan", path, "-q")[0] == 1
    with pytest.raises(NonFiniteError, match=r"underflow:float32 1 at \(0, 0\)"):
        fastfinite.assert_finite(x)
    assert list(fastfinite.guard([x], on_bad="skip")) == []
    assert diff_reports(None, r).new_kinds() >= {"underflow"}
    old, new = _scan_twice(tmp_path, np.ones((1, 2)), x)
    assert _main(capsys, "diff", old, new, "-q")[0] == 1


def test_a_first_scan_s_changes_name_the_kinds_the_report_does(tmp_path):
    path = _half_written(str(tmp_path / "z.zarr"), np.nan)
    a = zarr.open_array(path)
    a[0], a[1] = np.inf, 1e-50
    for r in (fastfinite.scan(path), fastfinite.scan(path, max_locations=0)):
        assert diff_reports(None, r).new_kinds() == r.kinds_found() == {
            "nan", "posinf", "nonfinite", "underflow:float32", "cast", "underflow",
            "missing_chunk", "error", "warning",
        }  # fmt: skip
    y = np.zeros((2, 200))
    y[0] = np.linspace(0.0, 1.0, 200)
    y[1, 0], y[1, 5] = 1000.0, 1e100
    r = fastfinite.scan(y, by=0)
    assert diff_reports(None, r).new_kinds() == r.kinds_found() == {
        "outlier", "overflow:float32", "cast", "overflow", "sum_overflow:float32",
        "variance_overflow:float32", "error", "warning",
    }  # fmt: skip


def test_messages_and_the_summary_show_the_same_first_locations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _h5("f.h5", a=[np.nan] * 2, b=[np.nan] * 3)
    r = fastfinite.scan("f.h5")
    first = r.first_of_each_kind()
    assert [(x.array, x.index) for x in first["nan"]] == [("/a", (0,)), ("/a", (1,)), ("/b", (0,))]
    assert r.first_locations() == {"nan": [(0,), (1,), (0,)]}
    assert failure_message(r) == "f.h5: nan 5 at /a (0,), /a (1,), /b (0,)..."
    text = str(r)
    assert "nan at (0,), (1,)\n" in text and text.endswith("nan at (0,), (1,), (2,)")
    assert r.first_of_each_kind(own=True) == {}  # a group's are its arrays'
    t = fastfinite.scan(np.full((5, 1), np.nan))
    assert "nan at (0, 0), (1, 0), (2, 0) (+2 more)" in str(t)
    assert failure_message(t).endswith("nan 5 at (0, 0), (1, 0), (2, 0)...")


@pytest.mark.parametrize(
    "schema,fragment",
    [
        ("fastfinite.report/99", "cannot read (it writes 'fastfinite.report/2'): upgrade"),
        ("fastfinite.report/one", "unknown schema 'fastfinite.report/one'"),
        ("other/1", "not a fastfinite report: schema 'other/1'"),
        (None, "not a fastfinite report: schema None"),
    ],
)
def test_the_api_and_the_command_line_read_the_same_schemas(tmp_path, schema, fragment):
    d = {**fastfinite.scan(np.zeros(2)).to_dict(), "schema": schema}
    with pytest.raises(InvalidArgumentError) as e:
        ScanReport.from_dict(d)
    assert fragment in str(e.value)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(d))
    with pytest.raises(SourceError) as c:
        cli.read_report(str(p))
    assert str(c.value) == f"{p}: {e.value}"


def test_from_dict_of_what_is_no_json_object_says_so():
    for d in ([1, 2], "fastfinite.report/2", None):
        with pytest.raises(InvalidArgumentError, match="not a fastfinite report: a JSON"):
            ScanReport.from_dict(d)


def test_a_change_and_a_finding_refuse_a_severity_alike():
    with pytest.raises(InvalidArgumentError) as f:
        Finding("outlier", (0,), "m", severity="fatal")
    for make in (
        lambda: Change("nan", (0,), severity="fatal"),
        lambda: CountChange("nan", 0, 1, None, "fatal"),
    ):
        with pytest.raises(InvalidArgumentError) as c:
            make()
        assert str(c.value) == str(f.value) == "severity must be one of error, warning, got 'fatal'"


# -- 6. what from_json gives back --------------------------------------------------------------


def test_from_json_gives_back_every_field_and_labels_as_documented():
    pd = pytest.importorskip("pandas")
    xr = pytest.importorskip("xarray")
    times = np.array(["2024-01-21", "2024-01-22"], dtype="datetime64[ns]")
    da = xr.DataArray(
        np.array([[np.nan, 1.0, np.nan], [2.0, np.nan, np.inf]]),
        dims=("t", "f"),
        coords={"t": times, "f": [0.5, np.inf, np.nan]},
    )
    r = fastfinite.scan(da, by=0)
    back = ScanReport.from_json(r.to_json())
    assert back.to_json() == r.to_json()
    for name in ("nan", "posinf", "cast", "findings", "slices", "count", "elements", "by"):
        assert repr(getattr(back, name)) == repr(getattr(r, name)), name
    assert [(x.kind, x.index) for x in r.locations] == [
        ("nan", (0, 0)), ("nan", (0, 2)), ("nan", (1, 1)), ("posinf", (1, 2)),
    ]  # fmt: skip
    assert isinstance(r.locations[0].labels["t"], np.datetime64)
    got = [x.labels for x in back.locations]
    assert got == [
        {"t": str(times[0]), "f": 0.5},
        {"t": str(times[0]), "f": None},
        {"t": str(times[1]), "f": "inf"},
        {"t": str(times[1]), "f": None},
    ]
    assert got[0]["t"] == "2024-01-21T00:00:00.000000000"
    df = pd.DataFrame({"a": [np.nan, 1.0]}, index=pd.to_datetime(["2024-01-21", "2024-01-22"]))
    (loc,) = ScanReport.from_json(fastfinite.scan(df).to_json()).locations
    assert loc.labels == {"row": "2024-01-21 00:00:00", "column": "a"}


# -- 7. --scheduler takes an address, and only that ---------------------------------------------


@pytest.mark.parametrize("name", ["threads", "processes", "synchronous", "sync", "single-threaded"])
def test_the_command_line_scheduler_refuses_local_names_before_any_work(tmp_path, name):
    path = str(tmp_path / "x.npy")
    np.save(path, np.array([np.nan]))
    r = run_cli("scan", path, "--scheduler", name)
    assert_one_line_error(
        r, "--scheduler takes the address of a running Dask scheduler", repr(name), "--threads",
        "--workers",
    )  # fmt: skip
    assert r.stdout == ""


@pytest.mark.parametrize("text", ["", "tcp://127.0.0.1", "localhost:8786", "threads:1"])
def test_a_malformed_scheduler_address_says_an_address_is_wanted(capsys, tmp_path, text):
    with pytest.raises(SystemExit) as e:
        cli.main(["scan", str(tmp_path / "x.npy"), "--scheduler", text])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "--scheduler must be the address of a Dask scheduler, like tcp://host:8786" in err
    assert "'threads'" not in err  # the API's local names are not offered


def test_a_tls_address_on_the_command_line_points_to_python(capsys, tmp_path):
    with pytest.raises(SystemExit):
        cli.main(["scan", str(tmp_path / "x.npy"), "--scheduler", "tls://h:8786"])
    assert "needs a security configuration: in Python, connect a distributed.Client" in (
        capsys.readouterr().err
    )


def test_the_api_still_takes_local_scheduler_names():
    x = np.array([1.0, np.nan])
    for name in ("threads", "synchronous"):
        assert fastfinite.scan(x, scheduler=name).nan == 1
    with pytest.raises(InvalidArgumentError, match="'threads', 'processes', 'synchronous'"):
        fastfinite.scan(x, scheduler="nonsense")


def test_the_api_local_scheduler_draws_its_progress_bar_on_stderr(capfd):
    r = fastfinite.scan(np.array([1.0, np.nan]), scheduler="threads", progress=True)
    out, err = capfd.readouterr()
    assert r.nan == 1 and out == "" and "Completed" in err


# -- 8. an output file that exists and can be written is written, wherever it is -------------


@contextmanager
def _as_a_user(uid: int = 65534):
    """Permission checks (``os.access``) as an unprivileged user: root's real uid set to
    ``uid`` for the block (its effective uid stays, so reading and writing work as before);
    as a non-root user, nothing to do."""
    if os.getuid() != 0:
        yield
        return
    try:
        os.setreuid(uid, -1)
    except PermissionError:
        pytest.skip("cannot take another real uid here")
    try:
        yield
    finally:
        os.setreuid(0, -1)


@pytest.fixture
def read_only_dir():
    """A directory others may enter but not write in, holding a file anyone may write and
    one nobody may (under /tmp: pytest's tmp_path is closed to other users)."""
    d = tempfile.mkdtemp(prefix="ff-ro-", dir="/tmp")
    for name, mode in (("open.json", 0o666), ("closed.json", 0o444)):
        with open(os.path.join(d, name), "w") as f:
            f.write("old")
        os.chmod(os.path.join(d, name), mode)
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d)


def test_an_existing_writable_file_in_a_read_only_directory_is_accepted(read_only_dir):
    with _as_a_user():
        assert not os.access("/dev", os.W_OK) and not os.access(read_only_dir, os.W_OK)
        assert parse_output_file("--json", "/dev/null", stdout=True) == "/dev/null"
        target = os.path.join(read_only_dir, "open.json")
        assert parse_output_file("--plot", target) == target
        with pytest.raises(InvalidArgumentError, match="closed.json: the file cannot be written"):
            parse_output_file("--json", os.path.join(read_only_dir, "closed.json"))
        new = os.path.join(read_only_dir, "new.json")
        with pytest.raises(
            InvalidArgumentError, match=f"new.json: cannot write in the directory {read_only_dir}"
        ):
            parse_output_file("--json", new)
    with pytest.raises(InvalidArgumentError, match="is a directory"):
        parse_output_file("--json", read_only_dir)


def test_json_to_dev_null_and_to_a_file_in_a_read_only_directory(tmp_path, capsys, read_only_dir):
    old, new = _scan_twice(tmp_path, np.zeros(4), np.array([0.0, np.nan, 0.0, 0.0]))
    target = os.path.join(read_only_dir, "open.json")
    with _as_a_user():
        assert _main(capsys, "diff", old, new, "--json", "/dev/null", "-q")[0] == 1
        assert _main(capsys, "merge", old, "--json", target, "-q")[0] == 0
    assert json.loads(open(target).read())["schema"] == "fastfinite.report/2"


def test_a_group_holding_merged_runs_with_missing_chunks_reads_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = fastfinite.merge_reports(
        [fastfinite.scan(_half_written(f"{i}.zarr", 0.0), max_locations=5) for i in (1, 2)]
    )  # one array of 8: its findings name the runs (1.zarr, 2.zarr), no array of it
    assert runs.shape == (8,) and [f.array for f in runs.findings] == ["1.zarr", "2.zarr"]
    nan = fastfinite.scan(_half_written("n.zarr", np.nan, dtype="f4"))
    g = fastfinite.merge_reports([runs, nan])  # other dtypes: a group
    assert g.dtype == "group" and g.fill_nonfinite is True
    assert [(f.array, f.severity) for f in g.findings] == [
        ("1.zarr + 2.zarr/1.zarr", "warning"), ("1.zarr + 2.zarr/2.zarr", "warning"),
        ("n.zarr", "error"),
    ]  # fmt: skip
    back = ScanReport.from_json(g.to_json())
    assert back.to_dict() == g.to_dict()
    with pytest.raises(KeyError):
        g.member("1.zarr + 2.zarr/1.zarr")  # a run, not an array


def test_member_findings_read_back_alone_and_merged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    zarr.open_group("s.zarr", mode="w").create_array("x", data=np.arange(3.0))
    np.save("s.zarr/stray.npy", np.array([np.nan]))
    with h5py.File("lk.h5", "w") as f:
        f["a"] = np.zeros(2)
        f["soft"] = h5py.SoftLink("/nowhere")
        f["ext"] = h5py.ExternalLink("gone.h5", "/x")
    reports = [fastfinite.scan("s.zarr"), fastfinite.scan("lk.h5")]
    merged = fastfinite.merge_reports(reports)
    assert [(f.kind, f.severity, f.array) for f in merged.findings] == [
        ("stray_file", "warning", "s.zarr"),
        ("unreadable_member", "error", "lk.h5"),
        ("missing_member", "warning", "lk.h5"),
    ]
    for r in (*reports, merged):
        assert ScanReport.from_json(r.to_json()).to_dict() == r.to_dict()
    assert merged.member("lk.h5") is reports[1] and not merged.ok
    d = json.loads(merged.to_json())
    d["arrays"]["lk.h5"]["findings"][0]["severity"] = "warning"  # the error hidden
    _refused(d, "arrays['lk.h5'].findings[0].severity is 'warning', but this unreadable_member")
