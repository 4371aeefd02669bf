"""A tiny 2-D classification data set generated with numpy (seeded by mg.manual_seed): lesson 07's moons."""
from __future__ import annotations

import numpy as np

from ..core.creation import rng


def make_moons(n_samples=200, noise=0.1, dtype=np.float32):
    """Two interleaving half circles: x (n, 2) floats, y (n,) int64 labels 0/1 (as scikit-learn's).

    >>> import minigrad as mg
    >>> x, y = mg.data.make_moons(100); x.shape, y.shape, sorted(set(y.tolist()))
    ((100, 2), (100,), [0, 1])
    """
    n0 = n_samples // 2
    t0, t1 = np.linspace(0, np.pi, n0), np.linspace(0, np.pi, n_samples - n0)
    x = np.concatenate([np.stack([np.cos(t0), np.sin(t0)], 1),
                        np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], 1)])
    y = np.concatenate([np.zeros(n0, np.int64), np.ones(n_samples - n0, np.int64)])
    x = x + noise * rng().standard_normal(x.shape)
    return x.astype(dtype), y

