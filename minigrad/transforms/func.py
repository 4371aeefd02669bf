"""Functional transformations in the style of torch.func and JAX: grad, value_and_grad, hessian, and
Jacobians in one batched pass.

`grad` traces ``fn`` once on placeholders shaped like one example, adds its gradient with
`mg.gradients` (the same VJP records as the tape) and then *replays* that gradient graph on the actual
arguments through `core.apply`. So the same code runs on Tensors (eager, recorded on the tape), on
Symbols (the nodes join the caller's graph), on Duals (forward over reverse: Hessians) and on Batched
values. Under mg.vmap the trace holds the whole batch instead (fn under vmap on batched placeholders,
the gradient of the per-example values' sum, each differentiated argument one copy per example), so
per-example gradients go through every op, cond and while_loop included.
"""
from __future__ import annotations

import numpy as np

from ..core import primitive as core
from .batching import Batched, current_vmap, scope, vmap
from ..core.interpreter import replay
from ..core.primitive import aval_of, describe
from ..core.errors import MinigradError
from ..core import ops as P
from .forward import Dual, push, _one_input, _one_output
from ..core.functional import reshape
from ..core.graph import Symbol, constant, get_default_graph, gradients, placeholder
from ..core.tensor import Tensor, enable_grad
from ..pytree import flatten, unflatten
from .trace import TracingGraph


class GradError(MinigradError):
    """mg.grad / value_and_grad / hessian cannot differentiate this function or argument."""


_VALUES = (Tensor, Symbol, Dual, Batched)


class _Captured:
    """Tensors ``fn`` closes over become placeholders of the trace, fed the Tensors themselves on replay
    (so a gradient still reaches them through the tape)."""

    def __init__(self):
        self.tensors, self.syms = [], []

    def __call__(self, graph, t):
        for known, s in zip(self.tensors, self.syms):
            if known is t:
                return s
        with graph.as_default():
            self.syms.append(placeholder(t.dtype, t.shape, name=t.name or 'captured'))
        self.tensors.append(t)
        return self.syms[-1]


class _GradGraph(TracingGraph):
    """The graph mg.grad traces fn into. A Symbol's value asked for while tracing (a Python if, float(), .item())
    has none: the error says what to do under mg.grad."""
    __slots__ = ()

    def concrete(self, sym, what, convert):
        if self.rule is None:                       # the trace is over
            return TracingGraph.concrete(self, sym, what, convert)
        raise GradError(f"{self.name}: {what} of {describe(sym)} (from '{sym.op}') needs a value, but mg.grad "
                        f'traces fn once on placeholders, so Python control flow on values (if/while, float(), '
                        f'.item(), a mg.jit graph break) cannot be differentiated there. Choose by value with '
                        f'mg.where / mg.cond / mg.while_loop, or differentiate one run on the tape: '
                        f'x = mg.tensor(..., requires_grad=True); fn(x).backward(); x.grad')


def _lanes(leaves, argnums, entry, who):
    """mg.grad under mg.vmap: each leaf as its batched array (axis 0: the examples; the differentiated ones
    repeated when unbatched, so each example gets its own copy and gradient), and each leaf's in_axes."""
    level, size = entry
    raw, axes = [], []
    for i, vs in enumerate(leaves):
        batched = [type(v) is Batched and v.level == level for v in vs]
        raw.append([v.val if b else _repeat(v, size, who) if i in argnums else v for v, b in zip(vs, batched)])
        axes += [0 if b or i in argnums else None for b in batched]
    return raw, axes


def _repeat(v, size, who):
    if size is None:
        raise GradError(f'{who}: under mg.vmap with an unknown batch size, every differentiated argument must be '
                        f'batched (give the placeholders a full shape)')
    return P.broadcast_to(P.getitem(v, idx=(None,)), shape=(size,) + tuple(aval_of(v).shape))


def _call(fn, axes, leaves, trees, phs, kwargs):
    """fn on the placeholders (keyword arguments as given: not differentiated); with ``axes`` (mg.grad under
    mg.vmap), as vmap over the examples (axis 0)."""
    with scope(None):               # fn sees placeholders: no batched values of enclosing vmaps inside the trace
        if axes is None:
            return fn(*[unflatten(t, p) for t, p in zip(trees, phs)], **kwargs)
        counts = [len(vs) for vs in leaves]

        def per_example(*xs):
            it = iter(xs)
            return fn(*[unflatten(t, [next(it) for _ in range(n)]) for t, n in zip(trees, counts)], **kwargs)
        return vmap(per_example, in_axes=axes)(*[p for ps in phs for p in ps])


