"""``Dirichlet``: distributions over the probability simplex, density proportional to prod x_i^(c_i - 1)."""
from .. import primitives as P
from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import standard_gamma
from .utils import xlogy

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """Dirichlet(concentration) over vectors of the last dim of ``concentration``; reparameterized samples (normalized
    Gamma draws, with their implicit gradients)."""
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        gammas = standard_gamma(self.concentration.expand(self._extended_shape(sample_shape)))
        return gammas / gammas.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + P.lgamma(c.sum(-1)) - P.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        """(c - 1) / sum(c - 1) with negative parts cut; where every c < 1, the vertex of the largest c."""
        shifted = (self.concentration - 1).clamp(min=0.0)
        mode = shifted / shifted.sum(-1, keepdim=True)
        vertex = P.one_hot(self.concentration.argmax(-1), self.concentration.shape[-1]).to(mode.dtype)
        return P.where((self.concentration < 1).all(-1, keepdim=True), vertex, mode)

    @property
    def variance(self):
        c = self.concentration
        total = c.sum(-1, keepdim=True)
        return c * (total - c) / (total.pow(2) * (total + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        total = c.sum(-1)
        return (P.lgamma(c).sum(-1) - P.lgamma(total) - (k - total) * P.digamma(total)
                - ((c - 1.0) * P.digamma(c)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()
