"""The primitive record and the single dispatch point.

A primitive is one record: a numpy implementation, a shape/dtype rule and a
vector-Jacobian product written in minigrad ops. `apply` is the only place that
decides *how* a primitive runs, by looking at its arguments (no global mode):

* a Tensor (level 1)         -> compute now and record on the tape  (tensor.py)
* a Symbol (level 2)         -> the graph builder adds a node       (graph.py)
* a Dual or a Batched (3+)   -> forward mode or vmap (transforms/); the innermost level wins
* only numpy values          -> just compute (the VJPs during a plain backward)

Each value kind subclasses `Value` and says how it applies a primitive; the argument with the highest
level decides (Autodidax's levels), so there is no mode flag and no registry of interpreters.
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

import numpy as np

from .errors import ShapeError, MinigradError, InputError, GraphError

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int64 = np.dtype(np.int64)
int32 = np.dtype(np.int32)
bool_ = np.dtype(np.bool_)
DEFAULT_FLOAT = float32


class Aval(NamedTuple):
    """Abstract value: what a shape rule sees. A dim (or the whole shape) may be None = unknown."""
    shape: tuple | None
    dtype: np.dtype


class Primitive:
    """One op, one record: its name, numpy impl, shape/dtype rule and VJP.

    ``impl(*arrays, **params) -> array``; ``shape_rule(*avals, **params) -> Aval``;
    ``vjp(needs, g, out, *inputs, **params) -> tuple`` of cotangents (None where
    ``needs[i]`` is False or the input is not differentiable). ``vjp`` must use
    minigrad ops only, so it works on numpy arrays, Tensors and Symbols alike.
    ``elementwise``, ``saves_out`` / ``saves_inputs`` (what the tape keeps for the VJP) and
    ``view`` (the result is a view of input 0) are what the tape reads.

    ``kind`` says what the record is: ``'primitive'`` (its own impl and derivative rules),
    ``'node'`` (graph structure: placeholder, constant, variable, assign, cond, while) or
    ``'compiler'`` (introduced by compiler passes: fma, fused, ...). The other fields belong to
    the other interpretations, which fill them beside their own code: ``jvp`` (forward.py),
    ``ufunc``, ``emit``, ``unit``, ``zero``, ``compose``, ``lower``, ``kernel``, ``decompose``,
    ``match`` (the compiler: compiler/rules.py says what each means), ``onnx`` (export), ``batch``
    (vmap: batching.py).

    >>> from minigrad.core.ops import mul
    >>> mul.name, mul.kind, mul.elementwise, mul.saves_out
    ('mul', 'primitive', True, False)
    """
    __slots__ = ('name', 'impl', 'shape_rule', 'vjp', 'kind', 'elementwise', 'saves_out',
                 'saves_inputs', 'multiple_results', 'doc', 'ufunc', 'view', 'emit', 'unit', 'zero',
                 'compose', 'lower', 'decompose', 'match', 'jvp', 'onnx', 'kernel', 'batch',
                 '__weakref__')

    def __init__(self, name: str, impl: Callable, shape_rule: Callable, vjp: Callable | None = None,
                 *, kind: str = 'primitive', elementwise: bool = False, saves_out: bool = False,
                 saves_inputs: bool | tuple = True, multiple_results: bool = False, doc: str = '',
                 ufunc: str | None = None, view=False, emit: Callable | None = None, unit=None,
                 zero=None, compose: Callable | None = None, lower: Callable | None = None,
                 decompose: Callable | None = None, match: Callable | None = None,
                 jvp: Callable | None = None, onnx: Callable | None = None,
                 kernel: Callable | None = None, batch: Callable | None = None):
        if kind not in ('primitive', 'node', 'compiler'):
            raise MinigradError(f"Primitive {name!r}: kind must be 'primitive', 'node' "
                                f"or 'compiler', got {kind!r}")
        if not isinstance(name, str) or not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', name):
            raise MinigradError(f'register_primitive: the name must be an identifier (letters, digits, _), '
                                f'got {name!r}; names reach generated code and drawings')
        names_ufunc = isinstance(ufunc, str) and re.fullmatch(r'[a-z_][a-z0-9_]*', ufunc) \
            and isinstance(getattr(np, ufunc, None), np.ufunc)
        if ufunc is not None and not names_ufunc:
            raise MinigradError(f'Primitive {name!r}: ufunc must name a numpy ufunc '
                                f'(such as \'add\'), got {ufunc!r}')
        self.name, self.impl, self.shape_rule, self.vjp = name, impl, shape_rule, vjp
        self.kind, self.elementwise, self.multiple_results = kind, elementwise, multiple_results
        # saves_inputs True: the VJP reads every input's value; False: none, only their shapes and
        # dtypes (an input may change after, and the tape may keep a stand-in); a tuple: the inputs it
        # reads (where: the condition)
        self.saves_out, self.saves_inputs = saves_out, saves_inputs
        self.doc, self.ufunc, self.view, self.emit = doc, ufunc, view, emit
        self.unit, self.zero, self.compose, self.lower = unit, zero, compose, lower
        self.decompose, self.match, self.jvp, self.onnx = decompose, match, jvp, onnx
        # batch: vmap's rule (batching.py fills the built-in ones)
        self.kernel, self.batch = kernel, batch

    def reads_input(self, k: int) -> bool:
        """Whether the VJP reads input k's value, not only its shape and dtype (``saves_inputs``)."""
        return self.saves_inputs is True or (self.saves_inputs is not False and k in self.saves_inputs)

    def is_view(self, params) -> bool:
        return self.view(params) if callable(self.view) else bool(self.view)

    def __repr__(self):
        return f'<{self.kind} {self.name}>'

    # a record is its name: pickle and deepcopy find the registered one
    def __reduce__(self):
        return op_named, (self.name,)


