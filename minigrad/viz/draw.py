"""Drawing: every graph in the course (tape, Tensor, Graph, traced function, Program) in one visual language.

Each object is first turned into a small `Drawing` (data vertices, op vertices,
edges, clusters), which `to_digraph` styles into a ``graphviz.Digraph`` (a subclass that Jupyter
displays through `render_svg`: the `dot` program, else the Graphviz bundled in the pygraphviz wheel,
else, in Pyodide (the JupyterLite site), @viz-js/viz in the kernel's worker):

* data: rounded boxes with name, dtype/shape, value preview and (red) grad.
  Colour tells the role: leaf (blue), parameter/variable (gold), placeholder
  (cyan, house shape), constant (grey), output (green, double border).
* ops: ellipses; backward (gradient) ops are pink with red dashed edges.
* fused groups and sub-graphs (cond/while bodies) are dashed clusters.
* every vertex has the SVG id ``mg-<key>``; highlighted ones get class ``mg-highlight``.
"""
from __future__ import annotations

import functools
import html
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import threading

import numpy as np

from ..core.primitive import OPS, fmt_shape, hooks
from ..core.names import Names
from ..core.validate import check_int
from ..core.errors import MinigradError, InputError
from ..core.graph import CONSTANT, Graph, PLACEHOLDER, SOURCES, Symbol, needed_nodes, where_text
from ..nn.modules import Parameter
from ..core.tensor import Tape, TapeNode, Tensor, _tape_order, is_stand_in
from .vizjs import load_renderer, render as _vizjs_svg  # noqa: F401 (load_renderer: minigrad.viz.load_renderer)

ROLE_STYLE = {   # role -> graphviz attributes of a data vertex
    'value': dict(fillcolor='white'),
    'leaf': dict(fillcolor='#cfe8ff'),
    'param': dict(fillcolor='#ffe89a', penwidth='1.6'),
    'placeholder': dict(fillcolor='#d6f5ef', shape='invhouse', style='filled'),
    'constant': dict(fillcolor='#eeeeee', color='#888888', fontcolor='#555555'),
    'output': dict(fillcolor='#d4f7d4', peripheries='2'),
    'grad': dict(fillcolor='#fff0f0', color='#c03030'),
}
BUFFER_COLORS = ['#8dd3c7', '#ffffb3', '#bebada', '#fb8072', '#80b1d3', '#fdb462', '#b3de69',
                 '#fccde5', '#d9d9d9', '#bc80bd', '#ccebc5', '#ffed6f']
HL = '#ff8c00'
BWD = '#c03030'


class Drawing:
    """What to draw, before styling: vertices (in topological order), edges and clusters."""

    def __init__(self):
        self.vertices: dict[str, dict] = {}
        self.edges: list[tuple[str, str, str, str | None]] = []   # (src, dst, style, label); style is one of
        # 'fwd', 'bwd' (gradient graph), 'flow' (a gradient on its way), 'note', 'back' (a loop), 'invis'
        self.clusters: dict[str, dict] = {}                       # id -> {label, style}
        self._keys: dict[int, str] = {}
        self.objects: dict[str, object] = {}                     # key -> its object (kept alive: keys use id())

    def key(self, obj, prefix='v') -> str:
        k = self._keys.get(id(obj))
        if k is None:
            k = self._keys[id(obj)] = f'{prefix}{len(self._keys)}'
            self.objects[k] = obj
        return k

    def data(self, key, name, shape=None, dtype=None, value=None, grad=None, role='value', cluster=None):
        self.vertices[key] = dict(kind='data', name=name, shape=shape, dtype=dtype, value=value, grad=grad,
                                  role=role, cluster=cluster)
        return key

    def op(self, key, op, backward=False, cluster=None, detail='', where=''):
        self.vertices[key] = dict(kind='op', op=op, backward=backward, cluster=cluster, detail=detail, where=where)
        return key

    def edge(self, a, b, style='fwd', label=None):
        self.edges.append((a, b, style, label))


# ------------------------------------------------------------------ labels
def esc(s) -> str:
    """Text for an HTML-like label: markup escaped, newlines shown as \\n; graphviz still expands \\N,
    \\G, ... there, so backslashes are doubled (it turns \\\\ back into one)."""
    s = str(s).replace('\\', '\\\\').replace('\n', '\\\\n').replace('\r', '\\\\r').replace('\t', '\\\\t')
    s = ''.join(c if c.isprintable() else '?' for c in s)
    return html.escape(s, quote=True)


