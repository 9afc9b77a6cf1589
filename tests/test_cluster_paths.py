"""Scans on real ``dask scheduler`` and ``dask worker`` processes started in another working
directory: relative paths read exactly what the client meant, and a store a worker cannot
open is an error naming the store and the worker, never chunks read as fill values.

Part: ``fastfinite/engines/dask.py`` and the sources a worker opens.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import zarr

import fastfinite

from .helpers import run_cli

distributed = pytest.importorskip("distributed")


def _values():
    x = np.random.default_rng(1).standard_normal((40, 6))
    x[3, 2], x[30, 5], x[17, 0] = np.nan, np.inf, 1e100
    return x


@pytest.fixture
def in_data_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x = _values()
    zarr.create_array(store="x.zarr", data=x, chunks=(8, 3), fill_value=np.nan)
    np.save("x.npy", x)
    import h5py

    with h5py.File("x.h5", "w") as f:
        f.create_dataset("x", data=x, chunks=(8, 3))
    return x


@pytest.mark.parametrize("path", ["x.zarr", "x.npy", "x.h5:/x", "./x.zarr"])
def test_relative_paths_read_what_the_client_meant(dask_address, in_data_dir, path):
    ref = fastfinite.scan(in_data_dir)
    r = fastfinite.scan(path, scheduler=dask_address, region_bytes=1)
    assert (r.nan, r.posinf, r.cast["float32"].overflow) == (1, 1, 1)
    assert r.missing_chunks == 0 and not any(f.kind == "missing_chunk" for f in r.findings)
    assert r.locations == ref.locations and r.name == path


def test_a_store_gone_before_the_tasks_run_names_the_store_and_the_worker(
    dask_address, in_data_dir
):
    lazy = fastfinite.scan("x.zarr", compute=False, region_bytes=1)
    shutil.rmtree("x.zarr")
    with distributed.Client(dask_address) as client, pytest.raises(fastfinite.SourceError) as e:
        client.compute(lazy).result()
    assert "x.zarr" in str(e.value) and "worker tcp://127.0.0.1:" in str(e.value)


def test_a_npy_file_replaced_by_another_is_an_error(dask_address, in_data_dir):
    lazy = fastfinite.scan("x.npy", compute=False)
    np.save("x.npy", np.zeros(5))
    with distributed.Client(dask_address) as client, pytest.raises(fastfinite.SourceError) as e:
        client.compute(lazy).result()
    assert "now holds float64 (5,)" in str(e.value) and "worker" in str(e.value)


def test_cli_relative_path_on_a_cluster(dask_address, in_data_dir):
    r = run_cli("scan", "x.zarr", "--scheduler", dask_address, "--json", "-", "--no-progress")
    assert r.returncode == 1, r.stderr
    import json

    d = json.loads(r.stdout)
    assert (d["nan"], d["posinf"], d["missing_chunks"]) == (1, 1, 0)
