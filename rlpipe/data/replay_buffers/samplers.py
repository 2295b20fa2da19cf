"""Samplers: which storage positions a replay-buffer sample reads.

``RandomSampler`` draws uniformly with replacement, ``SamplerWithoutReplacement`` walks through
a permutation, ``PrioritizedSampler`` draws position ``i`` with probability
``(p_i + eps) ** alpha / sum_j (p_j + eps) ** alpha`` from a sum-tree and returns the
importance weights. Random numbers come from ``rlpipe``'s default CPU generator (so
``rlpipe.manual_seed`` makes sampling reproducible) or the buffer's ``generator``.
"""
import math
import numbers
import warnings

import numpy as np

from ... import _device, _dtypes
from ... import random as _random
from ..._tensor import Tensor, wrap
from ..._utils import unavailable
from ...tensordict import TensorDict
from .._checkpoint import atomic_directory, load_state, save_state
from .utils import end_flags, start_stop

__all__ = ["Sampler", "RandomSampler", "SamplerWithoutReplacement", "PrioritizedSampler", "SumMinTree",
           "SliceSampler", "SliceSamplerWithoutReplacement", "PrioritizedSliceSampler", "ConsumingSampler",
           "PromptGroupSampler", "StalenessAwareSampler", "StreamingSliceSampler", "SamplerEnsemble"]

EMPTY_STORAGE_ERROR = "Cannot sample from an empty storage."


def empty_storage_error(what="sample"):
    return RuntimeError(f"{EMPTY_STORAGE_ERROR} ({what}: the buffer holds 0 items; extend it first)")


def as_index_array(index, what):
    """``index`` (int, sequence, array or Tensor) as a flat int64 NumPy array."""
    if isinstance(index, Tensor):
        index = index.detach().cpu()._data
    array = np.asarray(index)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{what}: index must hold integers, got dtype {array.dtype} ({index!r})")
    return array.astype(np.int64, copy=False).reshape(-1)


def _check_number(name, value, low=0.0, what="PrioritizedSampler"):
    if isinstance(value, (Tensor, np.ndarray, np.generic)) and value.ndim == 0 and value.dtype != bool:
        value = value.item()  # a 0-d tensor (a scheduler's value), as torchrl accepts
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < low:
        raise ValueError(f"{what}: {name} must be a finite number >= {low}, got {name}={value!r}")
    return float(value)


# a with-replacement sampler class -> its without-replacement variant (filled below the classes)
_WITHOUT_REPLACEMENT = {}


class _SamplerMeta(type):
    """``Cls(..., replacement=False)`` builds ``Cls``'s without-replacement variant (RandomSampler
    -> SamplerWithoutReplacement, SliceSampler -> SliceSamplerWithoutReplacement), as torchrl's
    samplers do; ``replacement=True`` (or given to a variant already) changes nothing, and
    ``replacement=False`` to a sampler without a variant is a TypeError."""

    def __call__(cls, *args, **kwargs):
        if "replacement" in kwargs and not kwargs.pop("replacement"):
            variant = _WITHOUT_REPLACEMENT.get(cls)
            if variant is not None:
                return variant(*args, **kwargs)
            if cls not in _WITHOUT_REPLACEMENT.values():
                raise TypeError(f"{cls.__name__} has no without-replacement variant; cannot be instantiated with "
                                "replacement=False.")
        return super().__call__(*args, **kwargs)


class Sampler(metaclass=_SamplerMeta):
    """The sampler interface a replay buffer drives: ``sample(storage, batch_size)`` returns the
    positions and an info dict; ``extend(index)`` is told where new items were written."""

    _rng = None  # an rlpipe.Generator, or None for the default one

    def sample(self, storage, batch_size):
        """(the positions drawn, an int64 Tensor; the info dict of Tensors, e.g.
        ``"priority_weight"``), as torchrl's ``Sampler.sample``."""
        index, info = self._sample(storage, batch_size)
        return wrap(index), {key: wrap(np.asarray(value)) for key, value in info.items()}

    def _sample(self, storage, batch_size):
        """(positions, info) as NumPy arrays; what every sampler implements."""
        raise NotImplementedError

    def extend(self, index):
        """New items were written at ``index`` (a flat int64 array of distinct positions)."""

    def update_priority(self, index, priority):
        """Only prioritized samplers use priorities; the others ignore them, as torchrl's do."""

    def _check_index(self, index):
        """Raises before a write whose positions this sampler cannot track."""

    @property
    def ran_out(self):
        return False

    def _empty(self):
        """Forgets everything about the storage (``buffer.empty()``)."""

    def state_dict(self):
        return {"type": type(self).__name__}

    def load_state_dict(self, state_dict):
        self._load_plan(state_dict)()

    def _load_plan(self, state, stored=None):
        """Checks ``state`` and returns the function that applies it (nothing changes before);
        ``stored``: the number of items the storage will hold, when known."""
        if not isinstance(state, dict) or state.get("type") != type(self).__name__:
            found = state.get("type") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"load_state_dict: the state is a {found}'s, this sampler is a {type(self).__name__}")
        return lambda: None

    def dumps(self, path):
        """Writes the state to the directory ``path`` (atomically: .json and .npy files)."""
        with atomic_directory(path) as tmp:
            save_state(tmp, self.state_dict())

    def loads(self, path):
        self.load_state_dict(load_state(path, mmap_mode=None))

    # random numbers
    def _randint(self, high, size):
        return _random.randint(0, high, (size,), generator=self._rng)._data

    def _uniform(self, size):
        return _random.rand(size, dtype=_dtypes.float64, generator=self._rng)._data

    def _randperm(self, n):
        return _random.randperm(n, generator=self._rng)._data

    def __repr__(self):
        return f"{type(self).__name__}()"


class RandomSampler(Sampler):
    """Uniform draws with replacement over the items stored. ``RandomSampler(replacement=False,
    **kwargs)`` builds a ``SamplerWithoutReplacement(**kwargs)`` instead, as torchrl's."""

    def _sample(self, storage, batch_size):
        n = len(storage)
        if n == 0:
            raise empty_storage_error()
        return self._randint(n, batch_size), {}


