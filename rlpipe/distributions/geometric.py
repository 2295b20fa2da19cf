"""``Geometric``: the number of failures before the first success of Bernoulli(probs) trials."""
from .. import primitives as P
from .._creation import zeros_like
from ..autograd import no_grad
from . import constraints
from .bernoulli import binary_cross_entropy_with_logits
from .distribution import Distribution
from .utils import BinaryParameters, batch_shape_for, broadcast_all, standard_uniform, tiny_of

__all__ = ["Geometric"]


class Geometric(BinaryParameters, Distribution):
    """P(k) = (1 - p)^k p for k = 0, 1, ...; given by ``probs`` (in (0, 1]) or ``logits``, not both."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._set_binary_parameter(probs, logits)
        super().__init__(batch_shape_for((probs if probs is not None else logits,), self._param),
                         validate_args=validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            raise ValueError(f"Expected parameter probs ({type(self.probs).__name__} of shape "
                             f"{tuple(self.probs.shape)}) of distribution {self!r} to be positive but found invalid "
                             f"values:\n{self.probs[~(self.probs > 0)]}")

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(self._expand_parameters(Geometric, batch_shape, ("probs", "logits"), _instance))

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        tiny = tiny_of(self.probs.dtype)
        with no_grad():
            u = standard_uniform(self._extended_shape(sample_shape), self.probs.dtype, self.probs.device)
            return (u.clamp(min=tiny).log() / P.log1p(-self.probs)).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = P.where((probs == 1) & (value == 0), 0.0, probs)
        return value * P.log1p(-probs) + self.probs.log()

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs) / self.probs
