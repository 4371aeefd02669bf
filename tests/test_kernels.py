"""The numba backend: one compiled loop kernel per fusion group, no temporaries inside a group,
buffers owned by the program, caller-owned results (and out=), kernels cached on disk."""
import os
import re
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import minigrad as mg
from minigrad.compiler.ops import fma, fused

pytestmark = pytest.mark.skipif(not mg.compiler.kernels.available(), reason='numba is not installed')
BACKENDS = ['numpy', 'numba']


def relu_chain(n=1000):
    g = mg.Graph()
    with g.as_default():
        ps = [mg.placeholder(mg.float32, (n,), name=k) for k in 'abcde']
        a, b, c, d, e = ps
        y = mg.relu(a * b + c) * d - e
    return y, ps


def chain_grads(n=16, layers=4):
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (n, n), name='x')
        ws = [mg.placeholder(mg.float32, (n, n), name=f'w{i}') for i in range(layers)]
        y = x
        for w in ws:
            y = mg.relu(y * w + 0.5)
        loss = y.sum()
        grads = mg.gradients(loss, ws)
    return [loss] + grads, [x] + ws


def _groups(prog):
    return sum(n.prim is fused or n.prim is fma for n in prog.graph.nodes)


@pytest.mark.parametrize('make', [relu_chain, chain_grads])
def test_one_kernel_per_fusion_group(make):
    outs, ins = make()
    prog = mg.compile(outs, ins, backend='numba')
    assert prog.backend == 'numba' and _groups(prog) >= 1
    assert prog.stats['kernels'] == len(prog.kernels) == _groups(prog)
    assert prog.source.count('# ---- kernel') == len(prog.kernels)
    assert len(prog.stats['kernel_seconds']) == len(prog.kernels)
    assert set(prog.stats['kernel_origin']) <= {'compiled', 'disk cache', 'memory'}
    for k in prog.kernels:          # a loop over the group's elements that allocates nothing
        body = k.source.split('def kernel', 1)[1]
        assert 'for i' in body
        for alloc in ('np.empty', 'np.zeros', 'np.ones', 'np.array', '.copy(', 'np.where', 'np.maximum'):
            assert alloc not in body


def test_the_forward_and_backward_of_a_chain_are_one_kernel():
    outs, ins = chain_grads(layers=6)
    prog = mg.compile(outs, ins, backend='numba')
    assert prog.stats['kernels'] == 1
    steps = prog.memory.schedule
    assert [s.split(' = ')[1].split('(')[0] for s in steps] == ['kernel', 'sum']


def test_seed_example_p_never_exists_on_numba():
    g = mg.Graph()
    with g.as_default():
        w, x, b = (mg.placeholder(mg.float32, (3,), name=n) for n in 'wxb')
        y = w * x + b
    on = {be: mg.compile(y, [w, x, b], backend=be) for be in BACKENDS}
    assert (on['numpy'].memory.naive_num_buffers, on['numpy'].memory.num_buffers) == (5, 4)
    assert 'add:mul' in on['numpy'].memory.assignment
    assert on['numba'].memory.num_buffers == 4 and 'add:mul' not in on['numba'].memory.assignment
    assert on['numba'].memory.schedule == ['add = kernel(w, x, b)']


@pytest.mark.parametrize('backend', BACKENDS)
def test_no_temporaries_beyond_the_output(backend):
    y, ps = relu_chain(100_000)
    prog = mg.compile(y, ps, backend=backend)
    xs = [np.random.default_rng(k).standard_normal(100_000).astype(np.float32) for k in range(5)]
    prog(*xs)
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    r = prog(*xs)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert peak - r.nbytes < 4096                       # the caller's new array, nothing else
    held = sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in prog.memory.buffer_shapes)
    assert held <= (2 if backend == 'numpy' else 1) * r.nbytes       # the program's own buffers
    np.testing.assert_allclose(r, np.maximum(xs[0] * xs[1] + xs[2], 0) * xs[3] - xs[4], rtol=1e-6)


