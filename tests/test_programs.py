"""The program net: ONE generator of programs as data, ONE registry of modes, checked against PyTorch.

A random program is *data*: a list of instructions (op name, operand indices, params; `programs` draws it:
elementwise, broadcasting, reductions, softmax, matmul, views, indexing, concatenation, mg.cond, mg.while_loop
and a Python ``if``, float64/float32/int64 inputs, 0, -0.0, inf, -inf, nan, empty and None dims). ONE
interpreter, `run_program(prog, ns, inputs)`, executes it against an op namespace `ns`, so the very same
program text runs in every mode of `MODES` (see `run_net`):

* the dynamic tape (`.backward()`, gradients of gradients), also keeping shape-only stand-ins for every input
  a VJP reads only the shape of (the tape's memory rule, normally for 64 KiB or more),
* Symbols: the reference interpreter (`minigrad.core.interpreter.evaluate`), `mg.Session`, `mg.compile` (per
  backend in BACKENDS), placeholders with unknown (None) dims, `mg.gradients` (with duplicates),
* `mg.trace(symbolic=True)`, `mg.trace(symbolic=False)` and `mg.jit`,
* PyTorch (float64): values, gradients, second derivatives,
* the compiler: the graph after each pass and after each pass alone (reference interpreter), the pipeline
  idempotent, placeholders of unknown rank,

The same generator's smooth programs also go through mg.testing's own checks (central differences,
assert_modes_agree), through TRANSFORMS, the registry of transformations and their compositions (tape, mg.gradients,
jvp, jacfwd, jacrev, jit, trace, grad, vmap, hessian; pairs and triples; against torch.func), and through
STEPS steps with Variables assigned (`StateRun`: interpreter with a state dict, Session, compile per backend).
tests/test_vmap.py runs vmap on the net's programs; tests/test_fast.py runs the net with the fast layer installed
and removed and asserts bit-identical results; tests/test_onnx.py exports it.

Examples are a fixed set (derandomised) by default; HYPOTHESIS_PROFILE=explore (tests/conftest.py) draws new
ones. Knobs: MINIGRAD_NET_SCALE=10 runs ten times as many programs (nightly); MINIGRAD_NET_NO_SHRINK=1 reports
the first failure unshrunk.

Every value is fetched, plus duplicate fetches of one Symbol, a pair of separately built identical
expressions (`v * 2.0` twice: CSE merges them) and an identity `v + 0.0` beside `v`. Gradients of a random
weighted sum of some values are compared in every mode, and for some programs gradients of gradients.

Exclusions (where PyTorch and numpy/minigrad legitimately differ), one line each:
  * gradients of maximum/minimum/max-reductions at a NaN operand (torch passes the gradient to
    both operands / gives NaN; it is a subgradient of nothing): `_torch_grad_exclusions`.
  * the sign of zero is compared between minigrad modes only, not against torch (torch.relu(-0.0)
    is -0.0, numpy's where(x > 0, x, 0) is 0.0; both are IEEE-valid).
  * torch comparisons run on float64 inputs only, and the torch adapter makes integer operands
    of float-valued ops (exp, div, x * 2.0, ...) float64 first: torch's default float is float32.
  * gradient of `x ** 0.5` at x = -0.0 or -inf: torch's rule uses rsqrt (-inf, nan), the pow rule
    0.5 * x ** -0.5 gives (+inf, 0): `_torch_grad_exclusions`.
  * the sign of zero is compared for values, not for gradients: gradient accumulation may
    legitimately add or drop an exact +0 term (tape vs graph), which flips -0.0 to 0.0.
  * relu(nan) is 0 in minigrad (relu is where(0 < x, x, 0), gradient 0 at 0 as torch's), torch gives
    nan: relu with a NaN operand is compared between minigrad modes only: `_torch_value_exclusions`.
JIT_GRAPH_BREAKS (below): mg.jit guards branch outcomes and breaks graphs, so jit is checked on programs
with a data-dependent Python if, at the example inputs and at new inputs. Recorded traces
(`symbolic=False`) freeze Python branches by design: they are compared at their example inputs, and at new
inputs only for programs without cond/while/Python if. Second derivatives through while_loop raise by
design (control.py): such programs only get first-order gradients.

After the net: its shrunk failures as plain code (`test_regression_*`), then named cases (each a specific
bug written out): control flow and grad modes under transformations, the transformation, jit-capture and
numerics tails, and the optimizers over steps (eager, fit on each backend, torch.optim).
"""
from __future__ import annotations

import functools
import importlib
import math
import os
import re
import types
import warnings
import operator

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import minigrad as mg
from minigrad import interpreter
from minigrad.compiler import DEFAULT_PASSES, PASSES, kernels
from minigrad.core.errors import MinigradError
from minigrad.course.testing import assert_modes_agree, gradcheck

EXPLORE = os.environ.get('HYPOTHESIS_PROFILE', 'fixed') == 'explore'
TAPE = importlib.import_module('minigrad.core.tensor')     # the module (mg.tensor is the function)

JIT_GRAPH_BREAKS = True       # jit guards Python branch outcomes and splits graphs there

try:
    import torch
except ImportError:             # the minigrad-internal comparisons still run
    torch = None
tfunc = importlib.import_module('torch.func') if torch is not None else None
needs_torch = pytest.mark.skipif(torch is None, reason='needs torch (the reference)')
needs_numba = pytest.mark.skipif(not kernels.available(), reason='numba is not installed')

pytestmark = pytest.mark.filterwarnings('ignore::RuntimeWarning')     # inf/nan inputs on purpose

# Compiler backends the net runs with: passed to mg.compile, and the default (MINIGRAD_BACKEND)
# for Session, mg.trace and mg.jit in the same test. The net on numba (half a minute: each program's kernels
# compile) is slow: the quick slice (-m "not slow") runs it on numpy; test_kernels.py and the numba cases of
# the numba cases below and test_fast.py check the numba backend there.
BACKENDS = ['numpy', 'numba'] if mg.compiler.kernels.available() else ['numpy']

# MINIGRAD_NET_SCALE=10 runs ten times as many programs (a nightly run); 0.1 a quick look.
SCALE = float(os.environ.get('MINIGRAD_NET_SCALE', '1'))


def n_programs(k: int) -> int:
    return max(1, round(k * SCALE))


# MINIGRAD_NET_NO_SHRINK=1 reports the first failure as found (fast, not minimal).
NO_SHRINK = bool(os.environ.get('MINIGRAD_NET_NO_SHRINK'))

NET = dict(derandomize=not EXPLORE, deadline=None, database=None, print_blob=False,
           phases=[Phase.explicit, Phase.generate] if NO_SHRINK else list(Phase),
           suppress_health_check=list(HealthCheck))

inf, nan = math.inf, math.nan


@pytest.fixture(params=[pytest.param(b, marks=pytest.mark.slow) if b == 'numba' else b for b in BACKENDS],
                ids=lambda b: f'backend={b}')
def backend(request, monkeypatch):
    """The compile backend under test (a fixture so a conftest can override it)."""
    monkeypatch.setenv('MINIGRAD_BACKEND', request.param)
    return request.param


def compile_kwargs(backend) -> dict:
    return {} if backend is None else {'backend': backend}


# =====================================================================================
# Programs as data
# =====================================================================================
CMP = {'lt': operator.lt, 'gt': operator.gt, 'le': operator.le, 'ge': operator.ge,
       'eq': operator.eq, 'ne': operator.ne}
CMP_CODE = {'lt': '<', 'gt': '>', 'le': '<=', 'ge': '>=', 'eq': '==', 'ne': '!='}
UNARY = ['neg', 'exp', 'log', 'sin', 'cos', 'tanh', 'sigmoid', 'relu', 'abs']
BINARY = {'add': '+', 'sub': '-', 'mul': '*', 'div': '/', 'maximum': None, 'minimum': None}
SCALAR = [('add', 0.0), ('mul', 2.0), ('mul', 0.0), ('mul', -1.0), ('add', 1.5), ('rsub', 1.0),
          ('rdiv', 1.0), ('pow', 2.0), ('pow', 3.0), ('pow', 0.5), ('pow', -1.0), ('pow', 0.0),
          ('pow', 1.0)]
SCALAR_CODE = {'add': '{a} + {c!r}', 'mul': '{a} * {c!r}', 'rsub': '{c!r} - {a}', 'rdiv': '{c!r} / {a}',
               'pow': '{a} ** {c!r}'}
REDUCE = ['sum', 'mean', 'max', 'logsumexp']

# cond branches: expressions over two captured outer values a, b of the same shape
BRANCHES = {
    'a': (lambda o, a, b: a, '{a}'),
    'b': (lambda o, a, b: b, '{b}'),
    'tanh': (lambda o, a, b: o.tanh(a), 'mg.tanh({a})'),
    'mul': (lambda o, a, b: a * b, '{a} * {b}'),
    'sin_add': (lambda o, a, b: o.sin(a) + b, 'mg.sin({a}) + {b}'),
    'exp_half': (lambda o, a, b: o.exp(a) * 0.5, 'mg.exp({a}) * 0.5'),
    'sub': (lambda o, a, b: a - b, '{a} - {b}'),
}
# while bodies: new v from v and a captured loop invariant w (w broadcasts into v's shape)
BODIES = {
    'tanh': (lambda o, v, w: v * o.tanh(w), 'v * mg.tanh({w})'),
    'sin': (lambda o, v, w: v * 0.5 + o.sin(w), 'v * 0.5 + mg.sin({w})'),
    'add': (lambda o, v, w: v + w, 'v + {w}'),
    'max': (lambda o, v, w: o.maximum(v, w * 0.5), 'mg.maximum(v, {w} * 0.5)'),
}
CONTROL = ('cond', 'pyif', 'while')


class Instr:
    """One instruction: ``op`` applied to values ``args`` (indices) with keyword ``params``."""
    __slots__ = ('op', 'args', 'params')

    def __init__(self, op, args, **params):
        self.op, self.args, self.params = op, tuple(args), params

    def __repr__(self):
        ps = ''.join(f', {k}={v!r}' for k, v in self.params.items())
        return f'Instr({self.op!r}, {list(self.args)}{ps})'


def to_index(idx):
    """The stored index (tuple of tagged items) -> a real numpy-style index tuple."""
    out = []
    for item in idx:
        tag = item[0]
        if tag == 'i':
            out.append(item[1])
        elif tag == 's':
            out.append(slice(*item[1:]))
        elif tag == 'n':
            out.append(None)
        else:
            out.append(np.array(item[1], dtype=np.int64))
    return tuple(out)


def index_code(idx):
    parts = []
    for item in idx:
        tag = item[0]
        if tag == 'i':
            parts.append(str(item[1]))
        elif tag == 's':
            s = ['' if v is None else str(v) for v in item[1:]]
            parts.append(f'{s[0]}:{s[1]}' + (f':{s[2]}' if s[2] else ''))
        elif tag == 'n':
            parts.append('None')
        else:
            parts.append(f'np.array({list(item[1])}, dtype=np.int64)')
    return '[' + ', '.join(parts) + ']' if parts else '[()]'


def instr_code(ins, names, outs):
    """One line of plain minigrad code for an instruction."""
    a = [names[i] for i in ins.args]
    p = ins.params
    lhs = ', '.join(outs)
    op = ins.op
    if op in BINARY:
        rhs = f'{a[0]} {BINARY[op]} {a[1]}' if BINARY[op] else f'mg.{op}({a[0]}, {a[1]})'
    elif op == 'scalar':
        rhs = SCALAR_CODE[p['fn']].format(a=a[0], c=p['c'])
    elif op in UNARY:
        rhs = f'-{a[0]}' if op == 'neg' else f'mg.{op}({a[0]})'
    elif op == 'where':
        rhs = f'mg.where({a[0]} {CMP_CODE[p["cmp"]]} {a[1]}, {a[2]}, {a[3]})'
    elif op in REDUCE:
        rhs = f'mg.{op}({a[0]}, axis={p["axis"]!r}, keepdims={p["keepdims"]})'
    elif op == 'softmax':
        rhs = f'mg.softmax({a[0]}, axis={p["axis"]})'
    elif op == 'matmul':
        rhs = f'{a[0]} @ {a[1]}'
    elif op in ('reshape', 'broadcast_to'):
        rhs = f'mg.{op}({a[0]}, {p["shape"]!r})'
    elif op == 'transpose':
        rhs = f'mg.transpose({a[0]}, {p["axes"]!r})'
    elif op == 'getitem':
        rhs = f'{a[0]}{index_code(p["idx"])}'
    elif op in ('concat', 'stack'):
        fn = 'concatenate' if op == 'concat' else 'stack'
        rhs = f'mg.{fn}([{", ".join(a)}], axis={p["axis"]})'
    elif op in ('cond', 'pyif'):
        x, y = a[1], a[2]
        t, f = BRANCHES[p['t']][1], BRANCHES[p['f']][1]
        tc = t.format(a=x, b=y) if not p['pair'] else f'({t.format(a=x, b=y)}, {t.format(a=y, b=x)})'
        fc = f.format(a=x, b=y) if not p['pair'] else f'({f.format(a=x, b=y)}, {f.format(a=y, b=x)})'
        if op == 'cond':
            rhs = f'mg.cond({a[0]}.sum() > 0.0, lambda: {tc}, lambda: {fc})'
        else:
            rhs = f'{tc} if bool({a[0]}.sum() > 0.0) else {fc}   # a Python if'
    elif op == 'while':
        n, bound = p['n'], p['bound']
        body = BODIES[p['body']][1].format(w=a[1])
        bound = 'math.inf' if bound == inf else repr(bound)
        rhs = (f'mg.while_loop(lambda i, v: mg.where(v.sum() < {bound}, i, {n}) < {n}, '
               f'lambda i, v: (i + 1, {body}), [mg.tensor(0), {a[0]}])')
    else:
        raise AssertionError(op)
    return f'{lhs} = {rhs}'


class Program:
    """Inputs (shapes, dtypes), instructions, extra fetches and the loss.

    ``repr`` is the program as plain minigrad code (what Hypothesis prints on failure)."""

    def __init__(self, shapes, dtypes, instrs, n_outs, value_shapes, value_dtypes, dups, loss, seed,
                 second_order, none_mask):
        self.shapes, self.dtypes, self.instrs, self.n_outs = shapes, dtypes, instrs, n_outs
        self.value_shapes, self.value_dtypes = value_shapes, value_dtypes
        self.dups, self.loss, self.seed = dups, loss, seed
        self.second_order, self.none_mask = second_order, none_mask
        r = np.random.default_rng(seed)
        # dyadic weights, so that every mode rounds the loss identically
        self.R = {k: (r.integers(1, 8, size=value_shapes[k]) / 4).astype(value_dtypes[k]) for k in loss}
        self.float_inputs = [i for i, d in enumerate(dtypes) if np.dtype(d).kind == 'f']
        self.U = [(r.integers(-4, 5, size=shapes[i]) / 4).astype(dtypes[i]) for i in self.float_inputs]
        self.control = any(ins.op in CONTROL for ins in instrs)
        self.python_if = any(ins.op == 'pyif' for ins in instrs)

    @property
    def n_values(self):
        return len(self.value_shapes)

    def names(self):
        names = [f'x{i}' for i in range(len(self.shapes))]
        lines = []
        for ins, n in zip(self.instrs, self.n_outs):
            outs = [f'v{len(names) + k}' for k in range(n)]
            lines.append(instr_code(ins, names, outs))
            names += outs
        return names, lines

    def code(self, arrays=None):
        names, lines = self.names()
        head = ['import numpy as np, minigrad as mg; from math import inf, nan']
        for i, (s, d) in enumerate(zip(self.shapes, self.dtypes)):
            if arrays is not None:
                val = np.array2string(np.asarray(arrays[i]), separator=', ', threshold=100)
                head.append(f'x{i} = mg.tensor(np.array({val}, dtype=np.{np.dtype(d).name})'
                            f'{", requires_grad=True" if np.dtype(d).kind == "f" else ""})   # shape {s}')
            else:
                head.append(f'x{i} = ...   # {np.dtype(d).name} {s}'
                            + (f' placeholder shape {self.ph_shape(i)}' if self.none_mask else ''))
        loss = ' + '.join(f'(mg.sum({names[k]} * R{k}))' for k in self.loss) or '(none)'
        tail = [f'# fetches: every value, plus duplicates of {[names[k] for k in self.dups]}',
                f'# loss = {loss}   (R: fixed weights; seed={self.seed})'
                + ('   + second order' if self.second_order else '')]
        return '\n'.join(head + lines + tail)

    def __repr__(self):
        return '\n' + self.code()

    def ph_shape(self, i):
        if not self.none_mask:
            return self.shapes[i]
        return tuple(None if m else d for d, m in zip(self.shapes[i], self.none_mask[i]))

    # -- the loss and the second-order loss, in any namespace
    def loss_of(self, ns, vals):
        total = None
        for k in self.loss:
            term = ns.sum(ns.mul(vals[k], ns.const(self.R[k])))
            total = term if total is None else total + term
        return total

    def loss2_of(self, ns, grads):
        total = None
        for g, u in zip(grads, self.U):
            term = ns.sum(ns.mul(g, ns.const(u)))
            total = term if total is None else total + term
        return total


def run_program(prog, ns, inputs):
    """THE interpreter: every instruction of ``prog`` through namespace ``ns``; all values."""
    vals = list(inputs)
    for ins in prog.instrs:
        out = getattr(ns, ins.op)(*[vals[i] for i in ins.args], **ins.params)
        if isinstance(out, (tuple, list)):
            vals.extend(out)
        else:
            vals.append(out)
    return vals


# =====================================================================================
# Op namespaces: the semantics of every instruction, once; libraries differ below
# =====================================================================================
class Ops:
    """Instruction semantics shared by every library (operators work on all of them)."""

    def add(self, a, b): return a + b
    def sub(self, a, b): return a - b
    def mul(self, a, b): return a * b
    def div(self, a, b): return a / b
    def neg(self, a): return -a
    def matmul(self, a, b): return a @ b

    def scalar(self, a, fn, c):
        if fn == 'add':
            return a + c
        if fn == 'mul':
            return a * c
        if fn == 'rsub':
            return c - a
        if fn == 'rdiv':
            return c / a
        return a ** c

    def where(self, c1, c2, a, b, cmp):
        return self.where_(CMP[cmp](c1, c2), a, b)

    def getitem(self, a, idx):
        return a[to_index(idx)]

    def _branches(self, a, b, t, f, pair):
        T, F = BRANCHES[t][0], BRANCHES[f][0]
        if pair:
            return (lambda: (T(self, a, b), T(self, b, a))), (lambda: (F(self, a, b), F(self, b, a)))
        return (lambda: T(self, a, b)), (lambda: F(self, a, b))

    def cond(self, p, a, b, t, f, pair):
        tf, ff = self._branches(a, b, t, f, pair)
        return self.cond_(self.sum(p) > 0.0, tf, ff)

    def pyif(self, p, a, b, t, f, pair):
        tf, ff = self._branches(a, b, t, f, pair)
        return self.pyif_(self.sum(p) > 0.0, tf, ff)

    def while_(self, v, w, n, bound, body):
        B = BODIES[body][0]
        res = self.while_loop_(lambda i, x: self.where_(self.sum(x) < bound, i, n) < n,
                               lambda i, x: (i + 1, B(self, x, w)), [self.counter(v), v])
        return tuple(res)


setattr(Ops, 'while', Ops.while_)


class MgOps(Ops):
    """minigrad: the same calls build graph nodes on Symbols and record the tape on Tensors.

    ``python_if``: the 'pyif' instruction is a Python ``if`` on the value (the tape, and the
    functions handed to mg.trace / mg.jit); otherwise it is mg.cond (hand-built graphs)."""

    def __init__(self, python_if):
        self.python_if = python_if

    exp, log, sin, cos, tanh = (staticmethod(f) for f in (mg.exp, mg.log, mg.sin, mg.cos, mg.tanh))
    sigmoid, relu, abs = staticmethod(mg.sigmoid), staticmethod(mg.relu), staticmethod(mg.abs)
    maximum, minimum = staticmethod(mg.maximum), staticmethod(mg.minimum)
    where_ = staticmethod(mg.where)

    def sum(self, a, axis=None, keepdims=False): return mg.sum(a, axis=axis, keepdims=keepdims)
    def mean(self, a, axis=None, keepdims=False): return mg.mean(a, axis=axis, keepdims=keepdims)
    def matmul(self, a, b):          # the function on the tape and in traces, else the operator
        return mg.matmul(a, b) if self.python_if else a @ b

    def max(self, a, axis=None, keepdims=False):          # the method on the tape and in traces, else the function
        return a.max(axis=axis, keepdims=keepdims) if self.python_if else mg.max(a, axis=axis, keepdims=keepdims)
    def logsumexp(self, a, axis=None, keepdims=False): return mg.logsumexp(a, axis=axis, keepdims=keepdims)
    def softmax(self, a, axis): return mg.softmax(a, axis=axis)
    def reshape(self, a, shape): return mg.reshape(a, shape)
    def transpose(self, a, axes): return mg.transpose(a, axes)
    def broadcast_to(self, a, shape): return mg.broadcast_to(a, shape)
    def concat(self, *xs, axis): return mg.concatenate(list(xs), axis=axis)
    def stack(self, *xs, axis): return mg.stack(list(xs), axis=axis)
    def const(self, arr): return arr

    def cond_(self, p, t, f):
        return mg.cond(p, t, f)

    def pyif_(self, p, t, f):
        if self.python_if:
            return t() if bool(p) else f()
        return mg.cond(p, t, f)

    def while_loop_(self, c, b, vs):
        return mg.while_loop(c, b, vs)

    def counter(self, like):
        return mg.constant(np.int64(0)) if isinstance(like, mg.Symbol) else mg.tensor(np.int64(0))


