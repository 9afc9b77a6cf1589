"""Issue 42, options and paths: every flag of every public function is True or False and
nothing else; an empty or malformed command-line value is refused, never read as "off";
every output path is checked before any work; a file that is not a report is an error
naming it; ``scheduler="tcp://..."`` with ``cache=`` on real ``dask scheduler`` and
``dask worker`` processes, from Python and from the command line.

Part: ``fastfinite/options.py`` and ``fastfinite/cli/``.
"""

from __future__ import annotations

import inspect
import json
import os

import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite import InvalidArgumentError
from fastfinite.options import parse_bool

from .helpers import assert_one_line_error, run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT, FASTFINITE_NUMPY_TWIN_MAX="0")
NOT_BOOLS = ["no", "yes", "false", "True", 1.5, None, 0, 1, [], np.float64(1.0)]


def _cli(*args, cwd=None, timeout=300):
    return run_cli(*args, cwd=cwd, timeout=timeout)


@pytest.fixture
def big_npy(tmp_path):
    """1e100 at (1, 2): a cast risk that ``--cast`` off would pass."""
    x = np.zeros((4, 5))
    x[1, 2] = 1e100
    p = tmp_path / "x.npy"
    np.save(p, x)
    return p


def _bool_params(fn) -> list[str]:
    return [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.annotation in ("bool", bool) and p.kind is p.KEYWORD_ONLY
    ]


def _call(name: str, **kw):
    """Each public function that takes flags, on input it accepts."""
    x = np.zeros((3, 4))
    if name == "scan":
        return fastfinite.scan(x, **kw)
    if name == "assert_finite":
        return fastfinite.assert_finite(x, **kw)
    if name == "guard":
        return list(fastfinite.guard([x], **kw))
    if name == "Guard":
        return fastfinite.Guard([x], **kw)
    if name == "compile":
        return fastfinite.compile(modes=[], **kw)
    raise AssertionError(name)


FLAGS = [
    *(("scan", p) for p in _bool_params(fastfinite.scan)),
    *(("assert_finite", p) for p in _bool_params(fastfinite.scan)),  # its **kwargs: scan's
    *(("guard", p) for p in _bool_params(fastfinite.Guard.__init__)),
    *(("Guard", p) for p in _bool_params(fastfinite.Guard.__init__)),
    *(("compile", p) for p in _bool_params(fastfinite.compile)),
]


# -- flags: True or False ---------------------------------------------------------------


def test_every_flag_of_every_public_function_is_found():
    names = {f"{fn}.{p}" for fn, p in FLAGS}
    assert {
        "scan.progress",
        "scan.fail_fast",
        "scan.compute",
        "scan.localize",
        "scan.send_credentials",
        "scan.device_copy",
        "Guard.device_copy",
        "compile.progress",
    } <= names


@pytest.mark.parametrize("fn,option", FLAGS, ids=[f"{f}-{p}" for f, p in FLAGS])
@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
def test_a_flag_that_is_not_true_or_false_is_refused(fn, option, value):
    with pytest.raises(InvalidArgumentError) as e:
        _call(fn, **{option: value})
    msg = str(e.value)
    assert msg == f"{option} must be True or False, got {value!r}"


@pytest.mark.parametrize("fn,option", FLAGS, ids=[f"{f}-{p}" for f, p in FLAGS])
def test_numpy_bools_are_flags(fn, option):
    if (fn, option) in {("scan", "compute"), ("assert_finite", "compute")}:
        value = np.True_  # compute=False gives a delayed object: its own test
    else:
        value = np.False_
    _call(fn, **{option: value})


def test_localize_no_does_not_replay_and_fail_fast_yes_does_not_stop(tmp_path):
    x = np.zeros((6, 4))
    x[1, 1] = np.nan
    with pytest.raises(InvalidArgumentError, match="localize must be True or False, got 'no'"):
        fastfinite.scan(x, by=0, localize="no")
    with pytest.raises(InvalidArgumentError, match="fail_fast must be True or False, got 'yes'"):
        fastfinite.scan(x, fail_fast="yes")
    r = fastfinite.scan(x, by=0, localize=np.True_)
    assert r.localized and r.localized[0].op == "isnan"
    assert fastfinite.scan(x, by=0, localize=False).localized == []


