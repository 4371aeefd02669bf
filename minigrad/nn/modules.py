"""Neural-network building blocks: Module, Parameter, layers, losses, and Keras-style compile/fit.

Every layer is composed of minigrad ops, so the same module runs eagerly on the tape
(``model(tensor)``), on Symbols inside a static graph (``model(placeholder)``), under
``mg.trace``/``mg.jit``, and as one compiled training step (``model.compile(...)``,
``model.fit(...)``). Parameters meet a graph through ``Graph.lift_tensor``: the graph
decides what a Parameter becomes there (a ``Variable`` for compile/fit and tracing).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from ..core import functional as F
from ..core.primitive import DEFAULT_FLOAT, Value, fmt_shape, broadcast_shapes, apply
from ..core.validate import value_array, check_int
from ..core.errors import InputError, MinigradError, ShapeError
from ..core.graph import Graph, Symbol, Variable, placeholder, constant, gradients, CHECK
from ..core.tensor import Tensor, Rebinds, tensor, no_grad
from ..core.creation import rng
from . import optim
from ..compiler import compile as compile_
from ..core.control import cond
from ..transforms.trace import TracingGraph


class Parameter(Tensor):
    """A Tensor that a Module registers as trainable (requires_grad=True, keeps its float dtype).

    >>> import minigrad as mg
    >>> mg.nn.Parameter([1.0, 2.0]).requires_grad
    True
    """
    __slots__ = ()

    def __init__(self, data, requires_grad=True, name=None):
        arr = value_array(data.data if isinstance(data, Tensor) else data, 'mg.nn.Parameter')
        super().__init__(arr, dtype=arr.dtype if arr.dtype.kind == 'f' else DEFAULT_FLOAT,
                         requires_grad=requires_grad, name=name)


def _lift_param(x, p):
    """``p`` as an operand for ``x``: itself on the tape; in a graph what the graph makes of it (a bound
    Variable, see bind_parameters); inner cond/while bodies capture the enclosing graph's."""
    return x.graph.lift(p, like=(x,)) if isinstance(x, Symbol) else p


