"""The comparison behind ``TestCase.assertEqual`` (torch.testing._internal.common_utils'): tensors, NumPy
arrays, numbers, sequences, mappings and plain objects, with torch's default tolerances by dtype and its
failure messages."""
import enum
from collections.abc import Mapping, Sequence

import numpy as np

from ... import _dtypes
from ..._closeness import _mismatch_message, _tolerances
from ..._creation import as_tensor
from ..._tensor import Tensor

# a Python number compared with a number or a one-element tensor takes these dtypes' tolerances (torch's
# RelaxedNumberPair: a float is compared as float32)
_NUMBER_DTYPES = {int: _dtypes.int64, float: _dtypes.float32}
_NUMBERS = (bool, int, float, np.bool_, np.integer, np.floating, enum.Enum)


class _Mismatch(Exception):
    """A failed comparison deep inside nested containers: its error type and message, before the path
    to the item and the caller's ``msg`` are added."""

    def __init__(self, message, error=AssertionError):
        super().__init__(message)
        self.message, self.error, self.path = message, error, ""


def _fail(message, error=AssertionError):
    raise _Mismatch(message, error)


def _is_number(x):
    return isinstance(x, _NUMBERS)


def _number_of(x):
    """A Python bool, int or float from a number or a one-element tensor or array."""
    if isinstance(x, (Tensor, np.ndarray)):
        numel = x.numel() if isinstance(x, Tensor) else x.size
        if numel != 1:
            _fail(f"Only single element tensor-likes can be compared against a number. Got {numel} elements "
                  "instead.", ValueError)
        x = x.item()
    if isinstance(x, enum.Enum):
        return int(x.value)
    if isinstance(x, np.generic):
        return x.item()
    return x


def _compare_numbers(x, y, rtol, atol, equal_nan, overrides):
    if isinstance(x, (bool, np.bool_)) and isinstance(y, (bool, np.bool_)):
        if bool(x) != bool(y):
            _fail(f"Booleans mismatch: {x} is not {y}")
        return
    x, y = int(x) if isinstance(x, bool) else x, int(y) if isinstance(y, bool) else y
    rtol, atol = _tolerances(rtol, atol, *(_NUMBER_DTYPES[float if isinstance(v, float) else int] for v in (x, y)))
    rtol, atol = max(rtol, overrides[0]), max(atol, overrides[1])
    message = _mismatch_message(np.asarray(x), np.asarray(y), rtol, atol, equal_nan, "Scalars")
    if message is not None:
        _fail(message)


def _compare_tensors(x, y, rtol, atol, equal_nan, exact_dtype, exact_device, overrides):
    if x.shape != y.shape:
        _fail(f"The values for attribute 'shape' do not match: {x.shape} != {y.shape}.")
    if exact_device and x.device != y.device:
        _fail(f"The values for attribute 'device' do not match: {x.device} != {y.device}.")
    if exact_dtype and x.dtype is not y.dtype:
        _fail(f"The values for attribute 'dtype' do not match: {x.dtype} != {y.dtype}.")
    rtol, atol = _tolerances(rtol, atol, x.dtype, y.dtype)
    rtol, atol = max(rtol, overrides[0]), max(atol, overrides[1])
    message = _mismatch_message(x.detach()._host(), y.detach()._host(), rtol, atol, equal_nan)
    if message is not None:
        _fail(message)


def _as_tensor_like(x, other):
    """``x`` as a tensor: a NumPy array as is, a sequence compared with a tensor in that tensor's dtype."""
    if isinstance(x, np.ndarray):
        return as_tensor(x)
    if isinstance(x, Sequence) and isinstance(other, Tensor):
        return as_tensor(x, dtype=other.dtype, device=other.device)
    return x


def _compare(x, y, options):
    """Raises _Mismatch when ``x`` and ``y`` differ; ``options`` holds assert_equal's keywords."""
    if x is None or y is None:
        if x is not y:
            _fail(f"None mismatch: {x} is not {y}")
        return
    if isinstance(x, (Tensor, np.ndarray)) or isinstance(y, (Tensor, np.ndarray)):
        x, y = _as_tensor_like(x, y), _as_tensor_like(y, x)
    tolerances = options["rtol"], options["atol"], options["equal_nan"], options["overrides"]
    if (_is_number(x) and isinstance(y, (Tensor, *_NUMBERS))) or (_is_number(y) and isinstance(x, Tensor)):
        return _compare_numbers(_number_of(x), _number_of(y), *tolerances)
    if isinstance(x, Tensor) and isinstance(y, Tensor):
        return _compare_tensors(x, y, *tolerances[:3], options["exact_dtype"], options["exact_device"], tolerances[3])
    if isinstance(x, str) or isinstance(y, str):
        return _compare_objects(x, y)
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        if set(x) != set(y):
            _fail(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                  f"{sorted(map(str, set(y) - set(x)))}\nExtra keys in the actual mapping: "
                  f"{sorted(map(str, set(x) - set(y)))}")
        return _compare_items(((key, x[key], y[key]) for key in y), options)
    if _is_sequence(x) and _is_sequence(y):
        if len(x) != len(y):
            _fail(f"The length of the sequences mismatch: {len(x)} != {len(y)}")
        return _compare_items(((i, a, b) for i, (a, b) in enumerate(zip(x, y))), options)
    _compare_objects(x, y)


def _compare_items(items, options):
    """Compares (key, x item, y item) triples, prefixing the path of a failure with ``[key]``."""
    for key, a, b in items:
        try:
            _compare(a, b, options)
        except _Mismatch as mismatch:
            mismatch.path = f"[{key!r}]{mismatch.path}" if not isinstance(key, int) else f"[{key}]{mismatch.path}"
            raise


def _compare_objects(x, y):
    if not x == y:
        _fail(f"{x!r} != {y!r}")


def _is_sequence(x):
    """A sequence to compare item by item: a list, tuple or Size, and torch's Sequential, ModuleList and
    ParameterList (those define ``__len__`` and ``__getitem__`` over their items)."""
    if isinstance(x, Sequence):
        return True
    from rlpipe.nn import ModuleList, ParameterList, Sequential
    return isinstance(x, (Sequential, ModuleList, ParameterList))


def assert_equal(x, y, *, rtol=None, atol=None, equal_nan=True, exact_dtype=True, exact_device=False,
                 overrides=(0.0, 0.0), msg=None):
    """Compares ``x`` and ``y`` as torch's ``TestCase.assertEqual``; ``overrides`` are the least (rtol,
    atol) (``precisionOverride``/``toleranceOverride``). Raises AssertionError (ValueError for bad
    tolerances or a many-element tensor against a number) with torch's message, the path of a failing
    nested item, and ``msg`` added on its own line (a callable ``msg`` gets the message and returns the
    one to raise)."""
    options = {"rtol": rtol, "atol": atol, "equal_nan": equal_nan, "exact_dtype": exact_dtype,
               "exact_device": exact_device, "overrides": overrides}
    try:
        _compare(x, y, options)
    except _Mismatch as mismatch:
        message = mismatch.message
        if mismatch.path:
            message += f"\n\nThe failure occurred for item {mismatch.path}"
        if callable(msg):
            message = msg(message)
        elif msg is not None:
            message = f"{message}\n{msg}"
        raise mismatch.error(message) from None
