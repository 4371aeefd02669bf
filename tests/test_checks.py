"""The exercise hints (issue 32): a ladder kept out of the check cells, and never the answer.

No kernel here: the ladder is tested on minigrad.checks directly, the hint table against the solution and check
cells of solutions/*.ipynb (tests/test_exercises.py runs every check on stubs, wrong and correct answers).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from minigrad import checks
from minigrad.checks import CheckError, hint, task
from minigrad.core.errors import InputError
from minigrad.course.hints import HINTS

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
BEGIN, END = re.compile(r"^\s*###\s*BEGIN SOLUTION\s*$"), re.compile(r"^\s*###\s*END SOLUTION\s*$")
TASK = re.compile(r'with task\("([^"]+)"(?:, lesson="(\d+)")?')
TOKEN = re.compile(r"\w+|[^\w\s]")
CODE = [re.compile(r"\breturn\s"), re.compile(r"\bdef\s"),
        re.compile(r"[\w\]]\s+[-+*/]?=\s+\S")]      # a statement x = ..., p.grad += ... (not a keyword axis=0)


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _tasks():
    """(hint key, solution code, check cell source) for every task of every solution notebook."""
    out = []
    for p in SOLUTIONS:
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            src = _source(cell)
            if cell["cell_type"] != "code" or "### BEGIN SOLUTION" not in src:
                continue
            check = next(_source(c) for c in cells[i + 1:] if c["cell_type"] == "code")
            name, lesson = TASK.search(check).groups()
            code, inside = [], False
            for line in src.split("\n"):
                inside = (inside or bool(BEGIN.match(line))) and not END.match(line)
                if inside and not BEGIN.match(line):
                    code.append(line)
            out.append((f"{lesson}-{name}" if lesson else name, "\n".join(code), check))
    return out


TASKS = _tasks()


def _texts(key):
    return list(HINTS[key].items())


@pytest.fixture(autouse=True)
def fresh_ladder():
    checks._SEEN.clear()
    yield
    checks._SEEN.clear()


def _failure(name, answer, lesson=None, **kw):
    with pytest.raises(CheckError) as info:
        with task(name, lesson=lesson) as t:
            t.equal(answer(), 4, "2 + 2", **kw)
    return info.value


def test_not_done_yet_says_what_to_do_and_gives_no_hint():
    def stub():
        raise NotImplementedError("Task 2.4: replace this line with your code")
    err = _failure("2.4", stub)
    assert "not done yet" in err.lines[0] and not err.hint and "hint" not in str(err)
    assert checks._SEEN.get("2.4", []) == []          # starting is not a failure: the ladder does not move


def test_first_failure_gets_the_nudge_of_its_mistake_then_the_stronger_hint():
    first = _failure("2.4", lambda: 5, mistake="x_squared")
    assert HINTS["2.4"]["x_squared"] in first.hint and "hint('2.4')" in first.hint
    other = _failure("2.4", lambda: 5)                 # a new, undiagnosed failure: the task's nudge
    assert HINTS["2.4"]["nudge"] in other.hint
    again = _failure("2.4", lambda: 5, mistake="x_squared")
    assert again.hint == HINTS["2.4"]["more"]


def test_asking_prints_the_stronger_hint_and_moves_the_ladder(capsys):
    hint(2.4)
    assert " ".join(capsys.readouterr().out.split()) == f"Task 2.4, hint: {HINTS['2.4']['more']}"
    assert _failure("2.4", lambda: 5).hint == HINTS["2.4"]["more"]
    hint("05-1")
    assert "Task 05-1" in capsys.readouterr().out
    with pytest.raises(InputError, match="no exercise task"):
        hint(7.7)


def test_lessons_with_plain_numbers_key_their_hints_by_lesson():
    assert HINTS["05-3"]["one_side"] in _failure("3", lambda: 5, lesson="05", mistake="one_side").hint


def test_a_crash_is_mapped_to_its_mistake_by_class_or_message():
    with pytest.raises(CheckError) as info:
        with task("1", lesson="05", crashes={"returned one Symbol": "not_list"}):
            raise ValueError("rebuild: rewrite(...) returned one Symbol")
    assert HINTS["05-1"]["not_list"] in info.value.hint and "your code raised ValueError" in str(info.value)


def test_messages_have_no_numpy_reprs_and_read_as_sentences():
    err = _failure("2.4", lambda: (__import__("numpy").float64(0.5), [__import__("numpy").int64(3)]))
    assert "np.float64" not in str(err) and "(0.5, [3])" in str(err)
    assert err.lines[0] == "✗ Task 2.4: wrong answer for 2 + 2"


def test_every_task_has_a_ladder_and_every_named_mistake_has_a_nudge():
    assert {key for key, _, _ in TASKS} == set(HINTS)
    for key, _, check in TASKS:
        assert {"nudge", "more"} <= set(HINTS[key]), key
        named = set(re.findall(r'(?:mistake=|else )"(\w+)"', check)) | set(re.findall(r'"(\w+)"(?= if )', check))
        named |= set(re.findall(r':\s*"(\w+)"', check.split("as t:")[0]))      # crashes={...: "mistake"}
        if 'f"call{' in check:
            named |= {f"call{k}" for k in range(1, 7)}
        assert named, f"task {key}: its check detects no mistake"
        assert named <= set(HINTS[key]), f"task {key}: no nudge for {named - set(HINTS[key])}"


def test_check_cells_hold_no_hint_text():
    for key, _, check in TASKS:
        assert not re.search(r"\bhint\s*=", check), f"task {key}: a hint is written in the check cell"


@pytest.mark.parametrize("key", sorted(HINTS))
def test_no_hint_is_solution_code(key):
    code = next(code for k, code, _ in TASKS if k == key)
    lines = {" ".join(line.split()) for line in code.split("\n") if len(TOKEN.findall(line)) >= 3}
    tokens = TOKEN.findall(code)
    runs = {tuple(tokens[i:i + 5]) for i in range(len(tokens) - 4)}
    for level, text in _texts(key):
        flat = " ".join(text.split())
        assert not [line for line in lines if line in flat], f"{key}.{level} quotes a solution line"
        words = TOKEN.findall(text)
        shared = [w for w in (tuple(words[i:i + 5]) for i in range(len(words) - 4)) if w in runs]
        assert not shared, f"{key}.{level} shares {' '.join(shared[0])!r} with the solution"
        assert not [p.pattern for p in CODE if p.search(text)], f"{key}.{level} reads like code: {text!r}"


def test_the_scan_catches_a_hint_that_is_the_answer():
    code = next(code for k, code, _ in TASKS if k == "2.4")
    tokens = TOKEN.findall(code)
    runs = {tuple(tokens[i:i + 5]) for i in range(len(tokens) - 4)}
    old = "t = np.tanh(v.data); return Value(t, ((v, 1 - t * t),))"      # the hint issue 32 quotes
    words = TOKEN.findall(old)
    assert any(tuple(words[i:i + 5]) in runs for i in range(len(words) - 4))
    assert all(p.search(old) for p in CODE[::2])


def test_every_hint_fits_the_six_line_message_uncut():
    for key, table in HINTS.items():
        for level, text in table.items():
            err = CheckError(key, "wrong answer for x", 1, 2, checks._ladder(key, level if level != "more" else None))
            assert not err.lines[-1].endswith("..."), f"{key}.{level} is cut off"
            checks._SEEN.clear()
