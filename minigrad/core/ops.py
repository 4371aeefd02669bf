"""The op table: every primitive with its numpy impl, shape rule and VJP, side by side.

A primitive is an op with its own implementation and derivative rules; everything
else is a composite of primitives (functional.py) with no derivative code of its own.
Graph-structure nodes (placeholder, constant, variable, assign in graph.py; cond,
while and its gradient in control.py) are node kinds, not primitives, and the ops
that only the compiler introduces (fma, fused groups, ...) are declared once, in
minigrad/compiler/ops.py. The primitives (27):

* elementwise: add mul div pow exp log sin cos tanh maximum where less equal cast stop_gradient
* reductions: sum max;  shapes: reshape transpose broadcast_to;  indexing: getitem scatter_add
* matmul concatenate;  shape-polymorphic adjoints for unknown shapes: sum_to_like broadcast_like
  reshape_like (what undoes broadcasting, reductions and reshapes when sizes are only known at run time)

Negation, subtraction (in numpy 2's result dtype, NEP 50), ``>``, ``<=``, ``>=``, ``!=`` and ``flip`` (what
min is made of) are composites below (the rules use them).

VJPs are written with the primitives themselves, so one rule computes numbers during a plain
backward (numpy in, numpy out), records a new graph with ``create_graph=True`` (Tensors in) and adds
backward nodes to a static graph (Symbols in). VJP signature: ``vjp(needs, g, out, *inputs, **params)``.
The other interpretations fill their own fields of these records beside the code that reads them:
forward.py the JVP rules, compiler/rules.py what the compiler emits, simplifies and lowers, export.py
the ONNX form (see core.Primitive).
"""
from __future__ import annotations

import functools
import operator

import numpy as np

from .primitive import (Aval, Primitive, elementwise_rule, broadcast_shapes, fmt_shape, aval_of,
                        bool_, normalize_axes, Value, register_primitive)
from .validate import check_dtype
from .dtypes import result_dtype, exact_ints, int_range, NEP50
from .errors import InputError, ShapeError


prim = register_primitive       # every record below goes into core.PRIMITIVES


def ew(name, impl, vjp=None, **flags) -> Primitive:
    """An elementwise primitive: a numpy ufunc (broadcasting, dtype promotion, an out= buffer)."""
    rule = functools.partial(elementwise_rule, _op=name, _ufunc=impl)
    return prim(name, impl, rule, vjp, elementwise=True, ufunc=impl.__name__, **flags)


def _ndim(x):
    s = aval_of(x).shape
    return None if s is None else len(s)


# ------------------------------------------------- helpers for broadcasting in VJPs
def _sum_to_like_impl(g, ref):
    shape, dt = ref.shape if type(ref) is np.ndarray else np.shape(ref), ref.dtype
    gs = g.shape if type(g) is np.ndarray else np.shape(g)
    if gs != shape:
        lead = len(gs) - len(shape)
        ones = tuple(i + lead for i, d in enumerate(shape) if d == 1 and gs[i + lead] != 1)
        if ones:
            g = np.add.reduce(g, axis=tuple(range(lead)) + ones, keepdims=True)
            g = g.reshape(shape) if lead else g
        elif lead:                          # only leading axes were added: sum them away
            g = np.add.reduce(g, axis=tuple(range(lead)) if lead > 1 else 0)
        else:
            g = np.reshape(g, shape)
    return g if g.dtype == dt else g.astype(dt)


def _unbroadcast(g, x):
    """sum_to_like(g, x): the gradient of a broadcast input summed back to its shape. A graph (or a recorded
    backward) gets no no-op node where both shapes are known and equal."""
    if isinstance(g, Value) and isinstance(x, Value) and g.level == x.level and g.dtype == x.dtype \
            and g.shape == x.shape and _static(g.shape):
        return g
    return sum_to_like(g, x)


def _static(shape):
    return shape is not None and None not in shape


def _like_rule(g, ref, **params):
    return Aval(ref.shape, ref.dtype if ref.dtype.kind == 'f' else g.dtype)


def _broadcast_like_impl(g, ref, axes=()):
    shape = np.shape(ref)
    # re-insert the reduced axes as size 1 (a cheap reshape instead of np.expand_dims)
    if axes:
        gs = iter(np.shape(g))
        g = np.reshape(g, tuple(1 if i in axes else next(gs) for i in range(len(shape))))
    return np.broadcast_to(g, shape)


