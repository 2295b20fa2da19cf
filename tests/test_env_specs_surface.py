"""The spec surface of ``EnvBase`` (``input_spec``, ``output_spec``, ``full_*``, ``*_unbatched``, the
key lists, settable specs, ``fake_tensordict``, ``batch_locked``, ``reset_keys``, ``specs``).

Expected keys, orders, shapes, dtypes and error types were recorded from torchrl 0.14.1 on the same
envs (``GymEnv("CartPole-v1")``, ``GymEnv("Pendulum-v1")``, a 3-env CartPole, a ``StepCounter``
``TransformedEnv``), or follow from the definitions by hand (noted where so).
"""
import numpy as np
import pytest

import rlpipe
from rlpipe.envs import GymEnv, StepCounter, TransformedEnv
from rlpipe.envs.common import EnvBase
from rlpipe.envs.specs import Bounded, Categorical, Composite, OneHot, Unbounded
from rlpipe.envs.utils import check_env_specs


def keys_of(spec):
    return list(spec.keys())


@pytest.fixture
def cartpole():
    env = GymEnv("CartPole-v1")
    yield env
    env.close()


def test_input_output_and_specs_composites(cartpole):
    assert keys_of(cartpole.input_spec) == ["full_state_spec", "full_action_spec"]
    assert keys_of(cartpole.output_spec) == ["full_observation_spec", "full_done_spec", "full_reward_spec"]
    assert keys_of(cartpole.specs) == ["output_spec", "input_spec"]
    assert [tuple(k) for k in cartpole.output_spec.keys(True, True)] == [
        ("full_observation_spec", "observation"), ("full_done_spec", "done"), ("full_done_spec", "terminated"),
        ("full_done_spec", "truncated"), ("full_reward_spec", "reward")]
    assert cartpole.input_spec["full_state_spec"].is_empty()
    action = cartpole.input_spec["full_action_spec", "action"]
    assert isinstance(action, OneHot) and list(action.shape) == [2] and action.dtype is rlpipe.int64
    reward = cartpole.output_spec["full_reward_spec", "reward"]
    assert isinstance(reward, Unbounded) and list(reward.shape) == [1] and reward.dtype is rlpipe.float32
    assert cartpole.specs["input_spec", "full_action_spec", "action"] == cartpole.action_spec


def test_full_specs_hold_the_stored_specs(cartpole):
    assert cartpole.full_action_spec["action"] is cartpole.action_spec
    assert cartpole.full_reward_spec["reward"] is cartpole.reward_spec
    assert cartpole.full_observation_spec is cartpole.observation_spec
    assert cartpole.full_done_spec is cartpole.done_spec
    assert cartpole.full_state_spec is cartpole.state_spec and cartpole.state_spec.is_empty()


def test_key_lists(cartpole):
    assert cartpole.action_keys == ["action"]
    assert cartpole.reward_keys == ["reward"]
    assert cartpole.done_keys == ["done", "terminated", "truncated"]
    assert cartpole.observation_keys == ["observation"]
    assert cartpole.state_keys == []
    assert cartpole.action_key == "action"
    assert cartpole.reward_key == "reward"
    assert cartpole.reset_keys == ["_reset"]
    with pytest.raises(KeyError, match="done_key"):
        _ = cartpole.done_key  # three done keys: torchrl raises a KeyError too


def test_transformed_env_keys():
    env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
    assert env.observation_keys == ["observation", "step_count"]
    assert env.done_keys == ["done", "terminated", "truncated"]
    assert env.reset_keys == ["_reset"]
    assert env.action_keys == ["action"]
    assert env.full_observation_spec["step_count"].dtype is rlpipe.int64
    env.close()


def test_keys_sorted_by_depth_then_name():
    # by hand, with torchrl's rule: top-level keys first (by name), then nested ones by depth and "a.b" name
    env = _SpecEnv()
    env.observation_spec = Composite(
        {"zeta": Unbounded(shape=(1,)), "nested": {"obs": Unbounded(shape=(1,)), "deep": {"x": Unbounded(shape=(1,))}},
         "alpha": Unbounded(shape=(1,))})
    assert env.observation_keys == ["alpha", "zeta", ("nested", "obs"), ("nested", "deep", "x")]


def test_batch_locked_is_read_only(cartpole):
    assert cartpole.batch_locked is True
    with pytest.raises(RuntimeError, match="batch_locked is a read-only property"):
        cartpole.batch_locked = False
    assert cartpole.batch_locked is True


