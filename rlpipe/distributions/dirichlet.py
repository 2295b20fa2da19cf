"""``Dirichlet``: distributions over the probability simplex, density proportional to prod x_i^(c_i - 1)."""
from .. import primitives as P
from .._tensor import wrap
from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import standard_gamma
from .utils import xlogy

__all__ = ["Dirichlet"]

_SERIES_CHUNK = 16


def _lower_beta_series_grads(xp, be, x, a, b):
    """(dI/da, dI/db) of the regularized incomplete beta I_x(a, b) for x below the mean a / (a + b), from
    I = x^a (1-x)^b / (a B(a, b)) sum_n (a+b)_n / (a+1)_n x^n, differentiating each term's logarithm."""
    log_x, log_1mx = xp.log(x), xp.log1p(-x)
    psi_ab = be.digamma(a + b)
    term = xp.exp(a * log_x + b * log_1mx - xp.log(a) - be.lgamma(a) - be.lgamma(b) + be.lgamma(a + b))
    dlog_a = log_x - 1 / a - be.digamma(a) + psi_ab
    dlog_b = log_1mx - be.digamma(b) + psi_ab
    grad_a, grad_b = term * dlog_a, term * dlog_b
    n = 0
    while True:
        for _ in range(_SERIES_CHUNK):
            dlog_a = dlog_a + 1 / (a + b + n) - 1 / (a + 1 + n)
            dlog_b = dlog_b + 1 / (a + b + n)
            term = term * x * (a + b + n) / (a + 1 + n)
            n += 1
            grad_a, grad_b = grad_a + term * dlog_a, grad_b + term * dlog_b
        small = term * (xp.abs(dlog_a) + xp.abs(dlog_b)) <= 1e-17 * (xp.abs(grad_a) + xp.abs(grad_b))
        if bool(small.all()):
            return grad_a, grad_b


def _dirichlet_grad(x, concentration, total):
    """torch's ``_dirichlet_grad``: d x / d concentration of a Beta(concentration, total - concentration) draw x at
    fixed CDF value (the other parameter held), divided by 1 - x; computed exactly from the incomplete beta function's
    series where torch uses approximations (they agree to ~1e-3)."""
    be = x._device._backend
    xp = be.xp
    xs, a = x.detach()._data.astype(xp.float64), concentration.detach()._data.astype(xp.float64)
    b = total.detach()._data.astype(xp.float64) - a
    flip = xs > a / (a + b)  # I_x(a, b) = 1 - I_(1-x)(b, a): keep the series where it converges fast
    xe, ae, be_ = xp.where(flip, 1 - xs, xs), xp.where(flip, b, a), xp.where(flip, a, b)
    grad_first, grad_second = _lower_beta_series_grads(xp, be, xe, ae, be_)
    grad_a = xp.where(flip, -grad_second, grad_first)
    log_pdf = (a - 1) * xp.log(xs) + (b - 1) * xp.log1p(-xs) - be.lgamma(a) - be.lgamma(b) + be.lgamma(a + b)
    return wrap((-grad_a / xp.exp(log_pdf) / (1 - xs)).astype(x._data.dtype), x.device)


def _Dirichlet_backward(x, concentration, grad_output):
    """The gradient of a loss with respect to a Dirichlet draw's concentration, given its gradient ``grad_output``
    with respect to the draw ``x`` (torch's reparameterization through the Beta marginals)."""
    total = concentration.sum(-1, True).expand_as(concentration)
    grad = _dirichlet_grad(x, concentration, total)
    return grad * (grad_output - (x * grad_output).sum(-1, True))


class Dirichlet(ExponentialFamily):
    """Dirichlet(concentration) over vectors of the last dim of ``concentration``; reparameterized samples (normalized
    Gamma draws, with their implicit gradients)."""
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        gammas = standard_gamma(self.concentration.expand(self._extended_shape(sample_shape)))
        return gammas / gammas.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + P.lgamma(c.sum(-1)) - P.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        """(c - 1) / sum(c - 1) with negative parts cut; where every c < 1, the vertex of the largest c."""
        shifted = (self.concentration - 1).clamp(min=0.0)
        mode = shifted / shifted.sum(-1, keepdim=True)
        vertex = P.one_hot(self.concentration.argmax(-1), self.concentration.shape[-1]).to(mode.dtype)
        return P.where((self.concentration < 1).all(-1, keepdim=True), vertex, mode)

    @property
    def variance(self):
        c = self.concentration
        total = c.sum(-1, keepdim=True)
        return c * (total - c) / (total.pow(2) * (total + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        total = c.sum(-1)
        return (P.lgamma(c).sum(-1) - P.lgamma(total) - (k - total) * P.digamma(total)
                - ((c - 1.0) * P.digamma(c)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()
