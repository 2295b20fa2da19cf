"""``Chi2``: the chi-squared distribution with ``df`` degrees of freedom, Gamma(df / 2, 1 / 2)."""
from . import constraints
from .gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    """The sum of ``df`` squared standard normals: Gamma(df / 2, rate 1 / 2); reparameterized samples."""
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(Chi2, _instance))

    @property
    def df(self):
        """The degrees of freedom."""
        return self.concentration * 2
