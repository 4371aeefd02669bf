"""Gradient checkpointing on the tape: a block's values are recomputed in backward instead of kept.

``mg.checkpoint(fn, *args)`` runs ``fn(*args)`` as usual, recording its ops, then makes the tape forget the
values those ops saved for backward (the block's activations), keeping only what the block read from outside
(its arguments, the parameters, tensors recorded before it). When backward reaches the block it runs ``fn``
again on the same inputs, replaying minigrad's random draws (``mg.rng()``), puts the recomputed values back,
lets the ordinary reverse sweep go through the block's own nodes, and forgets them again as the sweep leaves
the block. The same nodes and VJPs run in the same order, so the gradients are bit-identical to the run
without checkpointing. This is PyTorch's ``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)``
(JAX: ``jax.checkpoint``); Chen et al. 2016 checkpoint every sqrt(n) layers of an n-layer chain.

On the tape a checkpointed call is its block's nodes, with shape-only stand-ins for the values, between two
nodes of its own: ``checkpoint_inputs`` (recorded first: it keeps the arguments' arrays, so changing one in
place makes backward raise as for any saved value, and frees the recomputed values when the sweep reaches it,
after the whole block) and ``checkpoint`` (one per output, recorded last, reached first: it runs the block
again and hands the cotangent on unchanged).

As in PyTorch: under ``mg.no_grad()`` fn just runs; ``create_graph=True`` keeps the recomputed values for the
recorded backward; a checkpoint inside a checkpoint recomputes in both; keyword arguments and tensors fn reads
from outside without taking them as arguments are read again when it reruns. A tensor of the block that
outlives the call (kept in a list, or by an open ``mg.Tape``) keeps the values it needs. Symbols (graphs,
mg.jit, symbolic mg.trace, mg.grad) and the other value kinds are refused for now; ``mg.trace(symbolic=False)``
records the block's ops as they ran, an ordinary call of fn.

>>> import minigrad as mg
>>> mg.manual_seed(0)
>>> net = mg.nn.Sequential(mg.nn.Linear(4, 8), mg.nn.Tanh(), mg.nn.Linear(8, 1))
>>> x = mg.randn(16, 4)
>>> mg.checkpoint(net, x).sum().backward()
>>> g = net[0].weight.grad.numpy().copy(); net.zero_grad()
>>> net(x).sum().backward()
>>> bool((net[0].weight.grad.numpy() == g).all())
True
"""
from __future__ import annotations

import functools
import operator
import weakref

import numpy as np

from ..core import inplace, ops as P
from ..core.autodiff import next_seq, state
from ..core.creation import rng
from ..core.errors import BackwardError, GraphError, InputError
from ..core.graph import Symbol
from ..core.primitive import Aval, Value, describe, register_primitive, topo_order
from ..core.tensor import Tape, TapeNode, Tensor, enable_grad, is_grad_enabled, is_stand_in
from ..core.validate import check_flag, check_int
from ..pytree import flatten

_SEQ = operator.attrgetter('seq')
_TOKEN = np.zeros(())           # what each 'checkpoint' node sends down to its 'checkpoint_inputs' node
_TOKEN.flags.writeable = False


class _Frame:
    """One checkpointed call: how to run its block again, and which values of its nodes are recomputed.

    ``holes``: (index in the block, node, positions in node.saved, whether node.out) of each node that gave
    values up; ``prims``: the block's ops in order (the rerun must record the same); ``filled``: the values
    are back; ``pinned``: a recorded backward (create_graph) reads them, so they are never freed again."""
    __slots__ = ('fn', 'args', 'kwargs', 'slots', 'rng_state', 'entry', 'picks', 'prims', 'holes', 'filled',
                 'pinned')

    def __init__(self, fn, args, kwargs, slots, rng_state):
        self.fn, self.args, self.kwargs, self.slots, self.rng_state = fn, args, kwargs, slots, rng_state
        self.entry = self.picks = self.prims = None
        self.holes, self.filled, self.pinned = [], True, False


class _Made(Tape):
    """A tape open while a block runs, holding each tensor its ops make weakly: after the block, the ones still
    alive are those that outlive it (and their values must stay)."""

    def __init__(self):
        super().__init__()
        self.entries = _WeakEntries()


class _WeakEntries(list):
    """Tape entries kept as weak references to their outputs, so the recorder keeps no value alive."""
    def append(self, entry):
        list.append(self, _Weak(entry.output))


