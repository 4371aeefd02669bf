"""The fast layer: speed shortcuts installed over the plain core when minigrad is imported.

minigrad/core/ is the engine as a learner reads it: `Tensor.__mul__` is dispatch of `mul`, backward walks
the tape with `core.topo_order`, relu is the `where` composite. Each item below replaces one plain piece
with a faster one that computes the same bits (tests/test_fast.py runs the program nets both ways and
compares them bit for bit). Environment: ``MINIGRAD_PLAIN=1`` installs none, ``MINIGRAD_PLAIN=relu,apply``
leaves those items out. ``scripts/bench.py --ledger`` times each item against the plain code.

Ledger (item: what it replaces; the benchmark rows; the gain as last measured: time without it / time with
every item, on the chain at 4x4, 64x64, 256x256 and the MLP step at batch 1 and 64; `scripts/bench.py --ledger`,
one pinned core, 2026-12-08. All eleven off: 1.68 1.84 1.95 1.38 1.25. operators, apply, leaf_grads and
aval_of each gain about 1 % and overlap: the four off together cost 1.05 1.05 - 1.02 1.02):

1. ``result``: tensor._result builds the Tensor and its TapeNode with ``object.__new__`` and slot writes
   instead of ``Tensor._make`` and ``TapeNode(...)``; the tape chain at 4x4 and 64x64.
   Gain: 1.03 1.02 1.00 1.01 1.00.
2. ``unpack``: tensor._unpack reads two operands without building lists (every op has one or two);
   the tape chain at 4x4. Gain: 1.09 1.06 1.00 1.03 1.02.
3. ``operators``: ``+ * / @ < >`` of a Tensor and a number or array go straight to ``eager_apply``, and a
   float ``x - c`` is ``x + (-c)`` (exact), without dispatch or the composites' dtype rules; the tape chain.
   Gain: 1.01 1.01 1.00 1.01 1.00.
4. ``leaf_grads``: tensor._accumulate_leaves makes a fresh gradient array a leaf's ``.grad`` without a copy;
   the MLP step. Gain: 1.01 1.01 1.00 1.00 1.00.
5. ``apply``: core.apply (and calling a primitive) runs raw numpy arguments (the VJPs of a plain backward)
   without looking for a value kind, and sends Tensors among raw values straight to the tape; the chain, MLP.
   Gain: 1.01 1.00 1.00 1.00 1.00.
6. ``unbroadcast``: ops._unbroadcast returns a gradient array that already has its input's shape and
   dtype instead of calling ``sum_to_like``; the chain and MLP backward. Gain: 1.11 1.08 1.01 1.01 1.00.
7. ``where_zero``: where's impl computes ``where(c, x, 0)`` of a big float array as x's bits times c (exact,
   branch-free; np.where's loop is 4-15x slower on random masks); relu and its VJP at 64x64 and up, MLP.
   Gain: 1.00 1.22 1.44 1.00 1.10.
8. ``relu``: relu of a Tensor makes its mask as a plain array (compared with a cached zero of x's dtype)
   and where's TapeNode directly, not two recorded ops; the chain and the MLP. Gain: 1.20 1.13 1.02 1.01 1.01.
9. ``outer_matmul``: matmul's impl computes a K=1 product (``x.T @ g`` at batch 1) as a broadcast multiply,
   bit for bit; numpy's matmul takes a non-BLAS loop there, 4x slower at 784x256 (MLP at batch 1).
   Gain: 1.00 1.00 1.00 1.26 1.00.
10. ``tape_walk``: tensor._tape_order walks TapeNode.parents in place instead of core.topo_order's callbacks
   (3x faster walk); the chain backward. Gain: 1.07 1.04 1.00 1.01 1.01.
11. ``aval_of``: core.aval_of reads a Tensor's array's shape and dtype directly (log_softmax and neg ask
   for them on the tape); the MLP step. Gain: 1.01 1.01 0.99 1.01 1.00.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from .core import functional, ops as P, primitive, tensor as T
from .core.autodiff import next_seq, state
from .core.errors import MinigradError
from .core.primitive import Primitive, run_impl
from .core.tensor import Tensor, TapeNode, eager_apply

_new = object.__new__


# ------------------------------------------------------------------ 1-4, 10: the tape
def _result(prim, args, params, vals, parents, out):
    t = _new(Tensor)
    t.data, t.grad, t.name, t.grad_fn, t._requires_grad, t._version = out, None, None, None, False, 0
    if parents is not None and state.grad_enabled and prim.vjp is not None and out.dtype.kind == 'f':
        node = t.grad_fn = _new(TapeNode)
        node.prim, node.params, node.parents, node.saved, node.retained = prim, params, parents, vals, None
        node.out, node.seq = out if prim.saves_out else None, next_seq()
        t._requires_grad = True
        if out.nbytes >= T.STAND_IN_BYTES and prim.saves_inputs is not True and not prim.saves_out:
            node.saved = T._stand_ins(prim, vals)
    if state.tapes:
        T._record(prim.name, args, params, t)
    return t


def _unpack(args):
    if len(args) == 2:
        a, b = args
        if isinstance(a, Tensor):
            va, pa = a.data, (a.grad_fn or a) if a._requires_grad else None
        else:
            va, pa = a, None
        if isinstance(b, Tensor):
            vb, pb = b.data, (b.grad_fn or b) if b._requires_grad else None
        else:
            vb, pb = b, None
        return (va, vb), ((pa, pb) if pa is not None or pb is not None else None)
    vals, parents, needed = [], [], False
    for a in args:
        t = isinstance(a, Tensor)
        vals.append(a.data if t else a)
        p = (a.grad_fn or a) if t and a._requires_grad else None
        parents.append(p)
        needed = needed or p is not None
    return vals, (tuple(parents) if needed else None)


_NUMBER = {float, int, np.float32, np.float64}
_PLAIN = _NUMBER | {np.ndarray, bool}


def _binop(prim, plain=_PLAIN, reflected=False):
    if reflected:
        def op(self, o):
            if type(o) in plain:
                return eager_apply(prim, (o, self), {})
            return primitive.apply(prim, o, self)
    else:
        def op(self, o):
            if type(o) in plain or isinstance(o, Tensor):
                return eager_apply(prim, (self, o), {})
            return primitive.apply(prim, self, o)
    return op


_NEGATED = {float, int, np.float64}     # what ops.sub negates in Python (a float32 scalar: times -1, as nan keeps its sign)


def _sub(self, o):
    if type(o) in _NEGATED and self.data.dtype.kind == 'f':
        return eager_apply(P.add, (self, -o), {})
    if isinstance(o, Tensor) and self.data.dtype.kind == 'f' and o.data.dtype.kind == 'f':
        return eager_apply(P.add, (self, eager_apply(P.mul, (o, -1), {})), {})
    return functional.subtract(self, o)


def _neg(self):
    return eager_apply(P.mul, (self, -1), {}) if self.data.dtype.kind == 'f' else P.neg(self)


def _accumulate_leaves(leaves, ct, create_graph):
    given = set()
    for leaf in leaves:
        g = ct.get(id(leaf))
        if g is None:
            continue
        if leaf.grad is None and type(g) is np.ndarray and g.base is None and g.dtype == leaf.data.dtype \
                and id(g) not in given and g.flags.writeable:
            leaf.grad = Tensor._make(g)
        else:
            T._accumulate(leaf, g, create_graph, copy=id(g) in given)
        given.add(id(g))


def _tape_order(root):
    nodes, leaves, seen, stack = [root], [], {id(root)}, [root]
    while stack:
        for p in stack.pop().parents:
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                if type(p) is TapeNode:
                    nodes.append(p)
                    stack.append(p)
                else:
                    leaves.append(p)
    nodes.sort(key=T._SEQ, reverse=True)
    return nodes, leaves


# ------------------------------------------------------------------ 5, 11: dispatch
_RAW = {np.ndarray, float, int, bool, np.float32, np.float64, np.int64, np.bool_, type(None)}


def _apply(prim, *args, **params):
    eager = False
    for a in args:
        if type(a) not in _RAW:
            if type(a) is not Tensor:
                return _plain['apply'](prim, *args, **params)
            eager = True
    if eager:
        return eager_apply(prim, args, params)
    return run_impl(prim, args, params)


def _aval_of(x):
    if type(x) is Tensor:
        x = x.data
    if type(x) is np.ndarray:
        return primitive.Aval(x.shape, x.dtype)
    return _plain['aval_of'](x)


# ------------------------------------------------------------------ 6, 7, 9: impls and VJP helpers
def _unbroadcast(g, x):
    if type(g) is np.ndarray and type(x) is np.ndarray and g.shape == x.shape and g.dtype == x.dtype:
        return g
    return _plain['unbroadcast'](g, x)


_BITS = {np.dtype('f2'): 'i2', np.dtype('f4'): 'i4', np.dtype('f8'): 'i8'}     # a float's bits as an int


def _where_zero(c, x):
    """where(c, x, 0) of a float array: on big arrays x's bits times c (+0.0 where c is False, inf and nan
    kept), else np.where with a 0 of x's dtype (numpy converts an int 0 on every call)."""
    if x.size >= 2048 and type(c) is np.ndarray and c.shape == x.shape and (bits := _BITS.get(x.dtype)):
        out = np.empty(x.shape, x.dtype)            # a fresh float array (not a view): it can become a .grad
        np.multiply(x.view(bits), c, out=out.view(bits))
        return out
    return np.where(c, x, P.zero_of(x.dtype))


