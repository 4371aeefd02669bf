"""dev.py's two environments (issue 30).

- .venv, the learner's, holds requirements.txt and its dependencies only: no pytest, nbgrader,
  Playwright, torch or JupyterLite build tools, so `dev.py lab` shows no menus the course does not use;
- both venvs carry binder/overrides.json as JupyterLab settings overrides (no news pop-up);
- .venv-test registers the kernel `minigrad-learner`, which runs .venv's Python: the tests run
  notebooks in it (conftest.py).

The fast tests drive dev.py's setup with pip replaced by a recorder; the others look at the real venvs
that `python3 dev.py test` made (they skip, with the reason, where those do not exist, except inside
.venv-test, where they must).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OVERRIDES = json.loads((ROOT / "binder" / "overrides.json").read_text(encoding="utf-8"))
NOT_FOR_LEARNERS = {"pytest", "nbval", "nbgrader", "playwright", "torch", "jupyterlite-core",
                    "jupyterlite-pyodide-kernel", "hypothesis", "jupyter-repo2docker", "uv"}
# what pip/venv put into every venv, and the course itself
ALWAYS = {"pip", "setuptools", "wheel", "minigrad-course"}


def _dev():
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev


DEV = _dev()
IN_TOOLS_VENV = Path(sys.prefix).resolve() == DEV.TOOLS.path.resolve()


def _need(venv):
    if not venv.python.exists():
        if IN_TOOLS_VENV:
            pytest.fail(f"{venv.path} does not exist although these tests run in .venv-test")
        pytest.skip(f"{venv.path} does not exist: run `python3 dev.py test` once")


def _run(cmd, **kw) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=300, cwd=ROOT, **kw)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


# ------------------------------------------------------------------ dev.py's setup, pip replaced (fast)
@pytest.fixture
def fake_setup(tmp_path, monkeypatch):
    """dev.py with both venvs under tmp_path and `install` recording (venv, level, requirement args, torch)."""
    learner, tools = DEV.Venv(tmp_path / ".venv"), DEV.Venv(tmp_path / ".venv-test")
    monkeypatch.setattr(DEV, "LEARNER", learner)
    monkeypatch.setattr(DEV, "TOOLS", tools)
    calls = []

    def install(venv, level, reqs, torch=False):
        venv.path.mkdir(parents=True, exist_ok=True)
        venv.write_stamp(**{level: "key"})
        calls.append((venv.path.name, level, reqs, torch))
    monkeypatch.setattr(DEV, "install", install)
    return learner, tools, calls


def test_lab_sets_up_only_the_learner_venv_from_requirements_txt(fake_setup):
    learner, tools, calls = fake_setup
    assert DEV.setup("lab") is learner
    assert calls == [(".venv", "lab", ["-r", "requirements.txt"], False)]
    assert not tools.path.exists()


def test_test_sets_up_the_tools_venv_and_the_learner_kernel(fake_setup):
    learner, tools, calls = fake_setup
    assert DEV.setup("test") is tools
    assert calls == [(".venv", "lab", ["-r", "requirements.txt"], False),
                     (".venv-test", "test", ["-r", "requirements.txt", "-r", "requirements-test.txt"], True)]
    spec = json.loads((tools.jupyter / "kernels" / DEV.LEARNER_KERNEL / "kernel.json").read_text())
    assert spec["argv"][:3] == [str(learner.python), "-m", "ipykernel_launcher"] and spec["language"] == "python"


def test_each_venv_environment_leaves_the_other_out(monkeypatch):
    """The learner's JupyterLab started from a test run (in .venv-test's environment) must not see
    .venv-test's Jupyter extensions (nbgrader) or programs."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(DEV.TOOLS.bin), "/usr/bin"]))
    monkeypatch.setenv("JUPYTER_PATH", os.pathsep.join([str(DEV.TOOLS.jupyter), "/opt/jupyter"]))
    env = DEV.LEARNER.env()
    assert env["PATH"].split(os.pathsep) == [str(DEV.LEARNER.bin), "/usr/bin"]
    assert env["JUPYTER_PATH"].split(os.pathsep) == [str(DEV.LEARNER.jupyter), "/opt/jupyter"]
    assert env["VIRTUAL_ENV"] == str(DEV.LEARNER.path)


