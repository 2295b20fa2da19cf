"""Elementwise arithmetic and math: the Functions (with broadcasting and Python-number operands;
maximum, clamp and where, which pick; the piecewise-constant sign, floor...) and the public ops
``add``... ``where``, ``lerp``, ``nan_to_num``, with their Tensor methods, in-place variants and
operators (``+ - * / // % **``, unary ``-``, ``abs``), and the no-graph fast path of ``x += y``.
"""
import builtins
import math

import numpy as np

from .. import _dtypes
from .._dtypes import FLOATING_NP, scalar_kind
from .._dispatch import torch_function
from .._tensor import Tensor, tensor_method, wrap
from ..autograd.grad_mode import state as _grad_state
from ..backends.cpu import silence_fp_warnings, restore_fp_warnings
from .base import Op, unbroadcast, shape_of, sign_of
from .common import (_BFLOAT16, _NUMBER, _C_TYPE_NAMES, _LEGACY_TYPE_NAMES, inplace_variant, tensor_operator,
                     _binary, _cast, _float_input, _operands, _require_float, _scalar, _unary_float, with_out)
from .comparison import logical_and, lt, ne


class Add(Op):
    """x + y (broadcast); each side's gradient is g summed back to its shape."""
    @staticmethod
    def forward(ctx, x, y):
        ctx.shapes = shape_of(x), shape_of(y)
        return x + y

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shapes[0]), unbroadcast(g, ctx.shapes[1])


class Sub(Op):
    """x - y (broadcast); gradients g and -g, summed back to each side's shape."""
    @staticmethod
    def forward(ctx, x, y):
        ctx.shapes = shape_of(x), shape_of(y)
        return x - y

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shapes[0]), unbroadcast(-g, ctx.shapes[1])


class Mul(Op):
    """x * y (broadcast); gradients g * y and g * x."""
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
    """x / y (broadcast); gradients g / y and -g * x / y**2."""
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
    """x ** y; gradients g * y * x**(y-1) (0 where y == 0) and g * x**y * log(x) (0 where x == 0, y >= 0)."""
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
    """x mod y with the divisor's sign (Python's %); gradients g and -g * floor(x / y)."""
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


for _function in (Add, Sub, Mul, Div, Pow, Remainder):
    _function.scalar_operands = True


class Neg(Op):
    """-x; gradient -g."""
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return -g


class Abs(Op):
    """|x|; gradient g * sign(x) (0 at x == 0)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.abs(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * sign_of(ctx.xp, x)


class Reciprocal(Op):
    """1 / x; gradient -g / x**2."""
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
    """min(x, y) elementwise; a tie sends half the gradient to each side, as torch does."""
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
        zero = xp.zeros((), dtype=g.dtype)
        g_lo = g_hi = None
        if ctx.needs_input_grad[1]:
            g_lo = unbroadcast(xp.where(clamp_below(x, lo, hi), g, zero), shape_of(lo))
        if ctx.needs_input_grad[2]:
            g_hi = unbroadcast(xp.where(clamp_above(x, lo, hi), g, zero), shape_of(hi))
        return xp.where(clamp_inside(xp, x, lo, hi), g, zero), g_lo, g_hi


def clamp_inside(xp, x, lo, hi):
    """Where x lies within the bounds (None: unbounded), i.e. where clamp passes x's gradient."""
    inside = xp.ones(x.shape, dtype=bool)
    if lo is not None:
        inside &= x >= lo
    if hi is not None:
        inside &= x <= hi
    return inside


def clamp_below(x, lo, hi):
    """Where clamp's value is ``lo``: x < lo, unless lo > hi (then hi wins)."""
    return x < lo if hi is None else (x < lo) & (lo < hi)


def clamp_above(x, lo, hi):
    """Where clamp's value is ``hi``: x > hi, and everywhere when hi < lo."""
    return x > hi if lo is None else (x > hi) | (hi < lo)


class Where(Op):
    """cond ? x : y; the gradient goes to x where cond holds and to y elsewhere."""
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
    """exp(x); gradient g * exp(x)."""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * ctx.saved_tensors[0]


