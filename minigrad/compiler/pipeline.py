"""The pass pipeline: named passes (pure functions Graph -> Graph) run in order from a list.

``DEFAULT_PASSES`` is the list ``mg.compile`` runs; ``register_pass`` adds a named pass a
learner wrote; ``run_pipeline`` verifies the graph after every pass and keeps a snapshot of
each one (``program.history``) and what each pass declined to do (``program.stats``).
"""
from __future__ import annotations

from ..core.errors import GraphError
from ..core.graph import Graph
from .cse import cse
from .fold import fold_constants
from .fuse import fuse
from .prune import prune
from .simplify import simplify
from .specialize import specialize

PASSES: dict = {'prune': prune, 'fold_constants': fold_constants, 'cse': cse, 'specialize': specialize,
                'simplify': simplify, 'fuse': fuse}
DEFAULT_PASSES: list = ['prune', 'fold_constants', 'cse', 'specialize', 'simplify', 'fuse']


def register_pass(fn=None, *, name: str | None = None):
    """Register a pass under a name (usable in ``passes=[...]``); works as a decorator.

    >>> @register_pass
    ... def my_noop(graph):
    ...     return graph
    >>> 'my_noop' in PASSES
    True
    """
    def reg(f):
        PASSES[name or f.__name__] = f
        return f
    return reg(fn) if fn is not None else reg


def resolve(passes) -> list:
    """[(name, function)] for ``passes`` (None = DEFAULT_PASSES; names or functions)."""
    out = []
    for p in (DEFAULT_PASSES if passes is None else passes):
        if isinstance(p, str):
            if p not in PASSES:
                raise GraphError(f'compile: unknown pass {p!r}; known passes: {", ".join(PASSES)}')
            out.append((p, PASSES[p]))
        elif callable(p):
            out.append((getattr(p, 'pass_name', getattr(p, '__name__', 'pass')), p))
        else:
            raise GraphError(f'compile: a pass must be a function Graph -> Graph or a name, got {p!r}')
    return out


def run_pipeline(g: Graph, passes) -> tuple[Graph, list, dict, dict]:
    """Run the passes: (final graph, history [(name, graph)], node counts, declines per pass)."""
    history, counts, declined, rules = [('input', g)], {'input': len(g.nodes)}, {}, {}
    for name, p in resolve(passes):
        before = (list(g.nodes), list(g.outputs))
        new = p(g)
        if (list(g.nodes), list(g.outputs)) != before:
            raise GraphError(f'compile: pass {name!r} changed the graph it was given; a pass builds a new graph '
                             f'(rebuild(graph, rewrite)) and never edits its input')
        if not isinstance(new, Graph):
            raise GraphError(f'compile: pass {name!r} returned {type(new).__name__}, not a Graph')
        # speed: a pass's input is not verified again, and verify's shape-rule memo is shared by every pass
        if new is not g:                # a pass that changed nothing returns its input
            try:
                new.verify(rules)      # shape rules shared: most nodes are copies
            except GraphError as e:
                raise GraphError(f'compile: the graph is invalid after pass {name!r}: {e}') from None
            if new.notes:
                declined[name] = list(new.notes)
        g = new
        history.append((name, g))
        counts[name] = len(g.nodes)
    return g, history, counts, declined