def _to_ref_rule(g, ref, axes=()):
    """broadcast_like and reshape_like: ref's shape, g's dtype."""
    return Aval(ref.shape, g.dtype)


sum_to_like = prim('sum_to_like', _sum_to_like_impl, _like_rule,
                   lambda n, g, out, x, ref: (broadcast_like(g, x), None), saves_inputs=False,
                   doc='sum x down to the shape of ref (undoes broadcasting); VJP of broadcasting')
broadcast_like = prim('broadcast_like', _broadcast_like_impl, _to_ref_rule,
                      lambda n, g, out, x, ref, axes=(): (
                          sum_to_like(sum_(g, axis=axes) if axes else g, x), None), saves_inputs=False,
                      doc='broadcast x (with the reduced `axes` re-inserted) to the shape of ref')
reshape_like = prim('reshape_like', lambda g, ref: np.reshape(g, np.shape(ref)), _to_ref_rule,
                    lambda n, g, out, x, ref: (reshape_like(g, x), None), saves_inputs=False,
                    doc='reshape x to the shape of ref; VJP of reshape')


# ------------------------------------------------- elementwise arithmetic
# x + -0.0 is x exactly (x + 0.0 is not for x = -0.0)
add = ew('add', np.add, lambda n, g, out, x, y: (
    _unbroadcast(g, x) if n[0] else None,
    _unbroadcast(g, y) if n[1] else None), saves_inputs=False)
mul = ew('mul', np.multiply, lambda n, g, out, x, y: (
    _unbroadcast(mul(g, y), x) if n[0] else None,
    _unbroadcast(mul(g, x), y) if n[1] else None))
# d/dy as PyTorch: -g * (x/y) / y
div = ew('div', np.true_divide, lambda n, g, out, x, y: (
    _unbroadcast(div(g, y), x) if n[0] else None,
    _unbroadcast(neg(mul(g, div(out, y))), y) if n[1] else None), saves_out=True)


def _pow_vjp(n, g, out, x, y):
    """PyTorch's masks: d/dx is 0 where y == 0 (y * x**(y-1) would be nan at x = 0), and
    d/dy = x**y * log(x) is 0 where x == 0 and y >= 0."""
    gx = gy = None
    if n[0]:
        if type(y) in (int, float):     # x ** c: no masks needed
            gx = where(True, 0, g) if y == 0 else mul(mul(g, y), pow_(x, y - 1))
        else:
            y0 = equal(y, 0)
            y_safe = where(y0, 1, y)                            # no 0 ** -1 warning
            gx = where(y0, 0, mul(mul(g, y), pow_(x, add(y_safe, -1))))
        gx = _unbroadcast(gx, x)
    if n[1]:
        x0 = mul(equal(x, 0), greater_equal(y, 0))      # bool * bool: and
        log_x = log(where(x0, 1, x))                            # no log(0) warning
        gy = _unbroadcast(mul(g, where(x0, 0, mul(pow_(x, y), log_x))), y)
    return gx, gy


def _maximum_vjp(n, g, out, x, y):
    """Ties share the gradient; a nan passes it to both inputs (as PyTorch)."""
    tie = equal(x, y)
    half = where(tie, mul(g, 0.5), g)
    return (_unbroadcast(where(less(x, y), 0, half), x) if n[0] else None,
            _unbroadcast(where(greater(x, y), 0, half), y) if n[1] else None)


pow_ = ew('pow', np.power, _pow_vjp)
maximum = ew('maximum', np.maximum, _maximum_vjp)       # as numpy: nan wins, a tie gives y


# One-input VJPs: n says which inputs need a gradient, g is the output's cotangent, out the output.
def _exp_vjp(n, g, out, x):
    return (mul(g, out),)                       # exp' = exp: the saved output


def _log_vjp(n, g, out, x):
    return (div(g, x),)


def _sin_vjp(n, g, out, x):
    return (mul(g, cos(x)),)


def _cos_vjp(n, g, out, x):
    return (neg(mul(g, sin(x))),)


