"""``ActionMask`` on ``MultiCategorical``/``MultiOneHot`` action specs (torchrl 0.14.1's: a mask of
``sum(nvec)`` categories per row): random actions obey it, ``is_in`` refuses the others. The same
env run under torchrl 0.14.1 draws the same allowed actions ([1, 0] / [0, 1, 0, 1, 0])."""
import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe.envs import ActionMask, GymWrapper, TransformedEnv, check_env_specs
from rlpipe.envs.specs import Bounded, MultiCategorical, MultiOneHot


class MaskedMultiDiscrete(gym.Env):
    """Two sub-actions (3 and 2 choices); only 1 for the first and 0 for the second allowed."""

    def __init__(self):
        self.action_space = gym.spaces.MultiDiscrete([3, 2])
        self.observation_space = gym.spaces.Dict({"observation": gym.spaces.Box(0, 1, (2,), np.float32),
                                                  "action_mask": gym.spaces.Box(0, 1, (5,), bool)})
        self.mask = np.array([False, True, False, True, False])

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return {"observation": np.zeros(2, np.float32), "action_mask": self.mask}, {}

    def step(self, action):
        assert self.mask[action[0]] and self.mask[3 + action[1]], action
        return {"observation": np.zeros(2, np.float32), "action_mask": self.mask}, 0.0, False, False, {}


@pytest.mark.parametrize("categorical, expected", [(True, [1, 0]), (False, [0, 1, 0, 1, 0])])
def test_random_actions_obey_a_multi_discrete_mask(categorical, expected):
    env = TransformedEnv(GymWrapper(MaskedMultiDiscrete(), categorical_action_encoding=categorical), ActionMask())
    assert isinstance(env.action_spec, MultiCategorical if categorical else MultiOneHot)
    check_env_specs(env)
    actions = np.asarray(env.rollout(20)["action"].numpy())
    assert np.unique(actions, axis=0).tolist() == [expected]
    spec = env.action_spec
    assert spec.is_in(rlpipe.tensor(expected, dtype=spec.dtype))
    other = [0, 0] if categorical else [1, 0, 0, 1, 0]
    assert not spec.is_in(rlpipe.tensor(other, dtype=spec.dtype))


def test_mask_shapes_and_spec_types():
    env = TransformedEnv(GymWrapper(MaskedMultiDiscrete(), categorical_action_encoding=True), ActionMask())
    env.reset()
    with pytest.raises(ValueError, match=r"a mask of shape \[3\] does not broadcast to the spec's \[5\]"):
        env.action_spec.update_mask(rlpipe.tensor([True, True, False]))
    env.action_spec.update_mask(None)  # all allowed again
    assert env.action_spec.is_in(rlpipe.tensor([2, 1]))
    with pytest.raises(ValueError, match=r"The action spec must be one of .*MultiCategorical.*Got .*Bounded"):
        ActionMask().transform_action_spec(Bounded(-1.0, 1.0, shape=(1,)))
