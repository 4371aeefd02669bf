"""PyTorch-style version counters: an in-place change of a value saved for backward makes backward
raise (as PyTorch's 'modified by an inplace operation'); every case is run in PyTorch too, and both
must raise, or both give the same gradients."""
import numpy as np
import pytest

import minigrad as mg

torch = pytest.importorskip('torch')


def _exp(lib, t):
    return mg.exp(t) if lib is mg else torch.exp(t)


def _tanh(lib, t):
    return mg.tanh(t) if lib is mg else torch.tanh(t)


def _leaf(lib, values):
    return mg.tensor(values, requires_grad=True) if lib is mg else torch.tensor(values, requires_grad=True)


def _input_saved_by_mul(lib, a):
    b = a * 1.0
    c = b * b
    b += 1
    return c.sum()


def _output_saved_by_exp(lib, a):
    e = _exp(lib, a * 1.0)
    e += 1
    return e.sum()


def _input_of_exp_changed(lib, a):        # exp's VJP reads only its output: allowed
    b = a * 1.0
    c = _exp(lib, b)
    b *= 3
    return (c * b).sum()


def _input_of_tanh_changed(lib, a):
    b = a * 2.0
    c = _tanh(lib, b)
    b -= 1
    return (c + b).sum()


def _change_after_a_use_that_saves_nothing(lib, a):
    b = a * 1.0
    c = b + 2.0                            # add's VJP reads no input value (saves_inputs=False)
    b += 1
    return (c * 3.0).sum()


def _in_place_then_use(lib, a):           # the change comes first: every op sees the new value
    b = a * 2.0
    b *= 3
    return (b * b).sum()


def _chain_of_in_place(lib, a):
    b = a + 0.0
    b += a
    b *= a
    return (b * 1.0).sum()


CASES = [_input_saved_by_mul, _output_saved_by_exp, _input_of_exp_changed, _input_of_tanh_changed,
         _change_after_a_use_that_saves_nothing, _in_place_then_use, _chain_of_in_place]


@pytest.mark.parametrize('case', CASES, ids=lambda f: f.__name__.strip('_'))
def test_in_place_changes_raise_or_not_as_in_pytorch(case):
    values = [0.5, -1.5, 2.0]
    results = {}
    for lib in (mg, torch):
        a = _leaf(lib, values)
        try:
            case(lib, a).backward()
            results[lib.__name__] = ('ok', np.asarray(a.grad.detach() if lib is torch else a.grad.numpy()))
        except (mg.MinigradError, RuntimeError) as e:
            results[lib.__name__] = ('raised', str(e))
    (km, vm), (kt, vt) = results['minigrad'], results['torch']
    assert km == kt, results
    if km == 'ok':
        np.testing.assert_allclose(vm, vt, rtol=1e-6)
    else:
        assert 'modified by an in-place operation' in vm and 'version' in vm and 'inplace' in vt


def test_the_error_names_the_op_the_value_and_both_versions():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1.0
    c = b * b
    b += 1
    b += 1
    assert b._version == 2
    with pytest.raises(mg.BackwardError, match=r"'mul' saved .*input 0.* now at version 2, the op saved version 0"):
        c.sum().backward()
    assert a.grad is None


def test_a_tape_that_refused_is_unchanged_and_a_new_forward_works():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1.0
    c = b * b
    b += 1
    with pytest.raises(mg.BackwardError):
        c.sum().backward()
    assert c.grad_fn.saved is not None             # nothing was freed
    (b * b).sum().backward()                       # d/da (a+1)^2 = 2(a+1)
    assert a.grad.tolist() == [4.0, 6.0]


def test_an_optimizer_step_bumps_the_version_as_in_pytorch():
    for lib in (mg, torch):
        w = _leaf(lib, [1.0])
        opt = (mg.optim if lib is mg else torch.optim).SGD([w], lr=0.1)
        loss = (w * w).sum()
        loss.backward(retain_graph=True)
        opt.step()
        with pytest.raises((mg.BackwardError, RuntimeError), match='in-?place'):
            loss.backward()
        assert w._version >= 1


