# ruff: noqa: SIM118 - TensorDict.keys() is the API
"""Environment transforms (``rlpipe.envs.transforms``) and env helpers (``rlpipe.envs.utils``).

The exact checks use a tiny deterministic Gymnasium env written here: its observation is the
number of steps since its reset (so ``step_count`` must equal it, through every reset and
autoreset), its reward at step ``t`` (1-based) is ``t``, and it terminates after ``length``
steps (``length`` fixed, or drawn from the env's seeded generator at each reset).
"""
from collections import OrderedDict

import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.envs.common import EnvBase
from rlpipe.envs.gym import GymEnv
from rlpipe.envs.specs import Bounded, Categorical, Composite, Unbounded
from rlpipe.envs.transforms import (
    Compose,
    DoubleToFloat,
    ObservationNorm,
    RenameTransform,
    RewardSum,
    StepCounter,
    Transform,
    TransformedEnv,
)
from rlpipe.envs.utils import check_env_specs, step_mdp


class CounterEnv(gym.Env):
    """obs = [t] (steps since reset), reward = t after the step, terminates at t == length.
    ``length=None``: a length in [2, 6] drawn from ``np_random`` at each reset."""

    def __init__(self, length=5, dtype=np.float32):
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 100.0, shape=(1,), dtype=dtype)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=dtype)
        self._dtype = dtype
        self.t = 0
        self._len = length

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self._len = self.length if self.length is not None else int(self.np_random.integers(2, 7))
        return np.array([self.t], dtype=self._dtype), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], dtype=self._dtype), float(self.t), self.t >= self._len, False, {}


gym.register(id="RlpipeTestCounter-v0", entry_point=CounterEnv)


def arr(x):
    return np.array(x.detach().cpu().numpy()) if isinstance(x, rlpipe.Tensor) else np.asarray(x)


def counter_env(**kwargs):
    return GymEnv(CounterEnv(**kwargs))


# ---- StepCounter -----------------------------------------------------------------------------------------

def test_step_counter_counts_by_hand_over_episodes():
    env = TransformedEnv(counter_env(length=5), StepCounter())
    td = env.rollout(12, break_when_any_done=False)
    assert arr(td["step_count"]).ravel().tolist() == [0, 1, 2, 3, 4] * 2 + [0, 1]
    assert arr(td["next", "step_count"]).ravel().tolist() == [1, 2, 3, 4, 5] * 2 + [1, 2]
    assert arr(td["next", "done"]).ravel().tolist() == ([False] * 4 + [True]) * 2 + [False] * 2
    # the env's own counter agrees at every step
    np.testing.assert_array_equal(arr(td["next", "observation"]), arr(td["next", "step_count"]))
    np.testing.assert_array_equal(arr(td["observation"]), arr(td["step_count"]))
    assert td["step_count"].dtype is rlpipe.int64 and tuple(td["step_count"].shape) == (12, 1)


def test_step_counter_tensordict_methods_by_hand_as_torchrl():
    counter = StepCounter(max_steps=2)
    done = rlpipe.zeros(3, 1, dtype=rlpipe.bool)
    td = counter._reset(TensorDict({"done": done}, [3]), TensorDict({}, [3]))
    assert arr(td["step_count"]).ravel().tolist() == [0, 0, 0]
    for expected_count, expected_truncated in ((1, False), (2, True)):
        nxt = counter._step(td, TensorDict({"done": done}, [3]))
        assert arr(nxt["step_count"]).ravel().tolist() == [expected_count] * 3
        assert arr(nxt["truncated"]).ravel().tolist() == arr(nxt["done"]).ravel().tolist() == [expected_truncated] * 3
        td = TensorDict({"step_count": nxt["step_count"]}, [3])
    td["_reset"] = rlpipe.tensor([[True], [False], [True]])
    assert arr(counter._reset(td, TensorDict({}, [3]))["step_count"]).ravel().tolist() == [0, 2, 0]


def test_step_counter_stops_rollout_at_done():
    env = TransformedEnv(counter_env(length=5), StepCounter())
    td = env.rollout(100)
    assert td.batch_size == (5,)
    assert arr(td["next", "step_count"]).ravel().tolist() == [1, 2, 3, 4, 5]


