"""Sets of small ``.npy`` members scanned together (``engines.batched``) give, member by
member, the very reports the member-by-member path gives: real files in a temporary folder
and tar shards written with ``tarfile``, every dtype a ``.npy`` holds, values planted where
they are found (NaN, inf, cast risks, sums that overflow, tiny spreads), and the options a
scan takes."""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fastfinite
from fastfinite.engines import batched
from fastfinite.errors import SourceError

DTYPES = [
    "<f4",
    ">f4",
    "<f8",
    ">f8",
    "<f2",
    ">f2",
    "<c8",
    ">c8",
    ">c16",
    "<i4",
    ">i8",
    "|i1",
    ">u2",
    "|u1",
    "|b1",
]
PLANTS = [np.nan, np.inf, -np.inf, 1e5, -7e4, 1e-30, 1e-8, 3e38, 1e300, -1e308, 1e-310, 0.0]


def _one_by_one(monkeypatch, data, **kw):
    """The report of the member-by-member path (the batched one switched off)."""
    with monkeypatch.context() as m:
        m.setattr(batched, "applies", lambda plan: False)
        return fastfinite.scan(data, **kw)


def _together(monkeypatch, data, **kw):
    """The report of the batched path, and how many members it scanned together clean
    (their reports not built when the scan of the set ends)."""
    seen = []
    real = batched.scan_set

    def counted(*a):
        reports = real(*a)
        seen.append(reports.pending())
        return reports

    with monkeypatch.context() as m:
        m.setattr(batched, "scan_set", counted)
        report = fastfinite.scan(data, **kw)
    return report, sum(seen)


def _same(a, b) -> None:
    """Identical reports: the whole one, each member's, as dicts and as JSON."""
    assert list(a.arrays) == list(b.arrays)
    for key in a.arrays:
        assert a.arrays[key].to_dict() == b.arrays[key].to_dict(), key
        if a.arrays[key].slices is None:  # (per-slice columns compare in ``to_dict``)
            assert a.arrays[key] == b.arrays[key], key
    assert a.to_dict() == b.to_dict()
    assert json.dumps(a.to_dict(), sort_keys=True, default=str) == json.dumps(
        b.to_dict(), sort_keys=True, default=str
    )
    assert list(a.skipped.items()) == list(b.skipped.items())  # in the same order
    assert list(a.bad_samples()) == list(b.bad_samples())


def _values(rng, dtype: np.dtype, shape, plants) -> np.ndarray:
    scale = 10.0 ** rng.integers(-3, 4)
    x = rng.standard_normal(shape) * scale
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    if dtype.kind in "iu":
        x = rng.integers(0, 100, shape)
    if dtype.kind == "b":
        x = rng.integers(0, 2, shape)
    with np.errstate(all="ignore"):
        x = np.asarray(x).astype(dtype)
    flat = x.reshape(-1)
    for i, v in plants:
        if flat.size and dtype.kind in "fc":
            with np.errstate(all="ignore"):
                flat[i % flat.size] = v
    return x


def _write_set(d: str, rng, dtypes, shape, n: int, plant_every: int) -> None:
    for i in range(n):
        dtype = np.dtype(dtypes[i % len(dtypes)])
        plants = []
        if plant_every and i % plant_every == 1:
            plants = [(int(rng.integers(0, 1 << 20)), PLANTS[int(rng.integers(len(PLANTS)))])]
        sub = os.path.join(d, f"{i // 7:02d}")
        os.makedirs(sub, exist_ok=True)
        np.save(os.path.join(sub, f"{i:04d}.npy"), _values(rng, dtype, shape, plants))


