"""The elementwise math torch has beyond ``elementwise`` and ``special``: atan2, hypot, fmod, xlogy,
fmax/fmin, sinc, exp2, asinh/acosh, frexp (Functions), and the compositions float_power, logaddexp2,
deg2rad/rad2deg, addcmul/addcdiv, heaviside, positive, sgn, rsub, ldexp; gcd, lcm and nextafter
(integer or bit-level results, no gradient); torch's aliases (``arctan2``, ``subtract``,
``multiply``), the in-place comparisons (``x.eq_(y)``) and the other in-place forms torch has for
ops defined elsewhere (``x.cumsum_(0)``, ``x.logical_not_()``, ``x.fill_diagonal_(v)``).
"""
import builtins
import math

import numpy as np

from .. import _dtypes, return_types
from .._dispatch import torch_function
from .._tensor import Tensor, tensor_method, wrap
from .base import Op, in_tensor_dtype, shape_of, unbroadcast
from .._dtypes import FLOATING_NP
from ..autograd.grad_mode import state as _grad_state
from ..backends.cpu import restore_fp_warnings, silence_fp_warnings
from .common import (_BFLOAT16, _LEGACY_TYPE_NAMES, _binary, _cast, _float_input, _inplace, _operands,
                     _unary_float, inplace_variant, tensor_operator, with_out)
from .comparison import (bitwise_and, bitwise_not, bitwise_or, bitwise_xor, eq, ge, gt, le, logical_and,
                         logical_not, logical_or, logical_xor, lt, ne)
from .elementwise import Erfinv, abs, add, div, logaddexp, mul, neg, pow, sign, square, sub, trunc
from .reductions import cumprod, cumsum
from .special import acos, asin, atan, atanh


__all__ = ["Atan2", "Hypot", "Fmod", "Xlogy", "Fmax", "Fmin", "Sinc", "Exp2", "Asinh", "Acosh", "Heaviside",
           "atan2", "arctan2", "hypot", "fmod", "xlogy", "fmax", "fmin", "sinc", "exp2", "asinh", "acosh",
           "arcsinh", "arccosh", "erfinv", "float_power", "logaddexp2", "deg2rad", "rad2deg", "heaviside",
           "positive", "addcmul", "addcdiv", "subtract", "multiply", "Frexp", "sgn", "rsub", "ldexp", "frexp", "gcd",
           "lcm", "nextafter", "FillDiagonal", "result_type", "can_cast", "bitwise_left_shift", "bitwise_right_shift",
           "Angle", "angle"]


class Atan2(Op):
    """The angle of the point (x, y), atan2(y, x); gradients g * x / r**2 and -g * y / r**2."""

    @staticmethod
    def forward(ctx, y, x):
        ctx.save_for_backward(y, x)
        return ctx.xp.arctan2(y, x)

    @staticmethod
    def backward(ctx, g):
        y, x = ctx.saved_tensors
        r2 = x * x + y * y
        return unbroadcast(g * x / r2, y.shape), unbroadcast(-g * y / r2, x.shape)


