#!/usr/bin/env python3
"""Pin binder/requirements.txt to the exact versions the test suite passes with.

    .venv-test/bin/python scripts/pin_binder.py           rewrite binder/requirements.txt
    .venv-test/bin/python scripts/pin_binder.py --check   exit 1 if it would change

Run it with the tools' environment (.venv-test, set up by `python3 dev.py test`: it has
requirements.txt and the Notebook that nbgrader brings, see COMPANIONS),
after the tests pass there and whenever requirements.txt changes. It reads the
requirements in requirements.txt (the course's direct requirements, ranges),
walks their dependencies through the installed distributions' metadata, and
writes every one of them as ``name==installed version``, so next term's Binder
builds exactly what was tested here. Test tools (pytest, playwright, nbgrader,
...) and torch are not course requirements and are never pinned unless the
course needs them.

Why a generated file instead of ``-r ../requirements.txt`` and ``-e .``: a local
reference makes repo2docker copy the whole repository before installing, so
every commit (even a notebook typo) rebuilds the environment. With only named,
pinned requirements the install happens before the copy and Binder reuses that
cached layer; binder/postBuild then installs minigrad itself (``--no-deps``).

Markers: a direct requirement's environment marker (pygraphviz: wheel platforms
only) is kept on it and on the dependencies only it brings in. Dependencies are
otherwise those of this interpreter's platform: binder/runtime.txt must name
this Python version (Binder is Linux).

Besides requirements.txt, ``notebook`` is pinned when it is installed here: the
Binder base image ships Notebook 7, whose version is tied to JupyterLab's, so
it must move with the pinned jupyterlab.
"""
from __future__ import annotations

import argparse
import platform
import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
BINDER = ROOT / "binder"
OUTPUT = BINDER / "requirements.txt"
COMPANIONS = ["notebook"]          # pinned when installed (see the docstring)
NEVER = {"torch", "pip", "setuptools", "wheel", "minigrad", "minigrad-course"}

try:
    from packaging.markers import Marker, default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pragma: no cover - packaging comes with jupyterlab
    sys.exit("pin_binder.py needs the 'packaging' package: run it with .venv-test/bin/python")


def read_requirements(path: Path = REQUIREMENTS) -> list[Requirement]:
    """The requirement lines of a requirements file (no options, no -r/-e)."""
    reqs = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line or line.startswith("-"):
            continue
        reqs.append(Requirement(line))
    return reqs


def _requires(dist: metadata.Distribution, extras: set[str]) -> list[Requirement]:
    out = []
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is None:
            out.append(req)
            continue
        envs = [{"extra": e} for e in sorted(extras)] or [{"extra": ""}]
        if any(req.marker.evaluate(env) for env in envs):
            out.append(req)
    return out


def closure(root: Requirement) -> dict[str, str]:
    """{canonical name: installed version} of `root` and everything it needs here."""
    found: dict[str, str] = {}
    todo = [(root.name, set(root.extras))]
    seen: set[tuple[str, frozenset]] = set()
    while todo:
        name, extras = todo.pop()
        key = (canonicalize_name(name), frozenset(extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise SystemExit(f"{name} is required (via {root}) but not installed in {sys.prefix}: "
                             "set up the environment first (python3 dev.py test)") from None
        found[canonicalize_name(name)] = dist.version
        for req in _requires(dist, extras):
            todo.append((req.name, set(req.extras)))
    return found


def runtime_python(binder: Path = BINDER) -> tuple[int, int] | None:
    path = binder / "runtime.txt"
    if not path.exists():
        return None
    m = re.fullmatch(r"\s*python-(\d+)\.(\d+)\s*", path.read_text())
    return (int(m.group(1)), int(m.group(2))) if m else None


def pins() -> list[tuple[str, str, str | None]]:
    """[(name, version, marker or None)], sorted by name."""
    here = default_environment()
    markers: dict[str, set[str | None]] = {}
    versions: dict[str, str] = {}
    roots = [r for r in read_requirements() if r.marker is None or r.marker.evaluate()]
    for extra in COMPANIONS:
        try:
            metadata.distribution(extra)
        except metadata.PackageNotFoundError:
            continue
        roots.append(Requirement(extra))
    for req in read_requirements():
        if req.marker is not None and not req.marker.evaluate():
            raise SystemExit(f"{req} does not apply here ({here['sys_platform']} {here['platform_machine']}, "
                             f"Python {here['python_version']}): pin on a machine like Binder's")
    for root in roots:
        # the direct requirement's own marker rides along; markers inside the
        # dependency tree were evaluated for this platform (Binder's)
        for name, version in closure(root).items():
            versions[name] = version
            markers.setdefault(name, set()).add(str(root.marker) if root.marker else None)
    out = []
    for name in sorted(versions):
        if name in NEVER:
            if name == "torch":
                raise SystemExit("torch is in the course requirements' closure; keep it out of Binder")
            continue
        ms = markers[name]
        marker = None if None in ms else " or ".join(f"({m})" if len(ms) > 1 else m for m in sorted(ms))
        out.append((name, versions[name], marker))
    return out


def render() -> str:
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    lines = [
        "# GENERATED by scripts/pin_binder.py: do not edit. Change requirements.txt, run the",
        "# tests (python3 dev.py test), then: .venv-test/bin/python scripts/pin_binder.py",
        f"# Exact versions the tests passed with (Python {py}, {platform.system().lower()} "
        f"{platform.machine()}): requirements.txt's",
        "# requirements and all their dependencies. No local references (-r ../requirements.txt,",
        "# -e .), so repo2docker installs this file before copying the repository and reuses that",
        "# layer for commits that only change notebooks; binder/postBuild installs minigrad.",
        "# Wheels only: nothing is built from source on Binder.",
        "--only-binary=:all:",
    ]
    for name, version, marker in pins():
        lines.append(f"{name}=={version}" + (f"; {marker}" if marker else ""))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if the file would change")
    args = ap.parse_args(argv)
    venv = ROOT / ".venv-test"
    if venv.exists() and Path(sys.prefix).resolve() != venv.resolve():
        print(f"note: pinning from {sys.prefix}, not the course's {venv} "
              "(run it with .venv-test/bin/python to pin what the tests use)", file=sys.stderr)
    want = runtime_python()
    if want and want != sys.version_info[:2]:
        raise SystemExit(f"binder/runtime.txt asks for Python {want[0]}.{want[1]} but this is "
                         f"{sys.version_info[0]}.{sys.version_info[1]}: pin with that Python")
    text = render()
    count = sum(1 for line in text.splitlines() if line and not line.startswith(("#", "-")))
    current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
    if args.check:
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date for this environment: "
                  "run .venv-test/bin/python scripts/pin_binder.py")
            return 1
        print(f"{OUTPUT.relative_to(ROOT)} matches this environment")
        return 0
    if current != text:
        OUTPUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUTPUT.relative_to(ROOT)} ({count} pins)")
    else:
        print(f"{OUTPUT.relative_to(ROOT)} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
