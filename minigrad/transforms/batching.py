"""vmap: a function of one example run on a whole batch at once, by batching rules on the op table.

A `Batched` value holds an array (a Tensor, a Symbol, a numpy array or an outer transformation's
value) whose axis 0 is the batch; to the function it looks like one example (its ``shape`` drops that
axis). `core.apply` hands any op with a Batched argument to `batch_apply`, which runs the primitive's
``batch`` rule (filled in below, as forward.py fills the JVP rules): the rule rewrites the op so it
works on all examples in one call and returns the result batched along axis 0. Unbatched arguments
(``in_axes=None``, closed-over values) stay unbatched and broadcast. Levels are shared with forward mode,
so vmap of jvp, jvp of vmap and vmap of vmap each keep their own batch (as Autodidax teaches).
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from ..core import primitive as core, ops as P
from ..core.control import COND, WHILE, WHILE_GRAD, _float, _outer_graph, while_loop
from ..core.interpreter import replay
from ..core.graph import CHECK, Graph, Symbol, placeholder
from ..core.primitive import Aval, aval_of, describe, fmt_shape, normalize_axes
from ..core.errors import GraphError, MinigradError
from ..core.functional import OpsMixin, cast, equal, reshape, transpose, where
from ..pytree import flatten, unflatten
from .forward import _levels, reverse_loop


class BatchError(MinigradError):
    """vmap cannot batch this: an op without a batching rule, a bad in_axes, or a batched predicate."""


class Batched(OpsMixin, core.Value):
    """A batch of values along axis 0 of ``val``, seen as one example at vmap ``level`` (above Tensors and
    Symbols; nested vmaps and jvps get higher levels)."""
    __slots__ = ('val', 'level')
    __array_ufunc__ = None          # ndarray + Batched -> Batched.__radd__
    __hash__ = object.__hash__

    def __init__(self, val, level):
        self.val, self.level = val, level

    @property
    def shape(self):
        s = aval_of(self.val).shape
        return None if s is None else s[1:]

    dtype = property(lambda self: aval_of(self.val).dtype)
    ndim = property(lambda self: _rank(self.val, True))

    def __bool__(self):
        raise BatchError('vmap: a batched value has one truth value per example, so Python `if`/`while` cannot '
                         'branch on it; use mg.where(cond, x, y) to select per example')

    def _no_value(self, what):
        return BatchError(f'vmap: {what} of {describe(self)} needs one value, but under mg.vmap it holds one per '
                          f'example; compute with minigrad ops (mg.where or mg.cond to choose per example), or '
                          f'return it from the function and convert the result outside mg.vmap')

    def item(self): raise self._no_value('item()')
    def numpy(self): raise self._no_value('numpy()')
    def tolist(self): raise self._no_value('tolist()')
    def __array__(self, *a, **k): raise self._no_value('converting to a numpy array')
    def __float__(self): raise self._no_value('float()')
    def __int__(self): raise self._no_value('int()')
    def __index__(self): raise self._no_value('using as an index')

    def __len__(self):              # one example's length: every example has the same shape (as jax)
        if not self.shape or self.shape[0] is None:
            raise BatchError(f'vmap: len() of {describe(self)}: one example has no first dim of known size')
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def index_rule(self, x, idx):
        return gather(x, idx)

    def __repr__(self):
        return f'Batched({self.val!r})'

    def apply(self, prim, args, params):
        return batch_apply(prim, args, params)

    def graph_error(self):
        return GraphError('a value batched by mg.vmap cannot enter the sub-graph of a mg.cond / mg.while_loop whose '
                          'predicate is not batched; make the predicate per example (then vmap selects between '
                          'both branches) or use mg.where')

    @classmethod
    def cond_rule(cls, pred, true_fn, false_fn):
        """A predicate per example, or branches that may see batched values: both branches, then select."""
        if isinstance(pred, Batched) or isinstance(pred, Symbol) and vmap_active():
            return batch_cond(pred, true_fn, false_fn)
        return NotImplemented

    @classmethod
    def while_rule(cls, cond, body, values, loop_vars, single, limit, name):
        """Under mg.vmap: the loop runs while any example's condition holds."""
        return batch_while(cond, body, values, loop_vars, single, limit, name) if vmap_active() else NotImplemented


_VALUES = core.Value


def _rank(v, batched):
    """The rank of one example of v (an error when it is unknown: the rules need it)."""
    s = aval_of(v).shape
    if s is None:
        raise BatchError(f'vmap: {describe(v)} has an unknown rank; give the placeholder a shape')
    return len(s) - batched


