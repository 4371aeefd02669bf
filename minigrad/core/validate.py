"""Argument checks at the public boundary: each returns the value in its normal form or raises an
InputError naming the argument (`what`), what it got and what is expected.

>>> check_int(3, 'Linear: in_features', low=1)
3
"""
from __future__ import annotations

import numpy as np

from .errors import InputError


def value_array(data, what: str, dtype=None) -> np.ndarray:
    """`data` as a numpy array of bool, integer or float values, or an InputError naming `what`.

    >>> value_array([1, 2], 'mg.tensor').tolist()
    [1, 2]
    """
    if data is None or isinstance(data, (str, bytes, dict, set)):
        raise InputError(f'{what}: expected a number, a bool, a (nested) list of them '
                         f'or a numpy array, got {type(data).__name__} {str(data)[:40]!r}')
    try:
        arr = np.array(data, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as e:   # ragged lists, huge ints, unknown dtypes
        raise InputError(f'{what}: cannot make an array of {type(data).__name__} {str(data)[:40]!r}'
                         + (f' as {dtype}' if dtype is not None else '') + f': {e}') from None
    if arr.dtype.kind not in 'biuf':
        raise InputError(f'{what}: got values of dtype {arr.dtype}; '
                         f'expected bool, integer or float values')
    return arr


def is_int(value) -> bool:
    """Whether `value` is an int or a numpy integer, not a bool (True is an int to Python)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_int(value, what: str, low=None) -> int:
    """`value` as an int (not a bool or float) of at least `low`, or an InputError naming `what`.

    >>> check_int(3, 'Linear: in_features', low=1)
    3
    """
    if not is_int(value) or (low is not None and value < low):
        expected = 'an int' + ('' if low is None else f' >= {low}')
        raise InputError(f'{what}: expected {expected}, got {type(value).__name__} {value!r}')
    return int(value)


def check_shape(shape, what: str, unknown=False) -> tuple:
    """`shape` (an int or a tuple/list of ints, None dims too when `unknown`) as a tuple, or an InputError.

    >>> check_shape((2, None), 'mg.placeholder: shape', unknown=True)
    (2, None)
    """
    dims = (shape,) if is_int(shape) else shape
    if not isinstance(dims, (tuple, list)):
        raise InputError(f'{what}: expected a tuple of ints, got {type(shape).__name__} {shape!r}')
    return tuple(None if unknown and d is None else check_int(d, f'{what} {shape!r}', low=0)
                 for d in dims)


def check_dtype(dtype, what: str) -> np.dtype:
    """`dtype` as a numpy dtype of bool, integer or float values, or an InputError naming `what`."""
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.kind not in 'biuf':
        raise InputError(f'{what}: expected a bool, integer or float dtype '
                         f'(mg.float32, mg.int64, ...), got {dtype!r}')
    return dt


def check_flag(value, what: str) -> bool:
    """`value` as a bool (True/False only), or an InputError naming `what`."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f'{what}: expected True or False, got {type(value).__name__} {value!r}')
    return bool(value)


def check_name(name, what: str):
    """`name` if it is None or a str, else an InputError naming `what`."""
    if name is not None and not isinstance(name, str):
        raise InputError(f'{what}: name must be a string, got {type(name).__name__} {name!r}')
    return name
