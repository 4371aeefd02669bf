"""Packaging: licences, citation, changelog, project metadata, the version, a
wheel that installs in a clean venv, pytest with and without the notebook
plugins, and the lowest versions requirements.txt allows.

The slow tests build environments in their own temporary directories; the
only network use is package installs (through pip's and uv's usual caches).
"""
from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
DIST_NAME = "minigrad-course"
MIN_PYTHON = (3, 10)
CLAIMED_PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
# the test files run in the lowest-versions environment: the library tests
# (not slow, no browser) plus two lessons, which exercise the notebook stack
LOWEST_TEST_FILES = ["tests/test_op_matrix.py", "tests/test_tape.py", "tests/test_graph.py",
                     "tests/test_control.py", "tests/test_trace.py", "tests/test_compiler.py",
                     "tests/test_nn.py", "tests/test_optim.py", "tests/test_errors.py", "tests/test_viz.py"]
# 00: widgets and steppers; 07: matplotlib plots (matplotlib < 3.9 fails there with today's IPython)
LOWEST_NOTEBOOKS = ["notebooks/00_start_here.ipynb", "notebooks/07_training.ipynb"]


def pyproject() -> dict:
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11+")
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def requirement_lines(path: Path) -> list[str]:
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = "" if raw.lstrip().startswith("#") else raw.split(" #", 1)[0].strip()
        if line and not line.startswith("-"):
            out.append(line)
    return out


def _tail(text: str, n: int = 40) -> str:
    return "\n".join((text or "").splitlines()[-n:])


def run(cmd, *, cwd=ROOT, env=None, timeout=900) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
                    f"--- stdout\n{_tail(proc.stdout)}\n--- stderr\n{_tail(proc.stderr)}", pytrace=False)
    return proc


