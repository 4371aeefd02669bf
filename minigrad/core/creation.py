"""Tensor creation: zeros, ones, full, randn, rand, arange and the seeded generator they draw from.

>>> import minigrad as mg
>>> mg.zeros(2, 3).shape, mg.arange(3).tolist()
((2, 3), [0, 1, 2])
"""
from __future__ import annotations

import numpy as np

from . import validate
from .primitive import DEFAULT_FLOAT
from .errors import InputError
from .tensor import Tensor, tensor


class _Rng:
    gen = np.random.default_rng(0)


def manual_seed(seed: int):
    """Seed minigrad's random generator (randn, rand, layer initialisation).

    >>> import minigrad as mg
    >>> mg.manual_seed(0); a = mg.randn(2); mg.manual_seed(0); bool((a == mg.randn(2)).all())
    True
    """
    _Rng.gen = np.random.default_rng(validate.check_int(seed, 'mg.manual_seed: seed', low=0))


def rng() -> np.random.Generator:
    """The generator minigrad draws from (seeded by manual_seed)."""
    return _Rng.gen


def _shape(shape, what='shape'):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return validate.check_shape(shape, what)


def _float_dtype(dtype, what):
    return DEFAULT_FLOAT if dtype is None else validate.check_dtype(dtype, what)


def zeros(*shape, dtype=None, requires_grad=False, name=None) -> Tensor:
    shape = _shape(shape, 'mg.zeros: shape')
    dtype = _float_dtype(dtype, 'mg.zeros: dtype')
    return tensor(np.zeros(shape, dtype), requires_grad=requires_grad, name=name)


def ones(*shape, dtype=None, requires_grad=False, name=None) -> Tensor:
    shape = _shape(shape, 'mg.ones: shape')
    dtype = _float_dtype(dtype, 'mg.ones: dtype')
    return tensor(np.ones(shape, dtype), requires_grad=requires_grad, name=name)


def full(shape, value, dtype=None, requires_grad=False, name=None) -> Tensor:
    fill = validate.value_array(value, 'mg.full: value')
    if fill.ndim:
        raise InputError(f'mg.full: value must be one number, got shape {fill.shape}')
    shape = validate.check_shape(shape, 'mg.full: shape')
    dtype = _float_dtype(dtype, 'mg.full: dtype')
    return tensor(np.full(shape, fill, dtype), requires_grad=requires_grad, name=name)


def zeros_like(t, requires_grad=False) -> Tensor:
    return zeros(*t.shape, dtype=t.dtype, requires_grad=requires_grad)


def ones_like(t, requires_grad=False) -> Tensor:
    return ones(*t.shape, dtype=t.dtype, requires_grad=requires_grad)


def randn(*shape, dtype=None, requires_grad=False, name=None) -> Tensor:
    """Standard normal samples from the seeded generator (mg.manual_seed)."""
    shape = _shape(shape, 'mg.randn: shape')
    dtype = _float_dtype(dtype, 'mg.randn: dtype')
    data = _Rng.gen.standard_normal(shape).astype(dtype)
    return tensor(data, requires_grad=requires_grad, name=name)


def rand(*shape, dtype=None, requires_grad=False, name=None) -> Tensor:
    shape = _shape(shape, 'mg.rand: shape')
    dtype = _float_dtype(dtype, 'mg.rand: dtype')
    data = _Rng.gen.random(shape).astype(dtype)
    return tensor(data, requires_grad=requires_grad, name=name)


def arange(start, stop=None, step=1, dtype=None, requires_grad=False) -> Tensor:
    for what, v in (('start', start), ('stop', stop), ('step', step)):
        given = v is not None or what == 'start'        # start is required: None is refused
        if given and validate.value_array(v, f'mg.arange: {what}').ndim:
            raise InputError(f'mg.arange: {what} must be one number, got {v!r}')
    data = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if dtype is None and data.dtype.kind == 'f':
        dtype = DEFAULT_FLOAT
    return tensor(data, dtype=dtype, requires_grad=requires_grad)
