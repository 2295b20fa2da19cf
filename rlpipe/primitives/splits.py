"""NumPy-style splits and joins torch has beyond ``shape``: hsplit, vsplit, dsplit (``tensor_split``
along dim 1, 0 and 2), split_with_sizes, unsafe_split, unsafe_chunk, ravel, adjoint, column_stack,
dstack, row_stack, diagflat, cartesian_prod, combinations, sum_to_size and broadcast_shapes; all
compositions of differentiable views, joins, sums and indexing.
"""
import builtins
import itertools

import numpy as np

from .._dispatch import torch_function
from .._tensor import Size, tensor_method
from .indexing import getitem
from .linalg import diag
from .reductions import sum
from .shape import atleast_3d, cat, chunk, expand, reshape, split, stack, tensor_split, vstack


__all__ = ["hsplit", "vsplit", "dsplit", "ravel", "column_stack", "cartesian_prod", "combinations",
           "broadcast_shapes", "dstack", "row_stack", "diagflat", "split_with_sizes", "unsafe_split", "unsafe_chunk",
           "adjoint", "sum_to_size"]


def _split_along(name, input, sections, dim, min_dims):
    """``tensor_split`` along ``dim``, where an int must divide the dim evenly (NumPy's rule)."""
    if input.ndim < min_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, but got a tensor "
                           f"with {input.ndim} dimensions!")
    if isinstance(sections, (builtins.int, np.integer)) and not isinstance(sections, builtins.bool):
        size = input.shape[dim]
        if sections <= 0 or size % sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {size} is not divisible by the split_size {sections}!")
    return tensor_split(input, sections, dim)


@torch_function("input")
@tensor_method
def hsplit(input, indices_or_sections):
    """``tensor_split`` along dim 1 (dim 0 for a 1-d tensor); an int must divide that dim evenly."""
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


@torch_function("input")
@tensor_method
def vsplit(input, indices_or_sections):
    """``tensor_split`` along dim 0 of a tensor of at least 2 dims; an int must divide it evenly."""
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


@torch_function("input")
@tensor_method
def dsplit(input, indices_or_sections):
    """``tensor_split`` along dim 2 of a tensor of at least 3 dims; an int must divide it evenly."""
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


@torch_function("input")
@tensor_method
def ravel(input):
    """The elements as a 1-d tensor, in row-major order (a view where the layout allows)."""
    return reshape(input, (-1,))


def column_stack(tensors):
    """The tensors side by side as columns: 0- and 1-d ones become (n, 1) columns, the others join along dim 1."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"column_stack(): argument 'tensors' must be a tuple or list of Tensors, got "
                        f"{type(tensors).__name__}")
    if not tensors:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    return cat([reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in tensors], 1)


def _check_vectors(tensors):
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")


def cartesian_prod(*tensors):
    """Every combination of one element of each 1-d tensor, one per row (the first tensor varying
    slowest); a single tensor comes back as it is."""
    _check_vectors(tensors)
    if len(tensors) == 1:
        return tensors[0]
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    shape = [t.shape[0] for t in tensors]
    columns = []
    for i, t in enumerate(tensors):
        along = [1] * len(tensors)
        along[i] = -1
        columns.append(reshape(expand(reshape(t, along), shape), (-1,)))
    return stack(columns, 1)


@torch_function("input")
def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of the elements of the 1-d ``input`` (in order, as
    ``itertools.combinations``; ``with_replacement`` allows repeats), one per row."""
    _check_vectors((input,))
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input[:0]
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    from rlpipe._creation import tensor
    index = tensor(rows if rows else np.zeros((0, r), dtype=np.int64), device=input.device)
    return getitem(input, index)


def broadcast_shapes(*shapes):
    """The shape that tensors of the given shapes (each a sequence or an int) broadcast to."""
    as_tuples = [(s,) if isinstance(s, (builtins.int, np.integer)) else tuple(s) for s in shapes]
    for shape in as_tuples:
        if builtins.any(n < 0 for n in shape):
            raise ValueError("Attempting to broadcast a dimension with negative length!")
    result = []
    for k in range(1, builtins.max([len(s) for s in as_tuples], default=0) + 1):
        size = 1
        for i, shape in enumerate(as_tuples):
            n = shape[-k] if k <= len(shape) else 1
            if n != 1 and size != 1 and n != size:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {n} at -{k}! Mismatching argument "
                                   f"at index {i} had {shape}; but expected shape should be broadcastable to "
                                   f"{[size]}")
            size = n if n != 1 else size
        result.append(size)
    return Size(result[::-1])



def dstack(tensors):
    """The tensors joined along dim 2, after making each at least 3-d (as ``atleast_3d``)."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"dstack(): argument 'tensors' must be a tuple or list of Tensors, got "
                        f"{type(tensors).__name__}")
    if not tensors:
        raise RuntimeError("dstack expects a non-empty TensorList")
    return cat([atleast_3d(t) for t in tensors], 2)


def row_stack(tensors):
    """``vstack``'s other name: the tensors joined row-wise along dim 0, 1-d ones taken as rows."""
    return vstack(tensors)


@torch_function("input")
@tensor_method
def diagflat(input, offset=0):
    """The elements of ``input``, flattened, laid on diagonal ``offset`` of a square matrix."""
    return diag(reshape(input, (-1,)), offset)


@torch_function("input")
@tensor_method
def split_with_sizes(input, split_sizes, dim=0):
    """Views of consecutive pieces of the listed sizes along ``dim`` (which must add up to its size)."""
    return split(input, list(split_sizes), dim)


@torch_function("input")
@tensor_method
def unsafe_split(input, split_size, dim=0):
    """``split`` (rlpipe's views are always safe to modify)."""
    return split(input, split_size, dim)


@torch_function("input")
@tensor_method
def unsafe_chunk(input, chunks, dim=0):
    """``chunk`` (rlpipe's views are always safe to modify)."""
    return chunk(input, chunks, dim)


@tensor_method
def adjoint(input):
    """The conjugate transpose of the last two dims, as a view (for real tensors, their transpose)."""
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{input.ndim}-D tensor.")
    return input.transpose(-2, -1)


@tensor_method
def sum_to_size(input, *size):
    """``input`` summed down to ``size`` (a shape it broadcasts from): the leading dims, and the dims
    where size is 1, are summed."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else tuple(size)
    try:
        fits = broadcast_shapes(shape, tuple(input.shape)) == tuple(input.shape)
    except (RuntimeError, ValueError):
        fits = False
    if not fits or len(shape) > input.ndim:
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size {{{list(input.shape)}}}.")
    extra = input.ndim - len(shape)
    out = sum(input, tuple(range(extra))) if extra else input
    dims = tuple(k for k, n in enumerate(shape) if n == 1 and out.shape[k] != 1)
    return sum(out, dims, keepdim=True) if dims else out