def _where_impl(c, x, y):
    if type(y) is int and y == 0 and type(x) is np.ndarray and x.dtype.kind == 'f':
        P._bool_condition(c.dtype if type(c) is np.ndarray else np.asarray(c).dtype)
        return _where_zero(c, x)
    return _plain['where_zero'](c, x, y)


def _matmul_impl(a, b):
    arrays = type(a) is type(b) is np.ndarray and a.ndim > 1 and b.ndim > 1
    if arrays and a.shape[-1] == 1 == b.shape[-2] and a.shape[-2] * b.shape[-1] >= 4096:
        out = np.multiply(a, b, order='C')          # the same products; + 0.0 as matmul's sum starts from +0.0
        return np.add(out, 0.0, out=out) if out.dtype.kind == 'f' else out
    return np.matmul(a, b)


# ------------------------------------------------------------------ 8: relu on the tape
def _relu(x):
    if type(x) is not Tensor or x.data.dtype.kind != 'f' or state.tapes:    # a tape records the less as an op
        return _plain['relu'](x)
    d = x.data
    c = np.less(P.zero_of(d.dtype), d)
    return T._result(P.where, (c, x, 0), {}, [c, d, 0], (None, x.grad_fn or x, None) if x._requires_grad else None,
                     _where_zero(c, d))


