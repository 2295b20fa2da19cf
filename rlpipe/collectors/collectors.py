"""``SyncDataCollector`` and ``RandomPolicy``, with torchrl's semantics.

The collection loop drives the environment through the env step protocol
(``rlpipe/envs/step_protocol.py``: what it calls, and how skipped rows are dropped): each step
records one tuple of the frame's arrays, and each batch turns the steps into per-key arrays with
one concatenate per key. No TensorDict is built per
step: a TensorDict policy reads one reused TensorDict whose leaves wrap persistent buffers.
"""
import functools
import inspect
import itertools
import operator
import warnings
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from .._creation import from_numpy, zeros_like
from .._device import CPU, resolve as _resolve_device
from .._tensor import Size, Tensor, host_array, wrap
from ..autograd.grad_mode import no_grad
from ..envs.common import EnvBase
from ..envs.step_protocol import (DONE_KEYS, missing_action_error, most_dropped, non_tensor_entry, one_hot_hint,
                                  pick_transitions, stack_same, stack_steps)
from ..envs.transforms import StepCounter, TransformedEnv
from ..envs.policy_states import policy_next_keys, reset_mask
from ..envs.utils import ExplorationType, RandomPolicy, set_exploration_type
from ..nn import Module
from ..nn.modules.module import _global_forward_hooks, _global_forward_pre_hooks
from ..tensordict import TensorDict, TensorDictModule, is_tensor_collection, unravel_key_to_tuple
from ..postprocs import split_trajectories
from ._common import (POLICY_VERSION, SILENCE, TRAJ_IDS, CollectorBase, assembled_trajectories, check_frame_counts,
                      checked_init_random_frames, checked_replay_buffer, checked_split_trajs, checked_trajs_per_batch,
                      frames_limit, into_buffer, normalized_total_frames, rl_warn, rounded_total_frames, tensordict_of)
from ..modules.utils import append_missing_env_transforms


def collector_for_backend(backend, backend_options, num_collectors, sync, args, kwargs):
    """torchrl's ``Collector(..., backend=..., num_collectors=..., sync=...)`` dispatch: ``"process"``
    (the default with ``num_collectors``) gives a ``MultiSyncDataCollector`` (``sync=True``, the default)
    or a ``MultiaSyncDataCollector`` over ``num_collectors`` workers."""
    backend = "process" if backend is None else backend
    if backend != "process":
        raise ValueError(f"Collector does not support backend={backend!r} in rlpipe. Expected one of ['direct', "
                         "'process'] (use RayCollector for Ray)")
    if num_collectors is not None and (isinstance(num_collectors, bool) or not isinstance(num_collectors, int)
                                       or num_collectors < 1):
        raise ValueError(f"num_collectors must be a positive integer, got {num_collectors!r}.")
    # rlpipe.collectors sets the multi-process classes here once both modules are loaded (multi imports us)
    cls = globals()["MultiSyncDataCollector" if sync is None or sync else "MultiaSyncDataCollector"]
    env_fn, rest = (args[0], args[1:]) if args else (kwargs.pop("create_env_fn"), ())
    if not isinstance(env_fn, (list, tuple)):
        env_fn = [env_fn] * (num_collectors or 1)
    elif num_collectors is not None and num_collectors != len(env_fn):
        raise ValueError(f"num_collectors does not match the number of environment constructors: {num_collectors} "
                         f"!= {len(env_fn)}.")
    return cls(list(env_fn), *rest, **dict(backend_options or {}), **kwargs)

__all__ = ["SyncDataCollector", "Collector", "BaseCollector", "RandomPolicy"]


