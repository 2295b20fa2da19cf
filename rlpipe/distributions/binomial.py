"""``Binomial``: the number of successes in ``total_count`` Bernoulli(probs) trials."""
from .. import primitives as P
from .._creation import arange
from ..autograd import no_grad
from . import constraints
from ._discrete_sampling import binomial
from .distribution import Distribution
from .utils import BinaryParameters

__all__ = ["Binomial"]


class Binomial(BinaryParameters, Distribution):
    """Binomial(total_count, probs or logits), parameters broadcast together; samples are floats."""
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        self.total_count, = self._set_binary_parameter(probs, logits, total_count)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(self._expand_parameters(Binomial, batch_shape, ("total_count", "probs", "logits"),
                                                           _instance))

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        """The integers from 0 to total_count."""
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_factorials = P.lgamma(n + 1) - P.lgamma(value + 1) - P.lgamma(n - value + 1)
        normalizer = n * (logits.clamp(min=0) + P.log1p((-logits.abs()).exp()))
        return value * logits + log_factorials - normalizer

    def _homogeneous_count(self, what):
        count = int(self.total_count.max())
        if not bool(self.total_count.min() == count):
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return count

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        count = self._homogeneous_count("enumerate_support")
        values = arange(1 + count, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
