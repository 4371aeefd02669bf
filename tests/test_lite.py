"""The JupyterLite build of the course (issue 20): `python3 dev.py lite` -> build/lite/.

* fast: which renderer draws where (viz.js only in Pyodide), the numpy backend without numba, the
  viz.js wheel dev.py makes;
* slow: the site is built (npm + jupyterlite, ~10 s with warm caches) and its contents checked: the
  wheels, the notebooks with their setup cell, the kernel and widget extensions, the pinned Pyodide;
* browser: headless Chromium (Debian's /usr/bin/chromium, as tests/test_browser.py) runs @viz-js/viz in a
  module Web Worker, like the Pyodide kernel's, on minigrad's DOT and must give the same node ids and
  classes as the `dot` program, and a Stepper must step on that SVG;
* browser, end to end: the site runs lesson 01 in Pyodide and shows a drawing. That needs a Pyodide
  distribution with numpy (the npm `pyodide` package has only the core): set MINIGRAD_PYODIDE_URL to a local
  directory or an http(s) URL of one (of the pinned version, with its pyodide-lock.json); otherwise it skips.
"""
import functools
import http.server
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

import minigrad as mg
from test_browser import CHROMIUM, FLAGS, _ensure_browser, _free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
import dev  # noqa: E402  (dev.py at the repository root: the build under test)

SVG_NS = '{http://www.w3.org/2000/svg}'
draw_mod = importlib.import_module('minigrad.viz.draw')   # the module (minigrad.viz.draw is also a function)
vizjs = importlib.import_module('minigrad.viz.vizjs')
PINS = dev.lite_pins()


# ------------------------------------------------------------------ fast
def test_renderer_is_vizjs_only_in_pyodide(monkeypatch, tmp_path):
    monkeypatch.setenv('PATH', str(tmp_path))                  # no `dot`
    monkeypatch.setitem(sys.modules, 'pygraphviz', None)       # no pygraphviz
    with pytest.raises(mg.MinigradError, match='pip install "pygraphviz'):
        draw_mod.renderer()                                    # not Pyodide: the install advice stays
    monkeypatch.setattr(sys, 'platform', 'emscripten')
    assert draw_mod.renderer() == 'vizjs'


def test_dot_and_pygraphviz_come_before_vizjs_even_in_pyodide(monkeypatch):
    if not shutil.which('dot'):
        pytest.skip('no `dot` program on PATH (apt-get install graphviz)')
    monkeypatch.setattr(sys, 'platform', 'emscripten')
    assert draw_mod.renderer() == 'dot'
    assert draw_mod.load_renderer.__doc__ and dev.VIZJS_WHEEL_NAME == vizjs.PACKAGE


def test_load_renderer_is_a_no_op_outside_pyodide():
    assert mg.viz.load_renderer() is None


def test_like_pyodide_the_numpy_backend_is_chosen_and_named(tmp_path):
    """No numba, no dot, no pygraphviz, sys.platform 'emscripten': compile picks numpy and says so."""
    block = tmp_path / 'block'
    (block / 'numba').mkdir(parents=True)
    (block / 'numba' / '__init__.py').write_text("raise ImportError('numba is hidden by tests/test_lite.py')\n")
    code = textwrap.dedent('''
        import sys
        import minigrad as mg
        from minigrad.viz.draw import renderer
        sys.modules['pygraphviz'] = None          # not installed
        sys.platform = 'emscripten'
        assert mg.compiler.default_backend() == 'numpy'
        g = mg.Graph()
        with g.as_default():
            x = mg.placeholder(mg.float32, (3,), name='x')
            y = mg.exp(x * 2.0)
        program = mg.compile([y], [x])
        print(program.backend, renderer())
    ''')
    env = {k: v for k, v in os.environ.items() if k != 'MINIGRAD_BACKEND'}
    env['PYTHONPATH'] = os.pathsep.join([str(block), str(ROOT)])
    env['PATH'] = str(tmp_path)                                # no `dot`
    r = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ['numpy', 'vizjs']


@pytest.mark.env
def test_vizjs_wheel_is_a_valid_pure_python_wheel(tmp_path):
    js = tmp_path / 'viz-global.js'
    js.write_text('/* Viz.js 9.9.9 */ globalThis.Viz = {};\n')
    whl = dev.make_vizjs_wheel(js, '9.9.9', tmp_path)
    assert whl.name == 'minigrad_vizjs-9.9.9-py3-none-any.whl'
    target = tmp_path / 'site'
    r = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-deps', '--no-index', '--quiet',
                        '--disable-pip-version-check', '--target', str(target), str(whl)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (target / 'minigrad_vizjs' / 'viz-global.js').read_text() == js.read_text()
    assert 'VERSION = "9.9.9"' in (target / 'minigrad_vizjs' / '__init__.py').read_text()


