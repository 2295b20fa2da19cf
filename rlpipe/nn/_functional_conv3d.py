"""``nn.functional``'s 3-D convolution and poolings, built from the 2-D ones: a 3-D max, mean or
adaptive pooling is separable (pool H x W of each depth slice, then pool along the depth), and a 3-D
convolution is one 2-D convolution whose input channels are the depth slices under the kernel's depth taps."""
import builtins

from .. import primitives as P
from .. import primitives as ops
from .. import _dtypes
from .._creation import tensor, zeros
from ..primitives import _require_float
from ._functional_conv import (_adaptive_mean, _check_channels, _check_weight_rank, _conv2d_out_size, _pool_size,
                               adaptive_max_pool2d, avg_pool2d, max_pool2d)

__all__ = ["conv3d", "max_pool3d", "max_pool3d_with_indices", "avg_pool3d", "adaptive_avg_pool3d",
           "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices"]


def _triple(value, message):
    """An int or a sequence of one or three ints as a triple, else RuntimeError(message)."""
    if isinstance(value, builtins.int) and not isinstance(value, builtins.bool):
        return (value,) * 3
    value = tuple(value)
    if len(value) == 1:
        return value * 3
    if len(value) != 3:
        raise RuntimeError(message)
    return value


def _batched5(input):
    """input as [N, C, D, H, W] and whether a batch dim was added."""
    if input.ndim not in (4, 5) or input.numel() == 0:
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    return (ops.unsqueeze(input, 0), True) if input.ndim == 4 else (input, False)


def _pool3d_args(name, input, kernel_size, stride, padding, dilation, ceil_mode, arg_message):
    """Checks a 3-D pooling's arguments as torch does; returns the batched input, whether it was
    unbatched, kernel, stride, padding, dilation and the output size."""
    kernel = _triple(kernel_size, f"{name}: kernel_size {arg_message}")
    stride = kernel if stride is None or stride == () or stride == [] else _triple(
        stride, f"{name}: stride must either be omitted, a single int, or a tuple of three ints")
    pad = _triple(padding, f"{name}: padding {arg_message}")
    dilation = _triple(dilation, f"{name}: dilation {arg_message}")
    x, unbatched = _batched5(input)
    if builtins.min(kernel) <= 0 or builtins.min(stride) <= 0 or builtins.min(dilation) <= 0:
        raise RuntimeError(f"{name}: kernel_size, stride and dilation should be greater than zero, but got "
                           f"kernel_size={list(kernel)}, stride={list(stride)}, dilation={list(dilation)}")
    out = tuple(_pool_size(size, k, p, s, d, ceil_mode)
                for size, k, p, s, d in zip(x.shape[2:], kernel, pad, stride, dilation))
    return x, unbatched, kernel, stride, pad, dilation, out


def _over_planes(pool, x, *args):
    """``pool`` (a 2-D pooling) of each depth slice of x [N, C, D, H, W]; results keep the depth."""
    n, c, d = x.shape[:3]
    result = pool(ops.reshape(x, (n, c * d) + x.shape[3:]), *args)
    reshape = lambda t: ops.reshape(t, (n, c, d) + t.shape[2:])  # noqa: E731
    return tuple(reshape(t) for t in result) if isinstance(result, tuple) else reshape(result)


def _over_depth(pool, x, *args):
    """``pool`` (a 2-D pooling over a [D, H*W] plane with a (k, 1) window) along the depth of x."""
    n, c, d, h, w = x.shape
    result = pool(ops.reshape(x, (n, c, d, h * w)), *args)
    reshape = lambda t: ops.reshape(t, t.shape[:3] + (h, w))  # noqa: E731
    return tuple(reshape(t) for t in result) if isinstance(result, tuple) else reshape(result)


