"""Step-through widgets (ipywidgets) and the memory timeline (matplotlib).

A stepper is a list of `Frame`s drawn on ONE layout: everything any frame shows (every node, edge and
cluster) is laid out once by graphviz (`Layout`), and a frame only restyles that SVG: it highlights, hides,
ghosts or dims vertices and fills in the values and gradients known at that moment. So the canvas and every
node keep their place while you step. ``.next()``, ``.prev()``, ``.index``, ``.frames`` and ``.svg`` work
without a browser; the widget adds Play, a slider, Prev/Next, the caption and a side table.

* `Stepper`: the forward pass, then the backward pass, of a tape, a tensor or a static graph;
* `PassStepper`: a Program's compiler passes, one frame per pass;
* `PathStepper`: a derivative as the sum over paths of products of local derivatives;
* `LoopStepper`: a while_loop pushing its loop variables on a stack, and its gradient popping them;
* `TraceStepper`: a tracer appending one node per op while the Python function runs.
"""
from __future__ import annotations

import copy
import html
import re
import xml.etree.ElementTree as ET

import numpy as np

from ..errors import MinigradError, InputError
from ..graph import PLACEHOLDER, VARIABLE, CONSTANT, Graph, Node, Symbol
from ..interpreter import evaluate, needed_nodes, run_graph
from ..tensor import Tape, Tensor, no_grad
from ..control import WHILE, WHILE_GRAD
from .draw import (BWD, HL, Drawing, esc, from_graph, from_tape, from_tensor, preview, render_svg,
                   svg_html, to_digraph, _as_graph, _shape_str)

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

SVG_NS = 'http://www.w3.org/2000/svg'
ET.register_namespace('', SVG_NS)                 # serialise as plain <svg>, <g>, ... (no ns0: prefixes)
ET.register_namespace('xlink', 'http://www.w3.org/1999/xlink')
_G, _TEXT = f'{{{SVG_NS}}}g', f'{{{SVG_NS}}}text'
_SHAPES = {f'{{{SVG_NS}}}{t}' for t in ('path', 'polygon', 'ellipse', 'polyline')}


class Frame:
    """One step: a caption, and how it restyles the stepper's shared layout.

    ``highlight``: vertex keys, (src, dst) pairs, edge numbers and cluster keys to emphasise;
    ``values``/``grads``: what the label rows show (vertex key -> array; ``values=None`` keeps the drawing's);
    ``hidden``/``ghost``/``dim``: vertices not there (yet, or any more), just removed, not reached yet;
    ``edges``: the extra (gradient-flow) edges shown so far; ``shown_edges``: the drawing's edge numbers shown
    (None: all whose ends are shown); ``clusters``: cluster keys shown (None: all); ``title``: the graph label."""

    def __init__(self, kind, caption, highlight=(), values=None, grads=None, edges=(), target=None,
                 contribution=None, op=None, graph=None, changes=None, hidden=(), ghost=(), dim=(),
                 shown_edges=None, ghost_edges=(), clusters=None, title=None):
        self.kind, self.caption, self.highlight = kind, caption, set(highlight)
        self.values, self.grads, self.edges = values, grads, list(edges)
        self.target, self.contribution, self.op = target, contribution, op
        self.graph, self.changes = graph, changes or {}
        self.hidden, self.ghost, self.dim = set(hidden), set(ghost), set(dim)
        self.shown_edges, self.ghost_edges = shown_edges, set(ghost_edges)
        self.clusters, self.title = clusters, title
        self.svg_text = None

    def __repr__(self):
        return f'<Frame {self.kind}: {self.caption}>'


# ------------------------------------------------------------------ one layout, restyled per frame
def _widest(dicts) -> dict:
    """key -> the widest preview of its value in any of `dicts` (the room its label row needs in every frame)."""
    best = {}
    for k, v in ((k, v) for d in dicts for k, v in d.items()):
        text = preview(v)
        if text and len(text) > len(best.get(k, '')):
            best[k] = text
    return best


def _center_x(shapes) -> str:
    xs = []
    for s in shapes:                       # an ellipse's cx, or every other number of a path or polygon
        nums = [float(v) for v in re.findall(r'-?\d+(?:\.\d+)?', s.get('cx') or s.get('d') or s.get('points') or '')]
        xs += nums[0::2]
    return f'{(min(xs) + max(xs)) / 2:.2f}' if xs else '0'


