"""numpy arrays, memmaps and ``.npy`` files."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator

import numpy as np

from ..compute.blocks import Region, check_dtype, memory_regions
from ..errors import SourceError, UnsupportedDtypeError
from .base import SMALL_BYTES, Source, regular_file

MAX_REGION_BYTES = 64 << 20


class ArraySource(Source):
    """An in-memory (or memory-mapped) numpy array, read in place region by region."""

    in_memory = True

    def __init__(self, array: np.ndarray, name: str = "", path: str | None = None, raw_dtype=None):
        array = unmasked(array, name or "the array")
        self._array = array
        self.name = name
        self.path = path  # a .npy file: pickles as its path and reopens where unpickled
        self.raw_dtype = raw_dtype  # the format of a .npy's raw bytes, when it is reopened
        self.reads_in_tasks = path is not None  # else a graph carries the blocks themselves
        self.shape = tuple(array.shape)
        self.dtype = check_dtype(array.dtype, name)
        self.nbytes = int(array.nbytes)
        # regions are views: one for a small array, else about an eighth of it (enough for
        # every core), 4 to 64 MiB (the Python around each region then costs nothing)
        self.region_bytes = (
            max(self.nbytes, 1)
            if self.nbytes < SMALL_BYTES
            else min(MAX_REGION_BYTES, max(4 << 20, self.nbytes // 8))
        )

    def __reduce__(self):  # a file is opened again where it is read (``verify``)
        return (_reopened, (self.__dict__ | ({"_array": None} if self.path else {}),))

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = open_npy(self.path, self.name, self.raw_dtype).array
        return self._array

    def unmap(self) -> None:
        """A ``.npy`` file's map is let go; ``array`` maps it again."""
        if self.path is not None:
            self._array = None

    def verify(self) -> None:
        """The file is still there, and holds what the scan was planned on."""
        if (self.array.shape, self.array.dtype) != (self.shape, self.dtype):
            raise SourceError(
                f"{self.name} now holds {self.array.dtype} {self.array.shape}, not the "
                f"{self.dtype} {self.shape} planned"
            )

    def identity(self) -> dict | None:
        """A ``.npy`` file: its path, dtype and shape (a file in RAM or a memmap of no file
        has nothing that tells it from other data)."""
        if self.path is None:
            return None
        return {"kind": "npy", "path": os.path.abspath(self.path), "dtype": self.dtype.str,
                "shape": list(self.shape)}  # fmt: skip

    def fingerprints(self):
        from .fingerprints import whole_file

        return None if self.path is None else whole_file(self.path)

    @property
    def ram_array(self) -> np.ndarray | None:
        """The array when it is in RAM (not a memory map: nothing to read, no reads to
        overlap with the kernels), else None."""
        if self.path is not None or isinstance(self.array, np.memmap):
            return None
        return self.array

    def regions(self, budget_bytes: int) -> Iterator[Region]:
        """Regions of about ``budget_bytes`` that follow the array's memory layout."""
        return memory_regions(self.array, budget_bytes // max(1, self.dtype.itemsize))

    def slice_regions(self, budget_bytes: int, axes: tuple[int, ...]) -> Iterator[Region]:
        return memory_regions(self.array, budget_bytes // max(1, self.dtype.itemsize), axes)

    def read(self, region: Region) -> np.ndarray:
        view = self.array[region]
        # a memmap: map the region's pages in one call rather than one fault per page
        self._advise(view, MADV_POPULATE_READ)
        return view

    def release(self, region: Region) -> None:
        """Unmap the pages of a scanned region of a memmap, so resident memory stays bounded.

        The file's pages stay in the page cache; a later read simply maps them again.
        """
        self._advise(self.array[region], mmap.MADV_DONTNEED)

    def _advise(self, view: np.ndarray, advice: int) -> None:
        mm = (
            _find_mmap(self.array)
            if self.path is not None or isinstance(self.array, np.memmap)
            else None
        )
        if mm is None or view.size == 0 or not hasattr(mm, "madvise"):
            return
        base = np.frombuffer(mm, dtype=np.uint8).__array_interface__["data"][0]
        lo, hi = _byte_bounds(view)
        start = (lo - base) // mmap.PAGESIZE * mmap.PAGESIZE
        end = min(hi - base, len(mm))
        if 0 <= start < end:
            try:
                mm.madvise(advice, start, end - start)
            except OSError:  # an advice this kernel does not know: only a hint
                pass


def _reopened(state: dict) -> ArraySource:
    source = ArraySource.__new__(ArraySource)
    source.__dict__.update(state)
    return source


MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # Linux >= 5.14

_byte_bounds = getattr(getattr(np.lib, "array_utils", np), "byte_bounds", None)


def _find_mmap(array: np.ndarray) -> mmap.mmap | None:
    a = array
    while a is not None:
        mm = getattr(a, "_mmap", None)
        if isinstance(mm, mmap.mmap):
            return mm
        a = a.base if isinstance(a.base, np.ndarray) else None
    return None


NUMPY_REMEDY = (
    "scan np.ma.filled(x, value) to scan the masked elements as a value of your choice, "
    "x.data to scan the values as stored (masked ones included), or x.compressed() to scan "
    "the unmasked values only (flattened)"
)
DASK_REMEDY = (
    "scan da.ma.filled(x, value) to scan the masked elements as a value of your choice, or "
    "da.ma.getdata(x) to scan the values as stored (masked ones included)"
)


def unmasked(array: np.ndarray, name: str, remedy: str = NUMPY_REMEDY) -> np.ndarray:
    """The values of a numpy masked array that masks nothing (``array.data``, a view); an
    ``InvalidArgumentError`` when it masks something: fastfinite scans every value, and a
    masked-out NaN would count, so the caller says what the masked elements are (``remedy``:
    how, for the kind of input the user holds). Any other array is returned as it is. The
    one check of masks: of an array, of each block of a dask array where it is computed,
    of a guard's batches."""
    if not isinstance(array, np.ma.MaskedArray):
        return array
    mask = np.ma.getmask(array)
    masked = 0 if mask is np.ma.nomask else int(np.count_nonzero(mask))
    if masked:
        from ..errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"{name} is a numpy masked array with {masked} masked element(s) of "
            f"{array.size}: fastfinite scans every value and does not skip masked ones; " + remedy
        )
    return array.data


def as_raw_dtype(arr: np.ndarray, raw_dtype: str, name: str) -> np.ndarray:
    """``arr``, raw bytes (``|V2``, ``|V1``: what ``np.save`` keeps of ml_dtypes' arrays),
    seen as the format ``raw_dtype``; anything else is an error, never reinterpreted."""
    from ..model.casts import cast_dtype

    dtype = cast_dtype(raw_dtype)
    if arr.dtype.kind != "V" or arr.dtype.names is not None or arr.dtype.itemsize != dtype.itemsize:
        raise UnsupportedDtypeError(
            f"raw_dtype={raw_dtype} reads raw bytes of {dtype.itemsize} byte(s) a value; "
            f"{name} holds {arr.dtype}"
        )
    return arr.view(dtype)


def _npy_problem(e: Exception) -> str:
    """What ``np.load`` met in a file that is not a valid ``.npy``, in words."""
    if isinstance(e, (SyntaxError, RecursionError)) or type(e).__name__ == "TokenError":
        return "not a valid .npy header (its dictionary is cut short or malformed)"
    if "mmap length is greater than file size" in str(e):
        return "the file is shorter than its header says (truncated data)"
    text = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
    return text if len(text) <= 200 else text[:200] + "..."  # a header may be 65 kB


def open_npy(
    path: str | os.PathLike, name: str | None = None, raw_dtype: str | None = None
) -> ArraySource:
    """Open a ``.npy`` file as a read-only memmap (never loaded whole); ``name``: what the
    report calls it (default: the path as given); ``raw_dtype``: the format of its values
    when the file holds raw bytes (``as_raw_dtype``). The source keeps the absolute path: a
    task elsewhere (on a cluster worker) opens the same file."""
    name = os.fspath(path) if name is None else name
    path = regular_file(os.fspath(path), name)
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic != b"\x93NUMPY":
        why = "it is empty" if not magic else "it does not start with NumPy's magic string"
        raise SourceError(f"{name} is not a .npy file: {why}")
    try:
        with np.errstate(all="ignore"):  # a shape past 2**63 bytes warns before it raises
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except OSError as e:
        raise SourceError(f"cannot read {name}: {e.strerror or e}") from None
    except Exception as e:  # Python objects, a header cut or malformed, a truncated body
        if "Python objects" in str(e) or "Object arrays" in str(e):
            raise UnsupportedDtypeError(f"cannot scan {name}: it holds Python objects") from None
        raise SourceError(f"{name} is not a valid .npy file: {_npy_problem(e)}") from None
    if raw_dtype:
        arr = as_raw_dtype(arr, raw_dtype, name)
    return ArraySource(arr, name=name, path=path, raw_dtype=raw_dtype)
