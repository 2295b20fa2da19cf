"""Small key helpers at torchrl's ``torchrl._utils`` path."""

__all__ = ["_ends_with", "_replace_last"]


def _ends_with(key, match):
    """Whether the nested key ``key`` (a string or a tuple of strings) ends with ``match``."""
    return key == match if isinstance(key, str) else key[-1] == match


def _replace_last(key, new_ending):
    """``key`` with its last element replaced by ``new_ending``."""
    return new_ending if isinstance(key, str) else key[:-1] + (new_ending,)
