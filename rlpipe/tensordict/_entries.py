"""TensorDict's storage: the entries (a dict of tensors and nested TensorDicts), their batch size and
device, and reading, writing, updating, selecting and listing them (``get``/``set``/``update``/``keys``...).

``_EntriesMixin`` works on the slots ``TensorDict`` declares (``_tensordict``, ``_batch_size``,
``_device``); ``self._dense_type`` is the dense ``TensorDict`` class, for the nested TensorDicts it creates.
"""
import numpy as np

from .._creation import as_tensor
from .._tensor import Tensor, size_repr as _shape_str
from ..func._batched import BatchedTensor
from ._common import _GET_DEFAULTS_TO_NONE, _NAMES_USED, _NO_DEFAULT, _RAISE, _as_batch_size, _key_str
from .base import TensorDictBase
from .keys import KeysView, unravel_key_to_tuple
from .utils import is_tensorclass


class _EntriesMixin:
    """The entries of a TensorDict and their batch size and device (see the module docstring)."""
    __slots__ = ()

    # ---- batch size and device ------------------------------------------------------------------
    @property
    def batch_size(self):
        return self._batch_size

    @batch_size.setter
    def batch_size(self, new):
        new = _as_batch_size(new)
        for value in self._tensordict.values():  # nested TensorDicts with fewer batch dims grow first
            if isinstance(value, TensorDictBase) and len(value.batch_size) < len(new):
                value.batch_size = new
        for key, value in self._tensordict.items():
            shape = value.batch_size if isinstance(value, TensorDictBase) else value.shape
            if tuple(shape[:len(new)]) != tuple(new):
                raise RuntimeError(f"the Tensor {key} has shape {_shape_str(shape)} which is incompatible with "
                                   f"the batch-size {_shape_str(new)}.")
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        if names is not None:  # dims kept keep their names; new dims have none
            self._names = (names + [None] * len(new))[:len(new)]
        self._batch_size = new

    shape = batch_size

    @property
    def batch_dims(self):
        return len(self._batch_size)

    @batch_dims.setter
    def batch_dims(self, value):
        raise RuntimeError("Setting batch dims on TensorDict instances is not allowed.")

    ndim = batch_dims

    @property
    def device(self):
        return self._device

    @device.setter
    def device(self, value):
        raise RuntimeError("device cannot be set using tensordict.device = device, because device cannot be "
                           "updated in-place. To update device, use tensordict.to(new_device), which will return a "
                           "new tensordict on the new device.")

    # ---- entries ---------------------------------------------------------------------------------
    def _leaf(self, key, value, adopt_names=True):
        """``value`` checked (and converted) to live under ``key``: a tensor or TensorDict whose
        leading dims are the batch size, on this TensorDict's device. With ``adopt_names`` (a real
        store, not a check) an unnamed self takes the names of a named TensorDict value."""
        given = value
        if isinstance(value, dict):
            value = self._dense_type(value, batch_size=self._batch_size, device=self._device)
        elif not isinstance(value, (Tensor, TensorDictBase, BatchedTensor)) and not is_tensorclass(value):
            value = self._as_entry(value)  # (a BatchedTensor is a tensor inside vmap)
        if self._device is not None and value.device != self._device:
            value = value.to(self._device)
        shape = value.batch_size if isinstance(value, TensorDictBase) else value.shape
        n = len(self._batch_size)
        if isinstance(value, TensorDictBase) and len(shape) < n:
            # tensordict gives a nested TensorDict with fewer batch dims the parent's batch size (on a
            # shallow copy): RuntimeError naming the leaf that does not fit
            value = value.copy()
            value.batch_size = self._batch_size
            shape = value.batch_size
        if tuple(shape[:n]) != tuple(self._batch_size):
            raise _batch_mismatch(key, self._batch_size, shape, given)
        if _NAMES_USED[0] and isinstance(value, TensorDictBase):
            if getattr(self, "_names", None) is not None:
                value = self._named_child(value)
            elif adopt_names and value._has_names():  # an unnamed TensorDict takes a named child's names
                self._set_names(value.names[:n])
        return value

    def _as_entry(self, value):
        """A tensor for numbers and (nested lists of) numbers; non-tensor data for anything else, as
        in tensordict 0.14: a string or object is NonTensorData, a list of them of the batch's length
        (under ``set_list_to_stack(True)``, the default) a NonTensorStack shaped like the list, whose
        leading dims must be the batch's (RuntimeError otherwise)."""
        if not isinstance(value, (str, bytes)):
            try:
                return as_tensor(value, device=self._device)
            except (TypeError, ValueError, RuntimeError):
                pass
        non_tensor_data, non_tensor_stack, *_, list_to_stack = self._non_tensor_types
        if isinstance(value, list) and list_to_stack():
            try:
                stack = non_tensor_stack.from_list(value, device=self._device)
            except ValueError:  # ragged nested lists: one object
                return non_tensor_data(value, batch_size=self._batch_size, device=self._device)
            if stack._batch_size[:len(self._batch_size)] != self._batch_size:
                raise RuntimeError(f"batch dimension mismatch, got self.batch_size={_shape_str(self._batch_size)} "
                                   f"and value.shape={_shape_str(stack._batch_size)}.")
            return stack
        return non_tensor_data(value, batch_size=self._batch_size, device=self._device)

    def _named_child(self, value):
        """A nested TensorDict with our names on its leading dims: itself when it has them already,
        else a shallow copy renamed (RuntimeError when one of its names differs from ours)."""
        names = self._names
        theirs = value.names
        if theirs[:len(names)] == names:
            return value
        value = value.copy()
        value.refine_names(*names, *theirs[len(names):])
        return value

    def _check_not_inside(self, path, value):
        """ValueError when storing ``value`` at ``path`` would put a TensorDict inside itself (this one
        or one on the way to ``path`` would be nested in ``value``), as tensordict does after 0.14
        (0.14.3 stores it, and the TensorDict then has no end)."""
        if not isinstance(value, TensorDictBase):
            return
        on_path = {id(td) for td in self._existing_path(path)}
        if any(id(nested) in on_path for nested in value._all_tensordicts()):
            raise ValueError(f"Cannot set a tensordict inside itself (key {path if len(path) > 1 else path[0]!r})")

    def _existing_path(self, path):
        """This TensorDict and the nested ones that exist on the way to ``path``'s last part."""
        chain = [self]
        for part in path[:-1]:
            child = chain[-1]._tensordict.get(part)
            if not isinstance(child, TensorDictBase):
                break
            chain.append(child)
        return chain

    def _parent_of(self, path, create=False):
        """The TensorDict holding the last part of ``path``."""
        td = self
        for i, part in enumerate(path[:-1]):
            child = td._tensordict.get(part)
            if child is None and create:
                child = td._tensordict[part] = self._dense_type._build({}, td._batch_size, td._device)
                if (getattr(td, "_names", None) if _NAMES_USED[0] else None) is not None:
                    child._names = list(td._names)
            if child is None:
                raise KeyError(f'key "{path[:i + 1] if i else part}" not found in TensorDict with keys '
                               f"{sorted(td._tensordict)}")
            if is_tensorclass(child):  # a tensorclass entry: its TensorDict holds the nested entries
                child = child._tensordict
            if not isinstance(child, TensorDictBase) and create:
                raise KeyError(f"The entry {path[:i + 1]!r} is already present in the TensorDict as a tensor: "
                               f"cannot set {path!r} under it")
            if not isinstance(child, TensorDictBase):  # tensordict's error type and wording
                raise ValueError(f"Expected a TensorDictBase instance but got {type(child).__name__} instead for "
                                 f"key {path[i + 1:]!r}: {_key_str(path[:i + 1])} is a {type(child).__name__}, not "
                                 f"a tensordict, so it has no entry {_key_str(path[i + 1:])}")
            td = child
        return td

    def get(self, key, default=_NO_DEFAULT):
        if type(key) is str:  # the common case (every policy step), without the nested-key walk
            value = self._tensordict.get(key, _NO_DEFAULT)
            if value is not _NO_DEFAULT:
                return value
            if default is not _NO_DEFAULT and default is not _RAISE:  # a plain key is missing here
                return default
        path = unravel_key_to_tuple(key)
        try:
            parent = self._parent_of(path)
        except KeyError:
            if default is _NO_DEFAULT and _GET_DEFAULTS_TO_NONE[0]:
                return None
            if default is not _NO_DEFAULT and default is not _RAISE:
                return default
            raise
        value = parent._tensordict.get(path[-1], _NO_DEFAULT)
        if value is _NO_DEFAULT:
            if default is _NO_DEFAULT and _GET_DEFAULTS_TO_NONE[0]:
                return None
            if default is not _NO_DEFAULT and default is not _RAISE:
                return default
            raise KeyError(f'key "{key}" not found in TensorDict with keys {sorted(parent._tensordict)}')
        return value

    def set(self, key, value, inplace=False, non_blocking=False):
        """Stores ``value`` under ``key`` (nested keys create the intermediate TensorDicts).
        ``non_blocking`` is accepted for tensordict's signature; copies are synchronous."""
        if (type(key) is str and type(value) is Tensor and not inplace and not self._locked
                and (self._device is None or value._device is self._device)
                and value._data.shape[:len(self._batch_size)] == self._batch_size):
            self._tensordict[key] = value  # the common case (every policy step), already checked
            return self
        return self._set_checked(key, value, inplace)

    def _set_checked(self, key, value, inplace=False, non_blocking=False):
        """``set`` without its fast path: every value goes through _leaf and _validate_value_generic."""
        path = unravel_key_to_tuple(key)
        if inplace and self.get(key, None) is not None:
            return self.set_(key, value)
        self._check_unlocked()
        if self._set_through_lazy(path, value, inplace):
            return self
        self._check_not_inside(path, value)
        try:
            parent = self._parent_of(path)
        except (KeyError, ValueError):  # nested TensorDicts to create (or a tensor in the way: KeyError below),
            # created only once the value is known to fit the deepest existing one (they take its batch size)
            self._existing_path(path)[-1]._leaf(key, value, adopt_names=False)  # a check only
            parent = self._parent_of(path, create=True)
        parent._tensordict[path[-1]] = self._validate_value_generic(parent._leaf(key, value))
        return self

    def _set_through_lazy(self, path, value, inplace):
        """Whether ``path`` runs through a lazy stack (a TensorDict of another kind), which then set the value
        under the rest of the path itself; False when it does not."""
        node = self
        for depth, part in enumerate(path[:-1]):
            child = node._tensordict.get(part)
            if not isinstance(child, TensorDictBase):
                return False
            if not hasattr(child, "_leaf"):
                child.set(path[depth + 1:], value, inplace=inplace)
                return True
            node = child
        return False

    def _validate_value_generic(self, value, **kwargs):
        """What ``set``/``update`` store for ``value`` once rlpipe has checked it (itself): tensordict's
        hook, which a subclass may override to change the value (calling super() first)."""
        return value

    def set_(self, key, value):
        """Copies ``value`` into the existing entry ``key`` (KeyError if there is none)."""
        current = self.get(key, _RAISE)
        if isinstance(current, TensorDictBase):
            current.update_(value)
            return self
        value = value if isinstance(value, Tensor) else as_tensor(value, device=current.device)
        try:
            fits = np.broadcast_shapes(tuple(value.shape), tuple(current.shape)) == tuple(current.shape)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"Failed to update {key!r} in tensordict: the value of shape {_shape_str(value.shape)} "
                             f"does not fit the entry of shape {_shape_str(current.shape)}")
        current.copy_(value)
        return self

    def update(self, input_dict_or_td=None, clone=False, inplace=False, keys_to_update=None, *,
               non_blocking=False, update_batch_size=False, is_leaf=None, **kwargs):
        """Sets every entry of ``input_dict_or_td`` and of ``kwargs`` (which win on a shared key),
        merging nested TensorDicts (only ``keys_to_update`` when given; nested keys allowed)."""
        input_dict_or_td, keys_to_update = _update_arguments(input_dict_or_td, keys_to_update, kwargs)
        if input_dict_or_td is None:
            return self
        if update_batch_size:
            return self._update_with_batch_size(input_dict_or_td, clone, inplace, keys_to_update)
        if keys_to_update is not None:
            wanted = [unravel_key_to_tuple(k) for k in keys_to_update]
            self._update_selected(input_dict_or_td, wanted, clone, inplace, ())
            return self
        if isinstance(input_dict_or_td, TensorDictBase) and input_dict_or_td._batch_size != self._batch_size:
            k = min(len(self._batch_size), len(input_dict_or_td._batch_size))
            if self._batch_size[:k] != input_dict_or_td._batch_size[:k]:  # neither batch size starts the other
                raise RuntimeError(f"update_batch_size must be set to True to be able to update tensordicts of "
                                   f"different batch size: got {_shape_str(input_dict_or_td._batch_size)} for a "
                                   f"TensorDict of batch size {_shape_str(self._batch_size)}")
            try:  # a TensorDict whose leaves do not fit: tensordict's error names update_batch_size
                return self._update_entries(input_dict_or_td, clone, inplace)
            except RuntimeError as e:
                if "batch" not in str(e):
                    raise
                raise RuntimeError(f"update_batch_size must be set to True to be able to update tensordicts of "
                                   f"different batch size: got {_shape_str(input_dict_or_td._batch_size)} for a "
                                   f"TensorDict of batch size {_shape_str(self._batch_size)} ({e})") from None
        return self._update_entries(input_dict_or_td, clone, inplace)

    def _update_with_batch_size(self, other, clone, inplace, keys_to_update):
        """update(update_batch_size=True): takes ``other``'s entries and batch size, nested TensorDicts
        kept and re-batched."""
        if inplace:
            raise RuntimeError("update_batch_size=True cannot be used with inplace=True")
        if keys_to_update is not None:
            raise RuntimeError("update_batch_size=True cannot be used with keys_to_update")
        self._check_unlocked()
        batch = other.batch_size if isinstance(other, TensorDictBase) else self._batch_size
        for key, value in other.items():
            current = self._tensordict.get(key)
            if isinstance(current, TensorDictBase) and isinstance(value, TensorDictBase):
                current._update_with_batch_size(value, clone, False, None)
            else:
                self._tensordict[key] = value.clone() if clone else value
        self.batch_size = batch
        return self

    def _update_entries(self, input_dict_or_td, clone, inplace):
        for key, value in input_dict_or_td.items():
            if clone and hasattr(value, "clone"):
                value = value.clone()
            current = self._tensordict.get(key) if isinstance(key, str) else self.get(key, None)
            if _is_branch(current) and isinstance(value, (TensorDictBase, dict)) and not _is_non_tensor(value):
                current.update(value, clone=clone, inplace=inplace)
            elif inplace and current is not None and not _is_non_tensor(value):
                self.set_(key, value)
            else:  # (non-tensor data replaces the entry, inplace or not, as tensordict's update)
                self.set(key, value)
        return self

    def update_(self, input_dict_or_td=None, clone=False, *, non_blocking=False, keys_to_update=None, **kwargs):
        """Copies every entry of ``input_dict_or_td`` and of ``kwargs`` into the existing entry of the
        same key (only ``keys_to_update`` when given). KeyError, before anything is written, for a key
        self lacks."""
        input_dict_or_td, keys_to_update = _update_arguments(input_dict_or_td, keys_to_update, kwargs)
        if input_dict_or_td is None:
            return self
        pairs = self._update_pairs(input_dict_or_td, keys_to_update)
        for key, _ in pairs:
            if self.get(key, None) is None:
                raise KeyError(f"The key {key} was not found in the dest tensordict.")
        for key, value in pairs:
            self.set_(key, value.clone() if clone else value)
        return self

    def _update_selected(self, other, wanted, clone, inplace, prefix):
        """update's walk with ``keys_to_update``: the entries of ``other`` on the way to a wanted key.
        As in tensordict, a nested TensorDict self lacks there arrives whole (all its entries), one
        self has is entered and filtered further."""
        for key, value in other.items():
            full = prefix + unravel_key_to_tuple(key)
            on_path = [w for w in wanted if w[:len(full)] == full or full[:len(w)] == w]
            if not on_path:
                continue
            whole = any(full[:len(w)] == w for w in on_path)
            if isinstance(value, (TensorDictBase, dict)) and not whole \
                    and isinstance(self.get(full, None), TensorDictBase):
                self._update_selected(value, wanted, clone, inplace, full)
            else:
                self.set(full, value.clone() if clone else value, inplace=inplace)

    @staticmethod
    def _update_pairs(source, keys_to_update):
        """(nested key, leaf) of a TensorDict or nested dict, filtered by ``keys_to_update`` (a key
        selects its whole subtree)."""
        pairs, stack = [], [((), source)]
        while stack:
            prefix, node = stack.pop()
            for key, value in node.items():
                full = prefix + unravel_key_to_tuple(key)
                if isinstance(value, (TensorDictBase, dict)):
                    stack.append((full, value))
                else:
                    pairs.append((full, value))
        if keys_to_update is not None:
            wanted = [unravel_key_to_tuple(k) for k in keys_to_update]
            pairs = [(k, v) for k, v in pairs if any(k[:len(w)] == w for w in wanted)]
        return [(k[0] if len(k) == 1 else k, v) for k, v in pairs]

    def pop(self, key, default=_NO_DEFAULT):
        self._check_unlocked()
        path = unravel_key_to_tuple(key)
        try:
            parent = self._parent_of(path)
            return parent._tensordict.pop(path[-1])
        except KeyError:
            if default is not _NO_DEFAULT:
                return default
            raise KeyError(f"You are trying to pop key `{key}` which is not in dict without providing default "
                           f'value: key "{key}" not found in {type(self).__name__} with keys '
                           f"{sorted(self._tensordict)}") from None

    def rename_key_(self, old_key, new_key, safe=False):
        self._check_unlocked()
        if safe and self.get(new_key, None) is not None:
            raise KeyError(f'key "{new_key}" already present in TensorDict.')
        self.set(new_key, self.pop(old_key))
        return self

    def select(self, *keys, inplace=False, strict=True, as_tensordict=False):
        """A TensorDict with only ``keys`` (nested keys keep their parents); ``as_tensordict`` matters to
        tensorclasses only."""
        out = self._build({}, self._batch_size, self._device)
        for key in keys:
            value = self.get(key, None if not strict else _RAISE)
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
            except (KeyError, ValueError):
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

    def keys(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        if sort:
            return self._keys_in_order(include_nested, leaves_only, True)
        return KeysView(self, include_nested, leaves_only)

    _keys_view_name = "_TensorDictKeysView"  # how tensordict prints keys()

    def _has_key(self, key, include_nested, leaves_only):
        """``key in self.keys(include_nested, leaves_only)``; a nested key needs include_nested (TypeError)."""
        try:
            path = unravel_key_to_tuple(key)
        except TypeError:
            raise TypeError(f"TensorDict keys are always strings. Got {key!r}") from None
        if len(path) > 1 and not include_nested:
            raise TypeError(f"Nested membership checks with tuples of strings is only supported when setting "
                            f"`include_nested=True` (got {key!r})")
        try:
            value = self.get(path, None)
        except ValueError:  # the path runs through a tensor
            return False
        return value is not None and not (leaves_only and isinstance(value, TensorDictBase))

    def _walk(self, include_nested, leaves_only, prefix=()):
        # tensordict's order: a nested TensorDict's keys come before the key of the TensorDict itself
        if include_nested and self._locked and not prefix:
            # a locked TensorDict's nested keys cannot change: walked once, then read from the cache
            yield from self._cached("keys", leaves_only, lambda: tuple(self._walk_tree(leaves_only)))
            return
        yield from self._walk_tree(leaves_only, include_nested, prefix)

    def _walk_tree(self, leaves_only, include_nested=True, prefix=()):
        for key, value in self._tensordict.items():
            if is_tensorclass(value):  # a tensorclass entry: its TensorDict's keys are nested keys
                value = value._tensordict
            nested = isinstance(value, TensorDictBase)
            full = prefix + (key,)
            if nested and include_nested:
                yield from value._walk_tree(leaves_only, include_nested, full)
            if not (leaves_only and nested):
                yield full if prefix else key

    def values(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        if type(self) is self._dense_type and not (include_nested or leaves_only or sort):
            return list(self._tensordict.values())  # the root's own entries: no walk, no get per key
        return [self.get(k) for k in self._keys_in_order(include_nested, leaves_only, sort)]

    def items(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        if type(self) is self._dense_type and not (include_nested or leaves_only or sort):
            return list(self._tensordict.items())
        return [(k, self.get(k)) for k in self._keys_in_order(include_nested, leaves_only, sort)]

    def _keys_in_order(self, include_nested, leaves_only, sort):
        keys = self._walk(include_nested, leaves_only)
        return sorted(keys, key=lambda k: ".".join(k) if isinstance(k, tuple) else k) if sort else keys

    def __contains__(self, key):
        """``key in td``: a string looks at the root keys, a tuple at the nested ones (tensordict
        0.14; earlier versions raised)."""
        if isinstance(key, str):
            return key in self._tensordict
        if isinstance(key, tuple) and key:
            return self._has_key(key, True, False)
        raise RuntimeError("key must be a NestedKey (a str or a possibly tuple of str).")

    def is_empty(self):
        return not any(True for _ in self._walk(True, True))

    def empty(self, recurse=False):
        """A TensorDict of the same batch size with no leaves (nested TensorDicts kept if ``recurse``,
        their non-tensor data too, as tensordict 0.14)."""
        entries = {k: v if v._is_non_tensor else v.empty(recurse) for k, v in self._tensordict.items()
                   if isinstance(v, TensorDictBase)} if recurse else {}
        return self._build(entries, self._batch_size, self._device)

    def _take_entries(self, other):
        """Makes self hold exactly the entries of ``other`` (same batch size): its leaves, in nested
        TensorDicts of self where self has them. Returns self."""
        if other._batch_size != self._batch_size:
            raise RuntimeError(f"Cannot load a tensordict of batch size {_shape_str(other._batch_size)} into one of "
                               f"batch size {_shape_str(self._batch_size)}.")
        self._check_unlocked()
        for key in [key for key in self._tensordict if key not in other._tensordict]:
            del self._tensordict[key]
        for key, value in other._tensordict.items():
            if isinstance(value, TensorDictBase):
                mine = self._tensordict.get(key)
                if not isinstance(mine, TensorDictBase) or mine._batch_size != value._batch_size:
                    mine = self._tensordict[key] = self._build({}, value._batch_size, self._device)
                mine._take_entries(value)
            else:
                self._tensordict[key] = value
        return self

    def create_nested(self, key):
        """Adds an empty nested TensorDict of this batch size under ``key``; returns self."""
        self.set(key, self._dense_type._build({}, self._batch_size, self._device))
        return self

    def clear(self):
        """Removes every entry; returns self."""
        self._check_unlocked()
        self._tensordict.clear()
        return self

    def popitem(self):
        """Removes and returns the (key, value) pair set last at the root."""
        self._check_unlocked()
        if not self._tensordict:
            raise KeyError("popitem(): tensordict is empty")
        return self._tensordict.popitem()

    @property
    def sorted_keys(self):
        """The root keys in alphabetical order (remembered while locked)."""
        return self._cached("sorted_keys", None, lambda: sorted(self._tensordict))

    @property
    def depth(self):
        """How many TensorDicts deep the deepest leaf sits (0 with no nested TensorDict; a property,
        as in tensordict)."""
        return max((len(key) - 1 if isinstance(key, tuple) else 0 for key in self._walk(True, True)), default=0)

    def filter_empty_(self):
        """Removes the nested TensorDicts that hold no leaf (recursively); returns self."""
        for key, value in list(self._tensordict.items()):
            if isinstance(value, TensorDictBase) and value.filter_empty_().is_empty():
                self._check_unlocked()
                del self._tensordict[key]
        return self

    def split_keys(self, *key_sets, inplace=False, default=_NO_DEFAULT, strict=True, reproduce_struct=False):
        """One TensorDict per key set (a list of keys, or a dict renaming them) and a last one with
        what is left: ``td.split_keys(["a"], ["b"])`` -> (td with a, td with b, the rest)."""
        rest = self.copy()
        if strict:
            default = _NO_DEFAULT
        elif default is _NO_DEFAULT:
            default = None
        outs = []
        for key_set in key_sets:
            out = self.empty(recurse=reproduce_struct)
            renames = key_set if isinstance(key_set, dict) else {key: key for key in key_set}
            for key, new_key in renames.items():
                value = rest.pop(key, default)
                if value is not None:
                    out.set(new_key, value)
            outs.append(out)
        if inplace:
            self._check_unlocked()
            self._tensordict = rest._tensordict
            rest = self
        if not reproduce_struct:
            rest.filter_empty_()
        return (*outs, rest)

    def _check_batch_size(self):
        """RuntimeError when a leaf or nested TensorDict does not start with the batch size."""
        n = len(self._batch_size)
        for key, value in self._tensordict.items():
            shape = value.batch_size if isinstance(value, TensorDictBase) else value.shape
            if tuple(shape[:n]) != tuple(self._batch_size):
                raise _batch_mismatch(key, self._batch_size, shape, value)
            if isinstance(value, TensorDictBase):
                value._check_batch_size()

    def _check_device(self):
        """RuntimeError when a leaf is not on the TensorDict's device (when it has one)."""
        if self._device is None:
            return
        for key, value in self.items(True, True):
            if value.device != self._device:
                raise RuntimeError(f"the entry {key!r} is on {value.device}, the TensorDict on {self._device}")

    def data_ptr(self, *, storage=False):
        """A TensorDict (batch size []) of every leaf's data pointer, as int64 tensors."""
        return self._dense_type({key: t.data_ptr() for key, t in self.items(True, True)}, batch_size=[])

    def separates(self, *keys, default=_NO_DEFAULT, strict=True, filter_empty=True):
        """Removes ``keys`` from self and returns them in a new TensorDict of the same batch size."""
        strict = strict and default is _NO_DEFAULT
        default = _NO_DEFAULT if strict else None
        if strict:
            for key in keys:
                self.get(key, _RAISE)
        out = self.empty(recurse=True)
        for key in keys:
            value = self.pop(key, default)
            if value is not None:
                out.set(key, value)
        out.filter_empty_()
        if filter_empty:
            self.filter_empty_()
        return out

    def clear_device_(self):
        """Forgets the device (leaves stay where they are); returns self."""
        for td in self._all_tensordicts():
            td._device = None
        return self

    def auto_device_(self):
        """Sets the device to the one all leaves share (None when they differ); returns self."""
        devices = {t.device for t in self.values(True, True)}
        device = devices.pop() if len(devices) == 1 else None
        for td in self._all_tensordicts():
            td._device = device
        return self

    def _all_tensordicts(self):
        yield self
        for value in self._tensordict.values():
            if isinstance(value, TensorDictBase):
                yield from value._all_tensordicts()

    def _become(self, result):
        """Takes ``result``'s leaves and batch size, keeping this TensorDict and its nested ones (what
        ``inplace=True`` of the shape ops does); returns self. A locked TensorDict refuses."""
        self._check_unlocked()
        for key, value in result._tensordict.items():
            mine = self._tensordict.get(key)
            if isinstance(value, TensorDictBase) and isinstance(mine, TensorDictBase):
                mine._become(value)
            else:
                self._tensordict[key] = value
        self._batch_size = result._batch_size
        names = (getattr(result, "_names", None) if _NAMES_USED[0] else None)
        if names is not None or (getattr(self, "_names", None) if _NAMES_USED[0] else None) is not None:
            self._names = names
        return self


def _batch_mismatch(key, batch_size, shape, given):
    """The RuntimeError for a value whose leading dims are not the batch size: tensordict's words and
    the key; for a non-tensor value (a number, say), why it became a tensor."""
    hint = ""
    if not isinstance(given, (Tensor, TensorDictBase, dict)):
        hint = (f" The {type(given).__name__} became a tensor of shape {list(shape)}: set_non_tensor stores it as "
                f"it is (NonTensorData).")
    return RuntimeError(f"batch dimension mismatch, got self.batch_size={_shape_str(batch_size)} and "
                        f"value.shape={_shape_str(shape)} for key {key!r}.{hint}")


def _update_arguments(input_dict_or_td, keys_to_update, kwargs):
    """update/update_'s source with the keyword entries merged in (they win on a shared key), and
    ``keys_to_update`` as a sequence of keys (a tuple is one, as in tensordict; a string is one key)."""
    if kwargs:
        merged = dict(input_dict_or_td.items()) if input_dict_or_td is not None else {}
        merged.update(kwargs)
        input_dict_or_td = merged
    if isinstance(keys_to_update, str):
        keys_to_update = [keys_to_update]
    return input_dict_or_td, keys_to_update


def _is_non_tensor(value):
    return getattr(value, "_is_non_tensor", False)


def _is_branch(value):
    """Whether ``value`` is a nested TensorDict whose entries update merges into (non-tensor data is a leaf)."""
    return isinstance(value, TensorDictBase) and not value._is_non_tensor
