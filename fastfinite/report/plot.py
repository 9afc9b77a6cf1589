"""Pictures of a report (matplotlib: the optional extra ``plot``).

Two steps. ``picture`` turns a report into a ``Picture``: plain data saying what is drawn
where (every kind's positions, the chunk boxes, the per-slice strips, the labels, the
title). ``draw`` draws a ``Picture`` with matplotlib (Agg); ``plot_report`` does both and
writes the PNG. Tests read the ``Picture`` and the artists (each carries ``gid``
``"loc:KIND"``, ``"box:KIND"`` and ``"chunk:KIND"`` (its marker), ``"slice:KIND"``,
``"tint"``, ``"label"`` or ``"clean"``).

What is drawn, so that one value in a billion shows: the map spans two axes of the array
(x: the first, y: the second; the others projected). Each recorded location is a marker of
its kind's colour and shape, a fixed size at any array size. Where a kind has more values
than locations recorded, the regions that hold value findings are tinted (presence, never a
mean): the rest sit there. Never-written and unreadable chunks are boxes of their own, with
a marker. Per-slice findings (``by``) have a strip below, one row per kind, drawn by
presence in at most ``MAX_BINS`` bins, with markers when few. Clusters of marks get a label
naming their kind and index. The report is not imported here: it imports this module.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, SourceError
from ..indices import fmt_index
from ..model.kinds import BASE_KINDS, CHUNK_KINDS, is_slice_kind

MAX_CELLS = 64
MAX_BINS = 2000  # cells of the map along x, and of a strip: bins, each drawn by presence
MAX_Y_BINS = 400  # cells of the map along y
MAX_MARKED = 500  # a strip row with at most this many slices also gets a marker per slice
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
_TINT = "#fcd5c4"


def style(kind: str) -> tuple[str, str, str]:
    """``(what it is, colour, marker)`` of a kind: ``("NaN", "#d62728", "o")``."""
    if kind in _STYLE:
        return _STYLE[kind]
    head, sep, target = kind.partition(":")
    if sep and head + sep in _STYLE:
        what, color, marker = _STYLE[head + sep]
        return what, color, marker
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
    tint: np.ndarray | None = None  # (y bins, x bins) presence of regions with findings
    labels: list[Label] = field(default_factory=list)
    strips: list[Strip] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.layers or self.boxes or any(s.rows for s in self.strips))


def _matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise SourceError("plotting needs matplotlib: pip install 'fastfinite[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
        report of another shape.
    """
    if report.arrays:
        raise InvalidArgumentError("plot one array of a group: report.arrays[path].plot(...)")
    for other in also:
        if tuple(other.shape) != tuple(report.shape) or other.arrays:
            raise InvalidArgumentError(
                f"plot also= takes scans of the same array, shape {fmt_index(report.shape)}; "
                f"got one of shape {fmt_index(other.shape)}"
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
    if report.missing_chunks and not boxes:  # counted, none listed
        pic.found += f" ({report.missing_chunks} never-written chunks: none listed)"
    return pic


def _place(ax: Any, labels: list[Label], xspan: float, levels: Sequence[float], **kw) -> None:
    """Labels with arrows, on the first free level (axes fraction) from the top."""
    ends = [-math.inf] * len(levels)
    fig = ax.get_figure()
    width = ax.get_position().width * fig.get_figwidth() * fig.dpi  # pixels, no draw needed
    for lab in sorted(labels, key=lambda lb: lb.x):
        frac = lab.x / xspan
        w = len(lab.text) * 4.6 / width  # about a 7 pt character
        x0 = frac - w if frac > 0.7 else frac
        level = next((i for i, e in enumerate(ends) if e < x0), None)
        if level is None:
            level = min(range(len(ends)), key=ends.__getitem__)
        ends[level] = x0 + w + 0.01
        color = style(lab.kind)[1]
        ax.annotate(
            lab.text,
            xy=(lab.x, lab.y),
            xycoords="data",
            xytext=(x0 if frac <= 0.7 else frac, levels[level]),
            textcoords=("axes fraction", "axes fraction"),
            ha="right" if frac > 0.7 else "left",
            va="center",
            fontsize=7,
            color=color if color != "#000000" else "black",
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": color, "alpha": 0.85},
            arrowprops={"arrowstyle": "-", "color": color, "lw": 0.7},
            gid="label",
            **kw,
        )


def draw(pic: Picture):
    """Draw a ``Picture``: a matplotlib Figure (Agg), not yet saved."""
    plt = _matplotlib()
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.ticker import MaxNLocator

    title = [pic.title, *textwrap.wrap(pic.found, 140)]
    heights = [4.0] + [0.6 + 0.36 * max(len(s.rows), 1) for s in pic.strips]
    top, gap, bottom = 0.2 * len(title) + 0.55, 0.9, 0.55  # inches
    tall = top + sum(heights) + gap * (len(heights) - 1) + bottom
    fig = plt.figure(figsize=(13, tall))
    grid = fig.add_gridspec(
        len(heights),
        1,
        height_ratios=heights,
        hspace=gap / (sum(heights) / len(heights)),
        left=0.16,
        right=0.74,
        top=1 - top / tall,
        bottom=bottom / tall,
    )
    ax = fig.add_subplot(grid[0])
    xs, ys = max(pic.size[0], 1), max(pic.size[1], 1)  # an empty array: an empty map
    ax.set_xlim(-0.01 * xs, 1.01 * xs)  # a mark at either end stays clear of the frame
    ax.set_ylim(1.02 * ys, -0.02 * ys)
    if pic.tint is not None and pic.tint.any():
        ax.imshow(
            np.ma.masked_equal(pic.tint.astype(np.uint8), 0),
            cmap=ListedColormap([_TINT]),
            vmin=0,
            vmax=1,
            aspect="auto",
            interpolation="nearest",
            extent=(0, xs, ys, 0),
            gid="tint",
        )
    handles = []
    for b in pic.boxes:
        x0, x1, y0, y1 = b.extent
        what, color, marker = style(b.kind)
        missing = b.kind == "missing_chunk"
        ax.add_patch(
            Rectangle(
                (x0, y0),
                x1 - x0,
                y1 - y0,
                facecolor="#dddddd" if missing else "#555555",
                edgecolor=color,
                hatch="///" if missing else "xx",
                linewidth=1.5,
                alpha=0.8,
                gid=f"box:{b.kind}",
            )
        )
    for kind in dict.fromkeys(b.kind for b in pic.boxes):
        mine = [b for b in pic.boxes if b.kind == kind]
        what, color, marker = style(kind)
        centres = np.array(
            [((b.extent[0] + b.extent[1]) / 2, (b.extent[2] + b.extent[3]) / 2) for b in mine]
        )
        ax.scatter(
            centres[:, 0],
            centres[:, 1],
            s=90,
            marker=marker,
            facecolor="white" if kind == "missing_chunk" else color,
            edgecolor=color if kind == "missing_chunk" else "white",
            linewidths=1.5,
            zorder=4,
            gid=f"chunk:{kind}",
        )
        handles.append(
            Line2D(
                [], [], marker=marker, linestyle="", markersize=9, markerfacecolor="white",
                markeredgecolor=color, label=f"{kind} ({what}): {len(mine):,}",
            )
        )  # fmt: skip
    for kind, layer in pic.layers.items():
        p = layer.positions
        ax.scatter(
            p[:, 0],
            p[:, 1],
            s=70,
            marker=layer.marker,
            color=layer.color,
            edgecolor="black",
            linewidths=0.6,
            zorder=5,
            gid=f"loc:{kind}",
        )
        shown = "" if layer.complete else f" (first {len(p):,} drawn)"
        handles.append(
            Line2D(
                [], [], marker=layer.marker, linestyle="", markersize=8, color=layer.color,
                markeredgecolor="black", label=f"{kind}: {layer.count:,}{shown}",
            )
        )  # fmt: skip
    if pic.tint is not None and pic.tint.any():
        handles.append(Patch(color=_TINT, label="holds values not drawn"))
    if pic.clean:
        ax.text(
            0.5, 0.5, "no problems found", transform=ax.transAxes, ha="center", va="center",
            fontsize=16, color="#2ca02c", gid="clean",
        )  # fmt: skip
    ax.set_xlabel(pic.xlabel)
    ax.set_ylabel(pic.ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # indices: no tick at 0.5
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("where the values and chunks with problems sit", fontsize=10)
    if handles:
        ax.legend(
            handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
            title="kinds", title_fontsize=8, frameon=False,
        )  # fmt: skip
    fig.suptitle("\n".join(title), fontsize=11, y=1 - 0.1 / tall, va="top")
    _place(ax, pic.labels, xs, [0.94, 0.82, 0.70, 0.58, 0.46, 0.34, 0.22, 0.10])
    for i, strip in enumerate(pic.strips):
        sax = fig.add_subplot(grid[i + 1], sharex=ax if strip.shares_x else None)
        _draw_strip(sax, strip)
    return fig


def _draw_strip(sax: Any, strip: Strip) -> None:
    from matplotlib.lines import Line2D

    n, rows = max(strip.n, 1), strip.rows
    sax.set_ylim(max(len(rows), 1), 0)
    if not strip.shares_x:
        from matplotlib.ticker import MaxNLocator

        sax.set_xlim(-0.01 * n, 1.01 * n)
        sax.xaxis.set_major_locator(MaxNLocator(integer=True))
    sax.set_title(strip.title, fontsize=9, loc="left")
    if not rows:
        sax.text(
            0.5, 0.5, "no slice findings", transform=sax.transAxes, ha="center", va="center",
            fontsize=9, color="#2ca02c",
        )  # fmt: skip
        sax.set_yticks([])
        return
    from matplotlib.colors import to_rgba

    nb = rows[0].bins.size
    img = np.zeros((len(rows), nb, 4))
    for i, row in enumerate(rows):
        img[i, row.bins] = to_rgba(row.color, 0.55)
    sax.imshow(
        img, aspect="auto", interpolation="nearest", extent=(0, n, len(rows), 0), gid="strip"
    )
    handles = []
    for i, row in enumerate(rows):
        if len(row.slices) <= MAX_MARKED:
            sax.scatter(
                row.slices + 0.5,
                np.full(len(row.slices), i + 0.5),
                s=160,
                marker="|",
                color=row.color,
                linewidths=2,
                zorder=4,
                gid=f"slice:{row.kind}",
            )
        handles.append(
            Line2D([], [], marker="|", linestyle="", markersize=10, markeredgewidth=2,
                   color=row.color, label=f"{row.kind} ({row.what})")
        )  # fmt: skip
    sax.set_yticks(np.arange(len(rows)) + 0.5, [f"{r.kind} ({len(r.slices):,})" for r in rows])
    sax.tick_params(axis="y", labelsize=8)
    for lab in strip.labels:
        sax.annotate(
            lab.text, xy=(lab.x, lab.y), xytext=(6, 0), textcoords="offset points",
            fontsize=7, va="center", color=style(lab.kind)[1], gid="label",
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
        )  # fmt: skip
    sax.set_xlabel(
        "slice index"
        + ("" if strip.shares_x else f" (flat, C order over shape {fmt_index(strip.shape)})"),
        fontsize=8,
    )
    sax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.05),
        fontsize=7,
        frameon=False,
        labelspacing=0.3,
        borderaxespad=0,
    )


def plot_report(report: Any, path: str, *, axes=None, also: Sequence[Any] = ()) -> str:
    """Draw the report into a PNG at ``path`` and return the path.

    Parameters
    ----------
    report : ScanReport
        One array's report.
    path : str
        The PNG to write.
    axes : (int, int), optional
        The axes the map spans (x, y); default: the two with most chunks.
    also : sequence of ScanReport
        Other scans of the same array with another ``by``: a strip each.

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    SourceError
        matplotlib is not installed (the ``plot`` extra).
    InvalidArgumentError
        See ``picture``.
    """
    _matplotlib()
    pic = picture(report, axes=axes, also=also)
    fig = draw(pic)
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
