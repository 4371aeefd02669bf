"""Visualisation: graphviz drawings of every graph, SVG rendering, ipywidgets steppers, memory plots.

``mg.draw(obj)`` draws; ``Stepper``/``PassStepper`` step through a computation or the compiler passes;
``memory_timeline(program)`` plots the memory plan. Widgets/matplotlib are imported only when used.
"""
from .draw import draw, render_svg, mimebundle, Drawing, to_digraph, preview  # noqa: F401 (public helpers)

__all__ = ['draw', 'render_svg', 'mimebundle', 'Stepper', 'PassStepper', 'memory_timeline', 'Frame']


def __getattr__(name):          # lazy: importing minigrad must not need ipywidgets or matplotlib
    if name in ('Stepper', 'PassStepper', 'memory_timeline', 'Frame'):
        from . import stepper
        return getattr(stepper, name)
    raise AttributeError(f'module minigrad.viz has no attribute {name!r}')