def test_compute_false_as_numpy_bool_gives_a_delayed_report():
    lazy = fastfinite.scan(np.array([1.0, np.nan]), compute=np.False_)
    assert lazy.compute(scheduler="synchronous").nan == 1


def test_parse_bool_is_the_one_rule():
    assert parse_bool("x", True) is True and parse_bool("x", np.bool_(False)) is False
    for v in ("no", 0, 1, None, np.int8(1)):
        with pytest.raises(InvalidArgumentError) as e:
            parse_bool("x", v)
        assert str(e.value) == f"x must be True or False, got {v!r}"


def test_a_bad_flag_is_refused_before_the_input_is_opened(tmp_path):
    with pytest.raises(InvalidArgumentError, match="progress"):
        fastfinite.scan(str(tmp_path / "missing.npy"), progress="false")
    with pytest.raises(InvalidArgumentError, match="compute"):
        fastfinite.scan(str(tmp_path / "missing.npy"), compute="no")


@pytest.mark.parametrize(
    "kw,words",
    [
        (dict(z_threshold=np.True_), "z_threshold"),
        (dict(timeout=float("inf")), "timeout must be a finite number"),
        (dict(scheduler=""), "scheduler must be"),
        (dict(scheduler="tcp://host"), "with its port"),
        (dict(scheduler=5), "got 5"),
        (dict(cache=""), "cache must be the path of a directory"),
    ],
    ids=["z-bool", "timeout-inf", "sched-empty", "sched-no-port", "sched-int", "cache-empty"],
)
def test_other_options_are_refused_before_the_input_is_opened(tmp_path, kw, words):
    with pytest.raises(InvalidArgumentError, match=words):
        fastfinite.scan(str(tmp_path / "missing.npy"), **kw)


def test_compile_processes_must_be_a_count():
    with pytest.raises(InvalidArgumentError, match="processes must be an int >= 1, got '2'"):
        fastfinite.compile(modes=[], processes="2")


