"""Code generation: the schedule as readable Python source calling numpy with ``out=`` buffers.

What each step becomes is read from its op's record (core.Primitive): a ufunc call, the
record's ``emit`` rule, or (for anything else) a call of its numpy impl. Parameters and
constants are bound as values in the generated module (``K[i]``), never pasted as source,
except plain literals (ints, bools, None and tuples of them).
"""
from __future__ import annotations

import re
import sys

import numpy as np

from ..core.graph import ASSIGN
from .ops import kernel_call


def comment_safe(name) -> str:
    """A user's name, made safe for a comment in generated code (here and in kernels.py).

    >>> comment_safe('x\\n= 1')
    'x___1'
    """
    return re.sub(r'[^A-Za-z0-9_.:-]', '_', str(name))[:40]


def _literal(v) -> bool:
    if v is None or type(v) in (bool, int):
        return True
    return type(v) is tuple and all(_literal(i) for i in v)


# A driver with more buffers reads them as B[i] instead of binding each to a closure variable b<i>: CPython's
# compile time grows quadratically in a function's closure variables (the 20,000-op chain's 9,985 buffers:
# 0.69 s to compile its driver, 0.11 s indexed), while an index costs a few nanoseconds per use.
# speed: past this many buffers the driver indexes B, for Python's compile time
MANY_BUFFERS = 1024


