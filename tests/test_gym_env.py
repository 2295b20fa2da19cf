"""``GymEnv`` / ``GymWrapper`` against small Gymnasium envs whose transitions are known by hand.

``Counter``: the observation is ``[t]`` (float32), ``t`` starts at 0 (or at a seeded draw in
``[0, start_max]``) and grows by one per step; the reward is ``t + 10 * action`` (the ``t`` after
the step); the episode terminates when ``t`` reaches ``terminate_at`` (5). ``TimeLimit`` truncation
comes from ``max_episode_steps``. ``Sensors``: a Dict observation (nested Dict, a float64 Box, a
Discrete and a MultiBinary leaf) and a MultiDiscrete action.
"""
import multiprocessing
import warnings
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import rlpipe
from rlpipe import TensorDict
from rlpipe.envs.gym import GymEnv, GymWrapper
from rlpipe.envs.specs import (
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)

COUNTER = "rlpipe_test/Counter-v0"
SENSORS = "rlpipe_test/Sensors-v0"
FAILING = "rlpipe_test/Failing-v0"


class Counter(gym.Env):
    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, terminate_at=5, start_max=0):
        self.observation_space = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.terminate_at = terminate_at
        self.start_max = start_max
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = int(self.np_random.integers(0, self.start_max + 1)) if self.start_max else 0
        return np.array([self.t], np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.t += 1
        return (np.array([self.t], np.float32), float(self.t + 10 * int(action)), self.t >= self.terminate_at,
                False, {})


class Sensors(gym.Env):
    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self):
        self.observation_space = spaces.Dict({
            "position": spaces.Box(-10.0, 10.0, (2,), np.float32),
            "velocity": spaces.Box(-np.inf, np.inf, (1,), np.float64),
            "sensors": spaces.Dict({"mode": spaces.Discrete(3), "bits": spaces.MultiBinary(4)}),
        })
        self.action_space = spaces.MultiDiscrete([3, 2])
        self.t = 0

    def _obs(self):
        t = self.t
        return {"position": np.array([t, -t], np.float32), "velocity": np.array([0.5 * t]),
                "sensors": {"mode": t % 3, "bits": np.array([(t >> i) & 1 for i in range(4)], np.int8)}}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.t += 1
        return self._obs(), float(10 * action[0] + action[1]), self.t >= 4, False, {}


class Failing(Counter):
    def step(self, action):
        if int(action) == 1:
            raise ValueError("boom: action 1 is not allowed")
        return super().step(action)


for _id, _cls in ((COUNTER, Counter), (SENSORS, Sensors), (FAILING, Failing)):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_cls)


def arr(x):
    return np.array(x.detach().cpu().numpy()) if isinstance(x, rlpipe.Tensor) else np.asarray(x)


def action_td(env, value, dtype=rlpipe.int64):
    return TensorDict({"action": rlpipe.tensor(np.asarray(value), dtype=dtype)}, batch_size=env.batch_size)


def _async_available():
    try:
        multiprocessing.get_context().Lock()
        return True
    except (OSError, PermissionError, ImportError, NotImplementedError):
        return False


needs_async = pytest.mark.skipif(not _async_available(), reason="multiprocessing is not available here")


# ---- single env: specs, reset, step ------------------------------------------------------------------

def test_counter_specs_and_repr():
    env = GymEnv(COUNTER)
    assert tuple(env.batch_size) == ()
    assert isinstance(env.action_spec, OneHot) and tuple(env.action_spec.shape) == (2,)
    assert isinstance(env.observation_spec, Composite)
    obs_spec = env.observation_spec["observation"]
    assert isinstance(obs_spec, Bounded) and tuple(obs_spec.shape) == (1,) and obs_spec.dtype is rlpipe.float32
    assert isinstance(env.reward_spec, Unbounded)
    assert tuple(env.reward_spec.shape) == (1,) and env.reward_spec.dtype is rlpipe.float32
    assert set(env.done_spec.keys()) == {"done", "terminated", "truncated"}
    for key in ("done", "terminated", "truncated"):
        spec = env.done_spec[key]
        assert isinstance(spec, Categorical) and spec.n == 2
        assert spec.dtype is rlpipe.bool and tuple(spec.shape) == (1,)
    assert repr(env) == "GymEnv(env=rlpipe_test/Counter-v0, batch_size=rlpipe.Size([]), device=None)"
    assert env.env_name == COUNTER and env.num_envs is None
    env.close()
    assert env._is_closed


