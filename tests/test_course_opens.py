"""The course opens and draws everywhere (issue 12).

* every drawable displays as SVG through IPython without the Graphviz `dot` program (the pygraphviz wheel
  renders), silently, and the lessons and solutions run without `dot`;
* `python3 dev.py lab` serves the repository root and opens the first lesson; its terminals start there;
* every relative markdown link resolves, and the README's check command works as written.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import pickle
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg

pytest.importorskip('graphviz')
pytest.importorskip('IPython')

ROOT = Path(__file__).resolve().parent.parent
GRAPHVIZ_PROGRAMS = {'dot', 'neato', 'twopi', 'circo', 'fdp', 'sfdp', 'osage', 'patchwork', 'unflatten'}


def path_without_dot(tmp_path, path=None) -> str:
    """`path` (default: $PATH) with each directory holding `dot` replaced by a copy (symlinks) without Graphviz."""
    dirs = []
    path = os.environ.get('PATH', '') if path is None else path
    for i, d in enumerate(filter(None, path.split(os.pathsep))):
        if not os.path.exists(os.path.join(d, 'dot')):
            dirs.append(d)
            continue
        shadow = tmp_path / f'path{i}'
        shadow.mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(d):
            if entry.name not in GRAPHVIZ_PROGRAMS and not (shadow / entry.name).exists():
                (shadow / entry.name).symlink_to(entry.path)
        dirs.append(str(shadow))
    path = os.pathsep.join(dirs)
    assert shutil.which('dot', path=path) is None
    return path


@pytest.fixture
def no_dot(monkeypatch, tmp_path):
    """No `dot` on PATH in this process: rendering must go through the pygraphviz wheel."""
    pytest.importorskip('pygraphviz')
    monkeypatch.setenv('PATH', str(tmp_path))
    assert shutil.which('dot') is None


# ------------------------------------------------------------------ drawing without dot
def _graph():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float32, shape=(4,), name='x')
        w = mg.placeholder(mg.float32, shape=(4,), name='w')
        y = mg.exp(w * x + 1.0) * 2.0
    return g, x, w, y


def _tape():
    a = mg.tensor([1.0, 2.0], requires_grad=True, name='a')
    with mg.Tape() as tape:
        y = (a * a + a).sum()
    return tape, y


def _jit():
    f = mg.jit(lambda x: (x * x + 1.0).sum())
    f(np.ones(3, np.float32))
    return f


def _program():
    _, x, w, y = _graph()
    return mg.compile([y], [x, w])


DRAWABLES = {
    'mg.draw': lambda: mg.draw(_tape()[1]),
    'Tape': lambda: _tape()[0],
    'Graph': lambda: _graph()[0],
    'Symbol': lambda: _graph()[3],
    'Program': _program,
    'traced function': lambda: mg.trace(lambda x: (x * x).sum(), np.ones(3, np.float32)),
    'jit function': _jit,
    'Stepper': lambda: mg.viz.Stepper(_tape()[0]).next(),
    'PassStepper': lambda: mg.viz.PassStepper(_program()).next(),
}


@pytest.mark.parametrize('kind', list(DRAWABLES))
def test_every_drawable_displays_svg_without_dot(kind, no_dot, capfd):
    from IPython.core.formatters import DisplayFormatter
    obj = DRAWABLES[kind]()
    data, _ = DisplayFormatter().format(obj)
    svg = data.get('image/svg+xml') or data.get('text/html') or ''
    assert '<svg' in svg, f'{kind} shows no SVG without `dot`: {sorted(data)} {data.get("text/plain", "")[:300]}'
    err = capfd.readouterr().err
    assert err == '', f'displaying a {kind} printed to stderr: {err[:500]}'


def test_a_tensor_displays_without_dot(no_dot, capfd):
    """A Tensor shows its values, and (folded in a <details>) the drawing of its graph."""
    from IPython.core.formatters import DisplayFormatter
    data, _ = DisplayFormatter().format(_tape()[1])
    assert data['text/plain'].startswith('tensor(')
    assert data['text/html'].startswith('<pre>tensor(') and '<details><summary>graph' in data['text/html']
    assert '<svg' in data['text/html']
    leaf, _ = DisplayFormatter().format(mg.tensor([1.0, 2.0]))
    assert '<svg' not in leaf['text/html']          # a leaf has no graph to draw
    assert capfd.readouterr().err == ''


def test_mg_draw_is_a_graphviz_digraph_that_renders_through_minigrad(no_dot, capfd):
    import graphviz
    d = mg.draw(_tape()[1], title='y')
    assert isinstance(d, graphviz.Digraph)
    assert '->' in d.source and 'id="mg-' in d.source           # the graphviz API is intact
    for copy in (d.copy(), pickle.loads(pickle.dumps(d))):
        assert type(copy) is type(d) and copy.source == d.source
    assert d._repr_image_svg_xml().startswith('<svg')
    assert d._repr_svg_().startswith('<svg')
    assert d._repr_mimebundle_()['image/svg+xml'].startswith('<svg')
    assert d._repr_mimebundle_(include=[]) == {}
    assert capfd.readouterr().err == ''



@pytest.mark.skipif(shutil.which('dot') is None, reason='Digraph.render runs the `dot` program')
def test_mg_draw_result_still_renders_files_with_dot(tmp_path):
    out = mg.draw(_tape()[1]).render(tmp_path / 'graph', format='svg')
    assert Path(out).read_text().lstrip().startswith('<?xml')


def test_first_pygraphviz_render_in_a_fresh_process_is_silent(tmp_path):
    """Library warnings (e.g. the bundled fontconfig about the system's config) come once per process."""
    pytest.importorskip('pygraphviz')
    code = ('import minigrad as mg\n'
            'a = mg.tensor([1.0, 2.0], requires_grad=True, name="a")\n'
            'svg = mg.draw((a * a).sum())._repr_mimebundle_()["image/svg+xml"]\n'
            'assert svg.startswith("<svg"), svg[:200]\n')
    r = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PATH=path_without_dot(tmp_path)))
    assert r.returncode == 0 and r.stderr == '', r.stderr