def _wrap_policy(policy, env):
    """A callable on TensorDicts: TensorDict policies as they are; a plain Module whose forward
    takes observation entries (by parameter name, else ``observation``) wrapped as torchrl does."""
    if policy is None:
        return RandomPolicy(env.action_spec)
    if isinstance(policy, (TensorDictModule, RandomPolicy)) or not isinstance(policy, Module):
        return policy
    observation_keys = [k for k in env.observation_spec.keys(True, True)]
    params = [p for p in inspect.signature(policy.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in params]
    in_keys = names if names and all(n in observation_keys for n in names) else ["observation"]
    return TensorDictModule(policy, in_keys=in_keys, out_keys=["action"])


def _policy_device(requested, policy):
    """Where the policy reads its observations: ``policy_device`` (or ``device``) when given, else
    where a Module policy's parameters live, else the CPU."""
    if requested is not None:
        return _resolve_device(requested)  # loads the cuda backend, as a tensor on it would
    if isinstance(policy, Module):
        for tensor in itertools.chain(policy.parameters(), policy.buffers()):
            return tensor.device
    return _resolve_device("cpu")


_shape_of = operator.attrgetter("shape")


def _env_state_owner(env):
    """Where an environment's state_dict lives, as torchrl looks for it: a TransformedEnv's
    transform, else the environment itself."""
    return env.transform if isinstance(env, TransformedEnv) else env


def _direct_call(policy, td, extra_keys, state_keys, to_device):
    """(module, input tensors) when ``policy`` is a plain ``TensorDictModule`` that reads observations
    of the step TensorDict ``td`` and writes only ``"action"``: the collector then calls its module
    on the step buffers' tensors directly (what ``forward`` would do, without reading and writing a
    TensorDict at every step); None otherwise."""
    if (type(policy) is not TensorDictModule or extra_keys or state_keys or to_device is not None
            or policy._forward_hooks or policy._forward_pre_hooks or "forward" in policy.__dict__
            or policy.method is not None or policy.method_kwargs or policy._kwargs is not None
            or policy._get_kwargs or [unravel_key_to_tuple(k) for k in policy.out_keys] != [("action",)]
            or list(policy._out_keys_source) != list(policy.out_keys)):
        return None
    keys = {unravel_key_to_tuple(k) for k in td.keys(True, True)}
    if any(unravel_key_to_tuple(k) not in keys for k in policy.in_keys):
        return None
    module = policy._modules.get("module")
    return (policy.module if module is None else module), [td.get(k) for k in policy.in_keys]


def trajectory_ids(dones, start, new_ids):
    """``(ids, after)``: the trajectory ids of ``n`` envs at each of ``steps`` steps, from their ids
    ``start`` [n] at the first step and the done flags ``dones`` [steps, n] (a done env starts a new
    trajectory at the next step), and their ids after the last step. ``new_ids(count)`` hands out
    fresh ids, given here in step order, env order within a step (as updating step by step would)."""
    steps, n = dones.shape
    if not steps:
        return np.zeros((0, n), np.int64), start
    flat = dones.reshape(-1)
    # row 0: the start ids; row s + 1: the ids the envs done at step s take
    fresh = np.empty((steps + 1) * n, np.int64)
    fresh[:n] = start.reshape(n)
    fresh[n:][flat] = new_ids(int(np.count_nonzero(flat)))
    # per step and env, the row holding its id after that step: 1 + the last step at or before it where
    # the env was done, 0 where none was
    row = np.maximum.accumulate(dones * np.arange(1, steps + 1, dtype=np.int64)[:, None], axis=0)
    after = fresh.take(row * n + np.arange(n))  # [steps, n]
    return np.concatenate([start.reshape(1, n), after[:-1]]), after[-1].reshape(start.shape).copy()


def _is_private(key):
    return any(part.startswith("_") for part in key)


class SyncDataCollector(CollectorBase):
    """Steps an environment with a policy and yields TensorDict batches of ``frames_per_batch``
    frames: ``[frames_per_batch]`` for one env, ``[num_envs, frames_per_batch // num_envs]`` for a
    batched one. Trajectories continue across batches; ``("collector", "traj_ids")`` tells them
    apart. Policies run under no_grad.

    Devices: the policy reads its observations on ``policy_device`` (default ``device``, else
    where a Module policy's parameters live, else the CPU), copied there at each step; batches are
    delivered on ``storing_device`` (default ``device``, else the CPU). Environments step on the
    host, so ``env_device`` is accepted for torchrl's signature and has no effect.

    Whatever else a TensorDict policy writes besides ``"action"`` (``"logits"``, a log-probability,
    ...; not ``"_"``-prefixed keys) is kept in the batch, as torchrl does; in random batches
    (``init_random_frames``) those entries are zeros. When the first batch is random, the policy is
    called once on the first observation to learn them, as torchrl calls it when it starts (not a
    policy whose ``out_keys`` are just ``["action"]``).

    An error inside a batch (the policy's, the environment's, a refused observation) loses the
    steps collected so far in that batch; the next batch then starts new trajectories from a reset
    (new trajectory ids), rather than going on as if the lost steps had been delivered. A streaming
    postproc that holds frames back (``MultiStep(streaming=True)``) should be ``flush()``-ed then:
    it sees only done flags, not trajectory ids.

    The policy runs under ``set_exploration_type(exploration_type)`` (torchrl's default: RANDOM, so
    probabilistic actors sample and exploration modules explore while collecting).

    ``frames_per_batch`` is the frames of one batch (torchrl's ``requested_frames_per_batch``, also
    set); torchrl's own ``frames_per_batch`` attribute is the steps per env (``steps_per_batch``
    here).

    ``reset_at_each_iter=True`` starts every batch from a reset, with new trajectory ids (torchrl's
    first such batch starts at id ``num_envs``: its construction's reset uses the first ones).
    ``split_trajs=True`` yields ``[trajectories, max_len]`` batches (zero-padded, rows env by env,
    ``("collector", "mask")`` marking the steps), as torchrl's ``split_trajectories``.
    ``trajs_per_batch=N`` yields batches of ``N`` whole trajectories instead (each ends with a
    done; those still running wait for their next steps; ``total_frames`` still bounds the
    collection): ``[N, max_len]`` zero-padded with ``("collector", "mask")`` (``traj_format``
    ``"padded"``, the default), or concatenated into one flat batch (``"cat"``). torchrl 0.14 warns
    that its default becomes ``"cat"`` in 0.16; rlpipe does not. Episodes a reset interrupts
    (``reset_at_each_iter``, ``reset()``, ``set_seed()``) are dropped.
    Actions: the policy's action must be a Tensor of the action spec's shape; as torchrl, its values
    go to the environment unchecked (an out-of-bounds continuous action is clipped or refused by
    the Gymnasium env itself, a one-hot action is read by its argmax). ``check_action_spec=True``
    (rlpipe's) raises a ValueError at the first action outside the spec instead, before the
    environment sees it (a check per step).
    ``max_frames_per_traj``: a positive value truncates trajectories with a ``StepCounter``; None,
    0 or a negative value means no limit (as torchrl, which stores 0 then).
    ``compile_policy`` and ``cudagraph_policy`` (torchrl's options) are accepted and change nothing:
    rlpipe runs the policy eagerly, as ``rlpipe.compile`` does.
    ``compact_obs=True`` (torchrl's option) leaves the ``("next", ...)`` observations out of the
    batches (they are the next frame's root ones, except at an episode's or a batch's end): the
    ``NextStateReconstructor`` transform rebuilds them from a flat sample (NaN where the next step
    is not in it). ``("next", "reward")`` and the done flags stay.
    ``track_policy_version=True`` tags every frame with ``"policy_version"`` and
    ``("next", "policy_version")`` (int64): the number of ``update_policy_weights_()`` calls before
    the batch (torchrl's root entry of a batch's first frame may still carry the version before;
    here the whole batch has one).
    ``replay_buffer=rb`` (torchrl's option): each batch (after ``split_trajs``/``postproc``, or each
    ``trajs_per_batch`` batch) is written into ``rb`` with ``rb.extend`` and the iteration yields
    None in its place. ``auto_register_policy_transforms=True`` appends to the env what a Module
    policy needs and the env's specs lack: an ``InitTracker`` (``"is_init"``) and the primers of its
    recurrent submodules (``rlpipe.modules.utils.missing_env_transforms``). torchrl 0.14's default
    (None) warns about its v0.15 change when something is missing; rlpipe's None adds nothing, silently."""

    def __new__(cls, *args, backend=None, backend_options=None, num_collectors=None, sync=None, **kwargs):
        # torchrl 0.14's Collector(..., backend=...): "direct" is this class, "process" a multi-process one
        if backend in (None, "direct") and num_collectors is None:
            return super().__new__(cls)
        return collector_for_backend(backend, backend_options, num_collectors, sync, args, kwargs)

    def __init__(self, create_env_fn, policy=None, *, frames_per_batch, total_frames=-1, postproc=None,
                 max_frames_per_traj=None, init_random_frames=0, reset_at_each_iter=False, split_trajs=False,
                 device=None, storing_device=None, progress_bar=False, env_device=None, policy_device=None,
                 exploration_type=ExplorationType.RANDOM, track_policy_version=False, trajs_per_batch=None,
                 traj_format=None, compact_obs=False, check_action_spec=False, replay_buffer=None,
                 extend_buffer=True, auto_register_policy_transforms=None, backend=None, backend_options=None,
                 num_collectors=None, sync=None, compile_policy=None, cudagraph_policy=None):
        total_frames = normalized_total_frames(total_frames)
        check_frame_counts(frames_per_batch, total_frames)
        self.replay_buffer = checked_replay_buffer(replay_buffer, extend_buffer)
        self.extend_buffer = True
        self.env = create_env_fn if isinstance(create_env_fn, EnvBase) else create_env_fn()
        if not isinstance(self.env, EnvBase):
            raise TypeError(f"create_env_fn must be an rlpipe environment or a function returning one, got "
                            f"{type(self.env).__name__}")
        if auto_register_policy_transforms:  # the recurrent policy's InitTracker and primers, as torchrl
            self.env = append_missing_env_transforms(self.env, policy)
        max_frames_per_traj = frames_limit(max_frames_per_traj)
        if max_frames_per_traj > 0:  # as torchrl: a StepCounter truncates the trajectories
            if "step_count" in self.env.observation_spec.keys():
                raise ValueError("max_frames_per_traj is set but the environment already has a 'step_count' entry: "
                                 "use its StepCounter(max_steps=...) instead")
            self.env = TransformedEnv(self.env, StepCounter(max_steps=max_frames_per_traj))
        if self.env._skips_rows and len(self.env.batch_size) > 1:
            raise ValueError(f"SyncDataCollector: an environment of batch size {list(self.env.batch_size)} whose inner "
                             "vector envs reset in the step after an episode ends (Gymnasium's NEXT_STEP autoreset, "
                             "e.g. vectorization_mode='vector_entry_point') cannot be collected yet; expected a batch "
                             "of one dim for such envs. Batch envs that reset in the same step instead (GymEnv(..., "
                             "num_envs=n) with vectorization_mode='sync' or 'async')")
        self.n_envs = max(int(np.prod(tuple(self.env.batch_size))), 1)
        if frames_per_batch % self.n_envs:
            rl_warn(f"frames_per_batch ({frames_per_batch}) is not exactly divisible by the number of batched "
                    f"environments ({self.n_envs}), this results in more frames_per_batch per iteration that requested "
                    f"({-(-frames_per_batch // self.n_envs) * self.n_envs})." + SILENCE, stacklevel=2)
        self.steps_per_batch = -(-frames_per_batch // self.n_envs)
        self.frames_per_batch = self.requested_frames_per_batch = self.steps_per_batch * self.n_envs
        self.total_frames = rounded_total_frames(total_frames, self.frames_per_batch, stacklevel=3)
        init_random_frames = checked_init_random_frames(init_random_frames)
        if init_random_frames and init_random_frames % self.frames_per_batch:
            rl_warn(f"init_random_frames ({init_random_frames}) is not exactly a multiple of frames_per_batch "
                    f"({self.frames_per_batch}), this results in more init_random_frames than requested "
                    f"({-(-init_random_frames // self.frames_per_batch) * self.frames_per_batch})." + SILENCE,
                    stacklevel=2)
        self.policy = _wrap_policy(policy, self.env)
        self.policy_device = _policy_device(policy_device if policy_device is not None else device, policy)
        self.random_policy = RandomPolicy(self.env.action_spec)
        self.postproc = postproc
        self.max_frames_per_traj = max_frames_per_traj
        self.init_random_frames = init_random_frames
        self.reset_at_each_iter = reset_at_each_iter
        self.split_trajs = checked_split_trajs(split_trajs)
        self.trajs_per_batch, self.traj_format = checked_trajs_per_batch(trajs_per_batch, traj_format, self.split_trajs)
        self._exploration = set_exploration_type(exploration_type)  # checks it (ValueError)
        self.exploration_type = self._exploration.type
        self.storing_device = storing_device if storing_device is not None else device
        self.progress_bar = progress_bar
        self.track_policy_version = bool(track_policy_version)
        self.compact_obs = bool(compact_obs)
        rewriters = getattr(self.env, "_stored_step_rewriters", None)  # a TransformedEnv's
        self._stored_step_rewriters = rewriters() if rewriters is not None else []
        self._version = 0             # update_policy_weights_() calls so far (torchrl's policy version)
        self._frames = 0
        self._iter = -1               # the batch being (or last) collected, as torchrl counts
        self._obs = None              # the frame the next step acts on
        self._traj_ids = None         # per env
        self._carried = None          # skipped envs: the steps (kept rows, ids) the next batch starts with
        self._next_traj_id = 0
        self._assembly = None         # trajs_per_batch: (running trajectories, whole ones not yet yielded)
        # the policy's step: what it must return, and what it reads and writes besides the action
        self._action_shape = tuple(self.env.action_spec.shape)
        self.check_action_spec = bool(check_action_spec)
        self._action_in_spec = self.env.action_spec.host_membership_test() if self.check_action_spec else None
        self._step_td = None          # reused TensorDict for TensorDict policies, made at their first step
        self._direct = None           # (module, inputs) of a plain TensorDictModule policy (_direct_call)
        self._step_buffers = {}       # its observation leaves' arrays, which each step overwrites
        self._object_keys = ()        # its non-tensor observations' keys (object arrays in the frames)
        self._to_policy_device = None  # host array -> array on the policy's GPU, when it has one
        self._extra_keys = None       # [(key, per-step shape, dtype)] the policy writes besides the action
        self._state_keys = ()         # k for each ("next", k) the policy writes that the env does not give
        self._next_states = []        # [(k, the policy's last ("next", k))]: its k at the next step
        self._primed_keys = ()        # k for each ("next", k) the policy writes over an entry the env only carries
        self._primed_states = {}      # {k: the policy's last ("next", k)} (host arrays), which the next frames take
        self._observation_shapes = {}  # key -> the observation spec's shape there, looked up once

    # ---- collection ------------------------------------------------------------------------------
    def rollout(self, random=None):
        """The next batch before ``split_trajs`` and ``postproc`` (torchrl's ``rollout``), counted in
        the frames collected; its last batch dim is named ``"time"``, as torchrl names it.
        ``random``: whether the policy is replaced by random actions for this whole batch (by default
        torchrl's rule: while the frames collected before it are below ``init_random_frames``). The
        multi-process collectors' workers call this, their main process deciding ``random``."""
        if random is None:
            random = self._frames < self.init_random_frames
        self._iter += 1
        try:
            # the policy's grad mode and exploration type, once per batch rather than once per step
            with no_grad(), self._exploration.clone():
                collect = self._collect_skipping if self.env._skips_rows else self._collect
                batch = self._assemble(*collect(random or isinstance(self.policy, RandomPolicy)))
            batch.refine_names(..., "time")  # as torchrl's batches
        except BaseException:
            self._obs = None  # the steps collected so far are lost: the next batch starts afresh
            raise
        self._frames += self.frames_per_batch
        return batch

    def _collect(self, all_random):
        """One batch: its steps, each a tuple (obs, action, extras, next_obs, reward, terminated,
        truncated) of host arrays (``obs`` and ``next_obs`` frames, ``extras`` the policy's other
        outputs in ``_extra_keys``' order), and its trajectory changes for ``_trajectory_ids``."""
        env = self.env
        if self._obs is None or self.reset_at_each_iter:
            self._start()
        T = self.steps_per_batch
        if all_random:  # random actions for the whole batch, sampled at once: [T, *env dims, *action]
            if self._extra_keys is None and self._may_write_extras():
                self._act(self._obs)  # learns the shapes of the policy's other outputs
            random_actions = list(host_array(env.action_spec.rand((T,))))  # the spec may live on a GPU
            # the policy's other outputs are zeros in a random batch (torchrl's preallocated batch)
            zero_extras = tuple(np.zeros(shape, dtype) for _, shape, dtype in self._extra_keys or ())
        shape = tuple(env.batch_size)
        single = not shape
        first_ids = self._traj_ids.copy()
        events = []  # (step, ended envs, their new ids)
        steps = []
        record = steps.append
        step = env._step_frame
        for t in range(T):
            obs = self._obs
            action, extras = (random_actions[t], zero_extras) if all_random else self._act(obs)
            try:
                next_obs, reward, terminated, truncated = step(action)
            except Exception as e:
                raise RuntimeError(f"SyncDataCollector: {env!r} raised at frame {self._frames + t * self.n_envs} "
                                   f"(step {t} of batch {self._iter}): {type(e).__name__}: {e}") from e
            if self._primed_states and not all_random:  # (a random step's action is not the policy's)
                next_obs = self._with_primed_states(next_obs)
            record((obs, action, extras, next_obs, reward, terminated, truncated))
            if (terminated[0] or truncated[0]) if single else (terminated.any() or truncated.any()):
                done = terminated | truncated
                self._obs = self._continued(next_obs, done)
                self._start_new_trajectories(done.reshape(shape), t, events)
            else:
                self._obs = next_obs
        return steps, (first_ids, events)

    def _collect_skipping(self, all_random):
        """``_collect`` for an env whose steps may skip envs ("Skipped rows", ``step_protocol.py``):
        steps until every env has ``steps_per_batch`` transitions, its skipped steps left out. Returns the
        steps, the trajectory ids [envs, T] and the index picking each env's transitions out of
        the steps; the steps holding an env's transitions beyond T start the next batch."""
        env = self.env
        if self._obs is None or self.reset_at_each_iter:
            self._start()
            self._carried = None
        T, n = self.steps_per_batch, self.n_envs
        # dropped: per step, None or the envs whose row is not data (skipped, or delivered in the last batch)
        steps, dropped, carried_ids = self._carried or ([], [], np.zeros((0, n), np.int64))
        first_new = len(steps)
        need = T + most_dropped(dropped, n)
        if all_random:
            if self._extra_keys is None and self._may_write_extras():
                self._act(self._obs)  # learns the shapes of the policy's other outputs
            zero_extras = tuple(np.zeros(shape, dtype) for _, shape, dtype in self._extra_keys or ())
        while len(steps) < need:
            obs = self._obs
            action, extras = (host_array(env.action_spec.rand()), zero_extras) if all_random else self._act(obs)
            try:
                next_obs, reward, terminated, truncated = env._step_frame(action)
            except Exception as e:
                raise RuntimeError(f"SyncDataCollector: {env!r} raised at step {len(steps)} of batch {self._iter}: "
                                   f"{type(e).__name__}: {e}") from e
            if self._primed_states and not all_random:  # (a random step's action is not the policy's)
                next_obs = self._with_primed_states(next_obs)
            steps.append((obs, action, extras, next_obs, reward, terminated, truncated))
            dropped.append(env._skipped_rows)
            done = terminated | truncated  # (a skipped env is not done)
            if np.count_nonzero(done):
                self._obs = self._continued(next_obs, done) if self._primed_states else \
                    env._continue_frame(next_obs, done)  # (nothing of the policy's to carry over)
            else:
                self._obs = next_obs
            if len(steps) == need:  # enough steps unless some env skipped more than the carried steps made up
                need = T + most_dropped(dropped, n)
        # each step's trajectory ids, all at once rather than updated step by step
        new = steps[first_new:]
        dones = np.zeros((0, n), bool) if not new else \
            np.concatenate([s[5] for s in new]).reshape(len(new), n) | \
            np.concatenate([s[6] for s in new]).reshape(len(new), n)
        ids, self._traj_ids = trajectory_ids(dones, self._traj_ids, self._new_traj_ids)
        ids = np.concatenate([carried_ids, ids])
        envs, picked, rest = pick_transitions(dropped, n, T)
        later = np.flatnonzero(rest.any(axis=0))
        if later.size:
            first = int(later[0])
            self._carried = (steps[first:], list(np.ascontiguousarray(~rest[:, first:].T)), ids[first:])
        else:
            self._carried = None
        flat = picked * n + envs  # into the steps' arrays stacked [steps * envs, ...]
        return steps, ids.reshape(-1).take(flat).reshape(n, T), flat

    # ---- the policy's step ------------------------------------------------------------------------
    def _act(self, obs):
        """The policy's action on one step's observations, and the other entries it writes (a tuple
        in ``_extra_keys``' order), as host arrays."""
        td = self._step_td
        direct = self._direct
        if direct is not None and not (_global_forward_hooks or _global_forward_pre_hooks):
            for key, buffer in self._step_buffers.items():
                buffer[...] = obs[key]
            action = direct[0](*direct[1])
            if type(action) is not Tensor:  # where TensorDictModule.forward would take the action from
                if isinstance(action, tuple) and len(action) == 1:
                    action = action[0]
                elif isinstance(action, Mapping) or is_tensor_collection(action):
                    action = action.get("action")
            elif action._device is CPU and action._data.shape == self._action_shape and not self.check_action_spec:
                return action._data, ()  # _host_action's checks passed: its host array as it is
            return self._host_action(action), ()
        if td is None:
            td = self._make_step_td(obs)
        else:
            try:
                if self._to_policy_device is None:
                    for key, buffer in self._step_buffers.items():
                        buffer[...] = obs[key]
                else:  # observations cross to the policy's GPU
                    for key, buffer in self._step_buffers.items():
                        buffer[...] = self._to_policy_device(obs[key])
            except ValueError:
                for key, value in obs.items():
                    self._check_observation_shapes(key, [value])
                raise
            for key in self._object_keys:  # non-tensor observations (a string): set anew each step
                td.set(key, non_tensor_entry(obs[key], td.device))
        for key, value in self._next_states:  # torchrl's step_mdp: ("next", k) -> k (a recurrent state)
            td.set(key, value)
        out = self.policy(td)  # under rollout's no_grad
        written = td if out is None else out
        try:
            action = written["action"]
        except KeyError:
            raise missing_action_error(self.policy, written, obs.keys()) from None
        action = self._host_action(action)
        if self._extra_keys is None:
            self._state_keys = self._find_states(written, obs)
            self._primed_keys = self._find_primed(written, obs)
            for key in self._state_keys:  # this first step ran with none, as a zero state: recorded so
                written.set(key, zeros_like(written[("next", *key)]))
            self._extra_keys = self._find_extras(written, obs)
            self._direct = _direct_call(self.policy, td, self._extra_keys, self._state_keys, self._to_policy_device)
        self._next_states = [(key, written[("next", *key)]) for key in self._state_keys]
        if self._primed_keys:  # copies: the policy may hand out views of its buffers
            self._primed_states = {key: np.array(written[("next", *key)]._host()) for key in self._primed_keys}
        # copies: an output may be a view of the observation buffers, which the next step overwrites
        extras = tuple([np.array(written[key]._host()) for key, _, _ in self._extra_keys]) if self._extra_keys else ()
        return action, extras

    def _make_step_td(self, obs):
        """The TensorDict a TensorDict policy reads at every step, on its device, made from the
        first step's observations; ``_step_buffers`` holds its leaves' arrays."""
        self._object_keys = tuple(k for k, v in obs.items() if v.dtype == object)
        td = TensorDict({k: non_tensor_entry(v) if k in self._object_keys else from_numpy(np.array(v))
                         for k, v in obs.items()}, batch_size=self.env.batch_size)
        device = self.policy_device
        if device.type != "cpu":
            td = td.to(device)
            self._to_policy_device = functools.partial(device._backend.asarray, index=device.index)
        self._step_td = td
        self._step_buffers = {k: td[k]._data for k in obs if k not in self._object_keys}
        return td

    def _host_action(self, action):
        """The policy's action as a host array, checked (a Tensor of the spec's shape; in the spec
        with ``check_action_spec``) before the environment sees it."""
        if not isinstance(action, Tensor):
            raise TypeError(f"the policy must write a Tensor under 'action', got {type(action).__name__}")
        if action._data.shape != self._action_shape:
            raise ValueError(f"the policy returned an action of shape {list(action.shape)}; the action spec "
                             f"expects {list(self._action_shape)}{one_hot_hint(self.env.action_spec, action.shape)}")
        data = action._host()  # the host array, without building intermediate tensors
        if self.check_action_spec and not self._action_in_spec(data):
            raise ValueError(f"the policy returned an action outside the action spec at frame {self._frames}: "
                             f"{action} not in {self.env.action_spec}")
        return data

    @staticmethod
    def _find_states(written, obs):
        """The keys k of the ("next", k) entries the policy wrote that the env does not give (a recurrent
        module's next state): each step gives them to the next one, and the batch records k."""
        keys = [(key,) if isinstance(key, str) else tuple(key) for key in written.keys(True, True)]
        return [key[1:] for key in keys if key[0] == "next" and key[1:] not in obs and not _is_private(key[1:])]

    def _find_primed(self, written, obs):
        """The keys k of the ("next", k) entries the policy wrote over observations that the environment only
        carries from step to step (a ``TensorDictPrimer``'s recurrent state, from ``make_tensordict_primer()``):
        as torchrl, the policy's value is the step's ("next", k) and the next step's k (``policy_states``)."""
        return [key for key in policy_next_keys(written, self.env) if key in obs]

    def _with_primed_states(self, next_obs):
        """The step's next frame with the policy's states in place of the entries the env carried."""
        out = dict(next_obs)
        out.update(self._primed_states)
        return out

    def _continued(self, next_obs, done):
        """The frame after a step where ``done`` envs ended: the env's (reset rows), the policy's states
        going on in the other rows."""
        frame = dict(self.env._continue_frame(next_obs, done))
        batch_dims = len(self.env.batch_size)
        for key in self._primed_states:
            value = next_obs[key]
            frame[key] = np.where(reset_mask(done, value, batch_dims), frame[key], value)
        return frame

    @staticmethod
    def _find_extras(written, obs):
        """[(key, per-step shape, dtype)] of the tensors the policy wrote besides the action (not
        its observations, done flags, ``next`` or ``collector`` entries, or private keys)."""
        known = set(obs) | {("action",)} | {(k,) for k in DONE_KEYS}
        extras = []
        for key in written.keys(True, True):
            key = (key,) if isinstance(key, str) else tuple(key)
            if key in known or key[0] in ("next", "collector") or _is_private(key):
                continue
            value = written[key]
            if isinstance(value, Tensor):
                extras.append((key, tuple(value.shape), value._data.dtype))
        return extras

    def _may_write_extras(self):
        """Whether the policy may write entries besides the action: its ``out_keys`` name some, or
        it declares none (a plain callable)."""
        if isinstance(self.policy, RandomPolicy):
            return False
        keys = getattr(self.policy, "out_keys", None)
        if keys is None:
            return True
        keys = [(k,) if isinstance(k, str) else tuple(k) for k in keys]
        return any(k != ("action",) and not _is_private(k) for k in keys)

    # ---- trajectories -----------------------------------------------------------------------------
    def _start(self):
        """Resets the environment: every env starts a new trajectory."""
        self._obs = dict(self.env._reset_frame())
        self._traj_ids = self._new_traj_ids(self.n_envs).reshape(tuple(self.env.batch_size))

    def _new_traj_ids(self, count):
        ids = np.arange(self._next_traj_id, self._next_traj_id + count, dtype=np.int64)
        self._next_traj_id += count
        return ids

    def _start_new_trajectories(self, ended, t, events):
        new_ids = self._new_traj_ids(int(np.count_nonzero(ended)))
        if ended.ndim:
            self._traj_ids[ended] = new_ids
        else:
            self._traj_ids = new_ids.reshape(())
        events.append((t, ended.copy(), new_ids))

    def _trajectory_ids(self, first_ids, events):
        """[*envs, T] trajectory ids: each env's id at the batch start, changed after each done."""
        ids = np.repeat(first_ids[..., None], self.steps_per_batch, axis=-1)
        for t, ended, new_ids in events:
            if ended.ndim:
                ids[ended, t + 1:] = new_ids[:, None]
            else:
                ids[t + 1:] = new_ids[0]
        return ids

    # ---- the batch --------------------------------------------------------------------------------
    def _check_observation_shapes(self, key, arrays):
        """Raises a ValueError naming the env, the key and both shapes when a step's observation at
        ``key`` does not have the observation spec's shape."""
        expected = self._observation_shape(key)
        shapes = list(map(_shape_of, arrays))
        if shapes.count(expected) != len(shapes):
            t, actual = next((t, shape) for t, shape in enumerate(shapes) if shape != expected)
            name = key[0] if len(key) == 1 else key
            raise ValueError(f"{self.env!r} returned an observation {name!r} of shape {list(actual)} at step {t} of "
                             f"batch {self._iter}; its observation spec expects {list(expected)}")

    def _observation_shape(self, key):
        """The observation spec's shape at ``key`` (looked up once per key)."""
        shape = self._observation_shapes.get(key)
        if shape is None:
            shape = self._observation_shapes[key] = tuple(self.env.observation_spec[key].shape)
        return shape

    def _assemble(self, steps, trajectories, picked=None):
        """The batch TensorDict: the steps' arrays stacked along a new time dim (after the env dims),
        one concatenate per key, each wrapped once. ``trajectories``: ``_collect``'s changes, or the
        ids themselves; ``picked``: (skipped envs) the batch's transitions, ``[envs * T]`` indices
        into the steps' arrays concatenated (step-major)."""
        time = len(self.env.batch_size)
        batch = Size(tuple(self.env.batch_size) + (self.steps_per_batch,))
        obs, actions, extras, next_obs, rewards, terminateds, truncateds = zip(*steps)

        def stacked(arrays, stack=stack_steps):
            if picked is None:
                return stack(arrays, time)
            flat = np.concatenate(arrays) if arrays[0].ndim else np.array(arrays)  # [steps * envs, ...]
            return flat.take(picked, axis=0).reshape(tuple(batch) + flat.shape[1:])

        def joined(arrays):
            return wrap(stacked(arrays))

        # where each step's next frame is the following step's frame (a NEXT_STEP vector env's steps, as a
        # rule), one concatenate per key serves both: the next observations are the rows one step later
        chained = picked is not None and not self.compact_obs and all(map(operator.is_, obs[1:], next_obs[:-1]))
        joint = {}

        def observations(frames, later=False):  # {key: stacked entry} of the steps' observation frames, shapes checked
            out = {}
            for key in frames[0]:
                if chained:
                    if key not in joint:
                        arrays = [frame[key] for frame in obs] + [next_obs[-1][key]]
                        self._check_observation_shapes(key, arrays)
                        joint[key] = np.concatenate(arrays)  # [(steps + 1) * envs, ...]
                    flat = joint[key]
                    rows = picked + len(frames[0][key]) if later else picked
                    out[key] = wrap(flat.take(rows, axis=0).reshape(tuple(batch) + flat.shape[1:]))
                    continue
                arrays = list(map(operator.itemgetter(key), frames))
                if arrays[0].dtype == object:  # non-tensor data (a NonTensor spec's): a NonTensorStack
                    out[key] = non_tensor_entry(stacked(arrays))
                    continue
                self._check_observation_shapes(key, arrays)
                out[key] = wrap(stacked(arrays, stack_same) if arrays[0].ndim else np.stack(arrays, time))
            return out

        root = observations(obs)
        for i, (key, _, _) in enumerate(self._extra_keys or ()):
            root[key] = joined(list(map(operator.itemgetter(i), extras)))
        for key in DONE_KEYS:
            root.setdefault((key,), wrap(np.zeros(tuple(batch) + (1,), dtype=bool)))
        root[("action",)] = joined(actions)
        terminated, truncated = stacked(terminateds), stacked(truncateds)
        nxt = {} if self.compact_obs else observations(next_obs, later=True)
        nxt[("reward",)] = joined(rewards)
        nxt[("terminated",)], nxt[("truncated",)] = wrap(terminated), wrap(truncated)
        nxt[("done",)] = wrap(terminated | truncated)
        td = tensordict_of(root, batch)
        td.set("next", tensordict_of(nxt, batch))
        td.set(TRAJ_IDS, wrap(self._trajectory_ids(*trajectories) if picked is None else trajectories))
        for rewriter in self._stored_step_rewriters:  # NextObservationDelta: deltas instead of ("next", obs)
            td = rewriter._stored_step(td)
        if self.track_policy_version:
            version = wrap(np.full(tuple(batch), self._version, np.int64))
            td.set(POLICY_VERSION[0], version)
            td.set(("next",) + POLICY_VERSION, version.clone())
        return td if self.storing_device is None else td.to(self.storing_device)

    def __iter__(self):
        batches = self._batches() if self.trajs_per_batch is None else self._trajectory_batches()
        return batches if self.replay_buffer is None else into_buffer(batches, self.replay_buffer)

    def _batches(self):
        """The batches of ``frames_per_batch`` frames, split and post-processed."""
        bar = self._progress_bar()
        try:
            while self.total_frames == -1 or self._frames < self.total_frames:
                batch = self.rollout()
                if self.split_trajs:  # [trajectories, time], the time dim named as torchrl's collector names it
                    batch = split_trajectories(batch).refine_names(..., "time")
                if self.postproc is not None:
                    batch = self.postproc(batch)
                if bar is not None:
                    bar.update(self.frames_per_batch)
                yield batch
        finally:
            if bar is not None:
                bar.close()

    def _trajectory_batches(self):
        """``trajs_per_batch``'s batches: whole trajectories, assembled across the frame batches, in
        the order they complete (within a frame batch, by trajectory id). An episode that can no
        longer complete (a reset interrupted it) is dropped."""
        # trajectory id -> its chunks so far; the whole trajectories not yet yielded (reset() empties both)
        running, complete = self._assembly = {}, []
        yield from assembled_trajectories(self._batches(), self.trajs_per_batch, self.traj_format, running, complete,
                                          self._running_traj_ids)

    def _running_traj_ids(self):
        """The ids of the trajectories that later batches go on with (none after a failed batch or a
        reset; with ``reset_at_each_iter``, none: the next batch starts from a reset)."""
        if self._obs is None or self.reset_at_each_iter:
            return set()
        alive = set(self._traj_ids.ravel().tolist())
        if self._carried is not None:
            alive.update(np.concatenate(self._carried[2]).ravel().tolist())
        return alive

    def _progress_bar(self):
        if not self.progress_bar:
            return None
        try:
            from tqdm import tqdm
        except ImportError:
            warnings.warn("progress_bar=True needs tqdm (pip install tqdm); collecting without a bar", stacklevel=3)
            return None
        return tqdm(total=None if self.total_frames == -1 else self.total_frames)

    def __len__(self):
        if self.total_frames == -1:
            raise RuntimeError("a collector with total_frames=-1 has no length: it runs until the loop breaks")
        return self.total_frames // self.frames_per_batch

    # ---- control --------------------------------------------------------------------------------------
    def set_seed(self, seed, static_seed=False):
        """Seeds the environment (``env.set_seed(seed, static_seed)``) and returns what it returns:
        the seed for a next environment. The next batch starts new trajectories from the seeded
        environment (torchrl goes on from the observation it held before the seeding)."""
        out = self.env.set_seed(seed, static_seed=static_seed)
        self._obs = None
        return out

    def reset(self, index=None):
        """Resets the environments: the next batch starts new trajectories (with ``trajs_per_batch``,
        the trajectories assembled but not yet yielded are dropped, as torchrl). Resetting only some
        (``index``) of a batched environment is not supported (torchrl's partial reset)."""
        if index is not None:
            if not self.env.batch_size:
                raise RuntimeError("resetting unique env with index is not permitted.")
            raise NotImplementedError("SyncDataCollector.reset(index): resetting only some of the batched "
                                      "environments is not supported; reset() resets them all")
        self._obs = None
        for part in self._assembly or ():  # as torchrl: no steps from before the reset in later batches
            part.clear()

    def update_policy_weights_(self, policy_weights=None):
        """In one process the collector uses the policy object itself: there is nothing to copy.
        With ``track_policy_version`` each call is a new policy version, as torchrl counts them."""
        if self.track_policy_version:
            self._version += 1

    @property
    def policy_version(self):
        """torchrl's policy version: the number of ``update_policy_weights_()`` calls so far (the
        version the next batches carry), or None without ``track_policy_version``."""
        return self._version if self.track_policy_version else None

    def get_policy_version(self):
        """``policy_version`` (torchrl's method, for remote calls)."""
        return self.policy_version

    def state_dict(self):
        """What a resumed collection needs, laid out as torchrl's: ``policy_state_dict`` (a Module
        policy's weights), ``env_state_dict`` (the transform's or environment's ``state_dict()``
        where it has one, else empty), the counters ``frames`` and ``iter`` (the index of the last
        batch, -1 before the first), and ``traj_pool`` (``{"traj_id": the next trajectory id}``)."""
        state = OrderedDict()
        if isinstance(self.policy, Module):
            state["policy_state_dict"] = self.policy.state_dict()
        env_state = getattr(_env_state_owner(self.env), "state_dict", None)
        state["env_state_dict"] = env_state() if callable(env_state) else OrderedDict()
        state["frames"] = self._frames
        state["iter"] = self._iter
        state["traj_pool"] = {"traj_id": wrap(np.array(self._next_traj_id, dtype=np.int64))}
        if self.track_policy_version:
            state["policy_version"] = self._version
        return state

    def load_state_dict(self, state_dict):
        """Restores ``state_dict()``'s policy weights, environment state and counters. As torchrl,
        the running trajectories (if any) go on under fresh ids from the restored counter."""
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])
        pool = state_dict.get("traj_pool")
        if pool is not None:
            self._next_traj_id = int(pool["traj_id"])
        elif "next_traj_id" in state_dict:  # rlpipe's earlier layout
            self._next_traj_id = int(state_dict["next_traj_id"])
        if self._obs is not None:
            self._traj_ids = self._new_traj_ids(self.n_envs).reshape(tuple(self.env.batch_size))
        if state_dict.get("env_state_dict"):
            load = getattr(_env_state_owner(self.env), "load_state_dict", None)
            if not callable(load):
                raise RuntimeError(f"state_dict has an env_state_dict but {self.env!r} cannot load one")
            load(state_dict["env_state_dict"])
        if "policy_state_dict" in state_dict and isinstance(self.policy, Module):
            self.policy.load_state_dict(state_dict["policy_state_dict"])
        if self.track_policy_version and state_dict.get("policy_version") is not None:
            self._version = int(state_dict["policy_version"])

    def shutdown(self):
        """Closes the environment; always safe to call."""
        try:
            self.env.close()
        except Exception:  # the environment may already be broken; shutting down must still succeed
            pass

    def __repr__(self):
        return (f"{type(self).__name__}(env={self.env!r}, frames_per_batch={self.frames_per_batch}, "
                f"total_frames={self.total_frames})")


# torchrl 0.14's names for the same classes
Collector = SyncDataCollector
BaseCollector = CollectorBase
# torchrl.collectors.collectors also exports the multi-process collectors; they build on this module, so
# rlpipe.collectors sets them here once both are loaded
