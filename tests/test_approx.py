"""Issue 37: tanh, exp and log inside fused loop kernels, by vectorisable approximations
(minigrad/compiler/approx.py): groups no longer stop at them, their error is bounded in ulps,
special values match numpy exactly, program.stats names the approximation, and the numpy
backend keeps numpy's own functions. scripts/ulp_error.py measures every float32 input."""
import numpy as np
import pytest

import minigrad as mg

needs_numba = pytest.mark.skipif(not mg.compiler.kernels.available(), reason='numba is not installed')

# max ulps: float32 against the correctly rounded value (numpy's float64 result rounded), float64 against numpy
BOUND = {('tanh', 'float32'): 5, ('exp', 'float32'): 1, ('log', 'float32'): 1,
         ('tanh', 'float64'): 2, ('exp', 'float64'): 2, ('log', 'float64'): 2}
SPECIAL = [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1.0, -1.0]
F32_EDGES = [1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38, -1.1754944e-38, 3.4028235e38, -3.4028235e38,
             88.72283, 88.72284, 89.0, -87.33654, -103.27893, -103.97208, -104.0, -150.0, 7.9053111, -7.9053111,
             9.0, 0.0004, -0.0004, 0.00039999, 0.625, 0.7071067, 1.4142135]
F64_EDGES = [5e-324, -5e-324, 2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308,
             709.782712893384, 709.7827128933841, 710.0, -708.3964185322641, -745.1332191019411,
             -745.1332191019412, -746.0, 0.625, -0.625, 20.0, -20.0, 1e-300, 0.7071067811865476]


