"""The op table, tested by iterating over it: every primitive in minigrad/core/ops.py needs cases here.

For each case: forward against numpy (and the shape rule), VJP against central
differences in float64, second derivatives (create_graph=True) against differences
of the first-order tape gradient, eager == Session == compiled Program, and, where
PyTorch is installed, forward and gradients against PyTorch.
"""
from __future__ import annotations

import importlib.util
from typing import Any, Callable, NamedTuple

import numpy as np
import pytest

import minigrad as mg
from minigrad import ops as P
from minigrad.core import Primitive, aval_of, Aval
from minigrad.course.testing import gradcheck, numerical_grad, assert_modes_agree

R = np.random.default_rng(1234)


def rnd(*shape, lo=-2.0, hi=2.0):
    return R.uniform(lo, hi, size=shape)


def pos(*shape):
    return R.uniform(0.5, 2.0, size=shape)


def away(*shape):   # values with |x| >= 0.5 (divisors)
    return R.uniform(0.5, 2.0, size=shape) * R.choice([-1.0, 1.0], size=shape)


class Case(NamedTuple):
    args: tuple               # arrays / scalars; floating arrays are differentiated
    params: dict
    ref: Callable             # numpy reference for the forward value
    id: str
    torch: Any = None         # (torch_fn) taking torch tensors; None = no PyTorch comparison


def C(args, ref, id, params=None, torch=None):
    return Case(tuple(args), params or {}, ref, id, torch)


def _t(name):
    """A torch function by attribute path, resolved lazily."""
    def f(*a, **k):
        import torch
        obj = torch
        for part in name.split('.'):
            obj = getattr(obj, part)
        return obj(*a, **k)
    return f


def _sum_to(g, shape):
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape) if d == 1 and g.shape[i + lead] != 1)
    return np.sum(g, axis=axes, keepdims=True).reshape(shape)


IDX_REPEAT = np.array([0, 2, 0, 1])
MASK = np.array([True, False, True])

