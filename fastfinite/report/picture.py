"""What a picture of a report shows, as plain data (no matplotlib here: ``plot`` draws it).

``picture(report)`` returns a ``Picture``: the map over two axes of the array (x: the first,
y: the second; the others projected) with each recorded location of each kind (``Layer``),
the never-written and unreadable chunks (``Box``), the presence of values not all recorded
(``tint``: per slice when the scan has ``by`` along x, else the regions that hold them, never
a mean), one ``Strip`` per scan with ``by`` (a row per kind of per-slice finding, by presence
in at most ``MAX_BINS`` bins), the labels naming kind and index of each cluster of marks, and
the title saying what was found. Tests read it; ``plot.draw`` draws exactly it. The report is
not imported here: it imports ``plot``, which imports this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..indices import fmt_index
from ..model.kinds import BASE_KINDS, CHUNK_KINDS, is_slice_kind

MAX_CELLS = 64
MAX_BINS = 2000  # cells of the map along x, and of a strip: bins, each drawn by presence
MAX_Y_BINS = 400  # cells of the map along y
MAX_MARKED = 500  # a strip row with at most this many slices also gets a marker per slice (plot)
MAX_LABELS = 10  # labels on the map
MAX_KIND_LABELS = 3  # of them, per kind
MAX_STRIP_LABELS = 6  # labels per strip row

# kind (or prefix of a kind per cast target) -> (what it is, colour, marker)
_STYLE = {
    "nan": ("NaN", "#d62728", "o"),
    "posinf": ("+inf", "#ff7f0e", "^"),
    "neginf": ("-inf", "#9467bd", "v"),
    "overflow:": ("cast overflows", "#8c564b", "D"),
    "underflow:": ("cast underflows", "#bcbd22", "d"),
    "missing_chunk": ("chunk never written", "#7f7f7f", "s"),
    "unreadable_chunk": ("chunk unreadable", "#000000", "X"),
    "nonfinite": ("slice holds NaN or inf", "#d62728", "|"),
    "zero_variance": ("constant slice", "#1f77b4", "|"),
    "near_zero_variance": ("nearly constant slice", "#17becf", "|"),
    "outlier": ("outlier slice", "#2ca02c", "|"),
    "sum_overflow:": ("sum overflows", "#8c564b", "|"),
    "variance_overflow:": ("variance overflows", "#e377c2", "|"),
}
TINT = "#fcd5c4"


def style(kind: str) -> tuple[str, str, str]:
    """``(what it is, colour, marker)`` of a kind: ``("NaN", "#d62728", "o")``."""
    if kind in _STYLE:
        return _STYLE[kind]
    head, sep, _ = kind.partition(":")
    if sep and head + sep in _STYLE:  # a kind per cast target or dtype: overflow:float16
        return _STYLE[head + sep]
    return kind, "#444444", "*"


@dataclass
class Label:
    """A label on the picture: its text and the point it names (data coordinates)."""

    text: str
    x: float
    y: float
    kind: str


@dataclass
class Layer:
    """The marks of one kind of value on the map: ``positions`` (n, 2), x and y of each
    recorded location (cell centres: index + 0.5); ``count`` the values of the kind in
    the array (more than the positions when not all were recorded)."""

    kind: str
    what: str
    color: str
    marker: str
    positions: np.ndarray
    count: int
    indices: list[tuple[int, ...]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return len(self.positions) >= self.count


@dataclass
class Box:
    """A chunk drawn as a box: ``(x0, x1, y0, y1)`` in array indices, ``where`` its chunk
    index."""

    kind: str
    where: tuple[int, ...]
    extent: tuple[float, float, float, float]


@dataclass
class StripRow:
    """One kind of per-slice finding: ``slices`` the flat indices of its slices; ``bins``
    presence over the strip's bins."""

    kind: str
    what: str
    color: str
    slices: np.ndarray
    bins: np.ndarray


@dataclass
class Strip:
    """The per-slice findings of one scan with ``by``: ``n`` slices of ``shape`` along
    ``by``, one row per kind; ``shares_x``: drawn under the map on its x axis."""

    title: str
    by: tuple[int, ...]
    shape: tuple[int, ...]
    n: int
    rows: list[StripRow]
    labels: list[Label]
    shares_x: bool


