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
        reads ``module.state_dict()`` instead (what its hooks give). ``as_module=True`` gives them in
        a ``TensorDictParams`` (``no_convert=True``: the module's parameters and buffers as they are)."""
        if use_state_dict:
            td = cls(module.state_dict(), []).unflatten_keys(".")
        else:
            td = cls._from_module_tree(module)
        return _as_module(td, lock) if as_module else td.lock_() if lock else td

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
    def from_modules(cls, *modules, as_module=False, lock=True, use_state_dict=False, lazy_stack=False,
                     expand_identical=False):
        """The parameters and buffers of ``modules`` (of one structure) stacked along a new first dim,
        for ``vmap`` over an ensemble: new leaves (parameters stay parameters, with their
        ``requires_grad``; buffers become Buffers), detached from the modules'; locked unless
        ``lock=False``. ``lazy_stack=True`` stacks lazily instead (the modules' own tensors, so
        gradients reach them); ``expand_identical=True`` expands a tensor shared by every module
        instead of copying it. ``as_module=True``: in a ``TensorDictParams`` (``no_convert=True``)."""
        if not modules:
            raise ValueError("TensorDict.from_modules needs at least one module, got none")
        tds = [cls.from_module(m, use_state_dict=use_state_dict) for m in modules]
        if lazy_stack:
            return cls.lazy_stack(tds)
        keys = [set(td.keys(True, True)) for td in tds]
        for other in keys[1:]:
            if other != keys[0]:
                raise ValueError(f"All key sets must match. Got {sorted(map(str, other ^ keys[0]))} in one but not "
                                 "another.")
        out = cls({}, [len(tds)])
        for key in tds[0].keys(True, True):
            out.set(key, _stacked([td.get(key) for td in tds], expand_identical))
        return _as_module(out, lock) if as_module else out.lock_() if lock else out

    def to_module(self, module, *, inplace=None, return_swap=True, swap_dest=None, use_state_dict=False,
                  non_blocking=False, preserve_module_state=True, memo=None):
        """Writes the entries into ``module`` as its parameters, buffers and (nested keys) those of its
        submodules; returns what they replace as a TensorDict (into ``swap_dest`` when given), or
        None with ``return_swap=False``. As a context manager (``with params.to_module(m): ...``) it
        puts the replaced ones back on exit, also when the block raises (tensordict does not then).
        ``inplace=True`` copies the values into the module's own tensors instead.
        ``preserve_module_state`` keeps a parameter registered as a parameter (a value that records
        gradients, or a batched one inside vmap, is registered as it is, so gradients reach it) and
        a buffer as a buffer. ``use_state_dict`` runs the module's load-state-dict pre-hooks first."""
        if memo is not None:
            raise RuntimeError("memo cannot be passed to the public to_module anymore.")
        source = self
        if use_state_dict:
            if inplace is not None:
                raise RuntimeError("inplace argument cannot be passed when use_state_dict=True.")
            source = self._through_load_hooks(module)
        swap = source._write_to_module(module, bool(inplace), return_swap, preserve_module_state)
        if not return_swap:
            return None
        if swap_dest is None:
            return type(self)._from_swap(swap)
        _put_swapped(swap_dest, swap)
        return swap_dest

    def _through_load_hooks(self, module):
        """The entries as the module's load_state_dict pre-hooks leave them, Parameter/Buffer where the
        module has one."""
        state_dict = dict(self.flatten_keys(".").items())
        for hook in module._load_state_dict_pre_hooks.values():
            hook(state_dict, "", {}, True, [], [], [])
        current = dict(module.named_parameters(remove_duplicate=False))
        buffers = dict(module.named_buffers(remove_duplicate=False))
        from rlpipe.nn.parameter import Buffer, Parameter
        converted = {key: Parameter(value) if key in current else Buffer(value) if key in buffers else value
                     for key, value in state_dict.items()}
        return type(self)(converted, []).unflatten_keys(".")

    def _write_to_module(self, module, inplace, return_swap, preserve):
        """Writes every entry (nested ones into submodules); the replaced values as a nested dict."""
        missing = [key for key, value in self._tensordict.items() if isinstance(value, TensorDictBase)
                   and module._modules.get(key) is None]
        if missing:
            raise KeyError(f"to_module: {type(module).__name__} has no submodule named {missing[0]!r}")
        swap = {}
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDictBase):
                swap[key] = value._write_to_module(module._modules[key], inplace, return_swap, preserve)
            else:
                swap[key] = _set_module_tensor(module, key, value, inplace, preserve)
        return swap

    @classmethod
    def _from_swap(cls, swap):
        out = cls({}, [])
        for key, value in swap.items():
            out._tensordict[key] = cls._from_swap(value) if isinstance(value, dict) else value
        return out

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


