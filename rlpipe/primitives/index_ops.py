"""Indexed writes and reads beyond ``indexing``: scatter_reduce (on ``segments.ScatterReduce``: sum,
prod, mean, amax, amin, with or without the input's own values), index_put with accumulation
(``IndexPutAccumulate``), and the compositions take, index_copy, index_fill, index_put, put,
masked_scatter, index_reduce and the view scatters (diagonal_scatter, select_scatter, slice_scatter);
the index grids tril_indices, triu_indices and unravel_index.
"""
import builtins

import numpy as np

from .. import _dtypes
from .._dispatch import torch_function
from .._tensor import Tensor, tensor_method
from .base import Op, unbroadcast
from .common import _LEGACY_TYPE_NAMES, _cast, _scalar, inplace_variant
from .indexing import getitem, setitem
from .segments import ScatterReduce
from .splits import broadcast_shapes
from .shape import flatten


__all__ = ["IndexPutAccumulate", "scatter_reduce", "take", "index_copy", "index_fill",
           "index_put", "put", "masked_scatter", "index_reduce", "tril_indices", "triu_indices", "unravel_index",
           "diagonal_scatter", "select_scatter", "slice_scatter"]

_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_ALIASES = {"max": "amax", "min": "amin"}  # torch also takes these two spellings


class IndexPutAccumulate(Op):
    """A copy of x with ``values`` added at the advanced index (repeated positions add up)."""

    @staticmethod
    def forward(ctx, x, values, index):
        out = x.copy()
        picked = out[index]
        ctx.be.scatter_add(out, index, ctx.xp.broadcast_to(values, picked.shape).astype(x.dtype, copy=False))
        ctx.args = index, values.shape
        return out

    @staticmethod
    def backward(ctx, g):
        index, value_shape = ctx.args
        return g, unbroadcast(g[index], value_shape), None


# ---- the public ops -------------------------------------------------------------------------------

def _first_outside(index, low, n):
    """The largest (or smallest) value of the integer tensor ``index`` where one lies outside [low, n), else None."""
    values = index._data
    if not values.size:
        return None
    lo, hi = builtins.int(values.min()), builtins.int(values.max())
    return hi if hi >= n else lo if lo < low else None


def _check_index(name, index):
    if not isinstance(index, Tensor) or index.dtype not in (_dtypes.int64, _dtypes.int32):
        got = _LEGACY_TYPE_NAMES[index.dtype.name] if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {got}")


def _check_scatter_shapes(input, d, index, src):
    if index.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if builtins.any(index.shape[k] > input.shape[k] for k in range(index.ndim) if k != d) or \
            builtins.any(i > s for i, s in zip(index.shape, src.shape)):
        raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self {list(input.shape)} apart "
                           f"from dimension {d} and to be no larger size than src {list(src.shape)}")
    bad = _first_outside(index, 0, input.shape[d])
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {input.shape[d]}")


@inplace_variant
@tensor_method
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """A copy of ``input`` with the values of ``src`` reduced into the positions the int64 ``index``
    picks along ``dim`` (as ``scatter``): ``reduce`` is "sum", "prod", "mean", "amax" or "amin";
    ``include_self=False`` leaves input's own values out where something is scattered."""
    reduce = _ALIASES.get(reduce, reduce)
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if not isinstance(index, Tensor) or index.dtype not in (_dtypes.int64, _dtypes.int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if not isinstance(src, Tensor) or src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    d = input._dim(dim)
    _check_scatter_shapes(input, d, index, src)
    return ScatterReduce.apply(input, d, index._data.astype(np.int64, copy=False), src, reduce,
                               builtins.bool(include_self))


@torch_function("input", "index")
@tensor_method
def take(input, index):
    """The elements of ``input``, seen as 1-d, at the int64 ``index`` (negative from the end), in
    index's shape."""
    _check_index("take", index)
    n = input.numel()
    bad = _first_outside(index, -n, n)
    if bad is not None:
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    return getitem(flatten(input), index)


def _slices_at(input, dim, index, name, prefix=""):
    """The index tuple that picks the slices at the 1-d ``index`` along ``dim``, after torch's checks
    (``prefix`` starts the out-of-range message, as torch's does for some ops)."""
    _check_index(name, index)
    d = input._dim(dim)
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    n = input.shape[d] if input.ndim else 1
    bad = _first_outside(index, -n, n)
    if bad is not None:
        raise IndexError(f"{prefix}index {bad} is out of bounds for dimension {d} with size {n}")
    return (slice(None),) * d + (index.reshape(-1),)


def _check_copy_shapes(input, d, index, source):
    """torch's errors where ``source`` does not hold one slice of ``input`` per index."""
    for k in range(builtins.max(input.ndim, source.ndim)):
        mine = input.shape[k] if k < input.ndim else 1
        theirs = source.shape[k] if k < source.ndim else 1
        if k != d and mine != theirs:
            raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice shapes. Destination "
                               f"slice shape: {mine} at dimension {k} and source slice shape: {theirs} at "
                               f"dimension {k}.")
    size = source.shape[d] if d < source.ndim else 1
    if size != index.numel():
        raise IndexError(f"index_copy_(): Number of indices ({index.numel()}) should be equal to source.size(dim) "
                         f"({size})")


