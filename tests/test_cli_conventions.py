"""The command line's manners, run as users run it, in fresh processes: colour as NO_COLOR and
FORCE_COLOR say (on a real pseudo-terminal), Ctrl-C (exit code 130, one line, nothing
half-written), "did you mean" for kinds, choices, flags and subcommands, every output path
checked before the scan starts, and ``--help`` naming every kind of input.

Part: ``fastfinite/cli/``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite import cli
from fastfinite.cli.files import write_text, writing
from fastfinite.errors import InvalidArgumentError

from .helpers import assert_one_line_error, read_terminal, run_cli

RED = "\033[1;31m"  # the summary's PROBLEMS


def _cli(*args, env=None, timeout=120):
    return run_cli(*args, env=env, timeout=timeout)


def _env(**settings):
    """This process's environment without NO_COLOR, FORCE_COLOR and TERM, then ``settings``
    (a value of None: left unset)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    env.update({k: v for k, v in settings.items() if v is not None})
    return env


def _on_a_terminal(*args, env) -> tuple[int, str]:
    """Run the command with its stdout on a pseudo-terminal; its exit code and what it
    printed there."""
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "fastfinite", *map(str, args)],
        stdout=slave,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    out = read_terminal(master, 120)
    return p.wait(timeout=60), out.decode()


@pytest.fixture(scope="module")
def nan_npy(tmp_path_factory):
    p = tmp_path_factory.mktemp("colour") / "x.npy"
    x = np.ones((4, 5))
    x[1, 2] = np.nan
    np.save(p, x)
    return p


@pytest.mark.parametrize(
    "settings, flag, coloured",
    [
        ({}, None, True),  # a terminal: colour
        ({"NO_COLOR": "1"}, None, False),
        ({"NO_COLOR": "0"}, None, False),  # any value but the empty string
        ({"NO_COLOR": ""}, None, True),  # empty: as if unset
        ({"TERM": "dumb"}, None, False),
        ({"NO_COLOR": "1"}, "always", True),  # the flag of this run wins
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, None, False),  # NO_COLOR wins, as in CPython
    ],
)
def test_colour_on_a_terminal(nan_npy, settings, flag, coloured):
    args = ["scan", nan_npy, *(["--color", flag] if flag else [])]
    code, out = _on_a_terminal(*args, env=_env(**{"TERM": "xterm", **settings}))
    assert code == 1 and "PROBLEMS" in out, out
    assert (RED in out) is coloured, out


@pytest.mark.parametrize(
    "settings, flag, coloured",
    [
        ({}, None, False),  # a pipe: no colour
        ({"FORCE_COLOR": "1"}, None, True),
        ({"FORCE_COLOR": ""}, None, False),  # empty: as if unset
        ({"FORCE_COLOR": "1"}, "never", False),
    ],
)
def test_colour_into_a_pipe(nan_npy, settings, flag, coloured):
    r = _cli("scan", nan_npy, *(["--color", flag] if flag else []), env=_env(**settings))
    assert r.returncode == 1 and "PROBLEMS" in r.stdout, r.stderr
    assert (RED in r.stdout) is coloured, r.stdout


def test_force_color_leaves_json_on_stdout_plain(nan_npy):
    r = _cli("scan", nan_npy, "--json", "-", env=_env(FORCE_COLOR="1"))
    assert r.returncode == 1 and "\033[" not in r.stdout


def _stalled_store(tmp_path):
    """A Zarr store whose sixth chunk is a named pipe: a scan that reaches it waits there
    (as on a store that stops answering) until something writes into the pipe, which the
    test opens once the scan is reading it."""
    path = tmp_path / "s.zarr"
    a = zarr.create_array(path, shape=(64, 1000), chunks=(8, 1000), dtype="f8", compressors=None)
    a[:] = 1.0
    pipe = path / "c" / "5" / "0"
    pipe.unlink()
    os.mkfifo(pipe)
    return path, pipe


