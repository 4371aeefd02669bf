"""The op matrix: every primitive of the op table (minigrad/core/ops.py) x every interpretation of it.

Columns, each iterating the same CASES (one completeness assertion per column: every primitive has the
rule and cases for it, or is listed below as an explicit exception with its reason):

  impl      forward against numpy, float64 and float32, and the shape/dtype rule against the result
  vjp       against central differences (float64), grad shapes/dtypes, second order on the tape and in a
            static graph (mg.gradients of mg.gradients)
  torch     forward and gradients against PyTorch (where installed)
  jvp       forward mode against reverse mode (<J v, u> == <v, J^T u>) and central differences
  batch     the batching rule (mg.vmap) against a Python loop, the batch axis first, last, or on one input
  compiler  eager == Session (graph interpreter) == compiled Program (values and gradients)
  onnx      the ONNX lowering run by onnxruntime against the numpy impl (where installed)

Then the per-op cases that are not one cell of the matrix: composites (no gradient code), the op record
itself (one record read everywhere), numpy 2's dtype rules (NEP 50) per op and dtype, edge values
(signed zeros, inf/nan, empty, unknown dims) per op against PyTorch, and version counters (in-place
changes of values an op saved for backward).
"""
from __future__ import annotations

import ast
import inspect
import io
import itertools
import warnings
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
import pytest

import minigrad as mg
from minigrad import ops as P
from minigrad.core import (PRIMITIVES, OPS, Primitive, Aval, aval_of, register_primitive, elementwise_rule)
from minigrad.core.errors import MinigradError, ShapeError
from minigrad.course.testing import gradcheck, assert_modes_agree

try:
    import torch
except ImportError:         # the torch column and the PyTorch comparisons skip, with the reason
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason='PyTorch is not installed (pip install torch==2.13.0)')
numpy2 = pytest.mark.skipif(int(np.__version__.split('.')[0]) < 2, reason='numpy 2 is the oracle (NEP 50)')


# ======================================== the cases
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
    'cast': [C([rnd(3, 2)], lambda x, dtype: x.astype(dtype), 'f64', {'dtype': np.dtype(np.float64)},
               torch=lambda x, dtype: x.to(_torch().float64))],
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
                      {'idx': (IDX_REPEAT,)}, torch=lambda g, ref, idx: _torch().zeros_like(ref).index_put(
                          _torch_idx(idx), g, accumulate=True)),
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
    'sum_to_like': [C([rnd(2, 3, 4), rnd(3, 1)], lambda g, ref: _sum_to(g, ref.shape), 'bcast',
                      torch=lambda g, ref: g.sum_to_size(ref.shape))],
    'broadcast_like': [C([rnd(3, 1), rnd(2, 3, 4)], lambda g, ref, axes=(): np.broadcast_to(g, ref.shape), 'plain',
                         torch=lambda g, ref: g.expand_as(ref)),
                       C([rnd(2, 4), rnd(2, 3, 4)], lambda g, ref, axes: np.broadcast_to(
                           np.expand_dims(g, axes), ref.shape), 'axes', {'axes': (1,)})],
    'reshape_like': [C([rnd(2, 6), rnd(3, 4)], lambda g, ref: g.reshape(ref.shape), 'x',
                       torch=lambda g, ref: g.reshape_as(ref))],
    # not differentiable: forward only
    'less': [C([rnd(3, 4), rnd(4)], np.less, 'bcast', torch=_t('lt'))],
    'greater': [C([rnd(3, 4), 0.0], np.greater, 'scalar')],
    'equal': [C([np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])], np.equal, 'x', torch=_t('eq'))],
    'less_equal': [C([np.array([1.0, 2.0, 3.0]), 2.0], np.less_equal, 'x')],
    'greater_equal': [C([np.array([1.0, 2.0, 3.0]), 2.0], np.greater_equal, 'x')],
    'not_equal': [C([np.array([1.0, 2.0, 3.0]), 2.0], np.not_equal, 'x')],
    'stop_gradient': [C([rnd(3)], lambda x: x, 'x', torch=lambda x: x.detach())],
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


# ------------------------------------------------------------------ completeness: one assertion per column
# The explicit exceptions, each with its reason. A primitive missing from a column and not listed here fails.
NO_VJP = {      # primitives without a VJP (mg.gradients and backward give no gradient through them)
    'less': 'a comparison: its output is bool, there is nothing to differentiate',
    'equal': 'a comparison: its output is bool, there is nothing to differentiate',
    'stop_gradient': 'its whole meaning is a zero gradient (forward mode gives it a zero tangent, checked below)',
}
NO_COMPILER_RULE = {    # primitives the generated code runs by calling their numpy impl (no ufunc, emit or lower)
    'scatter_add': 'np.add.at has no out= form and no fused loop reads it; the program calls the impl',
}
NO_TORCH_GRAD = {       # cases whose PyTorch comparison is forward only
    'less': 'bool output', 'equal': 'bool output', 'stop_gradient': 'no gradient on either side (detach)',
}


def test_every_primitive_has_cases():
    missing = [p.name for p in op_table() if p.name not in CASES]
    assert not missing, f'primitives without test cases in CASES: {missing}'


def test_vjp_column_is_complete():
    """Every primitive has a VJP and a floating case to check it on, or is listed in NO_VJP."""
    assert sorted(p.name for p in op_table() if p.vjp is None) == sorted(NO_VJP)
    names = {p.name for p in op_table() if p.vjp is not None}
    no_float = [n for n in names if not any(isinstance(a, np.ndarray) and a.dtype.kind == 'f'
                                            for c in CASES.get(n, []) for a in c.args)]
    assert not no_float, f'differentiable primitives with no floating test input: {no_float}'


def test_torch_column_is_complete():
    """Every primitive has a PyTorch case; the listed ones are compared forward only."""
    assert [p.name for p in op_table() if not any(c.torch for c in CASES.get(p.name, []))] == []
    assert set(NO_TORCH_GRAD) == {p.name for p in op_table() if p.vjp is None}


def test_jvp_column_is_complete():
    assert [p.name for p in op_table() if p.jvp is None] == []


def test_batching_column_is_complete():
    builtin = [p for p in op_table() if p.kind == 'primitive']
    assert len(builtin) == 27 and all(p.name in PRIMITIVES for p in builtin)
    missing = [p.name for p in builtin if p.batch is None]
    assert not missing, f'primitives without a batching rule: {missing}'


def test_compiler_column_is_complete():
    """Every primitive tells the code generator how to emit it (ufunc, emit or lower), or is listed."""
    plain = [p.name for p in op_table() if p.ufunc is None and p.emit is None and p.lower is None]
    assert sorted(plain) == sorted(NO_COMPILER_RULE)


def test_onnx_column_is_complete():
    assert [p.name for p in op_table() if p.onnx is None] == []


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
    # the same in a static graph: mg.gradients' Symbols and their values have the inputs' shapes and dtypes
    args = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.kind == 'f' else a for a in case.args]
    flt = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == 'f']
    g = mg.Graph()
    with g.as_default():
        syms = [mg.placeholder(a.dtype, a.shape) if isinstance(a, np.ndarray) else a for a in args]
        gs = mg.gradients(call(prim, case, syms).sum(), [syms[i] for i in flt])
    vals = mg.Session(g).run(gs, {s: a for s, a in zip(syms, args) if isinstance(a, np.ndarray)})
    for i, gsym, v in zip(flt, gs, vals):
        assert (gsym.shape, gsym.dtype) == (args[i].shape, args[i].dtype), (prim.name, i, gsym.shape, gsym.dtype)
        assert (v.shape, v.dtype) == (args[i].shape, args[i].dtype), (prim.name, i, v.shape, v.dtype)


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
    ts = tensors(case.args)
    out = call(prim, case, ts)
    tts = [torch.tensor(a, requires_grad=a.dtype.kind == 'f') if isinstance(a, np.ndarray) else a
           for a in case.args]
    tout = case.torch(*tts, **case.params)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-6, atol=1e-8)
    assert tout.requires_grad == out.requires_grad, 'minigrad and PyTorch disagree on whether the output has a gradient'
    if tout.dtype.is_floating_point and tout.requires_grad:
        r = np.random.default_rng(0).uniform(0.5, 1.5, out.shape)
        out.backward(gradient=r)
        tout.backward(torch.tensor(r))
        for t, tt in zip(ts, tts):
            if isinstance(t, mg.Tensor) and t.requires_grad:     # an input the output does not read: no gradient
                got = t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
                want = tt.grad.numpy() if tt.grad is not None else np.zeros(t.shape)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------ forward mode (JVP rules)
