"""Fill the numba kernel cache by running the lessons, so a fresh Binder session starts warm (issue 37).

Usage: python scripts/warm_kernel_cache.py [NOTEBOOK ...]      (default: every lesson in notebooks/)
binder/postBuild runs it while the image is built; MINIGRAD_WARM_NOTEBOOKS (paths separated by spaces)
overrides the default list. Each notebook runs in a fresh kernel (outputs are thrown away) and the kernels
it compiles land in minigrad's cache directory (MINIGRAD_CACHE_DIR, default ~/.cache/minigrad). Prints, per
notebook, its time, the kernel files it added and the numba cache indexes it wrote (an index is written when
a kernel is compiled for this machine: a second run of the same notebook writes none).

The cache holds machine code for the CPU that built it. numba keys each entry by the CPU's name and
features, so on a machine with another CPU an entry is not used: that kernel compiles again, as it would
with no cache, and its result is the same. Nothing is compiled for a generic CPU (that would lose vector
instructions on every machine).
"""
import glob
import os
import sys
import time

import nbformat
from nbclient import NotebookClient

from minigrad.compiler.kernels import cache_dir


def cache_state(root: str) -> dict:
    """path -> modification time of every kernel file and numba index under root."""
    files = glob.glob(os.path.join(root, '**', 'k_*.py'), recursive=True)
    files += glob.glob(os.path.join(root, '**', '*.nbi'), recursive=True)
    return {f: os.stat(f).st_mtime_ns for f in files}


def warm(path: str) -> tuple[float, int, int]:
    """Run one notebook; (seconds, kernel files added, numba indexes written)."""
    root = cache_dir()
    before = cache_state(root)
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name='python3',
                   resources={'metadata': {'path': os.path.dirname(path) or '.'}}).execute()
    seconds = time.perf_counter() - start
    after = cache_state(root)
    added = sum(1 for f in after if f.endswith('.py') and f not in before)
    indexes = sum(1 for f, t in after.items() if f.endswith('.nbi') and before.get(f) != t)
    return seconds, added, indexes


def main(argv: list[str]) -> int:
    paths = argv or os.environ.get('MINIGRAD_WARM_NOTEBOOKS', '').split() or sorted(glob.glob('notebooks/*.ipynb'))
    print(f'warming the kernel cache in {cache_dir()}', flush=True)
    for p in paths:
        seconds, added, indexes = warm(p)
        print(f'{seconds:6.1f} s  {added:3d} kernel files added, {indexes:3d} numba indexes written  {p}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
