"""mg.export_onnx / mg.import_onnx: checker, onnxruntime equality on five models, round trips, errors."""
import copy
import io

import numpy as np
import pytest

import minigrad as mg

onnx = pytest.importorskip('onnx')
ort = pytest.importorskip('onnxruntime')


ort.set_default_logger_severity(3)      # no warnings about initializers only the unfetched nodes use


def run_ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=['CPUExecutionProvider'])
    return sess.run(None, feeds)


def check(model, feeds, expected):
    onnx.checker.check_model(model, full_check=True)
    for got, want in zip(run_ort(model, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def roundtrip(model, feeds, expected):
    h = mg.import_onnx(model)
    got = mg.Session(h).run(h.outputs, {p: feeds[p.name] for p in h.inputs})
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def linear():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (None, 3), name='x')
        w = mg.Variable(np.float32([1, 2, 3]), name='w')
        y = w * x + mg.constant(0.5, name='b')
    return g, x, y


def test_linear_checker_ort_and_round_trip(tmp_path):
    g, x, y = linear()
    xv = np.random.default_rng(0).random((4, 3), dtype=np.float32)
    want = [mg.Session(g).run(y, {x: xv})]
    m = mg.export_onnx(y, tmp_path / 'lin.onnx', inputs=[x])
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == 'batch'
    assert {t.name for t in m.graph.initializer} >= {'w', 'b'}
    check(onnx.load(tmp_path / 'lin.onnx'), {'x': xv}, want)
    roundtrip(m, {'x': xv}, want)
    buf = io.BytesIO()
    mg.export_onnx(y, buf, inputs=[x])
    buf.seek(0)
    h = mg.import_onnx(buf)                 # from a binary file object
    np.testing.assert_allclose(mg.Session(h).run(h.outputs[0], {h.inputs[0]: xv}), want[0], rtol=1e-6)


def test_counter_while_loop():
    g = mg.Graph()
    with g.as_default():
        a = mg.placeholder(mg.int64, (), name='first'); b = mg.placeholder(mg.int64, (), name='second')
        out = mg.while_loop(lambda i, j: mg.less(i, j), lambda i, j: (i + 2, j + 1), [a, b])
    feeds = {'first': np.int64(0), 'second': np.int64(10)}
    want = mg.Session(g).run(list(out), {a: feeds['first'], b: feeds['second']})
    assert [int(v) for v in want] == [20, 20]
    m = mg.export_onnx(list(out), io.BytesIO(), inputs=[a, b])
    assert 'Loop' in [n.op_type for n in m.graph.node]
    check(m, {k: np.array(v) for k, v in feeds.items()}, want)
    roundtrip(m, feeds, want)               # Loop -> while_loop over (iteration, condition, *vars)


def test_while_loop_exports_its_trip_count_and_says_so():
    """A Loop without a trip count looped for ever where minigrad raises MaxIterationsError: ONNX cannot
    raise, so the Loop stops at max_iterations, and export warns."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.int64, (), name='x')
        y = mg.while_loop(lambda i: i >= 0, lambda i: i + 1, x, max_iterations=7)     # never ends by itself
    with pytest.raises(mg.MaxIterationsError):
        mg.Session(g).run(y, {x: 0})
    with pytest.warns(UserWarning, match='trip count max_iterations=7.*stops after 7 iterations'):
        m = mg.to_onnx(y, inputs=[x])
    check(m, {'x': np.array(0)}, [np.array(7)])
    roundtrip(m, {'x': np.array(0)}, [np.array(7)])


def test_cond():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = mg.cond(mg.greater(mg.sum(x), 0.0), lambda: x * 2.0, lambda: mg.exp(x))
    m = mg.export_onnx(y, io.BytesIO(), inputs=[x])
    assert 'If' in [n.op_type for n in m.graph.node]
    for xv in (np.float32([1, 2, 3]), np.float32([-1, -2, 0.5])):
        check(m, {'x': xv}, [mg.Session(g).run(y, {x: xv})])
        roundtrip(m, {'x': xv}, [mg.Session(g).run(y, {x: xv})])      # If -> cond


def test_trained_mlp_module_and_compiled_program():
    mg.manual_seed(0)
    net = mg.nn.Sequential(mg.nn.Linear(4, 8), mg.nn.ReLU(), mg.nn.Linear(8, 2))
    opt = mg.optim.SGD(net.parameters(), lr=0.1)
    X, T = mg.randn(16, 4), mg.randn(16, 2)
    for _ in range(3):
        opt.zero_grad(); loss = ((net(X) - T) ** 2).mean(); loss.backward(); opt.step()
    xv = X.numpy()
    want = [net(X).numpy()]
    m = mg.export_onnx(net, io.BytesIO(), example_inputs=[xv])
    check(m, {m.graph.input[0].name: xv}, want)
    roundtrip(m, {m.graph.input[0].name: xv}, want)
    traced = mg.trace(net, xv)
    prog = mg.compile(traced.outputs, traced.inputs)
    check(mg.export_onnx(prog, io.BytesIO()), {prog.inputs[0].name: xv}, want)


def test_export_writes_the_values_the_graph_holds_now():
    """Variables are written with the values of the Session or Program named by session= (they were written
    with their initial values); without one, export refuses initial values a run has changed since. A
    Program exports its own state, a traced function its Parameters' current data."""
    g, x, y = linear()                                          # w = [1, 2, 3], y = w * x + 0.5
    w = g.variables[0]
    with g.as_default():
        halve = w.assign(w * 0.5)
    sess, prog, xv = mg.Session(g), mg.compile([halve], []), np.float32([[1, 1, 1]])
    sess.run(halve)
    with pytest.raises(mg.MinigradError, match=r"Variable 'w' has been changed by a Session.*pass session="):
        mg.to_onnx(y, inputs=[x])
    prog(), prog()
    for holder, scale in ((sess, 0.5), (prog, 0.25), (mg.Session(g), 1.0)):
        check(mg.to_onnx(y, inputs=[x], session=holder), {'x': xv}, [np.float32([[1, 2, 3]]) * scale + 0.5])
    pred = mg.compile(y, [x])
    pred.state[0] = np.float32([3, 3, 3])
    check(mg.to_onnx(pred), {'x': xv}, [pred(xv)])
    net = mg.nn.Linear(3, 2)
    traced = mg.trace(net, xv)
    net.weight.data = net.weight.data * 2.0                      # trained further after tracing
    check(mg.to_onnx(traced), {'x': xv}, [traced(xv)])
    sess.close()
    with pytest.raises(mg.MinigradError, match='session= is closed'):
        mg.to_onnx(y, inputs=[x], session=sess)


def test_dynamic_net_is_frozen_at_the_traced_depth():
    mg.manual_seed(1)
    net = mg.nn.DynamicNet(3, 5, 2)
    xv = np.random.default_rng(1).random((4, 3), dtype=np.float32)
    for depth in (0, 2):
        m = mg.export_onnx(lambda x: net(x, depth=depth), io.BytesIO(), example_inputs=[xv])
        matmuls = [n for n in m.graph.node if n.op_type == 'MatMul']
        assert len(matmuls) == 2 + depth        # the Python loop is unrolled at export time
        check(m, {m.graph.input[0].name: xv}, [net(mg.tensor(xv), depth=depth).numpy()])


def test_assign_and_bad_input_raise_named_errors():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        v = mg.Variable(np.zeros(3, np.float32), name='v')
        up = v.assign(x)
    with pytest.raises(mg.MinigradError, match='assign'):
        mg.export_onnx(up, io.BytesIO(), inputs=[x])
    with pytest.raises(mg.MinigradError, match='placeholder'):
        mg.export_onnx(x * 2.0, io.BytesIO(), inputs=[v])
    with pytest.raises(mg.MinigradError, match="'x'"):
        mg.export_onnx(x * 2.0, io.BytesIO(), inputs=[])
    with pytest.raises(mg.MinigradError, match='example_inputs'):
        mg.export_onnx(lambda t: t, io.BytesIO())


def test_while_loop_gradient_stack_raises_naming_the_node():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (), name='x')
        _, y = mg.while_loop(lambda i, v: mg.less(i, 3.0), lambda i, v: (i + 1.0, v * x), [mg.constant(0.0), x])
        gx, = mg.gradients(y, [x])
    with pytest.raises(mg.MinigradError, match='gradient stack'):
        mg.export_onnx(gx, io.BytesIO(), inputs=[x])


