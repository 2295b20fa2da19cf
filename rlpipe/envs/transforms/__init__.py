"""torchrl's common transforms, on the array fast path of the env step protocol (``step_protocol.py``):
``StepCounter``, ``RewardSum``, ``DoubleToFloat``, ``ObservationNorm`` and ``RenameTransform``, with
torchrl 0.14's names and behaviour; and rlpipe's own ``CheckFinite``. ``Transform``, ``Compose`` and
``TransformedEnv`` are importable from here too, as from torchrl's ``envs.transforms``.
"""
from functools import wraps

import numpy as np

from ... import _dtypes
from ..._creation import as_tensor
from ..._tensor import Tensor, host_array
from ...tensordict import unravel_key_to_tuple
from ..specs import Bounded, Categorical, Composite, Unbounded
from ..step_protocol import REWARD as _REWARD, TERMINATED as _TERMINATED, TRUNCATED as _TRUNCATED
from ..step_protocol import ArrayMapping, _done_like, map_tensordict
from ..transformed_env import Compose, Transform, TransformedEnv, _key_str, _keys
from .. import transforms_keys as _keys_t, transforms_tensors as _tensors, transforms_vecnorm as _vecnorm
from ..transforms_keys import *  # noqa: F401,F403  (torchrl's transforms of entries and keys)
from ..transforms_tensors import *  # noqa: F401,F403
from ..transforms_misc import DTypeCastTransform, _map_frame
from ..transforms_tensors import check_paired_keys
from ..transforms_vecnorm import *  # noqa: F401,F403
from ..transforms_image import *  # noqa: F401,F403  (torchrl's image transforms and CatFrames)
from ..transforms_image import __all__ as _image_all
from ..autoreset import AutoResetEnv, AutoResetTransform

__all__ = ["AutoResetEnv", "AutoResetTransform",
           "CheckFinite", "Compose", "DoubleToFloat", "ObservationNorm", "RenameTransform", "RewardSum", "StepCounter",
           "Transform", "TransformedEnv"]
__all__ += _keys_t.__all__ + _tensors.__all__ + _vecnorm.__all__
__all__ += _image_all

def _apply_to_composite(function):
    """Decorates a ``transform_observation_spec(self, spec)`` written for one leaf spec: given a
    Composite, it runs on a copy of each ``in_keys`` leaf present and stores the result at the
    matching ``out_keys`` entry (torchrl's helper, imported by custom transforms)."""
    @wraps(function)
    def per_key(self, observation_spec):
        if not isinstance(observation_spec, Composite):
            return function(self, observation_spec)
        result = observation_spec.clone()
        present = {unravel_key_to_tuple(key) for key in observation_spec.keys(True, True)}
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if unravel_key_to_tuple(in_key) in present:
                result[out_key] = function(self, observation_spec[in_key].clone())
        return result
    return per_key


_ONE = np.ones((), dtype=np.int64)
_DONE = ("done",)
_RESERVED = frozenset((_REWARD, _TERMINATED, _TRUNCATED, _DONE, ("action",)))


def _bounds(spec):
    return host_array(spec.low), host_array(spec.high)


