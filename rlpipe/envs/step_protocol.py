"""The env step protocol: how environments, transforms and collectors exchange steps.

Frames
------
Environments and transforms exchange *frames*: plain dicts mapping key tuples
(``("observation",)``, ``("pixels",)``, ``("step_count",)``) to host NumPy arrays whose leading
dims are the env's ``batch_size``. A *root frame* holds the observations an action is chosen
from; a *next frame* holds the next observations plus ``("reward",)`` (float32),
``("terminated",)`` and ``("truncated",)`` (bool), each shaped ``batch_size + (1,)``. ``done`` is
always ``terminated | truncated``, computed where a frame becomes a TensorDict. TensorDicts are
built only at the API boundary (``reset``, ``step``, ``rollout``) and by the collector once per
batch, so the per-step hot path never builds one. Gymnasium hands out NumPy arrays, so frames are
NumPy on the host; they become rlpipe tensors (on the env's ``device``) at the boundary.

What an environment implements (``EnvBase`` subclasses)
--------------------------------------------------------
- ``_reset_frame(seed=None) -> frame``: resets every env; the first observations.
- ``_step_frame(action) -> (next_obs, reward, terminated, truncated)``: one step of every env with
  ``action`` (a host array in the action spec's format, batch-leading: one-hot for a OneHot spec).
  ``next_obs`` holds the *true* last observation of an episode that ends.
- ``_continue_frame(next_obs, done) -> frame``: the observations to act on next: ``next_obs`` where
  ``done`` (bool, ``batch_size + (1,)``) is False, a fresh reset where it is True.
- the specs: ``action_spec``, ``observation_spec`` (a ``Composite`` keyed like the frame),
  ``reward_spec``, ``done_spec`` (done/terminated/truncated).

Who resets
----------
The *driver* (``EnvBase.reset``/``rollout``, or the collector) calls ``_reset_frame`` once, then
``_step_frame`` at every step and, only after a step where some env is done, ``_continue_frame``
with the done mask: that is the partial reset (torchrl's ``"_reset"`` mask), row by row. A
vector env resets its done envs itself (Gymnasium's autoreset); ``_continue_frame`` then hands out
the observations the autoreset produced, and resets by ``reset_mask`` only envs that something
else ended (a transform's truncation). Between steps where nothing is done the driver hands the
next observations straight back to ``_step_frame``.

Skipped rows. A batched simulator that cannot reset only some of its envs (Gymnasium's NEXT_STEP
autoreset without a partial reset, as the native ``CartPoleVectorEnv``) resets an env that ended
during the *following* step, ignoring its action. Such an env sets ``_skips_rows = True``: its
``_continue_frame`` leaves the observations of those envs as they were, and after each
``_step_frame`` its ``_skipped_rows`` is None or a bool array of shape ``batch_size`` marking the
envs whose step was that reset: their next observation is the first of a new episode, and the
rest of their row (reward 0, never done) is not data. The collector drops those rows
(``pick_transitions``) and steps on until every env has its frames. An env that can also reset
only some envs (envpool, Gymnasium's Sync/AsyncVectorEnv in NEXT_STEP mode) skips too, saving a
reset call per step; ``_set_exact_resets(True)`` (what ``rollout`` asks, since it cannot drop
rows) makes it reset done envs at once instead, and answers whether the env can.

What the collector calls
------------------------
``SyncDataCollector`` (and through it every worker of the multi-process and Ray collectors) calls
``env._reset_frame()``, then per step ``env._step_frame(action)`` and, when some env is done,
``env._continue_frame(next_obs, done)``; it records each step's arrays as they come and turns them
into a batch with one concatenate per key (``stack_steps``). For an env with ``_skips_rows`` it
reads ``env._skipped_rows`` after each step and keeps each env's first ``frames_per_batch`` real
transitions (``most_dropped``, ``pick_transitions``).

How ``TransformedEnv`` threads frames through transforms
--------------------------------------------------------
A ``TransformedEnv`` is an env whose frame methods call the base env's and pass the frames through
its transforms in order (``reset_chain``, ``step_chain``, ``continue_chain``): each transform
receives the frame the previous one produced and returns its own. The env keeps every transform's
last root and next frame itself, so a transform holds no per-episode state. Actions travel the
other way: the transforms that invert actions run last to first before the base env steps. A
step that skipped rows (above) restarts those rows in every transform as a partial reset would
(``restart_rows``).

THE RULE: a transform is written against TensorDicts and specs exactly as torchrl's are
-------------------------------------------------------------------------------------------
``Transform`` (in ``transformed_env.py``) inherits ``TransformProtocol`` below. A transform written
as a torchrl transform works everywhere: ``TransformedEnv.reset``/``step``/``rollout``,
``SyncDataCollector`` and the multi-process collectors, with partial resets of vector envs:

- ``_call(next_tensordict)``: the stateless mapping of a step's output (by default each
  ``in_keys`` entry through ``_apply_transform`` into the matching ``out_keys``);
- ``_step(tensordict, next_tensordict) -> next_tensordict``: one step; ``tensordict`` holds this
  transform's root entries, the done flags (False) and ``"action"`` as the base env receives it;
  ``next_tensordict`` the next observations, ``"reward"``, ``"done"``, ``"terminated"``,
  ``"truncated"``. Default: ``_call(next_tensordict)``. ``done`` is recomputed afterwards as
  ``terminated | truncated``;
- ``_reset(tensordict, tensordict_reset) -> tensordict_reset``: after a reset. At the first reset
  ``tensordict`` is empty; at a partial reset it holds ``"_reset"`` (the done mask, shaped like
  ``"done"``) and this transform's last next entries (its state to carry over), and only the rows
  under ``"_reset"`` of the result are used: the others go on from the step, as torchrl's
  ``EnvBase.reset`` keeps them. Default: ``tensordict_reset`` unchanged (as torchrl: a transform
  whose reset observations must be mapped too calls ``_call`` there);
- ``_inv_call(tensordict)``: before the base env steps; ``tensordict`` holds this transform's root
  entries and ``"action"``; only the ``"action"`` it returns reaches the env (rlpipe envs take
  no other input). Default: each ``out_keys_inv`` entry through ``_inv_apply_transform`` into the
  matching ``in_keys_inv``;
- ``transform_observation_spec``, ``transform_reward_spec``, ``transform_done_spec``,
  ``transform_action_spec``, or the whole ``transform_output_spec`` (a ``Composite`` holding
  ``full_observation_spec``, ``full_reward_spec``, ``full_done_spec``) and ``transform_input_spec``
  (``full_action_spec``, ``full_state_spec``). rlpipe envs have one reward and one action, so
  ``transform_reward_spec`` and ``transform_action_spec`` receive the leaf spec (torchrl passes the
  one-entry Composite; a torchrl spec hook that handles both, as its ``_apply_to_composite``, works);
- ``in_keys``/``out_keys``/``in_keys_inv``/``out_keys_inv`` (``out_keys`` default to ``in_keys``,
  ``out_keys_inv`` to ``in_keys_inv``); ``forward(tensordict)`` (and ``inv``) for use outside an
  env, a replay buffer's.

The array fast path stays behind that same interface: the frame hooks ``_frame_reset(frame)``,
``_frame_step(root, next_frame, action)``, ``_frame_continue(next_frame, frame, done)`` and
``_frame_inv(action, root)`` are what ``TransformedEnv`` calls, and their defaults run the
TensorDict methods above on the frames (one TensorDict per hook and step: correct, slower). A
transform that overrides them (rlpipe's own ``StepCounter``, ``RewardSum``, ...) works on the
arrays directly; none of the hooks may modify the dicts or arrays it is given. A transform whose
frame hooks all apply one stateless array mapping derives from ``ArrayMapping``.
"""
import operator
import types

