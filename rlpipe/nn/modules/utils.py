"""``torch.nn.modules.utils``: argument normalizers shared by the layers, and
``consume_prefix_in_state_dict_if_present`` for loading a DataParallel checkpoint."""
from collections.abc import Iterable

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n, name="parse"):
    """A function turning a scalar into an n-tuple of it (and any iterable into a tuple)."""
    def parse(x):
        if isinstance(x, Iterable):
            return tuple(x)
        return (x,) * n
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(values, n):
    """(a, b) -> (b, b, a, a) for n=2: per-dimension padding in F.pad's last-dimension-first order."""
    return tuple(v for v in reversed(values) for _ in range(n))


def _list_with_default(out_size, defaults):
    """An adaptive pooling's output size with each None taken from the input's size (``defaults``)."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict, prefix):
    """Strips ``prefix`` (e.g. ``"module."``, which DataParallel adds) from the keys of
    ``state_dict`` in place, and from its ``_metadata`` keys; renamed keys move to the end."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is None:
        return
    for key in list(metadata.keys()):
        # '' is the wrapper's own entry; 'module' (the prefix without its dot) is the wrapped model's
        if key and (key == prefix.replace(".", "") or key.startswith(prefix)):
            metadata[key[len(prefix):]] = metadata.pop(key)