def kernel_program(name, dtype, n):
    """`name` applied in a loop kernel (times a second input, so the group is a real kernel)."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(dtype, (n,), name='x')
        one = mg.placeholder(dtype, (n,), name='one')
        y = getattr(mg, name)(x * one)
    return mg.compile(y, [x, one], backend='numba')


def run(name, x):
    prog = kernel_program(name, x.dtype, x.size)
    assert prog.stats['kernels'] == 1
    return prog(x, np.ones_like(x))


def ulps(got, ref):
    """Distance in ulps between finite values (adjacent floats: 1; -0.0 and 0.0: 0)."""
    it = np.int32 if got.dtype == np.float32 else np.int64
    def ordered(v):
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, -(i & np.iinfo(it).max), i)
    return np.abs(ordered(got) - ordered(ref))


def assert_specials_match(got, ref):
    """nan where numpy has nan; elsewhere inf, 0 and their signs exactly as numpy."""
    assert np.array_equal(np.isnan(got), np.isnan(ref)), (got, ref)
    ok = ~np.isnan(ref) & (np.isinf(ref) | (ref == 0) | np.isinf(got) | (got == 0))
    assert np.array_equal(got[ok], ref[ok]) and np.array_equal(np.signbit(got[ok]), np.signbit(ref[ok])), \
        (got[ok], ref[ok])


@needs_numba
@pytest.mark.parametrize('name', ['tanh', 'exp', 'log'])
def test_float32_ulps_over_a_large_sample(name):
    rng = np.random.default_rng(37)
    bits = np.concatenate([np.arange(0, 2 ** 32, 2 ** 12 + 1, dtype=np.uint64).astype(np.uint32),
                           rng.integers(0, 2 ** 32, 1 << 19, dtype=np.uint64).astype(np.uint32)])
    x = np.concatenate([bits.view(np.float32), np.array(SPECIAL + F32_EDGES, np.float32),
                        rng.standard_normal(1 << 18).astype(np.float32) * 10])
    with np.errstate(all='ignore'):
        got, true, ref = run(name, x), getattr(np, name)(x.astype(np.float64)).astype(np.float32), getattr(np, name)(x)
    assert_specials_match(got, ref)
    fin = np.isfinite(got) & np.isfinite(true)
    assert ulps(got[fin], true[fin]).max() <= BOUND[name, 'float32']


@needs_numba
@pytest.mark.parametrize('name', ['tanh', 'exp', 'log'])
def test_float64_ulps_over_a_random_sample(name):
    rng = np.random.default_rng(38)
    spread = {'tanh': 25.0, 'exp': 745.0, 'log': 1e6}[name]
    x = np.concatenate([rng.integers(0, 2 ** 64, 1 << 18, dtype=np.uint64).view(np.float64),
                        rng.uniform(-spread, spread, 1 << 18), np.array(SPECIAL + F64_EDGES),
                        rng.uniform(-1, 1, 1 << 16) * 10.0 ** rng.uniform(-30, 3, 1 << 16)])
    with np.errstate(all='ignore'):
        got, ref = run(name, x), getattr(np, name)(x)
    assert_specials_match(got, ref)
    fin = np.isfinite(got) & np.isfinite(ref)
    assert ulps(got[fin], ref[fin]).max() <= BOUND[name, 'float64']


@needs_numba
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_special_values_match_numpy_exactly(dtype):
    x = np.array(SPECIAL + [np.finfo(dtype).smallest_subnormal, -np.finfo(dtype).smallest_subnormal,
                            np.finfo(dtype).tiny, np.finfo(dtype).max, -np.finfo(dtype).max], dtype)
    for name in ('tanh', 'exp', 'log'):
        with np.errstate(all='ignore'):
            got, ref = run(name, x), getattr(np, name)(x)
        assert_specials_match(got, ref)
    with np.errstate(all='ignore'):
        assert run('tanh', np.array([np.inf, -np.inf, -0.0], dtype)).tolist() == [1.0, -1.0, -0.0]
        assert np.signbit(run('tanh', np.array([-0.0], dtype))[0])
        assert run('exp', np.array([-np.inf, np.inf, 1e6, -1e6], dtype)).tolist() == [0.0, np.inf, np.inf, 0.0]
        lg = run('log', np.array([0.0, -0.0, -1.0, np.inf, np.nan, -np.inf], dtype))
    assert lg[:2].tolist() == [-np.inf, -np.inf] and np.isnan(lg[2]) and lg[3] == np.inf and np.isnan(lg[4:]).all()


def tanh_chain(n=8, layers=10, dtype=mg.float32):
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(dtype, (n, n), name='x')
        ws = [mg.placeholder(dtype, (n, n), name=f'w{i}') for i in range(layers)]
        y = x
        for w in ws:
            y = mg.tanh(y * w + 0.1)
        loss = y.sum()
        grads = mg.gradients(loss, ws)
    return [loss] + grads, [x] + ws


@needs_numba
def test_tanh_no_longer_breaks_fusion_groups():
    outs, ins = tanh_chain()
    prog = mg.compile(outs, ins, backend='numba')
    assert prog.stats['kernels'] <= 2 and prog.stats['fused'] <= 2          # was one kernel per tanh and more
    assert not any(n.startswith('tanh') for n in prog.stats['declined'].get('fuse', []))
    assert sum(n.op == 'tanh' for n in prog.graph.nodes) == 0              # every tanh is inside a group
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((8, 8)).astype(np.float32) for _ in ins]
    want = mg.compile(outs, ins, backend='numpy')(*args)
    for a, b in zip(prog(*args), want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@needs_numba
def test_stats_name_the_approximation_a_kernel_used():
    outs, ins = tanh_chain()
    prog = mg.compile(outs, ins, backend='numba')
    assert list(prog.stats['approximations']) == ['tanh_f32']
    assert 'rational' in prog.stats['approximations']['tanh_f32']
    assert any(k.approximations == ('tanh_f32',) for k in prog.kernels)
    assert 'tanh_f32(' in prog.source and 'pasted from minigrad/compiler/approx.py' in prog.source
    outs, ins = tanh_chain(dtype=mg.float64)
    assert set(mg.compile(outs, ins, backend='numba').stats['approximations']) == {'tanh_f64'}   # (calls exp_f64)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (4,), name='x')
        y = mg.log(mg.exp(x) + 1.0) * 2.0
    assert set(mg.compile(y, [x], backend='numba').stats['approximations']) == {'exp_f32', 'log_f32'}
    assert mg.compile(x * 2.0 + 1.0, [x], backend='numba').stats['approximations'] == {}


@needs_numba
def test_sigmoid_fuses_through_exp():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (64,), name='x')
        y = mg.sigmoid(x * 3.0 - 1.0) * x
    prog = mg.compile(y, [x], backend='numba')
    assert prog.stats['kernels'] == 1 and set(prog.stats['approximations']) == {'exp_f32'}
    v = np.linspace(-30, 30, 64, dtype=np.float32)
    z = (v * np.float32(3) - np.float32(1)).astype(np.float64)
    want = (1 / (1 + np.exp(-z))).astype(np.float32) * v          # relative precision for negative inputs too
    np.testing.assert_allclose(prog(v), want, rtol=1e-6, atol=0)


def test_numpy_backend_keeps_numpys_functions_exactly():
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32) * 5
    for name in ('tanh', 'exp', 'log'):
        g = mg.Graph()
        with g.as_default():
            p = mg.placeholder(mg.float32, (1000,), name='x')
            y = getattr(mg, name)(p * 1.5)
        prog = mg.compile(y, [p], backend='numpy')
        with np.errstate(all='ignore'):
            assert np.array_equal(prog(x), getattr(np, name)(x * np.float32(1.5)), equal_nan=True)
        assert 'approximations' not in prog.stats or prog.stats['approximations'] == {}



def test_pasted_code_is_built_once_and_filled_per_kernel():
    from minigrad.compiler import approx
    a, out_a = approx.pasted('tanh_f64', 'x0', 't1')           # tanh_f64 pastes exp_f64 inside
    before = approx._template.cache_info().misses
    b, out_b = approx.pasted('tanh_f64', 'y[i] * 2.0', 'k7')
    assert approx._template.cache_info().misses == before        # the template is reused
    assert (out_a, out_b) == ('t1_out', 'k7_out') and a[0] == 't1_x0 = x0' and b[0] == 'k7_x0 = y[i] * 2.0'
    assert [line.replace('t1_', 'k7_') for line in a[1:]] == b[1:]
    assert not any('\x00' in line for line in a + b)            # every stand-in filled in
