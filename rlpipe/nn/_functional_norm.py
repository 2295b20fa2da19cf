"""``nn.functional``'s group, instance and RMS normalization and the channel-wise and alpha dropouts."""
import builtins
import warnings

from .. import _dtypes
from .. import primitives as P
from .. import primitives as ops
from ..primitives import _require_float
from .._creation import zeros
from ..autograd import no_grad
from ..random import rand
from ._functional_base import _maybe_inplace

__all__ = """group_norm instance_norm rms_norm local_response_norm dropout1d dropout2d alpha_dropout
feature_alpha_dropout""".split()


def _affine(x, weight, bias):
    """x * weight + bias with weight and bias [C] broadcast over dim 1."""
    shape = (x.shape[1],) + (1,) * (x.ndim - 2)
    if weight is not None:
        x = x * ops.reshape(weight, shape)
    if bias is not None:
        x = x + ops.reshape(bias, shape)
    return x


def _normalize_with(input, mean, var, weight, bias, eps):
    """(input - mean) / sqrt(var + eps), then the affine, with per-channel statistics [C] (eval mode)."""
    if mean is None or var is None:
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    shape = (input.shape[1],) + (1,) * (input.ndim - 2)
    scale = ops.rsqrt(ops.reshape(var.to(input.dtype), shape) + eps)
    return _affine((input - ops.reshape(mean.to(input.dtype), shape)) * scale, weight, bias)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes each of ``num_groups`` groups of channels of each sample (over the group's channels and
    every spatial position), then scales and shifts each channel by ``weight`` and ``bias``."""
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, "
                               f"but got {name} of shape {list(t.shape)} and input of shape {list(input.shape)}")
    _require_float(input, "GroupNormKernelImpl")
    # [N, G, C / G, positions]: the statistics over the last two dims, weight and bias per (group, channel)
    grouped = ops.reshape(input, (n, num_groups, c // num_groups, -1))
    out = P.Normalize.apply(grouped, weight, bias, (2, 3), (num_groups, c // num_groups, 1), float(eps))[0]
    return ops.reshape(out, input.shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalizes each channel of each sample over its spatial positions (with ``use_input_stats``, updating
    the running statistics, averaged over the batch, with ``momentum``), or with the running statistics."""
    if use_input_stats and builtins.all(s == 1 for s in input.shape[2:]):
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
    n, c = input.shape[:2]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {n * c} elements not {n * t.numel()}")
    if not use_input_stats:
        return _normalize_with(input, running_mean, running_var, weight, bias, eps)
    _require_float(input, "batch_norm")
    axes = tuple(range(2, input.ndim))
    out, mean, var = P.Normalize.apply(input, weight, bias, axes, (c,) + (1,) * len(axes), float(eps))
    count = input.numel() // (n * c) if n * c else 0
    with no_grad():
        if running_mean is not None:
            batch_mean = ops.mean(ops.reshape(mean, (n, c)), 0)
            running_mean.mul_(1 - momentum).add_(batch_mean.to(running_mean.dtype) * momentum)
        if running_var is not None:
            unbiased = ops.mean(ops.reshape(var, (n, c)), 0) * (count / builtins.max(count - 1, 1))
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
    return out


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the trailing ``normalized_shape`` dims, times ``weight``; ``eps``
    defaults to the machine epsilon of the input's dtype."""
    if isinstance(normalized_shape, builtins.int):
        raise TypeError("rms_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not int")
    shape = tuple(normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*{', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight.shape)} and normalized_shape = {list(shape)}")
    _require_float(input, "rms_norm")
    if eps is None:
        eps = _dtypes.finfo(input.dtype).eps
    dims = tuple(range(input.ndim - k, input.ndim))
    out = input * ops.rsqrt(ops.mean(input * input, dims, keepdim=True) + eps)
    return out if weight is None else out * weight


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of x^2 over ``size`` neighbouring channels)^beta (AlexNet's normalization);
    the window runs over dim 1, zero-padded by size // 2 before and (size - 1) // 2 after."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {input.ndim} "
                         "dimensions)")
    if input.numel() == 0:
        return input
    squares = ops.reshape(input * input, input.shape[:2] + (-1,))
    padded = P.Pad.apply(squares, ((size // 2, (size - 1) // 2), (0, 0)), "constant", 0)
    window = builtins.sum(ops.narrow(padded, 1, i, input.shape[1]) for i in range(size))
    div = ops.pow(ops.reshape(window, input.shape) * (alpha / size) + k, beta)
    return input / div


# ---- dropout -------------------------------------------------------------------------------------

def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(input, shape, p):
    """1 / (1 - p) with probability 1 - p, else 0, drawn in ``shape`` (0 everywhere when p is 1)."""
    if p == 1:
        return zeros(shape, dtype=input.dtype, device=input.device)
    return (rand(shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype) * (1.0 / (1.0 - p))


def _channel_dropout(input, p, training, inplace, batched=True):
    """Zeroes whole channels (dim 1 of a batched input, dim 0 of an unbatched one) with probability p."""
    _check_p(p)
    if not training or p == 0 or input.numel() == 0:
        return input
    lead = 2 if batched else 1
    with no_grad():
        mask = _keep_mask(input, input.shape[:lead] + (1,) * (input.ndim - lead), p)
    return _maybe_inplace(input, inplace, lambda x: x * mask)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes each channel of an [N, C, L] (or [C, L]) input with probability ``p`` and scales the rest by
    1 / (1 - p), in training."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _channel_dropout(input, p, training, inplace, input.ndim == 3)


def _warn_rank(input, spatial):
    """torch's deprecation warning for an input to dropout2d/dropout3d of another rank."""
    name = f"dropout{spatial}d"
    warnings.warn(f"{name}: Received a {input.ndim}-D input to {name}, which is deprecated and will result in an "
                  "error in a future release. To retain the behavior and silence this warning, please use dropout "
                  f"instead. Note that {name} exists to provide channel-wise dropout on inputs with {spatial} spatial "
                  f"dimensions, a channel dimension, and an optional batch dimension (i.e. {spatial + 1}D or "
                  f"{spatial + 2}D inputs).", stacklevel=3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes each channel of an [N, C, H, W] (or [C, H, W]) input with probability ``p`` and scales the
    rest by 1 / (1 - p), in training. A 3-D input is taken as [N, C, L], with torch's warning."""
    _check_p(p)
    if input.ndim not in (3, 4):
        _warn_rank(input, 2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", stacklevel=2)
    return _channel_dropout(input, p, training, inplace)



def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes each channel of an [N, C, D, H, W] (or [C, D, H, W]) input with probability ``p`` and scales
    the rest by 1 / (1 - p), in training. Other ranks warn, as in torch, and count as unbatched."""
    _check_p(p)
    if input.ndim not in (4, 5):
        _warn_rank(input, 3)
    return _channel_dropout(input, p, training, inplace, input.ndim == 5)

_SELU_NEG_SATURATION = 1.7580993408473766  # selu's scale times alpha: selu tends to -this for x -> -inf


def _alpha_dropout(input, p, training, inplace, mask_shape):
    _check_p(p)
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return _maybe_inplace(input, inplace, lambda x: x * 0.0)
    alpha = _SELU_NEG_SATURATION
    a = 1.0 / ((alpha * alpha * p + 1) * (1 - p)) ** 0.5
    with no_grad():
        keep = (rand(mask_shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype)
        shift = (keep - 1) * (alpha * a) + alpha * a * p
        scale = keep * a
    return _maybe_inplace(input, inplace, lambda x: x * scale + shift)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped elements are set to selu's negative saturation value and the result
    is scaled and shifted (by a and b from p) so that it keeps zero mean and unit variance."""
    return _alpha_dropout(input, p, training, inplace, input.shape)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """``alpha_dropout`` that drops whole channels (dim 1) at once."""
    return _alpha_dropout(input, p, training, inplace, input.shape[:2] + (1,) * (input.ndim - 2))