class SamplerWithoutReplacement(Sampler):
    """Draws from a permutation of the stored positions until it is used up, then starts a new one
    (``ran_out`` is True after the call that used it up). As torchrl's code does, the last batch
    of a permutation is shorter when ``batch_size`` does not divide the length, unless
    ``drop_last``; a change of the storage length starts a new permutation. ``shuffle=False`` walks
    the positions in order. ``ran_out`` can be set (to False, say), as torchrl's."""

    def __init__(self, drop_last=False, shuffle=True):
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self._empty()

    def _empty(self):
        self._perm = None
        self.len_storage = 0
        self._ran_out = False

    @property
    def _sample_list(self):
        """The positions left in the current permutation (an int64 Tensor), or None before the
        first sample, as torchrl's attribute."""
        return None if self._perm is None else wrap(self._perm)

    @_sample_list.setter
    def _sample_list(self, value):
        self._perm = None if value is None else as_index_array(value, "_sample_list").copy()

    @property
    def ran_out(self):
        return self._ran_out

    @ran_out.setter
    def ran_out(self, value):
        self._ran_out = bool(value)

    def _new_list(self, n):
        return self._randperm(n) if self.shuffle else np.arange(n, dtype=np.int64)

    def _sample(self, storage, batch_size):
        n = len(storage)
        if n == 0:
            raise empty_storage_error()
        if self.drop_last and n < batch_size:
            raise ValueError(f"The batch size {batch_size} is greater than the storage capacity: "
                             f"batch_size={batch_size} is larger than the {n} items stored "
                             "(SamplerWithoutReplacement(drop_last=True) cannot draw a sample without repeating items)")
        if self._perm is None or self.len_storage != n:
            self._perm = self._new_list(n)
        self.len_storage = n
        index, rest = self._perm[:batch_size], self._perm[batch_size:]
        self._ran_out = len(rest) == 0 or self.drop_last and len(rest) < batch_size
        self._perm = self._new_list(n) if self._ran_out else rest
        return index, {}

    def state_dict(self):
        return {"type": type(self).__name__, "drop_last": self.drop_last, "shuffle": self.shuffle,
                "len_storage": self.len_storage, "ran_out": self._ran_out,
                "sample_list": None if self._perm is None else self._perm.copy()}

    def _load_plan(self, state, stored=None):
        super()._load_plan(state)
        try:
            drop_last, shuffle = bool(state["drop_last"]), bool(state["shuffle"])
            len_storage, ran_out, sample_list = int(state["len_storage"]), bool(state["ran_out"]), state["sample_list"]
            if sample_list is not None:
                sample_list = as_index_array(sample_list, "load_state_dict").copy()
                if sample_list.size and (sample_list.min() < 0 or sample_list.max() >= len_storage):
                    raise ValueError(f"positions outside [0, {len_storage})")
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"load_state_dict: bad SamplerWithoutReplacement state ({e})") from None

        def apply():
            self.drop_last, self.shuffle, self.len_storage = drop_last, shuffle, len_storage
            self._ran_out, self._perm = ran_out, sample_list
        return apply

    def __repr__(self):
        return f"{type(self).__name__}(drop_last={self.drop_last}, shuffle={self.shuffle})"


class SumMinTree:
    """Sums and minima over ``capacity`` leaves, in two flat binary trees (node ``i`` has the
    children ``2i`` and ``2i + 1``; the leaves start at ``size``, the next power of two). Leaves
    never written, or set to 0, count 0 in the sum and +inf in the min.

    Updates and prefix-sum searches take a whole batch at once, with one NumPy pass per tree
    level and no loop over the batch. NumPy's per-call cost dominates at batch 256, so the top
    ``TOP`` levels (at most 1024 nodes) are handled wholesale: recomputed with one slice per level
    after an update, and searched with one ``searchsorted`` over their level's cumulative sum. A
    contiguous run of leaves (a ring-buffer write) updates its ancestors with slices too.
    """

    TOP = 10

    def __init__(self, capacity):
        self.capacity = int(capacity)
        self._size = 1 << max(self.capacity - 1, 0).bit_length()
        self._depth = self._size.bit_length() - 1
        self._top = min(self._depth, self.TOP)
        self._sum = np.zeros(2 * self._size)
        self._min = np.full(2 * self._size, np.inf)

    @property
    def total(self):
        return float(self._sum[1])

    @property
    def min(self):
        return float(self._min[1])

    def __getitem__(self, index):
        """The leaf at ``index`` (a float), or the leaves at an array of positions."""
        if isinstance(index, (numbers.Integral, np.integer)):
            if not 0 <= index < self.capacity:
                raise IndexError(f"SumMinTree: index {index} is outside [0, {self.capacity})")
            return float(self._sum[self._size + int(index)])
        return self.leaves(as_index_array(index, "SumMinTree[index]"))

    def query(self, start, end):
        """The sum of the leaves in ``[start, end)`` (clipped to the tree), as torchrl's trees."""
        start, end = max(int(start), 0), min(int(end), self.capacity)
        return float(self._sum[self._size + start:self._size + end].sum()) if end > start else 0.0

    def leaves(self, index=None):
        """The leaf values at ``index`` (all ``capacity`` leaves when None)."""
        if index is None:
            return self._sum[self._size:self._size + self.capacity].copy()
        return self._sum.take(index + self._size)

    def _pull(self, lo, hi):
        """Recomputes every ancestor of the nodes [lo, hi), one slice per level."""
        s, m = self._sum, self._min
        while lo > 1:
            lo, hi = lo >> 1, ((hi - 1) >> 1) + 1
            np.add(s[2 * lo:2 * hi:2], s[2 * lo + 1:2 * hi:2], out=s[lo:hi])
            np.minimum(m[2 * lo:2 * hi:2], m[2 * lo + 1:2 * hi:2], out=m[lo:hi])

    def update(self, index, values, unique=False):
        """Sets leaves ``index`` to ``values`` (for a repeated index the last value wins; pass
        ``unique=True`` when there is none) and recomputes their ancestors."""
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), index.shape)
        if not index.size:
            return
        if not unique and index.size > 1:
            index, last = np.unique(index[::-1], return_index=True)
            values = values[::-1][last]
        node = index + self._size
        s, m = self._sum, self._min
        s[node] = values
        m[node] = np.where(values > 0, values, np.inf)  # a 0 leaf holds nothing, as in load()
        lo, hi = int(node.min()), int(node.max()) + 1
        if hi - lo == len(node):  # distinct and contiguous
            return self._pull(lo, hi)
        for _ in range(self._depth - self._top):
            node >>= 1
            left = node << 1
            right = left + 1
            s[node] = s.take(left) + s.take(right)
            m[node] = np.minimum(m.take(left), m.take(right))
        top = 1 << self._top
        self._pull(top, 2 * top)

    def find(self, mass):
        """For each ``mass`` in [0, total): the first leaf whose inclusive prefix sum is larger
        (``np.searchsorted(np.cumsum(leaves), mass, side="right")``)."""
        top = 1 << self._top
        prefix = np.cumsum(self._sum[top:2 * top])
        j = np.minimum(np.searchsorted(prefix, mass, side="right"), top - 1)
        mass = np.asarray(mass, dtype=np.float64) - np.where(j > 0, prefix.take(j - 1), 0.0)
        node = j + top
        for _ in range(self._depth - self._top):
            node <<= 1
            left_sum = self._sum.take(node)
            go_right = mass >= left_sum
            np.subtract(mass, left_sum, out=mass, where=go_right)
            node += go_right
        return node - self._size

    def load(self, leaves):
        """Sets every leaf at once (O(capacity))."""
        leaves = np.asarray(leaves, dtype=np.float64)
        self._sum[:] = 0.0
        self._min[:] = np.inf
        self._sum[self._size:self._size + self.capacity] = leaves
        self._min[self._size:self._size + self.capacity] = np.where(leaves > 0, leaves, np.inf)  # 0: never written
        self._pull(self._size, 2 * self._size)


