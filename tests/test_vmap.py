"""mg.vmap, mg.grad and friends (issue 36): batching rules on every primitive, per-example gradients,
Jacobians in one batched pass, control flow with a batched predicate, and the differential net's random
programs run under vmap in eager, graph (Session) and compiled modes, against a Python loop and torch.func."""
from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import minigrad as mg
from minigrad.core import PRIMITIVES, OPS, register_primitive, elementwise_rule
from minigrad.transforms.batching import BatchError
from minigrad.transforms.func import GradError

import test_programs as net

try:
    import torch
    from torch import func as tfunc
except ImportError:
    torch = None

RNG = np.random.default_rng(0)
pytestmark = pytest.mark.filterwarnings('ignore::RuntimeWarning')     # log(-1), 0/0 in random programs


def _np(v):
    return np.asarray(v.numpy() if isinstance(v, mg.Tensor) else v)


def close(got, want, tol=1e-6):
    np.testing.assert_allclose(_np(got), _np(want), rtol=tol, atol=tol, equal_nan=True)


# ------------------------------------------------------------------ the rule table (each rule: tests/test_op_matrix.py)
def test_a_primitive_without_a_batching_rule_is_named_when_vmapped():
    cube = register_primitive('cube_vmap_test', lambda x: x ** 3, elementwise_rule,
                              lambda n, g, out, x: (g * 3 * x * x,), elementwise=True)
    try:
        assert cube(mg.tensor([2.0])).tolist() == [8.0]            # the op itself works
        with pytest.raises(BatchError, match="'cube_vmap_test' has no batching rule"):
            mg.vmap(lambda x: cube(x))(np.ones((3, 2), np.float32))
        cube.batch = mg.transforms.batching.elementwise                     # a record field, as jvp is
        close(mg.vmap(lambda x: cube(x))(np.full((3, 2), 2.0, np.float32)), np.full((3, 2), 8.0))
    finally:
        PRIMITIVES.pop('cube_vmap_test', None)
        OPS.pop('cube_vmap_test', None)


