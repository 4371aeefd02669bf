"""`Stepper`: the forward pass, then the backward pass, of a tape, a tensor or a static graph, one frame
per op and one per gradient contribution (frames.py holds the machinery every stepper shares).
"""
from __future__ import annotations

import numpy as np

from ..core.errors import InputError
from ..core.graph import PLACEHOLDER, VARIABLE, Graph, Symbol
from ..core.interpreter import evaluate, needed_nodes
from ..core.tensor import no_grad
from .draw import Drawing, esc, from_graph, preview
from .frames import Frame, Layout, Player, from_tape_or_tensor, vertex_name


VERBS = {'add': 'adds', 'mul': 'multiplies', 'div': 'divides', 'pow': 'raises to a power:', 'neg': 'negates',
         'exp': 'exponentiates', 'log': 'takes the log of', 'sum': 'sums', 'max': 'takes the max of',
         'matmul': 'matrix-multiplies', 'tanh': 'applies tanh to', 'maximum': 'takes the elementwise max of',
         'reshape': 'reshapes', 'transpose': 'transposes', 'broadcast_to': 'broadcasts', 'getitem': 'indexes',
         'fma': 'multiplies and adds (fused)', 'where': 'selects between'}



# ------------------------------------------------------------------ forward and backward
class Stepper(Player):
    """Step through the forward pass and then the backward pass of a tape or a static graph.

    ``Stepper(loss)`` (a Tensor whose graph is still there: backward(retain_graph=True) or not yet called),
    ``Stepper(tape)`` (``with mg.Tape() as tape:``), or ``Stepper(symbol_or_graph, feed_dict={x: ...})``
    (values computed with the reference interpreter). The user's tensors and their .grad are not touched.
    Ops not reached yet are drawn faded.

    >>> import minigrad as mg
    >>> a = mg.tensor(3.0, requires_grad=True, name='a')
    >>> with mg.Tape() as tape:
    ...     y = a * a
    >>> s = mg.viz.Stepper(tape); [f.kind for f in s.frames]
    ['start', 'forward', 'backward', 'backward', 'backward']
    """

    def __init__(self, obj, feed_dict=None, fetch=None, root=None, max_nodes=150):
        d, steps, root_key = from_tape_or_tensor(obj, root, 'Stepper') or self._from_graph(obj, feed_dict, fetch)
        values = {k: v['value'] for k, v in d.vertices.items()     # the inputs' values (an op vertex has no role)
                  if v.get('role') in ('leaf', 'param', 'constant', 'placeholder') and v['value'] is not None}
        frames = _frames(d, steps, values, root_key)
        self._drawing = d
        self._setup(frames, Layout(d, frames, max_nodes), table=True)

    @staticmethod
    def _from_graph(obj, feed_dict, fetch):
        g = obj if isinstance(obj, Graph) else getattr(obj, 'graph', None)   # Symbol, traced fn, Program
        if not isinstance(g, Graph):
            raise InputError(f'Stepper: cannot step through a {type(obj).__name__}; pass a Tensor, a Tape, a Graph, '
                             f'a Symbol, a traced function or a Program')
        if not g.nodes:
            raise InputError('Stepper: the graph is empty; build some ops in it first (with g.as_default(): ...)')
        fetch = fetch if fetch is not None else obj if isinstance(obj, Symbol) else (g.outputs or None)
        fetch = [fetch] if isinstance(fetch, Symbol) else list(fetch) if fetch else list(g.nodes[-1].outputs)
        d, steps = from_graph(g, fetch)
        feeds = {id(k): np.asarray(v) for k, v in (feed_dict or {}).items()}
        nodes = needed_nodes(g, fetch)
        syms = [o for n in nodes for o in n.outputs]
        env = {id(s): v for s, v in zip(syms, evaluate(g, syms, feeds, {}, nodes))}
        for s in steps:
            s.in_vals = [env.get(id(i)) for i in s.src.inputs]
            s.out_vals = [env.get(id(o)) for o in s.src.outputs]
        for n in nodes:
            if n.prim in (PLACEHOLDER, VARIABLE) and id(n.outputs[0]) in d._keys:
                d.vertices[d._keys[id(n.outputs[0])]]['value'] = env[id(n.outputs[0])]
        root = fetch[0]          # a graph holding gradient ops is stepped through forward only
        ok = len(fetch) == 1 and root.dtype.kind == 'f' and id(root) in d._keys and not any(s.backward for s in steps)
        return d, steps, d._keys[id(root)] if ok else None

    def _table(self, f) -> str:
        grads, rows = f.grads or {}, []
        for k, v in self._drawing.vertices.items():
            if v['kind'] == 'data' and (k in f.values or k in grads):
                style = ' style="background:#ffe8c8"' if k in f.highlight else ''
                rows.append(f'<tr{style}><td><b>{esc(v["name"])}</b></td><td>{esc(preview(f.values.get(k)))}</td>'
                            f'<td style="color:#c03030">{esc(preview(grads.get(k)))}</td></tr>')
        return ('<table class="mg-table" style="font-size:12px;font-family:monospace"><tr><th>name</th>'
                '<th>value</th><th>grad</th></tr>' + ''.join(rows) + '</table>')