@given(
    dtypes=st.lists(st.sampled_from(DTYPES), min_size=1, max_size=3),
    shape=st.sampled_from([(), (1,), (5,), (3, 4), (2, 1, 3), (40,)]),
    n=st.integers(1, 30),
    plant_every=st.sampled_from([0, 2, 3, 5]),
    cast=st.sampled_from([None, (), ("float16",), ("bfloat16", "float8_e4m3fn")]),
    seed=st.integers(0, 2**32 - 1),
    twin_max=st.sampled_from(["0", "65536"]),
)
def test_a_set_scanned_together_is_the_set_scanned_one_by_one(
    dtypes, shape, n, plant_every, cast, seed, twin_max
):
    rng = np.random.default_rng(seed)
    kw = {} if cast is None else {"cast": cast}
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as d:
        mp.setenv("FASTFINITE_NUMPY_TWIN_MAX", twin_max)
        _write_set(d, rng, dtypes, shape, n, plant_every)
        want = _one_by_one(mp, d, **kw)
        got, together = _together(mp, d, **kw)
        _same(got, want)
        # every clean member but those planted (a tiny spread is clean, and scanned alone)
        clean = [r.clean for r in want.arrays.values()]
        planted = [bool(plant_every) and i % plant_every == 1 for i in range(n)]
        assert sum(c and not p for c, p in zip(clean, planted)) <= together <= sum(clean)


