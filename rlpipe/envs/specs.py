"""Tensor specs: the shape, dtype, device and domain of the tensors an environment reads and writes.

Names and behaviour follow torchrl's ``torchrl.data.tensor_specs`` (0.14): ``Bounded``,
``Unbounded``, ``Categorical``, ``OneHot``, ``MultiCategorical``, ``MultiOneHot``, ``Binary`` and
the nested ``Composite``, with the old ``*TensorSpec`` aliases. Every leaf spec can draw a random
element (``rand``, reproducible under ``rlpipe.manual_seed``), give a zero element (``zero``),
test membership exactly (``is_in``: trailing shape, dtype and bounds), map a tensor into the space
(``project``), turn host values into tensors (``encode``) and tensors into the action format
Gymnasium expects (``to_numpy``). ``gym.py``'s ``from_gym_space`` converts Gymnasium spaces.

Deliberate differences from torchrl: ``Bounded.zero`` is the zero tensor clamped into the box (so it
``is_in`` the spec), ``OneHot.project`` takes the argmax (torchrl samples); different Composite
specs stack lazily (``StackedComposite``), different leaf specs too (``Stacked``, whose samples would be
nested tensors: it has none). The discrete specs take torchrl's ``mask`` (``update_mask``, ``_specs_masks``);
``NonTensor`` and ``Choice`` live in ``_specs_nontensor``.

This module is the specs' public home: ``_specs_base`` holds the helpers, the spaces and
``TensorSpec``, ``_specs_leaves`` the leaf specs, and this module ``Composite`` and the old names.
Every class reports this module as its ``__module__`` (so pickles and reprs name the path users
import from).
"""
import builtins
import math
import os

import numpy as np

from .. import _dtypes
from .._creation import as_tensor
from .._device import resolve
from .._tensor import Size, Tensor, size_repr as _shape_str
from ..tensordict import TensorDict, unravel_key_to_tuple
from ..tensordict.keys import KeysView
from ._specs_base import (  # noqa: F401 - _LIST_CHECK_SIZE: re-exported
    _LIST_CHECK_SIZE,
    BinaryBox,
    BoxList,
    CategoricalBox,
    ContinuousBox,
    DiscreteBox,
    TensorSpec,
    _extra_shape,
    _indent,
    _size,
    _tensor,
)
from ._specs_leaves import (
    Binary,
    Bounded,
    BoundedContinuous,
    BoundedDiscrete,
    Categorical,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
    UnboundedContinuous,
    UnboundedDiscrete,
)
from ._specs_nontensor import Choice, NonTensor
from ._specs_stacked import Stacked, _LazyComposite

# torchrl's switch: encode and to_numpy check values against the spec (AssertionError) when True
_CHECK_SPEC_ENCODE = os.environ.get("CHECK_SPEC_ENCODE", "0").strip().lower() in ("1", "true", "yes", "on")

__all__ = [
    "Binary",
    "BinaryBox",
    "BinaryDiscreteTensorSpec",
    "Bounded",
    "BoundedContinuous",
    "BoundedDiscrete",
    "BoundedTensorSpec",
    "BoxList",
    "Categorical",
    "CategoricalBox",
    "Choice",
    "Composite",
    "CompositeSpec",
    "ContinuousBox",
    "DiscreteBox",
    "DiscreteTensorSpec",
    "MultiCategorical",
    "MultiDiscreteTensorSpec",
    "MultiOneHot",
    "MultiOneHotDiscreteTensorSpec",
    "NonTensor",
    "OneHot",
    "OneHotDiscreteTensorSpec",
    "Stacked",
    "StackedComposite",
    "TensorSpec",
    "Unbounded",
    "UnboundedContinuous",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscrete",
    "UnboundedDiscreteTensorSpec",
]

# the parts' classes name this module as theirs: pickles record the path users import them from
for _cls in (ContinuousBox, CategoricalBox, BinaryBox, BoxList, TensorSpec, Bounded, BoundedContinuous,
             BoundedDiscrete, Unbounded, UnboundedContinuous, UnboundedDiscrete, Categorical, Binary, OneHot,
             MultiCategorical, MultiOneHot, NonTensor, Choice, Stacked):
    _cls.__module__ = __name__
del _cls


# ---- composite ----------------------------------------------------------------------------------
_MISSING = object()


