"""Pass: common subexpression elimination."""
from __future__ import annotations

import numpy as np

from ..core.graph import Graph, PLACEHOLDER, VARIABLE, ASSIGN, GROUP
from .rewrite import rebuild, unchanged, copy_node

UNIQUE = frozenset({PLACEHOLDER, VARIABLE, ASSIGN, GROUP})     # each one is its own value or effect


def _key(v):
    """A hashable stand-in for a param value (small arrays by content, big ones by identity)."""
    if isinstance(v, np.ndarray):
        return ('a', v.dtype.str, v.shape, v.tobytes()) if v.size <= 1024 else ('id', id(v))
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_key(i) for i in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _key(x)) for k, x in v.items()))
    if isinstance(v, (slice, np.dtype)):
        return repr(v)
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        return ('id', id(v))


def cse(graph: Graph) -> Graph:
    """One node per (op, inputs, params): ``x * 2.0`` written twice is computed once.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (2,), name='x'); a = x * 2.0; b = x * 2.0
    >>> g.outputs = [a, b]
    >>> out = cse(g); out.outputs[0] is out.outputs[1]
    True
    """
    seen: dict = {}

    def key(node, ins):         # speed: most nodes have no params, and _key({}) is (): no call for them
        return None if node.prim in UNIQUE else (node.op, tuple(map(id, ins)), _key(node.params) if node.params else ())

    def rw(node, ins, g):
        k = key(node, ins)
        if k is None:
            return None
        if k not in seen:
            seen[k] = copy_node(g, node, ins)
        return seen[k]
    keys = set()
    # speed: keys computed up to the first repeated one (then the rebuild), not every node's key first
    for k in (key(n, n.inputs) for n in graph.nodes):
        if k is not None and k in keys:
            return rebuild(graph, rw, sub_pass=cse)
        keys.add(k)
    return graph if unchanged(graph) else rebuild(graph, rw, sub_pass=cse)
