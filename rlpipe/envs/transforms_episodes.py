"""torchrl 0.14's transforms about returns and episodes, written on TensorDicts as torchrl's are
(``step_protocol.py``, THE RULE): ``TargetReturn``, ``Reward2GoTransform``, ``TrajCounter``,
``TerminateTransform``, ``RandomTruncationTransform``, ``TimeMaxPool``, ``RandomCropTensorDict``,
``ModuleTransform``, ``BurnInTransform``, ``NextStateReconstructor`` and ``gSDENoise``;
and, re-exported from ``transforms_actions.py``, the action transforms. Where rlpipe's env protocol
cannot express a torchrl option (an env takes one ``"action"`` input; ``done`` is always
``terminated | truncated``), the option raises ``NotImplementedError`` saying so.
"""
import multiprocessing as mp
import warnings
from contextlib import nullcontext

import numpy as np

from .. import _dtypes
from .._creation import as_tensor, tensor, zeros
from .._tensor import Tensor, host_array
from ..autograd import no_grad
from ..random import rand, randint, randn
from ..tensordict import unravel_key_to_tuple
from ..tensordict.nn import TensorDictModuleBase
from .specs import Bounded, Categorical, TensorSpec, Unbounded
from .step_protocol import REWARD, RESET, TERMINATED, TRUNCATED
from .transformed_env import Transform, TransformedEnv, _key_str, _keys
from .transforms_actions import ActionDiscretizer, ActionMask, ActionScaling, DiscreteActionProjection, _like

__all__ = ["ActionDiscretizer", "ActionMask", "ActionScaling", "BurnInTransform", "DiscreteActionProjection",
           "ModuleTransform", "NextStateReconstructor", "RandomCropTensorDict",
           "RandomTruncationTransform", "Reward2GoTransform", "TargetReturn", "TerminateTransform", "TimeMaxPool",
           "TrajCounter", "gSDENoise"]

_DONE = ("done",)


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

    def _restart(self, shape, reset, last):
        """The targets after a reset: ``target_return`` where ``reset``, ``last`` elsewhere (host arrays)."""
        start = np.full(shape, self.target_return, dtype=np.float32)  # torchrl's dtype, whatever the reward's
        return start if last is None else np.where(reset, start, last)

    def _reset(self, tensordict, tensordict_reset):
        shape = tuple(tensordict.batch_size) + (1,)
        reset = _reset_mask(tensordict, shape)
        for out_key in self.out_keys:
            last = tensordict.get(out_key, None)
            start = self._restart(shape, reset, None if last is None else host_array(last))
            tensordict_reset.set(out_key, as_tensor(start, device=tensordict_reset.device))
        return tensordict_reset

    # the frame hooks: the same formulas on arrays (TargetReturn may run in a collector's loop)
    def _frame_reset(self, frame):
        out = dict(frame)
        shape = tuple(self._batch_size()) + (1,)
        for out_key in self.out_keys:
            out[out_key] = self._restart(shape, True, None)
        return out

    def _frame_step(self, root, next_frame, action):
        out = dict(next_frame)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in next_frame:
                out[out_key] = self._apply_transform(next_frame[in_key], root[out_key])
            elif not self.missing_tolerance:
                raise KeyError(f"TargetReturn: '{_key_str(in_key)}' not found in the step's output (keys: "
                               f"{sorted(map(str, next_frame))})")
            else:
                out[out_key] = root[out_key]
        return out

    def _frame_continue(self, next_frame, frame, done):
        out = dict(frame)
        for out_key in self.out_keys:
            last = next_frame[out_key]
            out[out_key] = self._restart(last.shape, done, last)
        return out

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
    ``forward`` (a sample) leaves data unchanged; in an env it is an error, as in torchrl. A
    ``ReplayBuffer`` given it (``append_transform(t)``) runs ``inv`` on what it writes.
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

    def transform_observation_spec(self, observation_spec):
        raise ValueError(self.ENV_ERR)  # (reached inside a Compose that an env holds)

    def __repr__(self):
        return f"Reward2GoTransform(gamma={float(self.gamma.item())}, in_keys={[_key_str(k) for k in self.in_keys]})"


