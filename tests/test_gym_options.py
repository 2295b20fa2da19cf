"""``GymEnv``'s options as torchrl's: ``frame_skip``, ``from_pixels``/``pixels_only``,
``categorical_action_encoding``, ``render_mode``, ``device``, ``batch_size``, and ``gymnasium.make``
kwargs (the env's own and Gymnasium's wrappers).

Expectations are computed by hand on ``Counter`` (the observation is ``[t]``, ``t`` grows by one per
step from 0, the reward is ``t + 10 * action`` with the ``t`` after the step, the episode terminates
at ``t == 5``), by a plain Gymnasium loop on CartPole, or recorded from torchrl 0.14.1 (pixels).
"""
import importlib.util
import warnings
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import rlpipe
from rlpipe.envs.gym import GymEnv, GymWrapper
from rlpipe.envs.specs import Categorical, OneHot, UnboundedDiscrete

COUNTER = "rlpipe_options/Counter-v0"
SKIPPER = "rlpipe_options/Skipper-v0"


class Counter(gym.Env):
    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, terminate_at=5):
        self.observation_space = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.terminate_at = terminate_at
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.t], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), float(self.t + 10 * int(action)), self.t >= self.terminate_at, False, {}


class Skipper(Counter):
    """A Counter that repeats actions itself, as ALE envs do with their ``frameskip``."""

    def __init__(self, frameskip=1):
        super().__init__(terminate_at=100)
        self.frameskip = frameskip

    def step(self, action):
        self.t += self.frameskip
        return np.array([self.t], np.float32), float(self.frameskip), False, False, {}


for _id, _cls in ((COUNTER, Counter), (SKIPPER, Skipper)):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_cls)


def step_with(env, td, action):
    td.set("action", rlpipe.tensor(np.asarray(action), dtype=rlpipe.int64))
    env.step(td)
    return td["next"]


def flat(x):
    return np.asarray(x.numpy()).reshape(-1).tolist()


# ---- frame_skip -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: GymEnv(COUNTER, frame_skip=3, categorical_action_encoding=True),
                                  lambda: GymWrapper(Counter(), frame_skip=3, categorical_action_encoding=True)])
def test_frame_skip_repeats_sums_and_stops_at_done(make):
    env = make()
    assert (env.frame_skip, env.wrapper_frame_skip) == (3, 3)
    td = env.reset()
    nxt = step_with(env, td, 0)   # t = 1, 2, 3: rewards 1 + 2 + 3
    assert flat(nxt["observation"]) == [3.0] and flat(nxt["reward"]) == [6.0] and flat(nxt["done"]) == [False]
    td = nxt.clone()
    nxt = step_with(env, td, 1)   # t = 4, 5 (terminated at 5): rewards 14 + 15, the third repeat not run
    assert flat(nxt["observation"]) == [5.0] and flat(nxt["reward"]) == [29.0]
    assert flat(nxt["terminated"]) == [True] and flat(nxt["done"]) == [True]
    env.close()


def test_frame_skip_matches_a_plain_gymnasium_loop():
    actions = [0, 1, 1, 0, 0, 1, 1, 1]
    plain = gym.make("CartPole-v1")
    obs, _ = plain.reset(seed=1)
    expected = []
    for a in actions:
        total = 0.0
        for _ in range(3):
            obs, reward, terminated, truncated, _ = plain.step(a)
            total += reward
            if terminated or truncated:
                break
        expected.append((obs.tolist(), total, terminated))
        if terminated or truncated:
            break
    env = GymEnv("CartPole-v1", frame_skip=3, categorical_action_encoding=True)
    td = env.reset(seed=1)
    for action, (obs, total, terminated) in zip(actions, expected):
        nxt = step_with(env, td, action)
        assert np.allclose(flat(nxt["observation"]), obs) and flat(nxt["reward"]) == [total]
        assert flat(nxt["terminated"]) == [terminated]
        td = nxt.clone()
    # torchrl 0.14.1, reset(seed=1) then one-hot actions 0, 1, 1: three full repeats, observation after the third
    td = env.reset(seed=1)
    for a, recorded in ((0, [-0.007791, -0.538876, -0.016011, 0.891338]), (1, [-0.028408, 0.04648, 0.01972, 0.01322]),
                        (1, [-0.01393, 0.63106, 0.003331, -0.847563])):
        nxt = step_with(env, td, a)
        assert np.allclose(flat(nxt["observation"]), recorded, atol=1e-6) and flat(nxt["reward"]) == [3.0]
        td = nxt.clone()
    env.close()
    plain.close()


