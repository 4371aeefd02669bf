"""mg.jit guards (shape, dtype, Python scalars, branch outcomes), graph breaks, explain() and the LRU cache (issue 18)."""
import doctest
import inspect

import numpy as np
import pytest

import minigrad as mg
import importlib


def line_of(fn, text):
    """'file:line' of the line of fn's source containing text."""
    src, start = inspect.getsourcelines(fn)
    k = next(i for i, s in enumerate(src) if text in s)
    return f'{inspect.getsourcefile(fn)}:{start + k}'


def test_shape_and_dtype_guards_retrace_exactly_when_they_fail():
    jf = mg.jit(lambda x: x * 2.0 + 1.0)
    counts = []
    for a in [np.ones(3), np.zeros(3), np.ones(4), np.ones(3, np.float32), np.ones(3), np.ones(4)]:
        np.testing.assert_allclose(jf(a), a * 2 + 1)
        counts.append(jf.trace_count)
    assert counts == [1, 1, 2, 3, 3, 3]
    assert (jf.hits, jf.misses) == (3, 3)


def test_python_scalars_are_passed_as_themselves_and_guarded():
    seen = []

    def f(x, n, scale):
        seen.append((type(n), type(scale)))
        for _ in range(n):                        # a Symbol here would raise: n is a Python int
            x = x * scale
        return x
    jf = mg.jit(f)
    x = np.ones(2)
    np.testing.assert_allclose(jf(x, 3, 2.0), [8.0, 8.0])
    np.testing.assert_allclose(jf(x * 3, 3, 2.0), [24.0, 24.0])
    assert jf.trace_count == 1 and seen == [(int, float)]
    np.testing.assert_allclose(jf(x, 2, 2.0), [4.0, 4.0])          # another n: the guard fails
    np.testing.assert_allclose(jf(x, 2, 0.5), [0.25, 0.25])        # another scale
    assert jf.trace_count == 3
    np.testing.assert_allclose(jf(x, 3, 2.0), [8.0, 8.0])
    assert jf.trace_count == 3
    assert 'n == 3 (int)' in jf.explain()


def f_branch(x):
    if x.sum() > 0:
        return x * 2.0
    return x - 1.0


def test_data_dependent_if_both_sides_and_branch_guard():
    jf = mg.jit(f_branch)
    pos, neg = np.array([1.0, 2.0]), np.array([-1.0, -2.0])
    counts = []
    for a in [pos, pos * 3, neg, neg * 2, pos]:
        np.testing.assert_array_equal(jf(a), f_branch(mg.tensor(a)).numpy())
        counts.append(jf.trace_count)
    assert counts == [1, 1, 2, 2, 2]               # retrace only when the branch guard fails
    assert jf.guard_failures == 2 and len(jf.entries) == 2
    assert [e.breaks[0].expected for e in jf.entries] == [False, True]      # least recently used first


def test_while_loop_on_a_value():
    def f(x):
        while x.sum() < 10:
            x = x * 2
        return x
    jf = mg.jit(f)
    for a in [np.ones(3), np.full(3, 1.5), np.full(3, 0.5), np.full(3, 20.0), np.ones(3)]:
        np.testing.assert_array_equal(jf(a), f(mg.tensor(a)).numpy())
    assert jf.trace_count == 3          # loops of 2 iterations (twice), 3, and 0
    entry = jf.entries[-1]                                 # the most recently used: np.ones(3)
    assert len(entry.breaks) == 3 and len(entry.segments) == 4
    assert [b.expected for b in entry.breaks] == [True, True, False]


def test_graph_break_splits_the_graph_and_reuses_computed_values():
    def f(x):
        y = mg.exp(x)
        if y.sum() > 3.0:
            return y * 2.0
        return y
    jf = mg.jit(f)
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(jf(x), np.exp(x) * 2)
    first, second = jf.entries[0].graphs
    ops1, ops2 = [n.op for n in first.nodes], [n.op for n in second.nodes]
    assert 'exp' in ops1 and 'exp' not in ops2 and 'mul' in ops2        # exp is computed once, then fed
    assert ops2.count('placeholder') == 1 and isinstance(mg.draw(first), object)
    assert all(s.program is not None for s in jf.entries[0].segments)
    np.testing.assert_allclose(jf(np.zeros(2) - 5), np.exp(np.zeros(2) - 5))


