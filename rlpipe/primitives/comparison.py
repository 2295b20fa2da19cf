"""Comparisons, logic, bit operations and the elementwise tests (isnan, isclose...): not
differentiable, so no Functions; each op computes its boolean (or integer) result on the backend.
Declares the operators ``== != < <= > >= & | ^ ~``.
"""
import builtins

from .. import _dtypes
from .._dispatch import torch_function
from .._tensor import Tensor, tensor_method, wrap
from ..autograd.function import explain
from .common import _LEGACY_TYPE_NAMES, tensor_operator, _operands


def _compare(ufunc_name, doc):
    def op(input, other):
        try:
            a, b = _operands(input, other)
        except TypeError:
            return NotImplemented
        t = a if isinstance(a, Tensor) else b
        av = a._data if isinstance(a, Tensor) else a
        bv = b._data if isinstance(b, Tensor) else b
        if isinstance(a, Tensor) and isinstance(b, Tensor) and a._device is not b._device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{a._device} and {b._device}!")
        try:
            return wrap(getattr(t._device._backend.xp, ufunc_name)(av, bv), t._device)
        except (ValueError, TypeError) as e:
            raise RuntimeError(explain(e, [av, bv])) from None
    op.__name__, op.__doc__ = ufunc_name, doc
    return op


def _comparison(name, ufunc_name, symbol, *aliases):
    """A comparison, declared as Tensor method ``name`` (and ``aliases``) and as operator ``__name__``."""
    doc = (f"``input {symbol} other`` elementwise, broadcast, as a bool tensor (``other`` may be a number); "
           f"also the ``{symbol}`` operator")
    doc += f"; ``{aliases[0]}`` is the same op." if aliases else "."
    method = tensor_method(name, *aliases)(_compare(ufunc_name, doc))
    tensor_operator(name, reflected=False, inplace=False)(method)
    public = torch_function("input", "other")(method)
    public.__name__ = name  # (what a __torch_function__ hook reads: vmap's rules go by torch's op names)
    return public


eq = _comparison("eq", "equal", "==")
ne = _comparison("ne", "not_equal", "!=", "not_equal")
lt = _comparison("lt", "less", "<", "less")
le = _comparison("le", "less_equal", "<=", "less_equal")
gt = _comparison("gt", "greater", ">", "greater")
ge = _comparison("ge", "greater_equal", ">=", "greater_equal")
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
logical_and = tensor_method(_compare("logical_and", "True where ``input`` and ``other`` are both nonzero (bool)."))
logical_or = tensor_method(_compare("logical_or", "True where ``input`` or ``other`` is nonzero (bool result)."))
logical_xor = tensor_method(_compare("logical_xor", "True where exactly one of ``input`` and ``other`` is nonzero "
                                                    "(bool result)."))
def _bitwise(name, symbol):
    compare = _compare(name, None)

    def op(input, other):
        for x in (input, other):
            if isinstance(x, Tensor):
                _require_float_free(x, name)
            elif isinstance(x, builtins.float):
                raise NotImplementedError(f'"{name}_cpu" not implemented for \'Float\'')
        return compare(input, other)
    op.__name__ = name
    op.__doc__ = (f"Bitwise ``{symbol}`` of integer or bool tensors (logical for bool); also the ``{symbol}`` "
                  "operator. NotImplementedError for floats, as in torch.")
    return op


def _require_float_free(x, name):
    if x.is_floating_point():
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_LEGACY_TYPE_NAMES[x.dtype.name]}\'')


bitwise_and = tensor_operator("and")(tensor_method(_bitwise("bitwise_and", "&")))
bitwise_or = tensor_operator("or")(tensor_method(_bitwise("bitwise_or", "|")))
bitwise_xor = tensor_operator("xor")(tensor_method(_bitwise("bitwise_xor", "^")))


def _elementwise_test(name, where):
    def op(input):
        return wrap(getattr(input._device._backend.xp, name)(input._data), input._device)
    op.__name__, op.__doc__ = name, f"A bool tensor, True where {where}."
    return op


logical_not = torch_function("input")(tensor_method(_elementwise_test("logical_not", "``input`` is zero")))
isnan = torch_function("input")(tensor_method(_elementwise_test("isnan", "``input`` is NaN")))
isinf = torch_function("input")(tensor_method(_elementwise_test("isinf", "``input`` is +inf or -inf")))
isfinite = torch_function("input")(tensor_method(_elementwise_test("isfinite", "``input`` is neither inf nor NaN")))
signbit = tensor_method(_elementwise_test("signbit", "the sign bit of ``input`` is set (negative numbers and -0.0)"))


@tensor_method
def bitwise_not(input):
    """Bitwise NOT of an integer tensor (logical NOT of a bool one); NotImplementedError for floats."""
    _require_float_free(input, "bitwise_not")
    return wrap(input._device._backend.xp.invert(input._data), input._device)


@tensor_method
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True where ``|input - other| <= atol + rtol * |other|`` (NaNs equal only with ``equal_nan``)."""
    a, b = _operands(input, other)
    return wrap(input._device._backend.xp.isclose(a._data, b._data if isinstance(b, Tensor) else b,
                                                  rtol=rtol, atol=atol, equal_nan=equal_nan), input._device)


@tensor_method
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True (a Python bool) when ``isclose`` holds everywhere."""
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all())


@tensor_method
def equal(input, other):
    """True (a Python bool) when both tensors have the same shape and the same values."""
    return input.shape == other.shape and builtins.bool(eq(input, other).all())


@tensor_method("__invert__")
def _invert(self):
    return logical_not(self) if self.dtype is _dtypes.bool else bitwise_not(self)


@tensor_method
def isposinf(input):
    """True where ``input`` is +inf."""
    return logical_and(isinf(input), gt(input, 0))


@tensor_method
def isneginf(input):
    """True where ``input`` is -inf."""
    return logical_and(isinf(input), lt(input, 0))


@tensor_method
def isreal(input):
    """True everywhere: rlpipe has no complex dtypes."""
    from rlpipe._creation import ones_like
    return ones_like(input, dtype=_dtypes.bool)
