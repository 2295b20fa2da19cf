"""torchrl 0.14's rollout options: ``actions`` (open-loop replay of precomputed actions), ``storing_device``,
and ``set_truncated`` with ``add_truncated_keys``. Expected values worked by hand from the counting env."""
import pytest

import rlpipe as torch
from rlpipe.envs import EnvBase, GymEnv
from rlpipe.envs.specs import Categorical, Composite, Unbounded
from rlpipe.tensordict import TensorDict


class AddingEnv(EnvBase):
    """Adds the action to a total; never done."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(total=Unbounded(1))
        self.action_spec = Unbounded(1)
        self.done_spec = Categorical(2, shape=(1,), dtype=torch.bool)
        self.total = torch.zeros(1)

    def _set_seed(self, seed):
        pass

    def _reset(self, tensordict, **kwargs):
        self.total = torch.zeros(1)
        return TensorDict({"total": self.total.clone()}, [])

    def _step(self, tensordict):
        self.total = self.total + tensordict["action"]
        return TensorDict({"total": self.total.clone(), "reward": torch.zeros(1),
                           "done": torch.zeros(1, dtype=torch.bool)}, [])


def test_actions_replay_a_list_capping_max_steps():
    env = AddingEnv()
    out = env.rollout(50, actions=[torch.tensor([float(a)]) for a in (1, 2, 3)])
    assert out.batch_size == (3,)
    assert out["action"].flatten().tolist() == [1.0, 2.0, 3.0]
    assert out["next", "total"].flatten().tolist() == [1.0, 3.0, 6.0]


def test_actions_replay_a_generator_for_max_steps():
    env = AddingEnv()
    out = env.rollout(2, actions=(torch.ones(1) * k for k in range(10)))
    assert out["next", "total"].flatten().tolist() == [0.0, 1.0]


def test_actions_and_policy_are_exclusive():
    env = AddingEnv()
    with pytest.raises(ValueError, match=r"Cannot pass both `policy` and `actions` to rollout\(\)."):
        env.rollout(3, policy=lambda td: td, actions=[torch.ones(1)])
    assert env.rollout(1).batch_size == (1,)


def test_storing_device():
    out = AddingEnv().rollout(2, storing_device="cpu")
    assert out.device == torch.device("cpu") and out["next", "total"].device == torch.device("cpu")


def test_set_truncated_needs_a_truncated_flag_then_marks_the_last_step():
    env = AddingEnv()
    assert env.done_keys == ["done", "terminated"]
    with pytest.raises(RuntimeError, match="set_truncated was set to True but no truncated key could be found"):
        env.rollout(3, set_truncated=True)
    assert env.add_truncated_keys() is env and env.done_keys == ["done", "terminated", "truncated"]
    out = env.rollout(3, set_truncated=True)
    assert out["next", "truncated"].flatten().tolist() == [False, False, True]
    assert out["next", "done"].flatten().tolist() == [False, False, True]


def test_set_truncated_on_the_array_path():
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    out = env.rollout(3, set_truncated=True)
    assert out["next", "truncated"].flatten().tolist()[-1] and out["next", "done"].flatten().tolist()[-1]
    env.close()


def test_check_env_specs_method():
    env = AddingEnv()
    assert env.check_env_specs() is None
    env.observation_spec = Composite(total=Unbounded(1, dtype=torch.int64))  # the env writes float32
    with pytest.raises(AssertionError, match="total"):
        env.check_env_specs()
