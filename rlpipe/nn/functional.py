"""``rlpipe.nn.functional``: torch.nn.functional's activations, convolution, pooling, padding,
normalization, dropout, embedding and losses, with torch's argument names, defaults and errors.

Everything here is built from rlpipe's tensor ops and the Functions of ``rlpipe.primitives``;
no array math happens in this module.
"""
import builtins
import math
import warnings

from .. import _dtypes
from .. import primitives as P
from .. import primitives as ops
from ..primitives import linear, one_hot, sigmoid, tanh, softplus, gelu  # noqa: F401 - re-exported as in torch
from ..primitives import _LEGACY_TYPE_NAMES, _require_float
from .._creation import zeros
from .._dispatch import handle_torch_function, has_torch_function, torch_function
from .._tensor import Tensor
from ..autograd import no_grad
from ..random import rand, rand_like
from ._functional_attention import (scaled_dot_product_attention, multi_head_attention_forward,  # noqa: F401
                                    _canonical_mask, _none_or_dtype, _mha_shape_check, _in_projection_packed,
                                    _in_projection)
from ._functional_base import _maybe_inplace, _reduction, _reduce
from ._functional_conv import (conv1d, conv2d, conv_transpose1d, conv_transpose2d, unfold, fold, max_pool1d,  # noqa: F401
                               max_pool2d, max_pool2d_with_indices, avg_pool1d, avg_pool2d, adaptive_avg_pool1d,
                               adaptive_avg_pool2d, adaptive_max_pool1d, adaptive_max_pool2d, max_pool1d_with_indices,
                               adaptive_max_pool1d_with_indices, adaptive_max_pool2d_with_indices, lp_pool1d, lp_pool2d,
                               max_unpool1d, max_unpool2d)
from ._functional_norm import (group_norm, instance_norm, rms_norm, dropout1d, dropout2d, dropout3d, alpha_dropout,  # noqa: F401
                               feature_alpha_dropout, local_response_norm)
from ._functional_losses import (kl_div, gaussian_nll_loss, poisson_nll_loss, pairwise_distance,  # noqa: F401
                                 margin_ranking_loss, soft_margin_loss, hinge_embedding_loss, cosine_embedding_loss,
                                 triplet_margin_loss, multilabel_soft_margin_loss, triplet_margin_with_distance_loss,
                                 multi_margin_loss, multilabel_margin_loss, pdist)
from ._functional_resample import (interpolate, upsample, upsample_nearest, upsample_bilinear,  # noqa: F401
                                   pixel_shuffle, pixel_unshuffle, channel_shuffle, native_channel_shuffle)
from ._functional_grid import affine_grid, grid_sample  # noqa: F401
from ._functional_conv3d import (conv3d, max_pool3d, max_pool3d_with_indices, avg_pool3d, adaptive_avg_pool3d,  # noqa: F401
                                 adaptive_max_pool3d, adaptive_max_pool3d_with_indices)

__all__ = """linear bilinear relu relu_ relu6 leaky_relu leaky_relu_ rrelu rrelu_ elu elu_ selu celu silu mish gelu
sigmoid tanh softplus logsigmoid hardtanh hardtanh_ hardsigmoid hardswish hardshrink softshrink softsign tanhshrink
threshold threshold_ prelu glu softmax log_softmax softmin normalize gumbel_softmax cosine_similarity
dropout layer_norm batch_norm embedding conv2d max_pool2d max_pool2d_with_indices avg_pool2d adaptive_avg_pool2d
pad one_hot
mse_loss l1_loss smooth_l1_loss huber_loss cross_entropy nll_loss binary_cross_entropy
binary_cross_entropy_with_logits
scaled_dot_product_attention multi_head_attention_forward
conv1d conv_transpose1d conv_transpose2d unfold fold max_pool1d avg_pool1d adaptive_avg_pool1d adaptive_max_pool1d
adaptive_max_pool2d group_norm instance_norm rms_norm dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout
kl_div gaussian_nll_loss poisson_nll_loss pairwise_distance margin_ranking_loss soft_margin_loss hinge_embedding_loss
cosine_embedding_loss triplet_margin_loss multilabel_soft_margin_loss interpolate upsample upsample_nearest
upsample_bilinear pixel_shuffle pixel_unshuffle max_pool1d_with_indices adaptive_max_pool1d_with_indices
adaptive_max_pool2d_with_indices affine_grid grid_sample lp_pool1d lp_pool2d max_unpool1d max_unpool2d
local_response_norm triplet_margin_with_distance_loss multi_margin_loss multilabel_margin_loss pdist channel_shuffle
native_channel_shuffle conv3d max_pool3d max_pool3d_with_indices avg_pool3d adaptive_avg_pool3d adaptive_max_pool3d
adaptive_max_pool3d_with_indices""".split()