class PrioritizedSampler(Sampler):
    """Prioritized experience replay (Schaul et al., 2015) on a NumPy sum-tree.

    An item of priority ``p`` is stored as ``(p + eps) ** alpha`` and drawn with probability
    ``P(i)`` proportional to it; the sample's ``"priority_weight"`` is the importance weight
    ``w_i = (N * P(i)) ** -beta / max_j w_j``, the max over the items stored, which is
    ``(stored_i / min_j stored_j) ** -beta`` (torchrl's normalization). New items get the largest
    priority given so far (1.0 before any). Priorities must be finite and non-negative.

    ``reduction`` ("max", "min", "mean" or "median") turns the priorities of an item with more
    than one value (a stored trajectory) into one. With ``max_priority_within_buffer=True`` a new
    item gets the largest priority among the items stored (recomputed when that item's priority
    changes or it is overwritten) instead of the largest ever given.

    ``alpha`` and ``beta`` can be set (a parameter scheduler does); a new ``alpha`` applies to
    the priorities written afterwards, as in torchrl. Both are kept as floats (a 0-d tensor is
    accepted). Unlike torchrl, the trees hold float64 (``dtype`` is accepted and ignored).
    Positions beyond ``max_capacity`` (a storage larger
    than the sampler) grow the trees instead of failing.
    """

    _REDUCTIONS = {"max": np.max, "min": np.min, "mean": np.mean, "median": np.median}

    def __init__(self, max_capacity, alpha, beta, eps=1e-8, dtype=None, reduction="max",
                 max_priority_within_buffer=False, device=None):
        if reduction not in self._REDUCTIONS:
            raise ValueError(f"PrioritizedSampler: reduction must be one of {sorted(self._REDUCTIONS)}, got "
                             f"reduction={reduction!r}")
        self.reduction = reduction
        self._max_priority_within_buffer = bool(max_priority_within_buffer)
        if device is not None and str(getattr(device, "type", device)).split(":")[0] != "cpu":
            raise NotImplementedError(f"PrioritizedSampler: device={device!r}: rlpipe keeps its priority trees on the "
                                      "CPU (device='cpu' or None); the samples themselves stay on the storage's device")
        self.device = _device.CPU
        if isinstance(max_capacity, bool) or not isinstance(max_capacity, numbers.Integral) or max_capacity <= 0:
            raise ValueError("PrioritizedSampler: max_capacity must be a positive int, "
                             f"got max_capacity={max_capacity!r}")
        self._alpha = _check_number("alpha", alpha)
        self.beta = beta
        self._eps = _check_number("eps", eps)
        self._tree = SumMinTree(max_capacity)
        self._top = None
        self._max_at = None  # where the max priority is (max_priority_within_buffer)

    @property
    def max_capacity(self):
        return self._tree.capacity

    _max_capacity = max_capacity  # torchrl's attribute name

    @property
    def _max_priority(self):
        """(the largest priority given, where it was written), (None, None) before any: torchrl's
        attribute."""
        return (self._top, self._max_at)

    @property
    def _sum_tree(self):
        """The tree of stored priorities, ``(p + eps) ** alpha`` (``_sum_tree[i]``,
        ``_sum_tree.query(start, end)``), as torchrl's attribute."""
        return self._tree

    @property
    def alpha(self):
        return self._alpha

    @alpha.setter
    def alpha(self, value):
        self._alpha = _check_number("alpha", value)

    @property
    def beta(self):
        return self._beta

    @beta.setter
    def beta(self, value):
        self._beta = _check_number("beta", value)

    @property
    def eps(self):
        return self._eps

    @property
    def default_priority(self):
        """The priority a new item gets: the largest given so far, or 1.0."""
        return 1.0 if self._top is None else self._top

    def _empty(self):
        self._tree = SumMinTree(self._tree.capacity)
        self._top = None
        self._max_at = None

    def _check_index(self, index):
        if index.size and index.min() < 0:
            raise ValueError(f"PrioritizedSampler: index {index.min()} is negative")

    def _grow(self, index):
        """Widens the trees to hold the positions ``index`` (a storage larger than max_capacity)."""
        top = int(index.max()) + 1 if index.size else 0
        if top > self._tree.capacity:
            leaves = self._tree.leaves()
            self._tree = SumMinTree(max(top, 2 * self._tree.capacity))
            self._tree.load(np.concatenate([leaves, np.zeros(self._tree.capacity - len(leaves))]))

    def _cover(self, n):
        """Gives the default priority to the stored items this sampler was never told of (another
        buffer wrote them into a shared storage, or the storage was loaded before this sampler
        existed), as torchrl 0.14 does instead of failing."""
        index = np.arange(n, dtype=np.int64)
        self._grow(index)
        unseen = index[self._tree.leaves(index) == 0]
        if unseen.size:
            self._set(unseen, np.full(unseen.shape, self.default_priority), unique=True)

    def extend(self, index):
        self._grow(index)
        if self._max_priority_within_buffer and self._max_at is not None and np.isin(self._max_at, index):
            self._recompute_max(exclude=index)
        self._set(index, np.full(index.shape, self.default_priority), unique=True)

    def _recompute_max(self, exclude=()):
        """The largest priority among the stored items (not counting positions ``exclude``)."""
        leaves = self._tree.leaves()
        leaves[np.asarray(exclude, dtype=np.int64)] = 0
        if not (leaves > 0).any():
            self._top = self._max_at = None
            return
        at = int(np.argmax(leaves))
        self._top = max(float(leaves[at]) ** (1.0 / self._alpha) - self._eps, 0.0) if self._alpha else \
            self._top
        self._max_at = at

    def checked(self, index, priority, what="update_priority"):
        """``(index, priority)`` as flat arrays, after checking them; raises ValueError/TypeError
        naming the bad value."""
        index = as_index_array(index, what)
        if isinstance(priority, Tensor):
            priority = priority.detach().cpu()._data
        try:
            priority = np.asarray(priority, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{what}: priority must be a number or an array of numbers, got {priority!r}") from None
        if priority.size == 1:
            priority = np.full(index.shape, priority.reshape(()))
        elif priority.size != index.size:
            raise ValueError(f"{what}: got {priority.size} priorities (shape {list(priority.shape)}) for "
                             f"{index.size} indices; expected one priority per index, or a single one")
        priority = priority.reshape(-1)
        bad = ~np.isfinite(priority) | (priority < 0) | (priority + self._eps <= 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{what}: priorities must be finite and >= 0 (> 0 when eps=0), got priority="
                             f"{float(priority[i])!r} for index {index[i]}")
        self._check_index(index)
        return index, priority

    def update_priority(self, index, priority):
        """Sets the priorities at ``index``; an item with several values (``[B, T]`` priorities
        for ``B`` indices) is reduced by ``reduction``."""
        index_array = as_index_array(index, "update_priority")
        if isinstance(priority, Tensor):
            priority = priority.detach().cpu()._data
        priority = np.asarray(priority)
        if priority.ndim > 1 and priority.shape[0] == index_array.size and priority.size != index_array.size:
            priority = self._REDUCTIONS[self.reduction](priority.reshape(index_array.size, -1), axis=1)
        index, priority = self.checked(index_array, priority)
        self._grow(index)
        self._set(index, priority)

    def _set(self, index, priority, unique=False):
        if not index.size:
            return
        top = float(priority.max())
        at = int(index[priority == top].min())  # among equal priorities, the lowest position (torchrl's argmax)
        was_max = self._max_at is not None and np.isin(self._max_at, index)
        if self._top is None or top > self._top or (
                self._max_priority_within_buffer and top == self._top and at < self._max_at):
            self._top, self._max_at = top, at
        self._tree.update(index, (priority + self._eps) ** self._alpha, unique=unique)
        if self._max_priority_within_buffer and was_max and self._alpha:
            self._recompute_max()

    def _sample(self, storage, batch_size):
        n = len(storage)
        if n == 0:
            raise empty_storage_error()
        self._cover(n)
        total, smallest = self._tree.total, self._tree.min
        if not total > 0 or not smallest > 0:
            raise RuntimeError(f"PrioritizedSampler: the stored items have no priorities (sum {total}, min "
                               f"{smallest}); items must be written through the buffer that owns this sampler")
        index = self._tree.find(self._uniform(batch_size) * total)
        np.minimum(index, n - 1, out=index)  # rounding can step past the last item
        weight = (self._tree.leaves(index) / smallest) ** -self._beta
        return index, {"priority_weight": weight.astype(np.float32)}

    def state_dict(self):
        return {"type": type(self).__name__, "max_capacity": self._tree.capacity, "alpha": self._alpha,
                "beta": self._beta, "eps": self._eps, "max_priority": self._top, "max_at": self._max_at,
                "priorities": self._tree.leaves()}

    def _load_plan(self, state, stored=None):
        super()._load_plan(state)
        try:
            if state["max_capacity"] != self._tree.capacity:
                raise ValueError(f"max_capacity {state['max_capacity']}, this sampler's is {self._tree.capacity}")
            alpha, eps = _check_number("alpha", state["alpha"]), _check_number("eps", state["eps"])
            beta = _check_number("beta", state["beta"])
            top = state["max_priority"]
            top = None if top is None else _check_number("max_priority", top)
            max_at = state.get("max_at")
            if max_at is not None and (isinstance(max_at, bool) or not isinstance(max_at, numbers.Integral)
                                       or not 0 <= max_at < self._tree.capacity):
                raise ValueError(f"max_at must be None or a position in [0, {self._tree.capacity}), got {max_at!r}")
            leaves = np.array(state["priorities"], dtype=np.float64)
            if leaves.shape != (self._tree.capacity,) or not (np.isfinite(leaves) & (leaves >= 0)).all():
                raise ValueError(f"priorities must be {self._tree.capacity} finite non-negative numbers")
            if stored is not None and not ((leaves[:stored] > 0).all() and (leaves[stored:] == 0).all()):
                raise ValueError(f"the storage holds {stored} items, so the priorities must be > 0 on the first "
                                 f"{stored} slots and 0 on the others (no item was written there)")
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"load_state_dict: bad PrioritizedSampler state ({e})") from None

        def apply():  # alpha and eps come with the priorities they produced, as torchrl's loads
            self._alpha, self._eps, self._beta, self._top, self._max_at = alpha, eps, beta, top, max_at
            self._tree.load(leaves)
        return apply

    def __repr__(self):
        return f"{type(self).__name__}(max_capacity={self._tree.capacity}, alpha={self._alpha}, beta={self._beta}, " \
               f"eps={self._eps})"


