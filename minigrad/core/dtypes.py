"""numpy 2's dtype rules (NEP 50) whatever numpy runs: a Python scalar is weak (it takes the dtype of
the arrays beside it), and the result dtype of a ufunc is the one numpy 2 gives.
"""
from __future__ import annotations

import functools

import numpy as np

from .primitive import Aval, aval_of, elementwise_rule, bool_, int64, float64
from .errors import InputError


_PYTHON_SCALARS = (bool, int, float)
# numpy 1.x promotes Python scalars by value
NEP50 = np.lib.NumpyVersion(np.__version__) >= '2.0.0'


def weak_dtype(value, dtypes, what='value') -> np.dtype:
    """The dtype a Python scalar takes beside values of ``dtypes`` (numpy 2's NEP 50, whatever numpy runs):
    an int adapts to the integers and floats there, a float to the floats, else int64 / float64; an
    int out of that dtype's range is an InputError (numpy 2 refuses it too).

    >>> weak_dtype(1, [np.dtype(np.uint8)]), weak_dtype(1.5, [np.dtype(np.int8)])
    (dtype('uint8'), dtype('float64'))
    """
    if isinstance(value, (bool, np.bool_)):
        return bool_
    kinds, default = ('iuf', int64) if isinstance(value, int) else ('f', float64)
    near = [d for d in dtypes if d.kind in kinds]
    dt = np.result_type(*near) if near else default
    if isinstance(value, int) and dt.kind in 'iu' and value not in int_range(dt):
        raise InputError(f'{what}: the Python int {value} is out of range for {dt} '
                         f'(numpy 2 refuses it too); use a wider dtype (.astype(mg.int64) '
                         f'or mg.float64) or a smaller number')
    return dt


# np.iinfo takes ~10 us a call: building a graph of scalar ops asked it per op
@functools.lru_cache(maxsize=None)
def int_range(dt) -> range:
    """The ints integer dtype `dt` holds: ``300 in int_range(np.dtype(np.int8))`` is False."""
    info = np.iinfo(dt)
    return range(int(info.min), int(info.max) + 1)


def exact_ints(x, y, divide=False):
    """(x, y), a Python int out of the range of the other's integer dtype made a numpy value that holds it, as
    numpy 2 divides and compares such an int (NEP 50 lets these ufuncs take its value; add and the others refuse
    it): int8 / 300 is float64, int8 < 300 True. Beyond 64 bits a division takes it as a float, a comparison as
    +-2**65 (every 64-bit int compares with it as with the int)."""
    def exact(v, other):
        dt = aval_of(other).dtype if type(v) is int else None
        if dt is None or dt.kind not in 'iu' or v in int_range(dt):
            return v
        if v in range(-2 ** 63, 2 ** 64):
            return np.int64(v) if v < 2 ** 63 else np.uint64(v)
        return float(v) if divide else 2.0 ** 65 if v > 0 else -2.0 ** 65
    return exact(x, y), exact(y, x)


def check_weak_ints(op: str, vals):
    """An InputError for a Python int out of the range of the arrays' dtype (numpy 1.x would widen it), but in a
    division or a comparison, which numpy 2 computes (see exact_ints)."""
    strong = [v.dtype for v in vals if isinstance(v, np.ndarray)]
    for v in vals:
        if type(v) is int and strong and op not in ('div', 'less', 'equal'):
            weak_dtype(v, strong, op)


def result_dtype(ufunc, op: str, *xs) -> np.dtype:
    """The dtype numpy 2 gives ``ufunc(*xs)`` (Python scalars weak, NEP 50), or an error naming ``op``.

    >>> result_dtype(np.subtract, 'subtract', np.zeros(2, np.int8), np.zeros(2, np.uint8))
    dtype('int16')
    """
    strong = [aval_of(x).dtype for x in xs if not isinstance(x, _PYTHON_SCALARS)]
    dts = [weak_dtype(x, strong, op) if isinstance(x, _PYTHON_SCALARS) else aval_of(x).dtype
           for x in xs]
    avals = [Aval((), dt) for dt in dts]
    return elementwise_rule(*avals, _op=op, _ufunc=ufunc).dtype
