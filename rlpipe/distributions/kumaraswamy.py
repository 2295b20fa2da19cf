"""``Kumaraswamy``: a Beta-like distribution on (0, 1) with a closed-form CDF."""
import math

from .. import primitives as P
from .._creation import full_like
from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a, b, n):
    """The n-th moment: b B(1 + n / a, b)."""
    arg = 1 + n / a
    return b * (P.lgamma(arg) + P.lgamma(b) - P.lgamma(arg + b)).exp()


class Kumaraswamy(TransformedDistribution):
    """Density a b x^(a-1) (1 - x^a)^(b-1), a = concentration1, b = concentration0; reparameterized samples
    (1 - U^(1/b))^(1/a)."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        zeros, ones = full_like(self.concentration0, 0), full_like(self.concentration0, 1)
        base = Uniform(zeros, ones, validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        """((a - 1) / (a b - 1))^(1/a); nan where a or b is below 1. (torch 2.13's formula gives nan for b > 1 too:
        rlpipe returns the density's maximum there.)"""
        a, b = self.concentration1, self.concentration0
        log_mode = a.reciprocal() * ((a - 1).log() - (a * b - 1).log())
        return P.where((a < 1) | (b < 1), math.nan, log_mode.exp())

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        t1 = 1 - a.reciprocal()
        t0 = 1 - b.reciprocal()
        harmonic = P.digamma(b + 1) + euler_constant
        return t0 + t1 * harmonic - a.log() - b.log()
