"""The public functions (mg.exp, mg.softmax, ...) and the operators shared by Tensor and Symbol.

Everything here is either a primitive from the op table or a composite of
primitives: no gradient code lives in this file.
"""
from __future__ import annotations

import builtins

import numpy as np

from . import ops as P
from .primitive import (Value, apply, hooks, aval_of, normalize_axes, fmt_shape, broadcast_shapes,
                        describe, DEFAULT_FLOAT)
from .validate import value_array, check_shape, check_dtype, check_flag, is_int
from .dtypes import result_dtype, exact_ints
from .errors import ShapeError, InputError


def _is_value(x) -> bool:
    return isinstance(x, Value)


def _lift(*xs):
    """Public functions on plain data (lists, arrays, numbers) return Tensors."""
    if builtins.any(map(_is_value, xs)):
        return xs
    return (hooks.lift(xs[0]),) + xs[1:]


def _axes(x, axis, op):
    shape = aval_of(x).shape
    return normalize_axes(axis, None if shape is None else len(shape), op)


def _all_ints(xs) -> bool:
    """Ints or numpy integers, not bools (True is an int to Python)."""
    return all(is_int(d) for d in xs)


# ------------------------------------------------------------------ arithmetic
def add(x, y):
    """x + y with broadcasting. >>> mg.add(mg.tensor([1.0]), 2.0).tolist()  ->  [3.0]"""
    return P.add(*_lift(x, y))


def subtract(x, y):
    """x - y, composed as x + (-y) in numpy's result dtype. >>> (mg.tensor([1], dtype='uint8') - 2).tolist() -> [255]"""
    x, y = (v if _is_value(v) or isinstance(v, (bool, int, float)) else value_array(v, 'subtract')
            for v in _lift(x, y))
    return P.sub(x, y)


def negative(x):
    """-x; a Python number stays one, a list or an array is read as values (as subtract reads them)."""
    if isinstance(x, (int, float)):
        return -x
    return P.neg(x if _is_value(x) else value_array(x, 'negative'))


def multiply(x, y):
    return P.mul(*_lift(x, y))


def divide(x, y):
    return P.div(*exact_ints(*_lift(x, y), divide=True))


def power(x, y):
    return P.pow_(*_lift(x, y))


def exp(x):
    return P.exp(*_lift(x))


def log(x):
    return P.log(*_lift(x))


def sin(x):
    return P.sin(*_lift(x))


def cos(x):
    return P.cos(*_lift(x))


def tanh(x):
    return P.tanh(*_lift(x))


def sqrt(x):
    return P.pow_(*_lift(x), 0.5)


def maximum(x, y):
    return P.maximum(*_lift(x, y))


def minimum(x, y):
    """Elementwise min, composed as flip(max(flip(x), flip(y))): -max(-x, -y) for floats, ~max(~x, ~y)
    for integers, in numpy's result dtype. >>> mg.minimum(mg.tensor([1, 5]), 3).tolist() -> [1, 3]"""
    x, y = _lift(x, y)
    # errors name minimum, not maximum
    broadcast_shapes('minimum', aval_of(x).shape, aval_of(y).shape)
    dt = result_dtype(np.minimum, 'minimum', x, y)
    # flip keeps dtypes: bring both to the result's first
    x, y = _in_dtype(x, dt), _in_dtype(y, dt)
    return P.flip(P.maximum(P.flip(x), P.flip(y)))


def _in_dtype(v, dt):
    """v in dtype dt; a Python number stays weak as a float (it takes the other operand's float dtype)."""
    if isinstance(v, (bool, int, float)):
        return float(v) if dt.kind == 'f' else np.asarray(v, dt)
    own = aval_of(v).dtype
    if own == dt or own.kind == dt.kind == 'f':
        return v
    return P.cast(v, dtype=dt)


def where(cond, x, y):
    """x where cond, else y. As numpy, a non-bool cond is True where it is nonzero (nan too):
    ``mg.where([0.5, 0.0], 1.0, 2.0).tolist()  ->  [1.0, 2.0]``."""
    cond, x, y = _lift(cond, x, y)
    cond = cond if _is_value(cond) else value_array(cond, 'where: cond')
    if cond.dtype != np.bool_:          # the primitive takes bool conditions only (cast: a Value or an array)
        cond = P.cast(cond, dtype=np.dtype(np.bool_))
    return P.where(cond, x, y)


def relu(x):
    """max(x, 0) as where(x > 0, x, 0): gradient 0 at 0, as in PyTorch. relu(nan) is 0 (torch and ONNX
    Relu give nan): minigrad keeps its meaning everywhere, and export_onnx writes Where(0 < x, x, 0).
    >>> mg.relu(mg.tensor([-1.0, float('nan'), 2.0])).tolist()  ->  [0.0, 0.0, 2.0]"""
    (x,) = _lift(x)
    return P.where(P.greater(x, 0), x, 0)


