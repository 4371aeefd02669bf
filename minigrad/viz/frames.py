"""What every stepper shares: a stepper is a list of `Frame`s drawn on ONE layout.

Everything any frame shows (every node, edge and cluster) is laid out once by graphviz (`Layout`), and a
frame only restyles that SVG: it highlights, hides, ghosts or dims vertices and fills in the values and
gradients known at that moment. So the canvas and every node keep their place while you step. `Player`
gives each stepper ``.next()``, ``.prev()``, ``.index``, ``.frames`` and ``.svg`` (they work without a
browser) and, with ipywidgets, Play, a slider, Prev/Next, the caption and a side table.

The steppers, one file each: stepper.py (`Stepper`: forward then backward pass), pass_stepper.py
(`PassStepper`: compiler passes), path_stepper.py (`PathStepper`: a derivative as a sum over paths),
loop_stepper.py (`LoopStepper`: a while_loop's stack), trace_stepper.py (`TraceStepper`: a tracer at
work); memory.py plots a program's memory plan.
"""
from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

from ..core.errors import MinigradError
from ..core.tensor import Tape, Tensor
from .draw import BWD, HL, Drawing, from_tape, from_tensor, preview, render_svg, to_digraph

try:
    import ipywidgets as W
    _Base = W.VBox
except ImportError:          # steppers still work headless (frames, next/prev, svg), just without controls
    W = None
    _Base = object

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
    ``shown_edges``: the drawing's edge numbers shown (None: all whose ends are shown); ``clusters``: cluster
    keys shown (None: all); ``title``: the graph label."""

    def __init__(self, kind, caption, highlight=(), values=None, grads=None, target=None,
                 contribution=None, op=None, graph=None, changes=None, hidden=(), ghost=(), dim=(),
                 shown_edges=None, ghost_edges=(), clusters=None, title=None):
        self.kind, self.caption, self.highlight = kind, caption, set(highlight)
        self.values, self.grads = values, grads
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
    for k, text in ((k, preview(v)) for d in dicts for k, v in d.items()):
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
            s.attrib.update({'stroke': color, 'stroke-width': width})


def _set_text(t, text, cx):
    # graphviz places HTML-label text by its start; centre it instead, so text of another width stays centred
    t.text = text
    t.attrib.update({'text-anchor': 'middle', 'x': cx})


class Layout:
    """The one graphviz layout shared by every frame of a stepper.

    The union drawing (everything any frame shows) is rendered once, with the widest text each label row takes
    in any frame; `render(frame)` restyles a copy of that SVG and never runs graphviz again, so nodes never
    move and the canvas never changes size."""

    def __init__(self, d: Drawing, frames, max_nodes=150):
        self.drawing = d
        dot = to_digraph(d, values=_widest(map(self._values, frames)), grads=_widest(f.grads or {} for f in frames),
                         max_nodes=max_nodes, title=max((f.title for f in frames if f.title), key=len, default=None))
        self.base = render_svg(dot)

    def _values(self, f) -> dict:
        if f.values is not None:
            return f.values
        return {k: v['value'] for k, v in self.drawing.vertices.items() if v.get('value') is not None}

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
            g.attrib.update({'visibility': 'hidden', 'class': 'node mg-hidden'})
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
            g.attrib.update({'opacity': '0.35', 'class': 'node mg-ghost'})
            for s in shapes:
                s.set('stroke-dasharray', '4,2')
        elif key in f.dim:
            g.attrib.update({'opacity': '0.3', 'class': 'node mg-pending'})

    def _edge(self, g, n, f):
        a, b = self.drawing.edges[n][:2]
        if f.shown_edges is not None and n not in f.shown_edges or a in f.hidden or b in f.hidden:
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
class Player(_Base):
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
        data['text/html'] = f'<div class="mg-stepper-static">{self._caption_html()}{self.svg}</div>'
        return data

    def _table(self, f) -> str:
        return ''


# ------------------------------------------------------------------ shared by Stepper and PathStepper
def from_tape_or_tensor(obj, root, who):
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


def vertex_name(d, k):
    """The name drawn on vertex `k` of drawing `d` ('?' when it is not drawn)."""
    return d.vertices[k]['name'] if k in d.vertices else '?'