def lowered(fn, shape, xv, dims=None):
    """fn(x) for a placeholder x of shape `dims` (default `shape`): checker, onnxruntime, round trip."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(xv.dtype, dims or shape, name='x')
        y = fn(x)
    want = [mg.Session(g).run(y, {x: xv})]
    m = mg.to_onnx(y, inputs=[x])
    check(m, {'x': xv}, want)
    assert run_ort(m, {'x': xv})[0].shape == want[0].shape
    roundtrip(m, {'x': xv}, want)
    return [n.op_type for n in m.graph.node]


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
BASIC = [(1,), (-1,), (slice(None, None, -1),), (slice(None), slice(2, None, -1)), (Ellipsis, -1),
         (None, 0, Ellipsis, None), (slice(1, -5, -1), slice(0, 3, 2), slice(-3, None)), (slice(None), -2, None),
         (slice(None), np.array([2, -1, 0, 2])), (Ellipsis, np.array([[0, 1], [-1, 3]])),      # Gather:
         (slice(None), np.array([True, False, True]))]                   # a 1-D mask too
FLAT = [(np.array([1, 0, 1]), slice(None), np.array([0, 3, -1])), (0, slice(None), np.array([1, 1])),
        (X[..., 0] > 5,), (np.array([True, False]), None, np.array([2, 0]))]


@pytest.mark.parametrize('idx, flat', [(i, False) for i in BASIC] + [(i, True) for i in FLAT], ids=repr)
def test_getitem_and_its_gradient_scatter_add(idx, flat):
    ops = lowered(lambda x: x[idx], X.shape, X)
    assert ('Gather' in ops) == any(isinstance(i, np.ndarray) for i in idx)
    assert ('Reshape' in ops) == flat                           # flat positions of the known shape
    ops = lowered(lambda x: mg.gradients((x[idx] * x[idx]).sum(), [x])[0], X.shape, X)
    assert 'ScatterElements' in ops
    if not flat:                                                 # Slice/Squeeze/Unsqueeze/Gather need no shape
        lowered(lambda x: x[idx], X.shape, X, dims=(None, None, 4))


def test_scatter_add_accumulates_repeated_and_negative_indices():
    idx = (np.array([1, 1, -1, 0]), np.array([2, 2, 2, -3]), np.array([0, 0, 3, 3]))
    lowered(lambda x: mg.ops.scatter_add(x[0, 0], x, idx=idx), X.shape, X)
    lowered(lambda x: mg.ops.scatter_add(x[0, 0], x[0], idx=(slice(None), np.array([1, 1, -1, 1]))), X.shape, X)


@pytest.mark.parametrize('ref, dims, run_time', [
    (lambda x: mg.constant(np.ones((1, 4))), None, False),                 # float64: a Cast too
    (lambda x: mg.constant(np.ones((3, 4), np.float32)), (None, 3, 4), False),
    (lambda x: x[:, :1], (None, None, 4), True), (lambda x: x[0, :, :1], (None, 3, None), True),
    (lambda x: x, (None, 3, 4), True)], ids=['cast', 'lead', 'ones', 'lead_ones', 'same'])
def test_sum_to_like_static_and_run_time_axes(ref, dims, run_time):
    ops = lowered(lambda x: mg.ops.sum_to_like(x, ref(x)), X.shape, X, dims)
    assert ('NonZero' in ops) == run_time          # ref's shape unknown: the axes come from Shape(ref)


def test_like_patterns_round_trip():
    lowered(lambda x: mg.ops.broadcast_like(x.sum(axis=(0, 2)), x, axes=(0, 2)), X.shape, X, (None, 3, None))
    lowered(lambda x: mg.ops.reshape_like(x.reshape(-1), x) + mg.mean(x), X.shape, X, (None, 3, None))


def test_reshape_gradient_with_an_empty_dim():
    """reshape_like reads Shape(ref) = (0, 4): Reshape needs allowzero=1, or ONNX copies the dim a 0 marks."""
    ops = lowered(lambda x: mg.gradients(mg.sum(mg.reshape(x, (4, 0)) * 2.0), [x])[0], (0, 4),
                  np.zeros((0, 4), np.float32))
    assert 'Reshape' in ops


def test_gradient_graph_of_an_mlp_round_trips():
    rng = np.random.default_rng(0)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (None, 4), name='x'); t = mg.placeholder(mg.float32, (None, 2), name='t')
        w1 = mg.Variable(rng.standard_normal((4, 8)).astype(np.float32), name='w1')
        b1 = mg.Variable(np.zeros(8, np.float32), name='b1')
        w2 = mg.Variable(rng.standard_normal((8, 2)).astype(np.float32), name='w2')
        loss = mg.mean((mg.relu(x @ w1 + b1) @ w2 - t) ** 2)
        grads = mg.gradients(loss, [w1, b1, w2])
    feeds = {'x': rng.random((5, 4), dtype=np.float32), 't': rng.random((5, 2), dtype=np.float32)}
    want = mg.Session(g).run(grads, {x: feeds['x'], t: feeds['t']})
    m = mg.to_onnx(grads, inputs=[x, t])
    check(m, feeds, want)
    roundtrip(m, feeds, want)


def test_unlowerable_index_and_unknown_op_raise_named_errors():
    for fn, op in ((lambda x: x[np.array([0, 1]), np.array([2, 2])], 'getitem'),
                   (lambda x: mg.gradients(x[:, 0].sum(), [x])[0], 'scatter_add')):
        with mg.Graph().as_default():
            x = mg.placeholder(mg.float32, (None, 3), name='x')
            y = fn(x)
        with pytest.raises(mg.MinigradError, match=rf"'{op}\S*' \({op}\).*needs a known input shape, got \(None, 3\)"):
            mg.to_onnx(y, inputs=[x])
    with mg.Graph().as_default():
        x = mg.placeholder(mg.float32, None, name='x')
        y = x[..., 0]
    with pytest.raises(mg.MinigradError, match=r"'getitem' \(getitem\).*needs the input rank"):
        mg.to_onnx(y, inputs=[x])
    h = onnx.helper
    node = h.make_node('Hardmax', ['a'], ['b'], name='sm')
    vi = h.make_tensor_value_info('a', onnx.TensorProto.FLOAT, [3])
    m = h.make_model(h.make_graph([node], 'g', [vi], [h.make_tensor_value_info('b', onnx.TensorProto.FLOAT, [3])]))
    with pytest.raises(mg.MinigradError, match=r"'sm' \(Hardmax\)"):
        mg.import_onnx(m)


def test_import_loop_with_a_trip_count():
    """A Loop written by another tool: trip count M and a body that never ends the loop itself."""
    h, T = onnx.helper, onnx.TensorProto
    vi = h.make_tensor_value_info
    body = h.make_graph([h.make_node('Identity', ['c'], ['c_out']), h.make_node('Mul', ['v', 'two'], ['v_out'])],
                        'body', [vi('i', T.INT64, []), vi('c', T.BOOL, []), vi('v', T.FLOAT, [2])],
                        [vi('c_out', T.BOOL, []), vi('v_out', T.FLOAT, [2])],
                        [onnx.numpy_helper.from_array(np.float32(2), 'two')])
    loop = h.make_node('Loop', ['M', '', 'v0'], ['v_final'], body=body)
    g = h.make_graph([loop], 'g', [vi('v0', T.FLOAT, [2])], [vi('v_final', T.FLOAT, [2])],
                     [onnx.numpy_helper.from_array(np.int64(5), 'M')])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 18)])
    m.ir_version = 10
    check(m, {'v0': np.float32([1, 3])}, [np.float32([32, 96])])
    roundtrip(m, {'v0': np.float32([1, 3])}, [np.float32([32, 96])])


# ------------------------------------------------------------------ issue 35: export correctness
SPECIAL = np.float32([[np.nan, 2.0, -np.inf, -0.0], [np.inf, -1.5, 0.0, 3.0], [-2.0, 0.5, 1.0, -0.25]])


def exported(fn, xv, dims=None, **kw):
    """fn(x) on a placeholder x: the checked model and minigrad's value on xv (Session)."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(xv.dtype, dims or xv.shape, name='x')
        y = fn(x)
    m = mg.to_onnx(y, inputs=[x], **kw)
    onnx.checker.check_model(m, full_check=True)
    return m, mg.Session(g).run(y, {x: xv})


