"""Numerics without a tail: sigmoid's relative precision, numpy's result dtypes, numpy 2's exact Python ints in
graphs, Variables of any layout, float16 and damaged kernel caches on the numba backend. One test per defect,
each against numpy or PyTorch where they define the answer."""
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.compiler import kernels
from minigrad.core.errors import MinigradError

needs_numba = pytest.mark.skipif(not kernels.available(), reason='numba is not installed')
BACKENDS = ['numpy', 'numba'] if kernels.available() else ['numpy']
# sigmoid's error against the correctly rounded value, max ulps (scripts/ulp_error.py --only sigmoid measures
# every float32 and random float64s: 4 and 2 on numpy's exp, 2 and 2 in loop kernels; sigmoid's docstring says so)
SIGMOID_ULPS = {np.float32: 4, np.float64: 2}


def ulps(got, ref):
    """Distance in ulps (adjacent floats: 1; -0.0 and 0.0: 0)."""
    it = np.int32 if got.dtype == np.float32 else np.int64
    def ordered(v):
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, -(i & np.iinfo(it).max), i)
    return np.abs(ordered(got) - ordered(ref))


def compiled(fn, *arrays, backend='numpy'):
    """fn of placeholders shaped like `arrays`, compiled and run on them: (results, program)."""
    g = mg.Graph()
    with g.as_default():
        ps = [mg.placeholder(a.dtype, a.shape, name=f'p{k}') for k, a in enumerate(arrays)]
        out = fn(*ps)
    prog = mg.compile(out, ps, backend=backend)
    return prog(*arrays), prog


def sigmoid_everywhere(x):
    """{mode: sigmoid(x)} on the tape, the graph interpreter and each backend (x * 1 keeps a kernel)."""
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(x.dtype, x.shape, name='x')
        y = mg.sigmoid(p)
    out = {'tape': mg.sigmoid(mg.tensor(x)).numpy(), 'session': mg.Session(g).run(y, {p: x})}
    for be in BACKENDS:
        out[be] = compiled(lambda a, one: mg.sigmoid(a * one), x, np.ones_like(x), backend=be)[0]
    return out


def test_sigmoid_keeps_relative_precision_for_negative_inputs():
    torch = pytest.importorskip('torch')
    x32 = np.array([-20.0, -17.0, -87.0, -0.0, 0.0, 3.0, 20.0, np.inf, -np.inf, np.nan], np.float32)
    x64 = np.array([-40.0, -700.0, -745.0, 1e-300, 37.0, 40.0], np.float64)
    for x in (x32, x64):
        want = torch.sigmoid(torch.from_numpy(x)).numpy()
        for mode, got in sigmoid_everywhere(x).items():
            assert got.dtype == x.dtype, mode
            assert np.array_equal(np.isnan(got), np.isnan(want)), mode
            fin = ~np.isnan(want)
            # torch is within a few ulps too (it flushes subnormal results, sigmoid(-100), to 0)
            assert ulps(got[fin], want[fin]).max() <= 4, (mode, got, want)
    assert mg.sigmoid(mg.tensor([-20.0])).item() == pytest.approx(2.0611537e-9, rel=1e-6)   # was 0
    # -log(sigmoid(x)) on the tape and in a graph: torch gives 77 and gradient -1 (it was inf and nan)
    t = torch.tensor([-77.0, -5.0, 0.0, 30.0], requires_grad=True)
    (-torch.log(torch.sigmoid(t))).sum().backward()
    x = mg.tensor([-77.0, -5.0, 0.0, 30.0], requires_grad=True)
    loss = -mg.log(mg.sigmoid(x))
    loss.sum().backward()
    np.testing.assert_allclose(loss.numpy(), (-torch.log(torch.sigmoid(t))).detach().numpy(), rtol=1e-6)
    # (at 30 the exact gradient -exp(-30) = -9.4e-14, which torch's s * (1 - s) rounds to -0.0)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-12)
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, (4,), name='p')
        y = (-mg.log(mg.sigmoid(p))).sum()
        (gp,) = mg.gradients(y, [p])
    for be in BACKENDS:
        v, gv = mg.compile([y, gp], [p], backend=be)(x.numpy())
        assert np.isfinite(v) and np.isfinite(gv).all(), be
        np.testing.assert_allclose(gv, t.grad.numpy(), rtol=1e-6, atol=1e-12)
    # the documented bounds, over a sample: every mode, against the correctly rounded value
    rng = np.random.default_rng(3)
    for dt, wide in ((np.float32, np.float64), (np.float64, np.longdouble)):
        bits = rng.integers(0, 2 ** 64, 1 << 17, dtype=np.uint64).astype(np.uint32 if dt == np.float32 else np.uint64)
        x = np.concatenate([bits.view(dt), np.linspace(-110, 40, 1 << 17, dtype=dt),
                            rng.uniform(-1, 1, 1 << 15).astype(dt) * 10.0 ** rng.uniform(-30, 2, 1 << 15).astype(dt)])
        x = x[np.isfinite(x)]
        with np.errstate(all='ignore'):
            true = (1 / (1 + np.exp(-x.astype(wide)))).astype(dt)
        for mode, got in sigmoid_everywhere(x).items():
            assert ulps(got, true).max() <= SIGMOID_ULPS[dt], (mode, dt)


