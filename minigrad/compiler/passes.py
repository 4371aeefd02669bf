"""Compiler passes: named pure functions Graph -> Graph.

Every pass builds a *new* graph (``rebuild``) and never mutates its input, so the
snapshots in ``program.history`` stay valid. Passes recurse into sub-graphs held in
node params (cond/while bodies), keeping their inputs, captures and outputs.
"""
from __future__ import annotations

import numpy as np

from .. import ops as P
from ..core import Aval, PRIMITIVES
from ..graph import Graph, Symbol, Variable, SOURCE_OPS, STATEFUL_OPS
from . import prims as C

FOLD_LIMIT = 4096          # constant folding never creates constants larger than this (elements)


# ------------------------------------------------------------------ rebuilding graphs
def _merge(recorded, rule):
    if recorded is None or rule is None:
        return recorded if rule is None else rule
    if len(recorded) != len(rule):
        return recorded
    return tuple(a if a is not None else b for a, b in zip(recorded, rule))


def emit(g: Graph, prim, ins, name=None, **params):
    """Add a node to `g`, inferring its output avals with the primitive's shape rule."""
    av = prim.shape_rule(*[Aval(s.shape, s.dtype) for s in ins], **params)
    outs = g.add_node(prim, ins, params, list(av) if prim.multiple_results else [av], name=name)
    return outs if prim.multiple_results else outs[0]


def copy_node(g: Graph, node, ins, params=None) -> list:
    """Copy `node` into `g` with new inputs; shapes are re-inferred (this resolves None dims)."""
    params = node.params if params is None else params
    avals = [Aval(o.shape, o.dtype) for o in node.outputs]
    same = params is node.params and all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(ins, node.inputs))
    if not same and node.op not in SOURCE_OPS and node.op not in STATEFUL_OPS:   # same inputs: same outputs
        r = node.prim.shape_rule(*[Aval(s.shape, s.dtype) for s in ins],
                                 **{k: v for k, v in params.items() if not k.startswith('_')})
        r = list(r) if node.prim.multiple_results else [r]
        avals = [Aval(_merge(a.shape, b.shape), a.dtype) for a, b in zip(avals, r)]
    outs = g.add_node(node.prim, ins, params, avals, name=node.outputs[0].name)
    for o, old in zip(outs[1:], node.outputs[1:]):
        o.name = g.unique_name(old.name)
    if node.op == 'variable':
        object.__setattr__(outs[0], '__class__', Variable)
    return outs


def _subgraphs(params):
    return bool(params) and any(isinstance(v, Graph) for v in params.values())


def rebuild(graph: Graph, rewrite=None, sub_pass=None, shapes=None) -> Graph:
    """A copy of `graph`. ``rewrite(node, new_inputs, new_graph)`` may return replacement
    symbols for the node's outputs (or None to copy it); ``sub_pass`` is applied to
    sub-graphs in params; ``shapes`` maps id(old placeholder) -> a more precise shape."""
    new = Graph(graph.name, graph.parent)
    env: dict[int, Symbol] = {}
    for node in graph.nodes:
        ins = [env[id(i)] for i in node.inputs]
        params = node.params
        if sub_pass is not None and _subgraphs(params):
            params = {k: _sub(sub_pass, v, env, new) if isinstance(v, Graph) else v for k, v in params.items()}
        res = rewrite(node, ins, new) if rewrite is not None else None
        if res is None:
            if shapes and id(node.outputs[0]) in shapes:
                o = node.outputs[0]
                res = new.add_node(node.prim, [], params, [Aval(shapes[id(o)], o.dtype)], name=o.name)
            else:
                res = copy_node(new, node, ins, params)
        env.update(zip(map(id, node.outputs), res))
    new.inputs = [env[id(s)] for s in graph.inputs]
    new.outputs = [env[id(s)] for s in graph.outputs]
    new.captures = [(outer, env[id(inner)]) for outer, inner in graph.captures]
    return new


def _sub(pass_fn, sub: Graph, outer_env, parent) -> Graph:
    out = pass_fn(sub)
    if out is not sub:       # point captures/parent at the new enclosing graph
        out.parent = parent
        out.captures = [(outer_env.get(id(o), o), i) for o, i in out.captures]
    return out


