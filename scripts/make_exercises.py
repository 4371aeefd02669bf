#!/usr/bin/env python3
"""Build exercises/ from solutions/ (exercises are never edited by hand).

    python3 scripts/make_exercises.py           regenerate every exercises/*.ipynb
    python3 scripts/make_exercises.py --check   exit 1 if exercises/ is out of date

In a solution notebook, each task's answer sits between two marker lines::

    # Task 1.2: sum over paths            <- optional; names the task in the stub
    def dy_dw(w, x):
        ### BEGIN SOLUTION
        return (w + 1) + (w + x)
        ### END SOLUTION

The generator replaces everything from BEGIN to END (markers included) with
``raise NotImplementedError("Task 1.2: sum over paths: ...")`` at the BEGIN
marker's indentation, keeps the code before and after the markers, clears all
outputs and execution counts, and writes JSON deterministically (sorted keys,
indent 1, trailing newline), so ``--check`` is a byte-for-byte comparison.
The task name comes from the first ``# Task ...:`` comment in the cell, or
else from the nearest markdown heading above it that starts with "Task".
In markdown cells the text between the markers becomes "*Your answer here.*".

nbgrader: every cell gets ``metadata.nbgrader`` (schema 3), computed from the
solutions, written back into solutions/*.ipynb (cell metadata only; the rest
of the file is untouched) and copied into exercises/, so instructors can run
``nbgrader generate_assignment`` on a solution notebook and ``autograde`` the
learners' copies:

- a code cell with BEGIN/END SOLUTION markers is an *autograded answer*
  (``solution``), grade id ``task_<n>`` (``<n>`` from "Task 1.2" -> ``1_2``);
- the code cell after it is its *check* (autograder test): ``grade``,
  ``locked``, ``points`` (1 unless the solution notebook already gives that
  cell other points), grade id ``check_<n>``;
- a markdown cell with the markers is a *manually graded answer*
  (``solution`` + ``grade``, nbgrader's rule for markdown), id ``answer_<n>``;
- every other cell is *read-only* (``locked``), id ``locked_<n>-<k>``: the
  k-th such cell of task <n> (``locked_intro-<k>`` before the first task).

In exercises/ the cells are also locked for JupyterLab as nbgrader's release
(its LockCells preprocessor) locks them: answer cells ``deletable: false``;
checks and read-only cells ``deletable: false`` and ``editable: false``.

Running the script again changes nothing (ids and points derive from the
notebooks). ``--check`` also fails when the solutions' metadata is stale.
Pure standard library.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = re.compile(r"^(?P<indent>[ \t]*)#{3}\s*BEGIN SOLUTION\s*$")
END = re.compile(r"^[ \t]*#{3}\s*END SOLUTION\s*$")
TASK_COMMENT = re.compile(r"^\s*#\s*(?P<name>Task\b[^:\n]*(:[^\n]*)?)$", re.IGNORECASE)
TASK_HEADING = re.compile(r"^\s*#+\s*(?P<name>Task\b.*)$", re.IGNORECASE | re.MULTILINE)


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _task_name(text: str, heading: str | None, where: str) -> str:
    for line in text.splitlines():
        m = TASK_COMMENT.match(line)
        if m:
            return m.group("name").strip()
    return heading or where


def _strip(text: str, stub, where: str) -> str:
    """Replace every BEGIN..END block in `text` with stub(indent)."""
    out, inside, lines = [], False, text.split("\n")
    for lineno, line in enumerate(lines, 1):
        if BEGIN.match(line):
            if inside:
                raise SystemExit(f"{where}, line {lineno}: nested '### BEGIN SOLUTION'")
            inside = True
            out.append(stub(BEGIN.match(line).group("indent")))
        elif END.match(line):
            if not inside:
                raise SystemExit(f"{where}, line {lineno}: '### END SOLUTION' without a BEGIN")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise SystemExit(f"{where}: '### BEGIN SOLUTION' is never closed by '### END SOLUTION'")
    return "\n".join(out)


NBGRADER_SCHEMA = 3
TASK_NUMBER = re.compile(r"\bTask\s+(?P<num>[0-9]+(?:\.[0-9]+)*)", re.IGNORECASE)


def _has_solution(text: str) -> bool:
    return any(BEGIN.match(line) for line in text.split("\n"))


def _slug(task: str) -> str:
    m = TASK_NUMBER.search(task)
    raw = m.group("num") if m else task
    return re.sub(r"[^A-Za-z0-9]+", "_", raw).strip("_").lower()[:40] or "task"


def _nbgrader(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked,
            "schema_version": NBGRADER_SCHEMA, "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def nbgrader_metadata(nb: dict, name: str) -> list[dict]:
    """The nbgrader cell metadata of each cell of solution notebook `nb`."""
    cells = nb.get("cells", [])
    metas, used = [], set()
    section, counter, pending_check, heading = "intro", 0, None, None

    def unique(grade_id: str) -> str:
        out, k = grade_id, 2
        while out in used:
            out, k = f"{grade_id}_{k}", k + 1
        used.add(out)
        return out

    def points(i: int) -> float:
        old = cells[i].get("metadata", {}).get("nbgrader", {}).get("points")
        valid = isinstance(old, (int, float)) and not isinstance(old, bool) and old >= 0
        return old if valid else 1

    for i, cell in enumerate(cells):
        text, kind = _source(cell), cell.get("cell_type")
        if kind == "markdown":
            found = TASK_HEADING.findall(text)
            if found:
                heading = found[-1].strip()
                section, counter = _slug(heading), 0
        if kind == "code" and _has_solution(text):
            task = _slug(_task_name(text, heading, f"cell {i}"))
            if task != section:
                section, counter = task, 0
            metas.append(_nbgrader(unique(f"task_{task}"), solution=True))
            pending_check = task
        elif kind == "code" and pending_check is not None:
            metas.append(_nbgrader(unique(f"check_{pending_check}"), grade=True, locked=True,
                                   points=points(i)))
            pending_check = None
        elif kind == "markdown" and _has_solution(text):
            metas.append(_nbgrader(unique(f"answer_{section}"), solution=True, grade=True, points=points(i)))
        else:
            counter += 1
            metas.append(_nbgrader(unique(f"locked_{section}-{counter}"), locked=True))
    return metas


def annotate(nb: dict, name: str) -> dict:
    """A copy of solution notebook `nb` whose cells carry their nbgrader metadata."""
    nb = json.loads(json.dumps(nb))  # deep copy
    for cell, meta in zip(nb.get("cells", []), nbgrader_metadata(nb, name)):
        cell.setdefault("metadata", {})["nbgrader"] = meta
    return nb


def lock(meta: dict) -> None:
    """Set JupyterLab's `deletable`/`editable` in cell metadata `meta` from its nbgrader part, as
    nbgrader's LockCells does on release: a learner can neither delete a check nor edit it.

    >>> m = {"nbgrader": {"grade": True, "solution": False, "locked": True}}; lock(m); m["editable"]
    False
    """
    nbg = meta["nbgrader"]
    meta["deletable"] = False                     # every cell of ours is an answer, a check or read-only
    if not nbg["solution"] and (nbg["grade"] or nbg["locked"]):
        meta["editable"] = False


def make_exercise(nb: dict, name: str) -> dict:
    """Return the exercise version of solution notebook `nb` (a JSON dict),
    nbgrader metadata included."""
    nb = annotate(nb, name)
    heading = None
    for i, cell in enumerate(nb.get("cells", [])):
        text, where = _source(cell), f"{name}, cell {i}"
        lock(cell["metadata"])
        if cell.get("cell_type") == "markdown":
            found = TASK_HEADING.findall(text)
            heading = found[-1].strip() if found else heading
            if BEGIN.search(text) or "BEGIN SOLUTION" in text:
                text = _strip(text, lambda ind: f"{ind}*Your answer here.*", where)
        elif cell.get("cell_type") == "code":
            task = _task_name(text, heading, where)
            msg = json.dumps(f"{task}: replace this line with your code")
            text = _strip(text, lambda ind: f"{ind}raise NotImplementedError({msg})", where)
            cell["outputs"] = []
            cell["execution_count"] = None
            meta = cell.get("metadata", {})
            for key in ("execution", "collapsed", "scrolled"):
                meta.pop(key, None)
        cell["source"] = text.splitlines(keepends=True)
    return nb


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def build(root: Path = ROOT) -> dict[Path, str]:
    """Map each exercises/ path to the text it should contain."""
    wanted = {}
    for sol in sorted((root / "solutions").glob("*.ipynb")):
        nb = json.loads(sol.read_text(encoding="utf-8"))
        wanted[root / "exercises" / sol.name] = dumps(make_exercise(nb, sol.name))
    return wanted


def build_solutions(root: Path = ROOT) -> dict[Path, str]:
    """Map each solutions/ path to its text with current nbgrader cell metadata
    (everything else in the file stays as it is)."""
    return {sol: dumps(annotate(json.loads(sol.read_text(encoding="utf-8")), sol.name))
            for sol in sorted((root / "solutions").glob("*.ipynb"))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if exercises/ differs from what would be generated")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    wanted = build(args.root)
    solutions = build_solutions(args.root)
    exdir = args.root / "exercises"
    stale = sorted(p for p in exdir.glob("*.ipynb") if p not in wanted) if exdir.exists() else []
    changed = [p for p, text in wanted.items()
               if not p.exists() or p.read_text(encoding="utf-8") != text]
    annotated = [p for p, text in solutions.items() if p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in annotated:
            print(f"nbgrader metadata out of date: {p.relative_to(args.root)}")
        for p in changed:
            print(f"out of date: {p.relative_to(args.root)}")
        for p in stale:
            print(f"no solution for: {p.relative_to(args.root)}")
        if changed or stale or annotated:
            print("run: python3 scripts/make_exercises.py")
            return 1
        print(f"exercises/ and the solutions' nbgrader metadata are up to date ({len(wanted)} notebooks)")
        return 0
    for p in annotated:
        p.write_text(solutions[p], encoding="utf-8")
        print(f"wrote nbgrader metadata into {p.relative_to(args.root)}")
    exdir.mkdir(exist_ok=True)
    for p in changed:
        p.write_text(wanted[p], encoding="utf-8")
        print(f"wrote {p.relative_to(args.root)}")
    for p in stale:
        p.unlink()
        print(f"removed {p.relative_to(args.root)} (no matching solution)")
    print(f"{len(wanted)} exercise notebooks, {len(changed)} updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
