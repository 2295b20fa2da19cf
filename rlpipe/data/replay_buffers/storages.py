"""Storages: where a replay buffer keeps its items, written round-robin.

- ``ListStorage(max_size=None)``: a Python list of arbitrary objects.
- ``LazyTensorStorage(max_size, device=None)``: one preallocated array per TensorDict leaf (or a
  single tensor), shaped ``[max_size, *item_shape]``, allocated on the first write from that
  batch's structure.
- ``LazyMemmapStorage(max_size, scratch_dir=None)``: the same arrays as NumPy memory-mapped
  ``.npy`` files in ``scratch_dir``. A new storage given a ``scratch_dir`` that already holds
  one reopens it, contents, length and write cursor included (see its docstring).

``ndim`` (tensor storages), as torchrl's: a storage of shape ``[3, 4]`` holds 3 items with
``ndim=1`` and 12 with ``ndim=2``. With ``ndim=2`` a write of ``[n, B, ...]`` is ``n`` rows of
``B`` items each; the first write fixes ``B`` and rounds ``max_size`` up to a multiple of it
(``LazyTensorStorage(10, ndim=2)`` written ``[T, 4]`` batches holds 3 rows, 12 items).
``len()`` counts items, ``shape`` is ``[rows written, B]``, ``storage[i]`` reads row ``i``,
``storage[rows, cols]`` any NumPy-style index of that shape, and a sampler's flat positions
are items in row-major order. Inside, the arrays are flat (``[max_size, ...]``), rows of ``B``
consecutive items; ``_storage`` shows them as ``[rows, B, ...]``.

Every write is checked completely before anything is stored, so a rejected batch leaves the
storage as it was. ``extend`` on a tensor storage also takes a list of TensorDicts or of Tensors
(one item per element, stacked), as torchrl's does.

Differences from torchrl 0.14:

- there is no separate ``Writer``: a storage keeps its own write cursor;
- a batch whose keys differ from the storage's raises ``KeyError`` (torchrl keeps the old values
  of a missing entry and adds an extra entry as a new one); only an in-place write (``set``,
  ``rb[index] = data``, ``write_all``) with every stored entry may bring new ones, which are added
  zero-filled for the other items, as torchrl does (not on a ``LazyMemmapStorage``, whose file
  layout is fixed); a per-item shape that differs raises
  ``ValueError`` and a dtype of another kind ``TypeError`` (torchrl: ``RuntimeError``); dtypes
  of the same kind are cast (int32 into int64, float64 into float32), where torchrl needs the
  exact dtype;
- a write of more items than ``max_size`` warns (``UserWarning``, torchrl's text: "A cursor of
  length superior to the storage capacity was provided") and keeps the last ``max_size``; torchrl
  0.14 warns only when ``storage.set`` is given such a cursor, its writers truncate silently;
- ``storage.set(positions, data)`` grows the length to cover the positions without moving the write
  cursor, and a later write from the cursor counts only rows written: after ``set(range(3), ...)``
  an ``extend`` of 2 overwrites rows 0-1 and the length stays 3 (torchrl's writer counts 5, two of
  them rows never written);
- an empty batch raises ``RuntimeError`` on every storage (torchrl returns an empty index for a
  TensorDict on a ``ListStorage`` and raises ``IndexError`` on a ``LazyTensorStorage``);
- ``max_size`` must be positive (torchrl accepts 0 and fails on the first write);
- a tensor storage's ``get``/``storage[index]`` returns copies (torchrl returns views for ints
  and slices), and a ``TensorDictReplayBuffer``'s storage holds no ``"index"`` entry (the buffer
  adds it to what ``rb[index]`` returns);
- ``state_dict()`` is rlpipe's own format (``"type"``, ``"max_size"``, ``"len"``, ``"cursor"``
  and the rows), not torchrl's ``"_storage"``/``"initialized"``/``"_len"``.
"""
import collections
import contextlib
import functools
import math
import numbers
import os
import shutil
import sys
import tempfile
import warnings
import weakref

import numpy as np

from ... import _dtypes, backends
from ..._creation import zeros
from ..._device import CPU, resolve

from ...primitives import stack as _stack_tensors
from ..._tensor import Size, Tensor, wrap
from ..._utils import logger, unavailable
from ...tensordict import LazyStackedTensorDict, TensorDict, is_tensorclass
from ._pytree_items import from_tensordict, is_pytree, to_tensordict, tree_map
from ._shared_storage import _Shareable, file_names, mapped_leaves
from ._storage_layout import _Layout, _numpy_index
from .._checkpoint import (array_record, atomic_directory, load_state, open_array, plain_dtype, read_json, save_state,
                          write_json)

__all__ = ["Storage", "ListStorage", "TensorStorage", "LazyTensorStorage", "LazyMemmapStorage", "LazyStackStorage",
           "CompressedListStorage"]

# every LazyMemmapStorage alive (torchrl keeps this registry to clean up scratch files)
_MEMMAP_STORAGE_REGISTRY = weakref.WeakSet()

# a checked write: the rows to store, where they go, and (first write only) the structure
_Write = collections.namedtuple("_Write", "values index first cursor spec device")
# a tensor storage's structure: "tensordict" or "tensor", leaf keys, per-item shapes, dtypes, item batch shape
# ``nested``: (key path, item batch size) of every nested TensorDict, so reads keep their batch sizes
_Spec = collections.namedtuple("_Spec", "kind keys shapes dtypes item_batch nested", defaults=((),))


def _user_stacklevel():
    """The ``warnings.warn`` stacklevel of the first caller outside rlpipe (so a warning names
    the user's line, whichever buffer or storage method it came through)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("rlpipe."):
        frame, level = frame.f_back, level + 1
    return level


def _check_ndim(ndim, cls):
    """torchrl's ``ndim`` argument: how many leading dimensions of the data count as items."""
    if isinstance(ndim, bool) or not isinstance(ndim, numbers.Integral) or ndim < 1:
        raise ValueError(f"{cls}: ndim must be an int >= 1, got ndim={ndim!r}")
    return int(ndim)


