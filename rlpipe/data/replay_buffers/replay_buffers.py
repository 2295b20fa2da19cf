"""Replay buffers: a storage, a sampler and transforms, with torchrl's API.

``ReplayBuffer(storage=..., sampler=..., batch_size=..., transform=...)``: ``extend`` writes a
batch (one item per row) round-robin, ``add`` one item, ``sample`` draws ``batch_size`` items.
``TensorDictReplayBuffer`` also writes ``"index"`` (and the sampler's info, e.g.
``"priority_weight"``) into every sample and ``"index"`` into what ``rb[index]`` returns, and
reads priorities from ``priority_key`` on extend; it leaves the TensorDicts given to it unchanged.

Transforms: a callable given as ``transform`` or through ``append_transform`` runs on every
sample (``invert=True``: on the data being written instead), as in torchrl. An env ``Transform``
runs both ways, as torchrl's: its ``inv`` on the data written, its ``forward`` on every sample
(``invert=True`` swaps them), so ``append_transform(Reward2GoTransform(...))`` stores returns. A
``rlpipe.postprocs.MultiStep`` always runs on write, in streaming mode (torchrl's
``MultiStepTransform``): consecutive collector batches are stored as exact n-step transitions,
each ``n_steps - 1`` frames late; ``flush()`` writes the frames still held back, and the
MultiStep's own ``reset()`` drops them (when the environments restart). A ``[*B, T]`` batch is
stored as ``B * T`` transitions (torchrl would need a storage with ``ndim=2``).

Bad input raises before anything changes: a rejected ``extend`` leaves the storage, the sampler
and the MultiStep stream as they were.

Threads: every buffer is safe to use from several threads at once (writers, samplers, priority
updates), as torchrl's: each call that reads or changes the storage, the sampler or the writer
holds the buffer's re-entrant lock, so concurrent calls take effect one after the other.
"""
import copy
import functools
import math
import multiprocessing
import os
import threading
import warnings
from typing import NamedTuple

import numpy as np

from ..._tensor import Tensor, wrap
from ..._utils import rl_warnings, unavailable
from ...envs.transformed_env import Compose, Transform
from ...postprocs.multistep import MultiStep
from ...random import Generator
from ...tensordict import TensorDict, is_tensorclass
from .._checkpoint import atomic_directory, load_state, save_state
from .samplers import PrioritizedSampler, RandomSampler, Sampler, as_index_array, empty_storage_error
from ._pytree_items import is_pytree, tree_map
from ._storage_layout import _numpy_index
from .storages import ListStorage, Storage, check_room, physical_memory
from .writers import RoundRobinWriter, TensorDictRoundRobinWriter, Writer

__all__ = ["ReplayBuffer", "TensorDictReplayBuffer", "PrioritizedReplayBuffer", "TensorDictPrioritizedReplayBuffer"]


def _check_batch_size(batch_size, what):
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ValueError(f"{what}: batch_size must be a positive int, got batch_size={batch_size!r}")
    return int(batch_size)


def _as_array(value):
    """A sampler's output (a Tensor, or an array) as a NumPy array."""
    return value.detach().cpu()._data if isinstance(value, Tensor) else np.asarray(value)


def _no_index():
    return wrap(np.zeros(0, dtype=np.int64))


def _per_row(value, rows):
    """A [rows, ...] tensor reduced to one number per row (the max, torchrl's default reduction)."""
    array = value.detach().cpu()._data if isinstance(value, Tensor) else np.asarray(value)
    return array.reshape(rows, -1).max(axis=1) if array.size else array.reshape(rows)


def _expanded(array, td):
    """``array`` (``[B]``, or ``[]`` for one item) as a Tensor of ``td``'s batch shape, repeated
    over the item dims (tensordict's ``expand_as_right``)."""
    value = wrap(np.asarray(array))
    if td.device is not None and td.device != value.device:
        value = value.to(td.device)
    extra = td.batch_dims - value.ndim
    return value if extra <= 0 else value.reshape(tuple(value.shape) + (1,) * extra).expand(tuple(td.batch_size))


def _is_key(index):
    """Whether ``index`` is a TensorDict key: a string, or a tuple of strings (nested)."""
    if isinstance(index, str):
        return True
    return isinstance(index, tuple) and bool(index) and all(isinstance(k, str) or _is_key(k) for k in index)