@pytest.mark.parametrize('backend', BACKENDS)
def test_between_calls_the_program_holds_no_array_for_a_result_it_handed_out(backend, driver):
    """Issue 37: a buffer handed to the caller is replaced as the next call starts, when the caller has freed
    the last results (their memory is reused), not as the call ends (new memory: a page fault per 4 KiB)."""
    y, ps = relu_chain(100_000)
    prog = mg.compile(y, ps, backend=backend)
    xs = [np.random.default_rng(k).standard_normal(100_000).astype(np.float32) for k in range(5)]
    first = prog(*xs)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    r = prog(*xs)
    del r
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert held < 4096                  # the old driver held a fresh 400 kB array here
    dst = np.empty_like(first)
    prog(*xs, out=dst)                  # out= right after a hand-off, then plain calls again
    kept = first.copy()
    again = prog(*[x + 1 for x in xs])
    np.testing.assert_array_equal(dst, first)
    np.testing.assert_array_equal(first, kept)
    assert not np.shares_memory(again, first) and not np.shares_memory(again, dst)


@pytest.mark.parametrize('backend', BACKENDS)
def test_out_writes_into_the_callers_arrays(backend, driver):
    outs, ins = chain_grads(n=4, layers=2)
    prog = mg.compile(outs, ins, backend=backend)
    xs = [np.random.default_rng(k).standard_normal((4, 4)).astype(np.float32) for k in range(3)]
    want = prog(*xs)
    dst = [np.empty((), np.float32)] + [np.empty((4, 4), np.float32) for _ in range(2)]
    got = prog(*xs, out=dst)
    assert all(a is b for a, b in zip(got, dst))
    for a, b in zip(dst, want):
        np.testing.assert_array_equal(a, b)
    kept = [a.copy() for a in dst]
    prog(*[x + 1 for x in xs])                  # a later call never writes into the caller's arrays
    for a, k in zip(dst, kept):
        np.testing.assert_array_equal(a, k)
    with pytest.raises(mg.FeedError, match='shares memory with an input'):
        prog(*xs, out=[dst[0], xs[1], dst[2]])
    with pytest.raises(mg.FeedError, match='writeable C-contiguous'):
        prog(*xs, out=[dst[0], np.empty((4, 4), np.float32).T, dst[2]])
    with pytest.raises(mg.FeedError, match=r"out\[1\] .* must be a float32 array of shape \(4, 4\)"):
        prog(*xs, out=[dst[0], np.empty((3, 4), np.float32), dst[2]])
    with pytest.raises(mg.FeedError, match='out= takes 3'):
        prog(*xs, out=dst[:2])


def test_out_overlap_check_agrees_with_may_share_memory_pairwise():
    """Program's out= check sorts byte ranges instead of testing every pair: the same verdict on views of one
    buffer (steps, negative strides, transposes, empty and 0-d arrays), out arrays against each other and
    against inputs, never inputs against inputs."""
    from minigrad.compiler.program import _overlap
    rng, base = np.random.default_rng(0), np.zeros(400)

    def view():
        start, stop = sorted(rng.integers(0, 400, 2))
        v = base[start:stop:rng.integers(1, 4)][::rng.choice([1, -1])]
        if v.size >= 4 and rng.random() < 0.3:
            v = v[:v.size // 2 * 2].reshape(2, -1).T
        return v if rng.random() < 0.9 else base[rng.integers(0, 400):][:1].reshape(())      # 0-d view
    verdicts = set()
    for _ in range(2000):
        outs, ins = [view() for _ in range(rng.integers(1, 4))], [view() for _ in range(rng.integers(0, 3))]
        pairs = [(k, b) for k, a in enumerate(outs) for b in outs[k + 1:] + ins if np.may_share_memory(a, b)]
        got = _overlap(outs, ins)
        assert (got is None) == (not pairs), (outs, ins)
        assert got is None or any(np.may_share_memory(outs[got], b) for b in outs[:got] + outs[got + 1:] + ins)
        verdicts.add(got is None)
    assert verdicts == {True, False}


def test_a_variable_update_is_written_by_its_kernel_and_committed_at_the_end(driver):
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (8,), name='x')
        w = mg.Variable(np.ones(8, np.float32), name='w')
        loss = ((w * x) ** 2.0).sum()
        gw, = mg.gradients(loss, [w])
        step = w.assign(w - 0.1 * gw)
    progs = {be: mg.compile([loss, step], [x], backend=be) for be in BACKENDS}
    src = progs['numba'].source.split('# ---- kernel')[0]
    assert '# assign w: written by the kernel above' in src and 'np_array(' not in src.split('# assign w')[0]
    body = src.split('def run(')[1].splitlines()
    commit = 'P[0] = S[0] if S[0] is M[0] else None; S[0] = M[0] = n0  # commit (the old array: a spare)'
    assert [ln.strip() for ln in body if 'S[0] =' in ln] == [commit] * 2   # no copy pass; last
    assert all(body[i + 1].strip().startswith('return') for i, ln in enumerate(body) if 'S[0] =' in ln)
    xs = np.linspace(-1, 1, 8, dtype=np.float32)
    for _ in range(3):
        vals = {be: p(xs) for be, p in progs.items()}
        np.testing.assert_allclose(vals['numba'][0], vals['numpy'][0], rtol=1e-6)
    np.testing.assert_allclose(progs['numba'].state[0], progs['numpy'].state[0], rtol=1e-6)