MG = MgOps(python_if=False)         # graph building by hand (Session, compile, interpreter)
MG_PY = MgOps(python_if=True)       # the tape, and the functions given to trace / jit


def _dims(x, axis):
    return tuple(range(x.ndim)) if axis is None else axis


def _f64(x):
    return x.double() if not (x.is_floating_point() or x.dtype == torch.bool) else x


class TorchOps(Ops):
    """The PyTorch reference (float64). Indexing goes through a numpy-computed gather, so it
    has numpy's semantics (negative steps, None, integer arrays) with torch's gradient."""

    def __getattr__(self, name):          # relu, abs, maximum, minimum
        return getattr(torch, name)

    # torch computes float results of integer tensors in float32 (its default dtype), numpy in
    # float64: integer operands of float-valued ops are made float64 first (see the exclusions)
    def exp(self, a): return torch.exp(_f64(a))
    def log(self, a): return torch.log(_f64(a))
    def sin(self, a): return torch.sin(_f64(a))
    def cos(self, a): return torch.cos(_f64(a))
    def tanh(self, a): return torch.tanh(_f64(a))
    def sigmoid(self, a): return torch.sigmoid(_f64(a))
    def div(self, a, b): return _f64(a) / _f64(b)

    def scalar(self, a, fn, c):
        return super().scalar(_f64(a) if isinstance(c, float) else a, fn, c)

    def matmul(self, a, b):  # torch's matmul does not promote dtypes
        dt = torch.promote_types(a.dtype, b.dtype)
        return a.to(dt) @ b.to(dt)

    def sum(self, a, axis=None, keepdims=False): return torch.sum(a, dim=_dims(a, axis), keepdim=keepdims)
    def mean(self, a, axis=None, keepdims=False): return torch.mean(_f64(a), dim=_dims(a, axis), keepdim=keepdims)
    def max(self, a, axis=None, keepdims=False): return torch.amax(a, dim=_dims(a, axis), keepdim=keepdims)

    def logsumexp(self, a, axis=None, keepdims=False):
        return torch.logsumexp(_f64(a), dim=_dims(a, axis), keepdim=keepdims)

    def softmax(self, a, axis): return torch.softmax(_f64(a), dim=axis)
    def reshape(self, a, shape): return a.reshape(shape)
    def transpose(self, a, axes): return a.permute(tuple(axes if axes is not None else reversed(range(a.ndim))))
    def broadcast_to(self, a, shape): return a.broadcast_to(shape)
    def concat(self, *xs, axis): return torch.cat(xs, dim=axis)
    def stack(self, *xs, axis): return torch.stack(xs, dim=axis)
    def where_(self, c, a, b): return torch.where(c, a, b)
    def const(self, arr): return torch.from_numpy(np.array(arr))

    def getitem(self, a, idx):
        flat = np.arange(a.numel(), dtype=np.int64).reshape(tuple(a.shape))[to_index(idx)]
        return a.reshape(-1)[torch.from_numpy(np.array(flat))]

    def cond_(self, p, t, f):
        return t() if bool(p) else f()

    pyif_ = cond_

    def while_loop_(self, c, b, vs):
        while bool(c(*vs)):
            vs = list(b(*vs))
        return vs

    def counter(self, like):
        return torch.tensor(0)


TORCH = TorchOps()


class NumpyOps(Ops):
    """Plain numpy on dummy arrays: the generator uses it for result shapes and validity."""
    exp, log, sin, cos, tanh = np.exp, np.log, np.sin, np.cos, np.tanh
    maximum, minimum, abs = np.maximum, np.minimum, np.abs

    @staticmethod
    def sigmoid(a): return 1 / (1 + np.exp(-a))
    @staticmethod
    def relu(a): return np.maximum(a, 0)
    @staticmethod
    def where_(c, a, b): return np.where(c, a, b)
    def sum(self, a, axis=None, keepdims=False): return np.sum(a, axis=axis, keepdims=keepdims)
    def mean(self, a, axis=None, keepdims=False): return np.mean(a, axis=axis, keepdims=keepdims)
    def max(self, a, axis=None, keepdims=False): return np.max(a, axis=axis, keepdims=keepdims)
    def logsumexp(self, a, axis=None, keepdims=False): return np.sum(a, axis=axis, keepdims=keepdims) * 1.0

    def softmax(self, a, axis):
        np.sum(a, axis=axis)            # validates the axis
        return a * 1.0

    def reshape(self, a, shape): return np.reshape(a, shape)
    def transpose(self, a, axes): return np.transpose(a, axes)
    def broadcast_to(self, a, shape): return np.broadcast_to(a, shape)
    def concat(self, *xs, axis): return np.concatenate(xs, axis=axis)
    def stack(self, *xs, axis): return np.stack(xs, axis=axis)
    def const(self, arr): return arr
    def cond_(self, p, t, f): return t() if bool(p) else f()
    pyif_ = cond_

    def while_loop_(self, c, b, vs):
        while bool(c(*vs)):
            vs = list(b(*vs))
        return vs

    def counter(self, like): return np.array(0, dtype=np.int64)


NP = NumpyOps()


# =====================================================================================
# The generator
# =====================================================================================
FULL = [(4,), (), (3, 4), (3, 1), (1, 4), (2, 3, 4)]
EMPTY = [(0,), (0, 4), (3, 0)]
SHAPES = {'never': FULL, 'some': FULL * 3 + EMPTY, 'always': FULL * 3 + EMPTY}   # 'some': 1 in 7 empty
NICE = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -1.5, 3.0]       # incl. integer values
SPECIAL = [inf, -inf, nan]
ALL_OPS = list(BINARY) + ['scalar'] * 2 + ['unary'] * 3 + ['where', 'reduce', 'reduce', 'softmax', 'matmul',
                                                          'reshape', 'transpose', 'broadcast_to', 'getitem',
                                                          'getitem', 'concat', 'stack']


def _np_apply(ins, dummies):
    with np.errstate(all='ignore'), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        out = getattr(NP, ins.op)(*[dummies[i] for i in ins.args], **ins.params)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [np.asarray(o) for o in outs]


def _valid(ins, dummies):
    try:
        return _np_apply(ins, dummies)
    except (ValueError, IndexError, TypeError):
        return None


def _draw_index(draw, shape):
    items, used_array = [], False
    for d in shape[:draw(st.integers(0, len(shape)))]:
        if draw(st.integers(0, 4)) == 0:
            items.append(('n',))
        kinds = ['s'] + (['i'] if d else []) + (['a'] if d and not used_array else [])
        kind = draw(st.sampled_from(kinds))
        if kind == 'i':
            items.append(('i', draw(st.integers(-d, d - 1))))
        elif kind == 's':
            items.append(('s', draw(st.sampled_from([None, 0, 1, -1, d])),
                          draw(st.sampled_from([None, -1, 2, d + 1])), draw(st.sampled_from([None, 2, -1]))))
        else:
            used_array = True
            items.append(('a', tuple(draw(st.lists(st.integers(-d, d - 1), max_size=3)))))
    if draw(st.integers(0, 3)) == 0:
        items.append(('n',))
    return tuple(items)


def _reshape_targets(shape):
    n = int(np.prod(shape, dtype=np.int64))
    out = [(-1,), tuple(reversed(shape)), (1,) + tuple(shape), tuple(shape) + (1,), (n,)]
    if len(shape) >= 2:
        out.append((shape[0] * shape[1],) + tuple(shape[2:]))
    return out


def _draw_instr(draw, kind, dummies):
    n = len(dummies)
    idx = st.integers(0, n - 1)
    floats = [i for i, d in enumerate(dummies) if d.dtype.kind == 'f']

    def partner(i, ok):
        cands = [j for j in range(n) if ok(dummies[i], dummies[j])]
        return draw(st.sampled_from(cands)) if cands else None

    def bcast(a, b):
        try:
            np.broadcast_shapes(a.shape, b.shape)
            return True
        except ValueError:
            return False

    if kind == 'scalar_smooth':
        fn, c = draw(st.sampled_from(SMOOTH_SCALAR))
        return Instr('scalar', [draw(idx)], fn=fn, c=c)
    if kind == 'unary_smooth':
        return Instr(draw(st.sampled_from(SMOOTH_UNARY)), [draw(idx)])
    if kind == 'reduce_smooth':
        i = draw(idx)
        nd = dummies[i].ndim
        return Instr(draw(st.sampled_from(['sum', 'mean', 'logsumexp'])), [i],
                     axis=draw(st.sampled_from([None] + list(range(-nd, nd)))), keepdims=draw(st.booleans()))
    if kind in BINARY:
        i = draw(idx)
        return Instr(kind, [i, partner(i, bcast)])
    if kind == 'scalar':
        fn, c = draw(st.sampled_from(SCALAR))
        return Instr('scalar', [draw(idx)], fn=fn, c=c)
    if kind == 'unary':
        return Instr(draw(st.sampled_from(UNARY)), [draw(idx)])
    if kind == 'where':
        i = draw(idx)
        j = partner(i, bcast)
        full = np.broadcast_shapes(dummies[i].shape, dummies[j].shape)
        k = partner(i, lambda a, b: bcast(np.empty(full), b))
        full = np.broadcast_shapes(full, dummies[k].shape)
        m = partner(i, lambda a, b: bcast(np.empty(full), b))
        return Instr('where', [i, j, k, m], cmp=draw(st.sampled_from(sorted(CMP))))
    if kind == 'reduce':
        i = draw(idx)
        nd = dummies[i].ndim
        axes = [None] + list(range(-nd, nd)) + ([(0, nd - 1)] if nd >= 2 else [])
        return Instr(draw(st.sampled_from(REDUCE)), [i], axis=draw(st.sampled_from(axes)),
                     keepdims=draw(st.booleans()))
    if kind == 'softmax':
        i = draw(idx)
        nd = dummies[i].ndim
        return Instr('softmax', [i], axis=draw(st.integers(-nd, nd - 1))) if nd else None
    if kind == 'matmul':
        i = draw(idx)
        j = partner(i, lambda a, b: a.ndim and b.ndim and _valid(Instr('matmul', [0, 1]), [a, b]) is not None)
        if j is not None:
            return Instr('matmul', [i, j])
        nd = dummies[i].ndim
        if nd < 2:
            return None
        # no partner: a @ swapaxes(b, -1, -2) for some b shaped like a
        j = partner(i, lambda a, b: a.shape == b.shape)
        return [Instr('transpose', [j], axes=tuple(range(nd - 2)) + (nd - 1, nd - 2)), Instr('matmul', [i, n])]
    if kind == 'reshape':
        i = draw(idx)
        return Instr('reshape', [i], shape=draw(st.sampled_from(_reshape_targets(dummies[i].shape))))
    if kind == 'transpose':
        i = draw(idx)
        return Instr('transpose', [i], axes=tuple(draw(st.permutations(range(dummies[i].ndim)))))
    if kind == 'broadcast_to':
        i = draw(idx)
        s = dummies[i].shape
        targets = [(2,) + s, tuple(2 if d == 1 else d for d in s)]
        return Instr('broadcast_to', [i], shape=draw(st.sampled_from(targets)))
    if kind == 'getitem':
        i = draw(idx)
        return Instr('getitem', [i], idx=_draw_index(draw, dummies[i].shape))
    if kind in ('concat', 'stack'):
        i = draw(idx)
        nd = dummies[i].ndim
        if not nd:
            return None
        ax = draw(st.integers(0, nd - 1 if kind == 'concat' else nd))
        def same(a, b):
            if kind == 'stack':
                return a.shape == b.shape
            return b.ndim == nd and all(x == y for k, (x, y) in enumerate(zip(a.shape, b.shape)) if k != ax)
        rest = [partner(i, same) for _ in range(draw(st.integers(1, 2)))]
        return Instr(kind, [i] + rest, axis=ax)
    if kind in ('cond', 'pyif'):
        if not floats:
            return None
        p = draw(idx)
        a = draw(st.sampled_from(floats))
        b = partner(a, lambda x, y: x.shape == y.shape and x.dtype == y.dtype)
        return Instr(kind, [p, a, b], t=draw(st.sampled_from(sorted(BRANCHES))),
                     f=draw(st.sampled_from(sorted(BRANCHES))), pair=draw(st.booleans()))
    if kind == 'while':
        if not floats:
            return None
        v = draw(st.sampled_from(floats))
        w = partner(v, lambda x, y: y.dtype == x.dtype and bcast(x, y)
                    and np.broadcast_shapes(x.shape, y.shape) == x.shape)
        return Instr('while', [v, w], n=draw(st.integers(0, 3)), bound=draw(st.sampled_from([2.0, 0.0, inf])),
                     body=draw(st.sampled_from(sorted(BODIES))))
    raise AssertionError(kind)


@st.composite
def programs(draw, dtypes=(np.float64,), control=(), max_steps=7, second_order=True, none_dims=True,
             empty='never', ops=None):
    """A random Program. ``empty``: whether inputs may be empty arrays: 'never', 'some' or
    'always' (at least one is). ``ops``: the instruction kinds to draw from (default ALL_OPS)."""
    n_in = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from(SHAPES[empty])) for _ in range(n_in)]
    if empty == 'always' and not any(0 in s for s in shapes):
        shapes[draw(st.integers(0, n_in - 1))] = draw(st.sampled_from(EMPTY))
    dts = [np.dtype(draw(st.sampled_from(dtypes))) for _ in range(n_in)]
    dummies = [np.ones(s, d) for s, d in zip(shapes, dts)]
    instrs, n_outs = [], []
    kinds = list(ALL_OPS if ops is None else ops) + [c for c in control for _ in range(3)]

    def emit(new):
        new = [] if new is None else new if isinstance(new, list) else [new]
        trial, outs_n = list(dummies), []
        for ins in new:
            outs = _valid(ins, trial) if None not in ins.args else None
            if outs is None:
                return False
            trial.extend(outs)
            outs_n.append(len(outs))
        instrs.extend(new)
        n_outs.extend(outs_n)
        dummies[:] = trial
        return bool(new)

    for _ in range(draw(st.integers(1, max_steps))):
        emit(_draw_instr(draw, draw(st.sampled_from(kinds)), dummies))
    if control and not any(i.op in control for i in instrs):    # make sure there is some control flow
        for c in control:
            if emit(_draw_instr(draw, c, dummies)):
                break
    # a CSE pair and an alias of one value
    k = draw(st.integers(0, len(dummies) - 1))
    for fn, c in (('mul', 2.0), ('mul', 2.0), ('add', 0.0)):
        ins = Instr('scalar', [k], fn=fn, c=c)
        instrs.append(ins)
        n_outs.append(1)
        dummies.extend(_np_apply(ins, dummies))
    dups = draw(st.lists(st.integers(0, len(dummies) - 1), max_size=2))
    floats = [i for i, d in enumerate(dummies) if d.dtype.kind == 'f']
    loss = sorted(draw(st.sets(st.sampled_from(floats), min_size=1, max_size=4))) if floats else []
    has_while = any(i.op == 'while' for i in instrs)
    second = second_order and not has_while and draw(st.integers(0, 2)) == 0
    none_mask = None
    if none_dims and draw(st.integers(0, 2)) == 0:
        none_mask = [tuple(draw(st.booleans()) for _ in s) for s in shapes]
    return Program(shapes, dts, instrs, n_outs, [d.shape for d in dummies], [d.dtype for d in dummies],
                   dups, loss, draw(st.integers(0, 2 ** 16)), second, none_mask)


def _elements(dtype, special):
    dtype = np.dtype(dtype)
    if dtype.kind == 'i':
        return st.integers(-3, 3)
    width = 32 if dtype == np.float32 else 64
    # magnitudes >= 1/8 (or exactly 0): tiny values make gradients like d(x/x)/dx = 1/x - x/x**2
    # cancel at 1e98 and differ by rounding only
    mags = st.floats(0.125, 3, width=width)
    return st.one_of(st.sampled_from(NICE), st.integers(-24, 24).map(lambda k: k / 8),
                     st.tuples(st.booleans(), mags).map(lambda t: -t[1] if t[0] else t[1]),
                     *([st.sampled_from(SPECIAL)] if special else []))


@st.composite
def program_and_inputs(draw, special=None, **kw):
    """(program, example inputs, new inputs of the same shapes and dtypes). ``special``: inputs
    hold inf/nan too (None: in 2 of 3 programs)."""
    prog = draw(programs(**kw))
    if special is None:
        special = draw(st.sampled_from([False, True, True]))
    sets = []
    for _ in range(2):
        sets.append([draw(hnp.arrays(d, s, elements=_elements(d, special)))
                     for s, d in zip(prog.shapes, prog.dtypes)])
    return prog, sets[0], sets[1]


# =====================================================================================
# Comparing results
# =====================================================================================
_MISMATCH_TYPES: dict = {}


def mismatch(mode, what):
    """A distinct AssertionError subclass per (mode, quantity): Hypothesis reports each
    kind of disagreement separately instead of shrinking them all into one."""
    key = (mode, what)
    if key not in _MISMATCH_TYPES:
        name = ''.join(w[:1].upper() + w[1:] for w in re.split(r'\W+', f'{mode} {what}') if w) + 'Mismatch'
        _MISMATCH_TYPES[key] = type(name, (AssertionError,), {})
    return _MISMATCH_TYPES[key]


TOL = {'float32': (2e-5, 1e-5), 'float64': (1e-10, 1e-12)}
TORCH_TOL = (1e-7, 1e-9)


def _np(v):
    if torch is not None and isinstance(v, torch.Tensor):
        return v.detach().numpy(force=True)    # force: torch may hand back a lazy ZeroTensor
    if isinstance(v, mg.Tensor):
        return v.data
    return np.asarray(v)


def compare(mode, what, got, want, prog, arrays, *, tol=None, signs=True, dtypes=True, kind=None):
    """got == want: shape, dtype, NaN/inf positions, values (allclose), and the sign of zeros."""
    got, want = np.asarray(got), np.asarray(want)
    why = None
    if got.shape != want.shape:
        why = f'shape {got.shape} != {want.shape}'
    elif dtypes and got.dtype != want.dtype:
        why = f'dtype {got.dtype} != {want.dtype}'
    elif want.dtype.kind not in 'fc' or got.dtype.kind not in 'fc':
        if not np.array_equal(got, want):
            why = 'values differ'
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        rtol, atol = tol or TOL.get(want.dtype.name, TOL['float32'])
        with np.errstate(all='ignore'):
            bad = (np.isnan(g) != np.isnan(w)) | ((np.isinf(g) | np.isinf(w)) & (g != w))
            fin = np.isfinite(g) & np.isfinite(w)
            bad |= fin & ~np.isclose(g, w, rtol=rtol, atol=atol)
            if signs:
                bad |= (g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w))
        if bad.any():
            k = tuple(np.argwhere(bad)[0])
            why = (f'{int(bad.sum())} of {bad.size} entries differ, first at {k}: got {got[k]!r}, want '
                   f'{want[k]!r}')
    if why:
        raise mismatch(mode, kind or what)(
            f'{mode} != reference for {what}: {why}\n  got:  {_short(got)}\n  want: {_short(want)}\n'
            f'program:\n{prog.code(arrays)}')


def _short(a):
    return np.array2string(np.asarray(a), threshold=20, precision=6).replace('\n', ' ')


def compare_all(mode, got, want, prog, arrays, **kw):
    """Compare dicts {'values': [...], 'grads': [...], 'grads2': [...]} key by key."""
    for key in ('values', 'grads', 'grads2'):
        if key not in got or key not in want:
            continue
        assert len(got[key]) == len(want[key]), f'{mode}: {len(got[key])} {key} for {len(want[key])}'
        for n, (g, w) in enumerate(zip(got[key], want[key])):
            compare(mode, f'{key}[{n}]', g, w, prog, arrays, kind=key,
                **dict(kw, signs=kw.get('signs', True) and key == 'values'))   # see the exclusions


# =====================================================================================
# The modes
# =====================================================================================
def fetch_list(prog, vals):
    return list(vals) + [vals[k] for k in prog.dups]


