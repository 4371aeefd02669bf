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


def make_exercise(nb: dict, name: str) -> dict:
    """Return the exercise version of solution notebook `nb` (a JSON dict)."""
    nb = json.loads(json.dumps(nb))  # deep copy
    heading = None
    for i, cell in enumerate(nb.get("cells", [])):
        text, where = _source(cell), f"{name}, cell {i}"
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if exercises/ differs from what would be generated")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    wanted = build(args.root)
    exdir = args.root / "exercises"
    stale = sorted(p for p in exdir.glob("*.ipynb") if p not in wanted) if exdir.exists() else []
    changed = [p for p, text in wanted.items()
               if not p.exists() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in changed:
            print(f"out of date: {p.relative_to(args.root)}")
        for p in stale:
            print(f"no solution for: {p.relative_to(args.root)}")
        if changed or stale:
            print("run: python3 scripts/make_exercises.py")
            return 1
        print(f"exercises/ is up to date ({len(wanted)} notebooks)")
        return 0
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
