"""Stored outputs stay current.

nbval runs the notebooks with ``--nbval-lax``: a stored ``program.source``, printed graph or table that
the library no longer produces would pass unnoticed. Cells tagged ``keep-current`` are the ones whose
output must match the library: this test re-executes every lesson and solution and compares those
cells' text outputs with the stored ones, after sanitising addresses, timings and the like with the
regexes of tests/nbval_sanitize.cfg. When it fails, refresh the stored outputs with

    .venv-test/bin/python scripts/run_notebooks.py

and read the diff: the lesson's prose may need to follow the new output.
"""
from __future__ import annotations

import configparser
import difflib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TAG = "keep-current"
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"
# code that prints what the library generates (listings, generated source, pass diffs): it must be tagged
LISTING = re.compile(r"print\((\w*graph\w*|g\d*|tape|\w+\.(source|graph))\)|pass_diff\(")

nbformat = pytest.importorskip("nbformat")


def sanitizers():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "tests" / "nbval_sanitize.cfg", encoding="utf-8")
    return [(re.compile(cfg[s]["regex"]), cfg[s]["replace"]) for s in cfg.sections()]


def text_of(cell, subs) -> str:
    """The text a reader sees in a cell's outputs (widgets and drawings excluded: a stored stepper is its
    picture, tests/test_stored_pictures.py checks the pictures).
    Blank lines and trailing spaces are dropped: how a stream was cut into messages does not matter."""
    text = ""
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            text += out.get("text", "")
        elif kind in ("execute_result", "display_data") and not {WIDGET, "image/svg+xml"} & set(out.get("data", {})):
            text += "\n" + out.get("data", {}).get("text/plain", "") + "\n"
        elif kind == "error":
            text += f"\n{out.get('ename')}: {out.get('evalue')}\n"
    for rx, rep in subs:
        text = rx.sub(rep, text)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def tagged(nb):
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and TAG in c.metadata.get("tags", [])]


@pytest.mark.parametrize("path", LESSONS + SOLUTIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_listings_are_tagged_and_stored(path):
    nb = nbformat.read(path, as_version=4)
    keep = tagged(nb)
    assert keep, f"{path.name}: no cell is tagged {TAG!r}"
    untagged = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and LISTING.search(c.source)
                and i not in keep and "### BEGIN SOLUTION" not in c.source]
    assert not untagged, f"{path.name}: cells {untagged} print generated listings but are not tagged {TAG!r}"
    empty = [i for i in keep if not nb.cells[i].get("outputs")]
    assert not empty, (f"{path.name}: cells {empty} are tagged {TAG!r} but store no output; "
                       f"run .venv-test/bin/python scripts/run_notebooks.py {path.relative_to(ROOT)}")


def test_sanitizers_hide_what_changes_between_runs():
    subs = sanitizers()
    text = "<Graph at 0x7f3a2b1c4d50> took 12.5 ms (3 loops each), 1,000 it/s, id 123456789012345"
    clean = text
    for rx, rep in subs:
        clean = rx.sub(rep, clean)
    assert "0x7f" not in clean and "12.5 ms" not in clean and "123456789012345" not in clean


@pytest.mark.slow
@pytest.mark.parametrize("path", LESSONS + SOLUTIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_stored_outputs_are_current(path):
    nbclient = pytest.importorskip("nbclient")
    stored = nbformat.read(path, as_version=4)
    fresh = nbformat.read(path, as_version=4)
    # python3 = this venv's own Python (.venv-test, with torch): lessons 08 and 11 run with torch here and
    # without it in the learner kernel (nbval, conftest.py)
    nbclient.NotebookClient(fresh, timeout=600, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    subs = sanitizers()
    stale = []
    for i in tagged(stored):
        old, new = text_of(stored.cells[i], subs), text_of(fresh.cells[i], subs)
        if old != new:
            diff = "\n".join(list(difflib.unified_diff(old.splitlines(), new.splitlines(), "stored", "fresh",
                                                       lineterm=""))[:40])
            stale.append(f"cell {i} ({stored.cells[i].source.splitlines()[0][:60]!r}):\n{diff}")
    assert not stale, (f"{path.relative_to(ROOT)}: stored outputs no longer match the library; refresh them with "
                       f".venv-test/bin/python scripts/run_notebooks.py {path.relative_to(ROOT)} and check the prose\n\n"
                       + "\n\n".join(stale))
