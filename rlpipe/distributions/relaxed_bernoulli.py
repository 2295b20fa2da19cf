"""``RelaxedBernoulli`` (the Concrete / Gumbel-softmax relaxation of a Bernoulli on (0, 1)) and its logit-space
base ``LogitRelaxedBernoulli``."""
import math
import numbers

from .. import primitives as P
from . import constraints
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform
from .utils import BinaryParameters, batch_shape_for, broadcast_all, clamp_probs, standard_uniform, forwarded_property

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


class LogitRelaxedBernoulli(BinaryParameters, Distribution):
    """The logit of a RelaxedBernoulli: (logit(U) + logits) / temperature for U uniform; reparameterized."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        self._set_binary_parameter(probs, logits)
        super().__init__(batch_shape_for((probs if probs is not None else logits,), self._param),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(LogitRelaxedBernoulli, batch_shape, ("probs", "logits"), _instance)
        new.temperature = self.temperature
        return self._expand_binary(new)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(standard_uniform(shape, probs.dtype, probs.device))
        return (uniforms.log() - P.log1p(-uniforms) + probs.log() - P.log1p(-probs)) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return log_of(self.temperature) + diff - 2 * P.log1p(diff.exp())


def log_of(value):
    """The log of a temperature given as a tensor or a number."""
    return math.log(value) if isinstance(value, numbers.Number) else value.log()


class RelaxedBernoulli(TransformedDistribution):
    """A relaxed Bernoulli on (0, 1): sigmoid of a LogitRelaxedBernoulli; samples approach 0/1 draws as the
    temperature goes to 0. Reparameterized."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(RelaxedBernoulli, _instance))

    temperature = forwarded_property("base_dist", "temperature", "The relaxation temperature.")
    logits = forwarded_property("base_dist", "logits", "The logits of the underlying Bernoulli.")
    probs = forwarded_property("base_dist", "probs", "The probability of the underlying Bernoulli.")
