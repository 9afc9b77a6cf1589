"""``fastfinite.guard``: check every batch of a training pipeline as it passes.

Errors inside data generators are easily swallowed; a guard makes a bad batch loud and says
where it is: ``batch 4, element 0 ('image'), posinf at (3, 2)``. Clean batches take a lean
path (one kernel call per array, no report built); only a batch with a problem gets the full
scan that names it.
"""

from __future__ import annotations

import queue
import threading
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .api import scan
from .compute.blocks import Block, narrow_format, object_numbers, read_only
from .compute.summary import ScanSpec
from .errors import NonFiniteError, SourceError, UnsupportedDtypeError
from .indices import fmt_index
from .model.kinds import fails
from .options import parse_bool, parse_by, parse_cast, parse_choice, parse_int, parse_kinds
from .sources import dlpack

ON_BAD = ("raise", "warn", "skip")
_F4, _F8 = np.dtype("=f4"), np.dtype("=f8")
_END = object()


class BadBatchWarning(UserWarning):
    """A guard with ``on_bad="warn"`` passed on a batch with findings."""


def _elements(batch: Any, where: str, device_copy: bool = False) -> list[tuple[str, np.ndarray]]:
    """``(label, array)`` of the numeric arrays in a batch: an array, a tuple or list of
    arrays, a dict of arrays, tensors of any framework (``__dlpack__``: read in place on the
    CPU; on an accelerator an error naming the device, or copied with ``device_copy``),
    objects with ``__array__``, numbers, and lists of those. Strings, bytes and None are
    passed over; anything else that cannot be read as numbers raises, naming where it sits
    (a list of Python objects)."""
    if type(batch) is np.ndarray and batch.dtype.kind in "biufc":  # the common case, first
        return [("element 0", batch)]
    if isinstance(batch, dict):
        items = [(f"element {i} ({k!r})", v) for i, (k, v) in enumerate(batch.items())]
    elif isinstance(batch, (tuple, list)):
        items = [(f"element {i}", v) for i, v in enumerate(batch)]
    else:
        items = [("element 0", batch)]
    out: list[tuple[str, np.ndarray]] = []
    while items:
        label, value = items.pop(0)
        if type(value) is np.ndarray and value.dtype.kind in "biufc":
            out.append((label, value))
            continue
        if value is None or isinstance(value, (str, bytes)):
            continue
        if dlpack.is_tensor(value) and not isinstance(value, np.ndarray):
            value = _on_host(value, f"{where}, {label}", device_copy)
            if narrow_format(value.dtype):
                out.append((label, value))
                continue
        if isinstance(value, np.ma.MaskedArray):  # one that masks something is an error
            from .sources.ndarray import unmasked

            value = unmasked(value, f"{where}, {label}")
        try:
            arr = np.asarray(value)
        except Exception as e:  # a tensor on a GPU, a ragged list: not readable as one array
            arr, cause = None, e
        if arr is not None and arr.dtype.kind in "biufc":
            out.append((label, arr))
        elif isinstance(value, (tuple, list, dict)):  # look inside: ragged or mixed
            inner = value.items() if isinstance(value, dict) else enumerate(value)
            items[:0] = [(f"{label}, item {k!r}", v) for k, v in inner]
        elif arr is not None and arr.dtype.kind == "O":  # Python objects: numbers, or text
            try:
                nums = object_numbers(arr)
            except UnsupportedDtypeError as e:
                raise SourceError(f"{where}, {label}: {e}") from None
            if nums is not None:
                out.append((label, nums))
        elif arr is not None and narrow_format(arr.dtype):  # bfloat16, float8
            out.append((label, arr))
        elif arr is None or arr.dtype.kind == "V":
            why = cause if arr is None else f"structured dtype {arr.dtype}"
            raise SourceError(f"{where}, {label}: cannot check {type(value).__name__}: {why}")
    return out


def _on_host(tensor: Any, where: str, device_copy: bool) -> np.ndarray:
    if device_copy and dlpack.device_of(tensor)[0] not in dlpack.HOST_DEVICES:
        return dlpack.DeviceSource._host(tensor)
    try:
        return dlpack.host_array(tensor)
    except SourceError as e:
        raise SourceError(f"{where}: {e}") from None