class StepCounter(Transform):
    """Counts the steps since each env's reset and optionally truncates episodes.

    The root ``step_count`` (int64, ``batch_size + (1,)``) is 0 after a reset; a step writes
    ``("next", "step_count") = step_count + 1``. With ``max_steps``, a step whose count reaches
    ``max_steps`` sets ``truncated`` (and so ``done``) True; the env restarts the count of every
    env that is done when the episode continues (``_continue_frame``), each at its own reset.
    """

    def __init__(self, max_steps=None, truncated_key="truncated", step_count_key="step_count", update_done=True):
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer))):
            raise TypeError(f"max_steps must be an int or None, got {type(max_steps).__name__}")
        if max_steps is not None and max_steps < 1:
            raise ValueError("max_steps should have a value greater or equal to one.")
        if not isinstance(truncated_key, str):
            raise TypeError("truncated_key must be a string.")
        if not isinstance(step_count_key, str):
            raise TypeError("step_count_key must be a string.")
        if not update_done:
            raise NotImplementedError("StepCounter(update_done=False): done is always terminated | truncated "
                                      "on rlpipe's frame protocol")
        super().__init__(in_keys=[], out_keys=[step_count_key])
        self.max_steps = None if max_steps is None else int(max_steps)
        self.truncated_key = truncated_key
        self.step_count_key = step_count_key
        self.update_done = update_done
        self._key = (step_count_key,)
        self._trunc = (truncated_key,)
        if self._trunc != _TRUNCATED:
            raise NotImplementedError("StepCounter: on rlpipe's frame protocol the truncated key is 'truncated'")
        self._shape = None

    def _zeros(self):
        if self._shape is None:
            self._shape = tuple(self._parent_spec("done")["done"].shape)
        return np.zeros(self._shape, dtype=np.int64)

    def _frame_reset(self, frame):
        out = dict(frame)
        out[self._key] = self._zeros()
        return out

    def _frame_step(self, root, next_frame, action):
        count = root[self._key] + _ONE  # (an array operand: NumPy converts a Python 1 slowly)
        out = dict(next_frame)
        out[self._key] = count
        if self.max_steps is not None:
            out[_TRUNCATED] = next_frame[_TRUNCATED] | (count >= self.max_steps)
        return out

    def _frame_continue(self, next_frame, frame, done):
        out = dict(frame)
        count = next_frame.get(self._key)
        out[self._key] = self._zeros() if count is None else np.where(done, 0, count)
        return out

    # torchrl's TensorDict methods, for a StepCounter driven by hand (the env runs the frame hooks above)
    def _reset(self, tensordict, tensordict_reset):
        """``step_count`` 0 where ``"_reset"`` is set (everywhere without it), else kept."""
        count = tensordict.get(self._key, None)
        reset = tensordict.get("_reset", None)
        if count is None or reset is None:
            done = tensordict.get("done", None)
            done = tensordict_reset.get("done") if done is None else done  # (a first reset: no input flags)
            count = (done if count is None else count).to(_dtypes.int64 if count is None else count.dtype)
            reset = as_tensor(np.ones(tuple(count.shape), dtype=bool), device=count.device)
        tensordict_reset.set(self._key, count.masked_fill(reset, 0))
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        """``("next", "step_count") = step_count + 1``; with ``max_steps``, ``truncated`` and
        ``done`` set where the count reaches it."""
        count = tensordict.get(self._key) + 1
        next_tensordict.set(self._key, count)
        if self.max_steps is not None:
            truncated = count >= self.max_steps
            for key in (_TRUNCATED, ("done",)):
                before = next_tensordict.get(key, None)
                next_tensordict.set(key, truncated if before is None else before | truncated)
        return next_tensordict

    def forward(self, tensordict):
        raise NotImplementedError("StepCounter cannot be called independently, only its step and reset "
                                  "methods are functional (use it in a TransformedEnv).")

    def transform_observation_spec(self, observation_spec):
        shape = self.parent_specs.done_spec["done"].shape if self.parent_specs is not None else \
            self._parent_spec("done")["done"].shape
        self._shape = tuple(shape)
        observation_spec[self._key] = Bounded(low=0, high=np.iinfo(np.int64).max, shape=shape,
                                              dtype=_dtypes.int64, device=observation_spec.device)
        return observation_spec

    def transform_done_spec(self, done_spec):
        if self.max_steps is not None and self._trunc not in done_spec.keys(True, True):
            done_spec[self._trunc] = Categorical(2, shape=done_spec["done"].shape, dtype=_dtypes.bool,
                                                 device=done_spec.device)
        return done_spec

    def __repr__(self):
        return f"StepCounter(max_steps={self.max_steps}, step_count_key={self.step_count_key!r})"


