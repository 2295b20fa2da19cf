"""The public ops: argument handling, type promotion, views and in-place updates around the
Functions of ``rlpipe.primitives``. Each op is a plain function (``rlpipe.add``); its decorators
declare it as a Tensor method (``x.add``), in-place method (``x.add_``) and operator (``x + y``)
where PyTorch has one.
"""
import builtins
import collections
import functools
import math
import operator
import string

import numpy as np

from . import _dtypes
from . import primitives as P
from ._device import CPU as _CPU, device as _device_cls, resolve as _resolve_device
from ._dtypes import FLOATING_NP, scalar_kind
from ._dispatch import NO_HOOK, handle_torch_function, has_torch_function
from ._tensor import Tensor, method_decorator, tensor_method, wrap
from .autograd.function import explain, returned_input_error
from .backends.cpu import index_add as _cpu_index_add, silence_fp_warnings, restore_fp_warnings
from .autograd.grad_mode import state as _grad_state

__all__ = """add sub mul div true_divide divide floor_divide remainder pow neg negative abs absolute sign
reciprocal exp expm1 log log1p log2 log10 sqrt rsqrt square sin cos tanh sigmoid erf relu leaky_relu gelu
softplus floor ceil trunc fix round clamp clip clamp_min clamp_max maximum minimum where eq ne lt le gt ge
greater greater_equal less less_equal not_equal logical_and logical_or logical_xor logical_not bitwise_and
bitwise_or bitwise_xor bitwise_not isnan isinf isfinite signbit isclose allclose equal sum nansum mean prod
max min amax amin argmax argmin var std var_mean std_mean logsumexp norm all any count_nonzero cumsum
cumprod softmax log_softmax one_hot reshape flatten unflatten squeeze unsqueeze permute transpose swapaxes
swapdims t movedim moveaxis broadcast_to broadcast_tensors narrow select clone cat concat concatenate
stack hstack vstack split chunk tensor_split unbind gather take_along_dim scatter scatter_add index_select
masked_fill masked_select nonzero unique matmul mm bmm dot outer einsum flip roll fliplr flipud rot90 tile
atleast_1d atleast_2d atleast_3d""".split()

_BFLOAT16 = _dtypes.bfloat16.np
_NUMBER = (builtins.int, builtins.float, builtins.bool, np.number, np.bool_)
_INT64 = np.dtype(np.int64)


# ---- declaring Tensor methods and operators -----------------------------------------------------

@method_decorator
def inplace_variant(op, names):
    """Decorator: attaches ``name_`` to Tensor for the op's name (or each of ``names``): ``x.add_(y)``
    computes ``add(x, y)`` and writes the result into x (see ``_inplace``)."""
    for name in names:
        def method(self, *args, **kwargs):
            return _inplace(self, lambda src, *others: op(src, *others, **kwargs), *args)
        method.__name__ = name + "_"
        method.__doc__ = f"In-place {name}."
        setattr(Tensor, method.__name__, method)
    return op


def tensor_operator(name, fast=None, reflected=True, inplace=True):
    """Decorator: attaches the op as Tensor's ``__name__`` (and ``__rname__``, ``__iname__`` unless told
    otherwise). ``fast``: the Function that float tensors call directly when the other operand is a
    same-dtype tensor or a Python number, skipping promotion (see ``_operator``)."""
    def attach(op):
        setattr(Tensor, f"__{name}__", _operator(op, fast) if fast else _swallow_type_error(op))
        if reflected:
            setattr(Tensor, f"__r{name}__", _operator(op, fast, True) if fast else _swallow_type_error(_reflected(op)))
        if inplace:
            setattr(Tensor, f"__i{name}__", lambda self, other: _inplace(self, op, other))
        return op
    return attach


def _operator(fn, function_cls, reflected=False):
    """A Tensor operator: float tensors with a same-dtype tensor or a Python number skip promotion."""
    def operator(self, other):
        dt = self._data.dtype
        if function_cls is not None and dt in FLOATING_NP and dt != _BFLOAT16 and (
                type(other) is builtins.float or type(other) is builtins.int or
                                  type(other) is Tensor and other._data.dtype is dt):
            return function_cls.apply(other, self) if reflected else function_cls.apply(self, other)
        try:
            return fn(other, self) if reflected else fn(self, other)
        except TypeError:
            return NotImplemented
    return operator


def _reflected(fn):
    def method(self, other):
        return fn(other, self)
    return method


def _swallow_type_error(fn):
    def method(self, other):
        try:
            return fn(self, other)
        except TypeError:
            return NotImplemented
    return method


# ---- operands and promotion --------------------------------------------------------------

def _scalar(x):
    """NumPy scalars count as Python scalars (PyTorch treats them so)."""
    return x.item() if isinstance(x, (np.number, np.bool_)) else x


def _tensor_like(x, like):
    """A NumPy array or nested list operand as a tensor on ``like``'s device."""
    from rlpipe._creation import as_tensor
    return as_tensor(x, device=like._device)


def _operands(a, b, floating=False):
    """Brings two operands (at least one a Tensor) to PyTorch's result dtype.

    Returns tensors cast as needed, or a tensor and a Python scalar that NumPy will treat as
    'weak' (it does not widen the tensor's dtype). ``floating`` forces a floating result (true
    division, float functions)."""
    if not isinstance(a, Tensor):
        a = _scalar(a) if isinstance(a, _NUMBER) else _tensor_like(a, b)
    if not isinstance(b, Tensor):
        b = _scalar(b) if isinstance(b, _NUMBER) else _tensor_like(b, a)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        da, db = a._data.dtype, b._data.dtype
        if da == db and (not floating or da in FLOATING_NP):
            return a, b
        ta, tb = a.dtype, b.dtype
        dims = [t for t, x in ((ta, a), (tb, b)) if x._data.ndim]
        zeros = [t for t, x in ((ta, a), (tb, b)) if not x._data.ndim]
        target = _dtypes.result_type(dims, zeros)
    else:
        t, s = (a, b) if isinstance(a, Tensor) else (b, a)
        kind = scalar_kind(s)
        if kind is None:
            raise TypeError(f"unsupported operand type: {type(s).__name__} (expected a Tensor, number or array)")
        own = t.dtype
        if own is _dtypes.bfloat16 and kind is not None:
            # NumPy promotes ml_dtypes' bfloat16 with a Python float to float32: make the number bfloat16
            s = np.asarray(s, dtype=t._data.dtype)
            return (t, s) if t is a else (s, t)
        if kind == 2 and own._rank == 2:
            wrapped = _wrap_int(s, own)
            if wrapped is not s:
                a, b = (t, wrapped) if t is a else (wrapped, t)
        if kind <= own._rank and (not floating or own.is_floating_point):
            return a, b
        target = _dtypes.result_type([own], (), [kind])
    if floating and not target.is_floating_point:
        target = _dtypes.get_default_dtype()
    cast = lambda x: _cast(x, target) if isinstance(x, Tensor) else x
    return cast(a), cast(b)


def _wrap_int(value, dtype):
    """A Python int outside ``dtype``'s range, wrapped into it as torch's C++ casts do."""
    info = np.iinfo(dtype.np)
    if info.min <= value <= info.max:
        return value
    return np.array(value & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64).astype(dtype.np)[()]


def _float_input(x):
    """Integer and bool tensors become the default float dtype before float-valued functions."""
    return x if x._data.dtype in FLOATING_NP else _cast(x, _dtypes.get_default_dtype())


def _binary(fn, a, b, floating=False):
    try:
        a, b = _operands(a, b, floating)
    except TypeError:
        return NotImplemented
    return fn.apply(a, b)


def _unary_float(fn):
    """The op that applies ``fn`` to a float tensor, declared as a Tensor method with an in-place variant."""
    def op(input):
        return fn.apply(_float_input(input))
    op.__name__ = fn.__name__.lower()
    op.__doc__ = f"Elementwise {op.__name__}; integer inputs give the default float dtype."
    return inplace_variant(tensor_method(op))


# ---- arithmetic ----------------------------------------------------------------------------

def _scaled(other, alpha):
    return other if alpha == 1 else mul(other, alpha) if isinstance(other, Tensor) else other * alpha


@tensor_operator("add", P.Add)
@inplace_variant
@tensor_method
def add(input, other, *, alpha=1):
    return _binary(P.Add, input, _scaled(other, alpha))


@tensor_operator("sub", P.Sub)
@inplace_variant
@tensor_method
def sub(input, other, *, alpha=1):
    is_bool = [isinstance(x, (builtins.bool, np.bool_)) or isinstance(x, Tensor) and x._data.dtype == np.bool_
               for x in (input, other)]
    if builtins.all(is_bool):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if builtins.any(is_bool):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    return _binary(P.Sub, input, _scaled(other, alpha))


def _require_float(input, name, error=NotImplementedError):
    """torch implements some kernels for floating types only."""
    if not input.is_floating_point():
        raise error(f'"{name}" not implemented for \'{_LEGACY_TYPE_NAMES[input.dtype.name]}\'')


@tensor_operator("mul", P.Mul)
@inplace_variant
@tensor_method
def mul(input, other):
    return _binary(P.Mul, input, other)


@tensor_operator("truediv", P.Div)
@inplace_variant("div", "true_divide")
@tensor_method("div", "true_divide", "divide")
def div(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _binary(P.Div, input, other, floating=True)
    if rounding_mode == "floor":
        _check_integer_divisor(input, other)
        return P.FloorDivide.apply(*_operands(input, other), "floor")
    if rounding_mode == "trunc":
        a, b = _operands(input, other)
        like = a if isinstance(a, Tensor) else b
        a, b = (x if isinstance(x, Tensor) else full_like(like, x) for x in (a, b))
        if like.is_floating_point():
            return P.FloorDivide.apply(a, b, "trunc")
        floor = floor_divide(a, b)  # integers: round toward zero instead of down
        rounded_down = logical_and(ne(remainder(a, b), 0), ne(lt(a, 0), lt(b, 0)))
        return where(rounded_down, floor + 1, floor)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}")


true_divide = divide = div


def full_like(like, value):
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
    _check_integer_divisor(input, other)
    try:
        a, b = _operands(input, other)
    except TypeError:
        return NotImplemented
    return P.FloorDivide.apply(a, b, "floor_divide")


@tensor_operator("mod", P.Remainder)
@inplace_variant
@tensor_method
def remainder(input, other):
    _check_integer_divisor(input, other)
    return _binary(P.Remainder, input, other)


@tensor_operator("pow", P.Pow)
@inplace_variant
@tensor_method
def pow(input, exponent):
    if isinstance(exponent, _NUMBER) and isinstance(input, Tensor):
        exponent = _scalar(exponent)
        if input._data.dtype.kind in "iu" and isinstance(exponent, builtins.int) and exponent < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
    base, exp_ = _operands(input, exponent)
    t = base if isinstance(base, Tensor) else exp_
    if t._data.dtype.kind in "iu" and isinstance(exp_, Tensor) and builtins.bool((exp_._data < 0).any()):
        return _integer_pow(base, exp_)
    return P.Pow.apply(base, exp_)


