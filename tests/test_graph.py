"""Static graphs: Graph, Session, symbolic gradients, errors, golden listings, and
differential tests (eager tape == Session + mg.gradients == mg.trace)."""
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import minigrad as mg
from minigrad import interpreter


# ------------------------------------------------------------------ TF1-style basics
def test_tf1_program():
    g = mg.Graph()
    with g.as_default():
        a = mg.placeholder(mg.float32)
        b = mg.placeholder(mg.float32)
        c = a * b
        da, db = mg.gradients(c, a)[0], mg.gradients(c, b)[0]
    feed = {a: [15.0], b: [20.0]}
    with mg.Session(g) as sess:
        assert sess.run([c], feed_dict=feed)[0][0] == 300.0
        assert sess.run([da], feed_dict=feed)[0][0] == 20.0
        assert sess.run([db], feed_dict=feed)[0][0] == 15.0


def test_tf1_program_default_graph():
    mg.reset_default_graph()
    a = mg.placeholder(mg.float32)
    b = mg.placeholder(mg.float32)
    c = a * b
    sess = mg.Session()
    feed = {a: [15.0], b: [20.0]}
    assert sess.run([c], feed_dict=feed)[0][0] == 300.0
    assert sess.run(mg.gradients(c, a), feed_dict=feed)[0][0] == 20.0
    assert sess.run(mg.gradients(c, b), feed_dict=feed)[0][0] == 15.0
    assert a.graph is mg.get_default_graph()
    g2 = mg.reset_default_graph()
    assert g2 is mg.get_default_graph() and g2 is not a.graph and len(g2.nodes) == 0


def test_as_default_nests_and_restores():
    g1, g2 = mg.Graph(), mg.Graph()
    with g1.as_default():
        with g2.as_default():
            assert mg.get_default_graph() is g2
        assert mg.get_default_graph() is g1
        x = mg.placeholder()
    assert x.graph is g1 and g1.placeholders == [x]


def test_static_shapes_and_dtypes():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(None, 3), name='x')
        w = mg.Variable(np.ones((3, 2), np.float32), name='w')
        y = x @ w
        s = y.sum(axis=1)
        u = mg.placeholder(mg.float64)
        i = mg.constant([1, 2])
    assert (y.shape, y.dtype) == ((None, 2), np.float32)
    assert s.shape == (None,) and s.op == 'sum'
    assert u.shape is None and (u * 2).shape is None
    assert i.dtype == np.int64 and (i * 2).dtype == np.int64
    assert (x > 0).dtype == np.bool_
    with pytest.raises(mg.ShapeError, match='inner dimensions'):
        with g.as_default():
            x @ mg.constant(np.ones((4, 2), np.float32))


def test_only_needed_subgraph_runs():
    g = mg.Graph()
    with g.as_default():
        a = mg.placeholder(name='a')
        b = mg.placeholder(name='b')
        c = a * 2
        d = b + 1
    sess = mg.Session(g)
    assert float(sess.run(c, {a: 3.0})) == 6.0          # b is not needed, not fed
    assert [n.op for n in interpreter.needed_nodes(g, [c])] == ['placeholder', 'constant', 'mul']


def test_nested_fetches():
    g = mg.Graph()
    with g.as_default():
        a = mg.placeholder(name='a')
        b = a * 2
        c = a + 1
    out = mg.Session(g).run({'x': b, 'pair': (b, [c])}, {a: np.array([1.0, 2.0])})
    assert set(out) == {'x', 'pair'} and isinstance(out['pair'], tuple) and isinstance(out['pair'][1], list)
    np.testing.assert_allclose(out['pair'][1][0], [2.0, 3.0])
    assert isinstance(out['x'], np.ndarray)


def test_variables_keep_state_per_session():
    g = mg.Graph()
    with g.as_default():
        v = mg.Variable(1.0, name='v')
        inc = v.assign(v + 1)
    s1 = mg.Session(g)
    s1.run(inc)
    s1.run(inc)
    assert float(s1.run(v)) == 3.0
    assert float(mg.Session(g).run(v)) == 1.0                  # a new session starts from initial_value
    assert float(s1.run(v)) == 3.0


def test_verify_catches_bad_node():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(2, 3), name='x')
        y = x.sum(axis=0)
    g.verify()
    y.shape = (7,)                          # corrupt the recorded shape
    with pytest.raises(mg.GraphError, match=r'verify: .*sum.*\(7,\)'):
        g.verify()


