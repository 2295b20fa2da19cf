"""torchrl's discrete action distributions: ``OneHotCategorical`` (one-hot samples, long) and
``MaskedCategorical`` (a Categorical over the actions a mask allows)."""
import enum

from ... import primitives as _ops, _dtypes
from ..._creation import zeros_like
from ... import distributions as D
from ...distributions.utils import finfo_of, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["MaskedCategorical", "OneHotCategorical", "ReparamGradientStrategy"]


class ReparamGradientStrategy(enum.Enum):
    """How ``OneHotCategorical.rsample`` passes gradients: straight through the sample, or a relaxed one-hot."""
    PassThrough = 1
    RelaxedOneHot = 2


def _treat_categorical_params(params):
    """A trailing dimension of size 1 is dropped (torchrl's convention)."""
    if params is not None and params.shape[-1] == 1:
        params = params[..., 0]
    return params


class OneHotCategorical(D.Categorical):
    """A Categorical whose samples are one-hot (int64) and whose ``log_prob`` reads one-hot values;
    ``rsample`` passes the gradient of the probabilities through (``grad_method=PassThrough``; rlpipe
    has no ``RelaxedOneHot`` strategy)."""
    num_params = 1

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    def __init__(self, logits=None, probs=None, grad_method=ReparamGradientStrategy.PassThrough, **kwargs):
        logits, probs = _treat_categorical_params(logits), _treat_categorical_params(probs)
        if grad_method is not ReparamGradientStrategy.PassThrough:
            raise NotImplementedError(f"grad_method={grad_method}: rlpipe implements only the PassThrough strategy")
        self.grad_method = grad_method
        super().__init__(probs=probs, logits=logits, **kwargs)
        self.num_samples = (logits if logits is not None else probs).shape[-1]

    def log_prob(self, value):
        return super().log_prob(value.argmax(dim=-1))

    @property
    def mode(self):
        params = self.logits if "logits" in self.__dict__ else self.probs
        return (params == params.max(-1, True)[0]).to(_dtypes.int64)

    @property
    def deterministic_sample(self):
        """The mode: the one-hot vector of the most likely class."""
        return self.mode

    def sample(self, sample_shape=None):
        return _ops.one_hot(super().sample(() if sample_shape is None else sample_shape), self.num_samples)

    def rsample(self, sample_shape=None):
        probs = self.probs
        return self.sample(sample_shape) + probs - probs.detach()


class MaskedCategorical(D.Categorical):
    """A Categorical restricted to allowed actions. Give either a boolean ``mask`` (same last dim as the
    logits; masked logits become ``neg_inf``) or sparse ``indices`` of the allowed actions (the
    distribution is then over those entries, samples are the indices' values, and ``padding_value``
    marks padding entries). Disallowed values score ``neg_inf``. ``use_cross_entropy`` is kept for
    torchrl's API: its cross-entropy path and the gather path give the same values and gradients here."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    def __init__(self, logits=None, probs=None, *, mask=None, indices=None, neg_inf=float("-inf"), padding_value=None,
                 use_cross_entropy=True, padding_side="left"):
        if not ((mask is None) ^ (indices is None)):
            raise ValueError(f"A ``mask`` or some ``indices`` must be provided for {type(self)}, but not both.")
        sparse_mask = mask is None
        if sparse_mask:
            mask = indices
        if probs is not None:
            if logits is not None:
                raise ValueError("Either `probs` or `logits` must be specified, but not both.")
            if mask.dtype == _dtypes.bool:
                probs = probs.masked_fill(~mask, 0)
            else:
                probs = zeros_like(probs).scatter(-1, indices, probs.gather(-1, indices))
            probs = probs / probs.sum(-1, keepdim=True)
            logits = probs.log()
        num_samples = logits.shape[-1]
        self.use_cross_entropy = use_cross_entropy
        logits = self._mask_logits(logits, mask, neg_inf=neg_inf, sparse_mask=sparse_mask, padding_value=padding_value)
        self.neg_inf = neg_inf
        self._mask = mask
        self._sparse_mask = sparse_mask
        self._padding_value = padding_value
        self._padding_side = padding_side
        super().__init__(logits=logits)
        self.num_samples = num_samples

    @property
    def padding_value(self):
        """The value given to masked-out classes' log-probabilities when padding (0 when unset)."""
        return self._padding_value if self._padding_value is not None else 0

    @property
    def padding_side(self):
        """Which side sparse masks are padded on (``"left"`` or ``"right"``)."""
        return self._padding_side

    @property
    def mask(self):
        """The boolean mask of allowed classes (a ValueError for a sparse mask, given as indices)."""
        if self._sparse_mask:
            raise ValueError("MaskedCategorical.mask does not support sparse masks")
        return self._mask

    def entropy(self):
        """The entropy over the allowed actions (masked entries count as probability 0)."""
        logits = self.logits
        if self._mask.dtype == _dtypes.bool:
            mask = self._mask
            while mask.ndim < logits.ndim:
                mask = mask.unsqueeze(-1)
            logits = logits.masked_fill(~mask.expand_as(logits) | ~logits.isfinite(),
                                        float(finfo_of(logits.dtype).min))
        logits = logits - logits.logsumexp(-1, keepdim=True)
        return -(logits * logits.exp()).sum(-1)

    def sample(self, sample_shape=None):
        sample_shape = () if sample_shape is None else tuple(sample_shape)
        ret = super().sample(sample_shape)
        if not self._sparse_mask:
            return ret
        outer = 1
        for n in sample_shape:
            outer *= n
        inner = 1
        for n in self._mask.shape[:-1]:
            inner *= n
        idx_3d = self._mask.reshape(1, inner, -1).expand(outer, inner, self._mask.shape[-1])
        return idx_3d.gather(-1, ret.reshape(outer, inner, 1)).reshape(ret.shape)

    def log_prob(self, value):
        if not self._sparse_mask:
            result = super().log_prob(value)
            return _ops.where(result.isfinite(), result, self.neg_inf)
        idx_3d = self._mask.view(1, -1, self._num_events)
        val_3d = value.view(-1, idx_3d.shape[1], 1)
        match = idx_3d == val_3d
        idx = match.int().argmax(dim=-1, keepdim=True).view_as(value)
        ret = super().log_prob(idx).view_as(val_3d)
        return ret.masked_fill(~match.any(dim=-1, keepdim=True), self.neg_inf).view_as(value)

    @staticmethod
    def _mask_logits(logits, mask=None, neg_inf=float("-inf"), sparse_mask=False, padding_value=None):
        if mask is None:
            return logits
        if not sparse_mask:
            return logits.masked_fill(~mask, neg_inf)
        if padding_value is not None:
            padding_mask = mask == padding_value
            if padding_value != 0:
                mask = mask.masked_fill(padding_mask, 0)
        logits = logits.gather(dim=-1, index=mask)
        if padding_value is not None:
            logits = logits.masked_fill(padding_mask, neg_inf)
        return logits

    @property
    def deterministic_sample(self):
        """The mode: the most likely allowed class."""
        return self.mode

    @property
    def mode(self):
        mode = super().mode
        if self._sparse_mask:
            mode = self._mask.gather(-1, mode.unsqueeze(-1)).squeeze(-1)
        return mode
