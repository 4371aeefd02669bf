"""A real browser clicks a Stepper in JupyterLab.

Starts JupyterLab (127.0.0.1, free port, no token, throw-away HOME/Jupyter dirs) on a
copy of tests/browser_stepper.ipynb, drives Debian's /usr/bin/chromium with
Playwright (never Playwright's own browser download) in a 1280 px wide window, runs
all cells through the Run menu, clicks Next on the widget and checks that the
highlighted node in the SVG changed while every node kept its place, and that no
drawing (a graph far wider than the column, and a stepper over it) is wider than its
cell or scrolls sideways. A screenshot goes to tests/artifacts/browser_stepper.png.
"""
import contextlib
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.env]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHROMIUM = '/usr/bin/chromium'
FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run']


def _ensure_browser():
    if os.path.exists(CHROMIUM):
        return
    if os.name == 'posix' and os.geteuid() == 0 and shutil.which('apt-get'):
        env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
        subprocess.run(['apt-get', 'update'], env=env, capture_output=True, timeout=300)
        subprocess.run(['apt-get', 'install', '-y', '--no-install-recommends', 'chromium'], env=env,
                       capture_output=True, timeout=600)
    if not os.path.exists(CHROMIUM):
        pytest.skip(f'no browser: {CHROMIUM} is missing and cannot be installed here (needs root and apt-get)')


