"""mg.export_onnx: write a minigrad graph as an ONNX model (onnx_import.py reads one back).

Each primitive's ONNX lowering lives on its record (``Primitive.onnx``): a function
``lower(b, node, names) -> [output names]`` where ``b`` is the `_Builder` below. Compiler ops
without a lowering are expanded with their ``decompose`` sub-graph; ``cond`` becomes ONNX ``If``
and ``while`` becomes ``Loop``. Variables and constants become initializers.

Export lowers only what the outputs need; ``dynamic_axes=`` rebuilds the graph on placeholders with
those dims unknown. Where onnxruntime and numpy differ on special values, the lowering writes minigrad's
meaning (relu(nan) = 0, sqrt(-0.0) = -0.0, max of a NaN is NaN); the sign of zero through ONNX Where is
onnxruntime's (Where(True, -0.0, y) gives +0.0 there).
"""
from __future__ import annotations

import warnings

import numpy as np

from ..core import ops as P
from ..compiler import ops as C
from ..compiler.program import Program, WRITTEN
from ..compiler.rewrite import copy_node
from ..core.primitive import apply
from ..core.names import Names
from ..core.validate import is_int
from ..core.control import COND, WHILE
from ..core.errors import InputError, MinigradError
from ..core.graph import Graph, Symbol, needed_nodes, placeholder, CHECK, CONSTANT, VARIABLE, PLACEHOLDER
from ..session import Session
from ..transforms.trace import TracedFunction, trace

DEFAULT_OPSET = 18          # ReduceMax takes its axes as an input from opset 18


def load_onnx():
    """The onnx package, imported when export or import first needs it (an optional dependency).

    >>> load_onnx().__name__
    'onnx'
    """
    try:
        import onnx
        return onnx
    except ImportError as e:
        raise MinigradError('mg.export_onnx and mg.import_onnx need the onnx package: pip install onnx') from e


class _Builder:
    """Collects ONNX nodes and initializers for one (sub-)graph; names are unique across the model.
    ``values``: {id(a Variable's initial value): the value to write}, for those a Session or Program holds."""

    def __init__(self, names=None, values=None):
        self.nodes, self.inits, self.names, self.values = [], [], names if names is not None else Names(), values or {}

    def sub(self):
        return _Builder(self.names, self.values)

    def fresh(self, base: str) -> str:
        return self.names(None, base)

    def op(self, op_type, inputs, n_out=1, name='t', **attrs) -> list[str]:
        outs = [self.fresh(name) for _ in range(n_out)]
        self.nodes.append(load_onnx().helper.make_node(op_type, list(inputs), outs, name=self.fresh(op_type), **attrs))
        return outs

    def const(self, value, name='const') -> str:
        name = self.fresh(name)
        self.inits.append(load_onnx().numpy_helper.from_array(np.asarray(value), name))
        return name

    def variable(self, node):
        """The value a Variable is written with: the named Session's or Program's, else its initial value,
        unless a run has changed the Variable since (then the caller must say whose values)."""
        init = node.params['initial_value']
        if id(init) in self.values:
            return self.values[id(init)]
        written = WRITTEN.get(id(init))
        if written is not None and written[0]() is init:
            raise MinigradError(f"export_onnx: Variable '{node.outputs[0].name}' has been changed by {written[1]} "
                                'since the graph was built, so its initial value is not what the graph holds now; '
                                'pass session=<that Session or Program> to export its current values (a new '
                                'mg.Session(graph) exports the initial ones)')
        return init


def _value_info(name, dtype, shape, dims=None, front='batch'):
    """A tensor's ONNX type: `dims` {axis: name} names dynamic dims; another unknown dim in front is
    named `front` (None: left unnamed, e.g. an output's)."""
    onnx = load_onnx()
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    if shape is None:
        return onnx.helper.make_tensor_value_info(name, elem, None)
    dims = {a % len(shape): n for a, n in (dims or {}).items()} if shape else {}
    return onnx.helper.make_tensor_value_info(name, elem, [
        dims.get(i, front if d is None and i == 0 else d) for i, d in enumerate(shape)])


# ------------------------------------------------------------------ lowerings, stored on the records
def _cast_to(b, x, have, want):
    """x as dtype `want` (a Cast when it is not already): ONNX ops take one dtype, numpy promotes."""
    if np.dtype(have) == np.dtype(want):
        return x
    return b.op('Cast', [x], to=load_onnx().helper.np_dtype_to_tensor_dtype(np.dtype(want)))[0]


