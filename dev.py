#!/usr/bin/env python3
"""Bootstrap and run the minigrad course.  Pure standard library.

    python3 dev.py lab [jupyter-lab args]   set up .venv, open the course in JupyterLab
    python3 dev.py test [pytest args]       set up .venv and .venv-test, run all tests
    python3 dev.py bench [args]             run the benchmarks (scripts/bench.py, in .venv-test)
    python3 dev.py exercises [args]         regenerate exercises/ from solutions/
    python3 dev.py lite [--pyodide-index URL]  build the JupyterLite site (the whole course) into build/lite/

Two environments (created with `python3 -m venv`), nothing registered globally:
  .venv       the learner's: requirements.txt + minigrad (editable), nothing else, so
              JupyterLab shows only what the course uses;
  .venv-test  the tools': requirements.txt + requirements-test.txt + torch + minigrad; it holds
              the Jupyter kernel `minigrad-learner` (runs .venv's Python), so the tests run
              the notebooks as a learner does.
Setup is skipped when the requirement files have not changed since the last
successful run (a stamp file inside each venv).
"""

from __future__ import annotations

import glob
import base64
import hashlib
import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parent
WINDOWS = os.name == "nt"
LEARNER_KERNEL = "minigrad-learner"           # the kernelspec in .venv-test that runs .venv's Python
LEARNER_LAYOUT = 2                            # .venv's stamp: 2 = requirements.txt only (issue 30)
OVERRIDES = ROOT / "binder" / "overrides.json"  # JupyterLab settings: no news pop-up, no update check
FIRST_LESSON = "notebooks/00_start_here.ipynb"
TORCH_VERSION = "2.13.0"
TORCH_WHEEL_GLOB = f"torch-{TORCH_VERSION}*cpu*.whl"
SYSTEM_PACKAGES = {"graphviz": "dot", "chromium": "/usr/bin/chromium"}  # apt name -> what it provides
MIN_PYTHON = (3, 10)


# ----------------------------------------------------------------- helpers
def say(msg: str) -> None:
    print(f"[dev.py] {msg}", flush=True)


def rel(p) -> str:
    try:
        return str(Path(p).relative_to(ROOT))
    except ValueError:
        return str(p)


def run(cmd, check=True, **kw) -> subprocess.CompletedProcess:
    print("+ " + " ".join(shlex.quote(rel(c) if isinstance(c, Path) else str(c)) for c in cmd), flush=True)
    kw.setdefault("cwd", ROOT)
    kw.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.run([str(c) for c in cmd], **kw)
    if check and proc.returncode != 0:
        say(f"command failed with exit code {proc.returncode}")
        sys.exit(proc.returncode or 1)
    return proc


def quiet(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, **kw)


# ----------------------------------------------------------------- the venvs
def _in_course_venv(path: str) -> bool:
    """Is `path` inside .venv or .venv-test of this checkout?"""
    return any(Path(path).resolve().is_relative_to(ROOT / name) for name in (".venv", ".venv-test"))


