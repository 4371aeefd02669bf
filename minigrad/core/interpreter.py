"""The reference interpreter: what a graph *means*.

It walks the nodes in order and calls each primitive's numpy impl. It is slow
and simple on purpose: every compiler pass is tested against it.
"""
from __future__ import annotations

import numpy as np

from .primitive import Value, apply, fmt_shape
from .errors import FeedError, ForwardError, GraphError, MinigradError, ShapeError
from .tensor import Tensor, is_grad_enabled
from .graph import (Graph, Symbol, Node, needed_nodes, where_text,  # noqa: F401
                    PLACEHOLDER, VARIABLE, CONSTANT, ASSIGN, SOURCES, STATEFUL)


def missing_feed_error(graph: Graph, placeholder: Symbol, fetches) -> FeedError:
    """The error for a placeholder that the fetches need but nobody fed."""
    users = ', '.join(repr(f.name) for f in fetches if placeholder.node in needed_nodes(graph, [f]))
    shape = fmt_shape(placeholder.shape)
    return FeedError(f"placeholder '{placeholder.name}' (shape {shape}, {placeholder.dtype}) needs "
                     f'a value: the fetch {users} depends on it. Add it to feed_dict, e.g. '
                     f'sess.run(..., feed_dict={{{placeholder.name}: value}}).')


def evaluate(graph: Graph, fetches: list[Symbol], feeds: dict | None = None,
             state: dict | None = None, nodes: list[Node] | None = None) -> list:
    """Values of `fetches`. ``feeds`` maps id(Symbol) -> array; ``state`` maps id(variable node) -> array."""
    feeds = feeds or {}
    state = {} if state is None else state
    env: dict[int, object] = {}
    for node in (nodes if nodes is not None else needed_nodes(graph, fetches)):
        out = node.outputs
        prim = node.prim
        if prim is PLACEHOLDER or prim is VARIABLE:
            s = out[0]
            if id(s) in feeds:
                env[id(s)] = feeds[id(s)]
            elif prim is VARIABLE:
                if id(node) not in state:
                    state[id(node)] = np.array(node.params['initial_value'])
                env[id(s)] = state[id(node)]
            else:
                raise missing_feed_error(graph, s, fetches)
            continue
        if prim is CONSTANT:
            env[id(out[0])] = node.params['value']
            continue
        vals = [env[id(i)] for i in node.inputs]
        if prim is ASSIGN:
            v = np.array(vals[1], dtype=node.inputs[0].dtype)
            state[id(node.inputs[0].node)] = v
            env[id(out[0])] = v
            continue
        try:
            res = node.prim.impl(*vals, **node.params)
        except MinigradError as e:
            raise type(e)(f'{e}\n  (while running node `{graph.format_node(node)}`, '
                          f'{where_text(node)})') from None
        except Exception as e:
            shapes = ', '.join(f'{i.name}: {np.shape(v)}' for i, v in zip(node.inputs, vals))
            raise ShapeError(f'running node `{graph.format_node(node)}` ({where_text(node)}) '
                             f'failed with the fed values ({shapes}): {type(e).__name__}: {e}. The '
                             f'graph was built for the shapes shown after the colon; feed values '
                             f'of those shapes.') from None
        if node.prim.multiple_results:
            for o, r in zip(out, res):
                env[id(o)] = r
        else:
            env[id(out[0])] = np.asarray(res) if not isinstance(res, np.ndarray) else res
    return [env[id(f)] for f in fetches]


def run_graph(graph: Graph, args: list, captured: list = ()) -> list:
    """Run a sub-graph like a function: feed its ``inputs`` then its capture placeholders."""
    feeds = {id(s): v for s, v in zip(graph.inputs, args)}
    feeds.update({id(inner): v for (outer, inner), v in zip(graph.captures, captured)})
    return evaluate(graph, graph.outputs, feeds)


def replay(graph: Graph, args, captured=(), inputs=None, outputs=None) -> list:
    """Run `graph`'s nodes through core.apply on any values (arrays, Tensors, Duals, Symbols): a jit call's
    graph inlined into an outer trace, or pushed forward with Duals by a JVP rule. ``inputs``/``outputs``
    default to the graph's own (a sub-graph's); captures take ``captured``."""
    inputs = graph.inputs if inputs is None else inputs
    env = {id(s): a for s, a in zip(inputs, args)}
    env.update({id(inner): c for (_, inner), c in zip(graph.captures, captured)})
    for node in needed_nodes(graph, graph.outputs if outputs is None else outputs):
        if id(node.outputs[0]) in env:
            continue
        if node.prim is CONSTANT:
            outs = [node.params['value']]
        elif node.prim in SOURCES or node.prim in STATEFUL:
            raise GraphError(f"cannot replay a {node.op} node ('{node.outputs[0].name}') of graph "
                             f"'{graph.name}': a function called inside a transformation must "
                             f'not create Variables or assign them; keep state outside it')
        else:
            ins = [env[id(i)] for i in node.inputs]
            if node.prim.multiple_results:
                ins = untaped(node.op, ins)
            res = apply(node.prim, *ins, **node.params)
            outs = list(res) if node.prim.multiple_results else [res]
        env.update((id(o), r) for o, r in zip(node.outputs, outs))
    return [env[id(o)] for o in (graph.outputs if outputs is None else outputs)]


def untaped(op, ins):
    """Tensors as arrays for a cond / while node: the tape records one result per op, so these run
    unrecorded, and a Tensor that needs a gradient through them is refused rather than cut off."""
    tensors = [v for v in ins if isinstance(v, Tensor)]
    if not tensors or any(isinstance(v, Value) and v.level > Tensor.level for v in ins):
        return ins
    if any(t.requires_grad for t in tensors) and is_grad_enabled():
        raise ForwardError(f"a '{op}' node inside a jit / trace function cannot be recorded on the "
                           f'tape (reverse mode over the forward-mode tangents of a function with '
                           f'control flow); use mg.jacfwd / mg.jvp for both derivatives, or call '
                           f'the function unjitted')
    return [v.data if isinstance(v, Tensor) else v for v in ins]
