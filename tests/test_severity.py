"""Severities: what makes NaN or inf is an error, the rest a warning. ``report.ok`` is False on
errors only, ``report.clean`` on anything; the command line, ``assert_finite`` and ``guard``
fail on errors unless ``fail_on`` says otherwise; reports carry severities in JSON
(``fastfinite.report/2``) and ``fastfinite.report/1`` reports are still read; a group's
top-level locations name their arrays. Real files, real stores, real datasets.

Part: ``fastfinite/model/kinds.py`` (``SEVERITY``) and ``fastfinite/report/``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite import cli
from fastfinite.errors import InvalidArgumentError, NonFiniteError
from fastfinite.model.casts import TARGETS
from fastfinite.model.kinds import SEVERITY, severity_of
from fastfinite.options import known_kinds, parse_kinds
from fastfinite.report.model import Finding, Location, ScanReport

from .helpers import assert_one_line_error, run_cli

ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__)))


def _main(capsys, *args) -> tuple[int, str]:
    """The command line in this process: its exit code and what it printed."""
    code = cli.main([str(a) for a in args])
    return code, capsys.readouterr().out


def _save(tmp_path, name: str, x: np.ndarray) -> str:
    path = str(tmp_path / name)
    np.save(path, x)
    return path


def _outlier_only() -> np.ndarray:
    """Sample 1 has a value 14 standard deviations out: an outlier, nothing else."""
    x = np.zeros((2, 200))
    x[0] = np.linspace(0.0, 1.0, 200)
    x[1, 0] = 1000.0
    return x


def _as_v1(d: dict) -> dict:
    """A report dict as fastfinite.report/1 wrote it: no severities, no ``clean``."""
    d = json.loads(json.dumps(d))

    def strip(r: dict) -> None:
        r["schema"] = "fastfinite.report/1"
        r.pop("clean")
        for loc in r["locations"]:
            del loc["severity"]
            loc.pop("array", None)  # /1 had no array in a location
        for f in r["findings"]:
            del f["severity"]
        for sub in r["arrays"].values():
            strip(sub)

    strip(d)
    return d


# -- the table ------------------------------------------------------------------------------

ERRORS = {"nan", "posinf", "neginf", "nonfinite", "unreadable_chunk", "nothing_scanned"}
ERRORS |= {"unreadable_member", "unlisted_member"}  # members of a group not checked
WARNINGS = {"zero_variance", "near_zero_variance", "outlier", "missing_chunk"}
WARNINGS |= {"missing_member", "stray_file"}  # no data there, or none a reader reads


def test_every_known_kind_has_the_severity_the_issue_gives():
    groups = {"cast", "overflow", "underflow", "error", "warning"}
    kinds = [k for k in dict.fromkeys(known_kinds()) if k not in groups]
    assert len(kinds) > 40  # every cast target's and dtype's kinds
    for kind in kinds:
        head = kind.split(":", 1)[0]
        if kind in ERRORS or head in ("overflow", "sum_overflow", "variance_overflow"):
            want = "error"
        else:
            assert kind in WARNINGS or head == "underflow", kind
            want = "warning"
        assert severity_of(kind) == want, kind


def test_cast_kinds_of_every_target():
    for t in TARGETS:
        assert severity_of(f"overflow:{t}") == "error"
        assert severity_of(f"underflow:{t}") == "warning"
    assert severity_of("sum_overflow:float16") == "error"
    assert severity_of("variance_overflow:bfloat16") == "error"


def test_the_table_is_the_one_place():
    # each key is a kind or a prefix; nothing else decides a severity
    assert set(SEVERITY.values()) == {"error", "warning"}
    assert {k for k in SEVERITY if k.endswith(":")} == {
        "overflow:", "underflow:", "sum_overflow:", "variance_overflow:",
    }  # fmt: skip


@pytest.mark.parametrize(
    "fill,want",
    [
        (math.nan, "error"),
        (math.inf, "error"),
        (-math.inf, "error"),
        (np.float32("nan"), "error"),
        (complex(0.0, math.inf), "error"),
        (complex(math.nan, 0.0), "error"),
        (0.0, "warning"),
        (-1.5, "warning"),
        (0, "warning"),
        (True, "warning"),
        (complex(1.0, 2.0), "warning"),
        (None, "warning"),
    ],
)
def test_missing_chunk_severity_follows_the_fill_value(fill, want):
    assert severity_of("missing_chunk", fill) == want


def test_fill_value_does_not_change_other_kinds():
    assert severity_of("outlier", math.nan) == "warning"
    assert severity_of("nan", 0.0) == "error"


@pytest.mark.parametrize("kind", ["nonfinit", "overflow", "error", "", "bogus:float32"])
def test_a_name_that_is_no_kind_has_no_severity(kind):
    with pytest.raises(ValueError, match="not a kind"):
        severity_of(kind)


def test_finding_severity_from_kind_given_or_refused():
    assert Finding("outlier", (3,), "m").severity == "warning"
    assert Finding("unreadable_chunk", (0, 1), "m").severity == "error"
    assert Finding("missing_chunk", (0,), "m").severity == "warning"
    f = Finding("missing_chunk", (0,), "m", severity="error")
    assert f.severity == "error" and f.to_dict()["severity"] == "error"
    with pytest.raises(InvalidArgumentError, match="'fatal'"):
        Finding("outlier", (0,), "m", severity="fatal")


def test_location_severity_and_array_in_to_dict():
    loc = Location("underflow:float16", (1, 2), 1e-30)
    assert loc.severity == "warning"
    assert loc.to_dict() == {
        "kind": "underflow:float16", "severity": "warning", "index": [1, 2], "value": 1e-30,
    }  # fmt: skip
    named = Location("nan", (0,), math.nan, None, "/a")
    assert named.severity == "error" and named.to_dict()["array"] == "/a"
    assert named == Location("nan", (0,), math.nan)  # array does not take part in ==


# -- ok and clean, kind by kind ---------------------------------------------------------------


@pytest.mark.parametrize(
    "make,kwargs,kinds,ok",
    [
        (lambda: np.array([1.0, np.nan]), {}, {"nan", "nonfinite"}, False),
        (lambda: np.array([np.inf, 1.0]), {}, {"posinf", "nonfinite"}, False),
        (lambda: np.array([-np.inf]), {}, {"neginf", "nonfinite"}, False),
        (lambda: np.array([1e100]), {}, {"overflow:float32", "overflow", "cast"}, False),
        (lambda: np.array([1e-50, 1.0]), {}, {"underflow:float32", "underflow", "cast"}, True),
        (lambda: np.full((2, 3), 3e38, np.float32), {"by": -1},
         {"sum_overflow:float32", "zero_variance"}, False),
        (lambda: np.array([[1e20], [-1e20]] * 2, np.float32), {"by": -1},
         {"variance_overflow:float32"}, False),
        (lambda: np.array([[1.0, 2.0], [1.0, 3.0]]), {"by": -1}, {"zero_variance"}, True),
        (lambda: np.array([[0.1, 0.1 + 1e-17, 0.1]]), {"by": 0}, {"near_zero_variance"}, True),
        (_outlier_only, {"by": 0}, {"outlier"}, True),
        (lambda: np.array([[1.0, np.nan, 2.0]]), {"by": 0}, {"nan", "nonfinite"}, False),
    ],
)  # fmt: skip
def test_ok_is_false_on_errors_only_and_clean_on_anything(make, kwargs, kinds, ok):
    r = fastfinite.scan(make(), **kwargs)
    severities = {"error"} if not ok else set()
    if any(
        severity_of(k) == "warning" for k in kinds if k not in ("cast", "overflow", "underflow")
    ):
        severities.add("warning")
    assert r.kinds_found() == kinds | severities
    assert r.ok is ok and r.clean is False
    assert r.to_dict()["ok"] is ok and r.to_dict()["clean"] is False


def test_clean_data_is_ok_and_clean():
    for r in (fastfinite.scan(np.arange(12.0).reshape(3, 4), by=0), fastfinite.scan([])):
        assert r.ok and r.clean and r.kinds_found() == set() and r.severity_counts() == {}


def test_severity_counts_split_errors_from_warnings():
    x = _outlier_only()
    x[0, 5] = np.nan
    x[0, 6] = 1e-50
    r = fastfinite.scan(x, by=0)
    assert r.severity_counts() == {
        "error": {"nan": 1, "nonfinite": 1},
        "warning": {"underflow:float32": 1, "outlier": 1},
    }
    assert not r.ok


def test_unreadable_chunk_is_an_error(tmp_path):
    path = str(tmp_path / "c.zarr")
    a = zarr.create_array(store=path, shape=(8, 8), chunks=(4, 4), dtype="f4")
    a[:] = 1.0
    with open(os.path.join(path, "c", "1", "0"), "wb") as f:
        f.write(b"\x00garbage, not a chunk\xff" * 3)
    r = fastfinite.scan(path, on_error="report")
    assert [(f.kind, f.where, f.severity) for f in r.findings] == [
        ("unreadable_chunk", (1, 0), "error")
    ]
    assert r.nonfinite == 0 and not r.ok and not r.clean


def test_nothing_scanned_is_an_error():
    pd = pytest.importorskip("pandas")
    r = fastfinite.scan(pd.DataFrame({"name": ["a", "b"]}))
    assert [(f.kind, f.severity) for f in r.findings] == [("nothing_scanned", "error")]
    assert not r.ok and not r.clean


# -- missing chunks on a real store --------------------------------------------------------


def _store_with_a_hole(path: str, fill) -> zarr.Array:
    a = zarr.create_array(store=path, shape=(8, 8), chunks=(4, 4), dtype="f8", fill_value=fill)
    a[:4, :] = 1.0
    a[4:, :4] = 2.0  # chunk (1, 1) is never written
    assert not os.path.exists(os.path.join(path, "c", "1", "1"))
    return a


def test_a_never_written_chunk_read_as_nan_is_an_error(tmp_path):
    path = str(tmp_path / "nan.zarr")
    _store_with_a_hole(path, np.nan)
    r = fastfinite.scan(path)
    assert [(f.kind, f.where, f.severity) for f in r.findings] == [
        ("missing_chunk", (1, 1), "error")
    ]
    assert r.nan == 16 and r.missing_chunks == 1 and not r.ok
    assert r.severity_counts() == {"error": {"nan": 16, "missing_chunk": 1}}


def test_a_never_written_chunk_read_as_zero_is_a_warning(tmp_path, capsys):
    path = str(tmp_path / "zero.zarr")
    _store_with_a_hole(path, 0.0)
    r = fastfinite.scan(path)
    assert [(f.kind, f.where, f.severity) for f in r.findings] == [
        ("missing_chunk", (1, 1), "warning")
    ]
    assert r.ok and not r.clean and r.kinds_found() == {"missing_chunk", "warning"}
    assert _main(capsys, "scan", path, "--no-progress")[0] == 0
    assert _main(capsys, "scan", path, "--fail-on", "missing_chunk", "-q")[0] == 1
    assert _main(capsys, "scan", path, "--fail-on", "warning", "-q")[0] == 1
    assert _main(capsys, "scan", path, "--fail-on", "error", "-q")[0] == 0


def test_missing_chunks_not_listed_still_make_the_report_unclean(tmp_path):
    path = str(tmp_path / "zero.zarr")
    _store_with_a_hole(path, 0.0)
    r = fastfinite.scan(path, max_locations=0)
    assert r.findings == [] and r.missing_chunks == 1
    assert r.ok and not r.clean and "missing_chunk" in r.kinds_found()


# -- the command line ---------------------------------------------------------------------------


def test_exit_codes_follow_severity(tmp_path, capsys):
    nan = _save(tmp_path, "nan.npy", np.array([[1.0, np.nan]]))
    outlier = _save(tmp_path, "outlier.npy", _outlier_only())
    clean = _save(tmp_path, "clean.npy", np.arange(6.0).reshape(2, 3))
    code, out = _main(capsys, "scan", nan, "--by", "0", "--no-progress")
    assert code == 1 and "PROBLEMS" in out and "errors: nan 1, nonfinite 1" in out
    code, out = _main(capsys, "scan", outlier, "--by", "0", "--no-progress")
    assert code == 0 and "WARNINGS" in out and "warnings: outlier 1" in out
    assert "outlier (warning): 1 slice(s): (1,)" in out and "errors:" not in out
    code, out = _main(capsys, "scan", clean, "--by", "0", "--no-progress")
    assert code == 0 and out.splitlines()[0].endswith("  OK") and "warnings" not in out


@pytest.mark.parametrize(
    "fail_on,codes",  # exit codes for (clean, outlier only, NaN only)
    [
        ("error", (0, 0, 1)),
        ("warning", (0, 1, 1)),
        ("outlier", (0, 1, 0)),
        ("zero_variance", (0, 0, 0)),
        ("nonfinite", (0, 0, 1)),
        ("error,outlier", (0, 1, 1)),
    ],
)
def test_fail_on_selects_kinds_and_severities(tmp_path, capsys, fail_on, codes):
    files = [
        _save(tmp_path, "clean.npy", np.arange(6.0).reshape(2, 3)),
        _save(tmp_path, "outlier.npy", _outlier_only()),
        _save(tmp_path, "nan.npy", np.array([[1.0, np.nan], [2.0, 3.0]])),
    ]
    got = tuple(_main(capsys, "scan", f, "--by", "0", "--fail-on", fail_on, "-q")[0] for f in files)
    assert got == codes


def test_cast_underflow_fails_only_when_asked(tmp_path, capsys):
    path = _save(tmp_path, "u.npy", np.array([1e-50, 1.0]))
    assert _main(capsys, "scan", path, "-q")[0] == 0
    assert _main(capsys, "scan", path, "--fail-on", "underflow", "-q")[0] == 1
    assert _main(capsys, "scan", path, "--fail-on", "underflow:float32", "-q")[0] == 1
    assert _main(capsys, "scan", path, "--fail-on", "overflow", "-q")[0] == 0


def test_the_severity_groups_are_listed_and_a_typo_is_refused(tmp_path):
    path = _save(tmp_path, "x.npy", np.zeros(3))
    r = run_cli("scan", path, "--fail-on", "warnings")
    assert_one_line_error(r, "unknown kind 'warnings'", "error, warning")
    assert parse_kinds("warning") == {"warning", "error"}
    assert parse_kinds("error") == {"error"}
    assert parse_kinds(["outlier", "warning"]) == {"outlier", "warning", "error"}


def test_a_real_process_exits_0_on_warnings_and_1_on_errors(tmp_path):
    outlier = _save(tmp_path, "o.npy", _outlier_only())
    run = [sys.executable, "-m", "fastfinite", "scan", "--by", "0", "--no-progress"]
    r = subprocess.run([*run, outlier], capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 0 and "WARNINGS" in r.stdout and r.stderr == ""
    x = _outlier_only()
    x[0, 3] = np.inf
    bad = _save(tmp_path, "b.npy", x)
    r = subprocess.run([*run, bad], capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 1 and "PROBLEMS" in r.stdout


# -- JSON: /2 and /1 --------------------------------------------------------------------------


def test_json_round_trip_keeps_every_severity(tmp_path):
    path = str(tmp_path / "h.zarr")
    _store_with_a_hole(path, 0.0)
    a = zarr.open_array(path)
    a[0, 0] = np.nan
    a[0, 1] = 1e-50
    r = fastfinite.scan(path, by=0)
    d = json.loads(r.to_json())
    assert d["schema"] == "fastfinite.report/2" and d["ok"] is False and d["clean"] is False
    assert [(x["kind"], x["severity"]) for x in d["locations"]] == [
        ("nan", "error"), ("underflow:float32", "warning"),
    ]  # fmt: skip
    back = ScanReport.from_json(r.to_json())
    assert [(f.kind, f.where, f.severity) for f in back.findings] == [
        (f.kind, f.where, f.severity) for f in r.findings
    ]
    assert ("missing_chunk", "warning") in {(f.kind, f.severity) for f in back.findings}
    assert back.to_dict() == r.to_dict()


def test_a_v1_report_is_read_with_severities_from_its_kinds(tmp_path):
    nan_path, zero_path = str(tmp_path / "n.zarr"), str(tmp_path / "z.zarr")
    _store_with_a_hole(nan_path, np.nan)
    _store_with_a_hole(zero_path, 0.0)
    for path, want in ((nan_path, "error"), (zero_path, "warning")):
        v1 = _as_v1(fastfinite.scan(path, by=0).to_dict())
        r = ScanReport.from_dict(v1)
        assert [(f.kind, f.severity) for f in r.findings if f.kind == "missing_chunk"] == [
            ("missing_chunk", want)
        ]
        assert r.ok is (want == "warning")
        assert r.to_dict()["schema"] == "fastfinite.report/2"


@pytest.mark.parametrize(
    "schema,match",
    [
        ("fastfinite.report/3", r"cannot read \(it writes 'fastfinite.report/2'\): upgrade"),
        ("fastfinite.report/0", "unknown schema 'fastfinite.report/0'.*report/1.*report/2"),
        ("other.report/2", "not a fastfinite report: schema 'other.report/2'.*report/1.*report/2"),
    ],
)
def test_an_unknown_schema_is_refused_naming_the_known_ones(schema, match):
    d = fastfinite.scan(np.zeros(2)).to_dict()
    d["schema"] = schema
    with pytest.raises(InvalidArgumentError, match=match):
        ScanReport.from_dict(d)


def test_merge_reads_v1_and_v2_reports(tmp_path, capsys):
    a = fastfinite.scan(_outlier_only(), by=0)
    x = _outlier_only()
    x[1, 7] = np.nan
    b = fastfinite.scan(x, by=0)
    p1, p2 = tmp_path / "a1.json", tmp_path / "b2.json"
    p1.write_text(json.dumps(_as_v1(a.to_dict())))
    p2.write_text(b.to_json())
    code, out = _main(capsys, "merge", p1, "--json", "-")
    d = json.loads(out)
    assert code == 0 and d["schema"] == "fastfinite.report/2" and d["ok"] and not d["clean"]
    assert [(f["kind"], f["severity"], f["where"]) for f in d["findings"]] == [
        ("outlier", "warning", [1])
    ]
    code, out = _main(capsys, "merge", p1, p2, "--json", "-")
    d = json.loads(out)
    assert code == 1 and d["nan"] == 1 and d["shape"] == [4, 200]
    assert [(x["kind"], x["severity"], x["index"]) for x in d["locations"]] == [
        ("nan", "error", [3, 7])
    ]


def test_diff_reads_a_v1_report_and_exits_on_new_errors_only(tmp_path, capsys):
    clean = np.arange(400.0).reshape(2, 200)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(_as_v1(fastfinite.scan(clean, by=0).to_dict())))
    warn = tmp_path / "warn.json"
    warn.write_text(fastfinite.scan(_outlier_only(), by=0).to_json())
    code, out = _main(capsys, "diff", old, warn)
    assert code == 0 and "outlier of (1,)" in out  # new, but a warning
    assert _main(capsys, "diff", old, warn, "--fail-on", "warning", "-q")[0] == 1
    assert _main(capsys, "diff", old, warn, "--fail-on", "outlier", "-q")[0] == 1
    x = clean.copy()
    x[0, 3] = np.nan
    err = tmp_path / "err.json"
    err.write_text(fastfinite.scan(x, by=0).to_json())
    code, out = _main(capsys, "diff", old, err, "--json", "-")
    d = json.loads(out)
    assert code == 1 and d["has_new"] is True
    assert {(c["kind"], c["severity"]) for c in d["new"]} == {
        ("nan", "error"), ("nonfinite", "error"),
    }  # fmt: skip
    assert _main(capsys, "diff", old, err, "--fail-on", "outlier", "-q")[0] == 0


def test_fail_on_new_fails_on_new_errors_by_default(tmp_path, capsys):
    path = str(tmp_path / "x.zarr")
    a = zarr.create_array(store=path, shape=(2, 200), chunks=(1, 200), dtype="f8")
    a[:] = _outlier_only()
    scan = ["scan", path, "--by", "0", "--cache", tmp_path / "cache", "--fail-on-new", "-q"]
    assert _main(capsys, *scan)[0] == 0  # all is new, but only an outlier
    assert _main(capsys, *scan, "--fail-on", "warning")[0] == 0  # nothing new now
    a[0, 9] = np.nan
    assert _main(capsys, *scan, "--fail-on", "outlier")[0] == 0
    a[0, 10] = np.nan
    assert _main(capsys, *scan)[0] == 1


# -- assert_finite, guard, localize --------------------------------------------------------------


def test_assert_finite_passes_warnings_unless_asked():
    x = _outlier_only()
    r = fastfinite.assert_finite(x, by=0)
    assert r.ok and not r.clean
    with pytest.raises(NonFiniteError, match=r"outlier \(1,\)"):
        fastfinite.assert_finite(x, by=0, fail_on="warning")
    with pytest.raises(NonFiniteError, match=r"nan 1 at \(0, 0\)"):
        fastfinite.assert_finite(np.array([[np.nan, 1.0]]), fail_on="error")


def test_guard_passes_an_underflow_by_default_and_flags_it_when_asked():
    batches = [np.array([[1.0, 2.0]]), np.array([[1e-50, 1.0]]), np.array([[np.inf, 1.0]])]
    g = fastfinite.guard(batches, on_bad="skip")
    assert [b[0, 0] for b in g] == [1.0, 1e-50] and g.bad == 1
    g = fastfinite.guard(batches, on_bad="skip", fail_on="warning")
    assert [b[0, 0] for b in g] == [1.0] and g.bad == 2
    assert "underflow:float32" in g.problems[0]


def test_localize_still_replays_a_report_with_warnings_only():
    r = fastfinite.scan(np.ones((3, 3)), by=0, localize=True, eps=0.0)
    assert r.ok and not r.clean
    assert [(x.op, x.error, x.index) for x in r.localized[:2]] == [
        ("divide", "invalid", (0, 0)), ("divide", "invalid", (0, 1)),
    ]  # fmt: skip


# -- a group's top-level locations ------------------------------------------------------------


def test_hdf5_file_locations_name_their_arrays(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = str(tmp_path / "g.h5")
    with h5py.File(path, "w") as f:
        f["a"] = np.array([1.0, np.nan, 3.0])
        f["sub/b"] = np.array([[np.inf, 1.0], [2.0, np.nan]])
        f["sub/c"] = np.array([1e100])
    r = fastfinite.scan(path)
    assert [(x.kind, x.index, x.array, x.severity) for x in r.locations] == [
        ("nan", (1,), "/a", "error"),
        ("posinf", (0, 0), "/sub/b", "error"),
        ("nan", (1, 1), "/sub/b", "error"),
        ("overflow:float32", (0,), "/sub/c", "error"),
    ]
    assert (r.nan, r.posinf, r.cast["float32"].overflow) == (2, 1, 1)
    for kind, n in r.counts().items():
        assert len(r.locations_of(kind)) == n
    with pytest.raises(NonFiniteError, match=r"nan 2 at /a \(1,\), /sub/b \(1, 1\)"):
        fastfinite.assert_finite(path)


def test_zarr_group_locations_are_capped_per_kind_in_array_order(tmp_path):
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("x", data=np.array([np.nan, 1.0, np.nan]), chunks=(2,))
    g.create_array("y/z", data=np.array([[np.nan, np.inf], [np.nan, 2.0]]), chunks=(1, 2))
    r = fastfinite.scan(str(tmp_path / "g.zarr"), max_locations=3)
    assert r.nan == 4 and r.posinf == 1
    assert [(x.kind, x.index, x.array) for x in r.locations] == [
        ("nan", (0,), "x"),
        ("nan", (2,), "x"),
        ("nan", (0, 0), "y/z"),
        ("posinf", (0, 1), "y/z"),
    ]
    d = r.to_dict()
    assert [x["array"] for x in d["locations"]] == ["x", "x", "y/z", "y/z"]
    back = ScanReport.from_dict(d)
    assert [x.array for x in back.locations] == ["x", "x", "y/z", "y/z"]
    # the summary says them under each array, not twice
    assert str(r).count("nan at") == 2


def test_xarray_dataset_locations_name_their_variables():
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset(
        {"u": ("t", [1.0, np.nan]), "v": (("t", "c"), [[np.inf, 0.0], [1.0, 2.0]])},
        coords={"t": [10, 20], "c": ["p", "q"]},
    )
    r = fastfinite.scan(ds)
    assert [(x.kind, x.index, x.array, x.labels) for x in r.locations] == [
        ("nan", (1,), "u", {"t": 20}),
        ("posinf", (0, 0), "v", {"t": 10, "c": "p"}),
    ]


def test_merged_group_locations_name_the_inputs():
    a = fastfinite.scan(np.array([np.nan, 1.0]))
    a.name = "a.npy"
    b = fastfinite.scan(np.array([[1.0], [np.inf]], np.float32))
    b.name = "b.npy"
    m = fastfinite.merge_reports([a, b])
    assert [(x.kind, x.index, x.array) for x in m.locations] == [
        ("nan", (0,), "a.npy"),
        ("posinf", (1, 0), "b.npy"),
    ]
    assert not m.ok


# -- false alarms: scikit-learn's bundled datasets -------------------------------------------

SKLEARN = {
    # dataset: the kinds found with by=-1 (every one of them a warning)
    "load_iris": set(),
    "load_digits": {"outlier", "zero_variance", "warning"},
    "load_wine": set(),
    "load_breast_cancer": {"outlier", "warning"},
    "load_diabetes": set(),
}


@pytest.mark.parametrize("name", sorted(SKLEARN))
def test_sklearn_bundled_datasets_are_ok_per_sample_and_per_feature(name):
    datasets = pytest.importorskip("sklearn.datasets")
    X = getattr(datasets, name)().data
    per_sample = fastfinite.scan(X, by=0)
    per_feature = fastfinite.scan(X, by=-1)
    assert per_sample.ok and per_sample.clean
    assert per_feature.ok and per_feature.kinds_found() == SKLEARN[name]
    assert per_feature.clean is (not SKLEARN[name])


# statsmodels' and vega_datasets' bundled (offline) datasets: the ones holding missing values
# are not ok, with exactly their NaN; every other one is ok per row and per column
STATSMODELS = (
    "anes96 cancer ccard china_smoking co2 committee copper cpunish danish_data elec_equip "
    "elnino engel fair fertility grunfeld heart interest_inflation longley macrodata "
    "modechoice nile randhie scotland spector stackloss star98 statecrime strikes sunspots"
).split()
VEGA = (
    "airports anscombe barley burtin cars crimea driving iowa-electricity iris la-riots ohlc "
    "seattle-temps seattle-weather sf-temps stocks us-employment wheat"
).split()
WITH_MISSING_VALUES = {"co2", "fertility", "cars", "la-riots", "wheat"}


def _assert_ok_unless_missing(name: str, df) -> None:
    missing = int(df.select_dtypes("number").isna().sum().sum())
    assert (missing > 0) is (name in WITH_MISSING_VALUES)
    for by in (0, -1):
        r = fastfinite.scan(df, by=by)
        assert r.nan == missing and r.posinf == r.neginf == 0
        assert r.ok is (missing == 0), (name, by, r.severity_counts())
        assert "error" not in r.kinds_found() or missing


@pytest.mark.parametrize("name", STATSMODELS)
def test_statsmodels_bundled_datasets(name):
    pytest.importorskip("statsmodels")
    import importlib

    df = importlib.import_module(f"statsmodels.datasets.{name}").load_pandas().data
    _assert_ok_unless_missing(name, df)


@pytest.mark.parametrize("name", VEGA)
@pytest.mark.filterwarnings("ignore:The 'convert_dates' keyword")  # vega_datasets' own read
def test_vega_datasets_bundled_offline(name):
    vega = pytest.importorskip("vega_datasets")
    assert name in vega.local_data.list_datasets()  # shipped in the package: no network
    _assert_ok_unless_missing(name, vega.local_data(name))
