"""mg.cond and mg.while_loop: values, gradients (checked against the tape), node format, errors."""
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import interpreter
from minigrad.core.control import MaxIterationsError
from minigrad.session import check_feeds


def run(g, fetches, feed=None):
    """Evaluate with the reference interpreter (the oracle that defines what a graph means)."""
    g.verify()
    flat = [fetches] if isinstance(fetches, mg.Symbol) else list(fetches)
    feeds = check_feeds(g, feed or {})
    vals = interpreter.evaluate(g, [f for f in _leaves(flat)], feeds)
    it = iter(vals)
    out = [_rebuild(f, it) for f in flat]
    return out[0] if isinstance(fetches, mg.Symbol) else out


def _leaves(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _leaves(x)
        else:
            yield x


def _rebuild(x, it):
    return type(x)(_rebuild(i, it) for i in x) if isinstance(x, (list, tuple)) else next(it)


# ------------------------------------------------------------------ cond
def test_cond_values_and_gradients_both_branches():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, shape=(3,), name='x')
        w = mg.placeholder(mg.float64, shape=(3,), name='w')
        y = mg.cond(x.sum() > 0, lambda: (x * w).sum(), lambda: (x - w * w).sum())
        dx, dw = mg.gradients(y, [x, w])
    xv, wv = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    for feed_x, want in [(xv, [(xv * wv).sum(), wv, xv]), (-xv, [(-xv - wv * wv).sum(), np.ones(3), -2 * wv])]:
        for a, b in zip(run(g, [y, dx, dw], {x: feed_x, w: wv}), want):
            np.testing.assert_allclose(a, b)


def test_cond_node_format():
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.bool_, shape=(), name='p')
        a = mg.placeholder(mg.float32, shape=(2,), name='a')
        b = mg.placeholder(mg.float32, shape=(2,), name='b')
        y = mg.cond(p, lambda: a * 2.0, lambda: b + a)
    node = y.node
    assert node.op == 'cond' and node.inputs[0] is p
    assert [s.name for s in node.inputs[1:]] == ['a', 'b']
    t, f = node.params['true_graph'], node.params['false_graph']
    assert isinstance(t, mg.Graph) and t.parent is g and t.inputs == []
    assert [o for o, _ in t.captures] == [a, b] and [o for o, _ in f.captures] == [a, b]
    assert len(t.outputs) == len(f.outputs) == 1 and y.shape == (2,)
    assert 'true_graph:' in str(g) and 'return' in str(g)
    np.testing.assert_allclose(run(g, y, {p: True, a: [1, 2], b: [0, 0]}), [2, 4])
    np.testing.assert_allclose(run(g, y, {p: False, a: [1, 2], b: [1, 1]}), [2, 3])


def test_cond_branch_ops_live_in_the_branch():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, shape=(), name='x')
        y = mg.cond(x > 0, lambda: mg.log(x), lambda: -x)
    assert [n.op for n in g.nodes] == ['placeholder', 'constant', 'less', 'cond']
    with np.errstate(all='raise'):                # log(-2) must not run
        assert float(run(g, y, {x: -2.0})) == 2.0


def test_cond_multiple_outputs_and_python_values():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(), name='x')
        a, b = mg.cond(x > 1, lambda: (x, 1.0), lambda: (x * 0.0, 2.0))
    assert a.dtype == np.float32 and b.dtype == np.float32
    assert [float(v) for v in run(g, [a, b], {x: 3.0})] == [3.0, 1.0]
    assert [float(v) for v in run(g, [a, b], {x: 0.5})] == [0.0, 2.0]


def test_cond_second_derivative():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, shape=(), name='x')
        y = mg.cond(x > 0, lambda: x ** 3, lambda: mg.sin(x))
        dx, = mg.gradients(y, x)
        d2, = mg.gradients(dx, x)
    assert np.allclose(run(g, [dx, d2], {x: 2.0}), [12.0, 12.0])
    assert np.allclose(run(g, [dx, d2], {x: -1.0}), [np.cos(-1.0), -np.sin(-1.0)])


