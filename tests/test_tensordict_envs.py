"""Envs written as torchrl's (``_reset``/``_step``/``_set_seed`` over TensorDicts, specs set in
``__init__`` or on the class in ``__new__``): reset/step/rollout, partial resets, done completion,
several action/reward keys, and the frame path (SerialEnv, ParallelEnv, SyncDataCollector).
Expected values worked by hand from the counting env below (torchrl's CountingEnv's rules)."""
import pytest

import rlpipe as torch
from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import EnvBase, ParallelEnv, SerialEnv
from rlpipe.envs.specs import Binary, Categorical, Composite, Unbounded
from rlpipe.tensordict import TensorDict


class CountingEnv(EnvBase):
    """torchrl's CountingEnv: the action (0/1) is added to a count; done once count > max_steps."""

    def __init__(self, max_steps=3, **kwargs):
        super().__init__(**kwargs)
        self.max_steps = max_steps
        self.observation_spec = Composite(observation=Unbounded((*self.batch_size, 1), dtype=torch.int32),
                                          shape=self.batch_size)
        self.reward_spec = Unbounded((*self.batch_size, 1))
        self.done_spec = Categorical(2, dtype=torch.bool, shape=(*self.batch_size, 1))
        self.action_spec = Binary(n=1, shape=[*self.batch_size, 1])
        self.register_buffer("count", torch.zeros((*self.batch_size, 1), dtype=torch.int32))
        self.seeds = []

    def _set_seed(self, seed):
        self.seeds.append(seed)

    def _reset(self, tensordict, **kwargs):
        if tensordict is not None and "_reset" in tensordict.keys():
            self.count[tensordict.get("_reset")] = 0
        else:
            self.count[:] = 0
        return TensorDict({"observation": self.count.clone(), "done": self.count > self.max_steps},
                          batch_size=self.batch_size)

    def _step(self, tensordict):
        self.count += tensordict.get("action").to(torch.int32)
        return TensorDict({"observation": self.count.clone(), "done": self.count > self.max_steps,
                           "reward": self.count.to(torch.float32)}, batch_size=self.batch_size)


def ones(env):
    return lambda td: td.set("action", torch.ones(*env.batch_size, 1))


def test_reset_and_step_call_the_tensordict_methods_and_complete_done():
    env = CountingEnv(batch_size=[2])
    td = env.reset()
    assert sorted(td.keys()) == ["done", "observation", "terminated"]  # terminated completed from done
    td.set("action", torch.ones(2, 1))
    out = env.step(td)
    assert out is td
    assert out["next", "observation"].tolist() == [[1], [1]]
    assert out["next", "terminated"].tolist() == [[False], [False]]
    assert out["next", "reward"].tolist() == [[1.0], [1.0]]


def test_partial_reset_keeps_the_other_rows():
    env = CountingEnv(batch_size=[2])
    td = env.reset()
    for _ in range(2):
        td.set("action", torch.ones(2, 1))
        td = env.step(td)["next"].exclude("reward")
    td.set("_reset", torch.tensor([[True], [False]]))
    out = env.reset(td)
    assert out is td
    assert out["observation"].tolist() == [[0], [2]]
    assert "_reset" not in out.keys()


def test_rollout_resets_done_envs_as_torchrl():
    env = CountingEnv(max_steps=1, batch_size=[1])
    rollout = env.rollout(5, ones(env), break_when_any_done=False)
    # count 1, 2 (done), reset to 0 then 1, 2 (done), reset then 1
    assert rollout["next", "observation"].flatten().tolist() == [1, 2, 1, 2, 1]
    assert rollout["next", "done"].flatten().tolist() == [False, True, False, True, False]
    assert rollout["observation"].flatten().tolist() == [0, 1, 0, 1, 0]


def test_set_seed_calls_set_seed():
    env = CountingEnv()
    assert env.set_seed(7) == 8
    assert env.seeds == [7]


def test_done_after_reset_is_refused_unless_allowed():
    env = CountingEnv(max_steps=-1)
    with pytest.raises(RuntimeError, match=r"The done entry 'done' was \(partially\) True after a call to reset"):
        env.reset()
    assert CountingEnv(max_steps=-1, allow_done_after_reset=True).reset()["done"].item()


class BadResetEnv(CountingEnv):
    def __init__(self, result, **kwargs):
        super().__init__(**kwargs)
        self.result = result

    def _reset(self, tensordict, **kwargs):
        return tensordict if self.result == "input" else {"observation": 0}


def test_reset_returning_its_input_or_a_dict_is_refused():
    env = BadResetEnv("input")
    with pytest.raises(RuntimeError, match="BadResetEnv._reset returned its input tensordict"):
        env.reset(TensorDict(batch_size=[]))
    with pytest.raises(RuntimeError, match="returned an object of type dict but a TensorDict was expected"):
        BadResetEnv("dict").reset()


