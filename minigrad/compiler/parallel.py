"""Parallel loop kernels (numba backend): a large fusion group's kernel takes the bounds ``lo, hi`` of its outer
loop and releases the GIL (numba ``nogil=True``); ``launch`` splits the loop into chunks (CHUNKS per thread) that
the calling thread and a pool of worker threads take in order, each the next one nobody has taken, and waits for all.

Why chunks on our own threads, not numba's ``parallel=True`` / ``prange`` (measured on the 2-CPU VM, 2026-12-08):
the chunked kernel is the serial kernel with two more arguments, compiled once in the same time (prange compiled a
32-op loop in 2.1 s, the chunked one 0.8 s, as the serial one); each element is computed by the same code for any
thread count (bit-identical results); Python threads are safe when one or many programs are called from several
threads at once (numba's default ``workqueue`` layer is not; it picks omp where libgomp is installed, tbb needs a
package). The price: our threads sleep between launches and pass the GIL, 40-90 us a hand-over here, where omp's
spin. With the other CPU idle, relu(a*b+c)*d-e at 1e6 / 1e7 elements ran on 2 threads in 0.63-0.66x / 0.58-0.60x
its 1-thread time, a prange loop on omp in 0.48-0.51x / 0.55-0.57x (scripts/bench.py --cores, 3 runs); with
another process on a CPU, prange on omp ran 1.7-24x its serial time, the chunks up to 2x.
Kernels that accumulate across their outer loop (a column sum, a total) stay serial: numpy's order of additions.

``set_num_threads(n)`` sets how many threads a launch uses (default: ``MINIGRAD_NUM_THREADS``, else 1: serial);
1 runs every kernel serially in the calling thread. Opt-in, because a program that returns fresh outputs makes
the threads fault in fresh pages together, and on the 2-CPU VM that ran relu(a*b+c)*d-e at 1e7 elements in bursts
of 63-68 ms per call against 19 ms serial (10.5 ms between bursts; with ``out=`` 7.6 ms steadily).
"""
from __future__ import annotations

import numbers
import os
import queue
import threading

from ..core.errors import InputError

try:
    import numba
except ImportError:        # the numpy backend runs without numba (and serially)
    numba = None

_JOBS: queue.SimpleQueue = queue.SimpleQueue()     # (kernel, a launch's jobs): one for each worker it wants
_WORKERS: list = []
_GROW = threading.Lock()
# Chunks per thread: one. Four, taken by whichever thread came free first, gained nothing when a core was busy and
# ran a*b+c at 2^18 elements on 2 threads in 1.56-1.72x its serial time, not 1.14-1.37x (more calls under the GIL).
CHUNKS = 1
_threads = None             # set_num_threads's n (None: read MINIGRAD_NUM_THREADS, else 1, when first needed)


def cores() -> int:
    """The cores numba sees (``NUMBA_NUM_THREADS``: by default the CPUs this process may run on)."""
    return int(numba.config.NUMBA_NUM_THREADS) if numba is not None else os.cpu_count() or 1


def _checked(n, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise InputError(f'{what} must be a whole number of threads >= 1 (1: every kernel serial), got {n!r:.40}')
    return int(n)


def set_num_threads(n) -> None:
    """Run each parallel loop kernel on ``n`` threads (1: serially); the results are the same for any ``n``.
    Where other processes keep the cores busy, 1 is faster: a worker they preempt holding a chunk is waited for
    (on the 2-CPU VM with another process on one CPU, parallel kernels took up to 2x their serial time)."""
    global _threads
    _threads = _checked(n, 'set_num_threads: n')


def get_num_threads() -> int:
    """The threads a parallel kernel runs on: set_num_threads's, else ``MINIGRAD_NUM_THREADS``, else 1."""
    global _threads
    if _threads is None:
        env = os.environ.get('MINIGRAD_NUM_THREADS', '').strip()
        if env and not env.isdigit():
            raise InputError(f'MINIGRAD_NUM_THREADS={env!r}: set it to a whole number of threads >= 1, or unset it')
        _threads = _checked(int(env), 'MINIGRAD_NUM_THREADS') if env else 1
    return _threads


def _work():
    while True:
        _take(*_JOBS.get())


def _take(kernel, jobs):
    """Run each chunk of a launch that no thread has taken yet (the launching thread and t - 1 workers all do)."""
    for job in jobs:
        if job[0].acquire(blocking=False):
            try:
                kernel(*job[3])
            except BaseException as e:  # noqa: BLE001 -- handed to the launching thread, which raises it
                job[2] = e
            job[1].release()


def _grow(n: int):
    """At least n worker threads (daemons: they wait for chunks while the process lives)."""
    with _GROW:
        while len(_WORKERS) < n:
            _WORKERS.append(threading.Thread(target=_work, name=f'minigrad-kernel-{len(_WORKERS)}', daemon=True))
            _WORKERS[-1].start()


def launch(kernel, n: int, *args):
    """``kernel(*args, lo, hi)`` over the outer loop's ``[0, n)`` on get_num_threads() threads, this one included:
    CHUNKS chunks per thread, each taken by whichever thread is free first (a chunk whose worker has not started
    when this thread is done runs here)."""
    # speed: the loop split across the threads, the GIL released while each chunk runs
    t = min(_threads or get_num_threads(), n)
    if t <= 1:
        return kernel(*args, 0, n)
    k = min(n, CHUNKS * t)
    cut = [n * j // k for j in range(k + 1)]
    jobs = [[threading.Lock(), threading.Lock(), None, (*args, lo, hi)] for lo, hi in zip(cut, cut[1:])]
    for job in jobs:                # [taken, released once run, its error, its arguments]
        job[1].acquire()
    _grow(t - 1)
    for _ in range(t - 1):
        _JOBS.put((kernel, jobs))
    _take(kernel, jobs)
    for job in jobs:                # the last chunks may still run on a worker: wait for all
        job[1].acquire()
        if job[2] is not None:
            raise job[2]


def _forget_workers():
    """In a forked child the workers are gone (only the forking thread survives): start new ones when needed."""
    global _JOBS, _GROW
    _JOBS, _GROW = queue.SimpleQueue(), threading.Lock()
    _WORKERS.clear()


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_forget_workers)
