"""Gymnasium environments: ``GymEnv`` (by id, single or vectorized) and ``GymWrapper`` (an instance).

torchrl 0.14's ``GymEnv``/``GymWrapper`` semantics on the env step protocol (``step_protocol.py``):

- a Box observation goes to ``"observation"``; a Dict observation space puts its keys at the root
  (nested Dicts nest); Discrete observations are one-hot unless ``categorical_action_encoding``;
- Discrete actions are one-hot (``OneHot``) by default, ``Categorical`` with
  ``categorical_action_encoding=True``; MultiDiscrete ones are ``MultiOneHot``/``MultiCategorical``;
- ``num_envs=N`` builds ``gymnasium.make_vec(..., vectorization_mode="sync"|"async")`` with
  ``autoreset_mode=SAME_STEP``: a step that ends an episode reports its true last observation
  (``info["final_obs"]``) as the next observation, and ``_continue_frame`` hands out the reset
  observation the autoreset already produced. No transition ever spans two episodes.
- ``vectorization_mode="vector_entry_point"`` builds the env's native vector env
  (``CartPoleVectorEnv``), and ``GymWrapper`` takes any ``gymnasium.vector.VectorEnv``, whatever
  its autoreset mode. NEXT_STEP and DISABLED: a done step's observation is already the true last
  one. NEXT_STEP: the env *skips* the envs it ended in its next step, which resets them
  ("Skipped rows" in ``step_protocol.py``): the collector drops that reset step, so it is never delivered as
  a transition, and no extra call into the env is made. Envs ended by a transform, every done env
  of a DISABLED one, and (``rollout``) every done env are reset at once where the env can reset
  only some (``reset_mask`` of Gymnasium's Sync/AsyncVectorEnv, always with DISABLED; envpool's
  ``reset(env_id)``); the native envs cannot. (torchrl 0.14 refuses NEXT_STEP vector envs.)

Atari (ale-py, ``pip install rlpipe[atari]``): ``ALE/...`` and ``...NoFrameskip...`` ids import ``ale_py``
first; an RGB image observation (ALE's ``[210, 160, 3]`` uint8) goes to ``"pixels"``, as torchrl puts it.

Options as torchrl's: ``frame_skip`` repeats each action (rewards summed, stopping at a done; an env
whose constructor takes ``frameskip``, as ALE's, repeats itself), ``from_pixels``/``pixels_only`` add
rendered frames, ``categorical_action_encoding``, ``device``, an empty ``batch_size``; other kwargs
go to ``gymnasium.make`` (``render_mode``, ``max_episode_steps``, the env's own).

The frame methods are the collector's hot path: they take and return NumPy arrays, keep
Gymnasium's observation dtypes, and build nothing but the minimal frame dict.
"""
import functools
import multiprocessing as mp

import numpy as np

from .. import _dtypes
from .. import random as _random
from .._processes import die_with_parent, parent_watch, reap
from .._tensor import Size
from .common import EnvBase
from .step_protocol import one_hot_hint
from ..tensordict import unravel_key_to_tuple
from .specs import Binary, Bounded, Categorical, Composite, MultiCategorical, MultiOneHot, OneHot, Unbounded

__all__ = ["GymEnv", "GymWrapper", "from_gym_space"]


def _gym():
    try:
        import gymnasium
    except ImportError as err:  # pragma: no cover - gymnasium is a dependency of rlpipe.envs.gym
        raise ImportError("rlpipe.envs.GymEnv needs gymnasium (pip install gymnasium)") from err
    return gymnasium


def _async_worker(watch, *args):
    """Gymnasium's async vector env worker, dying with the process that made the vector env
    (``rlpipe._processes``): a worker stuck in its env's step would otherwise outlive it."""
    die_with_parent(*watch)
    from gymnasium.vector.async_vector_env import _async_worker as gymnasium_worker
    gymnasium_worker(*args)


def _close_gym_env(env, timeout=5.0):
    """Closes a Gymnasium env. An async vector env's subprocesses are reaped (none is left
    running or a zombie): closed politely while all live, else terminated (a dead one's pipe is
    broken), then waited for ``timeout`` s before being killed."""
    if not isinstance(getattr(env, "unwrapped", None), _gym().vector.AsyncVectorEnv):
        env.close()
        return
    processes = list(env.unwrapped.processes)
    try:
        env.close(terminate=not all(p.is_alive() for p in processes))
    finally:
        for process in processes:
            reap(process, timeout)


def _specs():
    from rlpipe.envs import specs
    return specs


# ---- observation leaves ------------------------------------------------------------------------------

def _leaves(space, path=()):
    """(key, index path, space) for every leaf of an observation space, in the space's order: a
    Dict nests by its keys, a Tuple by "0", "1", ... (as ``from_gym_space``)."""
    spaces = _gym().spaces
    key, index = path if path else ((), ())
    if isinstance(space, spaces.Dict):
        out = []
        for name, sub in space.spaces.items():
            out.extend(_leaves(sub, (key + (str(name),), index + (name,))))
        return out
    if isinstance(space, spaces.Tuple):
        out = []
        for i, sub in enumerate(space.spaces):
            out.extend(_leaves(sub, (key + (str(i),), index + (i,))))
        return out
    return [(key, index, space)]