def test_fake_tensordict_matches_a_step(cartpole):
    fake = cartpole.fake_tensordict()
    expected = {  # torchrl 0.14.1's fake_tensordict of CartPole-v1
        ("action",): ([2], rlpipe.int64), ("done",): ([1], rlpipe.bool), ("terminated",): ([1], rlpipe.bool),
        ("truncated",): ([1], rlpipe.bool), ("observation",): ([4], rlpipe.float32),
        ("next", "done"): ([1], rlpipe.bool), ("next", "terminated"): ([1], rlpipe.bool),
        ("next", "truncated"): ([1], rlpipe.bool), ("next", "observation"): ([4], rlpipe.float32),
        ("next", "reward"): ([1], rlpipe.float32)}
    got = {tuple([k] if isinstance(k, str) else k): fake[k] for k in fake.keys(True, True)}
    assert set(got) == set(expected)
    for key, (shape, dtype) in expected.items():
        assert list(got[key].shape) == shape and got[key].dtype is dtype, key
        if key != ("action",):
            assert not np.asarray(got[key].numpy()).any(), key
    # rlpipe's OneHot.zero is the first category (torchrl's all-zero vector is not one-hot)
    assert np.asarray(fake["action"].numpy()).tolist() == [1, 0]
    assert list(fake.batch_size) == []


def test_vector_env_unbatched_specs_and_fake():
    env = GymEnv("CartPole-v1", num_envs=3)
    single = GymEnv("CartPole-v1")
    try:
        assert list(env.action_spec.shape) == [3, 2]
        assert list(env.action_spec_unbatched.shape) == [2]
        assert list(env.full_action_spec_unbatched.shape) == []
        assert list(env.full_action_spec_unbatched["action"].shape) == [2]
        unbatched = env.full_observation_spec_unbatched["observation"]
        assert unbatched == single.observation_spec["observation"]
        assert list(env.reward_spec_unbatched.shape) == [1]
        assert list(env.done_spec_unbatched["truncated"].shape) == [1]
        assert list(env.output_spec_unbatched["full_observation_spec", "observation"].shape) == [4]
        assert list(env.input_spec_unbatched.shape) == []
        assert env.reset_keys == ["_reset"]
        fake = env.fake_tensordict()
        assert list(fake.batch_size) == [3]
        assert list(fake["next", "observation"].shape) == [3, 4]
        assert list(fake["action"].shape) == [3, 2]
    finally:
        env.close()
        single.close()


def test_setting_a_batched_spec_on_a_vector_env():
    env = GymEnv("CartPole-v1", num_envs=3)
    try:
        before = env.action_spec
        with pytest.raises(ValueError, match=r"action_spec_unbatched"):
            env.action_spec = Bounded(-1.0, 1.0, shape=(2,))
        assert env.action_spec is before  # a failed set leaves the env as it was
        env.action_spec_unbatched = Bounded(-1.0, 1.0, shape=(2,))
        assert list(env.action_spec.shape) == [3, 2]
        assert isinstance(env.action_spec, Bounded)
        env.observation_spec_unbatched = Composite(observation=Unbounded(shape=(4,)))
        assert list(env.observation_spec["observation"].shape) == [3, 4]
        assert list(env.observation_spec.shape) == [3]
    finally:
        env.close()


def test_spec_setters_follow_torchrl(cartpole):
    cartpole.action_spec = Bounded(-1.0, 1.0, shape=(2,))
    assert isinstance(cartpole.action_spec, Bounded) and list(cartpole.action_spec.shape) == [2]
    assert cartpole.full_action_spec["action"] is cartpole.action_spec
    cartpole.full_action_spec = Composite(action=Categorical(3))
    assert isinstance(cartpole.action_spec, Categorical) and cartpole.action_spec.n == 3
    cartpole.reward_spec = Composite(reward=Unbounded(shape=(2,)))
    assert list(cartpole.reward_spec.shape) == [2]
    cartpole.observation_spec = Unbounded(shape=(4,))  # a leaf goes under "observation"
    assert keys_of(cartpole.observation_spec) == ["observation"]
    assert isinstance(cartpole.observation_spec["observation"], Unbounded)
    cartpole.done_spec = Categorical(2, shape=(1,), dtype="bool")  # a leaf: done and terminated
    assert keys_of(cartpole.done_spec) == ["done", "terminated"]
    cartpole.done_spec = Composite(done=Categorical(2, shape=(1,), dtype="bool"))  # terminated added
    assert keys_of(cartpole.done_spec) == ["done", "terminated"]
    cartpole.done_spec = Composite(terminated=Categorical(2, shape=(1,), dtype="bool"))  # done added (by hand)
    assert sorted(keys_of(cartpole.done_spec)) == ["done", "terminated"]
    cartpole.state_spec = Composite(hidden=Unbounded(shape=(3,)))
    assert cartpole.state_keys == ["hidden"]
    cartpole.state_spec = None
    assert cartpole.state_keys == []


