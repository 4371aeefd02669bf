"""mg.nn: modules, layers, losses, Keras-style compile/fit, and the source material's models."""
import copy
import pickle

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

try:
    import torch
except Exception:
    torch = None


# ------------------------------------------------------------------ helpers
def numgrad(f, x, eps=1e-6):
    """Central finite differences of the scalar f() with respect to the array x (changed in place)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps; fp = f()
        x[i] = old - eps; fm = f()
        x[i] = old
        g[i] = (fp - fm) / (2 * eps)
    return g


def check_grads(fn, arrays):
    """Tape gradients of fn(*tensors) (a scalar) == finite differences, for each float64 array."""
    ts = [mg.tensor(a, requires_grad=True) for a in arrays]
    fn(*ts).backward()
    for t, a in zip(ts, arrays):
        def f():
            with mg.no_grad():
                return fn(*[mg.tensor(b) for b in arrays]).item()
        np.testing.assert_allclose(t.grad.data, numgrad(f, a), rtol=1e-5, atol=1e-7)


def param_grads_check(module, loss_of_output, x):
    """Finite differences over the module's own parameters (float64)."""
    out = loss_of_output(module(mg.tensor(x)))
    module.zero_grad()
    out.backward()
    for p in module.parameters():
        def f():
            with mg.no_grad():
                return loss_of_output(module(mg.tensor(x))).item()
        np.testing.assert_allclose(p.grad.data, numgrad(f, p.data), rtol=1e-5, atol=1e-7)


R = np.random.default_rng(0)


# ------------------------------------------------------------------ Module
class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(4, 2, bias=False)
        self.scale = nn.Parameter([2.0])

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


def test_registration_and_parameters():
    m = TwoLayer()
    assert [n for n, _ in m.named_parameters()] == ['scale', 'fc1.weight', 'fc1.bias', 'fc2.weight']
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    assert m.fc1.weight.shape == (4, 3) and m.fc2.bias is None
    m(mg.ones(5, 3)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.fc1 = 'replaced'                        # re-assigning unregisters
    assert [n for n, _ in m.named_parameters()] == ['scale', 'fc2.weight']
    assert 'Linear(in_features=4, out_features=2, bias=False)' in repr(m)


def test_shared_layer_counted_once_and_subclass_without_super_init():
    class Shared(nn.Module):
        def __init__(self):                  # no super().__init__(): still registers
            self.a = nn.Linear(2, 2)
            self.b = self.a
    assert len(Shared().parameters()) == 2


def test_sequential_forms():
    mg.manual_seed(0)
    s1 = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    mg.manual_seed(0)
    s2 = nn.Sequential([nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)])
    x = mg.randn(4, 2)
    np.testing.assert_array_equal(s1(x).data, s2(x).data)
    assert len(s1) == 3 and isinstance(s1[1], nn.ReLU) and [n for n, _ in s1.named_parameters()][0] == '0.weight'
    with pytest.raises(TypeError, match='not a Module'):
        nn.Sequential(nn.Linear(1, 1), lambda x: x)


def test_linear_init_pytorch_default_and_seeded():
    mg.manual_seed(3)
    a = nn.Linear(50, 20)
    mg.manual_seed(3)
    b = nn.Linear(50, 20)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    bound = 1 / np.sqrt(50)
    assert a.weight.dtype == np.float32 and np.abs(a.weight.data).max() <= bound
    assert np.abs(a.bias.data).max() <= bound and a.weight.data.std() > bound / 3
    assert nn.Linear(2, 2, dtype=mg.float64).weight.dtype == np.float64
    assert nn.Linear(2, 2).double().weight.dtype == np.float64


# ------------------------------------------------------------------ gradient checks (float64)
@pytest.mark.parametrize('act', [nn.ReLU, nn.Tanh, nn.Sigmoid])
def test_activation_gradients(act):
    x = R.standard_normal((3, 4)) + 0.05          # keep away from relu's kink
    check_grads(lambda t: (act()(t) * mg.tensor(np.arange(12.0).reshape(3, 4))).sum(), [x])


