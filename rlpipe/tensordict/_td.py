"""``TensorDict``: a dict of tensors that share leading batch dimensions and acts like one tensor.

Behaviour follows the ``tensordict`` library (0.14): keys are strings or tuples of strings for
nested entries, every leaf's shape starts with ``batch_size``, and indexing, reshaping, stacking
and device moves apply to every leaf over the batch dimensions only.

``TensorDict`` is the dense kind of ``TensorDictBase`` (``base.py``): its slots hold the entries, and
its methods come from one mixin per concern (see the package docstring for the files). This module
also holds ``_SubTensorDict`` (a view at an index that writes through to its source) and applies the
wrappers that give the ops' results their names, lock state, ``inplace=`` and ``with`` blocks.
"""
import os

from .. import _dtypes
from .._creation import as_tensor
from .._device import resolve
from .._tensor import Tensor
from ._apply import _ApplyMixin
from ._common import _NO_DEFAULT, _RAISE, _as_batch_size, _is_key, get_defaults_to_none, set_get_defaults_to_none
from ._construct import _ConstructMixin
from ._entries import _EntriesMixin
from ._index import _IndexMixin
from . import _io
from ._archive import extracted, is_memmap_archive
from ._io import _IOMixin, _done, _index_to_str, _stored_batch_size
from ._io import _str_to_index  # noqa: F401  (read here by tests written against tensordict._td)
from ._lock import _WITH_INVERSES, _LockMixin, _enter, _exit, _lock_like_source, _with_block
from ._names import (_NamesMixin, _bool_reduced_names, _expanded_names, _flattened_names, _names_if_same_batch,
                     _names_like_source, _no_names, _permuted_names, _reduced_names, _same_names, _squeezed_names,
                     _unflattened_names, _unsqueezed_names)
from ._repr import _ReprMixin, get_printoptions, set_printoptions
from ._shape import _ShapeMixin, _with_inplace
from .base import TensorDictBase, is_tensor_collection
from .keys import unravel_key_to_tuple

__all__ = ["TensorDict", "TensorDictBase", "is_tensor_collection", "get_defaults_to_none", "set_get_defaults_to_none",
           "get_printoptions", "set_printoptions"]


