"""How transforms plug into an environment: ``TransformedEnv``, the ``Transform`` base and ``Compose``.

Transforms work on rlpipe's array-level *frames* (``common.py``): dicts mapping key tuples to host
NumPy arrays with batch-leading dims. A ``TransformedEnv`` is an ``EnvBase`` whose frame methods
call the base env's and pass the frames through its transforms, so the collector drives a
transformed env exactly as a plain one, and ``reset``/``step``/``rollout`` (built on the frame
methods) see the transformed data. The concrete transforms are in ``transforms.py``.

The frame hooks of a ``Transform`` (all optional; none may modify the dicts or arrays it is
given, each returns a new dict when it changes anything):

- ``_reset(frame) -> frame``: every env starts an episode. ``frame`` holds the observations (as
  the previous transform left them); the result is this transform's *root frame*.
- ``_step(root, next_frame) -> next_frame``: one step of every env. ``root`` is the root frame
  this transform returned for the state being stepped from (from ``_reset``/``_continue``, or its
  own previous ``_step`` output when stepping on without ``_continue``); ``next_frame`` holds the
  next observations plus ``("reward",)``, ``("terminated",)`` and ``("truncated",)`` (``done`` is
  ``terminated | truncated``, computed afterwards). The result is this transform's *next frame*.
- ``_continue(next_frame, frame, done) -> frame``: the root frame of the following step.
  ``next_frame`` is this transform's output of the last ``_step``; ``frame`` holds the
  observations to act on next as the previous transform left them (a fresh reset where ``done``,
  a bool array shaped ``batch_size + (1,)``, is True); stateful transforms carry their values
  over from ``next_frame`` where not done and restart them where done.
- ``_call(frame) -> frame``: the stateless mapping of observation entries that the three
  defaults above apply (``_reset``: ``_call(frame)``; ``_step``: ``_call(next_frame)``;
  ``_continue``: ``_call(frame)``).
- ``_inv_action(action) -> action``: the action array on its way to the base env (identity).

The spec hooks (torchrl's): ``transform_observation_spec``, ``transform_reward_spec``,
``transform_done_spec`` and ``transform_action_spec`` take a (cloned) spec and return the spec
the transform's output follows; the specs a transform receives from the env before it are
available as ``self.parent_specs`` while they run.

``TransformedEnv`` flattens nested ``Compose``\\ s and keeps every transform's root and next
frames itself, so transforms hold no per-episode state and may be re-used by ``parent`` views
(``ObservationNorm.init_stats``). When no env is done, ``_continue_frame`` costs one ``any``.
"""
import copy as _copy
import types
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from .._creation import as_tensor
from .._tensor import Tensor, host_array
from ..tensordict import unravel_key_to_tuple
from .common import EnvBase
from .specs import Composite, TensorSpec

__all__ = ["Compose", "Transform", "TransformedEnv"]

_REWARD = ("reward",)
_TERMINATED = ("terminated",)
_TRUNCATED = ("truncated",)


def _keys(keys, what, allow_none=False):
    """A list of key tuples from a key or a sequence of keys (str or tuple of str)."""
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


def _key_str(key):
    return key[0] if len(key) == 1 else key


