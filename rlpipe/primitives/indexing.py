"""Reading and writing by index: the Functions (x[index], index_put, gather, scatter, index_select,
embedding, index_add) and the public ops, ``x[index]`` and ``x[index] = value`` included, with
one_hot, nonzero, unique and repeat_interleave.
"""
import builtins
import functools

import numpy as np

from .. import _dtypes
from .._device import CPU as _CPU
from .._dispatch import torch_function
from .._tensor import Tensor, tensor_method, wrap
from ..autograd.grad_mode import state as _grad_state
from ..backends.cpu import along, index_add as _cpu_index_add, silence_fp_warnings, restore_fp_warnings
from .base import Op, unbroadcast, shape_of, along_dim
from .common import (_BFLOAT16, _NUMBER, _INT64, _LEGACY_TYPE_NAMES, inplace_variant, _cast, _check_writable,
                     _inplace, with_out, _mark_view, _new_view, _scalar, _view_index)
from .elementwise import Where
from .segments import ScatterReduce
from .shape import expand, flatten, reshape


class Index(Op):
    """x[index]; ``index`` has already been converted to backend arrays and Python values."""

    @staticmethod
    def forward(ctx, x, index, advanced):
        ctx.args = x.shape, x.dtype, index, advanced
        if advanced and len(index) == 1 and index[0].dtype.kind in "iu" and x.ndim:
            return x.take(index[0], axis=0)  # the same rows, several times faster than x[index]
        return x[index]

    @staticmethod
    def backward(ctx, g):
        shape, dtype, index, advanced = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        if advanced:
            ctx.be.scatter_add(out, index, g)
        else:
            out[index] = g
        return out, None, None


class IndexPut(Op):
    """A copy of x with x[index] = value (what ``x[index] = value`` records when it needs a graph)."""

    @staticmethod
    def forward(ctx, x, value, index):
        out = x.copy()
        out[index] = value
        ctx.args = index, shape_of(value)
        return out

    @staticmethod
    def backward(ctx, g):
        index, value_shape = ctx.args
        gx = g.copy()
        gx[index] = 0
        gv = None
        if value_shape is not None:
            gv = unbroadcast(g[index], value_shape)
        return gx, gv, None


class Gather(Op):
    """out[i][j] = x[i][index[i][j]] along ``dim`` (take_along_axis); the gradient is scatter-added back."""
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.args = x.shape, dim, index
        sel = tuple(slice(0, n) if d != dim else slice(None) for d, n in enumerate(index.shape))
        return x[sel][along_dim(ctx.xp, index, dim)]

    @staticmethod
    def backward(ctx, g):
        shape, dim, index = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        ctx.be.scatter_add(out, along_dim(ctx.xp, index, dim), g)
        return out, None, None


class Scatter(Op):
    """x with values from ``src`` (array or scalar) written at ``index`` along ``dim``; ``add`` accumulates."""

    @staticmethod
    def forward(ctx, x, dim, index, src, add):
        where = along_dim(ctx.xp, index, dim)
        src_shape = shape_of(src)
        used = tuple(slice(0, n) for n in index.shape)  # the part of src that index covers
        if src_shape is not None:
            src = src[used]
        out = x.copy()
        if add:
            ctx.be.scatter_add(out, where, src)
        else:
            out[where] = src
        ctx.args = where, add, src_shape, used
        return out

    @staticmethod
    def backward(ctx, g):
        where, add, src_shape, used = ctx.args
        gx = g
        if not add:
            gx = g.copy()
            gx[where] = 0
        gsrc = None
        if src_shape is not None and ctx.needs_input_grad[3]:
            gsrc = ctx.xp.zeros(src_shape, dtype=g.dtype)
            gsrc[used] = g[where]
        return gx, None, None, gsrc, None


class IndexSelect(Op):
    """The slices of x at ``index`` along ``dim``; the gradient is scatter-added back (repeats accumulate)."""
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.args = x.shape, dim, index
        return ctx.xp.take(x, index, axis=dim)

    @staticmethod
    def backward(ctx, g):
        shape, dim, index = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        ctx.be.scatter_add(out, along(index, dim), g)
        return out, None, None


