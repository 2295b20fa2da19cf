"""``Wishart``: distributions over positive-definite matrices, the scatter matrices of ``df`` Gaussian vectors with
covariance ``covariance_matrix`` (or given by ``precision_matrix`` or ``scale_tril``)."""
import math
import warnings

import numpy as np

from .. import primitives as P
from .._creation import arange, tensor
from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .lkj_cholesky import _mvlgamma
from .multivariate_normal import ScaleTrilMatrices, _broadcast_shape, _precision_to_scale_tril
from .utils import eps_of, standard_normal

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """The derivative of the multivariate log-gamma function of dimension p."""
    return sum(P.digamma(x - i / 2) for i in range(p))


class Wishart(ScaleTrilMatrices, ExponentialFamily):
    """Wishart(df, scale) over p x p positive-definite matrices (df > p - 1); reparameterized samples by Bartlett's
    decomposition (singular draws, likely for df < p, are redrawn up to ``max_try_correction`` times, with a
    warning)."""
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite, "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        given = {name: m for name, m in (("covariance_matrix", covariance_matrix),
                                         ("precision_matrix", precision_matrix), ("scale_tril", scale_tril))
                 if m is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        (name, param), = given.items()
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, (int, float)):
            batch_shape = param.shape[:-2]
            self.df = tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = _broadcast_shape(param.shape[:-2], df.shape)
            self.df = df.expand(batch_shape)
        p = param.shape[-1]
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        setattr(self, name, param.expand(tuple(batch_shape) + (-1, -1)))
        if bool((self.df < p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df "
                          "< ndim.", stacklevel=2)
        super().__init__(batch_shape, param.shape[-2:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = param
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = P.linalg_cholesky(param)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(param)
        self._dist_chi2 = self._chi2_of(self.df)

    def _chi2_of(self, df):
        """The chi-squared variables of Bartlett's diagonal: df, df - 1, ..., df - p + 1 degrees of freedom."""
        p = self._event_shape[-1]
        steps = arange(p, dtype=self._unbroadcasted_scale_tril.dtype, device=self._unbroadcasted_scale_tril.device)
        return Chi2(df.unsqueeze(-1) - steps.expand(tuple(self._batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        matrix_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(matrix_shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(matrix_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2_of(new.df)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    def _df_matrix(self):
        return self.df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        """(df - p - 1) times the scale matrix, nan where df <= p + 1."""
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = P.where(factor <= 0, math.nan, factor)
        return factor.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        diag = v.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (v.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape):
        p = self._event_shape[-1]
        diag = self._dist_chi2.rsample(sample_shape).sqrt().clamp(min=eps_of(self.df.dtype))
        rows, cols = np.tril_indices(p, -1)
        below = standard_normal(tuple(sample_shape) + tuple(self._batch_shape) + (len(rows),), diag.dtype, diag.device)
        flat = below.new_zeros(tuple(below.shape[:-1]) + (p * p,))
        flat = P.index_add(flat, -1, tensor((rows * p + cols).tolist(), device=diag.device), below)
        noise = flat.reshape(tuple(below.shape[:-1]) + (p, p)) + P.diag_embed(diag)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def _singular(self, sample):
        flags = ~self.support.check(sample)
        return flags.reshape(tuple(flags.shape[:flags.ndim - len(self._batch_shape)]) + (-1,)).any(-1) \
            if len(self._batch_shape) else flags

    def rsample(self, sample_shape=(), max_try_correction=None):
        sample_shape = tuple(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        singular = self._singular(sample)
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(10 if max_try_correction is None else max_try_correction):
                redrawn = self._bartlett_sampling(sample_shape)
                mask = singular.reshape(tuple(singular.shape) + (1,) * (sample.ndim - singular.ndim))
                sample = P.where(mask, redrawn, sample)
                singular = self._singular(sample)
                if not bool(singular.any()):
                    break
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace = P.cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + half_log_det) - _mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * P.linalg_slogdet(value).logabsdet - trace / 2)

    def entropy(self):
        nu, p = self.df, self._event_shape[-1]
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * _LOG_2 / 2 + half_log_det) + _mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        return -self.precision_matrix / 2, (self.df - self._event_shape[-1] - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-P.linalg_slogdet(-2 * x).logabsdet + _LOG_2 * p)
                + _mvlgamma(y + (p + 1) / 2, p))
