"""Parallel loop kernels (numba backend): a large fusion group's loop runs in chunks on several threads
(compiler/parallel.py), with results bit-identical for any thread count; smaller groups and reductions stay
serial, and program.stats says which kernels run parallel and why the others do not."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad.compiler import kernels, parallel

pytestmark = pytest.mark.skipif(not kernels.available(), reason='numba is not installed')
N = kernels.PARALLEL_MIN            # elements: just large enough to run parallel


@pytest.fixture(autouse=True)
def _threads_restored():
    was = mg.get_num_threads()
    yield
    mg.set_num_threads(was)


def fused_program(shape=(N,), grads=True):
    """relu(a*b+c)*d-e (c broadcast along the rows when 2-d) and its gradients: one kernel each way."""
    g = mg.Graph()
    with g.as_default():
        a, b, d, e = (mg.placeholder(mg.float32, shape, name=k) for k in 'abde')
        c = mg.placeholder(mg.float32, shape[-1:], name='c')
        y = mg.tanh(mg.relu(a * b + c) * d - e) * a
        outs = [y] + mg.gradients((y * e).sum(), [a, b, c, d]) if grads else y
    return mg.compile(outs, [a, b, c, d, e], backend='numba')


def inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in (shape, shape, shape[-1:], shape, shape)]


@pytest.mark.parametrize('shape', [(N,), (N // 64, 64)], ids=['flat', 'rows'])
def test_results_are_bit_identical_for_any_thread_count_forward_and_backward(shape):
    prog, xs = fused_program(shape), inputs(shape)
    assert prog.stats['parallel'], prog.stats['serial']
    runs = {}
    for t in (1, 2, 3):
        mg.set_num_threads(t)
        runs[t] = prog(*xs)
    for t in (2, 3):
        for got, want in zip(runs[t], runs[1]):
            assert got.tobytes() == want.tobytes()
    numpy = mg.compile(prog.outputs, prog.inputs, backend='numpy')(*xs)
    np.testing.assert_allclose(runs[2][0], numpy[0], rtol=2e-6, atol=1e-6)   # tanh: approximated in kernels


def test_stats_name_the_parallel_kernels_and_why_the_others_are_serial():
    prog = fused_program((N,), grads=False)
    assert prog.stats['parallel'] == [0] and prog.stats['serial'] == {}
    assert prog.kernels[0].parallel and prog.kernels[0].extent == N
    assert 'for i in range(lo, hi):' in prog.source and 'nogil=True' in prog.source
    small = fused_program((1000,), grads=False)
    assert small.stats['parallel'] == [] and 'fewer than' in small.stats['serial'][0]
    assert 'lo, hi' not in small.source
    for n, parallel_ in ((N - 1, False), (N, True)):        # no tanh: the threshold is PARALLEL_MIN itself
        g = mg.Graph()
        with g.as_default():
            a, b, c = (mg.placeholder(mg.float32, (n,), name=k) for k in 'abc')
        assert mg.compile(a * b + c, [a, b, c], backend='numba').kernels[0].parallel == parallel_
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (N // 16, 16), name='x')
        col = (mg.relu(x) * x).sum(axis=0)          # a column sum: accumulated across the outer loop
    prog = mg.compile(col, [x], backend='numba')
    assert prog.stats['parallel'] == [] and 'reduction' in prog.stats['serial'][0]
    assert mg.compile(col, [x], backend='numpy').stats['parallel'] == []


def test_a_kernel_adding_its_rows_runs_parallel_in_numpys_order():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (N // 64, 64), name='x')
        h = mg.relu(x) * x
        s = h.sum(axis=1)                           # each row added inside its own iteration of the outer loop
    prog = mg.compile([h, s], [x], backend='numba')
    assert prog.stats['parallel'] == [0] and prog.stats['kernels'] == 1
    xs = inputs((N // 64, 64))[0]
    mg.set_num_threads(2)
    two = prog(xs)
    mg.set_num_threads(1)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(two, prog(xs)))
    assert two[1].tobytes() == (np.maximum(xs, 0) * xs).sum(axis=1).tobytes()


def test_programs_called_from_several_threads_at_once():
    progs = [fused_program((N,), grads=False), fused_program((N // 64, 64), grads=False)]
    cases = [(p, inputs(s, seed=k)) for k, (p, s) in enumerate(zip(progs, [(N,), (N // 64, 64)]))]
    mg.set_num_threads(1)
    want = [p(*xs) for p, xs in cases]
    mg.set_num_threads(2)
    errors, start = [], threading.Barrier(6)

    def work(k):
        try:
            start.wait()
            p, xs = cases[k % 2]
            for _ in range(5):
                assert p(*xs).tobytes() == want[k % 2].tobytes()
        except BaseException as e:          # re-raised in the main thread
            errors.append(e)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_launch_runs_each_chunk_once_and_raises_a_chunks_error():
    mg.set_num_threads(4)
    seen = np.zeros(1001, np.int64)

    def chunk(out, lo, hi):
        out[lo:hi] += 1
        if lo and out is not seen:
            raise ValueError(f'chunk {lo}:{hi}')
    for _ in range(50):             # chunks taken by workers, or run by the launching thread when it is first
        parallel.launch(chunk, 1001, seen)
    assert (seen == 50).all()
    with pytest.raises(ValueError, match='chunk'):
        parallel.launch(chunk, 1001, np.zeros(1001, np.int64))


@pytest.mark.parametrize('bad', [0, -2, 1.5, '2', None, True])
def test_set_num_threads_rejects_what_is_not_a_thread_count(bad):
    with pytest.raises(mg.errors.InputError, match='set_num_threads: n must be'):
        mg.set_num_threads(bad)
    mg.set_num_threads(np.int64(2))
    assert mg.get_num_threads() == 2


def test_the_thread_count_comes_from_the_environment_else_one():
    code = 'import minigrad as mg; print(mg.get_num_threads())'
    run = lambda env: subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                                     env={**os.environ, **env})
    assert run({'MINIGRAD_NUM_THREADS': '3'}).stdout.strip() == '3'
    assert run({'MINIGRAD_NUM_THREADS': ''}).stdout.strip() == '1'          # opt-in: serial by default
    bad = run({'MINIGRAD_NUM_THREADS': 'all'})
    assert bad.returncode != 0 and 'InputError: MINIGRAD_NUM_THREADS=' in bad.stderr
