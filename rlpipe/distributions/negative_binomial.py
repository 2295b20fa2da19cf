"""``NegativeBinomial``: failures before ``total_count`` successes of Bernoulli trials (success probability
1 - probs), drawn as a Gamma-Poisson mixture."""
from .. import primitives as P
from ..autograd import no_grad
from . import constraints
from ._discrete_sampling import poisson
from .distribution import Distribution
from .gamma import Gamma
from .utils import BinaryParameters, lazy_property

__all__ = ["NegativeBinomial"]


class NegativeBinomial(BinaryParameters, Distribution):
    """NegativeBinomial(total_count, probs or logits): mean total_count p / (1 - p); samples are floats."""
    arg_constraints = {"total_count": constraints.greater_than_eq(0), "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        self.total_count, = self._set_binary_parameter(probs, logits, total_count)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(self._expand_parameters(NegativeBinomial, batch_shape,
                                                           ("total_count", "probs", "logits"), _instance))

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / (-self.logits).sigmoid()

    @lazy_property
    def _gamma(self):
        """The Gamma whose draws are the Poisson rates of the mixture."""
        return Gamma(concentration=self.total_count, rate=(-self.logits).exp(), validate_args=False)

    def sample(self, sample_shape=()):
        with no_grad():
            return poisson(self._gamma.sample(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_unnormalized = -n * P.softplus(logits) - value * P.softplus(-logits)
        log_normalization = -P.lgamma(n + value) + P.lgamma(1.0 + value) + P.lgamma(n)
        return log_unnormalized - P.where(n + value == 0, 0.0, log_normalization)
