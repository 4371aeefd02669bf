"""What the compiler reads from each primitive's record, written here beside the compiler (the
op table in ops.py keeps what the tape needs: impl, shape rule, VJP).

* ``ufunc``: the numpy ufunc (by name) generated code calls with an ``out=`` buffer (set by ops.py's
  ``ew`` for the elementwise primitives, since it is their impl);
* ``emit(args, out, params, ctx) -> str``: the generated numpy code of an op that is no plain ufunc
  call (``out`` is a planned buffer's name or None; ``ctx.fn``/``ctx.lit``/``ctx.const`` bind values);
* ``unit`` / ``zero`` (simplify): ``op(x, unit) == x``; ``op(x, zero) == zero`` for integers;
* ``compose(inner, outer, ndim)`` (simplify): ``op(op(x, inner), outer)`` as one op's params, or None
  when the two cancel;
* ``lower(b, *ins, **params)`` (specialize): the op with static shapes in simpler ops, or None;
* ``kernel(args, params, ctx) -> str``: the op as a scalar expression inside a numba loop kernel
  (tanh, exp and log call approx.py's vectorisable approximations; sin and cos have no rule yet);
* ``match`` / ``decompose``: a compiler op's pattern and the sub-graph it stands for (compiler/ops.py).

A learner's own primitive can carry the same fields (``register_primitive(..., emit=..., kernel=...)``).
"""
from __future__ import annotations

import numpy as np

from ..core import ops as P
from ..core.graph import GROUP
from . import approx
from .rewrite import known


# ------------------------------------------------- emit: generated numpy code
def _call(fn, *args, out=None):
    """Generated code for ``fn(*args, out)``; ``fn`` is a bound numpy function name."""
    return f'{fn}({", ".join(args + ((out,) if out else ()))})'


def _emit_view(fn):
    """A view op: ``np.<fn>(x, <its one param>)``."""
    return lambda a, out, params, ctx: _call(ctx.fn(fn), a[0], *[ctx.lit(v) for v in params.values()])


def _emit_into(expr):
    """An op whose numpy form allocates: copy into the planned buffer when there is one."""
    def emit(a, out, params, ctx):
        e = expr(a, params, ctx)
        return f"{ctx.fn('copyto')}({out}, {e}, casting='unsafe')" if out else e
    return emit


def _emit_where(a, out, params, ctx):
    if not out:
        return _call(ctx.fn('where'), *a)
    copy = ctx.fn('copyto')          # two passes that keep inf/nan exact: y everywhere, then x where c
    return f'{copy}({out}, {a[2]}); {copy}({out}, {a[1]}, where={a[0]})'


def _emit_reduce(ufunc):
    """``np.add.reduce(x, axis, dtype, out, keepdims)``: one pass, into the planned buffer."""
    def emit(a, out, params, ctx):
        dt = ctx.dtype(ctx.out_dtype) if ctx.out_dtype != ctx.in_dtypes[0] else 'None'
        initial = [ctx.const(params['initial'])] if params.get('initial') is not None else []
        e = _call(ctx.fn(f'{ufunc}.reduce'), a[0], ctx.lit(params.get('axis')), dt, out or 'None',
                  ctx.lit(params.get('keepdims', False)), *initial)
        return e if out else f"{ctx.fn('asarray')}({e})"
    return emit


def _emit_method(name):
    """A view op as the array's method, ``x.reshape(shape)``: 10x cheaper than ``np.reshape(x, shape)``
    (every value in generated code is an ndarray or numpy scalar, which have the same methods)."""
    # speed: the array's method, not numpy's function (which wraps it)
    return lambda a, out, params, ctx: f'{a[0]}.{name}({", ".join(ctx.lit(v) for v in params.values())})'


P.reshape.emit, P.transpose.emit = _emit_method('reshape'), _emit_method('transpose')
P.broadcast_to.emit = _emit_view('broadcast_to')
P.where.emit = _emit_where
P.sum_.emit, P.max_.emit = _emit_reduce('add'), _emit_reduce('maximum')
P.cast.emit = _emit_into(lambda a, p, ctx: f"{ctx.fn('asarray')}({a[0]}).astype({ctx.dtype(p['dtype'])})")
P.getitem.emit = _emit_into(lambda a, p, ctx: f"{a[0]}[{ctx.lit(p['idx'])}]")
P.matmul.emit = lambda a, out, params, ctx: _call(ctx.fn('matmul'), *a, out=out)
P.concatenate.emit = lambda a, out, params, ctx: _call(ctx.fn('concatenate'), f'({", ".join(a)},)',
                                                       ctx.lit(params.get('axis', 0)), out=out)
P.stop_gradient.emit = lambda a, out, params, ctx: a[0]
# speed: a group's value written as a store of True into its buffer, not a call of its impl
GROUP.emit = lambda a, out, params, ctx: f'{out}[()] = True' if out else f"{ctx.fn('array')}(True)"   # its inputs ran


# ------------------------------------------------- simplify: units, zeros, composition
P.add.unit = -0.0           # x + -0.0 is x exactly (x + 0.0 is not, for x = -0.0)
P.mul.unit, P.mul.zero = 1, 0


