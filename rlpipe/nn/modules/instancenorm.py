"""Instance normalization: ``InstanceNorm1d`` and ``InstanceNorm2d`` normalize each channel of each sample
over its positions; with ``track_running_stats`` they also keep running statistics for eval mode."""
import warnings

from .. import functional as F
from ._params import reset_affine
from .batchnorm import _NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d"]


class _InstanceNorm(_NormBase):
    """The forward shared by the instance norms (``_spatial`` spatial dims); unlike batch norm, ``affine`` and
    ``track_running_stats`` are off by default and ``bias=False`` leaves the bias out."""
    _spatial = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        if affine and not bias:
            self.bias = None

    def reset_parameters(self):
        """Resets the running statistics, the weight to ones and the bias to zeros."""
        self.reset_running_stats()
        if self.affine:
            reset_affine(self.weight, self.bias)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def forward(self, input):
        no_batch = self._spatial + 1
        if input.ndim not in (no_batch, no_batch + 1):
            raise ValueError(f"expected {no_batch}D or {no_batch + 1}D input (got {input.ndim}D input)")
        feature_dim = input.ndim - no_batch
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False",
                          stacklevel=2)
        batched = input if input.ndim == no_batch + 1 else input.unsqueeze(0)
        out = F.instance_norm(batched, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out if input.ndim == no_batch + 1 else out.squeeze(0)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of ``(N, C, L)`` or ``(C, L)`` inputs: each channel of each sample over its
    length. ``affine`` and ``track_running_stats`` are False by default."""
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of ``(N, C, H, W)`` or ``(C, H, W)`` inputs: each channel of each sample over
    its plane. ``affine`` and ``track_running_stats`` are False by default."""
    _spatial = 2
