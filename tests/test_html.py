"""The HTML report: one self-contained page, its tables, escaping, its size, the CLI's
``--html``, Jupyter's summary, and the page in a real headless Chromium.

Part: ``fastfinite/report/html.py``, ``--html`` in ``fastfinite/cli/``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from types import SimpleNamespace

import h5py
import numpy as np
import pandas as pd
import pytest

import fastfinite
from fastfinite.errors import InvalidArgumentError
from fastfinite.indices import fmt_index

from .helpers import assert_one_line_error, run_cli

CHROMIUM = "/usr/bin/chromium"
EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


class Page(HTMLParser):
    """What a browser would build of the page: its tables (by id: rows of cell texts), its
    elements with attributes, the text of its scripts."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.heads: dict[str, list[str]] = {}
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._in_head = False
        self._script: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a))
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table], self.heads[self._table] = [], []
        elif tag == "thead":
            self._in_head = True
        elif tag == "tbody":
            self._in_head = False
        elif tag == "tr" and self._table and not self._in_head:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []
        elif tag == "script":
            self._script = []

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._cell is not None and self._table:
            text = "".join(self._cell)
            if self._in_head:
                self.heads[self._table].append(text)
            else:
                self.tables[self._table][-1].append(text)
            self._cell = None
        elif tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self._script.append(data)
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def column(self, tid: str, head: str) -> list[str]:
        i = self.heads[tid].index(head)
        return [row[i] for row in self.tables[tid]]


def _planted() -> np.ndarray:
    """(400, 8): NaN at (10, 1), +inf at (399, 2), -inf at (3, 2), a float32 overflow at
    (50, 6), column 3 constant, an outlier at (200, 4)."""
    x = np.random.default_rng(5).standard_normal((400, 8))
    x[10, 1] = np.nan
    x[399, 2], x[3, 2] = np.inf, -np.inf
    x[50, 6] = 1e300
    x[:, 3] = 1.5
    x[200, 4] = 60.0
    return x


def _num(v) -> str:
    v = float(v)
    return (
        "nan" if np.isnan(v) else ("inf" if v == np.inf else "-inf" if v == -np.inf else f"{v:.6g}")
    )


def test_the_page_holds_the_summary_findings_locations_and_slices(tmp_path):
    x = _planted()
    report = fastfinite.scan(x, by=1)
    out = tmp_path / "r.html"
    assert report.to_html(out) == os.fspath(out)
    page = Page(out.read_text(encoding="utf-8"))
    ids = [a.get("id") for tag, a in page.elements if tag == "span" and a.get("id")]
    assert "status" in ids
    status = [t for t in page.text if t in ("PROBLEMS", "WARNINGS", "OK")]
    assert status[0] == "PROBLEMS"
    found = {(row[0], row[1]): int(row[2]) for row in page.tables["found"]}
    assert found == {
        ("error", "nan"): 1,
        ("error", "posinf"): 1,
        ("error", "neginf"): 1,
        ("error", "overflow:float32"): 1,
        ("error", "nonfinite"): 2,
        ("error", "sum_overflow:float32"): 1,  # the 1e300 in column 6
        ("error", "variance_overflow:float32"): 1,
        ("warning", "zero_variance"): 1,
        ("warning", "outlier"): 2,
    }
    assert page.tables["findings"] == [
        [f.severity, f.kind, fmt_index(f.where), f.message] for f in report.findings
    ]
    assert [(r[0], r[2], r[3]) for r in page.tables["locations"]] == [
        ("neginf", "(3, 2)", "-inf"),
        ("nan", "(10, 1)", "nan"),
        ("overflow:float32", "(50, 6)", "1e+300"),
        ("posinf", "(399, 2)", "inf"),
    ]
    df = report.slices.to_pandas()
    rows = page.tables["slices"]
    assert page.heads["slices"] == ["slice", *df.columns]
    order = [1, 2, 3, 4, 6, 0, 5, 7]  # the slices with findings first
    assert [int(r[0]) for r in rows] == order
    for r, (_, want) in zip(rows, df.loc[order].iterrows()):
        assert r[1:5] == [str(int(want[c])) for c in ("count", "nan", "posinf", "neginf")]
        assert r[5:10] == [_num(want[c]) for c in ("mean", "std", "min", "max", "max_z")]
        assert r[10] == want["findings"]
    six = "sum_overflow:float32, variance_overflow:float32, outlier"
    want = ["nonfinite", "nonfinite", "zero_variance", "outlier", six, "", "", ""]
    assert page.column("slices", "findings") == want
    # the picture is inline, and nothing on the page is fetched from anywhere
    imgs = [a for tag, a in page.elements if tag == "img"]
    assert len(imgs) == 1 and imgs[0]["src"].startswith("data:image/png;base64,")
    for _, a in page.elements:
        for key in ("src", "href", "action", "srcset"):
            assert a.get(key) is None or a[key].startswith("data:"), a
    assert "@import" not in out.read_text() and "url(" not in out.read_text()