# The dtypes onnxruntime's CPU kernels compute these ops in (narrow to wide; fewer than ONNX's type
# constraints allow, or than numpy computes in), and whether the op keeps the bits of a same-width int of
# the other sign (a sum or a select of uint64 done in int64 is exact; a max is not)
_ALL_INTS = 'int8 uint8 int16 uint16 int32 uint32 int64 uint64'
_KERNELS = {'Pow': ('int32 int64', False), 'MatMul': ('int32 uint32 int64 uint64', True),
            'Less': (_ALL_INTS, False), 'Max': ('int8 uint8 int32 uint32 int64 uint64', False),
            'Where': ('int8 uint8 int32 uint32 int64', True), 'ReduceSum': ('int32 int64', True),
            'ReduceMax': ('int8 uint8 int32 int64', False)}


def _via(node, op_type, dt):
    """The dtype ONNX op_type computes values of dtype `dt` in: `dt` (every float, and the ints onnxruntime
    has a kernel for), else the narrowest listed int holding every value of `dt` (bools, 16-bit ints),
    else a same-width int of the other sign when that keeps the bits; refused when none does."""
    dt = np.dtype(dt)
    ints, keeps_bits = _KERNELS.get(op_type, (_ALL_INTS, False))
    if dt.kind in 'fc' or dt.name in ints.split():
        return dt
    for c in map(np.dtype, ints.split()):
        if np.can_cast(dt, c, 'safe') or keeps_bits and dt.kind in 'iu' and c.itemsize == dt.itemsize:
            return c
    raise _fail(node, f'is ONNX {op_type} on {dt}, which onnxruntime has no kernel for, nor for a wider int '
                      f'that holds every {dt} value ({ints}); cast the values to one of those first')


def _emit(b, node, op_type, xs, dts, dt, out_dt=None, name=None, **attrs):
    """ONNX op_type on xs: those of a dtype in `dts` (None: not an operand, e.g. axes) cast to `dt`, or to
    the dtype onnxruntime computes op_type in (_via); the result cast to `out_dt` (None: kept as it is)."""
    via = _via(node, op_type, dt)
    xs = [x if d is None else _cast_to(b, x, d, via) for x, d in zip(xs, dts)]
    back = out_dt is not None and via != np.dtype(out_dt)
    y = b.op(op_type, xs, name='t' if back else name or node.outputs[0].name, **attrs)
    return [_cast_to(b, y[0], via, out_dt)] if back else y


def _simple(op_type, on_bool=None, operands=None, compare=False):
    """One ONNX op; inputs `operands` (default all) are cast to the output dtype (to their common dtype
    when `compare`); `on_bool`: the op for all-bool inputs (ONNX arithmetic has no bool form)."""
    def lower(b, node, xs):
        ins = node.inputs
        if on_bool and all(np.dtype(s.dtype) == np.bool_ for s in ins):
            return b.op(on_bool, xs, name=node.outputs[0].name)
        idx = range(len(xs)) if operands is None else operands
        want = np.result_type(*[ins[i].dtype for i in idx]) if compare else node.outputs[0].dtype
        return _emit(b, node, op_type, xs, [s.dtype if i in idx else None for i, s in enumerate(ins)], want,
                     None if compare else want)
    lower.op_type = op_type              # read by import_onnx: the one-to-one ops map back to their record
    return lower


def _pow(b, node, xs):
    """x ** 0.5 (mg.sqrt) is ONNX Sqrt: Pow(x, 0.5) gives +inf at -inf and +0.0 at -0.0, numpy nan and -0.0."""
    x, y = node.inputs
    if y.node.prim is CONSTANT and np.all(np.asarray(y.node.params['value']) == 0.5) and \
            x.shape == node.outputs[0].shape and x.dtype == node.outputs[0].dtype:
        return b.op('Sqrt', xs[:1], name=node.outputs[0].name)
    return _POW(b, node, xs)


_POW = _simple('Pow')
_pow.op_type = 'Pow'


def _relu(b, node, xs):
    """minigrad's relu(nan) is 0 (ONNX Relu gives nan): Where(0 < x, x, 0), the composite relu stands for."""
    dt = node.outputs[0].dtype
    zero = b.const(np.zeros((), dt), 'zero')
    less = _emit(b, node, 'Less', [zero, xs[0]], [dt, dt], dt, name='less')
    return _emit(b, node, 'Where', [less[0], xs[0], zero], [None, dt, dt], dt, dt)


def _axes(b, node):
    axis = node.params.get('axis')
    if axis is None:
        return []
    return [b.const(np.array([axis] if np.ndim(axis) == 0 else list(axis), np.int64), 'axes')]


