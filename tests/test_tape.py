"""The dynamic tape: constructors, Tensor API, backward options, memory (no cycles), deep graphs."""
from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import minigrad as mg
from minigrad import core
from minigrad.core.tensor import TapeNode


@pytest.fixture
def no_gc():
    """Prove that freeing happens by reference counting alone."""
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


# ------------------------------------------------------------------ the programs from the issue
def test_scalar_product_program():
    a = mg.tensor(15.0, requires_grad=True)
    b = mg.tensor(20.0, requires_grad=True)
    c = a * b
    c.backward()
    assert c.item() == 300 and a.grad.item() == 20 and b.grad.item() == 15


def test_shared_subexpression_program_and_intermediate_grad():
    w = mg.tensor(2.0, requires_grad=True)
    x = mg.tensor(1.0, requires_grad=True)
    s = w + x
    y = s * (w + 1)
    y.backward()
    assert y.item() == 9 and w.grad.item() == 6 and x.grad.item() == 3
    assert s.grad is None                       # released: not a leaf, not retained

    w.grad = x.grad = None
    s = w + x
    s.retain_grad()
    y = s * (w + 1)
    y.backward()
    assert s.grad.item() == 3 and s.retains_grad and w.grad.item() == 6


def test_python_while_loop_on_tensors():
    first = mg.Tensor([0])
    second = mg.Tensor([10])
    while (first < second)[0]:
        first += 2
        second += 1
    assert first.tolist() == [20.0] and second.tolist() == [20.0]
    assert first.dtype == np.float32


# ------------------------------------------------------------------ constructors and attributes
def test_constructors_and_dtypes():
    assert mg.tensor([1.0, 2.0]).dtype == mg.float32
    assert mg.tensor([1, 2]).dtype == mg.int64
    assert mg.tensor([True]).dtype == mg.bool_
    assert mg.tensor(np.zeros(2)).dtype == mg.float64           # numpy arrays keep their dtype
    assert mg.tensor([1, 2], dtype=mg.float64).dtype == mg.float64
    assert mg.Tensor([0]).dtype == mg.float32                   # like torch.Tensor([0])
    assert mg.zeros(2, 3).shape == (2, 3) and mg.zeros((2, 3)).numpy().sum() == 0
    assert mg.ones(4).numpy().tolist() == [1, 1, 1, 1]
    assert mg.arange(3).tolist() == [0, 1, 2] and mg.arange(0.0, 1.0, 0.5).dtype == mg.float32
    assert mg.randn(3, 2).shape == (3, 2) and mg.rand(5).dtype == mg.float32
    t = mg.tensor([1.0], requires_grad=True, name='w')
    assert t.name == 'w' and t.requires_grad and t.is_leaf and t.grad is None and t.grad_fn is None


def test_manual_seed_reproducible():
    mg.manual_seed(7)
    a, b = mg.randn(3), mg.rand(2)
    mg.manual_seed(7)
    assert np.array_equal(a.numpy(), mg.randn(3).numpy()) and np.array_equal(b.numpy(), mg.rand(2).numpy())


def test_tensor_attributes_and_conversions():
    t = mg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.shape == (2, 2) and t.ndim == 2 and t.dtype == np.float32
    assert isinstance(t.numpy(), np.ndarray) and t.tolist() == [[1, 2], [3, 4]]
    assert t[0, 1].item() == 2.0 and t.T.tolist() == [[1, 3], [2, 4]]
    assert t.sum().item() == 10 and t.mean(axis=0).tolist() == [2, 3]
    assert t.max(axis=1, keepdims=True).shape == (2, 1) and t.max().item() == 4
    assert t.reshape(4).shape == (4,) and t.reshape(-1, 1).shape == (4, 1)
    assert t.transpose(1, 0).tolist() == t.T.tolist()
    np.testing.assert_allclose(t.exp().numpy(), np.exp(t.numpy()))
    np.testing.assert_allclose(t.log().numpy(), np.log(t.numpy()))
    np.testing.assert_allclose(t.tanh().numpy(), np.tanh(t.numpy()), rtol=1e-6)
    np.testing.assert_allclose(t.sigmoid().numpy(), 1 / (1 + np.exp(-t.numpy())), rtol=1e-6)
    assert (t - 2.5).relu().tolist() == [[0, 0], [0.5, 1.5]]
    assert float(mg.tensor(2.5)) == 2.5 and int(mg.tensor(3)) == 3