class Unfold(Op):
    """Every ``size``-long window, ``step`` apart, along ``dim``: the windows' positions become a new
    last dim (a copy, where torch returns a view). The gradient is scatter-added back, so elements
    shared by overlapping windows accumulate."""
    node_name = "UnfoldBackward0"

    @staticmethod
    def forward(ctx, x, dim, size, step):
        xp = ctx.xp
        count = (x.shape[dim] - size) // step + 1
        positions = (xp.arange(count)[:, None] * step + xp.arange(size)).reshape(-1)
        ctx.args = x.shape, dim, size, positions
        windows = xp.take(x, positions, axis=dim).reshape(x.shape[:dim] + (count, size) + x.shape[dim + 1:])
        return xp.ascontiguousarray(xp.moveaxis(windows, dim + 1, -1))

    @staticmethod
    def backward(ctx, g):
        shape, dim, size, positions = ctx.args
        flat = ctx.xp.moveaxis(g, -1, dim + 1).reshape(shape[:dim] + (positions.size,) + shape[dim + 1:])
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        ctx.be.scatter_add(out, along(positions, dim), flat)
        return out, None, None, None


class Embedding(Op):
    """Rows of ``weight`` picked by integer ``indices``; the row at ``padding_idx`` gets no gradient,
    and ``scale_grad_by_freq`` divides each row's gradient by how often it was picked."""
    node_name = "EmbeddingBackward0"

    @staticmethod
    def forward(ctx, weight, indices, padding_idx, scale_grad_by_freq):
        ctx.args = weight.shape, indices, padding_idx, scale_grad_by_freq
        return weight[indices]

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        shape, indices, padding_idx, by_freq = ctx.args
        flat = indices.reshape(-1)
        rows = g.reshape(-1, shape[1])
        if by_freq:
            counts = xp.bincount(flat, minlength=shape[0])
            rows = rows / counts[flat].astype(g.dtype)[:, None]
        gw = xp.zeros(shape, dtype=g.dtype)
        ctx.be.scatter_add(gw, flat, rows)
        if padding_idx is not None and padding_idx >= 0:
            gw[padding_idx] = 0
        return gw, None, None, None


def index_add_into(be, target, dim, positions, values, in_float32=False):
    """``be.index_add`` of ``values`` into ``target``, each repeated position added in turn and
    rounded to the target's dtype; ``in_float32``: the sums of a float16/bfloat16 target taken in
    float32 and rounded once (torch's CPU kernel for 2+-dim tensors along the first or last dim,
    int64 positions and alpha 1, where it adds through scatter_add)."""
    if not in_float32:
        be.index_add(target, dim, positions, values)
        return
    sums = target.astype(np.float32)
    be.index_add(sums, dim, positions, values.astype(np.float32))
    target[...] = sums


class IndexAdd(Op):
    """A copy of x with ``alpha * source`` added at the positions ``index`` picks along ``dim``
    (repeated positions accumulate; see ``index_add_into`` for ``in_float32``)."""

    @staticmethod
    def forward(ctx, x, dim, index, source, alpha, in_float32=False):
        out = x.copy()
        index_add_into(ctx.be, out, dim, index, source if alpha == 1 else source * x.dtype.type(alpha), in_float32)
        ctx.args = dim, index, alpha
        return out

    @staticmethod
    def backward(ctx, g):
        dim, index, alpha = ctx.args
        g_source = ctx.xp.take(g, index, axis=dim) if ctx.needs_input_grad[3] else None
        if g_source is not None and alpha != 1:
            g_source = g_source * alpha
        return g, None, None, g_source, None


# ---- the public ops -------------------------------------------------------------------------------

def one_hot(tensor, num_classes=-1):
    """Class indices (int64) to one-hot rows of length ``num_classes`` (int64 output)."""
    if tensor.dtype is not _dtypes.int64:
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor, got {tensor.dtype}")
    xp = tensor._device._backend.xp
    values = tensor._data
    if num_classes == -1:
        if values.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = builtins.int(values.max()) + 1
    if _outside(values, num_classes, xp):
        raise RuntimeError("Class values must be non-negative." if builtins.int(values.min()) < 0
                           else "Class values must be smaller than num_classes.")
    if num_classes <= _SMALL_CLASSES:  # rows of a cached identity: one indexing (it copies)
        return wrap(_identity(num_classes, tensor._device)[values], tensor._device)
    return wrap((values[..., None] == xp.arange(num_classes)).astype(np.int64), tensor._device)


