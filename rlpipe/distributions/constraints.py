"""Constraints: what values a distribution's parameters and samples may take (torch's
``torch.distributions.constraints``). ``check(value)`` returns a bool tensor over the value's batch
(the ``event_dim`` rightmost dimensions are reduced)."""
import numpy as np

from .._dtypes import bool as _bool
from ..primitives.decompositions import cholesky_ex, eigvalsh
from ..primitives.shape import cat as _cat, stack as _stack

__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "greater_than", "greater_than_eq",
           "half_open_interval", "independent", "integer_interval", "interval", "is_dependent", "less_than",
           "nonnegative", "nonnegative_integer", "one_hot", "positive", "positive_integer", "real", "real_vector",
           "simplex", "unit_interval", "multinomial", "lower_triangular", "lower_cholesky", "square", "symmetric",
           "positive_semidefinite", "positive_definite", "MixtureSameFamilyConstraint", "cat", "stack",
           "corr_cholesky"]


class Constraint:
    """A region of values; ``is_discrete`` and ``event_dim`` describe it."""
    is_discrete = False
    event_dim = 0

    def check(self, value):
        """A bool tensor: True where ``value`` lies in the region (one result per event)."""
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for a constraint that depends on other parameters; it cannot be checked."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        return _Dependent(is_discrete=self._is_discrete if is_discrete is NotImplemented else is_discrete,
                          event_dim=self._event_dim if event_dim is NotImplemented else event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    """True when ``constraint`` is a placeholder that depends on other parameters (it cannot be checked)."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property that is also a dependent constraint (``support`` of a Categorical depends on its size):
    read on an instance it computes the constraint, read on the class it is the placeholder."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _OverBase(Constraint):
    """A constraint built over another, ``base_constraint``: discrete when that one is."""

    def __init__(self, base_constraint):
        if not isinstance(base_constraint, Constraint):
            raise TypeError(f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        self.base_constraint = base_constraint

    @property
    def is_discrete(self):
        """Whether the base constraint is discrete."""
        return self.base_constraint.is_discrete


class _IndependentConstraint(_OverBase):
    """``base_constraint`` with ``reinterpreted_batch_ndims`` more dimensions treated as the event."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        super().__init__(base_constraint)
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise ValueError(f"reinterpreted_batch_ndims must be an int >= 0, got {reinterpreted_batch_ndims!r}")
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def event_dim(self):
        """The base constraint's event dims plus ``reinterpreted_batch_ndims``."""
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        if result.ndim < self.reinterpreted_batch_ndims:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.ndim}")
        result = result.reshape(tuple(result.shape[:result.ndim - self.reinterpreted_batch_ndims]) + (-1,))
        return result.all(-1)

    def __repr__(self):
        return f"{type(self).__name__[1:]}({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Boolean(Constraint):
    """0 or 1."""
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    """One-hot vectors along the last dim."""
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & value.sum(-1).eq(1)


class _Bounded(Constraint):
    """A constraint with bounds; its repr lists them by name, as torch's."""
    _bounds = ()

    def __repr__(self):
        return type(self).__name__[1:] + "(" + ", ".join(f"{b}={getattr(self, b)}" for b in self._bounds) + ")"


class _IntegerInterval(_Bounded):
    """Integers in ``[lower_bound, upper_bound]``."""
    is_discrete = True
    _bounds = ("lower_bound", "upper_bound")

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)


class _IntegerGreaterThan(_Bounded):
    """Integers ``>= lower_bound``."""
    is_discrete = True
    _bounds = ("lower_bound",)

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)


class _Real(Constraint):
    """Any real number (not NaN)."""
    def check(self, value):
        return value == value  # False for nan


class _GreaterThan(_Bounded):
    """Numbers ``> lower_bound``."""
    _bounds = ("lower_bound",)

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value


class _GreaterThanEq(_GreaterThan):
    """Numbers ``>= lower_bound``."""
    def check(self, value):
        return self.lower_bound <= value


class _LessThan(_Bounded):
    """Numbers ``< upper_bound``."""
    _bounds = ("upper_bound",)

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound


class _Interval(_Bounded):
    """Numbers in ``[lower_bound, upper_bound]``."""
    _bounds = ("lower_bound", "upper_bound")

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)