# ------------------------------------------------------------------ each rule against a loop
def _loop(fn, in_axes, *args):
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = next(a.shape[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = [fn(*[mg.tensor(np.asarray(np.take(a, b, axis=ax))) if ax is not None else mg.tensor(a)
                 for a, ax in zip(args, axes)]) for b in range(n)]
    return np.stack([_np(o) for o in outs])


A = RNG.standard_normal((4, 3, 5)).astype(np.float32)
M = RNG.standard_normal((5, 2)).astype(np.float32)
V5 = RNG.standard_normal((4, 5)).astype(np.float32)
IDX = np.array([2, 0, 2])
CASES = {
    'elementwise, unbatched w': (lambda x, w: mg.tanh(x) * w[0] + 1.0, (0, None), (A, M.T)),
    'where and comparisons': (lambda x, y: mg.where(x > y, x, y * 2), (0, 1), (A, np.swapaxes(A, 0, 1).copy())),
    'sum/max/mean over axes': (lambda x: x.sum(axis=1) + x.max(axis=0, keepdims=True).mean(), 0, (A,)),
    'full reductions': (lambda x: x.sum() * x.max(), 2, (A,)),
    'reshape and transpose': (lambda x: x.reshape(-1, 3).T.reshape(5, 3), 0, (A,)),
    'broadcast_to': (lambda x: mg.broadcast_to(x, (2, 3, 5)) * 1.0, 0, (A,)),
    'getitem basic': (lambda x: x[1:, None, ::-2], 0, (A,)),
    'getitem advanced, adjacent': (lambda x: x[:, IDX], 0, (A,)),
    'getitem advanced, apart': (lambda x: x[IDX, :, IDX], 1, (RNG.standard_normal((3, 4, 2, 3)),)),
    'matmul mat @ mat': (lambda x, w: x @ w, (0, None), (A, M)),
    'matmul vec @ mat, both batched': (lambda v, w: v @ w, (0, 0), (V5, RNG.standard_normal((4, 5, 2)))),
    'matmul mat @ vec': (lambda x, v: x @ v, (None, 0), (A[0], V5)),
    'matmul vec @ vec': (lambda u, v: u @ v, (0, 0), (V5, V5[::-1].copy())),
    'matmul vec @ stack of mats': (lambda v, w: v @ w, (0, None), (V5, RNG.standard_normal((3, 5, 2)))),
    'concatenate with an unbatched part': (lambda x, y: mg.concatenate([x, y], axis=-1), (0, None), (A, A[0])),
    'stack': (lambda x: mg.stack([x, x * 2], axis=1), 0, (A,)),
    'softmax / logsumexp': (lambda x: mg.softmax(x, axis=-1) + mg.logsumexp(x, axis=0), 0, (A,)),
}


@pytest.mark.parametrize('name', list(CASES))
def test_vmap_equals_a_loop_eager_graph_and_compiled(name):
    fn, in_axes, args = CASES[name]
    want = _loop(fn, in_axes, *args)
    close(mg.vmap(fn, in_axes)(*args), want)
    g = mg.Graph()
    with g.as_default():
        phs = [mg.placeholder(a.dtype, a.shape) for a in args]
        out = mg.vmap(fn, in_axes)(*phs)
    close(mg.Session(g).run(out, dict(zip(phs, args))), want)
    close(mg.compile([out], phs)(*args)[0], want)


def test_gradients_flow_through_vmap_on_the_tape():
    x = mg.tensor(A, requires_grad=True)
    mg.vmap(lambda v: (mg.tanh(v) @ mg.tensor(M)).sum(), in_axes=1)(x).sum().backward()
    close(x.grad, (1 - np.tanh(A) ** 2) * M.sum(axis=1))


def test_unbatched_inputs_stay_unbatched():
    g = mg.Graph()
    with g.as_default():
        x, w = mg.placeholder(mg.float32, (4, 3)), mg.placeholder(mg.float32, (3,))
        mg.vmap(lambda x, w: x * mg.exp(w), in_axes=(0, None))(x, w)
    assert [n.op for n in g.nodes if n.op not in ('placeholder', 'constant')] == ['exp', 'mul'], str(g)


def test_out_axes_and_pytrees():
    out = mg.vmap(lambda d: {'s': d['a'].sum(), 'p': [d['a'] * d['b']]}, out_axes=0)(
        {'a': A[:, 0], 'b': A[:, 1]})
    close(out['s'], A[:, 0].sum(-1))
    close(out['p'][0], A[:, 0] * A[:, 1])
    close(mg.vmap(lambda x: x * 2, out_axes=1)(A), np.swapaxes(A * 2, 0, 1))
    close(mg.vmap(lambda x: 3.0)(A), np.full(4, 3.0))                  # a constant output is repeated


def test_nested_vmap_is_an_outer_product():
    u, v = RNG.standard_normal(3), RNG.standard_normal(4)
    close(mg.vmap(mg.vmap(lambda a, b: a * b, in_axes=(None, 0)), in_axes=(0, None))(u, v), np.outer(u, v))


@pytest.mark.parametrize('in_axes, args, match', [
    ((0, 0), (A,), r'in_axes has 2 entries but fn got 1 arguments'),
    (3, (A,), r'in_axes\[0\] = 3 is out of range for argument 0'),
    ((0, 0), (A, M), r'argument 1 .* has batch size 5 along axis 0, but the arguments before it have 4'),
    (('x',), (A,), r'in_axes\[0\] must be an int or None'),
])
def test_bad_in_axes_name_the_argument(in_axes, args, match):
    with pytest.raises(BatchError, match=match):
        mg.vmap(lambda *a: a[0], in_axes=in_axes)(*args)


def test_python_branch_on_a_batched_value_says_what_to_do():
    with pytest.raises(BatchError, match='mg.where'):
        mg.vmap(lambda x: x if x.sum() > 0 else -x)(A)


# ------------------------------------------------------------------ control flow
XS = np.array([-2.0, -1.0, 0.5, 3.0, 20.0], np.float32)


def _cond(x):
    return mg.cond(x > 0, lambda: x * 2, lambda: -x)


def _loop_fn(x):
    return mg.while_loop(lambda i, v: v < 10.0, lambda i, v: (i + 1, v * 2), [mg.tensor(0), mg.abs(x) + 0.5])


def _loop_sym(x):
    return mg.while_loop(lambda i, v: v < 10.0, lambda i, v: (i + 1, v * 2), [mg.constant(0), mg.abs(x) + 0.5])


def test_cond_and_while_loop_with_a_batched_predicate():
    want_c = [_cond(mg.tensor(x)).item() for x in XS]
    want_w = [[t.item() for t in _loop_fn(mg.tensor(x))] for x in XS]
    close(mg.vmap(_cond)(XS), want_c)
    i, v = mg.vmap(_loop_fn)(XS)
    assert i.tolist() == [w[0] for w in want_w]
    close(v, [w[1] for w in want_w])
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (5,))
        c = mg.vmap(_cond)(x)
        i, v = mg.vmap(_loop_sym)(x)
    for got in (mg.Session(g).run([c, i, v], {x: XS}), mg.compile([c, i, v], [x])(XS)):
        close(got[0], want_c)
        assert got[1].tolist() == [w[0] for w in want_w]
        close(got[2], [w[1] for w in want_w])


def test_per_example_gradient_through_cond():
    f = lambda x: mg.cond(x > 0, lambda: x * x, lambda: -x)
    close(mg.vmap(mg.grad(f))(XS), [mg.grad(f)(mg.tensor(x)).item() for x in XS])


# ------------------------------------------------------------------ grad and friends
def mlp_loss(p, x, y):
    h = mg.tanh(x @ p['w1'] + p['b1'])
    return ((h @ p['w2'] - y) ** 2).mean()


def mlp(rng, d=5, h=8, o=3, dtype=np.float32):
    return {'w1': rng.standard_normal((d, h)).astype(dtype) * 0.5, 'b1': np.zeros(h, dtype),
            'w2': rng.standard_normal((h, o)).astype(dtype) * 0.5}


def test_grad_matches_backward_with_pytree_argnums_aux():
    p = {k: mg.tensor(v) for k, v in mlp(RNG).items()}
    x, y = RNG.standard_normal((6, 5)).astype(np.float32), RNG.standard_normal((6, 3)).astype(np.float32)
    leaves = {k: mg.tensor(v.numpy(), requires_grad=True) for k, v in p.items()}
    mlp_loss(leaves, mg.tensor(x), mg.tensor(y)).backward()
    g = mg.grad(mlp_loss)(p, x, y)
    assert sorted(g) == sorted(p)
    for k in p:
        close(g[k], leaves[k].grad, 1e-5)
    (v, aux), (gp, gx) = mg.value_and_grad(lambda p, x: (mlp_loss(p, x, y), x.sum()), argnums=(0, 1),
                                           has_aux=True)(p, x)
    close(v, mlp_loss(p, mg.tensor(x), mg.tensor(y)), 1e-5)
    close(aux, x.sum(), 1e-5)
    assert gx.shape == x.shape and gp['w1'].shape == (5, 8)


def test_per_example_gradients_equal_a_loop_and_a_symbolic_graph():
    p = mlp(RNG)
    x, y = RNG.standard_normal((7, 5)).astype(np.float32), RNG.standard_normal((7, 3)).astype(np.float32)
    pe = mg.vmap(mg.grad(mlp_loss), in_axes=(None, 0, 0))
    got = pe(p, x, y)
    for k in p:
        close(got[k], np.stack([_np(mg.grad(mlp_loss)(p, x[i], y[i])[k]) for i in range(7)]), 1e-5)
    g = mg.Graph()
    with g.as_default():
        ps = {k: mg.placeholder(mg.float32, v.shape, name=k) for k, v in p.items()}
        xs, ys = mg.placeholder(mg.float32, x.shape), mg.placeholder(mg.float32, y.shape)
        out = pe(ps, xs, ys)
    feed = {**{ps[k]: p[k] for k in p}, xs: x, ys: y}
    run = mg.Session(g).run(out, feed)
    prog = mg.compile([out[k] for k in sorted(p)], [ps[k] for k in sorted(p)] + [xs, ys])
    for k, c in zip(sorted(p), prog(*[p[k] for k in sorted(p)], x, y)):
        close(run[k], got[k], 1e-5)
        close(c, got[k], 1e-5)


def test_vmap_inside_jit_and_jit_of_vmap_of_grad():
    p = mlp(RNG)
    x, y = RNG.standard_normal((4, 5)).astype(np.float32), RNG.standard_normal((4, 3)).astype(np.float32)
    want = mg.vmap(mg.grad(mlp_loss), in_axes=(None, 0, 0))(p, x, y)
    per_example = mg.vmap(mg.grad(mlp_loss), in_axes=(None, 0, 0))
    jf = mg.jit(lambda w1, b1, w2, x, y: per_example({'w1': w1, 'b1': b1, 'w2': w2}, x, y)['w1'])
    tp = [mg.tensor(p[k]) for k in ('w1', 'b1', 'w2')]
    for _ in range(2):
        close(jf(*tp, mg.tensor(x), mg.tensor(y)), want['w1'], 1e-5)
    assert jf.trace_count == 1
    one = mg.jit(lambda w1, b1, w2, x, y: tuple(mg.grad(mlp_loss)({'w1': w1, 'b1': b1, 'w2': w2}, x, y).values()))
    got = mg.vmap(one, in_axes=(None, None, None, 0, 0))(*tp, x, y)         # vmap of jit runs fn batched
    for k, name in enumerate(('w1', 'b1', 'w2')):       # the gradient dict keeps the argument's key order
        close(got[k], want[name], 1e-5)


def test_grad_refuses_a_non_scalar_and_an_integer_argument():
    with pytest.raises(GradError, match=r'float scalar \(shape \(\)\)'):
        mg.grad(lambda x: x * 2)(mg.tensor([1.0, 2.0]))
    with pytest.raises(GradError, match='argument 0 .*int64.*only float arguments'):
        mg.grad(lambda x: x.sum())(mg.tensor([1, 2]))
    with pytest.raises(GradError, match='argnums 2'):
        mg.grad(lambda x: x.sum(), argnums=2)(mg.tensor([1.0]))


def test_jacobians_in_one_batched_pass_and_hessians():
    W = RNG.standard_normal((3, 4))
    f = lambda x: mg.tanh(mg.tensor(W) @ x) * x[:3]
    x = mg.tensor(RNG.standard_normal(4))
    want = np.stack([mg.jvp(f, (x,), (e,))[1].numpy() for e in np.eye(4)], axis=1)     # one jvp per column
    for jac in (mg.jacfwd(f), mg.jacrev(f)):
        close(jac(x), want, 1e-10)
        assert jac.passes == 1
    assert mg.func.jacfwd is mg.jacfwd and mg.func.jacrev is mg.jacrev       # the old names still work
    s = lambda x: (mg.tanh(x) ** 3).sum()
    H = mg.hessian(s)(x)
    close(H, mg.jacrev(mg.jacrev(lambda x: s(x).reshape(1)))(x)[0], 1e-10)
    close(mg.jacrev(mg.grad(s))(x), H, 1e-10)
    g = mg.Graph()
    with g.as_default():
        X = mg.placeholder(mg.float64, (4,))
        J = mg.jacrev(lambda v: mg.sin(v) * v)(X)
    close(mg.Session(g).run(J, {X: x.numpy()}), np.diag(np.cos(x.numpy()) * x.numpy() + np.sin(x.numpy())))


@pytest.mark.skipif(torch is None, reason='torch is not installed')
def test_per_example_gradients_and_hessian_match_torch_func():
    p = mlp(RNG, dtype=np.float64)
    x, y = RNG.standard_normal((6, 5)), RNG.standard_normal((6, 3))

    def tloss(p, x, y):
        return ((torch.tanh(x @ p['w1'] + p['b1']) @ p['w2'] - y) ** 2).mean()
    want = tfunc.vmap(tfunc.grad(tloss), in_dims=(None, 0, 0))(
        {k: torch.tensor(v) for k, v in p.items()}, torch.tensor(x), torch.tensor(y))
    got = mg.vmap(mg.grad(mlp_loss), in_axes=(None, 0, 0))(p, x, y)
    for k in p:
        close(got[k], want[k].numpy(), 1e-10)
    v = RNG.standard_normal(4)
    close(mg.hessian(lambda x: (mg.sin(x) * x.sum()).sum())(v),
          tfunc.hessian(lambda x: (torch.sin(x) * x.sum()).sum())(torch.tensor(v)).numpy(), 1e-10)


# ------------------------------------------------------------------ the differential net under vmap
def _batched_inputs(draw, prog, size):
    """Per program input: in_axes (None, or an axis) and the array with the batch at that axis."""
    axes, arrays = [], []
    for s, d in zip(prog.shapes, prog.dtypes):
        ax = draw(st.sampled_from([None, 0, len(s)]))
        shape = s if ax is None else s[:ax] + (size,) + s[ax:]
        arrays.append(draw(hnp.arrays(d, shape, elements=net._elements(d, False))))
        axes.append(ax)
    if all(a is None for a in axes):
        axes[0] = 0
        arrays[0] = np.stack([arrays[0]] * size)
    return tuple(axes), arrays


class VmapOps(net.MgOps):
    """The net's minigrad namespace; the while counter is a graph constant when the (batched) value is a Symbol."""

    def counter(self, like):
        while isinstance(like, mg.transforms.batching.Batched):
            like = like.val
        return super().counter(like)


OPS_ = VmapOps(python_if=False)


@st.composite
def batched_programs(draw, control=()):
    prog = draw(net.programs(dtypes=(np.float64,), control=control, none_dims=False, max_steps=5))
    size = draw(st.sampled_from([1, 3]))
    axes, arrays = _batched_inputs(draw, prog, size)
    return prog, size, axes, arrays


def _example(arrays, axes, b):
    return [a if ax is None else np.asarray(np.take(a, b, axis=ax)) for a, ax in zip(arrays, axes)]


def _values(prog):
    return lambda *xs: tuple(net.run_program(prog, OPS_, list(xs))[len(xs):])


def _loss(prog):
    return lambda *xs: prog.loss_of(net.MG, net.run_program(prog, OPS_, list(xs)))


@settings(max_examples=25, **net.NET)
@given(batched_programs())
def test_net_vmap_equals_stacking_eager_graph_compiled(case):
    check_vmap(*case)


@settings(max_examples=15, **net.NET)
@given(batched_programs(control=('cond', 'while')))
def test_net_vmap_through_cond_and_while_loop(case):
    check_vmap(*case)


def check_vmap(prog, size, axes, arrays):
    f = _values(prog)
    loop = [f(*[mg.tensor(a) for a in _example(arrays, axes, b)]) for b in range(size)]
    want = [np.stack([_np(vals[k]) for vals in loop]) for k in range(len(loop[0]))]
    got = mg.vmap(f, axes)(*arrays)
    for g, w in zip(got, want):
        close(g, w, 1e-9)
    gr = mg.Graph()
    with gr.as_default():
        phs = [mg.placeholder(a.dtype, a.shape) for a in arrays]
        outs = list(mg.vmap(f, axes)(*phs))
    for res in (mg.Session(gr).run(outs, dict(zip(phs, arrays))), mg.compile(outs, phs, backend='numpy')(*arrays)):
        for g, w in zip(res, want):
            close(g, w, 1e-9)
    if torch is not None and not prog.control:        # torch.func.vmap has no data-dependent control flow
        tf = lambda *xs: tuple(net.run_program(prog, net.TORCH, list(xs))[len(xs):])
        tout = tfunc.vmap(tf, in_dims=axes)(*[torch.from_numpy(a) for a in arrays])
        for g, t in zip(got, tout):
            close(g, t.numpy(), 1e-9)


@settings(max_examples=20, **net.NET)
@given(batched_programs())
def test_net_vmap_of_grad_equals_a_loop_of_grad(case):
    check_vmap_grad(*case)


@settings(max_examples=10, **net.NET)
@given(batched_programs(control=('cond', 'while')))
def test_net_vmap_of_grad_through_cond_and_while_loop(case):
    check_vmap_grad(*case)


def check_vmap_grad(prog, size, axes, arrays):
    if not prog.loss:
        return
    fl = _loss(prog)
    nums = tuple(range(len(arrays)))
    loop = [mg.grad(fl, argnums=nums)(*_example(arrays, axes, b)) for b in range(size)]
    got = mg.vmap(mg.grad(fl, argnums=nums), axes)(*arrays)
    for k, ax in enumerate(axes):
        # an unbatched argument still gets one gradient per example (out_axes=0)
        close(got[k], np.stack([_np(gs[k]) for gs in loop]), 1e-9)
    gr = mg.Graph()
    with gr.as_default():
        phs = [mg.placeholder(a.dtype, a.shape) for a in arrays]
        outs = list(mg.vmap(mg.grad(fl, argnums=nums), axes)(*phs))
    for g, w in zip(mg.Session(gr).run(outs, dict(zip(phs, arrays))), got):
        close(g, w, 1e-9)


def test_the_per_example_benchmark_variants_agree():
    script = Path(__file__).resolve().parent.parent / 'scripts' / 'bench.py'
    spec = importlib.util.spec_from_file_location('bench_script', script)
    bench_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_script)
    v = bench_script.per_example_case(batch=4, sizes=(5, 6, 3))
    want = [np.asarray(a) for a in v['compiled_numpy']()]
    loop = v['loop_jit_grad']()
    for k, w in enumerate(want):
        close(np.stack([_np(one[k]) for one in loop]), w, 1e-5)
        close(v['vmap_grad_eager']()[k], w, 1e-5)
        if 'torch_func' in v:
            close(v['torch_func']()[k].numpy(), w, 1e-5)


