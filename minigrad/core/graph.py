"""Static graphs (define-and-run): Graph, Node, Symbol, placeholder, constant, Variable.

Applying a primitive to a Symbol does not compute anything: the graph-building
interpreter checks shapes with the primitive's shape rule and appends a Node.
The IR is flat SSA: ``graph.nodes`` in order, each with ``op``, ``inputs``,
``outputs`` (Symbols) and ``params``. ``print(graph)`` lists it, ``verify()``
re-checks it, and ``interpreter.evaluate`` defines what it means.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import operator
import os
import sys
import threading

import numpy as np

from . import validate
from . import dtypes
from . import primitive as core, ops as P
from .primitive import Aval, Primitive, describe, fmt_shape, DEFAULT_FLOAT
from .errors import GraphError, TraceError, ShapeError, MinigradError, InputError
from .functional import OpsMixin
from .names import Names
from .autodiff import reverse_sweep, state
from .tensor import Tensor


def _node_kind(name, doc, impl=None, rule=None, vjp=None, **fields):
    """A graph-structure node kind: a record in the op table, but no primitive."""
    def no_impl(*a, **k):
        raise GraphError(f'{name} nodes are evaluated by the interpreter, not called')
    return core.register_primitive(name, impl or no_impl, rule or (lambda *a, **k: None), vjp,
                                   kind='node', doc=doc, **fields)


# as TF1's Assign: no gradient, and not a silent zero either
def _assign_vjp(needs, g, out, var, value):
    raise GraphError(f"gradients: '{out.name}' is the result of assigning Variable '{var.name}', "
                     f"which has no gradient; differentiate the value assigned, '{value.name}'")


PLACEHOLDER = _node_kind('placeholder', 'a value fed at run time through feed_dict')
CONSTANT = _node_kind('constant', 'a value fixed when the graph is built (params: value)')
VARIABLE = _node_kind('variable', 'state kept by a Session between runs (params: initial_value)')
ASSIGN = _node_kind('assign', 'write a new value into a Variable (inputs: variable, value)',
                    vjp=_assign_vjp)
GROUP = _node_kind('group', 'runs its inputs (e.g. assign ops) and returns True, as tf.group',
                   impl=lambda *xs: np.array(True), rule=lambda *avals: Aval((), np.dtype(bool)))


def _check_impl(x, lo, hi, what):
    x = np.asarray(x)
    if x.size and not (x.min() >= lo and x.max() < hi):
        raise InputError(f'{what} must be in [{lo}, {hi}), got values from {x.min()} to {x.max()}')
    return x


CHECK = _node_kind('check', 'its input, after checking at run time that its values are in [lo, hi) '
                   '(params: lo, hi, what)',
                   impl=_check_impl, rule=lambda x, **params: Aval(x.shape, x.dtype))
SOURCES = frozenset({PLACEHOLDER, CONSTANT, VARIABLE})     # nodes without inputs that hold a value
STATEFUL = frozenset({ASSIGN})


class Symbol(OpsMixin, core.Value):
    """A value in a static graph: it has a shape and dtype but no value until Session.run.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     x = mg.placeholder(mg.float32, shape=(None, 3), name='x')
    ...     y = (x * 2).sum(axis=1)
    >>> y.shape, y.op
    ((None,), 'sum')
    """
    __slots__ = ('node', 'index', 'shape', 'dtype', 'name', '__weakref__')
    __hash__ = object.__hash__
    # above the tape: a Tensor among Symbols becomes a constant (or a capture)
    level = 2

    def apply(self, prim, args, params):
        return graph_apply(prim, args, params)
    __array_ufunc__ = None

    def __init__(self, node, index, shape, dtype, name):
        # np.dtype() costs a microsecond
        dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.node, self.index, self.shape, self.dtype, self.name = node, index, shape, dtype, name

    graph = property(lambda self: self.node.graph)
    op = property(lambda self: self.node.op)
    ndim = property(lambda self: None if self.shape is None else len(self.shape))

    def _no_value(self, what, convert=None):
        return self.node.graph.concrete(self, what, convert)

    def no_value_error(self, what):
        return TraceError(
            f"{what} of Symbol '{self.name}' (shape {fmt_shape(self.shape)}, {self.dtype}): a "
            f'Symbol is a placeholder in a graph and has no value while the graph is being built. '
            f'Get values with sess.run({self.name}, feed_dict=...). For data-dependent control '
            f'flow use mg.cond(pred, true_fn, false_fn) or mg.while_loop(cond, body, loop_vars) '
            f'instead of Python if/while, or trace with symbolic=False to record one concrete run.')

    def __bool__(self):
        return self._no_value('bool()', bool)

    def item(self):
        return self._no_value('item()', np.ndarray.item)

    def numpy(self):
        return self._no_value('numpy()', np.array)

    def tolist(self):
        return self._no_value('tolist()', np.ndarray.tolist)

    def __array__(self, *a, **k):
        return self._no_value('converting to a numpy array', np.array)

    def __float__(self):
        return self._no_value('float()', float)

    def __int__(self):
        return self._no_value('int()', int)

    def __index__(self):
        return self._no_value('using as an index', operator.index)

    def __iter__(self):
        if self.shape is None or not self.shape or self.shape[0] is None:
            self._no_value('iteration')
        return (self[i] for i in range(self.shape[0]))

    def __len__(self):
        if self.shape is None or not self.shape or self.shape[0] is None:
            self._no_value('len()')
        return self.shape[0]

    def __repr__(self):
        return f"<Symbol '{self.name}' shape={fmt_shape(self.shape)} dtype={self.dtype} op={self.op}>"

    def _repr_mimebundle_(self, include=None, exclude=None):
        return core.hooks.display(self)


class Variable(Symbol):
    """Graph state: its value lives in a Session, starting from ``initial_value``.

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     v = mg.Variable(1.0, name='v')
    ...     inc = v.assign(v + 1)
    >>> with mg.Session(g) as sess:
    ...     _ = sess.run(inc); float(sess.run(inc)), float(sess.run(v))
    (3.0, 3.0)
    """
    __slots__ = ()

    def __new__(cls, *args, _node=None, **kwargs):
        if _node is not None:               # made by Graph.add_node for a variable node
            return object.__new__(cls)
        return Variable_(*args, **kwargs)   # mg.Variable(initial_value, name=None, dtype=None)

    def __getnewargs_ex__(self):            # unpickling makes the Symbol, not a new variable node
        return (), {'_node': True}

    def __init__(self, *args, _node=None, **kwargs):
        if _node is not None:
            Symbol.__init__(self, _node, *args)

    def assign(self, value) -> Symbol:
        """An op that writes `value` into this variable when it runs and returns the new value.
        The value must fit the Variable's dtype without loss (numpy's safe casting: float32 into
        float64, never float64 into float32 nor a float into an int; TF1 refuses both): cast it
        first otherwise. It has no gradient (as TF1's Assign), and is not built inside a mg.cond
        or mg.while_loop body."""
        g = self.graph
        # a body is a function of its inputs, without state
        if g.is_ancestor_of(get_default_graph()):
            raise GraphError(f"assign: Variable '{self.name}' is assigned in a mg.cond / while_loop"
                             ' body, which minigrad does not support; assign the result outside:'
                             f' {self.name}.assign(mg.cond(p, lambda: new, lambda: {self.name}))')
        with g.atomic():                # a refused value leaves no constant behind
            value = g.lift(value, like=(self,))
            out = _check_assign(self, value)
        return g.add_node(ASSIGN, [self, value], {}, [out], name=f'{self.name}_assign')[0]

    @property
    def initial_value(self) -> np.ndarray:
        return self.node.params['initial_value']


def _check_assign(var, value) -> Aval:
    if not shapes_compatible(value.shape, var.shape):
        raise ShapeError(f"assign: value '{value.name}' has shape {fmt_shape(value.shape)} but "
                         f"Variable '{var.name}' has shape {fmt_shape(var.shape)}")
    # numpy's safe casting: values it holds without loss (no float64 1e40 made a float32 inf)
    if not np.can_cast(value.dtype, var.dtype, 'safe'):
        raise ShapeError(f"assign: value '{value.name}' has dtype {value.dtype}, which cannot be "
                         f"stored in Variable '{var.name}' of dtype {var.dtype} without loss; "
                         f'cast it first (mg.cast(value, {var.dtype}))')
    return Aval(var.shape, var.dtype)


# minigrad/, not core/
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_line():
    """(file, line) of the innermost frame outside the minigrad package: the learner's code."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    return None if f is None else (f.f_code.co_filename, f.f_lineno)


class _Beside:
    """'a Python number beside 'x' (float32)': an error's subject, formatted only if it is raised."""
    def __init__(self, like):
        self.like = like

    def __str__(self):
        return 'a Python number beside ' + ', '.join(f"'{s.name}' ({s.dtype})" for s in self.like
                                                       if isinstance(s, Symbol))


def where_text(node) -> str:
    """'defined at file.py:12' for a node that knows where it was built, else ''."""
    w = getattr(node, 'where', None)
    if not w:
        return ''
    # Jupyter runs each cell as its own file
    if 'ipykernel_' in w[0] or w[0].startswith('<ipython-input'):
        return f'defined at line {w[1]} of its notebook cell'
    return f'defined at {os.path.basename(w[0])}:{w[1]}'


class Node:
    """One operation in a Graph: ``op`` (primitive name), ``inputs``/``outputs`` (Symbols), ``params``;
    ``index`` is its position when it was added (a topological order)."""
    __slots__ = ('prim', 'inputs', 'outputs', 'params', 'graph', 'index', 'where', '__weakref__')

    def __init__(self, prim, inputs, params, graph, index=0, where=None):
        self.prim, self.inputs, self.params, self.graph = prim, list(inputs), dict(params), graph
        self.outputs: list[Symbol] = []
        self.index = index
        # (file, line) that built it: errors and drawings point there
        self.where = where or user_line()

    op = property(lambda self: self.prim.name)

    def __repr__(self):
        return f'<Node {self.graph.format_node(self)}>'


def _symbol(node, i, av, name) -> Symbol:
    if node.prim is VARIABLE:
        return Variable(i, av.shape, av.dtype, name, _node=node)
    return Symbol(node, i, av.shape, av.dtype, name)


class Graph:
    """A static computation graph: nodes appended in order (so always topologically sorted).

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     a = mg.placeholder(mg.float32, name='a'); b = mg.placeholder(mg.float32, name='b')
    ...     c = a * b
    >>> print(g)
    a = placeholder()  : float32 ?
    b = placeholder()  : float32 ?
    mul = mul(a, b)  : float32 ?
    """

    __slots__ = ('name', 'nodes', 'parent', 'captures', 'inputs', 'outputs', 'tensors',
                 'notes', 'grad_nodes', 'no_grad', 'single', '_names', '_scalars', '__weakref__')

    def __init__(self, name: str | None = None, parent: 'Graph | None' = None):
        self.name = name
        self.nodes: list[Node] = []
        self.parent = parent                 # enclosing graph for cond/while_loop bodies
        self.captures: list[tuple[Symbol, Symbol]] = []   # (outer symbol, inner placeholder)
        self.inputs: list[Symbol] = []       # for sub-graphs: the function's parameters
        self.outputs: list[Symbol] = []      # for sub-graphs: the function's results
        self.tensors: dict = {}              # id(Tensor) -> (Tensor, its Symbol here): Tensors bound to this graph
        self.notes: list[str] = []           # why a compiler pass declined to act (program.stats)
        # ids of the nodes mg.gradients added (drawn as backward)
        self.grad_nodes: set[int] = set()
        # the stop_gradient nodes mg.no_grad() added (not the user's own): mg.gradients refuses a y they made
        self.no_grad: set[Node] = set()
        self.single = False                  # a cond/while body written as `return x` (not a tuple)
        self._names = Names()
        # (dtype, bytes) -> its constant, in _one_constant_per_value
        self._scalars: dict | None = None

    # -- building
    def unique_name(self, base: str) -> str:
        """A name no value of this graph has yet: base, base_1, base_2, ..."""
        return self._names(None, base or 'v')

    def add_node(self, prim: Primitive, inputs, params, avals, name=None, where=None) -> list[Symbol]:
        node = Node(prim, inputs, params, self, len(self.nodes), where)
        base = (name if name is not None else prim.name) or 'v'
        node.outputs = [_symbol(node, i, av, self._names(None, base)) for i, av in enumerate(avals)]
        self.nodes.append(node)
        return node.outputs

    @property
    def placeholders(self) -> list[Symbol]:
        return [n.outputs[0] for n in self.nodes if n.prim is PLACEHOLDER]

    @property
    def variables(self) -> list[Symbol]:
        return [n.outputs[0] for n in self.nodes if n.prim is VARIABLE]

    def owns(self, sym) -> bool:
        return isinstance(sym, Symbol) and sym.node.graph is self

    def is_ancestor_of(self, other: 'Graph') -> bool:
        g = other.parent
        while g is not None:
            if g is self:
                return True
            g = g.parent
        return False

    def capture(self, sym: Symbol) -> Symbol:
        """The local stand-in for a Symbol of an enclosing graph (cond/while bodies use outer values)."""
        if self.parent is not None and not self.parent.owns(sym):
            # a grandparent's value: through the parent's stand-in
            sym = self.parent.capture(sym)
        for outer, inner in self.captures:
            if outer is sym:
                return inner
        inner = self.add_node(PLACEHOLDER, [], {'captured': True}, [Aval(sym.shape, sym.dtype)],
                              name=f'{sym.name}_captured')[0]
        self.captures.append((sym, inner))
        return inner

    def _scalar(self, arr) -> Symbol:
        """A constant for a number (a 0-d `arr`); inside mg.gradients one per value (the VJPs' 1s and -1s)."""
        if self._scalars is None:
            return constant(arr, graph=self)
        key = (arr.dtype.str, arr.tobytes())            # bytes: -0.0 is not 0.0, nan is nan
        if key not in self._scalars:
            self._scalars[key] = constant(arr, graph=self)
        return self._scalars[key]

    def lift_tensor(self, t, like=()) -> Symbol:
        """A Tensor met while building: its bound Symbol (mg.nn.bind_parameters), else what the enclosing
        graph makes of it; refused at the top. A graph that Python code is traced into captures it instead."""
        bound = self.tensors.get(id(t))
        if bound is not None and bound[0] is t:
            return bound[1]
        if self.parent is not None:              # inside a cond/while body: the outer graph decides
            return self.capture(self.parent.lift(t, like))
        raise GraphError(_mix_message(t, like))

    def concrete(self, sym, what, convert):
        """A Symbol's value asked for while building (bool(), item(), ...): there is none (mg.jit's graph
        overrides this to run the graph so far: a graph break)."""
        raise sym.no_value_error(what)

    def lift(self, x, like=()) -> Symbol:
        """Turn a Python number, list, array (or, inside mg.trace, a Tensor) into a Symbol of this graph."""
        if isinstance(x, Symbol):
            if x.graph is self:
                return x
            if x.graph.is_ancestor_of(self):
                return self.capture(x)
            raise GraphError(f"Symbol '{x.name}' belongs to another graph; ops can only combine Symbols "
                             f'of one graph (build everything inside the same `with graph.as_default():`)')
        if isinstance(x, Tensor):
            return self.lift_tensor(x, like)
        # a transformation's value (Dual, Batched) says why it cannot enter
        if isinstance(x, core.Value):
            raise x.graph_error()
        if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
            dts = [s.dtype for s in like if isinstance(s, Symbol)]
            # numpy 2's rule (NEP 50) whatever numpy runs: the scalar takes the Symbols' dtype
            dtype = dtypes.weak_dtype(x, dts, _Beside(like)) if dts else \
                (DEFAULT_FLOAT if isinstance(x, float) else np.asarray(x).dtype)
            return self._scalar(np.asarray(x, dtype=dtype))
        # e.g. neg's typed -1 on numpy 1.x
        if isinstance(x, (np.ndarray, np.generic)) and np.ndim(x) == 0:
            return self._scalar(np.asarray(x))
        return constant(x, graph=self)

    # -- inspection
    def format_node(self, node: Node) -> str:
        outs = ', '.join(o.name for o in node.outputs)
        args = [i.name for i in node.inputs] + [f'{k}={_fmt_param(v)}' for k, v in node.params.items()]
        types = ', '.join(f'{o.dtype} {fmt_shape(o.shape)}' for o in node.outputs)
        return f'{outs} = {node.op}({", ".join(args)})  : {types}'

    def __str__(self) -> str:
        lines = []
        for n in self.nodes:
            lines.append(self.format_node(n))
            for k, v in n.params.items():       # cond/while bodies, indented under their node
                if isinstance(v, Graph):
                    lines.append(f'  {k}:')
                    lines.extend('    ' + line for line in str(v).splitlines())
        if self.outputs and self.parent is not None:
            lines.append('return ' + ', '.join(o.name for o in self.outputs))
        return '\n'.join(lines)

    def __repr__(self):
        return f'<Graph{" " + self.name if self.name else ""}: {len(self.nodes)} nodes>'

    def __len__(self):
        return len(self.nodes)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return core.hooks.display(self)

    def verify(self, rules=None) -> 'Graph':
        """Re-check every node: inputs defined earlier in this graph, shapes/dtypes match the rules.

        Raises GraphError naming the first bad node; returns the graph so calls chain. ``rules``: a dict
        shared by several verifies (compile's, after each pass), so equal nodes run a shape rule once."""
        defined = {id(inner) for _, inner in self.captures}
        # (prim, input avals, params) -> what the shape rule gave
        rules = {} if rules is None else rules
        for node in self.nodes:
            problem = _check_node(node, defined, rules)
            if problem:         # the message (which formats the node) is only built for a bad node
                raise GraphError(f'verify: node `{self.format_node(node)}` {problem}')
            defined.update(map(id, node.outputs))
            for v in node.params.values():
                if isinstance(v, Graph):
                    v.verify(rules)
        for o in self.outputs:
            if id(o) not in defined:
                raise GraphError(f'verify: output {o.name} is not defined in this graph')
        if len({id(s) for s in self.inputs}) != len(self.inputs):
            raise GraphError(f'verify: the inputs {", ".join(s.name for s in self.inputs)} are not distinct '
                             f'values (did a pass merge two placeholders? each input is its own value)')
        return self

    @contextlib.contextmanager
    def atomic(self):
        """Undo what the block added to this graph if it raises: a failing mg.gradients, cond or
        while_loop leaves the graph exactly as it was (nodes, names, captures)."""
        n, caps, outer = len(self.nodes), len(self.captures), self._names.undo
        # names given out inside (copying every name per op was quadratic)
        self._names.undo = mine = []
        try:
            yield self
        except BaseException:
            self.grad_nodes.difference_update(id(x) for x in self.nodes[n:])    # only ever added to
            del self.nodes[n:], self.captures[caps:]
            self._names.rollback(mine)
            mine = []
            raise
        finally:
            self._names.undo = outer
            if outer is not None:
                outer.extend(mine)

    @contextlib.contextmanager
    def _one_constant_per_value(self):
        """Inside, a Python number lifted twice is one constant (mg.gradients: its VJPs' 1s and -1s). Private: an
        op that fails inside must fail the whole block (as in mg.gradients), or the cache keeps its constant."""
        outer, self._scalars = self._scalars, {} if self._scalars is None else self._scalars
        try:
            yield self
        finally:
            self._scalars = outer

    @contextlib.contextmanager
    def as_default(self):
        """Make this the graph that placeholder/constant/Variable and ops on them use."""
        _local.stack.append(self)
        try:
            yield self
        finally:
            _local.stack.pop()


def needed_nodes(graph: Graph, fetches) -> list[Node]:
    """The nodes the fetches depend on, in graph order (what Session.run actually runs)."""
    return core.topo_order([f.node for f in fetches], lambda node: [i.node for i in node.inputs],
                           operator.attrgetter('index'))


def _check_node(node, defined, rules) -> str | None:
    """What is wrong with `node` (inputs defined before it, shape rule, outputs), or None. ``rules``
    remembers the shape rule's result per (prim, input avals, params) across the nodes of one verify."""
    for s in node.inputs:
        if id(s) not in defined or not isinstance(s, Symbol):
            return f'uses {getattr(s, "name", repr(s))!r}, which is not defined before it in this graph'
    if node.prim not in SOURCES and node.prim not in STATEFUL:
        # most nodes have none: verify skips the copy
        params = _rule_params(node) if node.params else {}
        # the key holds each param's type too: 1 == 1.0
        key = (node.prim, tuple([(s.shape, s.dtype) for s in node.inputs]),
               tuple(sorted([(k, type(v), v) for k, v in params.items()])) if params else ())
        try:
            avals = rules.get(key)
        except TypeError:
            # unhashable params (an array, a graph): this node's rule simply runs (no memo)
            key = avals = None
        if avals is None:
            try:
                avals = node.prim.shape_rule(*[Aval(s.shape, s.dtype) for s in node.inputs], **params)
            except MinigradError as e:
                return f'fails its shape rule: {e}'
            if not isinstance(avals, (list, tuple)) or isinstance(avals, Aval):
                avals = [avals]
            if key is not None:
                rules[key] = avals
        if len(avals) != len(node.outputs):
            return f'has {len(node.outputs)} outputs, its rule gives {len(avals)}'
        for o, av in zip(node.outputs, avals):
            # the common case, without np.dtype calls
            if o.shape == av.shape and o.dtype == av.dtype:
                continue
            if not shapes_compatible(o.shape, av.shape) or np.dtype(o.dtype) != np.dtype(av.dtype):
                return (f'output {o.name} is recorded as {o.dtype} {fmt_shape(o.shape)} but the '
                        f'rule gives {av.dtype} {fmt_shape(av.shape)}')
    for o in node.outputs:
        if o.node is not node:
            return f'output {o.name} points at another node'
    return None


def _rule_params(node):
    return {k: v for k, v in node.params.items() if not k.startswith('_')}


def shapes_compatible(recorded, rule) -> bool:
    """Equal ranks and equal sizes where both are known (None: unknown rank or size)."""
    if recorded is None or rule is None:
        return True
    if len(recorded) != len(rule):
        return False
    return all(a is None or b is None or a == b for a, b in zip(recorded, rule))


def _fmt_param(v) -> str:
    if isinstance(v, Graph):
        return f'<graph {len(v.nodes)} nodes>'
    if isinstance(v, np.ndarray):
        if v.size <= 4:
            return np.array2string(v, separator=', ', precision=4).replace('\n', '')
        return f'<array {v.dtype} {fmt_shape(v.shape)}>'
    if isinstance(v, tuple) and any(isinstance(i, np.ndarray) for i in v):
        return '(' + ', '.join(_fmt_param(i) if isinstance(i, np.ndarray) else repr(i) for i in v) + ')'
    if isinstance(v, np.dtype):
        return str(v)
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + '...'


def _mix_message(t, like):
    syms = [s for s in like if isinstance(s, Symbol)]
    other = f"Symbol '{syms[0].name}' (shape {fmt_shape(syms[0].shape)})" if syms else 'a Symbol'
    return (f'an op mixes {describe(t)} (an eager value) with {other} (a node of a static graph). '
            f'Use one kind: turn the tensor into a graph value with mg.constant(t.numpy()) (or a '
            f'placeholder you feed), or run the graph with sess.run(...) and continue eagerly on the result.')


class _Local(threading.local):
    """Each thread's stack of `with graph.as_default()` blocks (as TF1's); the default graph is shared."""
    def __init__(self):
        self.stack: list[Graph] = []


_default = [Graph('default')]
_local = _Local()


def get_default_graph() -> Graph:
    """The graph that new placeholders, constants and Variables go into."""
    return _local.stack[-1] if _local.stack else _default[0]


def reset_default_graph() -> Graph:
    """Start a fresh default graph (as tf.reset_default_graph)."""
    if _local.stack:
        raise GraphError('reset_default_graph() inside `with graph.as_default():`; leave the block first')
    _default[0] = Graph('default')
    return _default[0]


# ------------------------------------------------------------------ sources
def _check_name(name):
    return validate.check_name(name, 'graph node')


def placeholder(dtype=DEFAULT_FLOAT, shape=None, name=None) -> Symbol:
    """A graph input fed at run time: ``sess.run(y, feed_dict={x: value})``.

    ``shape=None`` accepts any shape; a None inside the shape (``(None, 3)``) is one
    dimension of any size. >>> x = mg.placeholder(mg.float32, shape=(None, 3), name='x')
    """
    g = get_default_graph()
    dtype = validate.check_dtype(dtype, 'mg.placeholder: dtype')
    name = validate.check_name(name, 'mg.placeholder')
    if shape is not None:
        dims = (shape,) if validate.is_int(shape) else shape
        if isinstance(dims, (tuple, list)):      # -1 is numpy's spelling of a dimension of any size
            dims = tuple(None if validate.is_int(d) and d == -1 else d for d in dims)
        shape = validate.check_shape(dims, 'mg.placeholder: shape', unknown=True)
    return g.add_node(PLACEHOLDER, [], {}, [Aval(shape, dtype)], name=name or 'placeholder')[0]


def constant(value, dtype=None, name=None, graph=None) -> Symbol:
    """A value fixed in the graph. Python floats become float32. >>> c = mg.constant(2.0)"""
    g = graph or get_default_graph()
    if isinstance(value, Symbol):
        raise GraphError(f"mg.constant: '{value.name}' is already a Symbol; use it directly")
    arr = _graph_value(value, dtype, 'mg.constant')
    return g.add_node(CONSTANT, [], {'value': arr}, [Aval(arr.shape, arr.dtype)],
                      name=_check_name(name) or 'const')[0]


def _graph_value(value, dtype, what) -> np.ndarray:
    """A constant's or Variable's own read-only copy; Python floats become float32, numpy values keep their dtype."""
    if isinstance(value, Tensor):
        value = value.data
    arr = validate.value_array(value, what, dtype)
    if dtype is None and arr.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        arr = arr.astype(DEFAULT_FLOAT)
    arr.setflags(write=False)
    return arr


def Variable_(initial_value, name=None, dtype=None) -> Variable:
    g = get_default_graph()
    arr = _graph_value(initial_value, dtype, 'mg.Variable')
    return g.add_node(VARIABLE, [], {'initial_value': arr}, [Aval(arr.shape, arr.dtype)],
                      name=_check_name(name) or 'Variable')[0]


# ------------------------------------------------------------------ the graph-building interpreter
def graph_apply(prim: Primitive, args, params):
    syms = [a for a in args if isinstance(a, Symbol)]
    g = syms[0].graph
    for s in syms[1:]:
        h = s.graph
        if h is g or h.is_ancestor_of(g):
            continue
        if g.is_ancestor_of(h):
            g = h
            continue
        raise GraphError(f"{prim.name}: Symbol '{syms[0].name}' and Symbol '{s.name}' belong to "
                         f'different graphs. Build all ops of one computation inside the same '
                         f'`with graph.as_default():` block (or call mg.reset_default_graph() '
                         f'only before starting a new model).')
    cur = get_default_graph()
    if cur is not g and g.is_ancestor_of(cur):
        # inside a cond/while body: the op belongs there, outer values get captured
        g = cur
    # a failing shape rule takes the constants lifted for this op with it
    with g.atomic():
        inputs = [g.lift(a, like=syms) for a in args]
        try:
            avals = prim.shape_rule(*[Aval(s.shape, s.dtype) for s in inputs], **params)
        except MinigradError as e:
            names = ', '.join(f"'{s.name}' {fmt_shape(s.shape)}" for s in inputs)
            raise type(e)(f'{e}\n  (while building {prim.name} on {names})') from None
    multiple = prim.multiple_results
    outs = g.add_node(prim, inputs, params, list(avals) if multiple else [avals])
    # built under mg.no_grad(): as on the tape, no gradient flows back
    if not state.grad_enabled and prim.vjp is not None:
        outs = [P.stop_gradient(o) if o.dtype.kind == 'f' else o for o in outs]
        g.no_grad.update(o.node for o in outs if o.node.prim is P.stop_gradient)
    return tuple(outs) if multiple else outs[0]


# ------------------------------------------------------------------ symbolic gradients
def without_gc(fn):
    """`fn` run with the cyclic garbage collector paused: while a big graph is built or compiled, each full
    collection scans every node made so far, so they cost time quadratic in the graph's size (2/3 of
    compiling a 20,000-op chain). Reference counting still frees what is dropped. (Not contextlib's
    decorator: its frame would be the first outside minigrad, and nodes made inside would say they were
    defined in contextlib.py.)"""
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()
    return paused


@without_gc
def gradients(ys, xs, grad_ys=None) -> list[Symbol]:
    """Add the backward graph of sum(ys) to the same graph; return d/dx for each x in xs.

    Uses the very same VJP rules as the tape, so the result can be drawn, compiled
    and differentiated again. An x that ys do not depend on gets a zero gradient of
    x's shape (TensorFlow returns None there; zeros keep Session.run simple).

    >>> import minigrad as mg
    >>> g = mg.Graph()
    >>> with g.as_default():
    ...     a = mg.placeholder(mg.float32); b = mg.placeholder(mg.float32); c = a * b
    ...     da, db = mg.gradients(c, [a, b])
    >>> mg.Session(g).run([da, db], {a: 15.0, b: 20.0})
    [array(20., dtype=float32), array(15., dtype=float32)]
    """
    g, ys, xs, grad_ys = _gradient_args(ys, xs, grad_ys)
    start = len(g.nodes)
    with g.atomic(), g.as_default(), g._one_constant_per_value():
        # values that depend on some x: only those need (and get) cotangents
        x_ids = {id(x) for x in xs}
        live = set(x_ids)
        relevant = []
        for node in g.nodes:
            if any(id(i) in live for i in node.inputs) and node.prim.vjp is not None:
                relevant.append(node)
                live.update(id(o) for o in node.outputs if o.dtype.kind == 'f')
        ct: dict = {}
        for y, gy in zip(ys, grad_ys):
            if y.dtype.kind != 'f':
                raise MinigradError(f"gradients: '{y.name}' has dtype {y.dtype}; only float values "
                                    f'can be differentiated')
            # as the tape's backward (an explicit mg.stop_gradient gives zeros)
            if y.node in g.no_grad:
                raise GraphError(f"gradients: '{y.node.inputs[0].name}' was computed under "
                                 f'mg.no_grad(), so no gradient flows back; build it outside')
            gy = ones_like(y) if gy is None else _seed(g, y, gy)
            ct[id(y)] = gy if id(y) not in ct else P.add(ct[id(y)], gy)
        found: dict = {}

        def on_cotangent(node, gs):
            for o, gi in zip(node.outputs, gs):
                if id(o) in x_ids and gi is not None:
                    found[id(o)] = gi

        def call_vjp(node, gs):
            needs = tuple(id(i) in live and i.dtype.kind == 'f' for i in node.inputs)
            if node.prim.multiple_results:
                grads = node.prim.vjp(needs, gs, tuple(node.outputs), *node.inputs, **node.params)
            else:
                grads = node.prim.vjp(needs, gs[0], node.outputs[0], *node.inputs, **node.params)
            return zip(node.inputs, grads)

        reverse_sweep(reversed(relevant), ct, lambda n: n.outputs, call_vjp, on_cotangent)
        found.update({k: v for k, v in ct.items() if k in x_ids and k not in found})
        result = [found.get(id(x)) if found.get(id(x)) is not None else zeros_like(x) for x in xs]
    g.grad_nodes.update(id(n) for n in g.nodes[start:])
    return result


def _gradient_args(ys, xs, grad_ys):
    """(graph, ys, xs, grad_ys) as lists, checked: Symbols of one graph."""
    ys = [ys] if isinstance(ys, Symbol) else list(ys)
    xs = [xs] if isinstance(xs, Symbol) else list(xs)
    g = one_graph('gradients', ys + xs, 'for eager tensors use .backward()')
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    elif not isinstance(grad_ys, (list, tuple)):
        grad_ys = [grad_ys]
    if len(grad_ys) != len(ys):
        raise GraphError(f'gradients: got {len(grad_ys)} grad_ys for {len(ys)} ys; give one per y (or None)')
    return g, ys, xs, grad_ys


def _seed(g, y, gy) -> Symbol:
    """grad_ys for `y`: its shape, cast to its dtype (TF: a cotangent has the shape of its value)."""
    gy = g.lift(gy, like=(y,))
    if not shapes_compatible(y.shape, gy.shape):
        raise GraphError(f"gradients: grad_ys for '{y.name}' has shape {fmt_shape(gy.shape)}, "
                         f"but '{y.name}' has shape {fmt_shape(y.shape)}; "
                         f'give one cotangent of the same shape per y')
    if gy.dtype.kind not in 'biuf':
        raise GraphError(f"gradients: grad_ys for '{y.name}' has dtype {gy.dtype}; give numbers")
    return gy if gy.dtype == y.dtype else P.cast(gy, dtype=y.dtype)


def one_graph(what, syms, hint) -> Graph:
    """The graph of `syms`, checked: all Symbols, all of one graph (else a GraphError naming `what`)."""
    for s in syms:
        if not isinstance(s, Symbol):
            raise GraphError(f'{what}: expected Symbols, got {describe(s)}; {hint}')
        if s.graph is not syms[0].graph:
            raise GraphError(f"{what}: '{s.name}' belongs to another graph than '{syms[0].name}'")
    return syms[0].graph


def group(*ops) -> Symbol:
    """One op that runs all of `ops` (e.g. Variable assigns) and returns True, like tf.group."""
    return core.apply(GROUP, *ops)


def ones_like(s: Symbol) -> Symbol:
    one = s.graph._scalar(np.ones((), s.dtype))
    return one if s.shape == () else P.broadcast_like(one, s)      # a scalar's seed: no no-op node


def zeros_like(s: Symbol) -> Symbol:
    return P.broadcast_like(s.graph._scalar(np.zeros((), s.dtype)), s)
