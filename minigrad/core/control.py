"""Control flow in static graphs: mg.cond and mg.while_loop, and their gradients.

A branch or loop body is a *sub-graph* (``Graph(parent=outer)``) built by calling
the Python function once on Symbols. Outer values it uses are captured
automatically (``Graph.capture``) and become inputs of the control-flow node.
Node formats (the compiler and the drawing code rely on them):

* ``cond``: inputs ``[pred, *captured]``; params ``true_graph``, ``false_graph``
  (both capture the same outer symbols, in the order of ``captured``; no
  ``inputs``); outputs = the branch outputs.
* ``while``: inputs ``[*loop_vars, *cond_captured, *body_captured]``; params
  ``cond_graph`` (inputs = loop-var placeholders, outputs = [bool scalar]),
  ``body_graph`` (inputs = loop-var placeholders, outputs = new loop vars),
  ``max_iterations`` (int), ``name`` (str, for messages); outputs
  ``[*final_loop_vars, stack]`` where ``stack`` (dtype object) is the list of
  the loop vars at the start of every iteration, saved for the gradient.
* ``while_grad``: inputs ``[stack, *cotangents of the float loop vars,
  *body_captured]``; params ``grad_graph`` (inputs = loop-var placeholders then
  cotangent placeholders; captures = ``body_captured`` in order; outputs =
  cotangents of the float loop vars then gradients of the float
  ``body_captured``), ``name``; outputs = gradients w.r.t. the initial float loop
  vars, then w.r.t. the float ``body_captured`` (loop invariants).

Impls run sub-graphs with ``interpreter.run_graph``, so the reference
interpreter and compiled programs execute these nodes the same way.
"""
from __future__ import annotations

import numpy as np

from . import validate
from . import primitive as core
from .primitive import Aval, register_primitive, fmt_shape, describe
from .errors import GraphError, InputError, MinigradError
from .graph import (Graph, Symbol, constant, get_default_graph, gradients, placeholder, zeros_like,
                    CONSTANT, SOURCES, STATEFUL, needed_nodes)
from .interpreter import run_graph
from .tensor import Tensor
from . import ops as P

# max_iterations=None: a runaway loop becomes an error, not a hang
DEFAULT_MAX_ITERATIONS = 100_000


class MaxIterationsError(MinigradError):
    """A while_loop ran more iterations than its max_iterations."""


def _float(s) -> bool:
    return np.dtype(s.dtype).kind == 'f'


def _common_aval(a: Aval, b: Aval) -> Aval:
    """The most specific aval covering both (dims that differ become unknown)."""
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return Aval(None, a.dtype)
    return Aval(tuple(x if x == y else None for x, y in zip(a.shape, b.shape)), a.dtype)


def inline(graph: Graph, args, captured) -> list:
    """Copy `graph`'s nodes into the default graph (inputs -> args, captures -> captured); return its outputs.

    Used by the VJPs to recompute a branch/body where its gradient is built."""
    cur = get_default_graph()
    env = {id(s): cur.lift(a) for s, a in zip(graph.inputs, args)}
    env.update({id(inner): cur.lift(c) for (_, inner), c in zip(graph.captures, captured)})
    for node in graph.nodes:
        if id(node.outputs[0]) in env:
            continue
        if node.prim is CONSTANT:
            outs = [constant(node.params['value'])]
        elif node.prim in SOURCES or node.prim in STATEFUL:
            raise GraphError(f'cannot differentiate through a {node.op} node inside a cond/while_loop body')
        else:
            res = core.apply(node.prim, *[env[id(i)] for i in node.inputs], **node.params)
            outs = list(res) if node.prim.multiple_results else [res]
        env.update((id(o), r) for o, r in zip(node.outputs, outs))
    return [cur.lift(env[id(o)]) for o in graph.outputs]


