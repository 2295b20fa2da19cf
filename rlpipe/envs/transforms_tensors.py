"""torchrl 0.14's transforms of entries and keys, written against TensorDicts and specs as torchrl's
are (``step_protocol.py``, THE RULE): the reset tracker ``InitTracker``; the reward maps
``RewardScaling``, ``RewardClipping``, ``BinarizeReward`` and ``SignTransform``; the shape and value
maps ``CatTensors``, ``UnsqueezeTransform``, ``SqueezeTransform``, ``PermuteTransform``,
``FlattenObservation`` and ``ClipTransform``; ``TensorDictPrimer``; ``LineariseRewards``,
``UnaryTransform``, ``FiniteTensorDictCheck``, ``FlattenAction`` and ``ExpandAs``.

Where rlpipe differs: an rlpipe env has one reward, the done flags ``done``/``terminated``/
``truncated`` and one action, and takes no input but ``"action"``. So these transforms may change
the reward in place but not write it under a new key, never drop the reward or the done flags,
and invert only ``"action"`` (``in_keys_inv``/``out_keys_inv``); asking for more is a clear error.
"""
import numpy as np

from .. import _dtypes
from .._creation import as_tensor, full, ones, tensor, zeros
from .._tensor import Tensor
from ..primitives.shape import cat
from ..tensordict import NonTensorData, unravel_key_to_tuple
from .specs import Binary, Bounded, Categorical, Composite, TensorSpec, Unbounded
from .step_protocol import ACTION, REWARD, RESET, key_list
from .transformed_env import Transform, _key_str

__all__ = ["BinarizeReward", "CatTensors", "ClipTransform", "ExpandAs",
           "FiniteTensorDictCheck", "FlattenAction", "FlattenObservation", "InitTracker", "LineariseRewards",
           "PermuteTransform", "RewardClipping", "RewardScaling", "SignTransform", "SqueezeTransform",
           "TensorDictPrimer", "UnaryTransform", "UnsqueezeTransform"]

_FLOAT_MAX = float(np.finfo(np.float32).max)


def _names(keys):
    return [_key_str(k) for k in keys]


def _spec_keys(spec):
    return {unravel_key_to_tuple(k) for k in spec.keys(True, True)}


def _tolerant_call(transform, tensordict, method="_call"):
    """``transform._call(tensordict)`` (or ``method(tensordict, tensordict)``, a ``_step``) with
    missing entries skipped: a reset lacks the reward."""
    mode = transform._missing_tolerance
    transform._missing_tolerance = True
    try:
        if method == "_call":
            return transform._call(tensordict)
        return getattr(transform, method)(tensordict, tensordict)
    finally:
        transform._missing_tolerance = mode


def check_paired_keys(transform):
    """A ValueError unless ``transform`` has as many out keys as in keys, and as many inverse ones."""
    for what, ins, outs in (("in_keys and out_keys", transform.in_keys, transform.out_keys),
                            ("in_keys_inv and out_keys_inv", transform.in_keys_inv, transform.out_keys_inv)):
        if len(ins) != len(outs):
            raise ValueError(f"{type(transform).__name__}: {what} must have the same length, got {len(ins)} and "
                             f"{len(outs)}")


def _reshaped_spec(spec, function):
    """``spec`` after ``function``, a map of tensors that moves, adds or merges dims (bounds included)."""
    if isinstance(spec, Bounded):
        low, high = function(spec.low), function(spec.high)
        return Bounded(low=low, high=high, shape=low.shape, dtype=spec.dtype, device=spec.device)
    return spec._with(shape=function(zeros(spec.shape)).shape, reshape=True)


class _EntryTransform(Transform):
    """A transform of entries: each ``in_keys`` entry (an observation, or the reward in place) through
    ``_apply_transform`` into ``out_keys``, its spec through ``_transform_spec``; the action, if
    ``in_keys_inv`` holds it, through ``_inv_apply_transform`` and its spec through
    ``_inv_transform_spec``. ``_maps_reset``: the reset observations are mapped too."""

    _maps_reset = True

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        check_paired_keys(self)

    def _reset(self, tensordict, tensordict_reset):
        return _tolerant_call(self, tensordict_reset) if self._maps_reset else tensordict_reset

    def _transform_spec(self, spec):
        return spec

    def _inv_transform_spec(self, spec):
        return spec

    def transform_observation_spec(self, observation_spec):
        if not isinstance(observation_spec, Composite):  # a leaf spec, as torchrl's hooks take too
            return self._transform_spec(observation_spec.clone())
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key == REWARD and out_key != REWARD and self._env_batch_size is not None:
                raise NotImplementedError(f"{type(self).__name__}: the reward can only be transformed in place on "
                                          f"an rlpipe env (one reward), got out_key {_key_str(out_key)!r}")
        return self._transform_entries(observation_spec)

    def _transform_entries(self, composite):
        keys = _spec_keys(composite)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in keys:
                composite[out_key] = self._transform_spec(composite[in_key].clone())
        return composite

    def transform_reward_spec(self, reward_spec):
        if isinstance(reward_spec, Composite):  # torchrl's whole reward spec, called outside an env
            return self._transform_entries(reward_spec)
        if REWARD in self.in_keys:
            return self._transform_spec(reward_spec.clone())
        return reward_spec

    def transform_action_spec(self, action_spec):
        if ACTION in self.in_keys_inv:
            return self._inv_transform_spec(action_spec.clone())
        return action_spec

    def transform_state_spec(self, state_spec):
        """Each state entry of ``in_keys_inv`` as the env's users give it: its spec mapped forward into
        the matching ``out_keys_inv``."""
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            if in_key != ACTION and in_key in _spec_keys(state_spec):
                spec = self._inv_transform_spec(state_spec[in_key].clone())
                if out_key != in_key:
                    del state_spec[in_key]
                state_spec[out_key] = spec
        return state_spec

    def _check_frame_inputs(self):
        inverted = set(self.in_keys_inv) | set(self.out_keys_inv)
        if inverted - {ACTION}:  # (outside an env, inv() maps any keys)
            raise NotImplementedError(f"{type(self).__name__}: in_keys_inv/out_keys_inv can only hold 'action' on an "
                                      "env that takes no other input (inputs beyond the action need a torchrl-style "
                                      f"env with a state_spec), got {_names(sorted(inverted))}")


