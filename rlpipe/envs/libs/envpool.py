"""envpool's C++ vector envs as rlpipe environments: torchrl's ``MultiThreadedEnvWrapper`` (a pool
made by ``envpool.make(..., env_type="gymnasium")``) and ``MultiThreadedEnv`` (by task id).

envpool (``pip install rlpipe[envpool]``) steps every env of its pool in C++ threads and, as
Gymnasium's NEXT_STEP autoreset, resets an env that ended during the following step. As any
``GymWrapper`` NEXT_STEP vector env, these wrappers skip those reset steps (the collector drops
them: no extra call into the pool), and reset through envpool's partial reset (``reset(env_id)``)
the envs a transform ends and, in ``rollout``, every done env: the collector, ``rollout`` and
transforms see exact transitions.

Where rlpipe differs from torchrl 0.14: rewards and done flags are shaped ``[num_workers, 1]`` (as
every rlpipe env's), not ``[num_workers]``; ``categorical_action_encoding`` is honoured (torchrl
always gives a ``Categorical`` action spec, the default here too); the pool is a gymnasium-API one
(torchrl makes ``env_type="gym"``); ``MultiThreadedEnvWrapper.set_seed`` warns that a made pool
cannot be reseeded (torchrl logs it).
"""
import warnings

import numpy as np

from ..gym import GymWrapper, _classproperty

__all__ = ["MultiThreadedEnv", "MultiThreadedEnvWrapper"]


def _envpool():
    try:
        import envpool
    except ImportError as err:
        raise ImportError("rlpipe's MultiThreadedEnv needs envpool (pip install envpool, or rlpipe[envpool])") from err
    return envpool


class MultiThreadedEnvWrapper(GymWrapper):
    """An envpool pool (``envpool.make(task_id, env_type="gymnasium", num_envs=N)``) as an rlpipe
    environment of batch size ``[N]``.

    Args:
        env: the pool; synchronous (its ``batch_size`` is its ``num_envs``), gymnasium API.
        categorical_action_encoding: Discrete actions as ``Categorical`` (default, as torchrl) or,
            when False, ``OneHot``.
        device: where the TensorDicts of ``reset``/``step``/``rollout`` live.
    """

    @_classproperty
    def lib(cls):
        return _envpool()

    def __init__(self, env=None, *, categorical_action_encoding=True, device=None, **kwargs):
        envpool = _envpool()
        if env is None:
            raise TypeError(f"{type(self).__name__} needs an envpool pool (envpool.make(..., env_type='gymnasium'))")
        from envpool.python.gymnasium_envpool import GymnasiumEnvPoolMixin
        if not isinstance(env, envpool.python.envpool.EnvPoolMixin):
            raise TypeError(f"{type(self).__name__}: env must be an envpool pool, got {type(env).__name__}")
        if not isinstance(env, GymnasiumEnvPoolMixin):
            raise TypeError(f"{type(self).__name__}: the pool must have the gymnasium API "
                            f"(envpool.make(..., env_type='gymnasium')), got {type(env).__name__}")
        num_envs, batch = int(env.config["num_envs"]), int(env.config["batch_size"])
        if batch != num_envs:
            raise ValueError(f"{type(self).__name__}: only synchronous pools are supported (batch_size == num_envs); "
                             f"got batch_size={batch}, num_envs={num_envs}")
        self.num_workers = num_envs
        if not hasattr(self, "env_name"):  # a pool does not know its task id
            self.env_name = type(env).__name__
        super().__init__(env, device=device, categorical_action_encoding=categorical_action_encoding, **kwargs)

    @staticmethod
    def _can_reset_rows(env, mode):
        return True  # envpool's reset(env_id)

    def _reset_rows(self, mask):
        ids = np.flatnonzero(mask).astype(np.int32)
        try:
            obs, info = self._env.reset(ids)
        except Exception as err:
            raise RuntimeError(f"{self._label()}: reset of envs {ids.tolist()} failed: {err}") from err
        order = np.argsort(np.asarray(info["env_id"]), kind="stable")  # the rows in env order, as mask
        return {key: value[order] for key, value in self._obs_frame(obs).items()}

    def _reset_frame(self, seed=None):
        return super()._reset_frame(None)  # envpool ignores reset(seed=...) (with a warning): set_seed handles it

    def set_seed(self, seed, static_seed=False):
        """A made pool keeps the seed it was made with (``envpool.make(..., seed=...)``): this warns
        and only resets (``MultiThreadedEnv.set_seed`` makes the pool anew)."""
        if seed is not None:
            warnings.warn(f"{type(self).__name__}.set_seed: an envpool pool cannot be reseeded; make it with "
                          "envpool.make(..., seed=...) (or use MultiThreadedEnv, which remakes it)", UserWarning,
                          stacklevel=2)
        return super().set_seed(seed, static_seed=static_seed)

    def _label(self):
        return f"{type(self).__name__}({self.env_name})"

    def __repr__(self):
        return f"{type(self).__name__}(num_workers={self.num_workers}, device={self.device})"


class MultiThreadedEnv(MultiThreadedEnvWrapper):
    """``num_workers`` envs of envpool's task ``env_name`` in one pool (torchrl's ``MultiThreadedEnv``).

    Args:
        num_workers: the number of envs, the batch size.
        env_name: an envpool task id (``"CartPole-v1"``, ``"Pong-v5"``; an ``"ALE/"`` prefix is dropped).
        create_env_kwargs: passed on to ``envpool.make`` (``seed``, ``max_episode_steps``,
            ``num_threads``, ...).
        categorical_action_encoding, device: as ``MultiThreadedEnvWrapper``.

    ``set_seed(seed)`` makes the pool anew with that seed, as torchrl does.
    """

    def __init__(self, num_workers, env_name, *, create_env_kwargs=None, categorical_action_encoding=True,
                 device=None):
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) or num_workers < 1:
            raise ValueError(f"MultiThreadedEnv: num_workers must be a positive integer, got {num_workers!r}")
        if not isinstance(env_name, str):
            raise TypeError(f"MultiThreadedEnv: env_name must be an envpool task id (str), got "
                            f"{type(env_name).__name__}")
        self.env_name = env_name.replace("ALE/", "")  # envpool's naming
        self.create_env_kwargs = dict(create_env_kwargs or {})
        super().__init__(self._make(int(num_workers)), categorical_action_encoding=categorical_action_encoding,
                         device=device)

    def _make(self, num_workers):
        envpool = _envpool()
        try:
            return envpool.make(self.env_name, env_type="gymnasium", num_envs=num_workers, **self.create_env_kwargs)
        except Exception as err:
            raise ValueError(f"MultiThreadedEnv: envpool could not make {self.env_name!r} with "
                             f"{self.create_env_kwargs}: {err}") from err

    def set_seed(self, seed, static_seed=False):
        if seed is not None:
            old, self.create_env_kwargs["seed"] = self.create_env_kwargs.get("seed"), int(seed)
            try:
                env = self._make(self.num_workers)
            except BaseException:
                self.create_env_kwargs["seed"] = old
                raise
            self._env.close()
            self._env = env
            self._bind_step()
        return GymWrapper.set_seed(self, seed, static_seed=static_seed)

    def __repr__(self):
        return f"{type(self).__name__}(env={self.env_name}, num_workers={self.num_workers}, device={self.device})"
