"""Step-through widgets (ipywidgets) and the memory timeline (matplotlib).

A stepper is a list of `Frame`s plus controls (Play, slider, Prev/Next, caption,
drawing, table). Everything updates through plain Python callbacks, so
``.next()``, ``.prev()``, ``.index``, ``.frames`` and ``.svg`` work without a browser.
The highlighted vertices of a frame carry the SVG class ``mg-highlight``.
"""
from __future__ import annotations

import html

import numpy as np

from ..errors import MinigradError
from ..graph import PLACEHOLDER, VARIABLE
from .draw import Drawing, from_graph, from_tape, from_tensor, is_fused, preview, render_svg, to_digraph, esc

try:
    import ipywidgets as W
    _Base = W.VBox
except ImportError:          # steppers still work headless (frames, next/prev, svg), just without controls
    W = None
    _Base = object

VERBS = {'add': 'adds', 'mul': 'multiplies', 'div': 'divides', 'pow': 'raises to a power:', 'neg': 'negates',
         'exp': 'exponentiates', 'log': 'takes the log of', 'sum': 'sums', 'max': 'takes the max of',
         'matmul': 'matrix-multiplies', 'tanh': 'applies tanh to', 'maximum': 'takes the elementwise max of',
         'reshape': 'reshapes', 'transpose': 'transposes', 'broadcast_to': 'broadcasts', 'getitem': 'indexes',
         'fma': 'multiplies and adds (fused)', 'where': 'selects between'}


class Frame:
    """One step: what happened (caption), what is highlighted, and the values/gradients known so far."""

    def __init__(self, kind, caption, highlight=(), values=None, grads=None, edges=(), target=None,
                 contribution=None, op=None, graph=None, changes=None):
        self.kind, self.caption, self.highlight = kind, caption, set(highlight)
        self.values, self.grads, self.edges = values or {}, grads, list(edges)
        self.target, self.contribution, self.op = target, contribution, op
        self.graph, self.changes = graph, changes or {}
        self.svg_text = None

    def __repr__(self):
        return f'<Frame {self.kind}: {self.caption}>'


class _Player(_Base):
    """Controls shared by both steppers: Play, slider, Prev/Next, caption, SVG, side table."""

    def _setup(self, frames, drawing=None, max_nodes=150):
        self.frames, self._drawing, self._max_nodes, self._index = frames, drawing, max_nodes, 0
        if W is None:
            return
        n = len(frames) - 1
        self.play = W.Play(value=0, min=0, max=n, interval=900, description='Play')
        self.slider = W.IntSlider(value=0, min=0, max=n, description='step', continuous_update=True)
        W.jslink((self.play, 'value'), (self.slider, 'value'))
        self.prev_button = W.Button(description='◀ Prev', layout=W.Layout(width='90px'))
        self.next_button = W.Button(description='Next ▶', layout=W.Layout(width='90px'))
        self.prev_button.add_class('mg-prev'), self.next_button.add_class('mg-next')
        self.prev_button.on_click(lambda _: self.prev())
        self.next_button.on_click(lambda _: self.next())
        self.caption = W.HTML()
        self.caption.add_class('mg-caption')
        self.image = W.HTML(layout=W.Layout(overflow='auto'))
        self.image.add_class('mg-svg')
        self.table = W.HTML(layout=W.Layout(min_width='220px', overflow='auto'))
        self.slider.observe(lambda ch: self._show(ch['new']), names='value')
        super().__init__([W.HBox([self.play, self.prev_button, self.next_button, self.slider]), self.caption,
                          W.HBox([self.image, self.table])])
        self.add_class('mg-stepper')
        self._show(0)

    # -- the API the tests (and learners) use
    @property
    def index(self) -> int:
        return self._index

    @index.setter
    def index(self, i):
        i = max(0, min(int(i), len(self.frames) - 1))
        if W is not None and self.slider.value != i:
            self.slider.value = i          # its observer calls _show
        else:
            self._show(i)

    def next(self):
        self.index = self._index + 1
        return self

    def prev(self):
        self.index = self._index - 1
        return self

    @property
    def frame(self) -> Frame:
        return self.frames[self._index]

    @property
    def svg(self) -> str:
        f = self.frame
        if f.svg_text is None:
            f.svg_text = render_svg(self._digraph(f))
        return f.svg_text

    def _show(self, i):
        self._index = i
        if W is None:
            return
        self.caption.value = self._caption_html()
        self.image.value = self.svg
        self.table.value = self._table(self.frames[i])

    def _caption_html(self) -> str:
        return (f'<div style="font-size:14px;padding:4px 0"><b>{self._index}/{len(self.frames) - 1}</b> '
                f'&nbsp;{html.escape(self.frame.caption)}</div>')

    def _repr_mimebundle_(self, **kwargs):
        # a static copy of the current frame for viewers without a live kernel (GitHub, nbviewer, HTML export)
        data = dict((super()._repr_mimebundle_(**kwargs) if W is not None else None) or {'text/plain': repr(self)})
        data['text/html'] = f'<div class="mg-stepper-static">{self._caption_html()}{self.svg}</div>'
        return data

    def _table(self, f) -> str:
        return ''


