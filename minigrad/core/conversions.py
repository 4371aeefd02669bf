"""Tensor's conversions to Python and numpy values, its printing and its container protocol.

Kept apart from tensor.py, whose subject is the tape: none of this records anything.
"""
from __future__ import annotations

import html

import numpy as np

from .primitive import describe, hooks, DEFAULT_FLOAT
from .errors import InputError, MinigradError


class ConversionsMixin:
    """``item``, ``numpy``, ``tolist``, ``bool(t)``, ``float(t)``, ``len(t)``, ``repr(t)`` and friends."""
    __slots__ = ()

    # as PyTorch: only leaves copy; a non-leaf would drag its graph along
    def __reduce_ex__(self, protocol):
        if self.grad_fn is not None:
            raise InputError(f'{describe(self)} was made by an op (a non-leaf) and cannot be '
                             f'pickled or deep-copied with its graph; '
                             f'copy t.detach() (a leaf) instead')
        return super().__reduce_ex__(protocol)

    def __len__(self):
        if self.data.ndim == 0:
            raise TypeError('len() of a 0-d tensor')
        return len(self.data)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def item(self):
        if self.data.size != 1:
            raise MinigradError(f'item(): only one-element tensors can be converted to a '
                                f'Python number; {describe(self)} has {self.data.size} elements')
        return self.data.item()

    def numpy(self) -> np.ndarray:
        """The value as a numpy array; read-only when the tensor requires grad (writing through it would
        change a value the tape saved for backward without minigrad knowing, as PyTorch refuses too).
        In-place operators (``x += 1``) and optimizer steps are tracked instead: they bump ``x._version``
        and a backward through an op that saved the old value raises. ``x.data`` is the raw array:
        writes into it are not tracked (as PyTorch's ``.data``).

        >>> import minigrad as mg
        >>> mg.tensor([1.0], requires_grad=True).numpy().flags.writeable
        False
        """
        if self._requires_grad:
            view = self.data.view()
            view.flags.writeable = False
            return view
        return self.data

    def tolist(self):
        return self.data.tolist()

    def __array__(self, dtype=None, copy=None):
        return self.numpy() if dtype is None else self.data.astype(dtype)

    def __bool__(self):
        if self.data.size != 1:
            raise MinigradError(f'the truth value of {describe(self)} is ambiguous: it has '
                                f'{self.data.size} elements. Use (t < u)[0], .all() or .any().')
        return bool(self.data)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.data.dtype.kind not in 'iu':
            raise TypeError('only integer tensors can be used as an index')
        return int(self.item())

    def all(self):
        return type(self)._make(np.asarray(self.data.all()))

    def any(self):
        return type(self)._make(np.asarray(self.data.any()))

    def __repr__(self):
        body = np.array2string(self.data, separator=', ', precision=4, prefix='tensor(')
        extra = ''
        if self.data.dtype not in (DEFAULT_FLOAT, np.dtype(np.int64), np.dtype(bool)):
            extra += f', dtype={self.data.dtype}'
        if self.grad_fn is not None:
            extra += f', grad_fn=<{self.grad_fn.prim.name}>'
        elif self._requires_grad:
            extra += ', requires_grad=True'
        if self.name:
            extra += f', name={self.name!r}'
        return f'tensor({body}{extra})'

    def _repr_html_(self):
        """Jupyter shows the values; a tensor with a recorded graph adds its drawing, folded away."""
        text = f'<pre>{html.escape(repr(self))}</pre>'
        if self.grad_fn is None:
            return text
        svg = hooks.display(self).get('image/svg+xml')
        return text + (f'<details><summary>graph</summary>{svg}</details>' if svg else '')