class TensorDict(_EntriesMixin, _LockMixin, _ApplyMixin, _IndexMixin, _ShapeMixin, _NamesMixin, _IOMixin,
                 _ConstructMixin, _ReprMixin, TensorDictBase):
    """A dictionary of tensors (and nested TensorDicts) whose shapes all start with ``batch_size``.

    >>> td = TensorDict({"obs": rlpipe.zeros(4, 3), "next": {"reward": rlpipe.zeros(4, 1)}}, batch_size=[4])
    >>> td[:2]["next", "reward"].shape
    rlpipe.Size([2, 1])
    """

    # the slots after _locked are set only when used (read with getattr and a default), so building a
    # TensorDict on the hot paths costs nothing more: the op a `with` block reverses, the stack of
    # those for nested `with` blocks, the TensorDicts whose lock holds this one, and the results
    # (flatten_keys, unflatten_keys) a locked TensorDict keeps, whether memmap_ made it (True until
    # it is unlocked; views and indexing results of such a TensorDict are memory-mapped too), and
    # whether share_memory_ made it shared (True until it is unlocked), and the batch dims' names (a
    # list, None where a dim has no name)
    __slots__ = ("_tensordict", "_batch_size", "_device", "_locked", "__weakref__", "_last_op", "_last_op_queue",
                 "_lock_parents", "_cache_store", "_memmap_state", "_consolidated", "_names", "_shared_state")

    def __init__(self, source=None, batch_size=None, device=None, names=None, non_blocking=None, lock=False,
                 **kwargs):
        self._tensordict = {}
        self._batch_size = _as_batch_size(batch_size)
        self._device = None if device is None else resolve(device)
        self._locked = False
        if source is None:
            source = {}
        elif kwargs:
            raise ValueError("Either a source dictionary or keyword arguments must be provided, not both.")
        if not hasattr(source, "items"):
            raise ValueError("A TensorDict source is expected to be a TensorDictBase sub-type or a dictionary, "
                             f"but type(source)={type(source).__name__}.")
        if names is not None:  # first: nested TensorDicts are then stored renamed copies, as in tensordict
            self.names = names
        for key, value in (*source.items(), *kwargs.items()):
            self.set(key, value)
        if lock:
            self.lock_()

    @classmethod
    def _build(cls, entries, batch_size, device):
        """A TensorDict from already-checked entries (the fast path of every batch operation)."""
        td = cls.__new__(cls)
        td._tensordict = entries
        td._batch_size = batch_size
        td._device = device
        td._locked = False
        return td

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls._validate_value_generic is not TensorDict._validate_value_generic and "set" not in cls.__dict__:
            cls.set = TensorDict._set_checked  # the fast path would skip the subclass's hook

    def _get_sub_tensordict(self, idx):
        """The part ``self[idx]`` as a sub-TensorDict that writes through to self (see _SubTensorDict)."""
        return _SubTensorDict(self, idx)

    get_sub_tensordict = _get_sub_tensordict

    @classmethod
    def load_memmap(cls, prefix, device=None, non_blocking=False, *, out=None, **kwargs):
        """See ``_load_memmap``; with ``device``, the loaded TensorDict moved there. With ``out`` (an
        unlocked TensorDict of the same batch size), the loaded leaves replace out's and the entries
        out has beyond them are removed (its nested TensorDicts are kept and filled the same way);
        out is returned, neither locked nor memory-mapped, as in tensordict. ``prefix`` may be an
        archive ``pack_memmap`` wrote (extracted to a temporary folder whose files are mapped)."""
        if is_memmap_archive(prefix):
            with extracted(prefix) as folder:
                return cls.load_memmap(folder, device, non_blocking, out=out, **kwargs)
        if out is not None and device is not None and out.device is not None and resolve(device) != out.device:
            raise ValueError(f"Cannot load a tensordict on device {device} into a tensordict on device "
                             f"{out.device}.")
        loaded = cls._load_memmap(prefix)
        device = device if out is None or out.device is None else out.device
        loaded = loaded if device is None else loaded.to(device)
        if out is None:
            return _io.TENSORCLASS_LOADER[0](prefix, loaded)
        if isinstance(loaded, _SubTensorDict):
            if not isinstance(out, _SubTensorDict):
                raise TypeError(f"Loading a _SubTensorDict into a {type(out).__name__} output is not supported. "
                                f"Provide a _SubTensorDict as `out` or None.")
            out._source._take_entries(loaded._source)
            return out
        if isinstance(out, _SubTensorDict):
            raise TypeError(f"load_memmap: {prefix!r} holds a TensorDict, which cannot be loaded into a "
                            f"_SubTensorDict output; pass a TensorDict as `out` or None.")
        return out._take_entries(loaded)


# the mixins create nested and plain TensorDicts through this, as they cannot import this module
TensorDict._dense_type = TensorDict


