"""Run every lesson and solution notebook in a fresh kernel and print its wall time.

Usage: .venv/bin/python scripts/time_notebooks.py [NOTEBOOK ...]
The README's course map lists the times this printed (nothing is written back).
"""
import glob
import sys
import time

import nbformat
from nbclient import NotebookClient


def run(path: str) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name='python3', resources={'metadata': {'path': 'notebooks'}}).execute()
    return time.perf_counter() - start


if __name__ == '__main__':
    paths = sys.argv[1:] or sorted(glob.glob('notebooks/*.ipynb')) + sorted(glob.glob('solutions/*.ipynb'))
    for p in paths:
        print(f'{run(p):6.1f} s  {p}', flush=True)