def _tanh_vjp(n, g, out, x):
    return (mul(g, add(1, neg(mul(out, out)))),)    # 1 - tanh**2, from the saved output


exp = ew('exp', np.exp, _exp_vjp, saves_out=True, saves_inputs=False)
log = ew('log', np.log, _log_vjp)
sin = ew('sin', np.sin, _sin_vjp)
cos = ew('cos', np.cos, _cos_vjp)
tanh = ew('tanh', np.tanh, _tanh_vjp, saves_out=True, saves_inputs=False)


def _bool_condition(dtype):
    if dtype != bool_:
        raise InputError(f'where: the condition must be bool, got dtype {dtype}; mg.where casts it '
                         f'(nonzero is True, as numpy), or compare first: where(c != 0, x, y)')


def _where_rule(c, x, y):
    _bool_condition(c.dtype)
    shape = broadcast_shapes('where', c.shape, x.shape, y.shape)
    return Aval(shape, np.result_type(x.dtype, y.dtype))


@functools.cache
def zero_of(dtype) -> np.ndarray:
    """A read-only 0-d zero of `dtype` (the tape's shape-only stand-ins are views of it)."""
    z = np.zeros((), dtype)
    z.flags.writeable = False
    return z


def _where_impl(c, x, y):
    # eager runs impls without the rule
    _bool_condition(c.dtype if type(c) is np.ndarray else np.asarray(c).dtype)
    return np.where(c, x, y)


def _where_vjp(n, g, out, c, x, y):
    gx = _unbroadcast(where(c, g, 0), x) if n[1] else None
    gy = _unbroadcast(where(c, 0, g), y) if n[2] else None
    return None, gx, gy                     # the condition gets no gradient


where = prim('where', _where_impl, _where_rule, _where_vjp, elementwise=True, saves_inputs=(0,))


def _cmp_rule(*avals, _op):
    return Aval(broadcast_shapes(_op, *[a.shape for a in avals]), bool_)


def cmp(name, impl):   # comparisons: bool results, not differentiable
    rule = functools.partial(_cmp_rule, _op=name)
    return prim(name, impl, rule, None, elementwise=True, ufunc=impl.__name__)


less, equal = cmp('less', np.less), cmp('equal', np.equal)


# ------------------------------------------------- composites the rules use (no records of their own)
def _minus_one(dt, op):
    """-1 in dtype dt, wrapped as numpy wraps it (255 in uint8: x * 255 is numpy's -x there)."""
    if dt.kind == 'b':
        raise ShapeError(f'{op}: numpy cannot negate bool values; use mg.equal(x, False) for not, '
                         f'or .astype(mg.int64) first')
    # a Python -1 keeps x's dtype (and prints as -1 on tapes and graphs)
    if NEP50 and dt.kind in 'if':
        return -1
    # typed: numpy 1.x would widen a 0-d float32 times a Python -1
    return np.array(-1).astype(dt)


def neg(x):
    """-x as x * -1 in x's dtype (exact: numpy's negative, signed zeros and unsigned wrap-around included)."""
    return mul(x, _minus_one(aval_of(x).dtype, 'negative'))


def sub(x, y):
    """x - y as x + (-y), with y first in the dtype numpy gives x - y (NEP 50): int8 - uint8 is int16,
    float32 - bool float32, uint8 - 1 wraps; bool - bool is refused, as numpy does."""
    dt = result_dtype(np.subtract, 'subtract', x, y)
    # a weak Python scalar: negate it in Python when it fits
    if isinstance(y, (bool, int, float)):
        fits = dt.kind == 'f' or -y in int_range(dt)
        return add(x, -y if fits else mul(np.asarray(y, dt), _minus_one(dt, 'subtract')))
    ydt = aval_of(y).dtype
    return add(x, neg(y if ydt == dt or ydt.kind == 'f' else cast(y, dtype=dt)))


def flip(x):
    """An order-reversing bijection in x's dtype: -x for floats, ~x = -1 - x for integers (no overflow:
    -(-128) would stay -128 in int8), not x for bools. min(x) is flip(max(flip(x)))."""
    # a Python float stays one (weak: it keeps the other operand's dtype)
    if type(x) is float:
        return -x
    dt = aval_of(x).dtype
    if dt.kind == 'b':
        return equal(x, False)
    m1 = _minus_one(dt, 'flip')
    return mul(x, m1) if dt.kind == 'f' else add(mul(x, m1), m1)