class Venv:
    """One virtual environment of the course: where it is, its Python, its setup stamp.

    >>> Venv(ROOT / ".venv").python.name in ("python", "python.exe")
    True
    """

    def __init__(self, path: Path):
        self.path = path
        self.bin = path / ("Scripts" if WINDOWS else "bin")
        self.python = self.bin / ("python.exe" if WINDOWS else "python")
        self.stamp = path / ".minigrad-dev-setup.json"
        self.jupyter = path / "share" / "jupyter"

    def env(self) -> dict:
        """Environment for programs run from this venv: it first on PATH, and its Jupyter data dir first
        so its kernels win over any kernel registered in the user's home directory. The other venv's
        entries go: a learner's JupyterLab started from the tests must not load .venv-test's extensions."""
        env = dict(os.environ)
        env.pop("PYTHONHOME", None)
        env["VIRTUAL_ENV"] = str(self.path)
        for var, first in (("PATH", self.bin), ("JUPYTER_PATH", self.jupyter)):
            rest = [p for p in env.get(var, "").split(os.pathsep) if p and not _in_course_venv(p)]
            env[var] = os.pathsep.join([str(first), *rest])
        return env

    def works(self) -> bool:
        return self.python.exists() and quiet([self.python, "-m", "pip", "--version"]).returncode == 0

    def read_stamp(self) -> dict:
        try:
            return json.loads(self.stamp.read_text())
        except (OSError, ValueError):
            return {}

    def write_stamp(self, **keys) -> None:
        self.stamp.write_text(json.dumps({**self.read_stamp(), **keys}, indent=1) + "\n")

    def ensure(self) -> None:
        """Create the venv (with pip) unless it exists and works."""
        if self.works():
            return
        if self.path.exists():
            say(f"{rel(self.path)} exists but is unusable; recreating it")
            shutil.rmtree(self.path)
        say(f"creating the virtual environment {rel(self.path)} with {sys.executable} ({sys.version.split()[0]})")
        r = run([sys.executable, "-m", "venv", self.path], check=False)
        if r.returncode != 0 or not self.works():
            say("`python3 -m venv` could not install pip (no ensurepip); trying without it")
            shutil.rmtree(self.path, ignore_errors=True)
            run([sys.executable, "-m", "venv", "--without-pip", self.path])
            bootstrap_pip_without_ensurepip(self.python)
        if not self.works():
            say(f"ERROR: the virtual environment {rel(self.path)} has no working pip")
            sys.exit(1)

    def install_overrides(self) -> None:
        """binder/overrides.json as this venv's JupyterLab settings overrides (no news pop-up)."""
        dest = self.jupyter / "lab" / "settings" / "overrides.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(OVERRIDES, dest)


LEARNER = Venv(ROOT / ".venv")       # requirements.txt + minigrad: what `dev.py lab` runs
TOOLS = Venv(ROOT / ".venv-test")    # + test tools, JupyterLite build tools, torch
VENV, VPY = LEARNER.path, LEARNER.python


def venv_env() -> dict:
    """The learner venv's environment (`dev.py lab`, the tests that start its JupyterLab)."""
    return LEARNER.env()


def pip_flags() -> list[str]:
    flags = ["--disable-pip-version-check"]
    if not sys.stdout.isatty():
        flags += ["--progress-bar", "off"]
    return flags


def bootstrap_pip_without_ensurepip(python: Path) -> None:
    """Debian/Ubuntu's python3 without the python3-venv package has no
    ensurepip: make the venv --without-pip and install pip from a wheel."""
    wheels = sorted(glob.glob("/usr/share/python-wheels/pip-*.whl"))
    tmp = tempfile.mkdtemp(prefix="minigrad-pip-")
    try:
        if not wheels:
            say("fetching a pip wheel with the system pip to bootstrap the venv")
            r = run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                     "-d", tmp, "pip"], check=False)
            wheels = sorted(glob.glob(os.path.join(tmp, "pip-*.whl")))
            if r.returncode != 0 or not wheels:
                say("ERROR: cannot create a virtual environment: this python3 has neither ensurepip "
                    "nor pip. Install the 'python3-venv' package (Debian/Ubuntu: "
                    "sudo apt-get install python3-venv) and run this again.")
                sys.exit(1)
        wheel = wheels[-1]
        run([python, os.path.join(wheel, "pip"), "install", "--no-deps", *pip_flags(), wheel])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_python() -> None:
    if sys.version_info < MIN_PYTHON:
        say(f"ERROR: Python {'.'.join(map(str, MIN_PYTHON))}+ is needed, this is {sys.version.split()[0]}")
        sys.exit(1)


def setup_key(level: str, extra: str = "") -> str:
    h = hashlib.sha256()
    h.update(f"{level}|{sys.version_info[:2]}|{extra}|".encode())
    # an editable install of a flat layout maps the packages that exist at
    # install time, so (re)install once minigrad/ appears
    h.update(str((ROOT / "minigrad" / "__init__.py").exists()).encode())
    files = ["pyproject.toml", "requirements.txt"]
    if level == "test":
        files.append("requirements-test.txt")
    for name in files:
        p = ROOT / name
        h.update(name.encode() + b"\0" + (p.read_bytes() if p.exists() else b"<missing>") + b"\0")
    return h.hexdigest()