def test_verify_catches_undefined_input():
    g, h = mg.Graph(), mg.Graph()
    with h.as_default():
        z = mg.placeholder(name='z')
    with g.as_default():
        x = mg.placeholder(name='x')
        y = x + 1
    y.node.inputs[0] = z
    with pytest.raises(mg.GraphError, match="'z'.*not defined"):
        g.verify()


# ------------------------------------------------------------------ golden listings
GOLDEN_MUL = """\
a = placeholder()  : float32 ?
b = placeholder()  : float32 ?
mul = mul(a, b)  : float32 ?"""

GOLDEN_GRAD = """\
x = placeholder()  : float32 (?, 3)
w = variable(initial_value=[[1.], [2.], [3.]])  : float32 (3, 1)
matmul = matmul(x, w)  : float32 (?, 1)
sum = sum(matmul, axis=None, keepdims=False)  : float32 ()
const = constant(value=1.)  : float32 ()
broadcast_like = broadcast_like(const, matmul, axes=(0, 1))  : float32 (?, 1)
transpose = transpose(x, axes=(1, 0))  : float32 (3, ?)
matmul_1 = matmul(transpose, broadcast_like)  : float32 (3, 1)"""


def test_golden_mul():
    g = mg.Graph()
    with g.as_default():
        a = mg.placeholder(mg.float32, name='a')
        b = mg.placeholder(mg.float32, name='b')
        a * b
    assert str(g) == GOLDEN_MUL


def test_golden_gradient_listing():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(None, 3), name='x')
        w = mg.Variable([[1.0], [2.0], [3.0]], name='w')
        y = (x @ w).sum()
        dw, = mg.gradients(y, [w])
    assert str(g) == GOLDEN_GRAD
    assert dw.name == 'matmul_1' and dw.shape == (3, 1)     # (3, 1) like w: no sum_to_like after it
    np.testing.assert_allclose(mg.Session(g).run(dw, {x: np.ones((2, 3))}), [[2.0]] * 3)


def test_gradients_add_sum_to_like_only_where_a_shape_differs_or_is_unknown():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, (2, 3), name='x')
        b = mg.placeholder(mg.float64, (3,), name='b')
        u = mg.placeholder(mg.float64, (None, 3), name='u')
        s = mg.placeholder(mg.float64, (), name='s')
        dx, db, du, ds = mg.gradients((x * b).sum() + (u * u).sum() + s * s, [x, b, u, s])
    assert dx.node.op == 'mul'                  # (2, 3) like x: nothing to undo
    assert [i.node.op for i in ds.node.inputs] == ['mul', 'mul']    # a scalar: nor here
    assert db.node.op == 'sum_to_like'          # b was broadcast over x's rows
    assert [i.node.op for i in du.node.inputs] == ['sum_to_like', 'sum_to_like']   # u's rows: unknown
    xv, bv, uv = np.arange(6.0).reshape(2, 3), np.array([1.0, -2.0, 0.5]), np.ones((4, 3))
    got = mg.Session(g).run([dx, db, du, ds], {x: xv, b: bv, u: uv, s: 3.0})
    for a, want in zip(got, [np.broadcast_to(bv, (2, 3)), xv.sum(0), 2 * uv, 6.0]):
        np.testing.assert_array_equal(a, want)


# ------------------------------------------------------------------ symbolic gradients
def test_unreached_x_gets_zero_gradient():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(2, 3))
        z = mg.placeholder(mg.float32, shape=(4,))
        y = (x * x).sum()
        dx, dz = mg.gradients(y, [x, z])
    assert dz.shape == (4,)
    out = mg.Session(g).run([dx, dz], {x: np.ones((2, 3)), z: np.ones(4)})
    np.testing.assert_allclose(out[1], np.zeros(4))
    assert 'zero' in mg.gradients.__doc__


def test_second_derivative_and_grad_ys():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, shape=(3,))
        y = (x ** 3).sum()
        dx, = mg.gradients(y, x)
        d2, = mg.gradients(dx, x)                    # sum of the gradient: 6x
        gy, = mg.gradients(x * 2, x, grad_ys=mg.constant(np.array([1.0, 2.0, 3.0])))
    xv = np.array([1.0, 2.0, 3.0])
    r = mg.Session(g).run([dx, d2, gy], {x: xv})
    np.testing.assert_allclose(r[0], 3 * xv ** 2)
    np.testing.assert_allclose(r[1], 6 * xv)
    np.testing.assert_allclose(r[2], [2.0, 4.0, 6.0])


def test_gradients_appends_to_same_graph():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32)
        y = mg.exp(x)
    n = len(g.nodes)
    dx, = mg.gradients(y, [x])
    assert dx.graph is g and len(g.nodes) > n and g.verify() is g