def test_setup_cell_installs_what_the_lessons_import():
    cell = dev.LITE_SETUP_CELL
    for pkg in ('minigrad-course', 'minigrad-vizjs', 'graphviz', 'ipywidgets', 'matplotlib'):
        assert f'"{pkg}"' in cell
    assert 'loading = minigrad.viz.load_renderer()' in cell and 'await loading' in cell
    compile(cell.replace('await ', ''), 'setup-cell', 'exec')  # valid Python once top-level await is allowed


# ------------------------------------------------------------------ the built site
def _need_npm():
    if not shutil.which('npm'):
        pytest.skip('npm is missing: the JupyterLite build installs pyodide and @viz-js/viz with npm '
                    '(apt-get install npm)')


@pytest.fixture(scope='module')
def node_modules():
    _need_npm()
    return dev.lite_npm()


@pytest.fixture(scope='module')
def site(tmp_path_factory, node_modules):
    pytest.importorskip('jupyterlite_core', reason='jupyterlite-core is not installed (requirements-test.txt)')
    pytest.importorskip('jupyterlite_pyodide_kernel', reason='jupyterlite-pyodide-kernel is not installed')
    return dev.build_lite(sys.executable, out=tmp_path_factory.mktemp('lite') / 'site')


def _lite_config(site):
    return json.loads((site / 'jupyter-lite.json').read_text())['jupyter-config-data']


@pytest.mark.slow
@pytest.mark.env
def test_site_serves_the_wheels(site):
    index = json.loads((site / 'pypi' / 'all.json').read_text())
    assert {'minigrad-course', 'minigrad-vizjs', 'graphviz', 'ipywidgets', 'comm', 'jupyterlab-widgets'} <= set(index)
    whl = next((site / 'pypi').glob('minigrad_course-*-py3-none-any.whl'))      # pure Python
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith('.dist-info/METADATA'))).decode()
    assert {'minigrad/__init__.py', 'minigrad/viz/draw.py', 'minigrad/compiler/__init__.py'} <= names
    requires = [line for line in meta.splitlines() if line.startswith('Requires-Dist:') and 'extra ==' not in line]
    assert requires == ['Requires-Dist: numpy>=1.24'], 'in Pyodide only numpy may be a hard dependency'
    viz = next((site / 'pypi').glob(f'minigrad_vizjs-{PINS["viz"]}-py3-none-any.whl'))
    with zipfile.ZipFile(viz) as z:
        assert f'Viz.js {PINS["viz"]}' in z.read('minigrad_vizjs/viz-global.js')[:200].decode()
    kernel = _lite_config(site)['litePluginSettings'][dev.LITE_KERNEL_PLUGIN]
    assert any(u.startswith('./pypi/all.json') for u in kernel['pipliteUrls'])
    assert kernel['disablePyPIFallback'] is True, 'no network beyond the Pyodide package index'


# The whole course is in the site (issue 38); lesson 11 and exercises 11 are read from their stored outputs
# there (onnx is not a Pyodide package): the stated exceptions, each with its note and %%needs guards.
READ_ONLY = {'notebooks/11_deployment.ipynb', 'exercises/11_deployment_exercises.ipynb'}


def _setup_source(index, needs=None):
    cell = dev.LITE_SETUP_CELL.format(index=index, binder=dev.BINDER_URL)
    return cell + dev.LITE_NEEDS_MAGIC if needs else cell


