"""Building blocks for passes: every pass builds a *new* graph and never mutates its input,
so the snapshots in ``program.history`` stay valid.

* ``rebuild(graph, rewrite)`` copies a graph; ``rewrite(node, new_inputs, new_graph)`` may
  return replacement symbols for a node's outputs (None copies it);
* ``emit(g, prim, inputs, **params)`` adds a node, its outputs inferred by the shape rule;
* ``copy_node`` copies one node onto new inputs;
* ``extract(nodes, results)`` copies some nodes into a graph of their own, the values they read
  from outside becoming its placeholders (``stand_in``): a fused group, a kernel, a jit segment.

A pass that finds nothing to do returns its input graph itself (``rewrite_pass`` does
that for you), so an unchanged pass costs one walk and no copy.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import ops as P
from ..core.primitive import Aval
from ..core.errors import GraphError, ShapeError
from ..core.graph import Graph, Symbol, SOURCES, STATEFUL, CONSTANT, PLACEHOLDER, where_text


def _fill_unknown_dims(recorded, rule):
    """The recorded shape, its unknown dims taken from the shape rule's answer."""
    if recorded is None or rule is None:
        return recorded if rule is None else rule
    if len(recorded) != len(rule):
        return recorded
    return tuple(a if a is not None else b for a, b in zip(recorded, rule))


def emit(g: Graph, prim, ins, name=None, **params):
    """Add a node to `g`, inferring its output avals with the primitive's shape rule.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (2,), name='x')
    >>> emit(g, mg.ops.exp, [x]).shape
    (2,)
    """
    av = prim.shape_rule(*[Aval(s.shape, s.dtype) for s in ins], **params)
    outs = g.add_node(prim, ins, params, list(av) if prim.multiple_results else [av], name=name)
    return outs if prim.multiple_results else outs[0]


def copy_node(g: Graph, node, ins, params=None) -> list:
    """Copy `node` into `g` with new inputs; shapes are re-inferred when the inputs' shapes
    changed (this resolves None dims)."""
    params = node.params if params is None else params
    # speed: the node's avals kept on inputs of its shapes and dtypes (no shape rule); one output: no loop
    avals = node.outputs            # add_node reads their shape and dtype
    same = params is node.params and all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(ins, node.inputs))
    if not same and node.prim not in SOURCES and node.prim not in STATEFUL:   # same inputs: same outputs
        try:
            r = node.prim.shape_rule(*[Aval(s.shape, s.dtype) for s in ins],
                                     **{k: v for k, v in params.items() if not k.startswith('_')})
        except ShapeError as e:         # shapes fed at run time meet the graph: name the learner's line
            raise ShapeError(f'{e} (node {node.outputs[0].name}, {where_text(node)})' if node.where else str(e)) from None
        r = list(r) if node.prim.multiple_results else [r]
        avals = [Aval(_fill_unknown_dims(a.shape, b.shape), a.dtype) for a, b in zip(avals, r)]
    outs = g.add_node(node.prim, ins, params, avals, name=node.outputs[0].name, where=node.where)
    if len(outs) > 1:                   # a one-output node (most of them) skips the slices and the loop
        for o, old in zip(outs[1:], node.outputs[1:]):
            o.name = g.unique_name(old.name)
    if not node.where:                  # add_node gave it the caller's line: a copy of a node without one has none
        outs[0].node.where = node.where
    return outs


def stand_in(g: Graph, sym, shape=None) -> Symbol:
    """A placeholder of `g` standing for `sym`, a value computed elsewhere: its name and dtype, and its
    shape unless `shape` is given. ``stand_in(g, x)`` in a sub-graph is what ``x`` is outside it."""
    return g.add_node(PLACEHOLDER, [], {}, [Aval(sym.shape if shape is None else shape, sym.dtype)], name=sym.name)[0]


def extract(nodes, results, name='sub', parent=None, read=None, inputs_first=False):
    """A new graph computing `results` by copies of `nodes` (in order): each value they read from outside
    `nodes` becomes a placeholder of it (``stand_in``), one per value, in order of first use. Returns
    (graph, outside values): ``graph.inputs[k]`` stands for ``outside[k]``.

    ``read(g, sym, user)`` may give another stand-in for `sym` (first read by node `user`): a placeholder
    of another shape, or a copy of a constant (then not an input). ``inputs_first``: all stand-ins ahead
    of the copies (as a trace lists them); else each just before its first user.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (2,), name='x'); y = mg.exp(x) * 2.0
    >>> sub, outside = extract(g.nodes[1:], [y])
    >>> [n.op for n in sub.nodes], [s.name for s in outside]
    (['placeholder', 'exp', 'constant', 'mul'], ['x'])
    """
    g, env, outside = Graph(name, parent), {}, []
    made = {id(o) for n in nodes for o in n.outputs}
    read = read or (lambda g, s, user: stand_in(g, s))

    def value(s, user):
        if id(s) not in env:
            env[id(s)] = read(g, s, user)
            if env[id(s)].node.prim is PLACEHOLDER:
                outside.append(s)
                g.inputs.append(env[id(s)])
        return env[id(s)]
    if inputs_first:
        for n in nodes:
            for i in n.inputs:
                if id(i) not in made:
                    value(i, n)
    for n in nodes:
        ins = [env[id(i)] if id(i) in made else value(i, n) for i in n.inputs]
        env.update(zip(map(id, n.outputs), copy_node(g, n, ins)))
    g.outputs = [env[id(s)] for s in results]
    return g, outside