def refuse_pickle(what: str, instead: str):
    """A __reduce_ex__ for objects that hold compiled code, locks or user functions: a clear error instead."""
    def __reduce_ex__(self, protocol):
        raise InputError(f'{what} cannot be pickled or deep-copied: {instead}')
    return __reduce_ex__


def op_named(name: str) -> Primitive:
    """The registered record called `name` (what unpickling a graph looks up)."""
    if name not in OPS:
        raise MinigradError(f'no op {name!r} is registered here: register it '
                            f'(mg.register_primitive) before loading a graph that uses it')
    return OPS[name]


OPS: dict[str, Primitive] = {}          # every record by name: primitives, node kinds, compiler ops
PRIMITIVES: dict[str, Primitive] = {}   # the primitives alone (what has its own derivative rules)


def register_primitive(name: str, impl: Callable, shape_rule: Callable, vjp: Callable | None = None,
                       **fields) -> Primitive:
    """Add a record to the op table: the one way to define an op (primitives, node kinds and
    compiler ops alike; ``kind=`` says which). Returns the record, which is callable.

    >>> import numpy as np, minigrad as mg
    >>> from minigrad.core import register_primitive, elementwise_rule
    >>> sq = register_primitive('square_demo', np.square, elementwise_rule,
    ...                         lambda needs, g, out, x: (g * x * 2,), elementwise=True, ufunc='square')
    >>> sq(mg.tensor([3.0])).tolist()
    [9.0]
    """
    prim = Primitive(name, impl, shape_rule, vjp, **fields)
    OPS[name] = prim
    if prim.kind == 'primitive':
        PRIMITIVES[name] = prim
    return prim