import numpy as np

from .._creation import as_tensor
from .._device import CPU, _default as _default_device, resolve
from .._dtypes import _FROM_NP
from .._tensor import Size, Tensor, host_array, wrap
from ..tensordict import NonTensorData, NonTensorStack, TensorDict, unravel_key_to_tuple
from .specs import Composite, OneHot

__all__ = ["ACTION", "DONE_KEYS", "REWARD", "RESET", "TERMINATED", "TRUNCATED", "ArrayMapping", "TransformProtocol",
           "carry_over", "continue_chain", "done_entries", "frame_of", "frame_to_tensordict", "key_list",
           "map_tensordict", "missing_action_error", "most_dropped", "one_hot_hint", "next_tensordict",
           "pick_transitions", "reset_chain", "restart_rows", "root_tensordict", "spec_chain", "stack_same",
           "stack_steps", "step_chain"]

DONE_KEYS = ("done", "terminated", "truncated")
DONE = ("done",)
REWARD = ("reward",)
TERMINATED = ("terminated",)
TRUNCATED = ("truncated",)
ACTION = ("action",)
RESET = ("_reset",)
STEP_EXTRAS = (REWARD, TERMINATED, TRUNCATED)  # entries of a next frame that are not observations
_FLAGS = (DONE, TERMINATED, TRUNCATED)