def run_tape(prog, arrays, grads=True):
    xs = [mg.tensor(a, requires_grad=grads and a.dtype.kind == 'f') for a in arrays]
    vals = run_program(prog, MG_PY, xs)
    res = {'values': [np.array(_np(v)) for v in fetch_list(prog, vals)]}
    fxs = [xs[i] for i in prog.float_inputs]
    if not (grads and prog.loss and fxs):
        return res
    loss = prog.loss_of(MG, vals)
    if loss.requires_grad:
        loss.backward(create_graph=prog.second_order)
    g1 = [x.grad for x in fxs]
    res['grads'] = [np.zeros(x.shape, x.dtype) if g is None else np.array(g.data) for x, g in zip(fxs, g1)]
    if prog.second_order:
        for x in fxs:
            x.grad = None
        gt = [g if g is not None else mg.zeros(x.shape, dtype=x.dtype) for x, g in zip(fxs, g1)]
        loss2 = prog.loss2_of(MG, gt)
        if loss2.requires_grad:
            loss2.backward()
        res['grads2'] = [np.zeros(x.shape, x.dtype) if x.grad is None else np.array(x.grad.data) for x in fxs]
    return res


def _torch_grads(y, xs, create_graph=False):
    if not y.requires_grad:
        return [torch.zeros_like(x) for x in xs]
    gs = torch.autograd.grad(y, xs, create_graph=create_graph, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for x, g in zip(xs, gs)]


def run_torch(prog, arrays):
    xs = [torch.tensor(a, requires_grad=True) for a in arrays]
    vals = run_program(prog, TORCH, xs)
    res = {'values': [np.array(_np(v)) for v in fetch_list(prog, vals)]}
    if not prog.loss:
        return res
    g1 = _torch_grads(prog.loss_of(TORCH, vals), xs, create_graph=prog.second_order)
    res['grads'] = [np.array(_np(g)) for g in g1]
    if prog.second_order:
        res['grads2'] = [np.array(_np(g)) for g in _torch_grads(prog.loss2_of(TORCH, g1), xs)]
    return res


class Built:
    """A program built as a static graph: fetches = values (+ dups), grads, dup grad, grads2."""

    def __init__(self, prog, none_dims=False):
        self.graph = g = mg.Graph()
        with g.as_default():
            shapes = [None if none_dims == 'rank' else prog.ph_shape(i) if none_dims else prog.shapes[i]
                      for i in range(len(prog.shapes))]
            self.phs = [mg.placeholder(d, s, name=f'x{i}') for i, (s, d) in enumerate(zip(shapes, prog.dtypes))]
            vals = run_program(prog, MG, self.phs)
            self.values = fetch_list(prog, vals)
            self.grads, self.dup_grad, self.grads2 = [], [], []
            fphs = [self.phs[i] for i in prog.float_inputs]
            if prog.loss and fphs and none_dims != 'rank':     # unknown ranks: values only
                loss = prog.loss_of(MG, vals)
                gs = mg.gradients(loss, fphs + fphs[:1])          # the same x twice
                self.grads, self.dup_grad = gs[:-1], gs[-1:]
                if prog.second_order:
                    self.grads2 = mg.gradients(prog.loss2_of(MG, self.grads), fphs)
        self.fetches = self.values + self.grads + self.dup_grad + self.grads2

    def split(self, flat):
        flat = [np.asarray(v) for v in flat]
        nv, ng = len(self.values), len(self.grads)
        res = {'values': flat[:nv]}
        if self.grads:
            res['grads'] = flat[nv:nv + ng]
            res['dup_grad'] = flat[nv + ng:nv + ng + 1]
        if self.grads2:
            res['grads2'] = flat[nv + ng + 1:]
        return res

    def feeds(self, arrays):
        return {p: a for p, a in zip(self.phs, arrays)}


def check_dup_grad(mode, res, prog, arrays):
    if res.get('dup_grad'):
        compare(mode, 'gradients(y, [a, a]) duplicate', res['dup_grad'][0], res['grads'][0], prog, arrays,
                tol=(0, 0))


def check_static(mode, syms, vals, prog, arrays):
    """Each Symbol's static shape/dtype (the shape rules) matches the value computed for it."""
    for n, (s, v) in enumerate(zip(syms, vals)):
        v = np.asarray(v)
        ok_shape = s.shape is None or (len(s.shape) == v.ndim and
                                       all(d is None or d == e for d, e in zip(s.shape, v.shape)))
        if not ok_shape or np.dtype(s.dtype) != v.dtype:
            raise mismatch(mode, 'static shape')(
                f'{mode}: fetch {n} ({s.name}) is declared {s.dtype} {s.shape} but its value is {v.dtype} '
                f'{v.shape}\nprogram:\n{prog.code(arrays)}')


def _as_list(out):
    return [out] if isinstance(out, np.ndarray) else list(out)


def _copies(vals):
    return [np.array(v, copy=True) for v in vals]


def check_graph_modes(prog, arrays, new, ref, ref_new, backend):
    """Reference interpreter, Session and mg.compile (twice) against the tape."""
    b = Built(prog)
    feeds = {id(p): a for p, a in zip(b.phs, arrays)}
    res = b.split(interpreter.evaluate(b.graph, b.fetches, feeds, {}))
    check_static('interpreter', b.fetches, res['values'] + res.get('grads', []) + res.get('dup_grad', [])
                 + res.get('grads2', []), prog, arrays)
    compare_all('interpreter', res, ref, prog, arrays)
    check_dup_grad('interpreter', res, prog, arrays)

    res = b.split(mg.Session(b.graph).run(b.fetches, b.feeds(arrays)))
    compare_all('Session', res, ref, prog, arrays)
    check_dup_grad('Session', res, prog, arrays)

    program = mg.compile(b.fetches, b.phs, **compile_kwargs(backend))
    first = _as_list(program(*arrays))
    kept = _copies(first)
    res = b.split(first)
    compare_all('compile', res, ref, prog, arrays)
    check_dup_grad('compile', res, prog, arrays)
    second = _as_list(program(*new))
    compare_all('compile (second call, new inputs)', b.split(second), ref_new, prog, new)
    for n, (a, k) in enumerate(zip(first, kept)):     # the first call's arrays belong to the caller
        compare('compile', f'first result {n} after a second call', a, k, prog, arrays, tol=(0, 0))
    third = _as_list(program(*arrays))
    compare_all('compile (third call)', b.split(third), ref, prog, arrays)


def check_none_dims(prog, arrays, ref):
    """Placeholders with unknown (None) dims: the same values; static shapes stay compatible."""
    try:
        b = Built(prog, none_dims=True)
    except mg.ShapeError as e:
        if 'known' in str(e):        # documented: some gradients need known sizes (concatenate, 1-D matmul)
            return
        raise
    flat = mg.Session(b.graph).run(b.fetches, b.feeds(arrays))
    check_static('Session (None dims)', b.fetches, flat, prog, arrays)
    res = b.split(flat)
    compare_all('Session (None dims)', res, ref, prog, arrays)
    feeds = {id(p): a for p, a in zip(b.phs, arrays)}
    res = b.split(interpreter.evaluate(b.graph, b.fetches, feeds, {}))
    compare_all('interpreter (None dims)', res, ref, prog, arrays)


def traced_fn(prog, grads=True):
    """The program as a Python function for mg.trace / mg.jit: values (+ dups), and on Symbols
    also the gradients by mg.gradients (so one traced graph holds both)."""
    def fn(*xs):
        vals = run_program(prog, MG_PY, xs)
        out = fetch_list(prog, vals)
        fxs = [xs[i] for i in prog.float_inputs]
        if grads and prog.loss and fxs and isinstance(xs[0], mg.Symbol):
            g1 = mg.gradients(prog.loss_of(MG, vals), fxs)
            out += g1
            if prog.second_order:
                out += mg.gradients(prog.loss2_of(MG, g1), fxs)
        return out
    return fn


def _split_flat(prog, flat, ref):
    nv = len(ref['values'])
    ng = len(ref.get('grads', []))
    res = {'values': [np.asarray(v) for v in flat[:nv]]}
    if ng:
        res['grads'] = [np.asarray(v) for v in flat[nv:nv + ng]]
    if 'grads2' in ref:
        res['grads2'] = [np.asarray(v) for v in flat[nv + ng:]]
    return res


def check_trace_modes(prog, arrays, new, ref, ref_new):
    """mg.trace (symbolic and recorded) and mg.jit against the tape."""
    fn = traced_fn(prog)
    if prog.python_if:
        with pytest.raises(mg.TraceError):
            mg.trace(fn, *arrays, symbolic=True)
    else:
        tr = mg.trace(fn, *arrays, symbolic=True)
        compare_all('trace(symbolic=True)', _split_flat(prog, tr(*arrays), ref), ref, prog, arrays)
        compare_all('trace(symbolic=True) at new inputs', _split_flat(prog, tr(*new), ref_new), ref_new, prog,
                    new)

    # recorded: values from the recorded graph, gradients by mg.gradients on it
    rec = mg.trace(traced_fn(prog, grads=False), *arrays, symbolic=False)
    with rec.graph.as_default():
        outs = rec.outputs[:prog.n_values]
        fins = [rec.inputs[i] for i in prog.float_inputs]
        extra = []
        if prog.loss and fins and 'grads' in ref:
            g1 = mg.gradients(prog.loss_of(MG, outs), fins)
            extra = list(g1)
            if prog.second_order:
                extra += mg.gradients(prog.loss2_of(MG, g1), fins)
    points = [(arrays, ref, '')] + ([] if prog.control else [(new, ref_new, ' at new inputs')])
    for xs, want, where in points:
        vals = rec(*xs)
        flat = list(vals) + (mg.Session(rec.graph).run(extra, rec.feeds(xs)) if extra else [])
        compare_all(f'trace(symbolic=False){where}', _split_flat(prog, flat, want), want, prog, xs)

    jf = mg.jit(fn)
    if prog.python_if and not JIT_GRAPH_BREAKS:     # today jit refuses a Python if on a value, clearly
        with pytest.raises(mg.TraceError, match='asked for the value of a traced Symbol'):
            jf(*arrays)
        return
    for xs, want, where in [(arrays, ref, ''), (new, ref_new, ' at new inputs'), (arrays, ref, ' again')]:
        compare_all(f'jit{where}', _split_flat(prog, jf(*xs), want), want, prog, xs)
    if not prog.python_if and jf.trace_count != 1:      # same shapes and dtypes: one trace
        raise mismatch('jit', 'trace_count')(f'jit traced {jf.trace_count} times for one input signature\n'
                                             f'program:\n{prog.code(arrays)}')


def _torch_grad_exclusions(prog, vals):
    """Programs where PyTorch's gradient legitimately differs (``vals``: the tape's values):
    a maximum/minimum or max reduction sees a NaN operand, or x ** 0.5 sees -0.0 or -inf.
    Values are still compared."""
    for ins in prog.instrs:
        if ins.op == 'scalar' and ins.params == {'fn': 'pow', 'c': 0.5}:
            x = np.asarray(vals[ins.args[0]])
            if ((x == 0) & np.signbit(x)).any() or (x == -inf).any():
                return True
        if ins.op in ('maximum', 'minimum', 'max') or (ins.op == 'while' and ins.params['body'] == 'max'):
            if any(np.isnan(np.asarray(vals[i], dtype=np.float64)).any() for i in ins.args):
                return True
    return False


def _torch_value_exclusions(prog, vals):
    """relu of a NaN: minigrad's relu maps it to 0 (where(0 < x, x, 0)), torch.relu keeps it."""
    return any(ins.op == 'relu' and np.isnan(np.asarray(vals[ins.args[0]], dtype=np.float64)).any()
               for ins in prog.instrs)


def check_torch(prog, arrays, ref):
    if _torch_value_exclusions(prog, ref['values']):
        return
    want = run_torch(prog, arrays)
    got = dict(ref)
    if _torch_grad_exclusions(prog, ref['values']):
        got = {'values': ref['values']}
    compare_all('tape vs PyTorch', got, want, prog, arrays, tol=TORCH_TOL, signs=False)


def run_tape_with_stand_ins(prog, arrays):
    """The tape keeping a shape-only stand-in for every input its VJP reads only the shape of (the memory
    rule for arrays of 64 KiB or more, here at every size)."""
    saved = TAPE.STAND_IN_BYTES
    TAPE.STAND_IN_BYTES = 0
    try:
        return run_tape(prog, arrays)
    finally:
        TAPE.STAND_IN_BYTES = saved


# THE registry of modes: name -> (whether it applies to a program, its check against the tape's results)
MODES = {
    'tape with stand-ins': (lambda prog, with_torch: True,
                            lambda prog, arrays, new, ref, ref_new, backend: compare_all(
                                'tape with stand-ins', run_tape_with_stand_ins(prog, arrays), ref, prog, arrays)),
    'torch (values, gradients, second order)': (lambda prog, with_torch: with_torch and torch is not None,
                                                lambda prog, arrays, new, ref, ref_new, backend:
                                                check_torch(prog, arrays, ref)),
    'interpreter, Session, compile': (lambda prog, with_torch: True, lambda prog, arrays, new, ref, ref_new, backend:
                                      check_graph_modes(prog, arrays, new, ref, ref_new, backend)),
    'None dims (Session, interpreter)': (lambda prog, with_torch: bool(prog.none_mask),
                                         lambda prog, arrays, new, ref, ref_new, backend:
                                         check_none_dims(prog, arrays, ref)),
    'trace (symbolic, recorded), jit': (lambda prog, with_torch: True, lambda prog, arrays, new, ref, ref_new, backend:
                                        check_trace_modes(prog, arrays, new, ref, ref_new)),
}


def run_net(prog, arrays, new, backend, *, with_torch):
    """The tape at both input sets, then every applicable mode of MODES against it."""
    with np.errstate(all='ignore'):
        ref = run_tape(prog, arrays)
        ref_new = run_tape(prog, new)
        for applies, check in MODES.values():
            if applies(prog, with_torch):
                check(prog, arrays, new, ref, ref_new, backend)


def _sig(graph):
    """The structure of a graph without its (cosmetic) names."""
    ids, out = {}, []
    for n in graph.nodes:
        params = {k: _sig(v) if isinstance(v, mg.Graph) else repr(v) for k, v in n.params.items()}
        out.append((n.op, [ids[id(i)] for i in n.inputs], params, [(o.shape, str(o.dtype)) for o in n.outputs]))
        ids.update({id(o): len(ids) for o in n.outputs})
    return out, [ids[id(o)] for o in graph.outputs]


def _evaluate(graph, arrays):
    """The reference interpreter on a function graph (inputs/outputs)."""
    return interpreter.evaluate(graph, graph.outputs, {id(s): a for s, a in zip(graph.inputs, arrays)})


def check_passes(prog, arrays, new, ref, ref_new, backend):
    """Every compiler pass keeps the meaning: the graph after each pass of the pipeline and after each pass
    alone, run by the reference interpreter, == the tape; and the pipeline is idempotent."""
    b = Built(prog)
    program = mg.compile(b.fetches, b.phs, backend='numpy')      # the passes run before a backend's code
    assert [n for n, _ in program.history] == ['input'] + DEFAULT_PASSES
    g0 = program.history[0][1]
    for name, snap in list(program.history) + [(f'{n} alone', PASSES[n](g0).verify()) for n in DEFAULT_PASSES]:
        compare_all(f'after pass {name}', b.split(_evaluate(snap, arrays)), ref, prog, arrays)
    again = program.graph
    for name in DEFAULT_PASSES:
        again = PASSES[name](again)
    if _sig(again) != _sig(program.graph):
        raise mismatch('pipeline', 'idempotent')(f'the pipeline run again changes the graph\n{prog.code(arrays)}')


def check_unknown_rank(prog, arrays, new, ref, ref_new, backend):
    """Placeholders of unknown rank (shape=None), values: one compiled Program runs the example and the new inputs
    (elementwise programs: reductions, views and gradients need known ranks)."""
    try:
        b = Built(prog, none_dims='rank')
        program = mg.compile(b.fetches, b.phs, **compile_kwargs(backend))
    except mg.ShapeError as e:
        if 'known' in str(e):        # documented: some ops and gradients need known sizes or ranks
            return
        raise
    compare_all('compile (unknown rank)', b.split(_as_list(program(*arrays))), ref, prog, arrays)
    compare_all('compile (unknown rank, new inputs)', b.split(_as_list(program(*new))), ref_new, prog, new)


ELEMENTWISE = {*BINARY, *UNARY, 'scalar', 'where'}
# the compiler's passes on a fifth of the programs (each pass alone and the pipeline again: a dozen graphs each)
MODES['every compiler pass (meaning, alone, idempotent)'] = (lambda prog, with_torch: prog.seed % 5 == 0,
                                                             check_passes)
MODES['compile with unknown ranks'] = (lambda prog, with_torch: all(
                                           ins.op in ELEMENTWISE for ins in prog.instrs),
                                       check_unknown_rank)


def check_jvp(prog, arrays, new, ref, ref_new, backend):
    """Forward mode: mg.jvp of the loss along the tangents U == the tape's gradients . U (where the loss, the inputs and the gradients are finite)."""
    if 'grads' not in ref:
        return
    terms = [np.asarray(g, np.float64) * u for g, u in zip(ref['grads'], prog.U)]
    finite = [*terms, *arrays, *(ref['values'][k] for k in prog.loss)]     # values, gradients, loss
    if not all(np.isfinite(a).all() for a in finite):
        return
    fl = prog.float_inputs

    def f(*xs):
        full = [mg.tensor(a) for a in arrays]
        for i, x in zip(fl, xs):
            full[i] = x
        return prog.loss_of(MG, run_program(prog, MG_PY, full))
    _, t = mg.jvp(f, tuple(mg.tensor(arrays[i]) for i in fl), tuple(mg.tensor(u) for u in prog.U))
    got, want = float(_np(t)), sum(float(t.sum()) for t in terms)
    scale = max(1.0, sum(float(np.abs(t).sum()) for t in terms))
    eps = 1e-5 if any(np.dtype(d) == np.float32 for d in prog.dtypes) else 1e-10
    if not (np.isfinite(got) and abs(got - want) <= eps * scale):
        raise mismatch('jvp', 'tangent')(f'jvp: {got!r}, gradients . tangents: {want!r}\n{prog.code(arrays)}')


MODES['jvp (forward mode) == gradients . tangents'] = (lambda prog, with_torch: bool(prog.loss and prog.float_inputs),
                                                     check_jvp)


# =====================================================================================
# The net
# =====================================================================================
@settings(max_examples=n_programs(150), **NET)
@given(case=program_and_inputs(dtypes=(np.float64,), special=False))
def test_net_float64_all_modes_and_torch(case, backend):
    """float64, finite values (0, -0.0, integers, ...): tape == interpreter == Session == compile
    == trace == jit == PyTorch, values and gradients."""
    prog, arrays, new = case
    run_net(prog, arrays, new, backend, with_torch=True)


@settings(max_examples=n_programs(100), **NET)
@given(case=program_and_inputs(dtypes=(np.float64,), special=True))
def test_net_float64_inf_nan_all_modes_and_torch(case, backend):
    """The same with inf, -inf and nan among the inputs."""
    prog, arrays, new = case
    run_net(prog, arrays, new, backend, with_torch=True)


@settings(max_examples=n_programs(60), **NET)
@given(case=program_and_inputs(dtypes=(np.float64,), empty='always'))
def test_net_empty_arrays_all_modes_and_torch(case, backend):
    """Programs with at least one empty input ((0,), (0, 4), (3, 0))."""
    prog, arrays, new = case
    run_net(prog, arrays, new, backend, with_torch=True)


@settings(max_examples=n_programs(160), **NET)
@given(case=program_and_inputs(dtypes=(np.float32, np.int64)))
def test_net_float32_and_int_modes_agree(case, backend):
    """float32 and int64 inputs (mixed): every minigrad mode agrees with the tape, including
    result dtypes and the sign of zeros."""
    prog, arrays, new = case
    run_net(prog, arrays, new, backend, with_torch=False)


@settings(max_examples=n_programs(120), **NET)
@given(case=program_and_inputs(dtypes=(np.float64,), control=('cond', 'while'), max_steps=5))
def test_net_cond_and_while_loop(case, backend):
    """mg.cond / mg.while_loop in graphs vs Python if / while on the tape (and in PyTorch)."""
    prog, arrays, new = case
    run_net(prog, arrays, new, backend, with_torch=True)


@settings(max_examples=n_programs(40), **NET)
@given(case=program_and_inputs(dtypes=(np.float32,), control=('cond', 'while'), max_steps=4))
def test_net_cond_and_while_loop_float32(case, backend):
    prog, arrays, new = case
    run_net(prog, arrays, new, backend, with_torch=False)


@settings(max_examples=n_programs(50), **NET)
@given(case=program_and_inputs(dtypes=(np.float64,), control=('pyif',), max_steps=4))
def test_net_python_if(case, backend):
    """A data-dependent Python ``if``: symbolic tracing refuses it (TraceError), a recorded trace
    is right at its example inputs, mg.jit is right everywhere (guards / graph break), and hand-built
    graphs with mg.cond agree with the tape."""
    prog, arrays, new = case
    run_net(prog, arrays, new, backend, with_torch=True)


