"""The graph compiler: an explicit pipeline of named passes (Graph -> Graph, one file each:
prune, fold, cse, specialize, simplify, fuse; listed in pipeline.py), then lowering to a
schedule (lower.py), memory planning (memory.py) and code generation (codegen.py) into a
`Program` (program.py). The ops only the compiler introduces are declared in ops.py.

>>> import minigrad as mg
>>> g = mg.Graph()
>>> with g.as_default():
...     w = mg.placeholder(name='w'); x = mg.placeholder(name='x'); b = mg.placeholder(name='b')
...     y = w * x + b
>>> prog = mg.compile(y, [w, x, b])
>>> [n.op for n in prog.graph.nodes]
['placeholder', 'placeholder', 'placeholder', 'fma']
>>> prog.memory.naive_num_buffers, prog.memory.num_buffers
(5, 4)
>>> float(prog(2.0, 3.0, 1.0))
7.0

Your own pass: any function Graph -> Graph (build a new graph, e.g. with ``rebuild``),
given by itself or by a name registered with ``register_pass``:
``mg.compile(y, [w, x, b], passes=DEFAULT_PASSES + [my_pass])``.

Speed ledger.

The plain route is the one described above: each pass copies the graph it is given, each kernel is generated
from its group and compiled, the driver calls numpy and returns fresh arrays. Each item below takes a faster
route to the same values, is marked ``# speed:`` where it lives, and names the benchmark row that shows it and
the gain as measured, with the date and commit of the measurement ('not measured' where none was recorded).
Rows are scripts/bench.py's case names: scale = 'gradients of a 20000-op chain: build+compile+run vs tape'
(its target 'compile cost 20000 ops: static / tape'; times are its gradients + Session); warm = '20000-op
chain in a fresh process, cold vs warm kernel cache'; tanh N = 'tanh chain fwd+bwd NxN (k kernels)'; tanh
cold = 'tanh chain 64x64: compile in a fresh process, empty kernel cache'; chain N = 'chain 30 ops fwd+bwd
NxN'; MLP B = 'MLP step batch B'; MLP rest = 'MLP step batch 64: all but the matmuls (each step timed)';
fused = 'relu(a*b+c)*d-e, 1e+06 float32'.

1. __init__.py ``_import``: with the default passes and inputs fed at their own shapes, the passes start from
   the user's own nodes instead of a copy of every one (the built-in passes never edit their input). scale:
   12.0 -> 10.6 s (medians of three alternating runs of three), 57x -> 50x the tape (2026-11-28, 7a6938a).
2. __init__.py ``compile``: runs with the cyclic garbage collector paused (graph.without_gc), whose full
   collections scan the growing graph again and again. scale: with item 27 and verify's shape-rule memo,
   28.5 -> 18.5-20 s of CPU, 81-89x -> 62-65x the tape (2026-11-27, 8b0587c, a09e6cc); alone not measured
   (core/graph.py's without_gc says collections took 2/3 of compiling the 20,000-op chain).
3. pipeline.py ``run_pipeline``: the check after each pass shares one shape-rule memo across the passes (most
   nodes are copies) and skips a pass that returned its input. scale: with items 6, 11 and 23 (and verify's
   own savings), 19.5 -> 11.8 s of CPU, 103x -> 58-64x the tape (2026-11-27, 26f6c7b, cb61217); alone not
   measured.
4. rewrite.py ``rewrite_pass``, fold.py ``fold_constants``, specialize.py ``specialize``, prune.py ``prune``,
   fuse.py ``_group``: a pass with nothing to do returns the graph it was given instead of a copy (a rewrite
   pass tries its rules on the graph as it is first). scale: not measured (so since 2026-11-23, d451ece).
5. rewrite.py ``copy_node``: a copy onto inputs of the node's shapes and dtypes keeps its avals (no shape-rule
   call), and a one-output node skips the loop over the others. scale: 3.01 -> 2.73 us a copy (medians of 5
   interleaved; about 530,000 copies compile the 20,000-op chain) (2026-11-28, 8c3d050); the kept avals not
   measured.
6. rewrite.py ``uniform``: a one-element constant is compared by Python's float comparisons, not numpy's
   all and signbit reductions. scale: in item 3's total (2026-11-27, 26f6c7b); alone not measured.
7. cse.py ``cse.key``: a node without params keys as () without a ``_key`` call. scale: one cse of the
   110,003-node graph 1.07 -> 0.92 s (medians of 3) (2026-11-28, f993181).
8. cse.py ``cse``: keys computed up to the first repeated one, then the rebuild (the graph itself when none
   repeats), not every node's key first. scale: one cse of the 110,003-node graph 0.81 -> 0.65 s (medians of
   3 interleaved) (2026-11-28, 96ca1bd).
9. prune.py ``prune_new``: the dead nodes of a graph a pass made itself (simplify's rounds, fuse after its fma
   rewrite) dropped in place, not its live nodes copied again. scale: nodes made compiling the chain's
   gradient 425,401 -> 285,394; measured together with mg.gradients making no no-op nodes, medians 9.9-11.4
   -> 7.4-8.8 s (2026-11-28, bf2d393).
10. fuse.py ``MAX_GROUP``: a cap on a group's ops (a kernel's cold compile is about linear in its ops: 64 ops
   2.6 s, 96 ops 3.9 s), 96 so that the ten-layer tanh chain's 68 ops make one kernel. tanh N, compiled /
   numpy at 64^2 / 256^2 / 1024^2, cap 64 -> 96: 0.488-0.490 / 0.530-0.549 / 0.567-0.595 -> 0.460-0.461 /
   0.459-0.511 / 0.551-0.596 (alternating runs) (2026-11-28, 979e25d).
11. fuse.py ``_open_piece``: a group that reached MAX_GROUP continues in the group its overflow opened, not a
   new group for each op that reads it. scale: 10,305 -> 938 kernels, a driver of 12,500 lines, not 40,600
   (its compile 4.3 -> 0.7 s); in item 3's total (2026-11-27, 26f6c7b).
12. rules.py ``_lower_matmul``: a matmul whose contracted dim is 1 (an outer product) as a broadcast multiply,
   which may fuse, with the same values. MLP 1: not measured in the compiler (on the tape, numpy's matmul ran
   this product 4x slower at 784x256: the tape's ledger, outer_matmul).
13. rules.py ``_lower_sum_to_like``: a sum that drops its axes when that gives ref's shape, not a keepdims sum
   and a reshape step. MLP 64 and 1: the matmul epilogues together (items 13-18): compiled / numpy 0.98-1.03
   -> 0.93 at batch 64 (the non-matmul time 0.51x numpy's), 0.21 -> 0.18 at batch 1 (2026-11-27/28,
   64909c8 .. 31b532d); alone not measured.
14. rules.py ``_emit_method``: reshape and transpose emitted as the array's methods, not np.reshape and
   np.transpose (which wrap them). MLP 64: a call 10x cheaper (2026-11-27, 64909c8); in item 13's total.
15. rules.py ``GROUP.emit``: a group's value is a store of True into its buffer, not a call of its impl. MLP B
   (the step's group of assigns): not measured (2026-11-28, 8a124cd); in item 13's total.
16. lower.py ``_Flattener.kernel_input`` / ``_drop_unread_views``: a loop kernel reads a broadcast view's
   base, broadcast in its loop, and a view step nothing else reads is dropped. MLP 64: in item 13's total;
   alone not measured.
17. lower.py ``_Flattener.absorb``, kernels.py ``_row_sums``: a reduction of a kernel's result (a bias
   gradient's column sum, softmax's row max and row sum, a small loss's total) is accumulated by that kernel,
   rows and totals added after their loop in numpy's pairwise order (the loop stays vectorised), not a numpy
   reduce over the stored result. MLP 64: in item 13's total; MLP rest: softmax's exp kernel and its row sum
   2.1 + 6.0 -> 2.5 us (one run of scripts/mlp_split.py --steps, 2026-11-28, bb7bbff); totals (up to ROW_SUM
   elements): not measured (2026-11-28, 209f344).
18. lower.py ``build_kernels``: a result computed in place reads that input from its own array (kernels are
   built after memory planning), not from a second, overlapping parameter, with which LLVM ran the scalar
   loop, 3-5x slower (a kernel's time, 2026-11-28, 31b532d; no row recorded); in item 13's total.
19. kernels.py ``_memory_check``: LLVM's limits on runtime overlap checks raised to 4096 at import, so a loop
   over dozens of arrays (a fused backward) is still vectorised. chain N: without it the loop ran 4x slower,
   scalar (the figure in the comment there, 2026-11-23, bcd0017; no row recorded).
20. kernels.py ``kernel_source``: one flat loop over all elements when every array has the result's shape and
   is C-contiguous, not a loop per axis. fused: not measured (2026-11-23, bcd0017).
21. kernels.py ``_structure`` / ``build_kernel``: equal fusion groups of a program generate their kernel code
   once (a memo keyed by all that kernel_source reads). scale: build_kernels 0.73 -> 0.16 s (the chain's
   kernels come in 4 shapes) (2026-11-28, f07fe84); with items 5, 7, 8 and inlining since undone, 60x ->
   about 56x the tape.
22. kernels.py ``build_kernel`` / ``_namer``: a kernel is keyed by the hash of its neutral source (values
   named x0, t3, ..., no comments), so one loaded before in this process, or in numba's disk cache, is not
   compiled again. warm: no value recorded; all lessons ran in 78 s on a fresh kernel cache, 59 s on a
   warmed one (2026-11-27, 841bb2b, 588c313).
23. kernels.py ``Kernel.source`` / ``kernel_source``, program.py ``Program.source``: the readable sources (the
   values' names, comments) are written when first read, not for every kernel and program. scale: the
   comments in item 3's total (2026-11-27, cb61217); the rest not measured (2026-11-27, 4687efe).
24. kernels.py ``_kernel_code`` / ``cache_budget``: a kernel with approximations over 64+ elements whose
   arrays fit an eighth of the largest cache is compiled with LLVM's -force-vector-interleave=4 (INTERLEAVE),
   not one vector per iteration: its loop is latency-bound. tanh 64, 256: the kernel 46.8 -> 29.8 us at
   64^2, 680 -> 510 us at 256^2 (2026-11-28, 832b517); with item 32's replacement, tanh N compiled / numpy
   medians 0.665 -> 0.483 / 0.676 -> 0.538 / 0.563 -> 0.567 at 64^2 / 256^2 / 1024^2 (2026-11-28, 567f4a7).
   An eighth, not half: on the 2-CPU VM interleaving ran the kernel 0.58-0.90x as long up to 160^2 but
   1.5-2.4x at 256^2 (2026-11-28, b2569a0).
25. approx.py ``call``: tanh, exp and log inside a loop kernel by vectorisable approximations (range
   reduction, fma polynomials, selects), not numpy calls outside the group (numba's libm call would keep the
   loop scalar). tanh N: the chain compiles to 2 kernels, was one per tanh (2026-11-27, 4bbce99); its time
   before was not recorded: not measured.
26. approx.py ``pasted``: an approximation pasted into the loop in single-assignment form with ``select`` for
   its conditionals, not a call of a helper function. tanh cold: a kernel with 30 float32 tanhs compiled cold
   in 10.5-11.5 s as @njit(inline='always') helpers, 3.5-4.1 s pasted (measured interleaved, 2026-11-27,
   d125e5c); plain @njit helpers compile fast, but are not inlined into a large kernel, which then runs 7x
   slower (approx.py's docstring).
27. approx.py ``_template``: each approximation's pasted lines built once and filled in per kernel, not its
   source read and rewritten for every kernel (4 ms a kernel: 16 s of an 8,000-op chain's compile). scale:
   89-101x -> 62-65x the tape (2026-11-27, 885b807).
28. codegen.py ``Codegen.fn``: each numpy function bound once as a local of the driver (np_add), not looked
   up as np.add at every call. chain 4: not measured (the driver's form since 2026-11-23, d451ece).
29. codegen.py ``MANY_BUFFERS``: a driver with more than 1,024 buffers reads them as B[i], not one closure
   variable each (CPython's compile is quadratic in those). scale: the chain's driver (9,985 buffers)
   compiled in 0.69 -> 0.11 s (2026-11-28, 49d2ff8).
30. codegen.py ``updates_in_place``: a kernel writes a Variable's new value straight into its new state
   array, not into a buffer the assign then copies. MLP B: not measured (2026-11-23, 9b8a0ac).
31. codegen.py ``Codegen.spares``: a Variable a kernel updates keeps a spare array (its value two calls ago)
   that the next update writes into when the program alone holds it, not a new array each step. MLP 64 (the
   target 'MLP batch 64: transient KiB per call'): 920 -> 1.5 KiB per call (2026-11-28, 39956f0); its time
   not measured.
32. codegen.py ``Codegen.returns`` / ``Codegen.bind_outputs``: a result's planned buffer is handed to the
   caller as it is (not copied) and replaced as the next call starts, in memory the caller has freed by then,
   not as the call ends (new pages from the system each call). tanh N: the replacement measured with item
   24's interleaving (its medians there; 2026-11-28, d4aef95); the hand-off not measured.
33. program.py ``_overlap``: ``out=``'s check that no arrays overlap sorts their byte ranges once, not a
   may_share_memory call per pair. No row times out=: 374-594 -> 150-222 us for the tanh chain's 20 outputs
   and 21 inputs (its call without out= takes 89-124 us) (2026-11-28, b2569a0).
34. kernels.py ``_kernel_code`` / ``PARALLEL_MIN``, parallel.py ``launch``: a kernel whose loop covers
   PARALLEL_MIN elements (PARALLEL_MIN_APPROX with tanh, exp or log) and accumulates nothing across its outer
   loop takes that loop's bounds and releases the GIL; launch splits it into chunks that the calling thread and
   mg.set_num_threads() - 1 workers take, not the whole loop on one core. Same code per element for any thread
   count: bit-identical results.
   fused, 1 -> 2 threads (bench.py --cores, 3 alternating runs, the other CPU idle): 854 -> 542 us at 1e6
   (0.64x; a numba prange loop on omp 0.50x), 18.3 -> 10.7 ms at 1e7 (0.58x; prange 0.58x) (2026-12-08, not
   yet committed).
"""
from __future__ import annotations