def _getter(index):
    if not index:
        return lambda obs: obs
    if len(index) == 1:
        name = index[0]
        return lambda obs: obs[name]

    def get(obs):
        for name in index:
            obs = obs[name]
        return obs
    return get


def _identity(x):
    return x


def _np_dtype(spec):
    dtype = spec.dtype
    return np.dtype(getattr(dtype, "np", dtype))


def _check_frame_skip(frame_skip):
    if isinstance(frame_skip, bool) or not isinstance(frame_skip, (int, np.integer)):
        raise ValueError(f"frame_skip must be an integer, got {frame_skip!r}")
    if frame_skip < 1:
        raise ValueError(f"frame_skip must be >= 1 (the number of times each action is applied), got {frame_skip}")


def _one_hot(index, n, dtype):
    return (np.asarray(index)[..., None] == np.arange(n)).astype(dtype)


def _start(space):
    return np.asarray(getattr(space, "start", 0))


def _converter(space, spec, copy):
    """A function turning a Gymnasium observation leaf (single or batched) into the spec's format.
    ``copy``: the result must not share memory with the input (vector envs reuse their buffers)."""
    spaces = _gym().spaces
    specs = _specs()
    dt = _np_dtype(spec)
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        if copy:
            return lambda x: np.array(x, dtype=dt, order="C")  # C order: a transposed batch (CartPoleVectorEnv) too

        def box(x):
            if type(x) is np.ndarray and x.dtype == dt:
                return x
            return np.asarray(x, dtype=dt)
        return box
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        start = _start(space)
        if isinstance(spec, specs.OneHot):
            n = int(spec.n)
            return lambda x: _one_hot(np.asarray(x) - start, n, dt)
        if isinstance(spec, specs.MultiOneHot):
            sizes = [int(n) for n in np.asarray(space.nvec)]

            def multi_one_hot(x):
                x = np.asarray(x) - start
                return np.concatenate([_one_hot(x[..., i], n, dt) for i, n in enumerate(sizes)], axis=-1)
            return multi_one_hot
        return lambda x: np.array(np.asarray(x) - start, dtype=dt)
    raise NotImplementedError(f"GymEnv: observation space {space} is not supported")


# ---- actions -------------------------------------------------------------------------------------------

def _action_converter(space, spec, batched):
    """A function turning a host action in the spec's format (single or batched) into Gymnasium's."""
    spaces = _gym().spaces
    specs = _specs()
    if isinstance(space, spaces.Box):
        dt = space.dtype
        return lambda a: a if a.dtype == dt else a.astype(dt)
    if isinstance(space, spaces.MultiBinary):
        dt = space.dtype
        return lambda a: a.astype(dt)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        start = _start(space)
        has_start = bool(np.any(start != 0))
        if isinstance(spec, specs.OneHot):
            if has_start:
                return lambda a: a.argmax(-1) + start
            if not batched and len(spec.shape) == 1:
                return lambda a: a.argmax()  # NumPy ints pass Gymnasium's ``Discrete.contains`` faster than ints
            return lambda a: a.argmax(-1)
        if isinstance(spec, specs.MultiOneHot):
            bounds = np.cumsum([int(n) for n in np.asarray(space.nvec)])[:-1]

            def multi_one_hot(a):
                return np.stack([part.argmax(-1) for part in np.split(a, bounds, axis=-1)], axis=-1) + start
            return multi_one_hot
        if has_start:
            return lambda a: a.astype(np.int64) + start
        if isinstance(spec, specs.Categorical) and not batched:
            return int  # a Python int: Gymnasium's ``Discrete.contains`` checks it fastest
        return lambda a: a if a.dtype.kind in "iu" else a.astype(np.int64)
    raise NotImplementedError(f"GymEnv: action space {space} is not supported (Box, Discrete, "
                              "MultiDiscrete and MultiBinary actions are)")


def _expand(spec, batch_size):
    """``spec`` with the env's batch dims in front (torchrl specs carry the batch dims)."""
    if not batch_size:
        return spec
    return spec.expand(*(tuple(batch_size) + tuple(spec.shape)))


# ---- specs of Gymnasium spaces --------------------------------------------------------------------------

def _dtype_of(space):
    """The rlpipe dtype of a Gymnasium space's NumPy dtype."""
    return _dtypes.from_numpy_dtype(np.dtype(space.dtype))


