"""One naming scheme for values (``mul``, ``mul_1``, ...): print(graph), a tape's listing, a drawing, a
generated kernel and an ONNX model name the same values alike."""
from __future__ import annotations

import itertools


class Names:
    """Unique names in one scheme (``mul``, ``mul_1``, ``mul_2``, ...), so print(graph), a tape, a drawing
    and an ONNX model name values alike. ``names(name, base)`` keeps a name the user gave.

    >>> names = Names(['mul_1']); [names(None, 'mul') for _ in range(3)], names('w', 'mul')
    (['mul', 'mul_2', 'mul_3'], 'w')
    """

    def __init__(self, taken=()):
        # every name given out -> the last suffix tried with it as base
        self.last = dict.fromkeys(taken, 0)
        # in Graph.atomic: [(name, its suffix before, None if new)]
        self.undo = None

    def __call__(self, name, base='v'):
        if name:
            return name
        if base not in self.last:
            self._set(base, 0)
            return base
        for i in itertools.count(self.last[base] + 1):
            if f'{base}_{i}' not in self.last:
                self._set(base, i)
                self._set(f'{base}_{i}', 0)
                return f'{base}_{i}'

    def _set(self, key, value):
        if self.undo is not None:           # a journal, not a copy per op: rollback stays linear
            self.undo.append((key, self.last.get(key)))
        self.last[key] = value

    def rollback(self, undo):
        """Undo the journal's changes (newest first)."""
        for key, old in reversed(undo):
            if old is None:
                self.last.pop(key, None)
            else:
                self.last[key] = old
