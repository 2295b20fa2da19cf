"""``EnvBase``: torchrl's environment API over TensorDicts, on an array-level "frame" protocol.

Environments (and the transforms wrapping them) exchange *frames*: plain dicts mapping key
tuples (``("observation",)``, ``("pixels",)``, ``("step_count",)``) to host arrays whose leading
dims are the env's ``batch_size``. TensorDicts are built only at the API boundary (``reset``,
``step``, ``rollout``) and by the collector once per batch: it keeps each step's frame arrays as
they come and stacks them per key when the batch is complete, so the per-step hot path never
builds a TensorDict. Gymnasium hands out NumPy arrays, so frames are NumPy on the host; they
become rlpipe tensors (on the env's ``device``) at the boundary.

A subclass implements:

- ``_reset_frame(seed=None) -> dict``: observations after a reset of every env;
- ``_step_frame(action) -> (next_obs: dict, reward, terminated, truncated)``: one step of every env
  with ``action`` (a host array in the action spec's format, batch-leading: one-hot for a OneHot
  spec; the env converts it to what the simulator takes); reward float32 and the flags bool, each shaped
  ``batch_size + (1,)``; ``next_obs`` holds the *true* last observation of an episode that ends;
- ``_continue_frame(next_obs, done) -> dict``: the observations to act on next: ``next_obs``
  where ``done`` (shaped ``batch_size + (1,)``) is False, a fresh reset where it is True (a
  vectorized env returns the observation its autoreset already produced);
- the specs: ``action_spec``, ``observation_spec`` (a ``Composite`` keyed like the frame),
  ``reward_spec``, ``done_spec`` (``Composite`` with done/terminated/truncated).

Skipped envs. A batched simulator that cannot reset only some of its envs (a Gymnasium vector env
whose autoreset mode is NEXT_STEP and that has no partial reset, as Gymnasium's native
``CartPoleVectorEnv``) resets an env that ended during the *following* step, ignoring its action.
Such an env sets ``_skips_rows = True``: its ``_continue_frame`` leaves the observations of the
done envs as they were, and after each ``_step_frame`` its ``_skipped_rows`` is None, or a bool
array of shape ``batch_size`` marking the envs whose step was that reset rather than a
transition: their next observation is the first of a new episode, and the rest of their row
(reward 0, never done) is not data. The collector drops those rows, so the reset step is never
delivered as a transition, and steps on until every env has its frames. An env that can also
reset only some envs (envpool, Gymnasium's Sync/AsyncVectorEnv in NEXT_STEP mode) skips too,
saving a reset call per step; ``_set_exact_resets(True)`` (what ``rollout`` asks, since it cannot
drop rows) makes it reset done envs at once instead, and answers whether the env can.
"""
import numpy as np

from .._creation import as_tensor
from .._device import resolve
from .._tensor import Size, host_array
from ..tensordict import TensorDict, unravel_key_to_tuple

__all__ = ["EnvBase", "frame_to_tensordict", "DONE_KEYS"]

DONE_KEYS = ("done", "terminated", "truncated")


def frame_to_tensordict(frame, batch_size, device=None, td=None, prefix=()):
    """Writes a frame's arrays into ``td`` (a new TensorDict if None) under ``prefix``."""
    td = TensorDict(batch_size=batch_size, device=device) if td is None else td
    for key, value in frame.items():
        td.set(prefix + unravel_key_to_tuple(key), as_tensor(value, device=device))
    return td


