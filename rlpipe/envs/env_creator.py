"""``EnvCreator``: torchrl's picklable env factory that knows its env's specs without building it again."""
import types

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

    Unlike torchrl, no transform state is shared between the envs it builds (rlpipe's transforms
    keep none that ``VecNorm``'s shared memory would need here)."""

    def __init__(self, create_env_fn, create_env_kwargs=None, **kwargs):
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
        self.init_()

    def init_(self):
        """Builds the env once to read its specs (``meta_data``), then closes it."""
        shadow_env = self.create_env_fn(**self.create_env_kwargs)
        try:
            self.env_type = type(shadow_env)
            self._meta_data = EnvMetaData.metadata_from_env(shadow_env)
        finally:
            shadow_env.close()
        self.initialized = True
        return self

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
        return self.create_env_fn(**kwargs)

    def __repr__(self):
        return f"EnvCreator({self.create_env_fn}({', '.join(map(str, self.create_env_kwargs))}))"


def env_creator(fun):
    """``EnvCreator(fun)``."""
    return EnvCreator(fun)
