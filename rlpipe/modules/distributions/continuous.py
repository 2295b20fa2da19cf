"""torchrl's continuous action distributions: ``TanhNormal`` (a Normal squashed into [low, high]),
``IndependentNormal``, and ``Delta`` (tensordict's, which probabilistic modules default to).

Importing this module turns distribution argument validation off by default
(``Distribution.set_default_validate_args(False)``), as importing torchrl does: the checks cost a
device sync per distribution built in a training loop. Pass ``validate_args=True`` or set the
default back to get them."""
import numpy as np

from ... import distributions as D
from ..._creation import as_tensor
from ..._tensor import Tensor
from ...autograd import no_grad
from ...distributions.transformed_distribution import TransformedDistribution
from ...distributions.utils import sum_rightmost
from ...primitives import Op
from ...primitives.double_backward import twice
from ...tensordict.nn._delta import Delta

__all__ = ["TanhNormal", "IndependentNormal", "Delta", "SafeTanhTransform"]

D.Distribution.set_default_validate_args(False)


def _resolution(xp_dtype):
    return float(np.finfo(xp_dtype).resolution)  # 1e-6 for float32, 1e-15 for float64


class _SafeTanh(Op):
    """tanh kept 1 - resolution away from +-1, so that its inverse stays finite; the gradient is
    1 - y^2 of the kept value (torchrl's ``safetanh_noeps``)."""

    @staticmethod
    def forward(ctx, x):
        lim = 1.0 - _resolution(x.dtype)
        y = ctx.xp.clip(ctx.xp.tanh(x), -lim, lim)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * (1 - y * y)


class _SafeAtanh(Op):
    """atanh of y first kept 1 - resolution away from +-1 (torchrl's ``safeatanh_noeps``)."""

    @staticmethod
    def forward(ctx, y):
        lim = 1.0 - _resolution(y.dtype)
        y = ctx.xp.clip(y, -lim, lim)
        ctx.save_for_backward(y)
        return ctx.xp.arctanh(y)

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g / (1 - y * y)


@twice(_SafeTanh)
def _safe_tanh_twice(ctx, g):
    y = ctx.graph_output(ctx.saved_tensors[0])
    return g * (1 - y * y)


@twice(_SafeAtanh)
def _safe_atanh_twice(ctx, g):
    y = ctx.graph_input(0, ctx.saved_tensors[0])
    return g / (1 - y * y)


class SafeTanhTransform(D.TanhTransform):
    """A TanhTransform whose forward and inverse stay finite at saturation."""

    def _call(self, x):
        return _SafeTanh.apply(x)

    def _inverse(self, y):
        return _SafeAtanh.apply(y)


def _as_scale(scale, loc):
    """A scale tensor on loc's device: a tensor, a number, or a callable of loc (``rlpipe.ones_like``)."""
    if callable(scale) and not isinstance(scale, Tensor):
        return scale(loc)
    if not isinstance(scale, Tensor):
        return as_tensor(scale, device=loc.device, dtype=loc.dtype)
    return scale.to(loc.device)


