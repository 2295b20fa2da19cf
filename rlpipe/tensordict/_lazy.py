"""``LazyStackedTensorDict``: TensorDicts stacked without copying (tensordict 0.14's lazy stack).

A lazy stack keeps its TensorDicts in ``tensordicts`` and stacks an entry only when it is read, so
the stacked TensorDicts may hold entries of different shapes (heterogeneous stacks); reading such an
entry raises tensordict's RuntimeError, unless ``as_list=True`` or ``as_padded_tensor=True`` asks for
a list or a padded tensor. Its keys are those every stacked TensorDict has. Writes (``set``,
``update``, ``td[index] = ...``) go to the stacked TensorDicts, split along ``stack_dim``.

``_CustomOpTensorDict`` (tensordict's lazy views) stays out of scope: shape ops return TensorDicts.
"""
import collections.abc
import json
import os

from .. import primitives as _ops, serialization as _serialization
from .._creation import as_tensor, full as _full
from .._tensor import Size, Tensor
from .._utils import unavailable
from ._common import _NO_DEFAULT, _RAISE, _is_key
from ._io import _LOADERS, consolidated_reduce
from ._lazy_index import _LazyIndexMixin
from ._shape import _join_leaves
from ._td import TensorDict
from .base import TensorDictBase
from .keys import unravel_key_to_tuple
from .utils import is_tensorclass

__all__ = ["LazyStackedTensorDict", "_CustomOpTensorDict", "lazy_stack"]

_STACK_ERROR = ("Failed to stack tensors within a tensordict. You can use nested tensors, padded tensors or "
                "return lists via specialized keyword arguments. Check the TensorDict.lazy_stack documentation!")
_MEMMAP_KIND = "lazy_stack"

_CustomOpTensorDict = unavailable("_CustomOpTensorDict", "lazy views are not implemented; TensorDict's shape "
                                  "ops return TensorDicts")


def _stack_leaves(values, dim, as_list=False, as_padded_tensor=False, as_nested_tensor=False,
                  padding_side="right", padding_value=0.0):
    """The stacked entries ``values`` (Tensors or TensorDicts) read from each stacked TensorDict."""
    if sum((bool(as_list), bool(as_padded_tensor), bool(as_nested_tensor))) > 1:
        raise TypeError("as_list, as_padded_tensor and as_nested_tensor are exclusive.")
    if as_list and all(isinstance(v, list) for v in values):  # nested lazy stacks' lists: a list of them
        return list(values)
    if all(isinstance(v, Tensor) for v in values):
        if as_list:
            return list(values)
        if as_padded_tensor:
            return _pad(values, padding_side, padding_value)
        if as_nested_tensor:
            raise RuntimeError("as_nested_tensor: rlpipe has no nested tensors; use as_padded_tensor=True or "
                               "as_list=True")
        try:
            return _join_leaves(values, dim, "stack")
        except (RuntimeError, ValueError):
            raise RuntimeError(f"{_STACK_ERROR} (shapes: {[list(v.shape) for v in values]})") from None
    if any(getattr(v, "_is_non_tensor", False) for v in values):
        return TensorDictBase._non_tensor_types[2](values, dim, "stack")
    if all(isinstance(v, TensorDictBase) for v in values):
        return LazyStackedTensorDict.lazy_stack(values, dim)
    raise TypeError(f"cannot stack a mix of {sorted({type(v).__name__ for v in values})}")


def _pad(tensors, side, value):
    """torch.nn.utils.rnn.pad_sequence(batch_first=True): the tensors padded along their first dim to
    the longest, then stacked (their other dims must agree)."""
    if side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {side!r}")
    longest = max(t.shape[0] if t.ndim else 1 for t in tensors)
    padded = []
    for t in tensors:
        t = t.reshape(1) if not t.ndim else t
        filler = _full((longest - t.shape[0], *t.shape[1:]), value, dtype=t.dtype, device=t.device)
        padded.append(_ops.cat([t, filler] if side == "right" else [filler, t], 0))
    try:
        return _ops.stack(padded, 0)
    except (RuntimeError, ValueError):
        raise RuntimeError(f"as_padded_tensor pads the first dim only; the other dims differ: "
                           f"{[list(t.shape) for t in tensors]}") from None


def _holds_lazy(td):
    """Whether a TensorDict has a lazy stack anywhere among its nested TensorDicts."""
    return any(isinstance(v, LazyStackedTensorDict) or (isinstance(v, TensorDictBase) and _holds_lazy(v))
               for v in td.values())


