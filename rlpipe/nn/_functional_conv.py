"""``nn.functional``'s convolutions (1-D, 2-D and transposed), unfold / fold and poolings (max, average and
adaptive, over one or two dims). The 1-D ops are their 2-D counterparts over a height-1 plane, as in torch."""
import builtins

from .. import primitives as P
from .. import primitives as ops
from ..primitives import _LEGACY_TYPE_NAMES, _require_float
from .._creation import zeros
from .. import _memory_format
from ..autograd.grad_mode import is_grad_enabled

__all__ = """conv1d conv2d conv_transpose1d conv_transpose2d unfold fold max_pool1d max_pool2d max_pool2d_with_indices
avg_pool1d avg_pool2d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_max_pool1d adaptive_max_pool2d
max_pool1d_with_indices adaptive_max_pool1d_with_indices adaptive_max_pool2d_with_indices lp_pool1d lp_pool2d
max_unpool1d max_unpool2d""".split()

# ---- 2-D convolution and pooling ------------------------------------------------------------------

def _expand2(value, name, error):
    """An int or a sequence of one or two ints as a pair, else ``error`` (a message)."""
    if isinstance(value, (builtins.int,)) and not isinstance(value, builtins.bool):
        return (value, value)
    value = tuple(value)
    if len(value) == 1:
        return (value[0], value[0])
    if len(value) != 2:
        raise RuntimeError(error.format(name=name, value=list(value)))
    return value


_CONV_PARAM = ("expected {name} to be a single integer value or a list of 2 values to match the convolution "
               "dimensions, but got {name}={value}")