def _as_flat_array(value):
    array = value.detach().cpu()._data if isinstance(value, Tensor) else np.asarray(value)
    return array.reshape(len(array), -1) if array.ndim else array.reshape(1, 1)


def _check_span(span):
    """torchrl's ``span`` as a (left, right) pair of bools or non-negative ints."""
    pair = (span, span) if isinstance(span, (bool, numbers.Integral)) else tuple(span) if isinstance(
        span, (tuple, list)) else None
    if pair is None or len(pair) != 2 or not all(isinstance(v, (bool, numbers.Integral)) and v >= 0 for v in pair):
        raise ValueError(f"SliceSampler: span must be a bool, a non-negative int, or a pair of them (left, right), "
                         f"got span={span!r}")
    return tuple(v if isinstance(v, bool) else int(v) for v in pair)


def _span_steps(span, seq_length):
    """How many steps a slice of ``seq_length`` may hang over one end (0 without a span)."""
    if span is True:
        return seq_length - 1
    if span > seq_length - 1:
        raise ValueError(f"The right and left span must be strictly lower than the sequence length, got span={span} "
                         f"for slices of {seq_length} steps")
    return int(span)


class SliceSampler(Sampler):
    """Samples ``num_slices`` contiguous slices of ``slice_len`` steps (give one of the two; the
    other is ``batch_size`` divided by it), each from one trajectory, as torchrl's.

    Trajectories are the runs of equal ``traj_key`` values in storage order when that entry is
    stored; otherwise they end where ``end_key`` (default ``("next", "done")``) is set and at
    the last item written (the one before the write cursor once the storage is full). ``ends``
    (a bool tensor) or ``trajectories`` (ids) given at construction fix the trajectories once
    (they need ``cache_values=True``, as in torchrl); ``cache_values=True`` otherwise keeps them
    until the next write.

    Trajectories shorter than the slice are skipped with ``strict_length=True`` (a
    ``RuntimeError`` when none is long enough); otherwise their slice is the whole trajectory,
    so the sample is shorter than ``batch_size``. The info holds ``truncated_key`` (``True`` on
    the last step of every slice), the matching ``done`` (stored done or truncated) and
    ``terminated`` (stored, or False), each ``[N, 1]``; ``truncated_key=None`` leaves them out.

    A trajectory that runs past the end of a full storage on to position 0 is one trajectory,
    as in torchrl.

    ``span`` (a bool or int, or a pair of them for the left and right ends; torchrl's) lets a
    slice hang over the start or the end of its trajectory; the part outside is cut off, so such
    slices are shorter. On the left, by up to ``slice_len - 1`` steps (True) or ``k`` steps (an
    int ``k``); on the right, as torchrl counts it, until a single step is left (True) or
    ``k + 1`` steps are (an int ``k``); an int must be smaller than the slice length. With a right span,
    trajectories shorter than the slice are sampled even with ``strict_length=True``. Unlike
    torchrl, a slice always keeps at least one step (torchrl can draw an empty slice with
    ``span=True``).

    When the stored items hold ``init_key`` (default ``"is_init"``), the sample's ``init_key`` is
    also True at the first step of every slice, so a recurrent module splitting on it treats the
    slices as separate sequences (torchrl's). ``pad_output=True`` (with ``strict_length=False``)
    pads every slice to ``slice_len`` steps, repeating its last real step, whenever a stored
    trajectory is shorter than that, and adds ``("collector", "mask")`` (``[N]`` bools, False on
    the padding); ``truncated`` then sits on each slice's last real step.

    Differences from torchrl: ``fragmented``, ``end_keys`` and ``use_gpu`` are not supported
    (``NotImplementedError`` when set).
    """

    def __init__(self, *, num_slices=None, slice_len=None, end_key=None, traj_key=None, ends=None,
                 trajectories=None, cache_values=False, truncated_key=("next", "truncated"), strict_length=True,
                 compile=False, span=False, use_gpu=False, pad_output=False, fragmented=False, end_keys=None,
                 step_key="step_count", init_key="is_init"):
        if (num_slices is None) == (slice_len is None):
            raise TypeError("Either num_slices or slice_len must be provided (and only one of them), got "
                            f"num_slices={num_slices!r}, slice_len={slice_len!r}")
        for name, value in (("num_slices", num_slices), ("slice_len", slice_len)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0):
                raise ValueError(f"SliceSampler: {name} must be a positive int, got {name}={value!r}")
        self.span = _check_span(span)
        if pad_output and strict_length:
            raise ValueError("pad_output=True is incompatible with strict_length=True: with strict lengths every slice "
                             "is full, there is nothing to pad; set strict_length=False")
        self.pad_output = bool(pad_output)
        self.init_key = init_key
        for name, value in (("use_gpu", use_gpu),
                            ("fragmented", fragmented), ("end_keys", end_keys)):
            if value not in (False, None, (False, False)):
                raise NotImplementedError(f"SliceSampler: {name}={value!r} is not supported by rlpipe")
        if (ends is not None or trajectories is not None) and (traj_key is not None or end_key is not None):
            raise RuntimeError("`trajectories` and `end_key` or `traj_key` are exclusive arguments.")
        if ends is not None and trajectories is not None:
            raise RuntimeError("trajectories and ends are exclusive arguments.")
        if (ends is not None or trajectories is not None) and not cache_values:
            raise RuntimeError(f"To be used, {'ends' if ends is not None else 'trajectories'} requires "
                               "`cache_values` to be set to `True`.")
        self.num_slices, self.slice_len = num_slices, slice_len
        fixed = ends is not None or trajectories is not None
        # which entry marks the trajectories, as torchrl 0.14: the traj_key given, else the end_key
        # given, else found on the first sample (("collector", "traj_ids"), then "episode", then
        # the end key)
        self._traj_key_auto = traj_key is None and end_key is None and not fixed
        self._fetch_traj = traj_key is not None or self._traj_key_auto
        self.end_key = ("next", "done") if end_key is None else end_key
        self.traj_key = traj_key
        self.truncated_key = truncated_key
        self.strict_length = strict_length
        self.cache_values = cache_values
        self.compile = compile
        self._cache = {}
        if ends is not None:
            self._cache["static"] = self._from_ends(_as_flat_array(ends)[:, 0].astype(bool), len(_as_flat_array(ends)))
        elif trajectories is not None:
            self._cache["static"] = self._from_ids(_as_flat_array(trajectories)[:, 0])

    # ---- trajectories ---------------------------------------------------------------------------------
    @staticmethod
    def _from_ends(end, n):
        """(start, length) of the trajectories ending at ``end`` (bools) among the first ``n``."""
        stop = np.flatnonzero(end[:n])
        start = np.concatenate([[0], stop[:-1] + 1]) if stop.size else np.zeros(0, np.int64)
        return start.astype(np.int64), (stop - start + 1).astype(np.int64)

    @staticmethod
    def _from_ids(ids):
        change = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        start = np.concatenate([[0], change]).astype(np.int64)
        return start, np.diff(np.concatenate([start, [len(ids)]])).astype(np.int64)

    def _trajectories(self, storage):
        if "static" in self._cache:
            return self._cache["static"]
        if "found" in self._cache:
            return self._cache["found"]
        n = len(storage)
        stored = storage[:]
        if not isinstance(stored, TensorDict):
            raise RuntimeError("Could not get a tensordict out of the storage, which is required for SliceSampler to "
                               f"compute the trajectories (it holds {type(stored).__name__}s)")
        # a full storage is circular: a trajectory may run from its end on to position 0, and the
        # newest item ends its (possibly unfinished) trajectory (what followed it was overwritten)
        full = n == storage.max_size
        cursor = (storage._cursor - 1) % storage.max_size if full else None
        if self._traj_key_auto:
            self._resolve_traj_key(stored)
        ids = stored.get(self.traj_key, None) if self._fetch_traj and self.traj_key is not None else None
        if ids is not None:
            flags = end_flags(trajectory=_as_flat_array(ids)[:, 0], at_capacity=full, cursor=cursor)
        else:
            done = stored.get(self.end_key, None)
            if done is None:
                raise KeyError(f"SliceSampler: neither the trajectory key {self.traj_key!r} nor the end key "
                               f"{self.end_key!r} is stored (keys: {list(stored.keys(True))})")
            done = _as_flat_array(done)
            if done.shape[1] > 1:
                raise RuntimeError(f"Expected the end-of-trajectory signal to be 1-dimensional (one value per item), "
                                   f"got {self.end_key!r} of shape {list(done.shape)}")
            flags = end_flags(end=done[:, 0], at_capacity=full, cursor=cursor)
        start, _, length = start_stop(flags)
        found = start[:, 0], length
        if self.cache_values:
            self._cache["found"] = found
        return found

    def _resolve_traj_key(self, stored):
        """Picks the trajectory entry on the first sample, as torchrl 0.14: ("collector",
        "traj_ids") when stored, else "episode", else the end key."""
        self._traj_key_auto = False
        keys = set(stored.keys(True))
        for candidate in (("collector", "traj_ids"), "episode"):
            if candidate in keys:
                self.traj_key, self._fetch_traj = candidate, True
                return
        self._fetch_traj = False

    def extend(self, index):
        self._cache.pop("found", None)

    def _empty(self):
        self._cache.pop("found", None)

    # ---- sampling -------------------------------------------------------------------------------------
    def _adjusted_batch_size(self, batch_size):
        """(steps per slice, number of slices)."""
        if self.num_slices is not None:
            if batch_size % self.num_slices:
                raise RuntimeError(f"The batch-size must be divisible by the number of slices, got "
                                   f"batch_size={batch_size} and num_slices={self.num_slices}.")
            return batch_size // self.num_slices, self.num_slices
        if batch_size % self.slice_len:
            raise RuntimeError(f"The batch-size must be divisible by the slice length, got batch_size={batch_size} "
                               f"and slice_len={self.slice_len}.")
        return self.slice_len, batch_size // self.slice_len

    def _eligible(self, storage, seq_length):
        """(start, length) of the trajectories a slice of ``seq_length`` may come from."""
        start, length = self._trajectories(storage)
        if not length.size:
            raise RuntimeError("SliceSampler: the storage holds no trajectory")
        if self.strict_length and not self.span[1]:
            keep = length >= seq_length
            if not keep.any():
                raise RuntimeError(f"Did not find a single trajectory with sufficient length (length range: "
                                   f"{length.min()} - {length.max()} / required={seq_length}).")
            start, length = start[keep], length[keep]
        return start, length

    def _sample(self, storage, batch_size):
        if len(storage) == 0:
            raise empty_storage_error()
        seq_length, num_slices = self._adjusted_batch_size(batch_size)
        start, length = self._eligible(storage, seq_length)
        return self._slices(storage, start, length, self._randint(len(length), num_slices), seq_length)

    def _slices(self, storage, start, length, chosen, seq_length):
        """The positions of one slice per chosen trajectory, at a uniform offset inside it (or
        hanging over its ends by up to the span, then cut to it)."""
        size = length[chosen]
        if not any(self.span):
            steps = np.minimum(size, seq_length)
            offset = np.floor(self._uniform(len(chosen)) * (size - steps + 1)).astype(np.int64)
        else:
            low = -_span_steps(self.span[0], seq_length)  # the first step of a slice, relative to its trajectory
            right = self.span[1]
            # the last start, as torchrl's: a full slice without a right span; with span[1]=k, one that keeps
            # k + 1 steps; with span[1]=True, the trajectory's last step (torchrl: one past it, an empty slice)
            high = size - seq_length if not right else size - 1 if right is True else size - 1 - _span_steps(
                right, seq_length)
            high = np.minimum(np.maximum(high, low), size - 1)
            offset = np.floor(self._uniform(len(chosen)) * (high - low + 1)).astype(np.int64) + low
            stop = np.minimum(offset + seq_length, size)
            offset = np.maximum(offset, 0)
            steps = stop - offset
        first = start[chosen] + offset
        return self._positions(storage, first, steps, seq_length, pad=self.pad_output and (length < seq_length).any())

    def _positions(self, storage, first, steps, seq_length, pad=False):
        """(index, info) of slices of ``steps`` steps from ``first``; padded to ``seq_length`` with
        their last step repeated when ``pad``."""
        if pad:
            t = np.arange(seq_length)
            real = t[None, :] < steps[:, None]
            index = (first[:, None] + np.minimum(t[None, :], steps[:, None] - 1)).reshape(-1)
            begins = np.arange(len(steps)) * seq_length
            last, mask = begins + steps - 1, real.reshape(-1)
        else:
            ends = np.cumsum(steps)
            index = np.repeat(first - (ends - steps), steps) + np.arange(int(ends[-1]) if len(ends) else 0)
            begins, last, mask = ends - steps, ends - 1, None
        index %= len(storage)  # a slice may wrap around a full storage
        return index, self._info(storage, index, last, begins, mask)

    def _info(self, storage, index, last, begins=None, mask=None):
        """The info of slices read at ``index``: truncated/done/terminated (``last``: each slice's
        last real step), the slice starts marked in ``init_key`` (``begins``), the padding mask."""
        info = {} if mask is None else {("collector", "mask"): mask}
        stored = None
        if self.init_key is not None and begins is not None:
            stored = storage._gather(index)
            init = stored.get(self.init_key, None) if isinstance(stored, TensorDict) else None
            if init is not None:  # never made up: only where the storage tracks episode starts
                init = init.detach().cpu()._data.astype(bool)
                marker = np.zeros_like(init)
                marker[begins] = True
                info[self.init_key] = init | marker
        if self.truncated_key is None:
            return info
        key = self.truncated_key if isinstance(self.truncated_key, tuple) else (self.truncated_key,)
        truncated = np.zeros((len(index), 1), dtype=bool)
        truncated[last] = True
        stored = storage._gather(index) if stored is None else stored

        def entry(name):
            value = stored.get(key[:-1] + (name,), None) if isinstance(stored, TensorDict) else None
            return None if value is None else _as_flat_array(value)[:, :1].astype(bool)

        done, terminated = entry("done"), entry("terminated")

        def named(last):  # a one-part key is a plain string, as torchrl's info keys
            full = key[:-1] + (last,)
            return full[0] if len(full) == 1 else full
        info.update({named(key[-1]): truncated, named("done"): truncated if done is None else done | truncated,
                     named("terminated"): np.zeros_like(truncated) if terminated is None else terminated})
        return info

    def __repr__(self):
        return (f"{type(self).__name__}(num_slices={self.num_slices}, slice_len={self.slice_len}, "
                f"end_key={self.end_key}, traj_key={self.traj_key}, truncated_key={self.truncated_key}, "
                f"strict_length={self.strict_length})")


