"""Pytrees: nested lists, tuples and dicts of values, taken apart into leaves and put back together.

Whatever accepts "a value or any nesting of them" (Session.run's fetches, what a mg.trace or mg.jit
function returns, the arguments and results of mg.vmap and mg.grad) goes through here: `flatten` gives
the leaves in order and a `TreeDef` that records the containers; the caller works on the flat list; and
`unflatten` builds the same structure around new leaves.

Containers are list, tuple (namedtuples included) and dict (a dict subclass comes back as a plain
dict); anything else, None included, is a leaf. **Dict order**: a dict's values are visited in the
dict's own (insertion) order, the order the user wrote the keys in, and the rebuilt dict has its keys
in that order. This is the one rule everywhere in minigrad (as in torch.utils._pytree; jax sorts
keys instead), so a fetched dict prints as it was written and a gradient dict lists its keys as the
argument did. Two dicts with the same keys in a different order have different TreeDefs.

>>> leaves, tree = flatten({'w': 1, 'b': [2, None], 'n': (3,)})
>>> leaves
[1, 2, None, 3]
>>> unflatten(tree, [10, 20, 30, 40])
{'w': 10, 'b': [20, 30], 'n': (40,)}
>>> tree.num_leaves, flatten({'b': [0, 0], 'w': 0, 'n': (0,)})[1] == tree
(4, False)
"""
from __future__ import annotations


class TreeDef:
    """The containers of a flattened value: ``kind`` (None for a leaf, else list, tuple, a namedtuple
    class or dict), ``keys`` (a dict's keys in order), ``children`` (one TreeDef per item) and
    ``num_leaves``. TreeDefs compare equal when the structures are the same; they are hashable."""

    __slots__ = ('kind', 'keys', 'children', 'num_leaves')

    def __init__(self, kind, keys=None, children=()):
        self.kind, self.keys, self.children = kind, keys, children
        self.num_leaves = 1 if kind is None else sum(c.num_leaves for c in children)

    def __eq__(self, other):
        return isinstance(other, TreeDef) and self.kind is other.kind and self.keys == other.keys and \
            self.children == other.children

    def __hash__(self):
        return hash((self.kind, self.keys, self.children))

    def __repr__(self):
        if self.kind is None:
            return '*'
        if self.kind is dict:
            return '{' + ', '.join(f'{k!r}: {c!r}' for k, c in zip(self.keys, self.children)) + '}'
        items = ', '.join(map(repr, self.children))
        return f'[{items}]' if self.kind is list else f'({items}{"," if len(self.children) == 1 else ""})' \
            if self.kind is tuple else f'{self.kind.__name__}({items})'


LEAF = TreeDef(None)


def flatten(tree) -> tuple[list, TreeDef]:
    """The leaves of ``tree`` in order (dicts in their own key order) and its TreeDef."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(x, leaves) -> TreeDef:
    if isinstance(x, dict):
        keys = tuple(x)
        return TreeDef(dict, keys, tuple([_flatten(x[k], leaves) for k in keys]))
    if isinstance(x, (list, tuple)):
        return TreeDef(type(x), None, tuple([_flatten(v, leaves) for v in x]))
    leaves.append(x)
    return LEAF


def unflatten(treedef: TreeDef, leaves):
    """The structure ``treedef`` records, with ``leaves`` (a sequence, as many as it has) in place."""
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f'unflatten: {treedef!r} holds {treedef.num_leaves} leaves, got {len(leaves)}')
    if treedef.kind is None:
        return leaves[0]
    return _build(treedef, iter(leaves))


def _build(t: TreeDef, it):
    if t.kind is None:
        return next(it)
    items = [_build(c, it) for c in t.children]
    if t.kind is dict:
        return dict(zip(t.keys, items))
    if t.kind is list or t.kind is tuple:
        return t.kind(items)
    return t.kind(*items) if hasattr(t.kind, '_fields') else t.kind(items)      # a namedtuple takes fields
