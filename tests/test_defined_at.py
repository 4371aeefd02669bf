"""Errors point at the learner's code: every graph node records the file and line that built it
(the first frame outside minigrad); run-time errors of Session, compiled programs (both
backends) and the reference interpreter name it, and drawings show it on hover."""
import os

import numpy as np
import pytest

import minigrad as mg
from minigrad import interpreter

HERE = os.path.basename(__file__)


def _failing_graph():
    g = mg.Graph()
    with g.as_default():
        a = mg.placeholder(mg.float32, (None, 3), name='a')
        b = mg.placeholder(mg.float32, (None, 2), name='b')
        line = _line() + 1
        c = mg.matmul(a, b)          # fails at run time when b's first dim is not 3
    return g, a, b, c, line


def _line():
    import sys
    return sys._getframe(1).f_lineno


def test_nodes_know_where_they_were_built():
    g, a, b, c, line = _failing_graph()
    assert c.node.where == (__file__, line)
    assert mg.core.graph.where_text(c.node) == f'defined at {HERE}:{line}'


def test_gradient_and_compiler_nodes_name_the_learners_line():
    """mg.gradients and mg.compile run with the collector paused: their wrapper must not be taken for the
    learner's code (it was contextlib.py:81, shown on hover in lesson 05)."""
    g = mg.Graph()
    with g.as_default():
        w, x, b = (mg.placeholder(mg.float32, (3,), name=n) for n in 'wxb')
        y = w * x + b
        line = _line() + 1
        gw, = mg.gradients(y.sum(), [w])
    assert gw.node.where == (__file__, line)
    line = _line() + 1
    prog = mg.compile(y, [w, x, b])
    fma, = [n for n in prog.graph.nodes if n.op == 'fma']
    assert fma.where == (__file__, line)


@pytest.mark.parametrize('backend', ['numpy', 'numba'])
def test_session_and_program_errors_name_the_line(backend):
    if backend == 'numba' and not mg.compiler.kernels.available():
        pytest.skip('numba is not installed')
    g, a, b, c, line = _failing_graph()
    feeds = {a: np.ones((2, 3), np.float32), b: np.ones((4, 2), np.float32)}
    with pytest.raises(mg.MinigradError, match=f'defined at {HERE}:{line}'):
        mg.Session(g, backend=backend).run(c, feeds)
    prog = mg.compile(c, [a, b], backend=backend)
    with pytest.raises(mg.MinigradError, match=f'defined at {HERE}:{line}'):
        prog(feeds[a], feeds[b])


def test_interpreter_errors_name_the_line():
    g, a, b, c, line = _failing_graph()
    with pytest.raises(mg.MinigradError, match=f'defined at {HERE}:{line}'):
        interpreter.evaluate(g, [c], {id(a): np.ones((2, 3), np.float32), id(b): np.ones((4, 2), np.float32)})


def test_drawings_show_the_line_on_hover():
    g, a, b, c, line = _failing_graph()
    src = mg.draw(g).source
    assert f'defined at {HERE}:{line}' in src
    assert 'defined at' not in str(g)           # printed graphs stay as they were (golden files)
