"""mg.checkpoint and mg.checkpoint_sequential on the tape (as torch.utils.checkpoint, use_reentrant=False):
gradients bit for bit as without checkpointing, random draws replayed, create_graph, nesting, in-place
changes, no_grad, bad input, and what the tape keeps alive (weak references, never the clock)."""
from __future__ import annotations

import functools
import gc
import weakref

import numpy as np
import pytest

import minigrad as mg
from minigrad.core.tensor import TapeNode, _tape_order, is_stand_in


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes(), a.shape, a.dtype


def grads_of(run, leaves):
    """The gradient arrays of ``leaves`` after ``run().sum().backward()``."""
    for t in leaves:
        t.grad = None
    out = run()
    (out if isinstance(out, mg.Tensor) else sum(o.sum() for o in out)).sum().backward()
    return [bits(t.grad.numpy()) if t.grad is not None else None for t in leaves]


def mlp(layers=6, width=8, dtype=None):
    return mg.nn.Sequential(*[m for _ in range(layers) for m in (mg.nn.Linear(width, width), mg.nn.Tanh())])


@pytest.fixture
def no_gc():
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


# ------------------------------------------------------------------ bit-identical gradients
def test_sequential_mlp_every_segment_count_bit_identical():
    mg.manual_seed(0)
    net = mlp()
    x = mg.randn(5, 8, requires_grad=True)
    leaves = [x, *net.parameters()]
    want = grads_of(lambda: net(x), leaves)
    assert grads_of(lambda: mg.checkpoint(net, x), leaves) == want
    for segments in range(1, len(net) + 1):
        assert grads_of(lambda: mg.checkpoint_sequential(net, segments, x), leaves) == want, segments
    assert grads_of(lambda: mg.checkpoint_sequential(list(net), 4, x), leaves) == want


def _program(seed):
    """A random small program: a chain of ops on (h, captured tensors) with broadcasting and reuse."""
    r = np.random.default_rng(seed)
    w = mg.tensor(r.standard_normal((4, 4)), dtype=mg.float32, requires_grad=True)
    row = mg.tensor(r.standard_normal((1, 4)), dtype=mg.float32, requires_grad=True)
    s = mg.tensor(r.standard_normal(()), dtype=mg.float32, requires_grad=True)
    steps = [lambda h: h @ w, lambda h: mg.tanh(h * row + s), lambda h: h * h - row, lambda h: mg.exp(-h * h) / (1 + h * h),
             lambda h: mg.relu(h) + mg.sigmoid(h) * s, lambda h: h.sum(axis=0, keepdims=True) * h,
             lambda h: mg.softmax(h, axis=1) * h, lambda h: mg.maximum(h, row) - h.mean()]
    chosen = [steps[i] for i in r.integers(0, len(steps), 8)]
    a, b = sorted(r.choice(9, 2, replace=False))
    return functools.partial(_chain, chosen), (a, b), [w, row, s]


def _chain(steps, h):
    for f in steps:
        h = f(h)
    return h


@pytest.mark.parametrize('seed', range(6))
def test_random_programs_bit_identical(seed):
    chain, (a, b), params = _program(seed)
    x = mg.tensor(np.random.default_rng(100 + seed).standard_normal((3, 4)), dtype=mg.float32, requires_grad=True)
    head, block, tail = (functools.partial(_chain, chain.args[0][i:j]) for i, j in ((0, a), (a, b), (b, 9)))
    leaves = [x, *params]
    want = grads_of(lambda: tail(block(head(x))), leaves)
    assert grads_of(lambda: tail(mg.checkpoint(block, head(x))), leaves) == want
    # the block's input used again after it (a residual): the sums of cotangents keep their order
    assert grads_of(lambda: tail(mg.checkpoint(block, head(x)) + head(x) * 0.5), leaves) == \
        grads_of(lambda: tail(block(head(x)) + head(x) * 0.5), leaves)


def test_a_block_returning_a_tuple_with_shared_values():
    mg.manual_seed(1)
    w, x = mg.randn(4, 4, requires_grad=True), mg.randn(3, 4, requires_grad=True)

    def f(v):
        h = v @ w
        return h.tanh(), {'twice': h * 2.0, 'n': 3}, h

    def use(out):
        a, d, h = out
        return (a * d['twice']).sum() + h.exp().sum() * d['n'] + a.sum()
    assert grads_of(lambda: use(mg.checkpoint(f, x)), [x, w]) == grads_of(lambda: use(f(x)), [x, w])


