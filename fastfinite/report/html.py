"""A report as one self-contained HTML page, and its compact summary for Jupyter.

The page needs no network when viewed: its CSS and its table sorter are inline, the picture
(``report.plot``, when matplotlib is installed) a base64 PNG. Every text taken from the data
(names of arrays, messages, labels) is escaped. Its size is bounded: each table lists at
most ``max_rows`` rows (a group's arrays ``max_rows // 5`` each) and says how many it left
out. The report is not imported here: it imports this module.
"""

from __future__ import annotations

import base64
import html
import math
import os
import tempfile
from typing import Any

import numpy as np

from ..errors import FastFiniteError
from ..indices import fmt_index
from ..model.kinds import ERROR, WARNING, severity_of
from .tables import SLICE_COLUMNS, array_reports, slice_kinds_by_slice

MAX_ROWS = 500  # rows of one table on the page
MAX_ARRAYS = 100  # sections of a group's arrays
MAX_PICTURES = 12  # pictures of a group's arrays (those with something found first)
SUMMARY_ARRAYS = 20  # a group's arrays in the Jupyter summary

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5em auto;
max-width:1200px;padding:0 1em;color:#1f2328;background:#fff}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid
#d0d7de}h3{font-size:1.05em;margin:1em 0 .3em}code,.mono{font-family:ui-monospace,Menlo,
Consolas,monospace;font-size:.92em}
.badge{display:inline-block;padding:.1em .6em;border-radius:.3em;color:#fff;font-weight:600;
vertical-align:middle}.b-error{background:#b91c1c}.b-warning{background:#b45309}
.b-ok{background:#15803d}.error{color:#b91c1c;font-weight:600}.warning{color:#b45309}
table{border-collapse:collapse;margin:.3em 0;font-size:.92em}
th,td{border:1px solid #d0d7de;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0;white-space:nowrap}td.mono{white-space:nowrap}td.n{text-align:right;font-variant-numeric:
tabular-nums}tr.flagged td{background:#fff5f5}
table.sortable th{cursor:pointer;user-select:none}table.sortable th::after{content:" \\2195";
color:#8c959f}table.sortable th[aria-sort=ascending]::after{content:" \\2191";color:#1f2328}
table.sortable th[aria-sort=descending]::after{content:" \\2193";color:#1f2328}
.scroll{max-height:32em;overflow:auto;display:inline-block;max-width:100%}
.cut,.note{color:#57606a;font-style:italic}img.picture{max-width:100%;border:1px solid #d0d7de}
section.array{border-left:3px solid #d0d7de;padding-left:1em;margin-top:1.5em}
footer{margin-top:2em;color:#57606a;font-size:.85em}
"""

SORTER = """
(function () {
  "use strict";
  function key(row, i, num) {
    var td = row.cells[i];
    var v = td.hasAttribute("data-v") ? td.getAttribute("data-v") : td.textContent;
    if (!num) { return v; }
    var x = parseFloat(v);
    return isNaN(x) ? null : x;
  }
  function sortTable(table, col, dir) {
    var head = table.tHead.rows[0];
    var num = head.cells[col].getAttribute("data-type") === "num";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var sign = dir === "descending" ? -1 : 1;
    rows.sort(function (a, b) {
      var x = key(a, col, num), y = key(b, col, num);
      if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
      if (num) { return sign * (x - y); }
      return sign * String(x).localeCompare(String(y));
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(head.cells, function (c) { c.removeAttribute("aria-sort"); });
    head.cells[col].setAttribute("aria-sort", dir);
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.tabIndex = 0;
      function toggle() {
        var asc = th.getAttribute("aria-sort") === "ascending";
        sortTable(table, i, asc ? "descending" : "ascending");
      }
      th.addEventListener("click", toggle);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") { toggle(); } });
    });
  });
  // a link ending in #sort=TABLE:COLUMN[:ascending|descending] opens the page sorted
  var m = /^#sort=([\\w-]+):([\\w-]+)(?::(ascending|descending))?$/.exec(location.hash);
  var table = m && document.getElementById(m[1]);
  if (table && table.tHead) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      if (th.getAttribute("data-col") === m[2]) { sortTable(table, i, m[3] || "ascending"); }
    });
  }
  document.documentElement.setAttribute("data-sorter", "ready");
})();
"""


def e(text: Any) -> str:
    """``text`` as HTML text or attribute value: ``& < > " '`` escaped."""
    return html.escape(str(text), quote=True)


def _num(v: Any) -> str:
    """A number as the page shows it: ints whole, floats to 6 significant digits."""
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.6g}"


def _sort_value(v: Any) -> str:
    """The ``data-v`` of a numeric cell: its full value, NaN as ``nan`` (sorted last)."""
    return repr(int(v)) if isinstance(v, (int, np.integer)) else repr(float(v))


def status(report: Any) -> tuple[str, str]:
    """``(text, css class)`` of the report's badge: PROBLEMS (an error), WARNINGS or OK."""
    if not report.ok:
        return "PROBLEMS", "b-error"
    return ("OK", "b-ok") if report.clean else ("WARNINGS", "b-warning")


def _what(report: Any) -> str:
    return "group" if report.dtype == "group" else f"{report.dtype} {fmt_index(report.shape)}"


class Cell:
    """A table cell: its text, and for numbers the value it sorts by."""

    __slots__ = ("text", "sort", "css")

    def __init__(self, text: Any, sort: str | None = None, css: str = ""):
        self.text, self.sort, self.css = str(text), sort, css


def num(v: Any) -> Cell:
    return Cell(_num(v), _sort_value(v), "n")


def table(
    tid: str,
    columns: list[tuple[str, str, bool]],
    rows: list[tuple[list[Cell], str]],
    total: int,
    what: str,
    hint: str = "",
) -> str:
    """A sortable table: ``columns`` as ``(key, header, numeric)``, ``rows`` as ``(cells,
    row css class)``; a line under it when ``total`` is more than the rows shown, saying
    how many of ``what`` were left out (and, in ``hint``, where they all are)."""
    head = "".join(
        f'<th data-col="{e(k)}"' + (' data-type="num"' if n else "") + f">{e(h)}</th>"
        for k, h, n in columns
    )
    body = []
    for cells, css in rows:
        tds = "".join(
            "<td"
            + (f' class="{c.css}"' if c.css else "")
            + (f' data-v="{e(c.sort)}"' if c.sort is not None else "")
            + f">{e(c.text)}</td>"
            for c in cells
        )
        body.append(f'<tr class="{css}">{tds}</tr>' if css else f"<tr>{tds}</tr>")
    out = (
        f'<div class="scroll"><table class="sortable" id="{e(tid)}"><thead><tr>{head}</tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )
    if total > len(rows):
        out += (
            f'<p class="cut">showing {len(rows)} of {total} {e(what)}: {total - len(rows)} '
            f"not shown{e(hint)}</p>"
        )
    return out


def severity_table(report: Any, tid: str) -> str:
    """What was found, by severity and kind, with counts; or a line saying nothing was."""
    found = report.severity_counts()
    if not found:
        return "<p>Nothing found: no NaN, no inf, no cast risk, no finding.</p>"
    rows = [
        ([Cell(s, css=s), Cell(kind, css="mono"), num(n)], "")
        for s in (ERROR, WARNING)
        for kind, n in found.get(s, {}).items()
    ]
    cols = [("severity", "severity", False), ("kind", "kind", False), ("count", "count", True)]
    return table(tid, cols, rows, len(rows), "kinds")


def facts(report: Any) -> str:
    """The counts and statistics of a report as one small table."""
    r = report
    lines = [
        ("elements", _num(r.elements)),
        ("non-finite", f"nan {r.nan}, +inf {r.posinf}, -inf {r.neginf}"),
    ]
    for t, risk in r.cast.items():
        lines.append((f"cast to {t}", f"overflow {risk.overflow}, underflow {risk.underflow}"))
    if r.count:
        lines.append(
            (
                "finite values",
                f"{r.count}: min {_num(r.min)}, max {_num(r.max)}, mean {_num(r.mean)}, "
                f"std {_num(r.std)}",
            )
        )
    else:
        lines.append(("finite values", "0"))
    if r.missing_chunks:
        lines.append(("missing chunks", f"{r.missing_chunks} ({r.missing_severity})"))
    if r.chunks:
        lines.append(("chunks", fmt_index(r.chunks)))
    if r.by is not None:
        lines.append(("by", f"{fmt_index(r.by)}, z threshold {r.z_threshold:g}"))
    if not r.complete:
        lines.append(("complete", "no: the scan stopped early"))
    rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in lines)
    return f"<table>{rows}</table>"


def picture(report: Any) -> str:
    """The report's picture as an inline PNG, or a line saying why there is none."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        return (
            '<p class="note">No picture: matplotlib is not installed '
            "(pip install 'fastfinite[plot]').</p>"
        )
    with tempfile.TemporaryDirectory(prefix="fastfinite-html-") as tmp:
        path = os.path.join(tmp, "report.png")
        try:
            report.plot(path)
        except FastFiniteError as err:
            return f'<p class="note">No picture: {e(err)}</p>'
        with open(path, "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
    alt = f"where the problems of {report.name or 'the array'} sit"
    return f'<img class="picture" alt="{e(alt)}" src="data:image/png;base64,{data}">'


def findings_table(findings: list, tid: str, max_rows: int, group: bool) -> str:
    if not findings:
        return "<p>No findings.</p>"
    cols = [
        ("severity", "severity", False),
        ("kind", "kind", False),
        ("where", "where", False),
        *([("array", "array", False)] if group else []),
        ("message", "message", False),
    ]
    rows = []
    for f in findings[:max_rows]:
        cells = [Cell(f.severity, css=f.severity), Cell(f.kind, css="mono")]
        cells.append(Cell(fmt_index(f.where), css="mono"))
        if group:
            cells.append(Cell("" if f.array is None else f.array, css="mono"))
        rows.append((cells + [Cell(f.message)], ""))
    return table(tid, cols, rows, len(findings), "findings", "; report.findings has them all")


def locations_table(report: Any, tid: str, max_rows: int, own: bool = False) -> str:
    """The report's recorded locations (``own``: those naming no array of its group: a
    table's, by row and column)."""
    locs = [loc for loc in report.locations if not own or loc.array is None]
    if not locs:
        return "<p>No locations: no NaN, inf or cast risk recorded.</p>"
    group = any(loc.array is not None for loc in locs)
    labelled = any(loc.labels for loc in locs)
    cols = [
        ("kind", "kind", False),
        ("severity", "severity", False),
        ("index", "index", False),
        ("value", "value", True),
        *([("labels", "labels", False)] if labelled else []),
        *([("array", "array", False)] if group else []),
    ]
    rows = []
    for loc in locs[:max_rows]:
        sev = loc.severity
        cells = [Cell(loc.kind, css="mono"), Cell(sev, css=sev)]
        cells += [Cell(fmt_index(loc.index), css="mono"), num(loc.value)]
        if labelled:
            labels = ", ".join(f"{k}={v}" for k, v in (loc.labels or {}).items())
            cells.append(Cell(labels, css="mono"))
        if group:
            cells.append(Cell(loc.array or "", css="mono"))
        rows.append((cells, ""))
    counted = sum(n for kind, n in report.counts().items())
    hint = f" (the report records at most {report.max_locations} of each kind)"
    recorded = len(locs)
    out = table(tid, cols, rows, recorded, "recorded locations", "; report.locations has them all")
    if counted > recorded:
        out += f'<p class="cut">{counted - recorded} more counted, not recorded{e(hint)}</p>'
    return out


def replay_table(report: Any, tid: str, max_rows: int) -> str:
    """Where the replayed standardization fails (``localize=True``), as NumPy says."""
    cols = [(k, k, False) for k in ("op", "error", "index", "where", "message")]
    rows = [
        (
            [
                Cell(x.op, css="mono"),
                Cell(x.error, css="mono"),
                Cell(fmt_index(x.index), css="mono"),
                Cell(fmt_index(x.where), css="mono"),
                Cell(x.message),
            ],
            "",
        )
        for x in report.localized[:max_rows]
    ]
    total = len(report.localized)
    return table(tid, cols, rows, total, "replayed elements", "; report.localized has them all")


def slice_rows(report: Any, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The flat indices of the slices a table shows, in its order: those with findings
    first, then the others, each in slice order, ``max_rows`` at most; and the kinds of
    every slice."""
    kinds = slice_kinds_by_slice(report.slices, report.findings).ravel()
    flagged = np.flatnonzero(kinds != "")[:max_rows]
    others = np.flatnonzero(kinds == "")[: max_rows - len(flagged)]
    return np.concatenate([flagged, others]), kinds


def slices_table(report: Any, tid: str, max_rows: int) -> str:
    s = report.slices
    if s is None:
        return ""
    shown, kinds = slice_rows(report, max_rows)
    flat = {name: np.asarray(getattr(s, name)).ravel() for name in SLICE_COLUMNS}
    one = len(s.by) == 1
    head = "column" if s.names is not None else "slice"
    cols = [(head, head, s.names is None)]
    cols += [(name, name, True) for name in SLICE_COLUMNS] + [("findings", "findings", False)]
    rows = []
    for i in shown.tolist():
        if s.names is not None:
            first = Cell(s.names[i], css="mono")
        else:
            where = i if one else fmt_index(np.unravel_index(i, s.shape))
            first = Cell(where, repr(i), "n mono")
        cells = [first] + [num(flat[name][i]) for name in SLICE_COLUMNS]
        cells.append(Cell(kinds[i], css="mono"))
        rows.append((cells, "flagged" if kinds[i] else ""))
    flagged = int(np.count_nonzero(kinds != ""))
    if flagged > len(shown):
        hint = f" (shown: the first {len(shown)} of the {flagged} with findings)"
    else:
        hint = f" (shown: all {flagged} with findings)" if flagged else ""
    hint += "; report.slices_frame() has them all"
    return (
        f"<p>{kinds.size} slices along the axes {e(fmt_index(s.by))}, {flagged} with "
        "findings (listed first); click a column to sort.</p>"
        + table(tid, cols, rows, kinds.size, "slices", hint)
    )


def array_body(report: Any, prefix: str, max_rows: int, with_picture: bool, h: str) -> str:
    """The sections of one array under headings ``h`` (``"h2"``...): what was found, the
    picture, findings, locations and slices (ids of its tables start with ``prefix``)."""
    sections = [("What was found", severity_table(report, prefix + "found") + facts(report))]
    if with_picture:
        sections.append(("Picture", picture(report)))
    sections.append(
        ("Findings", findings_table(report.findings, prefix + "findings", max_rows, False))
    )
    sections.append(("Locations", locations_table(report, prefix + "locations", max_rows)))
    if report.slices is not None:
        sections.append(("Per-slice statistics", slices_table(report, prefix + "slices", max_rows)))
    if report.localized:
        sections.append(("The errstate replay", replay_table(report, prefix + "replay", max_rows)))
    return "\n".join(f"<{h}>{title}</{h}>{body}" for title, body in sections)


def group_body(report: Any, max_rows: int, with_picture: bool) -> str:
    """A group's page: its totals, its own findings, an overview of its arrays, what was
    skipped, then a section per array (at most ``MAX_ARRAYS``, those with something found
    first)."""
    members = list(array_reports(report))
    parts = [f"<h2>What was found</h2>{severity_table(report, 'found')}", facts(report)]
    own = [f for f in report.findings if f.array is None]
    if own:
        parts.append("<h2>Findings of the group</h2>")
        parts.append(findings_table(own, "findings", max_rows, False))
    cols = [
        ("array", "array", False),
        ("what", "dtype and shape", False),
        ("status", "status", False),
        ("found", "what was found", False),
    ]
    rows = []
    for path, sub in members[:max_rows]:
        text, css = status(sub)
        rows.append(
            (
                [
                    Cell(path, css="mono"),
                    Cell(_what(sub), css="mono"),
                    Cell(text),
                    Cell(sub.problems()),
                ],
                "flagged" if not sub.clean else "",
            )
        )
    if any(loc.array is None for loc in report.locations):  # a table's (row, column)
        parts.append("<h2>Locations</h2>")
        parts.append(locations_table(report, "locations", max_rows, own=True))
    if report.slices is not None:
        parts.append(f"<h2>Per-slice statistics</h2>{slices_table(report, 'slices', max_rows)}")
    parts.append(f"<h2>Arrays ({len(members)})</h2>")
    parts.append(table("arrays", cols, rows, len(members), "arrays"))
    if report.skipped:
        skipped = list(report.skipped.items())
        srows = [([Cell(p, css="mono"), Cell(why)], "") for p, why in skipped[:max_rows]]
        parts.append(f"<h2>Skipped ({len(skipped)})</h2>")
        cols = [("member", "member", False), ("why", "why", False)]
        parts.append(table("skipped", cols, srows, len(skipped), "skipped members"))
    found = [i for i, (_, sub) in enumerate(members) if not sub.clean]
    rest = [i for i, (_, sub) in enumerate(members) if sub.clean]
    chosen = sorted((found + rest)[:MAX_ARRAYS])
    pictured = set(found[:MAX_PICTURES]) if with_picture else set()
    per_array = max(10, max_rows // 5)
    for n, i in enumerate(chosen):
        path, sub = members[i]
        text, css = status(sub)
        body = array_body(sub, f"a{n}-", per_array, i in pictured, "h3")
        if with_picture and i not in pictured and not sub.clean:
            body += (
                f'<p class="note">No picture here: the page draws {MAX_PICTURES} at most '
                f"(report.member({e(repr(path))}).plot(...) draws it).</p>"
            )
        parts.append(
            f'<section class="array" id="array-{n}"><h2><span class="mono">{e(path)}</span> '
            f'<span class="badge {css}">{text}</span></h2>'
            f'<p class="mono">{e(_what(sub))}</p>{body}</section>'
        )
    if len(chosen) < len(members):
        parts.append(
            f'<p class="cut">showing {len(chosen)} of {len(members)} arrays (those with '
            f"something found first): {len(members) - len(chosen)} not shown; "
            "report.arrays has them all</p>"
        )
    return "\n".join(parts)


def page(report: Any, *, max_rows: int = MAX_ROWS, picture: bool = True) -> str:
    """The whole HTML page of ``report``."""
    from .._version import __version__

    text, css = status(report)
    name = report.name or "array"
    complete = (
        "" if report.complete else ' <span class="warning">(incomplete: stopped early)</span>'
    )
    if report.arrays:
        body = group_body(report, max_rows, picture)
    else:
        body = array_body(report, "", max_rows, picture, "h2")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>fastfinite: {e(name)}</title><style>{CSS}</style></head><body>\n"
        f'<header><h1><span class="mono">{e(name)}</span> <span class="badge {css}" '
        f'id="status">{text}</span>{complete}</h1>'
        f'<p class="mono">{e(_what(report))}: {e(report.problems())}</p></header>\n'
        f"<main>{body}</main>\n"
        f"<footer>fastfinite {e(__version__)}. This page is "
        "self-contained: it loads nothing.</footer>\n"
        f"<script>{SORTER}</script>\n</body></html>\n"
    )


def to_html(
    report: Any,
    path: str | os.PathLike | None = None,
    *,
    max_rows: int = MAX_ROWS,
    picture: bool = True,
) -> str:
    """The report as one self-contained HTML page.

    Parameters
    ----------
    report : ScanReport
    path : str or path-like, optional
        Where to write the page (UTF-8). Without it, the page is returned as text.
    max_rows : int
        Rows per table at most (a group's arrays: a fifth of it each, 10 at least); a line
        under a table says how many were left out. Slices with findings are listed first.
    picture : bool
        Draw the picture (``report.plot``; a group's: of its first ``MAX_PICTURES`` arrays
        with something found), when matplotlib is installed.

    Returns
    -------
    str
        ``path``, or the page when no ``path`` was given.
    """
    from ..errors import InvalidArgumentError

    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        raise InvalidArgumentError(f"max_rows must be a whole number >= 1, got {max_rows!r}")
    text = page(report, max_rows=max_rows, picture=picture)
    if path is None:
        return text
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write(text)
    return os.fspath(path)


SUMMARY_CSS = (
    ".ff-summary .badge{display:inline-block;padding:0 .5em;border-radius:.3em;color:#fff;"
    "font-weight:600}.ff-summary .b-error{background:#b91c1c}.ff-summary .b-warning"
    "{background:#b45309}.ff-summary .b-ok{background:#15803d}.ff-summary .error{color:"
    "#b91c1c;font-weight:600}.ff-summary .warning{color:#b45309}.ff-summary td,.ff-summary th"
    "{text-align:left;padding:.1em .6em}.ff-summary .mono{font-family:monospace}"
)


def summary_html(report: Any) -> str:
    """The report's summary for Jupyter (``_repr_html_``): its status, what was found by
    severity, the first locations of each kind and, for a group, its arrays (at most
    ``SUMMARY_ARRAYS``); no picture (``to_html`` draws it)."""
    text, css = status(report)
    name = report.name or "array"
    out = [
        f'<div class="ff-summary"><style>{SUMMARY_CSS}</style>',
        f'<p><b class="mono">{e(name)}</b> <span class="mono">{e(_what(report))}</span> '
        f'<span class="badge {css}">{text}</span>'
        + ("" if report.complete else ' <span class="warning">(incomplete)</span>')
        + "</p>",
    ]
    found = report.severity_counts()
    rows = [
        f'<tr><td class="{s}">{s}</td><td class="mono">{e(kind)}</td><td>{n}</td></tr>'
        for s in (ERROR, WARNING)
        for kind, n in found.get(s, {}).items()
    ]
    if rows:
        out.append(f"<table>{''.join(rows)}</table>")
    else:
        out.append("<p>Nothing found.</p>")
    firsts = report.first_of_each_kind()
    counts = report.counts()
    for kind, locs in firsts.items():
        where = ", ".join(
            (f"{loc.array}: " if loc.array is not None else "") + fmt_index(loc.index)
            for loc in locs
        )
        more = counts.get(kind, 0) - len(locs)
        tail = f" (+{more} more)" if more > 0 else ""
        sev = severity_of(kind)
        out.append(
            f'<p><span class="{sev} mono">{e(kind)}</span> at '
            f'<span class="mono">{e(where)}</span>{tail}</p>'
        )
    if report.arrays:
        members = list(array_reports(report))
        rows = []
        for path, sub in members[:SUMMARY_ARRAYS]:
            t, c = status(sub)
            rows.append(
                f'<tr><td class="mono">{e(path)}</td><td class="mono">{e(_what(sub))}</td>'
                f'<td><span class="badge {c}">{t}</span></td><td>{e(sub.problems())}</td></tr>'
            )
        out.append(f"<table>{''.join(rows)}</table>")
        if len(members) > SUMMARY_ARRAYS:
            out.append(f"<p><i>{len(members) - SUMMARY_ARRAYS} more arrays not shown</i></p>")
    out.append("</div>")
    return "".join(out)