# ---- episodes -------------------------------------------------------------------------------------------

class TrajCounter(Transform):
    """Numbers the trajectories: each reset (of each env, partial resets included) takes the next
    number of a counter the transform keeps, written to ``out_key`` (int64, shaped like ``done``)
    and carried through the episode's steps. The counter is a tensor updated in place under a
    multiprocessing lock, so the envs an ``EnvCreator`` builds (forked ``ParallelEnv`` workers
    included) share one counter, as torchrl's; clones count on their own."""

    def __init__(self, out_key="traj_count", *, repeats=None):
        super().__init__(in_keys=[], out_keys=[out_key])
        if repeats not in (None, 0):
            raise NotImplementedError("TrajCounter(repeats=...) is not supported by rlpipe")
        self.repeats = 0
        self._counter = zeros((), dtype=_dtypes.int64)  # (a tensor: an EnvCreator shares it between processes)
        self.lock = mp.Lock()
        self._initialized = False

    @property
    def _traj_count(self):
        return int(self._counter)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["lock"] = None  # a multiprocessing lock pickles only when a process is spawned
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.lock = mp.Lock()

    def _numbers(self, reset):
        """New trajectory numbers where ``reset`` (a bool host array), 0 elsewhere."""
        self._initialized = True
        count = int(reset.sum())
        episodes = np.zeros(reset.shape, dtype=np.int64)
        with self.lock:
            start = int(self._counter)
            self._counter.add_(count)
        episodes[reset] = np.arange(start, start + count)
        return episodes

    def _reset(self, tensordict, tensordict_reset):
        reset = _reset_mask(tensordict, tuple(self._parent_spec("done")["done"].shape))
        tensordict_reset.set(self.out_keys[0], as_tensor(self._numbers(reset), device=tensordict_reset.device))
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        if not self._initialized:
            raise RuntimeError("_step was called before _reset was called.")
        next_tensordict.set(self.out_keys[0], tensordict.get(self.out_keys[0]))
        return next_tensordict

    # the frame hooks: the same on arrays (TrajCounter may run in a collector's loop)
    def _frame_reset(self, frame):
        out = dict(frame)
        out[self.out_keys[0]] = self._numbers(np.ones(tuple(self._parent_spec("done")["done"].shape), dtype=bool))
        return out

    def _frame_step(self, root, next_frame, action):
        out = dict(next_frame)
        out[self.out_keys[0]] = root[self.out_keys[0]]
        return out

    def _frame_continue(self, next_frame, frame, done):
        out = dict(frame)
        key = self.out_keys[0]
        out[key] = np.where(done, self._numbers(done), next_frame[key])
        return out

    def _call(self, next_tensordict):
        raise RuntimeError("TrajCounter can only be called within an environment step or reset.")

    def forward(self, tensordict):
        raise RuntimeError("TrajCounter can only be called within an environment step or reset.")

    def state_dict(self, prefix=""):
        """The counter (the next number), as a 0-dim int64 tensor."""
        return {prefix + "traj_count": self._counter}

    def load_state_dict(self, state_dict, strict=True):
        if set(state_dict) != {"traj_count"}:
            raise KeyError(f"TrajCounter.load_state_dict: expected the key 'traj_count', got {sorted(state_dict)}")
        value = state_dict["traj_count"]
        # a shared counter is adopted (an EnvCreator's envs count together), any other value copied
        self._counter = value if isinstance(value, Tensor) and value.is_shared() else tensor(int(value))

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


def _positive_int(value, name, owner):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{owner}: {name} must be an int >= 1, got {value!r}")
    return int(value)


