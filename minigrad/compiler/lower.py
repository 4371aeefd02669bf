"""Lowering: flatten the optimised graph into a schedule of steps over values.

Nodes that stand for a sub-graph (a ``fused`` group, an ``fma``: their record's
``decompose``) are inlined, one step per primitive; so for ``y = w*x + b`` (one fma node)
the schedule is ``y:mul = mul(w, x); y = add(y:mul, b)``. Each value gets a kind, read
from its op's record: a planned buffer (``temp``: ufuncs and ops that write into ``out=``),
a ``view`` of its input, Variable ``state``, or a fresh array numpy returns (``alias``).
"""
from __future__ import annotations

import numpy as np

from ..errors import MinigradError
from ..graph import PLACEHOLDER, CONSTANT, VARIABLE, ASSIGN


class Value:
    """One array in the schedule. kind: input | const | state | temp | view | alias."""
    __slots__ = ('name', 'shape', 'dtype', 'kind', 'ref', 'bases', 'buf', 'dbuf', 'first', 'last', 'const')

    def __init__(self, name, shape, dtype, kind, bases=()):
        self.name, self.shape, self.dtype, self.kind, self.bases = name, shape, np.dtype(dtype), kind, list(bases)
        self.ref, self.buf, self.dbuf, self.first, self.last, self.const = None, None, None, -1, -1, None

    @property
    def known(self):
        return self.shape is not None and None not in self.shape

    @property
    def nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize if self.known else None


class Step:
    """``outs = prim(*ins, **params)``."""
    __slots__ = ('prim', 'ins', 'outs', 'params')

    def __init__(self, prim, ins, outs, params):
        self.prim, self.ins, self.outs, self.params = prim, ins, outs, params

    @property
    def op(self):
        return self.prim.name


def value_kind(prim, params) -> str:
    if prim is ASSIGN:
        return 'state'
    if prim.is_view(params):
        return 'view'
    return 'temp' if prim.ufunc or prim.emit else 'alias'


class _Flattener:
    def __init__(self, inputs, variables):
        self.vals, self.allv, self.steps, self.variables = {}, [], [], variables
        for s in inputs:
            self.vals[id(s)] = self.new(s, 'input')

    def new(self, sym, kind, bases=()):
        v = Value(sym.name, sym.shape, sym.dtype, kind, bases)
        self.allv.append(v)
        return v

    def walk(self, g):
        for node in g.nodes:
            outs = node.outputs
            if node.prim is PLACEHOLDER:
                if id(outs[0]) not in self.vals:
                    raise MinigradError(f"compile: placeholder '{outs[0].name}' is not an input")
            elif node.prim is CONSTANT or node.prim is VARIABLE:
                v = self.vals[id(outs[0])] = self.new(outs[0], 'const' if node.prim is CONSTANT else 'state')
                v.const = node.params['value'] if node.prim is CONSTANT else \
                    self.variables.index(id(node.params['initial_value']))
            elif node.prim.decompose is not None:       # a compiler node: inline what it stands for
                sub = node.prim.decompose(node)
                self.vals.update({id(p): self.vals[id(i)] for p, i in zip(sub.inputs, node.inputs)})
                self.walk(sub)
                self.vals.update({id(o): self.vals[id(so)] for o, so in zip(outs, sub.outputs)})
            else:
                ins = [self.vals[id(i)] for i in node.inputs]
                kind = value_kind(node.prim, node.params)
                res = [self.new(x, kind, ins if kind in ('view', 'alias') else ()) for x in outs]
                self.vals.update(zip(map(id, outs), res))
                self.steps.append(Step(node.prim, ins, res, node.params))


def flatten(graph, inputs, variables):
    """The schedule: (values by symbol id, all values, steps)."""
    f = _Flattener(inputs, variables)
    f.walk(graph)
    return f.vals, f.allv, f.steps