class RewardSum(Transform):
    """The running return of each episode: ``("next", out_key) = out_key + reward`` at every step,
    0 after a reset. ``in_keys`` default to ``["reward"]``, ``out_keys`` to ``["episode_reward"]``
    (``episode_`` + the in key's last name); the sums are observations (in the observation spec).
    Outside an env, calling it writes each in key's cumulative sum along the dim named ``"time"``
    (torchrl's offline mode). ``reset_keys``: the ``"_reset"`` entry of each in key, for the
    TensorDict methods used without an env (an rlpipe env has one, ``"_reset"``)."""

    def __init__(self, in_keys=None, out_keys=None, reset_keys=None, *, reward_spec=False):
        in_keys = _keys(in_keys, "in_keys", allow_none=True) or [_REWARD]
        if out_keys is None:
            out_keys = [k[:-1] + ("episode_" + k[-1],) for k in in_keys]
        out_keys = _keys(out_keys, "out_keys")
        if len(in_keys) != len(out_keys):
            raise ValueError(f"RewardSum expects the same number of input and output keys, got in_keys "
                             f"{[_key_str(k) for k in in_keys]} and out_keys {[_key_str(k) for k in out_keys]}")
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._reset_keys = None if reset_keys is None else [_key_str(k) for k in _keys(reset_keys, "reset_keys")]
        self.reward_spec = bool(reward_spec)
        self._pairs = list(zip(self.in_keys, self.out_keys))
        self._zero = {}

    @property
    def reset_keys(self):
        """The reset entry of each in key: those given, else the env's ``"_reset"`` for every in key."""
        keys = self._reset_keys
        if keys is None:
            if self.parent is None:
                raise TypeError("reset_keys not provided but parent env not found. Make sure that the reset_keys "
                                "are provided during construction if the transform does not have a container env.")
            keys = ["_reset"] * len(self.in_keys)
        if len(keys) != len(self.in_keys):
            raise ValueError(f"Could not match the env reset_keys {list(keys)} with the in_keys "
                             f"{[_key_str(k) for k in self.in_keys]}. Please make sure that these have the same "
                             "length.")
        return keys

    # torchrl's TensorDict methods, for a RewardSum driven by hand (the env runs the frame hooks)
    def _reset(self, tensordict, tensordict_reset):
        """Each sum set to 0 where its reset entry is True (everywhere without one), else kept."""
        for (_, out_key), reset_key in zip(self._pairs, self.reset_keys):
            value = tensordict.get(out_key, None)
            if value is None:
                zeros = np.zeros(*self._zero[out_key]) if out_key in self._zero else np.zeros(1, np.float32)
                tensordict_reset.set(out_key, as_tensor(zeros, device=tensordict_reset.device))
                continue
            values = host_array(value)
            reset = tensordict.get(reset_key, None)
            reset = np.ones((), bool) if reset is None else host_array(reset)
            reset = reset.reshape(reset.shape + (1,) * (values.ndim - reset.ndim))
            tensordict_reset.set(out_key, as_tensor(np.where(reset, np.zeros((), values.dtype), values),
                                                    device=value.device))
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        """``("next", out_key) = out_key + ("next", in_key)`` (the sum starts at 0)."""
        for in_key, out_key in self._pairs:
            reward = next_tensordict.get(in_key, None)
            if reward is None:
                if not self._missing_tolerance:
                    raise KeyError(f"RewardSum: {_key_str(in_key)!r} not found in the tensordict (keys: "
                                   f"{sorted(map(str, next_tensordict.keys(True, True)))})")
                continue
            previous = tensordict.get(out_key, None)
            next_tensordict.set(out_key, reward if previous is None else previous + reward)
        return next_tensordict

    def _in_spec(self, key):
        if key == _REWARD:
            return self._parent_spec("reward")
        return self._parent_spec("observation")[key]

    def _zeros(self, out_key):
        z = self._zero.get(out_key)
        if z is None:
            raise RuntimeError("RewardSum needs its specs: put it in a TransformedEnv")
        return np.zeros(z[0], dtype=z[1])

    def _frame_reset(self, frame):
        out = dict(frame)
        for _, ok in self._pairs:
            out[ok] = self._zeros(ok)
        return out

    def _frame_step(self, root, next_frame, action):
        out = dict(next_frame)
        for ik, ok in self._pairs:
            out[ok] = root[ok] + next_frame[ik]
        return out

    def _frame_continue(self, next_frame, frame, done):
        out = dict(frame)
        for _, ok in self._pairs:
            value = next_frame[ok]
            out[ok] = np.where(_done_like(done, value), np.zeros((), value.dtype), value)
        return out

    def forward(self, tensordict):
        """Offline: each in key's cumulative sum along the dim named ``"time"``, into its out key."""
        names = list(tensordict.names)
        if "time" not in names:
            raise ValueError(f"At least one dimension of the tensordict must be named 'time' in offline mode, "
                             f"got the dim names {names}")
        dim = names.index("time")
        for in_key, out_key in self._pairs:
            tensordict.set(out_key, tensordict[in_key].cumsum(dim))
        return tensordict

    def transform_observation_spec(self, observation_spec):
        if self.reward_spec:
            raise NotImplementedError("RewardSum(reward_spec=True): an rlpipe env has one reward, 'reward'; the "
                                      "sums can only be observations (reward_spec=False)")
        for ik, ok in self._pairs:
            spec = self._in_spec(ik)
            self._zero[ok] = (tuple(spec.shape), spec.dtype.np)
            observation_spec[ok] = Unbounded(shape=spec.shape, dtype=spec.dtype, device=spec.device)
        return observation_spec

    def __repr__(self):
        return (f"RewardSum(in_keys={[_key_str(k) for k in self.in_keys]}, "
                f"out_keys={[_key_str(k) for k in self.out_keys]})")


