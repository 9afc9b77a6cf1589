"""Out-of-core sources: real Zarr stores (formats 2 and 3, directory, zip, memory, sharded),
HDF5 files and xarray objects, compared with the scan of the same data in memory.

Part: ``fastfinite/sources/`` (``zarr``, ``hdf5``, ``xarray``).
"""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pytest
import zarr

import fastfinite
from fastfinite import ChunkReadError

from .helpers import assert_matches_oracle, peak_growth, run_cli


def _data(shape, seed=0, dtype="f4"):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 100).astype(dtype)
    flat = x.reshape(-1)
    k = max(1, flat.size // 50)
    flat[rng.integers(0, flat.size, k)] = np.nan
    flat[rng.integers(0, flat.size, k)] = np.inf
    flat[rng.integers(0, flat.size, k)] = -np.inf
    if np.dtype(dtype).itemsize == 8:
        flat[rng.integers(0, flat.size, k)] = 1e300
    return x


def _write_some_chunks(a, x, skip_every=3):
    """Write every chunk but every ``skip_every``-th one; return the written mask and the
    coordinates of the chunks left unwritten."""
    grid = [math.ceil(s / c) for s, c in zip(a.shape, a.chunks)]
    missing = []
    for n, idx in enumerate(itertools.product(*[range(g) for g in grid])):
        region = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, a.chunks, a.shape))
        if n % skip_every == 1:
            missing.append(idx)
            continue
        a[region] = x[region]
    return missing


CASES = [
    ((37,), (8,)),
    ((13, 9), (4, 4)),
    ((6, 5, 7), (4, 2, 3)),
    ((3, 4, 5, 6), (2, 3, 2, 4)),
]


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("shape,chunks", CASES)
def test_zarr_directory_store_matches_numpy(tmp_path, zarr_format, shape, chunks):
    x = _data(shape, dtype="f8")
    a = zarr.create_array(
        store=str(tmp_path / "a.zarr"),
        shape=shape,
        chunks=chunks,
        dtype="f8",
        fill_value=np.nan,
        zarr_format=zarr_format,
    )
    missing = _write_some_chunks(a, x)
    full = a[...]  # the data as the store presents it (NaN where never written)
    for region_bytes in (1, 200, 1 << 22):
        r = fastfinite.scan(
            str(tmp_path / "a.zarr"),
            region_bytes=region_bytes,
            cast=("float32", "float16"),
            max_locations=5,
        )
        assert_matches_oracle(r, full, cast=("float32", "float16"), max_locations=5)
        assert r.missing_chunks == len(missing)
        found = [f.where for f in r.findings if f.kind == "missing_chunk"]
        assert found == sorted(missing)[:5]  # findings listed up to max_locations
        assert not r.ok


def test_missing_chunks_tell_store_nan_from_data_nan(tmp_path):
    a = zarr.create_array(
        store=str(tmp_path / "a.zarr"), shape=(8, 8), chunks=(4, 4), dtype="f4", fill_value=np.nan
    )
    a[:4, :] = 1.0
    a[4:, :4] = 2.0
    a[0, 0] = np.nan  # real NaN in the data
    r = fastfinite.scan(a)
    assert r.nan == 1 + 16  # counted as the array presents them
    assert r.missing_chunks == 1
    (f,) = [f for f in r.findings if f.kind == "missing_chunk"]
    assert f.where == (1, 1) and "never written" in f.message


def test_clean_store_with_zero_fill_and_all_chunks_written_is_ok(tmp_path):
    a = zarr.create_array(
        store=str(tmp_path / "a.zarr"), shape=(10, 10), chunks=(5, 5), dtype="f4", fill_value=0.0
    )
    a[:] = np.arange(1, 101, dtype="f4").reshape(10, 10)
    r = fastfinite.scan(a)
    assert r.ok and r.missing_chunks == 0 and r.count == 100


def test_zip_and_memory_stores(tmp_path):
    x = _data((20, 6), seed=3)
    zpath = str(tmp_path / "a.zip")
    with zarr.storage.ZipStore(zpath, mode="w") as store:
        g = zarr.open_group(store, mode="w")
        a = g.create_array("train/x", shape=x.shape, chunks=(7, 4), dtype="f4")
        a[:] = x
    r = fastfinite.scan(zpath + "/train/x")
    assert_matches_oracle(r, x)
    r = fastfinite.scan(zpath)
    assert list(r.arrays) == ["train/x"] and r.nan == np.isnan(x).sum()

    store = zarr.storage.MemoryStore()
    a = zarr.create_array(store=store, shape=x.shape, chunks=(5, 5), dtype="f4")
    a[:] = x
    assert_matches_oracle(fastfinite.scan(a), x)

    a = zarr.create_array(
        store="memory://fastfinite-test.zarr", shape=x.shape, chunks=(5, 5), dtype="f4"
    )
    a[:] = x
    assert_matches_oracle(fastfinite.scan("memory://fastfinite-test.zarr"), x)


