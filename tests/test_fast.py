"""The fast layer (minigrad/fast.py) computes the same bits as the plain core (minigrad/core/).

Every ledger item of ``fast.ITEMS`` replaces one plain piece with a faster one; the rule is that plain and
fast give the same bits. This file runs the program nets of the other differential tests (their own
generator and runners, imported: tests/test_programs.py: its modes, its Variables over steps and its
transformations) once with the whole layer installed and once with none of it, and compares every
value and gradient bit for bit: same dtype, same shape, np.array_equal(equal_nan=True) and, for numbers, the
same bytes (so -0.0 against 0.0, or a NaN's sign, is a difference). Then each item alone (and every item but
one) against the plain code on a small fixed program set, the MINIGRAD_PLAIN switch in a fresh interpreter,
and the structure the relu item records.

``layer_off()`` runs a block with no item installed, ``only(names)`` with exactly those items; both put back
what was installed before. Every test starts with the whole layer installed (whatever MINIGRAD_PLAIN said),
so the 'fast' side of a comparison really is fast.

The nets' op tables bind ``mg.relu`` when their modules are imported (the fast relu, as minigrad installs the
layer on import); fast.uninstall() rebinds minigrad's own modules only, so here those tables look
``mg.relu`` up at each call (fixture ``_layer_on_and_live_relu``): the 'off' side then runs the plain relu.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings

import minigrad as mg
from minigrad import fast, interpreter
from minigrad.core import functional
from minigrad.core import ops as P
from minigrad.core.tensor import Tensor, TapeNode

import test_programs as D

T = sys.modules['minigrad.core.tensor']     # the module (mg.tensor is the function)

pytestmark = pytest.mark.filterwarnings('ignore::RuntimeWarning')     # inf/nan inputs on purpose

ALL = list(fast.ITEMS)
FAST_RELU = fast.ITEMS['relu'][0][2]
FAST_VALUES = {id(v): (item, attr) for item, entries in fast.ITEMS.items() for _, attr, v in entries}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # the checkout (parent of tests/)


# ====================================================================== switching the layer
def fast_in_place() -> set:
    """The items whose fast values are in place now: at their owners' attributes, or still named by a global
    of some minigrad module (install rebinds the modules that imported a replaced function by name)."""
    found = {item for item, entries in fast.ITEMS.items()
             for owner, attr, value in entries if getattr(owner, attr, None) is value}
    for name, mod in list(sys.modules.items()):
        if name.split('.')[0] == 'minigrad' and name != 'minigrad.fast' and mod is not None:
            for v in vars(mod).values():
                if id(v) in FAST_VALUES:
                    found.add(FAST_VALUES[id(v)][0])
    return found


@contextlib.contextmanager
def layer_off():
    """Run the block on the plain core: every item uninstalled, the previous ones installed again after."""
    previous = fast.installed()
    fast.uninstall()
    try:
        assert fast.installed() == []
        assert fast_in_place() == set(), f'uninstalled, but still in place: {fast_in_place()}'
        assert functional.relu is not FAST_RELU and mg.relu is not FAST_RELU
        yield
    finally:
        fast.uninstall()
        fast.install(previous)


@contextlib.contextmanager
def only(names):
    """Run the block with exactly the items `names` installed."""
    previous = fast.installed()
    fast.uninstall()
    fast.install(names)
    try:
        assert fast.installed() == [n for n in ALL if n in names]
        assert fast_in_place() == set(names)
        yield
    finally:
        fast.uninstall()
        fast.install(previous)


@pytest.fixture(autouse=True)
def _layer_on_and_live_relu(monkeypatch):
    previous = fast.installed()
    fast.install()
    monkeypatch.setattr(D.MgOps, 'relu', staticmethod(lambda a: mg.relu(a)))
    try:
        yield
    finally:
        fast.uninstall()
        fast.install(previous)


# ====================================================================== comparing bits
def _leaves(obj, path):
    """(path, leaf) pairs of a nested result: dicts, lists and tuples; Tensors give their arrays."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, f'{path}[{k!r}]')
    elif isinstance(obj, (list, tuple)):
        yield path, f'<{type(obj).__name__} of {len(obj)}>'
        for k, v in enumerate(obj):
            yield from _leaves(v, f'{path}[{k}]')
    elif isinstance(obj, Tensor):
        yield path, obj.data
    else:
        yield path, obj


