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
from abc import abstractmethod
from typing import Any

import numpy as np

from ..compute.blocks import Region, check_dtype, object_numbers
from ..errors import SourceError, UnsupportedDtypeError
from .base import Source, regular_file
from .ndarray import ArraySource


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

    if isinstance(col.dtype, pd.SparseDtype):  # the values it stores and its fill value
        col = col.sparse.to_dense()
    dtype = col.dtype
    if getattr(dtype, "kind", "") == "O":  # Python objects: numbers (None read as NaN), or text
        try:
            nums = object_numbers(col.to_numpy())
        except OverflowError:
            raise _too_large(col) from None
        if nums is None:
            raise UnsupportedDtypeError(f"not numeric: dtype {dtype} holding text")
        return nums
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


def _too_large(col) -> SourceError:
    """The error of an object column holding a number no float holds (the int ``10**400``):
    it is neither NaN nor inf, and any cast to float fails or makes it inf, so it is named
    (column and row), not scanned as something it is not."""
    for pos, v in enumerate(col.to_numpy()):
        try:
            float(v)
        except OverflowError:
            what = f"a {type(v).__name__}"
            if isinstance(v, int):
                what = f"an int of about {'-' if v < 0 else ''}10**{int(v.bit_length() * 0.30103)}"
            return SourceError(
                f"column {col.name!r}, row {col.index[pos]!r} holds {what}, beyond float64 "
                "(no float format holds it; float() raises)"
            )
        except (TypeError, ValueError):
            continue
    return SourceError(f"column {col.name!r} holds a number beyond float64")


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

    def __dask_tokenize__(self):
        from dask.base import normalize_token

        return "fastfinite-row-labels", normalize_token(self.index), self.column


def series_source(s, name: str | None = None) -> ArraySource:
    col = name if name is not None else (s.name if s.name is not None else "series")
    values = _column_array(s)
    labels = _RowLabels(s.index, col if name is not None else s.name)
    src = ArraySource(values, name=str(col))
    src.labels = labels
    return src


def dataframe_columns(df) -> TableColumns:
    """``(column name, factory)`` per column, names made unique."""
    out = TableColumns([], "DataFrame", df.shape[0])
    seen: set[str] = set()
    for pos, name in enumerate(df.columns):
        key = str(name) if str(name) not in seen else f"{name} ({pos})"
        seen.add(key)
        out.append((key, lambda pos=pos, name=name: series_source(df.iloc[:, pos], name)))
    return out


