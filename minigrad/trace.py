"""Dynamic -> static: mg.trace and mg.jit turn a Python function into a Graph.

* ``symbolic=True`` runs the function once on Symbols (placeholders shaped like the
  example inputs): every op adds a node, so the graph is valid for any values of
  that shape. Python ``if``/``while`` on a Symbol has no value to look at and
  raises TraceError: use mg.cond / mg.while_loop.
* ``symbolic=False`` runs the function once on real Tensors under ``mg.Tape()``
  and converts the tape into a Graph: a tape *is* a static graph of one run.
  Python branches are frozen at the values seen while tracing.

Tensors the function uses but does not receive (module parameters, closed-over
tensors) become Variables when they require grad (each call feeds their current
``.data``, so training updates are seen) and constants otherwise.
"""
from __future__ import annotations

import inspect

import numpy as np

from . import core
from .core import PRIMITIVES, fmt_shape
from .errors import TraceError, FeedError
from .graph import Graph, Symbol, Variable, placeholder, constant
from .session import Session, _flatten, _unflatten
from .tensor import Tensor, Tape, tensor
from .compiler import compile as compile_graph


def _as_array(x) -> np.ndarray:
    if isinstance(x, Tensor):
        return x.data
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, Symbol):
        raise TraceError(f"cannot call a traced function on Symbol '{x.name}'; call it on arrays or Tensors")
    return tensor(x).data         # Python floats -> float32, as mg.tensor


def _arg_names(fn, n) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f'arg{i}' for i in range(n)]


class TracedFunction:
    """A function captured as a Graph. Call it like the original function:
    Tensors in -> Tensors out (without grad_fn: differentiate ``.graph`` with
    mg.gradients), numpy/number in -> numpy out. Input shapes and dtypes must match
    the example inputs (a FeedError says otherwise; mg.jit retraces instead).

    Attributes: ``graph``, ``inputs`` (placeholders in call order), ``outputs``
    (flat list of Symbols), ``params`` (list of (Variable, Tensor) pairs fed on
    every call), ``symbolic``.
    """

    def __init__(self, fn, graph, inputs, outputs, template, params, symbolic):
        self.fn, self.graph, self.inputs, self.outputs = fn, graph, inputs, outputs
        self._template, self.params, self.symbolic = template, params, symbolic
        self.program = None              # a compiled Program when mg.jit could compile the graph
        self.__name__ = getattr(fn, '__name__', 'fn')

    def __call__(self, *args):
        if len(args) != len(self.inputs):
            raise TypeError(f'{self.__name__} was traced with {len(self.inputs)} inputs, got {len(args)}')
        arrays = [_as_array(a) for a in args]
        values = _run(self, arrays)
        if any(isinstance(a, Tensor) for a in args):
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
        from . import viz
        return viz.mimebundle(self)


def _run(traced: TracedFunction, arrays) -> list:
    """Evaluate the traced graph: its compiled Program under mg.jit, the reference interpreter for mg.trace."""
    if traced.program is not None:
        return list(traced.program(*arrays, *[t.data for _, t in traced.params]))
    from .interpreter import evaluate
    feeds = Session(traced.graph)._check_feeds(traced.feeds(arrays))
    return [np.array(v) for v in evaluate(traced.graph, traced.outputs, feeds, {})]


class _Captures:
    """The capture_tensor hook: an outside Tensor becomes a Variable (requires grad) or a constant."""

    def __init__(self, graph):
        self.graph, self.syms, self.params = graph, {}, []

    def __call__(self, _graph, t: Tensor) -> Symbol:
        key = id(t)
        if key not in self.syms:
            with self.graph.as_default():
                if t.requires_grad:
                    v = Variable(t.data, name=t.name or 'param')
                    self.params.append((v, t))
                    self.syms[key] = v
                else:
                    self.syms[key] = constant(t.data, name=t.name)
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
                res = core.apply(PRIMITIVES[e.op], *[sym(a) for a in e.inputs], **e.params)
                if e.no_grad:          # computed under mg.no_grad(): the graph must not differentiate it
                    res = core.apply(PRIMITIVES['stop_gradient'], res)
                env[id(e.output)] = res
        outputs, template = _outputs(g, out, lambda o: g.lift(sym(o)))
    return TracedFunction(fn, g, inputs, outputs, template, hook.params, symbolic)


class JitFunction:
    """``mg.jit(fn)``: traces on the first call for each input signature (shapes and dtypes),
    compiles the graph with ``mg.compile`` and reuses it (a graph that cannot be compiled is an error). ``trace_count``
    counts the traces; ``traces`` maps signature -> TracedFunction; ``graph`` is the latest.

    >>> import minigrad as mg, numpy as np
    >>> f = mg.jit(lambda x: x * 2 + 1)
    >>> _ = f(np.ones(3)); _ = f(np.zeros(3)); _ = f(np.ones(4))
    >>> f.trace_count
    2
    """

    def __init__(self, fn):
        self.fn, self.traces, self.trace_count = fn, {}, 0
        self._last = None
        self.__name__ = getattr(fn, '__name__', 'fn')

    def __call__(self, *args):
        arrays = [_as_array(a) for a in args]
        sig = tuple((a.shape, a.dtype.str) for a in arrays)
        traced = self.traces.get(sig)
        if traced is None:
            traced = trace(self.fn, *arrays)
            traced.program = compile_graph(traced.outputs, list(traced.inputs) + [v for v, _ in traced.params])
            self.traces[sig] = traced
            self.trace_count += 1
        self._last = traced
        return traced(*args)

    @property
    def graph(self) -> Graph | None:
        return None if self._last is None else self._last.graph

    def __str__(self):
        return str(self._last) if self._last is not None else f'jit({self.__name__}) (not traced yet)'

    def _repr_mimebundle_(self, include=None, exclude=None):
        from . import viz
        return viz.mimebundle(self._last)


def jit(fn) -> JitFunction:
    """Trace-and-compile ``fn``, cached per input signature; see JitFunction."""
    return JitFunction(fn)
