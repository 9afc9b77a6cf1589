"""Tables: pandas DataFrames and Series (optional extra ``pandas``) and Parquet files and
datasets (optional extra ``parquet``, read row group by row group with pyarrow).

A table scans as a group of columns: ``report.arrays`` maps each numeric column's name to
its report, non-numeric columns are listed in ``report.skipped``, and every location also
carries labels: ``{"row": row label, "column": name}``. Missing values (``pd.NA``, Parquet
nulls) count as NaN, as they read in pandas.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from ..blocks import Region, check_dtype
from ..errors import SourceError, UnsupportedDtypeError
from .base import Source
from .ndarray import ArraySource

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")


class TableColumns(list):
    """The ``(name, factory)`` members of a table: a group whose report is also laid out as a
    table (shape rows x columns, locations as (row, column))."""

    def __init__(self, members, kind: str, rows: int):
        super().__init__(members)
        self.kind = kind
        self.rows = rows


def _column_array(col) -> np.ndarray:
    """A pandas column as a numpy array the kernels scan; raises for non-numeric columns."""
    import pandas as pd

    dtype = col.dtype
    if isinstance(dtype, pd.CategoricalDtype) or not (
        pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
    ):
        raise UnsupportedDtypeError(f"not numeric: dtype {dtype}")
    if getattr(col, "hasnans", False) and col.dtype.kind not in "fc":
        return col.to_numpy(dtype=np.float64, na_value=np.nan)  # Int64 / boolean with NA
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):
        np_dtype = getattr(dtype, "numpy_dtype", np.float64)
        return col.to_numpy(dtype=np_dtype, na_value=np.nan if np_dtype.kind == "f" else None)
    return col.to_numpy()


class _RowLabels:
    """Labels of a position in one column: the row label and the column name."""

    def __init__(self, index, column):
        self.index = index
        self.column = column

    def __call__(self, position: tuple[int, ...]) -> dict[str, Any]:
        label = self.index[position[0]] if len(self.index) > position[0] else position[0]
        out = {"row": label.item() if hasattr(label, "item") else label}
        if self.column is not None:
            out["column"] = self.column
        return out


def series_source(s, name: str | None = None) -> ArraySource:
    col = name if name is not None else (s.name if s.name is not None else "series")
    src = ArraySource(_column_array(s), name=str(col))
    src.labels = _RowLabels(s.index, col if name is not None else s.name)
    return src


def dataframe_columns(df) -> TableColumns:
    """``(column name, factory)`` per column, names made unique."""
    seen: set[str] = set()
    out = []
    for pos, name in enumerate(df.columns):
        key = str(name) if str(name) not in seen else f"{name} ({pos})"
        seen.add(key)
        out.append((key, lambda pos=pos, name=name: series_source(df.iloc[:, pos], name)))
    return TableColumns(out, "DataFrame", df.shape[0])


def table_locations(report, columns: list[str], cap: int) -> list:
    """Top-level locations of a table: (row position, column position), with labels."""
    from ..report import Location

    pos = {c: i for i, c in enumerate(columns)}
    by_kind: dict[str, list] = {}
    for col, sub in report.arrays.items():
        for loc in sub.locations:
            by_kind.setdefault(loc.kind, []).append(
                Location(
                    loc.kind,
                    (loc.index[0], pos[col]),
                    loc.value,
                    dict(loc.labels or {}, column=col),
                )
            )
    out = []
    for locs in by_kind.values():
        out += sorted(locs, key=lambda x: x.index)[:cap]
    return sorted(out, key=lambda x: x.index)


# -- Parquet ----------------------------------------------------------------------------


def _pyarrow():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise SourceError(
            "reading Parquet needs pyarrow: pip install 'fastfinite[parquet]'"
        ) from None
    return pq


def parquet_files(path: str) -> list[str]:
    if os.path.isdir(path):
        files = sorted(
            os.path.join(d, f)
            for d, _, fs in os.walk(path)
            for f in fs
            if f.lower().endswith(PARQUET_SUFFIXES) and not f.startswith((".", "_"))
        )
        if not files:
            raise SourceError(f"no Parquet files in {path}")
        return files
    if not os.path.exists(path):
        raise SourceError(f"no such file: {path}")
    return [path]


class ParquetColumnSource(Source):
    """One column of a Parquet file or dataset, read one row group at a time."""

    unit_kind = "row group"

    def __init__(
        self, files: list[str], column: str, groups, nrows: int, dtype: np.dtype, name: str
    ):
        self.files = files
        self.column = column
        self.groups = groups  # (file index, row group, first row, rows)
        self.shape = (nrows,)
        self.dtype = check_dtype(dtype)
        self.nbytes = nrows * self.dtype.itemsize
        self.name = name
        self._local = threading.local()

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["_local"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()

    def labels(self, position: tuple[int, ...]) -> dict[str, Any]:
        return {"row": int(position[0]), "column": self.column}

    def regions(self, budget_bytes: int):
        for _, _, first, rows in self.groups:
            if rows:
                yield (slice(first, first + rows),)

    def units(self, region: Region):
        """The row group of a region (a region is one row group)."""
        i = next(i for i, g in enumerate(self.groups) if g[2] == region[0].start)
        yield self.unit_kind, (i,), region

    def read(self, region: Region) -> np.ndarray:
        pq = _pyarrow()
        start = region[0].start
        unit = next(u for u in self.groups if u[2] == start)
        files = getattr(self._local, "files", None)
        if files is None:
            files = self._local.files = {}
        f = files.get(unit[0])
        if f is None:
            f = files[unit[0]] = pq.ParquetFile(self.files[unit[0]])
        # our threads already read in parallel: no pyarrow pool on top of them
        col = f.read_row_group(unit[1], columns=[self.column], use_threads=False).column(0)
        arr = col.to_numpy(zero_copy_only=False)
        if arr.dtype != self.dtype:
            arr = arr.astype(self.dtype)
        stop = region[0].stop - start
        return arr[:stop] if arr.shape[0] != stop else arr


def _numpy_dtype(arrow_type, has_nulls: bool) -> np.dtype:
    import pyarrow as pa

    if pa.types.is_floating(arrow_type):
        return np.dtype(arrow_type.to_pandas_dtype())
    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        return np.dtype(np.float64) if has_nulls else np.dtype(arrow_type.to_pandas_dtype())
    raise UnsupportedDtypeError(f"not numeric: Parquet type {arrow_type}")


def open_parquet(path: str) -> TableColumns:
    """``(column, factory)`` for every column of a Parquet file or dataset directory."""
    pq = _pyarrow()
    files = parquet_files(path)
    try:
        metas = [pq.ParquetFile(f) for f in files]
    except Exception as e:
        raise SourceError(f"cannot read {path} as Parquet: {e}") from None
    schema = metas[0].schema_arrow
    units = []
    row = 0
    for fi, pf in enumerate(metas):
        if pf.schema_arrow.names != schema.names:
            raise SourceError(
                f"{files[fi]} has columns {pf.schema_arrow.names}, unlike "
                f"{files[0]}: {schema.names}"
            )
        for rg in range(pf.num_row_groups):
            n = pf.metadata.row_group(rg).num_rows
            units.append((fi, rg, row, n))
            row += n
    out = []
    for ci, field in enumerate(schema):

        def factory(ci=ci, field=field):
            nulls = 0
            for pf in metas:
                for rg in range(pf.num_row_groups):
                    st = pf.metadata.row_group(rg).column(ci).statistics
                    nulls += st.null_count if st is not None and st.has_null_count else 1
            dtype = _numpy_dtype(field.type, nulls > 0)
            return ParquetColumnSource(files, field.name, units, row, dtype, f"{path}:{field.name}")

        out.append((field.name, factory))
    return TableColumns(out, "Parquet", row)
