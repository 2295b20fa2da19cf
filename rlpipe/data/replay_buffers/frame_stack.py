"""``FrameStackReplayBuffer``: Atari-style replay that stores every frame once and builds the
frame stacks when it samples (as Dopamine and Tianshou do).

A buffer of stacked transitions (torchrl's: ``"pixels"`` and ``("next", "pixels")``, each
``[4, 84, 84]``) spends 56 KB per transition; this one spends one 84x84 frame (7 KB) plus about
70 bytes of links, step data and window, and one extra frame per finished episode (its last
observation). ``sample`` returns exactly what ``CatFrames(N=frame_stack, dim=-3, padding=...)``
followed by ``MultiStep(gamma, n_steps)`` over each whole trajectory would give for the same
transitions.

**Layout.** A ring of ``capacity`` slots; each slot holds one frame, and, when that frame is the
observation of a step, the step's ``action``, reward and done flags. Each slot carries its write
stamp (0, 1, 2, ... in write order; the slot is ``stamp % capacity``) and the stamps of the
previous and next frames of its trajectory. A stamp whose slot has been written again is dead:
links never need to be cleared, and a stack or window that would reach a dead frame is detected.
A stack is gathered by following the links back from its last frame. A transition's n-step
window (its length, the frame after it and the discounted reward sum, ``MultiStep``'s terms in
``MultiStep``'s order) is worked out once, when the window is complete: it never changes after.

**Trajectories.** Row ``e`` of a ``[num_envs, T]`` batch (a ``[T]`` batch is row 0) continues
environment ``e``'s trajectory from the previous ``extend``, unless that trajectory ended (done)
or ``("collector", "traj_ids")`` says a new one starts. A done step, or a change of trajectory
id, ends a trajectory; its last observation is ``("next", frame_key)`` of its last step, stored
as one more frame. When batches carry ``("next", frame_key)``, the last one of each row is
stored too, and becomes the first observation of the row that continues it (so the first
``frame_key`` of a continuing row is not stored again: it is the same frame), unless the ring
might overwrite it while writing that batch (it is then stored again).

**When a transition can be sampled.** Step ``t`` is sampleable when (1) its whole n-step window
is known: the steps ``t .. t + m - 1`` and the frame at ``t + m`` are stored, where ``m`` is
``n_steps``, or less where the trajectory ends (a done step, or a trajectory that ended without
one); so its values equal ``MultiStep`` over the whole trajectory, never a window cut short by a
batch's end. The last ``n_steps - 1`` steps of each environment's open trajectory (``n_steps``
without ``("next", frame_key)``) wait for the next batch. And (2) none of the frames of its stack
has been overwritten: when the ring wraps, a transition whose stack would reach an overwritten
frame is no longer sampleable (padding it as a trajectory start would differ from what
``CatFrames`` gave). A transition's window only reaches newer frames, which are overwritten
after it. A trajectory that ends by a change of trajectory id with no ``("next", frame_key)``
stored leaves its last ``n_steps`` transitions unsampleable (their next observation is unknown).

``len(rb)`` is the number of sampleable transitions, ``rb.sampleable_indices()`` their slots,
and ``rb[index]`` reads the transitions at those slots as ``sample`` returns them.

Priorities: ``prioritized=True`` with ``alpha`` and ``beta`` (and ``eps``) draws transition
``i`` with probability proportional to ``(p_i + eps) ** alpha`` and writes the importance weight
``"priority_weight"`` as ``PrioritizedSampler`` does, over the sampleable transitions. New
transitions get the largest priority given so far (1.0 before any).

Threads: every call that reads or changes the buffer holds its re-entrant ``_replay_lock``.
Checkpoints: ``state_dict``/``load_state_dict``, ``dumps(path)``/``loads(path)`` (JSON and
``.npy`` files, no pickle). ``storage="memmap"`` keeps the slot arrays as ``.npy`` memory maps in
``scratch_dir`` (a temporary directory, removed with the buffer, when None).
"""
import math
import numbers
import os
import shutil
import tempfile
import threading
import weakref

import numpy as np

from ... import _dtypes
from ... import random as _random
from ..._tensor import Tensor, wrap
from ...postprocs.multistep import windowed_discounted_sum
from ...random import Generator
from ...tensordict import TensorDict, unravel_key_to_tuple
from .._checkpoint import atomic_directory, load_state, plain_dtype, save_state
from .replay_buffers import ReplayBuffer, _check_batch_size, _locked
from .samplers import SumMinTree, as_index_array, empty_storage_error
from .storages import check_room, physical_memory

__all__ = ["FrameStackReplayBuffer"]

_STEP_KEYS = ("action", ("next", "reward"), ("next", "done"), ("next", "terminated"))
_FLAG_KEYS = ("done", "terminated", "truncated")
_UNKNOWN_TRAJ = np.iinfo(np.int64).min  # an open trajectory from a batch without trajectory ids
_KEYS = {"action": "action", "reward": ("next", "reward"), "done": ("next", "done"),
         "terminated": ("next", "terminated"), "truncated": ("next", "truncated")}