def same(got, want, signs=False):
    """Equal values, nan where nan, and (`signs`) the sign of zero: onnxruntime's Where(True, -0.0, y)
    gives +0.0, so the sign of zero is only compared where no Where decides it."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    if signs:
        np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0]))


COMPOSITES = {
    'softmax': lambda x: mg.softmax(x, axis=-1), 'softmax0': lambda x: mg.softmax(x, axis=0),
    'log_softmax': lambda x: mg.log_softmax(x), 'logsumexp': lambda x: mg.logsumexp(x, axis=1),
    'logsumexp_all': lambda x: mg.logsumexp(x), 'relu': mg.relu, 'sigmoid': mg.sigmoid, 'abs': mg.abs,
    'sqrt': mg.sqrt, 'neg': lambda x: -x, 'max': lambda x: mg.max(x, axis=1), 'max_all': mg.max,
    'min': lambda x: mg.min(x, axis=0, keepdims=True), 'mean': lambda x: mg.mean(x, axis=1),
    'maximum': lambda x: mg.maximum(x, 1.0), 'minimum': lambda x: mg.minimum(x, x[::-1]),
    'ge': lambda x: x >= 0.5, 'le': lambda x: x <= 0.5, 'gt': lambda x: x > 0.5, 'lt': lambda x: x < 0.5,
    'ne': lambda x: x != 2.0, 'eq': lambda x: mg.equal(x, 2.0), 'where': lambda x: mg.where(x >= 0, x, -x),
    'sub': lambda x: 1.0 - x, 'pow': lambda x: x ** 2.0, 'exp_log': lambda x: mg.log(mg.exp(x) + 1.0),
    'tanh_sin_cos': lambda x: mg.tanh(mg.sin(x) * mg.cos(x)), 'sum_bool': lambda x: mg.sum(x > 0, axis=1),
    'sum_empty_axes': lambda x: mg.sum(x, axis=()), 'mean_int': lambda x: mg.mean(mg.cast(x, mg.int64)),
    'int_div': lambda x: mg.cast(x, mg.int64) / 2, 'cast': lambda x: mg.cast(x, mg.float64) * 2.0,
    'matmul': lambda x: x @ mg.transpose(x), 'concat': lambda x: mg.concatenate([x, x * 2.0], axis=0),
    'reshape': lambda x: mg.reshape(x, (4, 3)), 'stack': lambda x: mg.stack([x, x], axis=1),
    'getitem': lambda x: x[1:, ::2], 'broadcast_to': lambda x: mg.broadcast_to(x[0], (2, 4)),
    'pow_grad': lambda x: mg.gradients(mg.sum(x ** 3.0), [x])[0],
    'softmax_grad': lambda x: mg.gradients(mg.sum(mg.softmax(x) * x), [x])[0],
    'max_grad': lambda x: mg.gradients(mg.sum(mg.max(x, axis=0)), [x])[0],
    'mse_loss': lambda x: mg.nn.MSELoss()(x, x * 0.5),
    'cross_entropy': lambda x: mg.nn.CrossEntropyLoss(reduction='none')(x, mg.cast(x[:, 0] > 0, mg.int64)),
    'add_mul_div': lambda x: mg.divide(mg.multiply(mg.add(x, 1.0), mg.subtract(x, 2.0)), 3.0),
    'power_minimum': lambda x: mg.minimum(mg.power(x, 3.0), mg.negative(x)),
    'stop_gradient': lambda x: mg.stop_gradient(x) * x, 'less_greater': lambda x: mg.less(x, 0.0) + mg.greater(x, 1.0),
    'getitem_fn': lambda x: x[np.array([2, 0]), 1:],
}
COVERS = {'relu', 'sigmoid', 'abs', 'sqrt', 'exp', 'log', 'sin', 'cos', 'tanh', 'maximum', 'minimum', 'where',
          'sum', 'max', 'min', 'mean', 'logsumexp', 'softmax', 'log_softmax', 'reshape', 'transpose',
          'broadcast_to', 'matmul', 'concatenate', 'stack', 'cast', 'getitem', 'add', 'subtract', 'multiply',
          'divide', 'negative', 'power', 'stop_gradient', 'less', 'greater', 'equal'}


def test_composite_cases_cover_every_public_function():
    """A new public function of mg.core.functional needs a case in COMPOSITES (so its export is tested)."""
    import inspect
    public = {n for n, f in vars(mg.core.functional).items() if inspect.isfunction(f) and not n.startswith('_')
              and f.__module__ == 'minigrad.core.functional'}
    assert public - COVERS == set()


@pytest.mark.parametrize('name', sorted(COMPOSITES))
def test_composite_exports_and_onnxruntime_agrees_on_special_values(name):
    """Every public composite on ordinary and special values (nan, +-inf, -0.0): the ONNX model passes
    the checker with full type inference and onnxruntime computes what minigrad computes."""
    fn = COMPOSITES[name]
    ordinary = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for xv in (ordinary,) if 'int' in name else (ordinary, SPECIAL):     # casting nan to int is undefined
        m, want = exported(fn, xv)
        same(run_ort(m, {'x': xv})[0], want)


@pytest.mark.parametrize('name', ['softmax', 'log_softmax', 'logsumexp', 'max', 'mean', 'sum_empty_axes'])
def test_composite_over_an_empty_axis(name):
    xv = np.zeros((0, 4), np.float32)
    fn = {'max': lambda x: mg.logsumexp(x, axis=1, keepdims=True)}.get(name, COMPOSITES[name])
    m, want = exported(lambda x: fn(mg.transpose(x)), xv)     # the reduced axis (1 after transpose) is empty
    same(run_ort(m, {'x': xv})[0], want)


DTYPES = ['bool', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64', 'float16', 'float32',
          'float64']
DTYPE_OPS = {
    'add': lambda x: x + x, 'sub': lambda x: x - x[::-1], 'mul': lambda x: x * x, 'div': lambda x: x / (x + x),
    'pow': lambda x: x ** x, 'matmul': lambda x: x @ mg.transpose(x), 'neg': lambda x: -x,
    'maximum': lambda x: mg.maximum(x, x[::-1]), 'minimum': lambda x: mg.minimum(x, x[::-1]),
    'where': lambda x: mg.where(x > x[::-1], x, x[::-1]), 'less': lambda x: x < x[::-1],
    'ge': lambda x: x >= x[::-1], 'equal': lambda x: mg.equal(x, x[::-1]), 'relu': mg.relu, 'abs': mg.abs,
    'sum': lambda x: x.sum(), 'sum_axis': lambda x: x.sum(axis=1), 'max': mg.max, 'min': lambda x: mg.min(x, axis=0),
    'mean': mg.mean, 'exp': mg.exp, 'sqrt': mg.sqrt, 'softmax': mg.softmax, 'logsumexp': mg.logsumexp,
    'getitem': lambda x: x[1:, np.array([2, 0])], 'concat': lambda x: mg.concatenate([x, x], axis=0),
    'cast': lambda x: mg.cast(x * x, mg.float32)}
# no onnxruntime kernel, and no wider int holds every uint64: refused, naming the op and the dtype
REFUSED = {('uint64', k): op for k, op in (('pow', 'Pow'), ('max', 'ReduceMax'), ('min', 'ReduceMax'),
                                           ('softmax', 'ReduceMax'), ('logsumexp', 'ReduceMax'))}


@pytest.mark.filterwarnings('ignore::RuntimeWarning')      # float16 overflows in exp
@pytest.mark.parametrize('dtype', DTYPES)
def test_every_dtype_exports_what_onnxruntime_runs_or_refuses_naming_op_and_dtype(dtype):
    """Each op minigrad computes on `dtype`: the model passes the checker with full type inference and
    onnxruntime computes minigrad's values (an op onnxruntime has no kernel for runs in a wider int, cast
    back), or export refuses naming the op and the dtype. (29 of these models were invalid.)"""
    dt = np.dtype(dtype)
    xv = (np.arange(12).reshape(3, 4) % 3 + (dt.kind != 'b')).astype(dt)
    for name, fn in DTYPE_OPS.items():
        g = mg.Graph()
        with g.as_default():
            x = mg.placeholder(dt, (3, 4), name='x')
            try:
                y = fn(x)
            except mg.MinigradError:              # minigrad itself refuses the op on this dtype
                continue
        if (dtype, name) in REFUSED:
            with pytest.raises(mg.MinigradError, match=f'ONNX {REFUSED[dtype, name]} on {dtype}, which onnxruntime'):
                mg.to_onnx(y, inputs=[x])
            continue
        m = mg.to_onnx(y, inputs=[x])
        onnx.checker.check_model(m, full_check=True)
        got, want = run_ort(m, {'x': xv})[0], mg.Session(g).run(y, {x: xv})
        assert (got.dtype, got.shape) == (want.dtype, want.shape), name
        half = dt == np.float16 or dt.itemsize == 1              # numpy computes 8-bit values' exp in float16
        np.testing.assert_allclose(got.astype(float), want.astype(float), rtol=2e-3 if half else 1e-6, err_msg=name)


def test_special_values_match_minigrad_sign_of_zero_included():
    xv = np.float32([np.nan, -np.inf, -0.0, 0.0, 4.0, -1.0])
    for fn, ops in ((mg.sqrt, {'Sqrt'}), (mg.relu, {'Where', 'Less'})):
        m, want = exported(fn, xv)
        assert ops <= {n.op_type for n in m.graph.node} and 'Pow' not in {n.op_type for n in m.graph.node}
        same(run_ort(m, {'x': xv})[0], want, signs=fn is mg.sqrt)          # sqrt(-0.0) is -0.0
    assert np.isnan(run_ort(exported(mg.max, np.float32([1, np.nan, 2]))[0], {'x': np.float32([1, np.nan, 2])})[0])


def test_compiled_relu_of_nan_is_zero_in_onnxruntime():
    """A compiled Program holds the compiler's relu op: exported as Where(0 < x, x, 0), not ONNX Relu."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = mg.relu(x) * 2.0
    prog = mg.compile([y], [x])
    m = mg.to_onnx(prog)
    onnx.checker.check_model(m, full_check=True)
    assert 'Relu' not in {n.op_type for n in m.graph.node} and [i.name for i in m.graph.input] == ['x']
    xv = np.float32([np.nan, -1.0, 2.0])
    same(run_ort(m, {'x': xv})[0], np.float32([0, 0, 4]))