def _ensure_python_packages():
    missing = [pip for mod, pip in [('playwright', 'playwright'), ('jupyterlab', 'jupyterlab'),
                                    ('ipywidgets', 'ipywidgets')] if importlib.util.find_spec(mod) is None]
    if missing:
        r = subprocess.run([sys.executable, '-m', 'pip', 'install', *missing], capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            pytest.skip(f'cannot pip install {missing}: {r.stderr[-500:]}')
        importlib.invalidate_caches()


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _wait_for_server(url, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f'JupyterLab exited with code {proc.returncode}')
        try:
            with urllib.request.urlopen(url + 'api/status', timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f'JupyterLab did not answer at {url} within {timeout}s')


@contextlib.contextmanager
def lab_server(tmp_path, files, settings=None):
    """JupyterLab serving copies of `files` (paths) from a fresh root, with throw-away HOME and Jupyter dirs
    (so no notebook is trusted) and `settings` ({plugin id: {key: value}}) as the user's settings."""
    _ensure_browser()
    _ensure_python_packages()
    work = tmp_path / 'root'
    work.mkdir()
    for f in files:
        shutil.copy(f, work / Path(f).name)
    home = tmp_path / 'home'
    for plugin, values in (settings or {}).items():
        pkg, _, name = plugin.partition(':')
        target = home / 'settings' / pkg / f'{name}.jupyterlab-settings'
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    env = dict(os.environ, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / 'config'),
               JUPYTER_DATA_DIR=str(home / 'data'), JUPYTER_RUNTIME_DIR=str(home / 'runtime'),
               IPYTHONDIR=str(home / 'ipython'), JUPYTERLAB_SETTINGS_DIR=str(home / 'settings'),
               JUPYTERLAB_WORKSPACES_DIR=str(home / 'workspaces'),
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    port = _free_port()
    cmd = [sys.executable, '-m', 'jupyter', 'lab', '--no-browser', '--ServerApp.ip=127.0.0.1',
           f'--ServerApp.port={port}', '--ServerApp.port_retries=0', "--IdentityProvider.token=",
           '--ServerApp.password=', f'--ServerApp.root_dir={work}',
           '--LabApp.news_url=None', '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate']
    if os.name == 'posix' and os.geteuid() == 0:
        cmd.append('--allow-root')
    log = open(tmp_path / 'jupyterlab.log', 'w')
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    url = f'http://127.0.0.1:{port}/'
    try:
        _wait_for_server(url, proc)
        yield url
    finally:
        proc.terminate()                 # stop the server we started, by its process id
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


@pytest.fixture
def jupyterlab(tmp_path):
    with lab_server(tmp_path, [HERE / 'browser_stepper.ipynb']) as url:
        yield url


def _highlighted(page):
    return page.eval_on_selector_all('.mg-stepper .mg-svg svg g.mg-highlight', 'els => els.map(e => e.id).sort()')


def _node_boxes(page):
    """id -> rounded box of every node of the first stepper's drawing, as the browser lays it out."""
    return page.evaluate("""() => {
        const svg = document.querySelector('.mg-stepper .mg-svg svg');
        const out = {};
        for (const g of svg.querySelectorAll('g.node')) {
            const shape = g.querySelector('path, ellipse, polygon');     // the outline, not the text
            const r = shape.getBoundingClientRect();
            if (r.width > 0) out[g.id] = [r.x, r.y, r.width, r.height].map(Math.round);
        }
        return out;
    }""")


def _too_wide(page):
    """Drawings (inline SVG or an SVG image) wider than the output area they sit in, or areas that scroll."""
    return page.evaluate("""() => {
        const bad = [];
        const drawings = document.querySelectorAll(
            '.jp-OutputArea-output svg:not(svg svg), .jp-OutputArea-output img');
        for (const d of drawings) {
            const area = d.closest('.jp-OutputArea-output');
            const w = d.getBoundingClientRect().width, room = area.getBoundingClientRect().width;
            if (w > room + 1) bad.push(`${d.tagName} ${Math.round(w)}px in ${Math.round(room)}px`);
        }
        for (const area of document.querySelectorAll('.jp-OutputArea-output, .mg-svg')) {
            if (area.scrollWidth > area.clientWidth + 1) bad.push(`scrolls: ${area.scrollWidth} > ${area.clientWidth}`);
        }
        return {bad, count: drawings.length};
    }""")


def test_stepper_in_jupyterlab(jupyterlab):
    from playwright.sync_api import sync_playwright
    artifacts = HERE / 'artifacts'
    artifacts.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={'width': 1280, 'height': 900})
            page.set_default_timeout(45_000)
            page.goto(jupyterlab + 'lab/tree/browser_stepper.ipynb')
            page.wait_for_selector('.jp-Notebook .jp-Cell', timeout=60_000)
            # JupyterLab may ask which kernel to start (fresh settings dir): accept the default one
            try:
                page.locator('.jp-Dialog button.jp-mod-accept').click(timeout=8_000)
            except Exception:
                pass
            # wait until the kernel is ready, then Run > Run All Cells through the menu bar
            page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]', state='attached',
                                   timeout=60_000)
            page.locator('.lm-MenuBar-itemLabel', has_text='Run').first.click()
            page.locator('.lm-Menu-itemLabel', has_text='Run All Cells').first.click()
            try:
                page.wait_for_selector('.mg-stepper .mg-svg svg g.mg-highlight', timeout=60_000)
            except Exception:
                page.screenshot(path=str(artifacts / 'browser_stepper_failure.png'), full_page=True)
                outputs = page.inner_text('.jp-Notebook')
                raise AssertionError(f'the stepper widget did not appear; notebook shows:\n{outputs[-2000:]}')
            page.wait_for_function("document.querySelectorAll('.mg-stepper').length >= 2", timeout=60_000)
            page.wait_for_timeout(500)                      # let the last outputs settle
            before = _highlighted(page)
            assert before, 'the first frame highlights the inputs'
            boxes_before = _node_boxes(page)
            page.locator('.mg-stepper button.mg-next').first.click()
            page.wait_for_function(
                """before => {
                    const ids = [...document.querySelectorAll('.mg-stepper .mg-svg svg g.mg-highlight')]
                        .map(e => e.id).sort();
                    return ids.length > 0 && JSON.stringify(ids) !== JSON.stringify(before);
                }""", arg=before, timeout=20_000)
            after = _highlighted(page)
            boxes_after = _node_boxes(page)
            caption = page.inner_text('.mg-stepper .mg-caption >> nth=0')
            widths = _too_wide(page)
            page.screenshot(path=str(artifacts / 'browser_stepper.png'), full_page=True)
        finally:
            browser.close()
    assert after != before and all(i.startswith('mg-') for i in after)
    assert 'Forward step 1' in caption
    assert boxes_before and boxes_after == boxes_before, 'a node moved between two frames of the stepper'
    assert widths['count'] >= 3, f'expected the drawings of the notebook on the page, found {widths["count"]}'
    assert not widths['bad'], f'drawings wider than their cell at 1280 px: {widths["bad"]}'