# ------------------------------------------------------------------ errors
def test_feed_missing_placeholder_names_it_and_the_fetch():
    g = mg.Graph()
    with g.as_default():
        a = mg.placeholder(name='a')
        b = mg.placeholder(name='b')
        c = mg.multiply(a, 2.0)
        d = b + 1
    with pytest.raises(mg.FeedError, match=r"placeholder 'a'.*fetch 'mul'.*feed_dict"):
        mg.Session(g).run([c, d], {b: 1.0})


def test_feed_wrong_shape_and_dtype():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(None, 3), name='x')
        i = mg.placeholder(mg.int64, shape=(), name='i')
        y = x * 2
    sess = mg.Session(g)
    with pytest.raises(mg.FeedError, match=r"shape \(2, 4\).*'x'.*\(\?, 3\)"):
        sess.run(y, {x: np.ones((2, 4))})
    with pytest.raises(mg.FeedError, match=r"'i'.*float64.*int64"):
        sess.run(i, {i: 1.5})


def test_feed_non_placeholder_and_foreign_fetch():
    g, h = mg.Graph(), mg.Graph()
    with g.as_default():
        x = mg.placeholder(name='x')
        y = x * 2
    with h.as_default():
        z = mg.placeholder(name='z')
    sess = mg.Session(g)
    with pytest.raises(mg.FeedError, match="'mul'.*only placeholders"):
        sess.run(y, {y: 1.0})
    with pytest.raises(mg.FeedError, match="not a Symbol"):
        sess.run(y, {'x': 1.0})
    with pytest.raises(mg.FeedError, match="fetch 'z' belongs to another graph"):
        sess.run(z)


def test_mixing_graphs_and_tensors_is_a_graph_error():
    g, h = mg.Graph(), mg.Graph()
    with g.as_default():
        x = mg.placeholder(name='x')
    with h.as_default():
        z = mg.placeholder(name='z')
    with pytest.raises(mg.GraphError, match="'x'.*'z'.*different graphs"):
        x + z
    t = mg.tensor([1.0, 2.0], name='t')
    with pytest.raises(mg.GraphError, match=r"Tensor 't'.*eager.*Symbol 'x'.*mg.constant"):
        x * t
    with pytest.raises(mg.GraphError, match="mg.constant"):
        t * x


def test_symbol_has_no_value():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(name='x')
    for f in (bool, lambda s: s.item(), lambda s: s.numpy(), float):
        with pytest.raises(mg.TraceError, match=r'Session.run|sess.run') as e:
            f(x)
        assert 'mg.cond' in str(e.value) and 'mg.while_loop' in str(e.value)


# ------------------------------------------------------------------ differential tests
SHAPE = (2, 3)


def _ops(M):
    """Program steps on values of shape (2, 3); M is the namespace (mg), the same for tensors and symbols."""
    return [
        lambda a, b: a * b + a,
        lambda a, b: a - b * 2.0,
        lambda a, b: a / (b * b + 1.0),
        lambda a, b: M.tanh(a) * M.sin(b),
        lambda a, b: M.exp(-a * a) + M.log(b * b + 1.0),
        lambda a, b: a.sum(axis=0) * b,                         # reduce + broadcast back
        lambda a, b: a.max(axis=1, keepdims=True) + b,
        lambda a, b: M.maximum(a, b) + M.relu(a),
        lambda a, b: (a @ b.T) @ a,                             # matmul
        lambda a, b: a[0] * b + M.concatenate([a[1:], a[:1]], axis=0),   # indexing
        lambda a, b: a[np.array([1, 0])] * b,                   # fancy index -> scatter_add
        lambda a, b: M.softmax(a, axis=1) * b + a.mean(),
        lambda a, b: M.cond((a * b).sum() > 0, lambda: a * b, lambda: a - b),
        lambda a, b: M.sigmoid(a) + M.where(a > b, a, b * 0.5),
    ]


SMOOTH = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12]     # twice differentiable almost everywhere, no kinks


def _program(steps):
    ops = _ops(mg)

    def f(x, y):
        vals = [x, y]
        for k, i, j in steps:
            vals.append(ops[k](vals[i % len(vals)], vals[j % len(vals)]))
        return (vals[-1] * vals[-1]).sum() + vals[-1].sum()
    return f


def _arrays(seed):
    r = np.random.default_rng(seed)
    return r.normal(size=SHAPE), r.normal(size=SHAPE)


