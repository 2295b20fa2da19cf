"""Reductions (sum, mean, prod, extremes, var/std, logsumexp, norm, all/any), cumulative sums,
products and extremes, and quantiles: the Functions and the public ops.
"""
import builtins
import math

import numpy as np

from .. import _dtypes
from .._dispatch import torch_function
from .._dtypes import FLOATING_NP
from .._tensor import Tensor, tensor_method, wrap
from ..return_types import max as max_return, min as min_return, cummax as cummax_return, cummin as cummin_return
from .base import Op, along_dim, expand_reduced, sign_of
from .common import _INT64, _LEGACY_TYPE_NAMES, _cast, _float_input, _write_out, with_out
from .comparison import isnan, ne
from .elementwise import maximum, minimum, where
from .indexing import Gather
from .shape import cat, narrow, reshape, squeeze, stack
from .sorting import _zeros_like_int, sort


_HALF_NP = (_dtypes.float16.np, _dtypes.bfloat16.np)


def _half_accumulated(xp, reduce, x, dims, keepdim, dtype):
    """``reduce`` (xp.sum or xp.mean) accumulating 16-bit floats in float32, as torch does: a bfloat16 sum
    of 1000 ones stalls at 256 otherwise."""
    if dtype is None and x.dtype in _HALF_NP:
        return reduce(x, axis=dims, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
    return reduce(x, axis=dims, keepdims=keepdim, dtype=dtype)


class Sum(Op):
    """The sum over ``dims``; the gradient is g broadcast back to x's shape."""
    @staticmethod
    def forward(ctx, x, dims, keepdim, dtype):
        ctx.args = x.shape, dims, keepdim
        ctx.in_dtype = x.dtype
        return _half_accumulated(ctx.xp, ctx.xp.sum, x, dims, keepdim, dtype)

    @staticmethod
    def backward(ctx, g):
        shape, dims, keepdim = ctx.args
        g = ctx.xp.broadcast_to(expand_reduced(g, shape, dims, keepdim), shape)
        return g.astype(ctx.in_dtype, copy=False), None, None, None


class Mean(Op):
    """The mean over ``dims``; the gradient is g / count, broadcast back to x's shape."""
    @staticmethod
    def forward(ctx, x, dims, keepdim, dtype):
        ctx.args = x.shape, dims, keepdim
        out = _half_accumulated(ctx.xp, ctx.xp.mean, x, dims, keepdim, dtype)
        ctx.count = x.size // builtins.max(out.size, 1) if x.size else 0
        return out

    @staticmethod
    def backward(ctx, g):
        shape, dims, keepdim = ctx.args
        g = expand_reduced(g, shape, dims, keepdim) / builtins.max(ctx.count, 1)
        return ctx.xp.broadcast_to(g, shape), None, None, None


def _exclusive_cumprod(xp, x, axis, reverse=False):
    """Products of the elements strictly before (or after) each position along ``axis``."""
    if reverse:
        x = xp.flip(x, axis)
    ones = xp.ones_like(xp.take(x, [0], axis=axis))
    out = xp.cumprod(xp.concatenate([ones, xp.take(x, range(x.shape[axis] - 1), axis=axis)], axis=axis), axis=axis)
    return xp.flip(out, axis) if reverse else out


class Prod(Op):
    """The gradient is the product of all other elements, computed without dividing, so zeros are exact."""

    @staticmethod
    def forward(ctx, x, dim, keepdim, dtype):
        ctx.save_for_backward(x)
        ctx.args = dim, keepdim
        return ctx.xp.prod(x, axis=dim, keepdims=keepdim, dtype=dtype)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, = ctx.saved_tensors
        dim, keepdim = ctx.args
        flat = dim is None
        axis = 0 if flat else dim
        xs = x.reshape(-1) if flat else x
        if xs.shape[axis] == 0:
            return xp.zeros_like(x), None, None, None
        others = _exclusive_cumprod(xp, xs, axis) * _exclusive_cumprod(xp, xs, axis, reverse=True)
        g = expand_reduced(g, x.shape, None if flat else (dim,), keepdim).astype(x.dtype, copy=False)
        return (g.reshape(()) * others).reshape(x.shape) if flat else g * others, None, None, None


class Amax(Op):
    """amax/amin; tied extremes share the gradient evenly, as torch does."""
    pick = "max"

    @classmethod
    def forward(cls, ctx, x, dims, keepdim):
        out = getattr(ctx.xp, cls.pick)(x, axis=dims, keepdims=keepdim)
        ctx.save_for_backward(x, out)
        ctx.args = dims, keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx.args
        hit = x == expand_reduced(out, x.shape, dims, keepdim)
        count = hit.sum(axis=dims, keepdims=True).astype(g.dtype)
        return hit * (expand_reduced(g, x.shape, dims, keepdim) / count), None, None


class Amin(Amax):
    """The smallest values over ``dims``; tied minima share the gradient evenly, as torch does."""
    pick = "min"


class ExtremeAlongDim(Op):
    """max(dim)/min(dim): (values, indices); the gradient goes to the chosen index only."""

    @staticmethod
    def forward(ctx, x, dim, keepdim, largest):
        xp = ctx.xp
        idx = (xp.argmax if largest else xp.argmin)(x, axis=dim, keepdims=True)
        values = xp.take_along_axis(x, idx, axis=dim)
        ctx.args = x.shape, dim, keepdim, idx
        ctx.node_name = "MaxBackward0" if largest else "MinBackward0"
        if not keepdim:
            values, idx = values.squeeze(dim), idx.squeeze(dim)
        ctx.mark_non_differentiable(idx)
        return values, idx

    @staticmethod
    def backward(ctx, g, _):
        shape, dim, keepdim, idx = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        out[along_dim(ctx.xp, idx, dim)] = g if keepdim else ctx.xp.expand_dims(g, dim)
        return out, None, None, None


class Var(Op):
    """sum((x - mean)**2) / (n - correction) over ``dims``; gradient 2 g (x - mean) / (n - correction)."""
    @staticmethod
    def forward(ctx, x, dims, correction, keepdim):
        xp = ctx.xp
        center = xp.mean(x, axis=dims, keepdims=True)
        diff = x - center
        denom = builtins.max(_count(x.shape, dims) - correction, 0)
        ctx.save_for_backward(diff)
        ctx.center = center  # x is diff + center, for the double backward
        ctx.args = dims, keepdim, denom
        scale = 1.0 / denom if denom else float("inf")  # 0/0 gives nan and s/0 inf, as in torch
        return xp.sum(diff * diff, axis=dims, keepdims=keepdim) * x.dtype.type(scale)

    @staticmethod
    def backward(ctx, g):
        diff, = ctx.saved_tensors
        dims, keepdim, denom = ctx.args
        scale = 2.0 / denom if denom else float("inf")
        return expand_reduced(g, diff.shape, dims, keepdim) * (diff * diff.dtype.type(scale)), None, None, None


class Std(Var):
    """sqrt(var); where the spread is zero the gradient is 0, as torch masks it."""

    @staticmethod
    def forward(ctx, x, dims, correction, keepdim):
        out = ctx.xp.sqrt(Var.forward(ctx, x, dims, correction, keepdim))
        ctx.std = out
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        std = ctx.std
        scaled = xp.where(std == 0, 0, g / (2 * std)).astype(g.dtype, copy=False)
        return Var.backward(ctx, scaled)


def _count(shape, dims):
    n = 1
    for d in (range(len(shape)) if dims is None else dims):
        n *= shape[d]
    return n


class LogSumExp(Op):
    """log(sum(exp(x))) over ``dims``, shifted by the max to avoid overflow; gradient g * softmax(x)."""
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        xp = ctx.xp
        if x.size == 0:  # the log of an empty sum
            ctx.save_for_backward(x, x)
            ctx.args = dims, keepdim
            return xp.full(xp.sum(x, axis=dims, keepdims=keepdim).shape, -xp.inf, dtype=x.dtype)
        top = xp.max(x, axis=dims, keepdims=True)
        top = xp.where(xp.isfinite(top), top, 0)
        out = xp.log(xp.sum(xp.exp(x - top), axis=dims, keepdims=True)) + top
        ctx.save_for_backward(x, out)
        ctx.args = dims, keepdim
        return out if keepdim else out.reshape([s for d, s in enumerate(out.shape) if d not in dims])

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx.args
        return expand_reduced(g, x.shape, dims, keepdim) * ctx.xp.exp(x - out), None, None


class Norm(Op):
    """The vector p-norm for a finite p. The gradient is 0 where the norm or an element is 0
    (p < 1), as in torch, instead of the nan that the plain formula gives."""

    @staticmethod
    def forward(ctx, x, p, dims, keepdim):
        xp = ctx.xp
        ctx.save_for_backward(x)
        ctx.args = p, dims, keepdim
        if p == 0:
            out = xp.sum(x != 0, axis=dims, keepdims=keepdim).astype(x.dtype)
        elif p == 2:
            out = xp.sqrt(xp.sum(x * x, axis=dims, keepdims=keepdim))
        else:
            out = xp.power(xp.sum(xp.power(xp.abs(x), p), axis=dims, keepdims=keepdim), 1.0 / p).astype(x.dtype)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, = ctx.saved_tensors
        p, dims, keepdim = ctx.args
        if p == 0:
            return xp.zeros_like(x), None, None, None
        norm = expand_reduced(ctx.out, x.shape, dims, keepdim)
        g = expand_reduced(g, x.shape, dims, keepdim)
        scaled = x if p == 2 else sign_of(xp, x) * xp.where(x == 0, 0, xp.power(xp.abs(x), p - 1))
        out = xp.where(norm == 0, 0, scaled * g / xp.power(norm, p - 1))
        return out.astype(x.dtype, copy=False), None, None, None


class CumSum(Op):
    """Running sums along ``dim``; the gradient is the reversed running sum of g."""
    @staticmethod
    def forward(ctx, x, dim, dtype):
        ctx.dim = dim
        ctx.in_dtype = x.dtype
        return ctx.xp.cumsum(x, axis=dim, dtype=dtype)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        reversed_cumsum = xp.flip(xp.cumsum(xp.flip(g, ctx.dim), axis=ctx.dim), ctx.dim)
        return reversed_cumsum.astype(ctx.in_dtype, copy=False), None, None


class CumProd(Op):
    """Running products along ``dim``; the gradient handles zeros without dividing by them."""
    @staticmethod
    def forward(ctx, x, dim, dtype):
        out = ctx.xp.cumprod(x, axis=dim, dtype=dtype)
        ctx.save_for_backward(x, out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, out = ctx.saved_tensors
        d = ctx.dim
        rev_cumsum = lambda a: xp.flip(xp.cumsum(xp.flip(a, d), axis=d), d)
        g = g.astype(x.dtype, copy=False)
        out = out.astype(x.dtype, copy=False)
        if not bool((x == 0).any()):
            return rev_cumsum(g * out) / x, None, None
        # with zeros: grad[i] = sum_{j>=i} g[j] * prod_{k<=j, k!=i} x[k], one position at a time
        n = x.shape[d]
        grad = xp.zeros_like(x)
        for i in range(n):
            xi = xp.take(x, [i], axis=d)
            ones = xp.ones_like(xi)
            without_i = xp.concatenate([xp.take(x, range(i), axis=d), ones, xp.take(x, range(i + 1, n), axis=d)],
                                       axis=d)
            partial = xp.cumprod(without_i, axis=d)
            tail = xp.take(g * partial, range(i, n), axis=d).sum(axis=d, keepdims=True)
            index = [slice(None)] * x.ndim
            index[d] = slice(i, i + 1)
            grad[tuple(index)] = tail
        return grad, None, None


# ---- the public ops -------------------------------------------------------------------------------

def _reduce_dims(x, dim):
    """Normalized reduction dims: None for all, else a sorted tuple (duplicates rejected)."""
    if dim is None or x._data.ndim == 0:
        if dim is not None:
            dims = [x._dim(d) for d in (dim if isinstance(dim, (list, tuple)) else (dim,))]
            if len(set(dims)) < len(dims):
                raise RuntimeError(f"dim {dims[0]} appears multiple times in the list of dims")
        return None
    if isinstance(dim, (list, tuple)):
        if not dim:
            return None
        dims = [x._dim(d) for d in dim]
        for d in dims:
            if dims.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        return tuple(sorted(dims))
    return (x._dim(dim),)


def _accumulator(x, dtype):
    """The NumPy dtype a sum or product accumulates in: int64 for integers and bools, float32 for
    half types (their result is cast back), as torch does."""
    if dtype is not None:
        return _dtypes.as_dtype(dtype).np
    if x._data.dtype in FLOATING_NP:
        return np.dtype(np.float32) if x._data.dtype.itemsize < 4 else None
    return np.dtype(np.int64)


def _back_to_half(result, input, dtype):
    return _cast(result, input.dtype) if dtype is None and input._data.dtype.itemsize < 4 and \
        input.is_floating_point() else result


@with_out("input", in_out_dtype=True)
@tensor_method
def sum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum over ``dim`` (all elements when None); integers and bools sum in int64, half types in float32 and come
    back in their dtype, unless ``dtype`` is given."""
    return _back_to_half(Sum.apply(input, _reduce_dims(input, dim), keepdim, _accumulator(input, dtype)),
                         input, dtype)


@tensor_method
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """``sum`` with NaNs counted as 0."""
    if not input.is_floating_point():
        return sum(input, dim, keepdim, dtype=dtype)
    return sum(where(isnan(input), 0.0, input), dim, keepdim, dtype=dtype)


@tensor_method
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """``mean`` over the elements that are not NaN (NaN where all are NaN); float input only."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.is_floating_point():
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_LEGACY_TYPE_NAMES[input.dtype.name]}")
    present = sum(ne(input, input).logical_not(), dim, keepdim, dtype=input.dtype)
    return nansum(input, dim, keepdim) / present


@with_out("input")
@tensor_method
def mean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean over ``dim`` (all elements when None); RuntimeError for integer input unless a float ``dtype`` is
    given."""
    if dtype is None and not input.is_floating_point():
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point "
                           f"or complex dtype. Got: {input.dtype.name.capitalize()}")
    if dtype is not None:
        input = _cast(input, _dtypes.as_dtype(dtype))
    return Mean.apply(input, _reduce_dims(input, dim), keepdim, None)


@torch_function("input")
@tensor_method
def prod(input, dim=None, keepdim=False, *, dtype=None):
    """The product over ``dim`` (one int, or all elements when None); integers multiply in int64."""
    if dim is not None:
        dim = input._dim(dim)  # checked even for 0-d tensors, which have nothing to reduce
        if not input.ndim:
            dim = None
    return Prod.apply(input, dim, keepdim, _accumulator(input, dtype))


def _extreme(input, dim, keepdim, other, largest):
    if isinstance(dim, Tensor):  # max(a, b) is maximum(a, b)
        other, dim = dim, None
    if other is not None:
        return maximum(input, other) if largest else minimum(input, other)
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError(f"{'max' if largest else 'min'}(): Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
        return (Amax if largest else Amin).apply(input, None, False)
    d = input._dim(dim)
    if input.ndim == 0:
        return (max_return if largest else min_return)(input.clone(), _zeros_like_int(input))
    values, indices = ExtremeAlongDim.apply(input, d, keepdim, largest)
    return (max_return if largest else min_return)(values, indices)


@tensor_method
def max(input, dim=None, keepdim=False, *, other=None, out=None):
    """max(x): the largest value; max(x, dim): (values, indices); max(x, y): maximum(x, y)."""
    if out is not None:  # (a hand-off, not with_out's wrapper, which would cost every call)
        return _write_out(out, max, (input, dim, keepdim), {"other": other})
    return _extreme(input, dim, keepdim, other, True)


@tensor_method
def min(input, dim=None, keepdim=False, *, other=None, out=None):
    """min(x): the smallest value; min(x, dim): (values, indices); min(x, y): minimum(x, y)."""
    if out is not None:
        return _write_out(out, min, (input, dim, keepdim), {"other": other})
    return _extreme(input, dim, keepdim, other, False)


@tensor_method
def amax(input, dim=(), keepdim=False):
    """The largest values over ``dim`` (an int or a tuple; all elements by default); tied maxima share the gradient."""
    return _extreme_values(Amax, input, dim, keepdim, "amax")


@tensor_method
def amin(input, dim=(), keepdim=False):
    """The smallest values over ``dim`` (an int or a tuple; all elements by default); tied minima share the gradient."""
    return _extreme_values(Amin, input, dim, keepdim, "amin")


def _extreme_values(function, input, dim, keepdim, name):
    dims = _reduce_dims(input, dim)
    if dims is None and input.numel() == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    return function.apply(input, dims, keepdim)


def _arg_extreme(input, dim, keepdim, name):
    data = input._data
    if data.dtype == np.bool_:
        raise RuntimeError(f"{name}(): does not support bool input")
    if dim is None:
        out = getattr(data.reshape(-1), name)()
        if keepdim:
            out = out.reshape((1,) * data.ndim)
    else:
        ndim = data.ndim
        axis = dim if type(dim) is builtins.int and -ndim <= dim < ndim else input._dim(dim) if ndim else None
        out = getattr(data, name)(axis=axis, keepdims=keepdim)
    backend = input._device._backend
    if type(out) is not backend.ndarray:  # a 0-d result comes back as a NumPy scalar
        out = backend.xp.asarray(out)
    if out.dtype != _INT64:  # (intp is int32 on some platforms)
        out = out.astype(np.int64)
    return wrap(out, input._device)


@tensor_method
def argmax(input, dim=None, keepdim=False):
    """The int64 index of the largest value along ``dim`` (in the flattened tensor when None)."""
    return _arg_extreme(input, dim, keepdim, "argmax")


@tensor_method
def argmin(input, dim=None, keepdim=False):
    """The int64 index of the smallest value along ``dim`` (in the flattened tensor when None)."""
    return _arg_extreme(input, dim, keepdim, "argmin")


@torch_function("input")
@tensor_method
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The variance over ``dim``, divided by ``n - correction`` (1 by default; ``unbiased=False`` means 0); float input
    only."""
    return _spread(Var, input, dim, unbiased, keepdim, correction)


def _spread(function, input, dim, unbiased, keepdim, correction):
    if unbiased is not None and correction is not None:
        raise RuntimeError("var(): cannot give both 'unbiased' and 'correction'")
    if isinstance(dim, builtins.bool):  # var(x, False): the legacy 'unbiased' positional
        unbiased, dim = dim, None
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if not input.is_floating_point():
        raise RuntimeError(f"std and var only support floating point and complex dtypes, got {input.dtype}")
    return function.apply(input, _reduce_dims(input, dim), correction, keepdim)


@torch_function("input")
@tensor_method
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation over ``dim`` (``sqrt(var)``, same arguments); its gradient is 0 where the spread is 0."""
    return _spread(Std, input, dim, unbiased, keepdim, correction)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` over ``dim``, with ``var``'s arguments."""
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std, mean)`` over ``dim``, with ``std``'s arguments."""
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