CASES: dict[str, list[Case]] = {
    'add': [C([rnd(3, 4), rnd(3, 4)], np.add, 'same', torch=_t('add')),
            C([rnd(2, 1, 3), rnd(4, 1)], np.add, 'bcast', torch=_t('add')),
            C([rnd(3), 2.5], np.add, 'scalar')],
    'mul': [C([rnd(3, 4), rnd(3, 4)], np.multiply, 'same', torch=_t('mul')),
            C([rnd(2, 3, 1), rnd(1, 4)], np.multiply, 'bcast', torch=_t('mul')),
            C([rnd(), rnd(2, 3)], np.multiply, '0d-bcast', torch=_t('mul'))],
    'div': [C([rnd(3, 4), away(3, 4)], np.divide, 'same', torch=_t('div')),
            C([rnd(2, 3), away(3)], np.divide, 'bcast', torch=_t('div')),
            C([2.0, away(3)], np.divide, 'rscalar')],
    'pow': [C([pos(3, 2), rnd(3, 2)], np.power, 'same', torch=_t('pow')),
            C([pos(2, 3), rnd(3, lo=0.5, hi=2.0)], np.power, 'bcast', torch=_t('pow')),
            C([rnd(4), 2], np.power, 'int-exponent')],
    'maximum': [C([rnd(3, 4), rnd(3, 4)], np.maximum, 'same', torch=_t('maximum')),
                C([rnd(2, 3), rnd(3)], np.maximum, 'bcast', torch=_t('maximum'))],
    'neg': [C([rnd(3, 2)], np.negative, 'x', torch=_t('neg'))],
    'exp': [C([rnd(3, 2)], np.exp, 'x', torch=_t('exp'))],
    'log': [C([pos(3, 2)], np.log, 'x', torch=_t('log'))],
    'sin': [C([rnd(3, 2)], np.sin, 'x', torch=_t('sin'))],
    'cos': [C([rnd(3, 2)], np.cos, 'x', torch=_t('cos'))],
    'tanh': [C([rnd(3, 2)], np.tanh, 'x', torch=_t('tanh'))],
    'where': [C([rnd(3, 4) > 0, rnd(3, 4), rnd(3, 4)], np.where, 'same', torch=_t('where')),
              C([rnd(3, 1) > 0, rnd(4), rnd(3, 4)], np.where, 'bcast', torch=_t('where')),
              C([rnd(3) > 0, rnd(3), 0.0], np.where, 'scalar')],
    'cast': [C([rnd(3, 2)], lambda x, dtype: x.astype(dtype), 'f64', {'dtype': np.dtype(np.float64)})],
    'sum': [C([rnd(3, 4)], lambda x: np.sum(x), 'all', torch=_t('sum')),
            C([rnd(2, 3, 4)], lambda x, axis, keepdims: np.sum(x, axis, keepdims=keepdims), 'axis1',
              {'axis': (1,), 'keepdims': False}, torch=lambda x, axis, keepdims: x.sum(axis, keepdim=keepdims)),
            C([rnd(2, 3, 4)], lambda x, axis, keepdims: np.sum(x, axis, keepdims=keepdims), 'axes02-keep',
              {'axis': (0, 2), 'keepdims': True}, torch=lambda x, axis, keepdims: x.sum(axis, keepdim=keepdims))],
    'max': [C([rnd(3, 4)], lambda x: np.max(x), 'all', torch=_t('max')),
            C([rnd(2, 3, 4)], lambda x, axis, keepdims: np.max(x, axis, keepdims=keepdims), 'axis2',
              {'axis': (2,), 'keepdims': False}, torch=lambda x, axis, keepdims: x.amax(axis, keepdim=keepdims)),
            C([rnd(2, 3, 4)], lambda x, axis, keepdims: np.max(x, axis, keepdims=keepdims), 'axes01-keep',
              {'axis': (0, 1), 'keepdims': True}, torch=lambda x, axis, keepdims: x.amax(axis, keepdim=keepdims))],
    'reshape': [C([rnd(2, 6)], lambda x, shape: x.reshape(shape), '3x4', {'shape': (3, 4)},
                  torch=lambda x, shape: x.reshape(shape)),
                C([rnd(2, 3, 2)], lambda x, shape: x.reshape(shape), 'minus1', {'shape': (-1, 2)})],
    'transpose': [C([rnd(3, 4)], lambda x, axes: np.transpose(x, axes), 'T', {'axes': None}),
                  C([rnd(2, 3, 4)], lambda x, axes: np.transpose(x, axes), 'perm', {'axes': (2, 0, 1)},
                    torch=lambda x, axes: x.permute(axes))],
    'broadcast_to': [C([rnd(3, 1)], lambda x, shape: np.broadcast_to(x, shape), 'bcast', {'shape': (2, 3, 4)},
                       torch=lambda x, shape: x.broadcast_to(shape))],
    'getitem': [C([rnd(4, 5)], lambda x, idx: x[idx], 'slice', {'idx': (slice(1, 3), 2)},
                  torch=lambda x, idx: x[idx]),
                C([rnd(3, 4)], lambda x, idx: x[idx], 'none-ellipsis', {'idx': (Ellipsis, None, slice(None, None, 2))}),
                C([rnd(3, 4)], lambda x, idx: x[idx], 'int-array-repeats', {'idx': (IDX_REPEAT,)},
                  torch=lambda x, idx: x[_torch_idx(idx)]),
                C([rnd(3, 4)], lambda x, idx: x[idx], 'two-arrays', {'idx': (np.array([0, 2, 2]), np.array([1, 1, 3]))}),
                C([rnd(3, 4)], lambda x, idx: x[idx], 'bool-mask', {'idx': (MASK,)}),
                C([rnd(3, 4)], lambda x, idx: x[idx], 'array-and-slice', {'idx': (slice(None), np.array([3, 0, 3]))})],
    'scatter_add': [C([rnd(4, 4), rnd(3, 4)], lambda g, ref, idx: _np_scatter(g, ref, idx), 'repeats',
                      {'idx': (IDX_REPEAT,)}),
                    C([rnd(2), rnd(4, 5)], lambda g, ref, idx: _np_scatter(g, ref, idx), 'basic',
                      {'idx': (slice(1, 3), 2)})],
    'matmul': [C([rnd(3), rnd(3)], np.matmul, '1d@1d', torch=_t('matmul')),
               C([rnd(3), rnd(3, 2)], np.matmul, '1d@2d', torch=_t('matmul')),
               C([rnd(2, 3), rnd(3)], np.matmul, '2d@1d', torch=_t('matmul')),
               C([rnd(2, 3), rnd(3, 4)], np.matmul, '2d@2d', torch=_t('matmul')),
               C([rnd(2, 2, 3), rnd(3, 2)], np.matmul, 'batched@2d', torch=_t('matmul')),
               C([rnd(2, 1, 2, 3), rnd(3, 3, 2)], np.matmul, 'batch-bcast', torch=_t('matmul')),
               C([rnd(3), rnd(2, 3, 2)], np.matmul, '1d@batched', torch=_t('matmul'))],
    'concatenate': [C([rnd(2, 3), rnd(2, 1), rnd(2, 2)], lambda *xs, axis: np.concatenate(xs, axis), 'axis1',
                      {'axis': 1}, torch=lambda *xs, axis: _torch().cat(xs, axis)),
                    C([rnd(1, 3), rnd(2, 3)], lambda *xs, axis: np.concatenate(xs, axis), 'axis0', {'axis': 0})],
    'sum_to_like': [C([rnd(2, 3, 4), rnd(3, 1)], lambda g, ref: _sum_to(g, ref.shape), 'bcast')],
    'broadcast_like': [C([rnd(3, 1), rnd(2, 3, 4)], lambda g, ref, axes=(): np.broadcast_to(g, ref.shape), 'plain'),
                       C([rnd(2, 4), rnd(2, 3, 4)], lambda g, ref, axes: np.broadcast_to(
                           np.expand_dims(g, axes), ref.shape), 'axes', {'axes': (1,)})],
    'reshape_like': [C([rnd(2, 6), rnd(3, 4)], lambda g, ref: g.reshape(ref.shape), 'x')],
    # not differentiable: forward only
    'less': [C([rnd(3, 4), rnd(4)], np.less, 'bcast')],
    'greater': [C([rnd(3, 4), 0.0], np.greater, 'scalar')],
    'equal': [C([np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])], np.equal, 'x')],
    'less_equal': [C([np.array([1.0, 2.0, 3.0]), 2.0], np.less_equal, 'x')],
    'greater_equal': [C([np.array([1.0, 2.0, 3.0]), 2.0], np.greater_equal, 'x')],
    'not_equal': [C([np.array([1.0, 2.0, 3.0]), 2.0], np.not_equal, 'x')],
    'stop_gradient': [C([rnd(3)], lambda x: x, 'x')],
}


