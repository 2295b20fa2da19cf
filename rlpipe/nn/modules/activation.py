"""Activation modules: thin Modules that hold an activation's settings and call ``nn.functional``.

Each module's constructor, defaults and printed form follow torch 2.x; ``inplace=True`` (where the
module takes it) overwrites the input instead of allocating the result.
"""
import warnings

from ... import primitives as RF
from ...primitives import Elu, Silu
from ..._creation import empty
from .. import functional as F
from .. import init as nn_init
from ..parameter import Parameter
from .module import Module
from .attention import MultiheadAttention  # noqa: F401 - torch.nn.modules.activation's home for it

__all__ = ["Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU", "Mish",
           "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid", "Softplus",
           "Softshrink", "PReLU", "Softsign", "Tanhshrink", "Softmin", "Softmax", "Softmax2d", "LogSoftmax"]


def _inplace_only(inplace):
    """The repr of a module whose only setting is ``inplace``: shown only when set."""
    return "inplace=True" if inplace else ""


def _and_inplace(text, inplace):
    return text + ", inplace=True" if inplace else text


class Threshold(Module):
    """Keeps ``x`` where ``x > threshold`` and writes ``value`` everywhere else."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return _and_inplace(f"threshold={self.threshold}, value={self.value}", self.inplace)


class ReLU(Module):
    """``max(0, x)`` elementwise."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def _inference_op(self, dtype, device):  # see Module's run_without_graph
        return None if self.inplace else (RF.Relu, ())

    def extra_repr(self):
        return _inplace_only(self.inplace)


class RReLU(Module):
    """Leaky ReLU whose negative slope is drawn uniformly from ``[lower, upper]`` per element while
    training, and fixed to ``(lower + upper) / 2`` in eval mode."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return _and_inplace(f"lower={self.lower}, upper={self.upper}", self.inplace)


class Hardtanh(Module):
    """Clamps ``x`` to ``[min_val, max_val]`` (``min_value``/``max_value`` are the deprecated spellings)."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and rename to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and rename to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        if not max_val > min_val:
            raise AssertionError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return _and_inplace(f"min_val={self.min_val}, max_val={self.max_val}", self.inplace)


class ReLU6(Hardtanh):
    """``min(max(0, x), 6)``: a Hardtanh on ``[0, 6]``."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace_only(self.inplace)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, input):
        return RF.sigmoid(input)

    def _inference_op(self, dtype, device):
        return RF.Sigmoid, ()


class Hardsigmoid(Module):
    """Piecewise-linear sigmoid: ``clamp(x / 6 + 1 / 2, 0, 1)``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input):
        return RF.tanh(input)

    def _inference_op(self, dtype, device):
        return RF.Tanh, ()


class SiLU(Module):
    """``x * sigmoid(x)`` (also called swish)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)

    def _inference_op(self, dtype, device):
        return None if self.inplace else (Silu, ())

    def extra_repr(self):
        return _inplace_only(self.inplace)


class Mish(Module):
    """``x * tanh(softplus(x))``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.mish(input, inplace=self.inplace)

    def extra_repr(self):
        return _inplace_only(self.inplace)


class Hardswish(Module):
    """``x * hardsigmoid(x)``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardswish(input, self.inplace)


class ELU(Module):
    """``x`` for positive ``x``, ``alpha * (exp(x) - 1)`` otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def _inference_op(self, dtype, device):
        return None if self.inplace else (Elu, (float(self.alpha), 1.0, 1.0))

    def extra_repr(self):
        return _and_inplace(f"alpha={self.alpha}", self.inplace)


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``: an ELU that stays C1 for any alpha."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return _and_inplace(f"alpha={self.alpha}", self.inplace)


class SELU(Module):
    """``scale * elu(x, alpha)`` with the self-normalizing constants of Klambauer et al. (2017)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.selu(input, self.inplace)

    def extra_repr(self):
        return _inplace_only(self.inplace)


class GLU(Module):
    """Gated linear unit: splits ``dim`` in halves ``a, b`` and returns ``a * sigmoid(b)``."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class GELU(Module):
    """``x * Phi(x)`` with Phi the standard normal CDF; ``approximate='tanh'`` uses the tanh formula."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def _inference_op(self, dtype, device):
        return (RF.Gelu, (self.approximate,)) if self.approximate in ("none", "tanh") else None

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Hardshrink(Module):
    """Zeroes ``x`` where ``|x| <= lambd`` and keeps it elsewhere."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class LeakyReLU(Module):
    """``x`` for positive ``x``, ``negative_slope * x`` otherwise."""

    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def _inference_op(self, dtype, device):
        return None if self.inplace else (RF.LeakyRelu, (float(self.negative_slope),))

    def extra_repr(self):
        return _and_inplace(f"negative_slope={self.negative_slope}", self.inplace)


class LogSigmoid(Module):
    """``log(sigmoid(x))``, computed without overflow."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def _inference_op(self, dtype, device):
        return RF.Softplus, (float(self.beta), float(self.threshold))

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softshrink(Module):
    """Moves ``x`` towards zero by ``lambd`` and zeroes it where ``|x| <= lambd``."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class PReLU(Module):
    """Leaky ReLU with a learned negative slope: one shared slope (``num_parameters=1``) or one per
    channel (dimension 1 of the input), all starting at ``init``."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        """Sets every slope back to ``init`` (0.25 by default)."""
        nn_init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, input):
        return F.tanhshrink(input)


class Softmin(Module):
    """Softmax of ``-x`` along ``dim``: small entries get the large weights."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(Module):
    """``exp(x) / sum(exp(x))`` along ``dim``, so every slice along it sums to 1."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channel dimension of a ``(N, C, H, W)`` or ``(C, H, W)`` input, at each location."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3, _stacklevel=5)


class LogSoftmax(Module):
    """``log(softmax(x))`` along ``dim``, computed stably."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"
