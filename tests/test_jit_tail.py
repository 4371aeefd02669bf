"""mg.jit and what it captured: every kind of value fn reads besides its arguments, changed after the first
call, gives the eager result (a guard retraces, or the graph reads the value on every call) or a clear error;
keyword arguments; mg.vmap of a jit function with graph breaks."""
import functools
import types

import numpy as np
import pytest

import minigrad as mg

X = np.array([0.5, -1.5], np.float32)

# module-level state the cases read as globals
T_GLOBAL = mg.tensor([1.0, 1.0])
K_HELPER = 2.0
T_HELPER = mg.tensor([1.0, 1.0])
A_GLOBAL = np.array([1.0, 1.0], np.float32)
S_NUMPY = np.float32(2.0)


def add_global_tensor(x):
    return x + T_GLOBAL


def scale_by_k(x):
    return x * K_HELPER


def calls_scale_by_k(x):
    return scale_by_k(x) + 1.0


def times_t_helper(x):
    return x * T_HELPER


def calls_times_t_helper(x):
    return times_t_helper(x) + 1.0


def double(x):
    return x * 2.0


def calls_double(x):
    return double(x) + 1.0


def add_global_array(x):
    return x + A_GLOBAL


def times_numpy_scalar(x):
    return x * S_NUMPY


def set_global(name, value):
    return lambda: globals().__setitem__(name, value)


@pytest.fixture(autouse=True)
def restore_globals():
    saved = {k: globals()[k] for k in ('T_GLOBAL', 'K_HELPER', 'T_HELPER', 'A_GLOBAL', 'S_NUMPY', 'double')}
    yield
    globals().update(saved)


def module_with(value, forward):
    class M(mg.nn.Module):
        def __init__(self):
            super().__init__()
            self.value = value
    M.forward = forward
    return M()


# each case: () -> (fn, change); fn is jitted, called on X, change() runs, and the next call must be eager's
CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


@case
def closure_tensor_rebound():
    T = mg.tensor([1.0, 1.0])

    def change():
        nonlocal T
        T = mg.tensor([5.0, 5.0])
    return (lambda x: x + T), change


@case
def global_tensor_rebound():
    return add_global_tensor, set_global('T_GLOBAL', mg.tensor([5.0, 5.0]))


@case
def module_float_attribute():
    m = module_with(2.0, lambda self, x: x * self.value)
    return m, lambda: setattr(m, 'value', 3.0)


@case
def module_int_attribute_loop_count():
    def forward(self, x):
        for _ in range(self.value):
            x = x * 2.0
        return x
    m = module_with(2, forward)
    return m, lambda: setattr(m, 'value', 3)


@case
def module_str_attribute_branch():
    m = module_with('relu', lambda self, x: mg.relu(x) if self.value == 'relu' else mg.tanh(x))
    return m, lambda: setattr(m, 'value', 'tanh')


@case
def submodule_attribute():
    inner = module_with(2.0, lambda self, x: x * self.value)
    outer = module_with(inner, lambda self, x: self.value(x) + 1.0)
    return outer, lambda: setattr(inner, 'value', 3.0)


@case
def module_parameters_change_dtype():
    m = mg.nn.Linear(2, 2)
    return m, m.double


@case
def helper_reads_global_scalar():
    return calls_scale_by_k, set_global('K_HELPER', 3.0)


@case
def helper_reads_global_tensor():
    return calls_times_t_helper, set_global('T_HELPER', mg.tensor([5.0, 5.0]))


@case
def helper_rebound():
    return calls_double, set_global('double', lambda x: x * 3.0)


@case
def function_under_mg_grad_reads_dict_item():
    cfg = {'k': 2.0}
    return mg.grad(lambda w: (w * w * cfg['k']).sum()), lambda: cfg.__setitem__('k', 3.0)


@case
def function_under_mg_vmap_reads_global():
    return mg.vmap(calls_scale_by_k), set_global('K_HELPER', 3.0)


