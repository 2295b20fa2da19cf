"""Attention: the fused ``ScaledDotProductAttention`` (its public caller is
``nn.functional.scaled_dot_product_attention``)."""
from .base import Op, unbroadcast

__all__ = ["ScaledDotProductAttention"]


def _safe_softmax(xp, x, axis):
    """Softmax along ``axis`` with zeros, not nan, on rows whose entries are all -inf (``x`` is overwritten)."""
    row_max = xp.max(x, axis=axis, keepdims=True)
    fully_masked = row_max == -xp.inf
    x -= xp.where(fully_masked, 0, row_max)  # exp(-inf) = 0 on the masked rows
    e = xp.exp(x, out=x)
    e /= xp.where(fully_masked, 1, xp.sum(e, axis=axis, keepdims=True))
    return e


def _softmax_backward(y, g, axis):
    """The gradient of a softmax's input from its output ``y`` and output gradient ``g``."""
    return y * (g - (g * y).sum(axis=axis, keepdims=True))


def _input_grad(g, shape, dtype):
    """A gradient summed down to its input's ``shape`` (undoing broadcasting), in the inputs' ``dtype``."""
    return unbroadcast(g, shape).astype(dtype, copy=False)


class ScaledDotProductAttention(Op):
    """``dropout(safe_softmax(q @ k^T * scale + mask)) @ v`` over the last two dims in one node, batch dims
    broadcast. ``mask``: None, bool (True = attend) or float (added, and differentiated); ``causal`` also
    masks out the keys after each query's position; ``keep``: None or the dropout's scaled keep mask, shaped
    like the scores."""
    node_name = "ScaledDotProductAttentionBackward0"

    @staticmethod
    def forward(ctx, q, k, v, mask, keep, scale, causal):
        xp = ctx.xp
        q_scaled = q * scale
        scores = q_scaled @ xp.swapaxes(k, -1, -2)  # a new array: the steps below write into it
        if mask is not None and mask.dtype == bool:
            xp.copyto(scores, -xp.inf, where=~mask)
        elif mask is not None:
            scores += mask
        if causal:
            xp.copyto(scores, -xp.inf, where=~xp.tri(*scores.shape[-2:], dtype=bool))
        weights = _safe_softmax(xp, scores, -1) if scores.size else scores
        # (a row with every key masked out gets zeros, not nan, as torch's _safe_softmax gives)
        dropped = weights if keep is None else weights * keep
        ctx.save_for_backward(q_scaled, k, v, weights, dropped, keep)
        ctx.args = scale, None if mask is None else mask.shape, q.dtype
        # (NumPy multiplies bfloat16 matrices in float32: the result comes back in the inputs' dtype)
        return (dropped @ v).astype(q.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        q_scaled, k, v, weights, dropped, keep = ctx.saved_tensors
        scale, mask_shape, dtype = ctx.args
        need_q, need_k, need_v, need_mask = ctx.needs_input_grad[:4]
        gv = _input_grad(xp.swapaxes(dropped, -1, -2) @ g, v.shape, dtype) if need_v else None
        g_weights = g @ xp.swapaxes(v, -1, -2)
        if keep is not None:
            g_weights = g_weights * keep
        g_scores = _softmax_backward(weights, g_weights, -1)
        gq = _input_grad((g_scores @ k) * scale, q_scaled.shape, dtype) if need_q else None
        gk = _input_grad(xp.swapaxes(g_scores, -1, -2) @ q_scaled, k.shape, dtype) if need_k else None
        g_mask = _input_grad(g_scores, mask_shape, dtype) if need_mask else None
        return gq, gk, gv, g_mask, None, None, None