def _reduce(op_type, nothing):
    """ReduceSum/ReduceMax (the input cast to the output dtype: a sum of bools counts in int64); a max
    with initial= is Max(ReduceMax(x), initial), and initial=-inf on floats is ReduceMax alone (opset 18
    gives -inf over an empty axis). axis=() reduces nothing: `nothing` (numpy's sum adds 0: -0.0 -> 0.0)."""
    def lower(b, node, xs):
        out, initial, axis = node.outputs[0], node.params.get('initial'), node.params.get('axis')
        x = _cast_to(b, xs[0], node.inputs[0].dtype, out.dtype)
        plain = initial is None or (np.dtype(out.dtype).kind == 'f' and initial == -np.inf)
        if axis is not None and np.ndim(axis) and not len(axis):
            y = b.op(nothing, [x, b.const(np.zeros((), out.dtype), 'zero')][:1 + (nothing == 'Add')], name='noop')
        else:
            keep = int(bool(node.params.get('keepdims')))
            y = _emit(b, node, op_type, [x] + _axes(b, node), [out.dtype, None], out.dtype, out.dtype,
                      name=out.name if plain else 'reduce', keepdims=keep)
            y = _NAN_SAFE.get((op_type, np.dtype(out.dtype).kind), lambda *a: y)(b, node, x, y, keep)
        return y if plain else _emit(b, node, 'Max', [y[0], b.const(np.asarray(initial, out.dtype), 'initial')],
                                     [out.dtype] * 2, out.dtype, out.dtype)
    return lower


def _nan_max(b, node, x, y, keep):
    """onnxruntime's ReduceMax may skip a NaN (max([1, nan, 2]) is 2); numpy's max is nan: where any is."""
    nans = b.op('ReduceMax', [b.op('Cast', b.op('IsNaN', [x]), to=load_onnx().TensorProto.INT32)[0]] + _axes(b, node),
                keepdims=keep)[0]
    any_nan = b.op('Greater', [nans, b.const(np.int32(0))])[0]
    return b.op('Where', [any_nan, b.const(np.asarray(np.nan, node.outputs[0].dtype), 'nan'), y[0]],
                name=node.outputs[0].name)


_NAN_SAFE = {('ReduceMax', 'f'): _nan_max}       # (ONNX op, dtype kind) -> the fix-up after it


def _reshape(b, node, xs):
    shape = list(node.params['shape']) if np.ndim(node.params['shape']) else [node.params['shape']]
    # ONNX reads a 0 in the shape as "copy that dim" unless allowzero=1 (numpy means size 0)
    return b.op('Reshape', [xs[0], b.const(np.array(shape, np.int64), 'shape')], name=node.outputs[0].name,
                allowzero=int(0 in shape))


def _transpose(b, node, xs):
    axes = node.params.get('axes')
    if axes is not None and not len(axes):     # a scalar: an empty perm has no ONNX attribute type
        return b.op('Identity', xs, name=node.outputs[0].name)
    extra = {} if axes is None else {'perm': list(axes)}
    return b.op('Transpose', xs, name=node.outputs[0].name, **extra)


def _like(op_type, **attrs):      # reshape_like / broadcast_like: the target shape is Shape(ref) at run time
    def lower(b, node, xs):
        x = xs[0]
        if node.params.get('axes'):
            x = b.op('Unsqueeze', [x, b.const(np.array(node.params['axes'], np.int64), 'axes')])[0]
        return b.op(op_type, [x, b.op('Shape', [xs[1]])[0]], name=node.outputs[0].name, **attrs)
    return lower


def _cast(b, node, xs):
    to = load_onnx().helper.np_dtype_to_tensor_dtype(np.dtype(node.params['dtype']))
    return b.op('Cast', xs, name=node.outputs[0].name, to=to)


_BIG = np.iinfo(np.int64).max     # a Slice bound past the end (ONNX clamps it)


def _fail(node, what):
    return MinigradError(f"export_onnx: '{node.outputs[0].name}' ({node.op}) {what}")


def _i64(v):
    return np.array(v, np.int64)


def _positions(node, shape, idx):
    """The flat positions x[idx] reads for a static shape: any numpy index becomes one Gather/Scatter."""
    if shape is None or None in shape:
        raise _fail(node, f'with index {idx!r} needs a known input shape, got {shape}: give the placeholder '
                          'a full shape (advanced indexing that moves axes is lowered through flat positions)')
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[idx]