class Composite(TensorSpec):
    """A nested dictionary of specs sharing the leading dims ``shape`` (a TensorDict's batch size).

    ``Composite(dict_of_specs=None, shape=None, device=None, names=None, **kwargs)``: keys are
    strings, nested keys tuples of strings; nested dicts become nested Composites. ``rand``/``zero``
    give TensorDicts of batch size ``shape``. ``names`` names the batch dims (nested Composites
    share them), as a TensorDict's dim names; they follow indexing and shape changes.
    """
    domain = "composite"
    _names = None

    def __init__(self, *args, shape=None, device=None, batch_size=None, data_cls=None, step_mdp_static=False,
                 names=None, **kwargs):
        if len(args) > 1:
            raise TypeError("Composite takes at most one positional argument (a dict of specs)")
        if shape is not None and batch_size is not None:
            raise TypeError("Composite: give shape or batch_size, not both")
        shape = batch_size if shape is None else shape
        self._specs = {}
        self._shape = Size(()) if shape is None else _size(shape)
        self.device = None if device is None else resolve(device)
        self.data_cls = data_cls
        source = args[0] if args else None
        if source is not None and not hasattr(source, "items"):
            raise TypeError(f"Composite expects a dict of specs, got {type(source).__name__}")
        for key, value in (*(source.items() if source is not None else ()), *kwargs.items()):
            self[key] = value
        if names is not None:
            self.names = names

    # ---- locking ----
    _lock_holders = frozenset()  # ids of the Composites whose lock_ locked this one

    @property
    def locked(self):
        """Whether entries can no longer be set or deleted (``lock_``)."""
        return bool(self._lock_holders)

    is_locked = locked

    def _check_unlocked(self):
        if self._lock_holders:
            raise RuntimeError("Cannot modify a locked Composite. Call unlock_() first (it is locked by "
                               f"{len(self._lock_holders)} Composite(s) of its graph).")

    def _lock_graph(self, recurse):
        """This Composite and, when ``recurse`` (default True), the nested ones."""
        nodes = [self]
        if recurse is None or recurse:
            nodes += [spec for spec in self.values(True) if isinstance(spec, Composite)]
        return nodes

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_lock_holders", None)  # the holders are object ids: a pickled copy comes back unlocked
        return state

    def lock_(self, recurse=None):
        """Forbids setting or deleting entries, here and (``recurse``, default True) in nested Composites."""
        for node in self._lock_graph(recurse):
            node._lock_holders = node._lock_holders | {id(self)}
        return self

    def unlock_(self, recurse=None):
        """Lifts ``lock_``; a RuntimeError when another Composite's lock also holds one of them."""
        nodes = self._lock_graph(recurse)
        for node in nodes:
            if node._lock_holders - {id(self)}:
                raise RuntimeError("Cannot unlock a Composite that is part of a locked graph: another Composite "
                                   "locked it (unlock that one first)")
        for node in nodes:
            node._lock_holders = node._lock_holders - {id(self)}
        return self

    # ---- dim names ----
    @property
    def names(self):
        """The names of the batch dims (None for an unnamed dim)."""
        return list(self._names) if self._names is not None else [None] * len(self.shape)

    @names.setter
    def names(self, names):
        if names is None:
            self._erase_names()
            return
        names = list(names)
        if len(names) != len(self.shape):
            raise ValueError(f"Composite.names: Expected {len(self.shape)} names, but got {len(names)} names "
                             f"({names}) for the shape {list(self.shape)}")
        self._names = names if any(name is not None for name in names) else None
        for spec in self._specs.values():
            if isinstance(spec, Composite):
                spec.names = names + spec.names[len(names):]

    def _has_names(self):
        return self._names is not None

    def _erase_names(self):
        self._names = None
        for spec in self._specs.values():
            if isinstance(spec, Composite):
                spec._erase_names()

    def refine_names(self, *names):
        """A copy named ``names`` (``...`` keeps the names of the dims it covers); renaming a named
        dim is a RuntimeError."""
        if Ellipsis in names:
            at = names.index(Ellipsis)
            names = names[:at] + tuple(self.names[at:at + len(self.shape) - len(names) + 1]) + names[at + 1:]
        for old, new in zip(self.names, names):
            if old is not None and old != new:
                raise RuntimeError(f"refine_names: cannot coerce Composite names {self.names} with {list(names)}")
        out = self.clone()
        out.names = names
        return out

    def _named_like(self, out, names):
        """``out`` with ``names`` (None: no names) as its dim names."""
        if names is not None and len(names) == len(out.shape):
            out.names = names
        return out

    # ---- shape, device, dtype ----
    @property
    def shape(self):
        """The leading dims every entry shares. Setting it (as torchrl) re-shapes nested Composites whose
        shape does not start with the new one; a leaf spec that does not is a ValueError."""
        return self._shape

    @shape.setter
    def shape(self, value):
        value = _size(value)
        n = len(value)
        for key, spec in self._specs.items():
            if spec is None or tuple(spec.shape[:n]) == tuple(value):
                continue
            if not isinstance(spec, Composite):
                raise ValueError(f"Composite.shape: the spec at {key!r} of shape {_shape_str(spec.shape)} does not "
                                 f"start with the new shape {_shape_str(value)}")
            spec.shape = value
        self._shape = value

    def clear_device_(self):
        """Forgets the Composite's device (nested Composites' too; leaves keep theirs); returns it."""
        self.device = None
        for spec in self._specs.values():
            if isinstance(spec, Composite):
                spec.clear_device_()
        return self

    @property
    def batch_size(self):
        """The Composite's shape (torchrl's other name)."""
        return self.shape

    @property
    def dtype(self):
        """The dtype every leaf shares, else None."""
        dtypes = {spec.dtype for spec in self.values(True, True) if spec is not None}
        return dtypes.pop() if len(dtypes) == 1 else None

    @property
    def space(self):
        """None: a Composite has no space of its own."""
        return None

    def _check_leaf(self, key, value):
        if value is None:
            return value
        if isinstance(value, dict):
            value = Composite(value, shape=self.shape, device=self.device)
        if not isinstance(value, TensorSpec):
            raise TypeError(f"Composite: the value for {key!r} must be a TensorSpec, a dict or None, "
                            f"got {type(value).__name__}")
        n = len(self.shape)
        if (isinstance(value, Composite) and len(value.shape) < n
                and tuple(self.shape[:len(value.shape)]) == tuple(value.shape)):
            value = value.clone()  # as torchrl: a Composite of fewer leading dims takes this one's
            value.shape = self.shape
        if tuple(value.shape[:n]) != tuple(self.shape):
            raise ValueError(f"Composite: the shape of the spec for {key!r} {_shape_str(value.shape)} must start "
                             f"with the Composite's shape {_shape_str(self.shape)}")
        if self.device is not None and value.device != self.device:
            if isinstance(value, Composite) and value.device is None:
                value = value.clone()
                value._set_device(self.device)
            else:
                value = value.to(self.device)
        return value

    def _set_device(self, device):
        self.device = device
        for key, value in list(self._specs.items()):
            if value is not None and value.device != device:
                if isinstance(value, Composite):
                    value._set_device(device)
                else:
                    self._specs[key] = value.to(device)

    # ---- dict interface ----
    def _lookup(self, path):
        node = self
        for i, part in enumerate(path):
            if isinstance(node, StackedComposite):  # a lazy stack answers for the rest of the path
                rest = path[i:]
                return node[rest] if rest in node else _MISSING
            if not isinstance(node, Composite):
                return _MISSING
            node = node._specs.get(part, _MISSING)
            if node is _MISSING:
                return _MISSING
        return node

    def __getitem__(self, key):
        if not _is_key(key):
            return TensorSpec.__getitem__(self, key)  # an index of the batch dims
        path = unravel_key_to_tuple(key)
        spec = self._lookup(path)
        if spec is _MISSING:
            raise KeyError(f"key {key!r} not found in Composite with keys {sorted(map(str, self.keys(True)))}")
        return spec

    def get(self, key, default=_MISSING):
        """The spec at ``key`` (nested keys too), or ``default`` when given and the key is missing."""
        try:
            return self[key]
        except KeyError:
            if default is _MISSING:
                raise
            return default

    def __setitem__(self, key, value):
        if isinstance(key, str) and key in ("shape", "device", "dtype", "space"):
            raise AttributeError(f"Composite[{key!r}] cannot be set: {key!r} is an attribute of the spec, not an "
                                 f"entry (set Composite.{key} instead, or use another key)")
        path = unravel_key_to_tuple(key)
        node = self
        for i, part in enumerate(path[:-1]):
            child = node._specs.get(part)
            if child is None:
                child = Composite(shape=node.shape, device=node.device)
                node._specs[part] = child
            elif not isinstance(child, Composite):
                raise KeyError(f"Composite: cannot set {key!r}: {path[:i + 1]!r} is a leaf spec, not a Composite")
            node = child
        node._check_unlocked()
        node._specs[path[-1]] = node._check_leaf(key, value)

    def set(self, key, spec):
        """Sets ``spec`` at ``key``; returns the Composite."""
        self[key] = spec
        return self

    def __delitem__(self, key):
        path = unravel_key_to_tuple(key)
        parent = self._lookup(path[:-1]) if len(path) > 1 else self
        if isinstance(parent, StackedComposite):
            del parent[path[-1]]
            return
        if not isinstance(parent, Composite) or path[-1] not in parent._specs:
            raise KeyError(f"key {key!r} not found in Composite")
        parent._check_unlocked()
        del parent._specs[path[-1]]

    def del_(self, key):
        """Deletes the spec at ``key``; returns the Composite."""
        del self[key]
        return self

    def pop(self, key, default=_MISSING):
        """Removes and returns the spec at ``key`` (``default`` when given and the key is missing)."""
        try:
            value = self[key]
        except KeyError:
            if default is _MISSING:
                raise
            return default
        del self[key]
        return value

    def setdefault(self, key, default):
        """The spec at ``key``, set to ``default`` first when missing."""
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, dict_or_spec):
        """Sets every entry of ``dict_or_spec``, merging nested Composites."""
        for key, value in dict_or_spec.items():
            if isinstance(value, Composite) and key in self.keys() and isinstance(self[key], Composite):
                self[key].update(value)
            else:
                self[key] = value
        return self

    def _walk(self, include_nested, leaves_only, prefix=()):
        for key, value in self._specs.items():
            full = prefix + (key,)
            lazy = isinstance(value, StackedComposite)
            is_comp = lazy or isinstance(value, Composite)
            # a nested Composite's keys come before its own (torchrl's order)
            if include_nested and lazy:  # the keys every stacked Composite has (torchrl's)
                yield from (full + unravel_key_to_tuple(sub) for sub in value.keys(True, leaves_only))
            elif include_nested and is_comp:
                yield from value._walk(include_nested, leaves_only, full)
            if not (leaves_only and is_comp):
                yield full if prefix else key

    def keys(self, include_nested=False, leaves_only=False, is_leaf=None):
        """The keys, as TensorDict's ``keys`` (nested ones with ``include_nested``)."""
        return KeysView(self, include_nested, leaves_only)

    _keys_view_name = "_CompositeKeys"

    def _has_key(self, key, include_nested, leaves_only):
        """``key in self.keys(include_nested, leaves_only)``: False for a key that is not one, and for a
        nested key without include_nested."""
        try:
            path = unravel_key_to_tuple(key)
        except TypeError:
            return False
        if len(path) > 1 and not include_nested:
            return False
        spec = self._lookup(path)
        return spec is not _MISSING and not (leaves_only and isinstance(spec, Composite))

    def values(self, include_nested=False, leaves_only=False, is_leaf=None):
        """The specs, in ``keys``' order."""
        return [self[k] for k in self.keys(include_nested, leaves_only)]

    def items(self, include_nested=False, leaves_only=False, is_leaf=None):
        """(key, spec) pairs, in ``keys``' order."""
        return [(k, self[k]) for k in self.keys(include_nested, leaves_only)]

    def __contains__(self, key):
        return key in self.keys(include_nested=True)

    def __iter__(self):
        return iter(self._specs)

    def __len__(self):
        return len(self._specs)

    def is_empty(self, recurse=False):
        """Whether the Composite has no leaf (with ``recurse``, empty nested Composites count as empty)."""
        if not recurse:
            return not self._specs
        return builtins.all(isinstance(v, Composite) and v.is_empty(True) for v in self._specs.values())

    def select(self, *keys, strict=True):
        """A Composite of the entries at ``keys`` (a KeyError for a missing one with ``strict``)."""
        out = Composite(shape=self.shape, device=self.device)
        for key in keys:
            if strict or key in self:
                out[key] = self[key].clone() if self[key] is not None else None
        return out

    def exclude(self, *keys):
        """A Composite without the entries at ``keys``."""
        out = self.clone()
        for key in keys:
            if key in out:
                del out[key]
        return out

    def empty(self):
        """A Composite of the same shape and device with no entries."""
        return Composite(shape=self.shape, device=self.device)

    # ---- sampling and membership ----
    def _build_td(self, fn, shape):
        shape = _extra_shape(shape)
        td = TensorDict(batch_size=shape + self.shape, device=self.device)
        for key, spec in self._specs.items():
            if spec is None:
                continue
            td.set(key, spec._build_td(fn, shape) if isinstance(spec, Composite) else fn(spec, shape))
        return td

    def rand(self, shape=None):
        """A TensorDict of batch size ``shape + self.shape`` with a random element of every leaf."""
        return self._build_td(lambda spec, s: spec.rand(s), shape)

    def zero(self, shape=None):
        """A TensorDict of every leaf's ``zero`` (``shape``: extra leading dims)."""
        return self._build_td(lambda spec, s: spec.zero(s), shape)

    def one(self, shape=None):
        """A TensorDict of every leaf's ``one`` (``shape``: extra leading dims)."""
        return self._build_td(lambda spec, s: spec.one(s), shape)

    def is_in(self, val):
        """True when every (non-None) leaf's entry is in ``val`` and in its spec. Extra entries are ignored."""
        if not isinstance(val, (TensorDict, dict)):
            return False
        for key, spec in self._specs.items():
            if spec is None:
                continue
            sub = val.get(key, None)
            if sub is None or not spec.is_in(sub):
                return False
        return True

    def project(self, val):
        """Projects each entry of ``val`` (a TensorDict) into its spec, in place; returns ``val``."""
        for key, spec in self._specs.items():
            if spec is None:
                continue
            sub = val.get(key, None)
            if sub is None:
                continue
            if isinstance(spec, Composite):
                spec.project(sub)
            elif not spec.is_in(sub):
                val.set(key, spec.project(sub))
        return val

    def encode(self, vals, ignore_device=False):
        """A dict of host values (nested dicts or tuple keys) as a TensorDict of batch ``shape``."""
        td = TensorDict(batch_size=self.shape, device=self.device)
        for key, value in vals.items():
            spec = self[key]
            if spec is None:
                td.set(key, _tensor(value, device=self.device))
            else:
                td.set(key, spec.encode(value))
        return td

    def _stack_different(self, specs, dim):
        return StackedComposite(specs, dim)

    def cardinality(self):
        """The number of values: the product of the leaves' cardinalities."""
        return math.prod(spec.cardinality() for spec in self.values(True, True) if spec is not None)

    def enumerate(self, use_mask=False):
        """Every combination of the leaves' values, as a TensorDict of batch ``[K, *shape]``."""
        keys = [key for key, spec in self.items(True, True) if spec is not None]
        values = [self[key].enumerate(use_mask) for key in keys]
        counts = [len(value) for value in values]
        grid = np.stack(np.meshgrid(*[np.arange(n) for n in counts], indexing="ij"), -1).reshape(-1, len(counts))
        out = TensorDict(batch_size=(len(grid),) + tuple(self.shape), device=self.device)
        for i, (key, value) in enumerate(zip(keys, values)):
            out.set(key, value[as_tensor(grid[:, i], device=value.device)])
        return out

    def memoize_encode(self, mode=True):
        """Turns the cached ``encode`` steps on (or off) in every leaf spec (each caches its own)."""
        super().memoize_encode(mode)
        for spec in self._specs.values():
            if spec is not None:
                spec.memoize_encode(mode)

    def erase_memoize_cache(self):
        """Drops the cached ``encode`` steps of every leaf spec."""
        for spec in self._specs.values():
            if spec is not None:
                spec.erase_memoize_cache()

    def to_numpy(self, val, safe=None):
        """A TensorDict of this spec as a nested dict of NumPy values."""
        out = {}
        for key, spec in self._specs.items():
            if spec is None:
                continue
            sub = val.get(key, None)
            if sub is not None:
                out[key] = spec.to_numpy(sub, safe=safe)
        return out

    def type_check(self, value, selected_keys=None):
        """Checks each entry of ``value`` present in the spec (``selected_keys``: only these); a
        tensor ``value`` is checked against the spec at the key ``selected_keys``."""
        if isinstance(value, Tensor) and isinstance(selected_keys, (str, tuple)):
            return self[selected_keys].type_check(value, selected_keys)
        for key, spec in self._specs.items():
            if spec is not None and (selected_keys is None or key in selected_keys) \
                    and key in value.keys():  # noqa: SIM118 - TensorDict has no __contains__
                spec.type_check(value.get(key), key)

    # ---- copies ----
    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        shape = self.shape if shape is None else shape
        out = Composite(shape=shape, device=self.device if device is None else device, data_cls=self.data_cls)
        n = len(self.shape)
        for key, spec in self._specs.items():
            if spec is not None:
                new_shape = shape + spec.shape[n:]
                spec = spec._with(shape=new_shape if new_shape != spec.shape else None, device=device,
                                  dtype=dtype, reshape=reshape)
            out._specs[key] = spec
        lead = len(shape) - n
        expanded = not reshape and lead >= 0 and tuple(shape[lead:]) == tuple(self.shape)
        return self._named_like(out, [None] * lead + self.names if expanded and self._names else None)

    def _indexed(self, index, shape):
        out = Composite(shape=shape, device=self.device, data_cls=self.data_cls)
        for key, spec in self._specs.items():
            out._specs[key] = None if spec is None else spec[index]
        return self._named_like(out, _names_after_index(self.names, index) if self._names else None)

    def unsqueeze(self, dim):
        """The spec with a new dim of size 1 at ``dim`` (an unnamed one)."""
        out = super().unsqueeze(dim)
        names = self.names
        names.insert(dim + len(self.shape) + 1 if dim < 0 else dim, None)
        return self._named_like(out, names if self._names else None)

    def squeeze(self, dim=None):
        """The spec without its size-1 dims (only ``dim``, when given), their names dropped."""
        out = super().squeeze(dim)
        if dim is None:
            names = [name for name, size in zip(self.names, self.shape) if size != 1]
        else:
            names = [name for d, name in enumerate(self.names) if d != dim % max(len(self.shape), 1)
                     or self.shape[d] != 1]
        return self._named_like(out, names if self._names else None)

    def clone(self):
        """A copy of the Composite and its specs."""
        return self._with()

    def to(self, dest):
        """The spec with every leaf on another device, or (given an rlpipe dtype) cast to it."""
        if dest is None:  # as torchrl: no device to move to
            return self
        if isinstance(dest, _dtypes.dtype):
            return self._with(dtype=dest)
        dev = resolve(dest)
        if dev is self.device and builtins.all(v is None or v.device == dev for v in self.values(True, True)):
            return self
        return self._with(device=dev)

    def __eq__(self, other):
        return (type(other) is type(self) and other.shape == self.shape and other.device == self.device
                and list(other._specs) == list(self._specs)
                and builtins.all(self._specs[k] == other._specs[k] for k in self._specs))

    def __repr__(self):
        entries = ",\n".join(_indent(f"{k}: {v!r}") for k, v in self._specs.items())
        sep = ",\n" if entries else ""
        return (f"Composite(\n{entries}{sep}    device={self.device},\n    shape={_shape_str(self.shape)},\n"
                f"    data_cls={self.data_cls})")


