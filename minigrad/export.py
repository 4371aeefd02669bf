"""mg.export_onnx: write a minigrad graph as an ONNX model; mg.import_onnx reads one back.

Each primitive's ONNX lowering lives on its record (``Primitive.onnx``): a function
``lower(b, node, names) -> [output names]`` where ``b`` is the `_Builder` below. Compiler ops
without a lowering are expanded with their ``decompose`` sub-graph; ``cond`` becomes ONNX ``If``
and ``while`` becomes ``Loop``. Variables and constants become initializers.
"""
from __future__ import annotations

import itertools

import numpy as np

from . import ops as P
from .compiler import ops as C
from .compiler.program import Program
from .control import COND, WHILE
from .errors import MinigradError
from .graph import Graph, Symbol, CONSTANT, VARIABLE, PLACEHOLDER, constant, placeholder
from .trace import TracedFunction, trace

DEFAULT_OPSET = 18          # ReduceMax takes its axes as an input from opset 18


def _onnx():
    try:
        import onnx
        return onnx
    except ImportError as e:    # optional dependency: only export/import needs it
        raise MinigradError('mg.export_onnx needs the onnx package: pip install onnx') from e


class _Builder:
    """Collects ONNX nodes and initializers for one (sub-)graph; names are unique across the model."""

    def __init__(self, names=None):
        self.nodes, self.inits, self.names = [], [], names if names is not None else set()

    def fresh(self, base: str) -> str:
        for i in itertools.count():
            name = base if i == 0 else f'{base}_{i}'
            if name not in self.names:
                self.names.add(name)
                return name

    def op(self, op_type, inputs, n_out=1, name='t', **attrs) -> list[str]:
        outs = [self.fresh(name) for _ in range(n_out)]
        self.nodes.append(_onnx().helper.make_node(op_type, list(inputs), outs, name=self.fresh(op_type), **attrs))
        return outs

    def const(self, value, name='const') -> str:
        name = self.fresh(name)
        self.inits.append(_onnx().numpy_helper.from_array(np.asarray(value), name))
        return name


def _value_info(name, dtype, shape):
    onnx = _onnx()
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    dims = None if shape is None else ['batch' if d is None else d for d in shape]
    return onnx.helper.make_tensor_value_info(name, elem, dims)


# ------------------------------------------------------------------ lowerings, stored on the records
def _simple(op_type):
    lower = lambda b, node, xs: b.op(op_type, xs, name=node.outputs[0].name)
    lower.op_type = op_type              # read by import_onnx: the one-to-one ops map back to their record
    return lower


def _axes(b, node):
    axis = node.params.get('axis')
    if axis is None:
        return []
    return [b.const(np.array([axis] if np.ndim(axis) == 0 else list(axis), np.int64), 'axes')]


def _reduce(op_type):
    def lower(b, node, xs):
        if node.params.get('initial') is not None:
            raise MinigradError(f"export_onnx: '{node.outputs[0].name}' ({node.op} with initial=) has no ONNX form")
        return b.op(op_type, xs + _axes(b, node), name=node.outputs[0].name,
                    keepdims=int(bool(node.params.get('keepdims'))))
    return lower


def _reshape(b, node, xs):
    shape = list(node.params['shape']) if np.ndim(node.params['shape']) else [node.params['shape']]
    # ONNX reads a 0 in the shape as "copy that dim" unless allowzero=1 (numpy means size 0)
    return b.op('Reshape', [xs[0], b.const(np.array(shape, np.int64), 'shape')], name=node.outputs[0].name,
                allowzero=int(0 in shape))


def _transpose(b, node, xs):
    axes = node.params.get('axes')
    extra = {} if axes is None else {'perm': list(axes)}
    return b.op('Transpose', xs, name=node.outputs[0].name, **extra)


def _like(op_type):      # reshape_like / broadcast_like: the target shape is read from `ref` at run time
    def lower(b, node, xs):
        x = xs[0]
        if node.params.get('axes'):
            x = b.op('Unsqueeze', [x, b.const(np.array(node.params['axes'], np.int64), 'axes')])[0]
        return b.op(op_type, [x, b.op('Shape', [xs[1]])[0]], name=node.outputs[0].name)
    return lower


def _cast(b, node, xs):
    to = _onnx().helper.np_dtype_to_tensor_dtype(np.dtype(node.params['dtype']))
    return b.op('Cast', xs, name=node.outputs[0].name, to=to)