# ---- frames and TensorDicts ---------------------------------------------------------------------------

def frame_to_tensordict(frame, batch_size, device=None, td=None, prefix=()):
    """Writes a frame's arrays into ``td`` (a new TensorDict if None) under ``prefix``."""
    if td is None:  # a Size needs none of the constructor's checks (a fifth of a small frame's cost)
        td = TensorDict._build({}, batch_size, None if device is None else resolve(device)) \
            if type(batch_size) is Size else TensorDict(batch_size=batch_size, device=device)
    for key, value in frame.items():
        path = prefix + unravel_key_to_tuple(key)
        # a plain key as a string: ``set``'s fast path (a tuple takes the checked path, several times slower)
        td.set(path[0] if len(path) == 1 else path, _leaf_tensor(value, device))
    return td


def _leaf_tensor(value, device):
    """``as_tensor(value, device=device)``: a NumPy array of a tensor dtype bound for the CPU is wrapped
    directly (the same tensor, without as_tensor's conversions); an object array is non-tensor data."""
    if type(value) is np.ndarray and value.dtype in _FROM_NP and (_default_device[0] if device is None
                                                                    else device) is CPU:
        return wrap(value, CPU)
    if type(value) is np.ndarray and value.dtype == object:
        return non_tensor_entry(value, device)
    return as_tensor(value, device=device)


def frame_array(value):
    """A TensorDict entry as a frame holds it: a tensor's host array; non-tensor data (a string
    observation) as a NumPy object array of its batch shape."""
    return value._object_array() if getattr(value, "_is_non_tensor", False) else host_array(value)


def non_tensor_entry(objects, device=None):
    """The non-tensor data of a frame's object array: NonTensorData for batch [], else a
    NonTensorStack shaped like it (the collectors' batches hold these)."""
    if objects.ndim == 0:
        return NonTensorData(objects[()], batch_size=(), device=device)
    return NonTensorStack.from_object_array(objects, device=device)


def frame_of(tensordict, drop=()):
    """The frame of a TensorDict: {key tuple: host array} of its tensor leaves, but ``drop``."""
    frame = {}
    for key, value in tensordict.items(True, True):
        key = unravel_key_to_tuple(key)
        if key not in drop and isinstance(value, Tensor):
            frame[key] = host_array(value)
    return frame


def missing_action_error(policy, output, given):
    """The KeyError for a policy whose ``output`` TensorDict has no ``"action"`` entry, naming the
    policy and the keys it wrote (those of ``output`` but the ``given`` ones it was called with)."""
    name = getattr(policy, "__qualname__", type(policy).__name__)
    given = {unravel_key_to_tuple(key) for key in given}
    wrote = [key for key in output.keys() if unravel_key_to_tuple(key) not in given]
    inputs = sorted((key[0] if len(key) == 1 else key for key in given), key=str)
    return KeyError(f"the policy {name!r} wrote no 'action' entry: a policy must write the action to take under the "
                    "key 'action' (a TensorDictModule with out_keys=['action'], or a ProbabilisticActor sampling "
                    f"it); it wrote {wrote}, besides its inputs {inputs}")


def one_hot_hint(spec, shape):
    """What to do when an action of ``shape`` looks like indices into the one-hot action ``spec``
    (a sentence to append to a shape error), else ""."""
    indices = tuple(spec.shape[:-1])
    if isinstance(spec, OneHot) and tuple(shape) in (indices, indices + (1,)):
        return ("; the action spec is one-hot and this looks like categorical actions (indices): create the env "
                "with categorical_action_encoding=True, or write one-hot actions")
    return ""