def _torch():
    import torch
    return torch


def _torch_idx(idx):
    return tuple(_torch().as_tensor(i) if isinstance(i, np.ndarray) else i for i in idx)


def _np_scatter(g, ref, idx):
    out = np.zeros(ref.shape)
    np.add.at(out, idx, g)
    return out


def op_table():
    """The primitives defined in minigrad/core/ops.py (not those other modules register)."""
    return [v for v in vars(P).values() if isinstance(v, Primitive)]


ALL = [pytest.param(p, c, id=f'{p.name}-{c.id}') for p in op_table() for c in CASES.get(p.name, [])]
DIFF = [pytest.param(p, c, id=f'{p.name}-{c.id}') for p in op_table() if p.vjp is not None
        for c in CASES.get(p.name, [])]
TORCH = [pytest.param(p, c, id=f'{p.name}-{c.id}') for p in op_table() for c in CASES.get(p.name, [])
         if c.torch is not None]
needs_torch = pytest.mark.skipif(importlib.util.find_spec('torch') is None,
                                 reason='PyTorch is not installed (pip install torch==2.13.0)')


def call(prim, case, args=None):
    return prim(*(case.args if args is None else args), **case.params)


def tensors(args, requires_grad=True, dtype=None):
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            a = a.astype(dtype) if dtype is not None and a.dtype.kind == 'f' else a
            out.append(mg.tensor(a, requires_grad=requires_grad and a.dtype.kind == 'f'))
        else:
            out.append(a)
    return out


