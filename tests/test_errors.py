"""Errors: the hierarchy, library state intact after a failure (grad mode, tapes, a half-recorded node, a
refused backward or in-place change), and the testing helpers' reports. Each bad input, with its error
class and message, is a case of tests/test_bad_inputs.py."""
from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import errors
from minigrad.core.tensor import state


def test_error_hierarchy():
    assert issubclass(mg.ShapeError, ValueError) and issubclass(mg.ShapeError, mg.MinigradError)
    assert issubclass(mg.BackwardError, RuntimeError) and issubclass(mg.BackwardError, mg.MinigradError)
    for e in (errors.FeedError, errors.GraphError, errors.TraceError):
        assert issubclass(e, mg.MinigradError)


# ------------------------------------------------------------------ library state is never corrupted
def test_exception_inside_no_grad_restores_state():
    assert mg.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with mg.no_grad():
            1 / 0
    assert mg.is_grad_enabled()
    with mg.no_grad():
        with pytest.raises(ZeroDivisionError):
            with mg.enable_grad():
                1 / 0
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled()


def test_exception_inside_tape_restores_state():
    with pytest.raises(mg.ShapeError):
        with mg.Tape() as tape:
            x = mg.tensor([1.0, 2.0, 3.0]) * 2
            x + mg.tensor(np.ones((2, 2)))
    assert state.tapes == [] and [e.op for e in tape.entries] == ['mul']
    mg.tensor(1.0) + 1
    assert len(tape.entries) == 1


def test_failed_op_leaves_no_half_recorded_node():
    w = mg.tensor(np.ones(3), requires_grad=True)
    with mg.Tape() as tape:
        y = w * 2
        with pytest.raises(mg.ShapeError):
            y + mg.tensor(np.ones(2))
        with pytest.raises(mg.ShapeError):
            y @ mg.tensor(np.ones((2, 2)))
    assert [e.op for e in tape.entries] == ['mul']
    y.sum().backward()                              # the recorded graph still works
    assert w.grad.tolist() == [2.0, 2.0, 2.0]


def test_failed_backward_leaves_grads_untouched_and_state_restored():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(mg.BackwardError):
        y.backward()
    assert x.grad is None and mg.is_grad_enabled()
    y.backward(gradient=mg.ones(2))                 # the graph was not freed by the failed attempt
    assert x.grad.tolist() == [2.0, 2.0]


def test_backward_error_in_second_pass_restores_grad_mode():
    x = mg.tensor(2.0, requires_grad=True)
    y = x * x
    y.backward()
    with pytest.raises(mg.BackwardError):
        y.backward()
    assert mg.is_grad_enabled()


def test_refused_in_place_changes_leave_the_tensor_as_it_was():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    for op in ('+=', '-=', '*=', '/='):
        with pytest.raises(mg.BackwardError):
            exec(f'w {op} 1.0', {'w': w})
    assert w.tolist() == [1.0, 2.0] and w.is_leaf and w._version == 0
    x, i = mg.tensor([1.0, 2.0]), mg.tensor([1, 2])
    with pytest.raises(mg.ShapeError):
        x += mg.tensor(np.ones((3, 2)))
    with pytest.raises(mg.ShapeError):
        i += 0.5
    assert x.tolist() == [1.0, 2.0] and i.tolist() == [1, 2] and i.dtype == np.int64
    t = mg.tensor([1, 2])
    with pytest.raises(mg.BackwardError):
        t.requires_grad = True
    assert not t.requires_grad


# ------------------------------------------------------------------ the testing helpers report clearly
def test_gradcheck_reports_wrong_vjp():
    from minigrad.core import Primitive, elementwise_rule
    from minigrad.course.testing import gradcheck
    bad = Primitive('bad_square', np.square, elementwise_rule, lambda n, g, out, x: (g * x * 3,))  # not in the table
    with pytest.raises(AssertionError) as e:
        gradcheck(lambda x, y: bad(x) * y, np.array([1.0, 2.0]), np.array([0.5, 0.25]))
    msg = str(e.value)
    assert 'gradcheck failed' in msg and 'input 0' in msg and 'MISMATCH' in msg and 'input 1' in msg
    assert 'max abs error' in msg


def test_numerical_grad_skips_integer_inputs():
    from minigrad.course.testing import numerical_grad
    g = numerical_grad(lambda x, i: x[i].sum(), np.array([1.0, 2.0, 3.0]), np.array([0, 0, 2]))
    np.testing.assert_allclose(g[0], [2.0, 0.0, 1.0], atol=1e-6)
    assert g[1] is None


def test_assert_modes_agree_reports_the_mode():
    from minigrad.course.testing import assert_modes_agree
    f = lambda x: x * 2.0 if isinstance(x, mg.Tensor) else x * 3.0     # eager and static differ
    with pytest.raises(AssertionError) as e:
        assert_modes_agree(f, np.ones(3, np.float32))
    msg = str(e.value)
    assert 'session value != eager value' in msg and 'session gradient 0' in msg
