"""torchrl 0.14's transforms about returns, actions and episodes, written on TensorDicts as torchrl's
are (``step_protocol.py``, THE RULE): ``TargetReturn``, ``Reward2GoTransform``, ``ActionScaling``,
``DiscreteActionProjection``, ``TrajCounter`` and ``TerminateTransform``. Where rlpipe's env
protocol cannot express a torchrl option (an env takes one ``"action"`` input; ``done`` is always
``terminated | truncated``), the option raises ``NotImplementedError`` saying so.
"""
import numpy as np

from .. import _dtypes
from .._creation import as_tensor
from .._tensor import Tensor, host_array
from ..random import randint
from ..tensordict import unravel_key_to_tuple
from .specs import Bounded, OneHot, Unbounded
from .step_protocol import ACTION, REWARD, RESET, TERMINATED
from .transformed_env import Transform, TransformedEnv, _key_str, _keys

__all__ = ["ActionScaling", "DiscreteActionProjection", "Reward2GoTransform", "TargetReturn", "TerminateTransform",
           "TrajCounter"]

_DONE = ("done",)


def _only_action(keys, what, name):
    """``keys`` (a key list), checked to be empty or ``["action"]``: the only input an rlpipe env takes."""
    if keys and keys != [ACTION]:
        raise NotImplementedError(f"{name}: {what} must be ['action'] on rlpipe's env protocol (an env takes no "
                                  f"other input), got {[_key_str(k) for k in keys]}")
    return keys


def _like(array, tensor):
    """``array`` (host) as a tensor on ``tensor``'s device."""
    return as_tensor(array, device=tensor.device)


def _reset_mask(tensordict, shape):
    """The partial-reset mask ``"_reset"`` of ``tensordict``, or all True (a first reset)."""
    reset = tensordict.get(RESET, None)
    return np.ones(shape, dtype=bool) if reset is None else host_array(reset).reshape(shape)


# ---- returns --------------------------------------------------------------------------------------------

class TargetReturn(Transform):
    """A return the agent is asked to reach, as an observation (Decision-Transformer style).

    After a reset ``out_keys`` (default ``"target_return"``) hold ``target_return``; each step
    subtracts the step's reward (``mode="reduce"``) or keeps it (``mode="constant"``). ``in_keys``
    default to the env's reward; the target is an observation (it survives ``step_mdp``).
    """

    MODES = ["reduce", "constant"]
    MODE_ERR = "Mode can only be 'reduce' or 'constant'."

    def __init__(self, target_return, mode="reduce", in_keys=None, out_keys=None, reset_key=None):
        if mode not in self.MODES:
            raise ValueError(f"{self.MODE_ERR} Got mode={mode!r}")
        if isinstance(target_return, bool) or not isinstance(target_return, (int, float, np.number)):
            raise TypeError(f"TargetReturn: target_return must be a number, got {type(target_return).__name__}")
        in_keys = _keys(in_keys, "in_keys", allow_none=True) or [REWARD]
        if out_keys is None:
            out_keys = [k[:-1] + ("target_return",) for k in in_keys]
            if len(set(out_keys)) < len(out_keys):
                raise ValueError("Could not infer the target_return because multiple rewards are located at the "
                                 "same level.")
        out_keys = _keys(out_keys, "out_keys")
        if len(in_keys) != len(out_keys):
            raise ValueError(f"TargetReturn: in_keys and out_keys must have the same length, got {len(in_keys)} "
                             f"and {len(out_keys)}")
        if reset_key is not None and unravel_key_to_tuple(reset_key) != RESET:
            raise NotImplementedError(f"TargetReturn: rlpipe envs have one reset key, '_reset'; got {reset_key!r}")
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.target_return = float(target_return)
        self.mode = mode
        self.reset_key = "_reset"

    def _in_spec(self, key):
        if key == REWARD:
            return self._parent_spec("reward")
        observations = self._parent_spec("observation")
        if key not in {unravel_key_to_tuple(k) for k in observations.keys(True, True)}:
            raise KeyError(f"TargetReturn: in_key {_key_str(key)!r} is neither the reward nor an observation")
        return observations[key]

    def _reset(self, tensordict, tensordict_reset):
        shape = tuple(tensordict.batch_size) + (1,)
        reset = _reset_mask(tensordict, shape)
        for out_key in self.out_keys:
            start = np.full(shape, self.target_return, dtype=np.float32)  # torchrl's dtype, whatever the reward's
            last = tensordict.get(out_key, None)
            if last is not None:
                start = np.where(reset, start, host_array(last))
            tensordict_reset.set(out_key, as_tensor(start, device=tensordict_reset.device))
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        for out_key in self.out_keys:
            next_tensordict.set(out_key, tensordict.get(out_key))
        return self._call(next_tensordict)

    def _call(self, next_tensordict):
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = next_tensordict.get(in_key, None)
            if value is not None:
                next_tensordict.set(out_key, self._apply_transform(value, next_tensordict.get(out_key)))
            elif not self.missing_tolerance:
                raise KeyError(f"TargetReturn: '{_key_str(in_key)}' not found in the tensordict (keys: "
                               f"{sorted(map(str, next_tensordict.keys(True, True)))})")
        return next_tensordict

    def _apply_transform(self, reward, target_return):
        if tuple(target_return.shape) != tuple(reward.shape):
            raise ValueError(f"The shape of the reward ({list(reward.shape)}) and target return "
                             f"({list(target_return.shape)}) must match.")
        return target_return - reward if self.mode == "reduce" else target_return

    def forward(self, tensordict):
        raise NotImplementedError("TargetReturn cannot be executed without a parent environment (it keeps a "
                                  "running target).")

    def transform_observation_spec(self, observation_spec):
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            spec = self._in_spec(in_key)
            observation_spec[out_key] = Unbounded(shape=spec.shape, dtype=spec.dtype, device=spec.device)
        return observation_spec

    def __repr__(self):
        return f"TargetReturn(target_return={self.target_return}, mode={self.mode!r})"


