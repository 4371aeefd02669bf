"""Transformations without a tail (issue 55, items 1, 5, 6, 11, 12, 13): one regression test per item,
compared with torch.func (float64) where it has the composition, else with the tape."""
from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg

torch = pytest.importorskip('torch')
tfunc = pytest.importorskip('torch.func')


def _np(t):
    return np.asarray(t.data if isinstance(t, mg.Tensor) else t, np.float64)


def _t(a):
    return torch.tensor(np.asarray(a, np.float64))


def _wl(L, x):
    """while x.sum() < 10: x = x * 2, in minigrad (a while_loop) or torch (a Python loop)."""
    if L is mg:
        return mg.while_loop(lambda y: y.sum() < 10.0, lambda y: y * 2.0, x)
    while x.sum() < 10.0:
        x = x * 2.0
    return x


# ------------------------------------------------------------------ item 1
def test_outer_no_grad_does_not_stop_a_transformation():
    f = lambda L, w: (L.sin(w) * w).sum()
    vf = lambda L, w: L.sin(w) * w
    x, v, X = np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([[1.0, 2.0], [0.3, -0.7]])
    mgf, tf = (lambda w: f(mg, w)), (lambda w: f(torch, w))
    with torch.no_grad():
        want = {'grad': tfunc.grad(tf)(_t(x)), 'value_and_grad': tfunc.grad_and_value(tf)(_t(x))[0],
                'hessian': tfunc.hessian(tf)(_t(x)), 'vmap(grad)': tfunc.vmap(tfunc.grad(tf))(_t(X)),
                'jit(grad)': tfunc.grad(tf)(_t(x)), 'func.jacrev': tfunc.jacrev(lambda w: vf(torch, w))(_t(x)),
                'jvp(grad)': tfunc.jvp(tfunc.grad(tf), (_t(x),), (_t(v),))[1]}
    with mg.no_grad():
        got = {'grad': mg.grad(mgf)(mg.tensor(x)), 'value_and_grad': mg.value_and_grad(mgf)(mg.tensor(x))[1],
               'hessian': mg.hessian(mgf)(mg.tensor(x)), 'vmap(grad)': mg.vmap(mg.grad(mgf))(mg.tensor(X)),
               'jit(grad)': mg.jit(mg.grad(mgf))(mg.tensor(x)),
               'func.jacrev': mg.func.jacrev(lambda w: vf(mg, w))(mg.tensor(x)),
               'jvp(grad)': mg.jvp(mg.grad(mgf), (mg.tensor(x),), (mg.tensor(v),))[1]}
    g = mg.Graph()
    with g.as_default(), mg.no_grad():              # on Symbols too
        p = mg.placeholder(mg.float64, (2,), name='p')
        got['jacrev(Symbol)'], got['func.jacrev(Symbol)'], got['grad(Symbol)'] = mg.Session(g).run(
            [mg.jacrev(lambda w: vf(mg, w))(p), mg.func.jacrev(lambda w: vf(mg, w))(p), mg.grad(mgf)(p)], {p: x})
    want['jacrev(Symbol)'] = want['func.jacrev(Symbol)'] = want['func.jacrev']
    want['grad(Symbol)'] = want['grad']
    for k in want:
        np.testing.assert_allclose(_np(got[k]), want[k].numpy(), rtol=1e-6, err_msg=k)

    # a no_grad inside the function stays stop_gradient (as torch.func), even under an outer no_grad
    def inner(L, w):
        with (mg.no_grad() if L is mg else torch.no_grad()):
            c = L.sin(w) * w
        return (w * w - c).sum()
    with torch.no_grad():
        want = tfunc.grad(lambda w: inner(torch, w))(_t(x)).numpy()
    with mg.no_grad():
        np.testing.assert_allclose(_np(mg.grad(lambda w: inner(mg, w))(mg.tensor(x))), want)
    np.testing.assert_allclose(_np(mg.grad(lambda w: inner(mg, w))(mg.tensor(x))), want)

    # mg.gradients of a forward built under no_grad: refused, as the tape's backward; stop_gradient: zeros
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float64, (2,), name='p')
        with mg.no_grad():
            y = (mg.sin(p) * p).sum()
        with pytest.raises(mg.MinigradError, match='no_grad'):
            mg.gradients(y, [p])
        z = (mg.stop_gradient(mg.sin(p)) * p).sum()
        dz, = mg.gradients(z, [p])
        dy0, = mg.gradients(mg.stop_gradient(z), [p])
    np.testing.assert_allclose(mg.Session(g).run([dz, dy0], {p: x}), [np.sin(x), [0.0, 0.0]])
    w = mg.tensor(x, requires_grad=True)
    with mg.no_grad():
        yt = (mg.sin(w) * w).sum()
    with pytest.raises(mg.MinigradError, match='no_grad'):
        yt.backward()


