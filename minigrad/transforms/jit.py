"""mg.jit: trace on first call, then run the compiled graph; guards decide when to trace again.

``mg.jit`` traces like ``mg.trace(symbolic=True)`` but never fails or freezes on a value: a request for
one (``bool()``, ``float()``, ``int()``, ``.item()`` of a Symbol) is a graph break, guarded by the value
seen: the traced graph is cut into segments there, each compiled, and a later call whose value differs
traces again (see JitFunction). mg.jit also guards what fn reads besides its arguments (globals, closures,
defaults, attributes, items, also those of the helpers it calls; guards.py), and feeds the numpy arrays it
reads to the graph on every call, as captured tensors are.
"""
from __future__ import annotations

import linecache
from collections import OrderedDict

import numpy as np

from ..core import primitive as core, ops as P
from ..core.primitive import aval_of, fmt_shape
from ..core.errors import TraceError, MinigradError, InputError
from ..core.graph import Graph, Symbol, placeholder, user_line, PLACEHOLDER, VARIABLE, CONSTANT
from ..core.tensor import Tensor, Rebinds, enable_grad
from ..core.functional import stack
from ..compiler import compile as compile_graph
from ..compiler.rewrite import copy_node, extract, stand_in
from ..core.interpreter import evaluate
from ..pytree import flatten, unflatten
from .batching import Batched
from .call import Callee, call_outputs, copy_aliases, needs_call_node, value_of
from .guards import exact as _exact, walk
from .trace import Captures, TracingGraph, arg_names, as_array, outputs_of


def _user_line() -> str:
    """'file:line: source' of the first frame outside minigrad (where the user asked for a value)."""
    where = user_line()
    return '<unknown>' if where is None else f'{where[0]}:{where[1]}: {linecache.getline(*where).strip()}'


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in 'fc' and b.dtype.kind in 'fc')


class GraphBreak:
    """Python asked for the value of ``symbol`` (``what``: 'bool()', 'float()', ...) at ``line``:
    the graph so far ended there (``at``: its node count) and the guard ``convert(value) == expected``."""

    def __init__(self, symbol, what, convert, expected, at, line):
        self.symbol, self.what, self.convert, self.expected = symbol, what, convert, expected
        self.at, self.line = at, line

    def holds(self, value) -> bool:
        return _same(self.convert(value), self.expected)

    def recalibrate(self, value) -> bool:
        """Take the compiled kernels' value as the guard's when it is the traced one up to rounding."""
        got = self.convert(value)
        a, b = np.asarray(got), np.asarray(self.expected)
        if a.shape != b.shape or a.dtype.kind not in 'fc' or not np.allclose(a, b, rtol=1e-5, atol=0):
            return False
        self.expected = got
        return True

    def __str__(self):
        return f"{self.what} of '{self.symbol.name}' == {self.expected!r}"




class Segment:
    """One graph of a jit cache entry: ``graph`` (drawable), ``program`` (compiled, None if it has
    nothing to compute), ``ins``/``outs`` (Symbols of the traced graph it reads and writes), and
    ``guard`` (the GraphBreak that ends it; None for the last segment)."""

    def __init__(self, graph, program, ins, outs, guard):
        self.graph, self.program, self.ins, self.outs, self.guard = graph, program, ins, outs, guard


def _external(node) -> bool:
    return node.prim is PLACEHOLDER or node.prim is VARIABLE      # fed on every call, from args/params


def _segment_nodes(fetches, lo, hi) -> list:
    """The nodes in graph positions [lo, hi) the fetches need (earlier values are read, not recomputed)."""
    def inside(n):
        return lo <= n.index < hi and not _external(n)
    walk = core.topo_order([s.node for s in fetches], lambda n: [i.node for i in n.inputs] if inside(n) else (),
                           key=lambda n: n.index)
    return [n for n in walk if inside(n)]


