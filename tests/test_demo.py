"""``fastfinite demo`` cleans up after itself: the data it wrote is removed at the end (after
a Ctrl-C too) unless ``--keep``, progress bars go to terminals only, a list it cuts says so,
and its ``report.json`` is sized for reading. Run as users run it, in fresh processes.

Part: ``fastfinite/demo.py``.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

from fastfinite import ScanReport
from fastfinite.demo import bad_samples_line

from .helpers import assert_one_line_error, read_terminal, run_cli

SMALL = ("--size-mb", "16")  # 512 samples, two chunks, one never written: 261 bad samples


def _demo(*args, env=None, timeout=300):
    return run_cli("demo", *args, env=env, timeout=timeout)


def _tmpdir_env(tmp_path):
    """The environment with the temporary directory in ``tmp_path`` (where the demo makes
    its directory when given none)."""
    return dict(os.environ, TMPDIR=str(tmp_path))


def test_data_is_removed_at_the_end_and_the_reports_stay(tmp_path):
    r = _demo(*SMALL, env=_tmpdir_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    (made,) = tmp_path.iterdir()
    assert made.name.startswith("fastfinite-demo-")
    assert sorted(os.listdir(made)) == ["report.json", "report.png"]
    assert f"demo data removed: {made / 'train.zarr'}" in r.stdout


def test_keep_keeps_the_data_for_a_later_run_which_leaves_it(tmp_path):
    r = _demo("--dir", tmp_path, *SMALL, "--keep")
    assert r.returncode == 0 and (tmp_path / "train.zarr").is_dir(), r.stdout + r.stderr
    assert "removed" not in r.stdout
    r = _demo("--dir", tmp_path, *SMALL)  # reused: not this run's to remove
    assert r.returncode == 0 and "demo data reused" in r.stdout
    assert (tmp_path / "train.zarr").is_dir() and "removed" not in r.stdout


def test_no_progress_bars_into_a_pipe(tmp_path):
    r = _demo("--dir", tmp_path, *SMALL)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_progress_bars_on_a_terminal(tmp_path):
    master, slave = pty.openpty()
    # a terminal 80 columns wide: tqdm draws nothing in a pseudo-terminal's 0 columns
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    p = subprocess.Popen(
        [sys.executable, "-m", "fastfinite", "demo", "--dir", str(tmp_path), *SMALL],
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    seen = read_terminal(master, 300)
    assert p.wait(timeout=60) == 0
    assert b"writing demo data" in seen


def test_the_cut_list_of_bad_samples_says_how_many_more(tmp_path):
    r = _demo("--dir", tmp_path, *SMALL, "--keep")
    assert r.returncode == 0
    bad = ScanReport.from_json((tmp_path / "report.json").read_text()).bad_slices()
    assert len(bad) == 261
    line = r.stdout.strip().splitlines()[-1]
    shown = ", ".join(map(str, bad[:20]))
    assert line == f"bad samples (261): {shown} ... and 241 more bad samples"
    assert bad_samples_line([1, 2], 20) == "bad samples (2): 1, 2"  # nothing cut, nothing said


def test_report_json_is_sized_for_reading_and_whole_with_full_report(tmp_path):
    r = _demo("--dir", tmp_path / "a", *SMALL, "--keep")
    assert r.returncode == 0
    path = tmp_path / "a" / "report.json"
    d = json.loads(path.read_text())
    assert d["slices"] is None and d["by"] == [0]
    assert "the per-slice statistics of its 512 samples left out" in r.stdout
    report = ScanReport.from_dict(d)  # still a report: every finding and count is there
    assert report.nan == 256 * 64 * 64 + 1 and len(report.bad_slices()) == 261
    r = _demo("--dir", tmp_path / "a", *SMALL, "--full-report")
    full = json.loads(path.read_text())
    assert len(full["slices"]["count"]) == 512 and "left out" not in r.stdout
    assert {k: v for k, v in full.items() if k != "slices"} == {
        k: v for k, v in d.items() if k != "slices"
    }
    # a report without them does not merge by concatenation: an error saying why
    merged = run_cli("merge", path, path)
    assert merged.returncode == 1 and merged.stderr == ""  # the whole one does (its NaN: 1)
    a = tmp_path / "slim.json"
    a.write_text(json.dumps(d))
    bad = run_cli("merge", a, a)
    assert_one_line_error(bad, "holds no per-slice statistics")


def _interrupt_when(proc, ready, timeout=300):
    """SIGINT to the demo's process group (a terminal's Ctrl-C) once ``ready()``."""
    deadline = time.time() + timeout
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    return proc.communicate(timeout=60)


def test_ctrl_c_while_writing_removes_the_data_and_the_directory(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastfinite", "demo", "--size-mb", "512", "--keep"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env=_tmpdir_env(tmp_path),
    )  # fmt: skip

    def writing():
        return any((d / "train.zarr" / "images" / "c").is_dir() for d in tmp_path.iterdir())

    out, err = _interrupt_when(proc, writing)
    assert proc.returncode == 130 and err == "fastfinite: interrupted\n", (out, err)
    assert list(tmp_path.iterdir()) == []  # half-written data is never kept


@pytest.mark.parametrize("keep", [False, True])
def test_ctrl_c_while_scanning_removes_the_data_unless_keep(tmp_path, keep):
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastfinite", "demo", "--dir", str(tmp_path), *SMALL,
         *(["--keep"] if keep else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )  # fmt: skip
    first = proc.stdout.readline()  # printed once the data is written, as the scan starts
    assert first.startswith("demo data written"), first
    out, err = _interrupt_when(proc, lambda: True)
    assert proc.returncode == 130 and err == "fastfinite: interrupted\n", (out, err)
    assert (tmp_path / "train.zarr").exists() is keep


def test_demo_errors_before_writing_are_one_line(tmp_path):
    (tmp_path / "f").write_text("")
    assert_one_line_error(_demo("--dir", tmp_path / "f" / "d", *SMALL), "--dir")