def _integer_pow(base, exponent):
    """torch's integer power with negative exponents: 1**-n = 1, (-1)**-n = +-1, otherwise 0."""
    xp = exponent._device._backend.xp
    b = base._data if isinstance(base, Tensor) else base
    e = exponent._data
    positive = xp.power(b, xp.maximum(e, 0))
    odd = (e % 2) != 0
    negative = xp.where(xp.equal(b, 1), 1, xp.where(xp.equal(b, -1), xp.where(odd, -1, 1), 0))
    return wrap(xp.where(e < 0, negative, positive).astype(positive.dtype), exponent._device)


@inplace_variant
@tensor_method("neg", "negative", "__neg__")
def neg(input):
    if input.dtype is _dtypes.bool:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return P.Neg.apply(input)


negative = neg


@inplace_variant
@tensor_method("abs", "absolute", "__abs__")
def abs(input):
    return P.Abs.apply(input)


absolute = abs


@inplace_variant
@tensor_method
def sign(input):
    return P.Sign.apply(input)


@inplace_variant
@tensor_method
def reciprocal(input):
    return P.Reciprocal.apply(_float_input(input))


exp = _unary_float(P.Exp)
expm1 = _unary_float(P.Expm1)
log = _unary_float(P.Log)
log1p = _unary_float(P.Log1p)
sqrt = _unary_float(P.Sqrt)
rsqrt = _unary_float(P.Rsqrt)
sin = _unary_float(P.Sin)
cos = _unary_float(P.Cos)
tanh = _unary_float(P.Tanh)
sigmoid = _unary_float(P.Sigmoid)
erf = _unary_float(P.Erf)


@tensor_method
def log2(input):
    return log(input) / float(np.log(2))


@tensor_method
def log10(input):
    return log(input) / float(np.log(10))


@tensor_method
def square(input):
    if input._data.dtype == np.bool_:
        input = _cast(input, _dtypes.int64)
    return mul(input, input)


@inplace_variant
@tensor_method
def relu(input):
    return P.Relu.apply(input)


def leaky_relu(input, negative_slope=0.01):
    _require_float(input, "leaky_relu_cpu")
    return P.LeakyRelu.apply(input, float(negative_slope))


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    _require_float(input, "GeluKernelImpl")
    return P.Gelu.apply(input, approximate)


def softplus(input, beta=1.0, threshold=20.0):
    _require_float(input, "softplus_cpu")
    return P.Softplus.apply(input, float(beta), float(threshold))


@inplace_variant
@tensor_method
def floor(input):
    return P.Floor.apply(input) if input.is_floating_point() else input.clone()


@inplace_variant
@tensor_method
def ceil(input):
    return P.Ceil.apply(input) if input.is_floating_point() else input.clone()


@inplace_variant
@tensor_method("trunc", "fix")
def trunc(input):
    return P.Trunc.apply(input) if input.is_floating_point() else input.clone()


fix = trunc


@inplace_variant
@tensor_method
def round(input, *, decimals=0):
    if not input.is_floating_point():
        return input.clone()
    return P.Round.apply(input, decimals) if decimals else P.Round.apply(input)


@inplace_variant("clamp", "clip")
@tensor_method("clamp", "clip")
def clamp(input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    bounds = [_scalar(b) if isinstance(b, _NUMBER) else b for b in (min, max)]
    given = [b for b in bounds if b is not None]
    tensors = [input] + [b for b in given if isinstance(b, Tensor)]
    target = _dtypes.result_type([t.dtype for t in tensors if t._data.ndim],
                                 [t.dtype for t in tensors if not t._data.ndim],
                                 [scalar_kind(b) for b in given if not isinstance(b, Tensor)])
    cast = lambda b: _cast(b, target) if isinstance(b, Tensor) else b
    return P.Clamp.apply(cast(input), *map(cast, bounds))


clip = clamp


@inplace_variant
@tensor_method
def clamp_min(input, min):
    return clamp(input, min=min)


@inplace_variant
@tensor_method
def clamp_max(input, max):
    return clamp(input, max=max)


@tensor_method
def maximum(input, other):
    if (type(input) not in NO_HOOK or type(other) not in NO_HOOK) and has_torch_function(input, other):
        return handle_torch_function(maximum, (input, other), {})
    return _binary(P.Maximum, input, other)


@tensor_method
def minimum(input, other):
    if (type(input) not in NO_HOOK or type(other) not in NO_HOOK) and has_torch_function(input, other):
        return handle_torch_function(minimum, (input, other), {})
    return _binary(P.Minimum, input, other)


def where(condition, input=None, other=None, *, out=None):
    """Picks ``input`` where ``condition`` holds and ``other`` elsewhere (scalars allowed)."""
    if (type(input) not in NO_HOOK or type(other) not in NO_HOOK) and has_torch_function(input, other):
        return handle_torch_function(where, (condition, input, other), {"out": out})
    if out is not None:
        return _into(out, where(condition, input, other))
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if not isinstance(condition, Tensor):
        raise TypeError(f"where(): condition must be a Tensor, got {type(condition).__name__}")
    if condition.dtype is not _dtypes.bool:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{condition.dtype}")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        from rlpipe._creation import as_tensor
        input = as_tensor(input, device=condition.device)
    x, y = _operands(input, other)
    return P.Where.apply(condition, x, y)


# ---- comparisons and logic (not differentiable) ----------------------------------------------

def _compare(ufunc_name):
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
    op.__name__ = ufunc_name
    return op


def _comparison(name, ufunc_name, *aliases):
    """A comparison, declared as Tensor method ``name`` (and ``aliases``) and as operator ``__name__``."""
    method = tensor_method(name, *aliases)(_compare(ufunc_name))
    return tensor_operator(name, reflected=False, inplace=False)(method)


eq = _comparison("eq", "equal")
ne = _comparison("ne", "not_equal", "not_equal")
lt = _comparison("lt", "less", "less")
le = _comparison("le", "less_equal", "less_equal")
gt = _comparison("gt", "greater", "greater")
ge = _comparison("ge", "greater_equal", "greater_equal")
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
logical_and = tensor_method(_compare("logical_and"))
logical_or = tensor_method(_compare("logical_or"))
logical_xor = tensor_method(_compare("logical_xor"))
def _bitwise(name):
    compare = _compare(name)

    def op(input, other):
        for x in (input, other):
            if isinstance(x, Tensor):
                _require_float_free(x, name)
            elif isinstance(x, builtins.float):
                raise NotImplementedError(f'"{name}_cpu" not implemented for \'Float\'')
        return compare(input, other)
    op.__name__ = name
    return op


def _require_float_free(x, name):
    if x.is_floating_point():
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_LEGACY_TYPE_NAMES[x.dtype.name]}\'')


bitwise_and = tensor_operator("and")(tensor_method(_bitwise("bitwise_and")))
bitwise_or = tensor_operator("or")(tensor_method(_bitwise("bitwise_or")))
bitwise_xor = tensor_operator("xor")(tensor_method(_bitwise("bitwise_xor")))


def _elementwise_test(name):
    def op(input):
        return wrap(getattr(input._device._backend.xp, name)(input._data), input._device)
    op.__name__ = name
    return op


logical_not = tensor_method(_elementwise_test("logical_not"))
isnan = tensor_method(_elementwise_test("isnan"))
isinf = tensor_method(_elementwise_test("isinf"))
isfinite = tensor_method(_elementwise_test("isfinite"))
signbit = tensor_method(_elementwise_test("signbit"))


@tensor_method
def bitwise_not(input):
    _require_float_free(input, "bitwise_not")
    return wrap(input._device._backend.xp.invert(input._data), input._device)


@tensor_method
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = _operands(input, other)
    return wrap(input._device._backend.xp.isclose(a._data, b._data if isinstance(b, Tensor) else b,
                                                  rtol=rtol, atol=atol, equal_nan=equal_nan), input._device)


@tensor_method
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all())


@tensor_method
def equal(input, other):
    return input.shape == other.shape and builtins.bool(eq(input, other).all())


# ---- reductions ---------------------------------------------------------------------------------

def _reduce_dims(x, dim):
    """Normalized reduction dims: None for all, else a sorted tuple (duplicates rejected)."""
    if dim is None or x._data.ndim == 0:
        if dim is not None:
            dims = [x._dim(d) for d in (dim if isinstance(dim, (list, tuple)) else (dim,))]
            if len(set(dims)) < len(dims):
                raise RuntimeError(f"dim {dims[0]} appears multiple times in the list of dims")
        return None
    if isinstance(dim, (list, tuple)):
        if not dim:
            return None
        dims = [x._dim(d) for d in dim]
        for d in dims:
            if dims.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        return tuple(sorted(dims))
    return (x._dim(dim),)


def _accumulator(x, dtype):
    """The NumPy dtype a sum or product accumulates in: int64 for integers and bools, float32 for
    half types (their result is cast back), as torch does."""
    if dtype is not None:
        return _dtypes.as_dtype(dtype).np
    if x._data.dtype in FLOATING_NP:
        return np.dtype(np.float32) if x._data.dtype.itemsize < 4 else None
    return np.dtype(np.int64)


def _back_to_half(result, input, dtype):
    return _cast(result, input.dtype) if dtype is None and input._data.dtype.itemsize < 4 and \
        input.is_floating_point() else result


@tensor_method
def sum(input, dim=None, keepdim=False, *, dtype=None):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(sum, (input, dim, keepdim), {"dtype": dtype})
    return _back_to_half(P.Sum.apply(input, _reduce_dims(input, dim), keepdim, _accumulator(input, dtype)),
                         input, dtype)


@tensor_method
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    if not input.is_floating_point():
        return sum(input, dim, keepdim, dtype=dtype)
    return sum(where(isnan(input), 0.0, input), dim, keepdim, dtype=dtype)


@tensor_method
def mean(input, dim=None, keepdim=False, *, dtype=None):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(mean, (input, dim, keepdim), {"dtype": dtype})
    if dtype is None and not input.is_floating_point():
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point "
                           f"or complex dtype. Got: {input.dtype.name.capitalize()}")
    if dtype is not None:
        input = _cast(input, _dtypes.as_dtype(dtype))
    return P.Mean.apply(input, _reduce_dims(input, dim), keepdim, None)


@tensor_method
def prod(input, dim=None, keepdim=False, *, dtype=None):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(prod, (input, dim, keepdim), {"dtype": dtype})
    if dim is not None:
        dim = input._dim(dim)  # checked even for 0-d tensors, which have nothing to reduce
        if not input.ndim:
            dim = None
    return P.Prod.apply(input, dim, keepdim, _accumulator(input, dtype))