def test_a_variable_update_writes_into_its_spare_array_only_when_nobody_else_holds_it():
    """A training step allocates nothing once warm: the update is written into the Variable's value of two calls
    ago. An array the caller still holds (program.state[0], a Session's state) is never written, and a call that
    fails leaves the state as it was."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (4096,), name='x')
        w = mg.Variable(np.ones(4096, np.float32), name='w')
        loss = mg.sum(w * x * w)
        gw, = mg.gradients(loss, [w])
        step = mg.group(w.assign(w - 0.01 * gw))
    prog, ref = (mg.compile([loss, step], [x], backend=be) for be in ('numba', 'numpy'))
    xs = np.linspace(-1, 1, 4096, dtype=np.float32)
    for _ in range(3):
        prog(xs), ref(xs)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    prog(xs)
    assert tracemalloc.get_traced_memory()[1] - before < 4096      # no new 16 KiB state array (the results: bytes)
    tracemalloc.stop()
    ref(xs)
    kept = prog.state[0]                           # the caller keeps the current value
    copy = kept.copy()
    for _ in range(4):
        prog(xs), ref(xs)
        np.testing.assert_array_equal(prog.state[0], ref.state[0])
    np.testing.assert_array_equal(kept, copy)
    assert len({id(prog.state[0]) for _ in range(4) if prog(xs) is not None}) == 2     # two arrays take turns
    with pytest.raises(mg.MinigradError):
        prog(np.ones(3, np.float32))
    sess = mg.Session(g)
    for _ in range(4):
        sess.run(step, {x: xs})
    held = sess.state[id(w.node)]
    copy = held.copy()
    sess.run(step, {x: xs}), sess.run(step, {x: xs})
    np.testing.assert_array_equal(held, copy)


@pytest.mark.parametrize('also_fetched', [False, True])
def test_a_value_assigned_to_two_variables_is_written_for_both(also_fetched, driver):
    """issue 31: the kernel wrote t only into b's new array; a's assign read t's unwritten buffer."""
    g = mg.Graph()
    with g.as_default():
        a, b = mg.Variable(np.array([2., 3.], np.float32)), mg.Variable(np.array([4., 5.], np.float32))
        t = b * 2.0 + 1.0
        fetches = [a.assign(t), b.assign(t)] + ([t.reshape(2, 1)] if also_fetched else [])
    for be in BACKENDS:
        sess = mg.Session(g, backend=be)
        for _ in range(2):
            sess.run(fetches)
        np.testing.assert_array_equal(sess.run([a, b]), [[19., 23.], [19., 23.]], err_msg=be)


def test_adam_fit_on_numba_matches_numpy(monkeypatch, driver):
    """issue 31: Adam's step read uninitialised memory on numba (losses [4.88, inf, inf, ...])."""
    rs = np.random.RandomState(0)
    x, y = rs.randn(8, 3).astype(np.float32), rs.randn(8, 1).astype(np.float32)
    losses = {}
    for be in BACKENDS:
        monkeypatch.setenv('MINIGRAD_BACKEND', be)
        mg.manual_seed(0)
        m = mg.nn.Sequential([mg.nn.Linear(3, 4), mg.nn.ReLU(), mg.nn.Linear(4, 1)])
        m.compile(optimizer=mg.optim.Adam(m.parameters(), lr=0.01), loss='mse')
        losses[be] = m.fit(x, y, epochs=4, verbose=0, shuffle=False).losses
    np.testing.assert_allclose(losses['numba'], losses['numpy'], rtol=1e-5)


