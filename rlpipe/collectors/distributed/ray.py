"""``RayCollector``: ``SyncDataCollector`` copies on Ray actors, with torchrl's ``RayCollector`` semantics.

Each actor builds its environment from ``create_env_fn`` and runs a ``SyncDataCollector`` with its own
copy of the policy. A batch leaves the actor as a plain ``{key: numpy array}`` dict plus its batch
size, never as pickled ``Tensor`` objects: Ray stores the arrays out of band in its object store and
the main process reads them without a copy, then rebuilds the TensorDict around them. Policy weights
travel the other way the same way: one ``ray.put`` of the ``state_dict`` as NumPy arrays, shared by
every actor.

Ray is optional: this module imports without it, and constructing a ``RayCollector`` without Ray
raises an ``ImportError`` that says what to install.

Where rlpipe differs from torchrl 0.14 (``torchrl/collectors/distributed/ray.py``):

- ``total_frames`` follows ``SyncDataCollector``'s rule: rounded up to a whole number of yielded
  batches (with a warning), ``ValueError`` when it is below one batch, ``-1`` runs until the loop
  breaks. torchrl's Ray loop stops at ``collected >= total_frames`` and yields nothing for ``-1``.
- in async mode an actor is only asked for a batch that is still needed, so exactly
  ``total_frames`` frames are collected, none thrown away.
- ``("collector", "traj_ids")`` are made unique across actors (``local_id * num_collectors +
  actor_index``); torchrl leaves each actor's own counter, so ids collide between actors.
- the default actor resources are ``{"num_cpus": 1}`` (torchrl asks for ``num_gpus=0.2`` and 2 GiB,
  which never schedules on a machine without a GPU); ``remote_config`` entries are merged into it.
- ``create_env_fn`` must be a callable (or one per actor): environments are built inside the actors.
- a failure inside an actor is raised in the main process as a ``RuntimeError`` naming the actor
  index and the cause (torchrl lets Ray's own exception through).
- ``sync=True`` with ``frames_per_batch`` not divisible by ``num_collectors`` is a ``ValueError``
  (torchrl: ``RuntimeError``).
- batches are always host (NumPy) arrays in the main process; an actor's ``storing_device`` only
  matters inside the actor.
"""
import os
import secrets
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from ..._creation import from_numpy
from ..._tensor import Tensor, host_array
from ...envs.common import EnvBase
from ...nn import Module
from ...postprocs import split_trajectories
from .._common import (CollectorBase, assembled_trajectories, batch_arrays, batch_from_arrays, check_frame_counts,
                      checked_init_random_frames, checked_split_trajs, checked_trajs_per_batch, no_reply_error,
                      normalized_total_frames, rounded_total_frames, tag_policy_version, unique_traj_ids)
from ..collectors import SyncDataCollector

__all__ = ["RayCollector"]

INSTALL_HINT = 'RayCollector needs Ray, which is not installed: pip install "rlpipe[ray]"'
DEFAULT_REMOTE_CONFIG = {"num_cpus": 1}
# keyword arguments of the actors' SyncDataCollector that RayCollector sets itself
_CONTROLLED = ("create_env_fn", "policy", "frames_per_batch", "total_frames", "split_trajs", "max_frames_per_traj",
               "init_random_frames", "reset_at_each_iter", "compact_obs", "check_action_spec", "trajs_per_batch",
               "traj_format")


def _import_ray():
    try:
        import ray
    except ImportError as err:
        raise ImportError(INSTALL_HINT) from err
    return ray


def _state_to_arrays(state):
    return OrderedDict((k, _state_to_arrays(v) if isinstance(v, Mapping) else
                        host_array(v) if isinstance(v, (Tensor, np.ndarray)) else v) for k, v in state.items())


def _state_to_tensors(state):
    return OrderedDict((k, _state_to_tensors(v) if isinstance(v, Mapping) else
                        from_numpy(np.array(v)) if isinstance(v, np.ndarray) else v) for k, v in state.items())


