"""How transforms plug into an environment: ``TransformedEnv``, the ``Transform`` base and ``Compose``.

A ``TransformedEnv`` is an ``EnvBase`` whose frame methods call the base env's and pass the frames
through its transforms, so the collector drives a transformed env exactly as a plain one, and
``reset``/``step``/``rollout`` see the transformed data. How frames flow through the transforms,
and the rule that a transform is written against TensorDicts and specs as torchrl's are (with
an array fast path behind the same interface): ``step_protocol.py``. The concrete transforms are
in ``transforms.py``.

The specs a transform receives from the env before it are available as ``self.parent_specs``
while its spec hooks run. ``TransformedEnv`` flattens nested ``Compose``\\ s and keeps every
transform's root and next frames itself, so transforms hold no per-episode state and may be
re-used by ``parent`` views (``ObservationNorm.init_stats``). When no env is done,
``_continue_frame`` costs one ``any``.
"""
import copy as _copy
import functools
import os
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from .._tensor import Size
from ..nn import Module, ModuleList
from .common import EnvBase, checked_train_mode
from .spec_surface import SpecSurface
from .specs import Composite, TensorSpec
from .tensordict_envs import TorchRLStyleFrames, complete_done
from .step_protocol import (REWARD, TERMINATED, TRUNCATED, TransformProtocol, continue_chain, key_list, reset_chain,
                            restart_rows, spec_chain, step_chain)

__all__ = ["Compose", "Transform", "TransformedEnv", "auto_unwrap_transformed_env", "set_auto_unwrap_transformed_env"]

_keys = key_list  # (transforms.py imports it from here)


def _key_str(key):
    return key[0] if len(key) == 1 else key