def test_against_torch_checkpoint_in_float64():
    torch = pytest.importorskip('torch')
    mg.manual_seed(2)
    net = mg.nn.Sequential(*[m for _ in range(5) for m in (mg.nn.Linear(6, 6), mg.nn.Tanh())])
    for p in net.parameters():
        p.data = p.data.astype(np.float64)
    tnet = torch.nn.Sequential(*[m for _ in range(5) for m in (torch.nn.Linear(6, 6), torch.nn.Tanh())]).double()
    with torch.no_grad():
        for tp, p in zip(tnet.parameters(), net.parameters()):
            tp.copy_(torch.from_numpy(p.data.copy()))
    xv = np.random.default_rng(3).standard_normal((4, 6))
    x, tx = mg.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    (mg.checkpoint_sequential(net, 3, x) ** 2).sum().backward()
    (torch.utils.checkpoint.checkpoint_sequential(tnet, 3, tx, use_reentrant=False) ** 2).sum().backward()
    for p, tp in zip([x, *net.parameters()], [tx, *tnet.parameters()]):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------ randomness, create_graph, nesting
def test_random_mask_and_random_depth_are_replayed():
    w, x = mg.randn(4, 4, requires_grad=True), mg.randn(3, 4, requires_grad=True)

    def block(v):                       # a dropout-like mask and a random depth (DynamicNet)
        for _ in range(int(mg.rand(()).item() * 4) + 1):
            v = mg.where(mg.rand(*v.shape) > 0.5, (v @ w).tanh(), 0.0) * 2.0
        return v

    def run(ck):
        mg.manual_seed(7)
        out = mg.checkpoint(block, x) if ck else block(x)
        after = mg.randn(3)             # draws after the block are the same too
        return out * after[0]
    assert grads_of(lambda: run(True), [x, w]) == grads_of(lambda: run(False), [x, w])
    mask = lambda v: mg.where(mg.rand(*v.shape) > 0.5, v @ w, 0.0)
    mg.manual_seed(7)
    want = grads_of(lambda: mask(x), [x, w])
    mg.manual_seed(7)
    assert grads_of(lambda: mg.checkpoint(mask, x, preserve_rng_state=False), [x, w]) != want  # other draws


def test_create_graph_second_order_bit_identical():
    def second(ck):
        x = mg.tensor([0.3, -0.7, 1.1], requires_grad=True)
        w = mg.tensor([0.5, 2.0, -1.0], requires_grad=True)
        f = lambda v: (v * v * w).tanh() * v
        y = (mg.checkpoint(f, x) if ck else f(x)).sum()
        y.backward(create_graph=True)
        g = x.grad
        x.grad = w.grad = None
        (g * g).sum().backward()
        return [bits(a.numpy()) for a in (g, x.grad, w.grad)]
    assert second(True) == second(False)


def test_nested_checkpoints_bit_identical():
    mg.manual_seed(4)
    w, x = mg.randn(4, 4, requires_grad=True), mg.randn(3, 4, requires_grad=True)
    inner = lambda v: (v @ w).tanh()
    outer = lambda v: mg.checkpoint(inner, mg.sin(v) * 2.0) @ w + v
    run = lambda ck: (mg.checkpoint(outer, x) if ck else outer(x)) * x
    assert grads_of(lambda: run(True), [x, w]) == grads_of(lambda: run(False), [x, w])


def test_retain_graph_recomputes_again_and_a_freed_graph_says_so():
    mg.manual_seed(5)
    w, x = mg.randn(4, 4, requires_grad=True), mg.randn(3, 4)
    y = mg.checkpoint(lambda v: (v @ w).tanh(), x).sum()
    y.backward(retain_graph=True)
    first = bits(w.grad.numpy())
    w.grad = None
    y.backward()
    assert bits(w.grad.numpy()) == first
    with pytest.raises(mg.BackwardError, match='retain_graph=True'):
        y.backward()


