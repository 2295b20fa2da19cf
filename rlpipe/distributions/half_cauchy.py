"""``HalfCauchy``: |X| for X ~ Cauchy(0, scale)."""
import math

from .._creation import full_like
from .cauchy import Cauchy
from .half_normal import _Folded

__all__ = ["HalfCauchy"]


class HalfCauchy(_Folded):
    """|X| for X ~ Cauchy(0, scale); reparameterized samples (no finite mean or variance)."""

    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0, scale, validate_args=False), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(HalfCauchy, _instance))

    @property
    def mean(self):
        """inf."""
        return full_like(self.scale, math.inf).expand(self._extended_shape())

    @property
    def variance(self):
        """inf."""
        return self.base_dist.variance
