"""Graph compiler: structure of the known examples, memory plan, generated code, Session integration.
That every pass keeps the meaning (the reference interpreter before == after each pass, each pass alone, the
pipeline idempotent) is a mode of the program net, tests/test_programs.py."""
import json
import subprocess
import sys

from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
from minigrad import interpreter
from minigrad.compiler import register_pass, rebuild


def _run(graph, arrays):
    """The reference interpreter on a function graph (inputs/outputs)."""
    return interpreter.evaluate(graph, graph.outputs, {id(s): a for s, a in zip(graph.inputs, arrays)})


def _close(got, want):
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-9, atol=1e-12)


def test_cond_and_while_bodies_are_optimised():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, (3,), name='x')
        w = mg.placeholder(mg.float64, (3,), name='w')
        c = mg.cond((x * w).sum() > 0, lambda: x * w + x * 1.0, lambda: -(-x) * w)
        i, v = mg.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * w + 0.0), [mg.constant(0), c])
        loss = (v * v).sum()
        grads = mg.gradients(loss, [x, w])
    for xs in ([1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]):
        arrays = [np.array(xs), np.array([0.5, -1.5, 2.0])]
        want = interpreter.evaluate(g, [loss] + grads, {id(x): arrays[0], id(w): arrays[1]})
        prog = mg.compile([loss] + grads, [x, w])
        for name, snap in prog.history:
            _close(_run(snap, arrays), want)
        _close(prog(*arrays), want)
    conds = [n for n in prog.graph.nodes if n.op == 'cond']
    assert conds
    ops = [n.op for n in conds[0].params['true_graph'].nodes]
    assert 'fma' in ops or 'fused' in ops          # x*w + x*1.0 -> x*w + x -> fma inside the branch


# ------------------------------------------------------------------ the course's example
def _wxb(shape=None):
    g = mg.Graph()
    with g.as_default():
        w = mg.placeholder(mg.float32, shape, name='w')
        x = mg.placeholder(mg.float32, shape, name='x')
        b = mg.placeholder(mg.float32, shape, name='b')
        p = w * x
        y = p + b
    return g, [w, x, b], y


GOLDEN = (Path(__file__).parent / 'golden' / 'seed.source.py').read_text()     # see test_golden.py


@pytest.mark.parametrize('backend', ['numpy', pytest.param('numba', marks=pytest.mark.skipif(
    not mg.compiler.kernels.available(), reason='numba is not installed'))])
