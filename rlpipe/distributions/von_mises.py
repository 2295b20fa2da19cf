"""``VonMises``: the circular normal distribution of angles, density exp(k cos(x - loc)) / (2 pi I0(k))."""
import math

from .. import _dtypes
from .. import primitives as P
from ..autograd import no_grad
from . import constraints
from .distribution import Distribution
from .utils import batch_shape_for, broadcast_all, lazy_property, standard_uniform

__all__ = ["VonMises"]

# Abramowitz and Stegun's polynomial approximations of I0 and I1 (9.8.1-9.8.4), as torch uses them
_COEF_SMALL = ([1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813],
               [0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411])
_COEF_LARGE = ([0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537, -0.01647633,
                0.00392377],
               [0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967, -0.02895312, 0.01787654,
                -0.00420059])


def _eval_poly(y, coef):
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


def _log_modified_bessel_fn(x, order=0):
    """log I_order(x) for order 0 or 1 and x > 0 (differentiable)."""
    y = (x / 3.75).pow(2)
    small = _eval_poly(y, _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    large = x - 0.5 * x.log() + _eval_poly(3.75 / x, _COEF_LARGE[order]).log()
    return P.where(x < 3.75, small.log(), large)


def _rejection_sample(loc, concentration, proposal_r, shape):
    """Best and Fisher's rejection sampler, vectorized: every element draws until accepted."""
    x = loc.new_zeros(shape)
    done = x != x  # all False
    while not bool(done.all()):
        u1, u2, u3 = standard_uniform((3,) + tuple(shape), loc.dtype, loc.device).unbind()
        z = (math.pi * u1).cos()
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
        x = P.where(accept & ~done, (u3 - 0.5).sign() * f.acos(), x)
        done = done | accept
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    """Angles around ``loc`` (in (-pi, pi]) with ``concentration`` k; samples by rejection, computed in float64."""
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(batch_shape_for((loc, concentration), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(VonMises, batch_shape, ("loc", "concentration"), _instance)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * (value - self.loc).cos() - math.log(2 * math.pi)
                - _log_modified_bessel_fn(self.concentration, order=0))

    @lazy_property
    def _proposal_r(self):
        """The rejection sampler's envelope parameter (float64)."""
        kappa = self.concentration.to(_dtypes.float64)
        tau = 1 + (1 + 4 * kappa.pow(2)).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        return P.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho.pow(2)) / (2 * rho))

    def sample(self, sample_shape=()):
        with no_grad():
            shape = self._extended_shape(sample_shape)
            loc, kappa = self.loc.to(_dtypes.float64), self.concentration.to(_dtypes.float64)
            return _rejection_sample(loc, kappa, self._proposal_r, shape).to(self.loc.dtype)

    @property
    def mean(self):
        """The circular mean, loc."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        """The circular variance 1 - I1(k) / I0(k)."""
        k = self.concentration
        return 1 - (_log_modified_bessel_fn(k, order=1) - _log_modified_bessel_fn(k, order=0)).exp()