class SliceSamplerWithoutReplacement(SliceSampler, SamplerWithoutReplacement):
    """A SliceSampler that draws each trajectory at most once per pass: the trajectories are
    walked in a random permutation (in order with ``shuffle=False``), ``num_slices`` per sample,
    one slice at a uniform offset in each; a new pass starts when they are used up (``ran_out``
    is True after the sample that used them up). The last sample of a pass is shorter unless
    ``drop_last``. A change of the trajectories (a write) starts a new pass. It is a
    ``SamplerWithoutReplacement`` too, as torchrl's (its state is the trajectory order)."""

    def __init__(self, *, drop_last=False, shuffle=True, **kwargs):
        SliceSampler.__init__(self, **kwargs)
        self.drop_last, self.shuffle = bool(drop_last), bool(shuffle)
        self._order, self._seen, self._ran_out = None, None, False
        self._perm, self.len_storage = None, 0  # SamplerWithoutReplacement's position state: unused here

    def state_dict(self):
        return Sampler.state_dict(self)

    def _load_plan(self, state, stored=None):
        return Sampler._load_plan(self, state, stored)

    @property
    def ran_out(self):
        return self._ran_out

    @ran_out.setter
    def ran_out(self, value):
        self._ran_out = bool(value)

    def _empty(self):
        super()._empty()
        self._order, self._seen, self._ran_out = None, None, False

    def _sample(self, storage, batch_size):
        if len(storage) == 0:
            raise empty_storage_error()
        seq_length, num_slices = self._adjusted_batch_size(batch_size)
        start, length = self._eligible(storage, seq_length)
        key = (start.tobytes(), length.tobytes())
        if self._order is None or self._seen != key:
            self._order, self._seen = self._new_order(len(length)), key
        if self.drop_last and len(self._order) < num_slices:
            raise ValueError(f"SliceSamplerWithoutReplacement(drop_last=True): {num_slices} slices asked, "
                             f"{len(length)} trajectories stored")
        chosen, self._order = self._order[:num_slices], self._order[num_slices:]
        self._ran_out = len(self._order) == 0 or self.drop_last and len(self._order) < num_slices
        if self._ran_out:
            self._order = self._new_order(len(length))
        return self._slices(storage, start, length, chosen, seq_length)

    def _new_order(self, n):
        return self._randperm(n) if self.shuffle else np.arange(n, dtype=np.int64)


