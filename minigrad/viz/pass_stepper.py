"""`PassStepper`: a Program's compiler passes, one frame per pass on the union of their snapshots;
`pass_diff`: the listing before and after one pass.
"""
from __future__ import annotations

from ..core.errors import MinigradError, InputError
from ..core.graph import Node
from .draw import Drawing, from_graph
from .frames import Frame, Layout, Player


# ------------------------------------------------------------------ compiler passes
def _sig(node):
    return node.op, tuple(o.name for o in node.outputs)


def _stable(obj):
    """What identifies a drawn thing across compiler snapshots: passes copy nodes, keeping ops and names."""
    if isinstance(obj, Node):
        return ('op',) + _sig(obj)
    return 'val', obj.name, {'constant': 'const', 'placeholder': 'in', 'variable': 'in'}.get(obj.op, 'val')


class _Union:
    """The union of several drawings of one evolving graph, each vertex under a key stable across them."""

    def __init__(self):
        self.d, self.keys, self.edge_ids = Drawing(), {}, {}

    def add(self, d: Drawing):
        """Merge one snapshot's drawing; return the (vertex keys, edge numbers, cluster keys) it shows."""
        seen = set()

        def key(sig):
            while sig in seen:             # two things of one snapshot that look alike: keep both
                sig += ('again',)
            seen.add(sig)
            return self.keys.setdefault(sig, f'u{len(self.keys)}')

        cmap = {}
        for c in d.clusters:
            head, _, tail = c.partition('_')
            cmap[c] = key(('cluster', _stable(d.objects[head]) if head in d.objects else head, tail))
        kmap = {}
        for k, v in d.vertices.items():
            K = kmap[k] = key(_stable(d.objects[k]))
            old = self.d.vertices.get(K, {})         # a value that is fused later stays inside its kernel's box
            self.d.vertices[K] = dict(v, cluster=cmap.get(v.get('cluster')) or old.get('cluster'))
        for c, K in cmap.items():
            self.d.clusters[K] = dict(d.clusters[c], parent=cmap.get(d.clusters[c].get('parent')))
        edges, count = set(), {}
        for a, b, style, label in d.edges:
            if a not in kmap or b not in kmap:
                continue
            ident = (kmap[a], kmap[b], style)
            count[ident] = count.get(ident, -1) + 1              # the n-th parallel edge keeps its number
            if ident + (count[ident],) not in self.edge_ids:
                self.edge_ids[ident + (count[ident],)] = len(self.d.edges)
                self.d.edges.append((*ident, label))
            edges.add(self.edge_ids[ident + (count[ident],)])
        return set(kmap.values()), edges, set(cmap.values())


class PassStepper(Player):
    """One frame per compiler pass: the graph after it, with added/fused nodes highlighted, removed ones ghosted.

    All snapshots share one layout (their union), so a node keeps its place from pass to pass and a fused
    kernel appears as a box around the nodes it swallowed.

    >>> import minigrad as mg                              # doctest: +SKIP
    >>> s = mg.viz.PassStepper(mg.compile([y], [x]))     # doctest: +SKIP
    """

    def __init__(self, program, max_nodes=150):
        if not isinstance(getattr(program, 'history', None), list):
            raise InputError(f'PassStepper: expected a compiled Program (mg.compile(outputs, inputs)), got '
                             f'{type(program).__name__} {program!r:.40}')
        history = program.history
        if not history:
            raise MinigradError('PassStepper: this program has no pass history (program.history is empty)')
        union = _Union()
        shown = [union.add(from_graph(g)[0]) for _, g in history]
        everything = set(union.d.vertices)
        frames, old = [], None                      # old: the previous snapshot's nodes
        for i, (name, g) in enumerate(history):
            cur = {_sig(n): n for n in g.nodes}
            added = [n for s, n in cur.items() if old is not None and s not in old]
            removed = [n for s, n in (old or {}).items() if s not in cur]
            fused = [n for n in added if n.prim.kind == 'compiler' and n.prim.decompose is not None]
            ch = dict(added=len(added), removed=len(removed), fused=len(fused), nodes=len(g.nodes))
            cap = (f'The graph before optimisation: {len(g.nodes)} nodes.' if i == 0 else
                   f"Pass {i} of {len(history) - 1}, '{name}': removed {len(removed)} node(s), added "
                   f'{len(added)}, fused {len(fused)}; {len(g.nodes)} nodes now.')
            declined = program.stats.get('declined', {}).get(name, []) if i else []
            if declined:                             # what the pass chose not to do, and why
                cap += ' Declined: ' + '; '.join(declined[:3]) + (f' (+{len(declined) - 3} more)'
                                                                   if len(declined) > 3 else '') + '.'
            if i == len(history) - 1 and getattr(program, 'backend', None):
                cap += (f' Backend {program.backend}: ' + ('each fused group runs as one compiled loop kernel.'
                        if program.backend == 'numba' else 'each fused group runs as one numpy call per op.'))
            V, E, C = shown[i]
            pV, pE, pC = shown[i - 1] if i else (V, E, C)
            ghost, ghost_e = pV - V, pE - E
            title = 'the graph as built' if i == 0 else f'after {name}'
            frames.append(Frame('pass', cap, (V - pV) | (C - pC), graph=g, changes=ch, op=name, title=title,
                                hidden=everything - V - ghost, ghost=ghost, clusters=C,
                                shown_edges=E | ghost_e, ghost_edges=ghost_e))
            old = cur
        self.program = program
        self._setup(frames, Layout(union.d, frames, max_nodes=max_nodes))


def pass_diff(program, pass_name) -> str:
    """The listing before and after one compiler pass, lines marked '-' (removed) and '+' (added)."""
    names = [n for n, _ in program.history]
    if pass_name not in names[1:]:
        raise MinigradError(f'pass_diff: no pass {pass_name!r} in program.history ({", ".join(names[1:])})')
    i = names.index(pass_name, 1)
    before, after = str(program.history[i - 1][1]).splitlines(), str(program.history[i][1]).splitlines()
    return '\n'.join([f'--- before {pass_name} ({len(before)} lines)']
                     + [('  ' if line in after else '- ') + line for line in before]
                     + [f'+++ after {pass_name} ({len(after)} lines)']
                     + [('  ' if line in before else '+ ') + line for line in after])