class Transform:
    """Base of every transform (module docstring: frame hooks and spec hooks).

    ``in_keys``/``out_keys`` are lists of key tuples (given as strings or tuples). A transform
    belongs to at most one container (a ``Compose`` or a ``TransformedEnv``); ``clone()`` gives
    an unattached copy.
    """

    def __init__(self, in_keys=None, out_keys=None):
        self.in_keys = _keys(in_keys, "in_keys", allow_none=True) or []
        self.out_keys = _keys(out_keys, "out_keys", allow_none=True) if out_keys is not None else list(self.in_keys)
        self._container = None
        self.parent_specs = None

    # ---- frame hooks ------------------------------------------------------------------------------
    def _call(self, frame):
        return frame

    def _reset(self, frame):
        return self._call(frame)

    def _step(self, root, next_frame):
        return self._call(next_frame)

    def _continue(self, next_frame, frame, done):
        return self._call(frame)

    def _inv_action(self, action):
        return action

    # ---- spec hooks -------------------------------------------------------------------------------
    def transform_observation_spec(self, observation_spec):
        return observation_spec

    def transform_reward_spec(self, reward_spec):
        return reward_spec

    def transform_done_spec(self, done_spec):
        return done_spec

    def transform_action_spec(self, action_spec):
        return action_spec

    # ---- TensorDict use ---------------------------------------------------------------------------
    def forward(self, tensordict):
        """Applies the stateless mapping (``_call``) to the entries of ``tensordict`` (e.g. data from
        a replay buffer); returns ``tensordict``. Stateful transforms raise NotImplementedError."""
        frame = {}
        for key in tensordict.keys(True, True):
            value = tensordict.get(key)
            if isinstance(value, Tensor):
                frame[unravel_key_to_tuple(key)] = host_array(value)
        out = self._call(frame)
        for key, value in out.items():
            if value is not frame.get(key):
                tensordict.set(key, as_tensor(value, device=tensordict.device))
        for key in frame:
            if key not in out:
                tensordict.pop(key)
        return tensordict

    def __call__(self, tensordict):
        return self.forward(tensordict)

    # ---- containers -------------------------------------------------------------------------------
    def _set_container(self, container):
        if self._container is not None and self._container is not container:
            raise AttributeError(f"parent of transform {type(self).__name__} already set. Call "
                                 "`transform.clone()` to get a similar transform with no parent set.")
        self._container = container

    def _invalidate(self):
        """Tells the env holding this transform that its specs (or transform list) changed."""
        node = self._container
        while node is not None and not isinstance(node, TransformedEnv):
            node = node._container
        if node is not None:
            node._invalidate_specs()

    @property
    def container(self):
        return self._container

    @property
    def parent(self):
        """The env this transform sees: the base env with the transforms before this one (a
        ``TransformedEnv`` view sharing them), or None when the transform is not in an env."""
        node = self._container
        while node is not None and not isinstance(node, TransformedEnv):
            node = node._container
        if node is None:
            return None
        leaves = node._leaf_list()
        own = self._leaf_list()
        index = next((i for i, t in enumerate(leaves) if own and t is own[0]), None)
        if index is None:  # an empty Compose: everything before where it sits
            index = _position(node.transform, self, leaves)
        return _TransformedView(node.base_env, leaves[:index])

    def _leaf_list(self):
        return [self]

    def _parent_spec(self, name):
        """The ``name`` spec ("observation", "reward", "done", "action") of the env before this transform."""
        specs = self.parent_specs
        if specs is not None:
            return getattr(specs, name + "_spec")
        parent = self.parent
        if parent is None:
            raise RuntimeError(f"{type(self).__name__} needs its parent env's specs: put it in a TransformedEnv")
        return getattr(parent, name + "_spec")

    def clone(self):
        container, specs = self._container, self.parent_specs
        self._container = self.parent_specs = None
        try:
            return _copy.deepcopy(self)
        finally:
            self._container, self.parent_specs = container, specs

    def to(self, *args, **kwargs):
        return self

    # ---- state (what a checkpoint of the env, or a collector's env_state_dict, holds) --------------
    _state_keys = ()  # the tensors a transform may hold: ObservationNorm's loc and scale

    def state_dict(self, prefix=""):
        """The transform's learned or given tensors (only those it has), under ``prefix``."""
        return OrderedDict((prefix + key, getattr(self, key)) for key in self._state_keys
                           if getattr(self, key) is not None)

    def load_state_dict(self, state_dict, strict=True):
        """Takes back ``state_dict()``'s tensors. ``strict``: the keys must be the ones this
        transform has now (a missing one is a KeyError); unknown keys are always a KeyError."""
        unexpected = sorted(set(state_dict) - set(self._state_keys))
        missing = sorted(set(self.state_dict()) - set(state_dict)) if strict else []
        if unexpected or missing:
            raise KeyError(f"{type(self).__name__}.load_state_dict: unexpected keys {unexpected}, missing keys "
                           f"{missing}")
        for key in self._state_keys:
            if key in state_dict:
                setattr(self, key, state_dict[key])

    def __repr__(self):
        return f"{type(self).__name__}(keys={[_key_str(k) for k in self.in_keys]})"


