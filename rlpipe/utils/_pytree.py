"""torch.utils._pytree's core: flattening nested lists, tuples, namedtuples and dicts into their
leaves and back. ``None`` is an empty node (no leaf), as in torch; anything else is a leaf."""
import collections

__all__ = ["TreeSpec", "LeafSpec", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_map", "tree_structure",
           "register_pytree_node"]

_NODES = {}  # container types registered by higher layers: type -> (flatten_fn, unflatten_fn)
_LEAF_TYPES = set()  # types already found to be leaves (tensors, numbers): their check is one lookup


def register_pytree_node(cls, flatten_fn, unflatten_fn, **kwargs):
    """Makes ``cls`` a container node: ``flatten_fn(node)`` gives ``(children, context)`` and
    ``unflatten_fn(children, context)`` rebuilds it (torch's serialization options are ignored)."""
    _NODES[cls] = (flatten_fn, unflatten_fn)
    _LEAF_TYPES.discard(cls)


class TreeSpec:
    """The structure of a tree: the node type, what rebuilds it (keys, namedtuple class) and the
    children's specs."""
    __slots__ = ("type", "context", "children_specs", "num_leaves")  # (vmap makes several on every call)

    def __init__(self, type, context, children_specs, num_leaves=None):
        self.type, self.context, self.children_specs = type, context, children_specs
        self.num_leaves = sum(child.num_leaves for child in children_specs) if num_leaves is None else num_leaves

    def is_leaf(self):
        """False: this spec describes a container."""
        return False

    def __eq__(self, other):
        return (isinstance(other, TreeSpec) and (self.type, self.context, self.children_specs)
                == (other.type, other.context, other.children_specs))

    def __repr__(self):
        return f"TreeSpec({self.type.__name__}, {self.context}, {self.children_specs})"


class LeafSpec(TreeSpec):
    """The spec of a single leaf (what ``tree_flatten`` gives for anything it does not open)."""
    def __init__(self):
        self.type, self.context, self.children_specs, self.num_leaves = None, None, [], 1

    def is_leaf(self):
        """True: this spec stands for one leaf."""
        return True

    def __repr__(self):
        return "*"


_LEAF = LeafSpec()  # every leaf's spec (specs are never changed once made)


def _children(tree):
    """(node type, context, children) of a container node, or None for a leaf."""
    if type(tree) in _LEAF_TYPES:
        return None
    if tree is None:
        return type(None), None, []
    registered = _NODES.get(type(tree))
    if registered is not None:
        children, context = registered[0](tree)
        return type(tree), context, children if type(children) is list else list(children)
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree), type(tree), list(tree)
    if isinstance(tree, (list, tuple)):
        return type(tree), None, list(tree)
    if isinstance(tree, dict):
        return type(tree), list(tree), list(tree.values())
    _LEAF_TYPES.add(type(tree))
    return None


def tree_flatten(tree):
    """(the leaves in order, the tree's spec)."""
    leaves = []
    return leaves, _flatten_into(tree, leaves)


def _flatten_into(tree, leaves):
    """The spec of ``tree``, its leaves appended to ``leaves`` (vmap flattens on every call: one list)."""
    node = _children(tree)
    if node is None:
        leaves.append(tree)
        return _LEAF
    start = len(leaves)  # (the count of leaves added, cheaper than summing the children's)
    children = []
    for child in node[2]:
        if type(child) in _LEAF_TYPES:  # (a known leaf type: no call to find that out)
            leaves.append(child)
            children.append(_LEAF)
        else:
            children.append(_flatten_into(child, leaves))
    return TreeSpec(node[0], node[1], children, len(leaves) - start)


def tree_unflatten(leaves, spec):
    """The tree of structure ``spec`` holding ``leaves``."""
    leaves = list(leaves)
    if len(leaves) != spec.num_leaves:
        raise ValueError(f"tree_unflatten(leaves, spec): `leaves` has length {len(leaves)} but the spec refers to "
                         f"a pytree that holds {spec.num_leaves} items ({spec}).")
    return _build(iter(leaves), spec)


def _build(leaves, spec):
    if spec.__class__ is LeafSpec:
        return next(leaves)
    children = [next(leaves) if child.__class__ is LeafSpec else _build(leaves, child) for child in spec.children_specs]
    if spec.type is type(None):
        return None
    if spec.type in _NODES:
        return _NODES[spec.type][1](children, spec.context)
    if spec.context is spec.type:  # a namedtuple
        return spec.type(*children)
    if issubclass(spec.type, dict):
        node = collections.OrderedDict(zip(spec.context, children)) if spec.type is collections.OrderedDict \
            else dict(zip(spec.context, children))
        return node if type(node) is spec.type else spec.type(node)
    return spec.type(children)


def tree_leaves(tree):
    """The leaves of ``tree``, left to right (``tree_flatten``'s first result)."""
    return tree_flatten(tree)[0]


def tree_structure(tree):
    """The TreeSpec of ``tree`` (``tree_flatten``'s second result)."""
    return tree_flatten(tree)[1]


def tree_map(func, tree, *rests):
    """``tree`` with each leaf replaced by ``func(leaf, *matching leaves of rests)``."""
    leaves, spec = tree_flatten(tree)
    others = [tree_flatten(r)[0] for r in rests]
    if any(len(o) != len(leaves) for o in others):
        raise ValueError("tree_map: the trees have different numbers of leaves")
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)
