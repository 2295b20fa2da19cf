"""``EnvBase``: torchrl's environment API over TensorDicts, built on the env step protocol.

Subclasses implement the array-level frame methods (``_reset_frame``, ``_step_frame``,
``_continue_frame``) and the specs; ``reset``, ``step``, ``rand_step`` and ``rollout`` turn frames
into TensorDicts at this boundary. What a frame is, who resets, partial resets, skipped rows of
vector envs and what the collector calls: ``step_protocol.py``.

The spec surface is torchrl 0.14's (``spec_surface`` below: ``input_spec``/``output_spec``, the
``full_*`` specs, their ``*_unbatched`` forms, the key lists, ``fake_tensordict``), with one
restriction of the step protocol: an env has one action, under ``"action"``, and one reward, under
``"reward"``; setting a spec with other keys is refused.
"""
import numpy as np

from .._device import resolve
from .._tensor import Size
from ..tensordict import TensorDict
from .policy_states import carry_into_root, only_common_keys, policy_next_entries
from .spec_surface import SpecSurface
from .step_protocol import (DONE_KEYS, carry_over, frame_to_tensordict, missing_action_error, next_tensordict,
                            root_tensordict)

__all__ = ["EnvBase", "frame_to_tensordict", "DONE_KEYS"]


class EnvBase(SpecSurface):
    """torchrl-style environment: ``reset()``, ``step(td)``, ``rand_step()``, ``rollout()``,
    ``set_seed()``, and specs (``SpecSurface``). Subclasses implement the frame methods
    (``step_protocol.py``) and set ``action_spec``, ``observation_spec``, ``reward_spec`` and
    ``done_spec``."""

    batch_size = Size(())
    device = None
    _skips_rows = False   # see "Skipped rows" in step_protocol.py
    _skipped_rows = None

    def __init__(self, *, device=None, batch_size=None):
        self.device = None if device is None else resolve(device)
        self.batch_size = Size(()) if batch_size is None else Size(batch_size)
        self._is_closed = False

    # ---- the frame methods (subclasses; step_protocol.py) ----------------------------------------
    def _reset_frame(self, seed=None):
        raise NotImplementedError

    def _step_frame(self, action):
        raise NotImplementedError

    def _continue_frame(self, next_obs, done):
        raise NotImplementedError

    # ---- TensorDict API ---------------------------------------------------------------------------
    def reset(self, tensordict=None, seed=None):
        """A TensorDict with the first observations and done/terminated/truncated all False."""
        out = root_tensordict(self._reset_frame(seed), self.batch_size, self.device)
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
        tensordict.set("next", next_tensordict(next_obs, reward, terminated, truncated, self.batch_size, self.device))
        return tensordict

    def rand_step(self, tensordict=None):
        """A step with a random action. Without ``tensordict`` the env is reset first (torchrl steps
        from where the env is, which fails on a fresh Gymnasium env)."""
        tensordict = self.reset() if tensordict is None else tensordict
        tensordict.set("action", self.action_spec.rand())
        return self.step(tensordict)

    def rand_action(self, tensordict=None):
        """``tensordict`` (a new one without it) with a random ``"action"`` from ``action_spec``."""
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
                    td = self.rand_action(td) if policy is None else self._policy_step(policy, td)
                    from_policy = policy_next_entries(td, self)  # its ("next", k): a recurrent state
                    td = self.step(td)
                    for key, value in from_policy.items():  # torchrl's step keeps them (and a primer's carry yields)
                        td.set(("next", *key), value)
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
                    td = carry_into_root(carry_over(self, td, done), from_policy, done, len(self.batch_size))
                    if callback is not None:  # as torchrl: on the next step's root, not after the last step
                        callback(self, td)
        finally:
            self._set_exact_resets(False)
        # a policy's state the first step did not start from (no primer): torchrl's stack keeps only ("next", k)
        out = stack(only_common_keys(steps), len(self.batch_size)).refine_names(..., "time")  # torchrl's dim name
        if set_truncated:
            last = (slice(None),) * len(self.batch_size) + (-1,)  # the last step along the time dim
            for key in ("truncated", "done"):
                flags = out[("next", key)]
                flags[last] = True
        return out

    def _policy_step(self, policy, td):
        """``policy(td)``, which must write ``"action"`` (a KeyError naming the policy otherwise)."""
        given = list(td.keys())
        out = policy(td)
        if "action" not in out.keys():
            raise missing_action_error(policy, out, given)
        return out

    def set_seed(self, seed, static_seed=False):
        """Seeds the environment(s); returns the seed for a next environment: ``seed`` itself with
        ``static_seed=True``, else ``seed`` plus the number of envs (torchrl derives it from its own
        random generator instead)."""
        self._reset_frame(seed)
        return seed if static_seed else seed + max(int(np.prod(tuple(self.batch_size))), 1)

    def _set_exact_resets(self, exact):
        """Whether ``_continue_frame`` resets done envs at once while ``exact`` (see "Skipped
        rows", step_protocol.py): an env that never skips always does."""
        return True

    def close(self):
        self._is_closed = True

    def __repr__(self):
        return f"{type(self).__name__}(batch_size={list(self.batch_size)}, device={self.device})"