def test_linear_gradients():
    lin = nn.Linear(4, 3, dtype=mg.float64)
    w = R.standard_normal((5, 3))
    param_grads_check(lin, lambda y: (y * mg.tensor(w)).sum(), R.standard_normal((5, 4)))
    check_grads(lambda t: (lin(t) * mg.tensor(w)).sum(), [R.standard_normal((5, 4))])


@pytest.mark.parametrize('reduction', ['mean', 'sum'])
def test_mse_gradients_and_value(reduction):
    p, t = R.standard_normal((4, 2)), R.standard_normal((4, 2))
    check_grads(lambda a, b: nn.MSELoss(reduction)(a, b), [p, t])
    ref = ((p - t) ** 2).mean() if reduction == 'mean' else ((p - t) ** 2).sum()
    assert np.isclose(nn.MSELoss(reduction)(mg.tensor(p), mg.tensor(t)).item(), ref)


def test_cross_entropy_gradients_value_and_stability():
    logits, target = R.standard_normal((5, 3)), np.array([0, 2, 1, 1, 0])
    check_grads(lambda z: nn.CrossEntropyLoss()(z, mg.tensor(target)), [logits])
    lse = np.log(np.exp(logits).sum(1))
    ref = (lse - logits[np.arange(5), target]).mean()
    assert np.isclose(nn.CrossEntropyLoss()(mg.tensor(logits), target).item(), ref)
    if torch is not None:
        tl = torch.nn.CrossEntropyLoss()(torch.tensor(logits), torch.tensor(target)).item()
        assert np.isclose(nn.CrossEntropyLoss()(mg.tensor(logits), mg.tensor(target)).item(), tl, rtol=1e-12)
    big = mg.tensor([[1e4, 0.0, -1e4], [0.0, 1e4, 0.0]], requires_grad=True)
    loss = nn.CrossEntropyLoss()(big, mg.tensor([1, 1]))
    loss.backward()
    assert np.isfinite(loss.item()) and np.isclose(loss.item(), 1e4 / 2) and np.isfinite(big.grad.data).all()


# ------------------------------------------------------------------ errors
def test_wrong_feature_size_names_layer_and_shapes():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(5, 1))
    with pytest.raises(mg.ShapeError, match=r"layer '2' Linear\(in_features=5.*\(batch, 5\).*received \(2, 4\)"):
        model(mg.ones(2, 3))
    g = mg.Graph()
    with g.as_default(), pytest.raises(mg.ShapeError, match=r"expected .*\(batch, 3\).*received \(\?, 7\)"):
        model(mg.placeholder(shape=(None, 7)))


def test_unknown_names_and_length_mismatch():
    model = nn.Sequential(nn.Linear(1, 1))
    with pytest.raises(ValueError, match='valid names: sgd, adam'):
        model.compile(optimizer='adagrad')
    with pytest.raises(ValueError, match='valid names: mse'):
        model.compile(loss='hinge')
    with pytest.raises(mg.MinigradError, match='compile'):
        model.fit([[1.0]], [[1.0]])
    model.compile()
    with pytest.raises(ValueError, match='x has 3 samples.*y has 2'):
        model.fit([[1], [2], [3]], [[2], [4]])
    with pytest.raises(mg.ShapeError, match=r'\(3, 1\) and target \(3,\)'):
        nn.MSELoss()(mg.ones(3, 1), mg.ones(3))


# ------------------------------------------------------------------ the source material's models
class LinearModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 1)

    def forward(self, x):
        return self.linear(x)