def test_a_constant_read_by_a_fused_kernel_is_one_buffer(backend):
    """The plan counts what the timeline draws: a constant a loop kernel reads is one array, not two."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (4, 3), name='x')
        y = mg.tanh(x @ mg.constant(np.ones((3, 3), np.float32), name='W')) * 2.0 + 1.0
    m = mg.compile(y, [x], backend=backend).memory
    assert m.num_buffers == len(set(m.assignment.values())), (m, m.assignment)
    assert m.naive_num_buffers == len(m.assignment), (m, m.assignment)


@pytest.mark.parametrize('shape', [None, (3,)])
def test_wxb_example(shape):
    g, ins, y = _wxb(shape)
    prog = mg.compile(y, ins)
    assert [n.op for n in prog.graph.nodes] == ['placeholder'] * 3 + ['fma']
    m = prog.memory
    assert (m.naive_num_buffers, m.num_buffers) == (5, 4)
    assert m.assignment['add:mul'] == m.assignment['add']          # y written into p's buffer
    assert prog.stats['fused_kernels'] == 1 and prog.stats['nodes_before'] == 5
    if shape:
        assert (m.naive_peak_bytes, m.peak_bytes) == (60, 48)
        assert prog.source == GOLDEN
    w, x, b = (np.arange(3, dtype=np.float32) + k for k in range(3))
    np.testing.assert_allclose(prog(w, x, b), w * x + b)


def test_outputs_never_alias_inputs_or_each_other():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (2,), name='x')
        y = x * 2.0
        outs = [x, y, y, x.reshape(1, 2), mg.stop_gradient(x)]
    prog = mg.compile(outs, [x])
    a = np.array([1.0, 2.0], np.float32)
    r1 = prog(a)
    ids = {id(r) for r in r1} | {id(a)}
    assert len(ids) == len(r1) + 1
    assert not any(np.shares_memory(r, a) for r in r1)
    assert not np.shares_memory(r1[1], r1[2])
    r2 = prog(np.array([5.0, 6.0], np.float32))
    np.testing.assert_allclose(r1[1], [2.0, 4.0])                  # first results untouched
    np.testing.assert_allclose(r2[1], [10.0, 12.0])
    np.testing.assert_allclose(a, [1.0, 2.0])


def test_chain_structure_and_reuse():
    g = mg.Graph()
    with g.as_default():
        y = x = mg.placeholder(mg.float32, (4, 4), name='x')
        ws = [mg.placeholder(mg.float32, (4, 4), name=f'w{i}') for i in range(3)]
        for w in ws:
            y = mg.relu(y * w + 1.0)
        loss = y.sum()
        grads = mg.gradients(loss, ws)
    prog = mg.compile([loss] + grads, [x] + ws)
    ops = [n.op for n in prog.graph.nodes]
    assert ops.count('fused') == 1 and prog.stats['fma'] == 3
    fused = next(n for n in prog.graph.nodes if n.op == 'fused')
    assert fused.params['kind'] == 'elementwise' and isinstance(fused.params['graph'], mg.Graph)
    assert prog.memory.num_buffers < prog.memory.naive_num_buffers
    assert prog.memory.peak_bytes < prog.memory.naive_peak_bytes


def test_matmul_specialisation_and_epilogue():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (None, 5), name='x')
        W = mg.placeholder(mg.float32, (5, 3), name='W')
        b = mg.placeholder(mg.float32, (3,), name='b')
        h = mg.relu(x @ W + b)
        gW, = mg.gradients(h.sum(), [W])
    prog = mg.compile([h, gW], [x, W, b], input_shapes=[(1, 5), None, None])
    ops = [n.op for n in prog.graph.nodes]
    assert 'matmul' not in ops or ops.count('matmul') + sum(
        1 for n in prog.graph.nodes if n.op == 'fused' for m in n.params['graph'].nodes if m.op == 'matmul') == 1
    kinds = [n.params['kind'] for n in prog.graph.nodes if n.op == 'fused']
    assert 'matmul_epilogue' in kinds
    arrays = [np.random.default_rng(0).normal(size=s).astype(np.float32) for s in [(1, 5), (5, 3), (3,)]]
    want = interpreter.evaluate(g, [h, gW], dict(zip(map(id, [x, W, b]), arrays)))
    _close(prog(*arrays), want)
    inner = [m.op for n in prog.graph.nodes if n.op == 'fused' for m in n.params['graph'].nodes]
    # x.T @ g with a contracted dim of 1 became an outer product (a broadcast multiply)
    assert sum(1 for op in ops + inner if op == 'matmul') == 1


def test_custom_pass_hook():
    seen = []

    @register_pass(name='count_nodes')
    def count(graph):
        seen.append(len(graph.nodes))
        return rebuild(graph)
    g, ins, y = _wxb()
    prog = mg.compile(y, ins, passes=['prune', 'count_nodes', count, 'fuse'])
    assert [n for n, _ in prog.history] == ['input', 'prune', 'count_nodes', 'count', 'fuse']
    assert seen == [5, 5]
    prog = mg.compile(y, ins, passes=[])
    assert [n.op for n in prog.graph.nodes].count('fma') == 0
    with pytest.raises(mg.GraphError, match='unknown pass'):
        mg.compile(y, ins, passes=['nope'])


def test_history_snapshots_are_not_mutated():
    g, ins, y = _wxb()
    prog = mg.compile(y, ins)
    texts = [str(s) for _, s in prog.history]
    mg.compile(y, ins)
    assert [str(s) for _, s in prog.history] == texts
    assert 'mul' in texts[0] and 'fma' in texts[-1]


def test_generated_names_are_not_user_strings():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (2,), name='x"); import os #\n')
        y = x * 2.0
    prog = mg.compile(y, [x])
    assert 'import os' not in prog.source.replace('import_os', '')
    np.testing.assert_allclose(prog(np.ones(2, np.float32)), [2.0, 2.0])


# ------------------------------------------------------------------ Session integration
def test_session_uses_compiled_programs_and_caches():
    g, ins, y = _wxb()
    sess = mg.Session(g)
    for k in range(3):
        r = sess.run(y, {ins[0]: [1.0, 2.0], ins[1]: [3.0, 4.0], ins[2]: [k, k]})
        np.testing.assert_allclose(r, [3.0 + k, 8.0 + k])
    assert len(sess._programs) == 1 and all(p is not None for p in sess._programs.values())
    sess.run(y, {ins[0]: 1.0, ins[1]: 2.0, ins[2]: 3.0})           # new feed signature -> new program
    assert len(sess._programs) == 2
    with pytest.raises(mg.FeedError, match="placeholder 'b'"):
        sess.run(y, {ins[0]: 1.0, ins[1]: 2.0})


def test_session_variables_and_assign():
    g = mg.Graph()
    with g.as_default():
        v = mg.Variable(np.zeros(3, np.float32), name='v')
        x = mg.placeholder(mg.float32, (3,), name='x')
        inc = v.assign(v + x)
        read = v * 1.0
    sess = mg.Session(g)
    first = sess.run(inc, {x: np.ones(3)})
    second = sess.run([inc, read], {x: np.ones(3)})
    np.testing.assert_allclose(first, 1.0)                        # not changed by the second run
    np.testing.assert_allclose(second[0], 2.0)
    np.testing.assert_allclose(second[1], 1.0)                    # reads see the value before the assign
    np.testing.assert_allclose(sess.run(v), 2.0)
    np.testing.assert_allclose(sess.run(read, {v: np.full(3, 7.0)}), 7.0)   # feeding a Variable
    np.testing.assert_allclose(sess.run(v), 2.0)


def test_sgd_step_in_compiled_program():
    rng = np.random.default_rng(0)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (8, 3), name='x')
        t = mg.placeholder(mg.float32, (8, 1), name='t')
        W = mg.Variable(rng.normal(size=(3, 1)).astype(np.float32), name='W')
        loss = ((x @ W - t) * (x @ W - t)).mean()
        gW, = mg.gradients(loss, [W])
        step = mg.group(W.assign(W - 0.1 * gW))
    prog = mg.compile([loss, step], [x, t])
    xv = rng.normal(size=(8, 3)).astype(np.float32)
    tv = xv @ np.array([[1.0], [2.0], [-1.0]], np.float32)
    losses = [float(prog(xv, tv)[0]) for _ in range(100)]
    assert losses[-1] < 1e-3 * losses[0]
    sess = mg.Session(g)
    l0 = sess.run(loss, {x: xv, t: tv})
    for _ in range(5):
        sess.run([loss, step], {x: xv, t: tv})
    assert sess.run(loss, {x: xv, t: tv}) < l0


@pytest.mark.slow                   # the benchmark script in a subprocess: 10-15 s
def test_bench_quick_smoke(tmp_path):
    out = tmp_path / 'bench.json'
    script = Path(__file__).resolve().parent.parent / 'scripts' / 'bench.py'
    r = subprocess.run([sys.executable, str(script), '--quick', '--json', str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert '| target' in r.stdout and ('PASS' in r.stdout or 'MISS' in r.stdout)
    assert out.exists()


@pytest.mark.slow                   # three benchmark processes: 10-15 s
def test_bench_judges_each_target_by_the_median_of_its_runs(tmp_path):
    # --runs N: N processes; each target's value is the median of its N values, judged again on it
    out = tmp_path / 'bench.json'
    script = Path(__file__).resolve().parent.parent / 'scripts' / 'bench.py'
    r = subprocess.run([sys.executable, str(script), '--quick', '--tape', '--runs', '3', '--json', str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert 'medians of 3 runs' in r.stdout and r.stderr.count(' of 3: ') == 3
    targets = json.loads(out.read_text())['targets']
    assert targets and all(len(t['runs']) == 3 for t in targets)
    for t in targets:
        med = sorted(t['runs'])[1]
        op, limit = t['goal'].split()
        assert t['measured'] == med and t['pass'] == {'<=': med <= float(limit), '<': med < float(limit),
                                                      '>=': med >= float(limit)}[op]
        assert f'| {t["target"]} | {med:.3f} |' in r.stdout


# Elementwise primitives without a loop-kernel rule, and why: the fusion pass records the reason
# in program.stats when it leaves one out of a group.
NO_KERNEL = {'sin': 'numba calls scalar libm, slower than numpy\'s vectorised loop (tanh, exp, log: approx.py, issue 37)',
             'cos': 'as sin'}


def test_every_primitive_runs_compiled_and_says_how():
    """The compiler's completeness check: each primitive runs in generated code as a ufunc call, its
    emit rule, or a call of its impl (the *_like adjoints and scatter_add, lowered first when shapes
    are static), and each elementwise one has a loop-kernel rule or is listed with the reason."""
    prims = {v for v in vars(mg.ops).values() if isinstance(v, mg.Primitive) and v.kind == 'primitive'}  # built-ins
    how = {p.name: 'ufunc' if p.ufunc else 'emit' if p.emit else 'impl' for p in prims}
    assert {n for n, h in how.items() if h == 'impl'} == {'sum_to_like', 'broadcast_like', 'reshape_like',
                                                          'scatter_add'}
    assert all(p.lower is not None for p in prims if p.name.endswith('_like'))
    assert {p.name for p in prims if p.elementwise and p.kernel is None} == set(NO_KERNEL)


def test_packaged_bench_command_times_the_lesson_case():
    # what a learner who pip-installed the package can run (scripts/ is not installed)
    r = subprocess.run([sys.executable, '-m', 'minigrad.bench', '--quick'], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert '| 4x4 |' in r.stdout and 'tape (us)' in r.stdout and 'scripts/bench.py' in r.stdout


def test_compiler_docstring_examples_run():
    import doctest, importlib, pkgutil
    names = ['minigrad.session', 'minigrad.compiler'] + [f'minigrad.compiler.{m.name}'
                                                          for m in pkgutil.iter_modules(mg.compiler.__path__)]
    for name in names:
        res = doctest.testmod(importlib.import_module(name))
        assert res.failed == 0, name
