"""Primitives the compiler introduces. Real op-table records (impl + shape rule), so the
reference interpreter runs an optimised graph exactly like the original one.

They have no VJP: optimised graphs are for running, differentiate before compiling.
"""
from __future__ import annotations

import functools

import numpy as np

from ..core import Aval, Primitive, PRIMITIVES, elementwise_rule
from ..interpreter import run_graph


def _prim(name, impl, rule, doc, **flags) -> Primitive:
    p = Primitive(name, impl, rule, None, doc=doc, **flags)
    PRIMITIVES[name] = p
    return p


def _ew(name, impl, doc):
    return _prim(name, impl, functools.partial(elementwise_rule, _op=name), doc, elementwise=True)


fma = _ew('fma', lambda a, b, c: np.add(np.multiply(a, b), c), 'a * b + c in one node (mul+add fusion)')
sub = _ew('sub', np.subtract, 'x - y (add(x, neg(y)) simplified)')
# fmax, not maximum: like where(x > 0, x, 0) it maps NaN to 0
relu = _ew('relu', lambda x: np.fmax(x, np.zeros((), x.dtype)), 'max(x, 0): where(x > 0, x, 0) simplified')


def _fused_impl(*xs, graph, kind='elementwise'):
    return tuple(run_graph(graph, list(xs)))


def _fused_rule(*avals, graph, kind='elementwise'):
    return [Aval(o.shape, o.dtype) for o in graph.outputs]


fused = _prim('fused', _fused_impl, _fused_rule,
              'a group of ops run as one kernel; params: graph (the sub-graph: inputs, nodes, outputs), '
              "kind ('elementwise' or 'matmul_epilogue')", multiple_results=True)

group = _prim('group', lambda *xs: np.array(True), lambda *avals: Aval((), np.dtype(bool)),
              'runs its inputs (e.g. assign ops) and returns True, as tf.group')
