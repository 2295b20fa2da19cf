"""The ``torch.*`` forms of the newer nn ops (``torch.conv1d``, ``torch.pixel_shuffle``...): most are
``nn.functional``'s functions under the same name; the few whose ``torch.*`` form takes other arguments
(``instance_norm``'s order, ``grid_sampler``'s integer modes) or returns more (``adaptive_max_pool1d``'s
indices) are adapted here."""
from . import _functional_conv as _conv
from . import _functional_grid as _grid
from . import _functional_norm as _norm
from .. import primitives as _ops
from ._functional_conv import (conv1d, conv2d, conv_transpose1d, conv_transpose2d, max_pool1d,  # noqa: F401
                               max_pool1d_with_indices, max_pool2d, avg_pool1d, adaptive_avg_pool1d)
from ._functional_losses import pairwise_distance, pdist  # noqa: F401
from ._functional_norm import rms_norm, alpha_dropout, feature_alpha_dropout  # noqa: F401
from ._functional_resample import pixel_shuffle, pixel_unshuffle, channel_shuffle, native_channel_shuffle  # noqa: F401

__all__ = """conv1d conv2d conv_transpose1d conv_transpose2d max_pool1d max_pool1d_with_indices max_pool2d avg_pool1d
adaptive_avg_pool1d adaptive_max_pool1d pairwise_distance pdist rms_norm alpha_dropout feature_alpha_dropout
pixel_shuffle pixel_unshuffle channel_shuffle native_channel_shuffle group_norm instance_norm grid_sampler
affine_grid_generator cdist""".split()


def adaptive_max_pool1d(input, output_size):
    """``torch.adaptive_max_pool1d``: the maxima and their positions (``F.adaptive_max_pool1d`` with indices)."""
    return _conv.adaptive_max_pool1d(input, output_size, True)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """``torch.group_norm``: ``F.group_norm`` (``cudnn_enabled`` is ignored)."""
    return _norm.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    """``torch.instance_norm``: ``F.instance_norm`` with torch's lower-level argument order."""
    return _norm.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


_SAMPLE_MODES = ("bilinear", "nearest", "bicubic")
_PADDING_MODES = ("zeros", "border", "reflection")


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """``torch.grid_sampler``: ``F.grid_sample`` with the modes as integers (0 bilinear, 1 nearest, 2 bicubic;
    padding 0 zeros, 1 border, 2 reflection)."""
    return _grid.grid_sample(input, grid, _SAMPLE_MODES[interpolation_mode], _PADDING_MODES[padding_mode],
                             align_corners)


def affine_grid_generator(theta, size, align_corners):
    """``torch.affine_grid_generator``: ``F.affine_grid`` with ``align_corners`` required."""
    return _grid.affine_grid(theta, size, align_corners)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distances between each row of x1 [*, P, M] and each row of x2 [*, R, M]: [*, P, R] (the
    batch dims broadcast). Computed from the differences, whatever ``compute_mode`` asks."""
    if x1.ndim < 2 or x2.ndim < 2:
        short, t = ("X1", x1) if x1.ndim < 2 else ("X2", x2)
        raise RuntimeError(f"cdist only supports at least 2D tensors, {short} got: {t.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    for name, t in (("X1", x1), ("X2", x2)):
        if not t.is_floating_point():
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{_ops._LEGACY_TYPE_NAMES[t.dtype.name]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    differences = _ops.unsqueeze(x1, -2) - _ops.unsqueeze(x2, -3)
    return _ops.norm(differences, p, -1)