def _outline(shapes, color, width):
    for s in shapes:
        if s.get('stroke') not in (None, 'none', 'transparent'):
            s.set('stroke', color)
            s.set('stroke-width', width)


def _set_text(t, text, cx):
    # graphviz places HTML-label text by its start; centre it instead, so text of another width stays centred
    t.text = text
    t.set('text-anchor', 'middle')
    t.set('x', cx)


class Layout:
    """The one graphviz layout shared by every frame of a stepper.

    The union drawing (everything any frame shows) is rendered once, with the widest text each label row takes
    in any frame; `render(frame)` restyles a copy of that SVG and never runs graphviz again, so nodes never
    move and the canvas never changes size."""

    def __init__(self, d: Drawing, frames, extra_edges=(), max_nodes=150):
        self.drawing, self.n_base = d, len(d.edges)
        self.edges = list(d.edges) + list(extra_edges)
        dot = to_digraph(d, values=_widest(map(self._values, frames)), grads=_widest(f.grads or {} for f in frames),
                         max_nodes=max_nodes, extra_edges=extra_edges,
                         title=max((f.title for f in frames if f.title), key=len, default=None))
        self.base = render_svg(dot)
        self.vertices = set(re.findall(r'<g id="mg-([^"]+)" class="node"', self.base))

    def _values(self, f) -> dict:
        if f.values is not None:
            return f.values
        return {k: v['value'] for k, v in self.drawing.vertices.items() if v['kind'] == 'data'
                and v['value'] is not None}

    def render(self, f: Frame) -> str:
        root = ET.fromstring(self.base)
        values = self._values(f)
        for g in root.iter(_G):
            gid, cls = g.get('id', ''), g.get('class', '')
            if cls == 'graph' and f.title:
                for t in (c for c in g if c.tag == _TEXT):
                    _set_text(t, f.title, _center_x([c for c in g if c.tag in _SHAPES][:1]))
            elif gid.startswith('mg-') and cls == 'node':
                self._node(g, gid[3:], f, values)
            elif gid.startswith('mg-e') and cls == 'edge':
                self._edge(g, int(gid[4:]), f)
            elif gid.startswith('mg-') and cls == 'cluster':
                if f.clusters is not None and gid[3:] not in f.clusters:
                    g.set('visibility', 'hidden')
                elif gid[3:] in f.highlight:
                    _outline([c for c in g if c.tag in _SHAPES], HL, '2.5')
                    g.set('class', 'cluster mg-highlight-cluster')
        return ET.tostring(root, encoding='unicode')

    def _node(self, g, key, f, values):
        v = self.drawing.vertices.get(key)
        if v is None:
            return
        if key in f.hidden:
            g.set('visibility', 'hidden')
            g.set('class', 'node mg-hidden')
            return
        shapes = [c for c in g if c.tag in _SHAPES]
        if v['kind'] == 'data':
            rows = {False: ('', values.get(key, v['value'] if v['role'] == 'constant' else None)),
                    True: ('grad ', (f.grads or {}).get(key))}         # the (red) grad row is drawn in BWD
            for t in g:                            # only the value row and the grad row change
                if t.tag == _TEXT and t.get('font-family', '').startswith('Courier'):
                    prefix, shown = rows[t.get('fill') == BWD]
                    if shown is None:
                        t.text = ''                # not known yet in this frame
                        t.set('visibility', 'hidden')
                    else:
                        _set_text(t, prefix + preview(shown), _center_x(shapes))
        if key in f.highlight:
            _outline(shapes, HL, '3')
            g.set('class', 'node mg-highlight')
        elif key in f.ghost:
            g.set('opacity', '0.35')
            for s in shapes:
                s.set('stroke-dasharray', '4,2')
            g.set('class', 'node mg-ghost')
        elif key in f.dim:
            g.set('opacity', '0.3')
            g.set('class', 'node mg-pending')

    def _edge(self, g, n, f):
        a, b = self.edges[n][:2]
        # an extra (gradient-flow) edge is shown once its frame has added it; a drawing's edge as the frame says
        shown = n - self.n_base < len(f.edges) if n >= self.n_base else f.shown_edges is None or n in f.shown_edges
        if not shown or a in f.hidden or b in f.hidden:
            g.set('visibility', 'hidden')
            return
        if n in f.highlight or (a, b) in f.highlight:
            _outline([c for c in g if c.tag in _SHAPES], HL, '2.5')       # the line, and the arrowhead ...
            for c in g:
                if c.tag == _TEXT or c.tag in _SHAPES and c.get('fill') not in (None, 'none'):
                    c.set('fill', HL)                                       # ... filled, and the label
            g.set('class', 'edge mg-highlight-edge')
        elif n in f.ghost_edges or {a, b} & (f.ghost | f.dim):
            g.set('opacity', '0.3')