@tensor_method
def logsumexp(input, dim, keepdim=False):
    """``log(sum(exp(input)))`` over ``dim``, computed without overflow; integers give the default float dtype."""
    dims = _reduce_dims(input, dim)
    return LogSumExp.apply(_float_input(input), tuple(range(input.ndim)) if dims is None else dims, keepdim)


@tensor_method
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """The vector p-norm over ``dim`` (all elements by default); 'fro' is the 2-norm."""
    if not input.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_LEGACY_TYPE_NAMES[input.dtype.name]}")
    x = input if dtype is None else _cast(input, _dtypes.as_dtype(dtype))
    dims = _reduce_dims(x, dim)
    if p == "fro":
        p = 2
    if p in (float("inf"), "inf"):
        return amax(abs(x), dims or (), keepdim)
    if p in (float("-inf"), "-inf"):
        return amin(abs(x), dims or (), keepdim)
    if isinstance(p, str):
        raise RuntimeError(f"norm(): unsupported p={p!r}; expected a number, 'fro', inf or -inf")
    return Norm.apply(x, builtins.float(p), dims, keepdim)


@tensor_method
def all(input, dim=None, keepdim=False):
    """True where every element over ``dim`` (all elements when None) is nonzero: a bool tensor (uint8 for uint8 input,
    as in torch)."""
    return _logical_reduce(input, dim, keepdim, "all")


