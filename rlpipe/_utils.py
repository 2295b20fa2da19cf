"""Small helpers at torchrl's ``torchrl._utils`` path."""
import os

__all__ = ["_ends_with", "_replace_last", "RL_WARNINGS", "rl_warnings"]


def _ends_with(key, match):
    """Whether the nested key ``key`` (a string or a tuple of strings) ends with ``match``."""
    return key == match if isinstance(key, str) else key[-1] == match


def _replace_last(key, new_ending):
    """``key`` with its last element replaced by ``new_ending``."""
    return new_ending if isinstance(key, str) else key[:-1] + (new_ending,)


RL_WARNINGS = os.environ.get("RL_WARNINGS", "1").lower() in ("1", "true", "yes")


def rl_warnings():
    """Whether torchrl-style warnings are on (the ``RL_WARNINGS`` environment variable, default on)."""
    return RL_WARNINGS


def unavailable(name, why, base=object):
    """A class named ``name`` that exists (so code importing it loads) but raises
    NotImplementedError, saying ``why``, when built."""
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{name} is not available in rlpipe: {why}")
    return type(name, (base,), {"__init__": __init__, "__doc__": f"Not available in rlpipe: {why}"})
