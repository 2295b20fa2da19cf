"""A tensorclass's ``state_dict`` and ``load_state_dict`` in tensordict 0.14's format: the tensors
under dotted keys (``"y.x"`` for field ``x`` of the nested tensorclass ``y``), and a ``_metadata``
attribute holding, for each tensorclass level (``""``, ``"y"``), its ``_type`` and its non-tensor
fields (``_non_tensor``). ``flatten=False`` nests the tensors in dicts instead. Loading takes both,
and tensordict's older ``{"_tensordict": ..., "_non_tensordict": ...}`` layout."""
import collections

from .._tensor import Tensor
from .base import TensorDictBase
from .utils import is_tensorclass


def _walk(tc, prefix, tensors, metadata):
    """Fills ``tensors`` (dotted key -> tensor) and ``metadata`` (level -> type, non-tensor fields)."""
    level = {"_type": repr(type(tc)), "_non_tensor": {}}
    metadata[prefix] = level
    for name in sorted(type(tc).__expected_keys__):
        value, key = getattr(tc, name), f"{prefix}.{name}" if prefix else name
        if is_tensorclass(value):
            _walk(value, key, tensors, metadata)
        elif isinstance(value, TensorDictBase):
            tensors.update({f"{key}.{k}": v for k, v in value.state_dict().items()})
        elif isinstance(value, Tensor):
            tensors[key] = value
        elif value is not None:
            level["_non_tensor"][name] = value


def state_dict(tc, destination=None, prefix="", keep_vars=False, flatten=True):
    """The tensors of ``tc`` (detached unless ``keep_vars``) and its metadata; see the module."""
    tensors, metadata = {}, {}
    _walk(tc, "", tensors, metadata)
    out = collections.OrderedDict() if destination is None else destination
    for key, value in tensors.items():
        value = value if keep_vars else value.detach()
        if flatten:
            out[prefix + key] = value
            continue
        node = out
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, collections.OrderedDict())
        node[last] = value
    out._metadata = metadata
    return out


def _flat(mapping, prefix=""):
    """A nested dict of tensors as dotted keys."""
    flat = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def load_state_dict(tc, state, strict=True):
    """Writes a ``state_dict`` (flat, nested or legacy) into ``tc``; returns ``tc``. A key ``tc`` has
    no field for raises KeyError (checked before anything is written)."""
    metadata = getattr(state, "_metadata", None) or {}
    if "_tensordict" in state:  # tensordict's older layout
        tensors = {k: v for k, v in _flat(dict(state["_tensordict"])).items() if not k.startswith("__")}
        metadata = {"": {"_non_tensor": dict(state.get("_non_tensordict") or {})}}
    else:
        tensors = _flat(dict(state))
    expected, levels = {}, {}
    _walk(tc, "", expected, levels)
    unexpected = [k for k in tensors if k not in expected] + [
        name for level, meta in metadata.items() for name in (meta or {}).get("_non_tensor", {})
        if level not in levels or name not in type(_at(tc, level)).__expected_keys__]
    if unexpected:
        raise KeyError(f"Key '{unexpected[0]}' wasn't expected in the state-dict (the tensorclass "
                       f"{type(tc).__name__} has the entries {sorted(expected)}).")
    for key, value in tensors.items():
        if value is not None:
            expected[key].copy_(value)
    for level, meta in metadata.items():
        for name, value in (meta or {}).get("_non_tensor", {}).items():
            setattr(_at(tc, level), name, value)
    return tc


def _at(tc, level):
    """The (nested) tensorclass at the dotted ``level`` ("" is ``tc`` itself)."""
    for part in filter(None, level.split(".")):
        tc = getattr(tc, part)
    return tc
