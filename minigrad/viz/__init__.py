"""Visualisation: graphviz drawings of every graph, SVG rendering, ipywidgets steppers, memory plots.

``mg.draw(obj)`` draws; ``Stepper``/``PassStepper`` step through a computation or the compiler passes;
``PathStepper``, ``LoopStepper`` and ``TraceStepper`` show paths, a while_loop's stack and a tracer at work;
``memory_timeline(program)`` plots the memory plan. Widgets/matplotlib are imported only when used.
"""
from .draw import draw, render_svg, load_renderer, mimebundle, Drawing, to_digraph, preview  # noqa: F401 (public helpers)

_LAZY = {'Frame': 'frames', 'Layout': 'frames', 'Stepper': 'stepper', 'PassStepper': 'pass_stepper',
         'pass_diff': 'pass_stepper', 'PathStepper': 'path_stepper', 'LoopStepper': 'loop_stepper',
         'TraceStepper': 'trace_stepper', 'memory_timeline': 'memory'}      # name -> the file defining it
__all__ = ['draw', 'render_svg', 'load_renderer', 'mimebundle', *_LAZY]


def __getattr__(name):          # lazy: importing minigrad must not need ipywidgets or matplotlib
    if name in _LAZY:
        from . import frames, stepper, pass_stepper, path_stepper, loop_stepper, trace_stepper, memory  # noqa: F401
        return getattr(globals()[_LAZY[name]], name)        # (importing a submodule binds it in the package)
    raise AttributeError(f'module minigrad.viz has no attribute {name!r}')