class PrioritizedSliceSampler(SliceSampler, PrioritizedSampler):
    """Slices whose start is drawn by priority, as torchrl's: the start positions are sampled
    from the priorities of the stored items, among the positions a slice of the asked length can
    start from (at least that many steps left in its trajectory; with ``strict_length=False`` also
    the first step of a shorter trajectory, whose slice is then the whole trajectory). Every step
    of a slice gets the importance weight of its start, ``(p_start / p_min) ** -beta``.
    Priorities are written and updated per item, as with ``PrioritizedSampler``."""

    def __init__(self, max_capacity=None, alpha=None, beta=None, eps=1e-8, dtype=None, reduction="max",
                 max_priority_within_buffer=False, **slice_kwargs):
        if max_capacity is None or alpha is None or beta is None:
            raise TypeError(f"PrioritizedSliceSampler needs max_capacity, alpha and beta, got "
                            f"max_capacity={max_capacity!r}, alpha={alpha!r}, beta={beta!r}")
        SliceSampler.__init__(self, **slice_kwargs)
        if self.span[0]:  # starts are drawn from the priorities of stored positions: none lies before a trajectory
            warnings.warn(f"Left spanning is disabled for {type(self).__name__} and will be automatically turned off "
                          f"(span={self.span} becomes {(0, self.span[1])}).", UserWarning, stacklevel=2)
            self.span = (0, self.span[1])
        PrioritizedSampler.__init__(self, max_capacity, alpha, beta, eps=eps, dtype=dtype, reduction=reduction,
                                    max_priority_within_buffer=max_priority_within_buffer)

    def extend(self, index):
        SliceSampler.extend(self, index)
        PrioritizedSampler.extend(self, index)

    def _empty(self):
        SliceSampler._empty(self)
        PrioritizedSampler._empty(self)

    def _sample(self, storage, batch_size):
        n = len(storage)
        if n == 0:
            raise empty_storage_error()
        seq_length, num_slices = self._adjusted_batch_size(batch_size)
        start, length = self._eligible(storage, seq_length)
        self._cover(n)
        left = np.zeros(n, dtype=np.int64)  # steps from each position to its trajectory's end, included
        for first, size in zip(start, length):
            left[(first + np.arange(size)) % n] = np.arange(size, 0, -1)
        # a right span lets a slice run past its trajectory's end (torchrl: by at most span[1] steps; with
        # span[1]=True any position but a trajectory's last one may start a slice)
        right = self.span[1]
        need = seq_length if not right else min(seq_length, 2) if right is True else seq_length - _span_steps(
            right, seq_length)
        can_start = left >= need
        if not self.strict_length:
            can_start[start % n] = True
        priority = self._tree.leaves()[:n] * can_start
        total = priority.sum()
        if not total > 0:
            raise RuntimeError(f"PrioritizedSliceSampler: no start position with a positive priority for slices of "
                               f"{seq_length} steps")
        anchor = np.searchsorted(np.cumsum(priority), self._uniform(num_slices) * total, side="right")
        anchor = np.minimum(anchor, n - 1)
        steps = np.minimum(left[anchor], seq_length)
        ends = np.cumsum(steps)
        index = (np.repeat(anchor - (ends - steps), steps) + np.arange(int(ends[-1]))) % n
        info = self._info(storage, index, ends - 1, ends - steps)
        weight = (priority[anchor] / priority[can_start].min()) ** -self._beta
        info["priority_weight"] = np.repeat(weight, steps).astype(np.float32)
        return index, info

    def __repr__(self):
        return (f"{type(self).__name__}(max_capacity={self.max_capacity}, alpha={self._alpha}, beta={self._beta}, "
                f"num_slices={self.num_slices}, slice_len={self.slice_len}, strict_length={self.strict_length})")