def test_operators():
    a, b = mg.tensor([1.0, 2.0]), mg.tensor([4.0, 8.0])
    assert (a + b).tolist() == [5, 10] and (a - b).tolist() == [-3, -6]
    assert (a * b).tolist() == [4, 16] and (b / a).tolist() == [4, 4]
    assert (a ** 2).tolist() == [1, 4] and (-a).tolist() == [-1, -2]
    assert (1 + a).tolist() == [2, 3] and (1 - a).tolist() == [0, -1] and (2 * a).tolist() == [2, 4]
    assert (8 / b).tolist() == [2, 1] and (2 ** a).tolist() == [2, 4]
    assert (a @ b).item() == 20
    assert (np.ones(2) + a).tolist() == [2, 3] and isinstance(np.ones(2) + a, mg.Tensor)
    assert (a < b).tolist() == [True, True] and (a > 1.5).tolist() == [False, True]
    assert (a <= 1).tolist() == [True, False] and (a >= 2).tolist() == [False, True]
    assert (a == 1).tolist() == [True, False] and (a != 1).tolist() == [False, True]
    assert (a < b).dtype == np.bool_


def test_comparisons_not_differentiable():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    c = a > 1.5
    assert not c.requires_grad and c.grad_fn is None


def test_bool_of_one_element_tensors():
    assert bool(mg.tensor([1.0]) < mg.tensor([2.0]))
    assert not mg.tensor(0.0)
    if mg.tensor(3) > 2:
        pass
    else:
        pytest.fail('if on a tensor')


def test_inplace_ops_on_non_leaf_and_plain_tensors():
    x = mg.tensor([1.0, 2.0])
    x += 1
    x -= mg.tensor([0.5, 0.5])
    x *= 2
    x /= 4
    assert x.tolist() == [0.75, 1.25]
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    y = w * 1
    y += w                  # a non-leaf: allowed, recorded
    y *= 3
    y.sum().backward()
    assert w.grad.tolist() == [6.0, 6.0]
    i = mg.tensor([1, 2])
    i += 1
    assert i.tolist() == [2, 3] and i.dtype == np.int64


def test_inplace_does_not_corrupt_saved_values():
    w = mg.tensor([2.0, 3.0], requires_grad=True)
    y = w * 1
    z = y * y               # saves y's array
    y += 100                # rebinding y must not change what z's node saved
    assert z.grad_fn.saved[0].tolist() == [2.0, 3.0]
    with pytest.raises(mg.BackwardError, match='modified by an in-place operation'):
        z.sum().backward()  # ... and backward refuses, as PyTorch (tests/test_op_matrix.py, version counters)


def test_inplace_on_leaf_allowed_under_no_grad():
    w = mg.tensor([1.0], requires_grad=True)
    with mg.no_grad():
        w -= 0.5
    assert w.tolist() == [0.5] and w.is_leaf and w.requires_grad


# ------------------------------------------------------------------ no_grad, Tape
def test_no_grad_records_nothing_and_restores():
    w = mg.tensor(1.0, requires_grad=True)
    with mg.no_grad():
        y = w * 2
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled() and not y.requires_grad and y.grad_fn is None

    @mg.no_grad()
    def f(x):
        return x * 3
    assert not f(w).requires_grad and mg.is_grad_enabled()


def test_enable_grad_as_a_decorator_records_inside_no_grad():
    w = mg.tensor(1.0, requires_grad=True)

    @mg.enable_grad()
    def f(x):
        return x * 3
    with mg.no_grad():
        y = f(w)
        assert not mg.is_grad_enabled()
    assert y.requires_grad and y.grad_fn is not None


def test_tape_collects_entries_in_order():
    x = mg.tensor(2.0, requires_grad=True)
    with mg.Tape() as tape:
        y = x * x
        z = y + 1
        with mg.no_grad():
            u = z * 2           # executed, but no_grad records nothing, on any tape
    assert [e.op for e in tape.entries] == ['mul', 'add']
    assert tape.entries[0].inputs == (x, x) and tape.entries[1].output is z
    assert len(tape) == 2 and 'mul' in repr(tape)
    assert u.item() == 10
    w = x * 3                   # after the block: not collected
    assert len(tape.entries) == 2


def test_nested_tapes():
    x = mg.tensor(1.0)
    with mg.Tape() as outer:
        x + 1
        with mg.Tape() as inner:
            x * 2
    assert [e.op for e in outer.entries] == ['add', 'mul'] and [e.op for e in inner.entries] == ['mul']


# ------------------------------------------------------------------ backward options
def test_backward_with_gradient_argument():
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(gradient=mg.tensor([1.0, 0.0, 2.0]))
    assert x.grad.tolist() == [2.0, 0.0, 12.0]
    x2 = mg.tensor([1.0, 2.0], requires_grad=True)
    (x2 * 3).backward(np.array([1.0, 1.0]))      # numpy / list gradients too
    assert x2.grad.tolist() == [3.0, 3.0] and x2.grad.dtype == np.float32


