"""The sampler interface and the basic samplers (``samplers`` is their public home): the shared
index and number checks, the metaclass behind ``replacement=False``, ``Sampler``, ``RandomSampler``
and ``SamplerWithoutReplacement``.
"""
import math
import numbers

import numpy as np

from ... import _dtypes
from ... import random as _random
from ..._tensor import Tensor, wrap
from .._checkpoint import atomic_directory, load_state, save_state


EMPTY_STORAGE_ERROR = "Cannot sample from an empty storage."


def empty_storage_error(what="sample"):
    """The RuntimeError a sampler raises on a storage with no items (torchrl's text first)."""
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


def _as_flat_array(value):
    array = value.detach().cpu()._data if isinstance(value, Tensor) else np.asarray(value)
    return array.reshape(len(array), -1) if array.ndim else array.reshape(1, 1)


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
        """Whether the last sample used up a pass (always False with replacement)."""
        return False

    def _empty(self):
        """Forgets everything about the storage (``buffer.empty()``)."""

    def state_dict(self):
        """The sampler's state (empty for a stateless sampler)."""
        return {"type": type(self).__name__}

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()``, checked before anything changes."""
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
        """Restores what ``dumps`` wrote to the directory ``path``."""
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
        """Whether the last sample used up the current permutation."""
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
        """The permutation in progress and the settings."""
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