def test_a_size_one_group_reading_a_view_compiles():
    """issue 31: numba raised a raw TypingError ("reshape() supports contiguous array only")."""
    xs = np.array([1., 2.], np.float32).reshape(2, 1, 1)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (2, 1, 1), name='x')
        y = x[1:] * 2.0 + 1.0
    assert mg.Session(g, backend='numba').run(y, {x: xs}).tolist() == [[[5.0]]]
    assert mg.compile(y, [x], backend='numba')(xs).tolist() == [[[5.0]]]
    assert mg.jit(lambda v: v[1:] * 2.0 + 1.0, backend='numba')(xs).tolist() == [[[5.0]]]


def test_what_stays_out_of_kernels_is_recorded():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (4,), name='x')
        i = mg.placeholder(mg.int64, (4,), name='i')
        y = mg.sin(x * 2.0 + 1.0) * 3.0         # sin has no loop-kernel rule (tanh, exp, log have: issue 37)
        j = i * 2 + 1
    prog = mg.compile([y, j], [x, i], backend='numba')
    notes = prog.stats['declined']['fuse']
    assert any(n.startswith('sin: no loop-kernel rule') for n in notes)
    assert any('int64 results' in n for n in notes)
    assert prog.stats['kernels'] == 1                    # x * 2 + 1 (an fma); * 3 follows sin alone


def test_session_and_jit_take_a_backend():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = mg.relu(x * 2.0 + 1.0)
    for be in BACKENDS:
        sess = mg.Session(g, backend=be)
        np.testing.assert_allclose(sess.run(y, {x: [1, -2, 3]}), [3, 0, 7])
        assert [p.backend for p in sess._programs.values()] == [be]
        f = mg.jit(lambda t: mg.relu(t * 2.0 + 1.0), backend=be)
        np.testing.assert_allclose(f(np.array([1, -2, 3], np.float32)), [3, 0, 7])


def test_an_unknown_backend_is_a_clear_error():
    y, ps = relu_chain(3)
    with pytest.raises(mg.GraphError, match="unknown backend 'cuda'; use one of 'numba', 'numpy'"):
        mg.compile(y, ps, backend='cuda')


def test_a_later_process_loads_kernels_from_the_disk_cache(tmp_path):
    code = ('import sys; sys.path.insert(0, %r); import test_kernels as t, minigrad as mg\n'
            'y, ps = t.relu_chain(7)\n'
            'p = mg.compile(y, ps, backend="numba")\n'
            'print(p.kernels[0].origin + "|" + str(p.kernels[0].seconds))\n') % os.path.dirname(__file__)
    env = dict(os.environ, MINIGRAD_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout.split('|')[0] == 'compiled' and runs[1].stdout.split('|')[0] == 'disk cache'
    assert len(list((tmp_path / 'kernels').glob('k_*.py'))) == 1


def scheduled_ops(prog) -> list:
    """The op of each step of the program's schedule ('matmul', 'sum', ...)."""
    return [line.split(' = ')[-1].split('(')[0] for line in prog.memory.schedule]


def _mlp_step(batch=5, sizes=(12, 8, 6, 4), lr=0.01):
    """scripts/bench.py's MLP training step (relu layers, log-softmax cross-entropy, SGD assigns), small."""
    rng = np.random.default_rng(0)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (batch, sizes[0]), name='x')
        y = mg.placeholder(mg.float32, (batch, sizes[-1]), name='y')
        W = [mg.Variable(rng.standard_normal((a, b)).astype(np.float32), name=f'W{i}')
             for i, (a, b) in enumerate(zip(sizes, sizes[1:]))]
        B = [mg.Variable(np.zeros(b, np.float32), name=f'b{i}') for i, b in enumerate(sizes[1:])]
        h = x
        for i in range(3):
            h = h @ W[i] + B[i]
            h = mg.relu(h) if i < 2 else h
        loss = -(y * mg.log_softmax(h, axis=1)).sum() / batch
        grads = mg.gradients(loss, W + B)
        step = mg.group(*[v.assign(v - lr * gv) for v, gv in zip(W + B, grads)])
    onehot = np.eye(sizes[-1], dtype=np.float32)[[0, 1, 2, 3, 0]]
    feed = [rng.standard_normal((batch, sizes[0])).astype(np.float32), onehot]
    return [loss, step], [x, y], feed