@inplace_variant
@tensor_method
def index_copy(input, dim, index, source):
    """A copy of ``input`` whose slices at ``index`` along ``dim`` are those of ``source`` (in index
    order; of one dtype with input)."""
    where = _slices_at(input, dim, index, "index_copy_", "index_copy_(): ")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{_LEGACY_TYPE_NAMES[input.dtype.name]} and (source) "
                           f"{_LEGACY_TYPE_NAMES[source.dtype.name]}")
    _check_copy_shapes(input, input._dim(dim), index, source)
    out = input.clone()
    setitem(out, where, source)
    return out


@inplace_variant
@tensor_method
def index_fill(input, dim, index, value):
    """A copy of ``input`` whose slices at ``index`` along ``dim`` hold ``value`` (a number or a 0-d
    tensor, whose gradient is the sum over the filled slices)."""
    where = _slices_at(input, dim, index, "index_fill_")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        value = _cast(value, input.dtype)
    elif not input.is_floating_point() and input.dtype is not _dtypes.bool:
        value = builtins.int(_scalar(value))
    out = input.clone()
    setitem(out, where, value)
    return out


@inplace_variant
@tensor_method
def index_put(input, indices, values, accumulate=False):
    """A copy of ``input`` with ``values`` (of its dtype, broadcast) written at ``input[indices]``
    (a tuple of index tensors, bool masks included); ``accumulate=True`` adds them instead,
    repeated positions adding up."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' (position 1) must be tuple of Tensors, not "
                        f"{type(indices).__name__}")
    if values.dtype is not input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_LEGACY_TYPE_NAMES[input.dtype.name]} for the destination and "
                           f"{_LEGACY_TYPE_NAMES[values.dtype.name]} for the source.")
    index = tuple(indices)
    if not accumulate:
        out = input.clone()
        setitem(out, index, values)
        return out
    getitem(input.detach(), index)  # raises torch's IndexError for a bad index
    arrays = []
    for part in index:
        arrays.extend(part._device._backend.xp.nonzero(part._data) if part.dtype is _dtypes.bool else [part._data])
    return IndexPutAccumulate.apply(input, values, tuple(arrays))


# ---- flat writes, masked writes, index reductions and index grids --------------------------------

@inplace_variant
@tensor_method
def put(input, index, source, accumulate=False):
    """A copy of ``input`` with ``source``'s values written (``accumulate``: added) at the positions
    ``index`` picks in input seen as 1-d (negative from the end); index and source have one size."""
    _check_index("put_", index)
    if source.dtype is not input.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{_LEGACY_TYPE_NAMES[input.dtype.name]} and source.dtype = "
                           f"{_LEGACY_TYPE_NAMES[source.dtype.name]}")
    if index.numel() != source.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    n = input.numel()
    bad = _first_outside(index, -n, n)
    if bad is not None:
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    flat = index_put(flatten(input), (flatten(index),), flatten(source), accumulate)
    return flat.reshape(input.shape)


@inplace_variant
@tensor_method
def masked_scatter(input, mask, source):
    """A copy of ``input`` whose elements where the bool ``mask`` (broadcast) is True take ``source``'s
    values in order (row-major); source needs at least as many elements as the mask has Trues."""
    if mask.dtype is not _dtypes.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{_LEGACY_TYPE_NAMES[mask.dtype.name]}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{_LEGACY_TYPE_NAMES[input.dtype.name]} and {_LEGACY_TYPE_NAMES[source.dtype.name]}")
    shape = broadcast_shapes(input.shape, mask.shape)
    full_mask = mask.expand(shape)
    count = builtins.int(full_mask._data.sum())
    if count > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out = input.expand(shape).clone()
    setitem(out, full_mask, getitem(flatten(source), slice(0, count)))
    return out


_INDEX_REDUCES = ("prod", "mean", "amax", "amin")


@inplace_variant
@tensor_method
def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """A copy of ``input`` with the slices of ``source`` reduced ("prod", "mean", "amax", "amin") into
    the slices at the 1-d ``index`` along ``dim``: ``scatter_reduce`` with index spread over the slices."""
    if reduce not in _INDEX_REDUCES:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({_LEGACY_TYPE_NAMES[input.dtype.name]}) and source "
                           f"({_LEGACY_TYPE_NAMES[source.dtype.name]}) must have the same scalar type")
    _check_index("index_reduce_", index)
    d = input._dim(dim)
    size = source.shape[d] if source.ndim else 1
    if index.numel() != size:
        raise RuntimeError(f"index_reduce_(): Number of indices ({index.numel()}) should be equal to "
                           f"source.size(dim): ({size}), for dim: {d}")
    if _first_outside(index, 0, input.shape[d] if input.ndim else 1) is not None:
        raise IndexError("index out of range in self")
    spread = index.reshape([-1 if k == d else 1 for k in range(source.ndim)]).expand(source.shape)
    return scatter_reduce(input, d, spread.contiguous(), source, reduce, include_self=include_self)


def _triangle_indices(row, col, offset, dtype, device, lower):
    """The (2, N) row and column indices of a row x col matrix's lower (or upper) triangle from diagonal ``offset``."""
    for name, n in (("row", row), ("col", col)):
        if n < 0:
            raise RuntimeError(f"{name} must be non-negative, got{n}")
    rows, cols = np.indices((row, col)).reshape(2, -1)
    keep = cols - rows <= offset if lower else cols - rows >= offset
    from rlpipe._creation import tensor
    return tensor(np.stack([rows[keep], cols[keep]]), dtype=dtype, device=device)


