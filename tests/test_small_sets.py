"""Sets of many small ``.npy`` files scanned at the speed of reading them: the clean
members' reports built when first asked for (``report.members.MemberReports``), a
member with findings built from its kind's template (``batched._found_like``), files read
in one loop (``small.read_files``), a directory's ``.npy`` files taken at once by the walk,
a group's moments folded by ``stats.chan_fold``. Each gives what the member-by-member path
gives, to the last bit: real files in a temporary folder, compared with the set scanned
one by one."""

from __future__ import annotations

import copy
import json
import math
import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastfinite
from fastfinite.engines import batched
from fastfinite.model.stats import chan, chan_fold
from fastfinite.report.members import MemberReports
from fastfinite.sources.small import FIRST, read_files
from fastfinite.sources.walk import walk


def _one_by_one(monkeypatch, data, **kw):
    with monkeypatch.context() as m:
        m.setattr(batched, "applies", lambda plan: False)
        return fastfinite.scan(data, **kw)


def _same(a, b) -> None:
    assert list(a.arrays) == list(b.arrays)
    for key in a.arrays:
        assert a.arrays[key].to_dict() == b.arrays[key].to_dict(), key
        assert a.arrays[key] == b.arrays[key], key
    assert a.to_dict() == b.to_dict()
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())  # keys in the same order too
    assert list(a.skipped.items()) == list(b.skipped.items())
    assert list(a.bad_samples()) == list(b.bad_samples())


def _set(d, n: int = 12, dtype="<f4", shape=(5, 4)) -> None:
    rng = np.random.default_rng(n)
    for i in range(n):
        np.save(os.path.join(d, f"{i:03d}.npy"), rng.standard_normal(shape).astype(dtype))


def test_clean_members_are_built_when_asked_for_and_kept(tmp_path):
    _set(tmp_path)
    r = fastfinite.scan(tmp_path)
    arrays = r.arrays
    assert isinstance(arrays, MemberReports)
    assert arrays.pending() == 12  # the totals did not build them
    first = arrays["000.npy"]
    assert arrays.pending() == 11 and arrays["000.npy"] is first  # built once, kept
    assert first.name == str(tmp_path / "000.npy") and first.count == 20
    x = np.load(tmp_path / "000.npy")
    assert first.min == float(x.min()) and first.max == float(x.max())
    assert first.mean == pytest.approx(float(x.astype(np.float64).mean()), rel=1e-12)


def test_the_mapping_behaves_as_the_dict_it_replaces(tmp_path, monkeypatch):
    _set(tmp_path)
    r = fastfinite.scan(tmp_path)
    want = _one_by_one(monkeypatch, tmp_path)
    assert type(want.arrays) is dict
    assert r.arrays == want.arrays and want.arrays == r.arrays  # both ways
    assert r == want
    assert len(r.arrays) == 12 and "003.npy" in r.arrays and "nope.npy" not in r.arrays
    assert list(r.arrays) == [f"{i:03d}.npy" for i in range(12)]
    assert r.arrays.get("nope.npy") is None
    assert r.member("005.npy") == want.member("005.npy")
    assert "003.npy" in repr(r.arrays)
    assert type(r.arrays.copy()) is dict and r.arrays.copy() == want.arrays
    assert (r.arrays | {"x": None})["x"] is None and len(r.arrays | {}) == 12
    assert ({"x": None} | r.arrays) == {"x": None, **want.arrays}
    for other in (pickle.loads(pickle.dumps(r)), copy.deepcopy(r)):
        assert other == want and other.to_dict() == want.to_dict()
    assert fastfinite.ScanReport.from_json(r.to_json()).to_dict() == want.to_dict()
    sub = want.arrays["001.npy"]
    r.arrays["001.npy"] = sub  # a user's own
    assert r.arrays["001.npy"] is sub
    del r.arrays["002.npy"]
    assert "002.npy" not in r.arrays and len(r.arrays) == 11


