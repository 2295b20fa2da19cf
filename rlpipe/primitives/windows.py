"""Sliding windows over [N, C, H, W] arrays: convolution and pooling.

They slide windows over a padded input with one strided view (``as_strided``), never a Python
loop over batch or spatial positions; the only loops run over the kernel positions (and, for
space-to-depth, the stride's phases), where each update is one strided slice of an array.
"""
from .. import _memory_format as _mf
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


def _space_to_depth(xp, a, stride, size):
    """a [N, C, H, W] -> [N, C*sh*sw, Hs, Ws] with out[n, (c, p, q), y, x] = a[n, c, y*sh + p, x*sw + q]
    (zeros beyond a's edge): a stride-s convolution of ``a`` is a stride-1 one of the result."""
    (sh, sw), (hs, ws) = stride, size
    n, c, h, w = a.shape
    if hs * sh > h or ws * sw > w:
        a = _padded(xp, a, (0, max(hs * sh - h, 0), 0, max(ws * sw - w, 0)))
    a = a[:, :, :hs * sh, :ws * sw].reshape(n, c, hs, sh, ws, sw).transpose(0, 1, 3, 5, 2, 4)
    return xp.ascontiguousarray(a).reshape(n, c * sh * sw, hs, ws)


def _depth_to_space(xp, a, stride, size):
    """The adjoint of ``_space_to_depth``: a [N, C*sh*sw, Hs, Ws] back to [N, C, H, W] for ``size``
    (H, W); the positions past Hs*sh or Ws*sw get zeros, the zeros space-to-depth added are dropped.
    One strided copy per (p, q) phase, each of whole rows."""
    (sh, sw), (h, w) = stride, size
    n, _, hs, ws = a.shape
    blocks = a.reshape(n, -1, sh, sw, hs, ws)
    make = xp.zeros if h > hs * sh or w > ws * sw else xp.empty
    out = make((n, blocks.shape[1], max(h, hs * sh), max(w, ws * sw)), dtype=a.dtype)
    for p in range(sh):
        for q in range(sw):
            out[:, :, p:hs * sh:sh, q:ws * sw:sw] = blocks[:, :, p, q]
    return out[:, :, :h, :w]


