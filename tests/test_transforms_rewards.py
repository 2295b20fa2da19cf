"""``RewardSum`` used as torchrl 0.14.1 allows outside an env: the offline cumulative sum along the
"time" dim, the TensorDict methods ``_step``/``_reset`` driven by hand with ``reset_keys``, and the
errors torchrl gives. Values worked by hand."""
import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.envs.gym import GymEnv
from rlpipe.envs.transforms import Compose, RewardSum, TransformedEnv


def arr(t):
    return np.asarray(t.numpy())


def test_offline_sum_along_the_time_dim():
    td = TensorDict({("next", "reward"): rlpipe.tensor([[1.0], [2.0], [3.0], [-1.0]])}, [4])
    t = RewardSum(in_keys=[("next", "reward")], out_keys=[("next", "episode_reward")])
    with pytest.raises(ValueError, match=r"At least one dimension of the tensordict must be named 'time'.*\[None\]"):
        t(td)
    td.names = ["time"]
    assert arr(t(td)["next", "episode_reward"]).ravel().tolist() == [1.0, 3.0, 6.0, 5.0]
    with pytest.raises(KeyError):
        Compose(RewardSum())(td)  # no root "reward"


def test_step_and_reset_by_hand():
    rs = RewardSum()
    td = TensorDict({"next": {"reward": rlpipe.tensor([[1.0], [2.0]])},
                     "episode_reward": rlpipe.tensor([[0.0], [0.0]])}, [2])
    assert arr(rs._step(td, td["next"])["episode_reward"]).ravel().tolist() == [1.0, 2.0]
    td["episode_reward"] = td["next", "episode_reward"]
    assert arr(rs._step(td, td["next"])["episode_reward"]).ravel().tolist() == [2.0, 4.0]
    td["episode_reward"] = td["next", "episode_reward"]
    td["_reset"] = rlpipe.tensor([True, False])
    with pytest.raises(TypeError, match="reset_keys not provided but parent env not found"):
        rs._reset(td, td.empty())
    rs = RewardSum(reset_keys=["_reset"])
    assert arr(rs._reset(td, td.empty())["episode_reward"]).ravel().tolist() == [0.0, 4.0]


def test_key_length_errors():
    with pytest.raises(ValueError, match=r"RewardSum expects the same number of input and output keys, got in_keys "
                                         r"\['reward'\] and out_keys \['a', 'b'\]"):
        RewardSum(in_keys=["reward"], out_keys=["a", "b"])
    t = RewardSum(in_keys=["reward"], reset_keys=["_reset1", "_reset2"])
    td = TensorDict({"_reset1": rlpipe.tensor([False])}, [1])
    with pytest.raises(ValueError, match=r"Could not match the env reset_keys \['_reset1', '_reset2'\] with the "
                                         r"in_keys \['reward'\]"):
        t._reset(td, td.empty())


def test_reward_spec_true_is_refused_in_an_env():
    env = TransformedEnv(GymEnv(gym.make("Pendulum-v1")), RewardSum(reward_spec=True))
    with pytest.raises(NotImplementedError, match=r"RewardSum\(reward_spec=True\): an rlpipe env has one reward"):
        _ = env.observation_spec
    env = TransformedEnv(GymEnv(gym.make("Pendulum-v1")), RewardSum())
    td = env.rollout(3)
    np.testing.assert_allclose(arr(td["next", "episode_reward"]).ravel(), np.cumsum(arr(td["next", "reward"]).ravel()),
                               rtol=1e-6)
