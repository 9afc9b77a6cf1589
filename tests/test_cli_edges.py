"""The command line off the happy path: every failure is exit code 2 and one line on stderr,
in bounded time; checks a typo would switch off are refused; ``--json -`` is JSON alone;
the summary says what was done.

Part: ``fastfinite/cli/``.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pandas as pd
import pytest
import zarr

from .helpers import assert_one_line_error, run_cli


def _cli(*args, timeout=120):
    return run_cli(*args, timeout=timeout)


@pytest.fixture
def nan_npy(tmp_path):
    p = tmp_path / "x.npy"
    x = np.arange(20.0).reshape(4, 5)
    x[1, 2] = np.nan
    np.save(p, x)
    return p


def test_fail_on_typo_is_refused_not_passed(nan_npy):
    assert_one_line_error(_cli("scan", nan_npy, "--fail-on", "nonfinit"), "unknown kind 'nonfinit'")
    assert _cli("scan", nan_npy, "--fail-on", "nonfinite", "-q").returncode == 1
    assert _cli("scan", nan_npy, "--fail-on", "cast", "-q").returncode == 0


def test_failures_are_one_line_and_exit_2(tmp_path):
    (tmp_path / "e.npy").write_bytes(b"")
    (tmp_path / "t.npy").write_text("1,2,3\n")
    os.mkfifo(tmp_path / "f.npy")
    cases = [
        (("scan", tmp_path / "e.npy"), "it is empty"),
        (("scan", tmp_path / "t.npy"), "does not start with NumPy's magic"),
        (("scan", tmp_path / "nothing.npy"), "no such file"),
        (("scan", tmp_path / "e.npy", "--max-locations", "x"), "--max-locations must be"),
        (("scan", tmp_path / "e.npy", "--by", "a"), "--by must be"),
        (("merge", tmp_path / "t.npy"), "not a fastfinite JSON report"),
    ]
    for args, words in cases:
        assert_one_line_error(_cli(*args), words)
    start = time.time()
    assert_one_line_error(_cli("scan", tmp_path / "f.npy", timeout=20), "not a regular file")
    assert time.time() - start < 20


def test_huge_max_locations_allocates_nothing_up_front(nan_npy):
    r = _cli("scan", nan_npy, "--max-locations", "1000000000000", "--json", "-")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["locations"][0]["index"] == [1, 2]


def test_json_to_stdout_is_the_json_alone(nan_npy, tmp_path):
    for extra in ([], ["-q"], ["--plot", str(tmp_path / "p.png")]):
        r = _cli("scan", nan_npy, "--json", "-", *extra)
        assert r.returncode == 1, r.stderr
        assert json.loads(r.stdout)["nan"] == 1  # nothing else on stdout


def test_plot_axes_out_of_range_is_an_error(nan_npy, tmp_path):
    r = _cli("scan", nan_npy, "--plot", tmp_path / "p.png", "--plot-axes", "0,7", "-q")
    assert_one_line_error(r, "plot axes must be two different axes of the 2-d array")


def test_a_group_summary_says_by_and_z_and_which_array(tmp_path):
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    x = np.ones((6, 4))
    x[2] = 7.0
    x[:, 1] = np.arange(6.0)
    g.create_array("a/x", data=x, chunks=(3, 4))
    r = _cli("scan", tmp_path / "g.zarr", "--by", "0", "--z-threshold", "8", "--no-progress")
    assert r.returncode == 0, r.stderr  # a zero-variance slice is a warning, not an error
    assert "WARNINGS" in r.stdout and "zero_variance (warning)" in r.stdout
    assert _cli("scan", tmp_path / "g.zarr", "--by", "0", "--fail-on", "warning").returncode == 1
    assert "by=(0,), z threshold 8" in r.stdout and "by=None" not in r.stdout
    assert "[a/x]" in r.stdout
    d = json.loads(_cli("scan", tmp_path / "g.zarr", "--by", "0", "--json", "-").stdout)
    assert d["by"] == [0] and d["z_threshold"] == 10.0
    assert {f["array"] for f in d["findings"]} == {"a/x"}


def test_merge_of_float32_and_float64_is_a_group(tmp_path):
    x = np.zeros((3, 2))
    paths = []
    for dt in ("f4", "f8"):
        np.save(tmp_path / f"{dt}.npy", x.astype(dt))
        paths.append(tmp_path / f"{dt}.json")
        assert _cli("scan", tmp_path / f"{dt}.npy", "--json", paths[-1], "-q").returncode == 0
    d = json.loads(_cli("merge", *paths, "--json", "-").stdout)
    assert d["dtype"] == "group" and len(d["arrays"]) == 2


def test_nested_and_text_only_tables(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"v": pa.array([[1.0, float("nan")], [2.0]])}), tmp_path / "n.pq")
    r = _cli("scan", tmp_path / "n.pq", "--json", "-")
    assert r.returncode == 1 and json.loads(r.stdout)["nan"] == 1
    pd.DataFrame({"t": ["a", "b"]}).to_parquet(tmp_path / "t.parquet")
    r = _cli("scan", tmp_path / "t.parquet", "--no-progress")
    assert r.returncode == 1 and "nothing_scanned" in r.stdout, r.stdout