def _stacked(tensors, expand_identical):
    """from_modules' leaf: the modules' tensors stacked into a new parameter or buffer."""
    from rlpipe.primitives.shape import stack
    from rlpipe.autograd.grad_mode import no_grad
    from rlpipe.nn.parameter import Buffer, Parameter
    first = tensors[0]
    if expand_identical and all(t is first for t in tensors):
        return first.expand(len(tensors), *first.shape)
    with no_grad():
        out = stack(tensors)
    return Parameter(out, first.requires_grad) if isinstance(first, Parameter) else Buffer(out)


def _set_module_tensor(module, name, value, inplace, preserve):
    """Puts ``value`` into ``module`` as ``name`` (tensordict's rules, see to_module); returns the old value."""
    from rlpipe.func._batched import BatchedTensor
    from rlpipe.nn.parameter import Buffer, Parameter
    params, buffers, attrs = module._parameters, module._buffers, module.__dict__
    table = params if name in params else buffers if name in buffers else attrs if name in attrs else None
    if table is None:
        raise KeyError(f"to_module: {type(module).__name__} has no parameter, buffer or attribute named {name!r}")
    old = table[name]
    if inplace:
        copy = old.clone()
        old.data.copy_(value.data)
        return copy
    is_tensor = isinstance(value, (Tensor, BatchedTensor))
    if table is params and preserve and old is not None and is_tensor and (
            not isinstance(value, Parameter) or value.requires_grad != old.requires_grad):
        if not (isinstance(value, BatchedTensor) or value.requires_grad):  # else registered as it is
            value = Parameter(value, requires_grad=old.requires_grad)
    elif table is buffers and preserve and isinstance(value, Parameter):
        value = Buffer(value, persistent=name not in module._non_persistent_buffers_set)
    del table[name]
    if isinstance(value, Parameter) or table is params and is_tensor:
        params[name] = value
    elif table is buffers and is_tensor:
        buffers[name] = value
    else:
        attrs[name] = value
    return old


def _put_swapped(dest, swap):
    """Writes the replaced values into TensorDict ``dest`` (as tensordict does, whether locked or not)."""
    for key, value in swap.items():
        if isinstance(value, dict):
            _put_swapped(dest._tensordict[key], value)
        elif dest._tensordict.get(key) is not value:
            dest._tensordict[key] = value


def tree_flatten_td(td):
    """The pytree children of a TensorDict (its entries) and what rebuilds it. A NonTensorData (one
    object for the whole batch) rides in the context instead: vmap hands it over unbatched."""
    entries = td._tensordict
    keys = list(entries)
    values = list(entries.values())
    objects = {}
    for value in values:  # (a loop, not a comprehension: vmap flattens every TensorDict argument on each call)
        if type(value).__name__ == "NonTensorData":
            objects = {k: v for k, v in entries.items() if type(v).__name__ == "NonTensorData"}
            values = [entries[k] for k in keys if k not in objects]
            break
    first = values[0] if values else None
    first_ndim = None if first is None else len(first.batch_size) if isinstance(first, TensorDictBase) else first.ndim
    batch_size = td.batch_size
    return values, (type(td), keys, len(batch_size), batch_size, td.device, first_ndim, objects)


def tree_unflatten_td(values, context):
    """The TensorDict of ``values``; inside vmap the leaves lost (or gained) dims, and its batch
    size follows the first entry's (a NonTensorData's batch size too)."""
    cls, keys, batch_dims, batch_size, device, first_ndim, objects = context
    if values:
        first = values[0]
        nested = isinstance(first, TensorDictBase)
        kept = batch_dims + (len(first.batch_size) if nested else first.ndim) - first_ndim
        if kept > 0:
            batch_size = Size((first.batch_size if nested else first.shape)[:kept])
        else:  # (vmap's case: no dims kept)
            batch_size = Size()
    if not objects:  # (registered for TensorDict alone) vmap rebuilds these on every call: skip the checks
        return cls._build(dict(zip(keys, values)), batch_size, device)
    out = cls({}, batch_size, device=device)
    children = iter(values)
    for key in keys:
        obj = objects.get(key)
        out._tensordict[key] = next(children) if obj is None else \
            type(obj)(obj.data, batch_size=batch_size, device=obj.device)
    return out


def _as_module(td, lock):
    """``td`` in a TensorDictParams that keeps its leaves as they are (``as_module=True``; the class
    is handed over on TensorDictBase by tensordict.nn.params, which builds on this module)."""
    return td._params_type(td, no_convert=True, lock=lock)
