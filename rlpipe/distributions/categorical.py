"""``Categorical``: a distribution over ``{0, ..., K-1}`` from (unnormalized) ``probs`` or ``logits``."""
import math

from .. import _dtypes, primitives as _ops
from .._creation import arange, full
from .._tensor import Size
from ..autograd import no_grad
from . import constraints
from .distribution import Distribution
from .utils import finfo_of, lazy_property, logits_to_probs, probs_to_logits, standard_uniform

__all__ = ["Categorical"]


class Categorical(Distribution):
    """The last dimension of ``probs``/``logits`` indexes the K categories; the others are the batch.
    ``probs`` are normalized to sum to 1, ``logits`` to logsumexp 0."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = self._param.shape[:-1] if self._param.ndim > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = Size(batch_shape)
        param_shape = tuple(batch_shape) + (self._num_events,)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(param_shape))
                new._param = new.__dict__[name]
        new._num_events = self._num_events
        super(Categorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        """The shape of the parameter (``probs`` or ``logits``): ``batch_shape`` plus the number of categories."""
        return self._param.size()

    @property
    def mean(self):
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    @property
    def variance(self):
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    def sample(self, sample_shape=()):
        """Category indices by inverse CDF: the number of cumulative probabilities at or below a uniform draw."""
        shape = self._extended_shape(sample_shape)
        with no_grad():
            cdf = self.probs.detach().cumsum(-1)
            u = standard_uniform(tuple(shape) + (1,), cdf.dtype, cdf.device) * cdf[..., -1:]
            return (cdf <= u).sum(-1).clamp(max=self._num_events - 1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        index, log_pmf = _ops.broadcast_tensors(value.long().unsqueeze(-1), self.logits)
        return log_pmf.gather(-1, index[..., :1]).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=float(finfo_of(self.logits.dtype).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = arange(self._num_events, dtype=_dtypes.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values