def sigmoid(x):
    """1 / (1 + exp(-x)), with relative precision for negative x too (float32 sigmoid(-20) is 2.06e-9, not 0;
    -log(sigmoid(-77)) is 77 with gradient -1): below T = 1.25 log(eps) (float32: -19.9) it is exp(x), which
    differs from exp(x) / (1 + exp(x)) by under 0.04 ulp in float32 (0.35 in float16); above, 1 / (1 + exp(-x)),
    whose exp(-x) <= exp(-T) cannot overflow. One exp of where(x < T, x, -x) serves both (exp(x) itself on the
    branch not taken would overflow to inf, and its gradient through where to nan), and each element's value has
    one path to x, so an infinite cotangent gives an infinite gradient, not inf - inf. Integers are first
    converted as numpy's exp converts them (int8: float16). Error against the correctly rounded value, measured
    by scripts/ulp_error.py --only sigmoid (tests/test_programs.py holds the bounds): float32, every input,
    within 4 ulps (the tape and the numpy backend, on numpy's exp) and 2 ulps (loop kernels, on approx.py's
    exp); float64, 12.6 million random inputs, within 2 ulps on both; special values (+-0, +-inf, nan) exact."""
    (x,) = _lift(x)
    x = _in_dtype(x, result_dtype(np.exp, 'sigmoid', x))
    low = P.less(x, 1.25 * float(np.log(np.finfo(aval_of(x).dtype).eps)))
    e = P.exp(P.where(low, x, P.neg(x)))
    return P.where(low, e, P.div(1, P.add(e, 1)))


def abs(x):
    """|x| with PyTorch's edge values: abs(-0.0) is +0.0 and the gradient at 0 (and nan) is 0."""
    (x,) = _lift(x)
    dt = aval_of(x).dtype
    if dt.kind in 'bu':             # nothing to negate (numpy's abs of bool is bool)
        return P.cast(x, dtype=dt)
    zero = P.stop_gradient(P.add(x, 0))         # -0.0 + 0 is +0.0 (and nan stays nan)
    rest = P.where(P.less(x, 0), P.neg(x), zero)
    return P.where(P.greater(x, 0), x, rest)


def stop_gradient(x):
    """The same value, but no gradient flows through it."""
    return P.stop_gradient(*_lift(x))


# ------------------------------------------------------------------ comparisons (not differentiable)
def less(x, y):
    return P.less(*exact_ints(*_lift(x, y)))


def greater(x, y):
    return P.greater(*_lift(x, y))


def equal(x, y):
    return P.equal(*exact_ints(*_lift(x, y)))


# ------------------------------------------------------------------ reductions
def sum(x, axis=None, keepdims=False):
    (x,) = _lift(x)
    # check_flag: True, False or np.True_ / np.False_
    return P.sum_(x, axis=_axes(x, axis, 'sum'), keepdims=check_flag(keepdims, 'sum: keepdims'))


def max(x, axis=None, keepdims=False):
    (x,) = _lift(x)
    # check_flag: True, False or np.True_ / np.False_
    return P.max_(x, axis=_axes(x, axis, 'max'), keepdims=check_flag(keepdims, 'max: keepdims'))


def min(x, axis=None, keepdims=False):
    """-max(-x) for floats, ~max(~x) for integers (exact for unsigned and the lowest int too)."""
    (x,) = _lift(x)
    _axes(x, axis, 'min')                    # checked before ~x is built: a bad axis leaves no node
    return P.flip(max(P.flip(x), axis, keepdims))


def mean(x, axis=None, keepdims=False):
    """sum / count; the count is static when the shape is known, else computed at run time."""
    (x,) = _lift(x)
    av = aval_of(x)
    if av.dtype.kind != 'f':
        x = P.cast(x, dtype=DEFAULT_FLOAT)
        av = aval_of(x)
    axes, keepdims = _axes(x, axis, 'mean'), check_flag(keepdims, 'mean: keepdims')
    s = P.sum_(x, axis=axes, keepdims=keepdims)
    dims = None if av.shape is None else \
        [d for i, d in enumerate(av.shape) if axes is None or i in axes]
    if dims is not None and None not in dims:
        n = int(np.prod(dims))
        return P.mul(s, 1.0 / n if n else np.nan)   # the mean of nothing is nan (numpy, PyTorch)
    ones = P.broadcast_like(np.ones((), av.dtype), x)
    return P.div(s, P.sum_(ones, axis=axes, keepdims=keepdims))




def _max_kept(x, axes):
    """max over axes, kept as size-1 axes; -inf over an empty float axis (instead of an error)."""
    lowest = -np.inf if aval_of(x).dtype.kind == 'f' else None
    return P.max_(x, axis=axes, keepdims=True, initial=lowest)