def _segment(name, nodes, outs, guard, backend=None) -> Segment:
    """Copy ``nodes`` into a new graph; values made before it become its placeholders."""
    def read(g, s, user):       # copy constants: the compiler can fold them
        return copy_node(g, s.node, [])[0] if s.node.prim is CONSTANT else stand_in(g, s)
    g, ins = extract(nodes, outs, name, read=read, inputs_first=True)
    program = compile_graph(g.outputs, g.inputs, backend=backend) if outs else None
    return Segment(g, program, ins, outs, guard)


def _split(graph, breaks, outputs, name, backend=None) -> list[Segment]:
    """Cut the traced graph at its breaks: segment k computes break k's value and what later segments read."""
    bounds = [0] + [b.at for b in breaks] + [len(graph.nodes)]
    fetches = [[b.symbol] for b in breaks] + [list(outputs)]
    later, segments = {}, []                   # later: id -> Symbol read by a later segment
    for k in reversed(range(len(fetches))):
        lo, hi = bounds[k], bounds[k + 1]
        want = fetches[k] + [s for s in later.values() if lo <= s.node.index < hi and not _external(s.node)]
        nodes = _segment_nodes(want, lo, hi)
        mine = {id(o) for n in nodes for o in n.outputs}
        outs = list({id(s): s for s in want if id(s) in mine}.values())
        seg = _segment(f'{name} [{k + 1}/{len(fetches)}]', nodes, outs, breaks[k] if k < len(breaks) else None,
                       backend)
        later.update((id(s), s) for s in seg.ins)
        later.update((id(s), s) for s in fetches[k] if id(s) not in mine)
        segments.append(seg)
    return segments[::-1]


class JitEntry:
    """One cache entry of mg.jit: the traced ``graph``, its ``segments`` (one more than its ``breaks``)
    and its ``guards`` (input shapes/dtypes, Python scalar values, what fn reads besides its arguments, then
    one per break); ``check`` tests those fn reads (guards.Reads.checker), ``reads`` has their source."""

    def __init__(self, key, guards, graph, inputs, outputs, treedef, params, breaks, segments):
        self.key, self.guards, self.graph, self.inputs, self.outputs = key, guards, graph, inputs, outputs
        self.treedef, self.params, self.breaks, self.segments = treedef, params, breaks, segments
        self.callee = None      # the 'call' node's Callee, made when derivatives are first needed
        self.check, self.reads, self.epoch = None, None, Rebinds.count     # set by JitFunction._trace

    def free_values_hold(self) -> bool:
        """What fn reads besides its arguments is as traced, and no Module attribute was rebound."""
        return self.epoch == Rebinds.count and self.check()

    @property
    def graphs(self) -> list[Graph]:
        return [s.graph for s in self.segments]

    def run(self, arrays, calibrate=False):
        """The outputs (flat), or None when a branch guard fails. ``calibrate`` (the run right after
        tracing): a guard value the compiled kernels compute within rounding of the traced one becomes
        the guard's value, so guards compare what the kernels compute (numba's pow is not numpy's)."""
        live = [a for a in arrays if a is not None]
        env = {id(p): a for p, a in zip(self.inputs, live)}
        params = [t.data for _, t in self.params]
        env.update((id(v), d) for (v, _), d in zip(self.params, params))
        for seg in self.segments:
            if seg.program is not None:
                env.update(zip(map(id, seg.outs), seg.program(*[env[id(s)] for s in seg.ins])))
            if seg.guard is not None and not seg.guard.holds(env[id(seg.guard.symbol)]):
                if not (calibrate and seg.guard.recalibrate(env[id(seg.guard.symbol)])):
                    return None
        return copy_aliases([np.asarray(env[id(o)]) for o in self.outputs], [*live, *params])

    def explain(self) -> str:
        lines = ['  guards:'] + [f'    {g}' for g in self.guards]
        lines += [f'    {b}' for b in self.breaks]
        lines.append(f'  graph breaks: {len(self.breaks)}')
        lines += [f'    {k + 1}. Python asked for {b.what} of {b.symbol.name!r} at {b.line}'
                  for k, b in enumerate(self.breaks)]
        for seg in self.segments:
            end = f'then Python reads {seg.guard}' if seg.guard is not None else \
                f'returns {", ".join(o.name for o in self.outputs)}'
            lines.append(f'  graph {seg.graph.name} ({end}):')
            lines += ['    ' + ln for ln in str(seg.graph).splitlines()]
        return '\n'.join(lines)