# comparisons take a Python int out of the other's integer range exactly, as numpy 2 does (exact_ints)
def greater(x, y):
    return less(*exact_ints(y, x))


def less_equal(x, y):
    x, y = exact_ints(x, y)
    return maximum(less(x, y), equal(x, y))          # maximum of bools: or (nan <= nan stays False)


def greater_equal(x, y):
    return less_equal(y, x)


def not_equal(x, y):
    return equal(equal(*exact_ints(x, y)), False)    # not: nan != nan is True, as numpy


def _cast_rule(x, dtype):
    return Aval(x.shape, check_dtype(dtype, 'cast: dtype'))


def _cast_vjp(n, g, out, x, dtype):
    return (cast(g, dtype=aval_of(x).dtype),)       # back to the input's dtype


cast = prim('cast', lambda x, dtype: np.asarray(x).astype(dtype), _cast_rule, _cast_vjp,
            elementwise=True, saves_inputs=False)


# ------------------------------------------------- reductions
def _reduce_rule(x, axis=None, keepdims=False, initial=None, _op='sum'):
    if x.shape is None:
        return Aval(None if keepdims or axis is not None else (), _reduce_dtype(x.dtype, _op))
    axes = range(len(x.shape)) if axis is None else normalize_axes(axis, len(x.shape), _op)
    if keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if _op == 'max' and initial is None and any(x.shape[i] == 0 for i in axes):
        raise ShapeError(f'max: cannot take the max over an empty axis of {describe_aval(x)}')
    return Aval(shape, _reduce_dtype(x.dtype, _op))


def _reduce_dtype(dt, op):
    if op == 'sum' and dt.kind in 'biu':      # as np.sum: int64, or uint64 for unsigned
        return np.dtype(np.uint64 if dt.kind == 'u' else np.int64)
    return dt


def describe_aval(a):
    return f'a tensor of shape {fmt_shape(a.shape)} ({a.dtype})'


def kept_axes(x, axis, keepdims):
    """The axes broadcast_like must re-insert to undo a reduction."""
    if keepdims:
        return ()
    nd = _ndim(x)
    # a full reduction: a 0-d result broadcasts to any shape, even an unknown one
    if axis is None:
        return () if nd is None else tuple(range(nd))
    return axis


# np.add.reduce is np.sum without its Python wrapper (and np.maximum.reduce np.max): the same results, sooner
sum_ = prim('sum', lambda x, axis=None, keepdims=False: np.add.reduce(x, axis=axis, keepdims=keepdims),
            functools.partial(_reduce_rule, _op='sum'),
            lambda n, g, out, x, axis=None, keepdims=False: (
                broadcast_like(g, x, axes=kept_axes(x, axis, keepdims)),), saves_inputs=False)


def _max_impl(x, axis=None, keepdims=False, initial=None):
    """np.max; ``initial`` (e.g. -inf) also takes the max with it, so an empty axis gives it."""
    if initial is None:
        return np.maximum.reduce(x, axis=axis, keepdims=keepdims)
    return np.maximum.reduce(x, axis=axis, keepdims=keepdims, initial=initial)


def _max_vjp(n, g, out, x, axis=None, keepdims=False, initial=None):
    axes = kept_axes(x, axis, keepdims)
    # ties share equally; a nan max goes to the nans (add of bools: or)
    at_max = equal(x, broadcast_like(out, x, axes=axes))
    mask = cast(add(at_max, not_equal(x, x)), dtype=aval_of(g).dtype)
    count = broadcast_like(sum_(mask, axis=axis, keepdims=True), x)
    return (div(mul(broadcast_like(g, x, axes=axes), mask), count),)


max_ = prim('max', _max_impl, functools.partial(_reduce_rule, _op='max'), _max_vjp, saves_out=True)


