"""``LayerNorm``: normalizes each sample over its trailing dimensions."""
import numbers

from .. import functional as F
from .. import init
from ._params import register_optional
from .module import Module

__all__ = ["LayerNorm"]


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
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
