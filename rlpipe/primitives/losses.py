"""Losses that need a backward of their own: negative log-likelihood / cross-entropy and binary
cross-entropy.
"""
from .base import Op


class NllLoss(Op):
    """Negative log-likelihood of class indices with class weights, ``ignore_index``, label
    smoothing and a reduction, in one node. ``x`` [N, C, *] holds log-probabilities, or logits when
    ``from_logits`` (then the log-softmax over dim 1 is part of the op: cross-entropy)."""
    node_name = "NllLossBackward0"

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, smoothing, reduction, from_logits):
        xp = ctx.xp
        n_classes = x.shape[1]
        valid = target != ignore_index
        bad = valid & ((target < 0) | (target >= n_classes))
        if bool(bad.any()):
            raise IndexError(f"Target {int(target[bad].reshape(-1)[0])} is out of bounds.")
        t = xp.where(valid, target, 0)
        logp = x
        if from_logits:
            top = x.max(axis=1, keepdims=True)
            top = xp.where(xp.isfinite(top), top, 0)
            logp = x - (xp.log(xp.exp(x - top).sum(axis=1, keepdims=True)) + top)
        picked = xp.take_along_axis(logp, t[:, None], axis=1)[:, 0]
        wt = valid.astype(x.dtype) if weight is None else weight[t] * valid
        loss = -(picked * wt)
        if smoothing:
            spread = logp if weight is None else logp * weight.reshape((1, -1) + (1,) * (x.ndim - 2))
            loss = (1 - smoothing) * loss - (smoothing / n_classes) * spread.sum(axis=1) * valid
        if reduction == "none":
            scale = None
        elif reduction == "sum":
            loss, scale = loss.sum(), 1
        else:
            total = wt.sum()
            # every target ignored: 0/0, nan as in torch
            loss, scale = loss.sum() / total, 1 / total
        ctx.args = t, valid, wt, smoothing, scale, from_logits
        ctx.save_for_backward(logp, weight)
        return xp.asarray(loss, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        logp, weight = ctx.saved_tensors
        t, valid, wt, smoothing, scale, from_logits = ctx.args
        n_classes = logp.shape[1]
        per_sample = g if scale is None else g * scale  # d loss / d (each sample's term)
        # d loss / d logp: -(1 - s) w[t] at the target, -s/C w_c * valid everywhere
        coef = (per_sample * wt * (1 - smoothing)).astype(logp.dtype, copy=False)
        classes = xp.arange(n_classes).reshape((1, -1) + (1,) * (logp.ndim - 2))
        grad = (classes == t[:, None]) * -coef[:, None]
        if smoothing:
            spread = (per_sample * valid * (smoothing / n_classes)).astype(logp.dtype, copy=False)[:, None]
            grad -= spread if weight is None else spread * weight.reshape(classes.shape)
        if from_logits:  # through the log-softmax
            grad -= xp.exp(logp) * grad.sum(axis=1, keepdims=True)
        return grad, None, None, None, None, None, None


class BinaryCrossEntropy(Op):
    """-w (t log x + (1 - t) log(1 - x)) elementwise, each log clamped at -100 as torch does; the
    gradient is torch's w (x - t) / max(x (1 - x), 1e-12)."""
    node_name = "BinaryCrossEntropyBackward0"

    @staticmethod
    def forward(ctx, x, t):
        xp = ctx.xp
        log_x = xp.maximum(xp.log(x), -100)
        log_1mx = xp.maximum(xp.log(1 - x), -100)
        ctx.save_for_backward(x, t)
        return -(t * log_x + (1 - t) * log_1mx)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, t = ctx.saved_tensors
        gx = gt = None
        if ctx.needs_input_grad[0]:
            gx = g * (x - t) / xp.maximum(x * (1 - x), x.dtype.type(1e-12))
        if ctx.needs_input_grad[1]:
            gt = g * (xp.maximum(xp.log(1 - x), -100) - xp.maximum(xp.log(x), -100))
        return gx, gt