# ------------------------------------------------------------------ the ledger's items and their switch
# item -> [(owner, attribute, fast value)]; a module-level function is also replaced wherever a minigrad
# module imported it by name (from .primitive import aval_of)
ITEMS = {
    'result': [(T, '_result', _result)],
    'unpack': [(T, '_unpack', _unpack)],
    'operators': [(Tensor, '__add__', _binop(P.add)), (Tensor, '__radd__', _binop(P.add, reflected=True)),
                  (Tensor, '__mul__', _binop(P.mul)), (Tensor, '__rmul__', _binop(P.mul, reflected=True)),
                  (Tensor, '__truediv__', _binop(P.div)), (Tensor, '__matmul__', _binop(P.matmul, {np.ndarray})),
                  (Tensor, '__gt__', _binop(P.less, reflected=True)), (Tensor, '__lt__', _binop(P.less)),
                  (Tensor, '__sub__', _sub), (Tensor, '__neg__', _neg)],
    'leaf_grads': [(T, '_accumulate_leaves', _accumulate_leaves)],
    'apply': [(primitive, 'apply', _apply), (Primitive, '__call__', _apply)],
    'unbroadcast': [(P, '_unbroadcast', _unbroadcast)],
    'where_zero': [(P.where, 'impl', _where_impl)],
    'relu': [(functional, 'relu', _relu)],
    'outer_matmul': [(P.matmul, 'impl', _matmul_impl)],
    'tape_walk': [(T, '_tape_order', _tape_order)],
    'aval_of': [(primitive, 'aval_of', _aval_of)],
}
_PLAIN_KEYS = {'apply': (primitive, 'apply'), 'aval_of': (primitive, 'aval_of'),
               'unbroadcast': (P, '_unbroadcast'), 'where_zero': (P.where, 'impl'), 'relu': (functional, 'relu')}