def preview(v, width=28) -> str:
    """A short one-line preview of an array's values."""
    if v is None:
        return ''
    if isinstance(getattr(v, 'data', None), np.ndarray):
        v = v.data
    a = np.asarray(v)
    if a.dtype == object:
        return '?'
    if a.size == 1:
        x = a.reshape(()).item()
        return f'{x:.4g}' if isinstance(x, float) else str(x)
    s = np.array2string(a, precision=3, separator=' ', threshold=6, edgeitems=2, max_line_width=10 ** 6)
    s = re.sub(r'\s+', ' ', s)
    if len(s) > width:
        if a.dtype.kind in 'fiu' and a.size:
            s = f'mean {a.mean():.3g}, max {a.max():.3g}'
        else:
            s = s[:width - 3] + '...'
    return s


def shape_text(shape, dtype) -> str:
    short = {'float32': 'f32', 'float64': 'f64', 'int64': 'i64', 'int32': 'i32', 'bool': 'bool'}
    return f'{short.get(str(dtype), str(dtype)) if dtype is not None else ""} {fmt_shape(shape)}'.strip()


def _data_label(v, value, grad, buf):
    rows = [f'<b>{esc(v["name"])}</b>']
    if v['shape'] is not None or v['dtype'] is not None:       # nothing known: no '?' row
        rows.append(f'<font point-size="9">{esc(shape_text(v["shape"], v["dtype"]))}</font>')
    if value is not None:
        rows.append(f'<font face="Courier" point-size="10">{esc(preview(value))}</font>')
    if grad is not None:
        rows.append(f'<font face="Courier" point-size="10" color="{BWD}">grad {esc(preview(grad))}</font>')
    if buf is not None:
        rows.append(f'<font point-size="9">buffer {esc(buf)}</font>')
    return '<' + '<br/>'.join(rows) + '>'


# ------------------------------------------------------------------ Drawing -> graphviz
def to_digraph(d: Drawing, highlight=(), values=None, grads=None, buffers=None, max_nodes=150, title=None,
               rankdir='TB', tooltips=False):
    """Style a Drawing. ``values``/``grads``/``buffers`` map vertex keys to overrides (steppers use them);
    ``highlight`` is a set of vertex keys (a stepper's frames highlight edges and clusters on its Layout);
    ``tooltips``: an op shows where it was defined on hover (graphviz then wraps each node in a link,
    so steppers, which restyle the SVG, leave it off)."""
    try:
        import graphviz
    except ImportError:
        raise MinigradError('drawing graphs needs the graphviz Python package: pip install graphviz') from None
    hl = set(highlight or ())
    # newrank: rank clusters with the rest, else a fused cluster can pull a node above its input
    dot = digraph_class()(graph_attr=dict(rankdir=rankdir, fontname='Helvetica', fontsize='11', nodesep='0.25',
                                          ranksep='0.35', labelloc='t', newrank='true'),
                          node_attr=dict(fontname='Helvetica', fontsize='11', margin='0.08,0.04', height='0.3'),
                          edge_attr=dict(color='#555555', arrowsize='0.7', fontname='Helvetica', fontsize='9'))
    if title:
        dot.attr(label=f'<{esc(title)}>')
    keys = list(d.vertices)
    # over max_nodes: keep the end of the graph (the outputs), plus anything highlighted
    hidden = set(keys[:-max_nodes]) - hl if max_nodes is not None and len(keys) > max_nodes else set()
    shown = [k for k in keys if k not in hidden]
    clusters, colors = {}, {}
    for k in shown:
        v = d.vertices[k]
        attrs = {'id': f'mg-{k}', **(_op_attrs(v, tooltips) if v['kind'] == 'op'
                                     else _data_attrs(v, k, values, grads, buffers, colors))}
        if k in hl:
            attrs.update({'color': HL, 'penwidth': '3', 'class': 'mg-highlight'})
        c = v.get('cluster')
        if c is not None and c not in clusters:
            clusters[c] = _cluster(graphviz, c, d.clusters.get(c, {}))
        (dot if c is None else clusters[c]).node(k, **attrs)
    for c, sub in clusters.items():
        clusters.get(d.clusters.get(c, {}).get('parent'), dot).subgraph(sub)
    if hidden:
        note = f'... {len(hidden)} more nodes not shown (earlier in the graph; pass max_nodes= to see more)'
        dot.node('mg_more', label=f'<{esc(note)}>', shape='note', style='filled', fillcolor='#f5f5f5', id='mg-more')
    noted = set()                       # a shown vertex with inputs hidden gets one edge from the note
    for n, (a, b, style, label) in enumerate(d.edges):
        if a in hidden and b not in hidden and b not in noted:
            noted.add(b)
            dot.edge('mg_more', b, style='dotted', color='#999999')
        if a in hidden or b in hidden:
            continue
        attrs = {'id': f'mg-e{n}', **EDGE_STYLE.get(style, {})}
        if label:
            attrs['label'] = f'<{esc(label)}>'
        dot.edge(a, b, **attrs)
    return dot


