"""What the public ops share: operand promotion, casts, views and in-place writes, and the
decorators that declare an op as Tensor methods and operators.

- ``inplace_variant`` (``x.add_``) and ``tensor_operator`` (``x + y``, ``y + x``, ``x += y``) declare
  what ``tensor_method`` (in ``_tensor``) does not; ``torch_function`` (in ``_dispatch``) lets a
  container answer the public function through ``__torch_function__``.
- ``_operands`` brings two operands to PyTorch's result dtype; ``_cast`` (with its ``Cast`` node)
  changes a tensor's dtype.
- ``_mark_view``/``_new_view`` record that a result views its input's memory; ``_inplace`` runs an op
  out of place and writes the result back (with the ``AsView`` and ``ViewUpdate`` nodes that keep a
  view and its base differentiable).
"""
import builtins
import warnings

import numpy as np

from .. import _dtypes
from .._dtypes import FLOATING_NP, scalar_kind
from .._dispatch import torch_function
from .._tensor import Tensor, method_decorator, tensor_method, wrap
from ..autograd.function import returned_input_error
from ..autograd.grad_mode import state as _grad_state
from ..backends.cpu import silence_fp_warnings, restore_fp_warnings
from .base import Op, unbroadcast


_BFLOAT16 = _dtypes.bfloat16.np
_NUMBER = (builtins.int, builtins.float, builtins.bool, np.number, np.bool_)
_INT64 = np.dtype(np.int64)


# ---- declaring Tensor methods and operators ------------------------------------------------------

@method_decorator
def inplace_variant(op, names):
    """Decorator: attaches ``name_`` to Tensor for the op's name (or each of ``names``): ``x.add_(y)``
    computes ``add(x, y)`` and writes the result into x (see ``_inplace``)."""
    for name in names:
        def method(self, *args, _name=name + "_", **kwargs):
            if not isinstance(self, Tensor) and hasattr(type(self), "__torch_function__"):  # vmap's batched tensor
                return type(self).__torch_function__(getattr(Tensor, _name), (type(self),), (self, *args), kwargs)
            return _inplace(self, lambda src, *others: op(src, *others, **kwargs), *args)
        method.__name__ = name + "_"
        method.__doc__ = f"In-place {name}."
        setattr(Tensor, method.__name__, method)
    return op


def tensor_operator(name, fast=None, reflected=True, inplace=True, commutative=False):
    """Decorator: attaches the op as Tensor's ``__name__`` (and ``__rname__``, ``__iname__`` unless told
    otherwise). ``fast``: the Function that float tensors call directly when the other operand is a
    same-dtype tensor or a Python number, skipping promotion (see ``_operator``). ``commutative``:
    ``2 * t`` runs as ``t * 2``, as in torch, so the graph lists ``t`` as the node's first input."""
    def attach(op):
        forward = _operator(op, fast) if fast else _swallow_type_error(op)
        setattr(Tensor, f"__{name}__", forward)
        if reflected:
            setattr(Tensor, f"__r{name}__", forward if commutative else
                    _operator(op, fast, True) if fast else _swallow_type_error(_reflected(op)))
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


# ---- operands and promotion ----------------------------------------------------------------------

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
    return with_out("input")(inplace_variant(tensor_method(op)))


def _require_float(input, name, error=NotImplementedError):
    """torch implements some kernels for floating types only."""
    if not input.is_floating_point():
        raise error(f'"{name}" not implemented for \'{_LEGACY_TYPE_NAMES[input.dtype.name]}\'')


# ---- views ---------------------------------------------------------------------------------------

class AsView(Op):
    """Re-takes a view of an updated base: the view's grad_fn after an in-place op on it."""

    @staticmethod
    def forward(ctx, base, view_fn):
        ctx.args = base.shape, view_fn
        return view_fn(base)

    @staticmethod
    def backward(ctx, g):
        shape, view_fn = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        view_fn(out)[...] = g
        return out, None


class ViewUpdate(Op):
    """base with its view ``view_fn(base)`` replaced by ``value``: the base's grad_fn after an
    in-place op on one of its views (torch's CopySlices)."""

    @staticmethod
    def forward(ctx, base, value, view_fn):
        out = base.copy()
        view_fn(out)[...] = value
        ctx.args = view_fn, value.shape
        return out

    @staticmethod
    def backward(ctx, g):
        view_fn, value_shape = ctx.args
        gb = g.copy()
        view_fn(gb)[...] = 0
        return gb, unbroadcast(view_fn(g).copy(), value_shape), None


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
        _adopt(view, AsView.apply(root, view_fn))
    view._view_of = (root, view_fn, view._vc[0])


# ---- casts ---------------------------------------------------------------------------------------

class Cast(Op):
    """x converted to another dtype; the gradient is converted back to the input dtype."""
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return g.astype(ctx.dtype), None


def _cast(x, dtype):
    if x._data.dtype == dtype.np:
        return x
    if not x._device._backend.supports(dtype.np):
        raise TypeError(f"{dtype} is not supported on {x._device} (the {x._device.type} backend has no such dtype)")
    if not (x._requires_grad and _grad_state.grad):  # what Cast computes, without its node
        quiet = silence_fp_warnings()  # NaN or inf to an integer type: torch gives a value, no warning
        try:
            return wrap(x._data.astype(dtype.np), x._device)
        finally:
            restore_fp_warnings(quiet)
    return Cast.apply(x, dtype.np)