class _Weak:
    """A recorded op's output, held weakly (what in-place operators read and rewrite of a tape entry)."""
    __slots__ = ('ref',)

    def __init__(self, t):
        self.ref = weakref.ref(t)

    output = property(lambda self: self.ref())

    def _replace(self, output):
        return _Weak(output)


# ------------------------------------------------------------------ the public functions
def checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=True, **kwargs):
    """``fn(*args, **kwargs)``, whose intermediate values the tape recomputes in backward instead of keeping
    (as ``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)``). Gradients are bit-identical to
    calling fn directly; ``preserve_rng_state`` replays fn's draws from mg's generator when it reruns.

    >>> import minigrad as mg
    >>> w = mg.tensor([1.0, 2.0], requires_grad=True)
    >>> y = mg.checkpoint(lambda v: (mg.tanh(v * w) * v).sum(), mg.ones(2))
    >>> y.grad_fn.name
    'checkpoint'
    >>> y.backward(); [round(g, 4) for g in w.grad.tolist()]
    [0.42, 0.0707]
    """
    _check_call(fn, args, kwargs, use_reentrant, preserve_rng_state)
    if not is_grad_enabled():           # nothing is recorded, so nothing is kept: just run fn
        return fn(*args, **kwargs)
    tensors = list({id(a): a for a in args if isinstance(a, Tensor)}.values())
    slots = [next((j for j, t in enumerate(tensors) if t is a), None) for a in args]
    frame = _Frame(fn, [None if s is not None else a for a, s in zip(args, slots)], kwargs, slots,
                   rng().bit_generator.state if preserve_rng_state else None)
    # recorded before the block (a lower seq): the sweep reaches it after every node of the block
    params = {'frame': frame, 'requires_grad': tuple(t.requires_grad for t in tensors)}
    entry = TapeNode(CHECKPOINT_INPUTS, params, tuple((t.grad_fn or t) if t.requires_grad else None for t in tensors),
                     tuple(t.data for t in tensors), None)
    with _Made() as made:
        out = fn(*args, **kwargs)
    leaves = flatten(out)[0]
    frame.picks = _outputs(leaves, entry.seq)
    if frame.picks:
        _forget_block(frame, entry, leaves, made.entries)
    return out


def checkpoint_sequential(modules, segments, x, *, use_reentrant=False, preserve_rng_state=True):
    """Run the layers of ``modules`` (an ``nn.Sequential`` or a list of modules or functions) on ``x`` in
    ``segments`` pieces, checkpointing all but the last, exactly as
    ``torch.utils.checkpoint.checkpoint_sequential``: each of the first ``segments - 1`` pieces has
    ``len(modules) // segments`` layers, and the last piece (the remaining layers, possibly more) runs without
    checkpointing, since backward needs its values first. ``segments=1`` checkpoints nothing.

    >>> import minigrad as mg
    >>> net = mg.nn.Sequential(*[mg.nn.Tanh() for _ in range(6)])
    >>> x = mg.tensor([0.5], requires_grad=True)
    >>> y = mg.checkpoint_sequential(net, 3, x)     # layers 0-1 and 2-3 checkpointed, 4-5 as usual
    >>> bool(y == net(x))
    True
    """
    layers = _layers(modules)
    segments = check_int(segments, 'mg.checkpoint_sequential: segments', low=1)
    if segments > len(layers):
        raise InputError(f'mg.checkpoint_sequential: segments must be between 1 and the number of layers '
                         f'({len(layers)}), got {segments}')
    size, end = len(layers) // segments, 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        x = checkpoint(functools.partial(_run, layers[start:end]), x, use_reentrant=use_reentrant,
                       preserve_rng_state=preserve_rng_state)
    return _run(layers[end:], x)


def _run(layers, x):
    for layer in layers:
        x = layer(x)
    return x


