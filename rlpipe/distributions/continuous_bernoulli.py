"""``ContinuousBernoulli``: density proportional to p^x (1 - p)^(1 - x) on [0, 1] (Loaiza-Ganem and Cunningham),
with Taylor expansions near p = 1/2 where the closed forms lose precision."""
import math

from .. import primitives as P
from .._creation import ones_like, zeros_like
from . import constraints
from .bernoulli import binary_cross_entropy_with_logits
from .exp_family import ExponentialFamily
from .utils import (BinaryParameters, batch_shape_for, broadcast_all, clamp_probs, lazy_property, logits_to_probs,
                    standard_uniform)

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(BinaryParameters, ExponentialFamily):
    """The continuous Bernoulli with ``probs`` or ``logits``; ``lims`` bounds the region around 1/2 computed by Taylor
    expansions. Reparameterized samples by the inverse CDF."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if probs is not None and validate_args is not None:
            probs_tensor, = broadcast_all(probs)
            if not bool(self.arg_constraints["probs"].check(probs_tensor).all()):
                raise ValueError("The parameter probs has invalid values")
        self._set_binary_parameter(probs, logits)
        if probs is not None:
            self.probs = self._param = clamp_probs(self.probs)
        self._lims = lims
        super().__init__(batch_shape_for((probs if probs is not None else logits,), self._param),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(ContinuousBernoulli, batch_shape, ("probs", "logits"), _instance)
        new._lims = self._lims
        return self._expand_binary(new)

    @lazy_property
    def probs(self):
        """The parameter p, kept eps away from 0 and 1."""
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return P.where(self._outside_unstable_region(), self.probs, self._lims[0] * ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """The log of the normalizing constant."""
        cut = self._cut_probs()
        below_half = P.where(cut <= 0.5, cut, zeros_like(cut))
        above_half = P.where(cut >= 0.5, cut, ones_like(cut))
        log_norm = (P.log1p(-cut) - cut.log()).abs().log() - P.where(cut <= 0.5, P.log1p(-2.0 * below_half),
                                                                      (2.0 * above_half - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return P.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (P.log1p(-cut) - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return P.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self):
        cut = self._cut_probs()
        variances = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / (P.log1p(-cut) - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return P.where(self._outside_unstable_region(), variances, taylor)

    def rsample(self, sample_shape=()):
        u = standard_uniform(self._extended_shape(sample_shape), self.probs.dtype, self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value) + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = P.where(self._outside_unstable_region(), cdfs, value)
        return P.where(value <= 0.0, zeros_like(value), P.where(value >= 1.0, ones_like(value), unbounded))

    def icdf(self, value):
        cut = self._cut_probs()
        inverse = (P.log1p(-cut + value * (2.0 * cut - 1.0)) - P.log1p(-cut)) / (cut.log() - P.log1p(-cut))
        return P.where(self._outside_unstable_region(), inverse, value)

    def entropy(self):
        log_probs0, log_probs1 = P.log1p(-self.probs), self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    _mean_carrier_measure = 0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        lower, upper = self._lims[0] - 0.5, self._lims[1] - 0.5
        outside = (x <= lower) | (x > upper)
        cut = P.where(outside, x, lower * ones_like(x))
        log_norm = P.expm1(cut).abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return P.where(outside, log_norm, taylor)