def _getitem(b, node, xs):
    """ints/slices -> Slice (+ Squeeze), None -> Unsqueeze, one int array -> Gather on its axis; other
    advanced indices (several arrays, masks, ints beside an array) -> Gather of flat positions."""
    x, idx = node.inputs[0], node.params['idx']
    items = [np.flatnonzero(i) if isinstance(i, np.ndarray) and i.dtype == np.bool_ and i.ndim == 1 else i
             for i in idx]
    arrays = [i for i in items if isinstance(i, (np.ndarray, bool))]
    if len(arrays) > 1 or arrays and (getattr(arrays[0], 'dtype', np.dtype(bool)).kind not in 'iu' or
                                      any(isinstance(i, (int, np.integer)) for i in items)):
        flat = b.op('Reshape', [xs[0], b.const(_i64([-1]))])[0]
        return b.op('Gather', [flat, b.const(_positions(node, x.shape, idx))], name=node.outputs[0].name, axis=0)
    if any(i is Ellipsis for i in items):
        if x.shape is None:
            raise _fail(node, f'with index {idx!r}: ... needs the input rank to be known, got shape None')
        k = [i is Ellipsis for i in items].index(True)
        items[k:k + 1] = [slice(None)] * (len(x.shape) - sum(i is not None for i in items) + 1)
    sl, squeeze, unsq, gather, dim, out = [], [], [], None, 0, 0
    for i in items:
        if i is None:
            unsq.append(out)
        elif isinstance(i, np.ndarray):
            gather = (out, i)
        elif isinstance(i, slice):
            step = 1 if i.step is None else int(i.step)
            if (i.start, i.stop, step) != (None, None, 1):      # a reversed slice runs to before index 0
                sl.append(((_BIG if step < 0 else 0) if i.start is None else i.start,
                           (-_BIG - 1 if step < 0 else _BIG) if i.stop is None else i.stop, dim, step))
        else:
            sl.append((int(i), int(i) + 1 or _BIG, dim, 1))      # x[-1] ends at the end, not at 0
            squeeze.append(dim)
        out += not isinstance(i, (int, np.integer))
        dim += i is not None
    y = xs[0]
    if sl:
        y = b.op('Slice', [y] + [b.const(_i64(v)) for v in zip(*sl)])[0]
    for op_type, axes in (('Squeeze', squeeze), ('Unsqueeze', unsq)):
        y = b.op(op_type, [y, b.const(_i64(axes))])[0] if axes else y
    return b.op('Gather', [y, b.const(gather[1].astype(np.int64))], axis=gather[0])[:1] if gather else [y]


def _scatter_add(b, node, xs):
    """Zeros of ref's static size, g added at the flat positions (repeated ones accumulate), reshaped."""
    g, ref = node.inputs[:2]
    pos = _positions(node, ref.shape, node.params['idx'])
    dt = np.dtype(node.outputs[0].dtype)
    upd = xs[0] if g.shape == pos.shape else b.op('Expand', [xs[0], b.const(_i64(pos.shape))])[0]
    zeros = b.op('ConstantOfShape', [b.const(_i64([int(np.prod(ref.shape))]))],
                 value=load_onnx().numpy_helper.from_array(np.zeros(1, dt)))[0]
    upd = b.op('Reshape', [upd, b.const(_i64([-1]))])[0]
    s = b.op('ScatterElements', [zeros, b.const(pos.reshape(-1)), upd], axis=0, reduction='add')[0]
    return b.op('Reshape', [s, b.const(_i64(ref.shape))], name=node.outputs[0].name, allowzero=int(0 in ref.shape))


def _sum_to_like(b, node, xs):
    """ReduceSum (keepdims) over the axes where ref is 1 (or missing in front), then the shape of ref; the
    axes come from the avals when ref's shape is known, else from Shape(ref) at run time."""
    x, ref = node.inputs
    if x.shape is None or ref.shape is None:
        raise _fail(node, f'needs inputs of known rank, got shapes {x.shape} and {ref.shape}')
    lead, y = len(x.shape) - len(ref.shape), xs[0]
    if None not in ref.shape:
        axes = [i for i, d in enumerate((1,) * lead + ref.shape) if d == 1 and x.shape[i] != 1]
        y = b.op('ReduceSum', [y, b.const(_i64(axes))], keepdims=1)[0] if axes else y
        shape = b.const(_i64(ref.shape))
    else:      # padded with 1s in front, the axes of size 1 in ref are exactly the ones to sum
        shape = b.op('Shape', [xs[1]])[0]
        pad = b.op('Concat', [b.const(np.ones(lead, np.int64)), shape], axis=0)[0] if lead else shape
        ones = b.op('NonZero', b.op('Equal', [pad, b.const(_i64(1))]))[0]
        axes = b.op('Reshape', [ones, b.const(_i64([-1]))])[0]
        y = b.op('ReduceSum', [y, axes], keepdims=1, noop_with_empty_axes=1)[0]
    y = b.op('Reshape', [y, shape], allowzero=1)[0] if lead else y
    dt = np.dtype(node.outputs[0].dtype)
    return b.op('Cast', [y], to=load_onnx().helper.np_dtype_to_tensor_dtype(dt))[:1] if dt != x.dtype else [y]


