"""reset(td) with a "_reset" mask on frame envs (torchrl's partial reset): the masked envs restart, the
others keep their observations and done flags. Counter's observation is its step count (worked by hand)."""
import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe.envs import GymEnv, SerialEnv, StepCounter, TransformedEnv
from test_gym_env import Counter


def stepped(env, steps):
    td = env.reset()
    for _ in range(steps):
        td.set("action", env.action_spec.zero())
        td = env.step(td)["next"].exclude("reward")
    return td


def test_batched_env_resets_only_the_masked_envs():
    env = SerialEnv(3, lambda: GymEnv(Counter(terminate_at=10)))
    td = stepped(env, 3)
    td["_reset"] = rlpipe.tensor([[True], [False], [True]])
    td["done"] = rlpipe.tensor([[True], [True], [False]])
    out = env.reset(td)
    assert out is td and "_reset" not in out.keys()
    assert out["observation"].flatten().tolist() == [0.0, 3.0, 0.0]
    assert out["done"].flatten().tolist() == [False, True, False]  # the kept env keeps its flag
    td = env.step(env.rand_action(out))
    assert td["next", "observation"].flatten().tolist() == [1.0, 4.0, 1.0]
    env.close()


def test_vector_env_and_transforms():
    env = TransformedEnv(GymEnv(gym.vector.SyncVectorEnv([lambda: Counter(terminate_at=10)] * 2)), StepCounter())
    td = stepped(env, 2)
    td["_reset"] = rlpipe.tensor([[False], [True]])
    out = env.reset(td)
    assert out["observation"].flatten().tolist() == [2.0, 0.0]
    assert out["step_count"].flatten().tolist() == [2, 0]


def test_an_env_that_cannot_reset_some_envs_refuses():
    env = GymEnv("CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point")
    td = env.reset()
    td["_reset"] = rlpipe.tensor([[True], [False]])
    with pytest.raises(RuntimeError, match="cannot reset only some of its envs"):
        env.reset(td)
    assert np.asarray(env.reset()["observation"]).shape == (2, 4)  # still usable
