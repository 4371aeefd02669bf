"""Graphviz in the browser: @viz-js/viz (Graphviz compiled to WebAssembly) in the Pyodide kernel's worker.

Used by `minigrad.viz.draw.render_svg` only in Pyodide (the JupyterLite build of the course), where there is no
`dot` program and no pygraphviz. Needs nothing but the standard library and Pyodide (no numpy), so
tests/test_lite.py can run it in a bare Pyodide in a browser worker.
"""
from __future__ import annotations

import importlib.resources
import importlib.util
import sys

from ..core.errors import MinigradError

# In Pyodide (the JupyterLite build of the course) there is no `dot` and no pygraphviz: drawings go through
# @viz-js/viz, Graphviz compiled to WebAssembly. It runs in the kernel's own Web Worker, next to Python, so
# render_svg stays a plain synchronous call that returns SVG text and everything built on it (mimebundles,
# steppers restyling one layout) works unchanged; rendering in the page instead would need a JupyterLab
# extension and would leave Python without the SVG. The JupyterLite site ships viz.js's UMD build
# (viz-global.js) inside a small wheel, `minigrad-vizjs`, installed by the notebooks' first cell.
PACKAGE = 'minigrad_vizjs'      # import name of that wheel; its viz-global.js defines globalThis.Viz
FILE = 'viz-global.js'
# JavaScript shared by the kernel worker and tests/test_lite.py: start viz.js once (Viz.instance() compiles
# the WebAssembly asynchronously) and keep the instance; then render DOT source to SVG text synchronously.
START = ('globalThis.minigradViz = globalThis.minigradViz || globalThis.Viz.instance().then('
         'v => { globalThis.minigradVizInstance = v; return v; })')
RENDER = "src => globalThis.minigradVizInstance.renderString(src, {format: 'svg', engine: 'dot'})"
_NOT_LOADED = ('the in-browser Graphviz (viz.js) is still loading. Run  await mg.viz.load_renderer()  in a cell '
               '(the first cell of every course notebook does), then draw again.')


def load_renderer():
    """Pyodide only: load viz.js into the kernel's worker and start it; returns a JS promise to ``await``
    (once it has resolved, drawings render synchronously). Elsewhere: None (dot/pygraphviz need no loading)."""
    if sys.platform != 'emscripten':
        return None
    import js                               # optional: Pyodide's bridge to the worker's JavaScript globals
    from pyodide.code import run_js         # optional: exists only in Pyodide
    if not hasattr(js, 'Viz'):
        if importlib.util.find_spec(PACKAGE) is None:
            raise MinigradError(f'drawing in the browser needs viz.js from the {PACKAGE.replace("_", "-")} '
                                f'wheel that the course\'s JupyterLite site ships: run  %pip install '
                                f'{PACKAGE.replace("_", "-")}  (the first cell of every course notebook does)')
        run_js(importlib.resources.files(PACKAGE).joinpath(FILE).read_text(encoding='utf-8'))
    return run_js(START)


def render(src: str) -> str:
    """SVG text (as Graphviz writes it) for DOT source, laid out and rendered by viz.js in this worker."""
    import js                               # optional: Pyodide's bridge to the worker's JavaScript globals
    from pyodide.code import run_js         # optional: exists only in Pyodide
    from pyodide.ffi import JsException, can_run_sync, run_sync   # optional: exists only in Pyodide
    if not hasattr(js, 'minigradVizInstance'):
        pending = load_renderer()
        if not can_run_sync():              # no JS Promise Integration here: the cell must await it
            raise MinigradError(_NOT_LOADED)
        run_sync(pending)
    try:
        return str(run_js(RENDER)(src))
    except JsException as e:                # viz.js reports Graphviz's error message
        raise MinigradError(f'Graphviz (viz.js) could not draw this graph: {e}') from e