def _compose_transpose(inner, outer, ndim):
    """transpose(transpose(x, a), b) is transpose(x, a[b]); None when that is the identity."""
    a = tuple(reversed(range(ndim))) if inner.get('axes') is None else tuple(inner['axes'])
    b = tuple(reversed(range(ndim))) if outer.get('axes') is None else tuple(outer['axes'])
    axes = tuple(a[i] for i in b)
    return None if axes == tuple(range(ndim)) else {'axes': axes}


P.transpose.compose = _compose_transpose
P.reshape.compose = lambda inner, outer, ndim: outer


# ------------------------------------------------- lower: with static shapes, simpler ops
def _lower_sum_to_like(b, x, ref):
    """Sum over the broadcast axes, reshape, cast."""
    if not (known(x) and known(ref)):
        return None
    lead = len(x.shape) - len(ref.shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(ref.shape) if d == 1 and x.shape[i + lead] != 1)
    dropped = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if axes:    # speed: a sum that drops its axes when that gives ref's shape (no reshape step after it)
        x = b.emit(P.sum_, [x], axis=axes, keepdims=dropped != tuple(ref.shape))
    if tuple(x.shape) != tuple(ref.shape):
        x = b.emit(P.reshape, [x], shape=tuple(ref.shape))
    dt = P.sum_to_like.shape_rule(x, ref).dtype
    return x if x.dtype == dt else b.emit(P.cast, [x], dtype=dt)


def _lower_broadcast_like(b, x, ref, axes=()):
    """Re-insert the reduced axes (reshape), then broadcast_to."""
    if not known(ref) or (axes and not known(x)):
        return None
    if axes:
        shape = list(x.shape)
        for a in sorted(axes):
            shape.insert(a, 1)
        x = b.emit(P.reshape, [x], shape=tuple(shape)) if tuple(shape) != tuple(x.shape) else x
    return x if known(x) and tuple(x.shape) == tuple(ref.shape) else \
        b.emit(P.broadcast_to, [x], shape=tuple(ref.shape))


def _lower_reshape_like(b, x, ref):
    if not known(ref):
        return None
    same = _no_op(b, x, ref.shape)
    return b.emit(P.reshape, [x], shape=tuple(ref.shape)) if same is None else same


def _no_op(b, x, shape):
    """reshape / broadcast_to to the shape x already has: x itself."""
    return x if known(x) and tuple(x.shape) == tuple(shape) else None


def _lower_matmul(b, x, y):
    """A contracted dim of size 1 makes matmul an outer product: a broadcast multiply (+ 0.0,
    as matmul's sum starts from +0.0: -0.0 becomes +0.0)."""
    # speed: a multiply, which may fuse, for numpy's matmul (no BLAS call at K=1); the same bits
    if known(x) and known(y) and len(x.shape) >= 2 and len(y.shape) >= 2 and x.shape[-1] == 1:
        p = b.emit(P.mul, [x, y])
        return b.emit(P.add, [p, b.graph.lift(np.zeros((), p.dtype))]) if p.dtype.kind == 'f' else p
    return None


P.sum_to_like.lower, P.broadcast_like.lower, P.matmul.lower = _lower_sum_to_like, _lower_broadcast_like, _lower_matmul
P.reshape_like.lower, P.reshape.lower, P.broadcast_to.lower = _lower_reshape_like, _no_op, _no_op
P.stop_gradient.lower = lambda b, x: x


# ------------------------------------------------- kernel: a scalar expression in a loop kernel
def _infix(symbol):
    return lambda a, params, ctx: f'{a[0]} {symbol} {a[1]}'


P.add.kernel, P.mul.kernel, P.pow_.kernel = _infix('+'), _infix('*'), _infix('**')
P.div.kernel = _infix('/')          # x/0 is inf/nan: kernels use error_model='numpy'
P.less.kernel, P.equal.kernel = _infix('<'), _infix('==')
P.maximum.kernel = lambda a, params, ctx: f'{a[0]} if {a[0]} > {a[1]} or {a[0]} != {a[0]} else {a[1]}'  # nan wins
P.where.kernel = lambda a, params, ctx: f'{a[1]} if {a[0]} else {a[2]}'
P.cast.kernel = P.stop_gradient.kernel = lambda a, params, ctx: a[0]   # the kernel converts values to each op's dtype
# a view with a kernel rule is read through: a loop kernel reads broadcast_to's input broadcast to the loop
P.broadcast_to.kernel = lambda a, params, ctx: a[0]
# a reduction of a kernel's result, accumulated by that kernel (lower.py absorbs it): combine (accumulator,
# element) from the unit; a sum over the leading or the last axis (numpy's order), a max (any order) over any
# one axis. A sum starts from +0.0 as numpy's add.reduce does: a column of -0.0 sums to +0.0
P.sum_.kernel, P.sum_.unit = (lambda a, params, ctx: f'{a[0]} + {a[1]}'), 0.0
P.max_.kernel, P.max_.unit = P.maximum.kernel, -np.inf     # nan wins; a tie takes the later element, as numpy
# reductions whose result does not depend on the order of the elements (but the sign of a zero max: numpy's
# own SIMD reduction takes either zero of a tie)
ANY_ORDER = frozenset({P.max_})


def _approx(name):
    """tanh/exp/log by approx.py's vectorisable forms (libm calls would keep the loop scalar)."""
    return lambda a, params, ctx: approx.call(name, ctx.dtype, a[0], ctx)


P.tanh.kernel, P.exp.kernel, P.log.kernel = _approx('tanh'), _approx('exp'), _approx('log')