EDGE_STYLE = {'bwd': dict(color=BWD, style='dashed'),
              'flow': dict(color=BWD, style='dashed', constraint='false', fontcolor=BWD),
              'note': dict(style='dotted', color='#999999', arrowhead='none'),
              'back': dict(style='dashed', constraint='false', color='#888888', fontcolor='#888888'),  # a loop's way back: not used to rank
              'invis': dict(style='invis', weight='10')}    # only there to shape the layout (e.g. stack a column)


def _cluster(graphviz, c, info):
    sub = graphviz.Digraph(name=f'cluster_{c}')
    sub.attr(label=f'<<i>{esc(info.get("label", c))}</i>>', style='dashed,rounded',
             color=info.get('color', '#7a5cc0'), fontcolor=info.get('color', '#7a5cc0'), id=f'mg-{c}')
    return sub


def _op_attrs(v, tooltips):
    attrs = dict(shape='ellipse', style='filled', label=f'<<b>{esc(v["op"])}</b>'
                 + (f'<br/><font point-size="9">{esc(v["detail"])}</font>' if v['detail'] else '') + '>')
    attrs.update(dict(fillcolor='#ffd9d9', color=BWD, fontcolor='#800000') if v['backward']
                 else dict(fillcolor='#e6e6ff', color='#5555aa'))
    if tooltips and v.get('where'):     # shown on hover
        attrs['tooltip'] = f'{v["op"]}, {v["where"]}'
    return attrs


def _data_attrs(v, k, values, grads, buffers, colors):
    role = v['role']
    attrs = {'shape': 'box', 'style': 'rounded,filled', **ROLE_STYLE.get(role, {})}
    value = v['value'] if values is None else values.get(k, v['value'] if role == 'constant' else None)
    grad = v['grad'] if grads is None else grads.get(k)
    buf = None if buffers is None else buffers.get(k)
    if buf is not None:                 # one colour per buffer, so values sharing memory share a colour
        attrs['fillcolor'] = colors.setdefault(buf, BUFFER_COLORS[len(colors) % len(BUFFER_COLORS)])
    attrs['label'] = _data_label(v, value, grad, buf)
    return attrs


# ------------------------------------------------------------------ rendering
_INSTALL = ('rendering a graph needs Graphviz. Install either the pygraphviz wheel, which bundles the '
            'Graphviz libraries:  pip install "pygraphviz>=2.0.4"  or the `dot` program: '
            'apt-get install graphviz / brew install graphviz / conda install graphviz')

def renderer() -> str:
    """Which Graphviz draws: 'dot' (the program on PATH), 'pygraphviz' (the wheel's bundled libraries) or,
    only in Pyodide with neither, 'vizjs'; MinigradError with install advice when there is none."""
    if shutil.which('dot'):
        return 'dot'
    if importlib.util.find_spec('pygraphviz') is not None:
        return 'pygraphviz'
    if sys.platform == 'emscripten':
        return 'vizjs'
    raise MinigradError(_INSTALL)


def render_svg(dot) -> str:
    """SVG text for a graphviz.Digraph (or dot source): the `dot` program if on PATH, else pygraphviz, else (in
    Pyodide) viz.js."""
    src = dot if isinstance(dot, str) else dot.source
    return finish_svg(RENDERERS[renderer()](src))