@pytest.mark.slow
@pytest.mark.env
def test_site_has_every_lesson_and_exercise_with_its_note_and_setup_cell(site):
    files = site / 'files'
    got = sorted(str(p.relative_to(files)) for p in files.rglob('*.ipynb'))
    want = sorted(str(p.relative_to(ROOT)) for d in ('notebooks', 'exercises') for p in (ROOT / d).glob('*.ipynb'))
    assert got == want and len(got) == 22
    assert set(dev.LITE_READ_ONLY) == READ_ONLY
    index = dev.PYODIDE_INDEX.format(version=PINS['pyodide'])
    for rel in got:
        nb = json.loads((files / rel).read_text())
        src = json.loads((ROOT / rel).read_text())
        note, setup, *rest = nb['cells']
        assert note['cell_type'] == 'markdown' and note['id'] == dev.LITE_NOTE_ID, rel
        text = ''.join(note['source'])
        assert index in text and dev.BINDER_URL in text and 'python3 dev.py lab' in text, rel
        assert setup['cell_type'] == 'code' and setup['id'] == dev.LITE_SETUP_ID, rel
        needs = dev.LITE_READ_ONLY.get(rel)
        assert ''.join(setup['source']) == _setup_source(index, needs), rel
        assert 'numpy could not be loaded from the Pyodide package index' in ''.join(setup['source'])
        if needs is None:
            assert [c['source'] for c in rest] == [c['source'] for c in src['cells']], rel
            continue
        assert 'read, not run' in text, rel
        for mine, theirs in zip(rest, src['cells'], strict=True):
            guard = [f'%%needs {needs}\n'] if mine['cell_type'] == 'code' else []
            assert mine['source'] == guard + theirs['source'], rel
            assert mine.get('outputs') == theirs.get('outputs'), 'the stored outputs stay: ' + rel
    listing = json.loads((site / 'api' / 'contents' / 'notebooks' / 'all.json').read_text())
    assert '11_deployment.ipynb' in {c['name'] for c in listing['content']}
    for page in (site / 'index.html', site / 'lab' / 'index.html'):
        landing = page.read_text()
        assert f'<p id="{dev.LITE_NOTE_ID}">' in landing and index in landing and 'dev.py lab' in landing, page


@pytest.mark.slow
@pytest.mark.env
def test_site_has_the_kernel_and_widget_extensions_only(site):
    names = {e['name'] for e in _lite_config(site)['federated_extensions']}
    assert names == {'@jupyterlite/pyodide-kernel-extension', '@jupyter-widgets/jupyterlab-manager'}
    for name in names:
        assert (site / 'extensions' / name / 'package.json').exists()


@pytest.mark.slow
@pytest.mark.env
def test_site_has_no_news_pop_up(site):
    """binder/overrides.json reaches the site's settings: no "notified about official Jupyter news?" (issue 30)."""
    overrides = json.loads((ROOT / 'binder' / 'overrides.json').read_text())
    got = _lite_config(site).get('settingsOverrides', {})
    for plugin, settings in overrides.items():
        assert got.get(plugin, {}) == {**got.get(plugin, {}), **settings}, (plugin, got.get(plugin))


@pytest.mark.slow
@pytest.mark.env
def test_site_pins_one_pyodide_version(site):
    from jupyterlite_pyodide_kernel.constants import PYODIDE_VERSION
    pin = PINS['pyodide']
    assert pin == PYODIDE_VERSION, 'lite/package.json and jupyterlite-pyodide-kernel must agree'
    assert json.loads((site / 'static' / 'pyodide' / 'package.json').read_text())['version'] == pin
    for name in ('pyodide.mjs', 'pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip', 'pyodide-lock.json'):
        assert (site / 'static' / 'pyodide' / name).is_file(), name
    kernel = _lite_config(site)['litePluginSettings'][dev.LITE_KERNEL_PLUGIN]
    assert kernel['pyodideUrl'] == './static/pyodide/pyodide.mjs'
    assert kernel['loadPyodideOptions']['packageBaseUrl'] == dev.PYODIDE_INDEX.format(version=pin)
    assert f'/v{pin}/' in kernel['loadPyodideOptions']['packageBaseUrl']
    lock = json.loads((site / 'static' / 'pyodide' / 'pyodide-lock.json').read_text())
    assert 'numpy' in lock['packages'] and 'matplotlib' in lock['packages']


@pytest.mark.env
def test_wrong_pyodide_pin_is_an_error(node_modules, capsys):
    with pytest.raises(SystemExit):
        dev.check_lite_pins(Path(sys.executable), node_modules, dict(PINS, pyodide='0.0.1'))
    assert 'lite/package.json pins' in capsys.readouterr().out


# ------------------------------------------------------------------ viz.js in a browser worker
def _sample_dots():
    """DOT of the course's kinds of drawing: a tensor graph with a highlight, a static graph with its
    gradients (backward ops) and a cond (sub-graph clusters), and a compiled Program coloured by buffer."""
    a = mg.tensor(2.0, requires_grad=True, name='a')
    b = mg.tensor(3.0, requires_grad=True, name='b')
    y = mg.exp(a * b + a)
    out = [mg.draw(y, highlight=[a]).source]
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, (3,), name='x')
        loss = mg.exp(x * 2.0 + 1.0).sum()
        mg.gradients(loss, [x])
        r = mg.cond(x.sum() > 0, lambda: x * 2.0, lambda: x + 1.0)       # sub-graph clusters
    out.append(mg.draw(g).source)
    out.append(mg.draw(r).source)
    out.append(mg.draw(mg.compile([mg.exp(x * 2.0 + 1.0) * x], [x]), color_by='buffer').source)
    assert any('subgraph cluster_' in src for src in out)
    return out