_SMALL_CLASSES = 64


def _outside(values, n, xp):
    """Whether an index lies outside [0, n). A few indices are checked as a Python list, whose
    min and max cost less than NumPy's calls."""
    if values.size <= 64:
        flat = values.reshape(-1).tolist()
        return builtins.bool(flat) and (builtins.min(flat) < 0 or builtins.max(flat) >= n)
    # as unsigned, negative values are huge: one comparison checks both bounds
    return builtins.bool(xp.count_nonzero(values.astype(np.uint64) >= n))


@functools.lru_cache(maxsize=128)
def _identity(n, device):
    """The n x n int64 identity matrix on ``device`` (n <= _SMALL_CLASSES)."""
    return device._backend.asarray(np.eye(n, dtype=np.int64), index=device.index)


def _index_part(t, item, xp):
    """One component of an index, converted for the backend; also says whether it is advanced."""
    if isinstance(item, Tensor):
        a = item._data if item._device is t._device else t._device._backend.asarray(item._host())
        if a.dtype == np.uint8:  # a byte tensor indexes as a mask, as in torch
            a = a.astype(bool)
        if a.ndim == 0 and a.dtype.kind in "iu":
            return builtins.int(a), False
        return a, True
    if isinstance(item, (builtins.int, np.integer)) and not isinstance(item, (builtins.bool, np.bool_)):
        return builtins.int(item), False
    if item is None or item is Ellipsis:
        return item, False
    if isinstance(item, slice):
        fix = lambda v: builtins.int(v) if isinstance(v, (Tensor, np.integer)) else v
        if item.step is not None and fix(item.step) <= 0:
            raise ValueError("step must be greater than zero")
        return slice(fix(item.start), fix(item.stop), fix(item.step)), False
    if isinstance(item, range):  # a sequence of positions to torch, as a list would be
        item = np.arange(item.start, item.stop, item.step, dtype=np.int64)
    if isinstance(item, (list, np.ndarray, builtins.bool, np.bool_)) or hasattr(item, "__cuda_array_interface__"):
        return t._device._backend.asarray(item if not isinstance(item, list) or item else np.zeros(0, np.int64)), True
    error = TypeError if isinstance(item, str) else IndexError
    raise error(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                f"valid indices (got {type(item).__name__})")


def _convert_index(t, index):
    items = index if isinstance(index, tuple) else (index,)
    xp = t._device._backend.xp
    parts = [_index_part(t, item, xp) for item in items]
    return tuple(p for p, _ in parts), builtins.any(adv for _, adv in parts)


@tensor_method("__getitem__")
def getitem(input, index):
    """``input[index]`` with torch's rules: ints, slices, None and Ellipsis give a view; index tensors, lists and masks
    give a copy."""
    if not (input._requires_grad and _grad_state.grad) and input._data.ndim \
            and (type(index) is builtins.int or _is_plain_basic(index)):  # x[i] (c51.py's rows) without a call
        # the common case without a graph: ints and slices give a view, straight from the backend
        view_index = index + (Ellipsis,) if type(index) is tuple else (index, Ellipsis)
        try:
            data = input._data[view_index]
        except IndexError as e:
            raise _index_error(e) from None
        return _new_view(input, data, lambda a: a[view_index])
    index, advanced = _convert_index(input, index)
    try:
        if advanced and builtins.any(type(p) is builtins.int for p in index):
            # torch selects with integers first; NumPy would treat them as advanced indices
            ints, rest = _split_integer_index(index)
            selected = _mark_view(Index.apply(input, ints, False), input, lambda a: a[_view_index(ints)])
            return Index.apply(selected, rest, True)
        if advanced:
            return Index.apply(input, index, True)
        view_index = _view_index(index)  # a view even where integers take every dimension
        return _mark_view(Index.apply(input, view_index, False), input, lambda a: a[view_index])
    except IndexError as e:
        raise _index_error(e) from None


