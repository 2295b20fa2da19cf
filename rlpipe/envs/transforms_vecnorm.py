"""torchrl 0.14's running normalizations ``VecNorm`` (the older one, with decayed sums) and
``VecNormV2`` (decayed moments with a bias correction), written against TensorDicts as torchrl's
(``step_protocol.py``, THE RULE).

Statistics are updated in place, so statistics in shared memory (``shared_td``/``shared_data``,
``build_td_for_shared_vecnorm``, or the tensors an ``EnvCreator`` shares) are one set for every
process that holds them; each update runs under ``lock`` (a ``multiprocessing.Lock`` by default).
Where rlpipe differs: ``VecNormV2(stateful=False)`` (statistics carried in the data) is not offered.
"""
import math
import multiprocessing as mp
import warnings
from collections import OrderedDict

from .. import _dtypes
from .._creation import tensor, zeros
from ..tensordict import TensorDict, unravel_key_to_tuple
from .specs import Bounded, Unbounded
from .step_protocol import REWARD
from .transformed_env import Compose, Transform, _key_str
from .transforms_tensors import _tolerant_call

__all__ = ["VecNorm", "VecNormV2"]

_SEP = ".-|-."


def _spec_keys(spec):
    return {unravel_key_to_tuple(k) for k in spec.keys(True, True)}


def _unbounded(spec, cast_int=False):
    """A Bounded spec as Unbounded (normalized values have no bounds); integers as float32 with ``cast_int``."""
    dtype = _dtypes.float32 if cast_int and not spec.dtype.is_floating_point else spec.dtype
    if isinstance(spec, Bounded) or dtype is not spec.dtype:
        return Unbounded(shape=spec.shape, dtype=dtype, device=spec.device)
    return spec


def _sum_left(value, dest):
    while value.ndim > dest.ndim:
        value = value.sum(0)
    return value


