"""Bad input gets a clear error: every case a new user might try, each once, with its expected outcome (a
MinigradError subclass and a fragment of its message, or several fragments that must all appear, or a
correct value), grouped by category.
The last test counts the outcomes per category: anything but a clear error or a correct value fails.
A Hypothesis fuzz test then feeds malformed values to the main public functions."""
from __future__ import annotations

import collections
import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import minigrad as mg
from minigrad.core.errors import InputError, ShapeError, FeedError, GraphError, BackwardError, MinigradError

BAD_VALUES = {'None': None, 'str': 'abc', 'bytes': b'ab', 'dict': {}, 'set': {1}, 'object': object(),
              'ragged': [[1, 2], [3]], 'str array': np.array(['a', 'b']), 'object array': np.array([object()]),
              'datetime array': np.array(['2020-01-01'], 'datetime64[s]'), 'huge int': 2 ** 80,
              'complex': 1j, 'list of None': [None, None], 'function': len}

CASES: list = []          # (category, id, thunk, expected): expected = (error class, fragment or tuple of
                          # fragments) or ('value', check)


def case(category, name, expected):
    def deco(fn):
        CASES.append((category, name, fn, expected))
        return fn
    return deco


def _graph():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        y = mg.placeholder(mg.float32, (4,), name='y')
    return g, x, y


# ------------------------------------------------------------------ construction
def _construct(make, value):
    g = mg.Graph()
    with g.as_default():
        return make(value)


for vname, value in BAD_VALUES.items():
    for fname, make in (('tensor', mg.tensor), ('constant', mg.constant), ('Variable', mg.Variable),
                        ('Parameter', mg.nn.Parameter), ('tensor requires_grad', lambda v: mg.tensor(v, requires_grad=True))):
        case('construction', f'{fname}({vname})', (InputError, 'expected' if vname in (
            'None', 'str', 'bytes', 'dict', 'set') else ''))(lambda make=make, value=value: _construct(make, value))

def _holds(good):
    """The made value holds `good`: a Tensor's data, a Symbol's value run by a Session (Python floats become
    float32, minigrad's default float; ints int64, bools bool, an array keeps its dtype)."""
    want = np.asarray(good, np.float32 if isinstance(good, list) else None)

    def check(r):
        value = r.numpy() if isinstance(r, mg.Tensor) else np.asarray(mg.Session(r.graph).run(r))
        return r.dtype == value.dtype == want.dtype and value.shape == want.shape and np.array_equal(value, want)
    return check


for fname, make in (('tensor', mg.tensor), ('constant', mg.constant), ('Variable', mg.Variable)):
    for good in ([1.0, 2.0], 3, True, np.arange(3, dtype=np.int32)):
        case('construction', f'{fname}({good!r}) holds it', ('value', _holds(good)))(
            lambda make=make, good=good: _construct(make, good))

# ------------------------------------------------------------------ factories and constructors (issue 34)
for fname, make in (('zeros', mg.zeros), ('ones', mg.ones), ('randn', mg.randn), ('rand', mg.rand)):
    for bad, frag in ((-1, 'expected an int >= 0'), ('a', 'expected an int'), (2.5, 'got float 2.5'),
                      ((2, None), 'got NoneType')):
        case('creation', f'{fname}({bad!r})', (InputError, frag))(lambda make=make, bad=bad: make(bad))
    case('creation', f'{fname}(2, dtype=str)', (InputError, 'dtype'))(lambda make=make: make(2, dtype=str))
    case('creation', f'{fname}((2, 3)) works', ('value', lambda r: r.shape == (2, 3)))(lambda make=make: make((2, 3)))
case('creation', "full((2,), 'x')", (InputError, 'mg.full: value'))(lambda: mg.full((2,), 'x'))
case('creation', 'full((2,), [1, 2])', (InputError, 'one number'))(lambda: mg.full((2,), [1, 2]))
case('creation', 'full(-2, 1.0)', (InputError, 'mg.full: shape'))(lambda: mg.full(-2, 1.0))
case('creation', "arange('a')", (InputError, 'mg.arange: start'))(lambda: mg.arange('a'))
case('creation', 'arange(3) works', ('value', lambda r: r.numpy().tolist() == [0, 1, 2]))(lambda: mg.arange(3))
for bad in ('a', -1, 2.5, None):
    case('creation', f'manual_seed({bad!r})', (InputError, 'mg.manual_seed: seed'))(lambda bad=bad: mg.manual_seed(bad))
case('creation', "tensor(requires_grad='no')", (InputError, 'requires_grad'))(lambda: mg.tensor(1.0, requires_grad='no'))
case('creation', 'tensor(name=3)', (InputError, 'name must be a string'))(lambda: mg.tensor(1.0, name=3))
for bad in ('notadtype', str, object, 'datetime64[s]', complex):
    case('creation', f'placeholder({bad!r:.20})', (InputError, 'mg.placeholder: dtype'))(
        lambda bad=bad: _construct(lambda _: mg.placeholder(bad), None))
for bad in ('ab', (-3, 2), (2.5,), 'x'):
    case('creation', f'placeholder(shape={bad!r})', (InputError, 'mg.placeholder: shape'))(
        lambda bad=bad: _construct(lambda _: mg.placeholder(mg.float32, bad), None))
case('creation', 'placeholder(shape=3) is (3,)', ('value', lambda r: r.shape == (3,)))(
    lambda: _construct(lambda _: mg.placeholder(mg.float32, 3), None))
case('creation', 'placeholder(shape=(-1, 2)) is (?, 2)', ('value', lambda r: r.shape == (None, 2)))(
    lambda: _construct(lambda _: mg.placeholder(mg.float32, (-1, 2)), None))
case('creation', 'placeholder(name=3)', (InputError, 'name must be a string'))(
    lambda: _construct(lambda _: mg.placeholder(mg.float32, (2,), name=3), None))
for bad in (-1, 0, 2.5, 'a', True):
    case('creation', f'nn.Linear({bad!r}, 3)', (InputError, 'nn.Linear: in_features'))(lambda bad=bad: mg.nn.Linear(bad, 3))
    case('creation', f'nn.Linear(3, {bad!r})', (InputError, 'nn.Linear: out_features'))(lambda bad=bad: mg.nn.Linear(3, bad))
case('creation', 'nn.Sequential(3)', (InputError, 'not a Module'))(lambda: mg.nn.Sequential(3))


class _NoForward(mg.nn.Module):
    pass


