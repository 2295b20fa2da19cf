"""Creating tensors: from data, filled, ranges, and their ``*_like`` forms."""
import builtins
import math
from collections.abc import Sequence

import numpy as np

from . import _dtypes, _memory_format as _mf
from ._device import CPU, _default as _default_device, resolve
from ._dispatch import handle_torch_function, has_torch_function
from ._tensor import Size, Tensor, init_from, tensor_method, wrap
from .primitives.common import _LEGACY_TYPE_NAMES, _store


def _device(device):
    return _default_device[0] if device is None else resolve(device)


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = s.item()
        if not isinstance(s, (builtins.int, np.integer)) or isinstance(s, builtins.bool):
            raise TypeError(f"size must be a sequence of ints, got an element of type {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(builtins.int(s))
    return tuple(out)


def _finish(data, device, requires_grad):
    """Wraps a host or backend array as a tensor on ``device``."""
    if device is not CPU:
        data = device._backend.asarray(data, index=device.index)
    t = wrap(data, device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _host_array(data, dtype):
    """``data`` as a NumPy array and the dtype torch would give it: each element's own type
    (Python float: the default dtype, NumPy scalars and arrays, tensors: their dtype), promoted."""
    if isinstance(data, Tensor):
        return data._host(), data.dtype if dtype is None else _dtypes.as_dtype(dtype)
    if hasattr(data, "__cuda_array_interface__"):
        data = data.get()
    if _is_sequence(data):
        data = _nested_host(data)
    inferred = _infer_dtype(data) if dtype is None else _dtypes.as_dtype(dtype)
    try:
        array = np.asarray(data)
    except (ValueError, OverflowError) as e:
        raise RuntimeError(f"could not build a tensor from the data: {e}") from None
    if array.dtype.kind == "O":
        raise TypeError(f"could not build a tensor from {type(data).__name__} data (ragged or non-numeric)")
    if array.dtype.kind in "iu" and not inferred.is_floating_point and inferred.name != "bool" and array.size:
        info = np.iinfo(inferred.np)
        if int(array.min()) < info.min or int(array.max()) > info.max:
            raise RuntimeError(f"value cannot be converted to type {inferred.name} without overflow")
    return array, inferred


def _is_sequence(data):
    """What torch reads as a sequence of elements: a list, tuple, deque, range... but not a string."""
    return isinstance(data, Sequence) and not isinstance(data, (str, bytes))


def _infer_dtype(data):
    if isinstance(data, (np.ndarray, np.generic)):
        return _dtypes.from_numpy_dtype(data.dtype)
    if isinstance(data, list):
        out = None
        for item in data:
            d = _infer_dtype(item)
            out = d if out is None else _dtypes.promote_types(out, d)
        return out or _dtypes.get_default_dtype()
    if isinstance(data, builtins.complex):
        raise TypeError("rlpipe has no complex dtypes: could not build a tensor from a complex number "
                        f"({data!r})")
    kind = _dtypes.scalar_kind(data)
    if kind is None:
        raise TypeError(f"could not infer a dtype for an element of type {type(data).__name__}")
    return _dtypes.of_scalar(data)


def _nested_host(data):
    """A sequence as nested lists; a tensor inside counts as one number (torch calls ``item()`` on it),
    kept as a 0-d array so that its dtype takes part in the promotion."""
    return [_nested_host(d) if _is_sequence(d) else _tensor_element(d) if isinstance(d, Tensor) else d
            for d in data]


def _tensor_element(t):
    if t.numel() != 1:
        raise ValueError("only one element tensors can be converted to Python scalars")
    return t._host().reshape(())


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data`` (nested lists, numbers, arrays, tensors)."""
    array, dt = _host_array(data, dtype)
    return _finish(np.array(array, dtype=dt.np, copy=True), _device(device), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like ``tensor`` but shares memory with a NumPy array or tensor when dtype and device allow."""
    dev = None if device is None else resolve(device)
    if isinstance(data, Tensor):
        from rlpipe.primitives import to
        return to(data, dev if dev is not None else data.device, dtype if dtype is not None else data.dtype)
    if hasattr(data, "__cuda_array_interface__") and (dev is None or dev.type == "cuda"):
        dev = dev or resolve("cuda")
        np_dtype = None if dtype is None else _dtypes.as_dtype(dtype).np
        return wrap(dev._backend.asarray(data, dtype=np_dtype, index=dev.index), dev)
    array, dt = _host_array(data, dtype)
    return _finish(array.astype(dt.np, copy=False), dev or _default_device[0], False)


def from_numpy(ndarray):
    """A CPU tensor sharing memory with a NumPy array."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    if ndarray.dtype not in _dtypes._FROM_NP:
        raise TypeError(f"can't convert np.ndarray of type {ndarray.dtype}. The only supported types are: "
                        + ", ".join(d.name for d in _dtypes.ALL))
    return wrap(ndarray, CPU)


def from_dlpack(ext_tensor):
    """A tensor sharing memory with any object that implements the DLPack protocol."""
    kind, index = ext_tensor.__dlpack_device__()
    if kind == 1:  # kDLCPU
        return wrap(np.from_dlpack(ext_tensor), CPU)
    if kind in (2, 13):  # kDLCUDA, kDLCUDAManaged
        dev = resolve(f"cuda:{index}")
        return wrap(dev._backend.xp.from_dlpack(ext_tensor), dev)
    raise RuntimeError(f"from_dlpack: unsupported DLPack device type {kind}")


def _filled(size, fill, dtype, device, requires_grad):
    dev = _device(device)
    dt = _dtypes.get_default_dtype() if dtype is None else _dtypes.as_dtype(dtype)
    if not dev._backend.supports(dt.np):
        raise TypeError(f"{dt} is not supported on {dev}")
    t = wrap(dev._backend.full(size, fill, dt.np, dev.index), dev)
    return t.requires_grad_(True) if requires_grad else t


def create_into(out, fn, args, dtype, **kwargs):
    """torch's ``out=`` for a creation function (each hands its call here when given ``out``):
    ``fn(*args, **kwargs)`` made in out's dtype on out's device and written into out, which is
    resized to it silently and returned; a different ``dtype`` is refused. (A hand-off rather than
    a wrapper: a wrapper's keyword forwarding would cost every call without ``out``.)"""
    if not isinstance(out, Tensor):
        raise TypeError(f"{fn.__name__}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if dtype is not None and _dtypes.as_dtype(dtype) is not out.dtype:
        raise RuntimeError(f"dtype {_LEGACY_TYPE_NAMES[_dtypes.as_dtype(dtype).name]} does not match dtype of out "
                           f"parameter ({_LEGACY_TYPE_NAMES[out.dtype.name]})")
    made = fn(*args, dtype=out.dtype, device=out.device, **kwargs)
    return _store(out, made._data, warn=False)


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None):
    """A tensor of shape ``size`` (ints or one sequence) filled with 0, in the default float dtype unless given."""
    if out is not None:
        return create_into(out, zeros, size, dtype)
    return _filled(_size(size), 0, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, out=None):
    """A tensor of shape ``size`` filled with 1, in the default float dtype unless given."""
    if out is not None:
        return create_into(out, ones, size, dtype)
    return _filled(_size(size), 1, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, memory_format=None, out=None):
    """A tensor of shape ``size`` laid out in ``memory_format`` (row-major unless given); unlike
    torch's, its memory is zero-filled rather than left uninitialized."""
    if out is not None:
        return create_into(out, empty, size, dtype)
    size = _size(size)
    order = _mf.array_order(_mf.check(memory_format, "empty"), len(size))
    return laid_out(order, size, lambda shape: _filled(shape, 0, dtype, device, False), requires_grad)


def laid_out(order, shape, make, requires_grad):
    """The tensor ``make(shape)`` builds (without grad) laid out in ``order`` (slowest dim first;
    None: row-major): made in that order, then transposed back to ``shape``."""
    if order is None:
        t = make(shape)
    else:
        t = make(Size(shape[d] for d in order))
        t = wrap(t._data.transpose(_mf.inverse(order)), t._device)
    return t.requires_grad_(True) if requires_grad else t


def like_order(input, memory_format, fname):
    """The layout (``laid_out``'s order) of a tensor made like ``input`` in ``memory_format``."""
    if memory_format is None and input._data.flags.c_contiguous:
        return None
    fmt = _mf.check(memory_format, fname) or _mf.preserve_format
    return _mf.order_for(input._data.shape, input.stride(), fmt)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A zero-filled tensor of shape ``size`` laid out with ``stride`` (in elements) over a buffer
    just large enough; ``stride()`` then gives ``stride`` back."""
    size, stride = _size((size,)), _size((stride,))
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality of strides "
                           f"({len(stride)})")
    needed = 0 if 0 in size else 1 + builtins.sum((n - 1) * s for n, s in zip(size, stride))
    flat = _filled((needed,), 0, dtype, device, False)
    xp = flat._device._backend.xp
    data = xp.lib.stride_tricks.as_strided(flat._data, size, tuple(s * flat._data.itemsize for s in stride))
    t = wrap(data, flat._device)
    return t.requires_grad_(True) if requires_grad else t


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False, out=None):
    """A tensor of shape ``size`` filled with ``fill_value``; the dtype follows the value (bool, int64, default float)
    unless given."""
    if out is not None:
        return create_into(out, full, (size, fill_value), dtype)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if dtype is None and _dtypes.scalar_kind(fill_value) is not None:
        dtype = _dtypes.of_scalar(fill_value)
    return _filled(_size((size,) if isinstance(size, builtins.int) else (size,)), fill_value, dtype, device,
                   requires_grad)


def _like(input, dtype, device):
    return (input.dtype if dtype is None else dtype), (input.device if device is None else device)


def _filled_like(input, fill, dtype, device, requires_grad, order):
    """A tensor of input's shape filled with ``fill``, laid out in ``order``; row-major with input's
    own dtype and device (the common case) straight from the backend, without converting the shape,
    dtype and device."""
    if order is not None:
        dtype, device = _like(input, dtype, device)
        return laid_out(order, input.shape, lambda shape: _filled(shape, fill, dtype, device, False), requires_grad)
    if dtype is None and device is None:
        dev = input._device
        t = wrap(dev._backend.full(input._data.shape, fill, input._data.dtype, dev.index), dev)
        return t.requires_grad_(True) if requires_grad else t
    dtype, device = _like(input, dtype, device)
    return _filled(_size(input.shape), fill, dtype, device, requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Zeros with the shape of ``input`` and, unless given, its dtype and device."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(zeros_like, (input,), {
            "dtype": dtype, "device": device, "requires_grad": requires_grad, "memory_format": memory_format})
    return _filled_like(input, 0, dtype, device, requires_grad, like_order(input, memory_format, "zeros_like"))


def ones_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Ones with the shape of ``input`` and, unless given, its dtype and device."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(ones_like, (input,), {
            "dtype": dtype, "device": device, "requires_grad": requires_grad, "memory_format": memory_format})
    return _filled_like(input, 1, dtype, device, requires_grad, like_order(input, memory_format, "ones_like"))


def empty_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """A zero-filled tensor with the shape, dtype and device of ``input`` (torch leaves it uninitialized)."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(empty_like, (input,), {
            "dtype": dtype, "device": device, "requires_grad": requires_grad, "memory_format": memory_format})
    return _filled_like(input, 0, dtype, device, requires_grad, like_order(input, memory_format, "empty_like"))


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """``fill_value`` everywhere, with the shape of ``input`` and, unless given, its dtype and device."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(full_like, (input, fill_value), {
            "dtype": dtype, "device": device, "requires_grad": requires_grad, "memory_format": memory_format})
    dtype, device = _like(input, dtype, device)
    return laid_out(like_order(input, memory_format, "full_like"), input.shape,
                    lambda shape: full(shape, fill_value, dtype=dtype, device=device), requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False, out=None):
    """The values ``start, start + step, ...`` below ``end`` (``arange(n)``: 0 to n - 1); int64 unless one bound or the
    step is a float."""
    if out is not None:
        return create_into(out, arange, (start, end, step), dtype)
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"upper bound and larger bound inconsistent with step sign (start={start}, end={end}, "
                           f"step={step})")
    if dtype is None:
        floating = builtins.any(isinstance(v, builtins.float) for v in (start, end, step))
        dtype = _dtypes.get_default_dtype() if floating else _dtypes.int64
    dt = _dtypes.as_dtype(dtype)
    n = builtins.max(math.ceil((end - start) / step), 0)
    values = start + step * np.arange(n, dtype=np.float64 if dt.is_floating_point else np.int64)
    return _finish(values.astype(dt.np), _device(device), requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end``, both included."""
    if steps < 0:
        raise RuntimeError(f"linspace(): number of steps must be non-negative, got {steps}")
    dt = _dtypes.get_default_dtype() if dtype is None else _dtypes.as_dtype(dtype)
    return _finish(np.linspace(start, end, steps).astype(dt.np), _device(device), requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """``steps`` values ``base ** v`` for ``v`` evenly spaced from ``start`` to ``end``."""
    dt = _dtypes.get_default_dtype() if dtype is None else _dtypes.as_dtype(dtype)
    return _finish(np.logspace(start, end, steps, base=base).astype(dt.np), _device(device), requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """An ``n`` x ``m`` (square by default) matrix with ones on the diagonal and zeros elsewhere."""
    dt = _dtypes.get_default_dtype() if dtype is None else _dtypes.as_dtype(dtype)
    return _finish(np.eye(n, n if m is None else m, dtype=dt.np), _device(device), requires_grad)


def _new_method(fn):
    """Tensor.new_<fn>: ``fn`` with this tensor's dtype and device unless given, as a Tensor method."""
    def method(self, *args, dtype=None, device=None, requires_grad=False, **kwargs):
        return fn(*args, dtype=self.dtype if dtype is None else dtype,
                  device=self.device if device is None else device, requires_grad=requires_grad, **kwargs)
    method.__name__ = "new_" + fn.__name__
    method.__doc__ = (f"Like ``{fn.__name__}`` (size or data first), with this tensor's dtype and device unless "
                      "others are given.")
    return tensor_method(method)


new_zeros = _new_method(zeros)
new_ones = _new_method(ones)
new_empty = _new_method(empty)
new_full = _new_method(full)
new_tensor = _new_method(tensor)


def _legacy_new(args, dtype, device, strict=False):
    """What torch's legacy constructors build: sizes (ints or a Size) give an uninitialized tensor of
    that shape, one sequence or array a copy of it in ``dtype``, no argument an empty vector.
    ``strict`` (the typed constructors): a tensor of another dtype, or a lone number, is refused."""
    if len(args) == 1 and isinstance(args[0], Size):
        args = tuple(args[0])
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):  # NumPy ints are sizes too
        return empty(*(builtins.int(a) for a in args or (0,)), dtype=dtype, device=device)
    if len(args) != 1:
        raise TypeError(f"new(): expected sizes or one data argument, got {args!r}")
    data = args[0]
    if isinstance(data, str):
        raise TypeError("new(): invalid data type 'str'")
    if strict and isinstance(data, Tensor) and data.dtype is not dtype:
        raise TypeError(f"expected {dtype} (got {data.dtype}): a legacy {dtype} constructor does not convert tensors")
    if strict and not isinstance(data, Tensor) and _dtypes.scalar_kind(data) is not None:
        raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
    return tensor(data, dtype=dtype, device=device)


@tensor_method("new")
def _new(self, *args, device=None, size=None):
    """torch's legacy ``Tensor.new``, in this tensor's dtype (on its device unless ``device`` is given):
    ``x.new(2, 3)`` (or a Size, or ``size=``) an uninitialized tensor of that shape, ``x.new()`` an empty
    vector, ``x.new(data)`` a copy of a sequence, ``x.new(other)`` an alias of a tensor of the same dtype
    (any other dtype is refused, as a lone number is)."""
    if size is not None:
        if args:
            raise TypeError(f"new(): got sizes {args!r} and size={size!r}; give one of them")
        args = (Size(size),)
    device = self.device if device is None else device
    if len(args) == 1 and isinstance(args[0], Tensor) and args[0].dtype is self.dtype:
        return args[0].view(args[0].shape)
    return _legacy_new(args, self.dtype, device, strict=True)


@tensor_method("__init__")
def _init_tensor(self, *args, device=None, dtype=None):
    """``Tensor(data)``: a default-dtype copy of ``data``; ``Tensor(2, 3)`` or ``Tensor(Size([2, 3]))``:
    an uninitialized 2x3 tensor."""
    init_from(self, _legacy_new(args, dtype or _dtypes.get_default_dtype(), device))


class _LegacyTensorType(type):
    """The type of ``rlpipe.FloatTensor`` and its kin: calling one builds a plain Tensor of its dtype,
    and ``isinstance(x, rlpipe.FloatTensor)`` asks whether x is a float32 CPU tensor, as in torch."""

    def __call__(cls, *args, device=None, size=None):
        return _legacy_new(args if size is None else (Size(size),), cls.dtype, device, strict=True)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"


def _legacy_type(name, dtype):
    return _LegacyTensorType(name, (), {"dtype": dtype, "is_cuda": False, "__module__": "rlpipe",
                                        "__doc__": f"torch's legacy constructor of {dtype} CPU tensors."})


FloatTensor = _legacy_type("FloatTensor", _dtypes.float32)
DoubleTensor = _legacy_type("DoubleTensor", _dtypes.float64)
HalfTensor = _legacy_type("HalfTensor", _dtypes.float16)
BFloat16Tensor = _legacy_type("BFloat16Tensor", _dtypes.bfloat16)
LongTensor = _legacy_type("LongTensor", _dtypes.int64)
IntTensor = _legacy_type("IntTensor", _dtypes.int32)
ShortTensor = _legacy_type("ShortTensor", _dtypes.int16)
CharTensor = _legacy_type("CharTensor", _dtypes.int8)
ByteTensor = _legacy_type("ByteTensor", _dtypes.uint8)
BoolTensor = _legacy_type("BoolTensor", _dtypes.bool)