class _RunningNorm(Transform):
    """What both VecNorms share: keys, freezing, the spec of a normalized entry, ``loc``/``scale``
    as TensorDicts, ``denorm``, ``to_observation_norm`` and the state dict."""

    # ObservationNorm, which transforms.py defines and hands over here: it imports this module, so
    # importing it back would make an import circle
    _observation_norm = None

    def _check_keys(self, lock):
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(f"{type(self).__name__}: in_keys and out_keys must have the same length, got "
                             f"{len(self.in_keys)} and {len(self.out_keys)}")
        self.frozen = False
        self.lock = mp.Lock() if lock is None else lock

    def __getstate__(self):
        # a multiprocessing lock pickles only when a process is spawned: copies get a lock of their own
        state = self.__dict__.copy()
        state["lock"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.lock = mp.Lock()

    def freeze(self):
        """Stops the statistics from being updated; returns self."""
        self.frozen = True
        return self

    def unfreeze(self):
        self.frozen = False
        return self

    def frozen_copy(self):
        """A copy that normalizes with the current statistics and never updates them."""
        if not self._initialized():
            raise RuntimeError("Make sure the VecNorm has been initialized before creating a frozen copy.")
        return self.clone().freeze()

    @property
    def standard_normal(self):
        return True

    @property
    def loc(self):
        return self._get_loc_scale()[0]

    @property
    def scale(self):
        return self._get_loc_scale()[1]

    def _reset(self, tensordict, tensordict_reset):
        return _tolerant_call(self, tensordict_reset, "_step")  # (reset observations update the statistics)

    def _cast_int(self):
        return False

    def transform_observation_spec(self, observation_spec):
        keys = _spec_keys(observation_spec)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key == REWARD and out_key != REWARD:
                raise NotImplementedError(f"{type(self).__name__}: the reward can only be normalized in place on an "
                                          f"rlpipe env (one reward), got out_key {_key_str(out_key)!r}")
            if in_key in keys:
                observation_spec[out_key] = _unbounded(observation_spec[in_key], self._cast_int())
        return observation_spec

    def denorm(self, tensordict):
        """The values before normalization: each ``out_keys`` entry of (a shallow copy of)
        ``tensordict`` times ``scale`` plus ``loc``, written to the matching ``in_keys`` entry."""
        if not self._initialized():
            raise RuntimeError("VecNorm must be initialized before calling denorm.")
        tensordict = tensordict.clone(False)
        loc, scale = self._get_loc_scale()
        present = _spec_keys(tensordict)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if out_key in present:
                tensordict.set(in_key, tensordict.get(out_key) * scale.get(in_key) + loc.get(in_key))
        return tensordict

    def to_observation_norm(self):
        """An ``ObservationNorm`` per key (a ``Compose`` of them for several keys) with the current
        ``loc`` and ``scale``, for inference with fixed statistics."""
        loc, scale = self._get_loc_scale()
        norms = [self._observation_norm(loc=loc.get(k), scale=scale.get(k), standard_normal=True, in_keys=[k],
                                 out_keys=[ok], eps=self.eps) for k, ok in zip(self.in_keys, self.out_keys)]
        return Compose(*norms) if len(norms) > 1 else norms[0]

    # ---- state: the running statistics, laid out as torchrl's ``_extra_state`` -----------------
    def _stats(self):
        raise NotImplementedError

    def _extra_state(self):
        """The statistics as torchrl's ``get_extra_state`` names them (empty before any data)."""
        return {self._stat_name(stat, key): value for stat, per_key in self._stats().items()
                for key, value in per_key.items()}

    _state_names = ("_extra_state",)
    _uninitialized_state = None  # what torchrl's get_extra_state gives before any data

    def state_dict(self, prefix=""):
        """The running statistics under ``<prefix>_extra_state`` (a dict, torchrl's layout); the
        tensors are the live statistics. Before any data, torchrl's warning and no statistics."""
        if not self._initialized():
            warnings.warn("Querying state_dict on an uninitialized VecNorm transform will return a `None` value for "
                          "the summary statistics. Loading such a state_dict on an initialized VecNorm will result "
                          "in an error.", UserWarning, stacklevel=2)
            return OrderedDict([(prefix + "_extra_state", self._uninitialized_state)])
        return OrderedDict([(prefix + "_extra_state", self._extra_state())])

    def load_state_dict(self, state_dict, strict=True):
        """Takes back ``state_dict()``'s statistics. Shared tensors are adopted as they are (the
        statistics stay shared), others copied; into statistics that are shared already, the
        values are copied in place."""
        unexpected = sorted(set(state_dict) - set(self._state_names))
        if unexpected:
            raise KeyError(f"{type(self).__name__}.load_state_dict: unexpected keys {unexpected} (expected "
                           f"{sorted(self._state_names)})")
        if "_extra_state" not in state_dict:
            if strict:
                raise KeyError(f"{type(self).__name__}.load_state_dict: missing key '_extra_state'")
            return
        stats = {}
        for name, value in (state_dict["_extra_state"] or {}).items():
            stat, key = self._parse_stat_name(name)
            stats.setdefault(stat, {})[key] = _adopt(value, self._stats().get(stat, {}).get(key))
        self._load_stats(stats)

    def _parse_stat_name(self, name):
        for stat in self._stat_names:
            for key in map(unravel_key_to_tuple, self.in_keys):
                if self._stat_name(stat, key) == name:
                    return stat, key
        raise KeyError(f"{type(self).__name__}.load_state_dict: unexpected statistic {name!r} (expected "
                       f"{sorted(self._stat_name(s, k) for s in self._stat_names for k in self.in_keys)})")

    def __repr__(self):
        return (f"{type(self).__name__}(decay={self.decay:4.4f},eps={self.eps:4.4f}, in_keys={self.in_keys}, "
                f"out_keys={self.out_keys})")


def _adopt(value, current):
    """``value`` to hold as a statistic: copied into ``current`` when that one is shared, kept
    when it is shared itself, else a copy."""
    if current is not None and current.is_shared() and current.shape == value.shape:
        return current.copy_(value)
    return value if value.is_shared() else value.clone()


def _append_last(key, suffix):
    return key[:-1] + (key[-1] + suffix,)


def _leaves(td):
    return {unravel_key_to_tuple(k): td.get(k) for k in td.keys(True, True)}


def _shared_spec(env, key):
    """The spec of ``key`` among ``env``'s observations, else its rewards."""
    for spec in (env.observation_spec, env.full_reward_spec):
        if key in _spec_keys(spec):
            return spec[key]
    raise KeyError(f"VecNorm.build_td_for_shared_vecnorm: no observation or reward {_key_str(key)!r} in the env "
                   f"(observations {sorted(map(str, env.observation_spec.keys(True, True)))})")


def _as_td(per_key):
    out = TensorDict()
    for key, value in per_key.items():
        out.set(key, value)
    return out


class VecNorm(_RunningNorm):
    """Normalizes ``in_keys`` entries (default ``["observation", "reward"]``) by running statistics:
    decayed sums of the values, of their squares and of the number of samples (``decay`` per
    update, every row of a batch counted), giving ``(value - mean) / std`` with ``std`` at least
    ``eps``. Reset observations update the statistics too, as torchrl's. ``new_api=True`` returns
    a ``VecNormV2`` instead. ``shapes``: the feature shape of each key (default: the entry's shape
    after the batch dims)."""

    _stat_names = ("sum", "ssq", "count")
    SEP = "-<.>-"  # torchrl's separator of nested keys in the state dict

    @classmethod
    def _stat_name(cls, stat, key):
        return cls.SEP.join(_append_last(key, "_" + stat))  # torchrl's: observation_sum

    def __new__(cls, *args, new_api=None, **kwargs):
        if new_api:
            return VecNormV2(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, in_keys=None, out_keys=None, shared_td=None, lock=None, decay=0.9999, eps=1e-4, shapes=None,
                 new_api=None):
        super().__init__(in_keys=["observation", "reward"] if in_keys is None else in_keys, out_keys=out_keys)
        self._check_keys(lock)
        if shapes is not None and len(shapes) != len(self.in_keys):
            raise ValueError(f"VecNorm: shapes must give one shape per in key ({len(self.in_keys)}), got {len(shapes)}")
        self.decay, self.eps, self.shapes = float(decay), float(eps), shapes
        self._sum, self._ssq, self._count = {}, {}, {}
        if shared_td is not None:
            self._use_shared_td(shared_td)

    def _use_shared_td(self, shared_td):
        """Takes the statistics from ``shared_td``'s ``<key>_sum``, ``<key>_ssq`` and ``<key>_count``
        entries (as torchrl lays them out), which stay shared."""
        if not (shared_td.is_shared() or shared_td.is_memmap()):
            raise RuntimeError("shared_td must be either in shared memory or a memmap tensordict.")
        present = _spec_keys(shared_td)
        for key in self.in_keys:
            names = [_append_last(key, suffix) for suffix in ("_sum", "_ssq", "_count")]
            if any(name not in present for name in names):
                raise KeyError(f"key {_key_str(key)!r} not present in the shared tensordict with keys "
                               f"{sorted(map(str, shared_td.keys(True, True)))}")
            self._sum[key], self._ssq[key], self._count[key] = (shared_td.get(name) for name in names)

    @staticmethod
    def build_td_for_shared_vecnorm(env, keys=None, memmap=False):
        """Zero statistics for ``keys`` (default ``["observation", "reward"]``) of a non-batched
        ``env``, in shared memory (memory-mapped files with ``memmap``), laid out for
        ``VecNorm(shared_td=...)``. (torchrl 0.14.1 has put this method on hold: it raises.)"""
        if env.batch_size:
            raise RuntimeError(f"VecNorm should be used with non-batched environments. Got batch_size="
                               f"{list(env.batch_size)}")
        td = TensorDict()
        for key in ["observation", "reward"] if keys is None else keys:
            key = unravel_key_to_tuple(key)
            zero = _shared_spec(env, key).zero()
            td.set(_append_last(key, "_sum"), zero)
            td.set(_append_last(key, "_ssq"), zero.clone())
            td.set(_append_last(key, "_count"), zeros(1, dtype=_dtypes.float32, device=zero.device))
        return td.memmap_() if memmap else td.share_memory_()

    def _initialized(self):
        return bool(self._count)

    @property
    def _td(self):
        """torchrl's statistics TensorDict (``<key>_sum``, ``<key>_ssq``, ``<key>_count``) over the live
        tensors; None before any data."""
        if not self._count:
            return None
        td = TensorDict()
        for stat, per_key in self._stats().items():
            for key, value in per_key.items():
                td.set(_append_last(key, "_" + stat), value)
        return td

    def _init(self, key, value, batch_dims):
        if key in self._count:
            return
        if self.shapes is None:
            shape = tuple(value.shape[batch_dims:])
        else:
            shape = tuple(self.shapes[self.in_keys.index(key)])
        self._sum[key] = zeros(shape, dtype=value.dtype, device=value.device)
        self._ssq[key] = zeros(shape, dtype=value.dtype, device=value.device)
        self._count[key] = zeros(1, dtype=_dtypes.float32, device=value.device)

    def _update(self, key, value, n):
        total, squares, count = self._sum[key], self._ssq[key], self._count[key]
        if not self.frozen:  # (in place: shared statistics stay shared)
            total.mul_(self.decay).add_(_sum_left(value, total))
            squares.mul_(self.decay).add_(_sum_left(value.pow(2), squares))
            count.mul_(self.decay).add_(n)
        mean = total / count
        std = (squares / count - mean.pow(2)).clamp_min(self.eps).sqrt()
        return (value - mean) / std.clamp_min(self.eps)

    def _call(self, next_tensordict):
        with self.lock:
            return self._normalize(next_tensordict)

    def _normalize(self, next_tensordict):
        present = _spec_keys(next_tensordict)
        for key, out_key in zip(self.in_keys, self.out_keys):
            if key not in present:  # (torchrl's: a missing entry is skipped, not an error)
                continue
            value = next_tensordict.get(key)
            self._init(key, value, next_tensordict.ndim)
            next_tensordict.set(out_key, self._update(key, value, max(1, next_tensordict.numel())))
        return next_tensordict

    forward = _call

    def _step(self, tensordict, next_tensordict):
        return self._call(next_tensordict)

    def frozen_copy(self):
        """A copy that never updates the statistics but reads this one's as they go on changing
        (torchrl's: the copy shares the running sums)."""
        copy = super().frozen_copy()
        copy._sum, copy._ssq, copy._count = self._sum, self._ssq, self._count
        return copy

    def _get_loc_scale(self):
        if not self._initialized():
            raise RuntimeError("VecNorm must be initialized (see data) before its loc and scale exist.")
        loc, scale = {}, {}
        for key in self._count:
            loc[key] = self._sum[key] / self._count[key]
            scale[key] = (self._ssq[key] / self._count[key] - loc[key].pow(2)).clamp_min(self.eps).sqrt()
        return _as_td(loc), _as_td(scale)

    def _stats(self):
        return {"sum": self._sum, "ssq": self._ssq, "count": self._count}

    def _load_stats(self, stats):
        if not stats:
            if self._count:
                raise KeyError("Could not find a tensordict in the state_dict.")
            return
        self._sum, self._ssq, self._count = (stats.get(name, {}) for name in self._stat_names)


class VecNormV2(_RunningNorm):
    """Normalizes ``in_keys`` entries by running moments: at each update (a step, or a reset for
    the entries it has) ``loc`` and ``var`` move towards the value and its square by ``1 - decay``
    (``1 / count`` when ``decay == 1``), each key counting its own updates; the value is then
    ``(value - loc / c) / sqrt((var - loc**2) / c)`` (the root at least ``eps``) with the bias
    correction ``c = 1 - decay**count``. Statistics are kept per batch element unless
    ``reduce_batch_dims``: then a batch's mean counts as its number of rows."""

    _stat_names = ("loc", "var", "count")
    SEP = _SEP  # torchrl's separator of nested keys in the state dict
    _state_names = ("initialized", "_extra_state")
    _uninitialized_state = {}

    @classmethod
    def _stat_name(cls, stat, key):
        return cls.SEP.join((stat,) + key)  # torchrl's: loc.-|-.observation

    def state_dict(self, prefix=""):
        """torchrl's ``initialized`` flag, then the statistics under ``<prefix>_extra_state``."""
        out = OrderedDict([(prefix + "initialized", tensor(self._initialized()))])
        out.update(super().state_dict(prefix))
        return out

    def __init__(self, in_keys, out_keys=None, *, lock=None, stateful=True, decay=0.9999, eps=1e-4,
                 shared_data=None, reduce_batch_dims=False):
        if not stateful:
            raise NotImplementedError("VecNormV2(stateful=False) (statistics carried in the data) is not supported "
                                      "on rlpipe")
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._check_keys(lock)
        self.stateful = True
        self.decay, self.eps = float(decay), float(eps)
        self.reduce_batch_dims = bool(reduce_batch_dims)
        self._loc = self._var = self._count = None
        self._cast_int_to_float = False
        if shared_data is not None:
            self._use_shared_data(shared_data)

    def _use_shared_data(self, shared_data):
        """Takes the statistics from ``shared_data``'s ``"loc"``, ``"var"`` and ``"count"``
        TensorDicts (as torchrl lays them out), which stay shared."""
        stats = [_leaves(shared_data.get(name)) for name in self._stat_names]
        for name, per_key in zip(self._stat_names, stats):
            missing = [_key_str(k) for k in self.in_keys if k not in per_key]
            if missing:
                raise KeyError(f"VecNormV2: shared_data[{name!r}] lacks the in keys {missing} (has "
                               f"{[_key_str(k) for k in per_key]})")
        self._loc, self._var, self._count = stats

    def _initialized(self):
        return self._loc is not None

    @property
    def initialized(self):
        """Whether the running statistics exist (after the first data)."""
        return self._initialized()

    def _cast_int(self):
        return True

    def transform_reward_spec(self, reward_spec):
        if REWARD in self.in_keys:
            return _unbounded(reward_spec, cast_int=True)
        return reward_spec

    def _float(self, value):
        return value if value.dtype.is_floating_point else value.to(_dtypes.float32)

    def _init(self, data, batch_dims):
        """Zero statistics for every in key, shaped like ``data``'s entries (the env's specs for
        those a reset lacks, as torchrl's)."""
        self._loc, self._var, self._count = {}, {}, {}
        present = _spec_keys(data)
        for key in self.in_keys:
            value = data.get(key) if key in present else self._spec_zero(key)
            value = self._float(value)
            if self.reduce_batch_dims and batch_dims:
                value = value.mean(dim=tuple(range(batch_dims)))
            self._loc[key] = zeros(value.shape, dtype=value.dtype, device=value.device)
            self._var[key] = zeros(value.shape, dtype=value.dtype, device=value.device)
            self._count[key] = zeros((), dtype=_dtypes.int64, device=value.device)

    def _spec_zero(self, key):
        try:
            spec = self._parent_spec("reward") if key == REWARD else self._parent_spec("observation")[key]
        except (RuntimeError, KeyError):
            raise KeyError(f"VecNormV2: no entry {_key_str(key)!r} in the first data seen, and no env spec to take "
                           "its shape from") from None
        return spec.zero()

    def _update(self, key, value, batch_dims):
        value = self._float(value)
        if self.reduce_batch_dims and batch_dims:
            n = int(math.prod(value.shape[:batch_dims]))
            self._count[key].add_(n)
            dims = tuple(range(batch_dims))
            mean, square = value.mean(dim=dims), value.pow(2).mean(dim=dims)
            weight = 1 - self.decay ** n if self.decay != 1.0 else n / self._count[key]
        else:
            self._count[key].add_(1)
            mean, square = value, value.pow(2)
            weight = 1 - self.decay if self.decay != 1.0 else 1 / self._count[key]
        if not isinstance(weight, float):
            weight = weight.to(mean.dtype)
        self._loc[key].lerp_(mean, weight)  # (in place: shared statistics stay shared)
        self._var[key].lerp_(square, weight)

    def _loc_scale_of(self, key):
        loc, count = self._loc[key], self._count[key]
        correction = 1 - (count * math.log(self.decay)).exp().to(loc.dtype) if self.decay != 1.0 else 1
        var = (self._var[key] - loc.pow(2)) / correction
        return loc / correction, var.sqrt().clamp_min(self.eps)

    def _step(self, tensordict, next_tensordict):
        with self.lock:
            return self._normalize(next_tensordict)

    def _normalize(self, next_tensordict):
        present = _spec_keys(next_tensordict)
        missing = [k for k in self.in_keys if k not in present]
        if missing and not self._missing_tolerance:
            raise KeyError(f"VecNormV2: {[_key_str(k) for k in missing]} not found in the tensordict (keys: "
                           f"{sorted(map(str, next_tensordict.keys(True, True)))})")
        if self._loc is None:
            self._init(next_tensordict, next_tensordict.ndim)
        for key, out_key in zip(self.in_keys, self.out_keys):
            if key in present:
                value = next_tensordict.get(key)
                if not self.frozen:
                    self._update(key, value, next_tensordict.ndim)
                loc, scale = self._loc_scale_of(key)
                next_tensordict.set(out_key, (self._float(value) - loc) / scale)
        return next_tensordict

    def _call(self, next_tensordict):
        return self._step(next_tensordict, next_tensordict)

    forward = _call

    def _get_loc_scale(self):
        if self._loc is None:
            raise RuntimeError("VecNormV2 must be initialized (see data) before its loc and scale exist.")
        pairs = {key: self._loc_scale_of(key) for key in self._loc}
        return _as_td({k: v[0] for k, v in pairs.items()}), _as_td({k: v[1] for k, v in pairs.items()})

    def _stats(self):
        if self._loc is None:
            return {}
        return {"loc": self._loc, "var": self._var, "count": self._count}

    def _load_stats(self, stats):
        if not stats:
            if self._loc is not None:
                raise RuntimeError("set_extra_state() called with a void state-dict while the instance is "
                                   "initialized.")
            return
        self._loc, self._var, self._count = (stats.get(name, {}) for name in self._stat_names)
