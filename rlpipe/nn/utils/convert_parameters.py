"""Flattening parameters into one vector and writing one back, as torch.nn.utils.convert_parameters."""
from ... import primitives as ops
from ..._tensor import Tensor


def _check_param_device(param, old_device):
    """All parameters must share one device: the first one's, returned for the next check."""
    if old_device is not None and param.device is not old_device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return param.device


def _typename(obj):
    """torch.typename: the qualified type name of a non-tensor object."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if qualname is None:
        module, qualname = obj.__class__.__module__ or "", obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one 1-D tensor (differentiable)."""
    device = None
    pieces = []
    for param in parameters:
        device = _check_param_device(param, device)
        pieces.append(ops.reshape(param, -1))
    return ops.cat(pieces)


def vector_to_parameters(vec, parameters):
    """Points each parameter's data at its consecutive slice of ``vec`` (the inverse of
    ``parameters_to_vector``)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected rlpipe.Tensor, but got: {_typename(vec)}")
    device = None
    start = 0
    for param in parameters:
        device = _check_param_device(param, device)
        n = param.numel()
        param.data = ops.view_as(vec[start:start + n], param).data
        start += n
