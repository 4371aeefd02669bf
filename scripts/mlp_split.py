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
import re
import statistics
import sys
import time

import numpy as np

import minigrad as mg
from minigrad.bench import timeit
from minigrad.compiler.program import _FILENAME

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import bench  # noqa: E402  (scripts/bench.py: the MLP case)


def timed_driver(prog):
    """The program's driver with each step line timed into T[k]; (run, labels [(op, code)], T)."""
    out, labels = [], []
    for line in prog._driver.splitlines():
        code, _, comment = line.strip().partition('  # ')
        m = re.fullmatch(r'(\S+) = (\w+)', comment)
        top = line.startswith(' ' * 8) and not line.startswith(' ' * 9)
        if top and (m or re.match(r'n\d+ = np_empty', code)) and not code.startswith(('if ', 'r_', 'o0 =')):
            labels.append((m.group(2) if m else 'empty', code))
            line = f'        _t = _pc(); {code}; _T[{len(labels) - 1}] += _pc() - _t'
        out.append(line)
    ns, T = {}, [0.0] * len(labels)
    exec(compile('\n'.join(out).replace('def build(np, B, K, conv):', 'def build(np, B, K, conv, _pc, _T):'),
                 _FILENAME, 'exec'), ns)
    cells = dict(zip(prog._run.__code__.co_freevars, (c.cell_contents for c in prog._run.__closure__)))
    bufs = [cells.get(f'b{i}', None) for i in range(len(prog.memory.buffer_shapes))]
    bufs = [b if b is not None else np.empty(s, d) for b, (s, d) in zip(bufs, prog.memory.buffer_shapes)]
    return ns['build'](np, bufs, cells['K'], prog._conv, time.perf_counter, T), labels, T


def numpy_split(x, labels, onehot, W, B, batch, lr, T):
    """scripts/bench.py's _mlp_numpy, its matmul time into T['mm'] and the rest into T['rest']."""
    pc = time.perf_counter

    def mm(a, b):
        t = pc()
        r = a @ b
        T['mm'] += pc() - t
        return r

    def step():
        t0, m0 = pc(), T['mm']
        z1 = mm(x, W[0]) + B[0]; h1 = np.maximum(z1, 0)
        z2 = mm(h1, W[1]) + B[1]; h2 = np.maximum(z2, 0)
        z3 = mm(h2, W[2]) + B[2]
        e = np.exp(z3 - z3.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        loss = -np.log(p[np.arange(batch), labels]).mean()
        g3 = (p - onehot) / batch
        gW2, gB2 = mm(h2.T, g3), g3.sum(0)
        g2 = mm(g3, W[2].T) * (z2 > 0)
        gW1, gB1 = mm(h1.T, g2), g2.sum(0)
        g1 = mm(g2, W[1].T) * (z1 > 0)
        gW0, gB0 = mm(x.T, g1), g1.sum(0)
        for P, G in zip(W + B, [gW0, gW1, gW2, gB0, gB1, gB2]):
            P -= lr * G
        T['rest'] += pc() - t0 - (T['mm'] - m0)
        return loss
    return step


def split(batch, reps, n, show_steps):
    rng = np.random.default_rng(0)
    sizes = [784, 256, 128, 10]
    init = [(rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32) for a, b in zip(sizes, sizes[1:])]
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    lab = rng.integers(0, 10, batch)
    onehot = np.eye(10, dtype=np.float32)[lab]
    g = mg.Graph()
    with g.as_default():
        px, py = mg.placeholder(mg.float32, (batch, 784), name='x'), mg.placeholder(mg.float32, (batch, 10), name='y')
        VW = [mg.Variable(w.copy(), name=f'W{i}') for i, w in enumerate(init)]
        VB = [mg.Variable(np.zeros(b, np.float32), name=f'b{i}') for i, b in enumerate(sizes[1:])]
        loss = bench.mlp_loss(px, VW, VB, py, mg.relu, mg.log_softmax, batch)
        grads = mg.gradients(loss, VW + VB)
        step = mg.group(*[v.assign(v - 0.01 * gv) for v, gv in zip(VW + VB, grads)])
    prog = mg.compile([loss, step], [px, py], backend='numba')
    run, labels, T = timed_driver(prog)
    state = [s.copy() for s in prog.state]
    TN = {'mm': 0.0, 'rest': 0.0}
    nstep = numpy_split(x, lab, onehot, [w.copy() for w in init], [np.zeros(b, np.float32) for b in sizes[1:]],
                        batch, 0.01, TN)
    steps, nsplit = [], []
    for _ in range(reps):
        T[:] = [0.0] * len(T)
        for _ in range(n):
            run(x, onehot, state, None)
        steps.append([t / n for t in T])
        TN.update(mm=0.0, rest=0.0)
        for _ in range(n):
            nstep()
        nsplit.append((TN['mm'] / n, TN['rest'] / n))
    med = [statistics.median(s[k] for s in steps) for k in range(len(labels))]
    if show_steps:
        for (op, code), t in zip(labels, med):
            print(f'  {t * 1e6:8.2f} us  {op:10s} {code[:90]}')
    c_mm = sum(t for (op, _), t in zip(labels, med) if op == 'matmul')
    n_mm, n_rest = (statistics.median(s[k] for s in nsplit) for k in (0, 1))
    return c_mm, sum(med) - c_mm, n_mm, n_rest, prog


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--steps', action='store_true', help='print each step of the compiled driver')
    args = ap.parse_args()
    for batch in (1, 64):
        v = bench.mlp_case(batch, np.random.default_rng(0))
        runs = [timeit({k: v[k] for k in ('numpy', 'compiled')}, 5, 0.2) for _ in range(args.runs)]
        ratios = [r['compiled'] / r['numpy'] for r in runs]
        c_mm, c_rest, n_mm, n_rest, prog = split(batch, 7, 200, args.steps)
        print(f'batch {batch}: compiled / numpy {statistics.median(ratios):.3f} (runs: '
              f'{", ".join(f"{r:.3f}" for r in ratios)}); numpy {statistics.median(r["numpy"] for r in runs) * 1e6:.0f} us, '
              f'compiled {statistics.median(r["compiled"] for r in runs) * 1e6:.0f} us, {prog.stats["kernels"]} kernels, '
              f'{prog.stats["steps"]} steps')
        print(f'  split (us): compiled matmul {c_mm * 1e6:.1f} + rest {c_rest * 1e6:.1f}; numpy matmul {n_mm * 1e6:.1f} '
              f'+ rest {n_rest * 1e6:.1f}; rest compiled / numpy {c_rest / n_rest:.2f}')


if __name__ == '__main__':
    main()