def test_cond_nested_and_eager():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, shape=(), name='x')
        y = mg.cond(x > 0, lambda: mg.cond(x > 10, lambda: x * 100, lambda: x * 10), lambda: x)
        dx, = mg.gradients(y, x)
    for xv, want in [(20.0, 100.0), (5.0, 10.0), (-1.0, 1.0)]:
        assert float(run(g, dx, {x: xv})) == want
    t = mg.tensor(2.0, requires_grad=True)
    e = mg.cond(t > 0, lambda: t * 3, lambda: t)      # eager: runs one branch on the tape
    e.backward()
    assert float(t.grad.numpy()) == 3.0


def test_cond_errors():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(3,), name='x')
        with pytest.raises(mg.GraphError, match='predicate must be a scalar'):
            mg.cond(x > 0, lambda: x, lambda: x)
        with pytest.raises(mg.GraphError, match='true_fn returns 2 values but false_fn returns 1'):
            mg.cond(x.sum() > 0, lambda: (x, x), lambda: x)
        with pytest.raises(mg.GraphError, match='int64 in false_fn'):
            mg.cond(x.sum() > 0, lambda: x.sum(), lambda: mg.constant(1))


# ------------------------------------------------------------------ while_loop
def test_counter_program():
    g = mg.Graph()
    with g.as_default():
        c1, c2 = mg.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1),
                               [mg.constant(0), mg.constant(10)])
    assert [int(v) for v in run(g, [c1, c2])] == [20, 20]


def test_loop_vars_structure_and_lifting():
    g = mg.Graph()
    with g.as_default():
        res = mg.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), [0, 10])
        tup = mg.while_loop(lambda a: a < 5.0, lambda a: (a + 1.0,), (np.float32(0.5),))
        single = mg.while_loop(lambda a: a < 100, lambda a: a * 3, 1)
    assert isinstance(res, list) and isinstance(tup, tuple) and isinstance(single, mg.Symbol)
    out = run(g, [res, tup, single])
    assert [int(v) for v in out[0]] == [20, 20]
    assert float(out[1][0]) == 5.5 and tup[0].dtype == np.float32
    assert int(out[2]) == 243


def test_while_node_format_and_stack():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(), name='x')
        n, y = mg.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), [0, mg.constant(1.0)],
                             name='power')
    node = y.node
    assert node.op == 'while' and len(node.outputs) == 3
    stack = node.outputs[-1]
    assert stack.dtype == np.dtype(object) and stack.name == 'power_stack'
    cg, bg = node.params['cond_graph'], node.params['body_graph']
    assert len(cg.inputs) == len(bg.inputs) == 2 and len(cg.outputs) == 1 and len(bg.outputs) == 2
    assert node.params['name'] == 'power' and node.params['max_iterations'] == mg.core.control.DEFAULT_MAX_ITERATIONS
    # inputs: loop vars, then cond captures (none), then body captures (x)
    assert node.inputs[2] is x and [o for o, _ in bg.captures] == [x] and cg.captures == []
    listing = str(g)
    assert re.search(r'^while, while_1, power_stack = while\(const_1, const, x, cond_graph=<graph 4 nodes>, '
                     r'body_graph=<graph 6 nodes>, max_iterations=100000, name=.power.\)  : '
                     r'int64 \(\), float32 \(\), object \(\)$', listing, re.M)
    assert 'object ()' in listing and 'body_graph:' in listing and 'x_captured' in listing
    saved, final = run(g, [stack, y], {x: 2.0})
    assert float(final) == 8.0
    assert [(int(i), float(v)) for i, v in saved] == [(0, 1.0), (1, 2.0), (2, 4.0)]


