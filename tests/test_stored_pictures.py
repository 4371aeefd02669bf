"""A learner who opens a fresh clone (untrusted notebooks) sees every stored drawing as a picture.

JupyterLab shows an untrusted notebook's `text/html` sanitized (an inline `<svg>` becomes graphviz's text
soup) and never its `image/svg+xml`; static viewers that sanitize show `image/svg+xml`. So every stored
drawing is `image/png` + `image/svg+xml` with no HTML (scripts/static_outputs.py): checked in the files, in
a sanitized nbconvert export, and in JupyterLab in a real browser.
"""
import glob
import html.parser
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(glob.glob(str(ROOT / 'notebooks' / '*.ipynb')) + glob.glob(str(ROOT / 'solutions' / '*.ipynb'))
                   + glob.glob(str(ROOT / 'exercises' / '*.ipynb')))
IDS = [str(Path(p).relative_to(ROOT)) for p in NOTEBOOKS]


def _text(v):
    return ''.join(v) if isinstance(v, list) else str(v)


def _outputs(nb):
    return [o for c in nb.cells if c.cell_type == 'code' for o in c.outputs
            if o.output_type in ('display_data', 'execute_result')]


def drawings(nb) -> int:
    return sum('image/svg+xml' in o.data for o in _outputs(nb))


def pictures(nb) -> int:
    return sum(bool({'image/svg+xml', 'image/png'} & set(o.data)) for o in _outputs(nb))


@pytest.mark.parametrize('path', NOTEBOOKS, ids=IDS)
def test_stored_drawings_are_pictures_without_html(path):
    nb = nbformat.read(path, as_version=4)
    for i, c in enumerate(nb.cells):
        for o in c.get('outputs', ()):
            data = o.get('data', {})
            assert '<svg' not in _text(data.get('text/html', '')), \
                f'{path} cell {i}: a drawing stored as HTML shows as text soup untrusted; run scripts/run_notebooks.py'
            if 'image/svg+xml' in data:
                assert 'image/png' in data, f'{path} cell {i}: JupyterLab shows no SVG untrusted; store a PNG too'
                assert o.metadata['image/png']['width'] > 0


NOTEBOOK_WIDTH, SMALLEST = 820, 0.75     # px of a typical JupyterLab notebook column; the least scale allowed


@pytest.mark.parametrize('path', NOTEBOOKS, ids=IDS)
def test_no_stored_drawing_is_shrunk_below_readable(path):
    """A big graph needs a readable layout (left to right, a smaller fetch), not a shrunken picture."""
    nb = nbformat.read(path, as_version=4)
    wide = [(i, o.metadata['image/png']['width']) for i, c in enumerate(nb.cells) if c.cell_type == 'code'
            for o in c.outputs if 'image/svg+xml' in o.get('data', {})
            and o.metadata['image/png']['width'] * SMALLEST > NOTEBOOK_WIDTH]
    assert not wide, f'{path}: (cell, px) shown below {SMALLEST:.0%} at {NOTEBOOK_WIDTH} px: {wide}'


def test_the_lessons_hold_the_drawings():
    counts = {Path(p).stem[:2]: drawings(nbformat.read(p, as_version=4)) for p in NOTEBOOKS if '/notebooks/' in p}
    assert sum(counts.values()) >= 28 and counts['00'] >= 2 and counts['04'] >= 4, counts


class _Pictures(html.parser.HTMLParser):
    """Counts <img> and top-level <svg> elements outside <script>, and collects the visible text."""

    def __init__(self):
        super().__init__()
        self.count, self.script, self.svg, self.text = 0, 0, 0, []

    def handle_starttag(self, tag, attrs):
        if tag == 'script':
            self.script += 1
        elif not self.script and tag == 'img' or tag == 'svg' and not self.script and not self.svg:
            self.count += 1
        if tag == 'svg':
            self.svg += 1

    def handle_endtag(self, tag):
        if tag == 'script':
            self.script -= 1
        elif tag == 'svg':
            self.svg -= 1

    def handle_data(self, data):
        if not self.script and not self.svg:
            self.text.append(data)


@pytest.mark.parametrize('path', [p for p in NOTEBOOKS if '/notebooks/' in p],
                         ids=[i for i in IDS if i.startswith('notebooks')])
def test_sanitized_html_export_shows_every_picture(path):
    from nbconvert import HTMLExporter
    nb = nbformat.read(path, as_version=4)
    body, _ = HTMLExporter(sanitize_html=True).from_notebook_node(nb)
    parser = _Pictures()
    parser.feed(body)
    assert parser.count >= pictures(nb) and pictures(nb) >= drawings(nb), (parser.count, pictures(nb))
    text = ''.join(parser.text)
    assert not any(s in text for s in ('t1->o0', '%3 ')), f'graphviz source text in the export of {path}'


# ------------------------------------------------------------------ a real browser, untrusted notebooks
@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.env
@pytest.mark.parametrize('lesson', ['00_start_here', '04_static_graphs'])
def test_untrusted_lesson_shows_its_drawings_in_jupyterlab(lesson, tmp_path):
    sys.path.insert(0, str(ROOT / 'tests'))
    from test_browser import CHROMIUM, FLAGS, lab_server
    from playwright.sync_api import sync_playwright
    path = ROOT / 'notebooks' / f'{lesson}.ipynb'
    want = drawings(nbformat.read(path, as_version=4))
    # every cell rendered at once (JupyterLab 4 otherwise renders only the cells in view)
    settings = {'@jupyterlab/notebook-extension:tracker': {'windowingMode': 'none'}}
    with lab_server(tmp_path, [path], settings) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={'width': 1280, 'height': 900})
            page.set_default_timeout(45_000)
            page.goto(url + f'lab/tree/{lesson}.ipynb')
            page.wait_for_selector('.jp-Notebook .jp-OutputArea-output', timeout=60_000)
            page.wait_for_timeout(1500)                     # let every output render
            found = page.evaluate("""() => {
                const outs = [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output')];
                const pics = outs.flatMap(o => [...o.querySelectorAll('img, svg')].filter(e => {
                    const r = e.getBoundingClientRect();
                    return r.width > 20 && r.height > 20 && !e.closest('svg svg');
                }));
                return {pictures: pics.length, text: outs.map(o => o.innerText).join('\\n')};
            }""")
            trusted = page.evaluate("() => document.querySelectorAll('.jp-StatusItem-trust.jp-mod-trusted').length")
            page.screenshot(path=str(tmp_path / f'{lesson}.png'), full_page=True)
        finally:
            browser.close()
    assert found['pictures'] >= want, f'{lesson}: {found["pictures"]} rendered pictures, {want} drawings stored'
    assert not any(s in found['text'] for s in ('t1->o0', '%3 ', '%3\n')), found['text'][:1500]
    assert want >= 2 and not trusted