def _trace(fn, leaves, trees, argnums, has_aux, who, axes=None, kwargs=None):
    """fn traced on placeholders: (graph, inputs, captured tensors, the d/d placeholders of argnums, value,
    aux leaves, aux TreeDef). With ``axes`` the leaves are batches and the gradient is taken of the per-example values' sum."""
    g = _GradGraph(f'{who} of {getattr(fn, "__name__", "fn")}', _Captured(), parent=get_default_graph())
    with g.as_default(), enable_grad():             # an outer mg.no_grad() does not stop it (as torch.func)
        phs = [[placeholder(aval_of(v).dtype, aval_of(v).shape, name=f'arg{i}') for v in vs]
               for i, vs in enumerate(leaves)]
        out, aux = _call(fn, axes, leaves, trees, phs, kwargs or {}), None
        g.no_grad.clear()                           # and a no_grad inside fn is stop_gradient: zeros there
        if has_aux:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise GradError(f'{who}: has_aux=True needs fn to return a pair (value, aux), got '
                                f'{type(out).__name__}')
            out, aux = out
        value = _checked(_own(out, g, who), axes is not None, who)
        xs = [p for i in argnums for p in phs[i]]
        grads = gradients(P.sum_(value) if axes is not None else value, xs) if xs else []
        aux_leaves, aux_tree = flatten(aux)
        aux_leaves = [_own(a, g, who) if isinstance(a, core.Value) else a for a in aux_leaves]     # (data as is)
    hook = g.rule
    g.close()
    inputs = [p for ps in phs for p in ps] + hook.syms
    return g, inputs, hook.tensors, grads, value, aux_leaves if has_aux else [], aux_tree


def _own(v, g, who):
    """A value fn returned, as a Symbol of the trace g. A Tensor, plain data or a Symbol of an enclosing graph
    does not depend on the arguments (its gradient is zero); a value of an enclosing vmap or jvp may, unseen."""
    if isinstance(v, (Dual, Batched)):
        raise GradError(f'{who}: fn returned {describe(v)}, which is not computed from its arguments '
                        f'here; a value of an enclosing vmap or jvp must be passed as an argument')
    return g.lift(v)


def _checked(out, per_example, who):
    """fn's value: a float scalar Symbol of the trace (one per example under vmap: shape (n,))."""
    if len(out.shape or ()) != per_example or out.dtype.kind != 'f':
        raise GradError(f'{who}: fn must return a float scalar (shape ()), got {describe(out)}'
                        f'{" (the batch of examples first)" if per_example else ""}; sum it or use mg.jacrev '
                        f'for a non-scalar output')
    return out


def _argnums(argnums, n, who):
    nums = argnums if isinstance(argnums, (tuple, list)) else (argnums,)
    for a in nums:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not -n <= a < n:
            raise GradError(f'{who}: argnums {argnums!r} does not name an argument of the {n} given '
                            f'(ints from 0 to {n - 1})')
    return [int(a) % n for a in nums]


def _leaves(args, argnums, who):
    """Each argument's leaves as values (plain data becomes Tensors) and its TreeDef."""
    leaves, trees = [], []
    for i, a in enumerate(args):
        vs, t = flatten(a)
        vs = [v if isinstance(v, _VALUES) else core.hooks.lift(v) for v in vs]
        for v in vs:
            if i in argnums and aval_of(v).dtype.kind != 'f':
                raise GradError(f'{who}: argument {i} is {describe(v)}; only float arguments can be '
                                f'differentiated (convert it with .astype(mg.float32), or leave it out of argnums)')
            if aval_of(v).shape is None or None in aval_of(v).shape:
                raise GradError(f'{who}: argument {i} is {describe(v)} without a full shape; give the '
                                f'placeholder a shape')
        leaves.append(vs)
        trees.append(t)
    return leaves, trees