class _KeyWise(ArrayMapping, Transform):
    """A stateless transform mapping each in key's array to its out key (``_apply_array``), and
    each in key's spec likewise (``_transform_leaf_spec``); ``inv`` maps each ``out_keys_inv``
    array to its ``in_keys_inv`` key (``_inv_apply_array``). torchrl's ``_call``,
    ``_apply_transform`` and ``inv`` run the same array code on a TensorDict's entries."""

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        check_paired_keys(self)
        for k in self.in_keys + self.out_keys:
            if k in _RESERVED:
                raise ValueError(f"{type(self).__name__}: {_key_str(k)!r} cannot be transformed on rlpipe's "
                                 "frame protocol (observation keys only)")

    def _pairs(self, frame):
        return zip(self.in_keys, self.out_keys)

    def _frame_call(self, frame):
        return _map_frame(frame, self._pairs(frame), self._apply_array)

    def _apply_array(self, value):
        raise NotImplementedError

    def _inv_apply_array(self, value):
        return value

    def _apply_transform(self, value):
        """``_apply_array`` on a tensor (torchrl's per-entry method)."""
        return _on_tensor(self._apply_array, value)

    def _inv_apply_transform(self, value):
        """``_inv_apply_array`` on a tensor."""
        return _on_tensor(self._inv_apply_array, value)

    def _call(self, next_tensordict):
        """The in keys' entries of ``next_tensordict`` mapped into the out keys (in place)."""
        return self.forward(next_tensordict)

    def _inv_frame_call(self, frame):
        return _map_frame(frame, zip(self.out_keys_inv, self.in_keys_inv), self._inv_apply_array)

    def _inv_call(self, tensordict):
        """The ``out_keys_inv`` entries of ``tensordict`` mapped into the ``in_keys_inv`` (in place)."""
        return map_tensordict(tensordict, self._inv_frame_call)

    def _inverts_actions(self):
        return bool(self.in_keys_inv)  # (an env allows the action alone: _only_action_inverted)

    def _frame_inv(self, action, root):
        return self._inv_apply_array(action)

    def _only_action_inverted(self):
        """In an env: a ValueError unless the inverse keys are empty or the action alone, unrenamed
        (an rlpipe env takes one input, ``"action"``)."""
        if self.in_keys_inv and (self.in_keys_inv != [("action",)] or self.out_keys_inv != [("action",)]):
            raise ValueError(f"{type(self).__name__}: in an env, in_keys_inv/out_keys_inv can only be ['action'] (an "
                             f"rlpipe env takes one input, 'action'), got in_keys_inv "
                             f"{[_key_str(k) for k in self.in_keys_inv]} and out_keys_inv "
                             f"{[_key_str(k) for k in self.out_keys_inv]}; outside an env, inv() maps any keys")

    def _transform_leaf_spec(self, spec):
        raise NotImplementedError

    def transform_observation_spec(self, observation_spec):
        if not isinstance(observation_spec, Composite):  # one leaf spec: transformed itself, as torchrl's
            return self._transform_leaf_spec(observation_spec)
        for ik, ok in self._spec_pairs(observation_spec):
            observation_spec[ok] = self._transform_leaf_spec(observation_spec[ik])
        return observation_spec

    def _spec_pairs(self, observation_spec):
        keys = {unravel_key_to_tuple(k) for k in observation_spec.keys(True, True)}
        return [(ik, ok) for ik, ok in zip(self.in_keys, self.out_keys) if ik in keys]