case('creation', 'a Module without forward', (InputError, 'forward'))(lambda: _NoForward()(mg.tensor([1.0])))

# ------------------------------------------------------------------ ops and shapes, eager and in a graph
BINARY = {'add': lambda a, b: a + b, 'sub': lambda a, b: a - b, 'mul': lambda a, b: a * b,
          'div': lambda a, b: a / b, 'pow': lambda a, b: a ** b, 'maximum': mg.maximum, 'minimum': mg.minimum,
          'less': lambda a, b: a < b, 'equal': mg.equal, 'greater_equal': lambda a, b: a >= b,
          'matmul': lambda a, b: a @ b, 'where': lambda a, b: mg.where(a > 0, a, b)}
for op, f in BINARY.items():
    name = {'sub': 'add', 'less': 'less', 'greater_equal': 'less', 'where': 'where'}.get(op, op)
    for sa, sb in (((3,), (4,)), ((2, 3), (3, 2)), ((5, 1, 3), (2, 4))):
        if op == 'matmul' and sa == (2, 3):
            continue                                  # (2, 3) @ (3, 2) is fine
        shapes = (str(sa), str(sb)) + (() if op in ('sub', 'greater_equal', 'div') else (name,)) + \
            (() if op == 'matmul' else ('broadcast',))
        case('ops', f'eager {op} {sa} {sb}', (ShapeError, shapes))(
            lambda f=f, sa=sa, sb=sb: f(mg.tensor(np.ones(sa)), mg.tensor(np.ones(sb))))

        def built(f=f, sa=sa, sb=sb):
            g = mg.Graph()
            with g.as_default():
                return f(mg.placeholder(mg.float32, sa), mg.placeholder(mg.float32, sb))
        case('graph building', f'symbolic {op} {sa} {sb}', (ShapeError, shapes))(built)

REDUCED = {'sum': (2,), 'max': (2,), 'mean': (2,), 'softmax': (2, 3), 'logsumexp': (2,)}     # axis=-1 of (2, 3)
REDUCE = {'sum': lambda t, a: t.sum(axis=a), 'max': lambda t, a: t.max(axis=a), 'mean': lambda t, a: t.mean(axis=a),
          'softmax': lambda t, a: mg.softmax(t, axis=a), 'logsumexp': lambda t, a: mg.logsumexp(t, axis=a)}
for op, f in REDUCE.items():
    for axis in (2, -3, 5, (0, 0)):
        case('ops', f'{op}(axis={axis!r}) of a 2-D tensor', (ShapeError, (f'{op}: axis', str(axis))))(
            lambda f=f, axis=axis: f(mg.tensor(np.ones((2, 3))), axis))
    for axis in (1.5, 'x'):
        case('ops', f'{op}(axis={axis!r})', (MinigradError, 'axis'))(lambda f=f, axis=axis: f(mg.tensor(np.ones((2, 3))), axis))
    case('ops', f'{op}(axis=-1) is over the last axis', ('value', lambda r, op=op: r.shape == REDUCED[op]))(
        lambda f=f: f(mg.tensor(np.arange(6.0).reshape(2, 3)), -1))

for shape in ((4,), (2, 2), (7, -1), (-1, -1), (0,), (2.5, 2)):
    case('ops', f'reshape (2, 3) to {shape}', (InputError, 'reshape: the shape must be ints') if 2.5 in shape else
         (ShapeError, ('reshape', '(2, 3)')))(
        lambda shape=shape: mg.tensor(np.ones((2, 3))).reshape(*shape))
for perm in ((0,), (0, 0), (0, 2), (1, 2, 0)):
    case('ops', f'transpose (2, 3) by {perm}', (MinigradError, ''))(
        lambda perm=perm: mg.transpose(mg.tensor(np.ones((2, 3))), perm))
for index in (5, -4, (0, 0), (slice(None), 7), 'a', 1.5):
    case('ops', f'index a (3,) tensor by {index!r}', (ShapeError, ('getitem', 'shape (3,)')))(
        lambda index=index: mg.tensor(np.ones(3))[index])
case('ops', 'concatenate mismatched', (ShapeError, 'concatenate'))(
    lambda: mg.concatenate([mg.tensor(np.ones((2, 3))), mg.tensor(np.ones((2, 4)))], axis=0))
case('ops', 'stack mismatched', (ShapeError, 'stack'))(
    lambda: mg.stack([mg.tensor(np.ones(3)), mg.tensor(np.ones(4))]))
case('ops', 'concatenate of nothing', (MinigradError, ''))(lambda: mg.concatenate([], axis=0))
for v in ('abc', None, {}, object()):
    case('ops', f'tensor + {type(v).__name__}', (MinigradError, ''))(lambda v=v: mg.tensor([1.0]) + v)
    case('ops', f'exp({type(v).__name__})', (MinigradError, ''))(lambda v=v: mg.exp(v))
case('ops', 'item() of 3 values', (MinigradError, ('item()', 'one-element')))(lambda: mg.tensor([1.0, 2.0, 3.0]).item())
case('ops', 'bool() of a 2-element comparison', (MinigradError, 'ambiguous'))(lambda: bool(mg.tensor([1.0, 2.0]) < 3))
case('ops', 'mixing a Tensor and a Symbol', (GraphError, 'mixes'))(lambda: mg.tensor([1.0, 2, 3]) + _graph()[1])


def _symbol_plus_tensor():
    g, x, y = _graph()
    with g.as_default():
        return x + mg.tensor([1.0, 2.0, 3.0])


case('ops', 'a Symbol plus a Tensor while building a graph', (GraphError, 'mixes'))(_symbol_plus_tensor)
case('ops', 'matmul of a 0-d operand', (ShapeError, ('matmul', 'at least one dimension')))(
    lambda: mg.matmul(mg.tensor(2.0), mg.tensor([1.0])))
case('ops', 'broadcast_to (3,) to (2, 4)', (ShapeError, 'broadcast_to'))(
    lambda: mg.broadcast_to(mg.tensor(np.ones(3)), (2, 4)))

