"""A traced graph called as one op: the 'call' node of mg.jit and mg.trace functions.

A jit or trace function computes its outputs by running its graph (compiled, or interpreted). When the
caller needs derivatives (a Tensor argument or captured tensor that requires grad, a Dual of mg.jvp,
or an open mg.Tape), each float output is also recorded as one 'call' node whose params name a
`Callee` (the graph, its inputs and outputs): its VJP is another Callee made with mg.gradients from
that graph, its JVP pushes Duals through the graph, so derivatives of any order flow through jit and
trace. Called on Symbols (inside another trace or jit), the graph is copied in instead (`inline`).

>>> import minigrad as mg, numpy as np
>>> f = mg.jit(lambda x: (x * x).sum())
>>> x = mg.tensor([1.0, 2.0], requires_grad=True)
>>> y = f(x)
>>> y.grad_fn.name
'call'
>>> y.backward(); x.grad.tolist()
[2.0, 4.0]
"""
from __future__ import annotations

import numpy as np

from ..core import primitive as core
from ..core.primitive import Aval, register_primitive
from ..core.graph import Graph, Symbol, placeholder, gradients
from ..core.tensor import Tensor, is_grad_enabled, enable_grad
from ..core.autodiff import state
from ..core.interpreter import evaluate, replay
from ..compiler import compile as compile_graph
from .forward import Dual, push


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


def inline(graph, inputs, outputs, params, args):
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

