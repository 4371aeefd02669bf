"""The project's benchmark: ``python scripts/bench.py [--quick] [--json FILE]`` (``python3 dev.py bench``).

Variants of one case run interleaved in one process (round-robin repeats) and the
medians are compared. Prints markdown tables: timings, then each target with the
measured value and PASS/MISS. Not a test: timings depend on the machine.

Columns: hand-written numpy, minigrad's tape, the compiled program on the numba backend
(``compiled``, when numba imports) and on the numpy backend (``compiled_numpy``), PyTorch
eager (the chain and the MLP step each get a ``tape / torch eager`` target; ``--tape`` runs only those two
cases), ``torch.compile`` and ``jax.jit`` when installed; the tanh chain (issue 37: tanh inside fused
loops; timed again beside ``relu_floor``, the same fused loop with relu for tanh: it moves the same arrays
with almost no arithmetic, so it is as fast as the tanh chain could be here); for per-example gradients
(issue 36) a loop of ``jit(grad)`` calls, eager ``vmap(grad)`` and ``torch.func.vmap(grad)``; ``--checkpoint``
runs only gradient checkpointing (issue 59: a 64-layer MLP's training step on the tape without checkpointing,
with ``checkpoint_sequential`` and with every segment checkpointed: peak traced memory and time, beside
PyTorch's; about 15 s of CPU, also part of the default run). For one thread
everywhere, run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (torch and jax are set to one thread here).
``--cores`` (issue 61) times the fused case at 1e6 and 1e7 twice, each framework on one pinned core and on all
cores, each thread count in processes of its own (torch's, numba's, minigrad's threads and XLA's flags are set
as a process starts), beside a numba ``prange`` hand loop (``prange``), the yardstick; ``--runs N`` alternates
N processes of each.
The timing helpers and the chain case are minigrad.bench's (lesson 08 imports them).
"""
from __future__ import annotations

import argparse
import functools
import gc
import json
import operator
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import minigrad as mg
from minigrad.bench import NUMBA, autograd_step, chain_arrays, chain_loss, chain_variants, compiled_variants, peak_bytes, timeit, torch
from minigrad.compiler.program import _FILENAME

ONE_THREAD_XLA = '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1'
try:
    os.environ.setdefault('XLA_FLAGS', ONE_THREAD_XLA)      # (--cores gives each process its own)
    import jax
    import jax.numpy as jnp
except ImportError:        # optional comparison
    jax = None

if NUMBA:
    import numba

    @numba.njit(parallel=True)
    def prange_fused(a, b, c, d, e):
        """relu(a*b+c)*d-e as a hand-written numba loop over all threads (prange): the yardstick."""
        out = np.empty_like(a)
        for i in numba.prange(a.shape[0]):
            t = a[i] * b[i] + c[i]
            out[i] = (t if t > 0 else np.float32(0)) * d[i] - e[i]
        return out


def jax_variant(fn, *arrays):
    """fn jitted by jax, on arrays already on the device; waits for the result."""
    f, xs = jax.jit(fn), [jax.device_put(a) for a in arrays]
    return lambda: jax.block_until_ready(f(*xs))


def chain_all(n, rng):
    """The chain case with every variant: the package's (numpy, tape, compiled, torch) and jax.jit."""
    x, ws, bs = chain_arrays(n, rng)
    variants = chain_variants(x, ws, bs)
    if jax is not None:
        def jloss(ws, bs, x):
            return chain_loss(x, ws, bs, lambda v: jnp.maximum(v, 0))
        variants['jax'] = jax_variant(jax.value_and_grad(jloss, argnums=(0, 1)), ws, bs, x)
    return variants


# ------------------------------------------------------------------ MLP training step
def mlp_loss(h, W, B, y, relu, log_softmax, batch):
    """The MLP case's loss in any framework: two relu layers, a linear one, then cross-entropy."""
    for i in range(3):
        h = h @ W[i] + B[i]
        h = relu(h) if i < 2 else h
    return -(y * log_softmax(h, axis=1)).sum() / batch


def mlp_case(batch, rng, lr=0.01):
    sizes = [784, 256, 128, 10]
    init = [(rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32) for a, b in zip(sizes, sizes[1:])]
    binit = [np.zeros(b, np.float32) for b in sizes[1:]]
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    labels = rng.integers(0, 10, batch)
    onehot = np.eye(10, dtype=np.float32)[labels]
    numpy_step = _mlp_numpy(x, labels, onehot, [w.copy() for w in init], [b.copy() for b in binit], batch, lr)

    TW = [mg.tensor(w.copy(), requires_grad=True) for w in init]
    TB = [mg.tensor(b.copy(), requires_grad=True) for b in binit]
    tx, toh = mg.tensor(x), mg.tensor(onehot)

    def tape_step():
        loss = mlp_loss(tx, TW, TB, toh, mg.relu, mg.log_softmax, batch)
        loss.backward()
        with mg.no_grad():
            for p in TW + TB:
                p.data -= lr * p.grad.data
                p.grad = None
        return loss

    g = mg.Graph()
    with g.as_default():
        px = mg.placeholder(mg.float32, (batch, 784), name='x')
        py = mg.placeholder(mg.float32, (batch, 10), name='y')
        VW = [mg.Variable(w.copy(), name=f'W{i}') for i, w in enumerate(init)]
        VB = [mg.Variable(b.copy(), name=f'b{i}') for i, b in enumerate(binit)]
        loss = mlp_loss(px, VW, VB, py, mg.relu, mg.log_softmax, batch)
        grads = mg.gradients(loss, VW + VB)
        step = mg.group(*[v.assign(v - lr * gv) for v, gv in zip(VW + VB, grads)])
    variants = {'numpy': numpy_step, 'tape': tape_step, **compiled_variants([loss, step], [px, py], [x, onehot])}
    if jax is not None:
        variants['jax'] = _mlp_jax(init + binit, x, onehot, batch, lr)
    if torch is not None:
        variants['torch'] = _mlp_torch(init + binit, x, onehot, batch, lr)
    return variants