import os

from ..core.errors import FeedError, GraphError
from ..core.graph import Graph, Symbol, PLACEHOLDER, VARIABLE, ASSIGN, without_gc, needed_nodes, one_graph
from . import rules  # noqa: F401  (first: fills the compiler fields of the primitives' records)
from .cse import cse
from .fold import fold_constants
from .fuse import fuse
from . import kernels
from .memory import MemoryPlan
from .ops import fma, fused
from .pipeline import PASSES, DEFAULT_PASSES, register_pass, run_pipeline
from .program import Program
from .prune import prune
from .rewrite import rebuild, emit, copy_node, stand_in
from .simplify import simplify
from .specialize import specialize


def _check(outputs, inputs):
    one_graph('compile', list(outputs) + list(inputs), 'outputs and inputs are Symbols of one graph')
    for s in inputs:
        if s.node.prim is not PLACEHOLDER and s.node.prim is not VARIABLE:
            raise GraphError(f"compile: input '{s.name}' is the result of a '{s.op}' op; inputs must be "
                             f'placeholders (or Variables, to feed them)')


def _import(outputs, inputs, input_shapes, own_passes=True):
    """The function graph: only what the outputs need; inputs become its placeholders (``own_passes``: a
    pipeline other than the default one will run on it)."""
    _check(outputs, inputs)
    in_ids = {id(s) for s in inputs}
    needed = needed_nodes(outputs[0].graph, outputs)
    for node in needed:
        o = node.outputs[0]
        if node.prim is PLACEHOLDER and id(o) not in in_ids:
            raise FeedError(f"compile: the outputs need placeholder '{o.name}' (shape {o.shape}), which is not "
                            f'in inputs; add it to the inputs list')
    src = Graph('program')
    src.nodes = [s.node for s in inputs if s.node not in needed] + needed
    src.inputs, src.outputs = list(inputs), list(outputs)
    if input_shapes is not None and len(input_shapes) != len(inputs):
        raise FeedError(f'compile: input_shapes has {len(input_shapes)} entries for {len(inputs)} inputs; give '
                        f'one shape (or None) per input')
    shapes = {id(s): s.shape if input_shapes is None or input_shapes[k] is None else tuple(input_shapes[k])
              for k, s in enumerate(inputs)}

    # speed: the built-in passes never edit their input, so with nothing to rewrite they start from the user's
    # own nodes (one copy of a 100,000-node graph fewer); a learner's pass gets a copy it may break.
    if not own_passes and all(s.node.prim is PLACEHOLDER and shapes[id(s)] == s.shape for s in inputs):
        return src

    def rw(node, ins, g):
        o = node.outputs[0]
        if id(o) in shapes:        # an input (a fed Variable becomes a placeholder)
            return [stand_in(g, o, shapes[id(o)])]
        if node.prim is ASSIGN and id(node.inputs[0]) in shapes:    # as TF1: the step reads the fed value,
            var = copy_node(g, node.inputs[0].node, [])                # and the assign still updates the Variable
            return copy_node(g, node, [var[0], ins[1]])
        return None
    return rebuild(src, rw)