def _batched(input, name, message):
    """input as [N, C, H, W] (an unbatched [C, H, W] gets N = 1) and whether it was unbatched."""
    if input.ndim == 3:
        return ops.unsqueeze(input, 0), True
    if input.ndim != 4:
        raise RuntimeError(message.format(name=name, shape=list(input.shape)))
    return input, False


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of input [N, C, H, W] (or [C, H, W]) with weight [O, C / groups, kh, kw]."""
    stride = _expand2(stride, "stride", _CONV_PARAM)
    dilation = _expand2(dilation, "dilation", _CONV_PARAM)
    if weight.ndim != 4:
        raise RuntimeError(f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional weight "
                           f"{list(weight.shape)}, but got {input.ndim}-dimensional input of size "
                           f"{list(input.shape)} instead")
    x, unbatched = _batched(input, "conv2d", "Expected 3D (unbatched) or 4D (batched) input to {name}, but got "
                                             "input of size: {shape}")
    kh, kw = weight.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same":
            if stride != (1, 1):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            padding = None
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    pads = _conv2d_pads(None if padding is None else _expand2(padding, "padding", _CONV_PARAM), dilation, (kh, kw))
    _check_conv(x, weight, bias, stride, pads, dilation, groups)
    out_size = _conv2d_out_size(x.shape[2:], (kh, kw), stride, pads, dilation)
    out = P.Conv2d.apply(x, weight, bias, stride, pads, dilation, groups, out_size)
    return ops.squeeze(out, 0) if unbatched else out


def _conv2d_pads(padding, dilation, kernel):
    """(top, bottom, left, right) zero rows and columns for ``padding`` (rows, columns), or for None:
    'same' padding, the odd one of a total put at the bottom and right, as torch puts it."""
    if padding is not None:
        return padding[0], padding[0], padding[1], padding[1]
    total_h, total_w = dilation[0] * (kernel[0] - 1), dilation[1] * (kernel[1] - 1)
    return total_h // 2, total_h - total_h // 2, total_w // 2, total_w - total_w // 2


def _conv2d_out_size(size, kernel, stride, pads, dilation):
    """(OH, OW) of a convolution over an input of spatial ``size`` (H, W)."""
    return ((size[0] + pads[0] + pads[1] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1,
            (size[1] + pads[2] + pads[3] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1)


def _check_conv(x, weight, bias, stride, pads, dilation, groups):
    if builtins.any(p < 0 for p in pads):
        raise RuntimeError("negative padding is not supported")
    if builtins.any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if builtins.any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    w_shape = list(weight.shape)
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size {w_shape} instead")
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {w_shape}, expected input{list(x.shape)} to have "
                           f"{weight.shape[1] * groups} channels, but got {x.shape[1]} channels instead")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(f"Given weight of size {w_shape}, expected bias to be 1-dimensional with {weight.shape[0]} "
                           f"elements, but got bias of size {list(bias.shape)} instead")
    padded = (x.shape[2] + pads[0] + pads[1], x.shape[3] + pads[2] + pads[3])
    kernel = (dilation[0] * (weight.shape[2] - 1) + 1, dilation[1] * (weight.shape[3] - 1) + 1)
    if padded[0] < kernel[0] or padded[1] < kernel[1]:
        raise RuntimeError(f"Calculated padded input size per channel: ({padded[0]} x {padded[1]}). Kernel size: "
                           f"({kernel[0]} x {kernel[1]}). Kernel size can't be greater than actual input size")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype is not x.dtype:
            raise RuntimeError(f"Input type ({x.type()}) and {name} type ({t.type()}) should be the same")
    _require_float(x, "slow_conv2d_cpu")


def _pool_size(size, k, pad, s, d, ceil_mode):
    """torch's pooling_output_shape: floor or ceil division, and with ceil_mode no window that starts
    in the right padding."""
    if s == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > ((k - 1) * d + 1) // 2:
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pad}, kernel_size={k} "
                           f"and dilation={d}")
    out = (size + 2 * pad - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + pad:
        out -= 1
    return out


def _pool_args(name, input, kernel_size, stride, padding, dilation, ceil_mode):
    """Checks pooling arguments as torch does; returns the batched input, whether it was unbatched,
    kernel, stride, padding, dilation, the output size and the (top, bottom, left, right) padding
    that also covers ceil_mode's overhang."""
    single_or_pair = f"{name}: {{name}} must either be a single int, or a tuple of two ints"
    kernel = _expand2(kernel_size, "kernel_size", single_or_pair)
    if stride is None or (not isinstance(stride, builtins.int) and len(stride) == 0):
        stride = kernel
    stride = _expand2(stride, "stride", f"{name}: {{name}} must either be omitted, a single int, or a tuple of two "
                                        "ints")
    pad = _expand2(padding, "padding", single_or_pair)
    dilation = _expand2(dilation, "dilation", f"{name}: {{name}} must be either a single int, or a tuple of two ints")
    if input.ndim not in (3, 4) or 0 in input.shape[-3:]:
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but "
                           f"got:{list(input.shape)}")
    h, w = input.shape[-2:]
    out = (_pool_size(h, kernel[0], pad[0], stride[0], dilation[0], ceil_mode),
           _pool_size(w, kernel[1], pad[1], stride[1], dilation[1], ceil_mode))
    if kernel[0] <= 0 or kernel[1] <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kernel[0]} kW: {kernel[1]}")
    if stride[0] <= 0 or stride[1] <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {stride[0]} dW: {stride[1]}")
    if dilation[0] <= 0 or dilation[1] <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {dilation[0]} "
                           f"dilationW: {dilation[1]}")
    if kernel[1] // 2 < pad[1] or kernel[0] // 2 < pad[0]:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got padW = {pad[1]}, "
                           f"padH = {pad[0]}, kW = {kernel[1]}, kH = {kernel[0]}")
    if out[0] < 1 or out[1] < 1:
        raise RuntimeError(f"Given input size: ({input.shape[-3]}x{h}x{w}). Calculated output size: "
                           f"({input.shape[-3]}x{out[0]}x{out[1]}). Output size is too small")
    # ceil_mode's last window may run past the padded input: pad the overhang too
    extra = [builtins.max(0, (o - 1) * s + d * (k - 1) + 1 - (size + 2 * p))
             for o, s, d, k, size, p in zip(out, stride, dilation, kernel, (h, w), pad)]
    pads = (pad[0], pad[0] + extra[0], pad[1], pad[1] + extra[1])
    x, unbatched = (ops.unsqueeze(input, 0), True) if input.ndim == 3 else (input, False)
    return x, unbatched, kernel, stride, pad, dilation, out, pads


