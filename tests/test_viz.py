"""Drawing, rendering and steppers, headless (the real-browser test is tests/test_browser.py)."""
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import minigrad as mg
from minigrad.viz.draw import render_svg

pytest.importorskip('graphviz')
ipywidgets = pytest.importorskip('ipywidgets')


def highlighted(svg):
    """ids of the SVG groups marked as highlighted."""
    return set(re.findall(r'<g id="([^"]+)" class="node mg-highlight"', svg))


def parse(svg):
    return ET.fromstring(svg)      # raises if an attribute or tag is broken


def tape_example():
    a = mg.tensor(2.0, requires_grad=True, name='a')
    b = mg.tensor(3.0, requires_grad=True, name='b')
    with mg.Tape() as tape:
        c = a * b
        d = c + a          # a is used twice: two gradient contributions
        e = d * d
    return a, b, tape, e


def test_tape_frames_follow_tape_order_then_reverse():
    a, b, tape, e = tape_example()
    s = mg.viz.Stepper(tape)
    kinds = [f.kind for f in s.frames]
    assert kinds[0] == 'start'
    fwd = [f for f in s.frames if f.kind == 'forward']
    bwd = [f for f in s.frames if f.kind == 'backward']
    assert kinds == ['start'] + ['forward'] * len(fwd) + ['backward'] * len(bwd)
    d = s._drawing
    # forward: one frame per tape entry, in order, highlighting that entry's op and output
    assert [d.vertices[f.op]['op'] for f in fwd] == [en.op for en in tape.entries]
    for f, en in zip(fwd, tape.entries):
        assert d._keys[id(en)] == f.op and d._keys[id(en.output)] in f.highlight
    # backward: ops visited in reverse tape order
    ops = [f.op for f in bwd[1:]]
    order = [d._keys[id(en)] for en in tape.entries]
    assert [k for i, k in enumerate(ops) if i == 0 or ops[i - 1] != k] == order[::-1]
    # the SVG marks the highlighted vertices, and the marker moves with next()/prev()
    s.index = 1
    assert highlighted(s.svg) == {f'mg-{k}' for k in s.frames[1].highlight if isinstance(k, str)}
    first = highlighted(s.svg)
    s.next()
    assert s.index == 2 and highlighted(s.svg) != first
    s.prev()
    assert s.index == 1 and highlighted(s.svg) == first
    parse(s.svg)


def test_value_used_twice_gets_two_contributions_and_user_grads_untouched():
    a, b, tape, e = tape_example()
    s = mg.viz.Stepper(tape)
    ka = s._drawing._keys[id(a)]
    into_a = [f for f in s.frames if f.kind == 'backward' and f.target == ka]
    assert len(into_a) == 2
    assert 'contribution 2' in into_a[1].caption
    assert a.grad is None and b.grad is None           # the stepper computed its own gradients
    e.backward()
    np.testing.assert_allclose(into_a[0].contribution + into_a[1].contribution, a.grad.data)
    np.testing.assert_allclose(s.frames[-1].grads[ka], a.grad.data)
    np.testing.assert_allclose(s.frames[-1].grads[s._drawing._keys[id(b)]], b.grad.data)
    # the flow edge of the current contribution is highlighted in the SVG
    s.index = s.frames.index(into_a[1])
    assert 'mg-highlight-edge' in s.svg


def test_tensor_root_stepper_and_freed_graph():
    x = mg.tensor([1.0, -2.0, 3.0], requires_grad=True, name='x')
    loss = (mg.tanh(x) * x).sum()
    s = mg.viz.Stepper(loss)
    assert [f.kind for f in s.frames].count('forward') == 3      # tanh, mul, sum
    loss.backward()
    np.testing.assert_allclose(s.frames[-1].grads[s._drawing._keys[id(x)]], x.grad.data, rtol=1e-6)
    with pytest.raises(mg.MinigradError, match='retain_graph=True'):
        mg.viz.Stepper(loss)            # backward freed the saved values


