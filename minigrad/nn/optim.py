"""Optimizers: SGD (with momentum) and Adam, with PyTorch's update arithmetic.

Each optimizer writes its update once, in ``_rule(p, g, state, h) -> (new_p, new_state)``, using
only arithmetic operators; ``h`` holds its hyperparameters (``settings()``: lr, betas, ...).
``step()`` runs it on numpy arrays (``p.data``, ``p.grad.data``) under no_grad; ``Module.compile``
runs the very same rule on Symbols, so the update becomes graph ops and ``Variable.assign``s inside
the compiled training step, with the settings as placeholders fed at every step (changing
``opt.lr`` between fits takes effect).
"""
from __future__ import annotations

import numpy as np

from ..core.errors import InputError, ShapeError
from ..core.tensor import Tensor, no_grad


def _number(who, what, v, high=None):
    """A hyperparameter: a real number >= 0 (and < high)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) or \
            not v >= 0 or high is not None and not v < high:
        raise InputError(f'{who}: {what} must be a number >= 0' + (f' and < {high}' if high else '') +
                         f', got {v!r}')
    return v


class Optimizer:
    """Base class: ``params`` (a list of Parameters), ``state[i]`` (a dict per parameter)."""
    defaults: dict = {}

    def __init__(self, params, lr):
        who = type(self).__name__
        if isinstance(params, Tensor) or not hasattr(params, '__iter__'):
            raise InputError(f'{who}: params must be a list of Parameters (model.parameters()), got {type(params).__name__}')
        self.params = list(params)
        if not self.params:
            raise InputError(f'{who}: got an empty parameter list (did you pass model.parameters() of a model '
                             f'without layers?)')
        for k, p in enumerate(self.params):
            if not isinstance(p, Tensor) or not p.requires_grad or p.grad_fn is not None:
                raise InputError(f'{who}: params[{k}] is {type(p).__name__}' + (
                    '' if not isinstance(p, Tensor) else ' that does not require grad' if not p.requires_grad
                    else ' made by an op (a non-leaf: its .data is recomputed, never stepped)') +
                    '; expected Parameters (or leaf tensors with requires_grad=True)')
        if len({id(p) for p in self.params}) < len(self.params):
            raise InputError(f'{who}: a parameter appears twice in params; each would be stepped twice')
        self.lr = _number(who, 'lr (the learning rate)', lr)
        self.state: list[dict] = [{} for _ in self.params]
        self._index = {id(p): i for i, p in enumerate(self.params)}

    def __setstate__(self, state):
        """A copy or an unpickled optimizer holds new parameter objects: index them again."""
        self.__dict__.update(state)
        self._index = {id(p): i for i, p in enumerate(self.params)}

    def zero_grad(self):
        """Forget the gradients (backward adds into .grad, so call this before each backward)."""
        for p in self.params:
            p.grad = None

    def step(self):
        """Update every parameter that has a gradient, in place of its .data (records nothing)."""
        with no_grad():
            for i, p in enumerate(self.params):
                if p.grad is not None:
                    if p.grad.shape != p.shape:
                        raise ShapeError(f'{type(self).__name__}.step: params[{i}] has shape {p.shape} but its '
                                         f'.grad has shape {p.grad.shape}; a gradient has its parameter\'s shape')
                    new_p, self.state[i] = self._rule(p.data, p.grad.data, self._get_state(i), self.settings())
                    p._replace_data(np.asarray(new_p, dtype=p.dtype))   # an in-place change: version + 1

    def _get_state(self, i) -> dict:
        if not self.state[i]:
            self.state[i] = self._init_state(self.params[i].data)
        return self.state[i]

    def _init_state(self, p) -> dict:
        return {}

    def settings(self) -> dict:
        """The hyperparameters ``_rule`` reads, by name (numbers; a compiled step feeds them each run).

        >>> import minigrad as mg
        >>> mg.optim.Adam([mg.nn.Parameter([1.0])]).settings()
        {'lr': 0.001, 'beta1': 0.9, 'beta2': 0.999, 'eps': 1e-08}
        """
        return {'lr': self.lr}

    def structure(self):
        """What the shape of the update graph depends on (a compiled step is built again when it changes)."""
        return ()

    def _rule(self, p, g, s, h):
        raise NotImplementedError

    def __repr__(self):
        extra = ', '.join(f'{k}={getattr(self, k)}' for k in self.defaults)
        return f'{type(self).__name__}({len(self.params)} parameters, lr={self.lr}{", " + extra if extra else ""})'


class SGD(Optimizer):
    """p -= lr * buf, buf = momentum * buf + g (buf = g without momentum), as torch.optim.SGD.

    >>> import minigrad as mg
    >>> w = mg.nn.Parameter([1.0]); (w * 3).sum().backward()
    >>> mg.optim.SGD([w], lr=0.1).step(); round(w.item(), 4)
    0.7
    """
    defaults = {'momentum': 0.0}

    def __init__(self, params, lr=0.01, momentum=0.0):
        super().__init__(params, lr)
        self.momentum = _number('SGD', 'momentum', momentum)

    def _init_state(self, p):
        return {'momentum_buffer': np.zeros_like(p)} if self.momentum else {}

    def settings(self):
        return {'lr': self.lr, 'momentum': self.momentum}

    def structure(self):
        return bool(self.momentum)              # a momentum buffer or none

    def _rule(self, p, g, s, h):
        if not self.momentum:
            return p - h['lr'] * g, {}
        buf = h['momentum'] * s['momentum_buffer'] + g     # a zero buffer makes step 1 buf = g, as in torch
        return p - h['lr'] * buf, {'momentum_buffer': buf}


class Adam(Optimizer):
    """Adam with bias correction, arithmetic as torch.optim.Adam:
    m += (1-b1)(g-m); v = b2 v + (1-b2) g^2; p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)."""
    defaults = {'betas': (0.9, 0.999), 'eps': 1e-8}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise InputError(f'Adam: betas must be a pair (beta1, beta2), got {betas!r}')
        self.betas = tuple(_number('Adam', f'betas[{i}]', b, high=1) for i, b in enumerate(betas))
        self.eps = _number('Adam', 'eps', eps)

    def _init_state(self, p):
        return {'step': 0, 'exp_avg': np.zeros_like(p), 'exp_avg_sq': np.zeros_like(p)}

    def settings(self):
        return {'lr': self.lr, 'beta1': self.betas[0], 'beta2': self.betas[1], 'eps': self.eps}

    def _rule(self, p, g, s, h):
        b1, b2 = h['beta1'], h['beta2']
        t = s['step'] + 1                       # a Python int eagerly, a Symbol in a compiled step
        m = s['exp_avg'] + (1 - b1) * (g - s['exp_avg'])
        v = b2 * s['exp_avg_sq'] + (1 - b2) * (g * g)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        new_p = p - (h['lr'] / bc1) * (m / (v ** 0.5 / bc2 ** 0.5 + h['eps']))
        return new_p, {'step': t, 'exp_avg': m, 'exp_avg_sq': v}


OPTIMIZERS = {'sgd': SGD, 'adam': Adam}


def get(optimizer, params) -> Optimizer:
    """An Optimizer from a name ('sgd' (lr=0.01), 'adam' (lr=1e-3)) or an Optimizer instance."""
    if isinstance(optimizer, Optimizer):
        return optimizer
    if isinstance(optimizer, str) and optimizer.lower() in OPTIMIZERS:
        return OPTIMIZERS[optimizer.lower()](params)
    raise InputError(f'unknown optimizer {optimizer!r}; valid names: {", ".join(OPTIMIZERS)} '
                     f'(or pass an optimizer, e.g. mg.optim.SGD(model.parameters(), lr=0.1))')
