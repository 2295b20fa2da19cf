"""The gamma family and the probability functions of ``torch.special``: polygamma and the Hurwitz
zeta (Functions over the backend's special functions), mvlgamma/multigammaln, entr, xlog1py, ndtr
and ndtri (compositions).
"""
import builtins
import math

from .._tensor import Tensor, tensor_method
from .base import Op, in_tensor_dtype, shape_of, unbroadcast
from .common import _float_input, _inplace, _operands, inplace_variant, with_out
from .elementwise import erf, log1p, mul, where
from .pointwise import erfinv
from .special import lgamma, trigamma


__all__ = ["Polygamma", "Zeta", "Entr", "polygamma", "zeta", "mvlgamma", "multigammaln", "entr", "xlog1py", "ndtr",
           "ndtri"]


def polygamma_values(be, xp, n, x):
    """The n-th derivative of digamma: digamma itself for n = 0, trigamma (reflected below 0) for 1,
    (-1)^(n+1) n! zeta(n + 1, x) beyond."""
    if n == 0:
        return be.digamma(x)
    if n == 1:
        return trigamma(be, xp, x)
    scale = (-1) ** (n + 1) * math.factorial(n)
    return (scale * be.zeta(xp.asarray(n + 1.0, dtype=x.dtype), x)).astype(x.dtype, copy=False)


class Polygamma(Op):
    """polygamma(n, x); gradient g * polygamma(n + 1, x)."""

    @staticmethod
    def forward(ctx, x, n):
        ctx.save_for_backward(x)
        ctx.n = n
        return polygamma_values(ctx.be, ctx.xp, n, x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * polygamma_values(ctx.be, ctx.xp, ctx.n + 1, x), None


class Zeta(Op):
    """The Hurwitz zeta function zeta(x, q); gradient -x * zeta(x + 1, q) for q (torch has none for x)."""
    scalar_operands = True

    @staticmethod
    def forward(ctx, x, q):
        xp = ctx.xp
        x, q = in_tensor_dtype(xp, x, q)
        ctx.save_for_backward(x, q)
        ctx.shapes = shape_of(x), shape_of(q)
        return ctx.be.zeta(*xp.broadcast_arrays(x, q)).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        if ctx.needs_input_grad[0]:
            raise NotImplementedError("the derivative for 'zeta' is not implemented.")
        x, q = ctx.saved_tensors
        xs, qs = ctx.xp.broadcast_arrays(x, q)
        return None, unbroadcast(-g * xs * ctx.be.zeta(xs + 1, qs).astype(g.dtype, copy=False), ctx.shapes[1])


class Entr(Op):
    """-x log x, 0 at 0 and -inf below; gradient -(log x + 1) (inf at 0, NaN below, as torch's)."""

    @staticmethod
    def forward(ctx, x):
        xp = ctx.xp
        ctx.save_for_backward(x)
        inside = -x * xp.log(xp.where(x > 0, x, 1))
        return xp.where(x > 0, inside, xp.where(x == 0, 0, -xp.inf)).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return -g * (ctx.xp.log(x) + 1)


@with_out("input")
def polygamma(n, input):
    """The ``n``-th derivative of digamma at each element (n = 0 is digamma); integers give floats."""
    if isinstance(n, builtins.bool) or not isinstance(n, builtins.int):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return Polygamma.apply(_float_input(input), n)


@tensor_method("polygamma")
def _polygamma_method(self, n):
    """``polygamma(n, self)``."""
    return polygamma(n, self)


@tensor_method("polygamma_")
def _polygamma_inplace(self, n):
    """In-place polygamma."""
    return _inplace(self, lambda source: polygamma(n, source))


@with_out("input", "other")
def zeta(input, other):
    """The Hurwitz zeta function of ``input`` (the exponent) and ``other`` (the shift), broadcast;
    either may be a number."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"special_zeta() received an invalid combination of arguments - got ({type(input).__name__}, "
                        f"{type(other).__name__}), but expected at least one Tensor")
    a, b = _operands(input, other, floating=True)
    return Zeta.apply(a, b)


@inplace_variant
@tensor_method
def mvlgamma(input, p):
    """The log of the multivariate gamma function of dimension ``p``: sum over i < p of
    lgamma(input - i / 2), plus p (p - 1) / 4 log(pi)."""
    if not isinstance(p, builtins.int) or p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = _float_input(input)
    total = lgamma(x)
    for i in range(1, p):
        total = total + lgamma(x - i / 2)
    return total + p * (p - 1) / 4 * math.log(math.pi)


def multigammaln(input, p):
    """``mvlgamma``'s name in ``torch.special``."""
    return mvlgamma(input, p)


@with_out("input")
def entr(input):
    """The elementwise entropy term -x log x: 0 at 0, -inf below 0; gradient -(log x + 1)."""
    return Entr.apply(_float_input(input))


@with_out("input", "other")
def xlog1py(input, other):
    """``input * log1p(other)``, 0 where input is 0 (unless other is NaN); either side may be a number."""
    a, b = _operands(input, other, floating=True)
    if not isinstance(b, Tensor):
        from rlpipe._creation import full_like
        b = full_like(a, b)
    if not isinstance(a, Tensor):
        from rlpipe._creation import full_like
        a = full_like(b, a)
    zero = (a == 0) & ~b.isnan()
    safe = where(zero, 0.0, b)  # no NaN from log1p(-1) where the product is replaced
    return where(zero, 0.0, mul(a, log1p(safe)))


@with_out("input")
def ndtr(input):
    """The standard normal CDF, (1 + erf(x / sqrt 2)) / 2."""
    return (1 + erf(_float_input(input) * (1 / math.sqrt(2)))) * 0.5


@with_out("input")
def ndtri(input):
    """The inverse of the standard normal CDF, sqrt 2 erfinv(2 p - 1) (+-inf at 0 and 1)."""
    return erfinv(_float_input(input) * 2 - 1) * math.sqrt(2)