def test_counter_reset_and_step_values():
    env = GymEnv(COUNTER)
    td = env.reset()
    np.testing.assert_array_equal(arr(td["observation"]), [0.0])
    assert arr(td["observation"]).dtype == np.float32
    for key in ("done", "terminated", "truncated"):
        np.testing.assert_array_equal(arr(td[key]), [False])
    td.set("action", rlpipe.tensor([0, 1]))  # one-hot: action 1
    env.step(td)
    np.testing.assert_array_equal(arr(td["next", "observation"]), [1.0])
    np.testing.assert_array_equal(arr(td["next", "reward"]), [11.0])
    assert arr(td["next", "reward"]).dtype == np.float32
    np.testing.assert_array_equal(arr(td["next", "done"]), [False])
    td = env.step(action_td(env, [1, 0]))  # action 0
    np.testing.assert_array_equal(arr(td["next", "observation"]), [2.0])
    np.testing.assert_array_equal(arr(td["next", "reward"]), [2.0])


def test_counter_frames():
    env = GymEnv(COUNTER)
    frame = env._reset_frame(seed=0)
    assert list(frame) == [("observation",)]
    np.testing.assert_array_equal(frame[("observation",)], [0.0])
    for t in range(1, 6):
        next_obs, reward, terminated, truncated = env._step_frame(np.array([1, 0]))
        assert list(next_obs) == [("observation",)]
        np.testing.assert_array_equal(next_obs[("observation",)], [t])
        assert reward.dtype == np.float32 and reward.shape == (1,) and reward[0] == t
        assert terminated.dtype == bool and terminated.shape == (1,) and truncated.shape == (1,)
        assert terminated[0] == (t == 5) and not truncated[0]
        if t < 5:
            assert env._continue_frame(next_obs, terminated | truncated) is next_obs
    np.testing.assert_array_equal(next_obs[("observation",)], [5.0])  # the true last observation
    restarted = env._continue_frame(next_obs, terminated | truncated)
    np.testing.assert_array_equal(restarted[("observation",)], [0.0])
    np.testing.assert_array_equal(next_obs[("observation",)], [5.0])  # left alone
    next_obs, *_ = env._step_frame(np.array([1, 0]))
    np.testing.assert_array_equal(next_obs[("observation",)], [1.0])


