"""Differentiable ops behind ``rlpipe.nn.functional`` that need a backward of their own.

Like ``_functions.py``, each op is a small ``Function`` over backend arrays: ``forward`` and
``backward`` use ``ctx.xp`` (NumPy or CuPy) and ``ctx.be`` (the backend's kernels), so one piece
of code serves both devices. Argument checking (torch's errors) is done by the callers in
``rlpipe/nn/functional.py``; here the arguments are already normalized.

Convolution and pooling slide windows over a padded input with one strided view
(``as_strided``), never a Python loop over batch or spatial positions; the only loops run over
the kh * kw kernel positions, where each position's update is one strided slice of the input.
"""
import math

from ._functions import Op, _sigmoid, _softplus
from ._tensor import wrap


# ---- windows over [N, C, H, W] arrays ---------------------------------------------------------

def _window_slices(i, j, stride, dilation, out_size):
    """The strided slice of a padded [..., H, W] array that kernel position (i, j) visits for every
    output position: ``padded[slices]`` has shape [..., OH, OW]."""
    (sh, sw), (dh, dw), (oh, ow) = stride, dilation, out_size
    return (Ellipsis, slice(i * dh, i * dh + sh * (oh - 1) + 1, sh), slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))


def _padded(xp, x, pads, value=0):
    """x [N, C, H, W] with (top, bottom, left, right) rows and columns of ``value`` around it."""
    top, bottom, left, right = pads
    if not (top or bottom or left or right):
        return x
    n, c, h, w = x.shape
    out = xp.full((n, c, h + top + bottom, w + left + right), value, dtype=x.dtype)
    out[:, :, top:top + h, left:left + w] = x
    return out


def _unpadded(g, pads, shape):
    top, _, left, _ = pads
    return g[:, :, top:top + shape[2], left:left + shape[3]]


def _windows(xp, a, kernel, stride, dilation, out_size, order):
    """A read-only strided view of the windows of ``a`` [N, C, Hp, Wp]: axes named by ``order``, a
    permutation of 'NCHWij' (H, W: output position; i, j: kernel position)."""
    sn, sc, s_h, s_w = a.strides
    sizes = dict(N=a.shape[0], C=a.shape[1], H=out_size[0], W=out_size[1], i=kernel[0], j=kernel[1])
    steps = dict(N=sn, C=sc, H=s_h * stride[0], W=s_w * stride[1], i=s_h * dilation[0], j=s_w * dilation[1])
    return xp.lib.stride_tricks.as_strided(a, tuple(sizes[k] for k in order), tuple(steps[k] for k in order))