class Hypot(Op):
    """sqrt(x**2 + y**2) without overflow; gradients g * x / out and g * y / out."""

    @staticmethod
    def forward(ctx, x, y):
        out = ctx.xp.hypot(x, y)
        ctx.save_for_backward(x, y, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, y, out = ctx.saved_tensors
        return unbroadcast(g * x / out, x.shape), unbroadcast(g * y / out, y.shape)


class Fmod(Op):
    """The C remainder x - trunc(x / y) * y (the dividend's sign); gradients g and -g * trunc(x / y)."""
    scalar_operands = True

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.fmod(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gy = None
        if ctx.needs_input_grad[1]:
            gy = unbroadcast(-g * ctx.xp.trunc(x / y), shape_of(y))
        return unbroadcast(g, shape_of(x)), gy


class Xlogy(Op):
    """x * log(y), 0 where x == 0 (unless y is NaN); gradients g * log(y) (0 where x == 0) and g * x / y."""
    scalar_operands = True

    @staticmethod
    def forward(ctx, x, y):
        xp = ctx.xp
        x, y = in_tensor_dtype(xp, x, y)
        ctx.save_for_backward(x, y)
        out = x * xp.log(y)
        zero = xp.logical_and(xp.equal(x, 0), xp.logical_not(xp.isnan(y)))
        return xp.where(zero, 0, out).astype(out.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, y = ctx.saved_tensors
        need_x, need_y = ctx.needs_input_grad
        gx = gy = None
        if need_x:
            gx = xp.where(xp.equal(x, 0), 0, g * xp.log(y)).astype(g.dtype, copy=False)
            gx = unbroadcast(gx, shape_of(x))
        if need_y:
            gy = unbroadcast(g * x / y, shape_of(y))
        return gx, gy


class Fmax(Op):
    """The larger of x and y, ignoring a NaN on one side; the gradient goes to x where x >= y or y is
    NaN, to y elsewhere (ties to x, as torch)."""
    pick = "fmax"

    @classmethod
    def forward(cls, ctx, x, y):
        ctx.save_for_backward(x, y)
        return getattr(ctx.xp, cls.pick)(x, y)

    @classmethod
    def backward(cls, ctx, g):
        xp = ctx.xp
        x, y = ctx.saved_tensors
        x_wins = ((x >= y) if cls.pick == "fmax" else (x <= y)) | xp.isnan(y)
        zero = xp.zeros((), dtype=g.dtype)
        return unbroadcast(xp.where(x_wins, g, zero), x.shape), unbroadcast(xp.where(x_wins, zero, g), y.shape)


class Fmin(Fmax):
    """The smaller of x and y, ignoring a NaN on one side; ties send the gradient to x."""
    pick = "fmin"


class Sinc(Op):
    """The normalized sinc, sin(pi x) / (pi x), 1 at 0; gradient (cos(pi x) - sinc(x)) / x, 0 at 0."""

    @staticmethod
    def forward(ctx, x):
        xp = ctx.xp
        ctx.save_for_backward(x)
        px = x * x.dtype.type(math.pi)
        return xp.where(xp.equal(x, 0), 1, xp.sin(px) / px).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, = ctx.saved_tensors
        px = x * x.dtype.type(math.pi)
        slope = (xp.cos(px) * px - xp.sin(px)) / (px * x)
        return g * xp.where(xp.equal(x, 0), 0, slope).astype(g.dtype, copy=False)


class Exp2(Op):
    """2 ** x; gradient g * 2 ** x * ln 2."""

    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.exp2(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return g * out * out.dtype.type(math.log(2))


class Asinh(Op):
    """The inverse hyperbolic sine; gradient g / sqrt(x**2 + 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.arcsinh(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g / ctx.xp.sqrt(x * x + 1)


class Acosh(Op):
    """The inverse hyperbolic cosine (NaN below 1); gradient g / sqrt(x**2 - 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.arccosh(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g / ctx.xp.sqrt(x * x - 1)


class Heaviside(Op):
    """The step function: 0 below 0, 1 above, ``values`` at 0. Like torch, it has no derivative."""

    @staticmethod
    def forward(ctx, x, values):
        xp = ctx.xp
        ctx.shapes = x.shape, values.shape
        return xp.where(xp.equal(x, 0), values, x > 0).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for aten::heaviside is not implemented")


# ---- the public ops -------------------------------------------------------------------------------

def _tensor_argument(op, name, value, position):
    """torch's TypeError where an argument that must be a Tensor is a number or anything else."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not {type(value).__name__}")


def _float_only(op, tensor):
    """torch's NotImplementedError for a float-only kernel given an integer or bool tensor."""
    if not tensor.is_floating_point():
        raise NotImplementedError(f'"{op}_cpu" not implemented for \'{_LEGACY_TYPE_NAMES[tensor.dtype.name]}\'')


def _tensor_pair(op, input, other, floating):
    """Two tensor operands in their promoted dtype (``floating``: integers promote to the default float)."""
    _tensor_argument(op, "other", other, 2)
    return _operands(input, other, floating)


@with_out("input", "other")
@inplace_variant("atan2", "arctan2")
@tensor_method("atan2", "arctan2")
def atan2(input, other):
    """The angle of the point (``other``, ``input``) in radians, in [-pi, pi], elementwise and broadcast;
    integers give the default float dtype."""
    return Atan2.apply(*_tensor_pair("atan2", input, other, True))


arctan2 = atan2


@with_out("input", "other")
@inplace_variant
@tensor_method
def hypot(input, other):
    """sqrt(input**2 + other**2) elementwise and broadcast, without overflow; float tensors only."""
    a, b = _tensor_pair("hypot", input, other, False)
    _float_only("hypot", a)
    return Hypot.apply(a, b)


def _check_integer_divisor(a, b):
    """torch's error for an integer fmod by zero."""
    like = a if isinstance(a, Tensor) else b
    if not like.is_floating_point():
        zero = b == 0 if not isinstance(b, Tensor) else builtins.bool((b._data == 0).any())
        if zero:
            raise RuntimeError("ZeroDivisionError")


@with_out("input", "other")
@inplace_variant
@tensor_method
def fmod(input, other):
    """The C remainder of ``input / other`` (the sign of ``input``, unlike ``remainder``), broadcast;
    ``other`` may be a number. RuntimeError for an integer division by zero."""
    a, b = _operands(input, other)
    _check_integer_divisor(a, b)
    return Fmod.apply(a, b)


@with_out("input", "other")
@inplace_variant
@tensor_method
def xlogy(input, other):
    """``input * log(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN); either side may be a number."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"xlogy(): expected a Tensor argument, got {type(input).__name__} and "
                        f"{type(other).__name__}")
    return _binary(Xlogy, input, other, floating=True)


def _extreme(function, name, input, other):
    a, b = _tensor_pair(name, input, other, False)
    return function.apply(a, b)


@with_out("input", "other")
@tensor_method
def fmax(input, other):
    """The larger of ``input`` and ``other`` elementwise (broadcast); where one side is NaN, the other."""
    return _extreme(Fmax, "fmax", input, other)


@with_out("input", "other")
@tensor_method
def fmin(input, other):
    """The smaller of ``input`` and ``other`` elementwise (broadcast); where one side is NaN, the other."""
    return _extreme(Fmin, "fmin", input, other)


sinc = _unary_float(Sinc)
exp2 = _unary_float(Exp2)
asinh = _unary_float(Asinh)
acosh = _unary_float(Acosh)
erfinv = _unary_float(Erfinv)
arcsinh = inplace_variant("arcsinh")(tensor_method("arcsinh")(asinh))
arccosh = inplace_variant("arccosh")(tensor_method("arccosh")(acosh))
for _name, _op in (("arcsin", asin), ("arccos", acos), ("arctan", atan), ("arctanh", atanh)):
    inplace_variant(_name)(_op)


@with_out("input", "exponent")
@tensor_method
def float_power(input, exponent):
    """``input ** exponent`` computed in float64 (either side may be a number; the result is float64)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError(f"float_power(): expected a Tensor argument, got {type(input).__name__} and "
                        f"{type(exponent).__name__}")
    as_double = lambda x: _cast(x, _dtypes.float64) if isinstance(x, Tensor) else builtins.float(x)
    return pow(as_double(input), as_double(exponent))


@tensor_method
def float_power_(self, exponent):
    """In-place float_power: ``self`` must already be float64, the result's dtype."""
    if self.dtype is not _dtypes.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {_LEGACY_TYPE_NAMES[self.dtype.name]} but "
                           "the operation's result requires dtype Double")
    return self.pow_(_cast(exponent, _dtypes.float64) if isinstance(exponent, Tensor) else exponent)


@with_out("input", "other")
@tensor_method
def logaddexp2(input, other):
    """``log2(2**input + 2**other)`` without overflow; float tensors only."""
    a, b = _tensor_pair("logaddexp2", input, other, False)
    _float_only("logaddexp2", a)
    ln2 = math.log(2)
    return logaddexp(a * ln2, b * ln2) / ln2


def _scale_by(name, factor, doc):
    """The op ``name``: its input (integers as the default float dtype) times ``factor``, with its in-place form."""
    def op(input):
        return mul(_float_input(input), factor)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return with_out("input")(inplace_variant(tensor_method(op)))


deg2rad = _scale_by("deg2rad", math.pi / 180, "Degrees to radians, elementwise; integers give the default float dtype.")
rad2deg = _scale_by("rad2deg", 180 / math.pi, "Radians to degrees, elementwise; integers give the default float dtype.")


@with_out("input", "values")
@inplace_variant
@tensor_method
def heaviside(input, values):
    """The step function of ``input``: 0 below 0, 1 above, ``values`` (a tensor of input's dtype,
    broadcast) where input is 0. It has no derivative, as in torch."""
    _tensor_argument("heaviside", "values", values, 2)
    if values.dtype is not input.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return Heaviside.apply(input, values)


@torch_function("input")
@tensor_method
def positive(input):
    """``input`` itself (unary plus); RuntimeError for a bool tensor, as in torch."""
    if input.dtype is _dtypes.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def _check_value_operands(name, input, tensor1, tensor2):
    for arg, value, position in (("input", input, 1), ("tensor1", tensor1, 2), ("tensor2", tensor2, 3)):
        _tensor_argument(name, arg, value, position)


def _product_dtype(name, input, tensor1, tensor2):
    """The promoted dtype of the three operands, with torch's refusals (bool for addcmul, integers for addcdiv)."""
    dtype = _dtypes.result_type([t.dtype for t in (input, tensor1, tensor2) if t.ndim],
                                [t.dtype for t in (input, tensor1, tensor2) if not t.ndim])
    if name == "addcdiv" and not (tensor1.is_floating_point() or tensor2.is_floating_point()):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
                           "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can "
                           "be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
                           "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
                           "addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
                           "tensor2), for all dtypes.")
    if dtype is _dtypes.bool:
        raise NotImplementedError(f'"{name}_cpu_out" not implemented for \'Bool\'')
    return dtype


def _scaled_combination(name, combine, input, tensor1, tensor2, value):
    _check_value_operands(name, input, tensor1, tensor2)
    dtype = _product_dtype(name, input, tensor1, tensor2)
    if not dtype.is_floating_point:
        value = builtins.int(value)  # torch converts the scale to the integer dtype
    input, tensor1, tensor2 = (_cast(t, dtype) for t in (input, tensor1, tensor2))
    # value * tensor1 first, then tensor2: torch's kernels round in that order
    return add(input, combine(tensor1 if value == 1 else mul(tensor1, value), tensor2))


@with_out("input", "tensor1", "tensor2")
@inplace_variant
@tensor_method
def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2``, the three broadcast together, in their promoted dtype."""
    return _scaled_combination("addcmul", mul, input, tensor1, tensor2, value)


@with_out("input", "tensor1", "tensor2")
@inplace_variant
@tensor_method
def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2``, the three broadcast together; integer tensor1 and tensor2
    raise torch's RuntimeError (it no longer divides integers here)."""
    return _scaled_combination("addcdiv", div, input, tensor1, tensor2, value)


def _direct_inplace(name, ufunc):
    """Replaces Tensor's ``name`` (``addcmul_``, ``addcdiv_``) by one that, where nothing needs recording
    and both tensors have self's float dtype (not bfloat16), device and shape, updates self's memory
    directly: ``self += ufunc(value * tensor1, tensor2)``, torch's order of rounding. Anything else
    takes the general method, whose result is the same (what optimizer loops written by hand call)."""
    general = getattr(Tensor, name)

    def method(self, tensor1, tensor2, *, value=1):
        data = self._data
        if type(tensor1) is Tensor and type(tensor2) is Tensor and data.dtype in FLOATING_NP and \
                data.dtype != _BFLOAT16 and tensor1._data.dtype == data.dtype == tensor2._data.dtype and \
                tensor1._device is self._device is tensor2._device and \
                tensor1._data.shape == data.shape == tensor2._data.shape and \
                not (_grad_state.grad and (self._requires_grad or tensor1._requires_grad or tensor2._requires_grad)) \
                and self._device._backend.writable(data):
            quiet = silence_fp_warnings()  # a division by zero gives inf, as in torch, without a warning
            try:
                term = tensor1._data * value if value != 1 else tensor1._data.copy()
                getattr(self._device._backend.xp, ufunc)(term, tensor2._data, out=term)
                data += term
            finally:
                restore_fp_warnings(quiet)
            self._vc[0] += 1
            return self
        return general(self, tensor1, tensor2, value=value)
    method.__name__, method.__doc__ = general.__name__, general.__doc__
    setattr(Tensor, name, method)


_direct_inplace("addcmul_", "multiply")
_direct_inplace("addcdiv_", "true_divide")

subtract = sub
multiply = mul
tensor_method("subtract")(sub)
tensor_method("multiply")(mul)
for _name, _op in (("subtract", sub), ("multiply", mul), ("divide", div)):
    inplace_variant(_name)(_op)

# in-place comparisons: ``x.lt_(y)`` stores the bool result in x's dtype (1 or 0)
for _names, _op in ((("eq",), eq), (("ne", "not_equal"), ne), (("lt", "less"), lt), (("le", "less_equal"), le),
                    (("gt", "greater"), gt), (("ge", "greater_equal"), ge)):
    inplace_variant(*_names)(_op)
del _name, _names, _op


# ---- sign, reversed subtraction, exponents and integer math ----------------------------------------

class Frexp(Op):
    """(mantissa, exponent) with x = mantissa * 2**exponent, |mantissa| in [0.5, 1); the mantissa's
    gradient is g / 2**exponent (the exponent is an int32 index, not differentiable)."""

    @staticmethod
    def forward(ctx, x):
        mantissa, exponent = ctx.xp.frexp(x)
        exponent = exponent.astype(np.int32)
        ctx.save_for_backward(exponent)
        ctx.mark_non_differentiable(exponent)
        return mantissa, exponent

    @staticmethod
    def backward(ctx, g, _):
        exponent, = ctx.saved_tensors
        return g / ctx.xp.exp2(exponent).astype(g.dtype)


@with_out("input")
@inplace_variant
@tensor_method
def sgn(input):
    """The sign of each element (``sign`` for real tensors: -1, 0 or 1; gradient zero)."""
    return sign(input)


@with_out("input", "other")
@tensor_method
def rsub(input, other, *, alpha=1):
    """``other - alpha * input`` (subtraction with the operands reversed)."""
    return sub(other, input, alpha=alpha)


@with_out("input", "other")
@inplace_variant
@tensor_method
def ldexp(input, other):
    """``input * 2 ** other`` elementwise and broadcast (integers give the default float dtype)."""
    return mul(input, exp2(other))


@tensor_method
def frexp(input):
    """``(mantissa, exponent)``: float mantissas in [0.5, 1) (0 for 0) and int32 exponents with
    ``input = mantissa * 2 ** exponent``. Float tensors only."""
    if not input.is_floating_point():
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return return_types.frexp(*Frexp.apply(input))


def _integer_ufunc(name, input, other):
    """gcd or lcm of two integer operands, broadcast (no gradient: their values are integers)."""
    a, b = _operands(input, other)
    like = a if isinstance(a, Tensor) else b
    if like.is_floating_point() or like.dtype is _dtypes.bool:
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_LEGACY_TYPE_NAMES[like.dtype.name]}\'')
    values = [x._data if isinstance(x, Tensor) else x for x in (a, b)]
    return wrap(getattr(like._device._backend.xp, name)(*values).astype(like._data.dtype, copy=False), like._device)


@with_out("input", "other")
@inplace_variant
@tensor_method
def gcd(input, other):
    """The greatest common divisor of integer ``input`` and ``other`` elementwise (non-negative; gcd(0, 0) = 0)."""
    return _integer_ufunc("gcd", input, other)


@with_out("input", "other")
@inplace_variant
@tensor_method
def lcm(input, other):
    """The least common multiple of integer ``input`` and ``other`` elementwise (non-negative; 0 where either is 0)."""
    return _integer_ufunc("lcm", input, other)


@with_out("input", "other")
@inplace_variant
@tensor_method
def nextafter(input, other):
    """The next float after ``input`` towards ``other``, elementwise (float tensors; not differentiable)."""
    a, b = _tensor_pair("nextafter", input, other, False)
    _float_only("nextafter", a)
    return wrap(a._device._backend.xp.nextafter(a._data, b._data), a._device)


# ---- in-place forms torch has for ops defined elsewhere --------------------------------------------

class FillDiagonal(Op):
    """x with its main diagonal (every dim's index equal; ``wrap``: restarting below a tall matrix's
    square part, as NumPy) set to ``value``; the gradient is zero there."""

    @staticmethod
    def forward(ctx, x, value, wrap):
        out = x.copy()
        ctx.xp.fill_diagonal(out, value, wrap=wrap)
        ctx.wrap = wrap
        return out

    @staticmethod
    def backward(ctx, g):
        out = g.copy()
        ctx.xp.fill_diagonal(out, 0, wrap=ctx.wrap)
        return out, None, None


@tensor_method
def fill_diagonal_(self, fill_value, wrap=False):
    """Writes ``fill_value`` on the main diagonal of ``self`` (2-d, or all dims of one length); a tall
    matrix's diagonal restarts every cols + 1 rows with ``wrap``. Returns self."""
    if self.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.ndim > 2 and len(set(self.shape)) > 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    return _inplace(self, lambda source: FillDiagonal.apply(source, fill_value, builtins.bool(wrap)))


for _name, _op in (("absolute", abs), ("negative", neg), ("fix", trunc), ("square", square), ("cumsum", cumsum),
                   ("cumprod", cumprod), ("bitwise_and", bitwise_and), ("bitwise_or", bitwise_or),
                   ("bitwise_xor", bitwise_xor), ("bitwise_not", bitwise_not), ("logical_and", logical_and),
                   ("logical_or", logical_or), ("logical_xor", logical_xor), ("logical_not", logical_not)):
    inplace_variant(_name)(_op)
del _name, _op


# ---- dtype queries ---------------------------------------------------------------------------------

def result_type(tensor1, tensor2):
    """The dtype an elementwise op on ``tensor1`` and ``tensor2`` (tensors or numbers) gives, by torch's
    promotion rules (dimensioned tensors, then 0-d ones, then numbers, each only when of a higher kind)."""
    dims, zeros, ranks = [], [], []
    for value in (tensor1, tensor2):
        if isinstance(value, Tensor):
            (dims if value.ndim else zeros).append(value.dtype)
        elif _dtypes.scalar_kind(value) is not None:
            ranks.append(_dtypes.scalar_kind(value))
        else:
            raise TypeError(f"result_type(): argument must be a Tensor or a Number, not {type(value).__name__}")
    return _dtypes.result_type(dims, zeros, ranks)


def can_cast(from_, to):
    """Whether torch's type promotion allows ``from_`` to become ``to``: never to a lower kind
    (float to integer or bool, integer to bool); within a kind, any way."""
    for name, value, position in (("from_", from_, 1), ("to", to, 2)):
        if not isinstance(value, _dtypes.dtype):
            raise TypeError(f"can_cast(): argument '{name}' (position {position}) must be torch.dtype, not "
                            f"{type(value).__name__}")
    return from_._rank <= to._rank


# ---- bit shifts ------------------------------------------------------------------------------------

def _shift(input, other, left):
    """input shifted by other bits (broadcast, integer tensors): a shift by a negative count or by the
    width or more gives 0 to the left and the sign to the right, as torch defines it."""
    kernel = "lshift" if left else "rshift"
    for value in (input, other):
        if isinstance(value, Tensor) and value.is_floating_point() or isinstance(value, builtins.float):
            dtype = value.dtype if isinstance(value, Tensor) else _dtypes.float32
            raise NotImplementedError(f'"{kernel}_cpu" not implemented for \'{_LEGACY_TYPE_NAMES[dtype.name]}\'')
    a, b = _operands(input, other)
    like = a if isinstance(a, Tensor) else b
    xp = like._device._backend.xp
    av, bv = (x._data if isinstance(x, Tensor) else xp.asarray(x, dtype=like._data.dtype) for x in (a, b))
    bits = like._data.dtype.itemsize * 8
    outside = (bv < 0) | (bv >= bits)
    count = xp.where(outside, 0, bv).astype(av.dtype, copy=False)
    if left:
        shifted = xp.where(outside, 0, xp.left_shift(av, count))
    else:
        shifted = xp.where(outside, xp.right_shift(av, bits - 1), xp.right_shift(av, count))
    return wrap(shifted.astype(like._data.dtype, copy=False), like._device)


@with_out("input", "other")
@tensor_operator("lshift")
@inplace_variant
@tensor_method
def bitwise_left_shift(input, other):
    """``input << other`` for integer tensors and numbers, broadcast; also the ``<<`` operator."""
    return _shift(input, other, True)


@with_out("input", "other")
@tensor_operator("rshift")
@inplace_variant
@tensor_method
def bitwise_right_shift(input, other):
    """``input >> other`` (arithmetic: the sign fills in) for integer tensors and numbers; also ``>>``."""
    return _shift(input, other, False)


class Angle(Op):
    """The argument of a real number: pi below 0, 0 from 0 up, NaN for NaN; gradient zero."""

    @staticmethod
    def forward(ctx, x):
        xp = ctx.xp
        return xp.where(xp.isnan(x), x, xp.where(x < 0, x.dtype.type(math.pi), x.dtype.type(0))).astype(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.zeros_like(g)


@with_out("input")
@tensor_method
def angle(input):
    """The argument of each (real) element: pi for negatives, 0 otherwise, NaN for NaN; integers give floats."""
    return Angle.apply(_float_input(input))