@case
def dict_item_scalar():
    cfg = {'k': 2.0}
    return (lambda x: x * cfg['k']), lambda: cfg.__setitem__('k', 3.0)


@case
def dict_item_tensor():
    d = {'w': mg.tensor([1.0, 1.0])}
    return (lambda x: x + d['w']), lambda: d.__setitem__('w', mg.tensor([5.0, 5.0]))


@case
def nested_dict_item():
    cfg = {'opt': {'lr': 0.5}}
    return (lambda x: x * cfg['opt']['lr']), lambda: cfg['opt'].__setitem__('lr', 0.25)


@case
def list_item_scalar():
    ks = [2.0]
    return (lambda x: x * ks[0]), lambda: ks.__setitem__(0, 3.0)


@case
def list_item_tensor():
    ts = [mg.tensor([1.0, 1.0])]
    return (lambda x: x + ts[0]), lambda: ts.__setitem__(0, mg.tensor([5.0, 5.0]))


@case
def list_grows():
    ks = [2.0]

    def f(x):
        for k in ks:
            x = x * k
        return x
    return f, lambda: ks.append(3.0)


@case
def class_attribute():
    class C:
        k = 2.0
    return (lambda x: x * C.k), lambda: setattr(C, 'k', 3.0)


@case
def class_attribute_read_through_an_instance():
    class C:
        k = 2.0
    obj = C()
    return (lambda x: x * obj.k), lambda: setattr(C, 'k', 3.0)


@case
def class_method_replaced():
    class C:
        def scale(self, x):
            return x * 2.0
    obj = C()
    return (lambda x: obj.scale(x)), lambda: setattr(C, 'scale', lambda self, x: x * 3.0)


@case
def property_reads_attribute():
    class C:
        def __init__(self):
            self._k = 2.0

        @property
        def k(self):
            return self._k
    obj = C()
    return (lambda x: x * obj.k), lambda: setattr(obj, '_k', 3.0)


