"""The adjoints of ``windows``' convolution: the transposed convolution and unfold / fold.

A transposed convolution is the input gradient of a convolution, so its forward is ``Conv2d``'s
input-gradient step and its input gradient is ``Conv2d``'s forward, on the same weight; its weight
gradient is the convolution's weight gradient with the roles of input and output gradient swapped.
``unfold`` (im2col) gathers the windows of an image into columns and ``fold`` (col2im) adds columns
back into an image: each is the other's backward.
"""
from .base import Op
from .windows import (_im2col_backward, _im2col_forward, _input_order, _laid_out, _padded, _unpadded, _window_slices,
                      _windows)


class ConvTranspose2d(Op):
    """The transposed 2-D convolution of x [N, Cin, H, W] with w [Cin, Cout / groups, kh, kw] into
    [N, Cout, OH, OW] (``out_size``): the gradient of the convolution of a [N, Cout, OH, OW] input with
    ``w`` whose output is x."""
    node_name = "ConvolutionBackward0"

    @staticmethod
    def forward(ctx, x, w, b, stride, pads, dilation, groups, out_size):
        n = x.shape[0]
        cout = w.shape[1] * groups
        conv_input = (n, cout) + tuple(out_size)
        pad_shape = (n, cout, out_size[0] + pads[0] + pads[1], out_size[1] + pads[2] + pads[3])
        out, _ = _im2col_backward(ctx.xp, x, None, w, True, False, conv_input, pad_shape, stride, pads, dilation,
                                  groups, x.shape[2:])
        if b is not None:
            out += b.reshape(1, -1, 1, 1)
        ctx.args = conv_input, pad_shape, stride, pads, dilation, groups, x.shape[2:]
        ctx.save_for_backward(x, w)
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        conv_input, pad_shape, stride, pads, dilation, groups, conv_out = ctx.args
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        gx = gw = gb = None
        if need_x or need_w:
            gx, cols, _ = _im2col_forward(ctx.xp, g, w, None, stride, pads, dilation, groups, conv_out, need_w)
        if need_w:
            _, gw = _im2col_backward(ctx.xp, x, cols, w, False, True, conv_input, pad_shape, stride, pads, dilation,
                                     groups, conv_out)
        if need_b:
            gb = g.sum(axis=(0, 2, 3))
        return gx if need_x else None, gw, gb, None, None, None, None, None


def _im2col(xp, x, kernel, stride, pads, dilation, out_size):
    """x [N, C, H, W] -> [N, C*kh*kw, OH*OW]: each column one window, rows in (c, i, j) order."""
    n, c = x.shape[:2]
    windows = _windows(xp, _padded(xp, x, pads), kernel, stride, dilation, out_size, "NCijHW")
    return windows.reshape(n, c * kernel[0] * kernel[1], out_size[0] * out_size[1])


def _col2im(xp, cols, size, kernel, stride, pads, dilation, out_size):
    """The adjoint of ``_im2col``: cols [N, C*kh*kw, OH*OW] added back into an [N, C, H, W] image."""
    n = cols.shape[0]
    (kh, kw), (h, w) = kernel, size
    c = cols.shape[1] // (kh * kw)
    src = cols.reshape(n, c, kh, kw, out_size[0], out_size[1])
    image = xp.zeros((n, c, h + pads[0] + pads[1], w + pads[2] + pads[3]), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            image[_window_slices(i, j, stride, dilation, out_size)] += src[:, :, i, j]
    return xp.ascontiguousarray(_unpadded(image, pads, (n, c, h, w)))


class Unfold(Op):
    """im2col: the sliding windows of x [N, C, H, W] as the columns of [N, C*kh*kw, L]."""
    node_name = "Im2ColBackward0"

    @staticmethod
    def forward(ctx, x, kernel, stride, pads, dilation, out_size):
        ctx.args = x.shape[2:], kernel, stride, pads, dilation, out_size
        return _im2col(ctx.xp, x, kernel, stride, pads, dilation, out_size)

    @staticmethod
    def backward(ctx, g):
        return (_col2im(ctx.xp, g, *ctx.args),) + (None,) * 5


class Fold(Op):
    """col2im: the columns of x [N, C*kh*kw, L] summed into an [N, C, H, W] image (``size`` = (H, W))."""
    node_name = "Col2ImBackward0"

    @staticmethod
    def forward(ctx, x, size, kernel, stride, pads, dilation, out_size):
        ctx.args = kernel, stride, pads, dilation, out_size
        return _col2im(ctx.xp, x, size, kernel, stride, pads, dilation, out_size)

    @staticmethod
    def backward(ctx, g):
        return (_im2col(ctx.xp, g, *ctx.args),) + (None,) * 6


def _adaptive_bins(n, out):
    """The (start, stop) of each of ``out`` bins covering ``n`` positions, as torch's adaptive pooling."""
    return [(i * n // out, -(-(i + 1) * n // out)) for i in range(out)]


class AdaptiveMaxPool2d(Op):
    """The maximum of each bin of a grid of ``out_size`` bins over x [N, C, H, W], with its flat (h * W + w)
    position as torch returns it; one strided slice per bin. The gradient goes to the chosen element."""
    node_name = "AdaptiveMaxPool2DBackward0"

    @staticmethod
    def forward(ctx, x, out_size):
        xp = ctx.xp
        n, c, h, w = x.shape
        out = xp.empty((n, c) + out_size, dtype=x.dtype)
        idx = xp.empty((n, c) + out_size, dtype=xp.int64)
        for i, (top, bottom) in enumerate(_adaptive_bins(h, out_size[0])):
            for j, (left, right) in enumerate(_adaptive_bins(w, out_size[1])):
                window = x[:, :, top:bottom, left:right].reshape(n, c, (bottom - top) * (right - left))
                arg = xp.argmax(window, axis=-1)
                out[:, :, i, j] = xp.take_along_axis(window, arg[..., None], axis=-1)[..., 0]
                idx[:, :, i, j] = (top + arg // (right - left)) * w + left + arg % (right - left)
        ctx.args = x.shape, idx
        ctx.order = _input_order(x)
        ctx.mark_non_differentiable(idx)
        return out, idx

    @staticmethod
    def backward(ctx, g, *_):
        (n, c, h, w), idx = ctx.args
        gx = ctx.xp.zeros((n * c, h * w), dtype=g.dtype)
        rows = ctx.xp.arange(n * c).reshape(-1, 1)
        bins = idx.shape[2] * idx.shape[3]
        ctx.be.scatter_add(gx, (rows, idx.reshape(n * c, bins)), g.reshape(n * c, bins))
        return _laid_out(ctx.xp, gx.reshape(n, c, h, w), ctx.order), None