# minigrad's bool add / maximum are "or" and bool mul is "and" (less_equal is maximum(less, equal))
LOWERINGS = {P.add: _simple('Add', on_bool='Or'), P.mul: _simple('Mul', on_bool='And'), P.div: _simple('Div'),
             P.pow_: _pow, P.maximum: _simple('Max', on_bool='Or'), P.exp: _simple('Exp'),
             P.log: _simple('Log'), P.sin: _simple('Sin'), P.cos: _simple('Cos'), P.tanh: _simple('Tanh'),
             P.where: _simple('Where', operands=(1, 2)), P.less: _simple('Less', compare=True),
             P.equal: _simple('Equal', compare=True), P.cast: _cast, P.stop_gradient: _simple('Identity'),
             P.sum_: _reduce('ReduceSum', 'Add'), P.max_: _reduce('ReduceMax', 'Identity'), P.reshape: _reshape,
             P.transpose: _transpose, P.matmul: _simple('MatMul'),
             P.broadcast_to: lambda b, n, xs: b.op('Expand', [xs[0], b.const(np.array(n.params['shape'], np.int64))],
                                                   name=n.outputs[0].name),
             P.concatenate: lambda b, n, xs: b.op('Concat', [_cast_to(b, x, s.dtype, n.outputs[0].dtype)
                                                         for x, s in zip(xs, n.inputs)],
                                                  name=n.outputs[0].name, axis=n.params['axis']),
             P.broadcast_like: _like('Expand'),
             P.reshape_like: _like('Reshape', allowzero=1),      # a 0 in Shape(ref) is a size, not "copy"
             P.getitem: _getitem, P.scatter_add: _scatter_add, P.sum_to_like: _sum_to_like,
             C.sub: _simple('Sub'), C.relu: _relu,
             CHECK: _simple('Identity')}      # ONNX has no run-time assertion: the deployed model does not check
for _prim, _lower in LOWERINGS.items():
    _prim.onnx = _lower


# ------------------------------------------------------------------ graphs, cond and while
def _lower_graph(b, graph, env, nodes=None):
    """Emit `nodes` (default: every node of `graph`) into `b`; `env` maps Symbols to ONNX names."""
    nodes = graph.nodes if nodes is None else nodes
    stack_users = {id(s) for n in nodes if n.prim is WHILE for s in n.outputs[-1:]}
    for node in nodes:
        if any(id(s) in stack_users for s in node.inputs):
            raise MinigradError(f"export_onnx: '{node.outputs[0].name}' ({node.op}) uses a while loop's "
                                'gradient stack, which has no meaning in an inference graph')
        if node.prim is PLACEHOLDER:
            if id(node.outputs[0]) not in env:
                raise MinigradError(f"export_onnx: placeholder '{node.outputs[0].name}' is not among the inputs")
            continue
        if node.prim in (CONSTANT, VARIABLE):    # both become initializers (weights are frozen in the model)
            value = node.params['value'] if node.prim is CONSTANT else b.variable(node)
            env[id(node.outputs[0])] = b.const(value, node.outputs[0].name)
            continue
        outs = _lower_node(b, node, [env[id(s)] for s in node.inputs])
        for s, name in zip(node.outputs, outs):
            env[id(s)] = name


def _lower_node(b, node, xs):
    if node.prim.onnx is not None:
        outs = node.prim.onnx(b, node, xs)
        if not isinstance(outs, (list, tuple)) or len(outs) != len(node.outputs):   # zip('tanh') would give 't'
            raise MinigradError(f"export_onnx: the ONNX lowering of '{node.op}' (node '{node.outputs[0].name}') "
                                f"returned {outs!r}; expected a list of {len(node.outputs)} ONNX output name(s), "
                                f"as b.op(...) returns")
        return outs
    if node.prim.decompose is not None:          # fma, fused: lower the parts they stand for
        sub = node.prim.decompose(node)
        env = {id(p): x for p, x in zip(sub.inputs, xs)}
        _lower_graph(b, sub, env)
        return [env[id(o)] for o in sub.outputs]
    raise MinigradError(f"export_onnx: node '{node.outputs[0].name if node.outputs else node.op}' "
                        f"({node.prim.name}) has no meaning in an inference graph / no ONNX lowering")


def _captured(graph, env):
    """A body's captured placeholders read the outer values' ONNX names."""
    return {id(ph): env[id(outer)] for outer, ph in graph.captures}


def _branch(b, graph, env):
    """An ONNX GraphProto for a cond branch (no inputs: it reads the outer names)."""
    inner, env = b.sub(), {**env, **_captured(graph, env)}
    _lower_graph(inner, graph, env)
    outs = [inner.op('Identity', [env[id(o)]], name=o.name)[0] for o in graph.outputs]
    infos = [_value_info(n, o.dtype, o.shape) for n, o in zip(outs, graph.outputs)]
    return load_onnx().helper.make_graph(inner.nodes, inner.fresh('body'), [], infos, inner.inits)


def _lower_cond(b, node, xs):
    env = {id(s): x for s, x in zip(node.inputs, xs)}
    then = _branch(b, node.params['true_graph'], env)
    other = _branch(b, node.params['false_graph'], env)
    return b.op('If', xs[:1], n_out=len(node.outputs), name=node.outputs[0].name, then_branch=then,
                else_branch=other)


