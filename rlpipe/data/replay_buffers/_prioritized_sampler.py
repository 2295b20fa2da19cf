"""Prioritized sampling (``samplers`` is its public home): the ``SumMinTree`` of priorities and
``PrioritizedSampler``.
"""
import numbers

import numpy as np

from ... import _device
from ..._tensor import Tensor
from ._sampler_base import Sampler, _check_number, as_index_array, empty_storage_error


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
        """The sum of all leaves."""
        return float(self._sum[1])

    @property
    def min(self):
        """The smallest leaf."""
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
        """How many positions the priority tree covers."""
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
        """The priority exponent (0: uniform sampling)."""
        return self._alpha

    @alpha.setter
    def alpha(self, value):
        self._alpha = _check_number("alpha", value)

    @property
    def beta(self):
        """The importance-weight exponent."""
        return self._beta

    @beta.setter
    def beta(self, value):
        self._beta = _check_number("beta", value)

    @property
    def eps(self):
        """The small number added to every priority so none is zero."""
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
        """The priorities and the sampler's settings, as plain arrays and numbers."""
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
