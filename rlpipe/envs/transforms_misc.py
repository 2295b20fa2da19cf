"""torchrl 0.14's dtype, device, hashing, timing and step-skipping transforms:
``DTypeCastTransform``, ``DeviceCastTransform``, ``Hash`` (written on TensorDicts as torchrl's
are, ``step_protocol.py``, THE RULE; the dtype cast with an array fast path), ``Timer`` and
``ConditionalSkip`` (on the env's frames).

Where rlpipe differs: an env's frames are host arrays and its TensorDicts are built on one device
(``env.device``), so in an env ``DeviceCastTransform`` moves the whole env (no keys: the env's
device becomes the transform's); moving some entries only is for data outside an env (a replay
buffer's). rlpipe's ``cpu:1`` is ``cpu`` (one host device). ``Timer``'s root ``time_policy`` is
the previous step's policy time (the root is handed out before the policy runs; torchrl writes it
there afterwards); its ``"next"`` entries are as torchrl's. ``ConditionalSkip`` skips a step when
every env of the batch skips it (an rlpipe env steps all its envs or none), and its ``cond`` sees
the env's own root entries (torchrl's sees the whole TensorDict, outer envs' entries included).
"""
import hashlib
import time
from copy import copy

import numpy as np

from .. import _dtypes
from .._creation import as_tensor
from .._device import resolve
from .._tensor import Tensor, host_array
from ..tensordict import unravel_key_to_tuple
from .specs import Unbounded
from .step_protocol import ACTION, REWARD, ArrayMapping, _done_like, root_tensordict
from .transforms_tensors import UnaryTransform, _EntryTransform, check_paired_keys
from .transformed_env import Transform, _key_str

__all__ = ["ConditionalSkip", "DTypeCastTransform", "DeviceCastTransform", "Hash", "Timer"]

FORWARD_NOT_IMPLEMENTED = "class {} cannot be executed without a parent environment."


def _map_frame(frame, pairs, function):
    """``frame`` with ``function`` of each pair's source array written to its destination (a new
    dict if anything changed)."""
    out = None
    for source, dest in pairs:
        value = frame.get(source)
        if value is None:
            continue
        if out is None:
            out = dict(frame)
        out[dest] = function(value)
    return frame if out is None else out



# ---- dtypes ------------------------------------------------------------------------------------------