# ------------------------------------------------- shape ops
def _reshape_rule(x, shape):
    if _static(x.shape):
        size = int(np.prod(x.shape))
        rest = int(np.prod([d for d in shape if d != -1]))      # the elements the given dims hold
        if shape.count(-1) == 0:
            ok = rest == size
        else:
            # one -1: it takes what the others leave
            ok = shape.count(-1) == 1 and rest != 0 and size % rest == 0
        if not ok:
            raise ShapeError(f'reshape: cannot reshape {describe_aval(x)} ({size} elements) into '
                             f'{fmt_shape(shape)}. The number of elements must stay the same; '
                             f'use -1 for one dimension to let minigrad work it out.')
        return Aval(tuple(size // rest if d == -1 else d for d in shape), x.dtype)
    return Aval(tuple(None if d == -1 else d for d in shape), x.dtype)


reshape = prim('reshape', lambda x, shape: np.reshape(x, shape), _reshape_rule,
               lambda n, g, out, x, shape: (reshape_like(g, x),), view=True, saves_inputs=False)


def _transpose_rule(x, axes=None):
    if x.shape is None:
        return Aval(None, x.dtype)
    axes = tuple(reversed(range(len(x.shape)))) if axes is None else axes
    if sorted(axes) != list(range(len(x.shape))):
        raise ShapeError(f'transpose: axes {axes} are not a permutation of the {len(x.shape)} axes '
                         f'of {describe_aval(x)}')
    return Aval(tuple(x.shape[a] for a in axes), x.dtype)


def _transpose_vjp(n, g, out, x, axes=None):
    return (transpose(g, axes=None if axes is None else tuple(np.argsort(axes).tolist())),)


transpose = prim('transpose', lambda x, axes=None: np.transpose(x, axes), _transpose_rule,
                 _transpose_vjp, view=True, saves_inputs=False)


def _broadcast_to_rule(x, shape):
    if x.shape is None:
        return Aval(tuple(shape), x.dtype)
    lead = len(shape) - len(x.shape)
    # each dim of x must be 1 or the target (an unknown dim is assumed to fit: checked when it runs)
    fits = all(d in (None, 1, t) for d, t in zip(x.shape, shape[lead:]))
    if lead < 0 or not fits:
        raise ShapeError(f'broadcast_to: cannot broadcast {describe_aval(x)} '
                         f'to {fmt_shape(shape)}; each dimension must equal the target or be 1')
    return Aval(tuple(shape), x.dtype)


broadcast_to = prim('broadcast_to', lambda x, shape: np.broadcast_to(x, shape), _broadcast_to_rule,
                    lambda n, g, out, x, shape: (sum_to_like(g, x),), view=True, saves_inputs=False)


# ------------------------------------------------- indexing
def _slice_len(s: slice, n):
    """len(range(n)[s]); for an unknown n (None) only an always-empty slice has a known length."""
    if n is not None:
        return len(range(*s.indices(n)))
    bounds = (s.start, s.stop, s.step)
    start, stop, step = (v if v is None else operator.index(v) for v in bounds)
    if step == 0:
        raise ValueError('slice step cannot be zero')
    if start is not None and stop is not None and (start < 0) == (stop < 0) and \
            (stop <= start if (step or 1) > 0 else stop >= start):
        return 0
    return None


def _dims_used(i):
    """How many of x's dims one index item consumes: none for None and ..., a mask its ndim, else one."""
    if i is None or i is Ellipsis:
        return 0
    return i.ndim if isinstance(i, np.ndarray) and i.dtype == np.bool_ else 1


def _getitem_rule(x, idx):
    """numpy's indexing on shapes, with unknown (None) dims: ints and slices, None, one Ellipsis, and
    int/bool arrays (advanced: their broadcast shape replaces the dims they index, in place when they
    are adjacent in the index, else in front; ints next to arrays count as advanced too)."""
    if x.shape is None:
        return Aval(None, x.dtype)
    masks_or_arrays = (np.ndarray, bool, np.bool_)       # a bool index is a 0-d mask
    items = [np.asarray(i) if isinstance(i, masks_or_arrays) else i for i in idx]
    arrays = any(isinstance(i, np.ndarray) for i in items)
    used = sum(map(_dims_used, items))
    shape, nd = x.shape, len(x.shape)
    out, adv_shapes, adv_pos, adv_at, dim = [], [], [], None, 0
    try:
        if sum(i is Ellipsis for i in items) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if used > nd:
            raise IndexError(f'too many indices ({used}) for {nd} dimensions')
        for pos, i in enumerate(items):
            if i is None:
                out.append(1)
            elif i is Ellipsis:
                out.extend(shape[dim:dim + nd - used])
                dim += nd - used
            elif isinstance(i, slice):
                out.append(_slice_len(i, shape[dim]))
                dim += 1
            elif isinstance(i, (int, np.integer, np.ndarray)):
                i = np.asarray(i)
                # a mask: its dims must match, it gives one dim of its count
                if i.dtype == np.bool_:
                    for k, d in enumerate(i.shape):
                        if shape[dim + k] not in (None, d):
                            raise IndexError(f'the boolean index has size {d} on axis {dim + k}, '
                                             f'which has size {shape[dim + k]}')
                    adv_shapes.append((int(np.count_nonzero(i)),))
                    dim += i.ndim
                elif i.dtype.kind in 'iu':
                    d = shape[dim]
                    if i.size and d is not None and not -d <= i.min() <= i.max() < d:
                        raise IndexError(f'index {i.max() if i.max() >= d else i.min()} '
                                         f'is out of bounds for axis {dim} with size {d}')
                    adv_shapes.append(i.shape)
                    dim += 1
                    if not arrays:
                        continue                # a plain int removes its dim
                else:
                    raise IndexError('arrays used as indices must be of integer (or boolean) type')
                adv_pos.append(pos)
                adv_at = len(out) if adv_at is None else adv_at
            else:
                raise IndexError('only integers, slices (`:`), ellipsis (`...`), None and integer '
                                 'or boolean arrays are valid indices')
        if adv_pos:
            at = adv_at if adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)) else 0
            out[at:at] = np.broadcast_shapes(*adv_shapes)
    except (IndexError, ValueError, TypeError, OverflowError) as e:
        shown = repr(idx) if len(repr(idx)) < 80 else repr(idx)[:77] + '...'
        raise ShapeError(f'getitem: index {shown} does not fit {describe_aval(x)}: {e}') from None
    return Aval(tuple(out) + tuple(shape[dim:]), x.dtype)