def from_gym_space(space, categorical_action_encoding=False, device=None, remap_state_to_observation=False):
    """The spec of a Gymnasium space (as torchrl's ``_gym_to_torchrl_spec_transform``).

    ``Box`` -> ``Bounded`` with the space's dtype (``Unbounded`` when every bound is infinite);
    ``Discrete(n)`` -> ``OneHot(n)`` (int64), or ``Categorical(n)`` when ``categorical_action_encoding``;
    ``MultiDiscrete`` -> ``MultiOneHot`` (or ``MultiCategorical``); ``MultiBinary`` -> ``Binary``;
    ``Dict`` -> ``Composite``; ``Tuple`` -> ``Composite`` keyed "0", "1", ... As in torchrl, a 0-d
    ``Box`` gives a ``[1]``-shaped spec (``encode`` reshapes the env's 0-d values), a ``MultiDiscrete``
    with an n-d uniform ``nvec`` a ``OneHot`` of shape ``nvec.shape + (n,)``. A ``Discrete``'s
    ``start`` offset is not part of the spec: the env adds it when it converts an action.
    """
    from gymnasium import spaces as gs

    if isinstance(space, gs.Box):
        dtype = _dtype_of(space)
        shape = Size(space.shape) if len(space.shape) else Size((1,))  # torchrl: a 0-d Box is a [1] spec
        low, high = np.asarray(space.low).reshape(shape), np.asarray(space.high).reshape(shape)
        if dtype.is_floating_point and np.isinf(low).all() and np.isinf(high).all() and low.size:
            return Unbounded(shape, device=device, dtype=dtype)
        if not dtype.is_floating_point:
            if dtype is _dtypes.bool:
                return Bounded(low, high, shape, device=device, dtype=dtype)
            info = np.iinfo(dtype.np)
            low = np.clip(low, info.min, info.max)
            high = np.clip(high, info.min, info.max)
        return Bounded(low, high, shape, device=device, dtype=dtype)
    if isinstance(space, gs.Discrete):
        n = int(space.n)
        if categorical_action_encoding:
            return Categorical(n, device=device, dtype=_dtype_of(space))
        return OneHot(n, device=device, dtype=_dtypes.int64)
    if isinstance(space, gs.MultiDiscrete):
        nvec = np.asarray(space.nvec)
        if categorical_action_encoding:
            return MultiCategorical(nvec, device=device, dtype=_dtype_of(space))
        if nvec.ndim == 1:
            return MultiOneHot(nvec, device=device, dtype=_dtypes.int64)
        if (nvec == nvec.reshape(-1)[0]).all():
            n = int(nvec.reshape(-1)[0])
            return OneHot(n, shape=Size(nvec.shape) + (n,), device=device, dtype=_dtypes.int64)
        raise NotImplementedError(f"from_gym_space: a MultiDiscrete space with a {nvec.ndim}-d, non-uniform nvec "
                                  f"has no one-hot spec; use categorical_action_encoding=True (nvec={nvec.tolist()})")
    if isinstance(space, gs.MultiBinary):
        shape = Size(np.atleast_1d(np.asarray(space.n)).tolist()) if space.shape is None else Size(space.shape)
        return Binary(shape[-1], shape=shape, device=device, dtype=_dtype_of(space))
    if isinstance(space, gs.Dict):
        out = Composite(device=device)
        for key, sub in space.spaces.items():
            key = key if remap_state_to_observation is False or key != "state" else "observation"
            out[str(key)] = from_gym_space(sub, categorical_action_encoding, device, remap_state_to_observation)
        return out
    if isinstance(space, gs.Tuple):
        out = Composite(device=device)
        for i, sub in enumerate(space.spaces):
            out[str(i)] = from_gym_space(sub, categorical_action_encoding, device, remap_state_to_observation)
        return out
    raise NotImplementedError(f"from_gym_space: no spec for the Gymnasium space {space!r} "
                              f"({type(space).__name__})")


_REWARD = np.zeros((1,), dtype=np.float32)
_TRUE = np.ones((1,), dtype=bool)
_FALSE = np.zeros((1,), dtype=bool)


class _classproperty:
    def __init__(self, fget):
        self.fget = fget

    def __get__(self, instance, owner):
        return self.fget(owner)


def _takes_frameskip(env_id, vector_entry_point):
    """Whether the registered env's constructor takes ``frameskip`` (ALE's do): then it repeats actions
    itself, as torchrl asks it to."""
    import inspect

    gym = _gym()
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        return False  # an unknown id: gymnasium.make reports it
    if "frameskip" in (spec.kwargs or {}):
        return True
    entry = spec.vector_entry_point if vector_entry_point else spec.entry_point
    if isinstance(entry, str):
        entry = gym.envs.registration.load_env_creator(entry)
    try:
        return "frameskip" in inspect.signature(entry).parameters
    except (TypeError, ValueError):  # a callable without a signature
        return False