def test_mlp_step_has_no_view_steps_around_its_kernels():
    """Issue 37 (matmul epilogues): a kernel reads a broadcast_to's input itself, and each bias gradient
    (a column sum) is accumulated by the kernel that makes the relu's gradient, softmax's max by the bias
    add's kernel, softmax's row sum by the exp's kernel and the loss's total (20 elements) by its kernel: the MLP
    step's driver makes no broadcast or reshape view, and one sum stays a numpy call (a lone multiply's row sum)."""
    outs, ins, feed = _mlp_step()
    prog = mg.compile(outs, ins, backend='numba')
    ops = scheduled_ops(prog)
    assert 'broadcast_to' not in ops and 'reshape' not in ops, prog.source
    assert ops.count('sum') == 1 and ops.count('matmul') == 8 and 'max' not in ops, ops
    assert prog.source.count('.fill(') == 4, prog.source      # three bias gradients, softmax's max
    assert sum(k.source.count('(0.0) + r') for k in prog.kernels) == 2      # added in numpy's order: row sum, total
    # in place (a matmul's buffer takes its bias + relu): read from the result's own array, no second parameter
    assert re.search(r'\n +\w+ = o\d+\[i', prog.source), prog.source
    ref = mg.compile(outs, ins, backend='numpy')
    for _ in range(2):       # two steps: the Variables' updates agree too
        np.testing.assert_allclose(prog(*feed)[0], ref(*feed)[0], rtol=1e-5)
    for a, b in zip(prog.state, ref.state):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('keepdims', [False, True])
