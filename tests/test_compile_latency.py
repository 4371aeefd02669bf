"""Issue 37: compile latency at scale. Graph.atomic keeps a journal of the names an op takes instead of
copying every name per op (which made building a 20,000-op graph quadratic); a pass that returns an
invalid graph is named, also when the next pass would fail on it."""
import pytest

import minigrad as mg
from minigrad.compiler import rebuild


def _graph():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = mg.tanh(x * 2.0 + 1.0) * x + mg.tanh(x * 2.0 + 1.0) * 1.0     # work for cse, simplify, fuse
    return g, x, y


def _drop_output_node(graph):
    """An invalid pass: the output's node is left out of the new graph."""
    new = rebuild(graph)
    new.nodes = new.nodes[:-1]
    return new


def test_a_pass_that_fails_on_an_earlier_passes_invalid_graph_names_the_earlier_one():
    def crash(graph):
        raise RuntimeError('this pass trusted its input')
    g, x, y = _graph()
    with pytest.raises(mg.GraphError, match="invalid after pass '_drop_output_node'"):
        mg.compile(y, [x], passes=[_drop_output_node, crash])
    with pytest.raises(mg.GraphError, match="invalid after pass '_drop_output_node'"):
        mg.compile(y, [x], passes=['prune', _drop_output_node, 'cse'])
    with pytest.raises(RuntimeError, match='trusted its input'):        # a valid graph: the pass's own error
        mg.compile(y, [x], passes=['prune', crash])


def test_atomic_rolls_back_names_through_a_journal():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        a = x * 2.0
        with pytest.raises(mg.errors.MinigradError):
            with g.atomic():
                b = x * 3.0
                c = b * 4.0
                x + mg.placeholder(mg.float32, (4,), name='bad')          # a shape error inside the block
        assert g._names.undo is None and len(g.nodes) == 3
        d = x * 5.0
    assert (a.name, d.name) == ('mul', 'mul_1')                          # names the failed block took are free again
    assert b.name == 'mul_1' and c.name == 'mul_2'


