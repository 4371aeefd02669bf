"""Binder builds that cache and stay reproducible.

- repo2docker (``--no-build``: it renders the Dockerfile, no Docker needed)
  installs binder/requirements.txt *before* it copies the repository, so a
  commit that changes only notebooks reuses the cached environment layer;
  postBuild (which installs minigrad) runs after the copy.
- binder/requirements.txt is exact pins (scripts/pin_binder.py), every one
  inside requirements.txt's ranges, with pygraphviz's marker kept, wheels
  only, and no torch.

tests/test_binder.py builds that environment for real and runs a lesson in it.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"


def requirement_lines(path: Path) -> list[str]:
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = "" if raw.lstrip().startswith("#") else raw.split(" #", 1)[0].strip()
        if line:
            out.append(line)
    return out


def binder_pins() -> dict[str, Requirement]:
    pins = {}
    for line in requirement_lines(BINDER / "requirements.txt"):
        if line.startswith("-"):
            continue
        req = Requirement(line)
        pins[canonicalize_name(req.name)] = req
    return pins


def _pin_script():
    spec = importlib.util.spec_from_file_location("pin_binder", ROOT / "scripts" / "pin_binder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ the pins
def test_binder_requirements_have_no_local_references():
    for line in requirement_lines(BINDER / "requirements.txt"):
        assert not line.startswith(("-r", "-c", "-e", "--requirement", "--constraint", "--editable")), \
            f"binder/requirements.txt: {line!r} makes repo2docker copy the repository before installing"
        assert not line.startswith((".", "/")) and "file://" not in line, line
    assert "--only-binary=:all:" in requirement_lines(BINDER / "requirements.txt"), \
        "binder/requirements.txt must refuse source builds (--only-binary=:all:)"


def test_binder_pins_agree_with_requirements_txt():
    pins = binder_pins()
    for name, req in pins.items():
        assert len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==", \
            f"binder/requirements.txt: {req} is not an exact pin"
    assert "torch" not in pins, "torch must stay out of the Binder image"
    for line in requirement_lines(ROOT / "requirements.txt"):
        want = Requirement(line)
        name = canonicalize_name(want.name)
        assert name in pins, f"{want.name} (requirements.txt) is not pinned in binder/requirements.txt"
        pinned = pins[name]
        version = next(iter(pinned.specifier)).version
        assert want.specifier.contains(version, prereleases=True), \
            f"{want.name}=={version} in binder/requirements.txt is outside requirements.txt's {want.specifier}"
        assert str(pinned.marker) == str(want.marker), \
            f"{want.name}: the Binder pin must keep requirements.txt's marker ({want.marker})"


def test_binder_pins_are_a_closed_set():
    """Every pinned package's own requirements (as installed here) are pinned too, at versions they accept,
    so pip on Binder has nothing left to choose."""
    from importlib import metadata
    pins = binder_pins()
    for name, req in pins.items():
        version = next(iter(req.specifier)).version
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.version != version:
            continue  # this environment differs from the pinned one; test_binder.py builds the real one
        for text in dist.requires or []:
            dep = Requirement(text)
            if dep.marker is not None and not dep.marker.evaluate({"extra": ""}):
                continue
            dep_name = canonicalize_name(dep.name)
            assert dep_name in pins, f"{name}=={version} needs {dep}, which binder/requirements.txt does not pin"
            dep_version = next(iter(pins[dep_name].specifier)).version
            assert dep.specifier.contains(dep_version, prereleases=True), \
                f"{name}=={version} needs {dep}, pinned {dep_name}=={dep_version}"


def test_binder_runtime_matches_the_pinning_python():
    pin = _pin_script()
    assert pin.runtime_python(BINDER) is not None, "binder/runtime.txt must name the Python (python-3.X)"
    header = (BINDER / "requirements.txt").read_text(encoding="utf-8")
    major, minor = pin.runtime_python(BINDER)
    assert f"Python {major}.{minor}," in header, "binder/requirements.txt was pinned on another Python"


def test_post_build_installs_minigrad_without_dependencies():
    post = BINDER / "postBuild"
    assert post.exists(), "binder/postBuild installs minigrad"
    assert os.access(post, os.X_OK), "binder/postBuild must be executable"
    text = post.read_text(encoding="utf-8")
    assert text.startswith("#!")
    commands = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    installs = [c for c in commands if "pip install" in c]
    assert installs and all("--no-deps" in c for c in installs), installs
    assert any(re.search(r"-e \.(\s|$)", c) for c in installs), installs


# ------------------------------------------------------------------ the Dockerfile repo2docker renders
@pytest.mark.env
def test_repo2docker_installs_requirements_before_copying_the_repository():
    if importlib.util.find_spec("repo2docker") is None:
        pytest.skip("jupyter-repo2docker is not installed (it comes with requirements-test.txt)")
    proc = subprocess.run([sys.executable, "-m", "repo2docker", "--no-build", str(ROOT)],
                          cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dockerfile = proc.stdout
    lines = dockerfile.splitlines()

    def first(pattern: str) -> int:
        found = [i for i, line in enumerate(lines) if re.search(pattern, line)]
        assert found, f"no line matching {pattern!r} in the generated Dockerfile:\n{dockerfile}"
        return found[0]

    install = first(r'pip install .*-r "?binder/requirements\.txt')
    copy_repo = first(r"^COPY .*\bsrc/ \$\{REPO_DIR\}/?$")
    post_build = first(r"^RUN \./binder/postBuild$")
    report = (f"Dockerfile: line {install + 1}: {lines[install].strip()}\n"
              f"            line {copy_repo + 1}: {lines[copy_repo].strip()}\n"
              f"            line {post_build + 1}: {lines[post_build].strip()}")
    print(report)
    assert install < copy_repo < post_build, "the environment must be installed before the repository is copied\n" + report
    # before the install, only binder/ files come from the repository: a notebook change
    # leaves every layer up to and including the pip install cached
    early = [line for line in lines[:install] if re.match(r"^COPY .*\bsrc/", line)]
    assert early and all(re.search(r"\bsrc/binder/\S+ ", line) for line in early), early
