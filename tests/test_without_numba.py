"""The numpy backend needs no numba (Pyodide, minimal installs): the library tests run in a
subprocess where `import numba` fails, so mg.compile's default is the numpy backend there."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _env_without_numba(tmp_path, root=ROOT):
    blocker = tmp_path / 'block' / 'numba'
    blocker.mkdir(parents=True)
    (blocker / '__init__.py').write_text("raise ImportError('numba is hidden by tests/test_without_numba.py')\n")
    env = {k: v for k, v in os.environ.items() if k != 'MINIGRAD_BACKEND'}
    env['PYTHONPATH'] = os.pathsep.join([str(tmp_path / 'block'), str(root)])
    return env


def test_without_numba_the_default_is_numpy_and_numba_is_a_clear_error(tmp_path):
    code = textwrap.dedent('''
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
    r = subprocess.run([sys.executable, '-c', code], env=_env_without_numba(tmp_path), cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "error: compile: backend='numba' needs numba (pip install numba)" in r.stdout


def library_tests_without_numba() -> subprocess.CompletedProcess:
    """The library tests (not slow) run where `import numba` fails. They run in a copy of the checkout (no
    venvs: this Python runs them), so that they can run beside the rest of the suite (conftest.py's early
    marker: on the second CPU) without sharing a file with it."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = tmp / 'checkout'
        shutil.copytree(ROOT, root, symlinks=True, ignore=shutil.ignore_patterns(
            '.git', '.venv', '.venv-test', 'build', 'dist', '*.egg-info', '__pycache__', '.pytest_cache',
            '.hypothesis', 'artifacts'))
        return subprocess.run([sys.executable, '-m', 'pytest', '-q', '-x', '-m', 'not slow', '-p', 'no:cacheprovider',
                               '--basetemp', str(tmp / 'pytest'), 'tests', '--ignore=tests/test_without_numba.py',
                               '--ignore=tests/test_environments.py'],     # dev.py's venvs: not in the copy
                              env=_env_without_numba(tmp, root), cwd=root, capture_output=True, text=True,
                              timeout=1800)


@pytest.mark.slow
@pytest.mark.early.with_args(library_tests_without_numba)     # with_args: a lone callable would be decorated
def test_library_tests_pass_without_numba(early):
    tail = '\n'.join(early.stdout.splitlines()[-15:])
    assert early.returncode == 0 and ' passed' in tail, tail + early.stderr[-2000:]