LOWERINGS = {P.add: _simple('Add'), P.mul: _simple('Mul'), P.div: _simple('Div'), P.pow_: _simple('Pow'),
             P.maximum: _simple('Max'), P.exp: _simple('Exp'), P.log: _simple('Log'), P.sin: _simple('Sin'),
             P.cos: _simple('Cos'), P.tanh: _simple('Tanh'), P.where: _simple('Where'), P.less: _simple('Less'),
             P.equal: _simple('Equal'), P.cast: _cast, P.stop_gradient: _simple('Identity'),
             P.sum_: _reduce('ReduceSum'), P.max_: _reduce('ReduceMax'), P.reshape: _reshape,
             P.transpose: _transpose, P.matmul: _simple('MatMul'),
             P.broadcast_to: lambda b, n, xs: b.op('Expand', [xs[0], b.const(np.array(n.params['shape'], np.int64))],
                                                   name=n.outputs[0].name),
             P.concatenate: lambda b, n, xs: b.op('Concat', xs, name=n.outputs[0].name, axis=n.params['axis']),
             P.reshape_like: _like('Reshape'), P.broadcast_like: _like('Expand'),
             C.sub: _simple('Sub'), C.relu: _simple('Relu')}
for _prim, _lower in LOWERINGS.items():
    _prim.onnx = _lower


# ------------------------------------------------------------------ graphs, cond and while
def _lower_graph(b, graph, env):
    """Emit every node of `graph` into `b`; `env` maps Symbols to ONNX names (filled as we go)."""
    stack_users = {id(s) for n in graph.nodes if n.prim is WHILE for s in n.outputs[-1:]}
    for node in graph.nodes:
        if any(id(s) in stack_users for s in node.inputs):
            raise MinigradError(f"export_onnx: '{node.outputs[0].name}' ({node.op}) uses a while loop's "
                                'gradient stack, which has no meaning in an inference graph')
        if node.prim is PLACEHOLDER:
            if id(node.outputs[0]) not in env:
                raise MinigradError(f"export_onnx: placeholder '{node.outputs[0].name}' is not among the inputs")
            continue
        if node.prim in (CONSTANT, VARIABLE):    # both become initializers (weights are frozen in the model)
            value = node.params['value' if node.prim is CONSTANT else 'initial_value']
            env[id(node.outputs[0])] = b.const(value, node.outputs[0].name)
            continue
        outs = _lower_node(b, node, [env[id(s)] for s in node.inputs])
        for s, name in zip(node.outputs, outs):
            env[id(s)] = name


def _lower_node(b, node, xs):
    if node.prim.onnx is not None:
        return node.prim.onnx(b, node, xs)
    if node.prim.decompose is not None:          # fma, fused: lower the parts they stand for
        sub = node.prim.decompose(node)
        env = {id(p): x for p, x in zip(sub.inputs, xs)}
        _lower_graph(b, sub, env)
        return [env[id(o)] for o in sub.outputs]
    raise MinigradError(f"export_onnx: node '{node.outputs[0].name if node.outputs else node.op}' "
                        f"({node.prim.name}) has no meaning in an inference graph / no ONNX lowering")


def _subgraph(b, graph, env, inputs=(), extra_outputs=()):
    """An ONNX GraphProto for a cond/while body: captured placeholders read the outer names."""
    onnx = _onnx()
    inner = _Builder(b.names)
    env = dict(env)
    for outer, ph in graph.captures:
        env[id(ph)] = env[id(outer)]
    ins = []
    for p in inputs:
        env[id(p)] = inner.fresh(p.name)
        ins.append(_value_info(env[id(p)], p.dtype, p.shape))
    _lower_graph(inner, graph, env)
    outs = [inner.op('Identity', [env[id(o)]], name=o.name)[0] for o in list(extra_outputs) + list(graph.outputs)]
    infos = [_value_info(n, o.dtype, o.shape) for n, o in zip(outs, list(extra_outputs) + list(graph.outputs))]
    return onnx.helper.make_graph(inner.nodes, inner.fresh('body'), ins, infos, inner.inits), outs


def _lower_cond(b, node, xs):
    env = {id(s): x for s, x in zip(node.inputs, xs)}
    then, _ = _subgraph(b, node.params['true_graph'], env)
    other, _ = _subgraph(b, node.params['false_graph'], env)
    return b.op('If', xs[:1], n_out=len(node.outputs), name=node.outputs[0].name, then_branch=then,
                else_branch=other)


