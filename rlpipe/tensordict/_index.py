"""Indexing the batch dims: ``td[index]`` (views of basic indices, fast row gathers for integer
indices), ``td[index] = value`` (every check before any write), and ``set_at_``/``get_at``/``update_at_``."""
import numbers

import numpy as np

from .._creation import zeros as _zeros
from .._tensor import Size, Tensor, wrap, size_repr as _shape_str
from ..autograd.grad_mode import state as _grad_state
from ._common import _INT_INDEX_CHARS, _MASK_DTYPES, _NAMES_USED, _NO_DEFAULT, _RAISE, _is_key
from ._names import _indexed_names
from .base import TensorDictBase, _non_tensor_value


class _IndexMixin:
    """Reading and writing at an index of the batch dims (see the module docstring)."""
    __slots__ = ()

    def _batch_index(self, index):
        """``index`` made to address batch dims only: '...' expands over the batch dims, not the
        features, and tensors/arrays become backend arrays once."""
        items = index if isinstance(index, tuple) else (index,)
        if type(index) is tuple and range in map(type, index):
            items = index = tuple(list(i) if type(i) is range else i for i in items)
        if any(i is Ellipsis for i in items):
            used = sum(0 if i is None or i is Ellipsis else getattr(i, "ndim", 1)
                       if getattr(getattr(i, "dtype", None), "name", "") in _MASK_DTYPES else 1 for i in items)
            fill = (slice(None),) * max(len(self._batch_size) - used, 0)
            expanded = []
            for i in items:
                expanded.extend(fill if i is Ellipsis else (i,))
            items = tuple(expanded)
        return items if len(items) != 1 else items[0]

    def __getitem__(self, index):
        if _is_key(index):
            return _non_tensor_value(self.get(index, _RAISE))
        if isinstance(index, list) and index and all(isinstance(i, (str, tuple)) for i in index):
            return self.select(*index)
        if type(index) is range:
            index = list(index)
        if not self._batch_size and not _adds_dims_only(index):
            raise RuntimeError("indexing a tensordict with td.batch_dims==0 is not permitted")
        index = self._batch_index(index)
        out = self._index(index)
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        if names is not None:
            names = _indexed_names(names, index)
            if names is not None and len(names) == len(out._batch_size):
                out._set_names(names)
        return out

    def _index(self, index):
        if getattr(self, "_memmap_state", False) is True and _is_basic_index(index):
            # a view of a memory-mapped TensorDict is memory-mapped and locked (a gather by tensor,
            # list or mask is a plain copy), as in tensordict
            return self._index_plain(index).lock_()._mark_memmap()
        return self._index_plain(index)

    def _index_plain(self, index):
        new_batch = self._indexed_batch_size(index)
        fast = None
        if isinstance(index, Tensor) and index._data.dtype.char in _INT_INDEX_CHARS:
            fast = index._data if index._device is self._leaf_device() else None
        elif isinstance(index, np.ndarray) and index.dtype.char in _INT_INDEX_CHARS and \
                self._leaf_device() in (None, "cpu"):
            fast = index
        return self._index_with(index, fast, new_batch)

    def _index_with(self, index, fast, new_batch):
        entries = {}
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDictBase):
                entries[key] = value._index_with(index, fast, new_batch + value._batch_size[len(self._batch_size):])
            elif fast is not None and not (value._requires_grad and _grad_state.grad):
                # take() gathers rows several times faster than fancy indexing; no graph to record
                entries[key] = wrap(value._data.take(fast, axis=0), value._device)
            else:
                entries[key] = value[index]
        return self._build(entries, new_batch, self._device)

    def _leaf_device(self):
        for value in self._tensordict.values():
            return value._leaf_device() if isinstance(value, TensorDictBase) else value._device
        return None

    def _indexed_batch_size(self, index):
        if isinstance(index, (Tensor, np.ndarray)) and index.ndim == 1 and \
                index.dtype.name not in _MASK_DTYPES:
            return Size((index.shape[0],) + tuple(self._batch_size[1:]))
        probe = wrap(np.broadcast_to(np.zeros((), np.uint8), tuple(self._batch_size)))
        try:
            return Size(probe[index].shape)
        except IndexError as e:
            if "too many indices" in str(e):  # torch's wording
                raise IndexError(f"too many indices for tensor of dimension {len(self._batch_size)}") from None
            raise

    def __setitem__(self, index, value):
        """``td[key] = value`` sets an entry; ``td[index] = other`` writes ``other`` (a TensorDict, a
        dict or a tensor/number for every leaf) at ``index`` of the batch dims. Keys ``other`` has
        and self lacks are created (zero-filled outside ``index``), as in tensordict, so a
        ``TensorDict(batch_size=[N])`` can be filled row by row."""
        if _is_key(index):
            self.set(index, value)
            return
        if type(index) is range:
            index = list(index)
        index = self._batch_index(index)
        if isinstance(value, (TensorDictBase, dict)):
            value = self._fit_to_index(index, value)
            n_self, n_val = len(self._batch_size), len(value._batch_size)
            self._write_at(index, value, n_self, n_val, (), dry=True)  # every check before any write
            self._write_at(index, value, n_self, n_val, (), dry=False)
        else:
            for leaf in self.values(include_nested=True, leaves_only=True):
                leaf[index] = value

    def _fit_to_index(self, index, value):
        """``value`` (TensorDict or dict) as a TensorDict of the batch size ``self[index]`` has:
        expanded on the left when its batch size is a suffix of that, else re-batched."""
        target = self._indexed_batch_size(index)
        if not isinstance(value, TensorDictBase):
            return self._dense_type(value, batch_size=target, device=self._device)
        if value._batch_size == target:
            return value
        n = len(value._batch_size)
        if n and tuple(target[len(target) - n:]) == tuple(value._batch_size):
            return value.expand(target)
        try:
            fitted = value.copy()
            fitted.batch_size = target
            return fitted
        except RuntimeError:
            raise RuntimeError(f"indexed destination TensorDict batch size is {_shape_str(target)} (batch_size = "
                               f"{_shape_str(self._batch_size)}, index={index!r}), which differs from the source "
                               f"batch size {_shape_str(value._batch_size)}") from None

    def _write_at(self, index, value, n_self, n_val, prefix, dry):
        """Writes every leaf of ``value`` at ``index`` (``n_self``/``n_val``: the batch dims of the
        root and of the value). ``dry`` only checks: missing keys may be created, shapes fit."""
        for key, sub in value._tensordict.items():
            full = prefix + (key,)
            dest = self._tensordict.get(key)
            if getattr(sub, "_is_non_tensor", False) or getattr(dest, "_is_non_tensor", False):
                self._check_unlocked() if dest is None else None
                if not dry:  # non-tensor data: the entry is replaced by one holding the new objects
                    self._tensordict[key] = self._non_tensor_types[3](dest, index, sub, self._batch_size, self._device)
                continue
            if dest is None:
                self._check_unlocked()
                if dry:
                    continue
                root_batch = tuple(self._batch_size[:n_self])
                if isinstance(sub, TensorDictBase):
                    dest = self._dense_type._build({}, Size(root_batch + tuple(sub._batch_size[n_val:])), self._device)
                else:
                    dest = _zeros(root_batch + tuple(sub.shape[n_val:]), dtype=sub.dtype,
                                      device=self._device if self._device is not None else sub.device)
                self._tensordict[key] = dest
            if isinstance(sub, TensorDictBase) != isinstance(dest, TensorDictBase):
                raise TypeError(f"td[index] = value: the entry {full if prefix else key!r} is a "
                                f"{type(dest).__name__} here and a {type(sub).__name__} in the value")
            if isinstance(sub, TensorDictBase):
                if isinstance(sub, self._lazy_type) and not isinstance(dest, self._lazy_type):
                    sub = sub.contiguous()  # a dense entry takes a lazy stack's stacked entries
                dest._write_at(index, sub, n_self, n_val, full, dry)
            elif dry:
                slot = tuple(value._batch_size[:n_val]) + tuple(dest.shape[n_self:])
                try:
                    fits = np.broadcast_shapes(tuple(sub.shape), slot) == slot
                except ValueError:
                    fits = False
                if not fits:
                    raise RuntimeError(f"td[index] = value: the entry {full if prefix else key!r} has shape "
                                       f"{_shape_str(sub.shape)} in the value, which does not fit the indexed "
                                       f"destination of shape {_shape_str(slot)}")
            else:
                dest[index] = sub

    def set_at_(self, key, value, index, *, non_blocking=False):
        """Writes ``value`` into the existing entry ``key`` at batch ``index``; returns self."""
        current = self.get(key, None)
        if current is None:
            raise KeyError(f'key "{key}" not found in TensorDict with keys {sorted(self._tensordict)}')
        if type(index) is range:
            index = list(index)
        current[self._batch_index(index)] = value
        return self

    def get_at(self, key, index, default=_NO_DEFAULT):
        """``self.get(key)[index]``; for a missing key ``default`` when given, else what ``get`` gives
        (None, as tensordict 0.14, or a KeyError under ``set_get_defaults_to_none(False)``)."""
        current = self.get(key) if default is _NO_DEFAULT else self.get(key, None)
        if current is None:
            return None if default is _NO_DEFAULT else default
        return current[self._batch_index(list(index) if type(index) is range else index)]

    def update_at_(self, input_dict_or_td, idx, clone=False, *, non_blocking=False, keys_to_update=None):
        """Writes every entry of ``input_dict_or_td`` into the existing entry of self at batch index
        ``idx``. KeyError, before anything is written, for a key self lacks."""
        if isinstance(idx, tuple) and not idx:
            return self.update_(input_dict_or_td, clone=clone, keys_to_update=keys_to_update)
        pairs = self._update_pairs(input_dict_or_td, keys_to_update)
        for key, value in pairs:
            if self.get(key, None) is None:
                raise KeyError(f"The key {key} was not found in the dest tensordict.")
            if not isinstance(value, (Tensor, numbers.Number, np.ndarray)):
                raise TypeError(f"update_at_: the entry {key!r} is a {type(value).__name__}, expected a tensor")
        for key, value in pairs:
            self.set_at_(key, value.clone() if clone and isinstance(value, Tensor) else value, idx)
        return self


def _is_basic_index(index):
    """Whether ``index`` (ints, slices, ..., None, or a tuple of those) gives a view, not a copy."""
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer)) and not isinstance(i, bool)
               for i in items)


def _adds_dims_only(index):
    """Whether ``index`` (None, ..., True/False, a 0-d bool tensor, or a tuple of those) can index a
    TensorDict of batch size [], as it can a 0-d tensor."""
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, bool) or isinstance(i, Tensor) and i.ndim == 0
               and i.dtype.name == "bool" for i in items)