def clean_env(**extra) -> dict:
    """This environment without anything that would leak the checkout or a venv in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CONDA", "PIP_REQUIRE", "UV_PYTHON"))}
    env.update(extra)
    return env


# ------------------------------------------------------------------ licences, citation, changelog
def test_licences_exist_and_readme_states_them():
    code = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert code.startswith("MIT License") and "Permission is hereby granted" in code
    content = (ROOT / "LICENSE-CONTENT").read_text(encoding="utf-8")
    assert "Creative Commons Attribution 4.0 International Public License" in content
    assert "Section 8 -- Interpretation." in content, "LICENSE-CONTENT must hold the full CC BY 4.0 text"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Licence and citation", 1)
    assert len(section) == 2, "README needs a 'Licence and citation' section"
    body = section[1].split("\n## ", 1)[0]
    for needle in ("MIT", "LICENSE", "CC BY 4.0", "LICENSE-CONTENT", "CITATION.cff"):
        assert needle in body, f"README 'Licence and citation' does not mention {needle}"


def test_citation_cff():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    for key in ("cff-version", "message", "title", "authors", "version", "license", "repository-code"):
        assert key in cff, f"CITATION.cff has no {key!r}"
    assert str(cff["cff-version"]).startswith("1.2")
    assert cff["version"] == pyproject()["project"]["version"], "CITATION.cff version != pyproject version"
    assert all(("name" in a) or ("family-names" in a) for a in cff["authors"])
    licences = cff["license"] if isinstance(cff["license"], list) else [cff["license"]]
    assert set(licences) == {"MIT", "CC-BY-4.0"}


def test_changelog_has_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    version = pyproject()["project"]["version"]
    assert re.search(rf"^## \[{re.escape(version)}\]", text, re.M), f"CHANGELOG.md has no '## [{version}]' section"


# ------------------------------------------------------------------ metadata and version
def test_project_metadata_is_complete():
    project = pyproject()["project"]
    assert project["name"] == DIST_NAME, "the distribution name (minigrad on PyPI is another project)"
    assert project["license"] == "MIT" and "LICENSE" in project["license-files"]
    assert project["authors"] and project["description"]
    assert "readme" not in project and project["dynamic"] == ["readme"], "setup.py writes the long description"
    assert {"Homepage", "Source", "Issues", "Changelog"} <= set(project["urls"])
    assert project["requires-python"] == ">={}.{}".format(*MIN_PYTHON)
    classifiers = project["classifiers"]
    assert not [c for c in classifiers if c.startswith("License ::")], "PEP 639: the licence is `license`"
    for py in CLAIMED_PYTHONS:
        assert f"Programming Language :: Python :: {py}" in classifiers
    # "Framework :: Jupyter :: JupyterLab :: N" is for JupyterLab extensions; minigrad is none (issue 30)
    assert not [c for c in classifiers if c.startswith("Framework :: Jupyter :: JupyterLab")], classifiers
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    claimed = f"Python {CLAIMED_PYTHONS[0]} to {CLAIMED_PYTHONS[-1]}"
    assert claimed in readme, f"README must state the supported range: {claimed!r}"


def test_pyproject_bounds_agree_with_requirements_txt():
    """The package's own dependency ranges are the course's (requirements.txt)."""
    from packaging.requirements import Requirement
    course = {Requirement(r).name: Requirement(r) for r in requirement_lines(ROOT / "requirements.txt")}
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    assert extras["onnx"] == ["onnx>=1.17"], "mg.export_onnx needs onnx: pip install minigrad-course[onnx]"
    declared = project["dependencies"] + extras["viz"] + extras["onnx"]
    for text in declared:
        req = Requirement(text)
        assert req.name in course, f"{req.name} is a dependency of the package but not in requirements.txt"
        assert str(req.specifier) == str(course[req.name].specifier), (
            f"{req.name}: pyproject says {req.specifier}, requirements.txt {course[req.name].specifier}")
        assert str(req.marker) == str(course[req.name].marker)


def test_version_matches_pyproject():
    import minigrad
    assert minigrad.__version__ == pyproject()["project"]["version"]


def test_version_falls_back_to_pyproject_in_an_uninstalled_checkout(tmp_path):
    """Without installed metadata (a bare checkout on sys.path) __version__ is read from pyproject.toml."""
    code = ("import importlib.metadata as md\n"
            "def missing(name):\n"
            "    raise md.PackageNotFoundError(name)\n"
            "md.version = missing\n"
            "import minigrad\n"
            "print(minigrad.__version__)\n")
    out = run([sys.executable, "-c", code], cwd=tmp_path,
              env=clean_env(PYTHONPATH=str(ROOT))).stdout.strip()
    assert out == pyproject()["project"]["version"]


def test_package_source_parses_as_the_oldest_supported_python():
    """requires-python says 3.10: no syntax newer than that in minigrad/ (CI runs 3.11 only)."""
    for path in sorted((ROOT / "minigrad").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=MIN_PYTHON)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert "tomllib" not in names, f"{path.relative_to(ROOT)}: tomllib is Python 3.11+"


@pytest.mark.slow
@pytest.mark.env
def test_wheel_installs_in_a_clean_venv(tmp_path):
    """Build the wheel from a copy of the sources (the checkout stays clean), install it with
    --no-deps plus numpy into a fresh venv, import it from elsewhere, print the version."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "minigrad", src / "minigrad", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    wheels = tmp_path / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--progress-bar", "off",
         "--no-deps", "-w", wheels, src], env=clean_env())
    [wheel] = wheels.glob("*.whl")
    version = pyproject()["project"]["version"]
    assert wheel.name.startswith(f"minigrad_course-{version}-py3-none-any"), wheel.name

    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = Parser().parsestr(zf.read(f"minigrad_course-{version}.dist-info/METADATA").decode())
    expected = {p.relative_to(ROOT).as_posix() for p in (ROOT / "minigrad").rglob("*.py")
                if "__pycache__" not in p.parts}
    assert expected <= set(names), f"modules missing from the wheel: {sorted(expected - set(names))}"
    assert not [n for n in names if n.split("/")[0] not in ("minigrad", f"minigrad_course-{version}.dist-info")]
    assert f"minigrad_course-{version}.dist-info/licenses/LICENSE" in names
    assert meta["Name"] == DIST_NAME and meta["Version"] == version
    assert meta["Requires-Python"] == ">=3.10" and meta["License-Expression"] == "MIT"
    assert any(r.startswith("numpy") for r in meta.get_all("Requires-Dist"))

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    run([sys.executable, "-m", "pip", "--python", py, "install", "--disable-pip-version-check",
         "--progress-bar", "off", "--no-deps", wheel, "numpy"], env=clean_env())
    out = run([py, "-c", "import minigrad; print(minigrad.__version__); print(minigrad.__file__)"],
              cwd=tmp_path, env=clean_env()).stdout.split()
    print(f"clean venv: minigrad {out[0]} from {out[1]}")
    assert out[0] == version
    assert Path(out[1]).resolve().is_relative_to(venv.resolve())