def _return_to_go(reward, done, gamma):
    """G[t] = reward[t] + gamma * (1 - done[t]) * G[t + 1] along axis -2 (host arrays)."""
    out = np.array(reward, dtype=np.result_type(reward.dtype, np.float32))
    keep = gamma * ~np.broadcast_to(done, reward.shape)
    for t in range(reward.shape[-2] - 2, -1, -1):
        out[..., t, :] += keep[..., t, :] * out[..., t + 1, :]
    return out


class Reward2GoTransform(Transform):
    """The discounted return to go of each step, a replay-buffer transform run on written data
    (``inv``): ``out_keys[i][t] = in_keys[i][t] + gamma * (1 - done[t]) * out_keys[i][t + 1]``
    along the time dim (-2 of a ``[*B, T, 1]`` reward). Every row must hold an episode end.
    ``forward`` (a sample) leaves data unchanged; in an env it is an error, as in torchrl.
    """

    ENV_ERR = "The Reward2GoTransform is only an inverse transform and can only be applied to the replay buffer."

    def __init__(self, gamma=1.0, in_keys=None, out_keys=None, done_key="done"):
        in_keys = _keys(in_keys, "in_keys", allow_none=True) or [("next", "reward")]
        out_keys = list(in_keys) if out_keys is None else _keys(out_keys, "out_keys")
        if len(in_keys) != len(out_keys):
            raise ValueError(f"Reward2GoTransform: in_keys and out_keys must have the same length, got "
                             f"{len(in_keys)} and {len(out_keys)}")
        super().__init__(in_keys=in_keys, in_keys_inv=in_keys, out_keys_inv=out_keys)
        gamma = host_array(gamma)
        if gamma.size != 1 or gamma.dtype.kind not in "fiu":
            raise ValueError(f"Reward2GoTransform: gamma must be one number, got {gamma!r}")
        self.gamma = as_tensor(gamma.astype(np.float32).reshape(()))
        self.done_key = done_key
        self._done = ("next",) + unravel_key_to_tuple(done_key)

    def _set_container(self, container):
        if isinstance(container, TransformedEnv) or getattr(container, "parent", None) is not None:
            raise ValueError(self.ENV_ERR)
        super()._set_container(container)

    def _inv_call(self, tensordict):
        if self.parent is not None:
            raise ValueError(self.ENV_ERR)
        done = tensordict.get(self._done, None)
        if done is None:
            raise KeyError(f"Reward2GoTransform: done entry {self._done} not found in the tensordict")
        done = host_array(done).astype(bool)
        if done.ndim < 2 or not done.any(-2).all():
            raise RuntimeError("No episode ends found to calculate the reward to go. Make sure that the number of "
                               "frames_per_batch is larger than number of steps per episode.")
        found = False
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            reward = tensordict.get(in_key, None)
            if reward is not None:
                found = True
                tensordict.set(out_key, _like(self._inv_apply_transform(host_array(reward), done), reward))
        if not found:
            raise KeyError(f"Could not find any of the input keys {[_key_str(k) for k in self.in_keys]}.")
        return tensordict

    def _inv_apply_transform(self, reward, done):
        if reward.shape != done.shape:
            raise ValueError(f"Reward2GoTransform: reward {list(reward.shape)} and done {list(done.shape)} must "
                             f"have the same shape")
        return _return_to_go(reward, done, float(self.gamma.item()))

    def forward(self, tensordict):
        return tensordict

    def _call(self, next_tensordict):
        raise ValueError(self.ENV_ERR)

    def __repr__(self):
        return f"Reward2GoTransform(gamma={float(self.gamma.item())}, in_keys={[_key_str(k) for k in self.in_keys]})"


