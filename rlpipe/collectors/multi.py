"""Multi-process collectors: ``MultiSyncDataCollector`` and ``MultiaSyncDataCollector``.

Each worker process runs a ``SyncDataCollector`` over its own environment and a copy of the policy.
Every batch comes back through one shared-memory block per worker: the worker sends the layout
of its first batch, the main process allocates the block, and the worker writes each batch there
for the main process to copy out once. Commands, weights and small replies travel on the pipes.
``split_trajs`` and ``postproc`` run in the main process, as in torchrl.

Threads: one thread at a time talks to the workers (a lock), ``update_policy_weights_`` only
publishes the weights for the next batch requests to carry (any thread may call it while another
iterates), and ``shutdown`` from another thread ends that thread's loop. Workers die with the main
process, whatever it died of (``rlpipe._processes``).
"""
import contextlib
import functools
import multiprocessing as mp
import os
import threading
import weakref
from collections import OrderedDict
from multiprocessing import connection, resource_tracker, shared_memory

import numpy as np

from .. import random as _random
from .._processes import describe, die_with_parent, pack, parent_watch, reap, views
from .._creation import from_numpy
from ..nn import Module
from ..postprocs import split_trajectories
from ..tensordict import TensorDict
from ._common import (SILENCE, TRAJ_IDS, CollectorBase, assembled_trajectories, batch_arrays, batch_from_arrays,
                      check_frame_counts, checked_init_random_frames, checked_split_trajs, checked_trajs_per_batch,
                      no_reply_error, normalized_total_frames, rl_warn, rounded_total_frames, tag_policy_version,
                      unique_traj_ids, weight_arrays)
from ..envs.utils import ExplorationType, set_exploration_type
from .collectors import SyncDataCollector

__all__ = ["MultiSyncDataCollector", "MultiaSyncDataCollector", "MultiSyncCollector", "MultiAsyncCollector",
           "MultiCollector"]

_PARENT_CHECK_S = 1.0  # how often an idle worker checks that its main process is still alive


# ---- the worker side ---------------------------------------------------------------------------------

def _layout(arrays):
    """The shared-block layout and size of a batch's ``arrays`` (see ``_processes.pack``)."""
    return pack((key, array.shape, array.dtype) for key, array in arrays.items())


def _views(buffer, layout):
    return list(views(buffer, layout).items())


class _WorkerState:
    """What a worker keeps between commands: its collector, its shared block, and a collected batch
    waiting to be handed over."""

    def __init__(self, conn, collector, policy, index, num_workers, track_policy_version):
        self.conn, self.collector, self.policy = conn, collector, policy
        self.index, self.num_workers = index, num_workers
        self.track_policy_version = track_policy_version
        self.policy_version = 0  # the version of the weights last loaded
        self.shm = None
        self.views = None    # [(key, array in the block)], in the layout's order
        self.layout = None   # the layout and block size of the batch waiting or last handed over
        self.waiting = None  # {key: array} of a collected batch not yet written to the block
        self.objects = None  # {key: object array} of its non-tensor entries, sent on the pipe

    def hand_over(self):
        """Writes the waiting batch (if any) into the block, once there is one, and says so; its
        non-tensor entries (object arrays) travel with the message."""
        if self.waiting is not None and self.views is not None:
            for (_, view), array in zip(self.views, self.waiting.values()):
                view[...] = array
            self.waiting = None
            self.conn.send(("batch", self.objects))

    def close(self):
        self.views = None  # (the block cannot close while arrays still view it)
        if self.shm is not None:
            self.shm.close()
        self.collector.shutdown()


# ---- the commands a worker answers: name -> handler(worker, argument) ----

def _collect(worker, random):
    """Collects a batch; a batch whose layout differs from the block's (a first policy batch may add
    the policy's other outputs to random ones) waits for a new block, which it asks for."""
    batch = worker.collector.rollout(random=random)
    worker.waiting = unique_traj_ids(batch_arrays(batch), worker.index, worker.num_workers)
    worker.objects = {key: worker.waiting.pop(key) for key, array in list(worker.waiting.items())
                      if array.dtype == object} or None  # not for the shared block
    if worker.track_policy_version:
        tag_policy_version(worker.waiting, batch.batch_size, worker.policy_version)
    layout = _layout(worker.waiting)
    if worker.views is None or layout != worker.layout:
        worker.views, worker.layout = None, layout
        worker.conn.send(("layout", layout))