@pytest.mark.parametrize("dtype", ["<f2", ">f2", "<f4", ">f4", "<f8", ">f8"])
def test_members_with_findings_are_built_from_their_kind_as_alone(tmp_path, monkeypatch, dtype):
    """Floats with NaN, +inf, -inf, cast overflows and underflows, more of each than
    ``max_locations``, in 0-d, 1-d and 3-d members, beside clean ones of each kind."""
    used = []
    real = batched._found_like
    monkeypatch.setattr(batched, "_found_like", lambda *a: used.append(a[3]) or real(*a))
    rng = np.random.default_rng(11)
    big = {"<f2": 6e4, "<f4": 3e38, "<f8": 1e39}[dtype.replace(">", "<")]  # (squares in range)
    for shape in [(), (7,), (2, 3, 4)]:
        sub = tmp_path / f"s{len(shape)}"
        sub.mkdir()
        for i in range(8):
            x = rng.standard_normal(shape).astype(dtype)
            flat = x.reshape(-1)
            if i % 2 and flat.size > 1:
                plants = [np.nan, np.inf, -np.inf, big, 1e-30, np.nan, -big, np.nan]
                for j, v in zip(rng.permutation(flat.size), plants[i % 3 :]):
                    with np.errstate(all="ignore"):
                        flat[j] = v
            elif i % 2:
                flat[0] = np.inf
            np.save(sub / f"{i}.npy", x)
    for kw in ({}, {"max_locations": 2, "cast": ("float16", "bfloat16")}, {"cast": ()}):
        want = _one_by_one(monkeypatch, tmp_path, **kw)
        got = fastfinite.scan(tmp_path, **kw)
        _same(got, want)
        assert got.nonfinite > 0
    assert len(used) >= 12  # the template's way, not scanned again


