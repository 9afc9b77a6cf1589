"""Hostile inputs: paths, files, stores, dtypes, options, tables, batches and reports that
are odd, broken or wrong. Each gets the clear error (its type and the words that say what
was wrong) or the right answer, and the input is left exactly as it was.

Part: ``fastfinite/options.py`` and ``fastfinite/sources/open.py``.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pandas as pd
import pytest
import zarr

import fastfinite
from fastfinite import InvalidArgumentError, NonFiniteError, SourceError, UnsupportedDtypeError

X = np.arange(12.0).reshape(3, 4)


def _npy(d, name, content=None, array=None):
    p = d / name
    if array is not None:
        np.save(p, array, allow_pickle=True)
    else:
        p.write_bytes(content)
    return str(p)


def _fifo(d):
    p = str(d / "x.npy")
    os.mkfifo(p)
    return p


def _zarr(d, x=X, **kw):
    p = str(d / "a.zarr")
    zarr.create_array(store=p, data=x, chunks=(2, 2), **kw)
    return p


def _chunk_is_a_dir(d):
    p = _zarr(d)
    chunk = os.path.join(p, "c", "1", "1")
    os.remove(chunk)
    os.makedirs(os.path.join(chunk, "x"))
    return p


def _corrupt(d):
    p = _zarr(d)
    with open(os.path.join(p, "c", "0", "1"), "wb") as f:
        f.write(b"\x00garbage\xff" * 3)
    return p


def _group(d, *arrays):
    p = str(d / "g.zarr")
    g = zarr.open_group(p, mode="w")
    for name, data in arrays:
        g.create_array(name, data=data, chunks=data.shape or None)
    return p


def _zip_group(d):
    import zipfile

    p = str(d / "z.zip")
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("zarr.json", json.dumps({"zarr_format": 3, "node_type": "group"}))
    return p


def _h5(d, name="f.h5"):
    import h5py

    p = str(d / name)
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=X)
    return p


def _parquet(d, table):
    import pyarrow.parquet as pq

    p = str(d / "t.parquet")
    pq.write_table(table, p)
    return p


def _pa():
    import pyarrow as pa

    return pa


def _frame(**cols):
    return pd.DataFrame(cols)


class _Raises:
    def __array__(self, dtype=None, copy=None):
        raise TypeError("can't convert cuda:0 device type tensor to numpy")


def _scan(**kw):
    return lambda data: fastfinite.scan(data, **kw)


def _guarded(**kw):
    return lambda batch: list(fastfinite.guard([batch], **kw))


def _report(data=X):
    return fastfinite.scan(data)


# (input maker, call, expected): expected is (exception type, words) or a check of the result
CASES = {
    # paths and files
    "missing .npy": (lambda d: str(d / "no.npy"), _scan(), (SourceError, "no such file")),
    "empty .npy": (lambda d: _npy(d, "e.npy", b""), _scan(), (SourceError, "it is empty")),
    "text named .npy": (
        lambda d: _npy(d, "t.npy", b"a,b\n1,2\n"),
        _scan(),
        (SourceError, "does not start with NumPy's magic"),
    ),
    "truncated .npy": (
        lambda d: _npy(d, "c.npy", open(_npy(d, "f.npy", array=X), "rb").read()[:140]),
        _scan(),
        (SourceError, "not a valid .npy file"),
    ),
    "FIFO named .npy": (_fifo, _scan(), (SourceError, "not a regular file")),
    "directory named .npy": (
        lambda d: (os.mkdir(d / "d.npy"), str(d / "d.npy"))[1],
        _scan(),
        (SourceError, "not a regular file"),
    ),
    "object .npy": (
        lambda d: _npy(d, "o.npy", array=np.array([1, "a"], dtype=object)),
        _scan(),
        (UnsupportedDtypeError, "Python objects"),
    ),
    "string .npy": (
        lambda d: _npy(d, "s.npy", array=np.array(["a", "b"])),
        _scan(),
        (UnsupportedDtypeError, "string"),
    ),
    "empty-shaped .npy": (
        lambda d: _npy(d, "z.npy", array=np.zeros((0, 3))),
        _scan(),
        lambda r: r.ok and r.elements == 0,
    ),
    "missing store": (lambda d: str(d / "no.zarr"), _scan(), (SourceError, "no such file")),
    "empty directory": (
        lambda d: (os.mkdir(d / "e.zarr"), str(d / "e.zarr"))[1],
        _scan(),
        (SourceError, "Zarr"),
    ),
    "empty zarr group": (
        lambda d: _group(d),
        _scan(),
        lambda r: not r.ok and r.findings[0].kind == "nothing_scanned",
    ),
    "zarr group of text only": (
        lambda d: _group(d, ("names", np.array(["a", "b"]))),
        _scan(),
        lambda r: not r.ok and "names" in r.skipped and "nothing_scanned" in r.kinds_found(),
    ),
    "chunk file replaced by a directory": (
        _chunk_is_a_dir,
        _scan(on_error="report"),
        lambda r: (
            r.missing_chunks == 0
            and [(f.kind, f.where) for f in r.findings] == [("unreadable_chunk", (1, 1))]
        ),
    ),
    "corrupt chunk": (_corrupt, _scan(), (fastfinite.ChunkReadError, "(0, 1)")),
    "HDF5 without the dataset": (
        lambda d: _h5(d) + ":/nope",
        _scan(),
        (SourceError, "no dataset '/nope'"),
    ),
    "text named .h5": (
        lambda d: _npy(d, "t.h5", b"not hdf5"),
        _scan(),
        (SourceError, "as HDF5"),
    ),
    "garbage named .parquet": (
        lambda d: _npy(d, "g.parquet", b"garbage"),
        _scan(),
        (SourceError, "as Parquet"),
    ),
    "Parquet list<double> holding NaN": (
        lambda d: _parquet(d, _pa().table({"v": _pa().array([[1.0, float("nan")], [2.0]])})),
        _scan(),
        lambda r: r.nan == 1 and r.locations[0].labels == {"row": 0, "column": "v", "item": 1},
    ),
    "Parquet struct field holding inf": (
        lambda d: _parquet(d, _pa().table({"s": [{"a": 1.0}, {"a": float("inf")}]})),
        _scan(),
        lambda r: r.posinf == 1 and r.locations[0].labels == {"row": 1, "column": "s.a"},
    ),
    "Parquet of text only": (
        lambda d: _parquet(d, _pa().table({"t": ["a", "b"]})),
        _scan(),
        lambda r: not r.ok and "nothing_scanned" in r.kinds_found(),
    ),
    "zip store without the array": (
        lambda d: _zip_group(d) + "/x",
        _scan(),
        (SourceError, "z.zip"),
    ),
    "file URL to nothing": (
        lambda d: "file://" + str(d / "none.zarr"),
        _scan(),
        (SourceError, "none.zarr"),
    ),
    # dtypes and layouts
    "extended precision": (
        lambda d: np.ones(3, np.longdouble),
        _scan(),
        (UnsupportedDtypeError, "float128")
        if np.dtype(np.longdouble).itemsize > 8
        else (lambda r: r.ok),
    ),
    "datetimes": (
        lambda d: np.array(["2020-01-01"], "datetime64[D]"),
        _scan(),
        (UnsupportedDtypeError, "datetime"),
    ),
    "structured": (
        lambda d: np.zeros(2, [("a", "f8")]),
        _scan(),
        (UnsupportedDtypeError, "structured"),
    ),
    "big-endian with NaN": (
        lambda d: np.array([1.0, np.nan, 3.0], ">f8"),
        _scan(),
        lambda r: r.nan == 1 and r.locations[0].index == (1,) and r.mean == 2.0,
    ),
    "bool": (
        lambda d: np.array([True, False, True]),
        _scan(),
        lambda r: r.ok and r.mean == pytest.approx(2 / 3),
    ),
    "uint64 maximum to float16": (
        lambda d: np.array([2**64 - 1, 1], np.uint64),
        _scan(cast="float16"),
        lambda r: r.cast["float16"].overflow == 1,
    ),
    "complex NaN in the imaginary part": (
        lambda d: np.array([1 + 1j, complex(1, np.nan)]),
        _scan(),
        lambda r: r.nan == 1 and r.locations[0].index == (1,),
    ),
    "0-d inf": (lambda d: np.array(np.inf), _scan(), lambda r: r.locations[0].index == ()),
    "float16 -inf": (
        lambda d: np.array([1, -np.inf], np.float16),
        _scan(),
        lambda r: r.neginf == 1,
    ),
    "reversed strided view": (
        lambda d: np.where(X > 10, np.nan, X)[::-1, ::-2],
        _scan(),
        lambda r: [loc.index for loc in r.locations] == [(0, 0)],
    ),
    "values near the float64 maximum": (
        lambda d: np.array([1.7e308, -1.7e308, 1.7e308]),
        _scan(),
        lambda r: (
            r.mean == pytest.approx(1.7e308 / 3) and r.std == pytest.approx(1.7e308 / 3 * 8**0.5)
        ),
    ),
    "one-value slices": (
        lambda d: np.arange(3.0).reshape(3, 1),
        _scan(by=0),
        lambda r: r.findings == [],
    ),
    # options
    "unknown cast target": (
        lambda d: X,
        _scan(cast="float8"),
        (InvalidArgumentError, "choose from"),
    ),
    "cast target not a name": (
        lambda d: X,
        _scan(cast=["float32", 3]),
        (InvalidArgumentError, "3"),
    ),
    "negative max_locations": (
        lambda d: X,
        _scan(max_locations=-1),
        (InvalidArgumentError, "max_locations must be an int >= 0, got -1"),
    ),
    "bool max_locations": (lambda d: X, _scan(max_locations=True), (InvalidArgumentError, "True")),
    "huge max_locations": (
        lambda d: np.where(X > 5, np.nan, X),
        _scan(max_locations=10**12),
        lambda r: len(r.locations) == 6,
    ),
    "by out of range": (lambda d: X, _scan(by=5), (InvalidArgumentError, "out of range")),
    "by twice": (lambda d: X, _scan(by=(0, -2)), (InvalidArgumentError, "twice")),
    "by as text": (lambda d: X, _scan(by="0"), (InvalidArgumentError, "by must be")),
    "by as float": (lambda d: X, _scan(by=1.5), (InvalidArgumentError, "1.5")),
    "z_threshold 0": (lambda d: X, _scan(z_threshold=0), (InvalidArgumentError, "z_threshold")),
    "z_threshold NaN": (lambda d: X, _scan(z_threshold=np.nan), (InvalidArgumentError, "nan")),
    "negative eps": (lambda d: X, _scan(eps=-1), (InvalidArgumentError, "eps")),
    "no workers": (lambda d: X, _scan(workers=0), (InvalidArgumentError, "workers")),
    "no region bytes": (lambda d: X, _scan(region_bytes=0), (InvalidArgumentError, "region_bytes")),
    "split_every 1": (lambda d: X, _scan(split_every=1), (InvalidArgumentError, "split_every")),
    "unknown on_error": (lambda d: X, _scan(on_error="skip"), (InvalidArgumentError, "on_error")),
    "unknown scheduler": (
        lambda d: X,
        _scan(scheduler="fast"),
        (InvalidArgumentError, "scheduler"),
    ),
    "fail_fast on a graph": (
        lambda d: X,
        _scan(fail_fast=True, scheduler="threads"),
        (InvalidArgumentError, "fail_fast"),
    ),
    "localize without compute": (
        lambda d: X,
        _scan(localize=True, compute=False),
        (InvalidArgumentError, "compute=True"),
    ),
    "assert_finite with a typo": (
        lambda d: np.array([np.nan]),
        lambda data: fastfinite.assert_finite(data, fail_on="nonfinit"),
        (InvalidArgumentError, "unknown kind 'nonfinit'"),
    ),
    "assert_finite on one kind": (
        lambda d: np.array([np.nan]),
        lambda data: fastfinite.assert_finite(data, fail_on="nonfinite"),
        (NonFiniteError, "nan 1 at (0,)"),
    ),
    "assert_finite, other kinds pass": (
        lambda d: np.array([np.nan]),
        lambda data: fastfinite.assert_finite(data, fail_on={"cast"}),
        lambda r: r.nan == 1,
    ),
    # tables
    "DataFrame per row": (
        lambda d: _frame(a=[1.0, 2.0], b=[3.0, np.nan]),
        _scan(by=0),
        lambda r: (
            r.shape == (2, 2)
            and r.slices.count.tolist() == [2, 1]
            and [f.kind for f in r.findings] == ["nonfinite"]
        ),
    ),
    "DataFrame per column": (
        lambda d: _frame(a=[1.0, 1.0], b=[3.0, 4.0], t=["x", "y"]),
        _scan(by=-1),
        lambda r: (
            r.slices.names == ["a", "b"]
            and [(f.kind, f.where) for f in r.findings] == [("zero_variance", (0,))]
            and "t" in r.skipped
        ),
    ),
    "nullable Int64 with NA": (
        lambda d: _frame(i=pd.array([1, None, 3], dtype="Int64")),
        _scan(),
        lambda r: r.nan == 1,
    ),
    "sparse column with inf": (
        lambda d: _frame(s=pd.arrays.SparseArray([0.0, np.inf, 0.0])),
        _scan(),
        lambda r: r.posinf == 1 and r.locations[0].index == (1, 0),
    ),
    "object column of numbers and None": (
        lambda d: _frame(o=np.array([1, None, 2.5], dtype=object)),
        _scan(),
        lambda r: r.nan == 1 and r.count == 2,
    ),
    "DataFrame of text only": (
        lambda d: _frame(t=["a", "b"]),
        _scan(),
        lambda r: not r.ok and "nothing_scanned" in r.kinds_found(),
    ),
    "duplicate column names": (
        lambda d: pd.DataFrame([[1.0, np.nan]], columns=["a", "a"]),
        _scan(),
        lambda r: set(r.arrays) == {"a", "a (1)"} and r.locations[0].index == (0, 1),
    ),
    "Series with NaN": (
        lambda d: pd.Series([1.0, np.nan], index=["p", "q"], name="s"),
        _scan(),
        lambda r: r.locations[0].labels == {"row": "q", "column": "s"},
    ),
    "DataFrame without rows": (lambda d: _frame(a=np.zeros(0)), _scan(), lambda r: r.ok),
    # batches
    "batch whose __array__ raises": (
        lambda d: (np.zeros(2), _Raises()),
        _guarded(),
        (SourceError, "batch 0, element 1: cannot check _Raises: can't convert cuda:0"),
    ),
    "batch of Python objects": (lambda d: [object()], _guarded(), (SourceError, "element 0")),
    "batch with text objects": (
        lambda d: {"names": np.array(["a", None], dtype=object), "x": np.zeros(2)},
        _guarded(),
        lambda out: len(out) == 1,
    ),
    "ragged batch with inf": (
        lambda d: {"x": [np.zeros(3), np.array([np.inf])]},
        _guarded(on_bad="skip"),
        lambda out: out == [],
    ),
    "guard with an unknown kind": (
        lambda d: np.zeros(2),
        _guarded(fail_on={"bogus"}),
        (InvalidArgumentError, "unknown kind 'bogus'"),
    ),
    "guard with one kind as text": (
        lambda d: np.array([np.nan]),
        _guarded(fail_on="nonfinite"),
        (NonFiniteError, "nan at (0,)"),
    ),
    "guard with negative prefetch": (
        lambda d: np.zeros(2),
        _guarded(prefetch=-1),
        (InvalidArgumentError, "prefetch"),
    ),
    # reports
    "localize with a report of other data": (
        lambda d: np.zeros(5),
        lambda data: fastfinite.localize(data, _report()),
        (InvalidArgumentError, "the report is of a float64 array (3, 4)"),
    ),
    "localize a group's report on one array": (
        lambda d: X,
        lambda data: fastfinite.localize(data, _report(_frame(a=[np.nan]))),
        (InvalidArgumentError, "not in this data"),
    ),
    "merge float32 and float64": (
        lambda d: X,
        lambda data: fastfinite.merge_reports([_report(data), _report(data.astype("f4"))]),
        lambda r: r.dtype == "group" and len(r.arrays) == 2,
    ),
    "merge nothing": (
        lambda d: [],
        fastfinite.merge_reports,
        (InvalidArgumentError, "at least one report"),
    ),
    "merge what is not a report": (
        lambda d: [{"nan": 1}],
        fastfinite.merge_reports,
        (InvalidArgumentError, "ScanReport"),
    ),
    "report of another schema": (
        lambda d: json.dumps({"schema": "other/1"}),
        fastfinite.ScanReport.from_json,
        (InvalidArgumentError, "not a fastfinite report"),
    ),
    "plot axes out of range": (
        lambda d: X,
        lambda data: _report(data).plot(str(data.shape), axes=(0, 7)),
        (InvalidArgumentError, "plot axes"),
    ),
}


def _fingerprint(value):
    """What must not change: an array's bytes and flags, a file's bytes, a table's values."""
    if isinstance(value, np.ndarray):
        return value.tobytes(), value.flags.writeable, value.dtype.str
    if isinstance(value, (pd.DataFrame, pd.Series)):
        return value.copy(deep=True)
    if (
        isinstance(value, str)
        and os.path.isfile(value)
        and not value.endswith(".npy")
        or (isinstance(value, str) and value.endswith(".npy") and os.path.isfile(value))
    ):
        return hashlib.sha256(open(value, "rb").read()).hexdigest()
    return repr(value)


def _same(before, after):
    if isinstance(before, (pd.DataFrame, pd.Series)):
        assert before.equals(after)
    else:
        assert before == after


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_input(case, tmp_path):
    make, call, expected = CASES[case]
    data = make(tmp_path)
    before = _fingerprint(data)
    if isinstance(expected, tuple):
        kind, words = expected
        with pytest.raises(kind) as e:
            call(data)
        assert words in str(e.value), str(e.value)
    else:
        assert expected(call(data)), case
    _same(before, _fingerprint(data))


def test_there_are_many_cases():
    assert len(CASES) >= 60