def _locked(method):
    """``method``, run holding the buffer's lock (re-entrant: a locked method may call another)."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._replay_lock:
            return method(self, *args, **kwargs)
    return locked


def _share_transform_state(transform):
    """Shares a transform's write state between processes (its ``share_memory_()``), as torchrl;
    RuntimeError for one that keeps such state (``requires_shared_write_state``) but cannot."""
    if isinstance(transform, Compose):
        for part in transform:
            _share_transform_state(part)
        return
    share_memory = getattr(transform, "share_memory_", None)
    if callable(share_memory):
        share_memory()
    elif getattr(transform, "requires_shared_write_state", False):
        raise RuntimeError(f"{type(transform).__name__} keeps replay-buffer write state but does not implement "
                           "share_memory_(). Use a centralized writer, or a transform that supports shared "
                           "replay-buffer write state.")


def _built(given, cls):
    """A storage or sampler, or what a factory (a callable, as torchrl accepts) returns."""
    return given() if callable(given) and not isinstance(given, cls) else given


class _Entry(NamedTuple):
    """One transform of a buffer: what the user gave, and what runs on written data and on
    samples (None: nothing)."""
    given: object
    on_write: object
    on_read: object


class _StreamingMultiStep:
    """A MultiStep run on write: streaming, its [*B, T] output flattened to transitions."""

    def __init__(self, multistep):
        multistep.streaming = True
        self.module = multistep

    def __call__(self, data):
        if not isinstance(data, TensorDict) or not data.batch_dims:
            raise (ValueError if isinstance(data, TensorDict) else TypeError)(
                "MultiStep transform: expected a TensorDict batch with a time dimension (batch_size [*B, T]), got "
                f"{list(data.batch_size) if isinstance(data, TensorDict) else type(data).__name__}; add() a single "
                "frame instead")
        return self._transitions(self.module(data))

    def flush(self):
        return self._transitions(self.module.flush())

    @staticmethod
    def _transitions(td):
        return td.reshape(-1) if td is not None and td.batch_dims > 1 else td

    # the stream's held-back frames, to put back when a write fails
    def _snapshot(self):
        return self.module._tail

    def _restore(self, tail):
        self.module._tail = tail


class ReplayBuffer:
    """A replay buffer over a ``storage`` (default ``ListStorage(1000)``) and a ``sampler``
    (default ``RandomSampler()``).

    ``sample()`` returns the data only; ``sample(return_info=True)`` also returns the info dict
    (``"index"``, and ``"priority_weight"`` for a prioritized sampler) as Tensors. ``generator``
    (an ``rlpipe.Generator``) drives the sampler; by default rlpipe's global one does, so
    ``rlpipe.manual_seed`` makes sampling reproducible.

    Threads: a buffer may be written, sampled, indexed and given new priorities from several
    threads at once, as torchrl's. Each call that reads or changes the storage, the sampler or
    the writer (``extend``, ``add``, ``flush``, ``sample``, ``update_priority``, ``rb[index]``,
    ``rb[index] = ...``, ``set_``, ``set_at_``, ``update_``, ``empty``, ``state_dict``,
    ``load_state_dict``, ``dumps``, ``loads``, ``len()``) holds the buffer's re-entrant lock
    (``_replay_lock``, torchrl's name), so concurrent calls act as if made one after the other:
    no row is lost or written twice, ``len()`` and ``write_count`` agree, and a ring that wraps
    holds exactly the last ``max_size`` items of that order. Write-time transforms run under the
    lock (a streaming MultiStep sees whole batches in that order); sample-time transforms and
    ``collate_fn`` run outside it, on the sample's copy. Between two calls other threads may
    act: an index from ``sample()`` can be overwritten before its ``update_priority``. Writers,
    samplers and storages used directly, and two buffers sharing one storage, are not locked.

    Checkpoints: ``state_dict``/``load_state_dict`` in memory; ``dumps(path)``/``loads(path)``
    write and read a directory of ``.json`` and ``.npy`` files (storage contents, write cursor,
    sampler state with the priorities), atomically, without pickle. Transforms keep their own
    state: the frames a MultiStep holds back are not saved (``flush()`` first to keep them).

    ``rb[index]`` reads items by storage position (an int, slice, list, array or Tensor), and
    ``rb["key"]`` / ``rb["next", "reward"]`` one entry of everything stored, as in torchrl.

    Differences from torchrl:

    - ``prefetch`` is accepted and does nothing: rlpipe samples in the calling thread, so each
      ``sample()`` draws its batch when called (the same batches, in the same order, as
      sampling without prefetch; torchrl draws up to ``prefetch`` batches ahead in threads);
      a ``checkpointer`` raises ``NotImplementedError``; ``shared=True`` shares the storage and the
      writes, not the sampler's state (a prioritized sampler's priorities stay per process);
    - with a storage of ``ndim > 1``, as torchrl, ``sample(return_info=True)``'s ``"index"`` is a
      tuple of per-dim index Tensors, a ``TensorDictReplayBuffer`` sample's ``"index"`` is
      ``[N, ndim]`` and ``extend`` returns ``[N, ndim]`` coordinates of the items written;
      ``pin_memory`` is accepted and does nothing (there is no pinned memory);
      ``transform`` may be one callable or a list; ``flush()`` is rlpipe's own;
    - ``rb[index]`` returns copies (torchrl returns views of its storage for ints and slices);
    - ``state_dict()`` holds ``"_storage"``, ``"_sampler"`` and ``"_batch_size"`` in rlpipe's own
      format (plain arrays and numbers), not torchrl's, so checkpoints do not cross libraries;
    - ``batch_size`` and ``sample(batch_size)`` must be positive (torchrl accepts 0 and returns
      an empty sample);
    - ``update_priority`` raises ``ValueError`` for an index outside the items stored (torchrl's
      prioritized sampler skips negative indices and writes one past the items stored into its
      tree).
    """

    _default_writer = RoundRobinWriter

    def __init__(self, *, storage=None, sampler=None, writer=None, collate_fn=None, pin_memory=False, prefetch=None,
                 transform=None, transform_factory=None, batch_size=None, dim_extend=None, checkpointer=None,
                 generator=None, shared=False, compilable=None, delayed_init=None):
        self._replay_lock = threading.RLock()
        if prefetch is not None and (isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0):
            raise ValueError(f"{type(self).__name__}: prefetch must be None or an int >= 0, got prefetch={prefetch!r}")
        if dim_extend is not None and (isinstance(dim_extend, bool) or not isinstance(dim_extend, int)
                                       or dim_extend < 0):
            raise ValueError(f"dim_extend must be a positive value, got dim_extend={dim_extend!r}")
        self._dim_extend = dim_extend
        if shared and prefetch:
            raise ValueError(f"Cannot share prefetched replay buffers. Pass prefetch=0 or shared=False (got "
                             f"prefetch={prefetch}, shared={shared}).")
        for name, value, allowed in (("checkpointer", checkpointer, (None,)),):
            if value not in allowed:
                raise NotImplementedError(f"{type(self).__name__}: {name}={value!r} is not supported by rlpipe "
                                          f"(use {allowed[0]!r})")
        if transform_factory is not None:
            if transform is not None:
                raise TypeError("transform and transform_factory cannot be given together")
            transform = transform_factory()
        storage = ListStorage(1000) if storage is None else _built(storage, Storage)
        sampler = RandomSampler() if sampler is None else _built(sampler, Sampler)
        writer = self._default_writer() if writer is None else _built(writer, Writer)
        if not isinstance(storage, Storage):
            raise TypeError(f"storage must be an rlpipe.data storage (ListStorage, LazyTensorStorage, "
                            f"LazyMemmapStorage), got {type(storage).__name__}")
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be an rlpipe.data sampler (RandomSampler, SamplerWithoutReplacement, "
                            f"PrioritizedSampler), got {type(sampler).__name__}")
        if not isinstance(writer, Writer):
            raise TypeError(f"writer must be an rlpipe.data writer (RoundRobinWriter, TensorDictRoundRobinWriter, "
                            f"TensorDictMaxValueWriter, ImmutableDatasetWriter), got {type(writer).__name__}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"collate_fn must be callable, got {type(collate_fn).__name__}")
        if batch_size is None and getattr(sampler, "drop_last", False):
            raise ValueError("Samplers with drop_last=True must work with a predictable batch-size. Please pass the "
                             "batch-size to the ReplayBuffer constructor.")
        if storage.ndim > 1 and type(writer).__name__ == "TensorDictMaxValueWriter":
            raise ValueError("TensorDictMaxValueWriter is not compatible with storages with more than one dimension "
                             f"(storage ndim={storage.ndim})")
        writer.register_storage(storage)
        self._storage, self._sampler, self._writer = storage, sampler, writer
        self._collate_fn = collate_fn
        self._batch_size = None if batch_size is None else _check_batch_size(batch_size, type(self).__name__)
        self._transforms = []  # _Entry per transform
        for t in transform if isinstance(transform, (list, tuple)) else () if transform is None else (transform,):
            self.append_transform(t)
        self.set_rng(generator)
        self.share(shared)
        if len(storage):  # a storage that already holds items (a reopened LazyMemmapStorage)
            existing = np.arange(len(storage), dtype=np.int64)
            sampler._check_index(existing)
            sampler.extend(existing)

    # ---- properties --------------------------------------------------------------------------------
    @property
    def storage(self):
        """The storage the buffer writes to."""
        return self._storage

    @property
    def sampler(self):
        """The sampler that picks what ``sample`` returns."""
        return self._sampler

    @property
    def writer(self):
        """The writer that places new items in the storage."""
        return self._writer

    @property
    def collate_fn(self):
        """The function applied to sampled items (None: the storage's own stacking)."""
        return self._collate_fn

    @property
    def initialized(self):
        """Always True: rlpipe buffers are ready when built (torchrl may delay its init)."""
        return True

    @property
    def write_count(self):
        """How many items were written through this buffer's writer."""
        return self._writer._write_count

    @property
    def batch_size(self):
        """The default number of items ``sample()`` draws (None: it must be given)."""
        return self._batch_size

    @property
    def dim_extend(self):
        """The data dim ``extend`` writes along (default: the storage's ``ndim - 1``, so ``[B, T]``
        batches land time-first in an ``ndim=2`` storage), as torchrl's; ``rb[index]`` indexes
        and returns data in that same layout."""
        return self._storage.ndim - 1 if self._dim_extend is None else self._dim_extend

    def _transposed(self, data, what="extend"):
        """``data`` with its ``dim_extend`` dim first (as written) or back (as read)."""
        dim = self.dim_extend
        if dim and is_pytree(data):
            return tree_map(lambda leaf: self._transposed(leaf, what), data)
        if not dim or not isinstance(data, (TensorDict, Tensor)) and not is_tensorclass(data):
            return data
        if data.ndim <= dim:
            raise ValueError(f"{what}: dim_extend={dim} needs data with at least {dim + 1} batch dimensions, got "
                             f"shape {list(data.shape)}")
        return data.transpose(dim, 0)

    @property
    def transform(self):
        """The transforms, in order (a tuple; torchrl gives a Compose)."""
        return tuple(entry.given for entry in self._transforms)

    @_locked
    def __len__(self):
        return len(self._storage)

    # the lock is not copied or pickled: a copy gets its own
    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_replay_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._replay_lock = threading.RLock()

    def __repr__(self):
        return (f"{type(self).__name__}(\n    storage={self._storage!r},\n    sampler={self._sampler!r},\n"
                f"    batch_size={self._batch_size},\n    transform={list(self.transform)!r})")

    def share(self, shared=True):
        """Makes the buffer writable from several processes (torchrl's ``share``), returns it: a
        tensor storage moves into memory-mapped files every process maps (see
        ``LazyTensorStorage(shared_init=True)``), and writes take a process lock. Give the
        buffer to the processes (``multiprocessing.Process(args=(rb,))``, fork or spawn); a
        ``ListStorage`` stays in each process's memory."""
        if shared:  # first, so a refused transform leaves the buffer as it was
            for entry in self._transforms:
                _share_transform_state(entry.given)
        self.shared = bool(shared)
        self._write_lock = multiprocessing.Lock() if self.shared else None
        if self.shared and hasattr(self._storage, "_share"):
            self._storage._share()
        return self

    @_locked
    def set_rng(self, generator):
        """Makes the sampler draw from ``generator`` (an ``rlpipe.Generator``; None: the global one)."""
        if generator is not None and not isinstance(generator, Generator):
            raise TypeError(f"generator must be an rlpipe.Generator or None, got {type(generator).__name__}")
        self._sampler._rng = generator

    @property
    def _rng(self):
        """The generator the sampler draws from (None: rlpipe's default one), torchrl's attribute."""
        return self._sampler._rng

    def _rng_state(self):
        return None if self._rng is None else copy.deepcopy(self._rng.get_state())

    # ---- transforms ---------------------------------------------------------------------------------
    def _entry(self, transform, invert):
        if isinstance(transform, MultiStep):
            return _Entry(transform, _StreamingMultiStep(transform), None)
        if isinstance(transform, Transform):
            write, read = (transform, transform.inv) if invert else (transform.inv, transform)
            return _Entry(transform, write, read)
        if not callable(transform):
            raise TypeError(f"a replay-buffer transform must be callable, got {type(transform).__name__}")
        return _Entry(transform, transform, None) if invert else _Entry(transform, None, transform)

    @_locked
    def append_transform(self, transform, *, invert=False):
        """Adds a transform at the end: run on samples, or on written data with ``invert=True``
        (a MultiStep always runs on written data). An env ``Transform`` runs its ``inv`` on
        written data and its ``forward`` on samples (``invert=True``: the other way round)."""
        entry = self._entry(transform, invert)
        if getattr(self, "shared", False):
            _share_transform_state(transform)
        self._transforms.append(entry)
        return self

    @_locked
    def insert_transform(self, index, transform, *, invert=False):
        """Inserts a transform at position ``index`` (see ``append_transform``)."""
        entry = self._entry(transform, invert)
        if getattr(self, "shared", False):
            _share_transform_state(transform)
        self._transforms.insert(index, entry)
        return self

    @_locked
    def flush(self):
        """Writes the frames write-time transforms hold back (a streaming MultiStep's last
        ``n_steps - 1``), as the ends of their trajectories; returns the positions written.
        Call it when collection stops. rlpipe only: torchrl keeps those frames."""
        written = []
        for i, (_, fn, _) in enumerate(self._transforms):
            if not hasattr(fn, "flush"):
                continue
            saved = fn._snapshot()
            held = fn.flush()
            if held is None or not held.shape[0]:
                continue
            try:
                written.append(self._write(held, "flush", first_transform=i + 1)._data)
            except BaseException:
                fn._restore(saved)  # the frames stay held back
                raise
        return wrap(np.concatenate(written)) if written else _no_index()

    # ---- writing ------------------------------------------------------------------------------------
    def extend(self, data, *, update_priority=True):
        """Writes ``data``, one item per row (a TensorDict or Tensor along its first dimension, or
        a list of items for a ListStorage); returns the positions written, an int64 Tensor.
        ``update_priority=False`` gives the new items the default priority even when ``data``
        holds ``priority_key`` (torchrl's keyword)."""
        return self._write(data, "extend", use_priority=update_priority)

    def add(self, data):
        """Writes one item; returns its position (an empty index when a write-time transform
        holds it back). A TensorDict with a batch dimension is one item (of that batch size), with
        torchrl's warning (silenced by ``RL_WARNINGS=0``)."""
        if isinstance(data, TensorDict) and data.batch_dims and rl_warnings():
            warnings.warn(f"Using `add()` with a TensorDict that has batch_size={list(data.batch_size)}: it is "
                          "stored as one item. Use `extend()` to add multiple elements, or `add()` with a single "
                          "element (batch_size=[]). Set the RL_WARNINGS environment variable to '0' to silence "
                          "this warning.", UserWarning, stacklevel=2)
        index = self._write(self._storage._batch_of_one(data), "add")
        return int(index._data[0]) if index.shape[0] == 1 else index

    def _through_write_transforms(self, data, first_transform=0):
        """``(data, restore)``: ``data`` through the write-time transforms (None when they hold it
        all back) and a function that puts their state back, for a write that then fails."""
        on_write = [entry.on_write for entry in self._transforms[first_transform:] if entry.on_write is not None]
        saved = [(fn, fn._snapshot()) for fn in on_write if hasattr(fn, "_snapshot")]

        def restore():
            for fn, state in saved:
                fn._restore(state)
        if on_write and isinstance(data, TensorDict):
            data = data.clone(False)  # as torchrl's transform.inv: the caller's TensorDict keeps its entries
        try:
            for fn in on_write:
                data = fn(data)
                if data is None:
                    return None, restore
        except BaseException:
            restore()
            raise
        if on_write and isinstance(data, (TensorDict, Tensor)) and (not data.ndim or not data.shape[0]):
            return None, restore  # everything held back
        return data, restore

    @_locked
    def _write(self, data, what, first_transform=0, use_priority=True):
        if self._write_lock is None:
            return self._write_unshared(data, what, first_transform, use_priority)
        with self._write_lock:  # other processes write the same files
            return self._write_unshared(data, what, first_transform, use_priority)

    def _write_unshared(self, data, what, first_transform=0, use_priority=True):
        data, restore = self._through_write_transforms(data, first_transform)
        if data is None:
            return _no_index()
        if what != "add":  # torchrl: dim_extend has no effect on add
            data = self._transposed(data, what)
        try:
            stored, priority = self._before_write(data, what)
            priority = priority if use_priority else None
            plan = self._writer._plan(stored, what)
            kept = plan.write.index[plan.write.first:] if plan.write is not None else plan.rows  # distinct positions
            self._sampler._check_index(kept)
            if priority is not None and isinstance(self._sampler, PrioritizedSampler):
                _, priority = self._sampler.checked(kept, priority[plan.rows], f"{what} ({self._priority_key!r})")
            else:
                priority = None
        except BaseException:
            restore()
            raise
        index = self._writer._apply(plan)
        self._sampler.extend(kept)
        if priority is not None:
            self._sampler.update_priority(kept, priority)
        return wrap(self._storage._coordinates(index))

    _priority_key = None

    def _before_write(self, data, what):
        """(what to store, per-row priorities or None)."""
        return data, None

    # ---- reading ------------------------------------------------------------------------------------
    def _read_transforms(self, data):
        for entry in self._transforms:
            if entry.on_read is not None:
                data = entry.on_read(data)
        return data

    def sample(self, batch_size=None, return_info=False, include_info=None):
        """``batch_size`` items (the constructor's when None) drawn by the sampler, collated
        (``collate_fn``) and transformed. ``return_info=True`` also returns the info dict;
        ``include_info`` (TensorDict buffers) writes it into the sample (default: yes)."""
        if batch_size is None:
            batch_size = self._batch_size
            if batch_size is None:
                raise RuntimeError("batch_size not specified. You can specify the batch_size when constructing the "
                                   "replay buffer, or pass it to the sample method (got None for both).")
        batch_size = _check_batch_size(batch_size, "sample")
        raw, info = self._draw(batch_size)
        data = self._read_transforms(self._collated(raw))
        if include_info is None or include_info:
            data = self._attach(data, info)
        if return_info:
            return data, {key: self._index_info(value) if key == "index" else wrap(value)
                          for key, value in info.items()}
        return data

    def _index_info(self, index):
        """The sampled positions as torchrl gives them: a Tensor, or per-dim Tensors when ndim > 1."""
        return wrap(index) if self._storage.ndim == 1 else tuple(wrap(np.ascontiguousarray(i)) for i in index.T)

    @_locked
    def _draw(self, batch_size):
        """(the items drawn, not yet collated; the info dict with ``"index"``) for ``sample``."""
        if len(self._storage) == 0:
            raise empty_storage_error()
        item = 8 + self._storage._item_bytes()  # the index and the item
        check_room(batch_size * item, f"sample: batch_size={batch_size} items of {item} bytes", physical_memory())
        index, info = self._sampler.sample(self._storage, batch_size)
        index = self._storage._flat_positions(index) if isinstance(index, tuple) else _as_array(index)
        info = {key: _as_array(value) for key, value in info.items()}
        info["index"] = self._storage._coordinates(index)
        if self._writer.tracks_generations:
            info["index_generation"] = self._writer._stamps(index // self._storage._row_items)
        if self._collate_fn is not None and isinstance(self._storage, ListStorage):
            return [self._storage._items[i] for i in index], info  # torchrl's collate_fn gets the list of items
        return self._storage._gather(index), info

    def _attach(self, data, info):
        return data

    def _collated(self, raw):
        return raw if self._collate_fn is None else self._collate_fn(raw)

    # ---- in-place writes to what is stored (torchrl's set_, update_, set_at_, rb[index] = value) ------
    @_locked
    def __setitem__(self, index, value):
        """Overwrites the items at storage positions ``index`` with ``value`` through the write-time
        transforms (torchrl's ``transform.inv``); the write cursor stays."""
        value, restore = self._through_write_transforms(value)
        if value is None:
            return
        try:
            if self._storage.ndim > 1:
                self._storage._set_at(self._user_positions(index), value)
            else:
                self._storage.set(self._storage._locate(index), value, set_cursor=False)
        except BaseException:
            restore()
            raise

    def _user_positions(self, index):
        """The storage positions ``index`` selects in ``rb[:]``'s layout (ndim > 1: the storage's
        ``[rows, *inner]`` grid with ``dim_extend`` first), shaped as the selection."""
        grid = self._storage._grid()
        if self.dim_extend:
            grid = np.swapaxes(grid, 0, self.dim_extend)
        try:
            return np.asarray(grid[_numpy_index(index)])
        except IndexError as e:
            raise IndexError(f"replay buffer index {index!r} does not fit the buffer's shape {list(grid.shape)} ({e})"
                             ) from None

    def read_all_in_order(self, end=None):
        """The stored items in storage order, ``rb[:]`` (``rb[:end]`` with ``end``), as torchrl's;
        change them and give them back with ``write_all``."""
        return self[:] if end is None else self[:end]

    def write_all(self, data, end=None):
        """Writes ``data`` back over the first items in storage order, ``rb[:end] = data``
        (``end`` defaults to the number of rows of ``data``), as torchrl's; new entries of a
        TensorDict (a computed column) are added to a tensor storage."""
        if end is None:
            end = data.shape[0] if isinstance(data, (TensorDict, Tensor)) and data.ndim else len(data)
        self[:end] = data

    def set_(self, key, value):
        """Overwrites entry ``key`` of every stored item with ``value`` (``len(self)`` rows)."""
        self._entry_write(key, value, slice(None))

    def set_at_(self, key, value, index):
        """Overwrites entry ``key`` of the items at storage positions ``index``."""
        self._entry_write(key, value, index)

    @_locked
    def update_(self, data):
        """Overwrites, for each entry of the TensorDict ``data`` (``len(self)`` rows), that entry
        of every stored item."""
        if not isinstance(data, TensorDict):
            raise TypeError(f"update_: expected a TensorDict, got {type(data).__name__}")
        stored = self[:]
        if not isinstance(stored, TensorDict):
            raise TypeError(f"update_: the buffer stores {type(stored).__name__}s, not TensorDicts")
        stored.update(data)
        if self._storage.ndim > 1:
            self._storage._set_at(self._user_positions(slice(None)), stored.exclude(*self._info_only()))
            return
        self._storage.set(np.arange(len(self), dtype=np.int64), stored.exclude(*self._info_only()), set_cursor=False)

    @_locked
    def _entry_write(self, key, value, index):
        positions = np.atleast_1d(self._user_positions(index) if self._storage.ndim > 1 else
                                  self._storage._locate(index))
        stored = self._storage._gather(positions)
        if not isinstance(stored, TensorDict):
            raise TypeError(f"set_: the buffer stores {type(stored).__name__}s, not TensorDicts")
        if key not in stored.keys(True):
            raise KeyError(f"set_: {key!r} is not an entry of the stored items (entries: {list(stored.keys(True))})")
        stored.set(key, value if isinstance(value, Tensor) else wrap(np.asarray(value)))
        self._storage._set_at(positions, stored)

    def _info_only(self):
        return ()

    def __getitem__(self, index):
        """Items by storage position (``rb[:]`` is everything stored), transformed as samples are;
        with a key (``rb["key"]``, ``rb["next", "reward"]``), that entry of ``rb[:]``."""
        if _is_key(index):
            return self[:][index]
        if isinstance(index, tuple) and self._storage.ndim == 1:
            return self[index[0]] if len(index) == 1 else self[:][index]
        with self._replay_lock:
            positions = self._user_positions(index) if self._storage.ndim > 1 else self._storage._locate(index)
            data = self._stored(self._storage._gather(positions), positions)
        return self._read_transforms(data)

    def _stored(self, data, positions):
        """What ``rb[index]`` gives for the items read at ``positions`` (before the transforms)."""
        return data

    def __iter__(self):
        """Samples until the sampler runs out (never, for a sampler with replacement)."""
        if self._batch_size is None:
            raise RuntimeError("Cannot iterate over the replay buffer. Batch_size was not specified during "
                               "construction of the replay buffer: give one to the constructor")
        while True:
            yield self.sample()
            if self._sampler.ran_out:
                return

    # ---- priorities ---------------------------------------------------------------------------------
    @_locked
    def update_priority(self, index, priority):
        """Sets the priorities of the items at ``index`` (ignored by non-prioritized samplers,
        as in torchrl). Priorities must be finite and non-negative. With ndim > 1, ``index``
        may be ``[N, ndim]`` coordinates or a tuple of per-dim indices (what ``sample`` gives)."""
        index = as_index_array(self._storage._flat_positions(index), "update_priority")
        n = len(self._storage)
        outside = (index < 0) | (index >= n)
        if outside.any():
            raise ValueError(f"update_priority: index {index[outside][0]} is outside the {n} items stored")
        if isinstance(self._sampler, PrioritizedSampler):
            self._sampler.update_priority(index, priority)

    # ---- emptying and checkpoints -------------------------------------------------------------------
    @_locked
    def empty(self):
        """Forgets every item and the sampler's state (the storage keeps its structure)."""
        self._storage._empty()
        self._sampler._empty()
        self._writer._empty()

    @_locked
    def state_dict(self):
        """``"_storage"``, ``"_sampler"``, ``"_batch_size"`` and ``"_rng"`` (the generator's state,
        None without a generator), as torchrl's keys, in rlpipe's own formats."""
        return {"_storage": self._storage.state_dict(), "_sampler": self._sampler.state_dict(),
                "_writer": self._writer.state_dict(), "_batch_size": self._batch_size, "_rng": self._rng_state()}

    @_locked
    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()``; checks all of it before changing anything."""
        if not isinstance(state_dict, dict) or not {"_storage", "_sampler", "_batch_size"} <= set(state_dict):
            raise ValueError("load_state_dict: expected a dict with '_storage', '_sampler' and '_batch_size', got "
                             f"{sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__}")
        batch_size = state_dict["_batch_size"]
        batch_size = None if batch_size is None else _check_batch_size(batch_size, "load_state_dict")
        rng = state_dict.get("_rng")
        if rng is not None:
            generator = Generator()
            try:
                generator.set_state(copy.deepcopy(rng))
            except (TypeError, ValueError, KeyError) as e:
                raise ValueError(f"load_state_dict: bad '_rng' generator state ({e})") from None
        plans = [self._storage._load_plan(state_dict["_storage"])]
        plans.append(self._sampler._load_plan(state_dict["_sampler"], stored=state_dict["_storage"]["len"]))
        writer_state = state_dict.get("_writer")
        if writer_state is not None and not isinstance(writer_state, dict):
            raise ValueError(f"load_state_dict: '_writer' must be a dict (a writer's state_dict()), got "
                             f"{type(writer_state).__name__}")
        for apply in plans:
            apply()
        if writer_state:  # after the storage, which holds the round-robin cursor too
            self._writer.load_state_dict(writer_state)
        self._batch_size = batch_size
        if rng is not None:  # a new generator in that state, as torchrl's
            self.set_rng(generator)

    @_locked
    def dumps(self, path):
        """Saves the buffer to the directory ``path``: written beside it, then swapped in."""
        scratch = getattr(self._storage, "scratch_dir", None)
        target = os.path.abspath(os.fspath(path))
        if scratch is not None and os.path.commonpath([scratch, target]) == target:
            raise ValueError(f"dumps: {target!r} holds the storage's scratch_dir {scratch!r}; replacing it would "
                             "delete the live storage. Dump to another directory")
        with atomic_directory(target) as tmp:
            save_state(tmp, {"_storage": self._storage._saved_state(target), "_sampler": self._sampler.state_dict(),
                             "_writer": self._writer.state_dict(), "_batch_size": self._batch_size,
                             "_rng": self._rng_state()})

    @_locked
    def loads(self, path):
        """Restores what ``dumps`` wrote (into this buffer's own storage and sampler types)."""
        state = load_state(path, mmap_mode=None)
        if isinstance(state, dict) and "_storage" in state:
            state = dict(state, _storage=self._storage._loaded_state(state["_storage"]))
        self.load_state_dict(state)

    save = dump = dumps  # torchrl's aliases
    load = loads

    def register_save_hook(self, hook):
        """A ``hook(data, path=...)`` run on the stored contents when ``dumps`` writes them
        (torchrl's; ``hook.shift`` and ``hook.is_full`` are set first when it has them)."""
        self._storage.register_save_hook(hook)

    def register_load_hook(self, hook):
        """A ``hook(data)`` run on the stored contents ``loads`` reads back (torchrl's)."""
        self._storage.register_load_hook(hook)


class TensorDictReplayBuffer(ReplayBuffer):
    """A ReplayBuffer of TensorDicts. ``sample`` writes ``"index"`` (int64) and the sampler's
    info (``"priority_weight"``, float32, for a prioritized sampler) into the sample, over its
    batch shape; ``rb[index]`` carries ``"index"`` too (the storage positions read), as torchrl's
    does. ``extend`` and ``add`` leave the given TensorDict unchanged (torchrl 0.14 writes
    ``"index"`` into a shallow copy only). When the data has ``priority_key`` (default
    ``"td_error"``), its per-row max becomes the new items' priority.

    Differences from torchrl: the entries ``"index"`` and ``"priority_weight"`` are never stored
    (torchrl's writer stores ``"index"``, and a ``"priority_weight"`` written back becomes a new
    entry), so a sample can be written back and ``rb.storage[:]`` holds the data only;
    ``rb[index]`` adds ``"index"`` when reading. ``extend`` reduces a ``priority_key`` entry
    with more than one value per item (``[B, T]`` items) to its per-row max; torchrl's
    ``extend`` passes it to ``update_priority`` unreduced, which fails for such items.

    Thread-safe as ``ReplayBuffer`` (one lock around each write, sample and priority update).
    """

    _INFO_KEYS = ("priority_weight",)
    _default_writer = TensorDictRoundRobinWriter

    def __init__(self, *, priority_key="td_error", **kwargs):
        self.priority_key = priority_key
        super().__init__(**kwargs)

    @property
    def _priority_key(self):
        return self.priority_key

    def _before_write(self, data, what):
        if not isinstance(data, TensorDict):
            raise TypeError(f"{what}: {type(self).__name__} stores TensorDicts, got {type(data).__name__}; use a "
                            "ReplayBuffer for other data")
        info = [key for key in self._INFO_KEYS if key in data.keys()]
        stored = data.exclude(*info) if info else data
        priority = data.get(self.priority_key, None)
        if priority is not None and data.batch_dims:  # one per item: per row, or per [rows, *inner] item
            priority = _per_row(priority, math.prod(data.batch_size[:self._storage.ndim]))
        return stored, priority

    def _info_only(self):
        return ("priority_weight",)

    def _attach(self, data, info):
        if not isinstance(data, TensorDict):
            raise RuntimeError(f"Cannot include info in non-tensordict data (a sample transform returned a "
                               f"{type(data).__name__})")
        for key, value in info.items():
            try:
                data.set(key, _expanded(value, data))
            except (RuntimeError, ValueError) as error:
                raise RuntimeError(f"Failed to set the metadata ({key!r}) in the sampled tensordict within "
                                   f"{type(self).__name__}.sample: the sample has batch_size {list(data.batch_size)} "
                                   "(a transform probably changed its shape); sample from a ReplayBuffer with "
                                   "return_info=True to get it") from error
        return data

    def update_tensordict_priority(self, data):
        """Updates priorities from a sample that carries ``"index"`` and ``priority_key``."""
        if not isinstance(self._sampler, PrioritizedSampler):
            return
        index, priority = data["index"], data[self.priority_key]
        rows = data.batch_size[0] if data.batch_dims else 1
        if self._storage.ndim > 1:  # "index" holds [rows, ndim] coordinates
            self.update_priority(index.reshape(rows, -1)[:, :self._storage.ndim], _per_row(priority, rows))
            return
        self.update_priority(index.reshape(rows, -1)[:, 0], _per_row(priority, rows))


def _prioritized(cls, alpha, beta, eps, storage, sampler, kwargs, sampler_device=None):
    storage = ListStorage(1000) if storage is None else _built(storage, Storage)
    if sampler is None:
        if not isinstance(storage, Storage) or storage.max_size >= 2 ** 40:
            raise ValueError(f"{cls}: a prioritized buffer needs a storage with a bounded max_size, got {storage!r}")
        sampler = PrioritizedSampler(storage.max_size, alpha, beta, eps, device=sampler_device)
    elif sampler_device is not None:
        raise TypeError("sampler_device cannot be passed when sampler is provided.")
    return dict(kwargs, storage=storage, sampler=sampler)


class PrioritizedReplayBuffer(ReplayBuffer):
    """A ReplayBuffer with ``PrioritizedSampler(storage.max_size, alpha, beta, eps)``, or with
    the ``sampler`` given (as in torchrl, which then ignores ``alpha``, ``beta`` and ``eps``).
    Thread-safe as ``ReplayBuffer``: a write, a sample and a priority update never interleave."""

    def __init__(self, *, alpha, beta, eps=1e-8, storage=None, sampler=None, sampler_device=None, **kwargs):
        super().__init__(**_prioritized(type(self).__name__, alpha, beta, eps, storage, sampler, kwargs,
                                        sampler_device))


class TensorDictPrioritizedReplayBuffer(TensorDictReplayBuffer):
    """A TensorDictReplayBuffer with ``PrioritizedSampler(storage.max_size, alpha, beta, eps)``
    (it takes no ``sampler``, as in torchrl). Thread-safe as ``ReplayBuffer``: a write, a sample
    and a priority update never interleave."""

    def __init__(self, *, alpha, beta, priority_key="td_error", eps=1e-8, storage=None, sampler_device=None,
                 **kwargs):
        if "sampler" in kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument 'sampler': it "
                            "builds its PrioritizedSampler from alpha, beta and eps; use a TensorDictReplayBuffer "
                            "to give another sampler")
        super().__init__(priority_key=priority_key, **_prioritized(type(self).__name__, alpha, beta, eps, storage,
                                                                   None, kwargs, sampler_device))


ReplayBufferEnsemble = unavailable("ReplayBufferEnsemble", "ensembles of replay buffers are not implemented",
                                   ReplayBuffer)
RemoteTensorDictReplayBuffer = unavailable("RemoteTensorDictReplayBuffer", "rlpipe has no RPC replay buffers",
                                           TensorDictReplayBuffer)
