"""Pass: operator fusion. ``mul`` + ``add`` become one ``fma`` node; then groups of elementwise
ops (a matmul may head a group: its bias add / ReLU epilogue) become one ``fused`` node
holding its sub-graph in ``params['graph']``: one loop kernel, one pass over memory.

An op joins a group when its record has a loop-kernel rule (``kernel``), its result has the
group's shape (the kernel's loop) and a float or bool dtype (numba's integer arithmetic
widens differently from numpy's). What stayed out, and why, is in the graph's notes."""
from __future__ import annotations

from ..core import ops as P
from ..core.primitive import Aval
from ..core.graph import Graph, Symbol
from .ops import fma, fused
from .kernels import why_not
from .prune import prune_new
from .rewrite import rewrite_pass, unchanged, copy_node, emit, extract, NodeView


# ops per group: bounds a loop kernel's compile time (cold, about linear in its ops: a 64-op chain kernel
# 2.6 s, 96 ops 3.9 s) and lets equal groups of a long chain share one kernel; 96 keeps the ten-layer
# tanh chain's 68 ops in one loop (no second kernel reading two of its arrays again)
# speed: a cap on a group's ops, chosen by the tanh chain's run time and a kernel's cold compile time
MAX_GROUP = 96


def _uses(graph: Graph) -> dict:
    n = {id(o): 1 for o in graph.outputs}            # an output is used by the caller
    for node in graph.nodes:
        for i in node.inputs:
            n[id(i)] = n.get(id(i), 0) + 1
    return n


def _fusable(node, notes) -> bool:
    """Whether `node` may be in a group (as a member, or a matmul as its head); else why not, in notes."""
    if node.prim.kind == 'node' or not (node.prim.elementwise or node.prim is P.matmul):
        return False
    why = None if node.prim is P.matmul else why_not(node)
    if why:
        notes.setdefault(f'{node.prim.name}: {why}', node.prim.name)
    return why is None


def fuse(graph: Graph) -> Graph:
    """mul+add -> fma, then groups -> fused nodes.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     w, x, b = (mg.placeholder(mg.float32, (3,), name=n) for n in 'wxb'); y = mg.relu(w * x + b)
    >>> g.outputs = [y]
    >>> [n.op for n in fuse(g).nodes][3:]
    ['constant', 'constant', 'fused']
    """
    uses = _uses(graph)

    def to_fma(node, ins, g):
        args = fma.match(NodeView(node, ins), lambda s: uses.get(id(_old(node, ins, s)), 0) == 1)
        return None if args is None else [emit(g, fma, args, name=node.outputs[0].name)]
    g1 = prune_new(rewrite_pass(graph, to_fma, lambda s: s if s.name == 'fused' else fuse(s)), graph)
    return _group_until_stable(g1)


def _group_until_stable(graph: Graph) -> Graph:
    """_group again until no group forms: a fused node made only from inputs can run earlier
    than the ops it replaced, so a second grouping may find more (and fuse twice == fuse once)."""
    g = _group(graph)
    while True:
        again = _group(g)
        if len(again.nodes) == len(g.nodes):       # no new group (a new graph may only carry notes)
            return g
        again.notes = list(dict.fromkeys(g.notes + again.notes))
        g = again


def _old(node, ins, new_sym):
    """The input of the original node that `new_sym` (a rewritten input) stands for."""
    for old, new in zip(node.inputs, ins):
        if new is new_sym:
            return old
    return new_sym


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
    notes: dict[str, str] = {}
    size: list[int] = []                 # group number -> members so far
    cont: dict[int, int] = {}            # a full group -> the group its overflow opened (a long chain's next piece)
    for k, node in enumerate(graph.nodes):
        mine, full = None, []
        if _fusable(node, notes):
            if node.prim.elementwise:    # a matmul heads a group (its epilogue follows it)
                for i in node.inputs:
                    g = _open_piece(cont, gid.get(id(i.node)))
                    if g is not None and i.shape == node.outputs[0].shape and all(
                            gid.get(id(j.node)) == g or avail[id(j)] < first[g] for j in node.inputs):
                        if size[g] < MAX_GROUP:
                            mine = g
                            break
                        full.append(g)
                        notes.setdefault(f'a group reached MAX_GROUP = {MAX_GROUP} ops (bounds the compile time of '
                                         f'its loop kernel); the next op starts a new group', '')
            if mine is None:
                mine = len(first)
                first.append(k)
                size.append(0)
                cont.update((g, mine) for g in full)
            size[mine] += 1
            gid[id(node)] = mine
        const = all(avail[id(i)] == -1 for i in node.inputs)     # made from constants alone: hoistable
        for o in node.outputs:
            avail[id(o)] = -1 if const and mine is None else k if mine is None else first[mine]
    members: dict[int, list] = {}
    for node in graph.nodes:
        if id(node) in gid:
            members.setdefault(gid[id(node)], []).append(node)
    groups = {g: m for g, m in members.items() if len(m) > 1}
    if not groups and unchanged(graph) and not notes:       # speed: no group, no copy
        return graph
    new = _emit_groups(graph, {id(n): g for g, m in groups.items() for n in m}, groups)
    new.notes = list(notes)
    return new


def _open_piece(cont: dict, g):
    """The last piece of the chain of groups that `g` overflowed into (g itself when it did not)."""
    # speed: a full group continues in the group its overflow opened (a long chain: fewer, longer kernels)
    path = []
    while g in cont:
        path.append(g)
        g = cont[g]
    cont.update((p, g) for p in path[:-1])      # shorten the chain for the next lookup
    return g


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
            for i in node.inputs:        # a group may use a value made from constants after its first node
                copy(i.node)
            env.update(zip(map(id, node.outputs), copy_node(new, node, [env[id(i)] for i in node.inputs])))
    for node in graph.nodes:
        u = node_group.get(id(node))
        if u is None:
            copy(node)
        elif node is groups[u][0]:
            for n in groups[u]:
                for i in n.inputs:
                    if id(i.node) not in node_group:
                        copy(i.node)
            results = [o for n in groups[u] for o in n.outputs if id(o) in outs_needed or users.get(id(o), set()) - {u}]
            env.update(zip(map(id, results), _fused_node(new, groups[u], results, env)))
    new.inputs = [env[id(s)] for s in graph.inputs]
    new.outputs = [env[id(s)] for s in graph.outputs]
    new.captures = [(outer, env[id(inner)]) for outer, inner in graph.captures]
    return new


def _fused_node(new: Graph, nodes, results, env) -> list:
    """One `fused` node in `new` computing `results` from the group's `nodes` (a sub-graph)."""
    sub, ext = extract(nodes, results, 'fused', new)
    kind = 'elementwise' if all(n.prim.elementwise for n in nodes) else 'matmul_epilogue'
    outs = new.add_node(fused, [env[id(i)] for i in ext], {'graph': sub, 'kind': kind},
                        [Aval(o.shape, o.dtype) for o in results], name=results[-1].name)
    for s, o in zip(outs, results):
        if s.name != o.name:
            s.name = new.unique_name(o.name)
    return outs
