"""Nested keys: tensordict's ``unravel_key`` (and ``unravel_key_list``), the tuple form rlpipe's own
code works with (``unravel_key_to_tuple``), and ``KeysView``, what ``TensorDict.keys()`` and the env
layer's ``Composite.keys()`` return.

A key is a string or a tuple of strings and nested tuples of strings (``("next", ("agent", "obs"))``
is the entry ``next -> agent -> obs``).
"""

__all__ = ["KeysView", "unravel_key", "unravel_key_list", "unravel_key_to_tuple"]


def unravel_key_to_tuple(key):
    """A key as a flat tuple of strings: ``"a"`` -> ``("a",)``, ``("a", ("b", "c"))`` -> ``("a", "b", "c")``.

    tensordict's function of that name returns ``()`` for an invalid key; this one raises ``TypeError``."""
    if isinstance(key, str):
        return (key,)
    if isinstance(key, tuple):
        out = ()
        for part in key:
            out += unravel_key_to_tuple(part)
        return out
    raise TypeError(f"TensorDict keys are strings or tuples of strings, got {type(key).__name__}: {key!r}")


def unravel_key(key):
    """tensordict's ``unravel_key``: ``"a"`` stays ``"a"``; tuples are flattened (``("a", ("b", "c"))`` ->
    ``("a", "b", "c")``) and a one-string tuple becomes its string, so equal keys compare equal.

    Where tensordict returns ``()`` (an empty key, a part that is not a string) or raises ``RuntimeError``
    (a key that is neither a string nor a tuple), this one raises ``TypeError``."""
    if isinstance(key, str):
        return key
    if isinstance(key, tuple):
        flat = []
        for sub in key:
            sub = unravel_key(sub)
            if isinstance(sub, str):
                flat.append(sub)
            else:
                flat.extend(sub)
        if not flat:
            raise TypeError("a nested key cannot be empty")
        return flat[0] if len(flat) == 1 else tuple(flat)
    raise TypeError(f"a key must be a str or a tuple of str, got {type(key).__name__}: {key!r}")


def unravel_key_list(keys):
    """``unravel_key`` of every key of ``keys``, as a list."""
    return [unravel_key(k) for k in keys]


class KeysView:
    """The keys of a nested container (a ``TensorDict``, a ``Composite`` spec): iterable, sized, and
    ``in`` understands nested keys.

    The container gives ``_walk(include_nested, leaves_only)``, its keys in order, and
    ``_has_key(key, include_nested, leaves_only)``, its own membership rules (a TensorDict raises on a
    nested key when ``include_nested`` is False, as tensordict does; a spec answers False)."""
    __slots__ = ("_source", "_include_nested", "_leaves_only")

    def __init__(self, source, include_nested, leaves_only):
        self._source, self._include_nested, self._leaves_only = source, include_nested, leaves_only

    def __iter__(self):
        return self._source._walk(self._include_nested, self._leaves_only)

    def __len__(self):
        return sum(1 for _ in self)

    def __contains__(self, key):
        return self._source._has_key(key, self._include_nested, self._leaves_only)

    def __eq__(self, other):
        return list(self) == list(other)

    def __repr__(self):
        return (f"{self._source._keys_view_name}({list(self)},\n    include_nested={self._include_nested},\n    "
                f"leaves_only={self._leaves_only})")
