"""First contact: a scan never waits on the compiler, and what it reports does not depend on
whether the NumPy twins or the Numba kernels did the work (or both, switching mid-way);
``fastfinite compile`` fills the cache so that the next process compiles nothing; a cache
that cannot be written moves, said once; a fresh cluster compiles once per worker, all at
once.

Part: ``fastfinite/compute/dispatch.py`` and ``compiling.py``, ``kernels/jit.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastfinite
from fastfinite.compute import dispatch
from fastfinite.model.casts import TARGETS

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, 7e-46, 1e20, 3e38, 1e300, 7e4, 6e-8, 1e-5]
for _t in TARGETS.values():
    SPECIAL += [_t.overflow_threshold, _t.underflow_threshold]
DTYPES = ["<f4", ">f4", "<f8", "<f2", "<c8", "<c16", "<i4", "<u1", "?", "bfloat16", "float8_e4m3fn"]  # fmt: skip


def _dtype(name: str) -> np.dtype:
    if name in ("bfloat16", "float8_e4m3fn"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


@st.composite
def inputs(draw):
    """An array of any supported dtype and layout with special values planted, and scan
    options: ``by``, cast targets, the number of positions kept."""
    dt = _dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(st.sampled_from([(700,), (40, 300), (300, 40), (6, 7, 90), (3, 5000)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal(shape) * 10.0 ** draw(st.integers(-2, 4))
    flat = x.reshape(-1)
    for i, v in draw(st.lists(st.tuples(st.integers(0, flat.size - 1), st.sampled_from(SPECIAL)), max_size=30)):  # fmt: skip
        flat[i] = v
    with np.errstate(all="ignore"):
        x = x.astype(dt) if dt.kind != "c" else (x + 1j * x[..., ::-1]).astype(dt)
    layout = draw(st.sampled_from(["C", "F", "strided", "reversed"]))
    if layout == "F":
        x = np.asfortranarray(x)
    elif layout == "strided" and x.ndim > 1:
        x = np.repeat(x, 2, axis=-1)[..., ::2]
    elif layout == "reversed":
        x = x[::-1]
    by = draw(st.sampled_from([None, 0, -1] + ([(0, 1), (1, 2)] if x.ndim == 3 else [])))
    cast = draw(st.lists(st.sampled_from(["float32", "float16", "bfloat16", "float8_e4m3fn"]), max_size=3, unique=True))  # fmt: skip
    return x, {"by": by, "cast": tuple(cast), "max_locations": draw(st.sampled_from([1, 5, 100]))}


def _report(x, kwargs, policy: str) -> dict:
    with dispatch.using(policy):
        return fastfinite.scan(x, **kwargs).to_dict()


@settings(max_examples=60, deadline=None)
@given(case=inputs())
def test_the_twins_report_what_the_kernels_report(case):
    """The whole report, bit for bit: counts, positions, statistics, per-slice columns and
    findings, whether every region went through the NumPy twins or the kernels."""
    x, kwargs = case
    assert _report(x, kwargs, "twins") == _report(x, kwargs, "kernels")


@settings(max_examples=30, deadline=None)
@given(case=inputs(), switch=st.integers(0, 6))
def test_a_scan_that_switches_from_twins_to_kernels_mid_way(case, switch):
    """The kernels become ready while a scan runs: its first ``switch`` kernel calls go to
    the twins, the rest to the kernels (regions of 4 KB: many calls), and its report is the
    warm scan's."""
    x, kwargs = case
    kwargs = {**kwargs, "region_bytes": 4096}
    warm = _report(x, kwargs, "kernels")
    calls = {"n": 0}
    pick = dispatch.pick

    def switching(name, dtype, small=False):
        calls["n"] += 1
        with dispatch.using("twins" if calls["n"] <= switch else "kernels"):
            return pick(name, dtype, small)

    dispatch.pick = switching
    try:
        assert _report(x, kwargs, "auto") == warm
    finally:
        dispatch.pick = pick