class Module:
    """Base class: assign Parameters and sub-Modules as attributes and they are registered.

    >>> import minigrad as mg
    >>> class Net(mg.nn.Module):
    ...     def __init__(self):
    ...         super().__init__(); self.fc = mg.nn.Linear(3, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    >>> [n for n, _ in Net().named_parameters()]
    ['fc.weight', 'fc.bias']
    """

    def __init__(self):
        self.__dict__.setdefault('_parameters', {})
        self.__dict__.setdefault('_modules', {})

    def __setattr__(self, name, value):
        if '_parameters' not in self.__dict__:      # a subclass may forget super().__init__()
            Module.__init__(self)
        old = self.__dict__.get(name)
        if isinstance(old, (Tensor, Module)) and old is not value:     # mg.jit entries traced before retrace
            Rebinds.count += 1
        self._parameters.pop(name, None), self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
            value.__dict__.setdefault('_name', name)
        object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise InputError(f'{type(self).__name__}: a Module computes in its forward(self, x) method, and this '
                         f'class defines none; add one (calling the module calls forward)')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_parameters(self, prefix=''):
        """(dotted name, Parameter) pairs, each shared Parameter once."""
        seen, out = set(), []
        def walk(m, pre):
            for n, p in m.__dict__.get('_parameters', {}).items():
                if id(p) not in seen:
                    seen.add(id(p)), out.append((pre + n, p))
            for n, sub in m.__dict__.get('_modules', {}).items():
                walk(sub, f'{pre}{n}.')
        walk(self, prefix)
        return out

    def parameters(self) -> list:
        return [p for _, p in self.named_parameters()]

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def to(self, dtype):
        """Convert every parameter to ``dtype`` in place (e.g. mg.float64); returns self."""
        for p in self.parameters():
            p.data = p.data.astype(dtype)
        return self

    def double(self):
        return self.to(np.float64)

    def float(self):
        return self.to(np.float32)

    @property
    def dtype(self):
        ps = self.parameters()
        return ps[0].dtype if ps else DEFAULT_FLOAT

    def __repr__(self):
        subs = self.__dict__.get('_modules', {})
        if not subs:
            return f'{type(self).__name__}({self.extra_repr()})'
        body = ''.join(f'\n  ({n}): ' + repr(m).replace('\n', '\n  ') for n, m in subs.items())
        return f'{type(self).__name__}({body}\n)'

    def extra_repr(self) -> str:
        return ''

    def __getstate__(self):
        """A copy or pickle (a snapshot of the best model) leaves out fit's compiled training steps: they
        hold generated code, and the next fit builds them again."""
        return {**self.__dict__, '_steps': {}} if '_steps' in self.__dict__ else self.__dict__

    # ---------------------------------------------------------------- Keras style
    def compile(self, optimizer='sgd', loss='mse'):
        """Choose the optimizer and loss for ``fit``; the training graph is built and compiled on the
        first ``fit`` (one graph per input shape, since a static graph is built for one shape).

        >>> import minigrad as mg
        >>> mg.manual_seed(0); model = mg.nn.Sequential([mg.nn.Linear(1, 1)])
        >>> model.compile(optimizer='sgd', loss='mse')
        >>> h = model.fit([[1], [2], [3]], [[2], [4], [6]], epochs=5, verbose=0)
        >>> h.history['loss'][-1] < h.history['loss'][0]
        True
        """
        # stored past __setattr__: the loss module is not a layer of the model
        self.__dict__.update(_optimizer=optim.get(optimizer, self.parameters()), _loss=get_loss(loss), _steps={})

    def fit(self, x, y, epochs=1, batch_size=None, shuffle=True, verbose=1):
        """Train with the compiled step; ``batch_size=None`` = the whole data set per step.
        Returns a History (``history.history['loss']``: the mean loss of each epoch). The eager
        Parameters (and the optimizer's state) hold the trained values afterwards."""
        if '_steps' not in self.__dict__:
            raise MinigradError('fit: call model.compile(optimizer=..., loss=...) first')
        epochs = check_int(epochs, 'fit: epochs', low=0)
        bs = None if batch_size is None else check_int(batch_size, 'fit: batch_size', low=1)
        x, y = self._as_arrays(x, y)
        n = len(x)
        bs = n if bs is None else min(bs, n)
        progress, history, step = _Progress(epochs, verbose), History(), None
        for epoch in range(epochs):
            order = rng().permutation(n) if shuffle else np.arange(n)
            total = 0.0
            for start in range(0, n, bs):
                idx = order[start:start + bs]
                xb, yb = x[idx], y[idx]
                key = (xb.shape, xb.dtype, yb.shape, yb.dtype, tuple(p.dtype for p in self.parameters()),
                       self._optimizer.structure())
                if step is None or step.key != key:
                    if step is not None:
                        step.save()                     # eager objects hold the state between programs
                    step = self._step_for(key, xb, yb, verbose)
                    step.load()
                total += step.run(xb, yb) * len(idx)
            history.append(total / n)
            progress.update(epoch + 1, history.losses[-1])
        if step is not None:
            step.save()
        progress.close()
        return history

    def _step_for(self, key, xb, yb, verbose):
        if key not in self._steps:
            if self._steps and verbose:
                print(f'fit: new input shapes x{fmt_shape(xb.shape)}, y{fmt_shape(yb.shape)}: building and '
                      f'compiling another training graph (a static graph is built for one shape)')
            self._steps[key] = _TrainStep(self, key, xb, yb)
        return self._steps[key]

    def _as_arrays(self, x, y=None):
        dt = self.dtype
        x = value_array(x.data if isinstance(x, Tensor) else x, 'model input x').astype(dt)
        if x.ndim == 0 or not len(x):
            raise InputError(f'model input x: expected a batch of samples (shape (N, ...) with N >= 1), got '
                             f'shape {fmt_shape(x.shape)}')
        if y is None:
            return x
        y = value_array(y.data if isinstance(y, Tensor) else y, 'fit/evaluate: targets y')
        loss = getattr(self, '_loss', None)
        y = y.astype(np.int64 if isinstance(loss, CrossEntropyLoss) else dt)
        if isinstance(loss, MSELoss) and y.ndim == 1:
            y = y[:, None]                              # Keras-style: targets (N,) for outputs (N, 1)
        if len(x) != len(y):
            raise ShapeError(f'fit: x has {len(x)} samples (shape {fmt_shape(x.shape)}) but y has {len(y)} '
                             f'(shape {fmt_shape(y.shape)}); they must have the same length')
        return x, y

    def predict(self, x) -> np.ndarray:
        """The model's output for ``x`` as a numpy array (runs eagerly, records nothing)."""
        with no_grad():
            return self(tensor(self._as_arrays(x))).numpy()

    def evaluate(self, x, y) -> float:
        """The loss chosen in compile() on (x, y), computed eagerly without recording."""
        x, y = self._as_arrays(x, y)
        with no_grad():
            return float(self._loss(self(tensor(x)), tensor(y)).item())


