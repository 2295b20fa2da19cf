"""What every collector shares (``SyncDataCollector``, the multi-process ones in ``multi.py`` and
``RayCollector``): the base class, the checks of the frame counts, torchrl's warnings, and the
plain-array form in which a batch leaves a worker process or a Ray actor."""
import threading
import warnings
from collections import OrderedDict

import numpy as np

from .._tensor import Size, Tensor, host_array, wrap
from .._utils import rl_warnings
from ..primitives import cat
from ..envs.step_protocol import non_tensor_entry
from ..tensordict import TensorDict

TRAJ_IDS = ("collector", "traj_ids")
POLICY_VERSION = ("policy_version",)  # torchrl's track_policy_version entry (and under "next")


class CollectorBase:
    """What every collector shares: a context manager whose exit calls ``shutdown()``."""

    _iterator = None  # next()'s iterator, made on its first call

    def shutdown(self):
        """Stops the collector and releases what it holds (envs, worker processes, actors)."""
        raise NotImplementedError

    def next(self):
        """The next batch, or None when the collection is over (torchrl's ``collector.next()``)."""
        if self._iterator is None:
            self._iterator = iter(self)
        return next(self._iterator, None)

    # ---- torchrl's background collection into a replay buffer -------------------------------------
    def start(self):
        """Collects in a daemon thread, each batch going into the ``replay_buffer`` given at construction
        (RuntimeError without one), until ``async_shutdown`` or the end of ``total_frames``."""
        if getattr(self, "replay_buffer", None) is None:
            raise RuntimeError("Replay buffer must be defined for execution.")
        if not self.is_running():
            self._stop = False
            self._thread = threading.Thread(target=self._run_into_buffer, name="collector", daemon=True)
            self._thread.start()

    def _run_into_buffer(self):
        for _ in self:
            if self._stop:
                return

    def is_running(self):
        """Whether the ``start()`` thread is collecting."""
        thread = getattr(self, "_thread", None)
        return thread is not None and thread.is_alive()

    def async_shutdown(self, timeout=None, close_env=True):
        """Stops the ``start()`` thread after its current batch (waiting up to ``timeout`` seconds), then
        ``shutdown()`` (``close_env`` is accepted for torchrl's signature)."""
        self._stop = True
        thread = getattr(self, "_thread", None)
        if thread is not None and thread.is_alive():
            thread.join(timeout)
        self.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


def no_reply_error(collector, workers, timeout):
    """The RuntimeError of a collector whose ``workers`` (indices) did not answer within ``timeout`` s."""
    return RuntimeError(f"{collector}: no reply from worker(s) {sorted(set(workers))} within {timeout} s "
                        "(timeout=...)")


# ---- frame counts and warnings ----------------------------------------------------------------------

SILENCE = " To silence this message, set the environment variable RL_WARNINGS to False."


def rl_warn(message, stacklevel):
    """A UserWarning, unless the environment variable ``RL_WARNINGS`` is false (torchrl's switch for
    its collectors' warnings: ``0``, ``false``, ``no``, ``off``, ...)."""
    if rl_warnings():
        warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)


def normalized_total_frames(total_frames):
    """torchrl's reading of ``total_frames``: ``None`` or any negative integer runs until stopped
    (``-1`` here)."""
    if total_frames is None:
        return -1
    if isinstance(total_frames, int) and not isinstance(total_frames, bool) and total_frames < 0:
        return -1
    return total_frames


def frames_limit(max_frames_per_traj):
    """torchrl's reading of ``max_frames_per_traj``: None becomes 0, and 0 or a negative value means
    no limit per trajectory; anything but an integer is a TypeError."""
    if max_frames_per_traj is None:
        return 0
    if isinstance(max_frames_per_traj, bool) or not isinstance(max_frames_per_traj, (int, np.integer)):
        raise TypeError(f"max_frames_per_traj must be an integer or None, got "
                        f"{type(max_frames_per_traj).__name__} {max_frames_per_traj!r}")
    return int(max_frames_per_traj)


def check_frame_counts(frames_per_batch, total_frames):
    """Checks of a collector's ``frames_per_batch`` and ``total_frames`` (ValueError). Unlike
    torchrl 0.14, which then collects one batch, ``total_frames < frames_per_batch`` is an error:
    it is most likely a mistake, and the batch would hold more frames than asked for."""
    if isinstance(frames_per_batch, bool) or not isinstance(frames_per_batch, int) or frames_per_batch <= 0:
        raise ValueError(f"frames_per_batch must be a positive integer, got frames_per_batch={frames_per_batch!r}")
    if isinstance(total_frames, bool) or not isinstance(total_frames, int) or total_frames == 0 or total_frames < -1:
        raise ValueError(f"total_frames must be a positive integer or -1 (run until stopped), got {total_frames!r}")
    if total_frames != -1 and total_frames < frames_per_batch:
        raise ValueError(f"total_frames ({total_frames}) is smaller than frames_per_batch ({frames_per_batch}): "
                         "not even one batch would be collected")


