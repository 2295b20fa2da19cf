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
from collections import OrderedDict
from contextlib import nullcontext

import numpy as np

from .._device import resolve
from .._tensor import Size
from .._creation import as_tensor
from .._tensor import host_array
from ..primitives import where
from ..tensordict import TensorDict, TensorDictBase, unravel_key_to_tuple
from .policy_states import carry_into_root, only_common_keys, policy_next_entries
from .spec_surface import SpecSurface
from .step_protocol import (DONE_KEYS, carry_over, frame_array, frame_to_tensordict, missing_action_error,
                            next_tensordict, root_tensordict)
from .tensordict_envs import TorchRLStyleFrames, check_reset_done, complete_done, update_during_reset

__all__ = ["EnvBase", "frame_to_tensordict", "DONE_KEYS"]


def _has_entry(tensordict, key):
    """Whether ``tensordict`` holds ``key`` (nested too), without reading it (a lazy stack's entries of different
    shapes cannot be read whole)."""
    path = unravel_key_to_tuple(key)
    node = tensordict
    for part in path[:-1]:
        node = node.get(part, None)
        if not isinstance(node, TensorDictBase):
            return False
    return path[-1] in node.keys()


def _replay(actions, key):
    """A policy writing the next item of ``actions`` under ``key`` (rollout's ``actions``)."""
    items = iter(actions)

    def replay(tensordict):
        return tensordict.set(key, next(items))
    return replay


def checked_train_mode(mode):
    """``mode`` for an env's ``train(mode)``: a bool (TypeError otherwise)."""
    if not isinstance(mode, bool):
        raise TypeError(f"train: mode must be a bool, got {type(mode).__name__} {mode!r}")
    return mode