class DTypeCastTransform(ArrayMapping, _EntryTransform):
    """Casts ``in_keys`` entries from ``dtype_in`` to ``dtype_out`` (and the action back from
    ``dtype_out`` to ``dtype_in`` with ``in_keys_inv=["action"]``). With neither ``in_keys`` nor
    ``in_keys_inv``, the keys are every observation and reward of ``dtype_in`` (and the action if
    it is of ``dtype_in``), found from the env's specs; outside an env, every entry of ``dtype_in``
    (and, without ``in_keys_inv``, ``inv`` casts every entry of ``dtype_out`` back)."""

    def __init__(self, dtype_in, dtype_out, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        for name, dtype in (("dtype_in", dtype_in), ("dtype_out", dtype_out)):
            if not isinstance(dtype, _dtypes.dtype):
                raise TypeError(f"DTypeCastTransform: {name} must be an rlpipe dtype, got {dtype!r}")
        if in_keys is None and out_keys is not None:
            raise ValueError("DTypeCastTransform: out_keys were passed without in_keys; the order in which the "
                             f"entries of {dtype_in} are found cannot be guaranteed: pass in_keys too")
        self._auto = in_keys is None
        self._auto_inv = in_keys is None and in_keys_inv is None
        self._inv_given = in_keys_inv is not None
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self.dtype_in, self.dtype_out = dtype_in, dtype_out

    def _apply_transform(self, value):
        return value.to(self.dtype_out)

    def _inv_apply_transform(self, value):
        return value.to(self.dtype_in)

    def _call(self, next_tensordict):
        if not (self._auto and self._env_batch_size is None):
            return super()._call(next_tensordict)
        for key, value in list(next_tensordict.items(True, True)):
            if isinstance(value, Tensor) and value.dtype is self.dtype_in:
                next_tensordict.set(key, self._apply_transform(value))
        return next_tensordict

    forward = _call

    def _inv_call(self, tensordict):
        if not self._inv_given and self._env_batch_size is None:  # torchrl: every entry of dtype_out
            for key, value in list(tensordict.items(True, True)):
                if isinstance(value, Tensor) and value.dtype is self.dtype_out:
                    tensordict.set(key, self._inv_apply_transform(value))
            return tensordict
        return super()._inv_call(tensordict)

    # the env's frame hooks on arrays: the collector's fast path
    def _frame_call(self, frame):
        dtype = self.dtype_out.np
        return _map_frame(frame, zip(self.in_keys, self.out_keys), lambda value: value.astype(dtype, copy=False))

    def _inverts_actions(self):
        return ACTION in self.in_keys_inv  # (in an env the action is the only input, transform_action_spec)

    def _frame_inv(self, action, root):
        return action.astype(self.dtype_in.np, copy=False)

    def _transform_spec(self, spec):
        if spec.dtype is not self.dtype_in:
            raise TypeError(f"DTypeCastTransform: the spec's dtype is {spec.dtype}, expected {self.dtype_in}")
        return spec.to(self.dtype_out)

    def _inv_transform_spec(self, spec):
        return self._transform_spec(spec)

    def transform_observation_spec(self, observation_spec):
        if self._auto:
            self.in_keys = [unravel_key_to_tuple(k) for k, v in observation_spec.items(True, True)
                            if v.dtype is self.dtype_in]
            if self._parent_spec("reward").dtype is self.dtype_in:
                self.in_keys.append(REWARD)
            self.out_keys = list(self.in_keys)
        return super().transform_observation_spec(observation_spec)

    def transform_action_spec(self, action_spec):
        if self._auto_inv:
            self.in_keys_inv = [ACTION] if action_spec.dtype is self.dtype_in else []
            self.out_keys_inv = list(self.in_keys_inv)
        return super().transform_action_spec(action_spec)

    def __repr__(self):
        return (f"{type(self).__name__}(in_keys={self.in_keys}, out_keys={self.out_keys}, in_keys_inv="
                f"{self.in_keys_inv}, out_keys_inv={self.out_keys_inv})")


class DeviceCastTransform(ArrayMapping, Transform):
    """Moves data from ``orig_device`` (the env's or storage's, found from the parent env when not
    given) to ``device``. Without keys the whole TensorDict moves (in an env: the env's device
    becomes ``device``); with ``in_keys``/``in_keys_inv`` only those entries move, written to
    ``out_keys``/``out_keys_inv`` (default: the same keys), and the result has no device."""

    def __init__(self, device, orig_device=None, *, in_keys=None, out_keys=None, in_keys_inv=None,
                 out_keys_inv=None):
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        check_paired_keys(self)
        self.device = resolve(device)
        self._orig_device = None if orig_device is None else resolve(orig_device)
        self._whole = not self.in_keys and not self.in_keys_inv

    @property
    def orig_device(self):
        """The device data comes from: as given, else the parent env's (None outside an env)."""
        if self._orig_device is not None:
            return self._orig_device
        parent = self.parent
        return None if parent is None else parent.device

    def _move(self, tensordict, pairs, device):
        if self._whole:
            return tensordict.to(device)
        out = tensordict.clone(False).clear_device_()
        for source, dest in pairs:  # (as torchrl's: a key not in the data is left out)
            value = tensordict.get(source, None)
            if value is not None:
                out.set(dest, value.to(device))
        return out

    def _call(self, next_tensordict):
        """The in keys (or everything) moved to ``device``."""
        return self._move(next_tensordict, zip(self.in_keys, self.out_keys), self.device)

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def _inv_call(self, tensordict):
        """The ``out_keys_inv`` (or everything) moved back to the original device, into ``in_keys_inv``."""
        device = self.orig_device
        if device is None:
            return tensordict
        return self._move(tensordict, zip(self.out_keys_inv, self.in_keys_inv), device)

    # in an env the frames are host arrays and pass unchanged (ArrayMapping's hooks): only the device
    # the env builds its TensorDicts on changes
    def _frame_inv(self, action, root):
        return action

    def _inverts_actions(self):
        return False

    def transform_env_device(self, device):
        """The env's device after this transform: ``device`` when the whole env moves."""
        return self.device if self._whole else device

    def _in_env(self, spec):
        """A spec of the env after the cast: moved to ``device`` (only the whole env moves)."""
        if not self._whole:
            raise NotImplementedError(f"DeviceCastTransform: in an env the whole env moves (no in_keys/in_keys_inv): "
                                      f"rlpipe builds an env's TensorDicts on one device; got in_keys "
                                      f"{[_key_str(k) for k in self.in_keys]} and in_keys_inv "
                                      f"{[_key_str(k) for k in self.in_keys_inv]}")
        return spec.to(self.device)

    transform_observation_spec = transform_reward_spec = transform_done_spec = _in_env
    transform_action_spec = _in_env

    def __repr__(self):
        if self._whole:
            return f"DeviceCastTransform(device={self.device}, orig_device={self.orig_device})"
        return (f"DeviceCastTransform(device={self.device}, orig_device={self.orig_device}, in_keys="
                f"{self.in_keys}, out_keys={self.out_keys}, in_keys_inv={self.in_keys_inv}, out_keys_inv="
                f"{self.out_keys_inv})")


class Hash(UnaryTransform):
    """A hash of each ``in_keys`` entry (a tensor, a string or other non-tensor data) written to
    ``out_keys``: ``hash_fn(value)`` (or ``hash_fn(value, seed)`` with ``seed``), by default
    ``Hash.reproducible_hash``, the SHA-256 of the value's string as 32 uint8. With
    ``in_keys_inv`` (or a ``repertoire`` dict) every hashed input is remembered, and ``inv`` maps
    hashes back to their inputs."""

    def __init__(self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, *, hash_fn=None, seed=None,
                 use_raw_nontensor=False, repertoire=None):
        if repertoire is None and in_keys_inv:
            repertoire = {}
        self._repertoire = repertoire
        self._seed = seed
        self._hash_fn = Hash.reproducible_hash if hash_fn is None else hash_fn
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv,
                         fn=self.call_hash_fn, inv_fn=self.get_input_from_hash, use_raw_nontensor=use_raw_nontensor)

    def state_dict(self, prefix=""):
        """The repertoire (hash -> input), as torchrl's."""
        return {prefix + "_repertoire": self._repertoire}

    def load_state_dict(self, state_dict, strict=True):
        """Takes back ``state_dict()``'s repertoire."""
        self._repertoire = state_dict["_repertoire"]

    @classmethod
    def hash_to_repertoire_key(cls, hash_tensor):
        """A hashable key (nested tuples of numbers) for a hash tensor or list."""
        if isinstance(hash_tensor, Tensor):
            return cls.hash_to_repertoire_key(hash_tensor.tolist())
        if isinstance(hash_tensor, list):
            return tuple(cls.hash_to_repertoire_key(t) for t in hash_tensor)
        return hash_tensor

    def get_input_from_hash(self, hash_tensor):
        """The input that gave ``hash_tensor`` (needs a repertoire: ``in_keys_inv`` or ``repertoire``)."""
        if self._repertoire is None:
            raise RuntimeError("An inverse transform was queried but the repertoire is None.")
        return self._repertoire[self.hash_to_repertoire_key(hash_tensor)]

    def call_hash_fn(self, value):
        """``hash_fn`` on ``value`` (remembered in the repertoire if there is one)."""
        hashed = self._hash_fn(value) if self._seed is None else self._hash_fn(value, self._seed)
        if not isinstance(hashed, Tensor):
            raise ValueError(f"Hash function must return a tensor, but got {type(hashed)}")
        if self._repertoire is not None:
            self._repertoire[self.hash_to_repertoire_key(hashed)] = copy(value)
        return hashed

    @classmethod
    def reproducible_hash(cls, string, seed=None):
        """The SHA-256 of ``seed + string`` (``""`` for None) as a ``(32,)`` uint8 tensor."""
        string = "" if string is None else string
        seeded = seed + string if seed is not None else str(string)
        digest = hashlib.sha256(seeded.encode("utf-8")).digest()
        return as_tensor(np.frombuffer(digest, dtype=np.uint8).copy(), dtype=_dtypes.uint8)