def checked_init_random_frames(init_random_frames):
    """``init_random_frames`` as a frame count: ``None`` or ``-1`` mean none (torchrl's defaults),
    anything else must be a non-negative integer (torchrl 0.14 accepts any value silently)."""
    if init_random_frames is None or (init_random_frames == -1 and not isinstance(init_random_frames, bool)):
        return 0
    if isinstance(init_random_frames, bool) or not isinstance(init_random_frames, (int, np.integer)):
        raise TypeError(f"init_random_frames must be an integer number of frames (or None), got "
                        f"{init_random_frames!r} ({type(init_random_frames).__name__})")
    if init_random_frames < 0:
        raise ValueError(f"init_random_frames must be >= 0 (or -1/None for none), got {init_random_frames}")
    return int(init_random_frames)


def checked_split_trajs(split_trajs):
    """``split_trajs`` as a bool: ``None`` (torchrl's default) is False; a non-bool is a TypeError
    rather than read for its truth (``split_trajs="no"`` would split)."""
    if split_trajs is None:
        return False
    if not isinstance(split_trajs, (bool, np.bool_)):
        raise TypeError(f"split_trajs must be True or False, got {split_trajs!r} ({type(split_trajs).__name__})")
    return bool(split_trajs)


def checked_trajs_per_batch(trajs_per_batch, traj_format, split_trajs):
    """(trajs_per_batch, traj_format) checked: ``None`` or a positive integer, and ``"padded"``
    (the default) or ``"cat"``, which only ``trajs_per_batch`` uses (torchrl's errors). Unlike
    torchrl, ``split_trajs=True`` with ``trajs_per_batch`` is refused: the batches are already whole
    trajectories."""
    if trajs_per_batch is not None:
        if isinstance(trajs_per_batch, bool) or not isinstance(trajs_per_batch, (int, np.integer)):
            raise TypeError(f"trajs_per_batch must be a positive integer (or None), got {trajs_per_batch!r} "
                            f"({type(trajs_per_batch).__name__})")
        if trajs_per_batch <= 0:
            raise ValueError(f"trajs_per_batch must be a positive integer (or None), got {trajs_per_batch}")
        if split_trajs:
            raise ValueError("split_trajs=True cannot be combined with trajs_per_batch: its batches are whole "
                             "trajectories already (traj_format='padded' pads them as split_trajs does)")
    if traj_format is None:
        return trajs_per_batch, "padded"
    if traj_format not in ("padded", "cat"):
        raise ValueError(f"traj_format must be 'padded' or 'cat', got {traj_format!r}.")
    if traj_format != "padded" and trajs_per_batch is None:
        raise ValueError("traj_format has no effect unless trajs_per_batch is set: the collector only assembles "
                         "whole trajectories when asked to yield them. Set trajs_per_batch to the number of "
                         "complete trajectories per batch.")
    return (None if trajs_per_batch is None else int(trajs_per_batch)), traj_format


