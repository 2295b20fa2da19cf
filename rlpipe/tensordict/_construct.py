"""Building TensorDicts from other structures (``from_dict``, ``from_any``, ``from_module``,
``from_namedtuple``, ``from_list``...) and back (``tolist``, ``to_namedtuple``), and ``auto_batch_size_``."""
from collections import namedtuple

from .._creation import as_tensor
from .._tensor import Size, Tensor
from .base import TensorDictBase


class _ConstructMixin:
    """Conversions from and to other structures (see the module docstring)."""
    __slots__ = ()

    @classmethod
    def from_dict(cls, input_dict, batch_size=None, device=None, batch_dims=None, *, auto_batch_size=None,
                  names=None):
        """A TensorDict from a nested dict (nested dicts become nested TensorDicts). The batch size is
        ``batch_size``, or with ``batch_dims``/``auto_batch_size`` the longest one every leaf
        shares (at most ``batch_dims`` dims), else ``[]``, as in tensordict 0.14."""
        if isinstance(input_dict, TensorDictBase):
            return input_dict
        if batch_dims is not None and batch_size is not None:
            raise ValueError("Cannot pass both batch_size and batch_dims to `from_dict`.")
        out = cls(batch_size=batch_size, device=device)
        for key, value in input_dict.items():
            out.set(key, cls.from_dict(value, batch_size=batch_size, device=device) if isinstance(value, dict)
                    else value)
        if batch_size is None and (auto_batch_size or batch_dims is not None and auto_batch_size is None):
            out.auto_batch_size_(batch_dims)
        return out

    def from_dict_instance(self, input_dict, batch_size=None, device=None, batch_dims=None, *,
                           auto_batch_size=None, names=None):
        return type(self).from_dict(input_dict, batch_size=batch_size, device=device, batch_dims=batch_dims,
                                    auto_batch_size=auto_batch_size)

    def auto_batch_size_(self, batch_dims=None):
        """Sets the batch size to the longest shape prefix every leaf shares (at most ``batch_dims``
        dims), nested TensorDicts first; returns self."""
        for value in self._tensordict.values():
            if isinstance(value, TensorDictBase):
                value.auto_batch_size_(batch_dims)
        shapes = [tuple(v.batch_size if isinstance(v, TensorDictBase) else v.shape) for v in self._tensordict.values()
                  if not (isinstance(v, TensorDictBase) and v.is_empty())]  # an empty one fits any batch size
        if not shapes:
            self._batch_size = self._batch_size[:batch_dims] if batch_dims else self._batch_size
            return self
        common = []
        for sizes in zip(*shapes):
            if any(s != sizes[0] for s in sizes) or batch_dims is not None and len(common) == batch_dims:
                break
            common.append(sizes[0])
        for value in self._tensordict.values():
            if isinstance(value, TensorDictBase) and value.is_empty():
                value._batch_size = Size(common)
        self._batch_size = Size(common)
        return self

    @classmethod
    def from_module(cls, module, as_module=False, lock=False, use_state_dict=False):
        """The parameters and buffers of ``module`` and its submodules (the tensors themselves),
        nested by submodule name; submodules holding none are left out. ``use_state_dict=True``
        reads ``module.state_dict()`` instead (what its hooks give). ``as_module=True`` would give a
        TensorDictParams, which rlpipe does not have (NotImplementedError)."""
        if as_module:
            raise NotImplementedError("TensorDict.from_module(as_module=True) is not available in rlpipe: "
                                      "TensorDictParams is not implemented")
        if use_state_dict:
            td = cls(module.state_dict(), []).unflatten_keys(".")
        else:
            td = cls._from_module_tree(module)
        return td.lock_() if lock else td

    @classmethod
    def _from_module_tree(cls, module):
        td = cls({}, [])
        for name, tensor in (*module._parameters.items(), *module._buffers.items()):
            if tensor is not None:
                td._tensordict[name] = tensor
        for name, sub in module._modules.items():
            nested = cls._from_module_tree(sub) if sub is not None else None
            if nested is not None and nested._tensordict:
                td._tensordict[name] = nested
        return td

    @classmethod
    def fromkeys(cls, keys, value=0):
        """A TensorDict of batch size [] holding ``value`` under every key of ``keys``."""
        out = cls(batch_size=[])
        for key in keys:
            out.set(key, value)
        return out

    def _with_batch(self, batch_size, auto_batch_size, batch_dims):
        """self with ``batch_size`` set, or the common leading dims (``auto_batch_size``/``batch_dims``)."""
        if batch_size is not None:
            self.batch_size = batch_size
        elif auto_batch_size or batch_dims is not None:
            self.auto_batch_size_(batch_dims)
        return self

    @classmethod
    def from_any(cls, obj, *, auto_batch_size=False, batch_dims=None, device=None, batch_size=None):
        """A TensorDict (or a Tensor) from a nested structure: mappings (dict, UserDict) and dataclasses
        become TensorDicts, namedtuples and tuples TensorDicts keyed by field or ``"0"``, ``"1"``...; a
        list becomes a tensor (rlpipe has no non-tensor stacks: a ragged list is a RuntimeError), a
        tensor stays as it is. Batch size as in ``from_dict``."""
        converted = _any_to_entries(obj)
        if not isinstance(converted, dict):
            return converted
        out = cls.from_dict(converted, device=device)
        return out._with_batch(batch_size, auto_batch_size, batch_dims)

    @classmethod
    def from_namedtuple(cls, named_tuple, *, auto_batch_size=False, batch_dims=None, device=None, batch_size=None):
        """A TensorDict with one entry per field of ``named_tuple`` (nested namedtuples become nested
        TensorDicts); batch size as in ``from_dict``."""
        def as_dict(nt):
            return {name: as_dict(value) if _is_namedtuple(value) else value
                    for name, value in zip(nt._fields, nt)}
        return cls.from_dict(as_dict(named_tuple), device=device)._with_batch(batch_size, auto_batch_size,
                                                                                batch_dims)

    @classmethod
    def from_tuple(cls, obj, *, auto_batch_size=False, batch_dims=None, device=None, batch_size=None):
        """A TensorDict with the items of tuple ``obj`` under keys ``"0"``, ``"1"``, ... (nested tuples
        become nested TensorDicts); batch size as in ``from_dict``."""
        def as_dict(items):
            return {str(i): as_dict(value) if isinstance(value, tuple) else value for i, value in enumerate(items)}
        return cls.from_dict(as_dict(obj), device=device)._with_batch(batch_size, auto_batch_size, batch_dims)

    @classmethod
    def from_list(cls, input, *, auto_batch_size=None, batch_size=None, device=None, batch_dims=None, names=None,
                  lazy=None):
        """The items of ``input`` (dicts, turned into TensorDicts with ``from_dict``, or TensorDicts)
        stacked along a new first dim. ``batch_size`` (its first dim must be ``len(input)``) and
        ``batch_dims`` count that new dim. ``lazy=True`` stacks them into a LazyStackedTensorDict."""
        if batch_size is not None:
            given, batch_size = batch_size, [batch_size] if isinstance(batch_size, int) else list(batch_size)
            if batch_size[0] != len(input):
                raise ValueError(f"The provided batch size ({given}) does not match the length of the list "
                                 f"({len(input)}).")
            batch_size = batch_size[1:]
        if batch_dims is not None:
            batch_dims -= 1
        items = [d if isinstance(d, TensorDictBase) else
                 cls.from_dict(d, batch_size=batch_size, device=device, batch_dims=batch_dims,
                               auto_batch_size=auto_batch_size) for d in input]
        if lazy:
            return cls.lazy_stack(items)
        return cls.stack(items, 0)

    def to_namedtuple(self, dest_cls=None):
        """The entries as a namedtuple (class ``GenericDict`` unless ``dest_cls`` is given), nested
        TensorDicts as nested namedtuples; the leaves are shared, not copied."""
        values = {key: value.to_namedtuple() if isinstance(value, TensorDictBase) else value
                  for key, value in self._tensordict.items()}
        if dest_cls is None:
            dest_cls = namedtuple("GenericDict", list(values))
        return dest_cls(**values)

    def tolist(self, *, convert_nodes=True, convert_tensors=False, tolist_first=False, as_linked_list=False):
        """Nested lists over the batch dims with a dict of the entries at each position (the leaves
        stay tensors, or become lists with ``convert_tensors``; nested TensorDicts become dicts, or
        stay TensorDicts without ``convert_nodes``, or are listed over their own extra batch dims
        with ``tolist_first``). A TensorDict of batch size [] gives a dict."""
        if convert_tensors and not convert_nodes:
            raise TypeError("tolist: convert_tensors=True needs convert_nodes=True")
        options = {"convert_nodes": convert_nodes, "convert_tensors": convert_tensors, "tolist_first": tolist_first}
        if self._batch_size:
            return [row.tolist(**options) for row in self.unbind(0)]
        if not convert_nodes:
            return self
        return {key: (value.tolist(**options) if tolist_first else value._as_plain_dict(convert_tensors))
                if isinstance(value, TensorDictBase) else value.tolist() if convert_tensors else value
                for key, value in self._tensordict.items()}

    def _as_plain_dict(self, convert_tensors):
        return {key: value._as_plain_dict(convert_tensors) if isinstance(value, TensorDictBase)
                else value.tolist() if convert_tensors else value for key, value in self._tensordict.items()}


def _any_to_entries(obj):
    """from_any's conversion: nested dicts of tensors (or a tensor for a leaf)."""
    import dataclasses
    from collections.abc import Mapping
    if isinstance(obj, (TensorDictBase, Tensor)):
        return obj
    if isinstance(obj, Mapping):
        return {str(key): _any_to_entries(value) for key, value in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _any_to_entries(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if _is_namedtuple(obj):
        return {name: _any_to_entries(value) for name, value in zip(obj._fields, obj)}
    if isinstance(obj, tuple):
        return {str(i): _any_to_entries(value) for i, value in enumerate(obj)}
    return as_tensor(obj)


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")
