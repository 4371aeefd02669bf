"""Measure where a parallel loop kernel starts to pay: ``python scripts/parallel_threshold.py [--sizes 14,16,18]``.

Three fused programs, each forced parallel (kernels.PARALLEL_MIN and PARALLEL_MIN_APPROX set to 0): ``fma``
(a*b+c: 4 arrays, 2 ops, the cheapest loop kernel), ``fused`` (relu(a*b+c)*d-e: 6 arrays, 5 ops) and ``tanh``
(three tanh(x*w+b) layers: approximations in the loop), at 2^k float32 elements. Each is called with out= at
1 and at 2 threads (mg.set_num_threads), the two interleaved, ``--repeats`` rounds of ~4 ms; the medians and
their ratio are printed with how many CPUs other processes used meanwhile (from /proc/stat, Linux): a row
timed while others were busy says nothing about a free core. PARALLEL_MIN is the size where the ``fma`` ratio
reaches 1 (the cheapest kernel does not lose), PARALLEL_MIN_APPROX where the ``tanh`` one falls below 1.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import minigrad as mg
from minigrad.compiler import kernels


def program(kind, n):
    g = mg.Graph()
    with g.as_default():
        ps = [mg.placeholder(mg.float32, (n,), name=k) for k in 'abcde']
        a, b, c, d, e = ps
        if kind == 'fma':
            y, ps = a * b + c, ps[:3]
        elif kind == 'fused':
            y = mg.relu(a * b + c) * d - e
        else:
            y = a
            for w in (b, c, d):
                y = mg.tanh(y * w + e)
    prog = mg.compile(y, ps, backend='numba')
    assert prog.stats['parallel'] == [0], prog.stats['serial']
    return prog, len(ps)


def busy_cpu_seconds() -> float:
    """Seconds all CPUs have been busy since boot (user, nice, system, irq, softirq, steal)."""
    with open('/proc/stat') as f:
        ticks = f.readline().split()[1:]
    return sum(int(ticks[i]) for i in (0, 1, 2, 5, 6, 7)) / os.sysconf('SC_CLK_TCK')


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def measure(kind, n, repeats, rng) -> str:
    prog, m = program(kind, n)
    xs, out = [rng.standard_normal(n).astype(np.float32) for _ in range(m)], np.empty(n, np.float32)
    for t in (1, 2):
        mg.set_num_threads(t)
        prog(*xs, out=out)
    t0 = time.perf_counter()
    prog(*xs, out=out)
    calls = max(1, int(0.004 / max(time.perf_counter() - t0, 1e-6)))
    times = {1: [], 2: []}
    b0, o0, w0 = busy_cpu_seconds(), own_cpu_seconds(), time.perf_counter()
    for _ in range(repeats):
        for t in times:
            mg.set_num_threads(t)
            t0 = time.perf_counter()
            for _ in range(calls):
                prog(*xs, out=out)
            times[t].append((time.perf_counter() - t0) / calls * 1e6)
    others = max(0.0, busy_cpu_seconds() - b0 - (own_cpu_seconds() - o0)) / (time.perf_counter() - w0)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    return f'| {kind} | 2^{n.bit_length() - 1} = {n:,} | {one:.0f} | {two:.0f} | {two / one:.2f} | {others:.2f} |'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--sizes', default='14,15,16,17,18,19,20,22', help='exponents k of the 2^k element sizes')
    ap.add_argument('--repeats', type=int, default=15)
    opts = ap.parse_args(argv)
    kernels.PARALLEL_MIN = kernels.PARALLEL_MIN_APPROX = 0
    rng, was = np.random.default_rng(0), mg.get_num_threads()
    print('| kernel | elements | 1 thread (us) | 2 threads (us) | 2 / 1 | other processes (CPUs) |')
    print('|---|---|---|---|---|---|')
    try:
        for k in map(int, opts.sizes.split(',')):
            for kind in ('fma', 'fused', 'tanh'):
                print(measure(kind, 1 << k, opts.repeats, rng), flush=True)
    finally:
        mg.set_num_threads(was)


if __name__ == '__main__':
    main()