FRESH = textwrap.dedent(
    """
    import json, sys, numpy as np, fastfinite
    from fastfinite.compute import dispatch
    from fastfinite.reference import twins
    used = {"twin": 0, "kernel": 0}
    pick = dispatch.pick
    def counted(name, dtype, small=False):
        fn = pick(name, dtype, small)
        used["twin" if fn is getattr(twins, name, None) else "kernel"] += not small
        return fn
    dispatch.pick = counted
    x = np.random.default_rng(0).standard_normal(60_000_000).astype(np.float32)
    x[[5, 30_000_001, 59_999_999]] = [np.nan, np.inf, 1e-45]
    first = fastfinite.scan(x, cast=("float16",)).to_dict()
    with dispatch.using("kernels"):
        warm = fastfinite.scan(x, cast=("float16",)).to_dict()
    print(json.dumps({"same": first == warm, **used}))
    """
)


def test_a_fresh_process_scans_on_twins_then_kernels_and_reports_the_same(tmp_path):
    """A real first contact: an empty cache, a scan of 240 MB that starts before its
    kernels are compiled and ends after; its report equals a warm scan's."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", FRESH], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["same"] and got["twin"] > 0 and got["kernel"] > 0, got


COMPILES = textwrap.dedent(
    """
    import json, numpy as np, ml_dtypes, fastfinite
    from numba.core import event
    from fastfinite.compute import dispatch
    compiled = []
    class Listener(event.Listener):
        def on_start(self, e):
            compiled.append(e.data["dispatcher"].py_func.__qualname__)
        def on_end(self, e):
            pass
    event.register("numba:compile", Listener())
    rng = np.random.default_rng(1)
    with dispatch.using("kernels"):
        for dt in ("f4", "f8"):
            x = rng.standard_normal((3000, 400)).astype(dt)
            x[7, 7] = np.nan
            for kw in ({}, {"by": 0}, {"by": -1}, {"by": 0, "localize": True},
                       {"cast": ("float16", "bfloat16", "float8_e4m3fn")}):
                fastfinite.scan(x, **kw)
                fastfinite.scan(np.asfortranarray(x), **kw)
            fastfinite.scan(x, by=-1, region_bytes=1 << 16)  # slices merged across regions
            fastfinite.scan(x, scale="amax", cast="float8_e4m3fn")
            list(fastfinite.guard([x, x[:10]], cast=("float16",), on_bad="skip"))
        fastfinite.scan((rng.standard_normal(100_000) * 100).astype("i4"))
        fastfinite.scan(rng.standard_normal(100_000).astype("c8"), by=None)
        for name in ("bfloat16", "float8_e4m3fn"):
            fastfinite.scan(rng.standard_normal((300, 400)).astype(getattr(ml_dtypes, name)))
    print(json.dumps(compiled))
    """
)


def test_compile_fills_the_cache_so_the_next_process_compiles_nothing(tmp_path):
    """``fastfinite compile`` in one process; in the next, scans of every mode (plain, by=0,
    by=-1 in both layouts, merged slices, localize, cast targets, scale, the guard, integer,
    complex, bfloat16 and float8 data) compile no function at all: numba's compile event
    never fires."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-m", "fastfinite", "compile", "--no-progress"], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "groups in" in run.stdout and "FAILED" not in run.stdout
    run = subprocess.run([sys.executable, "-c", COMPILES], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []


WARM_UP = textwrap.dedent("""
    import json, sys
    from fastfinite.kernels.compilers import BLAS, warm_up
    warm_up()
    import numba.np.arraymath as arraymath
    refused = {"scipy.linalg": "scipy.linalg" in sys.modules, "blas": arraymath._HAVE_BLAS}
    import scipy.linalg.cython_blas  # refused only while numba started: importable after
    print(json.dumps(refused))
""")


def test_a_compiling_process_starts_numba_without_scipy_and_a_users_process_keeps_it(tmp_path):
    """A process that compiles kernels only (``warm_up``) starts numba without SciPy's
    linear algebra (half its start-up, for ``np.correlate``'s BLAS, which no kernel calls)
    and leaves it importable; a user's process that compiles with ``fastfinite.compile``
    keeps numba's BLAS, and the kernels the helpers compiled scan as the twins do."""
    pytest.importorskip("scipy")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", WARM_UP], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"scipy.linalg": False, "blas": False}
    user = textwrap.dedent("""
        import json, numpy as np, fastfinite
        from fastfinite.compute import dispatch
        r = fastfinite.compile("by=0", "float64", processes=2)  # one group here, one aside
        import numba.np.arraymath as arraymath
        x = np.arange(100_000.0); x[[5, 70_000]] = [np.nan, np.inf]
        with dispatch.using("kernels"):
            k = fastfinite.scan(x.reshape(100, 1000), by=0).to_dict()
        with dispatch.using("twins"):
            t = fastfinite.scan(x.reshape(100, 1000), by=0).to_dict()
        print(json.dumps([arraymath._HAVE_BLAS, k == t, k["nan"], k["posinf"]]))
    """)
    run = subprocess.run([sys.executable, "-c", user], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1]) == [True, True, 1, 1]


