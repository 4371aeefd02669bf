"""Errors a learner meets on the tape: right type, key words in the message, library state intact."""
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


def test_matmul_shape_mismatch_names_op_and_shapes():
    with pytest.raises(mg.ShapeError) as e:
        mg.tensor(np.ones((2, 3))) @ mg.tensor(np.ones((4, 5)))
    msg = str(e.value)
    assert 'matmul' in msg and '(2, 3)' in msg and '(4, 5)' in msg and isinstance(e.value, ValueError)


def test_matmul_scalar_operand():
    with pytest.raises(mg.ShapeError, match='matmul'):
        mg.matmul(mg.tensor(2.0), mg.tensor([1.0]))


def test_broadcast_mismatch_names_op_and_shapes():
    with pytest.raises(mg.ShapeError) as e:
        mg.tensor(np.ones((2, 3))) + mg.tensor(np.ones((4,)))
    msg = str(e.value)
    assert 'add' in msg and '(2, 3)' in msg and '(4,)' in msg and 'broadcast' in msg
    with pytest.raises(mg.ShapeError, match='mul'):
        mg.tensor(np.ones(3)) * mg.tensor(np.ones(2))
    with pytest.raises(mg.ShapeError, match='broadcast_to'):
        mg.broadcast_to(mg.tensor(np.ones(3)), (2, 4))


def test_other_shape_errors():
    with pytest.raises(mg.ShapeError, match='reshape'):
        mg.tensor(np.ones(6)).reshape(4, 2)
    with pytest.raises(mg.ShapeError, match='axis'):
        mg.tensor(np.ones(3)).sum(axis=2)
    with pytest.raises(mg.ShapeError, match='getitem'):
        mg.tensor(np.ones(3))[5]
    with pytest.raises(mg.ShapeError, match='concatenate'):
        mg.concatenate([mg.tensor(np.ones((2, 3))), mg.tensor(np.ones((3, 2)))], axis=0)


def test_second_backward_through_freed_graph():
    x = mg.tensor(2.0, requires_grad=True)
    y = x * x
    y.backward()
    with pytest.raises(mg.BackwardError) as e:
        y.backward()
    assert 'retain_graph=True' in str(e.value) and 'second time' in str(e.value)
    assert isinstance(e.value, RuntimeError)


def test_backward_of_non_scalar_needs_gradient():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(mg.BackwardError) as e:
        (x * 2).backward()
    msg = str(e.value)
    assert 'not a scalar' in msg and 'gradient' in msg and '(2,)' in msg


def test_backward_gradient_of_wrong_shape():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(mg.ShapeError, match='gradient has shape'):
        (x * 2).backward(gradient=np.ones(3))


def test_backward_without_requires_grad():
    with pytest.raises(mg.BackwardError, match='requires_grad=True'):
        (mg.tensor(1.0) * 2).backward()


def test_inplace_on_leaf_requiring_grad_refused():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    for op in ('+=', '-=', '*=', '/='):
        with pytest.raises(mg.BackwardError) as e:
            exec(f'w {op} 1.0', {'w': w})
        msg = str(e.value)
        assert 'in-place' in msg and 'leaf' in msg and 'requires grad' in msg and 'no_grad' in msg
    assert w.tolist() == [1.0, 2.0] and w.is_leaf          # unchanged


def test_inplace_shape_or_dtype_change_refused():
    x = mg.tensor([1.0, 2.0])
    with pytest.raises(mg.ShapeError, match='shape'):
        x += mg.tensor(np.ones((3, 2)))
    i = mg.tensor([1, 2])
    with pytest.raises(mg.ShapeError, match='dtype'):
        i += 0.5
    assert x.tolist() == [1.0, 2.0] and i.tolist() == [1, 2]


def test_grad_of_integer_tensor_refused():
    with pytest.raises(mg.BackwardError) as e:
        mg.tensor([1, 2], requires_grad=True)
    assert 'floating point' in str(e.value) and 'int64' in str(e.value)
    t = mg.tensor([1, 2])
    with pytest.raises(mg.BackwardError):
        t.requires_grad = True
    with pytest.raises(mg.BackwardError):
        mg.tensor([True], requires_grad=True)


def test_bool_of_many_elements_is_ambiguous():
    with pytest.raises(mg.MinigradError, match='ambiguous'):
        bool(mg.tensor([1.0, 2.0]) < 3)


def test_item_of_many_elements():
    with pytest.raises(mg.MinigradError, match='one-element'):
        mg.tensor([1.0, 2.0]).item()


def test_retain_grad_without_requires_grad():
    with pytest.raises(mg.BackwardError, match='retain_grad'):
        mg.tensor(1.0).retain_grad()


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


def test_symbol_and_tensor_mixed_is_clear():
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, (2,))
        with pytest.raises(mg.GraphError):
            p + mg.tensor([1.0, 2.0])


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
