"""Memory planning: liveness over the schedule, then a pool of buffers reused once a value's
last use has passed (in place when an input dies at the ufunc that consumes it)."""
from __future__ import annotations

import numpy as np

INF = 1 << 60


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


def _liveness(steps, outputs):
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


class _Pool:
    """Buffers by (shape, dtype); ``dyn`` counts buffers whose shape is only known at run time."""

    def __init__(self):
        self.free, self.keys, self.dyn = {}, [], 0

    def assign(self, v, st, s):
        key = (v.shape, v.dtype) if v.known else None
        dying = [i for i in st.ins if i.kind == 'temp' and i.last == s and (i.buf is not None or i.dbuf is not None)
                 and i.dtype == v.dtype and (key is None or (i.shape, i.dtype) == key)]
        taken = {o.buf for o in st.outs if o.buf is not None}     # a kernel's other results took these
        dying = [i for i in dying if i.buf is None or i.buf not in taken]
        if st.inplace and dying and (key is None) == (dying[0].buf is None) \
                and v.shape == st.outs[0].shape:     # a ufunc or kernel may write in place (not a kernel's reduction)
            v.buf, v.dbuf, v.ref = dying[0].buf, dying[0].dbuf, dying[0]
        elif key is None:
            v.dbuf, self.dyn = self.dyn, self.dyn + 1
        elif self.free.get(key):
            v.buf = self.free[key].pop()
        else:
            v.buf = len(self.keys)
            self.keys.append(key)

    def release(self, st, s):
        taken = {v.buf for v in st.outs if v.buf is not None}
        for i in {id(i): i for i in list(st.ins) + list(st.outs)}.values():
            if i.kind == 'temp' and i.buf is not None and i.last == s and i.buf not in taken:
                self.free.setdefault((i.shape, i.dtype), []).append(i.buf)


def _assignment(allv) -> dict:
    out = {}
    for v in allv:
        if v.buf is not None:
            out[v.name] = f'buf{v.buf}'
        elif v.dbuf is not None:
            out[v.name] = f'dyn{v.dbuf}'
        elif v.kind in ('input', 'const', 'state') and v.first == -1:
            out[v.name] = v.name
    return out


def plan_memory(allv, steps, outputs) -> MemoryPlan:
    """Give every temp value a buffer; count buffers and bytes against the naive plan."""
    _liveness(steps, outputs)
    pool = _Pool()
    for s, st in enumerate(steps):
        for v in st.outs:
            if v.kind == 'temp':
                pool.assign(v, st, s)
        pool.release(st, s)
    once = list({v.name: v for v in allv}.values())      # a constant a fused kernel reads appears twice: count once
    held = [v for v in once if v.kind in ('input', 'const', 'state') and v.first == -1]
    naive = [v for v in once if v.kind != 'view' and not (v.kind == 'state' and v.first >= 0)]
    fresh = [v for v in allv if v.kind == 'alias']
    unknown = any(v.nbytes is None for v in naive)
    pooled = sum(int(np.prod(k[0], dtype=np.int64)) * k[1].itemsize for k in pool.keys)
    return MemoryPlan(
        naive_num_buffers=len(naive), num_buffers=len(held) + len(pool.keys) + pool.dyn + len(fresh),
        naive_peak_bytes=None if unknown else sum(v.nbytes for v in naive),
        peak_bytes=None if unknown or pool.dyn or any(v.nbytes is None for v in fresh) else
        sum(v.nbytes for v in held) + pooled + sum(v.nbytes for v in fresh),
        assignment=_assignment(allv), buffer_shapes=[(k[0], str(k[1])) for k in pool.keys],
        liveness={v.name: (v.first, None if v.last >= INF else v.last) for v in allv},
        schedule=[f'{", ".join(o.name for o in st.outs)} = {st.op}({", ".join(i.name for i in st.ins)})'
                  for st in steps])
