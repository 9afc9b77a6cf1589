"""Guards for training pipelines, DataFrames and Parquet.

Part: ``fastfinite/guard.py`` and ``fastfinite/sources/tables.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fastfinite
from fastfinite import BadBatchWarning, NonFiniteError, guard

from .helpers import peak_growth, run_cli


def _batches(n=6, bad=4, kind="dict"):
    for i in range(n):
        x = np.zeros((8, 3), dtype=np.float32)
        if i == bad:
            x[3, 2] = np.inf
        y = np.arange(8)
        if kind == "dict":
            yield {"image": x, "label": y}
        elif kind == "tuple":
            yield (y.astype(np.float64), x, np.ones(8))
        else:
            yield x


def test_generator_of_dicts_raises_with_the_place():
    with pytest.raises(NonFiniteError) as e:
        for _ in guard(_batches()):
            pass
    assert str(e.value).startswith("batch 4, element 0 ('image'), posinf at (3, 2)")


def test_tuples_warn_and_skip():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = guard(_batches(kind="tuple", bad=2), on_bad="warn")
        seen = list(g)
    assert len(seen) == 6 and g.bad == 1 and g.warned == 1 and g.batches == 6
    assert any(
        issubclass(x.category, BadBatchWarning) and "batch 2, element 1," in str(x.message)
        for x in w
    )
    g = guard(_batches(kind="tuple", bad=2), on_bad="skip")
    seen = list(g)
    assert len(seen) == 5 and g.skipped == 1 and "1 bad" in g.summary()
    assert g.problems and "posinf at (3, 2)" in g.problems[0]


def test_cast_risk_and_tensors_and_clean_batches_pass():
    class Tensor:  # a CPU tensor: only __array__
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    batches = [(Tensor(np.ones((2, 2))), "a caption", 3), (Tensor(np.array([1e100])),)]
    g = guard(batches, on_bad="skip")
    assert len(list(g)) == 1
    assert "overflow:float32 at (0,)" in g.problems[0]
    assert len(list(guard(_batches(bad=-1)))) == 6


@pytest.mark.parametrize("prefetch", [1, 3])
def test_prefetch_gives_the_same_batches_counts_and_errors(prefetch):
    """Reading ahead in a thread changes nothing the caller sees: the batches, in order,
    the counts, the warning (pointing at the caller's loop) and the error at the bad batch."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = guard(_batches(kind="tuple", bad=2), on_bad="warn", prefetch=prefetch)
        seen = list(g)
    plain = list(_batches(kind="tuple", bad=2))
    assert len(seen) == len(plain) and all(np.array_equal(a[1], b[1]) for a, b in zip(seen, plain))
    assert (g.batches, g.bad, g.warned) == (6, 1, 1)
    [warning] = [x for x in w if issubclass(x.category, BadBatchWarning)]
    assert warning.filename == __file__ and "batch 2, element 1," in str(warning.message)
    skipped = guard(_batches(bad=3), on_bad="skip", prefetch=prefetch)
    assert len(list(skipped)) == 5 and skipped.skipped == 1
    got = []
    with pytest.raises(NonFiniteError, match=r"^batch 4, element 0 \('image'\), posinf"):
        for b in guard(_batches(), prefetch=prefetch):
            got.append(b)
    assert len(got) == 4  # batches 0-3 reached the loop, the bad one did not


def test_prefetch_raises_the_sources_own_error_in_place_and_stops_on_break():
    def source():
        yield np.zeros(3)
        yield np.ones(3)
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for b in guard(source(), prefetch=2):
            got.append(b)
    assert len(got) == 2
    produced = []

    def endless():
        i = 0
        while True:
            produced.append(i)
            yield np.full(4, float(i))
            i += 1

    for i, b in enumerate(guard(endless(), prefetch=2)):
        assert b[0] == i
        if i == 5:
            break
    assert len(produced) <= 6 + 2 + 1  # read ahead by at most prefetch (+ one in hand)
    with pytest.raises(fastfinite.InvalidArgumentError, match="prefetch"):
        guard([], prefetch=-1)


def test_indexable_dataset():
    class Dataset:  # the shape of a PyTorch Dataset or a Keras Sequence, no framework
        def __init__(self):
            self.data = np.ones((10, 4))
            self.data[7, 1] = np.nan

        def __len__(self):
            return len(self.data)

        def __getitem__(self, i):
            if i >= len(self):
                raise IndexError(i)
            return self.data[i], np.float32(i)

    g = guard(Dataset(), on_bad="skip")
    assert len(g) == 10
    assert g[3] is not None and g[7] is None and g.skipped == 1
    with pytest.raises(NonFiniteError, match=r"sample 7, element 0, nan at \(1,\)"):
        for _ in guard(Dataset()):
            pass


def test_fail_on_zero_variance_per_sample():
    x = np.random.default_rng(0).standard_normal((5, 4))
    x[2] = 1.0
    g = guard([x], fail_on={"zero_variance"}, on_bad="skip")
    assert list(g) == [] and "zero_variance at sample (2,)" in g.problems[0]
    assert len(list(guard([x]))) == 1  # by default only values count
    with pytest.raises(ValueError, match="on_bad"):
        guard([x], on_bad="ignore")


pd = pytest.importorskip("pandas")


def test_dataframe_mixed_columns_and_labels():
    df = pd.DataFrame(
        {
            "price": [1.0, 2.0, np.nan, 4.0],
            "name": ["a", "b", "c", "d"],
            "count": pd.array([1, None, 3, 4], dtype="Int64"),
            "big": [1e100, 1.0, 2.0, 3.0],  # fine in float64, inf in float32
            "flag": [True, False, True, True],
            "when": pd.date_range("2024-01-01", periods=4),
        },
        index=pd.Index(["w", "x", "y", "z"], name="id"),
    )
    r = fastfinite.scan(df)
    assert set(r.arrays) == {"price", "count", "big", "flag"}
    assert set(r.skipped) == {"name", "when"}
    assert r.nan == 2 and r.cast["float32"].overflow == 1
    assert r.arrays["big"].cast["float32"].overflow == 1
    assert r.shape == (4, 6) and r.dtype == "DataFrame"
    got = [(loc.kind, loc.index, loc.labels) for loc in r.locations]
    assert got == [
        ("overflow:float32", (0, 3), {"row": "w", "column": "big"}),
        ("nan", (1, 2), {"row": "x", "column": "count"}),
        ("nan", (2, 0), {"row": "y", "column": "price"}),
    ]
    s = fastfinite.scan(df["price"])
    assert s.locations[0].labels == {"row": "y", "column": "price"}
    assert s.locations[0].index == (2,)
    assert fastfinite.ScanReport.from_json(r.to_json()).locations[0].labels["row"] == "w"


pa = pytest.importorskip("pyarrow")


def test_parquet_file_and_dataset(tmp_path):
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {
            "x": rng.standard_normal(1000),
            "y": rng.standard_normal(1000).astype(np.float32),
            "s": ["t"] * 1000,
            "i": pd.array(np.arange(1000), dtype="Int64"),
        }
    )
    df.loc[123, "x"] = np.nan
    df.loc[999, "y"] = np.inf
    df.loc[500, "x"] = 1e100
    df.loc[7, "i"] = None
    pq.write_table(
        pa.Table.from_pandas(df, preserve_index=False), tmp_path / "a.parquet", row_group_size=128
    )
    assert pq.ParquetFile(tmp_path / "a.parquet").num_row_groups == 8
    r = fastfinite.scan(str(tmp_path / "a.parquet"), max_locations=5)
    assert set(r.arrays) == {"x", "y", "i"} and "s" in r.skipped
    assert r.nan == 2 and r.posinf == 1 and r.cast["float32"].overflow == 1
    assert [(loc.kind, loc.index) for loc in r.locations] == [
        ("nan", (7, 3)),
        ("nan", (123, 0)),
        ("overflow:float32", (500, 0)),
        ("posinf", (999, 1)),
    ]
    assert r.locations[0].labels == {"row": 7, "column": "i"}
    ds = tmp_path / "ds"
    ds.mkdir()
    pq.write_table(
        pa.Table.from_pandas(df.iloc[:600], preserve_index=False),
        ds / "p0.parquet",
        row_group_size=100,
    )
    pq.write_table(
        pa.Table.from_pandas(df.iloc[600:], preserve_index=False),
        ds / "p1.parquet",
        row_group_size=100,
    )
    r2 = fastfinite.scan(str(ds), max_locations=5)
    assert r2.counts() == r.counts() and r2.locations == r.locations
    out = run_cli("scan", tmp_path / "a.parquet", "--no-progress")
    assert out.returncode == 1 and "(999, 1)" in out.stdout


def test_parquet_memory_bounded(tmp_path):
    """Scanning a 160 MB Parquet file of 1 MB column chunks takes no more memory than
    scanning a 20 MB one: pyarrow's first read costs a fixed ~60 MB here, the data nothing."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2)
    schema = pa.schema([("a", pa.float64()), ("b", pa.float64())])
    grown = {}
    for groups in (10, 80):
        path = tmp_path / f"t{groups}.parquet"
        with pq.ParquetWriter(path, schema, compression="none") as w:
            for i in range(groups):
                a = rng.standard_normal(131072)
                if i == 5:
                    a[5] = np.nan
                w.write_table(
                    pa.table({"a": a, "b": rng.standard_normal(131072)}), row_group_size=131072
                )
        grown[groups], nan, count = peak_growth(str(path), setup="import pyarrow.parquet")
        assert nan == 1 and count == 2 * groups * 131072 - 1
    extra = grown[80] - grown[10]
    assert extra < 24 * 1024, f"8x the data took {extra / 1024:.0f} MB more"
    assert grown[80] < 100 * 1024