class _SubTensorDict(TensorDict):
    """``td._get_sub_tensordict(index)``: the part ``td[index]`` that reads from and writes to ``td``
    (tensordict's sub-TensorDict). Reading gives ``td``'s leaves indexed; ``set_``/``update``/
    ``td_sub[key] = value`` write into ``td`` at ``index``, and a new key is created in ``td`` (zeros
    outside ``index``). Its keys, batch size and device cannot change on their own."""
    __slots__ = ("_source", "_idx")

    def __init__(self, source, idx):
        self._source = source
        self._idx = source._batch_index(list(idx) if type(idx) is range else idx)
        self._batch_size = source._indexed_batch_size(self._idx)
        self._device = source.device
        self._locked = False

    @property
    def _tensordict(self):
        """The source's entries at the index (nested TensorDicts as sub-TensorDicts of theirs)."""
        return {key: value._get_sub_tensordict(self._idx) if isinstance(value, TensorDict) and not value._is_non_tensor
                else value[self._idx] for key, value in self._source._tensordict.items()}

    @property
    def batch_size(self):
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value):
        raise RuntimeError(self._BATCH_ERROR)

    shape = batch_size

    @classmethod
    def _build(cls, entries, batch_size, device):
        """What an operation on a sub-TensorDict returns: a plain TensorDict."""
        return TensorDict._build(entries, batch_size, device)

    def get_parent_tensordict(self):
        return self._source

    def set(self, key, value, inplace=False, non_blocking=False):
        """A new key is created in the source (zeros outside the index); an existing one can only be
        written in place (``inplace=True``, ``set_`` or ``td_sub[key] = value``)."""
        path = unravel_key_to_tuple(key)
        self._check_not_inside(path, value)
        if self._source.get(path, None) is not None:
            if not inplace:
                raise RuntimeError(f"Calling set on a sub-TensorDict with the existing key {key!r} is prohibited for "
                                   f"existing tensors: use set_ or set(..., inplace=True) to write in place")
            return self.set_(key, value)
        if isinstance(value, dict):
            value = TensorDict(value, batch_size=self._batch_size, device=self._device)
        holder = TensorDict._build({}, self._batch_size, self._device)
        holder._tensordict[path[-1]] = holder._leaf(key, value)
        parent = self._source._parent_of(path, create=True) if len(path) > 1 else self._source
        parent._check_unlocked()
        parent._write_at(self._idx, holder, len(self._source.batch_size), len(self._batch_size), (), dry=False)
        return self

    def set_(self, key, value):
        current = self._source.get(key, _RAISE)
        if isinstance(current, TensorDict):
            if not isinstance(value, (TensorDict, dict)):
                raise ValueError(f"Tried to replace a tensordict with an incompatible object of type "
                                 f"{type(value)}")
            # keys of value missing from current are created (zeros outside the index), as in tensordict
            current._get_sub_tensordict(self._idx).update(value)
        else:
            current[self._idx] = value if isinstance(value, Tensor) else as_tensor(value, device=current.device)
        return self

    def __setitem__(self, index, value):
        """``td_sub[key] = value`` writes the entry in place; ``td_sub[idx] = value`` writes the part
        ``idx`` of this view (read, assigned, written back into the source at this view's index)."""
        if _is_key(index):
            self.set(index, value, inplace=True)
            return
        part = self.to_tensordict()
        part[index] = value
        self.update(part)

    _BATCH_ERROR = ("Modifying the batch size of a lazy representation of a tensordict is not permitted. "
                    "Consider instantiating the tensordict first by calling `td = td.to_tensordict()` before "
                    "resetting the batch size.")

    def auto_batch_size_(self, batch_dims=None):
        raise RuntimeError(self._BATCH_ERROR)

    def lock_(self):
        raise RuntimeError("Cannot lock a _SubTensorDict. Lock the parent tensordict instead.")

    @TensorDict.is_locked.getter  # TensorDict's setter (lock_/unlock_), the source's state
    def is_locked(self):
        return self._source.is_locked

    def unlock_(self):
        """Nothing to do while the source is unlocked; RuntimeError while it is locked."""
        if self._source.is_locked:
            raise RuntimeError("Cannot unlock a _SubTensorDict. Unlock the parent tensordict instead.")
        return self

    def clone(self, recurse=True, **kwargs):
        """A plain TensorDict copy (``recurse=True``), or a view at the same index of a shallow copy of
        the source (``recurse=False``), as tensordict does."""
        if recurse:
            return self.to_tensordict()
        return _SubTensorDict(self._source.clone(recurse=False), self._idx)

    @staticmethod
    def _no_inplace(name, inplace):
        if inplace:
            raise RuntimeError(f"Cannot call {name} inplace on a lazy tensordict.")

    def select(self, *keys, inplace=False, strict=True):
        """A TensorDict of the selected entries; ``inplace=True`` is a RuntimeError (a view's keys are
        its source's), as in tensordict."""
        self._no_inplace("select", inplace)
        return super().select(*keys, strict=strict)

    def exclude(self, *keys, inplace=False):
        self._no_inplace("exclude", inplace)
        return super().exclude(*keys)

    def flatten_keys(self, separator=".", inplace=False, is_leaf=None):
        self._no_inplace("exclude", inplace)  # tensordict's message names exclude here too
        return super().flatten_keys(separator)

    def memmap_(self, prefix=None, copy_existing=False, num_threads=0):
        raise RuntimeError("Converting a sub-tensordict values to memmap cannot be done.")

    def share_memory_(self):
        raise RuntimeError("Casting a sub-tensordict values to shared memory cannot be done.")

    def memmap(self, prefix=None, copy_existing=False, *, num_threads=0, return_early=False, **kwargs):
        """A memory-mapped copy of the whole source (under ``prefix/_source``) viewed at this index,
        as tensordict does; ``load_memmap(prefix)`` gives such a view back."""
        source = self._source.memmap(None if prefix is None else os.path.join(prefix, "_source"))
        if prefix is not None:
            self._write_memmap_meta(prefix, kind="sub", index=_index_to_str(self._idx))
        out = _SubTensorDict(source, self._idx)
        return _done(out) if return_early else out

    def load_memmap_(self, prefix, *args, **kwargs):
        """Copies what ``memmap(prefix)`` stored into the existing leaves: the whole source when a
        sub-TensorDict was stored (as tensordict does), this view's part otherwise; returns self."""
        loaded = TensorDict.load_memmap(prefix)
        if isinstance(loaded, _SubTensorDict):
            self._source.update_(loaded._source)
            return self
        return self.update_(loaded)

    def popitem(self):
        raise NotImplementedError("popitem not implemented for class _SubTensorDict.")

    def to(self, *args, inplace=False, **kwargs):
        """As TensorDict.to, on a plain copy; ``inplace=True`` is a TypeError (a view has no leaves of its
        own to swap), as in tensordict."""
        if inplace:
            raise TypeError("Cannot send a _SubTensorDict instance to device/dtype inplace.")
        return super().to(*args, **kwargs)


    def split_keys(self, *key_sets, inplace=False, **kwargs):
        """As TensorDict.split_keys; ``inplace=True`` removes the split keys from the source (all of
        each entry) and returns this view last."""
        *outs, rest = super().split_keys(*key_sets, **kwargs)
        if not inplace:
            return (*outs, rest)
        self._check_unlocked()
        kept = set(rest.keys(True, True))
        for key in list(self._source.keys(True, True)):
            if key not in kept:
                self._source.pop(key)
        if not kwargs.get("reproduce_struct"):
            self._source.filter_empty_()
        return (*outs, self)


    def view(self, *args, dtype=None, **kwargs):
        """A dtype view works (it copies nothing it writes); a shape view is refused, as in tensordict."""
        if dtype is not None or (len(args) == 1 and isinstance(args[0], _dtypes.dtype)):
            return super().view(*args, dtype=dtype, **kwargs)
        raise RuntimeError("Cannot call `view` on a sub-tensordict. Call `reshape` instead.")


    def rename_key_(self, old_key, new_key, safe=False):
        """Renames the entry in the source (all of it, not only this view's part); returns self."""
        self._source.rename_key_(old_key, new_key, safe=safe)
        return self

    def clear(self):
        """Removes every entry from the source; returns self."""
        self._source.clear()
        return self

    def update(self, input_dict_or_td=None, clone=False, inplace=False, keys_to_update=None, **kwargs):
        """Writes every entry into the source at the index (in place for the existing ones)."""
        if kwargs:
            merged = dict(input_dict_or_td.items()) if input_dict_or_td is not None else {}
            merged.update({k: v for k, v in kwargs.items() if k not in ("non_blocking", "update_batch_size")})
            input_dict_or_td = merged
        if keys_to_update is not None and input_dict_or_td is not None:
            keys_to_update = [keys_to_update] if isinstance(keys_to_update, str) else keys_to_update
            wanted = [unravel_key_to_tuple(k) for k in keys_to_update]
            self._update_selected(input_dict_or_td, wanted, clone, True, ())
            return self
        for key, value in self._update_pairs({} if input_dict_or_td is None else input_dict_or_td, None):
            self.set(key, value.clone() if clone else value, inplace=True)
        return self

    def _check_unlocked(self):
        self._source._check_unlocked()

    def pop(self, key, default=_NO_DEFAULT):
        """Removes the entry from the source (all of it) and returns this view's part of it."""
        value = self.get(key, None)
        if value is None:
            return self._source.pop(key, default)  # the default, or the source's KeyError
        self._source.pop(key)
        return value

    def to_tensordict(self, *, retain_none=None):
        return TensorDict._build({k: v.to_tensordict() if isinstance(v, TensorDict) else v.clone()
                                  for k, v in self._tensordict.items()}, self._batch_size, self._device)