def test_linear_model_training_loop():
    mg.manual_seed(0)
    model, criterion = LinearModel(), nn.MSELoss()
    optimizer = mg.optim.SGD(model.parameters(), lr=0.01)
    x, target = mg.randn(1, 64), mg.tensor([1.0])
    losses = []
    for _ in range(10):
        optimizer.zero_grad()
        loss = criterion(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.01 and all(b < a for a, b in zip(losses, losses[1:]))


def test_keras_style_fit(capsys):
    mg.manual_seed(0)
    model = nn.Sequential([nn.Linear(1, 1)])
    model.compile(optimizer='sgd', loss='mse')
    history = model.fit(x=[[1], [2], [3]], y=[[2], [4], [6]], epochs=10)
    ls = history.history['loss']
    assert len(ls) == 10 and ls == history.losses and ls[-1] < ls[0] / 2
    assert 'Epoch 10/10' in capsys.readouterr().out           # a text progress line outside notebooks
    model.fit([[1], [2], [3]], [2, 4, 6], epochs=2000, verbose=0)   # 1-D targets are accepted too
    assert capsys.readouterr().out == ''
    assert abs(model[0].weight.item() - 2) < 0.01 and abs(model[0].bias.item()) < 0.03
    np.testing.assert_allclose(model.predict([[4.0]]), [[8.0]], atol=0.05)
    assert model.evaluate([[1], [2], [3]], [[2], [4], [6]]) < 1e-3


def test_new_input_size_recompiles_and_says_so(capsys):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 1))
    model.compile('adam', 'mse')
    x, y = R.standard_normal((5, 2)), R.standard_normal((5, 1))
    model.fit(x, y, epochs=1, verbose=0)
    model.fit(x, y, epochs=3, batch_size=2, verbose=1)       # batches of 2 and a last one of 1
    out = capsys.readouterr().out
    assert out.count('compiling another training graph') == 2 and 'x(2, 2)' in out and len(model._steps) == 3


# ------------------------------------------------------------------ eager == compiled
def _seeded_mlp(dtype=mg.float64):
    mg.manual_seed(42)
    return nn.Sequential(nn.Linear(3, 8, dtype=dtype), nn.Tanh(), nn.Linear(8, 2, dtype=dtype))


@pytest.mark.parametrize('make_opt', [lambda ps: mg.optim.SGD(ps, lr=0.1, momentum=0.9),
                                      lambda ps: mg.optim.Adam(ps, lr=0.05)], ids=['sgd_momentum', 'adam'])
def test_eager_and_compiled_training_agree_step_by_step(make_opt):
    x, y = R.standard_normal((16, 3)), R.standard_normal((16, 2))
    eager = _seeded_mlp()
    opt, crit, eager_losses, eager_params = make_opt(eager.parameters()), nn.MSELoss(), [], []
    for _ in range(8):
        opt.zero_grad()
        loss = crit(eager(mg.tensor(x)), mg.tensor(y))
        loss.backward()
        opt.step()
        eager_losses.append(loss.item())
        eager_params.append([p.data.copy() for p in eager.parameters()])
    compiled = _seeded_mlp()
    compiled.compile(optimizer=make_opt(compiled.parameters()), loss='mse')
    losses = []
    for k in range(4):                         # step by step: one epoch (= one full batch) per fit
        losses += compiled.fit(x, y, epochs=1, shuffle=False, verbose=0).losses
        for a, b in zip(compiled.parameters(), eager_params[k]):
            np.testing.assert_allclose(a.data, b, rtol=1e-10, atol=1e-14)
    losses += compiled.fit(x, y, epochs=4, shuffle=False, verbose=0).losses
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    assert len(compiled._steps) == 1           # compiled once
    for a, b in zip(compiled.parameters(), eager_params[-1]):
        np.testing.assert_allclose(a.data, b, rtol=1e-10, atol=1e-14)


