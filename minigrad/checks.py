"""Exercise checks that teach: a failing check shows one short message, not a traceback.

A check cell wraps its tests in ``with task(...)``::

    from minigrad.checks import task

    with task('1.1', hint='two paths lead from a to z: add their products') as t:
        t.close(dz_da(1.0, 2.0), 6.0, 'dz_da(1.0, 2.0)')

On success the block prints ``✓ Task 1.1``. A failing test raises `CheckError` (an AssertionError) saying
what was expected, what came back and a hint; IPython shows it in at most six lines (through
``_render_traceback_``) instead of a traceback. A test may give its own hint, naming the mistake it detects;
otherwise the task's hint is shown. An answer that is not written yet (``NotImplementedError``) or that
crashes inside the block becomes a CheckError too, naming the line of the learner's code that failed
(``%tb`` in the next cell still shows the full traceback).
"""
from __future__ import annotations

import linecache
import os
import textwrap

import numpy as np

__all__ = ['task', 'Task', 'CheckError']

WIDTH = 100            # characters per line of a message
RED, RESET = '\x1b[1;31m', '\x1b[0m'


def show(value, width=WIDTH - 12) -> str:
    """A one-line rendering of a value (arrays shortened)."""
    if isinstance(value, np.ndarray) or type(value).__name__ in ('Tensor', 'Parameter'):
        arr = np.asarray(getattr(value, 'data', value))
        text = np.array2string(arr, precision=6, threshold=12, edgeitems=3, separator=', ')
        text = ' '.join(text.split()) + (f'  (shape {arr.shape})' if arr.ndim > 1 else '')
    elif isinstance(value, str):
        text = ' '.join(value.split())             # a description of what was expected, shown as is
    else:
        if isinstance(value, np.generic):
            value = value.item()                 # 0.5, not np.float64(0.5)
        text = ' '.join(repr(value).split())
    return text if len(text) <= width else text[:width - 3] + '...'


class CheckError(AssertionError):
    """A failed exercise check: a short message (expected, got, hint) instead of a traceback."""

    def __init__(self, task, problem, expected=None, got=None, hint=None, where=None, show_values=True):
        self.task, self.problem, self.expected, self.got, self.hint, self.where = (
            task, problem, expected, got, hint, where)
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


class Task:
    """The tests of one exercise task (use it through ``with task(name, hint=...) as t``)."""

    def __init__(self, name, hint=None, quiet=False):
        self.name, self.hint, self.quiet, self.note = str(name), hint, quiet, None

    # -- tests
    def check(self, condition, problem, expected=None, got=None, hint=None, show_values=None):
        """Fail with `problem` (and expected/got, when given) unless `condition` holds."""
        if not condition:
            show_values = (expected is not None or got is not None) if show_values is None else show_values
            raise CheckError(self.name, problem, expected, got, hint or self.hint, show_values=show_values)

    def equal(self, got, expected, what, hint=None):
        """`got` must equal `expected` (arrays: same shape and values)."""
        if isinstance(got, np.ndarray) or isinstance(expected, np.ndarray):
            ok = np.shape(got) == np.shape(expected) and bool(np.all(np.asarray(got) == np.asarray(expected)))
        else:
            try:
                ok = bool(got == expected)
            except (ValueError, TypeError):       # not comparable (e.g. an array against a number): not right
                ok = False
        self.check(ok, f'{what} is not right', expected, got, hint, show_values=True)

    def close(self, got, expected, what, hint=None, rtol=1e-5, atol=1e-8):
        """`got` must be numerically close to `expected` (same shape)."""
        try:
            g = np.asarray(getattr(got, 'data', got), dtype=float)
            ok = g.shape == np.shape(expected) and bool(np.allclose(g, expected, rtol=rtol, atol=atol))
        except (TypeError, ValueError):
            ok = False
        self.check(ok, f'{what} is not right', expected, got, hint, show_values=True)

    def report(self, text):
        """Add `text` to the ✓ line printed when the task passes."""
        self.note = text

    # -- the with-block
    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None:
            if not self.quiet:
                print(f'✓ Task {self.name}' + (f': {self.note}' if self.note else ''))
            return False
        if isinstance(exc, CheckError) or not isinstance(exc, Exception):
            return False
        where = _learner_line(tb)
        if isinstance(exc, NotImplementedError):
            err = CheckError(self.name, 'not done yet: replace `raise NotImplementedError(...)` in the task cell '
                             'above with your code', hint=self.hint, show_values=False)
        else:
            message = ' '.join(f'{type(exc).__name__}: {exc}'.split())
            err = CheckError(self.name, f'your code raised {message[:WIDTH - 30]}'
                             + ('...' if len(message) > WIDTH - 30 else ''), hint=self.hint,
                             where=(where + '  (%tb: full traceback)') if where else None,
                             show_values=False)
        raise err from exc


def task(name, hint=None, quiet=False) -> Task:
    """The checks of exercise task `name` (e.g. ``'1.2'``); `hint` is shown when a test has none of its own."""
    return Task(name, hint, quiet)