def test_graph_stepper_with_feed():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(3,), name='x')
        w = mg.Variable(np.array([1.0, 2.0, 3.0], np.float32), name='w')
        loss = (x * w * x).sum()
        dw, dx = mg.gradients(loss, [w, x])
    xv = np.array([1.0, 2.0, -1.0], np.float32)
    s = mg.viz.Stepper(loss, feed_dict={x: xv})
    assert s.frames[-1].kind == 'backward'
    d = s._drawing
    want_dw, want_dx = mg.Session(g).run([dw, dx], {x: xv})
    np.testing.assert_allclose(s.frames[-1].grads[d._keys[id(w)]], want_dw)
    np.testing.assert_allclose(s.frames[-1].grads[d._keys[id(x)]], want_dx)
    fwd = [f for f in s.frames if f.kind == 'forward']
    np.testing.assert_allclose(fwd[-1].values[d._keys[id(loss)]], mg.Session(g).run(loss, {x: xv}))
    # the gradient graph itself: its steps are forward steps drawn as backward ops
    s2 = mg.viz.Stepper(dw, feed_dict={x: xv})
    assert any('backward graph' in f.caption for f in s2.frames)
    np.testing.assert_allclose([f for f in s2.frames if f.kind == 'forward'][-1].values[s2._drawing._keys[id(dw)]],
                               want_dw)


def test_widget_controls_use_python_callbacks():
    _, _, tape, _ = tape_example()
    s = mg.viz.Stepper(tape)
    assert isinstance(s, ipywidgets.Widget)
    s.next_button.click()
    assert s.index == 1 and s.slider.value == 1 and s.image.value == s.svg
    s.slider.value = 3
    assert s.index == 3 and s.frames[3].caption in s.caption.value
    s.prev_button.click()
    assert s.index == 2
    s.index = 10 ** 6
    assert s.index == len(s.frames) - 1


def test_backward_nodes_drawn_differently():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, name='x')
        y = mg.exp(x) * x
        n_forward = len(g.nodes)
        (dx,) = mg.gradients(y, [x])
    dot = mg.draw(g)
    src = dot.source
    for n in g.nodes[n_forward:]:
        if n.op not in ('constant', 'placeholder'):
            line = next(line for line in src.splitlines() if f'id="mg-{_key_of(dot, n)}"' in line)
            assert '#ffd9d9' in line                # backward op fill
    for n in g.nodes[:n_forward]:
        if n.op not in ('constant', 'placeholder'):
            line = next(line for line in src.splitlines() if f'id="mg-{_key_of(dot, n)}"' in line)
            assert '#e6e6ff' in line
    assert 'style=dashed' in src


def _key_of(dot, node):
    from minigrad.viz.draw import from_graph
    d, _ = from_graph(node.graph)
    return d._keys[id(node)]


@pytest.mark.parametrize('name', ['say "hi"', 'back\\slash', 'two\nlines', '<script>alert(1)</script>',
                                  'a & b > c', "it's", '"><svg onload=alert(1)>', '\\N \\G', 'x]; y ['])
def test_labels_are_escaped(name):
    t = mg.tensor([1.0, 2.0], requires_grad=True, name=name)
    y = t * 2
    svg = render_svg(mg.draw(y))
    assert '<script' not in svg and '<svg onload' not in svg
    root = parse(svg)
    texts = [''.join(e.itertext()) for e in root.iter() if e.tag.endswith('text')]
    shown = name.replace('\n', '\\n')          # a newline is shown as \n
    assert shown in texts                       # rendered as literal text
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, name=name)
        p + 1
    svg = mg.viz.mimebundle(g)['image/svg+xml']
    assert '<script' not in svg
    parse(svg)


def test_max_nodes_summarises():
    x = mg.tensor(1.0, requires_grad=True, name='x')
    y = x
    for _ in range(200):
        y = y * 1.0
    dot = mg.draw(y, max_nodes=40)
    assert dot.source.count('id="mg-') - dot.source.count('id="mg-e') <= 42
    assert re.search(r'\d+ more nodes not shown', dot.source)
    svg = render_svg(dot)
    parse(svg)