@dataclass
class Picture:
    """What a picture of a report shows, as plain data (``draw`` draws it)."""

    title: str
    found: str
    axes: tuple[int, int]
    size: tuple[int, int]  # the map's x and y extents, in array indices
    xlabel: str
    ylabel: str
    layers: dict[str, Layer] = field(default_factory=dict)
    boxes: list[Box] = field(default_factory=list)
    tint: np.ndarray | None = None  # (y bins, x bins): presence of values not all drawn
    chunk_counts: dict[str, int] = field(default_factory=dict)  # all, listed (boxed) or not
    labels: list[Label] = field(default_factory=list)
    strips: list[Strip] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.layers or self.boxes or self.chunk_counts or any(s.rows for s in self.strips)
        )


def _cells(report: Any) -> tuple[int, ...]:
    """Cell size per axis: the storage chunks, or bins of at most ``MAX_CELLS`` per axis."""
    if report.chunks and len(report.chunks) == len(report.shape):
        return tuple(max(1, int(c)) for c in report.chunks)
    return tuple(max(1, math.ceil(n / MAX_CELLS)) for n in report.shape)


def choose_axes(report: Any, axes=None) -> tuple[int, int]:
    """The two axes the map spans: ``axes`` checked, else the two with most chunks (the
    first axes on a tie), in order; ``(0, 0)`` for a 1-d array."""
    ndim = len(report.shape)
    if axes is not None:
        given = tuple(axes)
        axes = tuple(int(a) % max(ndim, 1) for a in given)
        if len(axes) != 2 or axes[0] == axes[1] or any(not -ndim <= a < ndim for a in given):
            raise InvalidArgumentError(
                f"plot axes must be two different axes of the {ndim}-d array, got {given}"
            )
        return axes
    if ndim < 2:
        return (0, 0)
    cells = _cells(report)
    n = [math.ceil(s / c) for s, c in zip(report.shape, cells)]
    order = sorted(range(ndim), key=lambda a: (-n[a], a))
    return tuple(sorted(order[:2]))


def _found(report: Any, also: Sequence[Any]) -> str:
    """What was found, in words, for the title."""
    parts = []
    for severity, kinds in report.severity_counts().items():
        parts.append(f"{severity}s: " + ", ".join(f"{k} {n:,}" for k, n in kinds.items()))
    for other in also:
        kinds = {k: n for ks in other.severity_counts().values() for k, n in ks.items()}
        kinds = {k: n for k, n in kinds.items() if is_slice_kind(k)}
        if kinds:
            parts.append(
                f"per slice along by={fmt_index(other.by)}: "
                + ", ".join(f"{k} {n:,}" for k, n in kinds.items())
            )
    return "; ".join(parts) if parts else "no problems found"


def _clusters(xs: np.ndarray, gap: float) -> list[np.ndarray]:
    """Indices into ``xs`` grouped where neighbours (in x order) lie within ``gap``."""
    if not len(xs):
        return []
    order = np.argsort(xs, kind="stable")
    cuts = np.nonzero(np.diff(xs[order]) > gap)[0] + 1
    return np.split(order, cuts)


