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
"""
import collections
import heapq

import numpy as np

from ..._tensor import Tensor, wrap
from ..._utils import unavailable
from ...tensordict import TensorDict

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


def _positions_on(positions, device):
    """The int64 host array ``positions`` as a Tensor on ``device`` (None: the CPU), copied there:
    a GPU tensor must hold a device array, which the storage can write with a slice."""
    value = wrap(positions)
    return value if device is None or device == value.device else value.to(device)


class Writer:
    """The writer interface: ``register_storage``, ``add``, ``extend``, ``state_dict``."""

    def __init__(self, compilable=False):
        self._storage = None
        self._compilable = compilable
        self._write_count = 0

    def register_storage(self, storage):
        """Makes ``storage`` the one this writer writes to."""
        self._storage = storage

    def _check_storage(self, what):
        if self._storage is None:
            raise RuntimeError(f"{what}: {type(self).__name__} has no storage; give it to a ReplayBuffer or call "
                               "register_storage(storage) first")

    def _plan(self, data, what):
        raise NotImplementedError

    def _apply(self, plan):
        """Writes a planned write; returns the positions (the caller's index)."""
        self._storage._commit(plan.write)
        self._write_count += len(plan.write.index)
        self._set_state(plan.state)
        return plan.result

    def _set_state(self, state):
        pass

    def extend(self, data):
        """Writes ``data`` (one item per row); returns the positions, an int64 Tensor."""
        return wrap(self._apply(self._plan(data, "extend")))

    def add(self, data):
        """Writes one item; returns its position."""
        batch = data.unsqueeze(0) if isinstance(data, (TensorDict, Tensor)) else [data]
        index = self._apply(self._plan(batch, "add"))
        return int(index[0])

    def _empty(self):
        self._write_count = 0

    def state_dict(self):
        """The writer's state (empty for a stateless writer)."""
        return {}

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()``."""
        pass

    def __repr__(self):
        return f"{type(self).__name__}()"


class RoundRobinWriter(Writer):
    """Writes at the storage's cursor, wrapping around at ``max_size``: extending a storage of
    3 items with 5 keeps the last 3, the cursor then at 2 (torchrl's behaviour)."""

    @property
    def _cursor(self):
        """The next row to write along dim 0 (the next item when the storage's ndim is 1)."""
        return 0 if self._storage is None else self._storage._cursor // self._storage._row_items

    @_cursor.setter
    def _cursor(self, value):
        self._check_storage("_cursor")
        items = self._storage._row_items
        self._storage._meta[1] = int(value) * items % self._storage.max_size

    def _plan(self, data, what):
        self._check_storage(what)
        write = self._storage._prepare(self._annotated(data, what), what=what)
        return _Plan(write, np.arange(write.first, len(write.index), dtype=np.int64), write.index, None)

    def _annotated(self, data, what):
        return data

    def state_dict(self):
        """The write cursor and the number of items written."""
        return {"_cursor": self._cursor, "_write_count": self._write_count}

    def load_state_dict(self, state_dict):
        """Restores the write cursor and the count of a ``state_dict()``."""
        self._cursor = state_dict["_cursor"]
        self._write_count = state_dict.get("_write_count", self._write_count)


class TensorDictRoundRobinWriter(RoundRobinWriter):
    """A RoundRobinWriter that also stores each item's position as its ``"index"`` entry
    (int64, over the item's batch shape), replacing any ``"index"`` the data carries."""

    def _annotated(self, data, what):
        if not isinstance(data, TensorDict) or not data.batch_dims:
            return data
        index = self._storage._next_rows(data)
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
            raise RuntimeError(f"{what}: {type(self).__name__} expects TensorDicts, got {type(data).__name__}")
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
        n = _rows(data, what)
        ranks = self._ranks(data, what)
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

    def _apply(self, plan):
        if plan.write is None:
            return plan.result
        return super()._apply(plan)

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
