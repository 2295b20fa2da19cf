"""Writers: where a replay buffer puts the items it is given (torchrl's ``writers`` module).

- ``RoundRobinWriter``: at the storage's write cursor, wrapping around at ``max_size``.
- ``TensorDictRoundRobinWriter``: the same, and stores each item's position as its ``"index"``
  entry (as torchrl's, so ``rb.storage[i]["index"] == i``); the default writer of a
  ``TensorDictReplayBuffer``.
- ``TensorDictMaxValueWriter(rank_key=("next", "reward"), reduction="sum")``: keeps the
  ``max_size`` items of highest rank; an item ranked below all of them once the storage is full
  is dropped (its position in the returned index is -1).
- ``ImmutableDatasetWriter``: refuses every write (``RuntimeError``).

A write is planned first (``_plan``: every check, nothing changed) and then applied
(``_apply``), so a buffer can check the sampler and the priorities in between and a rejected
write leaves everything as it was. ``extend``/``add`` on a writer do both, as torchrl's.
The round-robin cursor lives in the storage, so two buffers sharing a storage share it.

Generations (torchrl's ``track_generations=True``): every dim-0 slot of the storage carries a
stamp that advances with each write to it (-1: never written), so a holder of a sampled index
can tell whether the slot still holds what it sampled. The stamps live on the storage, so every
writer of a shared storage advances them and every tracking writer sees them.
"""
import collections
import heapq

import numpy as np

from ..._tensor import Tensor, wrap
from ..._utils import unavailable
from ...tensordict import TensorDict
from .._checkpoint import atomic_directory, load_state, save_state

__all__ = ["Writer", "RoundRobinWriter", "TensorDictRoundRobinWriter", "TensorDictMaxValueWriter",
           "ImmutableDatasetWriter"]

# a planned write: the storage's checked write, the data rows it stores (an int64 array), the
# index returned to the caller, and the writer state to install when it is applied
_Plan = collections.namedtuple("_Plan", "write rows result state")


def _rows(data, what):
    """The number of items in ``data`` (one per row, or per list element)."""
    if isinstance(data, (TensorDict, Tensor)):
        if not data.ndim:
            raise ValueError(f"{what}: the data needs a leading batch dimension (one row per item)")
        return data.shape[0]
    if isinstance(data, (list, tuple)):
        return len(data)
    raise TypeError(f"{what}: expected a TensorDict, a Tensor or a list of items, got {type(data).__name__}")


_GENERATIONS = "_slot_generations"  # the storage attribute holding the stamps (an int64 array)
_MIN_GENERATIONS = 1024  # an unbounded storage's stamps grow from this size, doubling


def _slot_index(index, ndim):
    """(the dim-0 slots ``index`` names, an int64 array; the device of a Tensor index): a tuple
    is one per-dim index (its dim-0 part counts); a tensor of coordinate rows ``[..., ndim]``
    (ndim > 1) its first column; anything else a batch of slots."""
    if isinstance(index, tuple):
        index = index[0]
    device = index.device if isinstance(index, Tensor) else None
    array = np.asarray(index.detach().cpu()._data if isinstance(index, Tensor) else index)
    if array.dtype.kind not in "iu":
        raise TypeError(f"generations_of: index must hold integers, got dtype {array.dtype}")
    if ndim > 1 and array.ndim >= 2 and array.shape[-1] == ndim:
        array = array[..., 0]
    return array.astype(np.int64), device


def _positions_on(positions, device):
    """The int64 host array ``positions`` as a Tensor on ``device`` (None: the CPU), copied there:
    a GPU tensor must hold a device array, which the storage can write with a slice."""
    value = wrap(positions)
    return value if device is None or device == value.device else value.to(device)