def test_step_counter_max_steps_truncates():
    env = TransformedEnv(counter_env(length=100), StepCounter(max_steps=3))
    td = env.rollout(7, break_when_any_done=False)
    assert arr(td["next", "step_count"]).ravel().tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert arr(td["next", "truncated"]).ravel().tolist() == [False, False, True] * 2 + [False]
    assert arr(td["next", "done"]).ravel().tolist() == [False, False, True] * 2 + [False]
    assert not arr(td["next", "terminated"]).any()
    # the base env was really reset at each truncation
    np.testing.assert_array_equal(arr(td["next", "observation"]), arr(td["next", "step_count"]))
    # root flags after a reset are all False
    assert not arr(td["truncated"]).any() and not arr(td["done"]).any()


def test_step_counter_max_steps_with_termination_on_the_same_step():
    env = TransformedEnv(counter_env(length=5), StepCounter(max_steps=5))
    td = env.rollout(5)
    assert arr(td["next", "terminated"]).ravel().tolist() == [False] * 4 + [True]
    assert arr(td["next", "truncated"]).ravel().tolist() == [False] * 4 + [True]


def test_step_counter_step_and_step_mdp_loop_keeps_counting():
    # torchrl's manual loop: step, step_mdp, step... (no _continue_frame in between)
    env = TransformedEnv(counter_env(length=100), StepCounter())
    td = env.reset()
    counts = []
    for _ in range(4):
        td = env.rand_action(td)
        td = env.step(td)
        counts.append(int(arr(td["next", "step_count"]).item()))
        td = step_mdp(td)
    assert counts == [1, 2, 3, 4]
    assert int(arr(td["step_count"]).item()) == 4


@pytest.mark.parametrize("max_steps", [None, 4])
def test_step_counter_vectorized_restarts_exactly_at_each_autoreset(max_steps):
    base = GymEnv("RlpipeTestCounter-v0", num_envs=3, length=None)
    env = TransformedEnv(base, StepCounter(max_steps=max_steps))
    env.set_seed(0)
    td = env.rollout(40, break_when_any_done=False)
    assert td.batch_size == (3, 40)
    count, next_count = arr(td["step_count"])[..., 0], arr(td["next", "step_count"])[..., 0]
    done = arr(td["next", "done"])[..., 0]
    # the env's own step counter (its observation) is the ground truth, through every autoreset
    np.testing.assert_array_equal(arr(td["observation"])[..., 0], count)
    np.testing.assert_array_equal(arr(td["next", "observation"])[..., 0], next_count)
    np.testing.assert_array_equal(next_count, count + 1)
    np.testing.assert_array_equal(count[:, 1:], np.where(done[:, :-1], 0, next_count[:, :-1]))
    assert done.sum(axis=1).min() >= 5  # many episodes, of different lengths per env
    assert len({tuple(row) for row in done}) > 1
    if max_steps is not None:
        assert next_count.max() == max_steps
        np.testing.assert_array_equal(arr(td["next", "truncated"])[..., 0], next_count == max_steps)


def test_step_counter_vectorized_cartpole():
    env = TransformedEnv(GymEnv("CartPole-v1", num_envs=3), StepCounter())
    env.set_seed(1)
    td = env.rollout(80, break_when_any_done=False)
    count, next_count = arr(td["step_count"])[..., 0], arr(td["next", "step_count"])[..., 0]
    done = arr(td["next", "done"])[..., 0]
    assert done.any(axis=1).all()
    np.testing.assert_array_equal(next_count, count + 1)
    np.testing.assert_array_equal(count[:, 0], 0)
    np.testing.assert_array_equal(count[:, 1:], np.where(done[:, :-1], 0, next_count[:, :-1]))
    # each env's count at its done is the length of the episode that ended
    for row_done, row_count in zip(done, next_count):
        ends = np.flatnonzero(row_done)
        np.testing.assert_array_equal(row_count[ends], np.diff(np.concatenate([[-1], ends])))


