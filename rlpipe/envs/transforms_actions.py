"""torchrl 0.14's action transforms, written on TensorDicts as torchrl's are (``step_protocol.py``,
THE RULE): ``ActionMask``, ``ActionScaling``, ``DiscreteActionProjection`` and ``ActionDiscretizer``;
the last three map the action on arrays (``_frame_inv``) and pass observation frames through. An
rlpipe env takes one input, ``"action"``: an option naming another action key raises
``NotImplementedError``.
Re-exported by ``transforms_episodes.py``.
"""
from enum import IntEnum

import numpy as np

from .. import _dtypes
from .._creation import as_tensor
from .._tensor import Tensor, host_array
from ..random import rand, randint
from .specs import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot, Unbounded
from .step_protocol import ACTION
from .transformed_env import Transform, TransformedEnv, _key_str, _keys

__all__ = ["ActionDiscretizer", "ActionMask", "ActionScaling", "DiscreteActionProjection"]


def _only_action(keys, what, name):
    """``keys`` (a key list), checked to be empty or ``["action"]``: the only input an rlpipe env takes."""
    if keys and keys != [ACTION]:
        raise NotImplementedError(f"{name}: {what} must be ['action'] on rlpipe's env protocol (an env takes no "
                                  f"other input), got {[_key_str(k) for k in keys]}")
    return keys


def _like(array, tensor):
    """``array`` (host) as a tensor on ``tensor``'s device."""
    return as_tensor(array, device=tensor.device)


class _ActionOnly:
    """Frame hooks of a transform that changes only the action: the observation frames pass
    through untouched (no TensorDict per step). Mixed in before ``Transform``."""

    def _frame_reset(self, frame):
        return frame

    def _frame_step(self, root, next_frame, action):
        return next_frame

    def _frame_continue(self, next_frame, frame, done):
        return frame


class ActionMask(Transform):
    """Keeps the env's action spec's mask equal to the ``mask_key`` observation (bool, one entry
    per category), at every reset and step, so that ``rand`` (random policies, ``rand_action``)
    draws only allowed actions and ``is_in`` refuses the others. The action spec must be
    ``OneHot``, ``Categorical``, ``MultiOneHot`` or ``MultiCategorical`` (a mask of
    ``sum(nvec)`` per row for the last two, as torchrl's)."""

    ACCEPTED_SPECS = (OneHot, Categorical, MultiOneHot, MultiCategorical)
    SPEC_TYPE_ERROR = "The action spec must be one of {}. Got {} instead."

    def __init__(self, action_key="action", mask_key="action_mask"):
        for name, key in (("action", action_key), ("mask", mask_key)):
            if not isinstance(key, (tuple, str)):
                raise ValueError(f"The {name} key must be a nested key. Got {type(key)} instead.")
        _only_action(_keys(action_key, "action_key"), "action_key", "ActionMask")
        super().__init__(in_keys=[action_key, mask_key], out_keys=[], in_keys_inv=[], out_keys_inv=[])

    def forward(self, tensordict):
        raise RuntimeError(f"class {type(self)} cannot be executed without a parent environment: it masks the "
                           "env's action spec, so it cannot be called outside an env")

    @property
    def action_spec(self):
        """The action spec of the env holding this transform (the one its users sample from)."""
        node = self.container
        while node is not None and not isinstance(node, TransformedEnv):
            node = node.container
        if node is None:
            raise RuntimeError(f"{type(self)}.parent cannot be None: make sure this transform is executed within an "
                               "environment.")
        spec = node.action_spec
        if not isinstance(spec, self.ACCEPTED_SPECS):
            raise ValueError(self.SPEC_TYPE_ERROR.format(self.ACCEPTED_SPECS, type(spec)))
        return spec

    def transform_action_spec(self, action_spec):
        if not isinstance(action_spec, self.ACCEPTED_SPECS):
            raise ValueError(self.SPEC_TYPE_ERROR.format(self.ACCEPTED_SPECS, type(action_spec)))
        return action_spec

    def _call(self, next_tensordict):
        spec = self.action_spec
        mask = next_tensordict.get(self.in_keys[1], None)
        if mask is None:
            raise KeyError(f"ActionMask: no mask entry {_key_str(self.in_keys[1])!r} in the observations (keys: "
                           f"{sorted(map(str, next_tensordict.keys(True, True)))})")
        spec.update_mask(mask)
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def __repr__(self):
        return f"ActionMask(action_key={_key_str(self.in_keys[0])!r}, mask_key={_key_str(self.in_keys[1])!r})"


