"""Measure the loop kernels' tanh/exp/log approximations (minigrad/compiler/approx.py) in ulps.

    python scripts/ulp_error.py [--float32-step K] [--float64-samples N] [--only NAME ...] [--backend B]

float32: every bit pattern (2^32 inputs; ``--float32-step K`` takes every K-th for a quick run),
through a compiled numba Program (the real kernel), against numpy's float32 function and against
the correctly rounded value (numpy's float64 function rounded to float32). float64: N random bit
patterns plus N values spread over each function's interesting range, against numpy. A special
value (nan, inf, -0.0) that differs from numpy's counts as a mismatch, never as ulps.

``--only sigmoid`` measures mg.sigmoid (a composite: its error comes from its formula, on numpy's exp or
the kernels' approximation): numpy has no sigmoid, so 'vs numpy' is against the numpy backend's program,
and the reference is 1 / (1 + exp(-x)) in float64 (float32 inputs) or long double (float64 inputs).
``--backend numpy`` measures the numpy backend's programs instead of the loop kernels (the tape's values).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import minigrad as mg


def ordered(v: np.ndarray) -> np.ndarray:
    """Float bits as integers that count ulps: adjacent floats differ by 1 (-0.0 and +0.0 by 0)."""
    i = v.view(np.int32 if v.dtype == np.float32 else np.int64).astype(np.int64)
    mag = i & (0x7fffffff if v.dtype == np.float32 else 0x7fffffffffffffff)
    return np.where(i < 0, -mag, mag)


def compare(got, ref) -> tuple[int, int]:
    """(max ulps over finite results, mismatches in nan/inf/-0.0)."""
    nan_g, nan_r = np.isnan(got), np.isnan(ref)
    bad = int(np.count_nonzero(nan_g != nan_r))
    both = ~nan_g & ~nan_r
    g, r = got[both], ref[both]
    inf = np.isinf(g) | np.isinf(r)
    bad += int(np.count_nonzero(inf & (g != r)))
    zero = (g == 0) & (r == 0)
    bad += int(np.count_nonzero(zero & (np.signbit(g) != np.signbit(r))))
    fin = ~inf
    ulps = np.abs(ordered(g[fin]) - ordered(r[fin]))
    return int(ulps.max()) if ulps.size else 0, bad


BACKEND = 'numba'


def program(name, dtype, n, backend=None):
    """The compiled kernel computing `name` on an (n,) array (a multiply by 1 keeps it a kernel)."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(dtype, (n,), name='x')
        one = mg.placeholder(dtype, (n,), name='one')
        y = getattr(mg, name)(x * one)
    prog = mg.compile(y, [x, one], backend=backend or BACKEND)
    assert prog.stats['kernels'] == (1 if (backend or BACKEND) == 'numba' else 0), prog.stats
    return prog


def reference(name, n, dtype):
    """numpy's function; for sigmoid, which numpy lacks, the numpy backend's program."""
    if name != 'sigmoid':
        return getattr(np, name)
    prog = program(name, dtype, n, 'numpy')
    return lambda x: prog(x, np.ones(x.size, x.dtype))


def exact(name, x):
    """`name` of float32 `x` correctly rounded (from float64), or of float64 `x` from long double."""
    wide = x.astype(np.float64 if x.dtype == np.float32 else np.longdouble)
    y = 1 / (1 + np.exp(-wide)) if name == 'sigmoid' else getattr(np, name)(wide)
    return y.astype(x.dtype)


def float32_all(names, step, chunk=1 << 24):
    total = 1 << 32
    for name in names:
        prog, fn = program(name, np.float32, chunk // step), reference(name, chunk // step, np.float32)
        one, worst, worst_true, bad, t0 = np.ones(chunk // step, np.float32), 0, 0, 0, time.time()
        ref_np_vs_true = 0
        with np.errstate(all='ignore'):
            for start in range(0, total, chunk):
                x = np.arange(start, start + chunk, step, dtype=np.uint64).astype(np.uint32).view(np.float32)
                got, ref = prog(x, one), fn(x)
                true = exact(name, x)
                u, b = compare(got, ref)
                ut, _ = compare(got, true)
                un, _ = compare(ref, true)
                worst, worst_true, bad, ref_np_vs_true = max(worst, u), max(worst_true, ut), bad + b, max(ref_np_vs_true, un)
        print(f'| {name} | float32 | {total // step:,} (every {step}) | {worst} | {worst_true} | {ref_np_vs_true} | '
              f'{bad} | {", ".join(prog.stats["approximations"])} | {time.time() - t0:.0f} s |', flush=True)


def float64_sample(names, n, rng):
    spread = {'tanh': (-25, 25), 'exp': (-745, 710), 'log': (0, 1e6), 'sigmoid': (-745, 40)}
    for name in names:
        prog, fn = program(name, np.float64, n), reference(name, n, np.float64)
        lo, hi = spread[name]
        worst, worst_true, bad = 0, 0, 0
        with np.errstate(all='ignore'):
            for x in (rng.integers(0, 2 ** 63, n, dtype=np.uint64).view(np.float64) * rng.choice([-1, 1], n),
                      rng.uniform(lo, hi, n), rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-30, 3, n)):
                got = prog(x, np.ones(n))
                u, b = compare(got, fn(x))
                worst, bad = max(worst, u), bad + b
                worst_true = max(worst_true, compare(got, exact(name, x))[0])
        print(f'| {name} | float64 | {3 * n:,} random | {worst} | {worst_true} | - | {bad} | '
              f'{", ".join(prog.stats["approximations"])} | |', flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--float32-step', type=int, default=1, help='take every K-th float32 (1: all 2^32)')
    ap.add_argument('--float64-samples', type=int, default=1 << 22)
    ap.add_argument('--only', nargs='*', default=['tanh', 'exp', 'log'], help='also: sigmoid')
    ap.add_argument('--backend', default='numba', choices=['numba', 'numpy'])
    opts = ap.parse_args(argv)
    global BACKEND
    BACKEND = opts.backend
    if not mg.compiler.kernels.available():
        sys.exit('needs numba: the approximations only run in numba loop kernels')
    print('| op | dtype | inputs | max ulps vs numpy | vs correctly rounded | numpy vs correctly rounded | '
          'special-value mismatches | approximation | time |')
    print('|---|---|---|---|---|---|---|---|---|')
    float32_all(opts.only, opts.float32_step)
    float64_sample(opts.only, opts.float64_samples, np.random.default_rng(0))


if __name__ == '__main__':
    main()
