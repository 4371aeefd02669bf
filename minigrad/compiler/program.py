"""Lowering: flatten the optimised graph into numpy calls, plan memory, generate Python source.

Fused nodes (and fma) are expanded into one numpy call per primitive; the memory
planner then gives every array-producing call an ``out=`` buffer, reusing a buffer
in place when an input dies at the call that consumes it. So for ``y = w*x + b``
(one ``fma`` node) the schedule is ``p = multiply(w, x); y = add(p, b)`` and the
plan holds 4 arrays (w, x, b and one buffer shared by p and y) where the naive
schedule holds 5.
"""
from __future__ import annotations

import re

import numpy as np

from ..core import broadcast_shapes, fmt_shape
from ..errors import FeedError, MinigradError, ShapeError

UFUNCS = {'add': 'add', 'mul': 'multiply', 'sub': 'subtract', 'div': 'true_divide', 'pow': 'power',
          'maximum': 'maximum', 'neg': 'negative', 'exp': 'exp', 'log': 'log', 'sin': 'sin', 'cos': 'cos',
          'tanh': 'tanh', 'less': 'less', 'greater': 'greater', 'equal': 'equal', 'less_equal': 'less_equal',
          'greater_equal': 'greater_equal', 'not_equal': 'not_equal', 'relu': 'fmax'}
BUFFERED = set(UFUNCS) | {'sum', 'max', 'matmul', 'where', 'cast', 'concatenate'}
VIEWS = {'reshape', 'transpose', 'broadcast_to', 'stop_gradient', 'getitem'}
INF = 1 << 60
_FILENAME = '<minigrad program>'


class Value:
    """One array in the flattened schedule. kind: input | const | state | temp | view | alias."""
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
    __slots__ = ('op', 'ins', 'outs', 'params', 'prim')

    def __init__(self, op, ins, outs, params, prim=None):
        self.op, self.ins, self.outs, self.params, self.prim = op, ins, outs, params, prim


def flatten(graph, inputs, variables):
    """The schedule: (values, steps). Fused sub-graphs and fma nodes are inlined."""
    vals: dict[int, Value] = {}
    allv: list[Value] = []
    steps: list[Step] = []

    def new(sym_or_name, shape, dtype, kind, bases=()):
        v = Value(getattr(sym_or_name, 'name', sym_or_name), shape, dtype, kind, bases)
        allv.append(v)
        return v
    for s in inputs:
        vals[id(s)] = new(s, s.shape, s.dtype, 'input')

    def walk(g):
        for node in g.nodes:
            op, outs = node.op, node.outputs
            if op == 'placeholder':
                if id(outs[0]) not in vals:
                    raise MinigradError(f"compile: placeholder '{outs[0].name}' is not an input")
                continue
            if op == 'constant':
                v = vals[id(outs[0])] = new(outs[0], outs[0].shape, outs[0].dtype, 'const')
                v.const = node.params['value']
                continue
            if op == 'variable':
                v = vals[id(outs[0])] = new(outs[0], outs[0].shape, outs[0].dtype, 'state')
                v.const = variables.index(id(node.params['initial_value']))
                continue
            ins = [vals[id(i)] for i in node.inputs]
            if op == 'fused':
                sub = node.params['graph']
                vals.update({id(p): v for p, v in zip(sub.inputs, ins)})
                walk(sub)
                vals.update({id(o): vals[id(so)] for o, so in zip(outs, sub.outputs)})
                continue
            o = outs[0]
            if op == 'fma':
                a, b, c = ins
                shp = broadcast_shapes('fma', a.shape, b.shape)
                t = new(o.name + ':mul', shp, np.result_type(a.dtype, b.dtype), 'temp')
                steps.append(Step('mul', [a, b], [t], {}))
                ins, op = [t, c], 'add'
            if op in BUFFERED:
                kind = 'temp'
            elif op in VIEWS and not (op == 'getitem' and any(isinstance(i, np.ndarray) for i in node.params['idx'])):
                kind = 'view'
            elif op == 'assign':
                kind = 'state'
            else:
                kind = 'alias'
            res = [new(x, x.shape, x.dtype, kind, ins if kind in ('view', 'alias') else ()) for x in outs]
            vals.update(zip(map(id, outs), res))
            steps.append(Step(op, ins, res, node.params, node.prim))
    walk(graph)
    return vals, allv, steps