class _Bind:
    """A training graph's rule for the Tensors it meets (a TracingGraph's): a Parameter, or a Tensor that
    requires grad, becomes a Variable named for its place in the module; any other Tensor a constant."""

    def __init__(self, module):
        self.names = {id(p): n.replace('.', '_') for n, p in module.named_parameters()}
        self.vars: dict = {}                    # id(Parameter) -> its Variable

    def __call__(self, graph, t):
        if not (isinstance(t, Parameter) or t.requires_grad):
            return constant(t.data, graph=graph)
        if id(t) not in self.vars:
            with graph.as_default():
                self.vars[id(t)] = Variable(t.data, name=self.names.get(id(t), t.name or 'param'))
        return self.vars[id(t)]


def bind_parameters(graph: Graph, module: Module) -> dict:
    """Make a module's Parameters become ``mg.Variable``s when used in ``graph`` (they are bound to it:
    ``graph.tensors``). Returns {id(Parameter): Variable}.

    >>> import minigrad as mg
    >>> lin = mg.nn.Linear(3, 1); g = mg.Graph()
    >>> with g.as_default():
    ...     vars = mg.nn.bind_parameters(g, lin); y = lin(mg.placeholder(shape=(None, 3)))
    >>> sorted(v.name for v in vars.values())
    ['bias', 'weight']
    """
    rule = _Bind(module)
    for p in module.parameters():
        graph.tensors[id(p)] = (p, rule(graph, p))
    return rule.vars