class _HalfOpenInterval(_Interval):
    """Numbers in ``[lower_bound, upper_bound)``."""
    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)


class _Simplex(Constraint):
    """Non-negative vectors along the last dim that sum to 1 (within 1e-6)."""
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()


class _Multinomial(Constraint):
    """Non-negative integer vectors whose sum is at most ``upper_bound`` (torch checks the weaker ``<=``)."""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return (value >= 0).all(-1) & (value.sum(-1) <= self.upper_bound)


def _all_of_matrix(flags):
    """One bool per matrix: whether every element's flag is set."""
    return flags.reshape(tuple(flags.shape[:-2]) + (-1,)).all(-1)


class _LowerTriangular(Constraint):
    """Square matrices with zeros above the diagonal."""
    event_dim = 2

    def check(self, value):
        return _all_of_matrix(value.tril() == value)


class _LowerCholesky(Constraint):
    """Lower-triangular matrices with a positive diagonal (Cholesky factors)."""
    event_dim = 2

    def check(self, value):
        return _all_of_matrix(value.tril() == value) & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _Square(Constraint):
    """Square matrices."""
    event_dim = 2

    def check(self, value):
        return value.new_full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1], dtype=_bool)


class _Symmetric(_Square):
    """Symmetric square matrices (within an absolute 1e-6)."""

    def check(self, value):
        square = super().check(value)
        if not square.all():
            return square
        return _all_of_matrix(value.isclose(value.mT, atol=1e-6))


class _PositiveSemidefinite(_Symmetric):
    """Symmetric matrices with no negative eigenvalue."""

    def check(self, value):
        symmetric = super().check(value)
        if not symmetric.all():
            return symmetric
        return eigvalsh(value).ge(0).all(-1)


class _PositiveDefinite(_Symmetric):
    """Symmetric matrices with a Cholesky factorization."""

    def check(self, value):
        symmetric = super().check(value)
        if not symmetric.all():
            return symmetric
        return cholesky_ex(value).info.eq(0)


multinomial = _Multinomial
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()


class MixtureSameFamilyConstraint(_OverBase):
    """A component distribution's support checked for a mixture's values (the component dim put back first)."""

    @property
    def event_dim(self):
        """The component support's event dims."""
        return self.base_constraint.event_dim

    def check(self, value):
        if value.ndim < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.ndim}")
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        keep = value.ndim - self.event_dim
        return result.reshape(tuple(result.shape[:keep]) + (-1,)).all(-1)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_constraint!r})"


def _check_dim(dim, value, what="value"):
    if not -value.ndim <= dim < value.ndim:
        raise ValueError(f"dim {dim} out of range for {what} with {value.ndim} dimensions")


class _Cat(Constraint):
    """``cseq`` applied to consecutive slices of ``lengths`` along ``dim`` (torch.cat's layout)."""

    def __init__(self, cseq, dim=0, lengths=None):
        if not all(isinstance(c, Constraint) for c in cseq):
            raise TypeError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise ValueError(f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")
        self.dim = dim

    @property
    def is_discrete(self):
        """Whether any part is discrete."""
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        """The largest event dim of the parts."""
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        _check_dim(self.dim, value)
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start += length
        return _cat(checks, self.dim)


class _Stack(Constraint):
    """``cseq`` applied to the successive entries along ``dim`` (torch.stack's layout)."""

    def __init__(self, cseq, dim=0):
        if not all(isinstance(c, Constraint) for c in cseq):
            raise TypeError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.dim = dim

    @property
    def is_discrete(self):
        """Whether any part is discrete."""
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        """The largest event dim of the parts (one more when ``dim`` lies within the event)."""
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value):
        _check_dim(self.dim, value)
        parts = [value.select(self.dim, i) for i in range(value.shape[self.dim])]
        return _stack([c.check(v) for v, c in zip(parts, self.cseq)], self.dim)


cat = _Cat
stack = _Stack


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: positive diagonal, rows of unit length."""
    event_dim = 2

    def check(self, value):
        tol = float(np.finfo(value.dtype.np).eps) * value.shape[-1] * 10
        row_norm = (value.detach() * value.detach()).sum(-1).sqrt()
        return _LowerCholesky().check(value) & ((row_norm - 1).abs() <= tol).all(-1)


corr_cholesky = _CorrCholesky()