class ActionScaling(_ActionOnly, Transform):
    """Exposes a normalized continuous action space and maps the policy's actions back to the
    env's range: with ``loc = (high + low) / 2`` and ``scale = (high - low) / 2`` of the action
    spec (or given ``loc``/``scale``), the env gets ``a * scale + loc`` (``standard_normal``: the
    policy acts in [-1, 1]; else in [0, 1], ``a`` read as ``2 a - 1``). ``forward`` (a replay
    buffer's) maps env actions to the normalized space. ``in_keys_inv=[]``: forward only.
    """

    _state_keys = ("loc", "scale")

    def __init__(self, in_keys_inv=None, out_keys_inv=None, in_keys=None, out_keys=None, *, loc=None, scale=None,
                 standard_normal=True):
        in_keys_inv = [ACTION] if in_keys_inv is None else _keys(in_keys_inv, "in_keys_inv")
        if len(in_keys_inv) > 1:
            raise ValueError("ActionScaling only supports a single action key per instance. Compose several "
                             "ActionScaling transforms to scale multiple actions.")
        out_keys_inv = list(in_keys_inv) if out_keys_inv is None else _keys(out_keys_inv, "out_keys_inv")
        _only_action(in_keys_inv, "in_keys_inv", "ActionScaling")
        _only_action(out_keys_inv, "out_keys_inv", "ActionScaling")
        in_keys = (list(in_keys_inv) or [ACTION]) if in_keys is None else _keys(in_keys, "in_keys")
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self.standard_normal = bool(standard_normal)
        if (loc is None) != (scale is None):
            raise ValueError("loc and scale must either both be provided or both be None.")
        self._explicit = loc is not None
        if not in_keys_inv and not self._explicit:
            raise ValueError("in_keys_inv=[] (forward-only mode) requires explicit loc and scale: without an "
                             "inverse action key there is no action spec to derive them from.")
        self._loc = self._scale = None
        if self._explicit:
            self._set_loc_scale(self._float(loc, "loc"), self._float(scale, "scale"))

    @staticmethod
    def _float(value, name):
        array = host_array(value)
        if array.dtype.kind not in "fiub":
            raise TypeError(f"ActionScaling: {name} must be numeric, got dtype {array.dtype}")
        return np.array(array if array.dtype.kind == "f" else array.astype(np.float32))

    def _set_loc_scale(self, loc, scale):
        if (scale == 0).any():
            raise ValueError("scale must not contain zero entries (would cause division by zero).")
        self._loc, self._scale = loc, scale

    @property
    def loc(self):
        """The action shift (a tensor; None until given or computed from the spec)."""
        return None if self._loc is None else as_tensor(self._loc)

    @loc.setter
    def loc(self, value):
        self._loc = self._float(value, "loc")
        self._invalidate()

    @property
    def scale(self):
        """The action scale (a tensor; None until given or computed from the spec)."""
        return None if self._scale is None else as_tensor(self._scale)

    @scale.setter
    def scale(self, value):
        scale = self._float(value, "scale")
        if (scale == 0).any():
            raise ValueError("scale must not contain zero entries (would cause division by zero).")
        self._scale = scale
        self._invalidate()

    @property
    def initialized(self):
        """Whether the scaling statistics are set."""
        return self._loc is not None

    @classmethod
    def from_stats(cls, *, mean=None, std=None, low=None, high=None, eps=1e-6, **kwargs):
        """An instance with explicit ``loc``/``scale`` from dataset statistics: ``mean`` and ``std``,
        or ``low`` and ``high`` (mapped to [-1, 1]); ``scale`` is at least ``eps``."""
        if (mean is None) != (std is None):
            raise ValueError("mean and std must be provided together.")
        if (low is None) != (high is None):
            raise ValueError("low and high must be provided together.")
        if (mean is not None) == (low is not None):
            raise ValueError("Provide exactly one of (mean, std) or (low, high).")
        if mean is not None:
            loc, scale = (host_array(v).astype(np.float32) for v in (mean, std))
        else:
            low, high = (host_array(v).astype(np.float32) for v in (low, high))
            loc, scale = (low + high) / 2, (high - low) / 2
        if loc.shape != scale.shape:
            raise ValueError(f"loc and scale must have the same shape, got {loc.shape} and {scale.shape}.")
        return cls(loc=loc, scale=np.maximum(scale, np.float32(eps)), **kwargs)

    @staticmethod
    def _finite_bounds(spec):
        """The spec's (low, high) as host arrays, or None when some side is unbounded."""
        if isinstance(spec, Unbounded) or not isinstance(spec, Bounded):
            return None
        low, high = host_array(spec.low), host_array(spec.high)
        if low.dtype.kind == "f":
            info = np.finfo(low.dtype)
            if (low == info.min).any() or (high == info.max).any():
                return None
        return (low, high) if np.isfinite(low).all() and np.isfinite(high).all() else None

    def _bounds_of(self, spec):
        if not isinstance(spec, Bounded) or not spec.dtype.is_floating_point:
            raise RuntimeError(f"ActionScaling requires a bounded continuous action spec, got {type(spec).__name__}. "
                               "Unbounded or discrete action specs are not supported.")
        bounds = self._finite_bounds(spec)
        if bounds is None:
            raise RuntimeError("ActionScaling requires fully bounded actions: every entry of the action spec must "
                               "have a finite lower and upper bound.")
        low, high = bounds
        if (high <= low).any():
            raise RuntimeError("ActionScaling requires high > low for every entry of the action spec. Got entries "
                               "with high <= low.")
        return low, high

    def _ensure_initialized(self):
        if self.initialized:
            return
        parent = self.parent
        if parent is None:
            raise RuntimeError("ActionScaling has not been initialized: pass explicit ``loc`` and ``scale`` to the "
                               "constructor, or attach this transform to a TransformedEnv whose action spec is "
                               "bounded so that the values can be derived automatically.")
        self.transform_action_spec(parent.action_spec.clone())

    def transform_action_spec(self, action_spec):
        if not self.in_keys_inv:
            return action_spec
        if self._explicit:
            if not action_spec.dtype.is_floating_point:
                raise RuntimeError(f"ActionScaling requires a continuous action spec, got "
                                   f"{type(action_spec).__name__}. Discrete action specs are not supported.")
            bounds = self._finite_bounds(action_spec)
            if bounds is None:
                return Unbounded(shape=action_spec.shape, dtype=action_spec.dtype, device=action_spec.device)
            low, high = (self._normalize(b) for b in bounds)
        else:
            low, high = self._bounds_of(action_spec)
            if not self.initialized:
                self._set_loc_scale((high + low) / 2, (high - low) / 2)
            unit = np.ones_like(low)
            low, high = (0 * unit if not self.standard_normal else -unit), unit
        return Bounded(low=low, high=high, shape=action_spec.shape, dtype=action_spec.dtype,
                       device=action_spec.device)

    def _check_dim(self, action):
        if self._loc.size > 1 and (action.ndim == 0 or action.shape[-1] != self._loc.shape[-1]):
            raise ValueError(f"action shape {tuple(action.shape)} does not match the loc/scale dimension "
                             f"{self._loc.shape[-1]} on its last dim.")

    def _normalize(self, action):
        normalized = (action - self._loc.astype(action.dtype)) / self._scale.astype(action.dtype)
        return (normalized + 1) / 2 if not self.standard_normal else normalized

    def _denormalize(self, action):
        if not self.standard_normal:
            action = action * 2 - 1
        return action * self._scale.astype(action.dtype) + self._loc.astype(action.dtype)

    def _through(self, function, action):
        self._ensure_initialized()
        self._check_dim(action)
        array = host_array(action)
        if array.dtype.kind != "f":
            array = array.astype(self._loc.dtype)
        return _like(function(array), action)

    def _apply_transform(self, action):
        return self._through(self._normalize, action)

    def _inv_apply_transform(self, action):
        return self._through(self._denormalize, action)

    def normalize(self, action):
        """An env-scale action in the normalized space (the forward map)."""
        return self._apply_transform(action)

    def denormalize(self, action):
        """A normalized action back at the env's scale (the inverse map)."""
        return self._inv_apply_transform(action)

    def _call(self, next_tensordict):
        return next_tensordict  # the action only travels the inverse way through an env

    def _frame_inv(self, action, root):
        if not self.in_keys_inv:
            return action
        self._check_dim(action)
        return self._denormalize(action if action.dtype.kind == "f" else action.astype(self._loc.dtype))

    def __repr__(self):
        loc = self._loc if self.initialized else "<uninitialized>"
        scale = self._scale if self.initialized else "<uninitialized>"
        return (f"ActionScaling(loc={loc}, scale={scale}, standard_normal={self.standard_normal}, "
                f"in_keys_inv={[_key_str(k) for k in self.in_keys_inv]})")


