"""Session: runs (the needed part of) a static graph with values fed in."""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .core.primitive import fmt_shape, describe, refuse_pickle
from .core.errors import FeedError, GraphError, InputError
from .core.graph import (Graph, Symbol, get_default_graph, needed_nodes, shapes_compatible,
                         PLACEHOLDER, VARIABLE)
from .core.interpreter import missing_feed_error
from .compiler import compile as compile_program
from .pytree import flatten, unflatten
from .compiler.program import feed_array, note_written


class Session:
    """Runs a graph: ``sess.run(fetches, feed_dict)``. Variables keep their values between runs.

    Each (fetch set, feed shapes) is compiled once and kept in an LRU cache of ``CACHE_SIZE``
    programs (``hits``, ``misses``, ``evictions``). Runs from several threads take turns.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     a = mg.placeholder(mg.float32); b = mg.placeholder(mg.float32); c = a * b
    >>> with mg.Session(g) as sess:
    ...     float(sess.run([c], feed_dict={a: [15.0], b: [20.0]})[0][0])
    300.0
    """

    CACHE_SIZE = 32

    __reduce_ex__ = refuse_pickle('a Session', 'pickle its graph (session.graph: a Graph pickles) and open a '
                                       'new Session on the loaded one')

    def __init__(self, graph: Graph | None = None, backend: str | None = None):
        if graph is not None and not isinstance(graph, Graph):
            raise InputError(f'Session: expected a Graph (mg.Session(graph)), got {type(graph).__name__}')
        self.graph = graph if graph is not None else get_default_graph()
        self.state: dict[int, np.ndarray] = {}      # id(variable node) -> current value
        self._programs: OrderedDict = OrderedDict()  # (fetch ids, feed signature) -> Program, oldest first
        self.hits = self.misses = self.evictions = 0
        self._lock = threading.RLock()
        self.backend = backend                      # mg.compile's backend (None: its default)
        self._closed = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._closed = True
        self.state.clear()

    def run(self, fetches, feed_dict=None):
        """Compute `fetches` (a Symbol or nested list/tuple/dict of Symbols); returns numpy values
        in the same structure. Only the nodes the fetches need are run."""
        if self._closed:
            raise GraphError('this Session is closed; open a new one with mg.Session(graph)')
        flat, tree = flatten(fetches)
        for f in flat:
            if not isinstance(f, Symbol):
                raise FeedError(f'Session.run: cannot fetch {describe(f)}; fetches must be Symbols of the graph '
                                f'(an eager Tensor already has its value: use .numpy())')
            if f.graph is not self.graph:
                raise FeedError(f"Session.run: fetch '{f.name}' belongs to another graph than this Session's. "
                                f'Create the session with mg.Session(that_graph), or build the op in this graph.')
        feeds = check_feeds(self.graph, {} if feed_dict is None else feed_dict)
        with self._lock:
            values = self._execute(flat, feeds)
        return unflatten(tree, values)

    def _execute(self, fetches, feeds):
        """Run the compiled Program for this (fetch set, feed signature), compiling it on first use.

        There is no second path: if compiling or running fails, the error reaches the caller."""
        key = (tuple(map(id, fetches)),) + tuple(sorted((k, v.shape, v.dtype.str) for k, v in feeds.items()))
        prog = self._programs.get(key)
        if prog is not None:
            self.hits += 1
            self._programs.move_to_end(key)
        else:
            needed = needed_nodes(self.graph, fetches)
            for node in needed:
                if node.prim is PLACEHOLDER and id(node.outputs[0]) not in feeds:
                    raise missing_feed_error(self.graph, node.outputs[0], fetches)
            fed = [n.outputs[0] for n in needed if id(n.outputs[0]) in feeds]
            prog = compile_program(list(fetches), fed, input_shapes=[feeds[id(s)].shape for s in fed],
                                   backend=self.backend)
            self.misses += 1
            self._programs[key] = prog
            if len(self._programs) > self.CACHE_SIZE:
                self._programs.popitem(last=False)
                self.evictions += 1
        # a Variable's storage is C-ordered (as loop kernels read it), whatever its initial value's layout
        states = [self.state[id(v.node)] if id(v.node) in self.state else
                  np.array(v.node.params['initial_value'], order='C') for v in prog.variables]
        out = prog.run([feeds[id(s)] for s in prog.inputs], states)
        for v, s in zip(prog.variables, states):       # only a run that finished updates the state
            self.state[id(v.node)] = s
        note_written(prog.assigned, 'a Session')
        return out

def check_feeds(graph: Graph, feed_dict) -> dict:
    """A feed_dict for `graph` checked and converted: {id(placeholder or Variable): array of its dtype}.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, (None,), name='x')
    >>> check_feeds(g, {x: [1, 2]})[id(x)].dtype
    dtype('float32')
    """
    if not isinstance(feed_dict, dict):
        raise FeedError(f'feed_dict must be a dict {{placeholder: value}}, got {type(feed_dict).__name__} '
                        f'{feed_dict!r:.40}')
    feeds = {}
    for k, v in feed_dict.items():
        if not isinstance(k, Symbol):
            raise FeedError(f'feed_dict key {describe(k)} is not a Symbol; feed placeholders or Variables')
        if k.graph is not graph:
            raise FeedError(f"feed_dict key '{k.name}' belongs to another graph than this Session's")
        if k.node.prim is not PLACEHOLDER and k.node.prim is not VARIABLE:
            raise FeedError(f"feed_dict key '{k.name}' is the result of a '{k.op}' op; only placeholders "
                            f'and Variables can be fed')
        if isinstance(v, Symbol):
            raise FeedError(f"feed_dict value for '{k.name}' is a Symbol; feed concrete values (numbers, "
                            f'lists, numpy arrays)')
        arr = feed_array(v, k.dtype, f"feed_dict value for '{k.name}'")
        if not shapes_compatible(k.shape, arr.shape):
            raise FeedError(f"cannot feed a value of shape {fmt_shape(arr.shape)} into '{k.name}', which "
                            f'has shape {fmt_shape(k.shape)} (None = any size). A graph is built for '
                            f'one input shape: reshape the value or build the graph with '
                            f'placeholder(shape=...) that allows it.')
        feeds[id(k)] = arr
    return feeds