# ------------------------------------------------------------------ completeness
def test_every_primitive_has_cases():
    missing = [p.name for p in op_table() if p.name not in CASES]
    assert not missing, f'primitives without test cases in tests/test_ops.py CASES: {missing}'


def test_every_differentiable_primitive_is_differentiated():
    names = {p.name for p in op_table() if p.vjp is not None}
    no_float = [n for n in names if not any(isinstance(a, np.ndarray) and a.dtype.kind == 'f'
                                            for c in CASES.get(n, []) for a in c.args)]
    assert not no_float, f'differentiable primitives with no floating test input: {no_float}'


# ------------------------------------------------------------------ forward
@pytest.mark.parametrize('prim,case', ALL)
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_forward_matches_numpy_and_shape_rule(prim, case, dtype):
    args = [a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == 'f' else a for a in case.args]
    ref = np.asarray(case.ref(*args, **case.params))
    out = call(prim, case, tensors(args, requires_grad=False))
    assert isinstance(out, mg.Tensor)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6 if dtype == np.float64 else 1e-5, atol=1e-6)
    assert out.shape == ref.shape
    arr_dts = [a.dtype for a in args if isinstance(a, np.ndarray) and a.dtype != np.bool_]
    # Python scalars are 'weak' (as when the graph builder lifts them): float32 + 2.5 -> float32
    avals = [aval_of(a) if isinstance(a, np.ndarray) else Aval((), np.result_type(*arr_dts, a)) for a in args]
    aval = prim.shape_rule(*avals, **case.params)
    assert aval.shape == out.shape, f'shape rule says {aval.shape}, numpy gives {out.shape}'
    assert aval.dtype == out.dtype, f'dtype rule says {aval.dtype}, numpy gives {out.dtype}'
    # the raw numpy path gives the same
    np.testing.assert_allclose(np.asarray(call(prim, case, args)), ref, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ first derivatives
@pytest.mark.parametrize('prim,case', DIFF)
def test_vjp_matches_finite_differences(prim, case):
    assert gradcheck(lambda *ts: call(prim, case, ts), *case.args, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('prim,case', DIFF)
def test_grad_shapes_and_dtypes_match_inputs(prim, case):
    ts = tensors(case.args, dtype=np.float32)
    out = call(prim, case, ts)
    (out * mg.tensor(np.ones(out.shape, np.float32))).sum().backward()
    for t in ts:
        if isinstance(t, mg.Tensor) and t.requires_grad and t.grad is not None:
            assert t.grad.shape == t.shape and t.grad.dtype == t.dtype


# ------------------------------------------------------------------ second derivatives
def tape_grads(f, arrays, r, s=None, create_graph=False):
    """Gradients of sum(f(x) * r) (or, with s, of sum(grad * s) : Hessian-vector products)."""
    ts = tensors(arrays)
    out = f(*ts)
    out.backward(gradient=r, create_graph=create_graph or s is not None)
    fl = [t for t in ts if isinstance(t, mg.Tensor) and t.requires_grad]
    if s is None:
        return [t.grad.numpy().copy() if t.grad is not None else np.zeros(t.shape) for t in fl]
    gs = [t.grad for t in fl]
    for t in fl:
        t.grad = None
    total = None
    for g, si in zip(gs, s):
        if g is not None and g.requires_grad:
            term = (g * si).sum()
            total = term if total is None else total + term
    if total is None:       # gradient does not depend on x at all: Hessian 0
        return [np.zeros(t.shape) for t in fl]
    total.backward()
    return [t.grad.numpy().copy() if t.grad is not None else np.zeros(t.shape) for t in fl]


@pytest.mark.parametrize('prim,case', DIFF)
def test_second_derivatives(prim, case):
    f = lambda *ts: call(prim, case, ts)
    out = f(*tensors(case.args, requires_grad=False))
    r = np.random.default_rng(0).uniform(0.5, 1.5, out.shape)
    flt = [i for i, a in enumerate(case.args) if isinstance(a, np.ndarray) and a.dtype.kind == 'f']
    s = [np.random.default_rng(i + 1).uniform(-1, 1, case.args[i].shape) for i in flt]
    hvp = tape_grads(f, case.args, r, s)
    # numerical: central differences of the (already checked) first-order tape gradient . s
    eps = 1e-6
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in case.args]
    for k, i in enumerate(flt):
        num = np.zeros(args[i].shape)
        flat, nflat = args[i].reshape(-1), num.reshape(-1)
        for j in range(flat.size):
            old = flat[j]
            flat[j] = old + eps
            up = sum(float(np.sum(g * si)) for g, si in zip(tape_grads(f, args, r), s))
            flat[j] = old - eps
            down = sum(float(np.sum(g * si)) for g, si in zip(tape_grads(f, args, r), s))
            flat[j] = old
            nflat[j] = (up - down) / (2 * eps)
        np.testing.assert_allclose(hvp[k], num, rtol=1e-4, atol=1e-5,
                                   err_msg=f'{prim.name}: Hessian-vector product for input {i}')


@pytest.mark.parametrize('prim,case', DIFF)
def test_second_derivatives_static_graph_match_tape(prim, case):
    """The same VJP rules on Symbols: mg.gradients of mg.gradients == the tape's Hessian-vector product."""
    f = lambda *ts: call(prim, case, ts)
    out = f(*tensors(case.args, requires_grad=False))
    r = np.random.default_rng(0).uniform(0.5, 1.5, out.shape)
    flt = [i for i, a in enumerate(case.args) if isinstance(a, np.ndarray) and a.dtype.kind == 'f']
    s = [np.random.default_rng(i + 1).uniform(-1, 1, case.args[i].shape) for i in flt]
    expect = tape_grads(f, case.args, r, s)
    g = mg.Graph()
    with g.as_default():
        syms = [mg.placeholder(a.dtype, a.shape) if isinstance(a, np.ndarray) else a for a in case.args]
        xs = [syms[i] for i in flt]
        y = f(*syms)
        gs = mg.gradients(y, xs, grad_ys=mg.constant(r))
        total = mg.sum(gs[0] * s[0])
        for gi, si in zip(gs[1:], s[1:]):
            total = total + mg.sum(gi * si)
        hs = mg.gradients(total, xs)
    feed = {syms[i]: case.args[i] for i in flt}
    for k, v in enumerate(mg.Session(g).run(hs, feed)):
        np.testing.assert_allclose(v, expect[k], rtol=1e-7, atol=1e-9, err_msg=f'{prim.name} input {flt[k]}')


# ------------------------------------------------------------------ eager == static == compiled
@pytest.mark.parametrize('prim,case', ALL)
def test_modes_agree(prim, case):
    args = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.kind == 'f' else a for a in case.args]
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    pos_of = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

    def f(*xs):
        full = list(args)
        for i, x in zip(pos_of, xs):
            full[i] = x
        return call(prim, case, full)
    assert_modes_agree(f, *arrays, rtol=1e-4, atol=1e-5, grads=prim.vjp is not None)


