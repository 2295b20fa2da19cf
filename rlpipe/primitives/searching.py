"""Searching, counting and order statistics: searchsorted, bucketize, bincount, histc (counts, not
differentiable), median/nanmedian, kthvalue, mode (values with their indices; the values gather the
input, so gradients reach the chosen elements), aminmax, unique_consecutive and argwhere.

Ties: median and kthvalue pick the k-th element of a stable sort, mode the smallest most frequent
value at its last occurrence, as torch's CPU kernels do.
"""
import builtins
import math

import numpy as np

from .. import _dtypes, return_types
from .._dispatch import torch_function
from .._tensor import Tensor, tensor_method, wrap
from .base import Op
from .common import _LEGACY_TYPE_NAMES, with_out
from .indexing import Gather, nonzero
from .segments import run_offsets
from .reductions import amax, amin
from .elementwise import where
from .shape import reshape, squeeze, stack
from .sorting import sort


__all__ = ["MedianAll", "searchsorted", "bucketize", "bincount", "histc", "median", "nanmedian", "kthvalue",
           "mode", "aminmax", "unique_consecutive", "argwhere", "isin", "nanquantile", "histogram"]


class MedianAll(Op):
    """The lower median of all elements (NaN if any is NaN, unless ``ignore_nan``); the gradient is
    shared evenly by the elements equal to it, as torch's."""

    @staticmethod
    def forward(ctx, x, ignore_nan):
        xp = ctx.xp
        flat = xp.sort(x.reshape(-1))
        valid = builtins.int((~xp.isnan(flat)).sum()) if x.dtype.kind == "f" else flat.size
        if flat.size == 0 or valid == 0:
            out = xp.asarray(math.nan if x.dtype.kind == "f" else 0, dtype=x.dtype)
        elif valid < flat.size and not ignore_nan:
            out = flat[valid]
        else:
            out = flat[(valid - 1) // 2]
        ctx.save_for_backward(x, out)
        return xp.asarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, out = ctx.saved_tensors
        hit = (x == out) | (xp.isnan(x) & xp.isnan(out))
        return hit * (g / hit.sum()).astype(g.dtype), None


# ---- searching and counting ------------------------------------------------------------------------

def _side(side, right):
    if side is not None and side not in ("left", "right"):
        raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
    if side == "left" and right:
        raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left while "
                           "right was True")
    return "right" if right or side == "right" else "left"


def _positions(xp, boundaries, values, side):
    """For each value, how many boundaries (of its row) lie below it (``side="right"``: at or below)."""
    if boundaries.ndim == 1:
        return xp.searchsorted(boundaries, values, side=side)
    below = xp.expand_dims(boundaries, -2) < xp.expand_dims(values, -1) if side == "left" else \
        xp.expand_dims(boundaries, -2) <= xp.expand_dims(values, -1)
    return below.sum(-1)


@with_out("sorted_sequence", "input")
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """The indices at which the values of ``input`` (a tensor or a number) would be inserted into the
    innermost dimension of ``sorted_sequence`` to keep it sorted (``right``/``side="right"``: after
    equal values); ``sorter`` sorts an unsorted sequence. int64, or int32 with ``out_int32``."""
    side = _side(side, right)
    seq = sorted_sequence._data
    xp = sorted_sequence._device._backend.xp
    scalar = not isinstance(input, Tensor)
    values = xp.asarray(input) if scalar else input._data
    if seq.ndim > 1 and (scalar or seq.shape[:-1] != values.shape[:-1]):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
                           "of boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(seq.shape)} and input value tensor {list(values.shape)}")
    if sorter is not None:
        if sorter.shape != sorted_sequence.shape:
            raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size, but got boundary "
                               f"tensor {list(sorted_sequence.shape)}and got sorter tensor {list(sorter.shape)}")
        seq = xp.take_along_axis(seq, sorter._data, -1)
    out = _positions(xp, seq, values, side)
    return wrap(xp.asarray(out).astype(np.int32 if out_int32 else np.int64), sorted_sequence._device)


@with_out("input", "boundaries")
def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The index of the bucket of each value of ``input`` among the 1-d sorted ``boundaries``:
    ``boundaries[i-1] < x <= boundaries[i]`` (``right``: ``boundaries[i-1] <= x < boundaries[i]``)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