def _wait_for_reader(pipe, proc, timeout=120) -> int:
    """Open the pipe for writing once the scan has opened it for reading (the scan has
    started); the descriptor."""
    deadline = time.time() + timeout
    while True:
        try:
            return os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:  # ENXIO: no reader yet
            assert e.errno == errno.ENXIO
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "the scan never read the store"
        time.sleep(0.05)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_ctrl_c_during_a_scan_exits_130_with_one_line(tmp_path, threads):
    """SIGINT to the process group, as a terminal's Ctrl-C sends it, while a read hangs:
    exit code 130 at once, one line on stderr, and the outputs asked for are not written
    (nothing half-written beside them either)."""
    store, pipe = _stalled_store(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastfinite", "scan", str(store), "--threads", threads,
         "--json", str(out / "r.json"), "--plot", str(out / "r.png")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    fd = _wait_for_reader(pipe, proc)
    try:
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        start = time.time()
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail("Ctrl-C did not end the scan")
    finally:
        os.close(fd)
    assert time.time() - start < 10
    assert proc.returncode == 130, (stdout, stderr)
    assert stderr == "fastfinite: interrupted\n" and stdout == ""
    assert os.listdir(out) == []


def test_ctrl_c_on_a_terminal_writes_its_line_over_the_progress_bar(tmp_path):
    store, pipe = _stalled_store(tmp_path)
    master, slave = pty.openpty()
    # wide enough for the bar's description (the store's path) and its numbers
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 250, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastfinite", "scan", str(store), "--progress"],
        stdout=subprocess.DEVNULL, stderr=slave, start_new_session=True,
        env=_env(TERM="xterm"),
    )  # fmt: skip
    os.close(slave)
    fd = _wait_for_reader(pipe, proc)
    seen = b""

    def read(until: float) -> None:
        nonlocal seen
        while time.time() < until and select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: the other side is closed
                return
            if not chunk:
                return
            seen += chunk

    try:
        deadline = time.time() + 60
        while b"s.zarr" not in seen and time.time() < deadline:  # the bar is drawn
            read(time.time() + 0.5)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        os.close(fd)
    read(time.time() + 10)
    os.close(master)
    bar, _, last = seen.decode().rpartition("\r\033[K")
    assert "s.zarr" in bar, seen  # a bar was drawn, then wiped
    assert last == "fastfinite: interrupted\r\n", seen


