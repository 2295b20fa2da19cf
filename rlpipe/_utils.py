"""Small helpers at torchrl's ``torchrl._utils`` path."""
import copy
import functools
import logging
import os
import sys

__all__ = ["_ends_with", "_replace_last", "RL_WARNINGS", "rl_warnings", "logger"]


def _ends_with(key, match):
    """Whether the nested key ``key`` (a string or a tuple of strings) ends with ``match``."""
    return key == match if isinstance(key, str) else key[-1] == match


def _replace_last(key, new_ending):
    """``key`` with its last element replaced by ``new_ending``."""
    return new_ending if isinstance(key, str) else key[:-1] + (new_ending,)


_RL_WARNINGS_OFF = ("n", "no", "f", "false", "off", "0")


def rl_warnings():
    """Whether torchrl-style warnings are on: the ``RL_WARNINGS`` environment variable, read now
    (default on; ``0``, ``false``, ``no``, ``off``, ... turn them off)."""
    return os.environ.get("RL_WARNINGS", "1").strip().lower() not in _RL_WARNINGS_OFF


RL_WARNINGS = rl_warnings()  # as torchrl: the value at import


class ScopedSetting:
    """A context manager that also decorates functions: inside a ``with`` block (or a call of the
    decorated function) the one-item list ``_store`` holds ``_setting()``; the previous value comes
    back after. Subclasses give ``_store`` and parse their argument in ``__init__``."""
    _store = None

    def _setting(self):
        raise NotImplementedError

    def clone(self):
        """A shallow copy, so nested or recursive uses of one decorator each keep their own previous value."""
        return copy.copy(self)

    def __enter__(self):
        self._prev = self._store[0]
        self._store[0] = self._setting()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self._store[0] = self._prev

    def __call__(self, fn):
        @functools.wraps(fn)
        def run_with_setting(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return run_with_setting


def unavailable(name, why, base=object):
    """A class named ``name`` that exists (so code importing it loads) but raises
    NotImplementedError, saying ``why``, when built."""
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{name} is not available in rlpipe: {why}")
    return type(name, (base,), {"__init__": __init__, "__doc__": f"Not available in rlpipe: {why}"})

# torchrl._utils.logger: the library's logger, INFO and above printed to stdout
logger = logging.getLogger("rlpipe")
if not logger.handlers:
    _handler = logging.StreamHandler(stream=sys.stdout)
    _handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s][%(levelname)s] %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