def _split_case(case):
    """The floating array inputs (what gets tangents) and f of just those."""
    flt = [i for i, a in enumerate(case.args) if isinstance(a, np.ndarray) and a.dtype.kind == 'f']

    def f(prim, *xs):
        return call(prim, case, _put(case, flt, xs))
    return flt, f


def _put(case, where, xs):
    full = list(case.args)
    for i, x in zip(where, xs):
        full[i] = x
    return full


@pytest.mark.parametrize('prim,case', ALL)
def test_jvp_matches_reverse_mode_and_finite_differences(prim, case):
    flt, f = _split_case(case)
    rng = np.random.default_rng(7)
    xs = [case.args[i].astype(np.float64) for i in flt]
    vs = [rng.uniform(-1, 1, x.shape) for x in xs]
    out, dout = mg.jvp(lambda *ts: f(prim, *ts), tuple(xs), tuple(vs))
    assert isinstance(out, mg.Tensor) and isinstance(dout, mg.Tensor)
    np.testing.assert_allclose(out.numpy(), np.asarray(call(prim, case)), rtol=1e-12, atol=1e-12)
    assert dout.shape == out.shape
    if out.dtype.kind != 'f' or prim.vjp is None:        # comparisons, stop_gradient: zero tangent
        assert not np.any(dout.numpy())
        return
    assert dout.dtype == out.dtype
    # reverse mode: <J v, u> == <v, J^T u>
    u = rng.uniform(-1, 1, out.shape)
    ts = tensors(xs, dtype=np.float64)
    f(prim, *ts).backward(gradient=u)
    lhs = float(np.sum(dout.numpy() * u))
    rhs = sum(float(np.sum(v * (t.grad.numpy() if t.grad is not None else 0))) for v, t in zip(vs, ts))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-12), f'{prim.name}: <Jv, u> != <v, J^T u>'
    # central differences along v
    eps = 1e-6
    up = np.asarray(call(prim, case, _put(case, flt, [x + eps * v for x, v in zip(xs, vs)])))
    down = np.asarray(call(prim, case, _put(case, flt, [x - eps * v for x, v in zip(xs, vs)])))
    np.testing.assert_allclose(dout.numpy(), (up - down) / (2 * eps), rtol=1e-5, atol=1e-7,
                               err_msg=f'{prim.name}: jvp against central differences')


# ------------------------------------------------------------------ batching rules (vmap) against a loop
def _other(a):
    """A second batch member unlike the first: floats scaled (signs and |x| >= 0.5 kept), bools flipped."""
    return ~a if a.dtype == np.bool_ else a * 0.75 if a.dtype.kind == 'f' else a


BATCHINGS = {   # which array inputs carry the batch, and at which axis
    'all-first': lambda arrays: [0] * len(arrays),
    'first-input-last-axis': lambda arrays: [arrays[0].ndim] + [None] * (len(arrays) - 1),
    'last-input-only': lambda arrays: [None] * (len(arrays) - 1) + [0],
}


BATCHED = [pytest.param(p, c, b, id=f'{p.name}-{c.id}-{b}') for p in op_table() for c in CASES.get(p.name, [])
           for b in BATCHINGS if b != 'last-input-only' or sum(isinstance(a, np.ndarray) for a in c.args) > 1]


@pytest.mark.parametrize('prim,case,batching', BATCHED)
def test_batching_rule_matches_a_loop(prim, case, batching):
    where = [i for i, a in enumerate(case.args) if isinstance(a, np.ndarray)]
    arrays = [case.args[i] for i in where]
    axes = BATCHINGS[batching](arrays)
    members = [[a if ax is None else (a, _other(a))[b] for a, ax in zip(arrays, axes)] for b in range(2)]
    batched = [a if ax is None else np.stack([a, _other(a)], axis=ax) for a, ax in zip(arrays, axes)]
    want = np.stack([np.asarray(call(prim, case, _put(case, where, m))) for m in members])
    got = mg.vmap(lambda *xs: call(prim, case, _put(case, where, xs)), in_axes=tuple(axes))(*batched)
    assert isinstance(got, mg.Tensor) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12, err_msg=f'{prim.name} {batching}')


# ------------------------------------------------------------------ ONNX lowerings against onnxruntime
@pytest.mark.parametrize('prim,case', ALL)
def test_onnx_lowering_matches_onnxruntime(prim, case):
    onnx = pytest.importorskip('onnx')
    ort = pytest.importorskip('onnxruntime')
    args = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.kind == 'f' else a for a in case.args]
    where = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    g = mg.Graph()
    with g.as_default():
        phs = [mg.placeholder(args[i].dtype, args[i].shape, name=f'x{i}') for i in where]
        y = call(prim, case, _put(case, where, phs))
    m = mg.to_onnx(y, inputs=phs)
    onnx.checker.check_model(m, full_check=True)
    ort.set_default_logger_severity(3)
    sess = ort.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider'])
    got, = sess.run(None, {f'x{i}': args[i] for i in where})
    want = np.asarray(call(prim, case, args))
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


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


# ======================================== the op record: one record, read everywhere
PKG = Path(mg.__file__).parent
DOCUMENTED = ['add', 'mul', 'div', 'pow', 'exp', 'log', 'sin', 'cos', 'tanh', 'maximum', 'where', 'less', 'equal',
              'cast', 'stop_gradient', 'sum', 'max', 'reshape', 'transpose', 'broadcast_to', 'getitem',
              'scatter_add', 'matmul', 'concatenate', 'sum_to_like', 'broadcast_like', 'reshape_like']


def test_the_primitives_are_the_documented_ones():
    builtin = {v.name for v in vars(mg.ops).values() if isinstance(v, mg.Primitive)}
    assert builtin == set(DOCUMENTED) and len(DOCUMENTED) == 27 and builtin <= set(PRIMITIVES)
    for name in DOCUMENTED:
        assert name in mg.ops.__doc__
    kinds = {p.kind for p in OPS.values()}
    assert kinds == {'primitive', 'node', 'compiler'}
    assert {n for n, p in OPS.items() if p.kind == 'node'} >= {'placeholder', 'constant', 'variable', 'assign',
                                                               'group', 'cond', 'while', 'while_grad'}
    assert {n for n, p in OPS.items() if p.kind == 'compiler'} == {'fma', 'sub', 'relu', 'fused', 'kernel'}


def _square_vjp(needs, g, out, x):
    return (g * x * 2.0,)


@pytest.fixture
def square():
    """A primitive registered by a test, for the test only (the op table is global)."""
    yield register_primitive('square_test', np.square, elementwise_rule, _square_vjp, elementwise=True,
                             ufunc='square', doc='x * x, registered by a test',
                             kernel=lambda a, params, ctx: f'{a[0]} * {a[0]}')
    PRIMITIVES.pop('square_test', None)
    OPS.pop('square_test', None)


def test_a_new_primitive_works_everywhere_from_one_record(square):
    SQUARE = square
    # tape: value and gradient
    x = mg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = SQUARE(x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -4.0, 6.0])
    # graph + Session + mg.gradients
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, (3,), name='p')
        z = SQUARE(p * 2.0 + 1.0)
        gz, = mg.gradients(z.sum(), [p])
    v = np.array([1.0, -2.0, 3.0], np.float32)
    val, grad = mg.Session(g).run([z, gz], {p: v})
    np.testing.assert_allclose(val, (2 * v + 1) ** 2)
    np.testing.assert_allclose(grad, 4 * (2 * v + 1))
    # compiled: inside a fused group, one ufunc call (numpy backend) or one line of a loop (numba)
    for backend in mg.compiler.BACKENDS if mg.compiler.kernels.available() else ['numpy']:
        prog = mg.compile([z, gz], [p], backend=backend)
        fused = [n for n in prog.graph.nodes if n.op == 'fused']
        assert any(m.op == 'square_test' for f in fused for m in f.params['graph'].nodes)
        assert ('np_square(' if backend == 'numpy' else '# square_test') in prog.source
        for got, want in zip(prog(v), (val, grad)):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    # a drawing names it
    assert 'square_test' in mg.draw(z).source


