"""mg.import_onnx: read an ONNX model into a minigrad Graph (onnx_export.py writes one).

ONNX ops map back onto primitives: the one-to-one lowerings of onnx_export.LOWERINGS are read in
reverse, Slice/Squeeze/Unsqueeze/Gather become getitem, ScatterElements scatter_add, If cond and
Loop while_loop; the run-time shape patterns of the *_like lowerings (``Expand(x, Shape(r))`` ...)
fold back into broadcast_like / reshape_like / sum_to_like; the operators of a PyTorch MLP
(TORCH_OPS) map onto minigrad's composites.
"""
from __future__ import annotations

import functools
import os
from collections import namedtuple

import numpy as np

from ..core import functional as F, ops as P
from ..core.control import cond, while_loop
from ..core.errors import InputError, MinigradError
from ..core.graph import Graph, Symbol, Variable_, constant, needed_nodes, placeholder, SOURCES, CONSTANT
from ..core.interpreter import evaluate
from .exporter import LOWERINGS, load_onnx


class _Shape(namedtuple('_Shape', 'ref pad mask')):
    """Shape(ref) padded with `pad` 1s in front (mask: its == 1 positions, the axes sum_to_like sums):
    the run-time shape patterns of the *_like lowerings, folded back into broadcast_like, reshape_like and
    sum_to_like instead of becoming values (minigrad has no shape tensors)."""


_SHAPE_OPS = {'Identity', 'Shape', 'Concat', 'Equal', 'NonZero', 'Reshape', 'Expand', 'ReduceSum', 'Gather'}


def _const_of(x, what):
    """The value of x, a constant or a value computed from constants only (the shape arithmetic
    torch.onnx writes: Shape, Gather, Div, ... of known dims), run now."""
    nodes = needed_nodes(x.graph, [x]) if isinstance(x, Symbol) else []
    if not nodes or any(n.prim in SOURCES and n.prim is not CONSTANT for n in nodes):
        raise MinigradError(f'import_onnx: {what} must be a constant (an initializer, a Constant node, or '
                            f'computed from those), got {getattr(x, "name", x)!r}')
    return np.asarray(evaluate(x.graph, [x], nodes=nodes)[0])


def _ints(x, what):
    return [int(i) for i in np.ravel(_const_of(x, what))]


def _pos_axes(x, axes, what, extra=0):
    """Non-negative axes; a negative one needs x's rank (+ extra for Unsqueeze, which counts output dims)."""
    if any(a < 0 for a in axes) and x.shape is None:
        raise MinigradError(f'import_onnx: {what} with negative axes {axes} needs an input of known rank')
    return [a % (len(x.shape) + extra) if a < 0 else a for a in axes]


def _index(axes, item):
    """The getitem index that puts `item` at `axes` (a None inserts, a 0 removes a dim) and keeps the rest."""
    return tuple(item if i in axes else slice(None) for i in range(max(axes, default=-1) + 1))


def _shape_expr(xs, a):
    """Concat([1, ..., 1], Shape(r)) and Equal(that, 1): still a _Shape; anything else is a value."""
    if a['op'] == 'Concat' and len(xs) == 2 and isinstance(xs[1], _Shape) and not xs[1].pad and \
            np.all(_const_of(xs[0], 'Concat with a shape') == 1):
        return _Shape(xs[1].ref, _const_of(xs[0], '').size, False)
    if a['op'] == 'Equal' and isinstance(xs[0], _Shape) and np.all(_const_of(xs[1], 'Equal with a shape') == 1):
        return _Shape(xs[0].ref, xs[0].pad, True)
    return _bad(a, 'on a tensor shape (other than the patterns the *_like lowerings write)')


def _import_reduce(prim):
    def imp(xs, a):
        if len(xs) > 1 and isinstance(xs[1], _Shape):
            return [P.sum_to_like(xs[0], xs[1].ref)]        # followed by Reshape(_, Shape(ref)): a no-op then
        axes = _attr_axes(xs, a)
        if axes == () and not a.get('noop_with_empty_axes'):
            axes = None                                     # ONNX: no axes means all of them
        return [prim(xs[0], axis=axes, keepdims=bool(a.get('keepdims', 1)))]
    return imp