# links between frames, and each sampleable transition's window: its length m and the frame after it
_LINKS = {"stamp": np.int64, "prev": np.int64, "next": np.int64, "step": np.bool_, "final": np.bool_,
          "m": np.int32, "after": np.int64}


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"FrameStackReplayBuffer: {name} must be an int, got {type(value).__name__} ({value!r})")
    if value < 1:
        raise ValueError(f"FrameStackReplayBuffer: {name} must be >= 1, got {name}={value}")
    return int(value)


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"FrameStackReplayBuffer: {name} must be one of {list(choices)}, got {name}={value!r}")
    return value


def _check_rate(name, value, low=0.0):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < low:
        raise ValueError(f"FrameStackReplayBuffer: {name} must be a finite number >= {low}, got {name}={value!r}")
    return float(value)


def _name(key):
    """A key as the user wrote it: "pixels" rather than ("pixels",)."""
    return key[0] if len(key) == 1 else key


def _host(value, key):
    if not isinstance(value, Tensor):
        raise TypeError(f"FrameStackReplayBuffer.extend: entry {_name(key)!r} must be a Tensor, got "
                        f"{type(value).__name__}")
    return value.detach().cpu()._data


def _one_per_step(array, key, rows):
    """``array`` ([*rows] or [*rows, 1]) as [*rows]: one value per step."""
    if array.shape[:len(rows)] != rows or array.shape[len(rows):] not in ((), (1,)):
        raise ValueError(f"FrameStackReplayBuffer.extend: entry {_name(key)!r} must hold one value per step, shape "
                         f"{list(rows)} or {list(rows) + [1]}; got {list(array.shape)}")
    return array.reshape(rows)


class _Batch:
    """One ``extend``'s input as host arrays of shape [num_envs, T, ...], checked."""

    def __init__(self, td, frame_key, layout):
        if not isinstance(td, TensorDict):
            raise TypeError(f"FrameStackReplayBuffer.extend: expected a TensorDict, got {type(td).__name__}")
        if td.batch_dims not in (1, 2) or not td.numel():
            raise ValueError("FrameStackReplayBuffer.extend: expected a non-empty batch of shape [T] or [num_envs, T], "
                             f"got batch_size={list(td.batch_size)}")
        self.rows = (1,) * (2 - td.batch_dims) + tuple(td.batch_size)
        self.entries = {}
        for key in (frame_key,) + _STEP_KEYS + (("next", "truncated"), ("next",) + frame_key):
            value = td.get(key, None)
            if value is None and (key in _STEP_KEYS or key == frame_key):
                raise KeyError(f"FrameStackReplayBuffer.extend: the batch has no entry {_name(key)!r} (entries: "
                               f"{', '.join(sorted('/'.join(unravel_key_to_tuple(k)) for k in td.keys(True, True)))})")
            if value is not None:
                array = _host(value, key)
                self.entries[key] = array.reshape(self.rows + array.shape[td.batch_dims:])
        self._check_frames(frame_key, layout)
        self.frames = self.entries[frame_key]
        for key in _STEP_KEYS[1:] + (("next", "truncated"),):
            if key in self.entries:
                _one_per_step(self.entries[key], key, self.rows)
        self.done = self.entries[("next", "done")].reshape(self.rows).astype(bool)
        traj = td.get(("collector", "traj_ids"), None)
        self.traj = None if traj is None else _one_per_step(
            _host(traj, ("collector", "traj_ids")).reshape(self.rows + tuple(traj.shape[td.batch_dims:])),
            ("collector", "traj_ids"), self.rows)
        self.boundary = self.done.copy()  # where a trajectory ends
        if self.traj is not None:
            self.boundary[:, :-1] |= self.traj[:, 1:] != self.traj[:, :-1]
        self.next_frames = self.entries.get(("next",) + frame_key)
        if self.next_frames is None and self.boundary.any():
            raise KeyError(f"FrameStackReplayBuffer.extend: the batch has episodes that end but no entry "
                           f"{('next',) + frame_key!r}, their last observations")
        self._check_steps(layout)

    def _check_frames(self, frame_key, layout):
        for key in (frame_key, ("next",) + frame_key):
            frames = self.entries.get(key)
            if frames is None:
                continue
            if frames.dtype != np.uint8:
                raise TypeError(f"FrameStackReplayBuffer.extend: entry {_name(key)!r} must be uint8 frames, got dtype "
                                f"{frames.dtype}")
            frame = frames.shape[2:]
            expected = layout["frame"][0] if layout else frame
            if len(frame) not in (2, 3) or frame != expected:
                raise ValueError(f"FrameStackReplayBuffer.extend: entry {_name(key)!r} must hold one frame per step, "
                                 f"[H, W] or [C, H, W]{f' = {list(expected)}' if layout else ''}; got frames of "
                                 f"shape {list(frame)}")

    def _check_steps(self, layout):
        for key, (shape, dtype) in self.layout().items():
            if layout is None or key == "frame":
                continue
            if key not in layout:
                raise KeyError(f"FrameStackReplayBuffer.extend: the buffer stores no {_KEYS[key]!r} entry (its first "
                               "batch had none); give the same entries in every batch")
            if (shape, dtype) != layout[key]:
                raise ValueError(f"FrameStackReplayBuffer.extend: entry {_KEYS[key]!r} has per-step shape "
                                 f"{list(shape)} and dtype {dtype}; the buffer stores {list(layout[key][0])} "
                                 f"{layout[key][1]}")
        if layout is not None and "truncated" in layout and ("next", "truncated") not in self.entries:
            raise KeyError("FrameStackReplayBuffer.extend: the batch has no entry ('next', 'truncated'), which the "
                           "buffer stores")

    def stored(self):
        """{slot array name: [num_envs, T, ...] values} of the step data."""
        values = {"action": self.entries["action"], "reward": self.entries[("next", "reward")]}
        for flag in _FLAG_KEYS:
            if ("next", flag) in self.entries:
                values[flag] = self.entries[("next", flag)]
        return values

    def layout(self):
        """{slot array name: (per-slot shape, dtype)} of this batch's data."""
        layout = {name: (value.shape[2:], value.dtype) for name, value in self.stored().items()}
        layout["frame"] = (self.frames.shape[2:], np.dtype(np.uint8))
        return layout