def test_a_column_sum_of_a_kernel_result_is_accumulated_in_the_loop_exactly(keepdims):
    """The kernel adds the rows in numpy's order (from -0.0), so the sum equals numpy's bit for bit."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((37, 19)).astype(np.float32), rng.standard_normal(19).astype(np.float32)
    a[0, :3] = [-0.0, np.inf, np.nan]
    g = mg.Graph()
    with g.as_default():
        x, w = mg.placeholder(mg.float32, (37, 19), name='x'), mg.placeholder(mg.float32, (19,), name='w')
        y = mg.relu(x * w) - x
        s = mg.sum(y, axis=0, keepdims=keepdims)
    prog = mg.compile([y, s], [x, w], backend='numba')
    assert prog.stats['kernels'] == 1 and 'sum' not in scheduled_ops(prog), prog.source
    with np.errstate(invalid='ignore'):     # inf - inf
        want = np.add.reduce(np.where(a * b > 0, a * b, np.float32(0)) - a, axis=0, keepdims=keepdims)
    got = prog(a, b)[1]
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got).tolist() == np.signbit(want).tolist()


def test_a_column_of_negative_zeros_sums_to_positive_zero_as_in_numpy():
    """numpy's add.reduce starts from +0.0: a kernel's accumulated sum too (it started from -0.0 once)."""
    g = mg.Graph()
    with g.as_default():
        x, w = mg.placeholder(mg.float32, (4, 12), name='x'), mg.placeholder(mg.float32, (12,), name='w')
        y = mg.tanh(x * w) + x
        sums = [mg.sum(y, axis=0), mg.sum(y, axis=1, keepdims=True)]
    prog = mg.compile([y] + sums, [x, w], backend='numba')
    assert prog.memory.schedule == ['add, sum, sum_1 = kernel(x, w)']
    a = np.full((4, 12), -0.0, np.float32)
    y, s0, s1 = prog(a, np.ones(12, np.float32))
    assert np.signbit(y).all() and not np.signbit(s0).any() and not np.signbit(s1).any()


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_a_total_of_a_kernel_result_adds_in_numpys_pairwise_order(dtype):
    """A sum of everything a kernel computed, up to ROW_SUM (128) elements: numpy's pairwise order over the
    flat array, bit for bit; a bigger one stays a numpy call."""
    rng = np.random.default_rng(7)
    for shape in [(3,), (8,), (17,), (4, 4), (5, 3, 7), (128,), (2, 64), (129,), (64, 10)]:
        g = mg.Graph()
        with g.as_default():
            x = mg.placeholder(dtype, shape, name='x')
            y = mg.tanh(x * 0.5) + x
            sums = [mg.sum(y), mg.sum(y, axis=tuple(range(len(shape))), keepdims=True)]
        prog = mg.compile([y] + sums, [x], backend='numba')
        n = int(np.prod(shape))
        summed = 'sum' in scheduled_ops(prog)
        assert prog.stats['kernels'] == 1 and summed == (n > 128), (shape, prog.memory.schedule)
        a = (rng.standard_normal(shape) * 100).astype(dtype)
        a.reshape(-1)[:2] = -0.0, np.inf
        with np.errstate(invalid='ignore'):
            got_y, total, kept = prog(a)
        np.testing.assert_array_equal(total, np.add.reduce(got_y, axis=None))
        np.testing.assert_array_equal(kept, np.add.reduce(got_y, axis=None, keepdims=True))
    zeros = np.full((8, 10), -0.0, dtype)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(dtype, (8, 10), name='x')
        y = mg.tanh(x) + x
    total = mg.compile([y, mg.sum(y)], [x], backend='numba')(zeros)[1]
    assert total == 0 and not np.signbit(total)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_a_row_sum_of_a_kernel_result_adds_in_numpys_pairwise_order(dtype):
    """A sum over the last axis of rows up to ROW_SUM (128) elements: the kernel keeps the row and adds it
    as numpy's pairwise_sum does (8 accumulators, their tree, then the rest), equal bit for bit, signs of
    zero, inf and nan included; longer rows stay a numpy call."""
    rng = np.random.default_rng(6)
    for n in [2, 7, 8, 9, 10, 16, 17, 100, 127, 128, 129]:
        g = mg.Graph()
        with g.as_default():
            x, w = mg.placeholder(dtype, (5, n), name='x'), mg.placeholder(dtype, (n,), name='w')
            y = mg.relu(x * w) - x
            s = mg.sum(y, axis=-1, keepdims=n % 2 == 0)
        prog = mg.compile([y, s], [x, w], backend='numba')
        summed = 'sum' in scheduled_ops(prog)
        assert prog.stats['kernels'] == 1 and summed == (n > 128), (n, prog.memory.schedule)
        a, b = (rng.standard_normal((5, n)) * 100).astype(dtype), rng.standard_normal(n).astype(dtype)
        a[0], a[1, -1], a[2, 0] = -0.0, np.inf, np.nan
        with np.errstate(invalid='ignore'):     # inf - inf
            got_y, got = prog(a, b)
        want = np.add.reduce(got_y, axis=-1, keepdims=n % 2 == 0)
        np.testing.assert_array_equal(got, want)
        assert np.signbit(got).tolist() == np.signbit(want).tolist(), n


@pytest.mark.parametrize('axis,keepdims', [(-1, True), (1, False), (0, False)])
def test_a_max_of_a_kernel_result_over_any_axis_is_accumulated_in_the_loop(axis, keepdims):
    """A max does not depend on the order of the elements: the kernel takes it over any one axis (nan wins)."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((9, 13)).astype(np.float32), rng.standard_normal(13).astype(np.float32)
    a[1, 4], a[2, :] = np.nan, -np.inf
    g = mg.Graph()
    with g.as_default():
        x, w = mg.placeholder(mg.float32, (9, 13), name='x'), mg.placeholder(mg.float32, (13,), name='w')
        y = x * w + 1.0
        m = mg.max(y, axis=axis, keepdims=keepdims)
    prog = mg.compile([y, m], [x, w], backend='numba')
    assert prog.stats['kernels'] == 1 and prog.source.count('.fill(') == 1, prog.source
    np.testing.assert_array_equal(prog(a, b)[1], np.max(a * b + np.float32(1.0), axis=axis, keepdims=keepdims))


def test_a_kernel_computed_in_place_reads_its_input_from_its_result():
    """A matmul's buffer taken by its epilogue: the kernel reads that input from its own result (two
    parameters over one array would make LLVM run the scalar loop); never a program result's array."""
    rng = np.random.default_rng(5)
    xv, wv = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (16, 8), name='x')
        h = mg.relu(x @ mg.constant(wv, name='W')) * 2.0 + 1.0
        y = (h @ mg.constant(wv, name='W2')) * 3.0
    prog = mg.compile(y, [x], backend='numba')
    assert re.search(r'\n +\w+ = o0\[i', prog.kernels[0].source), prog.source
    assert not re.search(r'\n +\w+ = o0\[i', prog.kernels[1].source), prog.source     # a result: out= may be given
    want = (np.maximum(xv @ wv, 0) * 2 + 1) @ wv * 3
    np.testing.assert_allclose(prog(xv), want, rtol=1e-5)
    out = np.empty_like(want)
    np.testing.assert_allclose(prog(xv, out=out), want, rtol=1e-5)