def _mlp_torch(params, x, onehot, batch, lr):
    """The MLP training step in PyTorch eager (autograd, then an SGD update under no_grad)."""
    P = [torch.from_numpy(p.copy()).requires_grad_() for p in params]
    tx, ty = torch.from_numpy(x), torch.from_numpy(onehot)
    log_softmax = lambda h, axis: torch.log_softmax(h, dim=axis)

    def torch_step():
        loss = mlp_loss(tx, P[:3], P[3:], ty, torch.relu, log_softmax, batch)
        loss.backward()
        with torch.no_grad():
            for p in P:
                p -= lr * p.grad
                p.grad = None
        return loss
    return torch_step


def _mlp_numpy(x, labels, onehot, W, B, batch, lr, mm=operator.matmul):
    """The MLP training step in hand-written numpy (forward, backward, SGD update); ``mm``: the matmul
    (numpy_split passes one that times itself)."""
    def numpy_step():
        h0 = x
        z1 = mm(h0, W[0]) + B[0]; h1 = np.maximum(z1, 0)
        z2 = mm(h1, W[1]) + B[1]; h2 = np.maximum(z2, 0)
        z3 = mm(h2, W[2]) + B[2]
        m = z3.max(axis=1, keepdims=True)
        e = np.exp(z3 - m)
        p = e / e.sum(axis=1, keepdims=True)
        loss = -np.log(p[np.arange(batch), labels]).mean()
        g3 = (p - onehot) / batch
        gW2, gB2 = mm(h2.T, g3), g3.sum(0)
        g2 = mm(g3, W[2].T) * (z2 > 0)
        gW1, gB1 = mm(h1.T, g2), g2.sum(0)
        g1 = mm(g2, W[1].T) * (z1 > 0)
        gW0, gB0 = mm(h0.T, g1), g1.sum(0)
        for P, G in zip(W + B, [gW0, gW1, gW2, gB0, gB1, gB2]):
            P -= lr * G
        return loss
    return numpy_step


def _mlp_jax(params, x, onehot, batch, lr):
    """The MLP training step under jax.jit."""
    def jloss(params, x, y):
        return mlp_loss(x, params[:3], params[3:], y, lambda v: jnp.maximum(v, 0), jax.nn.log_softmax, batch)

    def jstep(params, x, y):
        loss, gs = jax.value_and_grad(jloss)(params, x, y)
        return loss, [p - lr * g for p, g in zip(params, gs)]
    f, xs = jax.jit(jstep), [jax.device_put(a) for a in (x, onehot)]
    state = {'p': [jax.device_put(a) for a in params]}

    def jax_step():
        loss, state['p'] = f(state['p'], *xs)
        return jax.block_until_ready(loss)
    return jax_step


def timed_driver(prog):
    """The program's driver with each step line timed into T[k]; (run, labels [(op, code)], T)."""
    out, labels = [], []
    for line in prog._driver.splitlines():
        code, _, comment = line.strip().partition('  # ')
        m = re.fullmatch(r'(\S+) = (\w+)', comment)
        top = line.startswith(' ' * 8) and not line.startswith(' ' * 9)
        if top and (m or re.match(r'n\d+ = ', code)) and not code.startswith(('if ', 'r_', 'o0 =')):
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
    """_mlp_numpy's step, its matmul time into T['mm'] and the rest into T['rest']."""
    pc = time.perf_counter

    def mm(a, b):
        t = pc()
        r = a @ b
        T['mm'] += pc() - t
        return r
    inner = _mlp_numpy(x, labels, onehot, W, B, batch, lr, mm)

    def step():
        t0, m0 = pc(), T['mm']
        loss = inner()
        T['rest'] += pc() - t0 - (T['mm'] - m0)
        return loss
    return step


def mlp_split(batch, reps, n, show_steps=False):
    """The MLP step compiled (numba) and in numpy, each step of its driver timed in place: medians of `reps`
    runs of `n` calls, (compiled matmul, compiled rest, numpy matmul, numpy rest) in seconds, and the program
    (issue 37: the non-matmul part, matmul epilogues and the softmax head, against numpy's)."""
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
        loss = mlp_loss(px, VW, VB, py, mg.relu, mg.log_softmax, batch)
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


def fused_case(n, rng, compile_torch=False):
    a, b, c, d, e = (rng.standard_normal(n).astype(np.float32) for _ in range(5))
    g = mg.Graph()
    with g.as_default():
        ps = [mg.placeholder(mg.float32, (n,), name=k) for k in 'abcde']
        pa, pb, pc, pd, pe = ps
        out = mg.relu(pa * pb + pc) * pd - pe
    variants = {'numpy': lambda: np.maximum(a * b + c, 0) * d - e, **compiled_variants(out, ps, [a, b, c, d, e])}
    for k in ('compiled', 'compiled_numpy'):
        if k in variants:
            np.testing.assert_allclose(variants[k](), np.maximum(a * b + c, 0) * d - e, rtol=1e-5)
    if NUMBA:       # caller-owned output buffer: no fresh array (and its page faults) per call
        prog, dst = mg.compile(out, ps, backend='numba'), np.empty(n, np.float32)
        variants['compiled_out'] = lambda: prog(a, b, c, d, e, out=dst)
        variants['prange'] = functools.partial(prange_fused, a, b, c, d, e)
    if torch is not None:
        ta = [torch.from_numpy(v) for v in (a, b, c, d, e)]
        variants['torch'] = lambda: torch.relu(ta[0] * ta[1] + ta[2]) * ta[3] - ta[4]
    if jax is not None:
        variants['jax'] = jax_variant(lambda a, b, c, d, e: jnp.maximum(a * b + c, 0) * d - e, a, b, c, d, e)
    if torch is not None and compile_torch:
        tf = torch.compile(lambda a, b, c, d, e: torch.relu(a * b + c) * d - e)
        tf(*ta)
        variants['torch_compile'] = lambda: tf(*ta)
    return variants