def test_result_dtypes_follow_numpy():
    b = np.array([True, False, True])
    # numpy's ** squares by np.square: bool ** 2 is int8 (np.power(bool, 2) stays int64, and so does mg.power)
    assert (b ** 2).dtype == np.int8
    assert (mg.tensor(b) ** 2).dtype == np.int8 and (mg.tensor(b) ** 2).tolist() == (b ** 2).tolist()
    assert mg.power(mg.tensor(b), 2).dtype == np.power(b, 2).dtype
    assert (mg.tensor(b) ** 3).dtype == (b ** 3).dtype and (2 ** mg.tensor(b)).dtype == (2 ** b).dtype
    assert compiled(lambda p: p ** 2, b)[0].dtype == np.int8
    # sigmoid of integers in the dtype numpy's exp (and tanh) gives them
    for dt in (np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64):
        a = np.array([1, 0, 1], dt)
        want = 1 / (1 + np.exp(-a.astype(np.float64)))
        for got in (mg.sigmoid(mg.tensor(a)).numpy(), compiled(mg.sigmoid, a)[0]):
            assert got.dtype == np.exp(a).dtype == mg.tanh(mg.tensor(a)).dtype, (dt, got.dtype)
            np.testing.assert_allclose(got, want, rtol=1e-3)


def test_graphs_divide_and_compare_python_ints_out_of_range_as_numpy_2():
    """numpy 2 (NEP 50) divides and compares a Python int out of the array's range exactly; a graph refused."""
    i8, u8 = np.array([1, -2, 127], np.int8), np.array([0, 7, 255], np.uint8)
    i64, u64 = np.array([2 ** 63 - 1, -2 ** 63, 0]), np.array([2 ** 64 - 1, 0, 5], np.uint64)
    cases = [(lambda a: a / 300, i8), (lambda a: 300 / a, i8), (lambda a: a < 300, i8), (lambda a: a > 300, i8),
             (lambda a: a <= -129, i8), (lambda a: a >= -129, i8), (lambda a: a == 300, i8),
             (lambda a: a != 300, i8), (lambda a: a / -1, u8), (lambda a: a < -1, u8), (lambda a: a > -1, u8),
             (lambda a: a < 2 ** 63, i64), (lambda a: a > -2 ** 63 - 1, i64), (lambda a: a < 2 ** 64, u64),
             (lambda a: a == 2 ** 64, u64), (lambda a: a < 2 ** 70, i8), (lambda a: a / 2 ** 70, i64)]
    for f, a in cases:
        with np.errstate(all='ignore'):
            want = f(a)
        got = [f(mg.tensor(a)).numpy()]
        g = mg.Graph()
        with g.as_default():
            p = mg.placeholder(a.dtype, a.shape, name='p')
            y = f(p)
        got.append(mg.Session(g).run(y, {p: a}))
        got += [mg.compile(y, [p], backend=be)(a) for be in BACKENDS]
        for r in got:
            assert r.dtype == want.dtype and np.array_equal(r, want), (a.dtype, want, r)
    # inside a loop kernel too (int64 beside 2**63, a uint64, is compared exactly, as numpy does, not in float64)
    for be in BACKENDS:
        got = compiled(lambda p, q: mg.where(p < 2 ** 63, 1.0, 2.0) * q, i64, np.ones(3), backend=be)[0]
        assert got.tolist() == [1.0, 1.0, 1.0], be
    for name, fn in (('divide', mg.divide), ('less', mg.less), ('greater', mg.greater), ('equal', mg.equal)):
        want = getattr(np, name if name != 'divide' else 'true_divide')(i8, 300)
        assert np.array_equal(compiled(lambda p: fn(p, 300), i8)[0], want), name
    with mg.Graph().as_default():            # where numpy 2 refuses, so do graphs
        p = mg.placeholder(np.int8, (3,), name='p')
        for f in (lambda: p + 300, lambda: p * 300, lambda: mg.maximum(p, 300)):
            with pytest.raises(MinigradError, match='out of range'):
                f()