def _tape_loop(xv, wv, limit):
    x, w = mg.tensor(xv, requires_grad=True), mg.tensor(wv, requires_grad=True)
    y, steps = x, 0
    while y.sum() < limit:                        # data-dependent number of steps
        y = y * w + 1
        steps += 1
    loss = (y * y).sum()
    loss.backward()
    return steps, y.numpy(), x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize('seed', [0, 1, 2, 3])
def test_while_gradients_match_unrolled_tape(seed):
    r = np.random.default_rng(seed)
    xv, wv = r.uniform(0.1, 1.0, size=3), r.uniform(1.1, 2.0, size=3)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, shape=(3,), name='x')
        w = mg.placeholder(mg.float64, shape=(3,), name='w')
        i, y = mg.while_loop(lambda i, y: y.sum() < 50.0, lambda i, y: (i + 1, y * w + 1), [0, x])
        dx, dw = mg.gradients((y * y).sum(), [x, w])
    assert any(n.op == 'while_grad' for n in g.nodes)
    got = run(g, [i, y, dx, dw], {x: xv, w: wv})
    ref = _tape_loop(xv, wv, 50.0)
    assert int(got[0]) == ref[0] > 1
    for a, b in zip(ref[1:], got[1:]):
        np.testing.assert_allclose(b, a, rtol=1e-10)


def test_while_gradient_zero_iterations_and_matrix_body():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, shape=(2,), name='x')
        A = mg.placeholder(mg.float64, shape=(2, 2), name='A')
        n = mg.placeholder(mg.int64, shape=(), name='n')
        _, y = mg.while_loop(lambda k, v: k < n, lambda k, v: (k + 1, mg.tanh(A @ v)), [0, x])
        dx, dA = mg.gradients(y.sum(), [x, A])
    xv, Av = np.array([0.3, -0.7]), np.array([[0.9, -0.4], [0.2, 1.1]])
    for steps in (0, 1, 4):
        X, M = mg.tensor(xv, requires_grad=True), mg.tensor(Av, requires_grad=True)
        v = X
        for _ in range(steps):
            v = mg.tanh(M @ v)
        (v.sum() + 0 * M.sum()).backward()
        got = run(g, [y, dx, dA], {x: xv, A: Av, n: steps})
        np.testing.assert_allclose(got[0], v.numpy())
        np.testing.assert_allclose(got[1], X.grad.numpy(), rtol=1e-10)
        np.testing.assert_allclose(got[2], M.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_while_with_cond_in_body_and_loop_in_cond():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, shape=(), name='x')
        w = mg.placeholder(mg.float64, shape=(), name='w')
        _, y = mg.while_loop(lambda i, y: i < 5,
                             lambda i, y: (i + 1, mg.cond(y > 2.0, lambda: y * w, lambda: y + w)), (0, x))
        z = mg.cond(x > 0, lambda: mg.while_loop(lambda a: a < 10.0, lambda a: a * w * x, x), lambda: x * 3.0)
        dx, dw = mg.gradients(y + z, [x, w])

    def ref(X, W):
        Y = X
        for _ in range(5):
            Y = Y * W if Y.item() > 2 else Y + W
        Z = X
        if X.item() > 0:
            while Z.item() < 10:
                Z = Z * W * X
        else:
            Z = X * 3
        return Y + Z
    for xv, wv in [(1.5, 1.3), (-0.5, 0.8)]:
        X = mg.tensor(xv, dtype=mg.float64, requires_grad=True)
        W = mg.tensor(wv, dtype=mg.float64, requires_grad=True)
        out = ref(X, W)
        out.backward()
        got = run(g, [y + z, dx, dw], {x: xv, w: wv})
        np.testing.assert_allclose(np.array(got, dtype=float), [out.item(), X.grad.item(), W.grad.item()],
                                   rtol=1e-10)


