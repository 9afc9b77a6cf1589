"""The one table of kinds (``fastfinite.model.kinds.KINDS``): every kind the kernels compute
(counted values, cast risks, slice flags) is planted in data and scanned by the Numba
kernels and by their NumPy twins alike, and both report it, with the table's severity and,
for a finding, the table's message; the slots and bits derived from the table are unique
and in range, and what is derived from it (the kernels' constants, ``known_kinds``, the
command line's help) follows it. A kind added to the table without its predicate in the
kernels and in the twins, or without a way to plant it here, fails.

Part: ``fastfinite/model/kinds.py`` (and the kernels and twins that compute its kinds).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest

import fastfinite
from fastfinite.compute import dispatch
from fastfinite.model import kinds
from fastfinite.model.casts import TARGETS
from fastfinite.model.kinds import CAST, KINDS, SLICE, VALUE, slice_kinds, slice_message
from fastfinite.options import known_kinds

from .helpers import twin_max

CASTS = ("float16", "bfloat16", "float8_e4m3fn")  # target slots 0, 1, 2


def _values(kind: str) -> tuple[np.ndarray, dict, str]:
    """Data holding ``kind`` (a row of the table) and nothing worse of its group, the
    scan's arguments, and the name the report gives it."""
    x = np.linspace(1.0, 2.0, 3 * 4096).astype(np.float32)
    if kind in ("nan", "posinf", "neginf"):
        x[5000] = {"nan": np.nan, "posinf": np.inf, "neginf": -np.inf}[kind]
        return x, {"cast": CASTS}, kind
    if kind in ("overflow:", "underflow:"):  # in the last target slot used
        t = CASTS[-1]
        f = TARGETS[t]
        x[7000] = -np.float32(f.max * 4) if kind == "overflow:" else np.float32(f.underflow_threshold / 4)  # fmt: skip
        return x, {"cast": CASTS}, f"{kind}{t}"
    raise KeyError(kind)


def _slices(rng) -> np.ndarray:
    """Eight rows of 200 float32 values, each of rows 1-6 holding one slice kind (row 3's
    one value apart is an outlier too, row 4 has no variance either), rows 0 and 7 none."""
    x = rng.standard_normal((8, 200)).astype(np.float32)
    x[1, 5] = np.nan
    x[2, :] = 4.0
    x[3, :] = np.float32(1e6)
    x[3, 7] = np.nextafter(np.float32(1e6), np.float32(2e6))
    x[4, :] = np.float32(3e36)
    x[5, :] = rng.standard_normal(200).astype(np.float32) * np.float32(1e20)
    x[6, 0] = 1e4
    return x


# the row of ``_slices`` that holds each slice kind (float32 data: its sums checked in float32)
SLICE_ROWS = {
    "nonfinite": 1, "zero_variance": 2, "near_zero_variance": 3, "sum_overflow:": 4,
    "variance_overflow:": 5, "outlier": 6,
}  # fmt: skip
COMPUTED = [n for n, k in KINDS.items() if k.group in (VALUE, CAST, SLICE)]


# the twins of the kernels that compute kinds (a scan of one slice finishes it on a twin
# with any policy: numba costs more than it saves there)
FINDERS = {"scan_rows", "scan_cols", "scan_narrow", "finish_whole_slices", "slice_flags"}


@contextmanager
def _twins_called():
    """Counts the calls of the twins of ``FINDERS``, on any thread (a scan runs its parts
    and members on the shared pool's threads)."""
    from fastfinite.reference import twins

    seen = [0]
    was = {name: getattr(twins, name) for name in FINDERS}

    def counted(fn):
        def call(*args, **kwargs):
            seen[0] += 1
            return fn(*args, **kwargs)

        return call

    for name, fn in was.items():
        setattr(twins, name, counted(fn))
    try:
        yield seen
    finally:
        for name, fn in was.items():
            setattr(twins, name, fn)