def _eager(f, xv, yv):
    x, y = mg.tensor(xv, requires_grad=True), mg.tensor(yv, requires_grad=True)
    out = f(x, y)
    out.backward()
    return [out.numpy()] + [t.grad.numpy() if t.grad is not None else np.zeros(SHAPE) for t in (x, y)]


def _static(f, xv, yv):
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, SHAPE, name='x')
        y = mg.placeholder(mg.float64, SHAPE, name='y')
        out = f(x, y)
        dx, dy = mg.gradients(out, [x, y])
    g.verify()
    return mg.Session(g).run([out, dx, dy], {x: xv, y: yv})


def _traced(f, xv, yv):
    t = mg.trace(f, xv, yv)
    with t.graph.as_default():
        grads = mg.gradients(t.outputs[0], t.inputs)
    vals = mg.Session(t.graph).run([t.outputs[0]] + grads, {t.inputs[0]: xv, t.inputs[1]: yv})
    np.testing.assert_allclose(t(xv, yv), vals[0], rtol=1e-10)
    return vals


steps_st = st.lists(st.tuples(st.integers(0, len(_ops(mg)) - 1), st.integers(0, 9), st.integers(0, 9)),
                    min_size=1, max_size=4)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps_st, seed=st.integers(0, 2 ** 16))
def test_modes_agree_values_and_gradients(steps, seed):
    f = _program(steps)
    xv, yv = _arrays(seed)
    ref = _eager(f, xv, yv)
    for got in (_static(f, xv, yv), _traced(f, xv, yv)):
        for a, b in zip(ref, got):
            np.testing.assert_allclose(b, a, rtol=1e-7, atol=1e-9)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(SMOOTH), st.integers(0, 9), st.integers(0, 9)),
                      min_size=1, max_size=3),
       seed=st.integers(0, 2 ** 16))
def test_second_derivatives_tape_vs_symbolic(steps, seed):
    f = _program(steps)
    xv, yv = _arrays(seed)
    v = np.random.default_rng(seed + 1).normal(size=SHAPE)
    # tape: d/dx sum(v * df/dx)
    x, y = mg.tensor(xv, requires_grad=True), mg.tensor(yv, requires_grad=True)
    out = f(x, y)
    out.backward(create_graph=True)
    gx = x.grad
    x.grad = y.grad = None
    if gx is not None and gx.requires_grad:
        (gx * mg.tensor(v)).sum().backward()
    ref = [t.grad.numpy() if t.grad is not None else np.zeros(SHAPE) for t in (x, y)]
    # symbolic: gradients of gradients
    g = mg.Graph()
    with g.as_default():
        xs = mg.placeholder(mg.float64, SHAPE, name='x')
        ys = mg.placeholder(mg.float64, SHAPE, name='y')
        dx, = mg.gradients(f(xs, ys), [xs])
        hv = mg.gradients((dx * mg.constant(v)).sum(), [xs, ys])
    got = mg.Session(g).run(hv, {xs: xv, ys: yv})
    for a, b in zip(ref, got):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-8)


def test_gradients_of_a_full_reduction_of_a_placeholder_without_a_shape():
    """issue 31: mg.gradients raised a raw TypeError (no shape is the default)."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32)
        grads = [mg.gradients(y, [x])[0] for y in (x.sum(), x.max(), (x * x).mean())]
    xs = np.array([[1., 5.], [3., 2.]], np.float32)
    got = mg.Session(g).run(grads, {x: xs})
    np.testing.assert_array_equal(got[0], np.ones((2, 2)))
    np.testing.assert_array_equal(got[1], [[0, 1], [0, 0]])
    np.testing.assert_allclose(got[2], xs / 2)


def test_gradients_checks_grad_ys_and_casts_it():
    """issue 31: grad_ys was never checked against the y it seeds."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = x * 2.0
        gx, = mg.gradients(y, [x], grad_ys=np.array([1, 2, 3]))       # ints: cast to float32
        for bad in (np.ones(4), np.ones((3, 1))):
            with pytest.raises(mg.GraphError, match=r"grad_ys for 'mul' has shape .* but 'mul' has shape \(3,\)"):
                mg.gradients(y, [x], grad_ys=bad)
        with pytest.raises(mg.GraphError, match='2 grad_ys for 1 ys'):
            mg.gradients([y], [x], grad_ys=[None, None])
    assert gx.dtype == np.float32
    np.testing.assert_array_equal(mg.Session(g).run(gx, {x: np.ones(3)}), [2, 4, 6])