class Stepper(_Player):
    """Step through the forward pass and then the backward pass of a tape or a static graph.

    ``Stepper(loss)`` (a Tensor whose graph is still there: backward(retain_graph=True) or not yet called),
    ``Stepper(tape)`` (``with mg.Tape() as tape:``), or ``Stepper(symbol_or_graph, feed_dict={x: ...})``
    (values computed with the reference interpreter). The user's tensors and their .grad are not touched.

    >>> import minigrad as mg
    >>> a = mg.tensor(3.0, requires_grad=True, name='a')
    >>> with mg.Tape() as tape:
    ...     y = a * a
    >>> s = mg.viz.Stepper(tape); [f.kind for f in s.frames]
    ['start', 'forward', 'backward', 'backward', 'backward']
    """

    def __init__(self, obj, feed_dict=None, fetch=None, root=None, max_nodes=150):
        from ..tensor import Tensor, Tape
        if isinstance(obj, Tensor):
            d, steps = from_tensor(obj, need_values=True)
            root_key = steps[-1].outs[0] if steps else None
        elif isinstance(obj, Tape):
            if not obj.entries:
                raise MinigradError('Stepper: the tape is empty; run some ops inside `with mg.Tape() as tape:`')
            d, steps = from_tape(obj, root)
            root_key = d._keys[id(root if root is not None else obj.entries[-1].output)]
        else:
            d, steps, root_key = self._from_graph(obj, feed_dict, fetch)
        values = {k: v['value'] for k, v in d.vertices.items() if v['kind'] == 'data' and v['value'] is not None
                  and v['role'] in ('leaf', 'param', 'constant', 'placeholder')}
        self._setup(_frames(d, steps, values, root_key), d, max_nodes)

    @staticmethod
    def _from_graph(obj, feed_dict, fetch):
        from ..graph import Graph, Symbol
        from ..interpreter import evaluate, needed_nodes
        g = obj if isinstance(obj, Graph) else obj.graph if isinstance(obj, Symbol) else getattr(obj, 'graph')
        fetch = fetch if fetch is not None else obj if isinstance(obj, Symbol) else (g.outputs or None)
        fetch = [fetch] if isinstance(fetch, Symbol) else list(fetch) if fetch else \
            [o for o in g.nodes[-1].outputs]
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
        has_bwd = any(s.backward for s in steps)
        root = fetch[0]
        ok = len(fetch) == 1 and root.dtype.kind == 'f' and not has_bwd and id(root) in d._keys
        return d, steps, d._keys[id(root)] if ok else None

    def _digraph(self, f):
        return to_digraph(self._drawing, f.highlight, values=f.values, grads=f.grads if f.grads else {},
                          max_nodes=self._max_nodes, extra_edges=f.edges)

    def _table(self, f) -> str:
        rows = []
        for k, v in self._drawing.vertices.items():
            if v['kind'] != 'data' or (k not in f.values and k not in (f.grads or {})):
                continue
            style = ' style="background:#ffe8c8"' if k in f.highlight else ''
            g = (f.grads or {}).get(k)
            rows.append(f'<tr{style}><td><b>{esc(v["name"])}</b></td><td>{esc(preview(f.values.get(k)))}</td>'
                        f'<td style="color:#c03030">{esc(preview(g)) if g is not None else ""}</td></tr>')
        return ('<table class="mg-table" style="font-size:12px;font-family:monospace"><tr><th>name</th>'
                '<th>value</th><th>grad</th></tr>' + ''.join(rows) + '</table>')


def _name(d, k):
    return d.vertices[k]['name'] if k in d.vertices else '?'