class _ValuesIndices(collections.namedtuple("_ValuesIndices", ["values", "indices"])):
    """What max(dim)/min(dim) return: a (values, indices) tuple printed as torch prints it."""
    __slots__ = ()

    def __repr__(self):
        return (f"{_dtypes.shown_module()}.return_types.{type(self).__name__}(\nvalues={self.values!r},"
                f"\nindices={self.indices!r})")


max_return = type("max", (_ValuesIndices,), {"__slots__": ()})
min_return = type("min", (_ValuesIndices,), {"__slots__": ()})


def _extreme(input, dim, keepdim, other, largest):
    if isinstance(dim, Tensor):  # max(a, b) is maximum(a, b)
        other, dim = dim, None
    if other is not None:
        return maximum(input, other) if largest else minimum(input, other)
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError(f"{'max' if largest else 'min'}(): Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
        return (P.Amax if largest else P.Amin).apply(input, None, False)
    d = input._dim(dim)
    if input.ndim == 0:
        return (max_return if largest else min_return)(input.clone(), zeros_like_int(input))
    values, indices = P.ExtremeAlongDim.apply(input, d, keepdim, largest)
    return (max_return if largest else min_return)(values, indices)


def zeros_like_int(t):
    return wrap(t._device._backend.xp.zeros(t._data.shape, dtype=np.int64), t._device)


@tensor_method
def max(input, dim=None, keepdim=False, *, other=None):
    """max(x): the largest value; max(x, dim): (values, indices); max(x, y): maximum(x, y)."""
    return _extreme(input, dim, keepdim, other, True)


@tensor_method
def min(input, dim=None, keepdim=False, *, other=None):
    return _extreme(input, dim, keepdim, other, False)


@tensor_method
def amax(input, dim=(), keepdim=False):
    return _extreme_values(P.Amax, input, dim, keepdim, "amax")


@tensor_method
def amin(input, dim=(), keepdim=False):
    return _extreme_values(P.Amin, input, dim, keepdim, "amin")


def _extreme_values(function, input, dim, keepdim, name):
    dims = _reduce_dims(input, dim)
    if dims is None and input.numel() == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    return function.apply(input, dims, keepdim)


def _arg_extreme(input, dim, keepdim, name):
    data = input._data
    if data.dtype == np.bool_:
        raise RuntimeError(f"{name}(): does not support bool input")
    if dim is None:
        out = getattr(data.reshape(-1), name)()
        if keepdim:
            out = out.reshape((1,) * data.ndim)
    else:
        ndim = data.ndim
        axis = dim if type(dim) is builtins.int and -ndim <= dim < ndim else input._dim(dim) if ndim else None
        out = getattr(data, name)(axis=axis, keepdims=keepdim)
    backend = input._device._backend
    if type(out) is not backend.ndarray:  # a 0-d result comes back as a NumPy scalar
        out = backend.xp.asarray(out)
    if out.dtype != _INT64:  # (intp is int32 on some platforms)
        out = out.astype(np.int64)
    return wrap(out, input._device)


@tensor_method
def argmax(input, dim=None, keepdim=False):
    return _arg_extreme(input, dim, keepdim, "argmax")


@tensor_method
def argmin(input, dim=None, keepdim=False):
    return _arg_extreme(input, dim, keepdim, "argmin")


@tensor_method
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(var, (input, dim, unbiased, keepdim), {"correction": correction})
    return _spread(P.Var, input, dim, unbiased, keepdim, correction)


def _spread(function, input, dim, unbiased, keepdim, correction):
    if unbiased is not None and correction is not None:
        raise RuntimeError("var(): cannot give both 'unbiased' and 'correction'")
    if isinstance(dim, builtins.bool):  # var(x, False): the legacy 'unbiased' positional
        unbiased, dim = dim, None
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if not input.is_floating_point():
        raise RuntimeError(f"std and var only support floating point and complex dtypes, got {input.dtype}")
    return function.apply(input, _reduce_dims(input, dim), correction, keepdim)


@tensor_method
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(std, (input, dim, unbiased, keepdim), {"correction": correction})
    return _spread(P.Std, input, dim, unbiased, keepdim, correction)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


@tensor_method
def logsumexp(input, dim, keepdim=False):
    dims = _reduce_dims(input, dim)
    return P.LogSumExp.apply(_float_input(input), tuple(range(input.ndim)) if dims is None else dims, keepdim)


@tensor_method
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """The vector p-norm over ``dim`` (all elements by default); 'fro' is the 2-norm."""
    if not input.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_LEGACY_TYPE_NAMES[input.dtype.name]}")
    x = input if dtype is None else _cast(input, _dtypes.as_dtype(dtype))
    dims = _reduce_dims(x, dim)
    if p == "fro":
        p = 2
    if p in (float("inf"), "inf"):
        return amax(abs(x), dims or (), keepdim)
    if p in (float("-inf"), "-inf"):
        return amin(abs(x), dims or (), keepdim)
    if isinstance(p, str):
        raise RuntimeError(f"norm(): unsupported p={p!r}; expected a number, 'fro', inf or -inf")
    return P.Norm.apply(x, builtins.float(p), dims, keepdim)


@tensor_method
def all(input, dim=None, keepdim=False):
    return _logical_reduce(input, dim, keepdim, "all")


@tensor_method
def any(input, dim=None, keepdim=False):
    return _logical_reduce(input, dim, keepdim, "any")


def _logical_reduce(input, dim, keepdim, name):
    xp = input._device._backend.xp
    out = xp.asarray(getattr(xp, name)(input._data, axis=_reduce_dims(input, dim), keepdims=keepdim))
    return wrap(out.astype(np.uint8) if input._data.dtype == np.uint8 else out, input._device)


@tensor_method
def count_nonzero(input, dim=None):
    return sum(ne(input, 0), dim)


@tensor_method
def cumsum(input, dim, *, dtype=None):
    return _cumulative(P.CumSum, input, dim, dtype)


@tensor_method
def cumprod(input, dim, *, dtype=None):
    return _cumulative(P.CumProd, input, dim, dtype)


def _cumulative(function, input, dim, dtype):
    d = input._dim(dim)
    if not input.ndim:
        input = reshape(input, 1)
        return reshape(_back_to_half(function.apply(input, 0, _accumulator(input, dtype)), input, dtype), ())
    return _back_to_half(function.apply(input, d, _accumulator(input, dtype)), input, dtype)


@tensor_method
def softmax(input, dim, dtype=None):
    if dtype is None:
        _require_float(input, "softmax_kernel_impl")
    x = input if dtype is None else _cast(input, _dtypes.as_dtype(dtype))
    return P.Softmax.apply(x, x._dim(dim) if x.ndim else None)


@tensor_method
def log_softmax(input, dim, dtype=None):
    if dtype is None:
        _require_float(input, "log_softmax_kernel_impl")
    x = input if dtype is None else _cast(input, _dtypes.as_dtype(dtype))
    return P.LogSoftmax.apply(x, x._dim(dim) if x.ndim else None)


def one_hot(tensor, num_classes=-1):
    """Class indices (int64) to one-hot rows of length ``num_classes`` (int64 output)."""
    if tensor.dtype is not _dtypes.int64:
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor, got {tensor.dtype}")
    xp = tensor._device._backend.xp
    values = tensor._data
    if num_classes == -1:
        if values.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = builtins.int(values.max()) + 1
    if _outside(values, num_classes, xp):
        raise RuntimeError("Class values must be non-negative." if builtins.int(values.min()) < 0
                           else "Class values must be smaller than num_classes.")
    if num_classes <= _SMALL_CLASSES:  # rows of a cached identity: one indexing (it copies)
        return wrap(_identity(num_classes, tensor._device)[values], tensor._device)
    return wrap((values[..., None] == xp.arange(num_classes)).astype(np.int64), tensor._device)


_SMALL_CLASSES = 64


def _outside(values, n, xp):
    """Whether an index lies outside [0, n). A few indices are checked as a Python list, whose
    min and max cost less than NumPy's calls."""
    if values.size <= 64:
        flat = values.reshape(-1).tolist()
        return builtins.bool(flat) and (builtins.min(flat) < 0 or builtins.max(flat) >= n)
    # as unsigned, negative values are huge: one comparison checks both bounds
    return builtins.bool(xp.count_nonzero(values.astype(np.uint64) >= n))


@functools.lru_cache(maxsize=128)
def _identity(n, device):
    """The n x n int64 identity matrix on ``device`` (n <= _SMALL_CLASSES)."""
    return device._backend.asarray(np.eye(n, dtype=np.int64), index=device.index)


# ---- shapes and views ---------------------------------------------------------------------

def _mark_view(out, base, view_fn, may_copy=False):
    """Records that ``out`` views ``base``'s memory: it shares the version counter, and an
    in-place op on it updates base's graph (see ``_inplace``). ``may_copy``: check first.

    ``_view_of`` is (root base, function from the root's array to this view, version at which
    this view's grad_fn was last valid)."""
    if may_copy and not base._device._backend.may_share_memory(out._data, base._data):
        return out
    if base._view_of is not None:
        root, parent_fn, _ = base._view_of
        out._view_of = (root, lambda a: view_fn(parent_fn(a)), base._vc[0])
    else:
        out._view_of = (base, view_fn, base._vc[0])
    out._vc = base._vc
    return out


def _new_view(base, data, view_fn):
    """``_mark_view(wrap(data, base.device), base, view_fn)`` in one step, for the fast paths that
    build a view without a graph: a new leaf over ``data`` sharing base's version counter."""
    t = _new_tensor(Tensor)
    t._data = data  # one store each: a quarter faster than one tuple assignment of the seven
    t._device = base._device
    t._requires_grad = False
    t._grad = None
    t.grad_fn = None
    t._output_nr = 0
    t._hooks = None
    t._vc = counter = base._vc
    parent = base._view_of
    if parent is None:
        t._view_of = (base, view_fn, counter[0])
    else:
        parent_fn = parent[1]
        t._view_of = (parent[0], lambda a: view_fn(parent_fn(a)), counter[0])
    return t


_new_tensor = Tensor.__new__


def _view_index(index):
    """``index`` (a tuple of basic index parts) such that NumPy returns a view even where every
    dimension is taken by an integer (``a[0]`` of a 1-d array is a scalar copy, ``a[0, ...]`` a
    0-d view), so an in-place op on that element can write through it."""
    return index if builtins.any(p is Ellipsis for p in index) else (*index, Ellipsis)


@tensor_method
def _refresh_view(view):
    """After an in-place change to its base, a view's grad_fn becomes 'take this view of the
    updated base' (PyTorch does the same when the version counter shows a change)."""
    root, view_fn, _ = view._view_of
    if root._requires_grad:
        _adopt(view, P.AsView.apply(root, view_fn))
    view._view_of = (root, view_fn, view._vc[0])


