"""What a mg.jit function reads besides its arguments, and the guards that check it on every call.

A traced graph keeps, as constants, every Python value fn read while tracing: a global scale, a Module
attribute, a dict item, a default argument. So mg.jit walks what fn can read (torch.compile guards what its
bytecode interpreter saw fn read; this walk reads fn's bytecode with `dis` instead of running it): fn's
globals, closure cells and defaults (and ``self`` for a Module or a bound method), following only the
names fn's code reads (LOAD_GLOBAL and attribute names) into the helpers it calls (their globals, closures
and defaults; what mg.grad / mg.vmap wrappers close over), objects' and classes' attributes, and dict,
list and tuple items. Every value found gets a guard:

* a Python or numpy scalar, a string, None: its exact value (-0.0 is not 0.0, nan is nan);
* anything else: its identity (``is``): a rebound name, a replaced item or a monkeypatched function retraces;
  a list or dict also its length;
* a Tensor or numpy array: the graph reads it on every call (a Variable fed its current data), so an
  in-place change is seen; one the graph does not read directly (``T.item()``, ``np.exp(A)``) is guarded
  by its contents instead (a copy per call); a captured tensor's dtype and shape.

The walk runs before the trace (the arrays to feed) and after it (the guards: the state as tracing left
it); what fn itself changed while tracing (a list it appends to) is a side effect that runs only while
tracing, as under jax.jit, and is not guarded. An attribute is followed wherever its name is read by any
code met, so a few guards check values fn never reads (at worst a retrace or a refusal too many). The
guards of a cache entry are compiled into one Python function (`Reads.checker`), so a call pays one
function call for them. What cannot be checked on every call is refused with an error that says how to
pass it as an argument: an iterator, a random generator, a list or dict of more than `LIMIT` items, an
array over `BYTES` read in Python.
"""
from __future__ import annotations

import collections.abc
import dis
import functools
import keyword
import os
import random
import re
import sys
import sysconfig
import types

import numpy as np

from ..core.errors import MinigradError
from ..core.tensor import Tensor

LIMIT = 256         # items of a list, dict or set compared on every call; a larger one is refused
BYTES = 1 << 20     # an array read in Python (not fed to the graph) compared on every call; a larger one is refused
DEPTH = 16          # how deep the walk goes (beyond it, a value's identity only)
SCALARS = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis))
_PKG = __name__.split('.')[0]
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NN = os.path.join(_HERE, 'nn') + os.sep
_LIBRARY = tuple({os.path.join(p, '') for p in [_HERE, os.path.dirname(np.__file__)] +
                  [sysconfig.get_paths()[k] for k in ('stdlib', 'platstdlib', 'purelib', 'platlib')]})
_RANDOM = (np.random.Generator, np.random.RandomState, random.Random)


def exact(v):
    """A scalar as a key that tells -0.0 from 0.0 and finds nan equal to nan (float.hex)."""
    if isinstance(v, float):
        return type(v), v.hex()
    if isinstance(v, complex):
        return type(v), v.real.hex(), v.imag.hex()
    if isinstance(v, np.generic):
        return type(v), v.tobytes()
    return type(v), v


def _origin(filename) -> str:
    """'nn' (minigrad.nn: read for the attribute names it uses), 'lib' (minigrad, numpy, the standard
    library, installed packages: not walked) or 'user'."""
    if filename.startswith(_NN):
        return 'nn'
    return 'lib' if filename.startswith(_LIBRARY) else 'user'


def _user_module(module) -> bool:
    """A module (or a module's name) of the user's: not built in, not under the library folders."""
    if isinstance(module, str):
        module = sys.modules.get(module, types.ModuleType(module))
    file = getattr(module, '__file__', None)
    return module.__name__ not in sys.builtin_module_names if file is None else _origin(file) == 'user'


@functools.lru_cache(maxsize=4096)
def _code_reads(code) -> tuple:
    """(global names, attribute names, identifier strings: ``getattr(obj, 'name')``) a code object and
    the functions defined in it read."""
    names, attrs, strings = set(), set(), set()
    for ins in dis.get_instructions(code):
        if ins.opname in ('LOAD_GLOBAL', 'LOAD_NAME', 'LOAD_FROM_DICT_OR_GLOBALS'):
            names.add(ins.argval)
        elif ins.opname in ('LOAD_ATTR', 'LOAD_METHOD', 'LOAD_SUPER_ATTR'):
            attrs.add(ins.argval)
        elif ins.opname == 'LOAD_CONST' and isinstance(ins.argval, str) and ins.argval.isidentifier():
            strings.add(ins.argval)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            for mine, more in zip((names, attrs, strings), _code_reads(c)):
                mine |= more
    return frozenset(names), frozenset(attrs), frozenset(strings)