class _Plan:
    """Where one batch's frames go: stamps of each step's observation and of the extra frames
    (the last observations of the trajectories that end, and of each row's open end)."""

    def __init__(self, batch, base, capacity, open_last, open_pending, open_traj, alive):
        E, T = batch.rows
        has_next = batch.next_frames is not None
        self.open = open_last >= 0
        self.cont = self.open.copy()  # whether row e continues env e's open trajectory
        if batch.traj is not None:
            self.cont &= (open_traj == _UNKNOWN_TRAJ) | (open_traj == batch.traj[:, 0])
        self.broken = self.open & ~self.cont
        self.extra = batch.boundary.copy()
        if has_next:
            self.extra[:, -1] = True
        # the first observation is the stored pending frame, where the ring holds it even after writing
        # every frame of the batch (so this batch never overwrites a frame it reuses)
        survives = open_pending >= base + E * T + int(self.extra.sum()) - capacity
        self.reuse = self.cont & alive(open_pending) & survives
        self.write_obs = np.ones((E, T), dtype=bool)
        self.write_obs[:, 0] = ~self.reuse
        counts = (self.write_obs.astype(np.int64) + self.extra).reshape(-1)
        first = (base + np.cumsum(counts) - counts).reshape(E, T)
        self.total = int(counts.sum())
        self.obs = np.where(self.write_obs, first, open_pending[:, None])
        self.extra_stamp = first + self.write_obs

    def obs_prev(self, batch, open_last):
        """The previous frame of each step's observation (-1 at a trajectory's start)."""
        prev = np.empty_like(self.obs)
        prev[:, 0] = np.where(self.cont, open_last, -1)
        prev[:, 1:] = np.where(batch.boundary[:, :-1], -1, self.obs[:, :-1])
        return prev

    def obs_next(self):
        """The next frame of each step's observation (-1 where not known yet)."""
        nxt = np.full_like(self.obs, -1)
        nxt[:, :-1] = self.obs[:, 1:]
        return np.where(self.extra, self.extra_stamp, nxt)


class _Slots:
    """The slot arrays (``capacity`` rows each), in memory or memory-mapped in a directory."""

    def __init__(self, capacity, layout, directory):
        self.capacity = capacity
        specs = dict(layout, **{name: ((), np.dtype(dt)) for name, dt in _LINKS.items()})
        reward_shape, reward_dtype = layout["reward"]
        specs["n_step_reward"] = (reward_shape, reward_dtype if reward_dtype.kind == "f" else
                                  np.dtype(_dtypes.get_default_dtype().np))
        nbytes = capacity * sum(int(np.prod(shape)) * dt.itemsize for shape, dt in specs.values())
        room = physical_memory() if directory is None else (shutil.disk_usage(directory).free, "free disk space")
        check_room(nbytes, f"FrameStackReplayBuffer({capacity}): the slot arrays", room)
        self.arrays = {name: self._array(name, shape, dt, directory) for name, (shape, dt) in specs.items()}
        self.arrays["stamp"][:] = -1
        self.layout = dict(layout)

    def _array(self, name, shape, dtype, directory):
        shape = (self.capacity,) + tuple(shape)
        if directory is None:
            return np.zeros(shape, dtype)
        mapped = np.lib.format.open_memmap(os.path.join(directory, f"{name}.npy"), mode="w+",
                                           dtype=plain_dtype(dtype), shape=shape)
        return np.asarray(mapped).view(dtype)

    def __getattr__(self, name):
        try:
            return self.__dict__["arrays"][name]
        except KeyError:
            raise AttributeError(name) from None


