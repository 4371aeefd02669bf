"""Loop kernels (the numba backend): a fusion group becomes one generated Python loop,
compiled by numba. Every value of the group lives in a register for one element at a time,
so the group reads each input and writes each result once: one pass over memory.

What each op computes per element is its record's ``kernel`` rule (core.Primitive): a
scalar expression over its operands. Every operand is first converted to the dtype numpy
computes the op in, every result to the op's dtype (numba would otherwise widen float32 to
float64 when a constant is an int64, as numpy does not). Kernels run with
``error_model='numpy'`` (x/0 is inf or nan, never an exception) and without fastmath
(which would break inf, nan and signed zeros).

Generated kernels are written to a cache directory (``MINIGRAD_CACHE_DIR``, default
``~/.cache/minigrad``) as ``k_<hash of the source>.py`` and imported from there: numba
caches compiled code only for functions defined in a real file (``cache=True``), so a later
process loads a kernel in milliseconds instead of compiling it again.
"""
from __future__ import annotations

import builtins
import collections
import contextlib
import functools
import glob
import hashlib
import importlib.util
import keyword
import os
import re
import sys
import time
import warnings

import numpy as np

from ..core.names import Names
from ..core.errors import MinigradError
from ..core.graph import PLACEHOLDER
from .codegen import comment_safe

try:
    import numba
    import numba.core.caching
    import llvmlite.binding
    # A fused backward pass reads and writes dozens of arrays; LLVM then needs that many runtime
    # checks that no two overlap before it vectorises the loop, and by default gives up (the
    # loop runs 4x slower, scalar). A process-wide LLVM setting: it only lets the vectoriser try.
    # speed: LLVM's limits on runtime overlap checks raised, so loops over many arrays still vectorise
    for _memory_check in ('-runtime-memory-check-threshold=4096', '-vectorize-memory-check-threshold=4096'):
        llvmlite.binding.set_option('minigrad', _memory_check)
except ImportError:        # the numpy backend needs no numba (Pyodide, minimal installs)
    numba = None

_LOADED: dict = {}         # source hash -> numba dispatcher, for this process
# A loop that pastes approximations (tanh: ~50 cycles of dependent fma and divide per op) is latency-bound: LLVM
# vectorises it one vector per iteration, and the next iteration's chain does not fit the out-of-order window.
# Four vectors per iteration ran the tanh chain's kernel 0.64x as long at 64^2 and 256^2 (arrays in cache),
# but 1.8-2x as long once they came from DRAM (384^2 and up). On a 2-CPU VM (32 MiB L3, shared with other
# guests) it was 0.58-0.90x as long up to 160^2 (4.1 MiB streamed), 0.59-2.4x at 192^2 and 1.5-2.4x at 256^2
# (10.5 MiB), hence only up to an eighth of the largest cache.
INTERLEAVE = 4
# A loop over fewer elements runs serially: on the 2-CPU VM handing a chunk to a worker cost 40-90 us (waking it,
# passing the GIL). At 2 threads / 1 thread (3 runs of scripts/parallel_threshold.py with the other CPU idle,
# 2026-12-08) a*b+c, the cheapest kernel, took 1.14-1.37x at 2^18 elements, 0.87-0.90x at 2^19; relu(a*b+c)*d-e
# 0.87-1.02x, 0.80-0.83x; three tanh layers 1.07-1.08x at 2^17, 0.69-0.87x at 2^18. (Conservative where threads
# wake faster.)
# speed: the sizes from which a kernel's loop is split across threads; with approximations it pays sooner
PARALLEL_MIN, PARALLEL_MIN_APPROX = 1 << 19, 1 << 18


def available() -> bool:
    """True when numba imports, so ``backend='numba'`` can be used."""
    return numba is not None