def _subgraph(outer: Graph, name: str, fn, avals=()) -> Graph:
    """Build fn(*placeholders) as a sub-graph of `outer`; outputs lifted into it."""
    g = Graph(name, parent=outer)
    with g.as_default():
        g.inputs = [placeholder(a.dtype, a.shape, name=f'{name}_in{i}') for i, a in enumerate(avals)]
        res = fn(*g.inputs)
        g.single = not isinstance(res, (list, tuple))
        g.outputs = [g.lift(o) for o in ([res] if g.single else res)]
    return g


# ------------------------------------------------------------------ cond
def _cond_impl(pred, *captured, true_graph, false_graph):
    branch = true_graph if bool(np.asarray(pred).reshape(-1)[0]) else false_graph
    return run_graph(branch, [], captured)


def _cond_rule(pred, *captured, true_graph, false_graph):
    if pred.shape is not None and any(d not in (1, None) for d in pred.shape):
        raise GraphError(f'cond: the predicate must be a scalar (one element), got shape '
                         f'{fmt_shape(pred.shape)}; reduce it first, e.g. x.sum() > 0')
    t, f = true_graph.outputs, false_graph.outputs
    if len(t) != len(f):
        raise GraphError(f'cond: true_fn returns {len(t)} values but false_fn returns {len(f)}; '
                         f'both branches must return the same structure')
    out = []
    for i, (a, b) in enumerate(zip(t, f)):
        if a.dtype != b.dtype:
            raise GraphError(f"cond: output {i} is {a.dtype} in true_fn ('{a.name}') "
                             f"but {b.dtype} in false_fn ('{b.name}'); "
                             f'cast one branch (mg.cast) so both return the same dtype')
        out.append(_common_aval(Aval(a.shape, a.dtype), Aval(b.shape, b.dtype)))
    return out


def _cond_vjp(needs, gs, outs, pred, *captured, true_graph, false_graph):
    want = [i for i, (n, c) in enumerate(zip(needs[1:], captured)) if n and _float(c)]
    flows = [k for k, g in enumerate(gs) if g is not None and _float(outs[k])]
    result = [None] * len(needs)
    if not want or not flows:
        return tuple(result)

    def grad_branch(G):
        def fn():   # recompute the branch here, then differentiate it (the VJP is itself a cond)
            cur = get_default_graph()
            ys = inline(G, [], captured)
            xs = [cur.lift(captured[i]) for i in want]
            return gradients([ys[k] for k in flows], xs, [cur.lift(gs[k]) for k in flows])
        return fn

    grads = _cond_build(pred, grad_branch(true_graph), grad_branch(false_graph), 'cond_grad')
    for i, g in zip(want, grads):
        result[i + 1] = g
    return tuple(result)


COND = register_primitive(
    'cond', _cond_impl, _cond_rule, _cond_vjp, kind='node', multiple_results=True,
    doc='run true_graph or false_graph. inputs: [pred, *captured]; params: true_graph, '
        'false_graph (sub-graphs capturing the same outer symbols, in input order)')


def _outer_graph(*syms) -> Graph:
    cur = get_default_graph()
    for s in syms:
        if isinstance(s, Symbol) and s.graph is not cur and not s.graph.is_ancestor_of(cur):
            return s.graph
    return cur


def _cond_build(pred, true_fn, false_fn, name='cond') -> list:
    outer = _outer_graph(pred)
    with outer.as_default():
        pred = outer.lift(pred)
    t = _subgraph(outer, f'{name}_true', true_fn)
    f = _subgraph(outer, f'{name}_false', false_fn)
    syms = []
    for G in (t, f):
        for o, _ in G.captures:
            if not any(o is s for s in syms):
                syms.append(o)
    for G in (t, f):        # both branches take the same captured inputs, in the same order
        for s in syms:
            G.capture(s)
        pos = {id(s): i for i, s in enumerate(syms)}
        G.captures.sort(key=lambda c: pos[id(c[0])])
    outs = core.apply(COND, pred, *syms, true_graph=t, false_graph=f)
    return list(outs)


