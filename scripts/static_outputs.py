"""Stored drawings as pictures that show in an untrusted notebook.

    .venv-test/bin/python scripts/static_outputs.py notebooks/00_start_here.ipynb ...   (run_notebooks.py calls it)

A live kernel shows a drawing as inline SVG inside `text/html` (hover titles, it fits the cell) and a
stepper as a widget. A notebook opened fresh (a clone, Binder, JupyterLite, GitHub, nbviewer) is
untrusted: JupyterLab then sanitizes `text/html`, which strips the `<svg>` and leaves graphviz's text
soup, and never shows `image/svg+xml`; static viewers that sanitize (nbconvert's `sanitize_html`) show
`image/svg+xml` but escape an `<img>` inside HTML. A bundle of `image/png` + `image/svg+xml` with no
`text/html` is a picture in both, so every stored drawing is rewritten to that: the PNG for JupyterLab,
the SVG for static viewers, `text/plain` for a terminal. A stepper keeps its first frame as the picture
(its widget view is dropped; running the cell brings the live widget back).
"""
import base64
import io
import re
import sys
from pathlib import Path

import nbformat
import resvg_py
from PIL import Image

WIDGET = 'application/vnd.jupyter.widget-view+json'
ZOOM, MAX_WIDTH, COLOURS = 2, 2000, 64       # sharp on a 2x screen; a 64-colour palette keeps files small


def _text(value) -> str:
    return ''.join(value) if isinstance(value, list) else str(value)


def svg_of(output) -> str | None:
    """The drawing's SVG, if this output is a drawing (minigrad's bundle or a stepper's static frame)."""
    data = output.get('data', {})
    for mime in ('image/svg+xml', 'text/html'):
        text = _text(data.get(mime, ''))
        start, end = text.find('<svg'), text.rfind('</svg>')
        if start >= 0 and end > start:
            return text[start:end + len('</svg>')]
    return None


def png_of(svg: str) -> tuple[str, int]:
    """Base64 PNG of `svg` (rendered at ZOOM, at most MAX_WIDTH px wide, white, quantized) and the width in
    CSS px to show it at: the SVG's own width, so the picture has the live drawing's size."""
    width = re.search(r'<svg[^>]*\swidth="([\d.]+)pt"', svg)
    css_width = float(width.group(1)) * 4 / 3 if width else None        # graphviz sizes in pt: 1pt = 4/3 px
    zoom = min(ZOOM, MAX_WIDTH / css_width) if css_width else ZOOM
    plain = svg.replace(' style="max-width:100%;height:auto"', '', 1)   # resvg reads `height:auto` as no size
    png = bytes(resvg_py.svg_to_bytes(svg_string=plain, zoom=zoom, dpi=96, background='#ffffff'))
    image = Image.open(io.BytesIO(png)).convert('RGB').quantize(COLOURS)
    out = io.BytesIO()
    image.save(out, format='PNG', optimize=True)
    return base64.b64encode(out.getvalue()).decode('ascii'), round(css_width or image.width / zoom)


def make_static(output) -> bool:
    """Rewrite one drawing output in place to image/png + image/svg+xml + text/plain; False if no drawing."""
    svg = svg_of(output)
    if svg is None:
        return False
    data = output['data']
    plain = _text(data.get('text/plain', 'drawing'))
    png, width = png_of(svg)
    output['data'] = {'image/png': png, 'image/svg+xml': svg, 'text/plain': plain}
    output['metadata'] = {'image/png': {'width': width}}      # front-ends scale it down to fit the cell
    return True


def widget_models(value, found=None) -> set:
    """Model ids a widget state references (IPY_MODEL_...), found anywhere in `value`."""
    found = set() if found is None else found
    if isinstance(value, dict):
        for v in value.values():
            widget_models(v, found)
    elif isinstance(value, list):
        for v in value:
            widget_models(v, found)
    elif isinstance(value, str) and value.startswith('IPY_MODEL_'):
        found.add(value[len('IPY_MODEL_'):])
    return found


def prune_widget_state(nb) -> None:
    """Keep only the widget models that a stored widget view still reaches (none, once steppers are pictures)."""
    key = 'application/vnd.jupyter.widget-state+json'
    state = nb.metadata.get('widgets', {}).get(key)
    if not state:
        return
    models = state.get('state', {})
    todo = [o['data'][WIDGET]['model_id'] for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', ()) if WIDGET in o.get('data', {})]
    keep = set()
    while todo:
        m = todo.pop()
        if m in models and m not in keep:
            keep.add(m)
            todo.extend(widget_models(models[m]))
    state['state'] = {m: v for m, v in models.items() if m in keep}
    if not state['state']:
        del nb.metadata['widgets']


def convert(nb) -> int:
    """Make every drawing output of `nb` static; return how many."""
    count = 0
    for cell in nb.cells:
        if cell.cell_type == 'code':
            count += sum(make_static(o) for o in cell.outputs if o.get('output_type') in
                         ('display_data', 'execute_result'))
    prune_widget_state(nb)
    return count


def main(paths) -> int:
    for p in map(Path, paths):
        nb = nbformat.read(p, as_version=4)
        n = convert(nb)
        nbformat.write(nb, p)
        print(f'{n:3d} drawings stored as pictures  {p}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