def _joined_indices(plane_idx, depth_idx, size):
    """Flat D*H*W indices from the planes' flat H*W indices and the depth pass's [D, OH*OW] ones (a
    window wholly in the padding points outside the input: clamped here, replaced by ``_first_taps``)."""
    plane = plane_idx.shape[3] * plane_idx.shape[4]
    depth = ops.clamp(depth_idx // plane, 0, size[0] - 1)
    return depth * (size[1] * size[2]) + ops.gather(plane_idx, 2, depth)


def _first_taps(out, stride, pad, dilation):
    """Per output position along one axis, the window's first tap at or past the input's start."""
    starts = [o * stride - pad for o in builtins.range(out)]
    return [start + -(-builtins.max(0, -start) // dilation) * dilation for start in starts]


def _empty_window_indices(pooled, indices, size, stride, pad, dilation):
    """indices where a window held nothing above -inf replaced by torch's choice there: the flat position
    of the window's first taps (as its kernel starts with them and only a larger value moves it)."""
    depth, rows, cols = (_first_taps(*args) for args in zip(pooled.shape[2:], stride, pad, dilation))
    first = [[[(t * size[1] + h) * size[2] + w for w in cols] for h in rows] for t in depth]
    first = tensor(first, dtype=_dtypes.int64, device=indices.device)
    return ops.where(pooled == float("-inf"), first, indices)


def _unbatch(result, unbatched):
    """result (a tensor or a tuple of them) without the batch dim that was added to an unbatched input."""
    if not unbatched:
        return result
    return tuple(ops.squeeze(t, 0) for t in result) if isinstance(result, tuple) else ops.squeeze(result, 0)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum of each window of input [N, C, D, H, W] (or [C, D, H, W]); with ``return_indices`` also
    its flat index into the D x H x W volume."""
    x, unbatched, k, s, p, d, out = _pool3d_args("max_pool3d", input, kernel_size, stride, padding, dilation,
                                                ceil_mode, "must either be a single int, or a tuple of three ints")
    if builtins.min(out) < 1:
        shown = "x".join(str(v) for v in x.shape[1:])
        raise RuntimeError(f"Given input size: ({shown}). Calculated output size: "
                           f"({x.shape[1]}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")
    _require_float(x, "max_pool3d")
    return_indices = builtins.bool(return_indices)
    planes = _over_planes(max_pool2d, x, k[1:], s[1:], p[1:], d[1:], ceil_mode, return_indices)
    pooled = _over_depth(max_pool2d, planes[0] if return_indices else planes, (k[0], 1), (s[0], 1), (p[0], 0),
                         (d[0], 1), ceil_mode, return_indices)
    if not return_indices:
        return _unbatch(pooled, unbatched)
    pooled, depth_idx = pooled
    indices = _joined_indices(planes[1], depth_idx, x.shape[2:])
    return _unbatch((pooled, _empty_window_indices(pooled, indices, x.shape[2:], s, p, d)), unbatched)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """``max_pool3d`` that also returns the flat index of each maximum in its volume."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The mean of each window of input [N, C, D, H, W] (or [C, D, H, W]): the divisor is a product of
    per-axis window sizes, so averaging the planes and then the depth gives the 3-D mean."""
    x, unbatched, k, s, p, _, out = _pool3d_args("avg_pool3d", input, kernel_size, stride, padding, 1, ceil_mode,
                                                 "must be a single int, or a tuple of three ints")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if builtins.min(out) < 1 or builtins.any(size < kk for size, kk in zip(x.shape[2:], k)):  # torch: unpadded
        raise RuntimeError(f"input image (T: {x.shape[2]} H: {x.shape[3]} W: {x.shape[4]}) smaller than kernel "
                           f"size (kT: {k[0]} kH: {k[1]} kW: {k[2]})")
    _require_float(x, "avg_pool3d")
    plane_divisor = 1 if divisor_override else None  # with an override: sums, divided once at the end
    planes = _over_planes(avg_pool2d, x, k[1:], s[1:], p[1:], ceil_mode, count_include_pad, plane_divisor)
    out = _over_depth(avg_pool2d, planes, (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode, count_include_pad,
                      divisor_override)
    return _unbatch(out, unbatched)


def _adaptive3_sizes(name, input, output_size, length_message):
    """(out_d, out_h, out_w) from an int or a triple whose ``None`` entries keep the input's size."""
    if input.ndim not in (4, 5):
        sep = ":" if name == "adaptive_max_pool3d" else ""
        raise RuntimeError(f"{name}(): Expected 4D or 5D tensor, but got{sep} {list(input.shape)}")
    sizes = (output_size,) * 3 if isinstance(output_size, builtins.int) else tuple(output_size)
    if len(sizes) != 3:
        raise RuntimeError(length_message)
    return tuple(input.shape[dim] if size is None else size for dim, size in zip((-3, -2, -1), sizes))


def adaptive_avg_pool3d(input, output_size):
    """Means over a grid of ``output_size`` bins covering the whole D x H x W volume."""
    sizes = _adaptive3_sizes("adaptive_avg_pool3d", input, output_size, "adaptive_avg_pool3d: output_size must be 3")
    out = input
    for dim, size in zip((-3, -2, -1), sizes):
        out = _adaptive_mean(out, dim, size)
    return out


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Maxima over a grid of ``output_size`` bins covering the D x H x W volume (bins as
    ``adaptive_avg_pool3d``'s); with ``return_indices`` also each maximum's flat position."""
    sizes = _adaptive3_sizes("adaptive_max_pool3d", input, output_size,
                             "adaptive_max_pool3d(): internal error: output_size.size() must be 3")
    if builtins.min(sizes) < 0:
        raise RuntimeError(f"adaptive_max_pool3d(): Expected output_size to be non-negative, but got {list(sizes)}")
    _require_float(input, "adaptive_max_pool3d_cpu")
    x, unbatched = (ops.unsqueeze(input, 0), True) if input.ndim == 4 else (input, False)
    planes = _over_planes(adaptive_max_pool2d, x, sizes[1:], True)
    plane_size = sizes[1] * sizes[2]
    pooled, depth_idx = _over_depth(adaptive_max_pool2d, planes[0], (sizes[0], plane_size), True)
    if not return_indices:
        return _unbatch(pooled, unbatched)
    return _unbatch((pooled, _joined_indices(planes[1], depth_idx, x.shape[2:])), unbatched)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    """``adaptive_max_pool3d`` that also returns the flat position of each maximum."""
    return adaptive_max_pool3d(input, output_size, True)


# ---- 3-D convolution ----------------------------------------------------------------------------

def _conv_triple(value, name):
    """An int or a sequence of one or three ints as a triple, with torch's message otherwise."""
    if isinstance(value, builtins.int) and not isinstance(value, builtins.bool):
        return (value,) * 3
    return _triple(value, f"expected {name} to be a single integer value or a list of 3 values to match the "
                          f"convolution dimensions, but got {name}={list(value)}")


def _conv3d_pads(padding, stride, dilation, kernel):
    """((front, back), (top, bottom), (left, right)) zero padding; 'same' puts an odd total's extra one
    at the end, as torch does."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * 3
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if stride != (1, 1, 1):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in totals)
    return tuple((p, p) for p in _conv_triple(padding, "padding"))


def _depth_padded(x, front, back):
    """x [N, C, D, H, W] with ``front`` and ``back`` zero slices around its depth."""
    if not (front or back):
        return x
    def slab(depth):
        return zeros(x.shape[:2] + (depth,) + x.shape[3:], dtype=x.dtype, device=x.device)
    return ops.cat([slab(front), x, slab(back)], 2)


def _depth_taps_as_channels(x, taps, stride, dilation, out_depth, groups):
    """x [N, C, D, H, W] as [N * OD, C * taps, H, W] planes: each output depth's input slices under the
    kernel's depth taps, stacked as channels ordered (group, tap, channel in group), so that one 2-D
    convolution with the weight's taps moved next to its channels is the 3-D one."""
    n, c = x.shape[:2]
    span = stride * (out_depth - 1) + 1
    slices = [x[:, :, tap * dilation:tap * dilation + span:stride] for tap in builtins.range(taps)]
    stacked = ops.stack(slices, 1)  # [N, taps, C, OD, H, W]
    stacked = ops.reshape(stacked, (n, taps, groups, c // groups) + stacked.shape[3:])
    stacked = ops.permute(stacked, (0, 4, 2, 1, 3, 5, 6))  # [N, OD, groups, taps, C / groups, H, W]
    return ops.reshape(stacked, (n * out_depth, c * taps) + stacked.shape[5:])


def _check_conv3d(x, weight, pads, stride, dilation):
    """torch's padding, stride, dilation and size checks for a batched input x."""
    if builtins.any(p < 0 for pair in pads for p in pair):
        raise RuntimeError("negative padding is not supported")
    if builtins.any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if builtins.any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    padded = [size + sum(pair) for size, pair in zip(x.shape[2:], pads)]
    kernel = [d * (k - 1) + 1 for d, k in zip(dilation, weight.shape[2:])]
    if builtins.any(p < k for p, k in zip(padded, kernel)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                           f"size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual "
                           "input size")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation of input [N, C, D, H, W] (or [C, D, H, W]) with weight [O, C / groups, kd, kh, kw];
    ``padding`` is an int, a triple, ``'valid'`` or ``'same'``."""
    stride, dilation = _conv_triple(stride, "stride"), _conv_triple(dilation, "dilation")
    _check_weight_rank(input, weight, 5)
    if input.ndim not in (4, 5):
        raise RuntimeError(f"Expected 4D (unbatched) or 5D (batched) input to conv3d, but got input of size: "
                           f"{list(input.shape)}")
    x, unbatched = (ops.unsqueeze(input, 0), True) if input.ndim == 4 else (input, False)
    _check_channels(x, weight, bias, groups, False)
    pads = _conv3d_pads(padding, stride, dilation, weight.shape[2:])
    _check_conv3d(x, weight, pads, stride, dilation)
    _require_float(x, "slow_conv3d")
    x = _depth_padded(x, *pads[0])
    n, out_depth = x.shape[0], (x.shape[2] - dilation[0] * (weight.shape[2] - 1) - 1) // stride[0] + 1
    planes = _depth_taps_as_channels(x, weight.shape[2], stride[0], dilation[0], out_depth, groups)
    kernel = weight.shape[:2] + weight.shape[3:]
    plane_weight = ops.reshape(ops.movedim(weight, 2, 1), (kernel[0], -1) + kernel[2:])
    plane_pads = pads[1] + pads[2]
    out_size = _conv2d_out_size(planes.shape[2:], kernel[2:], stride[1:], plane_pads, dilation[1:])
    out = P.Conv2d.apply(planes, plane_weight, None, stride[1:], plane_pads, dilation[1:], groups, out_size)
    out = ops.movedim(ops.reshape(out, (n, out_depth) + out.shape[1:]), 1, 2)
    if bias is not None:
        out = out + ops.reshape(bias, (-1, 1, 1, 1))
    return ops.squeeze(out, 0) if unbatched else out