# ------------------------------------------------------------------ tanh chain (issue 37)
def tanh_chain_case(n, rng, layers=10):
    """Ten y = tanh(y * w + b) layers and the sum on n x n float32, forward + backward (a tanh every other
    op). Variants: hand-written numpy, the tape, the compiled program (numba: tanh inside the fused loops,
    compiler/approx.py), torch eager and jax.jit when installed; ``relu_floor`` (numba): the same program
    with relu for tanh, its loop reading and writing the same arrays."""
    x, ws, bs = chain_arrays(n, rng)

    def numpy_step():
        y, ys, ts = x, [], []
        for w, b in zip(ws, bs):
            ys.append(y)
            y = np.tanh(y * w + b)
            ts.append(y)
        loss, g, gw, gb = y.sum(), np.ones_like(y), [], []
        for w, y_in, t in zip(reversed(ws), reversed(ys), reversed(ts)):
            gz = g * (1 - t * t)
            gw.append(gz * y_in)
            gb.append(gz)
            g = gz * w
        return loss, gw, gb

    tw, tb, tx = [mg.tensor(w, requires_grad=True) for w in ws], [mg.tensor(b, requires_grad=True) for b in bs], mg.tensor(x)
    tape_step = autograd_step(tw + tb, lambda: chain_loss(tx, tw, tb, mg.tanh))
    outs, ins = tanh_chain_graph(n, layers)
    variants = {'numpy': numpy_step, 'tape': tape_step, **compiled_variants(outs, ins, [x] + ws + bs)}
    if NUMBA:       # the same fused loop (21 arrays read, 21 written) with relu for tanh: its memory floor
        variants['relu_floor'] = functools.partial(mg.compile(*tanh_chain_graph(n, layers, mg.relu)), x, *ws, *bs)
    ref = numpy_step()
    for k in ('compiled', 'compiled_numpy'):
        if k in variants:
            got = variants[k]()
            np.testing.assert_allclose(got[0], ref[0], rtol=1e-4)
            np.testing.assert_allclose(got[1], ref[1][-1], rtol=1e-4, atol=1e-5)
    if torch is not None:
        Tx, Tw, Tb = torch.from_numpy(x), *([torch.from_numpy(a).requires_grad_() for a in v] for v in (ws, bs))
        variants['torch'] = autograd_step(Tw + Tb, lambda: chain_loss(Tx, Tw, Tb, torch.tanh))
    if jax is not None:
        variants['jax'] = jax_variant(jax.value_and_grad(lambda ws, bs, x: chain_loss(x, ws, bs, jnp.tanh),
                                                         argnums=(0, 1)), ws, bs, x)
    return variants


def tanh_chain_graph(n, layers=10, act=mg.tanh):
    """The tanh chain's loss and gradients as a graph: (outputs, inputs [x, w0.., b0..]); ``act``: another
    activation in tanh's place."""
    g = mg.Graph()
    with g.as_default():
        px = mg.placeholder(mg.float32, (n, n), name='x')
        pw = [mg.placeholder(mg.float32, (n, n), name=f'w{i}') for i in range(layers)]
        pb = [mg.placeholder(mg.float32, (n, n), name=f'b{i}') for i in range(layers)]
        loss = chain_loss(px, pw, pb, act)
        return [loss] + mg.gradients(loss, pw + pb), [px] + pw + pb


def tanh_chain_kernels(n, layers=10) -> dict:
    """The compiled tanh chain's structure: nodes before/after, fused groups, loop kernels, approximations."""
    prog = mg.compile(*tanh_chain_graph(n, layers), backend='numba' if NUMBA else 'numpy')
    return {k: prog.stats.get(k) for k in ('nodes_before', 'nodes_after', 'fused', 'kernels', 'approximations')}


def tanh_chain_cold(n=64) -> float:
    """Seconds to compile the tanh chain in a fresh process with an empty kernel cache (numba itself
    imported and warmed first): what a first launch pays for its kernels."""
    code = ('import importlib.util, time, numba\n'
            'numba.njit(lambda v: v + 1)(1.0)\n'
            f'spec = importlib.util.spec_from_file_location("bench_script", {os.path.abspath(__file__)!r})\n'
            'b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)\n'
            f't0 = time.perf_counter(); b.tanh_chain_kernels({n}); print(time.perf_counter() - t0)')
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, '-c', code], env=dict(os.environ, MINIGRAD_CACHE_DIR=d),
                           capture_output=True, text=True, check=True)
    return float(r.stdout.split()[-1])


