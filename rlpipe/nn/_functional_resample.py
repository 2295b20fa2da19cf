"""``nn.functional``'s resampling: ``interpolate`` (nearest, nearest-exact, linear / bilinear / trilinear,
bicubic, area) and ``pixel_shuffle`` / ``pixel_unshuffle``.

``interpolate`` works one spatial dim at a time: nearest modes pick one source index per output
position (``index_select``), the linear modes blend two and bicubic four (``index_select`` per tap and a
weighted sum), so the gradients are those ops'. The source indices and weights follow torch's CPU kernels, in the
arithmetic torch does them in (float32 for float32 and narrower inputs).
"""
import builtins
import math
import operator
import struct

from .. import _dtypes
from .. import primitives as ops
from .._creation import tensor
from ..primitives import _require_float
from ._functional_conv import _adaptive_mean

__all__ = """interpolate upsample upsample_nearest upsample_bilinear pixel_shuffle pixel_unshuffle channel_shuffle
native_channel_shuffle""".split()

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_LINEAR_RANK = {"linear": 3, "bilinear": 4, "trilinear": 5}


def _to_float32(value):
    """``value`` rounded to the nearest float32, as a Python float."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _float64(value):
    return value


def _arithmetic(dtype):
    """The rounding after each operation that torch's kernels do for ``dtype`` (their opmath type)."""
    return _float64 if dtype is _dtypes.float64 else _to_float32


def _scale(n_in, n_out, scale_factor, rnd):
    """torch's compute_scales_value: 1 / scale_factor when given, else n_in / n_out."""
    return rnd(1.0 / scale_factor) if scale_factor is not None and scale_factor > 0 else rnd(n_in / n_out)


def _nearest_indices(n_in, n_out, scale_factor, exact):
    rnd = _to_float32
    if not exact and n_out == n_in:
        return list(range(n_out))
    if not exact and n_out == 2 * n_in:
        return [i >> 1 for i in range(n_out)]
    scale = _scale(n_in, n_out, scale_factor, rnd)
    offset = 0.5 if exact else 0.0
    return [builtins.min(math.floor(rnd((i + offset) * scale)), n_in - 1) for i in range(n_out)]


def _source_scale(n_in, n_out, scale_factor, align_corners, rnd):
    """torch's area_pixel_compute_scale: the step between source positions of consecutive outputs."""
    if align_corners:
        return rnd((n_in - 1) / (n_out - 1)) if n_out > 1 else 0.0
    return _scale(n_in, n_out, scale_factor, rnd)


def _linear_taps(n_in, n_out, scale, align_corners, rnd):
    """The two (indices, weights) taps of torch's linear interpolation along one dim."""
    first, second, weights = [], [], []
    for i in range(n_out):
        src = rnd(scale * i) if align_corners else builtins.max(rnd(rnd(scale * rnd(i + 0.5)) - 0.5), 0.0)
        i0 = builtins.int(src)
        first.append(i0)
        second.append(i0 + 1 if i0 < n_in - 1 else i0)
        weights.append(builtins.min(builtins.max(rnd(src - i0), 0.0), 1.0))
    return [(first, [rnd(1.0 - w) for w in weights]), (second, weights)]


def _keys(x, a):
    """Keys' cubic convolution kernel with parameter ``a`` at x."""
    x = builtins.abs(x)
    if x < 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0


def _cubic_weights(t):
    """The four weights of Keys' cubic convolution (a = -0.75, as torch) at fractional offset t."""
    return tuple(_keys(x, -0.75) for x in (t + 1, t, 1 - t, 2 - t))


def _cubic_taps(n_in, n_out, scale, align_corners, rnd):
    """The four (indices, weights) taps of torch's bicubic interpolation along one dim; taps past an edge
    read the edge."""
    taps = [([], []) for _ in range(4)]
    for i in range(n_out):
        src = rnd(scale * i) if align_corners else rnd(rnd(scale * rnd(i + 0.5)) - 0.5)
        i0 = math.floor(src)
        for k, weight in enumerate(_cubic_weights(rnd(src - i0))):
            taps[k][0].append(builtins.min(builtins.max(i0 - 1 + k, 0), n_in - 1))
            taps[k][1].append(rnd(weight))
    return taps