# ------------------------------------------------------------------ PyTorch
@needs_torch
@pytest.mark.parametrize('prim,case', TORCH)
def test_against_pytorch(prim, case):
    import torch
    ts = tensors(case.args)
    out = call(prim, case, ts)
    tts = [torch.tensor(a, requires_grad=a.dtype.kind == 'f') if isinstance(a, np.ndarray) else a
           for a in case.args]
    tout = case.torch(*tts, **case.params)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-6, atol=1e-8)
    if tout.dtype.is_floating_point:
        r = np.random.default_rng(0).uniform(0.5, 1.5, out.shape)
        out.backward(gradient=r)
        tout.backward(torch.tensor(r))
        for t, tt in zip(ts, tts):
            if isinstance(t, mg.Tensor) and t.requires_grad:
                np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------ composites (no gradient code)
COMPOSITES = [
    ('subtract', lambda x, y: mg.subtract(x, y), lambda x, y: x - y, [rnd(3, 4), rnd(4)]),
    ('sub-operator', lambda x, y: x - y, lambda x, y: x - y, [rnd(3, 4), rnd(3, 1)]),
    ('rsub', lambda x: 1.0 - x, lambda x: 1.0 - x, [rnd(3)]),
    ('minimum', mg.minimum, np.minimum, [rnd(3, 4), rnd(4)]),
    ('relu', mg.relu, lambda x: np.where(x > 0, x, 0), [rnd(3, 4)]),
    ('sigmoid', mg.sigmoid, lambda x: 1 / (1 + np.exp(-x)), [rnd(3, 4)]),
    ('softmax', lambda x: mg.softmax(x, axis=-1), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True),
     [rnd(3, 4)]),
    ('softmax-axis0', lambda x: mg.softmax(x, axis=0), lambda x: np.exp(x) / np.exp(x).sum(0, keepdims=True),
     [rnd(3, 4)]),
    ('log_softmax', lambda x: mg.log_softmax(x, axis=1),
     lambda x: x - np.log(np.exp(x).sum(1, keepdims=True)), [rnd(3, 4)]),
    ('logsumexp', lambda x: mg.logsumexp(x, axis=1), lambda x: np.log(np.exp(x).sum(1)), [rnd(3, 4)]),
    ('logsumexp-all-keep', lambda x: mg.logsumexp(x, keepdims=True),
     lambda x: np.log(np.exp(x).sum(keepdims=True)), [rnd(2, 3)]),
    ('mean', mg.mean, np.mean, [rnd(3, 4)]),
    ('mean-axis', lambda x: x.mean(axis=0, keepdims=True), lambda x: x.mean(0, keepdims=True), [rnd(3, 4)]),
    ('stack', lambda x, y: mg.stack([x, y], axis=1), lambda x, y: np.stack([x, y], 1), [rnd(3, 2), rnd(3, 2)]),
    ('sqrt', mg.sqrt, np.sqrt, [pos(3)]),
    ('abs', mg.abs, np.abs, [away(3, 2)]),
    ('min', lambda x: x.min(axis=1), lambda x: x.min(1), [rnd(3, 4)]),
    ('T-matmul', lambda a, b: a.T @ b, lambda a, b: a.T @ b, [rnd(3, 2), rnd(3, 4)]),
    ('pow-operator', lambda x: x ** 3, lambda x: x ** 3, [rnd(4)]),
    ('rpow', lambda x: 2.0 ** x, lambda x: 2.0 ** x, [rnd(4)]),
    ('rdiv', lambda x: 1.0 / x, lambda x: 1.0 / x, [away(4)]),
    ('index-operator', lambda x: x[1:, [0, 0, 2]], lambda x: x[1:, [0, 0, 2]], [rnd(3, 4)]),
]


