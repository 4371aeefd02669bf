"""Exercises: exercises/ is generated from solutions/, and every check cell
fails on the generated stub and passes on the solution.

A *check cell* is the code cell that follows a cell holding a
``### BEGIN SOLUTION`` marker (see scripts/make_exercises.py).
"""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
EXPECTED_STUB_ERRORS = {"NotImplementedError", "AssertionError"}

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def _load_script():
    spec = importlib.util.spec_from_file_location("make_exercises", ROOT / "scripts" / "make_exercises.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def check_cells(nb) -> list[int]:
    """Indices of the check cells: the first code cell after each task cell."""
    cells, out = nb["cells"], []
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code" and "### BEGIN SOLUTION" in _source(cell):
            nxt = next((j for j in range(i + 1, len(cells)) if cells[j]["cell_type"] == "code"), None)
            assert nxt is not None and "### BEGIN SOLUTION" not in _source(cells[nxt]), \
                f"cell {i}: a task cell must be followed by its check cell"
            out.append(nxt)
    return out


def run(path: Path, monkeypatch):
    """Execute a notebook in a fresh kernel (errors allowed); return {cell index: error name}."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = {}
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errors[i] = (out["ename"], out["evalue"])
    return nb, errors


def test_exercises_are_generated_from_solutions():
    mod = _load_script()
    wanted = mod.build(ROOT)
    assert wanted, "no solution notebooks found in solutions/"
    stale = [p.name for p, text in wanted.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    assert not stale, f"exercises/ is out of date for {stale}: run python3 scripts/make_exercises.py"
    extra = sorted(p.name for p in (ROOT / "exercises").glob("*.ipynb") if p not in wanted)
    assert not extra, f"exercises/ has notebooks with no solution: {extra}"


def test_course_has_enough_tasks():
    counts = {p.name: len(check_cells(json.loads(p.read_text(encoding="utf-8")))) for p in SOLUTIONS}
    assert all(n >= 4 for n in counts.values()), f"every exercise notebook needs >= 4 tasks: {counts}"


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=lambda p: p.stem)
def test_checks_fail_on_stubs_and_pass_on_solutions(solution, monkeypatch):
    exercise = ROOT / "exercises" / solution.name
    assert exercise.exists(), f"{exercise.name} missing: run python3 scripts/make_exercises.py"
    checks = check_cells(json.loads(solution.read_text(encoding="utf-8")))
    assert checks, f"{solution.name} has no tasks"

    _, sol_errors = run(solution, monkeypatch)
    assert not sol_errors, f"the solution notebook must run clean; errors in cells {sol_errors}"

    _, ex_errors = run(exercise, monkeypatch)
    not_failing = [i for i in checks if i not in ex_errors]
    assert not not_failing, f"check cells {not_failing} pass on the stub: they must fail until solved"
    wrong = {i: ex_errors[i] for i in checks if ex_errors[i][0] not in EXPECTED_STUB_ERRORS}
    assert not wrong, (f"check cells must fail with NotImplementedError (from the stub) or a friendly "
                       f"AssertionError, got {wrong}")
