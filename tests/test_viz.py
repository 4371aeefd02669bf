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
    if not hasattr(mg, 'compile'):
        pytest.skip('the compiler (mg.compile) is not available yet')
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
    for i, f in enumerate(s.frames):
        s.index = i
        svg = s.svg
        parse(svg)
        assert highlighted(svg) == {f'mg-{k}' for k in f.highlight if k in f.drawing.vertices}
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