def _import_ale_py_if_needed(env_name):
    """Imports ale-py for an Atari id (``ALE/...``, ``ale_py:...``, ``...NoFrameskip...``, as torchrl):
    Gymnasium >= 1.0 knows these ids only once ``ale_py`` registered them."""
    if not (env_name.startswith(("ALE/", "ale_py:")) or "NoFrameskip" in env_name):
        return
    try:
        import ale_py
    except ImportError as err:
        raise ImportError(f"GymEnv({env_name!r}) needs ale-py, which provides the Atari environments and their "
                          "ROMs (pip install 'rlpipe[atari]')") from err
    _gym().register_envs(ale_py)


def _is_pixel_space(space):
    """Whether an observation space is an RGB image (a ``[H, W, 3]`` Box from 0 to 255, as ALE's): its
    observation goes to ``"pixels"`` and ``from_pixels`` renders nothing more (torchrl's ``_is_from_pixels``)."""
    box = _gym().spaces.Box
    return (isinstance(space, box) and len(space.shape) == 3 and space.shape[-1] == 3
            and bool((space.low == 0).all()) and bool((space.high == 255).all()))


def _autoreset_mode(env, label):
    """A vector env's ``AutoresetMode`` (NEXT_STEP where it does not say: Gymnasium's default)."""
    gym = _gym()
    modes = getattr(gym.vector, "AutoresetMode", None)
    if modes is None:
        raise ImportError(f"{label}: vector envs need gymnasium >= 1.1 (autoreset modes); found gymnasium "
                          f"{gym.__version__}")
    mode = env.metadata.get("autoreset_mode", getattr(env, "autoreset_mode", None))
    if mode is None:
        return modes.NEXT_STEP
    try:
        return modes(mode)
    except ValueError:
        raise ValueError(f"{label}: unknown autoreset_mode {mode!r} in the vector env's metadata; expected one of "
                         f"{[m.value for m in modes]}") from None


def _resets_rows(env, mode):
    """Whether the vector env resets only the envs ``reset(options={"reset_mask": mask})`` names:
    Gymnasium's own Sync/AsyncVectorEnv do, and DISABLED autoreset relies on it."""
    gym = _gym()
    if mode == gym.vector.AutoresetMode.DISABLED:
        return True
    return isinstance(env.unwrapped, (gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv))


# ---- the wrapper -----------------------------------------------------------------------------------------