def _unchanged(graph: Graph) -> bool:
    """A pass that found nothing to do returns its input graph (no sub-graphs to recurse into)."""
    return not any(_subgraphs(n.params) for n in graph.nodes)


def _rewrite(graph: Graph, rw, sub_pass) -> Graph:
    """rebuild(graph, rw); the input graph itself when no rule fired and nothing was noted."""
    fired = []

    def counting(node, ins, g):
        res = rw(node, ins, g)
        if res is not None:
            fired.append(node)
        return res
    new = rebuild(graph, counting, sub_pass=sub_pass)
    return graph if not fired and not new.notes and _unchanged(graph) else new


# ------------------------------------------------------------------ 1. prune
def prune(graph: Graph) -> Graph:
    """Dead code elimination: keep what the outputs need (plus the function's inputs/captures)."""
    need = {id(o.node) for o in graph.outputs}
    need.update(id(s.node) for s in graph.inputs)
    need.update(id(i.node) for _, i in graph.captures)
    for node in reversed(graph.nodes):
        if id(node) in need:
            need.update(id(i.node) for i in node.inputs)
    if len(need) == len(graph.nodes) and _unchanged(graph):
        return graph
    g = Graph(graph.name, graph.parent)
    g.nodes = [n for n in graph.nodes if id(n) in need]       # temporary view, rebuilt below
    g.inputs, g.outputs, g.captures = graph.inputs, graph.outputs, graph.captures
    return rebuild(g, sub_pass=prune)


# ------------------------------------------------------------------ 2. constant folding
def _const(sym):
    return sym.node.params['value'] if sym.node.op == 'constant' else None


def _foldable(node, ins) -> bool:
    return not (node.op in SOURCE_OPS or node.op in STATEFUL_OPS or node.op == 'group' or not ins
                or any(i.node.op != 'constant' for i in ins) or _subgraphs(node.params))


def fold_constants(graph: Graph) -> Graph:
    """Evaluate nodes whose inputs are all constants (small results only: see FOLD_LIMIT)."""
    def rw(node, ins, g):
        if not _foldable(node, ins):
            return None
        vals = [_const(i) for i in ins]
        try:
            res = node.prim.impl(*vals, **node.params)
        except (ArithmeticError, ValueError, IndexError, TypeError) as e:     # it fails at run time too
            g.notes.append(f"kept {node.outputs[0].name} = {node.op}(...): computing it fails "
                           f'({type(e).__name__}: {e})')
            return None
        res = list(res) if node.prim.multiple_results else [res]
        res = [np.asarray(r) for r in res]
        if any(r.size > max(FOLD_LIMIT, max(v.size for v in vals)) for r in res):
            g.notes.append(f'kept {node.outputs[0].name} = {node.op}(...): its result has more than '
                           f'FOLD_LIMIT={FOLD_LIMIT} elements')
            return None
        outs = []
        for r, o in zip(res, node.outputs):
            r = np.array(r, dtype=o.dtype)
            r.setflags(write=False)
            outs.append(g.add_node(PRIMITIVES['constant'], [], {'value': r}, [Aval(r.shape, r.dtype)],
                                   name=o.name)[0])
        return outs
    if not any(_foldable(n, n.inputs) for n in graph.nodes) and _unchanged(graph):
        return graph
    return rebuild(graph, rw, sub_pass=fold_constants)


# ------------------------------------------------------------------ 3. CSE
def _key(v):
    if isinstance(v, np.ndarray):
        return ('a', v.dtype.str, v.shape, v.tobytes()) if v.size <= 1024 else ('id', id(v))
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_key(i) for i in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _key(x)) for k, x in v.items()))
    if isinstance(v, (slice, np.dtype)):
        return repr(v)
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        return ('id', id(v))


def cse(graph: Graph) -> Graph:
    """Common subexpression elimination: one node per (op, inputs, params)."""
    seen: dict = {}

    def key(node, ins):
        if node.op in ('placeholder', 'variable') or node.op in STATEFUL_OPS or node.op == 'group':
            return None
        return node.op, tuple(map(id, ins)), _key(node.params)

    def rw(node, ins, g):
        k = key(node, ins)
        if k is None:
            return None
        if k in seen:
            return seen[k]
        outs = copy_node(g, node, ins)
        seen[k] = outs
        return outs
    keys = [k for k in (key(n, n.inputs) for n in graph.nodes) if k is not None]
    if len(set(keys)) == len(keys) and _unchanged(graph):
        return graph
    return rebuild(graph, rw, sub_pass=cse)


