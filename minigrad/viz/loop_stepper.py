"""`LoopStepper`: a while_loop pushing its loop variables on a stack, and its gradient popping them
(lesson 04).
"""
from __future__ import annotations

import numpy as np

from ..control import WHILE, WHILE_GRAD
from ..errors import MinigradError
from ..graph import PLACEHOLDER, CONSTANT
from ..interpreter import evaluate, run_graph
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
        n, nc = len(bg.inputs), len(cg.captures)
        feeds = {id(k): np.asarray(v) for k, v in (feed_dict or {}).items()}
        args = evaluate(graph, list(node.inputs), feeds)
        stack, states = _run_loop(cg, bg, list(args[:n]), args[n:n + nc], args[n + nc:], max_iterations)
        self.stack, self.states = stack, states
        self._names = list(names or [s.name for s in node.inputs[:n]])
        d, lv, slots, push = self._draw_forward(cg, bg, len(stack))
        # backward: the while_grad node's grad_graph, applied to each popped entry
        wg = next((m for m in graph.nodes if m.prim is WHILE_GRAD and m.inputs[0] is node.outputs[-1]), None)
        fl = [i for i in range(n) if np.dtype(bg.inputs[i].dtype).kind == 'f']
        bw = self._draw_backward(d, graph, wg, bg, feeds, fl, slots) if wg is not None else dict(pop=[], keys=set())
        base = set(range(len(d.edges))) - set(push) - set(bw['pop'])
        self._lv, self._slots = lv, slots
        hidden_all = set(slots) | bw['keys']
        frames = [Frame('start', f'Before the loop: {self._state_text(states[0])}. The stack is empty.', set(lv),
                        self._values_at(states[0], 0), hidden=hidden_all, shown_edges=base)]
        for k in range(len(stack)):
            frames.append(Frame('forward', f'Iteration {k + 1}: cond is true, so the loop pushes '
                                f'({self._state_text(stack[k])}) on the stack as stack[{k}], then runs the body: now '
                                f'{self._state_text(states[k + 1])}.', {slots[k], 'body', push[k], *lv},
                                self._values_at(states[k + 1], k + 1),
                                hidden=hidden_all - set(slots[:k + 1]), shown_edges=base | {push[k]}))
        frames.append(Frame('forward', f'cond is false for ({self._state_text(states[-1])}): the loop ends after '
                            f'{len(stack)} iterations. The stack keeps every iteration\'s inputs for the backward '
                            f'pass.', {'cond', *lv}, self._values_at(states[-1], len(stack)),
                            hidden=hidden_all - set(slots), shown_edges=base))
        # grads: w.r.t. the initial float loop variables; invariant_grads: w.r.t. float values the body reads
        self.grads, self.invariant_grads = (self._backward_frames(frames, bw, stack, states, fl, base)
                                            if wg is not None else (None, None))
        self._setup(frames, Layout(d, frames, max_nodes=max_nodes))

    def _state_text(self, vals):
        return ', '.join(f'{nm} = {preview(v, 12)}' for nm, v in zip(self._names, vals))

    def _values_at(self, vals, upto, extra=None):
        slots = {s: self._state_text(v) for s, v in zip(self._slots[:upto], self.stack)}   # what each holds
        return {**dict(zip(self._lv, vals)), **slots, **(extra or {})}

    def _draw_forward(self, cg, bg, depth):
        """The loop variables, cond, body and a stack of `depth` slots; returns them and the push edges."""
        names, d = self._names, Drawing()
        lv = [d.data(f'lv{i}', names[i], s.shape, s.dtype, role='leaf') for i, s in enumerate(bg.inputs)]
        ops = lambda g: ', '.join(dict.fromkeys(m.op for m in g.nodes if m.prim not in (PLACEHOLDER, CONSTANT)))
        d.op('cond', 'cond', detail=ops(cg))
        d.op('body', 'body', detail=ops(bg))
        _edges(d, [(k, op) for k in lv for op in ('cond', 'body')])
        _edges(d, [('body', k) for k in lv], 'back')
        d.clusters['stack'] = dict(label='stack (newest on top)', color='#c07000')
        slots = [d.data(f'slot{k}', f'stack[{k}]', None, None, role='value', cluster='stack') for k in range(depth)]
        _edges(d, zip(slots[1:], slots), 'invis')      # newest on top
        push = _edges(d, [('body', k) for k in slots], 'flow', 'push')
        return d, lv, slots, push

    def _draw_backward(self, d, graph, wg, bg, feeds, fl, slots) -> dict:
        """The body's VJP popping the stack; returns what the backward frames need."""
        names, gg = self._names, wg.params['grad_graph']
        n_ct = len(wg.inputs) - 1 - len(gg.captures)
        vals = evaluate(graph, list(wg.inputs[1:]), feeds)
        d.op('vjp', 'body VJP', backward=True)
        ct = [d.data(f'ct{i}', f'grad {names[i]}', bg.inputs[i].shape, bg.inputs[i].dtype, role='grad') for i in fl]
        cap_names = [outer.name for outer, _ in gg.captures]
        inv = [d.data(f'cg{j}', f'grad {cap_names[j]}', None, None, role='grad') for j in range(len(gg.outputs) - n_ct)]
        _edges(d, [(k, 'vjp') for k in ct], 'bwd')
        _edges(d, [('vjp', k) for k in ct], 'back')
        _edges(d, [('vjp', k) for k in inv], 'bwd')
        pop = _edges(d, [(k, 'vjp') for k in slots], 'bwd', 'pop')
        return dict(gg=gg, n_ct=n_ct, cts=list(vals[:n_ct]), caps=vals[n_ct:], ct=ct, inv=inv, pop=pop,
                    keys={'vjp', *ct, *inv})

    def _backward_frames(self, frames, bw, stack, states, fl, base):
        """Pop the stack, last first, running the body's VJP at each saved state; returns the gradients."""
        names, slots, ct, inv, pop, n_ct = self._names, self._slots, bw['ct'], bw['inv'], bw['pop'], bw['n_ct']
        cts, acc = bw['cts'], None

        def grads_at(cts, acc):
            return {**dict(zip(ct, cts)), **dict(zip(inv, acc or [0.0] * len(inv)))}
        gname = ', '.join(f'grad {names[i]} = {preview(c)}' for i, c in zip(fl, cts))
        frames.append(Frame('backward', f'Backward: the gradient arriving at the loop\'s result: {gname}.',
                            set(ct), self._values_at(states[-1], len(stack), grads_at(cts, acc)),
                            hidden=set(), shown_edges=base))
        for k in reversed(range(len(stack))):
            res = run_graph(bw['gg'], [*stack[k], *cts], bw['caps'])
            before, cts, new = cts, list(res[:n_ct]), list(res[n_ct:])
            acc = new if acc is None else [a + b for a, b in zip(acc, new)]
            change = ', '.join(f'grad {names[i]} {preview(a)} → {preview(b)}' for i, a, b in zip(fl, before, cts))
            frames.append(Frame('backward', f'Pop stack[{k}] ({self._state_text(stack[k])}): the body\'s VJP at exactly '
                                f'that iteration\'s inputs turns {change}.', {slots[k], 'vjp', pop[k], *ct, *inv},
                                self._values_at(states[-1], k + 1, grads_at(cts, acc)),
                                hidden=set(slots[k + 1:]), shown_edges=base | {pop[k]}))
        done = ', '.join(f'd(result)/d({names[i]} at the start) = {preview(c)}' for i, c in zip(fl, cts))
        frames.append(Frame('backward', f'The stack is empty: {done}; this is what mg.gradients returns.',
                            set(ct) | set(inv), self._values_at(states[-1], 0, grads_at(cts, acc)),
                            hidden=set(slots), shown_edges=base))
        return cts, acc


def _edges(d: Drawing, ends, style='fwd', label=None) -> list[int]:
    """Draw an edge for each (a, b) in `ends`; return their edge numbers."""
    first = len(d.edges)
    for a, b in ends:
        d.edge(a, b, style, label)
    return list(range(first, len(d.edges)))


def _run_loop(cg, bg, state, ccap, bcap, max_iterations):
    """Run cond and body like the while node does, pushing the loop variables before each body run."""
    stack, states = [], [list(state)]
    while bool(np.asarray(run_graph(cg, state, ccap)[0]).reshape(-1)[0]):
        if len(stack) >= max_iterations:
            raise MinigradError(f'LoopStepper: the loop runs more than {max_iterations} iterations; raise '
                                f'max_iterations= to step through all of them')
        stack.append(tuple(state))
        state = run_graph(bg, state, bcap)
        states.append(list(state))
    return stack, states