def test_compile_without_loading_fills_the_cache_and_loads_nothing_here(tmp_path):
    """``load=False`` (``fastfinite compile``): the groups are compiled into the cache by
    processes of their own and not loaded here; a second call finds them there."""
    code = textwrap.dedent("""
        import json, fastfinite
        from fastfinite.compute import dispatch
        first = fastfinite.compile(["by=0"], "float32", load=False, processes=2)
        second = fastfinite.compile(["by=0"], "float32", load=False, processes=2)
        print(json.dumps([sorted(first.seconds), sorted(second.cached), dispatch.loaded("rows", "float32"), str(second)]))
    """)  # fmt: skip
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    compiled, found, loaded, text = json.loads(run.stdout.strip().splitlines()[-1])
    assert compiled == found == [["finish", "float64"], ["rows", "float32"]]
    assert loaded is False
    assert "rows float32: in the cache already" in text and "2 groups in" in text


def test_compile_names_an_unknown_mode(capsys):
    from fastfinite.cli import main

    assert main(["compile", "--mode", "plain,sideways"]) == 2
    err = capsys.readouterr().err
    assert "sideways" in err and "plain" in err and err.count("\n") == 1


PROBE = (
    "import os, tempfile; tempfile.tempdir = os.environ.get('BLOCKED_TMP') or None\n"
    "import numpy as np, fastfinite; from fastfinite.compute import dispatch\n"
    "with dispatch.using('kernels'):\n"
    "    r = fastfinite.scan(np.arange(200_000.0))\n"
    "from fastfinite.kernels import cache_directory, scan_rows\n"
    "print(cache_directory()); print(sum(scan_rows.stats.cache_misses.values()))\n"
)


def test_a_cache_that_cannot_be_written_moves_to_the_users_said_once(tmp_path):
    """NUMBA_CACHE_DIR under a file and the package's own __pycache__ a file (as where
    site-packages is read-only): the kernels are cached under $XDG_CACHE_HOME/fastfinite,
    said once on stderr, and the next process loads them from there."""
    import shutil

    src = tmp_path / "src"
    here = os.path.dirname(fastfinite.__file__)
    shutil.copytree(here, src / "fastfinite", ignore=shutil.ignore_patterns("__pycache__"))
    for d in ("", "kernels", "model"):
        (src / "fastfinite" / d / "__pycache__").write_text("not a directory")
    (tmp_path / "a-file").write_text("")
    env = dict(os.environ, PYTHONPATH=str(src), NUMBA_CACHE_DIR=str(tmp_path / "a-file" / "x"))
    env["XDG_CACHE_HOME"] = str(tmp_path / "home-cache")
    runs = [subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=tmp_path) for _ in range(2)]  # fmt: skip
    for run in runs:
        assert run.returncode == 0, run.stderr
    where, _ = runs[0].stdout.split()
    assert where.startswith(str(tmp_path / "home-cache" / "fastfinite")), where
    assert list(Path(where).rglob("rows.scan_rows-*.nbi"))  # compiled there (by the helper)
    assert runs[1].stdout.split() == [where, "0"]  # and the next process loads it
    said = [line for line in runs[0].stderr.splitlines() if "cannot write compiled kernels" in line]
    assert len(said) == 1 and str(tmp_path / "a-file") in said[0]


