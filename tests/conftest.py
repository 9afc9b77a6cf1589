"""The tests' shared set-up: hypothesis settings, the kernels on small data, and the real
servers tests scan on: Dask clusters (``LocalCluster`` of processes, and ``dask scheduler`` /
``dask worker`` processes) and moto's S3-compatible server. Each is started by one factory
and stopped by process id; a test that kills a worker or a scheduler starts its own through
the same factory, the others share one per test file (module scope)."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

settings.register_profile(
    "default",
    deadline=None,
    max_examples=int(os.environ.get("FASTFINITE_EXAMPLES", "150")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("default")


def pytest_configure(config):
    config.addinivalue_line("markers", "numpy_twin: run small blocks through the NumPy twin")
    if not hasattr(config, "workerinput"):  # the first process, before any worker starts
        _compile_once()


def _compile_once() -> None:
    """Every kernel compiled into the cache once, before the tests (about 10 s on an empty
    cache, in processes of its own on every core; nothing on a warm one): otherwise each
    test worker, and each command-line process the tests start, compiles the same kernels
    again while the cache is empty. Tests of the cold start use caches of their own.
    ``FASTFINITE_TEST_COMPILE=0`` leaves it to the tests."""
    if os.environ.get("FASTFINITE_TEST_COMPILE", "1") == "0":
        return
    import fastfinite

    report = fastfinite.compile(load=False)  # this process scans nothing
    for (group, dtype), error in report.failed.items():  # the tests will say it again
        print(f"fastfinite compile: {group} {dtype} failed: {error}", file=sys.stderr)


@pytest.fixture(autouse=True)
def _numba_kernels_for_small_data(request, monkeypatch):
    """Small blocks normally go through the NumPy twin (no numba start-up); the tests run the
    numba kernels on their small arrays (``FASTFINITE_NUMPY_TWIN_MAX=0``, the documented
    switch), except where they compare the twin itself."""
    if request.node.get_closest_marker("numpy_twin"):
        monkeypatch.delenv("FASTFINITE_NUMPY_TWIN_MAX", raising=False)
    else:
        monkeypatch.setenv("FASTFINITE_NUMPY_TWIN_MAX", "0")


# -- Dask clusters -------------------------------------------------------------------------


def _start_dask(*args: str, cwd: str | None = None, env: dict | None = None):
    """One ``dask ARGS`` process (``scheduler ...`` or ``worker ADDRESS ...``), quiet, that
    imports this checkout (``env`` added to this process's environment): the one place the
    tests start dask's own processes. The caller stops it by its process id."""
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.Popen(
        [dask, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


@contextmanager
def _dask_processes(cwd: str, workers: int = 2, timeout: float = 90, env: dict | None = None):
    """A real ``dask scheduler`` and ``dask worker --nworkers N`` on 127.0.0.1, started in
    ``cwd`` (another working directory than the test's, with ``env`` added to this
    process's environment); yields the address and stops both by process id."""
    import socket
    import time

    import distributed

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    quiet = {"cwd": cwd, "env": env}
    procs = [
        _start_dask(
            "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard", **quiet
        )
    ]
    try:
        procs.append(
            _start_dask(
                "worker",
                address,
                "--nworkers",
                str(workers),
                "--nthreads",
                "1",
                "--no-dashboard",
                "--host",
                "127.0.0.1",
                **quiet,
            )  # fmt: skip
        )
        deadline = time.time() + timeout
        while True:
            try:
                with distributed.Client(address, timeout="5s") as c:
                    c.wait_for_workers(workers, timeout=timeout)
                break
            except (OSError, TimeoutError):
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@contextmanager
def _local_cluster(workers: int = 2, **kwargs):
    """A ``distributed.LocalCluster`` of ``workers`` processes of one thread each (``kwargs``
    added, e.g. ``env=``); yields the cluster and closes it, its workers with it."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, **kwargs
    ) as cluster:
        yield cluster


@pytest.fixture(autouse=True, scope="module")
def _dask_scheduler_left_as_found():
    """A file's clients may close out of the order they were made in, and distributed then
    leaves ``scheduler="dask.distributed"`` in dask's global config: the next file's dask
    arrays would look for a client that is gone."""
    yield
    if "dask" in sys.modules:
        import dask

        for key in ("scheduler", "shuffle"):
            dask.config.config.pop(key, None)


@pytest.fixture(scope="session")
def start_dask():
    """The factory of single dask processes: ``start_dask("scheduler", ...)`` or
    ``start_dask("worker", address, ...)`` gives the ``Popen``; for a test that kills a
    scheduler or a worker, and stops them by process id itself."""
    pytest.importorskip("distributed")
    return _start_dask


@pytest.fixture(scope="session")
def dask_processes():
    """The factory of real ``dask scheduler`` / ``dask worker`` processes: ``with
    dask_processes(cwd, workers=2, env=None) as address``; for a test that needs its own."""
    pytest.importorskip("distributed")
    return _dask_processes


@pytest.fixture(scope="module")
def dask_address(tmp_path_factory, dask_processes):
    """The address of a ``dask scheduler`` with two ``dask worker`` processes, started in
    another working directory than the tests' and shared by the tests of one file."""
    elsewhere = tmp_path_factory.mktemp("workers-run-here")
    with dask_processes(str(elsewhere)) as address:
        yield address


@pytest.fixture(scope="session")
def local_cluster():
    """The factory of LocalClusters: ``with local_cluster(workers=2, **kwargs) as cluster``;
    for a test that needs its own (one that kills a worker, or sets the workers' env)."""
    pytest.importorskip("distributed")
    return _local_cluster


@pytest.fixture(scope="module")
def dask_cluster(local_cluster):
    """A LocalCluster of two processes, shared by the tests of one file."""
    with local_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def dask_client(dask_cluster):
    """A ``distributed.Client`` of ``dask_cluster``, shared by the tests of one file."""
    import distributed

    with distributed.Client(dask_cluster) as client:
        yield client


# -- S3 ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def s3():
    """``scripts/s3_server.py``: moto's S3-compatible server in a process of its own
    (``s3.moto_server()``, stopped by process id), a latency proxy, storage options."""
    if os.path.join(ROOT, "scripts") not in sys.path:
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
    module = pytest.importorskip("s3_server")
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    return module


@pytest.fixture(scope="module")
def s3_endpoint(s3):
    """The endpoint of a real moto S3 server on 127.0.0.1 with an empty bucket ``bkt``,
    shared by the tests of one file."""
    with s3.moto_server() as endpoint:
        s3.make_bucket(endpoint, "bkt")
        yield endpoint