def setup(level: str) -> Venv:
    """Set up the venv a command needs and return it. 'lab': the learner's .venv (requirements.txt +
    minigrad, editable); 'test': that one too, and .venv-test (+ test tools and torch) with the
    learner kernel. Both get the JupyterLab settings overrides."""
    check_python()
    if LEARNER.path.exists() and LEARNER.read_stamp().get("layout") != LEARNER_LAYOUT:
        # an older dev.py put nbval and pytest into .venv, and after `dev.py test` every test tool and torch
        # (nbgrader's menus in the learner's JupyterLab); pip never removes them, so start afresh
        say(f"{rel(LEARNER.path)} was made by an older dev.py (test tools inside); recreating it as the learner's venv")
        shutil.rmtree(LEARNER.path)
    install(LEARNER, "lab", ["-r", "requirements.txt"])
    LEARNER.write_stamp(layout=LEARNER_LAYOUT)
    if level == "lab":
        return LEARNER
    install(TOOLS, "test", ["-r", "requirements.txt", "-r", "requirements-test.txt"], torch=True)
    register_learner_kernel()
    return TOOLS


def install(venv: Venv, level: str, reqs: list[str], torch: bool = False) -> None:
    """pip install `reqs` and minigrad (editable) into `venv` unless its stamp says it is done."""
    venv.ensure()
    venv.install_overrides()
    torch_wheel = find_local_torch_wheel(venv) if torch else None
    key = setup_key(level, extra=str(torch_wheel or ""))
    if venv.read_stamp().get(level) == key:
        say(f"{rel(venv.path)} is up to date ({level}); skipping pip (delete {rel(venv.stamp)} to force)")
        return
    say(f"installing the {level} requirements and minigrad (editable) into {rel(venv.path)}")
    run([venv.python, "-m", "pip", "install", *pip_flags(), *reqs, "-e", "."])
    if torch:
        install_torch(venv, torch_wheel)
    venv.write_stamp(**{level: key})


