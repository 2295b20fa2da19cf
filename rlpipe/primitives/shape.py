"""Shape and layout: the Functions (reshape, permute, expand, repeat, flip, roll, cat, stack, split,
clone, pad, triangles) and the public ops, most of them views of their input (reshape, view,
squeeze, transpose, expand, split...; ``common._mark_view`` records it), the joins and splits,
and the Tensor properties ``T``/``mT``.
"""
import builtins
import operator
import warnings

import numpy as np

from .. import _dtypes, _memory_format as _mf
from .._dispatch import torch_function
from .._memory_format import copied_in
from .._tensor import Tensor, tensor_method, wrap
from ..autograd.grad_mode import state as _grad_state
from .base import Op, unbroadcast
from .common import _LEGACY_TYPE_NAMES, inplace_variant, _cast, _mark_view, _new_view, with_out


class Reshape(Op):
    """reshape/view/flatten/unflatten/squeeze/unsqueeze: a view whenever the layout allows."""

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None


class Permute(Op):
    """Reorders the dims (NumPy transpose); the gradient goes through the inverse permutation."""
    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return x.transpose(dims)

    @staticmethod
    def backward(ctx, g):
        inverse = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):
            inverse[d] = i
        return g.transpose(inverse), None


class Expand(Op):
    """Broadcasts x to a larger shape without copying; the gradient is summed back to x's shape."""
    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return ctx.xp.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shape), None


class Repeat(Op):
    """Tiles x ``repeats`` times along each dim (NumPy tile); the gradient sums the tiles."""
    @staticmethod
    def forward(ctx, x, repeats):
        shape = (1,) * (len(repeats) - x.ndim) + x.shape
        ctx.args = x.shape, shape, repeats
        return ctx.xp.tile(x.reshape(shape), repeats)

    @staticmethod
    def backward(ctx, g):
        in_shape, shape, repeats = ctx.args
        split = []
        for r, s in zip(repeats, shape):
            split += [r, s]
        g = g.reshape(split).sum(axis=tuple(range(0, len(split), 2)))
        return g.reshape(in_shape), None


class Flip(Op):
    """Reverses the order along ``dims`` into a copy; the gradient is flipped back."""
    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return ctx.xp.flip(x, dims).copy()  # torch's flip copies; NumPy's would be a view

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.flip(g, ctx.dims), None


class Roll(Op):
    """Shifts elements cyclically along ``dims``; the gradient is rolled back."""
    @staticmethod
    def forward(ctx, x, shifts, dims):
        ctx.args = shifts, dims
        return ctx.xp.roll(x, shifts, dims)

    @staticmethod
    def backward(ctx, g):
        shifts, dims = ctx.args
        back = tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts
        return ctx.xp.roll(g, back, dims), None, None


class Cat(Op):
    """Joins the inputs along an existing dim; the gradient is split back into their sizes."""
    @staticmethod
    def forward(ctx, *xs, dim):
        ctx.dim = dim
        ctx.sizes = [x.shape[dim] for x in xs]
        return ctx.xp.concatenate(xs, axis=dim)

    @staticmethod
    def backward(ctx, g):
        bounds, at = [], 0
        for n in ctx.sizes[:-1]:
            at += n
            bounds.append(at)
        return tuple(ctx.xp.split(g, bounds, axis=ctx.dim))


class Stack(Op):
    """Joins equal-shaped inputs along a new dim; each gets its slice of the gradient."""
    @staticmethod
    def forward(ctx, *xs, dim):
        ctx.dim = dim
        return ctx.xp.stack(xs, axis=dim)

    @staticmethod
    def backward(ctx, g):
        return tuple(ctx.xp.moveaxis(g, ctx.dim, 0))


