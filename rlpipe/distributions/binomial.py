"""``Binomial``: the number of successes in ``total_count`` Bernoulli(probs) trials."""
from .. import primitives as P
from .._creation import arange
from ..autograd import no_grad
from . import constraints
from ._discrete_sampling import binomial
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Binomial"]


class Binomial(Distribution):
    """Binomial(total_count, probs or logits), parameters broadcast together; samples are floats."""
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        total, param = broadcast_all(total_count, probs if probs is not None else logits)
        self.total_count = total.type_as(param)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        self._param = param
        super().__init__(param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(Binomial, batch_shape, ("total_count", "probs", "logits"), _instance)
        new._param = new.__dict__["probs"] if "probs" in self.__dict__ else new.__dict__["logits"]
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        """The integers from 0 to total_count."""
        return constraints.integer_interval(0, self.total_count)

    @lazy_property
    def logits(self):
        """log(p / (1 - p))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        """The probability of success of each trial."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        """The shape of the probs or logits parameter."""
        return self._param.size()

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
