"""Reductions (sum, mean, prod, extremes, var/std, logsumexp, norm) and cumulative sums and products.
"""
from .base import Op, along_dim, expand_reduced, sign_of


class Sum(Op):
    @staticmethod
    def forward(ctx, x, dims, keepdim, dtype):
        ctx.args = x.shape, dims, keepdim
        ctx.in_dtype = x.dtype
        return ctx.xp.sum(x, axis=dims, keepdims=keepdim, dtype=dtype)

    @staticmethod
    def backward(ctx, g):
        shape, dims, keepdim = ctx.args
        g = ctx.xp.broadcast_to(expand_reduced(g, shape, dims, keepdim), shape)
        return g.astype(ctx.in_dtype, copy=False), None, None, None


class Mean(Op):
    @staticmethod
    def forward(ctx, x, dims, keepdim, dtype):
        ctx.args = x.shape, dims, keepdim
        out = ctx.xp.mean(x, axis=dims, keepdims=keepdim, dtype=dtype)
        ctx.count = x.size // max(out.size, 1) if x.size else 0
        return out

    @staticmethod
    def backward(ctx, g):
        shape, dims, keepdim = ctx.args
        g = expand_reduced(g, shape, dims, keepdim) / max(ctx.count, 1)
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
    @staticmethod
    def forward(ctx, x, dims, correction, keepdim):
        xp = ctx.xp
        diff = x - xp.mean(x, axis=dims, keepdims=True)
        denom = max(_count(x.shape, dims) - correction, 0)
        ctx.save_for_backward(diff)
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