def test_gradient_accumulates_across_backward_calls():
    x = mg.tensor(3.0, requires_grad=True)
    (x * x).backward()
    (x * 2).backward()
    assert x.grad.item() == 8.0
    x.grad = None
    (x * 2).backward()
    assert x.grad.item() == 2.0


def test_retain_graph_allows_second_backward():
    x = mg.tensor(3.0, requires_grad=True)
    y = x.exp() * x
    y.backward(retain_graph=True)
    g1 = x.grad.item()
    y.backward()
    assert x.grad.item() == pytest.approx(2 * g1)


def test_backward_of_leaf_itself():
    x = mg.tensor(3.0, requires_grad=True)
    x.backward()
    assert x.grad.item() == 1.0


def test_create_graph_second_and_third_derivatives():
    x = mg.tensor(2.0, requires_grad=True)
    y = x ** 3
    y.backward(create_graph=True)
    g = x.grad                        # 3x^2 = 12, connected to x
    assert g.item() == 12 and g.requires_grad
    x.grad = None
    g.backward(create_graph=True)     # 6x = 12
    h = x.grad
    assert h.item() == 12
    x.grad = None
    h.backward()                      # 6
    assert x.grad.item() == 6


def test_create_graph_through_saves_out_and_reductions():
    x = mg.tensor([0.5, -1.0, 2.0], requires_grad=True, dtype=mg.float64)
    y = (x.tanh() * x.exp()).sum() + mg.logsumexp(x) + x.max()
    y.backward(create_graph=True)
    g = x.grad
    x.grad = None
    (g * mg.tensor([1.0, 2.0, 3.0], dtype=mg.float64)).sum().backward()
    hv = x.grad.numpy()

    def grad_at(xv):
        t = mg.tensor(xv, requires_grad=True)
        ((t.tanh() * t.exp()).sum() + mg.logsumexp(t) + t.max()).backward()
        return t.grad.numpy()
    v, eps = np.array([1.0, 2.0, 3.0]), 1e-6
    num = [(grad_at(x.numpy() + eps * e) @ v - grad_at(x.numpy() - eps * e) @ v) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(hv, num, rtol=1e-5, atol=1e-6)


def test_detach_shares_data_and_records_nothing():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2)
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and np.shares_memory(d.numpy(), y.numpy())
    z = (d * x).sum()
    z.backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_grads_are_distinct_arrays():
    a, b = mg.tensor([1.0, 2.0], requires_grad=True), mg.tensor([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    a.grad.numpy()[:] = 100            # a learner changing one .grad in place must not change another
    assert b.grad.tolist() == [1.0, 1.0]
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    g = mg.tensor([5.0, 6.0])
    x.backward(g)
    x.grad.numpy()[:] = 0
    assert g.tolist() == [5.0, 6.0]


def test_broadcast_gradients_are_writeable_and_shaped():
    b = mg.tensor([1.0, 2.0], requires_grad=True)
    (mg.zeros(3, 2) + b).sum().backward()
    assert b.grad.tolist() == [3.0, 3.0]
    s = mg.tensor(1.0, requires_grad=True)
    (mg.ones(2, 2) * s).sum().backward()
    assert s.grad.shape == () and s.grad.item() == 4 and s.grad.numpy().flags.writeable


def test_shared_inputs_accumulate_many_paths():
    x = mg.tensor(1.5, requires_grad=True)
    y = x * x * x + x * 2 + x
    y.backward()
    assert x.grad.item() == pytest.approx(3 * 1.5 ** 2 + 3)


# ------------------------------------------------------------------ deep graphs and memory
def test_ten_thousand_op_chain_backward():
    x = mg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.backward()
    assert x.grad.item() == pytest.approx(1.0001 ** 10_000, rel=1e-3)


def test_graph_freed_by_refcount(no_gc):
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).exp().sum()
    node = weakref.ref(y.grad_fn)
    inner = weakref.ref(y.grad_fn.parents[0])
    assert isinstance(node(), TapeNode)
    del y
    assert node() is None and inner() is None          # no cycles: freed without gc.collect()


def test_graph_freed_after_backward_and_with_retained_grad(no_gc):
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    y = (h * h).sum()
    nodes = [weakref.ref(y.grad_fn), weakref.ref(h.grad_fn)]
    y.backward(create_graph=True)
    gx = weakref.ref(x.grad)
    del y, h
    x.grad = None
    assert all(n() is None for n in nodes) and gx() is None


def test_deep_graph_freed_without_recursion(no_gc):
    x = mg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y + 1.0
    first = weakref.ref(y.grad_fn)
    del y            # freeing a 10,000-node chain must not overflow the C stack either
    assert first() is None


def test_saved_arrays_released_after_backward():
    x = mg.tensor(np.ones(3), requires_grad=True)
    y = (x * 2).exp().sum()
    node = y.grad_fn
    y.backward()
    assert node.saved is None and node.parents[0].saved is None


def test_non_leaf_grad_is_none_after_backward():
    x = mg.tensor([1.0], requires_grad=True)
    h = x * 2
    (h * h).sum().backward()
    assert h.grad is None and x.grad is not None


def test_fan_out_accumulation_with_retained_grad():
    x = mg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    h = x * 1.0
    h.retain_grad()
    y = (h * 2 + h * 3 + h * h + h).sum()          # four paths into h: sums are added in place
    y.backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 + 3 + 2 * h.numpy() + 1)
    np.testing.assert_allclose(x.grad.numpy(), h.grad.numpy())
    assert not np.shares_memory(x.grad.numpy(), h.grad.numpy())


