"""``LayerNorm``, ``GroupNorm``, ``RMSNorm`` and ``LocalResponseNorm``: per-sample normalizations (the same in
train and eval)."""
import numbers

from .. import functional as F
from .. import init
from ._params import register_optional, reset_affine
from .module import Module

__all__ = ["LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm"]


class LayerNorm(Module):
    """Normalizes over the last ``len(normalized_shape)`` dimensions to zero mean and unit (biased)
    variance, then applies the elementwise affine ``weight`` (ones) and ``bias`` (zeros) when
    ``elementwise_affine``. Unlike BatchNorm it uses the statistics of each sample, in train and eval."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        register_optional(self, "weight", elementwise_affine, self.normalized_shape, device, dtype)
        register_optional(self, "bias", elementwise_affine and bias, self.normalized_shape, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        """Sets the weight back to ones and the bias to zeros (when affine)."""
        if self.elementwise_affine:
            reset_affine(self.weight, self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Splits the ``num_channels`` channels into ``num_groups`` groups and normalizes each group of each
    sample over its channels and positions, then applies a per-channel affine ``weight`` (ones) and
    ``bias`` (zeros, unless ``bias=False``) when ``affine``."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        register_optional(self, "weight", affine, (num_channels,), device, dtype)
        register_optional(self, "bias", affine and bias, (num_channels,), device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        """Sets the weight back to ones and the bias to zeros (when affine)."""
        if self.affine:
            reset_affine(self.weight, self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """Divides by the root mean square over the last ``len(normalized_shape)`` dimensions (plus ``eps``,
    by default the dtype's machine epsilon) and multiplies by ``weight`` (ones) when
    ``elementwise_affine``; unlike LayerNorm it neither centres nor shifts."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        register_optional(self, "weight", elementwise_affine, self.normalized_shape, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        """Sets the weight back to ones (when affine)."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Divides each channel by (k + alpha * mean of the squares of ``size`` neighbouring channels)^beta."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