class _CollectorWorker:
    """What runs inside one Ray actor: a ``SyncDataCollector`` that never stops by itself
    (``total_frames=-1``); the driver asks for one batch at a time."""

    def __init__(self, index, num_collectors, create_env_fn, policy, collector_kwargs, seed, track_policy_version):
        self.index = index
        self.num_collectors = num_collectors
        self.policy = policy
        self.track_policy_version = track_policy_version
        self.policy_version = 0  # the version of the weights last loaded
        self.collector = None
        self._batches = None
        self.warnings = []
        self._error = None
        try:  # an error here is kept for info() to raise: Ray then reports the cause itself, not a dead actor
            from rlpipe import random as _random
            _random.manual_seed(seed)  # distinct random streams (random actions, exploration) per actor
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self.collector = SyncDataCollector(create_env_fn, policy, total_frames=-1, **collector_kwargs)
            self.warnings = [str(w.message) for w in caught]
        except Exception as err:  # noqa: BLE001  any error: raised again by info()
            self._error = err

    def info(self):
        if self._error is not None:
            raise self._error
        import ray
        return {"frames_per_batch": self.collector.frames_per_batch, "warnings": self.warnings,
                "where": {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
                          "pid": os.getpid()}}

    def collect(self):
        if self._batches is None:
            self._batches = iter(self.collector)
        try:
            batch = next(self._batches)
        except BaseException:
            self._batches = None
            self.collector.reset()  # a later batch starts fresh trajectories
            raise
        arrays = unique_traj_ids(batch_arrays(batch), self.index, self.num_collectors)
        if self.track_policy_version:
            tag_policy_version(arrays, batch.batch_size, self.policy_version)
        return tuple(batch.batch_size), arrays

    def update_weights(self, weights, version):
        self.policy.load_state_dict(_state_to_tensors(weights))
        self.policy_version = version

    def set_seed(self, seed, static_seed=False):
        from rlpipe import random as _random
        _random.manual_seed(seed)
        return self.collector.set_seed(seed, static_seed)

    def state_dict(self):
        return _state_to_arrays(self.collector.state_dict())

    def load_state_dict(self, state):
        self.collector.load_state_dict(_state_to_tensors(state))

    def close(self):
        if self.collector is not None:
            self.collector.shutdown()


_REMOTE_CLASS = {}