def _op_name_comparisons(path):
    """Comparisons of an op's name (``x.op`` or ``x.name``) with string literals."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Attribute) and s.attr in ('op',) for s in sides)
            strings = any(isinstance(s, ast.Constant) and isinstance(s.value, str) or
                          isinstance(s, (ast.Tuple, ast.List, ast.Set)) and s.elts and
                          all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in s.elts)
                          for s in sides)
            if named and strings:
                found.append(f'{path.name}:{node.lineno}')
    return found


def test_no_op_name_comparisons_outside_the_op_table():
    files = [p for p in PKG.rglob('*.py') if p.name != 'ops.py' or p.parent.name == 'compiler']
    assert [f for p in files for f in _op_name_comparisons(p)] == []


def test_state_is_declared():
    for cls in (mg.Graph, mg.Node, mg.Symbol, mg.Tensor, mg.Primitive):
        assert '__slots__' in vars(cls), cls
    g = mg.Graph()
    try:
        g.bolted_on = 1
    except AttributeError:
        pass
    else:
        raise AssertionError('Graph accepts attributes from outside')
    with g.as_default():
        v = mg.Variable(1.0, name='v')
        p = mg.placeholder(mg.float32, (), name='p')
        made = [p, p * 2.0, v * p, mg.constant(3.0), v.assign(v + 1.0)]
    assert type(v) is mg.Variable and isinstance(v, mg.Symbol)
    assert {type(s) for s in made} == {mg.Symbol}          # a Variable's class is its own: no other Symbol gets it
    assert type(v) is mg.Variable and mg.Session(g).run(v) == 1.0


def test_one_graph_walk(monkeypatch):
    """The interpreter, Session, the compiler, ONNX export and the drawings and Stepper of a graph find what a
    fetch needs with core.topo_order (through graph.needed_nodes). The tape's backward walks its nodes once, with
    tensor._tape_order (the fast layer's tape_walk item may replace it; test_tape checks that it gives
    core.topo_order's order)."""
    from minigrad.core import primitive, tensor
    walks = []
    topo_order, tape_order = primitive.topo_order, tensor._tape_order
    monkeypatch.setattr(primitive, 'topo_order', lambda *a, **k: walks.append('graph') or topo_order(*a, **k))
    monkeypatch.setattr(tensor, '_tape_order', lambda *a, **k: walks.append('tape') or tape_order(*a, **k))
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, (3,), name='p')
        y = mg.exp(p) * 2.0
    v = np.ones(3, np.float32)
    uses = {'Session': lambda: mg.Session(g).run(y, {p: v}), 'compile': lambda: mg.compile(y, [p])(v),
            'draw': lambda: mg.draw(y).source, 'Stepper': lambda: mg.viz.Stepper(y, feed_dict={p: v}),
            'interpreter': lambda: mg.core.interpreter.evaluate(g, [y], {id(p): v}),
            'export_onnx': lambda: mg.export_onnx(y, io.BytesIO(), inputs=[p])}
    for name, use in uses.items():
        walks.clear()
        use()
        assert 'graph' in walks and 'tape' not in walks, (name, walks)
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    loss = (mg.tanh(x * x) * x).sum()
    walks.clear()
    loss.backward()
    # one walk of the whole tape: the plain _tape_order walks it with core.topo_order, the fast layer's in place
    assert walks == (['tape'] if 'tape_walk' in mg.fast.installed() else ['tape', 'graph'])
    np.testing.assert_allclose(x.grad.numpy(), np.tanh([1.0, 4.0]) + [2.0, 8.0] / np.cosh([1.0, 4.0]) ** 2,
                               rtol=1e-6)


# ======================================== dtypes: numpy 2's rules (NEP 50) per op, against numpy
# A matrix of the primitives and public composites x dtypes (and Python int/float/bool scalars) against numpy
# itself, the oracle. Where numpy computes, minigrad gives the same dtype and values; where numpy refuses
# (bool - bool, -bool, uint8 + 300), minigrad raises a MinigradError. In full on the eager tape, the graph
# interpreter (Session) and the numpy backend; a sample on numba (each kernel compiles cold in about 0.5 s).
NEP_DTYPES = ['bool', 'int8', 'int32', 'int64', 'uint8', 'uint32', 'float32', 'float64']
NEP_SCALARS = [3, 1.5, True]
NEP_COND = np.array([True, False, True, False])

NEP_BINARY = {      # name: (numpy's form, minigrad's form)
    'add': (np.add, lambda a, b: a + b), 'sub': (np.subtract, lambda a, b: a - b),
    'mul': (np.multiply, lambda a, b: a * b), 'div': (np.true_divide, lambda a, b: a / b),
    'pow': (np.power, lambda a, b: a ** b), 'maximum': (np.maximum, mg.maximum),
    'minimum': (np.minimum, mg.minimum), 'less': (np.less, lambda a, b: a < b),
    'greater': (np.greater, lambda a, b: a > b), 'equal': (np.equal, mg.equal),
    'where': (lambda a, b: np.where(NEP_COND, a, b), lambda a, b: mg.where(NEP_COND, a, b)),
}
NEP_UNARY = {
    'neg': (np.negative, lambda a: -a), 'abs': (np.abs, mg.abs), 'sum': (np.sum, mg.sum),
    'sum axis keepdims': (lambda a: np.sum(a, 0, keepdims=True), lambda a: mg.sum(a, 0, keepdims=np.True_)),
    'max': (np.max, mg.max), 'min': (np.min, mg.min),
}
NEP_MODES = ['eager', 'session']       # and 'compiled': the numpy backend, a program per case


def _nep_array(dt, which):
    """x has a 0 (min of unsigned, x / 0) and y no zero (no integer 0 ** -k, no x // 0)."""
    return np.array([0, 1, 3, 2] if which == 'x' else [2, 1, 1, 3]).astype(dt)


def _nep_numpy(f, *args):
    """numpy's answer: the array, or the exception class when numpy refuses."""
    try:
        with np.errstate(all='ignore'):
            return np.asarray(f(*args))
    except Exception as e:      # numpy refuses (TypeError, OverflowError, ...): minigrad must refuse too
        return type(e)


def _nep_minigrad(f, args, mode, backend='numpy'):
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


def _nep_check(name, np_f, mg_f, args, mode, backend='numpy'):
    """'' when minigrad agrees with numpy, else what differs."""
    want = _nep_numpy(np_f, *args)
    label = f"{name}({', '.join(a.dtype.name if isinstance(a, np.ndarray) else repr(a) for a in args)}) {mode}"
    try:
        with np.errstate(all='ignore'), warnings.catch_warnings():
            warnings.simplefilter('ignore')
            got = np.asarray(_nep_minigrad(mg_f, args, mode, backend))
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


def _nep_binary_cases(name, left):
    np_f, mg_f = NEP_BINARY[name]
    x = _nep_array(left, 'x')
    for right in NEP_DTYPES:
        yield np_f, mg_f, (x, _nep_array(right, 'y'))
    for s in NEP_SCALARS:
        yield np_f, mg_f, (x, s)
        yield np_f, mg_f, (s, x)


def _nep_run(cases, name, modes):
    bad = [m for np_f, mg_f, args in cases for mode in modes for m in [_nep_check(name, np_f, mg_f, args, mode)] if m]
    assert not bad, f'{len(bad)} disagree with numpy:\n' + '\n'.join(bad[:20])


@pytest.mark.parametrize('left', NEP_DTYPES)
@pytest.mark.parametrize('name', sorted(NEP_BINARY))
@numpy2
def test_binary_dtypes_all_modes(name, left):
    """Each left dtype against every dtype and the Python scalars on either side (about 5 s in all)."""
    _nep_run(list(_nep_binary_cases(name, left)), name, NEP_MODES + ['compiled'])