# ---- resets ------------------------------------------------------------------------------------------

class InitTracker(Transform):
    """Marks the first step of each episode: the root ``init_key`` entry (bool, shaped like
    ``done``) is True right after an env's reset and False after every step."""

    def __init__(self, init_key="is_init"):
        if not isinstance(init_key, str):
            raise ValueError("init_key can only be of type str as it will be the leaf key associated to each "
                             f"reset flag, got {type(init_key).__name__}")
        super().__init__(in_keys=[], out_keys=[init_key])
        self.init_key = init_key
        self._key = (init_key,)
        self._shape = None

    @property
    def init_keys(self):
        """The keys this transform writes (torchrl's attribute): ``[init_key]``."""
        return [self.init_key]

    @property
    def reset_keys(self):
        """The reset entries it reads: an rlpipe env has one, ``"_reset"``."""
        return ["_reset"]

    # torchrl's TensorDict methods
    def _call(self, next_tensordict):
        if self._key not in _spec_keys(next_tensordict):
            done = next_tensordict.get("done")
            next_tensordict.set(self._key, zeros(done.shape, dtype=_dtypes.bool, device=done.device))
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        reset = tensordict.get(RESET, None)
        done = tensordict_reset.get("done")
        if reset is None:
            init = ones(done.shape, dtype=_dtypes.bool, device=done.device)
        else:
            init = reset.clone()
            if init.ndim < done.ndim:
                init = init.unsqueeze(-1)
        tensordict_reset.set(self._key, init)
        return tensordict_reset

    # the array fast path: the same flags on frames
    def _flag_shape(self):
        if self._shape is None:
            self._shape = tuple(self._parent_spec("done")["done"].shape)
        return self._shape

    def _frame_reset(self, frame):
        out = dict(frame)
        out[self._key] = np.ones(self._flag_shape(), dtype=bool)
        return out

    def _frame_step(self, root, next_frame, action):
        out = dict(next_frame)
        out[self._key] = np.zeros(self._flag_shape(), dtype=bool)
        return out

    def _frame_continue(self, next_frame, frame, done):
        out = dict(frame)
        out[self._key] = np.array(done, dtype=bool).reshape(self._flag_shape())
        return out

    def forward(self, tensordict):
        raise NotImplementedError("InitTracker cannot be executed without a parent environment (it marks resets)")

    def transform_observation_spec(self, observation_spec):
        shape = self._parent_spec("done")["done"].shape
        self._shape = tuple(shape)
        observation_spec[self._key] = Categorical(2, dtype=_dtypes.bool, device=observation_spec.device, shape=shape)
        return observation_spec

    def __repr__(self):
        return f"InitTracker(init_key={self.init_key!r})"


# ---- rewards -----------------------------------------------------------------------------------------

class _RewardTransform(_EntryTransform):
    """A map of the reward (``in_keys`` default ``["reward"]``); a reset has no reward to map."""

    _maps_reset = False

    def __init__(self, in_keys=None, out_keys=None):
        super().__init__(in_keys=["reward"] if in_keys is None else in_keys, out_keys=out_keys)


class RewardScaling(_RewardTransform):
    """The affine map ``reward * scale + loc`` (``(reward - loc) / scale`` when ``standard_normal``);
    ``scale`` is clamped to at least 1e-6."""

    _state_keys = ("loc", "scale")

    def __init__(self, loc, scale, in_keys=None, out_keys=None, standard_normal=False):
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.standard_normal = bool(standard_normal)
        self.loc = loc
        self.scale = scale

    @property
    def loc(self):
        """The reward shift (a tensor)."""
        return self._loc

    @loc.setter
    def loc(self, value):
        self._loc = _numeric(value, "RewardScaling", "loc")

    @property
    def scale(self):
        """The reward scale (a tensor, at least 1e-6)."""
        return self._scale

    @scale.setter
    def scale(self, value):
        self._scale = _numeric(value, "RewardScaling", "scale").clamp_min(1e-6)

    def _apply_transform(self, reward):
        if self.standard_normal:
            return (reward - self.loc) / self.scale
        return reward * self.scale + self.loc

    def _transform_spec(self, spec):
        if isinstance(spec, Unbounded):
            return spec
        raise NotImplementedError(f"RewardScaling.transform_reward_spec not implemented for tensor spec of type "
                                  f"{type(spec).__name__}")

    def __repr__(self):
        return f"RewardScaling(loc={self.loc.item():4.4f}, scale={self.scale.item():4.4f}, keys={self.in_keys})"