# ------------------------------------------------------------------ the widget
class _Player(_Base):
    """Controls shared by every stepper: Play, slider, Prev/Next, caption, drawing, side table."""

    def _setup(self, frames, layout, table=False):
        self.frames, self.graph_layout, self._index = frames, layout, 0
        if W is None:
            return
        n = len(frames) - 1
        self.play = W.Play(value=0, min=0, max=n, interval=900, description='Play')
        self.slider = W.IntSlider(value=0, min=0, max=n, description='step', continuous_update=True)
        W.jslink((self.play, 'value'), (self.slider, 'value'))
        self.prev_button = W.Button(description='◀ Prev', layout=W.Layout(width='90px')).add_class('mg-prev')
        self.next_button = W.Button(description='Next ▶', layout=W.Layout(width='90px')).add_class('mg-next')
        self.prev_button.on_click(lambda _: self.prev())
        self.next_button.on_click(lambda _: self.next())
        self.caption = W.HTML().add_class('mg-caption')           # add_class returns the widget
        # the drawing may shrink (min_width 0) so that it fits beside the table instead of scrolling sideways
        self.image = W.HTML(layout=W.Layout(flex='1 1 auto', min_width='0')).add_class('mg-svg')
        self.table = W.HTML(layout=W.Layout(flex='0 0 auto', min_width='220px', overflow='auto'))
        self.slider.observe(lambda ch: self._show(ch['new']), names='value')
        body = W.HBox([self.image, self.table] if table else [self.image], layout=W.Layout(width='100%'))
        super().__init__([W.HBox([self.play, self.prev_button, self.next_button, self.slider]), self.caption, body])
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
            f.svg_text = self.graph_layout.render(f)
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
        data['text/html'] = f'<div class="mg-stepper-static">{self._caption_html()}{svg_html(self.svg)}</div>'
        return data

    def _table(self, f) -> str:
        return ''


# ------------------------------------------------------------------ forward and backward
class Stepper(_Player):
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
        d, steps, root_key = _from_tape_or_tensor(obj, root, 'Stepper') or self._from_graph(obj, feed_dict, fetch)
        values = {k: v['value'] for k, v in d.vertices.items() if v['kind'] == 'data' and v['value'] is not None
                  and v['role'] in ('leaf', 'param', 'constant', 'placeholder')}
        frames = _frames(d, steps, values, root_key)
        self._drawing = d
        self._setup(frames, Layout(d, frames, max((f.edges for f in frames), key=len), max_nodes), table=True)

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
                g = '' if grads.get(k) is None else esc(preview(grads[k]))
                rows.append(f'<tr{style}><td><b>{esc(v["name"])}</b></td><td>{esc(preview(f.values.get(k)))}</td>'
                            f'<td style="color:#c03030">{g}</td></tr>')
        return ('<table class="mg-table" style="font-size:12px;font-family:monospace"><tr><th>name</th>'
                '<th>value</th><th>grad</th></tr>' + ''.join(rows) + '</table>')


def _from_tape_or_tensor(obj, root, who):
    """(drawing, steps, root key) of a tape or of a Tensor's graph; None for anything else."""
    if isinstance(obj, Tensor):
        d, steps = from_tensor(obj, need_values=True)
        return d, steps, steps[-1].outs[0] if steps else None
    if isinstance(obj, Tape):
        if not obj.entries:
            raise MinigradError(f'{who}: the tape is empty; run some ops inside `with mg.Tape() as tape:`')
        d, steps = from_tape(obj, root)
        return d, steps, d._keys[id(root if root is not None else obj.entries[-1].output)]
    return None


def _name(d, k):
    return d.vertices[k]['name'] if k in d.vertices else '?'