def _import_like(like, prim, attr):       # Reshape / Expand: to Shape(r) at run time, or a constant shape
    def imp(xs, a):
        if isinstance(xs[0], _Shape):       # NonZero(...) reshaped to 1-D: still the axes mask
            return [xs[0] if xs[0].mask else _bad(a, 'of a tensor shape')]
        if isinstance(xs[1], _Shape):
            return [like(xs[0], xs[1].ref)]
        shape = _ints(xs[1], f"{a['op']} shape")
        if a['op'] == 'Reshape' and 0 in shape and not a.get('allowzero'):     # a 0 copies the input's dim
            shape = [d if d else _dim(xs[0], k, a) for k, d in enumerate(shape)]
        return [prim(xs[0], **{attr: tuple(shape)})]
    return imp


def _dim(x, k, a):
    if x.shape is None or k >= len(x.shape) or x.shape[k] is None:
        raise MinigradError(f"import_onnx: {a['op']} copies dim {k} of '{x.name}' (a 0 in its shape), which is "
                            f'unknown in shape {x.shape}')
    return x.shape[k]


def _operands(xs, a, names, since):
    """The int lists an op reads from inputs 1, 2, ... from opset `since`, and before it from the attributes
    `names` (Slice before 10, Squeeze / Unsqueeze before 13); None for one not given."""
    if a['opset'] < since:
        return [None if a.get(n) is None else list(a[n]) for n in names]
    return [_ints(x, f"{a['op']} {n}") if x is not None else None for x, n in zip(list(xs[1:]) + [None] * 4, names)]


def _import_slice(xs, a):
    st, en, axes, steps = _operands(xs, a, ('starts', 'ends', 'axes', 'steps'), 10)
    axes = _pos_axes(xs[0], list(range(len(st))) if axes is None else axes, 'Slice')
    idx = [slice(None)] * (max(axes, default=-1) + 1)
    for s, e, ax, step in zip(st, en, axes, steps or [1] * len(st)):
        idx[ax] = slice(s, e, step)
    return [P.getitem(xs[0], idx=tuple(idx))]


def _import_squeeze(xs, a):
    x, (axes,) = xs[0], _operands(xs, a, ('axes',), 13)
    if axes is None and x.shape is None:
        raise MinigradError('import_onnx: Squeeze without axes needs an input of known shape')
    axes = _pos_axes(x, [i for i, d in enumerate(x.shape) if d == 1] if axes is None else axes, 'Squeeze')
    wide = [i for i in axes if x.shape is not None and x.shape[i] not in (1, None)]
    if wide:        # onnxruntime refuses such a model; x[0] would drop the rest silently
        raise InputError(f"import_onnx: Squeeze of axes {wide} of '{x.name}' (shape {x.shape}): only a dim of "
                         'size 1 can be squeezed')
    return [P.getitem(x, idx=_index(axes, 0))]


def _import_unsqueeze(xs, a):
    (axes,) = _operands(xs, a, ('axes',), 13)
    axes = _bad(a, 'without axes') if axes is None else axes
    return [P.getitem(xs[0], idx=_index(_pos_axes(xs[0], axes, 'Unsqueeze', len(axes)), None))]


def _import_gather(xs, a):
    ind = _const_of(xs[1], 'Gather indices').astype(np.int64)
    if isinstance(xs[0], _Shape):      # dims known when the graph is built: their values (torch's chunk)
        s = xs[0]
        dims = () if s.ref.shape is None or s.mask else (1,) * s.pad + tuple(s.ref.shape)
        got = [dims[i] if -len(dims) <= i < len(dims) else None for i in np.ravel(ind)]
        if None in got:
            _bad(a, 'of a tensor shape whose dims are unknown until run time')
        return [constant(np.array(got, np.int64).reshape(ind.shape))]
    ax = _pos_axes(xs[0], [a.get('axis', 0)], 'Gather')[0]
    return [P.getitem(xs[0], idx=(slice(None),) * ax + (ind,))]