def _lower_while(b, node, xs):
    """Loop(M='', cond, *vars): the body runs body_graph, then cond_graph on the new vars."""
    onnx = _onnx()
    cg, bg = node.params['cond_graph'], node.params['body_graph']
    n = len(bg.inputs)
    env = {id(s): x for s, x in zip(node.inputs, xs)}
    first = {**env, **{id(p): x for p, x in zip(cg.inputs, xs[:n])}}
    for outer, ph in cg.captures:
        first[id(ph)] = env[id(outer)]
    _lower_graph(b, cg, first)                       # the condition before the first iteration
    body = _Builder(b.names)
    benv = dict(env)
    it, c_in = body.fresh('iter'), body.fresh('cond_in')
    ins = [_value_info(it, np.int64, ()), _value_info(c_in, np.bool_, ())]
    for p in bg.inputs:
        benv[id(p)] = body.fresh(p.name)
        ins.append(_value_info(benv[id(p)], p.dtype, p.shape))
    for outer, ph in bg.captures:
        benv[id(ph)] = env[id(outer)]
    _lower_graph(body, bg, benv)
    for p, o in zip(cg.inputs, bg.outputs):
        benv[id(p)] = benv[id(o)]
    for outer, ph in cg.captures:
        benv[id(ph)] = env[id(outer)]
    _lower_graph(body, cg, benv)
    syms = [cg.outputs[0]] + list(bg.outputs)
    outs = [body.op('Identity', [benv[id(s)]], name=s.name)[0] for s in syms]
    g = onnx.helper.make_graph(body.nodes, body.fresh('loop_body'), ins,
                               [_value_info(o, s.dtype, s.shape) for o, s in zip(outs, syms)], body.inits)
    res = b.op('Loop', ['', first[id(cg.outputs[0])]] + xs[:n], n_out=n, name=node.outputs[0].name, body=g)
    return res + ['']                               # no name for the gradient stack output


COND.onnx, WHILE.onnx = _lower_cond, _lower_while


# ------------------------------------------------------------------ the public entry points
def _resolve(obj, inputs, example_inputs):
    """(graph, inputs, outputs) for a Symbol/list, a Program, a TracedFunction, or a Module/function."""
    if isinstance(obj, Program):     # its .inputs are the caller's symbols; the optimised graph has its own
        return obj.graph, list(obj.graph.inputs), list(obj.graph.outputs)
    if isinstance(obj, TracedFunction):
        return obj.graph, list(obj.inputs), list(obj.outputs)
    if isinstance(obj, Symbol) or (isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], Symbol)):
        outs = [obj] if isinstance(obj, Symbol) else list(obj)
        return outs[0].node.graph, [inputs] if isinstance(inputs, Symbol) else list(inputs or []), outs
    if callable(obj):
        if example_inputs is None:
            raise MinigradError('export_onnx: a Module or function needs example_inputs to be traced')
        t = trace(obj, *example_inputs)
        return t.graph, list(t.inputs), list(t.outputs)
    raise MinigradError(f'export_onnx: cannot export a {type(obj).__name__} (give Symbols, a Program, '
                        'a traced function, or a Module with example_inputs)')


def to_onnx(obj, inputs=None, example_inputs=None, input_names=None, output_names=None, opset=None):
    """The ONNX ModelProto for `obj` (same arguments as export_onnx, without the file)."""
    onnx = _onnx()
    graph, ins, outs = _resolve(obj, inputs, example_inputs)
    b = _Builder()
    env, infos = {}, []
    for p, name in zip(ins, input_names or [p.name for p in ins]):
        if not isinstance(p, Symbol) or p.node.prim is not PLACEHOLDER:
            raise MinigradError(f'export_onnx: inputs must be placeholders, got {p!r}')
        env[id(p)] = b.fresh(name)
        infos.append(_value_info(env[id(p)], p.dtype, p.shape))
    _lower_graph(b, graph, env)
    names = output_names or [o.name for o in outs]
    out_infos = []
    for o, name in zip(outs, names):
        out = b.fresh(name) if name in b.names else name      # an output may not reuse an input's name
        b.names.add(out)
        b.nodes.append(onnx.helper.make_node('Identity', [env[id(o)]], [out], name=b.fresh('Identity')))
        out_infos.append(_value_info(out, o.dtype, o.shape))
    g = onnx.helper.make_graph(b.nodes, graph.name or 'minigrad', infos, out_infos, b.inits)
    model = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid('', opset or DEFAULT_OPSET)],
                                   producer_name='minigrad')
    model.ir_version = min(model.ir_version, 10)    # onnxruntime may lag behind the newest IR version
    return model