# -- command-line values: meaningful or refused ------------------------------------------


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--cast", ""], "--cast"),
        (["--cast", ","], "--cast"),
        (["--cast", " , "], "--cast"),
        (["--cast", "none,float16"], "--cast"),
        (["--by", ""], "--by"),
        (["--by", ","], "--by"),
        (["--fail-on", ""], "--fail-on"),
        (["--fail-on", ","], "--fail-on"),
        (["--plot-axes", ""], "--plot-axes"),
        (["--plot-axes", "0"], "--plot-axes"),
        (["--plot-axes", "1,1"], "--plot-axes"),
        (["--storage-option", "anon"], "--storage-option"),
        (["--storage-option", "=1"], "--storage-option"),
        (["--storage-option", "a..b=1"], "--storage-option"),
        (["--storage-option", "a.=1"], "--storage-option"),
        (["--storage-option", "a=1", "--storage-option", "a=2"], "--storage-option a"),
        (["--storage-option", "a=1", "--storage-option", "a.b=2"], "--storage-option a.b"),
        (["--scheduler", ""], "--scheduler"),
        (["--scheduler", "tcp://127.0.0.1"], "--scheduler"),
        (["--z-threshold", "nan"], "--z-threshold"),
        (["--z-threshold", ""], "--z-threshold"),
        (["--z-threshold", "-1"], "--z-threshold"),
        (["--eps", "-1"], "--eps"),
        (["--eps", "x"], "--eps"),
        (["--timeout", "inf"], "--timeout"),
        (["--timeout", "0"], "--timeout"),
        (["--threads", ""], "--threads"),
        (["--region-bytes", "0"], "--region-bytes"),
        (["--json", ""], "--json"),
        (["--plot", ""], "--plot"),
        (["--cache", ""], "--cache"),
        (["--threads", "2", "--scheduler", "threads"], "--threads"),
        (["--plot-axes", "0,1"], "--plot-axes"),
        (["--fail-on-new"], "--fail-on-new"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_an_empty_or_malformed_flag_is_refused_never_off(big_npy, args, flag):
    r = _cli("scan", big_npy, *args)
    assert_one_line_error(r, flag)
    assert r.stdout == ""


def test_cast_none_is_the_one_way_to_turn_the_cast_check_off(big_npy):
    assert _cli("scan", big_npy, "--cast", "none", "-q").returncode == 0
    assert _cli("scan", big_npy, "--cast", " NONE ", "-q").returncode == 0
    assert _cli("scan", big_npy, "-q").returncode == 1
    assert _cli("scan", big_npy, "--cast", "float16,", "-q").returncode == 1


@pytest.mark.parametrize(
    "args,flag",
    [
        (["compile", "--mode", ""], "--mode"),
        (["compile", "--mode", ","], "--mode"),
        (["compile", "--dtype", ""], "--dtype"),
        (["compile", "--processes", "0"], "--processes"),
        (["demo", "--dir", ""], "--dir"),
        (["demo", "--size-mb", "0"], "--size-mb"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_compile_and_demo_refuse_empty_values(args, flag):
    assert_one_line_error(_cli(*args, timeout=60), flag)


# -- output paths: checked before any work --------------------------------------------


def _bad_outputs(tmp_path):
    (tmp_path / "file.txt").write_text("mine")
    (tmp_path / "adir").mkdir()
    return {
        "missing dir": (str(tmp_path / "no" / "such" / "r.out"), "does not exist"),
        "under a file": (str(tmp_path / "file.txt" / "r.out"), "is not a directory"),
        "a directory": (str(tmp_path / "adir"), "is a directory"),
    }


@pytest.mark.parametrize("flag", ["--json", "--plot"])
@pytest.mark.parametrize("case", ["missing dir", "under a file", "a directory"])
def test_an_output_file_is_checked_before_the_input_is_opened(tmp_path, flag, case):
    path, words = _bad_outputs(tmp_path)[case]
    # the input does not exist: the error is the output's, so it came first
    r = _cli("scan", tmp_path / "missing.npy", flag, path)
    assert_one_line_error(r, flag, path, words)
    assert (tmp_path / "file.txt").read_text() == "mine"
    assert not (tmp_path / "no").exists() and os.listdir(tmp_path / "adir") == []


@pytest.mark.parametrize("case", ["missing dir", "under a file"])
def test_merge_diff_json_is_checked_before_the_reports_are_read(tmp_path, case):
    path, words = _bad_outputs(tmp_path)[case]
    missing = tmp_path / "missing.json"
    assert_one_line_error(_cli("merge", missing, "--json", path), "--json", path, words)
    assert_one_line_error(_cli("diff", missing, missing, "--json", path), "--json", path, words)


def test_a_cache_that_cannot_be_made_is_refused_before_the_scan(tmp_path, big_npy):
    (tmp_path / "file.txt").write_text("mine")
    under = tmp_path / "file.txt" / "cache"
    r = _cli("scan", tmp_path / "missing.npy", "--cache", under)
    assert_one_line_error(r, "--cache", str(under), "which is a file")
    assert_one_line_error(_cli("scan", big_npy, "--cache", tmp_path / "file.txt"), "is a file")
    with pytest.raises(InvalidArgumentError, match="cache .*file.txt/cache: is under"):
        fastfinite.scan(str(tmp_path / "missing.npy"), cache=str(under))
    assert (tmp_path / "file.txt").read_text() == "mine"


def test_demo_dir_under_a_file_is_refused_before_writing(tmp_path):
    (tmp_path / "file.txt").write_text("mine")
    r = _cli("demo", "--dir", tmp_path / "file.txt" / "demo", "--size-mb", "1", timeout=60)
    assert_one_line_error(r, "--dir", "which is a file")
    assert (tmp_path / "file.txt").read_text() == "mine"


def test_outputs_never_overwrite_the_input(tmp_path, big_npy):
    before = big_npy.read_bytes()
    assert_one_line_error(_cli("scan", big_npy, "--json", big_npy), "--json", "input")
    assert_one_line_error(_cli("scan", big_npy, "--plot", big_npy), "--plot", "input")
    store = tmp_path / "s.zarr"
    zarr.create_array(store=str(store), data=np.zeros((4, 4)), chunks=(2, 2))
    listing = sorted(os.listdir(store))
    for flag, value in (("--json", store / "r.json"), ("--cache", store / "cache")):
        assert_one_line_error(_cli("scan", store, flag, value), flag, "input")
    assert big_npy.read_bytes() == before and sorted(os.listdir(store)) == listing


def test_json_and_plot_into_one_file_is_refused(tmp_path, big_npy):
    out = tmp_path / "r.out"
    assert_one_line_error(_cli("scan", big_npy, "--json", out, "--plot", out), "--json", "--plot")
    assert not out.exists()


def test_json_dash_is_still_stdout_and_a_good_path_is_written(tmp_path, big_npy):
    r = _cli("scan", big_npy, "--json", "-")
    assert r.returncode == 1 and json.loads(r.stdout)["cast"]["float32"]["overflow"] == 1
    out = tmp_path / "new" / "r.json"
    out.parent.mkdir()
    assert _cli("scan", big_npy, "--json", out, "-q").returncode == 1
    assert json.loads(out.read_text())["shape"] == [4, 5]


# -- reading reports: a file that is not one says so, naming it ----------------------


@pytest.fixture
def report_files(tmp_path, big_npy):
    good = fastfinite.scan(str(big_npy)).to_dict()
    files = {}

    def put(name, content):
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        files[name] = p

    put("good.json", json.dumps(good))
    put("empty.json", b"")
    put("blank.json", " \n\t\n")
    put("binary.json", bytes(range(256)) * 4)
    put("latin1.json", b'{"schema": "caf\xe9"}')
    put("list.json", "[1, 2, 3]")
    put("other.json", json.dumps({"name": "x", "rows": 3}))
    put("cut.json", json.dumps(good)[:100])
    put("future.json", json.dumps({**good, "schema": "fastfinite.report/99"}))
    put("oddschema.json", json.dumps({**good, "schema": "fastfinite.report/one"}))
    put("nostats.json", json.dumps({k: v for k, v in good.items() if k != "stats"}))
    put("badcount.json", json.dumps({**good, "nan": "many"}))
    put("badshape.json", json.dumps({**good, "shape": [4, -5]}))
    put("badlocs.json", json.dumps({**good, "locations": 7}))
    files["x.npy"] = big_npy
    (tmp_path / "adir.json").mkdir()
    files["adir.json"] = tmp_path / "adir.json"
    os.mkfifo(tmp_path / "fifo.json")
    files["fifo.json"] = tmp_path / "fifo.json"
    files["missing.json"] = tmp_path / "missing.json"
    return files


BAD_REPORTS = {
    "x.npy": "it is a .npy file",
    "empty.json": "it is empty",
    "blank.json": "only white space",
    "binary.json": "binary data",
    "latin1.json": "not UTF-8 text",
    "list.json": "not a JSON object",
    "other.json": "schema None",
    "cut.json": "it is not JSON",
    "future.json": "cannot read (it writes 'fastfinite.report/2'): upgrade fastfinite",
    "oddschema.json": "unknown schema 'fastfinite.report/one'",
    "nostats.json": "no 'stats' field",
    "badcount.json": "nan is 'many'",
    "badshape.json": "shape is (4, -5)",
    "badlocs.json": "TypeError",
    "adir.json": "it is a directory",
    "fifo.json": "not a regular file",
    "missing.json": "No such file or directory",
}


@pytest.mark.parametrize("name", sorted(BAD_REPORTS))
def test_merge_of_a_file_that_is_not_a_report_names_the_file(report_files, name):
    path = str(report_files[name])
    r = _cli("merge", report_files["good.json"], path, timeout=60)
    assert_one_line_error(r, path, BAD_REPORTS[name])


@pytest.mark.parametrize("name", ["x.npy", "future.json", "missing.json", "fifo.json"])
def test_diff_names_the_report_that_is_not_one(report_files, name):
    path = str(report_files[name])
    good = report_files["good.json"]
    assert_one_line_error(_cli("diff", good, path, timeout=60), path, BAD_REPORTS[name])
    assert_one_line_error(_cli("diff", path, good, timeout=60), path, BAD_REPORTS[name])


def test_a_report_with_a_bom_and_leading_space_is_read(report_files, tmp_path):
    text = report_files["good.json"].read_text()
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + b" " * 100_000 + text.encode())
    r = _cli("merge", p, report_files["good.json"], "--json", "-", timeout=60)
    assert r.returncode == 1, r.stderr
    merged = json.loads(r.stdout)
    assert merged["shape"] == [8, 5] and merged["cast"]["float32"]["overflow"] == 2


# -- scheduler address with a cache, on a real cluster -------------------------------


def _store(tmp_path):
    x = np.random.default_rng(7).standard_normal((40, 6))
    x[3, 2], x[30, 5] = np.nan, np.inf
    path = str(tmp_path / "x.zarr")
    a = zarr.create_array(store=path, data=x, chunks=(8, 3))
    return path, a, x


def test_scheduler_address_with_a_cache_first_and_second_scan(dask_address, tmp_path):
    path, a, x = _store(tmp_path)
    cache = str(tmp_path / "cache")
    kw = dict(region_bytes=1, cache=cache)
    first = fastfinite.scan(path, scheduler=dask_address, **kw)
    full = fastfinite.scan(path, region_bytes=1)
    assert first.to_dict() == full.to_dict()
    assert (first.nan, first.posinf) == (1, 1)
    assert first.changes.regions_scanned == 10 and first.changes.regions_recalled == 0
    a[8:16, 3:6] = 2.0  # one chunk rewritten, a new NaN in it
    a[9, 4] = np.nan
    second = fastfinite.scan(path, scheduler=dask_address, progress=True, **kw)
    assert second.changes.rescanned == {path: [(1, 1)]}
    assert second.changes.regions_scanned == 1 and second.changes.regions_recalled == 9
    assert {(c.kind, c.where) for c in second.changes.new} == {("nan", (9, 4))}
    assert second.to_dict() == fastfinite.scan(path, region_bytes=1).to_dict()


def test_scheduler_address_with_progress_and_no_cache(dask_address, tmp_path):
    path, _, _ = _store(tmp_path)
    r = fastfinite.scan(path, scheduler=dask_address, progress=True)
    assert (r.nan, r.posinf) == (1, 1)


def test_cli_scheduler_address_with_a_cache(dask_address, tmp_path):
    path, a, _ = _store(tmp_path)
    cache = tmp_path / "cache"
    args = ["scan", path, "--scheduler", dask_address, "--cache", cache, "--region-bytes", "1"]
    r = _cli(*args, "--json", "-", "--progress")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert (d["nan"], d["posinf"]) == (1, 1)
    assert d["changes"]["regions_scanned"] == 10 and d["changes"]["regions_recalled"] == 0
    assert _cli(*args, "--fail-on-new", "-q").returncode == 0  # nothing new
    a[0:8, 0:3] = 1.0  # rewrites chunk (0, 0): the NaN at (3, 2) is gone, nothing new
    r = _cli(*args, "--json", "-", "--fail-on-new")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["changes"]["rescanned"] == {path: [[0, 0]]}
    assert d["changes"]["regions_scanned"] == 1 and d["changes"]["regions_recalled"] == 9
    assert [(c["kind"], c["where"]) for c in d["changes"]["gone"]] == [("nan", [3, 2])]
    assert d["nan"] == 0 and d["posinf"] == 1


@pytest.mark.parametrize("dask", ["--scheduler", "--workers"])
def test_a_dask_progress_bar_never_writes_into_json_on_stdout(big_npy, dask_address, dask):
    # the command line's two ways onto Dask: a cluster's address (--scheduler takes only
    # that), a local cluster of its own
    how = ["--scheduler", dask_address] if dask == "--scheduler" else ["--workers", "1"]
    r = _cli("scan", big_npy, *how, "--progress", "--json", "-")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["cast"]["float32"]["overflow"] == 1
    assert "Completed" in r.stderr
