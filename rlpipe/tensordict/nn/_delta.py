"""``Delta``: the distribution probabilistic modules use when given none (tensordict's own; torchrl's
``rlpipe.modules.distributions`` exports the same class)."""
import math

from ... import distributions as D
from ...autograd import no_grad

__all__ = ["Delta"]


class Delta(D.Distribution):
    """All mass on ``param``: log_prob is +inf where a value matches it (within atol + rtol |param|)
    over the event, -inf elsewhere. Without shapes, the last dim of param is the event."""
    arg_constraints = {}

    def __init__(self, param, atol=1e-6, rtol=1e-6, batch_shape=None, event_shape=None):
        batch_shape = () if batch_shape is None else batch_shape
        event_shape = () if event_shape is None else event_shape
        self.update(param)
        self.atol, self.rtol = atol, rtol
        if not len(batch_shape) and not len(event_shape):
            batch_shape, event_shape = param.shape[:-1], param.shape[-1:]
        super().__init__(batch_shape=batch_shape, event_shape=event_shape)

    def expand(self, batch_shape, _instance=None):
        if tuple(self.batch_shape) != tuple(batch_shape):
            return type(self)(self.param.expand((*batch_shape, *self.event_shape)), atol=self.atol, rtol=self.rtol,
                              batch_shape=batch_shape, event_shape=self.event_shape)
        return self

    def update(self, param):
        """Replaces the parameter the distribution returns."""
        self.param = param

    def _is_equal(self, value):
        param = self.param.expand_as(value)
        is_equal = (value - param).abs() < self.atol + self.rtol * param.abs()
        for _ in self.event_shape:
            is_equal = is_equal.all(-1)
        return is_equal

    def log_prob(self, value):
        """+inf where ``value`` equals the parameter (within ``atol``/``rtol``), -inf elsewhere."""
        is_equal = self._is_equal(value)
        return (is_equal.to(value.dtype) * 2 - 1) * math.inf

    def sample(self, size=None):
        with no_grad():
            return self.rsample(size)

    def rsample(self, size=None):
        return self.param.expand(*(size or ()), *self.param.shape)

    @property
    def mode(self):
        """The parameter."""
        return self.param

    @property
    def deterministic_sample(self):
        """The parameter itself (a Delta has no randomness)."""
        return self.mean

    @property
    def mean(self):
        """The parameter."""
        return self.param