_plain = {k: getattr(owner, attr) for k, (owner, attr) in _PLAIN_KEYS.items()}   # what the fast ones fall back to
_INHERITED = object()
_saved: dict = {}           # (id(owner), attribute) -> (owner, attribute, plain value) of what is installed


def _rebind(old, new):
    """Every minigrad module global bound to `old` (imported by name) now names `new`."""
    for name, mod in list(sys.modules.items()):
        if name.split('.')[0] == 'minigrad' and mod is not None:
            for k, v in list(vars(mod).items()):
                if v is old:
                    setattr(mod, k, new)


def install(names=None):
    """Install the named ledger items (all by default) over the plain code; installed ones stay.

    >>> import minigrad as mg
    >>> from minigrad import fast
    >>> fast.uninstall(); fast.installed()
    []
    >>> fast.install(['relu']); fast.installed()
    ['relu']
    >>> fast.install(); len(fast.installed()) == len(fast.ITEMS)
    True
    """
    names = list(ITEMS) if names is None else list(names)
    unknown = [n for n in names if n not in ITEMS]
    if unknown:
        raise MinigradError(f'fast.install: no ledger item {", ".join(map(repr, unknown))}; the items are '
                            f'{", ".join(ITEMS)}')
    for name in names:
        for owner, attr, fast in ITEMS[name]:
            if (id(owner), attr) in _saved:
                continue
            plain = vars(owner).get(attr, _INHERITED) if isinstance(owner, type) else getattr(owner, attr)
            _saved[id(owner), attr] = (owner, attr, plain, name)
            setattr(owner, attr, fast)
            if not isinstance(owner, (type, Primitive)):
                _rebind(plain, fast)


def uninstall(names=None):
    """Put the plain code back for the named items (all by default)."""
    names = set(ITEMS if names is None else names)
    for key, (owner, attr, plain, name) in list(_saved.items()):
        if name in names:
            fast = getattr(owner, attr)
            if plain is _INHERITED:         # Tensor's operators come from OpsMixin
                delattr(owner, attr)
            else:
                setattr(owner, attr, plain)
            if not isinstance(owner, (type, Primitive)):
                _rebind(fast, plain)
            del _saved[key]


def installed() -> list:
    """The ledger items installed now, in ledger order."""
    on = {name for *_, name in _saved.values()}
    return [n for n in ITEMS if n in on]


def from_environment():
    """Install what MINIGRAD_PLAIN leaves in: unset or empty, every item; 1, none; a list of names, the others."""
    plain = os.environ.get('MINIGRAD_PLAIN', '').strip()
    if plain in ('1', 'all'):
        return
    off = {n.strip() for n in plain.split(',') if n.strip()}
    unknown = off - set(ITEMS)
    if unknown:
        raise MinigradError(f'MINIGRAD_PLAIN names no ledger item {", ".join(sorted(unknown))}; use 1 (all off) '
                            f'or some of {", ".join(ITEMS)}')
    install([n for n in ITEMS if n not in off])