def _size(vals, dims):
    """The batch size (None when only unknown dims carry it, as a placeholder of shape (None, ...))."""
    sizes = [aval_of(v).shape[0] for v, d in zip(vals, dims) if d]
    return next((s for s in sizes if s is not None), None)


def _front(v, k):
    """v with k size-1 axes inserted after the batch axis (so it broadcasts as an example of higher rank)."""
    return P.getitem(v, idx=(slice(None),) + (None,) * k) if k > 0 else v


def _batch(v, size, op):
    """An unbatched value repeated along a new axis 0 (a broadcast view), for ops that cannot broadcast."""
    shape = aval_of(v).shape
    if size is None or shape is None or None in shape:
        raise BatchError(f'vmap: {op} needs the batch size and the shape of {describe(v)} to batch it; '
                         f'give the placeholders full shapes')
    return P.broadcast_to(P.getitem(v, idx=(None,)), shape=(size,) + tuple(shape))


# ------------------------------------------------------------------ the rules (all return axis 0 batched)
def elementwise(prim, vals, dims, **params):
    """Every elementwise primitive: batched inputs get size-1 axes after the batch axis up to the
    example rank of the result, so numpy's broadcasting lines the examples up; the rest broadcast as they are."""
    rank = max(_rank(v, d) for v, d in zip(vals, dims))
    return prim(*[_front(v, rank - _rank(v, True)) if d else v for v, d in zip(vals, dims)], **params)


def _reduce(prim, vals, dims, axis=None, **params):
    axes = tuple(range(_rank(vals[0], True))) if axis is None else normalize_axes(axis, _rank(vals[0], True),
                                                                                   prim.name)
    return prim(vals[0], axis=tuple(a + 1 for a in axes), **params)


def _reshape(prim, vals, dims, shape):
    size, ex = _size(vals, dims), aval_of(vals[0])
    if -1 in shape and ex.shape is not None and None not in ex.shape[1:]:    # the example's -1 (numpy finds
        shape = prim.shape_rule(Aval(ex.shape[1:], ex.dtype), shape=shape).shape    # none in an empty batch)
    if size is None and -1 in shape:
        raise BatchError(f'vmap: reshape to {fmt_shape(shape)} with an unknown batch size needs the example '
                         f'shape without -1')
    return prim(vals[0], shape=(-1 if size is None else size,) + tuple(shape))


def _transpose(prim, vals, dims, axes=None):
    rank = _rank(vals[0], True)
    axes = tuple(reversed(range(rank))) if axes is None else axes
    return prim(vals[0], axes=(0,) + tuple(a % rank + 1 for a in axes))


def _broadcast_to(prim, vals, dims, shape):
    size = _size(vals, dims)
    if size is None:
        raise BatchError('vmap: broadcast_to needs a known batch size; give the placeholder a full shape')
    x = _front(vals[0], len(shape) - _rank(vals[0], True))
    return prim(x, shape=(size,) + tuple(shape))


def _advanced_front(idx):
    """Where numpy puts the batch axis of x[(:, *idx)]: 0, or after the advanced-index dims when idx's
    array indices are not adjacent (numpy then moves their dims to the front)."""
    arrays = any(isinstance(i, np.ndarray) for i in idx)
    adv = [p for p, i in enumerate(idx) if isinstance(i, np.ndarray) or (arrays and isinstance(i, (int, np.integer)))]
    if not adv or adv == list(range(adv[0], adv[-1] + 1)):
        return 0
    shapes = [(int(np.count_nonzero(i)),) if isinstance(i, np.ndarray) and i.dtype == np.bool_ else np.shape(i)
              for i in (idx[p] for p in adv)]
    return len(np.broadcast_shapes(*shapes))


def _move(v, src, dst):
    """Move axis src of v to dst."""
    if src == dst:
        return v
    order = list(range(_rank(v, False)))
    order.insert(dst, order.pop(src))
    return P.transpose(v, axes=tuple(order))


def _getitem(prim, vals, dims, idx):
    out = prim(vals[0], idx=(slice(None),) + tuple(idx))
    return _move(out, _advanced_front(idx), 0)


def _scatter_add(prim, vals, dims, idx):
    size = _size(vals, dims)
    g, ref = (v if d else _batch(v, size, 'scatter_add') for v, d in zip(vals, dims))
    return prim(_move(g, 0, _advanced_front(idx)), ref, idx=(slice(None),) + tuple(idx))