def _shape_arg(args):
    """The sizes given as ints or as one tuple, list or Size: each must be an integer (a Python or
    NumPy int, or an integer 0-d tensor), as torch asks: TypeError for a float or None."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    sizes = []
    for pos, a in enumerate(args):
        try:
            sizes.append(operator.index(a))
        except TypeError:
            raise TypeError(f"argument 'size' must be tuple of ints, but found element of type "
                            f"{type(a).__name__} at pos {pos}") from None
    return tuple(sizes)


def _infer_shape(shape, numel):
    if list(shape).count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _numpy_shape(shape):
    """view/reshape's shape arguments as NumPy takes them: the ints, or the one tuple, list or Size
    they came in. NumPy refuses what is not an int (TypeError) or not a valid shape (ValueError)
    but reads any negative size as -1: the fast paths check that the result is what was asked
    or that the one negative size was -1; else the slow paths convert the arguments and raise
    torch's errors."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0]) if type(shape[0]) is list else shape[0]  # a Size is a tuple
    return shape


def _same_array(a):
    """The view function of a reshape to the same shape."""
    return a


@tensor_method
def reshape(input, *shape):
    if not (input._requires_grad and _grad_state[0]):  # no graph: NumPy reshapes
        given = _numpy_shape(shape)
        try:
            out = input._data.reshape(given)
        except (ValueError, TypeError):
            pass
        else:
            new = out.shape
            if new == given or -1 in given:  # NumPy reads any negative size as -1, torch only -1
                if new == input._data.shape:
                    return _new_view(input, out, _same_array)
                return _mark_view(wrap(out, input._device), input, lambda a: a.reshape(new), may_copy=True)
    shape = _infer_shape(_shape_arg(shape), input.numel())
    if shape == input._data.shape:
        return _mark_view(P.Reshape.apply(input, shape), input, _same_array)
    return _mark_view(P.Reshape.apply(input, shape), input, lambda a: a.reshape(shape), may_copy=True)


@tensor_method
def view(input, *shape):
    """reshape that never copies: a RuntimeError where the layout would need a copy.
    ``view(dtype)`` reinterprets the bytes, as in torch."""
    if not (input._requires_grad and _grad_state[0]):  # no graph: a NumPy view
        out, given = input._data.view(), _numpy_shape(shape)
        try:
            out.shape = given  # raises instead of copying
        except (AttributeError, ValueError, TypeError):
            pass
        else:
            new = out.shape
            if new == given or -1 in given:  # as in reshape
                return _new_view(input, out, _same_array if new == input._data.shape else lambda a: a.reshape(new))
    if len(shape) == 1 and isinstance(shape[0], _dtypes.dtype):
        return _view_dtype(input, shape[0])
    shape = _infer_shape(_shape_arg(shape), input.numel())
    probe = input._data.view()
    try:
        probe.shape = shape
    except AttributeError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    return reshape(input, shape)


def _view_dtype(input, dtype):
    """``input.view(dtype)``: the same bytes read as ``dtype``."""
    return _mark_view(wrap(input._data.view(dtype.np), input._device), input, lambda a: a.view(dtype.np))


@tensor_method
def view_as(input, other):
    return view(input, other.shape)


@tensor_method
def reshape_as(input, other):
    return reshape(input, other.shape)


@tensor_method
def flatten(input, start_dim=0, end_dim=-1):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(flatten, (input, start_dim, end_dim), {})
    if input.ndim == 0:
        return reshape(input, 1)
    s, e = input._dim(start_dim), input._dim(end_dim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input.shape
    n = 1
    for d in range(s, e + 1):
        n *= shape[d]
    return reshape(input, shape[:s] + (n,) + shape[e + 1:])


@tensor_method
def unflatten(input, dim, sizes):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(unflatten, (input, dim, sizes), {})
    d = input._dim(dim)
    sizes = tuple(sizes)
    inner = _infer_shape(sizes, input.shape[d])
    return reshape(input, input.shape[:d] + inner + input.shape[d + 1:])


@tensor_method
def squeeze(input, dim=None):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(squeeze, (input, dim), {})
    shape = input.shape
    if dim is None:
        dims = [d for d, s in enumerate(shape) if s == 1]
    else:
        dims = [input._dim(d) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
    return reshape(input, tuple(s for d, s in enumerate(shape) if not (d in dims and s == 1)))


@tensor_method
def unsqueeze(input, dim):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(unsqueeze, (input, dim), {})
    n = input.ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    d = dim % n
    shape = input._data.shape
    shape = shape[:d] + (1,) + shape[d:]
    if not (input._requires_grad and _grad_state[0]):  # a new unit dim is always a view
        return _new_view(input, input._data.reshape(shape), lambda a: a.reshape(shape))
    return reshape(input, shape)


@tensor_method
def permute(input, *dims, **kwargs):
    if kwargs:  # torch.permute(input, dims=...)
        if dims or set(kwargs) != {"dims"}:
            raise TypeError(f"permute() takes the dims positionally or as dims=, got {dims} and {sorted(kwargs)}")
        dims = (kwargs["dims"],)
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(permute, (input, *dims), {})
    dims = _shape_arg(dims)
    if len(dims) != input.ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {input.ndim} "
                           f"is not equal to len(dims) = {len(dims)}")
    dims = tuple(input._dim(d) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"permute(): duplicate dims are not allowed (got {dims})")
    return _mark_view(P.Permute.apply(input, dims), input, lambda a: a.transpose(dims))


@tensor_method("transpose", "swapaxes", "swapdims")
def transpose(input, dim0, dim1):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(transpose, (input, dim0, dim1), {})
    if input.ndim == 0:
        input._dim(dim0), input._dim(dim1)
        return _mark_view(P.Reshape.apply(input, ()), input, lambda a: a)
    order = list(range(input.ndim))
    a, b = input._dim(dim0), input._dim(dim1)
    order[a], order[b] = order[b], order[a]
    return permute(input, order)


swapaxes = swapdims = transpose


@tensor_method
def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else reshape(input, input.shape)


@tensor_method("movedim", "moveaxis")
def movedim(input, source, destination):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(movedim, (input, source, destination), {})
    src = [input._dim(d) for d in (source if isinstance(source, (tuple, list)) else (source,))]
    dst = [input._dim(d) for d in (destination if isinstance(destination, (tuple, list)) else (destination,))]
    order = [d for d in range(input.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, order)


moveaxis = movedim


@tensor_method("expand", "broadcast_to")
def expand(input, *sizes):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(expand, (input, *sizes), {})
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError(f"expand({input.dtype!r}{{{list(input.shape)}}}, size={list(sizes)}): the number "
                           f"of sizes provided ({len(sizes)}) must be greater or equal to the number of dimensions "
                           f"in the tensor ({input.ndim})")
    own = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    shape = []
    for i, (want, have) in enumerate(zip(sizes, own)):
        if want == -1:
            if i < len(sizes) - input.ndim:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            want = have
        elif have != 1 and want != have:
            raise RuntimeError(f"The expanded size of the tensor ({want}) must match the existing size ({have}) "
                               f"at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                               f"Tensor sizes: {list(input.shape)}")
        shape.append(want)
    shape = tuple(shape)
    return _mark_view(P.Expand.apply(input, shape), input, lambda a: input._device._backend.xp.broadcast_to(a, shape))


@tensor_method
def expand_as(input, other):
    return expand(input, other.shape)


broadcast_to = expand


def broadcast_tensors(*tensors):
    try:
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    except ValueError:
        raise RuntimeError(f"shape mismatch: objects cannot be broadcast to a single shape: "
                           f"{[list(t.shape) for t in tensors]}") from None
    return tuple(expand(t, shape) for t in tensors)


@tensor_method
def repeat(input, *sizes):
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    return P.Repeat.apply(input, sizes)


@tensor_method
def flip(input, dims):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(flip, (input, dims), {})
    dims = tuple(input._dim(d) for d in (dims if isinstance(dims, (tuple, list)) else (dims,)))
    return P.Flip.apply(input, dims)


@tensor_method
def roll(input, shifts, dims=None):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(roll, (input, shifts, dims), {})
    if dims is None:
        return reshape(P.Roll.apply(flatten(input), shifts, 0), input.shape)
    if isinstance(dims, (tuple, list)):
        return P.Roll.apply(input, tuple(shifts), tuple(input._dim(d) for d in dims))
    return P.Roll.apply(input, shifts, input._dim(dims))


@tensor_method
def fliplr(input):
    """Reverses dim 1 (the columns); input must have at least 2 dims."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(fliplr, (input,), {})
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


@tensor_method
def flipud(input):
    """Reverses dim 0 (the rows); input must have at least 1 dim."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(flipud, (input,), {})
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


@tensor_method
def rot90(input, k=1, dims=(0, 1)):
    """Rotates by ``k`` quarter turns in the plane of ``dims``, from the first dim towards the second."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(rot90, (input, k, dims), {})
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = input._dim(dims[0]), input._dim(dims[1])
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, (d0,)), d0, d1)
    return clone(input)


@tensor_method
def tile(input, *dims):
    """``repeat`` with ``dims`` padded with leading 1s up to input's number of dims."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(tile, (input, *dims), {})
    dims = tuple(_shape_arg(dims))
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def _atleast(name, ndim, grow):
    """torch.atleast_Nd: each tensor viewed with at least ``ndim`` dims (``grow(shape)`` when it has
    fewer); one tensor in, one out; several (or a list) in, a tuple out."""
    def op(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            return tuple(op(t) for t in tensors[0])
        if len(tensors) != 1:
            return tuple(op(t) for t in tensors)
        (input,) = tensors
        if type(input) is not Tensor and has_torch_function(input):
            return handle_torch_function(op, (input,), {})
        return input if input.ndim >= ndim else reshape(input, grow(tuple(input.shape)))
    op.__name__ = op.__qualname__ = name
    return op


atleast_1d = _atleast("atleast_1d", 1, lambda shape: (1,))
atleast_2d = _atleast("atleast_2d", 2, lambda shape: (1,) * (2 - len(shape)) + shape)
atleast_3d = _atleast("atleast_3d", 3,
                      lambda shape: {0: (1, 1, 1), 1: (1,) + shape + (1,)}.get(len(shape), shape + (1,)))


@tensor_method
def narrow(input, dim, start, length):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(narrow, (input, dim, start, length), {})
    d = input._dim(dim)
    start = start + input.shape[d] if start < 0 else start
    if start < 0 or start + length > input.shape[d]:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({input.shape[d]}).")
    return input[(slice(None),) * d + (slice(start, start + length),)]


@tensor_method
def select(input, dim, index):
    d = input._dim(dim)
    return input[(slice(None),) * d + (index,)]


@tensor_method
def contiguous(input, memory_format=None):
    return input if input.is_contiguous() else P.Clone.apply(input)


@tensor_method
def clone(input, *, memory_format=None):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(clone, (input,), {"memory_format": memory_format})
    return P.Clone.apply(input)


# ---- joining and splitting ----------------------------------------------------------------

def _join_inputs(tensors, name):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{name}(): expected a non-empty list of Tensors")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): expected a sequence of Tensors, got an element of type {type(t).__name__}")
    target = _dtypes.result_type([t.dtype for t in tensors])
    return [t if t.dtype is target else _cast(t, target) for t in tensors]


def cat(tensors, dim=0, *, out=None):
    if type(tensors) is not Tensor and has_torch_function(tensors):
        return handle_torch_function(cat, (tensors, dim), {"out": out})
    if out is not None:
        return _into(out, cat(tensors, dim))
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"cat(): argument 'tensors' must be a tuple or list of Tensors, got {type(tensors).__name__}")
    tensors = _join_inputs(tensors, "cat")
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]  # torch skips legacy empty 1-D inputs
    if not kept:
        return tensors[0].clone()
    d = kept[0]._dim(dim)
    first = kept[0].shape
    for i, t in enumerate(kept):
        if t.ndim != len(first) or builtins.any(a != b for k, (a, b) in enumerate(zip(t.shape, first)) if k != d):
            raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                               f"{list(first)} but got size {list(t.shape)} for tensor number {i} in the list.")
    return P.Cat.apply(*kept, dim=d)