def done_entries(terminated, truncated):
    """The done flags of a step: {done, terminated, truncated} with done = terminated | truncated."""
    return {DONE: terminated | truncated, TERMINATED: terminated, TRUNCATED: truncated}


def _not_done(batch_size):
    flags = np.zeros(tuple(batch_size) + (1,), dtype=bool)
    return done_entries(flags, flags)


def root_tensordict(frame, batch_size, device=None):
    """A root TensorDict from observations: done/terminated/truncated are False at the root,
    since an episode that ended has been reset."""
    frame = dict(frame)
    frame.update(_not_done(batch_size))
    return frame_to_tensordict(frame, batch_size, device)


def next_tensordict(next_obs, reward, terminated, truncated, batch_size, device=None):
    """The ``"next"`` TensorDict of a step: observations, reward and done flags."""
    frame = dict(next_obs)
    frame[REWARD] = reward
    frame.update(done_entries(terminated, truncated))
    return frame_to_tensordict(frame, batch_size, device)


def carry_over(env, tensordict, done):
    """The root TensorDict of the step after ``tensordict``'s: its ``"next"`` observations, with the
    envs in ``done`` reset (``env._continue_frame``; torchrl's ``step_mdp`` and ``maybe_reset`` for a
    torchrl-style env)."""
    if env._tensordict_style:
        return env._next_root(tensordict)
    next_td = tensordict["next"]
    next_obs = {unravel_key_to_tuple(k): frame_array(next_td.get(k)) for k in env.observation_spec.keys(True, True)}
    # an env on a GPU: its flags are copied to the host
    return root_tensordict(env._continue_frame(next_obs, host_array(done)), env.batch_size, env.device)


def _done_like(done, value):
    """``done`` (shaped batch + (1,)) broadcastable against ``value``."""
    if done.ndim == value.ndim:
        return done
    nb = done.ndim - 1
    return done.reshape(done.shape[:nb] + (1,) * (value.ndim - nb))


# ---- the transforms' chain (TransformedEnv, Compose) ----------------------------------------------------

def reset_chain(transforms, frame):
    """Every transform's root frame after a reset, from the base env's ``frame``."""
    roots = []
    for t in transforms:
        frame = t._frame_reset(frame)
        roots.append(frame)
    return roots


def step_chain(transforms, roots, frame, action):
    """Every transform's next frame of a step, from the base env's next ``frame`` (observations,
    reward, terminated, truncated); ``roots``: each transform's root frame; ``action``: the action
    the base env took."""
    nexts = []
    for t, root in zip(transforms, roots):
        frame = t._frame_step(root, frame, action)
        nexts.append(frame)
    return nexts


def continue_chain(transforms, nexts, frame, done):
    """Every transform's root frame of the step after one where ``done`` envs ended, from the base
    env's ``_continue_frame`` output ``frame``; ``nexts``: each transform's last next frame."""
    roots = []
    for t, n in zip(transforms, nexts):
        frame = t._frame_continue(n, frame, done)
        roots.append(frame)
    return roots


def restart_rows(transforms, nexts, base_obs, rows, flag_shape):
    """The transforms' next frames with the envs in ``rows`` (a step that skipped them) restarted
    from the base env's observations there, as ``continue_chain`` restarts a done env: a step
    counter at 0, an episode's reward sum at 0."""
    restarted = continue_chain(transforms, nexts, base_obs, rows.reshape(flag_shape))
    out = []
    for n, frame in zip(nexts, restarted):
        merged = dict(n)
        for key, value in frame.items():
            if key in merged:
                merged[key] = np.array(merged[key])
                merged[key][rows] = value[rows]
        out.append(merged)
    return out