class Split(Op):
    """Views of consecutive pieces along ``dim`` (split, chunk, unbind)."""

    @staticmethod
    def forward(ctx, x, sizes, dim, squeeze):
        ctx.args = dim, squeeze
        pieces, at = [], 0
        index = [slice(None)] * x.ndim
        for n in sizes:
            index[dim] = at if squeeze else slice(at, at + n)
            pieces.append(x[tuple(index)])
            at += n
        return tuple(pieces)

    @staticmethod
    def backward(ctx, *grads):
        dim, squeeze = ctx.args
        xp = ctx.xp
        return (xp.stack(grads, axis=dim) if squeeze else xp.concatenate(grads, axis=dim)), None, None, None


class Clone(Op):
    """A copy of x, laid out in ``order`` (slowest dim first; None: row-major); the gradient passes unchanged."""
    @staticmethod
    def forward(ctx, x, order=None):
        return copied_in(ctx.xp, x, order)

    @staticmethod
    def backward(ctx, g):
        return g, None


def _source_positions(xp, n, before, after, mode):
    """For each position along a padded axis, the input position it copies (reflect, replicate,
    circular); negative ``before``/``after`` crop."""
    pos = xp.arange(-before, n + after)
    if mode == "reflect":
        pos = xp.abs(pos)
        return xp.where(pos >= n, 2 * (n - 1) - pos, pos)
    if mode == "replicate":
        return xp.clip(pos, 0, n - 1)
    return pos % n  # circular


class Pad(Op):
    """Pads (or, with negative amounts, crops) the trailing dims. ``pads`` holds one (before, after)
    pair per dim from the first padded dim on. 'constant' fills with ``value``; the other modes copy
    input positions along each padded axis in turn, and backward adds the copies back."""
    node_name = "PadBackward0"

    @staticmethod
    def forward(ctx, x, pads, mode, value):
        xp = ctx.xp
        first = x.ndim - len(pads)
        ctx.args = x.shape, pads, mode
        if mode == "constant":
            shape = x.shape[:first] + tuple(n + lo + hi for n, (lo, hi) in zip(x.shape[first:], pads))
            out = xp.full(shape, value, dtype=x.dtype)
            src, dst = _constant_regions(x.shape[first:], pads)
            out[(Ellipsis,) + dst] = x[(Ellipsis,) + src]
            return out
        positions = []
        for d, (lo, hi) in enumerate(pads, start=first):
            pos = _source_positions(xp, x.shape[d], lo, hi, mode)
            positions.append(pos)
            x = xp.take(x, pos, axis=d)
        ctx.positions = positions
        return x

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        shape, pads, mode = ctx.args
        first = len(shape) - len(pads)
        if mode == "constant":
            gx = xp.zeros(shape, dtype=g.dtype)
            src, dst = _constant_regions(shape[first:], pads)
            gx[(Ellipsis,) + src] = g[(Ellipsis,) + dst]
            return gx, None, None, None
        for d in reversed(range(first, len(shape))):
            part = xp.zeros(g.shape[:d] + (shape[d],) + g.shape[d + 1:], dtype=g.dtype)
            ctx.be.scatter_add(part, (slice(None),) * d + (ctx.positions[d - first],), g)
            g = part
        return g, None, None, None


def _constant_regions(sizes, pads):
    """The slices of the input that survive constant padding and where they land in the output."""
    src, dst = [], []
    for n, (lo, hi) in zip(sizes, pads):
        src.append(slice(max(-lo, 0), n - max(-hi, 0)))
        dst.append(slice(max(lo, 0), max(lo, 0) + max(n - max(-lo, 0) - max(-hi, 0), 0)))
    return tuple(src), tuple(dst)


class Triangle(Op):
    """tril/triu: the lower (upper) triangle of the last two dims from ``diagonal`` on, zeros elsewhere."""

    @staticmethod
    def forward(ctx, x, diagonal, upper):
        ctx.args = diagonal, upper
        return (ctx.xp.triu if upper else ctx.xp.tril)(x, diagonal)

    @staticmethod
    def backward(ctx, g):
        diagonal, upper = ctx.args
        return (ctx.xp.triu if upper else ctx.xp.tril)(g, diagonal), None, None


# ---- the public ops -------------------------------------------------------------------------------

