"""``nn.functional``'s 1-D convolution, the transposed convolutions, unfold / fold and the 1-D and
adaptive-max poolings. The 1-D ops are their 2-D counterparts over a height-1 plane, as in torch."""
import builtins

from .. import primitives as P
from .. import primitives as ops
from ..primitives import _require_float
from . import functional as F

__all__ = """conv1d conv_transpose1d conv_transpose2d unfold fold max_pool1d avg_pool1d adaptive_avg_pool1d
adaptive_max_pool1d adaptive_max_pool2d""".split()

_CONV1_PARAM = ("expected {name} to be a single integer value or a list of 1 values to match the convolution "
                "dimensions, but got {name}={value}")


def _expand1(value, name, error):
    """An int or a one-int sequence as an int, else ``error`` (a message)."""
    if isinstance(value, builtins.int) and not isinstance(value, builtins.bool):
        return value
    value = tuple(value)
    if len(value) != 1:
        raise RuntimeError(error.format(name=name, value=list(value)))
    return value[0]


def _check_channels(x, weight, bias, groups, transposed):
    """torch's channel, group and bias checks for a batched input x (messages show the given shapes)."""
    w_shape = list(weight.shape)
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] % groups:
        shown = [w_shape] if transposed else w_shape  # torch prints the transposed case with two brackets
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size {shown} instead")
    given = f"transposed=1, weight of size {w_shape}" if transposed else f"groups={groups}, weight of size {w_shape}"
    channels = weight.shape[0] if transposed else weight.shape[1] * groups
    if x.shape[1] != channels:
        raise RuntimeError(f"Given {given}, expected input{list(x.shape)} to have {channels} channels, but got "
                           f"{x.shape[1]} channels instead")
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_channels):
        given = f"transposed=1, weight of size {w_shape}" if transposed else f"weight of size {w_shape}"
        raise RuntimeError(f"Given {given}, expected bias to be 1-dimensional with {out_channels} elements, but got "
                           f"bias of size {list(bias.shape)} instead")


def _check_weight_rank(input, weight, rank):
    if weight.ndim != rank:
        raise RuntimeError(f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional weight "
                           f"{list(weight.shape)}, but got {input.ndim}-dimensional input of size "
                           f"{list(input.shape)} instead")