@pytest.mark.parametrize('name', sorted(NEP_UNARY))
@numpy2
def test_unary_dtypes_all_modes(name):
    np_f, mg_f = NEP_UNARY[name]
    _nep_run([(np_f, mg_f, (_nep_array(dt, 'x'),)) for dt in NEP_DTYPES], name, NEP_MODES + ['compiled'])


NEP_NUMBA_SAMPLE = [     # <= 20 kernels: the cases the issue saw break, one kernel (or none) each
    ('sub', (_nep_array('uint8', 'x'), 1)), ('sub', (_nep_array('int8', 'x'), _nep_array('uint8', 'y'))),
    ('sub', (_nep_array('float32', 'x'), _nep_array('bool', 'y'))), ('sub', (_nep_array('int8', 'x'), _nep_array('bool', 'y'))),
    ('sub', (_nep_array('bool', 'x'), _nep_array('bool', 'y'))), ('minimum', (_nep_array('uint8', 'x'), _nep_array('uint8', 'y'))),
    ('mul', (_nep_array('uint8', 'x'), 3)), ('add', (_nep_array('int8', 'x'), 1.5)), ('div', (_nep_array('int32', 'x'), 2)),
    ('pow', (_nep_array('uint32', 'x'), _nep_array('int8', 'y'))),
]


@pytest.mark.parametrize('name, args', NEP_NUMBA_SAMPLE, ids=[f'{n}-{i}' for i, (n, _) in enumerate(NEP_NUMBA_SAMPLE)])
@numpy2
def test_numba_sample(name, args):
    if not mg.compiler.kernels.available():     # importorskip would not skip test_without_numba's blocker
        pytest.skip('numba is not installed')
    np_f, mg_f = NEP_BINARY[name]
    assert _nep_check(name, np_f, mg_f, args, 'compiled', backend='numba') == ''


@pytest.mark.parametrize('name', ['neg', 'abs', 'min'])
@numpy2
def test_numba_unary_unsigned(name):
    if not mg.compiler.kernels.available():     # importorskip would not skip test_without_numba's blocker
        pytest.skip('numba is not installed')
    np_f, mg_f = NEP_UNARY[name]
    assert _nep_check(name, np_f, mg_f, (_nep_array('uint8', 'x'),), 'compiled', backend='numba') == ''


@pytest.mark.parametrize('mode', NEP_MODES + ['compiled'])
@numpy2
def test_big_ints_are_clear_errors(mode):
    """numpy 2 refuses a Python int out of the dtype's range; so does minigrad, naming the op."""
    for f, a in ((lambda t: t * 2 ** 70, np.arange(3)), (lambda t: t + 300, np.arange(3, dtype=np.uint8))):
        with pytest.raises(MinigradError, match='out of range'):
            _nep_minigrad(f, (a,), mode)
    with pytest.raises(MinigradError):
        _nep_minigrad(lambda t: t[2 ** 63], (np.ones(3),), mode)


@numpy2
def test_int8_min_of_the_lowest_value():
    """min composed as -max(-x) was wrong at -128 (its negation wraps to itself)."""
    x = np.array([-128, 5, 0], np.int8)
    assert mg.min(mg.tensor(x)).numpy() == -128 and mg.minimum(mg.tensor(x), 1).numpy().tolist() == [-128, 1, 0]


# ======================================== edge values per op: signed zeros, inf/nan, empty, unknown dims
# Integer/bool dtypes in shape rules, pow at 0, signed zeros, inf/nan, empty tensors, unknown dims in indexing,
# and the Tensor methods a Symbol must share. Expected numbers come from PyTorch 2.13 (float64); the sweep
# against PyTorch itself runs where PyTorch is installed.
inf, nan = np.inf, np.nan
EDGE = np.array([0.0, -0.0, inf, -inf, nan, 1.0, -1.0])


