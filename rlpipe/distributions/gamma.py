"""``Gamma``: density rate^c x^(c-1) exp(-rate x) / Gamma(c) on x > 0, with reparameterized samples.

The samples' gradient with respect to the concentration is the implicit one (as torch's): the derivative of
x = F^-1(u; c) at the sample's CDF value u, -(dF/dc) / f(x), with dF/dc summed from the series of the
regularized lower incomplete gamma function. ``StandardGamma`` is that op; Dirichlet, Chi2, StudentT and Beta
draw through it."""
import numpy as np

from .. import primitives as P
from ..autograd.function import Function
from ..primitives.base import unbroadcast
from ..random import _generator_for
from . import constraints
from .exp_family import ExponentialFamily
from .utils import batch_shape_for, broadcast_all, tiny_of, xlogy

__all__ = ["Gamma", "StandardGamma", "GammaCdf", "standard_gamma"]

_SERIES_CHUNK = 16  # terms summed between two checks for convergence (each check reads back one flag)


def _lower_gamma_series(xp, be, x, c):
    """(P(c, x), dP/dc) for P the regularized lower incomplete gamma function (x > 0), from
    P = sum_n x^(c+n) e^-x / Gamma(c+n+1), so that dP/dc = sum_n term_n (log x - digamma(c+n+1)); summed until the
    terms no longer count."""
    log_x = xp.log(x)
    term = xp.exp(c * log_x - x - be.lgamma(c + 1))
    psi = be.digamma(c + 1)
    value, grad = term, term * (log_x - psi)
    n = 0
    while True:
        for _ in range(_SERIES_CHUNK):
            n += 1
            term = term * x / (c + n)
            psi = psi + 1 / (c + n)
            value = value + term
            grad = grad + term * (log_x - psi)
        still = (term * (1 + xp.abs(log_x - psi)) > 1e-17 * (value + xp.abs(grad))) | (c + n < x)
        if not bool(still.any()):
            return value, grad


def _gamma_density(xp, be, x, c):
    """The Gamma(c, 1) density at x > 0."""
    return xp.exp((c - 1) * xp.log(x) - x - be.lgamma(c))


class StandardGamma(Function):
    """Gamma(c, 1) draws (from ``state``, a device generator's state) with the implicit reparameterization
    gradient -(dF/dc) / f(x)."""
    raw = True

    @staticmethod
    def forward(ctx, concentration, state):
        # drawn as 1-d: NumPy's draw for a 0-d array is a float
        x = state.standard_gamma(concentration.reshape(-1)).reshape(concentration.shape)
        x = ctx.xp.maximum(x, np.finfo(x.dtype).tiny)
        ctx.args = x, concentration
        return x

    @staticmethod
    def backward(ctx, g):
        xp, be = ctx.xp, ctx.be
        x, c = ctx.args
        x64, c64 = x.astype(xp.float64), c.astype(xp.float64)
        dx_dc = -_lower_gamma_series(xp, be, x64, c64)[1] / _gamma_density(xp, be, x64, c64)
        return (g * dx_dc.astype(x.dtype)), None


class GammaCdf(Function):
    """P(c, x), the CDF of Gamma(c, 1) at x (0 for x <= 0), with its gradients: the density for x and the series of
    dP/dc for c (both broadcast)."""
    raw = True

    @staticmethod
    def forward(ctx, concentration, x):
        xp, be = ctx.xp, ctx.be
        c64, x64 = xp.broadcast_arrays(concentration.astype(xp.float64), x.astype(xp.float64))
        positive = x64 > 0
        safe_x = xp.where(positive, x64, 1.0)
        value, grad_c = _lower_gamma_series(xp, be, safe_x, c64)
        ctx.args = positive, safe_x, c64, xp.where(positive, grad_c, 0.0), concentration.shape, x.shape
        return xp.where(positive, value, 0.0).astype(x.dtype)

    @staticmethod
    def backward(ctx, g):
        xp, be = ctx.xp, ctx.be
        positive, safe_x, c64, grad_c, c_shape, x_shape = ctx.args
        grad_x = xp.where(positive, _gamma_density(xp, be, safe_x, c64), 0.0)
        return unbroadcast((g * grad_c).astype(g.dtype), c_shape), unbroadcast((g * grad_x).astype(g.dtype), x_shape)


def standard_gamma(concentration):
    """Gamma(concentration, 1) draws, one per element, from the device's default generator; differentiable."""
    state = _generator_for(concentration.device, None)._state
    return StandardGamma.apply(concentration.contiguous(), state)


class Gamma(ExponentialFamily):
    """Gamma(concentration, rate): mean concentration / rate; reparameterized samples."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(batch_shape_for((concentration, rate), self.concentration), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(Gamma, batch_shape, ("concentration", "rate"), _instance)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=tiny_of(value.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, rate = self.concentration, self.rate
        return xlogy(c, rate) + xlogy(c - 1, value) - rate * value - P.lgamma(c)

    def cdf(self, value):
        """The regularized lower incomplete gamma function P(concentration, rate * value), differentiable in all three
        (torch.special.gammainc's value)."""
        if self._validate_args:
            self._validate_sample(value)
        c, scaled = P.broadcast_tensors(self.concentration, self.rate * value)
        return GammaCdf.apply(c, scaled)

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + P.lgamma(c) + (1.0 - c) * P.digamma(c)

    @property
    def _natural_params(self):
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x, y):
        return P.lgamma(x + 1) + (x + 1) * (-y.reciprocal()).log()