# =====================================================================================
# Smooth programs of the same generator: mg.testing's checks (central differences, assert_modes_agree)
# =====================================================================================
# no kinks (relu, abs, max, where), no poles (log, div, negative powers), no overflow (exp): central
# differences are exact to 1e-5 there; the kinks' gradients are compared with PyTorch above
SMOOTH_UNARY = ['neg', 'sin', 'cos', 'tanh', 'sigmoid']
SMOOTH_SCALAR = [('add', 0.0), ('mul', 2.0), ('mul', 0.0), ('mul', -1.0), ('add', 1.5), ('rsub', 1.0),
                 ('pow', 2.0), ('pow', 3.0), ('pow', 1.0), ('pow', 0.0)]
SMOOTH_OPS = ['add', 'sub', 'mul', 'scalar_smooth', 'scalar_smooth', 'unary_smooth', 'unary_smooth', 'unary_smooth',
              'reduce_smooth', 'softmax', 'matmul', 'reshape', 'transpose', 'broadcast_to', 'getitem', 'concat',
              'stack']
SMOOTH = dict(ops=SMOOTH_OPS, special=False, none_dims=False, second_order=False)


def loss_fn(prog, ns=None):
    """The program's weighted loss as a function of its inputs (Tensors or Symbols)."""
    return lambda *xs: prog.loss_of(MG, run_program(prog, ns or MG, list(xs)))


@settings(max_examples=n_programs(60), **NET)
@given(case=program_and_inputs(dtypes=(np.float64,), **SMOOTH))
def test_net_smooth_gradients_match_central_differences(case):
    """mg.testing.gradcheck: the tape's gradients == central differences, on smooth programs."""
    prog, arrays, _ = case
    assert gradcheck(loss_fn(prog, MG_PY), *arrays, atol=1e-5, rtol=1e-4)


@settings(max_examples=n_programs(15), **NET)
@given(case=program_and_inputs(dtypes=(np.float32,), max_steps=4, **SMOOTH))
def test_net_smooth_modes_agree_by_the_testing_helper(case):
    """mg.testing.assert_modes_agree: eager == Session == compiled Program, values and gradients."""
    prog, arrays, _ = case
    assert_modes_agree(loss_fn(prog), *arrays, rtol=1e-4, atol=1e-5)


@settings(max_examples=25, **NET)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.integers(0, 2 ** 16))
def test_broadcast_add_mul_grads_sum_back_to_input_shape(base, seed):
    r = np.random.default_rng(seed)
    a_shape = tuple(1 if r.random() < 0.5 else d for d in base)
    b_shape = tuple(base[r.integers(0, len(base) + 1):])
    a = mg.tensor(r.standard_normal(a_shape), requires_grad=True)
    b = mg.tensor(r.standard_normal(b_shape), requires_grad=True)
    out = a * b + a
    out.sum().backward()
    full = np.broadcast_shapes(a_shape, b_shape)
    assert out.shape == full and a.grad.shape == a_shape and b.grad.shape == b_shape
    bb = np.broadcast_to(b.numpy(), full)
    expect_a = (bb + 1).sum(axis=tuple(range(len(full) - len(a_shape))))
    expect_a = expect_a.sum(axis=tuple(i for i, d in enumerate(a_shape) if d == 1), keepdims=True)
    np.testing.assert_allclose(a.grad.numpy(), expect_a.reshape(a_shape), rtol=1e-10)



@pytest.mark.parametrize('axis', [None, 0, 1, -1])
def test_jvp_of_max_at_tied_maxima_is_the_gradient_dot_the_tangent(axis):
    """At tied maxima forward mode averages the tangents, as reverse mode splits the gradient."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    v = np.array([[0.5, 1.0, -2.0], [1.0, 4.0, 1.0]])
    f = lambda a: (mg.max(a, axis=axis) * mg.max(a, axis=axis, keepdims=True).sum()).sum()
    _, t = mg.jvp(f, (mg.tensor(x),), (mg.tensor(v),))
    g = _np(mg.grad(f)(mg.tensor(x)))
    np.testing.assert_allclose(float(_np(t)), float((g * v).sum()), rtol=1e-12)

def test_regression_pipeline_is_idempotent_when_a_group_is_hoistable_only_after_grouping():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, (1, 1), name='x')
        y = mg.placeholder(mg.float64, (1, 1), name='y')
        v2 = x[:1] * x
        v3 = x[:1] * v2
        out = (v3 * v3).sum() + v3.sum()
        outs = [out, v3] + mg.gradients(out, [x, y])
    prog = mg.compile(outs, [x, y])
    again = prog.graph
    for name in DEFAULT_PASSES:
        again = PASSES[name](again)
    assert _sig(again) == _sig(prog.graph)


# =====================================================================================
# Variables assigned over steps: the net's programs with state
# =====================================================================================
STEPS = 4


class StateRun:
    """A program of the net over STEPS steps with Variables. Input 0 is fed (the example and the new inputs in
    turn) when the program has more than one input; the other inputs are Variables, initialised with the example
    inputs, and some are assigned a value of their shape and dtype (one value to two Variables happens, and an
    assign's result is used further on: ``assign * 2.0``). Fetched each step: every Variable (its value before
    the step), every assign and its use, every value. The eager reference reads the Variables before the step
    and commits the assigns at its end (what a Session run means)."""

    def __init__(self, prog, arrays, new):
        r = np.random.default_rng(prog.seed)
        n = self.n_in = len(prog.shapes)
        self.prog, self.arrays, self.fed = prog, arrays, [0] if n > 1 else []
        self.vars = [i for i in range(n) if i not in self.fed]
        self.init = [np.array(arrays[i]) for i in self.vars]
        self.feeds = [[(arrays if s % 2 == 0 else new)[i] for i in self.fed] for s in range(STEPS)]
        self.assigns = []
        for k, i in enumerate(self.vars):
            cands = [j for j in range(n, prog.n_values)
                     if prog.value_shapes[j] == prog.shapes[i] and prog.value_dtypes[j] == prog.dtypes[i]]
            shared = [j for _, j in self.assigns if j in cands]          # one value to two Variables
            if shared and r.random() < 0.7:
                self.assigns.append((k, shared[0]))
            elif cands and r.random() < 0.9:
                self.assigns.append((k, int(r.choice(cands))))

    def inputs(self, feed, state):
        fed, var = iter(feed), iter(state)
        return [next(fed) if i in self.fed else next(var) for i in range(self.n_in)]

    def fetch(self, ns, state, vals, assigned):
        return list(state) + list(assigned) + [ns.scalar(a, 'mul', 2.0) for a in assigned] + vals[self.n_in:]

    def run_eager(self):
        state, out = [a.copy() for a in self.init], []
        for feed in self.feeds:
            vals = run_program(self.prog, MG_PY, [mg.tensor(a) for a in self.inputs(feed, state)])
            assigned = [mg.tensor(np.array(_np(vals[j]), dtype=self.prog.dtypes[self.vars[k]]))
                        for k, j in self.assigns]
            out.append([np.array(_np(v)) for v in self.fetch(MG, [mg.tensor(s) for s in state], vals, assigned)])
            for (k, _), a in zip(self.assigns, assigned):
                state[k] = a.numpy().copy()
        return out

    def graph(self):
        g = mg.Graph()
        with g.as_default():
            vs = [mg.Variable(a.copy(), name=f'v{k}') for k, a in enumerate(self.init)]
            phs = [mg.placeholder(self.prog.dtypes[i], self.prog.shapes[i], name=f'x{i}') for i in self.fed]
            vals = run_program(self.prog, MG, self.inputs(phs, vs))
            assigned = [vs[k].assign(vals[j]) for k, j in self.assigns]
            fetches = self.fetch(MG, vs, vals, assigned)
        return g, phs, fetches

    def run_modes(self):
        """{mode: [fetched values per step]}: the interpreter with a state dict, Session and compile per backend."""
        g, phs, fetches = self.graph()
        state = {}
        res = {'interpreter': [interpreter.evaluate(g, fetches, {id(p): a for p, a in zip(phs, f)}, state)
                               for f in self.feeds]}
        for be in BACKENDS:
            sess = mg.Session(g, backend=be)
            res[f'Session {be}'] = [sess.run(fetches, dict(zip(phs, f))) for f in self.feeds]
            p = mg.compile(fetches, phs, backend=be)
            res[f'compile {be}'] = [_copies(_as_list(p(*f))) for f in self.feeds]
        return res

    def check(self):
        want = self.run_eager()
        for mode, steps in self.run_modes().items():
            for s, (got, w) in enumerate(zip(steps, want)):
                assert len(got) == len(w), f'{mode}: {len(got)} fetches for {len(w)}'
                for n, (a, b) in enumerate(zip(got, w)):
                    # the sign of zero is not compared here: Session on numba with Variables gives 0.0 where the
                    # eager steps give -0.0 (found by the large slice; the stateful net compared with allclose)
                    compare(f'{mode} (state)', f'step {s} fetch {n}', a, b, self.prog, self.arrays, signs=False)


STATE = dict(special=False, none_dims=False, second_order=False, max_steps=8)
STATE_PROGRAMS = program_and_inputs(dtypes=(np.float32,), **STATE) | program_and_inputs(dtypes=(np.float64,), **STATE)


@settings(max_examples=n_programs(30), **NET)
@given(case=STATE_PROGRAMS)
def test_net_variables_assigned_over_steps(case):
    """Eager steps == the interpreter with a state dict == Session == compile (each backend), step by step."""
    with np.errstate(all='ignore'):
        StateRun(*case).check()


@pytest.mark.slow              # 200 took 5 of the full run's 10 minutes; MINIGRAD_NET_SCALE=4 draws more
@settings(max_examples=n_programs(60), **NET)
@given(case=STATE_PROGRAMS)
def test_net_variables_assigned_over_steps_large(case):
    with np.errstate(all='ignore'):
        StateRun(*case).check()


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('strided', [True, False])
@pytest.mark.parametrize('backend', BACKENDS)
def test_regression_a_fused_value_assigned_to_two_variables_and_a_size_1_strided_view(backend, strided, dtype):
    """Two bugs the stateful net found: one value (a fused op on a view of a fed input) assigned to two Variables read
    uninitialised memory on numba; a size-1 group reading a strided view raised numba TypingErrors."""
    init = [np.full((1, 3), 0.5, dtype), np.ones((1, 3), dtype)]
    rs = np.random.default_rng(0)
    feeds = [rs.standard_normal((2, 3)).astype(dtype) for _ in range(3)]
    g = mg.Graph()
    with g.as_default():
        vs = [mg.Variable(a.copy(), name=f'v{k}') for k, a in enumerate(init)]
        big = mg.placeholder(dtype, (2, 3), name='big')
        t = mg.tanh((big[1::2] if strided else big[1:]) * vs[0] + 0.25)
        fetches = [vs[0], vs[1], vs[0].assign(t), vs[1].assign(t)]
    state, want = [a.copy() for a in init], []
    for f in feeds:
        t_ = (mg.tanh(mg.tensor(f[1::2] if strided else f[1:]) * mg.tensor(state[0]) + 0.25)).numpy()
        want.append([state[0], state[1], t_, t_])
        state = [t_.copy(), t_.copy()]
    sess = mg.Session(g, backend=backend)
    p = mg.compile(fetches, [big], backend=backend)
    for got in ([sess.run(fetches, {big: f}) for f in feeds], [_copies(p(f)) for f in feeds]):
        for gs, ws in zip(got, want):
            for a, b in zip(gs, ws):
                np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


# =====================================================================================
# Regression tests: failures the net found, shrunk, as plain code
# =====================================================================================
def _graph(fn, *arrays):
    """fn on placeholders shaped like ``arrays``: (graph, placeholders, outputs)."""
    g = mg.Graph()
    with g.as_default():
        phs = [mg.placeholder(a.dtype, a.shape, name=f'x{i}') for i, a in enumerate(arrays)]
        out = fn(*phs)
    return g, phs, out


def test_regression_softmax_over_an_empty_axis():
    # net: x0 = np.zeros((0,)); v1 = mg.softmax(x0, axis=0) raised ShapeError (max over an empty
    # axis) on the tape and in graphs; torch.softmax of an empty axis is empty.
    x = np.zeros((0, 4))
    t = mg.tensor(x, requires_grad=True)
    s = mg.softmax(t, axis=0)
    assert s.shape == (0, 4)
    (s * 2.0).sum().backward()
    assert t.grad.shape == (0, 4)
    g, (p,), y = _graph(lambda a: mg.softmax(a, axis=0), x)
    assert mg.Session(g).run(y, {p: x}).shape == (0, 4)


def test_regression_logsumexp_over_an_empty_axis():
    # net: x0 = np.zeros((3, 0)); v1 = mg.logsumexp(x0, axis=-1) raised ShapeError; the log of an
    # empty sum is -inf (torch.logsumexp gives [-inf, -inf, -inf]).
    x = np.zeros((3, 0))
    t = mg.tensor(x, requires_grad=True)
    y = mg.logsumexp(t, axis=-1)
    np.testing.assert_array_equal(y.numpy(), [-inf, -inf, -inf])
    y.sum().backward()
    assert t.grad.shape == (3, 0)
    g, (p,), ys = _graph(lambda a: mg.logsumexp(a, axis=-1), x)
    np.testing.assert_array_equal(mg.Session(g).run(ys, {p: x}), [-inf, -inf, -inf])


def test_regression_relu_of_nan_is_zero_in_every_mode():
    # net: v7 = mg.relu(x0) with NaN in x0 gave 0.0 where torch.relu (and np.maximum(x, 0)) give NaN.
    # By design relu is where(0 < x, x, 0) (gradient 0 at 0, as torch): NaN maps to 0, and -0.0 to
    # +0.0, the same in every mode (the compiled relu is fmax(x, 0) + 0).
    x = np.array([nan, -1.0, 2.0, -0.0])
    want = [0.0, 0.0, 2.0, 0.0]
    g, (p,), y = _graph(mg.relu, x)
    for got in (mg.relu(mg.tensor(x)).numpy(), mg.Session(g).run(y, {p: x}), mg.compile([y], [p])(x)[0]):
        np.testing.assert_array_equal(got, want)
        assert not np.signbit(got).any()


def test_regression_compiled_outer_product_keeps_the_sign_of_zero():
    # net: x0 = [[0.125], [-0.0], [0.0]]; v2 = x0 @ mg.transpose(x0, (1, 0)). The tape (np.matmul,
    # whose sums start at +0.0) gives +0.0 off the diagonal; Session and mg.compile gave -0.0,
    # because the compiler turns a matmul with inner size 1 into multiply and 0.0 * -0.0 = -0.0.
    x = np.array([[0.125], [-0.0], [0.0]])
    want = (mg.tensor(x) @ mg.transpose(mg.tensor(x), (1, 0))).numpy()
    assert not np.signbit(want).any()
    g, (p,), y = _graph(lambda a: a @ mg.transpose(a, (1, 0)), x)
    for got in (mg.Session(g).run(y, {p: x}), mg.compile([y], [p])(x)[0]):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.xfail(strict=True, reason='known limit: a value computed outside mg.cond gets a zero cotangent '
                   'from the branch not taken, and 0 * inf is nan (as jax.lax.cond); compute it inside '
                   'the branch to avoid it')
def test_regression_cond_gradient_is_not_nan_from_the_branch_not_taken():
    # net: x0 = [0, 0, 0, inf]; v1 = x0 * x0; v2 = mg.cond(x0.sum() > 0.0, lambda: x0, lambda: v1).
    # d v2 / d x0 is 1 (the tape and torch take the true branch); mg.gradients gave NaN: the branch
    # not taken sends a zero cotangent to v1 and mul's VJP makes 0 * inf = NaN of it.
    t = mg.tensor(np.inf, dtype=mg.float64, requires_grad=True)
    sq = t * t
    mg.cond(t > 0.0, lambda: t, lambda: sq).backward()
    assert t.grad.item() == 1.0

    def f(x):
        sq = x * x
        y = mg.cond(x > 0.0, lambda: x, lambda: sq)
        return mg.gradients(y, [x])[0]
    g, (p,), dx = _graph(f, np.array(np.inf))
    assert float(mg.Session(g).run(dx, {p: np.inf})) == 1.0
    assert float(mg.compile([dx], [p])(np.array(np.inf))[0]) == 1.0


def test_regression_jit_with_a_python_if_on_a_value():
    # net: v2 = x0 if bool(x0.sum() > 0.0) else x0 (a data-dependent Python if) made mg.jit raise
    # TraceError. DESIGN: jit guards branch outcomes and splits the function (a graph break)
    # where the tracer is asked for a value, instead of failing or freezing the branch.
    def f(x):
        if bool(x.sum() > 0.0):
            return x * 2.0
        return -x

    jf = mg.jit(f)
    np.testing.assert_array_equal(jf(np.array([1.0, 2.0])), [2.0, 4.0])
    np.testing.assert_array_equal(jf(np.array([-1.0, -2.0])), [1.0, 2.0])
    np.testing.assert_array_equal(jf(np.array([3.0, 0.0])), [6.0, 0.0])


def test_regression_broadcast_to_from_an_unknown_dim():
    # net: x0 = mg.placeholder(mg.float64, (None, 4)) fed a (1, 4) array; mg.broadcast_to(x0, (2, 1, 4))
    # raised ShapeError while building, although an unknown dim may be 1.
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder(mg.float64, (None, 4))
        y = mg.broadcast_to(x, (2, 1, 4))
        (dx,) = mg.gradients(y.sum(), [x])
    out, grad = mg.Session(g).run([y, dx], {x: np.ones((1, 4))})
    np.testing.assert_array_equal(out, np.ones((2, 1, 4)))
    np.testing.assert_array_equal(grad, np.full((1, 4), 2.0))


def test_regression_compiled_relu_of_negative_zero():
    # net: x0 = [[-0.0], [1.0], [0.0]]; v1 = mg.relu(x0). The tape and the reference interpreter
    # (relu is where(x > 0, x, 0)) give +0.0; Session and mg.compile gave -0.0: the compiler emits
    # np.fmax(x, 0), and fmax(-0.0, 0) keeps -0.0.
    x = np.array([-0.0, 1.0, 0.0])
    g, (p,), y = _graph(mg.relu, x)
    want = interpreter.evaluate(g, [y], {id(p): x})[0]
    np.testing.assert_array_equal(np.signbit(mg.relu(mg.tensor(x)).numpy()), np.signbit(want))
    for got in (mg.Session(g).run(y, {p: x}), mg.compile([y], [p])(x)[0]):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_regression_second_derivative_of_division_at_0_and_inf():
    # net: x0 = 0.0; v1 = 1.0 / x0, and x0 = [0.5, ...], x1 = [2.65, ..., inf]; v2 = x0 / x1, with
    # second-order gradients. d2(a/y)/dy2 = 2a/y**3 is +inf at y = +0.0 and 0 at y = inf (torch.autograd
    # agrees); the tape and mg.gradients gave nan: div's VJP for the divisor, -(g * a) / (y * y),
    # differentiated again multiplies an infinite cotangent of y * y by y = 0 (or 0 by y = inf).
    for a, y, want1, want2 in [(1.0, 0.0, -inf, inf), (2.0, inf, -0.0, 0.0)]:
        t = mg.tensor(y, dtype=mg.float64, requires_grad=True)
        (a / t).backward(create_graph=True)
        d1 = t.grad
        assert d1.item() == want1
        t.grad = None
        d1.backward()
        assert t.grad.item() == want2, (a, y)

        def f(x):
            (d1,) = mg.gradients(a / x, [x])
            return [d1] + mg.gradients(d1, [x])
        g, (p,), (d1, d2) = _graph(f, np.array(y))
        np.testing.assert_array_equal(mg.Session(g).run([d1, d2], {p: y}), [want1, want2])


def test_regression_concatenate_gradient_keeps_the_input_dtype():
    # net: x0 float32 (3, 4), x1 int64 (1, 4); v3 = mg.concatenate([x1, x0, x1], axis=0) is float64.
    # The tape's gradient for x0 is float32 (like x0); mg.gradients gave float64: concatenate's VJP
    # slices the cotangent without casting it back (add's VJP does: sum_to_like casts).
    x = np.array([1.0, 2.0], np.float32)
    i = np.array([3, 4])
    t = mg.tensor(x, requires_grad=True)
    (mg.concatenate([mg.tensor(i), t]) * 2.0).sum().backward()
    assert t.grad.dtype == np.float32
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, (2,))
        q = mg.placeholder(mg.int64, (2,))
        (dp,) = mg.gradients((mg.concatenate([q, p]) * 2.0).sum(), [p])
    assert dp.dtype == np.float32
    out = mg.Session(g).run(dp, {p: x, q: i})
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [2.0, 2.0])


# =====================================================================================
# Transformations of the net's programs, and their compositions, against torch.func
# =====================================================================================
class Fn:
    """A smooth program of the net as f: R^n -> R^m: its first input (flattened, reshaped inside) is the
    argument, its other inputs are captured constants, the output is its weighted loss values, flattened
    and concatenated, and sin(x) @ W. ``v`` is a tangent; ``*_scalar`` is sum(f(x) ** 2). The same f on minigrad and torch."""

    def __init__(self, prog, arrays):
        self.prog, self.shape, self.rest = prog, arrays[0].shape, arrays[1:]
        self.x = np.array(arrays[0], np.float64).reshape(-1)
        self.v = np.array(prog.U[0], np.float64).reshape(-1)
        self.W = np.random.default_rng(prog.seed).uniform(-1, 1, (self.x.size, 2))

    def run(self, ns, x, consts):
        vals = run_program(self.prog, ns, [ns.reshape(x, self.shape)] + consts)
        parts = [ns.reshape(ns.mul(vals[k], ns.const(self.prog.R[k])), (-1,)) for k in self.prog.loss]
        # sin(x) @ W (a numpy constant on minigrad's side): f depends on x however the program goes
        return ns.concat(*parts, ns.matmul(ns.sin(x), ns.const(self.W)), axis=0)

    def mg(self, x):
        const = mg.constant if isinstance(x, mg.Symbol) else mg.tensor     # Session, trace, jit: graph constants
        return self.run(MG_PY, x, [const(a) for a in self.rest])

    def torch(self, x):
        return self.run(TORCH, x, [torch.from_numpy(np.array(a)) for a in self.rest])

    def mg_scalar(self, x):
        y = self.mg(x)
        return (y * y).sum()

    def torch_scalar(self, x):
        y = self.torch(x)
        return (y * y).sum()

    def __repr__(self):
        return f'{self.prog!r}\n# f(x) of x0 = {self.x.tolist()} (flattened), v = {self.v.tolist()}'


def _backward(f):
    def g(x):
        x = mg.tensor(x, requires_grad=True)
        f(x).sum().backward()
        return x.grad
    return g


def _gradients(f):
    def g(x):
        gr = mg.Graph()
        with gr.as_default():
            p = mg.placeholder(mg.float64, x.shape)
            dx, = mg.gradients(f(p).sum(), [p])
        return mg.Session(gr).run(dx, {p: x})
    return g


# THE registry of transformation modes: (name, minigrad of (program, x) -> array, torch reference of (program, x) -> array)
def _hvp_mg(P, x):
    return mg.jvp(mg.jacrev(P.mg_scalar), (mg.tensor(x),), (mg.tensor(P.v),))[1]


TRANSFORMS = {
    'backward': (lambda P, x: _backward(P.mg)(x), lambda P, x: tfunc.grad(lambda t: P.torch(t).sum())(_t(x))),
    'gradients': (lambda P, x: _gradients(P.mg)(x), lambda P, x: tfunc.grad(lambda t: P.torch(t).sum())(_t(x))),
    'jvp': (lambda P, x: mg.jvp(P.mg, (mg.tensor(x),), (mg.tensor(P.v),))[1],
            lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'jacfwd': (lambda P, x: mg.jacfwd(P.mg)(mg.tensor(x)), lambda P, x: tfunc.jacfwd(P.torch)(_t(x))),
    'jacrev': (lambda P, x: mg.jacrev(P.mg)(mg.tensor(x)), lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jit': (lambda P, x: mg.jit(P.mg)(mg.tensor(x)), lambda P, x: P.torch(_t(x))),
    'trace': (lambda P, x: mg.trace(P.mg, x)(mg.tensor(x)), lambda P, x: P.torch(_t(x))),
    # pairs and triples
    'jacrev(jacrev)': (lambda P, x: mg.jacrev(mg.jacrev(P.mg_scalar))(mg.tensor(x)),
                       lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'jacfwd(jacrev)': (lambda P, x: mg.jacfwd(mg.jacrev(P.mg_scalar))(mg.tensor(x)),
                       lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'jacrev(jacfwd)': (lambda P, x: mg.jacrev(mg.jacfwd(P.mg_scalar))(mg.tensor(x)),
                       lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'jacfwd(jacfwd)': (lambda P, x: mg.jacfwd(mg.jacfwd(P.mg_scalar))(mg.tensor(x)),
                       lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'hvp (jvp of jacrev)': (_hvp_mg, lambda P, x: tfunc.jvp(tfunc.grad(P.torch_scalar), (_t(x),), (_t(P.v),))[1]),
    'backward(jit)': (lambda P, x: _backward(mg.jit(P.mg))(x),
                      lambda P, x: tfunc.grad(lambda t: P.torch(t).sum())(_t(x))),
    'backward(trace)': (lambda P, x: _backward(mg.trace(P.mg, x))(x),
                        lambda P, x: tfunc.grad(lambda t: P.torch(t).sum())(_t(x))),
    'jacrev(jit)': (lambda P, x: mg.jacrev(mg.jit(P.mg))(mg.tensor(x)), lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jacfwd(jit)': (lambda P, x: mg.jacfwd(mg.jit(P.mg))(mg.tensor(x)), lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jvp(jit)': (lambda P, x: mg.jvp(mg.jit(P.mg), (mg.tensor(x),), (mg.tensor(P.v),))[1],
                 lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'jacrev(trace)': (lambda P, x: mg.jacrev(mg.trace(P.mg, x))(mg.tensor(x)),
                      lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jvp(trace)': (lambda P, x: mg.jvp(mg.trace(P.mg, x), (mg.tensor(x),), (mg.tensor(P.v),))[1],
                   lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'jit(jacrev)': (lambda P, x: mg.jit(mg.jacrev(P.mg))(mg.tensor(x)), lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'trace(jacrev)': (lambda P, x: mg.trace(mg.jacrev(P.mg), x)(mg.tensor(x)),
                      lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jit(jacfwd)': (lambda P, x: mg.jit(mg.jacfwd(P.mg))(mg.tensor(x)), lambda P, x: tfunc.jacfwd(P.torch)(_t(x))),
    'trace(jacfwd)': (lambda P, x: mg.trace(mg.jacfwd(P.mg), x)(mg.tensor(x)),
                      lambda P, x: tfunc.jacfwd(P.torch)(_t(x))),
    'jit(jvp)': (lambda P, x: mg.jit(lambda a: mg.jvp(P.mg, (a,), (P.v,))[1])(mg.tensor(x)),
                 lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'backward(jvp)': (lambda P, x: _backward(lambda a: mg.jvp(P.mg_scalar, (a,), (mg.tensor(P.v),))[1])(x),
                      lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x)) @ _t(P.v)),
    'jacrev(jvp)': (lambda P, x: mg.jacrev(lambda a: mg.jvp(P.mg, (a,), (mg.tensor(P.v),))[1])(mg.tensor(x)),
                    lambda P, x: tfunc.jacrev(lambda a: tfunc.jvp(P.torch, (a,), (_t(P.v),))[1])(_t(x))),
    'jit(jacrev(jit))': (lambda P, x: mg.jit(mg.jacrev(mg.jit(P.mg)))(mg.tensor(x)),
                         lambda P, x: tfunc.jacrev(P.torch)(_t(x))),
    'jit(jvp(trace))': (lambda P, x: mg.jit(lambda a: mg.jvp(mg.trace(P.mg, x), (a,), (P.v,))[1])(mg.tensor(x)),
                        lambda P, x: tfunc.jvp(P.torch, (_t(x),), (_t(P.v),))[1]),
    'jit(jit)': (lambda P, x: mg.jit(mg.jit(P.mg))(mg.tensor(x)), lambda P, x: P.torch(_t(x))),
    'jacrev(jacrev(jit))': (lambda P, x: mg.jacrev(mg.jacrev(mg.jit(P.mg_scalar)))(mg.tensor(x)),
                            lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'jacfwd(jacrev(jit))': (lambda P, x: mg.jacfwd(mg.jacrev(mg.jit(P.mg_scalar)))(mg.tensor(x)),
                            lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'backward(backward) via jacrev': (lambda P, x: _backward(mg.jacrev(P.mg_scalar))(x),
                                      lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x)).sum(0)),
    # grad and vmap; a batch is four points around x
    'grad': (lambda P, x: mg.grad(P.mg_scalar)(mg.tensor(x)), lambda P, x: tfunc.grad(P.torch_scalar)(_t(x))),
    'vmap': (lambda P, x: mg.vmap(P.mg)(_batch(x)), lambda P, x: tfunc.vmap(P.torch)(_t(_batch(x)))),
    'vmap(grad)': (lambda P, x: mg.vmap(mg.grad(P.mg_scalar))(_batch(x)),
                   lambda P, x: tfunc.vmap(tfunc.grad(P.torch_scalar))(_t(_batch(x)))),
    'jit(vmap(grad))': (lambda P, x: mg.jit(mg.vmap(mg.grad(P.mg_scalar)))(_batch(x)),
                        lambda P, x: tfunc.vmap(tfunc.grad(P.torch_scalar))(_t(_batch(x)))),
    'vmap(jit)': (lambda P, x: mg.vmap(mg.jit(P.mg))(_batch(x)), lambda P, x: tfunc.vmap(P.torch)(_t(_batch(x)))),
    'vmap(jvp)': (lambda P, x: mg.vmap(lambda a: mg.jvp(P.mg, (a,), (P.v,))[1])(_batch(x)),
                  lambda P, x: tfunc.vmap(lambda a: tfunc.jvp(P.torch, (a,), (_t(P.v),))[1])(_t(_batch(x)))),
    'vmap(jacrev)': (lambda P, x: mg.vmap(mg.jacrev(P.mg))(_batch(x)),
                     lambda P, x: tfunc.vmap(tfunc.jacrev(P.torch))(_t(_batch(x)))),
    'jvp(grad)': (lambda P, x: mg.jvp(mg.grad(P.mg_scalar), (mg.tensor(x),), (mg.tensor(P.v),))[1],
                  lambda P, x: tfunc.jvp(tfunc.grad(P.torch_scalar), (_t(x),), (_t(P.v),))[1]),
    'jacrev(grad)': (lambda P, x: mg.jacrev(mg.grad(P.mg_scalar))(mg.tensor(x)),
                     lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'hessian': (lambda P, x: mg.hessian(P.mg_scalar)(mg.tensor(x)), lambda P, x: tfunc.hessian(P.torch_scalar)(_t(x))),
    'grad(jit)': (lambda P, x: mg.grad(mg.jit(P.mg_scalar))(mg.tensor(x)),
                  lambda P, x: tfunc.grad(P.torch_scalar)(_t(x))),
}


def _batch(x):
    return np.stack([x, 0.5 * x, -x, x + 0.1])

def check_transform(mode, P):
    got, want = TRANSFORMS[mode][0](P, P.x), TRANSFORMS[mode][1](P, P.x)
    np.testing.assert_allclose(_tnp(got), want.detach().numpy(), rtol=1e-6, atol=1e-9, err_msg=f'{mode}\n{P!r}')


@needs_torch
@pytest.mark.parametrize('mode', list(TRANSFORMS))
@settings(max_examples=n_programs(24 if EXPLORE else 4), **NET)
@given(case=program_and_inputs(dtypes=(np.float64,), max_steps=5, **SMOOTH))
def test_transformations_agree_with_torch_func(mode, case):
    """Every transformation mode (tape, mg.gradients, jvp, jacfwd, jacrev, jit, trace, grad, vmap, hessian and
    their pairs and triples) of the net's smooth programs == torch.func, float64."""
    check_transform(mode, Fn(case[0], case[1]))