class Compose(Transform):
    """Transforms applied in order. ``TransformedEnv`` runs the flattened list of leaf transforms
    itself; used on its own, a ``Compose`` keeps its children's root and next frames."""

    def __init__(self, *transforms):
        super().__init__()
        if len(transforms) == 1 and isinstance(transforms[0], (list, tuple)):
            transforms = tuple(transforms[0])
        for t in transforms:
            _check_transform(t, "Compose")
        self.transforms = list(transforms)
        for t in self.transforms:
            t._set_container(self)
        self._roots = self._nexts = None

    def state_dict(self, prefix=""):
        """Every child's state, under ``"<index>."`` (as a module list names them)."""
        out = OrderedDict()
        for i, t in enumerate(self.transforms):
            out.update(t.state_dict(f"{prefix}{i}."))
        return out

    def load_state_dict(self, state_dict, strict=True):
        parts = [OrderedDict() for _ in self.transforms]
        for key, value in state_dict.items():
            index, _, rest = key.partition(".")
            if not index.isdigit() or int(index) >= len(self.transforms) or not rest:
                raise KeyError(f"Compose.load_state_dict: unexpected key {key!r} ({len(self.transforms)} transforms)")
            parts[int(index)][rest] = value
        for t, part in zip(self.transforms, parts):
            t.load_state_dict(part, strict=strict)

    def _leaf_list(self):
        out = []
        for t in self.transforms:
            out.extend(t._leaf_list())
        return out

    # frame hooks (standalone use)
    def _call(self, frame):
        for t in self.transforms:
            frame = t._call(frame)
        return frame

    def _reset(self, frame):
        roots = []
        for t in self.transforms:
            frame = t._reset(frame)
            roots.append(frame)
        self._roots, self._nexts = roots, None
        return frame

    def _step(self, root, next_frame):
        if self._roots is None:
            raise RuntimeError("Compose: _step before _reset")
        nexts = []
        for t, r in zip(self.transforms, self._roots):
            next_frame = t._step(r, next_frame)
            nexts.append(next_frame)
        self._nexts = self._roots = nexts
        return next_frame

    def _continue(self, next_frame, frame, done):
        if self._nexts is None:
            raise RuntimeError("Compose: _continue without a preceding _step")
        roots = []
        for t, n in zip(self.transforms, self._nexts):
            frame = t._continue(n, frame, done)
            roots.append(frame)
        self._roots, self._nexts = roots, None
        return frame

    def _inv_action(self, action):
        for t in reversed(self.transforms):
            action = t._inv_action(action)
        return action

    # spec hooks: each child sees the specs its predecessors produced
    def transform_observation_spec(self, observation_spec):
        for t in self.transforms:
            observation_spec = t.transform_observation_spec(observation_spec)
        return observation_spec

    def transform_action_spec(self, action_spec):
        for t in self.transforms:
            action_spec = t.transform_action_spec(action_spec)
        return action_spec

    def transform_reward_spec(self, reward_spec):
        for t in self.transforms:
            reward_spec = t.transform_reward_spec(reward_spec)
        return reward_spec

    def transform_done_spec(self, done_spec):
        for t in self.transforms:
            done_spec = t.transform_done_spec(done_spec)
        return done_spec

    def forward(self, tensordict):
        for t in self.transforms:
            tensordict = t.forward(tensordict)
        return tensordict

    # list interface
    def append(self, transform):
        _check_transform(transform, "Compose.append")
        transform._set_container(self)
        self.transforms.append(transform)
        self._invalidate()

    def insert(self, index, transform):
        _check_transform(transform, "Compose.insert")
        n = len(self.transforms)
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"Index expected to be int, got {type(index).__name__}")
        if index < -n or index > n:
            raise ValueError(f"Index expected to be between [-{n}, {n}] got index={index}")
        transform._set_container(self)
        self.transforms.insert(index, transform)
        self._invalidate()

    def __getitem__(self, item):
        if isinstance(item, slice):
            return Compose(*[t.clone() for t in self.transforms[item]])
        return self.transforms[item]

    def __len__(self):
        return len(self.transforms)

    def __iter__(self):
        return iter(self.transforms)

    def clone(self):
        out = super().clone()
        for t in out.transforms:
            t._container = out
        return out

    def __repr__(self):
        inner = ",\n".join("    " + repr(t) for t in self.transforms)
        return f"Compose(\n{inner})" if inner else "Compose()"