def _tanh_layer(shape, act):
    g = mg.Graph()
    with g.as_default():
        ps = [mg.placeholder(mg.float32, shape, name=k) for k in 'xwb']
        return act(ps[0] * ps[1] + ps[2]), ps


def test_a_kernel_with_approximations_on_cached_arrays_runs_four_vectors_per_loop_iteration(monkeypatch):
    """Issue 37: a tanh loop is latency-bound, so LLVM is told to interleave four vectors, only where its
    arrays fit an eighth of the largest cache (beyond it, it was slower); the results stay the same bits."""
    kernels = mg.compiler.kernels
    y, ps = _tanh_layer((64, 64), mg.tanh)
    prog = mg.compile(y, ps, backend='numba')
    assert [k.interleave for k in prog.kernels] == [kernels.INTERLEAVE] == [4]
    with open(prog.kernels[0].path) as f:
        assert '-force-vector-interleave=4' in f.read()
    assert [k.interleave for k in mg.compile(*_tanh_layer((64, 64), mg.relu), backend='numba').kernels] == [None]
    n = kernels.cache_budget() // 16 + 1            # four float32 arrays just over the budget
    assert [k.interleave for k in mg.compile(*_tanh_layer((n,), mg.tanh), backend='numba').kernels] == [None]
    monkeypatch.setattr(kernels, 'cache_budget', lambda: 0)
    plain = mg.compile(*_tanh_layer((64, 64), mg.tanh), backend='numba')
    assert [k.interleave for k in plain.kernels] == [None]
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((64, 64)).astype(np.float32) * 4 for _ in range(3)]
    xs[0][0, :6] = [np.inf, -np.inf, np.nan, -0.0, 1e-40, 9.5]
    np.testing.assert_array_equal(prog(*xs).view(np.int32), plain(*xs).view(np.int32))


def test_equal_fusion_groups_generate_their_kernel_code_once(monkeypatch, scalar_chain):
    # issue 37: a 2,000-op chain has ~60 kernels of a few shapes; each shape's source is generated once,
    # and every kernel is still the one its own source names (the memo keys all kernel_source reads)
    g, x, gx = scalar_chain(2000)
    made = []
    real = mg.compiler.kernels.kernel_source
    monkeypatch.setattr(mg.compiler.kernels, 'kernel_source', lambda *a, **k: made.append(1) or real(*a, **k))
    prog = mg.compile(gx, [x], backend='numba')
    assert len(made) < len(prog.kernels) / 10
    monkeypatch.setattr(mg.compiler.kernels, 'kernel_source', real)
    build = mg.compiler.kernels.build_kernel          # without the memo: each group's source written out
    monkeypatch.setattr(mg.compiler.lower, 'build_kernel', lambda graph, layouts, alias, memo: build(graph, layouts, alias))
    assert [k.path for k in mg.compile(gx, [x], backend='numba').kernels] == [k.path for k in prog.kernels]


@pytest.mark.parametrize('backend', BACKENDS)
def test_a_driver_with_many_buffers_reads_them_by_index(backend, monkeypatch):
    outs, ins = chain_grads(n=4, layers=2)
    xs = [np.random.default_rng(k).standard_normal((4, 4)).astype(np.float32) for k in range(3)]
    small = mg.compile(outs, ins, backend=backend)
    monkeypatch.setattr(mg.compiler.codegen, 'MANY_BUFFERS', 2)
    big = mg.compile(outs, ins, backend=backend)
    driver = big.source.split('# ---- kernel')[0]
    assert 'b0 = B[0]' in small.source and 'nonlocal' in small.source
    assert 'b0 = B[0]' not in driver and 'nonlocal' not in driver
    assert re.search(r'B\[\d+\] = None  # hand the buffer to the caller', driver)
    for _ in range(2):                  # the second call replaces the buffers the first handed out
        for a, b in zip(big(*xs), small(*xs)):
            np.testing.assert_array_equal(a, b)