# ------------------------------------------------------------------ compile cost
def deep_chain_case(n):
    """A chain of n scalar ops (mul, tanh alternating) and its gradient: the tape's forward +
    backward against building the graph, mg.gradients, compiling and one Session run. Each variant
    ends by collecting its own garbage: a graph's nodes and symbols form reference cycles, and
    freeing a big one would otherwise land inside whichever call runs next (it made the next tape
    call 10x slower and the ratio look 4.7x instead of 50x)."""
    def chain(y):
        for i in range(n):
            y = mg.tanh(y) if i % 2 else y * 1.01
        return y

    def tape():
        x = mg.tensor(np.float32(0.5), requires_grad=True)
        chain(x).backward()
        g = x.grad.item()
        gc.collect()
        return g

    def static():
        g = mg.Graph()
        with g.as_default():
            x = mg.placeholder(mg.float32, (), name='x')
            gx, = mg.gradients(chain(x), [x])
        r = float(mg.Session(g).run(gx, {x: np.float32(0.5)}))
        del g, x, gx
        gc.collect()
        return r
    assert np.isclose(tape(), static(), rtol=1e-4)
    return {'tape': tape, 'compiled': static}


def deep_chain_cold_warm(n) -> dict:
    """Seconds for deep_chain_case(n) (the tape once, then build, gradients, Session, one run) in a fresh
    process: with an empty kernel cache ('cold_cache': every loop kernel compiled), then with it filled
    ('warm_cache': kernels loaded from disk); 'tape': the tape alone in the warm process (issue 37)."""
    code = ('import importlib.util, time\n'
            f'spec = importlib.util.spec_from_file_location("bench_script", {os.path.abspath(__file__)!r})\n'
            'b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)\n'
            f't0 = time.perf_counter(); case = b.deep_chain_case({n})\n'
            'b.gc.collect(); b.gc.freeze()\n'        # the tape's own garbage only (see deep_chain_case)
            't1 = time.perf_counter(); case["tape"](); print(t1 - t0, time.perf_counter() - t1)')
    out = {}
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, MINIGRAD_CACHE_DIR=d)
        for k in ('cold_cache', 'warm_cache'):
            r = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, check=True)
            out[k], out['tape'] = map(float, r.stdout.split()[-2:])
    return out


# ------------------------------------------------------------------ gradient checkpointing (issue 59)
def checkpoint_case(rng, layers=64, width=256, batch=1024, segments=8, lr=1e-3):
    """A deep narrow MLP whose activations dominate (``layers`` x Linear(width, width) + tanh, float32): one
    SGD training step on the tape without checkpointing (``tape``) and with ``mg.checkpoint_sequential`` at
    ``segments`` segments (``tape_checkpoint``), and with every segment checkpointed, the last too
    (``tape_checkpoint_all``); the same in PyTorch (``torch``, ``torch_checkpoint``:
    torch.utils.checkpoint.checkpoint_sequential, use_reentrant=False). Also the model's bytes (weights),
    which exist before a step: its gradients are made inside each step."""
    mg.manual_seed(int(rng.integers(1 << 31)))
    net = mg.nn.Sequential(*[m for _ in range(layers) for m in (mg.nn.Linear(width, width), mg.nn.Tanh())])
    params = list(net.parameters())
    x = mg.tensor(rng.standard_normal((batch, width)).astype(np.float32))

    def step(forward):
        def run():
            y = forward()
            loss = (y * y).mean()
            loss.backward()
            with mg.no_grad():
                for p in params:
                    p.data -= lr * p.grad.data
                    p.grad = None
            return loss.item()
        return run
    size = layers // segments
    chunks = [functools.partial(_layers, list(net)[2 * i:2 * (i + size)]) for i in range(0, layers, size)]
    variants = {'tape': step(lambda: net(x)),
                'tape_checkpoint': step(lambda: mg.checkpoint_sequential(net, segments, x)),
                # every segment checkpointed, the last too (checkpoint_sequential runs the last as usual)
                'tape_checkpoint_all': step(lambda: functools.reduce(lambda h, f: mg.checkpoint(f, h), chunks, x))}
    if torch is not None:
        tcp = torch.utils.checkpoint
        tnet = torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(width, width), torch.nn.Tanh())])
        with torch.no_grad():
            for tp, p in zip(tnet.parameters(), params):
                tp.copy_(torch.from_numpy(p.data.copy()))
        tx = torch.from_numpy(x.data)

        def tstep(forward):
            def run():
                y = forward()
                loss = (y * y).mean()
                loss.backward()
                with torch.no_grad():
                    for p in tnet.parameters():
                        p -= lr * p.grad
                        p.grad = None
                return loss.item()
            return run
        variants['torch'] = tstep(lambda: tnet(tx))
        variants['torch_checkpoint'] = tstep(lambda: tcp.checkpoint_sequential(tnet, segments, tx, use_reentrant=False))
    return variants, sum(p.data.nbytes for p in params)


def _layers(layers, x):
    for layer in layers:
        x = layer(x)
    return x