def test_a_clean_and_a_warning_report_say_so(tmp_path):
    clean = Page(fastfinite.scan(np.arange(12.0).reshape(3, 4)).to_html(picture=False))
    assert [t for t in clean.text if t in ("PROBLEMS", "WARNINGS", "OK")] == ["OK"]
    assert "found" not in clean.tables and "No findings." in clean.text
    assert not [a for tag, a in clean.elements if tag == "img"]
    x = np.random.default_rng(0).standard_normal((50, 3))
    x[:, 1] = 4.0
    warn = Page(fastfinite.scan(x, by=1).to_html(picture=False))
    assert [t for t in warn.text if t in ("PROBLEMS", "WARNINGS", "OK")] == ["WARNINGS"]
    assert warn.tables["found"] == [["warning", "zero_variance", "1"]]


def test_names_from_files_are_escaped_everywhere(tmp_path):
    frame = pd.DataFrame(
        {EVIL: [1.0, np.nan, 3.0], "b": [1.0, 2.0, np.inf]}, index=[EVIL, "r", "s"]
    )
    path = tmp_path / "evil.h5"
    with h5py.File(path, "w") as f:
        f[EVIL.replace("/", "|")] = np.array([1.0, np.nan])
        f["ok"] = np.ones(3)
    for report in (fastfinite.scan(frame, by=-1), fastfinite.scan(str(path))):
        report.name = EVIL
        text = report.to_html()
        page = Page(text)
        assert len(page.scripts) == 1 and "alert" not in page.scripts[0]  # ours alone
        assert not [a for tag, a in page.elements if tag == "img" and a.get("src") == "x"]
        assert not [a for _, a in page.elements if any(k.startswith("on") for k in a)]
        assert EVIL in page.text  # shown as text
        assert EVIL in "".join(page.text)
        summary = Page(report._repr_html_())
        assert not summary.scripts and EVIL in summary.text
        assert not [a for _, a in summary.elements if any(k.startswith("on") for k in a)]
    slices = Page(fastfinite.scan(frame, by=-1).to_html(picture=False))
    assert slices.column("slices", "column") == [EVIL, "b"]
    locations = Page(fastfinite.scan(frame).to_html(picture=False)).tables["locations"]
    assert any(f"column={EVIL}" in cell for row in locations for cell in row)


def test_tables_are_capped_with_a_line_saying_how_many_were_cut():
    x = np.random.default_rng(2).standard_normal((30, 2000))
    x[4, 1500] = np.nan
    x[:, 1700] = 3.0
    x[np.arange(30), np.arange(30)] = np.inf  # 30 +inf
    report = fastfinite.scan(x, by=1, max_locations=1000)
    text = report.to_html(max_rows=20, picture=False)
    page = Page(text)
    shown = [int(r[0]) for r in page.tables["slices"]]
    assert len(shown) == 20
    assert shown == list(range(20))  # 32 slices with findings: the first 20 of them
    assert all(page.column("slices", "findings"))
    cut = (
        "showing 20 of 2000 slices: 1980 not shown (shown: the first 20 of the 32 with "
        "findings); report.slices_frame() has them all"
    )
    assert cut in page.text
    wider = Page(report.to_html(max_rows=40, picture=False))
    shown = [int(r[0]) for r in wider.tables["slices"]]
    assert shown[:32] == [*range(30), 1500, 1700]  # flagged first, then the others
    assert shown[32:] == [30, 31, 32, 33, 34, 35, 36, 37]
    assert "(shown: all 32 with findings)" in "".join(wider.text)
    assert len(page.tables["locations"]) == 20
    assert "showing 20 of 31 recorded locations: 11 not shown; report.locations has them all" in (
        page.text
    )
    assert len(page.tables["findings"]) == 20
    big = fastfinite.scan(np.random.default_rng(0).standard_normal((10, 100_000)), by=1)
    assert len(big.to_html(picture=False)) < 400_000  # 500 of 1e5 slices
    with pytest.raises(InvalidArgumentError, match="max_rows must be a whole number >= 1"):
        report.to_html(max_rows=0)