@tensor_method
def any(input, dim=None, keepdim=False):
    """True where some element over ``dim`` (all elements when None) is nonzero: a bool tensor (uint8 for uint8
    input)."""
    return _logical_reduce(input, dim, keepdim, "any")


@torch_function("input")
def _is_all_true(input):
    """bool(input.all()) (torch._is_all_true): under vmap, over every sample of the batch."""
    return builtins.bool(all(input))


def _logical_reduce(input, dim, keepdim, name):
    xp = input._device._backend.xp
    out = xp.asarray(getattr(xp, name)(input._data, axis=_reduce_dims(input, dim), keepdims=keepdim))
    return wrap(out.astype(np.uint8) if input._data.dtype == np.uint8 else out, input._device)


@tensor_method
def count_nonzero(input, dim=None):
    """The number of nonzero elements over ``dim`` (all when None), as int64."""
    return sum(ne(input, 0), dim)


@tensor_method
def cumsum(input, dim, *, dtype=None):
    """Running sums along ``dim`` (integers accumulate in int64 unless ``dtype`` is given)."""
    return _cumulative(CumSum, input, dim, dtype)


@tensor_method
def cumprod(input, dim, *, dtype=None):
    """Running products along ``dim`` (integers accumulate in int64 unless ``dtype`` is given)."""
    return _cumulative(CumProd, input, dim, dtype)