def _bench_checkpoint(quick, rng, repeats, min_time, rows, target):
    """Gradient checkpointing on the tape (issue 59): a training step's peak traced memory and time with
    checkpoint_sequential at 8 segments vs without, beside PyTorch's checkpoint_sequential. A step takes a third
    of a second, so the variants run 3 interleaved rounds (medians of 3) whatever the other cases' repeats."""
    shape = dict(layers=16, width=64, batch=64, segments=4) if quick else dict(layers=64, width=256, batch=1024,
                                                                             segments=8)
    variants, weights = checkpoint_case(rng, **shape)
    t = timeit({k: f for k, f in variants.items() if k != 'tape_checkpoint_all'}, 3, min_time)
    peaks = {k: [] for k in ('tape', 'tape_checkpoint', 'tape_checkpoint_all')}
    for _ in range(3):
        for k in peaks:
            peaks[k].append(peak_bytes(variants[k]))
    peak = {k: statistics.median(v) for k, v in peaks.items()}
    what = f'{shape["layers"]} x (Linear({shape["width"]}, {shape["width"]}) + tanh), batch {shape["batch"]}, ' \
           f'{shape["segments"]} segments'
    rows.append({'case': f'deep MLP training step: {what}', **{k: v * 1e6 for k, v in t.items()}})
    rows.append({'case': f'  its peak traced memory (MiB; the weights, {weights / 2 ** 20:.1f} MiB, exist before the '
                         f'step and are not in it)', **{k: v / 2 ** 20 for k, v in peak.items()}})
    target('deep MLP: tape peak, checkpoint_sequential / none (weights and grads included)',
           (peak['tape_checkpoint'] + weights) / (peak['tape'] + weights), '<= 0.35')
    target('deep MLP: tape peak, checkpoint_sequential / none (the step\'s own allocations)',
           peak['tape_checkpoint'] / peak['tape'], '<= 0.35')
    target('deep MLP: tape step time, checkpoint_sequential / none', t['tape_checkpoint'] / t['tape'], '<= 1.4')
    if 'torch' in t:
        target('deep MLP: torch step time, checkpoint_sequential / none (reference)',
               t['torch_checkpoint'] / t['torch'], '<= 1.4')


# ------------------------------------------------------------------ main
# ------------------------------------------------------------------ per-example gradients (issue 36)
def per_example_case(batch=64, rng=None, sizes=(32, 64, 10)):
    """Per-example gradients of a small MLP at ``batch`` examples. Variants: compiled ``vmap(grad)`` (one
    program for the batch), a Python loop of ``jit(grad)`` calls, eager ``vmap(grad)`` and
    ``torch.func.vmap(grad)`` when installed."""
    rng = np.random.default_rng(0) if rng is None else rng
    params = [(rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32) for a, b in zip(sizes, sizes[1:])]
    params += [np.zeros(b, np.float32) for b in sizes[1:]]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    n = len(sizes) - 1

    def loss(ps, x, y, relu=mg.relu, log_softmax=mg.log_softmax):
        h = x
        for i in range(n):
            h = h @ ps[i] + ps[n + i]
            h = relu(h) if i < n - 1 else h
        return -(y * log_softmax(h, axis=-1)).sum()
    per_example = mg.vmap(mg.grad(loss), in_axes=(None, 0, 0))
    g = mg.Graph()
    with g.as_default():
        phs = [mg.placeholder(mg.float32, p.shape) for p in params]
        px, py = mg.placeholder(mg.float32, x.shape), mg.placeholder(mg.float32, y.shape)
        grads = per_example(phs, px, py)
    variants = compiled_variants(grads, phs + [px, py], params + [x, y])
    one = mg.jit(lambda *a: tuple(mg.grad(loss)(list(a[:-2]), a[-2], a[-1])))
    tp, tx, ty = [mg.tensor(p) for p in params], mg.tensor(x), mg.tensor(y)
    variants['loop_jit_grad'] = lambda: [one(*tp, tx[i], ty[i]) for i in range(batch)]
    variants['vmap_grad_eager'] = lambda: per_example(tp, tx, ty)
    if torch is not None:
        tl = lambda ps, x, y: loss(ps, x, y, torch.relu, lambda h, axis: torch.log_softmax(h, dim=axis))
        f = torch.func.vmap(torch.func.grad(tl), in_dims=(None, 0, 0))
        args = [torch.from_numpy(p) for p in params], torch.from_numpy(x), torch.from_numpy(y)
        variants['torch_func'] = lambda: f(*args)
    return variants


def pin_one_cpu():
    """Run this process (and the processes it starts) on one CPU, the last it may use: the issue's targets are
    timed on one pinned core, so the scheduler never moves a measurement between cores. The CPU, or None."""
    if not hasattr(os, 'sched_setaffinity'):
        return None
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='small sizes and few repeats (smoke test)')
    ap.add_argument('--json', metavar='FILE', help='also write the results as JSON')
    ap.add_argument('--tape', action='store_true', help='only the chain and MLP cases (the tape vs torch eager)')
    ap.add_argument('--checkpoint', action='store_true',
                    help='only the gradient checkpointing case (a deep MLP on the tape with and without '
                         'checkpoint_sequential, and PyTorch\'s)')
    ap.add_argument('--ledger', action='store_true',
                    help="each fast-layer item's gain: the tape cases with every item, with all but that item, "
                         "and with none (minigrad/fast.py's ledger)")
    ap.add_argument('--runs', type=int, default=1, metavar='N',
                    help="run it N times, each in a process of its own, and judge each target by the median of "
                         "its N values (issue 37's protocol: --runs 3)")
    ap.add_argument('--cores', action='store_true',
                    help='only the fused case, on one pinned core and on all cores, each in processes of its own')
    ap.add_argument('--threads', type=int, metavar='T', help=argparse.SUPPRESS)    # --cores: one child process
    opts = ap.parse_args(argv)
    if opts.cores and not opts.threads:
        return cores_report(opts)
    cpu = pin_one_cpu() if opts.threads in (None, 1) else None
    print(f'pinned to CPU {cpu}' if cpu is not None else 'not pinned')
    set_threads(opts.threads or 1)        # one pinned core: every framework one thread
    if opts.threads:
        return cores_child(opts)
    if opts.ledger:
        return ledger_gains(opts.quick)
    if opts.runs > 1:
        return _median_of_runs(opts)
    rng = np.random.default_rng(0)
    repeats, min_time = (3, 0.002) if opts.quick else (15, 0.05)
    rows, targets = [], []

    def target(name, value, goal):
        targets.append({'target': name, 'measured': round(value, 3), 'goal': goal, 'pass': meets(value, goal)})

    rest = (_bench_tanh_chain, _bench_fused, _bench_compile_cost, _bench_per_example, _bench_checkpoint)
    parts = (_bench_chain, _bench_mlp) + (() if opts.tape else rest)
    parts = (_bench_checkpoint,) if opts.checkpoint else parts
    for part in parts:  # one rng, in order
        part(opts.quick, rng, repeats, min_time, rows, target)
    _report(rows, targets, opts)