def same(a, b) -> bool:
    """Equal values, nan where nan, and the same sign bit (so -0.0 != 0.0)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and np.array_equal(np.isnan(a), np.isnan(b)) and \
        np.array_equal(np.where(np.isnan(a), 0, a), np.where(np.isnan(b), 0, b)) and \
        np.array_equal(np.signbit(a) & ~np.isnan(a), np.signbit(b) & ~np.isnan(b))


def tape_value_and_grads(f, *arrays):
    ts = [mg.tensor(a, requires_grad=True) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        out = f(*ts)
        out.sum().backward()
    return out.numpy(), [t.grad.numpy() for t in ts]


def graph_value_and_grads(f, *arrays):
    g = mg.Graph()
    with g.as_default():
        ps = [mg.placeholder(mg.float64, a.shape) for a in arrays]
        out = f(*ps)
        grads = mg.gradients(out.sum(), ps)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        res = mg.Session(g).run([out] + grads, dict(zip(ps, arrays)))
    return res[0], res[1:]


EDGE_MODES = {'tape': tape_value_and_grads, 'graph': graph_value_and_grads}


# ------------------------------------------------------------------ 1. dtypes of shape rules
RULE_DTYPES = [np.dtype(d) for d in ('int64', 'int32', 'bool', 'float32', 'float64')]


def _arity_and_params(p):
    if p.name == 'cast':
        return 1, [{'dtype': d} for d in RULE_DTYPES]
    if isinstance(p.impl, np.ufunc):
        return p.impl.nin, [{}]
    return len(inspect.signature(p.impl).parameters), [{}]


@pytest.mark.parametrize('name', sorted(n for n, p in PRIMITIVES.items() if p.elementwise))
def test_elementwise_shape_rule_dtype_is_the_dtype_the_impl_returns(name):
    p = PRIMITIVES[name]
    nargs, param_sets = _arity_and_params(p)
    checked = 0
    for dts in itertools.product(RULE_DTYPES, repeat=nargs):
        if name == 'where' and dts[0] != np.bool_:
            continue                        # the primitive takes bool conditions (mg.where casts them)
        args = [np.array([True, False]) if d == np.bool_ else np.array([1, 2], d) for d in dts]
        for params in param_sets:
            try:
                with np.errstate(all='ignore'):
                    out = np.asarray(p.impl(*args, **params))
            except (TypeError, ValueError):
                continue                    # numpy itself refuses this combination
            rule = p.shape_rule(*[Aval(a.shape, a.dtype) for a in args], **params)
            assert rule.dtype == out.dtype, (name, dts, params, rule.dtype, out.dtype)
            assert rule.shape == out.shape
            checked += 1
    assert checked


def test_integer_division_and_exp_in_a_graph_give_floats_as_eager():
    g = mg.Graph()
    with g.as_default():
        i = mg.constant(np.array([1, 2, 3]))
        q, e = i / 2, mg.exp(i)
    assert q.dtype == np.float64 and e.dtype == np.float64
    for f in (mg.log, mg.sin, mg.cos, mg.tanh):
        assert f(i).dtype == np.float64
    qv, ev = mg.Session(g).run([q, e])
    np.testing.assert_array_equal(qv, [0.5, 1.0, 1.5])
    np.testing.assert_allclose(ev, np.exp([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(mg.compile(q, [])(), [0.5, 1.0, 1.5])   # constant folding keeps floats


# ------------------------------------------------------------------ 2. pow at base 0
POW_X = np.array([0.0, -0.0, 2.0, -2.0])
POW_TORCH = {   # exponent: (d/dx, d/dy) of sum(x ** y) from PyTorch 2.13
    2.0: ([0.0, -0.0, 4.0, -4.0], [0.0, 0.0, 2.772588722239781, nan]),
    0.0: ([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.6931471805599453, nan]),
    0.5: ([inf, inf, 0.3535533905932738, nan], [0.0, 0.0, 0.9802581434685472, nan]),
    -1.0: ([-inf, -inf, -0.25, -0.25], [-inf, inf, 0.34657359027997264, nan]),
}


@pytest.mark.parametrize('mode', EDGE_MODES)
@pytest.mark.parametrize('e', POW_TORCH)
def test_pow_gradients_at_base_zero_match_pytorch(mode, e):
    _, (gx, gy) = EDGE_MODES[mode](lambda x, y: x ** y, POW_X, np.full(4, e))
    assert same(gx, POW_TORCH[e][0]), gx
    assert same(gy, POW_TORCH[e][1]), gy


@pytest.mark.parametrize('e', POW_TORCH)
def test_pow_by_python_number_gradient_matches_pytorch(e):
    x = mg.tensor(POW_X, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        (x ** e).sum().backward()
    assert same(x.grad.numpy(), POW_TORCH[e][0])


def test_gradient_of_x_to_the_zero_is_zero_everywhere_without_warnings():
    x = mg.tensor([0.0, -0.0, 2.0, inf, -inf], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        (x ** 0).sum().backward()
        assert same(x.grad.numpy(), np.zeros(5))
        b, e = mg.tensor([0.0, 0.0], requires_grad=True), mg.tensor([2.0, 0.0], requires_grad=True)
        (b ** e).sum().backward()
    assert same(b.grad.numpy(), [0.0, 0.0]) and same(e.grad.numpy(), [0.0, 0.0])


# ------------------------------------------------------------------ 3. edge values as PyTorch
ABS_GRAD = [0.0, 0.0, 1.0, -1.0, 0.0, 1.0, -1.0]


@pytest.mark.parametrize('mode', EDGE_MODES)
def test_abs_of_signed_zero_and_its_gradient(mode):
    out, (gx,) = EDGE_MODES[mode](mg.abs, EDGE)
    assert same(out, [0.0, 0.0, inf, inf, nan, 1.0, 1.0]), out
    assert same(gx, ABS_GRAD), gx
    assert same(abs(mg.tensor(-0.0)).numpy(), 0.0)


LSE_ROWS = np.array([[-inf, -inf], [inf, 1.0], [nan, 1.0], [0.0, 0.0], [-inf, 0.0], [inf, -inf], [inf, inf]])


@pytest.mark.parametrize('mode', EDGE_MODES)
def test_logsumexp_of_infinite_rows_matches_pytorch(mode):
    out, (gx,) = EDGE_MODES[mode](lambda x: mg.logsumexp(x, axis=1), LSE_ROWS)
    assert same(out, [-inf, inf, nan, np.log(2), 0.0, inf, inf]), out
    assert same(gx[[1, 3, 4]], [[nan, 0.0], [0.5, 0.5], [0.0, 1.0]]), gx
    ls, _ = EDGE_MODES[mode](lambda x: mg.log_softmax(x, axis=1), LSE_ROWS)    # unchanged: as PyTorch
    assert same(ls[[0, 1, 3, 4, 5]], [[nan, nan], [nan, nan], [-np.log(2)] * 2, [-inf, 0.0], [nan, nan]]), ls


def test_mean_of_empty_is_nan_with_the_same_static_shape():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        assert np.isnan(mg.mean(mg.tensor(np.zeros(0, np.float32))).item())
        assert np.isnan(mg.tensor(np.zeros((0, 3))).mean(axis=0).numpy()).all()
        g = mg.Graph()
        with g.as_default():
            a, b = mg.placeholder(mg.float32, (None,)), mg.placeholder(mg.float32, (0,))
            ma, mb = mg.mean(a), mg.mean(b)
            ka, kb = mg.mean(a, keepdims=True), mg.mean(b, keepdims=True)
        assert ma.shape == mb.shape == () and ka.shape == kb.shape == (1,)
        empty = np.zeros(0, np.float32)
        vals = mg.Session(g).run([ma, mb, ka, kb], {a: empty, b: empty})
    assert all(np.isnan(v).all() for v in vals) and vals[0].dtype == vals[1].dtype == np.float32


@pytest.mark.parametrize('mode', EDGE_MODES)
def test_max_and_min_gradients_go_to_the_nan(mode):
    for f in (mg.max, mg.min):
        _, (gx,) = EDGE_MODES[mode](f, np.array([1.0, nan, 3.0]))
        assert same(gx, [0.0, 1.0, 0.0]), gx
        _, (gx,) = EDGE_MODES[mode](f, np.array([nan, 1.0, nan]))
        assert same(gx, [0.5, 0.0, 0.5]), gx


@pytest.mark.parametrize('mode', EDGE_MODES)
def test_maximum_gradient_with_nan_goes_to_both_as_pytorch(mode):
    x, y = np.array([nan, 1.0, 2.0, 1.0]), np.array([1.0, nan, 1.0, 1.0])
    for f in (mg.maximum, mg.minimum):
        _, (gx, gy) = EDGE_MODES[mode](f, x, y)
        if f is mg.minimum:
            gx, gy = gx + 0.0, gy + 0.0     # its zero gradients are -0.0: see below
        want_x = [1.0, 1.0, 1.0, 0.5] if f is mg.maximum else [1.0, 1.0, 0.0, 0.5]
        want_y = [1.0, 1.0, 0.0, 0.5] if f is mg.maximum else [1.0, 1.0, 1.0, 0.5]
        assert same(gx, want_x) and same(gy, want_y), (f, gx, gy)


EDGE_UNARY = {
    'neg': lambda m: lambda x: -x, 'abs': lambda m: m.abs, 'tanh': lambda m: m.tanh,
    'sigmoid': lambda m: m.sigmoid, 'exp': lambda m: m.exp, 'log': lambda m: m.log,
    'sin': lambda m: m.sin, 'cos': lambda m: m.cos,
    'mul_neg1': lambda m: lambda x: x * -1.0, 'add_0': lambda m: lambda x: x + 0.0,
    'sub_0': lambda m: lambda x: x - 0.0, 'rsub_0': lambda m: lambda x: 0.0 - x,
    'add_neg0': lambda m: lambda x: x + (-0.0), 'recip': lambda m: lambda x: 1.0 / x,
    'pow2': lambda m: lambda x: x ** 2, 'pow3': lambda m: lambda x: x ** 3, 'pow1': lambda m: lambda x: x ** 1,
    'pow0': lambda m: lambda x: x ** 0, 'pow_neg1': lambda m: lambda x: x ** -1.0,
    'clone': lambda m: lambda x: x.clone(),
    'softmax': lambda m: lambda x: m.softmax(x, 0), 'logsumexp': lambda m: lambda x: m.logsumexp(x, 0),
    'sum': lambda m: m.sum, 'mean': lambda m: m.mean, 'max': lambda m: m.max, 'min': lambda m: m.min,
}
EDGE_BINARY = {
    'add': lambda m: lambda x, y: x + y, 'sub': lambda m: lambda x, y: x - y,
    'mul': lambda m: lambda x, y: x * y, 'div': lambda m: lambda x, y: x / y,
    'pow': lambda m: lambda x, y: x ** y, 'maximum': lambda m: m.maximum, 'minimum': lambda m: m.minimum,
    'where': lambda m: lambda x, y: m.where(x > y, x, y),
}
# Left as they are, by design (see the reasons):
#  relu: where(x > 0, x, 0) gives +0.0 at -0.0 and 0 (gradient 0) at nan; PyTorch gives -0.0 and nan
#        (gradient 1). minigrad pins relu(nan) == 0 (above) and the compiler rewrites this where into relu.
#  sqrt, x ** 0.5: numpy's C99 pow gives pow(-0.0, -0.5) = +inf and pow(-inf, -0.5) = 0, so the gradient
#        at -0.0 / -inf is +inf / 0 where PyTorch (sqrt/rsqrt) gives -inf / nan.
#  maximum/minimum on a tie of 0.0 and -0.0 return numpy's pick (PyTorch's own pick differs between its
#        scalar and vectorised kernels).
#  minimum is -maximum(-x, -y): where its gradient is 0 it is -0.0 (PyTorch +0.0); values are the same.
#  sigmoid is a composite (exp, add, div): its chain rule rounds a finite gradient its own way, not as PyTorch's
#        s * (1 - s) (at 1.0 one ulp apart); the special values are PyTorch's exactly.


def _torch_value_and_grads(torch, f, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = f(*ts)
    out.sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in ts]


@needs_torch
@pytest.mark.parametrize('mode', EDGE_MODES)
@pytest.mark.parametrize('name', list(EDGE_UNARY) + list(EDGE_BINARY))
def test_edge_values_and_gradients_match_pytorch(name, mode):
    import torch
    if name in EDGE_UNARY:
        arrays = (EDGE,)
        mf, tf = EDGE_UNARY[name](mg), EDGE_UNARY[name](torch)
    else:
        arrays = tuple(np.array(t) for t in zip(*itertools.product(EDGE, EDGE)))
        mf, tf = EDGE_BINARY[name](mg), EDGE_BINARY[name](torch)
    mv, mgs = EDGE_MODES[mode](mf, *arrays)
    tv, tgs = _torch_value_and_grads(torch, tf, *arrays)
    if name == 'maximum' or name == 'minimum':      # ties of 0.0 and -0.0: see above
        tie = (arrays[0] == 0) & (arrays[1] == 0)
        mv, tv = mv[~tie], tv[~tie]
    assert same(mv, tv), (name, arrays, mv, tv)
    for i, (a, b) in enumerate(zip(mgs, tgs)):
        if name == 'minimum':
            a = a + 0.0                     # -0.0 -> +0.0
        if name == 'sigmoid':               # finite nonzero gradients: within an ulp (see above)
            ordinary = np.isfinite(arrays[0]) & (arrays[0] != 0)
            np.testing.assert_allclose(a[ordinary], b[ordinary], rtol=2 ** -52, atol=0)
            a, b = a[~ordinary], b[~ordinary]
        assert same(a, b), (name, i, [x[~np.vectorize(same)(a, b)] for x in arrays], a, b)


# ------------------------------------------------------------------ 4. static shapes
def _placeholder(shape):
    g = mg.Graph()
    with g.as_default():
        return mg.placeholder(mg.float32, shape)


def test_slices_of_unknown_dims_stay_unknown():
    p = _placeholder((None, 3))
    assert p[1:].shape == (None, 3) and p[:-1].shape == (None, 3) and p[:2].shape == (None, 3)
    assert p[::-2].shape == (None, 3) and p[0].shape == (3,) and p[:, 1:].shape == (None, 2)
    assert p[3:3].shape == (0, 3) and p[-1:-4].shape == (0, 3)        # empty whatever the size
    assert p[None, ..., None].shape == (1, None, 3, 1)
    assert p[np.array([0, 2, 2])].shape == (3, 3) and p[[[0], [1]], [0, 2]].shape == (2, 2)
    assert p[np.array([True, False, True]), None].shape == (2, 1, 3)     # the mask's own size decides
    for rank in range(2, 9):
        q = _placeholder((None,) * rank)
        assert q[0, 1:].shape == (None,) * (rank - 1)
        assert q[..., 0].shape == (None,) * (rank - 1)
        assert q[:, None, 1:-1].shape == (None, 1) + (None,) * (rank - 1)


def _random_index(rng, ndim):
    items = []
    for _ in range(rng.integers(0, 5)):
        k = rng.integers(0, 9)
        if k == 0:
            items.append(None)
        elif k == 1:
            items.append(Ellipsis)
        elif k == 2:
            items.append(int(rng.integers(-2, 2)))
        elif k == 3:
            items.append(np.array(rng.integers(-2, 2, size=rng.integers(0, 3))))
        elif k == 4:
            items.append(np.array([[0], [1]]))
        elif k == 5:
            items.append(bool(rng.integers(0, 2)))
        elif k == 6:
            items.append(rng.random(size=(2,) * int(rng.integers(1, 3))) < 0.5)    # a mask
        else:
            a, b = (None if rng.random() < 0.3 else int(v) for v in rng.integers(-5, 5, size=2))
            items.append(slice(a, b, [None, 1, 2, -1, -3][rng.integers(0, 5)]))
    return tuple(items)


def test_getitem_shape_rule_agrees_with_numpy_for_any_size():
    """Known dims: exactly numpy's shape. Unknown dims: what the rule calls known holds for every size."""
    from minigrad.core.ops import _getitem_rule
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(3000):
        ndim = int(rng.integers(0, 4))
        shape = tuple(int(d) for d in rng.integers(2, 5, size=ndim))
        unknown = tuple(None if rng.random() < 0.5 else d for d in shape)
        idx = _random_index(rng, ndim)
        try:
            want = np.empty(shape)[idx].shape
        except (IndexError, ValueError, TypeError):
            with pytest.raises(ShapeError, match='getitem'):
                _getitem_rule(Aval(shape, np.dtype('float64')), idx)
            continue
        assert _getitem_rule(Aval(shape, np.dtype('float64')), idx).shape == want, (shape, idx)
        got = _getitem_rule(Aval(unknown, np.dtype('float64')), idx).shape
        assert len(got) == len(want), (unknown, idx, got, want)
        for size in range(2, 9):            # every size the rule does not exclude (bounds aside)
            concrete = tuple(size if d is None else d for d in unknown)
            try:
                real = np.empty(concrete)[idx].shape
            except (IndexError, ValueError):
                continue
            assert all(g is None or g == r for g, r in zip(got, real)), (unknown, idx, got, real)
        checked += 1
    assert checked > 1000


