"""Ordering along a dimension: the ``Sort`` Function (sort, argsort and topk, the k first of a
sort) and the public ops.
"""
import builtins

import numpy as np

from .._tensor import tensor_method, wrap
from ..return_types import sort as sort_return, topk as topk_return
from .base import Op, along_dim


class Sort(Op):
    """(values, indices) of x sorted along ``dim``, stable; the first ``k`` of them when k is given.

    Descending order reverses a stable ascending sort of the flipped input, so equal values keep
    their original order and NaN (last in ascending order) comes first, as in torch."""

    @staticmethod
    def forward(ctx, x, dim, descending, k):
        xp = ctx.xp
        if descending:
            n = x.shape[dim]
            idx = (n - 1) - xp.flip(xp.argsort(xp.flip(x, dim), axis=dim, kind="stable"), dim)
        else:
            idx = xp.argsort(x, axis=dim, kind="stable")
        if k is not None:
            idx = idx[(slice(None),) * dim + (slice(0, k),)]
        idx = idx.astype("int64", copy=False)
        ctx.args = x.shape, dim, idx
        ctx.mark_non_differentiable(idx)
        return xp.take_along_axis(x, idx, axis=dim), idx

    @staticmethod
    def backward(ctx, g, _):
        shape, dim, idx = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        out[along_dim(ctx.xp, idx, dim)] = g
        return out, None, None, None


# ---- the public ops -------------------------------------------------------------------------------

def _zeros_like_int(t):
    return wrap(t._device._backend.xp.zeros(t._data.shape, dtype=np.int64), t._device)


def _sorted(input, dim, descending, k=None):
    d = input._dim(dim)
    if input.ndim == 0:
        return input.clone(), _zeros_like_int(input)
    return Sort.apply(input, d, descending, k)


@tensor_method
def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along ``dim``. Always stable: equal values keep their order."""
    return sort_return(*_sorted(input, dim, descending))


@tensor_method
def argsort(input, dim=-1, descending=False, stable=False):
    """The int64 indices that sort ``input`` along ``dim`` (``sort``'s second result; always stable)."""
    return _sorted(input, dim, descending)[1]


@tensor_method
def msort(input):
    """The values sorted along dim 0, ascending."""
    return _sorted(input, 0, False)[0]


@tensor_method
def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (smallest) values along ``dim`` and their indices; always in sorted order,
    ties in index order."""
    d = input._dim(dim)
    if not 0 <= k <= (input.shape[d] if input.ndim else 1):
        raise RuntimeError("selected index k out of range")
    if input.ndim == 0:
        return topk_return(*_sorted(input, d, largest))
    return topk_return(*Sort.apply(input, d, largest, builtins.int(k)))
