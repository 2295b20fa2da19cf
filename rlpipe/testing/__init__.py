"""Test helpers: ``assert_close`` and ``make_tensor`` (torch.testing's), ``assert_allclose_td`` (tensordict's), and
torchrl.testing's ``get_default_devices``, ``make_tc`` and ``capture_log_records`` (torch.testing
and torchrl.testing both map here).

``assert_close(actual, expected)`` checks shape, device and dtype, then ``|actual - expected| <=
atol + rtol * |expected|`` elementwise, with torch.testing's default tolerances for the dtype when
``rtol``/``atol`` are omitted:

=============  ========  ======
dtype          rtol      atol
=============  ========  ======
float16        1e-3      1e-5
bfloat16       1.6e-2    1e-5
float32        1.3e-6    1e-5
float64        1e-7      1e-7
ints, bool     0         0
=============  ========  ======

A failure is an ``AssertionError`` with torch's message ("Tensor-likes are not close!", the count
of mismatched elements and the greatest absolute and relative differences with their indices).

``rlpipe.testing._internal`` holds the parts of torch's private test helpers
(``torch.testing._internal.common_utils`` and friends) that PyTorch's own test files import, so that
those files run against rlpipe through an import alias.
"""
import contextlib
import logging
import unittest.mock
from collections.abc import Mapping, Sequence

import numpy as np

from .. import _dtypes
from .._closeness import _compare_tensors, _fail, _mismatch_message, _tolerances
from .._tensor import Tensor
from ._creation import make_tensor

__all__ = ["assert_allclose_td", "assert_close", "make_tensor", "get_default_devices", "make_tc", "capture_log_records"]

def _is_td(obj):
    if isinstance(obj, Tensor):
        return False
    try:
        from rlpipe.tensordict import TensorDict
    except ImportError:  # pragma: no cover - the tensordict layer is part of rlpipe
        return False
    return isinstance(obj, TensorDict)


_NUMBER_DTYPES = {bool: _dtypes.bool, int: _dtypes.int64, float: _dtypes.float64}


def assert_close(actual, expected, rtol=None, atol=None, *, equal_nan=False, check_device=True, check_dtype=True,
                 msg=None):
    """Asserts that ``actual`` and ``expected`` are close, as ``torch.testing.assert_close``.

    Tensors must have the same shape, device and dtype (unless ``check_device``/``check_dtype`` is
    False), and every element must satisfy ``|actual - expected| <= atol + rtol * |expected|``
    (NaNs equal each other only with ``equal_nan``). ``rtol`` and ``atol`` go together; omitted, they
    are the defaults of the dtypes (see the module docstring). Python numbers (compared as float64 /
    int64 / bool), NumPy arrays, None (equal only to None), sequences and mappings (compared item by
    item) and TensorDicts are accepted too. ``msg`` replaces the message (a callable gets the generated
    one and returns it).
    """
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        return _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg)
    if actual is None or expected is None:  # torch: None matches only None
        if actual is not expected:
            _fail(f"None mismatch: {actual} is not {expected}", msg)
        return None
    if _is_td(actual) and _is_td(expected):
        return assert_allclose_td(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                                  msg=msg if isinstance(msg, str) else "")
    number = (bool, int, float, np.bool_, np.integer, np.floating)
    if isinstance(actual, number) and isinstance(expected, number):
        ta, te = (_NUMBER_DTYPES[bool if isinstance(x, (bool, np.bool_)) else
                                 int if isinstance(x, (int, np.integer)) else float] for x in (actual, expected))
        if check_dtype and type(actual) is not type(expected) and not (
                isinstance(actual, np.generic) or isinstance(expected, np.generic)):
            _fail(f"The values for attribute 'dtype' do not match: {type(actual).__name__} != "
                  f"{type(expected).__name__}.", msg)
        rtol, atol = _tolerances(rtol, atol, ta, te)
        message = _mismatch_message(np.asarray(actual), np.asarray(expected), rtol, atol, equal_nan, "Scalars")
        if message is not None:
            _fail(message, msg)
        return None
    if isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray):
        from rlpipe._creation import as_tensor
        return _compare_tensors(as_tensor(actual), as_tensor(expected), rtol, atol, equal_nan, check_device,
                                check_dtype, msg)
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            _fail(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                  f"{sorted(map(str, set(expected) - set(actual)))}\nExtra keys in the actual mapping: "
                  f"{sorted(map(str, set(actual) - set(expected)))}", msg)
        for key in expected:
            _nested(assert_close, actual[key], expected[key], f"item [{key!r}]", rtol, atol, equal_nan,
                    check_device, check_dtype, msg)
        return None
    if isinstance(actual, Sequence) and isinstance(expected, Sequence) and not isinstance(actual, str) \
            and not isinstance(expected, str):
        if len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", msg)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _nested(assert_close, a, e, f"item [{i}]", rtol, atol, equal_nan, check_device, check_dtype, msg)
        return None
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.")


def _nested(fn, a, e, where, rtol, atol, equal_nan, check_device, check_dtype, msg):
    try:
        fn(a, e, rtol, atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype, msg=msg)
    except AssertionError as err:
        if msg is not None:
            raise
        raise AssertionError(f"{err}\n\nThe failure occurred for {where}.") from None


def assert_allclose_td(actual, expected, rtol=None, atol=None, equal_nan=True, msg="", *, check_batch_size=True):
    """Asserts that two TensorDicts hold the same keys (nested included), the same batch size, and
    close values under every key: ``rlpipe.tensordict.utils.assert_allclose_td``, batch sizes compared
    unless ``check_batch_size=False``. Returns True."""
    from rlpipe.tensordict.utils import _assert_allclose_td  # this module sits above the tensordict layer
    return _assert_allclose_td(actual, expected, rtol, atol, equal_nan, msg, check_batch_size)


# ---- torchrl.testing ------------------------------------------------------------------------------

def get_default_devices():
    """torchrl.testing's: ``[cpu]`` without a GPU, ``[cuda:0]`` with one, every device with more."""
    from rlpipe import cuda
    from rlpipe._device import device
    count = cuda.device_count()
    if count == 0:
        return [device("cpu")]
    if count == 1:
        return [device("cuda:0")]
    return [device("cpu")] + [device(f"cuda:{i}") for i in range(count)]


def make_tc(td):
    """A tensorclass with one Tensor field per key of ``td`` (torchrl.testing's)."""
    from rlpipe.tensordict import tensorclass

    fields = type("MyClass", (), {"__annotations__": {key: Tensor for key in td.keys()}})
    return tensorclass(fields)


def capture_log_records(records, logger_qname, record_name):
    """Appends to ``records`` every log record whose name contains ``record_name`` emitted through
    the handlers of the logger ``logger_qname`` (torchrl.testing's)."""
    if not isinstance(records, list):
        raise TypeError(f"capture_log_records: records must be a list, got {type(records).__name__}")

    def wrapped(old_emit):
        def emit(record):
            old_emit(record)
            if record_name in record.name:
                records.append(record)
        return emit

    for handler in logging.getLogger(logger_qname).handlers:
        contextlib.ExitStack().enter_context(unittest.mock.patch.object(handler, "emit", wrapped(handler.emit)))