def _lower_while(b, node, xs):
    """Loop(M=max_iterations, cond, *vars): the body runs body_graph, then cond_graph on the new vars.
    ONNX cannot raise MaxIterationsError: the loop stops at its trip count instead (and export warns)."""
    onnx = load_onnx()
    cg, bg = node.params['cond_graph'], node.params['body_graph']
    n = len(bg.inputs)
    env = {id(s): x for s, x in zip(node.inputs, xs)}
    first = {**env, **{id(p): x for p, x in zip(cg.inputs, xs[:n])}, **_captured(cg, env)}
    _lower_graph(b, cg, first)                       # the condition before the first iteration
    body, benv = b.sub(), {**env, **_captured(bg, env)}
    it, c_in = body.fresh('iter'), body.fresh('cond_in')
    ins = [_value_info(it, np.int64, ()), _value_info(c_in, np.bool_, ())]
    for p in bg.inputs:
        benv[id(p)] = body.fresh(p.name)
        ins.append(_value_info(benv[id(p)], p.dtype, p.shape))
    _lower_graph(body, bg, benv)
    benv.update({id(p): benv[id(o)] for p, o in zip(cg.inputs, bg.outputs)})     # then the condition
    benv.update(_captured(cg, env))
    _lower_graph(body, cg, benv)
    syms = [cg.outputs[0]] + list(bg.outputs)
    outs = [body.op('Identity', [benv[id(s)]], name=s.name)[0] for s in syms]
    g = onnx.helper.make_graph(body.nodes, body.fresh('loop_body'), ins,
                               [_value_info(o, s.dtype, s.shape) for o, s in zip(outs, syms)], body.inits)
    limit, name = node.params['max_iterations'], node.params['name']
    warnings.warn(f"export_onnx: while_loop '{name}' becomes an ONNX Loop with trip count max_iterations={limit}: "
                  f'where minigrad raises MaxIterationsError, the model stops after {limit} iterations and returns '
                  'the loop variables it has then', stacklevel=2)
    res = b.op('Loop', [b.const(np.int64(limit), 'max_iterations'), first[id(cg.outputs[0])]] + xs[:n], n_out=n,
               name=node.outputs[0].name, body=g)
    return res + ['']                               # no name for the gradient stack output


COND.onnx, WHILE.onnx = _lower_cond, _lower_while


# ------------------------------------------------------------------ the public entry points
def _resolve(obj, inputs, example_inputs, relax=False):
    """(graph, inputs, outputs, what holds its Variables' values) for a Symbol/list, a Program, a
    TracedFunction, or a Module/function. `relax`: a Program gives its input graph (before the passes
    fixed kernels to its shapes)."""
    if isinstance(obj, Program):     # its .inputs are the caller's symbols; the optimised graph has its own
        g = obj.history[0][1] if relax else obj.graph
        return g, list(g.inputs), list(g.outputs), obj
    if isinstance(obj, TracedFunction):
        return obj.graph, list(obj.inputs), list(obj.outputs), obj
    if isinstance(obj, Symbol) or (isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], Symbol)):
        outs = [obj] if isinstance(obj, Symbol) else list(obj)
        return outs[0].node.graph, [inputs] if isinstance(inputs, Symbol) else list(inputs or []), outs, None
    if callable(obj):
        if example_inputs is None:
            raise MinigradError('export_onnx: a Module or function needs example_inputs to be traced')
        t = trace(obj, *example_inputs)
        return t.graph, list(t.inputs), list(t.outputs), t
    raise MinigradError(f'export_onnx: cannot export a {type(obj).__name__} (give Symbols, a Program, '
                        'a traced function, or a Module with example_inputs)')


def _held_values(holder, named):
    """{id(a Variable's initial value): its value in `holder`}: a Program's state, a Session's (its graph's
    Variables: those it has not run hold their initial values), or the current data of a traced function's
    Parameters (fed on every call); None when nothing holds them."""
    if isinstance(holder, Program):
        return {id(v.node.params['initial_value']): s for v, s in zip(holder.variables, holder.state)}
    if isinstance(holder, TracedFunction):
        return {id(v.node.params['initial_value']): t.data for v, t in holder.params}
    if isinstance(holder, Session):
        if holder._closed:
            raise InputError('export_onnx: session= is closed, and its Variable values went with it; export '
                             'before closing it (inside its `with` block)')
        return {id(n.params['initial_value']): holder.state.get(id(n), n.params['initial_value'])
                for n in holder.graph.nodes if n.prim is VARIABLE}
    if named:
        raise InputError(f'export_onnx: session= takes the Session or compiled Program whose Variable values to '
                         f'export, got {type(holder).__name__}')
    return None


def _dynamic_spec(dynamic_axes, dynamic_batch, names, ins):
    """{ONNX name: {axis: dim name}} from torch.onnx.export-style dynamic_axes ({'x': {0: 'batch'}} or
    {'x': [0]}) and dynamic_batch=True: axis 0, named 'batch', of the inputs whose first dim is the traced
    batch (the first dim of the first input that has one); an input of another first dim stays fixed."""
    firsts = [p.shape[0] for p in ins if p.shape]
    spec = {n: {0: 'batch'} for n, p in zip(names, ins) if p.shape and p.shape[0] == firsts[0]} \
        if dynamic_batch and firsts else {}
    for name, axes in _axes_items(dynamic_axes):
        axes = dict(axes) if isinstance(axes, dict) else {int(a): f'{name}_dim{a}' for a in axes}
        spec[name] = {**spec.get(name, {}), **axes}
    return spec


