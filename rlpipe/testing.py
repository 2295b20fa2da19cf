"""Test helpers: ``assert_close`` (torch.testing's), ``assert_allclose_td`` (tensordict's), and
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
"""
import contextlib
import logging
import unittest.mock
from collections.abc import Mapping, Sequence

import numpy as np

from . import _dtypes
from ._tensor import Tensor

__all__ = ["assert_allclose_td", "assert_close", "get_default_devices", "make_tc", "capture_log_records"]

_DEFAULT_TOLERANCES = {  # (rtol, atol), as torch.testing
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


def _default_tolerances(*dtypes):
    rtols, atols = zip(*(_DEFAULT_TOLERANCES.get(d.name, (0.0, 0.0)) for d in dtypes))
    return max(rtols), max(atols)


def _tolerances(rtol, atol, *dtypes):
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, "
                         f"but got no {'rtol' if rtol is None else 'atol'}.")
    if rtol is None:
        return _default_tolerances(*dtypes)
    return float(rtol), float(atol)


def _fail(message, msg):
    if callable(msg):
        message = msg(message)
    elif msg is not None:
        message = msg
    raise AssertionError(message)


def _is_td(obj):
    if isinstance(obj, Tensor):
        return False
    try:
        from rlpipe.tensordict import TensorDict
    except ImportError:  # pragma: no cover - the tensordict layer is part of rlpipe
        return False
    return isinstance(obj, TensorDict)


def _mismatch_message(actual, expected, rtol, atol, equal_nan, what="Tensor-likes"):
    """None if close, else torch.testing's message. ``actual``/``expected`` are NumPy arrays of the
    same shape (host copies); integer and bool data is compared exactly unless tolerances are given."""
    exact = rtol == 0 and atol == 0 and actual.dtype.kind in "biu"
    if exact:
        a = actual.astype(np.int64)
        e = expected.astype(np.int64)
        matches = a == e
    else:
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            matches = (a == e) | (np.abs(a - e) <= atol + rtol * np.abs(e))
            matches &= np.isfinite(e) | (a == e)  # inf only equals itself
            if equal_nan:
                matches |= np.isnan(a) & np.isnan(e)
    if bool(np.all(matches)):
        return None
    total = matches.size
    mismatched = int(total - np.count_nonzero(matches))
    flat_matches = matches.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        abs_diff = np.abs(a - e).reshape(-1)
        abs_diff = np.where(flat_matches, 0, abs_diff)
        rel_diff = (abs_diff / np.abs(e.reshape(-1))) if not exact else \
            abs_diff.astype(np.float64) / np.abs(e.reshape(-1)).astype(np.float64)
        rel_diff = np.where(flat_matches, 0, rel_diff)

    def greatest(diff):  # torch.max propagates NaN: the first NaN wins
        nan = np.isnan(diff) if diff.dtype.kind == "f" else np.zeros(diff.shape, bool)
        i = int(np.argmax(nan)) if nan.any() else int(np.argmax(diff))
        value = diff[i].item()
        return value, tuple(int(j) for j in np.unravel_index(i, actual.shape)) if actual.shape else ()

    max_abs, abs_idx = greatest(abs_diff)
    max_rel, rel_idx = greatest(rel_diff)
    if actual.size == 1 and what == "Scalars":
        lines = [f"{what} are not {'equal' if rtol == 0 and atol == 0 else 'close'}!", "",
                 f"Expected {e.reshape(-1)[0].item()} but got {a.reshape(-1)[0].item()}.",
                 f"Absolute difference: {max_abs}" + (f" (up to {atol} allowed)" if atol or rtol else ""),
                 f"Relative difference: {max_rel}" + (f" (up to {rtol} allowed)" if atol or rtol else "")]
        return "\n".join(lines)
    lines = [f"{what} are not {'equal' if rtol == 0 and atol == 0 else 'close'}!", "",
             f"Mismatched elements: {mismatched} / {total} ({mismatched / total:.1%})",
             f"Greatest absolute difference: {max_abs} at index {abs_idx}"
             + (f" (up to {atol} allowed)" if atol or rtol else ""),
             f"Greatest relative difference: {max_rel} at index {rel_idx}"
             + (f" (up to {rtol} allowed)" if atol or rtol else "")]
    return "\n".join(lines)


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg):
    if actual.shape != expected.shape:
        _fail(f"The values for attribute 'shape' do not match: {actual.shape} != {expected.shape}.", msg)
    if check_device and actual.device != expected.device:
        _fail(f"The values for attribute 'device' do not match: {actual.device} != {expected.device}.", msg)
    if check_dtype and actual.dtype is not expected.dtype:
        _fail(f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.", msg)
    rtol, atol = _tolerances(rtol, atol, actual.dtype, expected.dtype)
    message = _mismatch_message(actual.detach()._host(), expected.detach()._host(), rtol, atol, equal_nan)
    if message is not None:
        _fail(message, msg)


_NUMBER_DTYPES = {bool: _dtypes.bool, int: _dtypes.int64, float: _dtypes.float64}


def assert_close(actual, expected, rtol=None, atol=None, *, equal_nan=False, check_device=True, check_dtype=True,
                 msg=None):
    """Asserts that ``actual`` and ``expected`` are close, as ``torch.testing.assert_close``.

    Tensors must have the same shape, device and dtype (unless ``check_device``/``check_dtype`` is
    False), and every element must satisfy ``|actual - expected| <= atol + rtol * |expected|``
    (NaNs equal each other only with ``equal_nan``). ``rtol`` and ``atol`` go together; omitted, they
    are the defaults of the dtypes (see the module docstring). Python numbers (compared as float64 /
    int64 / bool), NumPy arrays, sequences and mappings (compared item by item) and TensorDicts are
    accepted too. ``msg`` replaces the message (a callable gets the generated one and returns it).
    """
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        return _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg)
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


