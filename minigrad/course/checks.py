"""Exercise checks that teach: a failing check shows one short message, not a traceback.

A check cell wraps its tests in ``with task(...)``::

    from minigrad.checks import task, hint

    with task('1.1') as t:
        got = dz_da(1.0, 2.0)
        t.close(got, 6.0, 'dz_da(1.0, 2.0)', mistake='only_u' if got == 2.0 else None)

On success the block prints ``✓ Task 1.1``. A failing test raises `CheckError` (an AssertionError) saying
what was expected, what came back and a hint; IPython shows it in at most six lines (through
``_render_traceback_``) instead of a traceback. An answer that is not written yet (``NotImplementedError``)
gets no hint, only what to do; an answer that crashes inside the block names the line of the learner's code
that failed (``%tb`` in the next cell still shows the full traceback).

The hints form a ladder kept in minigrad/course/hints.py (not in the check cell, so the stronger ones cannot be read
before they are asked for): a failure gets the nudge for the mistake its test detected (``mistake=``), or the
task's general nudge; the same task failing again the same way, or ``hint('1.1')``, gives the stronger hint.
No hint is solution code: that stays in solutions/.
"""
from __future__ import annotations

import linecache
import os
import textwrap

import numpy as np

from ..core.errors import InputError
from .hints import HINTS

__all__ = ['task', 'Task', 'CheckError', 'hint']

WIDTH = 100            # characters per line of a message
RED, RESET = '\x1b[1;31m', '\x1b[0m'


def _plain(value):
    """`value` with numpy scalars as Python numbers, also inside tuples, lists and dicts (no np.float64(..))."""
    if isinstance(value, np.generic):
        return value.item()
    if type(value) in (tuple, list):                   # not subclasses (a namedtuple is shown as it is)
        return type(value)(_plain(v) for v in value)
    return {k: _plain(v) for k, v in value.items()} if type(value) is dict else value


def show(value, width=WIDTH - 12) -> str:
    """A one-line rendering of a value (arrays shortened)."""
    if isinstance(value, np.ndarray) or type(value).__name__ in ('Tensor', 'Parameter'):
        arr = np.asarray(getattr(value, 'data', value))
        text = np.array2string(arr, precision=6, threshold=12, edgeitems=3, separator=', ')
        text = ' '.join(text.split()) + (f'  (shape {arr.shape})' if arr.ndim > 1 else '')
    elif isinstance(value, str):
        text = ' '.join(value.split())             # a description of what was expected, shown as is
    else:
        text = ' '.join(repr(_plain(value)).split())      # 0.5, not np.float64(0.5)
    return text if len(text) <= width else text[:width - 3] + '...'


class CheckError(AssertionError):
    """A failed exercise check: a short message (expected, got, hint) instead of a traceback."""

    def __init__(self, task, problem, expected=None, got=None, hint=None, where=None, show_values=True):
        self.task, self.hint = task, hint
        self.lines = [f'✗ Task {task}: {problem}']
        if where:
            self.lines.append(f'  {where}')
        if show_values:
            self.lines += [f'  expected: {show(expected)}', f'  got:      {show(got)}']
        if hint:
            room = 6 - len(self.lines)
            wrapped = textwrap.wrap(f'hint: {hint}', WIDTH, initial_indent='  ', subsequent_indent='        ')
            if len(wrapped) > room:
                wrapped = wrapped[:room]
                wrapped[-1] = wrapped[-1][:WIDTH - 3] + '...'
            self.lines += wrapped
        self.lines = [line if len(line) <= WIDTH + 20 else line[:WIDTH + 17] + '...' for line in self.lines[:6]]
        super().__init__('\n'.join(self.lines))

    def _render_traceback_(self):          # IPython shows these lines instead of a traceback
        return [RED + self.lines[0] + RESET] + self.lines[1:]


