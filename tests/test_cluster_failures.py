"""A Dask cluster that fails under a scan (real ``dask scheduler`` and ``dask worker``
processes on 127.0.0.1): a lost scheduler, a scheduler without workers, workers all lost.
Each failure is exit code 2 and one line in bounded time; a scan whose workers are all
replaced still finishes exactly.

Part: ``fastfinite/engines/dask.py`` (its errors on a failing cluster).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zarr

import fastfinite

from .helpers import assert_one_line_error

distributed = pytest.importorskip("distributed")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts"))
from s3_server import free_port  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__)))


def _stop(*procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _scheduler(start_dask):
    """A scheduler of this test's own (conftest's ``start_dask``): the tests kill it."""
    port = free_port()
    proc = start_dask("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard")
    address = f"tcp://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            with distributed.Client(address, timeout="2s"):
                return proc, address
        except (OSError, TimeoutError):
            if time.time() > deadline:
                raise
            time.sleep(0.3)


def _worker(start_dask, address):
    return start_dask(
        "worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"
    )


def _wait_workers(address, n):
    with distributed.Client(address, timeout="10s") as c:
        c.wait_for_workers(n, timeout=60)


@pytest.fixture
def many_chunks(tmp_path):
    """A store of 3000 one-row chunks: a few seconds of tasks on a small cluster."""
    x = np.random.default_rng(0).standard_normal((3000, 8))
    x[1234, 5] = np.nan
    path = str(tmp_path / "m.zarr")
    zarr.create_array(store=path, data=x, chunks=(1, 8))
    return path, x


def _cli(*args, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "fastfinite", "scan", *map(str, args), "--no-progress"],
        capture_output=True, text=True, timeout=timeout, env=ENV,
    )  # fmt: skip


def test_a_scheduler_without_workers(many_chunks, start_dask):
    sched, address = _scheduler(start_dask)
    try:
        start = time.time()
        assert_one_line_error(
            _cli(many_chunks[0], "--scheduler", address, "--timeout", "3"), "no workers"
        )
        assert time.time() - start < 30
    finally:
        _stop(sched)


def test_a_scheduler_lost_mid_scan(many_chunks, start_dask):
    sched, address = _scheduler(start_dask)
    worker = _worker(start_dask, address)
    try:
        _wait_workers(address, 1)
        threading.Timer(2.0, sched.kill).start()
        start = time.time()
        r = _cli(many_chunks[0], "--scheduler", address, "--timeout", "5", "--region-bytes", "1")
        assert_one_line_error(r, address)
        assert time.time() - start < 60
    finally:
        _stop(worker, sched)


def test_every_worker_lost_is_an_error_new_ones_finish_exactly(many_chunks, start_dask):
    path, x = many_chunks
    sched, address = _scheduler(start_dask)
    workers = [_worker(start_dask, address)]
    try:
        _wait_workers(address, 1)
        threading.Timer(1.5, workers[0].kill).start()
        r = _cli(path, "--scheduler", address, "--timeout", "4", "--region-bytes", "1")
        assert_one_line_error(r, "no workers", address)
        # again, and this time new workers come after the old one is gone
        workers.append(_worker(start_dask, address))
        _wait_workers(address, 1)

        def replace():
            os.kill(workers[-1].pid, signal.SIGKILL)
            time.sleep(1.0)
            workers.append(_worker(start_dask, address))

        threading.Timer(1.5, replace).start()
        report = fastfinite.scan(path, scheduler=address, region_bytes=1, timeout=60)
        assert report.nan == 1 and report.locations[0].index == (1234, 5)
        assert report.to_dict() == fastfinite.scan(path, region_bytes=1).to_dict()
    finally:
        _stop(*workers, sched)
