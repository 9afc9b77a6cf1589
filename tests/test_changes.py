"""``diff_reports`` and ``fastfinite diff``: what changed between two scans of the same data,
checked against NumPy's positions of each kind in the old and the new values.

Part: ``fastfinite/cache/changes.py`` and the ``diff`` command of ``fastfinite/cli/``.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import fastfinite
from fastfinite import InvalidArgumentError, ScanReport, diff_reports

from .helpers import assert_one_line_error, run_cli

ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__)))


def _positions(x: np.ndarray, kind: str) -> set[tuple[int, ...]]:
    mask = {"nan": np.isnan, "posinf": np.isposinf, "neginf": np.isneginf}[kind](x)
    return {tuple(int(i) for i in p) for p in np.argwhere(mask)}


def _changed(changes, bucket: str, kind: str) -> set[tuple[int, ...]]:
    return {c.where for c in getattr(changes, bucket) if c.kind == kind}


def _store(path, x, chunks=(10, 4)):
    a = zarr.create_array(path, shape=x.shape, chunks=chunks, dtype=x.dtype)
    a[:] = x
    return a


def test_a_store_rewritten_appended_and_with_a_chunk_deleted(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 8))
    x[3, 1] = x[25, 6] = np.nan
    x[12, 2] = np.inf
    path = str(tmp_path / "x.zarr")
    a = _store(path, x)
    old = fastfinite.scan(path)
    y = x.copy()
    y[3, 1] = 0.5  # fixed
    y[33, 0] = np.nan  # new
    y[14, 5] = -np.inf  # new
    a[:] = y
    a.resize((50, 8))
    extra = rng.standard_normal((10, 8))
    extra[7, 3] = np.nan  # in the appended rows
    a[40:] = extra
    y = np.concatenate([y, extra])
    os.remove(os.path.join(path, "c", "0", "1"))  # chunk (0, 1) never written: fill (0)
    y[:10, 4:] = 0.0
    new = fastfinite.scan(path)
    changes = diff_reports(old, new)
    for kind in ("nan", "posinf", "neginf"):
        assert _changed(changes, "new", kind) == _positions(y, kind) - _positions(x, kind)
        assert _changed(changes, "gone", kind) == _positions(x, kind) - _positions(y, kind)
    assert _changed(changes, "new", "missing_chunk") == {(0, 1)}
    counts = {c.kind: (c.old, c.new) for c in changes.counts}
    assert counts["nan"] == (2, 3) and counts["neginf"] == (0, 1)
    assert counts["missing_chunk"] == (0, 1)
    assert "posinf" not in counts and changes.has_new
    assert not (changes.maybe_new or changes.maybe_gone or changes.notes)
    # and back: what was new is gone
    back = diff_reports(new, old)
    assert {(c.kind, c.where) for c in back.gone} == {(c.kind, c.where) for c in changes.new}
    unchanged = diff_reports(new, fastfinite.scan(path))
    assert not (unchanged.new or unchanged.gone or unchanged.counts or unchanged.has_new)


def test_locations_past_a_cut_list_are_never_called_new(tmp_path):
    x = np.zeros(1000)
    x[[10, 20, 30, 40]] = np.nan
    y = x.copy()
    y[[5, 500]] = np.nan  # 5 precedes the old list's end; 500 follows it
    old, new = fastfinite.scan(x, max_locations=2), fastfinite.scan(y, max_locations=2)
    changes = diff_reports(old, new)
    # old lists (10, 20), new (5, 10): 5 precedes 20, so the old list would hold it: new
    assert _changed(changes, "new", "nan") == {(5,)}
    # 20 left the new list, cut at 2: maybe fixed, maybe only unlisted; never called gone
    assert not changes.gone and changes.maybe_gone == {"nan": 1} and not changes.maybe_new
    assert [(c.kind, c.old, c.new) for c in changes.counts] == [("nan", 4, 6)]
    assert changes.notes and "compared by count only" in changes.notes[0]
    # fixing the first two brings 30 and 40 into the new list: they were there all along
    w = x.copy()
    w[[10, 20]] = 0.0
    fixed = diff_reports(old, fastfinite.scan(w, max_locations=2))
    assert not fixed.new and fixed.maybe_new == {"nan": 2} and fixed.has_new
    assert _changed(fixed, "gone", "nan") == {(10,), (20,)}
    # a NaN moved past both lists' ends keeps the count: the note says so; a list long
    # enough tells it exactly
    z = x.copy()
    z[40], z[45] = 0.0, np.nan
    moved = diff_reports(fastfinite.scan(x, max_locations=3), fastfinite.scan(z, max_locations=3))
    assert not (moved.new or moved.gone or moved.counts or moved.has_new) and moved.notes
    moved = diff_reports(fastfinite.scan(x, max_locations=4), fastfinite.scan(z, max_locations=4))
    assert _changed(moved, "new", "nan") == {(45,)} and _changed(moved, "gone", "nan") == {(40,)}
    assert moved.has_new and not moved.notes


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 60),
    old_nan=st.sets(st.integers(0, 59), max_size=12),
    new_nan=st.sets(st.integers(0, 59), max_size=12),
    cap=st.integers(0, 8),
)
def test_new_and_gone_are_true_and_complete_when_nothing_is_cut(n, old_nan, new_nan, cap):
    x, y = np.ones(n), np.ones(n)
    x[[i for i in old_nan if i < n]] = np.nan
    y[[i for i in new_nan if i < n]] = np.nan
    changes = diff_reports(
        fastfinite.scan(x, max_locations=cap), fastfinite.scan(y, max_locations=cap)
    )
    truly_new = _positions(y, "nan") - _positions(x, "nan")
    truly_gone = _positions(x, "nan") - _positions(y, "nan")
    assert _changed(changes, "new", "nan") <= truly_new
    assert _changed(changes, "gone", "nan") <= truly_gone
    cut = np.isnan(x).sum() > cap or np.isnan(y).sum() > cap
    if not cut:
        assert _changed(changes, "new", "nan") == truly_new
        assert _changed(changes, "gone", "nan") == truly_gone
    grew = np.isnan(y).sum() > np.isnan(x).sum()
    assert changes.has_new == bool(grew or changes.new or changes.maybe_new)
    if truly_new and not cut:
        assert changes.has_new


def test_slice_findings_and_cast_targets(tmp_path):
    x = np.random.default_rng(2).standard_normal((50, 4))
    y = x.copy()
    y[:, 2] = 3.0  # a constant feature now
    y[0, 0] = 1e39  # overflows float32 and float16
    old = fastfinite.scan(x, by=-1, cast=("float32", "float16"))
    new = fastfinite.scan(y, by=-1, cast=("float32",))
    changes = diff_reports(old, new)
    assert ("zero_variance", (2,)) in {(c.kind, c.where) for c in changes.new}
    assert _changed(changes, "new", "overflow:float32") == {(0, 0)}
    assert not _changed(changes, "new", "overflow:float16")  # not compared: one report only
    assert changes.notes == ["cast target float16 in one report only"]
    with pytest.raises(InvalidArgumentError, match="other by"):
        diff_reports(old, fastfinite.scan(x, by=0))


def test_reports_of_other_data_are_refused(tmp_path):
    np.save(tmp_path / "a.npy", np.ones(3))
    np.save(tmp_path / "b.npy", np.ones(3))
    a, b = fastfinite.scan(str(tmp_path / "a.npy")), fastfinite.scan(str(tmp_path / "b.npy"))
    with pytest.raises(InvalidArgumentError, match="different data"):
        diff_reports(a, b)
    y = np.ones(1000)
    y[0] = np.nan
    stopped = fastfinite.scan(y, fail_fast=True, region_bytes=8, workers=1)
    assert not stopped.complete
    assert "older scan stopped early" in diff_reports(stopped, stopped).notes[0]
    with pytest.raises(InvalidArgumentError, match="two ScanReport"):
        diff_reports(a, a.to_dict())


def test_groups_compare_array_by_array(tmp_path):
    path = str(tmp_path / "g.zarr")
    g = zarr.open_group(path, mode="w")
    g.create_array("a", shape=(20,), chunks=(5,), dtype="f8")[:] = np.ones(20)
    g.create_array("gone", shape=(4,), chunks=(4,), dtype="f8")[:] = np.ones(4)
    old = fastfinite.scan(path)
    g["a"][7] = np.nan
    del g["gone"]
    g.create_array("added", shape=(3,), chunks=(3,), dtype="f4")[:] = [1, np.inf, 2]
    changes = diff_reports(old, fastfinite.scan(path))
    assert changes.arrays_added == ["added"] and changes.arrays_removed == ["gone"]
    assert {(c.array, c.kind, c.where) for c in changes.new} == {
        ("a", "nan", (7,)),
        ("added", "posinf", (1,)),
    }


def _cli(*args):
    return run_cli(*args)


def test_cli_exit_codes_and_json(tmp_path):
    x = np.ones((6, 3))
    path = tmp_path / "x.npy"
    np.save(path, x)
    old = tmp_path / "old.json"
    assert _cli("scan", path, "--json", old, "-q").returncode == 0
    x[4, 2] = np.nan
    np.save(path, x)
    new = tmp_path / "new.json"
    assert _cli("scan", path, "--json", new, "-q").returncode == 1
    r = _cli("diff", old, new)
    assert r.returncode == 1 and "nan at (4, 2)" in r.stdout, r.stdout
    r = _cli("diff", new, old, "--json", "-")
    assert r.returncode == 0, r.stderr  # the NaN is gone: nothing new
    d = json.loads(r.stdout)
    assert d["gone"] == [{"what": "location", "kind": "nan", "severity": "error", "where": [4, 2]}]
    assert d["has_new"] is False
    assert _cli("diff", old, old, "-q").returncode == 0
    (tmp_path / "junk.json").write_text("{}")
    assert_one_line_error(_cli("diff", old, tmp_path / "junk.json"), "not a fastfinite")
    assert_one_line_error(_cli("diff", old, tmp_path / "none.json"), "cannot read")
    # a report read back is diffed as the report it was written from
    assert not diff_reports(ScanReport.from_json(new.read_text()), fastfinite.scan(path)).counts