class DiscreteActionProjection(_ActionOnly, Transform):
    """Lets a policy over ``max_actions`` one-hot actions act in an env with ``num_actions_effective``
    ones: an action beyond the env's range becomes a random one within it. ``forward`` (with
    ``include_forward``) re-encodes env actions as ``max_actions``-wide one-hots."""

    def __init__(self, num_actions_effective, max_actions, action_key="action", include_forward=True):
        for name, value in (("num_actions_effective", num_actions_effective), ("max_actions", max_actions)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"DiscreteActionProjection: {name} must be a positive int, got {value!r}")
        keys = _only_action(_keys(action_key, "action_key"), "action_key", "DiscreteActionProjection")
        super().__init__(in_keys=list(keys) if include_forward else [], in_keys_inv=keys)
        if max_actions < num_actions_effective:
            raise RuntimeError("The `max_actions` int must be greater or equal to `num_actions_effective`.")
        self.num_actions_effective = int(num_actions_effective)
        self.max_actions = int(max_actions)

    def _call(self, next_tensordict):
        return next_tensordict  # the action only travels the inverse way through an env

    def _apply_transform(self, action):
        index = host_array(action).argmax(-1)
        return _like(np.eye(self.max_actions, dtype=host_array(action).dtype)[index], action)

    def _inv_apply_transform(self, action):
        if action.shape[-1] != self.max_actions:
            raise RuntimeError(f"action.shape[-1]={action.shape[-1]} must match self.max_actions={self.max_actions}.")
        array = host_array(action)
        index = np.array(array.astype(np.int64).argmax(-1))
        beyond = index >= self.num_actions_effective
        if beyond.any():
            index[beyond] = host_array(randint(self.num_actions_effective, (int(beyond.sum()),)))
        out = np.eye(self.num_actions_effective, dtype=array.dtype)[index]
        return _like(out, action) if isinstance(action, Tensor) else out

    def _frame_inv(self, action, root):
        return self._inv_apply_transform(action)

    def transform_action_spec(self, action_spec):
        shape = tuple(action_spec.shape[:-1]) + (self.max_actions,)
        return OneHot(self.max_actions, shape=shape, device=action_spec.device, dtype=action_spec.dtype)

    def __repr__(self):
        return (f"DiscreteActionProjection(num_actions_effective={self.num_actions_effective}, max_actions="
                f"{self.max_actions}, in_keys_inv={[_key_str(k) for k in self.in_keys_inv]})")