class Guard:
    """Wraps an iterable of batches, or an indexable dataset, and scans what passes.

    Parameters
    ----------
    iterable : iterable or indexable
        A generator or iterator of batches, or a dataset with ``__len__`` and
        ``__getitem__`` (a Keras ``Sequence``/``PyDataset``, a PyTorch ``Dataset`` or
        ``DataLoader``: no framework needed).
    by : int
        Axis of the samples inside each array (messages give sample indices); ``None`` for
        none.
    cast : str or tuple of str
        Cast targets to check (default float32: the cast a float64 pipeline will meet).
    on_bad : {"raise", "warn", "skip"}
        A batch with findings raises ``NonFiniteError``, warns (``BadBatchWarning``) and
        passes, or is dropped.
    fail_on : set of str, optional
        Kinds that make a batch bad (default: ``{"error"}``: non-finite values and cast
        overflows; a cast underflow is a warning); e.g. ``{"nonfinite"}``,
        ``{"nonfinite", "zero_variance"}`` with ``by``, or ``"warning"`` for everything.
    prefetch : int
        Batches to read and check ahead in a background thread while the loop works on the
        current one (0, the default: everything in the caller's thread). It overlaps the
        check with the training step, so the guard costs next to nothing; but the source is
        then advanced from another thread and up to ``prefetch`` batches early: do not use it
        with a source that reuses one buffer for every batch.
    device_copy : bool
        Tensors on an accelerator are copied to the host to be checked; by default such a
        tensor is an error naming its device. ``True`` or ``False`` only (as every flag of
        :func:`fastfinite.scan`).

    Attributes
    ----------
    batches, bad, skipped, warned : int
        Counts so far. ``problems`` lists the message of every bad batch.
    """

    def __init__(
        self,
        iterable: Any,
        *,
        by: int | None = 0,
        cast=("float32",),
        on_bad: str = "raise",
        fail_on: Iterable[str] | None = None,
        max_locations: int = 5,
        prefetch: int = 0,
        device_copy: bool = False,
    ):
        self.iterable = iterable
        self.by = by
        parse_by(by)
        self.cast = parse_cast(cast)
        self.on_bad = parse_choice("on_bad", on_bad, ON_BAD)
        self.fail_on = parse_kinds(fail_on)
        self.max_locations = parse_int("max_locations", max_locations, 0)
        self.prefetch = parse_int("prefetch", prefetch, 0)
        self.device_copy = parse_bool("device_copy", device_copy)
        self.batches = 0
        self.bad = 0
        self.skipped = 0
        self.warned = 0
        self.problems: list[str] = []
        self._thr: dict[np.dtype, np.ndarray] = {}  # thresholds per dtype, in the block's type

    # -- the check -------------------------------------------------------------------
    def _clean(self, arr: np.ndarray) -> bool:
        """Lean path: one integer pass (``kernels.quick_check``), no report. True when the
        array holds no non-finite value and no cast risk. Runs per batch: kept short."""
        if arr.size == 0:
            return True
        if arr.dtype.kind in "biu" and not self.cast:
            return True
        if arr.dtype in (_F4, _F8) and arr.flags.c_contiguous:  # the common case: no copy
            x = read_only(arr.reshape(-1))
        else:
            x = Block(arr, (0,) * arr.ndim).x
        thr = self._thr.get(arr.dtype)
        if thr is None:
            thr = ScanSpec(arr.shape, arr.dtype, self.cast, 0).thresholds.astype(x.dtype)
            self._thr[arr.dtype] = thr
        from .compute import dispatch

        with np.errstate(all="ignore"):  # the caller's error state is not the check's
            return bool(dispatch.pick("quick_check", x.dtype, x.size <= 1024)(x, thr))

    def check(self, batch: Any, where: str) -> str | None:
        """The message for a bad batch, or None when it is fine."""
        problems = []
        for label, arr in _elements(batch, where, self.device_copy):
            if self.fail_on is None and self._clean(arr):
                continue
            by = self.by if (self.by is not None and arr.ndim > 0) else None
            report = scan(
                arr,
                by=by if self.fail_on else None,
                cast=self.cast,
                max_locations=self.max_locations,
                workers=1,
            )
            if not fails(report.kinds_found(), self.fail_on):
                continue
            problems.append(f"{where}, {label}, {_describe(report)}")
        return "; ".join(problems) if problems else None

    def _dispose(self, msg: str | None, stacklevel: int = 3) -> bool:
        """Count a checked batch (``msg``: its problems, or None); True to pass it on.
        ``stacklevel``: of a warning, so that it points at the caller's loop."""
        self.batches += 1
        if msg is None:
            return True
        self.bad += 1
        self.problems.append(msg)
        if self.on_bad == "raise":
            raise NonFiniteError(msg)
        if self.on_bad == "warn":
            self.warned += 1
            warnings.warn(msg, BadBatchWarning, stacklevel=stacklevel)
            return True
        self.skipped += 1
        return False

    # -- iteration and indexing --------------------------------------------------------
    def _items(self) -> Iterator[tuple[str, Any]]:
        """``(where, batch)`` from the source: ``sample i`` of an indexable dataset,
        ``batch i`` of an iterable."""
        src = self.iterable
        if not hasattr(src, "__iter__") and hasattr(src, "__getitem__") and hasattr(src, "__len__"):
            for i in range(len(src)):
                yield f"sample {i}", src[i]
        else:
            for i, batch in enumerate(src):
                yield f"batch {i}", batch

    def __iter__(self) -> Iterator[Any]:
        if self.prefetch:
            yield from self._prefetched()
            return
        for where, item in self._items():
            if self._dispose(self.check(item, where)):
                yield item

    def _prefetched(self) -> Iterator[Any]:
        """``__iter__`` with reading and checking in a background thread, ``prefetch``
        batches ahead; counts, warnings and errors (the source's own too) surface here, in
        the caller's thread, in batch order."""
        ahead: queue.Queue = queue.Queue(self.prefetch)
        stop = threading.Event()

        def produce() -> None:
            try:
                for where, item in self._items():
                    ahead.put((item, self.check(item, where), None))
                    if stop.is_set():
                        return
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                ahead.put((None, None, e))
                return
            ahead.put(_END)

        worker = threading.Thread(target=produce, name="fastfinite-guard", daemon=True)
        worker.start()
        try:
            while True:
                entry = ahead.get()
                if entry is _END:
                    return
                item, msg, error = entry
                if error is not None:
                    raise error
                if self._dispose(msg, stacklevel=4):
                    yield item
        finally:
            stop.set()
            while True:  # make room: a producer blocked on a full queue wakes and sees stop
                try:
                    ahead.get_nowait()
                except queue.Empty:
                    break

    def __len__(self) -> int:
        return len(self.iterable)

    def __getitem__(self, index: Any) -> Any:
        """A dataset's item, checked (``sample N`` in messages). With ``on_bad="skip"`` a bad
        item comes back as None, counted in ``skipped``: drop it in your collate function
        (an index cannot be skipped without changing the dataset's length)."""
        item = self.iterable[index]
        if self._dispose(self.check(item, f"sample {index}")):
            return item
        return None

    def summary(self) -> str:
        """One line: batches seen, bad, warned, skipped."""
        return (
            f"guard: {self.batches} batches checked, {self.bad} bad "
            f"({self.warned} warned, {self.skipped} skipped)"
        )

    def __repr__(self) -> str:
        return f"<{self.summary()}>"


