"""Pytree items in tensor storages (torchrl's): a dict, tuple or list of tensors (nested) is kept as a
TensorDict (sequences under the keys ``"0"``, ``"1"``, ...) and its structure is remembered, so reads
give the same kind of tree back."""
from ..._tensor import Tensor
from ...tensordict import TensorDict


def is_pytree(data):
    """Whether ``data`` is a tree of tensors: a dict or tuple, or a list that is not a list of items
    (one of its elements is itself a dict, list or tuple)."""
    if isinstance(data, (dict, tuple)):
        return True
    return isinstance(data, list) and any(isinstance(x, (dict, list, tuple)) for x in data)


def tree_map(fn, tree):
    """``tree`` with ``fn`` applied to every tensor leaf."""
    if isinstance(tree, dict):
        return {key: tree_map(fn, value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(tree_map(fn, value) for value in tree)
    return fn(tree) if isinstance(tree, Tensor) else tree


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in _leaves(value)]
    return [tree]


def _structure(tree):
    """The tree's shape without its tensors: nested ("dict", keys, parts) / (type, parts) / None."""
    if isinstance(tree, dict):
        return ("dict", list(tree), [_structure(v) for v in tree.values()])
    if isinstance(tree, (list, tuple)):
        return (type(tree), None, [_structure(v) for v in tree])
    return None


def _as_dict(tree):
    if isinstance(tree, dict):
        return {str(key): _as_dict(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return {str(i): _as_dict(value) for i, value in enumerate(tree)}
    return tree


def to_tensordict(tree, what):
    """(a TensorDict holding ``tree``'s tensors, over their common leading dims; its structure)."""
    leaves = _leaves(tree)
    if not leaves or not all(isinstance(leaf, Tensor) for leaf in leaves):
        kinds = sorted({type(leaf).__name__ for leaf in leaves if not isinstance(leaf, Tensor)})
        raise TypeError(f"{what}: a tensor storage holds trees of tensors only, got leaves of type {kinds}")
    batch = list(leaves[0].shape)
    for leaf in leaves[1:]:
        common = 0
        while common < min(len(batch), leaf.ndim) and batch[common] == leaf.shape[common]:
            common += 1
        batch = batch[:common]
    return TensorDict(_as_dict(tree), batch_size=batch), _structure(tree)


def from_tensordict(td, structure):
    """The tree ``to_tensordict`` made ``td`` from."""
    if structure is None:
        return td
    kind, keys, parts = structure
    if kind == "dict":
        return {key: from_tensordict(td.get(str(key)), part) for key, part in zip(keys, parts)}
    return kind(from_tensordict(td.get(str(i)), part) for i, part in enumerate(parts))
