"""`PathStepper`: a derivative as the sum over paths of products of local derivatives (lesson 01).
"""
from __future__ import annotations

import numpy as np

from ..core.errors import MinigradError, InputError
from ..core.tensor import Tape, Tensor, no_grad
from .frames import Frame, Layout, Player, from_tape_or_tensor, vertex_name


# ------------------------------------------------------------------ derivatives as sums over paths
class PathStepper(Player):
    """A derivative as a sum over paths (lesson 01): one frame per path from `wrt` up to the output, with the
    product of the local derivatives on its edges, then the sum, which is what backward() computes.

    ``PathStepper(tape, wrt)`` or ``PathStepper(y, wrt)`` (y's graph not freed yet); scalar values only.
    Every edge into an op is labelled with its local derivative (written ∂).

    >>> import minigrad as mg
    >>> w = mg.tensor(1.0, requires_grad=True, name='w'); x = mg.tensor(2.0, requires_grad=True, name='x')
    >>> with mg.Tape() as tape:
    ...     y = (w + x) * (w + 1)
    >>> [f.contribution for f in mg.viz.PathStepper(tape, w).frames if f.kind == 'path']
    [2.0, 3.0]
    """

    def __init__(self, obj, wrt, root=None, max_paths=64, max_nodes=150):
        if not isinstance(obj, (Tape, Tensor)):
            raise InputError(f'PathStepper: expected a Tape or a Tensor, got {type(obj).__name__}')
        d, steps, root_key = from_tape_or_tensor(obj, root, 'PathStepper')
        start = d._keys.get(id(wrt))
        if start not in d.vertices or root_key is None:
            raise MinigradError(f"PathStepper: '{getattr(wrt, 'name', wrt)}' is not an input of this graph")
        local, nxt = _local_derivatives(d, steps)
        paths, todo = [], [(start, [start], [], [])]      # depth-first, without recursion
        while todo:
            k, keys, edges, factors = todo.pop()
            if k == root_key:
                paths.append((keys, edges, factors))
                if len(paths) > max_paths:
                    raise MinigradError(f'PathStepper: more than {max_paths} paths; their number grows '
                                        f'exponentially with depth, which is why backward() never lists them')
                continue
            for n_in, n_out, s in reversed(nxt.get(k, [])):
                out = s.outs[0]
                todo.append((out, keys + [s.key, out], edges + [n_in, n_out], factors + [local[n_in]]))
        y, x = vertex_name(d, root_key), vertex_name(d, start)
        d.edges = [(a, b, st, f'∂ {local[n]:.4g}' if n in local else lab)      # each edge into an op: its ∂
                   for n, (a, b, st, lab) in enumerate(d.edges)]
        everything = set(d.vertices)
        frames = [Frame('start', f'Each edge into an op is labelled with its local derivative ∂. ∂{y}/∂{x} is the '
                        f'sum, over every path from {x} up to {y}, of the product of the ∂ labels along the path. '
                        f'There are {len(paths)} such paths.', {start, root_key})]
        total, products = 0.0, []
        for i, (keys, edges, factors) in enumerate(paths, 1):
            prod = float(np.prod(factors))
            total += prod
            products.append(f'{prod:.4g}')
            route = ' → '.join(vertex_name(d, k) for k in keys if d.vertices[k]['kind'] == 'data')
            frames.append(Frame('path', f'Path {i} of {len(paths)}: {route}. Product of its local derivatives: '
                                f'{" × ".join(f"{v:.4g}" for v in factors)} = {prod:.4g}. Running sum: {total:.4g}.',
                                set(keys) | set(edges), dim=everything - set(keys), target=root_key,
                                contribution=prod))
        on_paths = set().union(*(set(k) | set(e) for k, e, _ in paths))
        frames.append(Frame('sum', f'Sum over the {len(paths)} paths: {" + ".join(products) or "0"} = {total:.4g} '
                            f'= ∂{y}/∂{x}, the number backward() puts in {x}.grad.', on_paths,
                            dim=everything - {k for k in on_paths if isinstance(k, str)}, contribution=total))
        self.total = total
        self._setup(frames, Layout(d, frames, max_nodes=max_nodes))


def _local_derivatives(d, steps):
    """edge number -> local derivative, and data key -> [(edge in, edge out, step)] (scalar graphs only)."""
    local, nxt = {}, {}
    with no_grad():
        for s in steps:
            if any(np.size(v) != 1 for v in (*s.in_vals, *s.out_vals) if v is not None):
                raise MinigradError('PathStepper: every value must be a scalar (a local derivative of a '
                                    'tensor op is a whole Jacobian); use Stepper for tensors')
            ins = [np.array(v, dtype=float) if v is not None else None for v in s.in_vals]
            out = np.array(s.out_vals[0], dtype=float)
            contrib = s.prim.vjp(tuple(s.needs), np.ones_like(out), out, *ins, **s.params)
            out_edge = next(n for n, e in enumerate(d.edges) if e[:2] == (s.key, s.outs[0]))
            edges_in = (n for n, e in enumerate(d.edges) if e[1] == s.key)      # one per input drawn, in order
            for k, c, need in zip(s.ins, contrib, s.needs):
                if k is None:
                    continue
                n = next(edges_in)
                if need and c is not None:
                    local[n] = float(np.asarray(getattr(c, 'data', c)).reshape(()))
                    nxt.setdefault(k, []).append((n, out_edge, s))
    return local, nxt
