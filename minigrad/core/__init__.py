"""The plain engine: a lesson of its own, closed under imports (it imports nothing of minigrad outside
core/, and nothing but numpy outside minigrad).

Nine teaching modules, read in this order: primitive (the record and dispatch by value kind), errors,
ops (each primitive's impl, shape rule and VJP), functional (the composites), autodiff (the reverse
sweep), tensor (the tape), graph (the static graph), interpreter (what a graph means), control (cond,
while_loop). Their helpers: dtypes, validate, names, conversions, inplace, creation.

>>> from minigrad.core import PRIMITIVES
>>> 'mul' in PRIMITIVES and 'sub' not in PRIMITIVES      # sub is a composite: add and mul
True
"""
from .primitive import (Aval, OPS, PRIMITIVES, Primitive, apply, aval_of, elementwise_rule,
                        register_primitive, topo_order)
