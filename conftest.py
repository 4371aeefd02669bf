"""Repository-wide pytest set-up: the notebook options live here, not in addopts.

`python3 dev.py test` (pytest with no paths) runs the library tests plus every
notebook under notebooks/ and solutions/ through nbval, as if it had been given
``--nbval-lax --nbval-current-env --sanitize-with=tests/nbval_sanitize.cfg``.
Those options exist only when the nbval plugin is loaded, so they cannot sit in
pyproject's unconditional ``addopts``: there they would make a plain
``pytest tests/test_op_matrix.py`` fail wherever nbval is not installed (or is
disabled with ``-p no:nbval``). Instead this file turns them on when nbval is
active, and when it is not, every notebook pytest meets is reported as
*skipped* with the reason, so library tests run everywhere and notebook runs
never vanish silently.

Notebooks run in the learner's kernel: ``--nbval-kernel-name=minigrad-learner`` when that
kernelspec is registered (``python3 dev.py test`` registers it in .venv-test; it runs .venv's
Python, which holds only requirements.txt: no torch, no test tools), else in the current
environment (the report header says which). The fixture ``notebook_kernel`` gives other notebook
runs the same kernel; tests/test_notebook_outputs.py keeps the test venv's own kernel (with torch),
so lessons 08 and 11 are run both ways.

Options given on the command line win: ``--nbval`` (strict output comparison)
is not turned into ``--nbval-lax``, ``--nbval-kernel-name`` replaces
``--nbval-current-env``, and an explicit ``--nbval-sanitize-with`` /
``--sanitize-with`` file replaces the default one.
"""
from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
LEARNER_KERNEL = "minigrad-learner"   # dev.py's LEARNER_KERNEL
SANITIZE_FILE = ROOT / "tests" / "nbval_sanitize.cfg"
NBVAL_MISSING = ("nbval is not installed (or disabled with -p no:nbval), so notebooks are not run; "
                 "install it with: python -m pip install nbval")


def _nbval_active(config) -> bool:
    return config.pluginmanager.hasplugin("nbval")


def learner_kernel() -> str | None:
    """The learner kernel's name when this environment's Jupyter knows it, else None."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError:   # no Jupyter here: nothing runs notebooks in this run
        return None
    try:
        KernelSpecManager().get_kernel_spec(LEARNER_KERNEL)
    except NoSuchKernel:
        return None
    return LEARNER_KERNEL


@pytest.fixture(scope="session")
def notebook_kernel() -> str:
    """The kernel tests run notebooks in: the learner's (see the module docstring), else python3."""
    return learner_kernel() or "python3"


@pytest.hookimpl(trylast=True)  # after nbval's own pytest_configure has merged its option aliases
def pytest_configure(config):
    if not _nbval_active(config):
        return
    opt = config.option
    if not opt.nbval:
        opt.nbval_lax = True
    if not opt.nbval_kernel_name and not opt.nbval_current_env:
        opt.nbval_kernel_name = learner_kernel()
        opt.nbval_current_env = opt.nbval_kernel_name is None
    if not opt.nbval_sanitize_with and not getattr(opt, "sanitize_with", None):
        opt.nbval_sanitize_with = str(SANITIZE_FILE)


def pytest_report_header(config):
    if _nbval_active(config):
        opt = config.option
        return [f"notebooks: nbval ({'strict' if opt.nbval else 'lax'}, "
                f"{'current env' if opt.nbval_current_env else 'kernel ' + str(opt.nbval_kernel_name)}, "
                f"sanitize with {opt.nbval_sanitize_with})"]
    return [f"notebooks: skipped ({NBVAL_MISSING})"]


class _SkippedNotebook(pytest.Item):
    def runtest(self):  # never reached: the skip mark below wins
        pytest.skip(NBVAL_MISSING)

    def reportinfo(self):
        return self.path, 0, f"{self.path.name} (not run: no nbval)"


class _NotebookWithoutNbval(pytest.File):
    def collect(self):
        item = _SkippedNotebook.from_parent(self, name="notebook")
        item.add_marker(pytest.mark.skip(reason=NBVAL_MISSING))  # reported at the notebook's path
        yield item


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".ipynb" and not _nbval_active(parent.config):
        return _NotebookWithoutNbval.from_parent(parent, path=file_path)
    return None


# ------------------------------------------------------------------ checks that start with the run
# A few checks are minutes of subprocesses that mostly wait (uv asking PyPI about every Python and platform,
# tests/test_packaging.py).
# A test marked ``@pytest.mark.early(fn, *args)`` has fn(*args) started in a background thread as soon as the
# run is collected; its ``early`` fixture returns the result (waiting for it if need be). Deselected tests
# start nothing.
_STARTED: dict = {}
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="early")   # no thread until a submit


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    for item in session.items:
        mark = item.get_closest_marker("early")
        if mark is not None and mark.args not in _STARTED:
            _STARTED[mark.args] = _POOL.submit(*mark.args)


def pytest_sessionfinish(session):
    _POOL.shutdown(wait=False, cancel_futures=True)       # a run stopped early (-x, Ctrl-C) starts no more of them


@pytest.fixture
def early(request):
    """What this test's ``@pytest.mark.early(fn, *args)`` computed in the background (or computes now)."""
    mark = request.node.get_closest_marker("early")
    started = _STARTED.pop(mark.args, None)
    return started.result() if started is not None else mark.args[0](*mark.args[1:])
