"""Checking gradients: finite differences, gradcheck, and "all modes agree".

Use these in notebooks to check a gradient you derived by hand, or a primitive
you registered yourself:

>>> import numpy as np, minigrad as mg
>>> from minigrad.course.testing import gradcheck
>>> gradcheck(lambda x: (x * x).sum(), np.array([1.0, 2.0]))
True
"""
from __future__ import annotations

import numpy as np

from ..compiler import compile as compile_program
from ..core.graph import Graph, constant, gradients, placeholder
from ..session import Session
from ..core.tensor import Tensor, no_grad

__all__ = ['numerical_grad', 'gradcheck', 'assert_modes_agree']


def _array(x) -> np.ndarray:
    return np.asarray(x.data if isinstance(x, Tensor) else x)


def _as_float64(x) -> np.ndarray:
    a = _array(x)
    return a.astype(np.float64) if a.dtype.kind == 'f' else a


def _scalar(out, weights=None) -> float:
    o = np.asarray(_array(out), dtype=np.float64)
    return float(np.sum(o if weights is None else o * weights))


def numerical_grad(f, *arrays, eps: float = 1e-6, weights=None) -> list:
    """Central differences: d sum(f(*arrays)) / d array_i for each floating input, in float64.

    ``f`` is called with minigrad Tensors (float64, under ``no_grad``) and may return a
    Tensor or array of any shape; its elements are summed (weighted by ``weights`` if given).
    Non-float inputs (indices, masks) are passed through and get ``None``.

    >>> import numpy as np, minigrad as mg
    >>> numerical_grad(lambda x: x ** 3, np.array([2.0]))[0].round(4)
    array([12.])
    """
    xs = [_as_float64(a) for a in arrays]
    grads = []

    def value():
        with no_grad():
            return _scalar(f(*[Tensor._make(x) for x in xs]), weights)

    for x in xs:
        if x.dtype.kind != 'f':
            grads.append(None)
            continue
        g = np.zeros_like(x)
        flat, gflat = x.reshape(-1), g.reshape(-1)      # views into x and g
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            up = value()
            flat[i] = old - eps
            down = value()
            flat[i] = old
            gflat[i] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def _cotangent(out, seed=0):
    """Fixed random weights for the output: sum(out * r) catches errors a plain sum hides."""
    shape = np.shape(_array(out))
    return np.random.default_rng(seed).uniform(0.5, 1.5, size=shape)


def gradcheck(f, *inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3) -> bool:
    """Compare the tape's gradients of ``f`` with central differences (both in float64).

    ``inputs`` are arrays or Tensors; floating ones are differentiated, others (integer
    indices, bool masks) are passed through. The output may have any shape: the checked
    scalar is ``sum(f(*inputs) * r)`` with fixed random weights ``r``. Returns True, or
    raises AssertionError listing the largest error for each input.

    >>> import numpy as np, minigrad as mg
    >>> gradcheck(lambda a, b: mg.matmul(a, b).tanh(), np.ones((2, 3)), np.ones((3, 2)) * 0.1)
    True
    """
    xs = [_as_float64(a) for a in inputs]
    ts = [Tensor._make(x.copy(), None, x.dtype.kind == 'f') for x in xs]
    out = f(*ts)
    if not isinstance(out, Tensor):
        raise AssertionError(f'gradcheck: f must return a minigrad Tensor, got {type(out).__name__}')
    r = _cotangent(out)
    if out.grad_fn is not None:
        out.backward(gradient=r.astype(out.dtype))
    num = numerical_grad(f, *xs, eps=eps, weights=r)
    report, ok = [], True
    for i, (t, n) in enumerate(zip(ts, num)):
        if n is None:
            continue
        a = np.zeros_like(n) if t.grad is None else np.asarray(t.grad.data, dtype=np.float64)
        if a.shape != n.shape:
            ok = False
            report.append(f'  input {i} {xs[i].shape}: tape gradient has shape {a.shape}, expected {n.shape}')
            continue
        err = np.abs(a - n)
        bad = err > atol + rtol * np.abs(n)
        ok &= not bad.any()
        worst = np.unravel_index(np.argmax(err), err.shape) if err.size else ()
        line = f'  input {i} shape {xs[i].shape}: max abs error {err.max() if err.size else 0.0:.3g}'
        if bad.any():
            line += (f' at index {tuple(int(k) for k in worst)} (tape {a[worst]:.6g}, numerical '
                     f'{n[worst]:.6g}); {int(bad.sum())} of {bad.size} entries off  <-- MISMATCH')
        report.append(line)
    if not ok:
        raise AssertionError('gradcheck failed: the tape gradient differs from central differences '
                             f'(eps={eps}, atol={atol}, rtol={rtol}):\n' + '\n'.join(report))
    return True