def _scan(x, kwargs: dict, policy: str):
    """The report of ``x`` by the kernels alone, or the twins alone (checked)."""
    with twin_max(0), dispatch.using(policy), _twins_called() as calls:
        r = fastfinite.scan(x, **kwargs)
    assert (calls[0] > 0) == (policy == "twins"), calls
    return r


def test_every_computed_kind_can_be_planted_here():
    """A row added to the table fails here until this file plants it (and so checks its
    kernels and twins compute it)."""
    planted = {"nan", "posinf", "neginf", "overflow:", "underflow:", *SLICE_ROWS}
    assert set(COMPUTED) == planted


@pytest.mark.parametrize("kind", [n for n in COMPUTED if KINDS[n].group != SLICE])
def test_a_counted_kind_is_computed_by_kernels_and_twins_alike(kind):
    x, kwargs, name = _values(kind)
    reports = [_scan(x, kwargs, p) for p in ("kernels", "twins")]
    assert reports[0].to_dict() == reports[1].to_dict()
    for r in reports:
        assert [loc.kind for loc in r.locations] == [name]
        assert r.severity_counts() == {KINDS[kind].severity: {name: 1}}
        assert name in r.kinds_found() and set(KINDS[kind].names) <= r.kinds_found()
        assert r.ok == (KINDS[kind].severity == kinds.WARNING)


def test_every_slice_kind_is_computed_by_kernels_and_twins_alike():
    x = _slices(np.random.default_rng(3))
    reports = [_scan(x, {"by": 0}, p) for p in ("kernels", "twins")]
    assert reports[0].to_dict() == reports[1].to_dict()
    for r in reports:
        got = {(f.kind, f.where[0]) for f in r.findings}
        want = {(k + "float32" if k.endswith(":") else k, row) for k, row in SLICE_ROWS.items()}
        assert want <= got and {j for _, j in got} == set(SLICE_ROWS.values())
        s = r.slices
        m2 = float(s.std[5]) ** 2 * int(s.count[5])
        quoted = {
            "count": s.count, "mean": s.mean, "std": s.std, "min": s.min, "max": s.max,
            "nan": s.nan, "posinf": s.posinf, "neginf": s.neginf, "max_z": s.max_z,
        }  # fmt: skip
        for f in r.findings:
            j = f.where[0]
            head = f.kind.partition(":")[0] + (":" if ":" in f.kind else "")
            assert f.severity == KINDS[head].severity
            say, fields = slice_message(f.kind)
            given = {
                "s": f"({j},)", "t": "float32", "t_max": TARGETS["float32"].max,
                "z_threshold": r.z_threshold, "m2": m2,
                "total": float(s.mean[j] * np.float64(s.count[j])),
            }  # fmt: skip
            values = [given[n] if n in given else quoted[n][j].item() for n in fields]
            assert f.message == say(*values)


def test_a_message_for_one_dtype_is_its_own():
    """``per_target``: the float16 sum's message says NumPy's float16 mean is safe."""
    x = np.full((2, 100), 2e4, np.float32)
    r = fastfinite.scan(x, by=0, cast=("float16",))
    said = {f.kind: f.message for f in r.findings}
    assert "x.mean() does not" in said["sum_overflow:float16"]
    assert "x.sum() and x.mean() in float32" not in said["sum_overflow:float16"]


def test_a_message_says_its_template_as_format_writes_it():
    """The message functions compiled from the table's templates write what ``str.format``
    writes, with fields given once or per slice."""
    template = KINDS["outlier"].message
    values = {"s": "(3,)", "max_z": 12.5, "z_threshold": 10.0, "min": -1.0, "max": 1e4, "mean": 0.1, "std": 3.0}  # fmt: skip
    want = template.format(**values)
    assert "(threshold 10;" in want
    say, fields = slice_message("outlier")
    assert say(*(values[n] for n in fields)) == want
    say, rest = slice_message("outlier", {"z_threshold": 10.0, "s": "(3,)"})
    assert "z_threshold" not in rest and "s" not in rest
    assert say(*(values[n] for n in rest)) == want