concat = concatenate = cat


def stack(tensors, dim=0, *, out=None):
    if type(tensors) is not Tensor and has_torch_function(tensors):
        return handle_torch_function(stack, (tensors, dim), {"out": out})
    if out is not None:
        return _into(out, stack(tensors, dim))
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"stack(): argument 'tensors' must be a tuple or list of Tensors, got "
                        f"{type(tensors).__name__}")
    tensors = _join_inputs(tensors, "stack")
    first = tensors[0].shape
    for i, t in enumerate(tensors):
        if t.shape != first:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 "
                               f"and {list(t.shape)} at entry {i}")
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return P.Stack.apply(*tensors, dim=dim % n)


def hstack(tensors):
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([t.reshape(1, -1) if t.ndim == 1 else t for t in tensors], 0)


def _split_views(input, sizes, dim, squeeze):
    pieces = P.Split.apply(input, sizes, dim, squeeze)
    at = 0
    for piece, n in zip(pieces, sizes):
        index = (slice(None),) * dim + ((at, Ellipsis) if squeeze else (slice(at, at + n),))
        _mark_view(piece, input, lambda a, index=index: a[index])
        at += n
    return pieces


@tensor_method
def split(tensor, split_size_or_sections, dim=0):
    if type(tensor) is not Tensor and has_torch_function(tensor):
        return handle_torch_function(split, (tensor, split_size_or_sections, dim), {})
    d = tensor._dim(dim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [builtins.int(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size "
                               f"at dimension {d}), but got split_sizes={sizes}")
    else:
        size = builtins.int(split_size_or_sections)
        if size <= 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
    return _split_views(tensor, sizes or [0], d, False)


@tensor_method
def chunk(input, chunks, dim=0):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(chunk, (input, chunks, dim), {})
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input.shape[input._dim(dim)]
    return split(input, builtins.max(-(-n // chunks), 1), dim)


@tensor_method
def tensor_split(input, indices_or_sections, dim=0):
    """``k`` near-equal pieces along ``dim`` (an int or a 0-d int64 tensor), or the pieces between
    split indices (a sequence or a 1-d int64 tensor; negative ones count from the end, as in Python
    slicing, and a descending pair gives an empty piece)."""
    d = input._dim(dim)
    n = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = _split_points(indices_or_sections)
    if isinstance(indices_or_sections, builtins.int):
        k = indices_or_sections
        if k <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {k}")
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    else:
        bounds = [0] + [builtins.min(builtins.max(i + n if i < 0 else i, 0), n) for i in indices_or_sections] + [n]
        return tuple(input[(slice(None),) * d + (slice(a, builtins.max(a, b)),)] for a, b in zip(bounds, bounds[1:]))
    return _split_views(input, sizes, d, False)


def _split_points(t):
    """tensor_split's tensor argument as an int (0-d) or a list of ints (1-d); int64 only, as in torch."""
    if t.dim() > 1:
        raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                           f"one-dimensional tensor, but got a tensor with {t.dim()} dims")
    if t.dtype is not _dtypes.int64:
        raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                           f"{_LEGACY_TYPE_NAMES.get(t.dtype.name, t.dtype.name)}")
    return t.tolist()


@tensor_method
def unbind(input, dim=0):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(unbind, (input, dim), {})
    d = input._dim(dim)
    return _split_views(input, [1] * input.shape[d], d, True)


# ---- indexing -------------------------------------------------------------------------------

def _index_part(t, item, xp):
    """One component of an index, converted for the backend; also says whether it is advanced."""
    if isinstance(item, Tensor):
        a = item._data if item._device is t._device else t._device._backend.asarray(item._host())
        if a.dtype == np.uint8:  # a byte tensor indexes as a mask, as in torch
            a = a.astype(bool)
        if a.ndim == 0 and a.dtype.kind in "iu":
            return builtins.int(a), False
        return a, True
    if isinstance(item, (builtins.int, np.integer)) and not isinstance(item, (builtins.bool, np.bool_)):
        return builtins.int(item), False
    if item is None or item is Ellipsis:
        return item, False
    if isinstance(item, slice):
        fix = lambda v: builtins.int(v) if isinstance(v, (Tensor, np.integer)) else v
        if item.step is not None and fix(item.step) <= 0:
            raise ValueError("step must be greater than zero")
        return slice(fix(item.start), fix(item.stop), fix(item.step)), False
    if isinstance(item, (list, np.ndarray, builtins.bool, np.bool_)) or hasattr(item, "__cuda_array_interface__"):
        return t._device._backend.asarray(item if not isinstance(item, list) or item else np.zeros(0, np.int64)), True
    error = TypeError if isinstance(item, str) else IndexError
    raise error(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                f"valid indices (got {type(item).__name__})")


def _convert_index(t, index):
    items = index if isinstance(index, tuple) else (index,)
    xp = t._device._backend.xp
    parts = [_index_part(t, item, xp) for item in items]
    return tuple(p for p, _ in parts), builtins.any(adv for _, adv in parts)


@tensor_method("__getitem__")
def getitem(input, index):
    if not (input._requires_grad and _grad_state[0]) and input._data.ndim \
            and (type(index) is builtins.int or _is_plain_basic(index)):  # x[i] (c51.py's rows) without a call
        # the common case without a graph: ints and slices give a view, straight from the backend
        view_index = index + (Ellipsis,) if type(index) is tuple else (index, Ellipsis)
        try:
            data = input._data[view_index]
        except IndexError as e:
            raise _index_error(e) from None
        return _new_view(input, data, lambda a: a[view_index])
    index, advanced = _convert_index(input, index)
    try:
        if advanced and builtins.any(type(p) is builtins.int for p in index):
            # torch selects with integers first; NumPy would treat them as advanced indices
            ints, rest = _split_integer_index(index)
            selected = _mark_view(P.Index.apply(input, ints, False), input, lambda a: a[_view_index(ints)])
            return P.Index.apply(selected, rest, True)
        if advanced:
            return P.Index.apply(input, index, True)
        view_index = _view_index(index)  # a view even where integers take every dimension
        return _mark_view(P.Index.apply(input, view_index, False), input, lambda a: a[view_index])
    except IndexError as e:
        raise _index_error(e) from None


def _index_error(error):
    """NumPy's IndexError in torch's words (torch counts dimensions, NumPy axes)."""
    return IndexError(str(error).replace(" for axis ", " for dimension "))


_SLICE_BOUND = (builtins.int, type(None))


def _is_plain_basic(index):
    """Whether ``index`` is an int, a slice of ints with a positive step, or a tuple of those, None
    and no Ellipsis: what NumPy indexes exactly as torch does (a view), so no conversion is needed."""
    for part in index if type(index) is tuple else (index,):
        kind = type(part)
        if kind is builtins.int or part is None:
            continue
        if kind is not slice or type(part.start) not in _SLICE_BOUND or type(part.stop) not in _SLICE_BOUND:
            return False
        step = part.step
        if step is not None and (type(step) is not builtins.int or step <= 0):
            return False
    return True


def _split_integer_index(index):
    """(a basic index applying the integers, the rest of the index for the result)."""
    ints, rest = [], []
    for p in index:
        if type(p) is builtins.int:
            ints.append(p)
        elif p is None or p is Ellipsis or isinstance(p, slice):
            ints.append(p)
            rest.append(slice(None) if p is not Ellipsis else p)
        else:  # an index array: a boolean one spans as many dims as it has
            span = p.ndim if p.dtype == bool else 1
            ints.extend([slice(None)] * span)
            rest.append(p)
    return tuple(ints), tuple(rest)


@tensor_method("__setitem__")
def setitem(input, index, value):
    index, _ = _convert_index(input, index)
    if isinstance(value, Tensor):
        if value._device is not input._device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{input._device} and {value._device}!")
        if value.dtype is not input.dtype:
            value = _cast(value, input.dtype)
    elif not isinstance(value, _NUMBER):
        from rlpipe._creation import as_tensor
        value = as_tensor(value, dtype=input.dtype, device=input._device)
    else:
        value = _scalar(value)
    tracking = _grad_state[0] and (input._requires_grad or isinstance(value, Tensor) and value._requires_grad)
    if not tracking:
        _check_writable(input)
        input._data[index] = value._data if isinstance(value, Tensor) else value
        input._vc[0] += 1
        return
    _inplace(input, lambda src, v: P.IndexPut.apply(src, v, index), value)


def _along_dim_index(input, dim, index, name):
    if isinstance(index, Tensor) and index.dtype is _dtypes.int32:
        index = _cast(index, _dtypes.int64)
    if not isinstance(index, Tensor) or index.dtype is not _dtypes.int64:
        raise RuntimeError(f"{name}(): Expected dtype int64 for index, got "
                           f"{index.dtype if isinstance(index, Tensor) else type(index).__name__}")
    d = input._dim(dim)
    if index.ndim != input.ndim and input.ndim:
        raise RuntimeError(f"Index tensor must have the same number of dimensions as input tensor "
                           f"({index.ndim} vs {input.ndim}) in {name}")
    values = index._data
    if values.size:
        n = input.shape[d]
        lo, hi = builtins.int(values.min()), builtins.int(values.max())
        if lo < 0 or hi >= n:
            raise RuntimeError(f"index {hi if hi >= n else lo} is out of bounds for dimension {d} with size {n}")
    for k in range(index.ndim):
        if k != d and index.shape[k] > input.shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(index.shape)} to be "
                               f"no larger than self {list(input.shape)} apart from dimension {d}")
    return d, values


@tensor_method
def gather(input, dim, index, *, sparse_grad=False, out=None):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(gather, (input, dim, index), {"sparse_grad": sparse_grad, "out": out})
    if out is not None:
        return _into(out, gather(input, dim, index))
    d, idx = _along_dim_index(input, dim, index, "gather")
    return P.Gather.apply(input, d, idx)


@tensor_method
def take_along_dim(input, indices, dim=None):
    if dim is None:
        return gather(flatten(input), 0, flatten(indices))
    d = input._dim(dim)
    shape = list(np.broadcast_shapes(tuple(s for k, s in enumerate(input.shape) if k != d),
                                     tuple(s for k, s in enumerate(indices.shape) if k != d)))
    in_shape = shape[:d] + [input.shape[d]] + shape[d:]
    idx_shape = shape[:d] + [indices.shape[d]] + shape[d:]
    return gather(expand(input, in_shape), d, expand(indices, idx_shape).contiguous())


def _scatter(input, dim, index, src, add, name):
    d, idx = _along_dim_index(input, dim, index, name)
    if isinstance(src, Tensor):
        if src.dtype is not input.dtype:
            raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
        for k in range(index.ndim):
            if index.shape[k] > src.shape[k]:
                raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than src "
                                   f"{list(src.shape)} in {name}")
    else:
        src = _scalar(src)
    return P.Scatter.apply(input, d, idx, src, add)