def test_module_runs_on_symbols_and_under_trace():
    model = _seeded_mlp()
    x = R.standard_normal((4, 3))
    g = mg.Graph()
    with g.as_default():
        pv = nn.bind_parameters(g, model)
        xs = mg.placeholder(mg.float64, shape=(None, 3))
        out = model(xs)
    assert sorted(v.name for v in pv.values())[0] == '0_bias' and len(pv) == 4
    np.testing.assert_allclose(mg.Session(g).run(out, {xs: x}), model(mg.tensor(x)).data, rtol=1e-12)
    traced = mg.trace(model, mg.tensor(x))
    assert any(n.op == 'variable' for n in traced.graph.nodes)
    np.testing.assert_allclose(np.asarray(traced(x)), model(mg.tensor(x)).data, rtol=1e-12)
    fast = mg.jit(model)
    np.testing.assert_allclose(np.asarray(fast(x)), model(mg.tensor(x)).data, rtol=1e-10)


# ------------------------------------------------------------------ DynamicNet
N, D_in, H, D_out = 64, 1000, 100, 10


def test_dynamic_net_learns_with_adam():
    mg.manual_seed(0)
    x, y = mg.randn(N, D_in), mg.randn(N, D_out)
    model = nn.DynamicNet(D_in, H, D_out)
    criterion = nn.MSELoss(reduction='sum')
    optimizer = mg.optim.Adam(model.parameters(), lr=1e-4)
    losses = []
    for _ in range(100):
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10])   # noisy: the depth changes every step
    assert min(losses[-10:]) < 0.6 * min(losses[:10])


def test_dynamic_depth_on_the_tape():
    mg.manual_seed(1)
    model = nn.DynamicNet(6, 5, 2)
    x = mg.randn(3, 6)
    for depth in range(4):
        with mg.Tape() as tape:
            out = model(x, depth=depth)
        assert sum(e.op == 'matmul' for e in tape.entries) == 2 + depth
        model.zero_grad()
        out.sum().backward()
        assert (model.middle_linear.weight.grad is None) == (depth == 0)   # shared weights: grads add up
    counts = set()
    for _ in range(30):                        # the random depth changes the recorded graph per call
        with mg.Tape() as tape:
            model(x)
        counts.add(sum(e.op == 'matmul' for e in tape.entries))
    assert counts == {2, 3, 4, 5}


def test_trace_freezes_one_depth():
    mg.manual_seed(2)
    model = nn.DynamicNet(6, 5, 2, dtype=mg.float64)
    x = R.standard_normal((3, 6))
    traced = mg.trace(lambda t: model(t, depth=2), mg.tensor(x), symbolic=False)
    assert sum(n.op == 'matmul' for n in traced.graph.nodes) == 4
    for _ in range(3):                         # every call replays depth 2, whatever Python would draw
        np.testing.assert_allclose(np.asarray(traced(x)), model(mg.tensor(x), depth=2).data, rtol=1e-12)


def test_static_choice_with_cond_and_programs_per_depth():
    mg.manual_seed(3)
    model = nn.DynamicNet(6, 5, 2, dtype=mg.float64)
    x = R.standard_normal((3, 6))
    g = mg.Graph()
    with g.as_default():
        pv = nn.bind_parameters(g, model)
        xs, d = mg.placeholder(mg.float64, shape=(3, 6)), mg.placeholder(mg.int64, shape=())
        out = model(xs, depth=d)                     # three mg.cond nodes, one graph for every depth
        grads = mg.gradients((out * out).sum(), [pv[id(p)] for p in model.parameters()])
    assert sum(n.op == 'cond' for n in g.nodes) >= 3
    sess = mg.Session(g)
    for depth in range(4):
        o, gs = sess.run([out, grads], {xs: x, d: depth})
        model.zero_grad()
        e = model(mg.tensor(x), depth=depth)
        (e * e).sum().backward()
        np.testing.assert_allclose(o, e.data, rtol=1e-12)
        for gr, p in zip(gs, model.parameters()):
            np.testing.assert_allclose(gr, p.grad.data if p.grad is not None else 0 * gr, rtol=1e-10, atol=1e-12)
    programs = {depth: mg.jit(lambda t, depth=depth: model(t, depth=depth)) for depth in range(4)}
    for depth, prog in programs.items():             # or: one compiled program per depth
        np.testing.assert_allclose(np.asarray(prog(x)), model(mg.tensor(x), depth=depth).data, rtol=1e-10)


