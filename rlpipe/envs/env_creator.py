"""``EnvCreator``: torchrl's picklable env factory that knows its env's specs without building it again,
and shares its env's transform state (``VecNorm``'s statistics) with every env it builds."""
import types
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Lock, RLock

from .._tensor import Tensor

__all__ = ["EnvCreator", "env_creator", "EnvMetaData"]


class EnvMetaData(types.SimpleNamespace):
    """What a batched env needs to know of its workers' env before starting them: ``batch_size``,
    ``device``, ``env_str`` and the four stored specs (``action_spec``, ``observation_spec``,
    ``reward_spec``, ``done_spec``) plus ``state_spec``, and the action and reward specs under their keys
    (``full_action_spec``, ``full_reward_spec``)."""

    @classmethod
    def metadata_from_env(cls, env):
        """The metadata of a built ``env``: its batch size, device, repr, specs and row skipping."""
        return cls(batch_size=env.batch_size, device=env.device, env_str=repr(env),
                   action_spec=env.action_spec.clone(), observation_spec=env.observation_spec.clone(),
                   reward_spec=env.reward_spec.clone(), done_spec=env.done_spec.clone(),
                   state_spec=env.state_spec.clone(), skips_rows=bool(env._skips_rows),
                   full_action_spec=env.full_action_spec.clone(), full_reward_spec=env.full_reward_spec.clone())


def get_env_metadata(create_env_fn, kwargs=None):
    """The ``EnvMetaData`` of the env ``create_env_fn(**kwargs)`` builds (an ``EnvCreator`` answers
    from its own, built once); a built env is closed again."""
    if isinstance(create_env_fn, EnvCreator) and not kwargs:
        return create_env_fn.meta_data
    env = create_env_fn(**(kwargs or {}))
    try:
        return EnvMetaData.metadata_from_env(env)
    finally:
        env.close()


class EnvCreator:
    """An env factory, as torchrl's: ``EnvCreator(fn, create_env_kwargs)()`` builds ``fn(**kwargs)``.
    It builds one env when made, to read its specs (``meta_data``, which ``SerialEnv`` and
    ``ParallelEnv`` read instead of building an env of their own), and closes it. Extra keyword
    arguments are construction kwargs too, and those given at construction take precedence over
    the call's (torchrl's order).

    As torchrl's, the env it builds first is reset and stepped once at random, and its
    ``state_dict()`` (``VecNorm``'s statistics, say) kept and, with ``share_memory`` (default),
    moved into shared memory; every env built then loads it, so all of them, in worker
    processes too, update one set of statistics (the creator's ``state_dict()``); they also share
    the first env's multiprocessing locks. The workers must be forked (``ParallelEnv``'s default
    on Linux): a spawned worker gets a copy."""

    def __init__(self, create_env_fn, create_env_kwargs=None, share_memory=True, **kwargs):
        if not callable(create_env_fn):
            raise TypeError(f"EnvCreator: create_env_fn must be callable, got {type(create_env_fn).__name__}")
        if create_env_kwargs is not None and not isinstance(create_env_kwargs, dict):
            raise TypeError(f"EnvCreator: create_env_kwargs must be a dict or None, got "
                            f"{type(create_env_kwargs).__name__}")
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = dict(kwargs)
        self.create_env_kwargs.update(create_env_kwargs or {})
        self.initialized = False
        self._meta_data = None
        self._share_memory = bool(share_memory)
        self.init_()

    def init_(self):
        """Builds the env once, resets it and takes one random step (so that its transforms hold
        their state), reads its specs (``meta_data``), state and locks, then closes it."""
        shadow_env = self.create_env_fn(**self.create_env_kwargs)
        try:
            self.env_type = type(shadow_env)
            shadow_env.rand_step(shadow_env.reset())
            self._transform_state_dict = shadow_env.state_dict()
            self._mp_values = _find_mp_values(shadow_env)
            if self._share_memory:
                for _, value in _tensors(self._transform_state_dict):
                    value.share_memory_()
            self._meta_data = EnvMetaData.metadata_from_env(shadow_env)
        finally:
            shadow_env.close()
        self.initialized = True
        return self

    def state_dict(self):
        """The state every env built here loads (shared tensors: the live statistics)."""
        return self._transform_state_dict

    def load_state_dict(self, state_dict):
        """Copies ``state_dict``'s tensors into the shared state, in place (every env sees them)."""
        mine = dict(_tensors(self._transform_state_dict))
        given = dict(_tensors(state_dict))
        unexpected = sorted(".".join(path) for path in set(given) - set(mine))
        if unexpected:
            raise KeyError(f"EnvCreator.load_state_dict: unexpected keys {unexpected} (expected among "
                           f"{sorted('.'.join(path) for path in mine)})")
        for path, value in given.items():
            mine[path].copy_(value)

    @property
    def meta_data(self):
        """The ``EnvMetaData`` of the env this creator builds (read once, at construction)."""
        if self._meta_data is None:
            raise RuntimeError("meta_data is None in EnvCreator. Make sure init_() has been called.")
        return self._meta_data

    def make_variant(self, **kwargs):
        """A copy building its envs with ``kwargs`` added to the construction kwargs (specs not re-read)."""
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.create_env_kwargs = {**self.create_env_kwargs, **kwargs}
        return out

    def __call__(self, **kwargs):
        kwargs.update(self.create_env_kwargs)  # the construction kwargs take precedence, as torchrl
        env = self.create_env_fn(**kwargs)
        for path, value in self._mp_values:
            _set_path(env, path, value)
        env.load_state_dict(self._transform_state_dict, strict=False)
        return env

    def __repr__(self):
        return f"EnvCreator({self.create_env_fn}({', '.join(map(str, self.create_env_kwargs))}))"


def _tensors(state, prefix=()):
    """``(path, tensor)`` of every tensor in a state dict, nested dicts (``_extra_state``) included."""
    for key, value in state.items():
        if isinstance(value, Tensor):
            yield prefix + (key,), value
        elif isinstance(value, dict):
            yield from _tensors(value, prefix + (key,))


def _is_mp_value(value):
    return isinstance(value, (Lock, RLock)) or (isinstance(value, Synchronized) and hasattr(value, "_obj"))


def _find_mp_values(obj, prefix=()):
    """``(path, value)`` of the multiprocessing locks and values held by ``obj`` (an env or a
    transform) and the transforms and base env under it, as torchrl's ``EnvCreator`` finds them."""
    children = []
    if hasattr(obj, "base_env") and hasattr(obj, "transform"):
        children = [("transform", obj.transform), ("base_env", obj.base_env)]
    elif hasattr(obj, "transforms"):
        children = list(enumerate(obj.transforms))
    found = [(prefix + (name,), v) for name, v in vars(obj).items() if _is_mp_value(v)]
    for name, child in children:
        found.extend(_find_mp_values(child, prefix + (name,)))
    return found


def _set_path(obj, path, value):
    for step in path[:-1]:
        obj = obj.transforms[step] if isinstance(step, int) else getattr(obj, step)
    setattr(obj, path[-1], value)


def env_creator(fun):
    """``EnvCreator(fun)``."""
    return EnvCreator(fun)
