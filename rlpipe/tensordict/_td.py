"""``TensorDict``: a dict of tensors that share leading batch dimensions and acts like one tensor.

Behaviour follows the ``tensordict`` library (0.14): keys are strings or tuples of strings for
nested entries, every leaf's shape starts with ``batch_size``, and indexing, reshaping, stacking
and device moves apply to every leaf over the batch dimensions only.
"""
import json
import math
import os

import numpy as np

from .. import _ops, serialization as _serialization
from .._creation import as_tensor
from .._device import device as _device_cls, resolve
from .._tensor import Size, Tensor, wrap
from ..autograd.grad_mode import state as _grad_state
from ._math import TensorDictMath
from .keys import KeysView, unravel_key_to_tuple

_NO_DEFAULT = object()


def _as_batch_size(batch_size):
    if batch_size is None:
        return Size(())
    if isinstance(batch_size, int):
        return Size((batch_size,))
    try:
        return Size(int(s) for s in batch_size)
    except TypeError:
        raise TypeError(f"batch_size must be a sequence of ints, got {batch_size!r}") from None


def _is_key(index):
    return isinstance(index, str) or isinstance(index, tuple) and index and all(
        isinstance(i, str) or isinstance(i, tuple) and _is_key(i) for i in index)


def _shape_str(shape):
    return f"rlpipe.Size({list(shape)})"