WORKER_PAGE = """async ([vizText, start, render, sources]) => {
    // a module worker, as the Pyodide kernel's: evaluate viz-global.js as minigrad.viz.load_renderer() does
    // (indirect eval: global scope), start it, then render each DOT source as render_svg does.
    const code = `
        self.onmessage = async (e) => {
            try {
                (0, eval)(e.data.vizText);
                await (0, eval)(e.data.start);
                const render = (0, eval)(e.data.render);
                self.postMessage({svgs: e.data.sources.map(render)});
            } catch (err) { self.postMessage({error: String(err && err.stack || err)}); }
        };`;
    const url = URL.createObjectURL(new Blob([code], {type: 'text/javascript'}));
    const worker = new Worker(url, {type: 'module'});
    try {
        return await new Promise(resolve => {
            worker.onmessage = e => resolve(e.data);
            worker.onerror = e => resolve({error: 'worker error: ' + (e.message || e.type)});
            setTimeout(() => resolve({error: 'viz.js did not answer within 60 s'}), 60000);
            worker.postMessage({vizText, start, render, sources});
        });
    } finally { worker.terminate(); }
}"""


@pytest.fixture(scope='module')
def chromium():
    """One headless Chromium for this module's browser tests (Playwright's sync API allows one at a time)."""
    _ensure_browser()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope='module')
def vizjs_render(node_modules, chromium):
    """render(list of DOT sources) -> SVGs through @viz-js/viz in a module Web Worker of headless Chromium,
    each finished by draw.finish_svg as render_svg does."""
    viz_text = (node_modules / '@viz-js' / 'viz' / 'dist' / 'viz-global.js').read_text(encoding='utf-8')
    page = chromium.new_page()
    # a page with a real origin (module workers from blob: URLs need one), served by Playwright itself
    page.route('http://minigrad.test/**', lambda route: route.fulfill(
        status=200, content_type='text/html', body='<!doctype html><title>viz.js</title>'))
    page.goto('http://minigrad.test/')

    def render(sources):
        out = page.evaluate(WORKER_PAGE, [viz_text, vizjs.START, vizjs.RENDER, sources])
        assert 'error' not in out, out.get('error')
        return [draw_mod.finish_svg(s) for s in out['svgs']]
    yield render
    page.close()


def _structure(svg):
    """(tag, id, class) of every element with an id or class, in document order, plus the text of labels."""
    root = ET.fromstring(svg)
    items = [(el.tag.replace(SVG_NS, ''), el.get('id'), el.get('class')) for el in root.iter()
             if el.get('id') or el.get('class')]
    texts = sorted(t.text for t in root.iter(SVG_NS + 'text') if t.text)
    return items, texts


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.env
def test_vizjs_in_a_worker_gives_the_same_svg_structure_as_dot(vizjs_render):
    if not shutil.which('dot'):
        pytest.skip('no `dot` program on PATH to compare with (apt-get install graphviz)')
    sources = _sample_dots()
    assert draw_mod.renderer() == 'dot'
    by_dot = [draw_mod.render_svg(s) for s in sources]
    by_viz = vizjs_render(sources)
    for d, v in zip(by_dot, by_viz):
        assert v.startswith('<svg style="max-width:100%;height:auto"')
        (items_d, texts_d), (items_v, texts_v) = _structure(d), _structure(v)
        assert items_v == items_d                    # same node/edge/cluster ids and classes, same order
        assert texts_v == texts_d
        ids = {i for _, i, c in items_v if c == 'node'}
        assert ids and all(i.startswith('mg-') for i in ids)


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.env
def test_a_stepper_steps_on_the_vizjs_svg(vizjs_render, monkeypatch):
    from minigrad.viz import frames as stepper_mod      # Layout renders there
    calls = []

    def through_vizjs(dot):
        calls.append(1)
        return vizjs_render([dot if isinstance(dot, str) else dot.source])[0]
    monkeypatch.setattr(stepper_mod, 'render_svg', through_vizjs)
    a = mg.tensor(2.0, requires_grad=True, name='a')
    b = mg.tensor(3.0, requires_grad=True, name='b')
    with mg.Tape() as tape:
        y = a * b + a
    s = mg.viz.Stepper(tape)
    first = re.findall(r'<g id="(mg-[^"]+)" class="node mg-highlight"', s.svg)
    s.next()
    second = re.findall(r'<g id="(mg-[^"]+)" class="node mg-highlight"', s.svg)
    assert calls, 'the stepper laid out its drawing through viz.js'
    assert second and second != first
    ET.fromstring(s.svg)