class Timer(Transform):
    """Times an env's steps, its policy and its resets, in seconds (float32, one value per env):
    ``("next", time_step)`` the base env's step, ``("next", time_policy)`` the time from the last
    step (or reset) to the action reaching the env, ``time_reset`` (at a root after a reset) the
    reset; each is 0 where it does not apply. ``out_keys`` default to ``time_key`` + ``_step``,
    ``_policy`` and ``_reset``."""

    def __init__(self, out_keys=None, time_key="time"):
        if out_keys is None:
            out_keys = [f"{time_key}_step", f"{time_key}_policy", f"{time_key}_reset"]
        elif len(out_keys) != 3:
            raise TypeError(f"Expected three out_keys. Got out_keys={out_keys}.")
        super().__init__(in_keys=[], out_keys=out_keys)
        self.time_key = time_key
        self.time_step_key, self.time_policy_key, self.time_reset_key = self.out_keys
        self.last_inv_time = self.last_call_time = self.last_reset_time = None
        self._policy_time = 0.0

    def _timed(self, frame, step, policy, reset):
        shape = tuple(self._parent_spec("done")["done"].shape)[:-1]
        out = dict(frame)
        for key, seconds in ((self.time_step_key, step), (self.time_policy_key, policy), (self.time_reset_key, reset)):
            out[key] = np.full(shape, seconds, dtype=np.float32)
        return out

    def _before_reset(self):
        self.last_reset_time = time.perf_counter()

    def _frame_reset(self, frame):
        now = time.perf_counter()
        reset = 0.0 if self.last_reset_time is None else now - self.last_reset_time
        self.last_call_time = now
        return self._timed(frame, 0.0, 0.0, reset)

    def _frame_inv(self, action, root):
        now = time.perf_counter()
        self._policy_time = 0.0 if self.last_call_time is None else now - self.last_call_time
        self.last_inv_time = now
        return action

    def _frame_step(self, root, next_frame, action):
        now = time.perf_counter()
        step = 0.0 if self.last_inv_time is None else now - self.last_inv_time
        self.last_call_time = now
        return self._timed(next_frame, step, self._policy_time, 0.0)

    def _frame_continue(self, next_frame, frame, done):
        """Envs that were reset: the time since the step ended as ``time_reset``, the others as
        after their step."""
        now = time.perf_counter()
        reset = self._timed(frame, 0.0, 0.0, now - self.last_call_time)
        self.last_call_time = now
        for key in self.out_keys:
            value = next_frame[key]
            reset[key] = np.where(_done_like(done, value).reshape(value.shape), reset[key], value)
        return reset

    def forward(self, tensordict):
        raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))

    def transform_observation_spec(self, observation_spec):
        shape = tuple(self._parent_spec("done")["done"].shape)[:-1]
        for key in self.out_keys:
            observation_spec[key] = Unbounded(shape=shape, device=observation_spec.device)
        return observation_spec

    def __repr__(self):
        return f"Timer(out_keys={[_key_str(k) for k in self.out_keys]})"


