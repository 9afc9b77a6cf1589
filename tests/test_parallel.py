"""Arrays in RAM scanned in runs of regions, each run in parts on every core
(``parts.PartedScan``): the same report as the serial scan and the NumPy oracle, findings
flagged by region. ``workers=2`` with small ``region_bytes`` takes that path with many
parts; a profiler counts the parts started.

Part: ``fastfinite/compute/parts.py`` and ``fastfinite/engines/local.py``.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastfinite

from .helpers import assert_matches_oracle, calls_of

PLANTED = [np.nan, np.inf, -np.inf, 1e100, -1e300, 1e-300, 3.4028236e38, 0.0]


REGION = 1 << 14
PARTED = {"workers": 2, "region_bytes": REGION}  # a run of many small regions, in parts


def _layout(x: np.ndarray, layout: str) -> np.ndarray:
    if layout == "1d":
        return x.ravel()
    y = x.reshape(300, -1)
    return {
        "C": y,
        "F": np.asfortranarray(y),
        "rows reversed": y[::-1],
        "columns reversed": y[:, ::-1],
        "transposed": y.T,
        "3-d": y.reshape(1, 300, -1),
        "wide rows": x.reshape(2, -1),  # a row is larger than a part
    }[layout]


@settings(max_examples=25, deadline=None)
@given(
    layout=st.sampled_from(
        ["1d", "C", "F", "rows reversed", "columns reversed", "transposed", "3-d"]
    ),
    dtype=st.sampled_from(["<f4", "<f8"]),
    plants=st.lists(st.tuples(st.integers(0, 90_000 - 1), st.sampled_from(PLANTED)), max_size=30),
    max_locations=st.sampled_from([0, 1, 5, 100]),
)
def test_parallel_scan_equals_serial_and_oracle(layout, dtype, plants, max_locations):
    base = np.random.default_rng(len(plants)).uniform(-3, 3, 90_000)
    with np.errstate(over="ignore"):
        for pos, value in plants:
            base[pos] = value
        x = _layout(base.astype(dtype), layout)
    with calls_of("start", "parts.py") as started:
        par = fastfinite.scan(x, **PARTED, max_locations=max_locations, cast=("float32", "float16"))
    assert started[0] > 2  # the parted path ran, in several parts
    ser = fastfinite.scan(
        x, workers=1, region_bytes=REGION, max_locations=max_locations, cast=("float32", "float16")
    )
    assert par.counts() == ser.counts() and par.locations == ser.locations
    assert (par.count, par.min, par.max) == (ser.count, ser.min, ser.max)
    # mean and std: each part shifts its sums by its own first value, so with values far
    # apart (1e100 beside 1) they round differently; both must match NumPy's to rounding
    assert_matches_oracle(par, x, cast=("float32", "float16"), max_locations=max_locations)


@pytest.mark.parametrize(
    "layout", ["1d", "C", "F", "rows reversed", "columns reversed", "3-d", "wide rows"]
)
def test_findings_are_flagged_by_part(layout):
    """Each region of ``report.regions`` is a box of at most a part (what ``localize`` reads
    again), the boxes are disjoint, hold every finding and count each once."""
    rng = np.random.default_rng(5)
    base = rng.standard_normal(90_000)
    hits = rng.choice(base.size, 40, replace=False)
    base[hits[:20]] = np.nan
    base[hits[20:]] = 1e100
    x = _layout(base, layout)
    r = fastfinite.scan(x, **PARTED, max_locations=1000)
    assert (
        r.to_dict()
        == fastfinite.scan(x, workers=1, region_bytes=REGION, max_locations=1000).to_dict()
    )
    total = r.nan + r.cast["float32"].overflow
    assert total == 40 and len(r.locations) == 40
    assert 1 < len(r.regions) and sum(c for _, _, c in r.regions) == total
    boxes = [(np.array(lo), np.array(hi)) for lo, hi, _ in r.regions]
    for i, (lo, hi) in enumerate(boxes):
        assert (lo < hi).all() and (hi <= np.array(x.shape)).all()
        assert np.prod(hi - lo) * x.itemsize <= REGION
        for lo2, hi2 in boxes[i + 1 :]:
            assert not ((lo < hi2) & (lo2 < hi)).all()
    for loc in r.locations:
        inside = [((lo <= loc.index) & (np.array(loc.index) < hi)).all() for lo, hi in boxes]
        assert sum(inside) == 1


def test_concurrent_scans_take_turns_and_agree():
    """Scans from several threads at once share the pool of part threads; each gives its
    own serial result."""
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal(100_000) for _ in range(4)]
    for i, a in enumerate(arrays):
        a[rng.integers(0, a.size, i + 1)] = np.nan
    results: dict[int, fastfinite.ScanReport] = {}

    def work(i: int) -> None:
        results[i] = fastfinite.scan(arrays[i], **PARTED)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, a in enumerate(arrays):
        ser = fastfinite.scan(a, workers=1)
        assert results[i].counts() == ser.counts() and results[i].locations == ser.locations


def test_localize_replays_the_flagged_parts():
    x = np.random.default_rng(2).standard_normal(100_000)
    x[[10, 70_000]] = np.nan
    x[50_000] = 1e300  # (x - mean) ** 2 overflows in its part
    r = fastfinite.scan(x, **PARTED, localize=True, max_locations=10_000)
    where = {loc.index for loc in r.localized}
    assert {(10,), (70_000,)} <= where
    assert any(loc.op == "multiply" and loc.index == (50_000,) for loc in r.localized)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_scans_with_a_pool_of_its_own():
    """The pools' threads do not survive a fork: a child that scans must not wait on them."""
    import multiprocessing

    x = np.random.default_rng(4).standard_normal(100_000)
    x[77] = np.nan
    assert _scan_nan(x) == 2  # the parent's pools now exist
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        nan = pool.apply_async(_scan_nan, (x,)).get(timeout=60)
    assert nan == 2  # a plain scan (parts) and one by=0 (regions)