# ------------------------------------------------------------------ in place, no_grad, graphs, bad input
def test_an_input_changed_in_place_raises_as_the_tape_does():
    w = mg.randn(4, 4, requires_grad=True)
    messages = []
    for ck in (False, True):
        x = mg.randn(3, 4) * 1.0
        f = lambda v: (v @ w).tanh()
        y = mg.checkpoint(f, x) if ck else f(x)
        x += 1.0
        with pytest.raises(mg.BackwardError, match='modified by an in-place operation') as e:
            y.sum().backward()
        messages.append(str(e.value))
    assert messages[0] == messages[1]

    def changes_its_own(v):             # a value the block saved, then changed in place: the same error too
        h = v @ w
        y = h * h
        h += 1.0
        return y + h
    for ck in (False, True):
        out = mg.checkpoint(changes_its_own, mg.randn(3, 4)) if ck else changes_its_own(mg.randn(3, 4))
        with pytest.raises(mg.BackwardError, match="'mul' saved .* modified by an in-place operation"):
            out.sum().backward()
    x = mg.randn(3, 4)      # an input only added to: the tape needs no value of it, checkpoint's rerun does
    y = mg.checkpoint(lambda v: v + w[0], x)
    x += 1.0
    with pytest.raises(mg.BackwardError, match="'checkpoint_inputs' saved .* modified by an in-place"):
        y.sum().backward()


def test_under_no_grad_fn_just_runs():
    w = mg.randn(4, 4, requires_grad=True)
    with mg.no_grad():
        y = mg.checkpoint(lambda v: (v @ w).tanh(), mg.randn(3, 4))
    assert not y.requires_grad and y.grad_fn is None


def test_symbols_and_other_value_kinds_are_refused():
    with mg.Graph().as_default():
        p = mg.placeholder(mg.float32, (3,), name='p')
        with pytest.raises(mg.GraphError, match='checkpointing a graph .* not supported yet'):
            mg.checkpoint(mg.tanh, p)
    with pytest.raises(mg.GraphError, match='not supported yet'):
        mg.grad(lambda v: mg.checkpoint(mg.tanh, v).sum())(mg.ones(3))
    with pytest.raises(mg.errors.InputError, match='Dual'):
        mg.jvp(lambda v: mg.checkpoint(mg.tanh, v), (mg.ones(3),), (mg.ones(3),))


@pytest.mark.parametrize('call, message', [
    (lambda x: mg.checkpoint(3, x), r'fn must be callable .*got int 3'),
    (lambda x: mg.checkpoint(mg.tanh, x, use_reentrant=True), 'use_reentrant=True'),
    (lambda x: mg.checkpoint(mg.tanh, x, preserve_rng_state='yes'), 'preserve_rng_state: expected True or False'),
    (lambda x: mg.checkpoint_sequential(mlp(2), 0, x), r'segments: expected an int >= 1, got int 0'),
    (lambda x: mg.checkpoint_sequential(mlp(2), 5, x), r'segments must be between 1 and .* \(4\), got 5'),
    (lambda x: mg.checkpoint_sequential(mlp(2), 1.5, x), 'segments: expected an int'),
    (lambda x: mg.checkpoint_sequential(mg.nn.Linear(8, 8), 1, x), 'modules must be an nn.Sequential or a list'),
    (lambda x: mg.checkpoint_sequential([mg.tanh, 2], 1, x), r'modules\[1\] is int 2, not callable'),
    (lambda x: mg.checkpoint_sequential([], 1, x), 'modules is empty'),
])
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(mg.errors.InputError, match=message):
        call(mg.randn(2, 8, requires_grad=True))


def test_a_rerun_that_records_other_ops_is_refused():
    w, calls = mg.randn(4, 4, requires_grad=True), []

    def moody(v):                       # Python's own state, not mg's generator: the rerun differs
        calls.append(1)
        return (v @ w).tanh() if len(calls) == 1 else (v @ w).sin().tanh()
    y = mg.checkpoint(moody, mg.randn(3, 4))
    with pytest.raises(mg.BackwardError, match='recorded other ops than its forward'):
        y.sum().backward()