def _on_tensor(function, value):
    """``function`` (a map of host arrays) on ``value``, a tensor or an array, returned as given."""
    if isinstance(value, Tensor):
        return as_tensor(function(host_array(value)), device=value.device)
    return function(value)


class DoubleToFloat(DTypeCastTransform):
    """``DTypeCastTransform(float64, float32)``, as torchrl's: float64 entries (and their specs) as
    float32; with ``in_keys_inv=["action"]`` (or no keys at all and a float64 action spec), float32
    actions cast back to float64 for the base env."""

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__(_dtypes.float64, _dtypes.float32, in_keys=in_keys, out_keys=out_keys,
                         in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)


class ObservationNorm(_KeyWise):
    """Affine normalization of observations, torchrl's formula: ``(obs - loc) / scale`` when
    ``standard_normal``, else ``obs * scale + loc``. ``loc``/``scale`` (numbers, arrays or tensors
    broadcasting against the observation) can be left None and estimated by ``init_stats``."""

    _state_keys = ("loc", "scale")

    def __init__(self, loc=None, scale=None, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None,
                 standard_normal=False, eps=None):
        if in_keys is None:
            in_keys = ["observation"]
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self.standard_normal = bool(standard_normal)
        self.eps = 1e-6 if eps is None else float(eps)
        self._loc = self._scale = None
        self._cast = {}
        if loc is not None:
            self.loc = loc
        if scale is not None:
            self.scale = scale

    # loc and scale: stored as host arrays, shown as rlpipe tensors
    @staticmethod
    def _as_array(value, what):
        if value is None:
            return None
        arr = host_array(value)
        if arr.dtype.kind not in "fiub":
            raise TypeError(f"ObservationNorm: {what} must be numeric, got dtype {arr.dtype}")
        if arr.dtype.kind != "f":
            arr = arr.astype(np.float32)
        return np.array(arr)

    @property
    def loc(self):
        """The shift (a tensor; None until given or estimated)."""
        return None if self._loc is None else as_tensor(self._loc)

    @loc.setter
    def loc(self, value):
        self._loc = self._as_array(value, "loc")
        self._cast = {}
        self._invalidate()

    @property
    def scale(self):
        """The scale (a tensor; None until given or estimated)."""
        return None if self._scale is None else as_tensor(self._scale)

    @scale.setter
    def scale(self, value):
        self._scale = self._as_array(value, "scale")
        self._cast = {}
        self._invalidate()

    @property
    def initialized(self):
        """Whether ``loc`` and ``scale`` are both set."""
        return self._loc is not None and self._scale is not None

    def _params(self, dtype):
        params = self._cast.get(dtype)
        if params is None:
            if not self.initialized:
                raise RuntimeError("Loc/Scale have not been initialized. Either pass in values in the "
                                   "constructor or call the init_stats method")
            params = self._cast[dtype] = (self._loc.astype(dtype), self._scale.astype(dtype))
        return params

    def _apply_array(self, value):
        if value.dtype.kind != "f":
            value = value.astype(np.float32)
        loc, scale = self._params(value.dtype)
        if self.standard_normal:
            return (value - loc) / scale
        return value * scale + loc

    def _inv_apply_array(self, value):
        loc, scale = self._params(value.dtype)
        if self.standard_normal:
            return value * scale + loc
        return (value - loc) / scale

    def transform_action_spec(self, action_spec):
        """With ``in_keys_inv=["action"]``: the action spec mapped forward (the policy acts in the
        normalized space; its actions are mapped back for the base env), as torchrl's."""
        self._only_action_inverted()
        return self._transform_leaf_spec(action_spec) if self.in_keys_inv else action_spec

    def _transform_leaf_spec(self, spec):
        if not self.initialized:
            return spec
        if not spec.dtype.is_floating_point:
            raise ValueError(f"ObservationNorm: expected a floating observation, got a spec of dtype {spec.dtype}")
        shape = tuple(spec.shape)
        try:
            np.broadcast_shapes(shape, self._loc.shape, self._scale.shape)
        except ValueError:
            raise ValueError(f"ObservationNorm: loc {list(self._loc.shape)} and scale {list(self._scale.shape)} "
                             f"do not broadcast against the observation's shape {list(shape)}") from None
        if isinstance(spec, Bounded):
            low, high = _bounds(spec)
            with np.errstate(over="ignore", invalid="ignore"):
                a, b = self._apply_array(low), self._apply_array(high)
            # the same float arithmetic as the observations: the bounds stay exact bounds
            lo, hi = np.minimum(a, b), np.maximum(a, b)
            return Bounded(low=np.broadcast_to(lo, shape), high=np.broadcast_to(hi, shape), shape=spec.shape,
                           dtype=spec.dtype, device=spec.device)
        return Unbounded(shape=spec.shape, dtype=spec.dtype, device=spec.device)

    def init_stats(self, num_iter, reduce_dim=0, cat_dim=None, key=None, keep_dims=None):
        """Estimates ``loc`` and ``scale`` from rollouts of the parent env (the env before this
        transform) with random actions, as torchrl does: rollouts of up to ``num_iter`` steps are
        collected until ``num_iter`` frames are, ``key`` (default: the only in key) is concatenated
        along ``cat_dim`` (default ``reduce_dim``), and its mean and (unbiased) std over
        ``reduce_dim`` (an int or a list) give ``loc`` and ``scale`` (as ``-mean/std`` and
        ``1/std`` when not ``standard_normal``). ``keep_dims``: reduced dims to keep as size 1."""
        _check_cat_dim(reduce_dim, cat_dim)
        if self.initialized:
            raise RuntimeError("Loc/Scale are already initialized")
        if isinstance(num_iter, bool) or not isinstance(num_iter, (int, np.integer)) or num_iter < 1:
            raise ValueError(f"init_stats: num_iter must be a positive int, got {num_iter!r}")
        if len(self.in_keys) > 1 and key is None:
            raise RuntimeError("Transform has multiple in_keys but no specific key was passed as an argument")
        key = self.in_keys[0] if key is None else unravel_key_to_tuple(key)
        if key not in self.in_keys:
            raise KeyError(f"init_stats: key {_key_str(key)!r} is not among the in_keys "
                           f"{[_key_str(k) for k in self.in_keys]}")
        cat_dim = reduce_dim if cat_dim is None else cat_dim
        parent = self.parent
        if parent is None:
            raise RuntimeError("Cannot initialize the transform if parent env is not defined.")
        for t in parent._leaf_list():
            if isinstance(t, ObservationNorm) and not t.initialized:
                raise RuntimeError("ObservationNorms need to be initialized in the right order. Trying to "
                                   "initialize an ObservationNorm while a parent ObservationNorm transform is "
                                   "still uninitialized")
        data, collected = [], 0
        while collected < num_iter:
            td = parent.rollout(max_steps=int(num_iter))
            collected += td.numel()
            data.append(host_array(td[_key_str(key)]))
        dtype = np.float64 if data[0].dtype == np.float64 else np.float32
        data = np.concatenate(data, axis=cat_dim).astype(np.float64)
        dims = [reduce_dim] if isinstance(reduce_dim, int) else list(reduce_dim)
        dims = tuple(d % data.ndim for d in dims)
        _check_cat_dim_of(data.ndim, dims, cat_dim)
        count = int(np.prod([data.shape[d] for d in dims]))
        if count < 2:
            raise RuntimeError(f"init_stats: {count} value(s) along the reduced dims; std needs at least 2")
        loc = data.mean(axis=dims, keepdims=True)
        scale = data.std(axis=dims, ddof=1, keepdims=True)
        keep = set() if keep_dims is None else {d % data.ndim for d in
                                                ([keep_dims] if isinstance(keep_dims, int) else keep_dims)}
        squeeze = tuple(d for d in dims if d not in keep)
        loc, scale = loc.squeeze(axis=squeeze), scale.squeeze(axis=squeeze)
        if not self.standard_normal:
            scale = 1.0 / np.maximum(scale, self.eps)
            loc = -loc * scale
        if not np.isfinite(loc).all():
            raise RuntimeError("Non-finite values found in loc")
        if not np.isfinite(scale).all():
            raise RuntimeError("Non-finite values found in scale")
        self._loc = loc.astype(dtype)
        self._scale = np.maximum(scale, self.eps).astype(dtype)
        self._cast = {}
        self._invalidate()

    def __repr__(self):
        return (f"ObservationNorm(keys={[_key_str(k) for k in self.in_keys]}, standard_normal="
                f"{self.standard_normal}, initialized={self.initialized})")


