"""Re-execute lesson and solution notebooks in a fresh kernel each and save them with their outputs.

    .venv-test/bin/python scripts/run_notebooks.py                  every notebooks/*.ipynb and solutions/*.ipynb
    .venv-test/bin/python scripts/run_notebooks.py notebooks/05_graph_compiler.ipynb ...

Run it after a library change: tests/test_notebook_outputs.py fails while a cell tagged `keep-current`
stores output (generated code, printed graphs, tables, counts) that the library no longer produces.
Only outputs, execution counts and the widget state are written back, into a fresh read of each file
(so edits made to the notebook meanwhile are kept; a notebook whose code changed while it ran is
skipped). Every drawing is stored as a picture that an untrusted notebook shows (scripts/static_outputs.py).
Then exercises/ is regenerated from solutions/ (scripts/make_exercises.py).
"""
import glob
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

import static_outputs

ROOT = Path(__file__).resolve().parent.parent


def run(path: Path) -> float:
    """Execute `path` and store its outputs; return the wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name='python3', record_timing=False,
                   resources={'metadata': {'path': str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    fresh = nbformat.read(path, as_version=4)        # the file as it is now: keep others' edits
    if [c.source for c in fresh.cells] != [c.source for c in nb.cells]:
        print(f'  skipped {path}: its cells changed while it ran; run it again', file=sys.stderr)
        return seconds
    for old, new in zip(fresh.cells, nb.cells):
        old.metadata.pop('execution', None)           # no timestamps: re-running changes only what changed
        if old.cell_type == 'code':
            old.outputs, old.execution_count = new.outputs, new.execution_count
    if 'widgets' in nb.metadata:
        fresh.metadata['widgets'] = nb.metadata['widgets']
    static_outputs.convert(fresh)
    nbformat.write(fresh, path)
    return seconds


def main(argv) -> int:
    os.chdir(ROOT)
    paths = [Path(p) for p in argv] or [Path(p) for p in sorted(glob.glob('notebooks/*.ipynb'))
                                        + sorted(glob.glob('solutions/*.ipynb'))]
    for p in paths:
        print(f'{run(p.resolve()):6.1f} s  {p}', flush=True)
    if any(p.resolve().parent == ROOT / 'solutions' for p in paths):
        import make_exercises
        return make_exercises.main([])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