def add_trajectory_chunks(batch, running, complete):
    """Files a batch's steps by trajectory (``("collector", "traj_ids")``, as torchrl's
    ``_traj_ingest``): each trajectory's steps extend ``running[id]`` (a list of flat chunks); one
    whose last step is done moves to ``complete``, concatenated, in id order."""
    flat = batch.reshape(-1)
    ids = flat.get(TRAJ_IDS, None)
    if ids is None:
        raise KeyError("trajs_per_batch requires ('collector', 'traj_ids') in every collector batch: a postproc "
                       "must keep it")
    ids = host_array(ids).reshape(-1)
    order = np.argsort(ids, kind="stable")
    flat = flat[wrap(order)]
    ids = ids[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    done = host_array(flat.get(("next", "done"))).reshape(len(ids), -1).any(-1)
    for start, stop in zip(starts.tolist(), np.r_[starts[1:], len(ids)].tolist()):
        traj_id = int(ids[start])
        running.setdefault(traj_id, []).append(flat[start:stop])
        if done[stop - 1]:
            chunks = running.pop(traj_id)
            complete.append(cat(chunks, 0) if len(chunks) > 1 else chunks[0])


def assembled_trajectories(batches, trajs_per_batch, traj_format, running, complete, alive=None):
    """``trajs_per_batch``'s batches from frame ``batches``: whole trajectories, in the order they
    complete (within a frame batch, by trajectory id), ``trajs_per_batch`` at a time, padded
    (``split_trajectories``) or concatenated (``traj_format="cat"``). ``running``/``complete``: the
    assembly state (``add_trajectory_chunks``); ``alive()``, when given, the ids later batches go
    on with: the other running trajectories can no longer complete and are dropped."""
    from rlpipe.postprocs import split_trajectories
    for batch in batches:
        add_trajectory_chunks(batch, running, complete)
        if alive is not None:
            keep = alive()
            for traj_id in [i for i in running if i not in keep]:
                del running[traj_id]
        while len(complete) >= trajs_per_batch:
            chosen = complete[:trajs_per_batch]
            del complete[:trajs_per_batch]
            flat = cat(chosen, 0) if len(chosen) > 1 else chosen[0]
            yield flat if traj_format == "cat" else split_trajectories(flat)


def checked_replay_buffer(replay_buffer, extend_buffer):
    """torchrl's ``replay_buffer`` option checked: None or an object with ``extend`` (a ReplayBuffer),
    filled with whole batches (``extend_buffer=True``; torchrl's per-step ``False`` is deprecated there
    and refused here)."""
    if replay_buffer is not None and not callable(getattr(replay_buffer, "extend", None)):
        raise TypeError(f"replay_buffer must be a ReplayBuffer (an object with extend()), got "
                        f"{type(replay_buffer).__name__}")
    if not extend_buffer:
        raise ValueError("extend_buffer=False (adding frames one step at a time, deprecated in torchrl) is not "
                         "supported: the collector extends replay_buffer with each whole batch (extend_buffer=True)")
    return replay_buffer


def into_buffer(batches, replay_buffer):
    """Each of ``batches`` written into ``replay_buffer``; yields None in its place, as torchrl's collectors
    do when given a replay buffer."""
    for batch in batches:
        replay_buffer.extend(batch)
        yield None


def rounded_total_frames(total_frames, frames_per_batch, stacklevel):
    """``total_frames`` rounded up to whole batches, with torchrl's warning when that changes it."""
    if total_frames == -1 or not total_frames % frames_per_batch:
        return total_frames
    rounded = -(-total_frames // frames_per_batch) * frames_per_batch
    rl_warn(f"total_frames ({total_frames}) is not exactly divisible by frames_per_batch ({frames_per_batch}). "
            f"This means {rounded - total_frames} additional frames will be collected." + SILENCE,
            stacklevel=stacklevel + 1)
    return rounded


# ---- batches as plain arrays ------------------------------------------------------------------------

def batch_arrays(batch):
    """{key: host array} of a batch's leaves (nested keys as tuples): what a worker process or a
    Ray actor hands over, never a pickled Tensor. Non-tensor entries (an env's strings) come as
    NumPy object arrays of their batch shape."""
    arrays = {key: host_array(value) for key, value in batch.items(True, True)}
    arrays.update(_non_tensor_arrays(batch))
    return arrays


def _non_tensor_arrays(batch, prefix=()):
    """{key tuple: object array} of the non-tensor entries of a collector's batch (a TensorDict of
    TensorDicts): a walk over its own entries, a twentieth of ``items(True)``'s cost."""
    found = {}
    for key, value in batch._tensordict.items():
        if isinstance(value, Tensor):
            continue
        if value._is_non_tensor:
            found[prefix + (key,)] = value._object_array()
        else:
            found.update(_non_tensor_arrays(value, prefix + (key,)))
    return found


def batch_from_arrays(batch_size, arrays):
    """The batch TensorDict around ``batch_arrays``' output (the arrays wrapped, not copied; object
    arrays as NonTensorStacks)."""
    return tensordict_of({key: non_tensor_entry(array) if array.dtype == object else wrap(array)
                          for key, array in arrays.items()}, Size(batch_size))


def tensordict_of(entries, batch_size):
    """A TensorDict of ``batch_size`` (a Size) from {key tuple: Tensor}: plain keys through
    ``set``'s fast path, nested ones creating their TensorDicts as ``set`` does."""
    td = TensorDict._build({}, batch_size, None)
    for key, value in entries.items():
        td.set(key[0] if len(key) == 1 else key, value)
    return td


def tag_policy_version(arrays, batch_size, version):
    """Adds torchrl's ``track_policy_version`` entries to ``batch_arrays``' output: ``"policy_version"``
    and ``("next", "policy_version")`` (int64, one per frame), both ``version``: that of the weights
    the batch was collected with (torchrl's root entry of a batch's first frame may still carry
    the version before; here the whole batch has one)."""
    arrays[POLICY_VERSION] = np.full(tuple(batch_size), version, np.int64)
    if any(key[0] == "next" for key in arrays):
        arrays[("next",) + POLICY_VERSION] = np.full(tuple(batch_size), version, np.int64)
    return arrays


def weight_arrays(state_dict):
    """{name: contiguous host array} copies of a state_dict's tensors: the weights as they are now,
    whatever the caller changes in place later."""
    return OrderedDict((name, np.array(host_array(value), order="C", copy=True)) for name, value in state_dict.items())


def unique_traj_ids(arrays, worker, num_workers):
    """``batch_arrays``' output with trajectory ids unique across ``num_workers`` collectors:
    worker ``worker``'s local id ``i`` becomes ``i * num_workers + worker`` (still increasing). A
    batch without them (a postproc in the worker may drop them) is left as it is."""
    if TRAJ_IDS in arrays:
        arrays[TRAJ_IDS] = arrays[TRAJ_IDS] * num_workers + worker
    return arrays