@pytest.mark.parametrize('name,f,ref,args', COMPOSITES, ids=[c[0] for c in COMPOSITES])
def test_composites(name, f, ref, args):
    out = f(*[mg.tensor(a) for a in args])
    np.testing.assert_allclose(out.numpy(), ref(*args), rtol=1e-6, atol=1e-8)
    assert gradcheck(f, *args, atol=1e-6, rtol=1e-5)
    assert_modes_agree(f, *[a.astype(np.float32) for a in args], rtol=1e-4, atol=1e-5)


def test_composites_have_no_gradient_code():
    names = {p.name for p in op_table()}
    for composite in ['sub', 'subtract', 'minimum', 'relu', 'sigmoid', 'softmax', 'log_softmax', 'logsumexp',
                      'mean', 'stack']:
        assert composite not in names


def test_logsumexp_and_softmax_are_numerically_stable():
    x = np.array([[1000.0, 1000.0, -1000.0], [-1000.0, -1001.0, -1002.0]], np.float32)
    lse = mg.logsumexp(x, axis=1).numpy()
    assert np.all(np.isfinite(lse))
    np.testing.assert_allclose(lse, [1000 + np.log(2), -1000 + np.log(1 + np.exp(-1) + np.exp(-2))], rtol=1e-6)
    t = mg.tensor(x, requires_grad=True)
    sm = mg.softmax(t, axis=1)
    assert np.all(np.isfinite(sm.numpy()))
    mg.log_softmax(t, axis=1).sum().backward()
    assert np.all(np.isfinite(t.grad.numpy()))
    assert np.all(np.isfinite(mg.sigmoid(mg.tensor([-1000.0, 1000.0])).numpy()))