def _tint(report: Any, a0: int, a1: int, size: tuple[int, int], rows: bool) -> np.ndarray:
    """Presence over the map's cells of the values not all drawn: per slice along the map's
    x axis when ``rows`` (exact: the slices' own counts of NaN and inf), else the regions
    holding value findings."""
    nx, ny = min(size[0], MAX_BINS), min(size[1], MAX_Y_BINS)
    grid = np.zeros((ny, nx), dtype=bool)
    if rows:
        s = report.slices
        bad = np.flatnonzero((s.nan + s.posinf + s.neginf).ravel())
        grid[:, np.unique(bad * nx // size[0])] = True
        return grid
    for start, stop, count in report.regions:
        if not count:
            continue
        if not start:  # a 0-d array
            grid[:] = True
            continue
        x0, x1 = start[a0], stop[a0]
        y0, y1 = (start[a1], stop[a1]) if a1 != a0 else (0, 1)
        i0, i1 = x0 * nx // size[0], max(x0 * nx // size[0] + 1, -(-x1 * nx // size[0]))
        j0, j1 = y0 * ny // size[1], max(y0 * ny // size[1] + 1, -(-y1 * ny // size[1]))
        grid[j0:j1, i0:i1] = True
    return grid


def _map_labels(layers: dict[str, Layer], boxes: list[Box], xspan: float) -> list[Label]:
    """A label per cluster of marks, every kind's first clusters first."""
    per_kind: list[list[Label]] = []
    for kind, layer in layers.items():
        xs = layer.positions[:, 0]
        found = []
        for c in _clusters(xs, max(xspan * 0.03, 1.5)):  # neighbouring cells: one label
            first = c[np.argmin(xs[c])]
            x, y = layer.positions[first]
            index = layer.indices[first]
            more = f" (+{len(c) - 1} near)" if len(c) > 1 else ""
            found.append(Label(f"{kind} at {fmt_index(index)}{more}", x, y, kind))
        per_kind.append(found)
    chunk_labels = [
        Label(
            f"{b.kind} {fmt_index(b.where)}",
            (b.extent[0] + b.extent[1]) / 2,
            (b.extent[2] + b.extent[3]) / 2,
            b.kind,
        )
        for b in boxes
    ]
    labels = chunk_labels[:MAX_KIND_LABELS]
    for round_ in range(MAX_KIND_LABELS):  # every kind's first cluster, then the seconds...
        for k in per_kind:
            if round_ < len(k) and len(labels) < MAX_LABELS:
                labels.append(k[round_])
    return labels


def _strip(report: Any, a0: int, main: bool) -> Strip | None:
    """The per-slice findings of a scan with ``by``, one row per kind."""
    if report.by is None or report.slices is None:
        return None
    shape = tuple(report.slices.shape)
    n = int(np.prod(shape)) if shape else 1
    wheres: dict[str, list] = {}
    for f in report.findings:
        if is_slice_kind(f.kind) and len(f.where) == len(shape):
            wheres.setdefault(f.kind, []).append(f.where)
    nb = max(1, min(n, MAX_BINS))
    names = report.slices.names if report.slices.names and len(report.slices.names) == n else None
    rows, labels = [], []
    for i, (kind, ws) in enumerate(wheres.items()):
        flat = np.ravel_multi_index(np.asarray(ws, dtype=np.int64).T, shape) if shape else [0]
        flat = np.unique(np.asarray(flat, dtype=np.int64))
        bins = np.zeros(nb, dtype=bool)
        bins[flat * nb // n] = True
        what, color, _ = style(kind)
        rows.append(StripRow(kind, what, color, flat, bins))
        last = -math.inf
        taken = 0
        for c in _clusters(flat.astype(float), max(n * 0.01, 1.5)):
            x = float(flat[c[0]])
            if taken < MAX_STRIP_LABELS and x - last > n * 0.12:
                more = f" (+{len(c) - 1} near)" if len(c) > 1 else ""
                index = np.unravel_index(int(flat[c[0]]), shape) if shape else ()
                name = f" {names[int(flat[c[0]])]!r}" if names else ""
                text = f"{kind} at {fmt_index(index)}{name}{more}"
                labels.append(Label(text, x + 0.5, i + 0.5, kind))
                last, taken = x, taken + 1
    by = tuple(report.by)
    title = (
        f"per-slice findings, by={fmt_index(by)}{'' if main else ' (a second scan)'}: "
        f"{n:,} slices, shape {fmt_index(shape)}"
    )
    return Strip(title, by, shape, n, rows, labels, shares_x=by == (a0,))


def picture(report: Any, *, axes=None, also: Sequence[Any] = ()) -> Picture:
    """What a picture of ``report`` shows, as plain data.

    Parameters
    ----------
    report : ScanReport
        One array's report (a group's: one of its ``arrays``).
    axes : (int, int), optional
        The axes the map spans (x, y); default: the two with most chunks.
    also : sequence of ScanReport
        Other scans of the same array with another ``by``: their per-slice findings get a
        strip each (the demo's per-feature scan).

    Raises
    ------
    InvalidArgumentError
        A group's report, axes that are not two different axes of the array, or an ``also``
        report of another shape or without ``by``.
    """
    if report.arrays:
        raise InvalidArgumentError("plot one array of a group: report.arrays[path].plot(...)")
    for other in also:
        if tuple(other.shape) != tuple(report.shape) or other.arrays:
            raise InvalidArgumentError(
                f"plot also= takes scans of the same array, shape {fmt_index(report.shape)}; "
                f"got one of shape {fmt_index(other.shape)}"
            )
        if other.by is None:
            raise InvalidArgumentError(
                "plot also= takes scans with by= (their per-slice findings are drawn); "
                "got a scan without by"
            )
    shape = tuple(report.shape) or (1,)
    a0, a1 = choose_axes(report, axes) if len(report.shape) else (0, 0)
    size = (int(shape[a0]), int(shape[a1]) if a1 != a0 else 1)
    others = [a for a in range(len(shape)) if a not in (a0, a1)]
    xlabel = f"axis {a0} (index)"
    ylabel = f"axis {a1} (index)" if a1 != a0 else "(1-d array)"
    if others:
        ylabel += f"; axes {', '.join(map(str, others))} projected"
    layers: dict[str, Layer] = {}
    by_kind: dict[str, list[tuple[int, ...]]] = {}
    for loc in report.locations:
        by_kind.setdefault(loc.kind, []).append(tuple(loc.index) or (0,))
    counts = report.counts()
    for kind, indices in by_kind.items():
        idx = np.asarray(indices, dtype=np.int64).reshape(len(indices), -1)
        xs = idx[:, a0] + 0.5
        ys = idx[:, a1] + 0.5 if a1 != a0 else np.full(len(idx), 0.5)
        what, color, marker = style(kind)
        layers[kind] = Layer(
            kind,
            what,
            color,
            marker,
            np.column_stack([xs, ys]),
            max(counts.get(kind, 0), len(idx)),
            [tuple(int(v) for v in i) for i in indices],
        )
    for kind, n in counts.items():  # counted, none recorded (max_locations=0)
        if n and kind not in layers:
            what, color, marker = style(kind)
            layers[kind] = Layer(kind, what, color, marker, np.zeros((0, 2)), n)
    boxes = []
    chunks = tuple(report.chunks) if report.chunks else None
    for f in report.findings:
        if f.kind not in CHUNK_KINDS or chunks is None or len(f.where) != len(report.shape):
            continue
        x0 = f.where[a0] * chunks[a0]
        x1 = min(x0 + chunks[a0], size[0])
        y0, y1 = (f.where[a1] * chunks[a1], min((f.where[a1] + 1) * chunks[a1], size[1]))
        if a1 == a0:
            y0, y1 = 0, 1
        boxes.append(Box(f.kind, tuple(f.where), (x0, x1, y0, y1)))
    tint = None
    partial = {kind for kind, layer in layers.items() if not layer.complete}
    if partial:
        rows = (
            partial <= set(BASE_KINDS)
            and report.slices is not None
            and tuple(report.by or ()) == (a0,)
            and len(report.shape) > 0
        )
        tint = _tint(report, a0, a1, size, rows)
    strips = [s for s in (_strip(r, a0, r is report) for r in (report, *also)) if s is not None]
    pic = Picture(
        title=f"{report.name or 'array'}: {report.dtype} {fmt_index(report.shape)}",
        found=_found(report, also),
        axes=(a0, a1),
        size=size,
        xlabel=xlabel,
        ylabel=ylabel,
        layers=layers,
        boxes=boxes,
        tint=tint,
        strips=strips,
    )
    pic.labels = _map_labels(layers, boxes, size[0])
    unreadable = sum(f.kind == "unreadable_chunk" for f in report.findings)
    pic.chunk_counts = {
        k: n
        for k, n in (("missing_chunk", report.missing_chunks), ("unreadable_chunk", unreadable))
        if n
    }
    boxed = sum(b.kind == "missing_chunk" for b in boxes)
    if report.missing_chunks > boxed:  # listed up to max_locations
        pic.found += (
            f" ({report.missing_chunks:,} never-written chunks, {boxed:,} listed and drawn)"
        )
    return pic