def test_frame_skip_on_a_vector_env_sums_per_env_and_stops_at_any_done():
    env = GymEnv(COUNTER, num_envs=2, frame_skip=2, categorical_action_encoding=True)
    td = env.reset()
    nxt = step_with(env, td, [0, 1])  # t = 1, 2: rewards 1 + 2 and 11 + 12
    assert flat(nxt["reward"]) == [3.0, 23.0] and flat(nxt["observation"]) == [2.0, 2.0]
    td = nxt.clone()
    nxt = step_with(env, td, [0, 0])  # t = 3, 4
    assert flat(nxt["reward"]) == [7.0, 7.0]
    td = nxt.clone()
    nxt = step_with(env, td, [0, 0])  # t = 5: both terminate after the first repeat
    assert flat(nxt["reward"]) == [5.0, 5.0] and flat(nxt["done"]) == [True, True]
    env.close()


def test_frame_skip_goes_to_an_env_that_repeats_itself():
    env = GymEnv(SKIPPER, frame_skip=4)
    assert (env.frame_skip, env.wrapper_frame_skip) == (4, 1)
    assert env.env.unwrapped.frameskip == 4
    td = env.reset()
    nxt = step_with(env, td, [1, 0])
    assert flat(nxt["observation"]) == [4.0] and flat(nxt["reward"]) == [4.0]  # one env step, not four
    env.close()
    with pytest.raises(ValueError, match="frame_skip or frameskip"):
        GymEnv(SKIPPER, frame_skip=2, frameskip=3)


@pytest.mark.parametrize("frame_skip", [2.0, "2", 0, -1, True])
def test_frame_skip_must_be_a_positive_int(frame_skip):
    with pytest.raises(ValueError, match="frame_skip must be"):
        GymEnv(COUNTER, frame_skip=frame_skip)


def test_frame_skip_refused_where_the_env_skips_rows():
    with pytest.raises(ValueError, match="frame_skip=2 needs a vector env that resets its done envs in the same step"):
        GymEnv("CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point", frame_skip=2)


def test_frame_skip_one_is_the_plain_step():
    env = GymEnv(COUNTER)
    assert (env.frame_skip, env.wrapper_frame_skip) == (1, 1)
    td = env.reset()
    assert flat(step_with(env, td, [1, 0])["reward"]) == [1.0]
    env.close()


# ---- pixels ---------------------------------------------------------------------------------------------

needs_pygame = pytest.mark.skipif(importlib.util.find_spec("pygame") is None,
                                  reason="classic-control rendering needs pygame (pip install rlpipe[video])")


@needs_pygame
def test_from_pixels_matches_torchrl():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = GymEnv("CartPole-v1", from_pixels=True, pixels_only=False)
        assert sorted(env.observation_spec.keys()) == ["observation", "pixels"]
        spec = env.observation_spec["pixels"]
        assert isinstance(spec, UnboundedDiscrete) and list(spec.shape) == [400, 600, 3]
        assert spec.dtype is rlpipe.uint8
        td = env.reset(seed=0)
        pixels = np.asarray(td["pixels"].numpy())
        # torchrl 0.14.1 on the same seed: the frame's sum, one pixel and the observation
        assert pixels.dtype == np.uint8 and int(pixels.astype(np.int64).sum()) == 181652593
        assert pixels[200, 300].tolist() == [202, 152, 101]
        assert np.allclose(flat(td["observation"]), [0.013696168549358845, -0.023021329194307327,
                                                     -0.04590264707803726, -0.04834723472595215])
        nxt = step_with(env, td, [0, 1])
        assert int(np.asarray(nxt["pixels"].numpy()).astype(np.int64).sum()) == 181652593
        assert np.allclose(flat(nxt["observation"]), [0.013235742226243019, 0.17272774875164032,
                                                      -0.04686959087848663, -0.3551521897315979])
        env.close()