def _position(node, target, leaves):
    """How many leaves of ``leaves`` come before ``target`` (an empty Compose) inside ``node``."""
    count = 0

    def walk(n):
        nonlocal count
        if n is target:
            return True
        if isinstance(n, Compose):
            return any(walk(c) for c in n.transforms)
        count += 1
        return False
    walk(node)
    return count


def _check_transform(transform, where):
    if not isinstance(transform, Transform):
        raise TypeError(f"{where} expected a transform but received an object of type "
                         f"{type(transform).__name__} instead.")


def _run_spec_pipeline(transforms, obs, act, rew, done):
    """The specs after ``transforms`` (each sees its predecessors' output as ``parent_specs``)."""
    for t in transforms:
        t.parent_specs = types.SimpleNamespace(observation_spec=obs, action_spec=act, reward_spec=rew,
                                               done_spec=done)
        try:
            new_obs = t.transform_observation_spec(obs.clone())
            new_rew = t.transform_reward_spec(rew.clone())
            new_done = t.transform_done_spec(done.clone())
            new_act = t.transform_action_spec(act.clone())
        finally:
            t.parent_specs = None
        obs, rew, done, act = new_obs, new_rew, new_done, new_act
    return obs, act, rew, done


# ---- the environment ---------------------------------------------------------------------------------

class _Pipeline(NamedTuple):
    """What a ``TransformedEnv`` runs: its leaf transforms, the specs they produce from the base env's,
    the action hooks (``_inv_action`` of the transforms that have one, last transform first), and the
    base env's spec version it was built from (None unless the base env is itself transformed: then
    only ``_invalidate_specs`` makes it stale)."""
    leaves: list
    observation_spec: Composite
    action_spec: TensorSpec
    reward_spec: TensorSpec
    done_spec: Composite
    action_hooks: list
    base_version: object