def _minus_max(x, axes):
    """x - max(x), the max held constant (no gradient through it): exp of it cannot overflow."""
    return P.add(x, P.neg(P.stop_gradient(_max_kept(x, axes))))


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) computed stably: m + log(sum(exp(x - m))) with m = max(x)."""
    (x,) = _lift(x)
    axes = _axes(x, axis, 'logsumexp')
    m = P.stop_gradient(_max_kept(x, axes))
    # an infinite max shifts by 0 instead (as PyTorch): all -inf gives -inf, not -inf - -inf = nan
    finite = P.mul(P.less(m, np.inf), P.greater(m, -np.inf))       # bool * bool: and
    m = P.where(finite, m, 0)
    s = P.sum_(P.exp(P.add(x, P.neg(m))), axis=axes, keepdims=keepdims)
    # summing size-1 axes squeezes them
    m_out = m if keepdims else P.sum_(m, axis=axes, keepdims=False)
    return P.add(P.log(s), m_out)


def softmax(x, axis=-1):
    (x,) = _lift(x)
    axes = _axes(x, axis, 'softmax')
    e = P.exp(_minus_max(x, axes))
    return P.div(e, P.sum_(e, axis=axes, keepdims=True))


def log_softmax(x, axis=-1):
    """x - max - log(sum(exp(x - max))): unlike logsumexp, an infinite max is not masked (as PyTorch)."""
    (x,) = _lift(x)
    axes = _axes(x, axis, 'log_softmax')
    z = _minus_max(x, axes)
    log_sum = P.log(P.sum_(P.exp(z), axis=axes, keepdims=True))
    return P.add(z, P.neg(log_sum))


# ------------------------------------------------------------------ shapes
def reshape(x, *shape):
    (x,) = _lift(x)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    if not _all_ints(shape):
        raise InputError(f'reshape: the shape must be ints (one may be -1), got {shape!r}')
    return P.reshape(x, shape=tuple(int(d) for d in shape))


def transpose(x, *axes):
    (x,) = _lift(x)
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = axes[0]
    shape = aval_of(x).shape
    if not axes or axes == (None,):     # reverse the axes
        axes = None if shape is None else tuple(reversed(range(len(shape))))
    elif not _all_ints(axes):
        raise InputError(f'transpose: axes must be ints, got {axes!r}')
    elif shape is None:
        axes = tuple(int(a) for a in axes)
    else:
        nd = len(shape)
        if len(axes) != nd or not all(-nd <= a < nd for a in axes):
            raise ShapeError(f'transpose: axes {tuple(axes)} are not a permutation of the {nd} '
                             f'axes of {describe(x)}')
        axes = tuple(int(a) % nd for a in axes)
    return P.transpose(x, axes=axes)


def broadcast_to(x, shape):
    (x,) = _lift(x)
    return P.broadcast_to(x, shape=check_shape(shape, 'broadcast_to: shape', unknown=True))


def matmul(x, y):
    return P.matmul(*_lift(x, y))


def concatenate(xs, axis=0):
    if not len(xs):
        raise ShapeError('concatenate: needs at least one input, got an empty list')
    xs = _lift(*xs)
    return P.concatenate(*xs, axis=axis)


def stack(xs, axis=0):
    """Stack along a new axis: each input gets a size-1 axis (x[:, None]), then concatenate."""
    xs = [x if _is_value(x) else np.asarray(x) for x in xs]
    if not xs:
        raise ShapeError('stack: needs at least one tensor')
    if not builtins.any(_is_value(x) for x in xs):
        xs[0] = _lift(xs[0])[0]
    shapes = [aval_of(x).shape for x in xs]
    known = [s for s in shapes if s is not None]
    for s in known[1:]:
        # None: unknown
        differ = builtins.any(a != b for a, b in zip(s, known[0]) if None not in (a, b))
        if len(s) != len(known[0]) or differ:
            raise ShapeError(f'stack: all inputs need the same shape; got {fmt_shape(known[0])} '
                             f'and {fmt_shape(s)}. Reshape them first, or use mg.concatenate to '
                             f'join along an existing axis.')
    nd = len(known[0]) if known else None
    in_range = -nd - 1 <= axis <= nd if nd is not None else axis >= 0
    if not in_range:
        raise ShapeError(f'stack: axis {axis} is out of range for inputs of shape '
                         f'{fmt_shape(known[0]) if known else "?"} (the result has one more dimension)')
    ax = axis if axis >= 0 else axis + nd + 1
    idx = (slice(None),) * ax + (None,)          # x[:, ..., None] puts a size-1 axis at ax
    expanded = [P.getitem(x, idx=idx) for x in xs]
    return P.concatenate(*expanded, axis=ax)


def cast(x, dtype):
    """x in another dtype (bool, integer or float). >>> mg.cast(mg.tensor([1.7]), mg.int64).tolist() -> [1]"""
    return P.cast(*_lift(x), dtype=check_dtype(dtype, 'cast: dtype'))


def _index(idx):
    """Normalise an index tuple to ints, slices, None, Ellipsis and int/bool arrays."""
    out = []
    for i in idx:
        if isinstance(i, Value):            # a Tensor: its array
            i = i.data
        if isinstance(i, list):
            i = value_array(i, 'an index list')
            if i.size == 0:             # x[[]]: an empty int index (np.asarray([]) is float64)
                i = i.astype(np.int64)
        if isinstance(i, np.ndarray):
            if i.ndim == 0:
                i = i.item()
        elif isinstance(i, np.integer):
            i = int(i)
        out.append(i)
    return tuple(out)


def getitem(x, idx):
    """x[idx]; an index value that holds no array (a Symbol, vmap's Batched) decides by its kind's index_rule."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    held = [i for i in idx if isinstance(i, Value) and not hasattr(i, 'data')]
    return held[0].index_rule(x, idx) if held else P.getitem(x, idx=_index(idx))


# ------------------------------------------------------------------ operators
class OpsMixin:
    """The operators and methods that Tensor and Symbol share."""
    __slots__ = ()

    def __add__(self, o): return apply(P.add, self, o)
    def __radd__(self, o): return apply(P.add, o, self)
    def __sub__(self, o): return subtract(self, o)
    def __rsub__(self, o): return subtract(o, self)
    def __mul__(self, o): return apply(P.mul, self, o)
    def __rmul__(self, o): return apply(P.mul, o, self)
    def __truediv__(self, o): return apply(P.div, *exact_ints(self, o, divide=True))
    def __rtruediv__(self, o): return apply(P.div, *exact_ints(o, self, divide=True))

    def __pow__(self, o):
        # as numpy's **, which squares by np.square: a bool ** 2 is int8 (np.power makes it int64)
        square_bool = type(o) is int and o == 2 and aval_of(self).dtype == np.bool_
        return apply(P.pow_, P.cast(self, dtype=np.dtype(np.int8)) if square_bool else self, o)

    def __rpow__(self, o): return apply(P.pow_, o, self)
    def __matmul__(self, o): return apply(P.matmul, self, o)
    def __rmatmul__(self, o): return apply(P.matmul, o, self)
    def __neg__(self): return P.neg(self)
    def __pos__(self): return self
    def __lt__(self, o): return apply(P.less, *exact_ints(self, o))
    def __le__(self, o): return P.less_equal(self, o)
    def __gt__(self, o): return P.greater(self, o)
    def __ge__(self, o): return P.greater_equal(self, o)
    def __eq__(self, o): return apply(P.equal, *exact_ints(self, o))
    def __ne__(self, o): return P.not_equal(self, o)
    def __getitem__(self, idx): return getitem(self, idx)

    def __setitem__(self, idx, value):
        raise InputError(f'{type(self).__name__}s do not support item assignment (x[...] = v): it '
                         f'would change a value other ops may have recorded. Build a new one instead, '
                         f'e.g. mg.where(mask, v, x) with a boolean mask of the positions to replace')
    def __abs__(self): return abs(self)

    @property
    def T(self): return transpose(self)

    def sum(self, axis=None, keepdims=False): return sum(self, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return mean(self, axis, keepdims)
    def max(self, axis=None, keepdims=False): return max(self, axis, keepdims)
    def min(self, axis=None, keepdims=False): return min(self, axis, keepdims)
    def reshape(self, *shape): return reshape(self, *shape)
    def transpose(self, *axes): return transpose(self, *axes)
    def exp(self): return P.exp(self)
    def log(self): return P.log(self)
    def sin(self): return P.sin(self)
    def cos(self): return P.cos(self)
    def tanh(self): return P.tanh(self)
    def sigmoid(self): return sigmoid(self)
    def relu(self): return relu(self)
    def softmax(self, axis=-1): return softmax(self, axis)
    def log_softmax(self, axis=-1): return log_softmax(self, axis)
    def logsumexp(self, axis=None, keepdims=False): return logsumexp(self, axis, keepdims)
    def abs(self): return abs(self)
    def astype(self, dtype): return cast(self, dtype)
    # Tensor has its own detach and clone (same meaning; its detach shares the data)
    def detach(self): return P.stop_gradient(self)
    def clone(self): return cast(self, self.dtype)
    def to(self, dtype): return cast(self, dtype)
    def float(self): return cast(self, DEFAULT_FLOAT)
    def double(self): return cast(self, np.float64)