@needs_pygame
def test_pixels_only_keeps_only_pixels():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = GymEnv("CartPole-v1", from_pixels=True)
        assert list(env.observation_spec.keys()) == ["pixels"]
        assert env.observation_keys == ["pixels"]
        td = env.reset(seed=0)
        assert sorted(td.keys()) == ["done", "pixels", "terminated", "truncated"]
        env.close()


def test_from_pixels_needs_rgb_array_render_mode():
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        GymEnv("CartPole-v1", from_pixels=True, render_mode="human")


# ---- the other options --------------------------------------------------------------------------------

def test_render_mode_goes_to_gymnasium():
    env = GymEnv("CartPole-v1", render_mode="rgb_array")
    assert env.env.render_mode == "rgb_array"
    assert env.observation_keys == ["observation"]
    env.close()


def test_categorical_action_encoding():
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    spec = env.action_spec  # torchrl 0.14.1: Categorical(n=2), shape [], int64
    assert isinstance(spec, Categorical) and spec.n == 2 and list(spec.shape) == [] and spec.dtype is rlpipe.int64
    assert isinstance(GymEnv("CartPole-v1").action_spec, OneHot)
    env.set_seed(0)
    rollout = env.rollout(5)
    assert set(flat(rollout["action"])) <= {0, 1}
    env.close()


def test_device_puts_tensordicts_there():
    env = GymEnv("CartPole-v1", device="cpu")
    td = env.reset(seed=0)
    assert td.device == rlpipe.device("cpu") and td["observation"].device == rlpipe.device("cpu")
    assert env.full_action_spec["action"].device == rlpipe.device("cpu")
    env.close()


def test_batch_size_as_torchrl():
    env = GymEnv("CartPole-v1", batch_size=[])
    assert list(env.batch_size) == []
    env.close()
    for bad in ([1], [2]):  # torchrl 0.14.1 refuses these too (a ValueError on the specs' shapes)
        with pytest.raises(ValueError, match="batch_size must be empty"):
            GymEnv("CartPole-v1", batch_size=bad)
    with pytest.raises(ValueError, match="batch_size must be empty"):
        GymWrapper(gym.make("CartPole-v1"), batch_size=[3])
    vec = GymEnv("CartPole-v1", num_envs=2, batch_size=[])
    assert list(vec.batch_size) == [2]
    vec.close()


def test_make_kwargs_reach_the_env_and_its_wrappers():
    env = GymEnv(COUNTER, max_episode_steps=3, terminate_at=10, categorical_action_encoding=True)
    assert env.env.unwrapped.terminate_at == 10
    td = env.reset()
    for _ in range(3):
        nxt = step_with(env, td, 0)
        td = nxt.clone()
    assert flat(nxt["truncated"]) == [True] and flat(nxt["terminated"]) == [False]  # TimeLimit at 3 steps
    env.close()
    sutton = GymEnv("CartPole-v1", sutton_barto_reward=True, categorical_action_encoding=True)
    td = sutton.reset(seed=0)
    assert flat(step_with(sutton, td, 1)["reward"]) == [0.0]  # Sutton and Barto's reward: 0 until failure
    sutton.close()


def test_frame_skip_rollout_and_spec_surface():
    env = GymEnv(COUNTER, frame_skip=2)
    assert env.action_keys == ["action"] and env.reward_keys == ["reward"]
    td = env.rollout(10)
    # 2 repeats a step: t = 2, 4, then 5 (terminated after one repeat)
    assert flat(td["next", "observation"]) == [2.0, 4.0, 5.0]
    env.close()