def test_counter_rollout_terminates():
    env = GymEnv(COUNTER)
    td = env.rollout(20)
    assert tuple(td.batch_size) == (5,)
    obs, nxt = arr(td["observation"])[:, 0], arr(td["next", "observation"])[:, 0]
    np.testing.assert_array_equal(obs, [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(nxt, [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(obs[1:], nxt[:-1])
    action = arr(td["action"]).argmax(-1)
    np.testing.assert_array_equal(arr(td["next", "reward"])[:, 0], nxt + 10 * action)
    np.testing.assert_array_equal(arr(td["next", "terminated"])[:, 0], [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(arr(td["next", "done"])[:, 0], [0, 0, 0, 0, 1])
    assert not arr(td["next", "truncated"]).any()
    assert not arr(td["done"]).any()


def test_counter_time_limit_truncates():
    env = GymEnv(COUNTER, max_episode_steps=3)
    td = env.rollout(20)
    assert tuple(td.batch_size) == (3,)
    np.testing.assert_array_equal(arr(td["next", "observation"])[:, 0], [1, 2, 3])
    np.testing.assert_array_equal(arr(td["next", "truncated"])[:, 0], [0, 0, 1])
    np.testing.assert_array_equal(arr(td["next", "done"])[:, 0], [0, 0, 1])
    assert not arr(td["next", "terminated"]).any()


def test_counter_rollout_through_resets():
    env = GymEnv(COUNTER, max_episode_steps=3)
    td = env.rollout(8, break_when_any_done=False)
    np.testing.assert_array_equal(arr(td["observation"])[:, 0], [0, 1, 2, 0, 1, 2, 0, 1])
    np.testing.assert_array_equal(arr(td["next", "observation"])[:, 0], [1, 2, 3, 1, 2, 3, 1, 2])
    np.testing.assert_array_equal(arr(td["next", "done"])[:, 0], [0, 0, 1, 0, 0, 1, 0, 0])
    assert not arr(td["done"]).any()


def test_rand_step():
    env = GymEnv(COUNTER)
    td = env.rand_step()
    assert env.action_spec.is_in(td["action"])
    a = int(arr(td["action"]).argmax())
    np.testing.assert_array_equal(arr(td["next", "observation"]), [1.0])
    np.testing.assert_array_equal(arr(td["next", "reward"]), [1.0 + 10 * a])


# ---- action encodings ------------------------------------------------------------------------------------

def test_categorical_action_encoding():
    env = GymEnv(COUNTER, categorical_action_encoding=True)
    assert isinstance(env.action_spec, Categorical) and tuple(env.action_spec.shape) == ()
    env.reset()
    td = env.step(action_td(env, 1))
    np.testing.assert_array_equal(arr(td["next", "reward"]), [11.0])
    td = env.step(action_td(env, 0))
    np.testing.assert_array_equal(arr(td["next", "reward"]), [2.0])
    td = env.rollout(3)
    assert arr(td["action"]).shape == (3,)
    np.testing.assert_array_equal(arr(td["next", "reward"])[:, 0], [1, 2, 3] + 10 * arr(td["action"]))


def test_one_hot_and_categorical_agree():
    rewards = []
    for categorical in (False, True):
        env = GymEnv(COUNTER, categorical_action_encoding=categorical)
        env.reset()
        out = []
        for a in (1, 0, 1):
            value = a if categorical else np.eye(2, dtype=np.int64)[a]
            out.append(float(arr(env.step(action_td(env, value))["next", "reward"])[0]))
        rewards.append(out)
    assert rewards[0] == rewards[1] == [11.0, 2.0, 13.0]


def test_bool_one_hot_action_is_accepted():
    env = GymEnv(COUNTER)
    env.reset()
    td = env.step(action_td(env, [False, True], dtype=rlpipe.bool))
    np.testing.assert_array_equal(arr(td["next", "reward"]), [11.0])


# ---- seeding -------------------------------------------------------------------------------------------

def _cartpole_rollout(env, seed):
    assert env.set_seed(seed) == seed + 1
    return env.rollout(40, break_when_any_done=False)


def test_set_seed_reproducible_cartpole():
    env = GymEnv("CartPole-v1")
    a, b, c = _cartpole_rollout(env, 3), _cartpole_rollout(env, 3), _cartpole_rollout(env, 4)
    for key in ("observation", ("next", "observation"), "action", ("next", "reward"), ("next", "done")):
        np.testing.assert_array_equal(arr(a[key]), arr(b[key]))
    assert not np.array_equal(arr(a["observation"]), arr(c["observation"]))
    assert arr(a["observation"]).dtype == np.float32
    # the same seed in a fresh env gives the same data as well
    np.testing.assert_array_equal(arr(_cartpole_rollout(GymEnv("CartPole-v1"), 3)["observation"]),
                                  arr(a["observation"]))


def test_set_seed_returns_the_next_seed_or_the_same_one_when_static():
    assert GymEnv("CartPole-v1").set_seed(7) == 8
    assert GymEnv("CartPole-v1", num_envs=3).set_seed(7) == 10
    assert GymEnv("CartPole-v1").set_seed(7, static_seed=True) == 7
    assert GymEnv("CartPole-v1", num_envs=3).set_seed(7, static_seed=True) == 7


# ---- Box actions, Dict observations ---------------------------------------------------------------------

def test_pendulum_box_action():
    env = GymEnv("Pendulum-v1")
    spec = env.action_spec
    assert isinstance(spec, Bounded) and tuple(spec.shape) == (1,) and spec.dtype is rlpipe.float32
    np.testing.assert_array_equal(arr(spec.low), [-2.0])
    np.testing.assert_array_equal(arr(spec.high), [2.0])
    assert tuple(env.observation_spec["observation"].shape) == (3,)
    env.set_seed(0)
    td = env.rollout(10)
    assert tuple(td.batch_size) == (10,)
    assert arr(td["observation"]).dtype == np.float32 and arr(td["observation"]).shape == (10, 3)
    assert arr(td["action"]).shape == (10, 1)
    assert (arr(td["next", "reward"]) <= 0).all()
    np.testing.assert_array_equal(arr(td["observation"])[1:], arr(td["next", "observation"])[:-1])
    td = env.step(action_td(env, [1.5], dtype=rlpipe.float32))
    assert arr(td["next", "observation"]).shape == (3,)
    with pytest.raises(ValueError, match=r"expected an action of shape \(1,\)"):
        env._step_frame(np.zeros(2, np.float32))


def test_dict_observation_keys_and_values():
    env = GymEnv(SENSORS)
    spec = env.observation_spec
    assert set(spec.keys(True, True)) == {"position", "velocity", ("sensors", "mode"), ("sensors", "bits")}
    assert spec["velocity"].dtype is rlpipe.float64  # Gymnasium's dtype is kept
    assert isinstance(spec["sensors", "mode"], OneHot) and tuple(spec["sensors", "mode"].shape) == (3,)
    assert tuple(spec["sensors", "bits"].shape) == (4,) and spec["sensors", "bits"].dtype is rlpipe.int8
    assert isinstance(env.action_spec, MultiOneHot) and tuple(env.action_spec.shape) == (5,)
    frame = env._reset_frame()
    assert set(frame) == {("position",), ("velocity",), ("sensors", "mode"), ("sensors", "bits")}
    td = env.reset()
    td.set("action", rlpipe.tensor([0, 0, 1, 0, 1]))  # MultiOneHot: (2, 1)
    env.step(td)
    nxt = td["next"]
    np.testing.assert_array_equal(arr(nxt["position"]), [1, -1])
    np.testing.assert_array_equal(arr(nxt["velocity"]), [0.5])
    assert arr(nxt["velocity"]).dtype == np.float64
    np.testing.assert_array_equal(arr(nxt["sensors", "mode"]), [0, 1, 0])
    np.testing.assert_array_equal(arr(nxt["sensors", "bits"]), [1, 0, 0, 0])
    np.testing.assert_array_equal(arr(nxt["reward"]), [21.0])
    roll = env.rollout(10)
    assert tuple(roll.batch_size) == (4,)
    np.testing.assert_array_equal(arr(roll["sensors", "mode"]).argmax(-1), [0, 1, 2, 0])
    np.testing.assert_array_equal(arr(roll["next", "sensors", "bits"])[-1], [0, 0, 1, 0])
    np.testing.assert_array_equal(arr(roll["position"])[1:], arr(roll["next", "position"])[:-1])


def test_dict_observation_categorical():
    env = GymEnv(SENSORS, categorical_action_encoding=True)
    assert isinstance(env.observation_spec["sensors", "mode"], Categorical)
    assert isinstance(env.action_spec, MultiCategorical) and tuple(env.action_spec.shape) == (2,)
    env.reset()
    td = env.step(action_td(env, [2, 1]))
    np.testing.assert_array_equal(arr(td["next", "sensors", "mode"]), 1)
    np.testing.assert_array_equal(arr(td["next", "reward"]), [21.0])


# ---- vectorized ----------------------------------------------------------------------------------------

def _check_vector_rollout(env, td, terminate_at=None, limit=None):
    """Per sub-env: transitions chain within an episode; at a done step ``next.observation`` is the
    true final observation and the following root observation a fresh reset."""
    obs, nxt = arr(td["observation"])[..., 0], arr(td["next", "observation"])[..., 0]
    done = arr(td["next", "done"])[..., 0]
    action = arr(td["action"]).argmax(-1)
    np.testing.assert_array_equal(arr(td["next", "reward"])[..., 0], nxt + 10 * action)
    np.testing.assert_array_equal(nxt, obs + 1)  # every transition is a real one
    n_done = 0
    for i in range(obs.shape[0]):
        start = obs[i, 0]
        for t in range(obs.shape[1]):
            if done[i, t]:
                n_done += 1
                if terminate_at is not None:
                    assert nxt[i, t] == terminate_at
                if limit is not None:
                    assert nxt[i, t] - start == limit
                if t + 1 < obs.shape[1]:
                    assert obs[i, t + 1] <= env.env.get_attr("start_max")[i]  # a reset observation
                    start = obs[i, t + 1]
            elif t + 1 < obs.shape[1]:
                assert obs[i, t + 1] == nxt[i, t]
    assert n_done > 0
    assert not arr(td["done"]).any()


def test_vector_sync_specs_and_autoreset():
    env = GymEnv(COUNTER, num_envs=3, start_max=2)
    assert tuple(env.batch_size) == (3,) and env.num_envs == 3
    assert tuple(env.action_spec.shape) == (3, 2)
    assert tuple(env.observation_spec["observation"].shape) == (3, 1)
    assert tuple(env.reward_spec.shape) == (3, 1)
    assert tuple(env.done_spec["done"].shape) == (3, 1)
    assert repr(env) == "GymEnv(env=rlpipe_test/Counter-v0, batch_size=rlpipe.Size([3]), device=None)"
    assert env.set_seed(1) == 4
    td = env.rollout(14, break_when_any_done=False)
    assert tuple(td.batch_size) == (3, 14)
    _check_vector_rollout(env, td, terminate_at=5)
    env.close()


def test_vector_time_limit_truncation():
    env = GymEnv(COUNTER, num_envs=3, start_max=2, max_episode_steps=3)
    env.set_seed(0)
    td = env.rollout(10, break_when_any_done=False)
    assert arr(td["next", "truncated"]).any()
    _check_vector_rollout(env, td, limit=3)


def test_vector_break_when_any_done():
    env = GymEnv(COUNTER, num_envs=3)
    td = env.rollout(20)
    assert tuple(td.batch_size) == (3, 5)
    np.testing.assert_array_equal(arr(td["next", "observation"])[:, -1, 0], [5, 5, 5])


def test_vector_frames_final_and_reset_observations():
    env = GymEnv(COUNTER, num_envs=3, start_max=2)
    frame = env._reset_frame(seed=10)
    start = frame[("observation",)][:, 0].copy()
    # each sub-env i is seeded with 10 + i: the same start as a single env seeded that way
    for i in range(3):
        single = GymEnv(COUNTER, start_max=2)
        assert single._reset_frame(seed=10 + i)[("observation",)][0] == start[i]
    act = np.tile(np.array([1, 0]), (3, 1))
    current = frame[("observation",)][:, 0]
    for _ in range(8):
        next_obs, reward, terminated, truncated = env._step_frame(act)
        assert reward.shape == terminated.shape == truncated.shape == (3, 1)
        assert reward.dtype == np.float32 and terminated.dtype == bool
        np.testing.assert_array_equal(next_obs[("observation",)][:, 0], current + 1)
        done = terminated | truncated
        np.testing.assert_array_equal(next_obs[("observation",)][done[:, 0], 0], 5)
        cont = env._continue_frame(next_obs, done)
        current = cont[("observation",)][:, 0]
        np.testing.assert_array_equal(current[~done[:, 0]], next_obs[("observation",)][~done[:, 0], 0])
        assert (current[done[:, 0]] <= 2).all()
        # the env really continues from the reset observation
        probe = env.env.get_attr("t")
        np.testing.assert_array_equal(probe, current)


def test_vector_continue_resets_envs_gymnasium_did_not():
    """A done that comes from outside Gymnasium (a transform's step limit, say) resets that sub-env."""
    env = GymEnv(COUNTER, num_envs=3)
    env._reset_frame(seed=0)
    act = np.tile(np.array([1, 0]), (3, 1))
    for _ in range(2):
        next_obs, *_ = env._step_frame(act)
    cont = env._continue_frame(next_obs, np.array([[False], [True], [False]]))
    np.testing.assert_array_equal(cont[("observation",)][:, 0], [2, 0, 2])
    np.testing.assert_array_equal(next_obs[("observation",)][:, 0], [2, 2, 2])  # not modified
    next_obs, *_ = env._step_frame(act)
    np.testing.assert_array_equal(next_obs[("observation",)][:, 0], [3, 1, 3])


def test_vector_continue_mixes_autoreset_and_outside_done():
    env = GymEnv(COUNTER, num_envs=3, start_max=2)
    for seed in range(100):  # sub-envs that do not all end together
        start = env._reset_frame(seed=seed)[("observation",)][:, 0]
        if len(set(start.tolist())) == 3:
            break
    act = np.tile(np.array([1, 0]), (3, 1))
    while True:
        next_obs, _, terminated, truncated = env._step_frame(act)
        done = (terminated | truncated)[:, 0]
        if done.any():
            break
    assert done.sum() == 1
    outside = np.flatnonzero(~done)[0]
    mask = done.copy()
    mask[outside] = True
    cont = env._continue_frame(next_obs, mask[:, None])[("observation",)][:, 0]
    t = np.array(env.env.get_attr("t"), np.float32)
    np.testing.assert_array_equal(cont, t)  # what each sub-env will continue from
    assert (cont[mask] <= 2).all()
    np.testing.assert_array_equal(cont[~mask], next_obs[("observation",)][~mask, 0])
    np.testing.assert_array_equal(next_obs[("observation",)][done, 0], [5])


def test_available_envs():
    assert "CartPole-v1" in GymEnv.available_envs
    assert COUNTER in GymEnv(COUNTER).available_envs


def test_vector_dict_observations():
    env = GymEnv(SENSORS, num_envs=2)
    assert tuple(env.observation_spec["sensors", "mode"].shape) == (2, 3)
    assert tuple(env.action_spec.shape) == (2, 5)
    td = env.rollout(6, break_when_any_done=False)
    pos = arr(td["position"])[..., 0]
    nxt = arr(td["next", "position"])[..., 0]
    np.testing.assert_array_equal(pos, [[0, 1, 2, 3, 0, 1]] * 2)
    np.testing.assert_array_equal(nxt, [[1, 2, 3, 4, 1, 2]] * 2)
    np.testing.assert_array_equal(arr(td["next", "sensors", "mode"])[:, 3], [[0, 1, 0]] * 2)  # 4 % 3 == 1
    np.testing.assert_array_equal(arr(td["next", "sensors", "bits"])[:, 3], [[0, 0, 1, 0]] * 2)
    np.testing.assert_array_equal(arr(td["sensors", "mode"])[:, 4], [[1, 0, 0]] * 2)


def test_vector_set_seed_reproducible_cartpole():
    env = GymEnv("CartPole-v1", num_envs=3)
    out = []
    for _ in range(2):
        assert env.set_seed(5) == 8
        out.append(env.rollout(30, break_when_any_done=False))
    np.testing.assert_array_equal(arr(out[0]["observation"]), arr(out[1]["observation"]))
    np.testing.assert_array_equal(arr(out[0]["action"]), arr(out[1]["action"]))
    obs = arr(out[0]["observation"])
    assert not np.array_equal(obs[0], obs[1])  # sub-envs get different seeds


def test_wrapper_instances():
    env = GymWrapper(gym.make("CartPole-v1"))
    assert repr(env) == "GymWrapper(env=CartPole-v1, batch_size=rlpipe.Size([]), device=None)"
    assert env.rollout(3).batch_size[0] <= 3
    same = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    venv = GymWrapper(same, categorical_action_encoding=True)
    assert tuple(venv.batch_size) == (2,) and tuple(venv.action_spec.shape) == (2,)
    assert tuple(venv.rollout(4, break_when_any_done=False).batch_size) == (2, 4)
    assert tuple(GymEnv(gym.make(COUNTER)).rollout(10).batch_size) == (5,)
    # NEXT_STEP autoreset (make_vec's default): accepted, the done envs reset through reset_mask
    # (tests/test_vector_envs.py checks its transitions)
    next_step = GymWrapper(gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync"))
    assert next_step._skips_rows and next_step._resets_rows
    assert tuple(next_step.rollout(30, break_when_any_done=False).batch_size) == (2, 30)
    next_step.close()
    with pytest.raises(TypeError, match="gymnasium.Env"):
        GymWrapper(object())


@needs_async
def test_vector_async_counter_autoreset():
    try:
        env = GymEnv(COUNTER, num_envs=3, vectorization_mode="async", start_max=2)
    except (OSError, PermissionError, EOFError) as err:  # pragma: no cover - sandboxed runners
        pytest.skip(f"async vector env could not start: {err}")
    try:
        env.set_seed(1)
        td = env.rollout(12, break_when_any_done=False)
        _check_vector_rollout(env, td, terminate_at=5)
        cont_env_check = env.env.get_attr("t")
        assert len(cont_env_check) == 3
    finally:
        env.close()


@needs_async
def test_vector_async_matches_sync():
    try:
        env = GymEnv("CartPole-v1", num_envs=2, vectorization_mode="async")
    except (OSError, PermissionError, EOFError) as err:  # pragma: no cover
        pytest.skip(f"async vector env could not start: {err}")
    try:
        sync = GymEnv("CartPole-v1", num_envs=2)
        a = _seeded(env, 2)
        b = _seeded(sync, 2)
        for key in ("observation", ("next", "observation"), ("next", "done")):
            np.testing.assert_array_equal(arr(a[key]), arr(b[key]))
    finally:
        env.close()


def _seeded(env, seed):
    env.set_seed(seed)
    return env.rollout(40, break_when_any_done=False)


# ---- errors --------------------------------------------------------------------------------------------

def test_unknown_env_id():
    with pytest.raises(gym.error.Error, match="NoSuchEnv-v0") as info:
        GymEnv("NoSuchEnv-v0")
    assert isinstance(info.value.__cause__, gym.error.Error)
    with pytest.raises(gym.error.Error, match="NoSuchEnv-v0"):
        GymEnv("NoSuchEnv-v0", num_envs=2)


def test_bad_arguments():
    with pytest.raises(ValueError, match="vectorization_mode"):
        GymEnv(COUNTER, num_envs=2, vectorization_mode="threads")
    with pytest.raises(ValueError, match="num_envs"):
        GymEnv(COUNTER, num_envs=0)
    with pytest.raises(ValueError, match="num_envs"):
        GymEnv(gym.make(COUNTER), num_envs=2)


def test_wrong_action_shape():
    env = GymEnv(COUNTER)
    env.reset()
    with pytest.raises(ValueError, match=r"expected an action of shape \(2,\).*got \(3,\)"):
        env._step_frame(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match=r"expected an action of shape \(2,\)"):
        env.step(action_td(env, 1))  # a categorical action given to a one-hot env
    venv = GymEnv(COUNTER, num_envs=3)
    venv.reset()
    with pytest.raises(ValueError, match=r"GymEnv\(rlpipe_test/Counter-v0\).*\(3, 2\)"):
        venv._step_frame(np.zeros((2, 2), np.int64))


def test_step_error_names_the_env():
    env = GymEnv(FAILING, categorical_action_encoding=True)
    env.reset()
    env.step(action_td(env, 0))
    with pytest.raises(RuntimeError, match=r"GymEnv\(rlpipe_test/Failing-v0\): step failed: boom") as info:
        env.step(action_td(env, 1))
    assert isinstance(info.value.__cause__, ValueError)
    venv = GymEnv(FAILING, num_envs=2, categorical_action_encoding=True)
    venv.reset()
    with pytest.raises(RuntimeError, match=r"GymEnv\(rlpipe_test/Failing-v0\): step failed"):
        venv._step_frame(np.array([0, 1]))


def test_no_warnings_from_gymnasium_checker():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = GymEnv(COUNTER)
        env.rollout(6)


def test_deviceless_by_default_as_torchrl():
    # torchrl 0.14.1: GymEnv("CartPole-v1").device is None; its reset/step/rollout TensorDicts have
    # device None (the tensors live on the CPU); the root Composite specs have device None and the
    # leaf specs device cpu. Given device="cpu", everything is on cpu.
    env = GymEnv("CartPole-v1")
    assert env.device is None
    assert env.observation_spec.device is None and env.full_done_spec.device is None
    assert env.observation_spec["observation"].device == rlpipe.device("cpu")
    assert env.action_spec.device == rlpipe.device("cpu") and env.reward_spec.device == rlpipe.device("cpu")
    td = env.reset()
    assert td.device is None and td["observation"].device == rlpipe.device("cpu")
    assert env.rand_action().device is None
    stepped = env.step(env.rand_action(td))
    assert stepped["next"].device is None and stepped["next", "reward"].device == rlpipe.device("cpu")
    rollout = env.rollout(3)
    assert rollout.device is None and rollout["next"].device is None
    assert "device=None" in repr(rollout)
    on_cpu = GymEnv("CartPole-v1", device="cpu")
    assert on_cpu.device == rlpipe.device("cpu")
    assert on_cpu.reset().device == rlpipe.device("cpu") and on_cpu.rollout(2).device == rlpipe.device("cpu")
    assert repr(on_cpu) == "GymEnv(env=CartPole-v1, batch_size=rlpipe.Size([]), device=cpu)"


def test_close_takes_torchrls_keyword():
    env = GymEnv("CartPole-v1")
    env.close(raise_if_closed=False)
    env.close(raise_if_closed=True)  # closing twice is fine for a single env, as torchrl's