class GymWrapper(EnvBase):
    """A Gymnasium environment (``gymnasium.Env`` or ``gymnasium.vector.VectorEnv``) as an rlpipe
    environment.

    A vector env may autoreset in any mode (module docstring). One that resets its done envs in
    the next step and cannot reset only some of them (NEXT_STEP without ``reset_mask``, as the
    native ``CartPoleVectorEnv``) has these limits: ``rollout`` must stop at the first done, and
    an episode the env itself did not end (a ``StepCounter(max_steps)`` truncation) cannot be
    restarted (RuntimeError): give the env its own limit (``max_episode_steps``) instead.

    Args:
        env: the Gymnasium environment instance.
        device: where the TensorDicts of ``reset``/``step``/``rollout`` live (frames stay on host).
        categorical_action_encoding: Discrete spaces as ``Categorical`` (integer) instead of
            ``OneHot``.
        from_pixels: also write the rendered frame (``env.render()``, the env made with
            ``render_mode="rgb_array"``) under ``"pixels"``: uint8, ``[H, W, 3]``.
        pixels_only: with ``from_pixels``, ``"pixels"`` is the only observation (default True, as torchrl).
        frame_skip: each step repeats the action this many times (an int, default 1): the rewards
            are summed, the observation is the last one, and the repetition stops after a step where
            an env is done (as torchrl). Not for a vector env that skips rows (NEXT_STEP autoreset).
        batch_size: as torchrl: the env's batch size is the vector env's ``[num_envs]`` (or ``[]``);
            only an empty ``batch_size`` is accepted.
    """

    def __init__(self, env=None, device=None, categorical_action_encoding=False, from_pixels=False,
                 pixels_only=True, frame_skip=1, batch_size=None, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(kwargs)}")
        if env is None:
            raise TypeError(f"{type(self).__name__} needs a gymnasium.Env instance")
        _check_frame_skip(frame_skip)
        if batch_size is not None and len(Size(batch_size)):
            raise ValueError(f"{type(self).__name__}: batch_size must be empty (a Gymnasium env's batch size is "
                             f"its vector env's [num_envs]), got {list(Size(batch_size))}")
        gym = _gym()
        self._same_step = self._skips_rows = False
        if isinstance(env, gym.vector.VectorEnv):
            mode = _autoreset_mode(env, type(self).__name__)
            self._same_step = mode == gym.vector.AutoresetMode.SAME_STEP
            self._skips_rows = mode == gym.vector.AutoresetMode.NEXT_STEP
            self._resets_rows = self._can_reset_rows(env, mode)
            batch_size = Size((int(env.num_envs),))
        elif isinstance(env, gym.Env):
            batch_size = Size(())
        else:
            raise TypeError(f"{type(self).__name__} wraps a gymnasium.Env, got {type(env).__name__}")
        super().__init__(device=device, batch_size=batch_size)
        self._env = env
        self._categorical_action_encoding = bool(categorical_action_encoding)
        if not hasattr(self, "env_name"):
            spec = getattr(env, "spec", None)
            self.env_name = getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__
        self._vectorized = bool(batch_size)
        self._make_specs()
        if from_pixels:
            self._add_pixels(pixels_only)
        # torchrl's attributes: an env whose observation is an image is "from pixels" by itself
        self.from_pixels = bool(from_pixels) or self._keys == (("pixels",),)
        self.pixels_only = bool(pixels_only)
        self._pending = None  # SAME_STEP: (frame of the step's returned obs, mask of autoreset envs)
        self._resetting = None  # skipping: the envs the next step resets ("Skipped rows", step_protocol.py)
        self._env_done = None  # NEXT_STEP: the envs the vector env itself ended at the last step
        self._exact = False  # reset done envs at once rather than skip them (rollout's mode)
        if frame_skip > 1 and self._skips_rows:
            raise ValueError(f"{self._label()}: frame_skip={frame_skip} needs a vector env that resets its done envs "
                             "in the same step (a NEXT_STEP autoreset would skip a repeated step)")
        # torchrl's two attributes: the repeats asked for, and those this wrapper does (GymEnv sets
        # wrapper_frame_skip=1 where the Gymnasium env repeats actions itself: its ``frameskip``)
        self.frame_skip = self.wrapper_frame_skip = int(frame_skip)
        self._bind_step()

    def _bind_step(self):
        """Binds ``_gym_step`` (what a step calls, with no extra call on the hot path): the wrapped env's
        ``step``, or ``_repeated_step`` with a ``frame_skip``. Call it again after replacing ``_env``."""
        self._gym_step = self._env.step if self.wrapper_frame_skip == 1 else self._repeated_step

    def _repeated_step(self, action):
        """Gymnasium's ``step`` repeated ``wrapper_frame_skip`` times with one action: rewards summed,
        stopping after a step where any env is done."""
        step = self._env.step
        total = 0
        for _ in range(self.wrapper_frame_skip):
            obs, reward, terminated, truncated, info = step(action)
            total = total + reward
            if np.any(terminated) or np.any(truncated):
                break
        return obs, total, terminated, truncated, info

    @staticmethod
    def _can_reset_rows(env, mode):
        """Whether ``_reset_rows`` works on this vector env."""
        return _resets_rows(env, mode)

    def _set_exact_resets(self, exact):
        """(EnvBase) A NEXT_STEP env that can reset only some envs resets the done ones at once
        while ``exact``, rather than skipping them in the next step."""
        self._exact = bool(exact)
        return not self._skips_rows or self._resets_rows

    # ---- specs --------------------------------------------------------------------------------------
    def _make_specs(self):
        specs = _specs()
        env, bs = self._env, self.batch_size
        obs_space = env.single_observation_space if self._vectorized else env.observation_space
        act_space = env.single_action_space if self._vectorized else env.action_space
        cat = self._categorical_action_encoding

        action_spec = from_gym_space(act_space, categorical_action_encoding=cat, device=self.device)
        self.action_spec = _expand(action_spec, bs)
        self._action_shape = tuple(self.action_spec.shape)
        self._to_gym_action = _action_converter(act_space, action_spec, self._vectorized)

        leaves = []
        obs_spec = specs.Composite(shape=bs, device=self.device)
        root_key = ("pixels",) if _is_pixel_space(obs_space) else ("observation",)
        for key, index, space in _leaves(obs_space):
            leaf_spec = from_gym_space(space, categorical_action_encoding=cat, device=self.device)
            key = key if key else root_key
            obs_spec[key] = _expand(leaf_spec, bs)
            leaves.append((key, _getter(index), _converter(space, leaf_spec, copy=self._vectorized),
                           _converter(space, leaf_spec, copy=True)))
        self.observation_spec = obs_spec
        self._leaves = leaves
        # a done env's final observation, written into its row (NumPy casts a Box leaf itself)
        self._final_leaves = [(key, get, _identity if isinstance(space, _gym().spaces.Box) else conv)
                              for (key, get, _, conv), (_, _, space) in zip(leaves, _leaves(obs_space))]
        self._keys = tuple(key for key, *_ in leaves)
        if len(leaves) == 1 and leaves[0][0] == root_key:
            key, _, conv, _ = leaves[0]
            if isinstance(obs_space, _gym().spaces.Box) and not self._vectorized:
                dt = _np_dtype(obs_spec[key])

                def obs_frame(obs):  # the hot path: Gymnasium's own array, no copy
                    if type(obs) is np.ndarray and obs.dtype is dt:
                        return {key: obs}
                    return {key: np.asarray(obs, dtype=dt)}
                self._obs_frame = obs_frame
            elif isinstance(obs_space, (_gym().spaces.Box, _gym().spaces.MultiBinary)):  # a vector env's batch
                dt = _np_dtype(obs_spec[key])  # (_converter's copy, inline: one call less per step)
                self._obs_frame = lambda obs: {key: np.array(obs, dtype=dt, order="C")}
            else:
                self._obs_frame = lambda obs: {key: conv(obs)}
        else:
            self._obs_frame = lambda obs: {key: conv(get(obs)) for key, get, conv, _ in leaves}

        self._flag_shape = tuple(bs) + (1,)
        self.reward_spec = specs.Unbounded(shape=self._flag_shape, dtype="float32", device=self.device)
        self.done_spec = specs.Composite(
            {name: specs.Categorical(2, shape=self._flag_shape, dtype="bool", device=self.device)
             for name in ("done", "terminated", "truncated")},
            shape=bs, device=self.device)

    def _add_pixels(self, pixels_only):
        """Renders a frame after every reset and step into ``("pixels",)`` (and its spec), unless the
        env's observation already is an image there (ALE's)."""
        if self._keys == (("pixels",),):
            return
        if self._vectorized:
            raise ValueError(f"{self._label()}: from_pixels needs a single environment, not a vector env")
        if getattr(self._env, "render_mode", None) != "rgb_array":
            raise ValueError(f"{self._label()}: from_pixels needs an env made with render_mode='rgb_array', got "
                             f"{getattr(self._env, 'render_mode', None)!r}")
        self._env.reset()
        shape = np.asarray(self._env.render()).shape
        pixels_spec = _specs().UnboundedDiscrete(shape=shape, dtype="uint8", device=self.device)
        if pixels_only:
            self.observation_spec = _specs().Composite(pixels=pixels_spec, shape=self.batch_size, device=self.device)
        else:
            self.observation_spec[("pixels",)] = pixels_spec
        observe = self._obs_frame
        render = self._env.render

        def obs_frame(obs):
            frame = {} if pixels_only else dict(observe(obs))
            frame[("pixels",)] = np.array(render(), dtype=np.uint8)
            return frame
        self._obs_frame = obs_frame
        self._keys = tuple(unravel_key_to_tuple(k) for k in self.observation_spec.keys(True, True))

    # ---- the frame methods (step_protocol.py) -------------------------------------------------------
    def _reset_frame(self, seed=None):
        self._pending = self._resetting = self._skipped_rows = self._env_done = None
        try:
            obs, _ = self._env.reset(seed=seed)
        except Exception as err:
            raise RuntimeError(f"{self._label()}: reset failed: {err}") from err
        return self._obs_frame(obs)

    def _step_frame(self, action):
        if type(action) is not np.ndarray:
            action = np.asarray(action)
        if action.shape != self._action_shape:
            raise ValueError(f"{self._label()}: expected an action of shape {self._action_shape} "
                             f"({type(self.action_spec).__name__}), got {action.shape}"
                             f"{one_hot_hint(self.action_spec, action.shape)}")
        if self._vectorized:
            return self._step_vectorized(action)
        try:
            obs, reward, terminated, truncated, _ = self._gym_step(self._to_gym_action(action))
        except Exception as err:
            raise RuntimeError(f"{self._label()}: step failed: {err}") from err
        # fresh arrays (the TensorDicts built from frames share their memory), copied from
        # templates: half the cost of np.array((x,), dtype)
        rew = _REWARD.copy()
        rew[0] = reward
        return (self._obs_frame(obs), rew, (_TRUE if terminated else _FALSE).copy(),
                (_TRUE if truncated else _FALSE).copy())

    def _step_vectorized(self, action):
        try:
            obs, reward, terminated, truncated, info = self._gym_step(self._to_gym_action(action))
        except Exception as err:
            raise RuntimeError(f"{self._label()}: step failed: {err}") from err
        frame = self._obs_frame(obs)
        done = terminated | truncated
        self._pending = None
        if not self._same_step:  # the observations are the step's own: the true last one where done
            self._skipped_rows, self._resetting = self._resetting, None
            self._env_done = done
        elif np.count_nonzero(done):
            # SAME_STEP autoreset: ``obs`` holds the reset observation of the done envs; keep it
            # for _continue_frame and report each done env's true final observation instead.
            self._pending = (frame, done)
            final = info["final_obs"]
            frame = {key: value.copy() for key, value in frame.items()}
            rows = done.nonzero()[0]
            for key, get, conv in self._final_leaves:
                out = frame[key]
                for i in rows:
                    out[i] = conv(get(final[i]))
        shape = self._flag_shape
        return frame, reward.astype(np.float32).reshape(shape), terminated.reshape(shape), truncated.reshape(shape)

    def _continue_frame(self, next_obs, done):
        done = np.asarray(done, dtype=bool)
        if not self._vectorized:
            return self._reset_frame(None) if np.count_nonzero(done) else next_obs
        done = done.reshape(-1)  # [envs] (the vector env's batch_size)
        if not np.count_nonzero(done):
            return next_obs
        if not self._same_step:
            return self._continue_next_step(next_obs, done)
        pending, self._pending = self._pending, None
        if pending is not None and done.tobytes() == pending[1].tobytes():
            # the usual case: exactly the envs Gymnasium reset; its observation array is the answer
            # (the step's observation elsewhere, the reset one where done), already a fresh copy
            return pending[0]
        out = {key: np.array(next_obs[key]) for key in self._keys}
        auto = np.zeros_like(done) if pending is None else pending[1] & done
        if np.count_nonzero(auto):
            for key in self._keys:
                out[key][auto] = pending[0][key][auto]
        # envs done by something Gymnasium does not know about (a transform's truncation, say):
        # a partial reset of just those sub-envs.
        extra = done & ~auto
        if np.count_nonzero(extra):
            fresh = self._reset_rows(extra)
            for key in self._keys:
                out[key][extra] = fresh[key]
        return out

    def _continue_next_step(self, next_obs, done):
        """``_continue_frame`` of a NEXT_STEP or DISABLED vector env. NEXT_STEP (unless in exact
        mode): the envs the env ended itself are skipped in its next step, which resets them (no
        extra call into the env), their observations left as they are; the others (a transform's
        truncation) and every done env of a DISABLED one are reset at once, where the env can."""
        if self._skips_rows and not self._exact:
            own = done if self._env_done is None else done & self._env_done
            ended = np.count_nonzero(own)
            self._resetting = own if ended else None
            if ended == np.count_nonzero(done):  # (own is part of done) every done env ended itself
                return next_obs
            done = done & ~own
        if not self._resets_rows:
            raise RuntimeError(
                f"{self._label()}: envs {np.flatnonzero(done).tolist()} are done but the vector env did not end their "
                "episodes, and it cannot reset only some envs (NEXT_STEP autoreset without reset_mask); limit "
                "episodes in the env itself (max_episode_steps) rather than with a transform")
        fresh = self._reset_rows(done)
        out = {key: np.array(next_obs[key]) for key in self._keys}
        for key in self._keys:
            out[key][done] = fresh[key]
        return out

    def _reset_rows(self, mask):
        """A frame of the first observations of the envs in ``mask`` (bool, ``[num_envs]``), after a
        reset of just those envs; rows in mask order."""
        try:
            obs, _ = self._env.reset(options={"reset_mask": mask})
        except Exception as err:
            raise RuntimeError(f"{self._label()}: reset of envs {np.flatnonzero(mask).tolist()} failed: {err}") from err
        return {key: value[mask] for key, value in self._obs_frame(obs).items()}

    # ---- the rest of the API ------------------------------------------------------------------------
    def set_seed(self, seed, static_seed=False):
        """Seeds rlpipe's generator (random actions) and every sub-env (``seed``, ``seed + 1``, ...,
        through ``env.reset(seed=...)``); returns the seed for a next environment: ``seed`` itself
        with ``static_seed=True``, else the next unused one (torchrl derives it from its own random
        generator instead)."""
        if seed is not None:
            _random.manual_seed(seed)
        self._reset_frame(seed)
        if seed is None or static_seed:
            return seed
        return seed + (int(self.batch_size[0]) if self._vectorized else 1)

    @property
    def env(self):
        """The wrapped Gymnasium environment."""
        return self._env

    def __getattr__(self, name):
        # only called for attributes missing here: the wrapped env's, as torchrl's wrappers forward them
        # (private names are not forwarded: a missing one is this wrapper's bug, not the env's attribute)
        if name.startswith("_") or "_env" not in self.__dict__:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        try:
            return getattr(self.__dict__["_env"], name)
        except AttributeError:
            raise AttributeError(f"'{type(self).__name__}' object and its wrapped env have no attribute "
                                 f"'{name}'") from None

    @property
    def num_envs(self):
        """The number of sub-envs of a wrapped vector env (None for a single env)."""
        return int(self.batch_size[0]) if self._vectorized else None

    def close(self, *, raise_if_closed=True):
        """Closes the Gymnasium env (an async vector env's worker processes reaped) and this env, once
        (``raise_if_closed``: torchrl's keyword, see EnvBase.close)."""
        try:
            if not self._is_closed:
                _close_gym_env(self._env)
        finally:
            super().close()

    def _label(self):
        return f"{type(self).__name__}({self.env_name})"

    def __repr__(self):
        return f"{type(self).__name__}(env={self.env_name}, batch_size={self.batch_size!r}, device={self.device})"