@tensor_method
def bincount(input, weights=None, minlength=0):
    """How often each value 0, 1, ... occurs in the 1-d non-negative integer ``input`` (at least
    ``minlength`` bins); with ``weights``, their sums per value instead (float weights keep their
    dtype, others give float64)."""
    if input.is_floating_point():
        raise NotImplementedError(f'"bincount_cpu" not implemented for \'{_LEGACY_TYPE_NAMES[input.dtype.name]}\'')
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    data = input._data
    if input.ndim != 1 or data.size and builtins.int(data.min()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    xp = input._device._backend.xp
    if weights is None:
        counts = xp.bincount(data, minlength=minlength).astype(np.int64)
    else:
        if weights.shape != input.shape:
            raise RuntimeError("weights should be 1-d and have the same length as input")
        dtype = weights._data.dtype if weights.is_floating_point() else np.dtype(np.float64)
        counts = xp.bincount(data, weights._data, minlength=minlength).astype(dtype)
    return wrap(counts, input._device)


def _uniform_bins(xp, data, lo, hi, bins):
    """Each value's bin among ``bins`` equal-width bins over [lo, hi] (the last one closed), and the
    mask of the values inside: the position in the range, corrected against the edges (as torch)."""
    edges = xp.linspace(lo, hi, bins + 1).astype(data.dtype)
    inside = (data >= lo) & (data <= hi)
    values = data[inside]
    pos = xp.clip(((values - lo) / (hi - lo) * bins).astype(np.int64), 0, bins - 1)
    pos = pos - (values < edges[pos]) + ((values >= edges[xp.minimum(pos + 1, bins)]) & (pos + 1 < bins))
    return pos, inside, edges


def _check_histogram_input(input, bins, name):
    if not input.is_floating_point():
        raise NotImplementedError(f'"{name}" not implemented for \'{_LEGACY_TYPE_NAMES[input.dtype.name]}\'')
    if isinstance(bins, (builtins.int, np.integer)) and bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")


@with_out("input")
@tensor_method
def histc(input, bins=100, min=0, max=0):
    """A histogram of ``input``'s values in ``bins`` equal-width bins over [min, max] (the data's own
    range when both are 0; widened by 1 each side when it is one point); values outside are left out.
    Float tensors only; not differentiable."""
    _check_histogram_input(input, bins, "histogram_cpu")
    xp = input._device._backend.xp
    data = input._data.reshape(-1)
    lo, hi = builtins.float(min), builtins.float(max)
    if lo == hi and data.size:
        lo, hi = builtins.float(data.min()), builtins.float(data.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        shown = lambda v: "-nan" if math.isnan(v) else f"{v:g}"
        raise RuntimeError(f"torch.histc: range of [{shown(lo)}, {shown(hi)}] is not finite")
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    pos, _, _ = _uniform_bins(xp, data, lo, hi, bins)
    return wrap(xp.bincount(pos, minlength=bins).astype(data.dtype), input._device)


@tensor_method
def histogram(input, bins, *, range=None, weight=None, density=False):
    """``(hist, bin_edges)``: the counts (or summed ``weight``s) of ``input``'s values in ``bins``
    equal-width bins over ``range`` (the data's own range by default, widened by 0.5 each side when
    it is one point), or between the given edges (a 1-d tensor); ``density`` divides by the total
    times each bin's width. Float tensors only; not differentiable."""
    _check_histogram_input(input, bins, "histogramdd")
    xp = input._device._backend.xp
    data = input._data.reshape(-1)
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should have the same shape as the "
                           f"input tensor excluding its innermost dimension, but got input with shape "
                           f"{list(input.shape) + [1]} and weight with shape {list(weight.shape)}")
    weights = None if weight is None else weight._data.reshape(-1)
    if isinstance(bins, Tensor):
        edges = bins._data.astype(data.dtype)
        n = edges.size - 1
        inside = (data >= edges[0]) & (data <= edges[-1])
        pos = xp.minimum(xp.searchsorted(edges, data[inside], side="right") - 1, n - 1)
    else:
        lo, hi = (builtins.float(v) for v in range) if range is not None else \
            (builtins.float(data.min()), builtins.float(data.max())) if data.size else (0.0, 0.0)
        if lo > hi:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo:g} max {hi:g} for "
                               "dimension 0")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        n = builtins.int(bins)
        pos, inside, edges = _uniform_bins(xp, data, lo, hi, n)
    counts = xp.bincount(pos, None if weights is None else weights[inside], minlength=n).astype(data.dtype)
    if density:
        counts = counts / (counts.sum() * xp.diff(edges))
    return return_types.histogram(wrap(counts.astype(data.dtype, copy=False), input._device),
                                  wrap(xp.asarray(edges), input._device))


# ---- order statistics -----------------------------------------------------------------------------

