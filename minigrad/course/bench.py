"""Benchmark helpers lesson 08 imports; ``python -m minigrad.bench [--quick]`` times its chain case.

``timeit`` runs the variants of one case interleaved (round-robin repeats) and returns medians;
``peak_bytes`` measures one call's peak allocation; ``chain_case(n, rng)`` is ten relu(y * w + b)
layers (30 elementwise ops) on n x n arrays, forward and backward: numpy by hand, minigrad's tape,
the compiled program on the numba backend (``compiled``, when numba imports) and on the numpy backend
(``compiled_numpy``), and PyTorch eager when installed (set to one thread here). Timings depend on
the machine. The project's full benchmark (an MLP step, a fused elementwise case, compile cost, jax
and torch.compile, performance targets, JSON) is scripts/bench.py in the repository.
"""
from __future__ import annotations

import argparse
import functools
import statistics
import time
import tracemalloc

import numpy as np

import minigrad as mg

try:
    import torch
    torch.set_num_threads(1)
except ImportError:        # optional comparison
    torch = None

NUMBA = mg.compiler.kernels.available()


def compiled_variants(outputs, inputs, args) -> dict:
    """The program compiled on each available backend, as benchmark variants."""
    backends = {'compiled': 'numba', 'compiled_numpy': 'numpy'}
    return {name: functools.partial(mg.compile(outputs, inputs, backend=backend), *args)
            for name, backend in backends.items() if NUMBA or backend == 'numpy'}


def timeit(variants: dict, repeats: int, min_time: float) -> dict:
    """Median seconds per call of each variant; variants interleaved round-robin."""
    inner = {}
    for k, f in variants.items():
        f()
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < min_time or n == 0:
            f()
            n += 1
        inner[k] = n
    times = {k: [] for k in variants}
    for _ in range(repeats):
        for k, f in variants.items():
            t0 = time.perf_counter()
            for _ in range(inner[k]):
                f()
            times[k].append((time.perf_counter() - t0) / inner[k])
    return {k: statistics.median(v) for k, v in times.items()}


def peak_bytes(f) -> int:
    """Peak traced memory during one call, above what was allocated before it."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    f()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


# ------------------------------------------------------------------ chain of 30 elementwise ops
def autograd_step(params, loss):
    """A benchmark variant for an autograd (minigrad's tape, PyTorch): clear the gradients of `params`,
    build ``loss()``, run its backward pass; returns the loss."""
    def step():
        for p in params:
            p.grad = None
        out = loss()
        out.backward()
        return out
    return step


def chain_loss(y, ws, bs, relu):
    """The chain case's forward pass in any framework: ten y = relu(y * w + b), then the sum."""
    for w, b in zip(ws, bs):
        y = relu(y * w + b)
    return y.sum()


def chain_arrays(n, rng):
    """The chain case's input x, ten weights and ten biases (float32, n x n), drawn from `rng`."""
    x = rng.standard_normal((n, n)).astype(np.float32)
    ws = [(1 + 0.1 * rng.standard_normal((n, n))).astype(np.float32) for _ in range(10)]
    bs = [(0.1 * rng.standard_normal((n, n))).astype(np.float32) for _ in range(10)]
    return x, ws, bs


def chain_case(n, rng) -> dict:
    """The chain case at n x n as benchmark variants: numpy by hand, the tape, the compiled program on each
    backend, PyTorch when installed. ``timeit(chain_case(64, np.random.default_rng(0)), 5, 0.01)``."""
    return chain_variants(*chain_arrays(n, rng))


def chain_variants(x, ws, bs) -> dict:
    """Forward + backward of ten relu(y * w + b) layers on these arrays, written each way."""
    n = x.shape[0]

    def numpy_step():
        y, zs, ys = x, [], []
        for w, b in zip(ws, bs):
            ys.append(y)
            z = y * w + b
            zs.append(z)
            y = np.maximum(z, 0)
        loss = y.sum()
        g = np.ones_like(y)
        gw, gb = [], []
        for w, y_in, z in zip(reversed(ws), reversed(ys), reversed(zs)):
            gz = g * (z > 0)
            gw.append(gz * y_in)
            gb.append(gz)
            g = gz * w
        return loss, gw, gb

    tw = [mg.tensor(w, requires_grad=True) for w in ws]
    tb = [mg.tensor(b, requires_grad=True) for b in bs]
    tx = mg.tensor(x)

    tape_step = autograd_step(tw + tb, lambda: chain_loss(tx, tw, tb, mg.relu))
    g = mg.Graph()
    with g.as_default():
        px = mg.placeholder(mg.float32, (n, n), name='x')
        pw = [mg.placeholder(mg.float32, (n, n), name=f'w{i}') for i in range(10)]
        pb = [mg.placeholder(mg.float32, (n, n), name=f'b{i}') for i in range(10)]
        loss = chain_loss(px, pw, pb, mg.relu)
        grads = mg.gradients(loss, pw + pb)
    compiled = compiled_variants([loss] + grads, [px] + pw + pb, [x] + ws + bs)
    ref = numpy_step()[0]
    for f in compiled.values():              # every backend must give numpy's loss
        np.testing.assert_allclose(f()[0], ref, rtol=1e-3)
    return {'numpy': numpy_step, 'tape': tape_step, **compiled, **_chain_torch(x, ws, bs)}


def _chain_torch(x, ws, bs):
    """The chain case in PyTorch (eager autograd), when installed: lesson 08 compares with it."""
    if torch is None:
        return {}
    Tx = torch.from_numpy(x)
    Tw = [torch.from_numpy(w).requires_grad_() for w in ws]
    Tb = [torch.from_numpy(b).requires_grad_() for b in bs]
    return {'torch': autograd_step(Tw + Tb, lambda: chain_loss(Tx, Tw, Tb, torch.relu))}


# ------------------------------------------------------------------ python -m minigrad.bench
def main(argv=None):
    """Print the chain case's medians (us) at a few sizes as a markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='small sizes and few repeats (smoke test)')
    opts = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    sizes, repeats, min_time = ([4, 64], 3, 0.002) if opts.quick else ([4, 64, 256, 1024], 15, 0.05)
    rows = {n: timeit(chain_case(n, rng), repeats, min_time) for n in sizes}
    cols = list(dict.fromkeys(k for t in rows.values() for k in t))
    print('| chain of 30 ops, fwd+bwd | ' + ' | '.join(f'{c} (us)' for c in cols) + ' |')
    print('|---|' + '---|' * len(cols))
    for n, t in rows.items():
        print(f'| {n}x{n} | ' + ' | '.join(f'{t[c] * 1e6:.1f}' if c in t else '-' for c in cols) + ' |')
    print('\nMore cases, jax and torch.compile, performance targets: scripts/bench.py in the repository '
          '(python3 dev.py bench).')


if __name__ == '__main__':
    main()
