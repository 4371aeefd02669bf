"""Tensor and the eager interpreter: compute now, record on the tape.

The recorded graph is made of `TapeNode`s (a Tensor's ``grad_fn``). A TapeNode keeps its
primitive, params, the *input arrays* the VJP needs and, per input, an edge to
where that input came from (another TapeNode, a leaf Tensor, or None). It never
refers to its own output Tensor, so the graph has no reference cycles and is
freed by reference counting as soon as the last Tensor using it goes away.

One memory rule (PyTorch's tape keeps no such input either): an op whose result has 64 KiB
or more keeps, of the inputs its VJP reads only the shape and dtype of (``saves_inputs``: add's, the x and y
of where, ...), a stand-in with no memory (``_stand_ins``). Keeping them doubled the chain's live memory and
its page faults made the tape 1.4-2x slower at 256x256 and 1024x1024.
"""
from __future__ import annotations

import functools
import operator
import weakref
from typing import Any, NamedTuple

import numpy as np

from . import primitive as core, dtypes, inplace, ops as P, validate
# grad mode lives in autodiff: graph building reads it too
from .autodiff import next_seq, reverse_sweep, state
from .conversions import ConversionsMixin
from .primitive import describe, shape_error, DEFAULT_FLOAT
from .errors import BackwardError, GraphError, InputError, MinigradError, ShapeError
from .functional import OpsMixin
from .inplace import InPlaceMixin
from .names import Names



class TapeNode:
    """One recorded op (a Tensor's grad_fn). Holds no reference to its output."""
    __slots__ = ('prim', 'params', 'parents', 'saved', 'out', 'retained', 'seq', '__weakref__')

    def __init__(self, prim, params, parents, saved, out):
        self.prim, self.params, self.parents, self.saved, self.out = prim, params, parents, saved, out
        self.retained = None
        self.seq = next_seq()          # creation order = a topological order of the tape

    @property
    def name(self) -> str:
        return self.prim.name

    def __repr__(self):
        return f'<{self.prim.name}Backward>'


class TapeEntry(NamedTuple):
    op: str
    inputs: tuple
    params: dict
    output: Any
    # run inside mg.no_grad() (only tapes made with record_no_grad=True)
    no_grad: bool = False


class Tape:
    """Collects every op executed inside ``with mg.Tape() as tape:`` (in order).

    >>> import minigrad as mg
    >>> x = mg.tensor(2.0, requires_grad=True)
    >>> with mg.Tape() as tape:
    ...     y = x * x + 1
    >>> [e.op for e in tape.entries]
    ['mul', 'add']
    """

    def __init__(self, record_no_grad: bool = False):
        self.entries: list[TapeEntry] = []
        self.record_no_grad = record_no_grad   # mg.trace(symbolic=False) needs no_grad ops too

    def __enter__(self):
        state.tapes.append(self)
        return self

    def __exit__(self, *exc):
        state.tapes[:] = [t for t in state.tapes if t is not self]

    def __len__(self):
        return len(self.entries)

    def __repr__(self):
        lines = [f'Tape with {len(self.entries)} entries']
        names = Names(t.name for e in self.entries for t in (e.output, *e.inputs)
                           if isinstance(t, Tensor) and t.name)
        outputs, given = {id(e.output): e.op for e in self.entries}, {}
        # unnamed tensors: the Graph's scheme (mul, mul_1, ...), as in drawings and print(graph)
        def nm(x):
            if not isinstance(x, Tensor):
                return repr(x)
            if id(x) not in given:
                given[id(x)] = names(x.name, outputs.get(id(x), 'tensor'))
            return given[id(x)]
        for e in self.entries:
            lines.append(f'  {nm(e.output)} = {e.op}({", ".join(nm(i) for i in e.inputs)})')
        return '\n'.join(lines)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return core.hooks.display(self)


class no_grad:
    """Context manager (and decorator): ops inside record nothing.

    >>> import minigrad as mg
    >>> w = mg.tensor(1.0, requires_grad=True)
    >>> with mg.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """

    grad_enabled = False

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = self.grad_enabled

    def __exit__(self, *exc):
        state.grad_enabled = self._prev

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with type(self)():
                return fn(*a, **k)
        return wrapper