def test_step_counter_frame_protocol_as_the_collector_drives_it():
    env = TransformedEnv(GymEnv("RlpipeTestCounter-v0", num_envs=2, length=3), StepCounter(max_steps=5))
    root = env._reset_frame(seed=0)
    assert set(root) == {("observation",), ("step_count",)}
    np.testing.assert_array_equal(root[("step_count",)], np.zeros((2, 1), np.int64))
    action = np.zeros((2, 1), np.float32)
    seen, kept = [], []
    for t in range(7):
        next_obs, reward, terminated, truncated = env._step_frame(action)
        assert next_obs[("step_count",)].dtype == np.int64 and next_obs[("step_count",)].shape == (2, 1)
        assert reward.dtype == np.float32 and terminated.shape == truncated.shape == (2, 1)
        seen.append(next_obs[("step_count",)][:, 0].tolist())
        kept.append(next_obs[("step_count",)])
        np.testing.assert_array_equal(next_obs[("observation",)][:, 0], next_obs[("step_count",)][:, 0])
        done = terminated | truncated
        if done.any():  # as the collector: _continue_frame only when an env is done
            flat = done.reshape(2) if t == 2 else done  # a flat done is accepted too
            root = env._continue_frame(next_obs, flat)
            np.testing.assert_array_equal(root[("observation",)][:, 0], root[("step_count",)][:, 0])
    assert seen == [[1, 1], [2, 2], [3, 3], [1, 1], [2, 2], [3, 3], [1, 1]]
    # arrays handed out are never modified afterwards (the collector keeps references)
    assert [k[:, 0].tolist() for k in kept] == seen


# ---- RewardSum -------------------------------------------------------------------------------------------

def test_reward_sum_values_and_reset():
    env = TransformedEnv(counter_env(length=4), RewardSum())
    td = env.rollout(6, break_when_any_done=False)
    assert arr(td["next", "reward"]).ravel().tolist() == [1, 2, 3, 4, 1, 2]
    assert arr(td["next", "episode_reward"]).ravel().tolist() == [1, 3, 6, 10, 1, 3]
    assert arr(td["episode_reward"]).ravel().tolist() == [0, 1, 3, 6, 0, 1]
    spec = env.observation_spec["episode_reward"]
    assert isinstance(spec, Unbounded) and spec.dtype is rlpipe.float32 and tuple(spec.shape) == (1,)
    check_env_specs(env)


def test_reward_sum_vectorized_and_custom_keys():
    base = GymEnv("RlpipeTestCounter-v0", num_envs=3, length=None)
    env = TransformedEnv(base, Compose(StepCounter(), RewardSum(out_keys=["ret"])))
    env.set_seed(3)
    td = env.rollout(25, break_when_any_done=False)
    n = arr(td["next", "step_count"])[..., 0].astype(np.float64)
    np.testing.assert_array_equal(arr(td["next", "ret"])[..., 0], n * (n + 1) / 2)  # 1 + 2 + ... + t
    assert "ret" in env.observation_spec.keys() and "episode_reward" not in env.observation_spec.keys()


# ---- DoubleToFloat ---------------------------------------------------------------------------------------

def test_double_to_float_dtypes_specs_and_actions():
    base = counter_env(length=5, dtype=np.float64)
    assert base.observation_spec["observation"].dtype is rlpipe.float64
    assert base.action_spec.dtype is rlpipe.float64
    env = TransformedEnv(base, DoubleToFloat())
    spec = env.observation_spec["observation"]
    assert isinstance(spec, Bounded) and spec.dtype is rlpipe.float32
    np.testing.assert_array_equal(arr(spec.low), [0.0]) and np.testing.assert_array_equal(arr(spec.high), [100.0])
    assert env.action_spec.dtype is rlpipe.float32  # actions are cast back to float64 for the base env
    td = env.rollout(5)
    assert td["observation"].dtype is rlpipe.float32 and td["next", "observation"].dtype is rlpipe.float32
    assert td["action"].dtype is rlpipe.float32
    assert arr(td["next", "observation"]).ravel().tolist() == [1, 2, 3, 4, 5]
    assert base.observation_spec["observation"].dtype is rlpipe.float64  # the base env is untouched
    check_env_specs(env)


def test_double_to_float_in_keys_inv_action_only():
    env = TransformedEnv(counter_env(dtype=np.float64), DoubleToFloat(in_keys=[], in_keys_inv=["action"]))
    assert env.observation_spec["observation"].dtype is rlpipe.float64
    assert env.action_spec.dtype is rlpipe.float32
    check_env_specs(env)