def value_and_grad(fn, argnums=0, has_aux=False):
    """``fn(*args)`` and its gradient with respect to the argument(s) ``argnums`` (as jax.value_and_grad).

    ``fn`` returns a float scalar (or ``(scalar, aux)`` with ``has_aux=True``: the result is then
    ``((value, aux), grads)``). An argument may be a dict, list or tuple of arrays; its gradient has the
    same structure. A tuple ``argnums`` gives a tuple of gradients.

    >>> import minigrad as mg
    >>> v, g = mg.value_and_grad(lambda x: (x * x).sum())(mg.tensor([1.0, 2.0]))
    >>> v.item(), g.tolist()
    (5.0, [2.0, 4.0])
    """
    who = 'value_and_grad'
    if not callable(fn):
        raise GradError(f'{who}: fn must be a function, got {type(fn).__name__}')

    def value_and_grad_fn(*args, **kwargs):     # keyword arguments: passed to fn, not differentiated
        nums = _argnums(argnums, len(args), who)
        leaves, trees = _leaves(args, nums, who)
        entry, axes, wrap = current_vmap(), None, None
        if entry is not None and any(type(v) is Batched and v.level == entry[0] for vs in leaves for v in vs):
            (leaves, axes), wrap = _lanes(leaves, nums, entry, who), lambda v: Batched(v, entry[0])
        g, inputs, captured, grads, out, aux, aux_tree = _trace(fn, leaves, trees, nums, has_aux, who, axes, kwargs)
        vals = replay(g, [v for vs in leaves for v in vs] + captured, [c for c, _ in g.captures], inputs=inputs,
                      outputs=[out, *grads, *[a for a in aux if isinstance(a, Symbol)]])
        vals = [wrap(_as_value(v, leaves)) if wrap else _as_value(v, leaves) for v in vals]
        value, rest = vals[0], iter(vals[1:])
        per_arg = [unflatten(trees[i], [next(rest) for _ in leaves[i]]) for i in nums]
        aux_val = unflatten(aux_tree, [next(rest) if isinstance(a, Symbol) else a for a in aux]) if has_aux else None
        res = tuple(per_arg) if isinstance(argnums, (tuple, list)) else per_arg[0]
        return ((value, aux_val) if has_aux else value), res
    return value_and_grad_fn


def _as_value(v, leaves):
    """A constant the replay gave as numpy becomes a Tensor when the arguments are Tensors."""
    if isinstance(v, _VALUES) or any(isinstance(x, (Symbol, Batched, Dual)) for vs in leaves for x in vs):
        return v
    return core.hooks.lift(np.asarray(v))