def set_threads(n):
    """minigrad's, numba's and torch's threads (jax's and BLAS's are read from the environment at import)."""
    mg.set_num_threads(n)
    if NUMBA:
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    if torch is not None:
        torch.set_num_threads(n)


def busy_cpu_seconds() -> float:
    """Seconds all CPUs have been busy since boot (Linux's /proc/stat; 0 elsewhere)."""
    if not os.path.exists('/proc/stat'):
        return 0.0
    with open('/proc/stat') as f:
        ticks = f.readline().split()[1:]
    return sum(int(ticks[i]) for i in (0, 1, 2, 5, 6, 7)) / os.sysconf('SC_CLK_TCK')


def cores_child(opts):
    """One process of --cores: the fused case with every framework on opts.threads threads, as JSON rows; also
    the CPUs other processes kept busy meanwhile (a core they hold is not free) and numba's threading layer."""
    rng, rows = np.random.default_rng(0), []
    busy, own, wall = busy_cpu_seconds(), sum(os.times()[:2]), time.perf_counter()
    for n in ([10 ** 5] if opts.quick else [10 ** 6, 10 ** 7]):
        t = timeit(fused_case(n, rng), 3 if opts.quick else 15 if n < 10 ** 7 else 5, 0.002 if opts.quick else 0.05)
        rows.append({'case': f'relu(a*b+c)*d-e, {n:.0e} float32, {opts.threads} thread(s)', **{k: v * 1e6 for k, v in t.items()}})
    others = (busy_cpu_seconds() - busy - (sum(os.times()[:2]) - own)) / (time.perf_counter() - wall)
    with open(opts.json, 'w') as f:
        json.dump({'rows': rows, 'others': max(0.0, others), 'layer': numba.threading_layer() if NUMBA else None}, f)


