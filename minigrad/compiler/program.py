"""Program: a compiled graph. Lowering (lower.py), memory planning (memory.py) and code
generation (codegen.py) turn the optimised graph into Python source, executed once to give
the function a call runs. On the numba backend, each fusion group is a loop kernel
(kernels.py) the generated function calls."""
from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from ..core.primitive import fmt_shape, hooks, refuse_pickle
from ..core.errors import FeedError, MinigradError, ShapeError
from ..core.graph import shapes_compatible, ASSIGN
from ..core.tensor import Tensor
from ..core import validate
from .approx import APPROX
from .codegen import generate, updates_in_place
from .lower import flatten, build_kernels
from .memory import plan_memory

_FILENAME = '<minigrad program>'
_byte_bounds = getattr(np.lib, 'array_utils', np).byte_bounds      # numpy 2 moved it (np.byte_bounds in 1.x)


def feed_array(value, dtype, what: str) -> np.ndarray:
    """`value` (a number, list, array or Tensor) as an array of `dtype`, as a placeholder takes it: cast
    within a kind (float64 -> float32) or from ints and bools into floats; any other cast is a FeedError
    naming `what` (Session.run's feed_dict and a Program's inputs follow this one rule).

    >>> feed_array([1, 2], np.dtype('float32'), "feed_dict value for 'x'").dtype
    dtype('float32')
    """
    value = value.data if isinstance(value, Tensor) else value
    arr = value if isinstance(value, np.ndarray) and value.dtype.kind in 'biuf' else validate.value_array(value, what)
    if arr.dtype != dtype:
        if not np.can_cast(arr.dtype, dtype, 'same_kind') and not (arr.dtype.kind in 'iub' and dtype.kind == 'f'):
            raise FeedError(f'{what}: cannot feed a {arr.dtype} value as {dtype} (casts keep the kind, or make '
                            f'ints and bools floats); convert it first, e.g. np.asarray(value, dtype={dtype.name!r})')
        arr = arr.astype(dtype)
    return arr


# The Variables some run has written: id(initial value) -> (a weak reference to that array, who wrote it first).
# export_onnx reads it: such a Variable's initial value is no longer what the graph holds.
WRITTEN: dict = {}


def note_written(variables, holder: str):
    """Record that `holder` ('a Session', 'a compiled Program') has written `variables`."""
    for v in variables:
        arr = v.node.params['initial_value']
        if id(arr) not in WRITTEN:       # the entry leaves with its array
            WRITTEN[id(arr)] = (weakref.ref(arr, lambda _, k=id(arr): WRITTEN.pop(k, None)), holder)


def _overlap(outs, inputs):
    """The index of an out array whose bytes overlap another out array's or an input's, else None. One sort
    of the byte ranges, not a may_share_memory call per pair (20 outputs, 21 inputs: 650 calls, 0.5 ms)."""
    # speed: one sort of the byte ranges, not np.may_share_memory for every pair of arrays
    spans = sorted([(*_byte_bounds(a), k) for k, a in enumerate(outs) if a.size] +
                   [(*_byte_bounds(a), -1) for a in inputs if a.size])      # -1: an input (inputs may overlap)
    end = end_out = 0
    last_out = None                     # the out array reaching furthest so far, ending at end_out
    for lo, hi, k in spans:
        if lo < (end if k >= 0 else end_out):   # an out array starts inside anything; an input inside an out
            return k if k >= 0 else last_out
        end = max(end, hi)
        if k >= 0 and hi > end_out:
            end_out, last_out = hi, k
    return None