def test_comparisons_are_onnx_comparisons_not_max_over_bools():
    m, _ = exported(lambda x: (x >= 0.5) + (x <= 0.5) * 1.0, SPECIAL)
    types = {n.op_type for n in m.graph.node}
    assert 'Or' in types and 'Max' not in types
    ort.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider'])    # loads


def test_export_prunes_to_what_the_outputs_need():
    """Exporting `pred` from a graph that also holds a training loss ignores the `labels` placeholder."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (None, 3), name='x')
        labels = mg.placeholder(mg.float32, (None, 2), name='labels')
        w = mg.Variable(np.ones((3, 2), np.float32), name='w')
        pred = mg.softmax(x @ w)
        loss = mg.mean((pred - labels) ** 2)
        mg.gradients(loss, [w])
    m = mg.to_onnx(pred, inputs=[x])
    onnx.checker.check_model(m, full_check=True)
    assert [i.name for i in m.graph.input] == ['x'] and 'labels' not in {i for n in m.graph.node for i in n.input}
    xv = np.float32([[1, 2, 3]])
    same(run_ort(m, {'x': xv})[0], mg.Session(g).run(pred, {x: xv}))


def test_traced_module_keeps_its_input_name():
    net = mg.nn.Sequential(mg.nn.Linear(4, 3), mg.nn.ReLU())
    m = mg.to_onnx(net, example_inputs=[np.ones((2, 4), np.float32)])
    assert [i.name for i in m.graph.input] == ['x']


# ------------------------------------------------------------------ issue 35: the differential net, exported
def _net():
    """The differential net's program generator and comparison (tests/test_programs.py)."""
    pytest.importorskip('hypothesis')
    import test_programs as net
    return net