@pytest.mark.parametrize("old_stamp", [{"lab": "old", "test": "old"}, {"lab": "old"}])
def test_an_old_venv_with_test_tools_is_made_again(fake_setup, old_stamp):
    """What dev.py made before issue 30 (after `test`, or `lab` only: nbval and pytest were in requirements.txt)."""
    learner, tools, calls = fake_setup
    learner.path.mkdir()
    learner.write_stamp(**old_stamp)
    (learner.path / "torch-was-here").write_text("")
    DEV.setup("lab")
    assert not (learner.path / "torch-was-here").exists()
    assert learner.read_stamp() == {"lab": "key", "layout": DEV.LEARNER_LAYOUT}
    (learner.path / "kept").write_text("")
    DEV.setup("lab")                                    # a current one stays
    assert (learner.path / "kept").exists()


def test_overrides_silence_the_news_and_update_check():
    assert OVERRIDES["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false",
                                                                        "checkForUpdates": False}
    post_build = (ROOT / "binder" / "postBuild").read_text(encoding="utf-8")
    assert "binder/overrides.json" in post_build and "share/jupyter/lab/settings" in post_build


# ------------------------------------------------------------------ the real venvs
@pytest.mark.env
def test_learner_venv_holds_only_requirements_txt():
    """Everything installed in .venv is requirements.txt or a dependency of it (pin_binder's closure)."""
    _need(DEV.LEARNER)
    code = ("import importlib.util, json, sys\n"
            "from importlib import metadata\n"
            "from packaging.utils import canonicalize_name\n"
            "spec = importlib.util.spec_from_file_location('pin', 'scripts/pin_binder.py')\n"
            "pin = importlib.util.module_from_spec(spec); spec.loader.exec_module(pin)\n"
            "closure = set()\n"
            "for req in pin.read_requirements():\n"
            "    if req.marker is None or req.marker.evaluate():\n"
            "        closure |= set(pin.closure(req))\n"
            "installed = {canonicalize_name(d.metadata['Name']) for d in metadata.distributions()}\n"
            "print(json.dumps({'closure': sorted(closure), 'installed': sorted(installed)}))\n")
    got = json.loads(_run([DEV.LEARNER.python, "-c", code]).splitlines()[-1])
    installed, closure = set(got["installed"]), set(got["closure"])
    assert not installed & NOT_FOR_LEARNERS, f"test tools in the learner's venv: {installed & NOT_FOR_LEARNERS}"
    extra = installed - closure - ALWAYS
    assert not extra, f".venv holds packages requirements.txt does not bring: {sorted(extra)}"
    assert "minigrad-course" in installed and "jupyterlab" in installed


@pytest.mark.env
@pytest.mark.parametrize("which", ["LEARNER", "TOOLS"])
def test_jupyterlab_reads_the_overrides(which):
    """JupyterLab's application directory in each venv has binder/overrides.json as settings/overrides.json."""
    venv = getattr(DEV, which)
    _need(venv)
    out = _run([venv.python, "-m", "jupyter", "lab", "path"], env=venv.env())
    app_dir = next(line.split(":", 1)[1].strip() for line in out.splitlines()
                   if line.startswith("Application directory"))
    path = Path(app_dir) / "settings" / "overrides.json"
    assert path.is_file(), f"no {path}: JupyterLab in {venv.path} asks about Jupyter news"
    assert json.loads(path.read_text()) == OVERRIDES


@pytest.mark.slow
@pytest.mark.env
def test_learner_kernel_runs_the_learner_python():
    """The kernel the notebook tests use is .venv's Python: no torch, no pytest there."""
    _need(DEV.TOOLS)
    _need(DEV.LEARNER)
    code = ("from jupyter_client.manager import start_new_kernel\n"
            f"km, kc = start_new_kernel(kernel_name={DEV.LEARNER_KERNEL!r})\n"
            "out = []\n"
            "try:\n"
            "    kc.execute_interactive('import sys, importlib.util; print(sys.prefix, '\n"
            "                           '[m for m in (\"torch\", \"pytest\", \"nbgrader\") if importlib.util.find_spec(m)])',\n"
            "                           output_hook=lambda m: out.append(m['content'].get('text', '')), timeout=120)\n"
            "finally:\n"
            "    kc.stop_channels(); km.shutdown_kernel(now=True)\n"
            "print(''.join(out).strip())\n")
    out = _run([DEV.TOOLS.python, "-c", code], env=DEV.TOOLS.env()).strip().splitlines()[-1]
    prefix, found = out.split(" ", 1)
    assert Path(prefix).resolve() == DEV.LEARNER.path.resolve(), out
    assert found == "[]", f"the learner kernel imports test tools: {found}"
