"""``Laplace``: the double-exponential distribution with location ``loc`` and scale ``scale``."""
import math

from .. import primitives as P
from . import constraints
from .distribution import Distribution
from .utils import batch_shape_for, broadcast_all, eps_of, standard_uniform

__all__ = ["Laplace"]


class Laplace(Distribution):
    """Density exp(-|x - loc| / scale) / (2 scale); reparameterized samples by the inverse CDF."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(batch_shape_for((loc, scale), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(Laplace, batch_shape, ("loc", "scale"), _instance)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()):
        eps = eps_of(self.loc.dtype)
        u = standard_uniform(self._extended_shape(sample_shape), self.loc.dtype, self.loc.device) * (2 - eps) + eps - 1
        return self.loc - self.scale * u.sign() * P.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * P.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * P.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + (2 * self.scale).log()
