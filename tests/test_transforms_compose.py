"""``Compose`` list methods as torchrl 0.14.1's: ``pop`` (the last by default), and an env whose
``Compose`` loses a transform sees its specs change."""
import gymnasium as gym
import pytest

from rlpipe.envs.gym import GymEnv
from rlpipe.envs.transforms import Compose, DoubleToFloat, RewardSum, StepCounter, TransformedEnv


def test_pop_returns_unattached_transforms_in_torchrl_order():
    t1, t2, t3 = StepCounter(), RewardSum(), DoubleToFloat()
    compose = Compose(t1, t2, t3)
    assert compose.pop() is t3 and compose.pop(0) is t1 and list(compose) == [t2]
    assert compose.pop() is t2 and len(compose) == 0
    with pytest.raises(IndexError, match="Compose.pop: index -1 is out of range for 0 transforms"):
        compose.pop()
    Compose(t1)  # a popped transform can go in another container


def test_pop_from_an_env_updates_its_specs():
    env = TransformedEnv(GymEnv(gym.make("CartPole-v1")), Compose(StepCounter(), RewardSum()))
    assert "episode_reward" in env.observation_spec.keys()
    env.transform.pop()
    assert "episode_reward" not in env.observation_spec.keys() and "step_count" in env.observation_spec.keys()
    assert env.rollout(2)["next", "step_count"].shape[0] == 2


def test_action_mask_outside_an_env_says_so_as_torchrl():
    from rlpipe import TensorDict
    from rlpipe.envs.transforms import ActionMask
    t = ActionMask()
    with pytest.raises(RuntimeError, match=r"class <class '.*ActionMask'> cannot be executed without a parent "
                                           r"environment"):
        t(TensorDict())
    assert t.in_keys == [("action",), ("action_mask",)]  # still usable