def test_getitem_bad_indices_are_shape_errors_naming_getitem():
    t = mg.tensor(np.zeros((2, 3)))
    p = _placeholder((None, 3))
    bad = [(0, 0, 0), (..., ...), (slice(None), 5), (np.array([0.5]),), (slice(None, None, 0),),
           ([0, 1], [0, 1, 2]), ('a',), (1.0,), (slice(0.5, None),)]
    for idx in bad + [(np.ones(3, bool),)]:
        with pytest.raises(ShapeError, match='getitem'):
            t[idx]
    for idx in bad:                 # (a mask of 3 may fit the unknown dim: checked at run time)
        with pytest.raises(ShapeError, match='getitem'):
            p[idx]


def test_empty_list_index_gives_an_empty_result():
    t = mg.tensor([1.0, 2.0], requires_grad=True)
    out = t[[]]
    assert out.shape == (0,) and out.dtype == np.float32
    out.sum().backward()
    assert t.grad.tolist() == [0.0, 0.0]
    assert mg.tensor(np.zeros((2, 3)))[:, []].shape == (2, 0)
    assert _placeholder((None, 3))[[]].shape == (0, 3)


def test_stack_with_unknown_dims_and_mismatched_shapes():
    p = _placeholder((None, None, None))
    assert mg.stack([p, p]).shape == (2, None, None, None)
    assert mg.stack([p, p], axis=-1).shape == (None, None, None, 2)
    assert mg.stack([p, p], axis=2).shape == (None, None, 2, None)
    v = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(mg.Session(p.graph).run(mg.stack([p, p * 2], axis=-1), {p: v}),
                                  np.stack([v, v * 2], axis=-1))
    with pytest.raises(ShapeError, match=r'stack.*\(2, 3\).*\(3, 2\)'):
        mg.stack([mg.tensor(np.zeros((2, 3))), mg.tensor(np.zeros((3, 2)))])
    with pytest.raises(ShapeError, match='stack'):
        mg.stack([mg.tensor(np.zeros(3)), mg.tensor(np.zeros((3, 1)))])
    q = _placeholder((None, 3))
    with pytest.raises(ShapeError, match='stack'):
        mg.stack([q, mg.placeholder(mg.float32, (None, 4), )])
    a = mg.tensor([[1.0, 2.0]], requires_grad=True)
    s = mg.stack([a, a * 2, [[5.0, 6.0]]], axis=1)
    assert s.shape == (1, 3, 2) and s.tolist() == [[[1, 2], [2, 4], [5, 6]]]
    (s * np.arange(6).reshape(1, 3, 2)).sum().backward()
    assert a.grad.tolist() == [[0 + 2 * 2, 1 + 2 * 3]]


# ------------------------------------------------------------------ 5. Tensor methods on Symbols
def test_symbol_has_detach_clone_to_float_double_and_traces_like_eager():
    def f(x):
        y = x.double() * 3 + x.clone().detach()
        return y.to(mg.float32) + x.float() * x.detach(), y

    x = np.array([1.5, -2.0, 0.25], np.float32)
    traced = mg.trace(f, x)
    assert traced.symbolic
    want = [t.numpy() for t in f(mg.tensor(x))]
    got = traced(x)
    for w, o in zip(want, got):
        assert w.dtype == o.dtype
        np.testing.assert_array_equal(w, o)
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, (3,))
        y = (p.detach() * p).sum()
        assert p.double().dtype == np.float64 and p.to(mg.int64).dtype == np.int64
        assert p.float().dtype == np.float32 and p.clone().shape == (3,) and p.clone() is not p
        (gp,) = mg.gradients(y, [p])
    np.testing.assert_array_equal(mg.Session(g).run(gp, {p: x}), x)       # detach: no gradient through it