def grad(fn, argnums=0, has_aux=False):
    """The gradient of a scalar ``fn`` with respect to argument ``argnums`` (as jax.grad / torch.func.grad).

    Composes with mg.vmap (per-example gradients), mg.jvp / mg.jacfwd (Hessians), mg.jit and Symbols.

    >>> import minigrad as mg
    >>> mg.grad(lambda x, y: (x * y).sum(), argnums=(0, 1))(mg.tensor([1.0]), mg.tensor([3.0]))
    (tensor([3.]), tensor([1.]))
    """
    vg = value_and_grad(fn, argnums, has_aux)

    def grad_fn(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return grad_fn


def _basis(x, shape):
    """The unit vectors of `shape` stacked on axis 0, as a value that can meet x (a graph constant for Symbols)."""
    n = int(np.prod(shape))
    eye = np.eye(n, dtype=aval_of(x).dtype).reshape((n,) + tuple(shape))
    while isinstance(x, (Batched, Dual)):               # (a batch or a Dual of Symbols: a constant too)
        x = x.val if type(x) is Batched else x.primal
    return constant(eye, graph=x.graph) if isinstance(x, Symbol) else core.hooks.lift(eye)


def jacfwd(fn):
    """The Jacobian of ``fn`` (one array in, one out) by forward mode, as ONE batched pass: mg.vmap of the
    JVP over the input basis (not one jvp per column, as lesson 09 builds it). ``.passes`` is 1.

    >>> import minigrad as mg
    >>> J = mg.jacfwd(lambda x: x * x)
    >>> J(mg.tensor([1.0, 2.0])).tolist(), J.passes
    ([[2.0, 0.0], [0.0, 4.0]], 1)
    """
    def jac(x):
        x = _one_input(x, 'jacfwd')
        shape = aval_of(x).shape

        def column(v):
            (out,), (t,) = push(lambda p: [_one_output(fn(p), 'jacfwd')], [x], [v])
            return P.broadcast_like(np.zeros((), aval_of(out).dtype), out) if t is None else t
        cols = vmap(column, out_axes=-1)(_basis(x, shape))
        jac.passes = 1
        return reshape(cols, aval_of(cols).shape[:-1] + tuple(shape))
    jac.passes = 0
    return jac


def jacrev(fn):
    """The Jacobian of ``fn`` (one array in, one out) by reverse mode, as ONE batched pass: the gradient
    graph with a cotangent input, replayed under mg.vmap over the output basis. ``.passes`` is 1.

    >>> import minigrad as mg
    >>> J = mg.jacrev(lambda x: x * x)
    >>> J(mg.tensor([1.0, 2.0])).tolist(), J.passes
    ([[2.0, 0.0], [0.0, 4.0]], 1)
    """
    def jac(x):
        x = _one_input(x, 'jacrev')
        # x batched by the innermost mg.vmap: the trace holds the whole batch (as mg.grad's, see _lanes)
        entry = current_vmap() if type(x) is Batched else None
        lanes = entry is not None and x.level == entry[0]
        xv, lead = (x.val, (entry[1],)) if lanes else (x, ())
        hook = _Captured()
        g = TracingGraph(f'jacrev of {getattr(fn, "__name__", "fn")}', hook, parent=get_default_graph())
        with g.as_default(), enable_grad():         # (as mg.grad: an outer no_grad does not stop it)
            p = placeholder(x.dtype, lead + tuple(x.shape), name='x')
            with scope(None):
                out = g.lift(_one_output(vmap(fn)(p) if lanes else fn(p), 'jacrev'))
            g.no_grad.clear()
            seed = placeholder(out.dtype, out.shape, name='seed')
            gx = gradients(out, [p], [seed])[0]
        g.close()
        shape = tuple(out.shape)[len(lead):]
        rows = vmap(lambda s: replay(g, [xv, _repeat(s, lead[0], 'jacrev') if lanes else s] + hook.tensors,
                                     [c for c, _ in g.captures], inputs=[p, seed] + hook.syms, outputs=[gx])[0],
                    out_axes=len(lead))(_basis(xv, shape))
        jac.passes = 1
        rows = reshape(rows, lead + shape + tuple(x.shape))
        return Batched(rows, entry[0]) if lanes else rows
    jac.passes = 0
    return jac


def hessian(fn, argnums=0):
    """The Hessian of a scalar ``fn`` by argument ``argnums`` (an array): forward over reverse, jacfwd of mg.grad
    in one pass. A tuple ``argnums`` gives the blocks d/d args[j] of the gradient by args[i] as a tuple (i) of
    tuples (j), as jax.hessian and torch.func.hessian. Keyword arguments pass through to fn.

    >>> import minigrad as mg
    >>> mg.hessian(lambda x: (x ** 3).sum())(mg.tensor([1.0, 2.0])).tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    >>> mg.hessian(lambda x, y: (x * y * y).sum(), argnums=1)(mg.tensor([1.0, 2.0]), mg.tensor([3.0, 4.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    if not callable(fn):
        raise GradError(f'hessian: fn must be a function, got {type(fn).__name__}')

    def hess(*args, **kwargs):
        nums = _argnums(argnums, len(args), 'hessian')
        rows = tuple(tuple(_block(fn, i, j, args, kwargs) for j in nums) for i in nums)
        return rows if isinstance(argnums, (tuple, list)) else rows[0][0]
    return hess


def _block(fn, i, j, args, kwargs):
    """d/d args[j] of fn's gradient by args[i], by the one-pass forward-mode Jacobian."""
    def grad_i(a):
        return grad(fn, i)(*args[:j], a, *args[j + 1:], **kwargs)
    return jacfwd(grad_i)(args[j])


def functional_call(module, params, *args, **kwargs):
    """``module(*args)`` with its parameters replaced by ``params`` (a dict from names of
    ``module.named_parameters()`` to values), as torch.func.functional_call: a Module's parameters
    become an argument of mg.grad / mg.vmap. The module is restored afterwards (not thread-safe).

    >>> import minigrad as mg
    >>> lin = mg.nn.Linear(2, 1)
    >>> p = {'weight': mg.tensor([[1.0, 2.0]]), 'bias': mg.tensor([0.5])}
    >>> mg.func.functional_call(lin, p, mg.tensor([1.0, 1.0])).tolist()
    [3.5]
    """
    names = dict(module.named_parameters())
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise GradError(f'functional_call: {type(module).__name__} has no parameters {unknown}; its parameters '
                        f'are {sorted(names)}')
    swaps = []
    try:
        for name, value in params.items():
            *path, attr = name.split('.')
            owner = module
            for p in path:
                owner = owner.__dict__['_modules'][p]
            swaps.append((owner, attr, owner.__dict__[attr]))
            object.__setattr__(owner, attr, value)      # (not Module.__setattr__: the registry keeps its Parameter)
        return module(*args, **kwargs)
    finally:
        for owner, attr, old in reversed(swaps):
            object.__setattr__(owner, attr, old)
