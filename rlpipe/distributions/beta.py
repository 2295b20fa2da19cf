"""``Beta``: density proportional to ``x^(concentration1 - 1) (1 - x)^(concentration0 - 1)`` on [0, 1].

Samples are X / (X + Y) for X, Y Gamma draws, reparameterized as torch's through the Gamma draws' implicit
gradients (``gamma.StandardGamma``); log_prob, entropy, moments and KL are differentiable in both concentrations."""

from .. import primitives as _ops
from . import constraints
from .dirichlet import Dirichlet
from .exp_family import ExponentialFamily
from .gamma import standard_gamma
from .utils import batch_shape_for, broadcast_all

__all__ = ["Beta"]


def _xlogy(x, y):
    """x * log(y), 0 where x is 0 (so the density at 0 or 1 is right when a concentration is 1)."""
    return _ops.where(x == 0, 0.0, x * y.log())


class Beta(ExponentialFamily):
    """Beta(concentration1, concentration0) on [0, 1]; reparameterized samples through two Gamma draws."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(batch_shape_for((concentration1, concentration0), self.concentration1),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(Beta, batch_shape, ("concentration1", "concentration0"), _instance)

    @property
    def _total(self):
        return self.concentration1 + self.concentration0

    @property
    def mean(self):
        return self.concentration1 / self._total

    @property
    def mode(self):
        """The Dirichlet mode's first entry, as torch's: (a - 1) / (a + b - 2) for a, b > 1, the nearer end where one
        concentration is below 1."""
        pair = _ops.stack([self.concentration1, self.concentration0], -1)
        return Dirichlet(pair, validate_args=False).mode[..., 0]

    @property
    def variance(self):
        total = self._total
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = standard_gamma(self.concentration1.expand(shape))
        y = standard_gamma(self.concentration0.expand(shape))
        return (x / (x + y)).clamp(min=0.0, max=1.0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (_xlogy(a - 1, value) + _xlogy(b - 1, 1 - value)
                - a.lgamma() - b.lgamma() + self._total.lgamma())

    def entropy(self):
        a, b, total = self.concentration1, self.concentration0, self._total
        log_beta = a.lgamma() + b.lgamma() - total.lgamma()
        return log_beta - (a - 1) * a.digamma() - (b - 1) * b.digamma() + (total - 2) * total.digamma()

    @property
    def _natural_params(self):
        return self.concentration1, self.concentration0

    def _log_normalizer(self, x, y):
        return x.lgamma() + y.lgamma() - (x + y).lgamma()