class TransformedEnv(EnvBase):
    """An environment with transforms: ``TransformedEnv(env, transform=None)``.

    Its specs are the base env's passed through the transforms; its frame methods call the base
    env's and pass the frames through the transforms (module docstring). ``transform`` is the
    transform given (a ``Compose`` once ``append_transform``/``insert_transform`` added more);
    ``base_env`` the wrapped env. Attributes not found here are looked up on ``base_env``.
    """

    def __init__(self, env, transform=None, device=None, **kwargs):
        if kwargs:
            raise TypeError(f"TransformedEnv got unexpected keyword arguments {sorted(kwargs)}")
        if not isinstance(env, EnvBase):
            raise TypeError(f"TransformedEnv wraps an rlpipe EnvBase, got {type(env).__name__}")
        if device is not None and device != env.device:
            raise ValueError("TransformedEnv: device must be the base env's device (move the base env instead)")
        super().__init__(device=env.device, batch_size=env.batch_size)
        self.__dict__["base_env"] = env
        self._flag_shape = tuple(env.batch_size) + (1,)
        if transform is None:
            transform = Compose()
        _check_transform(transform, "TransformedEnv")
        transform._set_container(self)
        self.transform = transform
        self._spec_version = 0
        self._invalidate_specs()

    # ---- transforms -----------------------------------------------------------------------------
    def _leaf_list(self):
        return self.transform._leaf_list()

    def append_transform(self, transform):
        """Adds ``transform`` after the existing ones; returns self."""
        _check_transform(transform, "TransformedEnv.append_transform")
        if not isinstance(self.transform, Compose):
            prev = self.transform
            prev._container = None
            self.transform = Compose(prev)
            self.transform._set_container(self)
        self.transform.append(transform)
        self._invalidate_specs()
        return self

    def insert_transform(self, index, transform):
        """Inserts ``transform`` at ``index`` among the transforms; returns self."""
        _check_transform(transform, "TransformedEnv.insert_transform")
        if not isinstance(self.transform, Compose):
            prev = self.transform
            prev._container = None
            self.transform = Compose(prev)
            self.transform._set_container(self)
        self.transform.insert(index, transform)
        self._invalidate_specs()
        return self

    def _invalidate_specs(self):
        self._pipeline = None
        self._spec_version = self.__dict__.get("_spec_version", 0) + 1
        self._roots = self._nexts = None

    # ---- specs ----------------------------------------------------------------------------------
    def _built(self):
        """The current ``_Pipeline``, rebuilt when a transform or the base env changed."""
        pipeline = self._pipeline
        base = self.base_env
        if pipeline is not None and (pipeline.base_version is None or pipeline.base_version == base._spec_version):
            return pipeline
        leaves = self._leaf_list()
        obs, act, rew, done = _run_spec_pipeline(leaves, base.observation_spec.clone(), base.action_spec.clone(),
                                                 base.reward_spec.clone(), base.done_spec.clone())
        hooks = [t._inv_action for t in reversed(leaves) if type(t)._inv_action is not Transform._inv_action]
        if pipeline is not None and pipeline.leaves != leaves:
            self._roots = self._nexts = None
        base_version = base._spec_version if isinstance(base, TransformedEnv) else None
        self._pipeline = _Pipeline(leaves, obs, act, rew, done, hooks, base_version)
        return self._pipeline

    @property
    def observation_spec(self):
        return self._built().observation_spec

    @property
    def action_spec(self):
        return self._built().action_spec

    @property
    def reward_spec(self):
        return self._built().reward_spec

    @property
    def done_spec(self):
        return self._built().done_spec

    # ---- the frame protocol -----------------------------------------------------------------------
    def _reset_frame(self, seed=None):
        leaves = self._built().leaves
        frame = self.base_env._reset_frame(seed)
        roots = []
        for t in leaves:
            frame = t._reset(frame)
            roots.append(frame)
        self._roots, self._nexts = roots, None
        self._skipped_rows = None
        return frame

    def _step_frame(self, action):
        pipeline = self._pipeline  # _built()'s answer, without the call on the hot path where it cannot be stale
        if pipeline is None or pipeline.base_version is not None:
            pipeline = self._built()
        roots = self._roots
        if roots is None:
            raise RuntimeError("TransformedEnv: reset the environment before stepping it "
                               "(or after changing its transforms)")
        if self._nexts is not None:  # stepping on without _continue_frame: carry every frame over
            roots = self._roots = self._nexts
        for inv in pipeline.action_hooks:
            action = inv(action)
        base = self.base_env
        next_obs, reward, terminated, truncated = base._step_frame(action)
        self._base_next = next_obs
        frame = dict(next_obs)
        frame[_REWARD] = reward
        frame[_TERMINATED] = terminated
        frame[_TRUNCATED] = truncated
        nexts = []
        for t, root in zip(pipeline.leaves, roots):
            frame = t._step(root, frame)
            nexts.append(frame)
        self._skipped_rows = skipped = base._skipped_rows
        if skipped is not None and nexts:
            nexts = self._restarted(pipeline.leaves, nexts, next_obs, skipped)
            frame = nexts[-1]
        self._nexts = nexts
        out = dict(frame)
        reward, terminated, truncated = out.pop(_REWARD), out.pop(_TERMINATED), out.pop(_TRUNCATED)
        self._next_out = out
        return out, reward, terminated, truncated

    @property
    def _skips_rows(self):
        return self.base_env._skips_rows

    def _set_exact_resets(self, exact):
        return self.base_env._set_exact_resets(exact)

    def _restarted(self, leaves, nexts, base_obs, rows):
        """The transforms' next frames with the envs in ``rows`` (a step that skipped them, see
        ``EnvBase``) restarted from the base env's observations there, as ``_continue`` restarts a
        done env: a step counter at 0, an episode's reward sum at 0."""
        done = rows.reshape(self._flag_shape)
        frame = base_obs
        out = []
        for t, n in zip(leaves, nexts):
            frame = t._continue(n, frame, done)
            merged = dict(n)
            for key, value in frame.items():
                if key in merged:
                    merged[key] = np.array(merged[key])
                    merged[key][rows] = value[rows]
            out.append(merged)
        return out

    def _continue_frame(self, next_obs, done):
        """``next_obs`` must be what the last ``_step_frame`` returned (the transformed env keeps
        its own record of it, and of the base env's untransformed one)."""
        nexts = self._nexts
        if nexts is None:
            raise RuntimeError("TransformedEnv: _continue_frame without a preceding _step_frame")
        leaves = self._built().leaves
        if type(done) is not np.ndarray or done.shape != self._flag_shape:
            done = np.asarray(done, dtype=bool).reshape(self._flag_shape)
        frame = self.base_env._continue_frame(self._base_next, done)
        self._base_next = None
        if not np.count_nonzero(done):
            self._roots, self._nexts = nexts, None
            return self._next_out
        roots = []
        for t, n in zip(leaves, nexts):
            frame = t._continue(n, frame, done)
            roots.append(frame)
        self._roots, self._nexts = roots, None
        return frame

    # ---- the rest ----------------------------------------------------------------------------------
    def set_seed(self, seed, static_seed=False):
        self._roots = self._nexts = None
        return self.base_env.set_seed(seed, static_seed=static_seed)

    def close(self):
        self.base_env.close()
        super().close()

    def __getattr__(self, name):
        # only called for attributes missing here: delegate to the base env, as torchrl does
        if name.startswith("_") or "base_env" not in self.__dict__:
            raise AttributeError(name)
        try:
            return getattr(self.__dict__["base_env"], name)
        except AttributeError:
            raise AttributeError(f"'{type(self).__name__}' object and its base env have no attribute "
                                 f"'{name}'") from None

    def __repr__(self):
        transform = "\n".join("    " + line for line in repr(self.transform).splitlines())
        return f"TransformedEnv(\n    env={self.base_env!r},\n    transform={transform.strip()})"


class _TransformedView(TransformedEnv):
    """The base env seen through some of another env's transforms (``Transform.parent``): shares
    the transform objects without becoming their container."""

    def __init__(self, env, leaves):
        EnvBase.__init__(self, device=env.device, batch_size=env.batch_size)
        self.__dict__["base_env"] = env
        self._flag_shape = tuple(env.batch_size) + (1,)
        self._view_leaves = list(leaves)
        self._spec_version = 0
        self._invalidate_specs()

    @property
    def transform(self):
        return self._view_leaves

    def _leaf_list(self):
        return self._view_leaves

    def append_transform(self, transform):
        raise RuntimeError("a transform's parent env is a view: append to the env holding the transform")

    insert_transform = append_transform