def finish_svg(svg: str) -> str:
    """The SVG every renderer returns, made embeddable: no XML prolog, plain ids/classes, fits its cell."""
    svg = svg[svg.find('<svg'):]            # drop the XML prolog/doctype: embeddable in HTML
    # graphviz writes '-' in ids as '&#45;'; keep ids/classes plain so CSS and tests can find them
    svg = re.sub(r'\b(id|class)="([^"]*)"', lambda m: m.group(0).replace('&#45;', '-'), svg)
    # inline SVG (also the text/html copy) shrinks to its cell: width auto, the viewBox keeps the aspect ratio
    return svg.replace('<svg ', '<svg style="max-width:100%;height:auto" ', 1)


def _dot_svg(src: str) -> str:
    import graphviz
    return graphviz.Source(src).pipe(format='svg', encoding='utf-8')


_STDERR_LOCK = threading.Lock()           # fd 2 is process-wide: one redirect at a time


def _pygraphviz_svg(src: str) -> str:
    """Lay out and render with the Graphviz libraries bundled in the pygraphviz wheel."""
    try:
        import pygraphviz
    except ImportError:
        raise MinigradError(_INSTALL) from None
    # The bundled C libraries write to file descriptor 2 (e.g. an older fontconfig warning about the
    # system's font config), which Jupyter shows under every drawing: capture it, report it on failure.
    with _STDERR_LOCK, tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            return pygraphviz.AGraph(string=src).draw(format='svg', prog='dot').decode('utf-8')
        except ValueError as e:             # pygraphviz.DotError and its layout/render errors
            err.seek(0)
            raise MinigradError(f'Graphviz (pygraphviz) could not draw this graph: {e}\n'
                                f'{err.read().decode("utf-8", "replace").strip()}') from e
        finally:
            os.dup2(saved, 2)
            os.close(saved)


RENDERERS = {'dot': _dot_svg, 'pygraphviz': _pygraphviz_svg, 'vizjs': _vizjs_svg}   # renderer() -> its function


@functools.cache
def digraph_class():
    """The graphviz.Digraph subclass mg.draw returns (made on first use: graphviz is imported lazily)."""
    import graphviz

    class Digraph(graphviz.Digraph):
        """A graphviz.Digraph that Jupyter displays through minigrad's renderer, so it works without `dot`."""

        def _repr_image_svg_xml(self) -> str:
            return render_svg(self)

        _repr_svg_ = _repr_image_svg_xml

        def _repr_mimebundle_(self, include=None, exclude=None, **_):
            kinds = [k for k in ('image/svg+xml', 'text/html', 'text/plain')
                     if (include is None or k in include) and k not in (exclude or ())]
            svg = render_svg(self) if set(kinds) - {'text/plain'} else None
            found = {'image/svg+xml': svg, 'text/html': svg, 'text/plain': repr(self)}
            # Live, the HTML copy is shown: inline SVG keeps hover titles and fits the cell. Untrusted (a fresh
            # clone, Binder, JupyterLite) it would be sanitized to text, so stored notebooks keep PNG + SVG instead
            # (scripts/static_outputs.py): no PNG here, as rendering one needs a rasterizer the learner lacks.
            return {k: found[k] for k in kinds}

    Digraph.__module__, Digraph.__qualname__ = __name__, 'Digraph'   # importable: pickle finds it
    return Digraph


def __getattr__(name):
    if name == 'Digraph':
        return digraph_class()
    raise AttributeError(f'module {__name__} has no attribute {name!r}')


def mimebundle(obj) -> dict:
    """What Graph, Symbol, Tape, Program and traced functions show in Jupyter: SVG (also as HTML) plus text."""
    text = repr(obj)
    try:
        return {**draw(obj)._repr_mimebundle_(), 'text/plain': text}
    except Exception as e:          # never break display: fall back to text and say why
        return {'text/plain': f'{text}\n(drawing unavailable: {e})'}


hooks.display = mimebundle      # Tensor, Graph, Symbol, Program... show themselves through this


