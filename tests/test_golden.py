"""Golden printed graphs and generated code for the course's examples: a change to what the
compiler produces is a visible diff here (and in the lessons, which print the same things).

Refresh after an intended change: MINIGRAD_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py
"""
import os
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg

GOLDEN = Path(__file__).parent / 'golden'


def seed(backend='numpy'):
    """y = w*x + b (the course's seed example), shape (3,)."""
    g = mg.Graph()
    with g.as_default():
        w, x, b = (mg.placeholder(mg.float32, (3,), name=n) for n in 'wxb')
        y = w * x + b
    return g, mg.compile(y, [w, x, b], backend=backend)


def counter_loop():
    """The counter while loop of lesson 04: first += 2, second += 1 while first < second."""
    g = mg.Graph()
    with g.as_default():
        f0 = mg.constant(0.0, name='first')
        s0 = mg.constant(10.0, name='second')
        outs = mg.while_loop(lambda f, s: f < s, lambda f, s: (f + 2, s + 1), [f0, s0])
    return g, mg.compile(list(outs), [])


def lesson05_chain():
    """Lesson 05's clumsy chain: folding, CSE, x*1 and x+0 (kept: -0.0), fusion."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (4,), name='x')
        scale = mg.constant(2.0, name='two') * mg.constant(3.0, name='three')
        z = ((mg.exp(x * scale) + mg.exp(x * scale)) * 1.0 + 0.0) ** 2
    return g, mg.compile(z, [x])


def relu_chain(backend='numpy'):
    """relu(a*b + c) * d - e: fma, relu and sub in one fused kernel."""
    g = mg.Graph()
    with g.as_default():
        a, b, c, d, e = (mg.placeholder(mg.float32, (8,), name=n) for n in 'abcde')
        y = mg.relu(a * b + c) * d - e
    return g, mg.compile(y, [a, b, c, d, e], backend=backend)


CASES = {'seed': seed, 'counter_loop': counter_loop, 'lesson05_chain': lesson05_chain, 'relu_chain': relu_chain}


def _check(name, text):
    path = GOLDEN / name
    if os.environ.get('MINIGRAD_UPDATE_GOLDEN'):
        path.write_text(text)
    assert path.exists(), f'{path} is missing: run with MINIGRAD_UPDATE_GOLDEN=1 to create it'
    assert text == path.read_text(), f'{name} changed; if intended, refresh with MINIGRAD_UPDATE_GOLDEN=1'


@pytest.mark.parametrize('case', CASES)
def test_golden_graphs_and_source(case):
    g, prog = CASES[case]()
    _check(f'{case}.graph.txt', str(g) + '\n')
    _check(f'{case}.compiled.txt', str(prog.graph) + '\n')
    _check(f'{case}.source.py', prog.source)


@pytest.mark.skipif(not mg.compiler.kernels.available(), reason='numba is not installed')
@pytest.mark.parametrize('case', ['seed', 'relu_chain'])
def test_golden_numba_source(case):
    """The numba backend: the driver calls one loop kernel, whose source follows it."""
    _, prog = CASES[case]('numba')
    assert prog.stats['kernels'] == 1
    _check(f'{case}.numba.py', prog.source)


def test_golden_programs_compute_the_right_numbers():
    _, p = seed()
    np.testing.assert_allclose(p([1, 2, 3], [4, 5, 6], [1, 1, 1]), [5, 11, 19])
    _, p = counter_loop()
    assert [float(v) for v in p()] == [20.0, 20.0]
    _, p = relu_chain()
    v = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(p(v, v, v, v, v), np.maximum(v * v + v, 0) * v - v, rtol=1e-6)