def _scan_nan(x: np.ndarray) -> int:
    return fastfinite.scan(x, **PARTED).nan + fastfinite.scan(x, **PARTED, by=0).nan


def test_scans_start_their_threads_once(monkeypatch):
    """Every scan's regions and parts run on two pools started once per process (starting
    threads costs about as much as scanning a few megabytes), however many scans there are."""
    x = np.random.default_rng(5).standard_normal((400, 300))
    x[3, 4] = np.nan
    first = [fastfinite.scan(x, **PARTED, by=b).nan for b in (None, 0, -1)]
    started = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda t: started.append(t) or start(t))
    again = [fastfinite.scan(x, **PARTED, by=b).nan for b in (None, 0, -1) for _ in range(3)]
    assert first == [1, 1, 1] and again == [1] * 9
    assert started == []


def test_per_slice_statistics_stay_on_the_threaded_engine():
    """With ``by``, regions go to parallel threads (the per-slice work after each kernel is
    spread with them), not into parts."""
    x = np.random.default_rng(8).standard_normal((300, 300))
    with calls_of("summarize_parts") as parted:
        par = fastfinite.scan(x, **PARTED, by=0)
    assert parted[0] == 0 and par.slices.count.sum() == x.size


@pytest.mark.parametrize("dtype", ["<f4", "bfloat16"])
def test_arrays_larger_than_a_run_are_scanned_in_several_runs(monkeypatch, dtype):
    """An array in RAM larger than a run (a gigabyte; here, made small) is scanned run
    after run: every region of every run, the same report as the serial scan's."""
    from fastfinite.engines import local
    from fastfinite.model.casts import cast_dtype

    monkeypatch.setattr(local, "RUN_BYTES", 4 * REGION)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(90_001).astype(np.float32)
    x[[5, 50_000, 90_000]] = [np.nan, np.inf, 1e-30]
    x = x.astype(cast_dtype(dtype) if dtype == "bfloat16" else dtype)
    r = fastfinite.scan(x, **PARTED)
    assert r.elements == x.size
    assert r.to_dict() == fastfinite.scan(x, workers=1, region_bytes=REGION).to_dict()
    assert_matches_oracle(r, x)


def test_per_slice_finishing_keeps_to_the_scans_workers():
    """``workers=1`` holds for the per-slice columns and findings too: finished in the
    regions' scans, or, when a slice had to be taken again (sums near the float64 maximum),
    after the merge on the calling thread, not in parts on every core."""
    from fastfinite.compute.parts import SLICES_PER_PART

    x = np.random.default_rng(9).standard_normal((2 * SLICES_PER_PART + 10, 3))
    x[5, 1] = np.nan
    for rescue in (False, True):
        if rescue:
            x[7] = [1.7e308, 1.7e308, -1e308]  # its sums overflow: rescued, scaled
        where: list[str] = []

        def profile(frame, event, arg, where=where):  # in_parts's calls on this thread
            caller, name = frame.f_back, frame.f_code.co_name
            if event == "call" and name in ("<lambda>", "flag") and caller.f_code.co_name == "in_parts":  # fmt: skip
                where.append(name)

        sys.setprofile(profile)
        try:
            r = fastfinite.scan(x, by=0, workers=1)
        finally:
            sys.setprofile(None)
        # the columns (build.py), then the flags; none when the scan finished the slices
        assert where == (["<lambda>", "flag"] if rescue else [])
        found = [f.where for f in r.findings]
        assert found[0] == (5,) and set(found) == ({(5,), (7,)} if rescue else {(5,)})
        assert found == [(5,)] or rescue  # the huge slice adds its own findings
        if rescue:  # its mean, which the plain sum overflows
            assert r.slices.mean[7] == pytest.approx((x[7] / 4).mean() * 4, rel=1e-12)