def _innermost(a):
    """What a value of nested mg.vmaps holds."""
    while type(a) is Batched:
        a = a.val
    return a


def _call(fn, vals, kw):
    """fn called on ``vals``, the last ``len(kw)`` of them as keyword arguments named ``kw``."""
    n = len(vals) - len(kw)
    return fn(*vals[:n], **dict(zip(kw, vals[n:])))


def _is_scalar(a) -> bool:
    """A Python number or string: passed to fn as itself and guarded by its exact value."""
    return isinstance(a, (bool, int, float, str)) and not isinstance(a, np.generic)


class _JitGraph(TracingGraph):
    """The graph mg.jit traces into. While tracing, a numpy array fn reads from outside (one that
    guards.walk found) becomes a Variable fed the array on every call, as a captured Tensor does; and a
    Symbol's value asked for (bool(), item(), ...) is computed from the graph so far: a GraphBreak."""
    __slots__ = ('feeds', 'breaks')

    def __init__(self, name, rule):
        super().__init__(name, rule)
        self.feeds, self.breaks = None, []

    def lift(self, x, like=()):
        if type(x) is np.ndarray and self.rule is not None and id(x) in self.rule.arrays:
            return self.rule(self, self.rule.arrays[id(x)])
        return Graph.lift(self, x, like)

    def concrete(self, sym, what, convert):
        if self.rule is None or convert is None:        # the trace is over, or no value can stand in
            return Graph.concrete(self, sym, what, convert)
        expected = convert(np.asarray(evaluate(self, [sym], self.feeds())[0]))
        self.breaks.append(GraphBreak(sym, what, convert, expected, len(self.nodes), _user_line()))
        return expected

    def close(self):
        TracingGraph.close(self)
        self.feeds = None                               # it holds the example arrays


def _key(args, arrays) -> tuple:
    """The input guards: shape and dtype of each array, type and exact value of each Python scalar."""
    return tuple(_exact(a) if arr is None else (arr.shape, arr.dtype.str) for a, arr in zip(args, arrays))


def _key_text(args, arrays, names) -> list:
    """The input guards in words, for explain()."""
    return [f'{n} == {a!r} ({type(a).__name__})' if arr is None else f'{n}: {arr.dtype} {fmt_shape(arr.shape)}'
            for a, arr, n in zip(args, arrays, names)]