def test_a_group_has_an_overview_and_a_section_per_array(tmp_path):
    path = tmp_path / "g.h5"
    a = np.random.default_rng(0).standard_normal((40, 3))
    a[7, 2] = np.nan
    with h5py.File(path, "w") as f:
        f["train/x"] = a
        f["train/y"] = np.ones((40, 3))
        f["labels"] = np.array([b"a", b"b"])
    report = fastfinite.scan(str(path), by=1)
    page = Page(report.to_html())
    assert page.tables["arrays"] == [
        ["/train/x", "float64 (40, 3)", "PROBLEMS", "nan 1, other findings 1"],
        ["/train/y", "float64 (40, 3)", "WARNINGS", "other findings 3"],
    ]
    assert page.tables["skipped"][0][0] == "/labels"
    sections = [a["id"] for tag, a in page.elements if tag == "section"]
    assert sections == ["array-0", "array-1"]
    assert page.tables["a0-locations"] == [["nan", "error", "(7, 2)", "nan"]]
    assert page.column("a0-slices", "findings") == ["nonfinite", "", ""]
    assert page.column("a0-slices", "slice") == ["2", "0", "1"]
    assert page.column("a1-slices", "findings") == ["zero_variance"] * 3
    imgs = [x for tag, x in page.elements if tag == "img"]
    assert len(imgs) == 2  # one picture per array with something found
    summary = Page(report._repr_html_())
    assert "/train/x" in summary.text and "PROBLEMS" in summary.text
    assert not [x for tag, x in summary.elements if tag == "img"]


def test_repr_html_is_the_compact_summary():
    report = fastfinite.scan(_planted(), by=1)
    page = Page(report._repr_html_())
    assert page.text.count("PROBLEMS") == 1
    assert not [a for tag, a in page.elements if tag in ("img", "script")]
    assert "(10, 1)" in page.text and "overflow:float32" in page.text
    assert len(report._repr_html_()) < 5000


def test_cli_writes_the_page(tmp_path):
    x = _planted()
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "report.html"
    r = run_cli("scan", tmp_path / "x.npy", "--by", "1", "--html", out)
    assert r.returncode == 1, r.stderr
    assert f"html written to {out}" in r.stdout
    page = Page(out.read_text())
    assert page.column("slices", "findings")[2] == "zero_variance"
    assert page.column("slices", "slice")[2] == "3"
    r = run_cli("scan", tmp_path / "x.npy", "--html", out, "--json", "-", "-q")
    assert r.returncode == 1 and r.stdout.startswith("{") and "html written" not in r.stdout


def test_cli_checks_the_html_path_before_the_scan(tmp_path):
    missing_input = tmp_path / "not-there.npy"  # would fail to open: the path fails first
    assert_one_line_error(
        run_cli("scan", missing_input, "--html", tmp_path / "no" / "r.html"),
        "--html", "does not exist",
    )  # fmt: skip
    assert_one_line_error(run_cli("scan", missing_input, "--html", tmp_path), "--html", "directory")
    np.save(tmp_path / "x.npy", np.ones(3))
    same = tmp_path / "r.out"
    assert_one_line_error(
        run_cli("scan", tmp_path / "x.npy", "--json", same, "--html", same),
        "--json and --html both write",
    )  # fmt: skip
    assert not same.exists()


# -- a real headless browser ------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"{CHROMIUM} is absent: apt-get install -y chromium (Debian's Chromium) to run "
    "the page in a real headless browser",
)


def _chromium(tmp_path, url: str, *args: str) -> SimpleNamespace:
    """Debian's Chromium, headless, in a fresh profile, with no network (every host resolves
    to nothing): its ``stdout``, ``stderr`` and the ``requests`` the page made (the URLs
    its network log holds for the page's file:// origin, not Chromium's own calls home)."""
    n = len(os.listdir(tmp_path))
    profile, netlog = tmp_path / f"profile-{n}", tmp_path / f"net-{n}.json"
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
        "--host-resolver-rules=MAP * ~NOTFOUND", f"--log-net-log={netlog}", *args, url,
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-2000:]
    events = json.loads(netlog.read_text())["events"]
    requests = sorted(
        {
            e["params"]["url"]
            for e in events
            if str(e.get("params", {}).get("network_isolation_key", "")).startswith("file://")
        }
    )
    return SimpleNamespace(stdout=r.stdout, stderr=r.stderr, requests=requests)