def _bits(v):
    a = np.asarray(v)
    if a.dtype.kind in 'fc':
        return ' '.join(f'{b:0{2 * a.itemsize}x}' for b in np.atleast_1d(a).view(f'u{a.itemsize}')[:1])
    return ''


def _same(path, a, b):
    """None, or what differs between a (fast) and b (plain)."""
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        return None if a == b else f'{path}: fast {a!r}, plain {b!r}'
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == b.dtype and a.shape == b.shape and a.dtype.kind == 'c':      # as pairs of floats
        a, b = (np.ascontiguousarray(v).view(v.real.dtype) for v in (a, b))
    if a.dtype != b.dtype:
        return f'{path}: dtype fast {a.dtype}, plain {b.dtype}'
    if a.shape != b.shape:
        return f'{path}: shape fast {a.shape}, plain {b.shape}'
    if a.dtype.kind == 'O':
        return None if a.tolist() == b.tolist() else f'{path}: fast {a!r}, plain {b!r}'
    equal = np.array_equal(a, b, equal_nan=a.dtype.kind in 'fc')
    if equal and a.tobytes() == b.tobytes():
        return None
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    bad = np.flatnonzero(flat_a.view(f'u{a.itemsize}') != flat_b.view(f'u{a.itemsize}')) if a.dtype.kind in 'fc' \
        else np.flatnonzero(flat_a != flat_b)
    if not len(bad):
        return f'{path}: the bytes differ ({a.dtype} {a.shape})'
    k = int(bad[0])
    where = tuple(int(i) for i in np.unravel_index(k, a.shape)) if a.ndim else ()
    return (f'{path}: {len(bad)} of {a.size} {a.dtype} entries differ ({"values" if not equal else "bytes only"}), '
            f'first at {where}: fast {flat_a[k]!r} (bits {_bits(flat_a[k:k + 1])}), plain {flat_b[k]!r} '
            f'(bits {_bits(flat_b[k:k + 1])})')


def assert_same_bits(got_fast, got_plain, context=''):
    fa, pl = list(_leaves(got_fast, 'result')), list(_leaves(got_plain, 'result'))
    assert [p for p, _ in fa] == [p for p, _ in pl], f'the results have different structures\n{context}'
    bad = [why for (path, a), (_, b) in zip(fa, pl) if (why := _same(path, a, b))]
    assert not bad, f'fast and plain differ in {len(bad)} of {len(fa)} results:\n' + '\n'.join(bad[:12]) + \
        f'\n{context}'


def both_ways(fn, *args, context=''):
    """fn(*args) with the whole layer and with none of it; asserts the same bits; the fast result."""
    assert fast.installed() == ALL
    with np.errstate(all='ignore'):
        got_fast = fn(*args)
        with layer_off():
            got_plain = fn(*args)
    assert_same_bits(got_fast, got_plain, context)
    return got_fast


def attempt(fn, *args):
    """fn's result, or what it raised (a MinigradError): both sides must raise the same."""
    try:
        return fn(*args)
    except mg.MinigradError as e:
        return f'raised {type(e).__name__}: {e}'


def test_the_comparison_sees_the_sign_of_zero_and_of_nan():
    """The comparison itself: -0.0 vs 0.0, a NaN's sign bit, dtypes and shapes are all differences."""
    assert _same('x', np.float32(0.0), np.float32(-0.0)) is not None
    assert _same('x', np.array([np.nan]), -np.array([np.nan])) is not None
    assert _same('x', np.array([1.0], np.float32), np.array([1.0])) is not None
    assert _same('x', np.zeros((2, 1)), np.zeros((1, 2))) is not None
    assert _same('x', np.array([np.nan, -0.0]), np.array([np.nan, -0.0])) is None
    with pytest.raises(AssertionError, match='differ'):
        assert_same_bits({'a': [np.zeros(3)]}, {'a': [np.zeros(3) * -1]})


