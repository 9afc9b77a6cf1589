"""The edges of severities and of reports read back (review of issue 42): the text of a diff,
missing chunks whose severity never depends on what is listed, the names of a merged group of
groups, reports whose severities or kinds disagree with the table, the one place of the
default fail set, the command line's --scheduler and output paths. Real files and stores."""

from __future__ import annotations

import numpy as np

import fastfinite
from fastfinite import cli
from fastfinite.changes import CountChange, diff_reports


def _main(capsys, *args) -> tuple[int, str]:
    """The command line in this process: its exit code and what it printed."""
    code = cli.main([str(a) for a in args])
    return code, capsys.readouterr().out


def _scan_twice(tmp_path, before: np.ndarray, after: np.ndarray) -> tuple[str, str]:
    """Reports of one .npy file before and after it changed, written as JSON."""
    data = str(tmp_path / "d.npy")
    paths = []
    for i, x in enumerate((before, after)):
        np.save(data, x)
        p = tmp_path / f"d{i}.json"
        p.write_text(fastfinite.scan(data).to_json())
        paths.append(str(p))
    return paths[0], paths[1]


# -- 1. the text of a diff -------------------------------------------------------------------


def test_a_count_change_reads_as_a_line():
    assert str(CountChange("nan", 0, 1)) == "nan 0 -> 1"
    assert str(CountChange("missing_chunk", 2, 0, "/a", "error")) == "/a: missing_chunk 2 -> 0"


def test_diff_prints_counts_as_text_not_reprs(tmp_path, capsys):
    x = np.zeros(4)
    y = x.copy()
    y[1] = np.nan
    old, new = _scan_twice(tmp_path, x, y)
    changes = diff_reports(*(fastfinite.ScanReport.from_json(open(p).read()) for p in (old, new)))
    assert str(changes).splitlines() == [
        f"changes from {tmp_path / 'd.npy'} to the newer", "  counts (1):", "    nan 0 -> 1",
        "  new (1):", "    nan at (1,)",
    ]  # fmt: skip
    code, out = _main(capsys, "diff", old, new)
    assert code == 1 and out == str(changes) + "\n" and "CountChange(" not in out