def _frames(d: Drawing, steps, values, root_key) -> list[Frame]:
    """Forward frames in step order, then backward frames (one per gradient contribution along an edge)."""
    values = dict(values)
    inputs = [k for k in values if d.vertices[k]['role'] != 'constant']
    names = ', '.join(_name(d, k) for k in inputs) or 'none'
    pending = [{s.key, *s.outs} for s in steps]         # faded until that step has run
    frames = [Frame('start', f'Before the forward pass: only the inputs have values ({names}).', inputs,
                    dict(values), dim=set().union(*pending))]
    n = len(steps)
    for i, s in enumerate(steps, 1):
        values.update(zip(s.outs, s.out_vals or ()))
        ins = ' and '.join(_name(d, k) for k in s.ins if k is not None)
        op = s.prim.name
        res = ', '.join(f'{_name(d, k)} = {preview(v)}' for k, v in zip(s.outs, s.out_vals or ()))
        kind = 'backward graph ' if s.backward else ''
        frames.append(Frame('forward', f'Forward step {i} of {n}: {kind}{op} {VERBS.get(op, f"computes {op} of")} '
                            f'{ins}, giving {res}.', {s.key, *s.outs}, dict(values), op=s.key, target=s.outs[0]
                            if s.outs else None, dim=set().union(*pending[i:])))
    if root_key is None or not steps:
        return frames
    grads, uses, edges = {root_key: np.ones_like(values[root_key])}, {}, []
    frames.append(Frame('backward', f'Backward pass starts at {_name(d, root_key)}: its gradient with respect to '
                        f'itself is 1.', {root_key}, values, dict(grads), target=root_key,
                        contribution=grads[root_key]))
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


def _stable(obj):
    """What identifies a drawn thing across compiler snapshots: passes copy nodes, keeping ops and names."""
    if isinstance(obj, Node):
        return ('op',) + _sig(obj)
    return 'val', obj.name, {'constant': 'const', 'placeholder': 'in', 'variable': 'in'}.get(obj.op, 'val')


class _Union:
    """The union of several drawings of one evolving graph, each vertex under a key stable across them."""

    def __init__(self):
        self.d, self.keys, self.edge_ids = Drawing(), {}, {}

    def add(self, d: Drawing):
        """Merge one snapshot's drawing; return the (vertex keys, edge numbers, cluster keys) it shows."""
        obj = {d._keys[id(o)]: o for o in d._keep}
        seen = set()

        def key(sig):
            while sig in seen:             # two things of one snapshot that look alike: keep both
                sig += ('again',)
            seen.add(sig)
            return self.keys.setdefault(sig, f'u{len(self.keys)}')

        cmap = {}
        for c in d.clusters:
            head, _, tail = c.partition('_')
            cmap[c] = key(('cluster', _stable(obj[head]) if head in obj else head, tail))
        kmap = {}
        for k, v in d.vertices.items():
            K = kmap[k] = key(_stable(obj[k]))
            old = self.d.vertices.get(K, {})         # a value that is fused later stays inside its kernel's box
            self.d.vertices[K] = dict(v, cluster=cmap.get(v.get('cluster')) or old.get('cluster'))
        for c, K in cmap.items():
            self.d.clusters[K] = dict(d.clusters[c], parent=cmap.get(d.clusters[c].get('parent')))
        edges, count = set(), {}
        for a, b, style, label in d.edges:
            if a not in kmap or b not in kmap:
                continue
            ident = (kmap[a], kmap[b], style)
            count[ident] = count.get(ident, -1) + 1              # the n-th parallel edge keeps its number
            if ident + (count[ident],) not in self.edge_ids:
                self.edge_ids[ident + (count[ident],)] = len(self.d.edges)
                self.d.edges.append((*ident, label))
            edges.add(self.edge_ids[ident + (count[ident],)])
        return set(kmap.values()), edges, set(cmap.values())


