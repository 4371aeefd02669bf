"""Pass: constant folding."""
from __future__ import annotations

import numpy as np

from ..core.primitive import Aval
from ..core.graph import Graph, CONSTANT
from .rewrite import rebuild, unchanged, const_value

FOLD_LIMIT = 4096          # folding never creates constants larger than this (elements), nor than its inputs


def _foldable(node, ins) -> bool:
    """An op (no graph-structure node) whose inputs are all constants."""
    return node.prim.kind != 'node' and bool(ins) and all(i.node.prim is CONSTANT for i in ins)


def fold_constants(graph: Graph) -> Graph:
    """Evaluate nodes whose inputs are all constants (small results only: see FOLD_LIMIT).

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     y = mg.constant(2.0) * 3.0
    >>> g.outputs = [y]
    >>> print(fold_constants(g).nodes[-1].params['value'])
    6.0
    """
    def rw(node, ins, g):
        if not _foldable(node, ins):
            return None
        vals = [const_value(i) for i in ins]
        try:
            res = node.prim.impl(*vals, **node.params)
        except (ArithmeticError, ValueError, IndexError, TypeError) as e:     # it fails at run time too
            g.notes.append(f"kept {node.outputs[0].name} = {node.op}(...): computing it fails "
                           f'({type(e).__name__}: {e})')
            return None
        res = [np.asarray(r) for r in (res if node.prim.multiple_results else [res])]
        if any(r.size > max(FOLD_LIMIT, max(v.size for v in vals)) for r in res):
            g.notes.append(f'kept {node.outputs[0].name} = {node.op}(...): its result has more than '
                           f'FOLD_LIMIT={FOLD_LIMIT} elements')
            return None
        outs = []
        for r, o in zip(res, node.outputs):
            r = np.array(r, dtype=o.dtype)
            r.setflags(write=False)
            outs.append(g.add_node(CONSTANT, [], {'value': r}, [Aval(r.shape, r.dtype)], name=o.name)[0])
        return outs
    # speed: nothing to fold: the graph itself, no copy
    if not any(_foldable(n, n.inputs) for n in graph.nodes) and unchanged(graph):
        return graph
    return rebuild(graph, rw, sub_pass=fold_constants)