# ------------------------------------------------------------------ control flow under forward mode
def _cond_f(L, x):
    pos = lambda: L.sin(x) * x
    neg = lambda: x * x * 0.5
    if L is torch:
        return pos() if float(x.sum()) > 0 else neg()
    return mg.cond(x.sum() > 0, pos, neg)


def _while_f(L, x):
    if L is torch:
        y = x
        for _ in range(3):
            y = L.tanh(y) * 1.5 + x
        return y
    start = mg.constant(0) if isinstance(x, mg.Symbol) else mg.tensor(0)
    i, y = mg.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, mg.tanh(y) * 1.5 + x), [start, x])
    return y


CONTROL_FNS = {'cond': _cond_f, 'while_loop': _while_f}
WRAP = {'eager': lambda f, x: f, 'jit': lambda f, x: mg.jit(f), 'trace': lambda f, x: mg.trace(f, x)}


@pytest.mark.parametrize('sign', [1.0, -1.0])
@pytest.mark.parametrize('wrap', list(WRAP))
@pytest.mark.parametrize('ctl', list(CONTROL_FNS))
@needs_torch
def test_jvp_and_jacobians_through_control_flow(ctl, wrap, sign):
    rng = np.random.default_rng(5)
    x, v = rng.uniform(0.1, 1, 3) * sign, rng.uniform(-1, 1, 3)
    f = WRAP[wrap](lambda a: CONTROL_FNS[ctl](mg, a), x)
    ft = lambda a: CONTROL_FNS[ctl](torch, a)
    np.testing.assert_allclose(_tnp(mg.jvp(f, (mg.tensor(x),), (mg.tensor(v),))[1]),
                               tfunc.jvp(ft, (_t(x),), (_t(v),))[1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(_tnp(mg.jacfwd(f)(mg.tensor(x))), tfunc.jacfwd(ft)(_t(x)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(_tnp(mg.jacrev(f)(mg.tensor(x))), tfunc.jacfwd(ft)(_t(x)).numpy(), rtol=1e-6)


# ------------------------------------------------------------------ grad mode inside trace and jit
def _modes_f(x):
    y = x * x
    with mg.no_grad():
        z = mg.sin(x)                   # a constant for differentiation
        with mg.enable_grad():
            w = mg.cos(x)               # differentiated again
    return (y * z + w + mg.stop_gradient(mg.exp(x)) * x).sum()


def _modes_torch(x):
    return (x * x * torch.sin(x).detach() + torch.cos(x) + torch.exp(x).detach() * x).sum()


GRAD_OF = {
    'eager': lambda x: _backward(_modes_f)(x),
    'gradients(trace)': lambda x: _traced_gradient(mg.trace(_modes_f, x), x),
    'gradients(tape trace)': lambda x: _traced_gradient(mg.trace(_modes_f, x, symbolic=False), x),
    'backward(jit)': lambda x: _backward(mg.jit(_modes_f))(x),
    'jacrev': lambda x: mg.jacrev(_modes_f)(mg.tensor(x)),
}


def _traced_gradient(tf, x):
    with tf.graph.as_default():
        dx, = mg.gradients(tf.outputs[0], tf.inputs)
    return mg.Session(tf.graph).run(dx, tf.feeds([x]))


@pytest.mark.parametrize('mode', list(GRAD_OF))
@needs_torch
def test_no_grad_enable_grad_stop_gradient_mean_the_same_in_every_mode(mode):
    x = np.array([0.3, -0.7, 1.1])
    want = tfunc.grad(_modes_torch)(_t(x)).numpy()
    np.testing.assert_allclose(_tnp(GRAD_OF[mode](x)), want, rtol=1e-6)


# ------------------------------------------------------------------ regressions, one per fix
def test_hessian_both_ways_and_gradient_of_a_jacobian():
    f = lambda x: (x ** 3).sum()
    x = mg.tensor([1.0, 2.0])
    for H in (mg.jacrev(mg.jacrev(f)), mg.jacfwd(mg.jacrev(f)), mg.jacrev(mg.jacfwd(f))):
        np.testing.assert_allclose(H(x).tolist(), [[6.0, 0.0], [0.0, 12.0]])
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    mg.jacrev(f)(w).sum().backward()            # the Jacobian stays on the tape: d/dw sum(3 w^2) = 6 w
    np.testing.assert_allclose(w.grad.tolist(), [6.0, 12.0])


def test_a_jit_or_trace_output_is_on_the_tape_when_its_input_requires_grad():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    for f in (mg.jit(lambda a: (a ** 3).sum()), mg.trace(lambda a: (a ** 3).sum(), np.ones(2, np.float32))):
        x.grad = None
        y = f(x)
        assert y.requires_grad and y.grad_fn.name == 'call'
        y.backward()
        np.testing.assert_allclose(x.grad.tolist(), [3.0, 12.0])
    w = mg.tensor([2.0], requires_grad=True)        # a captured tensor that requires grad gets its gradient too
    mg.jit(lambda a: (a * w).sum())(mg.tensor([3.0, 4.0])).backward()
    np.testing.assert_allclose(w.grad.tolist(), [7.0])


def test_forward_mode_through_while_loop_cond_and_jit():
    def f(x):
        i, y = mg.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, y * x), [mg.constant(0), x])
        return mg.cond(y.sum() > 0, lambda: y * 2.0, lambda: -y)
    x, v = mg.tensor([1.5, 0.5]), mg.tensor([1.0, 0.0])
    for g in (mg.jit(f), mg.trace(f, np.ones(2, np.float32))):
        y, dy = mg.jvp(g, (x,), (v,))           # y = 2 x^3: dy = 6 x^2 v
        np.testing.assert_allclose(dy.tolist(), [13.5, 0.0], rtol=1e-6)


def test_nested_jit_and_identity_output_is_a_copy():
    inner = mg.jit(lambda a: a * 2.0)
    outer = mg.jit(lambda a: inner(a) + 1.0)
    np.testing.assert_allclose(outer(np.array([1.0, 2.0])), [3.0, 5.0])
    a = np.ones(3)
    out = mg.jit(lambda x: x)(a)
    assert out is not a and not np.shares_memory(out, a)


@needs_torch
def test_in_place_under_no_grad_keeps_a_non_leaf_in_the_graph_as_pytorch():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    with mg.no_grad():
        y += 1
    (y * y).sum().backward()
    xt = torch.tensor([1.0, 2.0], requires_grad=True)
    yt = xt * 3
    with torch.no_grad():
        yt += 1
    (yt * yt).sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), xt.grad.tolist())


def test_no_grad_inside_a_symbolic_trace_is_stop_gradient():
    def f(x):
        with mg.no_grad():
            return x * x
    tf = mg.trace(f, np.ones(2, np.float32))
    assert 'stop_gradient' in str(tf.graph)
    with tf.graph.as_default():
        dx, = mg.gradients(tf.outputs[0].sum(), tf.inputs)
    np.testing.assert_allclose(mg.Session(tf.graph).run(dx, tf.feeds([np.ones(2, np.float32)])), [0.0, 0.0])


def test_jit_reads_captured_tensors_and_guards_free_scalars_exactly():
    c = mg.tensor([1.0, 2.0])
    f = mg.jit(lambda x: x * c)
    f(np.ones(2))
    c += 1                                  # an in-place change of a closed-over tensor is seen
    np.testing.assert_allclose(f(np.ones(2)), [2.0, 3.0])
    scale = [2.0]
    g = mg.jit(lambda x: x * scale_of(scale))
    np.testing.assert_allclose(g(np.ones(2)), [2.0, 2.0])
    h = mg.jit(lambda x, s: x * s)
    h(np.ones(2), 0.0)
    assert np.signbit(h(np.ones(2), -0.0)).all() and h.trace_count == 2     # -0.0 is not 0.0
    h(np.ones(2), float('nan'))
    h(np.ones(2), float('nan'))
    assert h.trace_count == 3                                               # nan hits its own entry


def scale_of(box):
    return box[0]


FACTOR = 2.0


def test_jit_guards_globals_and_rebound_parameters():
    f = mg.jit(lambda x: x * FACTOR)
    np.testing.assert_allclose(f(np.ones(2)), [2.0, 2.0])
    globals()['FACTOR'] = 3.0
    try:
        np.testing.assert_allclose(f(np.ones(2)), [3.0, 3.0])
    finally:
        globals()['FACTOR'] = 2.0
    m = mg.nn.Linear(2, 1)
    k = mg.jit(lambda x: m(x))
    x = np.ones((1, 2), np.float32)
    k(x)
    m.bias = mg.nn.Parameter(np.full(m.bias.shape, 5.0, np.float32))
    np.testing.assert_allclose(k(x), m(mg.tensor(x)).data, rtol=1e-6)


@needs_numba
def test_guard_values_come_from_the_compiled_kernels():
    x = np.array([1.8592438], np.float32)      # numba's pow differs from numpy's by 1 ulp here

    def fn(a):
        return a * float(((a ** 2.7 + 0.5) * 1.0).sum())
    f = mg.jit(fn, backend='numba')
    f(x)
    f(x)
    assert f.trace_count == 1 and f.hits == 1


def test_a_jit_call_is_recorded_on_an_open_tape():
    f = mg.jit(lambda a: (a * a).sum())
    t = mg.trace(lambda a: f(a) * 2, np.ones(2, np.float32), symbolic=False)    # not a stale captured value
    np.testing.assert_allclose(t(np.array([1.0, 2.0], np.float32)), 10.0)
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with mg.Tape() as tape:
        f(x)
    assert [e.op for e in tape.entries] == ['call']
    mg.draw(tape)