def known(sym) -> bool:
    """Whether every dim of `sym`'s shape is known (rules that need static shapes check this)."""
    return sym.shape is not None and None not in sym.shape


def subgraphs(params) -> bool:
    return bool(params) and any(isinstance(v, Graph) for v in params.values())


def rebuild(graph: Graph, rewrite=None, sub_pass=None, shapes=None) -> Graph:
    """A copy of `graph`. ``rewrite(node, new_inputs, new_graph)`` may return replacement
    symbols for the node's outputs (or None to copy it); ``sub_pass`` is applied to
    sub-graphs in params; ``shapes`` maps id(old placeholder) -> a more precise shape."""
    new = Graph(graph.name, graph.parent)
    env: dict[int, Symbol] = {}
    for node in graph.nodes:
        ins = [env[id(i)] for i in node.inputs]
        params = node.params
        if sub_pass is not None and subgraphs(params):
            params = {k: _sub(sub_pass, v, env, new) if isinstance(v, Graph) else v for k, v in params.items()}
        res = rewrite(node, ins, new) if rewrite is not None else None
        if isinstance(res, Symbol):          # zip() would iterate over the Symbol's elements
            raise GraphError(f"rebuild: rewrite(node '{node.outputs[0].name}' ({node.op})) returned one Symbol; "
                             f"expected a list with one Symbol per output of the node, e.g. [sym], or None")
        if res is None:
            if shapes and id(node.outputs[0]) in shapes:
                o = node.outputs[0]
                res = new.add_node(node.prim, [], params, [Aval(shapes[id(o)], o.dtype)], name=o.name)
            else:
                res = copy_node(new, node, ins, params)
        env.update(zip(map(id, node.outputs), res))
    new.inputs = [env[id(s)] for s in graph.inputs]
    new.outputs = [env[id(s)] for s in graph.outputs]
    new.captures = [(outer, env[id(inner)]) for outer, inner in graph.captures]
    new.single = graph.single
    return new


def _sub(pass_fn, sub: Graph, outer_env, parent) -> Graph:
    out = pass_fn(sub)
    if out is not sub:       # point captures/parent at the new enclosing graph
        out.parent = parent
        out.captures = [(outer_env.get(id(o), o), i) for o, i in out.captures]
    return out


def unchanged(graph: Graph) -> bool:
    """May a pass that found nothing to do return `graph` itself? (Not if sub-graphs must be visited.)"""
    return not any(subgraphs(n.params) for n in graph.nodes)


def rewrite_pass(graph: Graph, rw, sub_pass) -> Graph:
    """rebuild(graph, rw); the input graph itself when no rule fired and nothing was noted."""
    # speed: the rules tried on the graph as it is, and the graph itself returned when none fires (no copy)
    probe = Graph(graph.name, graph.parent)          # try the rules on the graph as it is: no copy yet
    plain = unchanged(graph)
    if plain and all(rw(n, n.inputs, probe) is None for n in graph.nodes) and not probe.notes:
        return graph
    fired = []

    def counting(node, ins, g):
        res = rw(node, ins, g)
        if res is not None:
            fired.append(node)
        return res
    new = rebuild(graph, counting, sub_pass=sub_pass)
    return graph if not fired and not new.notes and plain else new


def const_value(sym):
    """The value of a constant Symbol, else None."""
    return sym.node.params['value'] if sym.node.prim is CONSTANT else None


_SAME_VALUES = (P.broadcast_to, P.broadcast_like, P.reshape)     # a uniform input gives a uniform result


def uniform(sym, c, limit=None) -> bool:
    """Every element of `sym` (a constant, or a broadcast or reshape of one) is exactly c: equal, and
    with c's sign when zero (an int 0 is +0, so ``x + 0`` is not x: -0.0 + 0 is +0.0). The one test
    every rewrite uses, so no rule flips the sign of a zero. ``limit``: the most elements to look at."""
    while sym.node.prim in _SAME_VALUES:
        sym = sym.node.inputs[0]
    v = const_value(sym)
    if v is None or v.size == 0 or (limit is not None and v.size > limit) or v.dtype.kind not in 'biuf':
        return False
    if v.size == 1:         # speed: a scalar constant (most of them) by Python's comparisons, not numpy's
        x = v.item()
        return x == c and math.copysign(1.0, x) == math.copysign(1.0, c)
    return bool(np.all(v == c)) and bool(np.all(np.signbit(v.astype(np.float64)) == np.signbit(float(c))))


class Builder:
    """What an op record's ``lower`` rule gets: ``b.emit(prim, inputs, **params)`` into the graph
    being built (names the last node after the one it replaces)."""
    __slots__ = ('graph', 'name')

    def __init__(self, graph: Graph, name: str):
        self.graph, self.name = graph, name

    def emit(self, prim, ins, **params):
        return emit(self.graph, prim, ins, name=self.name, **params)


class NodeView:
    """A node seen with its rewritten inputs (what a compiler op's ``match`` looks at)."""
    __slots__ = ('prim', 'inputs', 'outputs', 'params')

    def __init__(self, node, ins):
        self.prim, self.inputs, self.outputs, self.params = node.prim, ins, node.outputs, node.params