class _KeysMismatchError(AssertionError, KeyError):
    """Keys differ: an AssertionError, and a KeyError as tensordict raises for it."""
    __str__ = BaseException.__str__


def _key_order(key):
    return (key,) if isinstance(key, str) else key


def assert_allclose_td(actual, expected, rtol=None, atol=None, equal_nan=True, msg="", *, check_batch_size=True):
    """Asserts that two TensorDicts hold the same keys (nested included), the same batch size, and
    close values under every key (``assert_close`` with these tolerances; defaults by dtype).
    ``check_batch_size=False`` skips the batch sizes (tensordict's own ``assert_allclose_td`` does).

    Raises ``AssertionError`` naming the differing keys (the error is also a ``KeyError``, which is what
    tensordict raises for it), or the batch sizes, or the first key whose values differ along with the
    greatest difference; ``msg`` is appended to the message. Returns True.
    """
    if not _is_td(actual) or not _is_td(expected):
        raise TypeError("assert_allclose inputs must be of TensorDict type, got "
                        f"{type(actual).__name__} and {type(expected).__name__}")
    suffix = f"\t{msg}" if msg else ""
    keys_a = set(actual.keys(include_nested=True, leaves_only=True))
    keys_e = set(expected.keys(include_nested=True, leaves_only=True))
    if keys_a != keys_e:
        only_a = sorted(keys_a - keys_e, key=_key_order)
        only_e = sorted(keys_e - keys_a, key=_key_order)
        parts = []
        if only_a:
            parts.append(f"only in actual: {', '.join(map(repr, only_a))}")
        if only_e:
            parts.append(f"only in expected: {', '.join(map(repr, only_e))}")
        differing = ", ".join(map(repr, sorted(set(only_a) | set(only_e), key=_key_order)))
        raise _KeysMismatchError(f"actual and expected tensordict keys mismatch, keys {{{differing}}} appear in one "
                                 f"but not the other ({'; '.join(parts)}).{suffix}")
    if not check_batch_size:
        pass
    elif tuple(actual.batch_size) != tuple(expected.batch_size):
        raise AssertionError(f"batch_size mismatch: actual {actual.batch_size} != expected "
                             f"{expected.batch_size}.{suffix}")
    nested_keys = set(actual.keys(include_nested=True)) - keys_a if check_batch_size else ()
    for key in sorted(nested_keys, key=_key_order):  # nested TensorDicts
        sub_a, sub_e = actual.get(key), expected.get(key)
        if _is_td(sub_a) and _is_td(sub_e) and tuple(sub_a.batch_size) != tuple(sub_e.batch_size):
            raise AssertionError(f"batch_size mismatch for {key!r}: actual {sub_a.batch_size} != expected "
                                 f"{sub_e.batch_size}.{suffix}")
    for key in sorted(keys_a, key=_key_order):
        a, e = actual.get(key), expected.get(key)
        if not isinstance(a, Tensor) or not isinstance(e, Tensor):
            if isinstance(a, Tensor) != isinstance(e, Tensor):
                raise AssertionError(f"key {key!r}: a {type(a).__name__} in actual but a {type(e).__name__} "
                                     f"in expected.{suffix}")
            continue

        def describe(generated, key=key, a=a, e=e):
            head = f"key {key!r} does not match"
            if a.shape == e.shape and a.dtype is e.dtype:
                diff = a.detach()._host().astype(np.float64) - e.detach()._host().astype(np.float64)
                with np.errstate(invalid="ignore", over="ignore"):
                    mse = float(np.sqrt(np.mean(diff ** 2))) if diff.size else 0.0
                head += f", got mse = {mse:4.4f}"
            return f"{head}:\n{generated}{suffix}"

        assert_close(a, e, rtol, atol, equal_nan=equal_nan, msg=describe)
    return True


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
    from rlpipe.tensordict import tensorclass  # an ImportError until rlpipe.tensordict offers tensorclass

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
