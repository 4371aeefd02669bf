"""Dynamic -> static: mg.trace and mg.jit turn a Python function into a Graph.

* ``symbolic=True`` runs the function once on Symbols (placeholders shaped like the
  example inputs): every op adds a node, so the graph is valid for any values of
  that shape. Python ``if``/``while`` on a Symbol has no value to look at and
  raises TraceError: use mg.cond / mg.while_loop.
* ``symbolic=False`` runs the function once on real Tensors under ``mg.Tape()``
  and converts the tape into a Graph: a tape *is* a static graph of one run.
  Python branches are frozen at the values seen while tracing.

``mg.jit`` traces like ``symbolic=True`` but never fails or freezes on a value: a request for one
(``bool()``, ``float()``, ``int()``, ``.item()`` of a Symbol) is a graph break, guarded by the value
seen (see JitFunction).

Tensors the function uses but does not receive (module parameters, closed-over
tensors) become Variables: each call feeds their current ``.data``, so training updates
and in-place changes are seen. mg.jit also guards the Python scalars fn reads from its
globals and closure by exact value, and retraces after a Module attribute is rebound.
"""
from __future__ import annotations

import inspect
import linecache
from collections import OrderedDict

import numpy as np

from . import core
from .core import OPS, fmt_shape, register_primitive
from .core import Aval
from .errors import TraceError, MinigradError, InputError
from .graph import (Graph, Symbol, Variable, placeholder, user_line, gradients, PLACEHOLDER, VARIABLE, CONSTANT)
from .session import Session, _flatten, _unflatten
from .tensor import Tensor, Tape, Rebinds, tensor, is_grad_enabled, enable_grad
from .autodiff import state
from .forward import Dual, push
from .control import replay
from .compiler import compile as compile_graph
from .compiler.rewrite import copy_node
from .interpreter import evaluate


def _as_array(x) -> np.ndarray:
    x = _value(x)                 # a Dual's primal: mg.jvp of a jit / trace function
    if isinstance(x, Tensor):
        return x.data
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, Symbol):
        raise TraceError(f"cannot call a traced function on Symbol '{x.name}'; call it on arrays or Tensors")
    return tensor(x).data         # Python floats -> float32, as mg.tensor


def _arg_names(fn, n) -> list[str]:
    if not callable(fn):
        raise InputError(f'mg.trace: expected a function to trace, got {type(fn).__name__} {fn!r:.40}')
    try:        # a Module is named by its forward's parameters (not arg0)
        params = [p.name for p in inspect.signature(getattr(fn, 'forward', fn)).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f'arg{i}' for i in range(n)]


# ------------------------------------------------------------------ a traced function called as one op
class Callee:
    """A traced graph called as one op (a 'call' node on the tape): ``inputs`` (placeholders, then the
    captured Variables), ``outputs``. Its VJP is another Callee built with mg.gradients from the graph
    and its JVP pushes Duals through the graph, so derivatives of any order flow through jit and trace.
    ``run`` computes every output on arrays (``backend``: mg.compile's, or 'interpret')."""

    def __init__(self, name, graph, inputs, outputs, backend, run=None):
        self.name, self.graph, self.inputs, self.outputs, self.backend = name, graph, inputs, outputs, backend
        self._run, self.memo, self._vjps, self.positions = run, None, {}, None

    def run(self, arrays):
        if self.memo is not None and len(self.memo[0]) == len(arrays) and \
                all(a is b for a, b in zip(self.memo[0], arrays)):
            return self.memo[1]          # the values this call already computed (see _call_outputs)
        if self._run is None:
            if self.backend == 'interpret':
                self._run = lambda xs: evaluate(self.graph, self.outputs, dict(zip(map(id, self.inputs), xs)), {})
            else:
                program = compile_graph(list(self.outputs), list(self.inputs), backend=self.backend)
                self._run = lambda xs: list(program(*xs))
        return [np.asarray(v) for v in self._run(list(arrays))]

    def vjp(self, index) -> 'Callee':
        """The Callee of (inputs, cotangent) -> gradients of output ``index`` for the float inputs."""
        if index not in self._vjps:
            g = Graph(f'{self.name} vjp')
            with g.as_default(), enable_grad():     # backward runs under no_grad: this graph must differentiate
                ins = [placeholder(s.dtype, s.shape, name=s.name) for s in self.inputs]
                y = g.lift(replay(self.graph, ins, inputs=self.inputs, outputs=[self.outputs[index]])[0])
                ct = placeholder(y.dtype, y.shape, name='ct')
                fl = [k for k, s in enumerate(ins) if s.dtype.kind == 'f']
                grads = gradients(y, [ins[k] for k in fl], ct)
            back = Callee(f'{self.name} vjp', g, ins + [ct], grads, self.backend)
            back.positions = fl
            self._vjps[index] = back
        return self._vjps[index]