def _triangle(x):
    return builtins.max(0.0, 1.0 - builtins.abs(x))


def antialias_rows(n_in, n_out, scale, mode):
    """Torch's (and Pillow's) antialiased resampling along one dim, one (first input, weights) per output:
    each output averages the inputs under the filter (triangle for bilinear, Keys' cubic with a = -0.5 for
    bicubic) stretched by the downscaling factor ``scale``, its weights normalised to sum 1."""
    stretch = builtins.max(scale, 1.0)
    support = (1.0 if mode == "bilinear" else 2.0) * stretch
    rows = []
    for i in range(n_out):
        center = scale * (i + 0.5)
        first = builtins.max(builtins.int(center - support + 0.5), 0)
        last = builtins.min(builtins.int(center + support + 0.5), n_in)
        xs = [(j - center + 0.5) / stretch for j in range(first, last)]
        weights = [_triangle(x) if mode == "bilinear" else _keys(x, -0.5) for x in xs]
        total = builtins.sum(weights)
        rows.append((first, [w / total for w in weights] if total else weights))
    return rows


def _antialias_taps(n_in, n_out, scale, mode):
    """The taps of ``antialias_rows``, one (indices, weights) per tap position; outputs with fewer inputs than
    the widest get zero weights."""
    rows = antialias_rows(n_in, n_out, scale, mode)
    width = builtins.max(len(w) for _, w in rows)
    return [([builtins.min(first + k, n_in - 1) for first, _ in rows], [w[k] if k < len(w) else 0.0 for _, w in rows])
            for k in range(width)]


def _along(x, dim, values):
    """``values`` as a tensor on x's device shaped to broadcast along ``dim``."""
    shape = [1] * x.ndim
    shape[dim] = len(values)
    return ops.reshape(tensor(values, dtype=x.dtype, device=x.device), shape)


def _resample_dim(x, dim, n_out, scale_factor, mode, align_corners, antialias=False):
    n_in = x.shape[dim]
    if mode in ("nearest", "nearest-exact"):
        index = _nearest_indices(n_in, n_out, scale_factor, mode == "nearest-exact")
        return ops.index_select(x, dim, tensor(index, dtype=_dtypes.int64, device=x.device))
    if mode == "area":
        return _adaptive_mean(x, dim - x.ndim, n_out)  # it takes a dim counted from the end
    rnd = _arithmetic(x.dtype)
    scale = _source_scale(n_in, n_out, scale_factor, align_corners, rnd)
    if antialias:
        taps = _antialias_taps(n_in, n_out, scale, mode)
    else:
        taps = (_cubic_taps if mode == "bicubic" else _linear_taps)(n_in, n_out, scale, align_corners, rnd)
    out = 0
    for index, weights in taps:
        picked = ops.index_select(x, dim, tensor(index, dtype=_dtypes.int64, device=x.device))
        out = out + picked * _along(x, dim, weights)
    return out