class Expm1(Op):
    """exp(x) - 1, accurate near 0; gradient g * exp(x)."""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.expm1(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * (ctx.saved_tensors[0] + 1)


class Log(Op):
    """log(x); gradient g / x."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log(x)

    @staticmethod
    def backward(ctx, g):
        return g / ctx.saved_tensors[0]


class Log1p(Op):
    """log(1 + x), accurate near 0; gradient g / (1 + x)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log1p(x)

    @staticmethod
    def backward(ctx, g):
        return g / (ctx.saved_tensors[0] + 1)


class Sqrt(Op):
    """sqrt(x); gradient g / (2 sqrt(x)), infinite at 0 as in torch."""
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
    """1 / sqrt(x); gradient -g / (2 x**1.5)."""
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
    """sin(x); gradient g * cos(x)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.sin(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.xp.cos(ctx.saved_tensors[0])


class Cos(Op):
    """cos(x); gradient -g * sin(x)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.cos(x)

    @staticmethod
    def backward(ctx, g):
        return -g * ctx.xp.sin(ctx.saved_tensors[0])


class Erf(Op):
    """The error function; gradient g * 2 / sqrt(pi) * exp(-x**2)."""
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
    """-1, 0 or 1 (0 for NaN; bool stays bool); gradient zero."""
    @staticmethod
    def forward(ctx, x):
        return sign_of(ctx.xp, x) if x.dtype != bool else x.copy()


class Floor(_Stepwise):
    """Rounds down; gradient zero."""
    fn = "floor"


class Ceil(_Stepwise):
    """Rounds up; gradient zero."""
    fn = "ceil"


class Trunc(_Stepwise):
    """Rounds toward zero; gradient zero."""
    fn = "trunc"


class Round(_Stepwise):
    """Rounds half to even (at ``decimals`` places when given); gradient zero."""
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
            out = start + weight * diff if builtins.abs(weight) < 0.5 else end - diff * (1 - weight)
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


# ---- the public ops -------------------------------------------------------------------------------

def _scaled(other, alpha):
    return other if alpha == 1 else mul(other, alpha) if isinstance(other, Tensor) else other * alpha


@with_out("input", "other")
@tensor_operator("add", Add, commutative=True)
@inplace_variant
@tensor_method
def add(input, other, *, alpha=1):
    """``input + alpha * other``, broadcast, in the promoted dtype (``other`` may be a number); also ``+``."""
    return _binary(Add, input, _scaled(other, alpha))


@with_out("input", "other")
@tensor_operator("sub", Sub)
@inplace_variant
@tensor_method
def sub(input, other, *, alpha=1):
    """``input - alpha * other``, broadcast; RuntimeError for bool operands (use ``^`` or ``~``); also ``-``."""
    is_bool = [isinstance(x, (builtins.bool, np.bool_)) or isinstance(x, Tensor) and x._data.dtype == np.bool_
               for x in (input, other)]
    if builtins.all(is_bool):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if builtins.any(is_bool):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    return _binary(Sub, input, _scaled(other, alpha))


@with_out("input", "other")
@tensor_operator("mul", Mul, commutative=True)
@inplace_variant
@tensor_method
def mul(input, other):
    """``input * other``, broadcast, in the promoted dtype; also ``*``."""
    return _binary(Mul, input, other)


@with_out("input", "other")
@tensor_operator("truediv", Div)
@inplace_variant("div", "true_divide")
@tensor_method("div", "true_divide", "divide")
def div(input, other, *, rounding_mode=None):
    """``input / other``: true division (integers give a float), or rounded with ``rounding_mode`` "floor" or "trunc";
    also ``/``. ``true_divide`` and ``divide`` are the same op."""
    if rounding_mode is None:
        return _binary(Div, input, other, floating=True)
    if rounding_mode == "floor":
        _check_integer_divisor(input, other)
        return FloorDivide.apply(*_operands(input, other), "floor")
    if rounding_mode == "trunc":
        a, b = _operands(input, other)
        like = a if isinstance(a, Tensor) else b
        a, b = (x if isinstance(x, Tensor) else full_like(like, x) for x in (a, b))
        if like.is_floating_point():
            return FloorDivide.apply(a, b, "trunc")
        floor = floor_divide(a, b)  # integers: round toward zero instead of down
        rounded_down = logical_and(ne(remainder(a, b), 0), ne(lt(a, 0), lt(b, 0)))
        return where(rounded_down, floor + 1, floor)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}")


true_divide = divide = div


def full_like(like, value):
    """A 0-d tensor holding ``value`` with ``like``'s dtype and device (the operand of an integer trunc division)."""
    from rlpipe._creation import full
    return full((), value, dtype=like.dtype, device=like.device)


