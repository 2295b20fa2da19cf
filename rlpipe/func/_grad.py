"""``grad`` and ``grad_and_value``: the gradient of a scalar function as a function."""
import functools

from .. import autograd
from .._creation import ones_like
from .._tensor import Tensor
from ..utils._pytree import tree_flatten, tree_unflatten
from ._batched import BatchedTensor, batch_sizes

__all__ = ["grad", "grad_and_value"]


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning ``(gradient, value)`` of ``func``: the gradient with respect to the
    argument(s) ``argnums`` (an int, or a tuple giving a tuple of gradients; an argument may be a
    pytree of tensors), ``value`` what ``func`` returns (``(value, aux)`` with ``has_aux``: ``func``
    returns a pair and only the first is differentiated)."""
    _check_argnums(argnums)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        for p in positions:
            if not -len(args) <= p < len(args):
                raise RuntimeError(f"Got argnums={argnums} but only {len(args)} positional inputs")
        args = list(args)
        flats, inputs = [], []
        with autograd.enable_grad():
            for p in positions:
                leaves, spec = tree_flatten(args[p])
                physical = [_differentiable(leaf) for leaf in leaves]
                inputs += physical
                flats.append((len(leaves), spec))
                args[p] = tree_unflatten([_batched(x) for x in physical], spec)
            output = func(*args, **kwargs)
            value, aux = _split_aux(output, has_aux)
            _check_scalar(value)
            # inside vmap every sample's value depends on its own inputs only: one backward gives them all
            value_physical = _physical(value, len(batch_sizes))
            # nested in another grad (its inputs on an outer graph): record this gradient for the outer one
            nested = any(x.grad_fn is not None for x in inputs)
            grads = autograd.grad(value_physical, inputs, ones_like(value_physical), allow_unused=True,
                                  materialize_grads=True, create_graph=nested) if inputs else ()
        grads, out = [_batched(g) for g in grads], []
        for count, spec in flats:
            out.append(tree_unflatten(grads[:count], spec))
            grads = grads[count:]
        gradient = out[0] if isinstance(argnums, int) else tuple(out)
        value = value.detach()
        return (gradient, (value, aux)) if has_aux else (gradient, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of scalar ``func`` (``(gradient, aux)`` with ``has_aux``);
    see ``grad_and_value``."""
    compute = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradient, value = compute(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient
    return wrapper


def _check_argnums(argnums):
    if isinstance(argnums, int):
        return
    if not isinstance(argnums, tuple) or not argnums or not all(isinstance(a, int) for a in argnums):
        raise RuntimeError(f"argnums must be int or a non-empty tuple of ints, got {argnums!r}")


def _differentiable(leaf):
    """A new leaf holding ``leaf``'s data; inside vmap, batched at every level (see _physical). Inside
    another grad (``leaf`` requires grad), a view of it instead, so the outer gradient reaches it."""
    if not isinstance(leaf, (Tensor, BatchedTensor)):
        raise RuntimeError(f"grad: expected the differentiated arguments to hold only Tensors, got "
                           f"{type(leaf).__name__}")
    if not leaf.is_floating_point():
        raise RuntimeError(f"grad: only floating point Tensors can be differentiated, got dtype {leaf.dtype}")
    physical = _physical(leaf, len(batch_sizes))
    if physical.requires_grad:  # an outer grad differentiates through this one: stay on its graph
        return physical.view_as(physical)
    return physical.detach().requires_grad_(True)


def _physical(x, level):
    """x's data as one tensor of shape (B1, ..., B_level, *x.shape) over the vmap levels 1..level, a
    level where x is not batched expanded to its batch size."""
    if level == 0:
        return x
    if type(x) is BatchedTensor and x._level == level:
        return _physical(x._value, level - 1)
    data = _physical(x, level - 1)
    return data.unsqueeze(level - 1).expand(*data.shape[:level - 1], batch_sizes[level - 1], *data.shape[level - 1:])


def _batched(data):
    """The inverse of _physical: data batched at every vmap level in progress."""
    for level in range(1, len(batch_sizes) + 1):
        data = BatchedTensor(data, level)
    return data


def _split_aux(output, has_aux):
    if not has_aux:
        return output, None
    if not isinstance(output, tuple) or len(output) != 2:
        raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: (output, aux) "
                           "if has_aux is True")
    return output


def _check_scalar(value):
    if not isinstance(value, (Tensor, BatchedTensor)):
        raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                           f"{type(value).__name__}")
    if value.numel() != 1 or value.ndim != 0:
        raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with "
                           f"{value.ndim} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