def cond(pred, true_fn, false_fn):
    """``true_fn()`` if pred else ``false_fn()``, as one graph node (both branches are built as sub-graphs).

    The functions take no arguments; outer Symbols they use are captured. Both must
    return the same structure and dtypes. On eager Tensors it simply runs one branch.
    Differentiable: the gradient is a cond over the branches' gradient graphs.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, shape=())
    ...     y = mg.cond(x > 0, lambda: x * 2, lambda: -x)
    >>> float(mg.Session(g).run(y, {x: -3.0}))
    3.0
    """
    _callables('cond', true_fn=true_fn, false_fn=false_fn)
    true_fn = _returns_values(true_fn, 'cond: true_fn')
    false_fn = _returns_values(false_fn, 'cond: false_fn')
    # a transformation with its own rule (vmap: both branches, then select)
    for kind in core.Value.kinds:
        out = kind.cond_rule(pred, true_fn, false_fn)
        if out is not NotImplemented:
            return out
    if isinstance(pred, Symbol) and pred.dtype.kind != 'b':
        raise GraphError(f'cond: the predicate must be a bool scalar (a comparison such as x > 0), '
                         f'got {describe(pred)}')
    if not isinstance(pred, Symbol):
        if isinstance(pred, Tensor) and pred.data.size != 1:
            raise GraphError(f'cond: the predicate must be a scalar, got {describe(pred)}')
        return true_fn() if bool(pred) else false_fn()
    with pred.graph.atomic():
        outs = _cond_build(pred, true_fn, false_fn)
    # (a branch written as `return x` gives one value, not a tuple)
    return outs[0] if outs and outs[0].node.params['true_graph'].single else tuple(outs)


def _callables(who, **fns):
    for name, fn in fns.items():
        if not callable(fn):
            raise InputError(f'{who}: {name} must be a function (a lambda or def), got '
                             f'{type(fn).__name__} {fn!r:.40}')


def _returns_values(fn, who):
    """fn, checked to return a value or a list/tuple of values (None is the usual missing `return`)."""
    def checked(*a):
        r = fn(*a)
        if r is None or isinstance(r, (list, tuple)) and any(v is None for v in r):
            raise InputError(f'{who} returned None; it must return the value(s) (a missing return?)')
        return r
    return checked


# ------------------------------------------------------------------ while_loop
def _while_impl(*args, cond_graph, body_graph, max_iterations, name):
    n, nc = len(cond_graph.inputs), len(cond_graph.captures)
    vals, ccap, bcap = list(args[:n]), args[n:n + nc], args[n + nc:]
    stack = []
    while bool(np.asarray(run_graph(cond_graph, vals, ccap)[0]).reshape(-1)[0]):
        if len(stack) >= max_iterations:
            raise MaxIterationsError(
                f"while_loop '{name}': the condition is still true after max_iterations={max_iterations} "
                f'iterations (loop vars now: {", ".join(_preview(v) for v in vals)}). Raise max_iterations '
                f'if the loop really needs more steps, or fix the condition/body so the loop ends.')
        stack.append(tuple(vals))
        vals = run_graph(body_graph, vals, bcap)
    return (*vals, stack)


def _preview(v):
    s = np.array2string(np.asarray(v), precision=4, threshold=6)
    return s if len(s) < 40 else s[:37] + '...'


def _while_rule(*avals, cond_graph, body_graph, max_iterations, name):
    return [Aval(s.shape, s.dtype) for s in body_graph.inputs] + [Aval((), np.dtype(object))]