def export_onnx(obj, f, inputs=None, example_inputs=None, input_names=None, output_names=None, opset=None):
    """Write `obj` as an ONNX model to `f` (a path or a binary file object); returns the ModelProto.

    >>> import minigrad as mg, io
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (None, 3), name='x'); y = x * 2.0 + 1.0
    >>> m = mg.export_onnx(y, io.BytesIO(), inputs=[x])
    >>> [n.op_type for n in m.graph.node]
    ['Mul', 'Add', 'Identity']
    """
    model = to_onnx(obj, inputs, example_inputs, input_names, output_names, opset)
    data = model.SerializeToString()
    if hasattr(f, 'write'):
        f.write(data)
    else:
        with open(f, 'wb') as fh:
            fh.write(data)
    return model


# ------------------------------------------------------------------ import (the op subset above, no If/Loop)
def _const_of(consts, name, what):
    if name not in consts:
        raise MinigradError(f'import_onnx: {what} must be a constant initializer')
    return consts[name]


def _import_table():
    one_to_one = {lower.op_type: prim for prim, lower in LOWERINGS.items() if hasattr(lower, 'op_type')}
    table = {t: (lambda prim: lambda xs, a, k: [prim(*xs)])(prim) for t, prim in one_to_one.items()}

    def reduce(prim):
        def imp(xs, a, k):
            axes = None if len(k) < 2 else tuple(int(i) for i in _const_of(a['consts'], k[1], 'axes'))
            return [prim(xs[0], axis=axes, keepdims=bool(a.get('keepdims', 1)))]
        return imp
    table.update({
        'ReduceSum': reduce(P.sum_), 'ReduceMax': reduce(P.max_),
        'Reshape': lambda xs, a, k: [P.reshape(xs[0], shape=tuple(int(i) for i in _const_of(a['consts'], k[1], 'shape')))],
        'Expand': lambda xs, a, k: [P.broadcast_to(xs[0], shape=tuple(int(i) for i in _const_of(a['consts'], k[1], 'shape')))],
        'Transpose': lambda xs, a, k: [P.transpose(xs[0], axes=tuple(a['perm']) if 'perm' in a else None)],
        'Concat': lambda xs, a, k: [P.concatenate(*xs, axis=a['axis'])],
        'Cast': lambda xs, a, k: [P.cast(xs[0], dtype=_onnx().helper.tensor_dtype_to_np_dtype(a['to']))]})
    return table


def import_onnx(f) -> Graph:
    """Read an ONNX model (path, binary file or ModelProto) into a minigrad Graph; `graph.inputs` are its
    placeholders and `graph.outputs` its results. If/Loop are not imported yet.

    >>> import minigrad as mg, io, numpy as np
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (2,), name='x'); y = x * 3.0
    >>> buf = io.BytesIO(); _ = mg.export_onnx(y, buf, inputs=[x]); _ = buf.seek(0)
    >>> h = mg.import_onnx(buf)
    >>> mg.Session(h).run(h.outputs[0], {h.inputs[0]: np.ones(2, np.float32)})
    array([3., 3.], dtype=float32)
    """
    onnx = _onnx()
    model = f if isinstance(f, onnx.ModelProto) else onnx.load(f)
    table, g = _import_table(), Graph(model.graph.name)
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    env = {}
    with g.as_default():
        for vi in model.graph.input:
            t = vi.type.tensor_type
            shape = [d.dim_value if d.HasField('dim_value') else None for d in t.shape.dim] if t.HasField('shape') else None
            env[vi.name] = placeholder(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type), shape, name=vi.name)
        for name, value in consts.items():
            env[name] = constant(value, name=name)
        for n in model.graph.node:
            if n.op_type not in table:
                raise MinigradError(f"import_onnx: node '{n.name}' ({n.op_type}) is not supported")
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            attrs['consts'] = consts
            outs = table[n.op_type]([env[i] for i in n.input], attrs, list(n.input))
            env.update(zip(n.output, outs))
    g.inputs = [env[vi.name] for vi in model.graph.input]
    g.outputs = [env[vo.name] for vo in model.graph.output]
    return g