def test_double_to_float_selected_keys_leave_others():
    env = TransformedEnv(counter_env(dtype=np.float64), DoubleToFloat(in_keys=["observation"]))
    assert env.observation_spec["observation"].dtype is rlpipe.float32
    assert env.action_spec.dtype is rlpipe.float64
    check_env_specs(env)
    # float32 envs pass through unchanged
    env = TransformedEnv(GymEnv("CartPole-v1"), DoubleToFloat())
    assert env.observation_spec == GymEnv("CartPole-v1").observation_spec
    check_env_specs(env)


# ---- ObservationNorm -------------------------------------------------------------------------------------

@pytest.mark.parametrize("standard_normal", [False, True])
def test_observation_norm_values_and_specs(standard_normal):
    loc, scale = np.float32(3.0), np.float32(2.0)
    env = TransformedEnv(counter_env(length=5), ObservationNorm(loc=loc, scale=scale, standard_normal=standard_normal))
    td = env.rollout(5)
    raw = np.arange(1, 6, dtype=np.float32)[:, None]
    expected = (raw - loc) / scale if standard_normal else raw * scale + loc
    np.testing.assert_allclose(arr(td["next", "observation"]), expected, rtol=1e-6)
    assert td["next", "observation"].dtype is rlpipe.float32
    spec = env.observation_spec["observation"]
    low, high = (0 - 3) / 2, (100 - 3) / 2
    if not standard_normal:
        low, high = 0 * 2 + 3, 100 * 2 + 3
    np.testing.assert_allclose(arr(spec.low), [low]) and np.testing.assert_allclose(arr(spec.high), [high])
    assert isinstance(env.transform.loc, rlpipe.Tensor)
    check_env_specs(env)


def test_observation_norm_negative_scale_keeps_bounds_ordered():
    env = TransformedEnv(counter_env(), ObservationNorm(loc=0.0, scale=-1.0))
    spec = env.observation_spec["observation"]
    np.testing.assert_allclose(arr(spec.low), [-100.0]) and np.testing.assert_allclose(arr(spec.high), [0.0])
    check_env_specs(env)


def test_observation_norm_transforms_a_leaf_spec_given_alone_as_torchrl():
    spec = ObservationNorm(loc=1.0, scale=2.0).transform_observation_spec(Bounded(0.0, 1.0, shape=(3,)))
    assert arr(spec.low).tolist() == [1.0, 1.0, 1.0] and arr(spec.high).tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("standard_normal", [False, True])