# ---------------------------------------------------------------- dispatch by value kind
class Value:
    """What every value kind is (Autodidax's Tracer): a ``level`` and its own way to apply a primitive.

    Tensor (the tape, level 1), Symbol (a graph, level 2), and the transformations' values (Dual of
    forward mode, Batched of vmap: levels 3 and up, the innermost highest). `apply` hands a primitive
    to its highest-level argument; raw arrays and numbers run the primitive's impl."""
    __slots__ = ()
    level = 0
    kinds: list = []                    # every value kind, in the order the classes were defined

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        Value.kinds.append(cls)

    def apply(self, prim: Primitive, args: tuple, params: dict):
        raise NotImplementedError(f'{type(self).__name__} does not say how to apply a primitive')

    def graph_error(self) -> Exception:
        """Why this value cannot become part of a graph (Graph.lift raises it)."""
        return MinigradError(f'a {type(self).__name__} cannot become part of a graph')

    def index_rule(self, x, idx):
        """x[idx] with this value (holding no array) in idx, the kind's own way (vmap: a gather)."""
        raise GraphError(f'indexing with a {type(self).__name__} is not supported: indices must be known when the '
                         'graph is built (use a constant, or mg.where for data-dependent selection)')

    @classmethod
    def cond_rule(cls, pred, true_fn, false_fn):
        """mg.cond the kind's own way (vmap runs both branches and selects), or NotImplemented."""
        return NotImplemented

    @classmethod
    def while_rule(cls, cond, body, values, loop_vars, single, limit, name):
        """mg.while_loop the kind's own way (vmap: while any example's condition holds), or NotImplemented."""
        return NotImplemented


class _Hooks:
    """What lower modules need from upper ones without importing them (not dispatch)."""
    # plain data -> Tensor: tensor.py (mg.exp([1, 2]) is a Tensor)
    lift: Callable = None
    # Jupyter's view; viz plugs its drawer in
    display: Callable = staticmethod(lambda obj: {'text/plain': repr(obj)})


hooks = _Hooks()


def apply(prim: Primitive, *args, **params):
    """Run `prim` on `args` the way its highest-level argument says (raw values: its impl)."""
    top = None
    for a in args:
        if isinstance(a, Value) and (top is None or a.level > top.level):
            top = a
    if top is None:
        return run_impl(prim, args, params)
    return top.apply(prim, args, params)


def run_impl(prim: Primitive, args, params):
    """prim's numpy impl on raw values; a numpy failure becomes an error naming the op."""
    try:
        return prim.impl(*args, **params)
    except MinigradError:
        raise
    except Exception as e:
        raise shape_error(prim, args, params, e) from None


Primitive.__call__ = apply          # prim(*args) dispatches without an extra Python frame


# ---------------------------------------------------------------- the one graph walk
def topo_order(roots, inputs_of: Callable, key: Callable) -> list:
    """Every vertex reachable from ``roots`` through ``inputs_of``, sorted by ``key``.

    ``key`` is the creation order (a graph node's index): a vertex is always made after its
    inputs, so that order is topological. One walk for the interpreter, Session, the compiler,
    mg.gradients and the drawings of graphs (the tape walks its own nodes the same way in
    tensor._tape_order, without callbacks); iterative, so a chain of 100,000 ops is fine.

    >>> topo_order([3], lambda v: [v - 1] if v else [], key=lambda v: v)
    [0, 1, 2, 3]
    """
    seen = {id(r): r for r in roots}
    stack = list(seen.values())
    while stack:
        for p in inputs_of(stack.pop()):
            if p is not None and id(p) not in seen:
                seen[id(p)] = p
                stack.append(p)
    return sorted(seen.values(), key=key)


# ---------------------------------------------------------------- shape rules
def aval_of(x) -> Aval:
    """The abstract value (shape, dtype) of a Tensor, Symbol, array or Python scalar."""
    if type(x) is np.ndarray:
        return Aval(x.shape, x.dtype)
    if isinstance(x, (bool, np.bool_)):
        return Aval((), bool_)
    if isinstance(x, int):
        return Aval((), int64)
    if isinstance(x, float):
        return Aval((), float64)
    shape = getattr(x, 'shape', None)
    dtype = getattr(x, 'dtype', None)
    if dtype is None:
        a = np.asarray(x)
        return Aval(a.shape, a.dtype)
    return Aval(tuple(shape) if shape is not None else None, np.dtype(dtype))


def describe(x) -> str:
    """Short description used in error messages: name and shape."""
    name = getattr(x, 'name', None)
    kind = type(x).__name__
    if isinstance(x, (int, float, bool)):
        return f'scalar {x!r}'
    try:
        av = aval_of(x)
    except (ValueError, TypeError):      # a ragged list and the like: say what it is
        return f'{kind} {str(x)[:40]!r}'
    shp = 'unknown shape' if av.shape is None else f'shape {fmt_shape(av.shape)}'
    label = f"{kind} '{name}'" if name else kind
    return f'{label} ({shp}, {av.dtype})'