def _freshness(staleness):
    """torchrl's default staleness weight, ``1 / (staleness + 1)``."""
    return 1.0 / (staleness + 1.0)


class StalenessAwareSampler(Sampler):
    """Samples by freshness, for asynchronous training where stored data comes from older policy
    versions (torchrl's): an item's staleness is ``consumer_version - policy_version`` (its
    ``version_key`` entry), items staler than ``max_staleness`` are never drawn (``-1``: no
    limit), and the others are drawn with probability proportional to
    ``staleness_weight_fn(staleness)`` (default ``1 / (staleness + 1)``; a callable taking and
    returning a float Tensor), without replacement when there are enough of them. The info holds
    ``"staleness"``. The training loop moves ``consumer_version`` on (``consumer_version = step``
    or ``increment_consumer_version()``)."""

    def __init__(self, max_staleness=-1, staleness_weight_fn=None, version_key="policy_version"):
        if staleness_weight_fn is not None and not callable(staleness_weight_fn):
            raise TypeError(f"StalenessAwareSampler: staleness_weight_fn must be callable, got "
                            f"{type(staleness_weight_fn).__name__}")
        self.max_staleness = max_staleness
        self._version_key = version_key
        self._weight_fn = staleness_weight_fn
        self._consumer_version = 0

    @property
    def consumer_version(self):
        return self._consumer_version

    @consumer_version.setter
    def consumer_version(self, value):
        self._consumer_version = value

    def increment_consumer_version(self):
        self._consumer_version += 1

    def _versions(self, storage, n):
        whole = getattr(storage, "_storage", None)
        stored = whole if isinstance(whole, TensorDict) else storage[:]
        versions = stored.get(self._version_key, None) if isinstance(stored, TensorDict) else None
        if versions is None:
            raise KeyError(f"Could not find key {self._version_key!r} in the replay buffer storage. Make sure data "
                           "written to the buffer contains this key (e.g. stamped by the PolicyVersion transform).")
        return _as_flat_array(versions)[:n, 0].astype(np.float64)

    def _weights(self, staleness):
        if self._weight_fn is None:
            return _freshness(staleness)
        weights = self._weight_fn(wrap(staleness.astype(np.float32)))
        return np.asarray(weights.detach().cpu()._data if isinstance(weights, Tensor) else weights, dtype=np.float64)

    def _sample(self, storage, batch_size):
        n = len(storage)
        if n == 0:
            raise empty_storage_error()
        staleness = self._consumer_version - self._versions(storage, n)
        valid = np.arange(n, dtype=np.int64)
        if self.max_staleness >= 0:
            valid = valid[staleness <= self.max_staleness]
            if not valid.size:
                raise RuntimeError(f"All {n} entries in the buffer exceed max_staleness={self.max_staleness} "
                                   f"(consumer_version={self._consumer_version}). Increase max_staleness or update "
                                   "the collector's policy weights more often.")
        weights = self._weights(staleness[valid])
        if weights.shape != valid.shape or not (np.isfinite(weights) & (weights >= 0)).all() or not weights.sum() > 0:
            raise ValueError("StalenessAwareSampler: staleness_weight_fn must return one finite, non-negative weight "
                             f"per item, not all zero; got {weights!r}")
        if batch_size > valid.size:  # with replacement: more draws than eligible items
            chosen = np.searchsorted(np.cumsum(weights), self._uniform(batch_size) * weights.sum(), side="right")
            chosen = np.minimum(chosen, valid.size - 1)
        else:  # without replacement: the largest u ** (1 / w) (Efraimidis-Spirakis)
            with np.errstate(divide="ignore"):
                keys = np.log(self._uniform(valid.size)) / weights
            chosen = np.argsort(-keys, kind="stable")[:batch_size]
        index = valid[chosen]
        return index, {"staleness": staleness[index].astype(np.float32)}

    def _empty(self):
        self._consumer_version = 0

    def state_dict(self):
        return {"type": type(self).__name__, "consumer_version": self._consumer_version,
                "max_staleness": self.max_staleness}

    def _load_plan(self, state, stored=None):
        if isinstance(state, dict) and "type" not in state:  # torchrl's keys only
            state = dict(state, type=type(self).__name__)
        super()._load_plan(state)
        try:
            version, max_staleness = int(state["consumer_version"]), int(state["max_staleness"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"load_state_dict: bad StalenessAwareSampler state ({e})") from None

        def apply():
            self._consumer_version, self.max_staleness = version, max_staleness
        return apply

    def __repr__(self):
        return f"{type(self).__name__}(consumer_version={self._consumer_version}, max_staleness={self.max_staleness})"


_WITHOUT_REPLACEMENT.update({RandomSampler: SamplerWithoutReplacement, SliceSampler: SliceSamplerWithoutReplacement})

ConsumingSampler = unavailable("ConsumingSampler", "consuming items after max_sample_count draws (with the "
                               "buffer's free list of slots) is not implemented", Sampler)
PromptGroupSampler = unavailable("PromptGroupSampler", "rlpipe has no LLM samplers", Sampler)
StreamingSliceSampler = unavailable("StreamingSliceSampler", "streaming slices are not implemented", Sampler)
SamplerEnsemble = unavailable("SamplerEnsemble", "ensembles of samplers are not implemented", Sampler)
