"""A local S3-compatible server (moto's) and a latency proxy in front of it, started as
processes on 127.0.0.1 and stopped by process id: what the cloud tests and
``benchmarks/bench_cloud.py`` scan.

    with moto_server() as endpoint:               # http://127.0.0.1:PORT
        make_bucket(endpoint, "bkt")
        with latency_proxy(endpoint, 30) as (slow, stats):
            ...                                    # stats(): requests, max and mean in flight
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager

HERE = os.path.dirname(os.path.abspath(__file__))
CREDENTIALS = {"key": "testing", "secret": "testing"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def moto_server(timeout: float = 30, check_credentials: bool = False):
    """moto's S3 server on a free port; yields its endpoint URL. With ``check_credentials``
    it refuses every key it has not issued (the test credentials included)."""
    port = free_port()
    exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="0") if check_credentials else None
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except urllib.error.HTTPError:  # it answers: a refusal is an answer
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        yield endpoint
    finally:
        _stop(proc)


def storage_options(endpoint: str, credentials: bool = True) -> dict:
    """s3fs options for the server (its region; its test credentials unless told not)."""
    out = {"client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    return {**CREDENTIALS, **out} if credentials else out


def make_bucket(endpoint: str, bucket: str) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(**storage_options(endpoint))
    fs.call_s3("create_bucket", Bucket=bucket)


@contextmanager
def latency_proxy(endpoint: str, latency_ms: float):
    """A proxy adding ``latency_ms`` to every request to ``endpoint``; yields its endpoint
    and a function returning its counters (requests, max_inflight, mean_inflight)."""
    port, target = free_port(), int(endpoint.rsplit(":", 1)[1])
    folder = tempfile.mkdtemp(prefix="fastfinite-proxy-")
    path = os.path.join(folder, "stats.json")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "latency_proxy.py"), str(port), str(target),
         str(latency_ms), path],
    )  # fmt: skip

    def stats() -> dict:
        time.sleep(0.25)  # the proxy writes every 0.1 s
        with open(path) as f:
            return json.load(f)

    try:
        deadline = time.time() + 20
        while not os.path.exists(path):
            if time.time() > deadline:
                raise RuntimeError("the latency proxy did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", stats, proc
    finally:
        if proc.poll() is None:
            _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)