# ------------------------------------------------------------------ item 5
def test_forward_mode_through_a_while_loop_of_duals():
    y, dy = mg.jvp(lambda x: mg.while_loop(lambda y: y.sum() < 10, lambda y: y * 2, x),
                   (mg.tensor([1.0, 2.0]),), (mg.tensor([1.0, 1.0]),))
    assert y.tolist() == [4.0, 8.0] and dy.tolist() == [4.0, 4.0]
    x, v = np.array([0.5, 0.2, 0.4]), np.array([1.0, -2.0, 0.5])
    wl, wt = (lambda a: _wl(mg, a)), (lambda a: _wl(torch, a))
    np.testing.assert_allclose(_np(mg.jacfwd(wl)(mg.tensor(x))), tfunc.jacfwd(wt)(_t(x)).numpy())
    # a loop that closes over the differentiated argument, with a counter and a float loop var
    def pw(L, a):
        if L is mg:
            return mg.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, mg.sin(y) * a), [0, a])[1]
        i, y = 0, a
        while i < 3:
            i, y = i + 1, torch.sin(y) * a
        return y
    np.testing.assert_allclose(_np(mg.jvp(lambda a: pw(mg, a), (mg.tensor(x),), (mg.tensor(v),))[1]),
                               tfunc.jvp(lambda a: pw(torch, a), (_t(x),), (_t(v),))[1].numpy(), rtol=1e-12)
    X = np.array([[0.5, 0.2, 0.4], [1.0, 2.0, 3.0], [0.1, 0.1, 0.1]])
    want = np.stack([tfunc.jvp(wt, (_t(r),), (_t(v),))[1].numpy() for r in X])
    np.testing.assert_allclose(_np(mg.vmap(lambda a: mg.jvp(wl, (a,), (mg.tensor(v),))[1])(mg.tensor(X))), want)
    np.testing.assert_allclose(_np(mg.jvp(mg.vmap(wl), (mg.tensor(X),), (mg.tensor(np.tile(v, (3, 1))),))[1]),
                               want)
    # on Symbols: the loop over the values and their tangents is one while node
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float64, (3,), name='p')
        _, dp = mg.jvp(wl, (p,), (v,))
    np.testing.assert_allclose(mg.Session(g).run(dp, {p: x}), tfunc.jvp(wt, (_t(x),), (_t(v),))[1].numpy())


# ------------------------------------------------------------------ item 6
def test_vmap_of_every_jacobian():
    vf = lambda L, w: L.sin(w) * w * w.sum()
    X = np.array([[1.0, 2.0, 0.5], [0.3, -0.7, 1.1]])
    want = tfunc.vmap(tfunc.jacrev(lambda w: vf(torch, w)))(_t(X)).numpy()
    for J in (mg.jacrev, mg.func.jacrev, mg.jacfwd, mg.func.jacfwd):
        np.testing.assert_allclose(_np(mg.vmap(J(lambda w: vf(mg, w)))(mg.tensor(X))), want, rtol=1e-12,
                                   err_msg=J.__module__ + '.' + J.__name__)


# ------------------------------------------------------------------ item 11
def test_while_loop_with_a_constant_loop_var_whose_body_reads_the_argument():
    f = lambda x: mg.while_loop(lambda c: c < 10.0, lambda c: c + x.sum(), mg.tensor(0.0, dtype=mg.float64))
    x = np.array([1.0, 2.0])
    w = mg.tensor(x, requires_grad=True)
    f(w).backward()                                     # the tape: 4 iterations, d/dx = 4
    np.testing.assert_allclose(_np(w.grad), [4.0, 4.0])
    np.testing.assert_allclose(_np(mg.grad(f)(mg.tensor(x))), [4.0, 4.0])
    np.testing.assert_allclose(_np(mg.jit(f)(mg.tensor(x))), 12.0)
    np.testing.assert_allclose(_np(mg.jvp(f, (mg.tensor(x),), (mg.tensor([1.0, 0.0]),))[1]), 4.0)
    np.testing.assert_allclose(_np(mg.vmap(mg.grad(f))(mg.tensor([x, 2 * x]))), [[4.0, 4.0], [2.0, 2.0]])