# ------------------------------------------------------------------ 4. algebraic simplification
def _known(s):
    return s.shape is not None and None not in s.shape


def _same(a, b):
    return _known(a) and a.shape == b.shape and a.dtype == b.dtype


def _uniform(sym, c, negative_zero=False) -> bool:
    """True if every element of `sym` is the constant c (constants and broadcasts of them);
    with ``negative_zero``, only if they are all -0.0."""
    while sym.node.op in ('broadcast_to', 'broadcast_like', 'reshape'):
        sym = sym.node.inputs[0]
    v = _const(sym)
    if v is not None and v.ndim == 0:           # the common case, without np.all's overhead
        return v == c and (not negative_zero or bool(np.signbit(v)))
    return v is not None and v.size > 0 and v.size <= FOLD_LIMIT and bool(np.all(v == c)) and (
        not negative_zero or bool(np.all(np.signbit(v))))


def _reshape(g, x, shape):
    return x if _known(x) and tuple(x.shape) == tuple(shape) else emit(g, P.reshape, [x], shape=tuple(shape))


def _broadcast(g, x, shape, dtype):
    if x.dtype != dtype:
        x = emit(g, P.cast, [x], dtype=dtype)
    return x if _known(x) and x.shape == tuple(shape) else emit(g, P.broadcast_to, [x], shape=tuple(shape))


def _axes(ax, nd):
    return tuple(reversed(range(nd))) if ax is None else tuple(ax)


def simplify(graph: Graph) -> Graph:
    """x*1, x+0, x*0, neg(neg x), reshape∘reshape, transpose∘transpose, stop_gradient, x+(-y) -> x-y,
    where(x>0, x, 0) -> relu(x), and the *_like helpers of gradient graphs once shapes are static."""
    def rw(node, ins, g):
        op, o = node.op, node.outputs[0]
        if op in ('mul', 'add'):
            unit = 1 if op == 'mul' else 0
            for x, c in ((ins[0], ins[1]), (ins[1], ins[0])):
                # x*1 -> x is exact; x+0 -> x and x*0 -> 0 only without floats (-0.0 + 0 is +0.0,
                # inf*0 and nan*0 are nan)
                exact = op == 'mul' or o.dtype.kind in 'biu' or _uniform(c, 0, negative_zero=True)
                if _uniform(c, unit) and _known(o) and x.dtype == o.dtype and exact:
                    return [_broadcast(g, x, o.shape, o.dtype)]
                if op == 'mul' and _uniform(c, 0) and _known(o):
                    if o.dtype.kind in 'biu':
                        return [_broadcast(g, g.lift(np.zeros((), o.dtype)), o.shape, o.dtype)]
                    g.notes.append(f'kept {o.name} = {x.name} * 0: {x.name} may be inf or nan')
            if op == 'add':
                for x, y in ((ins[0], ins[1]), (ins[1], ins[0])):
                    if y.node.op == 'neg':
                        return [emit(g, C.sub, [x, y.node.inputs[0]], name=o.name)]
        elif op == 'neg' and ins[0].node.op == 'neg':
            return [ins[0].node.inputs[0]]
        elif op == 'neg' and ins[0].node.op == 'mul':
            a, b = ins[0].node.inputs
            for x, c in ((a, b), (b, a)):
                v = _const(c)
                if v is not None and v.size <= FOLD_LIMIT:
                    neg_c = g.lift(np.asarray(np.negative(v)))   # a 0-d result is a numpy scalar: keep its dtype
                    return [emit(g, P.mul, [x, neg_c] if c is b else [neg_c, x], name=o.name)]
        elif op == 'stop_gradient':
            return [ins[0]]
        elif op == 'reshape':
            x = ins[0].node.inputs[0] if ins[0].node.op == 'reshape' else ins[0]
            if _known(o):
                return [_reshape(g, x, o.shape)]
            if x is not ins[0]:
                return [emit(g, P.reshape, [x], name=o.name, **node.params)]
        elif op == 'transpose' and ins[0].node.op == 'transpose' and ins[0].ndim is not None:
            x = ins[0].node.inputs[0]
            inner = _axes(ins[0].node.params.get('axes'), ins[0].ndim)
            outer = _axes(node.params.get('axes'), ins[0].ndim)
            axes = tuple(inner[a] for a in outer)
            return [x] if axes == tuple(range(len(axes))) else [emit(g, P.transpose, [x], axes=axes)]
        elif op == 'broadcast_to' and _same(ins[0], o):
            return [ins[0]]
        elif op == 'reshape_like' and _known(ins[1]):
            return [_reshape(g, ins[0], ins[1].shape)]
        elif op == 'broadcast_like' and _known(ins[1]):
            x, axes = ins[0], node.params.get('axes', ())
            if axes:
                if not _known(x):
                    return None
                shape = list(x.shape)
                for a in sorted(axes):
                    shape.insert(a, 1)
                x = _reshape(g, x, shape)
            return [_broadcast(g, x, ins[1].shape, o.dtype)]
        elif op == 'sum_to_like' and _known(ins[0]) and _known(ins[1]):
            x, shape = ins[0], ins[1].shape
            lead = len(x.shape) - len(shape)
            axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape)
                                              if d == 1 and x.shape[i + lead] != 1)
            if axes:
                x = emit(g, P.sum_, [x], axis=axes, keepdims=True)
            x = _reshape(g, x, shape)
            return [x if x.dtype == o.dtype else emit(g, P.cast, [x], dtype=o.dtype)]
        elif op == 'where' and ins[0].node.op == 'greater':
            x, zero = ins[0].node.inputs
            if ins[1] is x and _uniform(zero, 0) and _uniform(ins[2], 0) and _same(x, o):
                return [emit(g, C.relu, [x], name=o.name)]
        return None
    notes, start = [], graph
    for _ in range(4):        # to a fixed point: a rewrite can enable folding, sharing or more rewrites
        n = len(graph.nodes)
        for step in (lambda g: _rewrite(g, rw, simplify), fold_constants, cse, prune):
            graph = step(graph)
            notes += [m for m in graph.notes if m not in notes]
        if len(graph.nodes) == n:
            break
    if notes != graph.notes:
        graph = rebuild(graph) if graph is start else graph     # never change the input graph
        graph.notes = notes
    return graph