# ====================================================================== 2a. the differential net
def net_results(prog, arrays, new, backend='numpy'):
    """Everything the differential net computes for one program: the tape (values, gradients, second
    derivatives; at two input sets; with stand-ins), hand-built graphs through the reference interpreter,
    Session (mg.gradients inside) and mg.compile, unknown dims, mg.trace (both kinds) and mg.jit."""
    out = {'tape': attempt(D.run_tape, prog, arrays), 'tape, new inputs': attempt(D.run_tape, prog, new),
           'tape with stand-ins': attempt(D.run_tape_with_stand_ins, prog, arrays),
           'tape, no gradients': attempt(D.run_tape, prog, arrays, False)}
    b = D.Built(prog)
    out['interpreter'] = attempt(lambda: interpreter.evaluate(b.graph, b.fetches, {id(p): a for p, a in
                                                                                    zip(b.phs, arrays)}, {}))
    out['Session'] = attempt(lambda: mg.Session(b.graph).run(b.fetches, b.feeds(arrays)))
    program = mg.compile(b.fetches, b.phs, backend=backend)
    out['compile'] = attempt(lambda: D._copies(D._as_list(program(*arrays))))
    out['compile, new inputs'] = attempt(lambda: D._copies(D._as_list(program(*new))))
    if prog.none_mask:
        def none_dims():
            bn = D.Built(prog, none_dims=True)
            return mg.Session(bn.graph).run(bn.fetches, bn.feeds(arrays))
        out['Session, None dims'] = attempt(none_dims)
    fn = D.traced_fn(prog)
    if not prog.python_if:
        def symbolic():
            tr = mg.trace(fn, *arrays, symbolic=True)
            return [D._copies(tr(*arrays)), D._copies(tr(*new))]
        out['trace(symbolic=True)'] = attempt(symbolic)

    def recorded():
        rec = mg.trace(D.traced_fn(prog, grads=False), *arrays, symbolic=False)
        return [D._copies(rec(*xs)) for xs in ([arrays] if prog.control else [arrays, new])]
    out['trace(symbolic=False)'] = attempt(recorded)

    def jit():
        jf = mg.jit(fn)
        return [D._copies(jf(*xs)) for xs in (arrays, new, arrays)] + [f'trace_count {jf.trace_count}']
    out['jit'] = attempt(jit)
    return out


def check_net(case, backend='numpy'):
    prog, arrays, new = case
    both_ways(net_results, prog, arrays, new, backend, context=f'program:\n{prog.code(arrays)}')


@settings(max_examples=D.n_programs(80), **D.NET)
@given(case=D.program_and_inputs(dtypes=(np.float64,)))
def test_differential_net_float64_with_inf_nan_and_signed_zeros(case):
    check_net(case)


@settings(max_examples=D.n_programs(70), **D.NET)
@given(case=D.program_and_inputs(dtypes=(np.float32, np.int64)))
def test_differential_net_float32_and_int64(case):
    check_net(case)


@settings(max_examples=D.n_programs(40), **D.NET)
@given(case=D.program_and_inputs(dtypes=(np.float64, np.float32), control=('cond', 'while', 'pyif'),
                                 max_steps=4))
def test_differential_net_cond_while_and_python_if(case):
    check_net(case)


@settings(max_examples=D.n_programs(20), **D.NET)
@given(case=D.program_and_inputs(dtypes=(np.float64,), empty='always'))
def test_differential_net_empty_arrays(case):
    check_net(case)


@pytest.mark.skipif('numba' not in D.BACKENDS, reason='numba is not installed')
@settings(max_examples=D.n_programs(15), **D.NET)
@given(case=D.program_and_inputs(dtypes=(np.float32,), max_steps=4))
def test_differential_net_on_the_numba_backend(case, monkeypatch):
    monkeypatch.setenv('MINIGRAD_BACKEND', 'numba')
    check_net(case, 'numba')


