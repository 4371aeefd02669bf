"""Lowering: flatten the optimised graph into a schedule of steps over values.

Nodes that stand for a sub-graph (a ``fused`` group, an ``fma``: their record's
``decompose``) are inlined on the numpy backend, one step per primitive; so for
``y = w*x + b`` (one fma node) the schedule is ``y:mul = mul(w, x); y = add(y:mul, b)``.
On the numba backend each becomes one ``kernel`` step (kernels.py): ``y = kernel(w, x, b)``,
and ``y:mul`` never exists (a matmul heading a group stays a BLAS call before its kernel). Each value gets a kind, read
from its op's record: a planned buffer (``temp``: ufuncs and ops that write into ``out=``),
a ``view`` of its input, Variable ``state``, or a fresh array numpy returns (``alias``).
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import Aval, normalize_axes
from ..core.errors import MinigradError
from ..core.graph import Graph, PLACEHOLDER, CONSTANT, VARIABLE, ASSIGN, where_text
from .kernels import ROW_SUM, build_kernel, why_not
from .ops import kernel_call, fused
from .rules import ANY_ORDER
from .rewrite import extract, stand_in


class Value:
    """One array in the schedule. kind: input | const | state | temp | view | alias."""
    __slots__ = ('name', 'shape', 'dtype', 'kind', 'ref', 'bases', 'buf', 'dbuf', 'first', 'last', 'const', 'contig',
                 'via')

    def __init__(self, name, shape, dtype, kind, bases=()):
        self.name, self.shape, self.dtype, self.kind, self.bases = name, shape, np.dtype(dtype), kind, list(bases)
        self.ref, self.buf, self.dbuf, self.first, self.last, self.const = None, None, None, -1, -1, None
        self.contig = False         # an input a kernel reads: made C-contiguous when it is fed
        self.via = None             # a view: the record of the op that made it

    @property
    def known(self):
        return self.shape is not None and None not in self.shape

    @property
    def nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize if self.known else None


class Step:
    """``outs = prim(*ins, **params)``; ``inplace``: a result may take a dying input's buffer."""
    __slots__ = ('prim', 'ins', 'outs', 'params', 'inplace', 'where')

    def __init__(self, prim, ins, outs, params, where=None):
        self.prim, self.ins, self.outs, self.params = prim, ins, outs, params
        self.inplace = bool(prim.ufunc) or prim is kernel_call
        self.where = where              # the node's where_text (for run-time errors)

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
    def __init__(self, inputs, variables, backend):
        self.vals, self.allv, self.steps, self.variables, self.backend = {}, [], [], variables, backend
        self.made_by = {}           # id(value) -> the kernel step computing it
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
                if self.backend == 'numba' and (node.prim is fused or why_not(node) is None):
                    self.kernel(sub)      # (an integer fma stays two numpy calls; fuse noted why)
                else:
                    self.walk(sub)
                self.vals.update({id(o): self.vals[id(so)] for o, so in zip(outs, sub.outputs)})
            elif not self.absorb(node):
                ins = [self.vals[id(i)] for i in node.inputs]
                kind = value_kind(node.prim, node.params)
                res = [self.new(x, kind, ins if kind in ('view', 'alias') else ()) for x in outs]
                for r in res:
                    r.via = node.prim if kind == 'view' else None
                self.vals.update(zip(map(id, outs), res))
                self.steps.append(Step(node.prim, ins, res, node.params, where_text(node)))


    def kernel(self, sub):
        """A group as one kernel step; ops without a kernel rule (a heading matmul, constants) run first."""
        head = Graph('head', sub.parent)
        head.nodes = [n for n in sub.nodes if n.prim is not PLACEHOLDER and n.prim.kernel is None]
        self.walk(head)
        inside = [n for n in sub.nodes if n.prim is not PLACEHOLDER and n.prim.kernel is not None]
        made = {id(o) for n in inside for o in n.outputs}
        ext = []

        def read(g, s, user):           # the kernel reads the value as kernel_input gives it
            ext.append(self.kernel_input(self.vals[id(s)], len(user.outputs[0].shape)))
            return stand_in(g, s, ext[-1].shape)
        results = [s for s in sub.outputs if id(s) in made]
        g, _ = extract(inside, results, 'kernel', read=read)
        layouts = ['A' if v.kind == 'view' and v.shape else 'C' for v in ext]
        res = [self.new(s, 'temp') for s in results]
        self.vals.update(zip(map(id, results), res))
        self.steps.append(Step(kernel_call, ext, res, {'kernel': layouts, 'graph': g},    # built by finish()
                               '; '.join(sorted({where_text(n) for n in inside if n.where}))))
        self.made_by.update((id(r), self.steps[-1]) for r in res)

    def absorb(self, node) -> bool:
        """A reduction of a kernel's result (a bias gradient, softmax's max and row sum, a loss's total),
        accumulated by that kernel instead of a second pass over the result, equal to numpy's: a max
        (ANY_ORDER) over any one axis; a sum over the leading axis (numpy adds the rows in the same order),
        or, added in numpy's pairwise order (``rows``), over the last axis or over all axes, of up to ROW_SUM
        elements."""
        # speed: the reduction joins the kernel computing its input, not a numpy reduce over the stored result
        v = self.vals.get(id(node.inputs[0])) if len(node.inputs) == 1 else None
        st, o = self.made_by.get(id(v)), node.outputs[0]
        if st is None or node.prim.unit is None or why_not(node) or o.dtype != v.dtype or v.dtype.itemsize < 4 \
                or not v.shape or int(np.prod(v.shape)) < 2:
            return False
        nd = len(v.shape)
        axes = normalize_axes(node.params.get('axis'), nd, node.op) or tuple(range(nd))     # None: every axis
        n = int(np.prod([v.shape[a] for a in axes]))
        rows = node.prim not in ANY_ORDER and 1 < n <= ROW_SUM and (axes == (nd - 1,) or len(axes) == nd)
        one = len(axes) == 1 and nd > 1 and v.shape[axes[0]] > 1
        if not (rows or one and (axes == (0,) or node.prim in ANY_ORDER)):
            return False
        params = dict(node.params, axis=axes, keepdims=bool(node.params.get('keepdims')), rows=rows)
        g = st.params['graph']
        g.outputs += g.add_node(node.prim, [g.outputs[st.outs.index(v)]], params, [Aval(o.shape, o.dtype)], name=o.name)
        st.outs.append(self.new(o, 'temp'))
        self.vals[id(o)] = st.outs[-1]
        return True


    def kernel_input(self, v, ndim):
        """`v` as a kernel reads it: C-contiguous with its own dtype (a view is read through its strides,
        but a view of one element, such as the broadcast gradient of a sum, is read as that element)."""
        if v.kind == 'view' and v.bases[0].known and v.bases[0].nbytes == v.dtype.itemsize \
                and len(v.bases[0].shape) <= ndim and v.bases[0].dtype == v.dtype:
            return self.kernel_input(v.bases[0], ndim)
        if v.kind == 'view' and v.via.kernel is not None and v.bases[0].known and v.bases[0].dtype == v.dtype \
                and len(v.bases[0].shape) <= ndim:   # speed: the loop reads broadcast_to's base, no view step
            return self.kernel_input(v.bases[0], ndim)
        if v.kind == 'const':         # its own copy: graph constants are read-only arrays (numba types those apart)
            c = self.new(v, 'const')
            c.const = np.array(v.const, v.dtype, order='C').reshape(v.shape)
            return c
        v.contig = v.contig or v.kind in ('input', 'alias', 'state')
        return v