def _matmul(prim, vals, dims):
    """Vectors become matrices ((k,) -> (1, k) / (k, 1)), batched operands get axes up to the other's rank
    (matmul broadcasts its leading dims), and the added vector axes are dropped again."""
    (a, b), (da, db) = vals, dims
    ra, rb = _rank(a, da), _rank(b, db)
    if ra == 0 or rb == 0:          # the shape rule gives matmul's own error
        prim.shape_rule(Aval((), aval_of(a).dtype) if ra == 0 else aval_of(a), aval_of(b))
    a = P.getitem(a, idx=(slice(None),) * da + (None, slice(None))) if ra == 1 else a
    b = P.getitem(b, idx=(Ellipsis, None)) if rb == 1 else b
    rank = max(ra, rb, 2)
    a, b = (_front(v, rank - max(r, 2)) if d else v for v, d, r in ((a, da, ra), (b, db, rb)))
    out = prim(a, b)
    out = P.getitem(out, idx=(Ellipsis, 0, slice(None))) if ra == 1 else out
    return P.getitem(out, idx=(Ellipsis, 0)) if rb == 1 else out


def gather(x, idx):
    """x[idx] where idx holds an integer index batched by mg.vmap, one per example (jax.vmap batches the gather):
    the other entries index first, then each example selects along the index's axis by comparing it with
    arange (one-hot, as CrossEntropyLoss), so it batches, differentiates and runs on Symbols as any op."""
    ints = lambda i: isinstance(i, (int, np.integer)) and not isinstance(i, bool)
    x = x if isinstance(x, _VALUES) else core.hooks.lift(x)
    used = 1 + sum(isinstance(i, slice) or ints(i) for i in idx)         # x's axes the index consumes
    e = next((j for j, i in enumerate(idx) if i is Ellipsis), len(idx))
    idx = idx[:e] + (slice(None),) * max(len(x.shape or ()) - used, 0) + idx[e + 1:]
    k = next(j for j, i in enumerate(idx) if type(i) is Batched)
    y = idx[k]
    if y.dtype.kind not in 'iu' or any(j != k and not (ints(i) or i is None or isinstance(i, slice))
                                       for j, i in enumerate(idx)):
        raise BatchError(f'vmap: indexing with {describe(y)}: an index batched by vmap must hold integers and be '
                         f'the only array in the index (index in two steps, x[a][y]; for a mask use mg.where)')
    x1 = x[idx[:k] + (slice(None),) + idx[k + 1:]]
    p = sum(not ints(i) for i in idx[:k])                   # x1's axis the index selects along
    s1, sy = x1.shape, y.shape
    if s1 is None or sy is None or None in s1 + sy:
        raise BatchError(f'vmap: indexing {describe(x)} with {describe(y)} needs both shapes; give full shapes')
    n = s1[p]
    y = cast(core.apply(CHECK, y, lo=-n, hi=n, what=f'vmap: the index {describe(y)}'), np.int64)
    hit = equal(reshape(where(y < 0, y + n, y), sy + (1,)), np.arange(n))
    hit = reshape(hit, sy + (n,) + (1,) * (len(s1) - p - 1))
    out = where(hit, reshape(x1, s1[:p] + (1,) * len(sy) + s1[p:]), 0).sum(axis=p + len(sy))
    out = out if out.dtype == x1.dtype else cast(out, x1.dtype)
    at = [j for j, i in enumerate(idx) if j == k or ints(i)]
    if at != list(range(at[0], at[-1] + 1)):        # ints apart from it: numpy puts the index's axes first
        r = len(out.shape)
        out = transpose(out, tuple(range(p, p + len(sy))) + tuple(range(p)) + tuple(range(p + len(sy), r)))
    return out


def _concatenate(prim, vals, dims, axis=0):
    size = _size(vals, dims)
    rank = next(_rank(v, True) for v, d in zip(vals, dims) if d)
    ax = normalize_axes(axis, rank, 'concatenate')[0]
    return prim(*[v if d else _batch(v, size, 'concatenate') for v, d in zip(vals, dims)], axis=ax + 1)


def _both(prim, vals, dims):
    size = _size(vals, dims)
    return [v if d else _batch(v, size, prim.name) for v, d in zip(vals, dims)]


