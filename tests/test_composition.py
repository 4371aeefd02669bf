"""The composition net (issue 31): transformations of transformations agree with torch.func.

Random differentiable programs (seeded) are run through pairs and common triples of tape backward,
mg.gradients, jvp, jacfwd, jacrev, jit, trace, grad and vmap, and compared with torch.func in float64. A fast slice
runs by default; the larger slice is marked slow. Special programs cover cond, while_loop and
no_grad / enable_grad / stop_gradient inside trace and jit."""
from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg

torch = pytest.importorskip('torch')
tfunc = pytest.importorskip('torch.func')
needs_numba = pytest.mark.skipif(not mg.compiler.kernels.available(), reason='numba is not installed')

N_IN, N_OUT = 3, 2


# ------------------------------------------------------------------ random programs
def _unary(rng):
    """One elementwise step, written once for both libraries (``L`` is minigrad or torch)."""
    c = float(rng.uniform(0.5, 1.5))
    return [lambda L, h: L.sin(h) * c, lambda L, h: L.tanh(h * c), lambda L, h: h * h * 0.5,
            lambda L, h: L.exp(h * 0.3) - c, lambda L, h: L.sigmoid(h) + h * c][rng.integers(5)]


class Program:
    """f: R^3 -> R^2 made of random elementwise steps, products with earlier values and a matmul."""

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.steps = [(_unary(rng), int(rng.integers(-1, k + 1))) for k in range(int(rng.integers(2, 5)))]
        self.W = rng.uniform(-1, 1, (N_IN, N_OUT))
        self.x = rng.uniform(-1, 1, N_IN)
        self.v = rng.uniform(-1, 1, N_IN)
        self.seed = seed

    def run(self, L, x, W):
        hs = [x]
        for step, other in self.steps:
            h = step(L, hs[-1])
            if 0 <= other < len(hs):
                h = h + hs[other] * 0.5
            hs.append(h)
        return L.matmul(hs[-1], W)

    def mg(self, x):
        return self.run(mg, x, self.W)

    def torch(self, x):
        return self.run(torch, x, torch.tensor(self.W))

    def mg_scalar(self, x):
        y = self.mg(x)
        return (y * y).sum()

    def torch_scalar(self, x):
        y = self.torch(x)
        return (y * y).sum()


def _np(t):
    return np.asarray(t.data if isinstance(t, mg.Tensor) else t, np.float64)


def _t(a):
    return torch.tensor(np.asarray(a, np.float64))


def _backward(f):
    def g(x):
        x = mg.tensor(x, requires_grad=True)
        f(x).sum().backward()
        return x.grad
    return g


def _gradients(f):
    def g(x):
        gr = mg.Graph()
        with gr.as_default():
            p = mg.placeholder(mg.float64, x.shape)
            dx, = mg.gradients(f(p).sum(), [p])
        return mg.Session(gr).run(dx, {p: x})
    return g


# each mode: (name, minigrad of (program, x) -> array, torch reference of (program, x) -> array)
def _hvp_mg(P, x):
    return mg.jvp(mg.jacrev(P.mg_scalar), (mg.tensor(x),), (mg.tensor(P.v),))[1]


