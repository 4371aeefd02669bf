"""Bounded memory: tapes, compiled programs (both backends), sessions, jit functions and fitted
models are freed as soon as the last reference goes, without the cycle collector."""
import gc
import weakref

import numpy as np
import pytest

import minigrad as mg


@pytest.fixture
def no_gc():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _program(backend):
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        w = mg.Variable(np.ones(3, np.float32), name='w')
        y = mg.relu(x * w + 1.0)
        step = w.assign(w - 0.1 * y)
    p = mg.compile([y, step], [x], backend=backend)
    p(np.ones(3, np.float32))
    return weakref.ref(p), weakref.ref(g)


@pytest.mark.parametrize('backend', ['numpy', 'numba'])
def test_a_program_and_its_graph_are_freed(no_gc, backend):
    if backend == 'numba' and not mg.compiler.kernels.available():
        pytest.skip('numba is not installed')
    p, g = _program(backend)
    assert p() is None
    gc.collect()                    # a Graph and its nodes may point at each other (as torch.fx)
    assert g() is None


def test_a_tape_and_its_tensors_are_freed(no_gc):
    def make():
        x = mg.tensor([1.0, 2.0], requires_grad=True)
        with mg.Tape() as t:
            y = (x * x).sum()
        y.backward()
        return weakref.ref(t), weakref.ref(y), weakref.ref(x)
    for r in make():
        assert r() is None


def test_a_session_and_a_jit_function_are_freed(no_gc):
    def make():
        g = mg.Graph()
        with g.as_default():
            x = mg.placeholder(mg.float32, (3,), name='x')
            y = x * 2.0
        s = mg.Session(g)
        s.run(y, {x: np.ones(3)})
        f = mg.jit(lambda t: (t * 2.0).sum())
        f(np.ones(3, np.float32))
        return weakref.ref(s), weakref.ref(f)
    for r in make():
        assert r() is None


def test_a_fitted_model_is_freed(no_gc):
    def make():
        m = mg.nn.Sequential(mg.nn.Linear(2, 3), mg.nn.ReLU(), mg.nn.Linear(3, 1))
        m.compile(optimizer='sgd', loss='mse')
        m.fit(np.ones((4, 2), np.float32), np.ones((4, 1), np.float32), epochs=2, verbose=0)
        return weakref.ref(m)
    assert make()() is None
