"""Environments written as torchrl's: subclasses of ``EnvBase`` that implement ``_reset(tensordict)``,
``_step(tensordict)`` and ``_set_seed(seed)`` over TensorDicts instead of the frame methods of the
step protocol (``step_protocol.py``).

``EnvBase.reset``/``step``/``set_seed`` of such an env are torchrl 0.14's: ``reset`` calls
``_reset`` (with the ``"_reset"`` masks of a partial reset in its input), completes the done
entries the env left out, refuses an env that is done right after a reset (unless
``allow_done_after_reset``) and, for a partial reset, keeps the rows not reset from the input;
``step`` calls ``_step`` and writes its result, completed the same way, under ``"next"``. Their
specs may hold several actions and rewards, under any keys; the class-level ``_input_spec`` and
``_output_spec`` some torchrl envs set in ``__new__`` become the instance's specs.

The frame methods of such an env (``TorchRLStyleFrames``) run those TensorDict methods, so a
torchrl-style env with one action (``"action"``) and one reward (``"reward"``) also works in
``SerialEnv``/``ParallelEnv`` and the collectors: correct, but one TensorDict per step (frame envs
stay on their array path).
"""
import numpy as np

from .._creation import as_tensor
from .._tensor import host_array
from ..tensordict import TensorDict, unravel_key_to_tuple
from .step_protocol import ACTION, REWARD, TERMINATED, TRUNCATED, frame_array
from .utils import step_mdp

__all__ = ["TorchRLStyleFrames", "complete_done", "update_during_reset", "maybe_reset", "check_reset_done", "next_root"]


def _groups(env):
    """(prefix tuple, [done key tuples]) per TensorDict holding done entries (``done_keys_groups``)."""
    for keys in env.done_keys_groups:
        keys = [unravel_key_to_tuple(key) for key in keys]
        yield keys[0][:-1], keys


def complete_done(done_spec, data):
    """torchrl's completion of a step's or reset's done entries in ``data`` (in place): ``terminated``
    copied from a lone ``done``, ``done`` from ``terminated`` (or'ed with ``truncated``), any other
    missing flag False; nested done groups likewise. Returns ``data``."""
    from rlpipe.envs.specs import Composite
    lead = tuple(data.batch_size[:len(data.batch_size) - len(done_spec.shape)])
    present = set(data.keys())
    for key, spec in done_spec.items():
        if isinstance(spec, Composite):
            if key in present:
                complete_done(spec, data.get(key))
            continue
        if key in present:
            continue
        if key == "terminated" and "done" in present:
            if "truncated" in present:
                raise RuntimeError("Cannot infer the value of terminated when only done and truncated are present.")
            data.set("terminated", data.get("done"))
        elif key == "done" and "terminated" in present:
            value = data.get("terminated")
            data.set("done", value | data.get("truncated") if "truncated" in present else value)
        else:
            data.set(key, spec.zero(lead))
        present.add(key)
    return data


def check_reset_done(env, tensordict, tensordict_reset):
    """A RuntimeError when a done entry of ``tensordict_reset`` is True right after a reset (on the rows
    the ``"_reset"`` masks name, for a partial reset), as torchrl, unless ``allow_done_after_reset``."""
    if env._allow_done_after_reset:
        return
    for prefix, keys in _groups(env):
        mask = None if tensordict is None else tensordict.get(prefix + ("_reset",), None)
        for key in keys:
            done = tensordict_reset.get(key)
            if bool(done.any()) and (mask is None or bool(done[mask].any())):
                where = " on specified '_reset' dimensions" if mask is not None else ""
                raise RuntimeError(f"The done entry {key[0] if len(key) == 1 else key!r} was (partially) True after "
                                   f"a call to reset(){where} in env {env}; expected all False (or create the env "
                                   "with allow_done_after_reset=True)")