class ActionDiscretizer(_ActionOnly, Transform):
    """Lets a discrete-action algorithm (DQN, ...) drive a bounded continuous action: each action
    element gets ``num_intervals`` values (an int, or one per element), and the policy picks one
    (a ``MultiCategorical``, or ``MultiOneHot`` with ``categorical=False``; ``Categorical`` /
    ``OneHot`` for a scalar action). Value ``k`` of ``n`` is ``low + pos[k] * (high - low)`` with
    ``pos`` from ``custom_arange`` (``sampling``: interval MEDIAN (default), LOW or HIGH end, or
    RANDOM: the LOW end plus a uniform jitter within the interval)."""

    class SamplingStrategy(IntEnum):
        MEDIAN = 0
        LOW = 1
        HIGH = 2
        RANDOM = 3

    def __init__(self, num_intervals, action_key="action", out_action_key=None, sampling=None, categorical=True):
        out_action_key = action_key if out_action_key is None else out_action_key
        _only_action(_keys(action_key, "action_key"), "action_key", "ActionDiscretizer")
        _only_action(_keys(out_action_key, "out_action_key"), "out_action_key", "ActionDiscretizer")
        super().__init__(in_keys_inv=[action_key], out_keys_inv=[out_action_key])
        self.action_key, self.out_action_key = action_key, out_action_key
        counts = host_array(num_intervals)
        if counts.dtype.kind not in "iu" or counts.ndim > 1 or (counts < 1).any():
            raise ValueError(f"ActionDiscretizer: num_intervals must be a positive int or a 1-d sequence of them, "
                             f"got {num_intervals!r}")
        self.num_intervals = num_intervals
        self._counts = counts
        self.sampling = self.SamplingStrategy.MEDIAN if sampling is None else self.SamplingStrategy(sampling)
        self.categorical = bool(categorical)
        self.intervals = None  # per action element: its values (host arrays), set from the action spec

    def custom_arange(self, nint, device=None):
        """The positions in [0, 1] of the ``nint`` values within the action's range (override for
        another strategy)."""
        start = np.arange(nint, dtype=np.float64) / nint
        end = (1 - start)[::-1]
        if self.sampling == self.SamplingStrategy.MEDIAN:
            return (start + end) / 2
        return end if self.sampling == self.SamplingStrategy.HIGH else start

    def transform_action_spec(self, action_spec):
        if not isinstance(action_spec, Bounded):
            raise TypeError(f"action spec type {type(action_spec)} is not supported. The action spec type must be "
                            "Bounded.")
        batch = tuple(self._env_batch_size or ())
        shape = tuple(action_spec.shape)[len(batch):]
        low = host_array(action_spec.low)[(0,) * len(batch)].astype(np.float64).reshape(-1)
        high = host_array(action_spec.high)[(0,) * len(batch)].astype(np.float64).reshape(-1)
        if len(shape) > 1:
            raise NotImplementedError(f"ActionDiscretizer: actions of one dim or a scalar, got shape {list(shape)}")
        n_act = low.size
        if self._counts.size not in (1, n_act):
            raise ValueError(f"ActionDiscretizer: num_intervals has {self._counts.size} entries for an action of "
                             f"{n_act} elements")
        nvec = np.broadcast_to(self._counts.reshape(-1), (n_act,)).astype(np.int64)
        self.nvec = nvec
        self._action_shape = shape
        self._dtype = action_spec.dtype.np
        self.intervals = [lo + self.custom_arange(int(n)) * (hi - lo) for lo, hi, n in zip(low, high, nvec)]
        self.jitters = (high - low) / nvec
        return self._discrete_spec(batch, shape, nvec, action_spec.device)

    def _discrete_spec(self, batch, shape, nvec, device):
        if not shape:
            n = int(nvec[0])
            return Categorical(n, shape=batch, device=device) if self.categorical else \
                OneHot(n, shape=batch + (n,), device=device)
        if self.categorical:
            return MultiCategorical(nvec, shape=batch + shape, device=device, remove_singleton=False)
        return MultiOneHot(nvec, shape=batch + (int(nvec.sum()),), device=device)

    def _indices(self, action):
        """The chosen value's index per action element, [..., n_act]."""
        if self.categorical:
            return action.astype(np.int64).reshape(action.shape + (1,) * (not self._shaped))
        parts = np.split(action, np.cumsum(self.nvec)[:-1], axis=-1)
        return np.stack([part.argmax(-1) for part in parts], -1)

    @property
    def _shaped(self):
        return self._action_shape != ()

    def _init(self):
        """Builds the action values from the env's action spec (as torchrl's lazy initialisation)."""
        parent = self.parent
        if parent is None:
            raise RuntimeError(f"Cannot execute transform {type(self).__name__} without a parent env.")
        self._env_batch_size = parent.batch_size
        self.transform_action_spec(parent.action_spec.clone())

    def _continuous(self, action):
        if self.intervals is None:
            self._init()
        index = self._indices(np.asarray(action))
        values = np.stack([self.intervals[d][index[..., d]] for d in range(len(self.intervals))], -1)
        if self.sampling == self.SamplingStrategy.RANDOM:
            values = values + self.jitters * host_array(rand(*values.shape, dtype=_dtypes.float64))
        values = values.astype(self._dtype)
        return values if self._shaped else values[..., 0]

    def _inv_apply_transform(self, action):
        return _like(self._continuous(host_array(action)), action)

    def _frame_inv(self, action, root):
        return self._continuous(action)

    def __repr__(self):
        return (f"ActionDiscretizer(num_intervals={self.num_intervals}, action_key={self.action_key}, "
                f"out_action_key={self.out_action_key}, sampling={int(self.sampling)}, categorical={self.categorical})")