def test_observation_norm_init_stats_on_cartpole(standard_normal):
    num_iter = 300
    base = GymEnv("CartPole-v1")
    norm = ObservationNorm(standard_normal=standard_normal)
    env = TransformedEnv(base, norm)
    base.set_seed(7)
    norm.init_stats(num_iter)
    # replay the same random rollouts (same seeds) and compute the statistics by hand
    replay = GymEnv("CartPole-v1")
    replay.set_seed(7)
    chunks, n = [], 0
    while n < num_iter:
        td = replay.rollout(max_steps=num_iter)
        n += td.numel()
        chunks.append(arr(td["observation"]))
    data = np.concatenate(chunks).astype(np.float64)
    mean, std = data.mean(0), data.std(0, ddof=1)
    assert len(chunks) > 1  # episodes are shorter than num_iter: several rollouts
    if standard_normal:
        np.testing.assert_allclose(arr(norm.loc), mean, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(arr(norm.scale), std, rtol=1e-5)
    else:
        np.testing.assert_allclose(arr(norm.scale), 1 / std, rtol=1e-5)
        np.testing.assert_allclose(arr(norm.loc), -mean / std, rtol=1e-5, atol=1e-7)
    assert norm.loc.dtype is rlpipe.float32 and tuple(norm.loc.shape) == (4,)
    # the transformed env now normalizes: the collected data itself becomes mean 0, std 1
    normed = (data - mean) / std
    np.testing.assert_allclose(normed.mean(0), 0, atol=1e-9)
    td = env.rollout(20)
    obs = arr(td["observation"])
    raw = obs * std + mean
    assert np.isfinite(obs).all() and np.abs(raw[:, 0]).max() < 2.5  # cart position is in CartPole's range
    check_env_specs(env)


def test_observation_norm_init_stats_batched_reduce_dims():
    base = GymEnv("CartPole-v1", num_envs=3)
    norm = ObservationNorm(standard_normal=True)
    env = TransformedEnv(base, Compose(StepCounter(), norm))
    env.set_seed(0)
    norm.init_stats(30, reduce_dim=(0, 1), cat_dim=1)
    assert tuple(norm.loc.shape) == (4,) and tuple(norm.scale.shape) == (4,)
    norm2 = ObservationNorm(standard_normal=True)
    TransformedEnv(GymEnv("CartPole-v1", num_envs=3), norm2)
    norm2.init_stats(30, reduce_dim=(0, 1), cat_dim=1, keep_dims=(0, 1))
    assert tuple(norm2.loc.shape) == (1, 1, 4)
    check_env_specs(env)


def test_observation_norm_errors():
    with pytest.raises(RuntimeError, match="Cannot initialize the transform if parent env is not defined"):
        ObservationNorm().init_stats(10)
    env = TransformedEnv(GymEnv("CartPole-v1"), ObservationNorm())
    with pytest.raises(RuntimeError, match="Loc/Scale have not been initialized"):
        env.rollout(3)
    env = TransformedEnv(GymEnv("CartPole-v1"), ObservationNorm(loc=0.0, scale=1.0))
    with pytest.raises(RuntimeError, match="Loc/Scale are already initialized"):
        env.transform.init_stats(10)
    first, second = ObservationNorm(), ObservationNorm()
    TransformedEnv(GymEnv("CartPole-v1"), Compose(first, second))
    with pytest.raises(RuntimeError, match="ObservationNorms need to be initialized in the right order"):
        second.init_stats(10)
    with pytest.raises(RuntimeError, match="multiple in_keys but no specific key"):
        norm = ObservationNorm(in_keys=["observation", "other"])
        TransformedEnv(GymEnv("CartPole-v1"), norm)
        norm.init_stats(10)
    with pytest.raises(ValueError, match="num_iter must be a positive int"):
        first.init_stats(0)


# ---- RenameTransform -------------------------------------------------------------------------------------

def test_rename_transform_frames_and_specs():
    env = TransformedEnv(GymEnv("CartPole-v1"), RenameTransform(["observation"], ["obs"]))
    assert set(env.observation_spec.keys()) == {"obs"}
    td = env.rollout(3)
    assert "obs" in td.keys() and "observation" not in td.keys()
    assert ("next", "obs") in td.keys(True) and ("next", "observation") not in td.keys(True)
    check_env_specs(env)

    env = TransformedEnv(GymEnv("CartPole-v1"), RenameTransform("observation", ("nested", "obs"), create_copy=True))
    assert set(env.observation_spec.keys(True, True)) == {"observation", ("nested", "obs")}
    td = env.rollout(3)
    np.testing.assert_array_equal(arr(td["nested", "obs"]), arr(td["observation"]))
    check_env_specs(env)


def test_rename_transform_errors():
    with pytest.raises(ValueError, match="same length"):
        RenameTransform(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="'reward' cannot be transformed"):
        RenameTransform(["reward"], ["r"])
    env = TransformedEnv(GymEnv("CartPole-v1"), RenameTransform(["pixels"], ["p"]))
    with pytest.raises(KeyError, match="pixels"):
        _ = env.observation_spec


# ---- Compose and TransformedEnv --------------------------------------------------------------------------

def test_compose_order_matters():
    a, b = ObservationNorm(loc=1.0, scale=2.0), ObservationNorm(loc=0.0, scale=3.0)
    env = TransformedEnv(counter_env(length=2), Compose(a, b))
    td = env.rollout(2)
    np.testing.assert_allclose(arr(td["next", "observation"]).ravel(), [(1 * 2 + 1) * 3, (2 * 2 + 1) * 3])
    a, b = ObservationNorm(loc=1.0, scale=2.0), ObservationNorm(loc=0.0, scale=3.0)
    env = TransformedEnv(counter_env(length=2), Compose(b, a))
    np.testing.assert_allclose(arr(env.rollout(2)["next", "observation"]).ravel(), [1 * 3 * 2 + 1, 2 * 3 * 2 + 1])
    # a rename feeds the transform after it
    env = TransformedEnv(counter_env(length=2), Compose(RenameTransform(["observation"], ["x"]),
                                                      ObservationNorm(loc=0.0, scale=10.0, in_keys=["x"])))
    assert arr(env.rollout(2)["next", "x"]).ravel().tolist() == [10.0, 20.0]
    check_env_specs(env)


def test_append_and_insert_transform():
    env = TransformedEnv(counter_env(length=3), StepCounter())
    assert isinstance(env.transform, StepCounter)
    env.append_transform(RenameTransform(["step_count"], ["t"]))
    assert isinstance(env.transform, Compose) and len(env.transform) == 2
    env.insert_transform(0, ObservationNorm(loc=0.0, scale=2.0))
    assert [type(t).__name__ for t in env.transform] == ["ObservationNorm", "StepCounter", "RenameTransform"]
    td = env.rollout(3)
    assert arr(td["next", "t"]).ravel().tolist() == [1, 2, 3]
    assert arr(td["next", "observation"]).ravel().tolist() == [2.0, 4.0, 6.0]
    assert "step_count" not in env.observation_spec.keys() and "t" in env.observation_spec.keys()
    assert env.base_env.observation_spec.keys() == ["observation"]
    check_env_specs(env)
    # a nested Compose is flattened, and parent views see what comes before
    inner = Compose(RewardSum())
    env.append_transform(inner)
    assert "episode_reward" in env.observation_spec.keys()
    parent = inner.transforms[0].parent
    assert isinstance(parent, TransformedEnv) and "t" in parent.observation_spec.keys()
    assert "episode_reward" not in parent.observation_spec.keys()
    check_env_specs(env)


def test_transformed_env_rollout_keys_cartpole():
    env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
    td = env.rollout(5)
    keys = {k if isinstance(k, str) else tuple(k) for k in td.keys(True, True)}
    assert keys == {"action", "observation", "step_count", "done", "terminated", "truncated",
                    ("next", "observation"), ("next", "step_count"), ("next", "reward"), ("next", "done"),
                    ("next", "terminated"), ("next", "truncated")}
    assert set(env.observation_spec.keys()) == {"observation", "step_count"}
    assert env.batch_size == () and env.base_env.batch_size == ()
    assert env.num_envs is None  # attributes of the base env are reachable
    td = env.reset()
    assert arr(td["step_count"]).tolist() == [0]


def test_nested_transformed_env():
    inner = TransformedEnv(counter_env(length=4), StepCounter())
    env = TransformedEnv(inner, RewardSum())
    td = env.rollout(6, break_when_any_done=False)
    assert arr(td["next", "step_count"]).ravel().tolist() == [1, 2, 3, 4, 1, 2]
    assert arr(td["next", "episode_reward"]).ravel().tolist() == [1, 3, 6, 10, 1, 3]
    inner.append_transform(RenameTransform(["step_count"], ["n"]))  # the outer env sees the change
    assert "n" in env.observation_spec.keys() and "step_count" not in env.observation_spec.keys()
    check_env_specs(env)


def test_transform_forward_on_tensordict():
    td = TensorDict({"observation": rlpipe.tensor([[1.0], [2.0]], dtype=rlpipe.float64)}, batch_size=[2])
    out = DoubleToFloat()(td)
    assert out["observation"].dtype is rlpipe.float32
    out = ObservationNorm(loc=1.0, scale=2.0)(out)
    assert arr(out["observation"]).ravel().tolist() == [3.0, 5.0]
    with pytest.raises(NotImplementedError, match="StepCounter cannot be called independently"):
        StepCounter()(td)


def test_transform_errors():
    with pytest.raises(ValueError, match="max_steps should have a value greater or equal to one"):
        StepCounter(max_steps=0)
    with pytest.raises(TypeError, match="max_steps must be an int"):
        StepCounter(max_steps=2.5)
    with pytest.raises(TypeError, match="TransformedEnv expected a transform but received an object of type str"):
        TransformedEnv(GymEnv("CartPole-v1"), "step_count")
    with pytest.raises(TypeError, match="wraps an rlpipe EnvBase"):
        TransformedEnv(gym.make("CartPole-v1"), StepCounter())
    counter = StepCounter()
    TransformedEnv(GymEnv("CartPole-v1"), counter)
    with pytest.raises(AttributeError, match="parent of transform StepCounter already set"):
        TransformedEnv(GymEnv("CartPole-v1"), counter)
    TransformedEnv(GymEnv("CartPole-v1"), counter.clone())  # a clone is free
    env = TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter()))
    with pytest.raises(ValueError, match=r"Index expected to be between \[-1, 1\] got index=3"):
        env.insert_transform(3, RewardSum())
    with pytest.raises(TypeError, match="append_transform expected a transform"):
        env.append_transform(None)
    with pytest.raises(RuntimeError, match="reset the environment before stepping"):
        env._step_frame(np.array([1, 0]))
    with pytest.raises(RuntimeError, match="_continue_frame without a preceding _step_frame"):
        env._reset_frame()
        env._continue_frame({}, np.zeros(1, bool))


