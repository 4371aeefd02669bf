"""Forward mode: dual numbers riding the same op table.

A `Dual` carries a primal value and its tangent (a directional derivative). `core.apply`
hands any op with a Dual argument to `dual_apply`, which runs the op on the primals and the
primitive's ``jvp`` rule (ops.py) on the tangents, so a whole function is pushed forward in
one pass. Nested `jvp` calls get distinct levels, so a derivative of a derivative does not
mix up its perturbations. The whole Jacobians (mg.jacfwd / mg.jacrev, one batched pass) are in
func.py; `_one_input` / `_one_output` below check what they are given.
"""
from __future__ import annotations

import threading

import numpy as np

from ..core import primitive as core, ops as P
from ..core.primitive import aval_of, describe, fmt_shape
from ..core.errors import ForwardError, ShapeError
from ..core.functional import OpsMixin
from ..core.graph import Symbol, zeros_like as graph_zeros_like
from ..core.tensor import Tensor, enable_grad, tensor
from ..core.control import (COND, WHILE, WHILE_GRAD, MaxIterationsError, _cond_build, _float, _float_caps,
                             while_loop)
from ..core.interpreter import replay, untaped


class Dual(OpsMixin, core.Value):
    """A value (``primal``) with its tangent, at a nesting ``level`` of `jvp` (above Tensors and Symbols)."""
    __slots__ = ('primal', 'tangent', 'level')
    __array_ufunc__ = None          # ndarray + Dual -> Dual.__radd__
    __hash__ = object.__hash__

    def __init__(self, primal, tangent, level):
        self.primal, self.tangent, self.level = primal, tangent, level

    shape = property(lambda self: aval_of(self.primal).shape)
    dtype = property(lambda self: aval_of(self.primal).dtype)
    ndim = property(lambda self: len(aval_of(self.primal).shape))

    def __bool__(self):
        return bool(self.primal)

    def __repr__(self):
        return f'Dual(primal={self.primal!r}, tangent={self.tangent!r})'

    def apply(self, prim, args, params):
        return dual_apply(prim, args, params)

    @classmethod
    def while_rule(cls, cond, body, values, loop_vars, single, limit, name):
        """Loop vars that are Duals (of the innermost transformation): one loop over their primals and
        tangents together, a Python loop or a while node as the primals say."""
        top = max((v for v in values if isinstance(v, core.Value)), key=lambda v: v.level, default=None)
        vmap = _levels.vmaps[-1] if _levels.vmaps else None
        if type(top) is not Dual or vmap is not None and vmap[0] > top.level:    # (vmap's rule, inside)
            return NotImplemented
        out = dual_while(cond, body, values, limit, name, top.level)
        return out[0] if single else type(loop_vars)(out)

    def graph_error(self):
        return ForwardError('a forward-mode value (a Dual of mg.jvp / mg.jacfwd) cannot become part of a graph: '
                            'forward mode inside mg.jit / mg.trace cannot go into mg.cond, nor a mg.while_loop '
                            'whose loop vars carry no tangent (bodies are built once as sub-graphs). Differentiate '
                            'the jit function from outside instead: mg.jvp(mg.jit(f), ...) or mg.jacfwd(mg.jit(f))')


class _Levels(threading.local):
    depth = 2                       # transformations nest above the tape (1) and graphs (2)

    def __init__(self):
        # (level, batch size) of each running mg.vmap (batching.py); None hides them (mg.grad's trace)
        self.vmaps = []


_levels = _Levels()


def dual_apply(prim, args, params):
    """Run prim on the primals of the innermost level and its JVP rule on their tangents."""
    level = max(a.level for a in args if type(a) is Dual)
    primals, tangents = [], []
    for a in args:                  # Duals of outer levels are plain values at this level
        inner = type(a) is Dual and a.level == level
        primals.append(a.primal if inner else a)
        tangents.append(a.tangent if inner else None)
    if prim.multiple_results:
        primals = untaped(prim.name, primals)
    out = prim(*primals, **params)
    if prim.multiple_results:       # cond, while: one tangent per float result
        if prim.jvp is None:
            raise ForwardError(f"jvp: '{prim.name}' has no jvp rule, so forward mode cannot go through it")
        ts = prim.jvp(tuple(primals), tuple(tangents), out, **params)
        return tuple(o if t is None or not _floating(o) else Dual(o, t, level) for o, t in zip(out, ts))
    if aval_of(out).dtype.kind != 'f':
        return out                  # bool / integer results have no tangent
    if prim.jvp is not None:
        t = prim.jvp(tuple(primals), tuple(tangents), out, **params)
    else:
        t = _jvp_from_vjp(prim, primals, tangents, out, params)
    return out if t is None else Dual(out, t, level)