class Transform(TransformProtocol, Module):
    """Base of every transform: torchrl's TensorDict methods and spec hooks, and the frame hooks
    that run them (``step_protocol.py``, THE RULE).

    ``in_keys``/``out_keys``/``in_keys_inv``/``out_keys_inv`` are lists of key tuples (given as
    strings or tuples). A transform belongs to at most one container (a ``Compose`` or a
    ``TransformedEnv``); ``clone()`` gives an unattached copy. As torchrl's, a transform is an
    ``nn.Module``: it goes in an ``nn.Sequential``, and ``to``, ``parameters()``, ``train``/``eval``
    see the modules it holds; calling it runs ``forward`` without module hooks, and
    ``state_dict`` holds the transform's own state (below).
    """

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        Module.__init__(self)
        TransformProtocol.__init__(self, in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv,
                                   out_keys_inv=out_keys_inv)
        self._container = None
        self.parent_specs = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        old = sorted(name for name in ("_continue", "_inv_action") if name in cls.__dict__)
        if old:  # would be silently ignored: the env calls _frame_continue and _frame_inv
            raise TypeError(f"{cls.__name__} defines {old}, frame hooks rlpipe renamed: write _frame_reset(frame), "
                            "_frame_step(root, next_frame, action), _frame_continue(next_frame, frame, done) and "
                            "_frame_inv(action, root), or torchrl's TensorDict methods (step_protocol.py)")

    def __call__(self, tensordict):
        return self.forward(tensordict)

    def _check_frame_inputs(self):
        """Raises when this transform needs an env input the frame path does not carry (the frame
        path hands the base env only the action)."""

    def __setattr__(self, name, value):
        if name == "_container":  # the Compose holding this transform is not a child module of it
            object.__setattr__(self, name, value)
        else:
            Module.__setattr__(self, name, value)

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
        """The ``Compose`` or ``TransformedEnv`` holding this transform (None if unattached)."""
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

    def _before_reset(self):
        """Called by the env just before its base env resets (``Timer`` starts its clock); no-op."""

    _skip_mask = None  # a step-skipping transform (ConditionalSkip): per env, whether it skips this step

    def transform_env_device(self, device):
        """The device of the env after this transform, from the one before it (unchanged by default)."""
        return device

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
        """An unattached deep copy of this transform (it can go in another container)."""
        container, specs = self._container, self.parent_specs
        self._container = self.parent_specs = None
        try:
            return _copy.deepcopy(self)
        finally:
            self._container, self.parent_specs = container, specs

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
        self.transforms = ModuleList(transforms)
        for t in self.transforms:
            t._set_container(self)
        self._roots = self._nexts = None

    def _set_container(self, container):
        before = self._container
        super()._set_container(container)
        try:
            for t in self.transforms:  # each child checks where it now sits (Reward2GoTransform refuses an env)
                t._set_container(self)
        except BaseException:
            self._container = before
            raise

    def state_dict(self, prefix=""):
        """Every child's state, under ``"transforms.<index>."`` (torchrl's module-list names)."""
        out = OrderedDict()
        for i, t in enumerate(self.transforms):
            out.update(t.state_dict(f"{prefix}transforms.{i}."))
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Takes back ``state_dict()`` (keys ``"<index>."`` without ``"transforms."``, rlpipe's earlier
        layout, are read too)."""
        parts = [OrderedDict() for _ in self.transforms]
        for key, value in state_dict.items():
            index, _, rest = key.removeprefix("transforms.").partition(".")
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

    # torchrl's TensorDict methods: the children in order (inverses last to first)
    def _call(self, next_tensordict):
        for t in self.transforms:
            next_tensordict = t._call(next_tensordict)
        return next_tensordict

    def _step(self, tensordict, next_tensordict):
        for t in self.transforms:
            next_tensordict = t._step(tensordict, next_tensordict)
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        for t in self.transforms:
            tensordict_reset = t._reset(tensordict, tensordict_reset)
        return tensordict_reset

    def _inv_call(self, tensordict):
        for t in reversed(self.transforms):
            tensordict = t._inv_call(tensordict)
        return tensordict

    # frame hooks (standalone use: a TransformedEnv runs the leaves itself)
    def _frame_reset(self, frame):
        self._roots, self._nexts = reset_chain(self.transforms, frame), None
        return self._roots[-1] if self._roots else frame

    def _frame_step(self, root, next_frame, action):
        if self._roots is None:
            raise RuntimeError("Compose: _frame_step before _frame_reset")
        nexts = step_chain(self.transforms, self._roots, next_frame, action)
        self._nexts = self._roots = nexts
        return nexts[-1] if nexts else next_frame

    def _frame_continue(self, next_frame, frame, done):
        if self._nexts is None:
            raise RuntimeError("Compose: _frame_continue without a preceding _frame_step")
        self._roots, self._nexts = continue_chain(self.transforms, self._nexts, frame, done), None
        return self._roots[-1] if self._roots else frame

    def _frame_inv(self, action, root):
        roots = self._roots or [root] * len(self.transforms)
        for t, own_root in zip(reversed(self.transforms), reversed(roots)):
            action = t._frame_inv(action, own_root)
        return action

    def _inverts_actions(self):
        return any(t._inverts_actions() for t in self.transforms)

    # spec hooks: each child sees the specs its predecessors produced
    def transform_env_batch_size(self, batch_size):
        """The batch size through each transform in order."""
        for t in self.transforms:
            batch_size = t.transform_env_batch_size(batch_size)
        return batch_size

    def _through_children(self, hook, spec):
        for t in self.transforms:
            spec = getattr(t, hook)(spec)
        return spec

    def transform_observation_spec(self, observation_spec):
        return self._through_children("transform_observation_spec", observation_spec)

    def transform_action_spec(self, action_spec):
        return self._through_children("transform_action_spec", action_spec)

    def transform_reward_spec(self, reward_spec):
        return self._through_children("transform_reward_spec", reward_spec)

    def transform_done_spec(self, done_spec):
        return self._through_children("transform_done_spec", done_spec)

    def transform_state_spec(self, state_spec):
        return self._through_children("transform_state_spec", state_spec)

    def transform_output_spec(self, output_spec):
        return self._through_children("transform_output_spec", output_spec)

    def transform_input_spec(self, input_spec):
        return self._through_children("transform_input_spec", input_spec)

    def forward(self, tensordict):
        for t in self.transforms:
            tensordict = t.forward(tensordict)
        return tensordict

    # list interface
    def append(self, transform):
        """Adds ``transform`` after the others (the env holding this ``Compose`` rebuilds its specs)."""
        _check_transform(transform, "Compose.append")
        transform._set_container(self)
        self.transforms.append(transform)
        self._invalidate()

    def insert(self, index, transform):
        """Inserts ``transform`` at ``index`` (from ``-len`` to ``len``)."""
        _check_transform(transform, "Compose.insert")
        n = len(self.transforms)
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"Index expected to be int, got {type(index).__name__}")
        if index < -n or index > n:
            raise ValueError(f"Index expected to be between [-{n}, {n}] got index={index}")
        transform._set_container(self)
        self.transforms.insert(index, transform)
        self._invalidate()

    def pop(self, index=-1):
        """Removes and returns the transform at ``index`` (the last by default), now unattached."""
        n = len(self.transforms)
        if not -n <= index < n:
            raise IndexError(f"Compose.pop: index {index} is out of range for {n} transforms")
        transform = self.transforms[index]
        del self.transforms[index]
        transform._container = None
        self._invalidate()
        return transform

    def __getitem__(self, item):
        if isinstance(item, slice):
            return Compose(*[t.clone() for t in self.transforms[item]])
        return self.transforms[item]

    def __len__(self):
        return len(self.transforms)

    def __iter__(self):
        return iter(self.transforms)

    def clone(self):
        """An unattached deep copy of the ``Compose`` and its transforms."""
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


def _overrides_skip(transform):
    """Whether ``transform``'s class (not ``Transform``) declares ``_skip_mask``: it may skip steps."""
    owner = next(cls for cls in type(transform).__mro__ if "_skip_mask" in vars(cls))
    return owner is not Transform


