"""``make_tensor``: torch.testing's random test tensor of a given shape, dtype and device."""
import math
import warnings
from collections.abc import Sequence

from .. import _dtypes
from .._creation import empty
from .._dtypes import finfo, iinfo
from ..random import randint

_INTEGRAL = (_dtypes.uint8, _dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64)
_FLOATING = (_dtypes.float16, _dtypes.bfloat16, _dtypes.float32, _dtypes.float64)


def _dtype_range(dtype):
    """(lowest inclusive, highest exclusive, default low, default high) for ``dtype``, as torch's table."""
    if dtype is _dtypes.bool:
        return 0, 2, 0, 2
    if dtype in _INTEGRAL:
        info = iinfo(dtype)
        return info.min, info.max + (dtype is not _dtypes.int64), -9, 10
    if dtype in _FLOATING:
        info = finfo(dtype)
        return info.min, info.max, -9, 9
    raise TypeError(f"The requested dtype '{dtype}' is not supported by rlpipe.testing.make_tensor(): "
                    f"expected one of bool, {', '.join(d.name for d in _INTEGRAL + _FLOATING)}")


def _low_high(low, high, dtype):
    """The sampling interval [low, high) after torch's defaults, checks and clamping to the dtype."""
    lowest, highest, default_low, default_high = _dtype_range(dtype)
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and dtype in _FLOATING:
        warnings.warn("Passing `low==high` to `make_tensor` for floating types is deprecated (torch 2.1); "
                      "use `full(...)` instead.", FutureWarning, stacklevel=3)
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), "
                         f"but {dtype} only supports [{lowest}, {highest})")
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    if dtype in _FLOATING:
        return low, high
    return math.ceil(low), math.ceil(high)


def _sample(shape, dtype, device, low, high):
    if dtype is _dtypes.bool or dtype in _INTEGRAL:
        return randint(low, high, shape, device=device, dtype=dtype)
    result = empty(shape, device=device, dtype=dtype)
    if high - low >= finfo(dtype).max:  # the width itself would overflow: draw half of it, then double
        return result.uniform_(low / 2, high / 2).mul_(2)
    return result.uniform_(low, high)


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` filled with values drawn uniformly from ``[low, high)``, as
    ``torch.testing.make_tensor``.

    The default interval is [0, 2) for bool, [-9, 10) for signed and [0, 10) for unsigned integers, and
    [-9, 9) for floating dtypes; bounds outside the dtype's finite range are clamped to it (integer bounds
    rounded up). ``noncontiguous=True`` returns a strided view (every other element of a tensor twice as
    wide) when the tensor has more than one element; ``exclude_zero=True`` replaces zeros by 1 (bool and
    integers) or the dtype's smallest normal number. ``memory_format`` is accepted, exclusive with
    ``noncontiguous``; rlpipe keeps every layout row-major, so it leaves the result contiguous. rlpipe has no
    complex or 8-bit float dtypes: those are not accepted here.
    """
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError("The parameters `noncontiguous` and `memory_format` are mutually exclusive, but got "
                         f"noncontiguous={noncontiguous} and memory_format={memory_format}")
    if requires_grad and dtype not in _FLOATING:
        raise ValueError("`requires_grad=True` is not supported for boolean and integral dtypes, "
                         f"but got dtype={dtype}")
    low, high = _low_high(low, high, dtype)
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])
    result = _sample(shape, dtype, device, low, high)
    if noncontiguous:
        result = result[..., 1::2]
    if exclude_zero:
            result[result == 0] = finfo(dtype).tiny if dtype in _FLOATING else 1
    if dtype in _FLOATING:
        result.requires_grad = requires_grad
    return result