def spec_chain(transforms, obs, act, rew, done, batch_size):
    """The specs after ``transforms``: each sees its predecessors' output (as ``parent_specs`` too,
    while its hooks run). A transform that overrides ``transform_output_spec`` or
    ``transform_input_spec`` gets the whole output or input spec; the others the leaf hooks."""
    for t in transforms:
        t._env_batch_size = batch_size
        t.parent_specs = types.SimpleNamespace(observation_spec=obs, action_spec=act, reward_spec=rew,
                                               done_spec=done)
        try:
            if _overrides(t, "transform_output_spec", TransformProtocol):
                output_spec = t.transform_output_spec(_output_spec(obs, rew, done, batch_size))
                new_obs, new_rew, new_done = (output_spec["full_observation_spec"],
                                              output_spec["full_reward_spec", "reward"], output_spec["full_done_spec"])
            else:
                new_obs = t.transform_observation_spec(obs.clone())
                new_rew = t.transform_reward_spec(rew.clone())
                new_done = t.transform_done_spec(done.clone())
            if _overrides(t, "transform_input_spec", TransformProtocol):
                new_act = t.transform_input_spec(_input_spec(act, batch_size))["full_action_spec", "action"]
            else:
                new_act = t.transform_action_spec(act.clone())
        finally:
            t.parent_specs = None
        obs, rew, done, act = new_obs, new_rew, new_done, new_act
        batch_size = t.transform_env_batch_size(batch_size)
    return obs, act, rew, done


def _output_spec(obs, rew, done, batch_size):
    reward_spec = Composite(reward=rew.clone(), shape=batch_size)
    return Composite(full_observation_spec=obs.clone(), full_reward_spec=reward_spec, full_done_spec=done.clone(),
                     shape=batch_size)


def _input_spec(act, batch_size):
    return Composite(full_action_spec=Composite(action=act.clone(), shape=batch_size),
                     full_state_spec=Composite(shape=batch_size), shape=batch_size)


# ---- transforms: the TensorDict interface, and the frame hooks that run it -----------------------------

def key_list(keys, what, allow_none=False):
    """A list of key tuples from a key or a sequence of keys (str or tuple of str); None stays
    None with ``allow_none``, else is a ValueError."""
    if keys is None:
        if allow_none:
            return None
        raise ValueError(f"{what} must be given")
    if isinstance(keys, (str, tuple)):
        keys = [keys]
    try:
        return [unravel_key_to_tuple(k) for k in keys]
    except TypeError as err:
        raise TypeError(f"{what}: {err}") from None


def _overrides(obj, name, base):
    return getattr(type(obj), name) is not getattr(base, name)


