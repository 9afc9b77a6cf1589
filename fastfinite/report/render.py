"""The human summary of a report: compact, at most 100 columns, coloured on a terminal."""

from __future__ import annotations

import textwrap
from typing import Any

from ..indices import fmt_index
from ..model.kinds import CHUNK_KINDS, ERROR, WARNING, is_slice_kind, severity_of

WIDTH = 100
_COLORS = {
    "bad": "\033[1;31m",
    "good": "\033[1;32m",
    "warn": "\033[33m",
    "dim": "\033[2m",
    "bold": "\033[1m",
    "end": "\033[0m",
}


def render(
    report: Any,
    *,
    color: bool = False,
    width: int = WIDTH,
    indent: str = "",
    per_section: int = 10,
) -> str:
    """The report as a few lines of text.

    Parameters
    ----------
    report : ScanReport
        (Not imported here: the report imports this module to print itself.)
    color : bool
        ANSI colours (the CLI turns them on when stdout is a terminal).
    width : int
        Longest line.
    per_section : int
        Lines listed per section (locations, slices, chunks, replays) before "... N more".
    """

    def c(text: str, style: str) -> str:
        return f"{_COLORS[style]}{text}{_COLORS['end']}" if color else text

    def fit(line: str) -> str:
        if len(line) <= width:
            return line
        lead = line[: len(line) - len(line.lstrip(" "))]
        body = textwrap.shorten(line[len(lead) :], width=width - len(lead), placeholder=" ...")
        return lead + body

    r = report
    out: list[str] = []
    found = r.severity_counts()
    if not r.ok:
        status = c("PROBLEMS", "bad")
    else:
        status = c("OK", "good") if r.clean else c("WARNINGS", "warn")
    if not r.complete:
        status += " " + c("(incomplete: stopped early)", "warn")
    what = "group" if r.dtype == "group" else f"{r.dtype} {fmt_index(r.shape)}"
    name = r.name or "array"
    room = width - len(indent) - len(what) - 14  # status and separators
    if len(name) > room:  # keep the end of a long path: the file and the array
        name = "..." + name[-max(room - 3, 8) :]
    out.append(f"{indent}{c(name, 'bold')}: {what}  {status}")
    pad = indent + "  "

    def num(v: int, style: str = "bad") -> str:
        return c(str(v), style) if v else str(v)

    out.append(f"{pad}non-finite: nan {num(r.nan)}, +inf {num(r.posinf)}, -inf {num(r.neginf)}")
    for t, risk in r.cast.items():
        d = r.dynamic_range.get(t)
        scaled = "" if d is None else " after scaling"
        out.append(
            f"{pad}cast to {t}{scaled}: overflow {num(risk.overflow)}, "
            f"underflow {num(risk.underflow, 'warn')}"
        )
        if d is not None:
            scale = "per slice" if d.slices is not None else f"{d.scale:.6g}"
            out.append(
                fit(
                    f"{pad}  scale {scale}, amax {d.amax:.6g}: "
                    f"{100 * d.underflow_fraction:.3g}% of non-zero values flush to zero, "
                    f"{d.subnormal} subnormal"
                    + ("" if d.slices is not None else f" (below {d.smallest_normal:.3g})")
                )
            )
    if r.count:
        out.append(
            fit(
                f"{pad}finite {r.count}/{r.elements}: min {r.min:.6g}, max {r.max:.6g}, "
                f"mean {r.mean:.6g}, std {r.std:.6g}"
            )
        )
    else:
        out.append(f"{pad}finite 0/{r.elements}")
    for severity, style in ((ERROR, "bad"), (WARNING, "warn")):
        if severity in found:
            said = ", ".join(f"{kind} {n}" for kind, n in found[severity].items())
            out.append(fit(f"{pad}{c(severity + 's', style)}: {said}"))

    def details(rep, pad: str) -> None:
        """Locations, missing and unreadable units, slices and the replay of one array (a
        group's or table's own locations only: the rest is said of each member)."""
        counts = rep.counts()
        # a group's arrays' locations are said under each array
        for kind, locs in rep.first_of_each_kind(own=True).items():
            more = counts.get(kind, 0) - len(locs)
            tail = f" (+{more} more)" if more > 0 else ""
            out.append(fit(f"{pad}{kind} at " + ", ".join(fmt_index(x.index) for x in locs) + tail))
        if rep.arrays:
            return
        missing = [f for f in rep.findings if f.kind == "missing_chunk"]
        if rep.missing_chunks:
            listed = ", ".join(fmt_index(f.where) for f in missing[:per_section])
            more = rep.missing_chunks - min(len(missing), per_section)
            line = (
                f"{pad}missing chunks (never written, read as the fill value): "
                f"{rep.missing_chunks}: {listed}" + (f" (+{more} more)" if more > 0 else "")
            )
            out.append(fit(c(line, "bad" if rep.missing_severity == ERROR else "warn")))
        unreadable = [f for f in rep.findings if f.kind == "unreadable_chunk"]
        for f in unreadable[:per_section]:
            out.append(fit(c(f"{pad}unreadable chunk {fmt_index(f.where)}: {f.message}", "bad")))
        if len(unreadable) > per_section:
            out.append(f"{pad}... {len(unreadable) - per_section} more unreadable chunks")
        names = rep.slices.names if rep.slices is not None else None

        def at(where) -> str:  # a slice, by name when it is a table's column
            return fmt_index(where) + (f" {names[where[0]]!r}" if names else "")

        by_slice: dict[tuple[int, ...], list[str]] = {}
        for f in rep.findings:
            if is_slice_kind(f.kind):
                by_slice.setdefault(f.where, []).append(f.kind)
        if by_slice:
            per_kind: dict[str, list[tuple[int, ...]]] = {}
            for where, kinds in by_slice.items():
                for kind in kinds:
                    per_kind.setdefault(kind, []).append(where)
            worst = "bad" if any(severity_of(k) == ERROR for k in per_kind) else "warn"
            out.append(
                f"{pad}slices with findings: {c(str(len(by_slice)), worst)} "
                f"(by={rep.by}, z threshold {rep.z_threshold:g})"
            )
            for kind, wheres in per_kind.items():
                first = ", ".join(at(w) for w in wheres[:3])
                more = f" (+{len(wheres) - 3} more)" if len(wheres) > 3 else ""
                severity = severity_of(kind)
                tag = c(severity, "bad" if severity == ERROR else "warn")
                out.append(fit(f"{pad}  {kind} ({tag}): {len(wheres)} slice(s): {first}{more}"))
            for where, kinds in list(by_slice.items())[:per_section]:
                out.append(fit(f"{pad}  slice {at(where)}: {', '.join(kinds)}"))
            if len(by_slice) > per_section:
                out.append(f"{pad}  ... {len(by_slice) - per_section} more slices")
        if rep.localized:
            groups: dict[tuple[str, str], list] = {}
            for loc in rep.localized:
                groups.setdefault((loc.op, loc.error), []).append(loc)
            out.append(f"{pad}errstate replay: {len(rep.localized)} element(s)")
            for (op, error), locs in groups.items():
                idx = ", ".join(fmt_index(x.index) for x in locs[:3])
                more = f" (+{len(locs) - 3} more)" if len(locs) > 3 else ""
                out.append(fit(f"{pad}  {op} ({error}) at {idx}{more}: {locs[0].message}"))

    def members(rep, pad: str) -> None:
        """A group's own findings, then each array (a member that is itself a group, as
        ``merge_reports`` makes of groups, with its own arrays under it), then what was
        skipped."""
        for f in rep.findings:  # about the group itself, not one of its arrays
            if f.array is None and not is_slice_kind(f.kind) and f.kind not in CHUNK_KINDS:
                style = "bad" if f.severity == ERROR else "warn"
                out.append(fit(c(f"{pad}{f.kind}: {f.message}", style)))
        for path, sub in rep.arrays.items():
            if sub.clean:
                state = c("OK", "good")
            elif sub.ok:
                state = c("OK, warnings: " + sub.problems(), "warn")
            else:
                state = c(sub.problems(), "bad")
            what = "group" if sub.dtype == "group" else f"{sub.dtype} {fmt_index(sub.shape)}"
            out.append(fit(f"{pad}[{path}] {what}: {state}"))
            details(sub, pad + "    ")
            if sub.arrays:
                members(sub, pad + "    ")
        for path, why in rep.skipped.items():
            out.append(fit(c(f"{pad}[{path}] skipped: {why}", "dim")))

    details(r, pad)
    members(r, pad)
    return "\n".join(out)
