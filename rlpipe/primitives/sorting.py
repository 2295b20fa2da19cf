"""Ordering along a dimension: sort, argsort and topk (the k first of a sort)."""
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
