"""nbgrader: the exercises carry nbgrader metadata (from scripts/make_exercises.py)
and nbgrader can generate and autograde them.

Fast tests check the metadata (nbgrader's own validator, ids, points, locked
checks, idempotence); the slow one runs ``nbgrader generate_assignment`` and
``nbgrader autograde`` on exercise 01 in a temporary course directory: the
solution gets full marks, the student version nbgrader generates and our
exercises/ stub both get zero.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
GRADED = "01_computational_graphs_exercises.ipynb"  # the notebook the slow test grades


def _script():
    spec = importlib.util.spec_from_file_location("make_exercises", ROOT / "scripts" / "make_exercises.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------ metadata (fast)
def test_solutions_carry_current_nbgrader_metadata():
    """scripts/make_exercises.py writes the metadata into solutions/; what is on disk is what it writes."""
    stale = [p.name for p, text in _script().build_solutions(ROOT).items()
             if p.read_text(encoding="utf-8") != text]
    assert not stale, f"nbgrader metadata out of date in solutions/{stale}: run python3 scripts/make_exercises.py"


def test_nbgrader_metadata_is_idempotent_and_only_touches_metadata():
    mod = _script()
    for path in SOLUTIONS:
        nb = _load(path)
        once = mod.annotate(nb, path.name)
        assert mod.annotate(once, path.name) == once, f"{path.name}: a second run changes the metadata"
        for before, after in zip(nb["cells"], once["cells"]):
            strip = lambda c: {**c, "metadata": {k: v for k, v in c.get("metadata", {}).items() if k != "nbgrader"}}
            assert strip(before) == strip(after)


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_cells_are_answers_checks_or_read_only(folder):
    for sol in SOLUTIONS:
        path = ROOT / folder / sol.name
        cells, solution_cells = _load(path)["cells"], _load(sol)["cells"]
        ids = []
        for i, (cell, sol_cell) in enumerate(zip(cells, solution_cells)):
            meta = cell.get("metadata", {}).get("nbgrader")
            where = f"{folder}/{path.name}, cell {i}"
            assert meta is not None, f"{where}: no nbgrader metadata"
            assert meta["schema_version"] == 3 and meta["task"] is False, where
            ids.append(meta["grade_id"])
            if "### BEGIN SOLUTION" in _source(sol_cell) and cell["cell_type"] == "code":
                assert meta["solution"] and not meta["grade"] and not meta["locked"], f"{where}: answer cell"
                nxt = next(j for j in range(i + 1, len(cells)) if cells[j]["cell_type"] == "code")
                check = cells[nxt]["metadata"]["nbgrader"]
                assert check["grade"] and check["locked"] and not check["solution"], f"{where}: check after it"
                assert check["points"] > 0, where
            elif not meta["grade"]:
                assert meta["locked"] and not meta["solution"], f"{where}: read-only cell"
        assert len(ids) == len(set(ids)), f"{folder}/{path.name}: duplicate grade ids"


def test_exercise_checks_are_locked_for_jupyterlab():
    """A learner can neither edit nor delete a check cell in JupyterLab (issue 30): exercises/ carries the
    `editable`/`deletable` flags nbgrader's release sets, and nbgrader's LockCells (when installed) agrees."""
    for sol in SOLUTIONS:
        cells = _load(ROOT / "exercises" / sol.name)["cells"]
        for i, (cell, sol_cell) in enumerate(zip(cells, _load(sol)["cells"])):
            meta, where = cell["metadata"], f"exercises/{sol.name}, cell {i}"
            assert meta.get("deletable") is False, f"{where}: a learner can delete it"
            if meta["nbgrader"]["grade"] and not meta["nbgrader"]["solution"]:
                assert meta.get("editable") is False, f"{where}: a learner can edit this check cell"
            if "### BEGIN SOLUTION" in _source(sol_cell) and cell["cell_type"] == "code":
                assert meta.get("editable", True) is True, f"{where}: the answer cell must stay editable"
    try:
        from nbgrader.preprocessors import LockCells
    except ImportError:
        return  # the flags above are nbgrader's rule written out; the comparison needs nbgrader
    import nbformat
    for sol in SOLUTIONS:
        ours = nbformat.read(ROOT / "exercises" / sol.name, as_version=4)
        theirs = nbformat.read(ROOT / "exercises" / sol.name, as_version=4)
        for cell in theirs.cells:
            cell.metadata.pop("editable", None), cell.metadata.pop("deletable", None)
        theirs, _ = LockCells().preprocess(theirs, {})
        assert [c.metadata for c in ours.cells] == [c.metadata for c in theirs.cells], sol.name


def test_nbgrader_validator_accepts_every_notebook():
    pytest.importorskip("nbgrader", reason="nbgrader is not installed (it comes with requirements-test.txt)")
    import nbformat
    from nbgrader.nbgraderformat import MetadataValidator
    validator = MetadataValidator()
    for folder in ("solutions", "exercises"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            validator.validate_nb(nbformat.read(path, as_version=4))


# ------------------------------------------------------------------ generate_assignment + autograde (slow)
def _nbgrader(args, course: Path, env: dict) -> str:
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n" + "\n".join(out.splitlines()[-60:]),
                    pytrace=False)
    return out


@pytest.mark.slow
def test_nbgrader_autogrades_solution_full_and_stubs_zero(tmp_path):
    pytest.importorskip("nbgrader", reason="nbgrader is not installed (it comes with requirements-test.txt)")
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    (course / "source" / "ex01").mkdir(parents=True)
    shutil.copy2(ROOT / "solutions" / GRADED, course / "source" / "ex01" / GRADED)
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'minigrad'\n"
        f"c.CourseDirectory.root = {str(course)!r}\n"
        "c.ExecutePreprocessor.timeout = 300\n")
    bindir = str(Path(sys.executable).parent)  # nbgrader runs `alembic` from PATH; kernels run `python`
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_CONFIG", "IPYTHONDIR"))}
    env.update(PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter_config"),  # no user-wide nbgrader config
               IPYTHONDIR=str(tmp_path / "ipython"), MPLBACKEND="Agg")

    _nbgrader(["generate_assignment", "ex01", "--force"], course, env)
    release = course / "release" / "ex01" / GRADED
    released = _load(release)
    assert "### BEGIN SOLUTION" not in json.dumps(released), "generate_assignment left an answer in"

    submissions = {
        "solution": ROOT / "solutions" / GRADED,       # a learner who solved every task
        "release": release,                            # nbgrader's student version, untouched
        "exercise": ROOT / "exercises" / GRADED,       # our generated exercise, untouched
    }
    for student, nb in submissions.items():
        (course / "submitted" / student / "ex01").mkdir(parents=True)
        shutil.copy2(nb, course / "submitted" / student / "ex01" / GRADED)
    _nbgrader(["autograde", "ex01", "--create", "--force"], course, env)

    checks = [c for c in released["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        max_score = gb.find_assignment("ex01").max_score
        scores = {s: gb.find_submission("ex01", s).score for s in submissions}
        manual = {s: gb.find_submission("ex01", s).needs_manual_grade for s in submissions}
    print(f"nbgrader autograde {GRADED}: max {max_score}, scores {scores}")
    assert max_score == sum(c["metadata"]["nbgrader"]["points"] for c in checks) > 0
    assert scores == {"solution": max_score, "release": 0, "exercise": 0}
    assert not any(manual.values()), manual