class StackedComposite(_LazyComposite, Composite):
    """Composite specs stacked along ``dim`` without being merged (torchrl's lazy stack, what
    ``rlpipe.stack`` gives for Composites that differ): a ``Composite`` (``isinstance`` holds, as
    torchrl's) whose entries are the keys every stacked spec has, ``spec[i]`` along the stack dim
    the i-th stacked spec, and whose samples are lazily stacked TensorDicts."""


def _is_key(key):
    """Whether ``key`` is an entry key (a string, or a non-empty tuple of keys) rather than an index."""
    return isinstance(key, str) or (isinstance(key, tuple) and bool(key) and builtins.all(map(_is_key, key)))


def _names_after_index(names, index):
    """The dim names left by ``index`` (ints drop a dim, None adds an unnamed one), or None when
    the index is not one of basic ints, slices, Ellipsis and None."""
    items = index if isinstance(index, tuple) else (index,)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        fill = len(names) - builtins.sum(item is not None for item in items if item is not Ellipsis)
        items = items[:at] + (slice(None),) * fill + items[at + 1:]
    out, dim = [], 0
    for item in items:
        if item is None:
            out.append(None)
        elif isinstance(item, int):
            dim += 1
        elif isinstance(item, slice):
            out.append(names[dim])
            dim += 1
        else:
            return None
    return out + names[dim:]


# ---- torchrl's former names ---------------------------------------------------------------------
BoundedTensorSpec = Bounded
UnboundedContinuousTensorSpec = UnboundedContinuous
UnboundedDiscreteTensorSpec = UnboundedDiscrete
DiscreteTensorSpec = Categorical
OneHotDiscreteTensorSpec = OneHot
MultiDiscreteTensorSpec = MultiCategorical
MultiOneHotDiscreteTensorSpec = MultiOneHot
BinaryDiscreteTensorSpec = Binary
CompositeSpec = Composite

