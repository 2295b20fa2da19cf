"""Invertible transforms between spaces, with the log |det Jacobian| a TransformedDistribution needs
(torch.distributions.transforms' API: ``t(x)``, ``t.inv(y)``, ``log_abs_det_jacobian(x, y)``,
``cache_size``, ``domain``/``codomain``, ``sign``, ``forward_shape``/``inverse_shape``)."""
import functools
import math
import numbers
import operator

import numpy as np

from .. import primitives as _ops
from .._creation import full_like, zeros_like
from .._tensor import Size
from . import constraints
from .utils import finfo_of, lazy_property, sum_rightmost, tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["Transform", "ComposeTransform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "identity_transform", "AbsTransform", "PowerTransform", "SoftplusTransform", "SoftmaxTransform",
           "StickBreakingTransform", "IndependentTransform", "ReshapeTransform", "LowerCholeskyTransform",
           "CumulativeDistributionTransform", "PositiveDefiniteTransform", "CatTransform", "StackTransform",
           "CorrCholeskyTransform"]


class Transform:
    """A map ``y = t(x)``; subclasses define ``_call``, ``_inverse`` and ``log_abs_det_jacobian``.
    ``cache_size=1`` remembers the last ``(x, y)`` pair so ``t.inv(t(x))`` returns ``x`` itself."""
    bijective = False
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._inv = None
        if cache_size == 1:
            self._cached_x_y = None, None

    @property
    def event_dim(self):
        """How many rightmost dims form one event, when domain and codomain agree (else ValueError)."""
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        """The inverse transform (one object, kept): ``t.inv(y)`` is ``x``."""
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self):
        """+1 or -1: whether the transform is increasing or decreasing (for monotone elementwise transforms)."""
        raise NotImplementedError

    def with_cache(self, cache_size=1):
        """This transform with ``cache_size`` (0 or 1) changed: itself when it already has it."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        """``log |dy/dx|`` at ``x`` (with ``y = t(x)``), elementwise; summed over the event dims where the transform has
        them."""
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__ + "()"

    def forward_shape(self, shape):
        """The shape of ``t(x)`` for an ``x`` of ``shape`` (the same shape for elementwise transforms)."""
        return shape

    def inverse_shape(self, shape):
        """The shape of ``t.inv(y)`` for a ``y`` of ``shape``."""
        return shape


class _InverseTransform(Transform):
    """The inverse of a transform, sharing its cache."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        """The inverted transform's codomain."""
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        """The inverted transform's domain."""
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size=1):
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __repr__(self):
        return f"{type(self).__name__}({self._inv!r})"

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """``parts`` applied in order; the event dimension grows to the largest any part needs."""

    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = parts

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        """The first part's domain, widened to as many event dims as the parts together need."""
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim = max(event_dim + part.domain.event_dim - part.codomain.event_dim, part.domain.event_dim)
        return constraints.independent(domain, event_dim - domain.event_dim) if event_dim > domain.event_dim \
            else domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        """The last part's codomain, widened to as many event dims as the parts together need."""
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim = max(event_dim + part.codomain.event_dim - part.domain.event_dim, part.codomain.event_dim)
        return constraints.independent(codomain, event_dim - codomain.event_dim) if event_dim > codomain.event_dim \
            else codomain

    @lazy_property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @lazy_property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self):
        if self._inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv, inv._inv = inv, self
        return self._inv

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for part, x, y in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(sum_rightmost(part.log_abs_det_jacobian(x, y), event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return functools.reduce(operator.add, terms)

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self):
        return type(self).__name__ + "(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


def _parameter_free(cls):
    """Class decorator for a transform without parameters: it equals any instance of ``cls`` (torch's
    ``isinstance`` test) and hashes by identity."""
    cls.__eq__ = lambda self, other: isinstance(other, cls)
    cls.__hash__ = object.__hash__
    return cls


@_parameter_free
class ExpTransform(Transform):
    """``y = exp(x)``, from the reals to the positive numbers; log-det ``x``."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class AffineTransform(Transform):
    """``y = loc + scale * x``; with ``event_dim`` > 0 the log-det sums over that many rightmost dims."""
    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        """The real numbers, with ``event_dim`` dims per event."""
        return constraints.real if self.event_dim == 0 else constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        """The real numbers, with ``event_dim`` dims per event."""
        return constraints.real if self.event_dim == 0 else constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        return _same_parameter(self.loc, other.loc) and _same_parameter(self.scale, other.scale)

    __hash__ = object.__hash__

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Number):
            return 1 if self.scale > 0 else -1 if self.scale < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Number):
            result = full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self.event_dim:
            result = result.reshape(tuple(result.shape[:result.ndim - self.event_dim]) + (-1,)).sum(-1)
            shape = shape[:len(shape) - self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return Size(np.broadcast_shapes(tuple(shape), tuple(getattr(self.loc, "shape", ())),
                                        tuple(getattr(self.scale, "shape", ()))))

    inverse_shape = forward_shape


@_parameter_free
class SigmoidTransform(Transform):
    """``y = sigmoid(x)``, clamped inside (0, 1); log-det ``-softplus(-x) - softplus(x)``."""
    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def _call(self, x):
        finfo = finfo_of(x.dtype)
        return x.sigmoid().clamp(min=float(finfo.tiny), max=1.0 - float(finfo.eps))

    def _inverse(self, y):
        finfo = finfo_of(y.dtype)
        y = y.clamp(min=float(finfo.tiny), max=1.0 - float(finfo.eps))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -_ops.softplus(-x) - _ops.softplus(x)


@_parameter_free
class TanhTransform(Transform):
    """``y = tanh(x)``; its log-det ``2 (log 2 - x - softplus(-2x))`` stays finite where tanh saturates."""
    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return y.atanh()

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - _ops.softplus(-2.0 * x))


@_parameter_free
class AbsTransform(Transform):
    """``y = |x|`` (not injective: the inverse gives the positive root)."""
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class PowerTransform(Transform):
    """``y = x^exponent`` on the positive numbers; log-det ``log |exponent y / x|``."""
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, PowerTransform):
            return False
        return _same_parameter(self.exponent, other.exponent)

    __hash__ = object.__hash__

    @property
    def sign(self):
        return self.exponent.sign() if hasattr(self.exponent, "sign") else (self.exponent > 0) - (self.exponent < 0)

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return Size(np.broadcast_shapes(tuple(shape), tuple(getattr(self.exponent, "shape", ()))))

    inverse_shape = forward_shape


def _same_parameter(a, b):
    """Whether two transform parameters (numbers or tensors) are equal everywhere."""
    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        return a == b
    return bool((a == b).all())


@_parameter_free
class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))``, from the reals to the positive numbers; log-det ``-softplus(-x)``."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x):
        return _ops.softplus(x)

    def _inverse(self, y):
        return (-(-y).expm1()).log() + y

    def log_abs_det_jacobian(self, x, y):
        return -_ops.softplus(-x)


@_parameter_free
class SoftmaxTransform(Transform):
    """Unconstrained vectors to the simplex by softmax over the last dim (not bijective: no log-det)."""
    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        probs = (x - x.amax(-1, keepdim=True)).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape

    inverse_shape = forward_shape


def _stick_offsets(x, n):
    """log(n + 1 - k) for k = 1..n, of x's dtype and device: the shifts that centre the stick-breaking at zero."""
    return (n + 1 - x.new_ones((n,)).cumsum(-1)).log()


def _clipped_sigmoid(x):
    finfo = finfo_of(x.dtype)
    return x.sigmoid().clamp(min=float(finfo.tiny), max=1.0 - float(finfo.eps))


@_parameter_free
class StickBreakingTransform(Transform):
    """Vectors of n reals to the simplex of n + 1 entries by breaking a stick: each entry takes a sigmoid share of what
    the previous ones left."""
    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def _call(self, x):
        z = _clipped_sigmoid(x - _stick_offsets(x, x.shape[-1]))
        ones = x.new_ones(tuple(x.shape[:-1]) + (1,))
        return _ops.cat([z, ones], -1) * _ops.cat([ones, (1 - z).cumprod(-1)], -1)

    def _inverse(self, y):
        crop = y[..., :-1]
        left = (1 - crop.cumsum(-1)).clamp(min=float(finfo_of(y.dtype).tiny))
        return crop.log() - left.log() + _stick_offsets(y, crop.shape[-1])

    def log_abs_det_jacobian(self, x, y):
        shifted = x - _stick_offsets(x, x.shape[-1])
        return (-shifted - _ops.softplus(-shifted) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class IndependentTransform(Transform):
    """``base_transform`` with ``reinterpreted_batch_ndims`` more rightmost dims treated as one event (its log-det
    summed over them)."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        """The base domain with the extra event dims."""
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        """The base codomain with the extra event dims."""
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        """Whether the base transform is."""
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.ndim < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.ndim < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshapes the rightmost ``in_shape`` dims to ``out_shape`` (same number of elements); log-det 0."""
    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape = Size(in_shape)
        self.out_shape = Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        """Real tensors with ``in_shape`` as the event."""
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        """Real tensors with ``out_shape`` as the event."""
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        return x.reshape(tuple(x.shape[:x.ndim - len(self.in_shape)]) + tuple(self.out_shape))

    def _inverse(self, y):
        return y.reshape(tuple(y.shape[:y.ndim - len(self.out_shape)]) + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[:x.ndim - len(self.in_shape)]))

    def _swap(self, shape, from_shape, to_shape):
        if len(shape) < len(from_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(from_shape)
        if tuple(shape[cut:]) != tuple(from_shape):
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} but got {tuple(from_shape)}")
        return Size(tuple(shape[:cut]) + tuple(to_shape))

    def forward_shape(self, shape):
        return self._swap(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._swap(shape, self.out_shape, self.in_shape)


@_parameter_free
class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower-triangular ones with a positive diagonal: the strict lower triangle
    kept, the diagonal exponentiated."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + _ops.diag_embed(x.diagonal(dim1=-2, dim2=-1).exp())

    def _inverse(self, y):
        return y.tril(-1) + _ops.diag_embed(y.diagonal(dim1=-2, dim2=-1).log())


class CumulativeDistributionTransform(Transform):
    """A distribution's CDF as a transform to the unit interval (its inverse is the icdf); log-det ``log_prob``."""
    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        """The distribution's support."""
        return self.distribution.support

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


@_parameter_free
class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive-definite ones: L L^T for L their LowerCholeskyTransform."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x):
        low = LowerCholeskyTransform()(x)
        return low @ low.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(_ops.linalg_cholesky(y))


def _check_length(t, x, what):
    if not -x.ndim <= t.dim < x.ndim:
        raise ValueError(f"dim {t.dim} out of range for {what} with {x.ndim} dimensions")
    if x.shape[t.dim] != t.length:
        raise ValueError(f"{what}.size({t.dim}) = {x.shape[t.dim]} must equal length {t.length}")


class CatTransform(Transform):
    """``tseq`` applied to consecutive slices of ``lengths`` along ``dim`` (torch.cat's layout)."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"lengths ({len(self.lengths)}) must match transforms ({len(self.transforms)})")
        self.dim = dim

    @lazy_property
    def event_dim(self):
        """The largest event dim of the parts."""
        return max(t.event_dim for t in self.transforms)

    @lazy_property
    def length(self):
        """The total length along ``dim``."""
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _slices(self, x):
        start = 0
        for t, length in zip(self.transforms, self.lengths):
            yield t, x.narrow(self.dim, start, length)
            start += length

    def _call(self, x):
        _check_length(self, x, "x")
        return _ops.cat([t(part) for t, part in self._slices(x)], self.dim)

    def _inverse(self, y):
        _check_length(self, y, "y")
        return _ops.cat([t.inv(part) for t, part in self._slices(y)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        _check_length(self, x, "x")
        _check_length(self, y, "y")
        parts = []
        for (t, xs), (_, ys) in zip(self._slices(x), self._slices(y)):
            part = t.log_abs_det_jacobian(xs, ys)
            parts.append(sum_rightmost(part, self.event_dim - t.event_dim) if t.event_dim < self.event_dim else part)
        dim = (self.dim - x.ndim if self.dim >= 0 else self.dim) + self.event_dim
        return _ops.cat(parts, dim) if dim < 0 else functools.reduce(operator.add, parts)

    @property
    def bijective(self):
        """Whether every part is."""
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        """The parts' domains, concatenated."""
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        """The parts' codomains, concatenated."""
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """``tseq`` applied to the successive entries along ``dim`` (torch.stack's layout)."""

    def __init__(self, tseq, dim=0, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _entries(self, x):
        if not -x.ndim <= self.dim < x.ndim:
            raise ValueError(f"dim {self.dim} out of range for x with {x.ndim} dimensions")
        if x.shape[self.dim] != len(self.transforms):
            raise ValueError(f"x.size({self.dim}) = {x.shape[self.dim]} must equal {len(self.transforms)}")
        return [x.select(self.dim, i) for i in range(x.shape[self.dim])]

    def _call(self, x):
        return _ops.stack([t(v) for v, t in zip(self._entries(x), self.transforms)], self.dim)

    def _inverse(self, y):
        return _ops.stack([t.inv(v) for v, t in zip(self._entries(y), self.transforms)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        pairs = zip(self._entries(x), self._entries(y), self.transforms)
        return _ops.stack([t.log_abs_det_jacobian(xs, ys) for xs, ys, t in pairs], self.dim)

    @property
    def bijective(self):
        """Whether every part is."""
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        """The parts' domains, stacked."""
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        """The parts' codomains, stacked."""
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


@_parameter_free
class CorrCholeskyTransform(Transform):
    """Vectors of D(D-1)/2 reals to Cholesky factors of D x D correlation matrices: tanh to (-1, 1), laid below the
    diagonal, then each row scaled by stick-breaking to unit length."""
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        eps = float(finfo_of(x.dtype).eps)
        r = vec_to_tril_matrix(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        left = (1 - r.pow(2)).sqrt().cumprod(-1)
        ones = r.new_ones(tuple(r.shape[:-1]) + (1,))
        eye = _ops.diag_embed(r.new_ones((r.shape[-1],)))
        return (r + eye) * _ops.cat([ones, left[..., :-1]], -1)

    def _inverse(self, y):
        left = 1 - (y * y).cumsum(-1)
        ones = y.new_ones(tuple(y.shape[:-1]) + (1,))
        shifted = _ops.cat([ones, left[..., :-1]], -1)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(shifted, diag=-1).sqrt()
        return (t.log1p() - (-t).log1p()) / 2

    def log_abs_det_jacobian(self, x, y):
        left = tril_matrix_to_vec(1 - (y * y).cumsum(-1), diag=-2)
        stick_breaking = 0.5 * left.log().sum(-1)
        tanh = -2 * (x + _ops.softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))
