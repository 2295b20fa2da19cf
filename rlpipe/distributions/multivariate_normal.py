"""``MultivariateNormal``: the Gaussian over vectors, given by its mean and one of covariance, precision or
the lower Cholesky factor of the covariance (``scale_tril``); everything is computed from that factor."""
import math

import numpy as np

from .. import primitives as P
from .._tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import lazy_property, standard_normal

__all__ = ["MultivariateNormal"]


def _batch_mv(matrices, vectors):
    """Matrix-vector products over broadcast batches."""
    return P.matmul(matrices, vectors.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(scale_tril, x):
    """x^T (L L^T)^-1 x for each vector of x, by one triangular solve (batches broadcast); one L shared by every
    vector is solved once against all of them as columns."""
    if scale_tril.ndim == 2:
        n = x.shape[-1]
        columns = P.solve_triangular(scale_tril, x.reshape(-1, n).mT, upper=False)
        return columns.pow(2).sum(0).reshape(x.shape[:-1])
    return P.solve_triangular(scale_tril, x.unsqueeze(-1), upper=False).squeeze(-1).pow(2).sum(-1)


def _half_log_det(scale_tril):
    """log det(L) = half the log determinant of L L^T."""
    return scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def _precision_to_scale_tril(precision):
    """The lower Cholesky factor of precision^-1, through the factor of the flipped precision (as torch)."""
    flipped = P.linalg_cholesky(precision.flip((-2, -1)))
    inverse = flipped.flip((-2, -1)).mT
    eye = P.diag_embed(precision.new_ones((precision.shape[-1],)))
    return P.solve_triangular(inverse, eye, upper=False)


def _broadcast_shape(*shapes):
    """The shape that ``shapes`` broadcast to (torch's error when they do not)."""
    try:
        return Size(np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise RuntimeError("shape mismatch: objects cannot be broadcast to a single shape.  Mismatch is between "
                           + " and ".join(str(list(s)) for s in shapes)) from None


class ScaleTrilMatrices:
    """The matrices of a distribution held as a lower Cholesky factor ``_unbroadcasted_scale_tril`` (L), each
    computed once and expanded to ``_matrix_shape()``: MultivariateNormal's covariance, Wishart's scale."""

    @lazy_property
    def scale_tril(self):
        """The lower Cholesky factor L of the covariance (Wishart: of the scale matrix)."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        """The covariance (Wishart: the scale matrix), L L^T."""
        low = self._unbroadcasted_scale_tril
        return P.matmul(low, low.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """The inverse covariance (Wishart: the inverse scale matrix)."""
        return P.cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())


class MultivariateNormal(ScaleTrilMatrices, Distribution):
    """The Gaussian over vectors with mean ``loc`` and exactly one of ``covariance_matrix``, ``precision_matrix``
    or ``scale_tril`` (their batch dims broadcast with loc's); reparameterized samples."""
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = {name: m for name, m in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                                         ("precision_matrix", precision_matrix)) if m is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        (name, matrix), = given.items()
        if matrix.dim() < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions"
                             if name == "scale_tril" else
                             f"{name} must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = _broadcast_shape(matrix.shape[:-2], loc.shape[:-1])
        setattr(self, name, matrix.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = P.linalg_cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        matrix_shape = batch_shape + self.event_shape + self.event_shape
        new.loc = self.loc.expand(batch_shape + self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(matrix_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        eps = standard_normal(self._extended_shape(sample_shape), self.loc.dtype, self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        mahalanobis = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return (-0.5 * (self._event_shape[0] * math.log(2 * math.pi) + mahalanobis)
                - _half_log_det(self._unbroadcasted_scale_tril))

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + _half_log_det(self._unbroadcasted_scale_tril)
        return h if len(self._batch_shape) == 0 else h.expand(self._batch_shape)