def test_counter_slots_are_unique_and_fill_the_counters():
    slots = [KINDS[n].place for n in kinds.BASE_KINDS]
    slots += [kinds.cast_slot(k, t) for t in range(kinds.N_TARGET_SLOTS) for k in kinds.CAST_KINDS]
    assert sorted(slots) == list(range(kinds.N_KINDS))
    assert (kinds.SLOT_NAN, kinds.SLOT_POSINF, kinds.SLOT_NEGINF) == (0, 1, 2)
    for t in range(kinds.N_TARGET_SLOTS):
        for k in kinds.CAST_KINDS:
            assert kinds.slot_target(kinds.cast_slot(k, t)) == (k, t)
    names = kinds.slot_names(("float16", "bfloat16"))
    assert len(names) == kinds.N_KINDS
    assert names[kinds.cast_slot("underflow:", 1)] == "underflow:bfloat16"
    assert names[kinds.cast_slot("overflow:", 2)] == ""


@pytest.mark.parametrize("nt", range(kinds.N_TARGET_SLOTS + 1))
def test_flag_bits_are_unique_and_fill_an_int64(nt):
    dtypes = [f"d{t}" for t in range(nt)]
    order = slice_kinds(dtypes)
    bits = {}
    for kind in kinds.SLICE_KINDS:
        base, step = kinds.slice_shift(kind)
        bits[kind] = base + step * nt
    for kind in kinds.PER_DTYPE_SLICE_KINDS:
        base, step = kinds.slice_shift(kind)
        bits.update({f"{kind}{d}": base + step * t for t, d in enumerate(dtypes)})
    assert sorted(bits.values()) == list(range(len(order))) and len(order) < 63
    assert order == sorted(bits, key=bits.get)


def test_the_kernels_constants_are_the_tables():
    from fastfinite.kernels import rows, slices

    assert (rows._NAN, rows._POSINF, rows._NEGINF) == (0, 1, 2)
    for t in range(kinds.N_TARGET_SLOTS):
        assert rows._OVERFLOW + rows._PER_TARGET * t == kinds.cast_slot("overflow:", t)
        assert rows._UNDERFLOW + rows._PER_TARGET * t == kinds.cast_slot("underflow:", t)
    for kind, const in (("nonfinite", "_NONFINITE"), ("zero_variance", "_ZERO"), ("near_zero_variance", "_NEAR"), ("sum_overflow:", "_SUM"), ("variance_overflow:", "_VAR"), ("outlier", "_OUTLIER")):  # fmt: skip
        assert (getattr(slices, const), getattr(slices, const + "_STEP")) == kinds.slice_shift(kind)


def test_every_row_is_well_formed():
    fields = {"s", "t", "t_max", "z_threshold", "total", "m2", "count", "mean", "std", "min", "max", "nan", "posinf", "neginf", "max_z"}  # fmt: skip
    for name, k in KINDS.items():
        assert k.severity in kinds.SEVERITIES and kinds.SEVERITY[name] == k.severity
        assert (k.place is not None) == (k.group in (VALUE, CAST, SLICE))
        assert (k.message is not None) == (k.group == SLICE), name
        if k.message is not None:
            for t in ("float16", "float32"):
                _, used = slice_message(name + t if name.endswith(":") else name)
                assert set(used) <= fields, name


def test_known_kinds_and_the_help_name_every_row():
    known = set(known_kinds())
    text = kinds.kinds_help()
    for name, k in KINDS.items():
        full = name + "float32" if name.endswith(":") else name
        assert full in known and full in text.split(", ")
        assert set(k.names) <= set(kinds.KIND_GROUPS)
    assert kinds.with_groups({"underflow:float16"}, ()) == {
        "underflow:float16",
        "cast",
        "underflow",
    }
    assert kinds.with_groups({"sum_overflow:float16"}, ()) == {"sum_overflow:float16"}