def _attach(worker, name):
    """Opens the block the main process allocated for the waiting batch's layout."""
    worker.views = None
    if worker.shm is not None:
        worker.shm.close()
    worker.shm = shared_memory.SharedMemory(name=name)
    worker.views = _views(worker.shm.buf, worker.layout[0])


def _update(worker, versioned_weights):
    version, weights = versioned_weights
    worker.policy.load_state_dict({k: from_numpy(v) for k, v in weights.items()})
    worker.policy_version = version


def _seed(worker, args):
    worker.conn.send(("seed", worker.collector.set_seed(*args)))


def _reset(worker, _):
    worker.collector.reset()


def _state_dict(worker, _):
    state = worker.collector.state_dict()
    worker.conn.send(("state", {k: v for k, v in state.items() if k != "policy_state_dict"}))


def _load_state_dict(worker, state):
    worker.collector.load_state_dict(state)


_COMMANDS = {"collect": _collect, "attach": _attach, "update": _update, "seed": _seed, "reset": _reset,
             "state_dict": _state_dict, "load_state_dict": _load_state_dict}


def _next_command(conn, parent_pid):
    """The main process's next command, or None once it is gone (its pipe end closed, or the worker
    orphaned: a SIGKILLed main process closes nothing, and a later child may hold its pipe end)."""
    while not conn.poll(_PARENT_CHECK_S):
        if os.getppid() != parent_pid:
            return None
    try:
        return conn.recv()
    except EOFError:
        return None


def _worker_main(conn, create_env_fn, policy, collector_kwargs, seed, place, watch, inherited=()):
    """A worker process: answers the main process's commands until ``close`` (or the main process
    is gone), handing each collected batch over through its shared block; any failure is sent back
    as an ``error`` with its traceback. ``place``: (its index, the number of workers, whether to
    tag batches with their policy version); the first two make its trajectory ids unique.
    ``watch``: ``parent_watch``'s output, so that it dies with the main process. ``inherited``: the
    main process's pipe ends a forked worker holds copies of, closed at once so that the main
    process's death closes its pipe."""
    die_with_parent(*watch)
    parent_pid = os.getppid()
    for end in inherited:
        end.close()
    worker = None
    try:
        _random.manual_seed(seed)  # forked workers would otherwise draw the same random actions
        collector = SyncDataCollector(create_env_fn, policy, total_frames=-1, **collector_kwargs)
        worker = _WorkerState(conn, collector, policy, *place)
        conn.send(("ready", collector.frames_per_batch))  # after its own rounding for batched envs
        while True:
            message = _next_command(conn, parent_pid)
            if message is None or message[0] == "close":
                break
            command, arg = message
            handler = _COMMANDS.get(command)
            if handler is not None:  # (an unknown command is ignored)
                handler(worker, arg)
            worker.hand_over()
    except BaseException as error:  # noqa: B902 - every failure must reach the main process
        try:
            conn.send(("error", describe(error)))
        except Exception:
            pass
    finally:
        if worker is not None:
            worker.close()
        conn.close()



# ---- the main side -----------------------------------------------------------------------------------

class _Worker:
    """The main process's handle on one worker: process, pipe and shared block."""

    def __init__(self, index, process, conn):
        self.index, self.process, self.conn = index, process, conn
        self.shm = self.views = self.layout = None
        self.weights = None  # the (version, weights) it was sent last
        self.objects = None  # the non-tensor entries of its last batch ({key: object array} or None)

    def release(self, timeout):
        """Stops the process (politely, then by force) and frees the block; never raises."""
        try:
            self.conn.send(("close", None))
        except Exception:
            pass
        reap(self.process, timeout)
        self.conn.close()
        self.views = None
        if self.shm is not None:
            self.shm.close()
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass
            self.shm = None


def _release_all(workers, wake_ends, timeout=5.0):
    for worker in workers:
        worker.release(timeout)
    for end in wake_ends:
        end.close()