# ------------------------------------------------------------------ item 12
def test_vmap_of_a_while_loop_with_a_number_loop_var_on_symbols():
    counter = lambda x: mg.while_loop(lambda c: c < 3, lambda c: c + 1, 0) * x
    reads = lambda x: mg.while_loop(lambda c: c < 3.0, lambda c: c + x.sum(), 0.0)
    X = np.arange(6.0, dtype=np.float32).reshape(3, 2)     # (a float loop var starting at 0.0 is float32)
    for f, want in ((counter, 3 * X), (reads, [3.0, 5.0, 9.0])):
        np.testing.assert_allclose(_np(mg.vmap(f)(mg.tensor(X))), want)
        g = mg.Graph()
        with g.as_default():
            p = mg.placeholder(mg.float32, (3, 2), name='p')
            out = mg.vmap(f)(p)
        np.testing.assert_allclose(mg.Session(g).run(out, {p: X}), want)
    # nested: the inner vmap's loop runs on arrays the outer vmap still batches
    XX = np.stack([X, 2 * X])
    np.testing.assert_allclose(_np(mg.vmap(mg.vmap(reads))(mg.tensor(XX))), [[3.0, 5.0, 9.0], [4.0, 10.0, 18.0]])


# ------------------------------------------------------------------ item 13
def test_one_pass_jacobians_and_hessian_through_while_loop():
    x = np.array([0.5, 0.2, 0.4])
    wl, wt = (lambda a: _wl(mg, a)), (lambda a: _wl(torch, a))
    want = tfunc.jacrev(wt)(_t(x)).numpy()
    np.testing.assert_allclose(want, 16 * np.eye(3))
    for J in (mg.func.jacrev, mg.func.jacfwd, mg.jacrev, mg.jacfwd):
        np.testing.assert_allclose(_np(J(wl)(mg.tensor(x))), want, err_msg=J.__module__ + '.' + J.__name__)
    # the loop closes over the argument: its Hessian is not diagonal
    def sq(L, a):
        return (_wl(L, a * a.sum()) ** 2).sum()
    want = tfunc.hessian(lambda a: sq(torch, a))(_t(x)).numpy()
    np.testing.assert_allclose(_np(mg.hessian(lambda v: (wl(v) ** 2).sum())(mg.tensor(x))), 512 * np.eye(3))
    np.testing.assert_allclose(_np(mg.hessian(lambda a: sq(mg, a))(mg.tensor(x))), want, rtol=1e-12)
    pw = lambda a: mg.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, mg.sin(y) * a), [0, a])[1].sum()

    def pt(a):
        y = a
        for _ in range(3):
            y = torch.sin(y) * a
        return y.sum()
    np.testing.assert_allclose(_np(mg.hessian(pw)(mg.tensor(x))), tfunc.hessian(pt)(_t(x)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(_np(mg.jacfwd(mg.hessian(pw))(mg.tensor(x))),
                               tfunc.jacfwd(tfunc.hessian(pt))(_t(x)).numpy(), rtol=1e-12)
    # on Symbols, inside mg.jit and under mg.vmap (each example stops after its own iterations)
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float64, (3,), name='p')
        J = mg.func.jacrev(wl)(p)
        with pytest.raises(mg.MinigradError, match='not on Symbols'):    # a Hessian: on values only
            mg.hessian(lambda a: sq(mg, a))(p)
    np.testing.assert_allclose(mg.Session(g).run(J, {p: x}), 16 * np.eye(3))
    np.testing.assert_allclose(_np(mg.jit(mg.func.jacrev(wl))(mg.tensor(x))), 16 * np.eye(3))
    X = np.stack([x, 2 * x])
    want = np.stack([tfunc.jacrev(wt)(_t(r)).numpy() for r in X])
    for J in (mg.func.jacrev, mg.func.jacfwd):
        np.testing.assert_allclose(_np(mg.vmap(J(wl))(mg.tensor(X))), want)
    H = mg.vmap(mg.func.jacfwd(mg.func.jacfwd(lambda a: sq(mg, a))))(mg.tensor(X))
    np.testing.assert_allclose(_np(H), np.stack([tfunc.hessian(lambda a: sq(torch, a))(_t(r)).numpy() for r in X]),
                               rtol=1e-12)
    with pytest.raises(mg.MinigradError, match='forward mode'):      # (its saved iterations are per example)
        mg.vmap(mg.hessian(lambda a: sq(mg, a)))(mg.tensor(X))
