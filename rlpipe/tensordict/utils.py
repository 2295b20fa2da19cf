"""tensordict.utils' public names and the few private helpers users and tensordict's tests reach for.

``set_lazy_legacy`` is a switch for a behaviour rlpipe does not have (lazy shape ops): it records the
mode, works as a context manager and decorator like tensordict's, and changes nothing else.
``set_list_to_stack`` decides how a list of non-numbers is stored (a NonTensorStack, the default, or one
NonTensorData); ``set_capture_non_tensor_stack(True)`` makes a stack of equal NonTensorData one
NonTensorData.
"""
import concurrent.futures
import functools
import logging
import os

import numpy as np

from .._tensor import Size, Tensor
from .._closeness import _compare_tensors
from .base import TensorDictBase, is_tensor_collection
from .keys import unravel_key, unravel_key_list, unravel_key_to_tuple

__all__ = ["assert_allclose_td", "assert_close", "convert_ellipsis_to_idx", "is_non_tensor", "is_tensor_collection",
           "is_tensorclass",
           "lazy_legacy", "list_to_stack", "capture_non_tensor_stack", "set_capture_non_tensor_stack",
           "print_directory_tree",
           "set_lazy_legacy", "set_list_to_stack", "unravel_key", "unravel_key_list", "unravel_key_to_tuple",
           "TensorDictFuture", "expand_right"]

_LOGGER = logging.getLogger("rlpipe.tensordict")
_LOCK_ERROR = ("Cannot modify locked TensorDict. For in-place modification, consider using the `set_()` method and "
               "make sure the key is present.")

class TensorDictFuture:
    """tensordict's future of a TensorDict operation (``memmap``/``consolidate`` with
    ``return_early=True``): ``result()`` waits for ``futures`` and returns ``resulting_td`` (rlpipe's
    own operations finish before returning, so their futures are already done)."""

    def __init__(self, futures, resulting_td):
        self.futures = futures
        self.resulting_td = resulting_td

    def result(self):
        """Waits for the futures and returns the resulting TensorDict."""
        concurrent.futures.wait(self.futures)
        return self.resulting_td

    def done(self):
        """Whether every future has finished."""
        return all(f.done() for f in self.futures)


class _Switch:
    """A process-wide flag set for a ``with`` block or around a decorated function, or at once by
    ``.set()``; subclasses give the flag a name and a default."""
    _state = None

    def __init__(self, mode):
        self.mode = mode

    def set(self):
        type(self)._state = self.mode

    def __enter__(self):
        self._prev = type(self)._state
        self.set()
        return self

    def __exit__(self, *exc):
        type(self)._state = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def run_in_mode(*args, **kwargs):
            with type(self)(self.mode):
                return fn(*args, **kwargs)
        return run_in_mode


class set_lazy_legacy(_Switch):
    """tensordict's switch for the legacy lazy ops (lazy stack, permute and friends returning views).
    rlpipe's ops are always dense, so the mode is recorded and read by ``lazy_legacy`` only."""


class set_list_to_stack(_Switch):
    """tensordict's switch for storing a list of non-numbers as a NonTensorStack (True, the default)
    rather than as one NonTensorData."""


class set_capture_non_tensor_stack(_Switch):
    """tensordict's switch for stacking equal NonTensorData: True gives one NonTensorData, False (the
    default) a NonTensorStack."""


def _read(switch, allow_none, default):
    state = switch._state
    return state if state is not None or allow_none else default


def lazy_legacy(allow_none=False):
    """The lazy-legacy mode (False unless set; None when unset and ``allow_none``)."""
    return _read(set_lazy_legacy, allow_none, False)


def list_to_stack(allow_none=False):
    """The list-to-stack mode (True unless set, as in tensordict 0.14)."""
    return _read(set_list_to_stack, allow_none, True)


def capture_non_tensor_stack(allow_none=False):
    """The capture-non-tensor-stack mode (False unless set)."""
    return _read(set_capture_non_tensor_stack, allow_none, False)


def assert_allclose_td(actual, expected, rtol=None, atol=None, equal_nan=True, intersection=False, msg=""):
    """tensordict's check that two TensorDicts hold the same keys and close values (returns True).
    As in tensordict, batch sizes are not compared (``rlpipe.testing.assert_allclose_td`` compares them
    too); leaves of different shapes still fail. ``intersection=True`` compares the keys both hold only."""
    if intersection and _is_td(actual) and _is_td(expected):
        shared = set(actual.keys(True, True)) & set(expected.keys(True, True))
        actual, expected = actual.select(*shared), expected.select(*shared)
    return _assert_allclose_td(actual, expected, rtol, atol, equal_nan, msg, False)


assert_close = assert_allclose_td  # tensordict 0.14's newer name


_unravel_key_to_tuple = unravel_key_to_tuple  # tensordict's private name, which torchrl's code imports


def expand_right(tensor, shape):
    """``tensor`` with trailing size-1 dims added up to ``len(shape)`` dims, then expanded to ``shape``
    (its dims line up with the first ones of ``shape``)."""
    while tensor.ndim < len(shape):
        tensor = tensor.unsqueeze(-1)
    return tensor.expand(shape)