def flatten(graph, inputs, variables, backend='numpy'):
    """The schedule: (values by symbol id, all values, steps); kernels are built later (build_kernels)."""
    f = _Flattener(inputs, variables, backend)
    f.walk(graph)
    return f.vals, f.allv, _drop_unread_views(f.steps, [f.vals[id(s)] for s in graph.outputs])


def build_kernels(steps, apart) -> list:
    """Build each kernel step's loop once memory is planned (its graph is complete: reductions it absorbed
    are in it). A result that took an input's buffer reads that input from its own array: two parameters
    that overlap make LLVM run the scalar loop (3-5x slower). ``apart``: ids of results written elsewhere."""
    # speed: an in-place result's input read from the result's own array (one parameter: the loop vectorises)
    kernels, memo = [], {}
    for st in steps:
        if st.prim is kernel_call:
            alias = {[id(i) for i in st.ins].index(id(o.ref)): j for j, o in enumerate(st.outs)
                     if o.ref is not None and id(o) not in apart and sum(i is o.ref for i in st.ins) == 1}
            st.params['alias'] = alias
            st.params['kernel'] = build_kernel(st.params['graph'], st.params['kernel'], alias, memo)
            kernels.append(st.params['kernel'])
    return kernels


def _drop_unread_views(steps, outputs) -> list:
    """The steps without views nobody reads (a kernel reads a broadcast view's base instead)."""
    # speed: a broadcast view only kernels read (through its base) is not made at all
    read, kept = {id(v) for v in outputs}, []
    for st in reversed(steps):
        if all(o.kind == 'view' and id(o) not in read for o in st.outs):
            continue
        read.update(id(i) for i in st.ins)
        kept.append(st)
    return kept[::-1]