# ---- actions --------------------------------------------------------------------------------------------

class ActionScaling(Transform):
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
        return None if self._loc is None else as_tensor(self._loc)

    @loc.setter
    def loc(self, value):
        self._loc = self._float(value, "loc")

    @property
    def scale(self):
        return None if self._scale is None else as_tensor(self._scale)

    @scale.setter
    def scale(self, value):
        self._scale = self._float(value, "scale")

    @property
    def initialized(self):
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


class DiscreteActionProjection(Transform):
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


# ---- episodes -------------------------------------------------------------------------------------------

class TrajCounter(Transform):
    """Numbers the trajectories: each reset (of each env, partial resets included) takes the next
    number of a counter the transform keeps, written to ``out_key`` (int64, shaped like ``done``)
    and carried through the episode's steps. Clones share nothing: in rlpipe's multi-process
    collectors each worker counts on its own (torchrl shares one counter between processes)."""

    def __init__(self, out_key="traj_count", *, repeats=None):
        super().__init__(in_keys=[], out_keys=[out_key])
        if repeats not in (None, 0):
            raise NotImplementedError("TrajCounter(repeats=...) is not supported by rlpipe")
        self.repeats = 0
        self._traj_count = 0
        self._initialized = False

    def _reset(self, tensordict, tensordict_reset):
        self._initialized = True
        shape = tuple(self._parent_spec("done")["done"].shape)
        reset = _reset_mask(tensordict, shape)
        count = int(reset.sum())
        episodes = np.zeros(shape, dtype=np.int64)
        episodes[reset] = np.arange(self._traj_count, self._traj_count + count)
        self._traj_count += count
        tensordict_reset.set(self.out_keys[0], as_tensor(episodes, device=tensordict_reset.device))
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        if not self._initialized:
            raise RuntimeError("_step was called before _reset was called.")
        next_tensordict.set(self.out_keys[0], tensordict.get(self.out_keys[0]))
        return next_tensordict

    def _call(self, next_tensordict):
        raise RuntimeError("TrajCounter can only be called within an environment step or reset.")

    def forward(self, tensordict):
        raise RuntimeError("TrajCounter can only be called within an environment step or reset.")

    def state_dict(self, prefix=""):
        return {prefix + "traj_count": self._traj_count}

    def load_state_dict(self, state_dict, strict=True):
        if set(state_dict) != {"traj_count"}:
            raise KeyError(f"TrajCounter.load_state_dict: expected the key 'traj_count', got {sorted(state_dict)}")
        self._traj_count = int(state_dict["traj_count"])

    def transform_observation_spec(self, observation_spec):
        shape = self._parent_spec("done")["done"].shape
        observation_spec[self.out_keys[0]] = Bounded(low=0, high=np.iinfo(np.int64).max, shape=shape,
                                                     dtype=_dtypes.int64, device=observation_spec.device)
        return observation_spec

    def __repr__(self):
        return f"TrajCounter(out_key={_key_str(self.out_keys[0])!r}, traj_count={self._traj_count})"


class TerminateTransform(Transform):
    """Ends an episode when ``stop(next_tensordict)`` is True: the flag (a bool, or a boolean
    tensor broadcasting to the done entries) is OR-ed into ``terminated`` (and so ``done``)."""

    def __init__(self, stop, *, write_done=True):
        if not callable(stop):
            raise ValueError("`stop` must be a callable.")
        if not write_done:
            raise NotImplementedError("TerminateTransform(write_done=False): done is always terminated | truncated "
                                      "on rlpipe's env protocol")
        super().__init__(in_keys=[], out_keys=[])
        self.stop = stop
        self.write_done = True

    def _step(self, tensordict, next_tensordict):
        flag = host_array(self.stop(next_tensordict))
        if flag.dtype != bool:
            flag = flag.astype(bool)
        terminated = host_array(next_tensordict.get(TERMINATED))
        while flag.ndim < terminated.ndim:
            flag = flag[..., None]
        try:
            flag = np.broadcast_to(flag, terminated.shape)
        except ValueError:
            raise ValueError(f"TerminateTransform: stop returned a flag of shape {list(flag.shape)}, which does not "
                             f"broadcast to the done entries' shape {list(terminated.shape)}") from None
        next_tensordict.set(TERMINATED, as_tensor(terminated | flag, device=next_tensordict.device))
        return next_tensordict

    def forward(self, tensordict):
        raise RuntimeError(f"class {type(self)} cannot be executed without a parent environment.")

    def __repr__(self):
        return f"TerminateTransform(stop={self.stop!r})"
