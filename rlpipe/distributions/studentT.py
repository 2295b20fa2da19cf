"""``StudentT``: Student's t distribution with ``df`` degrees of freedom, location ``loc`` and scale ``scale``."""
import math

from .. import primitives as P
from .._creation import full_like
from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .utils import batch_shape_for, broadcast_all, standard_normal

__all__ = ["StudentT"]


class StudentT(Distribution):
    """loc + scale * N / sqrt(V / df), V chi-squared with df degrees of freedom; reparameterized samples."""
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(batch_shape_for((df, loc, scale), self.df), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(StudentT, batch_shape, ("df", "loc", "scale"), _instance)
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        """loc where df > 1, nan elsewhere."""
        return P.where(self.df > 1, self.loc, math.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        """scale^2 df / (df - 2) where df > 2, inf for 1 < df <= 2, nan for df <= 1."""
        finite = self.scale.pow(2) * self.df / (self.df - 2)
        return P.where(self.df > 2, finite, P.where(self.df > 1, full_like(finite, math.inf), math.nan))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = standard_normal(shape, self.df.dtype, self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * (z / self.df).rsqrt()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        norm = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + P.lgamma(0.5 * self.df)
                - P.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * P.log1p(y.pow(2) / self.df) - norm

    def entropy(self):
        half_df = 0.5 * self.df
        log_beta = P.lgamma(half_df) + math.lgamma(0.5) - P.lgamma(half_df + 0.5)
        return (self.scale.log() + (half_df + 0.5) * (P.digamma(half_df + 0.5) - P.digamma(half_df))
                + 0.5 * self.df.log() + log_beta)