def test_file_url(tmp_path):
    x = _data((9, 9), seed=4)
    zarr.create_array(store=str(tmp_path / "a.zarr"), data=x, chunks=(4, 4))
    assert_matches_oracle(fastfinite.scan((tmp_path / "a.zarr").as_uri()), x)


@pytest.mark.parametrize(
    "shape,chunks,shards", [((16, 12), (2, 3), (8, 6)), ((10, 7), (2, 2), (4, 4))]
)
def test_sharded_arrays(tmp_path, shape, chunks, shards):
    x = _data(shape, seed=5)
    a = zarr.create_array(
        store=str(tmp_path / "s.zarr"),
        shape=shape,
        chunks=chunks,
        shards=shards,
        dtype="f4",
        fill_value=np.nan,
    )
    a[: shards[0], :] = x[: shards[0], :]
    full = a[...]
    for region_bytes in (1, 64, 1 << 20):
        r = fastfinite.scan(a, region_bytes=region_bytes, max_locations=3)
        assert_matches_oracle(r, full, max_locations=3)
    # counted in chunks, as the same data unsharded: those of the shards never written
    grid = [math.ceil(s / c) for s, c in zip(shape, chunks)]
    assert r.missing_chunks == (grid[0] - shards[0] // chunks[0]) * grid[1]
    assert r.chunks == chunks
    assert all(f.message.startswith("chunk (") for f in r.findings)


def _corrupt_chunk(path, key):
    p = os.path.join(path, key)
    with open(p, "wb") as f:
        f.write(b"\x00garbage, not a compressed chunk\xff" * 3)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_unreadable_chunk(tmp_path, zarr_format):
    x = _data((12, 12), seed=6)
    path = str(tmp_path / "c.zarr")
    a = zarr.create_array(
        store=path,
        shape=x.shape,
        chunks=(4, 4),
        dtype="f4",
        zarr_format=zarr_format,
        compressors=zarr.codecs.ZstdCodec() if zarr_format == 3 else None,
    )
    a[:] = x
    _corrupt_chunk(path, "c/1/1" if zarr_format == 3 else "1.1")
    with pytest.raises(ChunkReadError, match=r"\(1, 1\)") as e:
        fastfinite.scan(path)
    assert e.value.chunk == (1, 1) and path in str(e.value)
    r = fastfinite.scan(path, on_error="report", region_bytes=1 << 20)
    (f,) = r.findings
    assert f.kind == "unreadable_chunk" and f.where == (1, 1)
    assert not r.ok
    rest = x.copy()
    rest[4:8, 4:8] = 0.0  # what was not read must not count
    assert r.nan == np.isnan(rest).sum() and r.posinf == np.isposinf(rest).sum()
    assert r.count == np.isfinite(rest).sum() - 16


def test_groups_report_each_array_and_totals(tmp_path):
    path = str(tmp_path / "g.zarr")
    g = zarr.open_group(path, mode="w")
    x = _data((10, 10), seed=7)
    y = _data((30,), seed=8, dtype="f8")
    g.create_array("train/x", data=x, chunks=(5, 5))
    g.create_array("train/y", data=y, chunks=(7,))
    g.create_array("labels", data=np.arange(10, dtype="i4"), chunks=(5,))
    g.create_array("names", data=np.array(["a", "b"]), chunks=(2,))
    r = fastfinite.scan(path)
    assert set(r.arrays) == {"train/x", "train/y", "labels"}
    assert "names" in r.skipped
    assert r.nan == np.isnan(x).sum() + np.isnan(y).sum()
    assert r.cast["float32"].overflow == r.arrays["train/y"].cast["float32"].overflow > 0
    vals = np.concatenate([x[np.isfinite(x)].astype("f8"), y[np.isfinite(y)], np.arange(10.0)])
    assert r.count == vals.size
    k = 2.0**990  # y holds 1e300: its squares overflow, not the scaled ones
    assert r.mean == pytest.approx((vals / k).mean() * k, rel=1e-9)
    assert r.std == pytest.approx((vals / k).std() * k, rel=1e-9)
    assert_matches_oracle(r.arrays["train/x"], x)
    sub = fastfinite.scan(path + "/train")
    assert set(sub.arrays) == {"x", "y"}
    assert fastfinite.scan(zarr.open_group(path, mode="r")).nan == r.nan


def test_progress_bar_in_bytes(tmp_path, capsys):
    x = np.zeros((64, 64), dtype="f4")
    zarr.create_array(store=str(tmp_path / "p.zarr"), data=x, chunks=(8, 64))
    fastfinite.scan(str(tmp_path / "p.zarr"), progress=True, region_bytes=2048)
    err = capsys.readouterr().err
    assert "16.0k" in err or "16.0kB" in err  # the total, 16 KiB
    assert "B/s" in err


def test_fail_fast_on_store(tmp_path):
    x = np.zeros((100, 10), dtype="f4")
    x[5, 5] = np.nan
    x[95, 5] = np.nan
    zarr.create_array(store=str(tmp_path / "f.zarr"), data=x, chunks=(10, 10))
    r = fastfinite.scan(str(tmp_path / "f.zarr"), fail_fast=True, workers=1, region_bytes=400)
    assert not r.complete and r.nan == 1


h5py = pytest.importorskip("h5py")


def test_hdf5_chunked_and_contiguous(tmp_path):
    x = _data((20, 9), seed=9, dtype="f8")
    path = str(tmp_path / "f.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("grp/chunked", data=x, chunks=(6, 4), compression="gzip")
        f.create_dataset("contig", data=x.astype(">f4"))
        d = f.create_dataset("partial", shape=(8, 8), chunks=(4, 4), dtype="f4", fillvalue=np.nan)
        d[:4, :] = 1.0
        f.create_dataset("text", data=np.array([b"x"]))
    for name in ("/grp/chunked", "/contig"):
        r = fastfinite.scan(f"{path}:{name}", region_bytes=100)
        with h5py.File(path, "r") as f:
            assert_matches_oracle(r, f[name][...])
    r = fastfinite.scan(f"{path}:/partial")
    assert r.missing_chunks == 2 and r.nan == 32
    assert [f.where for f in r.findings] == [(1, 0), (1, 1)]
    with h5py.File(path, "r") as f:
        assert fastfinite.scan(f["grp/chunked"]).nan == np.isnan(x).sum()
        whole = fastfinite.scan(f)
    assert set(whole.arrays) == {"/grp/chunked", "/contig", "/partial"}
    assert "/text" in whole.skipped
    with pytest.raises(fastfinite.SourceError, match="nope"):
        fastfinite.scan(f"{path}:/nope")


def test_xarray_chunks_and_labels(tmp_path):
    xr = pytest.importorskip("xarray")
    x = _data((6, 8), seed=10, dtype="f8")
    da = xr.DataArray(
        x,
        dims=("time", "feature"),
        coords={"time": np.arange(6) * 10, "feature": list("abcdefgh")},
        name="v",
    )
    r = fastfinite.scan(da)
    assert_matches_oracle(r, x)
    loc = r.locations[0]
    assert loc.labels == {
        "time": int(da.time[loc.index[0]]),
        "feature": str(da.feature[loc.index[1]].values),
    }
    r2 = fastfinite.scan(da.chunk({"time": 4, "feature": 3}))
    assert r2.locations == r.locations and r2.counts() == r.counts()
    ds = xr.Dataset({"v": da, "w": ("time", np.array([1.0, np.inf, 2, 3, 4, 5]))})
    rd = fastfinite.scan(ds)
    assert set(rd.arrays) == {"v", "w"} and rd.posinf == r.posinf + 1
    ds.to_zarr(str(tmp_path / "x.zarr"))
    opened = xr.open_zarr(str(tmp_path / "x.zarr"))
    assert fastfinite.scan(opened["v"]).locations == r.locations


def test_cli_on_stores(tmp_path):
    x = _data((10, 10), seed=11)
    zarr.create_array(store=str(tmp_path / "a.zarr"), data=x, chunks=(5, 5))
    clean = str(tmp_path / "clean.zarr")
    zarr.create_array(store=clean, data=np.ones((4, 4), "f4"), chunks=(2, 2))
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f.create_dataset("d", data=np.ones(5))

    def run(*args):
        return run_cli("scan", *args)

    assert run(str(tmp_path / "a.zarr")).returncode == 1
    assert run(clean).returncode == 0
    assert run(f"{tmp_path / 'f.h5'}:/d").returncode == 0
    r = run(str(tmp_path / "missing.zarr"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "missing.zarr" in r.stderr
    r = run(f"{tmp_path / 'f.h5'}:/absent")
    assert r.returncode == 2 and "absent" in r.stderr
    r = run(clean, "--progress")
    assert "B/s" in r.stderr
    assert "B/s" not in run(clean, "--no-progress").stderr


def test_peak_memory_bounded_for_store_larger_than_budget(tmp_path):
    """A 128 MB store scanned with 1 MB regions stays far below its size in memory."""
    path = str(tmp_path / "big.zarr")
    a = zarr.create_array(
        store=path, shape=(32768, 1024), chunks=(256, 1024), dtype="f4", compressors=None
    )
    rng = np.random.default_rng(0)
    for i in range(0, 32768, 4096):
        a[i : i + 4096] = rng.standard_normal((4096, 1024), dtype=np.float32)
    a[100, 7] = np.nan
    grown_kb, nan, count = peak_growth(path, kwargs="region_bytes=1 << 20")
    assert nan == 1 and count == 32768 * 1024 - 1
    assert grown_kb < 64 * 1024, f"peak RSS grew by {grown_kb / 1024:.0f} MB"