def _all_nodes(g):
    for n in g.nodes:
        yield n
        if n.prim is fused:
            yield from _all_nodes(n.params['graph'])


def _variables(source: Graph, g: Graph) -> list:
    """The original Variables the compiled graph reads or assigns, in order of appearance."""
    originals = {id(n.params['initial_value']): n.outputs[0] for n in source.nodes if n.prim is VARIABLE}
    found = {}
    for node in _all_nodes(g):
        if node.prim is VARIABLE and id(node.params['initial_value']) in originals:
            var = originals[id(node.params['initial_value'])]
            found.setdefault(id(var), var)
    return list(found.values())


def default_backend() -> str:
    """``MINIGRAD_BACKEND`` when set, else 'numba' when numba imports, else 'numpy'."""
    return os.environ.get('MINIGRAD_BACKEND') or ('numba' if kernels.available() else 'numpy')


def _backend(backend) -> str:
    backend = default_backend() if backend is None else backend
    if backend not in BACKENDS:
        raise GraphError(f'compile: unknown backend {backend!r}; use one of {", ".join(map(repr, BACKENDS))}')
    if backend == 'numba' and not kernels.available():
        raise GraphError("compile: backend='numba' needs numba (pip install numba); backend='numpy' runs "
                         'without it')
    return backend


