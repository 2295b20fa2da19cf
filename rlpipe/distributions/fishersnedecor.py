"""``FisherSnedecor``: the F distribution, (X1 / df1) / (X2 / df2) for chi-squared X1, X2."""
import math

from .. import primitives as P
from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import batch_shape_for, broadcast_all, tiny_of

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """The F distribution with ``df1`` and ``df2`` degrees of freedom; reparameterized samples through two Gammas."""
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        super().__init__(batch_shape_for((df1, df2), self.df1), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(FisherSnedecor, batch_shape, ("df1", "df2"), _instance)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self):
        """df2 / (df2 - 2), nan where df2 <= 2."""
        return P.where(self.df2 > 2, self.df2 / (self.df2 - 2), math.nan)

    @property
    def mode(self):
        """(df1 - 2) / df1 * df2 / (df2 + 2), nan where df1 <= 2."""
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return P.where(self.df1 > 2, mode, math.nan)

    @property
    def variance(self):
        """nan where df2 <= 4."""
        df1, df2 = self.df1, self.df2
        var = 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))
        return P.where(df2 > 4, var, math.nan)

    def rsample(self, sample_shape=()):
        # X1 ~ Gamma(df1 / 2, 1 / 2) / df1 and X2 likewise: their ratio is F(df1, df2)
        x1 = self._gamma1.rsample(sample_shape)
        x2 = self._gamma2.rsample(sample_shape)
        tiny = tiny_of(x1.dtype)
        return (x1.clamp(min=tiny) / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        half1, half2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        t1 = P.lgamma(half1 + half2) - P.lgamma(half1) - P.lgamma(half2)
        t2 = half1 * ratio.log() + (half1 - 1) * value.log()
        t3 = (half1 + half2) * P.log1p(ratio * value)
        return t1 + t2 - t3