def test_unsupported_compositions_say_so_and_name_the_alternative():
    def loop(x):
        start = mg.constant(0) if isinstance(x, mg.Symbol) else mg.tensor(0)
        return mg.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, mg.sin(y) * x), [start, x])[1].sum()
    x = mg.tensor([0.3, -0.5])
    with pytest.raises(mg.MinigradError, match='unroll the loop'):
        mg.jacrev(mg.jacrev(mg.jit(loop)))(x)           # second reverse derivative through while_loop
    xt = mg.tensor(x.numpy(), requires_grad=True)
    with pytest.raises(mg.MinigradError, match='use mg.jacfwd'):     # the tape over forward tangents of a jit loop
        mg.jvp(mg.jit(loop), (xt,), (mg.tensor(np.ones(2)),))[1].backward()
    branchy = lambda a: mg.cond(a.sum() > 0, lambda: mg.sin(a) * a, lambda: a * a)
    with pytest.raises(mg.MinigradError, match=r'mg.jvp\(mg.jit\(f\)'):
        mg.jit(lambda a: mg.jvp(branchy, (a,), (np.ones(2),))[1])(x)    # forward mode into a cond body
    np.testing.assert_allclose(_tnp(mg.jvp(mg.jit(branchy), (x,), (mg.tensor(np.ones(2)),))[1]),
                               _tnp(mg.jvp(branchy, (x,), (mg.tensor(np.ones(2)),))[1]), rtol=1e-6)
    H = mg.jacfwd(mg.jacrev(mg.jit(loop)))(x)           # the alternatives work
    np.testing.assert_allclose(_tnp(H), _tnp(mg.jacfwd(mg.jacfwd(loop))(x)), rtol=1e-6)
    np.testing.assert_allclose(_tnp(mg.jacrev(mg.jacfwd(mg.jit(loop)))(x)), _tnp(H), rtol=1e-6)    # one batched pass


NUMBA_MODES = ['backward(jit)', 'jacrev(jit)', 'jvp(jit)', 'jacfwd(jacrev(jit))', 'jit(vmap(grad))']


@needs_torch
@needs_numba
@pytest.mark.parametrize('mode', NUMBA_MODES)
@settings(max_examples=1, **NET)
@given(case=program_and_inputs(dtypes=(np.float64,), max_steps=5, **SMOOTH))
def test_composition_through_jit_on_the_numba_backend(mode, case):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv('MINIGRAD_BACKEND', 'numba')
        check_transform(mode, Fn(case[0], case[1]))


@pytest.mark.slow
@needs_torch
@needs_numba
@pytest.mark.parametrize('mode', [m for m in TRANSFORMS if 'jit' in m])
@settings(max_examples=10 if EXPLORE else 2, **NET)
@given(case=program_and_inputs(dtypes=(np.float64,), max_steps=5, **SMOOTH))
def test_composition_through_jit_on_the_numba_backend_larger(mode, case):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv('MINIGRAD_BACKEND', 'numba')
        check_transform(mode, Fn(case[0], case[1]))


# =====================================================================================
# Named cases: transformations (forward mode through eager loops, grad under an outer no_grad, vmap of every Jacobian, keyword arguments and has_aux, batched integer indices)
# =====================================================================================
# Transformations without a tail: one
# regression test per item, compared with torch.func (float64) where it has the composition, else with the tape.

def _tnp(t):
    return np.asarray(t.data if isinstance(t, mg.Tensor) else t, np.float64)


def _t(a):
    return torch.tensor(np.asarray(a, np.float64))


def _wl(L, x):
    """while x.sum() < 10: x = x * 2, in minigrad (a while_loop) or torch (a Python loop)."""
    if L is mg:
        return mg.while_loop(lambda y: y.sum() < 10.0, lambda y: y * 2.0, x)
    while x.sum() < 10.0:
        x = x * 2.0
    return x


@needs_torch
def test_outer_no_grad_does_not_stop_a_transformation():
    f = lambda L, w: (L.sin(w) * w).sum()
    vf = lambda L, w: L.sin(w) * w
    x, v, X = np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([[1.0, 2.0], [0.3, -0.7]])
    mgf, tf = (lambda w: f(mg, w)), (lambda w: f(torch, w))
    with torch.no_grad():
        want = {'grad': tfunc.grad(tf)(_t(x)), 'value_and_grad': tfunc.grad_and_value(tf)(_t(x))[0],
                'hessian': tfunc.hessian(tf)(_t(x)), 'vmap(grad)': tfunc.vmap(tfunc.grad(tf))(_t(X)),
                'jit(grad)': tfunc.grad(tf)(_t(x)), 'func.jacrev': tfunc.jacrev(lambda w: vf(torch, w))(_t(x)),
                'jvp(grad)': tfunc.jvp(tfunc.grad(tf), (_t(x),), (_t(v),))[1]}
    with mg.no_grad():
        got = {'grad': mg.grad(mgf)(mg.tensor(x)), 'value_and_grad': mg.value_and_grad(mgf)(mg.tensor(x))[1],
               'hessian': mg.hessian(mgf)(mg.tensor(x)), 'vmap(grad)': mg.vmap(mg.grad(mgf))(mg.tensor(X)),
               'jit(grad)': mg.jit(mg.grad(mgf))(mg.tensor(x)),
               'func.jacrev': mg.func.jacrev(lambda w: vf(mg, w))(mg.tensor(x)),
               'jvp(grad)': mg.jvp(mg.grad(mgf), (mg.tensor(x),), (mg.tensor(v),))[1]}
    g = mg.Graph()
    with g.as_default(), mg.no_grad():              # on Symbols too
        p = mg.placeholder(mg.float64, (2,), name='p')
        got['jacrev(Symbol)'], got['func.jacrev(Symbol)'], got['grad(Symbol)'] = mg.Session(g).run(
            [mg.jacrev(lambda w: vf(mg, w))(p), mg.func.jacrev(lambda w: vf(mg, w))(p), mg.grad(mgf)(p)], {p: x})
    want['jacrev(Symbol)'] = want['func.jacrev(Symbol)'] = want['func.jacrev']
    want['grad(Symbol)'] = want['grad']
    for k in want:
        np.testing.assert_allclose(_tnp(got[k]), want[k].numpy(), rtol=1e-6, err_msg=k)

    # a no_grad inside the function stays stop_gradient (as torch.func), even under an outer no_grad
    def inner(L, w):
        with (mg.no_grad() if L is mg else torch.no_grad()):
            c = L.sin(w) * w
        return (w * w - c).sum()
    with torch.no_grad():
        want = tfunc.grad(lambda w: inner(torch, w))(_t(x)).numpy()
    with mg.no_grad():
        np.testing.assert_allclose(_tnp(mg.grad(lambda w: inner(mg, w))(mg.tensor(x))), want)
    np.testing.assert_allclose(_tnp(mg.grad(lambda w: inner(mg, w))(mg.tensor(x))), want)

    # mg.gradients of a forward built under no_grad: refused, as the tape's backward; stop_gradient: zeros
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float64, (2,), name='p')
        with mg.no_grad():
            y = (mg.sin(p) * p).sum()
        with pytest.raises(mg.MinigradError, match='no_grad'):
            mg.gradients(y, [p])
        z = (mg.stop_gradient(mg.sin(p)) * p).sum()
        dz, = mg.gradients(z, [p])
        dy0, = mg.gradients(mg.stop_gradient(z), [p])
    np.testing.assert_allclose(mg.Session(g).run([dz, dy0], {p: x}), [np.sin(x), [0.0, 0.0]])
    w = mg.tensor(x, requires_grad=True)
    with mg.no_grad():
        yt = (mg.sin(w) * w).sum()
    with pytest.raises(mg.MinigradError, match='no_grad'):
        yt.backward()


@needs_torch
def test_forward_mode_through_a_while_loop_of_duals():
    y, dy = mg.jvp(lambda x: mg.while_loop(lambda y: y.sum() < 10, lambda y: y * 2, x),
                   (mg.tensor([1.0, 2.0]),), (mg.tensor([1.0, 1.0]),))
    assert y.tolist() == [4.0, 8.0] and dy.tolist() == [4.0, 4.0]
    x, v = np.array([0.5, 0.2, 0.4]), np.array([1.0, -2.0, 0.5])
    wl, wt = (lambda a: _wl(mg, a)), (lambda a: _wl(torch, a))
    np.testing.assert_allclose(_tnp(mg.jacfwd(wl)(mg.tensor(x))), tfunc.jacfwd(wt)(_t(x)).numpy())
    # a loop that closes over the differentiated argument, with a counter and a float loop var
    def pw(L, a):
        if L is mg:
            return mg.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, mg.sin(y) * a), [0, a])[1]
        i, y = 0, a
        while i < 3:
            i, y = i + 1, torch.sin(y) * a
        return y
    np.testing.assert_allclose(_tnp(mg.jvp(lambda a: pw(mg, a), (mg.tensor(x),), (mg.tensor(v),))[1]),
                               tfunc.jvp(lambda a: pw(torch, a), (_t(x),), (_t(v),))[1].numpy(), rtol=1e-12)
    X = np.array([[0.5, 0.2, 0.4], [1.0, 2.0, 3.0], [0.1, 0.1, 0.1]])
    want = np.stack([tfunc.jvp(wt, (_t(r),), (_t(v),))[1].numpy() for r in X])
    np.testing.assert_allclose(_tnp(mg.vmap(lambda a: mg.jvp(wl, (a,), (mg.tensor(v),))[1])(mg.tensor(X))), want)
    np.testing.assert_allclose(_tnp(mg.jvp(mg.vmap(wl), (mg.tensor(X),), (mg.tensor(np.tile(v, (3, 1))),))[1]),
                               want)
    # on Symbols: the loop over the values and their tangents is one while node
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float64, (3,), name='p')
        _, dp = mg.jvp(wl, (p,), (v,))
    np.testing.assert_allclose(mg.Session(g).run(dp, {p: x}), tfunc.jvp(wt, (_t(x),), (_t(v),))[1].numpy())


@needs_torch
def test_vmap_of_every_jacobian():
    vf = lambda L, w: L.sin(w) * w * w.sum()
    X = np.array([[1.0, 2.0, 0.5], [0.3, -0.7, 1.1]])
    want = tfunc.vmap(tfunc.jacrev(lambda w: vf(torch, w)))(_t(X)).numpy()
    for J in (mg.jacrev, mg.func.jacrev, mg.jacfwd, mg.func.jacfwd):
        np.testing.assert_allclose(_tnp(mg.vmap(J(lambda w: vf(mg, w)))(mg.tensor(X))), want, rtol=1e-12,
                                   err_msg=J.__module__ + '.' + J.__name__)


@needs_torch
def test_hessian_by_argnums():
    f = lambda L, x, y: (x * y * y).sum() + (L.sin(x) * y).sum() * x.sum()
    x, y = np.array([1.0, 2.0, 0.5]), np.array([0.3, -1.0, 2.0])
    mgf, tf = (lambda a, b: f(mg, a, b)), (lambda a, b: f(torch, a, b))
    want = tfunc.hessian(tf, argnums=1)(_t(x), _t(y)).numpy()
    np.testing.assert_allclose(_tnp(mg.hessian(mgf, argnums=1)(mg.tensor(x), mg.tensor(y))), want, rtol=1e-12)
    np.testing.assert_allclose(_tnp(mg.hessian(lambda a, b: (a * b * b).sum(), argnums=1)(mg.tensor(x), mg.tensor(y))),
                               np.diag(2 * x))
    got = mg.hessian(mgf, argnums=(0, 1))(mg.tensor(x), mg.tensor(y))
    want = tfunc.hessian(tf, argnums=(0, 1))(_t(x), _t(y))
    assert len(got) == 2 and all(len(r) == 2 for r in got)
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(_tnp(got[i][j]), want[i][j].numpy(), rtol=1e-12, err_msg=f'block {i}{j}')
    # keyword arguments pass through, not differentiated (torch.func.hessian takes none: a closure there)
    np.testing.assert_allclose(_tnp(mg.hessian(lambda a, k=1.0: (a ** 3 * k).sum())(mg.tensor(x), k=2.0)),
                               tfunc.hessian(lambda a: (a ** 3 * 2.0).sum())(_t(x)).numpy())
    with pytest.raises(mg.MinigradError, match='argnums 2'):
        mg.hessian(mgf, argnums=2)(mg.tensor(x), mg.tensor(y))


@needs_torch
def test_per_example_gradients_of_a_classifier_with_batched_integer_targets():
    rng = np.random.default_rng(8)
    W, b = rng.standard_normal((3, 4)), rng.standard_normal(3)
    X, Y = rng.standard_normal((5, 4)), np.array([0, 2, 1, 1, 2])
    ce = mg.nn.CrossEntropyLoss()

    def loss(L, p, x, y):                       # one example: logits (1, 3), target (1,)
        logits = (x @ p['W'].T + p['b'])[None]
        return ce(logits, y[None]) if L is mg else torch.nn.functional.cross_entropy(logits, y[None])

    def picked(L, p, x, y):                     # -log_softmax(logits)[y]: indexing with the batched target
        lp = L.log_softmax(x @ p['W'].T + p['b'], -1) if L is torch else mg.log_softmax(x @ p['W'].T + p['b'])
        return -(lp[y] if L is mg else lp[y[None]][0])
    P = {'W': mg.tensor(W), 'b': mg.tensor(b)}
    T = {'W': _t(W), 'b': _t(b)}
    Yt = torch.tensor(Y)
    for fn in (loss, picked):
        want = tfunc.vmap(tfunc.grad(lambda p, x, y: fn(torch, p, x, y)), in_dims=(None, 0, 0))(T, _t(X), Yt)
        got = mg.vmap(mg.grad(lambda p, x, y: fn(mg, p, x, y)), in_axes=(None, 0, 0))(P, mg.tensor(X), mg.tensor(Y))
        for k in P:
            np.testing.assert_allclose(_tnp(got[k]), want[k].numpy(), rtol=1e-12, err_msg=f'{fn.__name__} {k}')
        want = tfunc.vmap(lambda x, y: fn(torch, T, x, y))(_t(X), Yt).numpy()
        np.testing.assert_allclose(_tnp(mg.vmap(lambda x, y: fn(mg, P, x, y))(mg.tensor(X), mg.tensor(Y))), want,
                                   rtol=1e-12)
    # a batched index into an unbatched table (an embedding), several per example, and among other indices
    E, I = rng.standard_normal((6, 3)), rng.integers(-6, 6, size=(5, 2))
    np.testing.assert_array_equal(_tnp(mg.vmap(lambda i: mg.tensor(E)[i])(mg.tensor(I))), E[I])
    A = rng.standard_normal((5, 2, 3, 6))
    np.testing.assert_array_equal(_tnp(mg.vmap(lambda a, i: a[1, :, i])(mg.tensor(A), mg.tensor(I))),
                                  np.stack([a[1, :, i] for a, i in zip(A, I)]))
    # on Symbols, and out-of-range indices refused (eagerly, or when the graph runs)
    g = mg.Graph()
    with g.as_default():
        x, y = mg.placeholder(mg.float64, (5, 4), name='x'), mg.placeholder(mg.int64, (5,), name='y')
        out = mg.vmap(lambda a, i: a[i])(x, y)
        l = mg.vmap(lambda a, i: ce(a[None], i[None]))(x[:, :3], y)
    res = mg.Session(g).run([out, l], {x: X, y: Y})
    np.testing.assert_array_equal(res[0], X[np.arange(5), Y])
    np.testing.assert_allclose(res[1], tfunc.vmap(lambda a, i: torch.nn.functional.cross_entropy(a[None], i[None]))(
        _t(X[:, :3]), Yt).numpy(), rtol=1e-12)
    with pytest.raises(mg.MinigradError, match=r'\[-4, 4\)'):
        mg.Session(g).run(out, {x: X, y: Y + 3})
    with pytest.raises(mg.MinigradError, match=r'\[-4, 4\)'):
        mg.vmap(lambda a, i: a[i])(mg.tensor(X), mg.tensor(Y + 3))
    with pytest.raises(mg.MinigradError, match=r'\[0, 3\)'):
        mg.vmap(lambda a, i: ce(a[None], i[None]))(mg.tensor(X[:, :3]), mg.tensor(Y + 1))
    with pytest.raises(mg.MinigradError, match='integers'):
        mg.vmap(lambda a, i: a[i])(mg.tensor(X), mg.tensor(Y * 1.0))


@needs_torch
def test_grad_of_a_function_constant_in_its_argument_is_zero():
    x, v = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    lin = lambda L, z: (2.0 * z).sum()
    want = tfunc.grad(lambda a: tfunc.jvp(lambda z: lin(torch, z), (a,), (_t(v),))[1])(_t(x)).numpy(force=True)
    got = mg.grad(lambda a: mg.jvp(lambda z: lin(mg, z), (a,), (mg.tensor(v),))[1])(mg.tensor(x))
    np.testing.assert_array_equal(_tnp(got), want)
    for const in (lambda a: mg.tensor(3.0), lambda a: 3.0, lambda a: mg.tensor(v).sum()):
        g = mg.grad(const)(mg.tensor(x))
        assert g.dtype == mg.float64 and g.tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(_tnp(mg.vmap(mg.grad(lambda a: mg.tensor(3.0)))(mg.tensor(np.ones((3, 2))))),
                                  np.zeros((3, 2)))
    np.testing.assert_array_equal(_tnp(mg.hessian(lambda a: lin(mg, a))(mg.tensor(x))),
                                  tfunc.hessian(lambda a: lin(torch, a))(_t(x)).numpy())
    w = mg.tensor(v, requires_grad=True)        # a captured Tensor: zero by x, and still on the tape
    value, g = mg.value_and_grad(lambda a: (w * w).sum())(mg.tensor(x))
    value.backward()
    assert g.tolist() == [0.0, 0.0] and w.grad.tolist() == (2 * v).tolist()
    # a value of an enclosing vmap or jvp may depend on the argument unseen: still refused
    with pytest.raises(mg.MinigradError, match='enclosing vmap or jvp'):
        mg.vmap(lambda y: mg.grad(lambda a: (y * y).sum())(mg.tensor(x)))(mg.tensor(np.ones((3, 2))))
    with pytest.raises(mg.MinigradError, match='enclosing vmap or jvp'):
        mg.jvp(lambda y: mg.grad(lambda a: (y * y).sum())(mg.tensor(x)), (mg.tensor(v),), (mg.tensor(v),))


def _branchy(x):
    if x.sum() > 0:
        return (x * x).sum()
    return x.sum()


@pytest.mark.parametrize('case', ['if', 'float', 'item', 'jit'])
@needs_torch
def test_grad_of_python_control_flow_says_what_to_do(case):
    fn = {'if': _branchy, 'float': lambda x: x.sum() * float(x.sum()), 'item': lambda x: x.sum() * x.sum().item(),
          'jit': mg.jit(_branchy)}[case]
    with pytest.raises(mg.GradError) as e:
        mg.grad(fn)(mg.tensor([1.0, 2.0]))
    msg = str(e.value)
    assert 'sess.run' not in msg and 'mg.where' in msg and 'mg.cond' in msg and 'requires_grad' in msg
    assert ('_branchy' in msg and "'less'" in msg) if case in ('if', 'jit') else ("'sum'" in msg and case in msg)
    x = mg.tensor([1.0, 2.0], requires_grad=True)      # the tape, as the message says
    fn(x).backward()
    want = tfunc.grad(_branchy)(_t([1.0, 2.0])).numpy() if case in ('if', 'jit') else [3.0, 3.0]
    np.testing.assert_allclose(_tnp(x.grad), want)


def test_while_loop_with_a_constant_loop_var_whose_body_reads_the_argument():
    f = lambda x: mg.while_loop(lambda c: c < 10.0, lambda c: c + x.sum(), mg.tensor(0.0, dtype=mg.float64))
    x = np.array([1.0, 2.0])
    w = mg.tensor(x, requires_grad=True)
    f(w).backward()                                     # the tape: 4 iterations, d/dx = 4
    np.testing.assert_allclose(_tnp(w.grad), [4.0, 4.0])
    np.testing.assert_allclose(_tnp(mg.grad(f)(mg.tensor(x))), [4.0, 4.0])
    np.testing.assert_allclose(_tnp(mg.jit(f)(mg.tensor(x))), 12.0)
    np.testing.assert_allclose(_tnp(mg.jvp(f, (mg.tensor(x),), (mg.tensor([1.0, 0.0]),))[1]), 4.0)
    np.testing.assert_allclose(_tnp(mg.vmap(mg.grad(f))(mg.tensor([x, 2 * x]))), [[4.0, 4.0], [2.0, 2.0]])


def test_vmap_of_a_while_loop_with_a_number_loop_var_on_symbols():
    counter = lambda x: mg.while_loop(lambda c: c < 3, lambda c: c + 1, 0) * x
    reads = lambda x: mg.while_loop(lambda c: c < 3.0, lambda c: c + x.sum(), 0.0)
    X = np.arange(6.0, dtype=np.float32).reshape(3, 2)     # (a float loop var starting at 0.0 is float32)
    for f, want in ((counter, 3 * X), (reads, [3.0, 5.0, 9.0])):
        np.testing.assert_allclose(_tnp(mg.vmap(f)(mg.tensor(X))), want)
        g = mg.Graph()
        with g.as_default():
            p = mg.placeholder(mg.float32, (3, 2), name='p')
            out = mg.vmap(f)(p)
        np.testing.assert_allclose(mg.Session(g).run(out, {p: X}), want)
    # nested: the inner vmap's loop runs on arrays the outer vmap still batches
    XX = np.stack([X, 2 * X])
    np.testing.assert_allclose(_tnp(mg.vmap(mg.vmap(reads))(mg.tensor(XX))), [[3.0, 5.0, 9.0], [4.0, 10.0, 18.0]])