def _dense_only(name):
    def refuse(self, *args, **kwargs):
        raise RuntimeError(f"Cannot call `{name}` on a sub-tensordict. Make it dense before calling this method by "
                           f"calling `to_tensordict`.")
    refuse.__name__ = name
    refuse.__doc__ = f"Not on a sub-TensorDict (tensordict refuses it too): ``to_tensordict().{name}(...)``."
    return refuse


for _name in ("permute", "unsqueeze", "squeeze", "transpose"):
    setattr(_SubTensorDict, _name, _dense_only(_name))


def _to_state(td):
    """What rlpipe.save stores for a TensorDict: plain data (nested TensorDicts are stored the same way);
    a consolidated one, its storage and metadata (loaded consolidated again)."""
    if consolidated_state(td) is not None:
        return consolidated_state(td)
    return {"batch_size": list(td.batch_size), "device": None if td.device is None else str(td.device),
            "entries": dict(td._tensordict)}


def consolidated_state(td):
    """``{"consolidated": storage, "metadata": ...}`` of a consolidated TensorDict or lazy stack whose
    metadata is plain data (a tensorclass entry's class is not: then None)."""
    if not td.is_consolidated() or not _is_plain(td._consolidated["metadata"]):
        return None
    return {"consolidated": td._consolidated["storage"], "metadata": td._consolidated["metadata"]}