def test_nowhere_to_cache_is_said_once_and_the_scan_goes_on(tmp_path):
    """Nothing can be written: every process compiles again, said once, never an error."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(os.path.dirname(fastfinite.__file__), src / "fastfinite", ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for d in ("", "kernels", "model"):
        (src / "fastfinite" / d / "__pycache__").write_text("")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    env = dict(os.environ, PYTHONPATH=str(src), NUMBA_CACHE_DIR=str(blocked / "x"))
    # the temporary directory too: root writes anywhere, so it is named as one under a file
    env.update(XDG_CACHE_HOME=str(blocked / "y"), BLOCKED_TMP=str(blocked / "z"), HOME=str(blocked / "h"))  # fmt: skip
    run = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[0] == "None"
    said = [line for line in run.stderr.splitlines() if "no directory for compiled kernels" in line]
    assert len(said) == 1


def test_the_progress_bar_names_the_compile(tmp_path):
    """On an empty cache the bar says why the data goes slowly at first. (The scan starts once
    the process knows its kernels are being compiled: on the twins, 200 MB can be scanned
    before it knows, and the bar would rightly say nothing.)"""
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal(50_000_000).astype("f4"))
    code = (
        "import sys, time, numpy as np, fastfinite\n"
        "from fastfinite.compute import dispatch\n"
        "dispatch.prepare('rows', np.float32)\n"
        "t = time.time()\n"
        "while not dispatch.compiling() and time.time() - t < 60:\n"
        "    time.sleep(0.01)\n"
        "assert dispatch.compiling()\n"
        "fastfinite.scan(sys.argv[1], progress=True)\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.npy")], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "compiling kernels, first use on this machine" in run.stderr


WORKER_STATE = """
def state():
    from fastfinite.compute import dispatch
    return {f"{g}:{d}": (g_.ready.is_set(), g_.fresh, g_.began) for (g, d), g_ in dispatch._groups.items()}
"""


def test_a_fresh_cluster_compiles_once_per_worker_all_at_once(tmp_path, dask_processes):
    """Two fresh worker processes on an empty cache: the scan starts every worker on its
    kernels at once (they begin within a second of each other, before most tasks), each
    worker prepares each group once however many tasks it runs, and the report is the
    local engine's, bit for bit."""
    import distributed
    import zarr

    path = str(tmp_path / "x.zarr")
    x = np.random.default_rng(2).standard_normal((2000, 3000)).astype("f4")
    x[12, 34], x[1500, 7] = np.nan, 1e20
    zarr.create_array(store=path, data=x, chunks=(100, 3000))
    cache = str(tmp_path / "numba")
    with dask_processes(str(tmp_path), env={"NUMBA_CACHE_DIR": cache}) as address:
        with distributed.Client(address, timeout="30s") as client:
            r = fastfinite.scan(path, scheduler=client, cast=("float16",))
            ns: dict = {}
            exec(WORKER_STATE, ns)
            deadline = time.time() + 120
            while True:  # wait for the compiles the scan started to end
                states = client.run(ns["state"])
                if (
                    all(all(v[0] for v in s.values()) for s in states.values())
                    or time.time() > deadline
                ):
                    break
                time.sleep(0.5)
    assert len(states) == 2
    groups = [s["rows:float32"] for s in states.values()]
    assert all(ready and fresh for ready, fresh, _ in groups)  # compiled, once, in each
    assert abs(groups[0][2] - groups[1][2]) < 1.0  # at once
    with dispatch.using("kernels"):
        local = fastfinite.scan(path, cast=("float16",))
    assert r.to_dict() == local.to_dict()