# ------------------------------------------------------------------ what the tape keeps alive
def _probe_net(blocks, registry, w):
    """``blocks`` blocks of three ops; each call of block k (forward or rerun) registers weak references to
    its two intermediate arrays, and how many arrays of the blocks after it are alive when it starts."""
    def block(k, v):
        later = sum(r() is not None for j in range(k + 1, blocks) for r in registry[j])
        registry['alive_later'].append((k, later))
        a = v @ w
        b = a.tanh()
        registry[k] += [weakref.ref(a.data), weakref.ref(b.data)]
        return (b @ w).tanh()
    return [functools.partial(block, k) for k in range(blocks)]


@pytest.mark.parametrize('ck', [False, True])
def test_the_tape_keeps_only_the_inputs_and_frees_a_rerun_as_it_leaves(ck, no_gc):
    registry = {k: [] for k in range(4)}
    registry['alive_later'] = []
    w, x = mg.randn(8, 8, requires_grad=True), mg.randn(5, 8)
    blocks = _probe_net(4, registry, w)
    h = x
    for f in blocks:
        h = mg.checkpoint(f, h) if ck else f(h)
    loss = h.sum()
    forward = [r for k in range(4) for r in registry[k]]
    assert sum(r() is not None for r in forward) == (0 if ck else 8)
    saved = [v for n in _tape_order(loss.grad_fn)[0] for v in (*n.saved, n.out) if type(v) is np.ndarray]
    # distinct (5, 8) arrays: the four blocks' inputs and the output; without checkpointing four per block too
    assert len({id(v) for v in saved if not is_stand_in(v) and v.shape == (5, 8)}) == (5 if ck else 4 * 4 + 1)
    registry['alive_later'].clear()
    loss.backward(retain_graph=True)
    if ck:      # blocks rerun last to first, each after the values of the blocks after it were freed
        assert registry['alive_later'] == [(3, 0), (2, 0), (1, 0), (0, 0)]
        assert sum(r() is not None for k in range(4) for r in registry[k]) == 0
    ref = weakref.ref(_tape_order(loss.grad_fn)[0][-1])
    del loss, h
    assert ref() is None                # freed by reference counting: no cycle through the checkpoint nodes


def test_checkpoint_sequential_checkpoints_all_but_the_last_segment_like_torch():
    net, x = mlp(5), mg.randn(2, 8, requires_grad=True)      # 10 layers
    for segments, checkpointed in [(1, []), (3, [3, 3]), (4, [2, 2, 2]), (10, [1] * 9)]:
        y = mg.checkpoint_sequential(net, segments, x).sum()
        nodes = _tape_order(y.grad_fn)[0]
        outs = [n for n in nodes if n.prim is mg.core.OPS['checkpoint']]
        assert len(outs) == len(checkpointed), segments
        last = len(net) - sum(checkpointed)        # torch: the last segment is the rest, run as usual
        assert sum(n.prim is mg.core.OPS['tanh'] and not is_stand_in(n.out) for n in nodes) == (last + 1) // 2


def test_a_tensor_that_outlives_the_block_keeps_its_values():
    mg.manual_seed(6)
    w, x, kept = mg.randn(4, 4, requires_grad=True), mg.randn(3, 4, requires_grad=True), []

    def f(v):
        h = (v @ w).tanh()
        kept.append(h)
        return h.sin()
    for ck in (False, True):
        kept.clear()
        out = mg.checkpoint(f, x) if ck else f(x)
        x.grad = w.grad = None
        (kept[0] * 3.0).sum().backward()        # backward from the kept tensor alone, not through out
        assert out.requires_grad
        got = [bits(x.grad.numpy()), bits(w.grad.numpy())]
        assert not ck or got == want
        want = got


def test_draw_and_an_open_tape_see_the_block():
    w, x = mg.randn(4, 4, requires_grad=True), mg.randn(3, 4)
    with mg.Tape() as tape:
        y = mg.checkpoint(lambda v: (v @ w).tanh(), x).sum()
    assert [e.op for e in tape.entries] == ['matmul', 'tanh', 'sum']
    assert 'checkpoint' in mg.draw(y).source
    y.backward()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ (1 - np.tanh(x.numpy() @ w.numpy()) ** 2), rtol=1e-5)
