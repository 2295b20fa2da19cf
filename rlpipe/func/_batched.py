"""``BatchedTensor``: what a vmapped function sees in place of a tensor mapped over one dimension.

It holds a ``value`` whose dim 0 is the mapped (batch) dimension and shows the rest as its shape.
Every op it supports has a batching rule here: the same op run once on the values, with dims
shifted past the batch dim and operands aligned so that the batch dims meet. Top-level functions
reach the rules through the ``__torch_function__`` protocol, Tensor methods and operators through
the methods below. An op with no rule raises an error naming it, never computes a wrong result.
Nested vmaps nest wrappers: a level-2 tensor's value may be a level-1 BatchedTensor, whose own
rules then run; an operand of a lower level is an unbatched operand at the higher one.
"""
import builtins
import operator
import sys

from .. import _dtypes
from .._tensor import Size, Tensor
from ._ensemble import EnsembleLinear

__all__ = ["BatchedTensor", "batch_sizes"]

# the batch size of each vmap level in progress (level n is batch_sizes[n - 1])
batch_sizes = []
_RULES = {}


class NoBatchingRule(RuntimeError, AttributeError):
    """A method of a batched tensor without a batching rule: a RuntimeError naming it, and an
    AttributeError so that ``hasattr(x, name)`` (how code tells tensors from TensorDicts) says False."""


class BatchedTensor:
    """A tensor mapped over by vmap at ``level`` (see the module docstring)."""
    __slots__ = ("_value", "_level")
    _is_non_tensor = False  # a tensor to the TensorDicts that hold it inside vmap
    __array_ufunc__ = None  # NumPy must not turn it into an object array

    def __init__(self, value, level):
        self._value, self._level = value, level

    @property
    def shape(self):
        """The shape of one sample (the mapped dim left out)."""
        return Size(self._value.shape[1:])

    def size(self, dim=None):
        """``shape``, or its entry ``dim``."""
        return self.shape if dim is None else self.shape[dim]

    @property
    def ndim(self):
        """The number of dims of one sample."""
        return self._value.ndim - 1

    def dim(self):
        """``ndim``."""
        return self.ndim

    def numel(self):
        """The number of elements of one sample."""
        return self.shape.numel()

    def __len__(self):
        if not self.ndim:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def dtype(self):
        """The value's dtype."""
        return self._value.dtype

    @property
    def device(self):
        """The value's device."""
        return self._value.device

    @property
    def requires_grad(self):
        """Whether the value records gradients."""
        return self._value.requires_grad

    @property
    def grad_fn(self):
        """The node that made the value (None for a leaf)."""
        return self._value.grad_fn

    def is_floating_point(self):
        """Whether the dtype is a floating-point one."""
        return self._value.is_floating_point()

    @property
    def T(self):
        """A sample's dims reversed."""
        return self.permute(*range(self.ndim - 1, -1, -1))

    @property
    def mT(self):
        """A sample's last two dims swapped."""
        return self.transpose(-2, -1)

    def __repr__(self):
        return f"BatchedTensor(lvl={self._level}, bdim=0, value=\n{self._value!r})"

    def item(self):
        """Not possible inside vmap (one number per sample): torch's error."""
        raise RuntimeError("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over "
                           "calling .item() on a Tensor, please try to rewrite what you're doing with other "
                           "operations.")

    def __bool__(self):
        raise RuntimeError("vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
                           "flow. We don't support that yet, please shout over at the rlpipe issue tracker.")

    def __array__(self, *args, **kwargs):
        raise TypeError("vmap: a batched tensor cannot be converted to an array inside the vmapped function")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name.startswith("_"):  # a core op reached into the tensor: it has no rule and cannot run on this
            raise TypeError(f"vmap: no batching rule for '{_public_caller()}' (it needs a Tensor, got a batched "
                            f"tensor; its attribute {name!r} was read)")
        raise NoBatchingRule(f"vmap: no batching rule for 'Tensor.{name}'")

    @classmethod
    def __torch_function__(cls, func, types, args, kwargs=None):
        return dispatch(func.__name__, func, args, kwargs or {})