class TensorDict(TensorDictMath):
    """A dictionary of tensors (and nested TensorDicts) whose shapes all start with ``batch_size``.

    >>> td = TensorDict({"obs": rlpipe.zeros(4, 3), "next": {"reward": rlpipe.zeros(4, 1)}}, batch_size=[4])
    >>> td[:2]["next", "reward"].shape
    rlpipe.Size([2, 1])
    """
    __slots__ = ("_tensordict", "_batch_size", "_device", "_locked", "__weakref__")

    def __init__(self, source=None, batch_size=None, device=None, names=None, non_blocking=None, lock=False,
                 **kwargs):
        self._tensordict = {}
        self._batch_size = _as_batch_size(batch_size)
        self._device = None if device is None else resolve(device)
        self._locked = False
        if source is None:
            source = {}
        if not hasattr(source, "items"):
            raise ValueError("A TensorDict source is expected to be a TensorDictBase sub-type or a dictionary, "
                             f"but type(source)={type(source).__name__}.")
        for key, value in (*source.items(), *kwargs.items()):
            self.set(key, value)

    @classmethod
    def _build(cls, entries, batch_size, device):
        """A TensorDict from already-checked entries (the fast path of every batch operation)."""
        td = cls.__new__(cls)
        td._tensordict = entries
        td._batch_size = batch_size
        td._device = device
        td._locked = False
        return td

    # ---- shape and device ----------------------------------------------------------------------
    @property
    def batch_size(self):
        return self._batch_size

    @batch_size.setter
    def batch_size(self, new):
        new = _as_batch_size(new)
        for value in self._tensordict.values():  # nested TensorDicts with fewer batch dims grow first
            if isinstance(value, TensorDict) and len(value.batch_size) < len(new):
                value.batch_size = new
        for key, value in self._tensordict.items():
            shape = value.batch_size if isinstance(value, TensorDict) else value.shape
            if tuple(shape[:len(new)]) != tuple(new):
                raise RuntimeError(f"the tensor {key!r} has shape {_shape_str(shape)} which is incompatible with "
                                   f"the batch-size {_shape_str(new)}.")
        self._batch_size = new

    shape = batch_size

    @property
    def batch_dims(self):
        return len(self._batch_size)

    @batch_dims.setter
    def batch_dims(self, value):
        raise RuntimeError("Setting batch dims on TensorDict instances is not allowed.")

    ndim = batch_dims

    def dim(self):
        return len(self._batch_size)

    def numel(self):
        return self._batch_size.numel()

    def size(self, dim=None):
        return self._batch_size if dim is None else self._batch_size[dim]

    @property
    def device(self):
        return self._device

    @device.setter
    def device(self, value):
        raise RuntimeError("device cannot be set using tensordict.device = device, because device cannot be "
                           "updated in-place. To update device, use tensordict.to(new_device), which will return a "
                           "new tensordict on the new device.")

    # ---- locking: a locked TensorDict accepts in-place writes only ----
    @property
    def is_locked(self):
        return self._locked

    def lock_(self):
        self._locked = True
        for value in self._tensordict.values():
            if isinstance(value, TensorDict):
                value.lock_()
        return self

    def unlock_(self):
        self._locked = False
        for value in self._tensordict.values():
            if isinstance(value, TensorDict):
                value.unlock_()
        return self

    def _check_unlocked(self):
        if self._locked:
            raise RuntimeError("Cannot modify locked TensorDict. For in-place modification, consider using the "
                               "`set_()` method and make sure the key is present.")

    def is_shared(self):
        return False

    # ---- entries ---------------------------------------------------------------------------------
    def _leaf(self, key, value):
        """``value`` checked (and converted) to live under ``key``: a tensor or TensorDict whose
        leading dims are the batch size, on this TensorDict's device."""
        if isinstance(value, dict):
            value = TensorDict(value, batch_size=self._batch_size, device=self._device)
        elif not isinstance(value, (Tensor, TensorDict)):
            try:
                value = as_tensor(value, device=self._device)
            except (TypeError, RuntimeError) as e:
                raise TypeError(f"TensorDict entry {key!r}: cannot store a {type(value).__name__} ({e})") from None
        if self._device is not None and value.device != self._device:
            value = value.to(self._device)
        shape = value.batch_size if isinstance(value, TensorDict) else value.shape
        n = len(self._batch_size)
        if tuple(shape[:n]) != tuple(self._batch_size):
            raise RuntimeError(f"batch dimension mismatch for key {key!r}: got batch_size="
                               f"{_shape_str(self._batch_size)} and value.shape={_shape_str(shape)}.")
        return value

    def _parent_of(self, path, create=False):
        """The TensorDict holding the last part of ``path``."""
        td = self
        for i, part in enumerate(path[:-1]):
            child = td._tensordict.get(part)
            if child is None and create:
                child = td._tensordict[part] = TensorDict._build({}, td._batch_size, td._device)
            if not isinstance(child, TensorDict):
                raise KeyError(f'key "{path[:i + 1] if i else part}" not found in TensorDict with keys '
                               f"{sorted(td._tensordict)}" if child is None else
                               f'key {path[:i + 1]!r} is a tensor, not a nested TensorDict')
            td = child
        return td

    def get(self, key, default=_NO_DEFAULT):
        if type(key) is str:  # the common case (every policy step), without the nested-key walk
            value = self._tensordict.get(key, _NO_DEFAULT)
            if value is not _NO_DEFAULT:
                return value
        path = unravel_key_to_tuple(key)
        try:
            parent = self._parent_of(path)
        except KeyError:
            if default is not _NO_DEFAULT:
                return default
            raise
        value = parent._tensordict.get(path[-1], _NO_DEFAULT)
        if value is _NO_DEFAULT:
            if default is not _NO_DEFAULT:
                return default
            raise KeyError(f'key "{key}" not found in TensorDict with keys {sorted(parent._tensordict)}')
        return value

    def set(self, key, value, inplace=False):
        """Stores ``value`` under ``key`` (nested keys create the intermediate TensorDicts)."""
        if (type(key) is str and type(value) is Tensor and not inplace and not self._locked
                and (self._device is None or value._device is self._device)
                and value._data.shape[:len(self._batch_size)] == self._batch_size):
            self._tensordict[key] = value  # the common case (every policy step), already checked
            return self
        path = unravel_key_to_tuple(key)
        if inplace and self.get(key, None) is not None:
            return self.set_(key, value)
        self._check_unlocked()
        parent = self._parent_of(path, create=True)
        parent._tensordict[path[-1]] = parent._leaf(key, value)
        return self

    def set_(self, key, value):
        """Copies ``value`` into the existing entry ``key`` (KeyError if there is none)."""
        current = self.get(key)
        if isinstance(current, TensorDict):
            current.update_(value)
        else:
            current.copy_(value if isinstance(value, Tensor) else as_tensor(value, device=current.device))
        return self

    def update(self, input_dict_or_td, clone=False, inplace=False, keys_to_update=None):
        """Sets every entry of ``input_dict_or_td``, merging nested TensorDicts (only ``keys_to_update``
        when given; nested keys allowed)."""
        if keys_to_update is not None:
            wanted = {unravel_key_to_tuple(k) for k in keys_to_update}
            source = input_dict_or_td if isinstance(input_dict_or_td, TensorDict) else \
                TensorDict(input_dict_or_td, batch_size=self._batch_size, device=self._device)
            for key, value in source.items(include_nested=True, leaves_only=True):
                if unravel_key_to_tuple(key) in wanted:
                    self.set(key, value.clone() if clone else value, inplace=inplace)
            return self
        for key, value in input_dict_or_td.items():
            if clone and hasattr(value, "clone"):
                value = value.clone()
            current = self._tensordict.get(key) if isinstance(key, str) else self.get(key, None)
            if isinstance(current, TensorDict) and isinstance(value, (TensorDict, dict)):
                current.update(value, clone=clone, inplace=inplace)
            elif inplace and current is not None:
                self.set_(key, value)
            else:
                self.set(key, value)
        return self

    def update_(self, input_dict_or_td, clone=False):
        for key, value in input_dict_or_td.items():
            self.set_(key, value.clone() if clone else value)
        return self

    def setdefault(self, key, default, inplace=False):
        if self.get(key, None) is None:
            self.set(key, default)
        return self.get(key)

    def pop(self, key, default=_NO_DEFAULT):
        self._check_unlocked()
        path = unravel_key_to_tuple(key)
        try:
            parent = self._parent_of(path)
            return parent._tensordict.pop(path[-1])
        except KeyError:
            if default is not _NO_DEFAULT:
                return default
            raise KeyError(f'key "{key}" not found in TensorDict with keys {sorted(self._tensordict)}') from None

    def __delitem__(self, key):
        self.pop(key)

    def del_(self, key):
        self.pop(key)
        return self

    def rename_key_(self, old_key, new_key, safe=False):
        if safe and self.get(new_key, None) is not None:
            raise KeyError(f'key "{new_key}" already present in TensorDict.')
        self.set(new_key, self.pop(old_key))
        return self

    def select(self, *keys, inplace=False, strict=True):
        """A TensorDict with only ``keys`` (nested keys keep their parents)."""
        out = TensorDict._build({}, self._batch_size, self._device)
        for key in keys:
            value = self.get(key, None if not strict else _NO_DEFAULT)
            if value is not None:
                path = unravel_key_to_tuple(key)
                parent = out._parent_of(path, create=True)
                parent._tensordict[path[-1]] = value
        if inplace:
            self._tensordict = out._tensordict
            return self
        return out

    def exclude(self, *keys, inplace=False):
        """A TensorDict without ``keys``."""
        out = self.copy()
        for key in keys:
            path = unravel_key_to_tuple(key)
            try:
                parent = out._parent_of(path)
            except KeyError:
                continue
            if len(path) > 1:  # copy the nested TensorDicts on the way, to leave self unchanged
                parent = out
                for part in path[:-1]:
                    parent._tensordict[part] = parent._tensordict[part].copy()
                    parent = parent._tensordict[part]
            parent._tensordict.pop(path[-1], None)
        if inplace:
            self._tensordict = out._tensordict
            return self
        return out

    def keys(self, include_nested=False, leaves_only=False, is_leaf=None):
        return KeysView(self, include_nested, leaves_only)

    _keys_view_name = "_TensorDictKeysView"  # how tensordict prints keys()

    def _has_key(self, key, include_nested, leaves_only):
        """``key in self.keys(include_nested, leaves_only)``; a nested key needs include_nested (TypeError)."""
        path = unravel_key_to_tuple(key)
        if len(path) > 1 and not include_nested:
            raise TypeError(f"Nested keys such as {key!r} can only be looked up in keys(include_nested=True)")
        value = self.get(path, None)
        return value is not None and not (leaves_only and isinstance(value, TensorDict))

    def _walk(self, include_nested, leaves_only, prefix=()):
        # tensordict's order: a nested TensorDict's keys come before the key of the TensorDict itself
        for key, value in self._tensordict.items():
            nested = isinstance(value, TensorDict)
            full = prefix + (key,)
            if nested and include_nested:
                yield from value._walk(include_nested, leaves_only, full)
            if not (leaves_only and nested):
                yield full if prefix else key

    def values(self, include_nested=False, leaves_only=False):
        return [self.get(k) for k in self._walk(include_nested, leaves_only)]

    def items(self, include_nested=False, leaves_only=False):
        return [(k, self.get(k)) for k in self._walk(include_nested, leaves_only)]

    def __contains__(self, key):
        raise NotImplementedError("TensorDict does not support membership checks with the `in` keyword. If you want "
                                  "to check if a particular key is in your TensorDict, please use `key in "
                                  "tensordict.keys()` instead.")

    def __len__(self):
        return self._batch_size[0] if self._batch_size else 0

    def __iter__(self):
        return iter(self.unbind(0) if self._batch_size else ())

    def __bool__(self):
        raise RuntimeError("Converting a tensordict to boolean value is not permitted")

    def is_empty(self):
        return not any(True for _ in self._walk(True, True))

    def empty(self, recurse=False):
        """A TensorDict of the same batch size with no leaves (nested TensorDicts kept if ``recurse``)."""
        entries = {k: v.empty(recurse) for k, v in self._tensordict.items() if isinstance(v, TensorDict)} \
            if recurse else {}
        return TensorDict._build(entries, self._batch_size, self._device)

    # ---- per-leaf transformations ------------------------------------------------------------------
    def _map(self, fn, batch_size=None, device=_NO_DEFAULT):
        """A new TensorDict with ``fn`` applied to every leaf (nested TensorDicts recursed)."""
        batch_size = self._batch_size if batch_size is None else batch_size
        device = self._device if device is _NO_DEFAULT else device
        entries = {}
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDict):
                nested = batch_size + value._batch_size[len(self._batch_size):]
                entries[key] = value._map(fn, nested, device)
            else:
                entries[key] = fn(value)
        return TensorDict._build(entries, batch_size, device)

    def apply(self, fn, *others, batch_size=None, device=_NO_DEFAULT, inplace=False, names=None,
              filter_empty=None, default=_NO_DEFAULT, call_on_nested=False):
        """Calls ``fn(leaf, *other_leaves)`` on every leaf; leaves where fn returns None are dropped."""
        return self._apply_named(lambda key, value, *rest: fn(value, *rest), others, batch_size, device, inplace,
                                 nested_keys=False, default=default)

    def named_apply(self, fn, *others, nested_keys=False, batch_size=None, device=_NO_DEFAULT, inplace=False,
                    default=_NO_DEFAULT, **kwargs):
        """Like apply, with the key passed first: ``fn(key, leaf, *other_leaves)``."""
        return self._apply_named(fn, others, batch_size, device, inplace, nested_keys, default)

    def _apply_named(self, fn, others, batch_size, device, inplace, nested_keys, default, prefix=()):
        batch_size = self._batch_size if batch_size is None else _as_batch_size(batch_size)
        device = self._device if device is _NO_DEFAULT else device
        entries = {}
        for key, value in self._tensordict.items():
            rest = [o.get(key) if default is _NO_DEFAULT else o.get(key, default) for o in others]
            full = prefix + (key,)
            if isinstance(value, TensorDict):
                out = value._apply_named(fn, rest, batch_size + value._batch_size[len(self._batch_size):],
                                         device, inplace, nested_keys, default, full)
            else:
                out = fn(full if nested_keys and prefix else key, value, *rest)
                if out is None:
                    continue
                if inplace and out is not value:
                    value.copy_(out)
                    out = value
            entries[key] = out
        if inplace:
            self._tensordict.update(entries)
            return self
        return TensorDict._build(entries, batch_size, device)

    def apply_(self, fn, *others):
        return self.apply(fn, *others, inplace=True)

    def copy(self):
        """A shallow copy: new TensorDicts, the same tensors."""
        return self._map(lambda t: t)

    def clone(self, recurse=True):
        return self._map(lambda t: t.clone()) if recurse else self.copy()

    def detach(self):
        return self._map(lambda t: t.detach())

    def to_dict(self):
        return {k: v.to_dict() if isinstance(v, TensorDict) else v for k, v in self._tensordict.items()}

    def numpy(self):
        """A nested dict of NumPy arrays (copied from a GPU)."""
        return {k: v.numpy() if isinstance(v, TensorDict) else v.detach().cpu().numpy()
                for k, v in self._tensordict.items()}

    def flatten_keys(self, separator=".", inplace=False):
        out = TensorDict._build({separator.join(k) if isinstance(k, tuple) else k: v
                                 for k, v in self.items(include_nested=True, leaves_only=True)},
                                self._batch_size, self._device)
        if inplace:
            self._tensordict = out._tensordict
            return self
        return out

    def unflatten_keys(self, separator=".", inplace=False):
        out = TensorDict._build({}, self._batch_size, self._device)
        for key, value in self.items():
            path = tuple(key.split(separator))
            parent = out._parent_of(path, create=True)
            parent._tensordict[path[-1]] = value.unflatten_keys(separator) if isinstance(value, TensorDict) else value
        if inplace:
            self._tensordict = out._tensordict
            return self
        return out

    # ---- devices and dtypes ------------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """``to(device)`` moves every leaf (and sets ``device``); ``to(dtype)`` casts floating and all
        leaves as Tensor.to does."""
        target = kwargs.get("device")
        for a in args:
            if isinstance(a, (str, _device_cls)) or isinstance(a, int) and not isinstance(a, bool):
                target = a
        target = None if target is None else resolve(target)
        moved = self._map(lambda t: t.to(*args, **kwargs), device=self._device if target is None else target)
        return moved

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}")

    # ---- indexing ----------------------------------------------------------------------------------
    def _batch_index(self, index):
        """``index`` made to address batch dims only: '...' expands over the batch dims, not the
        features, and tensors/arrays become backend arrays once."""
        items = index if isinstance(index, tuple) else (index,)
        if any(i is Ellipsis for i in items):
            used = sum(0 if i is None or i is Ellipsis else getattr(i, "ndim", 1)
                       if getattr(getattr(i, "dtype", None), "name", "") == "bool" else 1 for i in items)
            fill = (slice(None),) * max(len(self._batch_size) - used, 0)
            expanded = []
            for i in items:
                expanded.extend(fill if i is Ellipsis else (i,))
            items = tuple(expanded)
        return items if len(items) != 1 else items[0]

    def __getitem__(self, index):
        if _is_key(index):
            return self.get(index)
        if isinstance(index, list) and index and all(isinstance(i, (str, tuple)) for i in index):
            return self.select(*index)
        if not self._batch_size and index is not Ellipsis and index is not None:
            raise RuntimeError("indexing a tensordict with td.batch_dims==0 is not permitted")
        return self._index(self._batch_index(index))

    def _index(self, index):
        new_batch = self._indexed_batch_size(index)
        fast = None
        if isinstance(index, Tensor) and index._data.dtype.kind in "iu":
            fast = index._data if index._device is self._leaf_device() else None
        elif isinstance(index, np.ndarray) and index.dtype.kind in "iu" and self._leaf_device() in (None, "cpu"):
            fast = index
        return self._index_with(index, fast, new_batch)

    def _index_with(self, index, fast, new_batch):
        entries = {}
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDict):
                entries[key] = value._index_with(index, fast, new_batch + value._batch_size[len(self._batch_size):])
            elif fast is not None and not (value._requires_grad and _grad_state[0]):
                # take() gathers rows several times faster than fancy indexing; no graph to record
                entries[key] = wrap(value._data.take(fast, axis=0), value._device)
            else:
                entries[key] = value[index]
        return TensorDict._build(entries, new_batch, self._device)

    def _leaf_device(self):
        for value in self._tensordict.values():
            return value._leaf_device() if isinstance(value, TensorDict) else value._device
        return None

    def _indexed_batch_size(self, index):
        if isinstance(index, (Tensor, np.ndarray)) and index.ndim == 1 and \
                (index.dtype.name if isinstance(index, np.ndarray) else index.dtype.name) != "bool":
            return Size((index.shape[0],) + tuple(self._batch_size[1:]))
        probe = wrap(np.broadcast_to(np.zeros((), np.uint8), tuple(self._batch_size)))
        return Size(probe[index].shape)

    def __setitem__(self, index, value):
        if _is_key(index):
            self.set(index, value)
            return
        index = self._batch_index(index)
        if isinstance(value, (TensorDict, dict)):
            for key, sub in value.items():
                target = self.get(key)
                if isinstance(target, TensorDict):
                    target[index] = sub
                else:
                    target[index] = sub
        else:
            for leaf in self.values(include_nested=True, leaves_only=True):
                leaf[index] = value

    # ---- batch-shape operations ----------------------------------------------------------------------
    def _feature(self, value):
        return tuple(value.shape[len(self._batch_size):])

    def _reshaped(self, new_batch, view=False):
        new_batch = Size(_ops._infer_shape(_ops._shape_arg(new_batch), self.numel()))

        def reshape(t):
            shape = new_batch + self._feature(t)
            return t.view(shape) if view else t.reshape(shape)
        return self._map(reshape, new_batch)

    def reshape(self, *shape):
        return self._reshaped(shape)

    def view(self, *shape):
        return self._reshaped(shape, view=True)

    def _batch_dim(self, dim, extra=0, what=None):
        n = len(self._batch_size) + extra
        if not -n <= dim < max(n, 1):
            message = f"dim {dim} is out of range for a TensorDict with batch_size {_shape_str(self._batch_size)}"
            if what is not None:  # tensordict's wording for squeeze, unsqueeze and gather
                raise RuntimeError(f"{what} is allowed for dims comprised between -td.batch_dims and "
                                   f"td.batch_dims{'' if extra == 0 else ' + 1'} only. Got dim={dim} ({message})")
            raise IndexError(message)
        return dim % n if n else 0

    def flatten(self, start_dim=0, end_dim=-1):
        s, e = self._batch_dim(start_dim), self._batch_dim(end_dim)
        if e < s:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        n = 1
        for d in range(s, e + 1):
            n *= self._batch_size[d]
        return self._reshaped(self._batch_size[:s] + (n,) + self._batch_size[e + 1:])

    def unflatten(self, dim, unflattened_size):
        d = self._batch_dim(dim)
        inner = _ops._infer_shape(tuple(unflattened_size), self._batch_size[d])
        return self._reshaped(self._batch_size[:d] + tuple(inner) + self._batch_size[d + 1:])

    def squeeze(self, dim=None):
        if dim is None:
            return self._reshaped(tuple(s for s in self._batch_size if s != 1))
        d = self._batch_dim(dim, what="squeezing")
        if self._batch_size[d] != 1:
            return self
        return self._reshaped(self._batch_size[:d] + self._batch_size[d + 1:])

    def unsqueeze(self, dim):
        d = self._batch_dim(dim, extra=1, what="unsqueezing")
        return self._reshaped(self._batch_size[:d] + (1,) + self._batch_size[d:])

    def permute(self, *dims):
        dims = tuple(self._batch_dim(d) for d in _ops._shape_arg(dims))
        if sorted(dims) != list(range(len(self._batch_size))):
            raise ValueError(f"Cannot compute the permutation, got dims={dims} but expected a permutation of the "
                             f"{len(self._batch_size)} batch dims.")
        new_batch = Size(self._batch_size[d] for d in dims)
        return self._map(lambda t: t.permute(*dims, *range(len(dims), t.ndim)), new_batch)

    def transpose(self, dim0, dim1):
        order = list(range(len(self._batch_size)))
        a, b = self._batch_dim(dim0), self._batch_dim(dim1)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    def expand(self, *shape):
        new_batch = Size(_ops._shape_arg(shape))
        if len(new_batch) < len(self._batch_size):
            raise RuntimeError(f"the number of sizes provided ({len(new_batch)}) must be greater or equal to the "
                               f"number of batch dimensions ({len(self._batch_size)})")
        return self._map(lambda t: t.expand(new_batch + self._feature(t)), new_batch)

    def _pieces(self, sizes, dim):
        d = self._batch_dim(dim)
        out, at = [], 0
        for n in sizes:
            out.append(self[(slice(None),) * d + (slice(at, at + n),)])
            at += n
        return tuple(out)

    def split(self, split_size, dim=0):
        n = self._batch_size[self._batch_dim(dim)]
        if isinstance(split_size, int):
            sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
        else:
            sizes = list(split_size)
            if sum(sizes) != n:
                raise RuntimeError(f"split sizes {sizes} do not sum to the size {n} of dim {dim}")
        return self._pieces(sizes, dim)

    def chunk(self, chunks, dim=0):
        n = self._batch_size[self._batch_dim(dim)]
        return self.split(max(-(-n // chunks), 1), dim)

    def unbind(self, dim=0):
        d = self._batch_dim(dim)
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self._batch_size[d]))

    def _expanded(self, t, like):
        """``t`` (shaped like a batch prefix) broadcast over ``like``'s feature dims."""
        extra = like.ndim - t.ndim
        return t.reshape(tuple(t.shape) + (1,) * extra).expand(tuple(t.shape) + tuple(like.shape[t.ndim:]))

    def gather(self, dim, index):
        if not -len(self._batch_size) <= dim < len(self._batch_size):
            raise RuntimeError(f"Cannot gather tensordict with shape {_shape_str(self._batch_size)} along dim {dim}.")
        d = self._batch_dim(dim)
        new_batch = Size(index.shape)
        return self._map(lambda t: t.gather(d, self._expanded(index, t).contiguous()), new_batch)

    def masked_fill(self, mask, value):
        return self._map(lambda t: t.masked_fill(self._expanded(mask, t), value))

    def masked_fill_(self, mask, value):
        for t in self.values(True, True):
            t.masked_fill_(self._expanded(mask, t), value)
        return self

    def zero_(self):
        for t in self.values(True, True):
            t.zero_()
        return self

    def fill_(self, key, value):
        """Fills the entry ``key`` (every leaf under it) with ``value``."""
        target = self.get(key)
        for t in (target.values(True, True) if isinstance(target, TensorDict) else [target]):
            t.fill_(value)
        return self

    # ---- joining ------------------------------------------------------------------------------------
    @classmethod
    def _join_tensordicts(cls, tds, dim, how):
        """rlpipe.stack / rlpipe.cat of TensorDicts: every TensorDict needs the same keys."""
        first = tds[0]
        keys = list(first._tensordict)
        for i, td in enumerate(tds):
            if not isinstance(td, TensorDict):
                raise TypeError(f"{how}: expected TensorDicts, got {type(td).__name__} at position {i}")
            if td._tensordict.keys() != first._tensordict.keys():
                raise KeyError(f"{how}: the TensorDicts have different keys: {sorted(first._tensordict)} and "
                               f"{sorted(td._tensordict)} (position {i})")
        if how == "stack":
            for i, td in enumerate(tds):
                if td._batch_size != first._batch_size:
                    raise RuntimeError(f"stack expects every TensorDict to have the same batch size, got "
                                       f"{_shape_str(first._batch_size)} and {_shape_str(td._batch_size)} "
                                       f"(position {i})")
            d = first._batch_dim(dim, extra=1)
            new_batch = first._batch_size[:d] + (len(tds),) + first._batch_size[d:]
        else:
            d = first._batch_dim(dim)
            new_batch = first._batch_size[:d] + (sum(td._batch_size[d] for td in tds),) + first._batch_size[d + 1:]
        entries = {}
        for key in keys:
            values = [td._tensordict[key] for td in tds]
            if isinstance(values[0], TensorDict):
                entries[key] = cls._join_tensordicts(values, d, how)
            elif not any(v._requires_grad for v in values) and all(v._device is values[0]._device for v in values):
                xp = values[0]._device._backend.xp
                arrays = [v._data for v in values]
                try:
                    joined = xp.stack(arrays, d) if how == "stack" else xp.concatenate(arrays, d)
                except ValueError:
                    raise RuntimeError(f"{how}: the entries {key!r} have shapes "
                                       f"{[list(v.shape) for v in values]} that cannot be joined") from None
                entries[key] = wrap(joined, values[0]._device)
            else:
                entries[key] = (_ops.stack if how == "stack" else _ops.cat)(values, d)
        return TensorDict._build(entries, Size(new_batch), first._device)

    @classmethod
    def stack(cls, tds, dim=0):
        return cls._join_tensordicts(list(tds), dim, "stack")

    @classmethod
    def cat(cls, tds, dim=0):
        return cls._join_tensordicts(list(tds), dim, "cat")

    # ---- comparison ------------------------------------------------------------------------------------
    def _compare(self, other, op):
        if isinstance(other, TensorDict):
            return self.apply(op, other)
        return self._map(lambda t: op(t, other))

    def __eq__(self, other):
        return self._compare(other, _ops.eq)

    def __ne__(self, other):
        return self._compare(other, _ops.ne)

    __hash__ = object.__hash__

    def all(self, dim=None):
        """True when every element of every leaf is; with ``dim``, a TensorDict reduced over that batch dim."""
        return self._reduce_bool("all", dim)

    def any(self, dim=None):
        return self._reduce_bool("any", dim)

    def _reduce_bool(self, how, dim):
        if dim is None:
            return (all if how == "all" else any)(bool(getattr(t, how)()) for t in self.values(True, True))
        if not -len(self._batch_size) <= dim < len(self._batch_size):
            raise RuntimeError("dim must be greater than or equal to -tensordict.batch_dims and smaller than "
                               f"tensordict.batch_dims, got dim={dim} with batch_dims={len(self._batch_size)}")
        d = dim % len(self._batch_size)
        return self._map(lambda t: getattr(t, how)(d), self._batch_size[:d] + self._batch_size[d + 1:])

    # ---- memory-mapped storage ------------------------------------------------------------------------
    def memmap_(self, prefix=None, copy_existing=False, num_threads=0):
        """Moves every leaf into a NumPy memory-mapped file under ``prefix`` (one ``.npy`` file per
        leaf, one folder and ``meta.json`` per nested TensorDict), so the data can exceed RAM and
        outlive the process; then locks the TensorDict (in-place writes only).

        Over an older checkpoint, its ``meta.json`` goes first and the new one is written last, so
        a save interrupted half-way leaves a folder that ``load_memmap`` refuses, never a mix."""
        if prefix is None:
            import tempfile
            prefix = tempfile.mkdtemp(prefix="rlpipe-memmap-")
        os.makedirs(prefix, exist_ok=True)
        meta_path = os.path.join(prefix, "meta.json")
        if os.path.lexists(meta_path):
            os.remove(meta_path)
        leaves, nested = {}, []
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDict):
                value.memmap_(os.path.join(prefix, key))
                nested.append(key)
                continue
            if value.device.type != "cpu":
                raise RuntimeError(f"memmap_: {key!r} is on {value.device}; move the TensorDict to the CPU first")
            host = value.detach()._data
            target = np.lib.format.open_memmap(os.path.join(prefix, key + ".memmap"), mode="w+", dtype=host.dtype,
                                               shape=host.shape)
            target[...] = host
            target.flush()
            leaves[key] = {"shape": list(host.shape), "dtype": value.dtype.name}
            self._tensordict[key] = wrap(target)
        meta = {"format": "rlpipe-tensordict-memmap", "version": 2, "batch_size": list(self._batch_size),
                "leaves": leaves, "nested": nested}
        _serialization._write_atomically(meta_path, lambda f: f.write(json.dumps(meta).encode()))
        return self.lock_()

    def memmap(self, prefix=None):
        """A memory-mapped copy (this TensorDict is left as it is)."""
        return self.clone().memmap_(prefix)

    def is_memmap(self):
        return all(isinstance(t._data, np.memmap) for t in self.values(True, True))

    @classmethod
    def load_memmap(cls, prefix):
        """The TensorDict that memmap_(prefix) wrote (any nested folder loads on its own too).

        Loading never changes the files: leaves are mapped copy-on-write, so the TensorDict is
        writable in place but its writes stay in memory (tensordict maps them read-write, and its
        writes reach the files). Each leaf file must hold exactly the bytes of the shape and dtype
        ``meta.json`` records; otherwise a RuntimeError names the leaf."""
        from .. import _dtypes
        try:
            with open(os.path.join(prefix, "meta.json")) as f:
                meta = json.load(f)
            if not isinstance(meta, dict) or meta.get("format") != "rlpipe-tensordict-memmap":
                raise ValueError("not an rlpipe TensorDict memmap directory")
            td = cls(batch_size=_stored_batch_size(meta["batch_size"]))
            for key, leaf in meta["leaves"].items():
                if not isinstance(key, str) or "/" in key or key.startswith("."):
                    raise ValueError(f"bad key {key!r}")
                try:
                    array = _serialization.open_npy(os.path.join(prefix, key + ".memmap"), mmap_mode="c")
                except ValueError as e:
                    raise ValueError(f"leaf {key!r}: {e}") from None
                if list(array.shape) != leaf["shape"] or array.dtype != getattr(_dtypes, leaf["dtype"]).np:
                    raise ValueError(f"{key} does not match its recorded shape or dtype")
                td._tensordict[key] = td._leaf(key, wrap(array))
            for key in meta["nested"]:
                if not isinstance(key, str) or "/" in key or key.startswith("."):
                    raise ValueError(f"bad key {key!r}")
                td._tensordict[key] = td._leaf(key, cls.load_memmap(os.path.join(prefix, key)))
        except RecursionError:
            raise RuntimeError(f"load_memmap: {prefix!r}: meta.json is nested too deeply") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise RuntimeError(f"load_memmap: {prefix!r} holds no valid memory-mapped TensorDict ({e})") from None
        return td.lock_()

    # ---- printing --------------------------------------------------------------------------------------
    def __repr__(self):
        fields = []
        for key, value in sorted(self._tensordict.items()):  # tensordict lists fields by key
            if isinstance(value, TensorDict):
                text = repr(value)
            else:
                text = (f"Tensor(shape={_shape_str(value.shape)}, device={value.device}, dtype={value.dtype}, "
                        f"is_shared={value.is_shared()})")
            fields.append(f"{key}: " + text.replace("\n", "\n    "))
        body = ",\n        ".join(f.replace("\n", "\n    ") for f in fields)
        return (f"{type(self).__name__}(\n    fields={{\n        {body}}},\n"
                f"    batch_size={_shape_str(self._batch_size)},"
                f"\n    device={self._device},\n    is_shared=False)") if fields else \
            (f"{type(self).__name__}(\n    fields={{\n    }},\n    batch_size={_shape_str(self._batch_size)},"
             f"\n    device={self._device},\n    is_shared=False)")


def _stored_batch_size(batch_size):
    """A batch size read from a checkpoint, checked: a list of ints >= 0 whose product fits in int64."""
    if (not isinstance(batch_size, list) or len(batch_size) > 64
            or not all(type(n) is int and n >= 0 for n in batch_size) or math.prod(batch_size) >= 1 << 63):
        raise ValueError(f"batch_size should be a list of at most 64 ints >= 0 whose product fits in int64, "
                         f"got {batch_size!r}")
    return batch_size


def _to_state(td):
    """What rlpipe.save stores for a TensorDict: plain data (nested TensorDicts are stored the same way)."""
    return {"batch_size": list(td.batch_size), "device": None if td.device is None else str(td.device),
            "entries": dict(td._tensordict)}


def _from_state(state):
    td = TensorDict(batch_size=_stored_batch_size(state["batch_size"]), device=state["device"])
    if not isinstance(state["entries"], dict):
        raise ValueError(f"entries should be a dict, got {type(state['entries']).__name__}")
    for key, value in state["entries"].items():
        td.set(key, value)
    return td
