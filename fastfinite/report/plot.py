"""Pictures of a report (matplotlib: the optional extra ``plot``).

Left: a heat map of value findings per chunk over two axes of the array (the two with most
chunks, or the ones asked for), with never-written chunks hatched and unreadable chunks
crossed out. Right, when the scan had ``by``: per slice, the count of non-finite values and
the largest |z|, with bad slices marked. Axes are labelled in array indices. The report is not imported here: it imports this module
to draw itself.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, SourceError
from ..indices import fmt_index

MAX_CELLS = 64
MAX_BINS = 2000  # slices are drawn in at most this many bins


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


def finding_grid(report: Any, axes: tuple[int, int]) -> tuple[np.ndarray, tuple[int, int]]:
    """Counts of value findings per cell over ``axes`` (summed over the other axes)."""
    cells = _cells(report)
    a0, a1 = axes
    n0 = math.ceil(report.shape[a0] / cells[a0]) if report.shape else 1
    n1 = math.ceil(report.shape[a1] / cells[a1]) if len(report.shape) > 1 else 1
    grid = np.zeros((max(n0, 1), max(n1, 1)))
    for start, stop, count in report.regions:
        if not start:
            grid[0, 0] += count
            continue
        r0 = range(
            start[a0] // cells[a0], max(start[a0] // cells[a0] + 1, -(-stop[a0] // cells[a0]))
        )
        r1 = (
            range(
                start[a1] // cells[a1], max(start[a1] // cells[a1] + 1, -(-stop[a1] // cells[a1]))
            )
            if a1 != a0
            else range(1)
        )
        share = count / (len(r0) * len(r1))
        for i in r0:
            for j in r1:
                grid[min(i, grid.shape[0] - 1), min(j, grid.shape[1] - 1)] += share
    return grid, (cells[a0], cells[a1] if a1 != a0 else 1)


def plot_report(report: Any, path: str, *, axes=None) -> str:
    """Draw the report into a PNG at ``path`` and return the path."""
    plt = _matplotlib()
    from matplotlib.colors import LogNorm

    if report.arrays:
        raise InvalidArgumentError("plot one array of a group: report.arrays[path].plot(...)")
    with_slices = report.slices is not None and report.slices.count.size > 0
    fig, axs = plt.subplots(
        1, 2 if with_slices else 1, figsize=(13 if with_slices else 7, 5.5), squeeze=False
    )
    ax = axs[0, 0]
    ax0, ax1 = choose_axes(report, axes) if len(report.shape) else (0, 0)
    grid, (c0, c1) = (
        finding_grid(report, (ax0, ax1)) if report.shape else (np.zeros((1, 1)), (1, 1))
    )
    shown = np.ma.masked_equal(grid, 0)
    extent = (0, grid.shape[1] * c1, grid.shape[0] * c0, 0)
    im = ax.imshow(
        shown,
        cmap="Reds",
        aspect="auto",
        interpolation="nearest",
        extent=extent,
        norm=LogNorm(vmin=max(grid[grid > 0].min(), 1e-3), vmax=grid.max())
        if (grid > 0).any()
        else None,
    )
    if (grid > 0).any():
        fig.colorbar(im, ax=ax, label="value findings (NaN, inf, cast risks)")
    cells = _cells(report)
    for f in report.findings:
        if f.kind not in ("missing_chunk", "unreadable_chunk") or len(f.where) != len(report.shape):
            continue
        y = f.where[ax0] * cells[ax0]
        x = f.where[ax1] * cells[ax1] if ax1 != ax0 else 0
        w = cells[ax1] if ax1 != ax0 else c1
        h = cells[ax0]
        if f.kind == "missing_chunk":
            ax.add_patch(
                plt.Rectangle(
                    (x, y), w, h, fill=False, hatch="///", edgecolor="tab:blue", linewidth=0.8
                )
            )
        else:
            ax.plot([x, x + w], [y, y + h], color="black", linewidth=1.5)
            ax.plot([x, x + w], [y + h, y], color="black", linewidth=1.5)
    ax.set_ylabel(f"axis {ax0} (index)")
    ax.set_xlabel(f"axis {ax1} (index)" if ax1 != ax0 else "(1-d array)")
    legend = "hatched: chunk never written" if report.missing_chunks else ""
    if any(f.kind == "unreadable_chunk" for f in report.findings):
        legend += ("; " if legend else "") + "crossed: chunk unreadable"
    ax.set_title(
        f"findings per {'chunk' if report.chunks else 'block'}" + (f"\n{legend}" if legend else ""),
        fontsize=10,
    )
    if with_slices:
        sax = axs[0, 1]
        s = report.slices
        bad = (s.nan + s.posinf + s.neginf).ravel()
        width = max(1, -(-bad.size // MAX_BINS))  # slices per bin: a million draw in seconds
        edges = np.arange(0, bad.size + width, width).clip(max=bad.size)
        bad, z = (np.maximum.reduceat(a, edges[:-1]) for a in (bad, s.max_z.ravel()))
        sax.stairs(bad, edges, fill=True, color="tab:red", label="non-finite values")
        per = "slice" if width == 1 else f"bin of {width} slices (the largest)"
        sax.set_xlabel(f"slice (flat index over by-axes {report.by}, shape {fmt_index(s.shape)})")
        sax.set_ylabel(f"non-finite values per {per}", color="tab:red")
        zax = sax.twinx()
        zax.stairs(z, edges, color="tab:blue", linewidth=0.8, label="largest |z|")
        zax.axhline(report.z_threshold, color="tab:blue", linestyle="--", linewidth=0.8)
        zax.set_ylabel(f"largest |z| (outlier above {report.z_threshold:g})", color="tab:blue")
        marks = [
            int(np.ravel_multi_index(w if isinstance(w, tuple) else (w,), s.shape))
            for w in report.bad_slices()
        ]
        if marks:
            shown = np.unique(np.asarray(marks) // width) * width  # one mark per bin
            label = f"bad slices ({len(marks)})"
            sax.plot(shown, np.zeros(len(shown)), "k|", markersize=12, label=label)
        sax.legend(loc="upper left", fontsize=8)
        sax.set_title("per slice", fontsize=10)
    counts = (
        "; ".join(
            f"{severity}s: " + ", ".join(f"{k} {n}" for k, n in kinds.items())
            for severity, kinds in report.severity_counts().items()
        )
        or "nothing found"
    )
    fig.suptitle(
        f"{report.name or 'array'}: {report.dtype} {fmt_index(report.shape)}\n{counts}",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
