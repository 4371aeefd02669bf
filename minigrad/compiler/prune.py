"""Pass: dead code elimination."""
from __future__ import annotations

from ..graph import Graph, needed_nodes
from .rewrite import rebuild, unchanged


def prune(graph: Graph) -> Graph:
    """Keep what the outputs need (plus the function's inputs and captures).

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (2,), name='x'); y = x * 2.0; dead = x + 1.0
    >>> g.outputs = [y]
    >>> [n.op for n in prune(g).nodes]
    ['placeholder', 'constant', 'mul']
    """
    roots = list(graph.outputs) + list(graph.inputs) + [inner for _, inner in graph.captures]
    keep = needed_nodes(graph, roots)
    if len(keep) == len(graph.nodes) and unchanged(graph):
        return graph
    view = Graph(graph.name, graph.parent)          # the kept nodes, copied by rebuild below
    view.nodes = keep
    view.inputs, view.outputs, view.captures, view.single = graph.inputs, graph.outputs, graph.captures, graph.single
    return rebuild(view, sub_pass=prune)