def _shape_arg(args):
    """The sizes given as ints or as one tuple, list or Size: each must be an integer (a Python or
    NumPy int, or an integer 0-d tensor), as torch asks: TypeError for a float or None."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    sizes = []
    for pos, a in enumerate(args):
        try:
            sizes.append(operator.index(a))
        except TypeError:
            raise TypeError(f"argument 'size' must be tuple of ints, but found element of type "
                            f"{type(a).__name__} at pos {pos}") from None
    return tuple(sizes)


def _infer_shape(shape, numel):
    if list(shape).count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _numpy_shape(shape):
    """view/reshape's shape arguments as NumPy takes them: the ints, or the one tuple, list or Size
    they came in. NumPy refuses what is not an int (TypeError) or not a valid shape (ValueError)
    but reads any negative size as -1: the fast paths check that the result is what was asked
    or that the one negative size was -1; else the slow paths convert the arguments and raise
    torch's errors."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0]) if type(shape[0]) is list else shape[0]  # a Size is a tuple
    return shape


def _same_array(a):
    """The view function of a reshape to the same shape."""
    return a


@torch_function("input")
@tensor_method
def reshape(input, *shape):
    """The same elements in a new shape (ints or one tuple; one -1 is inferred): a view when the layout allows, else a
    copy."""
    if not (input._requires_grad and _grad_state.grad):  # no graph: NumPy reshapes
        given = _numpy_shape(shape)
        try:
            out = input._data.reshape(given)
        except (ValueError, TypeError):
            pass
        else:
            new = out.shape
            if new == given or -1 in given:  # NumPy reads any negative size as -1, torch only -1
                if new == input._data.shape:
                    return _new_view(input, out, _same_array)
                return _mark_view(wrap(out, input._device), input, lambda a: a.reshape(new), may_copy=True)
    shape = _infer_shape(_shape_arg(shape), input.numel())
    if shape == input._data.shape:
        return _mark_view(Reshape.apply(input, shape), input, _same_array)
    return _mark_view(Reshape.apply(input, shape), input, lambda a: a.reshape(shape), may_copy=True)


@tensor_method
def view(input, *shape):
    """reshape that never copies: a RuntimeError where the layout would need a copy.
    ``view(dtype)`` reinterprets the bytes, as in torch."""
    if type(input) is not Tensor and not isinstance(input, Tensor):
        # the unbound Tensor.view(x, shape) on another type (a batched tensor under vmap): its own
        # view; a test here, not torch_function's wrapper, which would cost every view a call
        return input.view(*shape)
    if not (input._requires_grad and _grad_state.grad):  # no graph: a NumPy view
        out, given = input._data.view(), _numpy_shape(shape)
        try:
            out.shape = given  # raises instead of copying
        except (AttributeError, ValueError, TypeError):
            pass
        else:
            new = out.shape
            if new == given or -1 in given:  # as in reshape
                return _new_view(input, out, _same_array if new == input._data.shape else lambda a: a.reshape(new))
    if len(shape) == 1 and isinstance(shape[0], _dtypes.dtype):
        return _view_dtype(input, shape[0])
    shape = _infer_shape(_shape_arg(shape), input.numel())
    probe = input._data.view()
    try:
        probe.shape = shape
    except AttributeError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    return reshape(input, shape)


def _view_dtype(input, dtype):
    """``input.view(dtype)``: the same bytes read as ``dtype``."""
    return _mark_view(wrap(input._data.view(dtype.np), input._device), input, lambda a: a.view(dtype.np))


@tensor_method
def view_as(input, other):
    """``view(other.shape)``."""
    if type(input) is not Tensor and not isinstance(input, Tensor):  # (as in view)
        return input.view_as(other)
    return view(input, other.shape)


@tensor_method
def reshape_as(input, other):
    """``reshape(other.shape)``."""
    return reshape(input, other.shape)