@needs_torch
def test_one_pass_jacobians_and_hessian_through_while_loop():
    x = np.array([0.5, 0.2, 0.4])
    wl, wt = (lambda a: _wl(mg, a)), (lambda a: _wl(torch, a))
    want = tfunc.jacrev(wt)(_t(x)).numpy()
    np.testing.assert_allclose(want, 16 * np.eye(3))
    for J in (mg.func.jacrev, mg.func.jacfwd, mg.jacrev, mg.jacfwd):
        np.testing.assert_allclose(_tnp(J(wl)(mg.tensor(x))), want, err_msg=J.__module__ + '.' + J.__name__)
    # the loop closes over the argument: its Hessian is not diagonal
    def sq(L, a):
        return (_wl(L, a * a.sum()) ** 2).sum()
    want = tfunc.hessian(lambda a: sq(torch, a))(_t(x)).numpy()
    np.testing.assert_allclose(_tnp(mg.hessian(lambda v: (wl(v) ** 2).sum())(mg.tensor(x))), 512 * np.eye(3))
    np.testing.assert_allclose(_tnp(mg.hessian(lambda a: sq(mg, a))(mg.tensor(x))), want, rtol=1e-12)
    pw = lambda a: mg.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, mg.sin(y) * a), [0, a])[1].sum()

    def pt(a):
        y = a
        for _ in range(3):
            y = torch.sin(y) * a
        return y.sum()
    np.testing.assert_allclose(_tnp(mg.hessian(pw)(mg.tensor(x))), tfunc.hessian(pt)(_t(x)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(_tnp(mg.jacfwd(mg.hessian(pw))(mg.tensor(x))),
                               tfunc.jacfwd(tfunc.hessian(pt))(_t(x)).numpy(), rtol=1e-12)
    # on Symbols, inside mg.jit and under mg.vmap (each example stops after its own iterations)
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float64, (3,), name='p')
        J = mg.func.jacrev(wl)(p)
        with pytest.raises(mg.MinigradError, match='not on Symbols'):    # a Hessian: on values only
            mg.hessian(lambda a: sq(mg, a))(p)
    np.testing.assert_allclose(mg.Session(g).run(J, {p: x}), 16 * np.eye(3))
    np.testing.assert_allclose(_tnp(mg.jit(mg.func.jacrev(wl))(mg.tensor(x))), 16 * np.eye(3))
    X = np.stack([x, 2 * x])
    want = np.stack([tfunc.jacrev(wt)(_t(r)).numpy() for r in X])
    for J in (mg.func.jacrev, mg.func.jacfwd):
        np.testing.assert_allclose(_tnp(mg.vmap(J(wl))(mg.tensor(X))), want)
    H = mg.vmap(mg.func.jacfwd(mg.func.jacfwd(lambda a: sq(mg, a))))(mg.tensor(X))
    np.testing.assert_allclose(_tnp(H), np.stack([tfunc.hessian(lambda a: sq(torch, a))(_t(r)).numpy() for r in X]),
                               rtol=1e-12)
    with pytest.raises(mg.MinigradError, match='forward mode'):      # (its saved iterations are per example)
        mg.vmap(mg.hessian(lambda a: sq(mg, a)))(mg.tensor(X))


@needs_torch
def test_vmap_conversions_keyword_arguments_and_number_aux():
    X = np.arange(6.0).reshape(2, 3)
    # len() is one example's length (shapes are the same for every example), as jax and torch.func
    np.testing.assert_array_equal(_tnp(mg.vmap(lambda x: x * len(x))(mg.tensor(X))),
                                  tfunc.vmap(lambda x: x * len(x))(_t(X)).numpy())
    assert [r.tolist() for r in mg.vmap(lambda x: mg.stack(list(x)[::-1]))(mg.tensor(X))] == [[2, 1, 0], [5, 4, 3]]
    for what, fn in (('float()', lambda x: float(x.sum())), ('item()', lambda x: x.sum().item()),
                     ('numpy()', lambda x: x.numpy()), ('tolist()', lambda x: x.tolist()),
                     ('int()', lambda x: int(x[0])), ('numpy array', lambda x: np.asarray(x))):
        with pytest.raises(mg.MinigradError, match=f'{re.escape(what)}.*one per example'):
            mg.vmap(fn)(mg.tensor(X))
    with pytest.raises(mg.MinigradError, match='len'):
        mg.vmap(lambda x: len(x))(mg.tensor(X[:, 0]))          # a 0-d example has no length
    # keyword arguments pass through unbatched and undifferentiated (as torch.func)
    f = lambda L, x, k=1.0, w=None: (x * k + w).sum() if L is mg else (x * k + w).sum()
    w = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(_tnp(mg.vmap(lambda x, k=1.0, w=None: f(mg, x, k, w))(mg.tensor(X), k=2.0,
                                                                                     w=mg.tensor(w))),
                               tfunc.vmap(lambda x, k=1.0, w=None: f(torch, x, k, w))(_t(X), k=2.0, w=_t(w)).numpy())
    tg = tfunc.grad(lambda x, k=1.0, w=None: f(torch, x, k, w))(_t(X[0]), k=2.0, w=_t(w)).numpy()
    np.testing.assert_allclose(_tnp(mg.grad(lambda x, k=1.0, w=None: f(mg, x, k, w))(mg.tensor(X[0]), k=2.0,
                                                                                    w=mg.tensor(w))), tg)
    np.testing.assert_allclose(_tnp(mg.vmap(mg.grad(lambda x, k=1.0, w=None: f(mg, x, k, w)))(
        mg.tensor(X), k=2.0, w=mg.tensor(w))), np.stack([tg, tg]))
    wt = mg.tensor(w, requires_grad=True)          # a Tensor by keyword stays on the tape
    v, _ = mg.value_and_grad(lambda x, w=None: f(mg, x, 1.0, w))(mg.tensor(X[0]), w=wt)
    v.backward()
    assert wt.grad.tolist() == [1.0, 1.0, 1.0]
    # has_aux with plain data in the aux (jax allows it; torch.func wants Tensors): returned as it is
    g, aux = mg.grad(lambda x: ((x * x).sum(), {'n': 3.0, 'tag': 'sq', 'y': x * 2}), has_aux=True)(mg.tensor(X[0]))
    assert g.tolist() == (2 * X[0]).tolist() and aux['n'] == 3.0 and aux['tag'] == 'sq'
    assert aux['y'].tolist() == (2 * X[0]).tolist()
    # mg.vmap of a mg.jit function with a graph break: each example through the guards
    np.testing.assert_allclose(_tnp(mg.vmap(mg.jit(_branchy))(mg.tensor(np.stack([X[0], -X[1]])))),
                               [_branchy(mg.tensor(X[0])).item(), _branchy(mg.tensor(-X[1])).item()])


def test_vmap_of_an_empty_batch_and_of_no_batched_argument():
    Z = np.zeros((0, 2, 3))
    assert mg.vmap(lambda x: x.reshape(-1))(mg.tensor(Z)).shape == (0, 6)            # jax: (0, 6)
    assert mg.vmap(lambda x: x.reshape(3, -1).sum(-1))(mg.tensor(Z)).shape == (0, 3)
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float64, (0, 2, 3), name='p')
        out = mg.vmap(lambda x: x.reshape(-1))(p)
    assert out.shape == (0, 6) and mg.Session(g).run(out, {p: Z}).shape == (0, 6)
    X = np.ones((2, 3))
    for axes, args in ((None, (X,)), ((None, None), (X, X)), (0, ())):
        with pytest.raises(mg.MinigradError, match='at least one'):
            mg.vmap(lambda *a: a[0] * 2 if a else 1.0, in_axes=axes)(*[mg.tensor(a) for a in args])


# =====================================================================================
# Named cases: what mg.jit captured
# =====================================================================================
# mg.jit and what it captured: every kind of value fn reads besides its arguments, changed after the first
# call, gives the eager result (a guard retraces, or the graph reads the value on every call) or a clear error;
# keyword arguments; mg.vmap of a jit function with graph breaks.

X = np.array([0.5, -1.5], np.float32)

# module-level state the cases read as globals
T_GLOBAL = mg.tensor([1.0, 1.0])
K_HELPER = 2.0
T_HELPER = mg.tensor([1.0, 1.0])
A_GLOBAL = np.array([1.0, 1.0], np.float32)
S_NUMPY = np.float32(2.0)


def add_global_tensor(x):
    return x + T_GLOBAL


def scale_by_k(x):
    return x * K_HELPER


def calls_scale_by_k(x):
    return scale_by_k(x) + 1.0


def times_t_helper(x):
    return x * T_HELPER


def calls_times_t_helper(x):
    return times_t_helper(x) + 1.0


def double(x):
    return x * 2.0


def calls_double(x):
    return double(x) + 1.0


def add_global_array(x):
    return x + A_GLOBAL


def times_numpy_scalar(x):
    return x * S_NUMPY


def set_global(name, value):
    return lambda: globals().__setitem__(name, value)


@pytest.fixture(autouse=True)
def restore_globals():
    saved = {k: globals()[k] for k in ('T_GLOBAL', 'K_HELPER', 'T_HELPER', 'A_GLOBAL', 'S_NUMPY', 'double')}
    yield
    globals().update(saved)


def module_with(value, forward):
    class M(mg.nn.Module):
        def __init__(self):
            super().__init__()
            self.value = value
    M.forward = forward
    return M()


# each case: () -> (fn, change); fn is jitted, called on X, change() runs, and the next call must be eager's
CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


@case
def closure_tensor_rebound():
    T = mg.tensor([1.0, 1.0])

    def change():
        nonlocal T
        T = mg.tensor([5.0, 5.0])
    return (lambda x: x + T), change


@case
def global_tensor_rebound():
    return add_global_tensor, set_global('T_GLOBAL', mg.tensor([5.0, 5.0]))


@case
def module_float_attribute():
    m = module_with(2.0, lambda self, x: x * self.value)
    return m, lambda: setattr(m, 'value', 3.0)


@case
def module_int_attribute_loop_count():
    def forward(self, x):
        for _ in range(self.value):
            x = x * 2.0
        return x
    m = module_with(2, forward)
    return m, lambda: setattr(m, 'value', 3)


@case
def module_str_attribute_branch():
    m = module_with('relu', lambda self, x: mg.relu(x) if self.value == 'relu' else mg.tanh(x))
    return m, lambda: setattr(m, 'value', 'tanh')


@case
def submodule_attribute():
    inner = module_with(2.0, lambda self, x: x * self.value)
    outer = module_with(inner, lambda self, x: self.value(x) + 1.0)
    return outer, lambda: setattr(inner, 'value', 3.0)


@case
def module_parameters_change_dtype():
    m = mg.nn.Linear(2, 2)
    return m, m.double


@case
def helper_reads_global_scalar():
    return calls_scale_by_k, set_global('K_HELPER', 3.0)


@case
def helper_reads_global_tensor():
    return calls_times_t_helper, set_global('T_HELPER', mg.tensor([5.0, 5.0]))


@case
def helper_rebound():
    return calls_double, set_global('double', lambda x: x * 3.0)


@case
def function_under_mg_grad_reads_dict_item():
    cfg = {'k': 2.0}
    return mg.grad(lambda w: (w * w * cfg['k']).sum()), lambda: cfg.__setitem__('k', 3.0)


@case
def function_under_mg_vmap_reads_global():
    return mg.vmap(calls_scale_by_k), set_global('K_HELPER', 3.0)


@case
def dict_item_scalar():
    cfg = {'k': 2.0}
    return (lambda x: x * cfg['k']), lambda: cfg.__setitem__('k', 3.0)


@case
def dict_item_tensor():
    d = {'w': mg.tensor([1.0, 1.0])}
    return (lambda x: x + d['w']), lambda: d.__setitem__('w', mg.tensor([5.0, 5.0]))


@case
def nested_dict_item():
    cfg = {'opt': {'lr': 0.5}}
    return (lambda x: x * cfg['opt']['lr']), lambda: cfg['opt'].__setitem__('lr', 0.25)


@case
def list_item_scalar():
    ks = [2.0]
    return (lambda x: x * ks[0]), lambda: ks.__setitem__(0, 3.0)


@case
def list_item_tensor():
    ts = [mg.tensor([1.0, 1.0])]
    return (lambda x: x + ts[0]), lambda: ts.__setitem__(0, mg.tensor([5.0, 5.0]))


@case
def list_grows():
    ks = [2.0]

    def f(x):
        for k in ks:
            x = x * k
        return x
    return f, lambda: ks.append(3.0)


@case
def class_attribute():
    class C:
        k = 2.0
    return (lambda x: x * C.k), lambda: setattr(C, 'k', 3.0)


@case
def class_attribute_read_through_an_instance():
    class C:
        k = 2.0
    obj = C()
    return (lambda x: x * obj.k), lambda: setattr(C, 'k', 3.0)


@case
def class_method_replaced():
    class C:
        def scale(self, x):
            return x * 2.0
    obj = C()
    return (lambda x: obj.scale(x)), lambda: setattr(C, 'scale', lambda self, x: x * 3.0)


@case
def property_reads_attribute():
    class C:
        def __init__(self):
            self._k = 2.0

        @property
        def k(self):
            return self._k
    obj = C()
    return (lambda x: x * obj.k), lambda: setattr(obj, '_k', 3.0)


@case
def super_method_reads_attribute():
    class Base(mg.nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2.0

        def forward(self, x):
            return x * self.k

    class Child(Base):
        def forward(self, x):
            return super().forward(x) + 1.0
    m = Child()
    return m, lambda: setattr(m, 'k', 3.0)


@case
def bound_method():
    class C:
        k = 2.0

        def f(self, x):
            return x * self.k
    obj = C()
    return obj.f, lambda: setattr(obj, 'k', 3.0)


@case
def object_attribute():
    cfg = types.SimpleNamespace(k=2.0)
    return (lambda x: x * cfg.k), lambda: setattr(cfg, 'k', 3.0)


@case
def user_module_attribute():
    cfg = types.ModuleType('user_config')
    cfg.k = 2.0
    return (lambda x: x * cfg.k), lambda: setattr(cfg, 'k', 3.0)


@case
def function_default():
    def f(x, k=2.0):
        return x * k
    return f, lambda: setattr(f, '__defaults__', (3.0,))


@case
def function_keyword_only_default():
    def f(x, *, k=2.0):
        return x * k
    return f, lambda: setattr(f, '__kwdefaults__', {'k': 3.0})


@case
def helper_default():
    def helper(x, k=2.0):
        return x * k
    return (lambda x: helper(x) + 1.0), lambda: setattr(helper, '__defaults__', (3.0,))


@case
def partial_keyword():
    def f(x, k):
        return x * k
    p = functools.partial(f, k=2.0)
    return p, lambda: p.keywords.__setitem__('k', 3.0)


@case
def numpy_array_changed_in_place():
    A = np.array([1.0, 1.0], np.float32)
    return (lambda x: x + A), lambda: A.__setitem__(Ellipsis, 5.0)


@case
def numpy_array_rebound():
    return add_global_array, set_global('A_GLOBAL', np.array([5.0, 5.0], np.float32))


@case
def numpy_array_read_by_numpy():
    A = np.array([0.0, 0.0], np.float32)
    return (lambda x: x * np.exp(A)), lambda: A.__setitem__(Ellipsis, 1.0)


@case
def numpy_scalar_rebound():
    return times_numpy_scalar, set_global('S_NUMPY', np.float32(3.0))


@case
def tensor_read_by_item():
    T = mg.tensor(2.0)
    return (lambda x: x * T.item()), lambda: T.data.__setitem__(Ellipsis, 3.0)


def eager(fn, x):
    return np.asarray(fn(mg.tensor(x)).data)


@pytest.mark.parametrize('name', list(CASES))
def test_what_jit_captured_changed_after_the_first_call(name):
    fn, change = CASES[name]()
    jf = mg.jit(fn)
    np.testing.assert_allclose(jf(X), eager(fn, X), rtol=1e-6)
    change()
    got, want = np.asarray(jf(X)), eager(fn, X)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for _ in range(3):                      # nothing changed since: no more traces
        jf(X)
    assert jf.trace_count == (1 if name == 'numpy_array_changed_in_place' else 2)


def test_the_new_guards_are_listed_by_explain():
    m = module_with(2.0, lambda self, x: calls_scale_by_k(x) * self.value + T_GLOBAL + A_GLOBAL)
    cfg = {'k': 0.5}
    jf = mg.jit(lambda x, s=1.0: m(x) * cfg['k'] * s)
    jf(X)
    text = jf.explain()
    for words in ['m.value == 2.0 (float, closed over by <lambda>)', 'K_HELPER == 2.0 (float, global of scale_by_k)',
                  "cfg['k'] == 0.5 (float, closed over by <lambda>)", 'len(cfg) == 1', 'T_GLOBAL is Tensor float32 (2,)',
                  '<lambda>.__defaults__ is (1.0,)', 'A_GLOBAL is numpy array float32 (2,)', 'scale_by_k is',
                  'A_GLOBAL = placeholder()']:          # the array is read by the graph on every call
        assert words in text, words
    assert 'def check():' in jf.entries[0].reads.source


def test_a_loop_of_100_unchanged_calls_traces_once():
    m = module_with(2.0, lambda self, x: calls_scale_by_k(x) * self.value + T_GLOBAL + A_GLOBAL)
    cfg, ks = {'k': 0.5}, [1.0, 2.0]
    lin = mg.nn.Linear(2, 2)
    jf = mg.jit(lambda x, s=1.0: lin(m(x) * cfg['k'] * s * ks[1]))
    for i in range(100):
        jf(X + i)
    assert (jf.trace_count, jf.hits, jf.guard_failures) == (1, 99, 0)


def test_side_effects_of_tracing_are_not_guarded():
    log = []

    def f(x):
        log.append(1)            # runs while tracing only, as under jax.jit
        return x * 2.0
    jf = mg.jit(f)
    for _ in range(5):
        jf(X)
    assert jf.trace_count == 1 and log == [1]
    assert 'not guarded (fn changed it while tracing): len(log) == 1' in jf.explain()


ITERATOR = iter([1.0, 2.0])
RNG = np.random.default_rng(0)
BIG = [1.0] * 1000
BIG_ARRAY = np.ones((600, 600), np.float32)


@pytest.mark.parametrize('fn, words', [
    (lambda x: x * next(ITERATOR), ['reads ITERATOR', 'an iterator', 'next(ITERATOR)']),
    (lambda x: x + RNG.normal(), ['reads RNG', 'random number generator', 'pass them']),
    (lambda x: x * BIG[3], ['reads BIG', 'a list of 1000 items', 'np.asarray(BIG)']),
    (lambda x: x * float(BIG_ARRAY.sum()), ['reads BIG_ARRAY', 'over 1 MB, in Python', '(x, BIG_ARRAY)']),
])
def test_what_cannot_be_guarded_is_refused_with_the_way_to_pass_it(fn, words):
    with pytest.raises(mg.MinigradError) as info:
        mg.jit(fn)(X)
    for w in words + ['as an argument']:
        assert w in str(info.value), (w, str(info.value))


def test_a_large_array_the_graph_reads_is_fed_not_compared():
    jf = mg.jit(lambda x: x @ BIG_ARRAY)
    x = np.ones((1, 600), np.float32)
    jf(x)
    BIG_ARRAY[0, 0] = 5.0
    try:
        np.testing.assert_allclose(jf(x)[0, :2], [604.0, 600.0])
    finally:
        BIG_ARRAY[0, 0] = 1.0
    assert jf.trace_count == 1 and 'holds the values seen' not in jf.explain()


def test_keyword_arguments_are_guarded_like_positional_scalars():
    def f(x, k=1.0, mode='mul'):
        return x * k if mode == 'mul' else x + k
    jf = mg.jit(f)
    np.testing.assert_allclose(jf(X, k=2.0), X * 2)
    np.testing.assert_allclose(jf(X + 1, k=2.0), (X + 1) * 2)
    assert jf.trace_count == 1 and jf.hits == 1
    np.testing.assert_allclose(jf(X, k=3.0), X * 3)
    np.testing.assert_allclose(jf(X, k=2.0, mode='add'), X + 2)
    np.testing.assert_allclose(jf(X, mode='add', k=2.0), X + 2)          # the same entry, in any order
    assert jf.trace_count == 3
    assert "k == 2.0 (float)" in jf.explain() and "mode == 'add' (str)" in jf.explain()
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    y = jf(X, k=w)                       # a Tensor by keyword: an input, and derivatives flow
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), X)


def branchy(x):
    if x.sum() > 0:
        return x * x
    return x - 1.0


def test_vmap_of_jit_with_a_graph_break_runs_each_example_through_the_guards():
    xs = np.array([[1.0, 2.0], [-3.0, -4.0], [0.5, 0.5]], np.float32)
    jf = mg.jit(branchy)
    want = np.stack([branchy(mg.tensor(r)).numpy() for r in xs])
    np.testing.assert_allclose(mg.vmap(jf)(xs).numpy(), want)
    assert jf.trace_count == 2 and jf.hits == 1             # one entry per branch
    t = mg.tensor(xs, requires_grad=True)
    mg.vmap(jf)(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.where(xs.sum(1, keepdims=True) > 0, 2 * xs, 1.0))
    a = np.arange(12, dtype=np.float32).reshape(2, 3, 2) - 5
    np.testing.assert_allclose(mg.vmap(mg.vmap(jf))(a).numpy(), np.stack([[branchy(mg.tensor(r)).numpy()
                                                                            for r in b] for b in a]))
    smooth = mg.jit(lambda x: (x * 2.0).sum())              # no break: one batched pass
    np.testing.assert_allclose(mg.vmap(smooth)(xs).numpy(), xs.sum(1) * 2)


