"""Environment transforms: ``TransformedEnv``, ``Compose`` and torchrl's common ``Transform``\\ s.

Names and behaviour follow torchrl 0.14 (``StepCounter``, ``RewardSum``, ``DoubleToFloat``,
``ObservationNorm``, ``RenameTransform``), but transforms work on rlpipe's array-level *frames*
(``common.py``): dicts mapping key tuples to host NumPy arrays with batch-leading dims. A
``TransformedEnv`` is an ``EnvBase`` whose frame methods call the base env's and pass the frames
through its transforms, so the collector drives a transformed env exactly as a plain one, and
``reset``/``step``/``rollout`` (built on the frame methods) see the transformed data.

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

from .. import _dtypes
from .._creation import as_tensor
from .._tensor import Tensor, host_array
from ..tensordict._td import _unravel
from .common import EnvBase
from .specs import Bounded, Categorical, Composite, TensorSpec, Unbounded

__all__ = ["Compose", "DoubleToFloat", "ObservationNorm", "RenameTransform", "RewardSum", "StepCounter",
           "Transform", "TransformedEnv"]

_REWARD = ("reward",)
_TERMINATED = ("terminated",)
_TRUNCATED = ("truncated",)
_ONE = np.ones((), dtype=np.int64)
_DONE = ("done",)
_STEP_EXTRAS = (_REWARD, _TERMINATED, _TRUNCATED)  # entries of a next frame that are not observations
_RESERVED = frozenset((_REWARD, _TERMINATED, _TRUNCATED, _DONE, ("action",)))


def _keys(keys, what, allow_none=False):
    """A list of key tuples from a key or a sequence of keys (str or tuple of str)."""
    if keys is None:
        if allow_none:
            return None
        raise ValueError(f"{what} must be given")
    if isinstance(keys, (str, tuple)):
        keys = [keys]
    try:
        return [_unravel(k) for k in keys]
    except TypeError as err:
        raise TypeError(f"{what}: {err}") from None


def _key_str(key):
    return key[0] if len(key) == 1 else key


def _bounds(spec):
    return host_array(spec.low), host_array(spec.high)


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
                frame[_unravel(key)] = host_array(value)
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
        next_obs, reward, terminated, truncated = self.base_env._step_frame(action)
        self._base_next = next_obs
        frame = dict(next_obs)
        frame[_REWARD] = reward
        frame[_TERMINATED] = terminated
        frame[_TRUNCATED] = truncated
        nexts = []
        for t, root in zip(pipeline.leaves, roots):
            frame = t._step(root, frame)
            nexts.append(frame)
        self._nexts = nexts
        out = dict(frame)
        reward, terminated, truncated = out.pop(_REWARD), out.pop(_TERMINATED), out.pop(_TRUNCATED)
        self._next_out = out
        return out, reward, terminated, truncated

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


# ---- transforms -------------------------------------------------------------------------------------

def _done_like(done, value):
    """``done`` (shaped batch + (1,)) broadcastable against ``value``."""
    if done.ndim == value.ndim:
        return done
    nb = done.ndim - 1
    return done.reshape(done.shape[:nb] + (1,) * (value.ndim - nb))


class StepCounter(Transform):
    """Counts the steps since each env's reset and optionally truncates episodes.

    The root ``step_count`` (int64, ``batch_size + (1,)``) is 0 after a reset; a step writes
    ``("next", "step_count") = step_count + 1``. With ``max_steps``, a step whose count reaches
    ``max_steps`` sets ``truncated`` (and so ``done``) True; the env restarts the count of every
    env that is done when the episode continues (``_continue_frame``), each at its own reset.
    """

    def __init__(self, max_steps=None, truncated_key="truncated", step_count_key="step_count", update_done=True):
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer))):
            raise TypeError(f"max_steps must be an int or None, got {type(max_steps).__name__}")
        if max_steps is not None and max_steps < 1:
            raise ValueError("max_steps should have a value greater or equal to one.")
        if not isinstance(truncated_key, str):
            raise TypeError("truncated_key must be a string.")
        if not isinstance(step_count_key, str):
            raise TypeError("step_count_key must be a string.")
        if not update_done:
            raise NotImplementedError("StepCounter(update_done=False): done is always terminated | truncated "
                                      "on rlpipe's frame protocol")
        super().__init__(in_keys=[], out_keys=[step_count_key])
        self.max_steps = None if max_steps is None else int(max_steps)
        self.truncated_key = truncated_key
        self.step_count_key = step_count_key
        self.update_done = update_done
        self._key = (step_count_key,)
        self._trunc = (truncated_key,)
        if self._trunc != _TRUNCATED:
            raise NotImplementedError("StepCounter: on rlpipe's frame protocol the truncated key is 'truncated'")
        self._shape = None

    def _zeros(self):
        if self._shape is None:
            self._shape = tuple(self._parent_spec("done")["done"].shape)
        return np.zeros(self._shape, dtype=np.int64)

    def _reset(self, frame):
        out = dict(frame)
        out[self._key] = self._zeros()
        return out

    def _step(self, root, next_frame):
        count = root[self._key] + _ONE  # (an array operand: NumPy converts a Python 1 slowly)
        out = dict(next_frame)
        out[self._key] = count
        if self.max_steps is not None:
            out[_TRUNCATED] = next_frame[_TRUNCATED] | (count >= self.max_steps)
        return out

    def _continue(self, next_frame, frame, done):
        out = dict(frame)
        count = next_frame.get(self._key)
        out[self._key] = self._zeros() if count is None else np.where(done, 0, count)
        return out

    def _call(self, frame):
        return frame

    def forward(self, tensordict):
        raise NotImplementedError("StepCounter cannot be called independently, only its step and reset "
                                  "methods are functional (use it in a TransformedEnv).")

    def transform_observation_spec(self, observation_spec):
        shape = self.parent_specs.done_spec["done"].shape if self.parent_specs is not None else \
            self._parent_spec("done")["done"].shape
        self._shape = tuple(shape)
        observation_spec[self._key] = Bounded(low=0, high=np.iinfo(np.int64).max, shape=shape,
                                              dtype=_dtypes.int64, device=observation_spec.device)
        return observation_spec

    def transform_done_spec(self, done_spec):
        if self.max_steps is not None and self._trunc not in done_spec.keys(True, True):
            done_spec[self._trunc] = Categorical(2, shape=done_spec["done"].shape, dtype=_dtypes.bool,
                                                 device=done_spec.device)
        return done_spec

    def __repr__(self):
        return f"StepCounter(max_steps={self.max_steps}, step_count_key={self.step_count_key!r})"


class RewardSum(Transform):
    """The running return of each episode: ``("next", out_key) = out_key + reward`` at every step,
    0 after a reset. ``in_keys`` default to ``["reward"]``, ``out_keys`` to ``["episode_reward"]``
    (``episode_`` + the in key's last name); the sums are observations (in the observation spec)."""

    def __init__(self, in_keys=None, out_keys=None, reset_keys=None):
        in_keys = _keys(in_keys, "in_keys", allow_none=True) or [_REWARD]
        if out_keys is None:
            out_keys = [k[:-1] + ("episode_" + k[-1],) for k in in_keys]
        out_keys = _keys(out_keys, "out_keys")
        if len(in_keys) != len(out_keys):
            raise ValueError(f"RewardSum: in_keys and out_keys must have the same length, got "
                             f"{len(in_keys)} and {len(out_keys)}")
        if reset_keys is not None:
            raise NotImplementedError("RewardSum: reset_keys (multi-agent resets) are not supported")
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._pairs = list(zip(self.in_keys, self.out_keys))
        self._zero = {}

    def _in_spec(self, key):
        if key == _REWARD:
            return self._parent_spec("reward")
        return self._parent_spec("observation")[key]

    def _zeros(self, out_key):
        z = self._zero.get(out_key)
        if z is None:
            raise RuntimeError("RewardSum needs its specs: put it in a TransformedEnv")
        return np.zeros(z[0], dtype=z[1])

    def _reset(self, frame):
        out = dict(frame)
        for _, ok in self._pairs:
            out[ok] = self._zeros(ok)
        return out

    def _step(self, root, next_frame):
        out = dict(next_frame)
        for ik, ok in self._pairs:
            out[ok] = root[ok] + next_frame[ik]
        return out

    def _continue(self, next_frame, frame, done):
        out = dict(frame)
        for _, ok in self._pairs:
            value = next_frame[ok]
            out[ok] = np.where(_done_like(done, value), np.zeros((), value.dtype), value)
        return out

    def forward(self, tensordict):
        raise NotImplementedError("RewardSum only works in a TransformedEnv (it keeps a running sum)")

    def transform_observation_spec(self, observation_spec):
        for ik, ok in self._pairs:
            spec = self._in_spec(ik)
            self._zero[ok] = (tuple(spec.shape), spec.dtype.np)
            observation_spec[ok] = Unbounded(shape=spec.shape, dtype=spec.dtype, device=spec.device)
        return observation_spec

    def __repr__(self):
        return (f"RewardSum(in_keys={[_key_str(k) for k in self.in_keys]}, "
                f"out_keys={[_key_str(k) for k in self.out_keys]})")


class _KeyWise(Transform):
    """A stateless transform mapping each in key's array to its out key (``_apply_transform``), and
    each in key's spec likewise (``_transform_leaf_spec``)."""

    def __init__(self, in_keys=None, out_keys=None):
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(f"{type(self).__name__}: in_keys and out_keys must have the same length, got "
                             f"{len(self.in_keys)} and {len(self.out_keys)}")
        for k in self.in_keys + self.out_keys:
            if k in _RESERVED:
                raise ValueError(f"{type(self).__name__}: {_key_str(k)!r} cannot be transformed on rlpipe's "
                                 "frame protocol (observation keys only)")

    def _pairs(self, frame):
        return zip(self.in_keys, self.out_keys)

    def _call(self, frame):
        out = None
        for ik, ok in self._pairs(frame):
            value = frame.get(ik)
            if value is None:
                continue
            if out is None:
                out = dict(frame)
            out[ok] = self._apply_transform(value)
        return frame if out is None else out

    def _apply_transform(self, value):
        raise NotImplementedError

    def _transform_leaf_spec(self, spec):
        raise NotImplementedError

    def transform_observation_spec(self, observation_spec):
        for ik, ok in self._spec_pairs(observation_spec):
            observation_spec[ok] = self._transform_leaf_spec(observation_spec[ik])
        return observation_spec

    def _spec_pairs(self, observation_spec):
        keys = {_unravel(k) for k in observation_spec.keys(True, True)}
        return [(ik, ok) for ik, ok in zip(self.in_keys, self.out_keys) if ik in keys]


class DoubleToFloat(_KeyWise):
    """float64 observations (and their specs) as float32. ``in_keys=None``: every float64
    observation entry; a float64 action spec then becomes float32 too, and actions are cast back
    to float64 on their way to the base env. ``in_keys_inv``: the action (``["action"]``) only."""

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        self._all = in_keys is None
        if out_keys is not None and in_keys is None:
            raise ValueError("DoubleToFloat: out_keys need in_keys")
        if out_keys_inv is not None and out_keys_inv != in_keys_inv:
            raise NotImplementedError("DoubleToFloat: out_keys_inv different from in_keys_inv")
        inv = _keys(in_keys_inv, "in_keys_inv", allow_none=True)
        if inv is not None and any(k != ("action",) for k in inv):
            raise NotImplementedError("DoubleToFloat: in_keys_inv can only hold 'action' on rlpipe's frame protocol")
        self._inv_all = self._all and inv is None
        self.in_keys_inv = inv or []
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._cast_action = False

    def _pairs(self, frame):
        if not self._all:
            return zip(self.in_keys, self.out_keys)
        return [(k, k) for k, v in frame.items() if k not in _STEP_EXTRAS and v.dtype == np.float64]

    def _apply_transform(self, value):
        return value.astype(np.float32) if value.dtype == np.float64 else value

    def _transform_leaf_spec(self, spec):
        if spec.dtype is not _dtypes.float64:
            return spec
        if isinstance(spec, Bounded):
            low, high = _bounds(spec)
            return Bounded(low=low.astype(np.float32), high=high.astype(np.float32), shape=spec.shape,
                           dtype=_dtypes.float32, device=spec.device)
        if isinstance(spec, Unbounded):
            return Unbounded(shape=spec.shape, dtype=_dtypes.float32, device=spec.device)
        raise NotImplementedError(f"DoubleToFloat: cannot convert a {type(spec).__name__} spec")

    def _spec_pairs(self, observation_spec):
        if not self._all:
            return super()._spec_pairs(observation_spec)
        return [(_unravel(k), _unravel(k)) for k, v in observation_spec.items(True, True)
                if v is not None and v.dtype is _dtypes.float64]

    def transform_action_spec(self, action_spec):
        self._cast_action = False
        if (self._inv_all or self.in_keys_inv) and action_spec.dtype is _dtypes.float64:
            self._cast_action = True
            return self._transform_leaf_spec(action_spec)
        return action_spec

    def _inv_action(self, action):
        if self._cast_action and action.dtype != np.float64:
            return action.astype(np.float64)
        return action

    def __repr__(self):
        return f"DoubleToFloat(in_keys={'all float64' if self._all else [_key_str(k) for k in self.in_keys]})"


class ObservationNorm(_KeyWise):
    """Affine normalization of observations, torchrl's formula: ``(obs - loc) / scale`` when
    ``standard_normal``, else ``obs * scale + loc``. ``loc``/``scale`` (numbers, arrays or tensors
    broadcasting against the observation) can be left None and estimated by ``init_stats``."""

    _state_keys = ("loc", "scale")

    def __init__(self, loc=None, scale=None, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None,
                 standard_normal=False, eps=None):
        if in_keys is None:
            in_keys = ["observation"]
        if in_keys_inv is not None or out_keys_inv is not None:
            raise NotImplementedError("ObservationNorm: in_keys_inv/out_keys_inv are not supported")
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.standard_normal = bool(standard_normal)
        self.eps = 1e-6 if eps is None else float(eps)
        self._loc = self._scale = None
        self._cast = {}
        if loc is not None:
            self.loc = loc
        if scale is not None:
            self.scale = scale

    # loc and scale: stored as host arrays, shown as rlpipe tensors
    @staticmethod
    def _as_array(value, what):
        if value is None:
            return None
        arr = host_array(value)
        if arr.dtype.kind not in "fiub":
            raise TypeError(f"ObservationNorm: {what} must be numeric, got dtype {arr.dtype}")
        if arr.dtype.kind != "f":
            arr = arr.astype(np.float32)
        return np.array(arr)

    @property
    def loc(self):
        return None if self._loc is None else as_tensor(self._loc)

    @loc.setter
    def loc(self, value):
        self._loc = self._as_array(value, "loc")
        self._cast = {}
        self._invalidate()

    @property
    def scale(self):
        return None if self._scale is None else as_tensor(self._scale)

    @scale.setter
    def scale(self, value):
        self._scale = self._as_array(value, "scale")
        self._cast = {}
        self._invalidate()

    @property
    def initialized(self):
        return self._loc is not None and self._scale is not None

    def _params(self, dtype):
        params = self._cast.get(dtype)
        if params is None:
            if not self.initialized:
                raise RuntimeError("Loc/Scale have not been initialized. Either pass in values in the "
                                   "constructor or call the init_stats method")
            params = self._cast[dtype] = (self._loc.astype(dtype), self._scale.astype(dtype))
        return params

    def _apply_transform(self, value):
        if value.dtype.kind != "f":
            value = value.astype(np.float32)
        loc, scale = self._params(value.dtype)
        if self.standard_normal:
            return (value - loc) / scale
        return value * scale + loc

    def _transform_leaf_spec(self, spec):
        if not self.initialized:
            return spec
        if not spec.dtype.is_floating_point:
            raise ValueError(f"ObservationNorm: expected a floating observation, got a spec of dtype {spec.dtype}")
        shape = tuple(spec.shape)
        try:
            np.broadcast_shapes(shape, self._loc.shape, self._scale.shape)
        except ValueError:
            raise ValueError(f"ObservationNorm: loc {list(self._loc.shape)} and scale {list(self._scale.shape)} "
                             f"do not broadcast against the observation's shape {list(shape)}") from None
        if isinstance(spec, Bounded):
            low, high = _bounds(spec)
            with np.errstate(over="ignore", invalid="ignore"):
                a, b = self._apply_transform(low), self._apply_transform(high)
            # the same float arithmetic as the observations: the bounds stay exact bounds
            lo, hi = np.minimum(a, b), np.maximum(a, b)
            return Bounded(low=np.broadcast_to(lo, shape), high=np.broadcast_to(hi, shape), shape=spec.shape,
                           dtype=spec.dtype, device=spec.device)
        return Unbounded(shape=spec.shape, dtype=spec.dtype, device=spec.device)

    def init_stats(self, num_iter, reduce_dim=0, cat_dim=None, key=None, keep_dims=None):
        """Estimates ``loc`` and ``scale`` from rollouts of the parent env (the env before this
        transform) with random actions, as torchrl does: rollouts of up to ``num_iter`` steps are
        collected until ``num_iter`` frames are, ``key`` (default: the only in key) is concatenated
        along ``cat_dim`` (default ``reduce_dim``), and its mean and (unbiased) std over
        ``reduce_dim`` (an int or a list) give ``loc`` and ``scale`` (as ``-mean/std`` and
        ``1/std`` when not ``standard_normal``). ``keep_dims``: reduced dims to keep as size 1."""
        if self.initialized:
            raise RuntimeError("Loc/Scale are already initialized")
        if isinstance(num_iter, bool) or not isinstance(num_iter, (int, np.integer)) or num_iter < 1:
            raise ValueError(f"init_stats: num_iter must be a positive int, got {num_iter!r}")
        if len(self.in_keys) > 1 and key is None:
            raise RuntimeError("Transform has multiple in_keys but no specific key was passed as an argument")
        key = self.in_keys[0] if key is None else _unravel(key)
        if key not in self.in_keys:
            raise KeyError(f"init_stats: key {_key_str(key)!r} is not among the in_keys "
                           f"{[_key_str(k) for k in self.in_keys]}")
        cat_dim = reduce_dim if cat_dim is None else cat_dim
        parent = self.parent
        if parent is None:
            raise RuntimeError("Cannot initialize the transform if parent env is not defined.")
        for t in parent._leaf_list():
            if isinstance(t, ObservationNorm) and not t.initialized:
                raise RuntimeError("ObservationNorms need to be initialized in the right order. Trying to "
                                   "initialize an ObservationNorm while a parent ObservationNorm transform is "
                                   "still uninitialized")
        data, collected = [], 0
        while collected < num_iter:
            td = parent.rollout(max_steps=int(num_iter))
            collected += td.numel()
            data.append(host_array(td.get(_key_str(key))))
        dtype = np.float64 if data[0].dtype == np.float64 else np.float32
        data = np.concatenate(data, axis=cat_dim).astype(np.float64)
        dims = [reduce_dim] if isinstance(reduce_dim, int) else list(reduce_dim)
        dims = tuple(d % data.ndim for d in dims)
        count = int(np.prod([data.shape[d] for d in dims]))
        if count < 2:
            raise RuntimeError(f"init_stats: {count} value(s) along the reduced dims; std needs at least 2")
        loc = data.mean(axis=dims, keepdims=True)
        scale = data.std(axis=dims, ddof=1, keepdims=True)
        keep = set() if keep_dims is None else {d % data.ndim for d in
                                                ([keep_dims] if isinstance(keep_dims, int) else keep_dims)}
        squeeze = tuple(d for d in dims if d not in keep)
        loc, scale = loc.squeeze(axis=squeeze), scale.squeeze(axis=squeeze)
        if not self.standard_normal:
            scale = 1.0 / np.maximum(scale, self.eps)
            loc = -loc * scale
        if not np.isfinite(loc).all():
            raise RuntimeError("Non-finite values found in loc")
        if not np.isfinite(scale).all():
            raise RuntimeError("Non-finite values found in scale")
        self._loc = loc.astype(dtype)
        self._scale = np.maximum(scale, self.eps).astype(dtype)
        self._cast = {}
        self._invalidate()

    def __repr__(self):
        return (f"ObservationNorm(keys={[_key_str(k) for k in self.in_keys]}, standard_normal="
                f"{self.standard_normal}, initialized={self.initialized})")


class RenameTransform(_KeyWise):
    """Renames observation entries: ``in_keys[i]`` becomes ``out_keys[i]`` (kept too with
    ``create_copy=True``), in the frames and in the observation spec."""

    def __init__(self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, create_copy=False):
        if in_keys_inv is not None or out_keys_inv is not None:
            raise NotImplementedError("RenameTransform: in_keys_inv/out_keys_inv (renaming inputs) are not "
                                      "supported on rlpipe's frame protocol")
        in_keys, out_keys = _keys(in_keys, "in_keys"), _keys(out_keys, "out_keys")
        if len(in_keys) != len(out_keys):
            raise ValueError(f"RenameTransform: in_keys and out_keys must have the same length, got "
                             f"{len(in_keys)} and {len(out_keys)}")
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.create_copy = bool(create_copy)

    def _call(self, frame):
        out = dict(frame)
        values = [out.get(k) if self.create_copy else out.pop(k, None) for k in self.in_keys]
        for ok, value in zip(self.out_keys, values):
            if value is not None:
                out[ok] = value
        return out

    def transform_observation_spec(self, observation_spec):
        keys = {_unravel(k) for k in observation_spec.keys(True, True)}
        missing = [k for k in self.in_keys if k not in keys]
        if missing:
            raise KeyError(f"RenameTransform: key(s) {[_key_str(k) for k in missing]} not found in the "
                           f"observation spec (keys: {sorted(map(str, observation_spec.keys(True, True)))})")
        specs = [observation_spec[k] for k in self.in_keys]
        if not self.create_copy:
            for k in self.in_keys:
                del observation_spec[k]
        for ok, spec in zip(self.out_keys, specs):
            observation_spec[ok] = spec.clone()
        return observation_spec

    def __repr__(self):
        return (f"RenameTransform(in_keys={[_key_str(k) for k in self.in_keys]}, "
                f"out_keys={[_key_str(k) for k in self.out_keys]}, create_copy={self.create_copy})")
