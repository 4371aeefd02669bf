"""Tiny 2-D classification data sets generated with numpy (seeded by mg.manual_seed)."""
from __future__ import annotations

import numpy as np

from .factories import rng


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


def make_spirals(n_samples=300, n_classes=3, noise=0.2, dtype=np.float32):
    """``n_classes`` interleaved spiral arms (the CS231n toy set): x (n, 2), y (n,) int64."""
    per = n_samples // n_classes
    xs, ys = [], []
    for c in range(n_classes):
        r = np.linspace(0.0, 1.0, per)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, per) + noise * rng().standard_normal(per)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], 1))
        ys.append(np.full(per, c, np.int64))
    return np.concatenate(xs).astype(dtype), np.concatenate(ys)