class FrameStackReplayBuffer:
    """A replay buffer of single frames that samples frame stacks with n-step returns (see the
    module docstring for what is stored and when a transition can be sampled).

    ``extend(td)`` takes collector batches ``[T]`` or ``[num_envs, T]`` with ``frame_key`` (one
    uint8 frame per step, ``[H, W]`` or ``[C, H, W]``), ``"action"``, ``("next", "reward")``,
    ``("next", "done")``, ``("next", "terminated")`` and optionally ``("next", "truncated")``,
    ``("next", frame_key)`` and ``("collector", "traj_ids")``; other entries are not stored.
    ``sample(batch_size)`` returns a ``[B]`` TensorDict: ``frame_key`` ``[B, frame_stack, *frame]``
    (frames before a trajectory's first padded with that frame, ``padding="same"``, or zeros,
    ``"constant"``), ``"action"``, ``("next", frame_key)`` (the stack at ``t + m``),
    ``("next", "reward")`` (the discounted n-step sum), ``("next", "original_reward")``, the done
    flags of step ``t + m - 1``, ``"gamma"``, ``"steps_to_next_obs"``, ``"nonterminal"``,
    ``"index"`` (the slots) and, with ``prioritized=True``, ``"priority_weight"``: the entries,
    dtypes and shapes ``MultiStep`` gives. For ``[C, H, W]`` frames, ``CatFrames(dim=-3)`` gives
    the stack as ``[C * frame_stack, H, W]``: ``reshape`` it so.
    """

    def __init__(self, capacity, frame_stack=4, n_steps=1, gamma=0.99, frame_key="pixels", storage="memory",
                 scratch_dir=None, batch_size=None, padding="same", *, prioritized=False, alpha=None, beta=None,
                 eps=1e-8, generator=None):
        self._replay_lock = threading.RLock()
        self.capacity = _check_positive_int("capacity", capacity)
        self.frame_stack = _check_positive_int("frame_stack", frame_stack)
        self.n_steps = _check_positive_int("n_steps", n_steps)
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not 0 < gamma <= 1:
            raise ValueError(f"FrameStackReplayBuffer: gamma must be in (0, 1], got gamma={gamma!r}")
        self.gamma = float(gamma)
        self.frame_key = unravel_key_to_tuple(frame_key)
        self.storage = _check_choice("storage", storage, ("memory", "memmap"))
        self.padding = _check_choice("padding", padding, ("same", "constant"))
        self.batch_size = None if batch_size is None else _check_batch_size(batch_size, "FrameStackReplayBuffer")
        self.prioritized = bool(prioritized)
        if self.prioritized and (alpha is None or beta is None):
            raise ValueError(f"FrameStackReplayBuffer: prioritized=True needs alpha and beta, got alpha={alpha!r}, "
                             f"beta={beta!r}")
        self.alpha = _check_rate("alpha", 1.0 if alpha is None else alpha)
        self.beta = _check_rate("beta", 0.0 if beta is None else beta)
        self.eps = _check_rate("eps", eps)
        self.scratch_dir = self._scratch(storage, scratch_dir)
        self.set_rng(generator)
        self._slots = None  # allocated at the first extend, when the shapes are known
        self._reset()

    # ---- set-up ---------------------------------------------------------------------------------
    def _scratch(self, storage, scratch_dir):
        if storage != "memmap":
            if scratch_dir is not None:
                raise ValueError(f"FrameStackReplayBuffer: scratch_dir={scratch_dir!r} needs storage='memmap', got "
                                 f"storage={storage!r}")
            return None
        if scratch_dir is None:
            directory = tempfile.mkdtemp(prefix="rlpipe-framestack-")
            self._finalizer = weakref.finalize(self, shutil.rmtree, directory, True)
            return directory
        directory = os.path.abspath(os.fspath(scratch_dir))
        if os.path.exists(os.path.join(directory, "frame.npy")):
            raise ValueError(f"FrameStackReplayBuffer: scratch_dir {directory!r} already holds a buffer's frames; "
                             "give another directory (loads() restores a dumped buffer)")
        os.makedirs(directory, exist_ok=True)
        return directory

    def _reset(self):
        self._write_count = 0
        self._open_last = np.zeros(0, np.int64)  # per env: the last step of its open trajectory, -1 for none
        self._open_pending = np.zeros(0, np.int64)  # ... the stored frame after that step, -1 for none
        self._open_traj = np.zeros(0, np.int64)  # ... its trajectory id
        self._ready = np.zeros(self.capacity, bool)
        self._count = 0  # sampleable transitions
        self._tree = SumMinTree(self.capacity) if self.prioritized else None  # priorities, 0 where not sampleable
        self._priority = np.ones(self.capacity) if self.prioritized else None
        self._top = None  # the largest priority given

    def set_rng(self, generator):
        """Draws samples from ``generator`` (an ``rlpipe.Generator``; None: rlpipe's global one)."""
        if generator is not None and not isinstance(generator, Generator):
            raise TypeError(f"generator must be an rlpipe.Generator or None, got {type(generator).__name__}")
        self._rng = generator

    def __len__(self):
        return self._count

    @property
    def write_count(self):
        """How many frames were stored so far (the next frame's stamp)."""
        return self._write_count

    @property
    def nbytes(self):
        """Bytes held for the stored data: the slot arrays, the sampling tree and the flags."""
        slots = 0 if self._slots is None else sum(a.nbytes for a in self._slots.arrays.values())
        extra = self._ready.nbytes
        if self._tree is not None:
            extra += self._tree._sum.nbytes + self._tree._min.nbytes + self._priority.nbytes
        return slots + extra

    def __repr__(self):
        return (f"FrameStackReplayBuffer(capacity={self.capacity}, frame_stack={self.frame_stack}, "
                f"n_steps={self.n_steps}, gamma={self.gamma}, len={len(self)}, storage={self.storage!r})")

    # ---- links ----------------------------------------------------------------------------------
    def _alive(self, stamps):
        """Whether each frame stamp is still stored (not -1, its slot not written again)."""
        stamps = np.asarray(stamps, dtype=np.int64)
        return (stamps >= 0) & (self._slots.stamp[stamps % self.capacity] == stamps)

    def _follow(self, stamps, link):
        """The frames ``link`` ("prev" or "next") of each stamp points to; -1 where there is none
        or the stamp is dead."""
        alive = self._alive(stamps)
        return np.where(alive, self._slots.arrays[link][stamps % self.capacity], -1)

    def _stack(self, stamps):
        """[B, frame_stack] stamps of each stamp's stack, oldest first; a position before the
        trajectory's first frame holds that first frame again. Where a frame on the way was
        overwritten the links read are stale: ``_stored_stacks`` tells."""
        k = self.frame_stack
        index = np.empty((len(stamps), k), np.int64)
        index[:, -1] = current = stamps
        prev = self._slots.prev
        for j in range(k - 2, -1, -1):
            back = prev[current % self.capacity]
            current = np.where(back < 0, current, back)
            index[:, j] = current
        return index

    def _stored_stacks(self, index):
        """Whether every frame of each stack (rows of ``_stack``) is still stored."""
        return self._alive(index).all(axis=1)

    def _windows(self, stamps):
        """Each step's n-step window: (complete [B] bool, m [B], [B, n_steps] stamps of its steps,
        -1 beyond m, the stamp of the frame at t + m). A window stops after n steps or at the
        last step of its trajectory; it is complete when all of it is stored."""
        B, n = len(stamps), self.n_steps
        slots = self._slots
        complete = self._alive(stamps) & slots.step[stamps % self.capacity]
        active = complete.copy()
        m = np.zeros(B, np.int64)
        steps = np.full((B, n), -1, np.int64)
        after = np.full(B, -1, np.int64)
        current = stamps
        for k in range(n):
            steps[:, k] = np.where(active, current, -1)
            following = np.where(active, slots.next[current % self.capacity], -1)
            complete &= ~active | (following >= 0)
            active &= following >= 0
            at = following % self.capacity
            ends = active & ((k + 1 == n) | slots.final[at])
            complete &= ~active | ends | slots.step[at]  # the frame after an open trajectory's end: wait
            active &= slots.step[at]
            m[ends] = k + 1
            after[ends] = following[ends]
            active &= ~ends
            current = following
        return complete, m, steps, after

    # ---- writing --------------------------------------------------------------------------------
    @_locked
    def extend(self, td):
        """Stores a collector batch (see the class docstring); raises before changing anything
        when the batch is bad."""
        batch = _Batch(td, self.frame_key, None if self._slots is None else self._slots.layout)
        E = batch.rows[0]
        last, pending, traj = (self._env_state(a, E) for a in (self._open_last, self._open_pending, self._open_traj))
        alive = (lambda s: np.zeros(s.shape, bool)) if self._slots is None else self._alive
        plan = _Plan(batch, self._write_count, self.capacity, last, pending, traj, alive)
        if plan.total > self.capacity:
            raise ValueError(f"FrameStackReplayBuffer.extend: the batch stores {plan.total} frames, more than the "
                             f"capacity {self.capacity}; extend in smaller batches")
        if self._slots is None:
            self._slots = _Slots(self.capacity, batch.layout(), self.scratch_dir)
        victims = self._stacks_through(np.arange(self._write_count, self._write_count + plan.total) % self.capacity)
        self._write_frames(batch, plan, last)
        self._write_steps(batch, plan)
        self._join_open_ends(plan, last, pending)
        self._update_envs(batch, plan, E)
        written = np.concatenate([plan.obs[plan.write_obs], plan.extra_stamp[plan.extra]])
        rewound = np.concatenate([self._back(last[plan.open], self.n_steps), plan.obs.reshape(-1)])
        self._refresh(victims, written, rewound)

    def _env_state(self, array, E):
        grown = np.full(max(E, len(array)), -1, np.int64)
        grown[:len(array)] = array
        return grown[:E]

    def _stacks_through(self, slots):
        """The stamps of the frames whose stacks reach the frames now in ``slots`` (which are
        about to be overwritten): up to ``frame_stack - 1`` steps after them."""
        found = [np.zeros(0, np.int64)]
        current = self._slots.stamp[slots] if self._slots is not None else np.zeros(0, np.int64)
        for _ in range(self.frame_stack - 1):
            current = self._follow(current[current >= 0], "next")
            found.append(current[current >= 0])
        return np.concatenate(found)

    def _back(self, stamps, count):
        """``stamps`` and up to ``count - 1`` frames before each (alive ones)."""
        found, current = [stamps[self._alive(stamps)]], stamps
        for _ in range(count - 1):
            current = self._follow(current, "prev")
            found.append(current[self._alive(current)])
        return np.concatenate(found)

    def _write_frames(self, batch, plan, open_last):
        """Writes the batch's frames with their stamps and previous frames."""
        slots, C = self._slots, self.capacity
        obs, extra = plan.obs[plan.write_obs], plan.extra_stamp[plan.extra]
        slots.frame[obs % C] = batch.frames[plan.write_obs]
        slots.stamp[obs % C] = obs
        slots.prev[obs % C] = plan.obs_prev(batch, open_last)[plan.write_obs]
        if extra.size:
            slots.frame[extra % C] = batch.next_frames[plan.extra]
            slots.stamp[extra % C] = extra
            slots.prev[extra % C] = plan.obs[plan.extra]
            slots.next[extra % C] = -1
            slots.step[extra % C] = False
            slots.final[extra % C] = batch.boundary[plan.extra]

    def _write_steps(self, batch, plan):
        """Writes each step's data and next frame into its observation's slot."""
        slots = self._slots
        steps = plan.obs.reshape(-1) % self.capacity
        slots.next[steps] = plan.obs_next().reshape(-1)
        slots.step[steps] = True
        slots.final[steps] = False
        for name, values in batch.stored().items():
            slots.arrays[name][steps] = values.reshape((-1,) + values.shape[2:])
        if self._priority is not None:
            self._priority[steps] = 1.0 if self._top is None else self._top

    def _join_open_ends(self, plan, open_last, open_pending):
        """Links each continued trajectory to this batch's first frame (when its pending frame was
        not reused), and ends the trajectories a new id broke off at their pending frame."""
        slots, C = self._slots, self.capacity
        linked = plan.cont & ~plan.reuse & self._alive(open_last)
        slots.next[open_last[linked] % C] = plan.obs[linked, 0]
        ended = plan.broken & self._alive(open_pending)
        slots.final[open_pending[ended] % C] = True

    def _update_envs(self, batch, plan, E):
        size = max(E, len(self._open_last))
        last, pending, traj = (self._env_state(a, size) for a in (self._open_last, self._open_pending,
                                                                   self._open_traj))
        ended = batch.boundary[:, -1]
        last[:E] = np.where(ended, -1, plan.obs[:, -1])
        pending[:E] = np.where(ended | (batch.next_frames is None), -1, plan.extra_stamp[:, -1])
        traj[:E] = _UNKNOWN_TRAJ if batch.traj is None else batch.traj[:, -1]
        self._open_last, self._open_pending, self._open_traj = last, pending, traj
        self._write_count += plan.total

    def _refresh(self, victims, written, candidates):
        """Recomputes which transitions are sampleable: none of the frames just written or of
        ``victims`` (stacks through overwritten frames) until checked; then ``candidates``,
        keeping the windows of those that are."""
        C = self.capacity
        self._set_ready(np.concatenate([victims[self._alive(victims)], written]) % C, None)
        candidates = np.unique(candidates[self._alive(candidates)])
        complete, m, steps, after = self._windows(candidates)
        ready = complete & self._stored_stacks(self._stack(candidates))
        self._keep_windows(candidates[ready] % C, m[ready], steps[ready], after[ready])
        self._set_ready(candidates % C, ready)

    def _keep_windows(self, slots, m, steps, after):
        """Stores the windows of sampleable transitions: m, the frame after, the n-step reward
        (``MultiStep``'s sum, the same terms in the same order)."""
        arrays = self._slots.arrays
        arrays["m"][slots], arrays["after"][slots] = m, after
        reward = arrays["reward"]
        rewards = np.where(steps >= 0, reward[steps % self.capacity].reshape(steps.shape), reward.dtype.type(0))
        lengths = np.ones(steps.shape, np.int64)
        lengths[:, 0] = m
        summed = windowed_discounted_sum(wrap(rewards), wrap(lengths), self.gamma, self.n_steps)._data[:, 0]
        arrays["n_step_reward"][slots] = summed.reshape((-1,) + reward.shape[1:])

    def _set_ready(self, slots, ready):
        slots, first = np.unique(slots, return_index=True)
        ready = np.zeros(slots.shape, bool) if ready is None else ready[first]
        self._count += int(np.count_nonzero(ready)) - int(np.count_nonzero(self._ready[slots]))
        self._ready[slots] = ready
        if self._tree is not None:
            self._tree.update(slots, np.where(ready, self._mass(slots), 0.0), unique=True)

    def _mass(self, slots):
        return (self._priority[slots] + self.eps) ** self.alpha

    # ---- reading --------------------------------------------------------------------------------
    @_locked
    def sample(self, batch_size=None):
        """``batch_size`` transitions (the constructor's when None), drawn uniformly or by priority
        among the sampleable ones."""
        if batch_size is None:
            batch_size = self.batch_size
            if batch_size is None:
                raise RuntimeError("FrameStackReplayBuffer.sample: batch_size not specified; give it to sample() or "
                                   "to the constructor")
        batch_size = _check_batch_size(batch_size, "FrameStackReplayBuffer.sample")
        if not self._count:
            raise empty_storage_error("FrameStackReplayBuffer.sample: no transition is sampleable yet")
        slots = self._draw(batch_size)
        data = self._transitions(slots)
        if self._priority is not None:
            weight = (self._tree.leaves(slots) / self._tree.min) ** -self.beta
            data.set("priority_weight", wrap(weight.astype(np.float32)))
        return data

    def _draw(self, batch_size):
        """Slots of sampleable transitions: by priority from the tree, else uniformly (drawn among
        the slots written and drawn again where not sampleable; a few, as most are)."""
        if self._tree is not None:
            mass = _random.rand(batch_size, dtype=_dtypes.float64, generator=self._rng)._data * self._tree.total
            return self._sampleable_near(np.minimum(self._tree.find(mass), self.capacity - 1))
        filled = min(self._write_count, self.capacity)
        slots = np.empty(batch_size, np.int64)
        todo = np.arange(batch_size)
        for _ in range(8):
            slots[todo] = _random.randint(0, filled, (len(todo),), generator=self._rng)._data
            todo = todo[~self._ready[slots[todo]]]
            if not todo.size:
                return slots
        ready = np.flatnonzero(self._ready)  # few are sampleable: draw among them
        slots[todo] = ready[_random.randint(0, len(ready), (len(todo),), generator=self._rng)._data]
        return slots

    def _sampleable_near(self, slots):
        """``slots``, where rounding in the tree's search stepped onto a slot of weight 0 moved to
        the nearest sampleable slot before it (or after it)."""
        stray = ~self._ready[slots]
        if stray.any():
            ready = np.flatnonzero(self._ready)
            at = np.searchsorted(ready, slots[stray])
            slots[stray] = ready[np.maximum(at - 1, 0)]
        return slots

    @_locked
    def sampleable_indices(self):
        """The slots of every sampleable transition (an int64 Tensor), in slot order."""
        return wrap(np.flatnonzero(self._ready).astype(np.int64))

    @_locked
    def __getitem__(self, index):
        """The transitions at slots ``index`` (sampleable ones), as ``sample`` returns them."""
        slots = as_index_array(index, "FrameStackReplayBuffer[index]")
        bad = (slots < 0) | (slots >= self.capacity)
        bad[~bad] = ~self._ready[slots[~bad]]
        if bad.any():
            raise ValueError(f"FrameStackReplayBuffer[index]: slot {slots[bad][0]} holds no sampleable transition "
                             f"(sampleable: {len(self)} of {self.capacity} slots; see sampleable_indices())")
        return self._transitions(slots)

    def _transitions(self, slots):
        arrays, C = self._slots.arrays, self.capacity
        stamps, after = arrays["stamp"][slots], arrays["after"][slots]
        last = arrays["prev"][after % C] % C  # the window's last step
        both = self._frames(np.concatenate([stamps, after]))
        B = len(slots)
        nxt = {"reward": wrap(arrays["n_step_reward"][slots]), "original_reward": wrap(arrays["reward"][slots]),
               **{flag: wrap(arrays[flag][last]) for flag in _FLAG_KEYS if flag in arrays}}
        m = arrays["m"][slots].astype(np.int64)
        out = TensorDict({"action": wrap(arrays["action"][slots]), "next": nxt,
                          "gamma": wrap(np.power(self.gamma, m.astype(np.float64)).astype(np.float32)),
                          "steps_to_next_obs": wrap(m), "index": wrap(slots.astype(np.int64)),
                          "nonterminal": wrap(~arrays["terminated"][last].reshape(-1).astype(bool))}, batch_size=[B])
        out.set(self.frame_key, both[:B])
        out.set(("next",) + self.frame_key, both[B:])
        return out

    def _frames(self, stamps):
        """The stacks of frames ending at ``stamps``, [B, frame_stack, *frame]."""
        index = self._stack(stamps)
        frames = self._slots.frame[index % self.capacity]
        if self.padding == "constant":
            frames[:, :-1][index[:, :-1] == index[:, 1:]] = 0  # a repeated frame: before the trajectory's first
        return wrap(frames)

    # ---- priorities -----------------------------------------------------------------------------
    @_locked
    def update_priority(self, index, priority):
        """Sets the priorities of the transitions at slots ``index`` (ignored without
        ``prioritized=True``, as torchrl's uniform samplers do)."""
        slots = as_index_array(index, "update_priority")
        if self._slots is None or ((slots < 0) | (slots >= self.capacity)).any() or \
                not self._slots.step[slots].all():
            raise ValueError(f"update_priority: index must be slots that hold transitions (in [0, {self.capacity})), "
                             f"got {slots.tolist()[:8]}")
        if isinstance(priority, Tensor):
            priority = priority.detach().cpu()._data
        try:
            priority = np.broadcast_to(np.asarray(priority, dtype=np.float64).reshape(-1), slots.shape)
        except (TypeError, ValueError):
            raise ValueError(f"update_priority: expected one priority per index ({slots.size}) or a single one, got "
                             f"{priority!r}") from None
        if not (np.isfinite(priority) & (priority >= 0) & (priority + self.eps > 0)).all():
            raise ValueError(f"update_priority: priorities must be finite and >= 0 (> 0 when eps=0), got "
                             f"{priority.tolist()[:8]}")
        if self._tree is None or not slots.size:
            return
        slots, last = np.unique(slots[::-1], return_index=True)  # for a repeated index the last priority wins
        self._priority[slots] = priority[::-1][last]
        self._top = max(self._top or 0.0, float(priority.max()))
        self._set_ready(slots, self._ready[slots])

    # ---- checkpoints ----------------------------------------------------------------------------
    def _config(self):
        return {"capacity": self.capacity, "frame_stack": self.frame_stack, "n_steps": self.n_steps,
                "gamma": self.gamma, "frame_key": list(self.frame_key), "padding": self.padding,
                "prioritized": self.prioritized}

    def _state(self, copy):
        arrays = None if self._slots is None else {
            name: (a.copy() if copy else a) for name, a in self._slots.arrays.items()}
        return {"config": self._config(), "write_count": self._write_count, "arrays": arrays,
                "open": {"last": self._open_last.copy(), "pending": self._open_pending.copy(),
                         "traj": self._open_traj.copy()},
                "ready": self._ready.copy(), "priority": None if self._priority is None else self._priority.copy(),
                "top": self._top, "alpha": self.alpha, "beta": self.beta, "eps": self.eps,
                "batch_size": self.batch_size}

    @_locked
    def state_dict(self):
        """The buffer's contents and state, as plain numbers and NumPy arrays (copies)."""
        return self._state(copy=True)

    @_locked
    def load_state_dict(self, state):
        """Restores a ``state_dict()`` of a buffer with the same settings; checks it first."""
        apply = self._load_plan(state)
        apply()

    def _load_plan(self, state):
        try:
            config = state["config"]
            for name, value in self._config().items():
                if config[name] != value:
                    raise ValueError(f"{name}={config[name]!r}, this buffer has {name}={value!r}")
            arrays, ready, opened = state["arrays"], np.asarray(state["ready"], bool), state["open"]
            if ready.shape != (self.capacity,):
                raise ValueError(f"ready has shape {list(ready.shape)}, expected [{self.capacity}]")
            layout = None if arrays is None else self._layout_of(arrays)
            priority = None if state["priority"] is None else np.array(state["priority"], np.float64)
            if (priority is None) != (self._priority is None) or (priority is not None and (
                    priority.shape != (self.capacity,) or not np.isfinite(priority).all() or (priority < 0).any())):
                raise ValueError("bad priorities")
            envs = [np.array(opened[k], np.int64).reshape(-1) for k in ("last", "pending", "traj")]
            if len({len(e) for e in envs}) != 1:
                raise ValueError("the open-trajectory arrays differ in length")
            write_count = int(state["write_count"])
            numbers_ = [_check_rate(k, state[k]) for k in ("alpha", "beta", "eps")]
            top = None if state["top"] is None else _check_rate("top", state["top"])
            batch_size = state["batch_size"]
            batch_size = None if batch_size is None else _check_batch_size(batch_size, "load_state_dict")
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ValueError(f"FrameStackReplayBuffer.load_state_dict: bad state ({e})") from None

        def apply():
            if layout is not None:
                if self._slots is None or self._slots.layout != layout:
                    self._slots = _Slots(self.capacity, layout, self.scratch_dir)
                for name, array in arrays.items():
                    self._slots.arrays[name][...] = array
            self._write_count, (self._open_last, self._open_pending, self._open_traj) = write_count, envs
            self._ready, self._priority, self._top = ready.copy(), priority, top
            self._count = int(np.count_nonzero(ready))
            self.alpha, self.beta, self.eps = numbers_
            self.batch_size = batch_size
            if self._tree is not None:
                self._tree = SumMinTree(self.capacity)
                self._tree.load(np.where(ready, self._mass(np.arange(self.capacity)), 0.0))
        return apply

    def _layout_of(self, arrays):
        """The slot layout of saved slot arrays, checked against this buffer's capacity."""
        if not set(_LINKS) | {"frame", "action", "reward", "done", "terminated", "n_step_reward"} <= set(arrays):
            raise ValueError(f"the slot arrays are {sorted(arrays)}")
        layout = {}
        for name, array in arrays.items():
            array = np.asarray(array)
            if array.shape[:1] != (self.capacity,):
                raise ValueError(f"slot array {name!r} has shape {list(array.shape)}, expected [{self.capacity}, ...]")
            if name == "n_step_reward":
                continue
            if name in _LINKS:
                if array.dtype != np.dtype(_LINKS[name]) or array.ndim != 1:
                    raise ValueError(f"slot array {name!r} is {array.dtype}{list(array.shape)}")
            else:
                layout[name] = (array.shape[1:], array.dtype)
        if layout["frame"][1] != np.uint8 or len(layout["frame"][0]) not in (2, 3):
            raise ValueError(f"frames are {layout['frame'][1]}{list(layout['frame'][0])}")
        return layout

    @_locked
    def dumps(self, path):
        """Saves the buffer to the directory ``path`` (JSON and ``.npy`` files, written beside it
        and swapped in)."""
        target = os.path.abspath(os.fspath(path))
        if self.scratch_dir is not None and os.path.commonpath([self.scratch_dir, target]) == target:
            raise ValueError(f"dumps: {target!r} holds the buffer's scratch_dir {self.scratch_dir!r}; replacing it "
                             "would delete the live frames. Dump to another directory")
        with atomic_directory(target) as tmp:
            save_state(tmp, self._state(copy=False))

    @_locked
    def loads(self, path):
        """Restores what ``dumps`` wrote."""
        self.load_state_dict(load_state(path, mmap_mode="r"))

    save = dumps
    load = loads

    # the lock is not copied or pickled: a copy gets its own, as a ReplayBuffer's
    __getstate__ = ReplayBuffer.__getstate__
    __setstate__ = ReplayBuffer.__setstate__
