"""``InverseGamma``: 1 / X for X ~ Gamma(concentration, rate)."""
import math

from .. import primitives as P
from . import constraints
from .gamma import Gamma
from .transformed_distribution import TransformedDistribution
from .transforms import PowerTransform

__all__ = ["InverseGamma"]


class InverseGamma(TransformedDistribution):
    """The reciprocal of a Gamma(concentration, rate) variable; reparameterized samples."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base = Gamma(concentration, rate, validate_args=validate_args)
        super().__init__(base, PowerTransform(-base.rate.new_ones(())), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(InverseGamma, _instance))

    @property
    def concentration(self):
        """The Gamma's concentration."""
        return self.base_dist.concentration

    @property
    def rate(self):
        """The Gamma's rate (the scale of this distribution)."""
        return self.base_dist.rate

    @property
    def mean(self):
        """rate / (concentration - 1), inf where concentration <= 1."""
        return P.where(self.concentration > 1, self.rate / (self.concentration - 1), math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        """rate^2 / ((c - 1)^2 (c - 2)), inf where c <= 2."""
        c = self.concentration
        return P.where(c > 2, self.rate.pow(2) / ((c - 1).pow(2) * (c - 2)), math.inf)

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + P.lgamma(c) - (1 + c) * P.digamma(c)