def test_the_batched_path_is_taken_and_finds_what_is_planted(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    for i in range(50):
        x = rng.standard_normal(64).astype(np.float32)
        if i % 10 == 4:
            x[7] = np.nan
        if i == 22:
            x[3] = np.float32(1e5)  # overflows float16
        np.save(tmp_path / f"{i:03d}.npy", x)
    want = _one_by_one(monkeypatch, tmp_path, cast=("float16",))
    got, together = _together(monkeypatch, tmp_path, cast=("float16",))
    _same(got, want)
    assert together == 44  # 5 with a NaN, 1 with a cast risk: scanned alone
    assert got.nan == 5 and got.cast["float16"].overflow == 1
    assert got.bad_samples() == [f"{i:03d}.npy" for i in (4, 14, 22, 24, 34, 44)]
    assert got.arrays["004.npy"].locations[0].index == (7,)


def test_sums_that_overflow_and_tiny_spreads_are_scanned_alone(tmp_path, monkeypatch):
    big = np.full(300, 1.7e308)
    big[::2] = 1.6e308  # finite, but the sums overflow: the moments are taken again
    tiny = np.array([1e-300, 2e-300, 3e-300, 0.0])
    np.save(tmp_path / "a.npy", big)
    np.save(tmp_path / "b.npy", tiny)
    np.save(tmp_path / "c.npy", np.arange(300.0))
    for cast in ((), ("float32",)):  # without a cast target nothing else flags them
        want = _one_by_one(monkeypatch, tmp_path, cast=cast)
        got, together = _together(monkeypatch, tmp_path, cast=cast)
        _same(got, want)
        assert together == 1
        assert got.arrays["a.npy"].mean == pytest.approx(1.65e308)
        assert got.arrays["b.npy"].std == pytest.approx(np.std(tiny), rel=1e-12)


@pytest.mark.parametrize("raw", ["bfloat16", "float8_e4m3fn"])
def test_raw_bfloat16_and_float8_files(tmp_path, monkeypatch, raw):
    dtype = np.dtype(getattr(ml_dtypes, raw))
    rng = np.random.default_rng(4)
    for i in range(12):
        x = (rng.standard_normal(33) * 100).astype(dtype)
        if i % 4 == 1:
            x[2] = np.nan
        np.save(tmp_path / f"{i}.npy", x)  # np.save keeps the raw bytes (|V2, |V1)
    np.save(tmp_path / "other.npy", np.zeros(3, np.float32))  # not raw bytes: an error
    kw = {"raw_dtype": raw, "cast": ("float8_e5m2",), "on_error": "report"}
    want = _one_by_one(monkeypatch, tmp_path, **kw)
    got, together = _together(monkeypatch, tmp_path, **kw)
    _same(got, want)
    assert together > 0 and "other.npy" in got.skipped


def _tar(path, members: dict) -> None:
    with tarfile.open(path, "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def _npy(x) -> bytes:
    b = io.BytesIO()
    np.save(b, x)
    return b.getvalue()


def _shards(d, rng, bad: bool = False) -> None:
    for s in range(3):
        members = {}
        for i in range(40):
            dtype = np.dtype(["<f4", ">f8", "<f2", "<c8", "<i2"][(s + i) % 5])
            plants = [(i, np.nan)] if i % 9 == 2 else [(i, 1e5)] if i % 13 == 3 else []
            members[f"{i:06d}.x.npy"] = _npy(_values(rng, dtype, (3, 5), plants))
            members[f"{i:06d}.cls"] = b"1"
        if bad and s == 1:
            members["000005.x.npy"] = members["000005.x.npy"][:-8]  # the header lies
            members["000006.x.npy"] = b"\x93NUMPY\x01\x00garbage"
        _tar(os.path.join(d, f"shard-{s:06d}.tar"), members)


def test_a_tar_given_alone_is_scanned_together_as_in_a_folder(tmp_path, monkeypatch):
    _shards(tmp_path, np.random.default_rng(6))
    tar = tmp_path / "shard-000000.tar"
    want = _one_by_one(monkeypatch, tar)
    got, together = _together(monkeypatch, tar)
    _same(got, want)
    assert together > 25  # of 40 members: those with a NaN or a cast risk go alone


@pytest.mark.parametrize("twin_max", ["0", "65536"])
def test_tar_shards_together_and_one_by_one(tmp_path, monkeypatch, twin_max):
    monkeypatch.setenv("FASTFINITE_NUMPY_TWIN_MAX", twin_max)
    _shards(tmp_path, np.random.default_rng(5))
    kw = {"cast": ("float16", "bfloat16")}
    want = _one_by_one(monkeypatch, tmp_path, **kw)
    got, together = _together(monkeypatch, tmp_path, **kw)
    _same(got, want)
    assert together > 80
    assert "shard-000000.tar/000002" in got.bad_samples()


def test_a_corrupt_member_among_good_ones(tmp_path, monkeypatch):
    _shards(tmp_path, np.random.default_rng(6), bad=True)
    np.save(tmp_path / "loose.npy", np.ones(4, np.float32))
    (tmp_path / "cut.npy").write_bytes(_npy(np.ones(100, np.float32))[:-40])
    want = _one_by_one(monkeypatch, tmp_path, on_error="report")
    got, together = _together(monkeypatch, tmp_path, on_error="report")
    _same(got, want)
    assert together > 80
    assert "shard-000001.tar/000005.x.npy" in got.skipped
    assert "cut.npy" in got.skipped
    assert {f.kind for f in got.findings} >= {"unreadable_member"}
    for path in (tmp_path,):  # without on_error="report": the error names the member
        with pytest.raises(SourceError, match="cut.npy|000005.x.npy"):
            fastfinite.scan(path)


def test_fortran_order_empty_and_object_files_go_the_ordinary_way(tmp_path, monkeypatch):
    np.save(tmp_path / "f.npy", np.asfortranarray(np.arange(12.0).reshape(3, 4)))
    np.save(tmp_path / "e.npy", np.zeros((0, 3), np.float32))
    np.save(tmp_path / "o.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    np.save(tmp_path / "s.npy", np.zeros(3, [("a", "<f4")]))
    (tmp_path / "long.npy").write_bytes(_npy(np.ones(4, np.float32)) + b"\0" * 16)
    for i in range(3):
        np.save(tmp_path / f"ok{i}.npy", np.arange(5.0) + i)
    kw = {"on_error": "report"}
    want = _one_by_one(monkeypatch, tmp_path, **kw)
    got, together = _together(monkeypatch, tmp_path, **kw)
    _same(got, want)
    assert together == 3


def test_options_that_scan_members_one_by_one_still_do(tmp_path, monkeypatch):
    rng = np.random.default_rng(7)
    for i in range(8):
        x = rng.standard_normal((4, 6)).astype(np.float32)
        if i == 3:
            x[1, 2] = np.inf
        np.save(tmp_path / f"{i}.npy", x)
    for kw in ({"by": 0}, {"fail_fast": True}, {"region_bytes": 32}):
        want = _one_by_one(monkeypatch, tmp_path, **kw)
        got, together = _together(monkeypatch, tmp_path, **kw)
        assert together == 0, kw
        _same(got, want)
    for kw in ({"scale": "amax", "cast": ("float8_e4m3fn",)}, {"workers": 1}, {"progress": True}):
        want = _one_by_one(monkeypatch, tmp_path, **kw)
        got, together = _together(monkeypatch, tmp_path, **kw)
        assert together == 7, kw
        _same(got, want)
    want = _one_by_one(monkeypatch, tmp_path, localize=True)
    got, together = _together(monkeypatch, tmp_path, localize=True)
    assert together == 7
    _same(got, want)
    assert got.arrays["3.npy"].locations[0].index == (1, 2)


def test_a_cache_and_the_dask_engine_give_the_batched_report(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(6):
        x = np.arange(10.0) + i
        if i == 2:
            x[4] = np.nan
        np.save(data / f"{i}.npy", x)
    got, together = _together(monkeypatch, data)
    assert together == 5
    cached = fastfinite.scan(data, cache=str(tmp_path / "cache"))
    again = fastfinite.scan(data, cache=str(tmp_path / "cache"))
    graph = fastfinite.scan(data, scheduler="synchronous")
    for other in (cached, again, graph):
        _same(other, got)


@pytest.mark.numpy_twin
def test_a_set_of_small_files_never_loads_numba(tmp_path):
    """Members the twin takes alone take it together (numba costs more to load than a set
    of small files to scan), and give the kernels' report."""
    import subprocess
    import sys

    for i in range(300):  # 300 x 256 values: stacks past the twin's limit
        x = np.arange(256, dtype=np.float32) + i
        if i % 50 == 7:
            x[i % 256] = np.nan
        np.save(tmp_path / f"{i:03d}.npy", x)
    code = (
        "import sys, json, fastfinite\n"
        f"r = fastfinite.scan({str(tmp_path)!r})\n"
        "print(json.dumps([r.nan, 'numba' in sys.modules]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "FASTFINITE_NUMPY_TWIN_MAX"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(out.stdout) == [6, False]
    with fastfinite.compute.dispatch.using("kernels"):
        kernels = fastfinite.scan(tmp_path)
    with fastfinite.compute.dispatch.using("twins"):
        _same(fastfinite.scan(tmp_path), kernels)


def test_the_progress_bar_counts_every_byte_of_the_set(tmp_path, monkeypatch, capsys):
    """The bar of a set scanned together counts the bytes of its arrays, those scanned
    together and those scanned alone, to the total it starts from."""
    for i in range(6):
        x = np.zeros(1024, np.float32)  # 4 KiB each
        if i == 2:
            x[5] = np.nan  # with a finding
        np.save(tmp_path / f"{i}.npy", x)
    np.save(tmp_path / "big.npy", np.zeros(300_000, np.float32))  # past SMALL_NPY: alone
    (tmp_path / "label.txt").write_text("not an array")
    from fastfinite.engines import local

    bars, real = [], local._set_bar
    monkeypatch.setattr(local, "_set_bar", lambda *a: bars.append(real(*a)) or bars[-1])
    _, together = _together(monkeypatch, tmp_path, progress=True)
    assert together == 5
    (bar,) = bars
    assert bar.total == bar.n == 6 * 4096 + 1_200_000
    assert str(tmp_path) in capsys.readouterr().err


def _mixed_set(d, rng) -> None:
    """Small files of several dtypes with values planted, a file past ``SMALL_NPY`` with a
    NaN, and one that is not a ``.npy`` though named so."""
    from fastfinite.sources.small import SMALL_NPY

    _write_set(str(d), rng, ["<f4", ">f8", "<f2", "<i4"], (3, 5), 23, 3)
    big = np.arange(SMALL_NPY // 4 + 100, dtype=np.float32)
    big[77] = np.nan
    np.save(d / "01" / "0009b.npy", big)
    (d / "02" / "0015b.npy").write_bytes(b"not an array")


@pytest.mark.parametrize("part", [1, 4, 1024])
def test_a_set_of_files_on_dask_gives_the_local_report_in_few_tasks(
    tmp_path, monkeypatch, part, dask_client
):
    """A set of ``.npy`` files on the Dask engine: its small files a task ``SET_PART`` at
    a time, scanned together where the task runs, a larger file its own graph; the report
    the local engine gives, skipped entries and findings in the same order."""
    from fastfinite.engines import dask as dask_engine

    d = tmp_path / "set"
    _mixed_set(d, np.random.default_rng(part))
    monkeypatch.setattr(dask_engine, "SET_PART", part)
    local = fastfinite.scan(d, on_error="report", cast=("float16",))
    assert local.nan >= 1 and "02/0015b.npy" in local.skipped
    for scheduler in ("synchronous", dask_client):
        _same(fastfinite.scan(d, on_error="report", cast=("float16",), scheduler=scheduler), local)
    graph = fastfinite.scan(d, on_error="report", compute=False)
    small = len(local.arrays) + len(local.skipped) - 1  # all but the large file
    tasks = len(dict(graph.dask))
    assert tasks <= -(-small // part) + 12, tasks  # the large file's graph: a few tasks


def test_a_file_of_a_set_that_fails_on_dask_fails_as_it_does_here(tmp_path, dask_client):
    """Without ``on_error="report"``, a file that is not a ``.npy`` is the error the local
    engine raises, naming it, from the task that scanned it."""
    d = tmp_path / "set"
    _mixed_set(d, np.random.default_rng(5))
    with pytest.raises(SourceError) as here:
        fastfinite.scan(d)
    with pytest.raises(SourceError) as there:
        fastfinite.scan(d, scheduler=dask_client)
    assert "0015b.npy" in str(here.value)
    assert str(there.value) == str(here.value)


def test_a_set_of_integer_files_asks_for_no_kernel_of_its_own(tmp_path):
    """Integers are scanned as float64: with the float64 kernels loaded, a set of small
    int32 files asks for no kernel compiled for int32 (there is none: it once logged a
    Numba traceback, and spent a compile on it)."""
    from fastfinite.compute import dispatch

    fastfinite.compile(["plain"], ["float64"])
    for i in range(20):
        np.save(tmp_path / f"{i:03d}.npy", np.arange(15, dtype="<i4").reshape(3, 5) + i)
    r = fastfinite.scan(tmp_path)
    assert r.count == 300 and r.min == 0 and r.max == 33
    asked = [key for key in dispatch._groups if key[0] == "rows"]
    assert asked and all(dtype in ("float32", "float64") for _, dtype in asked), asked


@pytest.mark.parametrize("part", [7, 1024])
def test_tar_shards_on_dask_give_the_local_report_in_few_tasks(
    tmp_path, monkeypatch, part, dask_client
):
    """Tar shards on the Dask engine, in a folder with a small and a large ``.npy`` file,
    an ``.npz`` and a label, and a tar given alone: each tar's members ``SET_PART`` to a
    task, the tar opened again where the task runs and its part scanned together; the
    local engine's report, skipped entries and findings in the same order, corrupt
    members named as here."""
    from fastfinite.engines import dask as dask_engine
    from fastfinite.sources.small import SMALL_NPY

    _shards(tmp_path, np.random.default_rng(part), bad=True)
    np.save(tmp_path / "a.npy", np.array([1.0, np.nan]))
    np.save(tmp_path / "b.npy", np.arange(SMALL_NPY // 8 + 10, dtype=np.float64))
    np.savez(tmp_path / "c.npz", x=np.array([np.inf, 2.0]))
    (tmp_path / "labels.txt").write_text("1\n")
    monkeypatch.setattr(dask_engine, "SET_PART", part)
    kw = {"on_error": "report", "cast": ("float16",)}
    for data in (tmp_path, tmp_path / "shard-000001.tar"):
        local = fastfinite.scan(data, **kw)
        assert local.skipped
        for scheduler in ("synchronous", dask_client):
            _same(fastfinite.scan(data, scheduler=scheduler, **kw), local)
    graph = fastfinite.scan(tmp_path, compute=False, **kw)
    per_tar = -(-80 // part)  # 40 samples of two members each
    assert len(dict(graph.dask)) <= 3 * per_tar + 20, len(dict(graph.dask))


def test_a_tar_changed_between_its_graph_and_its_scan_is_an_error(tmp_path):
    """The members a task scans are those the graph listed: a tar rewritten with other
    members in between is an error naming it, never another member's report under a
    listed key."""
    _tar(tmp_path / "s.tar", {f"{i}.x.npy": _npy(np.arange(3.0) + i) for i in range(4)})
    lazy = fastfinite.scan(tmp_path, compute=False)
    _tar(tmp_path / "s.tar", {f"{i}.y.npy": _npy(np.arange(3.0) + i) for i in range(4)})
    with pytest.raises(SourceError, match="s.tar changed while it was scanned"):
        lazy.compute(scheduler="synchronous")


def test_a_file_gone_between_its_graph_and_its_scan(tmp_path):
    """A checkpoint or tar gone before its parts are scanned: an error naming it, or with
    ``on_error="report"`` each of its members listed as unreadable; never a bare OSError."""
    _tar(tmp_path / "s.tar", {f"{i}.x.npy": _npy(np.arange(3.0) + i) for i in range(4)})
    np.save(tmp_path / "a.npy", np.arange(3.0))
    lazy = fastfinite.scan(tmp_path, compute=False)
    reported = fastfinite.scan(tmp_path, compute=False, on_error="report")
    (tmp_path / "s.tar").rename(tmp_path / "gone")
    with pytest.raises(SourceError, match="s.tar"):
        lazy.compute(scheduler="synchronous")
    r = reported.compute(scheduler="synchronous")
    assert list(r.arrays) == ["a.npy"]
    assert list(r.skipped) == [f"s.tar/{i}.x.npy" for i in range(4)]
    assert all("s.tar" in why for why in r.skipped.values())
    assert [f.kind for f in r.findings].count("unreadable_member") == 4


def test_the_first_bad_member_of_a_set_is_the_error_on_dask_as_here(tmp_path):
    """Without ``on_error="report"``, the error of a set on Dask is its first bad member's
    in the set's order, as the local engine's, whichever task fails first."""
    (tmp_path / "a-fake.npy").write_bytes(b"not an array at all")
    _tar(tmp_path / "b.tar", {"bad.npy": b"\x93NUMPY\x01\x00garbage", "ok.npy": _npy(np.ones(3))})
    np.save(tmp_path / "c-big.npy", np.zeros(200_000))  # its own graph
    (tmp_path / "d-fake.npy").write_bytes(b"\x93NUMPY no")
    with pytest.raises(SourceError) as here:
        fastfinite.scan(tmp_path)
    for scheduler in ("synchronous", "threads"):
        with pytest.raises(SourceError) as there:
            fastfinite.scan(tmp_path, scheduler=scheduler)
        assert str(there.value) == str(here.value)
    assert "a-fake.npy" in str(here.value)