def _close(a, b, rtol, atol):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False, f'shapes differ: {a.shape} vs {b.shape}'
    if a.dtype.kind == 'b' or b.dtype.kind == 'b':
        return bool(np.array_equal(a, b)), 'values differ'
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True):
        return True, ''
    return False, f'max abs difference {np.nanmax(np.abs(a64 - b64)):.3g}'


def assert_modes_agree(f, *arrays, rtol: float = 1e-5, atol: float = 1e-6, grads: bool = True):
    """Run ``f`` eagerly on the tape, as a static graph in a Session (gradients with
    ``mg.gradients``) and as a compiled Program (``mg.compile``); assert that values and
    gradients agree. ``f`` takes and returns minigrad values (Tensors or Symbols).

    Gradients are of ``sum(f(*arrays) * r)`` with fixed random weights, for every floating
    input. Returns a dict ``{mode: (value, [grads])}``; raises AssertionError naming the mode,
    the quantity and the difference on a mismatch.

    >>> import numpy as np, minigrad as mg
    >>> res = assert_modes_agree(lambda x, y: mg.exp(x) * y, np.ones(3, np.float32), np.arange(3.0))
    >>> [m for m in ('eager', 'session') if m in res]
    ['eager', 'session']
    """
    xs = [np.asarray(a) for a in arrays]
    diff = [x.dtype.kind == 'f' for x in xs] if grads else [False] * len(xs)
    results = {}

    # 1. eager tape
    ts = [Tensor._make(x.copy(), None, d) for x, d in zip(xs, diff)]
    out = f(*ts)
    val = np.asarray(out.data)
    differentiable = grads and val.dtype.kind == 'f' and any(diff)
    r = _cotangent(val).astype(val.dtype) if differentiable else None
    if differentiable and out.grad_fn is not None:
        out.backward(gradient=r)
    eager_grads = [(t.grad.data if t.grad is not None else np.zeros_like(x)) for t, x, d in zip(ts, xs, diff) if d] \
        if differentiable else []
    results['eager'] = (val, eager_grads)

    # 2. static graph + Session, gradients by mg.gradients
    g = Graph()
    with g.as_default():
        phs = [placeholder(x.dtype, x.shape, name=f'x{i}') for i, x in enumerate(xs)]
        y = f(*phs)
        gsyms = gradients(y, [p for p, d in zip(phs, diff) if d], grad_ys=constant(r)) if differentiable else []
    feed = dict(zip(phs, xs))
    vals = Session(g).run([y] + list(gsyms), feed)
    results['session'] = (vals[0], vals[1:])

    # 3. compiled Program
    pv = compile_program([y] + list(gsyms), phs)(*xs)
    pv = [pv] if not isinstance(pv, (list, tuple)) else list(pv)
    results['compiled'] = (pv[0], pv[1:])

    problems = []
    ref_val, ref_grads = results['eager']
    for mode, (v, gs) in results.items():
        if mode == 'eager':
            continue
        ok, why = _close(v, ref_val, rtol, atol)
        if not ok:
            problems.append(f'  {mode} value != eager value: {why}')
        for i, (a, b) in enumerate(zip(gs, ref_grads)):
            ok, why = _close(a, b, rtol, atol)
            if not ok:
                problems.append(f'  {mode} gradient {i} != eager gradient {i}: {why}')
    if problems:
        raise AssertionError('the modes disagree (rtol={}, atol={}):\n'.format(rtol, atol) + '\n'.join(problems))
    return results