def test_files_past_the_first_read_and_past_the_limit(tmp_path, monkeypatch):
    """A file longer than one ``read`` of ``read_files`` is read on; one past
    ``SMALL_NPY`` goes the ordinary way; an empty and a cut one are what their factory
    says they are."""
    rng = np.random.default_rng(2)
    np.save(tmp_path / "a.npy", rng.standard_normal(FIRST // 4 + 3).astype(np.float32))
    np.save(tmp_path / "b.npy", rng.standard_normal(FIRST // 4 + 3).astype(np.float32))
    np.save(tmp_path / "c.npy", np.zeros(FIRST // 8 - 16))  # exactly FIRST bytes
    assert os.path.getsize(tmp_path / "c.npy") == FIRST
    np.save(tmp_path / "d.npy", np.zeros(300_000, np.float32))  # past SMALL_NPY
    (tmp_path / "e.npy").write_bytes(b"")
    (tmp_path / "f.npy").write_bytes((tmp_path / "a.npy").read_bytes()[:-3])
    want = _one_by_one(monkeypatch, tmp_path, on_error="report")
    got = fastfinite.scan(tmp_path, on_error="report")
    _same(got, want)
    assert {"e.npy", "f.npy"} <= set(got.skipped)
    paths = [str(tmp_path / f"{n}.npy") for n in "abcdef"] + [None, str(tmp_path / "gone.npy")]
    data = read_files(paths, 1 << 30)
    sizes = [os.path.getsize(p) for p in paths[:6]]
    assert [len(d) for d in data[:3]] == sizes[:3] and data[3] is None
    assert data[4] == b"" and len(data[5]) == sizes[5] and data[6:] == [None, None]
    assert len(read_files(paths, 10)) == 1  # the budget: stops after the first file


def test_a_suffixless_array_file_is_looked_at_as_before(tmp_path, monkeypatch):
    """The walk takes a directory's ``.npy`` files at once; a file without a suffix is
    still opened for its magic bytes only when nothing else was seen before it."""
    x = np.arange(6.0)
    for name in ("0001", "a.npy", "b.npy", "zzz"):
        with open(tmp_path / name, "wb") as f:
            np.save(f, x)
    (tmp_path / "sub").mkdir()
    np.save(tmp_path / "sub" / "c.npy", x)
    (tmp_path / ".hidden.npy").write_bytes(b"")
    (tmp_path / "link.npy").symlink_to(tmp_path / "a.npy")
    got = fastfinite.scan(tmp_path)
    _same(got, _one_by_one(monkeypatch, tmp_path))
    assert list(got.arrays) == ["0001", "a.npy", "b.npy", "sub/c.npy"]
    assert set(got.skipped) == {"link.npy", "zzz"}
    contents = walk(str(tmp_path))
    assert contents.other[".npy file"] == ["0001", "a.npy", "b.npy", "sub/c.npy"]
    assert contents.entries == 8


FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from(
    [0.0, -0.0, 1e308, -1e308, 5e-324, 2.0**-480, 2.0**-600, 1.5, -2.5]
)


def _pairwise_chan(parts: list) -> tuple:
    """The oracle: ``chan`` on the parts with a value, paired in order level by level (an
    odd last one carried up)."""
    level = [p for p in parts if p[0]]
    if not level:
        return 0, 0.0, 0.0
    while len(level) > 1:
        level = [
            chan(*level[i], *level[i + 1]) if i + 1 < len(level) else level[i]
            for i in range(0, len(level), 2)
        ]
    return level[0]


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.integers(0, 3) | st.integers(0, 2**40), FLOATS, FLOATS),
        max_size=300,
    )
)
def test_the_fold_is_chan_paired(parts):
    """``chan_fold`` has the bits of ``chan`` called pair by pair, whether a level is
    paired in NumPy (``combine``, 64 parts or more) or in Python."""
    n, mean, std = _pairwise_chan(parts)
    got = chan_fold(*zip(*parts)) if parts else chan_fold([], [], [])
    assert got[0] == n
    for a, b in zip(got[1:], (mean, std)):
        assert (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )


def test_the_fold_of_many_parts_keeps_its_digits():
    """10,000 parts of one value each fold to the mean and std NumPy takes of the values,
    within a few units in the last place (a running fold drifts further)."""
    x = np.random.default_rng(3).standard_normal(10_000) * 1e3 + 1e6
    n, mean, std = chan_fold(np.ones(len(x), np.int64), x, np.zeros(len(x)))
    assert n == len(x)
    assert mean == pytest.approx(x.mean(), rel=1e-15)
    assert std == pytest.approx(x.std(), rel=1e-12)


def test_the_walk_stops_where_it_stopped_one_entry_at_a_time(tmp_path, monkeypatch):
    """Its bounds cut a directory of ``.npy`` files where counting one by one did, and the
    error names the files seen before the cut."""
    from fastfinite.errors import SourceError
    from fastfinite.sources import walk as walk_module

    (tmp_path / "t1" / "c" / "x").mkdir(parents=True)
    (tmp_path / "t2").mkdir()
    for name in ["a.npy", "b.npy", "d.npy", "c/x/e.npy"]:
        np.save(tmp_path / "t1" / name, np.zeros(3))
    for i in range(8):
        np.save(tmp_path / "t2" / f"{i}.npy", np.zeros(3))
    monkeypatch.setattr(walk_module, "MAX_DEPTH", 1)
    with pytest.raises(
        SourceError, match=r"\(c\): it holds at least 2 .npy files \(a.npy, b.npy\);"
    ):
        fastfinite.scan(tmp_path / "t1")
    monkeypatch.setattr(walk_module, "MAX_DEPTH", 32)
    monkeypatch.setattr(walk_module, "MAX_ENTRIES", 5)
    with pytest.raises(
        SourceError, match=r"at least 5 .npy files \(0.npy, 1.npy, 2.npy, \+2 more\)"
    ):
        fastfinite.scan(tmp_path / "t2")


def test_files_of_one_size_and_other_headers_are_read_as_rows_and_told_apart(tmp_path, monkeypatch):
    """Files of the first file's size are read into rows of one array; those whose header
    is another (``<i4``, ``>f4``, another shape of the same bytes) are scanned as what
    they are, and a file that changed between the walk and the read is what its factory
    says it is."""
    rng = np.random.default_rng(5)
    kinds = [("<f4", (6, 4)), ("<i4", (6, 4)), (">f4", (6, 4)), ("<f4", (24,)), ("<f8", (12,))]
    for i in range(40):
        dtype, shape = kinds[i % len(kinds)] if i else kinds[0]
        x = (rng.standard_normal(shape) * 100).astype(dtype)
        if i % 7 == 3 and dtype.endswith("f4"):
            x.reshape(-1)[2] = np.nan
        np.save(tmp_path / f"{i:02d}.npy", x)
    sizes = {os.path.getsize(tmp_path / f"{i:02d}.npy") for i in range(5)}
    assert len(sizes) == 1  # one size, five headers
    want = _one_by_one(monkeypatch, tmp_path)
    got = fastfinite.scan(tmp_path)
    assert got.arrays.pending() > 20
    _same(got, want)
    # a file gone between the walk and its read: the error its factory raises
    real = batched.read_rows

    def gone(paths, size):
        os.remove(paths[5])
        return real(paths, size)

    monkeypatch.setattr(batched, "read_rows", gone)
    r = fastfinite.scan(tmp_path, on_error="report")
    assert "05.npy" in r.skipped and "05.npy" not in r.arrays and len(r.arrays) == 39


def test_the_skip_list_and_the_kinds_found_build_no_clean_member(tmp_path, monkeypatch):
    _set(tmp_path)
    np.save(tmp_path / "bad.npy", np.array([1.0, np.nan]))
    r = fastfinite.scan(tmp_path)
    assert r.arrays.pending() == 12
    want = _one_by_one(monkeypatch, tmp_path)
    assert r.bad_samples() == ["bad.npy"] == want.bad_samples()
    assert r.kinds_found() == want.kinds_found() and r.clean is want.clean is False
    assert r.severity_counts() == want.severity_counts()
    assert r.arrays.pending() == 12  # nor do the kinds found, clean, the counts by severity


def test_runs_of_files_follow_the_common_kind(tmp_path, monkeypatch):
    """A run of files read as rows of its first file's kind; when most are of another,
    the next run takes the kind of its own first file. The reports stay the files' own."""
    np.save(tmp_path / "000.npy", np.arange(3.0))
    rng = np.random.default_rng(8)
    for i in range(1, 30):
        x = rng.standard_normal(40).astype(np.float32)
        if i == 17:
            x[4] = np.inf
        np.save(tmp_path / f"{i:03d}.npy", x)
    sizes = []
    real = batched.read_rows
    monkeypatch.setattr(batched, "read_rows", lambda p, size: sizes.append(size) or real(p, size))
    monkeypatch.setattr(batched, "WINDOW", 8)
    got = fastfinite.scan(tmp_path)
    small, big = (os.path.getsize(tmp_path / n) for n in ("000.npy", "001.npy"))
    assert sizes == [small, big, big, big]
    _same(got, _one_by_one(monkeypatch, tmp_path))


@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, -0.0, 1.5, -2.5, math.inf, -math.inf, math.nan, 5e-324]),
            st.integers(0, 2),
        ),
        max_size=12,
    )
)
def test_a_groups_extrema_are_pythons_first_of_equals(members):
    """The group's min and max are what Python's ``min``/``max`` give on the members'
    (the first of equal values: a zero's sign is the first zero's; a NaN where Python
    puts it), members without a value (count 0) left out."""
    from fastfinite.report.model import fold_counts

    values = [v for v, _ in members]
    ns = [n for _, n in members]
    zeros = [0.0] * len(values)
    got = fold_counts(0, 0, 0, [], ns, zeros, zeros, values, values)
    counted = [v for v, n in members if n]
    for key, which in (("min", min), ("max", max)):
        want = which(counted, default=math.nan)
        assert (math.isnan(got[key]) and math.isnan(want)) or (
            got[key] == want and math.copysign(1, got[key]) == math.copysign(1, want)
        )
    empty = fold_counts(0, 0, 0, [], [0] * len(values), values, values, values, values)
    assert math.isnan(empty["min"]) and math.isnan(empty["max"]) and empty["count"] == 0