def _index_error(error):
    """NumPy's IndexError in torch's words (torch counts dimensions, NumPy axes)."""
    return IndexError(str(error).replace(" for axis ", " for dimension "))


_SLICE_BOUND = (builtins.int, type(None))


def _is_plain_basic(index):
    """Whether ``index`` is an int, a slice of ints with a positive step, or a tuple of those, None
    and no Ellipsis: what NumPy indexes exactly as torch does (a view), so no conversion is needed."""
    for part in index if type(index) is tuple else (index,):
        kind = type(part)
        if kind is builtins.int or part is None:
            continue
        if kind is not slice or type(part.start) not in _SLICE_BOUND or type(part.stop) not in _SLICE_BOUND:
            return False
        step = part.step
        if step is not None and (type(step) is not builtins.int or step <= 0):
            return False
    return True


def _split_integer_index(index):
    """(a basic index applying the integers, the rest of the index for the result)."""
    ints, rest = [], []
    for p in index:
        if type(p) is builtins.int:
            ints.append(p)
        elif p is None or p is Ellipsis or isinstance(p, slice):
            ints.append(p)
            rest.append(slice(None) if p is not Ellipsis else p)
        else:  # an index array: a boolean one spans as many dims as it has
            span = p.ndim if p.dtype == bool else 1
            ints.extend([slice(None)] * span)
            rest.append(p)
    return tuple(ints), tuple(rest)


@tensor_method("__setitem__")
def setitem(input, index, value):
    """``input[index] = value`` in place (value cast to input's dtype); recorded in the graph when either side requires
    grad."""
    index, _ = _convert_index(input, index)
    if isinstance(value, Tensor):
        if value._device is not input._device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{input._device} and {value._device}!")
        if value.dtype is not input.dtype:
            value = _cast(value, input.dtype)
    elif not isinstance(value, _NUMBER):
        from rlpipe._creation import as_tensor
        value = as_tensor(value, dtype=input.dtype, device=input._device)
    else:
        value = _scalar(value)
    tracking = _grad_state.grad and (input._requires_grad or isinstance(value, Tensor) and value._requires_grad)
    if not tracking:
        _check_writable(input)
        input._data[index] = value._data if isinstance(value, Tensor) else value
        input._vc[0] += 1
        return
    _inplace(input, lambda src, v: IndexPut.apply(src, v, index), value)


def _along_dim_index(input, dim, index, name):
    if isinstance(index, Tensor) and index.dtype is _dtypes.int32:
        index = _cast(index, _dtypes.int64)
    if not isinstance(index, Tensor) or index.dtype is not _dtypes.int64:
        raise RuntimeError(f"{name}(): Expected dtype int64 for index, got "
                           f"{index.dtype if isinstance(index, Tensor) else type(index).__name__}")
    d = input._dim(dim)
    if index.ndim != input.ndim and input.ndim:
        raise RuntimeError(f"Index tensor must have the same number of dimensions as input tensor "
                           f"({index.ndim} vs {input.ndim}) in {name}")
    values = index._data
    if values.size:
        n = input.shape[d]
        lo, hi = builtins.int(values.min()), builtins.int(values.max())
        if lo < 0 or hi >= n:
            raise RuntimeError(f"index {hi if hi >= n else lo} is out of bounds for dimension {d} with size {n}")
    for k in range(index.ndim):
        if k != d and index.shape[k] > input.shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(index.shape)} to be "
                               f"no larger than self {list(input.shape)} apart from dimension {d}")
    return d, values


@with_out("input")
@tensor_method
def gather(input, dim, index, *, sparse_grad=False):
    """Picks ``input`` values along ``dim`` at the int64 ``index`` (same number of dims): ``out[i][j] =
    input[i][index[i][j]]`` for dim 1."""
    d, idx = _along_dim_index(input, dim, index, "gather")
    return Gather.apply(input, d, idx)


