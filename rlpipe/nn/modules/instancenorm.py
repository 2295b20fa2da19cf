"""Instance normalization: ``InstanceNorm1d`` and ``InstanceNorm2d`` normalize each channel of each sample
over its positions; with ``track_running_stats`` they also keep running statistics for eval mode."""
import warnings

from ... import _dtypes
from ..._creation import ones, tensor, zeros
from .. import functional as F
from .. import init
from ._params import register_optional
from .module import Module

__all__ = ["InstanceNorm1d", "InstanceNorm2d"]


class _InstanceNorm(Module):
    """The parameters and buffers (as torch's ``_NormBase``: off by default here) and the forward shared by
    the instance norms; ``_spatial`` is the number of spatial dims."""
    _spatial = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        register_optional(self, "weight", affine, (num_features,), device, dtype)
        register_optional(self, "bias", affine and bias, (num_features,), device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=_dtypes.int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self):
        """Running mean 0, running variance 1, no batches seen."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        """Resets the running statistics, the weight to ones and the bias to zeros."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

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