def _floating(v) -> bool:
    """Whether a result carries a tangent: a float value, or a while node's stack (dtype object: the loop's
    saved iterations, whose tangents the reverse loop's JVP needs)."""
    v = _base(v)                    # (a stack that an outer level carries too)
    return isinstance(v, list) or getattr(v, 'dtype', None) is not None and np.dtype(v.dtype).kind in 'fO'


def _base(v):
    """The value under any Duals."""
    while type(v) is Dual:
        v = v.primal
    return v


def push(fn, primals, tangents) -> tuple[list, list]:
    """fn(*primals) (a list of values) and their tangents (None where zero), for the JVP rules of
    control flow and jit calls: any values (arrays, Tensors, Symbols, Duals of outer levels) at a fresh
    level, no input checks. A None tangent means the primal is held fixed."""
    _levels.depth += 1
    level = _levels.depth
    try:
        outs = fn(*[p if t is None else Dual(p, t, level) for p, t in zip(primals, tangents)])
    finally:
        _levels.depth -= 1
    pairs = [(o.primal, o.tangent) if type(o) is Dual and o.level == level else (o, None) for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


def _jvp_from_vjp(prim, primals, tangents, out, params):
    """J v for a primitive with only a VJP: the gradient in u of <J^T u, v> (the VJP is linear in u,
    so the tape transposes it). Eager values only; the tangent is not differentiable further."""
    if prim.vjp is None:
        raise ForwardError(f"jvp: primitive '{prim.name}' has neither a jvp nor a vjp rule, so forward mode "
                           f"cannot differentiate it; give its record jvp=... (or stop_gradient its input)")
    if any(isinstance(v, Symbol) for v in (*primals, *tangents)):
        raise ForwardError(f"jvp: primitive '{prim.name}' has no jvp rule; deriving one from its vjp "
                           f"needs values, not Symbols: give its record jvp=...")
    data = lambda v: v.data if isinstance(v, Tensor) else v     # detached: the user's graph stays untouched
    u = Tensor._make(np.zeros(aval_of(out).shape, aval_of(out).dtype), requires_grad=True)
    with enable_grad():
        cts = prim.vjp(tuple(t is not None for t in tangents), u, data(out), *map(data, primals), **params)
        terms = [(g * data(t)).sum() for g, t in zip(cts, tangents) if g is not None and t is not None]
    total = sum(terms[1:], terms[0]) if terms else None
    if total is None or not total.requires_grad:
        return None
    total.backward()
    return u.grad


def jvp(fn, primals, tangents):
    """Forward mode: ``fn(*primals)`` and its derivative along ``tangents`` (as jax.jvp).

    Plain data becomes Tensors; the outputs (a value or a tuple) and their tangents are Tensors.

    >>> import minigrad as mg
    >>> y, dy = mg.jvp(lambda x: x * x, (mg.tensor([3.0]),), (mg.tensor([1.0]),))
    >>> y.tolist(), dy.tolist()
    ([9.0], [6.0])
    """
    if not callable(fn):
        raise ForwardError(f'jvp: fn must be a function, got {type(fn).__name__}')
    primals, tangents = _inputs(primals, tangents)
    _levels.depth += 1
    level = _levels.depth
    try:
        out = fn(*[Dual(p, t, level) for p, t in zip(primals, tangents)])
    finally:
        _levels.depth -= 1
    if isinstance(out, (tuple, list)):
        pairs = [_split(o, level) for o in out]
        return type(out)(p for p, _ in pairs), type(out)(t for _, t in pairs)
    return _split(out, level)


def _inputs(primals, tangents):
    """Check primals and tangents (tuples of equal length, same shapes, floating) and make Tensors."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ForwardError(f'jvp: primals and tangents must be tuples, one entry per argument of fn, e.g. '
                           f'mg.jvp(f, (x,), (v,)); got {type(primals).__name__} and {type(tangents).__name__}')
    if len(primals) != len(tangents):
        raise ForwardError(f'jvp: {len(primals)} primals but {len(tangents)} tangents; give one tangent per primal')
    ps, ts = [], []
    for i, (p, t) in enumerate(zip(primals, tangents)):
        p = p if isinstance(p, core.Value) else tensor(p)
        if aval_of(p).dtype.kind != 'f':
            raise ForwardError(f'jvp: primal {i} is {describe(p)}; only floating inputs have tangents '
                               f'(convert it with .astype(mg.float32))')
        if not isinstance(t, core.Value):   # (Symbols: a constant)
            t = tensor(t, dtype=aval_of(p).dtype)
            t = t.data if isinstance(p, Symbol) else t
        if aval_of(t).shape != aval_of(p).shape:
            raise ShapeError(f'jvp: tangent {i} has shape {fmt_shape(aval_of(t).shape)} but primal {i} has shape '
                             f'{fmt_shape(aval_of(p).shape)}; a tangent must have its primal\'s shape')
        ps.append(p)
        ts.append(t)
    return ps, ts


def _split(out, level):
    """(primal, tangent) of one output of fn; an output that does not depend on the inputs has tangent 0."""
    if type(out) is Dual and out.level == level:
        return out.primal, out.tangent
    if isinstance(out, Symbol):     # inside mg.trace / mg.jit: an output that does not depend on the inputs
        return out, graph_zeros_like(out)
    out = out if isinstance(out, core.Value) else tensor(out)
    av = aval_of(out)
    return out, tensor(np.zeros(av.shape, av.dtype if av.dtype.kind == 'f' else core.DEFAULT_FLOAT))


def _one_input(x, who):
    if isinstance(x, (tuple, list)) and x and isinstance(x[0], (Tensor, np.ndarray)):
        raise ForwardError(f'{who}: give one array (the Jacobian is for one input); got a {type(x).__name__} '
                           f'of {len(x)}: concatenate them, or close over the others')
    x = x if isinstance(x, core.Value) else tensor(x)
    if isinstance(x, Symbol) and (x.shape is None or None in x.shape):
        raise ForwardError(f'{who}: the input {describe(x)} has no full shape, so its Jacobian has none; give the '
                           f'placeholder a shape (mg.placeholder(dtype, shape))')
    if aval_of(x).dtype.kind != 'f':
        raise ForwardError(f'{who}: the input is {describe(x)}; only floating inputs can be differentiated '
                           f'(convert it with .astype(mg.float32))')
    return x


def _one_output(out, who):
    if not isinstance(out, core.Value):
        raise ForwardError(f'{who}: fn must return one Tensor (the Jacobian is for one output); got '
                           f'{type(out).__name__}')
    if aval_of(out).dtype.kind != 'f':
        raise ForwardError(f'{who}: fn returned {describe(out)}; only floating outputs have derivatives')
    return out


# ------------------------------------------------- JVP rules, one per primitive (read by dual_apply above)
# ``jvp(primals, tangents, out, **params) -> tangent of out``, written in minigrad ops like the VJPs, so
# a tangent is differentiable again. A None tangent is zero; dual_apply calls a rule only for floating
# results. (cond, while and call nodes keep theirs beside their own rules, in control.py and trace.py.)
def _fit(t, out):
    """An input's tangent as a tangent of out: broadcast as the op broadcast the input, in out's dtype."""
    if t is None:
        return None
    at, ao = aval_of(t), aval_of(out)
    if at.shape is None or at.shape != ao.shape:
        t = P.broadcast_like(t, out)
    return t if at.dtype == ao.dtype else P.cast(t, dtype=ao.dtype)


def _tsum(out, *terms):
    """The sum of the tangent terms that are not None (zero), as a tangent of out; None if all are."""
    total = None
    for t in terms:
        if t is not None:
            total = t if total is None else P.add(total, t)
    return _fit(total, out)


def _scale(t, d):
    """t * d, one input's share of the tangent through its partial derivative d."""
    return None if t is None else P.mul(t, d)


def _derivative(d):
    """The JVP of a unary elementwise op from its one stated derivative ``d(x, out)``."""
    return lambda p, t, out: _scale(t[0], d(p[0], out))


def _linear(op):
    """The JVP of an op linear in its first input (reshapes, sums, indexing, cast, the *_like adjoints):
    the tangent goes through the op itself."""
    return lambda p, t, out, **params: None if t[0] is None else op(t[0], *p[1:], **params)


def _pow_jvp(p, t, out):
    """The VJP's masks: no d/dx where y == 0, no d/dy where x == 0 and y >= 0."""
    (x, y), (tx, ty) = p, t
    dx = dy = None
    if tx is not None and type(y) in (int, float):
        dx = None if y == 0 else P.mul(tx, P.mul(P.pow_(x, y - 1), y))
    elif tx is not None:
        y0 = P.equal(y, 0)
        dx = P.mul(tx, P.where(y0, 0, P.mul(y, P.pow_(x, P.add(P.where(y0, 1, y), -1)))))
    if ty is not None:
        x0 = P.mul(P.equal(x, 0), P.greater_equal(y, 0))
        dy = P.mul(ty, P.where(x0, 0, P.mul(out, P.log(P.where(x0, 1, x)))))
    return _tsum(out, dx, dy)


def _maximum_jvp(p, t, out):
    """Ties take half of each tangent, a nan both (the VJP's split, transposed)."""
    (x, y), (tx, ty) = p, t
    half = P.where(P.equal(x, y), 0.5, 1.0)
    return _tsum(out, None if tx is None else P.mul(tx, P.where(P.less(x, y), 0, half)),
                 None if ty is None else P.mul(ty, P.where(P.greater(x, y), 0, half)))


def _max_jvp(p, t, out, axis=None, keepdims=False, initial=None):
    """The mean of the tangents at the maxima (ties share; a nan max takes the nans'): the VJP transposed."""
    x, tx = p[0], t[0]
    if tx is None:
        return None
    at_max = P.equal(x, P.broadcast_like(out, x, axes=P.kept_axes(x, axis, keepdims)))
    mask = P.cast(P.add(at_max, P.not_equal(x, x)), dtype=aval_of(tx).dtype)
    count = P.maximum(P.sum_(mask, axis=axis, keepdims=keepdims), 1)     # 0 where `initial` won: no 0 / 0
    return P.div(P.sum_(P.mul(tx, mask), axis=axis, keepdims=keepdims), count)


def _concat_jvp(p, t, out, axis=0):
    """Zeros in out's dtype stand in for the inputs without a tangent."""
    if all(ti is None for ti in t):
        return None
    dt = aval_of(out).dtype
    parts = [P.broadcast_like(np.zeros((), dt), x) if ti is None else
             ti if aval_of(ti).dtype == dt else P.cast(ti, dtype=dt) for x, ti in zip(p, t)]
    return P.concatenate(*parts, axis=axis)


def _no_tangent(p, t, out, **params):     # comparisons (bool results) and stop_gradient
    return None


P.add.jvp = lambda p, t, out: _tsum(out, *t)
P.mul.jvp = lambda p, t, out: _tsum(out, _scale(t[0], p[1]), _scale(t[1], p[0]))
P.div.jvp = lambda p, t, out: _tsum(out, None if t[0] is None else P.div(t[0], p[1]),
                                    None if t[1] is None else P.neg(P.mul(t[1], P.div(out, p[1]))))
P.pow_.jvp, P.maximum.jvp, P.max_.jvp, P.concatenate.jvp = _pow_jvp, _maximum_jvp, _max_jvp, _concat_jvp
P.exp.jvp = _derivative(lambda x, out: out)
P.sin.jvp = _derivative(lambda x, out: P.cos(x))
P.cos.jvp = _derivative(lambda x, out: P.neg(P.sin(x)))
P.tanh.jvp = _derivative(lambda x, out: P.add(1, P.neg(P.mul(out, out))))
P.log.jvp = lambda p, t, out: P.div(t[0], p[0])          # t / x: one rounding (t * (1 / x) has two)
P.where.jvp = lambda p, t, out: _tsum(out, None if t[1] is None else P.where(p[0], t[1], 0),
                                      None if t[2] is None else P.where(p[0], 0, t[2]))
P.matmul.jvp = lambda p, t, out: _tsum(out, None if t[0] is None else P.matmul(t[0], p[1]),
                                       None if t[1] is None else P.matmul(p[0], t[1]))
for _op in (P.less, P.equal, P.stop_gradient):
    _op.jvp = _no_tangent
for _op in (P.cast, P.sum_, P.reshape, P.transpose, P.broadcast_to, P.getitem, P.scatter_add,
            P.sum_to_like, P.broadcast_like, P.reshape_like):
    _op.jvp = _linear(_op)


# ------------------------------------------------------------------ cond and while_loop (control.py's node kinds)
def _zero_tangent(v):
    """Zeros shaped like v, in its dtype (a Python float loop var is float32, as in a graph)."""
    return P.broadcast_like(np.zeros((), core.DEFAULT_FLOAT if type(v) is float else aval_of(v).dtype), v)


def _tangents(outs, ts):
    """Zeros for the float outputs whose tangent is None (a cond branch must return them all)."""
    return [_zero_tangent(o) if t is None and _float(o) else t for o, t in zip(outs, ts)]


def _cond_jvp(primals, tangents, outs, true_graph, false_graph):
    """The tangents of a cond are a cond over the branches pushed forward (one branch on values)."""
    pred, captured, tcap = primals[0], primals[1:], tangents[1:]
    if all(t is None for t in tcap):
        return [None] * len(outs)

    def branch(G):
        def fn():
            res, ts = push(lambda *c: replay(G, [], c), captured, tcap)
            return _tangents(res, ts) or []
        return fn
    if isinstance(pred, Symbol):
        return _cond_build(pred, branch(true_graph), branch(false_graph), 'cond_jvp')
    return branch(true_graph if bool(np.asarray(pred).reshape(-1)[0]) else false_graph)()


def _while_jvp(primals, tangents, outs, cond_graph, body_graph, max_iterations, name):
    """The tangents of a loop: one loop over the values and their tangents together (a while node on
    Symbols, a Python loop on values)."""
    n, nc = len(cond_graph.inputs), len(cond_graph.captures)
    vals, ccap, bcap, tb = list(primals[:n]), primals[n:n + nc], primals[n + nc:], tangents[n + nc:]
    fl = [i for i in range(n) if _float(body_graph.inputs[i])]
    if all(tangents[i] is None for i in fl) and all(t is None for t in tb):
        return [None] * len(outs)
    ts = [tangents[i] if tangents[i] is not None else _zero_tangent(vals[i]) for i in fl]

    def step(*vs):
        res, rt = push(lambda *a: replay(body_graph, a[:n], a[n:]), [*vs[:n], *bcap],
                       [*[vs[n + fl.index(i)] if i in fl else None for i in range(n)], *tb])
        return [*res, *_tangents([res[i] for i in fl], [rt[i] for i in fl])]
    test = lambda *vs: replay(cond_graph, vs[:n], ccap)[0]
    # the stack's tangent, for the reverse loop's JVP: the loop's iterations, each the values then the tangents
    if any(isinstance(v, Symbol) for v in (*vals, *bcap, *ts, *tb)):
        final = while_loop(test, step, [*vals, *ts], max_iterations, f'{name}_jvp')
        node = getattr(final[0], 'node', None)          # (a while node: not when vmap batched the loop)
        stack = node.outputs[-1] if node is not None and node.prim is WHILE else NO_STACK
    else:
        final, stack = [*vals, *ts], []
        while bool(np.asarray(test(*final)).reshape(-1)[0]):
            if len(stack) >= max_iterations:
                raise MaxIterationsError(f"while_loop '{name}': still running after max_iterations="
                                         f'{max_iterations} (forward mode)')
            stack.append(tuple(final))
            final = step(*final)
    result = [None] * (len(outs) - 1) + [stack]
    for k, i in enumerate(fl):
        result[i] = final[n + k]
    return result


NO_STACK = object()         # a loop vmap batched keeps no stack of the tangents


def dual_while(cond, body, values, limit, name, level):
    """mg.while_loop on Duals of ``level``: the loop vars become their primals followed by the tangents of
    the float ones (zeros where one has none yet: the body may read a Dual), and cond and body see Duals of
    the same level again, so the Duals they close over join in."""
    n = len(values)
    fl = [i for i, v in enumerate(values) if aval_of(v).dtype.kind == 'f']

    def split(vs):
        inner = [type(v) is Dual and v.level == level for v in vs]
        return [v.primal if d else v for v, d in zip(vs, inner)] + \
            [vs[i].tangent if inner[i] else _zero_tangent(vs[i]) for i in fl]

    def join(pt):
        ds = list(pt[:n])
        for k, i in enumerate(fl):
            ds[i] = Dual(pt[i], pt[n + k], level)
        return ds

    def step(*pt):
        r = body(*join(pt))
        return split([r] if not isinstance(r, (list, tuple)) else r)
    return join(while_loop(lambda *pt: cond(*join(pt)), step, split(values), limit, name))


def _iterations(stack, grad_graph, n):
    """A while node's saved iterations (the loop vars at the start of each); a stack that forward mode
    carries (a Dual) gives Duals, with the tangents its loop's JVP saved beside the values."""
    if type(stack) is not Dual:
        return stack
    if stack.tangent is NO_STACK or isinstance(_base(stack), Symbol):
        raise _on_symbols(grad_graph.name.rsplit('_grad', 1)[0])
    fl = [i for i in range(n) if _float(grad_graph.inputs[i])]
    return [tuple(Dual(e[i], e[n + fl.index(i)], stack.level) if i in fl else e[i] for i in range(n))
            for e in stack.tangent]


def reverse_loop(grad_graph, stack, rest) -> list:
    """A while_grad node's reverse loop on any values (Duals, Batched): the saved iterations popped in
    Python, each running the gradient body through core.apply."""
    n_ct = len(rest) - len(grad_graph.captures)
    cts, caps, acc = list(rest[:n_ct]), rest[n_ct:], None
    for vals in reversed(_iterations(stack, grad_graph, len(grad_graph.inputs) - n_ct)):
        res = replay(grad_graph, [*vals, *cts], caps)
        cts, inv = res[:n_ct], res[n_ct:]
        acc = inv if acc is None else [P.add(a, b) for a, b in zip(acc, inv)]
    if acc is None:
        acc = [P.broadcast_like(np.zeros((), grad_graph.outputs[n_ct + i].dtype), caps[k])
               for i, k in enumerate(_float_caps(grad_graph))]
    return [*cts, *acc]


def _while_grad_jvp(primals, tangents, outs, grad_graph, name):
    """The tangents of the reverse loop: the same loop on Duals, each saved iteration with the tangents of
    its loop vars, which the loop's own JVP saved (the stack's tangent)."""
    stack, saved = primals[0], tangents[0]
    if all(t is None for t in tangents):
        return [None] * len(outs)
    if saved is NO_STACK or isinstance(_base(stack), Symbol):
        raise _on_symbols(name)
    n = len(grad_graph.inputs) - (len(primals) - 1 - len(grad_graph.captures))
    fl = [i for i in range(n) if _float(grad_graph.inputs[i])]
    entries = saved if saved is not None else [(*e, *[None] * len(fl)) for e in _iterations(stack, grad_graph, n)]
    pairs = [(e[i], e[n + fl.index(i)] if i in fl else None) for e in entries for i in range(n)]
    m = len(entries)
    _, ts = push(lambda *a: reverse_loop(grad_graph, [a[k * n:(k + 1) * n] for k in range(m)], a[m * n:]),
                 [p for p, _ in pairs] + list(primals[1:]), [t for _, t in pairs] + list(tangents[1:]))
    return ts


def _on_symbols(name):
    return ForwardError(f"jvp: forward mode through the gradient of while_loop '{name}' (a Hessian) runs on "
                        f'Tensors and arrays, not on Symbols (inside mg.jit / mg.trace): take it outside the jit '
                        f'function, or by forward mode twice (mg.jacfwd(mg.jacfwd(f)))')


COND.jvp, WHILE.jvp, WHILE_GRAD.jvp = _cond_jvp, _while_jvp, _while_grad_jvp