@case
def super_method_reads_attribute():
    class Base(mg.nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2.0

        def forward(self, x):
            return x * self.k

    class Child(Base):
        def forward(self, x):
            return super().forward(x) + 1.0
    m = Child()
    return m, lambda: setattr(m, 'k', 3.0)


@case
def bound_method():
    class C:
        k = 2.0

        def f(self, x):
            return x * self.k
    obj = C()
    return obj.f, lambda: setattr(obj, 'k', 3.0)


@case
def object_attribute():
    cfg = types.SimpleNamespace(k=2.0)
    return (lambda x: x * cfg.k), lambda: setattr(cfg, 'k', 3.0)


@case
def user_module_attribute():
    cfg = types.ModuleType('user_config')
    cfg.k = 2.0
    return (lambda x: x * cfg.k), lambda: setattr(cfg, 'k', 3.0)


@case
def function_default():
    def f(x, k=2.0):
        return x * k
    return f, lambda: setattr(f, '__defaults__', (3.0,))


@case
def function_keyword_only_default():
    def f(x, *, k=2.0):
        return x * k
    return f, lambda: setattr(f, '__kwdefaults__', {'k': 3.0})


@case
def helper_default():
    def helper(x, k=2.0):
        return x * k
    return (lambda x: helper(x) + 1.0), lambda: setattr(helper, '__defaults__', (3.0,))


@case
def partial_keyword():
    def f(x, k):
        return x * k
    p = functools.partial(f, k=2.0)
    return p, lambda: p.keywords.__setitem__('k', 3.0)


@case
def numpy_array_changed_in_place():
    A = np.array([1.0, 1.0], np.float32)
    return (lambda x: x + A), lambda: A.__setitem__(Ellipsis, 5.0)


@case
def numpy_array_rebound():
    return add_global_array, set_global('A_GLOBAL', np.array([5.0, 5.0], np.float32))


@case
def numpy_array_read_by_numpy():
    A = np.array([0.0, 0.0], np.float32)
    return (lambda x: x * np.exp(A)), lambda: A.__setitem__(Ellipsis, 1.0)


@case
def numpy_scalar_rebound():
    return times_numpy_scalar, set_global('S_NUMPY', np.float32(3.0))


@case
def tensor_read_by_item():
    T = mg.tensor(2.0)
    return (lambda x: x * T.item()), lambda: T.data.__setitem__(Ellipsis, 3.0)


def eager(fn, x):
    return np.asarray(fn(mg.tensor(x)).data)


@pytest.mark.parametrize('name', list(CASES))
def test_what_jit_captured_changed_after_the_first_call(name):
    fn, change = CASES[name]()
    jf = mg.jit(fn)
    np.testing.assert_allclose(jf(X), eager(fn, X), rtol=1e-6)
    change()
    got, want = np.asarray(jf(X)), eager(fn, X)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for _ in range(3):                      # nothing changed since: no more traces
        jf(X)
    assert jf.trace_count == (1 if name == 'numpy_array_changed_in_place' else 2)


def test_the_new_guards_are_listed_by_explain():
    m = module_with(2.0, lambda self, x: calls_scale_by_k(x) * self.value + T_GLOBAL + A_GLOBAL)
    cfg = {'k': 0.5}
    jf = mg.jit(lambda x, s=1.0: m(x) * cfg['k'] * s)
    jf(X)
    text = jf.explain()
    for words in ['m.value == 2.0 (float, closed over by <lambda>)', 'K_HELPER == 2.0 (float, global of scale_by_k)',
                  "cfg['k'] == 0.5 (float, closed over by <lambda>)", 'len(cfg) == 1', 'T_GLOBAL is Tensor float32 (2,)',
                  '<lambda>.__defaults__ is (1.0,)', 'A_GLOBAL is numpy array float32 (2,)', 'scale_by_k is',
                  'A_GLOBAL = placeholder()']:          # the array is read by the graph on every call
        assert words in text, words
    assert 'def check():' in jf.entries[0].reads.source


def test_a_loop_of_100_unchanged_calls_traces_once():
    m = module_with(2.0, lambda self, x: calls_scale_by_k(x) * self.value + T_GLOBAL + A_GLOBAL)
    cfg, ks = {'k': 0.5}, [1.0, 2.0]
    lin = mg.nn.Linear(2, 2)
    jf = mg.jit(lambda x, s=1.0: lin(m(x) * cfg['k'] * s * ks[1]))
    for i in range(100):
        jf(X + i)
    assert (jf.trace_count, jf.hits, jf.guard_failures) == (1, 99, 0)


def test_side_effects_of_tracing_are_not_guarded():
    log = []

    def f(x):
        log.append(1)            # runs while tracing only, as under jax.jit
        return x * 2.0
    jf = mg.jit(f)
    for _ in range(5):
        jf(X)
    assert jf.trace_count == 1 and log == [1]
    assert 'not guarded (fn changed it while tracing): len(log) == 1' in jf.explain()


ITERATOR = iter([1.0, 2.0])
RNG = np.random.default_rng(0)
BIG = [1.0] * 1000
BIG_ARRAY = np.ones((600, 600), np.float32)


@pytest.mark.parametrize('fn, words', [
    (lambda x: x * next(ITERATOR), ['reads ITERATOR', 'an iterator', 'next(ITERATOR)']),
    (lambda x: x + RNG.normal(), ['reads RNG', 'random number generator', 'pass them']),
    (lambda x: x * BIG[3], ['reads BIG', 'a list of 1000 items', 'np.asarray(BIG)']),
    (lambda x: x * float(BIG_ARRAY.sum()), ['reads BIG_ARRAY', 'over 1 MB, in Python', '(x, BIG_ARRAY)']),
])
def test_what_cannot_be_guarded_is_refused_with_the_way_to_pass_it(fn, words):
    with pytest.raises(mg.MinigradError) as info:
        mg.jit(fn)(X)
    for w in words + ['as an argument']:
        assert w in str(info.value), (w, str(info.value))


def test_a_large_array_the_graph_reads_is_fed_not_compared():
    jf = mg.jit(lambda x: x @ BIG_ARRAY)
    x = np.ones((1, 600), np.float32)
    jf(x)
    BIG_ARRAY[0, 0] = 5.0
    try:
        np.testing.assert_allclose(jf(x)[0, :2], [604.0, 600.0])
    finally:
        BIG_ARRAY[0, 0] = 1.0
    assert jf.trace_count == 1 and 'holds the values seen' not in jf.explain()


def test_keyword_arguments_are_guarded_like_positional_scalars():
    def f(x, k=1.0, mode='mul'):
        return x * k if mode == 'mul' else x + k
    jf = mg.jit(f)
    np.testing.assert_allclose(jf(X, k=2.0), X * 2)
    np.testing.assert_allclose(jf(X + 1, k=2.0), (X + 1) * 2)
    assert jf.trace_count == 1 and jf.hits == 1
    np.testing.assert_allclose(jf(X, k=3.0), X * 3)
    np.testing.assert_allclose(jf(X, k=2.0, mode='add'), X + 2)
    np.testing.assert_allclose(jf(X, mode='add', k=2.0), X + 2)          # the same entry, in any order
    assert jf.trace_count == 3
    assert "k == 2.0 (float)" in jf.explain() and "mode == 'add' (str)" in jf.explain()
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    y = jf(X, k=w)                       # a Tensor by keyword: an input, and derivatives flow
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), X)