def _frozen(v) -> bool:
    """Immutable all the way down: nothing to guard inside it once its container is guarded."""
    return type(v) in SCALARS or isinstance(v, np.generic) or \
        type(v) in (tuple, frozenset) and all(_frozen(x) for x in v)


def _what(v) -> str:
    if isinstance(v, (Tensor, np.ndarray)):
        a = v.data if isinstance(v, Tensor) else v
        return f'{"Tensor" if isinstance(v, Tensor) else "numpy array"} {a.dtype} {tuple(a.shape)}'
    if isinstance(v, (list, dict, set)):
        return f'{type(v).__name__} of {len(v)} items'
    return getattr(v, '__qualname__', None) or type(v).__name__


def _code(d):
    """The Python function behind a class attribute (a method, static or class method, property), or None."""
    d = getattr(d, 'fget', None) if isinstance(d, property) else getattr(d, '__func__', d)
    return d if isinstance(d, types.FunctionType) else None


class Reads:
    """The walk over what ``fn`` can read (see the module docstring). ``conds``: the source of each check,
    ``texts``: each in words (explain() prints them), ``ns``: the objects the checks refer to, ``found``:
    the Tensors and arrays met (id -> (value, expr, text, why)), ``attrs``: the attribute names read."""

    def __init__(self, fname, attrs=()):
        self.fname, self.attrs = fname, set(attrs)
        self.conds, self.texts, self.marks, self.ns = [], [], [], {'_exact': exact}
        self.seen, self.walked, self.found, self.wrappers = set(), set(), {}, set()     # wrappers: arrays()

    def bind(self, obj) -> str:
        """A name the checks use for ``obj`` (held, so its id stays its own)."""
        name = f'_{len(self.ns)}'
        self.ns[name] = obj
        return name

    def guard(self, cond, text, key=None, mark=None):
        """Check ``cond`` on every call. ``key`` names what it reads, ``mark`` the value it found there:
        a guard whose mark the trace itself changed is dropped (see checker)."""
        self.conds.append(cond)
        self.texts.append(text)
        self.marks.append((key, mark))

    def root(self, fn):
        """Walk from ``fn``: a function, a bound method (its function and object) or a callable object."""
        self.ns['fn'] = fn
        parts = [(fn.__func__, 'fn.__func__'), (fn.__self__, 'fn.__self__')] if isinstance(fn, types.MethodType) \
            else [(fn, 'fn')]
        for v, expr in parts:
            self.seen.add(id(v))
            self.inside(v, expr, 'self', f'attribute of {type(v).__name__}', 1)

    def visit(self, v, expr, text, why, depth):
        """Guard ``v``, read by the Python expression ``expr`` (``text`` in words), then what is inside it."""
        if type(v) in SCALARS or isinstance(v, np.generic):
            self.guard(f'((v := {expr}) is {self.bind(v)} or _exact(v) == {self.bind(exact(v))})',
                       f'{text} == {v!r:.80} ({type(v).__name__}, {why})', ('==', text, why), exact(v))
            return
        if isinstance(v, types.ModuleType) and not _user_module(v):
            return                  # numpy, minigrad, math: library modules are not rebound
        self.refuse(v, text, why)
        if isinstance(v, types.MethodType):         # a new bound method on every access: guard its parts
            self.visit(v.__self__, f'{expr}.__self__', f'{text}.__self__', why, depth)
            expr, v = f'{expr}.__func__', v.__func__
        bound = self.bind(v)
        self.guard(f'{expr} is {bound}', f'{text} is {_what(v)} ({why})', ('is', text, why), id(v))
        if id(v) not in self.seen and depth <= DEPTH:
            self.seen.add(id(v))        # the checks inside read it by its bound name: this guard ran first
            self.inside(v, bound, text, why, depth + 1)

    def inside(self, v, expr, text, why, depth):
        """What can change inside ``v``: Tensors and arrays are noted (fed or guarded by contents after the
        trace), functions walked, containers item by item, other objects attribute by attribute."""
        if isinstance(v, (Tensor, np.ndarray)):
            self.found[id(v)] = (v, expr, text, why)
        elif isinstance(v, types.FunctionType):
            self.function(v, depth)
        elif isinstance(v, functools.partial):
            for part in ('func', 'args', 'keywords'):
                self.visit(getattr(v, part), f'{expr}.{part}', f'{text}.{part}', why, depth)
        elif isinstance(v, (list, tuple, dict, set, frozenset)):
            self.items(v, expr, text, why, depth)
        elif type(v).__module__.split('.')[0] in (_PKG, 'numpy') and not type(v).__module__.startswith(f'{_PKG}.nn'):
            if hasattr(v, '__wrapped__'):           # a mg.jit function called inside fn: what it wraps
                self.visit(v.__wrapped__, f'{expr}.__wrapped__', text, why, depth)
        else:
            self.attributes(v, expr, text, why, depth)

    def function(self, f, depth):
        """A Python function fn calls: the attribute names its code reads; for user code also its globals,
        closure cells and defaults; for minigrad's wrappers (mg.grad(g), mg.vmap(g)) what they close over.
        (Its own identity is guarded where it was found.)"""
        origin, who = _origin(f.__code__.co_filename), f.__qualname__.rsplit('<locals>.', 1)[-1]
        if id(f) in self.walked or origin == 'lib' and not f.__code__.co_filename.startswith(_HERE):
            return
        self.walked.add(id(f))
        names, attrs, strings = _code_reads(f.__code__)
        if origin == 'lib':         # mg.grad(fn), mg.vmap(fn), ...: the function it closes over
            self.cells(f, who, depth)
            return
        self.attrs |= attrs
        if origin != 'user':
            return
        self.attrs |= {s for s in strings if not keyword.iskeyword(s)}
        g, glob = self.bind(f.__globals__), f.__globals__
        for n in sorted(names & glob.keys()):
            self.visit(glob[n], f'{g}[{n!r}]', n, f'global of {who}', depth)
        self.cells(f, who, depth)
        fb, defaults = self.bind(f), f.__defaults__
        if defaults:
            self.guard(f'{fb}.__defaults__ is {self.bind(defaults)}', f'{who}.__defaults__ is {defaults!r:.60}',
                       ('is', who, 'defaults'), id(defaults))
            for i, d in enumerate(defaults):
                if not _frozen(d):
                    self.visit(d, f'{fb}.__defaults__[{i}]', f'{who}.__defaults__[{i}]', 'a default', depth)
        if f.__kwdefaults__:
            self.visit(f.__kwdefaults__, f'{fb}.__kwdefaults__', f'{who}.__kwdefaults__', 'keyword defaults', depth)

    def cells(self, f, who, depth):
        """The values ``f`` closes over."""
        for n, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:      # a cell not filled yet
                continue
            self.visit(v, f'{self.bind(cell)}.cell_contents', n, f'closed over by {who}', depth)

    def items(self, v, expr, text, why, depth):
        """A container: a list's or dict's length and items, a set's contents; a tuple's mutable items."""
        if isinstance(v, (tuple, frozenset)):
            pairs = [] if isinstance(v, frozenset) else [(i, x) for i, x in enumerate(v) if not _frozen(x)]
        elif isinstance(v, set):
            self.guard(f'{expr} == {self.bind(frozenset(v))}', f'{text} == {v!r:.60} ({why})', ('set', text, why),
                       frozenset(v))
            return
        else:
            self.guard(f'len({expr}) == {len(v)}', f'len({text}) == {len(v)} ({why})', ('len', text, why), len(v))
            pairs = list(v.items() if isinstance(v, dict) else enumerate(v))
        if len(pairs) > LIMIT:
            self.refuse(v, text, why, big=True)
        for k, x in pairs:
            key = repr(k) if type(k) in (str, int, bool) else self.bind(k)
            self.visit(x, f'{expr}[{key}]', f'{text}[{k!r}]', why, depth)

    def attributes(self, v, expr, text, why, depth):
        """The attributes the code seen reads (by name) of an object, a user class or a user module, and
        the code of what they call (methods, properties, a callable object's __call__)."""
        if isinstance(v, types.ModuleType):
            own, classes = vars(v), []
        elif isinstance(v, type):
            own, classes = {}, [c for c in v.__mro__ if c is not object] if _user_module(v.__module__) else []
        else:
            own, classes = getattr(v, '__dict__', {}), [c for c in type(v).__mro__ if c is not object]
            call = _code(next((vars(c)['__call__'] for c in classes if '__call__' in vars(c)), None))
            if call is not None:
                self.function(call, depth)
        for n in sorted(n for n in self.attrs.intersection(set(own).union(*map(vars, classes))) if n[:2] != '__'):
            defs = [vars(c)[n] for c in classes if n in vars(c)]
            if n in own:
                self.visit(own[n], f'{expr}.{n}', f'{text}.{n}', why, depth)
            elif defs and not isinstance(defs[0], property) and (_code(defs[0]) is None or isinstance(v, type)):
                try:                    # a class attribute (or a class's own function, static or class method)
                    value = getattr(v, n)
                except Exception:       # noqa: BLE001 (a descriptor that fails is not read by fn either)
                    continue
                self.visit(value, f'{expr}.{n}', f'{text}.{n}', why, depth)
            elif defs and type(defs[0]) is types.FunctionType and _origin(defs[0].__code__.co_filename) == 'user':
                f = defs[0]             # a method: a new bound method on every access, so its function
                self.guard(f'{expr}.{n}.__func__ is {self.bind(f)}', f'{text}.{n} is {f.__qualname__} ({why})',
                           ('is', f'{text}.{n}', why), id(f))
            for f in map(_code, defs):      # the code of methods and properties, overridden ones too (super())
                if f is not None and not (isinstance(defs[0], property) and _origin(f.__code__.co_filename) != 'user'):
                    self.function(f, depth)

    def refuse(self, v, text, why, big=False):
        """Raise for what cannot be checked on every call, saying how to pass it as an argument."""
        f = self.fname
        if big and isinstance(v, (Tensor, np.ndarray)):
            reason = f'a {_what(v)} of over {BYTES >> 20} MB, in Python (not as an input of the graph)'
            how = f'{f}(x, {text}) (or what {f} computes from it)'
        elif big:
            reason = f'a {type(v).__name__} of {len(v)} items (more than {LIMIT})'
            how = f'{f}(x, np.asarray({text})) for an array, or {f}(x, {text}[i]) for one item'
        elif isinstance(v, _RANDOM):
            reason, how = 'a random number generator (each call draws new numbers)', \
                f'draw them outside and pass them, {f}(x, {text}.normal(size=...))'
        elif isinstance(v, collections.abc.Iterator):
            reason, how = 'an iterator (each call takes its next item)', f'{f}(x, next({text}))'
        else:
            return
        raise MinigradError(f'mg.jit({f}): {f} reads {text} ({why}), {reason}, which mg.jit cannot check on '
                            f'every call: the traced graph would keep what it gave while tracing. Pass it as an '
                            f'argument instead: {how}.')

    def arrays(self) -> dict:
        """id -> a Tensor around each numpy array found (not a copy): the trace feeds it like a captured
        tensor (jit's _JitGraph), so the graph reads the array's current contents on every call."""
        out = {}
        for v, _, text, _ in self.found.values():
            if type(v) is np.ndarray:
                out[id(v)] = t = Tensor._make(v)
                t.name = re.sub(r'\W+', '_', text).strip('_') or 'captured'
                self.wrappers.add(id(t))
        return out

    def checker(self, params, before):
        """All guards as one compiled function, True when they hold. What the trace changed itself (a
        value whose mark differs in the walk ``before`` it: a list fn appends to, a counter it increments)
        is a side effect that runs only while tracing, as under jax.jit, and is not guarded. The trace
        decides the last guards: a Tensor or array the graph reads (``params``: its captured (Variable,
        Tensor) pairs) is fed, and a captured tensor's data (not an array's wrapper) must keep its dtype and
        shape; any other one found (read in Python, as ``T.item()`` or ``np.exp(A)``) must keep its
        contents, unless it requires grad (a parameter being trained, whose every step would retrace)."""
        was = dict(before.marks)
        keep = [key is None or was.get(key, mark) == mark for key, mark in self.marks]
        self.conds = [c for c, k in zip(self.conds, keep) if k]
        self.texts = [t if k else f'not guarded (fn changed it while tracing): {t}' for t, k in zip(self.texts, keep)]
        fed = {id(t) for _, t in params} | {id(t.data) for _, t in params}
        for v, expr, text, why in self.found.values():
            if id(v) not in fed and not (isinstance(v, Tensor) and v.requires_grad):
                if np.asarray(v.data).nbytes > BYTES:
                    self.refuse(v, text, why, big=True)
                data = f'{expr}.data' if isinstance(v, Tensor) else expr
                self.guard(f'{data}.tobytes() == {self.bind(np.asarray(v.data).tobytes())}',
                           f'{text} holds the values seen ({why}; compared on every call)')
        for _, t in params:
            if id(t) not in before.wrappers:
                name = self.found[id(t)][2] if id(t) in self.found else t.name or 'a captured tensor'
                self.guard(f'((a := {self.bind(t)}.data).dtype == {self.bind(t.data.dtype)} and a.shape == '
                           f'{t.data.shape!r})', f'{name}.data: {t.data.dtype} {t.data.shape} (fed to the graph)')
        body = '\n            and '.join(self.conds) or 'True'
        self.source = f'def check():\n    try:\n        return ({body})\n    except Exception:\n        return False\n'
        exec(compile(self.source, f'<guards of mg.jit({self.fname})>', 'exec'), self.ns)
        return self.ns.pop('check')         # (kept in ns, it would make a reference cycle)


def walk(fn, fname, attrs=frozenset()) -> Reads:
    """What ``fn`` can read, walked again while the code found reads attribute names not yet followed
    (``attrs``: the names an earlier walk found, to start from)."""
    attrs = set(attrs)
    while True:
        reads = Reads(fname, attrs)
        reads.root(fn)
        if reads.attrs == attrs:
            return reads
        attrs = reads.attrs
