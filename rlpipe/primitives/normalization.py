"""Normalization: layer norm and batch norm (in training) as one node.
"""
from .base import Op


class Normalize(Op):
    """(x - mean) / sqrt(var + eps) * weight + bias with the statistics taken over ``axes``: layer
    norm (the trailing dims) and batch norm in training (every dim but the channels) in one node.
    ``param_shape`` is the shape weight and bias take to broadcast against x. Returns the output and
    the batch mean and biased variance (not differentiable; batch norm's running stats use them)."""
    node_name = "NativeLayerNormBackward0"

    @staticmethod
    def forward(ctx, x, w, b, axes, param_shape, eps):
        xp = ctx.xp
        mean = x.mean(axis=axes, keepdims=True)
        diff = x - mean
        var = (diff * diff).mean(axis=axes, keepdims=True)
        rstd = 1 / xp.sqrt(var + x.dtype.type(eps))
        xhat = diff * rstd
        out = xhat
        if w is not None:
            out = out * w.reshape(param_shape)
        if b is not None:
            out = out + b.reshape(param_shape)
        elif w is None:
            out = out.copy()
        vector = w if w is not None else b
        ctx.args = axes, param_shape, None if vector is None else vector.shape
        if x.ndim > 1 and 0 in axes and 1 not in axes:
            ctx.node_name = "NativeBatchNormBackward0"
        ctx.save_for_backward(xhat, rstd, w)
        ctx.stats = mean, eps  # x is xhat / rstd + mean, for the double backward
        mean, var = mean.reshape(-1), var.reshape(-1)
        ctx.mark_non_differentiable(mean, var)
        return out, mean, var

    @staticmethod
    def backward(ctx, g, *_):
        xhat, rstd, w = ctx.saved_tensors
        axes, param_shape, vector_shape = ctx.args
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        lead = g.ndim - len(param_shape)  # weight and bias gradients: sums over the dims they broadcast over
        others = tuple(d for d in range(g.ndim) if d < lead or param_shape[d - lead] == 1)
        gx = gw = gb = None
        if need_w:
            gw = (g * xhat).sum(axis=others).reshape(vector_shape)
        if need_b:
            gb = g.sum(axis=others).reshape(vector_shape)
        if need_x:
            gxhat = g if w is None else g * w.reshape(param_shape)
            gx = rstd * (gxhat - gxhat.mean(axis=axes, keepdims=True)
                         - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True))
        return gx, gw, gb, None, None, None