# ------------------------------------------------------------------ a small real task
def test_moons_classifier_compiled():
    mg.manual_seed(0)
    x, y = mg.data.make_moons(200, noise=0.1)
    model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 2))
    model.compile(optimizer=mg.optim.Adam(model.parameters(), lr=0.01), loss='cross_entropy')
    history = model.fit(x, y, epochs=200, verbose=0)
    acc = (model.predict(x).argmax(axis=1) == y).mean()
    assert acc >= 0.95 and history.losses[-1] < 0.1


def test_progress_bar_in_a_notebook(monkeypatch, capsys):
    monkeypatch.setattr(nn.modules, '_in_notebook', lambda: True)
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 1))
    model.compile('sgd', 'mse')
    bars = []
    real = nn.modules._Progress.__init__
    def spy(self, *a):
        real(self, *a)
        bars.append(self)
    monkeypatch.setattr(nn.modules._Progress, '__init__', spy)
    model.fit([[1.0], [2.0]], [[2.0], [4.0]], epochs=3)
    assert bars[0].bar is not None and bars[0].bar.value == 3 and 'Epoch 3/3' in bars[0].label.value
    assert 'Epoch 3/3' not in capsys.readouterr().out          # the widget, not a text line


@pytest.mark.parametrize('backend', ['numpy', pytest.param('numba', marks=pytest.mark.skipif(
    not mg.compiler.kernels.available(), reason='numba is not installed'))])
def test_cross_entropy_in_a_session_checks_targets_at_run_time(backend):
    """issue 31: eager raised for out-of-range targets, a Session returned a loss."""
    g = mg.Graph()
    with g.as_default():
        logits, t = mg.placeholder(mg.float32, (2, 3)), mg.placeholder(mg.int64, (2,))
        loss = mg.nn.CrossEntropyLoss()(logits, t)
    sess = mg.Session(g, backend=backend)
    np.testing.assert_allclose(sess.run(loss, {logits: np.zeros((2, 3)), t: [0, 2]}), np.log(3), rtol=1e-6)
    for bad in ([0, 3], [-1, 0]):
        with pytest.raises(mg.MinigradError, match=r'CrossEntropyLoss: targets .* in \[0, 3\)'):
            sess.run(loss, {logits: np.zeros((2, 3)), t: bad})
        with pytest.raises(mg.MinigradError, match=r'CrossEntropyLoss: targets .* in \[0, 3\)'):
            mg.nn.CrossEntropyLoss()(mg.tensor(np.zeros((2, 3))), bad)       # eager, as before


@pytest.mark.parametrize('copy_fn', [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))],
                         ids=['deepcopy', 'pickle'])
def test_a_copy_after_fit_drops_the_compiled_steps_and_trains_on_its_own(copy_fn):
    """Snapshotting the best model during training: the copy leaves fit's compiled Programs behind (they
    refused to pickle) and builds its own on its next fit; the original is untouched."""
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    model.compile('adam', 'mse')
    x, y = R.standard_normal((8, 2)), R.standard_normal((8, 1))
    model.fit(x, y, epochs=2, verbose=0)
    snap = copy_fn(model)
    assert snap._steps == {} and len(model._steps) == 1
    np.testing.assert_array_equal(snap.predict(x), model.predict(x))
    before = model.predict(x)
    snap.fit(x, y, epochs=3, verbose=0)
    assert len(snap._steps) == 1 and not np.allclose(snap.predict(x), before)
    np.testing.assert_array_equal(model.predict(x), before)