def _talks_to_workers(method):
    """``method`` run holding the workers' pipes and blocks (``_MultiCollector._talking``)."""
    @functools.wraps(method)
    def holding_the_pipes(self, *args, **kwargs):
        with self._talking():
            return method(self, *args, **kwargs)
    return holding_the_pipes


class _ShutDown(RuntimeError):
    """A collector's shutdown() (from another thread) met while talking to its workers: its
    iterator ends, other calls raise it."""


class _MultiCollector(CollectorBase):
    """What both multi-process collectors share: the workers, their pipes and blocks, the frame
    accounting and the control methods. ``compile_policy`` and ``cudagraph_policy`` (torchrl's
    options) are accepted and change nothing: the workers run the policy eagerly, as
    ``rlpipe.compile`` does."""

    def __init__(self, create_env_fn, policy=None, *, num_workers=None, frames_per_batch, total_frames=-1,
                 postproc=None, split_trajs=False, max_frames_per_traj=None, init_random_frames=0,
                 reset_at_each_iter=False, device=None, storing_device=None, policy_device=None, env_device=None,
                 update_at_each_batch=False, cat_results=None, timeout=300.0, mp_start_method=None,
                 exploration_type=ExplorationType.RANDOM, track_policy_version=False, compact_obs=False,
                 check_action_spec=False, trajs_per_batch=None, traj_format=None, compile_policy=None,
                 cudagraph_policy=None):
        if callable(create_env_fn) and not isinstance(create_env_fn, (list, tuple)):
            if num_workers is None:
                raise ValueError("num_workers is needed when create_env_fn is a single function; pass a list of "
                                 "functions (one per worker) or num_workers=N")
            create_env_fn = [create_env_fn] * num_workers
        try:
            create_env_fn = list(create_env_fn)
        except TypeError:  # e.g. an environment instance: each worker needs a function to build its own
            raise TypeError(f"create_env_fn must be a function that builds an environment, or a list of such "
                            f"functions (one per worker), got {type(create_env_fn).__name__}") from None
        if not create_env_fn or not all(callable(f) for f in create_env_fn):
            raise TypeError(f"create_env_fn must be a non-empty list of functions that build environments, got "
                            f"{create_env_fn!r}")
        if num_workers is not None and num_workers != len(create_env_fn):
            raise ValueError(f"num_workers ({num_workers}) does not match the {len(create_env_fn)} environment "
                             "functions given")
        total_frames = normalized_total_frames(total_frames)
        check_frame_counts(frames_per_batch, total_frames)
        total_frames = rounded_total_frames(total_frames, frames_per_batch, stacklevel=4)
        if cat_results is not None and cat_results != "stack" and (
                isinstance(cat_results, bool) or not isinstance(cat_results, int)):
            raise ValueError(f"cat_results must be 'stack' or an integer dimension to concatenate along, got "
                             f"{cat_results!r}")
        if cat_results not in (None, "stack") and not isinstance(self, MultiSyncDataCollector):
            raise ValueError("cat_results can only be used with MultiSyncDataCollector")
        self.cat_results = "stack" if cat_results is None else cat_results
        self.num_workers = len(create_env_fn)
        self.requested_frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.policy = policy
        self.postproc = postproc
        self.split_trajs = checked_split_trajs(split_trajs)
        self.trajs_per_batch, self.traj_format = checked_trajs_per_batch(trajs_per_batch, traj_format, self.split_trajs)
        self.reset_at_each_iter = bool(reset_at_each_iter)
        self.init_random_frames = checked_init_random_frames(init_random_frames)
        self.storing_device = storing_device if storing_device is not None else device
        self.update_at_each_batch = update_at_each_batch
        self.timeout = timeout
        self._frames = 0
        self._iter = -1       # the batch last yielded, as torchrl counts
        self._in_flight = {}  # worker index -> frames it is collecting
        self._ready = []      # (worker index, batch) received but not yet yielded
        self._closed = False
        self._error = None
        self.track_policy_version = bool(track_policy_version)
        self._version = 0       # update_policy_weights_() calls so far (torchrl's policy version)
        self._weights = None    # (version, weights) the next batch requests carry to workers that lack them
        self._weights_lock = threading.Lock()  # update_policy_weights_ may run in another thread
        self._io_lock = threading.RLock()      # one thread at a time talks to the workers
        self._frames_per_worker = self.frames_per_batch_worker()
        kwargs = dict(frames_per_batch=self._frames_per_worker, max_frames_per_traj=max_frames_per_traj,
                      reset_at_each_iter=reset_at_each_iter, compact_obs=compact_obs,
                      check_action_spec=check_action_spec,
                      exploration_type=set_exploration_type(exploration_type).type,  # checked here (ValueError)
                      policy_device=policy_device if policy_device is not None else device)
        if mp_start_method is None:
            mp_start_method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        context = mp.get_context(mp_start_method)
        resource_tracker.ensure_running()  # before the workers start, so they share it and never unlink our blocks
        seeds = _random.randint(0, 2 ** 31 - 1, (self.num_workers,)).tolist()  # from the caller's seed
        self._workers = []
        self._wake, self._waker = context.Pipe(duplex=False)  # shutdown() wakes a thread waiting for workers
        self._finalizer = weakref.finalize(self, _release_all, self._workers, (self._wake, self._waker))
        forked = mp_start_method == "fork"
        watch = parent_watch(mp_start_method)
        for index, env_fn in enumerate(create_env_fn):
            parent, child = context.Pipe()
            inherited = [w.conn for w in self._workers] + [parent, self._wake, self._waker] if forked else []
            process = context.Process(target=_worker_main,
                                      args=(child, env_fn, policy, kwargs, seeds[index],
                                            (index, self.num_workers, self.track_policy_version), watch,
                                            inherited),
                                      name=f"rlpipe-collector-{index}", daemon=True)
            process.start()
            child.close()
            self._workers.append(_Worker(index, process, parent))
        try:
            self._worker_frames = [self._receive([index], "ready")[1][1] for index in range(self.num_workers)]
        except BaseException:
            self.shutdown()
            raise

    # ---- talking to workers -------------------------------------------------------------------------------
    def _name(self):
        return type(self).__name__

    def _send(self, index, command, arg=None):
        self._check_usable()
        try:
            self._workers[index].conn.send((command, arg))
        except (BrokenPipeError, OSError) as error:
            self._fail(self._death(index, error))

    def _death(self, index, cause=None):
        process = self._workers[index].process
        process.join(0.5)
        code = process.exitcode
        why = f"exit code {code}" if code is not None else f"{type(cause).__name__}: {cause}"
        return f"{self._name()}: worker {index} died unexpectedly ({why})"

    def _fail(self, message):
        if self._closed:  # a failure caused by shutdown() from another thread is that shutdown
            self._check_usable()
        self._error = message
        raise RuntimeError(message)

    @contextlib.contextmanager
    def _talking(self):
        """Holds the workers' pipes and blocks for one exchange with them (shutdown() waits for it)."""
        with self._io_lock:
            self._check_usable()
            yield

    def _check_usable(self):
        if self._closed:
            raise _ShutDown(f"{self._name()} has been shut down")
        if self._error is not None:
            raise RuntimeError(f"{self._name()} is unusable after an earlier failure ({self._error.splitlines()[0]}); "
                               "call shutdown()")

    def _receive(self, indices, expected):
        """The first reply of kind ``expected`` from any worker in ``indices``: (index, (kind,
        payload)). On the way, a worker's first layout gets its block, and a batch that arrives
        while another reply is awaited is kept in ``_ready``. A worker's error, its death or
        ``timeout`` seconds of silence raise a RuntimeError naming the worker."""
        while True:
            index, reply = self._receive_any(indices, expected)
            if reply[0] == "layout":
                self._allocate_block(index, *reply[1])
            elif expected == "batch" or reply[0] != "batch":
                return index, reply
            else:
                self._ready.append(self._unpack_batch(index))

    def _receive_any(self, indices, expected):
        waiting = {}
        for index in indices:
            worker = self._workers[index]
            waiting[worker.conn] = index
            waiting[worker.process.sentinel] = index
        ready = connection.wait(list(waiting) + [self._wake], self.timeout)
        self._check_usable()  # woken by shutdown() from another thread
        if not ready:
            self._fail(str(no_reply_error(self._name(), indices, self.timeout)))
        # a worker whose process has exited comes first (its last message, if any, then its death), so
        # that a sibling whose batches are always ready cannot hide it
        exited = [r for r in ready if not isinstance(r, connection.Connection)]
        index = waiting[(exited or ready)[0]]
        try:
            kind, payload = self._workers[index].conn.recv()
        except (EOFError, OSError) as error:
            self._fail(self._death(index, error))
        if kind == "error":
            self._fail(f"{self._name()}: worker {index} failed: {payload}")
        if kind not in (expected, "batch", "layout"):
            self._fail(f"{self._name()}: worker {index} sent {kind!r}, expected {expected!r}")
        if kind == "batch":
            self._workers[index].objects = payload
        return index, (kind, payload)

    def _allocate_block(self, index, layout, size):
        """The shared block a worker writes its batches into, from its first batch's layout (or a
        later batch's, when the layout changed: the old block is freed)."""
        worker = self._workers[index]
        if worker.shm is not None:
            worker.views = None
            worker.shm.close()
            worker.shm.unlink()
        worker.shm = shared_memory.SharedMemory(create=True, size=size)
        worker.views = _views(worker.shm.buf, layout)
        worker.layout = layout
        self._send(index, "attach", worker.shm.name)

    def _receive_batch(self, indices):
        """(index, TensorDict) of the next batch from one of ``indices``."""
        return self._unpack_batch(self._receive(indices, "batch")[0])

    def _unpack_batch(self, index):
        """Worker ``index``'s batch as (index, TensorDict), copied out of its block (its trajectory
        ids already made unique by the worker)."""
        arrays = {key: view.copy() for key, view in self._workers[index].views}
        arrays.update(self._workers[index].objects or {})
        self._in_flight.pop(index, None)
        return index, batch_from_arrays(arrays[TRAJ_IDS].shape, arrays)

    def _request(self, index, weights):
        """Asks worker ``index`` for its next batch, sending it ``weights`` first (``_latest_weights()``)
        unless it has them: random actions throughout while the frames collected so far are below
        ``init_random_frames`` (torchrl's rule)."""
        worker = self._workers[index]
        if weights is not None and worker.weights is not weights:
            self._send(index, "update", weights)
            worker.weights = weights
        self._send(index, "collect", self._frames < self.init_random_frames)
        self._in_flight[index] = self._worker_frames[index]

    def _pending_frames(self):
        """Frames collected or being collected but not yet yielded."""
        return sum(self._in_flight.values()) + sum(batch.numel() for _, batch in self._ready)

    def _finish(self, batch):
        """What the user sees: its last batch dim named "time" (as torchrl's), split, post-processed and
        on the storing device."""
        self._iter += 1
        batch.refine_names(..., "time")
        if self.split_trajs:
            batch = split_trajectories(batch).refine_names(..., "time")
        if self.postproc is not None:
            batch = self.postproc(batch)
        return batch if self.storing_device is None else batch.to(self.storing_device)

    def _drain(self, keep):
        """Waits for the batches still being collected, so the pipes are in step; they are kept for
        the iterator to yield, or dropped (their frames then do not count)."""
        while self._in_flight:
            self._ready.append(self._receive_batch(list(self._in_flight)))
        if not keep:
            self._ready.clear()

    # ---- control ------------------------------------------------------------------------------------------
    def __len__(self):
        if self.total_frames == -1:
            raise RuntimeError("a collector with total_frames=-1 has no length: it runs until the loop breaks")
        return -(-self.total_frames // self._frames_per_yield())  # exact when the workers' batches are equal

    def update_policy_weights_(self, policy_weights=None):
        """Copies the policy's current parameters and buffers (or ``policy_weights``: a state_dict or
        a Module) as policy version ``policy_version + 1``; each worker loads them before its next
        batch (a batch being collected keeps its weights). Any thread may call it while another
        iterates: it only publishes the weights, which the next batch requests carry; several
        updates between two requests reach a worker once (the last)."""
        self._check_usable()
        if policy_weights is None:
            if not isinstance(self.policy, Module):
                return  # a random or plain-function policy has no weights
            policy_weights = self.policy
        if isinstance(policy_weights, Module):
            policy_weights = policy_weights.state_dict()
        self._publish(weight_arrays(policy_weights))

    def _publish(self, weights, version=None):
        """Makes ``weights`` the ones the next batch requests carry, as ``version`` (default: the
        next one)."""
        with self._weights_lock:
            self._version = self._version + 1 if version is None else int(version)
            self._weights = (self._version, weights)

    def _latest_weights(self):
        """(version, weights) last published, or None."""
        with self._weights_lock:
            return self._weights

    @property
    def policy_version(self):
        """torchrl's policy version: the number of ``update_policy_weights_()`` calls so far (the
        version the next batches will carry), or None without ``track_policy_version``. A batch's
        own ``"policy_version"`` entry says which weights collected it."""
        return self._version if self.track_policy_version else None

    def get_policy_version(self):
        """``policy_version`` (torchrl's method, for remote calls)."""
        return self.policy_version

    @_talks_to_workers
    def set_seed(self, seed, static_seed=False):
        """Seeds worker 0's environment with ``seed``, worker 1's with the seed that returns, and so
        on; returns the last one, as torchrl does. Batches being collected are dropped."""
        self._drain(keep=False)
        for index in range(self.num_workers):
            self._send(index, "seed", (seed, static_seed))
            seed = self._receive([index], "seed")[1][1]
        return seed

    @_talks_to_workers
    def reset(self, index=None):
        """Resets the workers' environments: all, worker ``index`` (an int), or those where
        ``index`` is True (a sequence of one bool per worker: torchrl's ``reset_idx``). The next
        batches start new trajectories. Batches being collected are dropped (their frames do not
        count)."""
        if index is None:
            indices = range(self.num_workers)
        elif isinstance(index, (list, tuple, np.ndarray)):
            if len(index) != self.num_workers:
                raise ValueError(f"reset: expected one bool per worker ({self.num_workers}), got {list(index)}")
            indices = [i for i, flag in enumerate(index) if flag]
        else:
            indices = [int(index)]
        self._drain(keep=False)
        for i in indices:
            self._send(i, "reset")

    @_talks_to_workers
    def state_dict(self):
        """torchrl's layout: ``worker0``, ``worker1``, ... (each worker collector's
        ``state_dict()``, its trajectory counter ``traj_pool`` included, without the policy), then
        ``frames`` and ``iter`` (the index of the last batch yielded, -1 before the first); and
        the policy's weights, once, as ``policy_state_dict``. Batches being collected are finished
        first, and still yielded."""
        self._drain(keep=True)
        state = OrderedDict()
        for index in range(self.num_workers):
            self._send(index, "state_dict")
            state[f"worker{index}"] = self._receive([index], "state")[1][1]
        state["frames"] = self._frames
        state["iter"] = self._iter
        if self.track_policy_version:
            state["policy_version"] = self._version
        if isinstance(self.policy, Module):
            state["policy_state_dict"] = self.policy.state_dict()
        return state

    @_talks_to_workers
    def load_state_dict(self, state_dict):
        """Loads ``state_dict()``'s output: the frame and batch counts, each worker's state and the policy's."""
        self._drain(keep=False)
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])
        for index in range(self.num_workers):
            if f"worker{index}" in state_dict:
                self._send(index, "load_state_dict", state_dict[f"worker{index}"])
        version = state_dict.get("policy_version") if self.track_policy_version else None
        if "policy_state_dict" in state_dict and isinstance(self.policy, Module):
            self.policy.load_state_dict(state_dict["policy_state_dict"])
            self._publish(weight_arrays(self.policy.state_dict()), version)  # a restored version, not a new one
        elif version is not None:
            with self._weights_lock:
                self._version = int(version)

    def shutdown(self, timeout=5.0):
        """Stops every worker and frees the shared blocks; always returns, leaving no child process.
        Called from another thread, it ends the loop iterating this collector there (which leaves
        the pipes and blocks at once, unless it is writing to a worker busy collecting: after
        ``timeout`` s the workers are killed, which frees it)."""
        self._closed = True
        if self._finalizer.detach() is None:  # released already
            return
        self._waker.send_bytes(b"")  # wakes a thread waiting for the workers
        held = self._io_lock.acquire(timeout=timeout)
        try:
            if not held:
                for worker in self._workers:
                    reap(worker.process, 0)
                held = self._io_lock.acquire()
            _release_all(self._workers, (self._wake, self._waker), timeout)
        finally:
            if held:
                self._io_lock.release()

    def __iter__(self):
        self._check_usable()
        batches = self._iterate()
        if self.trajs_per_batch is not None:  # whole trajectories, assembled here from the workers' batches
            alive = (lambda: ()) if self.reset_at_each_iter else None  # a reset ends every running one
            batches = assembled_trajectories(batches, self.trajs_per_batch, self.traj_format, {}, [], alive)
        try:
            yield from batches
        except _ShutDown:  # shutdown() from another thread ends the loop
            return

    def _iterate(self):
        raise NotImplementedError

    def __repr__(self):
        return (f"{self._name()}(num_workers={self.num_workers}, frames_per_batch={self.requested_frames_per_batch}, "
                f"total_frames={self.total_frames})")