@torch_function("input")
@tensor_method
def flatten(input, start_dim=0, end_dim=-1):
    """The dims ``start_dim`` to ``end_dim`` merged into one (a 0-d tensor gives 1 element); a view when possible."""
    if input.ndim == 0:
        return reshape(input, 1)
    s, e = input._dim(start_dim), input._dim(end_dim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input.shape
    n = 1
    for d in range(s, e + 1):
        n *= shape[d]
    return reshape(input, shape[:s] + (n,) + shape[e + 1:])


@torch_function("input")
@tensor_method
def unflatten(input, dim, sizes):
    """Dim ``dim`` split into ``sizes`` (one may be -1); a view when possible."""
    d = input._dim(dim)
    sizes = tuple(sizes)
    inner = _infer_shape(sizes, input.shape[d])
    return reshape(input, input.shape[:d] + inner + input.shape[d + 1:])


@torch_function("input")
@tensor_method
def squeeze(input, dim=None):
    """Removes size-1 dims: all of them, or those among ``dim`` (an int or a tuple); a view."""
    shape = input.shape
    if dim is None:
        dims = [d for d, s in enumerate(shape) if s == 1]
    else:
        dims = [input._dim(d) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
    return reshape(input, tuple(s for d, s in enumerate(shape) if not (d in dims and s == 1)))


@torch_function("input")
@tensor_method
def unsqueeze(input, dim):
    """A view with a new size-1 dim inserted at ``dim`` (negative counts from the end of the result)."""
    n = input.ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    d = dim % n
    shape = input._data.shape
    shape = shape[:d] + (1,) + shape[d:]
    if not (input._requires_grad and _grad_state.grad):  # a new unit dim is always a view
        return _new_view(input, input._data.reshape(shape), lambda a: a.reshape(shape))
    return reshape(input, shape)


@torch_function("input")
@tensor_method
def permute(input, *dims, **kwargs):
    """A view with the dims reordered as ``dims`` (ints or one sequence, or ``dims=``)."""
    if kwargs:  # torch.permute(input, dims=...)
        if dims or set(kwargs) != {"dims"}:
            raise TypeError(f"permute() takes the dims positionally or as dims=, got {dims} and {sorted(kwargs)}")
        dims = (kwargs["dims"],)
    dims = _shape_arg(dims)
    if len(dims) != input.ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {input.ndim} "
                           f"is not equal to len(dims) = {len(dims)}")
    dims = tuple(input._dim(d) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"permute(): duplicate dims are not allowed (got {dims})")
    return _mark_view(Permute.apply(input, dims), input, lambda a: a.transpose(dims))


@torch_function("input")
@tensor_method("transpose", "swapaxes", "swapdims")
def transpose(input, dim0, dim1):
    """A view with dims ``dim0`` and ``dim1`` swapped. ``swapaxes`` and ``swapdims`` are the same op."""
    if input.ndim == 0:
        input._dim(dim0), input._dim(dim1)
        return _mark_view(Reshape.apply(input, ()), input, lambda a: a)
    order = list(range(input.ndim))
    a, b = input._dim(dim0), input._dim(dim1)
    order[a], order[b] = order[b], order[a]
    return input.permute(order)


swapaxes = swapdims = transpose


@tensor_method
def t(input):
    """The transpose of a matrix (0-d and 1-d tensors come back unchanged, as views); RuntimeError above 2 dims."""
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else reshape(input, input.shape)


def _become_view(input, view):
    """Turns ``input`` itself into ``view`` of its old self (same memory, new shape), as torch's
    ``unsqueeze_``, ``squeeze_``, ``t_`` and ``transpose_`` do; the graph continues from the view."""
    if input._requires_grad and input.grad_fn is None and _grad_state.grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    input._data = view._data
    if view._requires_grad:
        input._requires_grad, input.grad_fn, input._output_nr = True, view.grad_fn, view._output_nr
    # a view keeps its root (the view's path already runs through input's); a base stays a base
    input._view_of = view._view_of if input._view_of is not None else None
    return input


def _shape_inplace(view_op, name, *aliases):
    """The in-place method ``name`` (and its aliases): ``input`` becomes ``view_op(input, ...)``."""
    def method(input, *args, **kwargs):
        return _become_view(input, view_op(input, *args, **kwargs))
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{view_op.__name__}`` in place: the tensor itself takes the new shape and returns itself."
    return tensor_method(name, *aliases)(method)


unsqueeze_ = _shape_inplace(unsqueeze, "unsqueeze_")
squeeze_ = _shape_inplace(squeeze, "squeeze_")
t_ = _shape_inplace(t, "t_")
transpose_ = swapaxes_ = swapdims_ = _shape_inplace(transpose, "transpose_", "swapaxes_", "swapdims_")


@torch_function("input")
@tensor_method("movedim", "moveaxis")
def movedim(input, source, destination):
    """A view with the dims at ``source`` moved to ``destination`` (ints or sequences), the others keeping their order.
    ``moveaxis`` is the same op."""
    src = [input._dim(d) for d in (source if isinstance(source, (tuple, list)) else (source,))]
    dst = [input._dim(d) for d in (destination if isinstance(destination, (tuple, list)) else (destination,))]
    order = [d for d in range(input.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return input.permute(order)


moveaxis = movedim


@torch_function("input")
@tensor_method("expand", "broadcast_to")
def expand(input, *sizes):
    """A view broadcast to ``sizes`` (-1 keeps a dim's size); only size-1 dims grow, new ones are added in front.
    ``broadcast_to`` is the same op."""
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError(f"expand({input.dtype!r}{{{list(input.shape)}}}, size={list(sizes)}): the number "
                           f"of sizes provided ({len(sizes)}) must be greater or equal to the number of dimensions "
                           f"in the tensor ({input.ndim})")
    own = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    shape = []
    for i, (want, have) in enumerate(zip(sizes, own)):
        if want == -1:
            if i < len(sizes) - input.ndim:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            want = have
        elif have != 1 and want != have:
            raise RuntimeError(f"The expanded size of the tensor ({want}) must match the existing size ({have}) "
                               f"at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                               f"Tensor sizes: {list(input.shape)}")
        shape.append(want)
    shape = tuple(shape)
    return _mark_view(Expand.apply(input, shape), input, lambda a: input._device._backend.xp.broadcast_to(a, shape))


@tensor_method
def expand_as(input, other):
    """``expand(other.shape)``."""
    return expand(input, other.shape)


broadcast_to = expand


@torch_function("tensors")
def broadcast_tensors(*tensors):
    """The tensors expanded (as views) to their common broadcast shape."""
    try:
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    except ValueError:
        raise RuntimeError(f"shape mismatch: objects cannot be broadcast to a single shape: "
                           f"{[list(t.shape) for t in tensors]}") from None
    return tuple(expand(t, shape) for t in tensors)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids of the 0-d or 1-d ``tensors``: the i-th output varies along dim i
    (``indexing="ij"``) or, with ``"xy"``, the first two dims swapped (x along columns). Views, as
    ``expand`` gives them. Without ``indexing``, "ij" with torch's warning."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor of "
                               f"shape {list(t.shape)}")
    swap = indexing == "xy" and len(tensors) > 1
    order = [1, 0, *range(2, len(tensors))] if swap else list(range(len(tensors)))
    ordered = [tensors[i] for i in order]
    shape = tuple(t.numel() for t in ordered)
    grids = [expand(reshape(t, tuple(n if d == i else 1 for d, n in enumerate(shape))), shape)
             for i, t in enumerate(ordered)]
    return tuple(grids[order.index(i)] for i in range(len(tensors)))


@tensor_method
def repeat(input, *sizes):
    """A copy tiled ``sizes[i]`` times along each dim (more sizes than dims add leading dims)."""
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    return Repeat.apply(input, sizes)


@torch_function("input")
@tensor_method
def flip(input, dims):
    """A copy with the order reversed along ``dims`` (torch's flip copies too)."""
    dims = tuple(input._dim(d) for d in (dims if isinstance(dims, (tuple, list)) else (dims,)))
    return Flip.apply(input, dims)


@torch_function("input")
@tensor_method
def roll(input, shifts, dims=None):
    """Elements shifted cyclically by ``shifts`` along ``dims`` (over the flattened tensor when ``dims`` is None)."""
    if dims is None:
        return reshape(Roll.apply(input.flatten(), shifts, 0), input.shape)
    if isinstance(dims, (tuple, list)):
        return Roll.apply(input, tuple(shifts), tuple(input._dim(d) for d in dims))
    return Roll.apply(input, shifts, input._dim(dims))


@torch_function("input")
@tensor_method
def fliplr(input):
    """Reverses dim 1 (the columns); input must have at least 2 dims."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip((1,))


@torch_function("input")
@tensor_method
def flipud(input):
    """Reverses dim 0 (the rows); input must have at least 1 dim."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip((0,))


@torch_function("input")
@tensor_method
def rot90(input, k=1, dims=(0, 1)):
    """Rotates by ``k`` quarter turns in the plane of ``dims``, from the first dim towards the second."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = input._dim(dims[0]), input._dim(dims[1])
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return input.flip((d1,)).transpose(d0, d1)
    if k == 2:
        return input.flip((d0, d1))
    if k == 3:
        return input.flip((d0,)).transpose(d0, d1)
    return input.clone()


@torch_function("input")
@tensor_method
def tile(input, *dims):
    """``repeat`` with ``dims`` padded with leading 1s up to input's number of dims."""
    dims = tuple(_shape_arg(dims))
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def _atleast(name, ndim, grow):
    """torch.atleast_Nd: each tensor viewed with at least ``ndim`` dims (``grow(shape)`` when it has
    fewer); one tensor in, one out; several (or a list) in, a tuple out."""
    def op(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            return tuple(op(t) for t in tensors[0])
        if len(tensors) != 1:
            return tuple(op(t) for t in tensors)
        return one(tensors[0])

    @torch_function("input", public=op)
    def one(input):
        return input if input.ndim >= ndim else reshape(input, grow(tuple(input.shape)))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"Each tensor with at least {ndim} dims (views, size-1 dims added as NumPy's {name} does); one "
                  "tensor in, one out, several (or a list) in, a tuple out.")
    return op


atleast_1d = _atleast("atleast_1d", 1, lambda shape: (1,))
atleast_2d = _atleast("atleast_2d", 2, lambda shape: (1,) * (2 - len(shape)) + shape)
atleast_3d = _atleast("atleast_3d", 3,
                      lambda shape: {0: (1, 1, 1), 1: (1,) + shape + (1,)}.get(len(shape), shape + (1,)))


@torch_function("input")
@tensor_method
def narrow(input, dim, start, length):
    """A view of ``length`` elements of dim ``dim`` from ``start`` (negative counts from the end)."""
    d = input._dim(dim)
    start = start + input.shape[d] if start < 0 else start
    if start < 0 or start + length > input.shape[d]:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({input.shape[d]}).")
    return input[(slice(None),) * d + (slice(start, start + length),)]


@torch_function("input")
@tensor_method
def select(input, dim, index):
    """A view at position ``index`` of dim ``dim``, which it removes."""
    d = input._dim(dim)
    return input[(slice(None),) * d + (index,)]


def _diagonal_of(xp, a, offset, dim1, dim2):
    """The writable view of ``a``'s diagonal ``offset`` in dims ``dim1``/``dim2``, moved to the end."""
    view = xp.diagonal(a, offset, dim1, dim2)
    if not getattr(view.flags, "writeable", True):  # NumPy hands out diagonals read-only; torch's are views
        view.flags.writeable = True
    return view


class Diagonal(Op):
    """The diagonal of two dims of ``x`` (offset above or below); its gradient is zeros with ``g`` on that diagonal."""
    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx.args = x.shape, offset, dim1, dim2
        return _diagonal_of(ctx.xp, x, offset, dim1, dim2)

    @staticmethod
    def backward(ctx, g):
        shape, offset, dim1, dim2 = ctx.args
        grad = ctx.xp.zeros(shape, dtype=g.dtype)
        _diagonal_of(ctx.xp, grad, offset, dim1, dim2)[...] = g
        return grad, None, None, None


@torch_function("input")
@tensor_method
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` (above the main one when positive) of the matrices in dims ``dim1`` and
    ``dim2``, as a view whose last dim runs along it."""
    d1, d2 = input._dim(dim1), input._dim(dim2)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    xp = input._device._backend.xp
    return _mark_view(Diagonal.apply(input, int(offset), d1, d2), input,
                      lambda a: _diagonal_of(xp, a, int(offset), d1, d2))


@tensor_method
def contiguous(input, *, memory_format=_mf.contiguous_format):
    """The tensor itself when it is contiguous in ``memory_format`` (row-major by default;
    ``channels_last``: NHWC in memory), else a copy laid out so."""
    if memory_format is _mf.contiguous_format and input._data.flags.c_contiguous:  # the common call, kept cheap
        return input
    fmt = _mf.check(memory_format, "contiguous")
    if input.is_contiguous(memory_format=fmt):
        return input
    if fmt is _mf.preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return Clone.apply(input, _mf.order_for(input.shape, input.stride(), fmt))


@torch_function("input")
@tensor_method
def clone(input, *, memory_format=_mf.preserve_format):
    """A copy of the data, connected to the graph (the gradient passes through), laid out in
    ``memory_format``; by default as the input is (its order of strides when it is packed, else
    the format its strides suggest)."""
    data = input._data
    if data.flags.c_contiguous and (memory_format is _mf.preserve_format or memory_format is _mf.contiguous_format):
        return Clone.apply(input)
    fmt = _mf.check(memory_format, "clone") or _mf.preserve_format
    return Clone.apply(input, _mf.order_for(data.shape, input.stride(), fmt))


def _join_inputs(tensors, name):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{name}(): expected a non-empty list of Tensors")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): expected a sequence of Tensors, got an element of type {type(t).__name__}")
    target = _dtypes.result_type([t.dtype for t in tensors])
    return [t if t.dtype is target else _cast(t, target) for t in tensors]


@with_out("tensors")
def cat(tensors, dim=0):
    """The tensors joined along the existing dim ``dim`` (promoted to a common dtype; empty 1-d tensors skipped, as in
    torch). ``concat`` and ``concatenate`` are the same op."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"cat(): argument 'tensors' must be a tuple or list of Tensors, got {type(tensors).__name__}")
    tensors = _join_inputs(tensors, "cat")
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]  # torch skips legacy empty 1-D inputs
    if not kept:
        return tensors[0].clone()
    d = kept[0]._dim(dim)
    first = kept[0].shape
    for i, t in enumerate(kept):
        if t.ndim != len(first) or builtins.any(a != b for k, (a, b) in enumerate(zip(t.shape, first)) if k != d):
            raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                               f"{list(first)} but got size {list(t.shape)} for tensor number {i} in the list.")
    return Cat.apply(*kept, dim=d)


concat = concatenate = cat


@with_out("tensors")
def stack(tensors, dim=0):
    """Equal-shaped tensors joined along a new dim ``dim``."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"stack(): argument 'tensors' must be a tuple or list of Tensors, got "
                        f"{type(tensors).__name__}")
    tensors = _join_inputs(tensors, "stack")
    first = tensors[0].shape
    for i, t in enumerate(tensors):
        if t.shape != first:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 "
                               f"and {list(t.shape)} at entry {i}")
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return Stack.apply(*tensors, dim=dim % n)


def hstack(tensors):
    """The tensors joined column-wise: along dim 1, or dim 0 for 1-d ones."""
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """The tensors joined row-wise along dim 0, 1-d ones taken as rows."""
    return cat([t.reshape(1, -1) if t.ndim == 1 else t for t in tensors], 0)


def _split_views(input, sizes, dim, squeeze):
    pieces = Split.apply(input, sizes, dim, squeeze)
    at = 0
    for piece, n in zip(pieces, sizes):
        index = (slice(None),) * dim + ((at, Ellipsis) if squeeze else (slice(at, at + n),))
        _mark_view(piece, input, lambda a, index=index: a[index])
        at += n
    return pieces


@torch_function("tensor")
@tensor_method
def split(tensor, split_size_or_sections, dim=0):
    """Views of consecutive pieces along ``dim``: of ``split_size_or_sections`` elements each (the last may be smaller),
    or of the listed sizes."""
    d = tensor._dim(dim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [builtins.int(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size "
                               f"at dimension {d}), but got split_sizes={sizes}")
    else:
        size = builtins.int(split_size_or_sections)
        if size <= 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
    return _split_views(tensor, sizes or [0], d, False)


@torch_function("input")
@tensor_method
def chunk(input, chunks, dim=0):
    """``chunks`` views of near-equal size along ``dim`` (fewer when the size does not allow them, as in torch)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input.shape[input._dim(dim)]
    return input.split(builtins.max(-(-n // chunks), 1), dim)


@tensor_method
def tensor_split(input, indices_or_sections, dim=0):
    """``k`` near-equal pieces along ``dim`` (an int or a 0-d int64 tensor), or the pieces between
    split indices (a sequence or a 1-d int64 tensor; negative ones count from the end, as in Python
    slicing, and a descending pair gives an empty piece)."""
    d = input._dim(dim)
    n = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = _split_points(indices_or_sections)
    if isinstance(indices_or_sections, builtins.int):
        k = indices_or_sections
        if k <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {k}")
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    else:
        bounds = [0] + [builtins.min(builtins.max(i + n if i < 0 else i, 0), n) for i in indices_or_sections] + [n]
        return tuple(input[(slice(None),) * d + (slice(a, builtins.max(a, b)),)] for a, b in zip(bounds, bounds[1:]))
    return _split_views(input, sizes, d, False)


def _split_points(t):
    """tensor_split's tensor argument as an int (0-d) or a list of ints (1-d); int64 only, as in torch."""
    if t.dim() > 1:
        raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                           f"one-dimensional tensor, but got a tensor with {t.dim()} dims")
    if t.dtype is not _dtypes.int64:
        raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                           f"{_LEGACY_TYPE_NAMES.get(t.dtype.name, t.dtype.name)}")
    return t.tolist()


@torch_function("input")
@tensor_method
def unbind(input, dim=0):
    """The views at each position of ``dim``, with that dim removed, as a tuple."""
    d = input._dim(dim)
    return _split_views(input, [1] * input.shape[d], d, True)


def _reverse_dims(self):
    """The tensor with all dims reversed (a transpose for a matrix); also ``H`` (no complex dtypes)."""
    dims = (1, 0) if self._data.ndim == 2 else tuple(range(self._data.ndim - 1, -1, -1))
    return _mark_view(Permute.apply(self, dims), self, lambda a: a.transpose(dims))


def _matrix_transpose(self):
    """The last two dims swapped, for a batch of matrices; also ``mH`` (no complex dtypes)."""
    if self._data.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self._data.ndim}-D tensor.")
    return self.transpose(-2, -1)


tensor_method("T", "H")(property(_reverse_dims))
tensor_method("mT", "mH")(property(_matrix_transpose))


def _triangle(input, diagonal, upper):
    if input.ndim < 2:
        raise RuntimeError(f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")
    return Triangle.apply(input, builtins.int(diagonal), upper)


@inplace_variant
@tensor_method
def tril(input, diagonal=0):
    """The lower triangle of the last two dims (on and below ``diagonal``), zeros above it."""
    return _triangle(input, diagonal, False)


@inplace_variant
@tensor_method
def triu(input, diagonal=0):
    """The upper triangle of the last two dims (on and above ``diagonal``), zeros below it."""
    return _triangle(input, diagonal, True)
