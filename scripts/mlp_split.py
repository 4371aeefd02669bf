"""The compiled MLP training step (scripts/bench.py's mlp_case, numba backend) against hand-written numpy:
total time, and each split into its BLAS matmuls and everything else (issue 37 item 5, matmul epilogues).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python scripts/mlp_split.py [--steps]

Totals: medians of ``--runs`` interleaved runs of minigrad.bench.timeit (numpy, compiled). The split times
every step of the generated driver (``program.source``) in place (perf_counter around each line) and the
numpy step's matmuls apart from its other lines; the machine is shared: repeat, and read the spread.
Not a test: timings depend on the machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from minigrad.bench import timeit

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import bench  # noqa: E402  (scripts/bench.py: the MLP case)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--steps', action='store_true', help='print each step of the compiled driver')
    args = ap.parse_args()
    for batch in (1, 64):
        v = bench.mlp_case(batch, np.random.default_rng(0))
        runs = [timeit({k: v[k] for k in ('numpy', 'compiled')}, 5, 0.2) for _ in range(args.runs)]
        ratios = [r['compiled'] / r['numpy'] for r in runs]
        c_mm, c_rest, n_mm, n_rest, prog = bench.mlp_split(batch, 7, 200, args.steps)
        print(f'batch {batch}: compiled / numpy {statistics.median(ratios):.3f} (runs: '
              f'{", ".join(f"{r:.3f}" for r in ratios)}); numpy {statistics.median(r["numpy"] for r in runs) * 1e6:.0f} us, '
              f'compiled {statistics.median(r["compiled"] for r in runs) * 1e6:.0f} us, {prog.stats["kernels"]} kernels, '
              f'{prog.stats["steps"]} steps')
        print(f'  split (us): compiled matmul {c_mm * 1e6:.1f} + rest {c_rest * 1e6:.1f}; numpy matmul {n_mm * 1e6:.1f} '
              f'+ rest {n_rest * 1e6:.1f}; rest compiled / numpy {c_rest / n_rest:.2f}')


if __name__ == '__main__':
    main()
