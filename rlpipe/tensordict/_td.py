"""``TensorDict``: a dict of tensors that share leading batch dimensions and acts like one tensor.

Behaviour follows the ``tensordict`` library (0.14): keys are strings or tuples of strings for
nested entries, every leaf's shape starts with ``batch_size``, and indexing, reshaping, stacking
and device moves apply to every leaf over the batch dimensions only.
"""
import concurrent.futures
import json
import math
import numbers
import operator
import os
import textwrap
import warnings
import weakref
from collections import OrderedDict, namedtuple
from functools import wraps

import numpy as np

from .. import _dtypes, primitives as _ops, serialization as _serialization
from .._creation import as_tensor, zeros as _zeros
from .._device import CPU as _CPU, device as _device_cls, resolve
from .._tensor import Size, Tensor, wrap, size_repr as _shape_str
from ..autograd.grad_mode import state as _grad_state
from ._math import _NO_DIM, TensorDictMath
from .keys import KeysView, unravel_key_to_tuple
from .memmap import MemoryMappedTensor

_NO_DEFAULT = object()
_MASK_DTYPES = ("bool", "uint8")  # index dtypes torch reads as a mask (uint8 with a deprecation warning)
_INT_INDEX_CHARS = frozenset("bhilqpHILQP")  # NumPy's integer type codes but uint8's ("B"): row indices
_RAISE = object()  # get(key, _RAISE): KeyError for a missing key whatever set_get_defaults_to_none says


def _env_flag(name, default):
    """The boolean environment variable ``name`` ("1"/"true"/"yes"/"on" or "0"/"false"/"no"/"off"),
    ``default`` when unset; ValueError naming it for any other text."""
    text = os.environ.get(name)
    if text is None:
        return default
    if text.strip().lower() in ("1", "true", "yes", "y", "on", "t"):
        return True
    if text.strip().lower() in ("0", "false", "no", "n", "off", "f"):
        return False
    raise ValueError(f"environment variable {name} must be a boolean such as 1 or 0, got {text!r}")


# whether get(key) without a default returns None for a missing key (tensordict 0.14's default, and
# rlpipe's) or raises KeyError (TD_GET_DEFAULTS_TO_NONE=0): a one-item list, so set_get_defaults_to_none
# changes what every TensorDict reads
_GET_DEFAULTS_TO_NONE = [_env_flag("TD_GET_DEFAULTS_TO_NONE", True)]


# True once a TensorDict has been named: until then no names code runs (reading an unset slot with
# getattr and a default costs an exception), so unnamed TensorDicts pay nothing for names
_NAMES_USED = [False]


def set_get_defaults_to_none(set_to_none=True):
    """Makes ``TensorDict.get(key)`` return None for a missing key (True, the default as in tensordict
    0.14) or raise KeyError (False); the environment variable ``TD_GET_DEFAULTS_TO_NONE`` sets the
    starting value. ``td[key]`` raises KeyError either way."""
    _GET_DEFAULTS_TO_NONE[0] = bool(set_to_none)


def get_defaults_to_none():
    """Whether ``TensorDict.get(key)`` returns None for a missing key (see set_get_defaults_to_none)."""
    return _GET_DEFAULTS_TO_NONE[0]



def _as_batch_size(batch_size):
    if batch_size is None:
        return Size(())
    if isinstance(batch_size, (int, np.integer)) and not isinstance(batch_size, bool):
        return Size((int(batch_size),))
    if isinstance(batch_size, Tensor):
        batch_size = batch_size.tolist()
    try:
        sizes = tuple(batch_size)
    except TypeError:
        raise TypeError(f"batch_size must be a sequence of ints, got {batch_size!r}") from None
    message = f"batch_size must be a sequence of ints, got {batch_size!r}"
    if any(isinstance(s, bool) for s in sizes):
        raise TypeError(message)
    try:  # ints, NumPy ints and 0-d integer tensors; 1.5 or "a" is not a size (tensordict: ValueError)
        return Size(operator.index(s) for s in sizes)
    except TypeError:
        raise TypeError(message) from None


def _is_key(index):
    return isinstance(index, str) or isinstance(index, tuple) and index and all(
        isinstance(i, str) or isinstance(i, tuple) and _is_key(i) for i in index)


