"""Threads: grad mode, tapes and `with graph.as_default()` are per thread; one Program or Session
used from 8 threads at once gives every thread its own right answer; Session's cache is bounded."""
import threading

import numpy as np
import pytest

import minigrad as mg

N = 8


def _in_threads(fn):
    """Run fn(k) in N threads started together; re-raise the first error."""
    errors, start = [], threading.Barrier(N)

    def run(k):
        try:
            start.wait()
            for _ in range(20):
                fn(k)
        except BaseException as e:       # collected and re-raised in the main thread
            errors.append(e)
    ts = [threading.Thread(target=run, args=(k,)) for k in range(N)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def test_grad_mode_and_tapes_are_per_thread():
    def work(k):
        x = mg.tensor(float(k + 1), requires_grad=True)
        if k % 2:
            with mg.no_grad():
                y = x * x
                assert not mg.is_grad_enabled()
            assert not y.requires_grad and mg.is_grad_enabled()
        else:
            with mg.Tape() as tape:
                y = x * x * 3.0
            assert mg.is_grad_enabled() and len(tape.entries) == 2
            y.backward()
            assert x.grad.item() == 6.0 * (k + 1)
    _in_threads(work)
    assert mg.is_grad_enabled()


def test_the_default_graph_stack_is_per_thread():
    def work(k):
        g = mg.Graph(f'g{k}')
        with g.as_default():
            x = mg.placeholder(mg.float32, (), name='x')
            assert mg.get_default_graph() is g
            y = x * float(k)
        assert y.graph is g and mg.get_default_graph() is not g
        assert float(mg.Session(g).run(y, {x: 2.0})) == 2.0 * k
    _in_threads(work)


@pytest.mark.parametrize('backend', ['numpy', 'numba'])
def test_one_program_from_eight_threads(backend):
    if backend == 'numba' and not mg.compiler.kernels.available():
        pytest.skip('numba is not installed')
    g = mg.Graph()
    with g.as_default():
        a = mg.placeholder(mg.float32, (1000,), name='a')
        b = mg.placeholder(mg.float32, (1000,), name='b')
        y = mg.relu(a * b + 1.0) * 2.0 - a
        gy = mg.gradients(y.sum(), [a, b])
    prog = mg.compile([y] + gy, [a, b], backend=backend)

    def work(k):
        xa = np.full(1000, k - 3.5, np.float32)
        xb = np.linspace(-1, 1, 1000, dtype=np.float32)
        got = prog(xa, xb)
        np.testing.assert_allclose(got[0], np.maximum(xa * xb + 1, 0) * 2 - xa, rtol=1e-6)
    _in_threads(work)


def test_one_session_with_a_variable_from_eight_threads():
    g = mg.Graph()
    with g.as_default():
        counter = mg.Variable(np.float32(0.0), name='counter')
        x = mg.placeholder(mg.float32, (), name='x')
        step = counter.assign(counter + x)
    sess = mg.Session(g)
    _in_threads(lambda k: sess.run(step, {x: 1.0}))
    assert float(sess.run(counter)) == N * 20          # no lost update


def test_the_session_cache_is_lru_and_bounded():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (None,), name='x')
        y = x * 2.0
    sess = mg.Session(g, backend='numpy')
    for n in range(sess.CACHE_SIZE + 8):
        sess.run(y, {x: np.ones(n + 1, np.float32)})
    assert len(sess._programs) == sess.CACHE_SIZE and sess.evictions == 8 and sess.misses == sess.CACHE_SIZE + 8
    sess.run(y, {x: np.ones(sess.CACHE_SIZE + 8, np.float32)})       # the newest is still cached
    assert sess.hits == 1


def test_a_program_called_again_from_its_own_input_conversion_does_not_deadlock():
    """issue 31: the lock was held while inputs were converted; an input's __array__ calling the same
    program then waited for itself forever (a daemon thread, so a regression fails instead of hanging)."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, (2,), name='x')
        y = x * 2.0
    prog = mg.compile(y, [x])

    class Lazy:
        def __array__(self, dtype=None, copy=None):
            return prog(np.array([1.0, 2.0])) + 1.0
    got = []
    t = threading.Thread(target=lambda: got.append(prog(Lazy()).tolist()), daemon=True)
    t.start()
    t.join(timeout=20)
    assert not t.is_alive(), 'the program deadlocked'
    assert got == [[6.0, 10.0]]