class Program:
    """A compiled graph: call it with arrays in the order of `inputs`.

    Attributes: ``graph`` (optimised), ``history`` [(pass name, Graph)] (with the default passes and
    inputs fed at their own shapes, the 'input' snapshot holds your graph's own nodes: run its values with
    ``mg.Session(your_graph)``), ``backend`` ('numba' or 'numpy'), ``source`` (generated Python, then
    each loop kernel's source),
    ``kernels`` (numba backend: the compiled loop kernels), ``memory`` (MemoryPlan),
    ``stats`` (dict), ``inputs``, ``outputs``, ``variables`` (Variables read/assigned; their
    values live in ``state``), ``assigned`` (the Variables its assigns write).

    Every array a call returns belongs to the caller (a later call never changes it);
    ``program(*arrays, out=[...])`` writes the results into the caller's arrays instead. A Variable a loop
    kernel updates keeps one spare array, its value two calls ago, which an update writes into when the
    program alone holds it (an array you kept, from ``program.state`` or a Session, is never written).
    Calls from several threads take turns (the program's buffers are its own, one set).
    """

    __reduce_ex__ = refuse_pickle('a compiled Program', 'it holds generated code and kernels: pickle '
                                       'program.graph (a Graph pickles) or export it (mg.export_onnx), and compile '
                                       'again')

    def __init__(self, graph, history, inputs, outputs, single, variables, stats, backend='numpy'):
        self.graph, self.history, self.inputs, self.outputs = graph, history, inputs, outputs
        self.variables, self.stats, self._single, self.backend = variables, stats, single, backend
        self._lock = threading.Lock()
        self.state = [np.array(v.node.params['initial_value'], order='C') for v in variables]   # as kernels read it
        var_keys = [id(v.node.params['initial_value']) for v in variables]
        vals, allv, steps = flatten(graph, graph.inputs, var_keys, backend)
        ivals = [vals[id(s)] for s in graph.inputs]
        ovals = [vals[id(s)] for s in graph.outputs]
        self.memory = plan_memory(allv, steps, ovals)
        self.assigned = [variables[st.ins[0].const] for st in steps if st.prim is ASSIGN]
        self.kernels = build_kernels(steps, set(updates_in_place(steps, ovals)) | {id(v) for v in ovals})
        driver, consts, self._line_where = generate(ivals, ovals, allv, steps, single)
        self._driver, self._source = driver, None
        self.stats.update(steps=len(steps), backend=backend, kernels=len(self.kernels),
                          kernel_seconds=[round(k.seconds, 4) for k in self.kernels],
                          kernel_origin=[k.origin for k in self.kernels],
                          approximations={a: APPROX[a][0] for k in self.kernels for a in k.approximations},
                          kernel_cache_repaired={k.path: k.repaired for k in self.kernels if k.repaired},
                          parallel=[i for i, k in enumerate(self.kernels) if k.parallel],     # kernel indices
                          serial={i: k.serial for i, k in enumerate(self.kernels) if not k.parallel})
        ns = {}
        exec(compile(driver, _FILENAME, 'exec'), ns)    # noqa: S102 -- our own source
        shapes = [(fmt_shape(s.shape), s.shape, s.dtype) for s in graph.inputs]
        bufs = [np.empty(s, d) for s, d in self.memory.buffer_shapes]
        self._conv = self._converter(shapes)
        self._run = ns['build'](np, bufs, consts, self._conv)

    @property
    def source(self) -> str:
        """The generated driver, then each loop kernel's source (written when first read)."""
        if self._source is None:        # speed: joined when first read, not for every program compiled
            self._source = self._driver + ''.join(
                f'\n\n# ---- kernel {k}: {os.path.basename(kern.path)} (numba)\n{kern.source}'
                for k, kern in enumerate(self.kernels))
        return self._source

    def _converter(self, shapes):
        names = [s.name for s in self.inputs]

        def conv(i, x):
            fs, shape, dt = shapes[i]
            arr = feed_array(x, dt, f"Program: input {i} ('{names[i]}')")
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
            if not shapes_compatible(shape, arr.shape):
                raise FeedError(f"Program: input {i} ('{names[i]}') has shape {fmt_shape(arr.shape)} but the "
                                f'program was compiled for {fs}. Compile again for this shape (mg.jit and '
                                f'Session.run do that for you).')
            return arr
        return conv

    def __call__(self, *arrays, out=None):
        if len(arrays) != len(self.inputs):
            raise FeedError(f'Program takes {len(self.inputs)} inputs '
                            f'({", ".join(s.name for s in self.inputs)}), got {len(arrays)}')
        res = self.run(arrays, self.state, out)
        note_written(self.assigned, 'a compiled Program')
        return res

    def run(self, arrays, state: list, out=None):
        """Run with explicit Variable ``state`` (a list, updated by assigns); Session uses this.
        ``out``: arrays (one per output, or one array for a single output) to write results into."""
        # converted before taking the lock: an input's __array__ may call this program again
        arrays = [a if type(a) is np.ndarray else self._conv(i, a) for i, a in enumerate(arrays)]
        if out is not None:
            out = self._check_out(out, arrays)
        try:
            with self._lock:
                return self._run(*arrays, state, out)
        except MinigradError:
            raise
        except Exception as e:
            raise self._runtime_error(e) from None

    def _check_out(self, out, arrays) -> list:
        outs = [out] if self._single and isinstance(out, np.ndarray) else out
        if not isinstance(outs, (list, tuple)) or len(outs) != len(self.outputs):
            raise FeedError(f'Program: out= takes {len(self.outputs)} numpy array(s), one per output, got {out!r:.60}')
        for k, (a, s) in enumerate(zip(outs, self.graph.outputs)):
            if not isinstance(a, np.ndarray) or a.dtype != s.dtype or (s.shape is not None and None not in s.shape
                                                                       and a.shape != s.shape):
                got = f'{a.dtype} {fmt_shape(a.shape)}' if isinstance(a, np.ndarray) else type(a).__name__
                raise FeedError(f"Program: out[{k}] for '{self.outputs[k].name}' must be a {s.dtype} array of shape "
                                f'{fmt_shape(s.shape)}, got {got}')
            if not (a.flags.c_contiguous and a.flags.writeable):
                raise FeedError(f"Program: out[{k}] for '{self.outputs[k].name}' must be a writeable C-contiguous "
                                f'array (np.empty(shape, dtype) is)')
        k = _overlap(outs, [x for x in arrays if isinstance(x, np.ndarray)])
        if k is not None:        # results are written while inputs are read: no overlaps
            raise FeedError(f'Program: out[{k}] shares memory with an input or another out array; give each '
                            f'result its own array')
        return list(outs)

    def _runtime_error(self, exc) -> ShapeError:
        """Name the generated line (and so the node, in its comment) where numpy failed."""
        tb, line, defined = exc.__traceback__, None, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == _FILENAME:
                line = self.source.splitlines()[tb.tb_lineno - 1].strip()
                defined = self._line_where.get(tb.tb_lineno)
            tb = tb.tb_next
        where = f' at generated line `{line}`' if line else ''
        where += f' (the op {defined})' if defined else ''
        shapes = ', '.join(f'{s.name}: {fmt_shape(s.shape)}' for s in self.inputs)
        return ShapeError(f'compiled program failed{where}: {type(exc).__name__}: {exc}. It was compiled for '
                          f'inputs {shapes}; print(program.source) shows the generated code.')

    def __repr__(self):
        return (f'<Program {len(self.inputs)} inputs -> {len(self.outputs)} outputs, '
                f'{self.stats["nodes_before"]} -> {self.stats["nodes_after"]} nodes, '
                f'{self.memory.num_buffers} buffers>')

    def _repr_mimebundle_(self, include=None, exclude=None):
        return hooks.display(self)