def export_and_compare(case, none_dims=False, compiled=False):
    """One random program built as a graph (values, gradients, second order): exported with every fetch
    as an output, checked by onnx's checker, run in onnxruntime against mg.Session; and exported with a
    dynamic batch, run at another batch (compare_at_another_batch). Exclusions: the sign of zero
    (onnxruntime's Where(True, -0.0, y) gives +0.0), and float64 math (exp, tanh, ...) within 1e-9."""
    net = _net()
    prog, arrays, new = case
    b = net.Built(prog, none_dims=none_dims)
    want = mg.Session(b.graph).run(b.fetches, b.feeds(arrays))
    # compiled: the Program's optimised graph (fma, fused groups, sub, relu) on every backend
    models = [mg.to_onnx(mg.compile(b.fetches, b.phs, backend=k)) for k in net.BACKENDS] if compiled else \
        [mg.to_onnx(b.fetches, inputs=b.phs)]
    for m in models:
        compare_model(net, m, b, prog, arrays, want)
    if not (none_dims or compiled):
        compare_at_another_batch(net, prog, arrays, new)


def _scalar_weights(prog, shapes):
    """prog on inputs of `shapes`, its loss weights (R, U: arrays of the traced shapes) made scalars."""
    p = copy.copy(prog)
    p.shapes, p.U = shapes, [np.asarray(0.5, u.dtype) for u in prog.U]
    p.R = {k: np.asarray(1.25, r.dtype) for k, r in prog.R.items()}
    return p


def compare_at_another_batch(net, prog, arrays, new):
    """Exported with dynamic_batch=True, run at twice the traced batch (the inputs whose first dim is the
    first input's, grown), against the graph built at those shapes (the numpy backend, the reference). A
    program those shapes do not fit is skipped; an export that needs a size the dynamic axes make unknown
    (an index through flat positions, a reshape to fixed sizes) or a cond / while_loop (their bodies keep
    the traced shapes) raises its documented error."""
    firsts = [a.shape[0] for a in arrays if a.ndim]
    if not firsts or not firsts[0]:
        return
    grown = [np.concatenate([a, a[::-1]]) if a.ndim and a.shape[0] == firsts[0] else a for a in new]
    try:
        big = net.Built(_scalar_weights(prog, [a.shape for a in grown]))
    except mg.ShapeError:
        return
    b = net.Built(_scalar_weights(prog, prog.shapes))
    try:
        m = mg.to_onnx(b.fetches, inputs=b.phs, dynamic_batch=True)
    except mg.MinigradError as e:
        assert 'known' in str(e) or 'cannot be rebuilt for new shapes' in str(e), e
        return
    want = mg.Session(big.graph, backend='numpy').run(big.fetches, big.feeds(grown))
    compare_model(net, m, b, _scalar_weights(prog, prog.shapes), grown, want)


def compare_model(net, m, b, prog, arrays, want):
    onnx.checker.check_model(m, full_check=True)
    got = run_ort(m, {p.name: a for p, a in zip(b.phs, arrays)})
    for n, (g, w) in enumerate(zip(got, want)):
        net.compare('onnxruntime', f'fetch {n}', g, w, prog, arrays, signs=False,
                    tol=(1e-9, 1e-11) if np.asarray(w).dtype == np.float64 else (2e-5, 1e-5))


