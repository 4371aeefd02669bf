"""Pass: dead code elimination."""
from __future__ import annotations

from ..core.graph import Graph, needed_nodes
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
    keep = _live(graph)
    if len(keep) == len(graph.nodes) and unchanged(graph):      # speed: nothing dead, no copy
        return graph
    view = Graph(graph.name, graph.parent)          # the kept nodes, copied by rebuild below
    view.nodes = keep
    view.inputs, view.outputs, view.captures, view.single = graph.inputs, graph.outputs, graph.captures, graph.single
    return rebuild(view, sub_pass=prune)


def prune_new(graph: Graph, given: Graph) -> Graph:
    """prune(graph), where a pass was `given` a graph and made `graph`: a graph the pass made is its own (passes
    copy every node), so its dead nodes are dropped in place and the live ones kept, not copied again (a copy
    of a 20,000-op chain's gradient costs about as much as a pass). The given graph itself is never edited."""
    # speed: a pass's own graph pruned in place, its live nodes not copied again
    if graph is given or not unchanged(graph):      # sub-graphs to prune too: the copying prune
        return prune(graph)
    keep = _live(graph)
    if len(keep) < len(graph.nodes):
        graph.nodes[:] = keep
        for i, node in enumerate(keep):
            node.index = i
    return graph


def _live(graph: Graph) -> list:
    return needed_nodes(graph, list(graph.outputs) + list(graph.inputs) + [inner for _, inner in graph.captures])