@pytest.mark.parametrize('backend', ['numpy', pytest.param('numba', marks=pytest.mark.skipif(
    not mg.compiler.kernels.available(), reason='numba is not installed'))])
def test_where_with_a_non_bool_condition_follows_numpy(backend):
    """issue 31: eager followed numpy, the compiled path raised or read 1e-50 as False."""
    c, x = np.array([1e-50, 0.0, nan, -2.0, -0.0]), np.arange(1.0, 6.0)
    want = np.where(c, x * 2.0 + 1.0, 0.0)
    np.testing.assert_array_equal(mg.where(mg.tensor(c), mg.tensor(x) * 2.0 + 1.0, 0.0).numpy(), want)
    g = mg.Graph()
    with g.as_default():
        cp, xp = mg.placeholder(mg.float64, (5,)), mg.placeholder(mg.float64, (5,))
        y = mg.where(cp, xp * 2.0 + 1.0, 0.0)
    np.testing.assert_array_equal(mg.Session(g, backend=backend).run(y, {cp: c, xp: x}), want)
    np.testing.assert_array_equal(mg.jit(lambda a, b: mg.where(a, b * 2.0 + 1.0, 0.0), backend=backend)(c, x), want)
    with pytest.raises(mg.MinigradError, match='condition must be bool'):
        mg.ops.where(mg.tensor(c), mg.tensor(x), 0.0)      # the primitive takes bool only


@pytest.mark.parametrize('fn', [lambda x: x + 0, lambda x: 0 + x, lambda x: x + np.zeros(3, np.int64), lambda x: x + np.int32(0),
                                lambda x: mg.where(x > 0, x, -0.0), lambda x: mg.where(0 < x, x, np.float32(-0.0)),
                                lambda x: x * 1 + 0], ids=['x+0', '0+x', 'x+int zeros', 'x+int32 0', 'where -0.0',
                                                          'where f32 -0.0', 'x*1+0'])
def test_simplify_keeps_the_sign_of_zero(fn):
    """issue 31: simplify dropped x + 0 with an int zero and turned where(x > 0, x, -0.0) into relu."""
    for dt in (np.float32, np.float64):
        xs = np.array([-0.0, 0.0, -1.0], dt)
        want = fn(mg.tensor(xs)).numpy()
        g = mg.Graph()
        with g.as_default():
            x = mg.placeholder(dt, (3,), name='x')
            y = fn(x)
        got = mg.compile(y, [x])(xs)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=str(dt))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize('dt', [np.float16, np.float32, np.float64])