def _public_caller():
    """The name of the innermost public function (not ``_private``) on the stack above our caller."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name.startswith("_"):
        frame = frame.f_back
    return "?" if frame is None else frame.f_code.co_name


def dispatch(name, func, args, kwargs):
    """Runs op ``name`` (the public function ``func``, or None for a method) by its batching rule at the
    innermost level among its arguments."""
    rule = _RULES.get(name)
    if rule is None:
        raise RuntimeError(f"vmap: no batching rule for '{name}'")
    if "out" in kwargs:
        if kwargs["out"] is not None:
            raise RuntimeError(f"vmap: no batching rule for '{name}' with out= (the fallback path doesn't work on "
                               "out= or view ops)")
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}  # (what a public function's wrapper passes)
    return rule(_level(args, _level(kwargs.values(), 0)), name, func, args, kwargs)


def _level(args, level):
    """The innermost level among ``args`` (and the tensors of list or tuple arguments), at least ``level``."""
    for a in args:
        if type(a) is BatchedTensor:
            if a._level > level:
                level = a._level
        elif isinstance(a, (list, tuple)):
            level = _level(a, level)
    return level


def _method(name):
    def method(self, *args, **kwargs):
        return dispatch(name, None, (self, *args), kwargs)
    method.__name__ = name
    method.__doc__ = getattr(getattr(Tensor, name, None), "__doc__", None) or \
        f"``Tensor.{name}`` applied to every sample (its batching rule)."
    return method


def _rule(*names, methods=True):
    """Declares a batching rule for ops ``names`` (and, unless ``methods`` is False, the methods of the
    same names on BatchedTensor)."""
    def register(fn):
        for name in names:
            _RULES[name] = fn
            if methods and name not in BatchedTensor.__dict__:
                setattr(BatchedTensor, name, _method(name))
        return fn
    return register


# ---- helpers ------------------------------------------------------------------------------------

def _unwrap(x, level):
    """(the value, True) for a tensor batched at ``level``, else (x, False)."""
    if type(x) is BatchedTensor and x._level == level:
        return x._value, True
    return x, False


def _wrap(result, level):
    if isinstance(result, (Tensor, BatchedTensor)):
        return BatchedTensor(result, level)
    if isinstance(result, tuple):
        items = [_wrap(r, level) for r in result]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
    if isinstance(result, list):
        return [_wrap(r, level) for r in result]
    return result


def _is_tensor(x):
    return isinstance(x, (Tensor, BatchedTensor))


def _pad(value, ndim):
    """A batched value with size-1 dims inserted after the batch dim up to ``ndim`` logical dims."""
    missing = ndim - (value.ndim - 1)
    return value.reshape((value.shape[0],) + (1,) * missing + tuple(value.shape[1:])) if missing > 0 else value


def _expanded(x, batched, level):
    """x's value with the batch dim: an unbatched x is expanded (a view) to the level's batch size."""
    if batched:
        return x
    if not _is_tensor(x):
        raise TypeError(f"vmap: expected a tensor, got {type(x).__name__}")
    return x.unsqueeze(0).expand(batch_sizes[level - 1], *x.shape)


def _dim(d, ndim):
    """The physical dim of logical dim ``d`` of a tensor with ``ndim`` logical dims."""
    if not isinstance(d, int):
        raise TypeError(f"vmap: expected an int dim, got {type(d).__name__}")
    if not -builtins.max(ndim, 1) <= d < builtins.max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-builtins.max(ndim, 1)}, "
                         f"{builtins.max(ndim, 1) - 1}], but got {d})")
    return (d % builtins.max(ndim, 1)) + 1


def _dims(d, ndim):
    return [_dim(x, ndim) for x in d] if isinstance(d, (list, tuple)) else _dim(d, ndim)


def _get(args, kwargs, pos, name, default=None):
    if len(args) > pos:
        return args[pos]
    return kwargs.get(name, default)


def _set(args, kwargs, pos, name, value):
    if len(args) > pos:
        return args[:pos] + (value,) + args[pos + 1:], kwargs
    return args, {**kwargs, name: value}


def _call(name, func, args, kwargs):
    """The op on values: the public function, else the method of the first argument."""
    if func is not None:
        return func(*args, **kwargs)
    return getattr(args[0], name)(*args[1:], **kwargs)


# ---- elementwise ops: operands aligned, broadcast as per sample --------------------------------------

_OPERATORS = {
    "__add__": operator.add, "__sub__": operator.sub, "__mul__": operator.mul, "__truediv__": operator.truediv,
    "__floordiv__": operator.floordiv, "__mod__": operator.mod, "__pow__": operator.pow,
    "__eq__": operator.eq, "__ne__": operator.ne, "__lt__": operator.lt, "__le__": operator.le,
    "__gt__": operator.gt, "__ge__": operator.ge, "__and__": operator.and_, "__or__": operator.or_,
    "__xor__": operator.xor, "__neg__": operator.neg, "__abs__": operator.abs, "__invert__": operator.invert,
}
_UNARY = ("neg negative abs exp exp2 expm1 log log1p log2 log10 sqrt rsqrt square reciprocal sign sgn floor ceil "
          "round trunc frac sin cos tan sinh cosh tanh asin acos atan asinh acosh atanh sigmoid relu relu6 softplus "
          "leaky_relu gelu elu selu celu silu mish hardtanh hardsigmoid hardswish logsigmoid erf erfc erfinv lgamma "
          "digamma logit clamp clip clamp_min clamp_max logical_not bitwise_not isnan isinf isfinite nan_to_num "
          "float double half bfloat16 "
          "int long bool detach clone contiguous").split()
_NARY = ("add sub subtract rsub mul multiply div divide true_divide floor_divide remainder fmod pow float_power "
         "maximum minimum fmax fmin eq ne lt le gt ge greater greater_equal less less_equal not_equal "
         "logical_and logical_or logical_xor bitwise_and bitwise_or atan2 hypot xlogy copysign lerp addcmul "
         "addcdiv where masked_fill").split()


def _elementwise(level, name, func, args, kwargs):
    if len(args) == 1:  # a unary op: nothing to align
        value = _unwrap(args[0], level)[0]
        operator_ = _OPERATORS.get(name)
        return _wrap(operator_(value) if operator_ else _call(name, func, (value,), kwargs), level)
    unwrapped = _as_samples_promote([_unwrap(a, level) for a in args])
    ndim = builtins.max([v.ndim - b for v, b in unwrapped if _is_tensor(v)], default=0)
    values = [_pad(v, ndim) if b else v for v, b in unwrapped]
    if name in _OPERATORS:
        return _wrap(_OPERATORS[name](*values), level)
    return _wrap(_call(name, func, tuple(values), kwargs), level)


def _as_samples_promote(unwrapped):
    """The operands with each sample's 0-dim tensor cast to the dtype torch's promotion gives the samples: a
    0-dim tensor counts only when of a higher kind than the dimensioned ones, but batched it has a dim."""
    tensors = [(v, v.ndim - b) for v, b in unwrapped if isinstance(v, Tensor)]
    if not any(n == 0 for _, n in tensors) or all(n == 0 for _, n in tensors):
        return unwrapped
    target = _dtypes.result_type([v.dtype for v, n in tensors if n], [v.dtype for v, n in tensors if not n])
    return [(v.to(target), b) if b and v.ndim == 1 and v.dtype is not target and v.dtype is not _dtypes.bool
            else (v, b) for v, b in unwrapped]


_rule(*_OPERATORS, *_UNARY, *[n for n in _NARY if n != "where"])(_elementwise)
_rule("where", methods=False)(_elementwise)


@_rule("to", "type", "type_as")
def _convert(level, name, func, args, kwargs):
    """A dtype or device conversion: a tensor argument only gives the dtype and device."""
    value, _ = _unwrap(args[0], level)
    return _wrap(getattr(value, name)(*[_unwrap(a, level)[0] for a in args[1:]], **kwargs), level)


def _inplace(level, name, func, args, kwargs):
    """``self.op_(*others)`` on a batched self: the op in place on its value, operands aligned; an
    unbatched self cannot take a batched operand (torch's error)."""
    value, batched = _unwrap(args[0], level)
    others = [_unwrap(a, level) for a in args[1:]]
    if not batched:
        if any(b for _, b in others):
            raise RuntimeError(f"vmap: {name}(self, *extra_args) is not possible because there exists a Tensor "
                               "`other` in extra_args that has more elements than `self`. This happened due to "
                               "`other` being vmapped over but `self` not being vmapped over in a vmap. Please try "
                               f"to use out-of-place operators instead of {name}.")
        getattr(value, name)(*[v for v, _ in others], **kwargs)
        return args[0]
    ndim = value.ndim - 1
    getattr(value, name)(*[_pad(v, ndim) if b else v for v, b in others], **kwargs)
    return args[0]


_rule(*[n + "_" for n in (*_UNARY, *_NARY, "zero", "fill") if hasattr(Tensor, n + "_")])(_inplace)


def _reflected(name):
    def method(self, other):
        return dispatch(name, None, (other, self), {})
    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor"):
    setattr(BatchedTensor, f"__r{_name}__", _reflected(f"__{_name}__"))
BatchedTensor.__hash__ = object.__hash__  # __eq__ is elementwise


# ---- reductions and ops along a dim ---------------------------------------------------------------

_REDUCTIONS = {"sum": 1, "nansum": 1, "mean": 1, "nanmean": 1, "prod": 1, "amax": 1, "amin": 1, "max": 1, "min": 1,
               "std": 1, "var": 1, "logsumexp": 1, "all": 1, "any": 1, "argmax": 1, "argmin": 1,
               "count_nonzero": 1, "norm": 2}
_FULL = {"max": "amax", "min": "amin"}  # the op that reduces a flattened tensor when no dim is given


@_rule(*_REDUCTIONS)
def _reduction(level, name, func, args, kwargs):
    other = kwargs.get("other") if kwargs.get("other") is not None else _get(args, kwargs, 1, "dim")
    if name in ("max", "min") and _is_tensor(other):
        return _elementwise(level, "maximum" if name == "max" else "minimum", None, (args[0], other), {})
    value, _ = _unwrap(args[0], level)
    args = (value,) + tuple(args[1:])
    pos = _REDUCTIONS[name]
    dim = _get(args, kwargs, pos, "dim")
    if dim is not None and value.ndim == 1:  # a 0-d sample: dim 0 or -1 is all of it
        _dims(dim, 0)
        dim = None
    if dim is None or dim == () and name in ("amax", "amin"):
        args, kwargs = _set(args, kwargs, pos, "dim", 1)
        args = (value.reshape(value.shape[0], -1),) + args[1:]
        return _wrap(_call(_FULL.get(name, name), None, args, kwargs), level)
    args, kwargs = _set(args, kwargs, pos, "dim", _dims(dim, value.ndim - 1))
    return _wrap(_call(name, None, args, kwargs), level)


# the ops along dims: each dim argument's (position, keyword, default)
_DIM = ((1, "dim", None),)
_PAIR = ((1, "dim0", None), (2, "dim1", None))
_MOVE = ((1, "source", None), (2, "destination", None))
_ALONG = {"softmax": _DIM, "log_softmax": _DIM, "cumsum": _DIM, "cumprod": _DIM, "logcumsumexp": _DIM,
          "select": _DIM, "narrow": _DIM, "unflatten": _DIM, "squeeze": _DIM, "unsqueeze": _DIM,
          "flip": ((1, "dims", None),), "unbind": ((1, "dim", 0),), "chunk": ((2, "dim", 0),),
          "split": ((2, "dim", 0),), "transpose": _PAIR, "swapaxes": _PAIR, "movedim": _MOVE, "moveaxis": _MOVE,
          "flatten": ((1, "start_dim", 0), (2, "end_dim", -1)), "diagonal": ((2, "dim1", 0), (3, "dim2", 1))}


@_rule(*_ALONG)
def _along(level, name, func, args, kwargs):
    original, (value, _) = args[0], _unwrap(args[0], level)
    args, ndim = (value,) + tuple(args[1:]), value.ndim - 1
    if name == "squeeze" and ndim:  # as a view of the kept sizes (also a view of an empty tensor)
        dim = _get(args, kwargs, 1, "dim")
        dims = range(1, ndim + 1) if dim is None else _dims(dim if isinstance(dim, (list, tuple)) else [dim], ndim)
        return _wrap(value.view([s for i, s in enumerate(value.shape) if not (i in dims and s == 1)]), level)
    if name == "unsqueeze":
        ndim += 1
    elif ndim == 0 and name == "squeeze":
        if _get(args, kwargs, 1, "dim") is not None:
            _dims(_get(args, kwargs, 1, "dim"), 0)
        return _wrap(value.view(value.shape), level)  # a 0-d sample: a view of it, as in torch
    elif ndim == 0 and name in ("transpose", "swapaxes", "flip", "movedim", "moveaxis"):
        for pos, keyword, default in _ALONG[name]:
            _dims(_get(args, kwargs, pos, keyword, default), 0)  # (checks the dims)
        return original  # a 0-d sample: torch returns the input itself
    for pos, keyword, default in _ALONG[name]:
        args, kwargs = _set(args, kwargs, pos, keyword, _dims(_get(args, kwargs, pos, keyword, default), ndim))
    return _wrap(_call(name, None, args, kwargs), level)


# ---- shape ops ------------------------------------------------------------------------------------

def _sizes(rest):
    """The sizes given as varargs or as one sequence."""
    if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
        return tuple(rest[0])
    return tuple(rest)


@_rule("reshape", "view")
def _reshape(level, name, func, args, kwargs):
    value, _ = _unwrap(args[0], level)
    sizes = _sizes(args[1:] or (kwargs.get("shape"),))
    if sizes and not isinstance(sizes[0], int):  # view(dtype)
        raise RuntimeError(f"vmap: no batching rule for '{name}' with {sizes}")
    # view keeps its refusal to copy: a sample layout that needs one raises, as outside vmap
    return _wrap(getattr(value, name)(value.shape[0], *sizes), level)


@_rule("permute")
def _permute(level, name, func, args, kwargs):
    value, _ = _unwrap(args[0], level)
    dims = _sizes(args[1:] or (kwargs.get("dims"),))
    return _wrap(value.permute(0, *_dims(list(dims), value.ndim - 1)), level)


@_rule("expand")
def _expand(level, name, func, args, kwargs):
    value, _ = _unwrap(args[0], level)
    sizes = _sizes(args[1:] or (kwargs.get("size"),))
    value = _pad(value, len(sizes))
    return _wrap(value.expand(value.shape[0], *sizes), level)


@_rule("expand_as", "reshape_as", "view_as")
def _as(level, name, func, args, kwargs):
    return dispatch(name[:-3], None, (args[0], tuple(args[1].shape)), {})


@_rule("cat", "concat", "concatenate", "stack", methods=False)
def _join(level, name, func, args, kwargs):
    tensors = _get(args, kwargs, 0, "tensors")
    dim = _get(args, kwargs, 1, "dim", 0)
    values = [_expanded(*_unwrap(t, level), level) for t in tensors]
    full = [v for v in values if v.ndim != 2 or v.shape[1]]
    ndim = (full or values)[0].ndim - 1 + (name == "stack")
    if name != "stack" and full:  # torch's cat takes a 1-d empty tensor (legacy) as empty in any shape
        empty = list(full[0].shape)
        empty[_dim(dim, ndim)] = 0
        values = [v if v.ndim != 2 or v.shape[1] else v.reshape(empty) for v in values]
    return _wrap(func(values, _dim(dim, ndim)), level)


@_rule("gather", "take_along_dim")
def _gather(level, name, func, args, kwargs):
    value = _expanded(*_unwrap(args[0], level), level)
    index = _expanded(*_unwrap(_get(args, kwargs, 2, "index") if name == "gather" else args[1], level), level)
    if name == "take_along_dim":
        return _wrap(value.take_along_dim(index, _dim(_get(args, kwargs, 2, "dim"), value.ndim - 1)), level)
    return _wrap(value.gather(_dim(_get(args, kwargs, 1, "dim"), value.ndim - 1), index), level)


@_rule("index_select")
def _index_select(level, name, func, args, kwargs):
    """Along the sample's dim, by one index for all samples or (a batched index) by each sample's own."""
    value = _expanded(*_unwrap(args[0], level), level)
    dim = _dim(_get(args, kwargs, 1, "dim"), value.ndim - 1)
    index, index_batched = _unwrap(_get(args, kwargs, 2, "index"), level)
    if not index_batched:
        return _wrap(value.index_select(dim, index), level)
    shape = [1] * value.ndim
    shape[0], shape[dim] = value.shape[0], index.shape[-1]
    sizes = list(value.shape)
    sizes[dim] = index.shape[-1]
    return _wrap(value.gather(dim, index.reshape(shape).expand(*sizes)), level)


@_rule("__getitem__")
def _getitem(level, name, func, args, kwargs):
    value, _ = _unwrap(args[0], level)
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    batched = [i for i, x in enumerate(index) if type(x) is BatchedTensor and x._level == level]
    advanced = [i for i, x in enumerate(index) if _is_tensor(x) or isinstance(x, list)]
    if advanced and advanced != list(range(advanced[0], advanced[-1] + 1)):
        raise RuntimeError("vmap: no batching rule for '__getitem__' with advanced indices apart from each other")
    if not batched:
        return _wrap(value[(slice(None),) + index], level)
    if len(index) != 1 or index[0].dtype.is_floating_point or str(index[0].dtype) == "rlpipe.bool":
        raise RuntimeError("vmap: no batching rule for '__getitem__' with a batched index other than one integer "
                           "tensor")
    from rlpipe._creation import arange
    ids = index[0]._value
    rows = arange(value.shape[0], device=value.device).reshape((-1,) + (1,) * (ids.ndim - 1))
    return _wrap(value[rows, ids], level)


# ---- linear algebra ------------------------------------------------------------------------------

@_rule("matmul", "mm", "bmm", "__matmul__")
def _matmul(level, name, func, args, kwargs):
    (a, a_batched), (b, b_batched) = _unwrap(args[0], level), _unwrap(args[1], level)
    wanted = {"mm": 2, "bmm": 3}.get(name)
    if wanted is not None and (a.ndim - a_batched, b.ndim - b_batched) != (wanted, wanted):
        raise RuntimeError(f"Shape mismatch: Got incorrect dims for {name}(a, b). a has dim {a.ndim - a_batched} and "
                           f"b has dim {b.ndim - b_batched}, but expected them to have dim {wanted} and dim {wanted}")
    a_vector, b_vector = a.ndim - a_batched == 1, b.ndim - b_batched == 1
    if a_vector:
        a = a.unsqueeze(-2)
    if b_vector:
        b = b.unsqueeze(-1)
    ndim = builtins.max(a.ndim - a_batched, b.ndim - b_batched)
    a, b = _pad(a, ndim) if a_batched else a, _pad(b, ndim) if b_batched else b
    out = a @ b
    if a_vector:
        out = out.squeeze(-2)
    if b_vector:
        out = out.squeeze(-1)
    return _wrap(out, level)


BatchedTensor.__rmatmul__ = _reflected("__matmul__")


@_rule("linear", methods=False)
def _linear(level, name, func, args, kwargs):
    (x, x_batched), (w, w_batched) = _unwrap(args[0], level), _unwrap(args[1], level)
    bias = _get(args, kwargs, 2, "bias")
    b, b_batched = _unwrap(bias, level)
    if not w_batched and not b_batched:
        return _wrap(func(x, w, b), level)
    if _ensemble_ready(x, w, b, b_batched):
        return _wrap(EnsembleLinear.apply(x, w, b, x_batched), level)
    # (nested levels or odd shapes) the matmul and add rules, which broadcast without copying the input
    weight_t = BatchedTensor(w.transpose(-1, -2), level) if w_batched else w.transpose(-1, -2)
    out = _matmul(level, "matmul", None, (args[0], weight_t), {})
    return out if bias is None else _elementwise(level, "__add__", None, (out, bias), {})


def _ensemble_ready(x, w, b, b_batched):
    """Whether EnsembleLinear takes this call: plain tensors of one dtype, a [E, out, in] weight and
    a [E, out] bias or none."""
    if not (isinstance(x, Tensor) and isinstance(w, Tensor) and x.dtype == w.dtype and w.ndim == 3 and x.ndim):
        return False
    w_shape = w.shape
    if b is not None and not (b_batched and isinstance(b, Tensor) and b.dtype == w.dtype and b.shape == w_shape[:2]):
        return False
    return x.shape[-1] == w_shape[2]


@_rule("layer_norm", methods=False)
def _layer_norm(level, name, func, args, kwargs):
    """Each sample normalized over its trailing dims; a batched weight or bias (an ensemble's LayerNorms)
    scales and shifts each sample by its own."""
    x, x_batched = _unwrap(args[0], level)
    shape = _get(args, kwargs, 1, "normalized_shape")
    (w, w_batched), (b, b_batched) = (_unwrap(_get(args, kwargs, i, n), level) for i, n in ((2, "weight"), (3, "bias")))
    eps = _get(args, kwargs, 4, "eps", 1e-5)
    x = _expanded(x, x_batched, level)
    if not w_batched and not b_batched:
        return _wrap(func(x, shape, w, b, eps), level)
    out = func(x, shape, None, None, eps)
    ndim = out.ndim - 1
    if w is not None:
        out = out * (_pad(w, ndim) if w_batched else w)
    if b is not None:
        out = out + (_pad(b, ndim) if b_batched else b)
    return _wrap(out, level)


# ---- losses ---------------------------------------------------------------------------------------

@_rule("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", methods=False)
def _loss(level, name, func, args, kwargs):
    (a, a_batched), (b, b_batched) = _unwrap(args[0], level), _unwrap(args[1], level)
    ndim = builtins.max(a.ndim - a_batched, b.ndim - b_batched)
    a = _pad(_expanded(a, a_batched, level), ndim)
    b = _pad(_expanded(b, b_batched, level), ndim)
    shape = [builtins.max(x, y) for x, y in zip(a.shape, b.shape)]
    reduction = _get(args, kwargs, 4, "reduction", "mean")
    if args[2] is not None or args[3] is not None:
        raise RuntimeError(f"vmap: no batching rule for '{name}' with size_average or reduce")
    extra = {"beta": _get(args, kwargs, 5, "beta", 1.0)} if name == "smooth_l1_loss" else \
        {"delta": _get(args, kwargs, 5, "delta", 1.0)} if name == "huber_loss" else {}
    loss = func(a.expand(*shape), b.expand(*shape), reduction="none", **extra)
    if reduction == "none":
        return _wrap(loss, level)
    flat = loss.reshape(loss.shape[0], -1)
    return _wrap(flat.mean(1) if reduction == "mean" else flat.sum(1), level)


@_rule("nll_loss", methods=False)
def _nll_loss(level, name, func, args, kwargs):
    """Each sample's nll_loss (input ``[C]`` or ``[N, C]``): the per-element losses of all samples in
    one call, then each sample's sum or weighted mean."""
    (x, x_batched), (t, t_batched) = _unwrap(args[0], level), _unwrap(args[1], level)
    weight, ignore_index = _get(args, kwargs, 2, "weight"), _get(args, kwargs, 4, "ignore_index", -100)
    reduction = _get(args, kwargs, 6, "reduction", "mean")
    if x.ndim - x_batched not in (1, 2) or _unwrap(weight, level)[1] or _get(args, kwargs, 3, "size_average") \
            is not None or _get(args, kwargs, 5, "reduce") is not None:
        raise RuntimeError("vmap: no batching rule for 'nll_loss' with this input (only [C] or [N, C] per sample, "
                           "an unbatched weight and no size_average/reduce)")
    x, t = _expanded(x, x_batched, level), _expanded(t, t_batched, level)
    size, classes = x.shape[0], x.shape[-1]
    flat_t = t.reshape(-1)
    losses = func(x.reshape(-1, classes), flat_t, weight, None, ignore_index, None, "none").reshape(size, -1)
    if reduction == "none":
        return _wrap(losses.reshape(t.shape), level)
    if reduction == "sum":
        return _wrap(losses.sum(1), level)
    kept = flat_t != ignore_index
    counted = kept.to(x.dtype) if weight is None else weight[flat_t.where(kept, 0)] * kept
    return _wrap(losses.sum(1) / counted.reshape(size, -1).sum(1), level)


@_rule("broadcast_tensors", methods=False)
def _broadcast(level, name, func, args, kwargs):
    unwrapped = [_unwrap(a, level) for a in args]
    ndim = builtins.max(v.ndim - b for v, b in unwrapped)
    padded = [(_pad(v, ndim), b) if b else (v, b) for v, b in unwrapped]
    shape = [1] * ndim
    for v, b in padded:
        sizes = tuple(v.shape[1:]) if b else tuple(v.shape)
        for i, s in enumerate(sizes[::-1]):
            shape[-1 - i] = builtins.max(shape[-1 - i], s)
    return tuple(_wrap(v.expand(v.shape[0], *shape), level) if b else v.expand(*shape) for v, b in padded)


@_rule("_is_all_true", methods=False)
def _all_samples(level, name, func, args, kwargs):
    return func(_unwrap(args[0], level)[0])


@_rule("zeros_like", "ones_like", "full_like", "empty_like", methods=False)
def _like(level, name, func, args, kwargs):
    value, _ = _unwrap(args[0], level)
    return _wrap(func(value, *args[1:], **kwargs), level)


# ---- random ops ---------------------------------------------------------------------------------

@_rule("randn_like", "rand_like", methods=False)
def _random_like(level, name, func, args, kwargs):
    from rlpipe import random
    draw = random.randn if name == "randn_like" else random.rand
    x = args[0]
    return draw(tuple(x.shape), dtype=kwargs.get("dtype") or x.dtype, device=kwargs.get("device") or x.device,
                requires_grad=bool(kwargs.get("requires_grad")))