def test_spec_setter_errors_leave_the_env_usable(cartpole):
    action, reward, done = cartpole.action_spec, cartpole.reward_spec, cartpole.done_spec
    with pytest.raises(TypeError, match="action_spec"):
        cartpole.action_spec = 3
    with pytest.raises(RuntimeError, match="reward_spec's leaves shape cannot be empty"):
        cartpole.reward_spec = Unbounded(shape=())
    with pytest.raises(RuntimeError, match="done_spec's leaves shape cannot be empty"):
        cartpole.done_spec = Categorical(2, shape=(), dtype="bool")
    with pytest.raises(TypeError, match="state_spec must be Composite"):
        cartpole.state_spec = Unbounded(shape=(2,))
    with pytest.raises(RuntimeError, match="input_spec is protected"):
        cartpole.input_spec = Composite()
    with pytest.raises(RuntimeError, match="output_spec is protected"):
        cartpole.output_spec = Composite()
    with pytest.raises(ValueError, match="exactly one action entry"):
        cartpole.action_spec = Composite(left=Categorical(2), right=Categorical(2))
    with pytest.raises(ValueError, match="exactly one reward entry"):
        cartpole.full_reward_spec = Composite(bonus=Unbounded(shape=(1,)))
    assert (cartpole.action_spec, cartpole.reward_spec, cartpole.done_spec) == (action, reward, done)
    check_env_specs(cartpole, seed=0)


class _SpecEnv(EnvBase):
    """An env with no specs set: torchrl's defaults show."""

    def _reset_frame(self, seed=None):
        return {("observation",): np.zeros(1, np.float32)}


def test_defaults_of_an_env_without_specs():
    env = _SpecEnv()
    with pytest.raises(KeyError, match="action_spec"):
        _ = env.action_spec
    assert env.full_action_spec.is_empty() and env.action_keys == []
    assert isinstance(env.reward_spec, Unbounded) and list(env.reward_spec.shape) == [1]
    assert env.reward_spec.dtype is rlpipe.float32
    assert env.done_keys == ["done", "terminated"]
    assert env.done_spec["done"].dtype is rlpipe.bool and list(env.done_spec["done"].shape) == [1]
    assert env.observation_spec.is_empty() and env.observation_keys == []


def test_state_spec_in_fake_tensordict_and_check_env_specs(cartpole):
    cartpole.state_spec = Composite(hidden=Unbounded(shape=(3,)))
    fake = cartpole.fake_tensordict()
    assert list(fake["hidden"].shape) == [3]
    assert "hidden" not in fake["next"].keys()
    # the env never writes "hidden": the rollout and the specs disagree on the keys
    with pytest.raises(AssertionError, match="hidden"):
        check_env_specs(cartpole)


def test_rand_action_and_rand_step(cartpole):
    cartpole.set_seed(0)
    td = cartpole.rand_action()
    assert cartpole.action_spec.is_in(td["action"]) and list(td.batch_size) == []
    td = cartpole.reset()
    out = cartpole.rand_step(td)
    assert out is td
    assert cartpole.action_spec.is_in(td["action"])
    assert cartpole.observation_spec["observation"].is_in(td["next", "observation"])


def test_pendulum_bounds_in_full_spec():
    env = GymEnv("Pendulum-v1")
    try:
        action = env.full_action_spec["action"]
        assert np.asarray(action.low.numpy()).tolist() == [-2.0]
        assert np.asarray(action.high.numpy()).tolist() == [2.0]
        high = env.full_observation_spec["observation"].high
        assert np.asarray(high.numpy()).tolist() == [1.0, 1.0, 8.0]
    finally:
        env.close()


def test_check_env_specs_both_runs_each_rollout_mode(cartpole, monkeypatch):
    modes = []
    rollout = cartpole.rollout

    def recording(*args, **kwargs):
        modes.append(kwargs["break_when_any_done"])
        return rollout(*args, **kwargs)
    monkeypatch.setattr(cartpole, "rollout", recording)
    check_env_specs(cartpole, seed=0, break_when_any_done="both")
    assert modes == [True, False]


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_spec_surface_on_cuda():
    env = GymEnv("Pendulum-v1", device="cuda", num_envs=2)
    try:
        cuda = rlpipe.device("cuda:0")
        assert env.full_action_spec["action"].device == cuda and env.input_spec.device == cuda
        fake = env.fake_tensordict()
        assert fake["next", "reward"].device == cuda and list(fake.batch_size) == [2]
        unbatched = env.action_spec_unbatched
        assert unbatched.device == cuda and list(unbatched.shape) == [1]
        assert np.asarray(unbatched.high.cpu().numpy()).tolist() == [2.0]
        env.action_spec_unbatched = unbatched
        assert list(env.action_spec.shape) == [2, 1] and env.action_spec.device == cuda
        check_env_specs(env, seed=0, break_when_any_done="both")
    finally:
        env.close()
