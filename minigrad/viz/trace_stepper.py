"""`TraceStepper`: a tracer appending one node per op while the Python function runs (lesson 06).
"""
from __future__ import annotations

from ..core.graph import PLACEHOLDER, VARIABLE, CONSTANT
from ..core.interpreter import needed_nodes
from .draw import from_graph, as_graph, shape_text
from .frames import Frame, Layout, Player


# ------------------------------------------------------------------ a tracer at work
class TraceStepper(Player):
    """A tracer at work (lesson 06): one frame per node, in the order the traced Python function's ops added
    them to the graph. ``TraceStepper(mg.trace(fn, *examples))`` or ``TraceStepper(graph)``."""

    def __init__(self, obj, max_nodes=150):
        found = as_graph(obj)
        if found is None:
            raise TypeError(f'TraceStepper: expected a traced function or a Graph, got {type(obj).__name__}')
        g, fetch = found
        d, _ = from_graph(g, fetch)
        nodes = needed_nodes(g, fetch) if fetch else list(g.nodes)
        everything, frames = set(d.vertices), []
        inputs = [m for m in nodes if m.prim is PLACEHOLDER]

        def reveal(m):
            ok = d._keys.get(id(m))
            keys = {d._keys.get(id(x)) for x in (m, *m.outputs)} & set(d.vertices)
            inner = {c for c in d.clusters if ok is not None and (c == ok or c.startswith(ok + '_'))}
            return keys | {k for k, v in d.vertices.items() if v.get('cluster') in inner}

        shown = set().union(*(reveal(m) for m in inputs))
        desc = _listed(o for m in inputs for o in m.outputs)
        frames.append(Frame('trace', f'The tracer makes one placeholder per example input: {desc or "none"}; then it '
                            f'calls the function with them. Each op on a Symbol adds a node instead of computing.',
                            shown, hidden=everything - shown))       # (a Frame copies its sets)
        for count, m in enumerate((n for n in nodes if n.prim is not PLACEHOLDER), len(inputs) + 1):
            new = reveal(m) - shown
            shown |= new
            out = _listed(m.outputs)
            if m.prim in (CONSTANT, VARIABLE):
                cap = f'The function uses a value from outside: the tracer adds it as a {m.op}, {out}.'
            else:
                ins = ', '.join(i.name for i in m.inputs)
                cap = (f'The function applies {m.op} to {ins}: on Symbols nothing is computed; the tracer appends '
                       f'the node {out}.')
            frames.append(Frame('trace', f'{cap} Nodes so far: {count}.', new, hidden=everything - shown))
        result = ', '.join(s.name for s in (fetch or g.outputs or nodes[-1].outputs))
        frames.append(Frame('trace', f'The function returned {result}: the graph is complete. It can be run, '
                            f'compiled and differentiated without calling the Python function again.',
                            {d._keys[id(s)] for s in (fetch or []) if d._keys.get(id(s)) in d.vertices}))
        self._setup(frames, Layout(d, frames, max_nodes=max_nodes))


def _listed(symbols) -> str:
    return ', '.join(f'{s.name} ({shape_text(s.shape, s.dtype)})' for s in symbols)