MODES = {
    'backward': (lambda P, x: _backward(P.mg)(x), lambda P, x: tfunc.grad(lambda t: P.torch(t).sum())(_t(x))),
    'gradients': (lambda P, x: _gradients(P.mg)(x), lambda P, x: tfunc.grad(lambda t: P.torch(t).sum())(_t(x))),
    'jvp': (lambda P, x: mg.jvp(P.mg, (mg.tensor(x),), (mg.tensor(P.v),))[1],
            lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'jacfwd': (lambda P, x: mg.jacfwd(P.mg)(mg.tensor(x)), lambda P, x: tfunc.jacfwd(P.torch)(_t(x))),
    'jacrev': (lambda P, x: mg.jacrev(P.mg)(mg.tensor(x)), lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jit': (lambda P, x: mg.jit(P.mg)(mg.tensor(x)), lambda P, x: P.torch(_t(x))),
    'trace': (lambda P, x: mg.trace(P.mg, x)(mg.tensor(x)), lambda P, x: P.torch(_t(x))),
    # pairs and triples
    'jacrev(jacrev)': (lambda P, x: mg.jacrev(mg.jacrev(P.mg_scalar))(mg.tensor(x)),
                       lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'jacfwd(jacrev)': (lambda P, x: mg.jacfwd(mg.jacrev(P.mg_scalar))(mg.tensor(x)),
                       lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'jacrev(jacfwd)': (lambda P, x: mg.jacrev(mg.jacfwd(P.mg_scalar))(mg.tensor(x)),
                       lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'jacfwd(jacfwd)': (lambda P, x: mg.jacfwd(mg.jacfwd(P.mg_scalar))(mg.tensor(x)),
                       lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'hvp (jvp of jacrev)': (_hvp_mg, lambda P, x: tfunc.jvp(tfunc.grad(P.torch_scalar), (_t(x),), (_t(P.v),))[1]),
    'backward(jit)': (lambda P, x: _backward(mg.jit(P.mg))(x),
                      lambda P, x: tfunc.grad(lambda t: P.torch(t).sum())(_t(x))),
    'backward(trace)': (lambda P, x: _backward(mg.trace(P.mg, x))(x),
                        lambda P, x: tfunc.grad(lambda t: P.torch(t).sum())(_t(x))),
    'jacrev(jit)': (lambda P, x: mg.jacrev(mg.jit(P.mg))(mg.tensor(x)), lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jacfwd(jit)': (lambda P, x: mg.jacfwd(mg.jit(P.mg))(mg.tensor(x)), lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jvp(jit)': (lambda P, x: mg.jvp(mg.jit(P.mg), (mg.tensor(x),), (mg.tensor(P.v),))[1],
                 lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'jacrev(trace)': (lambda P, x: mg.jacrev(mg.trace(P.mg, x))(mg.tensor(x)),
                      lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jvp(trace)': (lambda P, x: mg.jvp(mg.trace(P.mg, x), (mg.tensor(x),), (mg.tensor(P.v),))[1],
                   lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'jit(jacrev)': (lambda P, x: mg.jit(mg.jacrev(P.mg))(mg.tensor(x)), lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'trace(jacrev)': (lambda P, x: mg.trace(mg.jacrev(P.mg), x)(mg.tensor(x)),
                      lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jit(jacfwd)': (lambda P, x: mg.jit(mg.jacfwd(P.mg))(mg.tensor(x)), lambda P, x: tfunc.jacfwd(P.torch)(_t(x))),
    'trace(jacfwd)': (lambda P, x: mg.trace(mg.jacfwd(P.mg), x)(mg.tensor(x)),
                      lambda P, x: tfunc.jacfwd(P.torch)(_t(x))),
    'jit(jvp)': (lambda P, x: mg.jit(lambda a: mg.jvp(P.mg, (a,), (P.v,))[1])(mg.tensor(x)),
                 lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'backward(jvp)': (lambda P, x: _backward(lambda a: mg.jvp(P.mg_scalar, (a,), (mg.tensor(P.v),))[1])(x),
                      lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x)) @ _t(P.v)),
    'jacrev(jvp)': (lambda P, x: mg.jacrev(lambda a: mg.jvp(P.mg, (a,), (mg.tensor(P.v),))[1])(mg.tensor(x)),
                    lambda P, x: tfunc.jacrev(lambda a: tfunc.jvp(P.torch, (a,), (_t(P.v),))[1])(_t(x))),
    'jit(jacrev(jit))': (lambda P, x: mg.jit(mg.jacrev(mg.jit(P.mg)))(mg.tensor(x)),
                         lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jit(jvp(trace))': (lambda P, x: mg.jit(lambda a: mg.jvp(mg.trace(P.mg, x), (a,), (P.v,))[1])(mg.tensor(x)),
                        lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'jit(jit)': (lambda P, x: mg.jit(mg.jit(P.mg))(mg.tensor(x)), lambda P, x: P.torch(_t(x))),
    'jacrev(jacrev(jit))': (lambda P, x: mg.jacrev(mg.jacrev(mg.jit(P.mg_scalar)))(mg.tensor(x)),
                            lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'jacfwd(jacrev(jit))': (lambda P, x: mg.jacfwd(mg.jacrev(mg.jit(P.mg_scalar)))(mg.tensor(x)),
                            lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'backward(backward) via jacrev': (lambda P, x: _backward(mg.jacrev(P.mg_scalar))(x),
                                      lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x)).sum(0)),
    # grad and vmap (issue 36); a batch is four points around x
    'grad': (lambda P, x: mg.grad(P.mg_scalar)(mg.tensor(x)), lambda P, x: tfunc.grad(P.torch_scalar)(_t(x))),
    'vmap': (lambda P, x: mg.vmap(P.mg)(_batch(x)), lambda P, x: tfunc.vmap(P.torch)(_t(_batch(x)))),
    'vmap(grad)': (lambda P, x: mg.vmap(mg.grad(P.mg_scalar))(_batch(x)),
                   lambda P, x: tfunc.vmap(tfunc.grad(P.torch_scalar))(_t(_batch(x)))),
    'jit(vmap(grad))': (lambda P, x: mg.jit(mg.vmap(mg.grad(P.mg_scalar)))(_batch(x)),
                        lambda P, x: tfunc.vmap(tfunc.grad(P.torch_scalar))(_t(_batch(x)))),
    'vmap(jit)': (lambda P, x: mg.vmap(mg.jit(P.mg))(_batch(x)), lambda P, x: tfunc.vmap(P.torch)(_t(_batch(x)))),
    'vmap(jvp)': (lambda P, x: mg.vmap(lambda a: mg.jvp(P.mg, (a,), (P.v,))[1])(_batch(x)),
                  lambda P, x: tfunc.vmap(lambda a: tfunc.jvp(P.torch, (a,), (_t(P.v),))[1])(_t(_batch(x)))),
    'vmap(jacrev)': (lambda P, x: mg.vmap(mg.func.jacrev(P.mg))(_batch(x)),
                     lambda P, x: tfunc.vmap(tfunc.jacrev(P.torch))(_t(_batch(x)))),
    'jvp(grad)': (lambda P, x: mg.jvp(mg.grad(P.mg_scalar), (mg.tensor(x),), (mg.tensor(P.v),))[1],
                  lambda P, x: tfunc.jvp(tfunc.grad(P.torch_scalar), (_t(x),), (_t(P.v),))[1]),
    'jacrev(grad)': (lambda P, x: mg.jacrev(mg.grad(P.mg_scalar))(mg.tensor(x)),
                     lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'hessian': (lambda P, x: mg.hessian(P.mg_scalar)(mg.tensor(x)), lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'func.jacrev (one pass)': (lambda P, x: mg.func.jacrev(P.mg)(mg.tensor(x)), lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'func.jacfwd (one pass)': (lambda P, x: mg.func.jacfwd(P.mg)(mg.tensor(x)), lambda P, x: tfunc.jacfwd(P.torch)(_t(x))),
    'grad(jit)': (lambda P, x: mg.grad(mg.jit(P.mg_scalar))(mg.tensor(x)),
                  lambda P, x: tfunc.grad(P.torch_scalar)(_t(x))),
}


def _batch(x):
    return np.stack([x, 0.5 * x, -x, x + 0.1])


def check(mode, seed):
    P = Program(seed)
    got, want = MODES[mode][0](P, P.x), MODES[mode][1](P, P.x)
    np.testing.assert_allclose(_np(got), want.detach().numpy(), rtol=1e-6, atol=1e-9,
                               err_msg=f'{mode}, program {seed}')


FAST_SEEDS, SLOW_SEEDS = range(3), range(3, 25)


@pytest.mark.parametrize('seed', FAST_SEEDS)
@pytest.mark.parametrize('mode', list(MODES))
def test_composition_agrees_with_torch_func(mode, seed):
    check(mode, seed)


@pytest.mark.slow
@pytest.mark.parametrize('seed', SLOW_SEEDS)
@pytest.mark.parametrize('mode', list(MODES))
def test_composition_agrees_with_torch_func_larger(mode, seed):
    check(mode, seed)


# ------------------------------------------------------------------ control flow under forward mode
def _cond_f(L, x):
    pos = lambda: L.sin(x) * x
    neg = lambda: x * x * 0.5
    if L is torch:
        return pos() if float(x.sum()) > 0 else neg()
    return mg.cond(x.sum() > 0, pos, neg)


def _while_f(L, x):
    if L is torch:
        y = x
        for _ in range(3):
            y = L.tanh(y) * 1.5 + x
        return y
    start = mg.constant(0) if isinstance(x, mg.Symbol) else mg.tensor(0)
    i, y = mg.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, mg.tanh(y) * 1.5 + x), [start, x])
    return y


CONTROL = {'cond': _cond_f, 'while_loop': _while_f}
WRAP = {'eager': lambda f, x: f, 'jit': lambda f, x: mg.jit(f), 'trace': lambda f, x: mg.trace(f, x)}


@pytest.mark.parametrize('sign', [1.0, -1.0])
@pytest.mark.parametrize('wrap', list(WRAP))
@pytest.mark.parametrize('ctl', list(CONTROL))
def test_jvp_and_jacobians_through_control_flow(ctl, wrap, sign):
    rng = np.random.default_rng(5)
    x, v = rng.uniform(0.1, 1, 3) * sign, rng.uniform(-1, 1, 3)
    f = WRAP[wrap](lambda a: CONTROL[ctl](mg, a), x)
    ft = lambda a: CONTROL[ctl](torch, a)
    np.testing.assert_allclose(_np(mg.jvp(f, (mg.tensor(x),), (mg.tensor(v),))[1]),
                               tfunc.jvp(ft, (_t(x),), (_t(v),))[1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(_np(mg.jacfwd(f)(mg.tensor(x))), tfunc.jacfwd(ft)(_t(x)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(_np(mg.jacrev(f)(mg.tensor(x))), tfunc.jacfwd(ft)(_t(x)).numpy(), rtol=1e-6)


# ------------------------------------------------------------------ grad mode inside trace and jit
def _modes_f(x):
    y = x * x
    with mg.no_grad():
        z = mg.sin(x)                   # a constant for differentiation
        with mg.enable_grad():
            w = mg.cos(x)               # differentiated again
    return (y * z + w + mg.stop_gradient(mg.exp(x)) * x).sum()


def _modes_torch(x):
    return (x * x * torch.sin(x).detach() + torch.cos(x) + torch.exp(x).detach() * x).sum()


GRAD_OF = {
    'eager': lambda x: _backward(_modes_f)(x),
    'gradients(trace)': lambda x: _traced_gradient(mg.trace(_modes_f, x), x),
    'gradients(tape trace)': lambda x: _traced_gradient(mg.trace(_modes_f, x, symbolic=False), x),
    'backward(jit)': lambda x: _backward(mg.jit(_modes_f))(x),
    'jacrev': lambda x: mg.jacrev(_modes_f)(mg.tensor(x)),
}


def _traced_gradient(tf, x):
    with tf.graph.as_default():
        dx, = mg.gradients(tf.outputs[0], tf.inputs)
    return mg.Session(tf.graph).run(dx, tf.feeds([x]))


@pytest.mark.parametrize('mode', list(GRAD_OF))
def test_no_grad_enable_grad_stop_gradient_mean_the_same_in_every_mode(mode):
    x = np.array([0.3, -0.7, 1.1])
    want = tfunc.grad(_modes_torch)(_t(x)).numpy()
    np.testing.assert_allclose(_np(GRAD_OF[mode](x)), want, rtol=1e-6)


# ------------------------------------------------------------------ issue 31 regressions, one per fix
def test_hessian_both_ways_and_gradient_of_a_jacobian():
    f = lambda x: (x ** 3).sum()
    x = mg.tensor([1.0, 2.0])
    for H in (mg.jacrev(mg.jacrev(f)), mg.jacfwd(mg.jacrev(f)), mg.jacrev(mg.jacfwd(f))):
        np.testing.assert_allclose(H(x).tolist(), [[6.0, 0.0], [0.0, 12.0]])
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    mg.jacrev(f)(w).sum().backward()            # the Jacobian stays on the tape: d/dw sum(3 w^2) = 6 w
    np.testing.assert_allclose(w.grad.tolist(), [6.0, 12.0])


def test_a_jit_or_trace_output_is_on_the_tape_when_its_input_requires_grad():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    for f in (mg.jit(lambda a: (a ** 3).sum()), mg.trace(lambda a: (a ** 3).sum(), np.ones(2, np.float32))):
        x.grad = None
        y = f(x)
        assert y.requires_grad and y.grad_fn.name == 'call'
        y.backward()
        np.testing.assert_allclose(x.grad.tolist(), [3.0, 12.0])
    w = mg.tensor([2.0], requires_grad=True)        # a captured tensor that requires grad gets its gradient too
    mg.jit(lambda a: (a * w).sum())(mg.tensor([3.0, 4.0])).backward()
    np.testing.assert_allclose(w.grad.tolist(), [7.0])


def test_forward_mode_through_while_loop_cond_and_jit():
    def f(x):
        i, y = mg.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, y * x), [mg.constant(0), x])
        return mg.cond(y.sum() > 0, lambda: y * 2.0, lambda: -y)
    x, v = mg.tensor([1.5, 0.5]), mg.tensor([1.0, 0.0])
    for g in (mg.jit(f), mg.trace(f, np.ones(2, np.float32))):
        y, dy = mg.jvp(g, (x,), (v,))           # y = 2 x^3: dy = 6 x^2 v
        np.testing.assert_allclose(dy.tolist(), [13.5, 0.0], rtol=1e-6)


def test_nested_jit_and_identity_output_is_a_copy():
    inner = mg.jit(lambda a: a * 2.0)
    outer = mg.jit(lambda a: inner(a) + 1.0)
    np.testing.assert_allclose(outer(np.array([1.0, 2.0])), [3.0, 5.0])
    a = np.ones(3)
    out = mg.jit(lambda x: x)(a)
    assert out is not a and not np.shares_memory(out, a)


def test_in_place_under_no_grad_keeps_a_non_leaf_in_the_graph_as_pytorch():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    with mg.no_grad():
        y += 1
    (y * y).sum().backward()
    xt = torch.tensor([1.0, 2.0], requires_grad=True)
    yt = xt * 3
    with torch.no_grad():
        yt += 1
    (yt * yt).sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), xt.grad.tolist())


def test_no_grad_inside_a_symbolic_trace_is_stop_gradient():
    def f(x):
        with mg.no_grad():
            return x * x
    tf = mg.trace(f, np.ones(2, np.float32))
    assert 'stop_gradient' in str(tf.graph)
    with tf.graph.as_default():
        dx, = mg.gradients(tf.outputs[0].sum(), tf.inputs)
    np.testing.assert_allclose(mg.Session(tf.graph).run(dx, tf.feeds([np.ones(2, np.float32)])), [0.0, 0.0])


def test_jit_reads_captured_tensors_and_guards_free_scalars_exactly():
    c = mg.tensor([1.0, 2.0])
    f = mg.jit(lambda x: x * c)
    f(np.ones(2))
    c += 1                                  # an in-place change of a closed-over tensor is seen
    np.testing.assert_allclose(f(np.ones(2)), [2.0, 3.0])
    scale = [2.0]
    g = mg.jit(lambda x: x * scale_of(scale))
    np.testing.assert_allclose(g(np.ones(2)), [2.0, 2.0])
    h = mg.jit(lambda x, s: x * s)
    h(np.ones(2), 0.0)
    assert np.signbit(h(np.ones(2), -0.0)).all() and h.trace_count == 2     # -0.0 is not 0.0
    h(np.ones(2), float('nan'))
    h(np.ones(2), float('nan'))
    assert h.trace_count == 3                                               # nan hits its own entry


def scale_of(box):
    return box[0]


FACTOR = 2.0


def test_jit_guards_globals_and_rebound_parameters():
    f = mg.jit(lambda x: x * FACTOR)
    np.testing.assert_allclose(f(np.ones(2)), [2.0, 2.0])
    globals()['FACTOR'] = 3.0
    try:
        np.testing.assert_allclose(f(np.ones(2)), [3.0, 3.0])
    finally:
        globals()['FACTOR'] = 2.0
    m = mg.nn.Linear(2, 1)
    k = mg.jit(lambda x: m(x))
    x = np.ones((1, 2), np.float32)
    k(x)
    m.bias = mg.nn.Parameter(np.full(m.bias.shape, 5.0, np.float32))
    np.testing.assert_allclose(k(x), m(mg.tensor(x)).data, rtol=1e-6)


@needs_numba
def test_guard_values_come_from_the_compiled_kernels():
    x = np.array([1.8592438], np.float32)      # numba's pow differs from numpy's by 1 ulp here

    def fn(a):
        return a * float(((a ** 2.7 + 0.5) * 1.0).sum())
    f = mg.jit(fn, backend='numba')
    f(x)
    f(x)
    assert f.trace_count == 1 and f.hits == 1


def test_a_jit_call_is_recorded_on_an_open_tape():
    f = mg.jit(lambda a: (a * a).sum())
    t = mg.trace(lambda a: f(a) * 2, np.ones(2, np.float32), symbolic=False)    # not a stale captured value
    np.testing.assert_allclose(t(np.array([1.0, 2.0], np.float32)), 10.0)
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with mg.Tape() as tape:
        f(x)
    assert [e.op for e in tape.entries] == ['call']
    mg.draw(tape)


def test_unsupported_compositions_say_so_and_name_the_alternative():
    def loop(x):
        start = mg.constant(0) if isinstance(x, mg.Symbol) else mg.tensor(0)
        return mg.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, mg.sin(y) * x), [start, x])[1].sum()
    x = mg.tensor([0.3, -0.5])
    with pytest.raises(mg.MinigradError, match='unroll the loop'):
        mg.jacrev(mg.jacrev(mg.jit(loop)))(x)           # second reverse derivative through while_loop
    with pytest.raises(mg.MinigradError, match='use mg.jacfwd'):
        mg.jacrev(mg.jacfwd(mg.jit(loop)))(x)           # reverse over forward tangents of a jit while_loop
    branchy = lambda a: mg.cond(a.sum() > 0, lambda: mg.sin(a) * a, lambda: a * a)
    with pytest.raises(mg.MinigradError, match=r'mg.jvp\(mg.jit\(f\)'):
        mg.jit(lambda a: mg.jvp(branchy, (a,), (np.ones(2),))[1])(x)    # forward mode into a cond body
    np.testing.assert_allclose(_np(mg.jvp(mg.jit(branchy), (x,), (mg.tensor(np.ones(2)),))[1]),
                               _np(mg.jvp(branchy, (x,), (mg.tensor(np.ones(2)),))[1]), rtol=1e-6)
    H = mg.jacfwd(mg.jacrev(mg.jit(loop)))(x)           # the alternatives work
    np.testing.assert_allclose(_np(H), _np(mg.jacfwd(mg.jacfwd(loop))(x)), rtol=1e-6)


NUMBA_MODES = ['backward(jit)', 'jacrev(jit)', 'jvp(jit)', 'jacfwd(jacrev(jit))', 'jit(vmap(grad))']


@needs_numba
@pytest.mark.parametrize('mode', NUMBA_MODES)
def test_composition_through_jit_on_the_numba_backend(mode, monkeypatch):
    monkeypatch.setenv('MINIGRAD_BACKEND', 'numba')
    check(mode, 0)


@pytest.mark.slow
@needs_numba
@pytest.mark.parametrize('seed', range(1, 6))
@pytest.mark.parametrize('mode', [m for m in MODES if 'jit' in m])
def test_composition_through_jit_on_the_numba_backend_larger(mode, seed, monkeypatch):
    monkeypatch.setenv('MINIGRAD_BACKEND', 'numba')
    check(mode, seed)