# ------------------------------------------------------------------ checks of the arguments
def _check_call(fn, args, kwargs, use_reentrant, preserve_rng_state):
    if not callable(fn):
        raise InputError(f'mg.checkpoint: fn must be callable (a function or a Module), got '
                         f'{type(fn).__name__} {fn!r:.40}')
    if check_flag(use_reentrant, 'mg.checkpoint: use_reentrant'):
        raise InputError('mg.checkpoint: use_reentrant=True (PyTorch\'s older variant) is not implemented; '
                         'minigrad checkpoints as use_reentrant=False does (leave it out)')
    check_flag(preserve_rng_state, 'mg.checkpoint: preserve_rng_state')
    values = flatten(list(args))[0] + flatten(dict(kwargs))[0]
    for v in values:
        if isinstance(v, Symbol):
            raise GraphError(f'mg.checkpoint: an argument is a Symbol ({describe(v)}); checkpointing a graph '
                             f'(mg.jit, mg.trace, mg.grad, graph building) is not supported yet: call fn directly '
                             f'there, or use mg.checkpoint on the tape (Tensors)')
        if isinstance(v, Value) and not isinstance(v, Tensor):
            raise InputError(f'mg.checkpoint: an argument is a {type(v).__name__} (a value of mg.jvp, mg.vmap or '
                             f'mg.lazy); checkpointing works on the tape\'s Tensors only for now: call fn directly')


def _layers(modules) -> list:
    if isinstance(modules, (list, tuple)) or (callable(modules) and hasattr(modules, '__iter__')):
        layers = list(modules)
    else:
        raise InputError(f'mg.checkpoint_sequential: modules must be an nn.Sequential or a list of modules or '
                         f'functions, got {type(modules).__name__} {modules!r:.40}')
    if not layers:
        raise InputError('mg.checkpoint_sequential: modules is empty; give at least one layer')
    for i, layer in enumerate(layers):
        if not callable(layer):
            raise InputError(f'mg.checkpoint_sequential: modules[{i}] is {type(layer).__name__} {layer!r:.40}, '
                             f'not callable (a Module or a function)')
    return layers


# ------------------------------------------------------------------ forward: record, then forget the values
def _outputs(leaves, start) -> list:
    """Positions of the distinct outputs the block computed on the tape (recorded after ``start``)."""
    seen, picks = set(), []
    for i, t in enumerate(leaves):
        if isinstance(t, Tensor) and type(t.grad_fn) is TapeNode and t.grad_fn.seq > start and id(t) not in seen:
            seen.add(id(t))
            picks.append(i)
    return picks


def _block(roots, start) -> list:
    """The tape nodes recorded after ``start`` that ``roots`` were computed from, in recording order."""
    return topo_order(roots, lambda n: [p for p in n.parents if type(p) is TapeNode and p.seq > start], _SEQ)


def _forget_block(frame, entry, leaves, made):
    """Replace the values the block's nodes saved by stand-ins (except what a tensor that outlives the call
    needs), and put a 'checkpoint' node over each output."""
    outs = [leaves[i] for i in frame.picks]
    nodes = _block([t.grad_fn for t in outs], entry.seq)
    returned = {id(t) for t in leaves}
    alive = [w.output for w in made]
    roots = [t.grad_fn for t in alive if t is not None and id(t) not in returned
             and type(t.grad_fn) is TapeNode and t.grad_fn.seq > entry.seq]
    keep = {id(n) for n in _block(roots, entry.seq)} if roots else set()
    frame.entry, frame.prims = weakref.ref(entry), tuple(n.prim for n in nodes)
    frame.holes = _strip(nodes, keep, entry.seq, entry.saved)
    frame.filled = not frame.holes
    for t in outs:
        node = TapeNode(CHECKPOINT, {'frame': frame}, (t.grad_fn, entry), (_shape_only(t.data), _TOKEN), None)
        node.retained, t.grad_fn.retained = t.grad_fn.retained, None
        t.grad_fn = node


def _strip(nodes, keep, start, inputs) -> list:
    holes = []
    for i, node in enumerate(nodes):
        if id(node) in keep or node.saved is None:
            continue
        # every value, read by the VJP or not: a recorded backward recomputes a saves_out op from its inputs
        ks = tuple(k for k, (p, v) in enumerate(zip(node.parents, node.saved)) if _recomputed(p, v, start, inputs))
        out = _recomputed(None, node.out, start, ())
        if ks or out:
            node.saved = tuple(_shape_only(v) if k in ks else v for k, v in enumerate(node.saved))
            node.out = _shape_only(node.out) if out else node.out
            holes.append((i, node, ks, out))
    return holes