class LazyStackedTensorDict(_LazyIndexMixin, TensorDictBase):
    """TensorDicts stacked along ``stack_dim`` without copying (see the module docstring).

    >>> a = TensorDict({"obs": rlpipe.zeros(3, 4)}, [3])
    >>> b = TensorDict({"obs": rlpipe.zeros(3, 5)}, [3])
    >>> s = LazyStackedTensorDict(a, b)          # batch size [2, 3]
    >>> s[1] is b, s.get("obs", as_list=True)[1].shape
    (True, rlpipe.Size([3, 5]))
    """
    __slots__ = ("tensordicts", "stack_dim", "_batch_size", "_stack_name", "_empty_device", "_consolidated",
                 "__weakref__")

    def __init__(self, *tensordicts, stack_dim=0, batch_size=None, device=None, names=None, stack_dim_name=None,
                 strict_shape=False, hook_out=None, hook_in=None):
        if not tensordicts:
            tensordicts = ()
            first = TensorDict(batch_size=batch_size, device=device)
        else:
            first = tensordicts[0]
        for i, td in enumerate(tensordicts):
            if not isinstance(td, TensorDictBase):
                raise TypeError(f"LazyStackedTensorDict expects TensorDicts, got {type(td).__name__} at position {i}")
            if td.batch_size != first.batch_size:
                raise RuntimeError(f"batch sizes in tensordicts differs, LazyStackedTensorDict cannot be created. "
                                   f"Got td[0].batch_size={first.batch_size} and td[{i}].batch_size={td.batch_size}")
        n = len(first.batch_size)
        if stack_dim < 0:
            if stack_dim < -(n + 1):
                raise RuntimeError(f"Couldn't infer stack dim from negative value, got stack_dim={stack_dim}")
            stack_dim += n + 1
        if stack_dim > n:
            raise RuntimeError(f"Stack dim {stack_dim} is too big for batch size {first.batch_size}.")
        self.tensordicts = list(tensordicts)
        self._empty_device = None if tensordicts else first.device
        self.stack_dim = stack_dim
        self._batch_size = Size((*first.batch_size[:stack_dim], len(tensordicts), *first.batch_size[stack_dim:]))
        self._stack_name = stack_dim_name
        if tensordicts and batch_size is not None and Size(batch_size) != self._batch_size:
            raise RuntimeError(f"batch_size does not match self.batch_size: {Size(batch_size)} vs {self._batch_size}.")
        if names is not None:
            self.names = names

    @classmethod
    def _new(cls, tds, stack_dim, name=None):
        """A lazy stack over already-checked TensorDicts (sharing one batch size)."""
        out = cls.__new__(cls)
        out.tensordicts = list(tds)
        out.stack_dim = stack_dim
        inner = tds[0].batch_size
        out._batch_size = Size((*inner[:stack_dim], len(tds), *inner[stack_dim:]))
        out._stack_name = name
        return out

    # ---- building -----------------------------------------------------------------------------
    @classmethod
    def lazy_stack(cls, items, dim=0, *, device=None, out=None, stack_dim_name=None, strict_shape=False,
                   **get_kwargs):
        """Stacks TensorDicts lazily (tensors: stacked densely, or as a list/padded tensor with the
        keyword arguments ``get`` takes)."""
        items = list(items)
        if not items:
            raise RuntimeError("items cannot be empty")
        if all(isinstance(item, Tensor) for item in items):
            return _stack_leaves(items, dim, **get_kwargs)
        if _same_tensorclass(items):  # tensorclasses: their class over a lazy stack of their TensorDicts
            stacked = cls.lazy_stack([item._tensordict for item in items], dim, device=device, out=out,
                                     stack_dim_name=stack_dim_name)
            return items[0]._wrap(stacked)  # keeps the classes of its nested fields
        if out is not None:
            stacked = cls(*items, stack_dim=dim)
            if out.batch_size != stacked.batch_size:
                raise RuntimeError(f"out.batch_size and stacked batch size must match, got out.batch_size="
                                   f"{out.batch_size} and batch_size={stacked.batch_size}")
            return stacked._into(out)  # out's existing leaves written in place
        return cls(*items, stack_dim=dim, stack_dim_name=stack_dim_name, device=device)

    stack = lazy_stack

    @classmethod
    def cat(cls, tds, dim=0, *, out=None):
        """Lazy stacks joined along batch dim ``dim``: along their stack dim, one lazy stack of all
        their TensorDicts; along another (same stack dim and length), the stacked TensorDicts
        joined pairwise; anything else is joined densely. Dense TensorDicts among them are first
        split along the first lazy stack's stack dim, so the result stays lazy, as in tensordict."""
        tds = list(tds)
        stack_dim = next(td.stack_dim for td in tds if isinstance(td, cls))
        tds = [td if isinstance(td, cls) or not isinstance(td, TensorDictBase) else td.to_lazystack(stack_dim)
               for td in tds]
        first = tds[0]
        d = first._batch_dim(dim)
        lazy = all(isinstance(td, cls) and td.stack_dim == first.stack_dim for td in tds)
        if lazy and d == first.stack_dim:
            joined = cls._new([part for td in tds for part in td.tensordicts], d, first._stack_name)
        elif lazy and all(len(td.tensordicts) == len(first.tensordicts) for td in tds):
            inner = d - (d > first.stack_dim)
            joined = cls._new([_ops.cat(list(parts), inner) for parts in zip(*(td.tensordicts for td in tds))],
                              first.stack_dim, first._stack_name)
        else:
            joined = TensorDict.cat([td.contiguous() if isinstance(td, cls) else td for td in tds], d)
        return joined if out is None else out.update_(joined)

    @classmethod
    def maybe_dense_stack(cls, items, dim=0, out=None, strict=False):
        """Tensordict's best-intention stack: dense where it can be. TensorDicts with the same keys give
        a TensorDict whose entries of one shape are stacked densely and whose nested TensorDicts are
        stacked the same way (lazily only where they differ); TensorDicts with other keys, or an
        entry whose shapes differ, give a lazy stack."""
        items = list(items)
        if items and _same_tensorclass(items):
            return items[0]._wrap(cls.maybe_dense_stack([item._tensordict for item in items], dim, out, strict))
        if not items or not all(isinstance(item, TensorDictBase) for item in items) or _same_structure(items):
            return _ops.stack(items, dim) if out is None else _ops.stack(items, dim, out=out)
        dense = _best_intention_stack(items, dim)
        stacked = dense if dense is not None else cls.lazy_stack(items, dim)
        return stacked if out is None else out.update(stacked)

    def insert(self, index, tensordict):
        """Inserts ``tensordict`` (of the stacked TensorDicts' batch size) at ``index`` of the stack."""
        if not isinstance(tensordict, TensorDictBase):
            raise TypeError(f"Expected new value to be TensorDictBase instance but got {type(tensordict).__name__} "
                            f"instead.")
        inner = self._inner_batch_size()
        if tensordict.batch_size != inner:
            raise ValueError(f"Batch sizes in tensordicts differs, LazyStackedTensorDict cannot be created. "
                             f"Got {tensordict.batch_size} and {inner}")
        self._check_unlocked()
        self.tensordicts.insert(index, tensordict)
        self._batch_size = Size((*inner[:self.stack_dim], len(self.tensordicts), *inner[self.stack_dim:]))

    def append(self, tensordict):
        """Adds a TensorDict at the end of the stack (in place)."""
        self.insert(len(self.tensordicts), tensordict)

    def extend(self, tensordicts):
        """Adds several TensorDicts at the end of the stack (in place)."""
        for td in (tensordicts.unbind(self.stack_dim) if isinstance(tensordicts, TensorDictBase) else tensordicts):
            self.append(td)

    def _inner_batch_size(self):
        b = self._batch_size
        return Size((*b[:self.stack_dim], *b[self.stack_dim + 1:]))

    def _lazy_like(self, tds):
        return self._new(tds, self.stack_dim, self._stack_name) if tds else self._empty_like()

    def _empty_like(self):
        out = type(self).__new__(type(self))
        out.tensordicts, out.stack_dim, out._stack_name = [], self.stack_dim, self._stack_name
        out._batch_size = Size((*self._batch_size[:self.stack_dim], 0, *self._batch_size[self.stack_dim + 1:]))
        return out

    def _walk_tree(self, leaves_only, include_nested=True, prefix=()):
        for key in self.keys(include_nested, leaves_only):
            path = prefix + unravel_key_to_tuple(key)
            yield path if len(path) > 1 else path[0]

    def _all_tensordicts(self):
        """The stacked TensorDicts and every TensorDict nested in them (what a parent's checks walk)."""
        for td in self.tensordicts:
            yield from td._all_tensordicts()

    def _each(self, method, *args, **kwargs):
        """A lazy stack of ``td.method(*args, **kwargs)`` for every stacked TensorDict."""
        return self._lazy_like([getattr(td, method)(*args, **kwargs) for td in self.tensordicts])

    # ---- storage ------------------------------------------------------------------------------
    @property
    def _tensordict(self):
        """The entries as a mapping read and written through get/set/pop (a dense TensorDict's slot, for
        the code of a parent TensorDict that walks its children's entries)."""
        return _LazyEntries(self)

    @property
    def batch_size(self):
        """The batch size (``batch_size``'s other name)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, new):
        new = Size(new)
        if len(new) <= self.stack_dim or new[self.stack_dim] != len(self.tensordicts):
            raise RuntimeError(f"a lazy stack's batch size must keep {len(self.tensordicts)} at its stack dim "
                               f"{self.stack_dim}, got {new}")
        inner = Size((*new[:self.stack_dim], *new[self.stack_dim + 1:]))
        for td in self.tensordicts:
            td.batch_size = inner
        self._batch_size = new

    shape = batch_size

    @property
    def batch_dims(self):
        """The number of batch dims (``batch_dims``)."""
        """The number of batch dims, the stack dim included."""
        return len(self._batch_size)

    ndim = batch_dims

    @property
    def device(self):
        if not self.tensordicts:  # an empty stack keeps the device it was made with
            return getattr(self, "_empty_device", None)
        devices = {td.device for td in self.tensordicts}
        return devices.pop() if len(devices) == 1 else None

    @property
    def names(self):
        inner = self.tensordicts[0].names if self.tensordicts else [None] * (len(self._batch_size) - 1)
        return [*inner[:self.stack_dim], self._stack_name, *inner[self.stack_dim:]]

    @names.setter
    def names(self, value):
        self._set_names(value)

    def _has_names(self):
        return self._stack_name is not None or any(td._has_names() for td in self.tensordicts)

    def _set_names(self, names):
        if names is None:
            self._stack_name = None
            inner = None
        else:
            names = list(names)
            if len(names) != len(self._batch_size):
                raise ValueError(f"names must have one name per batch dim ({len(self._batch_size)}), got {names}")
            self._stack_name = names[self.stack_dim]
            inner = names[:self.stack_dim] + names[self.stack_dim + 1:]
        for td in self.tensordicts:
            td._set_names(inner)

    @classmethod
    def _build(cls, entries, batch_size, device):
        """Results with new entries are dense TensorDicts."""
        return TensorDict._build(entries, batch_size, device)

    def get(self, key, default=_NO_DEFAULT, *, as_list=False, as_padded_tensor=False, as_nested_tensor=False,
            padding_side="right", padding_value=0.0, layout=None):
        """The entry ``key`` stacked along ``stack_dim``: a Tensor, or a lazy stack of the nested
        TensorDicts. Entries of different shapes raise RuntimeError unless ``as_list=True`` (a list,
        one per stacked TensorDict) or ``as_padded_tensor=True`` (padded along their first dim)."""
        missing = object()
        ragged = dict(as_list=as_list, as_padded_tensor=as_padded_tensor, as_nested_tensor=as_nested_tensor,
                      padding_side=padding_side, padding_value=padding_value)
        # a nested lazy stack reads its part the same way (a list, or a padded tensor, per stacked one)
        values = [td.get(key, missing, **ragged) if isinstance(td, LazyStackedTensorDict) else td.get(key, missing)
                  for td in self.tensordicts]
        if any(value is missing for value in values):
            if default is _NO_DEFAULT or default is _RAISE:  # what get(key) of a TensorDict gives: None or KeyError
                return next(td.get(key, default) for td, value in zip(self.tensordicts, values) if value is missing)
            return default
        if not values:
            raise KeyError(f'key "{key}" not found in an empty LazyStackedTensorDict')
        return _stack_leaves(values, self.stack_dim, as_list, as_padded_tensor, as_nested_tensor, padding_side,
                             padding_value)

    def _split(self, value, key):
        """``value`` (of this stack's batch size) cut into one part per stacked TensorDict."""
        if isinstance(value, dict):
            value = TensorDict(value, batch_size=self._batch_size, device=self.device)
        elif isinstance(value, list):
            try:
                value = as_tensor(value, device=self.device)
            except (TypeError, ValueError, RuntimeError):  # strings, ragged tensors...: one item per element
                return self._split_list(value, key)
        elif isinstance(value, str):  # one object for the whole stack: each stacked TensorDict holds it
            return [value] * len(self.tensordicts)
        elif not isinstance(value, (Tensor, TensorDictBase)):
            value = as_tensor(value, device=self.device)
        shape = value.batch_size if isinstance(value, TensorDictBase) else value.shape
        if tuple(shape[:len(self._batch_size)]) != tuple(self._batch_size):
            raise RuntimeError(f"batch dimension mismatch for key {key!r}: got shape {list(shape)} but the "
                               f"lazy stack's batch size is {list(self._batch_size)}")
        return value.unbind(self.stack_dim)

    def _split_list(self, value, key):
        """A nested list over the batch dims cut along ``stack_dim``: part k holds item k there."""
        def take(items, depth, k):
            if not isinstance(items, list):
                raise RuntimeError(f"batch dimension mismatch for key {key!r}: the list is not nested "
                                   f"{self.stack_dim + 1} levels deep (the lazy stack's batch size is "
                                   f"{list(self._batch_size)})")
            return items[k] if depth == 0 else [take(item, depth - 1, k) for item in items]

        n = len(self.tensordicts)
        level = value
        for _ in range(self.stack_dim):
            level = level[0] if isinstance(level, list) and level else None
        if not isinstance(level, list) or len(level) != n:
            raise RuntimeError(f"batch dimension mismatch for key {key!r}: the list does not hold {n} items "
                               f"along the stack dim {self.stack_dim}")
        return [take(value, self.stack_dim, k) for k in range(n)]

    def set(self, key, value, inplace=False, non_blocking=False):
        """Stores ``value`` (of this stack's batch size) under ``key``, split along ``stack_dim``."""
        self._check_unlocked() if not inplace else None
        parts = self._split(value, key)
        for td, part in zip(self.tensordicts, parts):
            td.set(key, part, inplace=inplace)
        return self

    def set_(self, key, value):
        """Writes ``value`` into the existing entry ``key`` of every stacked TensorDict."""
        self.get(key, _RAISE)
        return self.set(key, value, inplace=True)

    def update(self, input_dict_or_td=None, clone=False, inplace=False, keys_to_update=None, *,
               update_batch_size=False, **kwargs):
        """Each stacked TensorDict updated with its part of the argument (split along ``stack_dim``;
        a lazy stack's entries need not be stackable). ``update_batch_size=True`` takes a TensorDict
        argument's batch size too: the stack then holds its parts (copied with ``clone``)."""
        if input_dict_or_td is None:
            return self
        if update_batch_size and isinstance(input_dict_or_td, TensorDictBase) \
                and input_dict_or_td.batch_size != self._batch_size:
            self._check_unlocked()
            parts = input_dict_or_td.unbind(self.stack_dim)
            self.tensordicts = [part.clone() if clone else part.copy() for part in parts]
            self._batch_size = input_dict_or_td.batch_size
            return self
        parts = self._split(input_dict_or_td, "update")
        for td, part in zip(self.tensordicts, parts):
            td.update(part, clone=clone, inplace=inplace, keys_to_update=keys_to_update)
        return self

    def update_(self, input_dict_or_td=None, clone=False, *, non_blocking=False, keys_to_update=None, **kwargs):
        """As update, into existing entries only: KeyError, before any write, for a key self lacks."""
        if input_dict_or_td is None:
            return self
        source = input_dict_or_td if isinstance(input_dict_or_td, TensorDictBase) else \
            TensorDict(input_dict_or_td, batch_size=self._batch_size, device=self.device)
        mine = set(self.keys(True, True))
        missing = [k for k in source.keys(True, True) if k not in mine]
        if missing:
            raise KeyError(f"update_: keys {missing} are not in the lazy stack (keys {sorted(map(str, mine))})")
        return self.update(source, clone, inplace=True, keys_to_update=keys_to_update)

    def update_at_(self, input_dict_or_td, idx, clone=False, *, non_blocking=False, keys_to_update=None):
        part = self[idx]
        part.update_(input_dict_or_td, clone, keys_to_update=keys_to_update)
        self[idx] = part
        return self

    def pop(self, key, default=_NO_DEFAULT):
        value = self.get(key, _RAISE if default is _NO_DEFAULT else None)
        if value is None:
            return default
        for td in self.tensordicts:
            td.pop(key)
        return value

    def __delitem__(self, key):
        """Deletes ``key`` from every stacked TensorDict that has it (tensordict's: the entries
        need not stack, and a key only some have goes from those); a KeyError when none has it."""
        found = False
        for td in self.tensordicts:
            try:
                td.pop(key)
                found = True
            except KeyError:
                continue
        if not found:
            raise KeyError(f"Key {key} not found in any of the stacked tensordicts.")

    def del_(self, key):
        """``del self[key]``; returns the lazy stack."""
        del self[key]
        return self

    def rename_key_(self, old_key, new_key, safe=False):
        self.get(old_key, _RAISE)
        for td in self.tensordicts:
            td.rename_key_(old_key, new_key, safe=safe)
        return self

    def popitem(self):
        keys = list(self.keys())
        if not keys:
            raise KeyError("popitem(): lazy stacked tensordict is empty")
        return keys[-1], self.pop(keys[-1])

    def keys(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        """The keys every stacked TensorDict has, in the first one's order."""
        if not self.tensordicts:
            return []
        rest = [set(td.keys(include_nested, leaves_only)) for td in self.tensordicts[1:]]
        keys = [k for k in self.tensordicts[0].keys(include_nested, leaves_only) if all(k in r for r in rest)]
        return sorted(keys, key=lambda k: (k,) if isinstance(k, str) else k) if sort else keys

    def values(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        return [self.get(k) for k in self.keys(include_nested, leaves_only, sort=sort)]

    def items(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        return [(k, self.get(k)) for k in self.keys(include_nested, leaves_only, sort=sort)]

    def __contains__(self, key):
        """``key in stack``: a key as for a TensorDict; a TensorDict: whether it is one of those stacked
        (identity), as in tensordict."""
        if isinstance(key, TensorDictBase):
            return any(key is td for td in self.tensordicts)
        if not _is_key(key):
            raise NotImplementedError("TensorDict does not support membership checks with the `in` keyword. If "
                                      "you want to check if a particular key is in your TensorDict, please use "
                                      "`key in tensordict.keys()` instead.")
        path = unravel_key_to_tuple(key)
        return bool(self.tensordicts) and all(td.get(path, None) is not None for td in self.tensordicts)

    def select(self, *keys, inplace=False, strict=True, as_tensordict=False):
        """A lazy stack of each TensorDict's selection of ``keys`` (``as_tensordict``: for tensorclasses)."""
        if inplace:
            for td in self.tensordicts:
                td.select(*keys, inplace=True, strict=strict)
            return self
        return self._each("select", *keys, strict=strict)

    def exclude(self, *keys, inplace=False):
        """A lazy stack of each TensorDict without ``keys``."""
        if inplace:
            for td in self.tensordicts:
                td.exclude(*keys, inplace=True)
            return self
        return self._each("exclude", *keys)

    def split_keys(self, *key_sets, inplace=False, default=_NO_DEFAULT, strict=True, reproduce_struct=False):
        """Lazy stacks of each key set's entries, and of the rest, last."""
        parts = [td.split_keys(*key_sets, inplace=inplace, default=default, strict=strict,
                               reproduce_struct=reproduce_struct) for td in self.tensordicts]
        return tuple(self._lazy_like(list(column)) for column in zip(*parts))

    def is_empty(self):
        """Whether no stacked TensorDict holds a leaf."""
        return all(td.is_empty() for td in self.tensordicts)

    def empty(self, recurse=False, **kwargs):
        """A lazy stack of the TensorDicts emptied of their entries (same batch sizes)."""
        return self._each("empty", recurse=recurse)

    def new_zeros(self, *size, empty_lazy=False, **kwargs):
        """A dense TensorDict of batch size ``size`` with zero leaves; with ``empty_lazy=True``, a lazy
        stack (along the same dim) of copies of the first stacked TensorDict emptied of its tensors
        (its non-tensor data kept), as tensordict 0.14."""
        return self._new_like("new_zeros", size, empty_lazy, kwargs)

    def new_ones(self, *size, empty_lazy=False, **kwargs):
        """``new_zeros`` with ones."""
        return self._new_like("new_ones", size, empty_lazy, kwargs)

    def new_empty(self, *size, empty_lazy=False, **kwargs):
        """``new_zeros`` with uninitialised values."""
        return self._new_like("new_empty", size, empty_lazy, kwargs)

    def new_full(self, size, fill_value, *, empty_lazy=False, **kwargs):
        """``new_zeros`` filled with ``fill_value``."""
        return self._new_like("new_full", (size,), empty_lazy, kwargs, fill_value)

    def _new_like(self, name, size, empty_lazy, kwargs, *fill):
        size = Size(_ops._shape_arg(size))
        if not empty_lazy or len(size) <= self.stack_dim:
            return getattr(self.contiguous(), name)(size, *fill, **kwargs)
        inner = list(size)
        count = inner.pop(self.stack_dim)
        template = getattr(self.tensordicts[0].empty(recurse=True), name)(Size(inner), *fill, **kwargs)
        return self._new([template.clone() for _ in range(count)], self.stack_dim, self._stack_name)

    def __len__(self):
        return self._batch_size[0] if self._batch_size else 0

    # ---- per-leaf functions, copies and moves -------------------------------------------------
    def _map(self, fn, batch_size=None, device=_NO_DEFAULT):
        """``fn`` on every leaf of every stacked TensorDict. A new ``batch_size`` (a parent's batch op)
        keeps the stack lazy when the op's dims lie before the stack dim; otherwise the result is dense."""
        new_dim, inner = self._moved_stack(batch_size)
        if new_dim is None:
            return self.contiguous()._map(fn, batch_size, device)
        return self._new([td._map(fn, inner, device) for td in self.tensordicts], new_dim, self._stack_name)

    def _moved_stack(self, batch_size):
        """(the stack dim, the stacked TensorDicts' batch size) after a batch op that gives this stack
        ``batch_size`` and leaves its trailing dims from the stack dim on alone; (None, None) when the
        op reaches the stack dim."""
        if batch_size is None or Size(batch_size) == self._batch_size:
            return self.stack_dim, None
        new, old = tuple(batch_size), tuple(self._batch_size)
        tail = len(old) - self.stack_dim
        if len(new) < tail or new[len(new) - tail:] != old[self.stack_dim:]:
            return None, None
        new_dim = len(new) - tail
        return new_dim, Size(new[:new_dim] + new[new_dim + 1:])

    def _into(self, out):
        """The ``out=`` form: into a lazy stack like this one, pair by pair (entries may differ in
        shape); into anything else, the stacked entries."""
        if isinstance(out, LazyStackedTensorDict) and out.stack_dim == self.stack_dim \
                and len(out.tensordicts) == len(self.tensordicts):
            for mine, theirs in zip(self.tensordicts, out.tensordicts):
                mine._into(theirs)
            return out
        if _holds_lazy(out):
            return self._into_each(out)  # out's own lazy entries keep their layout
        return self.contiguous()._into(out)

    def _into_each(self, out):
        """Writes each stacked TensorDict into its slice of ``out`` along the stack dim."""
        lead = (slice(None),) * self.stack_dim
        for i, td in enumerate(self.tensordicts):
            out[lead + (i,)] = td
        return out

    def _write_at(self, index, value, n_self, n_val, prefix, dry):
        """A parent's ``td[index] = value`` reaching this stack (checked when written)."""
        if not dry:
            self[index] = value

    def _index_with(self, index, fast, new_batch):
        """A parent's ``td[index]`` reaching this stack (its leading dims are the parent's)."""
        return self[index]

    def _apply_tree(self, fn, others, batch_size, device, inplace, nested_keys, default, drop_empty, prefix,
                    produced):
        """A parent's ``apply`` reaching this stack: each stacked TensorDict's part of it."""
        new_dim, inner = self._moved_stack(batch_size)
        if new_dim is None:
            return self.contiguous()._apply_tree(fn, others, batch_size, device, inplace, nested_keys, default,
                                                 drop_empty, prefix, produced)
        split = [o.unbind(self.stack_dim) if isinstance(o, TensorDictBase) else [o] * len(self.tensordicts)
                 for o in others]
        parts = [td._apply_tree(fn, [column[i] for column in split], inner, device, inplace, nested_keys, default,
                                drop_empty, prefix, produced) for i, td in enumerate(self.tensordicts)]
        return self if inplace else self._new(parts, new_dim, self._stack_name)

    def apply(self, fn, *others, batch_size=None, inplace=False, **kwargs):
        """``fn`` on every leaf of every stacked TensorDict (``others``: TensorDicts split along
        ``stack_dim`` alike); a new batch size makes the result dense."""
        if batch_size is not None:
            return self.contiguous().apply(fn, *others, batch_size=batch_size, inplace=inplace, **kwargs)
        split = [o.unbind(self.stack_dim) for o in others]
        results = [td.apply(fn, *(parts[i] for parts in split), inplace=inplace, **kwargs)
                   for i, td in enumerate(self.tensordicts)]
        if inplace:
            return self
        if all(r is None for r in results):
            return None
        return self._lazy_like(results)

    def named_apply(self, fn, *others, **kwargs):
        """``named_apply`` on each stacked TensorDict, stacked again lazily."""
        split = [o.unbind(self.stack_dim) for o in others]
        return self._lazy_like([td.named_apply(fn, *(parts[i] for parts in split), **kwargs)
                                for i, td in enumerate(self.tensordicts)])

    def clone(self, recurse=True, **kwargs):
        return self._each("clone", recurse)

    def copy(self):
        return self._each("copy")

    def to(self, *args, **kwargs):
        return self._each("to", *args, **kwargs)

    def detach(self):
        """A lazy stack of the TensorDicts detached from the graph."""
        return self._each("detach")

    def contiguous(self, *, canonical=False, inplace=False):
        """A dense TensorDict of the stacked entries (RuntimeError for entries of different shapes)."""
        if inplace:
            raise RuntimeError("contiguous(inplace=True) is not supported on a LazyStackedTensorDict: it would "
                               "change the object's type; call to_tensordict() instead")
        return TensorDict._build({k: v.contiguous() for k, v in self.items()}, self._batch_size, self.device)

    def to_tensordict(self, *, retain_none=None):
        return self.contiguous()

    def densify(self, *, layout=None):
        """A dense TensorDict (rlpipe has no nested tensors: entries of different shapes raise RuntimeError)."""
        return self.contiguous()

    def is_contiguous(self):
        """Always False: a lazy stack is not one block (``contiguous()`` makes one)."""
        return False

    # ---- batch dims ---------------------------------------------------------------------------
    def unbind(self, dim=0):
        """The TensorDicts along ``dim`` (the stacked ones themselves along the stack dim)."""
        d = self._batch_dim(dim)
        if d == self.stack_dim:
            return tuple(self.tensordicts)
        inner = d - (d > self.stack_dim)
        columns = [td.unbind(inner) for td in self.tensordicts]
        stack_dim = self.stack_dim - (d < self.stack_dim)
        return tuple(self._new(list(column), stack_dim, self._stack_name) for column in zip(*columns))

    def reshape(self, *shape, size=None):
        shape = size if size is not None else shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        if tuple(shape) == tuple(self._batch_size):
            return self
        return self.contiguous().reshape(*shape)

    view = reshape

    def permute(self, *dims, **kwargs):
        order = list(dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims)
        order = [self._batch_dim(d) for d in order]
        if sorted(order) != list(range(len(self._batch_size))):
            raise RuntimeError(f"permute: {order} is not a permutation of the batch dims {len(self._batch_size)}")
        new_stack = order.index(self.stack_dim)
        inner = [d - (d > self.stack_dim) for d in order if d != self.stack_dim]
        tds = [td.permute(inner) for td in self.tensordicts] if inner else self.tensordicts
        return self._new(tds, new_stack, self._stack_name)

    def unsqueeze(self, dim):
        d = self._batch_dim(dim, extra=1, what="unsqueezing")
        if d <= self.stack_dim:
            return self._new([td.unsqueeze(d) for td in self.tensordicts], self.stack_dim + 1, self._stack_name)
        return self._each("unsqueeze", d - 1)

    def squeeze(self, dim=None):
        """The stack without its size-one batch dims (or ``dim`` only)."""
        if dim is None:
            return self.contiguous().squeeze() if len(self.tensordicts) == 1 else \
                self._new([td.squeeze() for td in self.tensordicts],
                          sum(1 for s in self._batch_size[:self.stack_dim] if s != 1), self._stack_name)
        d = self._batch_dim(dim, what="squeezing")
        if self._batch_size[d] != 1:
            return self
        if d == self.stack_dim:
            return self.tensordicts[0]
        return self._new([td.squeeze(d - (d > self.stack_dim)) for td in self.tensordicts],
                         self.stack_dim - (d < self.stack_dim), self._stack_name)

    def expand(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
        extra = len(shape) - len(self._batch_size)
        stack = self.stack_dim + extra
        if extra < 0 or shape[stack] not in (-1, len(self.tensordicts)):
            raise RuntimeError(f"cannot expand a lazy stack of batch size {list(self._batch_size)} to {list(shape)}")
        inner = shape[:stack] + shape[stack + 1:]
        return self._new([td.expand(inner) for td in self.tensordicts], stack, self._stack_name)

    def split(self, split_size, dim=0):
        n = self._batch_size[self._batch_dim(dim)]
        sizes = list(split_size) if not isinstance(split_size, int) else \
            [split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
        return self._pieces(sizes, dim)

    def repeat(self, *repeats):
        return self.contiguous().repeat(*repeats)

    def flip(self, dims):
        dims = self._dims_tuple(dims)
        tds = self.tensordicts[::-1] if self.stack_dim in dims else list(self.tensordicts)
        inner = [d - (d > self.stack_dim) for d in dims if d != self.stack_dim]
        return self._new([td.flip(inner) for td in tds] if inner else tds, self.stack_dim, self._stack_name)

    def _pairwise(self, other, method):
        if isinstance(other, TensorDictBase):
            others = other.unbind(self.stack_dim)
            return self._lazy_like([getattr(td, method)(o) for td, o in zip(self.tensordicts, others)])
        return self._each(method, other)

    def __eq__(self, other):
        return self._pairwise(other, "__eq__")

    def __ne__(self, other):
        return self._pairwise(other, "__ne__")

    __hash__ = None

    def all(self, dim=None):
        if dim is None:
            return all(td.all() for td in self.tensordicts)
        return self.contiguous().all(dim)

    def any(self, dim=None):
        if dim is None:
            return any(td.any() for td in self.tensordicts)
        return self.contiguous().any(dim)

    # ---- locking and storage ------------------------------------------------------------------
    @property
    def is_locked(self):
        """Whether the stacked TensorDicts are locked."""
        return bool(self.tensordicts) and all(td.is_locked for td in self.tensordicts)

    def _check_unlocked(self):
        if self.is_locked:
            raise RuntimeError("Cannot modify locked TensorDict. For in-place modification, consider using the "
                               "`set_()` method and make sure the key is present.")

    def lock_(self):
        for td in self.tensordicts:
            td.lock_()
        return self

    # a lazy stack nested in a TensorDict: the parent's lock reaches the stacked TensorDicts
    def _propagate_lock(self, parents):
        for td in self.tensordicts:
            td._propagate_lock(parents)

    def _propagate_unlock(self):
        nested = []
        for td in self.tensordicts:
            nested.extend(td._propagate_unlock())
            nested.append(td)
        return nested

    def _check_unlock(self):
        for td in self.tensordicts:
            td._check_unlock()

    def unlock_(self):
        for td in self.tensordicts:
            td.unlock_()
        self._consolidated = None  # writes may now replace leaves: no longer views of one storage
        return self

    def consolidate(self, filename=None, *, device=None, **kwargs):
        """A locked lazy stack whose stacked TensorDicts' leaves are views of one uint8 storage
        (``_consolidated["storage"]``; in the file ``filename`` when given), self when consolidated
        already; the other keywords of ``TensorDict.consolidate`` change nothing here."""
        if self.is_consolidated() and filename is None and device is None:
            return self
        from rlpipe.tensordict._consolidate import consolidate
        return consolidate(self, filename, device)

    def is_consolidated(self):
        """Whether consolidate() made this lazy stack (and it has not been unlocked since)."""
        return getattr(self, "_consolidated", None) is not None

    @classmethod
    def from_consolidated(cls, source):
        """The TensorDict or lazy stack a consolidated file, buffer or TensorDict holds."""
        return TensorDict.from_consolidated(source)

    def __reduce_ex__(self, protocol):
        """A consolidated lazy stack pickles as its one storage and its metadata."""
        if self.is_consolidated():
            return consolidated_reduce(self)
        return super().__reduce_ex__(protocol)

    def share_memory_(self):
        for td in self.tensordicts:
            td.share_memory_()
        return self

    def memmap_(self, prefix=None, copy_existing=False, num_threads=0, **kwargs):
        """Memory-maps every stacked TensorDict (under ``prefix/<i>``; ``prefix/meta.json`` records the
        stack); returns self, locked."""
        for i, td in enumerate(self.tensordicts):
            td.memmap_(None if prefix is None else os.path.join(prefix, str(i)), copy_existing=copy_existing)
        if prefix is not None:
            meta = self._memmap_meta()
            _serialization._write_atomically(os.path.join(prefix, "meta.json"),
                                             lambda f: f.write(json.dumps(meta).encode()))
        return self

    def _mapped_file(self):
        """The file of the first memory-mapped leaf of the stacked TensorDicts, or None."""
        return next((f for f in (td._mapped_file() for td in self.tensordicts) if f is not None), None)

    def _memmap_meta(self):
        """The meta.json of a memory-mapped lazy stack (its TensorDicts are in the folders 0, 1, ...)."""
        return {"format": "rlpipe-tensordict-memmap", "version": 3, "kind": _MEMMAP_KIND, "stack_dim": self.stack_dim,
                "count": len(self.tensordicts), "batch_size": list(self._batch_size)}

    def memmap(self, prefix=None, copy_existing=False, *, num_threads=0, return_early=False, **kwargs):
        return self.clone().memmap_(prefix, copy_existing=True)

    @classmethod
    def load_memmap(cls, prefix, device=None, non_blocking=False, *, out=None, **kwargs):
        """The lazy stack ``memmap_(prefix)`` stored (``TensorDict.load_memmap`` gives it too)."""
        out = TensorDict.load_memmap(prefix, device)
        if not isinstance(out, cls):
            raise RuntimeError(f"load_memmap: {prefix!r} holds a {type(out).__name__}, not a lazy stack")
        return out

    def __repr__(self):
        fields = ",\n".join(f"        {k}: {_entry_repr(v)}" for k, v in zip(self.keys(), self._raw_values()))
        return (f"LazyStackedTensorDict(\n    fields={{\n{fields}}},\n    batch_size={self._batch_size},\n"
                f"    device={self.device},\n    stack_dim={self.stack_dim})")

    def _raw_values(self):
        return [[td.get(k) for td in self.tensordicts] for k in self.keys()]


class _LazyEntries(collections.abc.MutableMapping):
    """A lazy stack's entries as a mapping: reading one stacks it, writing one splits it."""
    __slots__ = ("_stack",)

    def __init__(self, stack):
        self._stack = stack

    def __getitem__(self, key):
        return self._stack.get(key, _RAISE)

    def __setitem__(self, key, value):
        self._stack.set(key, value)

    def __delitem__(self, key):
        self._stack.pop(key)

    def __iter__(self):
        return iter(self._stack.keys())

    def __len__(self):
        return len(self._stack.keys())


def _entry_repr(values):
    if all(isinstance(v, TensorDictBase) for v in values):
        return "LazyStackedTensorDict(...)"
    shapes = {tuple(v.shape) for v in values}
    shape = list(shapes.pop()) if len(shapes) == 1 else "heterogeneous"
    return f"Tensor(shape={shape}, dtype={values[0].dtype})"


def _same_structure(tds):
    """Whether the TensorDicts have the same keys and every entry the same shape (a dense stack works)."""
    first = {k: tuple(v.shape) if isinstance(v, Tensor) else None for k, v in tds[0].items(True, True)}
    for td in tds[1:]:
        if {k: tuple(v.shape) if isinstance(v, Tensor) else None for k, v in td.items(True, True)} != first:
            return False
    return True


def _best_intention_stack(tds, dim):
    """A dense TensorDict stacking ``tds`` (dense TensorDicts with the same keys) entry by entry, nested
    ones with maybe_dense_stack; None when they differ in keys or in a tensor's shape."""
    first = tds[0]
    if any(isinstance(td, LazyStackedTensorDict) or td.keys() != first.keys() or td.batch_size != first.batch_size
           for td in tds):
        return None
    d = first._batch_dim(dim, extra=1)
    entries = {}
    for key in first.keys():
        values = [td.get(key) for td in tds]
        if any(getattr(v, "_is_non_tensor", False) for v in values):
            entries[key] = TensorDictBase._non_tensor_types[2](values, d, "stack")
        elif all(isinstance(v, TensorDictBase) for v in values):
            entries[key] = LazyStackedTensorDict.maybe_dense_stack(values, d)
        elif all(isinstance(v, Tensor) for v in values) and len({tuple(v.shape) for v in values}) == 1:
            entries[key] = _join_leaves(values, d, "stack")
        else:
            return None
    batch = first.batch_size
    return TensorDict._build(entries, Size((*batch[:d], len(tds), *batch[d:])), first.device)


def _load_lazy(prefix, meta, load_dense):
    """The lazy stack a ``meta.json`` of kind "lazy_stack" describes (every part loaded as itself)."""
    count = meta["count"]
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive int, got {count!r}")
    tds = [TensorDict.load_memmap(os.path.join(prefix, str(i))) for i in range(count)]
    return LazyStackedTensorDict(*tds, stack_dim=int(meta["stack_dim"]))


_LOADERS[_MEMMAP_KIND] = _load_lazy
TensorDictBase._lazy_type = LazyStackedTensorDict


def _same_tensorclass(items):
    """Whether ``items`` are instances of one tensorclass."""
    return is_tensorclass(items[0]) and all(type(item) is type(items[0]) for item in items)


def lazy_stack(items, dim=0, **kwargs):
    """Stacks TensorDicts into a ``LazyStackedTensorDict`` (tensors: a dense stack; see
    ``LazyStackedTensorDict.lazy_stack``)."""
    return LazyStackedTensorDict.lazy_stack(items, dim, **kwargs)


LazyStackedTensorDict._dense_type = TensorDict