def _infer_batch(shape, numel):
    """A new batch shape with its -1 filled in. When the -1 cannot be filled, tensordict raises
    AssertionError (its type, kept for code that catches it): 'invalid shape [4, -1] for a batch of 6',
    'only one dimension can be inferred'; other misfits are torch's RuntimeError."""
    if shape.count(-1) > 1:
        raise AssertionError("only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape and (known == 0 or numel % known):
        raise AssertionError(f"invalid shape {list(shape)} for a batch of {numel}")
    return _ops._infer_shape(shape, numel)


def _key_str(path):
    """A key path as messages show it: 'a' for one part, ('a', 'b') for several."""
    return repr(path[0] if len(path) == 1 else path)


def _batch_mismatch(key, batch_size, shape, given):
    """The RuntimeError for a value whose leading dims are not the batch size: tensordict's words and
    the key; for a non-tensor value (a number, say), why it became a tensor."""
    hint = ""
    if not isinstance(given, (Tensor, TensorDict, dict)):
        hint = (f" The {type(given).__name__} became a tensor of shape {list(shape)}: rlpipe has no NonTensorData "
                f"to store it as it is.")
    return RuntimeError(f"batch dimension mismatch, got self.batch_size={_shape_str(batch_size)} and "
                        f"value.shape={_shape_str(shape)} for key {key!r}.{hint}")


def _check_cpu_leaf(key, value):
    """memmap_ maps CPU data only: RuntimeError naming the leaf and its device otherwise."""
    if value.device.type != "cpu":
        raise RuntimeError(f"memmap_: {key!r} is on {value.device}; move the TensorDict to the CPU first")


def _done(result):
    """A future that already holds ``result`` (what ``return_early=True`` returns)."""
    future = concurrent.futures.Future()
    future.set_result(result)
    return future


def _any_to_entries(obj):
    """from_any's conversion: nested dicts of tensors (or a tensor for a leaf)."""
    import dataclasses
    from collections.abc import Mapping
    if isinstance(obj, (TensorDict, Tensor)):
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


def _canonical(t):
    """``t`` when its strides are the row-major ones of its shape, else a row-major copy."""
    strides, step = [], 1
    for n in reversed(t.shape):
        strides.append(step)
        step *= n
    return t if t.stride() == tuple(reversed(strides)) else t.clone()


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def is_tensor_collection(obj):
    """Whether ``obj`` (an instance or a class) is a TensorDict: rlpipe's only tensor collection."""
    return issubclass(obj if isinstance(obj, type) else type(obj), TensorDict)


def _index_to_str(index):
    """A batch index as JSON data, in tensordict 0.14's tagged form (``["tuple", [...]]``,
    ``["slice", {...}]``, ``["tensor", values, device]`` ...), which _str_to_index reverses."""
    if isinstance(index, (tuple, list)):
        return ["tuple" if isinstance(index, tuple) else "list", [_index_to_str(i) for i in index]]
    if isinstance(index, (slice, range)):
        return ["slice" if isinstance(index, slice) else "range",
                {"start": index.start, "stop": index.stop, "step": index.step}]
    if isinstance(index, (Tensor, np.ndarray)):
        return ["tensor", index.tolist(), str(getattr(index, "device", "cpu"))]
    if index is Ellipsis:
        return ["ellipsis"]
    return index.item() if isinstance(index, np.generic) else index


def _str_to_index(index):
    """The batch index _index_to_str stored; an untagged list (older metadata) is a tuple of indices."""
    if not isinstance(index, (tuple, list)):
        return index
    if not index:
        return ()
    tag, rest = index[0], index[1:]
    if tag in ("tuple", "list") and len(rest) == 1 and isinstance(rest[0], list):
        items = [_str_to_index(i) for i in rest[0]]
        return tuple(items) if tag == "tuple" else items
    if tag in ("slice", "range") and len(rest) == 1 and isinstance(rest[0], dict):
        return (slice if tag == "slice" else range)(rest[0]["start"], rest[0]["stop"], rest[0]["step"])
    if tag == "tensor" and len(rest) == 2:
        try:
            return as_tensor(rest[0], device=rest[1])
        except RuntimeError as e:  # values or a device no tensor can have
            raise ValueError(f"bad tensor index {rest!r}: {e}") from None
    if tag == "ellipsis" and not rest:
        return Ellipsis
    return tuple(_str_to_index(i) for i in index)


_UNSAFE_IN_NAMES = frozenset('/<>:"|?*\\ %' + "".join(map(chr, range(32))) + chr(127))


def _file_name(key):
    """The file or folder name memmap_ gives entry ``key``: tensordict's robust keys, each unsafe
    character written %XX, '' as '%' and '.' or '..' as %2E per dot, so no key leaves the prefix."""
    if key in ("", ".", ".."):
        return "%2E" * len(key) or "%"
    return "".join(f"%{ord(c):02X}" if c in _UNSAFE_IN_NAMES else c for c in key)


def _stored_name(key, version):
    """The name a memmap folder of format ``version`` holds entry ``key`` under (before version 3,
    the key itself, which must then be a plain file name)."""
    if not isinstance(key, str):
        raise ValueError(f"bad key {key!r}")
    if version >= 3:
        return _file_name(key)
    if "/" in key or key.startswith("."):
        raise ValueError(f"bad key {key!r}")
    return key


class TensorDict(TensorDictMath):
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
        """Locks this TensorDict and every nested one: entries can then be written in place only
        (``set_``, ``update_``, ``td[idx] = ...``), never added, removed or replaced. Returns self;
        ``with td.lock_():`` locks for the block only."""
        if not self._locked:
            self._propagate_lock(None)
        return self

    def _propagate_lock(self, parents):
        """Locks self and its nested TensorDicts, recording in each the TensorDicts above it whose
        lock holds it (a TensorDict nested under two roots stays locked while either is)."""
        self._locked = True
        if parents is None:
            parents = []
        else:
            mine = getattr(self, "_lock_parents", None) or []
            self._lock_parents = mine + [r for r in parents if not any(r is m for m in mine)]
            parents = list(parents)
        parents.append(weakref.ref(self))
        for value in self._tensordict.values():
            if isinstance(value, TensorDict):
                value._propagate_lock(parents)

    def unlock_(self):
        """Unlocks this TensorDict and every nested one. RuntimeError (and everything stays locked)
        when one of them is also held by a locked TensorDict that is not below self."""
        nested = self._propagate_unlock()
        try:
            for sub in nested:
                sub._check_unlock()
            self._check_unlock()
        except RuntimeError:
            self.lock_()
            raise
        return self

    def _propagate_unlock(self):
        self._locked = False
        self._cache_store = None
        self._memmap_state = False
        self._consolidated = None  # writes may now replace leaves: no longer views of one storage
        self._shared_state = False
        nested = []
        for value in self._tensordict.values():
            if isinstance(value, TensorDict):
                nested.extend(value._propagate_unlock())
                nested.append(value)
        return nested

    def _check_unlock(self):
        for ref in getattr(self, "_lock_parents", None) or ():
            parent = ref()
            if parent is not None and parent._locked:
                raise RuntimeError("Cannot unlock a tensordict that is part of a locked graph. Unlock the root "
                                   "tensordict first. If the tensordict is part of multiple graphs, group the graphs "
                                   "under a common tensordict an unlock this root.")
        self._lock_parents = []

    @is_locked.setter
    def is_locked(self, value):
        if value:
            self.lock_()
        else:
            self.unlock_()

    @property
    def _lock_parents_weakrefs(self):
        """Weak references to the TensorDicts whose lock holds this one (tensordict's attribute)."""
        return getattr(self, "_lock_parents", None) or []

    @property
    def _is_locked(self):
        return self._locked

    @property
    def _cache(self):
        """What a locked TensorDict remembers (None when unlocked)."""
        return getattr(self, "_cache_store", None)

    def _cached(self, name, args, compute):
        """``compute()``, remembered under (name, args) while the TensorDict is locked: its keys
        cannot change then, so flatten_keys/unflatten_keys give the same TensorDict every call."""
        if not self._locked:
            return compute()
        cache = getattr(self, "_cache_store", None)
        if cache is None:
            cache = self._cache_store = {}
        key = name if args is None else (name, args)
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    def _check_unlocked(self):
        if self._locked:
            raise RuntimeError("Cannot modify locked TensorDict. For in-place modification, consider using the "
                               "`set_()` method and make sure the key is present.")

    def is_shared(self):
        """True once share_memory_ moved this TensorDict (or one it is nested in) into shared memory,
        until it is unlocked; always True on a CUDA device. As tensordict documents, a TensorDict
        merely holding shared tensors, or one indexed from a shared one, is not shared (tensordict
        0.14.3 does call ``td[0]``, ``view`` and ``unbind`` results of a shared TensorDict shared)."""
        if self._device is not None and self._device.type == "cuda":
            return True
        return getattr(self, "_shared_state", False) is True

    # ---- entries ---------------------------------------------------------------------------------
    def _leaf(self, key, value, adopt_names=True):
        """``value`` checked (and converted) to live under ``key``: a tensor or TensorDict whose
        leading dims are the batch size, on this TensorDict's device. With ``adopt_names`` (a real
        store, not a check) an unnamed self takes the names of a named TensorDict value."""
        given = value
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
        if isinstance(value, TensorDict) and len(shape) < n:
            # tensordict gives a nested TensorDict with fewer batch dims the parent's batch size (on a
            # shallow copy): RuntimeError naming the leaf that does not fit
            value = value.copy()
            value.batch_size = self._batch_size
            shape = value.batch_size
        if tuple(shape[:n]) != tuple(self._batch_size):
            raise _batch_mismatch(key, self._batch_size, shape, given)
        if _NAMES_USED[0] and isinstance(value, TensorDict):
            if getattr(self, "_names", None) is not None:
                value = self._named_child(value)
            elif adopt_names and value._has_names():  # an unnamed TensorDict takes a named child's names
                self._set_names(value.names[:n])
        return value

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
        if not isinstance(value, TensorDict):
            return
        on_path = {id(td) for td in self._existing_path(path)}
        if any(id(nested) in on_path for nested in value._all_tensordicts()):
            raise ValueError(f"Cannot set a tensordict inside itself (key {path if len(path) > 1 else path[0]!r})")

    def _existing_path(self, path):
        """This TensorDict and the nested ones that exist on the way to ``path``'s last part."""
        chain = [self]
        for part in path[:-1]:
            child = chain[-1]._tensordict.get(part)
            if not isinstance(child, TensorDict):
                break
            chain.append(child)
        return chain

    def _parent_of(self, path, create=False):
        """The TensorDict holding the last part of ``path``."""
        td = self
        for i, part in enumerate(path[:-1]):
            child = td._tensordict.get(part)
            if child is None and create:
                child = td._tensordict[part] = TensorDict._build({}, td._batch_size, td._device)
                if (getattr(td, "_names", None) if _NAMES_USED[0] else None) is not None:
                    child._names = list(td._names)
            if child is None:
                raise KeyError(f'key "{path[:i + 1] if i else part}" not found in TensorDict with keys '
                               f"{sorted(td._tensordict)}")
            if not isinstance(child, TensorDict) and create:
                raise KeyError(f"The entry {path[:i + 1]!r} is already present in the TensorDict as a tensor: "
                               f"cannot set {path!r} under it")
            if not isinstance(child, TensorDict):  # tensordict's error type and wording
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
        self._check_not_inside(path, value)
        try:
            parent = self._parent_of(path)
        except (KeyError, ValueError):  # nested TensorDicts to create (or a tensor in the way: KeyError below),
            # created only once the value is known to fit the deepest existing one (they take its batch size)
            self._existing_path(path)[-1]._leaf(key, value, adopt_names=False)  # a check only
            parent = self._parent_of(path, create=True)
        parent._tensordict[path[-1]] = self._validate_value_generic(parent._leaf(key, value))
        return self

    def _validate_value_generic(self, value, **kwargs):
        """What ``set``/``update`` store for ``value`` once rlpipe has checked it (itself): tensordict's
        hook, which a subclass may override to change the value (calling super() first)."""
        return value

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls._validate_value_generic is not TensorDict._validate_value_generic and "set" not in cls.__dict__:
            cls.set = TensorDict._set_checked  # the fast path would skip the subclass's hook

    def set_(self, key, value):
        """Copies ``value`` into the existing entry ``key`` (KeyError if there is none)."""
        current = self.get(key, _RAISE)
        if isinstance(current, TensorDict):
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
        if kwargs:
            merged = dict(input_dict_or_td.items()) if input_dict_or_td is not None else {}
            merged.update(kwargs)
            input_dict_or_td = merged
        if input_dict_or_td is None:
            return self
        if isinstance(keys_to_update, str):
            keys_to_update = [keys_to_update]  # a tuple is a sequence of keys, as in tensordict
        if update_batch_size:
            return self._update_with_batch_size(input_dict_or_td, clone, inplace, keys_to_update)
        if keys_to_update is not None:
            wanted = [unravel_key_to_tuple(k) for k in keys_to_update]
            self._update_selected(input_dict_or_td, wanted, clone, inplace, ())
            return self
        if isinstance(input_dict_or_td, TensorDict) and input_dict_or_td._batch_size != self._batch_size:
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
        batch = other.batch_size if isinstance(other, TensorDict) else self._batch_size
        for key, value in other.items():
            current = self._tensordict.get(key)
            if isinstance(current, TensorDict) and isinstance(value, TensorDict):
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
            if isinstance(current, TensorDict) and isinstance(value, (TensorDict, dict)):
                current.update(value, clone=clone, inplace=inplace)
            elif inplace and current is not None:
                self.set_(key, value)
            else:
                self.set(key, value)
        return self

    def update_(self, input_dict_or_td=None, clone=False, *, non_blocking=False, keys_to_update=None, **kwargs):
        """Copies every entry of ``input_dict_or_td`` and of ``kwargs`` into the existing entry of the
        same key (only ``keys_to_update`` when given). KeyError, before anything is written, for a key
        self lacks."""
        if kwargs:
            merged = dict(input_dict_or_td.items()) if input_dict_or_td is not None else {}
            merged.update(kwargs)
            input_dict_or_td = merged
        if input_dict_or_td is None:
            return self
        if isinstance(keys_to_update, str):
            keys_to_update = [keys_to_update]  # a tuple is a sequence of keys, as in tensordict
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
            if isinstance(value, (TensorDict, dict)) and not whole and isinstance(self.get(full, None), TensorDict):
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
                if isinstance(value, (TensorDict, dict)):
                    stack.append((full, value))
                else:
                    pairs.append((full, value))
        if keys_to_update is not None:
            wanted = [unravel_key_to_tuple(k) for k in keys_to_update]
            pairs = [(k, v) for k, v in pairs if any(k[:len(w)] == w for w in wanted)]
        return [(k[0] if len(k) == 1 else k, v) for k, v in pairs]

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
            raise KeyError(f"You are trying to pop key `{key}` which is not in dict without providing default "
                           f'value: key "{key}" not found in {type(self).__name__} with keys '
                           f"{sorted(self._tensordict)}") from None

    def __delitem__(self, key):
        self.pop(key)

    def del_(self, key):
        self.pop(key)
        return self

    def rename_key_(self, old_key, new_key, safe=False):
        self._check_unlocked()
        if safe and self.get(new_key, None) is not None:
            raise KeyError(f'key "{new_key}" already present in TensorDict.')
        self.set(new_key, self.pop(old_key))
        return self

    def select(self, *keys, inplace=False, strict=True):
        """A TensorDict with only ``keys`` (nested keys keep their parents)."""
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
        return value is not None and not (leaves_only and isinstance(value, TensorDict))

    def _walk(self, include_nested, leaves_only, prefix=()):
        # tensordict's order: a nested TensorDict's keys come before the key of the TensorDict itself
        if include_nested and self._locked and not prefix:
            # a locked TensorDict's nested keys cannot change: walked once, then read from the cache
            yield from self._cached("keys", leaves_only, lambda: tuple(self._walk_tree(leaves_only)))
            return
        yield from self._walk_tree(leaves_only, include_nested, prefix)

    def _walk_tree(self, leaves_only, include_nested=True, prefix=()):
        for key, value in self._tensordict.items():
            nested = isinstance(value, TensorDict)
            full = prefix + (key,)
            if nested and include_nested:
                yield from value._walk_tree(leaves_only, include_nested, full)
            if not (leaves_only and nested):
                yield full if prefix else key

    def values(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        if type(self) is TensorDict and not (include_nested or leaves_only or sort):
            return list(self._tensordict.values())  # the root's own entries: no walk, no get per key
        return [self.get(k) for k in self._keys_in_order(include_nested, leaves_only, sort)]

    def items(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        if type(self) is TensorDict and not (include_nested or leaves_only or sort):
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
        return self._build(entries, self._batch_size, self._device)

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
        out = self._build(entries, batch_size, device)
        self._names_to(out)
        return out

    def _names_to(self, out):
        """Gives ``out`` self's dim names, if any, when it has self's batch size (each nested
        TensorDict keeps its own)."""
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        if names is not None and out._batch_size == self._batch_size:
            out._names = list(names)

    def apply(self, fn, *others, batch_size=None, device=_NO_DEFAULT, inplace=False, names=None,
              filter_empty=None, default=_NO_DEFAULT, call_on_nested=False, out=None, is_leaf=None,
              propagate_lock=False, num_threads=0, checked=False, **constructor_kwargs):
        """Calls ``fn(leaf, *other_leaves)`` on every leaf (the same key of each TensorDict of
        ``others``; ``default`` where one lacks it). Leaves where fn returns None are dropped, and so
        are the nested TensorDicts left empty unless ``filter_empty=False``; None when nothing is
        left. ``inplace`` writes the results into self's leaves; ``out`` receives them as its new leaves."""
        return self._apply_named(lambda key, value, *rest: fn(value, *rest), others, batch_size, device,
                                 inplace, False, default, filter_empty, out)

    def named_apply(self, fn, *others, nested_keys=False, batch_size=None, device=_NO_DEFAULT, inplace=False,
                    default=_NO_DEFAULT, filter_empty=None, out=None, **kwargs):
        """Like apply, with the key passed first: ``fn(key, leaf, *other_leaves)`` (the full nested
        key with ``nested_keys``)."""
        return self._apply_named(fn, others, batch_size, device, inplace, nested_keys, default, filter_empty, out)

    def _fast_apply(self, fn, *others, named=False, nested_keys=False, batch_size=None, device=_NO_DEFAULT,
                    inplace=False, default=_NO_DEFAULT, filter_empty=None, out=None, **kwargs):
        """tensordict's internal apply (its threads are not used: one thread, the same results)."""
        if named:
            return self.named_apply(fn, *others, nested_keys=nested_keys, batch_size=batch_size, device=device,
                                    inplace=inplace, default=default, filter_empty=filter_empty, out=out)
        return self.apply(fn, *others, batch_size=batch_size, device=device, inplace=inplace, default=default,
                          filter_empty=filter_empty, out=out)

    def _apply_named(self, fn, others, batch_size, device, inplace, nested_keys, default, filter_empty=None,
                     out=None):
        produced = [0]
        result = self._apply_tree(fn, others, batch_size, device, inplace, nested_keys, default,
                                  filter_empty is not False, (), produced)
        if out is not None:
            # tensordict sets the results into out: they replace its leaves (new dtype included), and a
            # locked out is a RuntimeError
            out.update(result)
            return out
        if filter_empty is not False and not produced[0] and not self.is_empty():
            return None  # fn returned None for every leaf
        return result

    def _apply_tree(self, fn, others, batch_size, device, inplace, nested_keys, default, drop_empty, prefix,
                    produced):
        """apply's walk; ``produced[0]`` counts the leaves where fn returned a value."""
        batch_size = self._batch_size if batch_size is None else _as_batch_size(batch_size)
        device = self._device if device is _NO_DEFAULT else device
        entries = {}
        for key, value in self._tensordict.items():
            # an "other" that is not a TensorDict is the default standing in for a missing nested one
            rest = [o.get(key, _RAISE if default is _NO_DEFAULT else default) if isinstance(o, TensorDict)
                    else o for o in others] if others else ()
            if isinstance(value, TensorDict):
                sub = value._apply_tree(fn, rest, batch_size + value._batch_size[len(self._batch_size):],
                                        device, inplace, nested_keys, default, drop_empty, prefix + (key,), produced)
                if drop_empty and sub.is_empty() and not value.is_empty():
                    continue
                entries[key] = sub
                continue
            new = fn(prefix + (key,) if nested_keys and prefix else key, value, *rest)
            if new is None:
                continue
            produced[0] += 1
            if inplace and new is not value:
                value.copy_(new)
                new = value
            entries[key] = new
        if inplace:
            self._tensordict.update(entries)
            return self
        out = self._build(entries, batch_size, device)
        self._names_to(out)
        return out

    def apply_(self, fn, *others):
        return self.apply(fn, *others, inplace=True)

    def copy(self):
        """A shallow copy: new TensorDicts, the same tensors."""
        entries = {key: value.copy() if isinstance(value, TensorDict) else value
                   for key, value in self._tensordict.items()}
        out = self._build(entries, self._batch_size, self._device)
        self._names_to(out)
        return out

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

    def flatten_keys(self, separator=".", inplace=False, is_leaf=None):
        """A TensorDict whose nested keys are joined with ``separator`` (``("a", "b")`` -> ``"a.b"``);
        KeyError when two keys flatten to the same string. A locked TensorDict returns the same result
        every call (tensordict caches it too)."""
        if not inplace:
            return self._cached("flatten_keys", separator, lambda: self._flat_keys(separator))
        self._check_unlocked()
        self._tensordict = self._flat_keys(separator)._tensordict
        return self

    def _flat_keys(self, separator):
        entries = {}
        for key, value in self.items(include_nested=True, leaves_only=True):
            flat = separator.join(key) if isinstance(key, tuple) else key
            if flat in entries:
                raise KeyError(f"Flattening keys in tensordict causes keys [{flat!r}] to collide.")
            entries[flat] = value
        return self._build(entries, self._batch_size, self._device)

    def unflatten_keys(self, separator=".", inplace=False):
        """The inverse of flatten_keys: ``"a.b"`` becomes the entry ``b`` of a nested TensorDict ``a``
        (cached while locked, like flatten_keys)."""
        if not inplace:
            return self._cached("unflatten_keys", separator, lambda: self._unflat_keys(separator))
        self._check_unlocked()
        self._tensordict = self._unflat_keys(separator)._tensordict
        return self

    def _unflat_keys(self, separator):
        out = self._build({}, self._batch_size, self._device)
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDict):  # a copy: merging more keys into it must not touch a cached result
                value = value.unflatten_keys(separator).copy()
            out._merge_at(tuple(key.split(separator)), value, key)
        return out

    def _merge_at(self, path, value, flat_key):
        """Puts ``value`` at ``path`` for unflatten_keys, merging TensorDicts; KeyError when it would
        replace an entry (or needs a tensor to be a TensorDict), as tensordict does."""
        message = (f"Unflattening key(s) in tensordict will override an existing for unflattened key "
                   f"{flat_key!r} ({path!r})")
        try:
            parent = self._parent_of(path, create=True)
        except (KeyError, ValueError):
            raise KeyError(message) from None
        existing = parent._tensordict.get(path[-1])
        if existing is None:
            parent._tensordict[path[-1]] = value
        elif isinstance(existing, TensorDict) and isinstance(value, TensorDict):
            for key, sub in value._tensordict.items():
                existing._merge_at((key,), sub, flat_key)
        else:
            raise KeyError(message)

    # ---- devices and dtypes ------------------------------------------------------------------------
    def to(self, *args, device=None, dtype=None, other=None, batch_size=None, inplace=False,
           non_blocking=False, non_blocking_pin=False, num_threads=None, **kwargs):
        """``to(device)`` moves every leaf and sets ``device``; ``to(dtype)`` casts every leaf;
        ``to(tensor)`` takes both from a tensor, ``to(other=td)`` from a TensorDict (its dtype only
        when all its leaves share one); ``batch_size=`` re-batches the result. Self when nothing
        changes; ``inplace=True`` swaps the leaves of self (RuntimeError when it is locked)."""
        for a in args:
            if isinstance(a, TensorDict):
                other = a
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, bool):  # the positional non_blocking flag
                continue
            elif isinstance(a, (_dtypes.dtype, type, np.dtype)):
                dtype = a
            elif isinstance(a, (str, int, _device_cls)):
                device = a
            else:
                raise TypeError(f"TensorDict.to() received an invalid argument: {a!r}")
        if kwargs:
            raise TypeError(f"TensorDict.to() got unexpected keyword arguments {sorted(kwargs)}")
        if other is not None:
            device, dtype = other.device, other.dtype
        device = None if device is None else resolve(device)
        moves = device is not None and (device != self._device or any(
            t.device != device for t in self.values(True, True)))
        if not moves and dtype is None and batch_size is None:
            return self
        if moves and dtype is None and batch_size is None and not inplace and self.is_consolidated():
            return self.consolidate(device=device)  # one storage moved, still consolidated and locked

        def convert(t):
            return t.to(device=device if moves else None, dtype=dtype)
        if inplace:
            if moves or dtype is not None:
                self._check_unlocked()
            for td in self._all_tensordicts():
                for key, value in td._tensordict.items():
                    if not isinstance(value, TensorDict):
                        td._tensordict[key] = convert(value)
                if moves:
                    td._device = device
            if batch_size is not None:
                self.batch_size = batch_size
            return self
        out = self._map(convert, device=device if moves else self._device)
        if batch_size is not None:
            out.batch_size = batch_size
        return out

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}")

    # ---- indexing ----------------------------------------------------------------------------------
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
            return self.get(index, _RAISE)
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
            if isinstance(value, TensorDict):
                entries[key] = value._index_with(index, fast, new_batch + value._batch_size[len(self._batch_size):])
            elif fast is not None and not (value._requires_grad and _grad_state[0]):
                # take() gathers rows several times faster than fancy indexing; no graph to record
                entries[key] = wrap(value._data.take(fast, axis=0), value._device)
            else:
                entries[key] = value[index]
        return self._build(entries, new_batch, self._device)

    def _leaf_device(self):
        for value in self._tensordict.values():
            return value._leaf_device() if isinstance(value, TensorDict) else value._device
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
        if isinstance(value, (TensorDict, dict)):
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
        if not isinstance(value, TensorDict):
            return TensorDict(value, batch_size=target, device=self._device)
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
            if dest is None:
                self._check_unlocked()
                if dry:
                    continue
                root_batch = tuple(self._batch_size[:n_self])
                if isinstance(sub, TensorDict):
                    dest = TensorDict._build({}, Size(root_batch + tuple(sub._batch_size[n_val:])), self._device)
                else:
                    dest = _zeros(root_batch + tuple(sub.shape[n_val:]), dtype=sub.dtype,
                                      device=self._device if self._device is not None else sub.device)
                self._tensordict[key] = dest
            if isinstance(sub, TensorDict) != isinstance(dest, TensorDict):
                raise TypeError(f"td[index] = value: the entry {full if prefix else key!r} is a "
                                f"{type(dest).__name__} here and a {type(sub).__name__} in the value")
            if isinstance(sub, TensorDict):
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

    # ---- batch-shape operations ----------------------------------------------------------------------
    def _feature(self, value):
        return tuple(value.shape[len(self._batch_size):])

    def _reshaped(self, new_batch, view=False):
        new_batch = Size(_infer_batch(_ops._shape_arg(new_batch), self.numel()))

        def reshape(t):
            shape = new_batch + self._feature(t)
            return t.view(shape) if view else t.reshape(shape)
        return self._map(reshape, new_batch)

    def reshape(self, *shape, size=None):
        return self._reshaped(shape if size is None else size)

    def view(self, *shape, size=None, batch_size=None, dtype=None):
        """``view(*shape)`` reshapes the batch dims as a view; ``view(dtype, batch_size=...)`` views
        every leaf's bytes as ``dtype`` (tensordict's dtype view: the result has ``batch_size``)."""
        if dtype is None and len(shape) == 1 and isinstance(shape[0], _dtypes.dtype):
            dtype = shape[0]
        if dtype is not None:
            return self._view_dtype(dtype, batch_size)
        return self._reshaped(shape if size is None else size, view=True)

    def _view_dtype(self, dtype, batch_size):
        return self.apply(lambda t: t.view(dtype), batch_size=batch_size)

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
        """Merges batch dims ``start_dim..end_dim`` into one (None: the defaults); a TensorDict of
        batch size [] becomes one of batch size [1], as torch.flatten does with a 0-d tensor."""
        start_dim, end_dim = 0 if start_dim is None else start_dim, -1 if end_dim is None else end_dim
        if not self._batch_size:
            if start_dim not in (0, -1) or end_dim not in (0, -1):
                raise IndexError(f"flatten: dims ({start_dim}, {end_dim}) out of range for batch size []")
            return self._reshaped((1,))
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

    def permute(self, *dims, **kwargs):
        n = len(self._batch_size)
        dims = tuple(_ops._shape_arg(dims if dims else (kwargs.pop("dims"),)))
        if len(dims) != n or any(not -n <= d < n for d in dims):
            raise ValueError(f"Received an permutation order {dims} incompatible with the tensordict shape "
                             f"{_shape_str(self._batch_size)}.")
        dims = tuple(d % n for d in dims)
        if sorted(dims) != list(range(len(self._batch_size))):
            raise ValueError(f"Received an permutation order {dims} incompatible with the tensordict shape "
                             f"{_shape_str(self._batch_size)}: expected a permutation of the {n} batch dims.")
        new_batch = Size(self._batch_size[d] for d in dims)
        return self._map(lambda t: t.permute(*dims, *range(len(dims), t.ndim)), new_batch)

    def transpose(self, dim0, dim1):
        order = list(range(len(self._batch_size)))
        n = len(self._batch_size)
        if not (-n <= dim0 < n and -n <= dim1 < n):
            raise ValueError(f"dim0 and dim1 must be within the range of the number of dimensions of the "
                             f"tensordict ({n}), got dim0={dim0} and dim1={dim1}.")
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
        """Pieces of ``split_size`` along batch dim ``dim`` (the last one smaller), or of the sizes
        in a list of ints, which must add up to the dim's size."""
        if not -len(self._batch_size) <= dim < len(self._batch_size):
            raise IndexError(f"Incompatible dim {dim} for tensordict with batch dims {len(self._batch_size)}: "
                             f"dim out of range.")
        n = self._batch_size[self._batch_dim(dim)]
        if isinstance(split_size, (int, np.integer)) and not isinstance(split_size, bool):
            if split_size <= 0:
                raise ValueError(f"TensorDict.split: split_size must be positive, got {split_size}.")
            sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size or not n else [])
        else:
            if isinstance(split_size, (str, bytes)) or not all(
                    isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in split_size):
                raise TypeError(f"split(): argument 'split_size' must be int or list of ints, got {split_size!r}")
            sizes = [int(s) for s in split_size]
            if not sizes:
                raise RuntimeError(f"Insufficient number of elements in split_size: got [] for a dim of size {n}")
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise RuntimeError(f"split_with_sizes expects split_size to sum exactly to {n} (input tensor's "
                                   f"size at dimension {dim}), but got split_sizes={sizes}")
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

    def gather(self, dim, index, out=None, inplace=False):
        """torch.gather along batch dim ``dim`` for every leaf; ``inplace=True`` puts the results into
        self (index must then have as many dims as the batch, so that the batch dims stay)."""
        if inplace and out is not None:
            raise ValueError("`out` and `inplace=True` are mutually exclusive in gather.")
        if inplace and index.ndim != len(self._batch_size):
            raise NotImplementedError(f"gather(inplace=True) requires index.ndim == self.batch_dims so the result "
                                      f"keeps the same number of batch dims; got index.ndim={index.ndim} and "
                                      f"batch_dims={len(self._batch_size)}. Use inplace=False instead.")
        if not -len(self._batch_size) <= dim < len(self._batch_size):
            raise RuntimeError(f"Cannot gather tensordict with shape {_shape_str(self._batch_size)} along dim {dim}.")
        d = self._batch_dim(dim)
        new_batch = Size(index.shape)
        result = self._map(lambda t: t.gather(d, self._expanded(index, t).contiguous()), new_batch)
        if inplace:
            return self._become(result)
        return result if out is None else out.update_(result)

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
        target = self.get(key, _RAISE)
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
                raise KeyError(f"{how}: the TensorDicts have different keys: tensordict {i} has keys "
                               f"{sorted(td._tensordict)} but tensordict 0 has keys {sorted(first._tensordict)}")
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
        joined = type(first)._build(entries, Size(new_batch), first._device)
        if any((getattr(td, "_names", None) if _NAMES_USED[0] else None) is not None for td in tds):
            # stack: the new dim has no name, and no dim has one unless all the TensorDicts agree;
            # cat: the first TensorDict's names (tensordict's choices)
            names = first.names
            if how == "stack":
                names = names[:d] + [None] + names[d:] if all(td.names == first.names for td in tds) else None
            if names is not None:
                joined._set_names(names)
        return joined

    @classmethod
    def maybe_dense_stack(cls, items, dim=0, *, out=None, **kwargs):
        """tensordict's stack that goes lazy where it must: rlpipe has no lazy stacks, so this is
        ``stack`` (TensorDicts whose keys differ raise as there)."""
        return cls.stack(list(items), dim, out=out)

    @classmethod
    def stack(cls, tds, dim=0, *, out=None):
        """The TensorDicts stacked along a new batch dim ``dim`` (written into ``out``, in place,
        when given)."""
        joined = cls._join_tensordicts(list(tds), dim, "stack")
        return joined if out is None else out.update_(joined)

    @classmethod
    def cat(cls, tds, dim=0, *, out=None):
        """The TensorDicts concatenated along batch dim ``dim`` (into ``out`` when given)."""
        joined = cls._join_tensordicts(list(tds), dim, "cat")
        return joined if out is None else out.update_(joined)

    # ---- comparison ------------------------------------------------------------------------------------
    def _compare(self, other, op):
        if isinstance(other, dict):
            other = TensorDict(other, batch_size=[], device=self._device)
        if isinstance(other, TensorDict):
            mine, theirs = set(self._tensordict), set(other._tensordict)
            if mine != theirs:
                raise KeyError(f"keys in the two TensorDicts mismatch, got {sorted(mine)} and {sorted(theirs)}")
            return self.apply(op, other)
        return self._map(lambda t: op(t, other))

    def __eq__(self, other):
        """A TensorDict of bools, leaf by leaf; False (not an error) against a string or another
        object that is neither a TensorDict, a dict, a tensor nor a number, as in tensordict."""
        if not isinstance(other, _COMPARABLE):
            return False
        return self._compare(other, _ops.eq)

    def __ne__(self, other):
        if not isinstance(other, _COMPARABLE):
            return True
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
    def memmap_(self, prefix=None, copy_existing=False, num_threads=0, *, robust_key=None, **kwargs):
        """Moves every leaf into a NumPy memory-mapped file under ``prefix`` (one ``.npy`` file per
        leaf, one folder and ``meta.json`` per nested TensorDict), so the data can exceed RAM and
        outlive the process; then locks the TensorDict (in-place writes only). The leaves become
        ``MemoryMappedTensor``s. File and folder names are the keys with unsafe characters escaped
        (tensordict's ``robust_key=True``, which rlpipe always applies); an empty leaf gets no file
        (``meta.json`` records its shape and dtype). Without ``prefix``, each leaf not memory-mapped
        yet moves into anonymous memory instead: no file, nothing left behind, as in tensordict.

        Over an older checkpoint, its ``meta.json`` goes first and the new one is written last, so
        a save interrupted half-way leaves a folder that ``load_memmap`` refuses, never a mix."""
        if getattr(self, "_shared_state", False) is True:
            raise RuntimeError("memmap and shared memory are mutually exclusive features.")
        if prefix is None:
            return self._memmap_anonymous()
        self._check_memmap_layout()
        mapped = self._mapped_file()
        if mapped is not None and not copy_existing:
            if os.path.dirname(os.path.abspath(mapped)) != os.path.abspath(os.fspath(prefix)):
                raise RuntimeError(f"A filename was provided but the tensor already has a file associated ({mapped}). "
                                   f"To copy the tensor onto the new location, pass copy_existing=True.")
        os.makedirs(prefix, exist_ok=True)
        meta_path = os.path.join(prefix, "meta.json")
        if os.path.lexists(meta_path):
            os.remove(meta_path)
        leaves, nested = {}, []
        for key, value in self._tensordict.items():
            path = os.path.join(prefix, _file_name(key))
            if isinstance(value, TensorDict):
                value.memmap_(path, copy_existing=True)  # the check above covered it
                nested.append(key)
                continue
            leaves[key] = {"shape": list(value.shape), "dtype": value.dtype.name}
            if value.numel() == 0:
                continue  # nothing to map (a file could not be mapped either)
            target = path + ".memmap"
            if _maps_file(value, target):  # rewriting the file would first truncate the data it maps
                value = value.clone()
            leaf = MemoryMappedTensor.from_tensor(value, filename=target, existsok=True)
            leaf._data.flush()
            self._tensordict[key] = leaf
        self._write_memmap_meta(prefix, leaves=leaves, nested=nested)
        return self.lock_()._mark_memmap()

    def _check_memmap_layout(self):
        """Before memmap_(prefix) writes anything: every leaf on the CPU, and no two entries of one
        TensorDict (nor an entry and its meta.json) on the same file name."""
        for td in self._all_tensordicts():
            taken = {"meta.json"}
            for key, value in td._tensordict.items():
                nested = isinstance(value, TensorDict)
                if not nested:
                    _check_cpu_leaf(key, value)
                name = _file_name(key) + ("" if nested else ".memmap")
                if name in taken:
                    raise ValueError(f"memmap_: the entry {key!r} would be stored as {name!r}, a name another entry "
                                     "(or meta.json) of the same TensorDict already takes")
                taken.add(name)

    def _memmap_anonymous(self):
        """memmap_() without a prefix: leaves that are not MemoryMappedTensors yet are copied into
        anonymous memory maps (all leaves are checked before any moves); then locks."""
        for key, value in self.items(True, True):
            if not isinstance(value, MemoryMappedTensor):
                _check_cpu_leaf(key, value)
        for td in self._all_tensordicts():
            for key, value in td._tensordict.items():
                if not isinstance(value, (TensorDict, MemoryMappedTensor)):
                    td._tensordict[key] = MemoryMappedTensor.from_tensor(value)
        return self.lock_()._mark_memmap()

    def _write_memmap_meta(self, prefix, **entries):
        """Writes ``prefix/meta.json`` last and atomically (see memmap_)."""
        # "shape" is tensordict's name for the batch size in its meta.json
        meta = {"format": "rlpipe-tensordict-memmap", "version": 3, "batch_size": list(self._batch_size),
                "shape": list(self._batch_size), **entries}
        _serialization._write_atomically(os.path.join(prefix, "meta.json"),
                                         lambda f: f.write(json.dumps(meta).encode()))

    def _mapped_file(self):
        """The file of the first leaf (nested ones included) that lives in a memory-mapped file, or None."""
        for value in self._tensordict.values():
            found = value._mapped_file() if isinstance(value, TensorDict) else getattr(value._data, "filename", None)
            if found is not None:
                return found
        return None

    def memmap(self, prefix=None, copy_existing=False, *, num_threads=0, return_early=False, **kwargs):
        """A memory-mapped copy (this TensorDict is left as it is). ``return_early=True`` returns a
        future whose ``result()`` is that copy (rlpipe writes the files before returning)."""
        out = self.clone().memmap_(prefix, copy_existing=True, num_threads=num_threads)
        return _done(out) if return_early else out

    def memmap_like(self, prefix=None, copy_existing=False, *, existsok=True, num_threads=0, return_early=False,
                    **kwargs):
        """A memory-mapped TensorDict of the same structure, shapes and dtypes whose files hold zeros
        (the values are not copied); locked, as ``memmap_`` leaves it."""
        out = self._map(lambda t: _zeros(t.shape, dtype=t.dtype)).memmap_(prefix, num_threads=num_threads)
        return _done(out) if return_early else out

    def consolidate(self, filename=None, *, num_threads=0, device=None, non_blocking=False, inplace=False,
                    return_early=False, use_buffer=False, share_memory=False, pin_memory=False, metadata=False):
        """A locked copy whose leaves are views of one flat uint8 storage (``td._consolidated["storage"]``),
        in the file ``filename`` when given (then on the cpu), on ``device`` when given; self when it is
        consolidated already. Unlocking it drops the storage link. ``inplace=True`` makes self's leaves
        the views. ``return_early=True`` returns a future holding the result (rlpipe copies before
        returning; ``num_threads``, ``share_memory``, ``pin_memory`` and ``metadata`` change nothing)."""
        if return_early and use_buffer:
            raise NotImplementedError("consolidate(return_early=True) does not support use_buffer=True")
        if return_early and non_blocking:
            raise NotImplementedError("consolidate(return_early=True) does not support non_blocking=True")
        if self.is_consolidated() and filename is None and (device is None or resolve(device) == self._device):
            out = self
        else:
            from rlpipe.tensordict._consolidate import consolidate
            out = consolidate(self, filename, device)
            if inplace:
                self._check_unlocked()
                storage = out._consolidated
                out.unlock_()
                out = self._become(out).lock_()
                out._consolidated = storage
        return _done(out) if return_early else out

    def is_consolidated(self):
        """Whether consolidate() made this TensorDict (and it has not been unlocked since)."""
        return getattr(self, "_consolidated", None) is not None

    def _get_sub_tensordict(self, idx):
        """The part ``self[idx]`` as a sub-TensorDict that writes through to self (see _SubTensorDict)."""
        return _SubTensorDict(self, idx)

    get_sub_tensordict = _get_sub_tensordict

    def is_memmap(self):
        """True for a TensorDict that memmap_ or load_memmap made (and its views and indexed parts)
        until it is unlocked, as in tensordict."""
        return getattr(self, "_memmap_state", False) is True

    def _mark_memmap(self):
        """Marks this TensorDict and its nested ones memory-mapped, on the CPU device (a memory-mapped
        TensorDict made with device=None reports cpu, as in tensordict)."""
        for td in self._all_tensordicts():
            td._memmap_state = True
            td._device = _CPU
        return self

    @classmethod
    def load_memmap(cls, prefix, device=None, non_blocking=False, *, out=None, **kwargs):
        """See ``_load_memmap``; with ``device``, the loaded TensorDict moved there. With ``out`` (an
        unlocked TensorDict of the same batch size), the loaded leaves replace out's and the entries
        out has beyond them are removed (its nested TensorDicts are kept and filled the same way);
        out is returned, neither locked nor memory-mapped, as in tensordict."""
        if out is not None and device is not None and out.device is not None and resolve(device) != out.device:
            raise ValueError(f"Cannot load a tensordict on device {device} into a tensordict on device "
                             f"{out.device}.")
        loaded = cls._load_memmap(prefix)
        device = device if out is None or out.device is None else out.device
        loaded = loaded if device is None else loaded.to(device)
        if out is None:
            return loaded
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
            if isinstance(value, TensorDict):
                mine = self._tensordict.get(key)
                if not isinstance(mine, TensorDict) or mine._batch_size != value._batch_size:
                    mine = self._tensordict[key] = self._build({}, value._batch_size, self._device)
                mine._take_entries(value)
            else:
                self._tensordict[key] = value
        return self

    @classmethod
    def _load_memmap(cls, prefix):
        """The TensorDict that memmap_(prefix) wrote (any nested folder loads on its own too).

        Loading never changes the files: leaves are mapped copy-on-write, so the TensorDict is
        writable in place but its writes stay in memory (tensordict maps them read-write, and its
        writes reach the files). Each leaf file must hold exactly the bytes of the shape and dtype
        ``meta.json`` records; otherwise a RuntimeError names the leaf. A leaf whose file is gone is
        left out, as tensordict does. A folder that ``_SubTensorDict.memmap`` wrote loads as a
        _SubTensorDict of its source."""
        try:
            with open(os.path.join(prefix, "meta.json")) as f:
                meta = json.load(f)
            if not isinstance(meta, dict) or meta.get("format") != "rlpipe-tensordict-memmap":
                raise ValueError("not an rlpipe TensorDict memmap directory")
            if meta.get("kind") == "sub":
                source = TensorDict._load_memmap(os.path.join(prefix, "_source"))
                return _SubTensorDict(source, _str_to_index(meta["index"]))
            version = meta.get("version", 2)
            td = cls(batch_size=_stored_batch_size(meta["batch_size"]))
            for key, leaf in meta["leaves"].items():
                array = _load_leaf(os.path.join(prefix, _stored_name(key, version)), key, leaf)
                if array is not None:
                    td._tensordict[key] = td._leaf(key, MemoryMappedTensor._over(array))
            for key in meta["nested"]:
                td._tensordict[key] = td._leaf(key, cls.load_memmap(os.path.join(prefix, _stored_name(key, version))))
        except RecursionError:
            raise RuntimeError(f"load_memmap: {prefix!r}: meta.json is nested too deeply") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise RuntimeError(f"load_memmap: {prefix!r} holds no valid memory-mapped TensorDict ({e})") from None
        return td.lock_()._mark_memmap()

    # ---- tensordict's wider API: copies, in-place writes, construction, state dicts -----------------
    def to_tensordict(self, *, retain_none=None):
        """A plain, unlocked TensorDict holding copies of every leaf."""
        return self._map(lambda t: t.clone())

    def contiguous(self, *, canonical=False, inplace=False):
        """A new TensorDict whose leaves are contiguous (a contiguous leaf is kept, not copied);
        ``canonical=True`` also copies a leaf whose strides are not the row-major ones of its shape
        (a contiguous tensor may have odd strides on its size-1 dims); ``inplace=True`` swaps the
        leaves of self instead."""
        fix = _canonical if canonical else _ops.contiguous
        if inplace:
            for key, value in self._tensordict.items():
                if isinstance(value, TensorDict):
                    value.contiguous(canonical=canonical, inplace=True)
                else:
                    self._tensordict[key] = fix(value)
            return self
        return self._map(fix)

    def is_contiguous(self):
        return all(t.is_contiguous() for t in self.values(True, True))

    def copy_(self, tensordict, non_blocking=False):
        """Copies the leaves of ``tensordict`` into the leaves of self (same keys); returns self."""
        return self.update_(tensordict, non_blocking=non_blocking)

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

    def copy_at_(self, tensordict, idx, non_blocking=False):
        return self.update_at_(tensordict, idx, non_blocking=non_blocking)

    def entry_class(self, key):
        """The type of the entry ``key``: TensorDict for a nested TensorDict, else Tensor (NoneType
        for a missing key, as ``get`` gives None, in tensordict 0.14)."""
        return type(self.get(key))

    def create_nested(self, key):
        """Adds an empty nested TensorDict of this batch size under ``key``; returns self."""
        self.set(key, TensorDict._build({}, self._batch_size, self._device))
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

    def ndimension(self):
        return len(self._batch_size)

    @property
    def depth(self):
        """How many TensorDicts deep the deepest leaf sits (0 with no nested TensorDict; a property,
        as in tensordict)."""
        return max((len(key) - 1 if isinstance(key, tuple) else 0 for key in self._walk(True, True)), default=0)

    def param_count(self, *, count_duplicates=True):
        """The number of elements of all leaves (each distinct leaf once unless ``count_duplicates``)."""
        return sum(t.numel() for t in self._distinct_leaves(count_duplicates))

    def bytes(self, *, count_duplicates=True):
        """The number of bytes of all leaves (each distinct leaf once unless ``count_duplicates``)."""
        return sum(t.numel() * t.element_size() for t in self._distinct_leaves(count_duplicates))

    def _distinct_leaves(self, count_duplicates):
        leaves = self.values(True, True)
        return leaves if count_duplicates else list({id(t): t for t in leaves}.values())

    def is_floating_point(self):
        return all(t.is_floating_point() for t in self.values(True, True))

    def filter_empty_(self):
        """Removes the nested TensorDicts that hold no leaf (recursively); returns self."""
        for key, value in list(self._tensordict.items()):
            if isinstance(value, TensorDict) and value.filter_empty_().is_empty():
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

    @classmethod
    def from_dict(cls, input_dict, batch_size=None, device=None, batch_dims=None, *, auto_batch_size=None,
                  names=None):
        """A TensorDict from a nested dict (nested dicts become nested TensorDicts). The batch size is
        ``batch_size``, or with ``batch_dims``/``auto_batch_size`` the longest one every leaf
        shares (at most ``batch_dims`` dims), else ``[]``, as in tensordict 0.14."""
        if isinstance(input_dict, TensorDict):
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
            if isinstance(value, TensorDict):
                value.auto_batch_size_(batch_dims)
        shapes = [tuple(v.batch_size if isinstance(v, TensorDict) else v.shape) for v in self._tensordict.values()
                  if not (isinstance(v, TensorDict) and v.is_empty())]  # an empty one fits any batch size
        if not shapes:
            self._batch_size = self._batch_size[:batch_dims] if batch_dims else self._batch_size
            return self
        common = []
        for sizes in zip(*shapes):
            if any(s != sizes[0] for s in sizes) or batch_dims is not None and len(common) == batch_dims:
                break
            common.append(sizes[0])
        for value in self._tensordict.values():
            if isinstance(value, TensorDict) and value.is_empty():
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
        ``batch_dims`` count that new dim. ``lazy=True`` raises NotImplementedError (no lazy stacks)."""
        if lazy:
            return cls.lazy_stack(input)
        if batch_size is not None:
            given, batch_size = batch_size, [batch_size] if isinstance(batch_size, int) else list(batch_size)
            if batch_size[0] != len(input):
                raise ValueError(f"The provided batch size ({given}) does not match the length of the list "
                                 f"({len(input)}).")
            batch_size = batch_size[1:]
        if batch_dims is not None:
            batch_dims -= 1
        items = [d if isinstance(d, TensorDict) else
                 cls.from_dict(d, batch_size=batch_size, device=device, batch_dims=batch_dims,
                               auto_batch_size=auto_batch_size) for d in input]
        return cls.stack(items, 0)

    def to_namedtuple(self, dest_cls=None):
        """The entries as a namedtuple (class ``GenericDict`` unless ``dest_cls`` is given), nested
        TensorDicts as nested namedtuples; the leaves are shared, not copied."""
        values = {key: value.to_namedtuple() if isinstance(value, TensorDict) else value
                  for key, value in self._tensordict.items()}
        if dest_cls is None:
            dest_cls = namedtuple("GenericDict", list(values))
        return dest_cls(**values)

    def as_tensor(self):
        """A TensorDict of the same leaves (tensordict's turns memory-mapped leaves into plain tensors;
        rlpipe's memory-mapped leaves already are Tensors)."""
        return self._map(lambda t: t)

    def is_non_tensor(self, key):
        """Always False for an existing key (rlpipe has no non-tensor data); KeyError for a missing one."""
        self.get(key, _RAISE)
        return False

    def pin_memory_(self, num_threads=0):
        """No pinned memory in rlpipe: returns self."""
        return self

    def load_memmap_(self, prefix, *args, **kwargs):
        """Copies what ``memmap_(prefix)`` stored into the existing leaves; returns self."""
        return self.load_(prefix)

    @classmethod
    def lazy_stack(cls, input, dim=0, *, out=None, **kwargs):
        """tensordict's lazy stack: not available in rlpipe (``TensorDict.stack`` stacks densely)."""
        raise NotImplementedError("TensorDict.lazy_stack is not available in rlpipe: lazy stacks are not "
                                  "implemented; TensorDict.stack stacks densely")

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
                if isinstance(value, TensorDict) else value.tolist() if convert_tensors else value
                for key, value in self._tensordict.items()}

    def _as_plain_dict(self, convert_tensors):
        return {key: value._as_plain_dict(convert_tensors) if isinstance(value, TensorDict)
                else value.tolist() if convert_tensors else value for key, value in self._tensordict.items()}

    def state_dict(self, destination=None, prefix="", keep_vars=False, flatten=True):
        """The leaves as an OrderedDict, with ``"."``-joined keys (a nested OrderedDict per nested
        TensorDict with ``flatten=False``); ``_metadata`` records each level's batch size and device."""
        if destination is None:
            destination = OrderedDict()
        if not hasattr(destination, "_metadata"):
            destination._metadata = OrderedDict()
        destination._metadata[prefix[:-1] if prefix.endswith(".") else prefix] = {
            "batch_size": self._batch_size, "device": self._device}
        for key, value in self._tensordict.items():
            if not isinstance(value, TensorDict):
                destination[prefix + key] = value if keep_vars else value.detach()
            elif flatten:
                value.state_dict(destination, prefix + key + ".", keep_vars, True)
            else:
                destination[prefix + key] = value.state_dict(keep_vars=keep_vars, flatten=False)
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False, from_flatten=None):
        """Loads what state_dict returned (flat or nested): copies into the existing leaves, or
        replaces them with ``assign=True``. With ``strict``, RuntimeError unless the keys match."""
        metadata = getattr(state_dict, "_metadata", None)
        if from_flatten is None:
            from_flatten = metadata is not None and set(state_dict) != set(self._tensordict)
        if from_flatten:
            state_dict = _unflatten_state_dict(state_dict)
            metadata = state_dict._metadata
        level = dict((metadata or {}).get("", {}))
        if "__batch_size" in state_dict:  # the format of older tensordict versions
            state_dict = OrderedDict(state_dict)
            level = {"batch_size": state_dict.pop("__batch_size"), "device": state_dict.pop("__device", None)}
        # nested TensorDicts (or dicts) without leaves may be missing on either side; the message
        # lists every key that differs, as tensordict's does
        extra, missing = set(state_dict) - set(self._tensordict), set(self._tensordict) - set(state_dict)
        if strict and (any(_holds_leaves(state_dict[k]) for k in extra) or any(
                not (isinstance(self._tensordict[k], TensorDict) and self._tensordict[k].is_empty())
                for k in missing)):
            raise RuntimeError(f"Cannot load state-dict because the key sets don't match: got state_dict extra "
                               f"keys \n{extra}\n and tensordict extra keys\n{missing}\n")
        device = level.get("device")
        if device is not None and self._device is not None and resolve(device) != self._device:
            raise RuntimeError("Loading data from another device is not yet supported.")
        self.batch_size = level.get("batch_size", self._batch_size)
        for key, item in state_dict.items():
            if isinstance(item, dict):
                dest = self._tensordict.get(key)
                if dest is None:
                    dest = self.empty()
                dest.load_state_dict(item, strict=strict, assign=assign, from_flatten=False)
                if key not in self._tensordict:
                    self.set(key, dest)
            else:
                self.set(key, item, inplace=not assign)
        return self

    # ---- tensordict's wider API: batch-shape operations ----------------------------------------------
    def _dims_tuple(self, dims):
        """``dims`` (an int or a sequence) as non-negative batch dims, IndexError out of range."""
        dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
        n = len(self._batch_size)
        for d in dims:
            if not -n <= d < n:
                raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
        return tuple(d % n for d in dims)

    def repeat(self, *repeats):
        """Tiles every leaf ``repeats[i]`` times along batch dim ``i`` (torch's Tensor.repeat over
        the batch dims; feature dims are not repeated)."""
        if len(repeats) == 1 and not isinstance(repeats[0], (int, np.integer)):
            repeats = tuple(repeats[0].tolist() if isinstance(repeats[0], Tensor) else repeats[0])
        if len(repeats) != len(self._batch_size):
            raise ValueError(f"The number of repeat elements must match the number of dimensions of the "
                             f"tensordict. Got {len(repeats)} but ndim={len(self._batch_size)}.")
        new_batch = Size(s * r for s, r in zip(self._batch_size, repeats))
        return self._map(lambda t: t.repeat(*repeats, *(1,) * (t.ndim - len(repeats))), new_batch)

    def tile(self, dims):
        """Like repeat, with ``dims`` padded with leading 1s (or new leading batch dims) as torch.tile."""
        dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
        td = self
        while len(dims) > len(td._batch_size):
            td = td.unsqueeze(0)
        return td.repeat(*(1,) * (len(td._batch_size) - len(dims)), *dims)

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        """Repeats each element along batch dim ``dim`` (numpy.repeat's semantics); with ``dim=None``
        over the flattened batch dims."""
        if dim is None:
            return self.reshape(-1).repeat_interleave(repeats, 0)
        d = self._batch_dim(dim)
        if isinstance(repeats, Tensor) and repeats.ndim:
            length = int(repeats.sum())
        else:
            length = self._batch_size[d] * int(repeats)
        new_batch = self._batch_size[:d] + (length,) + self._batch_size[d + 1:]
        return self._map(lambda t: t.repeat_interleave(repeats, dim=d), Size(new_batch))

    def roll(self, shifts, dims=None):
        """Rolls every leaf along batch dims ``dims`` (over the flattened batch when None: rlpipe
        rolls the batch only, where tensordict's leaves would also roll their feature elements)."""
        if dims is None:
            return self.reshape(-1).roll(shifts, 0).reshape(self._batch_size)
        dims = self._dims_tuple(dims)
        if isinstance(shifts, (int, np.integer)) and len(dims) == 1:
            return self._map(lambda t: t.roll(int(shifts), dims[0]))
        shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
        return self._map(lambda t: t.roll(shifts, dims))

    def flip(self, dims):
        dims = self._dims_tuple(dims)
        return self._map(lambda t: t.flip(dims))

    def fliplr(self):
        if len(self._batch_size) < 2:
            raise RuntimeError("fliplr requires at least 2 batch dimensions")
        return self.flip(1)

    def flipud(self):
        if len(self._batch_size) < 1:
            raise RuntimeError("flipud requires at least 1 batch dimension")
        return self.flip(0)

    def movedim(self, source, destination):
        """Moves batch dims ``source`` to positions ``destination`` (ints or sequences), as torch."""
        source, destination = self._dims_tuple(source), self._dims_tuple(destination)
        if len(source) != len(destination):
            raise ValueError(f"movedim: source and destination must have the same number of elements, got "
                             f"{len(source)} and {len(destination)}")
        if len(set(source)) != len(source):
            raise RuntimeError(f"movedim: repeated dim in source {source}")
        if len(set(destination)) != len(destination):
            raise RuntimeError(f"movedim: repeated dim in destination {destination}")
        order = [d for d in range(len(self._batch_size)) if d not in source]
        if source == destination:
            return self
        for dst, src in sorted(zip(destination, source)):
            order.insert(dst, src)
        return self.permute(order)

    moveaxis = movedim

    def swapaxes(self, axis0, axis1):
        return self.transpose(axis0, axis1)

    swapdims = swapaxes

    def narrow(self, dim, start, length):
        d = self._dims_tuple(dim)[0]
        size = self._batch_size[d]
        start = start + size if start < 0 else start
        if not 0 <= start <= size or length < 0 or start + length > size:
            raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({size}).")
        return self[(slice(None),) * d + (slice(start, start + length),)]

    def expand_as(self, other):
        """Expanded to a tensor's shape, or to another TensorDict leaf by leaf (each leaf takes the
        shape of the other's leaf under the same key)."""
        if isinstance(other, TensorDict):
            return self.apply(lambda t, o: t.expand_as(o), other, batch_size=other.batch_size, device=other.device)
        return self.expand(other.shape)

    def broadcast_to(self, shape):
        return self.expand(shape)

    def tensor_split(self, indices_or_sections, dim=0):
        """torch.tensor_split over batch dim ``dim``: a number of near-equal pieces or split indices."""
        d = self._batch_dim(dim)
        n = self._batch_size[d]
        if isinstance(indices_or_sections, Tensor):  # a 0-d tensor is a number of sections, a 1-d one indices
            indices_or_sections = indices_or_sections.tolist()
        if isinstance(indices_or_sections, (int, np.integer)):
            k = int(indices_or_sections)
            if k <= 0:
                raise RuntimeError(f"number of sections must be larger than 0, got {k}")
            return self._pieces([n // k + (1 if i < n % k else 0) for i in range(k)], dim)
        bounds = [int(i) for i in indices_or_sections]  # Python slicing: negative, past-the-end, descending
        return tuple(self[(slice(None),) * d + (slice(a, b),)] for a, b in zip([0] + bounds, bounds + [None]))

    def atleast_1d(self):
        return self if self._batch_size else self.unsqueeze(0)

    def _new_filled(self, make, size, dtype, device):
        """A TensorDict of batch size ``size`` whose leaves are ``make(shape, leaf)`` (the leaf's
        feature dims kept)."""
        size = Size(_ops._shape_arg(size))
        device = self._device if device is _NO_DEFAULT else None if device is None else resolve(device)

        def one(t):
            out = make(size + self._feature(t), t)
            out = out if dtype is None else out.to(dtype)
            return out if device is None else out.to(device)
        return self._map(one, size, device)

    def new_zeros(self, *size, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        """A TensorDict of batch size ``size`` with zero leaves of the same dtypes and feature shapes."""
        return self._new_filled(lambda shape, t: t.new_zeros(shape, requires_grad=requires_grad), size, dtype,
                                device)

    def new_ones(self, *size, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        return self._new_filled(lambda shape, t: t.new_ones(shape, requires_grad=requires_grad), size, dtype,
                                device)

    def new_empty(self, *size, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        return self._new_filled(lambda shape, t: t.new_empty(shape, requires_grad=requires_grad), size, dtype,
                                device)

    def new_full(self, size, fill_value, *, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        return self._new_filled(lambda shape, t: t.new_full(shape, fill_value, requires_grad=requires_grad),
                                (size,), dtype, device)

    def new_tensor(self, data, *, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        """A TensorDict with this one's keys: ``data`` (a tensor) copied into every leaf with the
        leaf's dtype, or, for a TensorDict ``data``, its leaves copied with self's leaves' dtypes."""
        if isinstance(data, (Tensor, TensorDict)):
            warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.clone().detach() "
                          "or sourceTensor.clone().detach().requires_grad_(True), rather than "
                          "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
        if isinstance(data, TensorDict):
            return self.apply(lambda t, other: t.new_tensor(other, dtype=dtype, requires_grad=requires_grad),
                              data, batch_size=data.batch_size,
                              device=data.device if device is _NO_DEFAULT else device)
        data = data if isinstance(data, Tensor) else as_tensor(data)
        batch = Size(data.shape)
        target = (self._device if self._device is not None else data.device) if device is _NO_DEFAULT else device

        def one(t):
            return t.new_tensor(data, dtype=dtype, requires_grad=requires_grad, device=target)
        return self._map(one, batch, None if target is None else resolve(target))

    # ---- tensordict's wider API: dtype casts --------------------------------------------------------
    def type(self, dst_type):
        """Every leaf cast with ``Tensor.type`` (a dtype or a name such as ``"torch.FloatTensor"``)."""
        return self._map(lambda t: t.type(dst_type))

    def _cast(self, name):
        return self.type(getattr(_dtypes, name))

    def float(self):
        return self._cast("float32")

    def double(self):
        return self._cast("float64")

    def half(self):
        return self._cast("float16")

    def bfloat16(self):
        return self._cast("bfloat16")

    def int(self):
        return self._cast("int32")

    def long(self):
        return self._cast("int64")

    def bool(self):
        return self._cast("bool")

    # ---- tensordict's wider API: gradients, introspection, small helpers -----------------------------
    @property
    def names(self):
        """The batch dims' names (None for an unnamed dim), as a new list."""
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        return list(names) if names is not None else [None] * len(self._batch_size)

    @names.setter
    def names(self, value):
        """Names the batch dims (nested TensorDicts' leading dims too); None erases every name."""
        if value is None:
            self._set_names(None)
            return
        value = list(value)
        if len(value) != len(self._batch_size):
            raise ValueError(f"the length of the dimension names must equate the tensordict batch_dims attribute. "
                             f"Got {value} for batch_dims {len(self._batch_size)}.")
        named = [n for n in value if n is not None]
        if len(set(named)) != len(named):
            raise ValueError(f"Some dimension names are non-unique: {value}.")
        self._set_names(value)

    def _set_names(self, names):
        """Stores ``names`` (already checked; None erases) here and on every nested TensorDict, whose
        dims past ours lose their names (as in tensordict)."""
        if names is None:
            if (getattr(self, "_names", None) if _NAMES_USED[0] else None) is not None:
                self._names = None
            for value in self._tensordict.values():
                if isinstance(value, TensorDict):
                    value._set_names(None)
            return
        _NAMES_USED[0] = True
        self._names = list(names)
        for value in self._tensordict.values():
            if isinstance(value, TensorDict):
                value._set_names(list(names) + [None] * (len(value._batch_size) - len(names)))

    def _has_names(self):
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        return names is not None and any(n is not None for n in names)

    def refine_names(self, *names):
        """Names the unnamed batch dims (``...`` stands for the dims left); a dim that has a name
        must be given that same name (RuntimeError otherwise). Returns self."""
        if any(n is Ellipsis for n in names):
            at = names.index(Ellipsis)
            names = names[:at] + (None,) * (len(self._batch_size) - len(names) + 1) + names[at + 1:]
        current = self.names
        if len(names) != len(current):
            raise ValueError(f"the length of the dimension names must equate the tensordict batch_dims attribute. "
                             f"Got {list(names)} for batch_dims {len(current)}.")
        if any(old is not None and new != old for old, new in zip(current, names)):
            raise RuntimeError(f"refine_names: cannot coerce TensorDict names {current} with {list(names)}.")
        self.names = [old if old is not None else new for old, new in zip(current, names)]
        return self

    def rename(self, *names, **rename_map):
        """rename_ on a shallow copy (new TensorDicts, the same tensors)."""
        return self.copy().rename_(*names, **rename_map)

    def rename_(self, *names, **rename_map):
        """Names the batch dims: ``rename_("time", None)`` gives every dim a name (None erases one),
        ``rename_(time="t")`` renames the named ones. Returns self."""
        if names and rename_map:
            raise ValueError("Passed both a name map and a name list. Only one is accepted.")
        if not names and not rename_map:
            raise ValueError("Neither a name map nor a name list was passed. Only one is accepted.")
        if names:
            self.names = names
            return self
        current = self.names
        missing = [k for k in rename_map if k not in current]
        if missing:
            raise ValueError(f"Some names to be renamed were not part of the tensordict names: {rename_map.keys()} "
                             f"vs {current}.")
        self.names = [rename_map.get(n, n) if n is not None else None for n in current]
        return self

    @property
    def _has_non_tensor(self):
        """False: rlpipe has no non-tensor leaves (a property, as in tensordict)."""
        return False

    def _check_batch_size(self):
        """RuntimeError when a leaf or nested TensorDict does not start with the batch size."""
        n = len(self._batch_size)
        for key, value in self._tensordict.items():
            shape = value.batch_size if isinstance(value, TensorDict) else value.shape
            if tuple(shape[:n]) != tuple(self._batch_size):
                raise _batch_mismatch(key, self._batch_size, shape, value)
            if isinstance(value, TensorDict):
                value._check_batch_size()

    def _check_device(self):
        """RuntimeError when a leaf is not on the TensorDict's device (when it has one)."""
        if self._device is None:
            return
        for key, value in self.items(True, True):
            if value.device != self._device:
                raise RuntimeError(f"the entry {key!r} is on {value.device}, the TensorDict on {self._device}")

    @property
    def data(self):
        """The leaves without their autograd history (``t.data`` of each), sharing memory; locked
        when self is."""
        return self._locked_if_self(self._map(lambda t: t.data))

    def _locked_if_self(self, out):
        if self._locked and out is not None and not out._locked:
            out.lock_()
            out._last_op = None
        return out

    @property
    def requires_grad(self):
        return any(t.requires_grad for t in self.values(True, True))

    def requires_grad_(self, requires_grad=True):
        for t in self.values(True, True):
            t.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        """A TensorDict of the leaves' gradients (a leaf without one is left out; None when no leaf
        has one); locked when self is."""
        return self._locked_if_self(self.apply(lambda t: t.grad))

    def zero_grad(self, set_to_none=True):
        for t in self.values(True, True):
            if set_to_none:
                t.grad = None
            elif t.grad is not None:
                t.grad.zero_()
        return self

    def detach_(self):
        for t in self.values(True, True):
            t.detach_()
        return self

    @property
    def dtype(self):
        """The dtype every leaf shares, or None when they differ (or there is no leaf)."""
        dtypes = {t.dtype for t in self.values(True, True)}
        return dtypes.pop() if len(dtypes) == 1 else None

    @property
    def is_cuda(self):
        return self._device is not None and self._device.type == "cuda"

    @property
    def is_cpu(self):
        return self._device is not None and self._device.type == "cpu"

    @property
    def is_meta(self):
        return False

    def data_ptr(self, *, storage=False):
        """A TensorDict (batch size []) of every leaf's data pointer, as int64 tensors."""
        return TensorDict({key: t.data_ptr() for key, t in self.items(True, True)}, batch_size=[])

    def get_item_shape(self, key):
        """The shape of the entry ``key`` (a nested TensorDict's batch size)."""
        value = self.get(key, _RAISE)
        return value.batch_size if isinstance(value, TensorDict) else value.shape

    def replace(self, *args, **kwargs):
        """A shallow copy with the entries of the dict/TensorDict argument and of ``kwargs`` set
        (self is left unchanged)."""
        if len(args) > 1:
            raise RuntimeError(f"Only a single argument containing a dictionary-like structure of entries to "
                               f"replace can be passed to replace. Received {len(args)} arguments instead.")
        entries = dict(args[0].items()) if args else {}
        if args and not isinstance(args[0], (dict, TensorDict)):
            raise RuntimeError(f"Cannot use object type {type(args[0])} to update values in tensordict.")
        entries.update(kwargs)
        if not entries:
            return self
        return self.copy().update(entries)

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

    def _join_entries(self, keys, out_key, dim, keep_entries, how):
        entries = [self.get(key, _RAISE) for key in keys]
        if not keep_entries:
            for key in keys:
                self.pop(key)
        return self.set(out_key, how(entries, dim))

    def cat_tensors(self, *keys, out_key, dim=0, keep_entries=False):
        """Stores ``rlpipe.cat`` of the entries ``keys`` under ``out_key`` (removing them unless
        ``keep_entries``); returns self."""
        return self._join_entries(keys, out_key, dim, keep_entries, _ops.cat)

    def stack_tensors(self, *keys, out_key, dim=0, keep_entries=False):
        """Like cat_tensors, with ``rlpipe.stack``."""
        return self._join_entries(keys, out_key, dim, keep_entries, _ops.stack)

    def cat_from_tensordict(self, dim=0, *, sorted=None, out=None):
        """``rlpipe.cat`` of every leaf along ``dim`` (alphabetical order with ``sorted=True``, or the
        order of a list of keys)."""
        return _ops.cat(self._ordered_leaves(sorted), dim)

    def stack_from_tensordict(self, dim=0, *, sorted=None, out=None):
        return _ops.stack(self._ordered_leaves(sorted), dim)

    def _ordered_leaves(self, order):
        keys = list(self.keys(True, True))
        if order is True:
            keys.sort(key=lambda k: (k,) if isinstance(k, str) else k)
        elif order not in (None, False):
            wanted = [unravel_key_to_tuple(k) for k in order]
            if sorted(wanted) != sorted(unravel_key_to_tuple(k) for k in keys):
                raise RuntimeError("The provided set of keys differs from the tensordict list of keys.")
            keys = order
        return [self.get(k) for k in keys]

    def filter_non_tensor_data(self):
        """rlpipe TensorDicts hold tensors only: a shallow copy."""
        return self.copy()

    def non_tensor_items(self, include_nested=False):
        """rlpipe TensorDicts hold tensors only: always empty."""
        return []

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
            if isinstance(value, TensorDict):
                yield from value._all_tensordicts()

    def pad(self, pad_size, value=0.0, inplace=False, safe=True):
        """tensordict.functional.pad as a method (``inplace=True`` keeps this TensorDict)."""
        # absolute: a relative import in a function warns once an import alias (torch -> rlpipe)
        # has replaced this module's __spec__
        from rlpipe.tensordict.functional import pad
        return pad(self, pad_size, value, inplace=inplace, safe=safe)

    def _values_list(self, include_nested=False, leaves_only=False, **kwargs):
        return self.values(include_nested, leaves_only)

    def _become(self, result):
        """Takes ``result``'s leaves and batch size, keeping this TensorDict and its nested ones (what
        ``inplace=True`` of the shape ops does); returns self. A locked TensorDict refuses."""
        self._check_unlocked()
        for key, value in result._tensordict.items():
            mine = self._tensordict.get(key)
            if isinstance(value, TensorDict) and isinstance(mine, TensorDict):
                mine._become(value)
            else:
                self._tensordict[key] = value
        self._batch_size = result._batch_size
        names = (getattr(result, "_names", None) if _NAMES_USED[0] else None)
        if names is not None or (getattr(self, "_names", None) if _NAMES_USED[0] else None) is not None:
            self._names = names
        return self

    def atleast_2d(self):
        td = self
        while len(td._batch_size) < 2:
            td = td.unsqueeze(0)
        return td

    def atleast_3d(self):
        td = self
        while len(td._batch_size) < 3:
            td = td.unsqueeze(0)
        return td

    def rot90(self, k=1, dims=(0, 1)):
        """Rotates the batch dims ``dims`` by 90 degrees ``k`` times (torch.rot90 over the batch)."""
        if len(self._batch_size) < 2:
            raise RuntimeError("rot90 requires at least 2 batch dimensions")
        if len(dims) != 2:
            raise RuntimeError("rot90 requires exactly 2 dims")
        a, b = self._dims_tuple(dims)
        if a == b:
            raise RuntimeError(f"rot90: the dims must differ, got {tuple(dims)}")
        k %= 4
        if k == 0:
            return self.clone()
        if k == 2:
            return self.flip((a, b))
        return self.flip(b).transpose(a, b) if k == 1 else self.transpose(a, b).flip(b)

    def save(self, prefix=None, copy_existing=False, num_threads=0):
        """tensordict's save: memmap's files under ``prefix``; returns the memory-mapped copy (this
        TensorDict is left as it is)."""
        return self.memmap(prefix)

    dumps = save

    @classmethod
    def load(cls, prefix, *args, **kwargs):
        return cls.load_memmap(prefix)

    def load_(self, prefix, *args, **kwargs):
        """Copies what ``save(prefix)`` stored into the existing leaves; returns self."""
        return self.update_(type(self).load_memmap(prefix))

    def share_memory_(self):
        """Moves every leaf into shared memory (``Tensor.share_memory_``: memory that worker processes
        forked afterwards share) and locks the TensorDict; is_shared() is then True for it and its
        nested TensorDicts, as in tensordict. RuntimeError on a memory-mapped TensorDict."""
        if self.is_memmap():
            raise RuntimeError("memmap and shared memory are mutually exclusive features.")
        for td in self._all_tensordicts():
            for value in td._tensordict.values():
                if not isinstance(value, TensorDict):
                    value.share_memory_()
            td._shared_state = True
        return self.lock_()

    def pin_memory(self, num_threads=None, inplace=False):
        """No pinned memory in rlpipe: returns self."""
        return self

    def __copy__(self):
        return self.copy()

    # what `with` blocks, lock graphs and locked caches keep is tied to this process's objects (weak
    # references): pickling leaves it out and unpickling locks again
    _TRANSIENT = frozenset(("__weakref__", "_last_op", "_last_op_queue", "_lock_parents", "_cache_store", "_locked",
                            "_shared_state"))

    def __getstate__(self):
        state = dict(getattr(self, "__dict__", {}))
        for klass in type(self).__mro__:
            for name in getattr(klass, "__slots__", ()):
                if name not in self._TRANSIENT and not isinstance(getattr(type(self), name, None), property) \
                        and hasattr(self, name):
                    state[name] = getattr(self, name)
        state["_locked"] = self._locked
        return state

    def __setstate__(self, state):
        state = dict(state)
        locked = state.pop("_locked", False)
        if state.get("_names") is not None:
            _NAMES_USED[0] = True
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self._locked = False
        if locked:
            self.lock_()
            self._last_op = None

    def __deepcopy__(self, memo=None):
        return self.clone()

    # dtype casts under torch's dtype names (td.float32() is td.float())
    def float32(self):
        return self._cast("float32")

    def float64(self):
        return self._cast("float64")

    def float16(self):
        return self._cast("float16")

    def int8(self):
        return self._cast("int8")

    def int16(self):
        return self._cast("int16")

    def int32(self):
        return self._cast("int32")

    def int64(self):
        return self._cast("int64")

    def uint8(self):
        return self._cast("uint8")

    # ---- printing --------------------------------------------------------------------------------------
    def __repr__(self):
        """tensordict's layout: the fields (sorted by key, see set_printoptions), then batch size,
        device and is_shared, each part shown or not as the print options say."""
        opts = _REPR_OPTIONS
        fields = [f"{key}: {repr(value) if isinstance(value, TensorDict) else _leaf_repr(value, opts)}"
                  for key, value in self._tensordict.items()]
        if opts["sort_keys"] == "alphabetical":
            fields.sort()
        elif callable(opts["sort_keys"]):
            fields.sort(key=opts["sort_keys"])
        parts = [textwrap.indent("fields={" + textwrap.indent("\n" + ",\n".join(fields), "    ") + "}", "    ")]
        if opts["show_batch_size"]:
            parts.append(f"    batch_size={_shape_str(self._batch_size)}")
        if opts["show_device"]:
            parts.append(f"    device={self._device}")
        if opts["show_is_shared"]:
            parts.append(f"    is_shared={self.is_shared()}")
        return f"{type(self).__name__}(\n" + ",\n".join(parts) + ")"


def _leaf_repr(t, opts):
    """One leaf as tensordict prints it: ``Tensor(shape=..., device=..., dtype=..., is_shared=...)``."""
    parts = []
    if opts["show_shape"]:
        parts.append(f"shape={_shape_str(t.shape)}")
    if opts["show_field_device"]:
        parts.append(f"device={t.device}")
    if opts["show_dtype"]:
        parts.append(f"dtype={t.dtype}")
    if opts["show_field_is_shared"]:
        parts.append(f"is_shared={t.is_shared()}")
    if opts["show_grad"]:
        parts.append(f"requires_grad={t.requires_grad}")
    if opts["show_is_contiguous"]:
        parts.append(f"is_contiguous={t.is_contiguous()}")
    if opts["show_is_view"]:
        parts.append(f"is_view={t._data.base is not None}")
    if opts["show_storage_size"]:
        base = t._data if t._data.base is None else t._data.base
        parts.append(f"storage_size={base.nbytes}")
    if opts["plain"]:
        parts.append(_plain_summary(t))
    return f"{type(t).__name__}({', '.join(parts)})"


def _plain_summary(t):
    """The value summary of ``set_printoptions(plain=True)``: ``mean=..., std=...`` (4 significant
    digits, computed in float64) for floating leaves, ``min=..., max=...`` otherwise, ``[]`` if empty."""
    if t.numel() == 0:
        return "[]"
    if t.is_floating_point() or t.is_complex():
        wide = t.double()
        return f"mean={wide.mean().item():.4g}, std={wide.std().item():.4g}"
    return f"min={t.min().item()}, max={t.max().item()}"


# what TensorDict.__repr__ shows (tensordict's print options and defaults)
_REPR_OPTIONS = {"plain": False, "show_batch_size": True, "show_device": True, "show_is_shared": True,
                 "show_shape": True, "show_field_device": True, "show_dtype": True, "show_field_is_shared": True,
                 "show_grad": False,
                 "show_is_contiguous": False, "show_is_view": False, "show_storage_size": False,
                 "sort_keys": "alphabetical"}
_TERSE = {"show_device": False, "show_is_shared": False, "show_field_device": False, "show_dtype": False,
          "show_field_is_shared": False}


class set_printoptions:
    """Chooses what ``repr(td)`` shows: ``with set_printoptions(show_dtype=False): ...``, as a
    decorator, or for good with ``set_printoptions(...).set()``. ``verbose=False`` hides devices,
    dtypes and is_shared. TypeError for an option tensordict does not have."""

    def __init__(self, *, verbose=True, **options):
        unknown = set(options) - set(_REPR_OPTIONS)
        if unknown:
            raise TypeError(f"Unknown printoptions: {unknown}. Valid options: {sorted(_REPR_OPTIONS)}")
        self._options = {**({} if verbose else _TERSE), **options}
        self._saved = []

    def set(self):
        self._saved.append(dict(_REPR_OPTIONS))
        _REPR_OPTIONS.update(self._options)

    def __enter__(self):
        self.set()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        _REPR_OPTIONS.update(self._saved.pop())
        return False

    def __call__(self, fn):
        @wraps(fn)
        def with_options(*args, **kwargs):
            with set_printoptions(**self._options):
                return fn(*args, **kwargs)
        return with_options


def get_printoptions():
    """The current print options, as a dict (a copy)."""
    return dict(_REPR_OPTIONS)


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
        return {key: value._get_sub_tensordict(self._idx) if isinstance(value, TensorDict) else value[self._idx]
                for key, value in self._source._tensordict.items()}

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

_COMPARABLE = (TensorDict, dict, Tensor, numbers.Number, np.ndarray)


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


def _maps_file(tensor, path):
    """Whether ``tensor`` maps (a part of) the file ``path``."""
    name = getattr(tensor._data, "filename", None)
    return name is not None and os.path.exists(path) and os.path.samefile(name, path)


def _load_leaf(path, key, leaf):
    """The array memmap_ stored for ``key`` at ``path`` (+ ``.memmap``), mapped copy-on-write and
    checked against the shape and dtype ``leaf`` records; an empty one is rebuilt from them; None
    when the file is gone."""
    shape = _stored_batch_size(leaf["shape"])
    dtype = getattr(_dtypes, leaf["dtype"])
    if not isinstance(dtype, _dtypes.dtype):
        raise ValueError(f"leaf {key!r}: unknown dtype {leaf['dtype']!r}")
    if math.prod(shape) == 0:
        return np.empty(shape, dtype=dtype.np)
    try:
        array = _serialization.open_npy(path + ".memmap", mmap_mode="c")
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ValueError(f"leaf {key!r}: {e}") from None
    if list(array.shape) != shape or array.dtype != dtype.np:
        raise ValueError(f"{key} does not match its recorded shape or dtype")
    return array


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


def _holds_leaves(item):
    """Whether a state-dict entry holds a tensor (a nested dict counts only if one of its entries does)."""
    return not isinstance(item, dict) or any(_holds_leaves(v) for v in item.values())


def _unflatten_state_dict(flat):
    """A flat state dict (``"a.b"`` keys and ``_metadata``) as nested OrderedDicts, each with its
    level's ``_metadata``."""
    def level(parent, part):
        if part not in parent:
            parent[part] = OrderedDict()
            parent[part]._metadata = OrderedDict()
        return parent[part]
    root = OrderedDict()
    root._metadata = OrderedDict()
    for key, value in flat.items():
        parts = key.split(".")
        node = root
        for part in parts[:-1]:
            node = level(node, part)
        node[parts[-1]] = value
    for key, meta in (getattr(flat, "_metadata", None) or {}).items():
        node = root
        for part in key.split(".") if key else ():
            node = level(node, part)
        node._metadata[""] = meta
    return root


# ---- `with` blocks: `with td.lock_():` and `with td.permute(...) as view:` -----------------------------
def _update_source(source, result):
    """Writes ``result`` back into ``source`` when a `with` block over a reshaped view ends."""
    return source.update_(result) if source.is_locked else source.update(result)


def _unsqueeze_inverse(out, source, args, kwargs):
    dim = args[0] if args else kwargs.get("dim")
    if dim is None:
        raise RuntimeError("Cannot use td.unsqueeze() as a decorator if the dimension is implicit.")
    return _update_source(source, out.squeeze(dim))


def _squeeze_inverse(out, source, args, kwargs):
    dim = args[0] if args else kwargs.get("dim")
    if dim is None:
        raise RuntimeError("Cannot use td.squeeze() as a decorator if the dimension is implicit.")
    return _update_source(source, out.unsqueeze(dim))


def _permute_inverse(out, source, args, kwargs):
    dims = [d % len(out.batch_size) for d in _ops._shape_arg(args or (kwargs.get("dims"),))]
    return _update_source(source, out.permute([dims.index(i) for i in range(len(dims))]))


def _flatten_inverse(out, source, args, kwargs):
    start = args[0] if args else kwargs.get("start_dim", 0)
    end = args[1] if len(args) > 1 else kwargs.get("end_dim", -1)
    start, end = start % source.batch_dims, end % source.batch_dims
    return _update_source(source, out.unflatten(start, source.batch_size[start:end + 1]))


def _unflatten_inverse(out, source, args, kwargs):
    dim = args[0] if args else kwargs["dim"]
    sizes = args[1] if len(args) > 1 else kwargs["unflattened_size"]
    dim = dim % source.batch_dims
    return _update_source(source, out.flatten(dim, dim + len(sizes) - 1))


def _roll_inverse(out, source, args, kwargs):
    shifts = args[0] if args else kwargs["shifts"]
    dims = args[1] if len(args) > 1 else kwargs.get("dims")
    back = -shifts if isinstance(shifts, int) else tuple(-s for s in shifts)
    return _update_source(source, out.roll(back, dims))


def _movedim_inverse(out, source, args, kwargs):
    src = args[0] if args else kwargs["source"]
    dst = args[1] if len(args) > 1 else kwargs["destination"]
    return _update_source(source, out.movedim(dst, src))


def _separator(args, kwargs):
    return args[0] if args else kwargs.get("separator", ".")


# name of the method -> how the end of its `with` block undoes it (``out`` is what the method
# returned, ``source`` the TensorDict it was called on), as tensordict's context managers do
_WITH_INVERSES = {
    "lock_": lambda out, source, args, kwargs: out.unlock_(),
    "unlock_": lambda out, source, args, kwargs: out.lock_(),
    "transpose": lambda out, source, args, kwargs: _update_source(source, out.transpose(*args, **kwargs)),
    "permute": _permute_inverse,
    "unsqueeze": _unsqueeze_inverse,
    "squeeze": _squeeze_inverse,
    "view": lambda out, source, args, kwargs: _update_source(source, out.view(source.batch_size)),
    "flatten": _flatten_inverse,
    "unflatten": _unflatten_inverse,
    "flatten_keys": lambda out, source, args, kwargs: _update_source(
        source, out.unflatten_keys(_separator(args, kwargs))),
    "unflatten_keys": lambda out, source, args, kwargs: _update_source(
        source, out.flatten_keys(_separator(args, kwargs))),
    "flip": lambda out, source, args, kwargs: _update_source(source, out.flip(*args, **kwargs)),
    "roll": _roll_inverse,
    "movedim": _movedim_inverse,
}


def _with_block(name, method, lock_toggle):
    """``method`` that also records on its result how a `with` block around it is undone.
    ``lock_toggle``: lock_/unlock_ record nothing when the lock state did not change."""
    @wraps(method)
    def recorded(self, *args, **kwargs):
        before = self._locked
        out = method(self, *args, **kwargs)
        if isinstance(out, TensorDict):
            if lock_toggle and self._locked is before:
                out._last_op = None
            else:
                out._last_op = (name, args, kwargs, weakref.ref(self))
        return out
    return recorded


def _enter(self):
    queue = getattr(self, "_last_op_queue", None)
    if queue is None:
        queue = self._last_op_queue = []
    queue.append(getattr(self, "_last_op", None))
    self._last_op = None
    return self


def _exit(self, exc_type, exc_value, traceback):
    """Undoes the op that made this `with` block. A lock change is undone even when the block
    raised; a reshaped view is written back only when the block ended normally (tensordict skips
    both on an error, which leaves a TensorDict unlocked after a failed `with td.unlock_():`)."""
    last = self._last_op_queue.pop()
    if last is None:
        return False
    name, args, kwargs, ref = last
    if exc_type is not None and name not in ("lock_", "unlock_"):
        return False
    source = ref()
    if source is not None or name in ("lock_", "unlock_"):
        _WITH_INVERSES[name](self, source, args, kwargs)
        self._last_op = None  # the inverse recorded itself (lock_/unlock_): nothing left to undo
    return False


def _lock_like_source(method):
    """``method`` whose result is locked when self is, as tensordict's shape ops and casts do."""
    @wraps(method)
    def keeps_lock(self, *args, **kwargs):
        out = method(self, *args, **kwargs)
        if self._locked and isinstance(out, TensorDict) and out is not self and not out._locked:
            out.lock_()
            out._last_op = None  # locking the result is not something a `with` block should undo
            if self.is_memmap():
                out._mark_memmap()
        return out
    return keeps_lock


def _names_like_source(rule):
    """A method wrapper: the TensorDict result (or each one of a tuple of results) of a named
    TensorDict gets the names ``rule(self, names, args, kwargs)`` gives (None: left unnamed)."""
    def wrap_method(method):
        @wraps(method)
        def named(self, *args, **kwargs):
            out = method(self, *args, **kwargs)
            names = getattr(self, "_names", None) if _NAMES_USED[0] else None
            if names is None or out is self:
                return out
            new = rule(self, names, args, kwargs)
            for one in (out if isinstance(out, tuple) else (out,)):
                if isinstance(one, TensorDict) and new is not None and len(new) == len(one._batch_size) \
                        and getattr(one, "_names", None) != new:  # equal: set level by level already
                    one._set_names(new)
            return out
        return named
    return wrap_method


def _squeezed_names(self, names, args, kwargs):
    dim = args[0] if args else kwargs.get("dim")
    sizes = self._batch_size
    if dim is None:
        return [n for n, size in zip(names, sizes) if size != 1]
    d = dim % len(sizes)
    return names[:d] + names[d + 1:] if sizes[d] == 1 else names


def _unsqueezed_names(self, names, args, kwargs):
    dim = args[0] if args else kwargs["dim"]
    d = dim if dim >= 0 else dim + len(names) + 1
    return names[:d] + [None] + names[d:]


def _permuted_names(self, names, args, kwargs):
    dims = tuple(_ops._shape_arg(args if args else (kwargs["dims"],)))
    return [names[d % len(names)] for d in dims]


def _expanded_names(self, names, args, kwargs):
    shape = _ops._shape_arg(args if args else (kwargs.get("shape", ()),))
    return [None] * (len(shape) - len(names)) + names


def _indexed_names(names, index):
    """The names left by indexing the batch dims with ``index`` (its '...' expanded), as tensordict
    0.14.3 names them: an int drops its dim; a slice or a 1-D boolean mask keeps it, an N-D index
    tensor repeats it N times (later index tensors, broadcast into the first one's dims, drop
    theirs); None or True adds an unnamed dim; an N-D mask merges the dims it covers into an
    unnamed one. None (an unnamed result) for anything else."""
    out, pos, gathered = [], 0, False
    for i in (index if isinstance(index, tuple) else (index,)):
        ndim = getattr(i, "ndim", None)
        if i is None or i is True or i is False:
            out.append(None)
        elif isinstance(i, slice):
            out.append(names[pos])
            pos += 1
        elif isinstance(i, numbers.Integral) or ndim == 0:
            pos += 1
        elif ndim is not None and getattr(i, "dtype", None) is not None and i.dtype.name == "bool":
            out.append(names[pos] if ndim == 1 else None)
            pos += ndim
        elif ndim or isinstance(i, list):  # index tensors broadcast into the first one's dims,
            if not gathered:  # which all take the indexed dim's name
                out += [names[pos]] * (ndim or np.ndim(i))
            pos += 1
            gathered = True
        else:
            return None
    return out + names[pos:]


def _same_names(self, names, args, kwargs):
    return names


def _reduced_names(self, names, args, kwargs):
    """The names a reduction (``_reduce(name, dim, keepdim, ...)``) leaves: the dims it removes go."""
    dim = args[1] if len(args) > 1 else kwargs.get("dim", _NO_DIM)
    keepdim = (args[2] if len(args) > 2 else kwargs.get("keepdim", False)) is True
    if isinstance(dim, str) or keepdim:
        return names
    if dim is None or dim is _NO_DIM:
        return []
    dims = self._reduction_dims(dim)
    return [n for i, n in enumerate(names) if i not in dims]


def _bool_reduced_names(self, names, args, kwargs):
    """The names all(dim)/any(dim) (``_reduce_bool(how, dim)``) leave."""
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    return None if dim is None else names[:dim % len(names)] + names[dim % len(names) + 1:]


def _flattened_names(self, names, args, kwargs):
    start = args[0] if args else kwargs.get("start_dim", 0)
    end = args[1] if len(args) > 1 else kwargs.get("end_dim", -1)
    if not names:
        return None
    start, end = (0 if start is None else start) % len(names), (-1 if end is None else end) % len(names)
    return names[:start] + [None] + names[end + 1:]


def _unflattened_names(self, names, args, kwargs):
    dim = (args[0] if args else kwargs["dim"]) % len(names)
    sizes = args[1] if len(args) > 1 else kwargs["unflattened_size"]
    return names[:dim] + [None] * (len(sizes) - 1) + names[dim:]  # the last new dim keeps the name (tensordict)


def _no_names(self, names, args, kwargs):
    return [None] * len(names)


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


def _names_if_same_batch(method):
    """``method`` (apply, view, reshape) whose result keeps self's names when its batch size is self's."""
    @wraps(method)
    def named(self, *args, **kwargs):
        out = method(self, *args, **kwargs)
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        if names is not None and isinstance(out, TensorDict) and out is not self \
                and out._batch_size == self._batch_size and getattr(out, "_names", None) != names:
            out._set_names(names)
        return out
    return named


for _name in ("apply", "named_apply", "view", "reshape"):
    setattr(TensorDict, _name, _names_if_same_batch(getattr(TensorDict, _name)))

for _name in ("reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "expand",
              "flip", "roll", "narrow", "repeat_interleave", "tile", "detach", "to", "masked_fill", "type"):
    setattr(TensorDict, _name, _lock_like_source(getattr(TensorDict, _name)))

def _with_inplace(method):
    """``method`` with tensordict's ``inplace=True``: the result's leaves replace self's, and self
    (with its nested TensorDicts) is returned."""
    @wraps(method)
    def maybe_inplace(self, *args, inplace=False, **kwargs):
        out = method(self, *args, **kwargs)
        return self._become(out) if inplace and out is not self else out
    return maybe_inplace


for _name in ("repeat", "repeat_interleave", "roll", "reshape", "flatten", "unflatten", "tile",
              "flip", "narrow", "expand", "squeeze", "unsqueeze", "permute", "transpose"):
    setattr(TensorDict, _name, _with_inplace(getattr(TensorDict, _name)))

TensorDict.__enter__ = _enter
TensorDict.__exit__ = _exit
for _name in _WITH_INVERSES:
    setattr(TensorDict, _name, _with_block(_name, getattr(TensorDict, _name), _name in ("lock_", "unlock_")))
TensorDict.moveaxis = TensorDict.movedim
TensorDict.swapaxes = TensorDict.swapdims = TensorDict.transpose
