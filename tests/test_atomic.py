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
    return [n for n in g.nodes], dict(g._names), list(g.captures), set(g.grad_nodes)


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