def net_settings(n):
    from hypothesis import settings
    return settings(max_examples=n, **_net().NET)


@pytest.mark.filterwarnings('ignore::RuntimeWarning')      # inf/nan inputs on purpose
def test_differential_net_exported_fast():
    """A fast slice (< 30 s): float64 and float32 programs, special values (nan, +-inf, -0.0) included."""
    net = _net()
    from hypothesis import given

    @net_settings(net.n_programs(40))
    @given(case=net.program_and_inputs(dtypes=(np.float64, np.float32), special=True))
    def run(case):
        export_and_compare(case)
    run()


@pytest.mark.slow
@pytest.mark.filterwarnings('ignore::RuntimeWarning')
@pytest.mark.parametrize('kw', [dict(dtypes=(np.float64,)), dict(dtypes=(np.float32, np.int64)),
                                dict(dtypes=(np.float64,), empty='always'),
                                dict(dtypes=(np.float64,), control=('cond',), max_steps=5), 'none_dims', 'compiled'],
                         ids=['float64', 'float32_int', 'empty', 'cond', 'none_dims', 'compiled'])
def test_differential_net_exported_slow(kw):
    """Bigger slices; 'none_dims': placeholders with unknown dims (dynamic in ONNX), where the program
    allows it (an index or gradient that needs a known size raises its documented error instead)."""
    net = _net()
    from hypothesis import given
    none_dims, compiled = kw == 'none_dims', kw == 'compiled'

    @net_settings(net.n_programs(150))
    @given(case=net.program_and_inputs(**(dict(dtypes=(np.float64, np.float32)) if isinstance(kw, str) else kw)))
    def run(case):
        if none_dims and case[0].none_mask is None:
            return
        try:
            export_and_compare(case, none_dims=none_dims, compiled=compiled)
        except mg.MinigradError as e:
            if not (none_dims and 'known' in str(e)):
                raise
    run()


# ------------------------------------------------------------------ issue 35: dynamic axes
def classifier():
    mg.manual_seed(0)
    net = mg.nn.Sequential(mg.nn.Linear(4, 16), mg.nn.ReLU(), mg.nn.Linear(16, 3))
    xv = np.random.default_rng(0).standard_normal((64, 4)).astype(np.float32)
    return net, xv


@pytest.mark.parametrize('kind', ['program', 'traced', 'module'])
@pytest.mark.parametrize('dyn', [dict(dynamic_batch=True), dict(dynamic_axes={'x': {0: 'N'}}),
                                 dict(dynamic_axes={'x': [0], 'probs': {0: 'N'}})], ids=['batch', 'named', 'list'])
def test_dynamic_batch_runs_at_batch_1_7_and_64(kind, dyn):
    """Traced, compiled (at batch 64) or a Module: exported with a dynamic batch, it runs at any batch."""
    net, xv = classifier()
    traced = mg.trace(lambda x: mg.softmax(net(x)), xv)
    obj = {'program': lambda: mg.compile(traced.outputs, traced.inputs), 'traced': lambda: traced,
           'module': lambda: net}[kind]()
    m = mg.to_onnx(obj, example_inputs=[xv] if kind == 'module' else None, output_names=['probs'], **dyn)
    onnx.checker.check_model(m, full_check=True)
    dim = m.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param == {'batch': 'batch', 'named': 'N', 'list': 'x_dim0'}[
        'batch' if 'dynamic_batch' in dyn else 'named' if isinstance(dyn['dynamic_axes']['x'], dict) else 'list']
    sess = ort.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider'])
    want = net(mg.tensor(xv)).numpy() if kind == 'module' else traced(xv)
    for n in (1, 7, 64):
        np.testing.assert_allclose(sess.run(None, {'x': xv[:n]})[0], want[:n], rtol=1e-5, atol=1e-6)


def test_without_dynamic_axes_the_traced_batch_is_fixed():
    net, xv = classifier()
    m = mg.to_onnx(mg.trace(net, xv))
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 64
    with pytest.raises(Exception, match='(?i)dimension|shape'):
        run_ort(m, {'x': xv[:1]})


def test_dynamic_axes_bad_names_and_axes_raise_named_errors():
    net, xv = classifier()
    traced = mg.trace(net, xv)
    with pytest.raises(mg.MinigradError, match=r"dynamic_axes names \['y'\].*inputs \['x'\]"):
        mg.to_onnx(traced, dynamic_axes={'y': [0]})
    with pytest.raises(mg.MinigradError, match=r"dynamic_axes \[2\] of 'x' are out of range for its shape \(64, 4\)"):
        mg.to_onnx(traced, dynamic_axes={'x': [2]})
    for bad in ({0: 'batch'}, ['x'], {'x': 0}, {'x': {0: 1}}):          # int() of 'batch' raised ValueError
        with pytest.raises(mg.errors.InputError, match=r"dynamic_axes maps input and output names"):
            mg.to_onnx(traced, dynamic_axes=bad)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = mg.cond(mg.greater(mg.sum(x), 0.0), lambda: x * 2.0, lambda: x)
    with pytest.raises(mg.MinigradError, match=r"\(cond\) cannot be rebuilt for new shapes"):
        mg.to_onnx(y, inputs=[x], dynamic_batch=True)


@pytest.mark.parametrize('fn, shapes, fixed', [
    (lambda x: x - x.mean(axis=0), [(4, 3)], []),                # the mean counts at run time (it kept 1/4)
    (lambda x, o: x * 2.0 + o, [(3,), (1,)], ['o']),             # an offset of another first dim stays (1,)
    (lambda x, w: x @ w, [(4, 3), (3, 2)], ['w'])], ids=['mean', 'offset', 'weight'])
