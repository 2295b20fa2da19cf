"""Affine layers: ``Identity``, ``Linear`` and ``Bilinear``."""
import math

from ...primitives import Linear as RawLinear
from .. import functional as F
from .. import init
from ._params import inference_arrays, register_optional, reset_like_linear
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """Returns its input unchanged; any constructor arguments are accepted and ignored, so it can
    stand in for a layer that takes some."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` over the last dimension of ``x``.

    ``weight`` has shape ``(out_features, in_features)`` and ``bias`` ``(out_features,)``; both start
    uniform in ``±1/sqrt(in_features)`` (Kaiming uniform with ``a=sqrt(5)`` for the weight), as in torch.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        register_optional(self, "weight", True, (out_features, in_features), device, dtype)
        register_optional(self, "bias", bias, (out_features,), device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        """Redraws weight and bias from torch's default distributions."""
        reset_like_linear(self.weight, self.bias)

    def forward(self, input):
        # the parameter table directly: each Module.__getattr__ lookup costs about a fifth of a batch-1 forward
        params = self._parameters
        try:
            weight, bias = params["weight"], params["bias"]
        except KeyError:  # weight or bias was replaced by a plain attribute (e.g. a reparametrization)
            weight, bias = self.weight, self.bias
        return F.linear(input, weight, bias)

    def _inference_op(self, dtype, device):  # see Module's run_without_graph
        arrays = inference_arrays(self, dtype, device)
        return None if arrays is None else (RawLinear, arrays)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y[..., k] = x1 @ weight[k] @ x2 + bias[k]`` for two inputs that share their leading dimensions.

    ``weight`` has shape ``(out_features, in1_features, in2_features)``; weight and bias start uniform in
    ``±1/sqrt(in1_features)``.
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        register_optional(self, "weight", True, (out_features, in1_features, in2_features), device, dtype)
        register_optional(self, "bias", bias, (out_features,), device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        """Redraws weight and bias uniformly in [-1/sqrt(in1_features), 1/sqrt(in1_features)], as torch does."""
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