def _type_name(t):
    return _LEGACY_TYPE_NAMES[t.dtype.name]


# ---- activations ---------------------------------------------------------------------------------

def relu(input, inplace=False):
    """``max(input, 0)``; with ``inplace=True`` written into ``input``."""
    return _maybe_inplace(input, inplace, ops.relu)


def relu_(input):
    """``relu`` in place."""
    return relu(input, inplace=True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``input`` where positive, ``negative_slope * input`` elsewhere; optionally in place."""
    return _maybe_inplace(input, inplace, lambda x: ops.leaky_relu(x, negative_slope))


def leaky_relu_(input, negative_slope=0.01):
    """``leaky_relu`` in place."""
    return leaky_relu(input, negative_slope, inplace=True)


@torch_function("input")
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clipped to [min_val, max_val]; no gradient at or beyond the bounds."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace(input, inplace, lambda x: P.Hardtanh.apply(x, min_val, max_val))


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """``hardtanh`` in place."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """``min(max(input, 0), 6)`` (``hardtanh`` over [0, 6])."""
    return hardtanh(input, 0.0, 6.0, inplace)


def _elu(input, inplace, alpha, scale, input_scale, name):
    _require_float(input, name)
    return _maybe_inplace(input, inplace, lambda x: P.Elu.apply(x, float(alpha), float(scale), float(input_scale)))


@torch_function("input")
def elu(input, alpha=1.0, inplace=False):
    """``input`` where positive, ``alpha * (exp(input) - 1)`` elsewhere (float input only)."""
    return _elu(input, inplace, alpha, 1.0, 1.0, "elu_cpu")


def elu_(input, alpha=1.0):
    """``elu`` in place."""
    return elu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@torch_function("input")
def selu(input, inplace=False):
    """``scale * elu(input, alpha)`` with the self-normalizing constants alpha ~ 1.6733 and scale ~ 1.0507."""
    return _elu(input, inplace, _SELU_ALPHA, _SELU_SCALE, 1.0, "elu_cpu")


@torch_function("input")
def celu(input, alpha=1.0, inplace=False):
    """``input`` where positive, ``alpha * (exp(input / alpha) - 1)`` elsewhere; RuntimeError for alpha 0."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _elu(input, inplace, alpha, 1.0, 1.0 / alpha, "elu_cpu")


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value."""
    return _maybe_inplace(input, inplace, lambda x: P.Threshold.apply(x, threshold, value))


_threshold = threshold


def threshold_(input, threshold, value):
    """``threshold`` in place."""
    return _threshold(input, threshold, value, inplace=True)


@torch_function("input")
def silu(input, inplace=False):
    """``input * sigmoid(input)`` (also called swish)."""
    _require_float(input, "silu_cpu")
    return _maybe_inplace(input, inplace, P.Silu.apply)


@torch_function("input")
def mish(input, inplace=False):
    """``input * tanh(softplus(input))``."""
    _require_float(input, "mish_cpu")
    return _maybe_inplace(input, inplace, P.Mish.apply)


@torch_function("input")
def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6."""
    return _maybe_inplace(input, inplace, P.Hardsigmoid.apply)


@torch_function("input")
def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6."""
    return _maybe_inplace(input, inplace, P.Hardswish.apply)


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0."""
    return ops.where(ops.abs(input) > lambd, input, 0.0)


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return ops.where(input > lambd, input - lambd, ops.where(input < -lambd, input + lambd, 0.0))


def softsign(input):
    """``input / (1 + |input|)``."""
    return input / (ops.abs(input) + 1)


def tanhshrink(input):
    """``input - tanh(input)``."""
    return input - ops.tanh(input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) per element in training, and is
    (lower + upper) / 2 otherwise."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    with no_grad():
        slopes = rand(input.shape, dtype=input.dtype, device=input.device) * (upper - lower) + lower
        noise = ops.where(input > 0, 1.0, slopes)
    return _maybe_inplace(input, inplace, lambda x: x * noise)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """``rrelu`` in place."""
    return rrelu(input, lower, upper, training, inplace=True)


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of ``input`` along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = input._dim(dim)
    if input.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {input.shape[d]}")
    a, b = ops.chunk(input, 2, d)
    return a * ops.sigmoid(b)


def logsigmoid(input):
    """log(sigmoid(x)) = -softplus(-x), computed without overflow."""
    return ops.neg(ops.softplus(ops.neg(input), 1.0, math.inf))


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), with one weight or one per channel (dim 1)."""
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() != 1:
        if input.ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        if weight.numel() != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {channels}.")
        weight = ops.reshape(weight, (channels,) + (1,) * (input.ndim - 2))
    else:
        weight = ops.reshape(weight, ())
    return ops.where(input > 0, input, weight * input)


def _softmax_dim(name, ndim, stacklevel):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=stacklevel + 1)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``exp(x) / sum(exp(x))`` along ``dim``; without ``dim``, torch's legacy choice (dim 0 for 0-, 1- and 3-d input,
    else 1) with a warning."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return ops.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``log(softmax(x))`` along ``dim``, computed stably; ``dim`` defaults as in ``softmax``."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return ops.log_softmax(input, dim, dtype)


def _zeros_like(t):
    return zeros(t.shape, dtype=t.dtype, device=t.device)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """A differentiable sample of a categorical over ``logits``: ``softmax((logits + g) / tau)`` with
    Gumbel noise ``g``. With ``hard=True`` the result is one-hot at the soft sample's largest entry,
    and its gradient is the soft sample's (the straight-through estimator). ``eps`` is unused, as in torch."""
    gumbels = ops.neg(ops.log(_zeros_like(logits).exponential_()))
    soft = ops.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return soft
    index = ops.argmax(soft, dim, keepdim=True)
    one_hot_sample = ops.scatter(_zeros_like(logits), dim, index, 1.0)
    return one_hot_sample - soft.detach() + soft


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """The cosine of the angle between ``x1`` and ``x2`` (broadcast together) along ``dim``: each is
    divided by its 2-norm (at least ``eps``), then their products are summed."""
    x1, x2 = ops.broadcast_tensors(x1, x2)
    return ops.sum(normalize(x1, 2.0, dim, eps) * normalize(x2, 2.0, dim, eps), dim)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x)`` along ``dim``: the smallest values get the largest weights."""
    if dim is None:
        dim = _softmax_dim("softmin", input.ndim, _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    return ops.softmax(ops.neg(input), dim)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p along dim, eps)."""
    denom = ops.clamp_min(ops.norm(input, p, dim, keepdim=True), eps)
    result = input / ops.expand_as(denom, input)
    return result if out is None else out.copy_(result)