def test_draw_everything_and_mimebundles():
    a = mg.tensor([1.0, 2.0], requires_grad=True, name='a')
    with mg.Tape() as tape:
        y = (a * a).sum()
    y.backward()
    assert 'grad' in mg.draw(a * 1).source                       # known gradients are shown
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(2,), name='x')
        c = mg.constant(3.0, name='c')
        v = mg.Variable(np.ones(2, np.float32), name='v')
        out = x * c + v
    for obj in (tape, g, out):
        bundle = obj._repr_mimebundle_()
        assert bundle['image/svg+xml'].startswith('<svg') and 'text/plain' in bundle
    src = mg.draw(g).source
    for role_color in ('#d6f5ef', '#eeeeee', '#ffe89a', '#d4f7d4'):   # placeholder, constant, param, output
        assert role_color in src
    assert not hasattr(a, '_repr_mimebundle_') and '<pre>' in a._repr_html_()   # tensors show as text
    with pytest.raises(TypeError, match='cannot draw'):
        mg.draw(42)
    hl = mg.draw(g, highlight=[out]).source
    assert 'mg-highlight' in hl


def test_traced_function_and_cond_draw():
    f = mg.trace(lambda x: (x * 2 + 1).sum(), np.ones(3, np.float32))
    assert f._repr_mimebundle_()['image/svg+xml'].startswith('<svg')
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(3,), name='x')
        r = mg.cond(x.sum() > 0, lambda: x * 2, lambda: x + 1)
    src = mg.draw(r).source
    assert 'cluster' in src and 'true' in src
    parse(render_svg(mg.draw(r)))


def test_renderer_falls_back_to_pygraphviz(monkeypatch, tmp_path):
    pytest.importorskip('pygraphviz')
    import shutil
    monkeypatch.setenv('PATH', str(tmp_path))            # no `dot` on PATH
    assert shutil.which('dot') is None
    a = mg.tensor(1.0, requires_grad=True, name='a')
    svg = render_svg(mg.draw(a * a))
    assert svg.startswith('<svg') and 'mg-t' in svg
    parse(svg)


def test_renderer_error_says_what_to_install(monkeypatch, tmp_path):
    import sys
    monkeypatch.setenv('PATH', str(tmp_path))
    monkeypatch.setitem(sys.modules, 'pygraphviz', None)   # import fails
    with pytest.raises(mg.MinigradError, match='pip install "pygraphviz'):
        render_svg(mg.draw(mg.tensor(1.0)))
    bundle = mg.Graph()._repr_mimebundle_()
    assert 'image/svg+xml' not in bundle and 'pygraphviz' in bundle['text/plain']


# ------------------------------------------------------------------ compiler views
def _program():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(4,), name='x')
        w = mg.placeholder(mg.float32, shape=(4,), name='w')
        b = mg.placeholder(mg.float32, shape=(4,), name='b')
        y = w * x + b
        z = mg.exp(y) * 2.0 + 0.0 * x
    return mg.compile([z], [x, w, b])


def test_pass_stepper_matches_history():
    prog = _program()
    s = mg.viz.PassStepper(prog)
    assert len(s.frames) == len(prog.history)
    for f, (name, g) in zip(s.frames, prog.history):
        assert f.graph is g and f.op == name
    nodes = set(re.findall(r'<g id="(mg-[^"]+)" class="node"', s.graph_layout.base))     # the nodes drawn
    for i, f in enumerate(s.frames):
        s.index = i
        svg = s.svg
        parse(svg)
        assert highlighted(svg) == {f'mg-{k}' for k in f.highlight} & nodes
    assert any(f.changes['fused'] for f in s.frames) or 'fuse' not in [n for n, _ in prog.history]
    assert any(f.changes['removed'] for f in s.frames)