class EnvBase(TorchRLStyleFrames, SpecSurface):
    """torchrl-style environment: ``reset()``, ``step(td)``, ``rand_step()``, ``rollout()``,
    ``set_seed()``, and specs (``SpecSurface``). Subclasses implement either the frame methods
    (``step_protocol.py``: the array fast path) or torchrl's ``_reset``/``_step``/``_set_seed`` over
    TensorDicts (``tensordict_envs.py``), and set ``action_spec``, ``observation_spec``,
    ``reward_spec`` and ``done_spec``."""

    batch_size = Size(())
    device = None
    _skips_rows = False   # see "Skipped rows" in step_protocol.py
    _skipped_rows = None
    _tensordict_style = False  # a subclass implementing torchrl's _reset/_step (set by __init_subclass__)
    _allow_done_after_reset = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._tensordict_style = cls._step is not EnvBase._step or cls._reset is not EnvBase._reset

    def __new__(cls, *args, _inplace_update=False, _batch_locked=True, auto_reset=False, auto_reset_replace=True,
                **kwargs):
        if auto_reset:  # torchrl's: the env, built, in an AutoResetEnv (not an instance of cls: no second __init__)
            env = cls.__new__(cls, *args, **kwargs)
            env.__init__(*args, **kwargs)
            return EnvBase._auto_reset_env(env, auto_reset_replace)
        env = super().__new__(cls)
        # torchrl envs may set _input_spec/_output_spec on their class in __new__: they are the instance's
        class_specs = {}
        for name in ("_input_spec", "_output_spec"):
            if name in cls.__dict__:
                class_specs[name] = cls.__dict__[name].clone()
                delattr(cls, name)
        env.__dict__["_class_specs"] = class_specs
        return env

    def __init__(self, *, device=None, batch_size=None, run_type_checks=False, allow_done_after_reset=False,
                 spec_locked=True):
        self.device = None if device is None else resolve(device)
        self.batch_size = Size(()) if batch_size is None else Size(batch_size)
        self.__dict__.setdefault("_is_closed", False)  # batched envs are closed until their workers start
        self._allow_done_after_reset = allow_done_after_reset
        self._set_class_specs(self.__dict__.pop("_class_specs", None) or {})

    def _set_class_specs(self, class_specs):
        output_spec, input_spec = class_specs.get("_output_spec"), class_specs.get("_input_spec")
        pairs = ((output_spec, ("full_observation_spec", "full_reward_spec", "full_done_spec")),
                 (input_spec, ("full_action_spec", "full_state_spec")))
        for spec, names in pairs:
            for name in names:
                if spec is not None and name in spec.keys():
                    setattr(self, name, spec[name])

    def register_buffer(self, name, tensor, persistent=True):
        """Keeps ``tensor`` as the attribute ``name`` (torchrl's envs are modules with buffers)."""
        setattr(self, name, tensor)

    # ---- torchrl's TensorDict methods (subclasses that do not implement the frame methods) -----------
    def _reset(self, tensordict, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} implements neither _reset (torchrl's TensorDict API) "
                                  "nor _reset_frame (rlpipe's step protocol)")

    def _step(self, tensordict):
        raise NotImplementedError(f"{type(self).__name__} implements neither _step (torchrl's TensorDict API) "
                                  "nor _step_frame (rlpipe's step protocol)")

    def _set_seed(self, seed):
        raise NotImplementedError(f"{type(self).__name__} implements neither _set_seed nor _reset_frame")

    # ---- TensorDict API ---------------------------------------------------------------------------
    def reset(self, tensordict=None, seed=None, **kwargs):
        """A TensorDict with the first observations and done/terminated/truncated all False. A
        torchrl-style env: its ``_reset`` (``kwargs`` passed on), completed as torchrl's (module
        ``tensordict_envs``); ``tensordict`` may hold ``"_reset"`` masks (a partial reset)."""
        if tensordict is not None:
            self._check_batch_size(tensordict)
        if self._tensordict_style:
            if seed is not None:
                self.set_seed(seed)
            return self._reset_tensordict(tensordict, **kwargs)
        if tensordict is not None and "_reset" in tensordict.keys():
            return self._partial_reset(tensordict)
        out = root_tensordict(self._reset_frame(seed), self.batch_size, self.device)
        if tensordict is not None:
            tensordict.update(out)
            return tensordict
        return out

    def _check_batch_size(self, tensordict):
        """torchrl's check of the input's batch size: the env's own, unless the env is not batch-locked
        and has an empty batch size (a torchrl-style env that steps any batch of inputs)."""
        if not self.batch_size and not self.batch_locked:
            return
        if tuple(tensordict.batch_size) != tuple(self.batch_size):
            raise RuntimeError(f"Expected a tensordict with shape==env.batch_size, got {list(tensordict.batch_size)} "
                               f"and {list(self.batch_size)} ({type(self).__name__})")

    def _partial_reset(self, tensordict):
        """torchrl's partial reset of a frame env: the envs where ``tensordict["_reset"]`` is True are
        reset (``_continue_frame`` in exact mode); the others keep the input's observations and done
        flags. The mask is removed; returns ``tensordict``."""
        mask = host_array(tensordict.pop("_reset")).astype(bool).reshape(tuple(self.batch_size) + (1,))
        next_obs = {}
        for k in self.observation_spec.keys(True, True):
            value = tensordict.get(k, None)
            key = unravel_key_to_tuple(k)
            next_obs[key] = self._current_observation(key) if value is None else frame_array(value)
        if not self._set_exact_resets(True):
            self._set_exact_resets(False)
            raise RuntimeError(f"{self!r}.reset: this env cannot reset only some of its envs (a NEXT_STEP autoreset "
                               "vector env without partial reset); reset all of them (no '_reset' entry)")
        try:
            frame = self._continue_frame(next_obs, mask)
        finally:
            self._set_exact_resets(False)
        out = root_tensordict(frame, self.batch_size, self.device)
        for key in DONE_KEYS:
            if key in tensordict.keys():  # the envs not reset keep their flags, as torchrl's
                out.set(key, where(as_tensor(mask, device=self.device), out.get(key), tensordict.get(key)))
        return tensordict.update(out)

    def _current_observation(self, key):
        """The observation ``key`` the envs not reset keep when a partial reset's input lacks it: the
        spec's zero here (an env that keeps its last observations gives those)."""
        return host_array(self.observation_spec[key].zero())

    def _reset_tensordict(self, tensordict, **kwargs):
        out = self._reset(tensordict, **kwargs)
        if out is tensordict:
            raise RuntimeError(f"{type(self).__name__}._reset returned its input tensordict: it must return a new "
                               "one (e.g. tensordict.empty() with the new entries)")
        if not isinstance(out, TensorDictBase):
            raise RuntimeError(f"{type(self).__name__}._reset returned an object of type {type(out).__name__} but a "
                               "TensorDict was expected")
        complete_done(self.full_done_spec, out)
        check_reset_done(self, tensordict, out)
        return out if tensordict is None else update_during_reset(out, tensordict, self.reset_keys)

    def _step_tensordict(self, tensordict):
        tensordict.set("next", complete_done(self.full_done_spec, self._step(tensordict)))
        return tensordict

    def _action_array(self, tensordict):
        """The action as a host array in the action spec's format (one-hot stays one-hot)."""
        return tensordict["action"].detach().cpu().numpy()

    def step(self, tensordict):
        """Steps with ``tensordict["action"]``; writes ``("next", ...)``: observations, reward, done,
        terminated and truncated. Returns the same TensorDict. A torchrl-style env: its ``_step``, with
        the done entries it leaves out completed as torchrl's."""
        self._check_batch_size(tensordict)
        if self._tensordict_style:
            return self._step_tensordict(tensordict)
        next_obs, reward, terminated, truncated = self._step_frame(self._action_array(tensordict))
        tensordict.set("next", next_tensordict(next_obs, reward, terminated, truncated, self.batch_size, self.device))
        return tensordict

    def rand_step(self, tensordict=None):
        """A step with a random action. Without ``tensordict`` the env is reset first (torchrl steps
        from where the env is, which fails on a fresh Gymnasium env)."""
        tensordict = self.reset() if tensordict is None else tensordict
        return self.step(self.rand_action(tensordict))

    def rand_action(self, tensordict=None):
        """``tensordict`` (a new one without it) with a random ``"action"`` from ``action_spec``."""
        tensordict = TensorDict(batch_size=self.batch_size, device=self.device) if tensordict is None else tensordict
        if self._tensordict_style:  # any number of actions, under any keys
            # an env that is not batch-locked acts on the input's batch, as torchrl's
            shape = tensordict.batch_size if not self.batch_locked and not self.batch_size else ()
            return tensordict.update(self.full_action_spec.rand(shape))
        tensordict.set("action", self.action_spec.rand())
        return tensordict

    def rollout(self, max_steps, policy=None, callback=None, *, auto_reset=True, auto_cast_to_device=False,
                break_when_any_done=None, break_when_all_done=None, return_contiguous=True, tensordict=None,
                set_truncated=False, storing_device=None, actions=None):
        """Up to ``max_steps`` steps (``policy(td)``, random actions without one), stacked along a new
        last batch dim named ``"time"``, as torchrl's ``rollout``. ``break_when_any_done`` (the default unless
        ``break_when_all_done`` is set) stops after the step where any env is done; otherwise done envs
        are reset and continue. ``callback(env, td)`` runs on the root of each following step (not
        after the last). ``auto_reset=False`` starts from ``tensordict`` (required then). ``set_truncated``
        marks the last step truncated (and done; a RuntimeError when the env has no truncated flag).
        ``actions``: an iterable of actions written under the env's (first top-level) action key at each
        step, instead of a ``policy``; a sized one caps ``max_steps``. ``storing_device``: the device of
        the returned TensorDict (the env's by default).
        ``auto_cast_to_device`` is accepted: rlpipe's policy and env share the env's device.
        ``return_contiguous`` is accepted (rollouts are always stacked)."""
        from rlpipe.primitives import stack
        from rlpipe.autograd.grad_mode import no_grad
        if break_when_any_done is None:
            break_when_any_done = not break_when_all_done
        if break_when_all_done and break_when_any_done:
            raise TypeError("Cannot have both break_when_all_done and break_when_any_done True at the same time.")
        if actions is not None:
            if policy is not None:
                raise ValueError("Cannot pass both `policy` and `actions` to rollout().")
            policy = _replay(actions, next(iter(self.full_action_spec.keys())))
            max_steps = min(max_steps, len(actions)) if hasattr(actions, "__len__") else max_steps
        if auto_reset:
            td = self.reset(tensordict)
        elif tensordict is None:
            raise RuntimeError("tensordict must be provided when auto_reset is False")
        else:
            td = tensordict
        steps = []
        exact = self._set_exact_resets(True)  # reset done envs at once: a rollout cannot drop a skipped step
        try:
            # a torchrl-style env keeps the caller's grad mode, as torchrl's rollout: its steps may be
            # differentiable (a simulator written in tensor ops); frame envs step on host arrays
            with nullcontext() if self._tensordict_style else no_grad():
                for i in range(max_steps):
                    td = self.rand_action(td) if policy is None else self._policy_step(policy, td)
                    from_policy = policy_next_entries(td, self)  # its ("next", k): a recurrent state
                    td = self.step(td)
                    for key, value in from_policy.items():  # torchrl's step keeps them (and a primer's carry yields)
                        td.set(("next", *key), value)
                    steps.append(td)
                    if i == max_steps - 1:
                        break
                    done = self._root_done(td.get("next"))
                    if break_when_any_done and bool(done.any()):
                        break
                    if break_when_all_done and bool(done.all()):
                        break
                    td = self._root_after(td, from_policy, exact, "rollout")
                    if callback is not None:  # as torchrl: on the next step's root, not after the last step
                        callback(self, td)
        finally:
            self._set_exact_resets(False)
        # a policy's state the first step did not start from (no primer): torchrl's stack keeps only ("next", k)
        batch_dims = len(steps[0].batch_size)  # the env's, or the input's for an env that is not batch-locked
        out = stack(only_common_keys(steps), batch_dims).refine_names(..., "time")  # torchrl's dim name
        if set_truncated:
            self._truncate_last_step(out, batch_dims)
        return out if storing_device is None else out.to(storing_device)

    def _truncate_last_step(self, rollout, batch_dims):
        """torchrl's ``set_truncated``: every truncated flag of the last step set, and its done flag with it."""
        keys = [unravel_key_to_tuple(key) for key in self.done_keys]
        truncated = [key for key in keys if key[-1] == "truncated"]
        if not truncated and ("next", "truncated") in rollout.keys(True):  # the array path always writes it
            truncated = [("truncated",)]
        if not truncated:
            raise RuntimeError("set_truncated was set to True but no truncated key could be found. Make sure a "
                               "'truncated' entry was set in the environment full_done_keys using "
                               "`env.add_truncated_keys()`.")
        last = (slice(None),) * batch_dims + (-1,)  # the last step along the time dim
        for key in truncated:
            for flag_key in (key, key[:-1] + ("done",)):
                flags = rollout.get(("next", *flag_key), None)
                if flags is not None:
                    flags[last] = True

    def add_truncated_keys(self):
        """Adds a ``truncated`` flag beside each done flag of the done spec (as torchrl's); returns the env."""
        spec = self.full_done_spec
        keys = [unravel_key_to_tuple(key) for key in self.done_keys]
        if not keys:
            raise KeyError(f"Couldn't find done keys. done_spec={spec}")
        for key in keys:
            spec[key[:-1] + ("truncated",)] = spec[key].clone()
        return self

    def step_and_maybe_reset(self, tensordict):
        """torchrl's: ``(stepped, root)``, where ``stepped`` is ``step(tensordict)`` and ``root`` the TensorDict
        the next step starts from (the ``"next"`` entries, as ``step_mdp``, with the done envs reset)."""
        from_policy = policy_next_entries(tensordict, self)
        exact = self._set_exact_resets(True)
        try:
            stepped = self.step(tensordict)
            for key, value in from_policy.items():
                stepped.set(("next", *key), value)
            return stepped, self._root_after(stepped, from_policy, exact, "step_and_maybe_reset")
        finally:
            self._set_exact_resets(False)

    def _root_after(self, stepped, from_policy, exact, caller):
        """The root of the step after ``stepped``, done envs reset and the policy's ``("next", k)`` carried."""
        done = self._root_done(stepped.get("next"))
        if not exact and bool(done.any()):
            raise NotImplementedError(
                f"{self!r}.{caller}: this env resets its done envs during the next step (a NEXT_STEP autoreset "
                "without partial reset), which cannot be dropped here; stop at the first done (rollout's "
                "break_when_any_done=True) or collect with SyncDataCollector, which drops the reset steps")
        return carry_into_root(carry_over(self, stepped, done), from_policy, done, len(stepped.batch_size))

    def _root_done(self, next_td):
        """``next_td["done"]``; for an env whose done flags are all nested (torchrl's multi-agent envs), the
        OR of every done flag of each env, shaped ``batch_size + (1,)``."""
        done = next_td.get("done", None)
        if done is not None:
            return done
        batch = tuple(self.batch_size)
        flags = [next_td.get(key).reshape(batch + (-1,)).any(-1, keepdim=True) for key in self.done_keys
                 if key in next_td.keys(True)]
        if not flags:
            raise KeyError(f"{type(self).__name__}: the step's 'next' TensorDict holds none of the done keys "
                           f"{self.done_keys}")
        out = flags[0]
        for flag in flags[1:]:
            out = out | flag
        return out

    def check_env_specs(self, *args, **kwargs):
        """``rlpipe.envs.utils.check_env_specs(self, ...)``: a short rollout checked against the specs (torchrl's
        method)."""
        from rlpipe.envs.utils import check_env_specs
        return check_env_specs(self, *args, **kwargs)

    def step_mdp(self, next_tensordict):
        """The root of the step after ``next_tensordict`` (a stepped TensorDict), as torchrl's method: its
        ``"next"`` entries moved to the root, with this env's reward keys dropped and its actions kept."""
        from rlpipe.envs.utils import _StepMDP
        return _StepMDP(self, exclude_action=False)(next_tensordict)

    def append_transform(self, transform):
        """``TransformedEnv(self, transform)``, as torchrl's ``EnvBase.append_transform``."""
        return self._transformed_env_class(self, transform)

    def _policy_step(self, policy, td):
        """``td`` updated with ``policy(td)`` (as torchrl's rollout: a policy may return a new
        TensorDict), which must hold ``"action"`` (a torchrl-style env's: every action key; a KeyError
        naming the policy otherwise)."""
        given = list(td.keys())
        out = policy(td)
        actions = self.action_keys if self._tensordict_style else ["action"]  # a torchrl-style env's: any keys
        if not all(_has_entry(out, key) for key in actions):
            raise missing_action_error(policy, out, given)
        return out if out is td else td.update(out)

    def set_seed(self, seed, static_seed=False):
        """Seeds the environment(s); returns the seed for a next environment: ``seed`` itself with
        ``static_seed=True``, else ``seed`` plus the number of envs (torchrl derives it from its own
        random generator instead). A torchrl-style env is seeded by its ``_set_seed``."""
        if self._tensordict_style:
            self._set_seed(seed)
        else:
            self._reset_frame(seed)
        return seed if static_seed else seed + max(int(np.prod(tuple(self.batch_size))), 1)

    def _set_exact_resets(self, exact):
        """Whether ``_continue_frame`` resets done envs at once while ``exact`` (see "Skipped
        rows", step_protocol.py): an env that never skips always does."""
        return True

    training = True

    @property
    def is_closed(self):
        """Whether ``close()`` was called (batched envs: also before their workers start)."""
        return self.__dict__.get("_is_closed", False)

    @is_closed.setter
    def is_closed(self, value):
        self._is_closed = bool(value)

    def train(self, mode=True):
        """torchrl's ``nn.Module.train``: sets ``training`` (a plain env has no transforms to reach); returns
        the env."""
        self.training = checked_train_mode(mode)
        return self

    def eval(self):
        """``train(False)``; returns the env."""
        return self.train(False)

    def apply(self, fn):
        """Calls ``fn`` on the env's modules, children first, then on the env (torchrl's ``nn.Module.apply``:
        a plain env is its only module); returns the env."""
        fn(self)
        return self

    def state_dict(self, prefix=""):
        """The env's tensors to checkpoint or share (torchrl's ``nn.Module`` one): none for a plain env."""
        return OrderedDict()

    def load_state_dict(self, state_dict, strict=True):
        """Takes back ``state_dict()``: a plain env holds nothing, so ``strict`` refuses any key."""
        if strict and state_dict:
            raise KeyError(f"{type(self).__name__}.load_state_dict: unexpected keys {sorted(state_dict)} (the env "
                           "holds no state)")

    def close(self, *, raise_if_closed=True):
        """Marks the env closed (subclasses also release their simulator or workers). A plain env may be
        closed twice, as torchrl's; ``raise_if_closed`` is for batched envs, which refuse that."""
        self._is_closed = True

    def __repr__(self):
        return f"{type(self).__name__}(batch_size={list(self.batch_size)}, device={self.device})"

