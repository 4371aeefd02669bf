"""mg.trace (symbolic and from a tape) and mg.jit."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.transforms.trace import TracedFunction


def f_mlp_factory():
    W = mg.tensor(np.array([[1.0, -1.0], [0.5, 2.0], [0.0, 1.0]]), requires_grad=True, name='W')
    b = mg.tensor(np.array([0.1, -0.2]), name='b')                  # no grad: still read at call time

    def f(x):
        return mg.tanh(x @ W + b).sum(axis=1)
    return f, W, b


@pytest.mark.parametrize('symbolic', [True, False])
def test_trace_matches_eager_and_keeps_graph(symbolic):
    f, W, b = f_mlp_factory()
    x = np.arange(12.0).reshape(4, 3) / 10
    t = mg.trace(f, x, symbolic=symbolic)
    assert isinstance(t, TracedFunction) and isinstance(t.graph, mg.Graph)
    assert [p.name for p in t.inputs] == ['x'] and t.inputs[0].shape == (4, 3)
    ops = [n.op for n in t.graph.nodes]
    assert ops.count('variable') == 2 and 'matmul' in ops and 'tanh' in ops
    np.testing.assert_allclose(t(x), f(mg.tensor(x)).numpy())
    # parameters are read at call time: an optimizer step is seen by the traced function
    W.data[...] = W.data * 2
    np.testing.assert_allclose(t(x), f(mg.tensor(x)).numpy())
    b.data[...] = 0                      # a captured tensor is never a stale copy (issue 31)
    np.testing.assert_allclose(t(x), f(mg.tensor(x)).numpy())
    t.graph.verify()


def test_tensors_in_tensors_out_numpy_in_numpy_out():
    t = mg.trace(lambda x, y: (x * y, {'s': (x + y).sum()}), np.ones(3), np.ones(3))
    out = t(np.ones(3), np.full(3, 2.0))
    assert isinstance(out[0], np.ndarray) and isinstance(out[1]['s'], np.ndarray)
    tout = t(mg.tensor(np.ones(3)), mg.tensor(np.full(3, 2.0)))
    assert isinstance(tout[0], mg.Tensor) and float(tout[1]['s'].numpy()) == 9.0


def test_trace_is_printable_and_drawable(monkeypatch):
    t = mg.trace(lambda x: x * 2 + 1, np.ones(2, np.float32))
    text = str(t)
    assert text.splitlines()[0] == 'traced <lambda>(x: float32 (2,))'
    assert 'x = placeholder()  : float32 (2,)' in text and text.splitlines()[-1].startswith('return add')
    monkeypatch.setattr(mg.core.primitive.hooks, 'display', lambda obj: {'text/plain': f'drawn {type(obj).__name__}'})
    assert t._repr_mimebundle_() == {'text/plain': 'drawn TracedFunction'}


def test_python_if_on_symbol_is_a_trace_error():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x * 3
    with pytest.raises(mg.TraceError) as e:
        mg.trace(f, np.ones(3))
    msg = str(e.value)
    for words in ('mg.trace(f)', 'no values', 'if/while', 'mg.cond', 'mg.while_loop', 'symbolic=False'):
        assert words in msg


def test_cond_and_while_inside_trace():
    def f(x):
        y = mg.cond(x.sum() > 0, lambda: x * 2, lambda: x * 3)
        return mg.while_loop(lambda v: mg.abs(v).sum() < 100.0, lambda v: v * 2.0, y)
    t = mg.trace(f, np.ones(3))
    assert [n.op for n in t.graph.nodes].count('cond') == 1
    np.testing.assert_allclose(t(np.ones(3)), [64.0] * 3)
    np.testing.assert_allclose(t(-np.ones(3)), [-48.0] * 3)


def test_captured_tensor_inside_cond_branch():
    w = mg.tensor(np.array([1.0, 2.0]), requires_grad=True, name='w')
    t = mg.trace(lambda x: mg.cond(x.sum() > 0, lambda: x * w, lambda: x), np.ones(2))
    np.testing.assert_allclose(t(np.ones(2)), [1.0, 2.0])
    w.data[...] = 3.0
    np.testing.assert_allclose(t(np.ones(2)), [3.0, 3.0])
    assert len(t.params) == 1 and t.params[0][1] is w


def test_tape_trace_freezes_python_branches():
    def f(x):
        if x.sum() > 0:          # decided once, while tracing
            return x * 2
        return x * 3
    t = mg.trace(f, np.ones(3), symbolic=False)
    assert 'symbolic=False' in mg.trace.__doc__ and 'frozen' in mg.trace.__doc__
    np.testing.assert_allclose(t(-np.ones(3)), [-2.0] * 3)       # the trap: eager f gives -3
    np.testing.assert_allclose(f(mg.tensor(-np.ones(3))).numpy(), [-3.0] * 3)
    # the tape also recorded the comparison, but the output no longer depends on it
    from minigrad.core.interpreter import needed_nodes
    assert [n.op for n in needed_nodes(t.graph, t.outputs)] == ['placeholder', 'constant', 'mul']
    assert 'cond' not in [n.op for n in t.graph.nodes]


def test_tape_trace_unrolls_python_loops():
    def f(x):
        for _ in range(3):
            x = x * 2.0 + 1.0
        return x
    t = mg.trace(f, np.float32(1.0), symbolic=False)
    assert [n.op for n in t.graph.nodes].count('mul') == 3
    assert float(t(np.float32(0.0))) == 7.0


def test_traced_graph_is_differentiable():
    f, W, _ = f_mlp_factory()
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    t = mg.trace(lambda x: f(x).sum(), x)
    var = t.params[0][0]
    with t.graph.as_default():
        dW, = mg.gradients(t.outputs[0], [var])
    got = mg.Session(t.graph).run(dW, t.feeds([x]))
    f(mg.tensor(x)).sum().backward()
    np.testing.assert_allclose(got, W.grad.numpy())


def test_wrong_shape_call_is_a_feed_error():
    t = mg.trace(lambda x: x * 2, np.ones(3))
    with pytest.raises(mg.FeedError, match=r'shape \(4,\).*\(3,\)'):
        t(np.ones(4))


def test_jit_caches_per_signature():
    calls = []

    def f(x, y):
        calls.append(1)
        return x @ y + 1.0
    jf = mg.jit(f)
    a, b = np.ones((2, 3)), np.ones((3, 4))
    np.testing.assert_allclose(jf(a, b), a @ b + 1)
    jf(a * 2, b)
    assert jf.trace_count == 1 and len(calls) == 1
    jf(np.ones((5, 3)), b)
    assert jf.trace_count == 2
    jf(np.ones((5, 3), np.float32), b.astype(np.float32))      # dtype change -> retrace
    assert jf.trace_count == 3
    jf(a, b)
    assert jf.trace_count == 3 and isinstance(jf.graph, mg.Graph)
    out = jf(mg.tensor(a), mg.tensor(b))
    assert isinstance(out, mg.Tensor)


def test_jit_run_adapter_uses_interpreter_without_program():
    import importlib
    trace_mod = importlib.import_module('minigrad.transforms.trace')
    t = trace_mod.trace(lambda x: x + 1.0, np.zeros(2))
    assert t.program is None
    np.testing.assert_allclose(trace_mod._run(t, [np.ones(2)])[0], [2.0, 2.0])


def test_jit_uses_the_compiler_when_it_works():
    compiler = pytest.importorskip('minigrad.compiler')
    if not hasattr(compiler, 'compile'):
        pytest.skip('no compiler yet')
    jf = mg.jit(lambda x: x * 2.0 + 1.0)
    np.testing.assert_allclose(jf(np.ones(3)), [3.0] * 3)
    assert jf.entries[0].segments[0].program is not None