def test_pygraphviz_errors_carry_graphviz_message(no_dot, capfd):
    from minigrad.viz.draw import render_svg
    with pytest.raises(mg.MinigradError, match='could not draw'):
        render_svg('digraph { a -> }')
    assert capfd.readouterr().err == ''


@pytest.mark.slow
def test_lessons_and_solutions_run_without_dot_and_numba(tmp_path):
    """Where numba has no wheel (Intel macOS, Pyodide) the lessons run on the numpy backend and say what
    the numba backend would show; `dot` and numba are hidden in one run."""
    pytest.importorskip('pygraphviz')
    blocker = tmp_path / 'block' / 'numba'
    blocker.mkdir(parents=True)
    (blocker / '__init__.py').write_text("raise ImportError('numba is hidden by tests/test_course_opens.py')\n")
    env = dict(os.environ, PATH=path_without_dot(tmp_path))
    env['PYTHONPATH'] = os.pathsep.join([str(tmp_path / 'block'), str(ROOT)])
    env.pop('MINIGRAD_BACKEND', None)
    # the kernel (conftest.py's learner kernel) inherits PATH and PYTHONPATH: no dot, no numba there either
    cmd = [sys.executable, '-m', 'pytest', '--nbval-lax', '--sanitize-with',
           'tests/nbval_sanitize.cfg', 'notebooks', 'solutions', '-p', 'no:cacheprovider', '-q']
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800, env=env)
    assert r.returncode == 0, f'nbval without `dot` and numba failed:\n{r.stdout[-6000:]}\n{r.stderr[-2000:]}'
    assert re.search(r'\d+ passed', r.stdout)


# ------------------------------------------------------------------ dev.py lab
def _dev():
    spec = importlib.util.spec_from_file_location('dev', ROOT / 'dev.py')
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev


def test_lab_command_roots_jupyter_at_the_repository():
    dev = _dev()
    cmd = [str(c) for c in dev.lab_command(['--no-browser'])]
    assert cmd[1:4] == ['-m', 'jupyter', 'lab'] and cmd[-1] == '--no-browser'
    assert f'--ServerApp.root_dir={ROOT}' in cmd
    assert '--LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb' in cmd
    assert not any(c.endswith('.ipynb') and not c.startswith('--') for c in cmd)   # a path would re-root it


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _get(url, method='GET', body=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.geturl(), r.read()


def _wait_for_server(url, proc, log, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f'JupyterLab exited with code {proc.returncode}:\n{log.read_text()[-3000:]}')
        try:
            if _get(url + 'api/status')[0] == 200:
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f'JupyterLab did not answer at {url} within {timeout}s:\n{log.read_text()[-3000:]}')