@needs_numba
def test_a_variable_assigned_a_transposed_value_runs_again_on_numba():
    def program(backend, init):
        g = mg.Graph()
        with g.as_default():
            v0 = mg.Variable(init, name='v0')
            v1 = v0 / (v0 * v0 + 0.5)
            a = v0.assign(v1.T)
        return mg.compile([v1, a], [], backend=backend)
    init = np.arange(27, dtype=np.float32).reshape(3, 3, 3) / 10
    for start in (init, np.asfortranarray(init)):
        ref, prog = program('numpy', start), program('numba', start)
        for _ in range(3):
            for r, got in zip(ref(), prog()):
                assert np.array_equal(r, got)
        assert all(s.flags.c_contiguous for s in prog.state)
        prog.state[0] = ref.state[0] = np.asfortranarray(ref.state[0])      # state set from outside, F order
        assert np.array_equal(prog()[0], ref()[0])


@needs_numba
def test_float16_on_numba_computes_or_declines_per_kernel():
    h = np.array([0.5, -1.0, 2.0, -3.0], np.float16)
    b = np.array([True, False, True, False])
    cases = [(lambda x: x * x + 1.0, h), (lambda x: mg.exp(x * x), h), (lambda x: mg.log(x * x) * 2.0, h),
             (lambda x: mg.tanh(x) + x, h), (lambda x: mg.sigmoid(x * 2.0), h), (lambda x: mg.exp(x) * 2.0, b),
             (lambda x: mg.log(x) * 2.0, b), (lambda x: mg.tanh(x) * 2.0, b), (lambda x: mg.sigmoid(x) * 2.0, b),
             (lambda x: mg.exp(x) * 2.0, h.astype(np.int8)),
             (lambda x: x * np.float16(2) + 1.0, h.astype(np.float32))]
    for f, a in cases:
        with np.errstate(all='ignore'):
            want = compiled(f, a, backend='numpy')[0]
            got, prog = compiled(f, a, backend='numba')
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), (got, want)
        assert any('float16' in why for why in prog.stats['declined']['fuse'])
    # a float32 group beside float16 ops still runs as a kernel
    f = lambda x, y: mg.tanh(x * 2.0 + 1.0) * x + mg.cast(y * y + 1.0, mg.float32)       # noqa: E731
    got, prog = compiled(f, np.ones(4, np.float32), h, backend='numba')
    assert prog.stats['kernels'] == 1       # (its tanh is the kernels' approximation: a few ulps from numpy's)
    np.testing.assert_allclose(got, compiled(f, np.ones(4, np.float32), h)[0], rtol=1e-6)


@needs_numba
def test_a_damaged_kernel_cache_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv('MINIGRAD_CACHE_DIR', str(tmp_path))
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    fn = lambda a: mg.tanh(a * 1.25 + 0.5) * a                                  # noqa: E731
    want, prog = compiled(fn, x, backend='numba')
    (kern,) = prog.kernels
    cache = tmp_path / 'kernels' / '__pycache__'
    assert kern.origin == 'compiled' and len(list(cache.glob('*.nbi'))) == len(list(cache.glob('*.nbc'))) == 1
    damages = [(cache, '*.nbi', lambda b: b[:40]), (cache, '*.nbc', lambda b: b[:100]),
               (cache, '*.nbc', lambda b: b[:16] + b'\0' * 64 + b[80:]), (cache.parent, 'k_*.py', lambda b: b[:300])]
    for where, pattern, damage in damages:         # numba's index, its data (cut, overwritten), the kernel file
        (path,) = where.glob(pattern)
        path.write_bytes(damage(path.read_bytes()))
        kernels._LOADED.clear()          # as a later process: nothing loaded in memory
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            got, prog = compiled(fn, x, backend='numba')
        assert np.array_equal(got, want), path
        assert any('damaged' in str(w.message) for w in caught), path
        assert list(prog.stats['kernel_cache_repaired']) == [kern.path]
        kernels._LOADED.clear()
        with warnings.catch_warnings():
            warnings.simplefilter('error')      # repaired for good: no warning the next time
            got, prog = compiled(fn, x, backend='numba')
        assert np.array_equal(got, want) and prog.stats['kernel_cache_repaired'] == {}