PYODIDE_WORKER = """async ([files, code]) => {
    // a module worker, as the Pyodide kernel's, running the pinned Pyodide core (no numpy needed)
    const worker = new Worker(URL.createObjectURL(new Blob([`
        self.onmessage = async (e) => {
            try {
                const { loadPyodide } = await import('http://minigrad.test/pyodide/pyodide.mjs');
                const py = await loadPyodide({indexURL: 'http://minigrad.test/pyodide/'});
                for (const [path, text] of Object.entries(e.data.files)) {
                    py.FS.mkdirTree(path.slice(0, path.lastIndexOf('/')));
                    py.FS.writeFile(path, text);
                }
                self.postMessage({out: await py.runPythonAsync(e.data.code)});
            } catch (err) { self.postMessage({error: String(err && err.stack || err)}); }
        };`], {type: 'text/javascript'})), {type: 'module'});
    try {
        return await new Promise(resolve => {
            worker.onmessage = e => resolve(e.data);
            worker.onerror = e => resolve({error: 'worker error: ' + (e.message || e.type)});
            setTimeout(() => resolve({error: 'Pyodide did not answer within 120 s'}), 120000);
            worker.postMessage({files, code});
        });
    } finally { worker.terminate(); }
}"""

PYODIDE_CODE = """
import json, sys
sys.path.insert(0, '/home/pyodide/t')
from minigrad.core.errors import MinigradError
from minigrad.viz import vizjs
from pyodide.ffi import can_run_sync
out = {'platform': sys.platform, 'can_run_sync': can_run_sync()}
try:
    out['before'] = vizjs.render('digraph { a -> b }')[:4]      # JSPI: run_sync waits for viz.js
except MinigradError as e:
    out['before'] = str(e)                                     # otherwise: the cell must await it
await vizjs.load_renderer()
out['svg'] = vizjs.render(DOT)
try:
    vizjs.render('digraph { a -> }')
except MinigradError as e:
    out['bad'] = str(e)
json.dumps(out)
"""


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.env
def test_the_vizjs_bridge_runs_in_pyodide_in_a_browser_worker(node_modules, chromium):
    """minigrad.viz.vizjs (stdlib + Pyodide only) in the pinned Pyodide core in a module worker: it loads
    viz-global.js from the minigrad_vizjs package, renders minigrad's DOT and turns Graphviz errors into
    MinigradError. numpy is not needed, so this runs without the Pyodide package index."""
    core = node_modules / 'pyodide'
    types = {'.mjs': 'text/javascript', '.js': 'text/javascript', '.wasm': 'application/wasm',
             '.json': 'application/json', '.zip': 'application/zip'}

    def serve(route):
        path = urllib.parse.urlparse(route.request.url).path
        if path.startswith('/pyodide/') and (core / path[len('/pyodide/'):]).is_file():
            f = core / path[len('/pyodide/'):]
            route.fulfill(status=200, body=f.read_bytes(), content_type=types.get(f.suffix, 'application/octet-stream'))
        elif path == '/':
            route.fulfill(status=200, content_type='text/html', body='<!doctype html><title>pyodide</title>')
        else:
            route.fulfill(status=404, body='not here')
    a = mg.tensor(2.0, requires_grad=True, name='a')
    dot = mg.draw(mg.exp(a * a), highlight=[a]).source
    base = '/home/pyodide/t/'
    files = {base + 'minigrad/__init__.py': '', base + 'minigrad/viz/__init__.py': '',
             base + 'minigrad/core/__init__.py': '',
             base + 'minigrad/core/errors.py': (ROOT / 'minigrad' / 'core' / 'errors.py').read_text(),
             base + 'minigrad/viz/vizjs.py': (ROOT / 'minigrad' / 'viz' / 'vizjs.py').read_text(),
             base + 'minigrad_vizjs/__init__.py': '',
             base + 'minigrad_vizjs/viz-global.js':
                 (node_modules / '@viz-js' / 'viz' / 'dist' / 'viz-global.js').read_text(encoding='utf-8')}
    code = f'DOT = {dot!r}\n' + PYODIDE_CODE
    page = chromium.new_page()
    try:
        page.route('http://minigrad.test/**', serve)
        page.goto('http://minigrad.test/')
        reply = page.evaluate(PYODIDE_WORKER, [files, code])
    finally:
        page.close()
    assert 'error' not in reply, reply['error']
    out = json.loads(reply['out'])
    assert out['platform'] == 'emscripten'
    assert out['before'] == ('<?xm' if out['can_run_sync'] else vizjs._NOT_LOADED), out['before']
    svg = draw_mod.finish_svg(out['svg'])
    if shutil.which('dot'):
        assert _structure(svg) == _structure(draw_mod.render_svg(dot))
    assert 'class="node mg-highlight"' in svg
    assert out['bad'].startswith('Graphviz (viz.js) could not draw this graph:'), out['bad']