# ------------------------------------------------------------------ 5. shape specialisation
def specialize(graph: Graph) -> Graph:
    """Use the static shapes: a matmul whose contracted dim is 1 is an outer product (a broadcast mul)."""
    def rw(node, ins, g):
        if node.op == 'matmul':
            a, b = ins
            if _known(a) and _known(b) and a.ndim >= 2 and b.ndim >= 2 and a.shape[-1] == 1:
                return [emit(g, P.mul, [a, b], name=node.outputs[0].name)]
        return None
    if not any(n.op == 'matmul' for n in graph.nodes) and _unchanged(graph):
        return graph
    return _rewrite(graph, rw, specialize)


# ------------------------------------------------------------------ 6. fusion
def _uses(graph: Graph) -> dict:
    n = {id(o): 0 for o in graph.outputs}
    for o in graph.outputs:
        n[id(o)] += 1
    for node in graph.nodes:
        for i in node.inputs:
            n[id(i)] = n.get(id(i), 0) + 1
    return n


def _fusable(node) -> bool:
    return node.prim.elementwise and node.op not in ('stop_gradient',) or node.op == 'matmul'


def fuse(graph: Graph) -> Graph:
    """mul+add -> fma; then maximal convex groups of elementwise ops (a matmul may head a group:
    its bias add / ReLU epilogue) become one `fused` node holding its sub-graph in params['graph']."""
    uses = _uses(graph)
    keep = {id(o) for o in graph.outputs}

    def to_fma(node, ins, g):
        if node.op == 'add':
            for m, c in ((ins[0], ins[1]), (ins[1], ins[0])):
                old = node.inputs[0] if m is ins[0] else node.inputs[1]
                if m.node.op == 'mul' and uses.get(id(old), 0) == 1 and id(old) not in keep:
                    return [emit(g, C.fma, [*m.node.inputs, c], name=node.outputs[0].name)]
        return None
    g1 = prune(_rewrite(graph, to_fma, lambda s: s if s.name == 'fused' else fuse(s)))
    return _group(g1)