class GymEnv(GymWrapper):
    """A Gymnasium environment by id (or instance), torchrl's ``GymEnv``.

    Args:
        env_name: a registered Gymnasium id (``"CartPole-v1"``) or a ``gymnasium.Env`` instance.
        device: where the TensorDicts of ``reset``/``step``/``rollout`` live.
        categorical_action_encoding: Discrete spaces as ``Categorical`` instead of ``OneHot``.
        num_envs: if given, ``gymnasium.make_vec`` builds that many copies (``batch_size=[num_envs]``).
        from_pixels, pixels_only: render frames into ``"pixels"`` (see ``GymWrapper``); the env is made
            with ``render_mode="rgb_array"``.
        vectorization_mode: for ``num_envs``: ``"sync"`` or ``"async"`` (subprocesses), which wrap
            copies of the single env and autoreset in the same step, or ``"vector_entry_point"``:
            the env's native vector env (``CartPole-v1``'s ``CartPoleVectorEnv`` steps every copy in
            one NumPy call), with its own autoreset mode (see ``GymWrapper``).
        frame_skip: repeat each action this many times (see ``GymWrapper``); an env whose constructor
            takes ``frameskip`` (ALE) gets it and repeats actions itself, as in torchrl, which
            always passes it: ``GymEnv("ALE/Pong-v5")`` steps one frame at a time (ALE's own v5
            default is 4). An explicit ``frameskip=`` kwarg wins over the default ``frame_skip=1``.
        batch_size: only an empty one (see ``GymWrapper``).
        **kwargs: passed on to ``gymnasium.make`` / ``gymnasium.make_vec``: the env's own kwargs and
            Gymnasium's wrapper options (``render_mode``, ``max_episode_steps``, ``disable_env_checker``...).
    """

    def __init__(self, env_name, device=None, categorical_action_encoding=False, num_envs=None,
                 vectorization_mode="sync", frame_skip=1, batch_size=None, **kwargs):
        gym = _gym()
        _check_frame_skip(frame_skip)
        if not isinstance(env_name, str):
            if num_envs is not None:
                raise ValueError("GymEnv: num_envs needs an env id (an instance cannot be copied); "
                                 "pass a gymnasium VectorEnv instance instead")
            if kwargs:
                raise TypeError(f"GymEnv: make kwargs {sorted(kwargs)} need an env id, got an instance")
            super().__init__(env_name, device=device, categorical_action_encoding=categorical_action_encoding,
                             frame_skip=frame_skip, batch_size=batch_size)
            return
        self.env_name = env_name
        from_pixels = kwargs.pop("from_pixels", False)
        pixels_only = kwargs.pop("pixels_only", True)
        if from_pixels:
            kwargs.setdefault("render_mode", "rgb_array")
        native_vector = num_envs is not None and getattr(vectorization_mode, "value", vectorization_mode) == \
            "vector_entry_point"
        _import_ale_py_if_needed(env_name)
        native_skip = _takes_frameskip(env_name, native_vector)
        if native_skip:
            if "frameskip" in kwargs and frame_skip > 1:
                raise ValueError(f"GymEnv: give frame_skip or frameskip, not both (got frame_skip={frame_skip}, "
                                 f"frameskip={kwargs['frameskip']})")
            kwargs.setdefault("frameskip", frame_skip)
        if num_envs is None:
            env = self._build(lambda: gym.make(env_name, **kwargs), env_name)
        else:
            num_envs = int(num_envs)
            if num_envs < 1:
                raise ValueError(f"GymEnv: num_envs must be >= 1, got {num_envs}")
            mode = getattr(vectorization_mode, "value", vectorization_mode)  # a gymnasium VectorizeMode
            if mode not in ("sync", "async", "vector_entry_point"):
                raise ValueError(f"GymEnv: vectorization_mode must be 'sync', 'async' or 'vector_entry_point', "
                                 f"got {vectorization_mode!r}")
            if not hasattr(gym.vector, "AutoresetMode"):
                raise ImportError(f"GymEnv(num_envs=...) needs gymnasium >= 1.1 (autoreset modes); "
                                  f"found gymnasium {gym.__version__}")
            vector_kwargs = {}
            if mode != "vector_entry_point":  # a native vector env takes only the env's own kwargs
                vector_kwargs = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP, "copy": False}
            if mode == "async":
                start_method = mp.get_context().get_start_method()  # (the context Gymnasium will use)
                vector_kwargs["worker"] = functools.partial(_async_worker, parent_watch(start_method))
            env = self._build(lambda: gym.make_vec(env_name, num_envs=num_envs, vectorization_mode=mode,
                                                   vector_kwargs=vector_kwargs, **kwargs), env_name)
        try:
            super().__init__(env, device=device, categorical_action_encoding=categorical_action_encoding,
                             from_pixels=from_pixels, pixels_only=pixels_only,
                             frame_skip=1 if native_skip else frame_skip, batch_size=batch_size)
        except BaseException:
            _close_gym_env(env)
            raise
        self.frame_skip = int(frame_skip)

    @staticmethod
    def _build(make, env_name):
        gym = _gym()
        try:
            return make()
        except gym.error.Error as err:
            message = f"GymEnv: could not make Gymnasium environment {env_name!r}: {err}"
            try:
                wrapped = type(err)(message)
            except TypeError:  # an error class with another signature
                wrapped = ValueError(message)
            raise wrapped from err

    @_classproperty
    def available_envs(cls):
        """The ids registered with Gymnasium."""
        return list(_gym().registry.keys())