def _sum_to_like(prim, vals, dims):
    """Sum the example's extra leading axes (they sit after the batch axis), then the size-1 ones."""
    g, ref = _both(prim, vals, dims)
    lead = _rank(g, True) - _rank(ref, True)
    return prim(P.sum_(g, axis=tuple(range(1, lead + 1))) if lead > 0 else g, ref)


def _broadcast_like(prim, vals, dims, axes=()):
    g, ref = vals
    ref = ref if dims[1] else _batch(ref, _size(vals, dims), prim.name)
    g = g if dims[0] else P.getitem(g, idx=(None,))       # a batch of one broadcasts to all
    rank = _rank(ref, True)
    axes = normalize_axes(axes, rank, 'broadcast_like') if axes not in ((), None) else ()
    g = _front(g, rank - _rank(g, True)) if not axes else g
    return prim(g, ref, axes=tuple(a + 1 for a in axes))


def _reshape_like(prim, vals, dims):
    return prim(*_both(prim, vals, dims))


RULES = {P.sum_: _reduce, P.max_: _reduce, P.reshape: _reshape, P.transpose: _transpose,
         P.broadcast_to: _broadcast_to, P.getitem: _getitem, P.scatter_add: _scatter_add, P.matmul: _matmul,
         P.concatenate: _concatenate, P.sum_to_like: _sum_to_like, P.broadcast_like: _broadcast_like,
         P.reshape_like: _reshape_like}
for _prim in [v for v in vars(P).values() if isinstance(v, core.Primitive) and v.kind == 'primitive']:
    _prim.batch = RULES.get(_prim, elementwise if _prim.elementwise else None)     # the op table's 27


# ------------------------------------------------------------------ the interpreter
def batch_apply(prim, args, params):
    """Run prim's batching rule on the innermost level's batched values; other values stay as they are."""
    level = max(a.level for a in args if type(a) is Batched)
    dims = [type(a) is Batched and a.level == level for a in args]
    vals = [a.val if d else a for a, d in zip(args, dims)]
    if prim.batch is None:
        raise BatchError(f"vmap: primitive '{prim.name}' has no batching rule; give its record batch=... "
                         f'(elementwise ops can use minigrad.transforms.batching.elementwise)')
    if prim.multiple_results:       # graph nodes (cond): their rule runs their sub-graphs on the batched values
        return prim.batch(prim, args, **params)
    # the example shapes first: a shape error names the op and the shapes the function sees
    prim.shape_rule(*[Aval(a.shape, a.dtype) if d else aval_of(a) for a, d in zip(args, dims)], **params)
    return Batched(prim.batch(prim, vals, dims, **params), level)


# ------------------------------------------------------------------ control flow with a batched predicate
def _unwrap(v, level, size, op):
    """v as an array batched along axis 0 at this level (an unbatched value is repeated)."""
    if type(v) is Batched and v.level == level:
        return v.val
    return _batch(_lift(v, level), size, op)


def _lift(v, level):
    """Plain data as a value of the kind vmap ``level`` maps over (a constant of their graph on Symbols)."""
    like = _active.like.get(level)
    if isinstance(v, _VALUES):
        return v
    return like.graph.lift(v) if isinstance(like, Symbol) else core.hooks.lift(v)


def batch_cond(pred, true_fn, false_fn):
    """mg.cond under vmap: both branches run on the whole batch, then each example takes its branch's
    values (as jax.vmap of lax.cond with a batched predicate); where() batches like any op."""
    p = P.reshape(pred, shape=())
    ts, tree = flatten(true_fn())
    fs, false_tree = flatten(false_fn())
    if len(ts) != len(fs):
        raise BatchError(f'cond: the branches return {len(ts)} and {len(fs)} values; both must return the same')
    if false_tree != tree:          # (dicts in another key order would pair the wrong values)
        raise BatchError(f'cond: the branches return different structures, {tree} and {false_tree}; both must '
                         f'return the same containers (dict keys in the same order)')
    return unflatten(tree, [P.where(p, a, b) for a, b in zip(ts, fs)])


class _Active(threading.local):
    def __init__(self):
        self.like = {}              # level -> a batched argument of that vmap: the kind plain data becomes


_active = _Active()


@contextlib.contextmanager
def scope(entry):
    """Run a block with ``entry`` as the innermost vmap ((level, size), or None: no vmap active)."""
    _levels.vmaps.append(entry)
    try:
        yield
    finally:
        _levels.vmaps.pop()