def fmt_shape(shape) -> str:
    if shape is None:
        return '?'
    dims = ', '.join('?' if d is None else str(d) for d in shape)
    return f'({dims},)' if len(shape) == 1 else f'({dims})'


def broadcast_shapes(op: str, *shapes, args=None) -> tuple | None:
    """numpy broadcasting with unknown dims: None vs 1 -> None, None vs n -> n (assumed equal)."""
    if any(s is None for s in shapes):
        return None
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        dims = [s[len(s) - nd + i] for s in shapes if len(s) - nd + i >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            shown = ' and '.join(fmt_shape(s) for s in shapes)
            what = ', '.join(describe(a) for a in args) if args is not None else shown
            raise ShapeError(f'{op}: shapes {shown} cannot be broadcast together (axis {i - nd}: '
                             f'sizes {sorted(known)}). Inputs: {what}. Make the sizes equal or 1 '
                             f'(reshape, or add an axis with x[:, None]).')
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def elementwise_rule(*avals, _op='elementwise', _ufunc=None, **params) -> Aval:
    """Broadcast shapes; the dtype is the one numpy's ufunc gives (int / 2 and exp(int) are floats)."""
    shape = broadcast_shapes(_op, *[a.shape for a in avals])
    dtypes = [a.dtype for a in avals]
    if _ufunc is None:
        return Aval(shape, np.result_type(*dtypes))
    try:
        return Aval(shape, _ufunc.resolve_dtypes((*dtypes, None))[-1])
    except TypeError:           # numpy has no loop for these dtypes (e.g. -bool)
        raise ShapeError(f'{_op}: numpy cannot compute it for dtypes {", ".join(map(str, dtypes))}; '
                         f'convert the inputs with .astype(...) first') from None


def shape_error(prim: Primitive, args, params, exc: Exception) -> MinigradError:
    """Turn a numpy failure into a readable error, using the primitive's own shape rule.

    Errors that are not about shapes/values (e.g. a learner's NotImplementedError) pass through."""
    if not isinstance(exc, (ValueError, IndexError, TypeError, OverflowError)):
        return exc
    try:
        prim.shape_rule(*[aval_of(a) for a in args], **params)
    except MinigradError as e:
        return e
    except (ValueError, IndexError, TypeError, OverflowError) as e:
        # the rule cannot judge them either: say both
        exc = exc if isinstance(exc, OverflowError) else \
            f'{type(exc).__name__}: {exc} (and its shape rule: {type(e).__name__}: {e})'
    what = ', '.join(describe(a) for a in args)
    # a Python int too big for the dtype (numpy 2 refuses it too)
    if isinstance(exc, OverflowError):
        return InputError(f'{prim.name}: a number is out of range for the dtype of {what}: {exc}; use a '
                          f'wider dtype (.astype(mg.int64) or mg.float64) or a smaller number')
    reason = exc if isinstance(exc, str) else f'{type(exc).__name__}: {exc}'
    return ShapeError(f'{prim.name}: numpy could not compute it for {what} '
                      f'(params {params}): {reason}')


def normalize_axes(axis, ndim: int | None, op: str) -> tuple | None:
    """axis (None/int/tuple) -> sorted tuple of non-negative axes (None = all)."""
    if axis is None:
        return None
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in axes):
        raise InputError(f'{op}: axis must be None, an int or a tuple of ints, got {axis!r}')
    if len(set(axes)) != len(axes):
        raise ShapeError(f'{op}: axis {axis} repeats an axis')
    if ndim is None:
        if any(a < 0 for a in axes):
            raise ShapeError(f'{op}: negative axis {axis} needs a known rank; give the placeholder a shape')
        return tuple(sorted(int(a) for a in axes))
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f'{op}: axis {a} is out of range for a tensor with {ndim} dimensions')
        out.append(int(a) % ndim)
    return tuple(sorted(out))