def _while_vjp(needs, gs, outs, *inputs, cond_graph, body_graph, max_iterations, name):
    n, nc = len(cond_graph.inputs), len(cond_graph.captures)
    bcap = inputs[n + nc:]
    fl = [i for i in range(n) if _float(body_graph.inputs[i])]
    fc = [j for j, c in enumerate(bcap) if _float(c)]
    result = [None] * len(inputs)
    if not any(needs[i] for i in fl) and not any(needs[n + nc + j] for j in fc):
        return tuple(result)
    outer = outs[0].graph
    G = Graph(f'{name}_grad_body', parent=outer)
    with G.as_default():
        for c in bcap:
            G.capture(c)        # captures in the order of the while node's body inputs
        xs = [placeholder(s.dtype, s.shape, name=f'{s.name}') for s in body_graph.inputs]
        cts = [placeholder(xs[i].dtype, xs[i].shape, name=f'ct_{i}') for i in fl]
        G.inputs = xs + cts
        ys = inline(body_graph, xs, bcap)
        caps = [G.captures[j][1] for j in fc]
        G.outputs = gradients([ys[i] for i in fl], [xs[i] for i in fl] + caps, cts) if fl else []
    ct_in = [gs[i] if gs[i] is not None else zeros_like(outs[i]) for i in fl]
    grads = core.apply(WHILE_GRAD, outs[-1], *ct_in, *bcap, grad_graph=G, name=name)
    for k, i in enumerate(fl):
        result[i] = grads[k]
    for k, j in enumerate(fc):
        result[n + nc + j] = grads[len(fl) + k]
    return tuple(result)


WHILE = register_primitive(
    'while', _while_impl, _while_rule, _while_vjp, kind='node', multiple_results=True,
    doc='loop: inputs [*loop_vars, *cond_captured, *body_captured]; params cond_graph, body_graph, '
        'max_iterations, name; outputs [*final_loop_vars, stack (object: per-iteration loop vars)]')


def _while_grad_impl(stack, *rest, grad_graph, name):
    n_ct = len(rest) - len(grad_graph.captures)
    cts, caps = list(rest[:n_ct]), rest[n_ct:]
    acc = None
    for vals in reversed(stack):            # pop the saved iterations, last first
        res = run_graph(grad_graph, [*vals, *cts], caps)
        cts, inv = res[:n_ct], res[n_ct:]
        acc = inv if acc is None else [a + b for a, b in zip(acc, inv)]
    if acc is None:
        acc = [np.zeros(np.shape(caps[k]), grad_graph.outputs[n_ct + i].dtype)
               for i, k in enumerate(_float_caps(grad_graph))]
    return (*cts, *acc)


def _float_caps(grad_graph):
    return [k for k, (_, inner) in enumerate(grad_graph.captures) if _float(inner)]


def _while_grad_rule(stack, *rest, grad_graph, name):
    return [Aval(o.shape, o.dtype) for o in grad_graph.outputs]


def _while_grad_vjp(*a, **k):
    raise MinigradError(f"gradients: the gradient of a while_loop ('{k.get('name')}') cannot be "
                        f'differentiated again (second derivatives through while_loop are not '
                        f'supported); unroll the loop with a Python for-loop if you need them')


WHILE_GRAD = register_primitive(
    'while_grad', _while_grad_impl, _while_grad_rule, _while_grad_vjp, kind='node',
    multiple_results=True,
    doc='reverse loop over a while stack: inputs [stack, *loop_var_cotangents, *body_captured];'
        ' params grad_graph, name; outputs [*initial_loop_var_grads, *invariant_grads]')


