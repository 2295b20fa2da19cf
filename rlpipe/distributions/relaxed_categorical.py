"""``RelaxedOneHotCategorical`` (the Concrete / Gumbel-softmax relaxation of a one-hot Categorical on the simplex)
and its log-space base ``ExpRelaxedCategorical``."""
import math

from .. import primitives as P
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .relaxed_bernoulli import log_of
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform
from .utils import clamp_probs, standard_uniform, forwarded_property

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical: log_softmax((logits + Gumbel noise) / temperature); reparameterized."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    param_shape = forwarded_property("_categorical", "param_shape", "The shape of the probs or logits parameter.")
    logits = forwarded_property("_categorical", "logits", "The normalized log-probabilities of the categories.")
    probs = forwarded_property("_categorical", "probs", "The probabilities of the categories.")

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(standard_uniform(shape, self.logits.dtype, self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = P.broadcast_tensors(self.logits, value)
        log_scale = math.lgamma(k) + (k - 1) * log_of(self.temperature)
        score = logits - value * self.temperature
        return (score - score.logsumexp(-1, keepdim=True)).sum(-1) + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """A relaxed one-hot Categorical on the simplex: exp of an ExpRelaxedCategorical; samples approach one-hot draws
    as the temperature goes to 0. Reparameterized."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(RelaxedOneHotCategorical, _instance))

    temperature = forwarded_property("base_dist", "temperature", "The relaxation temperature.")
    logits = forwarded_property("base_dist", "logits", "The normalized log-probabilities of the categories.")
    probs = forwarded_property("base_dist", "probs", "The probabilities of the categories.")