def _frames(d: Drawing, steps, values, root_key) -> list[Frame]:
    """Forward frames in step order, then backward frames (one per gradient contribution along an edge)."""
    values = dict(values)
    names = ', '.join(_name(d, k) for k in values if d.vertices[k]['role'] != 'constant') or 'none'
    frames = [Frame('start', f'Before the forward pass: only the inputs have values ({names}).',
                    {k for k in values if d.vertices[k]['role'] != 'constant'}, dict(values))]
    n = len(steps)
    for i, s in enumerate(steps, 1):
        for k, v in zip(s.outs, s.out_vals or ()):
            values[k] = v
        ins = ' and '.join(_name(d, k) for k in s.ins if k is not None)
        op = s.prim.name
        res = ', '.join(f'{_name(d, k)} = {preview(v)}' for k, v in zip(s.outs, s.out_vals or ()))
        kind = 'backward graph ' if s.backward else ''
        frames.append(Frame('forward', f'Forward step {i} of {n}: {kind}{op} {VERBS.get(op, f"computes {op} of")} '
                            f'{ins}, giving {res}.', {s.key, *s.outs}, dict(values), op=s.key, target=s.outs[0]
                            if s.outs else None))
    if root_key is None or not steps:
        return frames
    from ..tensor import no_grad
    root = values[root_key]
    grads = {root_key: np.ones_like(root)}
    uses: dict = {}
    edges = []
    frames.append(Frame('backward', f'Backward pass starts at {_name(d, root_key)}: its gradient with respect to '
                        f'itself is 1.', {root_key}, values, dict(grads), target=root_key,
                        contribution=grads[root_key]))
    with no_grad():
        for s in reversed(steps):
            gs = [grads.get(k) for k in s.outs]
            if all(g is None for g in gs) or s.prim.vjp is None:
                continue
            g = tuple(gs) if s.prim.multiple_results else gs[0]
            out = tuple(s.out_vals) if s.prim.multiple_results else s.out_vals[0]
            ins = [np.array(v) if isinstance(v, np.ndarray) else v for v in s.in_vals]   # copies: never touch user data
            try:
                contrib = s.prim.vjp(tuple(s.needs), g, out, *ins, **s.params)
            except Exception as e:
                frames.append(Frame('backward', f'The stepper cannot run the backward rule of {s.prim.name} '
                                    f'on numbers ({type(e).__name__}: {e}); stopping here.', {s.key}, values,
                                    dict(grads), list(edges)))
                break
            for k, c, need in zip(s.ins, contrib, s.needs):
                if c is None or k is None or not need:
                    continue
                c = np.asarray(getattr(c, 'data', c))
                uses[k] = uses.get(k, 0) + 1
                grads[k] = c if k not in grads else grads[k] + c
                edges.append((s.key, k, 'flow', f'grad {preview(c, 16)}'))
                extra = (f' {_name(d, k)} is used more than once, so contributions add up: this is contribution '
                         f'{uses[k]}, total so far {preview(grads[k])}.' if uses[k] > 1 else '')
                frames.append(Frame('backward', f'Backward through {s.prim.name}: the gradient of '
                                    f'{_name(d, s.outs[0])} ({preview(gs[0])}) flows to {_name(d, k)} as '
                                    f'{preview(c)}.{extra}', {s.key, k, (s.key, k)}, values, dict(grads),
                                    list(edges), target=k, contribution=c, op=s.key))
    return frames


# ------------------------------------------------------------------ compiler passes
def _sig(node):
    return node.op, tuple(o.name for o in node.outputs)