class RandomTruncationTransform(Transform):
    """Truncates episodes at random horizons so that envs started together drift apart.

    At the first reset each env draws a horizon uniformly in [1, ``max_horizon``]; at each later
    (partial) reset an env draws one in [``min_horizon``, ``max_horizon``] with probability
    ``prob`` (``first_episode_prob`` for its first episode after the spread), else gets
    ``max_horizon``. A step whose ``step_count`` (from a ``StepCounter`` placed before) reaches
    the horizon sets ``truncated``. Horizons come from rlpipe's global generator.
    """

    def __init__(self, min_horizon, max_horizon, prob=0.0, first_episode_prob=None, *, step_count_key="step_count",
                 truncated_key="truncated", done_key="done"):
        super().__init__()
        first_episode_prob = prob if first_episode_prob is None else first_episode_prob
        for name, value in (("prob", prob), ("first_episode_prob", first_episode_prob)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if min_horizon < 1:
            raise ValueError(f"min_horizon must be >= 1, got {min_horizon}")
        if max_horizon < 1:
            raise ValueError(f"max_horizon must be >= 1, got {max_horizon}")
        if min_horizon > max_horizon:
            raise ValueError(f"min_horizon ({min_horizon}) must be <= max_horizon ({max_horizon})")
        if unravel_key_to_tuple(truncated_key) != TRUNCATED or unravel_key_to_tuple(done_key) != _DONE:
            raise NotImplementedError("RandomTruncationTransform: rlpipe envs have one 'truncated' and one 'done' key")
        self.prob, self.first_episode_prob = float(prob), float(first_episode_prob)
        self.min_horizon, self.max_horizon = int(min_horizon), int(max_horizon)
        self.step_count_key, self.truncated_key, self.done_key = step_count_key, truncated_key, done_key
        self._count_key = unravel_key_to_tuple(step_count_key)
        self._horizons = self._first_episode = None

    @property
    def _initialized(self):
        return self._horizons is not None

    def _draw(self, low, shape):
        return host_array(randint(low, self.max_horizon + 1, shape))

    def _reset(self, tensordict, tensordict_reset):
        step_count = tensordict_reset.get(self._count_key, None)
        if step_count is None:
            return tensordict_reset
        shape = tuple(step_count.shape)
        if self._horizons is None or self._horizons.shape != shape:  # the first reset: spread the horizons
            self._horizons = self._draw(1, shape)
            self._first_episode = np.ones(shape, dtype=bool)
            return tensordict_reset
        reset = tensordict.get(RESET, None)
        mask = None if reset is None else host_array(reset).reshape(shape)
        if mask is not None and mask.any():
            count = int(mask.sum())
            new = self._draw(self.min_horizon, (count,))
            prob = np.where(self._first_episode[mask], self.first_episode_prob, self.prob)
            new[host_array(rand(count, dtype=_dtypes.float64)) >= prob] = self.max_horizon
            self._horizons[mask] = new
            self._first_episode[mask] = False
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        step_count = next_tensordict.get(self._count_key, None)
        if step_count is None or self._horizons is None:
            return next_tensordict
        reached = host_array(step_count) >= self._horizons
        truncated = host_array(next_tensordict.get(TRUNCATED))
        next_tensordict.set(TRUNCATED, as_tensor(truncated | reached, device=next_tensordict.device))
        return next_tensordict

    def transform_done_spec(self, done_spec):
        observations = self._parent_spec("observation")
        if self._count_key not in {unravel_key_to_tuple(k) for k in observations.keys(True, True)}:
            raise RuntimeError(f"RandomTruncationTransform requires a StepCounter earlier in the transform chain that "
                               f"writes the {self.step_count_key!r} step-count key. Use:\n"
                               f"  Compose(StepCounter(), RandomTruncationTransform(...))")
        if TRUNCATED not in {unravel_key_to_tuple(k) for k in done_spec.keys(True, True)}:
            done_spec[TRUNCATED] = Categorical(2, shape=done_spec["done"].shape, dtype=_dtypes.bool,
                                               device=done_spec.device)
        return done_spec

    def forward(self, tensordict):
        raise NotImplementedError("RandomTruncationTransform cannot be called independently, only its step and reset "
                                  "methods are functional.")

    def __repr__(self):
        return (f"RandomTruncationTransform(min_horizon={self.min_horizon}, max_horizon={self.max_horizon}, "
                f"prob={self.prob}, first_episode_prob={self.first_episode_prob})")


# ---- observations and sequences -------------------------------------------------------------------------

class TimeMaxPool(Transform):
    """The elementwise maximum of each ``in_keys`` observation over the last ``T`` steps, as
    torchrl's: the window is a buffer of ``T`` entries that a reset fills with zeros, so the
    first values of an episode are pooled with zeros too (a negative observation reads 0)."""

    def __init__(self, in_keys=None, out_keys=None, T=1, reset_key=None):
        in_keys = _keys(in_keys, "in_keys", allow_none=True) or [("observation",)]
        out_keys = list(in_keys) if out_keys is None else _keys(out_keys, "out_keys")
        if T < 1:
            raise ValueError("TimeMaxPoolTransform T parameter should have a value greater or equal to one.")
        if len(in_keys) != len(out_keys):
            raise ValueError("TimeMaxPoolTransform in_keys and out_keys don't have the same number of elements")
        if reset_key is not None and unravel_key_to_tuple(reset_key) != RESET:
            raise NotImplementedError(f"TimeMaxPool: rlpipe envs have one reset key, '_reset'; got {reset_key!r}")
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.buffer_size = int(T)
        self.reset_key = "_reset"

    @staticmethod
    def _buffer_name(in_key):
        """The attribute holding ``in_key``'s window (torchrl's name for it)."""
        return "_maxpool_buffer_" + "_".join(in_key)

    def _windows(self):
        return [w for w in (self.__dict__.get(self._buffer_name(k)) for k in self.in_keys) if w is not None]

    def _reset(self, tensordict, tensordict_reset):
        rows = _reset_mask(tensordict, tuple(tensordict.batch_size))
        for buffer in self._windows():
            buffer[:, rows] = 0
        for in_key in self.in_keys:
            if tensordict_reset.get(in_key, None) is None:
                previous = tensordict.get(in_key, None)
                if previous is None:
                    raise KeyError(f"Could not find {_key_str(in_key)} in the reset data.")
                tensordict_reset.set(in_key, previous)
        return self._pool(tensordict_reset, rows)

    def _call(self, next_tensordict):
        return self._pool(next_tensordict, np.ones(tuple(next_tensordict.batch_size), dtype=bool))

    def _pool(self, tensordict, rows):
        """Pushes the rows ``rows`` of each in key into its window; their max goes to the out key."""
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict.get(in_key)
            data = host_array(value)
            buffer = self.__dict__.get(self._buffer_name(in_key))
            if buffer is None or buffer.shape[1:] != data.shape:
                buffer = np.zeros((self.buffer_size,) + data.shape, dtype=data.dtype)
                setattr(self, self._buffer_name(in_key), buffer)
            window = np.roll(buffer[:, rows], 1, axis=0)
            window[0] = data[rows]
            buffer[:, rows] = window
            pooled = np.zeros_like(data)
            pooled[rows] = window.max(axis=0)
            tensordict.set(out_key, _like(pooled, value))
        return tensordict

    def forward(self, tensordict):
        raise NotImplementedError("TimeMaxPool cannot be called independently, only its step and reset methods are "
                                  "functional (it pools over the steps of an env).")

    def transform_observation_spec(self, observation_spec):
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if out_key != in_key:
                observation_spec[out_key] = observation_spec[in_key].clone()
        return observation_spec

    def __repr__(self):
        return f"TimeMaxPool(in_keys={[_key_str(k) for k in self.in_keys]}, T={self.buffer_size})"


class RandomCropTensorDict(Transform):
    """A replay-buffer (or module) transform: a random window of ``sub_seq_len`` consecutive
    steps along ``sample_dim`` of each sampled sequence. With ``mask_key`` (valid steps first,
    then padding) the window lies within each sequence's valid steps. Every window is equally
    likely (torchrl 0.14 never draws the last one)."""

    def __init__(self, sub_seq_len, sample_dim=-1, mask_key=None):
        self.sub_seq_len = _positive_int(sub_seq_len, "sub_seq_len", "RandomCropTensorDict")
        if sample_dim > 0:
            warnings.warn("A positive shape has been passed to the RandomCropTensorDict constructor. This may have "
                          "unexpected behaviors when the passed tensordicts have inconsistent batch dimensions.",
                          stacklevel=2)
        self.sample_dim = sample_dim
        self.mask_key = mask_key
        super().__init__()

    def _starts(self, tensordict, idx_shape):
        """The first step of each window, shaped ``idx_shape``."""
        dim, length = self.sample_dim, tensordict.shape[self.sample_dim]
        mask = None if self.mask_key is None else tensordict.get(self.mask_key, None)
        if mask is None:
            return host_array(randint(length - self.sub_seq_len + 1, idx_shape))
        if tuple(mask.shape) != tuple(tensordict.shape):
            raise ValueError(f"Expected a mask of the same shape as the tensordict. Got mask.shape={list(mask.shape)} "
                             f"and tensordict.shape={list(tensordict.shape)} instead.")
        lengths = host_array(mask).astype(np.int64).cumsum(dim).max(dim, keepdims=True)
        if (lengths < self.sub_seq_len).any():
            raise RuntimeError(f"Cannot sample trajectories of length {self.sub_seq_len} when the minimum trajectory "
                               f"length is {int(lengths.min())}.")
        uniform = host_array(rand(*idx_shape, dtype=_dtypes.float64))
        return (uniform * (lengths - self.sub_seq_len + 1)).astype(np.int64)

    def forward(self, tensordict):
        shape = tuple(tensordict.shape)
        if not shape:
            raise RuntimeError("Cannot sub-sample from a tensordict with an empty shape.")
        dim = self.sample_dim
        if shape[dim] < self.sub_seq_len:
            raise RuntimeError(f"Cannot sample trajectories of length {self.sub_seq_len} along dimension {dim} given a "
                               f"tensordict of shape {list(shape)}. Consider reducing the sub_seq_len parameter or "
                               f"increase sample length.")
        idx_shape = list(shape)
        idx_shape[dim] = 1
        steps_shape = [1] * len(shape)
        steps_shape[dim] = self.sub_seq_len
        index = self._starts(tensordict, tuple(idx_shape)) + np.arange(self.sub_seq_len).reshape(steps_shape)
        return tensordict.gather(dim=dim, index=as_tensor(index, device=tensordict.device))

    def _reset(self, tensordict, tensordict_reset):
        raise RuntimeError("RandomCropTensorDict is a replay-buffer transform: it cannot be used in an env")

    def __repr__(self):
        return f"RandomCropTensorDict(sub_seq_len={self.sub_seq_len}, sample_dim={self.sample_dim})"




class NextStateReconstructor(Transform):
    """A replay-buffer transform for data stored without ``("next", k)`` observations (a
    collector's ``compact_obs``): in a flat sample, ``("next", k)[i] = k[i + 1]`` where position
    ``i + 1`` is the next step of the same trajectory (same ``traj_key``, no ``done_key`` at ``i``,
    and with ``step_count_key`` a count one higher), else ``fill_value``. ``strict``: a missing
    marker key is a KeyError (else its check is dropped)."""

    def __init__(self, keys=("observation",), *, traj_key=("collector", "traj_ids"), done_key=("next", "done"),
                 step_count_key=None, fill_value=float("nan"), strict=True):
        super().__init__()
        self.keys = tuple(unravel_key_to_tuple(k) for k in ([keys] if isinstance(keys, str) else keys))
        self.traj_key, self.done_key, self.step_count_key = traj_key, done_key, step_count_key
        self.fill_value = fill_value
        self.strict = bool(strict)

    def _marker(self, tensordict, key, what, size):
        """The ``key`` entry as a host array of ``size`` rows (its first element per row), or None."""
        value = tensordict.get(unravel_key_to_tuple(key), None)
        if value is None:
            if self.strict:
                raise KeyError(f"NextStateReconstructor: {what} {key!r} is not present in the sampled batch. Pass the "
                               "corresponding constructor kwarg explicitly (or `None` to disable), or `strict=False` "
                               "to drop the check silently.")
            return None
        array = host_array(value)
        if array.shape[0] != size:
            raise ValueError(f"NextStateReconstructor: marker tensor has leading dim {array.shape[0]} but sample "
                             f"batch size is {size}.")
        return array.reshape(size, -1)[:, 0]

    def _next_is_valid(self, tensordict, size):
        """Per position: whether position + 1 is its next step (host bool array)."""
        valid = np.arange(size) < size - 1
        checks = ((self.traj_key, "trajectory key", lambda m: m[1:] == m[:-1]),
                  (self.done_key, "done key", lambda m: ~m[:-1].astype(bool)),
                  (self.step_count_key, "step-count key", lambda m: m[1:] == m[:-1] + 1))
        for key, what, same_trajectory in checks:
            marker = None if key is None else self._marker(tensordict, key, what, size)
            if marker is not None and size > 1:
                valid[:-1] &= same_trajectory(marker)
        return valid

    def forward(self, tensordict):
        if tensordict.batch_dims != 1:
            raise ValueError(f"NextStateReconstructor expects a flat ``(B,)`` sample. Got batch_size="
                             f"{tuple(tensordict.batch_size)}. Reshape or use a 1-d storage / sampler combination.")
        size = tensordict.batch_size[0]
        if size < 1:
            return tensordict
        valid = self._next_is_valid(tensordict, size)
        for key in self.keys:
            value = tensordict.get(key)
            root = host_array(value)
            if root.dtype.kind != "f" and isinstance(self.fill_value, float) and np.isnan(self.fill_value):
                raise TypeError(f"NextStateReconstructor: root key {_key_str(key)!r} has non-floating dtype "
                                f"{value.dtype}; pass an explicit integer `fill_value` for this key (NaN cannot be "
                                "represented).")
            shifted = np.concatenate([root[1:], root[:1]])
            rows = valid.reshape((size,) + (1,) * (root.ndim - 1))
            tensordict.set(("next",) + key, _like(np.where(rows, shifted, root.dtype.type(self.fill_value)), value))
        return tensordict

    def __repr__(self):
        return f"NextStateReconstructor(keys={[_key_str(k) for k in self.keys]}, traj_key={self.traj_key!r})"



class gSDENoise(Transform):
    """The exploration noise of a gSDE module (``"_eps_gSDE"``) as an env entry, as torchrl's
    ``TensorDictPrimer`` of it: a reset sets it (standard normal of shape ``(action_dim,
    state_dim)`` when both dims are given, else zeros of shape ``(1,)``, after the env's batch
    dims or ``shape``) and each step carries it over; ``forward`` sets a fresh one. TensorDictPrimer's
    other options (``kwargs``) are not supported."""

    KEY = ("_eps_gSDE",)

    def __init__(self, state_dim=None, action_dim=None, shape=None, **kwargs):
        if kwargs:
            raise NotImplementedError(f"gSDENoise: TensorDictPrimer options {sorted(kwargs)} are not supported by "
                                      "rlpipe")
        super().__init__(in_keys=[], out_keys=[self.KEY])
        self.state_dim, self.action_dim = state_dim, action_dim
        self.shape = () if shape is None else tuple(shape)
        self.random = state_dim is not None and action_dim is not None
        self._tail = (action_dim, state_dim) if self.random else (1,)

    def _full_shape(self, batch_size):
        return (self.shape or tuple(batch_size)) + self._tail

    def _reset(self, tensordict, tensordict_reset):
        return self._prime(tensordict_reset)

    def _prime(self, tensordict):
        """``tensordict`` with a fresh noise entry."""
        shape = self._full_shape(tensordict.batch_size)
        if tuple(shape[:tensordict.batch_dims]) != tuple(tensordict.batch_size):
            raise RuntimeError(f"The leading shape of the spec must match the tensordict's, but it does not: got "
                               f"tensordict.shape={list(tensordict.batch_size)} whereas the noise's shape is "
                               f"{list(shape)}.")
        noise = randn(*shape) if self.random else np.zeros(shape, dtype=np.float32)
        tensordict.set(self.KEY, _like(host_array(noise), tensordict))
        return tensordict

    def _step(self, tensordict, next_tensordict):
        if next_tensordict.get(self.KEY, None) is None:
            next_tensordict.set(self.KEY, tensordict.get(self.KEY))
        return next_tensordict

    def forward(self, tensordict):
        """Sets a fresh noise entry (a replay buffer's sample, or a policy's input)."""
        return self._prime(tensordict)

    def transform_observation_spec(self, observation_spec):
        observation_spec[self.KEY] = Unbounded(shape=self._full_shape(observation_spec.shape),
                                               device=observation_spec.device)
        return observation_spec

    def __repr__(self):
        return f"gSDENoise(state_dim={self.state_dim}, action_dim={self.action_dim}, random={self.random})"


# ---- modules --------------------------------------------------------------------------------------------

class ModuleTransform(Transform):
    """A TensorDict module as a transform: ``module`` (or ``module_factory()``) runs on each step's
    output (``_call``, and ``forward`` for a replay buffer), or with ``inverse=True`` on the input
    before the env steps. ``no_grad``: without building a graph. ``<name>_spec_transform``: the
    spec the module's output has, or a function of the spec before it (default: unchanged)."""

    def __init__(self, *, module=None, module_factory=None, no_grad=False, inverse=False, device=None,
                 use_ray_service=False, actor_name=None, num_gpus=None, num_cpus=None,
                 observation_spec_transform=None, action_spec_transform=None, reward_spec_transform=None,
                 done_spec_transform=None, state_spec_transform=None):
        if module is None and module_factory is None:
            raise ValueError("At least one of `module` or `module_factory` must be provided.")
        if module is not None and module_factory is not None:
            raise ValueError("Only one of `module` or `module_factory` must be provided.")
        if use_ray_service or actor_name is not None or num_gpus or num_cpus:
            raise NotImplementedError("ModuleTransform: the Ray service options are not supported by rlpipe")
        module = module if module is not None else module_factory()
        if not callable(module):
            raise TypeError(f"ModuleTransform: module must be callable, got {type(module).__name__}")
        if device is not None:
            module = module.to(device)
        keys_in, keys_out = list(getattr(module, "in_keys", [])), list(getattr(module, "out_keys", []))
        super().__init__(in_keys=[] if inverse else keys_in, out_keys=[] if inverse else keys_out,
                         in_keys_inv=keys_out if inverse else [], out_keys_inv=keys_in if inverse else [])
        self.module, self.no_grad, self.inverse = module, bool(no_grad), bool(inverse)
        self.observation_spec_transform = observation_spec_transform
        self.action_spec_transform = action_spec_transform
        self.reward_spec_transform = reward_spec_transform
        self.done_spec_transform = done_spec_transform
        self.state_spec_transform = state_spec_transform

    def _run(self, tensordict):
        with no_grad() if self.no_grad else nullcontext():
            return self.module(tensordict)

    def forward(self, tensordict):
        return self._call(tensordict)

    def _call(self, next_tensordict):
        return next_tensordict if self.inverse else self._run(next_tensordict)

    def _inv_call(self, tensordict):
        return self._run(tensordict) if self.inverse else tensordict

    def _spec(self, name, spec):
        change = getattr(self, name + "_spec_transform")
        if change is None:
            return spec
        return change if isinstance(change, TensorSpec) else change(spec)

    def transform_observation_spec(self, observation_spec):
        return self._spec("observation", observation_spec)

    def transform_action_spec(self, action_spec):
        return self._spec("action", action_spec)

    def transform_reward_spec(self, reward_spec):
        return self._spec("reward", reward_spec)

    def transform_done_spec(self, done_spec):
        return self._spec("done", done_spec)

    def transform_state_spec(self, state_spec):
        return self._spec("state", state_spec)

    def __repr__(self):
        return f"ModuleTransform(module={self.module!r}, inverse={self.inverse})"


class BurnInTransform(Transform):
    """A replay-buffer transform for recurrent policies: of sampled ``[B, T]`` sequences, runs
    ``modules`` without a graph over the first ``burn_in`` steps and returns the other ``T -
    burn_in`` steps, whose first step's ``out_keys`` (the recurrent states, read from ``"next"``
    of the last burnt-in step) are those the modules reached."""

    def __init__(self, modules, burn_in, out_keys=None):
        modules = list(modules) if isinstance(modules, (list, tuple)) else [modules]
        for module in modules:
            if not isinstance(module, TensorDictModuleBase):
                raise ValueError(f"All modules must be TensorDictModules, but a {type(module)} was provided.")
        if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < 0:
            raise ValueError(f"BurnInTransform: burn_in must be an int >= 0, got {burn_in!r}")
        in_keys = sorted({unravel_key_to_tuple(k) for m in modules for k in m.in_keys})
        if out_keys is None:
            out_keys = sorted({unravel_key_to_tuple(k)[1:] for m in modules for k in m.out_keys
                               if unravel_key_to_tuple(k)[0] == "next"})
        else:
            out_keys = [self._without_next(unravel_key_to_tuple(k)) for k in out_keys]
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.modules = modules
        self.burn_in = int(burn_in)

    @staticmethod
    def _without_next(key):
        if key[0] != "next":
            return key
        warnings.warn(f"The 'next' key is not needed in the BurnInTransform `out_key` {key} and will be ignored. This "
                      "transform already assumes that `out_keys` will be retrieved from the next time step of the "
                      "burnt-in data.", stacklevel=3)
        return key[1:]

    def _call(self, next_tensordict):
        raise RuntimeError("BurnInTransform can only be appended to a ReplayBuffer")

    def _step(self, tensordict, next_tensordict):
        raise RuntimeError("BurnInTransform can only be appended to a ReplayBuffer.")

    def forward(self, tensordict):
        if self.burn_in == 0:
            return tensordict
        if tensordict.batch_dims < 2 or tensordict.batch_size[1] <= self.burn_in:
            raise ValueError(f"BurnInTransform: expected [B, T] sequences with T > burn_in={self.burn_in}, got a batch "
                             f"of {list(tensordict.batch_size)}")
        burnt, out = tensordict[:, :self.burn_in], tensordict[:, self.burn_in:]
        with no_grad():
            for module in self.modules:
                burnt = module(burnt)
        for key in self.out_keys:
            state = burnt.get(("next",) + key)[:, -1]
            value = out.get(key, None)
            value = state.new_zeros((out.batch_size[0], out.batch_size[1]) + tuple(state.shape[1:])) \
                if value is None else value.clone()
            value[:, 0] = state
            out.set(key, value)
        return out

    def __repr__(self):
        return (f"BurnInTransform(burn_in={self.burn_in}, in_keys={[_key_str(k) for k in self.in_keys]}, "
                f"out_keys={[_key_str(k) for k in self.out_keys]})")
