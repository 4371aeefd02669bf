"""Forward mode (mg.jvp, mg.jacfwd, mg.jacrev): duals, nesting, Jacobians both ways against each other and
PyTorch, errors. Each primitive's JVP rule is a column of tests/test_op_matrix.py."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import minigrad as mg
from minigrad.core import register_primitive, elementwise_rule, PRIMITIVES
from minigrad.core.errors import ForwardError, MinigradError, ShapeError

needs_torch = pytest.mark.skipif(importlib.util.find_spec('torch') is None, reason='PyTorch is not installed')


def test_dual_rides_with_tensors_and_arrays_and_keeps_float32():
    W = mg.tensor(np.arange(6.0).reshape(2, 3), dtype=mg.float32)       # closed over: a constant
    b = np.ones(2, np.float32)
    x, v = mg.tensor([1.0, -1.0, 0.5]), mg.tensor([1.0, 0.0, 0.0])
    y, dy = mg.jvp(lambda x: mg.tanh(W @ x + b) * 2.0, (x,), (v,))
    pre = W.numpy() @ x.numpy() + b
    np.testing.assert_allclose(dy.numpy(), 2 * (1 - np.tanh(pre) ** 2) * W.numpy()[:, 0], rtol=1e-6)
    assert y.dtype == dy.dtype == np.float32
    # several inputs, several outputs, composite ops, and an output that does not depend on them
    (a, s, c), (da, ds, dc) = mg.jvp(lambda p, q: (p - q, mg.softmax(p * q), mg.ones(2)),
                                     (np.array([1.0, 2.0]), np.array([3.0, 4.0])),
                                     (np.array([1.0, 0.0]), np.array([0.0, 1.0])))
    assert da.tolist() == [1.0, -1.0] and dc.tolist() == [0.0, 0.0]
    assert isinstance(a, mg.Tensor) and isinstance(s, mg.Tensor)


def test_forward_over_forward_and_reverse_over_forward():
    x = np.array([0.3, -1.2, 2.0])
    h = lambda x: (x * x * x).sum(keepdims=True)
    H = mg.jacfwd(lambda x: mg.jacfwd(h)(x).reshape(3))(x)            # nested levels: no perturbation confusion
    np.testing.assert_allclose(H.numpy(), np.diag(6 * x), rtol=1e-12)
    xt = mg.tensor(x, requires_grad=True)
    _, dy = mg.jvp(lambda x: mg.sin(x).sum(), (xt,), (np.ones(3),))
    dy.backward()                                                      # d/dx sum(cos(x) * 1)
    np.testing.assert_allclose(xt.grad.numpy(), -np.sin(x), rtol=1e-6)


@pytest.mark.parametrize('name,fn,torch_fn,shape', [
    ('tanh-mlp-layer', lambda x: mg.tanh(mg.tensor(_W) @ x + mg.tensor(_B)),
     lambda x: __import__('torch').tanh(_tt(_W) @ x + _tt(_B)), (3,)),
    ('softmax', lambda x: mg.softmax(x, axis=-1), lambda x: __import__('torch').softmax(x, -1), (2, 4)),
    ('logsumexp', lambda x: mg.logsumexp(x, axis=1), lambda x: __import__('torch').logsumexp(x, 1), (2, 4)),
])
def test_jacfwd_equals_jacrev_equals_pytorch(name, fn, torch_fn, shape):
    x = np.random.default_rng(3).normal(size=shape)
    jf, jr = mg.jacfwd(fn), mg.jacrev(fn)
    Jf, Jr = jf(x), jr(x)
    out = fn(mg.tensor(x))
    assert Jf.shape == Jr.shape == out.shape + x.shape
    np.testing.assert_allclose(Jf.numpy(), Jr.numpy(), rtol=1e-10, atol=1e-12)
    assert jf.passes == jr.passes == 1                                  # one batched pass, whatever the shape
    e = np.eye(x.size)[-1].reshape(shape)                               # one jvp is one column of J
    np.testing.assert_allclose(mg.jvp(fn, (x,), (e,))[1].numpy(), Jf.numpy().reshape(out.shape + (-1,))[..., -1],
                               rtol=1e-10, atol=1e-12)
    if importlib.util.find_spec('torch') is not None:
        import torch
        from torch.func import jacfwd, jacrev
        tx = torch.tensor(x)
        np.testing.assert_allclose(Jf.numpy(), jacrev(torch_fn)(tx).numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(Jr.numpy(), jacfwd(torch_fn)(tx).numpy(), rtol=1e-10, atol=1e-12)


_W = np.random.default_rng(5).normal(size=(4, 3))
_B = np.random.default_rng(6).normal(size=4)


def _tt(a):
    import torch
    return torch.tensor(a)


def test_jvp_of_a_primitive_with_only_a_vjp_is_derived_from_it():
    cube = register_primitive('cube_vjp_only_test', lambda x: x ** 3, elementwise_rule,
                              lambda needs, g, out, x: (g * 3.0 * x * x,), elementwise=True)
    try:
        x, v = np.array([1.0, -2.0, 0.5]), np.array([1.0, 1.0, 2.0])
        _, dy = mg.jvp(lambda x: cube(x) + 1.0, (x,), (v,))
        np.testing.assert_allclose(dy.numpy(), 3 * x ** 2 * v)
        xt = mg.tensor(x, requires_grad=True)
        mg.jvp(cube, (xt,), (v,))
        assert xt.grad is None                      # the derivation left the learner's tensors alone
        bare = register_primitive('bare_test', lambda x: x + 1.0, elementwise_rule, elementwise=True)
        with pytest.raises(ForwardError, match="'bare_test' has neither a jvp nor a vjp"):
            mg.jvp(bare, (x,), (v,))
    finally:
        for name in ('cube_vjp_only_test', 'bare_test'):
            PRIMITIVES.pop(name, None)
            mg.core.OPS.pop(name, None)


def test_bad_input_gives_clear_errors():
    f = lambda x: x * 2.0
    x = np.ones(3)
    with pytest.raises(ForwardError, match='must be tuples'):
        mg.jvp(f, x, x)
    with pytest.raises(ForwardError, match='2 primals but 1 tangents'):
        mg.jvp(lambda a, b: a, (x, x), (x,))
    with pytest.raises(ShapeError, match=r'tangent 0 has shape \(2,\) but primal 0 has shape \(3,\)'):
        mg.jvp(f, (x,), (np.ones(2),))
    with pytest.raises(ForwardError, match='only floating inputs'):
        mg.jvp(f, (np.arange(3),), (np.ones(3),))
    with pytest.raises(ForwardError, match='fn must be a function'):
        mg.jvp(3, (x,), (x,))
    with pytest.raises(ForwardError, match='one array'):
        mg.jacfwd(f)([mg.tensor(x), mg.tensor(x)])
    with pytest.raises(ForwardError, match='one Tensor'):
        mg.jacrev(lambda x: (x, x))(x)
    with pytest.raises(ForwardError, match='only floating outputs'):
        mg.jacrev(lambda x: x > 0)(x)
    assert issubclass(ForwardError, MinigradError)


def test_the_tape_path_is_unchanged():
    """core.apply checks for a Dual only after the Tensor fast path (a non-Tensor argument)."""
    t = mg.tensor([1.0, 2.0], requires_grad=True)
    y = mg.exp(t) * 2.0
    assert type(y) is mg.Tensor and y.grad_fn is not None
    assert type(mg.ops.add(np.ones(2), 1.0)) is np.ndarray


def test_docstring_examples_run():
    import doctest
    import minigrad.transforms.forward
    res = doctest.testmod(minigrad.transforms.forward)
    assert res.failed == 0 and res.attempted > 0