class PassStepper(_Player):
    """One frame per compiler pass: the graph after it, with added/fused nodes highlighted, removed ones ghosted.

    All snapshots share one layout (their union), so a node keeps its place from pass to pass and a fused
    kernel appears as a box around the nodes it swallowed.

    >>> import minigrad as mg                              # doctest: +SKIP
    >>> s = mg.viz.PassStepper(mg.compile([y], [x]))     # doctest: +SKIP
    """

    def __init__(self, program, max_nodes=150):
        if not isinstance(getattr(program, 'history', None), list):
            raise InputError(f'PassStepper: expected a compiled Program (mg.compile(outputs, inputs)), got '
                             f'{type(program).__name__} {program!r:.40}')
        history = list(program.history)
        if not history:
            raise MinigradError('PassStepper: this program has no pass history (program.history is empty)')
        union = _Union()
        shown = [union.add(from_graph(g)[0]) for _, g in history]
        everything = set(union.d.vertices)
        frames, old = [], None                      # old: the previous snapshot's nodes
        for i, (name, g) in enumerate(history):
            cur = {_sig(n): n for n in g.nodes}
            added = [n for s, n in cur.items() if old is not None and s not in old]
            removed = [n for s, n in (old or {}).items() if s not in cur]
            fused = [n for n in added if n.prim.kind == 'compiler' and n.prim.decompose is not None]
            ch = dict(added=len(added), removed=len(removed), fused=len(fused), nodes=len(g.nodes))
            cap = (f'The graph before optimisation: {len(g.nodes)} nodes.' if i == 0 else
                   f"Pass {i} of {len(history) - 1}, '{name}': removed {len(removed)} node(s), added "
                   f'{len(added)}, fused {len(fused)}; {len(g.nodes)} nodes now.')
            declined = program.stats.get('declined', {}).get(name, []) if i else []
            if declined:                             # what the pass chose not to do, and why
                cap += ' Declined: ' + '; '.join(declined[:3]) + (f' (+{len(declined) - 3} more)'
                                                                   if len(declined) > 3 else '') + '.'
            if i == len(history) - 1 and getattr(program, 'backend', None):
                cap += (f' Backend {program.backend}: ' + ('each fused group runs as one compiled loop kernel.'
                        if program.backend == 'numba' else 'each fused group runs as one numpy call per op.'))
            V, E, C = shown[i]
            pV, pE, pC = shown[i - 1] if i else (V, E, C)
            ghost, ghost_e = pV - V, pE - E
            f = Frame('pass', cap, (V - pV) | (C - pC), graph=g, changes=ch, op=name, hidden=everything - V - ghost,
                      ghost=ghost, shown_edges=E | ghost_e, ghost_edges=ghost_e, clusters=C,
                      title='the graph as built' if i == 0 else f'after {name}')
            f.added, f.removed = added, removed
            frames.append(f)
            old = cur
        self.program = program
        self._setup(frames, Layout(union.d, frames, max_nodes=max_nodes))


def pass_diff(program, pass_name) -> str:
    """The listing before and after one compiler pass, lines marked '-' (removed) and '+' (added)."""
    names = [n for n, _ in program.history]
    if pass_name not in names[1:]:
        raise MinigradError(f'pass_diff: no pass {pass_name!r} in program.history ({", ".join(names[1:])})')
    i = names.index(pass_name, 1)
    before, after = str(program.history[i - 1][1]).splitlines(), str(program.history[i][1]).splitlines()
    return '\n'.join([f'--- before {pass_name} ({len(before)} lines)']
                     + [('  ' if line in after else '- ') + line for line in before]
                     + [f'+++ after {pass_name} ({len(after)} lines)']
                     + [('  ' if line in before else '+ ') + line for line in after])