class Writer:
    """The writer interface: ``register_storage``, ``add``, ``extend``, ``state_dict``."""

    tracks_generations = False
    _STATE_KEYS = ()  # what a state must hold to load

    def __init__(self, compilable=False):
        self._storage = None
        self._compilable = compilable
        self._write_count = 0
        self._pending_generation = None  # stamps loaded before a storage was registered

    def register_storage(self, storage):
        """Makes ``storage`` the one this writer writes to (stamps loaded earlier go to it,
        unless it already carries its own)."""
        self._storage = storage
        pending, self._pending_generation = self._pending_generation, None
        if pending is not None and getattr(storage, _GENERATIONS, None) is None:
            setattr(storage, _GENERATIONS, pending)

    # ---- generations -------------------------------------------------------------------------------
    @property
    def _generation(self):
        """The storage's slot stamps as an int64 Tensor (None before a tracked write)."""
        array = self._generation_array()
        return None if array is None else wrap(array)

    @_generation.setter
    def _generation(self, value):
        array = None if value is None else np.array(
            value.detach().cpu()._data if isinstance(value, Tensor) else value, dtype=np.int64).reshape(-1)
        if self._storage is None:
            self._pending_generation = array
        else:
            setattr(self._storage, _GENERATIONS, array)

    def _generation_array(self):
        if self._storage is None:
            return self._pending_generation
        return getattr(self._storage, _GENERATIONS, None)

    def generations_of(self, index):
        """The stamp of each dim-0 slot in ``index`` (an int64 Tensor shaped like the slots, on
        ``index``'s device): how many times it was rewritten, -1 for a slot never written or out
        of range, and -1 everywhere for a writer that does not track generations."""
        slots, device = _slot_index(index, getattr(self._storage, "ndim", 1))
        value = wrap(self._stamps(slots))
        return value if device is None or device == value.device else value.to(device)

    def _stamps(self, slots):
        """The stamps of the dim-0 ``slots`` (an int64 array), as ``generations_of``."""
        stamps = np.full(slots.shape, -1, dtype=np.int64)
        array = self._generation_array() if self.tracks_generations else None
        if array is not None:
            valid = (slots >= 0) & (slots < len(array))
            stamps[valid] = array[slots[valid]]
        return stamps

    def _bump_generations(self, positions):
        """Advances the stamps of the slots holding ``positions`` (item positions, one write
        each; a slot of a storage with ndim > 1 counts once per row written)."""
        array = getattr(self._storage, _GENERATIONS, None)
        if array is None and not self.tracks_generations or not len(positions):
            return
        row_items = self._storage._row_items
        slots = positions[positions % row_items == 0] // row_items
        capacity = -(self._storage.max_size // -row_items)
        need = int(slots.max()) + 1
        current = 0 if array is None else len(array)
        if current < need:  # all slots at once, or growing by doubling for a huge (unbounded) storage
            size = capacity if capacity <= 1 << 20 else min(capacity, max(need, 2 * current, _MIN_GENERATIONS))
            grown = np.full(size, -1, dtype=np.int64)
            if current:
                grown[:current] = array
            array = grown
            setattr(self._storage, _GENERATIONS, array)
        np.add.at(array, slots, 1)  # a first write brings a slot from -1 to 0

    def _check_storage(self, what):
        if self._storage is None:
            raise RuntimeError(f"{what}: {type(self).__name__} has no storage; give it to a ReplayBuffer or call "
                               "register_storage(storage) first")

    def _plan(self, data, what):
        raise NotImplementedError

    def _apply(self, plan):
        """Writes a planned write; returns the positions (the caller's index)."""
        if plan.write is None:  # nothing to write
            return plan.result
        self._storage._commit(plan.write)
        self._write_count += len(plan.write.index)
        self._bump_generations(plan.write.index)
        self._set_state(plan.state)
        return plan.result

    def _set_state(self, state):
        pass

    def extend(self, data):
        """Writes ``data`` (one item per row); returns the positions, an int64 Tensor."""
        return wrap(self._apply(self._plan(data, "extend")))

    def add(self, data):
        """Writes one item; returns its position."""
        self._check_storage("add")
        index = self._apply(self._plan(self._storage._batch_of_one(data), "add"))
        return int(index[0])

    def _empty(self):
        self._write_count = 0
        array = getattr(self._storage, _GENERATIONS, None)
        if array is not None:  # every handle goes stale; never-written slots stay -1
            array[array >= 0] += 1

    def state_dict(self):
        """The writer's state (empty for a stateless writer)."""
        return {}

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()``."""
        pass

    def dumps(self, path):
        """Writes ``state_dict()`` to the directory ``path`` (atomically; .json and .npy files)."""
        state = self.state_dict()
        with atomic_directory(path) as tmp:
            save_state(tmp, state)

    def loads(self, path):
        """Restores what ``dumps`` wrote to ``path``."""
        state = load_state(path, mmap_mode=None)
        expected = set(self._STATE_KEYS)
        if not isinstance(state, dict) or not expected <= set(state):
            found = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"loads: {path!r} holds no {type(self).__name__} state (expected keys "
                             f"{sorted(expected)}, got {found})")
        self.load_state_dict(state)

    def __repr__(self):
        return f"{type(self).__name__}()"


class RoundRobinWriter(Writer):
    """Writes at the storage's cursor, wrapping around at ``max_size``: extending a storage of
    3 items with 5 keeps the last 3, the cursor then at 2 (torchrl's behaviour).
    ``track_generations=True`` stamps the slots (see the module docstring): ``generations_of``
    reads them and ``sample`` adds an ``"index_generation"`` info entry."""

    _STATE_KEYS = ("_cursor",)

    def __init__(self, compilable=False, *, track_generations=False):
        super().__init__(compilable=compilable)
        if not isinstance(track_generations, bool):
            raise TypeError(f"{type(self).__name__}: track_generations must be a bool, got "
                            f"{type(track_generations).__name__}")
        self._track_generations = track_generations

    @property
    def tracks_generations(self):
        """Whether this writer stamps slots and reports their generations."""
        return self._track_generations

    def write_at(self, index, data):
        """Writes ``data`` (one item per row) at the dim-0 positions ``index`` without moving the
        cursor; their generations advance. Returns the positions."""
        self._check_storage("write_at")
        if self._storage.ndim != 1:
            raise ValueError(f"write_at: positions address a storage of ndim=1, this one has ndim={self._storage.ndim}")
        positions, _ = _slot_index(index, 1)
        positions = positions.reshape(-1)
        write = self._storage._prepare(self._annotated_at(data, positions), what="write_at", at=positions)
        result = self._apply(_Plan(write, np.arange(len(positions), dtype=np.int64), positions, None))
        return wrap(result)

    def _annotated_at(self, data, positions):
        return data

    @property
    def _cursor(self):
        """The next row to write along dim 0 (the next item when the storage's ndim is 1); kept
        on the writer until a storage is registered."""
        if self._storage is None:
            return self.__dict__.get("_unbound_cursor", 0)
        return self._storage._cursor // self._storage._row_items

    @_cursor.setter
    def _cursor(self, value):
        if self._storage is None:
            self._unbound_cursor = int(value)
            return
        items = self._storage._row_items
        self._storage._meta[1] = int(value) * items % self._storage.max_size

    def _plan(self, data, what):
        self._check_storage(what)
        write = self._storage._prepare(self._annotated(data, what), what=what)
        return _Plan(write, np.arange(write.first, len(write.index), dtype=np.int64), write.index, None)

    def _annotated(self, data, what):
        return data

    def state_dict(self):
        """The write cursor, the number of items written and, when tracked, the generations."""
        state = {"_cursor": self._cursor, "_write_count": self._write_count}
        array = self._generation_array() if self._track_generations else None
        if array is not None:
            state["_generation"] = wrap(array.copy())
        return state

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()`` (one without ``"_generation"`` keeps the stamps)."""
        self._cursor = state_dict["_cursor"]
        self._write_count = state_dict.get("_write_count", self._write_count)
        if state_dict.get("_generation") is not None:
            self._generation = state_dict["_generation"]



class TensorDictRoundRobinWriter(RoundRobinWriter):
    """A RoundRobinWriter that also stores each item's position as its ``"index"`` entry
    (int64, over the item's batch shape), replacing any ``"index"`` the data carries. Extending
    a storage already written to with an empty TensorDict writes nothing (an empty index), as
    torchrl's."""

    def _plan(self, data, what):
        empty = isinstance(data, TensorDict) and data.batch_dims and not data.batch_size[0]
        if empty and self._storage is not None and getattr(self._storage, "initialized", True):
            nothing = np.zeros(0, dtype=np.int64)
            return _Plan(None, nothing, nothing, None)
        return super()._plan(data, what)

    def _annotated(self, data, what):
        if not isinstance(data, TensorDict) or not data.batch_dims:
            return data
        return self._annotated_at(data, self._storage._next_rows(data))

    def _annotated_at(self, data, index):
        if not isinstance(data, TensorDict) or not data.batch_dims:
            return data
        data = data.copy()
        value = _positions_on(index, data.device)
        extra = data.batch_dims - 1
        if extra:
            value = value.reshape((-1,) + (1,) * extra).expand(tuple(data.batch_size))
        data.set("index", value)
        return data


class TensorDictMaxValueWriter(Writer):
    """Keeps the ``max_size`` items whose ``rank_key`` (reduced per item by ``reduction``:
    "sum", "max", "min", "mean" or "median") is highest. Until the storage is full items go to
    the next free position; then an item replaces the lowest-ranked stored one if it ranks
    higher, and is dropped otherwise. ``extend`` returns one position per row, -1 for a row
    dropped. Stores the ``"index"`` entry, as torchrl's."""

    _STATE_KEYS = ("_cursor", "_current_top_values")
    _REDUCTIONS = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "median": np.median}

    def __init__(self, rank_key=None, reduction="sum", **kwargs):
        super().__init__(**kwargs)
        if reduction not in self._REDUCTIONS:
            raise ValueError(f"TensorDictMaxValueWriter: reduction must be one of {sorted(self._REDUCTIONS)}, got "
                             f"{reduction!r}")
        self._rank_key = ("next", "reward") if rank_key is None else rank_key
        self._reduction = reduction
        self._cursor = 0
        self._current_top_values = []  # a min-heap of (rank, position)

    def _ranks(self, data, what):
        if not isinstance(data, TensorDict):
            raise RuntimeError(f"{what}: {type(self).__name__} expects data to be a tensor collection (a TensorDict or "
                               f"a tensorclass), got {type(data).__name__}")
        if data.batch_dims != 1:
            raise RuntimeError(f"{what}: expected a TensorDict with one batch dimension, got batch_size "
                               f"{list(data.batch_size)}")
        rank = data.get(self._rank_key, None)
        if rank is None:
            raise KeyError(f"{what}: rank key {self._rank_key!r} not found in the data")
        array = rank.detach().cpu()._data if isinstance(rank, Tensor) else np.asarray(rank)
        return self._REDUCTIONS[self._reduction](array.reshape(len(array), -1).astype(np.float64), axis=1)

    def _plan(self, data, what):
        self._check_storage(what)
        ranks = self._ranks(data, what)
        n = _rows(data, what)
        heap, cursor, size = list(self._current_top_values), self._cursor, self._storage.max_size
        target = {}  # position -> row (a later row at the same position wins, as in torchrl)
        for row in range(n):
            if len(heap) < size:
                position, cursor = cursor, (cursor + 1) % size
                heapq.heappush(heap, (float(ranks[row]), position))
            elif ranks[row] > heap[0][0]:
                position = heapq.heappop(heap)[1]
                heapq.heappush(heap, (float(ranks[row]), position))
            else:
                continue
            target[position] = row
        result = np.full(n, -1, dtype=np.int64)
        if not target:
            return _Plan(None, np.zeros(0, np.int64), result, (heap, cursor))
        positions = np.fromiter(target.keys(), np.int64, len(target))
        rows = np.fromiter(target.values(), np.int64, len(target))
        result[rows] = positions
        chosen = data[wrap(rows)].copy()
        chosen.set("index", _positions_on(positions, chosen.device))
        write = self._storage._prepare(chosen, what=what, at=positions)
        return _Plan(write, rows, result, (heap, cursor))

    def _set_state(self, state):
        self._current_top_values, self._cursor = state

    def add(self, data):
        """Writes one item if it ranks high enough; returns its position, or None if dropped."""
        index = self._apply(self._plan(data.unsqueeze(0), "add"))
        return None if index[0] < 0 else int(index[0])

    def _empty(self):
        super()._empty()
        self._cursor = 0
        self._current_top_values = []

    def state_dict(self):
        """The cursor, the count and the ranks of the items kept."""
        return {"_cursor": self._cursor, "_write_count": self._write_count,
                "_current_top_values": [list(v) for v in self._current_top_values]}

    def load_state_dict(self, state_dict):
        """Restores the cursor, the count and the ranks of a ``state_dict()``."""
        top = [(float(r), int(p)) for r, p in state_dict["_current_top_values"]]
        heapq.heapify(top)
        self._cursor, self._current_top_values = int(state_dict["_cursor"]), top
        self._write_count = state_dict.get("_write_count", self._write_count)


class ImmutableDatasetWriter(Writer):
    """A writer for read-only datasets: every write raises ``RuntimeError``."""

    WRITING_ERR = "This dataset doesn't allow writing."

    def _plan(self, data, what):
        raise RuntimeError(self.WRITING_ERR)

    def _empty(self):
        raise RuntimeError(self.WRITING_ERR)


WriterEnsemble = unavailable("WriterEnsemble", "ensembles of writers are not implemented", Writer)
