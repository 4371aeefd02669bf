"""Dynamic -> static: mg.trace turns a Python function into a Graph (mg.jit, in jit.py, builds on it).

* ``symbolic=True`` runs the function once on Symbols (placeholders shaped like the
  example inputs): every op adds a node, so the graph is valid for any values of
  that shape. Python ``if``/``while`` on a Symbol has no value to look at and
  raises TraceError: use mg.cond / mg.while_loop.
* ``symbolic=False`` runs the function once on real Tensors under ``mg.Tape()``
  and converts the tape into a Graph (`tape_to_graph`): a tape *is* a static graph
  of one run. Python branches are frozen at the values seen while tracing.

Tensors the function uses but does not receive (module parameters, closed-over
tensors) become Variables: each call feeds their current ``.data``, so training updates
and in-place changes are seen. A traced function called on Tensors that need
derivatives is one 'call' node on the tape (call.py).
"""
from __future__ import annotations

import inspect

import numpy as np

from ..core import primitive as core
from ..core.primitive import OPS, fmt_shape
from ..core.errors import TraceError, InputError
from ..core.graph import Graph, Symbol, Variable, placeholder
from ..core.tensor import Tensor, Tape, enable_grad, tensor
from ..core.interpreter import evaluate, replay
from ..pytree import flatten, unflatten
from ..session import check_feeds
from .call import CALL, Callee, call_outputs, copy_aliases, inline, needs_call_node, value_of


def as_array(x) -> np.ndarray:
    x = value_of(x)                 # a Dual's primal: mg.jvp of a jit / trace function
    if isinstance(x, Tensor):
        return x.data
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, Symbol):
        raise TraceError(f"cannot call a traced function on Symbol '{x.name}'; call it on arrays or Tensors")
    return tensor(x).data         # Python floats -> float32, as mg.tensor


def arg_names(fn, n) -> list[str]:
    if not callable(fn):
        raise InputError(f'mg.trace: expected a function to trace, got {type(fn).__name__} {fn!r:.40}')
    try:        # a Module is named by its forward's parameters (not arg0)
        params = [p.name for p in inspect.signature(getattr(fn, 'forward', fn)).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f'arg{i}' for i in range(n)]


class TracedFunction:
    """A function captured as a Graph. Call it like the original function:
    Tensors in -> Tensors out (one 'call' node each when derivatives are needed, see call.py),
    numpy/number in -> numpy out, Symbols in -> the graph copied into theirs. Input shapes
    and dtypes must match the example inputs (a FeedError says otherwise; mg.jit retraces instead).

    Attributes: ``graph``, ``inputs`` (placeholders in call order), ``outputs``
    (flat list of Symbols), ``treedef`` (how to nest them as fn returned them, see pytree.py),
    ``params`` (list of (Variable, Tensor) pairs fed on every call), ``symbolic``.
    """

    __reduce_ex__ = core.refuse_pickle('a traced function', 'pickle its graph (f.graph: a Graph pickles), or '
                                       'export it with mg.export_onnx')

    def __init__(self, fn, graph, inputs, outputs, treedef, params, symbolic):
        self.fn, self.graph, self.inputs, self.outputs = fn, graph, inputs, outputs
        self.treedef, self.params, self.symbolic = treedef, params, symbolic
        self.program = None              # a compiled Program when mg.jit could compile the graph
        self.callee = None               # the 'call' node's Callee, made when derivatives are first needed
        self.__name__ = getattr(fn, '__name__', 'fn')

    def __call__(self, *args):
        if len(args) != len(self.inputs):
            raise InputError(f'{self.__name__} was traced with {len(self.inputs)} inputs, got {len(args)}; call it '
                             f'with as many arguments as the example inputs (trace again for another signature)')
        if any(isinstance(value_of(a), Symbol) for a in args):
            values = inline(self.graph, self.inputs, self.outputs, self.params, args)
            return unflatten(self.treedef, values)
        arrays = [as_array(a) for a in args]
        values = _run(self, arrays)
        if needs_call_node(args, self.params):
            if self.callee is None:
                self.callee = Callee(self.__name__, self.graph, [*self.inputs, *[v for v, _ in self.params]],
                                     self.outputs, 'interpret' if self.program is None else None)
            values = call_outputs(self.callee, args, self.params, values)
        elif any(isinstance(a, Tensor) for a in args):
            values = [Tensor._make(np.asarray(v)) for v in values]
        return unflatten(self.treedef, values)

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
        return copy_aliases(list(traced.program(*arrays, *params)), [*arrays, *params])
    feeds = check_feeds(traced.graph, traced.feeds(arrays))
    return [np.array(v) for v in evaluate(traced.graph, traced.outputs, feeds, {})]


class TracingGraph(Graph):
    """The graph Python code is traced into (mg.trace, mg.jit, mg.grad, a Module's training step): a Tensor
    the code meets becomes what ``rule(graph, tensor)`` makes of it (a Variable fed its current value, or
    a placeholder). After ``close()`` it refuses Tensors as any graph does."""
    __slots__ = ('rule',)

    def __init__(self, name, rule, parent=None):
        super().__init__(name, parent)
        self.rule = rule

    def lift_tensor(self, t, like=()):
        return Graph.lift_tensor(self, t, like) if self.rule is None else self.rule(self, t)

    def close(self):
        self.rule = None