def _blocks(kernel, stride):
    """Kernel positions per stride step: the kernel of the stride-1 convolution after space-to-depth."""
    return -(-kernel[0] // stride[0]), -(-kernel[1] // stride[1])


def _run_length(width, out_size):
    """Columns per sample of a stride-1 convolution over rows of ``width``: output (y, x) is column
    y * width + x, so the OH rows of OW outputs span (OH - 1) * width + OW columns."""
    return (out_size[0] - 1) * width + out_size[1]


def _row_columns(xp, xs, stride, blocks, dilation, out_size):
    """The columns [C*kh'*kw', N*L] of the stride-1 convolution of contiguous ``xs`` [N, C*sh*sw, Hs, Ws]
    (the space-to-depth input, or the padded input itself when the stride is 1), kh' = bh*sh and
    kw' = bw*sw. Row (c, a*sh + p, b*sw + q), the kernel layout of the weight, reads channel (c, p, q)
    at offset (a, b); column n*L + y*Ws + x is output (y, x). Within a sample one row is a single
    contiguous run of ``xs``, so the copy moves long runs. The Ws - OW columns after each output row
    hold windows that wrap around the row's end, which every caller ignores or zeroes."""
    (sh, sw), (bh, bw), (dh, dw) = stride, blocks, dilation
    n, _, _, width = xs.shape
    sn, sch, s_h, s_w = xs.strides
    length = _run_length(width, out_size)
    shape = (xs.shape[1] // (sh * sw), bh, sh, bw, sw, n, length)
    steps = (sh * sw * sch, s_h * dh, sw * sch, s_w * dw, sch, sn, s_w)
    cols = xp.lib.stride_tricks.as_strided(xs, shape, steps)
    return cols.reshape(shape[0] * bh * sh * bw * sw, n * length)


def _scatter_row_columns(gcols, out, stride, blocks, dilation, out_size):
    """The adjoint of ``_row_columns``: adds gcols [C*kh'*kw', N*L] into ``out`` [N, C*sh*sw, Hs, Ws],
    one add of contiguous runs per offset (a, b). The wrapped columns must be zero."""
    (sh, sw), (bh, bw), (dh, dw) = stride, blocks, dilation
    n, channels, hs, ws = out.shape
    length = _run_length(ws, out_size)
    flat = out.reshape(n, channels // (sh * sw), sh, sw, hs * ws)
    src = gcols.reshape(-1, bh, sh, bw, sw, n, length)
    for a in range(bh):
        for b in range(bw):
            start = a * dh * ws + b * dw
            flat[..., start:start + length] += src[:, a, :, b].transpose(3, 0, 1, 2, 4)


def _valid_columns(xp, rows, n, width, out_size):
    """The [N, K, OH, OW] view of the outputs' columns in ``rows`` [K, N*L] (see ``_row_columns``)."""
    k = rows.shape[0]
    r = rows.reshape(k, n, -1)
    sk, sn, sl = r.strides
    return xp.lib.stride_tricks.as_strided(r, (n, k) + tuple(out_size), (sn, sk, width * sl, sl))


def _zero_wrapped(xp, rows, n, width, out_size):
    """Zeroes, in place, the columns of ``rows`` [K, N*L] that wrap around a row's end."""
    (oh, ow), k = out_size, rows.shape[0]
    if oh > 1 and width > ow:
        r = rows.reshape(k, n, -1)[:, :, ow:]
        sk, sn, sl = r.strides
        xp.lib.stride_tricks.as_strided(r, (k, n, oh - 1, width - ow), (sk, sn, width * sl, sl))[...] = 0


def _padded_kernel(xp, w, size):
    """w [O, Cg, kh, kw] zero-padded to the kernel ``size`` (kh', kw') >= (kh, kw)."""
    if w.shape[2:] == size:
        return w
    out = xp.zeros(w.shape[:2] + size, dtype=w.dtype)
    out[:, :, :w.shape[2], :w.shape[3]] = w
    return out


def _sample_chunks(n, per_sample):
    """(start, stop) ranges of samples whose columns fill about ``_CHUNK_ENTRIES``: each chunk's columns
    are still in the core's cache when its product reads them."""
    step = max(1, _CHUNK_ENTRIES // per_sample)
    return [(lo, min(lo + step, n)) for lo in range(0, n, step)]


_CHUNK_ENTRIES = 2 ** 18
_SMALL_COLUMNS = 2 ** 18  # below this many column entries im2col's gather stays in cache


def _by_rows_pays(x_shape, w_shape, stride, dilation, out_size):
    """Whether the row-run layout (after space-to-depth when strided) is the faster way. Its products
    also cover the wrapped columns and, when strided, the kernel's padding to multiples of the stride:
    past 1.3x the im2col products its cheaper copies no longer make up for them (a 5x5 kernel at stride 2,
    padded to 6x6, measured slower at 1.5x). Nor do they below
    ``_SMALL_COLUMNS`` column entries, where im2col's gather stays in cache."""
    n, c = x_shape[:2]
    (oh, ow), (kh, kw), (sh, sw) = out_size, w_shape[2:], stride
    if n * c * kh * kw * oh * ow < _SMALL_COLUMNS or (stride != (1, 1) and dilation != (1, 1)):
        return False
    bh, bw = _blocks((kh, kw), stride)
    products = _run_length(ow + dilation[1] * (bw - 1), out_size) * bh * sh * bw * sw
    return products <= 1.3 * oh * ow * kh * kw


def _channels_last_pays(x_shape, w_shape, stride, dilation, groups, out_size):
    """Whether the channels-last layout is the faster way: one group, a kernel row spanning at least
    ``_LONG_RUN`` entries of the channels-last input (after folding the stride into channels, see
    ``_hwc_fold``), short output rows (up to ``_SHORT_ROWS``: longer ones make long row runs, which pay
    better), and more columns than 4x the weight's entries, which it permutes."""
    n, c = x_shape[:2]
    o, _, kh, kw = w_shape
    fold = _hwc_fold(w_shape, stride, dilation)
    return groups == 1 and kh * kw > 1 and kw * c * fold[0] >= _LONG_RUN and out_size[1] <= _SHORT_ROWS and \
        n * out_size[0] * out_size[1] >= 4 * o


_SHORT_ROWS = 21  # measured: rows of 21 outputs (and the Nature CNN's 20) pay, of 24 and more do not


def _layout(x_shape, w_shape, stride, dilation, groups, out_size):
    """The name of the way Conv2d computes these shapes: 'hwc', 'rows' or 'im2col'."""
    if _channels_last_pays(x_shape, w_shape, stride, dilation, groups, out_size):
        return "hwc"
    return "rows" if _by_rows_pays(x_shape, w_shape, stride, dilation, out_size) else "im2col"


class Conv2d(Op):
    """2-D cross-correlation as one matmul per group of the weight with a column matrix of the input's
    windows, laid out one of three ways (``_layout``). Short output rows over many channels take the
    input channels last (``_hwc_columns``: each window row is one run). Otherwise a strided convolution
    first becomes a stride-1 one over the space-to-depth input (s x s blocks as channels); a stride-1
    convolution then takes its columns as contiguous runs of the input rows (``_row_columns``), and
    backward adds the column gradients back run by run. Where that layout costs too many extra products
    (``_by_rows_pays``), the windows are gathered one by one (im2col) and scattered back with one
    strided add per kernel position (col2im)."""
    node_name = "ConvolutionBackward0"

    @staticmethod
    def forward(ctx, x, w, b, stride, pads, dilation, groups, out_size):
        run, back = _LAYOUTS[_layout(x.shape, w.shape, stride, dilation, groups, out_size)]
        keep_columns = ctx.needs_input_grad[1:2] == (True,)  # only the weight gradient reads them
        out, cols, args = run(ctx.xp, x, w, b, stride, pads, dilation, groups, out_size, keep_columns)
        ctx.args = (back, x.shape) + args + (stride, pads, dilation, groups, out_size)
        ctx.save_for_backward(cols, w)
        if keep_columns:
            ctx.input = x  # for the double backward: the weight gradient depends on x
        return out

    @staticmethod
    def backward(ctx, g):
        cols, w = ctx.saved_tensors
        back, x_shape = ctx.args[:2]
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        gx, gw = back(ctx.xp, g, cols, w, need_x, need_w, x_shape, *ctx.args[2:])
        # the batch first: a sum over one contiguous axis, then short rows
        gb = g.sum(axis=0).reshape(g.shape[1], g.shape[2] * g.shape[3]).sum(axis=1) if need_b else None
        return gx, gw, gb, None, None, None, None, None


def _im2col_forward(xp, x, w, b, stride, pads, dilation, groups, out_size, keep_columns):
    """(out, columns or None, (padded shape,)) of im2col: the windows gathered into [G, Cg*kh*kw, N*OH*OW],
    kept for backward with ``keep_columns``."""
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    oh, ow = out_size
    xpad = _padded(xp, x, pads)
    # one reshape copies the strided windows once
    cols = _windows(xp, xpad, (kh, kw), stride, dilation, out_size, "CijNHW").reshape(
        groups, cg * kh * kw, n * oh * ow)
    prod = (w.reshape(groups, o // groups, cg * kh * kw) @ cols).reshape(o, n, oh, ow)
    if b is not None:
        prod += b.reshape(o, 1, 1, 1)
    out = xp.ascontiguousarray(prod.transpose(1, 0, 2, 3))
    return out, cols if keep_columns else None, (xpad.shape,)


def _im2col_backward(xp, g, cols, w, need_x, need_w, x_shape, pad_shape, stride, pads, dilation, groups,
                     out_size):
    """(gx, gw) of im2col: the column gradients scattered back with one strided add per kernel position."""
    n, c = x_shape[:2]
    o, cg, kh, kw = w.shape
    oh, ow = out_size
    # g [N, O, OH, OW] -> [G, Og, N*OH*OW], the layout of the forward's product
    g2 = xp.ascontiguousarray(g.reshape(n, groups, o // groups, oh * ow).transpose(1, 2, 0, 3)).reshape(
        groups, o // groups, n * oh * ow)
    gx = gw = None
    if need_w:
        gw = (g2 @ cols.transpose(0, 2, 1)).reshape(w.shape)
    if need_x:
        w2 = w.reshape(groups, o // groups, cg * kh * kw)
        gcols = (w2.transpose(0, 2, 1) @ g2).reshape(c, kh, kw, n, oh, ow)
        gpad = xp.zeros((c, n) + tuple(pad_shape[2:]), dtype=g.dtype)
        for i in range(kh):
            for j in range(kw):
                gpad[_window_slices(i, j, stride, dilation, out_size)] += gcols[:, i, j]
        gx = xp.ascontiguousarray(_unpadded(gpad.transpose(1, 0, 2, 3), pads, x_shape))
    return gx, gw


def _rows_forward(xp, x, w, b, stride, pads, dilation, groups, out_size, keep_columns):
    """(out, columns or None, (stride-1 input shape,)) of the row-run layout, after space-to-depth when
    strided. Without ``keep_columns`` the columns are built and multiplied a chunk of samples at a
    time, so the product reads them from cache; with it, they are built at once and kept for backward
    (written in chunks into one array, they would cost more than they save)."""
    n, o = x.shape[0], w.shape[0]
    blocks = _blocks(w.shape[2:], stride)
    xs = _padded(xp, x, pads)
    if stride != (1, 1):
        xs = _space_to_depth(xp, xs, stride, (out_size[0] - 1 + blocks[0], out_size[1] - 1 + blocks[1]))
    xs = xp.ascontiguousarray(xs)  # the row runs cross rows
    wk = _padded_kernel(xp, w, (blocks[0] * stride[0], blocks[1] * stride[1])).reshape(groups, o // groups, -1)
    per_sample = wk.shape[2] * groups * _run_length(xs.shape[3], out_size)
    out = xp.empty((n, o) + tuple(out_size), dtype=xp.result_type(x, w))
    cols = None
    for lo, hi in [(0, n)] if keep_columns else _sample_chunks(n, per_sample):
        cols = _row_columns(xp, xs[lo:hi], stride, blocks, dilation, out_size)
        prod = (wk @ cols.reshape(groups, -1, cols.shape[1])).reshape(o, -1)
        if b is not None:  # on the product's long rows: cheaper than on the output's short ones
            prod += b.reshape(o, 1)
        out[lo:hi] = _valid_columns(xp, prod, hi - lo, xs.shape[3], out_size)
    return out, cols if keep_columns else None, (xs.shape,)


def _rows_backward(xp, g, cols, w, need_x, need_w, x_shape, xs_shape, stride, pads, dilation, groups, out_size):
    """(gx, gw) of the row-run layout. The gradient takes the forward's product layout with zeros in the
    wrapped columns, so they add nothing, unless a non-finite value meets them (0 * inf): a non-finite
    weight gradient is recomputed with the wrapped columns zeroed, a non-finite weight zeroes them first."""
    n, o = g.shape[:2]
    width = xs_shape[3]
    blocks = _blocks(w.shape[2:], stride)
    wk = _padded_kernel(xp, w, (blocks[0] * stride[0], blocks[1] * stride[1]))
    g2 = xp.zeros((o, n * _run_length(width, out_size)), dtype=g.dtype)
    _valid_columns(xp, g2, n, width, out_size)[...] = g
    g2 = g2.reshape(groups, o // groups, -1)
    gx = gw = None
    if need_w:
        cols3 = cols.reshape(groups, -1, cols.shape[1])
        gw = g2 @ cols3.transpose(0, 2, 1)
        if not xp.isfinite(gw).all():
            _zero_wrapped(xp, cols, n, width, out_size)
            gw = g2 @ cols3.transpose(0, 2, 1)
        gw = gw.reshape(wk.shape)[:, :, :w.shape[2], :w.shape[3]]
    if need_x:
        gcols = (wk.reshape(groups, o // groups, -1).transpose(0, 2, 1) @ g2).reshape(-1, g2.shape[2])
        if not xp.isfinite(wk).all():
            _zero_wrapped(xp, gcols, n, width, out_size)
        gxs = xp.zeros(xs_shape, dtype=g.dtype)
        _scatter_row_columns(gcols, gxs, stride, blocks, dilation, out_size)
        padded = (x_shape[2] + pads[0] + pads[1], x_shape[3] + pads[2] + pads[3])
        gpad = _depth_to_space(xp, gxs, stride, padded) if stride != (1, 1) else gxs
        gx = xp.ascontiguousarray(_unpadded(gpad, pads, x_shape))
    return gx, gw


def _whole_strides(w_shape, stride, dilation):
    """Whether an undilated kernel spans whole strides, so folding the stride into channels costs no
    extra products."""
    return dilation == (1, 1) and w_shape[2] % stride[0] == 0 and w_shape[3] % stride[1] == 0


def _hwc_fold(w_shape, stride, dilation):
    """The stride that the channels-last forward folds into channels (space-to-depth): where a kernel
    row spans fewer than ``_LONG_RUN`` input entries and the kernel whole strides; else (1, 1)."""
    c, kw = w_shape[1], w_shape[3]
    return stride if kw * c < _LONG_RUN and _whole_strides(w_shape, stride, dilation) else (1, 1)


_LONG_RUN = 64  # entries: a quarter KiB of float32, runs that copy at close to memcpy's speed


def _to_hwc(xp, x, pads, fold, size):
    """The padded x [N, C, H, W] as a contiguous [N, Hs, Ws, C*fh*fw] array (``size``: (Hs, Ws)), each
    fh x fw block of pixels as channels (c, p, q) (space-to-depth first: one 6-d transpose costs more
    than its two copies)."""
    xs = _padded(xp, x, pads)
    if fold != (1, 1):
        xs = _space_to_depth(xp, xs, fold, size)
    return xp.ascontiguousarray(xs[:, :, :size[0], :size[1]].transpose(0, 2, 3, 1))


def _from_hwc(xp, gxh, fold, x_shape, pads):
    """The adjoint of ``_to_hwc``: gxh [N, Hs, Ws, C*fh*fw] back to [N, C, H, W]."""
    padded = (x_shape[2] + pads[0] + pads[1], x_shape[3] + pads[2] + pads[3])
    g = gxh.transpose(0, 3, 1, 2)
    if fold != (1, 1):
        g = _depth_to_space(xp, xp.ascontiguousarray(g), fold, padded)
    return xp.ascontiguousarray(_unpadded(g, pads, x_shape))


def _hwc_geometry(x_shape, w_shape, stride, pads, dilation, out_size, fold):
    """(fold, (Hs, Ws), kernel, stride, dilation) of the channels-last convolution: after folding, a
    stride-1 undilated one over blocks; otherwise the padded input as it is."""
    if fold == (1, 1):
        size = (x_shape[2] + pads[0] + pads[1], x_shape[3] + pads[2] + pads[3])
        return fold, size, tuple(w_shape[2:]), stride, dilation
    kernel = _blocks(w_shape[2:], stride)
    return fold, (out_size[0] - 1 + kernel[0], out_size[1] - 1 + kernel[1]), kernel, (1, 1), (1, 1)


def _hwc_columns(xp, xh, kernel, stride, dilation, out_size, out=None):
    """The columns [N*OH*OW, kh*kw*C] of contiguous ``xh`` [N, Hp, Wp, C] (written into ``out`` when given):
    row (n, y, x) is window (y, x) in (i, j, c) order, so undilated each kernel row (i) is one run of kw*C
    entries of ``xh``."""
    n, _, _, c = xh.shape
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_size
    sn, s_h, s_w, sc = xh.strides
    view = xp.lib.stride_tricks.as_strided(xh, (n, oh, ow, kh, kw, c),
                                           (sn, s_h * sh, s_w * sw, s_h * dh, s_w * dw, sc))
    if out is None:
        return view.reshape(n * oh * ow, kh * kw * c)
    out.reshape(view.shape)[...] = view
    return out


def _hwc_weight_order(w_shape, fold):
    """(shape, axes): w [O, C, kh, kw] reshaped to ``shape`` and transposed by ``axes`` is in the order of
    ``_hwc_columns``' rows after ``_to_hwc`` with ``fold``: (a, b, c, p, q, O) for kernel position
    (a*fh + p, b*fw + q)."""
    o, c, kh, kw = w_shape
    fh, fw = fold
    return (o, c, kh // fh, fh, kw // fw, fw), (2, 4, 1, 3, 5, 0)


def _hwc_weight(xp, w, fold):
    """w [O, C, kh, kw] as [kh*kw*C, O], the layout ``_hwc_columns``' rows multiply."""
    shape, axes = _hwc_weight_order(w.shape, fold)
    return xp.ascontiguousarray(w.reshape(shape).transpose(axes)).reshape(-1, w.shape[0])


def _hwc_forward(xp, x, w, b, stride, pads, dilation, groups, out_size, keep_columns):
    """(out, columns or None, (geometry,)) with the input's channels last (strides folded into channels
    where the kernel spans whole strides): the columns' rows then read runs of kw*C entries, and the
    product [N*OH*OW, O] has the output channels last, moved first by one copy."""
    n, o = x.shape[0], w.shape[0]
    geometry = _hwc_geometry(x.shape, w.shape, stride, pads, dilation, out_size, _hwc_fold(w.shape, stride, dilation))
    fold, size, kernel, step, spread = geometry
    wk = _hwc_weight(xp, w, fold)
    dtype, positions = xp.result_type(x, w), out_size[0] * out_size[1]
    out = xp.empty((n, o) + tuple(out_size), dtype=dtype)
    kept = xp.empty((n * positions, wk.shape[0]), dtype=dtype) if keep_columns else None
    for lo, hi in _sample_chunks(n, wk.shape[0] * positions):
        part = None if kept is None else kept[lo * positions:hi * positions]
        cols = _hwc_columns(xp, _to_hwc(xp, x[lo:hi], pads, fold, size), kernel, step, spread, out_size, part)
        prod = cols @ wk
        if b is not None:
            prod += b
        out[lo:hi] = prod.reshape(hi - lo, out_size[0], out_size[1], o).transpose(0, 3, 1, 2)
    return out, kept, (geometry,)


def _hwc_backward(xp, g, cols, w, need_x, need_w, x_shape, geometry, stride, pads, dilation, groups, out_size):
    """(gx, gw) of the channels-last layout. The column gradients are added back with one strided add per
    kernel position, folding the stride into channels wherever the kernel spans whole strides (fewer adds
    of longer runs than the forward's fold may have)."""
    n, o = g.shape[:2]
    g2 = xp.ascontiguousarray(g.reshape(n, o, -1).transpose(0, 2, 1)).reshape(-1, o)  # [N*OH*OW, O]
    gx = gw = None
    if need_w:
        shape, axes = _hwc_weight_order(w.shape, geometry[0])
        # [O, (a, b, c, p, q)] back to the weight's [O, c, a, p, b, q]
        blocks = (g2.T @ cols).reshape((o,) + tuple(shape[k] for k in axes[:5]))
        gw = xp.ascontiguousarray(blocks.transpose(0, 3, 1, 4, 2, 5)).reshape(w.shape)
    if need_x:
        fold = stride if _whole_strides(w.shape, stride, dilation) else (1, 1)
        fold, size, kernel, step, spread = _hwc_geometry(x_shape, w.shape, stride, pads, dilation, out_size, fold)
        gcols = (g2 @ _hwc_weight(xp, w, fold).T).reshape((n,) + tuple(out_size) + kernel + (-1,))
        gxh = xp.zeros((n,) + size + (gcols.shape[-1],), dtype=g.dtype)
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                gxh[_window_slices(i, j, step, spread, out_size) + (slice(None),)] += gcols[:, :, :, i, j]
        gx = _from_hwc(xp, gxh, fold, x_shape, pads)
    return gx, gw


_LAYOUTS = {"hwc": (_hwc_forward, _hwc_backward), "rows": (_rows_forward, _rows_backward),
            "im2col": (_im2col_forward, _im2col_backward)}


def _input_order(x):
    """The dims' order (slowest first) of the memory format x's strides suggest; None when row-major."""
    return _mf.order_for(x.shape, None, _mf.suggested(x.shape, _mf.element_strides(x)))


def _laid_out(xp, grad, order):
    """An input gradient packed in the input's ``order`` (torch keeps a channels-last input's layout)."""
    return xp.ascontiguousarray(grad) if order is None else _mf.copied_in(xp, grad, order)


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
        ctx.order = _input_order(x)
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
        return (_laid_out(xp, _unpadded(gpad, pads, x_shape), ctx.order),) + (None,) * 6


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
        ctx.order = _input_order(x)
        ctx.settings = count_include_pad, divisor_override  # the forward again, for the double backward
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
        return (_laid_out(xp, _unpadded(gpad, pads, x_shape), ctx.order),) + (None,) * 6
