"""Build the Binder environment from binder/ alone and run a lesson in it.

This follows what repo2docker does for a ``binder/`` folder, in its order:

1. ``apt.txt``      -> system packages (here: checked, not installed);
2. ``runtime.txt``  -> the Python version (compared loosely with this one);
3. ``requirements.txt`` -> ``pip install -r binder/requirements.txt`` run from
   the repository root (local references such as ``-r ../requirements.txt`` and
   ``-e .`` make repo2docker install it after copying the whole repository);
4. ``postBuild``    -> run from the repository root, if present.

Then the first lesson (notebooks/00_start_here.ipynb, where the Binder link
lands) is executed in that environment with
``jupyter nbconvert --execute``, as a learner on Binder would run it.
The environment is a fresh venv; pip's download cache is reused to keep it fast.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
START_HERE = ROOT / "notebooks" / "00_start_here.ipynb"  # where the Binder link lands


def _first_lesson() -> Path | None:
    """00_start_here; until it exists, the first numbered lesson stands in."""
    if START_HERE.exists():
        return START_HERE
    lessons = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    return lessons[0] if lessons else None


LESSON = _first_lesson()
WARM_LESSON = "notebooks/04_static_graphs.ipynb"     # its Session compiles a loop kernel
# apt package -> an executable it provides (to check it without dpkg)
APT_PROVIDES = {"graphviz": "dot"}


def _lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def _tail(text: str, n: int = 60) -> str:
    return "\n".join((text or "").splitlines()[-n:])


def _run(cmd, env, cwd=ROOT, timeout=1200) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=timeout,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"command failed ({proc.returncode}): {shlex.join(map(str, cmd))}\n"
            f"--- stdout (tail)\n{_tail(proc.stdout)}\n--- stderr (tail)\n{_tail(proc.stderr)}",
            pytrace=False,
        )
    return proc


# ------------------------------------------------------------------ cheap checks
def test_runtime_txt_matches_this_python():
    lines = _lines(BINDER / "runtime.txt")
    assert len(lines) == 1, "binder/runtime.txt must hold one line such as python-3.11"
    m = re.fullmatch(r"python-(\d+)\.(\d+)", lines[0])
    assert m, f"binder/runtime.txt: expected 'python-X.Y', got {lines[0]!r}"
    wanted = (int(m.group(1)), int(m.group(2)))
    assert wanted >= (3, 10), "minigrad needs Python 3.10+ (pyproject requires-python)"
    here = sys.version_info[:2]
    assert wanted[0] == here[0], f"Binder uses Python {wanted}, tests run on {here}"
    if wanted != here:
        warnings.warn(f"Binder uses Python {wanted[0]}.{wanted[1]}, these tests run on "
                      f"{here[0]}.{here[1]}", stacklevel=1)


def test_apt_txt_packages_present():
    packages = _lines(BINDER / "apt.txt")
    assert "graphviz" in packages, "binder/apt.txt must install graphviz (the `dot` renderer)"
    missing = []
    for pkg in packages:
        exe = APT_PROVIDES.get(pkg)
        if exe:
            if not shutil.which(exe):
                missing.append(f"{pkg} ({exe})")
        elif shutil.which("dpkg-query"):
            r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
            if "install ok installed" not in r.stdout:
                missing.append(pkg)
    if missing:
        pytest.skip(f"apt packages from binder/apt.txt not installed here: {', '.join(missing)}")


# ------------------------------------------------------------------ the environment
def _clean_env(venv: Path, scratch: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "JUPYTER", "VIRTUAL_ENV", "CONDA", "PIP_NO_CACHE", "IPYTHON"))}
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    env["PATH"] = str(bindir) + os.pathsep + os.environ.get("PATH", "")
    env["VIRTUAL_ENV"] = str(venv)
    # keep Jupyter's per-user state (kernelspecs, config) out of the way,
    # as on a fresh Binder image
    for name in ("JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        d = scratch / name.lower()
        d.mkdir(exist_ok=True)
        env[name] = str(d)
    env["MPLBACKEND"] = "Agg"
    return env


@pytest.fixture(scope="module")
def binder_env(tmp_path_factory):
    """(python, env) of a fresh venv built from binder/ the way repo2docker does."""
    base = tmp_path_factory.mktemp("binder")
    venv = base / "venv"
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if subprocess.run([sys.executable, "-m", "venv", str(venv)]).returncode != 0:
        # a python3 without ensurepip (Debian without python3-venv): seed pip
        # into the venv with the pip that runs these tests
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install",
                        "--disable-pip-version-check", "pip"], check=True)
    env = _clean_env(venv, base)
    # postBuild warms the kernel cache by running the lessons (about 90 s); here one lesson that compiles a
    # kernel, into a cache of this test's own
    env["MINIGRAD_CACHE_DIR"] = str(base / "kernel-cache")
    env["MINIGRAD_WARM_NOTEBOOKS"] = WARM_LESSON

    reqs = BINDER / "requirements.txt"
    assert reqs.exists(), "binder/requirements.txt is missing"
    _run([py, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off",
          "-r", reqs.relative_to(ROOT)], env)

    post_build = BINDER / "postBuild"
    if post_build.exists():
        first = post_build.read_text().splitlines()[0] if post_build.read_text() else ""
        interp = shlex.split(first[2:]) if first.startswith("#!") else ["bash"]
        _run([*interp, post_build], env)
    return py, env


@pytest.mark.slow
@pytest.mark.env
def test_binder_image_starts_with_a_warm_kernel_cache(binder_env):
    """postBuild ran the lesson, so a fresh kernel running it again compiles no kernel (issue 37)."""
    py, env = binder_env
    if subprocess.run([py, "-c", "import numba"], env=env).returncode != 0:
        pytest.skip("numba has no wheel for this platform: no kernels to cache")
    kernels = list(Path(env["MINIGRAD_CACHE_DIR"]).rglob("k_*.py"))
    assert kernels, "postBuild left no kernel in the cache"
    out = _run([py, "scripts/warm_kernel_cache.py", WARM_LESSON], env).stdout
    assert "0 kernel files added,   0 numba indexes written" in out, out


@pytest.mark.slow
@pytest.mark.env
def test_binder_env_has_the_course_packages(binder_env, tmp_path):
    py, env = binder_env
    modules = ["numpy", "graphviz", "ipywidgets", "matplotlib", "jupyterlab", "ipykernel", "minigrad"]
    if (sys.platform, platform.machine()) in {("linux", "x86_64"), ("linux", "aarch64"),
                                             ("darwin", "arm64"), ("win32", "AMD64")}:
        modules.append("pygraphviz")  # wheel platforms only (see requirements.txt)
    code = "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules) + \
        "import minigrad; print(minigrad.__file__)\n"
    # run from elsewhere so that `import minigrad` must come from the install
    out = _run([py, "-c", code], env, cwd=tmp_path).stdout.strip().splitlines()[-1]
    assert Path(out).resolve().is_relative_to(ROOT / "minigrad"), (
        f"minigrad imported from {out}, expected the editable checkout in {ROOT}")


@pytest.mark.slow
@pytest.mark.env
def test_binder_jupyterlab_asks_nothing_about_news(binder_env):
    """postBuild puts binder/overrides.json into JupyterLab's settings (issue 30: no news pop-up)."""
    py, env = binder_env
    out = _run([py, "-m", "jupyter", "lab", "path"], env).stdout
    app_dir = next(line.split(":", 1)[1].strip() for line in out.splitlines()
                   if line.startswith("Application directory"))
    installed = Path(app_dir) / "settings" / "overrides.json"
    assert installed.is_file(), f"postBuild did not install {installed}"
    assert json.loads(installed.read_text()) == json.loads((BINDER / "overrides.json").read_text())


@pytest.mark.slow
@pytest.mark.env
@pytest.mark.skipif(LESSON is None, reason="no lesson yet")
def test_binder_env_runs_the_first_lesson(binder_env, tmp_path):
    py, env = binder_env
    _run([py, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", LESSON,
          "--output-dir", tmp_path, "--output", "executed",
          "--ExecutePreprocessor.timeout=600", "--ExecutePreprocessor.kernel_name=python3"],
         env, timeout=1800)
    assert (tmp_path / "executed.ipynb").exists()