# ====================================================================== 2b. the stateful net and optimizers
def stateful_results(case):
    """Variables assigned over D.STEPS steps: eager, the interpreter with a state dict, Session, compile."""
    run = D.StateRun(*case)
    out = {'eager': run.run_eager()}
    g, phs, fetches = run.graph()
    state = {}
    out['interpreter'] = [interpreter.evaluate(g, fetches, {id(p): a for p, a in zip(phs, f)}, state)
                          for f in run.feeds]
    sess = mg.Session(g, backend='numpy')
    out['Session'] = [sess.run(fetches, dict(zip(phs, f))) for f in run.feeds]
    p = mg.compile(fetches, phs, backend='numpy')
    out['compile'] = [D._copies(D._as_list(p(*f))) for f in run.feeds]
    return out


@settings(max_examples=D.n_programs(30), **D.NET)
@given(case=D.STATE_PROGRAMS)
def test_stateful_net(case):
    both_ways(stateful_results, case, context=f'program:\n{case[0].code(case[1])}')


@pytest.mark.parametrize('name', list(D.OPTIMIZERS))
def test_every_optimizer_eagerly_and_through_fit(name, monkeypatch):
    shape = D.OPT_SHAPES[list(D.OPTIMIZERS).index(name) % len(D.OPT_SHAPES)]
    both_ways(lambda: {'eager': D.train_eager(name, shape),
                       'fit': D.train_fit(name, shape, 'numpy', monkeypatch)}, context=f'{name} {shape}')


@contextlib.contextmanager
def spy(prim, log):
    """Log the arguments of prim's impl (whatever impl is installed) while the block runs."""
    impl = prim.impl

    def spied(*args, **params):
        log.append(args)
        return impl(*args, **params)
    prim.impl = spied
    try:
        yield
    finally:
        prim.impl = impl


MLP_CASES = {  # optimizer, batch, din, hidden, classes, dtype
    'sgd_momentum, batch 1 (a 128x64 outer product)': ('sgd_momentum', 1, 128, 64, 10, np.float32),
    'adam, batch 1 (a 128x64 outer product)': ('adam', 1, 128, 64, 10, np.float32),
    'sgd_momentum, batch 32 (relu of 4096)': ('sgd_momentum', 32, 12, 128, 5, np.float32),
    'adam, batch 32 (relu of 4096)': ('adam', 32, 12, 128, 5, np.float32),
    'adam, batch 1, float64': ('adam', 1, 96, 48, 4, np.float64),
}


def mlp_steps(opt, batch, din, hidden, classes, dtype, steps=3):
    """A few optimizer steps of Linear-ReLU-Linear with cross-entropy (log_softmax): every loss, logit and
    gradient on the way, and the parameters after each step."""
    mg.manual_seed(0)
    model = mg.nn.Sequential(mg.nn.Linear(din, hidden, dtype=dtype), mg.nn.ReLU(),
                             mg.nn.Linear(hidden, classes, dtype=dtype))
    params = model.parameters()
    optimizer = mg.optim.SGD(params, lr=0.05, momentum=0.9) if opt == 'sgd_momentum' else \
        mg.optim.Adam(params, lr=0.01)
    rs = np.random.default_rng(batch * 1000 + din)
    xs = rs.standard_normal((steps, batch, din)).astype(dtype)
    xs[:, :, :3] = [0.0, -0.0, 0.0]           # signed zeros into the first layer (and its outer product)
    ys = rs.integers(0, classes, (steps, batch))
    loss_fn, out = mg.nn.CrossEntropyLoss(), []
    for t in range(steps):
        optimizer.zero_grad()
        h = model[1](model[0](mg.tensor(xs[t])))
        logits = model[2](h)
        loss = loss_fn(logits, mg.tensor(ys[t]))
        manual = -(mg.log_softmax(logits, axis=-1) * np.eye(classes, dtype=dtype)[ys[t]]).sum(axis=-1).mean()
        loss.backward()
        out.append({'h': np.array(h.data), 'logits': np.array(logits.data), 'loss': np.array(loss.data),
                    'manual loss': np.array(manual.data), 'grads': [np.array(p.grad.data) for p in params]})
        optimizer.step()
        out.append([np.array(p.data) for p in params])
    return out