def test_a_jit_function_first_called_under_no_grad_still_differentiates():
    """The trace ignores an outer no_grad (as mg.grad does): a graph traced under it must not be a graph of
    stop_gradients that a later backward goes through silently as zeros."""
    f = mg.jit(lambda x: (x * x * 3.0).sum())
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with mg.no_grad():
        assert f(x).item() == 15.0
    f(x).backward()
    assert x.grad.tolist() == [6.0, 12.0] and f.trace_count == 1
    g = mg.jit(lambda x: mg.stop_gradient(x * x).sum() + x.sum())       # a stop_gradient inside stays one
    x.grad = None
    g(x).backward()
    assert x.grad.tolist() == [1.0, 1.0]


@pytest.mark.parametrize('symbolic', [True, False])
def test_a_function_traced_under_no_grad_still_differentiates(symbolic):
    with mg.no_grad():
        t = mg.trace(lambda x: (x * x * 3.0).sum(), np.array([1.0, 2.0], np.float32), symbolic=symbolic)
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    t(x).backward()
    assert x.grad.tolist() == [6.0, 12.0]
    inner = mg.trace(lambda x: mg.stop_gradient(x * x).sum() + x.sum(), np.array([1.0, 2.0], np.float32),
                     symbolic=symbolic)
    x.grad = None
    inner(x).backward()
    assert x.grad.tolist() == [1.0, 1.0]


# =====================================================================================
# Named cases: numerics (sigmoid, dtypes, Python ints, float16, kernel caches)
# =====================================================================================
# Numerics without a tail: sigmoid's relative precision, numpy's result dtypes, numpy 2's exact Python ints in
# graphs, Variables of any layout, float16 and damaged kernel caches on the numba backend. One test per defect,
# each against numpy or PyTorch where they define the answer.

# sigmoid's error against the correctly rounded value, max ulps (scripts/ulp_error.py --only sigmoid measures
# every float32 and random float64s: 4 and 2 on numpy's exp, 2 and 2 in loop kernels; sigmoid's docstring says so)
SIGMOID_ULPS = {np.float32: 4, np.float64: 2}


def ulps(got, ref):
    """Distance in ulps (adjacent floats: 1; -0.0 and 0.0: 0)."""
    it = np.int32 if got.dtype == np.float32 else np.int64
    def ordered(v):
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, -(i & np.iinfo(it).max), i)
    return np.abs(ordered(got) - ordered(ref))


def compiled(fn, *arrays, backend='numpy'):
    """fn of placeholders shaped like `arrays`, compiled and run on them: (results, program)."""
    g = mg.Graph()
    with g.as_default():
        ps = [mg.placeholder(a.dtype, a.shape, name=f'p{k}') for k, a in enumerate(arrays)]
        out = fn(*ps)
    prog = mg.compile(out, ps, backend=backend)
    return prog(*arrays), prog


def sigmoid_everywhere(x):
    """{mode: sigmoid(x)} on the tape, the graph interpreter and each backend (x * 1 keeps a kernel)."""
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(x.dtype, x.shape, name='x')
        y = mg.sigmoid(p)
    out = {'tape': mg.sigmoid(mg.tensor(x)).numpy(), 'session': mg.Session(g).run(y, {p: x})}
    for be in BACKENDS:
        out[be] = compiled(lambda a, one: mg.sigmoid(a * one), x, np.ones_like(x), backend=be)[0]
    return out


def test_sigmoid_keeps_relative_precision_for_negative_inputs():
    torch = pytest.importorskip('torch')
    x32 = np.array([-20.0, -17.0, -87.0, -0.0, 0.0, 3.0, 20.0, np.inf, -np.inf, np.nan], np.float32)
    x64 = np.array([-40.0, -700.0, -745.0, 1e-300, 37.0, 40.0], np.float64)
    for x in (x32, x64):
        want = torch.sigmoid(torch.from_numpy(x)).numpy()
        for mode, got in sigmoid_everywhere(x).items():
            assert got.dtype == x.dtype, mode
            assert np.array_equal(np.isnan(got), np.isnan(want)), mode
            fin = ~np.isnan(want)
            # torch is within a few ulps too (it flushes subnormal results, sigmoid(-100), to 0)
            assert ulps(got[fin], want[fin]).max() <= 4, (mode, got, want)
    assert mg.sigmoid(mg.tensor([-20.0])).item() == pytest.approx(2.0611537e-9, rel=1e-6)   # was 0
    # -log(sigmoid(x)) on the tape and in a graph: torch gives 77 and gradient -1 (it was inf and nan)
    t = torch.tensor([-77.0, -5.0, 0.0, 30.0], requires_grad=True)
    (-torch.log(torch.sigmoid(t))).sum().backward()
    x = mg.tensor([-77.0, -5.0, 0.0, 30.0], requires_grad=True)
    loss = -mg.log(mg.sigmoid(x))
    loss.sum().backward()
    np.testing.assert_allclose(loss.numpy(), (-torch.log(torch.sigmoid(t))).detach().numpy(), rtol=1e-6)
    # (at 30 the exact gradient -exp(-30) = -9.4e-14, which torch's s * (1 - s) rounds to -0.0)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-12)
    g = mg.Graph()
    with g.as_default():
        p = mg.placeholder(mg.float32, (4,), name='p')
        y = (-mg.log(mg.sigmoid(p))).sum()
        (gp,) = mg.gradients(y, [p])
    for be in BACKENDS:
        v, gv = mg.compile([y, gp], [p], backend=be)(x.numpy())
        assert np.isfinite(v) and np.isfinite(gv).all(), be
        np.testing.assert_allclose(gv, t.grad.numpy(), rtol=1e-6, atol=1e-12)
    # the documented bounds, over a sample: every mode, against the correctly rounded value
    rng = np.random.default_rng(3)
    for dt, wide in ((np.float32, np.float64), (np.float64, np.longdouble)):
        bits = rng.integers(0, 2 ** 64, 1 << 17, dtype=np.uint64).astype(np.uint32 if dt == np.float32 else np.uint64)
        x = np.concatenate([bits.view(dt), np.linspace(-110, 40, 1 << 17, dtype=dt),
                            rng.uniform(-1, 1, 1 << 15).astype(dt) * 10.0 ** rng.uniform(-30, 2, 1 << 15).astype(dt)])
        x = x[np.isfinite(x)]
        with np.errstate(all='ignore'):
            true = (1 / (1 + np.exp(-x.astype(wide)))).astype(dt)
        for mode, got in sigmoid_everywhere(x).items():
            assert ulps(got, true).max() <= SIGMOID_ULPS[dt], (mode, dt)


def test_result_dtypes_follow_numpy():
    b = np.array([True, False, True])
    # numpy's ** squares by np.square: bool ** 2 is int8 (np.power(bool, 2) stays int64, and so does mg.power)
    assert (b ** 2).dtype == np.int8
    assert (mg.tensor(b) ** 2).dtype == np.int8 and (mg.tensor(b) ** 2).tolist() == (b ** 2).tolist()
    assert mg.power(mg.tensor(b), 2).dtype == np.power(b, 2).dtype
    assert (mg.tensor(b) ** 3).dtype == (b ** 3).dtype and (2 ** mg.tensor(b)).dtype == (2 ** b).dtype
    assert compiled(lambda p: p ** 2, b)[0].dtype == np.int8
    # sigmoid of integers in the dtype numpy's exp (and tanh) gives them
    for dt in (np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64):
        a = np.array([1, 0, 1], dt)
        want = 1 / (1 + np.exp(-a.astype(np.float64)))
        for got in (mg.sigmoid(mg.tensor(a)).numpy(), compiled(mg.sigmoid, a)[0]):
            assert got.dtype == np.exp(a).dtype == mg.tanh(mg.tensor(a)).dtype, (dt, got.dtype)
            np.testing.assert_allclose(got, want, rtol=1e-3)


def test_graphs_divide_and_compare_python_ints_out_of_range_as_numpy_2():
    """numpy 2 (NEP 50) divides and compares a Python int out of the array's range exactly; a graph refused."""
    i8, u8 = np.array([1, -2, 127], np.int8), np.array([0, 7, 255], np.uint8)
    i64, u64 = np.array([2 ** 63 - 1, -2 ** 63, 0]), np.array([2 ** 64 - 1, 0, 5], np.uint64)
    cases = [(lambda a: a / 300, i8), (lambda a: 300 / a, i8), (lambda a: a < 300, i8), (lambda a: a > 300, i8),
             (lambda a: a <= -129, i8), (lambda a: a >= -129, i8), (lambda a: a == 300, i8),
             (lambda a: a != 300, i8), (lambda a: a / -1, u8), (lambda a: a < -1, u8), (lambda a: a > -1, u8),
             (lambda a: a < 2 ** 63, i64), (lambda a: a > -2 ** 63 - 1, i64), (lambda a: a < 2 ** 64, u64),
             (lambda a: a == 2 ** 64, u64), (lambda a: a < 2 ** 70, i8), (lambda a: a / 2 ** 70, i64)]
    for f, a in cases:
        with np.errstate(all='ignore'):
            want = f(a)
        got = [f(mg.tensor(a)).numpy()]
        g = mg.Graph()
        with g.as_default():
            p = mg.placeholder(a.dtype, a.shape, name='p')
            y = f(p)
        got.append(mg.Session(g).run(y, {p: a}))
        got += [mg.compile(y, [p], backend=be)(a) for be in BACKENDS]
        for r in got:
            assert r.dtype == want.dtype and np.array_equal(r, want), (a.dtype, want, r)
    # inside a loop kernel too (int64 beside 2**63, a uint64, is compared exactly, as numpy does, not in float64)
    for be in BACKENDS:
        got = compiled(lambda p, q: mg.where(p < 2 ** 63, 1.0, 2.0) * q, i64, np.ones(3), backend=be)[0]
        assert got.tolist() == [1.0, 1.0, 1.0], be
    for name, fn in (('divide', mg.divide), ('less', mg.less), ('greater', mg.greater), ('equal', mg.equal)):
        want = getattr(np, name if name != 'divide' else 'true_divide')(i8, 300)
        assert np.array_equal(compiled(lambda p: fn(p, 300), i8)[0], want), name
    with mg.Graph().as_default():            # where numpy 2 refuses, so do graphs
        p = mg.placeholder(np.int8, (3,), name='p')
        for f in (lambda: p + 300, lambda: p * 300, lambda: mg.maximum(p, 300)):
            with pytest.raises(MinigradError, match='out of range'):
                f()


@needs_numba
def test_a_variable_assigned_a_transposed_value_runs_again_on_numba():
    def program(backend, init):
        g = mg.Graph()
        with g.as_default():
            v0 = mg.Variable(init, name='v0')
            v1 = v0 / (v0 * v0 + 0.5)
            a = v0.assign(v1.T)
        return mg.compile([v1, a], [], backend=backend)
    init = np.arange(27, dtype=np.float32).reshape(3, 3, 3) / 10
    for start in (init, np.asfortranarray(init)):
        ref, prog = program('numpy', start), program('numba', start)
        for _ in range(3):
            for r, got in zip(ref(), prog()):
                assert np.array_equal(r, got)
        assert all(s.flags.c_contiguous for s in prog.state)
        prog.state[0] = ref.state[0] = np.asfortranarray(ref.state[0])      # state set from outside, F order
        assert np.array_equal(prog()[0], ref()[0])


@needs_numba
def test_float16_on_numba_computes_or_declines_per_kernel():
    h = np.array([0.5, -1.0, 2.0, -3.0], np.float16)
    b = np.array([True, False, True, False])
    cases = [(lambda x: x * x + 1.0, h), (lambda x: mg.exp(x * x), h), (lambda x: mg.log(x * x) * 2.0, h),
             (lambda x: mg.tanh(x) + x, h), (lambda x: mg.sigmoid(x * 2.0), h), (lambda x: mg.exp(x) * 2.0, b),
             (lambda x: mg.log(x) * 2.0, b), (lambda x: mg.tanh(x) * 2.0, b), (lambda x: mg.sigmoid(x) * 2.0, b),
             (lambda x: mg.exp(x) * 2.0, h.astype(np.int8)),
             (lambda x: x * np.float16(2) + 1.0, h.astype(np.float32))]
    for f, a in cases:
        with np.errstate(all='ignore'):
            want = compiled(f, a, backend='numpy')[0]
            got, prog = compiled(f, a, backend='numba')
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), (got, want)
        assert any('float16' in why for why in prog.stats['declined']['fuse'])
    # a float32 group beside float16 ops still runs as a kernel
    f = lambda x, y: mg.tanh(x * 2.0 + 1.0) * x + mg.cast(y * y + 1.0, mg.float32)       # noqa: E731
    got, prog = compiled(f, np.ones(4, np.float32), h, backend='numba')
    assert prog.stats['kernels'] == 1       # (its tanh is the kernels' approximation: a few ulps from numpy's)
    np.testing.assert_allclose(got, compiled(f, np.ones(4, np.float32), h)[0], rtol=1e-6)


@needs_numba
def test_a_damaged_kernel_cache_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv('MINIGRAD_CACHE_DIR', str(tmp_path))
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    fn = lambda a: mg.tanh(a * 1.25 + 0.5) * a                                  # noqa: E731
    want, prog = compiled(fn, x, backend='numba')
    (kern,) = prog.kernels
    cache = tmp_path / 'kernels' / '__pycache__'
    assert kern.origin == 'compiled' and len(list(cache.glob('*.nbi'))) == len(list(cache.glob('*.nbc'))) == 1
    damages = [(cache, '*.nbi', lambda b: b[:40]), (cache, '*.nbc', lambda b: b[:100]),
               (cache, '*.nbc', lambda b: b[:16] + b'\0' * 64 + b[80:]), (cache.parent, 'k_*.py', lambda b: b[:300])]
    for where, pattern, damage in damages:         # numba's index, its data (cut, overwritten), the kernel file
        (path,) = where.glob(pattern)
        path.write_bytes(damage(path.read_bytes()))
        kernels._LOADED.clear()          # as a later process: nothing loaded in memory
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            got, prog = compiled(fn, x, backend='numba')
        assert np.array_equal(got, want), path
        assert any('damaged' in str(w.message) for w in caught), path
        assert list(prog.stats['kernel_cache_repaired']) == [kern.path]
        kernels._LOADED.clear()
        with warnings.catch_warnings():
            warnings.simplefilter('error')      # repaired for good: no warning the next time
            got, prog = compiled(fn, x, backend='numba')
        assert np.array_equal(got, want) and prog.stats['kernel_cache_repaired'] == {}


# =====================================================================================
# Named cases: optimizers, Variables assigned by fit over steps
# =====================================================================================
# Every optimizer in ``minigrad.nn.optim`` (SGD, SGD with momentum, Adam with
# default and other betas) trains a small MLP eagerly (``loss.backward(); opt.step()``) and
# through ``Model.compile/fit`` on each backend, at several shapes and batch sizes, with the
# learning rate changed between two fits; the parameters agree with the eager run and with
# ``torch.optim`` (when torch is installed) to float32 tolerance.
OPTIMIZERS = {
    'sgd': (lambda ps, lr: mg.optim.SGD(ps, lr=lr), lambda ps, lr: torch.optim.SGD(ps, lr=lr)),
    'sgd_momentum': (lambda ps, lr: mg.optim.SGD(ps, lr=lr, momentum=0.9),
                     lambda ps, lr: torch.optim.SGD(ps, lr=lr, momentum=0.9)),
    'adam': (lambda ps, lr: mg.optim.Adam(ps, lr=lr), lambda ps, lr: torch.optim.Adam(ps, lr=lr)),
    'adam_betas': (lambda ps, lr: mg.optim.Adam(ps, lr=lr, betas=(0.8, 0.99), eps=1e-6),
                   lambda ps, lr: torch.optim.Adam(ps, lr=lr, betas=(0.8, 0.99), eps=1e-6)),
}
LR = {'sgd': 0.1, 'sgd_momentum': 0.05, 'adam': 0.01, 'adam_betas': 0.02}
# (din, hidden, dout, samples, batch size): batch None = the whole set per step; 10 % 4 leaves a last batch of 2
OPT_SHAPES = [(3, 4, 1, 8, None), (2, 5, 3, 10, 4), (1, 1, 1, 6, 1), (4, 3, 2, 12, 5)]
OPT_CASES = [(o, s) for o in OPTIMIZERS for s in OPT_SHAPES]
OPT_CASES_FAST = [(o, OPT_SHAPES[k % len(OPT_SHAPES)]) for k, o in enumerate(OPTIMIZERS)]
EPOCHS = (2, 2)       # two fits (or eager epochs), the learning rate halved between them


def _data(din, dout, n):
    rs = np.random.default_rng(din * 100 + dout * 10 + n)
    return rs.standard_normal((n, din)).astype(np.float32), rs.standard_normal((n, dout)).astype(np.float32)


def _model(din, h, dout):
    mg.manual_seed(0)
    return mg.nn.Sequential([mg.nn.Linear(din, h), mg.nn.Tanh(), mg.nn.Linear(h, dout)])


def _batches(n, bs):
    bs = n if bs is None else bs
    return [slice(s, s + bs) for s in range(0, n, bs)]


def train_eager(name, shape):
    din, h, dout, n, bs = shape
    x, y = _data(din, dout, n)
    m = _model(din, h, dout)
    opt = OPTIMIZERS[name][0](m.parameters(), LR[name])
    for k, epochs in enumerate(EPOCHS):
        opt.lr = LR[name] / 2 ** k
        for _ in range(epochs):
            for b in _batches(n, bs):
                opt.zero_grad()
                ((m(mg.tensor(x[b])) - mg.tensor(y[b])) ** 2).mean().backward()
                opt.step()
    return [p.data.copy() for p in m.parameters()]


def train_fit(name, shape, backend, monkeypatch):
    monkeypatch.setenv('MINIGRAD_BACKEND', backend)
    din, h, dout, n, bs = shape
    x, y = _data(din, dout, n)
    m = _model(din, h, dout)
    opt = OPTIMIZERS[name][0](m.parameters(), LR[name])
    m.compile(optimizer=opt, loss='mse')
    for k, epochs in enumerate(EPOCHS):
        opt.lr = LR[name] / 2 ** k
        m.fit(x, y, epochs=epochs, batch_size=bs, shuffle=False, verbose=0)
    return [p.data.copy() for p in m.parameters()]


def train_torch(name, shape):
    din, h, dout, n, bs = shape
    x, y = _data(din, dout, n)
    m = _model(din, h, dout)
    ps = [torch.tensor(p.data.copy(), requires_grad=True) for p in m.parameters()]
    w1, b1, w2, b2 = ps
    opt = OPTIMIZERS[name][1](ps, LR[name])
    for k, epochs in enumerate(EPOCHS):
        for group in opt.param_groups:
            group['lr'] = LR[name] / 2 ** k
        for _ in range(epochs):
            for b in _batches(n, bs):
                opt.zero_grad()
                out = torch.tanh(torch.tensor(x[b]) @ w1.T + b1) @ w2.T + b2
                ((out - torch.tensor(y[b])) ** 2).mean().backward()
                opt.step()
    return [p.detach().numpy().copy() for p in ps]


def check_optimizer(name, shape, monkeypatch):
    """[what differed] (empty when fit on every backend and torch agree with the eager run)."""
    want, bad = train_eager(name, shape), []
    runs = {f'fit {be}': lambda be=be: train_fit(name, shape, be, monkeypatch) for be in BACKENDS}
    if torch is not None:
        runs['torch'] = lambda: train_torch(name, shape)
    for mode, run in runs.items():
        try:
            got = run()
        except Exception as e:      # a raw error is a failure of the case too
            bad.append(f'{name} {shape} {mode}: raised {type(e).__name__}: {str(e)[:200]}')
            continue
        for k, (a, b) in enumerate(zip(got, want)):
            if not np.allclose(a, b, rtol=1e-4, atol=1e-5):
                bad.append(f'{name} {shape} {mode}: parameter {k} differs by {np.max(np.abs(a - b)):.3g}')
    return bad


@pytest.mark.parametrize('name,shape', OPT_CASES_FAST, ids=[f'{o}-{s}' for o, s in OPT_CASES_FAST])
def test_optimizers_eager_fit_and_torch_agree(name, shape, monkeypatch):
    bad = check_optimizer(name, shape, monkeypatch)
    assert not bad, '\n'.join(bad)


@pytest.mark.slow
@pytest.mark.parametrize('name,shape', OPT_CASES, ids=[f'{o}-{s}' for o, s in OPT_CASES])
def test_optimizers_eager_fit_and_torch_agree_large(name, shape, monkeypatch):
    bad = check_optimizer(name, shape, monkeypatch)
    assert not bad, '\n'.join(bad)