def _check_cat_dim(reduce_dim, cat_dim):
    """torchrl's rule for ``init_stats``: ``cat_dim`` is one of the reduced dims."""
    if isinstance(reduce_dim, int):
        if cat_dim is not None and cat_dim != reduce_dim:
            raise ValueError(f"cat_dim must be part of or equal to reduce_dim, got cat_dim={cat_dim} and "
                             f"reduce_dim={reduce_dim}")
    elif cat_dim is None:
        raise ValueError(f"cat_dim must be specified if reduce_dim is not an integer, got reduce_dim={reduce_dim}")
    elif _same_sign(cat_dim, *reduce_dim) and cat_dim not in reduce_dim:
        # (dims of both signs, as torchrl's DQN tutorial's cat_dim=0 with reduce_dim=[-1, -2, -4], are
        # compared once the data's ndim is known: _check_cat_dim_of)
        raise ValueError(f"cat_dim must be part of or equal to reduce_dim, got cat_dim={cat_dim} and "
                         f"reduce_dim={tuple(reduce_dim)}")


def _same_sign(*dims):
    return all(d >= 0 for d in dims) or all(d < 0 for d in dims)


def _check_cat_dim_of(ndim, reduce_dims, cat_dim):
    """``_check_cat_dim`` on dims counted from the front of data with ``ndim`` dims."""
    if cat_dim % ndim not in reduce_dims:
        raise ValueError(f"cat_dim must be part of or equal to reduce_dim, got cat_dim={cat_dim} and reduce_dim "
                         f"{list(reduce_dims)} (the data has {ndim} dims)")