@pytest.mark.parametrize('case', list(MLP_CASES))
def test_optimizer_steps_on_a_relu_mlp_with_cross_entropy(case):
    opt, batch, din, hidden, classes, dtype = MLP_CASES[case]
    matmuls, wheres = [], []
    with spy(P.matmul, matmuls), spy(P.where, wheres):
        both_ways(mlp_steps, opt, batch, din, hidden, classes, dtype, context=case)
    # the fast paths really ran (each spy logged both runs; the shapes are the same in both)
    if batch == 1:
        assert any(np.ndim(a) > 1 and np.ndim(b) > 1 and np.shape(a)[-1] == 1 == np.shape(b)[-2]
                   and np.shape(a)[-2] * np.shape(b)[-1] >= 4096 for a, b in matmuls), 'no K=1 outer product'
    else:
        assert any(type(y) is int and y == 0 and np.size(x) >= 2048 and np.shape(c) == np.shape(x)
                   for c, x, y in wheres), "no where(c, x, 0) of 2048 or more"


# ====================================================================== 2c. the composition net
@pytest.mark.skipif(D.torch is None, reason='the transformation modes need torch (their references)')
@settings(max_examples=D.n_programs(3), **D.NET)
@given(case=D.program_and_inputs(dtypes=(np.float64,), max_steps=5, **D.SMOOTH))
def test_composition_net_every_mode(case):
    """Every transformation (and transformation of transformations) of tests/test_programs.py's TRANSFORMS:
    backward, mg.gradients, jvp, jacfwd, jacrev, jit, trace, grad, vmap, hessian, ... of a program of the net."""
    fn = D.Fn(case[0], case[1])
    both_ways(lambda: {mode: attempt(lambda: D._tnp(D.TRANSFORMS[mode][0](fn, fn.x))) for mode in D.TRANSFORMS},
              context=repr(fn))


@pytest.mark.skipif(D.torch is None, reason='the transformation modes need torch (their references)')
def test_composition_net_control_flow_and_grad_modes():
    rng = np.random.default_rng(5)
    x, v = rng.uniform(0.1, 1, 3), rng.uniform(-1, 1, 3)

    def run():
        out = {}
        for ctl in D.CONTROL_FNS:
            for wrap in D.WRAP:
                for sign in (1.0, -1.0):
                    f = D.WRAP[wrap](lambda a, ctl=ctl: D.CONTROL_FNS[ctl](mg, a), x * sign)
                    out[ctl, wrap, sign] = [D._tnp(mg.jvp(f, (mg.tensor(x * sign),), (mg.tensor(v),))[1]),
                                            D._tnp(mg.jacfwd(f)(mg.tensor(x * sign))),
                                            D._tnp(mg.jacrev(f)(mg.tensor(x * sign)))]
        for mode, g in D.GRAD_OF.items():
            out[mode] = D._tnp(g(np.array([0.3, -0.7, 1.1])))
        return out
    both_ways(run)


# ====================================================================== 2d. the fast paths' own inputs
SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, -5e-324, 1e-40, -1e-40, 1.0, -1.0])


def _special_array(shape, dtype, seed):
    rs = np.random.default_rng(seed)
    a = rs.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    k = rs.choice(flat.size, size=min(flat.size, 4 * len(SPECIAL)), replace=False)
    with np.errstate(all='ignore'):
        flat[k] = np.resize(SPECIAL.astype(dtype), len(k))
    return a


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(64, 64), (2048,), (3, 700), (10, 7)], ids=lambda s: 'x'.join(map(str, s)))
def test_relu_big_and_small_with_nan_inf_and_signed_zeros(shape, dtype):
    """relu (the relu item, where_zero's big path at 2048 elements and up), forward, backward, create_graph
    second derivatives, a transposed (non-contiguous) input, and relu in Session and mg.jit."""
    a = _special_array(shape, dtype, 1)
    w = _special_array(shape, dtype, 2)       # nan, inf and -0.0 in the cotangent too
    u = _special_array(shape, dtype, 3)

    def run():
        x = mg.tensor(a, requires_grad=True)
        y = mg.relu(x)
        yt = mg.relu(x.T)
        loss = (y * y * w).sum() + (yt * 0.5).sum()
        loss.backward(create_graph=True)
        g1 = x.grad
        x.grad = None
        (g1 * u).sum().backward()
        x2 = mg.tensor(a, requires_grad=True)
        mg.relu(x2).backward(gradient=w)           # where(c, g, 0) of the cotangent itself
        g = mg.Graph()
        with g.as_default():
            p = mg.placeholder(dtype, shape)
            r = mg.relu(p)
            dp, = mg.gradients((r * w).sum(), [p])
        return {'relu': y, 'relu(x.T)': yt, 'loss': loss, 'grad': g1, 'grad of grad': x.grad, 'vjp': x2.grad,
                'no grad': mg.relu(mg.tensor(a)), 'method': mg.tensor(a).relu(),
                'Session': mg.Session(g).run([r, dp], {p: a}), 'jit': mg.jit(mg.relu)(a),
                'nn.ReLU': mg.nn.ReLU()(mg.tensor(a, requires_grad=True))}
    out = both_ways(run, context=f'relu of {shape} {np.dtype(dtype)}')
    assert not np.signbit(out['relu'].data).any()