class ConditionalSkip(Transform):
    """Skips the env's step where ``cond(tensordict)`` is True: the step returns the root's
    observations again, reward 0 and not done, without stepping the base env or running the
    transforms (torchrl's ``"_step"`` signal). ``cond`` gets a TensorDict of this transform's root
    entries and the action, and returns a bool or a bool tensor (one per env)."""

    _skip_mask = None  # set at each step by _frame_inv: whether each env skips it

    def __init__(self, cond):
        if not callable(cond):
            raise TypeError(f"ConditionalSkip: cond must be a callable, got {type(cond).__name__}")
        super().__init__()
        self.cond = cond

    def _skips(self, tensordict):
        skip = self.cond(tensordict)
        return host_array(skip) if isinstance(skip, Tensor) else np.asarray(skip, dtype=bool)

    def _frame_inv(self, action, root):
        batch_size = self._batch_size()
        tensordict = root_tensordict(root, batch_size)
        tensordict.set("action", as_tensor(np.array(action)))
        self._skip_mask = np.broadcast_to(self._skips(tensordict).astype(bool).reshape(-1), (int(np.prod(batch_size)),))
        return action

    def _inv_call(self, tensordict):
        """torchrl's TensorDict method: ``"_step"`` set to False where ``cond`` is True."""
        step = ~self._skips(tensordict).astype(bool)
        previous = tensordict.get("_step", None)
        if previous is not None:
            step = step & host_array(previous)
        tensordict.set("_step", as_tensor(step.reshape(tuple(tensordict.batch_size)), device=tensordict.device))
        return tensordict

    def forward(self, tensordict):
        raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))