class RenameTransform(_KeyWise):
    """Renames entries: ``in_keys[i]`` becomes ``out_keys[i]`` (kept too with ``create_copy=True``),
    in the frames and in the observation spec; ``inv`` renames ``out_keys_inv[i]`` back to
    ``in_keys_inv[i]`` (outside an env: an rlpipe env's one input is ``"action"``)."""

    def __init__(self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, create_copy=False):
        in_keys, out_keys = _keys(in_keys, "in_keys"), _keys(out_keys, "out_keys")
        if in_keys_inv is not None and out_keys_inv is None:
            out_keys_inv = in_keys_inv
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self.create_copy = bool(create_copy)

    def _rename(self, frame, sources, dests):
        out = dict(frame)
        values = [out.get(k) if self.create_copy else out.pop(k, None) for k in sources]
        for dest, value in zip(dests, values):
            if value is not None:
                out[dest] = value
        return out

    def _frame_call(self, frame):
        return self._rename(frame, self.in_keys, self.out_keys)

    def _inv_frame_call(self, frame):
        return self._rename(frame, self.out_keys_inv, self.in_keys_inv)

    def transform_action_spec(self, action_spec):
        if self.in_keys_inv:
            raise ValueError(f"RenameTransform: in an env, in_keys_inv {[_key_str(k) for k in self.in_keys_inv]} "
                             "cannot be renamed: an rlpipe env has one input, 'action' (outside an env, inv() "
                             "renames any keys)")
        return action_spec

    def transform_observation_spec(self, observation_spec):
        keys = {unravel_key_to_tuple(k) for k in observation_spec.keys(True, True)}
        missing = [k for k in self.in_keys if k not in keys]
        if missing:
            raise KeyError(f"RenameTransform: key(s) {[_key_str(k) for k in missing]} not found in the "
                           f"observation spec (keys: {sorted(map(str, observation_spec.keys(True, True)))})")
        specs = [observation_spec[k] for k in self.in_keys]
        if not self.create_copy:
            for k in self.in_keys:
                del observation_spec[k]
        for ok, spec in zip(self.out_keys, specs):
            observation_spec[ok] = spec.clone()
        return observation_spec

    def __repr__(self):
        return (f"RenameTransform(in_keys={[_key_str(k) for k in self.in_keys]}, "
                f"out_keys={[_key_str(k) for k in self.out_keys]}, create_copy={self.create_copy})")