def _learner_line(tb) -> str | None:
    """'in f: `line`' for the deepest frame of the failing traceback that belongs to notebook code."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        name = code.co_filename
        if name.startswith('<ipython-input') or os.sep + 'ipykernel_' in name or name.startswith('<cell'):
            line = linecache.getline(name, tb.tb_lineno).strip()
            line = line if len(line) <= 60 else line[:57] + '...'
            found = f'in {code.co_name}: `{line}`' if code.co_name != '<module>' else f'at `{line}`'
        tb = tb.tb_next
    return found


_SEEN: dict[str, list] = {}       # task key -> the diagnoses of its failures so far (the ladder's state)


def _ladder(key, mistake=None, own=None):
    """The hint for a failure of task `key`: the nudge for `mistake` (else `own`, else the task's nudge) the
    first time; the stronger hint when the task fails the same way again."""
    table, seen = HINTS.get(key, {}), _SEEN.setdefault(key, [])
    diagnosis = mistake or own or 'nudge'
    again = diagnosis in seen
    seen.append(diagnosis)
    if again and 'more' in table:
        return table['more']
    text = (table.get(mistake) if mistake else None) or own or table.get('nudge')
    return text and text + (f" (stuck? hint('{key}'))" if 'more' in table else '')


def hint(name) -> None:
    """Print the stronger hint of exercise task `name`: ``hint(2.4)``, ``hint('05-1')`` (lesson 05, task 1)."""
    key = str(name)
    if 'more' not in HINTS.get(key, {}):
        raise InputError(f"hint: no exercise task {name!r}; expected a task number like 2.4, or '05-1' for "
                         f"task 1 of lesson 05 (tasks: {', '.join(HINTS)})")
    _SEEN.setdefault(key, []).append('nudge')    # an undiagnosed failure after this gets the stronger hint
    print('\n'.join(textwrap.wrap(f'Task {key}, hint: {HINTS[key]["more"]}', WIDTH)))


class Task:
    """The tests of one exercise task (use it through ``with task(name) as t``)."""

    def __init__(self, name, hint=None, lesson=None, crashes=None):
        self.name, self.hint, self.note = str(name), hint, None
        self.key = f'{lesson}-{name}' if lesson else self.name      # lessons 05-08 number tasks 1, 2, ...
        self.crashes = crashes or {}               # exception name or message fragment -> mistake

    # -- tests
    def check(self, condition, problem, expected=None, got=None, hint=None, show_values=None, mistake=None):
        """Fail with `problem` (and expected/got, when given) unless `condition` holds; `mistake` names the
        wrong answer this test detected (its nudge is in minigrad/course/hints.py)."""
        if not condition:
            show_values = (expected is not None or got is not None) if show_values is None else show_values
            raise CheckError(self.name, problem, expected, got, _ladder(self.key, mistake, hint or self.hint),
                             show_values=show_values)

    def equal(self, got, expected, what, hint=None, mistake=None):
        """`got` must equal `expected` (arrays: same shape and values)."""
        if isinstance(got, np.ndarray) or isinstance(expected, np.ndarray):
            ok = np.shape(got) == np.shape(expected) and bool(np.all(np.asarray(got) == np.asarray(expected)))
        else:
            try:
                ok = bool(got == expected)
            except (ValueError, TypeError):       # not comparable (e.g. an array against a number): not right
                ok = False
        self.check(ok, f'wrong answer for {what}', expected, got, hint, show_values=True, mistake=mistake)

    def close(self, got, expected, what, hint=None, rtol=1e-5, atol=1e-8, mistake=None):
        """`got` must be numerically close to `expected` (same shape)."""
        try:
            g = np.asarray(getattr(got, 'data', got), dtype=float)
            ok = g.shape == np.shape(expected) and bool(np.allclose(g, expected, rtol=rtol, atol=atol))
        except (TypeError, ValueError):
            ok = False
        self.check(ok, f'wrong answer for {what}', expected, got, hint, show_values=True, mistake=mistake)

    def report(self, text):
        """Add `text` to the ✓ line printed when the task passes."""
        self.note = text

    def _crash_mistake(self, exc):
        """The mistake `crashes` names for `exc`: by exception class name, or by a fragment of its message."""
        return next((m for k, m in self.crashes.items() if k == type(exc).__name__ or k in str(exc)), None)

    # -- the with-block
    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None:
            print(f'✓ Task {self.name}' + (f': {self.note}' if self.note else ''))
            return False
        if isinstance(exc, CheckError) or not isinstance(exc, Exception):
            return False
        where = _learner_line(tb)
        if isinstance(exc, NotImplementedError):       # not started: say what to do, no hint yet
            err = CheckError(self.name, 'not done yet: replace `raise NotImplementedError(...)` in the task cell '
                             'above with your code, then run this cell again', show_values=False)
        else:
            message = ' '.join(f'{type(exc).__name__}: {exc}'.split())
            err = CheckError(self.name, f'your code raised {message[:WIDTH - 30]}'
                             + ('...' if len(message) > WIDTH - 30 else ''),
                             hint=_ladder(self.key, self._crash_mistake(exc), self.hint),
                             where=(where + '  (%tb: full traceback)') if where else None,
                             show_values=False)
        raise err from exc


def task(name, hint=None, lesson=None, crashes=None) -> Task:
    """The checks of exercise task `name` (e.g. ``'1.2'``; ``task('1', lesson='05')`` for lesson 05's task 1).
    Hints come from minigrad/course/hints.py; `hint` is an extra text shown when the table has none.

    >>> with task('0.1', hint='add the two numbers') as t:
    ...     t.equal(2 + 2, 4, '2 + 2')
    ✓ Task 0.1
    """
    return Task(name, hint, lesson, crashes)
