"""numpy 2's dtype rules (NEP 50) in every mode (issue 34): a matrix of the primitives and public
composites x dtypes (and Python int/float/bool scalars) against numpy itself, the oracle. Where numpy
computes, minigrad gives the same dtype and values; where numpy refuses (bool - bool, -bool, uint8 + 300),
minigrad raises a MinigradError. In full on the eager tape, the graph interpreter (Session) and the
numpy backend; a sample on numba (each kernel compiles cold in about half a second)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.core.errors import MinigradError

pytestmark = pytest.mark.skipif(int(np.__version__.split('.')[0]) < 2, reason='numpy 2 is the oracle (NEP 50)')
DTYPES = ['bool', 'int8', 'int32', 'int64', 'uint8', 'uint32', 'float32', 'float64']
SCALARS = [3, 1.5, True]
COND = np.array([True, False, True, False])

BINARY = {      # name: (numpy's form, minigrad's form)
    'add': (np.add, lambda a, b: a + b), 'sub': (np.subtract, lambda a, b: a - b),
    'mul': (np.multiply, lambda a, b: a * b), 'div': (np.true_divide, lambda a, b: a / b),
    'pow': (np.power, lambda a, b: a ** b), 'maximum': (np.maximum, mg.maximum),
    'minimum': (np.minimum, mg.minimum), 'less': (np.less, lambda a, b: a < b),
    'greater': (np.greater, lambda a, b: a > b), 'equal': (np.equal, mg.equal),
    'where': (lambda a, b: np.where(COND, a, b), lambda a, b: mg.where(COND, a, b)),
}
UNARY = {
    'neg': (np.negative, lambda a: -a), 'abs': (np.abs, mg.abs), 'sum': (np.sum, mg.sum),
    'sum axis keepdims': (lambda a: np.sum(a, 0, keepdims=True), lambda a: mg.sum(a, 0, keepdims=np.True_)),
    'max': (np.max, mg.max), 'min': (np.min, mg.min),
}
FAST_MODES = ['eager', 'session']       # and 'compiled': the numpy backend, a program per case


def _array(dt, which):
    """x has a 0 (min of unsigned, x / 0) and y no zero (no integer 0 ** -k, no x // 0)."""
    return np.array([0, 1, 3, 2] if which == 'x' else [2, 1, 1, 3]).astype(dt)


def _numpy(f, *args):
    """numpy's answer: the array, or the exception class when numpy refuses."""
    try:
        with np.errstate(all='ignore'):
            return np.asarray(f(*args))
    except Exception as e:      # numpy refuses (TypeError, OverflowError, ...): minigrad must refuse too
        return type(e)


def _minigrad(f, args, mode, backend='numpy'):
    """Run f with the arrays among args as tensors (eager) or placeholders (session, compiled)."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    if mode == 'eager':
        it = iter([mg.tensor(a, dtype=a.dtype) for a in arrays])
        return f(*[next(it) if isinstance(a, np.ndarray) else a for a in args]).numpy()
    g = mg.Graph()
    with g.as_default():
        ps = [mg.placeholder(a.dtype, a.shape) for a in arrays]
        it = iter(ps)
        out = f(*[next(it) if isinstance(a, np.ndarray) else a for a in args])
    if mode == 'session':
        return mg.Session(g).run(out, dict(zip(ps, arrays)))
    return mg.compile(out, ps, backend=backend)(*arrays)


def _check(name, np_f, mg_f, args, mode, backend='numpy'):
    """'' when minigrad agrees with numpy, else what differs."""
    want = _numpy(np_f, *args)
    label = f"{name}({', '.join(a.dtype.name if isinstance(a, np.ndarray) else repr(a) for a in args)}) {mode}"
    try:
        with np.errstate(all='ignore'), warnings.catch_warnings():
            warnings.simplefilter('ignore')
            got = np.asarray(_minigrad(mg_f, args, mode, backend))
    except MinigradError as e:
        return '' if isinstance(want, type) else f'{label}: {type(e).__name__} where numpy gives {want.dtype}: {e}'
    except Exception as e:
        return f'{label}: raw {type(e).__name__}: {e}'
    if isinstance(want, type):
        return f'{label}: {got.dtype} where numpy refuses ({want.__name__})'
    if got.dtype != want.dtype or got.shape != want.shape or \
            not np.allclose(got.astype(np.float64), want.astype(np.float64), equal_nan=True):
        return f'{label}: {got.dtype} {got.tolist()} where numpy gives {want.dtype} {want.tolist()}'
    return ''


def _binary_cases(name, left):
    np_f, mg_f = BINARY[name]
    x = _array(left, 'x')
    for right in DTYPES:
        yield np_f, mg_f, (x, _array(right, 'y'))
    for s in SCALARS:
        yield np_f, mg_f, (x, s)
        yield np_f, mg_f, (s, x)


def _run(cases, name, modes):
    bad = [m for np_f, mg_f, args in cases for mode in modes for m in [_check(name, np_f, mg_f, args, mode)] if m]
    assert not bad, f'{len(bad)} disagree with numpy:\n' + '\n'.join(bad[:20])


@pytest.mark.parametrize('left', DTYPES)
@pytest.mark.parametrize('name', sorted(BINARY))
def test_binary_dtypes_all_modes(name, left):
    """Each left dtype against every dtype and the Python scalars on either side (about 5 s in all)."""
    _run(list(_binary_cases(name, left)), name, FAST_MODES + ['compiled'])


@pytest.mark.parametrize('name', sorted(UNARY))
def test_unary_dtypes_all_modes(name):
    np_f, mg_f = UNARY[name]
    _run([(np_f, mg_f, (_array(dt, 'x'),)) for dt in DTYPES], name, FAST_MODES + ['compiled'])


NUMBA_SAMPLE = [     # <= 20 kernels: the cases the issue saw break, one kernel (or none) each
    ('sub', (_array('uint8', 'x'), 1)), ('sub', (_array('int8', 'x'), _array('uint8', 'y'))),
    ('sub', (_array('float32', 'x'), _array('bool', 'y'))), ('sub', (_array('int8', 'x'), _array('bool', 'y'))),
    ('sub', (_array('bool', 'x'), _array('bool', 'y'))), ('minimum', (_array('uint8', 'x'), _array('uint8', 'y'))),
    ('mul', (_array('uint8', 'x'), 3)), ('add', (_array('int8', 'x'), 1.5)), ('div', (_array('int32', 'x'), 2)),
    ('pow', (_array('uint32', 'x'), _array('int8', 'y'))),
]


@pytest.mark.parametrize('name, args', NUMBA_SAMPLE, ids=[f'{n}-{i}' for i, (n, _) in enumerate(NUMBA_SAMPLE)])
def test_numba_sample(name, args):
    if not mg.compiler.kernels.available():     # importorskip would not skip test_without_numba's blocker
        pytest.skip('numba is not installed')
    np_f, mg_f = BINARY[name]
    assert _check(name, np_f, mg_f, args, 'compiled', backend='numba') == ''


@pytest.mark.parametrize('name', ['neg', 'abs', 'min'])
def test_numba_unary_unsigned(name):
    if not mg.compiler.kernels.available():     # importorskip would not skip test_without_numba's blocker
        pytest.skip('numba is not installed')
    np_f, mg_f = UNARY[name]
    assert _check(name, np_f, mg_f, (_array('uint8', 'x'),), 'compiled', backend='numba') == ''


@pytest.mark.parametrize('mode', FAST_MODES + ['compiled'])
def test_big_ints_are_clear_errors(mode):
    """numpy 2 refuses a Python int out of the dtype's range; so does minigrad, naming the op."""
    for f, a in ((lambda t: t * 2 ** 70, np.arange(3)), (lambda t: t + 300, np.arange(3, dtype=np.uint8))):
        with pytest.raises(MinigradError, match='out of range'):
            _minigrad(f, (a,), mode)
    with pytest.raises(MinigradError):
        _minigrad(lambda t: t[2 ** 63], (np.ones(3),), mode)


def test_int8_min_of_the_lowest_value():
    """min composed as -max(-x) was wrong at -128 (its negation wraps to itself)."""
    x = np.array([-128, 5, 0], np.int8)
    assert mg.min(mg.tensor(x)).numpy() == -128 and mg.minimum(mg.tensor(x), 1).numpy().tolist() == [-128, 1, 0]