def _check_integer_divisor(input, other):
    a, b = _operands(input, other)
    t = a if isinstance(a, Tensor) else b
    if not t.is_floating_point():
        zero = b == 0 if not isinstance(b, Tensor) else builtins.bool((b._data == 0).any())
        if zero:
            raise RuntimeError("ZeroDivisionError")


@tensor_operator("floordiv")
@inplace_variant
@tensor_method
def floor_divide(input, other):
    """``input / other`` rounded down (``//``); RuntimeError for an integer division by zero, and no gradient, as in
    torch."""
    _check_integer_divisor(input, other)
    try:
        a, b = _operands(input, other)
    except TypeError:
        return NotImplemented
    return FloorDivide.apply(a, b, "floor_divide")


@tensor_operator("mod", Remainder)
@inplace_variant
@tensor_method
def remainder(input, other):
    """``input`` modulo ``other``, with the sign of ``other`` (Python's ``%``); RuntimeError for an integer modulo by
    zero."""
    _check_integer_divisor(input, other)
    return _binary(Remainder, input, other)


@torch_function("input", "exponent")
@tensor_operator("pow", Pow)
@inplace_variant
@tensor_method
def pow(input, exponent):
    """``input ** exponent`` elementwise (either may be a number); integers to negative integer powers follow torch (0
    unless the base is 1 or -1)."""
    if isinstance(exponent, _NUMBER) and isinstance(input, Tensor):
        exponent = _scalar(exponent)
        if input._data.dtype.kind in "iu" and isinstance(exponent, builtins.int) and exponent < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
    base, exp_ = _operands(input, exponent)
    t = base if isinstance(base, Tensor) else exp_
    if t._data.dtype.kind in "iu" and isinstance(exp_, Tensor) and builtins.bool((exp_._data < 0).any()):
        return _integer_pow(base, exp_)
    return Pow.apply(base, exp_)


def _integer_pow(base, exponent):
    """torch's integer power with negative exponents: 1**-n = 1, (-1)**-n = +-1, otherwise 0."""
    xp = exponent._device._backend.xp
    b = base._data if isinstance(base, Tensor) else base
    e = exponent._data
    positive = xp.power(b, xp.maximum(e, 0))
    odd = (e % 2) != 0
    negative = xp.where(xp.equal(b, 1), 1, xp.where(xp.equal(b, -1), xp.where(odd, -1, 1), 0))
    return wrap(xp.where(e < 0, negative, positive).astype(positive.dtype), exponent._device)


@with_out("input")
@inplace_variant
@tensor_method("neg", "negative", "__neg__")
def neg(input):
    """``-input``; RuntimeError for a bool tensor (use ``~``). ``negative`` is the same op."""
    if input.dtype is _dtypes.bool:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return Neg.apply(input)


negative = neg


@with_out("input")
@inplace_variant
@tensor_method("abs", "absolute", "__abs__")
def abs(input):
    """The absolute value, elementwise. ``absolute`` is the same op."""
    return Abs.apply(input)


absolute = abs


@torch_function("input")
@inplace_variant
@tensor_method
def sign(input):
    """-1, 0 or 1 elementwise, in input's dtype (0 for NaN)."""
    return Sign.apply(input)


@torch_function("input")
@inplace_variant
@tensor_method
def reciprocal(input):
    """``1 / input``; integer inputs give the default float dtype."""
    return Reciprocal.apply(_float_input(input))


exp = _unary_float(Exp)
expm1 = _unary_float(Expm1)
log = _unary_float(Log)
log1p = _unary_float(Log1p)
sqrt = _unary_float(Sqrt)
rsqrt = _unary_float(Rsqrt)
sin = _unary_float(Sin)
cos = _unary_float(Cos)


erf = _unary_float(Erf)


@torch_function("input")
@inplace_variant
@tensor_method
def log2(input):
    """The base-2 logarithm, elementwise."""
    return log(input) / float(np.log(2))


@torch_function("input")
@inplace_variant
@tensor_method
def log10(input):
    """The base-10 logarithm, elementwise."""
    return log(input) / float(np.log(10))


@torch_function("input")
@tensor_method
def square(input):
    """``input * input``; a bool tensor gives int64."""
    if input._data.dtype == np.bool_:
        input = _cast(input, _dtypes.int64)
    return mul(input, input)