class Codegen:
    """Builds ``build(np, B, K, conv)``, which returns ``run(*inputs, S)``; ``emit`` rules get it as ctx."""

    def __init__(self, indexed=False):
        self.consts, self.fns, self.dts, self.names = [], {}, {}, {}
        self.head, self.body = [], []
        self.out_dtype = self.in_dtypes = None      # the current step's dtypes, for emit rules
        self.out_buffers = []                       # the current step's result buffers (a kernel's)
        self.into_state = {}                        # id(value) -> 'n{i}': a kernel writes Variable i's new value
        self.commits = []                           # (state slot, name of its new value), in step order
        self.where = {}                             # body line index -> where the step's node was defined
        self.indexed = indexed                      # buffers named B[i], not b<i> (MANY_BUFFERS)

    # -- what emit rules use
    def fn(self, name: str) -> str:
        """A numpy function, bound once as a local: fn('add.reduce') -> 'np_add_reduce'."""
        # speed: a closure variable per numpy function, not np.<name> looked up at every call
        return self.fns.setdefault(name, 'np_' + name.replace('.', '_'))

    def const(self, obj) -> str:
        self.consts.append(obj)
        return f'K[{len(self.consts) - 1}]'

    def lit(self, v) -> str:
        return repr(v) if _literal(v) else self.const(v)

    def dtype(self, dt) -> str:
        dt = np.dtype(dt)
        spelled = dt.name if np.dtype(dt.name) == dt else dt.str       # 'float32', or '<U3' and the like
        return self.dts.setdefault(spelled, 'dt_' + re.sub(r'\W', '_', dt.name))

    # -- values
    def buf(self, b) -> str:
        return f'B[{b}]' if self.indexed else f'b{b}'

    def name(self, v) -> str:
        if id(v) not in self.names:
            self.names[id(v)] = self.buf(v.buf) if v.buf is not None else f'v{len(self.names)}'
        return self.names[id(v)]

    def inputs(self, ivals):
        for i, v in enumerate(ivals):
            n = self.name(v)
            chk = f'{n}.__class__ is not ndarray or {n}.dtype != {self.dtype(v.dtype)}'
            if v.known:
                chk += f' or {n}.shape != {v.shape!r}'
            if v.contig:                # a loop kernel reads it as a C-contiguous array
                chk += f' or not {n}.flags.c_contiguous'
            self.body.append(f'if {chk}: {n} = conv({i}, {n})  # {comment_safe(v.name)}')

    def spares(self):
        """A Variable a kernel updates keeps a spare array, its value two calls ago, which the next update writes
        into when the program alone holds it (getrefcount; ONLY: what it reports for an object one list holds):
        a training step then allocates nothing, and an array the caller kept is never written."""
        # speed: a Variable's update written into its spare array, not a new one, when nothing else holds it
        if self.into_state:
            n = 1 + max(int(v[1:]) for v in self.into_state.values())
            self.head += [f'P, M = [None] * {n}, [None] * {n}  # per Variable: the spare, the array last committed',
                          f'getrefcount, one = {self.const(sys.getrefcount)}, [object()]', 'ONLY = getrefcount(one[0])']

    def held(self, allv):
        """Constants (bound once) and Variable state (read from S each call)."""
        for v in allv:
            if v.kind == 'const' and v.first == -1:
                self.names[id(v)] = f'c{len(self.names)}'
                self.head.append(f'{self.names[id(v)]} = {self.const(v.const)}  # {comment_safe(v.name)}')
            elif v.kind == 'state' and v.first == -1:
                self.names[id(v)] = f's{v.const}'
                self.body.append(f's{v.const} = S[{v.const}]  # {comment_safe(v.name)}')
                if v.contig:                # a loop kernel reads it as C-contiguous (program.state may be set to any array)
                    self.body.append(f"if not s{v.const}.flags.c_contiguous: s{v.const} = "
                                     f"{self.fn('ascontiguousarray')}(s{v.const})")

    # -- steps
    def out_buffer(self, st):
        o = st.outs[0]
        if o.kind != 'temp':
            return None
        if o.buf is not None:
            return self.name(o)
        if o.ref is not None:          # unknown shape: in place only if the shapes turn out equal
            r = self.name(o.ref)
            others = [self.name(i) for i in st.ins if i is not o.ref and i.shape != ()]
            conds = [f'{r}.__class__ is ndarray'] + [f'{x}.shape == {r}.shape' for x in others]
            return f'({r} if {" and ".join(conds)} else None)'
        return None

    def step(self, st, s, steps):
        o, prim = st.outs[0], st.prim
        args = [self.name(i) for i in st.ins]
        if prim is ASSIGN:
            return self.assign(st, s, steps, args)
        out = self.out_buffer(st)
        self.out_dtype, self.in_dtypes = o.dtype, [i.dtype for i in st.ins]
        self.out_buffers = [self.into_state.get(id(v), self.name(v)) for v in st.outs
                            if v.kind == 'temp' and v.buf is not None]
        for v in st.outs:
            if id(v) in self.into_state:                # not S's array: the Variable keeps its value until the end
                n = self.into_state[id(v)]
                self.body.append(f"{n} = P[{n[1:]}] if getrefcount(P[{n[1:]}]) == ONLY else "
                                 f"{self.fn('empty')}({v.shape!r}, {self.dtype(v.dtype)})  # the spare, or a new array")
        if prim is kernel_call:
            args = [self.kernel_arg(a, v) for a, v in zip(args, st.ins)]
        if prim.emit is not None:
            line = prim.emit(args, out, st.params, self)
        elif prim.ufunc is not None:
            line = f'{self.fn(prim.ufunc)}({", ".join(args + ([f"out={out}"] if out else []))})'
        else:                           # anything else: its numpy impl, params bound as a value
            line = f'{self.const(prim.impl)}({", ".join(args + ["**" + self.const(dict(st.params))])})'
            line = line if prim.multiple_results else f"{self.fn('asarray')}({line})"
        comment = f'  # {comment_safe(o.name)} = {prim.name}'
        if o.kind == 'temp' and o.buf is not None:
            self.body.append(line + comment)
        else:
            lhs = ', '.join(self.name(x) for x in st.outs) + (',' if prim.multiple_results else '')
            self.body.append(f'{lhs} = {line}{comment}')

    def kernel_arg(self, a, v):
        """A kernel reads arrays: numpy's fresh results are nearly always C-contiguous (make sure),
        and an op may give a numpy scalar (x[()]) where a kernel needs a 0-d array."""
        if v.kind in ('alias', 'view') and not v.shape:
            return f"{self.fn('asarray')}({a})"
        return f"{self.fn('ascontiguousarray')}({a})" if v.kind == 'alias' else a

    def assign(self, st, s, steps, args):
        """The new value goes into a fresh array, stored into S only after every step has run
        (commit): a run that fails part way leaves every Variable as it was."""
        var, val = st.ins
        i = var.const
        new = self.into_state.get(id(val))
        if new == f'n{i}':                              # the kernel already wrote it there
            self.body.append(f'# assign {comment_safe(var.name)}: written by the kernel above')
            self.names[id(st.outs[0])] = new
        else:
            new = self.name(st.outs[0])
            self.body.append(f"{new} = {self.fn('array')}({args[1]}, {self.dtype(var.dtype)}, order='C')  "
                             f"# assign {comment_safe(var.name)}: C order, as loop kernels read it")
        self.commits.append((i, new))

    # -- results
    def bind_outputs(self, outputs):
        """A result with a planned buffer is computed into o_k: that buffer, or with out= the caller's array.
        A buffer the last call handed to its caller (None) is replaced first: allocated as the call starts,
        a fresh array reuses the memory the caller has freed by then (made as the last call ended, while
        the caller still held its results, it came new from the system: a page fault per 4 KiB)."""
        # speed: a handed buffer replaced as the next call starts (memory the caller freed), not as one ends
        handed = {v.buf: v for v in outputs if v.kind == 'temp' and v.buf is not None}
        self.body += [f"if {self.buf(b)} is None: {self.buf(b)} = {self.fn('empty')}({v.shape!r}, "
                      f"{self.dtype(v.dtype)})  # handed to the last caller" for b, v in sorted(handed.items())]
        for k, v in enumerate(outputs):
            if v.kind == 'temp' and v.buf is not None and id(v) not in self.names:
                self.names[id(v)] = f'o{k}'
                self.body.append(f'o{k} = {self.buf(v.buf)} if O is None else O[{k}]  # {comment_safe(v.name)}')

    def returns(self, outputs, single):
        """Every returned value gets its own name, written before the return: the caller owns it.
        Trap: a buffer handed to the caller is dropped (None; the next call makes a fresh one), so a duplicate
        or alias of the same value must copy the handed array (r_k), never the buffer name rebound after it."""
        # speed: a result's planned buffer handed to the caller as it is, not copied into a fresh array
        copy, direct = self.fn('copyto'), {self.names[id(v)] for v in outputs if v.kind == 'temp' and v.buf is not None}
        self.body.append('if O is not None:  # out=: the results not computed into O already')
        self.body += [f'    {copy}(O[{k}], {self.name(v)})' for k, v in enumerate(outputs)
                      if self.name(v) not in direct or self.name(v) != f'o{k}']
        commit = [f'P[{i}] = S[{i}] if S[{i}] is M[{i}] else None; S[{i}] = M[{i}] = {n}  # commit (the old array: '
                  f'a spare)' if n == f'n{i}' else f'S[{i}] = {n}  # commit' for i, n in self.commits]
        self.body += ['    ' + c for c in commit]
        self.body.append('    return O[0]' if single else '    return O')
        rets, handed = [], {}
        for k, v in enumerate(outputs):
            key = ('buf', v.buf) if v.kind == 'temp' and v.buf is not None else ('val', id(v))
            if key in handed:
                self.body.append(f"r_{k} = {self.fn('array')}({handed[key]})  # a second fetch of the same value")
            elif v.kind == 'temp' and v.buf is not None:
                self.body.append(f'r_{k} = {self.name(v)}; {self.buf(v.buf)} = None  # hand the buffer to the caller')
            else:     # a fresh array is the caller's; an input, constant, state or view is copied
                self.body.append(f"r_{k} = {self.fn('asarray' if v.kind == 'temp' else 'array')}({self.name(v)})")
            handed.setdefault(key, f'r_{k}')
            rets.append(f'r_{k}')
        self.body += commit
        self.body.append(f'return {rets[0]}' if single else f'return [{", ".join(rets)}]')
        rebound = sorted({f'b{v.buf}' for v in outputs if v.kind == 'temp' and v.buf is not None})
        return [] if self.indexed else rebound          # B[i] = None needs no nonlocal

    def source(self, ivals, bufs, rebound) -> str:
        lines = ['def build(np, B, K, conv):', '    ndarray = np.ndarray']
        lines += [f'    {a} = np.{fn}' for fn, a in self.fns.items()]
        lines += [f'    {a} = np.dtype({d!r})' for d, a in self.dts.items()]
        lines += ['    ' + h for h in self.head]
        lines += [f'    b{b} = B[{b}]' for b in bufs if not self.indexed]
        lines.append(f'    def run({", ".join([self.name(v) for v in ivals] + ["S", "O"])}):')
        if rebound:
            lines.append(f'        nonlocal {", ".join(rebound)}')
        self.line_where = {len(lines) + i + 1: w for i, w in self.where.items() if w}   # 1-based source lines
        lines += ['        ' + b for b in self.body]
        lines.append('    return run')
        return '\n'.join(lines) + '\n'