@inplace_variant
@tensor_method
def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    if reduce is not None:
        if reduce != "add":
            raise RuntimeError(f"scatter(): reduce={reduce!r} is not supported by rlpipe; only 'add'")
        return scatter_add(input, dim, index, src if src is not None else value)
    return _scatter(input, dim, index, src if src is not None else value, False, "scatter")


@inplace_variant
@tensor_method
def scatter_add(input, dim, index, src):
    return _scatter(input, dim, index, src, True, "scatter_add")


@tensor_method
def index_select(input, dim, index):
    if not isinstance(index, Tensor) or index.dtype not in (_dtypes.int64, _dtypes.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = input._dim(dim) if input.ndim else 0
    values = index._data.reshape(-1)
    n = input.shape[d] if input.ndim else 1
    if values.size and (builtins.int(values.min()) < 0 or builtins.int(values.max()) >= n):
        raise RuntimeError(f"index out of range in self: index_select on dimension {d} with size {n}")
    return P.IndexSelect.apply(input, d, values)


@inplace_variant
@tensor_method
def masked_fill(input, mask, value):
    if not isinstance(mask, Tensor) or mask.dtype is not _dtypes.bool:
        raise RuntimeError(f"masked_fill only supports boolean masks, but got mask with dtype "
                           f"{mask.dtype if isinstance(mask, Tensor) else type(mask).__name__}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        value = _cast(value, input.dtype)
    else:  # the fill value takes the tensor's dtype, as in torch
        value = input._data.dtype.type(_scalar(value))
    return P.Where.apply(mask, value, input)


@tensor_method
def masked_select(input, mask):
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(masked_select, (input, mask), {})
    shape = np.broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    return getitem(expand(input, shape), expand(mask, shape))


@tensor_method
def nonzero(input, *, as_tuple=False):
    xp = input._device._backend.xp
    idx = xp.nonzero(input._data)
    if as_tuple:
        return tuple(wrap(i.astype(np.int64), input._device) for i in idx)
    return wrap(xp.stack(idx, axis=1).astype(np.int64), input._device)


@tensor_method
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """torch.unique: the distinct values (of the flattened input, or the distinct slices along
    ``dim``), sorted whatever ``sorted`` says (as torch's CPU and CUDA kernels); with
    ``return_inverse`` the index of each input element (slice) among them, with ``return_counts``
    how often each occurs. Not differentiable, as in torch."""
    xp = input._device._backend.xp
    if dim is not None:
        dim = input._dim(dim)
    values, inverse, counts = xp.unique(input._data.reshape(-1) if dim is None else input._data,
                                        return_inverse=True, return_counts=True, axis=dim)
    out = [wrap(values, input._device)]
    if return_inverse:
        shape = tuple(input.shape) if dim is None else (input.shape[dim],)
        out.append(wrap(inverse.reshape(shape).astype(np.int64), input._device))
    if return_counts:
        out.append(wrap(counts.astype(np.int64), input._device))
    return out[0] if len(out) == 1 else tuple(out)


# ---- products ----------------------------------------------------------------------------------

@tensor_operator("matmul", inplace=False)
@tensor_method
def matmul(input, other):
    if not isinstance(input, Tensor):
        input = _tensor_like(input, other)
    if not isinstance(other, Tensor):
        other = _tensor_like(other, input)
    if input._data.dtype != other._data.dtype:  # equal, not identical: unpickled arrays have their own dtype objects
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_C_TYPE_NAMES.get(input.dtype.name)}"
                           f" != {_C_TYPE_NAMES.get(other.dtype.name)}")
    try:
        return P.MatMul.apply(input, other)
    except RuntimeError:
        raise RuntimeError(_matmul_error(input, other)) from None


def _matmul_error(a, b):
    if a.ndim == 0 or b.ndim == 0:
        return f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and {b.ndim}D"
    k_a, k_b = a.shape[-1], (b.shape[-2] if b.ndim > 1 else b.shape[0])
    rows = builtins.int(np.prod(a.shape[:-1])) if a.ndim > 1 else 1
    if k_a != k_b:
        return f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k_a} and {k_b}x{b.shape[-1] if b.ndim > 1 else 1})"
    return f"matmul: batch dimensions {list(a.shape[:-2])} and {list(b.shape[:-2])} cannot be broadcast"


def linear(input, weight, bias=None):
    """input @ weight.T + bias, as one fused op (what nn.Linear runs)."""
    dt = input._data.dtype
    if weight._data.dtype != dt or bias is not None and bias._data.dtype != dt:
        raise RuntimeError(f"linear: expected input, weight and bias of one dtype, got {input.dtype}, "
                           f"{weight.dtype} and {None if bias is None else bias.dtype}")
    try:
        return P.Linear.apply(input, weight, bias)
    except (RuntimeError, AttributeError):  # the shapes are checked only once something failed
        x, w = input._data, weight._data
        if w.ndim != 2 or x.ndim == 0 or x.shape[-1] != w.shape[1]:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({builtins.int(np.prod(x.shape[:-1]))}x"
                               f"{x.shape[-1] if x.ndim else 1} and {w.shape[-1]}x{w.shape[0]})") from None
        if bias is not None and bias._data.shape not in ((w.shape[0],), (1,), ()):
            raise RuntimeError(f"linear: bias of shape {list(bias.shape)} does not match {w.shape[0]} output "
                               "features") from None
        raise


@tensor_method
def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm(): expected 2D tensors, got {input.ndim}D and {mat2.ndim}D")
    return matmul(input, mat2)


@tensor_method
def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm(): expected 3D tensors, got {input.ndim}D and {mat2.ndim}D")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm(): batch sizes differ: {input.shape[0]} and {mat2.shape[0]}")
    return matmul(input, mat2)


@tensor_method
def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return matmul(input, other)


@tensor_method
def outer(input, vec2):
    return mul(unsqueeze(input, 1), unsqueeze(vec2, 0))


def einsum(equation, *operands):
    """Einstein summation, with '...' and the implicit (no '->') form."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise ValueError(f"einsum(): the equation has {len(inputs)} operands but {len(operands)} were given")
    free = [c for c in string.ascii_letters if c not in equation]
    ranks = [op.ndim - (len(sub) - 3) for sub, op in zip(inputs, operands) if "..." in sub]
    ellipsis_letters = "".join(free[:builtins.max(ranks, default=0)])
    expanded = []
    for sub, op in zip(inputs, operands):
        if "..." in sub:  # an operand with fewer '...' dims takes the rightmost letters, as broadcasting does
            n = op.ndim - (len(sub) - 3)
            sub = sub.replace("...", ellipsis_letters[len(ellipsis_letters) - n:] if n > 0 else "")
        if len(sub) != op.ndim:
            raise ValueError(f"einsum(): the subscripts {sub!r} do not match an operand with {op.ndim} dimensions")
        expanded.append(sub)
    if arrow:
        output = rhs.replace("...", ellipsis_letters)
    else:
        counts = collections.Counter("".join(expanded))
        output = ellipsis_letters + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ellipsis_letters))
    if len({o._data.dtype for o in operands}) > 1:
        raise RuntimeError(f"einsum(): operands do not have the same dtype: {[o.dtype.name for o in operands]}")
    return P.Einsum.apply(*operands, inputs=tuple(expanded), output=output)


# ---- dtype and device ----------------------------------------------------------------------------

def _cast(x, dtype):
    if x._data.dtype == dtype.np:
        return x
    if not x._device._backend.supports(dtype.np):
        raise TypeError(f"{dtype} is not supported on {x._device} (the {x._device.type} backend has no such dtype)")
    if not (x._requires_grad and _grad_state[0]):  # what Cast computes, without its node
        quiet = silence_fp_warnings()  # NaN or inf to an integer type: torch gives a value, no warning
        try:
            return wrap(x._data.astype(dtype.np), x._device)
        finally:
            restore_fp_warnings(quiet)
    return P.Cast.apply(x, dtype.np)


def _to_device(x, dev):
    dev = _resolve_device(dev)
    if dev is x._device:
        return x
    if dev.type == "cuda" and not dev._backend.supports(x._data.dtype):
        raise TypeError(f"{x.dtype} is not supported on {dev} (CuPy has no such dtype)")
    out = P.ToDevice.apply(x, x._device, dev)
    out._device = dev
    return out


@tensor_method
def to(input, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other_tensor)``: self when nothing changes.
    Copies between devices are synchronous; ``non_blocking`` is accepted and has no effect."""
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, builtins.bool):  # before int: the positional non_blocking flag
            continue
        elif isinstance(a, (_dtypes.dtype, type, np.dtype)):
            dtype = _dtypes.as_dtype(a)
        elif isinstance(a, (str, builtins.int, _device_cls)):
            device = a
        else:
            raise TypeError(f"to() received an invalid argument: {a!r}")
    out = input
    if device is not None:
        out = _to_device(out, device)
    if dtype is not None:
        out = _cast(out, _dtypes.as_dtype(dtype))
    if copy and out is input:
        out = clone(input)
    return out


def _dtype_method(dtype):
    def method(self, memory_format=None):
        return _cast(self, dtype)
    method.__name__ = dtype.name
    return method


_C_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                  "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                  "uint8": "unsigned char", "bool": "bool"}
_LEGACY_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                       "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                       "bool": "Bool"}


@tensor_method("type")
def type_(input, dtype=None, non_blocking=False):
    """With no dtype: the legacy type name ('torch.FloatTensor' under a torch shim, else 'rlpipe.FloatTensor');
    else a cast."""
    if dtype is None:
        where = "cuda." if input._device.type == "cuda" else ""
        return f"{_dtypes.shown_module()}.{where}{_LEGACY_TYPE_NAMES[input.dtype.name]}Tensor"
    return _cast(input, _dtypes.as_dtype(dtype))