def update_during_reset(tensordict_reset, tensordict, reset_keys):
    """Writes a reset's result into the input ``tensordict`` as torchrl: where a ``"_reset"`` mask is
    partial, only its rows; the masks are removed. Returns ``tensordict``."""
    masks = {unravel_key_to_tuple(k): tensordict.pop(k, None) for k in reset_keys}
    full = all(mask is None or bool(mask.all()) for mask in masks.values())
    if full:
        return tensordict.update(tensordict_reset)
    for key, mask in sorted(masks.items(), key=lambda item: len(item[0])):
        node_key = key[:-1]
        node = tensordict if not node_key else tensordict.get(node_key)
        fresh = tensordict_reset.exclude(*[k for k in reset_keys]) if not node_key else tensordict_reset.get(node_key)
        if mask is None or bool(mask.all()):
            node.update(fresh)
            continue
        mask = mask.reshape(tuple(node.batch_size) + (-1,)).any(-1) if mask.ndim > node.ndim else \
            mask.reshape(tuple(node.batch_size))
        node.update(node.where(~mask, fresh, pad=0))
    return tensordict


def maybe_reset(env, root):
    """torchrl's ``maybe_reset``: ``root`` (a next step's root) with the envs whose done flags are set
    reset, each done group through its ``"_reset"`` mask."""
    masks = {}
    for prefix, keys in _groups(env):
        mask = None
        for key in keys:
            mask = root.get(key) if mask is None else mask | root.get(key)
        masks[prefix + ("_reset",)] = mask
    if not any(bool(mask.any()) for mask in masks.values()):
        return root
    for key, mask in masks.items():
        root.set(key, mask)
    return env.reset(root)


def next_root(env, tensordict):
    """The root of the step after ``tensordict`` (``step_mdp`` with the env's keys), done envs reset."""
    root = step_mdp(tensordict, reward_keys=env.reward_keys, done_keys=env.done_keys, action_keys=env.action_keys)
    return maybe_reset(env, root)


class TorchRLStyleFrames:
    """The frame methods (``step_protocol.py``) of a torchrl-style env, over its TensorDict methods.
    The driver calls ``_continue_frame`` only after a step where some env is done: otherwise the next
    step starts from ``step_mdp`` of the last one."""

    _last_root = None
    _last_step = None

    def _next_root(self, tensordict):
        return next_root(self, tensordict)

    def _obs_frame(self, tensordict):
        return {unravel_key_to_tuple(k): frame_array(tensordict.get(k)) for k in self.observation_spec.keys(True, True)}

    def _reset_frame(self, seed=None):
        if seed is not None:
            self.set_seed(seed)
        self._last_root, self._last_step = self._reset_tensordict(None), None
        return self._obs_frame(self._last_root)

    def _step_frame(self, action):
        if self._last_root is None:  # as torchrl, an env may step before any reset: from the action alone
            self._last_root = TensorDict(batch_size=self.batch_size, device=self.device)
        root = self._last_root if self._last_step is None else step_mdp(
            self._last_step, reward_keys=self.reward_keys, done_keys=self.done_keys, action_keys=self.action_keys)
        root.set(ACTION, as_tensor(action, device=self.device))
        self._last_step = self._step_tensordict(root)
        nxt = self._last_step.get("next")
        terminated = host_array(nxt.get(TERMINATED))
        truncated = host_array(nxt.get(TRUNCATED)) if "truncated" in nxt.keys() else terminated & False
        return self._obs_frame(nxt), host_array(nxt.get(REWARD)), terminated, truncated

    def _continue_frame(self, next_obs, done):
        """The next root frame: the last step's ``"next"`` with the envs ``done`` (the driver's mask, which a
        partial reset may narrow) reset through a ``"_reset"`` mask."""
        if self._last_step is None:
            root = self._last_root
        else:
            root = step_mdp(self._last_step, reward_keys=self.reward_keys, done_keys=self.done_keys,
                            action_keys=self.action_keys)
        mask = as_tensor(np.asarray(done, dtype=bool).reshape(tuple(self.batch_size) + (1,)), device=self.device)
        if bool(mask.any()):
            root = self.reset(root.set("_reset", mask))
        self._last_root, self._last_step = root, None
        return self._obs_frame(root)