# ---- check_env_specs and step_mdp ------------------------------------------------------------------------

def test_check_env_specs_passes_for_good_envs():
    check_env_specs(GymEnv("CartPole-v1"), seed=0)
    check_env_specs(GymEnv("Pendulum-v1"))
    check_env_specs(GymEnv("CartPole-v1", num_envs=2))
    check_env_specs(TransformedEnv(GymEnv("CartPole-v1", num_envs=2),
                                   Compose(StepCounter(max_steps=2), RewardSum(), DoubleToFloat())))


class LyingEnv(EnvBase):
    """A well-behaved counter whose observation spec can be made to lie."""

    def __init__(self, obs_spec):
        super().__init__()
        self.observation_spec = Composite(observation=obs_spec)
        self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
        self.reward_spec = Unbounded(shape=(1,))
        self.done_spec = Composite({k: Categorical(2, shape=(1,), dtype="bool")
                                    for k in ("done", "terminated", "truncated")})
        self.t = 0

    def _obs(self):
        return {("observation",): np.array([self.t, 0.5], np.float32)}

    def _reset_frame(self, seed=None):
        self.t = 0
        return self._obs()

    def _step_frame(self, action):
        self.t += 1
        flag = np.zeros(1, bool)
        return self._obs(), np.ones(1, np.float32), flag, flag.copy()

    def _continue_frame(self, next_obs, done):
        return self._reset_frame() if done.any() else next_obs