class CheckFinite(Transform):
    """An opt-in check that observations and rewards are finite, as Gymnasium's ``PassiveEnvChecker``
    looks for NaN and inf (rlpipe's own; torchrl has no such transform).

    A NaN or an infinity in a floating entry raises a ValueError naming the env, the key, the env
    index and the step: counted from that env's last reset, which is step 0. ``in_keys`` are the
    entries to check (default: every floating observation and the reward). The check reads every
    checked array of every frame, so it costs time; it is meant for finding where bad values come
    from. The step counts are the only state a transform keeps here, used for the message alone.
    """

    def __init__(self, in_keys=None):
        super().__init__(in_keys=_keys(in_keys, "in_keys", allow_none=True) or [], out_keys=[])
        self._steps = None  # per env: steps since its reset

    def _check(self, frame, prefix):
        for key in self.in_keys or frame:
            value = frame.get(key)
            if value is None:
                if key == _REWARD and not prefix:  # a reset frame has no reward
                    continue
                raise KeyError(f"CheckFinite: no entry {_key_str(key)!r} to check; the frame has "
                               f"{sorted(_key_str(k) for k in frame)}")
            if value.dtype.kind in "fc" and not np.isfinite(value).all():
                self._fail(prefix + key, value)
        return frame

    def _fail(self, key, value):
        per_env = value.reshape(self._steps.shape + (-1,))
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(per_env).all(-1))[0])
        what = "NaN" if np.isnan(per_env[index]).any() else "inf"
        parent = self.parent
        env = parent.base_env if parent is not None else "the environment"
        raise ValueError(f"CheckFinite: {env!r} gave {what} in {_key_str(key)!r} at step {int(self._steps[index])} "
                         f"of env {list(index)} (step 0 is its reset); expected finite values")

    def _frame_reset(self, frame):
        self._steps = np.zeros(tuple(self._parent_spec("done")["done"].shape)[:-1], dtype=np.int64)
        return self._check(frame, ())

    def _frame_step(self, root, next_frame, action):
        self._steps += 1
        return self._check(next_frame, ("next",))

    def _frame_continue(self, next_frame, frame, done):
        self._steps[done.reshape(self._steps.shape)] = 0
        return self._check(frame, ())

    def forward(self, tensordict):
        raise NotImplementedError("CheckFinite only works in a TransformedEnv (it counts the steps)")

    def __repr__(self):
        return f"CheckFinite(in_keys={[_key_str(k) for k in self.in_keys] or 'all floating'})"

from .. import transforms_episodes as _episodes  # noqa: E402 - torchrl's episode/action transforms, re-exported
from ..transforms_episodes import *  # noqa: E402,F403
__all__ += _episodes.__all__
from .. import transforms_data as _data  # noqa: E402 - torchrl's data-side transforms, re-exported
from ..transforms_data import *  # noqa: E402,F403
__all__ += _data.__all__
from .. import transforms_misc as _misc  # noqa: E402 - torchrl's device and hashing transforms, re-exported
from ..transforms_misc import *  # noqa: E402,F403
__all__ += _misc.__all__
from .. import transforms_batch as _batch  # noqa: E402 - torchrl's BatchSizeTransform, re-exported
from ..transforms_batch import *  # noqa: E402,F403
__all__ += _batch.__all__

_vecnorm._RunningNorm._observation_norm = ObservationNorm  # VecNorm.to_observation_norm's class (no import circle)