def _frames(d: Drawing, steps, values, root_key) -> list[Frame]:
    """Forward frames in step order, then backward frames (one per gradient contribution along an edge)."""
    values = dict(values)
    inputs = [k for k in values if d.vertices[k]['role'] != 'constant']
    names = ', '.join(vertex_name(d, k) for k in inputs) or 'none'
    pending = [{s.key, *s.outs} for s in steps]         # faded until that step has run
    drawn = set(range(len(d.edges)))                    # the backward pass adds a flow edge per contribution
    frames = [Frame('start', f'Before the forward pass: only the inputs have values ({names}).', inputs,
                    dict(values), dim=set().union(*pending), shown_edges=drawn)]
    n = len(steps)
    for i, s in enumerate(steps, 1):
        values.update(zip(s.outs, s.out_vals or ()))
        ins = ' and '.join(vertex_name(d, k) for k in s.ins if k is not None)
        op = s.prim.name
        res = ', '.join(f'{vertex_name(d, k)} = {preview(v)}' for k, v in zip(s.outs, s.out_vals or ()))
        kind = 'backward graph ' if s.backward else ''
        frames.append(Frame('forward', f'Forward step {i} of {n}: {kind}{op} {VERBS.get(op, f"computes {op} of")} '
                            f'{ins}, giving {res}.', {s.key, *s.outs}, dict(values), op=s.key, target=s.outs[0]
                            if s.outs else None, dim=set().union(*pending[i:]), shown_edges=drawn))
    if root_key is None or not steps:
        return frames
    grads, uses = {root_key: np.ones_like(values[root_key])}, {}

    def back(caption, highlight, **kw):      # the gradients so far, and every flow edge drawn so far
        frames.append(Frame('backward', caption, highlight, values, dict(grads), **kw,
                            shown_edges=set(range(len(d.edges)))))
    back(f'Backward pass starts at {vertex_name(d, root_key)}: its gradient with respect to itself is 1.',
         {root_key}, target=root_key, contribution=grads[root_key])
    with no_grad():
        for s in reversed(steps):
            gs = [grads.get(k) for k in s.outs]
            if all(g is None for g in gs) or s.prim.vjp is None:
                continue
            g, out = (tuple(gs), tuple(s.out_vals)) if s.prim.multiple_results else (gs[0], s.out_vals[0])
            ins = [np.array(v) if isinstance(v, np.ndarray) else v for v in s.in_vals]   # copies: never touch user data
            try:
                contrib = s.prim.vjp(tuple(s.needs), g, out, *ins, **s.params)
            except Exception as e:
                back(f'The stepper cannot run the backward rule of {s.prim.name} on numbers '
                     f'({type(e).__name__}: {e}); stopping here.', {s.key})
                break
            for k, c, need in zip(s.ins, contrib, s.needs):
                if c is None or k is None or not need:
                    continue
                c = np.asarray(getattr(c, 'data', c))
                uses[k] = uses.get(k, 0) + 1
                grads[k] = c if k not in grads else grads[k] + c
                d.edge(s.key, k, 'flow', f'grad {preview(c, 16)}')
                extra = (f' {vertex_name(d, k)} is used more than once, so contributions add up: this is contribution '
                         f'{uses[k]}, total so far {preview(grads[k])}.' if uses[k] > 1 else '')
                back(f'Backward through {s.prim.name}: the gradient of {vertex_name(d, s.outs[0])} '
                     f'({preview(gs[0])}) flows to {vertex_name(d, k)} as {preview(c)}.{extra}',
                     {s.key, k, (s.key, k)}, target=k, contribution=c, op=s.key)
    return frames