# ------------------------------------------------------------------ builders
def _tensor_vertex(d, key, t, name):
    role = 'param' if isinstance(t, Parameter) else 'leaf' if t.requires_grad else 'constant'
    d.data(key, name, t.shape, t.dtype, t.data, t.grad, role)


class Step:
    """One computed op, for drawing and stepping: its vertex, inputs/outputs (keys) and values."""
    __slots__ = ('key', 'prim', 'params', 'ins', 'needs', 'in_vals', 'outs', 'out_vals', 'backward', 'src')

    def __init__(self, key, prim, params, ins, needs, in_vals, outs, out_vals, backward=False, src=None):
        self.key, self.prim, self.params, self.ins, self.needs = key, prim, params, ins, needs
        self.in_vals, self.outs, self.out_vals, self.backward, self.src = in_vals, outs, out_vals, backward, src


def _const_vertex(d, owner_key, i, value):
    return d.data(f'{owner_key}c{i}', preview(value, 12) or 'const', np.shape(value),
                  np.asarray(value).dtype, value, role='constant')


def from_tensor(root, need_values=False):
    """Drawing + steps of the graph that produced `root` (walks grad_fn TapeNodes)."""
    d = Drawing()
    if root.grad_fn is None:
        _tensor_vertex(d, d.key(root, 't'), root, root.name or 'tensor')
        return d, []
    order = _tape_order(root.grad_fn)[0][::-1]         # producers first
    vals = {id(root.grad_fn): root.data}
    for node in order:
        if node.saved is not None:
            for p, v in zip(node.parents, node.saved):
                if type(p) is TapeNode and not is_stand_in(v):
                    vals.setdefault(id(p), v)
    if need_values and any(n.saved is None for n in order):
        raise MinigradError('this graph was freed by backward(), so its intermediate values are gone. Call '
                            'backward(retain_graph=True) (or build the Stepper before backward), or record the ops '
                            'with `with mg.Tape() as tape:` and step through the tape instead.')
    if need_values and any(is_stand_in(v) for n in order for v in n.saved):
        raise MinigradError('this graph kept only the shape of inputs of 64 KiB or more that no gradient reads, '
                            'so their values are gone. Step through a smaller example, or record the ops with '
                            '`with mg.Tape() as tape:` and step through the tape instead.')
    steps = []
    retained = [n.retained() if n.retained is not None else None for n in order]     # the op's output Tensor
    names = Names([t.name for t in retained + [root] if t is not None and t.name] +
                  [p.name for n in order for p in n.parents if p is not None and type(p) is not TapeNode and p.name])
    for node, kept in zip(order, retained):
        ok = d.key(node, 'o')
        ins, needs, in_vals = [], [], []
        for j, p in enumerate(node.parents):
            v = node.saved[j] if node.saved is not None and not is_stand_in(node.saved[j]) else None
            if p is None:
                k = _const_vertex(d, ok, j, v) if v is not None else None
            elif type(p) is TapeNode:
                k = d.key(p, 'o') + 'v'
            else:
                k = d.key(p, 't')
                if k not in d.vertices:
                    _tensor_vertex(d, k, p, names(p.name, 'tensor'))
            ins.append(k), needs.append(p is not None), in_vals.append(v)
            if k is not None:
                d.edge(k, ok)
        d.op(ok, node.prim.name)
        ov = vals.get(id(node))
        t = root if node is root.grad_fn else kept         # the op's output Tensor, if it is still alive
        d.data(ok + 'v', names(t.name if t is not None else None, node.prim.name),
               np.shape(ov) if ov is not None else None, None if ov is None else np.asarray(ov).dtype,
               ov, t.grad if t is not None else None, 'output' if node is root.grad_fn else 'value')
        d.edge(ok, ok + 'v')
        steps.append(Step(ok, node.prim, node.params, ins, needs, in_vals, [ok + 'v'], [ov]))
    return d, steps