def _numeric(value, owner, name):
    """``value`` (a number, array or tensor) as a float tensor, else a TypeError naming ``name``."""
    kind = value.dtype.np.kind if isinstance(value, Tensor) else np.asarray(value).dtype.kind
    if kind not in "fiu":
        raise TypeError(f"{owner}: {name} must be a real number or tensor, got {value!r}")
    # as torch: a NumPy array keeps its dtype, Python numbers and lists become float32
    out = value if isinstance(value, Tensor) else as_tensor(value) if isinstance(value, np.ndarray) else tensor(value)
    return out if out.dtype.is_floating_point else out.to(_dtypes.float32)


class RewardClipping(_RewardTransform):
    """Clamps the reward to ``[clamp_min, clamp_max]`` (either may be None: no bound there)."""

    def __init__(self, clamp_min=None, clamp_max=None, in_keys=None, out_keys=None):
        if clamp_min is None and clamp_max is None:
            raise TypeError("RewardClipping: at least one of clamp_min and clamp_max must be given")
        if clamp_min is not None and clamp_max is not None and float(clamp_min) > float(clamp_max):
            raise ValueError(f"RewardClipping: clamp_min ({clamp_min}) must not exceed clamp_max ({clamp_max})")
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.clamp_min = None if clamp_min is None else _numeric(clamp_min, "RewardClipping", "clamp_min")
        self.clamp_max = None if clamp_max is None else _numeric(clamp_max, "RewardClipping", "clamp_max")

    def _apply_transform(self, reward):
        if self.clamp_max is None:
            return reward.clamp_min(self.clamp_min)
        if self.clamp_min is None:
            return reward.clamp_max(self.clamp_max)
        return reward.clamp(self.clamp_min, self.clamp_max)

    def _transform_spec(self, spec):
        if not isinstance(spec, Unbounded):
            raise NotImplementedError(f"RewardClipping.transform_reward_spec not implemented for tensor spec of "
                                      f"type {type(spec).__name__}")
        low = -_FLOAT_MAX if self.clamp_min is None else self.clamp_min
        high = _FLOAT_MAX if self.clamp_max is None else self.clamp_max
        return Bounded(low, high, shape=spec.shape, device=spec.device, dtype=spec.dtype)

    def __repr__(self):
        bound = lambda v: "None" if v is None else f"{float(v):4.4f}"  # noqa: E731
        return (f"RewardClipping(clamp_min={bound(self.clamp_min)}, clamp_max={bound(self.clamp_max)}, "
                f"keys={self.in_keys})")


class BinarizeReward(_RewardTransform):
    """The reward as 1 where it is positive, else 0 (int8); its last dim must be 1."""

    def _apply_transform(self, reward):
        if not reward.shape or reward.shape[-1] != 1:
            raise RuntimeError(f"Reward shape last dimension must be singleton, got reward of shape "
                               f"{list(reward.shape)}")
        return (reward > 0.0).to(_dtypes.int8)

    def _transform_spec(self, spec):
        return Binary(n=1, device=spec.device, shape=spec.shape)


class SignTransform(_EntryTransform):
    """The sign (-1, 0 or 1) of each ``in_keys`` entry, observations or the reward (and of the
    action with ``in_keys_inv=["action"]``); the specs become bounded in [-1, 1]."""

    def _apply_transform(self, value):
        return value.sign()

    _inv_apply_transform = _apply_transform

    def _transform_spec(self, spec):
        return Bounded(low=-1.0, high=1.0, shape=spec.shape, device=spec.device, dtype=spec.dtype)


class LineariseRewards(_RewardTransform):
    """A weighted sum of a vector of rewards (the last dim) as one reward: ``(weights * reward)
    .sum(-1, keepdim=True)``; ``weights`` default to ones. Bounded specs keep exact bounds."""

    def __init__(self, in_keys, out_keys=None, *, weights=None):
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        if weights is not None:
            weights = _numeric(weights, "LineariseRewards", "weights")
            if weights.ndim >= 2:
                raise ValueError(f"Expected weights to be a unidimensional tensor. Got {weights.ndim} dimension.")
        self.weights = weights

    def _weights_for(self, n, like):
        weights = ones(n, dtype=like.dtype, device=like.device) if self.weights is None else self.weights
        if weights.numel() != n:
            raise ValueError(f"The number of rewards and weights should match. Got: {n} and {weights.numel()}")
        return weights

    def _apply_transform(self, reward):
        if self.weights is None:
            return reward.sum(dim=-1, keepdim=True)
        return (self._weights_for(reward.shape[-1], reward) * reward).sum(dim=-1, keepdim=True)

    def _transform_spec(self, spec):
        if spec.domain != "continuous":
            raise NotImplementedError("Aggregation of rewards that take discrete values is not supported.")
        weights = self._weights_for(spec.shape[-1], spec.zero())
        if not isinstance(spec, Bounded):
            return Unbounded(shape=tuple(spec.shape[:-1]) + (1,), dtype=spec.dtype, device=spec.device)
        positive, negative = weights.clamp(min=0), weights.clamp(max=0)
        low = (positive * spec.low).sum(-1, keepdim=True) + (negative * spec.high).sum(-1, keepdim=True)
        high = (positive * spec.high).sum(-1, keepdim=True) + (negative * spec.low).sum(-1, keepdim=True)
        return Bounded(low=low, high=high, shape=low.shape, dtype=spec.dtype, device=spec.device)


