"""Special functions: lgamma, digamma, atanh, logit (the distributions' building blocks), and the
trigonometric functions torch has beyond sin/cos/tanh: asin, acos, atan, tan, sinh, cosh.

The gamma-family functions come from the backend (SciPy on the CPU, ``cupyx.scipy.special`` on a
GPU); atanh and logit are plain formulas over the array namespace.

Below the Functions, the public ops and their Tensor methods (``x.lgamma()``, ``x.arcsin()``...).
"""
import math

from .._tensor import tensor_method
from .base import Op
from .common import inplace_variant, _float_input, _unary_float


__all__ = ["Lgamma", "Digamma", "Atanh", "Logit", "Asin", "Acos", "Atan", "Tan", "Sinh", "Cosh",
           "lgamma", "digamma", "atanh", "arctanh", "logit", "asin", "acos", "atan", "tan", "sinh", "cosh",
           "arcsin", "arccos", "arctan"]


def trigamma(be, xp, x):
    """polygamma(1, x) = zeta(2, x), through the reflection formula below zero (where Hurwitz zeta is
    undefined): trigamma(x) = pi^2 / sin^2(pi x) - trigamma(1 - x)."""
    positive = be.zeta(2.0, xp.where(x > 0, x, 1 - x))
    return xp.where(x > 0, positive, math.pi ** 2 / xp.sin(math.pi * x) ** 2 - positive).astype(x.dtype, copy=False)


class Lgamma(Op):
    """log |Gamma(x)|."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.be.lgamma(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.be.digamma(ctx.saved_tensors[0])


class Digamma(Op):
    """The derivative of lgamma."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.be.digamma(x)

    @staticmethod
    def backward(ctx, g):
        return g * trigamma(ctx.be, ctx.xp, ctx.saved_tensors[0])


class Atanh(Op):
    """The inverse hyperbolic tangent; gradient g / (1 - x**2)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.arctanh(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g / (1 - x * x)


class Logit(Op):
    """log(p / (1 - p)), with p first clamped to [eps, 1 - eps] when eps is given (then the gradient is
    zero outside that range, as torch's)."""

    @staticmethod
    def forward(ctx, p, eps):
        xp = ctx.xp
        ctx.save_for_backward(p)
        ctx.eps = eps
        if eps is not None:
            p = xp.clip(p, eps, 1 - eps)
        return xp.log(p / (1 - p))

    @staticmethod
    def backward(ctx, g):
        p, = ctx.saved_tensors
        xp = ctx.xp
        grad = g / (p * (1 - p))
        if ctx.eps is not None:
            grad = xp.where((p < ctx.eps) | (p > 1 - ctx.eps), 0, grad).astype(g.dtype, copy=False)
        return grad, None


class Asin(Op):
    """arcsin(x); gradient g / sqrt(1 - x**2)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.arcsin(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g / ctx.xp.sqrt(1 - x * x)


class Acos(Op):
    """arccos(x); gradient -g / sqrt(1 - x**2)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.arccos(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return -g / ctx.xp.sqrt(1 - x * x)


class Atan(Op):
    """arctan(x); gradient g / (1 + x**2)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.arctan(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g / (1 + x * x)


class Tan(Op):
    """tan(x); gradient g * (1 + tan(x)**2), from the saved output."""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.tan(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return g * (1 + out * out)


class Sinh(Op):
    """sinh(x); gradient g * cosh(x)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.sinh(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.xp.cosh(ctx.saved_tensors[0])


class Cosh(Op):
    """cosh(x); gradient g * sinh(x)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.cosh(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.xp.sinh(ctx.saved_tensors[0])


# ---- the public ops -------------------------------------------------------------------------------

lgamma = _unary_float(Lgamma)
digamma = _unary_float(Digamma)
atanh = _unary_float(Atanh)
arctanh = tensor_method("arctanh")(atanh)


@inplace_variant
@tensor_method
def logit(input, eps=None):
    """log(p / (1 - p)); with ``eps``, p is first clamped to [eps, 1 - eps]."""
    return Logit.apply(_float_input(input), None if eps is None else float(eps))


asin = _unary_float(Asin)
acos = _unary_float(Acos)
atan = _unary_float(Atan)
tan = _unary_float(Tan)
sinh = _unary_float(Sinh)
cosh = _unary_float(Cosh)
arcsin = tensor_method("arcsin")(asin)
arccos = tensor_method("arccos")(acos)
arctan = tensor_method("arctan")(atan)