@tensor_method
def take_along_dim(input, indices, dim=None):
    """``gather`` with ``input`` and ``indices`` broadcast outside ``dim``; over the flattened tensors when ``dim`` is
    None."""
    if dim is None:
        return gather(flatten(input), 0, flatten(indices))
    d = input._dim(dim)
    shape = list(np.broadcast_shapes(tuple(s for k, s in enumerate(input.shape) if k != d),
                                     tuple(s for k, s in enumerate(indices.shape) if k != d)))
    in_shape = shape[:d] + [input.shape[d]] + shape[d:]
    idx_shape = shape[:d] + [indices.shape[d]] + shape[d:]
    return gather(expand(input, in_shape), d, expand(indices, idx_shape).contiguous())


def _scatter(input, dim, index, src, add, name):
    d, idx = _along_dim_index(input, dim, index, name)
    if isinstance(src, Tensor):
        if src.dtype is not input.dtype:
            raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
        for k in range(index.ndim):
            if index.shape[k] > src.shape[k]:
                raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than src "
                                   f"{list(src.shape)} in {name}")
    else:
        src = _scalar(src)
    return Scatter.apply(input, d, idx, src, add)


@inplace_variant
@tensor_method
def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of ``input`` with ``src`` (a tensor or a number, also ``value=``) written at the int64 ``index`` along
    ``dim``; ``reduce="add"`` adds instead (``scatter_add``), ``reduce="multiply"`` multiplies."""
    src = src if src is not None else value
    if reduce is None:
        return _scatter(input, dim, index, src, False, "scatter")
    if reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if not isinstance(src, Tensor):
        from rlpipe._creation import full_like
        src = full_like(index, _scalar(src), dtype=input.dtype)
    if reduce == "add":
        return scatter_add(input, dim, index, src)
    d, idx = _along_dim_index(input, dim, index, "scatter")
    if src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    return ScatterReduce.apply(input, d, idx, src, "prod", True)


@inplace_variant
@tensor_method
def scatter_add(input, dim, index, src):
    """A copy of ``input`` with ``src`` added at the int64 ``index`` along ``dim``; repeated positions accumulate."""
    return _scatter(input, dim, index, src, True, "scatter_add")


@tensor_method  # (above the hook: the method too offers a batched index to vmap)
@torch_function("input", "index")
def index_select(input, dim, index):
    """The slices of ``input`` at the positions of the 1-d int64 (or int32) ``index`` along ``dim``, as a copy."""
    if not isinstance(index, Tensor) or index.dtype not in (_dtypes.int64, _dtypes.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = input._dim(dim) if input.ndim else 0
    values = index._data.reshape(-1)
    n = input.shape[d] if input.ndim else 1
    if values.size and (builtins.int(values.min()) < 0 or builtins.int(values.max()) >= n):
        raise RuntimeError(f"index out of range in self: index_select on dimension {d} with size {n}")
    return IndexSelect.apply(input, d, values)


@inplace_variant
@tensor_method
def masked_fill(input, mask, value):
    """A copy of ``input`` with ``value`` (a number or a 0-d tensor) where the bool ``mask`` (broadcast) is True."""
    if not isinstance(mask, Tensor) or mask.dtype is not _dtypes.bool:
        raise RuntimeError(f"masked_fill only supports boolean masks, but got mask with dtype "
                           f"{mask.dtype if isinstance(mask, Tensor) else type(mask).__name__}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        value = _cast(value, input.dtype)
    else:  # the fill value takes the tensor's dtype, as in torch
        value = input._data.dtype.type(_scalar(value))
    return Where.apply(mask, value, input)


@torch_function("input")
@tensor_method
def masked_select(input, mask):
    """The elements where the bool ``mask`` is True (both broadcast), as a 1-d copy."""
    shape = np.broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    return getitem(expand(input, shape), expand(mask, shape))


@tensor_method
def nonzero(input, *, as_tuple=False):
    """The int64 indices of the nonzero elements: one row per element (an n x ndim tensor), or one tensor per dim with
    ``as_tuple=True``."""
    xp = input._device._backend.xp
    idx = xp.nonzero(input._data)
    if as_tuple:
        return tuple(wrap(i.astype(np.int64), input._device) for i in idx)
    return wrap(xp.stack(idx, axis=1).astype(np.int64), input._device)


@tensor_method
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """torch.unique: the distinct values (of the flattened input, or the distinct slices along
    ``dim``), sorted whatever ``sorted`` says (as torch's CPU and CUDA kernels); with
    ``return_inverse`` the index of each input element (slice) among them, with ``return_counts``
    how often each occurs. Not differentiable, as in torch."""
    xp = input._device._backend.xp
    if dim is not None:
        dim = input._dim(dim)
    values, inverse, counts = xp.unique(input._data.reshape(-1) if dim is None else input._data,
                                        return_inverse=True, return_counts=True, axis=dim)
    out = [wrap(values, input._device)]
    if return_inverse:
        shape = tuple(input.shape) if dim is None else (input.shape[dim],)
        out.append(wrap(inverse.reshape(shape).astype(np.int64), input._device))
    if return_counts:
        out.append(wrap(counts.astype(np.int64), input._device))
    return out[0] if len(out) == 1 else tuple(out)


@inplace_variant
@tensor_method
def index_add(input, dim, index, source, *, alpha=1):
    """A copy of input with ``alpha * source`` added at ``index`` along ``dim`` (repeats accumulate)."""
    if input.ndim == 0:  # a 0-d tensor is a one-element vector here
        _index_add_positions(input, dim, index, source)  # torch's checks of the arguments as given
        return reshape(index_add(reshape(input, 1), 0, index, reshape(source, -1), alpha=alpha), ())
    d, values = _index_add_positions(input, dim, index, source)
    try:
        return IndexAdd.apply(input, d, values, source, _scalar(alpha), _sums_in_float32(input, d, index, alpha))
    except IndexError:  # the backend's index_add checks the positions
        raise _index_out_of_range(input, d, values) from None


_HALF_TYPES = (np.dtype(np.float16), _BFLOAT16)


def _sums_in_float32(input, d, index, alpha):
    """Whether torch's CPU index_add takes these sums in float32 and rounds once (see
    ``primitives.indexing.index_add_into``): checked after ``_index_add_positions``."""
    data = input._data
    return data.dtype in _HALF_TYPES and data.ndim > 1 and d in (0, data.ndim - 1) and alpha == 1 \
        and index._data.dtype is _INT64 and input._device is _CPU


_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


def _index_add_positions(input, dim, index, source):
    """Checks index_add's arguments as torch does, but for the positions' range (the backend's
    index_add checks it as it adds); returns the dim and the positions as int64. For a 0-d input
    only the dim and the dtypes are checked (the caller reshapes it)."""
    data, values = input._data, index._data if isinstance(index, Tensor) else None
    d = dim if type(dim) is builtins.int and 0 <= dim < data.ndim else input._dim(dim)
    if values is None or values.dtype not in _INDEX_DTYPES:
        raise RuntimeError("index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{_LEGACY_TYPE_NAMES[index.dtype.name] if values is not None else type(index)}")
    if values.ndim > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{_LEGACY_TYPE_NAMES[index.dtype.name]} and size: {list(index.shape)}")
    if source._data.dtype != data.dtype:
        raise RuntimeError(f"index_add_(): self ({_LEGACY_TYPE_NAMES[input.dtype.name]}) and source "
                           f"({_LEGACY_TYPE_NAMES[source.dtype.name]}) must have the same scalar type")
    shape, source_shape = data.shape, source._data.shape
    if not shape:
        return d, None
    n_source = source_shape[d] if source_shape else 1
    if values.size != n_source:
        raise RuntimeError(f"index_add_(): Number of indices ({values.size}) should be equal to source.size(dim): "
                           f"({n_source}), for dim: {d}")
    if source_shape != shape and (len(source_shape) != len(shape) or source_shape[:d] != shape[:d]
                                  or source_shape[d + 1:] != shape[d + 1:]):
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(shape)} source.shape = {list(source_shape)}")
    if values.dtype is not _INT64:
        values = values.reshape(-1).astype(np.int64)
    elif values.ndim != 1:
        values = values.reshape(-1)
    return d, values


def _index_out_of_range(input, d, values):
    """torch's error for positions outside input's dim ``d`` (the backend's index_add finds them):
    an IndexError for a vector (torch's 1-d kernel), else a RuntimeError naming the first one."""
    if input._data.ndim == 1:
        return IndexError("index out of range in self")
    n = input._data.shape[d]
    first = builtins.int(values[(values < 0) | (values >= n)][0])
    return RuntimeError(f"index {first} is out of bounds for dimension {d} with size {n}")


_index_add_general = Tensor.index_add_


def index_add_(input, dim, index, source, *, alpha=1):
    """index_add in place; where nothing needs recording, the sums go straight into input's memory
    (the backend's unbuffered scatter-add: repeated positions accumulate, one after the other in
    index order, as torch's CPU kernel adds them), without NumPy's floating-point warnings (inf -
    inf is nan, as in torch). c51.py's case, a CPU vector with int64 positions and a source of
    their length, is recognised by a few tests of the arrays, which pass only where every one of
    torch's argument checks would; other calls go through those checks."""
    vector = type(index) is Tensor is type(source)
    if vector:
        data, positions, values = input._data, index._data, source._data
        vector = positions.dtype is _INT64 and values.dtype is data.dtype \
            and data.ndim == values.ndim == positions.ndim == 1 and len(positions) == len(values) \
            and type(dim) is builtins.int and -1 <= dim <= 0 and alpha == 1 \
            and input._device is source._device is index._device is _CPU \
            and not (_grad_state.grad and (input._requires_grad or source._requires_grad)) and data.flags.writeable
    if vector:
        d, kernel = 0, _cpu_index_add
    elif input._data.ndim and isinstance(source, Tensor) and source._device is input._device \
            and not (_grad_state.grad and (input._requires_grad or source._requires_grad)):
        d, positions = _index_add_positions(input, dim, index, source)
        _check_writable(input)
        data, values, backend = input._data, source._data, input._device._backend
        kernel = functools.partial(index_add_into, backend, in_float32=_sums_in_float32(input, d, index, alpha))
    else:
        return _index_add_general(input, dim, index, source, alpha=alpha)
    quiet = silence_fp_warnings()
    try:
        kernel(data, d, positions, values if alpha == 1 else values * data.dtype.type(_scalar(alpha)))
    except IndexError:
        raise _index_out_of_range(input, d, positions) from None
    finally:
        restore_fp_warnings(quiet)
    input._vc[0] += 1
    return input


Tensor.index_add_ = index_add_


@tensor_method
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along ``dim``) repeated ``repeats`` times: an int, or a tensor with one
    count per slice. ``repeat_interleave(counts)`` alone gives each index i ``counts[i]`` times."""
    if repeats is None:
        if input.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        from rlpipe._creation import arange
        return repeat_interleave(arange(input.shape[0], device=input.device), input, 0, output_size=output_size)
    if dim is None:
        input, dim = flatten(input), 0
    d = input._dim(dim)
    n = input.shape[d] if input.ndim else 1
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if repeats.dtype not in (_dtypes.int64, _dtypes.int32):
            raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for '
                                      f"'{_LEGACY_TYPE_NAMES[repeats.dtype.name]}'")
        counts = repeats._host().reshape(-1).tolist()
        if builtins.any(c < 0 for c in counts):
            raise RuntimeError("repeats can not be negative")
        if len(counts) == 1:
            counts = counts[0]
        elif len(counts) != n:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{len(counts)} and input.size({d}) = {n}")
    else:
        counts = builtins.int(repeats)
        if counts < 0:
            raise RuntimeError("Repeats must be non-negative")
    total = counts * n if isinstance(counts, builtins.int) else builtins.sum(counts)
    if output_size is not None and output_size != total:
        raise RuntimeError("allocated size does not match required size")
    if input.ndim == 0:
        input = reshape(input, 1)
    xp = input._device._backend.xp
    return IndexSelect.apply(input, d, xp.repeat(xp.arange(n), counts))  # slice i, counts[i] times


@tensor_method
def unfold(self, dimension, size, step):
    """Every ``size``-long slice of ``dimension``, ``step`` apart, as a new last dim of ``size``
    (``dimension`` shrinks to the number of slices); a copy, not torch's view."""
    d = self._dim(dimension) if self.ndim else 0
    length = self.shape[d] if self.ndim else 1
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if self.ndim == 0:
        return reshape(self, (1,))
    return Unfold.apply(self, d, size, step)