def _setup_py():
    spec = importlib.util.spec_from_file_location("minigrad_setup", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # not __main__: defines absolute_links, does not call setup()
    return mod


MD_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_long_description_has_only_absolute_links():
    """README's relative links (lessons, LICENSE, anchors) break on PyPI: the long description that
    setup.py computes has absolute GitHub links, each to a file that exists here."""
    mod = _setup_py()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    relative = [t for t in MD_LINK.findall(readme) if not re.match(r"[a-z]+:", t)]
    assert relative, "README.md has no relative links: the test would check nothing"
    text = mod.absolute_links(readme)
    targets = MD_LINK.findall(text)
    assert len(targets) == len(MD_LINK.findall(readme))
    assert not [t for t in targets if not t.startswith(("https://", "http://"))], "relative links left"
    for t in targets:
        if t.startswith(mod.REPO + "/blob/main/"):
            path = t.removeprefix(mod.REPO + "/blob/main/").split("#")[0]
            assert (ROOT / path).exists(), f"README links to {path}, which does not exist"


@pytest.mark.slow
@pytest.mark.env
def test_sdist_and_its_wheel(tmp_path):
    """`uv build` (sdist, then the wheel from the sdist, as pip does): the sdist holds the package and no
    tests (they need the repository's notebooks and golden files, issue 30), and the wheel's metadata has
    the onnx extra, the classifiers and a long description with absolute links."""
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if not uv:
        pytest.skip("uv is not installed (it comes with requirements-test.txt)")
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".*", "build", "dist", "__pycache__", "*.egg-info",
                                                             "node_modules", "artifacts"))
    out = tmp_path / "dist"
    run([uv, "build", "--no-progress", "-o", out, src], env=clean_env())
    version = pyproject()["project"]["version"]
    [sdist], [wheel] = out.glob("*.tar.gz"), out.glob("*.whl")
    with tarfile.open(sdist) as tf:
        names = [n.split("/", 1)[1] for n in tf.getnames() if "/" in n]
    assert not [n for n in names if n.startswith(("tests", "notebooks", "solutions", "exercises"))], names
    expected = {p.relative_to(ROOT).as_posix() for p in (ROOT / "minigrad").rglob("*.py")
                if "__pycache__" not in p.parts}
    assert expected <= set(names), sorted(expected - set(names))
    assert {"setup.py", "README.md", "LICENSE", "pyproject.toml"} <= set(names)
    with zipfile.ZipFile(wheel) as zf:
        meta = Parser().parsestr(zf.read(f"minigrad_course-{version}.dist-info/METADATA").decode())
    assert "onnx" in meta.get_all("Provides-Extra")
    assert 'onnx>=1.17; extra == "onnx"' in meta.get_all("Requires-Dist")
    assert not [c for c in meta.get_all("Classifier") if "JupyterLab" in c]
    assert meta["Description-Content-Type"] == "text/markdown"
    body = meta.get_payload()
    assert "minigrad: dynamic vs static computation graphs" in body
    links = MD_LINK.findall(body)
    assert links and not [t for t in links if not t.startswith(("https://", "http://"))], links


# ------------------------------------------------------------------ pytest with and without nbval
def test_notebook_options_come_from_conftest(request):
    """With nbval present, the run is configured as `--nbval-lax --nbval-current-env
    --sanitize-with=tests/nbval_sanitize.cfg` (what CI's `python3 dev.py test` relies on)."""
    config = request.config
    if not config.pluginmanager.hasplugin("nbval"):
        pytest.skip("nbval is not active in this run")
    opt = config.option
    assert opt.nbval_lax or opt.nbval
    assert opt.nbval_current_env or opt.nbval_kernel_name
    assert opt.nbval_sanitize_with and Path(opt.nbval_sanitize_with).resolve().is_file()
    addopts = pyproject()["tool"]["pytest"]["ini_options"]["addopts"]
    assert not [a for a in addopts if "nbval" in a or "sanitize" in a], \
        "nbval options in addopts break pytest wherever nbval is missing"


