"""Optimizers: update arithmetic against PyTorch (when installed) and a hand-written numpy update."""
import numpy as np
import pytest

import minigrad as mg

try:
    import torch
except Exception:           # not installed (or a broken install): the numpy reference still runs
    torch = None

STEPS = 6


def _grads(shape, seed=1):
    r = np.random.default_rng(seed)
    return [r.standard_normal(shape) for _ in range(STEPS)]


def _run_minigrad(make_opt, p0, grads):
    p = mg.nn.Parameter(p0.copy())
    opt = make_opt([p])
    out = []
    for g in grads:
        opt.zero_grad()
        (p * mg.tensor(g)).sum().backward()       # d/dp sum(p * g) = g
        opt.step()
        out.append(p.data.copy())
    return out


def _numpy_sgd(p, grads, lr, momentum):
    buf, out = None, []
    for g in grads:
        buf = g if buf is None or not momentum else momentum * buf + g
        p = p - lr * buf
        out.append(p)
    return out


def _numpy_adam(p, grads, lr, b1, b2, eps):
    m, v, out = np.zeros_like(p), np.zeros_like(p), []
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
        out.append(p)
    return out


def _torch_run(make_opt, p0, grads):
    p = torch.tensor(p0.copy(), requires_grad=True)
    opt = make_opt([p])
    out = []
    for g in grads:
        opt.zero_grad()
        p.grad = torch.tensor(g)
        opt.step()
        out.append(p.detach().numpy().copy())
    return out


CASES = [
    ('sgd', dict(lr=0.1)),
    ('sgd_momentum', dict(lr=0.05, momentum=0.9)),
    ('adam', dict(lr=1e-2)),
    ('adam_betas', dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-6)),
]


@pytest.mark.parametrize('name,kw', CASES, ids=[c[0] for c in CASES])
def test_update_matches_numpy_reference(name, kw):
    p0, grads = np.random.default_rng(0).standard_normal((3, 4)), _grads((3, 4))
    if name.startswith('sgd'):
        ours = _run_minigrad(lambda ps: mg.optim.SGD(ps, **kw), p0, grads)
        ref = _numpy_sgd(p0, grads, kw['lr'], kw.get('momentum', 0.0))
    else:
        ours = _run_minigrad(lambda ps: mg.optim.Adam(ps, **kw), p0, grads)
        b1, b2 = kw.get('betas', (0.9, 0.999))
        ref = _numpy_adam(p0, grads, kw['lr'], b1, b2, kw.get('eps', 1e-8))
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(torch is None, reason='PyTorch not installed (pip install torch==2.13.0)')
@pytest.mark.parametrize('name,kw', CASES, ids=[c[0] for c in CASES])
def test_update_matches_pytorch(name, kw):
    p0, grads = np.random.default_rng(0).standard_normal((3, 4)), _grads((3, 4))
    ours_cls, torch_cls = (mg.optim.SGD, torch.optim.SGD) if name.startswith('sgd') else \
        (mg.optim.Adam, torch.optim.Adam)
    ours = _run_minigrad(lambda ps: ours_cls(ps, **kw), p0, grads)
    ref = _torch_run(lambda ps: torch_cls(ps, **kw), p0, grads)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_float32_stays_float32_and_step_records_nothing():
    p = mg.nn.Parameter(np.ones(3, np.float32))
    opt = mg.optim.Adam([p], lr=0.1)
    (p * p).sum().backward()
    opt.step()
    assert p.dtype == np.float32 and p.is_leaf and p.requires_grad and p.grad_fn is None


def test_step_does_not_corrupt_saved_values_and_skips_params_without_grad():
    a, b = mg.nn.Parameter([1.0, 2.0]), mg.nn.Parameter([5.0])
    y = (a * a).sum()
    y.backward(retain_graph=True)
    opt = mg.optim.SGD([a, b], lr=0.5)
    opt.step()                                      # b has no grad: untouched
    assert b.data.tolist() == [5.0] and a.data.tolist() == [0.0, 0.0]
    assert y.grad_fn.parents[0].saved[0].tolist() == [1.0, 2.0]   # mul's saved input is still the old value,
    a.grad = None                                       # but a backward through it refuses, as in PyTorch
    with pytest.raises(mg.BackwardError, match='modified by an in-place operation'):
        y.backward()


def test_zero_grad_and_errors():
    p = mg.nn.Parameter([1.0])
    (p * 2).sum().backward()
    opt = mg.optim.SGD([p], lr=0.1)
    opt.zero_grad()
    assert p.grad is None
    with pytest.raises(ValueError, match='empty parameter list'):
        mg.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="valid names: sgd, adam"):
        mg.optim.get('rmsprop', [p])
    assert 'lr=0.1' in repr(opt)


def test_rule_builds_graph_ops_that_match_eager_steps():
    """The same _rule on Symbols (Variables + assign, run by a Session) gives the eager numbers."""
    p0, grads = np.random.default_rng(0).standard_normal(4), _grads(4)
    for opt_cls, kw in [(mg.optim.SGD, dict(lr=0.1, momentum=0.5)), (mg.optim.Adam, dict(lr=0.01))]:
        eager = _run_minigrad(lambda ps: opt_cls(ps, **kw), p0, grads)
        opt = opt_cls([mg.nn.Parameter(p0)], **kw)
        g = mg.Graph()
        with g.as_default():
            pv, gp = mg.Variable(p0), mg.placeholder(mg.float64, shape=(4,))
            sv = {k: mg.Variable(np.asarray(v, np.float64)) for k, v in opt._get_state(0).items()}
            new_p, new_s = opt._rule(pv, gp, sv, opt.settings())
            ops = [pv.assign(new_p)] + [sv[k].assign(new_s[k]) for k in sv]
        sess = mg.Session(g)
        for gr, ref in zip(grads, eager):
            np.testing.assert_allclose(sess.run(ops, {gp: gr})[0], ref, rtol=1e-12)


@pytest.mark.parametrize('make', [lambda ps: mg.optim.SGD(ps, lr=0.1, momentum=0.5),
                                  lambda ps: mg.optim.Adam(ps, lr=0.01)], ids=['sgd', 'adam'])
def test_fit_reads_the_settings_at_every_step(make):
    """issue 31: fit baked lr into its compiled step, so a later opt.lr = 0 still trained."""
    rs = np.random.RandomState(0)
    x, y = rs.randn(8, 3).astype(np.float32), rs.randn(8, 1).astype(np.float32)
    mg.manual_seed(0)
    m = mg.nn.Sequential([mg.nn.Linear(3, 1)])
    opt = make(m.parameters())
    m.compile(optimizer=opt, loss='mse')
    m.fit(x, y, epochs=2, verbose=0)
    before = [p.data.copy() for p in m.parameters()]
    opt.lr = 0.0
    m.fit(x, y, epochs=2, verbose=0)
    for p, b in zip(m.parameters(), before):
        np.testing.assert_array_equal(p.data, b)
    opt.lr = 0.05
    m.fit(x, y, epochs=1, verbose=0)
    assert any(not np.array_equal(p.data, b) for p, b in zip(m.parameters(), before))