def why_not(node) -> str | None:
    """Why `node` cannot be part of a loop kernel (None: it can): kernels need each op's loop
    rule, shapes known at compile time and float or bool results."""
    o = node.outputs[0]
    if node.prim.kernel is None:
        return 'no loop-kernel rule (numpy runs it)'
    if any(s.shape is None or None in s.shape for s in [o, *node.inputs]):
        return 'a shape unknown at compile time'
    if o.dtype.kind not in 'fb':
        return f'{o.dtype} results (kernels compute float and bool values; numba widens integers differently)'
    if any(s.dtype == np.float16 for s in [o, *node.inputs]):
        return 'float16 values (numba has no float16 arithmetic on the CPU)'
    ins = [s.dtype for s in node.inputs]
    if o.dtype.kind == 'b' and all(d.kind in 'iu' for d in ins) and np.result_type(*ins).kind == 'f':
        return 'a comparison of int64 and uint64 (numpy compares them exactly; a kernel would in float64)'
    return None


def cache_dir() -> str:
    base = os.environ.get('MINIGRAD_CACHE_DIR') or os.path.join(
        os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache'), 'minigrad')
    return os.path.join(base, 'kernels')


def _convert(expr: str, dt) -> str:
    return 'bool(' + expr + ')' if dt.kind == 'b' else f'np.{dt.name}({expr})'


class _Ctx:
    """What kernel rules use: ``ctx.typed(v)``, a literal in the current op's dtype; ``ctx.lines``,
    statements to run before the op's expression (an approximation, named in ``ctx.approx``)."""
    dtype = None

    def __init__(self, approx=None):
        self.approx, self.lines, self._n = set() if approx is None else approx, [], 0

    def fresh(self) -> str:
        self._n += 1
        return f'p{self._n}'

    def typed(self, v) -> str:
        return _convert(repr(v), self.dtype)


def _index(shape, full, ivars, strided=False) -> str:
    """Index of an input of `shape` broadcast to `full`: i_k on its real axes, 0 on broadcast ones
    (a flat loop, one index i, when every input has the full shape or one element; a strided one is
    read as its one element: numba reshapes only contiguous arrays)."""
    if len(ivars) == 1 and len(full) != 1:
        return '[i]' if tuple(shape) == full and not strided else '[' + ', '.join('0' for _ in shape) + ']' \
            if shape else '[()]'
    lead = len(full) - len(shape)
    idx = [ivars[lead + k] if d == full[lead + k] and d != 1 else '0' for k, d in enumerate(shape)]
    return '[' + ', '.join(idx) + ']' if idx else '[()]'


_RESERVED = set(keyword.kwlist) | set(dir(builtins)) | {'np', 'njit', 'types', 'void', 'uintp', 'In', 'Out', 'kernel', 'lo', 'hi'}


def _namer(readable):
    """Local variable names: the values' own names (made identifiers) when readable, else x0, t3, ...
    (the neutral form is what is hashed and compiled, so equal loops share one cached kernel)."""
    # speed: neutral names in the compiled source, so equal loops of any graph share one cached kernel
    names = Names()

    def name(value, neutral):
        if not readable:
            return neutral
        base = re.sub(r'\W', '_', str(value.name)) or 'v'
        if base[0].isdigit() or base in _RESERVED or re.fullmatch(r'[aon]\d+|i\d*', base):
            base = 'v_' + base
        return names(None, base)
    return name


def _note(local, name, op=None) -> str:
    """The comment after a line: the op, and the value's name when the local differs from it."""
    said = [] if local == name else [comment_safe(name) + (' =' if op else '')]
    return '  # ' + ' '.join(said + ([op] if op else [])) if said or op else ''


def _reduced(node, full) -> bool:
    """A reduction accumulated in the loop: its record's kernel rule combines (accumulator, element)."""
    return tuple(node.outputs[0].shape) != full and not node.prim.elementwise


def _first(node) -> str:
    """The reduction's starting value (its unit, or its initial) as a literal of its dtype."""
    first = node.prim.unit if node.params.get('initial') is None else node.params['initial']
    return _convert(repr(float(first)).replace('inf', 'np.inf'), node.outputs[0].dtype)


def _accumulator(node, k, ivars, init) -> str:
    """Where reduction `node` (result o<k>) accumulates, o<k> filled with its first value, unless it sums rows."""
    axes, keep = node.params['axis'], node.params['keepdims']
    if not node.params.get('rows'):
        init.append(f'o{k}.fill({_first(node)})')
    at = [('0' if d in axes else v) for d, v in enumerate(ivars) if keep or d not in axes]
    return f'o{k}[' + (', '.join(at) or '()') + ']'


# numpy sums a contiguous run of up to 128 elements (its pairwise_sum's block) with 8 accumulators, element j into
# r[j % 8], then adds them as a tree and the last n % 8 elements one by one (a longer run it splits in halves,
# recursively); a kernel adds a row, or all it computed, of up to ROW_SUM elements that way
ROW_SUM = 128


# a sum a kernel adds after its loop: result o<k>, add(x, y) and -0.0 in its dtype, the line storing r<k>, n elements
# per row, every (all it computed, else each row of the last axis), row(j): the code reading element j
RowSum = collections.namedtuple('RowSum', 'k add neg store n every row')


def _reduction(node, outputs, element, ivars, full, ctx, init, rows):
    """(target, expression) accumulating reduction `node` (result o<k>) from `element` into o<k>[...]; or, for a
    sum of rows (the last axis) or of everything, None: the kernel's result it reads holds the elements, and
    they are added in numpy's order after its loop (_row_sums)."""
    at_out = [id(r) for r in outputs]
    k, src = at_out.index(id(node.outputs[0])), f'o{at_out.index(id(node.inputs[0]))}'
    o, at = node.outputs[0], _accumulator(node, k, ivars, init)
    add = lambda x, y: _convert(node.prim.kernel([x, y], node.params, ctx), o.dtype)
    if not node.params.get('rows'):
        return at, add(at, element)
    every = len(node.params['axis']) == len(full)
    n = int(np.prod(full)) if every else full[-1]
    if every:
        init.append(f'f{k} = {src}.reshape({n})')
    row = (lambda j: f'f{k}[{j}]') if every else (lambda j: f'{src}[' + ', '.join(ivars[:-1] + [j]) + ']')
    rows.append(RowSum(k, add, _convert('-0.0', o.dtype), f'{at} = {add(_first(node), f"r{k}")}', n, every, row))
    return None


def _row_sums(sums, ind) -> list:
    """Lines adding each row (n elements, ``row(j)``) in numpy's order, after the loop that computed it (which
    stays vectorised; a sum of everything after all loops): a<k>_j (from -0.0, so the first add is exact) takes
    elements j, j + 8, ... of the first n - n % 8, r<k> is their tree, then adds the rest. ``sums``: RowSums."""
    # speed: a row (or all) added after its loop from the kernel's own result: the loop stays vectorised
    lines = []
    for k, add, neg, store, n, every, row in sorted(sums, key=lambda r: r.every):     # rows first, in their loop
        at = '    ' if every else ind[4:]
        acc = [f'a{k}_{j}' for j in range(8)]
        pairs = functools.reduce(lambda xs, _: [add(x, y) for x, y in zip(xs[::2], xs[1::2])], range(3), acc)[0]
        mine, cut = [' = '.join(acc) + f' = {neg}'], n - n % 8
        if cut:
            mine += [f'for blk in range(0, {cut}, 8):']
            mine += [f'    {a} = {add(a, row(f"blk + {j}" if j else "blk"))}' for j, a in enumerate(acc)]
        mine.append(f'r{k} = {pairs}')
        if n % 8:
            mine += [f'for j in range({cut}, {n}):', f'    r{k} = {add(f"r{k}", row("j"))}']
        lines += [at + x for x in mine + [store]]
    return lines


def _flat(graph, layouts) -> bool:
    """One loop over all elements: every array has the result's shape and is C-contiguous, or has one element."""
    full = tuple(graph.outputs[0].shape)
    return all(tuple(s.shape) == full and lay == 'C' or int(np.prod(s.shape)) == 1
               for s, lay in zip(graph.inputs, layouts)) and all(tuple(s.shape) == full for s in graph.outputs)


def kernel_source(graph, layouts, readable=False, approx=None, alias=None, chunked=False) -> str:
    """The Python source of one loop kernel computing `graph` (inputs, nodes, outputs), all of
    whose results have one shape but reductions (a sum over the leading or last axis, accumulated from
    the record's ``unit``); ``layouts`` gives each input's numba layout ('C' or 'A');
    the names of the approximations it calls are added to the set ``approx``; ``alias`` {input k: result j}:
    input k is read from o<j> (computed in place), not passed; ``chunked``: it runs its outer loop from ``lo``
    to ``hi`` (two more arguments) with the GIL released, a chunk of a parallel launch (parallel.py)."""
    if any(s.shape is None or None in s.shape for s in graph.inputs + graph.outputs):
        raise MinigradError('kernel_source: every shape must be known (fuse groups only such ops)')
    full, flat = tuple(graph.outputs[0].shape), _flat(graph, layouts)
    ivars = [f'i{k}' for k in range(len(full))] if not flat else ['i'] if full else []
    names, ctx, local, alias = {}, _Ctx(approx), _namer(readable), alias or {}
    note = _note if readable else (lambda *a: '')      # speed: comments only in the source a reader sees
    ins = [f'a{k}' for k in range(len(graph.inputs)) if k not in alias]
    outs = [f'o{k}' for k in range(len(graph.outputs))]
    hoisted, loads, body, init, rows = [], [], [], [], []
    for k, s in enumerate(graph.inputs):
        x = names[id(s)] = local(s, f'x{k}')
        ix = _index(tuple(s.shape), full, ivars, layouts[k] == 'A')
        src = f'o{alias[k]}' if k in alias else f'a{k}'
        (loads if any(v in ix for v in ivars) else hoisted).append(f'{x} = {src}{ix}' + note(x, s.name))
    for n, node in enumerate(graph.nodes):
        if node.prim is PLACEHOLDER:
            continue
        o = node.outputs[0]
        ctx.dtype = o.dtype if o.dtype.kind != 'b' else np.result_type(*[i.dtype for i in node.inputs])
        args = [names[id(i)] if i.dtype == ctx.dtype else _convert(names[id(i)], ctx.dtype) for i in node.inputs]
        t = names[id(o)] = local(o, f't{n}')
        if _reduced(node, full):
            if (found := _reduction(node, graph.outputs, args[0], ivars, full, ctx, init, rows)) is None:
                continue        # a sum added in numpy's order after the loop (_row_sums)
            t, expr = found
        else:
            expr = _convert(node.prim.kernel(args, node.params, ctx), o.dtype)
        body += ctx.lines + [f'{t} = {expr}' + note(t, o.name, node.prim.name)]
        ctx.lines = []
    at = _index(full, full, ivars)
    stores = [f'o{k}{at} = {names[id(s)]}' for k, s in enumerate(graph.outputs) if tuple(s.shape) == full]
    lines = [_signature(graph, layouts, alias, chunked), f'def kernel({", ".join(ins + outs + ["lo", "hi"] * chunked)}):']
    if flat and len(full) > 1:        # speed: one loop over all elements, C-contiguous arrays seen flat
        lines.append(f'    n0 = o0.size')
        lines += [f'    a{k} = a{k}.reshape(n0)' for k, (s, lay) in enumerate(zip(graph.inputs, layouts))
                  if tuple(s.shape) == full and lay == 'C' and k not in alias]
        lines += [f'    {o} = {o}.reshape(n0)' for o in outs]
        lines += [f'    {h}' for h in hoisted]
    elif full:
        lines += [f'    {h}' for h in hoisted]
        lines.append(f'    {", ".join(f"n{k}" for k in range(len(full)))}, = o0.shape')
        lines += [f'    {x}' for x in init]
    else:
        lines += [f'    {h}' for h in hoisted]
    ind = '    '
    for k, v in enumerate(ivars):
        lines.append(f'{ind}for {v} in range(' + ('lo, hi' if chunked and not k else f'n{k}') + '):')
        ind += '    '
    lines += [ind + x for x in loads + body + stores] + _row_sums(rows, ind)
    return '\n'.join(lines) + '\n'


def _signature(graph, layouts, alias, chunked=False) -> str:
    """The kernel's @njit line: its arrays' types (inputs read-only, C-contiguous unless strided); a chunk's
    bounds lo, hi and nogil when ``chunked``."""
    sig = ', '.join([f'In({s.dtype.name!r}, {len(s.shape)}' + (', strided=True)' if lay == 'A' else ')')
                     for k, (s, lay) in enumerate(zip(graph.inputs, layouts)) if k not in alias]
                    + [f'Out({s.dtype.name!r}, {len(s.shape)})' for s in graph.outputs] + ['uintp, uintp'] * chunked)
    return f"@njit(void({sig}), cache=True, error_model='numpy'{', nogil=True' * chunked})"


_HEADER = '''"""A minigrad loop kernel (generated; see minigrad/compiler/kernels.py)."""
import numpy as np
from numba import njit, types, from_dtype


def In(dtype, ndim, strided=False):
    """An input array: read-only, C-contiguous unless strided (a view, read through its strides)."""
    return types.Array(from_dtype(np.dtype(dtype)), ndim, 'A' if strided else 'C', readonly=True)


def Out(dtype, ndim):
    return types.Array(from_dtype(np.dtype(dtype)), ndim, 'C')


void, uintp = types.void, types.uintp

'''
_APPROX_IMPORT = 'from minigrad.compiler.approx import f64_bits, bits_f64, fma, select\n\n'    # the approximations' intrinsics


@functools.lru_cache(maxsize=None)
def cache_budget() -> int:
    """An eighth of the largest CPU cache in bytes (Linux sysfs), or 4 MiB where it cannot be read: the
    arrays a kernel with approximations may stream and still be interleaved (INTERLEAVE)."""
    # speed: the budget for interleaving (from DRAM an interleaved tanh loop ran slower)
    sizes = []
    for k in range(8):
        try:
            with open(f'/sys/devices/system/cpu/cpu0/cache/index{k}/size') as f:
                m = re.fullmatch(r'(\d+)([KMG]?)', f.read().strip())
        except OSError:          # no such level, or no sysfs (macOS, Windows, Pyodide): the default
            continue
        sizes += [int(m[1]) << ' KMG'.index(m[2] or ' ') * 10] if m else []
    return max(sizes) // 8 if sizes else 4 << 20


class Kernel:
    """One compiled loop kernel: ``source`` (the loop), ``fn`` (numba), ``seconds`` it took to
    compile or load, ``origin``: 'compiled', 'disk cache' or 'memory' (already loaded),
    ``approximations``: the approx.py functions it calls (tanh, exp, log); ``interleave``: vectors per
    loop iteration forced on LLVM (INTERLEAVE), or None (LLVM's choice); ``repaired``: why its cache entry,
    found damaged, was rebuilt (None: it was not); ``serial``: why it runs serially, None when ``parallel``
    (its outer loop, ``extent`` long, is split across threads: ``fn(*arrays, lo, hi)``)."""

    def __init__(self, source, fn, seconds, origin, path, approximations=(), interleave=None, repaired=None,
                 serial='not said', extent=1):
        self._source, self.fn, self.seconds, self.origin, self.path = source, fn, seconds, origin, path
        self.approximations, self.interleave, self.repaired = tuple(approximations), interleave, repaired
        self.serial, self.extent = serial, extent

    @property
    def parallel(self) -> bool:
        return self.serial is None

    @property
    def source(self) -> str:
        if callable(self._source):      # speed: written when first read (a 20,000-op graph: ~1,000 kernels)
            self._source = self._source()
        return self._source

    def __repr__(self):
        return f'<Kernel {os.path.basename(self.path)} {self.origin} in {self.seconds * 1e3:.1f} ms>'


_PLAIN = (bool, int, float, str, type(None), np.dtype)     # params whose repr is their value, exactly


def _structure(graph, layouts, alias):
    """All kernel_source reads of `graph` (ops, wiring, params, shapes, dtypes), as a hashable key: equal
    structures give equal sources. None when a param is not plain (an array: no memo for that group)."""
    # speed: the key of build_kernel's memo (equal groups generate their code once)
    num, nodes = {}, []
    for node in graph.nodes:
        if not all(isinstance(v, _PLAIN) or type(v) is tuple and all(isinstance(i, _PLAIN) for i in v)
                   for v in node.params.values()):
            return None
        nodes.append((node.prim, tuple([num[id(i)] for i in node.inputs]), repr(sorted(node.params.items())),
                      tuple([(o.shape, o.dtype) for o in node.outputs])))
        num.update((id(o), len(num)) for o in node.outputs)
    return (tuple(nodes), tuple([num[id(s)] for s in graph.inputs]), tuple([num[id(s)] for s in graph.outputs]),
            tuple(layouts), tuple(sorted((alias or {}).items())))


def serial_why(graph, layouts, approx) -> tuple:
    """(why the kernel of `graph` runs serially, or None: its outer loop is split across threads (parallel.py);
    that loop's length). ``approx``: the approximations it calls (such a loop gains from threads sooner)."""
    full = tuple(graph.outputs[0].shape)
    size, least = int(np.prod(full)), PARALLEL_MIN_APPROX if approx else PARALLEL_MIN
    extent = size if _flat(graph, layouts) else full[0] if full else 1
    if any(_reduced(n, full) and not (n.params.get('rows') and len(n.params['axis']) < len(full))
           for n in graph.nodes if n.prim is not PLACEHOLDER):
        return "a reduction across its outer loop (kept serial: numpy's order of additions)", extent
    if size < least:
        return f'{size:,} elements, fewer than the {least:,} it takes to gain from threads' + ' (with tanh, exp or ' \
            'log)' * bool(approx), extent
    return None if extent > 1 else 'its outer loop has one iteration', extent


def _kernel_code(graph, layouts, alias):
    """(the kernel file's text, its hash, the approximations it calls, LLVM's interleave or None, why it runs
    serially or None, its outer loop's length)."""
    used = set()
    loop = kernel_source(graph, layouts, approx=used, alias=alias)
    why, extent = serial_why(graph, layouts, used)
    # speed: a large group's loop run in chunks on all threads (parallel.py), below PARALLEL_MIN serially
    if why is None:
        loop = kernel_source(graph, layouts, alias=alias, chunked=True)
    loop = re.sub(r'  # .*', '', loop)      # neutral names, no comments: one file per loop
    streamed = sum(int(np.prod(s.shape)) * s.dtype.itemsize for s in graph.inputs + graph.outputs)
    # a loop shorter than four 16-lane vectors has nothing to interleave (and 0-d kernels keep their cache key)
    # speed: LLVM told to interleave four vectors in a loop with approximations whose arrays fit the budget
    ilv = INTERLEAVE if used and np.prod(graph.outputs[0].shape) >= 64 and streamed <= cache_budget() else None
    code = _HEADER + (_APPROX_IMPORT if used else '') + (f'# LLVM: -force-vector-interleave={ilv}\n' if ilv else '') + loop
    return code, hashlib.sha1(code.encode()).hexdigest()[:20], used, ilv, why, extent


def build_kernel(graph, layouts, alias=None, memo=None) -> Kernel:
    """Generate, write, import and compile the loop kernel for `graph` (see kernel_source). ``memo``: a dict
    kept over one program's kernels: a group equal to one seen before reuses its code, not generated again."""
    if numba is None:
        raise MinigradError("backend='numba' needs numba (pip install numba); use backend='numpy' without it")
    # speed: a group equal to one seen before in this program takes its code from the memo
    shape = _structure(graph, layouts, alias) if memo is not None else None
    found = memo.get(shape) if shape is not None else None
    if found is None:
        found = _kernel_code(graph, layouts, alias)
        if shape is not None:
            memo[shape] = found
    code, key, used, ilv, why, extent = found

    def src():
        return kernel_source(graph, layouts, readable=True, alias=alias, chunked=why is None)
    path = os.path.join(cache_dir(), f'k_{key}.py')
    t0 = time.perf_counter()
    # speed: a kernel already loaded in this process, or in numba's disk cache, is not compiled again
    if key in _LOADED:
        return Kernel(src, _LOADED[key], time.perf_counter() - t0, 'memory', path, sorted(used), ilv, None, why, extent)
    repaired = _write_once(path, code)
    try:
        fn = _import(key, path, ilv)
    except Exception as e:              # noqa: BLE001 -- a damaged pickle raises about anything
        cached = _numba_cache_files(path)
        if not cached:                  # nothing cached: a real compile error
            raise
        repaired = f"numba's cache entry for it was damaged ({type(e).__name__}: {e}); it was removed"
        for f in cached:
            with contextlib.suppress(FileNotFoundError):        # (another process may have removed it first)
                os.remove(f)
        fn = _import(key, path, ilv)
    if repaired:
        warnings.warn(f'minigrad: the kernel cache entry {path} was damaged and has been rebuilt: {repaired}',
                      RuntimeWarning, stacklevel=2)
    origin = 'disk cache' if sum(fn.stats.cache_hits.values()) else 'compiled'
    return Kernel(src, fn, time.perf_counter() - t0, origin, path, sorted(used), ilv, repaired, why, extent)


def _import(key, path, ilv):
    """The kernel function of the file at `path`: numba compiles it as it is imported (its explicit signature), or
    loads it from numba's disk cache."""
    spec = importlib.util.spec_from_file_location(f'minigrad_kernel_{key}', path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # numba's cached code refers to its module by name
    try:                                     # a process-wide LLVM setting: on for this compile only (0: LLVM's choice)
        llvmlite.binding.set_option('minigrad', f'-force-vector-interleave={ilv or 0}')
        spec.loader.exec_module(module)
    finally:
        llvmlite.binding.set_option('minigrad', '-force-vector-interleave=0')
    fn = _LOADED[key] = module.kernel
    return fn


def _numba_cache_files(path) -> list:
    """numba's index and data files for the kernel file at `path`: in its __pycache__, or under NUMBA_CACHE_DIR."""
    dirs = [os.path.join(os.path.dirname(path), '__pycache__')]
    if numba.config.CACHE_DIR:
        dirs.append(os.path.join(numba.config.CACHE_DIR,
                                 numba.core.caching._CacheLocator.get_suitable_cache_subpath(path)))
    stem = glob.escape(os.path.splitext(os.path.basename(path))[0])
    return [f for d in dirs for f in glob.glob(os.path.join(glob.escape(d), f'{stem}.*.nb[ic]'))]


def _write_once(path, text) -> str | None:
    """Write the kernel file unless it holds `text` (rewriting it would invalidate numba's cache). A file there with
    other text was damaged (its name is the hash of its text): it is written again, and the reason returned."""
    try:
        with open(path, 'rb') as f:
            if f.read() == text.encode():
                return None
        repaired = 'the kernel file did not hold its source; it was written again'
    except FileNotFoundError:
        repaired = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f'{path}.{os.getpid()}.tmp'
        with open(tmp, 'wb') as f:           # bytes: the text read back (above) is the text written, on any OS
            f.write(text.encode())
        os.replace(tmp, path)               # atomic: a concurrent process sees all of it or nothing
        return repaired
    except OSError as e:
        raise MinigradError(f"backend='numba': cannot write kernels to {os.path.dirname(path)} ({e}); set "
                            f"MINIGRAD_CACHE_DIR to a writable directory, or use backend='numpy'") from None