def _per_collector(value, name, n, kind):
    """A list of ``n`` values: ``value`` repeated, or ``value`` itself when it is a list of length ``n``."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"RayCollector: {name} is a list of {len(value)} entries but num_collectors={n}")
        values = list(value)
    else:
        values = [value] * n
    for i, v in enumerate(values):
        if not isinstance(v, kind):
            raise TypeError(f"RayCollector: {name}[{i}] must be a {kind.__name__}, got {type(v).__name__}")
    return values


class RayCollector(CollectorBase):
    """Collects on ``num_collectors`` Ray actors, each a ``SyncDataCollector`` over its own environment
    and its own copy of ``policy``; iterate it like any collector.

    Args:
        create_env_fn: a function returning an rlpipe environment, or a list of them (one per actor).
        policy: as for ``SyncDataCollector`` (``None``: random actions). It is copied into every actor
            once; ``update_policy_weights_()`` sends the main copy's current weights.

    Keyword Args:
        num_collectors: the number of actors (default: the length of ``create_env_fn`` when it is a
            list, else 1).
        frames_per_batch: frames per yielded batch. ``sync=True``: split evenly across the actors (it
            must be divisible by ``num_collectors``); the batch stacks the actors' batches along a new
            leading dim, ``[num_collectors, *actor_batch]``. ``sync=False``: each actor collects
            ``frames_per_batch`` frames, and each of its batches is yielded alone, first ready first.
        total_frames: frames to collect in all (``-1``: until the loop breaks). Rounded up to a whole
            number of yielded batches, with a warning. Reaching it releases the actors (as torchrl).
        sync: see ``frames_per_batch`` (torchrl's default, ``False``).
        ray_init_config: keyword arguments of ``ray.init``, used only when Ray is not initialized yet
            (default: ``ray.init()``, a local instance unless ``RAY_ADDRESS`` names a cluster).
        remote_config: actor options for ``.options(...)`` (``num_cpus``, ``num_gpus``, ``resources``,
            ...), one dict or one per actor, merged into the default ``{"num_cpus": 1}``. The cluster
            must hold all actors at once, or the constructor waits for resources.
        collector_kwargs: more ``SyncDataCollector`` keyword arguments (one dict or one per actor), e.g.
            ``postproc`` to run it inside the actors.
        update_after_each_batch: send the weights before each round (sync) or to an actor before it
            collects again (async), as torchrl.
        track_policy_version: tag every batch with ``"policy_version"`` and ``("next",
            "policy_version")`` (int64 per frame, torchrl's keys): the version of the weights the
            actor collected it with, counted by ``update_policy_weights_()`` calls (0 before the
            first); ``policy_version`` is the latest. A learner thread may update the weights while
            another iterates: a sync round is collected with one version.

    ``actor_locations`` lists where each actor runs: ``{"node_id", "ip", "pid"}`` (errors name them too).
        timeout: seconds to wait for any actor's reply once the actors have started (a batch, weights,
            a seed, a state): an actor silent that long raises a RuntimeError naming it, as the
            multi-process collectors' ``timeout``. The collector is then left for ``shutdown()``.
        postproc, split_trajs: applied in the main process to each yielded batch.
        max_frames_per_traj, init_random_frames, reset_at_each_iter: passed to every actor
            (``init_random_frames`` divided by ``num_collectors``, as torchrl).
        compact_obs, check_action_spec: passed to every actor's ``SyncDataCollector`` (no
            ``("next", observation)`` entries; refuse an action outside the action spec).
        trajs_per_batch, traj_format: yield whole trajectories instead, assembled in the main process
            from the actors' batches, as ``SyncDataCollector`` assembles its own.
    """

    def __init__(self, create_env_fn, policy=None, *, num_collectors=None, frames_per_batch, total_frames=-1,
                 sync=False, ray_init_config=None, remote_config=None, collector_kwargs=None,
                 update_after_each_batch=False, postproc=None, split_trajs=False, max_frames_per_traj=None,
                 init_random_frames=0, reset_at_each_iter=False, timeout=300.0, track_policy_version=False,
                 compact_obs=False, check_action_spec=False, trajs_per_batch=None, traj_format=None):
        ray = _import_ray()
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"RayCollector: timeout must be a positive number of seconds, got timeout={timeout!r}")
        total_frames = normalized_total_frames(total_frames)
        check_frame_counts(frames_per_batch, total_frames)
        init_random_frames = checked_init_random_frames(init_random_frames)
        split_trajs = checked_split_trajs(split_trajs)
        trajs_per_batch, traj_format = checked_trajs_per_batch(trajs_per_batch, traj_format, split_trajs)
        if num_collectors is None:
            num_collectors = len(create_env_fn) if isinstance(create_env_fn, (list, tuple)) else 1
        if isinstance(num_collectors, bool) or not isinstance(num_collectors, int) or num_collectors <= 0:
            raise ValueError(f"num_collectors must be a positive integer, got {num_collectors!r}")
        n = num_collectors
        env_fns = _per_collector(create_env_fn, "create_env_fn", n, object)
        for i, fn in enumerate(env_fns):
            if isinstance(fn, EnvBase) or not callable(fn):
                raise TypeError(f"RayCollector: create_env_fn[{i}] must be a function that builds the environment "
                                f"(it runs inside the actor), got {type(fn).__name__}")
        if sync and frames_per_batch % n:
            raise ValueError(f"RayCollector(sync=True): frames_per_batch ({frames_per_batch}) must be divisible by "
                             f"num_collectors ({n}): each actor collects frames_per_batch // num_collectors frames")
        kwargs_list = [dict(k) for k in _per_collector({} if collector_kwargs is None else collector_kwargs,
                                                       "collector_kwargs", n, Mapping)]
        for i, kw in enumerate(kwargs_list):
            clash = sorted(set(kw) & set(_CONTROLLED))
            if clash:
                raise ValueError(f"RayCollector: collector_kwargs[{i}] sets {clash}, which RayCollector sets itself; "
                                 "pass them to RayCollector instead")
            kw.update(frames_per_batch=frames_per_batch // n if sync else frames_per_batch,
                      max_frames_per_traj=max_frames_per_traj, init_random_frames=init_random_frames // n,
                      reset_at_each_iter=reset_at_each_iter, compact_obs=compact_obs,
                      check_action_spec=check_action_spec)
        remote_configs = _per_collector({} if remote_config is None else remote_config, "remote_config", n, Mapping)
        options = [dict(DEFAULT_REMOTE_CONFIG, **cfg) for cfg in remote_configs]

        self._ray = ray
        self.policy = policy
        self.num_collectors = n
        self.sync = bool(sync)
        self.update_after_each_batch = bool(update_after_each_batch)
        self.postproc = postproc
        self.split_trajs = split_trajs
        self.compact_obs = bool(compact_obs)
        self.trajs_per_batch, self.traj_format = trajs_per_batch, traj_format
        self.reset_at_each_iter = bool(reset_at_each_iter)
        self.check_action_spec = bool(check_action_spec)
        self.timeout = timeout
        self._weight_shapes = ({k: tuple(v.shape) for k, v in policy.state_dict().items()}
                               if isinstance(policy, Module) else None)
        self._frames = 0
        self._iter = 0
        self._actors = []
        self.actor_locations = None  # filled once the actors have started
        self._pending = {}         # in-flight collect ref -> actor index
        self._sent_at = {}         # in-flight collect ref -> time.monotonic() when it was sent
        self._update_refs = []     # (actor index, ref) of weight updates queued behind a collect
        self._next_weights = {}    # busy actor index -> (weights ref, version) to send before its next collect
        self._closed = False
        self.track_policy_version = bool(track_policy_version)
        self._version = 0          # update_policy_weights_() calls so far
        self._lock = threading.RLock()  # the bookkeeping above, shared with a thread updating the weights

        if not ray.is_initialized():
            ray.init(**(ray_init_config or {}))
        worker = _REMOTE_CLASS.get("worker")
        if worker is None:
            worker = _REMOTE_CLASS["worker"] = ray.remote(_CollectorWorker)
        seeds = np.random.SeedSequence(secrets.randbits(63)).generate_state(n, np.uint64)
        try:
            policy_ref = ray.put(policy)  # one serialized copy, read by every actor
            for i in range(n):
                self._actors.append(worker.options(**options[i]).remote(i, n, env_fns[i], policy_ref, kwargs_list[i],
                                                                        int(seeds[i] >> np.uint64(1)),
                                                                        self.track_policy_version))
            refs = [a.info.remote() for a in self._actors]
            # no timeout: the actors may wait for the cluster's resources (see remote_config)
            infos = [self._fetch(ref, i, "starting", timeout=None) for i, ref in enumerate(refs)]
        except BaseException:
            self.shutdown()
            raise
        for i, info in enumerate(infos):
            for message in dict.fromkeys(info["warnings"]):
                if i == 0 or message not in infos[0]["warnings"]:  # each distinct message once
                    warnings.warn(f"RayCollector actor {i}: {message}", UserWarning, stacklevel=2)
        self._actor_frames = [info["frames_per_batch"] for info in infos]
        self.actor_locations = [info["where"] for info in infos]
        self.frames_per_batch = sum(self._actor_frames) if self.sync else self._actor_frames[0]
        uniform = self.sync or len(set(self._actor_frames)) == 1
        self.total_frames = rounded_total_frames(total_frames, self.frames_per_batch, stacklevel=2) if uniform \
            else total_frames

    # ---- helpers ----------------------------------------------------------------------------------------
    def _fetch(self, ref, index, what, timeout=...):
        """``ray.get(ref)``, with an actor's failure or silence (``timeout``, by default the
        collector's) raised as a RuntimeError naming the actor."""
        ray = self._ray
        try:
            return ray.get(ref, timeout=self.timeout if timeout is ... else timeout)
        except ray.exceptions.GetTimeoutError:
            raise no_reply_error("RayCollector", [index], self.timeout) from None
        except ray.exceptions.RayError as err:
            cause = getattr(err, "cause", None)
            if isinstance(err, ray.exceptions.RayTaskError) and cause is not None:
                reason = f"{type(cause).__name__}: {cause}"
            else:
                reason = f"{type(err).__name__}: {str(err).strip()}"
            raise RuntimeError(f"RayCollector: collector actor {index}{self._location(index)} failed while {what}: "
                               f"{reason}") from err

    def _location(self, index):
        """`` (pid P on node N at IP)`` of a started actor, for error messages."""
        if self.actor_locations is None:
            return ""
        where = self.actor_locations[index]
        return f" (pid {where['pid']} on node {where['node_id'][:12]} at {where['ip']})"

    def _check_open(self):
        if self._closed:
            raise RuntimeError("RayCollector: the collector was shut down (its actors are released)")

    def _done(self):
        return self.total_frames != -1 and self._frames >= self.total_frames

    def _needs_more(self):
        """Whether the frames collected plus those in flight fall short of total_frames."""
        if self.total_frames == -1:
            return True
        in_flight = sum(self._actor_frames[i] for i in self._pending.values())
        return self._frames + in_flight < self.total_frames

    def _process(self, batch):
        if self.split_trajs:
            batch = split_trajectories(batch)
        if self.postproc is not None:
            batch = self.postproc(batch)
        return batch

    def _stack(self, parts):
        """One TensorDict ``[num_collectors, *actor_batch]`` from every actor's arrays (one copy)."""
        batch_size, first = parts[0]
        for i, (size, arrays) in enumerate(parts[1:], 1):
            if size != batch_size or arrays.keys() != first.keys():
                raise RuntimeError(f"RayCollector(sync=True): actor {i} returned a batch of size {list(size)} with "
                                   f"keys {sorted(map(str, arrays))}; actor 0 returned size {list(batch_size)} with "
                                   f"keys {sorted(map(str, first))}: sync mode stacks batches of one layout")
        return batch_from_arrays((len(parts), *batch_size), {key: np.stack([arrays[key] for _, arrays in parts])
                                                             for key in first})

    def _submit(self, index):
        """Asks actor ``index`` for a batch; returns the collect's ref, now pending."""
        with self._lock:
            if index in self._next_weights:  # weights published while it was collecting
                self._update_refs.append((index, self._actors[index].update_weights.remote(
                    *self._next_weights.pop(index))))
            ref = self._actors[index].collect.remote()
            self._pending[ref] = index
            self._sent_at[ref] = time.monotonic()
            return ref

    def _take(self, ref):
        """Removes a finished collect from the pending ones; returns its actor's index."""
        with self._lock:
            del self._sent_at[ref]
            return self._pending.pop(ref)

    def _wait(self, refs, count):
        """The first ``count`` of the pending collects ``refs`` to finish. A collect pending for
        ``timeout`` seconds raises a RuntimeError naming its actor, even while others keep finishing
        (async mode would otherwise go on without the hung actor, and wait for it at the end)."""
        while True:
            oldest = min(self._sent_at[ref] for ref in refs)
            left = oldest + self.timeout - time.monotonic()
            ready, late = self._ray.wait(refs, num_returns=count, timeout=max(left, 0))
            if len(ready) == count:
                return ready
            now = time.monotonic()
            expired = [self._pending[ref] for ref in late if now - self._sent_at[ref] >= self.timeout]
            if expired:
                raise no_reply_error("RayCollector", expired, self.timeout)

    def _check_updates(self, index):
        """Raises for a finished weight update of actor ``index`` that failed."""
        ray = self._ray
        with self._lock:
            done = [(i, ref) for i, ref in self._update_refs if i == index and ray.wait([ref], timeout=0)[0]]
            self._update_refs = [entry for entry in self._update_refs if entry not in done]
        for i, ref in done:
            self._fetch(ref, i, "loading policy weights")

    # ---- iteration ------------------------------------------------------------------------------------
    def __iter__(self):
        if self._done():
            return
        self._check_open()
        batches = self._sync_iterator() if self.sync else self._async_iterator()
        if self.trajs_per_batch is not None:  # whole trajectories, assembled here from the actors' batches
            alive = (lambda: ()) if self.reset_at_each_iter else None  # a reset ends every running one
            batches = assembled_trajectories(batches, self.trajs_per_batch, self.traj_format, {}, [], alive)
        yield from batches
        self.shutdown()  # torchrl releases the actors once total_frames is reached

    def _sync_iterator(self):
        while not self._done():
            if self.update_after_each_batch:
                self.update_policy_weights_()
            with self._lock:  # one weight version for the whole round
                refs = [self._submit(i) for i in range(self.num_collectors)]  # busy, should shutdown() come now
            self._wait(refs, len(refs))
            parts = []
            for i, ref in enumerate(refs):
                self._take(ref)
                parts.append(self._fetch(ref, i, "collecting a batch"))
            batch = self._stack(parts)
            self._frames += batch.numel()
            self._iter += 1
            yield self._process(batch)

    def _async_iterator(self):
        submit = self._submit
        busy = set(self._pending.values())
        for i in range(self.num_collectors):
            if i not in busy and self._needs_more():
                submit(i)
        while not self._done():
            ready = self._wait(list(self._pending), 1)
            index = self._take(ready[0])
            batch_size, arrays = self._fetch(ready[0], index, "collecting a batch")
            self._check_updates(index)
            # copied: writable, and the object store is freed
            batch = batch_from_arrays(batch_size, {key: np.array(array) for key, array in arrays.items()})
            self._frames += batch.numel()
            self._iter += 1
            resubmit = self._needs_more()
            if resubmit and not self.update_after_each_batch:
                submit(index)  # at once: the actor collects while the caller uses this batch
            yield self._process(batch)
            if resubmit and self.update_after_each_batch and not self._closed:
                self.update_policy_weights_(worker_ids=[index])
                submit(index)

    def __len__(self):
        if self.total_frames == -1:
            raise RuntimeError("a collector with total_frames=-1 has no length: it runs until the loop breaks")
        return self.total_frames // self.frames_per_batch

    # ---- control --------------------------------------------------------------------------------------
    def update_policy_weights_(self, policy_weights=None, *, worker_ids=None):
        """Sends policy weights to the actors (all, or ``worker_ids``): by default the current
        ``state_dict`` of the policy given at construction; or a Module's, or a state dict. The weights
        are put in the object store once, as NumPy arrays, for every actor. An actor that is collecting
        loads them before its next batch (only the last, if several calls come meanwhile). A policy that
        is not an ``nn.Module`` has nothing to send. Each call is a new policy version (see
        ``track_policy_version``); any thread may call it while another iterates."""
        self._check_open()
        if policy_weights is None:
            if not isinstance(self.policy, Module):
                return
            policy_weights = self.policy
        state = policy_weights.state_dict() if isinstance(policy_weights, Module) else policy_weights
        if not isinstance(state, Mapping):
            raise TypeError(f"update_policy_weights_: expected an nn.Module or a state dict, got "
                            f"{type(policy_weights).__name__}")
        if self._weight_shapes is None:
            raise TypeError("update_policy_weights_: the collector's policy is not an nn.Module, its actors hold "
                            "no weights to update")
        arrays = OrderedDict((k, host_array(v)) for k, v in state.items())
        missing = sorted(set(self._weight_shapes) - set(arrays))
        unexpected = sorted(set(arrays) - set(self._weight_shapes))
        if missing or unexpected:
            raise KeyError(f"update_policy_weights_: the weights do not match the policy's state_dict: missing keys "
                           f"{missing}, unexpected keys {unexpected}")
        for key, shape in self._weight_shapes.items():
            if tuple(arrays[key].shape) != shape:
                raise ValueError(f"update_policy_weights_: {key!r} has shape {list(arrays[key].shape)}, the policy's "
                                 f"is {list(shape)}")
        ids = range(self.num_collectors) if worker_ids is None else (
            [worker_ids] if isinstance(worker_ids, int) else list(worker_ids))
        ref = self._ray.put(arrays)
        with self._lock:
            self._check_open()  # (again: another thread may have shut it down meanwhile)
            self._version += 1
            busy = set(self._pending.values())
            # a collecting actor gets the latest weights before its next collect (several updates meanwhile:
            # only the last, so that a fast learner does not queue updates faster than the actor loads them)
            self._next_weights.update((i, (ref, self._version)) for i in ids if i in busy)
            idle = [i for i in ids if i not in busy]
            for i in idle:  # weights kept for it while it was collecting are older
                self._next_weights.pop(i, None)
            sent = [(i, self._actors[i].update_weights.remote(ref, self._version)) for i in idle]
        for i, update in sent:
            self._fetch(update, i, "loading policy weights")

    @property
    def policy_version(self):
        """The number of ``update_policy_weights_()`` calls so far (the version the next batches
        carry), or None without ``track_policy_version`` (torchrl's attribute)."""
        return self._version if self.track_policy_version else None

    def get_policy_version(self):
        """``policy_version`` (torchrl's method, for remote calls)."""
        return self.policy_version

    def set_seed(self, seed, static_seed=False):
        """Seeds the actors one after the other (each its environment and random stream, from the seed
        the previous one returned); returns the next unused seed."""
        self._check_open()
        for i, actor in enumerate(self._actors):
            seed = self._fetch(actor.set_seed.remote(seed, static_seed), i, "seeding")
        return seed

    def state_dict(self):
        """Every actor's collector state (NumPy arrays for tensors), one per actor, as torchrl."""
        self._check_open()
        refs = [actor.state_dict.remote() for actor in self._actors]
        return [self._fetch(ref, i, "saving its state") for i, ref in enumerate(refs)]

    def load_state_dict(self, state_dict):
        """Loads ``state_dict()``'s list (one entry per actor; a single dict goes to every actor)."""
        self._check_open()
        states = [state_dict] * self.num_collectors if isinstance(state_dict, Mapping) else list(state_dict)
        if len(states) != self.num_collectors:
            raise ValueError(f"load_state_dict: got {len(states)} states for {self.num_collectors} actors")
        refs = [actor.load_state_dict.remote(_state_to_arrays(s)) for actor, s in zip(self._actors, states)]
        for i, ref in enumerate(refs):
            self._fetch(ref, i, "loading its state")

    def shutdown(self, timeout=5.0, shutdown_ray=False):
        """Closes the idle actors' environments (waiting at most ``timeout`` seconds), then kills every
        actor (``ray.kill``). Never raises; safe to call twice. ``shutdown_ray=True`` also shuts Ray
        down (torchrl's option; by default Ray stays up for other users)."""
        with self._lock:
            actors, self._actors = self._actors, []
            busy = set(self._pending.values())
            self._pending.clear()
            self._sent_at.clear()
            self._update_refs = []
            self._next_weights.clear()
            self._closed = True
        ray = self._ray
        try:
            closing = [actor.close.remote() for i, actor in enumerate(actors) if i not in busy]
            if closing:
                ray.wait(closing, num_returns=len(closing), timeout=timeout)
        except Exception:  # noqa: BLE001, S110  a dead actor cannot close its env: killing it still releases it
            pass
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001, S110  already dead: nothing left to release
                pass
        if shutdown_ray:
            try:
                ray.shutdown()
            except Exception:  # noqa: BLE001, S110  shutdown() never raises
                pass

    def __repr__(self):
        return (f"{type(self).__name__}(num_collectors={self.num_collectors}, sync={self.sync}, "
                f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames})")