class MemoryPlan:
    """program.memory: buffer counts and bytes, naive vs planned, and value -> buffer assignment.

    Naive = every array kept alive for the whole run (what an interpreter or a tape does):
    one buffer per value. Planned = inputs/constants/state + a pool of buffers reused once
    a value's last use has passed (in place when the input dies at the op consuming it).
    Bytes are None when some shape is unknown at compile time."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __getitem__(self, k):
        return self.__dict__[k]

    def keys(self):
        return self.__dict__.keys()

    def __repr__(self):
        return (f'MemoryPlan(naive: {self.naive_num_buffers} buffers, {self.naive_peak_bytes} bytes; '
                f'planned: {self.num_buffers} buffers, {self.peak_bytes} bytes)')


def plan_memory(allv, steps, outputs):
    for s, st in enumerate(steps):
        for v in st.outs:
            v.first = v.last = s
        for v in st.ins:
            v.last = max(v.last, s)
    for v in outputs:
        v.last = INF
    for st in reversed(steps):            # a view keeps what it looks at alive
        for v in st.outs:
            for b in v.bases:
                b.last = max(b.last, v.last)
    free: dict = {}
    nbuf, dyn, keys = 0, 0, []
    for s, st in enumerate(steps):
        for v in st.outs:
            if v.kind != 'temp':
                continue
            key = (v.shape, v.dtype) if v.known else None
            dying = [i for i in st.ins if i.kind == 'temp' and i.last == s and (i.buf is not None or i.dbuf is not None)
                     and i.dtype == v.dtype and (key is None or (i.shape, i.dtype) == key)]
            if st.op in UFUNCS and dying and (key is None) == (dying[0].buf is None):
                v.buf, v.dbuf = dying[0].buf, dying[0].dbuf
                v.ref = dying[0]
            elif key is None:
                v.dbuf, dyn = dyn, dyn + 1
            elif free.get(key):
                v.buf = free[key].pop()
            else:
                v.buf, nbuf = nbuf, nbuf + 1
                keys.append(key)
        taken = {v.buf for v in st.outs if v.buf is not None}
        for i in {id(i): i for i in list(st.ins) + list(st.outs)}.values():
            if i.kind == 'temp' and i.buf is not None and i.last == s and i.buf not in taken:
                free.setdefault((i.shape, i.dtype), []).append(i.buf)
    held = [v for v in allv if v.kind in ('input', 'const', 'state') and v.first == -1]
    naive = [v for v in allv if v.kind not in ('view',) and not (v.kind == 'state' and v.first >= 0)]
    unknown = any(v.nbytes is None for v in naive)
    assignment = {}
    for v in allv:
        if v.buf is not None:
            assignment[v.name] = f'buf{v.buf}'
        elif v.dbuf is not None:
            assignment[v.name] = f'dyn{v.dbuf}'
        elif v.kind in ('input', 'const', 'state') and v.first == -1:
            assignment[v.name] = v.name
    fresh = [v for v in allv if v.kind == 'alias']
    return MemoryPlan(
        naive_num_buffers=len(naive), num_buffers=len(held) + nbuf + dyn + len(fresh),
        naive_peak_bytes=None if unknown else sum(v.nbytes for v in naive),
        peak_bytes=None if unknown or dyn or any(v.nbytes is None for v in fresh) else
        sum(v.nbytes for v in held) + sum(int(np.prod(k[0], dtype=np.int64)) * k[1].itemsize for k in keys)
        + sum(v.nbytes for v in fresh),
        assignment=assignment, buffer_shapes=[(k[0], str(k[1])) for k in keys],
        liveness={v.name: (v.first, None if v.last >= INF else v.last) for v in allv},
        schedule=[f'{", ".join(o.name for o in st.outs)} = {st.op}({", ".join(i.name for i in st.ins)})'
                  for st in steps])


def _safe(name) -> str:
    return re.sub(r'[^A-Za-z0-9_.:-]', '_', str(name))[:40]


def generate(inputs, ivals, outputs, allv, steps, nstate, single):
    """Python source of ``build(B, K)`` returning ``run(*inputs, S)``, and its namespace constants."""
    consts: list = []

    def K(obj):
        consts.append(obj)
        return f'K[{len(consts) - 1}]'
    names: dict[int, str] = {}
    counter = [0]

    def nm(v):
        if id(v) not in names:
            if v.buf is not None:
                names[id(v)] = f'b{v.buf}'
            else:
                names[id(v)] = f'v{counter[0]}'
                counter[0] += 1
        return names[id(v)]
    fns, dts = {}, {}

    def F(fn):                            # numpy functions bound as closure locals
        fns.setdefault(fn, f'np_{fn.replace(".", "_")}')
        return fns[fn]

    def D(dt):
        dts.setdefault(str(dt), f'dt_{dt}')
        return dts[str(dt)]
    body, head = [], []
    for i, v in enumerate(ivals):
        nm(v)
        chk = f'{nm(v)}.__class__ is not ndarray or {nm(v)}.dtype != {D(v.dtype)}'
        if v.known:
            chk += f' or {nm(v)}.shape != {v.shape!r}'
        body.append(f'if {chk}: {nm(v)} = conv({i}, {nm(v)})  # {_safe(v.name)}')
    state_in_place = set()
    assigns = [st for st in steps if st.op == 'assign']
    for v in allv:
        if v.kind == 'const' and v.first == -1:
            names[id(v)] = f'c{len(names)}'
            head.append(f'{names[id(v)]} = {K(v.const)}  # {_safe(v.name)}')
        elif v.kind == 'state' and v.first == -1:
            names[id(v)] = f's{v.const}'
            body.append(f's{v.const} = S[{v.const}]  # {_safe(v.name)}')
    for s, st in enumerate(steps):
        ins = [nm(i) for i in st.ins]
        o = st.outs[0]
        op, p = st.op, st.params
        out = None
        if o.kind == 'temp':
            if o.buf is not None:
                out = f'b{o.buf}'
            elif o.ref is not None:          # unknown shape: in place only if the shapes turn out equal
                r = nm(o.ref)
                others = [nm(i) for i in st.ins if i is not o.ref and i.shape != ()]
                conds = [f'{r}.__class__ is ndarray'] + [f'{x}.shape == {r}.shape' for x in others]
                out = f'({r} if {" and ".join(conds)} else None)'
        if op in UFUNCS:
            args = ins + (['0'] if op == 'relu' else [])
            kw = op in ('maximum', 'relu')          # numpy 2.4 deprecates a positional out for these
            line = f'{F(UFUNCS[op])}({", ".join(args + ([("out=" if kw else "") + out] if out else []))})'
        elif op in ('sum', 'max'):
            red = 'add.reduce' if op == 'sum' else 'maximum.reduce'
            dt = D(o.dtype) if o.dtype != st.ins[0].dtype else 'None'
            line = f'{F(red)}({ins[0]}, {p.get("axis")!r}, {dt}, {out or "None"}, {p.get("keepdims", False)!r})'
            if not out:
                line = f'{F("asarray")}({line})'
        elif op == 'matmul':
            line = f'{F("matmul")}({ins[0]}, {ins[1]}{", " + out if out else ""})'
        elif op == 'concatenate':
            line = f'{F("concatenate")}(({", ".join(ins)},), {p.get("axis", 0)!r}{", " + out if out else ""})'
        elif op == 'where' and o.buf is not None:
            body.append(f'{F("copyto")}({out}, {ins[2]})')
            line = f'{F("copyto")}({out}, {ins[1]}, where={ins[0]})'
        elif op == 'where':
            line = f'{F("where")}({", ".join(ins)})'
        elif op == 'cast' and o.buf is not None:
            line = f"{F('copyto')}({out}, {ins[0]}, casting='unsafe')"
        elif op == 'cast':
            line = f'{F("asarray")}({ins[0]}).astype({D(o.dtype)})'
        elif op == 'reshape':
            line = f'{F("reshape")}({ins[0]}, {tuple(p["shape"])!r})'
        elif op == 'transpose':
            line = f'{F("transpose")}({ins[0]}, {p.get("axes")!r})'
        elif op == 'broadcast_to':
            line = f'{F("broadcast_to")}({ins[0]}, {tuple(p["shape"])!r})'
        elif op == 'getitem' and o.kind == 'view':
            line = f'{ins[0]}[{K(p["idx"])}]'
        elif op == 'stop_gradient':
            line = ins[0]
        elif op == 'assign':
            i = st.ins[0].const
            var, val = st.ins
            if var.kind == 'state' and var.last == s and len([a for a in assigns if a.ins[0].const == i]) == 1 \
                    and var.known and val.shape == var.shape:
                state_in_place.add(i)
                body.append(f"{F('copyto')}(s{i}, {ins[1]}, casting='unsafe')  # assign {_safe(var.name)}")
                names[id(o)] = f's{i}'
                continue
            line = f'S[{i}] = {F("array")}({ins[1]}, {D(var.dtype)})'
        elif op == 'group':
            line = 'np_true'
        else:
            args = ', '.join(ins)
            line = f'{K(st.prim.impl)}({args}{", " if args else ""}**{K(dict(st.params))})'
            if not st.prim.multiple_results:
                line = f'{F("asarray")}({line})'
        multi = st.prim is not None and st.prim.multiple_results and op not in UFUNCS
        lhs = ', '.join(nm(x) for x in st.outs) + (',' if multi else '')
        if o.kind == 'temp' and o.buf is not None:
            body.append(f'{line}  # {_safe(o.name)} = {op}')
        else:
            body.append(f'{lhs} = {line}  # {_safe(o.name)} = {op}')
    # Every returned value gets its own name, written before the return: the caller owns it.
    # Trap: a buffer handed to the caller is replaced by a fresh one, so a duplicate or alias of
    # the same value must copy the handed array (r_k), never the buffer name rebound after it.
    rets, handed = [], {}
    for k, v in enumerate(outputs):
        key = ('buf', v.buf) if v.kind == 'temp' and v.buf is not None else ('val', id(v))
        if key in handed:
            body.append(f'r_{k} = {F("array")}({handed[key]})  # a second fetch of the same value')
        elif v.kind == 'temp' and v.buf is not None:
            handed[key] = f'r_{k}'
            body.append(f'r_{k} = b{v.buf}; b{v.buf} = {F("empty")}({v.shape!r}, {D(v.dtype)})'
                        f'  # hand the buffer to the caller')
        elif v.kind == 'temp':
            handed[key] = f'r_{k}'
            body.append(f'r_{k} = {F("asarray")}({nm(v)})')
        else:             # an input, constant, state or view: copy, so the caller cannot change it
            handed[key] = f'r_{k}'
            body.append(f'r_{k} = {F("array")}({nm(v)})')
        rets.append(f'r_{k}')
    body.append(f'return {rets[0]}' if single else f'return [{", ".join(rets)}]')
    handed = [v for v in outputs if v.kind == 'temp' and v.buf is not None]
    bufs = sorted({v.buf for v in allv if v.buf is not None})
    lines = ['def build(np, B, K, conv):', '    ndarray = np.ndarray']
    lines += [f'    {a} = np.{fn}' for fn, a in fns.items()]
    if any('np_true' in b for b in body):
        lines.append('    np_true = np.array(True)')
    lines += [f'    {a} = np.dtype({d!r})' for d, a in dts.items()]
    lines += ['    ' + h for h in head]
    lines += [f'    b{b} = B[{b}]' for b in bufs]
    args = ', '.join(nm(v) for v in ivals) + (', ' if ivals else '') + 'S'
    lines.append(f'    def run({args}):')
    if handed:
        lines.append(f'        nonlocal {", ".join(sorted({f"b{v.buf}" for v in handed}))}')
    lines += ['        ' + b for b in body]
    lines.append('    return run')
    return '\n'.join(lines) + '\n', consts


class Program:
    """A compiled graph: call it with arrays in the order of `inputs`.

    Attributes: ``graph`` (optimised), ``history`` [(pass name, Graph)], ``source``
    (generated Python), ``memory`` (MemoryPlan), ``stats`` (dict), ``inputs``,
    ``outputs``, ``variables`` (Variables read/assigned; their values live in ``state``).
    """

    def __init__(self, graph, history, inputs, outputs, single, variables, stats):
        self.graph, self.history, self.inputs, self.outputs = graph, history, inputs, outputs
        self.variables, self.stats, self._single = variables, stats, single
        self.state = [np.array(v.node.params['initial_value']) for v in variables]
        var_keys = [id(v.node.params['initial_value']) for v in variables]
        vals, allv, steps = flatten(graph, graph.inputs, var_keys)
        ivals = [vals[id(s)] for s in graph.inputs]
        ovals = [vals[id(s)] for s in graph.outputs]
        self.memory = plan_memory(allv, steps, ovals)
        self.source, consts = generate(inputs, ivals, ovals, allv, steps, len(variables), single)
        self.stats['steps'] = len(steps)
        ns = {}
        exec(compile(self.source, _FILENAME, 'exec'), ns)    # noqa: S102 -- our own source
        shapes = [(fmt_shape(s.shape), s.shape, s.dtype) for s in graph.inputs]
        bufs = [np.empty(s, d) for s, d in self.memory.buffer_shapes]
        self._run = ns['build'](np, bufs, consts, self._converter(shapes))

    def _converter(self, shapes):
        names = [s.name for s in self.inputs]

        def conv(i, x):
            fs, shape, dt = shapes[i]
            x = getattr(x, 'data', x) if type(x).__name__ in ('Tensor', 'Parameter') else x
            arr = np.asarray(x)
            if arr.dtype != dt:
                if not np.can_cast(arr.dtype, dt, 'same_kind') and not (arr.dtype.kind in 'iub' and dt.kind == 'f'):
                    raise FeedError(f"Program: cannot pass a {arr.dtype} value as input {i} ('{names[i]}', {dt}); "
                                    f'convert it first with np.asarray(value, dtype={dt.name!r})')
                arr = arr.astype(dt)
            if shape is not None and (arr.ndim != len(shape) or
                                      any(d is not None and d != a for d, a in zip(shape, arr.shape))):
                raise FeedError(f"Program: input {i} ('{names[i]}') has shape {fmt_shape(arr.shape)} but the "
                                f'program was compiled for {fs}. Compile again for this shape (mg.jit and '
                                f'Session.run do that for you).')
            return arr
        return conv

    def __call__(self, *arrays):
        if len(arrays) != len(self.inputs):
            raise FeedError(f'Program takes {len(self.inputs)} inputs '
                            f'({", ".join(s.name for s in self.inputs)}), got {len(arrays)}')
        return self.run(arrays, self.state)

    def run(self, arrays, state: list):
        """Run with explicit Variable ``state`` (a list, updated by assigns); Session uses this."""
        try:
            return self._run(*arrays, state)
        except MinigradError:
            raise
        except Exception as e:
            raise self._runtime_error(e) from None

    def _runtime_error(self, exc) -> ShapeError:
        """Name the generated line (and so the node, in its comment) where numpy failed."""
        tb, line = exc.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == _FILENAME:
                line = self.source.splitlines()[tb.tb_lineno - 1].strip()
            tb = tb.tb_next
        where = f' at generated line `{line}`' if line else ''
        shapes = ', '.join(f'{s.name}: {fmt_shape(s.shape)}' for s in self.inputs)
        return ShapeError(f'compiled program failed{where}: {type(exc).__name__}: {exc}. It was compiled for '
                          f'inputs {shapes}; print(program.source) shows the generated code.')

    def __repr__(self):
        return (f'<Program {len(self.inputs)} inputs -> {len(self.outputs)} outputs, '
                f'{self.stats["nodes_before"]} -> {self.stats["nodes_after"]} nodes, '
                f'{self.memory.num_buffers} buffers>')

    def _repr_mimebundle_(self, include=None, exclude=None):
        from .. import viz
        return viz.mimebundle(self)
