"""The reverse sweep, shared by the tape (Tensor.backward) and static graphs (mg.gradients).

Both walk their graph from the output back to the inputs, call each primitive's
VJP with the cotangent of its output, and add up the cotangents that reach the
same value along different paths (the 'sum over paths' of the chain rule).
"""
from __future__ import annotations

import itertools
import threading
from typing import Callable, Iterable

import numpy as np

from . import ops as P


class _State(threading.local):
    """Grad mode and the open tapes: each thread has its own (as PyTorch's grad mode). Kept here, below
    tensor.py and graph.py, so that the tape, graph building and tracing all read the same mode."""
    def __init__(self):
        self.grad_enabled = True
        self.tapes: list = []


state = _State()
# tape sequence numbers: creation order is a topological order
next_seq = itertools.count().__next__


def reverse_sweep(order: Iterable, ct: dict, out_keys: Callable | None, call_vjp: Callable,
                  on_cotangent: Callable | None = None) -> dict:
    """Propagate cotangents through `order` (consumers before producers).

    ct maps id(value) -> cotangent and is updated in place; what is left in it at
    the end are the cotangents of values no vertex in `order` produced (leaves/xs).
    ``out_keys(v)`` gives the values v produces, ``call_vjp(v, gs)`` yields
    ``(input_value, cotangent)`` pairs. With ``out_keys=None`` v is its own single value
    (a TapeNode) and ``call_vjp(v, g)`` gets the cotangent itself.
    Cotangents arriving twice are added.
    """
    pop, get = ct.pop, ct.get
    # ids of sums this sweep made: no one else holds them, so add into them in place
    owned = set()
    for v in order:
        if out_keys is None:            # v produces one value, keyed by v itself (a TapeNode)
            g = pop(id(v), None)
            if g is None:
                continue                # nothing flows back through v
            if owned:
                owned.discard(id(g))    # a VJP may hand g on unchanged (add): not ours any more
            if on_cotangent is not None:
                on_cotangent(v, (g,))
            pairs = call_vjp(v, g)
        else:
            gs = tuple(pop(id(k), None) for k in out_keys(v))
            if all(g is None for g in gs):
                continue
            for g in gs:
                owned.discard(id(g))
            if on_cotangent is not None:
                on_cotangent(v, gs)
            pairs = call_vjp(v, gs)
        for parent, gi in pairs:
            if gi is None or parent is None:
                continue
            k = id(parent)
            prev = get(k)
            if prev is None:
                ct[k] = gi
            elif id(prev) in owned and type(gi) is np.ndarray and gi.shape == prev.shape \
                    and gi.dtype == prev.dtype:
                np.add(prev, gi, out=prev)
            else:
                s = ct[k] = P.add(prev, gi)
                if type(s) is np.ndarray and s.flags.writeable:
                    owned.add(id(s))
    return ct