def test_program_draw_memory_and_fusion():
    prog = _program()
    bundle = prog._repr_mimebundle_() if hasattr(prog, '_repr_mimebundle_') else mg.viz.mimebundle(prog)
    assert bundle['image/svg+xml'].startswith('<svg')
    src = mg.draw(prog, color_by='buffer').source
    assert 'buffer ' in src
    if any(n.op == 'fused' for n in prog.graph.nodes):
        assert 'subgraph cluster_' in mg.draw(prog).source
    import matplotlib
    matplotlib.use('Agg')
    fig = mg.viz.memory_timeline(prog)
    assert fig.axes and 'buffer' in fig.axes[0].get_yticklabels()[0].get_text()


# ------------------------------------------------------------------ one layout per stepper
def geometry(svg):
    """What must not change from frame to frame: the canvas, and every node's position, in document order."""
    root = parse(svg)
    ns = '{http://www.w3.org/2000/svg}'
    nodes = []
    for g in root.iter(ns + 'g'):
        if (g.get('class') or '').startswith('node'):
            shape = next(c for c in g if c.tag in (ns + 'path', ns + 'polygon', ns + 'ellipse'))
            nodes.append((g.get('id'), shape.get('d') or shape.get('points') or (shape.get('cx'), shape.get('cy'))))
    return root.get('viewBox'), root.get('width'), root.get('height'), nodes


def assert_steady(stepper):
    """Every frame shows the same canvas with every node at the same place, in the same order."""
    first = None
    for i in range(len(stepper.frames)):
        stepper.index = i
        g = geometry(stepper.svg)
        first = first or g
        assert g == first, f'frame {i} moved the layout'
    assert len(first[3]) > 1


def seed_tape():
    a = mg.tensor(1.0, requires_grad=True, name='a')
    b = mg.tensor(2.0, requires_grad=True, name='b')
    with mg.Tape() as tape:
        (a + b) * (a + 1)
    return tape


def test_steppers_lay_out_once():
    import sys
    calls = []
    stepper_mod = sys.modules[mg.viz.Layout.__module__]      # the one layout every stepper renders once
    real = stepper_mod.render_svg

    def counting(dot):
        calls.append(1)
        return real(dot)
    stepper_mod.render_svg = counting
    try:
        s = mg.viz.Stepper(seed_tape())
        for i in range(len(s.frames)):
            s.index = i
            s.svg
    finally:
        stepper_mod.render_svg = real
    assert len(calls) == 1, 'graphviz must run once per stepper, not once per frame'
    assert_steady(s)
    assert len(s.frames) == 10


def test_every_stepper_is_steady():
    assert_steady(mg.viz.Stepper(seed_tape()))
    a, b, tape, e = tape_example()
    assert_steady(mg.viz.Stepper(tape))
    x = mg.tensor([1.0, -2.0, 3.0], requires_grad=True, name='x')
    assert_steady(mg.viz.Stepper((mg.tanh(x) * x).sum()))
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, shape=(3,), name='p')
        w = mg.Variable(np.array([1.0, 2.0, 3.0], np.float32), name='w')
        loss = (p * w * p).sum()
        mg.gradients(loss, [w, p])
    assert_steady(mg.viz.Stepper(loss, feed_dict={p: np.ones(3, np.float32)}))
    assert_steady(mg.viz.PassStepper(_program()))


def test_frames_restyle_hidden_dimmed_and_values():
    s = mg.viz.Stepper(seed_tape())
    svg0 = s.svg
    assert 'mg-pending' in svg0                        # ops not run yet are faded
    s.index = len(s.frames) - 1
    assert 'mg-pending' not in s.svg and 'grad 5' in s.svg
    # a value appears in the drawing only once it is computed
    s.index = 0
    assert '>3</text>' not in s.svg
    s.index = 1
    assert '>3</text>' in s.svg


def test_drawings_fit_their_cell():
    svg = render_svg(mg.draw(seed_tape()))
    root = parse(svg)
    assert 'max-width:100%' in root.get('style') and 'height:auto' in root.get('style')
    assert root.get('viewBox')                          # scaling keeps the aspect ratio
    s = mg.viz.Stepper(seed_tape())
    assert 'max-width:100%' in parse(s.svg).get('style')
    assert s.image.layout.min_width == '0'              # the drawing may shrink beside the table