def from_tape(tape, root=None):
    """Drawing + steps of a Tape's entries (each op, in the order it ran)."""
    d = Drawing()
    produced = {id(e.output) for e in tape.entries}
    last = root if root is not None else tape.entries[-1].output if tape.entries else None
    names = Names(t.name for e in tape.entries for t in (e.output, *e.inputs) if isinstance(t, Tensor) and t.name)
    steps = []
    for e in tape.entries:
        ok = d.key(e, 'o')
        ins = []
        for j, x in enumerate(e.inputs):
            k = d.key(x, 't') if isinstance(x, Tensor) else _const_vertex(d, ok, j, x)
            if k not in d.vertices and id(x) not in produced:      # an input tensor, drawn once
                _tensor_vertex(d, k, x, names(x.name, 'tensor'))
            ins.append(k)
            d.edge(k, ok)
        needs = [isinstance(x, Tensor) and x.requires_grad and x.dtype.kind == 'f' for x in e.inputs]
        in_vals = [x.data if isinstance(x, Tensor) else x for x in e.inputs]
        d.op(ok, e.op)
        y = e.output
        yk = d.key(y, 't')
        d.data(yk, names(y.name, e.op), y.shape, y.dtype, y.data, y.grad, 'output' if y is last else 'value')
        d.edge(ok, yk)
        steps.append(Step(ok, OPS[e.op], e.params, ins, needs, in_vals, [yk], [y.data]))
    return d, steps


def _sub_graphs(node):
    """(param name, Graph) pairs of a node: fused groups, cond branches, while bodies."""
    out = []
    for k, v in node.params.items():
        if isinstance(v, Graph):
            out.append((k, v))
        elif isinstance(v, (list, tuple)):
            out += [(f'{k}[{i}]', g) for i, g in enumerate(v) if isinstance(g, Graph)]
    return out


SOURCE_ROLES = {PLACEHOLDER: ('placeholder', None), CONSTANT: ('constant', 'value')}   # role, param with its value


def from_graph(graph, fetch=None, grad_nodes=None, d=None, cluster=None, env=None):
    """Drawing + steps of a static Graph (only what `fetch`, a list of Symbols, needs, if given).

    Nodes created by mg.gradients are drawn as backward ops (graph.grad_nodes holds their ids)."""
    top = d is None
    d = d or Drawing()
    env = {} if env is None else env                  # id(Symbol) -> vertex key (sub-graphs map inputs)
    grad_nodes = graph.grad_nodes if grad_nodes is None else grad_nodes
    nodes = needed_nodes(graph, fetch) if fetch else graph.nodes
    used = {id(i) for n in nodes for i in n.inputs}
    outs = {id(s) for s in (fetch or graph.outputs)}
    steps = []
    for n in nodes:
        bwd = id(n) in grad_nodes
        ok = d.key(n, 'n')
        if n.prim in SOURCES:                          # a placeholder, constant or variable: only its value
            role, param = SOURCE_ROLES.get(n.prim, ('param', 'initial_value'))     # a variable: 'param'
            for o in n.outputs:
                if id(o) not in env:                   # (a sub-graph input is drawn as the outer value)
                    d.data(d.key(o, 's'), o.name, o.shape, o.dtype, n.params.get(param), None, role, cluster)
            continue
        subs = _sub_graphs(n)
        if n.prim.kind == 'compiler' and len(subs) == 1 and len(subs[0][1].inputs) == len(n.inputs):
            steps.append(_fused_group(d, n, subs[0][1], ok, cluster, env, outs, bwd))
            continue
        detail = ', '.join(f'{k}={v}' for k, v in n.params.items() if k in ('axis', 'shape', 'axes') and v is not None)
        d.op(ok, n.op, backward=bwd, cluster=cluster, detail=detail, where=where_text(n))
        ins = [env.get(id(i)) or d.key(i, 's') for i in n.inputs]
        for k in ins:
            d.edge(k, ok, 'bwd' if bwd else 'fwd')
        for name, sub in subs:
            c = f'{ok}_{re.sub(r"[^A-Za-z0-9_]", "_", name)}'
            d.clusters[c] = dict(label=f'{n.op}: {name}', parent=cluster)
            before = len(d.vertices)
            from_graph(sub, None, None, d, c, env={id(i): d._keys[id(o)] for o, i in sub.captures if id(o) in d._keys})
            if len(d.vertices) > before:
                d.edge(ok, list(d.vertices)[before], 'note')
        keys = [env.get(id(o)) or d.key(o, 's') for o in n.outputs]
        for o, k in zip(n.outputs, keys):
            role = ('output' if top and (id(o) in outs or id(o) not in used and not graph.outputs)
                    else 'grad' if bwd else 'value')
            d.data(k, o.name, o.shape, o.dtype, None, None, role, cluster)
            d.edge(ok, k, 'bwd' if bwd else 'fwd')
        needs = [i.dtype.kind == 'f' for i in n.inputs]
        steps.append(Step(ok, n.prim, n.params, ins, needs, None, keys, None, bwd, n))
    return d, steps