def test_check_env_specs_fails_for_lying_specs():
    check_env_specs(LyingEnv(Unbounded(shape=(2,))))  # the truth
    with pytest.raises(AssertionError, match=r"shapes of the real and fake tensordict don't match for key "
                                             r"'observation' \(observation spec\). "
                                             r"Got fake=\[3, 3\] and real=\[3, 2\]"):
        check_env_specs(LyingEnv(Unbounded(shape=(3,))))
    with pytest.raises(AssertionError, match="dtypes of the real and fake tensordict don't match for key "
                                             "'observation'.*fake=rlpipe.float64 and real=rlpipe.float32"):
        check_env_specs(LyingEnv(Unbounded(shape=(2,), dtype=rlpipe.float64)))
    with pytest.raises(AssertionError, match=r"spec check failed at next for key \(.next., .observation.\) at step 0"):
        check_env_specs(LyingEnv(Bounded(0.0, 0.75, shape=(2,))))  # next t = 1 at the first step
    env = LyingEnv(Unbounded(shape=(2,)))
    env.observation_spec["velocity"] = Unbounded(shape=(1,))
    with pytest.raises(AssertionError, match=r"keys of the specs and data do not match:(.|\n)*present in fake "
                                             r"but not in real: \{'velocity'\}"):
        check_env_specs(env)


def test_check_env_specs_fails_for_a_transformed_env_whose_spec_lies():
    class BadCounter(StepCounter):
        def transform_observation_spec(self, observation_spec):
            spec = super().transform_observation_spec(observation_spec)
            spec["step_count"] = Bounded(0, 1, shape=(1,), dtype=rlpipe.int64)
            return spec
    with pytest.raises(AssertionError, match=r"spec check failed at next for key \('next', 'step_count'\) at step 1"):
        check_env_specs(TransformedEnv(counter_env(), BadCounter()))


def test_step_mdp():
    td = TensorDict({"observation": rlpipe.zeros(2, 3), "action": rlpipe.ones(2, 1), "other": rlpipe.ones(2),
                     "done": rlpipe.zeros(2, 1, dtype=rlpipe.bool),
                     "next": {"observation": rlpipe.ones(2, 3), "reward": rlpipe.ones(2, 1),
                              "done": rlpipe.ones(2, 1, dtype=rlpipe.bool)}}, batch_size=[2])
    out = step_mdp(td)
    assert set(out.keys()) == {"observation", "done", "other"}
    assert arr(out["observation"]).sum() == 6 and arr(out["done"]).all()
    assert out["observation"] is td["next", "observation"]  # shared, not copied
    assert set(step_mdp(td, exclude_done=True).keys()) == {"observation", "other"}
    assert set(step_mdp(td, exclude_reward=False).keys()) == {"observation", "done", "other", "reward"}
    assert set(step_mdp(td, exclude_action=False).keys()) == {"observation", "done", "other", "action"}
    assert set(step_mdp(td, keep_other=False).keys()) == {"observation", "done"}
    dest = TensorDict({}, batch_size=[2])
    assert step_mdp(td, next_tensordict=dest) is dest and "observation" in dest.keys()
    with pytest.raises(TypeError, match="step_mdp expects a TensorDict"):
        step_mdp({"next": {}})