def _console(stderr: str) -> list[str]:
    """The page's console messages and uncaught errors, as Chromium logs them."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def _pixels(path) -> np.ndarray:
    image = pytest.importorskip("PIL.Image")
    with image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _with_image_check(text: str) -> str:
    """The page, with a test script that writes, once loaded, each image's decoded width
    into ``<html data-images=...>`` (what ``--dump-dom`` shows)."""
    probe = (
        "<script>window.addEventListener('load', function () { document.documentElement"
        ".setAttribute('data-images', Array.prototype.map.call(document.images, function (i)"
        " { return i.naturalWidth; }).join(',')); });</script>"
    )
    return text.replace("</body>", probe + "</body>")


@needs_chromium
def test_in_chromium_the_page_loads_without_console_errors_and_sorts(tmp_path):
    x = _planted()
    report = fastfinite.scan(x, by=1)
    out = tmp_path / "r.html"
    out.write_text(_with_image_check(report.to_html()), encoding="utf-8")
    r = _chromium(tmp_path, out.as_uri() + "#sort=slices:max_z:descending", "--dump-dom")
    assert _console(r.stderr) == [], _console(r.stderr)
    assert r.requests == []  # nothing fetched: the page is self-contained
    dom = Page(r.stdout)
    root = dict(next(a for tag, a in dom.elements if tag == "html"))
    assert root.get("data-sorter") == "ready"  # the sorter ran
    widths = root["data-images"].split(",")
    assert len(widths) == 1 and int(widths[0]) > 500  # the picture decoded
    df = report.slices.to_pandas()
    order = df["max_z"].sort_values(ascending=False, na_position="last").index.tolist()
    assert [int(v) for v in dom.column("slices", "slice")] == order  # sorted by the browser
    sorted_by = [a for tag, a in dom.elements if tag == "th" and a.get("aria-sort")]
    assert [(a["data-col"], a["aria-sort"]) for a in sorted_by] == [("max_z", "descending")]
    # the findings are in what the browser built
    assert [r[1] for r in dom.tables["locations"]] == ["error"] * 4
    assert "PROBLEMS" in dom.text


@needs_chromium
def test_in_chromium_a_console_error_or_a_fetch_would_be_seen(tmp_path):
    """The checks above can fail: a page that throws, or that loads anything, is caught."""
    bad = tmp_path / "bad.html"
    page = fastfinite.scan(np.ones(3)).to_html(picture=False)
    bad.write_text(page.replace("</body>", "<script>notDefined();</script></body>"))
    lines = _console(_chromium(tmp_path, bad.as_uri(), "--dump-dom").stderr)
    assert any("Uncaught ReferenceError: notDefined" in line for line in lines), lines
    fetch = tmp_path / "fetch.html"
    fetch.write_text(page.replace("</body>", '<img src="https://example.com/x.png"></body>'))
    assert _chromium(tmp_path, fetch.as_uri(), "--dump-dom").requests == [
        "https://example.com/x.png"
    ]


@needs_chromium
def test_in_chromium_the_screenshot_shows_the_problems(tmp_path):
    bad_png, clean_png = tmp_path / "bad.png", tmp_path / "clean.png"
    for report, png in (
        (fastfinite.scan(_planted(), by=1), bad_png),
        (fastfinite.scan(np.arange(40.0).reshape(8, 5), by=1), clean_png),
    ):
        page = tmp_path / (png.stem + ".html")
        report.to_html(page)
        r = _chromium(tmp_path, page.as_uri(), f"--screenshot={png}", "--window-size=1200,1400")
        assert _console(r.stderr) == [] and r.requests == []
    bad, clean = _pixels(bad_png), _pixels(clean_png)
    assert bad.shape == (1400, 1200, 3)

    def share(im, rgb) -> float:
        return float(np.all(im == rgb, axis=-1).mean())

    red, green = (0xB9, 0x1C, 0x1C), (0x15, 0x80, 0x3D)  # the PROBLEMS and OK badges
    assert share(bad, red) > 5e-4 and share(bad, green) == 0
    assert share(clean, green) > 5e-4 and share(clean, red) == 0
    # not blank: the tables are drawn (much non-white: 4% of this page's top, with the
    # picture or without) and the picture too (its marks and labels: 3,700 colours; 1,100
    # without it)
    assert len(np.unique(bad.reshape(-1, 3), axis=0)) > 2000
    assert np.mean(np.any(bad < 200, axis=-1)) > 0.03


def test_the_errstate_replay_is_a_table():
    x = np.ones((3, 4))
    x[1, 2] = 1e39  # finite in float64, inf in float32: the replay's cast overflows
    report = fastfinite.scan(x, by=0, localize=True)
    assert report.localized
    page = Page(report.to_html(picture=False))
    assert page.tables["replay"] == [
        [x.op, x.error, fmt_index(x.index), fmt_index(x.where), x.message] for x in report.localized
    ]
    assert "replay" not in Page(fastfinite.scan(np.ones(3)).to_html(picture=False)).tables