def _in_input_layout(input, *results):
    """The pooling results laid out channels-last when a batched 4-D input is (torch keeps the input's
    suggested memory format); values are unchanged."""
    if input.ndim != 4:
        return results if len(results) > 1 else results[0]
    fmt = _memory_format.suggested(tuple(input.shape), input.stride())
    if fmt is not _memory_format.contiguous_format:
        results = tuple(r.contiguous(memory_format=fmt) for r in results)
    return results if len(results) > 1 else results[0]


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum of each window; with ``return_indices`` also its flat index into each H x W plane."""
    x, unbatched, kernel, stride, _, dilation, out_size, pads = _pool_args(
        "max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode)
    _require_float(x, "max_pool2d")
    result = P.MaxPool2d.apply(x, kernel, stride, pads, dilation, out_size, builtins.bool(return_indices))
    if unbatched:
        result = tuple(ops.squeeze(r, 0) for r in result) if return_indices else ops.squeeze(result, 0)
    return _in_input_layout(input, *result) if return_indices else _in_input_layout(input, result)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """``max_pool2d`` that also returns the flat index of each maximum in its input plane."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The mean of each window (zero padding counted by default)."""
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x, unbatched, kernel, stride, _, _, out_size, pads = _pool_args(
        "avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode)
    _require_float(x, "avg_pool2d")
    out = P.AvgPool2d.apply(x, kernel, stride, pads, out_size, builtins.bool(count_include_pad), divisor_override)
    return ops.squeeze(out, 0) if unbatched else _in_input_layout(input, out)


def _adaptive_output_size(input, output_size):
    """(out_h, out_w) from an int or a 2-tuple whose ``None`` entries keep the input's size."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(input.shape)}")
    sizes = (output_size, output_size) if isinstance(output_size, builtins.int) else tuple(output_size)
    if len(sizes) != 2:
        raise RuntimeError(f"adaptive_avg_pool2d: output_size must be 2, got {output_size!r}")
    if not all(s is None or isinstance(s, builtins.int) for s in sizes):
        raise TypeError(f"adaptive_avg_pool2d(): argument 'output_size' must be tuple of ints, got {output_size!r}")
    return tuple(input.shape[d] if s is None else s for d, s in zip((-2, -1), sizes))


def _adaptive_mean(x, dim, out):
    """Mean over ``out`` bins of ``dim``: bin i spans [floor(i * n / out), ceil((i + 1) * n / out))."""
    n = x.shape[dim]
    if n % out == 0:  # equal bins: one reshape and one mean
        axis = dim % x.ndim
        return ops.mean(ops.reshape(x, x.shape[:axis] + (out, n // out) + x.shape[axis + 1:]), dim)
    bins = [ops.mean(ops.narrow(x, dim, i * n // out, -(-(i + 1) * n // out) - i * n // out), dim, keepdim=True)
            for i in builtins.range(out)]
    return ops.cat(bins, dim)


def _require_float_unless_mean(input, out_size):
    """torch's adaptive average pooling rejects integer inputs, except to a 1 x 1 output, which it computes
    as a mean (and then mean's own error is raised)."""
    if out_size != (1, 1):
        _require_float(input, "adaptive_avg_pool2d")


def adaptive_avg_pool2d(input, output_size):
    """Means over a grid of ``output_size`` bins that covers the whole H x W plane, whatever its size."""
    out_h, out_w = _adaptive_output_size(input, output_size)
    _require_float_unless_mean(input, (out_h, out_w))
    return _in_input_layout(input, _adaptive_mean(_adaptive_mean(input, -2, out_h), -1, out_w))

# ---- 1-D and transposed convolutions ----------------------------------------------------------------

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
    out = conv2d(ops.unsqueeze(x, 2), ops.unsqueeze(weight, 2), bias, (1, stride), padding, (1, dilation), groups)
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
    if weight.dtype is not x.dtype:
        raise RuntimeError(f"expected scalar type {_LEGACY_TYPE_NAMES[x.dtype.name]} but found "
                           f"{_LEGACY_TYPE_NAMES[weight.dtype.name]}")
    _require_float(x, "slow_conv_transpose2d_out_cpu")
    if bias is not None and bias.dtype is not x.dtype:  # torch adds a bias of another float dtype in x's
        bias = bias.to(x.dtype)
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
    return tuple(_expand2(v, name, "{name} must be an int or a pair of ints, got {value}")
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
    _require_float(x, "im2col_out_cpu")
    pads = (padding[0], padding[0], padding[1], padding[1])
    out = P.Unfold.apply(x, kernel, stride, pads, dilation, blocks)
    return ops.squeeze(out, 0) if unbatched else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The adjoint of ``unfold``: the columns of input [N, C*kh*kw, L] (or [C*kh*kw, L]) summed back into
    an [N, C, *output_size] image, overlapping windows adding up (col2im)."""
    size = _expand2(output_size, "output_size", "{name} must be an int or a pair of ints, got {value}")
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
    _require_float(x, "col2im_out_cpu")
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
    # torch pools as 2-D (keeping a channels-last-like layout, with 2-D's checks) when it returns indices or
    # records a graph, or off the CPU
    as_2d = return_indices or input.device.type != "cpu" or (input.requires_grad and is_grad_enabled())
    if input.ndim not in (2, 3) or (not as_2d and 0 in input.shape[-2:]):
        raise RuntimeError(f"max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{list(input.shape)}")
    if padding > kernel // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got padding={padding} "
                           f"and kernel_size={kernel}")
    if kernel > 0 and stride > 0 and dilation > 0 and not as_2d:
        size = _pool_size(input.shape[-1], kernel, padding, stride, dilation, ceil_mode)
        if size < 1:
            raise RuntimeError(f"max_pool1d() Invalid computed output size: {size}")
    _require_float(input, "max_pool1d_impl")
    out = max_pool2d(ops.unsqueeze(input, -2), (1, kernel), (1, stride), (0, padding), (1, dilation), ceil_mode,
                       return_indices)
    if return_indices:
        return tuple(ops.squeeze(t, -2) for t in out)
    out = ops.squeeze(out, -2)
    return out if as_2d else ops.contiguous(out)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """The mean of each window of input [N, C, L] (or [C, L]), zero padding counted by default."""
    kernel = _one_int(kernel_size, "avg_pool1d", "kernel_size")
    stride = kernel if stride is None or stride == () or stride == [] else _one_int(stride, "avg_pool1d", "stride")
    padding = _one_int(padding, "avg_pool1d", "padding")
    _check_rank_1d(input, "avg_pool1d")
    out = avg_pool2d(ops.unsqueeze(input, -2), (1, kernel), (1, stride), (0, padding), ceil_mode, count_include_pad)
    return ops.squeeze(out, -2)


def adaptive_avg_pool1d(input, output_size):
    """Means over ``output_size`` bins that cover the whole length of input [N, C, L] (or [C, L])."""
    size = _one_int(output_size, "adaptive_avg_pool1d", "output_size")
    _check_rank_1d(input, "adaptive_avg_pool1d")
    _require_float_unless_mean(input, (1, size))
    return _adaptive_mean(input, -1, size)


def _adaptive_max(name, input, output_size, return_indices):
    """adaptive max pooling of a batched or unbatched 2-D input to ``output_size`` (a pair)."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{name}(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    if builtins.min(output_size) < 0:
        raise RuntimeError(f"{name}(): Expected output_size to be non-negative, but got {list(output_size)}")
    empty = [d for d in builtins.range(1, input.ndim) if input.shape[d] == 0]
    if empty:
        raise RuntimeError(f"adaptive_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, "
                           f"but input has sizes {list(input.shape)} with dimension {empty[0]} being empty")
    _require_float(input, "adaptive_max_pool2d")
    x, unbatched = (ops.unsqueeze(input, 0), True) if input.ndim == 3 else (input, False)
    out, idx = P.AdaptiveMaxPool2d.apply(x, tuple(output_size))
    if unbatched:
        out, idx = ops.squeeze(out, 0), ops.squeeze(idx, 0)
    out, idx = _in_input_layout(input, out, idx)
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


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """``max_pool1d`` that also returns the position of each maximum."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    """``adaptive_max_pool1d`` that also returns the position of each maximum."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    """``adaptive_max_pool2d`` that also returns the flat position of each maximum."""
    return adaptive_max_pool2d(input, output_size, True)


# ---- power-average pooling and max unpooling -------------------------------------------------------

def _lp_pool(pool, max_pool, input, norm_type, kernel_size, stride, ceil_mode, window):
    """(sum of x^p over each window)^(1/p) as torch computes it: an average pooling of x^p times the window
    size; p = +-inf is a max pooling of |x|."""
    if norm_type == float("inf"):
        return max_pool(ops.abs(input), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return ops.neg(max_pool(ops.neg(ops.abs(input)), kernel_size, stride, 0, 1, ceil_mode))
    out = pool(ops.pow(input, norm_type), kernel_size, stride, 0, ceil_mode)
    return ops.pow(ops.sign(out) * ops.relu(ops.abs(out)) * window, 1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The p-norm of each window of input [N, C, L] (or [C, L]) with ``norm_type`` p."""
    return _lp_pool(avg_pool1d, max_pool1d, input, norm_type, kernel_size, stride, ceil_mode, kernel_size)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The p-norm of each window of input [N, C, H, W] (or [C, H, W]) with ``norm_type`` p."""
    kh, kw = _expand2(kernel_size, "kernel_size", "lp_pool2d: {name} must be an int or a pair of ints")
    return _lp_pool(avg_pool2d, max_pool2d, input, norm_type, kernel_size, stride, ceil_mode, kh * kw)


def _unpool_size(input, kernel, stride, padding, output_size):
    """torch's _unpool_output_size: the size that pooling undoes, or a given ``output_size`` within a stride."""
    dims = len(kernel)
    default = [(input.shape[-dims + d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(dims)]
    if output_size is None:
        return default
    if len(output_size) == dims + 2:
        output_size = output_size[2:]
    if len(output_size) != dims:
        raise ValueError(f"output_size should be a sequence containing {dims} or {dims + 2} elements, but it has a "
                         f"length of '{len(output_size)}'")
    for d in range(dims):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {low} and {high})')
    return list(output_size)


def _max_unpool(name, input, indices, kernel, stride, padding, output_size, dims):
    stride = kernel if stride is None else stride
    size = _unpool_size(input, kernel, stride, padding, output_size)
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"Input to {name} should be a {dims + 1}d or {dims + 2}d Tensor, but got a tensor with "
                           f"{input.ndim} dimensions.")
    if indices.dtype.name != "int64":
        raise RuntimeError(f"elements in indices should be type int64 but got: {_type_letter(indices)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    plane = 1
    for s in size:
        plane *= s
    if indices.numel() and builtins.bool(((indices < 0) | (indices >= plane)).any()):
        bad = indices[(indices < 0) | (indices >= plane)].reshape(-1)[0].item()
        volume = "x".join(map(str, size))
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size {volume})")
    lead = input.shape[:-dims]
    flat = ops.reshape(input, lead + (-1,))
    out = ops.scatter(zeros(lead + (plane,), dtype=input.dtype, device=input.device), -1,
                      ops.reshape(indices, lead + (-1,)), flat)
    return ops.reshape(out, lead + tuple(size))


def _type_letter(t):
    return {"int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte"}.get(t.dtype.name, t.dtype.name)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool1d``: each value written at its index (from ``return_indices``) in a
    zero output of the pooled input's length."""
    def single(value):
        return (value,) if isinstance(value, builtins.int) else tuple(value)
    return _max_unpool("max_unpooling1d", input, indices, single(kernel_size),
                       None if stride is None else single(stride), single(padding), output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool2d``: each value written at its flat index (from ``return_indices``) in
    a zero output plane of the pooled input's size."""
    pair = "max_unpool2d: {name} must be an int or a pair of ints"
    kernel = _expand2(kernel_size, "kernel_size", pair)
    stride = None if stride is None else _expand2(stride, "stride", pair)
    return _max_unpool("max_unpooling2d", input, indices, kernel, stride, _expand2(padding, "padding", pair),
                       output_size, 2)