class EnvBase:
    """torchrl-style environment: ``reset()``, ``step(td)``, ``rand_step()``, ``rollout()``,
    ``set_seed()``, and specs. Subclasses implement the frame protocol (module docstring)."""

    batch_size = Size(())
    device = None
    _skips_rows = False   # see "Skipped envs" in the module docstring
    _skipped_rows = None

    def __init__(self, *, device=None, batch_size=None):
        self.device = None if device is None else resolve(device)
        self.batch_size = Size(()) if batch_size is None else Size(batch_size)
        self._is_closed = False

    # ---- the frame protocol (subclasses) ---------------------------------------------------------
    def _reset_frame(self, seed=None):
        raise NotImplementedError

    def _step_frame(self, action):
        raise NotImplementedError

    def _continue_frame(self, next_obs, done):
        raise NotImplementedError

    # ---- TensorDict API ---------------------------------------------------------------------------
    def _done_entries(self, terminated, truncated):
        return {("done",): terminated | truncated, ("terminated",): terminated, ("truncated",): truncated}

    def _root(self, frame):
        """A root TensorDict from observations: done/terminated/truncated are False at the root,
        since an episode that ended has been reset."""
        frame = dict(frame)
        flags = np.zeros(tuple(self.batch_size) + (1,), dtype=bool)
        frame.update(self._done_entries(flags, flags))
        return frame_to_tensordict(frame, self.batch_size, self.device)

    def reset(self, tensordict=None, seed=None):
        """A TensorDict with the first observations and done/terminated/truncated all False."""
        out = self._root(self._reset_frame(seed))
        if tensordict is not None:
            tensordict.update(out)
            return tensordict
        return out

    def _action_array(self, tensordict):
        """The action as a host array in the action spec's format (one-hot stays one-hot)."""
        return tensordict["action"].detach().cpu().numpy()

    def step(self, tensordict):
        """Steps with ``tensordict["action"]``; writes ``("next", ...)``: observations, reward, done,
        terminated and truncated. Returns the same TensorDict."""
        next_obs, reward, terminated, truncated = self._step_frame(self._action_array(tensordict))
        frame = dict(next_obs)
        frame[("reward",)] = reward
        frame.update(self._done_entries(terminated, truncated))
        tensordict.set("next", frame_to_tensordict(frame, self.batch_size, self.device))
        return tensordict

    def rand_step(self, tensordict=None):
        tensordict = self.reset() if tensordict is None else tensordict
        tensordict.set("action", self.action_spec.rand())
        return self.step(tensordict)

    def rand_action(self, tensordict=None):
        tensordict = TensorDict(batch_size=self.batch_size, device=self.device) if tensordict is None else tensordict
        tensordict.set("action", self.action_spec.rand())
        return tensordict

    def rollout(self, max_steps, policy=None, callback=None, *, auto_reset=True, auto_cast_to_device=False,
                break_when_any_done=None, break_when_all_done=None, return_contiguous=True, tensordict=None,
                set_truncated=False):
        """Up to ``max_steps`` steps (``policy(td)``, random actions without one), stacked along a new
        last batch dim named ``"time"``, as torchrl's ``rollout``. ``break_when_any_done`` (the default unless
        ``break_when_all_done`` is set) stops after the step where any env is done; otherwise done envs
        are reset and continue. ``callback(env, td)`` runs on the root of each following step (not
        after the last). ``auto_reset=False`` starts from ``tensordict`` (required then). ``set_truncated``
        marks the last step truncated (and done).
        ``auto_cast_to_device`` is accepted: rlpipe's policy and env share the env's device.
        ``return_contiguous`` is accepted (rollouts are always stacked)."""
        from rlpipe.primitives import stack
        from rlpipe.autograd.grad_mode import no_grad
        if break_when_any_done is None:
            break_when_any_done = not break_when_all_done
        if break_when_all_done and break_when_any_done:
            raise TypeError("Cannot have both break_when_all_done and break_when_any_done True at the same time.")
        if auto_reset:
            td = self.reset(tensordict)
        elif tensordict is None:
            raise RuntimeError("tensordict must be provided when auto_reset is False")
        else:
            td = tensordict
        steps = []
        exact = self._set_exact_resets(True)  # reset done envs at once: a rollout cannot drop a skipped step
        try:
            with no_grad():
                for i in range(max_steps):
                    td = policy(td) if policy is not None else self.rand_action(td)
                    td = self.step(td)
                    steps.append(td)
                    if i == max_steps - 1:
                        break
                    done = td[("next", "done")]
                    if break_when_any_done and bool(done.any()):
                        break
                    if break_when_all_done and bool(done.all()):
                        break
                    if not exact and bool(done.any()):
                        raise NotImplementedError(
                            f"{self!r}.rollout: this env resets its done envs during the next step (a NEXT_STEP "
                            "autoreset without partial reset), which a rollout cannot drop; stop at the first done "
                            "(break_when_any_done=True) or collect with SyncDataCollector, which drops the reset steps")
                    td = self._carry_over(td, done)
                    if callback is not None:  # as torchrl: on the next step's root, not after the last step
                        callback(self, td)
        finally:
            self._set_exact_resets(False)
        out = stack(steps, len(self.batch_size)).refine_names(..., "time")  # torchrl names the stacked dim
        if set_truncated:
            last = (slice(None),) * len(self.batch_size) + (-1,)  # the last step along the time dim
            for key in ("truncated", "done"):
                flags = out[("next", key)]
                flags[last] = True
        return out

    def _carry_over(self, td, done):
        """The root TensorDict of the following step: the "next" entries, with done envs reset."""
        next_td = td["next"]
        next_obs = {unravel_key_to_tuple(k): host_array(next_td[k]) for k in self.observation_spec.keys(True, True)}
        return self._root(self._continue_frame(next_obs, host_array(done)))  # an env on a GPU: copied to the host

    def set_seed(self, seed, static_seed=False):
        """Seeds the environment(s); returns the seed for a next environment: ``seed`` itself with
        ``static_seed=True``, else ``seed`` plus the number of envs (torchrl derives it from its own
        random generator instead)."""
        self._reset_frame(seed)
        return seed if static_seed else seed + max(int(np.prod(tuple(self.batch_size))), 1)

    def _set_exact_resets(self, exact):
        """Whether ``_continue_frame`` resets done envs at once while ``exact`` (see "Skipped
        envs"): an env that never skips always does."""
        return True

    def close(self):
        self._is_closed = True

    def __repr__(self):
        return f"{type(self).__name__}(batch_size={list(self.batch_size)}, device={self.device})"

    # full specs, as torchrl names them
    @property
    def full_observation_spec(self):
        return self.observation_spec

    @property
    def full_done_spec(self):
        return self.done_spec