# ------------------------------------------------------------------ derivatives as sums over paths
class PathStepper(_Player):
    """A derivative as a sum over paths (lesson 01): one frame per path from `wrt` up to the output, with the
    product of the local derivatives on its edges, then the sum, which is what backward() computes.

    ``PathStepper(tape, wrt)`` or ``PathStepper(y, wrt)`` (y's graph not freed yet); scalar values only.
    Every edge into an op is labelled with its local derivative (written ∂).

    >>> import minigrad as mg
    >>> w = mg.tensor(1.0, requires_grad=True, name='w'); x = mg.tensor(2.0, requires_grad=True, name='x')
    >>> with mg.Tape() as tape:
    ...     y = (w + x) * (w + 1)
    >>> [f.contribution for f in mg.viz.PathStepper(tape, w).frames if f.kind == 'path']
    [2.0, 3.0]
    """

    def __init__(self, obj, wrt, root=None, max_paths=64, max_nodes=150):
        if not isinstance(obj, (Tape, Tensor)):
            raise InputError(f'PathStepper: expected a Tape or a Tensor, got {type(obj).__name__}')
        d, steps, root_key = _from_tape_or_tensor(obj, root, 'PathStepper')
        start = d._keys.get(id(wrt))
        if start not in d.vertices or root_key is None:
            raise MinigradError(f"PathStepper: '{getattr(wrt, 'name', wrt)}' is not an input of this graph")
        local, nxt = _local_derivatives(d, steps)
        paths, todo = [], [(start, [start], [], [])]      # depth-first, without recursion
        while todo:
            k, keys, edges, factors = todo.pop()
            if k == root_key:
                paths.append((keys, edges, factors))
                if len(paths) > max_paths:
                    raise MinigradError(f'PathStepper: more than {max_paths} paths; their number grows '
                                        f'exponentially with depth, which is why backward() never lists them')
                continue
            for n_in, n_out, s in reversed(nxt.get(k, [])):
                todo.append((s.outs[0], keys + [s.key, s.outs[0]], edges + [n_in, n_out], factors + [local[n_in]]))
        y, x = _name(d, root_key), _name(d, start)
        labelled = copy.copy(d)
        labelled.edges = [(a, b, st, f'∂ {local[n]:.4g}' if n in local else lab)
                          for n, (a, b, st, lab) in enumerate(d.edges)]
        everything = set(d.vertices)
        frames = [Frame('start', f'Each edge into an op is labelled with its local derivative ∂. ∂{y}/∂{x} is the '
                        f'sum, over every path from {x} up to {y}, of the product of the ∂ labels along the path. '
                        f'There are {len(paths)} such paths.', {start, root_key})]
        total, products = 0.0, []
        for i, (keys, edges, factors) in enumerate(paths, 1):
            prod = float(np.prod(factors))
            total += prod
            products.append(f'{prod:.4g}')
            route = ' → '.join(_name(d, k) for k in keys if d.vertices[k]['kind'] == 'data')
            frames.append(Frame('path', f'Path {i} of {len(paths)}: {route}. Product of its local derivatives: '
                                f'{" × ".join(f"{v:.4g}" for v in factors)} = {prod:.4g}. Running sum: {total:.4g}.',
                                set(keys) | set(edges), dim=everything - set(keys), target=root_key,
                                contribution=prod))
        on_paths = set().union(*(set(k) | set(e) for k, e, _ in paths))
        frames.append(Frame('sum', f'Sum over the {len(paths)} paths: {" + ".join(products) or "0"} = {total:.4g} '
                            f'= ∂{y}/∂{x}, the number backward() puts in {x}.grad.', on_paths,
                            dim=everything - {k for k in on_paths if isinstance(k, str)}, contribution=total))
        self.total = total
        self._setup(frames, Layout(labelled, frames, max_nodes=max_nodes))


def _local_derivatives(d, steps):
    """edge number -> local derivative, and data key -> [(edge in, edge out, step)] (scalar graphs only)."""
    into, local, nxt = {}, {}, {}
    for n, (a, b, _, _) in enumerate(d.edges):
        into.setdefault(b, []).append(n)
    with no_grad():
        for s in steps:
            if any(np.size(v) != 1 for v in (*s.in_vals, *s.out_vals) if v is not None):
                raise MinigradError('PathStepper: every value must be a scalar (a local derivative of a '
                                    'tensor op is a whole Jacobian); use Stepper for tensors')
            ins = [np.array(v, dtype=float) if v is not None else None for v in s.in_vals]
            out = np.array(s.out_vals[0], dtype=float)
            contrib = s.prim.vjp(tuple(s.needs), np.ones_like(out), out, *ins, **s.params)
            out_edge = next(n for n, e in enumerate(d.edges) if e[:2] == (s.key, s.outs[0]))
            edges_in = iter(into.get(s.key, []))
            for k, c, need in zip(s.ins, contrib, s.needs):
                if k is None:
                    continue
                n = next(edges_in)
                if need and c is not None:
                    local[n] = float(np.asarray(getattr(c, 'data', c)).reshape(()))
                    nxt.setdefault(k, []).append((n, out_edge, s))
    return local, nxt


# ------------------------------------------------------------------ a while_loop's stack
class LoopStepper(_Player):
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