@tensor_method
def type_as(input, other):
    return _cast(input, other.dtype)


@tensor_method
def cpu(input, memory_format=None):
    return _to_device(input, "cpu")


@tensor_method
def cuda(input, device=None, non_blocking=False, memory_format=None):
    if device is None:
        return _to_device(input, "cuda")
    return _to_device(input, device if not isinstance(device, builtins.int) else f"cuda:{device}")


# ---- in-place updates --------------------------------------------------------------------------

def _check_writable(t):
    if not t._device._backend.writable(t._data):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")


def _snapshot(t):
    """A copy of t's values that stands where t stood in the graph (what an in-place op consumes)."""
    s = wrap(t._data.copy(), t._device)
    s._requires_grad, s.grad_fn, s._output_nr = t._requires_grad, t.grad_fn, t._output_nr
    return s


def _adopt(t, result):
    """Makes t take result's place in the graph (its values are already in t)."""
    t._requires_grad, t.grad_fn, t._output_nr = result._requires_grad, result.grad_fn, result._output_nr


def _write(t, values):
    """Writes the new values into t's memory (so views see them) and bumps its version."""
    _check_write(t, values)
    _check_writable(t)
    t._data[...] = values
    t._vc[0] += 1


def _check_write(t, values):
    """Raises PyTorch's error where an in-place op could not store ``values`` in ``t`` (a dtype of
    higher kind, or a shape that does not broadcast to t's)."""
    if values.dtype != t._data.dtype:
        new, own = _dtypes.from_numpy_dtype(values.dtype), t.dtype
        if new._rank > own._rank:
            raise RuntimeError(f"result type {_LEGACY_TYPE_NAMES[new.name]} can't be cast to the desired output "
                               f"type {_LEGACY_TYPE_NAMES[own.name]}")
    if values.shape != t._data.shape:
        if np.broadcast_shapes(values.shape, t._data.shape) != t._data.shape:
            raise RuntimeError(f"output with shape {list(t._data.shape)} doesn't match the broadcast shape "
                               f"{list(np.broadcast_shapes(values.shape, t._data.shape))}")


def _into(out, result):
    """The ``out=`` form of a function: ``result`` copied into the tensor ``out``, which is returned."""
    if not isinstance(out, Tensor):
        raise TypeError(f"out must be a Tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(result.shape):
        raise RuntimeError(f"out has shape {list(out.shape)} but the result has shape {list(result.shape)} "
                           "(rlpipe does not resize out= tensors)")
    return copy_(out, result)


def _inplace(self, compute, *others):
    """Runs ``compute(source, *others)`` out of place and stores the result in ``self``.

    Without a graph to record, ``source`` is ``self``. With one, ``source`` is a copy of self's
    old values standing in its graph position, and self (and its base, if self is a view)
    takes the result's place in the graph, as PyTorch's in-place ops do."""
    tracking = _grad_state[0] and (self._requires_grad or builtins.any(
        isinstance(o, Tensor) and o._requires_grad for o in others))
    if not tracking:
        _write(self, compute(self, *others)._data)
        return self
    view = self._view_of
    if self.grad_fn is None and self._requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if "_returned_input_of" in self.__dict__:
        raise returned_input_error(self, "is being modified inplace")
    if view is not None and view[0].grad_fn is None and view[0]._requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    base_before = _snapshot(view[0]) if view is not None else None
    result = compute(_snapshot(self), *others)
    if result.dtype is not self.dtype:
        _write(self, result._data)  # raises for an impossible cast
        result = _cast(result, self.dtype)
    else:
        _write(self, result._data)
    if view is None:
        _adopt(self, result)
        return self
    base, view_fn, _ = view
    new_base = P.ViewUpdate.apply(base_before, result, view_fn)
    _adopt(base, new_base)
    _adopt(self, P.AsView.apply(new_base, view_fn))
    self._view_of = (base, view_fn, self._vc[0])
    return self


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
                if recording is not None and not (recording and _grad_state[0]) \
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


@tensor_method
def fill_(input, value):
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
    return copy_(input, value)


@tensor_method
def zero_(input):
    return fill_(input, 0)


@tensor_method
def copy_(input, src, non_blocking=False):
    """Copies ``src`` (broadcast, cast, moved to this device) into this tensor."""
    if isinstance(src, Tensor) and not (src._device is input._device and src._data.dtype == input._data.dtype
                                        and src._data.shape == input._data.shape):  # else nothing to convert
        src = to(src, input._device, input.dtype)
        if np.broadcast_shapes(tuple(src.shape), tuple(input.shape)) != tuple(input.shape):
            raise RuntimeError(f"The size of tensor a ({input.shape[-1] if input.ndim else 1}) must match the size of "
                               f"tensor b ({src.shape[-1] if src.ndim else 1}): cannot copy {list(src.shape)} "
                               f"into {list(input.shape)}")
    if not (_grad_state[0] and (input._requires_grad or isinstance(src, Tensor) and src._requires_grad)):
        _check_writable(input)
        input._data[...] = src._data if isinstance(src, Tensor) else _scalar(src)
        input._vc[0] += 1
        return input
    if not isinstance(src, Tensor):
        from rlpipe._creation import full
        src = full((), src, dtype=input.dtype, device=input._device)
    return _inplace(input, lambda old, s: expand(s, old.shape) + 0, src)


# ---- Tensor methods that are not functions of the functional API --------------------------------

@tensor_method("where")
def _where_method(self, condition, other):
    return where(condition, self, other)


def _reverse_dims(self):
    dims = (1, 0) if self._data.ndim == 2 else tuple(range(self._data.ndim - 1, -1, -1))
    return _mark_view(P.Permute.apply(self, dims), self, lambda a: a.transpose(dims))


def _matrix_transpose(self):
    if self._data.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self._data.ndim}-D tensor.")
    return transpose(self, -2, -1)


tensor_method("T", "H")(property(_reverse_dims))
tensor_method("mT", "mH")(property(_matrix_transpose))
Tensor.float = _dtype_method(_dtypes.float32)
Tensor.double = _dtype_method(_dtypes.float64)
Tensor.half = _dtype_method(_dtypes.float16)
Tensor.bfloat16 = _dtype_method(_dtypes.bfloat16)
Tensor.long = _dtype_method(_dtypes.int64)
Tensor.int = _dtype_method(_dtypes.int32)
Tensor.short = _dtype_method(_dtypes.int16)
Tensor.char = _dtype_method(_dtypes.int8)
Tensor.byte = _dtype_method(_dtypes.uint8)
Tensor.bool = _dtype_method(_dtypes.bool)


@tensor_method("__pos__")
def _positive(self):
    return self


@tensor_method("__invert__")
def _invert(self):
    return logical_not(self) if self.dtype is _dtypes.bool else bitwise_not(self)


# ---- special functions (the distributions' building blocks) ---------------------------------------

lgamma = _unary_float(P.Lgamma)
digamma = _unary_float(P.Digamma)
atanh = _unary_float(P.Atanh)
arctanh = tensor_method("arctanh")(atanh)


@inplace_variant
@tensor_method
def logit(input, eps=None):
    """log(p / (1 - p)); with ``eps``, p is first clamped to [eps, 1 - eps]."""
    return P.Logit.apply(_float_input(input), None if eps is None else float(eps))


__all__ += ["lgamma", "digamma", "atanh", "arctanh", "logit"]


# ---- sorting, interpolation, index accumulation, triangles, repeat_interleave -------------------

sort_return = type("sort", (_ValuesIndices,), {"__slots__": ()})
topk_return = type("topk", (_ValuesIndices,), {"__slots__": ()})


def _sorted(input, dim, descending, k=None):
    d = input._dim(dim)
    if input.ndim == 0:
        return input.clone(), zeros_like_int(input)
    return P.Sort.apply(input, d, descending, k)


@tensor_method
def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along ``dim``. Always stable: equal values keep their order."""
    return sort_return(*_sorted(input, dim, descending))


@tensor_method
def argsort(input, dim=-1, descending=False, stable=False):
    return _sorted(input, dim, descending)[1]


@tensor_method
def msort(input):
    return _sorted(input, 0, False)[0]


@tensor_method
def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (smallest) values along ``dim`` and their indices; always in sorted order,
    ties in index order."""
    d = input._dim(dim)
    if not 0 <= k <= (input.shape[d] if input.ndim else 1):
        raise RuntimeError("selected index k out of range")
    if input.ndim == 0:
        return topk_return(*_sorted(input, d, largest))
    return topk_return(*P.Sort.apply(input, d, largest, builtins.int(k)))


@inplace_variant
@tensor_method
def index_add(input, dim, index, source, *, alpha=1):
    """A copy of input with ``alpha * source`` added at ``index`` along ``dim`` (repeats accumulate)."""
    if input.ndim == 0:  # a 0-d tensor is a one-element vector here
        _index_add_positions(input, dim, index, source)  # torch's checks of the arguments as given
        return reshape(index_add(reshape(input, 1), 0, index, reshape(source, -1), alpha=alpha), ())
    d, values = _index_add_positions(input, dim, index, source)
    try:
        return P.IndexAdd.apply(input, d, values, source, _scalar(alpha), _sums_in_float32(input, d, index, alpha))
    except IndexError:  # the backend's index_add checks the positions
        raise _index_out_of_range(input, d, values) from None


_HALF_TYPES = (np.dtype(np.float16), _BFLOAT16)


def _sums_in_float32(input, d, index, alpha):
    """Whether torch's CPU index_add takes these sums in float32 and rounds once (see
    ``primitives.indexing.index_add_into``): checked after ``_index_add_positions``."""
    data = input._data
    return data.dtype in _HALF_TYPES and data.ndim > 1 and d in (0, data.ndim - 1) and alpha == 1 \
        and index._data.dtype is _INT64 and input._device is _CPU


_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


def _index_add_positions(input, dim, index, source):
    """Checks index_add's arguments as torch does, but for the positions' range (the backend's
    index_add checks it as it adds); returns the dim and the positions as int64. For a 0-d input
    only the dim and the dtypes are checked (the caller reshapes it)."""
    data, values = input._data, index._data if isinstance(index, Tensor) else None
    d = dim if type(dim) is builtins.int and 0 <= dim < data.ndim else input._dim(dim)
    if values is None or values.dtype not in _INDEX_DTYPES:
        raise RuntimeError("index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{_LEGACY_TYPE_NAMES[index.dtype.name] if values is not None else type(index)}")
    if values.ndim > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{_LEGACY_TYPE_NAMES[index.dtype.name]} and size: {list(index.shape)}")
    if source._data.dtype != data.dtype:
        raise RuntimeError(f"index_add_(): self ({_LEGACY_TYPE_NAMES[input.dtype.name]}) and source "
                           f"({_LEGACY_TYPE_NAMES[source.dtype.name]}) must have the same scalar type")
    shape, source_shape = data.shape, source._data.shape
    if not shape:
        return d, None
    n_source = source_shape[d] if source_shape else 1
    if values.size != n_source:
        raise RuntimeError(f"index_add_(): Number of indices ({values.size}) should be equal to source.size(dim): "
                           f"({n_source}), for dim: {d}")
    if source_shape != shape and (len(source_shape) != len(shape) or source_shape[:d] != shape[:d]
                                  or source_shape[d + 1:] != shape[d + 1:]):
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(shape)} source.shape = {list(source_shape)}")
    if values.dtype is not _INT64:
        values = values.reshape(-1).astype(np.int64)
    elif values.ndim != 1:
        values = values.reshape(-1)
    return d, values