class PassStepper(_Player):
    """One frame per compiler pass: the graph after it, with added/fused nodes highlighted, removed ones ghosted.

    >>> import minigrad as mg                              # doctest: +SKIP
    >>> s = mg.viz.PassStepper(mg.compile([y], [x]))     # doctest: +SKIP
    """

    def __init__(self, program, max_nodes=150):
        history = list(getattr(program, 'history', None) or [])
        if not history:
            raise MinigradError('PassStepper: this program has no pass history (program.history is empty)')
        frames, prev = [], None
        for i, (name, g) in enumerate(history):
            cur = {_sig(n): n for n in g.nodes}
            old = {} if prev is None else {_sig(n): n for n in prev.nodes}
            added = [n for s, n in cur.items() if prev is not None and s not in old]
            removed = [n for s, n in old.items() if s not in cur]
            fused = [n for n in added if n.prim.kind == 'compiler' and n.prim.decompose is not None]
            ch = dict(added=len(added), removed=len(removed), fused=len(fused), nodes=len(g.nodes))
            cap = (f'The graph before optimisation: {len(g.nodes)} nodes.' if prev is None else
                   f"Pass {i} of {len(history) - 1}, '{name}': removed {len(removed)} node(s), added "
                   f'{len(added)}, fused {len(fused)}; {len(g.nodes)} nodes now.')
            declined = program.stats.get('declined', {}).get(name, []) if prev is not None else []
            if declined:                             # what the pass chose not to do, and why
                cap += ' Declined: ' + '; '.join(declined[:3]) + (f' (+{len(declined) - 3} more)'
                                                                   if len(declined) > 3 else '') + '.'
            d, _ = from_graph(g)
            if removed:
                d.clusters['removed'] = dict(label='removed by this pass', color='#999999')
                for n in removed:
                    d.op(d.key(n, 'r'), n.op, cluster='removed', ghost=True,
                         detail=', '.join(o.name for o in n.outputs))
            hl = {d._keys[id(n)] for n in added if id(n) in d._keys}     # (a fused node's key is its cluster)
            for n in added:                          # ... and the added node's outputs / the cluster's inside
                hl.update(d._keys[id(o)] for o in n.outputs if d._keys.get(id(o)) in d.vertices)
                hl.update(k for k, v in d.vertices.items() if v.get('cluster') == d._keys.get(id(n)))
            f = Frame('pass', cap, hl, graph=g, changes=ch, op=name)
            f.drawing, f.added, f.removed = d, added, removed
            frames.append(f)
            prev = g
        self.program = program
        self._setup(frames, None, max_nodes)

    def _digraph(self, f):
        return to_digraph(f.drawing, f.highlight, max_nodes=self._max_nodes, title=f'after {f.op}')


# ------------------------------------------------------------------ memory
def memory_timeline(program, ax=None):
    """A matplotlib Figure: which value lives in which buffer at each step of the program's schedule.

    Uses ``program.memory`` (``assignment`` name -> buffer, ``liveness`` name -> (first, last step),
    ``schedule``); values with the same colour row share one buffer.
    >>> fig = mg.viz.memory_timeline(mg.compile([y], [x]))    # doctest: +SKIP
    """
    try:
        import matplotlib
        import matplotlib.pyplot as plt
    except ImportError:
        raise MinigradError('memory_timeline needs matplotlib: pip install matplotlib') from None
    mem = program.memory
    assign, live = dict(getattr(mem, 'assignment', {}) or {}), dict(getattr(mem, 'liveness', {}) or {})
    schedule = list(getattr(mem, 'schedule', []) or [])
    if not assign or not live:
        raise MinigradError('memory_timeline: program.memory has no buffer assignment/liveness to plot')
    n = max(len(schedule), 1 + max((e for _, e in live.values() if e is not None), default=0))
    rows = {b: j for j, b in enumerate(dict.fromkeys(assign.values()))}
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * n + 2), 0.45 * len(rows) + 1.6))
    else:
        fig = ax.figure
    cmap = matplotlib.colormaps['tab20']
    for name, b in assign.items():
        start, end = live.get(name, (-1, None))
        end = n - 1 if end is None else end                    # outputs live to the end
        ax.barh(rows[b], end - start + 0.8, left=start - 0.4, color=cmap(rows[b] % 20), edgecolor='black',
                height=0.6, alpha=0.85)
        ax.text(start - 0.35, rows[b], name, va='center', fontsize=8)
    ax.set_yticks(list(rows.values()), [f'buffer {b}' for b in rows])
    ax.set_xticks(range(-1, n), ['inputs'] + [str(s) if len(str(s)) < 28 else str(s)[:25] + '...'
                                             for s in (schedule or range(n))], rotation=50, ha='right', fontsize=8)
    ax.set_xlabel('schedule step')
    ax.set_title(f'memory plan: {getattr(mem, "num_buffers", len(rows))} buffers, '
                 f'{getattr(mem, "peak_bytes", "?")} bytes (naive: {getattr(mem, "naive_num_buffers", "?")} '
                 f'buffers, {getattr(mem, "naive_peak_bytes", "?")} bytes)', fontsize=10)
    ax.invert_yaxis()
    fig.tight_layout()
    return fig