def _has_array(idx):
    return any(isinstance(i, np.ndarray) for i in idx)


def _scatter_add_impl(g, ref, idx):
    out = np.zeros(np.shape(ref), dtype=g.dtype)
    if _has_array(idx):
        np.add.at(out, idx, g)          # repeated indices accumulate
    else:
        out[idx] = g
    return out


getitem = prim('getitem', lambda x, idx: x[idx], _getitem_rule,
               lambda n, g, out, x, idx: (scatter_add(g, x, idx=idx),), saves_inputs=False,
               view=lambda params: not _has_array(params['idx']))     # basic indexing gives a view
scatter_add = prim('scatter_add', _scatter_add_impl,
                   lambda g, ref, idx: Aval(ref.shape, g.dtype),
                   lambda n, g, out, x, ref, idx: (getitem(g, idx=idx), None),
                   doc='zeros shaped like ref with x added at ref[idx]: the VJP of getitem')


# ------------------------------------------------- matmul, concatenate
def _matmul_rule(a, b):
    if a.shape is None or b.shape is None:
        return Aval(None, np.result_type(a.dtype, b.dtype))
    if len(a.shape) == 0 or len(b.shape) == 0:
        raise ShapeError(f'matmul: both operands need at least one dimension; got {describe_aval(a)} '
                         f'and {describe_aval(b)}. Use * for scaling by a scalar.')
    a2 = (1,) + a.shape if len(a.shape) == 1 else a.shape
    b2 = b.shape + (1,) if len(b.shape) == 1 else b.shape
    k1, k2 = a2[-1], b2[-2]
    if k1 is not None and k2 is not None and k1 != k2:
        raise ShapeError(f'matmul: inner dimensions differ: a {fmt_shape(a.shape)} '
                         f'@ b {fmt_shape(b.shape)} ({k1} != {k2}). The last axis of a must match '
                         f'the {"only" if len(b.shape) == 1 else "second-to-last"} axis of b; '
                         f'transpose an operand (x.T) or fix the layer size.')
    batch = broadcast_shapes('matmul', a2[:-2], b2[:-2])
    rows = (a2[-2],) if len(a.shape) > 1 else ()       # a 1-D operand's added axis is dropped again
    cols = (b2[-1],) if len(b.shape) > 1 else ()
    shape = batch + rows + cols
    return Aval(shape, np.result_type(a.dtype, b.dtype))


