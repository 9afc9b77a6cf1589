"""The command line, run as users run it: in a fresh process.

Part: ``fastfinite/cli/``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from .helpers import run_cli


def run(*args, cwd=None):
    return run_cli(*args, cwd=cwd)


@pytest.fixture
def files(tmp_path):
    clean = tmp_path / "clean.npy"
    np.save(clean, np.arange(100, dtype=np.float32).reshape(10, 10))
    bad = tmp_path / "bad.npy"
    x = np.ones((4, 5))
    x[2, 1] = np.nan
    x[3, 4] = 1e100
    np.save(bad, x)
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"this is not an array")
    return clean, bad, garbage


def test_exit_codes(files, tmp_path):
    clean, bad, garbage = files
    r = run("scan", str(clean))
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout
    r = run("scan", str(bad))
    assert r.returncode == 1
    assert "(2, 1)" in r.stdout and "(3, 4)" in r.stdout
    r = run("scan", str(bad), "--cast", "none")
    assert r.returncode == 1  # the NaN remains
    r = run("scan", str(tmp_path / "missing.npy"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "missing.npy" in r.stderr
    assert "Traceback" not in r.stderr
    r = run("scan", str(garbage))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "garbage.npy" in r.stderr
    r = run("scan", str(clean), "--cast", "float8")
    assert r.returncode == 2 and "float8" in r.stderr
    r = run("frobnicate")
    assert r.returncode == 2


def test_unsupported_dtype_is_a_usage_error(tmp_path):
    p = tmp_path / "s.npy"
    np.save(p, np.array(["a", "b"]))
    r = run("scan", str(p))
    assert r.returncode == 2 and "<U1" in r.stderr and "Traceback" not in r.stderr


def test_json_output(files, tmp_path):
    _, bad, _ = files
    out = tmp_path / "r.json"
    r = run("scan", str(bad), "--json", str(out), "--max-locations", "1")
    assert r.returncode == 1
    d = json.loads(out.read_text())
    assert d["nan"] == 1 and d["cast"]["float32"]["overflow"] == 1
    assert d["locations"][0]["index"] == [2, 1]


def test_console_script_and_demo(tmp_path):
    exe = subprocess.run(
        [sys.executable, "-c", "import shutil; print(shutil.which('fastfinite') or '')"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    cmd = [exe] if exe else [sys.executable, "-m", "fastfinite"]
    r = subprocess.run(
        [*cmd, "demo", "--dir", str(tmp_path), "--size-mb", "8", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every planted problem was found" in r.stdout
    assert (tmp_path / "report.json").exists()
    assert not (tmp_path / "train.zarr").exists()  # removed at the end (no --keep)
