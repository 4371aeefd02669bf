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
        # the ops recorded from here on (this one's) read the old value rightly
        since = next_seq()
        if self.grad_fn is None and self._requires_grad and state.grad_enabled:
            raise BackwardError(
                f"in-place '{sym}=' on {describe(self)}: it is a leaf that requires grad, and "
                f'changing it in place would make its gradient meaningless. Update parameters '
                f'inside `with mg.no_grad():`, or write x = x {sym} y to make a new tensor.')
        res = prim(self, other)     # out of place: arrays saved on a tape stay intact
        if res.data.dtype != self.data.dtype:
            if not np.can_cast(res.data.dtype, self.data.dtype, 'same_kind'):
                raise ShapeError(f"in-place '{sym}=': the result has dtype {res.data.dtype}, "
                                 f'which cannot be stored in {describe(self)}; '
                                 f'write x = x {sym} y instead')
            res = P.cast(res, dtype=self.data.dtype)
        if res.data.shape != self.data.shape:
            raise ShapeError(f"in-place '{sym}=': the result has shape {res.data.shape} but "
                             f'{describe(self)} cannot change shape in place; '
                             f'write x = x {sym} y instead')
        # from now on this tensor *is* the result: say so on the tape
        for tape in state.tapes:
            if tape.entries and tape.entries[-1].output is res:
                tape.entries[-1] = tape.entries[-1]._replace(output=self)
        # retain_grad() follows the tensor (as PyTorch)
        if self.retains_grad and res.grad_fn is not None:
            self.grad_fn.retained, res.grad_fn.retained = None, weakref.ref(self)
        self._replace_data(res.data, since)
        # under no_grad the change is unrecorded, but x keeps its history (PyTorch)
        if state.grad_enabled:
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
        forget = functools.partial(_forget, id(old))
        stale[id(old)] = Stale(weakref.ref(old, forget), weakref.ref(self), self._version - 1, when)


# the old array was freed: no saved value can be it any more
def _forget(key, _ref):
    stale.pop(key, None)


def check_saved(order):
    """PyTorch's version check: no value an op in `order` saved for backward may have changed in place
    since the op was recorded."""
    for node in order:
        saved = node.saved or ()        # freed: backward reports that itself
        inputs_read = [v if node.prim.reads_input(j) else None for j, v in enumerate(saved)]
        for k, v in enumerate([*inputs_read, node.out]):
            entry = stale.get(id(v))
            if entry is None or entry.array() is not v or node.seq >= entry.since:
                continue
            t = entry.tensor()
            who, now = (describe(t), t._version) if t is not None else ('a tensor', '?')
            what = f'its input {k}' if k < len(saved) else 'its output'
            raise BackwardError(
                f"backward(): a value '{node.prim.name}' saved for the gradient ({what}, {who}) "
                f'was modified by an in-place operation: it is now at version {now}, the op saved '
                f'version {entry.version}. Compute out of place (y = x + 1, not x += 1) or call '
                f'backward() before changing it.')