def test_transform_base_is_identity():
    env = TransformedEnv(counter_env(length=3), Transform())
    assert env.observation_spec == counter_env().observation_spec
    assert arr(env.rollout(3)["next", "observation"]).ravel().tolist() == [1, 2, 3]


def test_transform_state_dict_round_trip_and_errors():
    """Only ObservationNorm holds tensors; Compose names its children's "transforms.<index>.", as torchrl."""
    def make():
        return Compose(StepCounter(), ObservationNorm(in_keys=["observation"], standard_normal=True))
    source, target = make(), make()
    assert source.state_dict() == OrderedDict()  # nothing learned yet
    source[1].loc, source[1].scale = rlpipe.tensor([1.0, 2.0]), rlpipe.tensor([3.0, 4.0])
    state = source.state_dict()
    assert list(state) == ["transforms.1.loc", "transforms.1.scale"]  # torchrl 0.14.1's names
    target.load_state_dict(state)
    assert target[1].loc.tolist() == [1.0, 2.0] and target[1].scale.tolist() == [3.0, 4.0]
    with pytest.raises(KeyError, match=r"unexpected keys \['bias'\]"):
        target[1].load_state_dict({"bias": rlpipe.zeros(2)})
    with pytest.raises(KeyError, match=r"missing keys \['scale'\]"):
        target[1].load_state_dict({"loc": rlpipe.zeros(2)})
    target[1].load_state_dict({"loc": rlpipe.zeros(2)}, strict=False)
    assert target[1].loc.tolist() == [0.0, 0.0] and target[1].scale.tolist() == [3.0, 4.0]
    with pytest.raises(KeyError, match="unexpected key '5.loc'"):
        target.load_state_dict({"5.loc": rlpipe.zeros(2)})
    target.load_state_dict({"1.loc": rlpipe.ones(2), "1.scale": rlpipe.ones(2)})  # rlpipe's earlier layout
    assert target[1].loc.tolist() == [1.0, 1.0]


# ---- a transform is an nn.Module, as torchrl's ---------------------------------------------------------------

class _ScaledByLinear(Transform):
    """A transform holding a module: "obs" through a 1 -> 1 linear layer."""

    def __init__(self):
        super().__init__(in_keys=["obs"])
        self.linear = rlpipe.nn.Linear(1, 1)

    def _apply_transform(self, value):
        return self.linear(value)


def test_transforms_are_modules_that_go_in_a_sequential():
    scale = ObservationNorm(loc=1.0, scale=2.0, in_keys=["obs"])
    double = _ScaledByLinear()
    with rlpipe.no_grad():
        double.linear.weight.fill_(2.0)
        double.linear.bias.zero_()
    model = rlpipe.nn.Sequential(scale, double)
    out = model(TensorDict({"obs": rlpipe.tensor([[3.0], [5.0]])}, [2]))
    assert arr(out["obs"]).ravel().tolist() == [14.0, 22.0]  # x * 2 + 1 (standard_normal=False), then * 2
    assert isinstance(scale, rlpipe.nn.Module) and scale.state_dict().keys() == {"loc", "scale"}


def test_a_compose_sees_its_transforms_modules_and_a_transform_not_its_compose():
    inner = _ScaledByLinear()
    compose = Compose(StepCounter(), inner)
    assert [name for name, _ in compose.named_modules()] == ["", "transforms", "transforms.0", "transforms.1",
                                                             "transforms.1.linear"]
    assert list(compose.parameters()) == list(inner.linear.parameters()) and len(list(inner.modules())) == 2
    assert compose.to("cpu") is compose and compose.eval() is compose and not inner.linear.training
    assert inner.container is compose
