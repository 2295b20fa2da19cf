"""``td[index]`` and ``td[index] = value`` of a ``LazyStackedTensorDict`` (``_lazy.py``): an index
that splits into a pick of stacked TensorDicts and an index of each is answered by indexing them; any
other index NumPy takes by mapping each element of the result to its stacked TensorDict and position."""
import numpy as np

from .._creation import as_tensor
from .._tensor import Tensor
from ._common import _RAISE, _is_key
from ._td import TensorDict
from .base import TensorDictBase, _non_tensor_value
from .utils import _getitem_batch_size, convert_ellipsis_to_idx


class _LazyIndexMixin:
    """Indexing of a lazy stack, over its ``tensordicts`` and ``stack_dim`` (see the module docstring)."""
    __slots__ = ()

    def __getitem__(self, index):
        if _is_key(index):
            return _non_tensor_value(self.get(index, _RAISE))
        if isinstance(index, list) and index and all(_is_key(k) for k in index):
            return self.select(*index)
        split = self._split_index(index)
        if split is None:
            return self._gather(index)
        stack_item, rest, new_stack_dim = split
        if isinstance(stack_item, (int, np.integer)):
            td = self.tensordicts[stack_item]
            return td[rest] if rest else td
        picked = [self.tensordicts[i] for i in stack_item]
        tds = [td[rest] for td in picked] if rest else picked
        if not tds:
            out = self._empty_like()
            out._batch_size = _getitem_batch_size(self._batch_size, self._plain_index(index))
            return out
        return self._new(tds, new_stack_dim, self._stack_name)

    @staticmethod
    def _plain_index(index):
        return tuple(item.tolist() if isinstance(item, Tensor) else list(item) if isinstance(item, range) else item
                     for item in (index if isinstance(index, tuple) else (index,)))

    def _split_index(self, index):
        """``index`` as (the stacked TensorDicts it picks: an int or a list of positions, the index of
        each of them, the stack dim of the result), or None for an index this cannot split (None,
        bool masks, lists or tensors along several dims...: ``_gather``'s)."""
        items = tuple(np.flatnonzero(item) if np.ndim(item) == 1 and np.asarray(item).dtype == bool else item
                      for item in self._plain_index(index))  # a 1-d mask picks the positions it holds True at
        if any(item is None or isinstance(item, (bool, np.bool_)) or np.ndim(item) > 1
               for item in items if item is not Ellipsis):
            return None
        items = convert_ellipsis_to_idx(items, self._batch_size)
        if len(items) > len(self._batch_size):
            raise IndexError(f"too many indices for tensor of dimension {len(self._batch_size)}")
        items = list(items) + [slice(None)] * (len(self._batch_size) - len(items))
        d = self.stack_dim
        stack_item, rest = items[d], tuple(items[:d] + items[d + 1:])
        n = len(self.tensordicts)
        if isinstance(stack_item, (int, np.integer)):
            if not -n <= stack_item < n:
                raise IndexError(f"index {stack_item} is out of bounds for dimension {d} with size {n}")
            return int(stack_item) % n, self._trim(rest), None
        if any(not isinstance(i, (slice, int, np.integer)) for i in rest):
            return None  # a selection along the stack dim and a list/tensor along another: they broadcast
        positions = np.arange(n)[stack_item if not isinstance(stack_item, list) else np.asarray(stack_item, np.int64)]
        new_dim = sum(1 for i in items[:d] if isinstance(i, slice))
        return positions.tolist(), self._trim(rest), new_dim

    def _grids(self, index):
        """(the stacked TensorDict each element of ``self[index]`` comes from, its flat position in
        that TensorDict's batch), as arrays of ``self[index]``'s batch shape (NumPy's indexing rules)."""
        shape, d = tuple(self._batch_size), self.stack_dim
        inner = shape[:d] + shape[d + 1:]
        owner = np.broadcast_to(np.arange(shape[d]).reshape((shape[d],) + (1,) * (len(shape) - d - 1)), shape)
        flat = np.broadcast_to(np.expand_dims(np.arange(int(np.prod(inner))).reshape(inner), d), shape)
        np_index = tuple(np.asarray(i) if isinstance(i, list) else i for i in self._plain_index(index))
        try:
            return _index_like_torch(owner, np_index), _index_like_torch(flat, np_index), inner
        except IndexError as e:
            raise IndexError(f"{e} (index {index!r} of a lazy stack of batch size {list(shape)})") from None

    def _gather(self, index):
        """``self[index]`` for any index NumPy takes: where several stacked TensorDicts meet, a lazy
        stack along the dim over which the source changes (nested lazy stacks when it changes along
        several)."""
        owner, flat, inner = self._grids(index)
        return self._assemble(owner, flat, inner)

    def _assemble(self, owner, flat, inner):
        if owner.size == 0 or (owner == owner.flat[0]).all():
            return self._element(int(owner.flat[0]) if owner.size else 0, flat, inner)
        varying = [k for k in range(owner.ndim) if (np.diff(owner, axis=k) != 0).any()]
        k = varying[0]
        parts = [self._assemble(np.take(owner, i, k), np.take(flat, i, k), inner) for i in range(owner.shape[k])]
        return self._new(parts, k, self._stack_name if len(varying) == 1 else None)

    def _element(self, position, flat, inner):
        """The part of stacked TensorDict ``position`` at the flat positions ``flat`` (of its batch)."""
        td = self.tensordicts[position]
        if not inner:
            return td if flat.ndim == 0 else td.expand(flat.shape)
        if flat.shape == inner and (flat.ravel() == np.arange(flat.size)).all():
            return td  # all of it, in order
        coords = np.unravel_index(flat, inner)
        return td[tuple(int(c) for c in coords) if flat.ndim == 0 else coords]

    @staticmethod
    def _trim(rest):
        """The index of each stacked TensorDict, without trailing full slices (empty: none)."""
        rest = list(rest)
        while rest and isinstance(rest[-1], slice) and rest[-1] == slice(None):
            rest.pop()
        return tuple(rest)

    def __setitem__(self, index, value):
        if _is_key(index):
            self.set(index, value)
            return
        split = self._split_index(index)
        if split is None:
            self._scatter(index, value)
            return
        stack_item, rest, new_dim = split
        if isinstance(stack_item, int):
            targets, parts = [stack_item], [value]
        else:
            targets = stack_item
            indexed_batch = _getitem_batch_size(self._batch_size, self._plain_index(index))
            if isinstance(value, dict):
                value = TensorDict(value, batch_size=indexed_batch)
            if isinstance(value, TensorDictBase) and len(value.batch_size) < len(indexed_batch):
                value = value.expand(*indexed_batch)  # broadcast, as a dense TensorDict's setitem does
            parts = value.unbind(new_dim) if isinstance(value, TensorDictBase) else [value] * len(targets)
            if len(parts) != len(targets):
                raise RuntimeError(f"the value has {len(parts)} entries along the stack dim, the index picks "
                                   f"{len(targets)}")
        for i, part in zip(targets, parts):
            if rest:
                self.tensordicts[i][rest] = part
            elif isinstance(part, TensorDictBase):
                self.tensordicts[i].update(part, inplace=True)  # existing entries written in place
            else:
                self.tensordicts[i][...] = part

    def _scatter(self, index, value):
        """``self[index] = value`` for any index NumPy takes: each stacked TensorDict receives the
        elements of ``value`` that land in it."""
        owner, flat, inner = self._grids(index)
        if isinstance(value, dict):
            value = TensorDict(value, batch_size=owner.shape)
        if isinstance(value, TensorDictBase) and tuple(value.batch_size) != owner.shape:
            value = value.expand(owner.shape)
        for position in np.unique(owner):
            mask = owner == position
            batched = isinstance(value, TensorDictBase) or isinstance(value, Tensor) and value.ndim
            part = value[as_tensor(mask)] if batched else value
            td = self.tensordicts[int(position)]
            if not inner:  # a TensorDict of batch []: it takes the last value meant for it
                if isinstance(part, TensorDictBase):
                    td.update(part[-1])
                else:
                    td[...] = part[-1] if batched else part
                continue
            coords = np.unravel_index(flat[mask], inner)
            td[coords] = part


def _index_like_torch(array, items):
    """``array[items]`` with torch's rule for ints beside lists/tensors: an int only removes its dim
    (NumPy would broadcast it with them and move their dims first)."""
    items = convert_ellipsis_to_idx(items, array.shape)
    advanced = [isinstance(i, np.ndarray) for i in items]
    if not any(advanced):
        return array[items]
    out = array[tuple(slice(None) if adv else i for i, adv in zip(items, advanced))]
    return out[tuple(i if adv else slice(None) for i, adv in zip(items, advanced)
                     if adv or not isinstance(i, (int, np.integer)) or isinstance(i, (bool, np.bool_)))]