# ------------------------------------------------------------------ end to end, when Pyodide's packages are here
class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files of the site; /pyodide-index/ maps to a local Pyodide distribution (if any)."""
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, '.mjs': 'text/javascript',
                      '.js': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json'}
    index_dir = None

    def translate_path(self, path):
        clean = urllib.parse.urlparse(path).path
        if self.index_dir and clean.startswith('/pyodide-index/'):
            return str(Path(self.index_dir) / urllib.parse.unquote(clean[len('/pyodide-index/'):]))
        return super().translate_path(path)

    def log_message(self, *args):
        pass


def _pyodide_index():
    """(local dir or None, lock URL or path) of MINIGRAD_PYODIDE_URL, or skip saying why."""
    where = os.environ.get('MINIGRAD_PYODIDE_URL')
    if not where:
        pytest.skip('no Pyodide distribution with numpy is reachable: set MINIGRAD_PYODIDE_URL to a local directory '
                    'or an http(s) URL of the full Pyodide ' + PINS['pyodide'] + ' distribution (the npm pyodide '
                    'package has only the core, and PyPI has no Pyodide numpy wheel)')
    if re.match(r'https?://', where):
        base = where.rstrip('/') + '/'
        try:
            with urllib.request.urlopen(base + 'pyodide-lock.json', timeout=20) as r:
                lock = json.load(r)
        except OSError as e:
            pytest.skip(f'MINIGRAD_PYODIDE_URL={where} is not reachable: {e}')
        return None, base, lock
    path = Path(where)
    if not (path / 'pyodide-lock.json').is_file():
        pytest.skip(f'MINIGRAD_PYODIDE_URL={where} has no pyodide-lock.json')
    return path, None, json.loads((path / 'pyodide-lock.json').read_text())


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.env
def test_site_runs_lesson_01_in_pyodide(tmp_path, node_modules, request):
    local, base, lock = _pyodide_index()
    core_lock = json.loads((node_modules / 'pyodide' / 'pyodide-lock.json').read_text())
    assert lock['info'] == core_lock['info'], (f'MINIGRAD_PYODIDE_URL holds a Pyodide for {lock["info"]}, the site '
                                               f'pins {PINS["pyodide"]} ({core_lock["info"]})')
    numpy = lock['packages']['numpy']['file_name']
    if local is not None and not (local / numpy).is_file():
        pytest.skip(f'MINIGRAD_PYODIDE_URL={local} has no {numpy}')
    browser = request.getfixturevalue('chromium')        # only now: the skips above need no browser
    port = _free_port()
    index = base or f'http://127.0.0.1:{port}/pyodide-index/'
    site = dev.build_lite(sys.executable, index=index, out=tmp_path / 'site')
    handler = functools.partial(type('H', (_Handler,), {'index_dir': local}), directory=str(site))
    server = http.server.ThreadingHTTPServer(('127.0.0.1', port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    artifacts = HERE / 'artifacts'
    artifacts.mkdir(exist_ok=True)
    page = browser.new_page(viewport={'width': 1280, 'height': 900})
    try:
        page.set_default_timeout(60_000)
        page.goto(f'http://127.0.0.1:{port}/lab/index.html?path=notebooks/01_computational_graphs.ipynb')
        page.wait_for_selector('.jp-Notebook .jp-Cell', timeout=120_000)
        page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]', state='attached',
                               timeout=300_000)
        page.locator('.lm-MenuBar-itemLabel', has_text='Run').first.click()
        page.locator('.lm-Menu-itemLabel', has_text='Run All Cells').first.click()
        try:
            page.wait_for_selector('.jp-OutputArea-output svg g.node[id^="mg-"]', state='attached', timeout=300_000)
        except Exception:       # a timeout: keep a screenshot and say what the notebook shows
            page.screenshot(path=str(artifacts / 'lite_lesson01_failure.png'), full_page=True)
            raise AssertionError('no drawing appeared; the notebook shows:\n'
                                 + page.inner_text('.jp-Notebook')[-3000:]) from None
        page.screenshot(path=str(artifacts / 'lite_lesson01.png'), full_page=True)
        nodes = page.eval_on_selector_all('.jp-OutputArea-output svg g.node', 'els => els.map(e => e.id)')
    finally:
        page.close()
        server.shutdown()
        server.server_close()
    assert nodes and all(n.startswith('mg-') for n in nodes)


# ------------------------------------------------------------------ what the site runs, run here in CPython
# Pyodide has no numba, onnx, onnxruntime, torch or pygraphviz: a sitecustomize.py on PYTHONPATH puts None in
# sys.modules for each, so `import` raises ImportError and importlib.util.find_spec says None, as in Pyodide
# (the kernel and its subprocesses all see it). piplite is a stand-in whose install() does nothing (the
# packages are installed here). `dot` stays on PATH: it stands in for viz.js, which needs a browser (CPython
# has no other renderer without dot and pygraphviz); the browser tests above check that viz.js lays out
# minigrad's DOT with the same node ids and classes as dot.
HIDDEN = ('numba', 'onnx', 'onnxruntime', 'torch', 'pygraphviz')
# what a guarded cell prints when the kernel lacks it, as in the site
SAYS = {'notebooks/05_graph_compiler.ipynb': 'numba is not installed here',
        'notebooks/08_performance.ipynb': 'PyTorch: not installed',
        'notebooks/11_deployment.ipynb': 'skipped: this cell needs onnx, which the browser does not have'}
SITE_NOTEBOOKS = sorted([*(ROOT / 'notebooks').glob('*.ipynb'), *(ROOT / 'solutions').glob('*.ipynb')])


@pytest.fixture(scope='module')
def like_the_site(tmp_path_factory):
    """(PYTHONPATH dir hiding what Pyodide lacks, env for the kernel)."""
    block = tmp_path_factory.mktemp('pyodide-like')
    (block / 'sitecustomize.py').write_text(
        'import sys\n'
        f'for _name in {HIDDEN!r}:   # as in Pyodide: not installed\n'
        '    sys.modules[_name] = None\n')
    (block / 'piplite.py').write_text(
        '"""Stand-in for JupyterLite\'s piplite (tests/test_lite.py): the packages are installed here."""\n\n\n'
        'async def install(requirements, **kwargs):\n'
        '    assert isinstance(requirements, list), requirements\n')
    env = {k: v for k, v in os.environ.items() if k not in ('MINIGRAD_BACKEND', 'PYTHONSTARTUP')}
    env['PYTHONPATH'] = os.pathsep.join([str(block), str(ROOT)])
    env['OPENBLAS_NUM_THREADS'] = '1'
    return env