# ------------------------------------------------------------------ axes and shapes (issue 34)
_T1, _T2 = (lambda: mg.tensor([1.0, 2.0])), (lambda: mg.tensor(np.ones((2, 3))))
case('axes', 'transpose(1-D, 5)', (ShapeError, 'not a permutation'))(lambda: mg.transpose(_T1(), 5))
case('axes', 'transpose(2-D, 0, 3)', (ShapeError, 'not a permutation'))(lambda: mg.transpose(_T2(), 0, 3))
case('axes', 'transpose(2-D, 0)', (ShapeError, 'not a permutation'))(lambda: mg.transpose(_T2(), 0))
case('axes', "transpose(2-D, 'a', 0)", (InputError, 'axes must be ints'))(lambda: mg.transpose(_T2(), 'a', 0))
case('axes', 'transpose(2-D, -1, 0) works', ('value', lambda r: r.shape == (3, 2)))(lambda: mg.transpose(_T2(), -1, 0))
for axis in (5, -3, 'x', 1.0, True):
    case('axes', f'concatenate(axis={axis!r}) eager', (ShapeError, 'concatenate: axis'))(
        lambda axis=axis: mg.concatenate([_T2(), _T2()], axis=axis))

    def _concat_sym(axis=axis):
        g, x, y = _graph()
        with g.as_default():
            return mg.concatenate([x, x], axis=axis)
    case('axes', f'concatenate(axis={axis!r}) on Symbols', (ShapeError, 'concatenate: axis'))(_concat_sym)
case('axes', 'broadcast_to((3,), (-1, 3))', (InputError, 'broadcast_to: shape'))(
    lambda: mg.broadcast_to(mg.tensor([1.0, 2.0, 3.0]), (-1, 3)))
case('axes', "broadcast_to((3,), 'ab')", (InputError, 'broadcast_to: shape'))(
    lambda: mg.broadcast_to(mg.tensor([1.0, 2.0, 3.0]), 'ab'))


def _compile_extra_shapes():
    g, x, y = _graph()
    with g.as_default():
        out = x * 2.0
    return mg.compile(out, [x], input_shapes=[(3,), (4,)])


case('axes', 'compile(input_shapes=[too, many])', (FeedError, 'input_shapes has 2 entries'))(_compile_extra_shapes)

# ------------------------------------------------------------------ control flow (issue 34)
def _in_graph(f):
    g, x, y = _graph()
    with g.as_default():
        s = mg.placeholder(mg.float32, (), name='s')
        return f(s)


_inc, _lt3 = (lambda v: v + 1), (lambda v: v < 3)
for what, call, err, frag in [
        ('while_loop(cond=3)', lambda v: mg.while_loop(3, _inc, [v]), InputError, 'cond must be a function'),
        ('while_loop(body=3)', lambda v: mg.while_loop(_lt3, 3, [v]), InputError, 'body must be a function'),
        ("while_loop(max_iterations='a')", lambda v: mg.while_loop(_lt3, _inc, [v], max_iterations='a'),
         InputError, 'max_iterations'),
        ('while_loop(max_iterations=-1)', lambda v: mg.while_loop(_lt3, _inc, [v], max_iterations=-1),
         InputError, 'max_iterations'),
        ('while_loop with a float condition', lambda v: mg.while_loop(lambda a: a * 1.0, _inc, [v]),
         GraphError, 'boolean scalar'),
        ('while_loop body returning None', lambda v: mg.while_loop(_lt3, lambda a: None, [v]),
         InputError, 'returned None'),
        ('while_loop without loop vars', lambda v: mg.while_loop(lambda: True, lambda: (), []),
         InputError, 'at least one loop variable'),
        ('cond(pred, 3, 4)', lambda v: mg.cond(v > 0, 3, 4), InputError, 'true_fn must be a function'),
        ('cond with a float predicate', lambda v: mg.cond(v * 1.0, lambda: v, lambda: -v), GraphError,
         'bool scalar'),
        ('cond with a branch returning None', lambda v: mg.cond(v > 0, lambda: None, lambda: v), InputError,
         'returned None')]:
    case('control flow', f'{what} on Symbols', (err, frag))(lambda call=call: _in_graph(call))
case('control flow', 'eager while_loop(cond=3)', (InputError, 'cond must be a function'))(
    lambda: mg.while_loop(3, _inc, [mg.tensor(1.0)]))
case('control flow', 'eager cond(pred, 3, 4)', (InputError, 'true_fn must be a function'))(
    lambda: mg.cond(mg.tensor(True), 3, 4))
case('control flow', 'eager while_loop works', ('value', lambda r: float(r[0].item()) == 3.0))(
    lambda: mg.while_loop(_lt3, _inc, [mg.tensor(0.0)]))

# ------------------------------------------------------------------ nn and optim (issue 34)
def _w():
    return mg.tensor([1.0, 2.0], requires_grad=True)


def _step_with_wrong_grad():
    p = mg.nn.Parameter(np.ones(3, np.float32))
    opt = mg.optim.SGD([p], lr=0.1)
    p.grad = mg.tensor(np.ones(4, np.float32))
    opt.step()


def _compiled_model(loss='mse', out=1):
    m = mg.nn.Sequential(mg.nn.Linear(2, out))
    m.compile(optimizer='sgd', loss=loss)
    return m


for what, call, err, frag in [
        ('SGD of a non-leaf', lambda: mg.optim.SGD([_w() * 2], lr=0.1), InputError, 'non-leaf'),
        ('SGD([w, w])', lambda: (lambda w: mg.optim.SGD([w, w], lr=0.1))(_w()), InputError, 'appears twice'),
        ('SGD(momentum=-1)', lambda: mg.optim.SGD([_w()], lr=0.1, momentum=-1), InputError, 'momentum'),
        ("SGD(momentum='a')", lambda: mg.optim.SGD([_w()], lr=0.1, momentum='a'), InputError, 'momentum'),
        ('Adam(betas=(1.5, 0.9))', lambda: mg.optim.Adam([_w()], betas=(1.5, 0.9)), InputError, 'betas[0]'),
        ('Adam(betas=0.9)', lambda: mg.optim.Adam([_w()], betas=0.9), InputError, 'a pair'),
        ('Adam(eps=-1)', lambda: mg.optim.Adam([_w()], eps=-1), InputError, 'eps'),
        ('step with a wrong-shape grad', _step_with_wrong_grad, ShapeError, '.grad has shape (4,)'),
        ('fit on strings', lambda: _compiled_model().fit(['a', 'b'], ['c', 'd'], verbose=0), InputError, 'x'),
        ('fit on an empty x', lambda: _compiled_model().fit(np.ones((0, 2)), np.ones((0, 1)), verbose=0),
         InputError, 'N >= 1'),
        ('fit(batch_size=0)', lambda: _compiled_model().fit(np.ones((4, 2)), np.ones((4, 1)), batch_size=0,
                                                         verbose=0), InputError, 'batch_size'),
        ('fit(epochs=-1)', lambda: _compiled_model().fit(np.ones((4, 2)), np.ones((4, 1)), epochs=-1, verbose=0),
         InputError, 'epochs'),
        ('fit with class targets out of range', lambda: _compiled_model('cross_entropy', 3).fit(
            np.ones((4, 2), np.float32), np.array([0, 1, 5, 2]), verbose=0), InputError, 'must be in [0, 3)'),
        ("predict('abc')", lambda: _compiled_model().predict('abc'), InputError, 'model input x')]:
    case('nn and optim', what, (err, frag))(call)