def test_float_int_item_are_breaks_guarded_by_value():
    def f(x):
        k = int(x.max())
        s = float(x.sum())
        return x * k + s + x.min().item()
    jf = mg.jit(f)
    for a in [np.array([1.0, 2.5]), np.array([2.0, 1.5]), np.array([3.0, 1.0])]:
        np.testing.assert_allclose(jf(a), f(mg.tensor(a)).numpy())
    assert jf.trace_count == 3 and len(jf.entries[0].breaks) == 3
    np.testing.assert_allclose(jf(np.array([1.0, 2.5])), f(mg.tensor(np.array([1.0, 2.5]))).numpy())
    assert jf.trace_count == 3


def test_explain_lists_guards_breaks_with_the_user_line_and_graphs(capsys):
    jf = mg.jit(f_branch)
    jf(np.ones(2))
    text = jf.explain()
    assert capsys.readouterr().out.strip() == text.strip()
    assert line_of(f_branch, 'if x.sum() > 0') + ': if x.sum() > 0:' in text
    name = jf.entries[0].breaks[0].symbol.name
    for words in ('1 cache entries', '1 traces', 'x: float64 (2,)', f"bool() of '{name}' == True",
                  'graph breaks: 1', f"1. Python asked for bool() of '{name}' at", 'placeholder', 'sum(x', 'mul('):
        assert words in text, words


def test_lru_eviction():
    jf = mg.jit(lambda x: x + 1.0, cache_size=2)
    for n in [1, 2, 1, 3]:              # 2 is the least recently used when 3 arrives
        jf(np.ones(n))
    assert (jf.trace_count, jf.evictions, len(jf.entries)) == (3, 1, 2)
    jf(np.ones(1))
    assert jf.trace_count == 3
    jf(np.ones(2))
    assert (jf.trace_count, jf.evictions) == (4, 2)
    assert mg.jit(abs).cache_size == mg.JitFunction.CACHE_SIZE == 64
    assert 'max 2' in jf.explain() and '2 evictions' in jf.explain()
    with pytest.raises(mg.MinigradError, match='cache_size'):
        mg.jit(abs, cache_size=0)


def test_gradients_and_parameters_across_a_break():
    w = mg.tensor(np.array([1.0, 2.0]), requires_grad=True, name='w')

    def f(x):
        y = x * w
        if y.sum() > 0:
            y = y * y
        loss = y.sum()
        return loss, mg.gradients(loss, [x])[0] if isinstance(x, mg.Symbol) else None
    jf = mg.jit(f)
    loss, dx = jf(np.array([1.0, 1.0]))
    assert float(loss) == 5.0
    np.testing.assert_allclose(dx, 2 * np.array([1.0, 2.0]) ** 2)       # d sum((x w)^2) / dx = 2 x w^2
    w.data[...] = 3.0                                                    # parameters are fed on every call
    loss, dx = jf(np.array([1.0, 1.0]))
    assert float(loss) == 18.0 and jf.trace_count == 1


def test_tensors_in_tensors_out_and_symbols_outside_tracing_still_refuse():
    jf = mg.jit(f_branch)
    out = jf(mg.tensor(np.ones(2)))
    assert isinstance(out, mg.Tensor)
    with pytest.raises(mg.TraceError, match='no value'):
        bool(jf.graph.nodes[-1].outputs[0])              # the tracer is gone once tracing ends
    with pytest.raises(mg.TraceError):
        mg.trace(f_branch, np.ones(2))                   # symbolic tracing still refuses


def test_docstring_examples_run():
    res = doctest.testmod(importlib.import_module("minigrad.transforms.jit"))
    assert res.failed == 0 and res.attempted > 0