class Captures:
    """A TracingGraph's rule: an outside Tensor becomes a Variable, fed its current ``.data`` each call.
    ``arrays`` (mg.jit): id -> a Tensor around each outside numpy array to capture the same way."""

    def __init__(self, arrays=None):
        self.syms, self.params, self.arrays = {}, [], arrays or {}

    def __call__(self, graph, t: Tensor) -> Symbol:
        key = id(t)
        if key not in self.syms:
            with graph.as_default():       # a Variable fed t.data on every call: never a stale copy
                v = Variable(t.data, name=t.name or ('param' if t.requires_grad else 'captured'))
                self.params.append((v, t))
                self.syms[key] = v
            self.syms[key, 'ref'] = t      # keep t alive so its id stays unique
        return self.syms[key]


def outputs_of(graph, out, lift) -> tuple:
    """What fn returned as graph Symbols (``lift`` makes each leaf one), and its TreeDef."""
    flat, treedef = flatten(out)
    with graph.as_default():
        syms = [lift(o) for o in flat]
    return syms, treedef


def trace(fn, *example_inputs, symbolic=True) -> TracedFunction:
    """Trace ``fn`` into a Graph for inputs shaped like ``example_inputs``.

    ``symbolic=True`` runs fn on placeholders (`trace_symbols`): data-dependent Python ``if``/``while``
    raises TraceError (use mg.cond / mg.while_loop). ``symbolic=False`` records one
    real run with mg.Tape and converts it (`tape_to_graph`); **trap**: Python branches are frozen at
    the traced values (``if x.sum() > 0`` takes the branch the example input took,
    for every later call), and random tensors made inside fn become constants.

    >>> import minigrad as mg, numpy as np
    >>> f = mg.trace(lambda x: (x * x).sum(), np.ones(3, np.float32))
    >>> float(f(np.arange(3, dtype=np.float32)))
    5.0
    """
    arrays = [as_array(a) for a in example_inputs]
    names = arg_names(fn, len(arrays))
    title = f"trace of {getattr(fn, '__name__', 'fn')}"
    if symbolic:
        graph, inputs, outputs, treedef, params = trace_symbols(fn, arrays, names, title)
    else:
        tensors = [Tensor._make(np.array(a)) for a in arrays]
        with Tape(record_no_grad=True) as tape, enable_grad():     # an outer no_grad stays outside the graph
            out = fn(*tensors)
        flat, treedef = flatten(out)
        graph, inputs, outputs, params = tape_to_graph(tape, tensors, flat, names=names, name=title)
    return TracedFunction(fn, graph, inputs, outputs, treedef, params, symbolic)


def trace_symbols(fn, arrays, names, title) -> tuple:
    """Symbolic tracing: ``fn`` run once on placeholders shaped like ``arrays``; every op it calls adds
    a node. Returns (graph, placeholders, output Symbols, the outputs' TreeDef, captured (Variable,
    Tensor) pairs). A Python branch on a Symbol has no value to test, so it raises TraceError."""
    name = getattr(fn, '__name__', 'fn')
    g = TracingGraph(title, Captures())
    with g.as_default(), enable_grad():         # an outer no_grad stays outside the graph
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
    outputs, treedef = outputs_of(g, out, g.lift)
    params = g.rule.params
    g.close()
    return g, inputs, outputs, treedef, params


def tape_to_graph(tape, inputs, outputs=None, names=None, name='tape') -> tuple:
    """A recorded run as a Graph: a tape *is* a static graph of one run.

    ``inputs``: Tensors of the run that become placeholders (named ``names``, else by their own names).
    Each tape entry becomes one node with the same primitive and params, reading the Symbols its
    inputs became; any other Tensor it reads becomes a Variable fed that tensor's ``.data``. An op
    run under mg.no_grad is followed by stop_gradient; a mg.jit / mg.trace 'call' entry is its graph,
    copied in. ``outputs``: Tensors (or other values, which become constants) to return the Symbols
    of; by default the last entry's result.
    Returns (graph, placeholders, output Symbols, captured (Variable, Tensor) pairs).

    >>> import minigrad as mg
    >>> x = mg.tensor([1.0, 2.0], name='x')
    >>> with mg.Tape() as tape:
    ...     y = (x * x).sum()
    >>> graph, (px,), (py,), params = tape_to_graph(tape, [x])
    >>> [n.op for n in graph.nodes]
    ['placeholder', 'mul', 'sum']
    >>> float(mg.Session(graph).run(py, {px: [3.0, 4.0]}))
    25.0
    """
    if outputs is None:
        outputs = [tape.entries[-1].output] if tape.entries else []
    names = names or [t.name or f'arg{i}' for i, t in enumerate(inputs)]
    g = Graph(name)
    hook, env = Captures(), {}
    with g.as_default(), enable_grad():         # the graph follows the tape's own no_grad marks only
        phs = [placeholder(t.data.dtype, t.data.shape, name=n) for t, n in zip(inputs, names)]
        env.update((id(t), p) for t, p in zip(inputs, phs))

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
        syms = [g.lift(sym(o)) for o in outputs]
    return g, phs, syms, hook.params