def test_static_copy_of_the_current_frame():
    s = mg.viz.Stepper(seed_tape())
    s.index = 2
    bundle = s._repr_mimebundle_()
    assert 'application/vnd.jupyter.widget-view+json' in bundle
    html_ = bundle['text/html']
    assert s.svg in html_ and s.frames[2].caption.split(':')[0] in html_ and 'max-width:100%' in html_
    drawing = mg.draw(seed_tape())._repr_mimebundle_()
    assert drawing['image/svg+xml'].startswith('<svg') and drawing['text/html'] == drawing['image/svg+xml']
    assert 'text/html' in seed_tape()._repr_mimebundle_()


def test_naming_follows_the_graph_scheme():
    x = mg.tensor(1.0, requires_grad=True)
    with mg.Tape() as tape:
        y = x * x + x * 2
    names = sorted(v['name'] for v in mg.viz.Stepper(tape)._drawing.vertices.values() if v['kind'] == 'data'
                   and v['role'] != 'constant')
    assert names == ['add', 'mul', 'mul_1', 'tensor']
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, name='p')
        q = p * p + p * 2
    assert [n.outputs[0].name for n in g.nodes if n.op in ('mul', 'add')] == ['mul', 'mul_1', 'add']
    text = repr(tape)
    assert 'mul_1' in text and 't0' not in text


# ------------------------------------------------------------------ new stepper kinds
def lesson01_tape():
    w = mg.tensor(1.0, requires_grad=True, name='w')
    x = mg.tensor(2.0, requires_grad=True, name='x')
    with mg.Tape() as tape:
        a = w + x
        a.name = 'a'
        b = w + 1
        b.name = 'b'
        y = a * b
        y.name = 'y'
    return w, x, tape, y


def test_path_stepper_sums_paths():
    w, x, tape, y = lesson01_tape()
    s = mg.viz.PathStepper(tape, w)
    paths = [f for f in s.frames if f.kind == 'path']
    assert sorted(f.contribution for f in paths) == [2.0, 3.0]
    assert s.frames[-1].kind == 'sum' and s.total == 5.0 and '= 5' in s.frames[-1].caption
    y.backward(retain_graph=True)
    assert s.total == w.grad.item()
    assert mg.viz.PathStepper(tape, x).total == x.grad.item()
    for f in paths:                                   # a path frame highlights exactly one path, the rest fades
        assert f.dim and not (f.dim & {k for k in f.highlight if isinstance(k, str)})
    assert '∂ 2' in s.svg and '∂ 3' in s.svg          # edges carry their local derivatives
    assert_steady(s)
    # a value used twice: two parallel edges, two paths
    t = mg.tensor(3.0, requires_grad=True, name='t')
    with mg.Tape() as tape2:
        t * t
    assert mg.viz.PathStepper(tape2, t).total == 6.0
    with pytest.raises(mg.MinigradError, match='scalar'):
        v = mg.tensor([1.0, 2.0], requires_grad=True)
        with mg.Tape() as tape3:
            (v * v).sum()
        mg.viz.PathStepper(tape3, v)


