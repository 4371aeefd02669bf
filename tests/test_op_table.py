"""One op table: a primitive is one record, read by the tape, the graph builder, mg.gradients,
the compiler (fusion, code generation) and the drawings; nothing else keeps a table of op names."""
import ast
from pathlib import Path

import numpy as np

import minigrad as mg
from minigrad.core import PRIMITIVES, OPS, register_primitive, elementwise_rule

PKG = Path(mg.__file__).parent
DOCUMENTED = ['add', 'mul', 'div', 'pow', 'exp', 'log', 'sin', 'cos', 'tanh', 'maximum', 'where', 'less', 'equal',
              'cast', 'stop_gradient', 'sum', 'max', 'reshape', 'transpose', 'broadcast_to', 'getitem',
              'scatter_add', 'matmul', 'concatenate', 'sum_to_like', 'broadcast_like', 'reshape_like']


def test_the_primitives_are_the_documented_ones():
    builtin = {v.name for v in vars(mg.ops).values() if isinstance(v, mg.Primitive)}
    assert builtin == set(DOCUMENTED) and len(DOCUMENTED) == 27 and builtin <= set(PRIMITIVES)
    for name in DOCUMENTED:
        assert name in mg.ops.__doc__
    kinds = {p.kind for p in OPS.values()}
    assert kinds == {'primitive', 'node', 'compiler'}
    assert {n for n, p in OPS.items() if p.kind == 'node'} >= {'placeholder', 'constant', 'variable', 'assign',
                                                               'group', 'cond', 'while', 'while_grad'}
    assert {n for n, p in OPS.items() if p.kind == 'compiler'} == {'fma', 'sub', 'relu', 'fused', 'kernel'}


def _square_vjp(needs, g, out, x):
    return (g * x * 2.0,)


SQUARE = register_primitive('square_test', np.square, elementwise_rule, _square_vjp, elementwise=True,
                            ufunc='square', doc='x * x, registered by a test',
                            kernel=lambda a, params, ctx: f'{a[0]} * {a[0]}')


def test_a_new_primitive_works_everywhere_from_one_record():
    # tape: value and gradient
    x = mg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = SQUARE(x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -4.0, 6.0])
    # graph + Session + mg.gradients
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, (3,), name='p')
        z = SQUARE(p * 2.0 + 1.0)
        gz, = mg.gradients(z.sum(), [p])
    v = np.array([1.0, -2.0, 3.0], np.float32)
    val, grad = mg.Session(g).run([z, gz], {p: v})
    np.testing.assert_allclose(val, (2 * v + 1) ** 2)
    np.testing.assert_allclose(grad, 4 * (2 * v + 1))
    # compiled: inside a fused group, one ufunc call (numpy backend) or one line of a loop (numba)
    for backend in mg.compiler.BACKENDS if mg.compiler.kernels.available() else ['numpy']:
        prog = mg.compile([z, gz], [p], backend=backend)
        fused = [n for n in prog.graph.nodes if n.op == 'fused']
        assert any(m.op == 'square_test' for f in fused for m in f.params['graph'].nodes)
        assert ('np_square(' if backend == 'numpy' else '# square_test') in prog.source
        for got, want in zip(prog(v), (val, grad)):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    # a drawing names it
    assert 'square_test' in mg.draw(z).source


def _op_name_comparisons(path):
    """Comparisons of an op's name (``x.op`` or ``x.name``) with string literals."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Attribute) and s.attr in ('op',) for s in sides)
            strings = any(isinstance(s, ast.Constant) and isinstance(s.value, str) or
                          isinstance(s, (ast.Tuple, ast.List, ast.Set)) and s.elts and
                          all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in s.elts)
                          for s in sides)
            if named and strings:
                found.append(f'{path.name}:{node.lineno}')
    return found


def test_no_op_name_comparisons_outside_the_op_table():
    files = [p for p in PKG.rglob('*.py') if p.name != 'ops.py' or p.parent.name == 'compiler']
    assert [f for p in files for f in _op_name_comparisons(p)] == []


def test_no_function_in_the_compiler_is_over_60_lines():
    long = []
    for path in (PKG / 'compiler').glob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 60:
                    long.append(f'{path.name}:{node.name} ({n} lines)')
    assert long == []


def test_state_is_declared():
    for cls in (mg.Graph, mg.Node, mg.Symbol, mg.Tensor, mg.Primitive):
        assert '__slots__' in vars(cls), cls
    g = mg.Graph()
    try:
        g.bolted_on = 1
    except AttributeError:
        pass
    else:
        raise AssertionError('Graph accepts attributes from outside')
    with g.as_default():
        v = mg.Variable(1.0, name='v')
    assert type(v) is mg.Variable and isinstance(v, mg.Symbol)
    assert '__class__' not in (PKG / 'core' / 'graph.py').read_text().replace('.__class__ is', '')


def test_one_graph_walk():
    """needed_nodes (interpreter, Session, compiler, viz) uses core.topo_order. The tape's backward walks its
    nodes in one function of its own (tensor._tape_order; fast.py walks it in place), which test_tape checks gives
    core.topo_order's order."""
    src = {p.name: p.read_text() for p in PKG.rglob('*.py')}
    assert src['graph.py'].count('core.topo_order(') == 1 and src['tensor.py'].count('def _tape_order(') == 1
    assert sum(s.count('.parents:') for s in src.values()) == 1, 'one walk of the tape (tensor._tape_order)'
    assert 'def toposort' not in src['autodiff.py']
    assert sum(s.count('def needed_nodes') for s in src.values()) == 1