def test_an_interrupted_write_leaves_the_old_file_and_nothing_beside_it(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("yesterday\n")
    target.chmod(0o640)
    with pytest.raises(KeyboardInterrupt), writing(str(target)) as where:
        with open(where, "w") as f:
            f.write("half of tod")
        raise KeyboardInterrupt
    assert target.read_text() == "yesterday\n" and os.listdir(tmp_path) == ["r.json"]
    write_text(str(target), "today")
    assert target.read_text() == "today\n" and os.listdir(tmp_path) == ["r.json"]
    assert target.stat().st_mode & 0o777 == 0o640  # its permissions kept


@pytest.mark.parametrize(
    "args, words",
    [
        (["scan", "{x}", "--fail-on", "nonfinit"], "unknown kind 'nonfinit' (did you mean nonfinite?)"),
        (["scan", "{x}", "--fail-on", "nan,posinff"], "(did you mean posinf?)"),
        (["diff", "{x}", "{x}", "--fail-on", "outlyer"], "(did you mean outlier?)"),
        (["scna", "{x}"], "invalid choice: 'scna' (did you mean scan?)"),
        (["scan", "{x}", "--jsn", "r.json"], "unrecognized arguments: --jsn r.json (did you mean --json?)"),
        (["scan", "{x}", "--on-eror=report"], "(did you mean --on-error?)"),
        (["scan", "{x}", "--color", "alwys"], "invalid choice: 'alwys' (did you mean always?)"),
        (["scan", "{x}", "--on-error", "reprot"], "(did you mean report?)"),
        (["scan", "{x}", "--cast", "float3"], "cast target 'float3' is not supported (did you mean float32?)"),
        (["compile", "--mode", "plian"], "unknown compile mode 'plian' (did you mean plain?)"),
    ],
)  # fmt: skip
def test_did_you_mean(nan_npy, args, words):
    assert_one_line_error(_cli(*(a.format(x=nan_npy) for a in args)), words)


def test_no_guess_when_nothing_is_close(nan_npy):
    for args in (["scan", nan_npy, "--fail-on", "zzz"], ["frobnicate"], ["scan", nan_npy, "--qq"]):
        r = _cli(*args)
        assert_one_line_error(r)
        assert "did you mean" not in r.stderr


def test_did_you_mean_in_the_api():
    x = np.ones(4)
    with pytest.raises(InvalidArgumentError, match=r"did you mean nonfinite\?"):
        fastfinite.assert_finite(x, fail_on="nonfinit")
    with pytest.raises(InvalidArgumentError, match=r"did you mean float16\?"):
        fastfinite.scan(x, cast="flaot16")


def test_every_output_is_checked_before_the_scan_starts(tmp_path):
    """With a store that stalls the scan at its sixth chunk, a bad output path is an error
    within seconds: the scan never started."""
    store, _ = _stalled_store(tmp_path)
    (tmp_path / "file").write_text("")
    report = tmp_path / "r.json"
    cases = [
        (["--json", tmp_path / "no" / "r.json"], "--json", "does not exist"),
        (["--plot", tmp_path / "no" / "p.png"], "--plot", "does not exist"),
        (["--json", tmp_path / "file" / "r.json"], "--json", "is not a directory"),
        (["--plot", tmp_path], "--plot", "is a directory"),
        (["--cache", tmp_path / "file"], "--cache", "not a directory"),
        (["--json", store / "r.json"], "--json", "would write into the input"),
        (["--plot", store / "c" / "p.png"], "--plot", "would write into the input"),
        (["--cache", store / "cache"], "--cache", "would write into the input"),
        (["--html", store / "r.html"], "--html", "would write into the input"),
        (["--html", report, "--json", report], "--json and --html both write"),
        (["--bad-samples", store / "bad.txt"], "--bad-samples", "would write into the input"),
        (["--bad-samples", tmp_path / "no" / "b.txt"], "--bad-samples", "does not exist"),
        (["--json", report, "--plot", report], "--json and --plot both write"),
    ]
    for extra, *words in cases:
        assert_one_line_error(_cli("scan", store, *extra, timeout=60), *words)
    assert not report.exists() and not (store / "r.json").exists()


def test_outputs_are_checked_before_a_missing_input_is_noticed(tmp_path):
    r = _cli("scan", tmp_path / "nothing.npy", "--json", tmp_path / "no" / "r.json")
    assert_one_line_error(r, "--json", "does not exist")


def test_merge_and_diff_never_write_over_their_input(tmp_path, nan_npy):
    a = tmp_path / "a.json"
    assert _cli("scan", nan_npy, "--json", a, "-q").returncode == 1
    before = a.read_text()
    for args in (["merge", a, "--json", a], ["diff", a, a, "--json", a]):
        assert_one_line_error(_cli(*args), "--json", "would write into the input")
    assert a.read_text() == before
    assert_one_line_error(_cli("merge", a, "--json", tmp_path / "no" / "m.json"), "--json")


def test_output_flags_are_one_checked_list():
    """Each subcommand's output flags are in the list ``_check_outputs`` walks."""
    p = cli.build_parser()
    outputs = {n: dict(c.get_default("outputs") or ()) for n, c in p.commands.items()}
    assert outputs["scan"] == {
        "--cache": "cache", "--json": "json", "--plot": "plot", "--html": "html",
        "--bad-samples": "bad_samples",
    }  # fmt: skip
    assert outputs["merge"] == {"--json": "json"} and outputs["diff"] == {"--json": "json"}


def test_help_names_every_kind_of_input():
    scan_help = _cli("scan", "--help").stdout
    top_help = _cli("--help").stdout
    for name, examples, _ in cli.INPUT_KINDS:
        assert name in scan_help and examples in scan_help
        assert name in " ".join(top_help.split())
    words = ("NumPy", "Zarr", "HDF5", "NetCDF4", "Parquet", "Arrow", "safetensors", "GGUF")
    for word in (*words, ".pt", ".tar", "glob", "s3://", ".npy", ".npz", ".zip"):
        assert word in scan_help, word
    assert "130 interrupted" in " ".join(top_help.split())


def test_each_kind_of_input_listed_is_scanned(tmp_path):
    """The kinds ``--help`` lists (but object stores, tested in test_cloud.py, and GGUF and
    PyTorch files, in test_checkpoints.py) scan from the command line, each with its planted
    NaN found."""
    import tarfile

    import h5py
    import pandas as pd
    from safetensors.numpy import save_file

    x = np.arange(12.0)
    x[3] = np.nan
    np.save(tmp_path / "file.npy", x)
    zarr.create_array(tmp_path / "data.zarr", shape=x.shape, dtype="f8")[:] = x
    with h5py.File(tmp_path / "file.h5", "w") as f:
        f["x"] = x
    pd.DataFrame({"x": x}).to_parquet(tmp_path / "t.parquet")
    pd.DataFrame({"x": x}).to_feather(tmp_path / "t.arrow")
    np.savez(tmp_path / "arrays.npz", x=x)
    save_file({"x": x}, str(tmp_path / "model.safetensors"))
    with tarfile.open(tmp_path / "shard-000.tar", "w") as t:
        t.add(tmp_path / "file.npy", arcname="000000.x.npy")
    paths = ["file.npy", "arrays.npz", "data.zarr", "file.h5:/x", "t.parquet", "t.arrow",
             "model.safetensors", "shard-000.tar"]  # fmt: skip
    assert {name for name, _, _ in cli.INPUT_KINDS} == {
        "NumPy", "Zarr", "HDF5", "Parquet", "Arrow", "checkpoints", "shards", "object stores"
    }  # fmt: skip
    for p in paths:
        r = _cli("scan", tmp_path / p, "-q", "--json", "-")
        assert r.returncode == 1 and '"nan": 1' in r.stdout, (p, r.stderr)