# speed: run with the cyclic garbage collector paused (its full collections rescan the growing graph)
@without_gc
def compile(outputs, inputs=(), passes=None, *, input_shapes=None, backend=None) -> Program:
    """Compile the sub-graph computing `outputs` from the placeholders `inputs` (in call order).

    ``passes``: None (the default pipeline ``DEFAULT_PASSES``) or a list of pass functions
    or names. ``input_shapes``: concrete shapes to specialise for (None dims resolved).
    ``backend``: 'numba' (each fusion group one compiled loop kernel) or 'numpy' (one numpy
    call per op); None = ``default_backend()``. Returns a `Program`: ``program(*arrays)``
    gives numpy values (one array for a single Symbol, else a list)."""
    backend = _backend(backend)
    single = isinstance(outputs, Symbol)
    if not single and not isinstance(outputs, (list, tuple)):
        raise GraphError(f'compile: outputs must be a Symbol or a list of Symbols, got {type(outputs).__name__}')
    outs = [outputs] if single else list(outputs)
    inputs = [inputs] if isinstance(inputs, Symbol) else list(inputs)
    if not outs:
        raise GraphError('compile: no outputs given')
    g0 = _import(outs, inputs, input_shapes, passes is not None).verify()
    g, history, counts, declined = run_pipeline(g0, passes)
    nodes = list(_all_nodes(g))
    stats = {'nodes_before': len(g0.nodes), 'nodes_after': len(g.nodes), 'passes': counts,
             'fma': sum(n.prim is fma for n in nodes), 'fused': sum(n.prim is fused for n in nodes),
             'fused_kernels': sum(n.prim is fused or n.prim is fma for n in g.nodes), 'declined': declined}
    return Program(g, history, inputs, outs, single, _variables(outs[0].graph, g), stats, backend)


BACKENDS = ('numba', 'numpy')

__all__ = ['compile', 'default_backend', 'BACKENDS', 'Program', 'MemoryPlan', 'DEFAULT_PASSES', 'PASSES', 'register_pass', 'prune',
           'fold_constants', 'cse', 'simplify', 'specialize', 'fuse', 'rebuild', 'emit', 'copy_node']