def is_tensorclass(obj):
    """Whether ``obj`` (an instance or a class) is a tensorclass (``@tensorclass`` or ``TensorClass``'s)."""
    cls = obj if isinstance(obj, type) else type(obj)
    return getattr(cls, "_is_tensorclass", False) is True


def is_non_tensor(data):
    """Whether ``data`` is non-tensor data (a NonTensorData or NonTensorStack, or their class)."""
    return bool(getattr(data, "_is_non_tensor", False))


def _as_numpy_index(index):
    if isinstance(index, tuple):
        return tuple(_as_numpy_index(item) for item in index)
    if isinstance(index, Tensor):
        return np.asarray(index.tolist())
    if isinstance(index, range):
        return list(index)
    return index


def _getitem_batch_size(batch_size, index):
    """The batch size that indexing a batch of shape ``batch_size`` with ``index`` gives (NumPy's
    indexing rules, which torch's follow)."""
    return Size(np.broadcast_to(np.empty((), np.int8), tuple(batch_size))[_as_numpy_index(index)].shape)


def convert_ellipsis_to_idx(idx, batch_size):
    """``idx`` with its Ellipsis replaced by as many full slices as it stands for in ``batch_size``."""
    items = idx if isinstance(idx, tuple) else (idx,)
    if sum(1 for item in items if item is Ellipsis) > 1:
        raise RuntimeError("An index can only have one ellipsis at most.")
    dims = sum(1 for item in items if item is not None and item is not Ellipsis)
    out = []
    for item in items:
        if item is Ellipsis:
            out.extend([slice(None)] * (len(batch_size) - dims))
        else:
            out.append(item)
    return tuple(out)


def _check_recursive_properties(td):
    """Checks that every nested TensorDict of ``td`` shares its lock state and batch dims prefix;
    returns True, or raises AssertionError naming the key."""
    for key, value in td.items(include_nested=True):
        if isinstance(value, TensorDictBase):
            if value.is_locked != td.is_locked:
                raise AssertionError(f"lock state of {key!r} is {value.is_locked}, its root's is {td.is_locked}")
            if tuple(value.batch_size[:td.batch_dims]) != tuple(td.batch_size):
                raise AssertionError(f"batch size of {key!r} is {value.batch_size}, not led by {td.batch_size}")
    return True


def _is_td(obj):
    return isinstance(obj, TensorDictBase)


class _KeysMismatchError(AssertionError, KeyError):
    """Keys differ: an AssertionError, and a KeyError as tensordict raises for it."""
    __str__ = BaseException.__str__


def _key_order(key):
    return (key,) if isinstance(key, str) else key


def _assert_allclose_td(actual, expected, rtol, atol, equal_nan, msg, check_batch_size):
    """Asserts that two TensorDicts hold the same keys (nested included), the same batch size, and
    close values under every key (``assert_close`` with these tolerances; defaults by dtype).
    ``check_batch_size=False`` skips the batch sizes (tensordict's own ``assert_allclose_td`` does;
    ``rlpipe.testing.assert_allclose_td`` compares them).

    Raises ``AssertionError`` naming the differing keys (the error is also a ``KeyError``, which is what
    tensordict raises for it), or the batch sizes, or the first key whose values differ along with the
    greatest difference; ``msg`` is appended to the message. Returns True.
    """
    if not _is_td(actual) or not _is_td(expected):
        raise TypeError("assert_allclose inputs must be of TensorDict type, got "
                        f"{type(actual).__name__} and {type(expected).__name__}")
    lazy = TensorDictBase._lazy_type
    if isinstance(actual, lazy) and isinstance(expected, lazy) and actual.stack_dim == expected.stack_dim \
            and len(actual.tensordicts) == len(expected.tensordicts):  # pair by pair: entries may differ in shape
        for a, e in zip(actual.tensordicts, expected.tensordicts):
            _assert_allclose_td(a, e, rtol, atol, equal_nan, msg, check_batch_size)
        return True
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

        _compare_tensors(a, e, rtol, atol, equal_nan, True, True, describe)
    return True


def print_directory_tree(path, indent="", display_metadata=True):
    """Logs (logger ``rlpipe.tensordict``, level INFO) and returns the tree of files under ``path``,
    a directory per line ending in ``/``, nested names indented by four spaces; with
    ``display_metadata``, a first line gives the total size, as tensordict's helper."""
    lines = []
    if display_metadata:
        lines.append(f"Directory size: {_human_size(_tree_size(path))}")
    lines.extend(_tree_lines(str(path), indent))
    for line in lines:
        _LOGGER.info(line)
    return "\n".join(lines)


def _tree_lines(path, indent):
    if not os.path.isdir(path):
        return [indent + os.path.basename(path)]
    lines = [indent + os.path.basename(path) + "/"]
    for item in sorted(os.listdir(path)):
        lines.extend(_tree_lines(os.path.join(path, item), indent + "    "))
    return lines


def _tree_size(path):
    """The bytes of every file under ``path``."""
    return sum(os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(path) for name in names)


def _human_size(size):
    """``size`` bytes as "1.50 KB" and the like."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024.0:
            return f"{size:.2f} {unit}"
        size /= 1024.0
    return f"{size:.2f} TB"