def cores_report(opts):
    """--cores: one child process per thread count (1, pinned; all cores), alternating opts.runs times; each
    cell the median over the runs."""
    every = mg.compiler.parallel.cores()
    got = {1: [], every: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(opts.runs):
            for n in got:
                out, env = os.path.join(tmp, f'{n}_{i}.json'), dict(os.environ, MINIGRAD_NUM_THREADS=str(n))
                env.update({v: str(n) for v in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS')})
                env['XLA_FLAGS'] = ONE_THREAD_XLA if n == 1 else '--xla_cpu_multi_thread_eigen=true'
                subprocess.run([sys.executable, __file__, '--threads', str(n), '--json', out] + ['--quick'] * opts.quick,
                               check=True, stdout=subprocess.DEVNULL, env=env)
                with open(out) as f:
                    run = json.load(f)
                got[n].append(run['rows'])
                print(f'run {i + 1}, {n} thread(s): other processes kept {run["others"]:.2f} CPUs busy; numba\'s '
                      f'threading layer (prange) {run["layer"]}')
    print(f'{every} cores; medians of {opts.runs} run(s) per thread count, the runs alternating')
    rows = [{k: statistics.median(r[i][k] for r in runs) if k != 'case' else v for k, v in row.items()}
            for runs in got.values() for i, row in enumerate(runs[0])]
    half, targets = len(rows) // 2, []
    for one, r in zip(rows[:half], rows[half:]):    # all cores: issue 61's targets, and each framework's scaling
        for other, goal in (('prange', '<= 1.2'), ('jax', '<= 1.0'), ('torch', '<= 1.0')):
            if other in r and 'compiled' in r:
                v = r['compiled'] / r[other]
                targets.append({'target': f'{r["case"]}: compiled / {other}', 'measured': round(v, 3), 'goal': goal,
                                'pass': meets(v, goal)})
        print(f'{r["case"]}: time on all cores / on one: ' + ', '.join(f'{k} {r[k] / one[k]:.2f}' for k in r if k != 'case'))
    _report(rows, targets, opts)


def _bench_chain(quick, rng, repeats, min_time, rows, target):
    for n in ([4, 64] if quick else [4, 64, 256, 1024]):
        t = timeit(chain_all(n, rng), repeats, min_time)
        c = t.get('compiled', t['compiled_numpy'])
        rows.append({'case': f'chain 30 ops fwd+bwd {n}x{n}', **{k: v * 1e6 for k, v in t.items()}})
        lim = {4: 2.0, 64: 1.5, 256: 1.5, 1024: 1.1}[n]
        target(f'chain {n}: tape / numpy', t['tape'] / t['numpy'], f'<= {lim}')
        lim = 1.0 if n == 4 else 0.6
        target(f'chain {n}: compiled / numpy', c / t['numpy'], f'<= {lim}')
        target(f'chain {n}: compiled / tape', c / t['tape'], '<= 1.0')
        if n == 4 and 'torch' in t:
            target('chain 4: torch / tape', t['torch'] / t['tape'], '>= 1.5')
        if 'torch' in t:            # issue 37: the tape at or below PyTorch eager
            target(f'chain {n}: tape / torch eager', t['tape'] / t['torch'], '<= 1.0')
    n = 256 if quick else 1024
    v = chain_all(n, rng)
    best = 'compiled' if 'compiled' in v else 'compiled_numpy'
    v['tape'](), v[best]()
    pt, pc = peak_bytes(v['tape']), peak_bytes(v[best])
    rows.append({'case': f'chain {n}x{n} peak memory (MiB)', 'tape': pt / 2 ** 20, best: pc / 2 ** 20})
    target(f'chain {n}: compiled peak below tape', 1 - pc / pt, '>= 0.35')


def _bench_tanh_chain(quick, rng, repeats, min_time, rows, target):
    """The tanh chain (issue 37): compiled <= 0.5x numpy at 64^2, 256^2 and 1024^2; its cold compile."""
    for n in ([64] if quick else [64, 256, 1024]):
        variants = tanh_chain_case(n, rng)
        floor = variants.pop('relu_floor', None)      # timed apart: its arrays would crowd the others' cache
        t = timeit(variants, repeats, min_time)
        c = t.get('compiled', t['compiled_numpy'])
        k = tanh_chain_kernels(n)
        rows.append({'case': f'tanh chain fwd+bwd {n}x{n} ({k["kernels"]} kernels)', **{a: v * 1e6 for a, v in t.items()}})
        if floor is not None:     # what the loop's memory traffic alone costs: a miss below it is not tanh's
            both = {'numpy': variants['numpy'], 'compiled': variants['compiled'], 'relu_floor': floor}
            f = timeit(both, repeats, min_time)
            rows.append({'case': f'  again, beside the same loop with relu for tanh (its memory floor: '
                                 f'{f["relu_floor"] / f["numpy"]:.3f}x numpy)', **{a: v * 1e6 for a, v in f.items()}})
        target(f'tanh chain {n}: compiled / numpy', c / t['numpy'], '<= 0.5')
    if NUMBA and not quick:
        rows.append({'case': 'tanh chain 64x64: compile in a fresh process, empty kernel cache', 'cold_cache': tanh_chain_cold() * 1e6})


def _bench_mlp(quick, rng, repeats, min_time, rows, target):
    for batch in ([1, 8] if quick else [1, 64]):
        variants = mlp_case(batch, rng)
        t = timeit(variants, repeats, min_time)
        best = 'compiled' if 'compiled' in t else 'compiled_numpy'
        rows.append({'case': f'MLP step batch {batch}', **{k: v * 1e6 for k, v in t.items()}})
        lim = 0.5 if batch == 1 else 0.9
        target(f'MLP batch {batch}: compiled / numpy', t[best] / t['numpy'], f'<= {lim}')
        if 'torch' in t:
            target(f'MLP batch {batch}: tape / torch eager', t['tape'] / t['torch'], '<= 1.0')
        if batch == 64 and NUMBA:
            c_mm, c_rest, n_mm, n_rest, _ = mlp_split(batch, repeats, 200)
            rows.append({'case': 'MLP step batch 64: all but the matmuls (each step timed)', 'numpy': n_rest * 1e6,
                         'compiled': c_rest * 1e6})
            target('MLP batch 64: non-matmul compiled / numpy', c_rest / n_rest, '<= 0.5')
        for _ in range(3):
            variants[best]()
        tr = peak_bytes(variants[best])
        target(f'MLP batch {batch}: transient KiB per call', tr / 1024, '< 64')


def _bench_fused(quick, rng, repeats, min_time, rows, target):
    for n in ([10 ** 5] if quick else [10 ** 6, 10 ** 7]):
        variants = fused_case(n, rng, compile_torch=not quick)
        t = timeit(variants, repeats if n < 10 ** 7 else max(3, repeats // 3), min_time)
        best = 'compiled' if 'compiled' in t else 'compiled_numpy'
        rows.append({'case': f'relu(a*b+c)*d-e, {n:.0e} float32', **{k: v * 1e6 for k, v in t.items()}})
        lim = {10 ** 5: 0.95, 10 ** 6: 0.45, 10 ** 7: 0.40}[n]
        target(f'relu(a*b+c)*d-e {n:.0e}: compiled / numpy', t[best] / t['numpy'], f'<= {lim}')
        extra = peak_bytes(variants[best]) - n * 4
        target(f'relu(a*b+c)*d-e {n:.0e}: temporaries (bytes beyond the output)', extra, '< 4096')


def _bench_compile_cost(quick, rng, repeats, min_time, rows, target):
    small, big = (200, 800) if quick else (5000, 20000)
    cost = {}
    for n in (small, big):
        case = deep_chain_case(n)
        gc.collect()
        gc.freeze()     # each variant collects its own garbage, not the process's (torch, jax: ~0.1 s a collection)
        try:
            cost[n] = timeit(case, 1 if quick else 3, 0.0)
        finally:
            gc.unfreeze()
        rows.append({'case': f'gradients of a {n}-op chain: build+compile+run vs tape',
                     **{k: v * 1e6 for k, v in cost[n].items()}})
    growth = cost[big]['compiled'] / cost[small]['compiled']
    target(f'compile cost growth {small} -> {big} ops', growth, '<= 5')
    ratio = cost[big]['compiled'] / cost[big]['tape']
    target(f'compile cost {big} ops: static / tape', ratio, '<= 40')
    if not quick:                   # first launch: a fresh environment starts with an empty kernel cache
        cw = deep_chain_cold_warm(big)
        rows.append({'case': f'{big}-op chain in a fresh process, cold vs warm kernel cache',
                     **{k: v * 1e6 for k, v in cw.items()}})


def _bench_per_example(quick, rng, repeats, min_time, rows, target):
    batch = 8 if quick else 64
    t = timeit(per_example_case(batch, rng), repeats, min_time)
    best = 'compiled' if 'compiled' in t else 'compiled_numpy'
    rows.append({'case': f'per-example gradients, MLP 32-64-10, batch {batch}', **{k: v * 1e6 for k, v in t.items()}})
    target(f'per-example batch {batch}: compiled vmap(grad) / loop of jit(grad)', t[best] / t['loop_jit_grad'],
           '<= 0.1')
    if 'torch_func' in t:
        target(f'per-example batch {batch}: compiled / torch.func vmap(grad)', t[best] / t['torch_func'], '<= 2')


def ledger_gains(quick=False, repeats=None):
    """Time the tape's cases (the chain, the MLP step) with every fast-layer item installed, with each item
    left out in turn, and with none, interleaved (round-robin blocks of calls, medians); print each item's
    gain as time without it / time with all. An item whose gain is about 1.00 everywhere no longer pays."""
    fast = mg.fast
    rng, items = np.random.default_rng(0), list(fast.ITEMS)
    repeats = repeats or (3 if quick else 9)
    cases = {f'chain {n}x{n}': chain_all(n, rng)['tape'] for n in ([4, 64] if quick else [4, 64, 256])}
    for batch in (1, 64):
        cases[f'MLP step, batch {batch}'] = mlp_case(batch, rng)['tape']
    configs = {'all': items, **{f'without {i}': [j for j in items if j != i] for i in items}, 'none (plain)': []}
    was = fast.installed()
    result = {}
    try:
        for case, f in cases.items():
            f()
            t0, n = time.perf_counter(), 0
            while time.perf_counter() - t0 < (0.005 if quick else 0.05):
                f()
                n += 1
            times = {c: [] for c in configs}
            for _ in range(repeats):
                for c, on in configs.items():
                    fast.uninstall()
                    fast.install(on)
                    f()
                    t0 = time.perf_counter()
                    for _ in range(n):
                        f()
                    times[c].append((time.perf_counter() - t0) / n)
            result[case] = {c: statistics.median(v) for c, v in times.items()}
    finally:
        fast.uninstall()
        fast.install(was)
    print('| time / time with every item | ' + ' | '.join(cases) + ' |')
    print('|---|' + '---|' * len(cases))
    for c in configs:
        if c != 'all':
            print(f'| {c} | ' + ' | '.join(f'{result[k][c] / result[k]["all"]:.2f}' for k in cases) + ' |')
    print('| (every item: us per step) | ' + ' | '.join(f'{result[k]["all"] * 1e6:.0f}' for k in cases) + ' |')
    return result


def meets(value, goal: str) -> bool:
    """Whether a target's value meets its goal, written '<= 0.5', '>= 1.5', '< 64'."""
    op, limit = goal.split()
    return {'<=': operator.le, '>=': operator.ge, '<': operator.lt, '>': operator.gt}[op](value, float(limit))


def _median_of_runs(opts):
    """Run this script opts.runs times (children pinned to this CPU too), then report each cell and each
    target's median, the target judged again on its median; the table also lists every run's value."""
    flags = ['--quick'] * opts.quick + ['--tape'] * opts.tape + ['--checkpoint'] * opts.checkpoint
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(opts.runs):
            t0, out = time.perf_counter(), os.path.join(tmp, f'run{i}.json')
            subprocess.run([sys.executable, __file__, *flags, '--json', out], check=True, stdout=subprocess.DEVNULL)
            print(f'run {i + 1} of {opts.runs}: {time.perf_counter() - t0:.0f} s', file=sys.stderr)
            with open(out) as f:
                results.append(json.load(f))
    rows = [{k: statistics.median(r['rows'][i][k] for r in results) if k != 'case' else v for k, v in row.items()}
            for i, row in enumerate(results[0]['rows'])]
    targets = []
    for i, t in enumerate(results[0]['targets']):
        values = [r['targets'][i]['measured'] for r in results]
        med = statistics.median(values)
        targets.append({**t, 'measured': round(med, 3), 'pass': meets(med, t['goal']), 'runs': values})
    print(f'medians of {opts.runs} runs')
    _report(rows, targets, opts)


def _report(rows, targets, opts):
    cols = ['numpy', 'tape', 'compiled', 'compiled_out', 'compiled_numpy', 'prange', 'torch', 'torch_compile', 'jax',
            'loop_jit_grad', 'vmap_grad_eager', 'torch_func', 'relu_floor', 'cold_cache', 'warm_cache',
            'tape_checkpoint', 'tape_checkpoint_all', 'torch_checkpoint']
    cols = [c for c in cols if any(c in r for r in rows)]
    print('| case | ' + ' | '.join(f'{c} (us)' for c in cols) + ' |')
    print('|---|' + '---|' * len(cols))
    for r in rows:
        print(f'| {r["case"]} | ' + ' | '.join(f'{r[c]:.1f}' if c in r else '-' for c in cols) + ' |')
    print()
    runs = ' runs |' if 'runs' in targets[0] else ''
    print('| target | measured | goal | result |' + runs)
    print('|---|---|---|---|' + '---|' * bool(runs))
    for t in targets:
        each = f' {" / ".join(f"{v:.3f}" for v in t["runs"])} |' if runs else ''
        print(f'| {t["target"]} | {t["measured"]:.3f} | {t["goal"]} | {"PASS" if t["pass"] else "MISS"} |' + each)
    if opts.json:
        with open(opts.json, 'w') as f:
            json.dump({'rows': rows, 'targets': targets, 'quick': opts.quick,
                       'torch': None if torch is None else torch.__version__,
                       'jax': None if jax is None else jax.__version__}, f, indent=1)


if __name__ == '__main__':
    main()