def _import_split(xs, a):
    """Split into len(outputs) parts along `axis`: sizes from input 1 (opset 13), the `split` attribute
    (before), or equal parts (the last smaller, as num_outputs of opset 18)."""
    x, ax = xs[0], a.get('axis', 0)
    (sizes,) = _operands(xs, a, ('split',), 13)
    if sizes is None:
        dim = None if x.shape is None else x.shape[ax]
        if dim is None:
            raise MinigradError(f'import_onnx: Split into equal parts needs the size of axis {ax}, got shape '
                                f'{x.shape}')
        part = -(-dim // a['n_out'])
        sizes = [min(part, dim - k * part) for k in range(a['n_out'])]
    ax = _pos_axes(x, [ax], 'Split')[0]
    ends = np.cumsum(sizes)
    return [P.getitem(x, idx=(slice(None),) * ax + (slice(int(e - n), int(e)),)) for e, n in zip(ends, sizes)]


def _import_scatter(xs, a):
    """ScatterElements(data, indices, updates, reduction='add'): data + scatter_add (one index per element)."""
    if a.get('reduction') != 'add':
        raise MinigradError(f"import_onnx: ScatterElements with reduction={a.get('reduction', 'none')!r} is not "
                            "supported (only 'add', what minigrad's scatter_add writes)")
    data, ind = xs[0], _const_of(xs[1], 'ScatterElements indices')
    ax = _pos_axes(data, [a.get('axis', 0)], 'ScatterElements')[0]
    s = P.scatter_add(xs[2], data, idx=tuple(ind if k == ax else grid for k, grid in enumerate(np.indices(ind.shape))))
    zero = data.node.prim is CONSTANT and not np.any(data.node.params['value'])
    return [s if zero else P.add(data, s)]


def _attr_value(a):
    if 'value' not in a:
        raise MinigradError(f"import_onnx: {a['op']} needs a tensor 'value' attribute, got {sorted(a)}")
    return load_onnx().numpy_helper.to_array(a['value'])


def _import_if(xs, a):
    branch = lambda g: lambda: _import_nodes(g, dict(a['env']), a['table'], a['opset'])     # outer names captured
    return list(cond(xs[0], branch(a['then_branch']), branch(a['else_branch'])))


def _import_loop(xs, a):
    """Loop(M, cond, *v) -> while_loop over (iteration, cond, *v): M and cond become loop variables."""
    body, m, vs = a['body'], xs[0], xs[2:]
    if len(body.output) != len(vs) + 1:
        raise MinigradError(f'import_onnx: Loop with scan outputs ({len(body.output) - len(vs) - 1}) is not supported')
    names = [i.name for i in body.input]

    def step(i, c, *v):
        outs = _import_nodes(body, {**a['env'], **dict(zip(names, (i, c, *v)))}, a['table'], a['opset'])
        return (i + 1, *outs)
    go = lambda i, c, *v: c if m is None else P.mul(c, P.less(i, m))     # bool * bool is and
    first = [constant(np.int64(0)), constant(True) if xs[1] is None else xs[1]]
    return list(while_loop(go, step, first + list(vs)))[2:]


def _import_table():
    one_to_one = {lower.op_type: prim for prim, lower in LOWERINGS.items() if hasattr(lower, 'op_type')}
    table = {t: (lambda prim: lambda xs, a: [prim(*xs)])(prim) for t, prim in one_to_one.items()}
    table.update({
        'Identity': lambda xs, a: xs[:1],        # not stop_gradient: ONNX has no gradients to stop
        'Equal': lambda xs, a: [_shape_expr(xs, a) if any(isinstance(x, _Shape) for x in xs) else P.equal(*xs)],
        'Concat': lambda xs, a: [_shape_expr(xs, a) if any(isinstance(x, _Shape) for x in xs)
                                 else P.concatenate(*xs, axis=a['axis'])],
        'Shape': lambda xs, a: [_Shape(xs[0], 0, False)],
        'NonZero': lambda xs, a: [xs[0] if isinstance(xs[0], _Shape) and xs[0].mask else
                                  _bad(a, 'of a tensor (a result whose shape depends on the data)')],
        'ReduceSum': _import_reduce(P.sum_), 'ReduceMax': _import_reduce(P.max_),
        'Reshape': _import_like(P.reshape_like, P.reshape, 'shape'),
        'Expand': _import_like(P.broadcast_like, P.broadcast_to, 'shape'),
        'Transpose': lambda xs, a: [P.transpose(xs[0], axes=tuple(a['perm']) if 'perm' in a else None)],
        'Cast': lambda xs, a: [P.cast(xs[0], dtype=load_onnx().helper.tensor_dtype_to_np_dtype(a['to']))],
        'Slice': _import_slice, 'Squeeze': _import_squeeze, 'Gather': _import_gather,
        'Unsqueeze': _import_unsqueeze, 'Split': _import_split,
        'Div': lambda xs, a: [P.div(*xs) if xs[0].dtype.kind == 'f' else P.cast(P.div(*xs), dtype=xs[0].dtype)],
        'ScatterElements': _import_scatter,
        'Constant': lambda xs, a: [constant(_attr_value(a))],
        'ConstantOfShape': lambda xs, a: [constant(np.full(_ints(xs[0], 'ConstantOfShape shape'), _attr_value(a)
                                                           .reshape(()) if 'value' in a else np.float32(0)))],
        'If': _import_if, 'Loop': _import_loop})
    table.update(TORCH_OPS)
    return table


def _attr_axes(xs, a, default=None):
    """Reduce axes: the second input (opset 18) or the `axes` attribute (before); None means all."""
    if len(xs) > 1 and xs[1] is not None:
        return tuple(_ints(xs[1], f"{a['op']} axes"))
    return tuple(a['axes']) if 'axes' in a else default


def _import_mean_like(fn):
    def imp(xs, a):
        axes = _attr_axes(xs, a)
        if axes == () and not a.get('noop_with_empty_axes'):
            axes = None
        return [fn(xs[0], axis=axes, keepdims=bool(a.get('keepdims', 1)))]
    return imp


def _import_gemm(xs, a):
    """Y = alpha * A' @ B' + beta * C (A' = A.T when transA, B' likewise): nn.Linear's export."""
    A, B = (F.transpose(x) if a.get(t) else x for x, t in ((xs[0], 'transA'), (xs[1], 'transB')))
    y = P.matmul(A, B)
    y = y if a.get('alpha', 1.0) == 1.0 else P.mul(y, np.float32(a['alpha']))
    if len(xs) > 2 and xs[2] is not None:
        c = xs[2] if a.get('beta', 1.0) == 1.0 else P.mul(xs[2], np.float32(a['beta']))
        y = P.add(y, c)
    return [y]


def _import_flatten(xs, a):
    x, ax = xs[0], a.get('axis', 1)
    if x.shape is None or None in x.shape[ax:]:
        raise MinigradError(f'import_onnx: Flatten needs the dims from axis {ax} on known, got shape {x.shape}')
    lead = x.shape[:ax]
    head = int(np.prod(lead)) if None not in lead else -1
    return [P.reshape(x, shape=(head, int(np.prod(x.shape[ax:]))))]


def _import_clip(xs, a):
    """Clip(x, min, max): inputs from opset 11 (attributes before); a missing bound clips nothing."""
    x, lo, hi = (list(xs) + [None, None])[:3]
    lo = lo if lo is not None else a.get('min')
    hi = hi if hi is not None else a.get('max')
    x = x if lo is None else F.maximum(x, lo)
    return [x if hi is None else F.minimum(x, hi)]


def _import_softmax(fn):
    """From opset 13 over `axis` (default -1); before, over x flattened to 2-D at `axis` (default 1): all the
    dims from `axis` on together (the same when `axis` is the last)."""
    def imp(xs, a):
        x, axis = xs[0], a.get('axis', -1 if a['opset'] >= 13 else 1)
        if a['opset'] >= 13 or x.shape is not None and axis % len(x.shape) == len(x.shape) - 1:
            return [fn(x, axis=axis)]
        if x.shape is None or None in x.shape[axis:]:
            raise MinigradError(f"import_onnx: {a['op']} before opset 13 needs the dims from axis {axis} on "
                                f"known, got shape {x.shape}")
        flat = P.reshape(x, shape=(-1, int(np.prod(x.shape[axis:]))))
        return [P.reshape_like(fn(flat, axis=-1), x)]
    return imp


def _fold(fn):        # Max / Min / Sum take any number of inputs
    return lambda xs, a: [functools.reduce(fn, xs)]


def _no_erf(xs, a):
    raise MinigradError("import_onnx: Erf has no minigrad primitive (it is not composed of exp/tanh exactly); "
                        "export GELU as nn.GELU(approximate='tanh'), which needs only Tanh")


# The ONNX operators torch.onnx.export writes for a small PyTorch model (Gemm, Sigmoid, Softmax, ...), each
# mapped onto minigrad's public composites, so a model trained in PyTorch imports as an ordinary graph
TORCH_OPS = {
    'Gemm': _import_gemm, 'Neg': lambda xs, a: [F.negative(xs[0])], 'Abs': lambda xs, a: [F.abs(xs[0])],
    'Sqrt': lambda xs, a: [F.sqrt(xs[0])], 'Sigmoid': lambda xs, a: [F.sigmoid(xs[0])],
    'Relu': lambda xs, a: [F.relu(xs[0])], 'Sub': lambda xs, a: [F.subtract(*xs)],
    'LeakyRelu': lambda xs, a: [F.where(F.greater(xs[0], 0.0), xs[0], P.mul(xs[0], np.float32(a.get('alpha', 0.01))))],
    'Softmax': _import_softmax(F.softmax), 'LogSoftmax': _import_softmax(F.log_softmax),
    'Max': _fold(F.maximum), 'Min': _fold(F.minimum), 'Sum': _fold(F.add),
    'Greater': lambda xs, a: [F.greater(*xs)], 'GreaterOrEqual': lambda xs, a: [P.greater_equal(*xs)],
    'LessOrEqual': lambda xs, a: [P.less_equal(*xs)], 'Not': lambda xs, a: [P.equal(xs[0], False)],
    'Or': lambda xs, a: [P.maximum(*xs)], 'And': lambda xs, a: [P.mul(*xs)],
    'ReduceMean': _import_mean_like(F.mean), 'Flatten': _import_flatten, 'Clip': _import_clip, 'Erf': _no_erf,
}


def _bad(a, what):
    raise MinigradError(f"import_onnx: {a['op']} {what} is not supported")


def _read(env, name, what):
    if name not in env:
        raise InputError(f"import_onnx: {what} reads '{name}', which no input, initializer or earlier node "
                         'makes (a malformed model)')
    return env[name]


def _import_nodes(gp, env, table, opset, top=False) -> list:
    """Add the nodes of ONNX graph `gp` (written for ONNX `opset`) to the default graph; `env` maps ONNX
    names to Symbols (filled)."""
    onnx = load_onnx()
    for t in gp.initializer:      # weights (float, not scalars) of the top graph become Variables to train
        arr = onnx.numpy_helper.to_array(t)
        weight = top and arr.dtype.kind == 'f' and arr.ndim > 0
        env[t.name] = (Variable_ if weight else constant)(arr, name=t.name)
    for n in gp.node:
        if n.op_type not in table:
            raise MinigradError(f"import_onnx: node '{n.name}' ({n.op_type}) is not supported: minigrad has no "
                                f'rule to import ONNX {n.op_type}')
        xs = [_read(env, i, f"node '{n.name}' ({n.op_type})") if i else None for i in n.input]
        if n.op_type not in _SHAPE_OPS and any(isinstance(x, _Shape) for x in xs):
            raise MinigradError(f"import_onnx: node '{n.name}' ({n.op_type}) computes with a tensor shape, "
                                'which minigrad only imports in the patterns its own lowerings write')
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}     # string attributes
        attrs.update(op=n.op_type, env=env, table=table, opset=opset, n_out=len(n.output))
        env.update(zip(n.output, table[n.op_type](xs, attrs)))
    return [_read(env, o.name, f"the output of graph '{gp.name}'") for o in gp.output]