def test_docstring_examples_run():
    import doctest, importlib
    for name in ('minigrad.core', 'minigrad.core.names', 'minigrad.core.tensor', 'minigrad.core.conversions', 'minigrad.core.creation',
                 'minigrad.course.testing'):  # (mg.tensor: the function)
        mod = importlib.import_module(name)
        res = doctest.testmod(mod)
        assert res.failed == 0 and res.attempted > 0, mod.__name__


def test_the_tapes_own_walk_gives_core_topo_orders_order():
    """The fast layer's tape_walk item (tensor._tape_order, no callbacks) gives what
    core.topo_order gives: every reachable node, consumers first, and the leaves in the order first reached."""
    T = sys.modules['minigrad.core.tensor']     # (mg.tensor is the function)

    def reference(root):
        seen = core.topo_order([root], lambda v: v.parents if type(v) is TapeNode else (),
                                  lambda v: v.seq if type(v) is TapeNode else -1)
        return [v for v in reversed(seen) if type(v) is TapeNode], [v for v in seen if type(v) is not TapeNode]

    x, w, b = (mg.tensor([1.0, -2.0], requires_grad=True) for _ in range(3))
    h = x * w + b
    y = (h + x).sum() * (mg.relu(h) * w).sum() + (x * 2.0).sum() + mg.tensor(3.0)      # shared inputs, a diamond
    chain = x
    for bias in (b, h, b):                                                              # an input used twice
        chain = mg.relu(chain * w + bias)
    for root in (y, h, chain.sum(), mg.relu(x)):
        nodes, leaves = T._tape_order(root.grad_fn)
        ref_nodes, ref_leaves = reference(root.grad_fn)
        assert [id(v) for v in nodes] == [id(v) for v in ref_nodes]
        assert [id(v) for v in leaves] == [id(v) for v in ref_leaves]
    assert len(T._tape_order(y.grad_fn)[1]) == 3


def test_relu_on_a_tensor_makes_no_tensor_for_its_mask_unless_a_tape_records(monkeypatch):
    """The fast layer's relu item: relu's mask 0 < x is a plain array on the tape and its where node is made
    directly (no eager_apply at all); its node, value and gradient are where(0 < x, x, 0)'s (nan -> 0, gradient
    0 at 0), and a trace still sees the less."""
    was = mg.fast.installed()
    mg.fast.install(['relu'])
    try:
        _relu_checks(monkeypatch)
    finally:
        if 'relu' not in was:
            mg.fast.uninstall(['relu'])


def _relu_checks(monkeypatch):
    T = sys.modules['minigrad.core.tensor']     # (mg.tensor is the function)
    ops, eager = [], T.eager_apply
    monkeypatch.setattr(T, 'eager_apply', lambda prim, args, params: ops.append(prim.name) or eager(prim, args, params))
    x = mg.tensor([-1.0, 0.0, float('nan'), 2.0], requires_grad=True)
    y = mg.relu(x)
    node = y.grad_fn
    assert ops == [] and node.prim.name == 'where' and node.parents == (None, x, None) and node.params == {}
    assert node.saved[0].dtype == np.bool_ and node.saved[1] is x.data and node.saved[2] == 0
    np.testing.assert_array_equal(y.numpy(), [0.0, 0.0, 0.0, 2.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0, 1.0])
    t = mg.trace(lambda a: mg.relu(a), np.array([-1.0, 2.0]))
    assert [n.op for n in t.graph.nodes if n.op in ('less', 'greater', 'where')] == ['less', 'where']
    np.testing.assert_array_equal(t(np.array([3.0, -4.0])), [3.0, 0.0])
    i = mg.relu(mg.tensor(np.array([-2, 3])))          # integers: the general path (dtype rules)
    assert i.numpy().tolist() == [0, 3]
