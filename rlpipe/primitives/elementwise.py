"""Elementwise primitives: arithmetic (with broadcasting and Python-number operands), comparisons
that pick (maximum, clamp, where), math functions, and the piecewise-constant ones (sign, floor, ...).
"""
import math

from .base import Op, unbroadcast, shape_of, sign_of


class Add(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.shapes = shape_of(x), shape_of(y)
        return x + y

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shapes[0]), unbroadcast(g, ctx.shapes[1])


class Sub(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.shapes = shape_of(x), shape_of(y)
        return x - y

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shapes[0]), unbroadcast(-g, ctx.shapes[1])


class Mul(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        need_x, need_y = ctx.needs_input_grad
        return (unbroadcast(g * y, shape_of(x)) if need_x else None,
                unbroadcast(g * x, shape_of(y)) if need_y else None)


class Div(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x / y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        need_x, need_y = ctx.needs_input_grad
        return (unbroadcast(g / y, shape_of(x)) if need_x else None,
                unbroadcast(-g * x / (y * y), shape_of(y)) if need_y else None)


class Pow(Op):
    @staticmethod
    def forward(ctx, x, y):
        out = ctx.xp.power(x, y)
        ctx.save_for_backward(x, y, out)
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, y, out = ctx.saved_tensors
        need_x, need_y = ctx.needs_input_grad
        gx = gy = None
        # inf/nan at x == 0 are masked out below
        if need_x:  # d/dx x**y = y * x**(y-1), taken as 0 where y == 0
            gx = xp.where(xp.equal(y, 0), 0, g * y * xp.power(x, y - 1))
            gx = unbroadcast(gx.astype(g.dtype, copy=False), shape_of(x))
        if need_y:  # d/dy x**y = x**y * log(x), taken as 0 where x == 0 and y >= 0
            with_log = g * out * xp.log(xp.asarray(x, dtype=g.dtype) if shape_of(x) is None else x)
            gy = xp.where(xp.logical_and(xp.equal(x, 0), y >= 0), 0, with_log)
            gy = unbroadcast(gy.astype(g.dtype, copy=False), shape_of(y))
        return gx, gy


class Remainder(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.remainder(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gy = None
        if ctx.needs_input_grad[1]:
            if shape_of(x) is None:  # number % tensor
                raise RuntimeError("derivative for aten::remainder is not implemented")
            gy = unbroadcast(-g * ctx.xp.floor_divide(x, y), shape_of(y))
        return unbroadcast(g, shape_of(x)), gy


for _binary in (Add, Sub, Mul, Div, Pow, Remainder):
    _binary.scalar_operands = True


class Neg(Op):
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return -g


class Abs(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.abs(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * sign_of(ctx.xp, x)


class Reciprocal(Op):
    @staticmethod
    def forward(ctx, x):
        out = 1 / x
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return -g * out * out


class Maximum(Op):
    """max(x, y) elementwise; a tie sends half the gradient to each side, as torch does."""
    pick = "maximum"

    @classmethod
    def forward(cls, ctx, x, y):
        ctx.save_for_backward(x, y)
        return getattr(ctx.xp, cls.pick)(x, y)

    @classmethod
    def backward(cls, ctx, g):
        xp = ctx.xp
        x, y = ctx.saved_tensors
        x_wins = (x > y) if cls.pick == "maximum" else (x < y)
        share = xp.where(x_wins, 1.0, xp.where(xp.equal(x, y), 0.5, 0.0)).astype(g.dtype)
        return unbroadcast(g * share, shape_of(x)), unbroadcast(g * (1 - share), shape_of(y))


class Minimum(Maximum):
    pick = "minimum"


Maximum.scalar_operands = Minimum.scalar_operands = True


class Clamp(Op):
    """clamp(x, lo, hi) with scalar or tensor bounds; the gradient passes where lo <= x <= hi."""

    @staticmethod
    def forward(ctx, x, lo, hi):
        xp = ctx.xp
        ctx.save_for_backward(x, lo, hi)
        out = x
        if lo is not None:
            out = xp.maximum(out, lo)
        if hi is not None:
            out = xp.minimum(out, hi)
        return out.astype(x.dtype, copy=False) if out is not x else x.copy()

    @staticmethod
    def backward(ctx, g):
        x, lo, hi = ctx.saved_tensors
        xp = ctx.xp
        inside = xp.ones(x.shape, dtype=bool)
        if lo is not None:
            inside &= x >= lo
        if hi is not None:
            inside &= x <= hi
        zero = xp.zeros((), dtype=g.dtype)
        g_lo = g_hi = None
        if ctx.needs_input_grad[1]:  # min wins where x < min, unless min > max (then max wins)
            below = x < lo if hi is None else (x < lo) & (lo < hi)
            g_lo = unbroadcast(xp.where(below, g, zero), shape_of(lo))
        if ctx.needs_input_grad[2]:
            above = x > hi if lo is None else (x > hi) | (hi < lo)
            g_hi = unbroadcast(xp.where(above, g, zero), shape_of(hi))
        return xp.where(inside, g, zero), g_lo, g_hi


class Where(Op):
    @staticmethod
    def forward(ctx, cond, x, y):
        ctx.cond = cond
        ctx.shapes = shape_of(x), shape_of(y)
        return ctx.xp.where(cond, x, y)

    @staticmethod
    def backward(ctx, g):
        xp, cond = ctx.xp, ctx.cond
        zero = xp.zeros((), dtype=g.dtype)
        return (None, unbroadcast(xp.where(cond, g, zero), ctx.shapes[0]),
                unbroadcast(xp.where(cond, zero, g), ctx.shapes[1]))


class Exp(Op):
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * ctx.saved_tensors[0]


class Expm1(Op):
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.expm1(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * (ctx.saved_tensors[0] + 1)


class Log(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log(x)

    @staticmethod
    def backward(ctx, g):
        return g / ctx.saved_tensors[0]


class Log1p(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log1p(x)

    @staticmethod
    def backward(ctx, g):
        return g / (ctx.saved_tensors[0] + 1)


class Sqrt(Op):
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.sqrt(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        # infinite at 0, as in torch
        return g / (2 * ctx.saved_tensors[0])


class Rsqrt(Op):
    @staticmethod
    def forward(ctx, x):
        out = 1 / ctx.xp.sqrt(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return -0.5 * g * out * out * out


class Sin(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.sin(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.xp.cos(ctx.saved_tensors[0])


class Cos(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.cos(x)

    @staticmethod
    def backward(ctx, g):
        return -g * ctx.xp.sin(ctx.saved_tensors[0])


class Erf(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.be.erf(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * (2 / math.sqrt(math.pi)) * ctx.xp.exp(-x * x)


class _Stepwise(Op):
    """Piecewise-constant functions: their gradient is zero almost everywhere."""
    fn = None

    @classmethod
    def forward(cls, ctx, x, *args):
        ctx.shape = x.shape
        return getattr(ctx.xp, cls.fn)(x, *args)

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.zeros_like(g), None


class Sign(_Stepwise):
    @staticmethod
    def forward(ctx, x):
        return sign_of(ctx.xp, x) if x.dtype != bool else x.copy()


class Floor(_Stepwise):
    fn = "floor"


class Ceil(_Stepwise):
    fn = "ceil"


class Trunc(_Stepwise):
    fn = "trunc"


class Round(_Stepwise):
    fn = "round"


class FloorDivide(Op):
    """The quotient rounded down ('floor', 'floor_divide') or toward zero ('trunc'). Piecewise
    constant: div with a rounding mode has zero gradients, and floor_divide none at all (torch)."""
    scalar_operands = True

    @staticmethod
    def forward(ctx, x, y, mode):
        ctx.shapes = shape_of(x), shape_of(y)
        ctx.mode = mode
        if mode == "trunc":
            return ctx.xp.trunc(x / y)
        return ctx.xp.floor_divide(x, y)

    @staticmethod
    def backward(ctx, g):
        if ctx.mode == "floor_divide":
            raise RuntimeError("derivative for aten::floor_divide is not implemented")
        xp = ctx.xp
        return tuple(None if s is None else xp.zeros(s, dtype=g.dtype) for s in ctx.shapes) + (None,)


class Erfinv(Op):
    """The inverse error function (the backend's special function)."""

    @staticmethod
    def forward(ctx, x):
        out = ctx.be.erfinv(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return g * (math.sqrt(math.pi) / 2) * ctx.xp.exp(out * out)


class Lerp(Op):
    """start + weight * (end - start), with a scalar or tensor weight; computed from the nearer end
    (end - (end - start) * (1 - weight) once weight >= 0.5), as torch does, so weight 1 gives end exactly."""

    @staticmethod
    def forward(ctx, start, end, weight):
        xp = ctx.xp
        ctx.save_for_backward(start, end, weight)
        diff = end - start
        if shape_of(weight) is None:  # a Python number: one formula for every element
            out = start + weight * diff if abs(weight) < 0.5 else end - diff * (1 - weight)
        else:
            out = xp.where(xp.abs(weight) < 0.5, start + weight * diff, end - diff * (1 - weight))
        return out.astype(start.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        start, end, weight = ctx.saved_tensors
        g_weight = None
        if ctx.needs_input_grad[2]:
            g_weight = unbroadcast(g * (end - start), shape_of(weight))
        return (unbroadcast(g * (1 - weight), shape_of(start)), unbroadcast(g * weight, shape_of(end)), g_weight)


class NanToNum(Op):
    """NaN, +inf and -inf replaced by the given numbers; the gradient passes where x is finite."""

    @staticmethod
    def forward(ctx, x, nan, posinf, neginf):
        xp = ctx.xp
        ctx.save_for_backward(x)
        value = lambda v: xp.asarray(v, dtype=x.dtype)
        out = xp.where(xp.isnan(x), value(nan), x)
        out = xp.where(xp.isposinf(x), value(posinf), out)
        return xp.where(xp.isneginf(x), value(neginf), out)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return ctx.xp.where(ctx.xp.isfinite(x), g, ctx.xp.zeros((), dtype=g.dtype)), None, None, None