def test_a_scaled_scan_of_a_set_keeps_its_errors(tmp_path, monkeypatch):
    """``scale=`` changes the members' reports in place after the scan of the set: the
    group's severities, bad samples and kinds found see the changed reports, as the
    member-by-member path's do (they once read the members as clean columns)."""
    _set(tmp_path, 4)
    kw = dict(cast=["float16"], scale=1e6)
    got = fastfinite.scan(tmp_path, **kw)
    want = _one_by_one(monkeypatch, tmp_path, **kw)
    assert want.severity_counts() and list(want.bad_samples())
    assert got.severity_counts() == want.severity_counts()
    assert list(got.bad_samples()) == list(want.bad_samples())
    _same(got, want)


def test_members_replaced_changed_or_deleted_count_in_the_totals(tmp_path):
    """The group's totals over the mapping after a member is replaced, changed in place
    or deleted are those over a plain dict of the same reports; a ``copy.copy`` of the
    mapping is its own."""
    from fastfinite.report.model import ScanReport

    _set(tmp_path)
    r = fastfinite.scan(tmp_path)
    arrays = r.arrays
    alias = copy.copy(arrays)
    bad = fastfinite.scan(tmp_path / "001.npy")  # no member of ``arrays`` handed out yet
    bad.nan, bad.max = 3, 99.0

    def same_totals(m) -> None:
        assert ScanReport.total("g", m).to_dict() == ScanReport.total("g", dict(m)).to_dict()

    arrays["001.npy"] = bad
    same_totals(arrays)
    assert ScanReport.total("g", arrays).nan == 3
    del arrays["003.npy"]
    same_totals(arrays)
    arrays["002.npy"].max = 1e30  # handed out, changed in place
    same_totals(arrays)
    same_totals(alias)
    assert ScanReport.total("g", arrays).max == 1e30 and ScanReport.total("g", alias).nan == 0
    assert "003.npy" in alias and "003.npy" not in arrays