def _cumulative(function, input, dim, dtype):
    d = input._dim(dim)
    if not input.ndim:
        input = reshape(input, 1)
        return reshape(_back_to_half(function.apply(input, 0, _accumulator(input, dtype)), input, dtype), ())
    return _back_to_half(function.apply(input, d, _accumulator(input, dtype)), input, dtype)


def _running_extreme(input, dim, largest):
    """(values, indices) of the running max (or min) along ``dim``; on ties the later index wins, as
    in torch. The indices come from one pass over the dim; the values gather the input through them
    (so gradients reach the elements that were picked)."""
    d = input._dim(dim)
    x = input if input.ndim else reshape(input, 1)
    xp = x._device._backend.xp
    data = xp.moveaxis(x._data, d if input.ndim else 0, 0)
    best, index = data[0].copy(), xp.zeros(data.shape[1:], dtype=np.int64)
    indices = xp.empty(data.shape, dtype=np.int64)
    indices[0] = index
    for i in range(1, data.shape[0]):
        better = ((data[i] >= best) if largest else (data[i] <= best)) | (data[i] != data[i])  # NaN wins
        index = xp.where(better, i, index)
        best = xp.where(better, data[i], best)
        indices[i] = index
    indices = wrap(xp.ascontiguousarray(xp.moveaxis(indices, 0, d if input.ndim else 0)), x._device)
    values = Gather.apply(x, d if input.ndim else 0, indices._data)
    if not input.ndim:
        return reshape(values, ()), reshape(indices, ())
    return values, indices