def test_feeding_a_variable_whose_assign_is_fetched_reads_the_fed_value():
    """issue 31: this failed inside generated code. TF1's meaning: the step reads the fed value, and
    the assign still updates the Variable."""
    g = mg.Graph()
    with g.as_default():
        v, w = mg.Variable(np.array([1., 2.]), name='v'), mg.Variable(np.zeros(2), name='w')
        up, read, other = v.assign(v * 2.0 + 1.0), v + 0.5, w.assign(v * 3.0)
    sess = mg.Session(g)
    got = sess.run([up, read, other], {v: np.array([10., 20.])})
    np.testing.assert_array_equal(got, [[21., 41.], [10.5, 20.5], [30., 60.]])
    np.testing.assert_array_equal(sess.run([v, w]), [[21., 41.], [30., 60.]])
    np.testing.assert_array_equal(sess.run(up), [43., 83.])        # unfed: the Variable's own value


def test_gradients_make_one_constant_per_value_and_leave_the_users_constants_alone():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = (mg.tanh(x) * 2.0).sum() + mg.tanh(x * 2.0).sum()
        users = [n for n in g.nodes if n.op == 'constant']
        start = len(g.nodes)
        dx, = mg.gradients(y, [x])
        made = [n.params['value'].item() for n in g.nodes[start:] if n.op == 'constant']
        after = x * 2.0                         # outside mg.gradients: a constant of its own again
    assert len(users) == 2 and sorted(made) == [-1.0, 1.0]     # two tanh VJPs share their 1 and -1
    assert after.node.inputs[1].node is g.nodes[-2] and g.nodes[-2].op == 'constant'
    xv = np.array([0.1, -0.5, 2.0], np.float32)
    want = 2 * (1 - np.tanh(xv) ** 2) + 2 * (1 - np.tanh(2 * xv) ** 2)
    np.testing.assert_allclose(mg.Session(g).run(dx, {x: xv}), want, rtol=1e-6)


def test_a_failed_gradients_call_leaves_constants_as_they_were():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = mg.tanh(x).sum()
        n = len(g.nodes)
        with pytest.raises(mg.MinigradError):
            mg.gradients(y, [x], grad_ys=[np.ones(4)])
        assert len(g.nodes) == n
        c1, c2 = (x + 1.0).node.inputs[1], (x + 1.0).node.inputs[1]
    assert c1 is not c2                          # no scalar cache left behind by the failed call


# ------------------------------------------------------------------ assign's rules, as TF1's
def _grad_through_assign(v, p):
    loss = (v.assign(v * 3.0) ** 2.0).sum()
    return lambda: mg.gradients(loss, [v])


def _float_into_int(v, p):
    k = mg.Variable(np.int64([1, 2]), name='k')
    return lambda: k.assign(v)


@pytest.mark.parametrize('build, err, match', [
    (_grad_through_assign, mg.GraphError, r"'v_assign' is the result of assigning Variable 'v', which has no gradient"),
    (lambda v, p: lambda: v.assign(np.float64([1e40, 1.0])), mg.ShapeError, 'float64.*float32 without loss'),
    (_float_into_int, mg.ShapeError, 'float32.*int64 without loss'),
    (lambda v, p: (lambda c: lambda: mg.cond(c, lambda: v.assign(v + 1.0), lambda: v))(p > 0), mg.GraphError,
     r"assigned in a mg.cond / while_loop body.*v.assign\(mg.cond"),
    (lambda v, p: lambda: mg.while_loop(lambda i: i < 3.0, lambda i: (v.assign(v + i), i + 1.0)[1], [p]),
     mg.GraphError, 'assigned in a mg.cond / while_loop body')],
    ids=['no_gradient', 'float64_into_float32', 'float_into_int', 'in_cond', 'in_while_loop'])
def test_assign_refusals_leave_the_graph_as_it_was(build, err, match):
    """No gradient through an assign (TF1's Assign has none; it was a silent 0), one dtype rule (numpy's safe
    casting: float64 into float32 narrowed 1e40 to inf silently), no assign inside a body (it raised that a
    Symbol 'belongs to another graph', or ran unconditionally outside the branch)."""
    g = mg.Graph()
    with g.as_default():
        v, p = mg.Variable(np.float32([1, 2]), name='v'), mg.placeholder(mg.float32, (), name='p')
        refused = build(v, p)
        n = len(g.nodes)
        with pytest.raises(err, match=match):
            refused()
        assert len(g.nodes) == n
        step = mg.Variable(np.zeros(2), name='wide').assign(v * 2.0)      # float32 fits into float64
    assert mg.Session(g).run(step).dtype == np.float64