def branchy(x):
    if x.sum() > 0:
        return x * x
    return x - 1.0


def test_vmap_of_jit_with_a_graph_break_runs_each_example_through_the_guards():
    xs = np.array([[1.0, 2.0], [-3.0, -4.0], [0.5, 0.5]], np.float32)
    jf = mg.jit(branchy)
    want = np.stack([branchy(mg.tensor(r)).numpy() for r in xs])
    np.testing.assert_allclose(mg.vmap(jf)(xs).numpy(), want)
    assert jf.trace_count == 2 and jf.hits == 1             # one entry per branch
    t = mg.tensor(xs, requires_grad=True)
    mg.vmap(jf)(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.where(xs.sum(1, keepdims=True) > 0, 2 * xs, 1.0))
    a = np.arange(12, dtype=np.float32).reshape(2, 3, 2) - 5
    np.testing.assert_allclose(mg.vmap(mg.vmap(jf))(a).numpy(), np.stack([[branchy(mg.tensor(r)).numpy()
                                                                            for r in b] for b in a]))
    smooth = mg.jit(lambda x: (x * 2.0).sum())              # no break: one batched pass
    np.testing.assert_allclose(mg.vmap(smooth)(xs).numpy(), xs.sum(1) * 2)


def test_a_jit_function_first_called_under_no_grad_still_differentiates():
    """The trace ignores an outer no_grad (as mg.grad does): a graph traced under it must not be a graph of
    stop_gradients that a later backward goes through silently as zeros."""
    f = mg.jit(lambda x: (x * x * 3.0).sum())
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with mg.no_grad():
        assert f(x).item() == 15.0
    f(x).backward()
    assert x.grad.tolist() == [6.0, 12.0] and f.trace_count == 1
    g = mg.jit(lambda x: mg.stop_gradient(x * x).sum() + x.sum())       # a stop_gradient inside stays one
    x.grad = None
    g(x).backward()
    assert x.grad.tolist() == [1.0, 1.0]


@pytest.mark.parametrize('symbolic', [True, False])
def test_a_function_traced_under_no_grad_still_differentiates(symbolic):
    with mg.no_grad():
        t = mg.trace(lambda x: (x * x * 3.0).sum(), np.array([1.0, 2.0], np.float32), symbolic=symbolic)
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    t(x).backward()
    assert x.grad.tolist() == [6.0, 12.0]
    inner = mg.trace(lambda x: mg.stop_gradient(x * x).sum() + x.sum(), np.array([1.0, 2.0], np.float32),
                     symbolic=symbolic)
    x.grad = None
    inner(x).backward()
    assert x.grad.tolist() == [1.0, 1.0]