class TwoAgentEnv(EnvBase):
    """Specs on the class, set in __new__ (as torchrl's mock envs), with nested action and reward keys."""

    def __new__(cls, *args, **kwargs):
        cls._output_spec = Composite(
            full_observation_spec=Composite(obs=Unbounded((1,))),
            full_reward_spec=Composite(agents=Composite(reward=Unbounded((2, 1)), shape=(2,))),
            full_done_spec=Composite(done=Categorical(2, (1,), dtype=torch.bool)))
        cls._input_spec = Composite(full_action_spec=Composite(agents=Composite(action=Unbounded((2, 1)),
                                                                                shape=(2,))),
                                    full_state_spec=Composite())
        return super().__new__(cls, *args, **kwargs)

    def __init__(self):
        super().__init__()

    def _set_seed(self, seed):
        pass

    def _reset(self, tensordict, **kwargs):
        return TensorDict({"obs": torch.zeros(1)}, [])

    def _step(self, tensordict):
        action = tensordict.get(("agents", "action"))
        return TensorDict({"obs": action.sum(0), "agents": TensorDict({"reward": action * 2}, [2])}, [])


def test_class_level_specs_with_nested_keys():
    env = TwoAgentEnv()
    assert "_output_spec" not in TwoAgentEnv.__dict__  # moved onto the instance
    assert env.action_keys == [("agents", "action")]
    assert env.reward_keys == [("agents", "reward")]
    assert env.action_spec.shape == (2, 1)
    assert env.done_keys == ["done", "terminated"]
    td = env.reset()
    td.set(("agents", "action"), torch.tensor([[1.0], [2.0]]))
    out = env.step(td)
    assert out["next", "obs"].tolist() == [3.0]
    assert out["next", "agents", "reward"].tolist() == [[2.0], [4.0]]
    assert env.rand_action()["agents", "action"].shape == (2, 1)


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_in_a_batched_env(batched):
    env = batched(2, lambda: CountingEnv(max_steps=1))
    try:
        rollout = env.rollout(4, ones(env), break_when_any_done=False)
        assert rollout["next", "observation"][0].flatten().tolist() == [1, 2, 1, 2]
        assert rollout["next", "done"][1].flatten().tolist() == [False, True, False, True]
    finally:
        env.close()


def test_in_a_collector():
    env = CountingEnv(max_steps=1, batch_size=[2])
    collector = SyncDataCollector(env, ones(env), frames_per_batch=8, total_frames=8)
    batch = next(iter(collector))
    collector.shutdown()
    assert batch["next", "observation"][0].flatten().tolist() == [1, 2, 1, 2]
    assert batch["observation"][0].flatten().tolist() == [0, 1, 0, 1]
    assert batch["next", "reward"][1].flatten().tolist() == [1.0, 2.0, 1.0, 2.0]


def test_an_env_implementing_nothing():
    class Nothing(EnvBase):
        pass
    expected = r"Nothing implements neither _reset \(torchrl's TensorDict API\) nor _reset_frame"
    with pytest.raises(NotImplementedError, match=expected):
        Nothing().reset()


def test_done_keys_groups_and_shape():
    env = CountingEnv(batch_size=[3])
    assert env.done_keys_groups == [["done", "terminated"]]
    assert env.shape == (3,)


def test_gym_backend_is_gymnasium():
    import gymnasium

    from rlpipe.envs import gym_backend, set_gym_backend
    assert gym_backend() is gymnasium
    assert gym_backend("wrappers") is gymnasium.wrappers
    with set_gym_backend("gymnasium"):
        assert gym_backend() is gymnasium

    @set_gym_backend(gymnasium)
    def decorated():
        return gym_backend()
    assert decorated() is gymnasium
    with pytest.raises(ValueError, match="rlpipe runs on Gymnasium only; expected 'gymnasium', got 'gym'"):
        set_gym_backend("gym")


def test_a_step_before_any_reset_starts_from_the_action():
    env = CountingEnv(batch_size=[2])
    obs, reward, terminated, truncated = env._step_frame(rlpipe_ones((2, 1)))
    assert obs[("observation",)].tolist() == [[1], [1]] and reward.tolist() == [[1.0], [1.0]]
    assert not terminated.any() and not truncated.any()
    env.close()
    env.close(raise_if_closed=True)  # a plain env may be closed twice, as torchrl's


def rlpipe_ones(shape):
    import numpy as np
    return np.ones(shape, dtype=np.float32)


def test_rand_step_of_nested_actions():
    out = TwoAgentEnv().rand_step()
    assert out["agents", "action"].shape == (2, 1)
    assert (out["next", "agents", "reward"] == out["agents", "action"] * 2).all()


def test_rollout_with_a_policy_returning_a_new_tensordict():
    env = CountingEnv(max_steps=10, batch_size=[1])

    def outplace(td):
        return td.empty().set("action", torch.ones(1, 1))
    rollout = env.rollout(3, outplace)
    assert rollout["observation"].flatten().tolist() == [0, 1, 2]  # the root entries are kept
    assert rollout["next", "observation"].flatten().tolist() == [1, 2, 3]


def test_step_and_reset_check_the_batch_size():
    env = CountingEnv(batch_size=[2])
    td = env.reset()
    td["action"] = torch.ones(2, 1)
    with pytest.raises(RuntimeError, match=r"Expected a tensordict with shape==env.batch_size, got \[3, 2\] and \[2\]"):
        env.step(td.expand(3, 2).clone())
    with pytest.raises(RuntimeError, match=r"got \[\] and \[2\]"):
        env.reset(TensorDict(batch_size=[]))
    assert env.step(td)["next", "observation"].flatten().tolist() == [1, 1]  # still usable
