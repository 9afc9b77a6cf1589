"""Arrow IPC files and streams (``.arrow``, ``.feather``, ``.ipc``) and Hugging Face
``datasets`` folders (optional extra ``parquet``: pyarrow), read as tables, as Parquet is.

The file is memory-mapped and read record batch by record batch, in place. Each column is a
member of a ``TableColumns`` group: numeric and boolean columns as 1-D arrays (nulls count
as NaN, as they read in pandas); columns of lists of numbers (fixed-size lists, and lists
whose every row holds as many values: embeddings) as 2-D arrays, rows x values (a null row
reads as a row of NaN). Ragged lists, nested lists, structs and text are listed in
``skipped`` with the reason. Every location also carries its labels:
``{"row": row, "column": name}``.

A ``datasets`` folder (``dataset_info.json`` or ``state.json`` at its top, its data in
``.arrow`` files in the streaming format ``datasets`` writes) is one table per split: the
files of one split (``name-train-00000-of-00002.arrow``, ``data-00000-of-00003.arrow``)
concatenated in order, so a row is its index in the split, as ``datasets`` counts it.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

import numpy as np

from ..compute.blocks import Region, check_dtype
from ..errors import SourceError, UnsupportedDtypeError
from .base import regular_file
from .tables import FileColumn, TableColumns

DATASETS_MARKERS = ("dataset_info.json", "state.json")
_SHARD = re.compile(r"-\d{5}-of-\d{5}$")
_OF = re.compile(r"-(\d{5})-of-(\d{5})\.arrow$")


def _pa():
    try:
        import pyarrow as pa
    except ImportError:
        raise SourceError(
            "reading Arrow files needs pyarrow: pip install 'fastfinite[parquet]'"
        ) from None
    return pa


def _batches(path: str) -> list:
    """The record batches of an Arrow IPC file or stream, over a memory map (no copy)."""
    pa = _pa()
    source = pa.memory_map(path, "r")
    head = source.read(6)
    source.seek(0)
    if head[:4] == b"FEA1":
        raise SourceError(
            f"{path} is a Feather version 1 file: rewrite it with pyarrow.feather.write_feather "
            "(version 2, an Arrow IPC file)"
        )
    try:
        if head == b"ARROW1":
            reader = pa.ipc.open_file(source)
            return [reader.get_batch(i) for i in range(reader.num_record_batches)]
        return list(pa.ipc.open_stream(source))
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as e:
        raise SourceError(f"{path} is not a valid Arrow IPC file or stream: {e}") from None


class ArrowColumnSource(FileColumn):
    """One column of an Arrow table (one file, or the files of a split), read record batch
    by record batch; lists of numbers as rows x values."""

    unit_kind = "record batch"

    def __init__(self, files, column: int, batches, dtype, width, name: str, shown: str):
        self.files = files
        self.column = column  # its index in the schema
        self.batches = batches  # (file index, batch index, first row, rows)
        rows = sum(b[3] for b in batches)
        self.shape = (rows,) if width is None else (rows, width)
        self.dtype = check_dtype(np.dtype(dtype), name)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        self.name = name
        self.shown = shown
        self._local = threading.local()

    def identity(self) -> dict | None:
        return {"kind": "arrow", "files": list(self.files), "column": self.shown,
                "dtype": self.dtype.str, "shape": list(self.shape[1:])}  # fmt: skip

    def fingerprints(self):
        from .fingerprints import whole_file

        return whole_file(self.files[0]) if len(self.files) == 1 else None

    def labels(self, position: tuple[int, ...]) -> dict[str, Any]:
        return {"row": int(position[0]), "column": self.shown}

    def labels_token(self):
        return "arrow-rows", self.shown

    def regions(self, budget_bytes: int):
        """Runs of whole record batches of about ``budget_bytes``."""
        row_bytes = max(1, self.nbytes // max(1, self.shape[0]))
        start = None
        size = 0
        for _, _, first, rows in self.batches:
            if not rows:
                continue
            if start is None:
                start = first
            size += rows * row_bytes
            if size >= budget_bytes:
                yield self._box(start, first + rows)
                start, size = None, 0
        if start is not None:
            yield self._box(start, self.shape[0])

    def _box(self, start: int, stop: int) -> Region:
        rows = slice(start, stop)
        return (rows,) if len(self.shape) == 1 else (rows, slice(0, self.shape[1]))

    def read(self, region: Region) -> np.ndarray:
        rows = region[0]
        parts = []
        for fi, bi, first, n in self.batches:
            lo, hi = max(rows.start, first), min(rows.stop, first + n)
            if lo < hi:
                values = self._values(fi, bi)
                parts.append(values[lo - first : hi - first])
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if out.shape[0] != rows.stop - rows.start:
            raise ValueError(f"record batches hold {out.shape[0]} rows, the plan {self.shape}")
        return out[(slice(None), *region[1:])]  # a replay's region: some of a list's values

    def _open(self, path: str) -> list:
        return _batches(path)

    def _values(self, fi: int, bi: int) -> np.ndarray:
        col = self._file(fi)[bi].column(self.column)
        return column_values(col, self.dtype, None if len(self.shape) == 1 else self.shape[1])


def plain(col):
    """A column's values in their plain Arrow type: an extension type's storage (a
    fixed-shape tensor's fixed-size lists), a dictionary's values decoded."""
    pa = _pa()
    if isinstance(col.type, pa.BaseExtensionType):
        col = col.storage
    return col.dictionary_decode() if pa.types.is_dictionary(col.type) else col


def plain_type(typ):
    """``plain``'s type of a column of type ``typ``."""
    pa = _pa()
    if isinstance(typ, pa.BaseExtensionType):
        typ = typ.storage_type
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def column_values(col, dtype: np.dtype, width: int | None) -> np.ndarray:
    """One batch's values of a column: 1-D, or rows x ``width`` for lists (nulls as NaN)."""
    pa = _pa()
    import pyarrow.compute as pc

    col = plain(col)
    if width is None:
        if col.null_count and not pa.types.is_floating(col.type):
            col = col.cast(pa.float64(), safe=False)  # rounded past 2**53, as pandas reads it
        values = col.to_numpy(zero_copy_only=False)
        return values if values.dtype == dtype else values.astype(dtype)
    flat = pc.list_flatten(col)  # the values of the rows that are not null
    if flat.null_count and not pa.types.is_floating(flat.type):
        flat = flat.cast(pa.float64(), safe=False)
    values = flat.to_numpy(zero_copy_only=False)
    values = values if values.dtype == dtype else values.astype(dtype)
    if not col.null_count:
        return values.reshape(len(col), width)
    out = np.full((len(col), width), np.nan, dtype)
    out[~col.is_null().to_numpy(zero_copy_only=False)] = values.reshape(-1, width)
    return out


def _column_kind(typ) -> tuple[Any, bool] | str:
    """``(value type, is a list)`` of a column that can be scanned, else why not."""
    pa = _pa()
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        inner = typ.value_type
        if not (_numeric(inner)):
            return f"not numeric: lists of {inner}"
        return inner, True
    if _numeric(typ):
        return typ, False
    return f"not numeric: Arrow type {typ}"


def _numeric(typ) -> bool:
    pa = _pa()
    return pa.types.is_floating(typ) or pa.types.is_integer(typ) or pa.types.is_boolean(typ)


def _dtype(typ, nulls: bool) -> np.dtype:
    pa = _pa()
    if pa.types.is_floating(typ):
        return np.dtype(typ.to_pandas_dtype())
    return np.dtype(np.float64) if nulls else np.dtype(typ.to_pandas_dtype())


def open_arrow(path: str | list[str], name: str | None = None) -> TableColumns:
    """``(column, factory)`` for every column of an Arrow IPC file or stream (or of the
    files of one table, concatenated in order); columns that cannot be scanned raise
    ``UnsupportedDtypeError`` saying why (``skipped``)."""
    files = [path] if isinstance(path, str) else list(path)
    name = name or files[0]
    files = [os.path.abspath(regular_file(f, f)) for f in files]
    opened = [_batches(f) for f in files]
    schema = None
    batches = []  # (file index, batch index, first row, rows)
    first = 0
    for fi, bs in enumerate(opened):
        for bi, b in enumerate(bs):
            if schema is None:
                schema = b.schema
            elif not b.schema.equals(schema):
                raise SourceError(
                    f"{files[fi]} has columns {b.schema.names}, unlike {files[0]}: {schema.names}"
                )
            batches.append((fi, bi, first, b.num_rows))
            first += b.num_rows
    if schema is None:  # no batch: the schema of an empty stream or file
        schema = _schema(files[0])
    out = []
    for index, field in enumerate(schema):

        def factory(index=index, field=field):
            return _column(files, opened, batches, index, field, name)

        out.append((field.name, factory))
    return TableColumns(out, "Arrow", first)


def _schema(path: str):
    pa = _pa()
    source = pa.memory_map(path, "r")
    try:
        return pa.ipc.open_file(source).schema
    except pa.ArrowInvalid:
        source.seek(0)
        return pa.ipc.open_stream(source).schema


def _column(files, opened, batches, index, field, name) -> ArrowColumnSource:
    import pyarrow.compute as pc

    kind = _column_kind(plain_type(field.type))
    if isinstance(kind, str):
        raise UnsupportedDtypeError(kind)
    typ, is_list = kind
    cols = [plain(opened[fi][bi].column(index)) for fi, bi, _, _ in batches]
    width = None
    nulls = any(c.null_count for c in cols)
    if is_list:
        nulls = any(pc.list_flatten(c).null_count for c in cols) or nulls
        if hasattr(field.type, "list_size"):
            width = field.type.list_size
        else:
            lengths = [pc.min_max(pc.list_value_length(c)) for c in cols if len(c) > c.null_count]
            lo = min((m["min"].as_py() for m in lengths), default=0)
            hi = max((m["max"].as_py() for m in lengths), default=0)
            if lo != hi:
                raise UnsupportedDtypeError(
                    f"lists of {lo} to {hi} values (ragged): not a 2-D array, not scanned"
                )
            width = hi
    dtype = _dtype(typ, nulls)
    shown = field.name
    return ArrowColumnSource(files, index, batches, dtype, width, f"{name}:{shown}", shown)


# -- Hugging Face ``datasets`` folders -----------------------------------------------


def is_datasets_folder(path: str, contents) -> bool:
    """A folder that ``datasets`` wrote: its markers at the top, and its data files all
    ``.arrow`` (beside its JSON metadata)."""
    if not any(os.path.isfile(os.path.join(path, m)) for m in DATASETS_MARKERS):
        return False
    items = contents.items()
    arrow = [rel for rel, kind in items if kind == "Arrow file"]
    others = [rel for rel, kind in items if kind != "Arrow file" and not rel.endswith(".json")]
    return bool(arrow) and not others and not contents.stopped


def split_name(rel: str) -> str:
    """The table a ``datasets`` file belongs to: its name without ``.arrow`` and its shard
    suffix (``name-train-00000-of-00002.arrow`` -> ``name-train``)."""
    return _SHARD.sub("", rel[: -len(".arrow")] if rel.endswith(".arrow") else rel)


def _whole_split(path: str, split: str, files: list[str]) -> None:
    """A split's files named ``-00000-of-00003`` are all there: with one missing, its rows
    could not be numbered as ``datasets`` numbers them (a ``SourceError`` naming it)."""
    counts = {m.group(2) for f in files if (m := _OF.search(f))}
    have = {int(m.group(1)) for f in files if (m := _OF.search(f))}
    if not counts:
        return
    if len(counts) > 1:
        raise SourceError(f"{path}: the files of its split {split} say different counts of "
                          f"files ({', '.join(sorted(counts))})")  # fmt: skip
    n = int(counts.pop())
    missing = [f"{i:05d}" for i in range(n) if i not in have]
    if missing:
        raise SourceError(f"{path}: its split {split} has {n} files, {len(missing)} missing "
                          f"(-{missing[0]}-of-{n:05d}.arrow...): its rows cannot be numbered "
                          "as datasets numbers them")  # fmt: skip


def open_datasets_folder(path: str, contents) -> list:
    """The tables of a ``datasets`` folder: one split alone is its table's columns;
    several are a group keyed ``"split/column"``."""
    tables: dict[str, list[str]] = {}
    for rel, kind in contents.items():
        if kind == "Arrow file":
            tables.setdefault(split_name(rel), []).append(os.path.join(path, *rel.split("/")))
    for split, files in tables.items():
        _whole_split(path, split, files)
    if len(tables) == 1:
        ((split, files),) = tables.items()
        return open_arrow(sorted(files), path)
    out = []
    for split, files in sorted(tables.items()):
        table = open_arrow(sorted(files), f"{path}/{split}")
        out += [(f"{split}/{col}", factory) for col, factory in table]
    return out