class TanhNormal(TransformedDistribution):
    """``tanh(Normal(loc, scale))`` rescaled from [-1, 1] to [low, high], over ``event_dims`` rightmost
    dimensions (default: 1, or 0 for a 0-d loc). ``tanh_loc=True`` first maps ``loc`` to
    ``tanh(loc / upscale) * upscale``. Has ``rsample``, ``log_prob`` (change of variables),
    ``deterministic_sample`` (the transformed mean) and ``rsample_and_log_prob``; as in torchrl,
    ``mode`` and ``mean`` have no closed form and raise."""
    arg_constraints = {"loc": D.constraints.real, "scale": D.constraints.greater_than(1e-6)}
    num_params = 2

    def __init__(self, loc, scale, upscale=5.0, low=-1.0, high=1.0, event_dims=None, tanh_loc=False,
                 safe_tanh=True):
        if not isinstance(loc, Tensor):
            loc = as_tensor(loc, dtype=None)
        scale = _as_scale(scale, loc)
        if event_dims is None:
            event_dims = min(1, loc.ndim)
        high_t = as_tensor(high, device=loc.device) if not isinstance(high, Tensor) else high.to(loc.device)
        low_t = as_tensor(low, device=loc.device) if not isinstance(low, Tensor) else low.to(loc.device)
        if not bool((high_t > low_t).all()):
            raise RuntimeError("TanhNormal high values must be strictly greater than low values")
        self.non_trivial_max = bool((high_t != 1.0).any())
        self.non_trivial_min = bool((low_t != -1.0).any())
        self.tanh_loc = tanh_loc
        self._event_dims = event_dims
        self.device = loc.device
        self.upscale = upscale.to(loc.device) if isinstance(upscale, Tensor) else upscale
        self.low, self.high = low_t, high_t
        t = SafeTanhTransform() if safe_tanh else D.TanhTransform()
        if self.non_trivial_max or self.non_trivial_min:
            t = D.ComposeTransform([t, D.AffineTransform(loc=(high_t + low_t) / 2, scale=(high_t - low_t) / 2)])
        self._t = t
        self.transforms = [t]
        self.update(loc, scale)

    def update(self, loc, scale):
        """New parameters, keeping the transform: in place when the shapes are unchanged."""
        if self.tanh_loc:
            loc = (loc / self.upscale).tanh() * self.upscale
            if self.non_trivial_max or self.non_trivial_min:
                loc = loc + (self.high - self.low) / 2 + self.low
        scale = _as_scale(scale, loc)
        self.loc, self.scale = loc, scale
        if hasattr(self, "base_dist") and self.root_dist.loc.shape == loc.shape \
                and self.root_dist.scale.shape == scale.shape:
            self.root_dist.loc, self.root_dist.scale = loc, scale
            return
        base = D.Normal(loc, scale)
        if self._event_dims > 0:
            base = D.Independent(base, self._event_dims)
        self._attach(base, self._t, None)

    def rsample_and_log_prob(self, sample_shape=()):
        """A reparameterized sample and its log-probability scored at the exact pre-tanh value (no
        round trip through atanh, which saturates)."""
        preimage = self.base_dist.rsample(sample_shape)
        return self._score(preimage, self._t(preimage))

    def sample_and_log_prob(self, sample_shape=()):
        """A sample (no pathwise gradient) and its differentiable log-probability."""
        preimage = self.base_dist.sample(sample_shape)
        with no_grad():
            sample = self._t(preimage)
        return self._score(preimage, sample)

    def _score(self, preimage, sample):
        log_det = sum_rightmost(self._t.log_abs_det_jacobian(preimage, sample), len(self.event_shape))
        return sample, self.base_dist.log_prob(preimage) - log_det

    @property
    def min(self):
        """The lower bound of the support (``low``)."""
        return self.low

    @property
    def max(self):
        """The upper bound of the support (``high``)."""
        return self.high

    @property
    def support(self):
        return D.constraints.real

    @property
    def root_dist(self):
        """The innermost base distribution (the Normal under the tanh and the affine map)."""
        dist = self
        while hasattr(dist, "base_dist"):
            dist = dist.base_dist
        return dist

    @property
    def mode(self):
        raise RuntimeError(f"The distribution {type(self).__name__} has not analytical mode. "
                           "Use ExplorationMode.DETERMINISTIC to get a deterministic sample from it.")

    @property
    def deterministic_sample(self):
        """The transformed mean of the underlying Normal (``tanh(loc)`` mapped to the bounds)."""
        m = self.root_dist.mean
        for t in self.transforms:
            m = t(m)
        return m

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not have a closed form formula for the average. "
                                  "An estimate of this value can be computed using dist.sample((N,)).mean(dim=0), "
                                  "where N is a large number of samples.")


class IndependentNormal(D.Independent):
    """``Independent(Normal(loc, scale), event_dim)``; ``tanh_loc=True`` maps loc to
    ``upscale * tanh(loc / upscale)`` in ``update``."""
    num_params = 2

    def __init__(self, loc, scale, upscale=5.0, tanh_loc=False, event_dim=1, **kwargs):
        self.tanh_loc = tanh_loc
        self.upscale = upscale
        self._event_dim = event_dim
        self._kwargs = kwargs
        super().__init__(D.Normal(loc, _as_scale(scale, loc), **kwargs), event_dim)

    def update(self, loc, scale):
        """New ``loc`` and ``scale`` (``loc`` squashed by ``upscale * tanh(loc / upscale)`` with ``tanh_loc``)."""
        if self.tanh_loc:
            loc = self.upscale * (loc / self.upscale).tanh()
        super().__init__(D.Normal(loc, _as_scale(scale, loc), **self._kwargs), self._event_dim)

    @property
    def mode(self):
        return self.base_dist.mean

    @property
    def deterministic_sample(self):
        """The mean: a Normal's most likely value."""
        return self.mean