_C_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                  "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                  "uint8": "unsigned char", "bool": "bool"}
_LEGACY_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                       "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                       "bool": "Bool"}


# ---- in-place updates ----------------------------------------------------------------------------

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
    _check_cast(values.dtype, t)
    if values.shape != t._data.shape:
        if np.broadcast_shapes(values.shape, t._data.shape) != t._data.shape:
            raise RuntimeError(f"output with shape {list(t._data.shape)} doesn't match the broadcast shape "
                               f"{list(np.broadcast_shapes(values.shape, t._data.shape))}")


def _check_cast(np_dtype, t):
    """PyTorch's error where values of ``np_dtype`` cannot be stored in ``t`` (a dtype of higher kind)."""
    if np_dtype != t._data.dtype:
        new, own = _dtypes.from_numpy_dtype(np_dtype), t.dtype
        if new._rank > own._rank:
            raise RuntimeError(f"result type {_LEGACY_TYPE_NAMES[new.name]} can't be cast to the desired output "
                               f"type {_LEGACY_TYPE_NAMES[own.name]}")


# ---- out= arguments ------------------------------------------------------------------------------

def _store(out, values, warn=True):
    """Writes ``values`` into the tensor ``out``, first resizing out to their shape where it differs
    (with torch's deprecation warning when out had elements and ``warn``); returns out."""
    if values.shape != out._data.shape:
        if warn and out._data.size:
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out._data.shape)}, which does not match the required output shape "
                          f"{list(values.shape)}. This behavior is deprecated, and in a future PyTorch release "
                          "outputs will not be resized unless they have zero elements. You can explicitly reuse "
                          "an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
                          UserWarning, stacklevel=4)
        out._data = out._device._backend.full(values.shape, 0, out._data.dtype, out._device.index)
    _write(out, values)
    return out


def _refuse_grad(name, out, args, kwargs):
    """torch's error for ``out=`` while a graph is recorded and an input (or out) requires grad."""
    if not _grad_state.grad:
        return
    for value in (out, *args, *kwargs.values()):
        values = value if isinstance(value, (list, tuple)) else (value,)
        if builtins.any(isinstance(v, Tensor) and v._requires_grad for v in values):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")


def _write_out(out, fn, args, kwargs):
    """torch's ``out=`` for an op (the writer ``torch_function(..., out=_write_out)`` calls): ``fn``'s
    result written into ``out`` (cast to its dtype where torch allows, resized where its shape
    differs) and out returned; a pair of results (max and min along a dim) into a pair of tensors
    of exactly their dtypes."""
    _refuse_grad(fn.__name__, out, args, kwargs)
    result = fn(*args, **kwargs)
    if not isinstance(result, tuple):
        if not isinstance(out, Tensor):
            raise TypeError(f"{fn.__name__}(): argument 'out' must be Tensor, not {type(out).__name__}")
        _check_cast(result._data.dtype, out)
        return _store(out, result._data)
    if not isinstance(out, (tuple, list)) or len(out) != len(result):
        raise TypeError(f"{fn.__name__}(): argument 'out' must be a tuple of {len(result)} Tensors, "
                        f"not {type(out).__name__}")
    for o, r in zip(out, result):
        if isinstance(o, Tensor) and o._data.dtype != r._data.dtype:
            raise RuntimeError(f"Expected out tensor to have dtype {_C_TYPE_NAMES[r.dtype.name]}, but got "
                               f"{_C_TYPE_NAMES[o.dtype.name]} instead")
    return type(result)(*(_store(o, r._data) for o, r in zip(out, result)))


def _write_out_in_its_dtype(out, fn, args, kwargs):
    """``_write_out`` for an op that computes in out's dtype unless its ``dtype=`` says otherwise
    (which must then be out's own), as torch's ``sum`` does."""
    if isinstance(out, Tensor):
        dtype = kwargs["dtype"]
        if dtype is not None and _dtypes.as_dtype(dtype) is not out.dtype:
            raise RuntimeError(f"Expected out tensor to have dtype {_C_TYPE_NAMES[_dtypes.as_dtype(dtype).name]}, "
                               f"but got {_C_TYPE_NAMES[out.dtype.name]} instead")
        kwargs = {**kwargs, "dtype": out.dtype}
    return _write_out(out, fn, args, kwargs)


def with_out(*watched, in_out_dtype=False):
    """Decorator: ``torch_function(*watched)`` that also takes torch's ``out=`` (see ``_write_out``;
    ``in_out_dtype``: computed in out's dtype, see ``_write_out_in_its_dtype``)."""
    return torch_function(*watched, out=_write_out_in_its_dtype if in_out_dtype else _write_out)


def _inplace(self, compute, *others):
    """Runs ``compute(source, *others)`` out of place and stores the result in ``self``.

    Without a graph to record, ``source`` is ``self``. With one, ``source`` is a copy of self's
    old values standing in its graph position, and self (and its base, if self is a view)
    takes the result's place in the graph, as PyTorch's in-place ops do."""
    tracking = _grad_state.grad and (self._requires_grad or builtins.any(
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
    new_base = ViewUpdate.apply(base_before, result, view_fn)
    _adopt(base, new_base)
    _adopt(self, AsView.apply(new_base, view_fn))
    self._view_of = (base, view_fn, self._vc[0])
    return self