def _check_transform(transform, where):
    if not isinstance(transform, Transform):
        raise TypeError(f"{where} expected a transform but received an object of type "
                         f"{type(transform).__name__} instead.")


# ---- the environment ---------------------------------------------------------------------------------

class _Pipeline(NamedTuple):
    """What a ``TransformedEnv`` runs: its leaf transforms, the specs they produce from the base env's,
    the action hooks ((index, ``_frame_inv``) of the transforms that invert actions, last transform
    first), the base env's spec version it was built from (None unless the base env is itself
    transformed: then only ``_invalidate_specs`` makes it stale), the env's device after the
    transforms (``DeviceCastTransform`` moves it), and the transforms that may skip a step
    (``ConditionalSkip``: they say so in ``_skip_mask`` when their action hook runs)."""
    leaves: list
    observation_spec: Composite
    action_spec: TensorSpec
    reward_spec: TensorSpec
    done_spec: Composite
    action_hooks: list
    base_version: object
    device: object
    skippers: list
    tensordicts: bool = False  # steps run over TensorDicts (torchrl's _reset/_step), not frames


_AUTO_UNWRAP_VAR = "AUTO_UNWRAP_TRANSFORMED_ENV"  # (in os.environ too: worker processes inherit the mode)


def auto_unwrap_transformed_env(allow_none=False):
    """Whether ``TransformedEnv(TransformedEnv(env, t1), t2)`` becomes ``TransformedEnv(env,
    Compose(t1, t2))``: as set by ``set_auto_unwrap_transformed_env`` or the
    ``AUTO_UNWRAP_TRANSFORMED_ENV`` environment variable, else None with ``allow_none`` and False
    otherwise (rlpipe keeps the nesting unless asked; torchrl 0.14 unwraps by default)."""
    value = os.environ.get(_AUTO_UNWRAP_VAR)
    if value is None:
        return None if allow_none else False
    return value.strip().lower() in ("1", "true", "yes", "on")