def test_dynamic_batch_frees_the_batch_inputs_only_and_means_count_at_run_time(fn, shapes, fixed):
    """dynamic_batch=True names axis 0 of the inputs whose first dim is the traced batch (it named every
    input's, so a (1,) offset was declared as long as x, and failed in onnxruntime); a mean over the batch
    gives the mean at any batch (its traced 1/N was kept, silently)."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    m = mg.to_onnx(mg.trace(fn, *arrays), dynamic_batch=True)
    names = [i.name for i in m.graph.input]
    assert [i.name for i in m.graph.input if i.type.tensor_type.shape.dim[0].dim_param == 'batch'] == \
        [n for n in names if n not in fixed]
    for n in (shapes[0][0], 5):                                   # the traced batch, then another
        new = [a if name in fixed else np.resize(a, (n,) + a.shape[1:]) for a, name in zip(arrays, names)]
        same(run_ort(m, dict(zip(names, new)))[0], fn(*map(mg.tensor, new)).numpy())


def test_a_graph_built_on_none_dims_is_dynamic_already():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (None, 3), name='x')
        y = mg.mean(x, axis=0)           # the count is read at run time
    m = mg.to_onnx(y, inputs=[x])
    for n in (1, 7):
        xv = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(run_ort(m, {'x': xv})[0], xv.mean(axis=0), rtol=1e-6)


# ------------------------------------------------------------------ issue 35: models from PyTorch come in
DATA = __import__('pathlib').Path(__file__).parent / 'data'       # written by scripts/make_torch_onnx.py


@pytest.mark.parametrize('exporter', ['_opset9', '_opset11', '_opset13', '', '_dynamo'],
                         ids=['opset9', 'opset11', 'opset13', 'opset17', 'dynamo'])
@pytest.mark.parametrize('name', ['linear', 'mlp', 'mlp2', 'parts'])
def test_import_pytorch_model_outputs_and_gradients_agree_with_torch(name, exporter):
    """torch.onnx.export by both exporters (TorchScript at opsets 9, 11, 13 and 17, and dynamo with opset 18)
    of nn.Linear, an MLP with ReLU/Sigmoid/Tanh and a softmax head, Flatten/LeakyReLU/LogSoftmax, and the
    operators whose ONNX form changed across opsets (Parts: unsqueeze, slices, chunk as Split or as shape
    arithmetic, squeeze): same outputs as torch, and mg.gradients of the imported graph equal torch's
    autograd (stored)."""
    ref = np.load(DATA / 'torch_reference.npz')
    path = DATA / f'torch_{name}{exporter}.onnx'
    g = mg.import_onnx(path)
    x = ref[f'{name}/x']
    params = sorted(k.split('/')[-1] for k in ref.files if k.startswith(f'{name}/param/'))
    assert sorted(v.name for v in g.variables) == params          # initializers became Variables
    with g.as_default():
        loss = mg.sum(g.outputs[0] * mg.constant(ref[f'{name}/r']))
        grads = mg.gradients(loss, [g.inputs[0]] + g.variables)
    out = mg.Session(g).run([g.outputs[0]] + grads, {g.inputs[0]: x})
    np.testing.assert_allclose(out[0], ref[f'{name}/y'], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], ref[f'{name}/grad_x'], rtol=1e-5, atol=1e-6)
    for v, gv in zip(g.variables, out[2:]):
        np.testing.assert_allclose(gv, ref[f'{name}/grad_param/{v.name}'], rtol=1e-5, atol=1e-6, err_msg=v.name)
    prog = mg.compile(g.outputs[0], g.inputs)                       # and it compiles
    np.testing.assert_allclose(prog(x), ref[f'{name}/y'], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_ort(onnx.load(path), {'x': x})[0], ref[f'{name}/y'], rtol=1e-5, atol=1e-6)


def test_imported_pytorch_mlp_trains_further():
    ref = np.load(DATA / 'torch_reference.npz')
    g = mg.import_onnx(DATA / 'torch_mlp.onnx')
    x, t = ref['mlp/x'], np.eye(3, dtype=np.float32)[[0, 1, 2, 0, 1]]
    with g.as_default():
        target = mg.placeholder(mg.float32, (None, 3), name='target')
        loss = -mg.mean(mg.sum(target * mg.log(g.outputs[0]), axis=1))
        grads = mg.gradients(loss, g.variables)
        step = [v.assign(v - 0.5 * gv) for v, gv in zip(g.variables, grads)]
    sess = mg.Session(g)
    first = sess.run(loss, {g.inputs[0]: x, target: t})
    for _ in range(20):
        sess.run(step, {g.inputs[0]: x, target: t})
    assert sess.run(loss, {g.inputs[0]: x, target: t}) < first


def _onnx_model(op, inputs, attrs=None, inits=(), opset=18, n_inputs=None):
    """A one-node ONNX model: `inputs` {name: array} are graph inputs, `inits` {name: array} initializers."""
    h = onnx.helper
    names = list(inputs) + [k for k, _ in inits]
    node = h.make_node(op, names if n_inputs is None else n_inputs, ['y'], **(attrs or {}))
    vis = [h.make_tensor_value_info(k, h.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    out = h.make_value_info('y', h.make_tensor_type_proto(onnx.TensorProto.UNDEFINED, None))
    g = h.make_graph([node], 'g', vis, [out], [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 10
    return onnx.shape_inference.infer_shapes(m)


A = np.float32([[1.5, -2.0, 0.0], [-0.5, 3.0, -4.0]])
B = np.float32([[0.5, 2.0, -1.0], [1.0, -3.0, 2.0]])
IMPORTS = {
    'Neg': ({'a': A}, {}, ()), 'Abs': ({'a': A}, {}, ()), 'Sqrt': ({'a': np.abs(A)}, {}, ()),
    'Sigmoid': ({'a': A}, {}, ()), 'Tanh': ({'a': A}, {}, ()), 'Relu': ({'a': A}, {}, ()),
    'LeakyRelu': ({'a': A}, {'alpha': 0.2}, ()), 'Softmax': ({'a': A}, {'axis': 0}, ()),
    'LogSoftmax': ({'a': A}, {'axis': -1}, ()), 'Min': ({'a': A, 'b': B}, {}, ()), 'Max': ({'a': A, 'b': B}, {}, ()),
    'Greater': ({'a': A, 'b': B}, {}, ()), 'Less': ({'a': A, 'b': B}, {}, ()),
    'ReduceMean': ({'a': A}, {'keepdims': 0}, [('axes', np.int64([1]))]),
    'ReduceSum': ({'a': A}, {'keepdims': 1}, [('axes', np.int64([0]))]),
    'ReduceMax': ({'a': A}, {'keepdims': 0}, [('axes', np.int64([-1]))]),
    'Flatten': ({'a': A.reshape(2, 3, 1)}, {'axis': 1}, ()), 'Reshape': ({'a': A}, {}, [('s', np.int64([3, -1]))]),
    'Transpose': ({'a': A}, {'perm': [1, 0]}, ()), 'Concat': ({'a': A, 'b': B}, {'axis': 1}, ()),
    'Gather': ({'a': A}, {'axis': 1}, [('i', np.int64([2, 0, 2]))]),
    'Clip': ({'a': A}, {}, [('lo', np.float32(-1.0)), ('hi', np.float32(1.0))]),
    'Where': ({'c': A > 0, 'a': A, 'b': B}, {}, ()),
    'Gemm': ({'a': A}, {'transB': 1, 'alpha': 0.5, 'beta': 2.0}, [('w', B * 2), ('bias', np.float32([1, 2]))]),
}


@pytest.mark.parametrize('op', sorted(IMPORTS))
def test_import_reads_common_operators_as_onnxruntime_computes(op):
    inputs, attrs, inits = IMPORTS[op]
    m = _onnx_model(op, inputs, attrs, inits)
    want = run_ort(m, inputs)[0]
    roundtrip(m, inputs, [want])


def test_import_reduce_axes_from_the_attribute_before_opset_18():
    m = _onnx_model('ReduceMean', {'a': A}, {'axes': [0], 'keepdims': 0}, opset=17)
    roundtrip(m, {'a': A}, [A.mean(axis=0)])


X3 = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
OLD_OPSETS = {      # op: (attributes, initializers, opset, input): what the operator meant at that opset
    'Softmax': ({}, (), 11, X3),                        # flattened to 2-D at axis 1 (the last axis from 13)
    'LogSoftmax': ({'axis': 1}, (), 11, X3), 'Softmax_axis0': ({'axis': 0}, (), 9, X3),
    'Squeeze': ({'axes': [0]}, (), 11, X3[:1, :, :1]), 'Unsqueeze': ({'axes': [1, -1]}, (), 11, X3),
    'Slice': ({'starts': [1, 0], 'ends': [3, -1], 'axes': [1, 2]}, (), 9, X3),
    'Reshape': ({}, [('shape', np.int64([0, -1]))], 13, X3),            # a 0 copies the input's dim
}


@pytest.mark.parametrize('op', sorted(OLD_OPSETS))
def test_import_follows_the_operator_version_of_the_model_opset(op):
    """Before opset 13 Softmax/LogSoftmax flatten to 2-D at `axis` and Squeeze/Unsqueeze take `axes` as an
    attribute, before 10 Slice its bounds: as onnxruntime computes (minigrad took the last axis, ignored
    axes, or raised IndexError). A 0 in a Reshape shape copies the dim (it was refused as a size)."""
    attrs, inits, opset, x = OLD_OPSETS[op]
    m = _onnx_model(op.split('_')[0], {'a': x}, attrs, inits, opset=opset)
    roundtrip(m, {'a': x}, [run_ort(m, {'a': x})[0]])


def _graph_of(op, inputs, outputs=('y',), inits=()):
    """One ONNX node `op` reading `inputs`, on a graph input x of shape (2, 3), giving the graph `outputs`."""
    h = onnx.helper
    vi = lambda n: h.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 3])
    return h.make_model(h.make_graph([h.make_node(op, inputs, ['y'])], 'g', [vi('x')], [vi(o) for o in outputs],
                                     [onnx.numpy_helper.from_array(v, k) for k, v in inits]),
                        opset_imports=[h.make_opsetid('', 18)])


MALFORMED = {       # what import_onnx reads: the error it gives
    'empty bytes': (lambda tmp: b'', 'no ONNX graph in it'),
    'empty file': (lambda tmp: (tmp / 'empty.onnx', (tmp / 'empty.onnx').write_bytes(b''))[0], 'no ONNX graph in it'),
    'corrupt file': (lambda tmp: (tmp / 'bad.onnx', (tmp / 'bad.onnx').write_bytes(b'\x08\x07bad\xff'))[0],
                     "bad.onnx.*not an ONNX model"),            # protobuf's DecodeError
    'undefined name': (lambda tmp: _graph_of('Relu', ['q']), r"node '' \(Relu\) reads 'q', which no input"),
    'output no node makes': (lambda tmp: _graph_of('Relu', ['x'], ['y', 'z']), "output of graph 'g' reads 'z'"),
    'squeeze of a dim of 2': (lambda tmp: _graph_of('Squeeze', ['x', 'ax'], inits=[('ax', np.int64([0]))]),
                              r"Squeeze of axes \[0\] of 'x' \(shape \(2, 3\)\): only a dim of size 1"),
}


@pytest.mark.parametrize('what', sorted(MALFORMED))
def test_import_refuses_a_malformed_model_naming_the_fault(what, tmp_path):
    """An empty file became an empty Graph, a Squeeze of a dim of 2 imported as x[0]; a corrupt file by path
    raised protobuf's DecodeError, an undefined name a KeyError: all now an InputError saying what is wrong."""
    make, match = MALFORMED[what]
    with pytest.raises(mg.errors.InputError, match=match):
        mg.import_onnx(make(tmp_path))