class Conv2d(Op):
    """2-D cross-correlation by im2col: the windows are gathered into one column matrix per group
    and multiplied with the weight in a single matmul; backward scatters the column gradients back
    with one strided add per kernel position (col2im)."""
    node_name = "ConvolutionBackward0"

    @staticmethod
    def forward(ctx, x, w, b, stride, pads, dilation, groups, out_size):
        xp = ctx.xp
        n = x.shape[0]
        o, cg, kh, kw = w.shape
        oh, ow = out_size
        xpad = _padded(xp, x, pads)
        # columns [G, Cg*kh*kw, N*OH*OW]: one reshape copies the strided windows once
        cols = _windows(xp, xpad, (kh, kw), stride, dilation, out_size, "CijNHW").reshape(
            groups, cg * kh * kw, n * oh * ow)
        w2 = w.reshape(groups, o // groups, cg * kh * kw)
        out = (w2 @ cols).reshape(o, n, oh, ow).transpose(1, 0, 2, 3)
        out = xp.ascontiguousarray(out)
        if b is not None:
            out += b.reshape(1, o, 1, 1)
        ctx.args = x.shape, xpad.shape, stride, pads, dilation, groups, out_size
        ctx.save_for_backward(cols if ctx.needs_input_grad[1:2] == (True,) else None, w)
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        cols, w = ctx.saved_tensors
        x_shape, pad_shape, stride, pads, dilation, groups, out_size = ctx.args
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        n, c = x_shape[:2]
        o, cg, kh, kw = w.shape
        oh, ow = out_size
        # g [N, O, OH, OW] -> [G, Og, N*OH*OW], the layout of the forward's product
        g2 = xp.ascontiguousarray(g.reshape(n, groups, o // groups, oh * ow).transpose(1, 2, 0, 3)).reshape(
            groups, o // groups, n * oh * ow)
        gx = gw = gb = None
        if need_w:
            gw = (g2 @ cols.transpose(0, 2, 1)).reshape(w.shape)
        if need_b:
            gb = g.sum(axis=(0, 2, 3))
        if need_x:
            w2 = w.reshape(groups, o // groups, cg * kh * kw)
            gcols = (w2.transpose(0, 2, 1) @ g2).reshape(c, kh, kw, n, oh, ow)
            gpad = xp.zeros((c, n) + tuple(pad_shape[2:]), dtype=g.dtype)
            for i in range(kh):
                for j in range(kw):
                    gpad[_window_slices(i, j, stride, dilation, out_size)] += gcols[:, i, j]
            gx = xp.ascontiguousarray(_unpadded(gpad.transpose(1, 0, 2, 3), pads, x_shape))
        return gx, gw, gb, None, None, None, None, None


class MaxPool2d(Op):
    """Max over each window; with ``with_indices`` also the flat (h * W + w) input index of each
    maximum, as torch returns it. NaN wins, as in torch. The gradient goes to the chosen element."""
    node_name = "MaxPool2DWithIndicesBackward0"

    @staticmethod
    def forward(ctx, x, kernel, stride, pads, dilation, out_size, with_indices):
        xp = ctx.xp
        kh, kw = kernel
        xpad = _padded(xp, x, pads, -xp.inf)
        win = _windows(xp, xpad, kernel, stride, dilation, out_size, "NCHWij")
        win = win.reshape(win.shape[:4] + (kh * kw,))
        arg = xp.argmax(win, axis=-1)
        out = xp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
        ctx.args = x.shape, xpad.shape, kernel, stride, pads, dilation, out_size, arg
        if not with_indices:
            return out
        (sh, sw), (dh, dw), (top, _, left, _) = stride, dilation, pads
        oh, ow = out_size
        rows = (xp.arange(oh) * sh - top).reshape(oh, 1) + (arg // kw) * dh
        cols = (xp.arange(ow) * sw - left) + (arg % kw) * dw
        idx = (rows * x.shape[3] + cols).astype(xp.int64)
        ctx.mark_non_differentiable(idx)
        return out, idx

    @staticmethod
    def backward(ctx, g, *_):
        xp = ctx.xp
        x_shape, pad_shape, (kh, kw), stride, pads, dilation, out_size, arg = ctx.args
        gpad = xp.zeros(pad_shape, dtype=g.dtype)
        zero = xp.zeros((), dtype=g.dtype)
        for k in range(kh * kw):
            gpad[_window_slices(k // kw, k % kw, stride, dilation, out_size)] += xp.where(arg == k, g, zero)
        return (xp.ascontiguousarray(_unpadded(gpad, pads, x_shape)),) + (None,) * 6


def _window_counts(xp, size, kernel, stride, pad, out, include_pad):
    """How many elements each output position's window averages along one axis: windows are
    clipped to the padded input (ceil_mode overhang never counts), and to the input itself unless
    ``include_pad``."""
    start = xp.arange(out) * stride - pad
    end = xp.minimum(start + kernel, size + pad)
    if not include_pad:
        start, end = xp.maximum(start, 0), xp.minimum(end, size)
    return end - start


class AvgPool2d(Op):
    """Mean over each window (zero padding), divided as torch divides: by the window's size within
    the padded input (``count_include_pad``), its size within the input, or ``divisor_override``."""
    node_name = "AvgPool2DBackward0"

    @staticmethod
    def forward(ctx, x, kernel, stride, pads, out_size, count_include_pad, divisor_override):
        xp = ctx.xp
        kh, kw = kernel
        ones = (1, 1)
        xpad = _padded(xp, x, pads)
        total = xpad[_window_slices(0, 0, stride, ones, out_size)].copy()
        for k in range(1, kh * kw):
            total += xpad[_window_slices(k // kw, k % kw, stride, ones, out_size)]
        if divisor_override:
            divisor = xp.asarray(divisor_override, dtype=x.dtype)
        else:
            h, w = x.shape[2:]
            top, _, left, _ = pads
            rows = _window_counts(xp, h, kh, stride[0], top, out_size[0], count_include_pad)
            cols = _window_counts(xp, w, kw, stride[1], left, out_size[1], count_include_pad)
            divisor = (rows.reshape(-1, 1) * cols).astype(x.dtype)
        ctx.args = x.shape, xpad.shape, kernel, stride, pads, out_size, divisor
        return total / divisor

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x_shape, pad_shape, (kh, kw), stride, pads, out_size, divisor = ctx.args
        share = g / divisor
        gpad = xp.zeros(pad_shape, dtype=g.dtype)
        for i in range(kh):
            for j in range(kw):
                gpad[_window_slices(i, j, stride, (1, 1), out_size)] += share
        return (xp.ascontiguousarray(_unpadded(gpad, pads, x_shape)),) + (None,) * 6


# ---- padding -----------------------------------------------------------------------------------

def _source_positions(xp, n, before, after, mode):
    """For each position along a padded axis, the input position it copies (reflect, replicate,
    circular); negative ``before``/``after`` crop."""
    pos = xp.arange(-before, n + after)
    if mode == "reflect":
        pos = xp.abs(pos)
        return xp.where(pos >= n, 2 * (n - 1) - pos, pos)
    if mode == "replicate":
        return xp.clip(pos, 0, n - 1)
    return pos % n  # circular


class Pad(Op):
    """Pads (or, with negative amounts, crops) the trailing dims. ``pads`` holds one (before, after)
    pair per dim from the first padded dim on. 'constant' fills with ``value``; the other modes copy
    input positions along each padded axis in turn, and backward adds the copies back."""
    node_name = "PadBackward0"

    @staticmethod
    def forward(ctx, x, pads, mode, value):
        xp = ctx.xp
        first = x.ndim - len(pads)
        ctx.args = x.shape, pads, mode
        if mode == "constant":
            shape = x.shape[:first] + tuple(n + lo + hi for n, (lo, hi) in zip(x.shape[first:], pads))
            out = xp.full(shape, value, dtype=x.dtype)
            src, dst = _constant_regions(x.shape[first:], pads)
            out[(Ellipsis,) + dst] = x[(Ellipsis,) + src]
            return out
        positions = []
        for d, (lo, hi) in enumerate(pads, start=first):
            pos = _source_positions(xp, x.shape[d], lo, hi, mode)
            positions.append(pos)
            x = xp.take(x, pos, axis=d)
        ctx.positions = positions
        return x

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        shape, pads, mode = ctx.args
        first = len(shape) - len(pads)
        if mode == "constant":
            gx = xp.zeros(shape, dtype=g.dtype)
            src, dst = _constant_regions(shape[first:], pads)
            gx[(Ellipsis,) + src] = g[(Ellipsis,) + dst]
            return gx, None, None, None
        for d in reversed(range(first, len(shape))):
            part = xp.zeros(g.shape[:d] + (shape[d],) + g.shape[d + 1:], dtype=g.dtype)
            ctx.be.scatter_add(part, (slice(None),) * d + (ctx.positions[d - first],), g)
            g = part
        return g, None, None, None


def _constant_regions(sizes, pads):
    """The slices of the input that survive constant padding and where they land in the output."""
    src, dst = [], []
    for n, (lo, hi) in zip(sizes, pads):
        src.append(slice(max(-lo, 0), n - max(-hi, 0)))
        dst.append(slice(max(lo, 0), max(lo, 0) + max(n - max(-lo, 0) - max(-hi, 0), 0)))
    return tuple(src), tuple(dst)


# ---- normalization -----------------------------------------------------------------------------

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


# ---- losses ------------------------------------------------------------------------------------

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
            with ctx.be.quietly():  # every target ignored: 0/0, nan as in torch
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
        with ctx.be.quietly():
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
            with ctx.be.quietly():
                gt = g * (xp.maximum(xp.log(1 - x), -100) - xp.maximum(xp.log(x), -100))
        return gx, gt


# ---- embedding ---------------------------------------------------------------------------------

class Embedding(Op):
    """Rows of ``weight`` picked by integer ``indices``; the row at ``padding_idx`` gets no gradient,
    and ``scale_grad_by_freq`` divides each row's gradient by how often it was picked."""
    node_name = "EmbeddingBackward0"

    @staticmethod
    def forward(ctx, weight, indices, padding_idx, scale_grad_by_freq):
        ctx.args = weight.shape, indices, padding_idx, scale_grad_by_freq
        return weight[indices]

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        shape, indices, padding_idx, by_freq = ctx.args
        flat = indices.reshape(-1)
        rows = g.reshape(-1, shape[1])
        if by_freq:
            counts = xp.bincount(flat, minlength=shape[0])
            rows = rows / counts[flat].astype(g.dtype)[:, None]
        gw = xp.zeros(shape, dtype=g.dtype)
        ctx.be.scatter_add(gw, flat, rows)
        if padding_idx is not None and padding_idx >= 0:
            gw[padding_idx] = 0
        return gw, None, None, None


# ---- elementwise activations -------------------------------------------------------------------

class Elu(Op):
    """scale * x for x > 0, else scale * alpha * (exp(x * input_scale) - 1): elu, selu and celu."""
    node_name = "EluBackward0"

    @staticmethod
    def forward(ctx, x, alpha, scale, input_scale):
        xp = ctx.xp
        ctx.save_for_backward(x)
        ctx.args = alpha, scale, input_scale
        dt = x.dtype.type
        neg = dt(scale * alpha) * xp.expm1(xp.minimum(x, 0) * dt(input_scale))
        return xp.where(x > 0, x * dt(scale), neg)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, = ctx.saved_tensors
        alpha, scale, input_scale = ctx.args
        dt = x.dtype.type
        neg = g * dt(scale * alpha * input_scale) * xp.exp(xp.minimum(x, 0) * dt(input_scale))
        return xp.where(x > 0, g * dt(scale), neg), None, None, None


class Hardtanh(Op):
    """x clipped to [min_val, max_val]; the gradient passes strictly inside, as in torch."""
    node_name = "HardtanhBackward0"

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.args = lo, hi
        return ctx.xp.clip(x, x.dtype.type(lo), x.dtype.type(hi))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        lo, hi = ctx.args
        return ctx.xp.where((x > lo) & (x < hi), g, ctx.xp.zeros((), dtype=g.dtype)), None, None


class Threshold(Op):
    """x where x > threshold, else ``value``."""
    node_name = "ThresholdBackward0"

    @staticmethod
    def forward(ctx, x, threshold, value):
        ctx.save_for_backward(x)
        ctx.threshold = threshold
        return ctx.xp.where(x > threshold, x, x.dtype.type(value))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return ctx.xp.where(x > ctx.threshold, g, ctx.xp.zeros((), dtype=g.dtype)), None, None


class Hardsigmoid(Op):
    """relu6(x + 3) / 6; the gradient 1/6 passes strictly inside (-3, 3)."""
    node_name = "HardsigmoidBackward0"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.clip(x / 6 + x.dtype.type(0.5), 0, 1).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return ctx.xp.where((x > -3) & (x < 3), g / 6, ctx.xp.zeros((), dtype=g.dtype))


class Hardswish(Op):
    """x * relu6(x + 3) / 6, with torch's gradient: 0 below -3, x / 3 + 1/2 on [-3, 3], 1 above."""
    node_name = "HardswishBackward0"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * ctx.xp.clip(x + 3, 0, 6) / 6).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, = ctx.saved_tensors
        return xp.where(x < -3, xp.zeros((), dtype=g.dtype), xp.where(x <= 3, g * (x / 3 + x.dtype.type(0.5)), g))


class Silu(Op):
    """x * sigmoid(x)."""
    node_name = "SiluBackward0"

    @staticmethod
    def forward(ctx, x):
        s = _sigmoid(ctx, x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s * (1 + x * (1 - s))


class Mish(Op):
    """x * tanh(softplus(x))."""
    node_name = "MishBackward0"

    @staticmethod
    def forward(ctx, x):
        t = ctx.xp.tanh(_softplus(ctx, x, 1.0, 20.0))
        ctx.save_for_backward(x, t)
        return x * t

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        return g * (t + x * _sigmoid(ctx, x) * (1 - t * t))


class Erfinv(Op):
    """The inverse error function (the backend's special function)."""

    @staticmethod
    def forward(ctx, x):
        out = ctx.be.erfinv(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return g * (math.sqrt(math.pi) / 2) * ctx.xp.exp(out * out)


# ---- helpers that are not ops on the graph -----------------------------------------------------

def linalg_qr(a):
    """The reduced QR factorization of a 2-D tensor, computed by the tensor's backend (no graph)."""
    q, r = a._device._backend.xp.linalg.qr(a.detach()._data)
    return wrap(q, a._device), wrap(r, a._device)


__all__ = ["Conv2d", "MaxPool2d", "AvgPool2d", "Pad", "Normalize", "NllLoss", "BinaryCrossEntropy",
           "Embedding", "Elu", "Hardtanh", "Threshold", "Hardsigmoid", "Hardswish", "Silu", "Mish", "Erfinv",
           "linalg_qr"]