@pytest.mark.parametrize('module', [mg.transforms.batching, mg.func])
def test_docstring_examples_run(module):
    res = doctest.testmod(module)
    assert res.attempted > 0 and res.failed == 0


def test_transformations_on_symbols_build_ordinary_graphs():
    f = lambda v: mg.sin(v) * v
    xv = np.array([0.1, 0.5, 2.0])
    d = np.cos(xv) * xv + np.sin(xv)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, (3,))
        outs = [mg.jvp(f, (x,), (np.ones(3),))[1], mg.jacfwd(f)(x), mg.grad(lambda v: f(v).sum())(x),
                mg.hessian(lambda v: f(v).sum())(x), mg.vmap(mg.grad(lambda s: f(s)))(x)]
    want = [d, np.diag(d), d, np.diag(2 * np.cos(xv) - xv * np.sin(xv)), d]
    for got in (mg.Session(g).run(outs, {x: xv}), mg.compile(outs, [x])(xv)):
        for a, w in zip(got, want):
            close(a, w, 1e-12)


def test_functional_call_gives_per_example_gradients_of_a_module():
    mg.manual_seed(0)
    model = mg.nn.Sequential(mg.nn.Linear(4, 6), mg.nn.Tanh(), mg.nn.Linear(6, 2))
    x, y = RNG.standard_normal((5, 4)).astype(np.float32), RNG.standard_normal((5, 2)).astype(np.float32)
    params = {k: mg.tensor(v.numpy()) for k, v in model.named_parameters()}

    def loss(p, x, y):
        return ((mg.functional_call(model, p, x) - y) ** 2).sum()
    got = mg.vmap(mg.grad(loss), in_axes=(None, 0, 0))(params, x, y)
    for i in range(5):
        model.zero_grad()
        ((model(mg.tensor(x[i])) - mg.tensor(y[i])) ** 2).sum().backward()
        for k, p in model.named_parameters():
            close(got[k][i], p.grad, 1e-5)
    assert all(p is q for p, q in zip(model.parameters(), [dict(model.named_parameters())[k] for k in params]))
    with pytest.raises(GradError, match=r"has no parameters \['nope'\]"):
        mg.functional_call(model, {'nope': 1.0}, x)


def test_per_example_gradients_through_while_loop():
    def f(w, x):
        v = mg.while_loop(lambda v: v.sum() < 10.0, lambda v: v * w, x)
        return (v * v).sum()
    w, xs = np.float32(1.5), np.array([[1., 2.], [3., 4.], [20., 1.], [0.5, 0.25]], np.float32)
    per_example = mg.vmap(mg.grad(f, argnums=(0, 1)), in_axes=(None, 0))
    loop = [mg.grad(f, argnums=(0, 1))(mg.tensor(w), mg.tensor(x)) for x in xs]
    want = [np.stack([_np(one[k]) for one in loop]) for k in range(2)]
    for k, got in enumerate(per_example(mg.tensor(w), xs)):
        close(got, want[k], 1e-5)
    g = mg.Graph()
    with g.as_default():
        pw, px = mg.placeholder(mg.float32, ()), mg.placeholder(mg.float32, xs.shape)
        outs = list(per_example(pw, px))
    for k, got in enumerate(mg.compile(outs, [pw, px])(w, xs)):
        close(got, want[k], 1e-5)
