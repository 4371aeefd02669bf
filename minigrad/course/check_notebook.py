"""Check a whole exercise notebook from a terminal, as running every cell in JupyterLab would.

    python -m minigrad.check_notebook exercises/01_computational_graphs_exercises.ipynb

Runs the notebook top to bottom in a fresh kernel of this Python (the notebook file is not changed), then
prints each check cell that failed with its message and a summary line; exit status 1 if one failed.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ANSI = re.compile(r'\x1b\[[0-9;]*m')


def is_check(cell) -> bool:
    """A check cell: nbgrader's autograder test (graded, not an answer), as scripts/make_exercises.py marks it."""
    meta = cell.get('metadata', {}).get('nbgrader', {})
    return cell.get('cell_type') == 'code' and bool(meta.get('grade')) and not meta.get('solution')


def failures(path, kernel_name: str = 'python3', timeout: int = 600) -> tuple[int, list[tuple[int, bool, str]]]:
    """Run notebook `path`; return (number of check cells, [(cell number, is it a check?, message)]) for
    every cell that raised.

    >>> failures('solutions/01_computational_graphs_exercises.ipynb')[1]   # doctest: +SKIP
    []
    """
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    # allow_errors: every cell runs, as nbval does, so each failing check is reported, not only the first
    NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, allow_errors=True,
                   resources={'metadata': {'path': str(path.parent.resolve())}}).execute()
    failed = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get('outputs', []):
            if out.get('output_type') == 'error':
                text = ANSI.sub('', '\n'.join(out.get('traceback') or [f"{out['ename']}: {out['evalue']}"]))
                failed.append((i, is_check(cell), text))
    return sum(map(is_check, nb.cells)), failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog='python -m minigrad.check_notebook', description=__doc__.split('\n\n')[0])
    ap.add_argument('notebooks', nargs='+', type=Path, help='exercise notebooks (.ipynb)')
    ap.add_argument('--timeout', type=int, default=600, help='seconds per cell (default 600)')
    args = ap.parse_args(argv)
    status = 0
    for path in args.notebooks:
        if not path.is_file():
            print(f'{path}: no such notebook', file=sys.stderr)
            return 2
        print(f'{path}: running every cell ...', flush=True)
        checks, failed = failures(path, timeout=args.timeout)
        for i, check, text in failed:
            print(f'\n{"check cell" if check else "cell"} {i}:\n{text}')
        failed_checks = sum(check for _, check, _ in failed)
        others = len(failed) - failed_checks
        print(f'\n{path}: {checks - failed_checks} of {checks} checks pass'
              + (f'; {others} other cell(s) raised an error' if others else ''))
        status |= bool(failed)
    return status


if __name__ == '__main__':
    sys.exit(main())
