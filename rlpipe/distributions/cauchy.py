"""``Cauchy``: the Lorentz distribution with median ``loc`` and half-width ``scale`` (no mean, no variance)."""
import math

from .. import primitives as P
from .._creation import full_like
from . import constraints
from .distribution import Distribution
from .utils import batch_shape_for, broadcast_all, standard_uniform

__all__ = ["Cauchy"]


class Cauchy(Distribution):
    """Density 1 / (pi scale (1 + ((x - loc) / scale)^2)); reparameterized samples loc + scale tan(pi (U - 1/2))."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(batch_shape_for((loc, scale), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(Cauchy, batch_shape, ("loc", "scale"), _instance)

    @property
    def mean(self):
        """nan: the Cauchy distribution has no mean."""
        return full_like(self.loc, math.nan).expand(self._extended_shape())

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        """inf: the Cauchy distribution has no finite variance."""
        return full_like(self.loc, math.inf).expand(self._extended_shape())

    def rsample(self, sample_shape=()):
        u = standard_uniform(self._extended_shape(sample_shape), self.loc.dtype, self.loc.device)
        return self.loc + self.scale * P.tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - P.log1p(((value - self.loc) / self.scale).pow(2))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return P.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return P.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