def test_where_with_zero_on_big_arrays_is_np_where_bit_for_bit(dt):
    """issue 37: where(c, x, 0) on big float arrays (relu and its VJP) is a multiply of x's bits by c; it must
    give np.where's bits: +0.0 where c is False (x * False was -0.0 for negative x), inf and nan kept."""
    finite, x = (np.resize(np.array(v, dt), 4099) for v in ([-1.5, -0.0, 0.0, 2.0], [-1.5, -0.0, 2.0, inf, -inf, nan]))
    for v, c in itertools.product((finite, x), (x > 0, ~(x > 0), np.arange(x.size) % 3 == 0)):
        got = mg.where(mg.tensor(c), mg.tensor(v), 0).numpy()
        assert got.dtype == dt and got.tobytes() == np.where(c, v, 0).tobytes()
    t = mg.tensor(x.reshape(-1, 1) if dt == np.float16 else x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        y = mg.relu(t)
        (y * 1.0).sum().backward()
    assert y.numpy().ravel().tobytes() == np.where(x > 0, x, 0).tobytes()
    assert t.grad.numpy().ravel().tobytes() == np.where(x > 0, np.ones_like(x), 0).tobytes()


@pytest.mark.parametrize('dt', [np.float32, np.float64, np.int64])
def test_matmul_with_one_contracted_dim_is_np_matmul_bit_for_bit(dt):
    """issue 37: a K=1 product (x.T @ g at batch 1) is an outer product computed as a broadcast multiply;
    it must give np.matmul's bits (matmul's sum starts from +0.0, so a -0.0 product is +0.0 there)."""
    rng = np.random.default_rng(0)
    a = np.resize(np.array([-1.5, -0.0, 0.0, 2.0, 3.0], dt), (1, 130)) * (rng.integers(1, 4, (1, 130))).astype(dt)
    g = np.resize(np.array([0.0, -0.0, 1.0, -2.0], dt), (1, 40))
    for x, y in ((a.T, g), (a.T.copy(), g), (np.broadcast_to(a.T, (2, 130, 1)), g), (g.T, a)):
        got = (mg.tensor(x) @ mg.tensor(y)).numpy()
        want = np.matmul(x, y)
        assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    W = mg.tensor(rng.standard_normal((130, 40)).astype(np.float32), requires_grad=True)
    h = mg.tensor(a.astype(np.float32))
    (h @ W).sum().backward()            # d/dW = h.T @ ones: the outer product in the tape's backward
    assert W.grad.numpy().tobytes() == np.matmul(a.astype(np.float32).T, np.ones((1, 40), np.float32)).tobytes()


# ======================================== version counters: in-place changes of values an op saved for backward
# PyTorch-style version counters: an in-place change of a value saved for backward makes backward raise (as
# PyTorch's 'modified by an inplace operation'); every case is run in PyTorch too, and both must raise, or both
# give the same gradients. Then what each op's record says it saves (saves_inputs) against what its VJP reads.
def _exp(lib, t):
    return mg.exp(t) if lib is mg else torch.exp(t)


def _tanh(lib, t):
    return mg.tanh(t) if lib is mg else torch.tanh(t)


def _leaf(lib, values):
    return mg.tensor(values, requires_grad=True) if lib is mg else torch.tensor(values, requires_grad=True)


def _input_saved_by_mul(lib, a):
    b = a * 1.0
    c = b * b
    b += 1
    return c.sum()


def _output_saved_by_exp(lib, a):
    e = _exp(lib, a * 1.0)
    e += 1
    return e.sum()


def _input_of_exp_changed(lib, a):        # exp's VJP reads only its output: allowed
    b = a * 1.0
    c = _exp(lib, b)
    b *= 3
    return (c * b).sum()


def _input_of_tanh_changed(lib, a):
    b = a * 2.0
    c = _tanh(lib, b)
    b -= 1
    return (c + b).sum()


def _change_after_a_use_that_saves_nothing(lib, a):
    b = a * 1.0
    c = b + 2.0                            # add's VJP reads no input value (saves_inputs=False)
    b += 1
    return (c * 3.0).sum()


def _in_place_then_use(lib, a):           # the change comes first: every op sees the new value
    b = a * 2.0
    b *= 3
    return (b * b).sum()


def _chain_of_in_place(lib, a):
    b = a + 0.0
    b += a
    b *= a
    return (b * 1.0).sum()


INPLACE_CASES = [_input_saved_by_mul, _output_saved_by_exp, _input_of_exp_changed, _input_of_tanh_changed,
         _change_after_a_use_that_saves_nothing, _in_place_then_use, _chain_of_in_place]


@needs_torch
@pytest.mark.parametrize('case', INPLACE_CASES, ids=lambda f: f.__name__.strip('_'))
def test_in_place_changes_raise_or_not_as_in_pytorch(case):
    values = [0.5, -1.5, 2.0]
    results = {}
    for lib in (mg, torch):
        a = _leaf(lib, values)
        try:
            case(lib, a).backward()
            results[lib.__name__] = ('ok', np.asarray(a.grad.detach() if lib is torch else a.grad.numpy()))
        except (mg.MinigradError, RuntimeError) as e:
            results[lib.__name__] = ('raised', str(e))
    (km, vm), (kt, vt) = results['minigrad'], results['torch']
    assert km == kt, results
    if km == 'ok':
        np.testing.assert_allclose(vm, vt, rtol=1e-6)
    else:
        assert 'modified by an in-place operation' in vm and 'version' in vm and 'inplace' in vt


def test_the_error_names_the_op_the_value_and_both_versions():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1.0
    c = b * b
    b += 1
    b += 1
    assert b._version == 2
    with pytest.raises(mg.BackwardError, match=r"'mul' saved .*input 0.* now at version 2, the op saved version 0"):
        c.sum().backward()
    assert a.grad is None


def test_a_tape_that_refused_is_unchanged_and_a_new_forward_works():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1.0
    c = b * b
    b += 1
    with pytest.raises(mg.BackwardError):
        c.sum().backward()
    assert c.grad_fn.saved is not None             # nothing was freed
    (b * b).sum().backward()                       # d/da (a+1)^2 = 2(a+1)
    assert a.grad.tolist() == [4.0, 6.0]


@needs_torch
def test_an_optimizer_step_bumps_the_version_as_in_pytorch():
    for lib in (mg, torch):
        w = _leaf(lib, [1.0])
        opt = (mg.optim if lib is mg else torch.optim).SGD([w], lr=0.1)
        loss = (w * w).sum()
        loss.backward(retain_graph=True)
        opt.step()
        with pytest.raises((mg.BackwardError, RuntimeError), match='in-?place'):
            loss.backward()
        assert w._version >= 1


def test_a_usual_training_loop_never_trips_the_check():
    w = mg.tensor([1.0, -2.0], requires_grad=True)
    opt = mg.optim.SGD([w], lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        opt.step()
        with mg.no_grad():
            w -= 0.0 * w
    assert w._version == 10
    np.testing.assert_allclose(w.numpy(), np.array([1.0, -2.0]) * 0.8 ** 5, rtol=1e-6)


@needs_torch
def test_retain_grad_follows_the_tensor_through_an_in_place_op():
    for lib in (mg, torch):
        x = _leaf(lib, [1.0, 2.0])
        h = x * 2
        h.retain_grad()
        h *= 3
        (h * h).sum().backward()
        assert h.grad.tolist() == [12.0, 24.0] and x.grad.tolist() == [72.0, 144.0]


def test_numpy_views_of_a_tensor_that_requires_grad_are_read_only():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    for view in (a.numpy(), np.asarray(a)):
        with pytest.raises(ValueError, match='read-only'):
            view[0] = 5.0
    b = mg.tensor([1.0, 2.0])
    np.asarray(b)[0] = 5.0                          # no grad: the array is the tensor's own
    assert b.tolist() == [5.0, 2.0]


SHAPE_ONLY = {   # an op whose record says saves_inputs=False, and a use of it on a (3, 2) leaf
    'add': lambda a: a + 1.0, 'sum': lambda a: a.sum(axis=0), 'cast': lambda a: a.astype(mg.float64),
    'reshape': lambda a: a.reshape((2, 3)), 'transpose': lambda a: a.T, 'broadcast_to': lambda a: mg.broadcast_to(a, (4, 3, 2)),
    'getitem': lambda a: a[1:, 0], 'concatenate': lambda a: mg.concatenate([a, a], axis=1),
    'exp': mg.exp, 'tanh': mg.tanh,
}


def test_every_op_that_says_it_saves_no_inputs_really_reads_none():
    """Replace the saved inputs by NaN arrays after the forward pass: the gradient must not change."""
    from minigrad.core import PRIMITIVES
    flagged = {n for n, p in PRIMITIVES.items() if not p.saves_inputs}
    assert flagged - {'sum_to_like', 'broadcast_like', 'reshape_like'} == set(SHAPE_ONLY)
    x = np.arange(6.0).reshape(3, 2) / 7
    for name, f in SHAPE_ONLY.items():
        grads = []
        for poison in (False, True):
            a = mg.tensor(x, requires_grad=True)
            y = f(a * 1.0)
            assert y.grad_fn.prim.name == name
            if poison:
                y.grad_fn.saved = [np.full_like(v, np.nan) if isinstance(v, np.ndarray) else v
                                   for v in y.grad_fn.saved]
            (y * mg.tensor(np.linspace(1, 2, y.size).reshape(y.shape))).sum().backward()
            grads.append(a.grad.numpy())
        np.testing.assert_array_equal(grads[0], grads[1], err_msg=name)


def test_a_freed_graph_still_says_it_was_freed_after_an_in_place_change():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    y = mg.exp(a * 2.0).sum()
    y.backward()
    b = a * 1.0
    b += 1                                          # something is stale now
    with pytest.raises(mg.BackwardError, match='second time'):
        y.backward()


def test_where_reads_only_its_condition():
    """where's record says saves_inputs=(0,): poisoning x and y after the forward pass changes no gradient."""
    c = np.array([[True, False], [False, True], [True, True]])
    grads = []
    for poison in (False, True):
        a, b = (mg.tensor(np.arange(6.0).reshape(3, 2) / k, requires_grad=True) for k in (7, 5))
        y = mg.where(c, a * 1.0, b * 1.0)
        if poison:
            y.grad_fn.saved = [v if k == 0 else np.full_like(v, np.nan) for k, v in enumerate(y.grad_fn.saved)]
        (y * mg.tensor([[1.0, 2.0]])).sum().backward()
        grads.append((a.grad.numpy(), b.grad.numpy()))
    np.testing.assert_array_equal(grads[0], grads[1])


def _relu_chain(n, layers=10):
    rng = np.random.default_rng(0)
    ws = [mg.tensor(rng.standard_normal((n, n)).astype(np.float32), requires_grad=True) for _ in range(layers)]
    y = mg.tensor(rng.standard_normal((n, n)).astype(np.float32))
    for w in ws:
        y = mg.relu(y * w + w)
    return y, ws


def test_the_tape_keeps_stand_ins_for_big_inputs_its_vjps_read_only_the_shape_of():
    from minigrad.core.tensor import is_stand_in
    y, _ = _relu_chain(128, 1)                      # 64 KiB of float32: the memory rule applies
    where_node = y.grad_fn
    add_node = where_node.parents[1]
    assert [is_stand_in(v) for v in where_node.saved] == [False, True, False]      # keeps the condition only
    assert [is_stand_in(v) for v in add_node.saved] == [True, True]
    assert add_node.saved[0].shape == (128, 128) and add_node.saved[0].dtype == np.float32
    assert add_node.saved[0].nbytes == 128 * 128 * 4 and add_node.saved[0].strides == (0, 0)
    small, _ = _relu_chain(64, 1)                   # 16 KiB: kept as before (drawings show their values)
    assert not any(is_stand_in(v) for v in [*small.grad_fn.saved, *small.grad_fn.parents[1].saved])


def test_the_relu_chain_keeps_what_pytorch_keeps():
    """Ten relu(y * w + w) layers at 128 x 128 float32 keep per layer the relu result and the bool
    condition (80 KiB), not also the product and the sum (128 KiB more), until backward."""
    import tracemalloc
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    y, ws = _relu_chain(128)
    kept = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    weights = 10 * 64 * 1024 + 64 * 1024            # ws and the input
    assert kept - weights < 10 * 100 * 1024, kept - weights
    y.sum().backward()
    assert ws[0].grad.shape == (128, 128)


def test_a_stepper_over_a_graph_with_stand_ins_says_why_it_cannot_show_values():
    y, _ = _relu_chain(128, 2)
    with pytest.raises(mg.MinigradError, match='kept only the shape of inputs of 64 KiB'):
        mg.viz.Stepper(y.sum())
    svg = mg.draw(y.sum()).source
    assert 'mean 0, max 0' not in svg


def test_an_input_where_reads_only_the_shape_of_may_change_in_place():
    x = mg.tensor([1.0, -2.0], requires_grad=True)
    a = x * 1.0
    y = mg.where(mg.tensor([True, False]), a, 0.0)
    a += 5.0                                        # where's VJP reads only a's shape: no error
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0]
    b = x * 1.0
    y = b * 2.0 + mg.where(mg.tensor([True, False]), b, 0.0)
    b += 5.0                                        # mul's VJP reads b: PyTorch's version check
    with pytest.raises(mg.BackwardError, match="'mul' saved"):
        y.sum().backward()