def tril_indices(row, col, offset=0, *, dtype=_dtypes.int64, device=None, layout=None):
    """The indices of the lower triangle of a row x col matrix (on and below diagonal ``offset``),
    row by row, as a (2, N) tensor."""
    return _triangle_indices(row, col, offset, dtype, device, True)


def triu_indices(row, col, offset=0, *, dtype=_dtypes.int64, device=None, layout=None):
    """The indices of the upper triangle of a row x col matrix (on and above diagonal ``offset``),
    row by row, as a (2, N) tensor."""
    return _triangle_indices(row, col, offset, dtype, device, False)


def unravel_index(indices, shape):
    """The coordinates, one tensor per dim of ``shape``, of the flat ``indices`` (an integer tensor
    or number) in a row-major array of that shape."""
    from rlpipe._creation import as_tensor
    flat = indices if isinstance(indices, Tensor) else as_tensor(indices)
    if flat.is_floating_point() or flat.dtype is _dtypes.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {flat.dtype}")
    sizes = (shape,) if isinstance(shape, (builtins.int, np.integer)) else tuple(shape)
    coordinates, rest = [], flat
    for n in reversed(sizes):
        coordinates.append(rest.remainder(n))
        rest = rest.div(n, rounding_mode="floor")
    return tuple(reversed(coordinates))


# ---- a copy with one view replaced -----------------------------------------------------------------

def _with_view_replaced(input, src, take_view):
    """A copy of ``input`` whose view ``take_view(copy)`` holds ``src`` (of exactly that view's shape);
    gradients reach src through the view and input everywhere else."""
    out = input.clone()
    view = take_view(out)
    if tuple(src.shape) != tuple(view.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(view.shape)}")
    view.copy_(src)
    return out


@torch_function("input", "src")
@tensor_method
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of ``input`` whose diagonal ``offset`` of dims ``dim1``/``dim2`` holds ``src``."""
    return _with_view_replaced(input, src, lambda t: t.diagonal(offset, dim1, dim2))


@torch_function("input", "src")
@tensor_method
def select_scatter(input, src, dim, index):
    """A copy of ``input`` whose slice at ``index`` of dim ``dim`` holds ``src``."""
    return _with_view_replaced(input, src, lambda t: t.select(dim, index))


@torch_function("input", "src")
@tensor_method
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of ``input`` whose slice ``start:end:step`` of dim ``dim`` holds ``src``."""
    d = input._dim(dim)
    return _with_view_replaced(input, src, lambda t: t[(slice(None),) * d + (slice(start, end, step),)])
