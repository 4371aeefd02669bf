"""`LoopStepper`: a while_loop pushing its loop variables on a stack, and its gradient popping them
(lesson 04).
"""
from __future__ import annotations

import numpy as np

from ..core.control import WHILE, WHILE_GRAD
from ..core.errors import MinigradError
from ..core.graph import PLACEHOLDER, CONSTANT
from ..core.interpreter import evaluate, run_graph
from .draw import Drawing, preview
from .frames import Frame, Layout, Player


# ------------------------------------------------------------------ a while_loop's stack
class LoopStepper(Player):
    """A while_loop run one iteration at a time (lesson 04): every iteration pushes its loop variables on a
    stack; the gradient pops them, last first, and applies the body's VJP at each saved state.

    It runs the library's own sub-graphs (the while node's cond and body, the while_grad node's grad_graph)
    with the reference interpreter, exactly as Session.run does. ``LoopStepper(result, feed_dict={...})``
    where `result` is an output of ``mg.while_loop``; the backward frames appear when ``mg.gradients`` was
    taken through that loop in the same graph. ``names`` names the loop variables."""

    def __init__(self, result, feed_dict=None, names=None, max_iterations=24, max_nodes=150):
        node = getattr(result, 'node', None)
        if node is None or node.prim is not WHILE:
            raise MinigradError('LoopStepper: pass an output of mg.while_loop (e.g. the first loop variable)')
        graph, cg, bg = result.graph, node.params['cond_graph'], node.params['body_graph']
        feeds = {id(k): np.asarray(v) for k, v in (feed_dict or {}).items()}
        self.stack, self.states = _run_loop(cg, bg, evaluate(graph, list(node.inputs), feeds), max_iterations)
        self._names = list(names or [s.name for s in node.inputs[:len(bg.inputs)]])
        # the loop variables at the start of each iteration and at the end, as text; stack[k] holds states[k]
        self._texts = [', '.join(f'{nm} = {preview(v, 12)}' for nm, v in zip(self._names, state))
                       for state in self.states]
        # backward: the while_grad node's grad_graph, applied to each popped entry
        wg = next((m for m in graph.nodes if m.prim is WHILE_GRAD and m.inputs[0] is node.outputs[-1]), None)
        d = self._draw(cg, bg, wg)
        frames = self._forward()
        # grads: w.r.t. the initial float loop variables; invariant_grads: w.r.t. float values the body reads
        self.grads, self.invariant_grads = self._backward(frames, graph, wg, feeds) if wg is not None else (None, None)
        self._setup(frames, Layout(d, frames, max_nodes=max_nodes))

    def _frame(self, kind, caption, keys, filled, edge=None, grads=None):
        """A frame with the bottom `filled` stack slots and `edge` drawn, the loop variables as they were when
        the stack was that high (at the end, with `grads`, in the backward pass)."""
        slots, edges, forward = self._slots, set() if edge is None else {edge}, grads is None
        values = dict(zip(self._lv, self.states[filled if forward else -1]))
        values.update(zip(slots[:filled], self._texts), **(grads or {}))
        hidden = set(slots[filled:]) | (self._unseen if forward else set())
        return Frame(kind, caption, set(keys) | edges, values, hidden=hidden, shown_edges=self._base | edges)

    def _draw(self, cg, bg, wg):
        """The loop variables, cond, body, a stack slot per iteration and, with a gradient, the body's VJP."""
        names, d, ct, inv, pop = self._names, Drawing(), [], [], []
        lv = [d.data(f'lv{i}', names[i], s.shape, s.dtype, role='leaf') for i, s in enumerate(bg.inputs)]
        ops = lambda g: ', '.join(dict.fromkeys(m.op for m in g.nodes if m.prim not in (PLACEHOLDER, CONSTANT)))
        d.op('cond', 'cond', detail=ops(cg))
        d.op('body', 'body', detail=ops(bg))
        _edges(d, [(k, op) for k in lv for op in ('cond', 'body')])
        _edges(d, [('body', k) for k in lv], 'back')
        d.clusters['stack'] = dict(label='stack (newest on top)', color='#c07000')
        slots = [d.data(f'slot{k}', f'stack[{k}]', role='value', cluster='stack') for k in range(len(self.stack))]
        _edges(d, zip(slots[1:], slots), 'invis')      # newest on top
        push = _edges(d, [('body', k) for k in slots], 'flow', 'push')
        fl = [(i, s) for i, s in enumerate(bg.inputs) if np.dtype(s.dtype).kind == 'f']    # the float loop variables
        if wg is not None:
            gg = wg.params['grad_graph']
            d.op('vjp', 'body VJP', backward=True)
            ct = [d.data(f'ct{i}', f'grad {names[i]}', s.shape, s.dtype, role='grad') for i, s in fl]
            # while_grad's outputs after the loop variables' gradients: one per float value the body reads
            invariants = [outer for outer, inner in gg.captures if np.dtype(inner.dtype).kind == 'f']
            inv = [d.data(f'cg{j}', f'grad {outer.name}', role='grad') for j, outer in enumerate(invariants)]
            _edges(d, [(k, 'vjp') for k in ct], 'bwd')
            _edges(d, [('vjp', k) for k in ct], 'back')
            _edges(d, [('vjp', k) for k in inv], 'bwd')
            pop = _edges(d, [(k, 'vjp') for k in slots], 'bwd', 'pop')
        self._lv, self._slots, self._push, self._pop, self._ct, self._inv = lv, slots, push, pop, ct, inv
        self._float_names = [names[i] for i, _ in fl]
        self._unseen = {'vjp', *ct, *inv} if wg is not None else set()      # hidden until the backward pass
        self._base = set(range(len(d.edges))) - set(push) - set(pop)         # shown in every frame
        return d

    def _forward(self):
        """The frames of the loop running forward."""
        lv, slots, texts, depth = self._lv, self._slots, self._texts, len(self.stack)
        frames = [self._frame('start', f'Before the loop: {texts[0]}. The stack is empty.', lv, 0)]
        for k in range(depth):
            frames.append(self._frame('forward', f'Iteration {k + 1}: cond is true, so the loop pushes ({texts[k]}) '
                                      f'on the stack as stack[{k}], then runs the body: now {texts[k + 1]}.',
                                      {slots[k], 'body', *lv}, k + 1, self._push[k]))
        frames.append(self._frame('forward', f'cond is false for ({texts[-1]}): the loop ends after {depth} '
                                  f'iterations. The stack keeps every iteration\'s inputs for the backward pass.',
                                  {'cond', *lv}, depth))
        return frames

    def _backward(self, frames, graph, wg, feeds):
        """Pop the stack, last first, running the body's VJP at each saved state; returns the gradients."""
        slots, ct, inv, names = self._slots, self._ct, self._inv, self._float_names
        vals = evaluate(graph, list(wg.inputs[1:]), feeds)
        cts, caps, acc = list(vals[:len(ct)]), vals[len(ct):], None

        def frame(caption, keys, filled, edge=None):
            grads = {**dict(zip(ct, cts)), **dict(zip(inv, acc or [0.0] * len(inv)))}
            frames.append(self._frame('backward', caption, keys, filled, edge, grads))
        arriving = ', '.join(f'grad {nm} = {preview(c)}' for nm, c in zip(names, cts))
        frame(f'Backward: the gradient arriving at the loop\'s result: {arriving}.', ct, len(slots))
        for k in reversed(range(len(slots))):
            before, res = cts, run_graph(wg.params['grad_graph'], [*self.stack[k], *cts], caps)
            cts, new = list(res[:len(ct)]), list(res[len(ct):])
            acc = new if acc is None else [a + b for a, b in zip(acc, new)]
            change = ', '.join(f'grad {nm} {preview(a)} → {preview(b)}' for nm, a, b in zip(names, before, cts))
            frame(f'Pop stack[{k}] ({self._texts[k]}): the body\'s VJP at exactly that iteration\'s '
                  f'inputs turns {change}.', {slots[k], 'vjp', *ct, *inv}, k + 1, self._pop[k])
        done = ', '.join(f'd(result)/d({nm} at the start) = {preview(c)}' for nm, c in zip(names, cts))
        frame(f'The stack is empty: {done}; this is what mg.gradients returns.', {*ct, *inv}, 0)
        return cts, acc


def _edges(d: Drawing, ends, style='fwd', label=None) -> list[int]:
    """Draw an edge for each (a, b) in `ends`; return their edge numbers."""
    first = len(d.edges)
    for a, b in ends:
        d.edge(a, b, style, label)
    return list(range(first, len(d.edges)))


def _run_loop(cg, bg, args, max_iterations):
    """Run cond and body like the while node does (on its inputs `args`), pushing the loop variables before
    each body run."""
    n, nc = len(bg.inputs), len(cg.captures)
    state, ccap, bcap = list(args[:n]), args[n:n + nc], args[n + nc:]
    stack, states = [], [list(state)]
    while bool(np.asarray(run_graph(cg, state, ccap)[0]).reshape(-1)[0]):
        if len(stack) >= max_iterations:
            raise MinigradError(f'LoopStepper: the loop runs more than {max_iterations} iterations; raise '
                                f'max_iterations= to step through all of them')
        stack.append(tuple(state))
        state = run_graph(bg, state, bcap)
        states.append(list(state))
    return stack, states
