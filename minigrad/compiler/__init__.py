"""The graph compiler: an explicit pipeline of named passes (Graph -> Graph, one file each:
prune, fold, cse, specialize, simplify, fuse; listed in pipeline.py), then lowering to a
schedule (lower.py), memory planning (memory.py) and code generation (codegen.py) into a
`Program` (program.py). The ops only the compiler introduces are declared in ops.py.

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

Your own pass: any function Graph -> Graph (build a new graph, e.g. with ``rebuild``),
given by itself or by a name registered with ``register_pass``:
``mg.compile(y, [w, x, b], passes=DEFAULT_PASSES + [my_pass])``.
"""
from __future__ import annotations

import os

from ..core.errors import FeedError, GraphError
from ..core.graph import Graph, Symbol, PLACEHOLDER, VARIABLE, ASSIGN, without_gc, needed_nodes, one_graph
from . import rules  # noqa: F401  (first: fills the compiler fields of the primitives' records)
from .cse import cse
from .fold import fold_constants
from .fuse import fuse
from . import kernels
from .memory import MemoryPlan
from .ops import fma, fused
from .pipeline import PASSES, DEFAULT_PASSES, register_pass, run_pipeline
from .program import Program
from .prune import prune
from .rewrite import rebuild, emit, copy_node, stand_in
from .simplify import simplify
from .specialize import specialize


def _check(outputs, inputs):
    one_graph('compile', list(outputs) + list(inputs), 'outputs and inputs are Symbols of one graph')
    for s in inputs:
        if s.node.prim is not PLACEHOLDER and s.node.prim is not VARIABLE:
            raise GraphError(f"compile: input '{s.name}' is the result of a '{s.op}' op; inputs must be "
                             f'placeholders (or Variables, to feed them)')


def _import(outputs, inputs, input_shapes, own_passes=True):
    """The function graph: only what the outputs need; inputs become its placeholders (``own_passes``: a
    pipeline other than the default one will run on it)."""
    _check(outputs, inputs)
    in_ids = {id(s) for s in inputs}
    needed = needed_nodes(outputs[0].graph, outputs)
    for node in needed:
        o = node.outputs[0]
        if node.prim is PLACEHOLDER and id(o) not in in_ids:
            raise FeedError(f"compile: the outputs need placeholder '{o.name}' (shape {o.shape}), which is not "
                            f'in inputs; add it to the inputs list')
    src = Graph('program')
    src.nodes = [s.node for s in inputs if s.node not in needed] + needed
    src.inputs, src.outputs = list(inputs), list(outputs)
    if input_shapes is not None and len(input_shapes) != len(inputs):
        raise FeedError(f'compile: input_shapes has {len(input_shapes)} entries for {len(inputs)} inputs; give '
                        f'one shape (or None) per input')
    shapes = {id(s): s.shape if input_shapes is None or input_shapes[k] is None else tuple(input_shapes[k])
              for k, s in enumerate(inputs)}

    # Issue 37: the built-in passes never edit their input, so with nothing to rewrite they start from the
    # user's own nodes (one copy of a 100,000-node graph fewer); a learner's pass gets a copy it may break.
    if not own_passes and all(s.node.prim is PLACEHOLDER and shapes[id(s)] == s.shape for s in inputs):
        return src

    def rw(node, ins, g):
        o = node.outputs[0]
        if id(o) in shapes:        # an input (a fed Variable becomes a placeholder)
            return [stand_in(g, o, shapes[id(o)])]
        if node.prim is ASSIGN and id(node.inputs[0]) in shapes:    # as TF1: the step reads the fed value,
            var = copy_node(g, node.inputs[0].node, [])                # and the assign still updates the Variable
            return copy_node(g, node, [var[0], ins[1]])
        return None
    return rebuild(src, rw)


def _all_nodes(g):
    for n in g.nodes:
        yield n
        if n.prim is fused:
            yield from _all_nodes(n.params['graph'])


def _variables(source: Graph, g: Graph) -> list:
    """The original Variables the compiled graph reads or assigns, in order of appearance."""
    originals = {id(n.params['initial_value']): n.outputs[0] for n in source.nodes if n.prim is VARIABLE}
    found = {}
    for node in _all_nodes(g):
        if node.prim is VARIABLE and id(node.params['initial_value']) in originals:
            var = originals[id(node.params['initial_value'])]
            found.setdefault(id(var), var)
    return list(found.values())


def default_backend() -> str:
    """``MINIGRAD_BACKEND`` when set, else 'numba' when numba imports, else 'numpy'."""
    return os.environ.get('MINIGRAD_BACKEND') or ('numba' if kernels.available() else 'numpy')


def _backend(backend) -> str:
    backend = default_backend() if backend is None else backend
    if backend not in BACKENDS:
        raise GraphError(f'compile: unknown backend {backend!r}; use one of {", ".join(map(repr, BACKENDS))}')
    if backend == 'numba' and not kernels.available():
        raise GraphError("compile: backend='numba' needs numba (pip install numba); backend='numpy' runs "
                         'without it')
    return backend


@without_gc
def compile(outputs, inputs=(), passes=None, *, input_shapes=None, backend=None) -> Program:
    """Compile the sub-graph computing `outputs` from the placeholders `inputs` (in call order).

    ``passes``: None (the default pipeline ``DEFAULT_PASSES``) or a list of pass functions
    or names. ``input_shapes``: concrete shapes to specialise for (None dims resolved).
    ``backend``: 'numba' (each fusion group one compiled loop kernel) or 'numpy' (one numpy
    call per op); None = ``default_backend()``. Returns a `Program`: ``program(*arrays)``
    gives numpy values (one array for a single Symbol, else a list)."""
    backend = _backend(backend)
    single = isinstance(outputs, Symbol)
    if not single and not isinstance(outputs, (list, tuple)):
        raise GraphError(f'compile: outputs must be a Symbol or a list of Symbols, got {type(outputs).__name__}')
    outs = [outputs] if single else list(outputs)
    inputs = [inputs] if isinstance(inputs, Symbol) else list(inputs)
    if not outs:
        raise GraphError('compile: no outputs given')
    g0 = _import(outs, inputs, input_shapes, passes is not None).verify()
    g, history, counts, declined = run_pipeline(g0, passes)
    nodes = list(_all_nodes(g))
    stats = {'nodes_before': len(g0.nodes), 'nodes_after': len(g.nodes), 'passes': counts,
             'fma': sum(n.prim is fma for n in nodes), 'fused': sum(n.prim is fused for n in nodes),
             'fused_kernels': sum(n.prim is fused or n.prim is fma for n in g.nodes), 'declined': declined}
    return Program(g, history, inputs, outs, single, _variables(outs[0].graph, g), stats, backend)


BACKENDS = ('numba', 'numpy')

__all__ = ['compile', 'default_backend', 'BACKENDS', 'Program', 'MemoryPlan', 'DEFAULT_PASSES', 'PASSES', 'register_pass', 'prune',
           'fold_constants', 'cse', 'simplify', 'specialize', 'fuse', 'rebuild', 'emit', 'copy_node']
