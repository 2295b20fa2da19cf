"""``Poisson``: counts with mean ``rate``."""
from .. import primitives as P
from ..autograd import no_grad
from . import constraints
from ._discrete_sampling import poisson
from .exp_family import ExponentialFamily
from .utils import batch_shape_for, broadcast_all, xlogy

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """P(k) = rate^k exp(-rate) / k!; samples are floats of the rate's dtype, as torch's."""
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        self.rate, = broadcast_all(rate)
        super().__init__(batch_shape_for((rate,), self.rate), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(Poisson, batch_shape, ("rate",), _instance)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        with no_grad():
            return poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - P.lgamma(value + 1)

    @property
    def _natural_params(self):
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()
