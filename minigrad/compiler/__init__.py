"""The graph compiler: an explicit pipeline of named passes (Graph -> Graph), then memory
planning and code generation into a `Program`.

>>> import minigrad as mg
>>> g = mg.Graph()
>>> with g.as_default():
...     w = mg.placeholder(name='w'); x = mg.placeholder(name='x'); b = mg.placeholder(name='b')
...     y = w * x + b
>>> prog = mg.compile(y, [w, x, b])
>>> [n.op for n in prog.graph.nodes]
['placeholder', 'placeholder', 'placeholder', 'fma']
>>> prog.memory.naive_num_buffers, prog.memory.num_buffers
(5, 4)
>>> float(prog(2.0, 3.0, 1.0))
7.0

Your own pass: any function Graph -> Graph (build a new graph, e.g. with
``mg.compiler.passes.rebuild``), given by itself or by a name registered with
``register_pass``: ``mg.compile(y, [w, x, b], passes=DEFAULT_PASSES + [my_pass])``.
"""
from __future__ import annotations

from ..errors import FeedError, GraphError
from ..core import Aval
from ..graph import Graph, Symbol, PLACEHOLDER
from ..interpreter import needed_nodes
from . import prims
from .passes import PASSES, rebuild, emit, copy_node, prune, fold_constants, cse, simplify, specialize, fuse
from .program import Program, MemoryPlan

DEFAULT_PASSES: list = ['prune', 'fold_constants', 'cse', 'simplify', 'specialize', 'fuse']


def register_pass(fn=None, *, name: str | None = None):
    """Register a pass under a name (usable in ``passes=[...]``); works as a decorator."""
    def reg(f):
        PASSES[name or f.__name__] = f
        return f
    return reg(fn) if fn is not None else reg


def group(*ops) -> Symbol:
    """One op that runs all of `ops` (e.g. Variable assigns) and returns True, like tf.group."""
    from ..core import apply
    return apply(prims.group, *ops)


def _resolve(passes):
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


def _import(outputs, inputs, input_shapes):
    """The function graph: only what the outputs need; inputs become its placeholders."""
    graph = outputs[0].graph
    for s in list(outputs) + list(inputs):
        if not isinstance(s, Symbol):
            raise GraphError(f'compile: expected Symbols, got {type(s).__name__}; outputs and inputs are '
                             f'Symbols of one graph')
        if s.graph is not graph:
            raise GraphError(f"compile: '{s.name}' belongs to another graph than '{outputs[0].name}'")
    for s in inputs:
        if s.op not in ('placeholder', 'variable'):
            raise GraphError(f"compile: input '{s.name}' is the result of a '{s.op}' op; inputs must be "
                             f'placeholders (or Variables, to feed them)')
    in_ids = {id(s): k for k, s in enumerate(inputs)}
    needed = needed_nodes(graph, outputs)
    for node in needed:
        o = node.outputs[0]
        if node.op == 'placeholder' and id(o) not in in_ids:
            raise FeedError(f"compile: the outputs need placeholder '{o.name}' (shape {o.shape}), which is not "
                            f'in inputs; add it to the inputs list')
    src = Graph('program')
    src.nodes = [s.node for s in inputs if s.node not in needed] + needed
    src.inputs, src.outputs = list(inputs), list(outputs)
    shapes = {}
    for k, s in enumerate(inputs):
        shp = s.shape if input_shapes is None or input_shapes[k] is None else tuple(input_shapes[k])
        shapes[id(s)] = shp

    def rw(node, ins, g):
        o = node.outputs[0]
        if id(o) in shapes:        # an input (a fed Variable becomes a placeholder)
            return g.add_node(PLACEHOLDER, [], {}, [Aval(shapes[id(o)], o.dtype)], name=o.name)
        return None
    return rebuild(src, rw)


def compile(outputs, inputs=(), passes=None, *, input_shapes=None) -> Program:
    """Compile the sub-graph computing `outputs` from the placeholders `inputs` (in call order).

    ``passes``: None (the default pipeline ``DEFAULT_PASSES``) or a list of pass functions
    or names. ``input_shapes``: concrete shapes to specialise for (None dims resolved).
    Returns a `Program`: ``program(*arrays)`` gives numpy values (one array for a single
    Symbol, else a list)."""
    single = isinstance(outputs, Symbol)
    outs = [outputs] if single else list(outputs)
    inputs = [inputs] if isinstance(inputs, Symbol) else list(inputs)
    if not outs:
        raise GraphError('compile: no outputs given')
    g = _import(outs, inputs, input_shapes).verify()
    history = [('input', g)]
    counts = {'input': len(g.nodes)}
    declined = {}
    for name, p in _resolve(passes):
        new = p(g)
        if not isinstance(new, Graph):
            raise GraphError(f'compile: pass {name!r} returned {type(new).__name__}, not a Graph')
        try:
            if new is not g:            # a pass that changed nothing returns its input
                new.verify()
        except GraphError as e:
            raise GraphError(f'compile: the graph is invalid after pass {name!r}: {e}') from None
        g = new
        if g.notes and g is not history[-1][1]:
            declined[name] = list(g.notes)
        history.append((name, g))
        counts[name] = len(g.nodes)
    originals = {id(n.params['initial_value']): n.outputs[0] for n in outs[0].graph.nodes if n.op == 'variable'}
    variables = []
    for node in _all_nodes(g):
        var = originals.get(id(node.params['initial_value'])) if node.op == 'variable' else None
        if var is not None and all(var is not v for v in variables):   # identity: Symbol == builds an op
            variables.append(var)
    ops = [n.op for n in _all_nodes(g)]
    stats = {'nodes_before': len(history[0][1].nodes), 'nodes_after': len(g.nodes), 'passes': counts,
             'fma': ops.count('fma'), 'fused': ops.count('fused'),
             'fused_kernels': ops.count('fused') + sum(1 for n in g.nodes if n.op == 'fma'),
             'declined': declined}
    return Program(g, history, inputs, outs, single, variables, stats)


def _all_nodes(g):
    for n in g.nodes:
        yield n
        if n.op == 'fused':
            yield from _all_nodes(n.params['graph'])


__all__ = ['compile', 'Program', 'MemoryPlan', 'DEFAULT_PASSES', 'PASSES', 'register_pass', 'group', 'prune',
           'fold_constants', 'cse', 'simplify', 'specialize', 'fuse', 'rebuild', 'emit']
