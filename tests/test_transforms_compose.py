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


def test_specs_set_on_a_transformed_env_last_until_its_transforms_change():
    """As torchrl 0.14.1 (checked there): the set spec replaces the transformed one, the base env
    keeps its own, and changing the transforms recomputes the specs."""
    import rlpipe
    from rlpipe.envs.specs import Composite, Unbounded
    env = TransformedEnv(GymEnv(gym.make("Pendulum-v1")), Compose(StepCounter()))
    env.observation_spec = Composite(observation=Unbounded(3), other=Unbounded(2))
    assert sorted(env.observation_spec.keys()) == ["observation", "other"]
    assert sorted(env.base_env.observation_spec.keys()) == ["observation"]
    env.reward_spec = Unbounded(1, dtype=rlpipe.float64)
    assert env.reward_spec.dtype is rlpipe.float64 and env.base_env.reward_spec.dtype is rlpipe.float32
    outer = TransformedEnv(env, RewardSum())
    assert "other" in outer.observation_spec.keys()  # an env built on it sees the set spec
    env.transform.append(RewardSum(out_keys=["r2"]))
    assert sorted(env.observation_spec.keys()) == ["observation", "r2", "step_count"]
    assert env.reward_spec.dtype is rlpipe.float32 and "other" not in outer.observation_spec.keys()
    vector = TransformedEnv(GymEnv("CartPole-v1", num_envs=2), StepCounter())
    with pytest.raises(ValueError, match=r"observation_spec.shape \(\[\]\) must start with the env batch size"):
        vector.observation_spec = Composite(observation=Unbounded(4))
    assert "step_count" in vector.observation_spec.keys()  # unchanged by the refused value


def test_auto_unwrap_flattens_nested_transformed_envs_on_request():
    from rlpipe.envs import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
    inner = TransformedEnv(GymEnv(gym.make("Pendulum-v1")), StepCounter())
    env = TransformedEnv(inner, RewardSum(), auto_unwrap=True)
    assert type(env.base_env) is GymEnv and [type(t).__name__ for t in env.transform] == ["StepCounter", "RewardSum"]
    assert env.transform[0] is not inner.transform  # a copy, as torchrl's
    assert env.rollout(3)["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3]
    assert type(TransformedEnv(inner, RewardSum()).base_env) is TransformedEnv  # rlpipe's default: nested
    assert auto_unwrap_transformed_env(allow_none=True) is None
    with set_auto_unwrap_transformed_env(True):
        assert auto_unwrap_transformed_env() is True
        assert type(TransformedEnv(inner).base_env) is GymEnv
        assert type(TransformedEnv(inner, auto_unwrap=False).base_env) is TransformedEnv
    assert auto_unwrap_transformed_env() is False

    @set_auto_unwrap_transformed_env(True)
    def build():
        return TransformedEnv(inner, RewardSum())
    assert type(build().base_env) is GymEnv and auto_unwrap_transformed_env(allow_none=True) is None


def test_auto_unwrap_mode_lives_in_the_environment_for_workers(monkeypatch):
    import os

    from rlpipe.envs import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
    monkeypatch.delenv("AUTO_UNWRAP_TRANSFORMED_ENV", raising=False)
    with set_auto_unwrap_transformed_env(False):
        assert os.environ["AUTO_UNWRAP_TRANSFORMED_ENV"] == "False"
        with set_auto_unwrap_transformed_env(True):
            assert auto_unwrap_transformed_env() is True
        assert auto_unwrap_transformed_env(allow_none=True) is False
    assert "AUTO_UNWRAP_TRANSFORMED_ENV" not in os.environ  # unset again, not the string "None"
    monkeypatch.setenv("AUTO_UNWRAP_TRANSFORMED_ENV", "1")
    assert auto_unwrap_transformed_env() is True