def updates_in_place(steps, outputs) -> dict:
    """Variable updates a kernel can write straight into the Variable's new array
    (``v.assign(v - lr * g)``, no copy pass): the new value's ONLY reader is its one assign."""
    # speed: a kernel writes the Variable's new array itself, not a buffer the assign then copies
    made = {id(o): k for k, st in enumerate(steps) for o in st.outs}
    returned = {id(v) for v in outputs}
    readers: dict = {}              # id(value) -> steps reading it, directly or through a view of it
    for st in steps:
        seen, todo = set(), list(st.ins)
        while todo:
            v = todo.pop()
            if id(v) not in seen:
                seen.add(id(v))
                readers[id(v)] = readers.get(id(v), 0) + 1
                todo += v.bases
    found = {}
    for s, st in enumerate(steps):
        if st.prim is not ASSIGN:
            continue
        var, val = st.ins
        k = made.get(id(val))
        # trap: the kernel then writes only the state array, so any other reader would read an unwritten buffer
        if k is None or steps[k].prim is not kernel_call or id(val) in returned or readers[id(val)] != 1 \
                or var.kind != 'state' or not var.known or (val.shape, val.dtype) != (var.shape, var.dtype):
            continue
        if sum(a.prim is ASSIGN and a.ins[0].const == var.const for a in steps) == 1:
            found[id(val)] = f'n{var.const}'
    return found


def generate(ivals, outputs, allv, steps, single):
    """(Python source of ``build``, the constants it binds as K, {source line: where its node was defined})."""
    bufs = sorted({v.buf for v in allv if v.buf is not None})
    cg = Codegen(indexed=len(bufs) > MANY_BUFFERS)
    cg.into_state = updates_in_place(steps, outputs)
    cg.spares()
    cg.inputs(ivals)
    cg.held(allv)
    cg.bind_outputs(outputs)
    for s, st in enumerate(steps):
        cg.where[len(cg.body)] = st.where
        cg.step(st, s, steps)
    rebound = cg.returns(outputs, single)
    src = cg.source(ivals, bufs, rebound)
    return src, cg.consts, cg.line_where