class UnaryTransform(_EntryTransform):
    """``fn`` (a function of one tensor returning a tensor) on each ``in_keys`` entry, written to
    ``out_keys``; ``inv_fn`` (default ``fn``) on the action with ``in_keys_inv``. The new specs are
    ``Unbounded``, shaped and typed like ``fn``'s output on the spec's zero, as torchrl's.
    rlpipe's frames hold tensors only: ``fn`` must return one (no strings or other non-tensor data)."""

    def __init__(self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, *, fn, inv_fn=None,
                 use_raw_nontensor=False):
        if not callable(fn) or (inv_fn is not None and not callable(inv_fn)):
            raise TypeError(f"UnaryTransform: fn and inv_fn must be callables, got {fn!r} and {inv_fn!r}")
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self._fn, self._inv_fn = fn, inv_fn
        self._use_raw_nontensor = use_raw_nontensor

    def _raw(self, value):
        """A ``NonTensorData``'s data (unless ``use_raw_nontensor``), as torchrl hands it to ``fn``."""
        if not self._use_raw_nontensor and isinstance(value, NonTensorData):
            return value.data if not value.batch_size else value.tolist()
        return value

    def _apply_transform(self, value):
        return self._fn(self._raw(value))

    def _inv_apply_transform(self, value):
        return (self._fn if self._inv_fn is None else self._inv_fn)(self._raw(value))

    def _transform_spec(self, spec):
        out = self._fn(spec.zero())
        if not isinstance(out, Tensor):
            raise TypeError(f"UnaryTransform: fn must return a tensor on rlpipe, got {type(out).__name__}")
        return Unbounded(shape=out.shape, dtype=out.dtype, device=out.device)

    _inv_transform_spec = _transform_spec  # the action spec seen outside: the env's, mapped forward


class ClipTransform(_EntryTransform):
    """Clamps each ``in_keys`` entry (and the action with ``in_keys_inv``) to ``[low, high]``
    (scalars; either may be None). The specs become ``Bounded(low - eps, high + eps)``, eps being
    float32's resolution, as torchrl's."""

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None, *, low=None, high=None):
        if low is None and high is None:
            raise TypeError("Either one or both of `high` and `low` must be provided.")
        low, high = self._bound(low, low, high), self._bound(high, low, high)
        if low is not None and high is not None and bool(low >= high):
            raise ValueError(f"`low` must be strictly lower than `high`, got low={low.item()} and "
                             f"high={high.item()}.")
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self.low, self.high = low, high
        self.eps = float(np.finfo(np.float32).resolution)

    @staticmethod
    def _bound(value, low, high):
        if value is None:
            return None
        if np.size(value) != 1 if not isinstance(value, Tensor) else value.numel() != 1:
            raise TypeError(f"low and high must be scalars or None. Got low={low} and high={high}.")
        return _numeric(value, "ClipTransform", "low/high").reshape(())

    def _apply_transform(self, value):
        if self.low is None:
            return value.clamp_max(self.high)
        if self.high is None:
            return value.clamp_min(self.low)
        return value.clamp(self.low, self.high)

    _inv_apply_transform = _apply_transform

    def _transform_spec(self, spec):
        low = -_FLOAT_MAX if self.low is None else self.low - self.eps
        high = _FLOAT_MAX if self.high is None else self.high + self.eps
        return Bounded(low=low, high=high, shape=spec.shape, device=spec.device, dtype=spec.dtype)


# ---- shapes ------------------------------------------------------------------------------------------

def _feature_dim(dim, transform):
    """A non-negative ``dim`` counts from the first dim after the env's batch dims (torchrl's rule)."""
    if dim < 0:
        return dim
    batch = transform._env_batch_size
    if batch is None and transform.parent is not None:
        batch = transform.parent.batch_size
    return dim if batch is None else len(batch) + dim