async def _terminal_says(ws_url, command, pattern, timeout=30):
    """Type `command` into a terminal over its websocket; return the first match of `pattern` in its output."""
    from tornado.websocket import websocket_connect
    ws = await websocket_connect(ws_url)
    try:
        ws.write_message(json.dumps(['stdin', command + '\r']))
        out, deadline = '', time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = await asyncio.wait_for(ws.read_message(), deadline - time.monotonic())
            if msg is None:
                break
            kind, *data = json.loads(msg)
            if kind == 'stdout':
                out += data[0]
                m = re.search(pattern, out)
                if m:
                    return m
        raise AssertionError(f'the terminal did not print {pattern!r}; it printed:\n{out[-2000:]}')
    finally:
        ws.close()


@pytest.fixture
def lab_server(tmp_path):
    """`dev.py lab`'s command line on a free port: no browser, no token, throw-away Jupyter dirs, no `dot`."""
    pytest.importorskip('jupyterlab')
    dev = _dev()
    if not Path(dev.VPY).exists():
        pytest.skip(f'{dev.VPY} does not exist: run `python3 dev.py lab` or `python3 dev.py test` once')
    home = tmp_path / 'home'
    env = dict(dev.venv_env(), HOME=str(home), JUPYTER_CONFIG_DIR=str(home / 'config'),
               JUPYTER_DATA_DIR=str(home / 'data'), JUPYTER_RUNTIME_DIR=str(home / 'runtime'),
               IPYTHONDIR=str(home / 'ipython'), JUPYTERLAB_SETTINGS_DIR=str(home / 'settings'),
               JUPYTERLAB_WORKSPACES_DIR=str(home / 'workspaces'))
    env['PATH'] = path_without_dot(tmp_path / 'path', env['PATH'])       # dev.py lab must not need `dot`
    port = _free_port()
    cmd = dev.lab_command(['--no-browser', '--ServerApp.ip=127.0.0.1', f'--ServerApp.port={port}',
                           '--ServerApp.port_retries=0', '--IdentityProvider.token=', '--ServerApp.password=',
                           '--ServerApp.disable_check_xsrf=True', '--LabApp.news_url=None',
                           '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate'])
    log = tmp_path / 'jupyterlab.log'
    with open(log, 'w') as fh:
        # its own process group (session), so stopping it also stops the kernels/terminals it started
        proc = subprocess.Popen([str(c) for c in cmd], cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    url = f'http://127.0.0.1:{port}/'
    try:
        _wait_for_server(url, proc, log)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.env
def test_lab_is_clean_no_news_question_no_nbgrader(lab_server):
    """issue 30: `dev.py lab` asks nothing about Jupyter news (binder/overrides.json is the default of the
    notification settings) and loads no extension the course does not use (nbgrader's menus, Validate button)."""
    _, _, body = _get(lab_server + 'lab/api/settings/@jupyterlab/apputils-extension:notification')
    props = json.loads(body)['schema']['properties']
    assert props['fetchNews']['default'] == 'false' and props['checkForUpdates']['default'] is False, props
    _, _, page = _get(lab_server + 'lab/tree/notebooks/00_start_here.ipynb')
    config = json.loads(re.search(rb'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                  page, re.S).group(1))
    names = {e['name'] for e in config.get('federated_extensions', [])}
    assert not [n for n in names if 'nbgrader' in n or 'jupyterlite' in n], sorted(names)


@pytest.mark.slow
@pytest.mark.env
@pytest.mark.skipif(os.name != 'posix', reason='the terminal check needs a POSIX shell')
def test_lab_serves_the_repository_and_terminals_start_at_its_root(lab_server):
    url = lab_server
    for path in ['exercises', 'solutions', 'notebooks/00_start_here.ipynb',
                 'exercises/01_computational_graphs_exercises.ipynb']:
        status, _, body = _get(url + 'api/contents/' + path + '?content=0')
        assert status == 200 and json.loads(body)['path'] == path
    status, final, _ = _get(url)                       # / redirects to the first lesson
    assert status == 200 and final.endswith('/lab/tree/notebooks/00_start_here.ipynb')
    # the launcher asks for a terminal in the file browser's folder (notebooks/ once the lesson is open);
    # the pattern skips the terminal's echo of the command itself (which still has the `$`)
    _, _, body = _get(url + 'api/terminals', 'POST', {'cwd': 'notebooks'})
    name = json.loads(body)['name']
    try:
        m = asyncio.run(_terminal_says(f'ws://127.0.0.1:{url.split(":")[2]}terminals/websocket/{name}',
                                       'echo "MG<$PWD|$(command -v python)>MG"', r'MG<([^|$\r\n]*)\|([^>$\r\n]*)>MG'))
    finally:
        _get(url + f'api/terminals/{name}', 'DELETE')
    assert Path(m.group(1)) == ROOT, f'the terminal started in {m.group(1)}'
    assert Path(m.group(2)) == Path(_dev().VPY), 'the README says `python` in a JupyterLab terminal is the venv'


# ------------------------------------------------------------------ links and README commands
LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|<a\s[^>]*?href=["\']([^"\']+)["\']')


def markdown_sources():
    """(file, markdown text) for README.md and the markdown cells of every course notebook."""
    import nbformat
    yield ROOT / 'README.md', (ROOT / 'README.md').read_text(encoding='utf-8')
    for folder in ('notebooks', 'exercises', 'solutions'):
        for nb in sorted((ROOT / folder).glob('*.ipynb')):
            for cell in nbformat.read(nb, as_version=4).cells:
                if cell.cell_type == 'markdown':
                    yield nb, cell.source


def test_every_relative_markdown_link_resolves():
    checked, broken = 0, []
    for path, text in markdown_sources():
        for m in LINK.finditer(text):
            target = (m.group(1) or m.group(2)).split('#')[0]
            if not target or re.match(r'[a-zA-Z][a-zA-Z0-9+.-]*:', target):     # anchors, http(s), mailto
                continue
            checked += 1
            if not (path.parent / urllib.request.url2pathname(target)).exists():
                broken.append(f'{path.relative_to(ROOT)}: {target}')
    assert checked > 20, f'found only {checked} relative links: is the link pattern still right?'
    assert not broken, 'broken links:\n' + '\n'.join(broken)


def _readme_check_command():
    text = (ROOT / 'README.md').read_text(encoding='utf-8')
    section = text[text.index('## How to check your exercises'):]
    section = section[:section.index('\n## ', 1)]
    lines = [ln.strip() for ln in section.splitlines() if ln.strip().startswith('python -m ')]
    assert len(lines) == 1, f'expected one `python -m ...` command in the README section, got {lines}'
    return shlex.split(lines[0])


@pytest.mark.slow
@pytest.mark.env
def test_readme_check_command_reports_the_stubs_and_passes_the_solutions():
    """The README's check command works in the learner's venv (no pytest there since issue 30)."""
    cmd = _readme_check_command()
    assert cmd[:3] == ['python', '-m', 'minigrad.check_notebook'], cmd
    notebook = cmd[-1]
    assert notebook.startswith('exercises/') and (ROOT / notebook).is_file(), notebook
    dev = _dev()
    python = dev.LEARNER.python if dev.LEARNER.python.exists() else Path(sys.executable)
    print(f'check command run with {python}')

    def run(nb):
        return subprocess.run([python, *cmd[1:-1], nb], cwd=ROOT, capture_output=True, text=True, timeout=600)
    r = run(notebook)
    out = r.stdout + r.stderr
    assert r.returncode == 1, f'expected failing check cells (exit 1), got {r.returncode}:\n{out[-3000:]}'
    assert '✗ Task' in out and re.search(r': 0 of [1-9]\d* checks pass', out), out[-3000:]
    solution = notebook.replace('exercises/', 'solutions/')
    r = run(solution)
    assert r.returncode == 0, f'the same command fails on {solution}:\n{(r.stdout + r.stderr)[-3000:]}'
    assert re.search(r': (\d+) of \1 checks pass', r.stdout), r.stdout[-3000:]