def import_onnx(f) -> Graph:
    """Read an ONNX model (path, binary file or ModelProto) into a minigrad Graph; `graph.inputs` are its
    placeholders and `graph.outputs` its results. `If` becomes mg.cond, `Loop` mg.while_loop. Float
    initializers (weights, biases) become Variables (``graph.variables``: train them further with
    mg.gradients); the operators of a PyTorch MLP (Gemm, Relu, Sigmoid, Softmax, Flatten, Clip, ...) map
    onto minigrad composites. Erf raises (no minigrad primitive): export GELU with approximate='tanh'.
    Each operator means what it meant at the model's opset (before 13 Softmax flattens to 2-D at its
    axis and Squeeze/Unsqueeze take axes as an attribute, before 10 Slice its bounds); shape arithmetic
    on dims known when the graph is built (torch's chunk) is computed at import. A file that is not a
    well-formed model (empty, corrupt, a name nothing defines, a Squeeze of a dim other than 1) raises an
    InputError saying so.

    >>> import minigrad as mg, io, numpy as np
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (2,), name='x'); y = x * 3.0
    >>> buf = io.BytesIO(); _ = mg.export_onnx(y, buf, inputs=[x]); _ = buf.seek(0)
    >>> h = mg.import_onnx(buf)
    >>> mg.Session(h).run(h.outputs[0], {h.inputs[0]: np.ones(2, np.float32)})
    array([3., 3.], dtype=float32)
    """
    onnx = load_onnx()
    model = f if isinstance(f, onnx.ModelProto) else _load(onnx, f)
    opset = [o.version for o in model.opset_import if o.domain in ('', 'ai.onnx')]
    if not model.graph.output or not opset:
        raise InputError(f'mg.import_onnx: {_what(f)}: no ONNX graph in it (no outputs, or no ONNX opset); an '
                         'empty or truncated file?')
    g, env = Graph(model.graph.name), {}
    with g.as_default():
        for vi in model.graph.input:
            t = vi.type.tensor_type
            shape = [d.dim_value if d.HasField('dim_value') else None for d in t.shape.dim] if t.HasField('shape') else None
            env[vi.name] = placeholder(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type), shape, name=vi.name)
        outs = _import_nodes(model.graph, env, _import_table(), opset[0], top=True)
    g.inputs = [env[vi.name] for vi in model.graph.input]
    g.outputs = [g.lift(o) for o in outs]
    return g


def _what(f):
    if isinstance(f, (bytes, bytearray)):
        return f'these {len(f)} bytes'
    if isinstance(f, (str, os.PathLike)):
        return f"'{os.fspath(f)}'"
    return f"the {type(f).__name__} {getattr(f, 'name', '')}".rstrip()


def _load(onnx, f):
    """The ModelProto in `f` (bytes, a path or a binary file), its external data (beside a path) included."""
    data = bytes(f) if isinstance(f, (bytes, bytearray)) else f.read() if hasattr(f, 'read') else None
    if data is None:
        if not isinstance(f, (str, os.PathLike)):
            raise InputError(f'mg.import_onnx: expected a path, a binary file, bytes or an onnx.ModelProto, got '
                             f'{type(f).__name__}')
        with open(f, 'rb') as fh:
            data = fh.read()
    try:
        model = onnx.load_from_string(data)
    except Exception as e:                # protobuf's DecodeError has no stable import path: re-raised clearly
        raise InputError(f'mg.import_onnx: {_what(f)}: not an ONNX model ({type(e).__name__}: {e})') from None
    if not isinstance(f, (bytes, bytearray)) and not hasattr(f, 'read'):
        onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(f)))
    return model