case('nn and optim', 'fit(epochs=0) trains nothing', ('value', lambda h: h.history['loss'] == []))(
    lambda: _compiled_model().fit(np.ones((4, 2)), np.ones((4, 1)), epochs=0, verbose=0))

# ------------------------------------------------------------------ backward's arguments (issue 34)
def _xy():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    return x, x * 3


def _backward_onto(bad_grad):
    x, y = _xy()
    x.grad = bad_grad
    try:
        y.sum().backward()
    finally:
        assert x.grad is bad_grad          # nothing changed
    return x.grad


case('backward', "backward(gradient='ab')", (InputError, 'backward(): gradient'))(
    lambda: _xy()[1].backward(gradient='ab'))
case('backward', 'backward(gradient=[1.0, None])', (InputError, 'backward(): gradient'))(
    lambda: _xy()[1].backward(gradient=[1.0, None]))
case('backward', 'an int .grad assigned before backward', (BackwardError, 'has a .grad of'))(
    lambda: _backward_onto(mg.tensor([1, 2])))
case('backward', 'a wrong-shape .grad assigned before backward', (BackwardError, 'has a .grad of'))(
    lambda: _backward_onto(mg.tensor([1.0, 2.0, 3.0])))
case('backward', 'an array as .grad', (BackwardError, 'has a .grad of'))(lambda: _backward_onto(np.ones(2)))

# ------------------------------------------------------------------ feeds, Session, trace, jit (issue 34)
def _graph_y():
    g, x, y = _graph()
    with g.as_default():
        out = x * 2.0
    return g, x, out


def _mutating_pass(graph):
    graph.nodes.pop()
    return graph


def _assign_float_into_int():
    with mg.Graph().as_default():
        return mg.Variable(np.array([1, 2])).assign(np.array([2.5, 1.0]))


def _set_item():
    t = mg.tensor([1.0, 2.0])
    t[0] = 5


for what, call, err, frag in [
        ('Session.run(feed_dict=3)', lambda: (lambda g, x, y: mg.Session(g).run(y, 3))(*_graph_y()), FeedError,
         'feed_dict must be a dict'),
        ('Session.run(feed_dict=[(x, v)])', lambda: (lambda g, x, y: mg.Session(g).run(y, [(x, np.ones(3))]))(
            *_graph_y()), FeedError, 'feed_dict must be a dict'),
        ('trace(3, ...)', lambda: mg.trace(3, np.ones(3)), InputError, 'expected a function'),
        ('a traced function called with two arguments', lambda: mg.trace(lambda a: a * 2, np.ones(3))(
            np.ones(3), np.ones(3)), InputError, 'traced with 1 inputs, got 2'),
        ('jit called with datetimes', lambda: mg.jit(lambda a: a * 2)(np.array(['2020-01-01'], 'datetime64[s]')),
         InputError, 'dtype'),
        ('jit called with strings', lambda: mg.jit(lambda a: a * 2)(np.array(['a', 'b'])), InputError, 'dtype'),
        ('assign a float into an int Variable', _assign_float_into_int, ShapeError, 'cannot be stored'),
        ('t[0] = 5', _set_item, InputError, 'mg.where'),
        ('a pass that edits its input graph', lambda: (lambda g, x, y: mg.compile(y, [x], passes=[_mutating_pass]))(
            *_graph_y()), GraphError, 'changed the graph it was given'),
        ("import_onnx(b'garbage')", lambda: mg.import_onnx(b'garbage'), InputError, 'not an ONNX model')]:
    case('feeds, trace, jit', what, (err, frag))(call)

# ------------------------------------------------------------------ pickling and copying (issue 34)
def _pickled(obj):
    return pickle.loads(pickle.dumps(obj))


def _prog_and_friends():
    g, x, y = _graph_y()
    return {'Program': mg.compile(y, [x], backend='numpy'), 'Session': mg.Session(g),
            'traced function': mg.trace(lambda a: a * 2, np.ones(3)), 'jit function': mg.jit(lambda a: a * 2)}


for what in ('Program', 'Session', 'traced function', 'jit function'):
    for how, copier in (('pickle', _pickled), ('deepcopy', copy.deepcopy)):
        case('pickling', f'{how} of a {what}', (InputError, 'cannot be pickled or deep-copied'))(
            lambda what=what, copier=copier: copier(_prog_and_friends()[what]))
for how, copier in (('pickle', _pickled), ('deepcopy', copy.deepcopy)):
    case('pickling', f'{how} of a non-leaf tensor', (InputError, 'detach()'))(
        lambda copier=copier: copier(mg.tensor([1.0], requires_grad=True) * 2))
    case('pickling', f'{how} of a leaf tensor round-trips', ('value', lambda r: r.numpy().tolist() == [1.0]))(
        lambda copier=copier: copier(mg.tensor([1.0], requires_grad=True)))
    case('pickling', f'{how} of a Graph round-trips and runs', ('value', lambda r: r.tolist() == [2.0, 2.0, 2.0]))(
        lambda copier=copier: (lambda h: mg.Session(h).run(h.nodes[-1].outputs[0], {
            next(n.outputs[0] for n in h.nodes if n.op == 'placeholder' and n.outputs[0].name == 'x'): np.ones(3)}))(
            copier(_graph_y()[0])))