class _TrainStep:
    """One static training graph: placeholders x, y; forward with Variables; loss; gradients;
    optimizer updates as assign ops. Compiled once with ``mg.compile`` (no second path)."""

    def __init__(self, model, key, xb, yb):
        self.key, self.opt = key, model._optimizer      # not the model: no cycle through model._steps
        opt = self.opt
        self.graph = g = TracingGraph('train_step', _Bind(model))
        with g.as_default():
            self.x = placeholder(xb.dtype, xb.shape, name='x')
            self.y = placeholder(yb.dtype, yb.shape, name='y')
            pvar = {id(p): g.lift(p) for p in model.parameters()}
            self.out = model(self.x)
            self.loss = model._loss(self.out, self.y)
            trained = [p for p in opt.params if id(p) in pvar]
            grads = gradients(self.loss, [pvar[id(p)] for p in trained])
            self.targets, updates = [], []               # (eager owner, key) <- Variable
            hyper = {}                                   # dtype -> {setting: placeholder}: fed at every step
            for p, gr in zip(trained, grads):
                i = opt._index[id(p)]
                svar = {k: Variable(np.asarray(v, p.dtype), name=f'{pvar[id(p)].name}_{k}')
                        for k, v in opt._get_state(i).items()}
                h = hyper.setdefault(p.dtype, {k: placeholder(p.dtype, (), name=f'{k}_{p.dtype}')
                                               for k in opt.settings()})
                new_p, new_s = opt._rule(pvar[id(p)], gr, svar, h)
                self.targets.append(((p, None), pvar[id(p)]))
                updates.append(pvar[id(p)].assign(new_p))
                for k, v in svar.items():
                    self.targets.append(((i, k), v))
                    updates.append(v.assign(new_s[k]))
            g.close()
        self.fetches = [self.loss] + updates
        self.values = None
        self.hyper = [(dt, k) for dt, h in hyper.items() for k in h]
        self.program = compile_(self.fetches, [self.x, self.y] + [hyper[dt][k] for dt, k in self.hyper])
        self._slot = {id(v): i for i, v in enumerate(self.program.variables)}

    def load(self):
        """Write the eager values (Parameters, optimizer state) into the graph's Variables."""
        opt = self.opt
        vals = [o.data if k is None else opt._get_state(o)[k] for (o, k), _ in self.targets]
        self.values = [np.asarray(v, dtype=var.dtype) for v, (_, var) in zip(vals, self.targets)]
        for v, (_, var) in zip(self.values, self.targets):   # Program.state: one array per program.variables
            self.program.state[self._slot[id(var)]] = np.array(v)

    def run(self, xb, yb) -> float:
        h = self.opt.settings()              # read now: a changed opt.lr takes effect at the next step
        res = self.program(xb, yb, *[np.asarray(h[k], dt) for dt, k in self.hyper])
        self.values = list(res[1:])          # fresh arrays (a Program hands its output buffers over)
        return float(res[0])

    def save(self):
        """Copy the Variables' latest values back to the eager Parameters and optimizer state."""
        opt = self.opt
        for ((o, k), var), v in zip(self.targets, self.values):
            if k is None:
                o.data = np.array(v, dtype=o.dtype)
            else:
                opt.state[o][k] = int(v) if k == 'step' else np.array(v)


class History:
    """What fit returns: ``history['loss']`` per epoch (as in Keras), also ``.losses``."""

    def __init__(self):
        self.history = {'loss': []}

    @property
    def losses(self) -> list:
        return self.history['loss']

    def append(self, loss):
        self.history['loss'].append(float(loss))

    def __repr__(self):
        ls = self.losses
        return f'History({len(ls)} epochs, loss {ls[0]:.4g} -> {ls[-1]:.4g})' if ls else 'History(empty)'


def _in_notebook() -> bool:
    ip = sys.modules.get('IPython')
    shell = ip.get_ipython() if ip is not None and hasattr(ip, 'get_ipython') else None
    return shell is not None and 'IPKernelApp' in getattr(shell, 'config', {})


class _Progress:
    """An ipywidgets bar in a notebook, one rewritten text line elsewhere, nothing at verbose=0."""

    def __init__(self, epochs, verbose):
        self.epochs, self.verbose, self.bar, self.t0 = epochs, verbose, None, time.perf_counter()
        if verbose and _in_notebook():
            try:
                import ipywidgets as W
                from IPython.display import display
                self.bar, self.label = W.IntProgress(min=0, max=epochs, description='Epoch'), W.Label()
                display(W.HBox([self.bar, self.label]))
            except ImportError:
                self.bar = None

    def update(self, epoch, loss):
        if not self.verbose:
            return
        text = f'Epoch {epoch}/{self.epochs} - loss: {loss:.6g} - {time.perf_counter() - self.t0:.1f}s'
        if self.bar is not None:
            self.bar.value, self.label.value = epoch, text
        else:
            print('\r' + text, end='', flush=True)

    def close(self):
        if self.verbose and self.bar is None:
            print()