def _output_plan(input, size, scale_factor, mode, recompute_scale_factor):
    """(output sizes, the scale factors the kernels use or Nones) for each spatial dim, as torch computes them."""
    dims = input.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        if isinstance(size, (list, tuple)):
            if len(size) != dims:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {list(input.shape[2:])} and output size of {size}. "
                                 "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            try:
                sizes = [operator.index(s) for s in size]
            except TypeError:
                raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, "
                                f"int], but got size with types {[type(s) for s in size]}") from None
        else:
            sizes = [operator.index(size)] * dims
        return sizes, [None] * dims
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dims:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(input.shape[2:])} and scale_factor of shape "
                             f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             "scale_factor in (s1, s2, ...,sK) format.")
        factors = [float(f) for f in scale_factor]
    else:
        factors = [float(scale_factor)] * dims
    sizes = [builtins.int(n * f) for n, f in zip(input.shape[2:], factors)]
    keep = not recompute_scale_factor and mode != "area"
    return sizes, factors if keep else [None] * dims


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resizes the spatial dims of [N, C, *spatial] input to ``size``, or by ``scale_factor``, with torch's
    modes 'nearest', 'nearest-exact', 'linear' (3-D), 'bilinear' and 'bicubic' (4-D), 'trilinear' (5-D) and
    'area' (adaptive average pooling); the linear and cubic modes take ``align_corners`` (default False),
    and bilinear and bicubic ``antialias=True`` (a filter as wide as the downscaling, as Pillow's)."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: linear | "
                             "bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    sizes, factors = _output_plan(input, size, scale_factor, mode, recompute_scale_factor)
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                         "4-D tensor as input")
    if mode in _LINEAR_RANK and input.ndim in (3, 4, 5) and input.ndim != _LINEAR_RANK[mode]:
        needed = _LINEAR_RANK[mode]
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {needed}D input")
    bicubic = mode == "bicubic" and input.ndim == 4
    if not bicubic and (input.ndim not in (3, 4, 5) or mode not in ("nearest", "nearest-exact", "area",
                                                                    *_LINEAR_RANK)):
        if mode == "lanczos" and input.ndim == 4:
            raise NotImplementedError("interpolate: mode 'lanczos' is not implemented in rlpipe")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: {_MODES} (got {mode})")
    if builtins.min(sizes) <= 0 or builtins.min(input.shape[2:]) <= 0:
        shown = ", ".join(f"{n}: {s}" for n, s in zip("DHW"[3 - len(sizes):], input.shape[2:]))
        wanted = ", ".join(f"{n}: {s}" for n, s in zip("DHW"[3 - len(sizes):], sizes))
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({shown}) output "
                           f"({wanted})")
    if mode in _LINEAR_RANK or mode in ("area", "bicubic"):
        _require_float(input, f"upsample_{mode}")
    out = input
    for dim, (n_out, factor) in enumerate(zip(sizes, factors), start=2):
        out = _resample_dim(out, dim, n_out, factor, mode, align_corners, antialias)
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """The deprecated name of ``interpolate``."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """``interpolate`` in 'nearest' mode (deprecated in torch)."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """``interpolate`` in 'bilinear' mode with ``align_corners=True`` (deprecated in torch)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _shuffle_args(name, input, factor, factor_name):
    """torch's rank and factor checks of pixel_(un)shuffle; the batch shape and the last three sizes."""
    if input.ndim < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input with {input.ndim} "
                           "dimension(s)")
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {factor_name}, but got {factor}")
    *batch, c, h, w = input.shape
    return batch, c, h, w


def pixel_shuffle(input, upscale_factor):
    """[*, C * r^2, H, W] -> [*, C, H * r, W * r]: each group of r^2 channels becomes an r x r block."""
    r = upscale_factor
    batch, c, h, w = _shuffle_args("pixel_shuffle", input, r, "upscale_factor")
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    k = len(batch)
    x = ops.reshape(input, (*batch, c // (r * r), r, r, h, w))
    x = ops.permute(x, (*range(k), k, k + 3, k + 1, k + 4, k + 2))
    return ops.reshape(x, (*batch, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """The inverse of ``pixel_shuffle``: [*, C, H * r, W * r] -> [*, C * r^2, H, W]."""
    r = downscale_factor
    batch, c, h, w = _shuffle_args("pixel_unshuffle", input, r, "downscale_factor")
    for name, d, n in (("height", -2, h), ("width", -1, w)):
        if n % r:
            raise RuntimeError(f"pixel_unshuffle expects {name} to be divisible by downscale_factor, but "
                               f"input.size({d})={n} is not divisible by {r}")
    k = len(batch)
    x = ops.reshape(input, (*batch, c, h // r, r, w // r, r))
    x = ops.permute(x, (*range(k), k, k + 2, k + 4, k + 1, k + 3))
    return ops.reshape(x, (*batch, c * r * r, h // r, w // r))


def channel_shuffle(input, groups):
    """Interleaves ``groups`` groups of channels (dim 1): [N, g * k, *] seen as [N, g, k, *] becomes [N, k, g, *]
    (ShuffleNet's shuffle)."""
    if input.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"{list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c = input.shape[:2]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    grouped = ops.reshape(input, (n, groups, c // groups) + tuple(input.shape[2:]))
    return ops.reshape(ops.transpose(grouped, 1, 2), input.shape)


native_channel_shuffle = channel_shuffle