def current_vmap():
    """(level, batch size) of the innermost running vmap, or None."""
    return _levels.vmaps[-1] if _levels.vmaps else None


def vmap_active() -> bool:
    return current_vmap() is not None


def batch_while(cond, body, vs, loop_vars, single, limit, name):
    """mg.while_loop under vmap: every loop variable is batched, the loop runs while any example's
    condition holds, and an example whose condition fails keeps its values (the body still runs on it;
    where() discards that)."""
    entry = _levels.vmaps[-1]
    level, size = entry
    what = f"while_loop '{name}'"
    raw = [_unwrap(v, level, size, what) for v in vs]

    def lanes(r):
        with scope(entry):
            c = cond(*[Batched(x, level) for x in r])
        c = _unwrap(c, level, size, what)
        return P.reshape(c, shape=(-1 if size is None else size,))

    def body_all(*r):
        with scope(entry):
            new = body(*[Batched(x, level) for x in r])
        new = [new] if not isinstance(new, (list, tuple)) else new
        if len(new) != len(r):
            raise BatchError(f"while_loop '{name}': body returns {len(new)} values for {len(r)} loop vars")
        active = lanes(r)
        return [P.where(_front(active, _rank(o, True)), _unwrap(n, level, size, what), o) for n, o in zip(new, r)]
    # the loop itself runs on the batched arrays, under the vmap that encloses this one (they may be batched
    # there too; the first time this vmap was entered says which)
    i = _levels.vmaps.index(entry)
    with scope(_levels.vmaps[i - 1] if i else None):
        out = while_loop(lambda *r: P.max_(lanes(r)), body_all, raw, max_iterations=limit, name=name)
    out = [Batched(o, level) for o in out]          # (raw is a list: the loop returns a list)
    return out[0] if single else type(loop_vars)(out)


# ------------------------------------------------------------------ mg.vmap
def vmap(fn, in_axes=0, out_axes=0):
    """``fn`` mapped over a batch axis of its arguments, in one pass (as jax.vmap / torch.func.vmap).

    ``in_axes``: an int or None (every argument), or one int/None per argument (None: not batched,
    the same value for every example). ``out_axes``: where the batch axis goes in the result(s). Works
    on Tensors, numpy arrays (they become Tensors) and Symbols (the result is an ordinary graph).

    >>> import minigrad as mg, numpy as np
    >>> mg.vmap(lambda x, w: (x * w).sum(), in_axes=(0, None))(np.ones((3, 2)), mg.tensor([1.0, 2.0])).tolist()
    [3.0, 3.0, 3.0]
    """
    if not callable(fn):
        raise BatchError(f'vmap: fn must be a function, got {type(fn).__name__}')

    def batched(*args, **kwargs):      # keyword arguments pass through unbatched (as torch.func.vmap)
        axes = _in_axes(in_axes, args)
        _levels.depth += 1
        level, size, ins, like = _levels.depth, None, [], None
        try:
            for i, (a, ax) in enumerate(zip(args, axes)):
                leaves, tree = flatten(a)
                vals = []
                for leaf in leaves:
                    v, size = _move_in(leaf, ax, i, size)
                    vals.append(v if ax is None else Batched(v, level))
                    like = v if like is None and ax is not None else like
                ins.append(unflatten(tree, vals))
            if like is None:
                raise BatchError(f'vmap: in_axes {in_axes!r} batches no array of the {len(args)} arguments; at least '
                                 f'one must be batched (as jax.vmap requires): give its axis, or call fn directly')
            _active.like[level] = like
            with scope((level, size)):
                out = fn(*ins, **kwargs)
        finally:
            _levels.depth -= 1
        leaves, tree = flatten(out)
        outs = out_axes if isinstance(out_axes, (tuple, list)) else [out_axes] * len(leaves)
        if len(outs) != len(leaves):
            raise BatchError(f'vmap: out_axes has {len(outs)} entries but fn returned {len(leaves)} values')
        res = unflatten(tree, [_move_out(o, level, size, ax) for o, ax in zip(leaves, outs)])
        _active.like.pop(level, None)
        return res
    return batched


def _in_axes(in_axes, args):
    axes = list(in_axes) if isinstance(in_axes, (tuple, list)) else [in_axes] * len(args)
    if len(axes) != len(args):
        raise BatchError(f'vmap: in_axes has {len(axes)} entries but fn got {len(args)} arguments; give one '
                         f'axis (or None) per argument')
    for i, ax in enumerate(axes):
        if ax is not None and (isinstance(ax, bool) or not isinstance(ax, (int, np.integer))):
            raise BatchError(f'vmap: in_axes[{i}] must be an int or None, got {type(ax).__name__} {ax!r}')
    return axes