def test_the_site_like_kernel_lacks_what_pyodide_lacks(like_the_site):
    code = ('import importlib, importlib.util, minigrad as mg\n'
            f'print([importlib.util.find_spec(m) for m in {HIDDEN!r}], mg.compiler.default_backend(), '
            "importlib.import_module('minigrad.viz.draw').renderer())\n"
            'import onnx\n')
    r = subprocess.run([sys.executable, '-c', code], env=like_the_site, capture_output=True, text=True, timeout=120)
    assert 'ModuleNotFoundError' in r.stderr and 'onnx' in r.stderr, r.stderr[-2000:]
    assert r.stdout.split('] ')[1].split() == ['numpy', 'dot' if shutil.which('dot') else 'none'], r.stdout


@pytest.mark.slow
@pytest.mark.parametrize('source', SITE_NOTEBOOKS, ids=lambda p: f'{p.parent.name}/{p.stem}')
def test_site_notebook_runs_without_what_pyodide_lacks(source, like_the_site, tmp_path):
    """The site's copy of each lesson, and of each exercise notebook with its solutions filled in (the code a
    learner runs there), runs top to bottom in CPython with numba, onnx, onnxruntime, torch and pygraphviz
    hidden: the numpy backend, guarded cells saying what is missing, lesson 11 guarded by %%needs."""
    nbformat = pytest.importorskip('nbformat')
    nbclient = pytest.importorskip('nbclient')
    name = source.relative_to(ROOT).as_posix()
    if source.parent.name == 'solutions':          # the site holds the exercises; their tasks, solved
        name = 'exercises/' + source.name
        assert (ROOT / name).is_file(), name
    dest = tmp_path / name
    index = dev.PYODIDE_INDEX.format(version=PINS['pyodide'])
    dev.lite_notebook(source, dest, index, dev.LITE_READ_ONLY.get(name))
    nb = nbformat.read(dest, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name='python3', record_timing=False,
                                     resources={'metadata': {'path': str(dest.parent)}})
    client.execute(env=like_the_site)
    out = {c.id: ''.join(o.get('text', '') for o in c.outputs if o.output_type == 'stream')
           for c in nb.cells if c.cell_type == 'code'}
    assert out[dev.LITE_SETUP_ID] == ''
    if name in dev.LITE_READ_ONLY:
        guarded = [i for i, text in out.items() if i != dev.LITE_SETUP_ID]
        assert guarded and all(out[i].startswith('skipped: this cell needs onnx') for i in guarded), out
    errors = [o for c in nb.cells if c.cell_type == 'code' for o in c.outputs if o.output_type == 'error']
    assert not errors, errors[0]
    assert SAYS.get(name, '') in ''.join(out.values())


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.env
def test_site_says_what_it_needs_when_the_package_index_is_unreachable(site, chromium):
    """Every request off the site fails (offline, a proxy): the kernel cannot load numpy, so no cell can speak;
    the notebook's markdown note and the landing line say what the site needs and where else to go."""
    port = _free_port()
    handler = functools.partial(_Handler, directory=str(site))
    server = http.server.ThreadingHTTPServer(('127.0.0.1', port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    here = f'http://127.0.0.1:{port}/'
    blocked = []

    def offline(route):
        if route.request.url.startswith(here):
            return route.continue_()
        blocked.append(route.request.url)
        return route.abort('internetdisconnected')
    page = chromium.new_page(viewport={'width': 1280, 'height': 900})
    try:
        page.route('**/*', offline)
        page.goto(here)                                  # the landing page forwards to the lab
        page.wait_for_url('**/lab/**', timeout=60_000)
        assert page.locator(f'#{dev.LITE_NOTE_ID}').count() == 1
        assert 'dev.py lab' in page.locator(f'#{dev.LITE_NOTE_ID}').text_content()
        page.goto(here + 'lab/index.html?path=notebooks/05_graph_compiler.ipynb')
        page.wait_for_selector('.jp-Notebook .jp-MarkdownCell', timeout=120_000)
        first = page.locator('.jp-Notebook .jp-Cell').first
        first.locator('a', has_text='on Binder').wait_for(timeout=60_000)
        text = first.inner_text()
        assert 'cannot be reached' in text and 'python3 dev.py lab' in text, text
        assert dev.PYODIDE_INDEX.format(version=PINS['pyodide']) in text, text
    finally:
        page.close()
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_needs_guard_runs_the_cell_where_onnx_is_installed(tmp_path):
    """%%needs onnx runs lesson 11's cells unchanged where onnx is there (drawings and last values shown)."""
    pytest.importorskip('onnx')
    nbformat = pytest.importorskip('nbformat')
    nbclient = pytest.importorskip('nbclient')
    name = 'notebooks/11_deployment.ipynb'
    dest = tmp_path / name
    dev.lite_notebook(ROOT / name, dest, 'http://index.invalid/', dev.LITE_READ_ONLY[name])
    (tmp_path / 'tests').symlink_to(ROOT / 'tests')          # lesson 11 reads ../tests/data
    (tmp_path / 'block').mkdir()
    (tmp_path / 'block' / 'piplite.py').write_text('async def install(requirements):\n    pass\n')
    env = {k: v for k, v in os.environ.items() if k != 'MINIGRAD_BACKEND'}
    env['PYTHONPATH'] = os.pathsep.join([str(tmp_path / 'block'), str(ROOT)])
    nb = nbformat.read(dest, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name='python3', record_timing=False,
                            resources={'metadata': {'path': str(dest.parent)}}).execute(env=env)
    text = json.dumps([c.outputs for c in nb.cells if c.cell_type == 'code'])
    assert 'skipped: this cell needs' not in text
    assert 'round trip equal: True' in text and 'image/svg+xml' in text


def test_setup_cell_says_so_when_numpy_cannot_load(monkeypatch):
    """The kernel started but piplite cannot fetch numpy from the Pyodide package index: the first cell says
    where it looked and where else the course runs, instead of a bare traceback from piplite."""
    import ast
    import types

    async def install(requirements, **kwargs):
        raise ValueError("Can't fetch metadata for 'numpy'")      # what piplite/micropip raises offline
    monkeypatch.setitem(sys.modules, 'piplite', types.SimpleNamespace(install=install))
    index = 'https://index.invalid/pyodide/'
    cell = dev.LITE_SETUP_CELL.format(index=index, binder=dev.BINDER_URL)
    code = compile(cell, 'setup-cell', 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    cell_run = eval(code, {})                 # a coroutine; piplite fails before anything waits, so one step ends it
    with pytest.raises(RuntimeError) as e:     # (no event loop: Playwright's may be running in this thread)
        cell_run.send(None)
    assert f'numpy could not be loaded from the Pyodide package index ({index})' in str(e.value)
    assert 'python3 dev.py lab' in str(e.value) and dev.BINDER_URL in str(e.value)
    assert "Can't fetch metadata" in str(e.value.__cause__)