def _group(graph: Graph) -> Graph:
    """Give each fusable node a group: the group of one of its inputs, or a new one.

    A node may join group G only if all its inputs from outside G are available before G's
    first node. Each group then runs, as one unit, where its first node was (so its results
    are available from there on): the condensed graph stays acyclic (a group never waits for
    a value that waits for it) and the pass is linear. It misses some groupings (diamonds
    whose halves start apart)."""
    avail: dict[int, int] = {}           # id(symbol) -> position from which it exists
    gid: dict[int, int] = {}             # id(node) -> group number
    first: list[int] = []                # group number -> position of its first node
    for k, node in enumerate(graph.nodes):
        mine = None
        if _fusable(node) and not _subgraphs(node.params):
            if node.op != 'matmul':      # a matmul heads a group (its epilogue follows it)
                for i in node.inputs:
                    g = gid.get(id(i.node))
                    if g is not None and all(gid.get(id(j.node)) == g or avail[id(j)] < first[g]
                                             for j in node.inputs):
                        mine = g
                        break
            if mine is None:
                mine = len(first)
                first.append(k)
            gid[id(node)] = mine
        for o in node.outputs:
            avail[id(o)] = -1 if not node.inputs else k if mine is None else first[mine]
    members: dict[int, list] = {}
    for node in graph.nodes:
        if id(node) in gid:
            members.setdefault(gid[id(node)], []).append(node)
    groups = {g: m for g, m in members.items() if len(m) > 1}
    if not groups and _unchanged(graph):
        return graph
    return _emit_groups(graph, {id(n): g for g, m in groups.items() for n in m}, groups)


def _emit_groups(graph, node_group, groups):
    """Replace each group by one `fused` node, placed where its first node was."""
    users: dict[int, set] = {}
    for node in graph.nodes:
        for i in node.inputs:
            users.setdefault(id(i), set()).add(node_group.get(id(node), id(node)))
    outs_needed = {id(o) for o in graph.outputs}
    new = Graph(graph.name, graph.parent)
    env: dict[int, Symbol] = {}

    def copy(node):
        if id(node.outputs[0]) not in env:
            env.update(zip(map(id, node.outputs), copy_node(new, node, [env[id(i)] for i in node.inputs])))
    for node in graph.nodes:
        u = node_group.get(id(node))
        if u is None:
            copy(node)
        elif node is groups[u][0]:
            for n in groups[u]:          # a group may use a constant made after its first node
                for i in n.inputs:
                    if not i.node.inputs:
                        copy(i.node)
            results = [o for n in groups[u] for o in n.outputs if id(o) in outs_needed or users.get(id(o), set()) - {u}]
            env.update(zip(map(id, results), _fused_node(new, groups[u], results, env)))
    new.inputs = [env[id(s)] for s in graph.inputs]
    new.outputs = [env[id(s)] for s in graph.outputs]
    new.captures = [(outer, env[id(inner)]) for outer, inner in graph.captures]
    return new


def _fused_node(new: Graph, nodes, results, env) -> list:
    """One `fused` node in `new` computing `results` from the group's `nodes` (a sub-graph)."""
    inside = {id(o) for n in nodes for o in n.outputs}
    ext, sub, senv = [], Graph('fused', new), {}
    for n in nodes:
        for i in n.inputs:
            if id(i) not in inside and id(i) not in senv:
                ext.append(i)
                senv[id(i)] = sub.add_node(PRIMITIVES['placeholder'], [], {}, [Aval(i.shape, i.dtype)],
                                           name=i.name)[0]
        senv.update(zip(map(id, n.outputs), copy_node(sub, n, [senv[id(i)] for i in n.inputs])))
    sub.inputs = [senv[id(i)] for i in ext]
    sub.outputs = [senv[id(o)] for o in results]
    kind = 'matmul_epilogue' if any(n.op == 'matmul' for n in nodes) else 'elementwise'
    outs = new.add_node(C.fused, [env[id(i)] for i in ext], {'graph': sub, 'kind': kind},
                        [Aval(o.shape, o.dtype) for o in results], name=results[-1].name)
    for s, o in zip(outs, results):
        if s.name != o.name:
            s.name = new.unique_name(o.name)
    return outs


PASSES = {'prune': prune, 'fold_constants': fold_constants, 'cse': cse, 'simplify': simplify,
          'specialize': specialize, 'fuse': fuse}