def _select(input, dim, keepdim, pick, name):
    """(values, indices) of the element at sorted position ``pick(sorted, valid, n)`` along ``dim``:
    the positions come from a stable sort, the values gather the input (so they carry its gradient)."""
    d = input._dim(dim)
    if input.ndim == 0:
        return input.clone(), wrap(input._device._backend.xp.zeros((), dtype=np.int64), input._device)
    n = input.shape[d]
    if n == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    xp = input._device._backend.xp
    data = input._data
    order = xp.argsort(data, axis=d, kind="stable")
    valid = (~xp.isnan(data)).sum(axis=d, keepdims=True) if data.dtype.kind == "f" else xp.full(
        data.shape[:d] + (1,) + data.shape[d + 1:], n)
    index = xp.take_along_axis(order, pick(valid, n).astype(order.dtype), d).astype(np.int64)
    values = Gather.apply(input, d, index)
    indices = wrap(index, input._device)
    if not keepdim:
        values, indices = squeeze(values, d), squeeze(indices, d)
    return values, indices


def _lower_median(valid, n):
    """The median's sorted position: the lower middle, or the first NaN where there is one."""
    return valid * (valid < n) + (n - 1) // 2 * (valid == n)


def _nan_lower_median(valid, n):
    """The NaN-free median's sorted position: the lower middle of the valid values (0 where all are NaN)."""
    return (valid - 1).clip(0, None) // 2


def _check_not_bool(input, name):
    if input.dtype is _dtypes.bool:
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'Bool\'')


@tensor_method
def median(input, dim=None, keepdim=False):
    """The lower median of all elements (NaN if any is NaN); with ``dim``, ``(values, indices)`` of
    the lower median along it."""
    _check_not_bool(input, "median")
    if dim is None:
        return MedianAll.apply(input, False)
    return return_types.median(*_select(input, dim, keepdim, _lower_median, "median"))


@tensor_method
def nanmedian(input, dim=None, keepdim=False):
    """``median`` ignoring NaN values (NaN only where all are NaN)."""
    _check_not_bool(input, "nanmedian")
    if dim is None:
        return MedianAll.apply(input, True)
    return return_types.nanmedian(*_select(input, dim, keepdim, _nan_lower_median, "nanmedian"))


@tensor_method
def kthvalue(input, k, dim=-1, keepdim=False):
    """``(values, indices)`` of the ``k``-th smallest element (1-based) along ``dim``."""
    d = input._dim(dim)
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return return_types.kthvalue(*_select(input, d, keepdim, lambda valid, n: valid * 0 + (k - 1), "kthvalue"))


@tensor_method
def mode(input, dim=-1, keepdim=False):
    """``(values, indices)`` of the most frequent value along ``dim`` (the smallest among equally
    frequent ones) and the index of its last occurrence."""
    d = input._dim(dim)
    if input.ndim == 0:
        return return_types.mode(input.clone(), wrap(input._device._backend.xp.zeros((), np.int64), input._device))
    xp = input._device._backend.xp
    data = xp.moveaxis(input._data, d, -1)
    order = xp.argsort(data, axis=-1, kind="stable")
    ordered = xp.take_along_axis(data, order, -1)
    starts = xp.concatenate([xp.ones(data.shape[:-1] + (1,), bool), ordered[..., 1:] != ordered[..., :-1]], -1)
    best = xp.argmax(run_offsets(xp, starts), axis=-1)[..., None]  # the end of the first longest run
    index = xp.moveaxis(xp.take_along_axis(order, best, -1), -1, d).astype(np.int64)
    values = Gather.apply(input, d, index)
    indices = wrap(index, input._device)
    if not keepdim:
        values, indices = squeeze(values, d), squeeze(indices, d)
    return return_types.mode(values, indices)


