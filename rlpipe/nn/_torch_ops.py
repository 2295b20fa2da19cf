"""The ``torch.*`` forms of the newer nn ops (``torch.conv1d``, ``torch.pixel_shuffle``...): most are
``nn.functional``'s functions under the same name; the few whose ``torch.*`` form takes other arguments
(``instance_norm``'s order, ``grid_sampler``'s integer modes) or returns more (``adaptive_max_pool1d``'s
indices) are adapted here."""
from . import _functional_conv as _conv
from . import _functional_grid as _grid
from . import _functional_norm as _norm
from ._functional_conv import (conv1d, conv2d, conv_transpose1d, conv_transpose2d, max_pool1d,  # noqa: F401
                               max_pool1d_with_indices, max_pool2d, avg_pool1d, adaptive_avg_pool1d)
from ._functional_conv3d import conv3d, max_pool3d  # noqa: F401
from ._functional_losses import pairwise_distance, pdist  # noqa: F401
from ._functional_norm import rms_norm, alpha_dropout, feature_alpha_dropout  # noqa: F401
from ._functional_resample import pixel_shuffle, pixel_unshuffle, channel_shuffle, native_channel_shuffle  # noqa: F401

__all__ = """conv1d conv2d conv_transpose1d conv_transpose2d max_pool1d max_pool1d_with_indices max_pool2d avg_pool1d
adaptive_avg_pool1d adaptive_max_pool1d pairwise_distance pdist rms_norm alpha_dropout feature_alpha_dropout
pixel_shuffle pixel_unshuffle channel_shuffle native_channel_shuffle group_norm instance_norm grid_sampler
affine_grid_generator conv3d max_pool3d""".split()


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