def test_import_erf_raises_naming_the_op():
    with pytest.raises(mg.MinigradError, match=r"Erf has no minigrad primitive.*approximate='tanh'"):
        mg.import_onnx(_onnx_model('Erf', {'a': A}))


@pytest.mark.parametrize('exporter', ['torchscript', 'dynamo'])
def test_live_pytorch_export_imports(exporter):
    """With torch installed: the models of scripts/make_torch_onnx.py exported now (the dynamo exporter needs
    onnxscript) import and agree with torch on values and gradients."""
    torch = pytest.importorskip('torch')
    if exporter == 'dynamo':
        pytest.importorskip('onnxscript')
    import importlib.util
    script = DATA.parent.parent / 'scripts' / 'make_torch_onnx.py'
    spec = importlib.util.spec_from_file_location('make_torch_onnx', script)
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    for name, model, shape in make.models():
        x = torch.randn(*shape, requires_grad=True)
        buf = io.BytesIO()
        torch.onnx.export(model, (x,), buf, input_names=['x'], output_names=['y'], dynamo=exporter == 'dynamo',
                          dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}} if exporter != 'dynamo' else None)
        g = mg.import_onnx(onnx.load_from_string(buf.getvalue()))
        with g.as_default():
            gx, = mg.gradients(mg.sum(g.outputs[0] * g.outputs[0]), [g.inputs[0]])
        y, gxv = mg.Session(g).run([g.outputs[0], gx], {g.inputs[0]: x.detach().numpy()})
        (model(x) ** 2).sum().backward()
        np.testing.assert_allclose(y, model(x).detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(gxv, x.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