def _is_plain(value):
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


def from_consolidated_state(cls, state):
    """The consolidated TensorDict (or lazy stack) ``consolidated_state`` stored."""
    from rlpipe.tensordict._consolidate import rebuild
    return rebuild(cls, state["metadata"], state["consolidated"])


def _from_state(state):
    if "consolidated" in state:
        return from_consolidated_state(TensorDict, state)
    td = TensorDict(batch_size=_stored_batch_size(state["batch_size"]), device=state["device"])
    if not isinstance(state["entries"], dict):
        raise ValueError(f"entries should be a dict, got {type(state['entries']).__name__}")
    for key, value in state["entries"].items():
        td.set(key, value)
    return td


# ---- the wrappers TensorDict's ops get: the result's dim names, lock state, inplace= and `with` block --------
for _name, _rule in (("squeeze", _squeezed_names), ("unsqueeze", _unsqueezed_names),
                     ("permute", _permuted_names), ("expand", _expanded_names), ("_compare", _no_names),
                     ("_reduce", _reduced_names), ("_reduce_bool", _bool_reduced_names),
                     ("flatten", _flattened_names), ("unflatten", _unflattened_names)):
    setattr(TensorDict, _name, _names_like_source(_rule)(getattr(TensorDict, _name)))
# results with self's batch dims, in the same order (sizes may differ): the names carry over
for _name in ("detach", "to", "select", "exclude", "empty", "contiguous", "masked_fill", "gather",
              "roll", "flip", "fliplr", "flipud", "narrow", "repeat", "repeat_interleave",
              "flatten_keys", "unflatten_keys", "to_tensordict", "_cast", "_elementwise", "where"):
    setattr(TensorDict, _name, _names_like_source(_same_names)(getattr(TensorDict, _name)))
for _name in ("apply", "named_apply", "view", "reshape"):
    setattr(TensorDict, _name, _names_if_same_batch(getattr(TensorDict, _name)))

for _name in ("reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "expand",
              "flip", "roll", "narrow", "repeat_interleave", "tile", "detach", "to", "masked_fill", "type"):
    setattr(TensorDict, _name, _lock_like_source(getattr(TensorDict, _name)))

for _name in ("repeat", "repeat_interleave", "roll", "reshape", "flatten", "unflatten", "tile",
              "flip", "narrow", "expand", "squeeze", "unsqueeze", "permute", "transpose"):
    setattr(TensorDict, _name, _with_inplace(getattr(TensorDict, _name)))

TensorDict.__enter__ = _enter
TensorDict.__exit__ = _exit
for _name in _WITH_INVERSES:
    setattr(TensorDict, _name, _with_block(_name, getattr(TensorDict, _name), _name in ("lock_", "unlock_")))
TensorDict.moveaxis = TensorDict.movedim
TensorDict.swapaxes = TensorDict.swapdims = TensorDict.transpose
