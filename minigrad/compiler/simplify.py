"""Pass: algebraic simplification, driven by the op records (core.Primitive):

* ``unit``: ``x * 1 -> x``, ``x + -0.0 -> x`` (exact; ``x + 0.0`` is not, for x = -0.0);
* ``zero``: ``x * 0 -> 0`` for integers only (``inf * 0`` and ``nan * 0`` are nan: declined, noted);
* ``compose``: ``reshape(reshape(x))``, ``transpose(transpose(x))`` as one op (or none);
* the compiler ops' patterns (``match``): ``x + y * -1 -> sub(x, y)``, ``where(0 < x, x, 0) -> relu(x)``.
"""
from __future__ import annotations

import numpy as np

from ..core import ops as P
from ..core.graph import Graph
from .cse import cse
from .fold import fold_constants, FOLD_LIMIT
from .ops import SIMPLIFY_OPS
from .prune import prune_new
from .specialize import specialize
from .rewrite import rewrite_pass, rebuild, emit, uniform, known, NodeView

MAX_ROUNDS = 4


def _broadcast(g, x, shape):
    return x if known(x) and tuple(x.shape) == tuple(shape) else emit(g, P.broadcast_to, [x], shape=tuple(shape))


def _identities(node, ins, g):
    """``unit`` and ``zero`` of a binary op record."""
    prim, o = node.prim, node.outputs[0]
    if len(ins) != 2 or not known(o):
        return None
    for x, c in ((ins[0], ins[1]), (ins[1], ins[0])):
        if prim.unit is not None and x.dtype == o.dtype and uniform(c, prim.unit, FOLD_LIMIT):
            return [_broadcast(g, x, o.shape)]
        if prim.unit is not None and prim.unit == 0 and uniform(c, -prim.unit, FOLD_LIMIT):       # x + 0.0, not -0.0
            g.notes.append(f'kept {o.name} = {node.op}({x.name}, 0.0): {x.name} may be -0.0 (-0.0 + 0.0 is +0.0)')
        if prim.zero is not None and uniform(c, prim.zero, FOLD_LIMIT):
            if o.dtype.kind in 'biu':
                return [_broadcast(g, g.lift(np.zeros((), o.dtype)), o.shape)]
            g.notes.append(f'kept {o.name} = {node.op}({x.name}, {prim.zero}): {x.name} may be inf or nan')
    return None


def _compose(node, ins, g):
    """op(op(x, p1), p2) as one op, or x itself when the two cancel."""
    inner = ins[0].node
    if node.prim.compose is None or inner.prim is not node.prim or ins[0].ndim is None:
        return None
    x = inner.inputs[0]
    params = node.prim.compose(inner.params, node.params, x.ndim)
    return [x] if params is None else [emit(g, node.prim, [x], name=node.outputs[0].name, **params)]


def _rule(node, ins, g):
    if node.prim.kind == 'node' or not ins:
        return None
    for rule in (_identities, _compose):
        res = rule(node, ins, g)
        if res is not None:
            return res
    for op in SIMPLIFY_OPS:
        args = op.match(NodeView(node, ins))
        if args is not None:
            return [emit(g, op, args, name=node.outputs[0].name)]
    return None


def simplify(graph: Graph) -> Graph:
    """The rules above, then lowering, folding, CSE and pruning of what they exposed, repeated while the
    graph shrinks (at most MAX_ROUNDS rounds; stopping early is noted in program.stats).

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (2,), name='x'); y = (x * 1.0).reshape(2, 1).reshape(2)
    >>> g.outputs = [y]
    >>> [n.op for n in simplify(g).nodes]
    ['placeholder']
    """
    notes, start = [], graph
    for k in range(MAX_ROUNDS):
        n = len(graph.nodes)
        for step in (lambda g: rewrite_pass(g, _rule, simplify), specialize, fold_constants, cse,
                     lambda g: prune_new(g, start)):
            graph = step(graph)
            notes += [m for m in graph.notes if m not in notes]
        if len(graph.nodes) == n:
            break
        if k == MAX_ROUNDS - 1:
            notes.append(f'stopped after {MAX_ROUNDS} rounds while the graph was still shrinking')
    if notes != graph.notes:
        graph = rebuild(graph) if graph is start else graph     # never change the input graph
        graph.notes = notes
    return graph