def _describe(report) -> str:
    """``posinf at (3, 2)`` for the first problem, with the counts of the others."""
    first = report.locations[0] if report.locations else None
    counts = {k: v for k, v in report.counts().items() if v}
    parts = []
    if first is not None:
        parts.append(f"{first.kind} at {fmt_index(first.index)}")
    other = [f"{k} {v}" for k, v in counts.items()]
    if other:
        parts.append("(" + ", ".join(other) + ")")
    slice_findings = [f for f in report.findings if f.kind not in ("missing_chunk",)]
    if slice_findings and first is None:
        f = slice_findings[0]
        parts.append(f"{f.kind} at sample {fmt_index(f.where)}")
    return " ".join(parts) or "findings"


def guard(iterable: Any, **options: Any) -> Guard:
    """Wrap batches (a generator, iterator or indexable dataset) and scan each as it passes.

    Parameters
    ----------
    iterable : iterable or indexable
        Batches: arrays, tuples or lists of arrays ``(x, y, weights)``, dicts of arrays, or
        objects with ``__array__``.
    **options
        ``by=0``, ``cast=("float32",)``, ``on_bad="raise"``, ``fail_on=None``,
        ``max_locations=5``, ``prefetch=0``, ``device_copy=False``: see :class:`Guard`,
        which holds the one list.

    Returns
    -------
    Guard
        Iterate it (or index it) instead of the original.

    Examples
    --------
    >>> import numpy as np, fastfinite
    >>> batches = [np.zeros((4, 3)), np.array([[0.0, np.inf, 0.0]])]
    >>> for b in fastfinite.guard(batches, on_bad="skip"):
    ...     pass
    """
    return Guard(iterable, **options)
