"""benchmarks/RESULTS.md and the one function that writes it (``_common.write_section``): a
script's ``--write`` replaces its own section between its markers and not one byte else,
appends it when absent, and refuses markers that are not in pairs; every section of the
real file belongs to a script that writes it, in the shape they all write."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import _common  # noqa: E402
from _common import MarkerError, results_section, sections, write_section  # noqa: E402

RESULTS = BENCHMARKS / "RESULTS.md"
SECTION = "## A new table\n\n| a | b |\n| --- | ---: |\n| x | 1 |\n"


def begin(owner: str) -> str:
    return f"<!-- {owner}: begin -->\n"


def end(owner: str) -> str:
    return f"<!-- {owner}: end -->\n"


def owners_in_scripts() -> dict[str, str]:
    """Each ``write_section("owner", ...)`` call in the scripts: owner -> script."""
    found = {}
    for script in sorted(BENCHMARKS.glob("*.py")):
        for owner in re.findall(r'write_section\(\s*"([^"]+)"', script.read_text()):
            found[owner] = script.name
    return found


@pytest.fixture
def results(tmp_path) -> Path:
    copy = tmp_path / "RESULTS.md"
    shutil.copyfile(RESULTS, copy)
    return copy


@pytest.mark.parametrize("owner", sorted(sections(RESULTS.read_text())))
def test_replacing_a_section_leaves_every_other_byte_identical(results, owner):
    old = results.read_text()
    head = old[: old.index(begin(owner)) + len(begin(owner))]
    tail = old[old.index(end(owner)) :]
    write_section(owner, SECTION, str(results))
    assert results.read_text() == head + SECTION + tail
    write_section(owner, "\n\n" + SECTION + "\n\n", str(results))  # blank lines trimmed
    assert results.read_text() == head + SECTION + tail


def test_the_whole_file_read_back_is_byte_identical_when_a_section_is_rewritten_as_it_was(
    results,
):
    old = results.read_bytes()
    text = old.decode()
    at = text.index(begin("bench_guard.py")) + len(begin("bench_guard.py"))
    write_section("bench_guard.py", text[at : text.index(end("bench_guard.py"))], str(results))
    assert results.read_bytes() == old


def test_a_missing_section_is_appended_within_its_markers(results):
    old = results.read_text()
    write_section("bench_new.py --fast", SECTION, str(results))
    assert results.read_text() == old + "\n" + begin("bench_new.py --fast") + SECTION + end(
        "bench_new.py --fast"
    )
    write_section("bench_new.py --fast", SECTION.replace("| x | 1 |", "| x | 2 |"), str(results))
    new = results.read_text()
    assert new.startswith(old) and "| x | 2 |" in new and "| x | 1 |" not in new


def test_a_file_without_a_final_newline_gets_one_before_the_appended_section(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\nsome text")
    write_section("bench_x.py", SECTION, str(path))
    assert path.read_text() == (
        "# Benchmark results\n\nsome text\n\n" + begin("bench_x.py") + SECTION + end("bench_x.py")
    )


BROKEN = {
    "a begin without its end": (f"# R\n\n{begin('a.py')}## A\n", "'a.py' has no end"),
    "an end without its begin": (f"# R\n\n## A\n{end('a.py')}", "'a.py' ends where it did not"),
    "a begin inside another section": (
        f"# R\n{begin('a.py')}## A\n{begin('b.py')}## B\n{end('b.py')}{end('a.py')}",
        "'b.py' begins inside 'a.py'",
    ),
    "an end of another owner": (f"# R\n{begin('a.py')}## A\n{end('b.py')}", "'b.py' ends where"),
    "an owner twice": (
        f"# R\n{begin('a.py')}## A\n{end('a.py')}{begin('a.py')}## A\n{end('a.py')}",
        "'a.py' has a section already",
    ),
    "a marker not alone on its line": (
        f"# R\n{begin('a.py')}## A\n<!-- a.py: end --> and more\n",
        "not a marker line",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
@pytest.mark.parametrize("owner", ["a.py", "c.py"])
def test_unbalanced_markers_are_refused_and_the_file_left_as_it_was(tmp_path, case, owner):
    text, message = BROKEN[case]
    path = tmp_path / "RESULTS.md"
    path.write_text(text)
    with pytest.raises(MarkerError, match=re.escape(message)) as err:
        write_section(owner, SECTION, str(path))
    assert "RESULTS.md, line " in str(err.value)
    assert path.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["RESULTS.md"]


def test_a_section_that_holds_a_marker_is_refused(results):
    old = results.read_text()
    with pytest.raises(MarkerError, match="'bench_guard.py''s section holds a marker line"):
        write_section("bench_guard.py", SECTION + end("bench_guard.py"), str(results))
    assert results.read_text() == old


def test_a_heading_already_outside_markers_is_refused_rather_than_doubled(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# R\n\n## A new table\n\nwritten by hand\n")
    with pytest.raises(MarkerError, match="'## A new table' outside 'bench_x.py''s markers"):
        write_section("bench_x.py", SECTION, str(path))
    assert path.read_text() == "# R\n\n## A new table\n\nwritten by hand\n"


@pytest.mark.parametrize("owner", ["", "a.py\nb", "a.py -->"])
def test_an_owner_that_cannot_be_a_marker_is_refused(results, owner):
    with pytest.raises(MarkerError, match="not a section owner"):
        write_section(owner, SECTION, str(results))


def test_every_section_of_results_is_delimited_by_markers_of_a_script_that_writes_it():
    text = RESULTS.read_text()
    lines = text.splitlines()
    found = sections(text)
    scripts = owners_in_scripts()
    assert sorted(found) == sorted(scripts)  # every script's section is there, and no other
    inside = set()
    for owner, (b, e) in found.items():
        script = BENCHMARKS / owner.split()[0]
        assert script.name == scripts[owner] and script.exists()
        body = lines[b + 1 : e]
        headings = [line for line in body if line.startswith("## ")]
        assert headings == [body[0]], owner  # one heading, first
        assert f'"{body[0]}"' in script.read_text(), (owner, body[0])  # the one it writes
        assert body[2].startswith("- Command: `python benchmarks/" + script.name), owner
        assert re.fullmatch(r"- Date: \d{4}-\d{2}-\d{2}", body[3]), owner
        assert body[4].startswith("- Machine: ") and body[5] == "", owner
        inside.update(range(b, e + 1))
    outside = [line for i, line in enumerate(lines) if i not in inside]
    assert not [line for line in outside if line.startswith("## ")]


def test_results_names_no_script_that_is_not_in_the_repository():
    text = RESULTS.read_text()
    assert "/tmp" not in text
    for name in set(re.findall(r"([\w./-]+\.py)\b", text)):
        assert (BENCHMARKS / Path(name).name).exists(), name


def test_a_written_section_has_the_shape_of_those_in_results(monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(BENCHMARKS / "bench_guard.py"), "--write"])
    monkeypatch.setattr(_common, "machine", lambda: "a CPU (znver9, AVX1024), 2 cores")
    text = results_section("## Guards (issue 7)", ["", "\n| a |\n| --- |\n| 1 |\n", ""], "About.")
    assert text == (
        "## Guards (issue 7)\n\n"
        "- Command: `python benchmarks/bench_guard.py --write`\n"
        f"- Date: {_common.time.strftime('%Y-%m-%d')}\n"
        "- Machine: a CPU (znver9, AVX1024), 2 cores\n\n"
        "About.\n\n| a |\n| --- |\n| 1 |\n"
    )
