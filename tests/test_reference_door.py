"""The door to ``fastfinite.reference``: production code reaches the oracle and the twins
only through ``compute/dispatch.py``, and the production form of each kind's predicate
(``compute.positions.kind_mask``) agrees with the twins' own (``reference.twins._risks``)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import fastfinite
from fastfinite.compute.positions import kind_mask
from fastfinite.compute.summary import ScanSpec
from fastfinite.model.casts import TARGETS
from fastfinite.model.kinds import N_KINDS
from fastfinite.reference.twins import _risks

PACKAGE = Path(fastfinite.__file__).parent
DOOR = PACKAGE / "compute" / "dispatch.py"


def _imported(path: Path, root: Path = PACKAGE) -> set[str]:
    """The absolute names of the modules ``path`` (a module of the package at ``root``)
    imports, relative imports resolved, ``from X import y`` counted as ``X`` and ``X.y``,
    at any depth of the module (imports inside functions too)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    package = parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, *([node.module] if node.module else [])])
            names.add(mod)
            names.update(f"{mod}.{a.name}" for a in node.names)
    return names


def _reaches_reference(path: Path, root: Path = PACKAGE) -> bool:
    return any(
        n == "fastfinite.reference" or n.startswith("fastfinite.reference.")
        for n in _imported(path, root)
    )


def test_only_dispatch_imports_the_reference():
    """No module of the package outside ``reference/`` but ``compute/dispatch.py`` imports
    ``fastfinite.reference`` (at the top or inside a function)."""
    outside = [
        p for p in PACKAGE.rglob("*.py") if "reference" not in p.relative_to(PACKAGE).parts[:1]
    ]
    assert len(outside) > 40  # the walk sees the package
    doors = sorted(str(p.relative_to(PACKAGE)) for p in outside if _reaches_reference(p))
    assert doors == ["compute/dispatch.py"], doors


def test_the_door_check_sees_every_form_of_import(tmp_path):
    """The check would fail on a second door, however it is written: relative at any
    level, absolute, inside a function; and passes modules that only name the word."""
    root = tmp_path / "fastfinite"
    (root / "report").mkdir(parents=True)
    doors = {
        "a.py": "def f():\n    from ..reference.twins import widen\n",
        "b.py": "from .. import reference\n",
        "c.py": "import fastfinite.reference.oracle\n",
        "d.py": "from fastfinite.reference import twins\n",
    }
    for name, text in doors.items():
        (root / "report" / name).write_text(text)
        assert _reaches_reference(root / "report" / name, root), name
    (root / "report" / "e.py").write_text('from ..kernels import slices_numpy\n"""reference"""\n')
    assert not _reaches_reference(root / "report" / "e.py", root)
    assert _reaches_reference(DOOR)


@pytest.mark.parametrize("casts", [(), ("float32",), ("float16", "bfloat16"), tuple(sorted(TARGETS))[:3]])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kind_mask_is_the_twins_predicate(casts, dtype):
    """Every counter slot's production mask equals the twins' on values planted at and
    beside every cast threshold, specials and random values (an unused slot: no value)."""
    rng = np.random.default_rng(7)
    planted = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 1e-300, 7e-46, 1e20, 3e38, 1e300]
    for t in TARGETS.values():
        for v in (t.overflow_threshold, t.underflow_threshold):
            planted += [v, float(np.nextafter(v, 0)), float(np.nextafter(v, np.inf)), -v]
    with np.errstate(over="ignore"):
        x = np.concatenate([np.array(planted), rng.standard_normal(500) * 10.0 ** rng.integers(-60, 60, 500)])  # fmt: skip
        x = x.astype(dtype)
    thr = ScanSpec(x.shape, x.dtype, casts).thresholds
    fin = np.isfinite(x)
    twin = _risks(x, fin, False, thr)
    for k in range(N_KINDS):
        want = twin[k] if twin[k] is not None else np.zeros(x.shape, bool)
        np.testing.assert_array_equal(kind_mask(x, k, thr), want, err_msg=f"slot {k}")
    assert sum(int(kind_mask(x, k, thr).sum()) for k in range(N_KINDS)) >= 3