CONSTANTS = [0.0, -0.0, 1.5, -2.25, 0.1, 1e-8, 3e38, 1e300, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_subtracting_python_and_numpy_scalars_and_tensors(dtype):
    """The operators item's x - c = x + (-c) (and -x, c - x, x - y): Python floats and ints, numpy float32 and
    float64 scalars (float32 - np.float64 is float64, NEP 50), special constants; values and gradients."""
    a = _special_array((5, 6), dtype, 4)
    b32 = _special_array((6,), np.float32, 5)

    def run():
        out = {}
        for c in CONSTANTS + [3, -7, 0]:
            kinds = [('python', c)] + ([] if isinstance(c, int) else
                                       [('float32', np.float32(c)), ('float64', np.float64(c))])
            for kind, k in kinds:
                x = mg.tensor(a, requires_grad=True)
                y = x - k
                z = k - x
                (y * z).sum().backward()
                out[f'{kind} {c!r}'] = [y, z, x.grad, str(y.dtype), str(z.dtype)]
        x = mg.tensor(a, requires_grad=True)
        y = mg.tensor(b32, requires_grad=True)
        d, n = x - y, -x
        (d * n).sum().backward(create_graph=True)
        gx, gy = x.grad, y.grad
        x.grad = y.grad = None
        (gx.sum() + gy.sum()).backward()
        out['tensors'] = [d, n, gx, gy, x.grad, y.grad, x - x, y - x, mg.tensor(a) - mg.tensor(a).sum()]
        return out
    both_ways(run, context=f'subtraction, {np.dtype(dtype)} tensors')


@pytest.mark.parametrize('n,m', [(64, 64), (128, 40), (3, 5000), (16, 16)])
def test_outer_products_k1(n, m):
    """matmul with inner size 1 (the outer_matmul item from 4096 elements): values with -0.0, nan and inf,
    batched operands, mixed dtypes, gradients, and the compiled matmul."""
    a = _special_array((n, 1), np.float32, 6)
    b = _special_array((1, m), np.float32, 7)
    b64 = _special_array((1, m), np.float64, 8)
    batch = _special_array((2, n, 1), np.float32, 9)

    def run():
        x, y = mg.tensor(a, requires_grad=True), mg.tensor(b, requires_grad=True)
        o = x @ y
        (o * o).sum().backward()
        return {'x @ y': o, 'grads': [x.grad, y.grad], 'mixed': mg.tensor(a) @ mg.tensor(b64),
                'batched': mg.tensor(batch) @ mg.tensor(b), 'matmul': mg.matmul(a, b), 'jit': mg.jit(mg.matmul)(a, b),
                'ints': mg.tensor(np.arange(n).reshape(n, 1)) @ mg.tensor(np.arange(m).reshape(1, m) - 3),
                'x^T x': mg.tensor(a.T) @ mg.tensor(a), 'transposed': mg.tensor(b.T) @ mg.tensor(a.T)}
    both_ways(run, context=f'({n}, 1) @ (1, {m})')


# ====================================================================== 3. each item alone
def fixed_programs(create_graph):
    """The small fixed set: relu (small and 2048+), matmul (K=4 and a K=1 outer product of 5120), a
    broadcasting add, subtraction of floats and numpy scalars, log_softmax, leaves used twice (x * x + x, and
    p + q, whose add hands one cotangent array to two leaves), backward and, with create_graph, gradients of
    gradients. Also which gradient arrays share memory (with each other or a leaf's data): none may."""
    rs = np.random.default_rng(11)
    x = mg.tensor(_special_array((3, 4), np.float32, 12), requires_grad=True)
    w = mg.tensor(rs.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    b = mg.tensor(rs.standard_normal(5).astype(np.float32), requires_grad=True)
    u = mg.tensor(_special_array((64, 1), np.float64, 13), requires_grad=True)
    v = mg.tensor(rs.standard_normal((1, 80)), requires_grad=True)
    big = mg.tensor(_special_array((48, 64), np.float32, 14), requires_grad=True)
    p = mg.tensor(rs.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    q = mg.tensor(rs.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    h = mg.relu(x @ w + b)
    lp = mg.log_softmax((h - 0.25) - np.float32(1.5), axis=-1)
    o = mg.relu(u @ v - np.float64(0.5))
    rb = mg.relu(big - 1.0)
    twice = x * x + x
    loss = (lp * np.arange(5, dtype=np.float32)).sum() + (o * o).sum() * 0.5 + (rb * big).sum() + twice.sum() \
        - (b - b.sum()).sum() + ((p + q) * x).sum()
    loss.backward(create_graph=create_graph)
    leaves = [x, w, b, u, v, big, p, q]
    out = {'values': [h, lp, o, rb, twice, loss], 'grads': [t.grad for t in leaves],
           'shared': [[np.shares_memory(s.grad.data, t.data if s is t else t.grad.data) for t in leaves]
                      for s in leaves]}
    if create_graph:
        g = [t.grad for t in leaves]
        for t in leaves:
            t.grad = None
        total = (g[0] * g[0]).sum()
        for gi in g[1:]:
            total = total + (gi * gi).sum()
        total.backward()
        out['grads2'] = [t.grad for t in leaves]
    return out


def _fixed():
    return {'backward': fixed_programs(False), 'create_graph': fixed_programs(True)}


@pytest.fixture(scope='module')
def plain_fixed():
    """The fixed programs' results with the layer off (computed once for the item tests)."""
    previous = fast.installed()
    try:
        with layer_off(), np.errstate(all='ignore'):
            return _fixed()
    finally:
        fast.uninstall()
        fast.install(previous)


@pytest.mark.parametrize('item', ALL)
def test_each_item_alone_gives_the_plain_bits(item, plain_fixed):
    with only([item]), np.errstate(all='ignore'):
        got = _fixed()
    assert_same_bits(got, plain_fixed, f'only {item!r} installed')


@pytest.mark.parametrize('item', ALL)
def test_every_item_but_one_gives_the_plain_bits(item, plain_fixed):
    with only([n for n in ALL if n != item]), np.errstate(all='ignore'):
        got = _fixed()
    assert_same_bits(got, plain_fixed, f'every item but {item!r} installed')


def test_the_whole_layer_gives_the_plain_bits_on_the_fixed_programs(plain_fixed):
    assert fast.installed() == ALL
    with np.errstate(all='ignore'):
        assert_same_bits(_fixed(), plain_fixed, 'every item installed')


# ====================================================================== 4. the switch
def _import_minigrad_with(plain):
    env = {k: v for k, v in os.environ.items() if k != 'MINIGRAD_PLAIN'}
    env['PYTHONPATH'] = ROOT
    if plain is not None:
        env['MINIGRAD_PLAIN'] = plain
    code = ('import json, sys\n'
            'try:\n'
            '    import minigrad\n'
            'except Exception as e:\n'
            "    errors = sys.modules.get('minigrad.core.errors')\n"
            "    print(json.dumps({'error': type(e).__name__, 'message': str(e),\n"
            "                      'minigrad_error': errors is not None and isinstance(e, errors.MinigradError)}))\n"
            'else:\n'
            "    print(json.dumps({'installed': minigrad.fast.installed(), 'file': minigrad.__file__}))\n")
    r = subprocess.run([sys.executable, '-c', code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_minigrad_plain_switch_in_a_fresh_interpreter():
    got = _import_minigrad_with('1')
    assert got['file'].startswith(os.path.join(ROOT, 'minigrad'))       # this checkout's minigrad
    assert got['installed'] == []
    assert _import_minigrad_with('relu,apply')['installed'] == [n for n in ALL if n not in ('relu', 'apply')]
    assert _import_minigrad_with(None)['installed'] == ALL
    bad = _import_minigrad_with('relu,no_such_item')
    assert bad['error'] == 'MinigradError' and bad['minigrad_error'], bad
    assert 'no_such_item' in bad['message'] and 'relu' not in bad['message'].split(';')[0], bad['message']


def test_install_of_an_unknown_item_names_it():
    with pytest.raises(mg.MinigradError, match='no_such_item'):
        fast.install(['no_such_item'])
    assert fast.installed() == ALL


# ====================================================================== 5. structure
def _tape_nodes(t):
    nodes, stack = [], [t.grad_fn]
    while stack:
        n = stack.pop()
        if type(n) is TapeNode and all(n is not m for m in nodes):
            nodes.append(n)
            stack.extend(n.parents)
    return nodes


def _relu_recorded(monkeypatch):
    ops, eager = [], T.eager_apply
    monkeypatch.setattr(T, 'eager_apply', lambda prim, args, params: ops.append(prim.name) or eager(prim, args, params))
    try:
        x = mg.tensor([-1.0, 0.0, float('nan'), 2.0, -0.0], requires_grad=True)
        y = mg.relu(x)
    finally:
        monkeypatch.setattr(T, 'eager_apply', eager)
    return x, y, ops


@pytest.mark.parametrize('others', ['every item', 'relu alone'])
def test_relu_records_one_where_node_fast_and_less_then_where_plain(others, monkeypatch):
    with (contextlib.nullcontext() if others == 'every item' else only(['relu'])):
        x, y, ops = _relu_recorded(monkeypatch)
        assert functional.relu is FAST_RELU and mg.relu is FAST_RELU
    nodes = _tape_nodes(y)
    assert ops == [] and len(nodes) == 1 and nodes[0].prim.name == 'where'
    assert nodes[0].parents == (None, x, None) and nodes[0].parents[1] is x
    with layer_off():
        x, y, ops = _relu_recorded(monkeypatch)
    nodes = _tape_nodes(y)
    assert ops == ['less', 'where'] and len(nodes) == 1 and nodes[0].prim.name == 'where'
    assert nodes[0].parents == (None, x, None) and nodes[0].parents[1] is x


def test_uninstall_then_install_restores_the_same_objects():
    by_owner = {(item, attr): getattr(owner, attr) for item, entries in fast.ITEMS.items()
                for owner, attr, _ in entries}
    add, relu, mg_relu, apply_ = vars(Tensor)['__add__'], functional.relu, mg.relu, sys.modules['minigrad.core.primitive'].apply
    globals_before = {(name, k): v for name, mod in list(sys.modules.items())
                      if name.split('.')[0] == 'minigrad' and name != 'minigrad.fast' and mod is not None
                      for k, v in vars(mod).items() if id(v) in FAST_VALUES}
    assert relu is FAST_RELU and mg_relu is FAST_RELU and globals_before
    fast.uninstall()
    try:
        assert fast.installed() == [] and fast_in_place() == set()
        assert '__add__' not in vars(Tensor) and Tensor.__add__ is not add     # OpsMixin's again
        assert functional.relu is not FAST_RELU and mg.relu is functional.relu
    finally:
        fast.install()
    assert fast.installed() == ALL
    assert vars(Tensor)['__add__'] is add and functional.relu is relu and mg.relu is mg_relu is FAST_RELU
    assert sys.modules['minigrad.core.primitive'].apply is apply_
    for (item, attr), value in by_owner.items():
        owner = next(o for o, a, _ in fast.ITEMS[item] if a == attr)
        assert getattr(owner, attr) is value, (item, attr)
    for (name, k), v in globals_before.items():
        assert vars(sys.modules[name])[k] is v, (name, k)