def register_learner_kernel() -> Path:
    """The kernelspec `minigrad-learner` in .venv-test: a kernel running the learner's .venv Python, so the
    tests run notebooks with exactly what a learner has (no torch, no test tools)."""
    dest = TOOLS.jupyter / "kernels" / LEARNER_KERNEL
    dest.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [str(LEARNER.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (minigrad learner, .venv)", "language": "python",
            "metadata": {"debugger": True},
            # as `dev.py lab` would: .venv's programs first (${PATH}: jupyter_client fills in the caller's)
            "env": {"VIRTUAL_ENV": str(LEARNER.path), "PATH": str(LEARNER.bin) + os.pathsep + "${PATH}"}}
    (dest / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")
    return dest


# ----------------------------------------------------------------- torch (optional)
def pip_find_links(venv: Venv) -> list[str]:
    """Directories in pip's configured find-links (config files and PIP_FIND_LINKS)."""
    values = []
    r = quiet([venv.python, "-m", "pip", "config", "list"])
    for line in r.stdout.splitlines():
        key, sep, val = line.partition("=")
        if sep and key.strip().endswith("find-links"):
            values.append(val.strip().strip("'\""))
    if os.environ.get("PIP_FIND_LINKS"):
        values.append(os.environ["PIP_FIND_LINKS"])
    dirs = []
    for value in values:
        for item in value.split():
            if item.startswith("file:"):
                item = unquote(urlparse(item).path)
            elif "://" in item:
                continue  # remote: checking it would mean downloading
            if os.path.isdir(item) and item not in dirs:
                dirs.append(item)
    return dirs


def find_local_torch_wheel(venv: Venv) -> str | None:
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    for d in pip_find_links(venv):
        for whl in sorted(glob.glob(os.path.join(d, TORCH_WHEEL_GLOB))):
            if f"-{tag}-" in os.path.basename(whl):
                return whl
    return None


def install_torch(venv: Venv, wheel: str | None) -> None:
    if not wheel:
        say(f"no local CPU wheel for torch=={TORCH_VERSION} in pip's find-links; "
            "skipping torch (the torch cross-check tests will skip)")
        return
    say(f"installing torch=={TORCH_VERSION} from the local wheel {wheel}")
    # Installing the file itself: if it does not fit this platform pip fails
    # instead of downloading a multi-GB build from the index.
    r = run([venv.python, "-m", "pip", "install", *pip_flags(), wheel], check=False)
    if r.returncode != 0:
        say("could not install the local torch wheel; continuing without torch "
            "(the torch cross-check tests will skip)")


# ----------------------------------------------------------------- system packages
def missing_system_packages() -> list[str]:
    missing = []
    for pkg, provides in SYSTEM_PACKAGES.items():
        found = os.path.exists(provides) if os.path.isabs(provides) else shutil.which(provides)
        if not found:
            missing.append(pkg)
    return missing


def ensure_system_packages() -> None:
    missing = missing_system_packages()
    if not missing:
        return
    what = ", ".join(f"{p} ({SYSTEM_PACKAGES[p]})" for p in missing)
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    has_apt = shutil.which("apt-get") and os.path.exists("/etc/debian_version")
    if not (is_root and has_apt):
        say(f"NOTE: missing system packages: {what}. Not installing them "
            f"({'not root' if has_apt else 'no apt-get here'}). Tests that need them skip "
            "with a reason; graphs still render through the pygraphviz wheel. "
            f"To install them on Debian: sudo apt-get install -y {' '.join(missing)}")
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
    say(f"installing missing system packages with apt-get: {what}")
    run([*apt, "update"], check=False, env=env)
    r = run([*apt, "install", "-y", *missing], check=False, env=env)
    if r.returncode != 0 and len(missing) > 1:
        for pkg in missing:  # one unavailable package must not block the others
            run([*apt, "install", "-y", pkg], check=False, env=env)
    still = missing_system_packages()
    if still:
        say(f"NOTE: still missing after apt-get: {', '.join(still)}; the tests that need them will skip")


# ----------------------------------------------------------------- commands
def exec_in_venv(venv: Venv, cmd: list) -> None:
    print("+ " + " ".join(shlex.quote(rel(c) if isinstance(c, Path) else str(c)) for c in cmd), flush=True)
    sys.stdout.flush()
    os.chdir(ROOT)
    if WINDOWS:
        sys.exit(subprocess.call([str(c) for c in cmd], env=venv.env()))
    os.execve(str(cmd[0]), [str(c) for c in cmd], venv.env())


def lab_command(args: list[str]) -> list:
    """The `jupyter lab` command line of `dev.py lab` (tests start the server with it too).

    The server is rooted at the repository, so links from notebooks/ to ../exercises and
    ../solutions work and the file browser reaches every folder; it opens the first lesson."""
    cmd = [VPY, "-m", "jupyter", "lab", f"--ServerApp.root_dir={ROOT}"]
    if (ROOT / FIRST_LESSON).exists():
        cmd.append(f"--LabApp.default_url=/lab/tree/{FIRST_LESSON}")
    if not WINDOWS:
        # The launcher opens terminals in the file browser's folder (notebooks/ once the lesson is
        # open); start them at the repository root, where the README's commands run. No login shell:
        # it would reset PATH and lose the venv.
        shell = f'cd {shlex.quote(str(ROOT))} && exec "${{SHELL:-/bin/sh}}"'
        cmd.append("--ServerApp.terminado_settings=" + json.dumps({"shell_command": ["/bin/sh", "-c", shell]}))
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in args:
        cmd.append("--allow-root")  # e.g. in a container; Jupyter refuses root otherwise
    return cmd + list(args)


def cmd_lab(args: list[str]) -> None:
    setup("lab")
    if not (ROOT / FIRST_LESSON).exists():
        say(f"{FIRST_LESSON} does not exist yet; opening JupyterLab at the repository root")
    if not shutil.which("dot") and quiet([VPY, "-c", "import pygraphviz"]).returncode != 0:
        say("NOTE: neither the Graphviz `dot` program nor the pygraphviz wheel is available, so graphs "
            "will not draw. Install one: .venv/bin/python -m pip install pygraphviz, or apt-get/brew "
            "install graphviz")
    exec_in_venv(LEARNER, lab_command(args))


def cmd_test(args: list[str]) -> None:
    ensure_system_packages()
    tools = setup("test")
    say("running pytest over the configured testpaths: tests notebooks solutions "
        f"(notebooks through nbval, in the kernel {LEARNER_KERNEL})")
    # No paths given: pytest uses `testpaths` from pyproject.toml (absent
    # directories are ignored). Paths in `args` narrow the run as usual.
    proc = run([tools.python, "-m", "pytest", *args], check=False, env=tools.env())
    sys.exit(proc.returncode)


def cmd_bench(args: list[str]) -> None:
    tools = setup("test")                   # the benchmarks compare with torch
    exec_in_venv(tools, [tools.python, ROOT / "scripts" / "bench.py", *args])


def cmd_exercises(args: list[str]) -> None:
    script = ROOT / "scripts" / "make_exercises.py"
    if not script.exists():
        say(f"{rel(script)} does not exist yet; nothing to do")
        sys.exit(1)
    learner = setup("lab")
    exec_in_venv(learner, [learner.python, script, *args])


# ----------------------------------------------------------------- the JupyterLite site
LITE_SRC = ROOT / "lite"                      # committed config: package.json (+lock), wheels.txt, jupyter-lite*.json
LITE_OUT = ROOT / "build" / "lite"            # the static site
LITE_CACHE = ROOT / "build" / "lite-cache"    # npm packages, wheels, the staged lite_dir, jupyterlite's cache
LITE_LESSONS = ["notebooks/*.ipynb", "exercises/*.ipynb"]   # the whole course (issue 38)
LITE_KERNEL_PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"
# The Pyodide package index the site loads numpy, matplotlib, ... from at run time (the core is served with
# the site); {version} is the pin in lite/package.json.
PYODIDE_INDEX = "https://cdn.jsdelivr.net/pyodide/v{version}/full/"
VIZJS_WHEEL_NAME = "minigrad_vizjs"           # minigrad.viz.vizjs.PACKAGE
BINDER_URL = ("https://mybinder.org/v2/gh/minigrad-course/minigrad/HEAD"
              "?urlpath=lab/tree/notebooks/00_start_here.ipynb")
# What the site needs, said without a kernel: the first (markdown) cell of every site notebook and a line on
# the landing page. When the package index is unreachable the kernel never starts and no cell can speak.
LITE_NEEDS = ("This copy of the course runs in your browser (JupyterLite): its Python kernel, Pyodide, loads "
              "numpy and matplotlib from the Pyodide package index ({index}). If the kernel status stays "
              "\u201cUnknown\u201d or the first cell stays `[*]`, that index cannot be reached (offline, or a "
              "proxy blocks it) and no cell will run: run the course locally (`python3 dev.py lab`, see the "
              "README) or [on Binder]({binder}) instead.")
LITE_NOTE_ID = "minigrad-lite-note"
LITE_SETUP_ID = "minigrad-lite-setup"
# The first code cell of every notebook in the site (the repository's notebooks stay as they are).
LITE_SETUP_CELL = """\
# The course in the browser (JupyterLite): install minigrad and its helpers from this site, then start the
# in-browser Graphviz (viz.js) that draws the graphs. Run this cell first.
import piplite
try:
    await piplite.install(["minigrad-course", "minigrad-vizjs", "graphviz", "ipywidgets", "matplotlib"])
    import numpy
except Exception as e:   # numpy comes from the Pyodide package index: say where, then stop the notebook
    raise RuntimeError("numpy could not be loaded from the Pyodide package index ({index}), so minigrad cannot "
                       "run here: run the course locally (python3 dev.py lab) or on Binder ({binder})") from e
import minigrad
loading = minigrad.viz.load_renderer()   # in Pyodide: a promise (viz.js starting); None where `dot` draws
if loading is not None:
    await loading"""
# Notebooks that need packages Pyodide does not have (onnx, onnxruntime): in the site they are read from their
# stored outputs. Their setup cell adds the cell magic %%needs, and every other code cell starts with it.
LITE_READ_ONLY = {"notebooks/11_deployment.ipynb": "onnx",
                  "exercises/11_deployment_exercises.ipynb": "onnx"}
LITE_READ_ONLY_NOTE = ("**In the browser this notebook is read, not run:** it needs {needs} (lesson 11 also "
                       "onnxruntime), which Pyodide does not have. Every code cell starts with `%%needs {needs}`: "
                       "here it prints one line saying so, and the output stored below it shows what it computes "
                       "(the exercises have none to show). Run it locally or on Binder to run it.")
LITE_NEEDS_MAGIC = """
# %%needs PACKAGE ...: run the cell only where every PACKAGE is installed (onnx is not a Pyodide package)
import importlib.util
from IPython.core.magic import register_cell_magic
@register_cell_magic
def needs(line, cell):
    missing = [m for m in line.split() if importlib.util.find_spec(m) is None]
    if missing:
        print(f"skipped: this cell needs {', '.join(missing)}, which the browser does not have; "
              "the output stored with the notebook shows what it computes")
    else:
        get_ipython().run_cell(cell)
del needs"""


def lite_pins() -> dict:
    """The exact npm versions in lite/package.json (pyodide, @viz-js/viz): the one place they are written."""
    deps = json.loads((LITE_SRC / "package.json").read_text())["dependencies"]
    return {"pyodide": deps["pyodide"], "viz": deps["@viz-js/viz"]}


def lite_npm() -> Path:
    """`npm ci` lite/package-lock.json into build/lite-cache/npm (skipped when already installed from it)."""
    npm = shutil.which("npm")
    if not npm:
        say("ERROR: `npm` is needed to fetch pyodide and @viz-js/viz for the JupyterLite site; install Node.js "
            "(e.g. apt-get install npm) and run this again")
        sys.exit(1)
    dest = LITE_CACHE / "npm"
    lock = (LITE_SRC / "package-lock.json").read_bytes()
    done = dest / "node_modules" / ".minigrad-lock"
    if done.exists() and done.read_bytes() == lock:
        say(f"npm packages in {rel(dest)} are up to date")
        return dest / "node_modules"
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(LITE_SRC / name, dest / name)
    run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=dest)
    done.write_bytes(lock)
    return dest / "node_modules"


def check_lite_pins(py: Path, node_modules: Path, pins: dict) -> None:
    """The installed npm packages are the pinned ones, and the Pyodide pin is the one the kernel is built for."""
    for pkg, key in (("pyodide", "pyodide"), ("@viz-js/viz", "viz")):
        got = json.loads((node_modules / pkg / "package.json").read_text())["version"]
        if got != pins[key]:
            say(f"ERROR: {pkg} {got} is installed but lite/package.json pins {pins[key]}; delete {rel(LITE_CACHE)}")
            sys.exit(1)
    kernel = quiet([py, "-c", "from jupyterlite_pyodide_kernel.constants import PYODIDE_VERSION as v; print(v)"])
    if kernel.returncode != 0 or kernel.stdout.strip() != pins["pyodide"]:
        say(f"ERROR: lite/package.json pins pyodide {pins['pyodide']}, but the installed jupyterlite-pyodide-kernel "
            f"is built for {kernel.stdout.strip() or '(not installed: ' + kernel.stderr.strip()[-200:] + ')'}; "
            "change the pin (or requirements-test.txt) so they agree")
        sys.exit(1)


def make_vizjs_wheel(viz_js: Path, version: str, dest: Path) -> Path:
    """A pure-Python wheel carrying @viz-js/viz's UMD build, which minigrad loads into the Pyodide kernel's worker."""
    pkg, dist = VIZJS_WHEEL_NAME, f"{VIZJS_WHEEL_NAME}-{version}.dist-info"
    files = {
        f"{pkg}/__init__.py": (f'"""@viz-js/viz {version} (Graphviz in WebAssembly) for minigrad in JupyterLite: '
                               f'{pkg}/viz-global.js, loaded by minigrad.viz.load_renderer()."""\n'
                               f'VERSION = "{version}"\n').encode(),
        f"{pkg}/viz-global.js": viz_js.read_bytes(),
        f"{dist}/METADATA": (f"Metadata-Version: 2.1\nName: minigrad-vizjs\nVersion: {version}\n"
                             "Summary: @viz-js/viz (MIT) packaged for minigrad's JupyterLite site\n"
                             "License: MIT\n").encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: minigrad dev.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    out = dest / f"{pkg}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return out


def lite_notebook(src: Path, dest: Path, index: str, needs: str | None = None) -> None:
    """Copy a notebook for the site: first a markdown note on what the site needs (readable without a kernel),
    then the setup cell; `needs`: packages Pyodide lacks, whose code cells the copy guards with %%needs."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    note = LITE_NEEDS.format(index=index, binder=BINDER_URL)
    setup = LITE_SETUP_CELL.format(index=index, binder=BINDER_URL)
    if needs:
        note += "\n\n" + LITE_READ_ONLY_NOTE.format(needs=needs)
        setup += LITE_NEEDS_MAGIC
        for c in nb["cells"]:
            if c["cell_type"] == "code":
                c["source"] = [f"%%needs {needs}\n", *c["source"]]
    cells = [{"cell_type": "markdown", "id": LITE_NOTE_ID, "metadata": {"tags": [LITE_NOTE_ID]},
              "source": note.splitlines(keepends=True)},
             {"cell_type": "code", "execution_count": None, "id": LITE_SETUP_ID,
              "metadata": {"tags": [LITE_SETUP_ID]}, "outputs": [], "source": setup.splitlines(keepends=True)}]
    ids = {c["id"] for c in cells}
    nb["cells"] = cells + [c for c in nb["cells"] if c.get("id") not in ids]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def lite_landing(out: Path, index: str) -> None:
    """One line on the site's landing pages (index.html, which forwards to lab/index.html, and the lab page
    while it loads): what the site needs. Static HTML: it shows when nothing else in the site can run."""
    needs = LITE_NEEDS.format(index=index, binder=BINDER_URL).split(": run the course")[0].replace("`", "")
    line = (f'<p id="{LITE_NOTE_ID}">{html.escape(needs)}: run the course locally (<code>python3 dev.py lab'
            f'</code>) or <a href="{html.escape(BINDER_URL)}">on Binder</a>.</p>')
    for page in (out / "index.html", out / "lab" / "index.html"):
        text = page.read_text(encoding="utf-8")
        body = re.search(r"<body[^>]*>", text)
        text = (text[:body.end()] + "\n" + line + text[body.end():] if body
                else text.replace("</html>", f"<body>{line}</body>\n</html>", 1))
        page.write_text(text, encoding="utf-8")


def cmd_lite(args: list[str]) -> None:
    index = os.environ.get("MINIGRAD_PYODIDE_INDEX")
    if args[:1] == ["--pyodide-index"] and len(args) == 2:
        index = args[1]
    elif args:
        say("usage: python3 dev.py lite [--pyodide-index URL]  (default: the Pyodide CDN of the pinned version)")
        sys.exit(2)
    tools = setup("test")                   # jupyterlite-core and jupyterlite-pyodide-kernel are test tools
    build_lite(tools.python, index)


def build_lite(py, index: str | None = None, out: Path = LITE_OUT) -> Path:
    """Build the site into `out` with the Python `py` (which has jupyterlite-core and -pyodide-kernel);
    `index`: where Pyodide packages (numpy, ...) load from (default: the Pyodide CDN of the pinned version)."""
    py = Path(py)
    env = dict(os.environ, PATH=str(py.parent) + os.pathsep + os.environ.get("PATH", ""))
    pins = lite_pins()
    node_modules = lite_npm()
    check_lite_pins(py, node_modules, pins)
    index = index or PYODIDE_INDEX.format(version=pins["pyodide"])

    stage = LITE_CACHE / "lite-dir"         # the lite_dir jupyterlite builds from, made fresh each time
    wheels = LITE_CACHE / "wheels"
    for d in (stage, wheels):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    say("building the wheels the site serves: minigrad, minigrad-vizjs and lite/wheels.txt")
    run([py, "-m", "pip", "wheel", *pip_flags(), "--no-deps", "-q", "-w", wheels, ROOT])
    run([py, "-m", "pip", "download", *pip_flags(), "--no-deps", "--only-binary=:all:", "-q", "-d", wheels,
         "-r", LITE_SRC / "wheels.txt"])
    make_vizjs_wheel(node_modules / "@viz-js" / "viz" / "dist" / "viz-global.js", pins["viz"], wheels)
    all_wheels = sorted(wheels.glob("*.whl"))
    widgets = [w for w in all_wheels if w.name.startswith("jupyterlab_widgets-")]

    # the Pyodide core (pyodide.mjs, the WebAssembly, the stdlib and pyodide-lock.json) at the well-known place
    shutil.copytree(node_modules / "pyodide", stage / "static" / "pyodide",
                    ignore=shutil.ignore_patterns("*.map", "*.d.ts", "console*.html", "README.md"))
    contents = stage / "contents"
    lessons = sorted(p for pattern in LITE_LESSONS for p in ROOT.glob(pattern))
    for nb in lessons:
        name = nb.relative_to(ROOT).as_posix()
        lite_notebook(nb, contents / name, index, LITE_READ_ONLY.get(name))
    lite_json = json.loads((LITE_SRC / "jupyter-lite.json").read_text())
    kernel = lite_json["jupyter-config-data"]["litePluginSettings"][LITE_KERNEL_PLUGIN]
    kernel.setdefault("loadPyodideOptions", {})["packageBaseUrl"] = index
    (stage / "jupyter-lite.json").write_text(json.dumps(lite_json, indent=2) + "\n")
    shutil.copyfile(OVERRIDES, stage / "overrides.json")   # merged into the site's settingsOverrides
    config = json.loads((LITE_SRC / "jupyter_lite_config.json").read_text())
    kernel_ext = quiet([py, "-c", "import os; from jupyter_core.paths import jupyter_path; print(next(p for p in "
                              "jupyter_path('labextensions', '@jupyterlite', 'pyodide-kernel-extension') "
                              "if os.path.isdir(p)))"], env=env).stdout.strip()
    if not kernel_ext:
        say(f"ERROR: {py} has no @jupyterlite/pyodide-kernel-extension (pip install jupyterlite-pyodide-kernel)")
        sys.exit(1)
    config["LiteBuildConfig"].update(
        contents=[str(contents)], output_dir=str(out), cache_dir=str(LITE_CACHE / "jupyterlite"),
        # only the two extensions the course needs (not every extension of the venv, e.g. nbgrader's)
        federated_extensions=[kernel_ext, *map(str, widgets)])
    config["PipliteAddon"] = {"piplite_urls": [str(w) for w in all_wheels]}
    (stage / "jupyter_lite_config.json").write_text(json.dumps(config, indent=2) + "\n")

    shutil.rmtree(out, ignore_errors=True)
    say(f"building the JupyterLite site into {rel(out)} ({len(lessons)} notebooks, Pyodide {pins['pyodide']}, "
        f"packages from {index})")
    run([py, "-m", "jupyter", "lite", "build", "--lite-dir", stage], env=env, cwd=stage)
    lite_landing(out, index)
    say(f"done: {rel(out)}. Serve it with  python3 -m http.server -d {rel(out)} 8000  and open "
        "http://127.0.0.1:8000/lab/index.html?path=notebooks/00_start_here.ipynb")
    return out


COMMANDS = {"lab": cmd_lab, "test": cmd_test, "bench": cmd_bench, "exercises": cmd_exercises,
            "lite": cmd_lite}


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in COMMANDS:
        print(__doc__.strip())
        sys.exit(0 if argv and argv[0] in ("-h", "--help", "help") else 2)
    COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