class TransformProtocol:
    """The protocol half of ``Transform``: torchrl's TensorDict methods and spec hooks (module
    docstring, THE RULE) with torchrl's defaults, and the frame hooks ``TransformedEnv`` calls,
    whose defaults run the TensorDict methods."""

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        self.in_keys = key_list(in_keys, "in_keys", allow_none=True) or []
        self.out_keys = list(self.in_keys) if out_keys is None else key_list(out_keys, "out_keys")
        self.in_keys_inv = key_list(in_keys_inv, "in_keys_inv", allow_none=True) or []
        self.out_keys_inv = list(self.in_keys_inv) if out_keys_inv is None else key_list(out_keys_inv,
                                                                                         "out_keys_inv")
        self._missing_tolerance = False
        self._env_batch_size = None  # set by TransformedEnv when it builds its specs

    # ---- torchrl's TensorDict methods ------------------------------------------------------------
    def _apply_transform(self, value):
        raise NotImplementedError(f"{type(self).__name__}._apply_transform is not coded; a transform coded in "
                                  "_call or _step is called through an env, not through forward")

    def _inv_apply_transform(self, value):
        return value

    def _map_entries(self, tensordict, pairs, function):
        """``function`` on the entry of each ``(source, dest)`` pair's source, written to dest; a
        missing source is a KeyError unless ``missing_tolerance``."""
        for source, dest in pairs:
            value = tensordict.get(source, None)
            if value is not None:
                tensordict.set(dest, function(value))
            elif not self._missing_tolerance:
                raise KeyError(f"{self!r}: {source} not found in the tensordict (keys: "
                               f"{sorted(map(str, tensordict.keys(True, True)))})")
        return tensordict

    def _call(self, next_tensordict):
        """Each ``in_keys`` entry through ``_apply_transform`` into the matching ``out_keys`` entry."""
        return self._map_entries(next_tensordict, zip(self.in_keys, self.out_keys), self._apply_transform)

    def _step(self, tensordict, next_tensordict):
        return self._call(next_tensordict)

    def _reset(self, tensordict, tensordict_reset):
        return tensordict_reset

    def _inv_call(self, tensordict):
        """Each ``out_keys_inv`` entry through ``_inv_apply_transform`` into the matching ``in_keys_inv``."""
        return self._map_entries(tensordict, zip(self.out_keys_inv, self.in_keys_inv), self._inv_apply_transform)

    def forward(self, tensordict):
        """``_apply_transform`` on the ``in_keys`` entries of ``tensordict`` (data outside an env, a
        replay buffer's), written to ``out_keys``; returns ``tensordict``."""
        return self._map_entries(tensordict, zip(self.in_keys, self.out_keys), self._apply_transform)

    def inv(self, tensordict):
        """``_inv_call`` on a shallow copy of ``tensordict``."""
        return self._inv_call(tensordict.clone(False))

    def set_missing_tolerance(self, mode=False):
        """Whether missing in-keys are skipped rather than a KeyError; returns the transform."""
        self._missing_tolerance = bool(mode)

    @property
    def missing_tolerance(self):
        """Whether missing in-keys are skipped (``set_missing_tolerance``)."""
        return self._missing_tolerance

    def transform_env_batch_size(self, batch_size):
        """The env's batch size after this transform, from the one before it (default: unchanged)."""
        return batch_size

    # ---- spec hooks --------------------------------------------------------------------------------
    def transform_observation_spec(self, observation_spec):
        """The observation spec after this transform (default: unchanged)."""
        return observation_spec

    def transform_reward_spec(self, reward_spec):
        """The reward spec after this transform (default: unchanged)."""
        return reward_spec

    def transform_done_spec(self, done_spec):
        """The done spec after this transform (default: unchanged)."""
        return done_spec

    def transform_action_spec(self, action_spec):
        """The action spec the env sees before this transform's inverse (default: unchanged)."""
        return action_spec

    def transform_state_spec(self, state_spec):
        """The state spec after this transform (default: unchanged)."""
        return state_spec

    def transform_output_spec(self, output_spec):
        """The output spec (``full_observation_spec``, ``full_reward_spec``, ``full_done_spec``)
        through the leaf hooks."""
        output_spec = output_spec.clone()
        output_spec["full_observation_spec"] = self.transform_observation_spec(output_spec["full_observation_spec"])
        output_spec["full_reward_spec", "reward"] = self.transform_reward_spec(output_spec["full_reward_spec",
                                                                                           "reward"])
        output_spec["full_done_spec"] = self.transform_done_spec(output_spec["full_done_spec"])
        return output_spec

    def transform_input_spec(self, input_spec):
        """The input spec (``full_action_spec``, ``full_state_spec``) through the leaf hooks."""
        input_spec = input_spec.clone()
        input_spec["full_state_spec"] = self.transform_state_spec(input_spec["full_state_spec"])
        input_spec["full_action_spec", "action"] = self.transform_action_spec(input_spec["full_action_spec",
                                                                                         "action"])
        return input_spec

    # ---- the frame hooks (TransformedEnv's calls): by default, the TensorDict methods -------------
    def _frame_reset(self, frame):
        batch_size = self._batch_size()
        out = self._reset(TensorDict(batch_size=batch_size), root_tensordict(frame, batch_size))
        return frame_of(out, _FLAGS)

    def _frame_step(self, root, next_frame, action):
        batch_size = self._batch_size()
        tensordict = root_tensordict(root, batch_size)
        tensordict.set(ACTION, as_tensor(np.array(action)))
        next_td = next_tensordict({k: v for k, v in next_frame.items() if k not in STEP_EXTRAS},
                                  next_frame[REWARD], next_frame[TERMINATED], next_frame[TRUNCATED], batch_size)
        return frame_of(self._step(tensordict, next_td), (DONE,))

    def _frame_continue(self, next_frame, frame, done):
        batch_size = self._batch_size()
        state = {key: value for key, value in next_frame.items() if key not in STEP_EXTRAS}
        tensordict = frame_to_tensordict(state, batch_size)
        tensordict.set(RESET, as_tensor(done))
        out = frame_of(self._reset(tensordict, root_tensordict(frame, batch_size)), _FLAGS)
        for key, value in state.items():  # rows not reset go on from the step
            if key in out:
                out[key] = np.where(_done_like(done, value), out[key], value)
        return out

    def _frame_inv(self, action, root):
        tensordict = frame_to_tensordict(root, self._batch_size())
        tensordict.set(ACTION, as_tensor(np.array(action)))
        return host_array(self._inv_call(tensordict).get(ACTION))

    def _inverts_actions(self):
        """Whether ``_frame_inv`` may change the action (else ``TransformedEnv`` skips it)."""
        if _overrides(self, "_frame_inv", TransformProtocol):
            return True
        return _overrides(self, "_inv_call", TransformProtocol) or bool(self.in_keys_inv)

    def _batch_size(self):
        if self._env_batch_size is None:
            raise RuntimeError(f"{type(self).__name__}: a transform written on TensorDicts needs its env's batch "
                               "size: put it in a TransformedEnv")
        return self._env_batch_size


