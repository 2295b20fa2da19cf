"""``Distribution``: the base class, with torch.distributions' shapes, validation and repr."""
import warnings

from .. import primitives as _ops
from .._tensor import Tensor, Size
from ..autograd import no_grad
from ..primitives.reductions import _is_all_true
from . import constraints
from .utils import lazy_property, extended_size

__all__ = ["Distribution"]


class Distribution:
    """A batch of probability distributions: ``batch_shape`` independent ones, each over values of
    ``event_shape``. Parameters are checked against ``arg_constraints`` and values against ``support``
    when ``validate_args`` is on (the default, as in torch; ``set_default_validate_args(False)``
    turns it off everywhere)."""
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Turns argument and sample validation on or off for every distribution created afterwards without
        ``validate_args``."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args expects True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{type(self)} does not define `arg_constraints`. Please set `arg_constraints = {{}}` "
                              "or initialize the distribution with `validate_args=False` to turn off validation.",
                              stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # derived lazily from the parameter that was given
                value = getattr(self, param)
                if not _is_all_true(constraint.check(value)):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        """A new distribution with the parameters expanded (as views) to ``batch_shape``."""
        raise NotImplementedError

    @property
    def batch_shape(self):
        """The shape of the batch of independent distributions."""
        return self._batch_shape

    @property
    def event_shape(self):
        """The shape of one sample of one distribution (``()`` for a scalar distribution)."""
        return self._event_shape

    @property
    def arg_constraints(self):
        """``{parameter name: constraint}`` that validation checks the parameters against."""
        raise NotImplementedError

    @property
    def support(self):
        """The constraint every value of the distribution satisfies (``log_prob``'s inputs are checked against it)."""
        raise NotImplementedError

    @property
    def mean(self):
        """The mean of each distribution, of shape ``batch_shape + event_shape``."""
        raise NotImplementedError

    @property
    def mode(self):
        """The most likely value of each distribution."""
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self):
        """The variance of each distribution, of shape ``batch_shape + event_shape``."""
        raise NotImplementedError

    @property
    def stddev(self):
        """The standard deviation: the square root of ``variance``."""
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """``sample_shape + batch_shape + event_shape`` draws, without gradients."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """Reparameterized draws: gradients flow to the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        """``sample((n,))``, with torch's FutureWarning."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value):
        """The log of the probability (density or mass) of ``value`` under each distribution, of shape ``batch_shape``
        (broadcast with value's leading dims)."""
        raise NotImplementedError

    def cdf(self, value):
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value):
        """The inverse of ``cdf``: the value below which the given probability lies."""
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        """Every value of a discrete distribution, stacked along a new dim 0 (expanded over ``batch_shape`` unless
        ``expand=False``)."""
        raise NotImplementedError

    def entropy(self):
        """The entropy of each distribution (in nats), of shape ``batch_shape``."""
        raise NotImplementedError

    def perplexity(self):
        """``exp(entropy())``."""
        return _ops.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        return extended_size(sample_shape, self._batch_shape, self._event_shape)

    def _validate_sample(self, value):
        """Checks that ``value`` is a tensor whose right-most dimensions match the event shape, that
        broadcasts with batch_shape + event_shape, and that lies in the support."""
        if not isinstance(value, Tensor) and not hasattr(type(value), "__torch_function__"):  # (vmap's stand-in)
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.ndim - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape} vs "
                             f"{self._event_shape}.")
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(tuple(value.shape)), reversed(tuple(expected))):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {value.shape} vs "
                                 f"{Size(expected)}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{type(self)} does not define `support` to enable sample validation. Please initialize "
                          "the distribution with `validate_args=False` to turn off validation.", stacklevel=2)
            return
        if not _is_all_true(support.check(value)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def _expand_parameters(self, cls, batch_shape, names, _instance=None):
        """``expand`` for a distribution whose parameters (those of ``names`` it holds) all have the batch shape:
        a new instance of ``cls`` with each expanded, validation as this one's."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = Size(batch_shape)
        for name in names:
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
                         for p in names)
        return f"{type(self).__name__}({args})"