class TableSource(Source):
    """A table's numeric columns as one 2-D array, rows x columns, as
    ``df.select_dtypes("number").to_numpy()`` lays them out (its dtype the columns' common
    type): what ``by`` scans, ``by=0`` per row and ``by=-1`` per column. Columns whose
    values are not one per row (values in Parquet lists) cannot be in it."""

    def __init__(self, columns: list[tuple[str, Source]], name: str):
        self.columns = columns
        self.names = [n for n, _ in columns]
        self.axis_names = {1: self.names}
        rows = columns[0][1].shape[0]
        self.shape = (rows, len(columns))
        self.dtype = check_dtype(np.result_type(*[s.dtype for _, s in columns]), name)
        self.nbytes = rows * len(columns) * self.dtype.itemsize
        self.name = name
        first = columns[0][1]
        self.in_memory, self.unit_kind = first.in_memory, first.unit_kind
        self.reads_in_tasks = all(s.reads_in_tasks for _, s in columns)
        self.region_bytes = max(first.region_bytes * len(columns), 1)

    def regions(self, budget_bytes: int):
        """Row ranges (row groups for Parquet) across every column."""
        per_column = max(1, budget_bytes // len(self.columns))
        for (rows,) in self.columns[0][1].regions(per_column):
            yield rows, slice(0, len(self.columns))

    def read(self, region: Region) -> np.ndarray:
        rows, cols = region
        out = np.empty((rows.stop - rows.start, cols.stop - cols.start), self.dtype, order="F")
        for j in range(cols.start, cols.stop):
            out[:, j - cols.start] = self.columns[j][1].read((rows,))
        return out

    def units(self, region: Region):
        """A region's row groups, across every column (Parquet)."""
        units = self.columns[0][1].units(region[:1])
        return None if units is None else ((k, c, (r[0], region[1])) for k, c, r in units)

    def labels(self, position: tuple[int, ...]) -> dict[str, Any]:
        first = self.columns[0][1]
        row = first.labels(position[:1])["row"] if first.labels else position[0]
        return {"row": row, "column": self.names[position[1]]}

    def labels_token(self):
        return self.columns[0][1].labels_token(), self.names

    def verify(self) -> None:
        for _, source in self.columns:
            source.verify()

    @property
    def location(self) -> str:
        return ";".join(s.location for _, s in self.columns)


def table_source(columns: TableColumns, name: str) -> tuple[TableSource | None, dict]:
    """The numeric columns of a table as one ``TableSource``, and the columns left out with
    why (not numeric, or values not one per row)."""
    numeric, skipped = [], {}
    for path, factory in columns:
        try:
            source = factory()
        except UnsupportedDtypeError as e:
            skipped[path] = str(e)
            continue
        if len(source.shape) == 2:  # an Arrow column of lists of one length
            skipped[path] = (f"lists of {source.shape[1]} values: not one value per row, so "
                             "not in the table that by scans")  # fmt: skip
        elif source.shape != (columns.rows,):
            skipped[path] = (
                f"{source.shape[0]} values in lists over {columns.rows} rows: not one per row, so not in the table that by scans"
            )
        else:
            numeric.append((path, source))
    return (TableSource(numeric, name) if numeric else None), skipped


# -- Parquet ----------------------------------------------------------------------------


def _pyarrow():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise SourceError(
            "reading Parquet needs pyarrow: pip install 'fastfinite[parquet]'"
        ) from None
    return pq


def parquet_file(path: str):
    """``pyarrow.parquet.ParquetFile`` of ``path``, the checksums of its pages verified as
    they are read (a page a writer gave one, as Spark does, whose bytes changed is an
    error, never other values); pyarrow < 15 cannot."""
    pq = _pyarrow()
    try:
        return pq.ParquetFile(path, page_checksum_verification=True)
    except TypeError:  # pyarrow < 15: no such option
        return pq.ParquetFile(path)


def parquet_files(path: str) -> list[str]:
    """The files of a Parquet file or dataset directory (``walk.parquet_dataset``'s rule: a
    directory holding anything but Parquet is an error saying what it holds)."""
    if os.path.isdir(path):
        from .walk import parquet_dataset

        return parquet_dataset(path)
    if not os.path.exists(path):
        raise SourceError(f"no such file: {path}")
    return [path]


class FileColumn(Source):
    """A column read from ``files``: each file opened once per thread (``_open``, by the
    subclass), never pickled (a Dask task opens its own)."""

    files: list[str]
    _local: threading.local

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_local", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()

    def verify(self) -> None:
        """Every file of the column is still there."""
        for f in self.files:
            regular_file(f, f)

    @abstractmethod
    def _open(self, path: str) -> Any:
        """File ``path`` opened for reading (a ``ParquetFile``, an Arrow file's batches)."""

    def _file(self, index: int) -> Any:
        """File ``index`` of ``files``, opened by this thread."""
        files = getattr(self._local, "files", None)
        if files is None:
            files = self._local.files = {}
        if index not in files:
            files[index] = self._open(self.files[index])
        return files[index]


class ParquetColumnSource(FileColumn):
    """One numeric column of a Parquet file or dataset, or one numeric field nested in it
    (in structs: ``"s.a"``; in lists: their values, flattened in row order), read one row
    group at a time. Nulls count as NaN, as they read in pandas; a null list as one NaN
    (a fixed-size list's as a NaN for each value it holds), as the Arrow reader reads a
    null row of a list column."""

    unit_kind = "row group"

    def __init__(self, files, column: str, steps, groups, dtype: np.dtype, name: str, shown):
        self.files = files
        self.column = column  # the top-level column
        self.steps = steps  # ("field", name) into a struct, ("list",) into a list's values
        self.groups = groups  # (file index, row group, first value, values, first row)
        self.shape = (sum(g[3] for g in groups),)
        self.dtype = check_dtype(dtype, name)
        self.nbytes = self.shape[0] * self.dtype.itemsize
        self.name = name
        self.shown = shown  # the column's name in labels
        self._local = threading.local()

    def labels(self, position: tuple[int, ...]) -> dict[str, Any]:
        """The row (a position in the file or dataset) and column of a value, and for values
        in lists the value's position in its row (``item``)."""
        if not any(step == ("list",) for step in self.steps):
            return {"row": int(position[0]), "column": self.shown}
        g = next(g for g in self.groups if g[2] <= position[0] < g[2] + g[3])
        parents = self._values(g, parents=True)
        row = int(parents[position[0] - g[2]])
        item = position[0] - g[2] - int(np.searchsorted(parents, row))
        return {"row": g[4] + row, "column": self.shown, "item": int(item)}

    def regions(self, budget_bytes: int):
        for _, _, first, values, _ in self.groups:
            if values:
                yield (slice(first, first + values),)

    def _overlapping(self, region: Region):
        """``(i, group)`` of the row groups holding values of ``region`` (a scan's region is
        one row group; a replay's, any range of values)."""
        lo, hi = region[0].start, region[0].stop
        return [(i, g) for i, g in enumerate(self.groups) if g[2] < hi and lo < g[2] + g[3]]

    def units(self, region: Region):
        """The row groups of a region, each with the part of the region it holds."""
        lo, hi = region[0].start, region[0].stop
        for i, g in self._overlapping(region):
            yield self.unit_kind, (i,), (slice(max(lo, g[2]), min(hi, g[2] + g[3])),)

    def read(self, region: Region) -> np.ndarray:
        lo, hi = region[0].start, region[0].stop
        parts = []
        for _, g in self._overlapping(region):
            values = self._values(g)
            if len(values) != g[3]:
                raise ValueError(f"row group holds {len(values)} values, the plan {g[3]}")
            parts.append(values[max(lo - g[2], 0) : hi - g[2]])
        if not parts:
            return np.empty(0, self.dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _open(self, path: str):
        return parquet_file(path)

    def _values(self, group, parents: bool = False) -> np.ndarray:
        """The values of one row group (or, with ``parents``, the row of each value)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        # our threads already read in parallel: no pyarrow pool on top of them
        table = self._file(group[0]).read_row_group(
            group[1], columns=[self.column], use_threads=False
        )
        arr = table.column(0).combine_chunks()
        rows = np.arange(len(arr))
        for step in self.steps:
            if isinstance(arr.type, pa.BaseExtensionType):
                arr = arr.storage
            if step == ("list",):
                if arr.null_count:  # a null list, missing values: a NaN (a fixed size's each)
                    missing = [None] * getattr(arr.type, "list_size", 1)
                    arr = pc.fill_null(arr, pa.scalar(missing, arr.type))
                rows = rows[pc.list_parent_indices(arr).to_numpy()]
                arr = pc.list_flatten(arr)
            else:
                arr = pc.struct_field(arr, [step[1]])
        if parents:
            return rows
        if isinstance(arr.type, pa.BaseExtensionType):
            arr = arr.storage
        values = arr.to_numpy(zero_copy_only=False)
        return values if values.dtype == self.dtype else values.astype(self.dtype)


def _numpy_dtype(arrow_type, has_nulls: bool) -> np.dtype:
    import pyarrow as pa

    if pa.types.is_floating(arrow_type):
        return np.dtype(arrow_type.to_pandas_dtype())
    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        return np.dtype(np.float64) if has_nulls else np.dtype(arrow_type.to_pandas_dtype())
    raise UnsupportedDtypeError(f"not numeric: Parquet type {arrow_type}")


def _leaves(name: str, typ, steps=()):
    """``(name, steps, type)`` of the fields below a column: struct fields by name, list
    values flattened (list, large list, fixed-size list, nested)."""
    import pyarrow as pa

    if isinstance(typ, pa.BaseExtensionType):  # a fixed-shape tensor: its fixed-size lists
        typ = typ.storage_type
    if pa.types.is_struct(typ):
        for f in typ:
            yield from _leaves(f"{name}.{f.name}", f.type, (*steps, ("field", f.name)))
    elif pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        yield from _leaves(name, typ.value_type, (*steps, ("list",)))
    else:
        yield name, steps, typ


def open_parquet(path: str) -> TableColumns:
    """``(column, factory)`` for every numeric column (and numeric field nested in a column)
    of a Parquet file or dataset directory."""
    return parquet_columns(path, parquet_files(path))


def parquet_columns(path: str, files: list[str]) -> TableColumns:
    """``open_parquet`` of the Parquet file or dataset ``path`` whose files are known
    (``parquet_files``, or ``DirContents.parquet_paths`` where its directory has been walked
    already)."""
    files = [os.path.abspath(f) for f in files]
    try:
        metas = [parquet_file(f) for f in files]
    except Exception as e:
        raise SourceError(f"cannot read {path} as Parquet: {e}") from None
    schema = metas[0].schema_arrow
    rows = []
    for fi, pf in enumerate(metas):
        if pf.schema_arrow.names != schema.names:
            raise SourceError(
                f"{files[fi]} has columns {pf.schema_arrow.names}, unlike "
                f"{files[0]}: {schema.names}"
            )
        rows += [(fi, rg, pf.metadata.row_group(rg).num_rows) for rg in range(pf.num_row_groups)]
    out = []
    for field in schema:
        for shown, steps, typ in _leaves(field.name, field.type):

            def factory(column=field.name, shown=shown, steps=steps, typ=typ):
                return _column(path, files, metas, rows, column, shown, steps, typ)

            out.append((shown, factory))
    return TableColumns(out, "Parquet", sum(n for _, _, n in rows))


def _column(path, files, metas, rows, column, shown, steps, typ) -> ParquetColumnSource:
    """The source of one leaf: flat ones know their size and nulls from the metadata; one
    inside lists counts its values (and nulls) in a first read of each row group."""
    _numpy_dtype(typ, False)  # not numeric: raises before anything is read
    groups, first, row, nulls = [], 0, 0, 0
    probe = ParquetColumnSource(files, column, steps, [], np.float64, shown, shown)
    for fi, rg, n in rows:
        if ("list",) not in steps:
            meta = metas[fi].metadata.row_group(rg)
            leaf = [meta.column(i) for i in range(meta.num_columns)]
            st = next(c for c in leaf if c.path_in_schema == shown).statistics
            nulls += st.null_count if st is not None and st.has_null_count else 1
            values = n
        else:
            read = probe._values((fi, rg, 0, 0, 0))
            nulls += int(np.isnan(read).sum())
            values = len(read)
        groups.append((fi, rg, first, values, row))
        first, row = first + values, row + n
    dtype = _numpy_dtype(typ, nulls > 0)
    return ParquetColumnSource(files, column, steps, groups, dtype, f"{path}:{shown}", shown)
