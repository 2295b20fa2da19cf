"""``vmap``: a function over a batch, run once on batched tensors (see ``_batched``)."""
import functools

from .. import random
from .._tensor import Tensor
from ..utils._pytree import _children, tree_flatten, tree_unflatten
from ._batched import BatchedTensor, batch_sizes

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")
_randomness = []  # the randomness of each vmap level in progress


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a dimension of its inputs: ``vmap(f)(x)`` equals ``stack([f(x[i]) for i ...])``
    but runs ``f`` once on the whole batch. ``in_dims``: the mapped dim of each input (an int or None
    for all, or one entry per positional argument, itself an int, None or a tree matching that
    argument); ``out_dims``: where the mapped dim goes in each output. ``randomness``: a random op
    inside ``func`` raises ('error'), draws different numbers per sample ('different') or the same
    numbers for the whole batch ('same'). ``chunk_size``: map that many samples at a time."""
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got "
                           f"{randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    name = getattr(func, "__name__", repr(func))
    _check_dims_types(name, in_dims, out_dims)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        if not args:
            raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                             "trying to vmap over a function with no inputs. The latter is unsupported.")
        leaves, spec = tree_flatten(args)
        dims = _leaf_dims(in_dims, args, spec, "in_dims")
        size = _batch_size(leaves, dims, in_dims)
        if chunk_size is None or chunk_size >= size:
            return _run(func, leaves, dims, spec, kwargs, size, out_dims, randomness)
        chunks = []
        state = random.get_rng_state() if randomness == "same" else None
        for start in range(0, size, chunk_size):
            if state is not None:  # every chunk draws the same numbers, as one call would
                random.set_rng_state(state)
            part = [leaf.narrow(d, start, min(chunk_size, size - start)) if d is not None else leaf
                    for leaf, d in zip(leaves, dims)]
            chunks.append(_run(func, part, dims, spec, kwargs, min(chunk_size, size - start), out_dims, randomness))
        return _concat(chunks, out_dims)
    return wrapped


def _run(func, leaves, dims, spec, kwargs, size, out_dims, randomness):
    batch_sizes.append(size)
    _randomness.append(randomness)
    hook, random.vmap_draw_hook[0] = random.vmap_draw_hook[0], _draw
    level = len(batch_sizes)
    try:
        batched = [leaf if d is None else BatchedTensor(leaf if d == 0 or d % leaf.ndim == 0 else leaf.movedim(d, 0),
                                                        level) for leaf, d in zip(leaves, dims)]
        output = func(*tree_unflatten(batched, spec), **kwargs)
        if type(output) is BatchedTensor and (out_dims is None or isinstance(out_dims, int)):
            return _unbatched(output, out_dims, level, size)  # (one output: no tree to walk)
        out_leaves, out_spec = tree_flatten(output)
        out = [_unbatched(leaf, d, level, size)
               for leaf, d in zip(out_leaves, _out_leaf_dims(out_dims, output, out_spec))]
        return tree_unflatten(out, out_spec)
    finally:
        random.vmap_draw_hook[0] = hook
        batch_sizes.pop()
        _randomness.pop()


def _check_dims_types(name, in_dims, out_dims):
    """torch's errors for in_dims that is not an int, None or a tuple, and out_dims that is not an int,
    None or a (nested) collection of them."""
    if in_dims is not None and not isinstance(in_dims, (int, tuple)):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
                         f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not all(d is None or isinstance(d, int) for d in tree_flatten(out_dims)[0]):
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): out_dims must be an int, None or a python "
                         "collection of ints representing where in the outputs the vmapped dimension should "
                         "appear.")


def _leaf_dims(dims, tree, spec, what):
    """The dim of each leaf of ``tree`` (whose flattened ``spec`` counts the leaves): ``dims`` is an
    int or None for every leaf, or a tree whose structure is a prefix of ``tree``'s (for in_dims, a
    tuple has one entry per positional argument)."""
    if dims is None or isinstance(dims, int):
        return [dims] * spec.num_leaves
    if type(dims) is tuple and type(tree) is tuple and len(dims) == len(tree) and \
            all(d is None or isinstance(d, int) for d in dims):  # (the common in_dims: one per argument)
        return [d for d, child in zip(dims, spec.children_specs) for _ in range(child.num_leaves)]
    node, dims_node = _children(tree), _children(dims)
    if node is None or dims_node is None or len(node[2]) != len(dims_node[2]) or \
            (isinstance(dims, dict) and list(dims) != list(node[1] or [])) or \
            (isinstance(dims, list) != isinstance(tree, list)):  # a list is not a tuple to a pytree
        raise ValueError(f"vmap: {what} is not compatible with the structure of "
                         f"`{'inputs' if what == 'in_dims' else 'outputs'}`. {what} has structure "
                         f"{tree_flatten(dims)[1]} but {'inputs' if what == 'in_dims' else 'outputs'} has structure "
                         f"{tree_flatten(tree)[1]}.")
    return [d for child, child_dims, child_spec in zip(node[2], dims_node[2], spec.children_specs)
            for d in _leaf_dims(child_dims, child, child_spec, what)]


def _out_leaf_dims(out_dims, output, spec):
    """The out_dim of each output leaf (a 1-tuple for a single tensor output too, as in torch)."""
    if isinstance(out_dims, tuple) and len(out_dims) == 1 and isinstance(output, (Tensor, BatchedTensor)):
        out_dims = out_dims[0]
    return _leaf_dims(out_dims, output, spec, "out_dims")


def _batch_size(leaves, dims, in_dims):
    """The size of the mapped dim, the same in every mapped input (checked, with torch's errors)."""
    sizes = []
    for leaf, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(d, int):
            raise ValueError(f"vmap: Got in_dim={d} for an input but in_dim must be either an integer dimension or "
                             "None.")
        if isinstance(leaf, Tensor):
            shape = leaf._data.shape  # (the array's own tuple: no Size made)
        elif isinstance(leaf, BatchedTensor):
            shape = leaf.shape
        else:
            raise ValueError(f"vmap: Got in_dim={d} for an input but the input is of type {type(leaf).__name__}. "
                             "We cannot vmap over non-Tensor arguments, please use None as the respective in_dim")
        ndim = len(shape)
        if not -ndim <= d < ndim:
            raise ValueError(f"vmap: Got in_dim={d} for some input, but that input is a Tensor of dimensionality "
                             f"{ndim} so expected in_dim to satisfy -{ndim} <= in_dim < {ndim}.")
        sizes.append(shape[d])
    if not sizes:
        raise ValueError(f"vmap: Expected at least one Tensor to vmap over. At least one input must be mapped over "
                         f"(got in_dims={in_dims}: every input is unmapped)")
    if sizes.count(sizes[0]) != len(sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return sizes[0]


def _unbatched(leaf, out_dim, level, size):
    """An output with its batch dim at ``out_dim`` (an output that does not depend on the batch is
    expanded along it)."""
    if type(leaf) is BatchedTensor and leaf._level == level:
        if out_dim is None:
            raise ValueError("vmap: can not return a BatchedTensor when out_dim is None")
        value = leaf._value
        return value.movedim(0, out_dim) if out_dim != 0 else value
    if not isinstance(leaf, (Tensor, BatchedTensor)):
        if out_dim is not None:
            raise ValueError(f"vmap: the function must only return Tensors, got type {type(leaf)}. Did you mean to "
                             f"set out_dims= to None for output? (got out_dim={out_dim})")
        return leaf
    if out_dim is None:
        return leaf
    sizes = [-1] * (leaf.ndim + 1)
    sizes[out_dim] = size
    return leaf.unsqueeze(out_dim).expand(*sizes)


def _draw(draw, kind, size, dtype, device, generator, requires_grad, params):
    """A random draw inside vmapped functions: one sample per level with 'different' randomness."""
    if "error" in _randomness:
        raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use the "
                           "'same' or 'different' randomness flags on vmap or perform the randomness operation "
                           "out of vmap")
    levels = [i + 1 for i, r in enumerate(_randomness) if r == "different"]
    out = draw(kind, tuple(batch_sizes[i - 1] for i in levels) + tuple(size), dtype, device, generator,
               requires_grad, params)
    for level in levels:
        out = BatchedTensor(out, level)
    return out


def _concat(chunks, out_dims):
    """The outputs of the chunks joined along their mapped dims."""
    from rlpipe.primitives.shape import cat
    flat = [tree_flatten(c) for c in chunks]
    dims = _out_leaf_dims(out_dims, chunks[0], flat[0][1])
    leaves = [cat([f[0][i] for f in flat], d) if d is not None else flat[0][0][i] for i, d in enumerate(dims)]
    return tree_unflatten(leaves, flat[0][1])