@torch_function("input")
@inplace_variant
@tensor_method
def floor(input):
    """Rounds down elementwise; integer tensors come back as copies."""
    return Floor.apply(input) if input.is_floating_point() else input.clone()


@torch_function("input")
@inplace_variant
@tensor_method
def ceil(input):
    """Rounds up elementwise; integer tensors come back as copies."""
    return Ceil.apply(input) if input.is_floating_point() else input.clone()


@torch_function("input")
@inplace_variant
@tensor_method("trunc", "fix")
def trunc(input):
    """Rounds toward zero elementwise (also ``fix``); integer tensors come back as copies."""
    return Trunc.apply(input) if input.is_floating_point() else input.clone()


fix = trunc


@torch_function("input")
@inplace_variant
@tensor_method
def round(input, *, decimals=0):
    """Rounds half to even, at ``decimals`` decimal places; integer tensors come back as copies."""
    if not input.is_floating_point():
        return input.clone()
    return Round.apply(input, decimals) if decimals else Round.apply(input)


@with_out("input")
@inplace_variant("clamp", "clip")
@tensor_method("clamp", "clip")
def clamp(input, min=None, max=None):
    """Limits ``input`` to ``[min, max]`` (numbers or tensors, one may be None); the gradient passes inside the range.
    ``clip`` is the same op."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    bounds = [_scalar(b) if isinstance(b, _NUMBER) else b for b in (min, max)]
    given = [b for b in bounds if b is not None]
    tensors = [input] + [b for b in given if isinstance(b, Tensor)]
    target = _dtypes.result_type([t.dtype for t in tensors if t._data.ndim],
                                 [t.dtype for t in tensors if not t._data.ndim],
                                 [scalar_kind(b) for b in given if not isinstance(b, Tensor)])
    cast = lambda b: _cast(b, target) if isinstance(b, Tensor) else b
    return Clamp.apply(cast(input), *map(cast, bounds))


clip = clamp


@torch_function("input", "min")
@inplace_variant
@tensor_method
def clamp_min(input, min):
    """``clamp(input, min=min)``: no value below ``min``."""
    return clamp(input, min=min)


@torch_function("input", "max")
@inplace_variant
@tensor_method
def clamp_max(input, max):
    """``clamp(input, max=max)``: no value above ``max``."""
    return clamp(input, max=max)


@tensor_method
@torch_function("input", "other")
def maximum(input, other):
    """The larger of ``input`` and ``other`` elementwise (broadcast); a tie splits the gradient."""
    return _binary(Maximum, input, other)


@tensor_method
@torch_function("input", "other")
def minimum(input, other):
    """The smaller of ``input`` and ``other`` elementwise (broadcast); a tie splits the gradient."""
    return _binary(Minimum, input, other)


class Copysign(Op):
    """``|x|`` with the sign of ``y``; the gradient reaches x (negated where the sign flips, 0 where x
    is 0, as torch) and y gets zeros."""
    scalar_operands = True

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.copysign(x, y)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, y = ctx.saved_tensors
        flipped = xp.signbit(x) != xp.signbit(y)
        gx = xp.where(x == 0, g.dtype.type(0), xp.where(flipped, -g, g))
        gy = None if shape_of(y) is None else xp.zeros(shape_of(y), g.dtype)
        return unbroadcast(gx, shape_of(x)), gy


@with_out("input", "other")
@inplace_variant
@tensor_method
def copysign(input, other):
    """``input``'s magnitude with ``other``'s sign, elementwise and broadcast (integers give a float)."""
    return _binary(Copysign, input, other, floating=True)


@with_out("input", "other")
def where(condition, input=None, other=None):
    """Picks ``input`` where ``condition`` holds and ``other`` elsewhere (scalars allowed)."""
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)  # (a method: indexing imports this module)
    if not isinstance(condition, Tensor):
        raise TypeError(f"where(): condition must be a Tensor, got {type(condition).__name__}")
    if condition.dtype is not _dtypes.bool:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{condition.dtype}")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        from rlpipe._creation import as_tensor
        input = as_tensor(input, device=condition.device)
    x, y = _operands(input, other)
    return Where.apply(condition, x, y)


def _arithmetic_inplace(name, ufunc):
    """Replaces Tensor's in-place arithmetic method ``name`` (``add_``, ``__iadd__`` ...) by one that,
    where nothing needs recording, writes ``ufunc(self, other)`` straight into self's memory: a float
    tensor (not bfloat16) with a Python int or float, or with a tensor of its dtype, device and shape.
    Anything else (alpha=, broadcasting, promotion, graphs) takes the general method, whose result
    is the same."""
    general = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        if len(args) == 1 and not kwargs:
            other, data = args[0], self._data
            dtype, kind = data.dtype, type(other)
            if dtype in FLOATING_NP and dtype != _BFLOAT16:
                if kind is builtins.float or kind is builtins.int:
                    operand, recording = other, self._requires_grad
                elif isinstance(other, Tensor) and other._device is self._device and other._data.dtype == dtype \
                        and other._data.shape == data.shape:
                    operand, recording = other._data, self._requires_grad or other._requires_grad
                else:
                    recording = None
                if recording is not None and not (recording and _grad_state.grad) \
                        and self._device._backend.writable(data):
                    quiet = silence_fp_warnings()  # x /= 0 gives inf, as in torch, without a warning
                    try:
                        getattr(self._device._backend.xp, ufunc)(data, operand, out=data)
                    finally:
                        restore_fp_warnings(quiet)
                    self._vc[0] += 1
                    return self
        return general(self, *args, **kwargs)
    method.__name__, method.__doc__ = general.__name__, general.__doc__
    setattr(Tensor, name, method)


for _names, _ufunc in ((("add_", "__iadd__"), "add"), (("sub_", "__isub__"), "subtract"),
                       (("mul_", "__imul__"), "multiply"), (("div_", "true_divide_", "__itruediv__"), "true_divide")):
    for _name in _names:
        _arithmetic_inplace(_name, _ufunc)


@tensor_method("where")
def _where_method(self, condition, other):
    """``self`` where ``condition`` holds, ``other`` elsewhere (torch's ``Tensor.where``)."""
    return where(condition, self, other)


@tensor_method("__pos__")
def _positive(self):
    return self


@inplace_variant
@tensor_method
def lerp(input, end, weight):
    """input + weight * (end - input); ``weight`` a number or a tensor (all three broadcast)."""
    kernel = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
    _require_float(input, kernel)
    if not isinstance(end, Tensor):
        raise TypeError(f"lerp(): argument 'end' must be Tensor, not {type(end).__name__}")
    for name, other in (("end", end), ("weight", weight)):
        if isinstance(other, Tensor) and other.dtype is not input.dtype and (name == "end" or other.ndim):
            raise RuntimeError(f"expected dtype {_C_TYPE_NAMES[input.dtype.name]} for `{name}` but got dtype "
                               f"{_C_TYPE_NAMES[other.dtype.name]}")
    weight = _cast(weight, input.dtype) if isinstance(weight, Tensor) else builtins.float(_scalar(weight))
    return Lerp.apply(input, end, weight)


@inplace_variant
@tensor_method
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and the dtype's
    largest and lowest finite values); integer and bool tensors come back as copies."""
    if not input.is_floating_point():
        return input.clone()
    info = _dtypes.finfo(input.dtype)
    return NanToNum.apply(input, nan, info.max if posinf is None else posinf,
                            info.min if neginf is None else neginf)


@inplace_variant
@tensor_method
def erfc(input):
    """1 - erf(x) (computed so: it loses relative precision where erfc is tiny, x > ~4 in float32)."""
    return 1 - erf(input)


@torch_function("input")
@inplace_variant
@tensor_method
def frac(input):
    """x - trunc(x): the fractional part, with x's sign."""
    if not input.is_floating_point():
        raise RuntimeError(f'"frac_cpu" not implemented for \'{_LEGACY_TYPE_NAMES[input.dtype.name]}\'')
    return input - trunc(input)


@tensor_method
@torch_function("input", "other")
def logaddexp(input, other):
    """``log(exp(input) + exp(other))`` without overflow: the larger plus ``log1p(exp(-|input - other|))``;
    equal infinities give themselves. Float input only, as in torch."""
    if not input.is_floating_point():
        raise NotImplementedError(f'"logaddexp_cpu" not implemented for \'{_LEGACY_TYPE_NAMES[input.dtype.name]}\'')
    larger = maximum(input, other)
    gap = abs(input - other)
    same_infinity = logical_and(input == other, abs(larger) == math.inf)
    return where(same_infinity, larger, larger + log1p(exp(neg(where(same_infinity, 0.0, gap)))))