def _batched_as(input, dims, name):
    """input with a batch dim (added when unbatched) and whether one was added."""
    if input.ndim == dims + 1:
        return ops.unsqueeze(input, 0), True
    if input.ndim != dims + 2:
        raise RuntimeError(f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to {name}, but got "
                           f"input of size: {list(input.shape)}")
    return input, False


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation of input [N, C, L] (or [C, L]) with weight [O, C / groups, k]; ``padding`` is
    an int, ``'valid'`` or ``'same'``."""
    stride = _expand1(stride, "stride", _CONV1_PARAM)
    dilation = _expand1(dilation, "dilation", _CONV1_PARAM)
    if not isinstance(padding, str):
        padding = (0, _expand1(padding, "padding", _CONV1_PARAM))
    _check_weight_rank(input, weight, 3)
    x, unbatched = _batched_as(input, 1, "conv1d")
    _check_channels(x, weight, bias, groups, False)
    if not isinstance(padding, str):
        padded, kernel = x.shape[2] + 2 * padding[1], dilation * (weight.shape[2] - 1) + 1
        if padded < kernel and padding[1] >= 0 and dilation > 0:
            raise RuntimeError(f"Calculated padded input size per channel: ({padded}). Kernel size: ({kernel}). "
                               "Kernel size can't be greater than actual input size")
    out = F.conv2d(ops.unsqueeze(x, 2), ops.unsqueeze(weight, 2), bias, (1, stride), padding, (1, dilation), groups)
    out = ops.squeeze(out, 2)
    return ops.squeeze(out, 0) if unbatched else out


def _transposed_args(name, input, weight, stride, padding, output_padding, dilation, dims):
    """Each argument as a ``dims``-tuple, the batched input, and whether it was unbatched."""
    def expand(value, arg):
        if isinstance(value, str):
            raise TypeError(f"{name}(): argument '{arg}' must be tuple of ints, not str")
        if isinstance(value, builtins.int):
            return (value,) * dims
        value = tuple(value)
        if len(value) == 1:
            return value * dims
        if len(value) != dims:
            raise RuntimeError(f"expected {arg} to be a single integer value or a list of {dims} values to match "
                               f"the convolution dimensions, but got {arg}={list(value)}")
        return value
    args = [expand(v, a) for v, a in ((stride, "stride"), (padding, "padding"), (output_padding, "output_padding"),
                                      (dilation, "dilation"))]
    _check_weight_rank(input, weight, dims + 2)
    x, unbatched = _batched_as(input, dims, name)
    return args, x, unbatched


def _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation):
    """The transposed convolution of batched x [N, Cin, H, W] with weight [Cin, Cout / groups, kh, kw]."""
    if builtins.any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if builtins.any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if builtins.any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if builtins.any(o >= s and o >= d or o < 0 for o, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_height: {output_padding[0]} output_padding_width: {output_padding[1]} "
                           f"stride_height: {stride[0]} stride_width: {stride[1]} dilation_height: {dilation[0]} "
                           f"dilation_width: {dilation[1]}")
    size = tuple((n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in
                 zip(x.shape[2:], stride, padding, dilation, weight.shape[2:], output_padding))
    if builtins.min(size) < 1:
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, x.shape[2:]))}). Calculated output "
                           f"size per channel: ({' x '.join(map(str, size))}). Output size is too small")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype is not x.dtype:
            raise RuntimeError(f"Input type ({x.type()}) and {name} type ({t.type()}) should be the same")
    _require_float(x, "slow_conv_transpose2d_out_cpu")
    pads = (padding[0], padding[0], padding[1], padding[1])
    return P.ConvTranspose2d.apply(x, weight, bias, stride, pads, dilation, groups, size)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 2-D convolution (the gradient of ``conv2d`` with respect to its input) of
    input [N, Cin, H, W] (or [Cin, H, W]) with weight [Cin, Cout / groups, kh, kw]: the output is
    (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1 high, and as wide."""
    (stride, padding, output_padding, dilation), x, unbatched = _transposed_args(
        "conv_transpose2d", input, weight, stride, padding, output_padding, dilation, 2)
    _check_channels(x, weight, bias, groups, True)
    out = _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation)
    return ops.squeeze(out, 0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 1-D convolution of input [N, Cin, L] (or [Cin, L]) with weight [Cin, Cout / groups, k]."""
    (stride, padding, output_padding, dilation), x, unbatched = _transposed_args(
        "conv_transpose1d", input, weight, stride, padding, output_padding, dilation, 1)
    _check_channels(x, weight, bias, groups, True)
    out = _conv_transpose(ops.unsqueeze(x, 2), ops.unsqueeze(weight, 2), bias, (1,) + stride, (0,) + padding,
                          (0,) + output_padding, groups, (1,) + dilation)
    out = ops.squeeze(out, 2)
    return ops.squeeze(out, 0) if unbatched else out


# ---- unfold and fold -----------------------------------------------------------------------------

def _pairs(kernel_size, dilation, padding, stride):
    return tuple(F._expand2(v, name, "{name} must be an int or a pair of ints, got {value}")
                 for v, name in ((kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"),
                                 (stride, "stride")))


def _blocks(size, kernel, dilation, padding, stride):
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, d, p, s in zip(size, kernel, dilation, padding,
                                                                                  stride))


def _check_unfold_args(kernel, dilation, padding, stride):
    for name, values, low in (("kernel", kernel, 1), ("dilation", dilation, 1), ("padding", padding, 0),
                              ("stride", stride, 1)):
        if builtins.min(values) < low:
            relation = "greater than zero" if low else "non-negative"
            raise RuntimeError(f"{name} should be {relation}, but got {name}_height: {values[0]} {name}_width: "
                               f"{values[1]}")


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding ``kernel_size`` windows of input [N, C, H, W] (or [C, H, W]) as columns: [N, C*kh*kw, L]
    with L the number of windows (im2col)."""
    kernel, dilation, padding, stride = _pairs(kernel_size, dilation, padding, stride)
    _check_unfold_args(kernel, dilation, padding, stride)
    if input.ndim not in (3, 4) or input.numel() == 0 and input.ndim == 4 and input.shape[1] == 0:
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    x, unbatched = (ops.unsqueeze(input, 0), True) if input.ndim == 3 else (input, False)
    blocks = _blocks(x.shape[2:], kernel, dilation, padding, stride)
    if builtins.min(blocks) < 1:
        raise RuntimeError(f"Given input with spatial size {tuple(x.shape[2:])}, kernel_size={kernel}, "
                           f"dilation={dilation}, padding={padding}, calculated shape of the array of sliding blocks "
                           f"as {blocks}, but its components must be at least one.")
    pads = (padding[0], padding[0], padding[1], padding[1])
    out = P.Unfold.apply(x, kernel, stride, pads, dilation, blocks)
    return ops.squeeze(out, 0) if unbatched else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The adjoint of ``unfold``: the columns of input [N, C*kh*kw, L] (or [C*kh*kw, L]) summed back into
    an [N, C, *output_size] image, overlapping windows adding up (col2im)."""
    size = F._expand2(output_size, "output_size", "{name} must be an int or a pair of ints, got {value}")
    kernel, dilation, padding, stride = _pairs(kernel_size, dilation, padding, stride)
    _check_unfold_args(kernel, dilation, padding, stride)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    x, unbatched = (ops.unsqueeze(input, 0), True) if input.ndim == 2 else (input, False)
    if x.shape[1] % (kernel[0] * kernel[1]):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={x.shape[1]} and kernel_size={kernel}.")
    blocks = _blocks(size, kernel, dilation, padding, stride)
    if x.shape[2] != blocks[0] * blocks[1] or builtins.min(blocks) < 1:
        raise RuntimeError(f"Given output_size={size}, kernel_size={kernel}, dilation={dilation}, "
                           f"padding={padding}, stride={stride}, expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, "
                           f"but got input.size(2)={x.shape[2]}.")
    pads = (padding[0], padding[0], padding[1], padding[1])
    out = P.Fold.apply(x, size, kernel, stride, pads, dilation, blocks)
    return ops.squeeze(out, 0) if unbatched else out


# ---- 1-D and adaptive max pooling ----------------------------------------------------------------

def _one_int(value, name, arg):
    if isinstance(value, builtins.int):
        return value
    value = tuple(value)
    if len(value) != 1:
        raise RuntimeError(f"{name}() argument '{arg}' should contain one int (got {len(value)})")
    return value[0]


def _check_rank_1d(input, name):
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for argument #1 "
                           f"'self' (while checking arguments for {name})")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum of each window of input [N, C, L] (or [C, L]); with ``return_indices`` also its position."""
    def single(value, arg):
        if isinstance(value, builtins.int):
            return value
        value = tuple(value)
        if len(value) != 1:
            raise RuntimeError(f"max_pool1d() {arg} must be an int, list of ints or tuple of ints of size 1 but got "
                               f"size {len(value)}")
        return value[0]
    kernel = single(kernel_size, "kernel_size")
    stride = kernel if stride is None or stride == () or stride == [] else single(stride, "stride")
    padding, dilation = single(padding, "padding"), single(dilation, "dilation")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{list(input.shape)}")
    if padding > kernel // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got padding={padding} "
                           f"and kernel_size={kernel}")
    if kernel > 0 and stride > 0 and dilation > 0:
        size = F._pool_size(input.shape[-1], kernel, padding, stride, dilation, ceil_mode)
        if size < 1:
            raise RuntimeError(f"max_pool1d() Invalid computed output size: {size}")
    out = F.max_pool2d(ops.unsqueeze(input, -2), (1, kernel), (1, stride), (0, padding), (1, dilation), ceil_mode,
                       return_indices)
    if return_indices:
        return tuple(ops.squeeze(t, -2) for t in out)
    return ops.squeeze(out, -2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """The mean of each window of input [N, C, L] (or [C, L]), zero padding counted by default."""
    kernel = _one_int(kernel_size, "avg_pool1d", "kernel_size")
    stride = kernel if stride is None or stride == () or stride == [] else _one_int(stride, "avg_pool1d", "stride")
    padding = _one_int(padding, "avg_pool1d", "padding")
    _check_rank_1d(input, "avg_pool1d")
    out = F.avg_pool2d(ops.unsqueeze(input, -2), (1, kernel), (1, stride), (0, padding), ceil_mode, count_include_pad)
    return ops.squeeze(out, -2)


def adaptive_avg_pool1d(input, output_size):
    """Means over ``output_size`` bins that cover the whole length of input [N, C, L] (or [C, L])."""
    size = _one_int(output_size, "adaptive_avg_pool1d", "output_size")
    _check_rank_1d(input, "adaptive_avg_pool1d")
    return F._adaptive_mean(input, -1, size)


def _adaptive_max(name, input, output_size, return_indices):
    """adaptive max pooling of a batched or unbatched 2-D input to ``output_size`` (a pair)."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{name}(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    if builtins.min(output_size) < 0:
        raise RuntimeError(f"{name}(): Expected output_size to be non-negative, but got {list(output_size)}")
    _require_float(input, "adaptive_max_pool2d")
    x, unbatched = (ops.unsqueeze(input, 0), True) if input.ndim == 3 else (input, False)
    out, idx = P.AdaptiveMaxPool2d.apply(x, tuple(output_size))
    if unbatched:
        out, idx = ops.squeeze(out, 0), ops.squeeze(idx, 0)
    return (out, idx) if return_indices else out


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Maxima over a grid of ``output_size`` bins covering the H x W plane (bins as ``adaptive_avg_pool2d``'s);
    with ``return_indices`` also each maximum's flat position in its plane."""
    if isinstance(output_size, builtins.int):
        output_size = (output_size, output_size)
    output_size = tuple(output_size)
    if len(output_size) != 2:
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    if input.ndim >= 2:
        output_size = tuple(input.shape[d] if s is None else s for d, s in zip((-2, -1), output_size))
    return _adaptive_max("adaptive_max_pool2d", input, output_size, return_indices)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Maxima over ``output_size`` bins covering the length of input [N, C, L] (or [C, L])."""
    size = _one_int(output_size, "adaptive_max_pool1d", "output_size")
    _check_rank_1d(input, "adaptive_max_pool1d")
    out = _adaptive_max("adaptive_max_pool1d", ops.unsqueeze(input, -2), (1, size), True)
    out = tuple(ops.squeeze(t, -2) for t in out)
    return out if return_indices else out[0]
