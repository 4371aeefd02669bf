"""In-place operators (``x += y``) and the version counter that keeps them safe (PyTorch's ``_version``).

An in-place operator computes out of place and then rebinds the tensor to the result, so an array a
TapeNode saved is never overwritten. The tensor's ``_version`` goes up by one, and its old array is
remembered as *stale*: a later backward through an op that saved that old array, recorded before the
change, refuses to run (``check_saved``) instead of computing a gradient for values that are gone.
"""
from __future__ import annotations

import functools
import weakref
from typing import NamedTuple

import numpy as np

from . import ops as P
from .autodiff import next_seq, state
from .primitive import describe
from .errors import BackwardError, ShapeError
from .functional import subtract


class Stale(NamedTuple):
    """An array a tensor held before an in-place change."""
    array: weakref.ref      # the old array (the entry goes when it is freed)
    tensor: weakref.ref     # the tensor that held it
    version: int            # the version it held
    since: int              # ops recorded from this tape sequence number on read the new array


stale: dict = {}            # id(old array) -> Stale


class InPlaceMixin:
    """Tensor's in-place operators: out of place, then rebind (never corrupt saved arrays)."""
    __slots__ = ()

    def __iadd__(self, o):
        return self._inplace(P.add, o, '+')

    def __isub__(self, o):
        return self._inplace(subtract, o, '-')

    def __imul__(self, o):
        return self._inplace(P.mul, o, '*')

    def __itruediv__(self, o):
        return self._inplace(P.div, o, '/')

    def _inplace(self, prim, other, sym):
        since = next_seq()             # the ops recorded from here on (this one's) read the old value rightly
        if self.grad_fn is None and self._requires_grad and state.grad_enabled:
            raise BackwardError(
                f"in-place '{sym}=' on {describe(self)}: it is a leaf that requires grad, and changing it "
                f'in place would make its gradient meaningless. Update parameters inside '
                f'`with mg.no_grad():`, or write x = x {sym} y to make a new tensor.')
        res = prim(self, other)     # out of place: arrays saved on a tape stay intact
        if res.data.dtype != self.data.dtype:
            if not np.can_cast(res.data.dtype, self.data.dtype, 'same_kind'):
                raise ShapeError(f"in-place '{sym}=': the result has dtype {res.data.dtype}, which cannot be "
                                 f'stored in {describe(self)}; write x = x {sym} y instead')
            res = P.cast(res, dtype=self.data.dtype)
        if res.data.shape != self.data.shape:
            raise ShapeError(f"in-place '{sym}=': the result has shape {res.data.shape} but {describe(self)} "
                             f'cannot change shape in place; write x = x {sym} y instead')
        for tape in state.tapes:        # from now on this tensor *is* the result: say so on the tape
            if tape.entries and tape.entries[-1].output is res:
                tape.entries[-1] = tape.entries[-1]._replace(output=self)
        if self.retains_grad and res.grad_fn is not None:   # retain_grad() follows the tensor (as PyTorch)
            self.grad_fn.retained, res.grad_fn.retained = None, weakref.ref(self)
        self._replace_data(res.data, since)
        if state.grad_enabled:          # under no_grad the change is unrecorded, but x keeps its history (PyTorch)
            self.grad_fn = res.grad_fn
        if res.grad_fn is not None:
            self._requires_grad = True
        return self

    def _replace_data(self, new, since=None):
        """An in-place change: bump the version and remember that the old array is stale, so a
        backward through an op recorded before ``since`` (a tape sequence number; default: now)
        that saved it refuses to use it (see ``check_saved``)."""
        old, self.data = self.data, new
        self._version += 1
        when = next_seq() if since is None else since
        stale[id(old)] = Stale(weakref.ref(old, functools.partial(_forget, id(old))), weakref.ref(self),
                               self._version - 1, when)


def _forget(key, _ref):     # the old array was freed: no saved value can be it any more
    stale.pop(key, None)


def check_saved(order):
    """PyTorch's version check: no value an op in `order` saved for backward may have changed in place
    since the op was recorded."""
    for node in order:
        saved = node.saved or ()        # freed: backward reports that itself
        for k, v in enumerate([*(v if node.prim.reads_input(j) else None for j, v in enumerate(saved)), node.out]):
            entry = stale.get(id(v))
            if entry is None or entry.array() is not v or node.seq >= entry.since:
                continue
            t = entry.tensor()
            what = f'its input {k}' if k < len(saved) else 'its output'
            raise BackwardError(
                f"backward(): a value '{node.prim.name}' saved for the gradient ({what}, "
                f"{describe(t) if t is not None else 'a tensor'}) was modified by an in-place operation: it "
                f'is now at version {t._version if t is not None else "?"}, the op saved version {entry.version}. '
                f'Compute out of place (y = x + 1, not x += 1) or call backward() before changing it.')