class MultiSyncDataCollector(_MultiCollector):
    """Every batch gathers one part from each worker: ``frames_per_batch / num_workers`` frames each
    (rounded up, with a warning), stacked along a new leading worker dim (torchrl's default
    ``cat_results="stack"``): ``[num_workers, T]``, or ``[num_workers, num_envs, T]`` for vectorized
    envs. The workers collect only when asked, so a weight update reaches the next batch whole.

    ``cat_results=d`` (an int) concatenates the parts along batch dim ``d`` instead (``-1``: time):
    a postproc that looks along time, such as ``MultiStep``, then sees one worker's last step
    followed by the next worker's first; the default stacking keeps them apart.

    ``("collector", "traj_ids")`` are unique across workers and reproducible: worker ``w``'s
    ``i``-th trajectory has id ``i * num_workers + w`` (torchrl 0.14 draws them from one shared
    pool, in an order set by timing).

    Devices: the workers' policies read observations on ``policy_device`` (default ``device``);
    batches reach the main process through host memory and are delivered on ``storing_device``
    (default ``device``). ``env_device`` is accepted for torchrl's signature (environments step on
    the host).

    Workers start with ``fork`` where the platform has it (so lambdas and local policies work), else
    ``spawn`` (which needs picklable ``create_env_fn`` and policy); ``mp_start_method`` overrides.
    ``timeout`` (seconds) bounds the wait for any worker's reply.
    ``compact_obs`` and ``check_action_spec`` reach each worker's ``SyncDataCollector``.
    ``trajs_per_batch`` (with ``traj_format``) yields whole trajectories instead, assembled in the
    main process from the workers' batches as ``SyncDataCollector`` assembles its own (torchrl's
    multi-collectors without a replay buffer).

    ``track_policy_version=True`` (torchrl's option) tags every frame with ``"policy_version"`` and
    ``("next", "policy_version")`` (int64): the version of the weights that collected it, counted by
    ``update_policy_weights_()`` calls (0 before the first; ``policy_version`` is the latest). A
    MultiSync batch is collected with one version. A learner thread may call
    ``update_policy_weights_()`` while another iterates, and ``shutdown()`` from another thread
    ends the iterating thread's loop."""

    def frames_per_batch_worker(self):
        """The frames each worker collects per batch: ``frames_per_batch`` split across the workers (rounded up,
        with a warning, when it does not divide)."""
        if self.requested_frames_per_batch % self.num_workers:
            rl_warn(f"frames_per_batch {self.requested_frames_per_batch} is not exactly divisible by the number of "
                    f"collector workers {self.num_workers}, this results in more frames_per_batch per iteration that "
                    "requested." + SILENCE,
                    stacklevel=4)
        return -(-self.requested_frames_per_batch // self.num_workers)

    def _frames_per_yield(self):
        return sum(self._worker_frames)

    def _iterate(self):
        with self._talking():
            self._drain(keep=False)  # the rest of a gather an exception interrupted
        while self.total_frames == -1 or self._frames < self.total_frames:
            with self._talking():
                if self.update_at_each_batch:
                    self.update_policy_weights_()
                weights = self._latest_weights()  # one version for the whole batch
                for index in range(self.num_workers):
                    self._request(index, weights)
                while self._in_flight:
                    self._in_flight.pop(self._receive(list(self._in_flight), "batch")[0])
                batch = self._gather()
            self._frames += batch.numel()
            yield self._finish(batch)

    def _gather(self):
        """The batch made of every worker's part, read from their blocks with one stack (or
        concatenate) per entry: the only copy the main process makes. Parts of different layouts
        (different environments) are joined as TensorDicts, which names what does not fit."""
        layout = self._workers[0].layout
        part_batch = next(shape for key, shape, _, _ in layout if key == TRAJ_IDS)
        dims = len(part_batch)
        stack = self.cat_results == "stack"
        if any(w.layout != layout for w in self._workers) or not (stack or -dims <= self.cat_results < dims):
            parts = [self._unpack_batch(index)[1] for index in range(self.num_workers)]
            return TensorDict.stack(parts, 0) if stack else TensorDict.cat(parts, self.cat_results)
        leaves = zip(*[[view for _, view in worker.views] for worker in self._workers])
        if stack:
            batch_size = (self.num_workers,) + part_batch
            arrays = [np.stack(leaf) for leaf in leaves]
        else:
            dim = self.cat_results % dims
            batch_size = part_batch[:dim] + (part_batch[dim] * self.num_workers,) + part_batch[dim + 1:]
            arrays = [np.concatenate(leaf, dim) for leaf in leaves]
        joined = {key: array for (key, _, _, _), array in zip(layout, arrays)}
        if self._workers[0].objects:  # non-tensor entries: joined as the tensors are
            for key in self._workers[0].objects:
                parts = [w.objects[key] for w in self._workers]
                joined[key] = np.stack(parts) if stack else np.concatenate(parts, self.cat_results % dims)
        return batch_from_arrays(batch_size, joined)


class MultiaSyncDataCollector(_MultiCollector):
    """Yields each worker's batch of ``frames_per_batch`` frames as soon as it is ready; the worker
    starts on its next batch before the yield, so collection overlaps the caller's work (and a weight
    update reaches each worker at its next batch). Trajectory ids as in ``MultiSyncDataCollector``."""

    def frames_per_batch_worker(self):
        """The frames each worker collects per batch: ``frames_per_batch`` (each batch comes from one worker)."""
        return self.requested_frames_per_batch

    def _frames_per_yield(self):
        return self._worker_frames[0]

    def _needs_more(self):
        return self.total_frames == -1 or self._frames + self._pending_frames() < self.total_frames

    def _iterate(self):
        while True:
            with self._talking():
                if self.update_at_each_batch:
                    self.update_policy_weights_()
                for index in range(self.num_workers):  # idle workers start a batch while frames are still needed
                    if index not in self._in_flight and self._needs_more():
                        self._request(index, self._latest_weights())
                if self._ready:  # batches that arrived while state_dict() or reset() waited
                    index, batch = self._ready.pop(0)
                elif self._in_flight:
                    index, batch = self._receive_batch(list(self._in_flight))
                else:
                    return
                self._frames += batch.numel()
                if index not in self._in_flight and self._needs_more():
                    self._request(index, self._latest_weights())  # before the yield: the worker collects meanwhile
            yield self._finish(batch)


class AsyncCollector(MultiaSyncDataCollector):
    """torchrl's ``AsyncCollector``: one ``SyncDataCollector`` running in a worker process (a
    ``MultiaSyncDataCollector`` with a single worker), so collection overlaps the caller's work.
    ``create_env_fn`` is one function (or environment factory), called with ``create_env_kwargs``
    (a dict) when given; the other arguments are ``MultiaSyncDataCollector``'s."""

    def __init__(self, create_env_fn, policy=None, *, create_env_kwargs=None, **kwargs):
        if "num_workers" in kwargs:
            raise TypeError("AsyncCollector runs a single worker: it takes no num_workers argument "
                            f"(got num_workers={kwargs['num_workers']!r})")
        if create_env_kwargs is not None and not isinstance(create_env_kwargs, dict):
            raise TypeError(f"AsyncCollector: create_env_kwargs must be a dict, got "
                            f"{type(create_env_kwargs).__name__}")
        if create_env_kwargs:
            create_env_fn = functools.partial(create_env_fn, **create_env_kwargs)
        super().__init__([create_env_fn], policy, **kwargs)


# torchrl 0.14's names for the same classes
MultiCollector = _MultiCollector
MultiSyncCollector = MultiSyncDataCollector
MultiAsyncCollector = MultiaSyncDataCollector