def _axes_items(dynamic_axes) -> list:
    """dynamic_axes' (name, axes) pairs, checked: an input or output name -> {axis: dim name} or [axis]."""
    ok = dynamic_axes is None or isinstance(dynamic_axes, dict) and all(
        isinstance(name, str) and isinstance(axes, (dict, list, tuple)) and all(map(is_int, axes)) and
        all(isinstance(d, str) for d in (axes.values() if isinstance(axes, dict) else ()))
        for name, axes in dynamic_axes.items())
    if not ok:
        raise InputError(f"export_onnx: dynamic_axes maps input and output names to their dynamic axes "
                         f"({{'x': {{0: 'batch'}}}} or {{'x': [0]}}), got {dynamic_axes!r:.80}")
    return list((dynamic_axes or {}).items())


def _relaxed(graph, ins, outs, shapes):
    """The nodes the outputs need, applied again on placeholders of `shapes` (None: a dynamic dim), so
    every shape rule runs again; a mean's 1/N is read at run time (_mean_count), but another size the
    graph fixed (a reshape to the traced batch) stays as it was: build such models with None dims."""
    g, env = Graph(graph.name), {}
    with g.as_default():
        for p, s in zip(ins, shapes):
            env[id(p)] = placeholder(p.dtype, s, name=p.name)
        for node in needed_nodes(graph, outs):
            o = node.outputs[0] if node.outputs else None
            if node.prim is PLACEHOLDER:
                if id(o) not in env:
                    raise MinigradError(f"export_onnx: placeholder '{o.name}' is not among the inputs")
                continue
            if node.prim in (CONSTANT, VARIABLE):     # a copy: a Variable keeps its identity (initial value)
                env[id(o)] = copy_node(g, node, [])[0]
                continue
            if node.prim.kind == 'node':      # cond, while, assign: their sub-graphs keep the old shapes
                raise MinigradError(f"export_onnx: dynamic axes: '{o.name}' ({node.op}) cannot be rebuilt for new "
                                    'shapes; build the graph on placeholders with None dims and export that')
            if (count := _mean_count(node, env)) is not None:     # its gradient reads the same constant
                env[id(node.inputs[1])] = count
            if node.prim is P.reshape and -1 not in np.ravel(node.params['shape']) and \
                    None in (env[id(node.inputs[0])].shape or (None,)):
                raise _fail(node, f"reshapes to {node.params['shape']}, sizes read from the traced shapes; with "
                                  'dynamic axes it needs its input size known: leave that axis static, or build '
                                  'the graph on None dims')
            res = apply(node.prim, *[env[id(s)] for s in node.inputs], **node.params)
            env.update(zip([id(s) for s in node.outputs], res if isinstance(res, (list, tuple)) else [res]))
    return g, [env[id(p)] for p in ins], [env[id(o)] for o in outs]


def _mean_count(node, env):
    """A mean over known dims is recorded as sum(x) * c, c = 1/N read from the traced shape: when axes of
    that sum are dynamic now, 1/N with N counted at run time (as mg.mean over None dims), else None."""
    s, c = (node.inputs + [None])[:2] if node.prim is P.mul else (None, None)
    if s is None or s.node.prim is not P.sum_ or c.node.prim is not CONSTANT or c.shape != ():
        return None
    x, axis, keep = s.node.inputs[0], s.node.params.get('axis'), s.node.params.get('keepdims', False)
    axes = range(len(x.shape or ())) if axis is None else axis
    new = env[id(x)]
    if x.shape is None or None in x.shape or new.shape is not None and None not in [new.shape[a] for a in axes]:
        return None
    n = int(np.prod([x.shape[a] for a in axes]))
    if not n or c.node.params['value'] != np.asarray(1.0 / n, c.dtype):
        return None
    count = P.sum_(P.broadcast_like(np.ones((), x.dtype), new), axis=axis, keepdims=keep)
    return P.div(np.ones((), c.dtype), count)


def _input_infos(b, ins, names, spec):
    """ONNX inputs (the dims `spec` names dynamic; other unknown dims: 'batch' in front, else unnamed)."""
    env, infos = {}, []
    for p, name in zip(ins, names):
        env[id(p)] = b.fresh(name)
        infos.append(_value_info(env[id(p)], p.dtype, p.shape, spec.get(name, {})))
    return env, infos