def test_while_shape_changing_loop_var():
    g = mg.Graph()
    with g.as_default():
        v = mg.while_loop(lambda a: a.sum() < 10.0, lambda a: mg.concatenate([a, a], axis=0),
                          mg.constant(np.ones(1)))
    assert v.shape == (None,)
    assert run(g, v).shape == (16,)


def test_while_eager_is_a_python_loop():
    x = mg.tensor(1.0, requires_grad=True)
    i, y = mg.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2), [mg.tensor(0), x])
    y.backward()
    assert float(y.numpy()) == 8.0 and float(x.grad.numpy()) == 8.0


def test_max_iterations_is_a_clear_error():
    g = mg.Graph()
    with g.as_default():
        k = mg.while_loop(lambda a: a > -1, lambda a: a + 1, 0, max_iterations=7, name='runaway')
    with pytest.raises(MaxIterationsError, match=r"'runaway'.*max_iterations=7.*[Rr]aise max_iterations.*"
                                                 r"condition") as e:
        run(g, k)
    assert isinstance(e.value, mg.MinigradError)
    with pytest.raises(MaxIterationsError):
        mg.while_loop(lambda a: a > -1, lambda a: a + 1, mg.tensor(0), max_iterations=5)


def test_while_errors():
    g = mg.Graph()
    with g.as_default():
        with pytest.raises(mg.GraphError, match='boolean scalar'):
            mg.while_loop(lambda a: a + 1, lambda a: a, 0)
        with pytest.raises(mg.GraphError, match='returns 1 values for 2 loop vars'):
            mg.while_loop(lambda a, b: a < b, lambda a, b: a, [0, 1])
        with pytest.raises(mg.GraphError, match='loop var 0 is int64 but body returns float64'):
            mg.while_loop(lambda a: a < 3, lambda a: a * 1.5, 0)


def test_while_second_derivative_is_a_clear_error():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, shape=(), name='x')
        y = mg.while_loop(lambda a: a < 10.0, lambda a: a * x, mg.constant(1.0, dtype=mg.float64))
        dx, = mg.gradients(y, x)
        with pytest.raises(mg.MinigradError, match='second derivatives through while_loop'):
            mg.gradients(dx, x)


def test_session_runs_control_flow_like_the_interpreter():
    """Session.run (which may use the compiler) must agree with the reference interpreter."""
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.bool_, shape=(), name='p')
        a = mg.placeholder(mg.float32, shape=(2,), name='a')
        y = mg.cond(p, lambda: a * 2.0, lambda: a + 1.0)
        n, z = mg.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * a), [0, a])
        da, = mg.gradients(z.sum() + y.sum(), a)
    feed = {p: True, a: np.array([1.0, 2.0], np.float32)}
    got = mg.Session(g).run([y, n, z, da], feed)
    want = run(g, [y, n, z, da], feed)
    for u, v in zip(got, want):
        assert np.shape(u) == np.shape(v)
        np.testing.assert_allclose(u, v)
    for fetch in (y, z, da):                     # one fetch at a time: smaller graphs, other code paths
        u = mg.Session(g).run(fetch, feed)
        assert np.shape(u) == np.shape(run(g, fetch, feed)), fetch.name


GOLDEN_COND = """\
x = placeholder()  : float32 ()
const = constant(value=0.)  : float32 ()
less = less(const, x)  : bool ()
cond = cond(less, x, true_graph=<graph 3 nodes>, false_graph=<graph 3 nodes>)  : float32 ()
  true_graph:
    x_captured = placeholder(captured=True)  : float32 ()
    const = constant(value=2.)  : float32 ()
    mul = mul(x_captured, const)  : float32 ()
    return mul
  false_graph:
    x_captured = placeholder(captured=True)  : float32 ()
    const = constant(value=-1.)  : float32 ()
    mul = mul(x_captured, const)  : float32 ()
    return mul"""


def test_golden_cond_listing():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(), name='x')
        mg.cond(x > 0, lambda: x * 2.0, lambda: -x)
    assert str(g) == GOLDEN_COND
