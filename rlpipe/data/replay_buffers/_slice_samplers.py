"""The slice samplers (``samplers`` is their public home): ``SliceSampler``, which draws contiguous
slices of trajectories, ``SliceSamplerWithoutReplacement`` and ``PrioritizedSliceSampler``.
"""
import numbers
import warnings

import numpy as np

from ...tensordict import TensorDict, is_tensorclass
from ._prioritized_sampler import PrioritizedSampler
from ._sampler_base import Sampler, SamplerWithoutReplacement, _as_flat_array, empty_storage_error
from .utils import end_flags, start_stop


def _lanes(value, storage, key=None):
    """A stored per-item signal as a ``[rows, *inner]`` array (time first), one value per item."""
    array = _as_flat_array(value.reshape(-1, *value.shape[storage.ndim:]) if storage.ndim > 1 else value)
    if key is not None and array.shape[1] > 1:
        raise RuntimeError(f"Expected the end-of-trajectory signal to be 1-dimensional (one value per item), got "
                           f"{key!r} of shape {list(array.shape)}")
    return array[:, 0].reshape((-1,) + tuple(storage._inner))


def _flat(storage, time, lane):
    """Flat storage positions of time steps (wrapping around the rows written) in their lanes."""
    return (time % storage._len_along_dim0) * storage._row_items + lane


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
        """(start, length, lane) of the trajectories ending at ``end`` (bools) among the first ``n``."""
        stop = np.flatnonzero(end[:n])
        start = np.concatenate([[0], stop[:-1] + 1]) if stop.size else np.zeros(0, np.int64)
        return start.astype(np.int64), (stop - start + 1).astype(np.int64), np.zeros(len(start), np.int64)

    @staticmethod
    def _from_ids(ids):
        change = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        start = np.concatenate([[0], change]).astype(np.int64)
        return start, np.diff(np.concatenate([start, [len(ids)]])).astype(np.int64), np.zeros(len(start), np.int64)

    def _trajectories(self, storage):
        if "static" in self._cache:
            return self._cache["static"]
        if "found" in self._cache:
            return self._cache["found"]
        stored = storage[:]
        if is_tensorclass(stored):
            stored = stored._tensordict
        if not isinstance(stored, TensorDict):
            raise RuntimeError("Could not get a tensordict out of the storage, which is required for SliceSampler to "
                               f"compute the trajectories (it holds {type(stored).__name__}s)")
        # a full storage is circular: a trajectory may run from its end on to position 0, and the
        # newest item ends its (possibly unfinished) trajectory (what followed it was overwritten);
        # with ndim > 1, time runs along dim 0 and each item of a row (a lane) has its trajectories
        full = len(storage) == storage.max_size
        rows = storage._len_along_dim0
        cursor = (storage._cursor // storage._row_items - 1) % rows if full else None
        if self._traj_key_auto:
            self._resolve_traj_key(stored)
        ids = stored.get(self.traj_key, None) if self._fetch_traj and self.traj_key is not None else None
        if ids is not None:
            flags = end_flags(trajectory=_lanes(ids, storage), at_capacity=full, cursor=cursor)
        else:
            done = stored.get(self.end_key, None)
            if done is None:
                raise KeyError(f"SliceSampler: neither the trajectory key {self.traj_key!r} nor the end key "
                               f"{self.end_key!r} is stored (keys: {list(stored.keys(True))})")
            flags = end_flags(end=_lanes(done, storage, self.end_key), at_capacity=full, cursor=cursor)
        start, _, length = start_stop(flags)
        lane = np.ravel_multi_index(tuple(start[:, 1:].T), storage._inner) if storage.ndim > 1 else np.zeros_like(
            length)
        found = start[:, 0], length, lane
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
        """(start, length, lane) of the trajectories a slice of ``seq_length`` may come from."""
        start, length, lane = self._trajectories(storage)
        if not length.size:
            raise RuntimeError("SliceSampler: the storage holds no trajectory")
        if self.strict_length and not self.span[1]:
            keep = length >= seq_length
            if not keep.any():
                raise RuntimeError(f"Did not find a single trajectory with sufficient length (length range: "
                                   f"{length.min()} - {length.max()} / required={seq_length}).")
            start, length, lane = start[keep], length[keep], lane[keep]
        return start, length, lane

    def _sample(self, storage, batch_size):
        if len(storage) == 0:
            raise empty_storage_error()
        seq_length, num_slices = self._adjusted_batch_size(batch_size)
        start, length, lane = self._eligible(storage, seq_length)
        return self._slices(storage, (start, length, lane), self._randint(len(length), num_slices), seq_length)

    def _slices(self, storage, trajectories, chosen, seq_length):
        """The positions of one slice per chosen trajectory, at a uniform offset inside it (or
        hanging over its ends by up to the span, then cut to it)."""
        start, length, lane = trajectories
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
        return self._positions(storage, first, steps, seq_length, pad=self.pad_output and (length < seq_length).any(),
                               lane=lane[chosen])

    def _positions(self, storage, first, steps, seq_length, pad=False, lane=None):
        """(index, info) of slices of ``steps`` steps from time ``first`` in ``lane`` (ndim > 1);
        padded to ``seq_length`` with their last step repeated when ``pad``."""
        lane = np.zeros_like(first) if lane is None else lane
        if pad:
            t = np.arange(seq_length)
            real = t[None, :] < steps[:, None]
            index = _flat(storage, first[:, None] + np.minimum(t[None, :], steps[:, None] - 1), lane[:, None]
                          ).reshape(-1)
            begins = np.arange(len(steps)) * seq_length
            last, mask = begins + steps - 1, real.reshape(-1)
        else:
            ends = np.cumsum(steps)
            time = np.repeat(first - (ends - steps), steps) + np.arange(int(ends[-1]) if len(ends) else 0)
            index = _flat(storage, time, np.repeat(lane, steps))  # a slice may wrap around a full storage
            begins, last, mask = ends - steps, ends - 1, None
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
        """The sampler's settings (the trajectory order is rebuilt on the next sample)."""
        return Sampler.state_dict(self)

    def _load_plan(self, state, stored=None):
        return Sampler._load_plan(self, state, stored)

    @property
    def ran_out(self):
        """Whether the last sample used up the trajectories of this pass."""
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
        start, length, lane = self._eligible(storage, seq_length)
        key = (start.tobytes(), length.tobytes(), lane.tobytes())
        if self._order is None or self._seen != key:
            self._order, self._seen = self._new_order(len(length)), key
        if self.drop_last and len(self._order) < num_slices:
            raise ValueError(f"SliceSamplerWithoutReplacement(drop_last=True): {num_slices} slices asked, "
                             f"{len(length)} trajectories stored")
        chosen, self._order = self._order[:num_slices], self._order[num_slices:]
        self._ran_out = len(self._order) == 0 or self.drop_last and len(self._order) < num_slices
        if self._ran_out:
            self._order = self._new_order(len(length))
        return self._slices(storage, (start, length, lane), chosen, seq_length)

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
        start, length, lane = self._eligible(storage, seq_length)
        self._cover(n)
        left = np.zeros(n, dtype=np.int64)  # steps from each position to its trajectory's end, included
        for first, size, where in zip(start, length, lane):
            left[_flat(storage, first + np.arange(size), where)] = np.arange(size, 0, -1)
        # a right span lets a slice run past its trajectory's end (torchrl: by at most span[1] steps; with
        # span[1]=True any position but a trajectory's last one may start a slice)
        right = self.span[1]
        need = seq_length if not right else min(seq_length, 2) if right is True else seq_length - _span_steps(
            right, seq_length)
        can_start = left >= need
        if not self.strict_length:
            can_start[_flat(storage, start, lane)] = True
        priority = self._tree.leaves()[:n] * can_start
        total = priority.sum()
        if not total > 0:
            raise RuntimeError(f"PrioritizedSliceSampler: no start position with a positive priority for slices of "
                               f"{seq_length} steps")
        anchor = np.searchsorted(np.cumsum(priority), self._uniform(num_slices) * total, side="right")
        anchor = np.minimum(anchor, n - 1)
        steps = np.minimum(left[anchor], seq_length)
        ends = np.cumsum(steps)
        items = storage._row_items
        time = np.repeat(anchor // items - (ends - steps), steps) + np.arange(int(ends[-1]))
        index = _flat(storage, time, np.repeat(anchor % items, steps))
        info = self._info(storage, index, ends - 1, ends - steps)
        weight = (priority[anchor] / priority[can_start].min()) ** -self._beta
        info["priority_weight"] = np.repeat(weight, steps).astype(np.float32)
        return index, info

    def __repr__(self):
        return (f"{type(self).__name__}(max_capacity={self.max_capacity}, alpha={self._alpha}, beta={self._beta}, "
                f"num_slices={self.num_slices}, slice_len={self.slice_len}, strict_length={self.strict_length})")
