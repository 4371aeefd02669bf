"""The numpy backend needs no numba (Pyodide, minimal installs). What differs without numba is checked in a
real environment without it: a subprocess where `import numba` fails (a blocker package first on PYTHONPATH),
MINIGRAD_BACKEND unset. There mg.compile's default is the numpy backend, backend='numba' is a clear error,
and `import minigrad` and the main entry points work, each compiled program on the numpy backend.

The rest of the library needs no second run here: tests/conftest.py runs every library test on the numpy
backend already (only the default-backend choice differs, checked below). The lessons and solutions run
without numba (and without `dot`) in tests/test_course_opens.py::test_lessons_and_solutions_run_without_dot_and_numba."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _env_without_numba(tmp_path, root=ROOT):
    blocker = tmp_path / 'block' / 'numba'
    blocker.mkdir(parents=True)
    (blocker / '__init__.py').write_text("raise ImportError('numba is hidden by tests/test_without_numba.py')\n")
    env = {k: v for k, v in os.environ.items() if k != 'MINIGRAD_BACKEND'}
    env['PYTHONPATH'] = os.pathsep.join([str(tmp_path / 'block'), str(root)])
    return env


def _run_without_numba(tmp_path, code):
    r = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], env=_env_without_numba(tmp_path),
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def test_without_numba_the_default_is_numpy_and_numba_is_a_clear_error(tmp_path):
    out = _run_without_numba(tmp_path, '''
        try:
            import numba
        except ImportError as e:
            print('numba:', e)
        import minigrad as mg
        assert not mg.compiler.kernels.available()
        assert mg.compiler.default_backend() == 'numpy'
        g = mg.Graph()
        with g.as_default():
            x = mg.placeholder(mg.float32, (3,), name='x')
            y = mg.relu(x * 2.0 + 1.0)
        prog = mg.compile(y, [x])
        assert prog.backend == 'numpy' and prog.kernels == [] and list(prog([1, -2, 3])) == [3, 0, 7]
        try:
            mg.compile(y, [x], backend='numba')
        except mg.MinigradError as e:
            print('error:', e)
    ''')
    assert 'numba: numba is hidden by tests/test_without_numba.py' in out      # the environment is real
    assert "error: compile: backend='numba' needs numba (pip install numba)" in out


def test_without_numba_the_entry_points_work_on_the_numpy_backend(tmp_path):
    """import minigrad (and the names the notebooks import), the tape, graphs and Session, jit and trace, the
    function transformations, a compiled training step, ONNX, drawings and the benchmark helpers."""
    out = _run_without_numba(tmp_path, '''
        import io
        import numpy as np
        import minigrad as mg
        import minigrad.checks, minigrad.bench, minigrad.check_notebook        # the names lessons import
        from minigrad.course import bench

        x = mg.tensor([1.0, -2.0, 3.0], requires_grad=True)
        (mg.tanh(x) * x).sum().backward()                                      # the tape
        t = np.array([1.0, -2.0, 3.0])
        assert np.allclose(x.grad.numpy(), np.tanh(t) + t * (1 - np.tanh(t) ** 2))

        g = mg.Graph()                                                         # a graph, Session, gradients
        with g.as_default():
            p = mg.placeholder(mg.float32, (3,), name='p')
            loss = (p * p).sum()
            gp, = mg.gradients(loss, [p])
        v = np.array([1.0, 2.0, 3.0], np.float32)
        assert mg.Session(g).run(gp, {p: v}).tolist() == [2.0, 4.0, 6.0]
        prog = mg.compile([loss, gp], [p])
        assert prog.backend == 'numpy' and [np.asarray(o).tolist() for o in prog(v)] == [14.0, [2.0, 4.0, 6.0]]

        f = mg.jit(lambda a: mg.exp(a) * 2.0)                                  # jit compiles on numpy
        assert np.allclose(f(v), np.exp(v) * 2.0)
        entry, = f.cache.values()
        assert [s.program.backend for s in entry.segments if s.program is not None] == ['numpy']
        tf = mg.trace(lambda a: mg.sin(a) + a, v)
        assert np.allclose(tf(v), np.sin(v) + v)
        h = lambda a: (a ** 3).sum()                                           # the function transformations
        assert np.allclose(mg.grad(h)(mg.tensor(v)).numpy(), 3 * v ** 2)
        assert np.allclose(mg.vmap(mg.grad(h))(np.stack([v, -v])), [3 * v ** 2, 3 * v ** 2])
        assert np.allclose(mg.jacrev(mg.jit(lambda a: a * a))(mg.tensor(v)), np.diag(2 * v))

        m = mg.nn.Sequential(mg.nn.Linear(3, 4), mg.nn.ReLU(), mg.nn.Linear(4, 1))   # a compiled training step
        m.compile(optimizer='sgd', loss='mse')
        xs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
        hist = m.fit(xs, xs.sum(1, keepdims=True), epochs=3, verbose=0)
        assert len(hist.history['loss']) == 3 and hist.history['loss'][-1] < hist.history['loss'][0]
        assert [s.program.backend for s in m._steps.values()] == ['numpy']

        buf = io.BytesIO()                                                     # ONNX out and back in
        mg.export_onnx(m, buf, example_inputs=[xs[:2]])
        back = mg.import_onnx(buf.getvalue())
        run = mg.compile(back.outputs, back.inputs)
        assert run.backend == 'numpy'
        assert np.allclose(run(xs[:2])[0], m(mg.tensor(xs[:2])).numpy(), rtol=1e-5, atol=1e-6)

        assert 'tanh' in mg.draw((mg.tanh(x) * x).sum()).source                # drawings
        assert len(mg.viz.PassStepper(prog).frames) == len(prog.history)
        assert bench.NUMBA is False and set(bench.compiled_variants(loss, [p], [v])) == {'compiled_numpy'}
        print('entry points ok')
    ''')
    assert 'entry points ok' in out