@pytest.mark.parametrize("mode", ["plain", "by=-1"])
def test_compile_of_a_mode_compiles_what_its_scan_calls(mode):
    """``groups_of`` names each mode's groups; an unknown dtype is an error naming it."""
    from fastfinite.compute.compiling import MODES, groups_of
    from fastfinite.errors import InvalidArgumentError

    got = groups_of([mode], ["float32"])
    assert [g for g, _ in got] == [g for g, _ in MODES[mode]]
    with pytest.raises(InvalidArgumentError, match="float16"):
        groups_of([mode], ["float16"])


ASIDE = textwrap.dedent(
    """
    import json, sys, numpy as np, fastfinite
    from numba.core import event
    from fastfinite.compute import dispatch
    if sys.argv[1] == "no-helper":
        sys.executable = "/nonexistent/python"  # the helper cannot start
    compiled = []
    class Listener(event.Listener):
        def on_start(self, e):
            compiled.append(e.data["dispatcher"].py_func.__qualname__)
        def on_end(self, e):
            pass
    event.register("numba:compile", Listener())
    x = np.random.default_rng(0).standard_normal((400, 1000)).astype("f4")
    x[3, 4] = np.nan
    with dispatch.using("kernels"):
        got = fastfinite.scan(x, by=0).to_dict()
    with dispatch.using("twins"):
        twin = fastfinite.scan(x, by=0).to_dict()
    print(json.dumps({"same": got == twin, "compiled": sorted(set(compiled))}))
    """
)


@pytest.mark.parametrize("helper", ["helper", "no-helper"])
def test_kernels_compile_in_a_helper_process_or_here_when_it_cannot_start(tmp_path, helper):
    """On an empty cache the kernels are compiled into it by a helper process (numba's
    compiler is Python: here it would hold the GIL the twins need) and only loaded here;
    when no helper can start, they are compiled here. Either way the report is the twins'."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", ASIDE, helper], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["same"]
    if helper == "helper":
        assert got["compiled"] == []  # loaded, not compiled, in this process
    else:
        assert {"scan_rows", "_finish"} <= set(got["compiled"])
    assert list((tmp_path / "cache").rglob("rows.scan_rows-*.nbi"))


_RACE_KERNELS = """
import numpy as np

from fastfinite.kernels.jit import helper, kernel


@helper
def _twice(v):
    return v * 2


@kernel
def total(a):
    out = np.empty_like(a)
    for i in range(a.size):
        out[i] = _twice(a[i])
    return out
"""

_RACE_CHILD = """
import sys, time
import numpy as np
from numba.core.caching import IndexDataCacheFile

load = IndexDataCacheFile._load_index


def slow(self):  # widens the window between reading the index and writing it
    found = load(self)
    time.sleep(1.0)
    return found


IndexDataCacheFile._load_index = slow
import racekern

racekern.total(np.arange(3, dtype=sys.argv[1]))
"""


def test_processes_compiling_into_one_cache_at_once_keep_each_others_kernels(tmp_path):
    """Two processes compile one kernel (and its helper) for float32 and float64 into one
    empty cache at once. Numba alone named both data files ``total.1.nbc`` and the index
    of one pointed at the other's code (numba/numba#10128): a later process loaded a
    float32 kernel for float64. Here the next process finds both, compiles nothing, and
    each gives its own dtype's answer."""
    (tmp_path / "racekern.py").write_text(_RACE_KERNELS)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(tmp_path))
    env["PYTHONPATH"] += os.pathsep + os.environ.get("PYTHONPATH", "")
    children = [
        subprocess.Popen([sys.executable, "-c", _RACE_CHILD, dtype], env=env, cwd=tmp_path)
        for dtype in ("float32", "float64")
    ]
    assert [c.wait(timeout=120) for c in children] == [0, 0]
    check = textwrap.dedent("""
        import numpy as np, racekern
        a = racekern.total(np.array([1.5, 2.25], dtype="float64"))
        b = racekern.total(np.array([1.5, 2.25], dtype="float32"))
        print(a.dtype, a.tolist(), b.dtype, b.tolist(), len(racekern.total.stats.cache_misses))
    """)
    out = subprocess.run(
        [sys.executable, "-c", check], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["float64", "[3.0,", "4.5]", "float32", "[3.0,", "4.5]", "0"]