class enable_grad(no_grad):
    """Context manager (and decorator): ops inside record again, e.g. within mg.no_grad()."""
    grad_enabled = True


def is_grad_enabled() -> bool:
    return state.grad_enabled


_VALUE_BASED = not dtypes.NEP50       # numpy 1.x promotes Python ints by value


class Rebinds:
    """How many times a Module attribute was rebound (nn.Module.__setattr__ counts): mg.jit retraces
    after one, since a replaced Parameter is a new tensor its traced graph does not read."""
    count = 0


class Tensor(OpsMixin, ConversionsMixin, InPlaceMixin, core.Value):
    """An eager value that can record how it was computed.

    >>> import minigrad as mg
    >>> a = mg.tensor(15.0, requires_grad=True); b = mg.tensor(20.0, requires_grad=True)
    >>> c = a * b; c.backward()
    >>> c.item(), a.grad.item(), b.grad.item()
    (300.0, 20.0, 15.0)
    """
    __slots__ = ('data', 'grad', '_requires_grad', 'grad_fn', 'name', '_version', '__weakref__')

    # numpy defers to our reflected operators: ndarray + Tensor -> Tensor
    __array_ufunc__ = None
    # the tape: a Tensor in a graph op is a constant, in a transformation a value
    level = 1
    __hash__ = object.__hash__      # == is elementwise, hashing is by identity (as in PyTorch)

    def __init__(self, data, dtype=None, requires_grad=False, name=None):
        # mg.Tensor(data) is a float tensor, like torch.Tensor([0])
        self.data = _to_array(data, dtype if dtype is not None else DEFAULT_FLOAT)
        self._version = 0
        self.grad = None
        self.grad_fn = None
        self.name = name
        self._requires_grad = False
        self.requires_grad = requires_grad

    @classmethod
    def _make(cls, data, grad_fn=None, requires_grad=False):
        t = object.__new__(cls)
        t.data, t.grad_fn, t._requires_grad, t._version = data, grad_fn, requires_grad, 0
        t.grad = t.name = None
        return t

    # -- attributes
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if value and self.data.dtype.kind != 'f':
            raise BackwardError(f'only floating point tensors can require gradients; {describe(self)} has '
                                f'dtype {self.data.dtype}. Create it with dtype=mg.float32 (e.g. '
                                f'mg.tensor([1.0, 2.0])) or convert it: x.float().')
        if not value and self.grad_fn is not None:
            raise BackwardError('requires_grad can only be switched off on a leaf; use .detach() instead')
        self._requires_grad = bool(value)

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    is_leaf = property(lambda self: self.grad_fn is None)

    def detach(self) -> 'Tensor':
        """A tensor with the same data that records nothing (shares the array)."""
        out = Tensor._make(self.data)
        # a tape still sees it, so a recorded trace keeps the data flow
        if state.tapes:
            _record('stop_gradient', (self,), {}, out)
        return out

    def clone(self) -> 'Tensor':
        """A copy that stays on the tape (gradients flow through it), with the same dtype."""
        return P.cast(self, dtype=self.data.dtype)

    # -- autograd
    def retain_grad(self):
        """Keep .grad on this non-leaf tensor after backward (normally released to save memory)."""
        if not self._requires_grad:
            raise BackwardError("retain_grad() on a tensor that doesn't require grad")
        if self.grad_fn is not None:
            self.grad_fn.retained = weakref.ref(self)
        return self

    @property
    def retains_grad(self) -> bool:
        return self.grad_fn is not None and self.grad_fn.retained is not None and \
            self.grad_fn.retained() is self

    def backward(self, gradient=None, retain_graph=False, create_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's .grad: the reverse sweep over the tape.

        ``gradient`` is required unless self has one element. ``retain_graph`` keeps
        the saved values for another backward; ``create_graph`` records the backward
        pass itself so gradients of gradients work."""
        # as in PyTorch: a recorded backward keeps the graph
        retain_graph = retain_graph or create_graph
        g = _seed(self, gradient, create_graph)
        if self.grad_fn is None:            # a leaf: d self / d self = 1
            _check_grads([self])
            _accumulate(self, g, create_graph)
            return
        # every TapeNode behind self, consumers first
        order, leaves = _tape_order(self.grad_fn)
        _check_grads(leaves)
        # some tensor was changed in place: did the tape save it?
        if inplace.stale:
            inplace.check_saved(order)
        ct = {id(self.grad_fn): g}          # cotangents: id(node or leaf) -> d self / d value
        call_vjp = functools.partial(_call_vjp, create_graph=True) if create_graph else _call_vjp
        with (enable_grad() if create_graph else no_grad()):
            reverse_sweep(order, ct, None, call_vjp)
            # only once every VJP ran: a backward that raises keeps the tape
            if not retain_graph:
                for node in order:
                    node.saved = node.out = None
            _accumulate_leaves(leaves, ct, create_graph)

    def apply(self, prim, args, params):
        return eager_apply(prim, args, params)


def _to_array(data, dtype=None) -> np.ndarray:
    if isinstance(data, Tensor):
        data = data.data
    elif isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
        data = [d.data if isinstance(d, Tensor) else d for d in data]
    if isinstance(data, core.Value):
        raise GraphError(f'cannot make a Tensor from a {type(data).__name__}: a Symbol has no '
                         f'value until Session.run')
    return validate.value_array(data, 'mg.tensor', dtype)


# ------------------------------------------------------------------ eager interpreter
def eager_apply(prim, args, params):
    """Compute prim on the arrays now; record a TapeNode if some input requires grad."""
    vals, parents = _unpack(args)       # the arrays, and the edges the TapeNode would get
    # numpy 1.x widens uint8 + 300 to uint16: refuse it as numpy 2 does
    if _VALUE_BASED:
        dtypes.check_weak_ints(prim.name, vals)
    try:
        out = prim.impl(*vals, **params)
    except MinigradError:
        raise
    except Exception as e:              # numpy's error, re-raised naming the op and the operands
        raise shape_error(prim, args, params, e) from None
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    # an operand was an object array: numpy would compute nonsense
    if out.dtype.kind == 'O':
        raise InputError(f'{prim.name}: an operand holds Python objects '
                         f'({", ".join(map(describe, args))}); use numbers, bools or numeric arrays')
    return _result(prim, args, params, vals, parents, out)


def _result(prim, args, params, vals, parents, out):
    """The Tensor holding prim's result out, with a TapeNode when some input needs a gradient."""
    t = Tensor._make(out)
    if parents is not None and state.grad_enabled and prim.vjp is not None and out.dtype.kind == 'f':
        if out.nbytes >= STAND_IN_BYTES and prim.saves_inputs is not True and not prim.saves_out:
            # memory: keep no big input the VJP reads only the shape of
            vals = _stand_ins(prim, vals)
        t.grad_fn = TapeNode(prim, params, parents, vals, out if prim.saves_out else None)
        t._requires_grad = True
    if state.tapes:
        _record(prim.name, args, params, t)
    return t


STAND_IN_BYTES = 1 << 16


def _stand_ins(prim, vals) -> tuple:
    """vals, with each input of STAND_IN_BYTES or more whose value the VJP does not read replaced by a
    stand-in: an array of its shape and dtype that holds no memory (zero strides, all zeros)."""
    return tuple([np.ndarray(v.shape, v.dtype, P.zero_of(v.dtype), 0, (0,) * v.ndim)
                  if type(v) is np.ndarray and v.nbytes >= STAND_IN_BYTES
                  and not prim.reads_input(k) else v for k, v in enumerate(vals)])


def is_stand_in(v) -> bool:
    """Whether a value a TapeNode saved is a shape-only stand-in (the tape did not keep its numbers)."""
    return type(v) is np.ndarray and v.base is not None and v.base is P.zero_of(v.dtype)


def _unpack(args):
    """The input arrays, and an edge per input: the TapeNode that made it, the leaf Tensor, or None
    (no gradient needed); the edges are None when no input needs a gradient."""
    vals = [a.data if isinstance(a, Tensor) else a for a in args]
    parents = [(a.grad_fn or a) if isinstance(a, Tensor) and a._requires_grad else None for a in args]
    return vals, (tuple(parents) if any(p is not None for p in parents) else None)


def _accumulate_leaves(leaves, ct, create_graph):
    """Each leaf's .grad gets its cotangent (_accumulate); two leaves never share one gradient array."""
    given = set()
    for leaf in leaves:
        g = ct.get(id(leaf))
        if g is not None:
            _accumulate(leaf, g, create_graph, copy=id(g) in given)
            given.add(id(g))


def _record(op, args, params, out):
    """Append an op to the active tapes (mg.no_grad() records nothing, except for tracing tapes)."""
    for tape in state.tapes:
        if state.grad_enabled or tape.record_no_grad:
            tape.entries.append(TapeEntry(op, args, params, out, not state.grad_enabled))


core.hooks.lift = lambda data: Tensor._make(_to_array(data))


# ------------------------------------------------------------------ backward (Tensor.backward's steps)
def _check_grads(leaves):
    """Before anything changes: every .grad that backward will add to has its tensor's shape and dtype."""
    for t in leaves:
        if t.grad is not None and (not isinstance(t.grad, Tensor) or t.grad.shape != t.shape
                                   or t.grad.dtype != t.dtype):
            raise BackwardError(f'backward(): {describe(t)} has a .grad of {describe(t.grad)} '
                                f'to add to; a .grad has its tensor\'s shape and dtype '
                                f'(set .grad = None, or opt.zero_grad(), first)')


def grad(y: Tensor, x: Tensor, gradient=None, create_graph=False) -> Tensor:
    """d<gradient, y>/dx as a Tensor, leaving every ``.grad`` alone (as torch.autograd.grad); zeros when y
    does not depend on x. ``create_graph=True`` records the sweep, so the result is differentiable again.

    >>> import minigrad as mg
    >>> from minigrad.core.tensor import grad
    >>> x = mg.tensor([1.0, 2.0], requires_grad=True)
    >>> grad((x * x).sum(), x).tolist()
    [2.0, 4.0]
    """
    target = x.grad_fn or x
    if not y._requires_grad or y.grad_fn is None:
        value = _seed(y, gradient, False) if y is x else np.zeros(x.shape, x.dtype)
        return Tensor._make(value)
    g = _seed(y, gradient, create_graph)
    order, _ = _tape_order(y.grad_fn)
    # nothing recorded before x depends on x: the sweep stops at x
    if x.grad_fn is not None:
        order = [n for n in order if n.seq > target.seq]
    if inplace.stale:
        inplace.check_saved(order)
    ct = {id(y.grad_fn): g}
    with (enable_grad() if create_graph else no_grad()):
        reverse_sweep(order, ct, None, functools.partial(_call_vjp, create_graph=create_graph))
    r = ct.get(id(target))
    if r is None:
        return Tensor._make(np.zeros(x.shape, x.dtype))
    return r if isinstance(r, Tensor) else Tensor._make(np.array(r, dtype=x.data.dtype))


def _seed(root, gradient, create_graph):
    """The cotangent backward starts from: 1 for a scalar root, else the given gradient (checked, copied)."""
    if not root._requires_grad:
        raise BackwardError(f'backward(): {describe(root)} does not require grad and has no grad_fn, so there '
                            f'is nothing to differentiate. Create the inputs with requires_grad=True '
                            f'(and make sure the ops did not run under mg.no_grad()).')
    if gradient is None:
        if root.data.size != 1:
            raise BackwardError(f'backward(): {describe(root)} is not a scalar, so pass the gradient of the '
                                f'final result with respect to it: t.backward(gradient=mg.ones(t.shape)), '
                                f'or reduce it first: t.sum().backward()')
        g = np.ones_like(root.data)
    else:
        # a copy: the learner's array must never become (and be changed in place as) some .grad
        g = validate.value_array(gradient.data if isinstance(gradient, Tensor) else gradient,
                             'backward(): gradient').astype(root.data.dtype)
        if g.shape != root.data.shape:
            raise ShapeError(f'backward(): gradient has shape {g.shape} but {describe(root)} '
                             f'has shape {root.data.shape}; they must match')
    if create_graph:
        g = gradient if isinstance(gradient, Tensor) and gradient.dtype == root.dtype else Tensor._make(g)
    return g


def _call_vjp(node, g, create_graph=False):
    """(parent, cotangent) pairs of one TapeNode: its primitive's VJP on the values it saved."""
    if node.retained is not None:
        t = node.retained()
        if t is not None:
            _accumulate(t, g, create_graph, copy=True)
    saved, parents = node.saved, node.parents
    if saved is None:
        raise BackwardError(
            f"backward(): trying to go through the graph a second time (at '{node.prim.name}'), "
            f'but its saved values were freed after the first backward() to save memory. Pass '
            f'retain_graph=True to the first backward() if you need to call it again.')
    if create_graph:                    # the VJP runs on Tensors, so the tape records it too
        saved = tuple(_wrap(p, v) for p, v in zip(parents, saved))
        out = core.apply(node.prim, *saved, **node.params) if node.prim.saves_out else None
    else:
        out = node.out
    try:
        grads = node.prim.vjp(tuple([p is not None for p in parents]), g, out, *saved, **node.params)
    except NotImplementedError:         # an exercise stub: the checks say 'not done yet'
        raise
    except Exception as e:              # re-raised, naming the op: the tape is still whole
        raise BackwardError(f"backward(): the VJP of '{node.prim.name}' failed: "
                            f'{type(e).__name__}: {e}') from e
    return zip(parents, grads)


def _tape_order(root: TapeNode) -> tuple[list, list]:
    """Nodes reachable from root, consumers first, and the leaf Tensors reached."""
    nodes = core.topo_order([root], lambda n: [p for p in n.parents if type(p) is TapeNode], _SEQ)[::-1]
    leaves = {id(p): p for n in nodes for p in n.parents if isinstance(p, Tensor)}
    return nodes, list(leaves.values())


_SEQ = operator.attrgetter('seq')


def _wrap(parent, value):
    """An input for a recorded backward: connected to the graph where it came from."""
    if parent is None:
        return value
    if isinstance(parent, Tensor):
        return parent
    return Tensor._make(value, parent, True)


def _accumulate(t: Tensor, g, create_graph, copy=False):
    if not isinstance(g, Tensor):
        g = np.asarray(g)
        if g.dtype != t.data.dtype:
            g = g.astype(t.data.dtype)
        elif copy or not g.flags.writeable or g.base is not None:
            # broadcast views are read-only, views share memory: a .grad must own its array
            g = g.copy()
        g = Tensor._make(g)
    elif not create_graph:
        g = g.detach()
    if t.grad is None:
        t.grad = g
    elif create_graph:
        t.grad = t.grad + g
    else:
        t.grad = Tensor._make(t.grad.data + g.data)


# ------------------------------------------------------------------ the constructor (the others: creation.py)
def tensor(data, dtype=None, requires_grad=False, name=None) -> Tensor:
    """Make a tensor. Python floats give float32, ints int64, bools bool; numpy arrays keep their dtype.

    >>> import minigrad as mg
    >>> mg.tensor([1.0, 2.0]).dtype, mg.tensor([1, 2]).dtype
    (dtype('float32'), dtype('int64'))
    """
    if isinstance(data, Tensor):
        data = data.data
    arr = _to_array(data, dtype)
    if dtype is None and arr.dtype.kind == 'f' and not isinstance(data, np.ndarray):
        arr = arr.astype(DEFAULT_FLOAT)          # Python floats become float32, as in PyTorch
    t = Tensor._make(arr)
    t.name = validate.check_name(name, 'mg.tensor')
    t.requires_grad = validate.check_flag(requires_grad, 'mg.tensor: requires_grad')
    return t
