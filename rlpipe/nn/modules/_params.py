"""Parameter helpers shared by the layer modules."""
import math

from ..._creation import empty
from .. import init
from ..parameter import Parameter


def register_optional(module, name, present, shape, device=None, dtype=None):
    """Registers an uninitialized parameter of ``shape`` under ``name``, or None when absent
    (``Linear(bias=False)`` still has a ``bias`` attribute)."""
    if present:
        setattr(module, name, Parameter(empty(shape, device=device, dtype=dtype)))
    else:
        module.register_parameter(name, None)


def reset_affine(weight, bias):
    """The normalization layers' affine parameters set back to identity: weight ones, bias (when present)
    zeros."""
    init.ones_(weight)
    if bias is not None:
        init.zeros_(bias)


def reset_like_linear(weight, bias):
    """torch's default initialization of Linear and Conv layers: Kaiming-uniform weights
    (a=sqrt(5)), biases uniform in +-1/sqrt(fan_in)."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


def inference_arrays(module, dtype, device):
    """(weight, bias or None) arrays of a layer for its inference step on ``dtype`` inputs on ``device``,
    or None where the step must not run: a parameter replaced by a plain attribute, or one of another
    dtype or device (the usual path then reports the mismatch)."""
    params = module._parameters
    weight, bias = params.get("weight"), params.get("bias", params)  # (params: no bias entry at all)
    if weight is None or bias is params:
        return None
    for p in (weight, bias):
        if p is not None and (p._data.dtype != dtype or p._device is not device):
            return None
    return weight._data, None if bias is None else bias._data