def _index_out_of_range(input, d, values):
    """torch's error for positions outside input's dim ``d`` (the backend's index_add finds them):
    an IndexError for a vector (torch's 1-d kernel), else a RuntimeError naming the first one."""
    if input._data.ndim == 1:
        return IndexError("index out of range in self")
    n = input._data.shape[d]
    first = builtins.int(values[(values < 0) | (values >= n)][0])
    return RuntimeError(f"index {first} is out of bounds for dimension {d} with size {n}")


_index_add_general = Tensor.index_add_


def index_add_(input, dim, index, source, *, alpha=1):
    """index_add in place; where nothing needs recording, the sums go straight into input's memory
    (the backend's unbuffered scatter-add: repeated positions accumulate, one after the other in
    index order, as torch's CPU kernel adds them), without NumPy's floating-point warnings (inf -
    inf is nan, as in torch). c51.py's case, a CPU vector with int64 positions and a source of
    their length, is recognised by a few tests of the arrays, which pass only where every one of
    torch's argument checks would; other calls go through those checks."""
    vector = type(index) is Tensor is type(source)
    if vector:
        data, positions, values = input._data, index._data, source._data
        vector = positions.dtype is _INT64 and values.dtype is data.dtype \
            and data.ndim == values.ndim == positions.ndim == 1 and len(positions) == len(values) \
            and type(dim) is builtins.int and -1 <= dim <= 0 and alpha == 1 \
            and input._device is source._device is index._device is _CPU \
            and not (_grad_state[0] and (input._requires_grad or source._requires_grad)) and data.flags.writeable
    if vector:
        d, kernel = 0, _cpu_index_add
    elif input._data.ndim and isinstance(source, Tensor) and source._device is input._device \
            and not (_grad_state[0] and (input._requires_grad or source._requires_grad)):
        d, positions = _index_add_positions(input, dim, index, source)
        _check_writable(input)
        data, values, backend = input._data, source._data, input._device._backend
        kernel = functools.partial(P.index_add_into, backend, in_float32=_sums_in_float32(input, d, index, alpha))
    else:
        return _index_add_general(input, dim, index, source, alpha=alpha)
    quiet = silence_fp_warnings()
    try:
        kernel(data, d, positions, values if alpha == 1 else values * data.dtype.type(_scalar(alpha)))
    except IndexError:
        raise _index_out_of_range(input, d, positions) from None
    finally:
        restore_fp_warnings(quiet)
    input._vc[0] += 1
    return input


Tensor.index_add_ = index_add_


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
    return P.Lerp.apply(input, end, weight)


@inplace_variant
@tensor_method
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and the dtype's
    largest and lowest finite values); integer and bool tensors come back as copies."""
    if not input.is_floating_point():
        return input.clone()
    info = _dtypes.finfo(input.dtype)
    return P.NanToNum.apply(input, nan, info.max if posinf is None else posinf,
                            info.min if neginf is None else neginf)


def _triangle(input, diagonal, upper):
    if input.ndim < 2:
        raise RuntimeError(f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")
    return P.Triangle.apply(input, builtins.int(diagonal), upper)


@inplace_variant
@tensor_method
def tril(input, diagonal=0):
    """The lower triangle of the last two dims (on and below ``diagonal``), zeros above it."""
    return _triangle(input, diagonal, False)


@inplace_variant
@tensor_method
def triu(input, diagonal=0):
    """The upper triangle of the last two dims (on and above ``diagonal``), zeros below it."""
    return _triangle(input, diagonal, True)


@tensor_method
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along ``dim``) repeated ``repeats`` times: an int, or a tensor with one
    count per slice. ``repeat_interleave(counts)`` alone gives each index i ``counts[i]`` times."""
    if repeats is None:
        if input.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        from rlpipe._creation import arange
        return repeat_interleave(arange(input.shape[0], device=input.device), input, 0, output_size=output_size)
    if dim is None:
        input, dim = flatten(input), 0
    d = input._dim(dim)
    n = input.shape[d] if input.ndim else 1
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if repeats.dtype not in (_dtypes.int64, _dtypes.int32):
            raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for '
                                      f"'{_LEGACY_TYPE_NAMES[repeats.dtype.name]}'")
        counts = repeats._host().reshape(-1).tolist()
        if builtins.any(c < 0 for c in counts):
            raise RuntimeError("repeats can not be negative")
        if len(counts) == 1:
            counts = counts[0]
        elif len(counts) != n:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{len(counts)} and input.size({d}) = {n}")
    else:
        counts = builtins.int(repeats)
        if counts < 0:
            raise RuntimeError("Repeats must be non-negative")
    total = counts * n if isinstance(counts, builtins.int) else builtins.sum(counts)
    if output_size is not None and output_size != total:
        raise RuntimeError("allocated size does not match required size")
    if input.ndim == 0:
        input = reshape(input, 1)
    xp = input._device._backend.xp
    return P.IndexSelect.apply(input, d, xp.repeat(xp.arange(n), counts))  # slice i, counts[i] times


__all__ += "sort argsort msort topk index_add lerp nan_to_num tril triu repeat_interleave".split()


# ---- the rest of the elementwise math TensorDict's API exposes (torch names) -----------------------

asin = _unary_float(P.Asin)
acos = _unary_float(P.Acos)
atan = _unary_float(P.Atan)
tan = _unary_float(P.Tan)
sinh = _unary_float(P.Sinh)
cosh = _unary_float(P.Cosh)
arcsin = tensor_method("arcsin")(asin)
arccos = tensor_method("arccos")(acos)
arctan = tensor_method("arctan")(atan)


@inplace_variant
@tensor_method
def erfc(input):
    """1 - erf(x) (computed so: it loses relative precision where erfc is tiny, x > ~4 in float32)."""
    return 1 - erf(input)


@inplace_variant
@tensor_method
def frac(input):
    """x - trunc(x): the fractional part, with x's sign."""
    if not input.is_floating_point():
        raise RuntimeError(f'"frac_cpu" not implemented for \'{_LEGACY_TYPE_NAMES[input.dtype.name]}\'')
    return input - trunc(input)


@tensor_method
def isposinf(input):
    return logical_and(isinf(input), gt(input, 0))


@tensor_method
def isneginf(input):
    return logical_and(isinf(input), lt(input, 0))


@tensor_method
def isreal(input):
    """True everywhere: rlpipe has no complex dtypes."""
    from rlpipe._creation import ones_like
    return ones_like(input, dtype=_dtypes.bool)


__all__ += "asin acos atan tan sinh cosh arcsin arccos arctan erfc frac isposinf isneginf isreal".split()


# ---- running extremes and quantiles ------------------------------------------------------------------

cummax_return = type("cummax", (_ValuesIndices,), {"__slots__": ()})
cummin_return = type("cummin", (_ValuesIndices,), {"__slots__": ()})


def _running_extreme(input, dim, largest):
    """(values, indices) of the running max (or min) along ``dim``; on ties the later index wins, as
    in torch. The indices come from one pass over the dim; the values gather the input through them
    (so gradients reach the elements that were picked)."""
    d = input._dim(dim)
    x = input if input.ndim else reshape(input, 1)
    xp = x._device._backend.xp
    data = xp.moveaxis(x._data, d if input.ndim else 0, 0)
    best, index = data[0].copy(), xp.zeros(data.shape[1:], dtype=np.int64)
    indices = xp.empty(data.shape, dtype=np.int64)
    indices[0] = index
    for i in range(1, data.shape[0]):
        better = ((data[i] >= best) if largest else (data[i] <= best)) | (data[i] != data[i])  # NaN wins
        index = xp.where(better, i, index)
        best = xp.where(better, data[i], best)
        indices[i] = index
    indices = wrap(xp.ascontiguousarray(xp.moveaxis(indices, 0, d if input.ndim else 0)), x._device)
    values = P.Gather.apply(x, d if input.ndim else 0, indices._data)
    if not input.ndim:
        return reshape(values, ()), reshape(indices, ())
    return values, indices


@tensor_method
def cummax(input, dim):
    return cummax_return(*_running_extreme(input, dim, True))


@tensor_method
def cummin(input, dim):
    return cummin_return(*_running_extreme(input, dim, False))


_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


@tensor_method
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles along ``dim`` (all elements when None), interpolated between the two
    nearest sorted values as torch.quantile does; a 1-D ``q`` adds a leading dim of its size."""
    if not input.is_floating_point():
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if interpolation not in _QUANTILE_MODES:
        raise ValueError(f"quantile() interpolation must be one of {', '.join(_QUANTILE_MODES)}. "
                         f"Got {interpolation}")
    qs = q.detach().cpu().numpy().astype(np.float64) if isinstance(q, Tensor) else np.asarray(q, np.float64)
    if qs.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    bad = [v for v in qs.reshape(-1).tolist() if not 0 <= v <= 1]
    if bad:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {bad[0]}")
    x, d = (reshape(input, -1), 0) if dim is None else (input, input._dim(dim))
    if x.ndim == 0:
        x, d = reshape(x, 1), 0
    n = x.shape[d]
    if n == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    ordered = sort(x, d).values
    nan = any(isnan(x), d, keepdim=True)
    picked = []
    for value in qs.reshape(-1):
        pos = value * (n - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        if interpolation == "nearest":
            lo = hi = builtins.int(np.round(pos))
        frac = {"lower": 0.0, "higher": 1.0, "midpoint": 0.5}.get(interpolation, pos - lo)
        low, high = narrow(ordered, d, lo, 1), narrow(ordered, d, hi, 1)
        picked.append(where(nan, math.nan, low if lo == hi else low + (high - low) * frac))
    out = stack(picked, 0) if qs.ndim else picked[0]
    axis = d + 1 if qs.ndim else d
    if dim is None:
        return reshape(out, (len(picked),) + (1,) * input.ndim) if keepdim and qs.ndim else \
            reshape(out, (1,) * input.ndim) if keepdim else reshape(out, (-1,) if qs.ndim else ())
    return out if keepdim else squeeze(out, axis)


__all__ += "cummax cummin quantile".split()
