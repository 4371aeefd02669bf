"""`memory_timeline(program)`: a matplotlib plot of which value lives in which buffer at each step
(matplotlib is imported only when it is called).
"""
from __future__ import annotations

from ..core.errors import MinigradError, InputError


# ------------------------------------------------------------------ memory
def memory_timeline(program, ax=None):
    """A matplotlib Figure: which value lives in which buffer at each step of the program's schedule.

    Uses ``program.memory`` (``assignment`` name -> buffer, ``liveness`` name -> (first, last step),
    ``schedule``); values with the same colour row share one buffer.
    >>> fig = mg.viz.memory_timeline(mg.compile([y], [x]))    # doctest: +SKIP
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise MinigradError('memory_timeline needs matplotlib: pip install matplotlib') from None
    mem = getattr(program, 'memory', None)
    if mem is None:
        raise InputError(f'memory_timeline: expected a compiled Program (mg.compile(outputs, inputs)), got '
                         f'{type(program).__name__} {program!r:.40}')
    assign, live, schedule = mem.assignment, mem.liveness, mem.schedule      # a compiler.memory.MemoryPlan
    if not assign or not live:
        raise MinigradError('memory_timeline: program.memory has no buffer assignment/liveness to plot')
    n = max(len(schedule), 1 + max((e for _, e in live.values() if e is not None), default=0))
    rows = {b: j for j, b in enumerate(dict.fromkeys(assign.values()))}
    if ax is None:
        ax = plt.subplots(figsize=(max(6.0, 1.1 * n + 2), 0.45 * len(rows) + 1.6))[1]
    cmap = plt.colormaps['tab20']
    for name, b in assign.items():
        start, end = live.get(name, (-1, None))
        end = n - 1 if end is None else end                    # outputs live to the end
        ax.barh(rows[b], end - start + 0.8, left=start - 0.4, color=cmap(rows[b] % 20), edgecolor='black',
                height=0.6, alpha=0.85)
        ax.text(start - 0.35, rows[b], name, va='center', fontsize=8)
    ax.set_yticks(list(rows.values()), [f'buffer {b}' for b in rows])
    ax.set_xticks(range(-1, n), ['inputs'] + [str(s) if len(str(s)) < 28 else str(s)[:25] + '...'
                                             for s in (schedule or range(n))], rotation=50, ha='right', fontsize=8)
    ax.set_xlabel('schedule step')
    ax.set_title(f'memory plan: {mem.num_buffers} buffers, {mem.peak_bytes} bytes (naive: '
                 f'{mem.naive_num_buffers} buffers, {mem.naive_peak_bytes} bytes)', fontsize=10)
    ax.invert_yaxis()
    ax.figure.tight_layout()
    return ax.figure
