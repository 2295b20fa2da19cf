"""AutoResetTransform and AutoResetEnv (``SomeEnv(..., auto_reset=True)``), as torchrl 0.14's: an env that resets
itself inside its step. Expected values recorded from torchrl 0.14.1 on the same env (the env below, written
against torch there)."""
import math

import pytest

import rlpipe as torch
from rlpipe.envs import AutoResetEnv, AutoResetTransform, EnvBase, SerialEnv, StepCounter, TransformedEnv
from rlpipe.envs.specs import Categorical, Composite, Unbounded
from rlpipe.tensordict import TensorDict


class SelfResettingCounter(EnvBase):
    """Counts the actions; at count > limit the episode ends and the env resets itself in the same step."""

    def __init__(self, limit=2, **kwargs):
        super().__init__(**kwargs)
        self.limit = limit
        self.observation_spec = Composite(count=Unbounded((1,), dtype=torch.int64), level=Unbounded((1,)))
        self.action_spec = Categorical(2, shape=(1,))
        self.reward_spec = Unbounded((1,))
        self.done_spec = Categorical(2, shape=(1,), dtype=torch.bool)
        self.count = torch.zeros(1, dtype=torch.int64)

    def _set_seed(self, seed):
        pass

    def _reset(self, tensordict=None, **kwargs):
        if tensordict is not None and "_reset" in tensordict.keys():
            raise RuntimeError("this env resets itself")
        self.count = torch.zeros(1, dtype=torch.int64)
        return TensorDict({"count": self.count.clone(), "level": self.count.float() / 2,
                           "done": torch.zeros(1, dtype=torch.bool)}, [])

    def _step(self, tensordict):
        self.count = self.count + tensordict["action"]
        done = self.count > self.limit
        if done.any():
            self.count = torch.zeros(1, dtype=torch.int64)
        return TensorDict({"count": self.count.clone(), "level": self.count.float() / 2, "done": done,
                           "reward": torch.ones(1)}, [])


def ones(td):
    return td.set("action", torch.ones(*td.batch_size, 1, dtype=torch.int64))


def test_auto_reset_env_fills_the_done_steps_and_starts_from_the_env_observation():
    env = SelfResettingCounter(auto_reset=True)
    assert type(env) is AutoResetEnv and isinstance(env.transform, AutoResetTransform)
    out = env.rollout(8, ones, break_when_any_done=False)
    assert out["next", "count"].flatten().tolist() == [1, 2, -1, 1, 2, -1, 1, 2]
    level = out["next", "level"].flatten().tolist()
    assert [v for i, v in enumerate(level) if i not in (2, 5)] == [0.5, 1.0, 0.5, 1.0, 0.5, 1.0]
    assert math.isnan(level[2]) and math.isnan(level[5])
    assert out["count"].flatten().tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert out["next", "done"].flatten().tolist() == [False, False, True, False, False, True, False, False]
    short = env.rollout(8, ones)  # break_when_any_done
    assert short["next", "done"].flatten().tolist() == [False, False, True]


def test_auto_reset_replace_false_leaves_the_observations():
    env = SelfResettingCounter(auto_reset=True, auto_reset_replace=False)
    assert env.rollout(4, ones, break_when_any_done=False)["next", "count"].flatten().tolist() == [1, 2, 0, 1]


def test_auto_reset_env_under_more_transforms_and_in_a_batched_env():
    env = TransformedEnv(SelfResettingCounter(auto_reset=True), StepCounter())
    out = env.rollout(4, ones, break_when_any_done=False)
    assert out["next", "count"].flatten().tolist() == [1, 2, -1, 1]
    assert out["next", "step_count"].flatten().tolist() == [1, 2, 3, 1]
    batched = SerialEnv(2, lambda: SelfResettingCounter(auto_reset=True))
    out = batched.rollout(4, ones, break_when_any_done=False)
    assert out["next", "count"][..., 0].tolist() == [[1, 2, -1, 1]] * 2
    batched.close()


def test_auto_reset_transform_refuses_other_containers_and_tensordicts():
    env = TransformedEnv(SelfResettingCounter(), AutoResetTransform())
    with pytest.raises(RuntimeError, match="The AutoResetTransform container must be of type AutoResetEnv, got "
                                           "TransformedEnv"):
        env.reset()
    with pytest.raises(RuntimeError, match="AutoResetTransform cannot be called on a TensorDict"):
        AutoResetTransform()(TensorDict({"count": torch.zeros(1)}, []))
    auto = SelfResettingCounter(auto_reset=True)
    with pytest.raises(RuntimeError, match="Cannot insert a transform in AutoResetEnv."):
        auto.insert_transform(0, StepCounter())
    assert auto.rollout(2, ones)["next", "count"].flatten().tolist() == [1, 2]  # still usable