def _check_max_size(max_size, cls):
    if isinstance(max_size, bool) or not isinstance(max_size, numbers.Integral) or max_size <= 0:
        raise ValueError(f"{cls}: max_size must be a positive int, got max_size={max_size!r}")
    if max_size > sys.maxsize:
        raise ValueError(f"{cls}: max_size={max_size} is more items than can be indexed (at most {sys.maxsize})")
    return int(max_size)


@functools.lru_cache(maxsize=None)
def physical_memory():
    """(bytes of physical memory, "memory"), or (None, ...) where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "memory"
    except (AttributeError, ValueError, OSError):
        return None, "memory"


def check_room(nbytes, what, room):
    """Refuses (ValueError) to allocate ``nbytes`` where ``room`` = (bytes available, of what) is smaller."""
    available, kind = room
    if available is not None and nbytes > available:
        raise ValueError(f"{what} need {nbytes} bytes, more than the {available} bytes of {kind} on this machine")


def _key_name(path):
    return path[0] if len(path) == 1 else path


def _leaves(td, prefix=()):
    """[(key path, tensor)] of a TensorDict, nested leaves included, in insertion order."""
    out = []
    for key, value in td._tensordict.items():  # the raw dict: this runs on every extend
        if isinstance(value, TensorDict):
            out.extend(_leaves(value, prefix + (key,)))
        else:
            out.append((prefix + (key,), value))
    return out


def _nested_batches(td, prefix=()):
    """((key path, batch_size[1:]), ...) of the TensorDicts nested in ``td``, outermost first."""
    out = []
    for key, value in td._tensordict.items():
        if isinstance(value, TensorDict):
            out.append((prefix + (key,), tuple(value.batch_size)[1:]))
            out.extend(_nested_batches(value, prefix + (key,)))
    return tuple(out)


def _stacked(items, what, cls):
    """A list of items (all TensorDicts or all Tensors) stacked along a new first dimension."""
    if not items:
        raise RuntimeError(f"{what}: expected at least one element, got an empty list")
    if all(isinstance(x, TensorDict) for x in items):
        return TensorDict.stack(items)
    if all(isinstance(x, Tensor) for x in items):
        return _stack_tensors(items)
    found = sorted({type(x).__name__ for x in items})
    raise TypeError(f"{what}: a {cls} stacks a list of TensorDicts or a list of Tensors (one item per element); "
                    f"got a list of {', '.join(found)}")


def _segments(start, count, max_size):
    """(storage slice, row slice) pairs for ``count`` ring positions from ``start``: one or two."""
    head = min(count, max_size - start)
    pairs = [(slice(start, start + head), slice(0, head))]
    if head < count:
        pairs.append((slice(0, count - head), slice(head, count)))
    return pairs


class Storage(_Layout):
    """The interface a replay buffer writes through: ``max_size``, ``len()``, ``get(index)``, and
    the two-step write ``_prepare(data)`` (checks; changes nothing) then ``_commit(write)``."""

    max_size = sys.maxsize

    def __len__(self):
        self._sync()
        return int(self._meta[0])

    def _sync(self):
        """Catches up with writes of other processes (a shared tensor storage)."""

    @property
    def _cursor(self):
        return int(self._meta[1])

    def _positions(self, n, cursor=None, at=None):
        """(every position of n rows, the first row kept, the next cursor). Written from the cursor
        (when n > max_size only the last max_size rows are stored), or at the positions ``at``
        (an int64 array of n; the cursor does not move: the next cursor is None)."""
        if at is not None:
            if len(at) != n:
                raise ValueError(f"set: {len(at)} positions for {n} items; expected one position per item")
            bad = (at < 0) | (at >= self.max_size)
            if bad.any():
                raise IndexError(f"set: position {at[bad][0]} is outside the storage's [0, max_size={self.max_size})")
            return at, 0, None
        cursor = self._cursor if cursor is None else cursor
        index = np.arange(cursor, cursor + n, dtype=np.int64) % self.max_size
        return index, max(n - self.max_size, 0), (cursor + n) % self.max_size

    def _advance(self, write):
        if write.cursor is None:  # written at given positions: the storage grows to cover them
            self._meta[0] = max(len(self), int(write.index.max()) + 1)
            return
        n = len(write.index)
        if n:  # the rows up to the last one written are filled (``set`` may have filled more already)
            end = int(write.index[0]) + n
            self._meta[0] = self.max_size if end >= self.max_size else max(len(self), end)
        self._meta[1] = write.cursor

    def _batch_of_one(self, data):
        """One item as a batch of one row (a list of it, unless it is a TensorDict or a Tensor)."""
        return data.unsqueeze(0) if isinstance(data, (TensorDict, Tensor)) else [data]

    def set(self, cursor, data, *, set_cursor=True):
        """Writes ``data`` at the storage positions ``cursor`` (an int for one item; a slice, a
        sequence, an array or a Tensor of ints for one item per row), checked first, as torchrl's
        ``Storage.set``. The storage's length grows to cover the positions written; the write
        cursor of a buffer's writer does not move. With ndim > 1, ``cursor`` indexes the
        ``[rows, *inner]`` layout (an int or array of ints: whole rows; a tuple: any items), and
        ``data`` is broadcast to what it selects."""
        if self.ndim > 1:
            return self._set_items(cursor, data)
        single = isinstance(cursor, (numbers.Integral, np.integer)) or (
            isinstance(cursor, (Tensor, np.ndarray)) and not cursor.ndim)
        if isinstance(cursor, slice):
            at = np.arange(self.max_size, dtype=np.int64)[cursor]
        else:
            at = np.asarray(cursor.detach().cpu()._data if isinstance(cursor, Tensor) else cursor).reshape(-1)
            if at.dtype.kind not in "iu":
                raise TypeError(f"set: positions must be integers, got dtype {at.dtype}")
            at = at.astype(np.int64)
        if single:
            data = data.unsqueeze(0) if isinstance(data, (TensorDict, Tensor)) else [data]
        self._commit(self._prepare(data, what="set", at=at))

    def __setitem__(self, index, value):
        self.set(index, value, set_cursor=False)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def get(self, index):
        """The items at ``index`` (an int, a slice, or a sequence/array/Tensor of ints or bools)
        among the ``len(self)`` stored (copies, from a tensor storage)."""
        return self._gather(self._locate(index))

    __getitem__ = get

    def _locate(self, index):
        """The storage positions ``index`` selects: an int, or an int64 NumPy array (shaped as the
        selection in the ``[rows, *inner]`` layout when ndim > 1)."""
        n = len(self)
        if self.ndim > 1:
            try:
                positions = self._grid()[_numpy_index(index)]
            except IndexError as e:
                raise IndexError(f"storage index {index!r} does not fit a storage of shape {list(self.shape)} "
                                 f"({e})") from None
            return int(positions) if not np.ndim(positions) else positions
        if isinstance(index, Tensor):
            index = index.detach().cpu()._data
        if isinstance(index, (numbers.Integral, np.integer)) and not isinstance(index, (bool, np.bool_)):
            if not -n <= index < n:
                raise IndexError(f"storage index {index} is out of range for a storage holding {n} items")
            return int(index) % n
        if isinstance(index, np.ndarray) and index.ndim == 0 and index.dtype.kind in "iu":
            return self._locate(int(index))
        try:
            return np.arange(n, dtype=np.int64)[index]
        except IndexError as e:
            raise IndexError(f"storage index {index!r} does not fit a storage holding {n} items ({e})") from None

    def _empty(self):
        self._meta[:] = 0

    def _item_bytes(self):
        """The bytes one gathered item takes (a list slot: a pointer)."""
        return 8

    # checkpoints: state_dict / load_state_dict in memory, dumps / loads to a directory
    def state_dict(self):
        """The stored items, length and cursor, in rlpipe's own format (a copy)."""
        return self._state(copy=True)

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()``, checked before anything changes."""
        self._load_plan(state_dict)()

    def dumps(self, path):
        """Writes the storage to the directory ``path`` (atomically: .json and .npy files)."""
        with atomic_directory(path) as tmp:
            save_state(tmp, self._saved_state(path))

    def loads(self, path):
        """Restores what ``dumps`` wrote to the directory ``path``."""
        self.load_state_dict(self._loaded_state(load_state(path, mmap_mode=None)))

    # save/load hooks (torchrl's): callables ``hook(data, path=...)`` that transform the stored
    # contents on their way to disk (dumps) or back (loads); a save hook with a ``shift`` or an
    # ``is_full`` attribute gets the position after the last item written and whether the storage
    # is full, as torchrl's checkpointers set them
    _DATA_FIELD = "data"

    def register_save_hook(self, hook):
        """Adds a ``hook(data, path=...)`` run on the contents ``dumps`` writes."""
        self._check_hook(hook).__dict__.setdefault("_save_hooks", []).append(hook)

    def register_load_hook(self, hook):
        """Adds a ``hook(data)`` run on the contents ``loads`` reads back."""
        self._check_hook(hook).__dict__.setdefault("_load_hooks", []).append(hook)

    def _check_hook(self, hook):
        if not callable(hook):
            raise TypeError(f"a storage hook must be callable, got {type(hook).__name__}")
        return self

    def _saved_state(self, path):
        """What ``dumps`` writes: the state, its contents passed through the save hooks."""
        state = self._state(copy=False)
        hooks = self.__dict__.get("_save_hooks", ())
        if not hooks:
            return state
        n = len(self)
        shift = (self._cursor - 1) % self.max_size + 1 if n else 0
        for hook in hooks:
            if hasattr(hook, "shift"):
                hook.shift = shift
            if hasattr(hook, "is_full"):
                hook.is_full = n == self.max_size
        data = state[self._DATA_FIELD]
        for hook in hooks:
            data = hook(data, path=path)
        return dict(state, **{self._DATA_FIELD: data})

    def _loaded_state(self, state):
        """A loaded state, its contents passed through the load hooks."""
        hooks = self.__dict__.get("_load_hooks", ())
        if not hooks or not isinstance(state, dict) or self._DATA_FIELD not in state:
            return state
        data = state[self._DATA_FIELD]
        for hook in hooks:
            data = hook(data)
        return dict(state, **{self._DATA_FIELD: data})

    def _check_state(self, state, types):
        """(length, cursor) of a state after checking its fields."""
        if not isinstance(state, dict) or state.get("type") not in types:
            found = state.get("type") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"load_state_dict: the state is a {found}'s; a {type(self).__name__} loads states of "
                             f"{sorted(types)}")
        max_size, length, cursor = state.get("max_size"), state.get("len"), state.get("cursor")
        if max_size != (None if self.max_size == sys.maxsize else self.max_size):
            raise ValueError(f"load_state_dict: the state has max_size={max_size}, this storage has "
                             f"max_size={self.max_size}")
        if not isinstance(length, int) or not isinstance(cursor, int) or not 0 <= length <= self.max_size \
                or not 0 <= cursor < self.max_size:
            raise ValueError(f"load_state_dict: bad length {length!r} or cursor {cursor!r} "
                             f"for max_size={self.max_size}")
        if length < self.max_size and cursor > length:  # writes from the cursor grow the length past it;
            # ``set`` grows it without moving the cursor, so the cursor may trail, never lead
            raise ValueError(f"load_state_dict: cursor {cursor} beyond length {length}: until the storage is full "
                             f"(max_size={self.max_size}) every write ends at or below the length")
        return length, cursor


class ListStorage(Storage):
    """Any Python objects, in a list of at most ``max_size`` (unbounded by default).

    ``extend`` takes a list or tuple (one item per element), a TensorDict or a Tensor (one item
    per row). A sample of TensorDicts or of tensors comes back stacked; of anything else, as a
    list (torchrl would try to stack any pytree). ``dumps`` saves what rlpipe checkpoints can hold
    (tensors, TensorDicts, arrays, numbers, strings, lists, tuples, dicts): no pickle. With a
    ``device``, tensors and TensorDicts written (pytree leaves too) move there; ``compilable`` is
    accepted for torchrl's signature and changes nothing.
    """

    _DATA_FIELD = "items"

    def __init__(self, max_size=None, *, compilable=False, device=None):
        super().__init__()
        self.max_size = sys.maxsize if max_size is None else _check_max_size(max_size, "ListStorage")
        self._compilable = compilable
        self.device = None if device is None else resolve(device)
        self._items = []

    def _on_device(self, item):
        if self.device is None:
            return item
        if isinstance(item, (Tensor, TensorDict)):
            return item.to(self.device)
        return tree_map(lambda leaf: leaf.to(self.device), item) if isinstance(item, (dict, list, tuple)) else item

    def _prepare(self, data, cursor=None, what="extend", at=None):
        if isinstance(data, (list, tuple, range)):
            items = list(data)
        elif isinstance(data, (TensorDict, LazyStackedTensorDict, Tensor)) and data.ndim:
            items = [data[i] for i in range(data.shape[0])]
        else:
            raise TypeError(f"{what}: a ListStorage is extended with a list, a tuple, a range, or a TensorDict/Tensor "
                            f"with a batch dimension; got {type(data).__name__}")
        if not items:
            raise RuntimeError(f"{what}: expected at least one element, got an empty {type(data).__name__}")
        items = [self._on_device(item) for item in items]
        write = _Write(items, *self._positions(len(items), cursor, at), None, None)
        if at is not None and at.size and at.max() > len(self) + len(at) - 1:
            raise RuntimeError(f"{what}: cannot write position {at.max()} of a ListStorage holding {len(self)} items: "
                               "items are appended one after the other")
        return write

    def _commit(self, write):
        top = int(write.index.max()) + 1
        if top > len(self._items):  # a wrapping extend writes its last rows first
            self._items.extend([None] * (top - len(self._items)))
        for position, item in zip(write.index[write.first:], write.values[write.first:]):
            self._items[position] = item
        self._advance(write)
        return write.index

    def _gather(self, index):
        if np.ndim(index) == 0:
            return self._items[index]
        items = [self._items[i] for i in index]
        if items and all(isinstance(x, TensorDict) for x in items):
            return TensorDict.stack(items)
        if items and all(isinstance(x, Tensor) for x in items):
            return _stack_tensors(items)
        return items

    def _empty(self):
        super()._empty()
        self._items = []

    def _state(self, copy):
        return {"type": "ListStorage", "max_size": None if self.max_size == sys.maxsize else self.max_size,
                "len": len(self), "cursor": self._cursor, "items": list(self._items)}

    def _load_plan(self, state):
        length, cursor = self._check_state(state, {"ListStorage"})
        items = state.get("items")
        if not isinstance(items, list) or len(items) != length:
            raise ValueError(f"load_state_dict: expected a list of {length} items, got {type(items).__name__}"
                             f"{'' if not isinstance(items, list) else f' of {len(items)}'}")

        def apply():
            self._items = list(items)
            self._meta[:] = (length, cursor)
        return apply

    def __repr__(self):
        return f"ListStorage(max_size={None if self.max_size == sys.maxsize else self.max_size}, len={len(self)})"


class TensorStorage(_Shareable, Storage):
    """Preallocated arrays of ``max_size`` rows, one per TensorDict leaf (nested keys included)
    or a single tensor. ``TensorStorage(data)`` starts full, holding a copy of ``data``'s rows
    (torchrl's stores ``data`` itself); ``LazyTensorStorage`` allocates them on the first write
    from that batch's structure.

    Every later batch must have the same keys, the same per-item shapes (``shape[1:]``) and
    dtypes that cast safely (same kind: float to float, int to int or float, bool to anything);
    otherwise ``KeyError``, ``ValueError`` or ``TypeError`` name the entry, the expected and the
    actual value. Writes wrap around at ``max_size``. ``device=None`` keeps the first batch's
    device (torchrl's default is "cpu").
    """

    _state_types = frozenset({"TensorStorage", "LazyTensorStorage", "LazyMemmapStorage"})
    _LAYOUT = "layout.json"  # the files of a memory-mapped (or shared) storage
    _FORMAT = "rlpipe-memmap-storage"

    def __init__(self, storage, max_size=None, *, device="cpu", ndim=1, compilable=False):
        ndim = _check_ndim(ndim, "TensorStorage")
        if storage is None:
            raise ValueError("Expected storage to be non-null.")
        storage = self._untyped(storage)
        if not isinstance(storage, (TensorDict, Tensor)) or storage.ndim < ndim:
            raise TypeError(f"TensorStorage: storage must be a TensorDict or a Tensor with at least ndim={ndim} "
                            f"leading dimensions, got {type(storage).__name__}")
        items = math.prod(storage.shape[:ndim])
        if max_size is not None and max_size != items:
            raise ValueError(f"The max-size and the storage shape mismatch: got max_size={max_size} for a storage of "
                             f"shape {storage.shape}.")
        tree, item_class = self.__dict__.get("_item_tree"), self.__dict__.get("_item_class")  # from ``_untyped``
        self._init_empty(items, device, ndim)
        self._item_tree, self._item_class = tree, item_class
        self._commit(self._prepare(storage, what="TensorStorage"))

    def _init_empty(self, max_size, device, ndim=1):
        Storage.__init__(self)
        self.max_size = self._max_size_asked = _check_max_size(max_size, type(self).__name__)
        self.ndim = ndim
        self._inner = () if ndim == 1 else None
        # "auto" (torchrl's): the first batch's device, as None
        self.device = None if device is None or device == "auto" else resolve(device)
        self._spec = None
        self._arrays = None  # one backend array per leaf, [max_size, *item_shape]
        self._data = None  # a TensorDict (or Tensor) over those arrays
        self._item_class = None  # the tensorclass written, if one was: reads give it back
        self._item_tree = None  # the structure of the pytree written, if one was: reads give it back
        self._files = None  # {key: path} of the leaves stored in files (memmap and shared storages)

    @property
    def initialized(self):
        """Whether the arrays exist (after the first write)."""
        return self._spec is not None

    @property
    def _storage(self):
        """The whole preallocated storage, ``max_size`` items (a TensorDict or a Tensor over the
        storage's arrays, written through; ``[rows, *inner]`` when ndim > 1), or None before the
        first write: torchrl's attribute."""
        data = self._data
        if data is not None and self.ndim > 1:
            shape = tuple(data.batch_size if isinstance(data, TensorDict) else data.shape)
            data = data.reshape(self.max_size // self._row_items, *self._inner, *shape[1:])
        if data is not None and self._files:
            data = mapped_leaves(data, self._files)
        return data if data is None else self._typed(data)

    def _typed(self, rows):
        """Stored rows as what was written: a tensorclass, a pytree, or the TensorDict itself."""
        if self._item_class is not None:
            return self._item_class.from_tensordict(rows, safe=False)
        return rows if self._item_tree is None else from_tensordict(rows, self._item_tree)

    def flatten(self):
        """The items as a one-dim ``TensorStorage`` (this storage when ndim == 1), as torchrl's."""
        if self.ndim == 1:
            return self
        if self._spec is None:
            raise RuntimeError("Cannot flatten a non-initialized storage.")
        return TensorStorage(self._data[:len(self)])

    def _init(self, data):
        """Allocates the storage for items shaped like ``data`` (one item), writing nothing, as
        torchrl's ``_init``."""
        data = self._untyped(data)
        if not isinstance(data, (TensorDict, Tensor)):
            raise TypeError(f"_init: {type(self).__name__} stores TensorDicts or Tensors, got {type(data).__name__}")
        if self._spec is not None:
            raise RuntimeError(f"_init: this {type(self).__name__} is already initialized")
        if self.ndim > 1:
            self._fix_inner(tuple(data.batch_size if isinstance(data, TensorDict) else data.shape)[:self.ndim - 1],
                            "_init")
            data = data.reshape(-1, *tuple(data.batch_size if isinstance(data, TensorDict) else data.shape)[
                self.ndim - 1:])[:1]
        else:
            data = data.unsqueeze(0)
        write = self._prepare(data, what="_init", at=np.zeros(1, dtype=np.int64), flat=True)
        self._allocate(write.spec, write.device)

    # ---- writing -----------------------------------------------------------------------------------
    def _batch_of_one(self, data):
        """One item as a batch of one row; a pytree's leaves each get the leading dim."""
        if is_pytree(data):
            return tree_map(lambda leaf: leaf.unsqueeze(0), data)
        return super()._batch_of_one(data)

    def _untyped(self, data):
        """``data`` (or a list of items) with tensorclasses as their TensorDicts; their class is kept,
        so reads give it back, as torchrl's storage (which holds the tensorclass itself) does. A
        lazy stack (a collector's batch) is stored dense."""
        if isinstance(data, LazyStackedTensorDict):
            return data.to_tensordict()
        if is_pytree(data):
            data, self._item_tree = to_tensordict(data, type(self).__name__)
            return data
        first = data[0] if isinstance(data, list) and data else data
        if not is_tensorclass(first):
            return data
        self._item_class = type(first)
        return [item._tensordict for item in data] if isinstance(data, list) else data._tensordict

    def _prepare(self, data, cursor=None, what="extend", at=None, flat=False):
        self._sync()
        data = self._untyped(data)
        if isinstance(data, list):  # one item per element, stacked (as torchrl does)
            data = _stacked(data, what, type(self).__name__)
        if self.ndim > 1 and not flat and isinstance(data, (TensorDict, Tensor)):
            data = self._rows_flattened(data, what)
        if isinstance(data, TensorDict):
            kind, leaves, batch = "tensordict", _leaves(data), tuple(data.batch_size)
        elif isinstance(data, Tensor):
            kind, leaves, batch = "tensor", [((), data)], tuple(data.shape)
        else:
            raise TypeError(f"{what}: {type(self).__name__} stores TensorDicts or Tensors, got {type(data).__name__}")
        if not batch:
            raise ValueError(f"{what}: the data needs a leading batch dimension (one row per item), got "
                             f"{'batch_size' if kind == 'tensordict' else 'shape'} []; use add() for a single item")
        n = batch[0]
        if n == 0:
            raise RuntimeError(f"{what}: expected at least one element, got a batch of 0 items")
        if n > self.max_size:
            warnings.warn(f"A cursor of length superior to the storage capacity was provided: {n} items for a storage "
                          f"of max_size={self.max_size}, so only the last {self.max_size} are kept. Make sure the "
                          "storage capacity is big enough for the batch size.", UserWarning,
                          stacklevel=_user_stacklevel())
        spec, device = self._spec, self._storage_device()
        if spec is None:
            if kind == "tensordict" and not leaves:
                raise ValueError(f"{what}: the TensorDict has no entries; there is nothing to store")
            device = self.device or leaves[0][1].device
            spec = _Spec(kind, [k for k, _ in leaves], [tuple(v.shape[1:]) for _, v in leaves],
                         [v._data.dtype for _, v in leaves], batch[1:] if kind == "tensordict" else (),
                         _nested_batches(data) if kind == "tensordict" else ())
            row = self._item_bytes(spec)
            check_room(self.max_size * row, f"{what}: max_size={self.max_size} rows of {row} bytes", self._room())
            values = [v for _, v in leaves]
        else:
            if at is not None:  # an in-place write (set, rb[index] = ...) may add entries; extend may not
                leaves, spec = self._with_new_keys(spec, kind, leaves, what)
            values = self._matched(spec, kind, leaves, batch, what)
        values = [v._data if v._device is device else v.to(device)._data for v in values]
        return _Write(values, *self._positions(n, cursor, at), spec if spec is not self._spec else None, device)

    def _rows_flattened(self, data, what):
        """Rows ``[n, *inner, ...]`` (ndim > 1) as ``n * prod(inner)`` items; the first write fixes
        ``inner``."""
        shape = tuple(data.batch_size if isinstance(data, TensorDict) else data.shape)
        if len(shape) < self.ndim:
            raise ValueError(f"{what}: a storage with ndim={self.ndim} needs data with at least {self.ndim} batch "
                             f"dimensions, got shape {list(shape)}")
        if self._inner is None or self._spec is None and self._inner != shape[1:self.ndim]:
            self._fix_inner(shape[1:self.ndim], what)
        elif shape[1:self.ndim] != self._inner:
            raise ValueError(f"{what}: the storage holds rows of {list(self._inner)} items (dims 1..{self.ndim - 1}), "
                             f"got data of shape {list(shape)}")
        return data.reshape(-1, *shape[self.ndim:])

    _adds_keys = True  # whether a write may bring new entries (the memory-mapped layout is fixed)

    def _with_new_keys(self, spec, kind, leaves, what):
        """(leaves, spec): an in-place write of a TensorDict with every stored entry and some new
        ones adds them to the storage, zero-filled for the other items, as torchrl's storages do
        (``rb[:] = data`` with a computed column; a missing entry is still an error)."""
        stored = set(spec.keys)
        extra = [(k, v) for k, v in leaves if k not in stored]
        if kind != spec.kind or not extra or not self._adds_keys or any(k not in dict(leaves) for k in spec.keys):
            return leaves, spec
        return leaves, spec._replace(keys=spec.keys + [k for k, _ in extra],
                                     shapes=spec.shapes + [tuple(v.shape[1:]) for _, v in extra],
                                     dtypes=spec.dtypes + [v._data.dtype for _, v in extra])

    def _matched(self, spec, kind, leaves, batch, what):
        """The data's leaves in the storage's order, after checking them against the storage."""
        if kind != spec.kind:
            raise TypeError(f"{what}: this storage holds {spec.kind}s, got a {kind}")
        if kind == "tensordict" and batch[1:] != spec.item_batch:
            raise ValueError(f"{what}: the items have batch_size {list(batch[1:])} (batch_size {list(batch)}); the "
                             f"storage holds items of batch_size {list(spec.item_batch)}")
        by_key = dict(leaves)
        if len(by_key) != len(spec.keys) or any(k not in by_key for k in spec.keys):
            missing = [_key_name(k) for k in spec.keys if k not in by_key]
            extra = [_key_name(k) for k in by_key if k not in set(spec.keys)]
            raise KeyError(f"{what}: the batch's keys differ from the storage's: missing {missing}, unexpected {extra}")
        values = []
        for key, shape, dtype in zip(spec.keys, spec.shapes, spec.dtypes):
            value = by_key[key]
            name = f"entry {_key_name(key)!r}" if key else "the tensor"
            if tuple(value.shape[1:]) != shape:
                raise ValueError(f"{what}: {name} has per-item shape {list(value.shape[1:])} (shape "
                                 f"{list(value.shape)}); the storage expects {list(shape)}")
            if value._data.dtype != dtype and not np.can_cast(value._data.dtype, dtype, "same_kind"):
                raise TypeError(f"{what}: {name} has dtype {value._data.dtype}; the storage holds {dtype} and "
                                "does not cast across kinds")
            values.append(value)
        return values

    def _commit(self, write):
        if write.spec is not None and self._spec is not None:  # new entries: zero-filled arrays beside the others
            old = len(self._spec.keys)
            added = [zeros((self.max_size,) + shape, dtype=_dtypes.from_numpy_dtype(dt),
                           device=self._data.device)._data
                     for shape, dt in zip(write.spec.shapes[old:], write.spec.dtypes[old:])]
            self._set_arrays(write.spec, self._arrays + added, self._data.device)
        elif write.spec is not None:
            self._allocate(write.spec, write.device)
            if isinstance(self, LazyTensorStorage):  # as torchrl, an INFO line on the first write
                kind = "LazyMemmapStorage" if isinstance(self, LazyMemmapStorage) else "LazyTensorStorage"
                shape = (self._data.batch_size if isinstance(self._data, TensorDict) else self._data.shape)
                shape = Size((self.max_size // self._row_items, *(self._inner or ()), *shape[1:]))
                logger.info(f"Initialized {kind} with {shape!r} shape")
        if write.cursor is None:  # given positions
            index = write.index if write.device is CPU else write.device._backend.xp.asarray(write.index)
            for store, rows in zip(self._arrays, write.values):
                store[index] = rows
            self._advance(write)
            return write.index
        start, count = write.index[write.first], len(write.index) - write.first
        for store, rows in zip(self._arrays, write.values):
            for dst, src in _segments(start, count, self.max_size):
                store[dst] = rows[write.first:][src]
        self._advance(write)
        return write.index

    def _storage_device(self):
        return None if self._data is None else self._data.device

    def _item_bytes(self, spec=None):
        spec = spec or self._spec
        return 0 if spec is None else sum(math.prod(s) * np.dtype(d).itemsize for s, d in zip(spec.shapes, spec.dtypes))

    def _room(self):
        return physical_memory()

    def _allocate(self, spec, device):
        if self.device is None:  # the first batch's device, from now on
            self.device = device
        if self._shared_dir is not None:
            return self._allocate_files(spec, self._shared_dir)
        arrays = [zeros((self.max_size,) + shape, dtype=_dtypes.from_numpy_dtype(dt), device=device)._data
                  for shape, dt in zip(spec.shapes, spec.dtypes)]
        self._set_arrays(spec, arrays, device)

    def _set_arrays(self, spec, arrays, device):
        if spec.kind == "tensor":
            data = wrap(arrays[0], device)
        else:
            data = TensorDict(batch_size=(self.max_size,) + spec.item_batch, device=device)
            for key, array in zip(spec.keys, arrays):
                data.set(key, wrap(array, device))
            for key, item_batch in spec.nested:  # an empty one has no leaf to make it
                batch = (self.max_size,) + item_batch
                nested = data.get(key, None)
                if nested is None:
                    data.set(key, TensorDict(batch_size=batch, device=device))
                else:
                    nested.batch_size = batch
        self._spec, self._arrays, self._data = spec, arrays, data

    def _allocate_files(self, spec, directory):
        """Creates the storage's files in ``directory`` with their disk space reserved: on a full
        disk, OSError(ENOSPC) naming the file, and the files made so far are removed again (the
        storage stays empty)."""
        created = []

        def mapped(file, shape, dtype):
            created.append(os.path.join(directory, file))
            return np.asarray(backends.cpu.mapped_file(created[-1], shape, dtype))
        try:
            arrays, records = [], []
            for i, (shape, dt) in enumerate(zip(spec.shapes, spec.dtypes)):
                arrays.append(mapped(f"{i}.npy", (self.max_size,) + shape, plain_dtype(dt)).view(dt))
                records.append(array_record(arrays[-1], f"{i}.npy"))
            meta = mapped("cursor.npy", (2,), np.int64)
            write_json(os.path.join(directory, self._LAYOUT),
                       {"format": self._FORMAT, "version": 1, "max_size": self.max_size, "kind": spec.kind,
                        "item_batch": list(spec.item_batch), "inner": list(self._inner or ()),
                        "nested": [[list(k), list(b)] for k, b in spec.nested],
                        "leaves": [[list(k), r] for k, r in zip(spec.keys, records)]})
        except BaseException:
            for path in created:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            raise
        self._meta = meta  # length and cursor now live in the file
        self._set_arrays(spec, arrays, CPU)
        self._files = file_names(spec, directory, [f"{i}.npy" for i in range(len(arrays))])

    def _reopen_files(self, directory):
        """Maps the files of a storage in ``directory`` (contents, length and cursor)."""
        what = f"{type(self).__name__}(scratch_dir={directory!r})"
        layout = read_json(os.path.join(directory, self._LAYOUT), what)
        try:
            if layout["format"] != self._FORMAT or layout["version"] != 1:
                raise ValueError(f"not a {self._FORMAT} directory")
            if layout["kind"] not in ("tensordict", "tensor"):
                raise ValueError(f"bad kind {layout['kind']!r}")
            keys = [tuple(k) for k, _ in layout["leaves"]]
            if not all(isinstance(part, str) for k in keys for part in k):
                raise ValueError("bad keys")
            arrays = [open_array(directory, r, what, mmap_mode="r+") for _, r in layout["leaves"]]
            meta = open_array(directory, {"file": "cursor.npy", "dtype": "int64", "shape": [2]}, what, "r+")
        except (KeyError, TypeError, ValueError) as e:
            raise RuntimeError(f"{what}: the directory holds no valid storage ({e})") from None
        inner = tuple(layout.get("inner", ()))
        if len(inner) != self.ndim - 1:
            raise ValueError(f"{what}: the directory holds a storage with ndim={len(inner) + 1}, this storage has "
                             f"ndim={self.ndim}")
        if inner:
            self._fix_inner(inner, what)
        if layout["max_size"] != self.max_size or any(a.shape[0] != self.max_size for a in arrays):
            raise ValueError(f"{what}: the directory holds a storage of max_size={layout['max_size']}, this storage "
                             f"has max_size={self.max_size}")
        spec = _Spec(layout["kind"], keys, [tuple(a.shape[1:]) for a in arrays], [a.dtype for a in arrays],
                     tuple(layout["item_batch"]), tuple((tuple(k), tuple(b)) for k, b in layout.get("nested", ())))
        if not (0 <= meta[0] <= self.max_size and 0 <= meta[1] < self.max_size):
            raise RuntimeError(f"{what}: cursor.npy holds a bad length/cursor {meta.tolist()}")
        self._meta = meta
        self._set_arrays(spec, arrays, CPU)
        self._files = file_names(spec, directory, [r["file"] for _, r in layout["leaves"]])

    # ---- reading -------------------------------------------------------------------------------------
    def _gather(self, index):
        """Items at positions ``index`` (an int or an int64 NumPy array of any shape: the result's
        leading shape), copied, as what was written (a TensorDict, tensor, tensorclass or pytree)."""
        rows = self._rows_at(index)
        return rows if self._spec.kind == "tensor" else self._typed(rows)

    def _rows_at(self, index):
        """The stored TensorDict (or tensor) rows at positions ``index``, copied."""
        if np.ndim(index) > 1:
            items = self._rows_at(index.reshape(-1))
            batch = tuple(items.batch_size if isinstance(items, TensorDict) else items.shape)
            return items.reshape(*index.shape, *batch[1:])
        device = self._data.device
        if self._spec.kind == "tensor":
            if np.ndim(index) == 0:
                return wrap(self._arrays[0][index].copy(), device)
            if device is not CPU:
                index = device._backend.xp.asarray(index)
            return wrap(self._arrays[0].take(index, axis=0), device)
        if np.ndim(index) == 0:
            return self._data[index].clone()
        return self._data[index if device is CPU else wrap(device._backend.xp.asarray(index), device)]

    def _locate(self, index):
        self._sync()
        if self._spec is None:
            raise RuntimeError(f"{type(self).__name__}: cannot get items out of a storage that was never written to")
        return super()._locate(index)

    # ---- checkpoints ---------------------------------------------------------------------------------
    def state_dict(self):
        """The stored items, length and cursor (a copy); a TypeError for pytree items, which only
        ``dumps``/``loads`` save, as torchrl's."""
        if self._item_tree is not None:
            kind = self._item_tree[0]
            raise TypeError(f"Objects of type {kind if kind == 'dict' else kind.__name__} are not supported by "
                            f"{type(self).__name__}.state_dict; save a pytree storage with dumps/loads")
        return super().state_dict()

    def loads(self, path):
        """Restores what ``dumps`` wrote to ``path``; a tensor or pytree storage loads only into a
        storage already written to (its structure comes from there), as torchrl's."""
        state = load_state(path, mmap_mode=None)
        if self._spec is None and isinstance(state, dict) and (isinstance(state.get("data"), Tensor)
                                                                or state.get("pytree")):
            raise RuntimeError(f"Cannot fill a non-initialized pytree-based TensorStorage: the {type(self).__name__} "
                               f"loading {path!r} was never written to; write one batch of the same structure first")
        self.load_state_dict(self._loaded_state(state))

    def _state(self, copy):
        n = len(self)
        rows = None if self._spec is None else self._data[:n]
        state = {"type": type(self).__name__, "max_size": self.max_size, "len": n, "cursor": self._cursor,
                 "data": rows.clone() if copy and rows is not None else rows}
        if self.ndim > 1 and self._inner is not None:
            state["inner"] = list(self._inner)
        if self._item_tree is not None:
            state["pytree"] = True
        return state

    def _load_plan(self, state):
        if self.ndim > 1 and isinstance(state, dict) and state.get("inner") and self._spec is None:
            self._fix_inner(state["inner"], "load_state_dict")
        length, cursor = self._check_state(state, self._state_types)
        data = state.get("data")
        if length == 0:
            def apply():
                self._meta[:] = (0, cursor)
            return apply
        if not isinstance(data, (TensorDict, Tensor)) or not data.ndim or data.shape[0] != length:
            raise ValueError(f"load_state_dict: expected 'data' with {length} rows, got "
                             f"{type(data).__name__} of shape {list(getattr(data, 'shape', []))}")
        write = self._prepare(data, cursor=0, what="load_state_dict", flat=True)

        def apply():
            self._meta[:] = 0
            self._commit(write)
            self._meta[1] = cursor
        return apply

    def _empty(self):
        super()._empty()  # the arrays and their structure stay, as in torchrl

    def __repr__(self):
        return f"{type(self).__name__}(max_size={self.max_size}, len={len(self)}, device={self.device})"


class LazyTensorStorage(TensorStorage):
    """A ``TensorStorage`` allocated on the first write, from that batch's structure.

    Every later batch must have the same keys, the same per-item shapes (``shape[1:]``) and
    dtypes that cast safely (same kind: float to float, int to int or float, bool to anything);
    otherwise ``KeyError``, ``ValueError`` or ``TypeError`` name the entry, the expected and the
    actual value. Writes wrap around at ``max_size``. ``device=None`` (or torchrl's "auto") keeps
    the first batch's device (torchrl's default is "cpu").
    """

    def __init__(self, max_size, *, device=None, ndim=1, compilable=False, consolidated=False, shared_init=False):
        self._init_empty(max_size, device, _check_ndim(ndim, type(self).__name__))
        self.shared_init = bool(shared_init)
        if self.shared_init and type(self) is LazyTensorStorage:
            self._share()


class LazyMemmapStorage(LazyTensorStorage):
    """A ``LazyTensorStorage`` whose arrays are memory-mapped ``.npy`` files in ``scratch_dir``
    (a new temporary directory, removed with the storage, when None), on the CPU.

    The directory also holds ``layout.json`` (keys, shapes, dtypes) and ``cursor.npy`` (length
    and write cursor, updated in place on every write). **Reopening:** a new
    ``LazyMemmapStorage(max_size, scratch_dir=d)`` on a directory that holds one (for example
    after a process restart) maps the same files again: contents, length and cursor come back,
    and writing goes on where it stopped. A replay buffer built on it gives every item the
    default priority; to get the sampler's state (priorities) back too, ``dumps`` the buffer and
    ``loads`` it instead. torchrl does not reopen a scratch directory by itself (its
    ``existsok=False`` refuses one; rlpipe accepts ``existsok`` and reopens).

    **Cleanup**, as torchrl's: ``auto_cleanup`` (default: True for a temporary directory, False
    for a ``scratch_dir`` given) removes the directory when the storage is garbage collected or
    the process exits (Ctrl+C included); ``cleanup()`` removes it now and returns whether there
    was anything to remove. Storages with ``auto_cleanup`` are in ``_MEMMAP_STORAGE_REGISTRY``.
    """

    _adds_keys = False  # its files and layout.json are fixed at the first write

    def __init__(self, max_size, *, scratch_dir=None, device="cpu", ndim=1, existsok=False, compilable=False,
                 shared_init=False, auto_cleanup=None):
        super().__init__(max_size, ndim=ndim, shared_init=shared_init)
        self._scratch_dir_is_temp = scratch_dir is None
        self._auto_cleanup = self._scratch_dir_is_temp if auto_cleanup is None else bool(auto_cleanup)
        self._cleaned_up = False
        self._finalizer = None
        if self._auto_cleanup:
            _MEMMAP_STORAGE_REGISTRY.add(self)
        if device != "auto" and resolve(device) is not CPU:
            raise ValueError(f"LazyMemmapStorage: memory maps live on the CPU, got device={device!r}; move samples "
                             "with a transform instead")
        self.device = CPU
        self.scratch_dir = None if scratch_dir is None else os.path.abspath(os.fspath(scratch_dir))
        if self.scratch_dir is not None and os.path.exists(os.path.join(self.scratch_dir, self._LAYOUT)):
            self._reopen()
        if self.shared_init:
            self._share()

    def _room(self):
        where = self.scratch_dir or tempfile.gettempdir()
        while not os.path.isdir(where):
            where = os.path.dirname(where)
        return shutil.disk_usage(where).free, f"free disk space in {where!r}"

    def _directory(self):
        if self.scratch_dir is None:
            self.scratch_dir = tempfile.mkdtemp(prefix="rlpipe-memmap-storage-")
        os.makedirs(self.scratch_dir, exist_ok=True)
        if self._auto_cleanup and self._finalizer is None:  # runs when collected, or at exit (Ctrl+C included)
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.scratch_dir, True)
        return self.scratch_dir

    def cleanup(self):
        """Removes the scratch directory and its files now; True if there was one to remove,
        False otherwise (never written, removed already, or deleted by someone else)."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        directory, self._cleaned_up = self.scratch_dir, True
        if directory is None or not os.path.isdir(directory):
            return False
        shutil.rmtree(directory, ignore_errors=True)
        return not os.path.exists(directory)

    def _allocate(self, spec, device):
        self._allocate_files(spec, self._directory())

    def _reopen(self):
        self._reopen_files(self.scratch_dir)

    def __repr__(self):
        return f"LazyMemmapStorage(max_size={self.max_size}, len={len(self)}, scratch_dir={self.scratch_dir!r})"


LazyStackStorage = unavailable("LazyStackStorage", "it returns lazy stacks of TensorDicts, which rlpipe does not "
                               "have; use ListStorage (samples of TensorDicts come back densely stacked)", ListStorage)
CompressedListStorage = unavailable("CompressedListStorage", "compressed item storage is not implemented; use "
                                    "ListStorage or LazyMemmapStorage", ListStorage)
StorageEnsemble = unavailable("StorageEnsemble", "ensembles of storages are not implemented", Storage)
