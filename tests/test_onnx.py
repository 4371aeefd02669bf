"""mg.export_onnx / mg.import_onnx: checker, onnxruntime equality on five models, round trips, errors."""
import io

import numpy as np
import pytest

import minigrad as mg

onnx = pytest.importorskip('onnx')
ort = pytest.importorskip('onnxruntime')


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


def test_cond():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = mg.cond(mg.greater(mg.sum(x), 0.0), lambda: x * 2.0, lambda: mg.exp(x))
    m = mg.export_onnx(y, io.BytesIO(), inputs=[x])
    assert 'If' in [n.op_type for n in m.graph.node]
    for xv in (np.float32([1, 2, 3]), np.float32([-1, -2, 0.5])):
        check(m, {'x': xv}, [mg.Session(g).run(y, {x: xv})])


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


def test_every_forward_primitive_has_a_lowering():
    forward = [p for p in vars(mg.ops).values() if isinstance(p, mg.Primitive)]
    missing = {p.name for p in forward if p.onnx is None}
    assert missing <= {'getitem', 'scatter_add', 'sum_to_like'}


def test_while_loop_gradient_stack_raises_naming_the_node():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (), name='x')
        _, y = mg.while_loop(lambda i, v: mg.less(i, 3.0), lambda i, v: (i + 1.0, v * x), [mg.constant(0.0), x])
        gx, = mg.gradients(y, [x])
    with pytest.raises(mg.MinigradError, match='gradient stack'):
        mg.export_onnx(gx, io.BytesIO(), inputs=[x])