def _call_impl(*arrays, callee, index):
    return callee.run(arrays)[index]


def _call_rule(*avals, callee, index):
    o = callee.outputs[index]
    return Aval(o.shape, o.dtype)


def _call_vjp(needs, g, out, *args, callee, index):
    back, result = callee.vjp(index), [None] * len(args)
    vals = [a.data if isinstance(a, Tensor) else a for a in (*args, g)]
    if not any(isinstance(v, (Symbol, Dual)) for v in vals):
        back.memo = (vals, back.run(vals))          # one run gives every input's gradient
    try:
        for j, k in enumerate(back.positions):
            if needs[k]:
                result[k] = core.apply(CALL, *args, g, callee=back, index=j)
    finally:
        back.memo = None
    return tuple(result)


def _call_jvp(primals, tangents, out, callee, index):
    return push(lambda *a: replay(callee.graph, a, inputs=callee.inputs, outputs=[callee.outputs[index]]),
                primals, tangents)[1][0]


CALL = register_primitive('call', _call_impl, _call_rule, _call_vjp, jvp=_call_jvp, kind='node',
                          doc='a mg.jit / mg.trace function called on Tensors that need derivatives: inputs '
                              '[*args, *captured tensors]; params callee (a Callee), index (which output)')


def _needs_call_node(args, params) -> bool:
    """Record one 'call' node: some argument is a Dual, or a Tensor (or captured tensor) needing grad."""
    if any(type(a) is Dual for a in args) or (state.tapes and any(isinstance(a, Tensor) for a in args)):
        return True                 # (an open mg.Tape, e.g. mg.trace(symbolic=False), must see the call too)
    return is_grad_enabled() and any(isinstance(a, Tensor) for a in args) and \
        any(t.requires_grad for t in (*[a for a in args if isinstance(a, Tensor)], *[t for _, t in params]))


def _value(a):
    """The array under a Tensor or Dual (of any level)."""
    while type(a) is Dual:
        a = a.primal
    return a.data if isinstance(a, Tensor) else a


def _call_outputs(callee, args, params, flat):
    """The outputs as 'call' nodes on the tape (or Duals), reusing the values ``flat`` just computed."""
    ins = [*args, *[t for _, t in params]]
    callee.memo = ([_value(a) for a in ins], flat)
    try:
        return [core.apply(CALL, *ins, callee=callee, index=k) if np.asarray(v).dtype.kind == 'f'
                else Tensor._make(v) for k, v in enumerate(flat)]
    finally:
        callee.memo = None


def _inline(graph, inputs, outputs, params, args):
    """A traced function called on Symbols (inside another trace or jit): its graph, copied in."""
    vals = replay(graph, [*args, *[t for _, t in params]], inputs=[*inputs, *[v for v, _ in params]],
                  outputs=outputs)
    g = next(_value(a) for a in args if isinstance(_value(a), Symbol)).graph
    with g.as_default():
        return [v if type(v) is Dual else g.lift(v) for v in vals]     # (Duals: mg.jvp inside a trace)


def _copy_aliases(values, arrays):
    """Outputs that are (views of) an input or a captured tensor's array are copied: the caller owns them."""
    return [v if (v.base is None and all(v is not a for a in arrays)) or       # speed: a fresh array
            not any(isinstance(a, np.ndarray) and np.may_share_memory(v, a) for a in arrays) else np.array(v)
            for v in values]