def test_a_usual_training_loop_never_trips_the_check():
    w = mg.tensor([1.0, -2.0], requires_grad=True)
    opt = mg.optim.SGD([w], lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        opt.step()
        with mg.no_grad():
            w -= 0.0 * w
    assert w._version == 10
    np.testing.assert_allclose(w.numpy(), np.array([1.0, -2.0]) * 0.8 ** 5, rtol=1e-6)


def test_retain_grad_follows_the_tensor_through_an_in_place_op():
    for lib in (mg, torch):
        x = _leaf(lib, [1.0, 2.0])
        h = x * 2
        h.retain_grad()
        h *= 3
        (h * h).sum().backward()
        assert h.grad.tolist() == [12.0, 24.0] and x.grad.tolist() == [72.0, 144.0]


def test_numpy_views_of_a_tensor_that_requires_grad_are_read_only():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    for view in (a.numpy(), np.asarray(a)):
        with pytest.raises(ValueError, match='read-only'):
            view[0] = 5.0
    b = mg.tensor([1.0, 2.0])
    np.asarray(b)[0] = 5.0                          # no grad: the array is the tensor's own
    assert b.tolist() == [5.0, 2.0]


SHAPE_ONLY = {   # an op whose record says saves_inputs=False, and a use of it on a (3, 2) leaf
    'add': lambda a: a + 1.0, 'sum': lambda a: a.sum(axis=0), 'cast': lambda a: a.astype(mg.float64),
    'reshape': lambda a: a.reshape((2, 3)), 'transpose': lambda a: a.T, 'broadcast_to': lambda a: mg.broadcast_to(a, (4, 3, 2)),
    'getitem': lambda a: a[1:, 0], 'concatenate': lambda a: mg.concatenate([a, a], axis=1),
    'exp': mg.exp, 'tanh': mg.tanh,
}


def test_every_op_that_says_it_saves_no_inputs_really_reads_none():
    """Replace the saved inputs by NaN arrays after the forward pass: the gradient must not change."""
    from minigrad.core import PRIMITIVES
    flagged = {n for n, p in PRIMITIVES.items() if not p.saves_inputs}
    assert flagged - {'sum_to_like', 'broadcast_like', 'reshape_like'} == set(SHAPE_ONLY)
    x = np.arange(6.0).reshape(3, 2) / 7
    for name, f in SHAPE_ONLY.items():
        grads = []
        for poison in (False, True):
            a = mg.tensor(x, requires_grad=True)
            y = f(a * 1.0)
            assert y.grad_fn.prim.name == name
            if poison:
                y.grad_fn.saved = [np.full_like(v, np.nan) if isinstance(v, np.ndarray) else v
                                   for v in y.grad_fn.saved]
            (y * mg.tensor(np.linspace(1, 2, y.size).reshape(y.shape))).sum().backward()
            grads.append(a.grad.numpy())
        np.testing.assert_array_equal(grads[0], grads[1], err_msg=name)


def test_a_freed_graph_still_says_it_was_freed_after_an_in_place_change():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    y = mg.exp(a * 2.0).sum()
    y.backward()
    b = a * 1.0
    b += 1                                          # something is stale now
    with pytest.raises(mg.BackwardError, match='second time'):
        y.backward()


def test_where_reads_only_its_condition():
    """where's record says saves_inputs=(0,): poisoning x and y after the forward pass changes no gradient."""
    c = np.array([[True, False], [False, True], [True, True]])
    grads = []
    for poison in (False, True):
        a, b = (mg.tensor(np.arange(6.0).reshape(3, 2) / k, requires_grad=True) for k in (7, 5))
        y = mg.where(c, a * 1.0, b * 1.0)
        if poison:
            y.grad_fn.saved = [v if k == 0 else np.full_like(v, np.nan) for k, v in enumerate(y.grad_fn.saved)]
        (y * mg.tensor([[1.0, 2.0]])).sum().backward()
        grads.append((a.grad.numpy(), b.grad.numpy()))
    np.testing.assert_array_equal(grads[0], grads[1])


def _relu_chain(n, layers=10):
    rng = np.random.default_rng(0)
    ws = [mg.tensor(rng.standard_normal((n, n)).astype(np.float32), requires_grad=True) for _ in range(layers)]
    y = mg.tensor(rng.standard_normal((n, n)).astype(np.float32))
    for w in ws:
        y = mg.relu(y * w + w)
    return y, ws


def test_the_tape_keeps_stand_ins_for_big_inputs_its_vjps_read_only_the_shape_of():
    from minigrad.core.tensor import is_stand_in
    y, _ = _relu_chain(128, 1)                      # 64 KiB of float32: the memory rule applies
    where_node = y.grad_fn
    add_node = where_node.parents[1]
    assert [is_stand_in(v) for v in where_node.saved] == [False, True, False]      # keeps the condition only
    assert [is_stand_in(v) for v in add_node.saved] == [True, True]
    assert add_node.saved[0].shape == (128, 128) and add_node.saved[0].dtype == np.float32
    assert add_node.saved[0].nbytes == 128 * 128 * 4 and add_node.saved[0].strides == (0, 0)
    small, _ = _relu_chain(64, 1)                   # 16 KiB: kept as before (drawings show their values)
    assert not any(is_stand_in(v) for v in [*small.grad_fn.saved, *small.grad_fn.parents[1].saved])


def test_the_relu_chain_keeps_what_pytorch_keeps():
    """Ten relu(y * w + w) layers at 128 x 128 float32 keep per layer the relu result and the bool
    condition (80 KiB), not also the product and the sum (128 KiB more), until backward."""
    import tracemalloc
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    y, ws = _relu_chain(128)
    kept = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    weights = 10 * 64 * 1024 + 64 * 1024            # ws and the input
    assert kept - weights < 10 * 100 * 1024, kept - weights
    y.sum().backward()
    assert ws[0].grad.shape == (128, 128)


def test_a_stepper_over_a_graph_with_stand_ins_says_why_it_cannot_show_values():
    y, _ = _relu_chain(128, 2)
    with pytest.raises(mg.MinigradError, match='kept only the shape of inputs of 64 KiB'):
        mg.viz.Stepper(y.sum())
    svg = mg.draw(y.sum()).source
    assert 'mean 0, max 0' not in svg


def test_an_input_where_reads_only_the_shape_of_may_change_in_place():
    x = mg.tensor([1.0, -2.0], requires_grad=True)
    a = x * 1.0
    y = mg.where(mg.tensor([True, False]), a, 0.0)
    a += 5.0                                        # where's VJP reads only a's shape: no error
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0]
    b = x * 1.0
    y = b * 2.0 + mg.where(mg.tensor([True, False]), b, 0.0)
    b += 5.0                                        # mul's VJP reads b: PyTorch's version check
    with pytest.raises(mg.BackwardError, match="'mul' saved"):
        y.sum().backward()