class set_auto_unwrap_transformed_env:
    """Sets ``auto_unwrap_transformed_env``: as a context manager, a decorator, or for good with
    ``.set()`` (torchrl's); leaving the context puts back what was there, unset included."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self._previous = []

    def set(self):
        """Sets the mode from now on."""
        os.environ[_AUTO_UNWRAP_VAR] = str(self.mode)

    def __enter__(self):
        self._previous.append(os.environ.get(_AUTO_UNWRAP_VAR))
        self.set()
        return self

    def __exit__(self, *exc):
        previous = self._previous.pop()
        if previous is None:
            os.environ.pop(_AUTO_UNWRAP_VAR, None)
        else:
            os.environ[_AUTO_UNWRAP_VAR] = previous

    def __call__(self, function):
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            with self:
                return function(*args, **kwargs)
        return wrapped


def _unwraps(auto_unwrap):
    return auto_unwrap_transformed_env() if auto_unwrap is None else bool(auto_unwrap)


def _transformed_spec(name):
    """A ``TransformedEnv`` spec property: the base env's spec through the transforms; settable."""
    def get(self):
        return getattr(self._built(), name)

    def set_(self, value):
        self._set_spec(name, value)
    return property(get, set_, doc=f"The ``{name}`` after the transforms (settable, as on torchrl's).")