def to_onnx(obj, inputs=None, example_inputs=None, input_names=None, output_names=None, opset=None,
            dynamic_axes=None, dynamic_batch=False, session=None):
    """The ONNX ModelProto for `obj` (same arguments as export_onnx, without the file)."""
    onnx = load_onnx()
    relax = bool(dynamic_axes or dynamic_batch)
    graph, ins, outs, holder = _resolve(obj, inputs, example_inputs, relax)
    for p in ins:
        if not isinstance(p, Symbol) or p.node.prim is not PLACEHOLDER:
            raise MinigradError(f'export_onnx: inputs must be placeholders, got {p!r}')
    values = _held_values(holder if session is None else session, session is not None)
    in_names = list(input_names or [p.name for p in ins])
    names = list(output_names or [o.name for o in outs])
    spec = _dynamic_spec(dynamic_axes, dynamic_batch, in_names, ins)
    unknown = sorted(set(spec) - set(in_names) - set(names))
    if unknown:
        raise MinigradError(f'export_onnx: dynamic_axes names {unknown}, which are not inputs {in_names} or '
                            f'outputs {names}')
    if relax:
        shapes = [_dynamic_shape(p, spec.get(n, {})) for p, n in zip(ins, in_names)]
        graph, ins, outs = _relaxed(graph, ins, outs, shapes)
    b = _Builder(values=values)
    env, infos = _input_infos(b, ins, in_names, spec)
    _lower_graph(b, graph, env, needed_nodes(graph, outs))     # only what the outputs need, as Session
    out_infos = []
    for o, name in zip(outs, names):
        out = b.fresh(name)         # an output may not reuse an input's name
        b.nodes.append(onnx.helper.make_node('Identity', [env[id(o)]], [out], name=b.fresh('Identity')))
        out_infos.append(_value_info(out, o.dtype, o.shape, spec.get(name, {}), front=None))
    g = onnx.helper.make_graph(b.nodes, graph.name or 'minigrad', infos, out_infos, b.inits)
    model = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid('', opset or DEFAULT_OPSET)],
                                   producer_name='minigrad')
    model.ir_version = min(model.ir_version, 10)    # onnxruntime may lag behind the newest IR version
    return model


def _dynamic_shape(p, axes):
    """p's shape with `axes` unknown (None); an axis past its rank is an error naming it."""
    shape = p.shape
    if axes and shape is None:
        return None
    bad = [a for a in axes if not -len(shape) <= a < len(shape)]
    if bad:
        raise MinigradError(f"export_onnx: dynamic_axes {bad} of '{p.name}' are out of range for its shape "
                            f'{tuple(shape)}')
    dyn = {a % len(shape) for a in axes}
    return tuple(None if i in dyn else d for i, d in enumerate(shape))


def export_onnx(obj, f, inputs=None, example_inputs=None, input_names=None, output_names=None, opset=None,
                dynamic_axes=None, dynamic_batch=False, session=None):
    """Write `obj` as an ONNX model to `f` (a path or a binary file object); returns the ModelProto.

    Variables become initializers holding the values the graph holds now: a Program's ``state``, a traced
    function's or Module's current Parameters, or, with ``session=`` (a Session or a Program), that one's
    values. A Variable no one named holds is written with its initial value, unless some Session or Program
    run has changed it since: then export refuses and asks for ``session=``.

    A ``mg.while_loop`` becomes an ONNX Loop whose trip count is its ``max_iterations``: ONNX cannot raise,
    so where minigrad raises MaxIterationsError the model stops there and returns the loop variables it
    has (export warns; a loop that never ends does not hang the deployed model).

    ``dynamic_axes={'x': {0: 'batch'}}`` (as torch.onnx.export; ``{'x': [0]}`` names the dim for you)
    marks dims of inputs (and outputs) dynamic: the graph is rebuilt on placeholders with those dims
    unknown, so a model traced or compiled at batch 64 runs at any batch. ``dynamic_batch=True`` is
    ``{name: {0: 'batch'}}`` for the inputs whose first dim is the traced batch (the first input's first
    dim; a weight of another first dim stays fixed: name such axes with dynamic_axes). A graph built on
    None dims is dynamic there already. A mean over a dynamic axis counts at run time (its 1/64 is not
    kept). **Trap**: another size the graph computed from the old shape (a reshape to the traced batch)
    stays fixed; build such a model on a placeholder with a None dim instead.

    >>> import minigrad as mg, io
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (None, 3), name='x'); y = x * 2.0 + 1.0
    >>> m = mg.export_onnx(y, io.BytesIO(), inputs=[x])
    >>> [n.op_type for n in m.graph.node]
    ['Mul', 'Add', 'Identity']
    """
    model = to_onnx(obj, inputs, example_inputs, input_names, output_names, opset, dynamic_axes, dynamic_batch,
                    session)
    data = model.SerializeToString()
    if hasattr(f, 'write'):
        f.write(data)
    else:
        with open(f, 'wb') as fh:
            fh.write(data)
    return model
