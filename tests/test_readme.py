"""The README's examples run as shown.

Part: the README (the user's contract).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def test_python_examples_run_and_print_what_the_readme_shows():
    # a cluster, a bucket: not here
    blocks = [b for b in _blocks("python") if "SCHEDULER" not in b and "bucket" not in b]
    assert len(blocks) >= 4
    outputs = []
    for code in blocks:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, str(README), "exec"), {})
        outputs.append(buf.getvalue())
    shown = _blocks("text")[0]
    assert outputs[0] == shown
    assert outputs[1].strip() == "float64 array (2, 2): posinf 1 at (1, 1)"
    assert outputs[2].splitlines() == [
        "[0 1 0 0]",
        "[('nonfinite', (1,))]",
        "subtract invalid (1, 0, 0)",
        "[1] [False  True False False]",
        "overflow:float32 cast overflow",
    ]
    assert outputs[3].strip() == "17 1 (1, 1)"
    assert outputs[4].split() == ["(1,", "2)", "1"]
    assert outputs[5].splitlines() == ["1", "CastRisk(overflow=1, underflow=1)"]
    assert outputs[6].splitlines() == [  # checkpoints
        "['layers.0.attn.w', 'layers.0.mlp.w']",
        "layers.0.attn.w (2, 5)",
        "3",
    ]
    assert outputs[7] == shown_after(outputs[7], "### Shard sets")  # a set, a tar
    assert outputs[8].splitlines() == [
        "batch 4, element 0 ('image'), posinf at (3, 2) (posinf 1)",
        "5 guard: 6 batches checked, 1 bad (0 warned, 1 skipped)",
    ]
    nightly = outputs[-1].splitlines()
    assert nightly == ["True ['nan at (300000, 7)']", "[(2, 0)] 7", "True"]


def shown_after(output: str, heading: str) -> str:
    """The first text block after ``heading``: what its Python block prints."""
    text = README.read_text()
    return re.findall(r"```text\n(.*?)```", text[text.index(heading) :], flags=re.S)[0]


def test_quick_start_commands_are_verbatim():
    text = README.read_text()
    assert "pip install -e . && fastfinite demo" in text
    assert 'pip install -e ".[test]" && pytest' in text
