"""Pass: shape specialisation. Once shapes are static (the compiler knows the feed shapes),
each op record's ``lower`` rule may write the op in simpler ops: the ``*_like`` helpers of
gradient graphs become plain reshapes, broadcasts and sums, ``stop_gradient`` and
same-shape reshapes/broadcasts disappear (they change nothing when running), and a matmul
whose contracted dim is 1 becomes a broadcast multiply (an outer product)."""
from __future__ import annotations

from ..core.graph import Graph
from .rewrite import rewrite_pass, unchanged, Builder


def _lower(node, ins, g):
    res = node.prim.lower(Builder(g, node.outputs[0].name), *ins, **node.params)
    return None if res is None else [res]


def specialize(graph: Graph) -> Graph:
    """Apply the op records' ``lower`` rules.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (2, 3), name='x'); gx, = mg.gradients(x.sum(), [x])
    >>> g.outputs = [gx]
    >>> sorted({n.op for n in specialize(g).nodes} & {'broadcast_like', 'broadcast_to'})
    ['broadcast_to']
    """
    # speed: no lower rule to try: the graph itself, no copy
    if not any(n.prim.lower is not None for n in graph.nodes) and unchanged(graph):
        return graph
    return rewrite_pass(graph, lambda node, ins, g: _lower(node, ins, g) if node.prim.lower else None, specialize)