class UnsqueezeTransform(_EntryTransform):
    """Inserts a dim of size 1 at ``dim`` into each ``in_keys`` entry (the action: removes it with
    ``in_keys_inv``). ``dim`` must be negative unless ``allow_positive_dim``: then it counts from
    the first dim after the env's batch dims."""

    def __init__(self, dim=None, *, allow_positive_dim=False, in_keys=None, out_keys=None, in_keys_inv=None,
                 out_keys_inv=None):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"{type(self).__name__}: dim must be an int, got {dim!r}")
        if dim >= 0 and not allow_positive_dim:
            raise RuntimeError("dim should be smaller than 0 to accommodate for envs of different batch_sizes. "
                               f"Turn allow_positive_dim to accommodate for positive dim (got dim={dim}).")
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self.allow_positive_dim = allow_positive_dim
        self._dim = int(dim)

    @property
    def dim(self):
        """The dim, counted from the end of the entry (torchrl's rule for a positive one)."""
        return _feature_dim(self._dim, self)

    @property
    def unsqueeze_dim(self):
        """``dim`` (torchrl's name)."""
        return self.dim

    def _apply_transform(self, value):
        return value.unsqueeze(self.dim)

    def _inv_apply_transform(self, value):
        return value.squeeze(self.dim)

    def _transform_spec(self, spec):
        return _reshaped_spec(spec, self._apply_transform)

    _inv_transform_spec = _transform_spec  # the action spec seen outside is the env's, mapped forward

    def __repr__(self):
        return (f"{type(self).__name__}(dim={self.dim}, in_keys={self.in_keys}, out_keys={self.out_keys}, "
                f"in_keys_inv={self.in_keys_inv}, out_keys_inv={self.out_keys_inv})")


class SqueezeTransform(UnsqueezeTransform):
    """Removes the dim of size 1 at ``dim`` from each ``in_keys`` entry (the action: inserts it
    with ``in_keys_inv``); ``dim`` as ``UnsqueezeTransform``'s."""

    def __init__(self, dim=None, *args, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None,
                 **kwargs):
        if dim is None:
            if "squeeze_dim" not in kwargs:
                raise TypeError(f"dim must be passed to {type(self).__name__} constructor.")
            dim = kwargs.pop("squeeze_dim")
        super().__init__(dim, *args, in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv,
                         out_keys_inv=out_keys_inv, **kwargs)

    @property
    def squeeze_dim(self):
        """``dim`` (torchrl's name)."""
        return self.dim

    _apply_transform = UnsqueezeTransform._inv_apply_transform
    _inv_apply_transform = UnsqueezeTransform._apply_transform


