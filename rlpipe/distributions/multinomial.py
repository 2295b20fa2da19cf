"""``Multinomial``: counts over categories in ``total_count`` draws from a Categorical."""
from .. import primitives as P
from .._creation import full_like, ones_like, tensor
from ..autograd import no_grad
from . import constraints
from ._discrete_sampling import binomial
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import forwarded_property

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """Counts of each category (the last dim of ``probs`` or ``logits``) in ``total_count`` independent draws.
    ``sample`` needs one ``total_count`` (an int); ``log_prob`` takes any counts."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        super().__init__(batch_shape, self._categorical.param_shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        """Non-negative counts summing to at most total_count."""
        return constraints.multinomial(self.total_count)

    logits = forwarded_property("_categorical", "logits", "The log-probabilities of the categories (normalized).")
    probs = forwarded_property("_categorical", "probs", "The probabilities of the categories.")
    param_shape = forwarded_property("_categorical", "param_shape", "The shape of the probs or logits parameter.")

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        """Counts drawn category by category: each a binomial of the draws left, at its probability among the
        categories left."""
        shape = self._extended_shape(sample_shape)
        with no_grad():
            probs = self.probs.expand(shape)
            left = full_like(probs[..., 0], float(self.total_count))
            mass_left = ones_like(left)
            counts = []
            for k in range(shape[-1] - 1):
                share = P.where(mass_left > 0, probs[..., k] / mass_left, 0.0).clamp(min=0.0, max=1.0)
                counts.append(binomial(left, share))
                left = left - counts[-1]
                mass_left = mass_left - probs[..., k]
            return P.stack(counts + [left], -1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = P.broadcast_tensors(self.logits, value)
        logits = P.where((value == 0) & (logits == float("-inf")), 0.0, logits)
        return P.lgamma(value.sum(-1) + 1) - P.lgamma(value + 1).sum(-1) + (logits * value).sum(-1)

    def entropy(self):
        n = tensor(float(self.total_count), dtype=self.probs.dtype, device=self.probs.device)
        term1 = n * self._categorical.entropy() - P.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        return term1 + (binomial_probs * P.lgamma(support + 1)).sum(0).sum(-1)
