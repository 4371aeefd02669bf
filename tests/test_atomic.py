"""A failing mg.gradients, cond or while_loop leaves the graph as it was; a backward that raises
keeps the tape intact and names the op whose VJP failed."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.core import register_primitive, elementwise_rule


def _bad_vjp(needs, g, out, x):
    raise mg.MinigradError('this VJP always fails (a test op)')


BAD = register_primitive('bad_vjp_test', np.negative, elementwise_rule, _bad_vjp, elementwise=True,
                         ufunc='negative', doc='-x whose VJP raises, registered by a test')


def _snapshot(g):
    return [n for n in g.nodes], dict(g._names.last), list(g.captures), set(g.grad_nodes)


def test_a_failing_gradients_call_adds_nothing():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = (BAD(x * 2.0) * 3.0).sum()
    before = _snapshot(g)
    with pytest.raises(mg.MinigradError, match='always fails'):
        mg.gradients(y, [x])
    assert _snapshot(g) == before
    with g.as_default():
        z = x * 2.0                               # names continue where they were
    assert z.name == 'mul_2'


def test_a_failing_cond_or_while_loop_adds_nothing():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        s = x.sum()
        positive = s > 0
    before = _snapshot(g)
    with g.as_default():
        with pytest.raises(mg.MinigradError):
            mg.cond(positive, lambda: x * 2.0, lambda: mg.reshape(x, (7,)))
        assert _snapshot(g) == before
        with pytest.raises(mg.MinigradError):
            mg.while_loop(lambda v: v.sum() < 10.0, lambda v: mg.reshape(v, (5,)), [x])
        assert _snapshot(g) == before
        with pytest.raises(mg.MinigradError):
            mg.while_loop(lambda v: v.sum() < 10.0, lambda v: v @ mg.reshape(v, (1, 3)), [x])
    assert _snapshot(g) == before


def test_a_backward_that_raises_keeps_the_tape_and_names_the_op():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = (BAD(x * 2.0) * 3.0).sum()
    for _ in range(2):              # the second try meets the same error, not a retain_graph complaint
        with pytest.raises(mg.MinigradError, match="bad_vjp_test.*always fails"):
            y.backward()
    assert x.grad is None


def _picky(x):
    if np.any(x > 5):
        raise ValueError('picky_test: values above 5')
    return np.negative(x)


PICKY = register_primitive('picky_test', _picky, elementwise_rule, None, elementwise=True)


BACKENDS = ['numpy', pytest.param('numba', marks=pytest.mark.skipif(not mg.compiler.kernels.available(),
                                                                     reason='numba is not installed'))]


def _update_graph():
    g = mg.Graph()
    with g.as_default():
        w = mg.Variable(np.ones(3), name='w')
        x = mg.placeholder('float64', (3,), name='x')
        gw, = mg.gradients((w * x).sum(), [w])
        upd = w.assign(w - 0.5 * gw)          # the numba backend writes this in one kernel
        late = PICKY(upd + x)                 # runs after the update, fails for large x
    return g, w, x, upd, late


@pytest.mark.parametrize('backend', BACKENDS)
def test_a_session_run_that_fails_after_an_assign_applies_none(backend):
    g, w, x, upd, late = _update_graph()
    sess = mg.Session(g, backend=backend)
    assert sess.run(late, {x: np.ones(3)}).tolist() == [-1.5] * 3     # w = 1 - 0.5 = 0.5
    with pytest.raises(mg.MinigradError, match='picky_test'):
        sess.run(late, {x: np.full(3, 10.0)})                           # w would be 0.5 - 5: not kept
    assert sess.run(w).tolist() == [0.5] * 3
    assert sess.run(late, {x: np.ones(3)}).tolist() == [-1.0] * 3     # the run is not re-executed


@pytest.mark.parametrize('backend', BACKENDS)
def test_a_program_call_that_fails_after_an_assign_applies_none(backend):
    g, w, x, upd, late = _update_graph()
    prog = mg.compile([upd, late], [x], backend=backend)
    state_before = prog.state[0].copy()
    held = prog.state[0]
    with pytest.raises(mg.MinigradError, match='picky_test'):
        prog(np.full(3, 10.0))
    assert prog.state[0] is held and held.tolist() == state_before.tolist()
    new_w, _ = prog(np.ones(3))
    assert new_w.tolist() == [0.5] * 3 and prog.state[0].tolist() == [0.5] * 3
    assert held.tolist() == [1.0] * 3          # an array read from state earlier is a snapshot, never rewritten
    new_w[:] = 99                              # the fetched value is the caller's copy
    assert prog.state[0].tolist() == [0.5] * 3
