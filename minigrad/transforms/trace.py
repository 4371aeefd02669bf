"""Dynamic -> static: mg.trace turns a Python function into a Graph (mg.jit, in jit.py, builds on it).

* ``symbolic=True`` runs the function once on Symbols (placeholders shaped like the
  example inputs): every op adds a node, so the graph is valid for any values of
  that shape. Python ``if``/``while`` on a Symbol has no value to look at and
  raises TraceError: use mg.cond / mg.while_loop.
* ``symbolic=False`` runs the function once on real Tensors under ``mg.Tape()``
  and converts the tape into a Graph: a tape *is* a static graph of one run.
  Python branches are frozen at the values seen while tracing.

Tensors the function uses but does not receive (module parameters, closed-over
tensors) become Variables: each call feeds their current ``.data``, so training updates
and in-place changes are seen.
"""
from __future__ import annotations

import inspect

import numpy as np

from ..core import primitive as core
from ..core.primitive import OPS, fmt_shape, register_primitive
from ..core.primitive import Aval
from ..core.errors import TraceError, InputError
from ..core.graph import Graph, Symbol, Variable, placeholder, gradients
from ..session import check_feeds, _flatten, _unflatten
from ..core.tensor import Tensor, Tape, tensor, is_grad_enabled, enable_grad
from ..core.autodiff import state
from .forward import Dual, push
from ..core.control import replay
from ..compiler import compile as compile_graph
from ..core.interpreter import evaluate


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
            return self.memo[1]          # the values this call already computed (see call_outputs)
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


def needs_call_node(args, params) -> bool:
    """Record one 'call' node: some argument is a Dual, or a Tensor (or captured tensor) needing grad."""
    if any(type(a) is Dual for a in args) or (state.tapes and any(isinstance(a, Tensor) for a in args)):
        return True                 # (an open mg.Tape, e.g. mg.trace(symbolic=False), must see the call too)
    return is_grad_enabled() and any(isinstance(a, Tensor) for a in args) and \
        any(t.requires_grad for t in (*[a for a in args if isinstance(a, Tensor)], *[t for _, t in params]))


def value_of(a):
    """The array under a Tensor or Dual (of any level)."""
    while type(a) is Dual:
        a = a.primal
    return a.data if isinstance(a, Tensor) else a


def call_outputs(callee, args, params, flat):
    """The outputs as 'call' nodes on the tape (or Duals), reusing the values ``flat`` just computed."""
    ins = [*args, *[t for _, t in params]]
    callee.memo = ([value_of(a) for a in ins], flat)
    try:
        return [core.apply(CALL, *ins, callee=callee, index=k) if np.asarray(v).dtype.kind == 'f'
                else Tensor._make(v) for k, v in enumerate(flat)]
    finally:
        callee.memo = None


def _inline(graph, inputs, outputs, params, args):
    """A traced function called on Symbols (inside another trace or jit): its graph, copied in."""
    vals = replay(graph, [*args, *[t for _, t in params]], inputs=[*inputs, *[v for v, _ in params]],
                  outputs=outputs)
    g = next(value_of(a) for a in args if isinstance(value_of(a), Symbol)).graph
    with g.as_default():
        return [v if type(v) is Dual else g.lift(v) for v in vals]     # (Duals: mg.jvp inside a trace)


def copy_aliases(values, arrays):
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
        if any(isinstance(value_of(a), Symbol) for a in args):
            values = _inline(self.graph, self.inputs, self.outputs, self.params, args)
            return _unflatten(self._template, iter(values))
        arrays = [as_array(a) for a in args]
        values = _run(self, arrays)
        if needs_call_node(args, self.params):
            if self.callee is None:
                self.callee = Callee(self.__name__, self.graph, [*self.inputs, *[v for v, _ in self.params]],
                                     self.outputs, 'interpret' if self.program is None else None)
            values = call_outputs(self.callee, args, self.params, values)
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
        return copy_aliases(list(traced.program(*arrays, *params)), [*arrays, *params])
    feeds = check_feeds(traced.graph, traced.feeds(arrays))
    return [np.array(v) for v in evaluate(traced.graph, traced.outputs, feeds, {})]


class Captures:
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


def outputs_of(graph, out, lift) -> tuple:
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
    arrays = [as_array(a) for a in example_inputs]
    names = arg_names(fn, len(arrays))
    name = getattr(fn, '__name__', 'fn')
    g = Graph(f'trace of {name}')
    hook = Captures(g)
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
        outputs, template = outputs_of(g, out, g.lift)
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
        outputs, template = outputs_of(g, out, lambda o: g.lift(sym(o)))
    return TracedFunction(fn, g, inputs, outputs, template, hook.params, symbolic)
