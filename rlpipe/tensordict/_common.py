"""What the TensorDict modules share: the sentinels, the process-wide switches (``get``'s default for a
missing key, whether any TensorDict has been named yet), batch-size parsing."""
import operator
import os

import numpy as np

from .._tensor import Size, Tensor



_NO_DEFAULT = object()


_MASK_DTYPES = ("bool", "uint8")  # index dtypes torch reads as a mask (uint8 with a deprecation warning)


_INT_INDEX_CHARS = frozenset("bhilqpHILQP")  # NumPy's integer type codes but uint8's ("B"): row indices


_RAISE = object()  # get(key, _RAISE): KeyError for a missing key whatever set_get_defaults_to_none says


def _env_flag(name, default):
    """The boolean environment variable ``name`` ("1"/"true"/"yes"/"on" or "0"/"false"/"no"/"off"),
    ``default`` when unset; ValueError naming it for any other text."""
    text = os.environ.get(name)
    if text is None:
        return default
    if text.strip().lower() in ("1", "true", "yes", "y", "on", "t"):
        return True
    if text.strip().lower() in ("0", "false", "no", "n", "off", "f"):
        return False
    raise ValueError(f"environment variable {name} must be a boolean such as 1 or 0, got {text!r}")


# whether get(key) without a default returns None for a missing key (tensordict 0.14's default, and
# rlpipe's) or raises KeyError (TD_GET_DEFAULTS_TO_NONE=0): a one-item list, so set_get_defaults_to_none
# changes what every TensorDict reads
_GET_DEFAULTS_TO_NONE = [_env_flag("TD_GET_DEFAULTS_TO_NONE", True)]


# True once a TensorDict has been named: until then no names code runs (reading an unset slot with
# getattr and a default costs an exception), so unnamed TensorDicts pay nothing for names
_NAMES_USED = [False]


def set_get_defaults_to_none(set_to_none=True):
    """Makes ``TensorDict.get(key)`` return None for a missing key (True, the default as in tensordict
    0.14) or raise KeyError (False); the environment variable ``TD_GET_DEFAULTS_TO_NONE`` sets the
    starting value. ``td[key]`` raises KeyError either way."""
    _GET_DEFAULTS_TO_NONE[0] = bool(set_to_none)


def get_defaults_to_none():
    """Whether ``TensorDict.get(key)`` returns None for a missing key (see set_get_defaults_to_none)."""
    return _GET_DEFAULTS_TO_NONE[0]


def _as_batch_size(batch_size):
    if batch_size is None:
        return Size(())
    if isinstance(batch_size, (int, np.integer)) and not isinstance(batch_size, bool):
        return Size((int(batch_size),))
    if isinstance(batch_size, Tensor):
        batch_size = batch_size.tolist()
    try:
        sizes = tuple(batch_size)
    except TypeError:
        raise TypeError(f"batch_size must be a sequence of ints, got {batch_size!r}") from None
    if all(type(s) is int for s in sizes):  # the common case, without the conversions below
        return Size(sizes)
    if any(isinstance(s, bool) for s in sizes):
        raise TypeError(f"batch_size must be a sequence of ints, got {batch_size!r}")
    try:  # ints, NumPy ints and 0-d integer tensors; 1.5 or "a" is not a size (tensordict: ValueError)
        return Size(operator.index(s) for s in sizes)
    except TypeError:
        raise TypeError(f"batch_size must be a sequence of ints, got {batch_size!r}") from None


def _is_key(index):
    return isinstance(index, str) or isinstance(index, tuple) and index and all(
        isinstance(i, str) or isinstance(i, tuple) and _is_key(i) for i in index)


def _key_str(path):
    """A key path as messages show it: 'a' for one part, ('a', 'b') for several."""
    return repr(path[0] if len(path) == 1 else path)
