"""Pictures of a report (matplotlib: the optional extra ``plot``).

``draw`` draws a ``Picture`` (``picture.py``: the data of what is drawn where) with
matplotlib (Agg); ``plot_report`` builds, draws and writes the PNG. Every artist that marks
something carries a ``gid``: ``"loc:KIND"`` (a marker per recorded location), ``"box:KIND"``
and ``"chunk:KIND"`` (a chunk's box and its marker), ``"slice:KIND"`` (a marker per slice in
a strip), ``"strip"``, ``"tint"``, ``"label"`` or ``"clean"``, so tests check the marks at
their positions. Markers are a fixed size at any array size: one value in a billion shows.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import SourceError
from ..indices import fmt_index
from .picture import MAX_MARKED, TINT, Label, Picture, Strip, picture, style


def _matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise SourceError("plotting needs matplotlib: pip install 'fastfinite[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
            zorder=4.5,  # over the chunks' markers, under the values': no value hidden
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
    heights = [4.0 if pic.size[1] > 1 else 1.6] + [
        0.6 + 0.36 * max(len(s.rows), 1) for s in pic.strips
    ]
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
            cmap=ListedColormap([TINT]),
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
        total = max(pic.chunk_counts.get(kind, 0), len(mine))
        shown = "" if total == len(mine) else f" (first {len(mine):,} drawn)"
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
                markeredgecolor=color, label=f"{kind} ({what}): {total:,}{shown}",
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
        handles.append(Patch(color=TINT, label="holds values not drawn"))
    if pic.clean:
        ax.text(
            0.5, 0.5, "no problems found", transform=ax.transAxes, ha="center", va="center",
            fontsize=16, color="#2ca02c", gid="clean",
        )  # fmt: skip
    ax.set_xlabel(pic.xlabel)
    ax.set_ylabel(pic.ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # indices: no tick at 0.5
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if pic.size[1] <= 1:  # a 1-d array: one row, no y ticks
        ax.set_yticks([])
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
            fontsize=7, va="center", color=style(lab.kind)[1], gid="label", zorder=6,
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