def _fused_group(d, n, sub, ok, cluster, env, outs, bwd):
    """A fused group drawn as its inside in a cluster; returns its Step."""
    kind = n.params.get('kind')
    d.clusters[ok] = dict(label=f'{n.op} kernel' + (f' ({kind})' if isinstance(kind, str) else ''), parent=cluster)
    inner = {id(s): env.get(id(i), d.key(i, 's')) for s, i in zip(sub.inputs, n.inputs)}
    from_graph(sub, None, set(), d, ok, env=inner)
    for o, so in zip(n.outputs, sub.outputs):
        env[id(o)] = inner.get(id(so)) or d.key(so, 's')
        d.vertices[env[id(o)]]['role'] = 'output' if id(o) in outs else 'grad' if bwd else 'value'
    return Step(ok, n.prim, n.params, list(inner.values()),
                [i.dtype.kind == 'f' for i in n.inputs], None, [env[id(o)] for o in n.outputs], None, bwd, n)


# ------------------------------------------------------------------ mg.draw
def as_graph(obj):
    """(graph, fetch) for a Graph, Symbol, traced function or Program; None otherwise."""
    if isinstance(obj, Graph):
        return obj, None
    if isinstance(obj, Symbol):
        return obj.graph, [obj]
    g = getattr(obj, 'graph', None)
    if isinstance(g, Graph):          # traced function or Program: draw what its outputs need
        outs = [o for o in (getattr(obj, 'outputs', None) or []) if isinstance(o, Symbol) and o.graph is g]
        return g, outs or None
    return None


def draw(obj, highlight=(), max_nodes=150, color_by=None, title=None, rankdir='TB'):
    """Draw a Tensor's graph, a Tape, a Graph/Symbol, a traced function or a Program (a graphviz.Digraph).

    ``highlight``: Tensors/Symbols/Nodes to emphasise; ``max_nodes``: summarise bigger
    graphs; ``color_by='buffer'`` colours a Program's values by memory buffer.

    >>> import minigrad as mg
    >>> a = mg.tensor(2.0, requires_grad=True, name='a'); y = a * a
    >>> mg.draw(y).source.count('->')
    3
    """
    if rankdir not in ('TB', 'LR', 'BT', 'RL'):
        raise InputError(f"mg.draw: rankdir must be 'TB' (top to bottom), 'LR', 'BT' or 'RL', got {rankdir!r}")
    if max_nodes is not None:
        check_int(max_nodes, 'mg.draw: max_nodes', low=1)
    if color_by not in (None, 'buffer'):
        raise InputError(f"mg.draw: color_by must be None or 'buffer', got {color_by!r}")
    buffers = None
    if isinstance(obj, Tensor):
        d, _ = from_tensor(obj)
    elif isinstance(obj, Tape):
        d, _ = from_tape(obj)
    else:
        gf = as_graph(obj)
        if gf is None:
            raise InputError(f'mg.draw: cannot draw a {type(obj).__name__}; pass a Tensor, Tape, Graph, Symbol, '
                             f'traced function or Program')
        d, _ = from_graph(*gf)
        if color_by == 'buffer':      # a Program's memory plan gives each value's buffer by name (fused ones too)
            assign = obj.memory.assignment if hasattr(obj, 'memory') else {}
            buffers = {k: assign[s.name] for k, s in d.objects.items() if isinstance(s, Symbol) and s.name in assign}
    keys = [d._keys.get(id(getattr(h, 'grad_fn', None) or h)) for h in highlight or ()]
    hl = {x for k in keys for x in (k, f'{k}v') if x in d.vertices}      # a Tensor's op and the op's output
    if title is None and isinstance(getattr(obj, 'backend', None), str):      # a Program says how it runs
        title = f'compiled program, {obj.backend} backend'
    return to_digraph(d, hl, buffers=buffers, max_nodes=max_nodes, title=title, rankdir=rankdir, tooltips=True)