def _move_in(a, ax, i, size):
    """Argument i's leaf with its batch axis ax moved to the front, and the batch size so far."""
    if ax is None:
        return a, size
    a = a if isinstance(a, _VALUES) else core.hooks.lift(a)
    shape = aval_of(a).shape
    if shape is None or not -len(shape) <= ax < len(shape):
        raise BatchError(f'vmap: in_axes[{i}] = {ax} is out of range for argument {i}, {describe(a)}')
    ax = ax % len(shape)
    n = shape[ax]
    if size is not None and n is not None and n != size:
        raise BatchError(f'vmap: argument {i} ({describe(a)}) has batch size {n} along axis {ax}, but the '
                         f'arguments before it have {size}; all batched arguments need the same size')
    return _move(a, ax, 0), size if n is None else n


def _move_out(o, level, size, ax):
    if ax is None:
        if type(o) is Batched and o.level == level:
            raise BatchError('vmap: out_axes is None but the output depends on the batched inputs')
        return o
    if type(o) is Batched and o.level == level:
        o = o.val
    else:       # the same for every example: repeat it
        o = _batch(_lift(o, level), size, 'vmap output')
    rank = _rank(o, False)
    if not -rank <= ax < rank:
        raise BatchError(f'vmap: out_axes = {ax} is out of range for an output of rank {rank - 1}')
    return _move(o, 0, ax % rank)


def _cond_node(prim, args, true_graph, false_graph):
    """A cond node met under vmap (mg.grad of a function with mg.cond, replayed): both branches, then select."""
    pred, caps = P.reshape(args[0], shape=()), args[1:]
    t, f = replay(true_graph, [], caps), replay(false_graph, [], caps)
    return tuple(P.where(pred, a, b) for a, b in zip(t, f))


def _while_grad_node(prim, args, grad_graph, name):
    """A while_grad node met under vmap (a Jacobian replayed on a batch of cotangents): on values, its reverse
    loop popping the saved iterations in Python; on a graph, one while_grad node whose gradient body is this
    one under vmap (the cotangents and float invariants all batched: what the loop feeds back and sums keeps
    the batch axis)."""
    stack, rest = args[0], args[1:]
    if not isinstance(stack, Symbol):
        return tuple(reverse_loop(grad_graph, stack, rest))
    level = max(a.level for a in args if type(a) is Batched)
    size = next(aval_of(a.val).shape[0] for a in rest if type(a) is Batched and a.level == level)
    n_ct = len(rest) - len(grad_graph.captures)
    dims = [k < n_ct or _float(a) or type(a) is Batched and a.level == level for k, a in enumerate(rest)]
    raw = [_unwrap(a, level, size, f"while_loop '{name}'") if d else a for a, d in zip(rest, dims)]
    outer, n = _outer_graph(stack), len(grad_graph.inputs) - n_ct
    G = Graph(f'{name}_grad_vmap', parent=outer)
    with G.as_default():
        for c in raw[n_ct:]:
            G.capture(outer.lift(c))
        G.inputs = [placeholder(s.dtype, s.shape, name=s.name) for s in grad_graph.inputs[:n]] + \
            [placeholder(s.dtype, (size, *s.shape), name=s.name) for s in grad_graph.inputs[n:]]
        G.outputs = [G.lift(o) for o in vmap(lambda *a: replay(grad_graph, a[:n + n_ct], a[n + n_ct:]),
                                             in_axes=[None] * n + [0 if d else None for d in dims])(
            *G.inputs, *[inner for _, inner in G.captures])]
    return tuple(Batched(o, level) for o in core.apply(prim, stack, *raw, grad_graph=G, name=name))


def _while_node(prim, args, name, **params):
    raise BatchError(f"vmap: while_loop '{name}' was traced for one example (by mg.grad, e.g. inside mg.hessian) "
                     f'and is replayed on a batch, which its saved iterations do not support; under mg.vmap take '
                     f'second derivatives through a loop by forward mode: mg.func.jacfwd(mg.func.jacfwd(f))')


COND.batch, WHILE.batch, WHILE_GRAD.batch = _cond_node, _while_node, _while_grad_node
CHECK.batch = elementwise            # (its run-time range check holds for the whole batch)