class PermuteTransform(_EntryTransform):
    """Permutes the trailing dims of each ``in_keys`` entry: ``dims`` is a reordering of
    ``[-len(dims), ..., -1]`` (the action is permuted back with ``in_keys_inv``)."""

    def __init__(self, dims, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        dims = list(dims)
        if sorted(dims) != list(range(-len(dims), 0)):
            raise ValueError(f"Only tailing dims with negative indices are supported by PermuteTransform. Got "
                             f"{dims} instead.")
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self.dims = dims

    @staticmethod
    def _invert_permute(dims):
        n = len(dims)
        return [dims.index(i - n) - n for i in range(n)]

    @staticmethod
    def _permuted(value, dims):
        return value.permute(*range(value.ndim - len(dims)), *dims)

    def _apply_transform(self, value):
        return self._permuted(value, self.dims)

    def _inv_apply_transform(self, value):
        return self._permuted(value, self._invert_permute(self.dims))

    def _transform_spec(self, spec):
        return _reshaped_spec(spec, self._apply_transform)

    _inv_transform_spec = _transform_spec  # the action spec seen outside is the env's, mapped forward


class _Flattening:
    """Dims ``first_dim`` to ``last_dim`` flattened (FlattenObservation's and FlattenAction's):
    negative dims unless ``allow_positive_dim`` (then they count after the env's batch dims)."""

    def _set_dims(self, first_dim, last_dim, allow_positive_dim):
        for name, dim in (("first_dim", first_dim), ("last_dim", last_dim)):
            if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
                raise TypeError(f"{type(self).__name__}: {name} must be an int, got {dim!r}")
            if not allow_positive_dim and dim >= 0:
                raise ValueError(f"{name} should be smaller than 0 to accommodate for envs of different "
                                 f"batch_sizes. Set allow_positive_dim=True to allow positive dimensions (got {dim}).")
        self._first_dim, self._last_dim = int(first_dim), int(last_dim)
        self.allow_positive_dim = bool(allow_positive_dim)

    @property
    def first_dim(self):
        return _feature_dim(self._first_dim, self)

    @property
    def last_dim(self):
        return _feature_dim(self._last_dim, self)

    def _apply_transform(self, value):
        return value.flatten(self.first_dim, self.last_dim)


class FlattenObservation(_Flattening, _EntryTransform):
    """Flattens dims ``first_dim`` to ``last_dim`` of each ``in_keys`` entry (default ``["pixels"]``).
    The dims must be negative unless ``allow_positive_dim`` (then they count after the batch dims)."""

    def __init__(self, first_dim, last_dim, in_keys=None, out_keys=None, allow_positive_dim=False):
        self._set_dims(first_dim, last_dim, allow_positive_dim)
        super().__init__(in_keys=["pixels"] if in_keys is None else in_keys, out_keys=out_keys)

    def _transform_spec(self, spec):
        return _reshaped_spec(spec, self._apply_transform)

    def __repr__(self):
        return (f"FlattenObservation(first_dim={self.first_dim}, last_dim={self.last_dim}, in_keys={self.in_keys}, "
                f"out_keys={self.out_keys})")


class FlattenAction(_Flattening, _EntryTransform):
    """The action as the policy sees it with dims ``first_dim`` to ``last_dim`` flattened; its
    original span (from the env's action spec, or ``action_shape``) is restored before the env
    steps. ``forward`` (a replay buffer's) flattens ``in_keys`` (default: the action)."""

    _maps_reset = False

    def __init__(self, first_dim=-2, last_dim=-1, in_keys_inv=None, out_keys_inv=None, in_keys=None, out_keys=None,
                 allow_positive_dim=False, *, action_shape=None):
        self._set_dims(first_dim, last_dim, allow_positive_dim)
        if first_dim > last_dim:
            raise ValueError(f"first_dim ({first_dim}) must be <= last_dim ({last_dim}).")
        in_keys_inv = key_list(in_keys_inv, "in_keys_inv", allow_none=True) or [ACTION]
        in_keys = in_keys_inv if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        span = None if action_shape is None else tuple(int(n) for n in action_shape)
        self._unflatten_shapes = {} if span is None else {key: span for key in self.in_keys_inv}

    def _call(self, next_tensordict):
        return next_tensordict  # a step's output holds no action

    def _unflatten(self, value, key):
        span = self._unflatten_shapes.get(key)
        if span is None:
            raise RuntimeError(f"FlattenAction has no stored unflatten shape for key {_key_str(key)!r}. Pass "
                               "``action_shape`` to the constructor or attach the transform to a TransformedEnv.")
        merged = self.first_dim if self._first_dim >= 0 else self.last_dim  # (where the span sits once flat)
        return value.unflatten(merged, span)

    def _inv_apply_transform(self, value):
        if len(self.in_keys_inv) != 1:
            raise RuntimeError(f"FlattenAction._inv_apply_transform cannot disambiguate between "
                               f"{len(self.in_keys_inv)} action keys: use inv(tensordict), which knows each key")
        return self._unflatten(value, self.in_keys_inv[0])

    def _inv_call(self, tensordict):
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            value = tensordict.get(out_key, None)
            if value is not None:
                tensordict.set(in_key, self._unflatten(value, in_key))
            elif not self._missing_tolerance:
                raise KeyError(f"FlattenAction: {_key_str(out_key)!r} not found in the tensordict")
        return tensordict

    def _inv_transform_spec(self, spec):
        ndim = len(spec.shape)
        first, last = (dim + ndim if dim < 0 else dim for dim in (self.first_dim, self.last_dim))
        if first < 0 or last >= ndim or first > last:
            raise RuntimeError(f"FlattenAction(first_dim={self._first_dim}, last_dim={self._last_dim}) is not "
                               f"compatible with an action of shape {tuple(spec.shape)}.")
        self._unflatten_shapes[self.in_keys_inv[0]] = tuple(spec.shape[first:last + 1])
        return _reshaped_spec(spec, self._apply_transform)

    def __repr__(self):
        return (f"FlattenAction(first_dim={self.first_dim}, last_dim={self.last_dim}, in_keys_inv={self.in_keys_inv}, "
                f"out_keys_inv={self.out_keys_inv})")


def _expand_as_right(value, ref):
    """``value`` with trailing dims of size 1 added until it has ``ref``'s dims, expanded to its shape."""
    while value.ndim < ref.ndim:
        value = value.unsqueeze(-1)
    return value.expand(ref.shape)


class ExpandAs(Transform):
    """Expands ``in_key`` to the right to the shape of ``ref_key`` (trailing dims of size 1 added
    first), written to ``out_key`` (default: ``in_key``). On rlpipe the result is an observation
    (the reward and the done flags keep their shapes), the reference any output entry."""

    def __init__(self, in_key, ref_key, out_key=None):
        out_key = in_key if out_key is None else out_key
        super().__init__(in_keys=[in_key], out_keys=[out_key])
        self.in_key, self.ref_key, self.out_key = self.in_keys[0], key_list(ref_key, "ref_key")[0], self.out_keys[0]

    def _call(self, next_tensordict):
        ref, value = next_tensordict.get(self.ref_key, None), next_tensordict.get(self.in_key, None)
        if ref is None or value is None:
            if self._missing_tolerance:
                return next_tensordict
            missing = self.ref_key if ref is None else self.in_key
            raise KeyError(f"{self!r}: {_key_str(missing)!r} not found in the tensordict (keys: "
                           f"{sorted(map(str, next_tensordict.keys(True, True)))})")
        next_tensordict.set(self.out_key, _expand_as_right(value, ref))
        return next_tensordict

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        tensordict_reset = _tolerant_call(self, tensordict_reset)
        value = tensordict_reset.get(self.in_key, None)
        if value is not None and self.out_key not in _spec_keys(tensordict_reset):  # the reference is a reward
            ref = zeros(self._output_spec(self.ref_key).shape, dtype=value.dtype, device=value.device)
            tensordict_reset.set(self.out_key, _expand_as_right(value, ref))
        return tensordict_reset

    def _output_spec(self, key):
        if key == REWARD:
            return self._parent_spec("reward")
        for name in ("done", "observation"):
            spec = self._parent_spec(name)
            if key in _spec_keys(spec):
                return spec[key]
        raise KeyError(f"Key {_key_str(key)!r} was not found in output specs.")

    def transform_observation_spec(self, observation_spec):
        if self.out_key == REWARD or self.out_key in (("done",), ("terminated",), ("truncated",)):
            raise NotImplementedError(f"ExpandAs: on rlpipe the reward and done flags keep their shapes; write "
                                      f"{_key_str(self.in_key)!r} expanded under a new out_key")
        spec, ref = self._output_spec(self.in_key), self._output_spec(self.ref_key)
        while len(spec.shape) < len(ref.shape):
            spec = spec.unsqueeze(-1)
        observation_spec[self.out_key] = spec.expand(ref.shape)
        return observation_spec

    def __repr__(self):
        return f"ExpandAs(in_key={self.in_key}, ref_key={self.ref_key}, out_key={self.out_key})"


def _sort_key(key):
    return "_-|-_".join(unravel_key_to_tuple(key))


class CatTensors(Transform):
    """Concatenates the ``in_keys`` entries along ``dim`` into ``out_key`` (and deletes them, with
    ``del_keys``). ``in_keys=None``: every observation with one feature dim, found from the env's
    specs. ``sort``: the keys are concatenated in sorted order; ``unsqueeze_if_oor``: an entry
    with too few dims gets a new one at ``dim``."""

    def __init__(self, in_keys=None, out_key="observation_vector", dim=-1, *, del_keys=True,
                 unsqueeze_if_oor=False, sort=True):
        if in_keys is None and dim != -1:
            raise ValueError("Lazy call to CatTensors is only supported when `dim=-1`.")
        if not isinstance(out_key, (str, tuple)):
            raise TypeError(f"CatTensors requires out_key to be of type NestedKey, got {type(out_key).__name__}")
        in_keys = key_list(in_keys, "in_keys", allow_none=True)
        if in_keys is not None and sort:
            in_keys = sorted(in_keys, key=_sort_key)
        super().__init__(in_keys=in_keys or [], out_keys=[out_key])
        self._initialized = in_keys is not None
        self.dim = int(dim)
        self._del_keys = bool(del_keys)
        self.unsqueeze_if_oor = bool(unsqueeze_if_oor)

    @property
    def keys_to_exclude(self):
        """The in keys removed after concatenation (all but the out key)."""
        return [key for key in self.in_keys if key != self.out_keys[0]]

    def _call(self, next_tensordict):
        if not self._initialized:
            raise RuntimeError("CatTensors(in_keys=None) finds its keys in its env's specs: put it in a "
                               "TransformedEnv, or pass in_keys")
        values = [next_tensordict.get(key, None) for key in self.in_keys]
        if any(value is None for value in values):
            raise KeyError(f"CatTensor failed, as it expected input keys = {_names(self.in_keys)} but got a "
                           f"TensorDict with keys {sorted(map(str, next_tensordict.keys(True, True)))}")
        if self.unsqueeze_if_oor:
            position = self.dim if self.dim >= 0 else -self.dim - 1
            values = [v if position < v.ndim else v.unsqueeze(-1 if self.dim > 0 else 0) for v in values]
        next_tensordict.set(self.out_keys[0], cat(values, dim=self.dim))
        if self._del_keys:
            next_tensordict.exclude(*self.keys_to_exclude, inplace=True)
        return next_tensordict

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def _find_in_keys(self, observation_spec):
        batch_dims = len(self._env_batch_size or ())
        keys = [unravel_key_to_tuple(k) for k, spec in observation_spec.items(True, True)
                if len(spec.shape) == batch_dims + 1]
        return sorted(keys, key=_sort_key)

    def transform_observation_spec(self, observation_spec):
        if not isinstance(observation_spec, Composite):  # a leaf: the one entry's spec, unchanged (torchrl's)
            if len(self.in_keys) > 1:
                raise ValueError("CatTensor cannot infer the output observation spec as there are multiple input "
                                 "keys but only one observation_spec.")
            return observation_spec
        if not self._initialized:
            self.in_keys = self._find_in_keys(observation_spec)
            self._initialized = True
        missing = [k for k in self.in_keys if k not in _spec_keys(observation_spec)]
        if missing or not self.in_keys:
            raise ValueError(f"CatTensor got a list of keys that does not match the keys in observation_spec: "
                             f"{_names(missing or self.in_keys)} (observations: "
                             f"{sorted(map(str, observation_spec.keys(True, True)))})")
        specs = [observation_spec[k] for k in self.in_keys]
        shape = list(specs[0].shape)
        shape[self.dim] = sum(spec.shape[self.dim] if spec.shape else 1 for spec in specs)
        observation_spec[self.out_keys[0]] = Unbounded(shape=shape, dtype=specs[0].dtype, device=specs[0].device)
        if self._del_keys:
            for key in self.keys_to_exclude:
                del observation_spec[key]
        return observation_spec

    def __repr__(self):
        return f"CatTensors(in_keys={self.in_keys}, out_key={self.out_keys[0]})"


# ---- primers -----------------------------------------------------------------------------------------

class TensorDictPrimer(Transform):
    """Adds entries the env does not produce (a recurrent state, say) at each reset, with the values
    ``default_value`` gives (a number, a callable returning a tensor, or a dict of either keyed
    like the primers; 0 by default) or drawn from their specs (``random=True``); a step carries
    each entry over unchanged into ``"next"`` unless something wrote it there. ``primers``: a dict
    or ``Composite`` of specs (or the specs as keyword arguments). Specs without the env's batch
    dims need ``expand_specs=True``. On rlpipe the entries are observations (rlpipe envs have no
    state spec)."""

    def __init__(self, primers=None, random=None, default_value=None, reset_key=None, expand_specs=None,
                 single_default_value=False, call_before_env_reset=False, **kwargs):
        device = kwargs.pop("device", None)
        if primers is not None and kwargs:
            raise RuntimeError(f"providing the primers as a dictionary is incompatible with extra keys "
                               f"{sorted(kwargs)} provided as kwargs.")
        if single_default_value or call_before_env_reset:
            raise NotImplementedError("TensorDictPrimer: single_default_value and call_before_env_reset are not "
                                      "supported on rlpipe")
        if reset_key is not None and unravel_key_to_tuple(reset_key) != RESET:
            raise NotImplementedError(f"TensorDictPrimer: an rlpipe env has one reset key, '_reset', got {reset_key!r}")
        primers = kwargs if primers is None else primers
        if not isinstance(primers, Composite):
            primers = dict(primers)
            shape, batch_size = primers.pop("shape", None), primers.pop("batch_size", None)
            for key, spec in primers.items():
                if not isinstance(spec, (TensorSpec, dict)):
                    raise ValueError(f"The values of the primers must be a subtype of the TensorSpec class. Got "
                                     f"{type(spec).__name__} for {key!r} instead.")
            primers = Composite(primers, device=device, shape=shape if batch_size is None else batch_size)
        if random and default_value:
            raise ValueError("Setting random to True and providing a default_value are incompatible.")
        super().__init__()
        self.primers = primers
        self.random = random
        self.expand_specs = expand_specs
        self.reset_key = "_reset"
        self.default_value = self._defaults(0.0 if default_value is None else default_value)

    def _defaults(self, default_value):
        keys = [unravel_key_to_tuple(k) for k in self.primers.keys(True, True)]
        if not isinstance(default_value, dict):
            return {key: default_value for key in keys}
        out = {unravel_key_to_tuple(k): v for k, v in default_value.items()}
        if set(out) != set(keys):
            raise ValueError(f"If a default_value dictionary is provided, it must match the primers keys: got "
                             f"{_names(sorted(out))}, primers {_names(keys)}")
        return out

    def _value(self, key, spec):
        if self.random:
            return spec.rand()
        value = self.default_value[key]
        if callable(value):
            value = value()
            if not spec.is_in(value):
                raise ValueError(f"TensorDictPrimer: default_value for {_key_str(key)!r} gave a value outside its "
                                 f"spec (shape {list(value.shape)}, dtype {value.dtype}; spec {spec})")
            return value
        return full(spec.shape, value, dtype=spec.dtype, device=spec.device)

    def _fill(self, tensordict):
        for key, spec in self.primers.items(True, True):
            tensordict.set(key, self._value(unravel_key_to_tuple(key), spec))
        return tensordict

    def forward(self, tensordict):
        for key, spec in self.primers.items(True, True):
            if tuple(spec.shape[:tensordict.ndim]) != tuple(tensordict.shape):
                raise RuntimeError(f"The leading shape of the spec must match the tensordict's, but it does not: got "
                                   f"tensordict.shape={list(tensordict.shape)} whereas {key} spec's shape is "
                                   f"{list(spec.shape)}.")
        return self._fill(tensordict)

    def _reset(self, tensordict, tensordict_reset):
        return self._fill(tensordict_reset)

    def _step(self, tensordict, next_tensordict):
        present = _spec_keys(next_tensordict)
        for key in self.primers.keys(True, True):
            if unravel_key_to_tuple(key) not in present:
                next_tensordict.set(key, tensordict.get(key))
        return next_tensordict

    def transform_observation_spec(self, observation_spec):
        batch = tuple(observation_spec.shape)
        if tuple(self.primers.shape[:len(batch)]) != batch:
            if self.expand_specs:
                self.primers = self.primers.expand(*batch, *self.primers.shape)
            elif self.expand_specs is None:
                raise RuntimeError(f"expand_specs wasn't specified in the TensorDictPrimer constructor, and the shape "
                                   f"of the primers {list(self.primers.shape)} and observation specs {list(batch)} "
                                   "mismatch - indicating a batch-size incongruency. Make sure the expand_specs arg "
                                   "is properly set or that the primer shape matches the environment batch-size.")
            else:
                self.primers.shape = observation_spec.shape
        for key, spec in self.primers.items(True, True):
            observation_spec[key] = spec.clone()
        return observation_spec

    def __repr__(self):
        return f"TensorDictPrimer(primers={self.primers}, default_value={self.default_value}, random={self.random})"


# ---- checks ------------------------------------------------------------------------------------------

class FiniteTensorDictCheck(Transform):
    """Raises a ValueError naming the entry when a step's or a reset's data holds NaN or inf."""

    def __init__(self):
        super().__init__(in_keys=[])

    def _call(self, next_tensordict):
        for key, value in next_tensordict.items(True, True):
            if isinstance(value, Tensor) and (value.dtype.is_floating_point or value.dtype.is_complex) \
                    and not bool(value.isfinite().all()):
                raise ValueError(f"Encountered a non-finite tensor: entry {_key_str(unravel_key_to_tuple(key))!r} "
                                 f"holds NaN or inf; expected finite values")
        return next_tensordict

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)