class TracedFunction:
    """A function captured as a Graph. Call it like the original function:
    Tensors in -> Tensors out (without grad_fn: differentiate ``.graph`` with
    mg.gradients), numpy/number in -> numpy out. Input shapes and dtypes must match
    the example inputs (a FeedError says otherwise; mg.jit retraces instead).

    Attributes: ``graph``, ``inputs`` (placeholders in call order), ``outputs``
    (flat list of Symbols), ``params`` (list of (Variable, Tensor) pairs fed on
    every call), ``symbolic``.
    """

    __reduce_ex__ = core.refuse_pickle('a traced function', 'pickle its graph (f.graph: a Graph pickles), or '
                                       'export it with mg.export_onnx')

    def __init__(self, fn, graph, inputs, outputs, template, params, symbolic):
        self.fn, self.graph, self.inputs, self.outputs = fn, graph, inputs, outputs
        self._template, self.params, self.symbolic = template, params, symbolic
        self.program = None              # a compiled Program when mg.jit could compile the graph
        self.callee = None               # the 'call' node's Callee, made when derivatives are first needed
        self.__name__ = getattr(fn, '__name__', 'fn')

    def __call__(self, *args):
        if len(args) != len(self.inputs):
            raise InputError(f'{self.__name__} was traced with {len(self.inputs)} inputs, got {len(args)}; call it '
                             f'with as many arguments as the example inputs (trace again for another signature)')
        if any(isinstance(_value(a), Symbol) for a in args):
            values = _inline(self.graph, self.inputs, self.outputs, self.params, args)
            return _unflatten(self._template, iter(values))
        arrays = [_as_array(a) for a in args]
        values = _run(self, arrays)
        if _needs_call_node(args, self.params):
            if self.callee is None:
                self.callee = Callee(self.__name__, self.graph, [*self.inputs, *[v for v, _ in self.params]],
                                     self.outputs, 'interpret' if self.program is None else None)
            values = _call_outputs(self.callee, args, self.params, values)
        elif any(isinstance(a, Tensor) for a in args):
            values = [Tensor._make(np.asarray(v)) for v in values]
        return _unflatten(self._template, iter(values))

    def feeds(self, arrays) -> dict:
        """feed_dict for one call: the inputs, and captured parameters' current values."""
        feed = {p: a for p, a in zip(self.inputs, arrays)}
        feed.update({v: t.data for v, t in self.params})
        return feed

    def __str__(self):
        head = (f'{"traced" if self.symbolic else "tape-traced"} {self.__name__}('
                f'{", ".join(f"{p.name}: {p.dtype} {fmt_shape(p.shape)}" for p in self.inputs)})')
        return f'{head}\n{self.graph}\nreturn {", ".join(o.name for o in self.outputs)}'

    def __repr__(self):
        return f'<TracedFunction {self.__name__}: {len(self.graph.nodes)} nodes>'

    def _repr_mimebundle_(self, include=None, exclude=None):
        return core.hooks.display(self)


def _run(traced: TracedFunction, arrays) -> list:
    """Evaluate the traced graph: its compiled Program under mg.jit, the reference interpreter for mg.trace."""
    if traced.program is not None:
        params = [t.data for _, t in traced.params]
        return _copy_aliases(list(traced.program(*arrays, *params)), [*arrays, *params])
    feeds = Session(traced.graph)._check_feeds(traced.feeds(arrays))
    return [np.array(v) for v in evaluate(traced.graph, traced.outputs, feeds, {})]


class _Captures:
    """The capture_tensor hook: an outside Tensor becomes a Variable, fed its current ``.data`` each call."""

    def __init__(self, graph):
        self.graph, self.syms, self.params = graph, {}, []

    def __call__(self, _graph, t: Tensor) -> Symbol:
        key = id(t)
        if key not in self.syms:
            with self.graph.as_default():       # a Variable fed t.data on every call: never a stale copy
                v = Variable(t.data, name=t.name or ('param' if t.requires_grad else 'captured'))
                self.params.append((v, t))
                self.syms[key] = v
            self.syms[key, 'ref'] = t      # keep t alive so its id stays unique
        return self.syms[key]


def _outputs(graph, out, lift) -> tuple:
    flat = []
    template = _flatten(out, flat)
    with graph.as_default():
        syms = [lift(o) for o in flat]
    return syms, template


