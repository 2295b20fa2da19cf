"""``LogisticNormal``: the simplex image of a Normal vector under the stick-breaking transform."""
from . import constraints
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import StickBreakingTransform

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """StickBreakingTransform of Normal(loc, scale) vectors: K - 1 parameters give points of the K-simplex;
    reparameterized samples."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(LogisticNormal, _instance))

    @property
    def loc(self):
        """The mean of the underlying Normal."""
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        """The scale of the underlying Normal."""
        return self.base_dist.base_dist.scale