class TransformedEnv(EnvBase):
    """An environment with transforms: ``TransformedEnv(env, transform=None)``.

    Its specs are the base env's passed through the transforms; its frame methods call the base
    env's and pass the frames through the transforms (module docstring). ``transform`` is the
    transform given (a ``Compose`` once ``append_transform``/``insert_transform`` added more);
    ``base_env`` the wrapped env. Attributes not found here are looked up on ``base_env``.
    ``auto_unwrap=True`` (or ``set_auto_unwrap_transformed_env(True)``) flattens a wrapped
    ``TransformedEnv`` as torchrl does: its base env becomes this one's, its transforms (copies)
    come first. The default keeps the nesting.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._tensordict_style = TransformedEnv.__dict__["_tensordict_style"]

    def __init__(self, env, transform=None, device=None, *, auto_unwrap=None, **kwargs):
        if kwargs:
            raise TypeError(f"TransformedEnv got unexpected keyword arguments {sorted(kwargs)}")
        if not isinstance(env, EnvBase):
            raise TypeError(f"TransformedEnv wraps an rlpipe EnvBase, got {type(env).__name__}")
        if device is not None and device != env.device:
            raise ValueError("TransformedEnv: device must be the base env's device (move the base env instead)")
        if type(env) is TransformedEnv and type(self) is TransformedEnv and _unwraps(auto_unwrap):
            inner = env.transform.clone()  # torchrl's: the inner transforms (copies), then this one
            env, transform = env.base_env, inner if transform is None else Compose(inner, transform)
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

    @property
    def batch_size(self):
        """The base env's batch size through the transforms (``BatchSizeTransform`` changes it)."""
        state = self.__dict__
        if "base_env" not in state:  # (EnvBase.__init__, before the base env is set)
            return Size(())
        base_batch_size = state["base_env"].batch_size
        cached = state.get("_batch_size_cache")  # (version of the transforms, base's batch size, ours)
        if cached is not None and cached[0] == state.get("_spec_version") and cached[1] is base_batch_size:
            return cached[2]
        batch_size = base_batch_size
        for t in self._leaf_list():
            batch_size = t.transform_env_batch_size(batch_size)
        state["_batch_size_cache"] = (state.get("_spec_version"), base_batch_size, batch_size)
        return batch_size

    @batch_size.setter
    def batch_size(self, value):
        if "base_env" in self.__dict__:
            raise RuntimeError("Cannot modify the batch-size of a transformed env. Change the batch size of the "
                               "base_env instead.")

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
        obs, act, rew, done = spec_chain(leaves, base.observation_spec.clone(), base.action_spec.clone(),
                                         base.reward_spec.clone(), base.done_spec.clone(), base.batch_size)
        hooks = [(i, t._frame_inv) for i, t in reversed(list(enumerate(leaves))) if t._inverts_actions()]
        if pipeline is not None and pipeline.leaves != leaves:
            self._roots = self._nexts = None
        base_version = base._spec_version if isinstance(base, TransformedEnv) else None
        device = base.device
        for t in leaves:
            device = t.transform_env_device(device)
        skippers = [t for t in leaves if _overrides_skip(t)]
        tensordicts = _steps_over_tensordicts(base) or any(getattr(t, "_needs_tensordicts", False) for t in leaves)
        if not tensordicts:
            for t in leaves:
                t._check_frame_inputs()
        self._pipeline = _Pipeline(leaves, obs, act, rew, done, hooks, base_version, device, skippers, tensordicts)
        return self._pipeline

    @property
    def device(self):
        """The device of the env's TensorDicts: the base env's, unless a transform moves it."""
        if "base_env" not in self.__dict__:  # (EnvBase.__init__, before the base env is set)
            return self.__dict__.get("_device")
        return self._built().device

    @device.setter
    def device(self, value):
        self.__dict__["_device"] = value

    observation_spec = _transformed_spec("observation_spec")
    action_spec = _transformed_spec("action_spec")
    reward_spec = _transformed_spec("reward_spec")
    done_spec = _transformed_spec("done_spec")

    def _set_spec(self, name, value):
        """torchrl's: a spec set on a transformed env (checked as on any env) replaces the one its
        transforms give, until the transforms or the base env's specs change."""
        getattr(SpecSurface, name).fset(self, value)  # the checks; it stores self.__dict__["_" + name]
        spec = self.__dict__.pop("_" + name)
        self._pipeline = self._built()._replace(**{name: spec})
        self._spec_version += 1

    # ---- the steps stored (torchrl's post-step hooks: NextObservationDelta) -------------------------
    def _stored_step_rewriters(self):
        """The transforms that rewrite the steps this env hands out: ``_stepped(td)`` after ``step``,
        ``_stored_step(td)`` on what ``rollout``/``step_and_maybe_reset`` and collectors store."""
        return [t for t in self._built().leaves if getattr(t, "_rewrites_stored_steps", False)]

    def step(self, tensordict):
        """``EnvBase.step``, then the rewriting transforms' ``_stepped``."""
        out = super().step(tensordict)
        for t in self._stored_step_rewriters():
            out = t._stepped(out)
        return out

    def rollout(self, max_steps, policy=None, callback=None, **kwargs):
        """``EnvBase.rollout``, the steps as the rewriting transforms store them."""
        out = super().rollout(max_steps, policy, callback, **kwargs)
        for t in self._stored_step_rewriters():
            out = t._stored_step(out)
        return out

    def step_and_maybe_reset(self, tensordict):
        """``EnvBase.step_and_maybe_reset``; the stepped TensorDict as the rewriting transforms store it."""
        stepped, root = super().step_and_maybe_reset(tensordict)
        for t in self._stored_step_rewriters():
            stepped = t._stored_step(stepped)
        return stepped, root

    # ---- torchrl's TensorDict path (a base env that reads inputs besides the action) ----------------
    @property
    def batch_locked(self):
        """The base env's (a torchrl-style env may take any batch size)."""
        return self.base_env.batch_locked

    def _stored(self, attribute, name):
        """(SpecSurface) The transformed spec ``name``: a transformed env holds one action and one reward."""
        return getattr(self, name)

    @property
    def state_spec(self):
        """The base env's state spec through the transforms (``in_keys_inv`` on state entries)."""
        spec = self.base_env.state_spec.clone()
        for t in self._built().leaves:
            spec = t.transform_state_spec(spec)
        return spec

    @state_spec.setter
    def state_spec(self, value):
        SpecSurface.state_spec.fset(self, value)

    def _reset(self, tensordict=None, **kwargs):
        """torchrl's ``TransformedEnv._reset``: the base env's ``_reset`` on the reset keys and state
        entries of ``tensordict``, then the transforms' ``_reset``."""
        if tensordict is not None:
            tensordict = tensordict.select(*self.reset_keys, *self.state_spec.keys(True, True), strict=False)
        tensordict_reset = self._base_reset(tensordict, **kwargs)
        if tensordict is None:
            tensordict = tensordict_reset.empty()
        complete_done(self.base_env.full_done_spec, tensordict_reset)
        return self.transform._reset(tensordict, tensordict_reset)

    def _step(self, tensordict):
        """torchrl's ``TransformedEnv._step``: the inverse transforms on a copy of ``tensordict`` (state
        entries included), the base env's ``_step``, then the transforms' ``_step``."""
        next_tensordict = self._base_step(self.transform.inv(tensordict))
        complete_done(self.base_env.full_done_spec, next_tensordict)
        return self.transform._step(tensordict, next_tensordict)

    def _base_reset(self, tensordict, **kwargs):
        """The base env's ``_reset``; a frame env's ``reset`` (a partial reset with the ``"_reset"`` mask
        at the base env's batch size)."""
        base = self.base_env
        if base._tensordict_style:
            return base._reset(tensordict, **kwargs)
        if tensordict is None or "_reset" not in tensordict.keys():
            return base.reset(**kwargs)
        return base.reset(tensordict.reshape(base.batch_size), **kwargs)

    def _base_step(self, tensordict):
        """The base env's ``_step``; a frame env's ``step`` and its ``"next"`` entry."""
        base = self.base_env
        if base._tensordict_style:
            return base._step(tensordict)
        return base.step(tensordict.clone(False)).get("next")

    # ---- the frame methods (step_protocol.py) -----------------------------------------------------
    def _reset_frame(self, seed=None):
        if self._built().tensordicts:
            return TorchRLStyleFrames._reset_frame(self, seed)
        leaves = self._built().leaves
        for t in leaves:
            t._before_reset()
        frame = self.base_env._reset_frame(seed)
        self._roots, self._nexts = reset_chain(leaves, frame), None
        self._skipped_rows = None
        return self._roots[-1] if leaves else frame

    def _step_frame(self, action):
        pipeline = self._pipeline  # _built()'s answer, without the call on the hot path where it cannot be stale
        if pipeline is None or pipeline.base_version is not None:
            pipeline = self._built()
        if pipeline.tensordicts:
            return TorchRLStyleFrames._step_frame(self, action)
        roots = self._roots
        if roots is None:
            raise RuntimeError("TransformedEnv: reset the environment before stepping it "
                               "(or after changing its transforms)")
        if self._nexts is not None:  # stepping on without _continue_frame: carry every frame over
            roots = self._roots = self._nexts
        for index, inv in pipeline.action_hooks:
            action = inv(action, roots[index])
        if pipeline.skippers and self._skips_step(pipeline.skippers):
            return self._skipped_step(pipeline, roots)
        base = self.base_env
        next_obs, reward, terminated, truncated = base._step_frame(action)
        self._base_next = next_obs
        frame = dict(next_obs)
        frame[REWARD] = reward
        frame[TERMINATED] = terminated
        frame[TRUNCATED] = truncated
        nexts = step_chain(pipeline.leaves, roots, frame, action)
        self._skipped_rows = skipped = base._skipped_rows
        if skipped is not None and nexts:
            nexts = restart_rows(pipeline.leaves, nexts, next_obs, skipped, self._flag_shape)
        if nexts:
            frame = nexts[-1]
        self._nexts = nexts
        out = dict(frame)
        reward, terminated, truncated = out.pop(REWARD), out.pop(TERMINATED), out.pop(TRUNCATED)
        self._next_out = out
        return out, reward, terminated, truncated

    def _skips_step(self, skippers):
        """Whether every env skips this step (torchrl's ``"_step"`` all False); an rlpipe env steps
        all its envs or none, so some skipping and others not is refused before anything runs."""
        skip = np.logical_or.reduce([t._skip_mask for t in skippers])
        if skip.all():
            return True
        if skip.any():
            raise NotImplementedError(f"ConditionalSkip: envs {np.argwhere(skip).tolist()} skip this step and the "
                                      "others do not; an rlpipe env steps all its envs or none")
        return False

    def _skipped_step(self, pipeline, roots):
        """A skipped step, as torchrl's: the root's observations again, reward 0, not done; the base
        env and the transforms do not run."""
        out = {key: value for key, value in roots[-1].items() if key not in (REWARD, TERMINATED, TRUNCATED)}
        self._nexts, self._next_out, self._skipped_rows = list(roots), out, None
        flags = np.zeros(self._flag_shape, dtype=bool)
        reward = np.zeros(tuple(pipeline.reward_spec.shape), dtype=pipeline.reward_spec.dtype.np)
        return dict(out), reward, flags, flags.copy()

    @property
    def _skips_rows(self):
        return self.base_env._skips_rows

    def _set_exact_resets(self, exact):
        return self.base_env._set_exact_resets(exact)

    def _continue_frame(self, next_obs, done):
        """``next_obs`` must be what the last ``_step_frame`` returned (the transformed env keeps
        its own record of it, and of the base env's untransformed one)."""
        if self._built().tensordicts:
            return TorchRLStyleFrames._continue_frame(self, next_obs, done)
        nexts = self._nexts
        if nexts is None:
            raise RuntimeError("TransformedEnv: _continue_frame without a preceding _step_frame")
        leaves = self._built().leaves
        if type(done) is not np.ndarray or done.shape != self._flag_shape:
            done = np.asarray(done, dtype=bool).reshape(self._flag_shape)
        frame = self._base_continue(done)
        self._base_next = None
        if not np.count_nonzero(done):
            self._roots, self._nexts = nexts, None
            return self._next_out
        self._roots, self._nexts = continue_chain(leaves, nexts, frame, done), None
        return self._roots[-1] if leaves else frame

    def _base_continue(self, done):
        """The base env's root frame after the last step, the ``done`` envs reset."""
        return self.base_env._continue_frame(self._base_next, done)

    # ---- the rest ----------------------------------------------------------------------------------
    def set_seed(self, seed, static_seed=False):
        self._roots = self._nexts = None
        return self.base_env.set_seed(seed, static_seed=static_seed)

    @property
    def is_closed(self):
        """The base env's ``is_closed`` (as torchrl's)."""
        return self.base_env.is_closed

    @is_closed.setter
    def is_closed(self, value):
        self.base_env.is_closed = value

    def train(self, mode=True):
        """Sets the transforms' training mode (torchrl's: the env's own flag and the base env's stay);
        returns the env."""
        self.transform.train(checked_train_mode(mode))
        return self

    def eval(self):
        """``train(False)``: the transforms' training flags off; returns the env."""
        return self.train(False)

    def apply(self, fn):
        """Calls ``fn`` on the base env, then on every transform module (children first), then on this
        env, in torchrl's order (e.g. ``env.apply(dump_video)`` reaches its ``VideoRecorder``); returns the env."""
        self.base_env.apply(fn)
        self.transform.apply(fn)
        fn(self)
        return self

    def state_dict(self, prefix=""):
        """The transforms' state (torchrl's: the transform's ``state_dict``, the base env's left out)."""
        return self.transform.state_dict(prefix)

    def load_state_dict(self, state_dict, strict=True):
        """Takes back ``state_dict()`` into the transforms."""
        self.transform.load_state_dict(state_dict, strict=strict)

    def close(self):
        """Closes the base env, then this one."""
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


def _steps_over_tensordicts(base):
    """Whether a ``TransformedEnv`` over ``base`` runs torchrl's TensorDict path: for a torchrl-style
    env that reads state entries besides the action, or takes any batch size (not batch-locked).
    Other envs run the frame path (transforms' array hooks)."""
    return base._tensordict_style and (bool(base.state_spec.keys()) or not base.batch_locked)


def _uses_tensordicts(env):
    return "base_env" in env.__dict__ and env._built().tensordicts


# EnvBase.__init_subclass__ marks classes that define _reset/_step as torchrl-style: a TransformedEnv is
# one only when its base env needs the TensorDict path (its subclasses too: see __init_subclass__)
TransformedEnv._tensordict_style = property(_uses_tensordicts, doc="Whether steps run over TensorDicts.")
EnvBase._transformed_env_class = TransformedEnv  # what EnvBase.append_transform builds (common cannot import us)


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
