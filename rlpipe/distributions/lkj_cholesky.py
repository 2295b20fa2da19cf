"""``LKJCholesky``: the LKJ distribution over Cholesky factors of correlation matrices, sampled by the onion
method."""
import math

from .. import primitives as P
from .._creation import arange
from ..autograd import no_grad
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all, standard_normal, tiny_of

__all__ = ["LKJCholesky"]


def _mvlgamma(x, p):
    """The multivariate log-gamma function of dimension p."""
    return p * (p - 1) / 4 * math.log(math.pi) + sum(P.lgamma(x - i / 2) for i in range(p))


class LKJCholesky(Distribution):
    """Cholesky factors L of dim x dim correlation matrices with density proportional to det(L L^T)^(concentration - 1)
    (uniform over correlation matrices at concentration 1)."""
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        self.concentration, = broadcast_all(concentration)
        marginal = self.concentration + 0.5 * (self.dim - 2)
        offset = arange(self.dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = P.cat([offset.new_zeros((1,)), offset])
        self._beta = Beta(offset + 0.5, marginal.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.size(), (dim, dim), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u = standard_normal(self._extended_shape(sample_shape), y.dtype, y.device).tril(-1)
            on_sphere = u / u.norm(dim=-1, keepdim=True)
            first_row = P.cat([on_sphere.new_zeros(tuple(on_sphere.shape[:-2]) + (1, self.dim)),
                               on_sphere.new_ones(tuple(on_sphere.shape[:-2]) + (self.dim - 1, self.dim))], -2)
            w = y.sqrt() * P.where(first_row == 0, 0.0, on_sphere)
            diag = (1 - w.pow(2).sum(-1)).clamp(min=tiny_of(w.dtype)).sqrt()
            return w + P.diag_embed(diag)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = arange(2, self.dim + 1, dtype=self.concentration.dtype, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalizer = 0.5 * dm1 * math.log(math.pi) + _mvlgamma(alpha - 0.5, dm1) - P.lgamma(alpha) * dm1
        return unnormalized - normalizer
