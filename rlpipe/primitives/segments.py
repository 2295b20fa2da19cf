"""Reductions of values into targets with repeats (the segments of a scatter): ``ScatterReduce``
(sum, prod, mean, amax, amin, with or without the target's own value) and ``run_offsets``, which
numbers the elements of each run of equal sorted values.

Products, maxima and minima are reduced in rounds, each writing one contribution per target (the
k-th of every target in round k), so the same code runs on CuPy, whose ufuncs have no
``multiply.at``; sums and means use the backend's ``scatter_add``.
"""
import builtins

import numpy as np

from .base import Op, along_dim


__all__ = ["ScatterReduce", "run_offsets"]


def run_offsets(xp, starts):
    """For a bool array whose last axis marks where runs start (each row's first element included),
    every position's distance from the start of its run (with cumsum and indexing only: CuPy's
    ufuncs have no ``maximum.accumulate``)."""
    flat = starts.reshape(-1)
    first = xp.nonzero(flat)[0]
    run = xp.cumsum(flat) - 1
    return (xp.arange(flat.size) - first[run]).reshape(starts.shape)


def _flat_targets(xp, shape, where):
    """The flat position in an array of ``shape`` of every element an advanced index tuple picks."""
    strides = [builtins.int(np.prod(shape[k + 1:])) for k in range(len(shape))]
    flat = builtins.sum(a * s for a, s in zip(where, strides))
    return xp.broadcast_to(flat, xp.broadcast_arrays(*where)[0].shape).reshape(-1)


def _rounds(xp, targets):
    """For each contribution, its rank among those aimed at the same target, and the sort that groups them."""
    order = xp.argsort(targets, kind="stable")
    grouped = targets[order]
    starts = xp.concatenate([xp.ones(builtins.min(targets.size, 1), bool), grouped[1:] != grouped[:-1]])
    rank = xp.empty(targets.size, dtype=np.int64)
    rank[order] = run_offsets(xp, starts)
    return rank


def _reduce_into(xp, out, targets, values, ufunc):
    """out[targets] = ufunc(out[targets], values) for repeated targets too: NumPy's ``ufunc.at`` on the
    CPU, elsewhere one rank per round (as many rounds as the most repeated target has values)."""
    if not targets.size:
        return
    if xp is np:
        ufunc.at(out, targets, values)
        return
    rank = _rounds(xp, targets)
    for k in range(builtins.int(rank.max()) + 1):
        chosen = rank == k
        at = targets[chosen]
        out[at] = ufunc(out[at], values[chosen])


def _identity(dtype, reduce):
    """The value a target starts from when its own value is left out."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    return (info.min if reduce == "amax" else info.max) if info else reduce == "amin"


class ScatterReduce(Op):
    """x with the values of ``src`` reduced into the positions ``index`` picks along ``dim``; the
    gradients as torch's (ties in amax/amin share it evenly; prod handles zeros exactly)."""

    @staticmethod
    def forward(ctx, x, dim, index, src, reduce, include_self):
        xp, be = ctx.xp, ctx.be
        where = along_dim(xp, index, dim)
        used = src[tuple(slice(0, n) for n in index.shape)]
        targets = _flat_targets(xp, x.shape, where)
        values = used.reshape(-1)
        out = x.copy().reshape(-1)
        counts = xp.zeros(x.size, dtype=np.int64)
        be.scatter_add(counts, targets, xp.ones(targets.size, dtype=np.int64))
        hit = counts > 0
        if not include_self:
            out[hit] = _identity(x.dtype, reduce)
        if reduce in ("sum", "mean"):
            be.scatter_add(out, targets, values)
        else:
            _reduce_into(xp, out, targets, values, {"prod": xp.multiply, "amax": xp.maximum,
                                                   "amin": xp.minimum}[reduce])
        if reduce == "mean":
            n = (counts + include_self).clip(1, None)
            out = out / n if x.dtype.kind == "f" else out // n
            out = out.astype(x.dtype, copy=False)
        out = out.reshape(x.shape)
        ctx.save_for_backward(x, used, out)
        ctx.args = dim, src.shape, where, targets, counts.reshape(x.shape), reduce, include_self
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, used, out = ctx.saved_tensors
        dim, src_shape, where, targets, counts, reduce, include_self = ctx.args
        hit = counts > 0
        own = xp.logical_or(~hit, include_self)  # where x's own value took part
        if reduce == "sum":
            gx, gsrc = g * own, g[where]
        elif reduce == "mean":
            share = g / (counts + include_self).clip(1, None)
            gx, gsrc = xp.where(hit, share * include_self, g), share[where]
        elif reduce in ("amax", "amin"):
            gx, gsrc = _extreme_grads(ctx, x, used, out, g, own, targets)
        else:
            gx, gsrc = _prod_grads(ctx, x, used, out, g, own, targets)
        full = xp.zeros(src_shape, dtype=g.dtype)
        full[tuple(slice(0, n) for n in used.shape)] = gsrc
        return gx.astype(g.dtype, copy=False), None, None, full, None, None


def _extreme_grads(ctx, x, used, out, g, own, targets):
    """amax/amin: the gradient shared evenly by every value equal to the result. As torch's, input's
    own value counts among the ties even where ``include_self=False`` left it out (it then gets none)."""
    xp = ctx.xp
    self_tie = x == out
    src_tie = used == out.reshape(-1)[targets].reshape(used.shape)
    ties = self_tie.astype(g.dtype).reshape(-1)
    ctx.be.scatter_add(ties, targets, src_tie.astype(g.dtype).reshape(-1))
    share = g / ties.reshape(x.shape)
    return xp.where(self_tie & own, share, 0), xp.where(src_tie, share.reshape(-1)[targets].reshape(used.shape), 0)


def _prod_grads(ctx, x, used, out, g, own, targets):
    """prod: each contribution's gradient is g times the product of the others (exact with zeros)."""
    xp = ctx.xp
    zeros = ((x == 0) & own).astype(np.int64).reshape(-1)
    ctx.be.scatter_add(zeros, targets, (used == 0).astype(np.int64).reshape(-1))
    nonzero = xp.where(own & (x != 0), x, 1).reshape(-1)
    _reduce_into(xp, nonzero, targets, xp.where(used == 0, 1, used).reshape(-1), xp.multiply)

    def others(value, at):
        z, rest, result = zeros[at], nonzero[at], out.reshape(-1)[at]
        return xp.where(value == 0, xp.where(z == 1, rest, 0), xp.where(z == 0, result / xp.where(value == 0, 1,
                                                                                                   value), 0))
    everywhere = xp.arange(x.size)
    gx = xp.where(own, g * others(x.reshape(-1), everywhere).reshape(x.shape), 0)
    gsrc = g.reshape(-1)[targets].reshape(used.shape) * others(used.reshape(-1), targets).reshape(used.shape)
    return gx, gsrc