@tensor_method
def cummax(input, dim):
    """``(values, indices)`` of the running maximum along ``dim``; on ties the later index wins, as in torch."""
    return cummax_return(*_running_extreme(input, dim, True))


@tensor_method
def cummin(input, dim):
    """``(values, indices)`` of the running minimum along ``dim``; on ties the later index wins, as in torch."""
    return cummin_return(*_running_extreme(input, dim, False))


_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


@tensor_method
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles along ``dim`` (all elements when None), interpolated between the two
    nearest sorted values as torch.quantile does; a 1-D ``q`` adds a leading dim of its size."""
    if not input.is_floating_point():
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if interpolation not in _QUANTILE_MODES:
        raise ValueError(f"quantile() interpolation must be one of {', '.join(_QUANTILE_MODES)}. "
                         f"Got {interpolation}")
    qs = q.detach().cpu().numpy().astype(np.float64) if isinstance(q, Tensor) else np.asarray(q, np.float64)
    if qs.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    bad = [v for v in qs.reshape(-1).tolist() if not 0 <= v <= 1]
    if bad:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {bad[0]}")
    x, d = (reshape(input, -1), 0) if dim is None else (input, input._dim(dim))
    if x.ndim == 0:
        x, d = reshape(x, 1), 0
    n = x.shape[d]
    if n == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    ordered = sort(x, d).values
    nan = any(isnan(x), d, keepdim=True)
    picked = []
    for value in qs.reshape(-1):
        pos = value * (n - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        if interpolation == "nearest":
            lo = hi = builtins.int(np.round(pos))
        frac = {"lower": 0.0, "higher": 1.0, "midpoint": 0.5}.get(interpolation, pos - lo)
        low, high = narrow(ordered, d, lo, 1), narrow(ordered, d, hi, 1)
        picked.append(where(nan, math.nan, low if lo == hi else low + (high - low) * frac))
    out = stack(picked, 0) if qs.ndim else picked[0]
    axis = d + 1 if qs.ndim else d
    if dim is None:
        return reshape(out, (len(picked),) + (1,) * input.ndim) if keepdim and qs.ndim else \
            reshape(out, (1,) * input.ndim) if keepdim else reshape(out, (-1,) if qs.ndim else ())
    return out if keepdim else squeeze(out, axis)


@tensor_method
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (``x[i+1] - x[i]``, applied ``n`` times), after
    ``prepend`` and ``append`` are joined on; booleans give ``x[i+1] != x[i]``."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = input._dim(dim)
    parts = [t for t in (prepend, input, append) if t is not None]
    out = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        length = builtins.max(out.shape[d] - 1, 0)
        later, earlier = narrow(out, d, builtins.min(1, out.shape[d]), length), narrow(out, d, 0, length)
        out = ne(later, earlier) if out.dtype == _dtypes.bool else later - earlier
    return out
