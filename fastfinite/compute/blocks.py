"""From any ndarray region to the contiguous 1-D float block a kernel can scan, and back.

A region is a tuple of slices of the global array. Its data (a view or a freshly read array)
is laid out in memory order: axes sorted by stride, negative strides flipped. When that view
is contiguous it is scanned in place; otherwise it is copied, one bounded block at a time.
Positions found in the block are mapped back to C-order flat indices of the global array.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from ..errors import UnsupportedDtypeError
from ..model.casts import NARROW

Region = tuple[slice, ...]


def narrow_format(dtype: np.dtype) -> str | None:
    """The format name of bfloat16 or float8 data (ml_dtypes' dtypes), else None."""
    dtype = np.dtype(dtype)
    return dtype.name if dtype.name in NARROW and dtype.fields is None else None


_TABLES: dict[str, np.ndarray] = {}


def widen_table(dtype: np.dtype) -> np.ndarray:
    """What ``kernels._widen`` widens data of a narrow ``dtype`` with: float8's 256 values as
    float32 (the dtype's own conversion), or nothing for bfloat16 (a shift suffices)."""
    name = narrow_format(dtype)
    if name not in _TABLES:
        if np.dtype(dtype).itemsize == 1:
            with np.errstate(invalid="ignore"):  # its NaN patterns
                table = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
        else:
            table = np.empty(0, np.float32)
        _TABLES[name] = table
    return _TABLES[name]


def read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (``a`` itself untouched): the kernels see every input as
    read-only, so Numba compiles each of them once per dtype, not again for writable
    arrays."""
    v = a.view()
    v.flags.writeable = False
    return v


def widen(bits: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Narrow data's native bits (uint16 bfloat16, uint8 float8) as float32 values."""
    if bits.dtype.itemsize == 2:
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return table[bits]


def check_dtype(dtype: np.dtype, name: str = "") -> np.dtype:
    """Return ``dtype`` if the kernels can scan it, else raise ``UnsupportedDtypeError``
    (naming the array ``name``)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "biu" or narrow_format(dtype):
        return dtype
    if dtype.kind in "fc" and dtype.itemsize // (2 if dtype.kind == "c" else 1) in (2, 4, 8):
        return dtype
    hint = ""
    if dtype.kind == "V" and dtype.names is None and dtype.itemsize in (1, 2):
        hint = (
            " (np.save keeps only the raw bytes of bfloat16 and float8 data: name the format "
            "with raw_dtype=, --raw-dtype on the command line)"
        )
    raise UnsupportedDtypeError(
        f"cannot scan {name + ': ' if name else ''}data of dtype {dtype!s} "
        f"({_dtype_label(dtype)}); fastfinite scans float16/32/64, bfloat16, float8 "
        f"(ml_dtypes), complex64/128, integer and bool arrays{hint}"
    )


def object_numbers(arr: np.ndarray) -> np.ndarray | None:
    """An array of Python objects as float64 when they are numbers (None read as NaN, as
    pandas reads it); None when they are text (or None); else ``UnsupportedDtypeError``."""
    flat = list(arr.flat)
    if all(v is None or isinstance(v, (str, bytes)) for v in flat):
        return None
    try:
        return np.array([np.nan if v is None else v for v in flat], np.float64).reshape(arr.shape)
    except (TypeError, ValueError) as e:
        raise UnsupportedDtypeError(f"cannot check its Python objects: {e}") from None


def _dtype_label(dtype: np.dtype) -> str:
    if dtype.fields is not None:
        return "structured"
    return {
        "O": "object",
        "U": "string",
        "S": "bytes",
        "V": "void",
        "M": "datetime",
        "m": "timedelta",
        "T": "string",
    }.get(dtype.kind, "extended precision" if dtype.kind in "fc" else dtype.kind)


def component_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of the values kernels see: float32 for float16, bfloat16 and float8, parts
    of complex, float64 for integers and bool."""
    dtype = np.dtype(dtype)
    if narrow_format(dtype):
        return np.dtype(np.float32)
    if dtype.kind == "c":
        return np.dtype(f"f{dtype.itemsize // 2}")
    if dtype.kind == "f":
        return np.dtype(dtype.newbyteorder("="))
    return np.dtype(np.float64)


def memory_order(strides: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """Axes from outermost to innermost in memory (largest |stride| first, stable)."""
    keyed = [(-(abs(s) if n > 1 else 0), ax) for ax, (s, n) in enumerate(zip(strides, shape))]
    # length-1 axes carry no layout information: keep them outermost, in order
    return tuple(ax for _, ax in sorted(keyed, key=lambda t: (t[0] != 0, t[0], t[1])))


def plan_regions(shape: tuple[int, ...], order: tuple[int, ...], budget: int) -> Iterator[Region]:
    """Cut ``shape`` into regions of at most ``budget`` elements, contiguous along ``order``.

    Axes inner to the split axis are taken whole, the split axis in runs, the outer axes one
    index at a time; regions come out in memory order.
    """
    ndim = len(shape)
    if ndim == 0:
        yield ()
        return
    if math.prod(shape) == 0:
        return
    budget = max(1, int(budget))
    inner = 1
    d = ndim  # position in ``order`` of the split axis
    while d > 0 and inner * shape[order[d - 1]] <= budget:
        d -= 1
        inner *= shape[order[d]]
    if d == 0:
        yield tuple(slice(0, n) for n in shape)
        return
    split = order[d - 1]
    run = max(1, budget // inner)
    outer = order[: d - 1]
    full = {ax: slice(0, shape[ax]) for ax in order[d:]}
    for idx in np.ndindex(*[shape[ax] for ax in outer]):
        sl = dict(full)
        for ax, i in zip(outer, idx):
            sl[ax] = slice(i, i + 1)
        for a in range(0, shape[split], run):
            sl[split] = slice(a, min(a + run, shape[split]))
            yield tuple(sl[ax] for ax in range(ndim))


def memory_view(data: np.ndarray) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """``data`` with negative strides flipped and axes in memory order (outermost first):
    ``(view, order, flipped axes)``. The view is C-contiguous when ``data`` is contiguous
    in any order."""
    order = memory_order(data.strides, data.shape)
    flips = tuple(ax for ax in range(data.ndim) if data.strides[ax] < 0 and data.shape[ax] > 1)
    view = np.flip(data, axis=flips) if flips else data
    return view.transpose(order), order, flips


MIN_SLICE_RUN_BYTES = 1 << 16  # read in one run, at least, when regions cut across slices


def memory_regions(
    data: np.ndarray, budget: int, across: tuple[int, ...] | None = None
) -> Iterator[Region]:
    """Regions of ``data`` of at most ``budget`` elements that follow its memory layout,
    negative strides included: consecutive regions of a contiguous array are adjacent in
    memory, so runs of them can be scanned as one block (``parts.PartedScan``).

    ``across``: the axes of per-slice statistics (``by``). When they are the innermost in
    memory, in their order, following the layout would give every region a part of every
    slice, and each region's statistics of all of them would be merged in turn; the
    regions then cut the first of them instead, each taking the other axes whole (so its
    slices are a run of the flat slice index), when its runs in memory stay at least
    ``MIN_SLICE_RUN_BYTES`` long; to make them so, a region may hold up to twice
    ``budget``."""
    view, order, flips = memory_view(data)
    axes = tuple(range(data.ndim))
    k = len(across or ())
    if k and data.ndim > k and order[-k:] == tuple(across):
        cut = data.ndim - k  # the first of ``across``, in the view's axes
        inner = math.prod(view.shape[cut + 1 :])
        per_index = max(1, math.prod(view.shape[:cut]) * inner)  # elements of one index of it
        need = -(-MIN_SLICE_RUN_BYTES // (inner * data.itemsize))  # indices of a long run
        run = max(budget // per_index, need)
        if run * per_index <= 2 * budget:
            axes = (cut, *axes[:cut], *axes[cut + 1 :])
            budget = max(budget, run * per_index)
    for part in plan_regions(view.shape, axes, budget):
        yield _flip_box(part, order, flips, data.shape)


def _flip_box(box: Region, perm, flips, shape, inverse: bool = False) -> Region:
    """A box of the memory view ``memory_view`` gives (axes ``perm``, ``flips`` reversed) as
    a box of the array of ``shape``; with ``inverse``, the other way round."""
    out: list = [None] * len(perm)
    for pos, ax in enumerate(perm):
        sl = box[ax] if inverse else box[pos]
        a, b = (shape[ax] - sl.stop, shape[ax] - sl.start) if ax in flips else (sl.start, sl.stop)
        out[pos if inverse else ax] = slice(a, b)
    return tuple(out)


def _pitched(view: np.ndarray, cols: int | None = None):
    """``(rows, cols, pitch, xf, xi)`` when the rows of ``view`` (its last axis, or its last
    axes of ``cols`` values together, of unit stride) start ``pitch`` values apart,
    ``pitch`` larger than ``cols``: the values read in place from ``xf``, 1-D from the
    first to the last value (``xi``: as integers); else None (a contiguous view is used in
    place anyway)."""
    if view.ndim < 2:
        return None
    item = view.itemsize
    cols = view.shape[-1] if cols is None else cols
    run, k = 1, view.ndim  # the last axes, folded into rows of ``cols`` values
    while k > 0 and run < cols:
        k -= 1
        if view.shape[k] > 1 and view.strides[k] != run * item:
            return None
        run *= view.shape[k]
    outer = [(n, s) for n, s in zip(view.shape[:k], view.strides[:k]) if n > 1]
    if not outer or cols < 2 or run != cols:
        return None
    for (_, s0), (n1, s1) in zip(outer, outer[1:]):
        if s0 != s1 * n1:  # the outer axes do not fold into one axis of rows
            return None
    step = outer[-1][1]
    if step <= cols * item or step % item:
        return None
    rows, pitch = view.size // cols, step // item
    xf = np.lib.stride_tricks.as_strided(view, ((rows - 1) * pitch + cols,), (item,))
    xf.flags.writeable = False
    return rows, cols, pitch, xf, xf.view(np.int32 if item == 4 else np.int64)


class Block:
    """A region's data as a contiguous 1-D array in the kernels' dtype.

    Attributes
    ----------
    x : ndarray
        1-D contiguous native float32/float64 values (complex parts interleaved); for
        bfloat16 and float8 data, widened when first asked for.
    bits : ndarray or None
        bfloat16 and float8 data: its native bits, 1-D contiguous uint16 or uint8, which
        ``kernels.scan_rows_narrow`` scans without widening the whole block (``table``: see
        ``widen_table``).
    ncomp : int
        Values per element (2 for complex, else 1).
    in_c_order : bool
        True when the order of ``x`` is the C order of the global array, so the first
        positions found are the first in C order.
    """

    __slots__ = (
        "_x", "bits", "table", "ncomp", "perm", "flips", "bshape", "dshape", "start",
        "in_c_order", "pitched", "_size",
    )  # fmt: skip

    def __init__(
        self,
        data: np.ndarray,
        start: tuple[int, ...],
        order: tuple[int, ...] | None = None,
        in_place: bool = False,
        cols: int | None = None,
    ):
        """``order``: the axes from outermost to innermost in ``x`` (default: memory order,
        negative strides flipped, so a contiguous region is used in place). ``in_place``:
        native float32/float64 values whose rows in that order are equally spaced runs
        (a box of an array that cuts its innermost axis) are not copied: ``pitched`` gives
        them to ``kernels.scan_cols_pitched``, and ``x`` is made only when asked for; a row
        is the last axis, or the last axes of ``cols`` values together."""
        data = np.asarray(data)
        self.start = start
        self.ncomp = 2 if data.dtype.kind == "c" else 1
        if order is None:
            view, order, flips = memory_view(data)
        else:
            view, flips = data.transpose(order), ()
        self.perm = order
        self.flips = flips
        self.bshape = view.shape
        self.dshape = data.shape
        # length-1 axes may be anywhere without changing the order of elements
        moved = [ax for ax in order if data.shape[ax] > 1]
        self.in_c_order = not flips and moved == sorted(moved)
        self._size = view.size
        self._x = self.bits = self.pitched = None
        if in_place and data.dtype in (np.dtype("=f4"), np.dtype("=f8")):
            self.pitched = _pitched(view, cols)
            if self.pitched is not None:
                return
        flat = view.reshape(-1)  # a view when the layout allows, else one bounded copy
        if narrow_format(data.dtype):
            bits = np.ascontiguousarray(flat).view(f"u{data.dtype.itemsize}")
            self.bits = read_only(bits if data.dtype.isnative else bits.byteswap())
            self.table = widen_table(data.dtype)
            return
        comp = component_dtype(data.dtype)
        if self.ncomp == 2:
            flat = np.ascontiguousarray(flat.astype(flat.dtype.newbyteorder("="), copy=False))
            flat = flat.view(comp)
        x = flat.astype(comp if comp.itemsize >= 4 else np.float32, copy=False)
        self._x = read_only(np.ascontiguousarray(x))

    @property
    def x(self) -> np.ndarray:
        if self._x is None and self.pitched is not None:  # rarely: a second look
            rows, cols, pitch, xf, _ = self.pitched
            self._x = read_only(
                np.lib.stride_tricks.as_strided(
                    xf, (rows, cols), (pitch * xf.itemsize, xf.itemsize)
                ).reshape(-1)
            )
        elif self._x is None:
            self._x = read_only(widen(self.bits, self.table))
        return self._x

    @property
    def xi(self) -> np.ndarray:
        return self.x.view(np.int32 if self.x.itemsize == 4 else np.int64)

    @property
    def size(self) -> int:
        """Values in the block (``x.size``, without widening or copying it)."""
        return self._size * self.ncomp

    def block_box(self, box: Region) -> Region:
        """A box of the global array (inside this block) as slices of the block's own shape
        (``bshape``: axes in memory order, flipped ones reversed)."""
        local = tuple(slice(b.start - s, b.stop - s) for b, s in zip(box, self.start))
        return _flip_box(local, self.perm, self.flips, self.dshape, inverse=True)

    def to_global(self, j: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Map positions in ``x`` to C-order flat indices of the global array ``shape``."""
        j = np.asarray(j, dtype=np.int64) // self.ncomp
        if len(shape) == 0:
            return np.zeros(len(j), dtype=np.int64)
        coords_v = np.unravel_index(j, self.bshape)
        coords = [None] * len(shape)
        for pos, ax in enumerate(self.perm):
            coords[ax] = coords_v[pos]
        for ax in self.flips:
            coords[ax] = self.dshape[ax] - 1 - coords[ax]
        glob = [c + s for c, s in zip(coords, self.start)]
        return np.ravel_multi_index(glob, shape).astype(np.int64)


def first_where(
    x: np.ndarray, bad: Callable[[np.ndarray], np.ndarray], limit: int, block: int = 1 << 16
) -> np.ndarray:
    """Flat positions of the first ``limit`` elements of 1-D ``x`` where the elementwise
    ``bad`` holds, evaluated ``block`` elements at a time (their temporaries stay in cache):
    an unwritten chunk read as NaN would otherwise cost an index array of every element, and
    a flagged piece its temporaries whole."""
    found: list[np.ndarray] = []
    total = 0
    for s in range(0, x.size if limit > 0 else 0, block):
        idx = np.flatnonzero(bad(x[s : s + block]))
        if len(idx):
            found.append(idx[: limit - total] + s)
            total += len(found[-1])
            if total >= limit:
                break
    return np.concatenate(found) if found else np.empty(0, np.int64)
