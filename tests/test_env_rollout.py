"""EnvBase.rollout / rand_action / step_mdp against torchrl 0.14.1 (lengths, flags, keys and errors measured
on Pendulum-v1 with StepCounter(max_steps=4) in a separate environment)."""
import pytest

from rlpipe.envs import GymEnv, StepCounter, TransformedEnv, step_mdp
from rlpipe.tensordict import TensorDict, TensorDictModule

pytest.importorskip("gymnasium")


@pytest.fixture
def env():
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(max_steps=4))
    env.set_seed(0)
    return env


def keys(td):
    return sorted(map(str, td.keys(True, True)))


def test_step_mdp_keys_as_torchrl(env):
    td = env.step(env.rand_action(env.reset()))
    assert keys(step_mdp(td)) == ["done", "observation", "step_count", "terminated", "truncated"]
    assert keys(step_mdp(td, keep_other=False, exclude_reward=False)) == [
        "done", "observation", "reward", "step_count", "terminated", "truncated"]


def test_rand_action_writes_an_action_in_the_spec(env):
    td = env.rand_action(env.reset())
    assert env.action_spec.is_in(td["action"]) and tuple(td["action"].shape) == (1,)
    fresh = env.rand_action()
    assert isinstance(fresh, TensorDict) and "action" in fresh.keys()


def test_rollout_break_flags(env):
    assert tuple(env.rollout(10).batch_size) == (4,)
    full = env.rollout(10, break_when_any_done=False)
    assert full["next", "truncated"].squeeze(-1).tolist() == [False, False, False, True] * 2 + [False, False]
    assert tuple(env.rollout(10, break_when_all_done=True).batch_size) == (4,)  # one env: all == any
    marked = env.rollout(3, set_truncated=True)
    assert marked["next", "truncated"].squeeze(-1).tolist() == [False, False, True]
    assert marked["next", "done"].squeeze(-1).tolist() == [False, False, True]


def test_rollout_errors(env):
    with pytest.raises(TypeError, match="Cannot have both break_when_all_done and break_when_any_done"):
        env.rollout(3, break_when_any_done=True, break_when_all_done=True)
    with pytest.raises(RuntimeError, match="tensordict must be provided when auto_reset is False"):
        env.rollout(3, auto_reset=False)


def test_rollout_callback_policy_and_continuation(env):
    calls = []
    env.rollout(3, callback=lambda e, td: calls.append((e, int(td["step_count"]))))
    assert [c[1] for c in calls] == [1, 2] and all(c[0] is env for c in calls)  # torchrl: 2 calls for 3 steps
    from rlpipe import nn
    policy = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    rollout = env.rollout(2, policy=policy)
    assert rollout["action"].requires_grad is False and tuple(rollout.batch_size) == (2,)
    start = step_mdp(rollout[-1])
    more = env.rollout(2, auto_reset=False, tensordict=start)
    assert more["step_count"].squeeze(-1).tolist() == [2, 3]


def test_rollout_names_the_time_dim_as_torchrl(env):
    out = env.rollout(3)
    assert out.names == ["time"] and out["next"].names == ["time"]  # torchrl 0.14.1's names
    batched = GymEnv("CartPole-v1", num_envs=2)
    try:
        out = batched.rollout(3, break_when_any_done=False)
    finally:
        batched.close()
    assert tuple(out.batch_size) == (2, 3) and out.names == [None, "time"]
