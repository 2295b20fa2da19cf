"""Sliding windows over [N, C, H, W] arrays: convolution and pooling.

They slide windows over a padded input with one strided view (``as_strided``), never a Python
loop over batch or spatial positions; the only loops run over the kh * kw kernel positions,
where each position's update is one strided slice of the input.
"""
from .base import Op


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
