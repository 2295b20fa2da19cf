"""EnvBase.step_and_maybe_reset (torchrl's stepping loop without rollout) and EnvBase.append_transform.

The independent truth for the loop is rollout on an identically seeded env: a manual loop of
step_and_maybe_reset over the same actions gives the same steps, and where an env is done the root it hands
on is a fresh reset of that env while the others carry their next observation."""
import pytest

import rlpipe
from rlpipe.envs import GymEnv, SerialEnv, StepCounter, TransformedEnv


def alternating(td):
    """Action 0, 1, 0, 1, ... from the step count: the same actions in the loop and in rollout."""
    count = td["step_count"]
    return td.set("action", (count % 2).reshape(count.shape[:-1]))


def make_env(num_envs=None):
    kwargs = {} if num_envs is None else {"num_envs": num_envs}
    env = TransformedEnv(GymEnv("CartPole-v1", categorical_action_encoding=True, **kwargs), StepCounter())
    env.set_seed(3)
    return env


@pytest.mark.parametrize("num_envs", [None, 3])
def test_loop_equals_rollout_across_resets(num_envs):
    steps = 60  # CartPole's alternating actions end an episode within ~40 steps: resets happen
    expected = make_env(num_envs).rollout(steps, alternating, break_when_any_done=False)
    env = make_env(num_envs)
    root, stepped_all = env.reset(), []
    for _ in range(steps):
        stepped, root = env.step_and_maybe_reset(alternating(root))
        stepped_all.append(stepped)
    got = rlpipe.stack(stepped_all, -1)
    assert bool(expected["next", "done"].any())
    for key in [("observation",), ("action",), ("next", "observation"), ("next", "reward"), ("next", "done"),
                ("step_count",)]:
        assert rlpipe.equal(got[key], expected[key]), key


def test_root_carries_next_observation_and_resets_done_envs():
    env = make_env(2)
    root = env.reset()
    for _ in range(200):
        stepped, root = env.step_and_maybe_reset(alternating(root))
        done = stepped["next", "done"].reshape(-1)
        if bool(done.any()):
            break
    assert bool(done.any())
    for i in range(2):
        if done[i]:
            assert int(root["step_count"][i]) == 0 and not bool(root["done"][i])
        else:
            assert rlpipe.equal(root["observation"][i], stepped["next", "observation"][i])
            assert int(root["step_count"][i]) == int(stepped["next", "step_count"][i])


def test_serial_env_steps_and_resets():
    env = SerialEnv(2, lambda: GymEnv("CartPole-v1", categorical_action_encoding=True))
    env.set_seed(0)
    root = env.reset()
    stepped, root = env.step_and_maybe_reset(root.set("action", rlpipe.zeros(2, dtype=rlpipe.int64)))
    assert rlpipe.equal(root["observation"], stepped["next", "observation"])
    assert "next" not in root.keys()
    env.close()


def test_append_transform_wraps_the_env():
    base = GymEnv("CartPole-v1")
    env = base.append_transform(StepCounter())
    assert isinstance(env, TransformedEnv) and env.base_env is base
    assert int(env.rollout(3)["next", "step_count"][-1]) == 3