# -------------------------------------------------------------------- layers
class Linear(Module):
    """y = x @ W.T + b with W of shape (out, in); PyTorch's default init U(-1/sqrt(in), 1/sqrt(in)).

    >>> import minigrad as mg
    >>> mg.nn.Linear(3, 2)(mg.ones(4, 3)).shape
    (4, 2)
    """

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features = check_int(in_features, 'nn.Linear: in_features', low=1)
        self.out_features = out_features = check_int(out_features, 'nn.Linear: out_features', low=1)
        bound, dt = 1.0 / np.sqrt(in_features), dtype or DEFAULT_FLOAT
        self.weight = Parameter(rng().uniform(-bound, bound, (out_features, in_features)).astype(dt))
        self.bias = Parameter(rng().uniform(-bound, bound, (out_features,)).astype(dt)) if bias else None

    def forward(self, x):
        if not F._is_value(x):         # (a Tensor, Symbol, or a value of mg.jvp / mg.vmap)
            x = tensor(x, dtype=self.weight.dtype)
        shape = x.shape
        if shape is not None and (len(shape) == 0 or shape[-1] not in (None, self.in_features)):
            name = self.__dict__.get('_name')
            raise ShapeError(f"{'layer ' + repr(name) + ' ' if name else ''}{self!r}: expected an input of shape "
                             f'(batch, {self.in_features}) but received {fmt_shape(shape)}; the last '
                             f'dimension must be in_features={self.in_features}')
        y = x @ _lift_param(x, self.weight).T
        return y + _lift_param(x, self.bias) if self.bias is not None else y

    def extra_repr(self):
        return f'in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}'


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return F.sigmoid(x)


class Sequential(Module):
    """Layers applied in order: ``Sequential(l1, l2)`` or ``Sequential([l1, l2])``.

    >>> import minigrad as mg
    >>> m = mg.nn.Sequential(mg.nn.Linear(2, 4), mg.nn.ReLU(), mg.nn.Linear(4, 1))
    >>> m(mg.ones(5, 2)).shape, len(m)
    ((5, 1), 3)
    """

    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = layers[0]
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise InputError(f'Sequential: item {i} is {type(layer).__name__} {layer!r:.40}, not a Module '
                                 f'(give layers: Sequential(nn.Linear(2, 3), nn.ReLU()) or a list of them)')
            setattr(self, str(i), layer)

    def forward(self, x):
        for layer in self._modules.values():
            x = layer(x)
        return x

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


# -------------------------------------------------------------------- losses
class MSELoss(Module):
    """mean (or sum) of squared errors. >>> mg.nn.MSELoss()(mg.tensor([1.0, 3.0]), mg.tensor([0.0, 0.0]))"""

    def __init__(self, reduction='mean'):
        super().__init__()
        self.reduction = _reduction('MSELoss', reduction)

    def forward(self, pred, target):
        # a list or number: checked (a clear error for ragged or odd values), then used as given
        ts = target.shape if hasattr(target, 'shape') else value_array(target, 'MSELoss target').shape
        ps = getattr(pred, 'shape', None)
        if ps is not None and ts is not None and None not in ps + ts and \
                (b := broadcast_shapes('MSELoss', ps, ts)) != tuple(ps):   # (N,1) - (N,) -> (N,N): a classic bug
            raise ShapeError(f'MSELoss: prediction {fmt_shape(ps)} and target {fmt_shape(ts)} would broadcast '
                             f'to {fmt_shape(b)}; reshape the target to {fmt_shape(ps)}')
        d = pred - target
        return _reduce(d * d, self.reduction)

    def extra_repr(self):
        return f'reduction={self.reduction!r}'