@tensor_method
def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)`` of all elements, or along ``dim``; ties share the gradient as ``amin``/``amax``."""
    n = input.numel() if dim is None else input.shape[input._dim(dim)] if input.ndim else 1
    if n == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    if dim is None:
        low, high = amin(input), amax(input)
        if keepdim:
            low, high = reshape(low, (1,) * input.ndim), reshape(high, (1,) * input.ndim)
        return return_types.aminmax(low, high)
    return return_types.aminmax(amin(input, dim, keepdim), amax(input, dim, keepdim))


@tensor_method
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """The input with each run of equal consecutive elements (slices along ``dim``) kept once; with
    ``return_inverse`` each element's run, with ``return_counts`` each run's length. Not differentiable."""
    xp = input._device._backend.xp
    d = None if dim is None else input._dim(dim)
    data = xp.moveaxis(input._data, d, 0) if d is not None else input._data.reshape(-1)
    n = data.shape[0]
    differs = (data[1:] != data[:-1]).reshape(builtins.max(n - 1, 0), -1).any(axis=1)
    starts = xp.concatenate([xp.ones(builtins.min(n, 1), bool), differs])
    kept = data[starts]
    out = [wrap(kept if d is None else xp.ascontiguousarray(xp.moveaxis(kept, 0, d)), input._device)]
    if return_inverse:
        inverse = xp.cumsum(starts).astype(np.int64) - 1
        out.append(wrap(inverse.reshape(tuple(input.shape) if d is None else (n,)), input._device))
    if return_counts:
        first = xp.nonzero(starts)[0]
        out.append(wrap(xp.diff(xp.concatenate([first, xp.asarray([n])])).astype(np.int64), input._device))
    return out[0] if len(out) == 1 else tuple(out)


@torch_function("input")
@tensor_method
def argwhere(input):
    """The indices of the nonzero elements, one row each (``nonzero(input)``; a 0-d input gives 1 or 0
    rows of no columns)."""
    if input.ndim == 0:
        found = builtins.int(builtins.bool(input._data != 0))
        return wrap(input._device._backend.xp.zeros((found, 0), dtype=np.int64), input._device)
    return nonzero(input)


@with_out("elements", "test_elements")
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """True where an element of ``elements`` occurs in ``test_elements`` (either may be a number;
    ``invert`` negates), as a bool tensor of elements' shape."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got ({type(elements).__name__}, "
                        f"{type(test_elements).__name__}), but expected at least one Tensor")
    like = elements if isinstance(elements, Tensor) else test_elements
    xp = like._device._backend.xp
    values = [x._data if isinstance(x, Tensor) else xp.asarray(x) for x in (elements, test_elements)]
    return wrap(xp.isin(values[0], values[1], invert=invert), like._device)


_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_levels(q, name):
    """The quantile levels ``q`` (a number or a 0-/1-d tensor) as a NumPy array, after torch's checks."""
    levels = q.detach().cpu().numpy().astype(np.float64) if isinstance(q, Tensor) else np.asarray(q, np.float64)
    if levels.ndim > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    bad = [v for v in levels.reshape(-1).tolist() if not 0 <= v <= 1]
    if bad:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {bad[0]}")
    return levels


@tensor_method
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` ignoring NaN values: each slice's quantiles among its non-NaN values (NaN where
    all are NaN); a 1-d ``q`` adds a leading dim of its size."""
    if not input.is_floating_point():
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if interpolation not in _QUANTILE_MODES:
        raise ValueError(f"quantile() interpolation must be one of {', '.join(_QUANTILE_MODES)}. Got {interpolation}")
    if isinstance(q, Tensor) and q.dtype is not input.dtype:
        raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
    levels = _quantile_levels(q, "quantile")
    x, d = (reshape(input, (-1,)), 0) if dim is None or input.ndim == 0 else (input, input._dim(dim))
    if x.shape[d] == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    xp = x._device._backend.xp
    ordered = sort(x, d)
    valid = (~xp.isnan(x._data)).sum(axis=d, keepdims=True)
    picked = [_quantile_of_valid(ordered.values, d, valid, level, interpolation, xp) for level in levels.reshape(-1)]
    out = stack(picked, 0) if levels.ndim else picked[0]
    axis = d + 1 if levels.ndim else d
    if dim is None:
        shape = (1,) * input.ndim if keepdim else ()
        return reshape(out, ((len(picked),) if levels.ndim else ()) + shape)
    return out if keepdim else squeeze(out, axis)


def _quantile_of_valid(ordered, d, valid, level, interpolation, xp):
    """One quantile level of each slice of the sorted (NaN last) values, among the first ``valid`` of them."""
    position = level * (xp.maximum(valid, 1) - 1)
    low, high = xp.floor(position), xp.ceil(position)
    if interpolation == "nearest":
        low = high = xp.round(position)  # half to even, as torch
    fraction = {"lower": 0.0, "higher": 1.0, "midpoint": 0.5}.get(interpolation, position - low)
    below = Gather.apply(ordered, d, low.astype(np.int64))
    above = Gather.apply(ordered, d, high.astype(np.int64))
    value = below + (above - below) * wrap(xp.asarray(fraction, dtype=ordered._data.dtype), ordered._device)
    return where(wrap(valid == 0, ordered._device), math.nan, value)
