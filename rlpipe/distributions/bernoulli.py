"""``Bernoulli``: 1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""
import math

from .. import primitives as _ops
from .._creation import arange
from ..autograd import no_grad
from . import constraints
from .exp_family import ExponentialFamily
from .utils import BinaryParameters, batch_shape_for, broadcast_all, standard_uniform

__all__ = ["Bernoulli"]


def binary_cross_entropy_with_logits(logits, target):
    """-(target * log(sigmoid(logits)) + (1 - target) * log(1 - sigmoid(logits))), without overflow."""
    return logits.clamp(min=0) - target * logits + (-logits.abs()).exp().log1p()


class Bernoulli(BinaryParameters, ExponentialFamily):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0; samples in the parameter's float dtype."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._set_binary_parameter(probs, logits)
        super().__init__(batch_shape_for((probs if probs is not None else logits,), self._param),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(self._expand_parameters(Bernoulli, batch_shape, ("probs", "logits"), _instance))

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        """1 where probs > 0.5, 0 where below, nan at exactly 0.5 (no single mode)."""
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return _ops.where(self.probs == 0.5, math.nan, mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            probs = self.probs.detach()
            return (standard_uniform(shape, probs.dtype, probs.device) < probs).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value)

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        values = arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values

    _mean_carrier_measure = 0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        return _ops.log1p(x.exp())
