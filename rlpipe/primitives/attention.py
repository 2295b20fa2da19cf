"""Attention's softmax: the Function-only ``SafeSoftmax`` (its public caller is
``nn.functional.scaled_dot_product_attention``)."""
from .base import Op

__all__ = ["SafeSoftmax"]


class SafeSoftmax(Op):
    """Softmax along ``dim`` where a row whose entries are all ``-inf`` (every key masked out) gives
    zeros instead of nan, as torch's ``_safe_softmax`` in attention; gradient y * (g - sum(g * y)),
    which is zero on those rows."""
    node_name = "SafeSoftmaxBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        xp = ctx.xp
        ctx.dim = dim
        if x.size == 0:
            ctx.save_for_backward(x)
            return x.copy()
        row_max = xp.max(x, axis=dim, keepdims=True)
        fully_masked = row_max == -xp.inf
        e = xp.exp(x - xp.where(fully_masked, 0, row_max))  # exp(-inf) = 0 on the masked rows
        total = xp.sum(e, axis=dim, keepdims=True)
        out = e / xp.where(fully_masked, 1, total)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return y * (g - (g * y).sum(axis=ctx.dim, keepdims=True)), None
