"""One plan, every engine: each kind of source scanned by the local engine (on every core
and on one), on Dask's threads and on a real ``distributed.LocalCluster`` gives the same
report (``to_dict()`` equal: the engines merge in the same order, so even the statistics'
bits agree), and that report agrees with the NumPy oracle on the values the source holds.

Part: ``fastfinite/engines/`` (``plan``, ``local``, ``dask``) on every source.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import fastfinite

from .helpers import assert_matches_oracle

SHAPE, CHUNKS = (40, 12), (8, 5)


def _values(dtype="f8", seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(SHAPE) * 10 + 3).astype(dtype)
    flat = x.reshape(-1)
    for value, k in ((np.nan, 9), (np.inf, 4), (-np.inf, 3), (1e100, 5)):
        with np.errstate(over="ignore"):
            flat[rng.choice(flat.size, k, replace=False)] = value
    x[:, 7] = 2.5  # a constant feature
    return x


def _f4(x):
    with np.errstate(over="ignore"):  # 1e100 becomes inf
        return x.astype("f4")


def _zarr(path, x, unwritten=(), **kwargs):
    a = zarr.create_array(
        store=str(path), shape=x.shape, dtype=x.dtype, fill_value=np.nan, **kwargs
    )
    grid = [range(0, n, c) for n, c in zip(x.shape, a.chunks)]
    for i, r0 in enumerate(grid[0]):
        for j, c0 in enumerate(grid[1]):
            if (i, j) not in unwritten:
                box = (slice(r0, r0 + a.chunks[0]), slice(c0, c0 + a.chunks[1]))
                a[box] = x[box]
    return str(path), a[...]


def _hdf5(path, x, **kwargs):
    import h5py

    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=x, **kwargs)
    return f"{path}:/x", x


def _parquet(path, x):
    pd.DataFrame(x, columns=[f"c{i}" for i in range(x.shape[1])]).to_parquet(path)
    return str(path), None


def _group(path, x):
    root = zarr.open_group(str(path), mode="w")
    root.create_array("a", data=x, chunks=CHUNKS)
    root.create_array("sub/b", data=_f4(x[:10]), chunks=(4, 4))
    return str(path), None


SOURCES = {
    "ndarray": lambda d, x: (x, x),
    "ndarray, Fortran order": lambda d, x: (np.asfortranarray(x), x),
    "ndarray, reversed views": lambda d, x: (x[::-1, ::-2], x[::-1, ::-2]),
    "ndarray float32": lambda d, x: (_f4(x), _f4(x)),
    ".npy": lambda d, x: (np.save(d / "x.npy", x) or str(d / "x.npy"), x),
    "zarr v3, unwritten chunks": lambda d, x: _zarr(d / "v3.zarr", x, {(1, 1)}, chunks=CHUNKS),
    "zarr v2": lambda d, x: _zarr(d / "v2.zarr", x, chunks=CHUNKS, zarr_format=2),
    "zarr sharded": lambda d, x: _zarr(d / "s.zarr", x, {(3, 0)}, chunks=CHUNKS, shards=(16, 10)),
    "hdf5 chunked": lambda d, x: _hdf5(d / "c.h5", x, chunks=CHUNKS),
    "hdf5 contiguous": lambda d, x: _hdf5(d / "f.h5", x),
    "xarray": lambda d, x: (xr.DataArray(x, dims=("t", "f"), coords={"t": np.arange(40) * 10}), x),
    "xarray on dask": lambda d, x: (xr.DataArray(x, dims=("t", "f")).chunk({"t": 16}), x),
    "DataFrame": lambda d, x: (pd.DataFrame(x, index=np.arange(40) + 100), None),
    "Parquet": lambda d, x: _parquet(d / "t.parquet", x),
    "zarr group": lambda d, x: _group(d / "g.zarr", x),
}

OPTIONS = [
    {},
    {"by": 0, "max_locations": 3, "split_every": 3},
    {"by": -1, "cast": ("float32", "float16", "bfloat16")},
    {"max_locations": 1, "localize": True},
]


@pytest.fixture(params=["local", "local, one thread", "dask threads", "distributed cluster"])
def engine(request):
    """The arguments that put a scan on one engine."""
    if request.param == "distributed cluster":
        return {"scheduler": request.getfixturevalue("dask_client")}
    return {
        "local": {},
        "local, one thread": {"workers": 1},
        "dask threads": {"scheduler": "threads"},
    }[request.param]


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_every_source_gives_the_same_report_on_every_engine(kind, engine, tmp_path):
    data, values = SOURCES[kind](tmp_path, _values())
    for options in OPTIONS:
        if "localize" in options and "scheduler" in engine and kind == "xarray on dask":
            continue
        kwargs = dict(region_bytes=640, **options)
        ref = fastfinite.scan(data, **kwargs)
        got = fastfinite.scan(data, **engine, **kwargs)
        assert got.to_dict() == ref.to_dict(), options
        if values is not None and "by" not in options:
            cast = options.get("cast", ("float32",))
            cap = options.get("max_locations", 100)
            assert_matches_oracle(got, values, cast=cast, max_locations=cap)


def test_a_table_keeps_its_layout_and_labels_on_every_engine(dask_client):
    df = pd.DataFrame(_values(), index=[f"r{i}" for i in range(40)])
    df["name"] = "text"
    ref = fastfinite.scan(df)
    assert ref.shape == (40, 13) and ref.dtype == "DataFrame" and "name" in ref.skipped
    assert all(loc.labels["row"] == f"r{loc.index[0]}" for loc in ref.locations)
    for scheduler in ("threads", dask_client):
        assert fastfinite.scan(df, scheduler=scheduler).to_dict() == ref.to_dict()


def test_every_adapter_follows_the_source_protocol():
    """Every class of ``fastfinite.sources`` that reads regions is a ``Source``: the engines
    ask it for its optional members and never probe it."""
    import inspect

    from fastfinite.sources import base, dask, hdf5, ndarray, tables, xarray
    from fastfinite.sources import zarr as zarr_source

    adapters = [
        cls
        for module in (dask, hdf5, ndarray, tables, xarray, zarr_source)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__
        and hasattr(cls, "read")
        and hasattr(cls, "regions")
        and cls is not tables.FileColumn  # the Parquet and Arrow columns' base, abstract
    ]
    assert len(adapters) == 7
    for cls in adapters:
        assert issubclass(cls, base.Source) and not cls.__abstractmethods__, cls