def while_loop(cond, body, loop_vars, max_iterations=None, name='while'):
    """``while cond(*vars): vars = body(*vars)`` as one graph node; returns the final vars.

    ``loop_vars`` is a list/tuple (the result has the same structure) or a single
    value; Python numbers and arrays become constants. cond and body are built once
    as sub-graphs; outer Symbols they use (loop invariants) are captured. Each
    iteration's loop vars are pushed on an explicit stack (an extra output, dtype
    object) that the gradient loop pops. ``max_iterations`` (default 100,000)
    turns a loop that never ends into a MaxIterationsError (exported to ONNX, where nothing can
    raise, the Loop stops after max_iterations instead: export warns). On eager Tensors this is
    a plain Python loop (a graph node from the first Symbol that cond or body reads on);
    mg.jvp and mg.vmap run it their own way (Value.while_rule).

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     c1, c2 = mg.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1),
    ...                            [mg.constant(0), mg.constant(10)])
    >>> [int(v) for v in mg.Session(g).run([c1, c2])]
    [20, 20]
    """
    _callables(f"while_loop '{name}'", cond=cond, body=body)
    body = _returns_values(body, f"while_loop '{name}': body")
    single = not isinstance(loop_vars, (list, tuple))
    vs = [loop_vars] if single else list(loop_vars)
    if not vs:
        raise InputError(f"while_loop '{name}': needs at least one loop variable; loop_vars is empty")
    limit = DEFAULT_MAX_ITERATIONS if max_iterations is None else \
        validate.check_int(max_iterations, f"while_loop '{name}': max_iterations", low=1)
    # the kind of the loop vars decides, after every step: a transformation's own rule (vmap: while any
    # example's condition holds; jvp: the values and their tangents together), an ordinary Python loop on
    # Tensors (recorded on the tape), a graph node on Symbols or numbers, or once cond or body read a Symbol
    steps, test = 0, None
    while True:
        for kind in core.Value.kinds:
            out = kind.while_rule(cond, body, vs, loop_vars, single, limit, name)
            if out is not NotImplemented:
                return out
        if any(isinstance(v, Symbol) for v in vs) or not any(isinstance(v, Tensor) for v in vs):
            break
        test = cond(*vs)
        if isinstance(test, Symbol):
            break
        if not bool(test):
            return vs[0] if single else type(loop_vars)(vs)
        if steps >= limit:
            raise MaxIterationsError(f"while_loop '{name}': still running after max_iterations={limit}; "
                                     f'raise max_iterations or fix the condition')
        r = body(*vs)
        vs = [r] if not isinstance(r, (list, tuple)) else list(r)
        steps += 1
    outer = _outer_graph(*vs, test)
    with outer.atomic():
        return _while_build(outer, cond, body, vs, loop_vars, single, limit, name)


def _while_build(outer, cond, body, vs, loop_vars, single, limit, name):
    with outer.as_default():
        vs = [outer.lift(v) for v in vs]
    avals = [Aval(v.shape, v.dtype) for v in vs]
    for _ in range(4):              # relax shapes that change between iterations, then rebuild
        cg = _subgraph(outer, f'{name}_cond', cond, avals)
        bg = _subgraph(outer, f'{name}_body', body, avals)
        _check_loop(name, cg, bg, avals)
        merged = [_common_aval(a, Aval(o.shape, o.dtype)) for a, o in zip(avals, bg.outputs)]
        if merged == avals:
            break
        avals = merged
    outs = core.apply(WHILE, *vs, *[o for o, _ in cg.captures], *[o for o, _ in bg.captures],
                      cond_graph=cg, body_graph=bg, max_iterations=limit, name=name)
    # shows up as such in print(graph)
    outs[-1].name = outs[-1].graph.unique_name(f'{name}_stack')
    finals = list(outs[:-1])
    return finals[0] if single else type(loop_vars)(finals)


def _check_loop(name, cg, bg, avals):
    if len(cg.outputs) != 1 or cg.outputs[0].dtype != np.bool_ or (
            cg.outputs[0].shape is not None and any(d not in (1, None) for d in cg.outputs[0].shape)):
        got = ', '.join(f'{o.dtype} {fmt_shape(o.shape)}' for o in cg.outputs)
        raise GraphError(f"while_loop '{name}': cond must return one boolean scalar (e.g. a < b), got {got}")
    if len(bg.outputs) != len(avals):
        raise GraphError(f"while_loop '{name}': body returns {len(bg.outputs)} values for {len(avals)} loop "
                         f'vars; return one new value per loop variable, in the same order')
    for i, (a, o) in enumerate(zip(avals, bg.outputs)):
        if a.dtype != o.dtype:
            raise GraphError(f"while_loop '{name}': loop var {i} is {a.dtype} but body returns "
                             f"{o.dtype} ('{o.name}'); a loop var must keep its dtype (cast with "
                             f'mg.cast, or start from a value of dtype {o.dtype})')