def test_loop_stepper_pushes_and_pops_like_the_while_node():
    g = mg.Graph()
    with g.as_default():
        v0 = mg.placeholder(mg.float64, shape=(), name='v0')
        a = mg.placeholder(mg.float64, shape=(), name='a')
        i_end, v_end = mg.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, mg.tanh(a * v)),
                                     [mg.constant(0, name='i'), v0])
        dv0, da = mg.gradients(v_end, [v0, a])
    feed = {v0: 0.3, a: 1.5}
    s = mg.viz.LoopStepper(v_end, feed, names=['i', 'v'])
    want_v, want_dv0, want_da = mg.Session(g).run([v_end, dv0, da], feed)
    assert len(s.stack) == 4 and [int(st[0]) for st in s.stack] == [0, 1, 2, 3]
    np.testing.assert_allclose(s.states[-1][1], want_v)
    np.testing.assert_allclose(s.grads[0], want_dv0)
    kinds = [f.kind for f in s.frames]
    assert kinds.count('forward') == 5 and kinds.count('backward') == 6
    pushes = [f for f in s.frames if 'pushes' in f.caption]
    pops = [f for f in s.frames if f.caption.startswith('Pop')]
    assert [f.caption.split('stack[')[1][0] for f in pushes] == ['0', '1', '2', '3']
    assert [f.caption.split('stack[')[1][0] for f in pops] == ['3', '2', '1', '0']
    # the stack grows on the way forward and shrinks on the way back
    visible = [sum(1 for k in s.graph_layout.drawing.vertices if k.startswith('slot') and k not in f.hidden)
               for f in s.frames]
    assert visible[:6] == [0, 1, 2, 3, 4, 4] and visible[-1] == 0
    np.testing.assert_allclose(s.invariant_grads[0], want_da)   # `a` is read by every iteration: grads add up
    assert_steady(s)
    g2 = mg.Graph()
    with g2.as_default():
        n_end, = mg.while_loop(lambda n: n < 10, lambda n: n * 2, [mg.constant(1, name='n')])
    forward_only = mg.viz.LoopStepper(n_end)
    assert {f.kind for f in forward_only.frames} == {'start', 'forward'} and len(forward_only.stack) == 4
    with pytest.raises(mg.MinigradError, match='while_loop'):
        mg.viz.LoopStepper(v0)
    # the body also reads an int (no gradient): the invariant gradient drawn is the float value's, by its name
    g3 = mg.Graph()
    with g3.as_default():
        w0, step, c = (mg.placeholder(dt, shape=(), name=nm) for dt, nm in
                       [(mg.float64, 'w0'), (mg.int64, 'step'), (mg.float64, 'c')])
        _, w_end = mg.while_loop(lambda i, w: i < 3, lambda i, w: (i + step, w * c), [mg.constant(0, name='i'), w0])
        mg.gradients(w_end, [w0, c])
    s3 = mg.viz.LoopStepper(w_end, {w0: 1.0, step: 1, c: 2.0})
    drawn = s3.graph_layout.drawing.vertices
    assert [drawn[k]['name'] for k in s3.frames[-1].values if k.startswith('cg')] == ['grad c']
    assert s3.frames[-1].values['cg0'] == s3.invariant_grads[0] == 12.0       # d(w0 * c**3)/dc at c = 2


def test_trace_stepper_grows_the_graph_in_call_order():
    W = mg.tensor(np.ones((3, 2), np.float32), name='W')
    traced = mg.trace(lambda x: mg.tanh(x @ W).sum(axis=1), np.ones((4, 3), np.float32))
    s = mg.viz.TraceStepper(traced)
    shown = [len(s.graph_layout.drawing.vertices) - len(f.hidden) for f in s.frames]
    assert shown == sorted(shown) and shown[0] < shown[-1]          # the graph only grows
    assert s.frames[-1].hidden == set()
    ops = [n.op for n in traced.graph.nodes if n.op not in ('placeholder', 'constant', 'variable')]
    mentioned = [f.caption.split('applies ')[1].split(' ')[0] for f in s.frames if 'applies' in f.caption]
    assert mentioned == ops
    assert_steady(s)


def test_pass_stepper_keeps_data_flowing_down():
    """One layout for all snapshots: a fused cluster of a later pass must not pull a node above its input
    (graphviz ranks clusters on their own unless newrank is set)."""
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (4,), name='x')
        scale = mg.constant(2.0, name='two') * mg.constant(3.0, name='three')
        z = ((mg.exp(x * scale) + mg.exp(x * scale)) * 1.0 + 0.0) ** 2
    layout = mg.viz.PassStepper(mg.compile(z, [x])).graph_layout
    ys = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'<g id="mg-([^"]+)" class="node">.*?<text[^>]* y="([-\d.]+)"', layout.base, re.S)}
    up = [(a, b) for a, b, style, _ in layout.drawing.edges if style == 'fwd' and a in ys and b in ys
          and ys[b] <= ys[a]]
    assert not up, f'edges drawn upward: {up}'