# ---- linear layers, dropout, embedding -------------------------------------------------------------

def bilinear(input1, input2, weight, bias=None):
    """y = x1^T A x2 + b for each output feature: weight [out, in1, in2]."""
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    for d in range(input1.ndim - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {input1.shape[d]} and "
                               f"{input2.shape[d]}")
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-dimensional, got {weight.ndim} dimensions")
    for k, x in ((1, input1), (2, input2)):
        if x.shape[-1] != weight.shape[k]:
            raise RuntimeError(f"bilinear(): input{k} size does not match weight size: got {x.shape[-1]} but "
                               f"expected {weight.shape[k]}")
    if bias is not None and bias.shape[0] != weight.shape[0]:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {bias.shape[0]} but expected "
                           f"{weight.shape[0]}")
    out = ops.einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p and scales the rest by 1 / (1 - p) (training only)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        keep = 0.0
    else:
        # the mask laid out as the input is (channels_last, say), so the output keeps that layout, as in torch
        keep = (rand_like(input, dtype=input.dtype if input.is_floating_point() else _dtypes.get_default_dtype())
                >= p).to(input.dtype) * (1.0 / (1.0 - p))
    return _maybe_inplace(input, inplace, lambda x: x * keep)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` [num_embeddings, dim] picked by the integer ``input``."""
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if input.dtype not in (_dtypes.int64, _dtypes.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {input.type()} instead (while checking arguments "
                           "for embedding)")
    if sparse:
        raise RuntimeError("embedding(sparse=True): rlpipe has no sparse tensors")
    rows = weight.shape[0]
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < rows, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -rows, "Padding_idx must be within num_embeddings"
            padding_idx = rows + padding_idx
    if input.numel() and (builtins.bool((input < 0).any()) or builtins.bool((input >= rows).any())):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    return P.Embedding.apply(weight, input, padding_idx, builtins.bool(scale_grad_by_freq))


def _renorm_rows(weight, indices, max_norm, norm_type):
    """Rescales, in place, the looked-up rows whose norm exceeds max_norm (torch's embedding_renorm_)."""
    with no_grad():
        used = zeros(weight.shape[0], dtype=_dtypes.bool, device=weight.device)
        used[indices.reshape(-1)] = True
        norms = ops.norm(weight, norm_type, 1)
        scale = ops.where(used & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
        weight.mul_(ops.unsqueeze(scale.to(weight.dtype), 1))


# ---- normalization -------------------------------------------------------------------------------

@torch_function("input", "weight", "bias")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalizes over the trailing ``normalized_shape`` dims, then scales and shifts elementwise."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    n = len(shape)
    if n == 0 or input.ndim < n or tuple(input.shape[input.ndim - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*{''.join(f', {s}' for s in shape)}], but got input of size{list(input.shape)}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                               f"{list(p.shape)} and normalized_shape = {list(shape)}")
    _require_float(input, "LayerNormKernelImpl")
    axes = tuple(range(input.ndim - n, input.ndim))
    return P.Normalize.apply(input, weight, bias, axes, shape, float(eps))[0]


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalizes each channel (dim 1) with the batch's statistics (training, updating the running
    ones with ``momentum``) or with the running statistics (evaluation)."""
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input with at least 2 dimensions (N, C, ...), got {input.ndim}D")
    channels = input.shape[1]
    if training:
        per_channel = input.numel() // channels if channels else 0
        if per_channel == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.shape}")
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
    _require_float(input, "batch_norm")
    param_shape = (channels,) + (1,) * (input.ndim - 2)
    if training:
        axes = (0,) + tuple(range(2, input.ndim))
        out, mean, var = P.Normalize.apply(input, weight, bias, axes, param_shape, float(eps))
        if running_mean is not None or running_var is not None:
            count = input.numel() // channels
            with no_grad():
                if running_mean is not None:
                    running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype) * momentum)
                if running_var is not None:
                    unbiased = var * (count / builtins.max(count - 1, 1))
                    running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
        return out
    if running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    scale = ops.rsqrt(running_var.to(input.dtype) + eps)
    if weight is not None:
        scale = scale * weight
    shift = ops.neg(running_mean.to(input.dtype)) * scale
    if bias is not None:
        shift = shift + bias
    return input * ops.reshape(scale, param_shape) + ops.reshape(shift, param_shape)


# ---- padding -------------------------------------------------------------------------------------

def pad(input, pad, mode="constant", value=None):
    """Pads the last len(pad) // 2 dims; ``pad`` lists (before, after) from the last dim backwards,
    as torch does. Modes: 'constant' (with ``value``), 'reflect', 'replicate', 'circular'."""
    pad = [builtins.int(p) for p in pad]
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.ndim}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    k = len(pad) // 2
    pairs = tuple((pad[2 * i], pad[2 * i + 1]) for i in reversed(range(k)))  # first padded dim first
    first = input.ndim - k
    if mode == "constant":
        for d, (lo, hi) in enumerate(pairs, start=first):
            if input.shape[d] + lo + hi < 0:
                raise RuntimeError(f"The input size {input.shape[d]}, plus negative padding {lo} and {hi} resulted in "
                                   f"a negative output size, which is invalid. Check dimension {d} of your input.")
        return P.Pad.apply(input, pairs, mode, 0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if (k, input.ndim) not in ((1, 2), (1, 3), (2, 3), (2, 4), (3, 4), (3, 5)):
        raise NotImplementedError("Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now")
    for i, (d, (lo, hi)) in enumerate(reversed(list(enumerate(pairs, start=first)))):
        size = input.shape[d]
        if mode == "reflect" and (lo >= size or hi >= size):
            raise RuntimeError(f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding input "
                               f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of input "
                               f"{list(input.shape)}")
        if mode == "replicate" and size == 0:
            raise RuntimeError(f"padding size is expected to be at most input size, but got input of size "
                               f"{list(input.shape)}")
        if mode == "circular" and (lo > size or hi > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
    return P.Pad.apply(input, pairs, mode, None)


# ---- losses --------------------------------------------------------------------------------------

def _warn_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """(input - target)^2, reduced."""
    if (type(input) is not Tensor or type(target) is not Tensor) and has_torch_function(input, target):
        return handle_torch_function(mse_loss, (input, target, size_average, reduce, reduction), {})
    reduction = _reduction(size_average, reduce, reduction)
    _warn_size(input, target)
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """|input - target|, reduced."""
    if (type(input) is not Tensor or type(target) is not Tensor) and has_torch_function(input, target):
        return handle_torch_function(l1_loss, (input, target, size_average, reduce, reduction), {})
    reduction = _reduction(size_average, reduce, reduction)
    _warn_size(input, target)
    return _reduce(ops.abs(input - target), reduction)


def _quadratic_then_linear(diff, knot, slope):
    """slope * 0.5 d^2 / knot where |d| < knot, else slope * (|d| - 0.5 knot): smooth L1 and Huber."""
    d = ops.abs(diff)
    return ops.where(d < knot, (0.5 * slope / knot) * d * d, slope * (d - 0.5 * knot))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (an L1 loss when beta is 0)."""
    if (type(input) is not Tensor or type(target) is not Tensor) and has_torch_function(input, target):
        return handle_torch_function(smooth_l1_loss, (input, target, size_average, reduce, reduction),
                                     {"beta": beta})
    reduction = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _warn_size(input, target)
    if beta == 0:
        return _reduce(ops.abs(input - target), reduction)
    return _reduce(_quadratic_then_linear(input - target, beta, 1.0), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    reduction = _reduction(None, None, reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _warn_size(input, target)
    return _reduce(_quadratic_then_linear(input - target, delta, delta), reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w (t log p + (1 - t) log(1 - p)) for probabilities p; each log is clamped at -100 as torch does."""
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) "
                         "is deprecated. Please ensure they have the same size.")
    if input.numel() and not builtins.bool(((input >= 0) & (input <= 1)).all()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = P.BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = loss * ops.expand(weight, input.shape)
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """binary_cross_entropy(sigmoid(input), target) computed stably from the logits; ``pos_weight``
    weighs the positive term of each class."""
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    softplus_neg = ops.softplus(ops.neg(input), 1.0, math.inf)  # -log(sigmoid(x)), exact for every x
    if pos_weight is not None:
        softplus_neg = (1 + (pos_weight - 1) * target) * softplus_neg
    loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _class_index_loss(input, target, weight, ignore_index, reduction, smoothing, from_logits):
    """nll_loss / cross_entropy with class-index targets: input [C], [N, C] or [N, C, d1, ...]."""
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    if input.ndim != 1 and (target.ndim == 0 or input.shape[0] != target.shape[0]):
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0] if target.ndim else 1}).")
    if target.dtype not in (_dtypes.int64, _dtypes.uint8):
        raise RuntimeError(f"expected scalar type Long but found {_type_name(target)}")
    if input.ndim <= 2 and target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input.ndim == 1 and target.ndim != 0:
        raise RuntimeError(f"size mismatch (got input: {list(input.shape)}, target: {list(target.shape)})")
    if input.ndim > 2 and tuple(target.shape[1:]) != tuple(input.shape[2:]):
        raise RuntimeError(f"Expected target size {[input.shape[0]] + list(input.shape[2:])}, got "
                           f"{list(target.shape)}")
    classes = input.shape[0] if input.ndim == 1 else input.shape[1]
    if weight is not None:
        if weight.ndim != 1 or weight.numel() != classes:
            raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but "
                               f"got weight tensor of shape: {list(weight.shape)}")
        if weight.dtype is not input.dtype:
            raise RuntimeError(f"expected scalar type {_type_name(input)} but found {_type_name(weight)}")
    _require_float(input, "nll_loss_out_frame")
    x = ops.unsqueeze(input, 0) if input.ndim == 1 else input
    t = ops.reshape(target, (1,)) if input.ndim == 1 else target
    loss = P.NllLoss.apply(x, t.to(_dtypes.int64), weight, builtins.int(ignore_index), float(smoothing), reduction,
                            from_logits)
    return ops.reshape(loss, ()) if input.ndim == 1 and reduction == "none" else loss


@torch_function("input", "target")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[n, target[n]] (times the class weight), reduced; ``input`` holds log-probabilities."""
    reduction = _reduction(size_average, reduce, reduction)
    return _class_index_loss(input, target, weight, ignore_index, reduction, 0.0, False)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """log_softmax over dim 1 (dim 0 for an unbatched [C] input) followed by nll_loss, or, when
    ``target`` has input's shape, the cross-entropy against class probabilities."""
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.ndim >= 1 and tuple(target.shape) == tuple(input.shape):
        if not target.is_floating_point():
            raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                               f"{_type_name(target)}")
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        return _class_probability_loss(input, target, weight, reduction, label_smoothing)
    return _class_index_loss(input, target, weight, ignore_index, reduction, label_smoothing, True)


def _class_probability_loss(input, target, weight, reduction, smoothing):
    dim = 0 if input.ndim == 1 else 1
    classes = input.shape[dim]
    if weight is not None and (weight.ndim != 1 or weight.numel() != classes):
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but got "
                           f"weight tensor of shape: {list(weight.shape)}")
    logp = ops.log_softmax(input, dim)
    if smoothing > 0:
        target = target * (1 - smoothing) + smoothing / classes
    terms = logp * target
    if weight is not None:
        terms = terms * ops.reshape(weight, (classes,) + (1,) * (input.ndim - dim - 1))
    if reduction == "none":
        return ops.neg(ops.sum(terms, dim))
    total = ops.neg(ops.sum(terms))
    if reduction == "sum":
        return total
    return total / (input.numel() // classes) if input.numel() else total * math.nan

