"""The ops only the compiler introduces, declared once here (records in the op table of kind
'compiler'). Each says what it replaces (``match``) and what it stands for (``decompose``:
the sub-graph the reference interpreter and the numpy backend run)."""
from __future__ import annotations

import functools

import numpy as np

from ..core import ops as P
from ..core.primitive import Aval, register_primitive, elementwise_rule
from ..core.graph import Graph
from ..core.interpreter import run_graph
from .rewrite import uniform, stand_in
from .parallel import launch


def _ew(name, impl, doc, **fields):
    return register_primitive(name, impl, functools.partial(elementwise_rule, _op=name), None, kind='compiler',
                              elementwise=True, doc=doc, **fields)


def _fma_graph(node) -> Graph:
    """fma(a, b, c) as the sub-graph it stands for: p = a * b; y = p + c (named y:mul and y)."""
    g, y = Graph('fma'), node.outputs[0]
    g.inputs = [stand_in(g, i) for i in node.inputs]
    a, b, c = g.inputs
    p = g.add_node(P.mul, [a, b], {}, [P.mul.shape_rule(a, b)], name=f'{y.name}:mul')[0]
    g.outputs = g.add_node(P.add, [p, c], {}, [Aval(y.shape, y.dtype)], name=y.name)
    return g


# ------------------------------------------------------------------ fma: a * b + c
def _match_fma(node, uses_once):
    """add(mul(a, b), c) where the product has no other use -> (a, b, c)."""
    if node.prim is not P.add:
        return None
    for m, c in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
        if m.node.prim is P.mul and uses_once(m):
            return [*m.node.inputs, c]
    return None


fma = _ew('fma', lambda a, b, c: np.add(np.multiply(a, b), c), 'a * b + c in one node (mul+add fusion)',
          match=_match_fma, decompose=_fma_graph, kernel=lambda a, params, ctx: f'{a[0]} * {a[1]} + {a[2]}')
# (no fp-contract: numba rounds a*b, then adds, as numpy's two calls do)


# ------------------------------------------------------------------ sub: x + y * -1
def _match_sub(node, uses_once=None):
    """add(x, mul(y, -1)) -> (x, y): x - y is exactly x + (-y)."""
    if node.prim is not P.add:
        return None
    for x, m in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
        if m.node.prim is P.mul and m.dtype == node.outputs[0].dtype:
            a, b = m.node.inputs
            for y, c in ((a, b), (b, a)):
                if uniform(c, -1) and c.shape == () and y.shape == m.shape:
                    return [x, y]
    return None


sub = _ew('sub', np.subtract, 'x - y (x + y * -1 simplified)', ufunc='subtract', match=_match_sub,
          kernel=lambda a, params, ctx: f'{a[0]} - {a[1]}')


# ------------------------------------------------------------------ relu: where(0 < x, x, 0)
def _match_relu(node, uses_once=None):
    if node.prim is not P.where:
        return None
    c, x, zero = node.inputs
    if c.node.prim is P.less and c.node.inputs[1] is x and uniform(c.node.inputs[0], 0) and uniform(zero, 0) \
            and x.shape == node.outputs[0].shape and x.dtype == node.outputs[0].dtype:
        return [x]
    return None


relu = _ew('relu', lambda x: np.fmax(x, np.zeros((), x.dtype)), 'max(x, 0): where(0 < x, x, 0) simplified',
           match=_match_relu,      # fmax, not maximum: like where(0 < x, x, 0) it maps nan to 0
           emit=lambda a, out, params, ctx: _emit_relu(a[0], out, ctx),
           kernel=lambda a, params, ctx: f'{a[0]} if {a[0]} > {ctx.typed(0)} else {ctx.typed(0)}')


def _emit_relu(x, out, ctx):
    """fmax(x, 0) maps nan to 0 like where(0 < x, x, 0); + 0 then turns its -0.0 into +0.0 as where does."""
    if not out:
        return f"{ctx.fn('add')}({ctx.fn('fmax')}({x}, 0), 0)"
    return f"{ctx.fn('fmax')}({x}, 0, out={out}); {ctx.fn('add')}({out}, 0, out={out})"


# ------------------------------------------------------------------ fused: a group run as one kernel
def _fused_impl(*xs, graph, kind='elementwise'):
    return tuple(run_graph(graph, list(xs)))


def _fused_rule(*avals, graph, **other):
    return [Aval(o.shape, o.dtype) for o in graph.outputs]


fused = register_primitive(
    'fused', _fused_impl, _fused_rule, None, kind='compiler', multiple_results=True,
    decompose=lambda node: node.params['graph'],
    doc='a group of ops run as one kernel; params: graph (the sub-graph: inputs, nodes, outputs), '
        "kind ('elementwise' or 'matmul_epilogue')")


SIMPLIFY_OPS = (sub, relu)      # patterns simplify rewrites into these ops; fuse introduces fma and fused


# ------------------------------------------------------------------ kernel: one loop kernel call (numba backend)
def _kernel_impl(*xs, kernel, graph):
    outs = [np.empty(o.shape, o.dtype) for o in graph.outputs]
    args = [np.ascontiguousarray(x) if np.ndim(x) else np.asarray(x) for x in xs] + outs
    launch(kernel.fn, kernel.extent, *args) if kernel.parallel else kernel.fn(*args)
    return tuple(outs)


def _emit_kernel(args, out, params, ctx):
    """``K[i](inputs..., outputs...)``: the kernel writes every result into its planned buffer; a parallel one is
    launched in chunks of its outer loop, ``K[j](K[i], its length, inputs..., outputs...)`` (parallel.py)."""
    ins = [a for k, a in enumerate(args) if k not in params.get('alias', ())]     # in place: read from its result
    kern = params['kernel']
    head = [ctx.const(kern.fn), str(kern.extent)] if kern.parallel else []
    return f'{ctx.const(launch if kern.parallel else kern.fn)}({", ".join(head + ins + ctx.out_buffers)})'


kernel_call = register_primitive(
    'kernel', _kernel_impl, _fused_rule, None, kind='compiler', multiple_results=True, emit=_emit_kernel,
    doc='a fused group as one compiled loop (numba backend); params: kernel (compiler.kernels.Kernel), '
        'graph (what it computes)')