# ------------------------------------------------------------------ atomicity (issue 34)
def _leaves_graph_as_it_was(build):
    """Run `build` (which must fail) in a graph; the graph prints the same before and after."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        a = mg.abs(x)                                   # a finished call: its nodes belong to the graph
        before = str(g), len(g.nodes)
        try:
            build(x, a)
        finally:
            assert (str(g), len(g.nodes)) == before, 'the failed call left nodes in the graph'


for what, build in [('mg.min(x, axis=3)', lambda x, a: mg.min(x, axis=3)),
                    ('x + [1, 2]', lambda x, a: x + [1, 2]),
                    ('mg.abs(x) + a bad shape', lambda x, a: a + np.ones(4)),
                    ('mg.softmax(x, axis=5)', lambda x, a: mg.softmax(x, axis=5)),
                    ('x @ a bad shape', lambda x, a: x @ np.ones((4, 2))),
                    ('x - a bad shape', lambda x, a: x - np.ones(4))]:
    case('atomicity', f'{what} leaves the graph as it was', (ShapeError, ''))(
        lambda build=build: _leaves_graph_as_it_was(build))

# ------------------------------------------------------------------ feeds and Session
def _session_run(feeds_of, fetch_of=lambda x, y: x * 2.0):
    g, x, y = _graph()
    with g.as_default():
        out = fetch_of(x, y)
    return mg.Session(g).run(out, feeds_of(x, y))


for name, feeds, frag in [
        ('missing feed', lambda x, y: {}, 'needs a value'),
        ('wrong shape', lambda x, y: {x: np.ones(4)}, 'shape'),
        ('string array', lambda x, y: {x: np.array(['a', 'b', 'c'])}, ''),
        ('None value', lambda x, y: {x: None}, ''),
        ('dict value', lambda x, y: {x: {}}, ''),
        ('key not a Symbol', lambda x, y: {'x': np.ones(3)}, 'not a Symbol'),
        ('key from another graph', lambda x, y: {_graph()[1]: np.ones(3)}, 'another graph'),
        ('Symbol as value', lambda x, y: {x: x}, 'Symbol'),
        ('ragged list', lambda x, y: {x: [[1, 2], [3]]}, ''),
        ('complex values', lambda x, y: {x: np.ones(3) * 1j}, '')]:
    case('feeds', name, (FeedError if frag else MinigradError, frag))(lambda feeds=feeds: _session_run(feeds))
case('feeds', 'fetch a Tensor', (FeedError, 'cannot fetch'))(
    lambda: mg.Session(_graph()[0]).run(mg.tensor([1.0])))
case('feeds', 'fetch from another graph', (FeedError, 'another graph'))(
    lambda: mg.Session(mg.Graph()).run(_graph()[1]))
for v in (42, 'g', np.ones(3)):
    case('feeds', f'Session({type(v).__name__})', (InputError, 'expected a Graph'))(lambda v=v: mg.Session(v))
case('feeds', 'int feed into float placeholder works', ('value', lambda r: r.dtype == np.float32))(
    lambda: _session_run(lambda x, y: {x: np.arange(3)}))


def _closed():
    g, x, y = _graph()
    s = mg.Session(g)
    s.close()
    return s.run(x * 2.0, {x: np.ones(3)})


case('feeds', 'run a closed Session', (GraphError, 'closed'))(_closed)

# ------------------------------------------------------------------ gradients and backward
case('gradients', 'gradients of a Tensor', (GraphError, 'expected Symbols'))(
    lambda: mg.gradients(mg.tensor([1.0]), [mg.tensor([1.0])]))
case('gradients', 'gradients of an int value', (MinigradError, 'only float'))(
    lambda: (lambda g, x, y: mg.gradients(mg.cast(x, dtype=mg.int64).sum(), [x]))(*_graph()))
case('gradients', 'gradients across graphs', (GraphError, 'another graph'))(
    lambda: mg.gradients(_graph()[1].sum(), [_graph()[1]]))
case('gradients', 'backward of a non-scalar', (BackwardError, ('not a scalar', 'gradient', '(2,)')))(
    lambda: (mg.tensor([1.0, 2.0], requires_grad=True) * 2.0).backward())
case('gradients', 'backward(gradient=) of the wrong shape', (ShapeError, 'gradient has shape'))(
    lambda: (mg.tensor([1.0, 2.0], requires_grad=True) * 2.0).backward(gradient=np.ones(3)))
case('gradients', 'backward without requires_grad', (BackwardError, 'requires_grad=True'))(
    lambda: mg.tensor([1.0]).sum().backward())
case('gradients', 'retain_grad without requires_grad', (BackwardError, 'retain_grad'))(
    lambda: mg.tensor(1.0).retain_grad())
case('gradients', 'tensor([1, 2], requires_grad=True)', (BackwardError, ('floating point', 'int64')))(
    lambda: mg.tensor([1, 2], requires_grad=True))
case('gradients', 'tensor([True], requires_grad=True)', (BackwardError, 'floating point'))(
    lambda: mg.tensor([True], requires_grad=True))


def _int_requires_grad():
    t = mg.tensor([1, 2])
    t.requires_grad = True


case('gradients', 'requires_grad = True on an int tensor', (BackwardError, 'floating point'))(_int_requires_grad)


def _twice():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


case('gradients', 'backward twice', (BackwardError, ('retain_graph=True', 'second time')))(_twice)


def _leaf_inplace(op):
    x = mg.tensor([1.0], requires_grad=True)
    exec(f'x {op} 1.0', {'x': x})


for op in ('+=', '-=', '*=', '/='):
    case('gradients', f'in-place {op} on a leaf that requires grad', (BackwardError, (
        'in-place', 'leaf', 'requires grad', 'no_grad')))(lambda op=op: _leaf_inplace(op))


def _inplace_changing(what):
    if what == 'shape':
        x = mg.tensor([1.0, 2.0])
        x += mg.tensor(np.ones((3, 2)))
    else:
        i = mg.tensor([1, 2])
        i += 0.5


for what in ('shape', 'dtype'):
    case('gradients', f'in-place += changing the {what}', (ShapeError, what))(lambda what=what: _inplace_changing(what))


def _write_numpy():
    x = mg.tensor([1.0], requires_grad=True)
    x.numpy()[0] = 5.0


case('gradients', 'writing through numpy() of a tensor that requires grad', (ValueError, 'read-only'))(_write_numpy)

# ------------------------------------------------------------------ losses
logits = lambda: mg.tensor(np.zeros((3, 4)))
for name, target, err, frag in [
        ('out of range', [0, 1, 4], InputError, '[0, 4)'), ('negative', [0, -1, 2], InputError, '[0, 4)'),
        ('float targets', [0.0, 1.0, 2.0], InputError, 'integer class'), ('batch mismatch', [0, 1], ShapeError, 'targets of shape'),
        ('2-D targets', [[0], [1], [2]], ShapeError, 'targets of shape'), ('string targets', ['a', 'b', 'c'], InputError, ''),
        ('None target', None, InputError, '')]:
    case('losses', f'CrossEntropyLoss {name}', (err, frag))(lambda target=target: mg.nn.CrossEntropyLoss()(logits(), target))
for red in ('avg', None, 1, 'MEAN'):
    for loss in (mg.nn.CrossEntropyLoss, mg.nn.MSELoss):
        case('losses', f'{loss.__name__}(reduction={red!r})', (InputError, 'reduction'))(lambda loss=loss, red=red: loss(reduction=red))
case('losses', "CrossEntropyLoss reduction='none' gives one loss per row", ('value', lambda r: r.shape == (3,)))(
    lambda: mg.nn.CrossEntropyLoss(reduction='none')(logits(), [0, 1, 2]))
case('losses', 'MSELoss (N, 1) against (N,)', (ShapeError, 'would broadcast'))(
    lambda: mg.nn.MSELoss()(mg.tensor(np.ones((3, 1))), mg.tensor(np.ones(3))))
case('losses', 'unknown loss name', (MinigradError, 'unknown loss'))(lambda: mg.nn.get_loss('hinge'))

# ------------------------------------------------------------------ optimizers
def _one_step(opt):
    """How far one step of `opt` (lr 0.1) moves a Parameter whose gradient is +1 (negative: downhill)."""
    w = mg.nn.Parameter([1.0, 2.0])
    (w * 1.0).sum().backward()
    opt([w], 0.1).step()
    return float((w.numpy() - np.array([1.0, 2.0], np.float32)).max())


for opt in (mg.optim.SGD, mg.optim.Adam):
    p = lambda: [mg.nn.Parameter([1.0, 2.0])]
    for name, args, frag in [('empty list', ([], 0.1), 'empty'), ('plain tensor', ([mg.tensor([1.0])], 0.1), 'require grad'),
                             ('numpy array', ([np.ones(2)], 0.1), 'ndarray'), ('negative lr', (p(), -0.1), 'learning rate'),
                             ('string lr', (p(), 'fast'), 'learning rate'), ('nan lr', (p(), float('nan')), 'learning rate'),
                             ('one Parameter, not a list', (mg.nn.Parameter([1.0]), 0.1), 'list of Parameters'),
                             ('None', (None, 0.1), 'list of Parameters')]:
        case('optimizers', f'{opt.__name__} {name}', (InputError, frag))(lambda opt=opt, args=args: opt(*args))
    case('optimizers', f'{opt.__name__} steps against the gradient', ('value', lambda r: r < 0))(
        lambda opt=opt: _one_step(opt))
case('optimizers', 'unknown optimizer name', (InputError, 'unknown optimizer'))(lambda: mg.optim.get('sgdd', []))

# ------------------------------------------------------------------ nn layers
case('nn', 'Linear with the wrong feature size', (ShapeError, ''))(lambda: mg.nn.Linear(3, 2)(mg.tensor(np.ones((4, 5)))))
case('nn', 'fit before compile', (MinigradError, 'compile'))(
    lambda: mg.nn.Sequential(mg.nn.Linear(2, 1)).fit(np.ones((4, 2)), np.ones((4, 1))))


def _fit_mismatch():
    m = mg.nn.Sequential(mg.nn.Linear(2, 1))
    m.compile(optimizer='sgd', loss='mse')
    m.fit(np.ones((4, 2)), np.ones((3, 1)), verbose=0)


case('nn', 'fit with x and y of different lengths', (ShapeError, 'same length'))(_fit_mismatch)

# ------------------------------------------------------------------ drawing and steppers
for v in (42, 'graph', None, np.ones(3)):
    case('viz', f'draw({type(v).__name__})', (InputError, 'cannot draw'))(lambda v=v: mg.draw(v))
    case('viz', f'Stepper({type(v).__name__})', (MinigradError, ''))(lambda v=v: mg.viz.Stepper(v))
case('viz', "draw(color_by='x')", (InputError, 'color_by'))(lambda: mg.draw(mg.tensor([1.0]) * 2, color_by='x'))
case('viz', "draw(rankdir='XX')", (InputError, 'rankdir'))(lambda: mg.draw(mg.tensor([1.0]) * 2, rankdir='XX'))
case('viz', 'draw(max_nodes=-1)', (InputError, 'max_nodes'))(lambda: mg.draw(mg.tensor([1.0]) * 2, max_nodes=-1))
case('viz', 'Stepper of an empty graph', (InputError, 'the graph is empty'))(lambda: mg.viz.Stepper(mg.Graph()))
case('viz', 'memory_timeline(42)', (InputError, 'expected a compiled Program'))(lambda: mg.viz.memory_timeline(42))
for v in (42, None, 'abc', mg.nn.Linear(2, 2)):
    case('viz', f'PassStepper({type(v).__name__})', (InputError, 'expected a compiled Program'))(
        lambda v=v: mg.viz.PassStepper(v))
case('viz', 'Stepper of an empty tape', (MinigradError, 'empty'))(lambda: mg.viz.Stepper(mg.Tape()))
case('viz', 'PathStepper of an empty tape', (MinigradError, 'PathStepper: the tape is empty'))(
    lambda: mg.viz.PathStepper(mg.Tape(), mg.tensor(1.0)))
case('viz', 'PathStepper of a number', (InputError, 'expected a Tape or a Tensor'))(
    lambda: mg.viz.PathStepper(42, mg.tensor(1.0)))

# ------------------------------------------------------------------ compile, jit, trace
def _prog(backend='numpy'):
    g, x, y = _graph()
    with g.as_default():
        out = mg.relu(x * 2.0 + 1.0)
    return mg.compile(out, [x], backend=backend)


for v in (42, 'y', None):
    case('compile', f'compile({type(v).__name__})', (GraphError, ''))(lambda v=v: mg.compile(v, []))
case('compile', 'compile with a non-placeholder input', (GraphError, 'placeholders'))(
    lambda: (lambda g, x, y: mg.compile(x * 2.0, [x * 3.0]))(*_graph()))
case('compile', 'compile with a missing input', (FeedError, 'not in inputs'))(lambda: (lambda g, x, y: mg.compile(x * 2.0, []))(*_graph()))
case('compile', 'unknown pass', (GraphError, 'unknown pass'))(lambda: (lambda g, x, y: mg.compile(x * 2.0, [x], passes=['nope']))(*_graph()))
case('compile', 'unknown backend', (GraphError, 'unknown backend'))(lambda: (lambda g, x, y: mg.compile(x * 2.0, [x], backend='gpu'))(*_graph()))
for name, args, frag in [('too few inputs', (), 'takes 1 inputs'), ('wrong shape', (np.ones(4),), 'compiled for'),
                         ('string array', (np.array(['a', 'b', 'c']),), 'expected bool, integer or float values'), ('None', (None,), ''),
                         ('ragged', ([[1], [2, 3]],), ''), ('two inputs', (np.ones(3), np.ones(3)), 'takes 1')]:
    case('compile', f'program called with {name}', (MinigradError, frag))(lambda args=args: _prog()(*args))
case('compile', 'program out= of the wrong shape', (FeedError, 'must be a float32 array'))(
    lambda: _prog()(np.ones(3, np.float32), out=np.empty(4, np.float32)))
case('compile', 'program works on lists', ('value', lambda r: list(r) == [3.0, 0.0, 7.0]))(lambda: _prog()([1, -1, 3]))
for v in (42, None, 'f'):
    case('compile', f'jit({type(v).__name__})', (InputError, 'expected a function'))(lambda v=v: mg.jit(v))
case('compile', 'trace of a function returning a string', (MinigradError, ''))(lambda: mg.trace(lambda t: 'x', np.ones(3)))


# ------------------------------------------------------------------ dtypes (issue 34): numpy 2's rules (NEP 50)
def _modes(f, *arrays):
    """f on the arrays as tensors (eager), then as placeholders run by a Session and compiled (numpy
    backend): the three results, which must agree."""
    out = [f(*[mg.tensor(a, dtype=a.dtype) for a in arrays]).numpy()]
    g = mg.Graph()
    with g.as_default():
        ps = [mg.placeholder(a.dtype, a.shape) for a in arrays]
        r = f(*ps)
    out.append(mg.Session(g).run(r, dict(zip(ps, arrays))))
    out.append(mg.compile(r, ps)(*arrays))
    return [np.asarray(o) for o in out]


def _same(want):
    """Every mode gives numpy's values in numpy's dtype."""
    want = np.asarray(want)
    return lambda rs: all(r.dtype == want.dtype and np.array_equal(r, want) for r in rs)


def _compiled_with(dt):
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(dt, (3,))
        return mg.compile(p * 2, [p])


_U8, _I8 = np.array([0, 2, 250], np.uint8), np.array([1, -128, 3], np.int8)
_B, _F32 = np.array([True, False, True]), np.array([1.0, 2.0, 3.0], np.float32)
for bad in (str, bytes, 'datetime64[s]', 'timedelta64[s]', complex, 'notadtype', object, np.dtype([('a', 'f4')])):
    case('dtypes', f'cast to {bad!r:.30}', (InputError, 'cast: dtype'))(
        lambda bad=bad: mg.tensor([1.0, 2.0]).astype(bad))
    case('dtypes', f'mg.cast of a Symbol to {bad!r:.30}', (InputError, 'cast: dtype'))(
        lambda bad=bad: _in_graph(lambda s: mg.cast(s, bad)))
    case('dtypes', f'compile a placeholder of {bad!r:.30}', (InputError, 'mg.placeholder: dtype'))(
        lambda bad=bad: _compiled_with(bad))
for name, arr in (('unicode', np.array(['a', 'b'])), ('datetime', np.zeros(2, 'datetime64[s]')),
                  ('bytes', np.zeros(2, 'S2')), ('structured', np.zeros(2, [('a', 'f4')]))):
    case('dtypes', f'jit called with a {name} array', (InputError, 'dtype'))(
        lambda arr=arr: mg.jit(lambda t: t * 2)(arr))
case('dtypes', 'sum(keepdims=np.True_) in every mode', ('value', _same(np.sum(_F32, 0, keepdims=True))))(
    lambda: _modes(lambda t: mg.sum(t, 0, keepdims=np.True_), _F32))
case('dtypes', "sum(keepdims='yes')", (InputError, 'sum: keepdims'))(lambda: mg.sum(mg.tensor(_F32), keepdims='yes'))
for what, f, arrays, want in [
        ('uint8 - 1', lambda u: u - 1, (_U8,), _U8 - 1), ('-uint8', lambda u: -u, (_U8,), -_U8),
        ('abs(uint8)', mg.abs, (_U8,), np.abs(_U8)), ('min(uint8)', mg.min, (_U8,), np.min(_U8)),
        ('min(int8) with -128', mg.min, (_I8,), np.min(_I8)), ('1 - uint8', lambda u: 1 - u, (_U8,), 1 - _U8),
        ('minimum(uint8, uint8)', mg.minimum, (_U8, _U8[::-1].copy()), np.minimum(_U8, _U8[::-1])),
        ('int8 - uint8 is int16', lambda a, b: a - b, (_I8, _U8), _I8 - _U8),
        ('float32 - bool is float32', lambda a, b: a - b, (_F32, _B), _F32 - _B),
        ('int8 - bool is int8', lambda a, b: a - b, (_I8, _B), _I8 - _B),
        ('uint8 * 2 stays uint8', lambda u: u * 2, (_U8,), _U8 * 2), ('sum(uint8) is uint64', mg.sum, (_U8,), np.sum(_U8)),
        ('int8 + 1.5 is float64', lambda a: a + 1.5, (_I8,), _I8 + 1.5)]:
    case('dtypes', f'{what} in every mode', ('value', _same(want)))(lambda f=f, arrays=arrays: _modes(f, *arrays))
for what, f in (('bool - bool', lambda a, b: a - b), ('-bool', lambda a, b: -a)):
    case('dtypes', f'{what} eager', (ShapeError, 'numpy cannot'))(lambda f=f: f(mg.tensor(_B), mg.tensor(_B)))
    case('dtypes', f'{what} on Symbols (refused while building)', (ShapeError, 'numpy cannot'))(
        lambda f=f: _in_graph(lambda s: f(mg.placeholder(mg.bool_, (3,)), mg.placeholder(mg.bool_, (3,)))))
for what, f, frag in [('int64 tensor * 2**70', lambda: mg.tensor([1, 2]) * 2 ** 70, 'out of range'),
                      ('uint8 tensor + 300', lambda: mg.tensor(_U8) + 300, 'out of range'),
                      ('uint8 tensor - 300', lambda: mg.tensor(_U8) - 300, 'out of range'),
                      ('x[2**63]', lambda: mg.tensor(_F32)[2 ** 63], 'getitem'),
                      ('int Symbol * 2**70', lambda: _in_graph(lambda s: mg.placeholder(mg.int64, (2,)) * 2 ** 70),
                       'out of range'),
                      ('Symbol[2**63]', lambda: _in_graph(lambda s: mg.placeholder(mg.float32, (3,))[2 ** 63]),
                       'getitem')]:
    case('dtypes', what, (MinigradError, frag))(f)


# ------------------------------------------------------------------ the tests
def _outcome(thunk, expected):
    kind, want = expected
    frags = want if isinstance(want, tuple) else (want,)
    try:
        result = thunk()
    except MinigradError as e:
        if kind == 'value':
            return f'unexpected {type(e).__name__}: {e}'
        return 'clear error' if isinstance(e, kind) and all(f in str(e) for f in frags) else \
            f'{type(e).__name__} without {want!r}: {e}'
    except Exception as e:       # anything else is the bug this file exists to catch
        if kind is ValueError and isinstance(e, ValueError) and all(f in str(e) for f in frags):
            return 'clear error'                      # numpy's own "assignment destination is read-only"
        return f'raw {type(e).__name__}: {e}'
    if kind == 'value':
        return 'correct value' if want(result) else f'wrong value {result!r}'
    return f'accepted silently: {result!r}'[:200]


OUTCOMES: dict = {}        # (category, name) -> outcome, filled by test_bad_input as the cases run


@pytest.mark.parametrize('category, name, thunk, expected', CASES, ids=[f'{c[0]}: {c[1]}' for c in CASES])
def test_bad_input(category, name, thunk, expected):
    grad_mode, default = mg.is_grad_enabled(), mg.get_default_graph()
    n_default = len(default.nodes)
    OUTCOMES[category, name] = 'did not finish'
    OUTCOMES[category, name] = outcome = _outcome(thunk, expected)
    assert outcome in ('clear error', 'correct value')
    if not (mg.is_grad_enabled() == grad_mode and mg.get_default_graph() is default
            and len(default.nodes) == n_default):
        OUTCOMES[category, name] = 'left the grad mode or the default graph changed'
        raise AssertionError(OUTCOMES[category, name])


def test_outcomes_per_category():
    """The outcomes of the cases test_bad_input ran above, counted per category (read, not re-run; a case
    deselected in this run, e.g. by -k, runs here)."""
    counts = collections.defaultdict(collections.Counter)
    ran = 0
    for category, name, thunk, expected in CASES:
        o = OUTCOMES.get((category, name))
        ran += o is not None
        o = _outcome(thunk, expected) if o is None else o
        counts[category][o if o in ('clear error', 'correct value') else 'other'] += 1
    table = {c: dict(v) for c, v in counts.items()}
    print(f'\nbad inputs per category ({ran} read from test_bad_input, {len(CASES) - ran} run here):', table,
          'total', len(CASES))
    assert all(v['other'] == 0 for v in counts.values()), table
    assert len(CASES) >= 300 and len({(c, n) for c, n, _, _ in CASES}) == len(CASES)    # each case once


# ------------------------------------------------------------------ fuzz
MALFORMED = st.one_of(
    st.none(), st.text(max_size=5), st.binary(max_size=5), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.integers(min_value=-2 ** 100, max_value=2 ** 100), st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.one_of(st.integers(-5, 5), st.lists(st.integers(-5, 5), max_size=3)), max_size=4),
    st.sampled_from([np.array([object()]), np.array(['a']), np.ones((2, 3)), np.ones(0), 1j, -1, 1.5, (0, 0)]))
CALLS = {
    'tensor': lambda v: mg.tensor(v), 'constant': lambda v: _construct(mg.constant, v),
    'add': lambda v: mg.tensor(np.ones(3)) + v, 'sum axis': lambda v: mg.tensor(np.ones((2, 3))).sum(axis=v),
    'reshape': lambda v: mg.tensor(np.ones(6)).reshape(v), 'matmul': lambda v: mg.tensor(np.ones((2, 3))) @ v,
    'getitem': lambda v: mg.tensor(np.ones(3))[v], 'Linear': lambda v: mg.nn.Linear(3, 2)(v),
    'mse': lambda v: mg.nn.MSELoss()(mg.tensor(np.ones(3)), v), 'cross entropy': lambda v: mg.nn.CrossEntropyLoss()(
        mg.tensor(np.zeros((2, 3))), v), 'feed': lambda v: _session_run(lambda x, y: {x: v}),
    'program': lambda v: _prog()(v),
    # the classes of issue 34 (not sizes or counts, as of zeros or fit's epochs: a huge int is legal and huge)
    'full value': lambda v: mg.full((2,), v), 'placeholder shape': lambda v: _construct(lambda s: mg.placeholder(mg.float32, s), v),
    'placeholder dtype': lambda v: _construct(lambda d: mg.placeholder(d, (2,)), v),
    'cast dtype': lambda v: mg.cast(mg.tensor(np.ones(3)), v), 'transpose': lambda v: mg.transpose(_T2(), v),
    'concatenate axis': lambda v: mg.concatenate([_T2(), _T2()], axis=v),
    'while max_iterations': lambda v: _in_graph(lambda s: mg.while_loop(_lt3, _inc, [s], max_iterations=v)),
    'cond branch': lambda v: _in_graph(lambda s: mg.cond(s > 0, v, v)),
    'SGD lr': lambda v: mg.optim.SGD([_w()], lr=v), 'Adam betas': lambda v: mg.optim.Adam([_w()], betas=v),
    'backward gradient': lambda v: _xy()[1].backward(gradient=v),
    'draw max_nodes': lambda v: mg.draw(mg.tensor([1.0]) * 2, max_nodes=v).source,
    'jit argument': lambda v: mg.jit(lambda a: a * 2)(v), 'trace example': lambda v: mg.trace(lambda a: a * 2, v),
    'feed_dict': lambda v: (lambda g, x, y: mg.Session(g).run(y, v))(*_graph_y())}


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(CALLS)), MALFORMED)
def test_fuzz_malformed_values_give_a_value_or_a_minigrad_error(call, value):
    grad_mode, default = mg.is_grad_enabled(), mg.get_default_graph()
    n_default = len(default.nodes)
    try:
        with np.errstate(all='ignore'):          # inf * 0 and overflow are values here, not errors
            CALLS[call](value)
    except MinigradError:
        pass
    assert mg.is_grad_enabled() == grad_mode and mg.get_default_graph() is default
    assert len(default.nodes) == n_default


def test_a_ragged_mse_target_is_a_clear_error():      # found by the fuzz under test_without_numba
    with pytest.raises(InputError, match="MSELoss target"):
        mg.nn.MSELoss()(mg.tensor(np.ones(3)), [0, []])