def _recomputed(parent, v, start, inputs) -> bool:
    """Whether a saved value is made inside the block (so rerunning it gives it back): the output of a node
    recorded after ``start``, or a value needing no gradient that is not one of the arguments. A value
    changed in place since stays, so backward raises as the tape does."""
    if type(v) is not np.ndarray or is_stand_in(v) or id(v) in inplace.stale:
        return False
    if type(parent) is TapeNode:
        return parent.seq > start
    return parent is None and not any(v is a for a in inputs)


def _shape_only(v):
    """A stand-in with v's shape and dtype that holds no memory (what the tape keeps of unread inputs)."""
    return np.ndarray(v.shape, v.dtype, P.zero_of(v.dtype), 0, (0,) * v.ndim)


# ------------------------------------------------------------------ backward: rerun, fill in, forget again
def _refill(frame):
    """Run the block again on the saved arguments and put the values it recomputes back into its nodes."""
    entry = frame.entry()
    name = getattr(frame.fn, '__name__', type(frame.fn).__name__)
    fresh = [Tensor._make(v, None, rg) for v, rg in zip(entry.saved, entry.params['requires_grad'])]
    args = [a if s is None else fresh[s] for a, s in zip(frame.args, frame.slots)]
    gen, hidden = rng(), state.tapes[:]
    now = gen.bit_generator.state
    try:
        if frame.rng_state is not None:
            gen.bit_generator.state = frame.rng_state
        state.tapes[:] = []             # the rerun is not the learner's: open tapes do not see it
        with enable_grad(), _Made():
            start = next_seq()
            leaves = flatten(frame.fn(*args, **frame.kwargs))[0]
    finally:
        gen.bit_generator.state = now
        state.tapes[:] = hidden
    picks = _outputs(leaves, start)
    nodes = _block([leaves[i].grad_fn for i in picks], start) if picks == frame.picks else []
    if [n.prim for n in nodes] != list(frame.prims):
        raise BackwardError(f'mg.checkpoint: running {name} again in backward recorded other ops than its forward '
                            f'({len(nodes)} tape nodes, not {len(frame.prims)}); a checkpointed function must '
                            f'compute the same ops from the same inputs (mg\'s random draws are replayed, numpy\'s '
                            f'and Python\'s own generators are not)')
    for i, node, ks, out in frame.holes:
        again = nodes[i]
        node.saved = tuple(_same(again.saved[k], v, name) if k in ks else v for k, v in enumerate(node.saved))
        node.out = _same(again.out, node.out, name) if out else node.out
    frame.filled = True


def _same(v, hole, name):
    if type(v) is not np.ndarray or v.shape != hole.shape or v.dtype != hole.dtype:
        raise BackwardError(f'mg.checkpoint: running {name} again in backward gave {describe(v)} where its forward '
                            f'saved shape {hole.shape}, {hole.dtype}; a checkpointed function must compute the same '
                            f'values from the same inputs')
    return v


def _forget(frame):
    for _, node, ks, out in frame.holes:
        if node.saved is not None:
            node.saved = tuple(_shape_only(v) if k in ks else v for k, v in enumerate(node.saved))
            node.out = _shape_only(node.out) if out and node.out is not None else node.out
    frame.filled = False


def _checkpoint_vjp(needs, g, out, value, token, frame):
    if not frame.filled:
        _refill(frame)
    return g, _TOKEN


def _inputs_vjp(needs, g, out, *arrays, frame, requires_grad):
    if is_grad_enabled():               # create_graph: the recorded backward reads the block's values
        frame.pinned = True
    if frame.filled and not frame.pinned:
        _forget(frame)
    return (None,) * len(arrays)


CHECKPOINT = register_primitive(
    'checkpoint', lambda x, token, frame: x, lambda x, token, frame: Aval(x.shape, x.dtype), _checkpoint_vjp,
    kind='node', saves_inputs=False,
    doc='an output of a mg.checkpoint block on the tape: inputs [the output as the block computed it, the '
        'block\'s checkpoint_inputs node]; its VJP recomputes the block\'s values, then passes the cotangent on')
CHECKPOINT_INPUTS = register_primitive(
    'checkpoint_inputs', lambda *arrays, frame, requires_grad: _TOKEN,
    lambda *avals, frame, requires_grad: Aval((), _TOKEN.dtype), _inputs_vjp, kind='node',
    doc='where a mg.checkpoint block starts on the tape: inputs [the block\'s tensor arguments], kept for the '
        'rerun; its VJP (after the whole block\'s) frees the recomputed values')