def trace(fn, *example_inputs, symbolic=True) -> TracedFunction:
    """Trace ``fn`` into a Graph for inputs shaped like ``example_inputs``.

    ``symbolic=True`` runs fn on placeholders: data-dependent Python ``if``/``while``
    raises TraceError (use mg.cond / mg.while_loop). ``symbolic=False`` records one
    real run with mg.Tape and converts it; **trap**: Python branches are frozen at
    the traced values (``if x.sum() > 0`` takes the branch the example input took,
    for every later call), and random tensors made inside fn become constants.

    >>> import minigrad as mg, numpy as np
    >>> f = mg.trace(lambda x: (x * x).sum(), np.ones(3, np.float32))
    >>> float(f(np.arange(3, dtype=np.float32)))
    5.0
    """
    arrays = [_as_array(a) for a in example_inputs]
    names = _arg_names(fn, len(arrays))
    name = getattr(fn, '__name__', 'fn')
    g = Graph(f'trace of {name}')
    hook = _Captures(g)
    if symbolic:
        g.capture_tensor = hook
        with g.as_default():
            inputs = [placeholder(a.dtype, a.shape, name=n) for a, n in zip(arrays, names)]
            try:
                out = fn(*inputs)
            except TraceError as e:
                raise TraceError(
                    f'mg.trace({name}): {name} asked for the value of a traced Symbol. Symbolic tracing runs '
                    f'{name} once on Symbols, which have no values yet, so Python if/while/and/or cannot pick '
                    f'a path and the graph must hold both: use mg.cond(pred, true_fn, false_fn) or '
                    f'mg.while_loop(cond, body, loop_vars), or mg.trace(..., symbolic=False) to record one '
                    f'concrete run (its branches are then frozen).\n  Details: {e}') from None
        outputs, template = _outputs(g, out, g.lift)
        g.capture_tensor = None
    else:
        ins = [Tensor._make(np.array(a)) for a in arrays]
        with Tape(record_no_grad=True) as tape:
            out = fn(*ins)
        env: dict = {}
        with g.as_default():
            inputs = [placeholder(a.dtype, a.shape, name=n) for a, n in zip(arrays, names)]
            env.update((id(t), p) for t, p in zip(ins, inputs))

            def sym(x):
                if isinstance(x, Tensor):
                    return env[id(x)] if id(x) in env else hook(g, x)
                return x

            for e in tape.entries:     # each recorded op -> one node, same primitive and params
                if e.op == CALL.name:  # a jit / trace function: its graph, copied in
                    c, k = e.params['callee'], e.params['index']
                    res = g.lift(replay(c.graph, [sym(a) for a in e.inputs], inputs=c.inputs,
                                        outputs=[c.outputs[k]])[0])
                else:
                    res = core.apply(OPS[e.op], *[sym(a) for a in e.inputs], **e.params)
                if e.no_grad:          # computed under mg.no_grad(): the graph must not differentiate it
                    res = core.apply(OPS["stop_gradient"], res)
                env[id(e.output)] = res
        outputs, template = _outputs(g, out, lambda o: g.lift(sym(o)))
    return TracedFunction(fn, g, inputs, outputs, template, hook.params, symbolic)


# ------------------------------------------------------------------ mg.jit: guards and graph breaks
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