# ------------------------------------------------------------------ a tracer at work
class TraceStepper(_Player):
    """A tracer at work (lesson 06): one frame per node, in the order the traced Python function's ops added
    them to the graph. ``TraceStepper(mg.trace(fn, *examples))`` or ``TraceStepper(graph)``."""

    def __init__(self, obj, max_nodes=150):
        found = _as_graph(obj)
        if found is None:
            raise TypeError(f'TraceStepper: expected a traced function or a Graph, got {type(obj).__name__}')
        g, fetch = found
        d, _ = from_graph(g, fetch)
        nodes = needed_nodes(g, fetch) if fetch else list(g.nodes)
        everything, frames = set(d.vertices), []
        inputs = [m for m in nodes if m.prim is PLACEHOLDER]

        def reveal(m):
            ok = d._keys.get(id(m))
            keys = {d._keys.get(id(x)) for x in (m, *m.outputs)} & set(d.vertices)
            inner = {c for c in d.clusters if ok is not None and (c == ok or c.startswith(ok + '_'))}
            return keys | {k for k, v in d.vertices.items() if v.get('cluster') in inner}

        first = set().union(*(reveal(m) for m in inputs))
        shown = set(first)
        desc = ', '.join(f'{o.name} ({_shape(o)})' for m in inputs for o in m.outputs)
        frames.append(Frame('trace', f'The tracer makes one placeholder per example input: {desc or "none"}; then it '
                            f'calls the function with them. Each op on a Symbol adds a node instead of computing.',
                            first, hidden=everything - shown))
        for count, m in enumerate((n for n in nodes if n.prim is not PLACEHOLDER), len(inputs) + 1):
            new = reveal(m) - shown
            shown |= new
            out = ', '.join(f'{o.name} ({_shape(o)})' for o in m.outputs)
            if m.prim in (CONSTANT, VARIABLE):
                cap = f'The function uses a value from outside: the tracer adds it as a {m.op}, {out}.'
            else:
                ins = ', '.join(i.name for i in m.inputs)
                cap = (f'The function applies {m.op} to {ins}: on Symbols nothing is computed; the tracer appends '
                       f'the node {out}.')
            frames.append(Frame('trace', f'{cap} Nodes so far: {count}.', new, hidden=everything - shown))
        result = ', '.join(s.name for s in (fetch or g.outputs or nodes[-1].outputs))
        frames.append(Frame('trace', f'The function returned {result}: the graph is complete. It can be run, '
                            f'compiled and differentiated without calling the Python function again.',
                            {d._keys[id(s)] for s in (fetch or []) if d._keys.get(id(s)) in d.vertices}))
        self._setup(frames, Layout(d, frames, max_nodes=max_nodes))


def _shape(s):
    return _shape_str(s.shape, s.dtype)


# ------------------------------------------------------------------ memory
def memory_timeline(program, ax=None):
    """A matplotlib Figure: which value lives in which buffer at each step of the program's schedule.

    Uses ``program.memory`` (``assignment`` name -> buffer, ``liveness`` name -> (first, last step),
    ``schedule``); values with the same colour row share one buffer.
    >>> fig = mg.viz.memory_timeline(mg.compile([y], [x]))    # doctest: +SKIP
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise MinigradError('memory_timeline needs matplotlib: pip install matplotlib') from None
    mem = getattr(program, 'memory', None)
    if mem is None:
        raise InputError(f'memory_timeline: expected a compiled Program (mg.compile(outputs, inputs)), got '
                         f'{type(program).__name__} {program!r:.40}')
    assign, live = dict(getattr(mem, 'assignment', {}) or {}), dict(getattr(mem, 'liveness', {}) or {})
    schedule = list(getattr(mem, 'schedule', []) or [])
    if not assign or not live:
        raise MinigradError('memory_timeline: program.memory has no buffer assignment/liveness to plot')
    n = max(len(schedule), 1 + max((e for _, e in live.values() if e is not None), default=0))
    rows = {b: j for j, b in enumerate(dict.fromkeys(assign.values()))}
    if ax is None:
        ax = plt.subplots(figsize=(max(6.0, 1.1 * n + 2), 0.45 * len(rows) + 1.6))[1]
    cmap = plt.colormaps['tab20']
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
    ax.figure.tight_layout()
    return ax.figure
