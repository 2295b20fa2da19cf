"""Dtypes, devices and copies: the ``ToDevice`` Function and ``to``, ``type``, ``type_as``, ``cpu``,
``cuda``, ``float()``... (casts themselves are ``common._cast``), ``copy_``, ``fill_`` and ``zero_``.
"""
import builtins

import numpy as np

from .. import _dtypes, _memory_format as _mf
from .._device import device as _device_cls, resolve as _resolve_device
from .._tensor import Tensor, tensor_method
from ..autograd.grad_mode import state as _grad_state
from .base import Op
from .common import _LEGACY_TYPE_NAMES, _cast, _check_writable, _inplace, _scalar
from .shape import clone, expand


class ToDevice(Op):
    """Copies between devices; the caller sets the output tensor's device."""

    @staticmethod
    def forward(ctx, x, source, target):
        ctx.source = source
        return target._backend.asarray(x, index=target.index)

    @staticmethod
    def backward(ctx, g):
        return ctx.source._backend.asarray(g, index=ctx.source.index), None, None


def _to_device(x, dev):
    dev = _resolve_device(dev)
    if dev is x._device:
        return x
    if dev.type == "cuda" and not dev._backend.supports(x._data.dtype):
        raise TypeError(f"{x.dtype} is not supported on {dev} (CuPy has no such dtype)")
    out = ToDevice.apply(x, x._device, dev)
    out._device = dev
    return out


@tensor_method
def to(input, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other_tensor)``: self when nothing changes.
    With ``memory_format`` (``channels_last``...) the result is laid out in it; as in torch, a tensor
    already in that format by its strides stays itself. Copies between devices are synchronous;
    ``non_blocking`` is accepted and has no effect."""
    for a in args:
        if a is None:  # torch accepts (and ignores) a None dtype or device: to(None) is the tensor itself
            continue
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
    fmt = memory_format if memory_format is None else _mf.check(memory_format, "to")
    if fmt is not None and fmt is not _mf.preserve_format:
        if out is input and not copy and _mf.suggested(input.shape, input.stride()) is fmt:
            return input
        if out is input or not out.is_contiguous(memory_format=fmt):
            return clone(out, memory_format=fmt)
        return out
    if copy and out is input:
        out = clone(input)
    return out


def _dtype_method(dtype):
    def method(self, memory_format=None):
        return _cast(self, dtype)
    method.__name__ = dtype.name
    method.__doc__ = f"The tensor cast to {dtype.name} (itself when it already is); ``memory_format`` is ignored."
    return method


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
    """``input`` cast to ``other``'s dtype (itself when they already match)."""
    return _cast(input, other.dtype)


@tensor_method
def cpu(input, memory_format=None):
    """The tensor on the CPU (itself when it is there already); the copy is differentiable."""
    return _to_device(input, "cpu")


@tensor_method
def cuda(input, device=None, non_blocking=False, memory_format=None):
    """The tensor on a GPU (the current one, or ``device``: an index or a 'cuda:N' string); itself when it is there
    already."""
    if device is None:
        return _to_device(input, "cuda")
    return _to_device(input, device if not isinstance(device, builtins.int) else f"cuda:{device}")


@tensor_method
def fill_(input, value):
    """Writes ``value`` (a number or a 0-d tensor) into every element, in place."""
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
    return copy_(input, value)


@tensor_method
def zero_(input):
    """Writes 0 into every element, in place."""
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
    if not (_grad_state.grad and (input._requires_grad or isinstance(src, Tensor) and src._requires_grad)):
        _check_writable(input)
        input._data[...] = src._data if isinstance(src, Tensor) else _scalar(src)
        input._vc[0] += 1
        return input
    if not isinstance(src, Tensor):
        from rlpipe._creation import full
        src = full((), src, dtype=input.dtype, device=input._device)
    return _inplace(input, lambda old, s: expand(s, old.shape) + 0, src)


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