class _Tracer:
    """Graph.tracer while mg.jit traces: evaluates the graph built so far and records a GraphBreak."""

    def __init__(self, graph, feeds):
        self.graph, self.feeds, self.breaks = graph, feeds, []

    def __call__(self, sym, what, convert):
        value = np.asarray(evaluate(self.graph, [sym], self.feeds())[0])
        expected = convert(value)
        self.breaks.append(GraphBreak(sym, what, convert, expected, len(self.graph.nodes), _user_line()))
        return expected


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
    g, env, ins = Graph(name), {}, []

    def sym(s):
        if id(s) not in env:
            if s.node.prim is CONSTANT:          # copy constants: the compiler can fold them
                env[id(s)] = copy_node(g, s.node, [])[0]
            else:
                env[id(s)] = g.add_node(PLACEHOLDER, [], {}, [Aval(s.shape, s.dtype)], name=s.name)[0]
                ins.append(s)
        return env[id(s)]
    mine = {id(o) for n in nodes for o in n.outputs}
    for s in [i for n in nodes for i in n.inputs if id(i) not in mine]:      # placeholders first, as in a trace
        sym(s)
    for n in nodes:
        env.update(zip(map(id, n.outputs), copy_node(g, n, [sym(i) for i in n.inputs])))
    program = compile_graph([env[id(s)] for s in outs], [env[id(s)] for s in ins], backend=backend) if outs else None
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
    and its ``guards`` (input shapes/dtypes, Python scalar values, then one per break)."""

    def __init__(self, key, guards, graph, inputs, outputs, template, params, breaks, segments):
        self.key, self.guards, self.graph, self.inputs, self.outputs = key, guards, graph, inputs, outputs
        self.template, self.params, self.breaks, self.segments = template, params, breaks, segments
        self.callee = None      # the 'call' node's Callee, made when derivatives are first needed
        self.free, self.epoch = [], Rebinds.count     # set by JitFunction._trace

    def free_values_hold(self) -> bool:
        """The Python scalars fn reads (globals, closure cells) are unchanged, and no Module attribute
        was rebound (a replaced Parameter must be traced anew, not read from the old tensor)."""
        if self.epoch != Rebinds.count:
            return False
        for _, read, value in self.free:
            try:
                if _exact(read()) != value:
                    return False
            except ValueError:      # a closure cell emptied since
                return False
        return True

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
        return _copy_aliases([np.asarray(env[id(o)]) for o in self.outputs], [*live, *params])

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


def _is_scalar(a) -> bool:
    return isinstance(a, (bool, int, float)) and not isinstance(a, np.generic)


def _exact(v):
    """A Python scalar as a key that tells -0.0 from 0.0 and finds nan equal to nan (float.hex)."""
    return (type(v), v.hex() if isinstance(v, float) else v)


def _free_scalars(fn) -> list:
    """(label, read) for the Python scalars fn's own code reads from its globals and closure cells:
    guarded by exact value, so changing one retraces instead of reusing a stale constant."""
    code, out = getattr(fn, '__code__', None), []
    if code is None:
        return out
    glob = getattr(fn, '__globals__', {})
    for name in code.co_names:
        if _is_scalar(glob.get(name)):
            out.append((name, lambda name=name: glob.get(name)))
    for name, cell in zip(code.co_freevars, getattr(fn, '__closure__', None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:          # a cell not filled yet
            continue
        if _is_scalar(value):
            out.append((name, lambda cell=cell: cell.cell_contents))
    return out


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
    Python scalar arguments (passed to fn as themselves, so ``range(n)`` works), and the
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
        self._last = None
        self.__name__ = getattr(fn, '__name__', 'fn')

    def __call__(self, *args):
        if any(isinstance(_value(a), Symbol) for a in args):
            return self.fn(*args)       # inside another trace or jit: fn's ops go into that graph
        arrays = [None if _is_scalar(a) else _as_array(a) for a in args]
        key = _key(args, arrays)
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
        names = _arg_names(self.fn, len(args))     # (only when tracing: inspect.signature is slow)
        entry = self._trace(args, arrays, names, key, _key_text(args, arrays, names))
        flat = entry.run(arrays, calibrate=True)
        if flat is None:           # the traced run and the compiled run disagree on a branch
            raise TraceError(f'mg.jit({self.__name__}): the compiled graphs failed a guard at the very inputs '
                             f'they were traced with (does {self.__name__} use randomness?)\n{entry.explain()}')
        return self._result(entry, flat, args)

    def _trace(self, args, arrays, names, key, text) -> JitEntry:
        g = Graph(f'jit of {self.__name__}')
        hook = _Captures(g)
        with g.as_default():
            inputs = [placeholder(a.dtype, a.shape, name=n) for a, n in zip(arrays, names) if a is not None]
        it = iter(inputs)
        call = [a if _is_scalar(a) else next(it) for a in args]
        live = [a for a in arrays if a is not None]
        tracer = _Tracer(g, lambda: {**{id(p): a for p, a in zip(inputs, live)},
                                     **{id(v): t.data for v, t in hook.params}})
        g.capture_tensor, g.tracer = hook, tracer
        try:
            with g.as_default():
                out = self.fn(*call)
            outputs, template = _outputs(g, out, g.lift)
        finally:
            g.capture_tensor = g.tracer = None      # later value requests raise as usual
        segments = _split(g, tracer.breaks, outputs, self.__name__, self.backend)
        entry = JitEntry(key, text, g, inputs, outputs, template, hook.params, tracer.breaks, segments)
        entry.free = [(name, read, _exact(read())) for name, read in _free_scalars(self.fn)]
        entry.guards += [f'{name} == {read()!r} (global or closed-over {type(read()).__name__})'
                         for name, read, _ in entry.free]
        entry.epoch = Rebinds.count
        self.trace_count += 1
        self.cache[id(entry)] = entry
        if len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)
            self.evictions += 1
        return entry

    def _result(self, entry, flat, args):
        self._last = entry
        if _needs_call_node(args, entry.params):
            if entry.callee is None:
                entry.callee = Callee(self.__name__, entry.graph, [*entry.inputs, *[v for v, _ in entry.params]],
                                      entry.outputs, self.backend)
            flat = _call_outputs(entry.callee, [a for a in args if not _is_scalar(a)], entry.params, flat)
        elif any(isinstance(a, Tensor) for a in args):
            flat = [Tensor._make(v) for v in flat]
        return _unflatten(entry.template, iter(flat))

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