class JitFunction:
    """``mg.jit(fn)``: trace + compile, reused while the guards hold (as torch.compile / jax.jit).

    Each cache entry (a JitEntry) records its guards: input shapes and dtypes, the values of
    Python scalar arguments, positional or keyword (passed to fn as themselves, so ``range(n)``
    works), what fn reads besides its arguments (globals, closures, defaults, attributes, items,
    also of the helpers it calls: guards.py), and the
    outcome of every Python ``bool()``/``float()``/``int()``/``.item()`` on a traced value. Such
    a request is a **graph break**: the graph so far is run, Python gets the concrete value and
    tracing goes on in a new graph. A call whose guards all hold reuses the entry; otherwise fn
    is traced again (``trace_count``). The cache is LRU with ``cache_size`` entries (default 64);
    ``hits``, ``misses``, ``evictions`` count; ``explain()`` prints everything.

    >>> import minigrad as mg, numpy as np
    >>> f = mg.jit(lambda x, n: x * 2 if x.sum() > n else -x)
    >>> _ = f(np.ones(3), 0); _ = f(np.zeros(3) + 5, 0); _ = f(-np.ones(3), 0); _ = f(np.ones(3), 1)
    >>> f.trace_count, f.hits
    (3, 1)
    """
    CACHE_SIZE = 64

    __reduce_ex__ = core.refuse_pickle('a jit function', 'it holds your function and its compiled entries; '
                                       'pickle the function itself and call mg.jit on it again')

    def __init__(self, fn, cache_size=CACHE_SIZE, backend=None):
        if not isinstance(cache_size, int) or cache_size < 1:
            raise MinigradError(f'mg.jit: cache_size must be a positive int, got {cache_size!r}')
        self.fn, self.cache_size, self.backend = fn, cache_size, backend     # backend: mg.compile's
        self.cache: OrderedDict[int, JitEntry] = OrderedDict()     # least recently used first
        self.trace_count = self.hits = self.misses = self.evictions = self.guard_failures = 0
        self._last, self._attrs = None, frozenset()         # _attrs: the attribute names fn's code reads
        self.__name__, self.__wrapped__ = getattr(fn, '__name__', 'fn'), fn

    def __call__(self, *args, **kwargs):
        if kwargs:      # keyword arguments: after the positional ones, sorted, their names in the key
            kw = tuple(sorted(kwargs))
            args = (*args, *[kwargs[k] for k in kw])
        else:
            kw = ()
        if any(isinstance(value_of(a), core.Value) and value_of(a).level >= Symbol.level for a in args):
            return self._inside(args, kw)
        arrays = [None if _is_scalar(a) else as_array(a) for a in args]
        key = _key(args, arrays) + (kw,) if kw else _key(args, arrays)
        for k, entry in reversed(list(self.cache.items())):      # most recently used first
            if entry.key == key:
                if not entry.free_values_hold():
                    self.guard_failures += 1
                    continue
                flat = entry.run(arrays)
                if flat is not None:
                    self.hits += 1
                    self.cache.move_to_end(k)
                    return self._result(entry, flat, args)
                self.guard_failures += 1
        self.misses += 1
        names = arg_names(self.fn, len(args) - len(kw)) + list(kw)     # (inspect.signature is slow)
        entry = self._trace(args, arrays, names, key, _key_text(args, arrays, names), kw)
        flat = entry.run(arrays, calibrate=True)
        if flat is None:           # the traced run and the compiled run disagree on a branch
            raise TraceError(f'mg.jit({self.__name__}): the compiled graphs failed a guard at the very inputs '
                             f'they were traced with (does {self.__name__} use randomness?)\n{entry.explain()}')
        return self._result(entry, flat, args)

    def _inside(self, args, kw):
        """Called on another transformation's values: on Symbols (inside another trace or jit) fn's ops go
        into that graph; mg.vmap's values (holding arrays, not Symbols) see _vmapped."""
        batched = [a for a in args if type(a) is Batched]
        if batched and all(isinstance(value_of(_innermost(a)), np.ndarray) for a in batched):
            level = max(a.level for a in batched)
            size = next(aval_of(a.val).shape[0] for a in batched if a.level == level)
            return self._vmapped(args, kw, level, size)
        return _call(self.fn, args, kw)

    def _vmapped(self, args, kw, level, size):
        """mg.vmap(mg.jit(fn)): fn traced on one example. Without graph breaks fn runs on the whole batch
        at once; with them (each example may take another path) each example runs through the cache and
        its guards and the results are stacked (as torch.vmap loops over what it cannot batch)."""
        def example(i):
            return _call(self, [P.getitem(a.val, idx=(i,)) if type(a) is Batched and a.level == level else a
                                for a in args], kw)
        first = example(0) if size else None
        if not size or not self._last.breaks:
            return _call(self.fn, args, kw)
        flat, tree = flatten(first)
        rest = [flatten(example(i))[0] for i in range(1, size)]
        return unflatten(tree, [Batched(stack([v, *[r[j] for r in rest]]), level) for j, v in enumerate(flat)])

    def _trace(self, args, arrays, names, key, text, kw=()) -> JitEntry:
        before = walk(self.fn, self.__name__, self._attrs)      # the arrays fn reads, to feed
        hook = Captures(before.arrays())
        g = _JitGraph(f'jit of {self.__name__}', hook)
        with g.as_default():
            inputs = [placeholder(a.dtype, a.shape, name=n) for a, n in zip(arrays, names) if a is not None]
        it = iter(inputs)
        call = [a if _is_scalar(a) else next(it) for a in args]
        live = [a for a in arrays if a is not None]
        g.feeds = lambda: {**{id(p): a for p, a in zip(inputs, live)}, **{id(v): t.data for v, t in hook.params}}
        try:
            with g.as_default(), enable_grad():         # an outer no_grad does not reach into the graph
                out = _call(self.fn, call, kw)
            outputs, treedef = outputs_of(g, out, g.lift)
        finally:
            g.close()                                   # later value requests raise as usual
        segments = _split(g, g.breaks, outputs, self.__name__, self.backend)
        entry = JitEntry(key, text, g, inputs, outputs, treedef, hook.params, g.breaks, segments)
        reads = walk(self.fn, self.__name__, before.attrs)      # the guards: what fn reads, as tracing left it
        self._attrs = reads.attrs
        entry.check, entry.reads = reads.checker(hook.params, before), reads
        entry.epoch = Rebinds.count
        entry.guards += reads.texts
        self.trace_count += 1
        self.cache[id(entry)] = entry
        if len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)
            self.evictions += 1
        return entry

    def _result(self, entry, flat, args):
        self._last = entry
        if needs_call_node(args, entry.params):
            if entry.callee is None:
                entry.callee = Callee(self.__name__, entry.graph, [*entry.inputs, *[v for v, _ in entry.params]],
                                      entry.outputs, self.backend)
            flat = call_outputs(entry.callee, [a for a in args if not _is_scalar(a)], entry.params, flat)
        elif any(isinstance(a, Tensor) for a in args):
            flat = [Tensor._make(v) for v in flat]
        return unflatten(entry.treedef, flat)

    @property
    def entries(self) -> list[JitEntry]:
        """The cache entries, least recently used first."""
        return list(self.cache.values())

    @property
    def graph(self) -> Graph | None:
        """The traced graph of the entry used last (before it was cut at graph breaks)."""
        return None if self._last is None else self._last.graph

    def explain(self) -> str:
        """Print (and return) every cache entry: guards, graph breaks (reason, source line), graphs."""
        lines = [f'jit({self.__name__}): {len(self.cache)} cache entries (LRU, max {self.cache_size}), '
                 f'{self.trace_count} traces, {self.hits} hits, {self.misses} misses, '
                 f'{self.guard_failures} guard failures, {self.evictions} evictions']
        for k, entry in enumerate(self.cache.values()):
            lines.append(f'entry {k + 1}:')
            lines.append(entry.explain())
        text = '\n'.join(lines)
        print(text)
        return text

    def __str__(self):
        if self._last is None:
            return f'jit({self.__name__}) (not traced yet)'
        return '\n'.join(str(s.graph) for s in self._last.segments)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return core.hooks.display(self.graph)


def jit(fn, cache_size=JitFunction.CACHE_SIZE, backend=None) -> JitFunction:
    """Trace-and-compile ``fn`` with guards and graph breaks; see JitFunction. ``backend``: as
    for ``mg.compile`` ('numba', 'numpy', None = the default).

    >>> import minigrad as mg, numpy as np
    >>> float(mg.jit(lambda x: (x * x).sum())(np.arange(3.0)))
    5.0
    """
    if not callable(fn):
        raise InputError(f'mg.jit: expected a function to trace, got {type(fn).__name__}')
    return JitFunction(fn, cache_size, backend)