def _swap_last(x):
    nd = _ndim(x)
    return transpose(x, axes=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _expand(x, axis):
    """Insert a size-1 axis (axis 0 or -1 of a vector / second-to-last of g)."""
    s = aval_of(x).shape
    axis = axis % (len(s) + 1)
    shape = tuple(-1 if d is None else d for d in s)
    if shape.count(-1) > 1:
        raise ShapeError('matmul: the gradient of a 1-D matmul operand needs known shapes')
    return reshape(x, shape=shape[:axis] + (1,) + shape[axis:])


def _matmul_vjp(n, g, out, a, b):
    na, nb = _ndim(a), _ndim(b)
    if na is None or nb is None:
        raise ShapeError('matmul: differentiating needs operands of known rank; '
                         'give the placeholders a shape')
    a2 = _expand(a, 0) if na == 1 else a
    b2 = _expand(b, -1) if nb == 1 else b
    g2 = _expand(g, -1) if nb == 1 else g
    g2 = _expand(g2, -2) if na == 1 else g2
    ga = gb = None
    if n[0]:
        ga = matmul(g2, _swap_last(b2))
        ga = _unbroadcast(ga, a2)
        ga = reshape_like(ga, a) if na == 1 else ga
    if n[1]:
        gb = _unbroadcast(matmul(_swap_last(a2), g2), b2)
        gb = reshape_like(gb, b) if nb == 1 else gb
    return ga, gb


def _matmul_impl(a, b):
    return np.matmul(a, b)


matmul = prim('matmul', _matmul_impl, _matmul_rule, _matmul_vjp)


def _concat_rule(*xs, axis=0):
    if not xs:
        raise ShapeError('concatenate: needs at least one input, got an empty list')
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ShapeError(f'concatenate: axis must be an int, got {type(axis).__name__} {axis!r}')
    if any(x.shape is None for x in xs):
        return Aval(None, np.result_type(*[x.dtype for x in xs]))
    nd = len(xs[0].shape)
    if any(len(x.shape) != nd for x in xs) or nd == 0:
        raise ShapeError(f'concatenate: all inputs need the same number of dimensions (>= 1); got '
                         f'{", ".join(fmt_shape(x.shape) for x in xs)}')
    if not -nd <= axis < nd:
        raise ShapeError(f'concatenate: axis {axis} is out of range for inputs with {nd} dimensions')
    ax = axis % nd
    for i in range(nd):
        known = {x.shape[i] for x in xs if x.shape[i] is not None}
        if i != ax and len(known) > 1:
            raise ShapeError(f'concatenate: shapes {", ".join(fmt_shape(x.shape) for x in xs)} '
                             f'differ on axis {i}; only the concatenation axis {axis} may differ')
    sizes = [x.shape[ax] for x in xs]
    shape = list(xs[0].shape)
    shape[ax] = None if None in sizes else sum(sizes)
    return Aval(tuple(shape), np.result_type(*[x.dtype for x in xs]))


def _concat_vjp(n, g, out, *xs, axis=0):
    nd = _ndim(xs[0])
    ax = axis % nd
    grads, start = [], 0
    for need, x in zip(n, xs):
        size = aval_of(x).shape[ax]
        if size is None:
            raise ShapeError('concatenate: differentiating needs the sizes along the axis to be known')
        if need:
            idx = (slice(None),) * ax + (slice(start, start + size),)
            gi = getitem(g, idx=idx)
            # the result may be wider (int64 and float32 give float64)
            dt = aval_of(x).dtype
            grads.append(gi if aval_of(gi).dtype == dt or dt.kind != 'f' else cast(gi, dtype=dt))
        else:
            grads.append(None)
        start += size
    return tuple(grads)


concatenate = prim('concatenate', lambda *xs, axis=0: np.concatenate(xs, axis=axis), _concat_rule,
                   _concat_vjp, saves_inputs=False)


stop_gradient = prim('stop_gradient', lambda x: x, lambda x: x, None, elementwise=True, view=True,
                     doc='identity whose gradient is zero (x.detach() inside a graph)')
