"""``Bernoulli``: 1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""
import math
import numbers

from .. import primitives as _ops
from .._creation import arange
from .._tensor import Size
from ..autograd import no_grad
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits, standard_uniform

__all__ = ["Bernoulli"]


def binary_cross_entropy_with_logits(logits, target):
    """-(target * log(sigmoid(logits)) + (1 - target) * log(1 - sigmoid(logits))), without overflow."""
    return logits.clamp(min=0) - target * logits + (-logits.abs()).exp().log1p()


class Bernoulli(Distribution):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0; samples in the parameter's float dtype."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        param, = broadcast_all(given)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        self._param = param
        super().__init__(Size() if isinstance(given, numbers.Number) else param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = Size(batch_shape)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape))
                new._param = new.__dict__[name]
        super(Bernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        """The shape of the parameter (``probs`` or ``logits``, whichever was given)."""
        return self._param.size()

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        """1 where probs > 0.5, 0 where below, nan at exactly 0.5 (no single mode)."""
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return _ops.where(self.probs == 0.5, math.nan, mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            probs = self.probs.detach()
            return (standard_uniform(shape, probs.dtype, probs.device) < probs).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value)

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        values = arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