@pytest.mark.slow
def test_library_tests_run_without_nbval():
    """`pytest tests/test_op_matrix.py -p no:nbval` passes, and a notebook is skipped with the reason."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:nbval", "-p", "no:cacheprovider",
                           "-q", "-rs", "tests/test_op_matrix.py", "notebooks/00_start_here.ipynb"],
                          cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
    assert proc.returncode == 0, _tail(proc.stdout + proc.stderr)
    assert re.search(r"\d+ passed", proc.stdout) and re.search(r"\d+ skipped", proc.stdout), _tail(proc.stdout)
    assert re.search(r"SKIPPED \[1\] notebooks/00_start_here.ipynb: nbval is not installed", proc.stdout), \
        _tail(proc.stdout)


# ------------------------------------------------------------------ lowest allowed versions
@pytest.mark.slow
@pytest.mark.env
def test_lowest_allowed_versions_pass_the_library_tests(tmp_path):
    """uv installs requirements.txt (plus pytest, hypothesis and nbval from requirements-test.txt) at the
    lowest versions they allow (--resolution lowest-direct, wheels only) into a fresh venv; the library
    tests and two lessons then run there against the checkout (not installed: PYTHONPATH)."""
    uv = shutil.which("uv", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if uv is None:
        pytest.skip("uv is not installed (it comes with requirements-test.txt: pip install uv)")
    tools = [r for r in requirement_lines(ROOT / "requirements-test.txt")
             if re.match(r"(pytest|hypothesis|nbval)\b", r)]
    venv = tmp_path / "lowest"
    env = clean_env()
    env.pop("VIRTUAL_ENV", None)
    run([uv, "venv", "--quiet", "--python", sys.executable, venv], env=env)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    run([uv, "pip", "install", "--quiet", "--python", py, "--resolution", "lowest-direct",
         "--only-binary", ":all:", "-r", ROOT / "requirements.txt", *tools], env=env, timeout=1200)
    versions = run([uv, "pip", "freeze", "--python", py], env=env).stdout
    from packaging.requirements import Requirement
    for line in requirement_lines(ROOT / "requirements.txt") + tools:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        lower = next((s.version for s in req.specifier if s.operator in (">=", "==", "~=")), None)
        got = re.search(rf"^{re.escape(req.name)}==(\S+)$", versions, re.M | re.I)
        assert got, f"{req.name} not installed in the lowest-versions venv"
        print(f"lowest: {req.name}=={got.group(1)} (requirement {req.specifier})")
        if lower is not None:
            from packaging.version import Version
            assert Version(got.group(1)) == Version(lower), f"{req.name}: {got.group(1)} is not the lower bound"

    test_env = clean_env(PYTHONPATH=str(ROOT), MPLBACKEND="Agg", PYDEVD_DISABLE_FILE_VALIDATION="1")
    out = run([py, "-c", "import minigrad, numpy; print(minigrad.__version__, numpy.__version__)"],
              cwd=tmp_path, env=test_env).stdout.split()
    assert out[0] == pyproject()["project"]["version"]  # the pyproject fallback: not installed here
    proc = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow and not browser",
                "-W", "ignore::DeprecationWarning", *LOWEST_TEST_FILES, *LOWEST_NOTEBOOKS],
               env=test_env, timeout=1200)
    print(_tail(proc.stdout, 3))


WHEEL_PLATFORMS = ["x86_64-manylinux_2_28", "aarch64-manylinux_2_28", "aarch64-apple-darwin",
                   "x86_64-apple-darwin", "x86_64-pc-windows-msvc"]
MARKED = {"numba", "onnxruntime", "pygraphviz"}     # requirements.txt limits these to where wheels exist


def resolve_to_wheels(python) -> dict | None:
    """uv's resolution of requirements.txt, wheels only, for `python` on each of WHEEL_PLATFORMS:
    {platform: CompletedProcess}, or None without uv. Mostly waiting on PyPI (~10 s a platform), so the
    test below has it start with the run (conftest.py's early marker)."""
    uv = shutil.which("uv", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if uv is None:
        return None
    return {platform: subprocess.run([uv, "pip", "compile", str(ROOT / "requirements.txt"), "--python-version", python,
                                      "--python-platform", platform, "--only-binary", ":all:", "--quiet",
                                      "--no-header"], capture_output=True, text=True, env=clean_env(), timeout=300)
            for platform in WHEEL_PLATFORMS}


@pytest.mark.slow
@pytest.mark.env
@pytest.mark.parametrize("python", [pytest.param(v, marks=pytest.mark.early(resolve_to_wheels, v))
                                    for v in ["3.10", "3.11", "3.12", "3.13"]])
def test_requirements_resolve_to_wheels_on_every_supported_python_and_platform(python, early):
    """uv resolves requirements.txt with wheels only (no source builds) for each supported Python on
    Linux x86_64/aarch64, macOS arm64/x86_64 and Windows; the packages behind platform markers are
    there exactly where their markers say (macOS x86_64 goes without them)."""
    if early is None:
        pytest.skip("uv is not installed (it comes with requirements-test.txt: pip install uv)")
    for platform, proc in early.items():
        if proc.returncode != 0 and re.search(r"(?i)network|connect|dns|timed out|offline", proc.stderr):
            pytest.skip(f"PyPI is not reachable: {proc.stderr.strip()[-200:]}")
        assert proc.returncode == 0, f"{python} {platform}: {proc.stderr[-800:]}"
        names = {m.group(1).lower() for m in re.finditer(r"^([A-Za-z0-9_.-]+)==", proc.stdout, re.M)}
        assert {"numpy", "onnx", "jupyterlab", "ipywidgets", "graphviz"} <= names, (python, platform, names)
        expect_marked = set() if platform == "x86_64-apple-darwin" else MARKED
        assert names & MARKED == expect_marked, (python, platform, names & MARKED)