def _reduction(who, reduction):
    if reduction not in ('mean', 'sum', 'none'):
        raise InputError(f"{who}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _reduce(per_item, reduction):
    return per_item.mean() if reduction == 'mean' else per_item.sum() if reduction == 'sum' else per_item


def _check_targets(logits, target, C):
    """Class indices: integers in [0, C), one per row of the logits (values checked when known)."""
    if target.dtype.kind not in 'iu':
        raise InputError(f'CrossEntropyLoss: targets must be integer class indices, got dtype {target.dtype} '
                         f'(for one-hot or probabilities, use -(p * mg.log_softmax(logits, axis=-1)).sum(-1))')
    ls, ts = logits.shape, target.shape
    if ls is not None and ts is not None and None not in ls[:-1] + ts and tuple(ts) != tuple(ls[:-1]):
        raise ShapeError(f'CrossEntropyLoss: logits {fmt_shape(ls)} need targets of shape {fmt_shape(ls[:-1])}, '
                         f'got {fmt_shape(ts)}')
    if isinstance(target, Tensor) and target.data.size and not (0 <= target.data.min() and target.data.max() < C):
        raise InputError(f'CrossEntropyLoss: targets must be class indices in [0, {C}), got values from '
                         f'{target.data.min()} to {target.data.max()}')


class CrossEntropyLoss(Module):
    """-log softmax(logits)[target], averaged; logits (N, C), integer targets (N,). Stable for large
    logits (log_softmax subtracts the max). One-hot by comparison, so it also works on Symbols.
    ``reduction``: 'mean', 'sum' or 'none' (one loss per row)."""

    def __init__(self, reduction='mean'):
        super().__init__()
        self.reduction = _reduction('CrossEntropyLoss', reduction)

    def forward(self, logits, target):
        if not isinstance(target, Value):
            target = tensor(value_array(target, 'CrossEntropyLoss target'))
        C = logits.shape[-1] if logits.shape is not None else None
        if C is None:
            raise ShapeError('CrossEntropyLoss: the number of classes (last dim of the logits) must be known')
        _check_targets(logits, target, C)
        if not isinstance(target, Tensor):      # a Symbol's values (or vmap's batch of them) checked when known
            target = apply(CHECK, target, lo=0, hi=C, what='CrossEntropyLoss: targets (class indices)')
        logp = F.log_softmax(logits, axis=-1)
        onehot = F.cast(F.equal(target.reshape(-1, 1) if target.shape is not None and None not in target.shape
                                else target[:, None], np.arange(C)), logp.dtype)
        return _reduce(-(logp * onehot).sum(axis=-1), self.reduction)


LOSSES = {'mse': MSELoss, 'mean_squared_error': MSELoss, 'cross_entropy': CrossEntropyLoss,
          'sparse_categorical_crossentropy': CrossEntropyLoss}


def get_loss(loss):
    if isinstance(loss, str):
        if loss.lower() not in LOSSES:
            raise InputError(f'unknown loss {loss!r}; valid names: {", ".join(LOSSES)} (or pass a loss Module '
                             f'or function)')
        return LOSSES[loss.lower()]()
    if not callable(loss):
        raise TypeError(f'loss must be a name ({", ".join(LOSSES)}) or a callable, got {type(loss).__name__}')
    return loss


# -------------------------------------------------------------------- the source material's dynamic model
class DynamicNet(Module):
    """Input layer, a hidden layer reused a random 0..max_depth times per forward (weight sharing,
    Python control flow), output layer. ``depth`` fixes the choice; a Symbol ``depth`` expresses it
    in a static graph with ``mg.cond`` (one cond per possible extra layer)."""

    def __init__(self, D_in, H, D_out, max_depth=3, dtype=None):
        super().__init__()
        self.max_depth = max_depth
        self.input_linear = Linear(D_in, H, dtype=dtype)
        self.middle_linear = Linear(H, H, dtype=dtype)
        self.output_linear = Linear(H, D_out, dtype=dtype)

    def forward(self, x, depth=None):
        depth = int(rng().integers(0, self.max_depth + 1)) if depth is None else depth
        h = F.relu(self.input_linear(x))
        if isinstance(depth, Symbol):
            for k in range(self.max_depth):
                h = cond(depth > k, lambda h=h: F.relu(self.middle_linear(h)), lambda h=h: h)
        else:
            for _ in range(depth):
                h = F.relu(self.middle_linear(h))
        return self.output_linear(h)