def test_relu_gradient_at_zero_is_zero_and_maximum_ties_split():
    x = mg.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    mg.relu(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]
    a, b = mg.tensor([1.0, 2.0], requires_grad=True), mg.tensor([1.0, 3.0], requires_grad=True)
    mg.maximum(a, b).sum().backward()
    assert a.grad.tolist() == [0.5, 0.0] and b.grad.tolist() == [0.5, 1.0]


def test_max_ties_share_gradient():
    x = mg.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]], requires_grad=True)
    x.max(axis=1).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]


def test_getitem_repeated_indices_accumulate():
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[np.array([0, 0, 2, 0])].sum().backward()
    assert x.grad.tolist() == [3.0, 0.0, 1.0]


# ------------------------------------------------------------------ integer and bool tensors
def test_integer_and_bool_forward():
    a, b = mg.tensor([1, 2, 3]), mg.tensor([3, 2, 1])
    assert (a + b).tolist() == [4, 4, 4] and (a + b).dtype == np.int64
    assert (a * 2).dtype == np.int64 and (a - b).tolist() == [-2, 0, 2]
    assert (a < b).tolist() == [True, False, False] and (a < b).dtype == np.bool_
    assert (a == b).tolist() == [False, True, False]
    assert (a < b).sum().item() == 1 and (a < b).sum().dtype == np.int64
    assert mg.where(a < b, a, b).tolist() == [1, 2, 1]
    assert a[np.array([2, 0])].tolist() == [3, 1]
    assert (mg.tensor([[1, 2], [3, 4]]) @ mg.tensor([1, 1])).tolist() == [3, 7]
    assert a.max().item() == 3 and a.reshape(3, 1).shape == (3, 1)
    assert mg.concatenate([a, b]).tolist() == [1, 2, 3, 3, 2, 1]
    assert a.mean().item() == pytest.approx(2.0)
    m = mg.tensor([True, False])
    assert (m == mg.tensor([True, True])).tolist() == [True, False]
    assert (a / 2).dtype.kind == 'f'


def test_mixed_int_float_ops_give_float_and_gradients():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    i = mg.tensor([3, 4])
    y = (w * i).sum()
    y.backward()
    assert w.grad.tolist() == [3.0, 4.0] and w.grad.dtype == np.float32 and y.dtype.kind == 'f'


def test_where_fast_path_keeps_inf_and_nan_semantics():
    x = np.linspace(-3, 3, 3000).astype(np.float32)         # big enough for the x * mask fast path
    x[[0, 5]] = [-np.inf, np.nan]
    x[-1] = np.inf
    out = mg.relu(mg.tensor(x)).numpy()
    np.testing.assert_array_equal(out, np.where(x > 0, x, 0))
    assert out[0] == 0 and out[5] == 0 and out[-1] == np.inf
    c = x > 0
    np.testing.assert_array_equal(mg.where(c, x, 0.0).numpy(), np.where(c, x, 0.0))
    np.testing.assert_array_equal(mg.where(c, 0, x).numpy(), np.where(c, 0, x))
    t = mg.tensor(np.linspace(-1, 1, 4096), requires_grad=True)
    mg.relu(t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), (t.numpy() > 0).astype(np.float64))


# ------------------------------------------------------------------ composites the rules use
@pytest.mark.parametrize('name', ['neg', 'greater', 'less_equal', 'greater_equal', 'not_equal'])
def test_composites_in_the_op_table_module_match_numpy(name):
    """-x, >, <=, >=, != are composites of primitives (no records of their own), exact as numpy."""
    fn = getattr(P, name)
    assert not isinstance(fn, Primitive)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5])
    for case in CASES.get(name, []):
        args = [np.asarray(a) if isinstance(a, np.ndarray) else a for a in case.args]
        np.testing.assert_array_equal(fn(*tensors(args, requires_grad=False)).numpy(), case.ref(*args))
    with np.errstate(invalid='ignore'):
        args = (special,) if name == 'neg' else (special[:, None], special[None, :])
        got = fn(*[mg.tensor(a) for a in args]).numpy()
        want = case.ref(*args)
    np.testing.assert_array_equal(got, want)
    ok = ~np.isnan(want) if want.dtype.kind == 'f' else np.ones(want.shape, bool)    # the sign of a nan is noise
    assert np.array_equal(np.signbit(got)[ok], np.signbit(want)[ok])