class ArrayMapping:
    """Frame hooks of a stateless transform whose fast path is one array-level mapping
    ``_frame_call(frame) -> frame`` (a new dict when it changes anything), applied to reset, step
    and continue frames alike. Mixed in before ``Transform``."""

    def _frame_call(self, frame):
        return frame

    def _frame_reset(self, frame):
        return self._frame_call(frame)

    def _frame_step(self, root, next_frame, action):
        return self._frame_call(next_frame)

    def _frame_continue(self, next_frame, frame, done):
        return self._frame_call(frame)

    def forward(self, tensordict):
        """``_frame_call`` on the tensor entries of ``tensordict`` (e.g. data from a replay buffer);
        returns ``tensordict``."""
        return map_tensordict(tensordict, self._frame_call)


def map_tensordict(tensordict, frame_call):
    """``tensordict`` (changed in place) after ``frame_call``, a map of frames, on its tensor
    entries: the entries it changed or added are written, those it dropped removed."""
    frame = frame_of(tensordict)
    out = frame_call(frame)
    for key, value in out.items():
        if value is not frame.get(key):
            tensordict.set(key, as_tensor(value, device=tensordict.device))
    for key in frame:
        if key not in out:
            tensordict.pop(key)
    return tensordict


# ---- the collector's batches ---------------------------------------------------------------------------

def stack_steps(arrays, axis):
    """``np.stack(arrays, axis)`` for per-step arrays of one shape, in a third of its time: one
    concatenate (its per-array cost is far below stack's), then a reshape."""
    first = arrays[0]
    if not first.ndim or list(map(_shape_of, arrays)).count(first.shape) != len(arrays):
        return np.stack(arrays, axis)  # (which also names any shape mismatch)
    return stack_same(arrays, axis)


def stack_same(arrays, axis):
    """``stack_steps`` for arrays known to share one shape, at least 1-d."""
    out = np.concatenate(arrays).reshape((len(arrays),) + arrays[0].shape)
    return np.ascontiguousarray(np.moveaxis(out, 0, axis)) if axis else out


_shape_of = operator.attrgetter("shape")


def most_dropped(dropped, n):
    """The most rows any of ``n`` envs has among ``dropped`` (per step: None, or a bool mask of the
    envs whose row is not data)."""
    masks = [rows for rows in dropped if rows is not None]
    return int(np.sum(masks, axis=0, dtype=np.int64).reshape(-1).max()) if masks else 0


def pick_transitions(dropped, n, T):
    """Each of ``n`` envs' first ``T`` transitions among the steps, ``dropped`` (per step: None or
    the envs whose row is not data) left out. Returns ``(envs, picked, rest)``: env and step index
    of each picked transition, env by env, and the [envs, steps] mask of the transitions beyond T."""
    data = np.ones((len(dropped), n), dtype=bool)  # [steps, envs]
    partial = [j for j, rows in enumerate(dropped) if rows is not None]
    if partial:
        data[partial] = ~np.stack([dropped[j] for j in partial]).reshape(len(partial), n)
    # [envs, steps]: each env's running count of transitions along a contiguous row (a sixth of
    # the time of counting down the columns of [steps, envs])
    data = np.ascontiguousarray(data.T)
    keep = data.cumsum(axis=1, dtype=np.int32) <= T
    keep &= data
    # one flat nonzero, split into (env, step): a third of the time of a 2-d nonzero
    flat = np.flatnonzero(keep)
    envs = flat // data.shape[1]
    keep ^= data  # (now the data rows beyond T)
    return envs, flat - envs * data.shape[1], keep
