"""``GeneralizedPareto``: the peaks-over-threshold distribution with location, scale and shape (``concentration``);
concentration 0 is the exponential limit."""
import math
import numbers

from .. import primitives as P
from .._creation import ones_like, zeros_like
from . import constraints
from .distribution import Distribution
from .utils import batch_shape_for, broadcast_all, standard_uniform

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """Survival function (1 + k z)^(-1/k) for z = (x - loc) / scale (exp(-z) at k = 0); reparameterized samples by
    the inverse CDF."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(batch_shape_for((loc, scale, concentration), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(GeneralizedPareto, batch_shape, ("loc", "scale", "concentration"), _instance)

    def _at_zero_and_safe(self):
        """(where the concentration is ~0, the concentration with those replaced by 1)."""
        k = self.concentration
        at_zero = k.isclose(zeros_like(k))
        return at_zero, P.where(at_zero, ones_like(k), k)

    def rsample(self, sample_shape=()):
        return self.icdf(standard_uniform(self._extended_shape(sample_shape), self.loc.dtype, self.loc.device))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        at_zero, k = self._at_zero_and_safe()
        y = 1 / k + ones_like(z)
        where_nonzero = P.where(y == 0, y, y * P.log1p(k * z))
        log_scale = math.log(self.scale) if isinstance(self.scale, numbers.Real) else self.scale.log()
        return -log_scale - P.where(at_zero, z, where_nonzero)

    def log_survival_function(self, value):
        """log P(X > value)."""
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        at_zero, k = self._at_zero_and_safe()
        return P.where(at_zero, -z, -P.log1p(k * z) / k)

    def log_cdf(self, value):
        """log P(X <= value)."""
        return P.log1p(-self.log_survival_function(value).exp())

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        at_zero, k = self._at_zero_and_safe()
        log_u = P.log1p(-value)
        return P.where(at_zero, self.loc - self.scale * log_u, self.loc + self.scale / k * P.expm1(-k * log_u))

    @property
    def mean(self):
        """loc + scale / (1 - k), nan for k >= 1."""
        valid = self.concentration < 1
        k = P.where(valid, self.concentration, 0.5)
        return P.where(valid, self.loc + self.scale / (1 - k), math.nan)

    @property
    def variance(self):
        """scale^2 / ((1 - k)^2 (1 - 2k)), nan for k >= 1/2."""
        valid = self.concentration < 0.5
        k = P.where(valid, self.concentration, 0.25)
        return P.where(valid, self.scale.pow(2) / ((1 - k).pow(2) * (1 - 2 * k)), math.nan)

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).expand(self._batch_shape)

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        """[loc, inf) for k >= 0, [loc, loc - scale / k] for k < 0."""
        upper = P.where(self.concentration < 0, self.loc - self.scale / self.concentration, math.inf)
        return constraints.interval(self.loc, upper)
