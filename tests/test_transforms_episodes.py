# ruff: noqa: SIM118 - TensorDict.keys() is the API
"""torchrl's return, action and episode transforms (``rlpipe/envs/transforms_episodes.py``).

The exact checks use a tiny deterministic Gymnasium env: its observation is the number of steps
since its reset, the reward of step ``t`` (1-based) is ``t``, it terminates after ``length`` steps,
and it records the actions it receives (so an inverse transform's output can be read back).
"""
import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.envs import GymEnv, StepCounter
from rlpipe.tensordict.nn import TensorDictModule
from rlpipe.envs.specs import Bounded, MultiCategorical, MultiOneHot, OneHot, Unbounded
from rlpipe.envs.transforms import (
    ActionDiscretizer,
    ActionMask,
    ActionScaling,
    BurnInTransform,
    Compose,
    DiscreteActionProjection,
    ModuleTransform,
    NextStateReconstructor,
    RandomCropTensorDict,
    RandomTruncationTransform,
    Reward2GoTransform,
    TargetReturn,
    TerminateTransform,
    TimeMaxPool,
    TrajCounter,
    gSDENoise,
    TransformedEnv,
)


class TallyEnv(gym.Env):
    """obs = [t], reward = t, terminates at t == length; ``actions`` lists what it was given.
    ``alternate``: obs = [(-1) ** t * (t + 1)] instead (1, -2, 3, -4, ...)."""

    def __init__(self, length=5, discrete=0, low=-2.0, high=2.0, alternate=False):
        self.length = length
        self.alternate = alternate
        self.observation_space = gym.spaces.Box(0.0, 100.0, shape=(1,), dtype=np.float32)
        self.action_space = (gym.spaces.Discrete(discrete) if discrete else
                             gym.spaces.Box(np.float32(low), np.float32(high), shape=(2,), dtype=np.float32))
        self.t = 0
        self.actions = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        value = (-1) ** self.t * (self.t + 1) if self.alternate else self.t
        return np.array([value], dtype=np.float32)

    def step(self, action):
        self.actions.append(np.array(action))
        self.t += 1
        return self._obs(), float(self.t), self.t >= self.length, False, {}


gym.register(id="RlpipeTestTally-v0", entry_point=TallyEnv)


def arr(x):
    return np.array(x.detach().cpu().numpy()) if isinstance(x, rlpipe.Tensor) else np.asarray(x)


def flat(x):
    return arr(x).ravel().tolist()


def tally_env(**kwargs):
    return GymEnv(TallyEnv(**kwargs))


# ---- TargetReturn ------------------------------------------------------------------------------------------

def test_target_return_reduce_subtracts_each_reward_and_restarts_at_reset():
    env = TransformedEnv(tally_env(length=3), TargetReturn(10.0))
    td = env.rollout(7, break_when_any_done=False)
    # rewards 1, 2, 3 per episode: 10 -> 9 -> 7 -> 4, then a reset to 10
    assert flat(td["target_return"]) == [10.0, 9.0, 7.0, 10.0, 9.0, 7.0, 10.0]
    assert flat(td["next", "target_return"]) == [9.0, 7.0, 4.0, 9.0, 7.0, 4.0, 9.0]
    assert td["target_return"].dtype is rlpipe.float32


def test_target_return_constant_mode_and_spec():
    env = TransformedEnv(tally_env(length=3), TargetReturn(5, mode="constant"))
    td = env.rollout(4, break_when_any_done=False)
    assert flat(td["next", "target_return"]) == [5.0] * 4
    spec = env.observation_spec["target_return"]
    assert isinstance(spec, Unbounded) and tuple(spec.shape) == (1,) and spec.dtype is rlpipe.float32


def test_target_return_on_a_vector_env_restarts_each_env_on_its_own():
    env = TransformedEnv(GymEnv("RlpipeTestTally-v0", num_envs=2, length=2), TargetReturn(3.0))
    td = env.rollout(3, break_when_any_done=False)
    assert arr(td["next", "target_return"])[..., 0].tolist() == [[2.0, 0.0, 2.0]] * 2


def test_target_return_reset_and_step_without_an_env():
    t = TargetReturn(10.0, in_keys=["reward"], out_keys=["target_return"], reset_key="_reset")
    td = TensorDict({("next", "reward"): rlpipe.tensor([[1.0], [2.5]])}, [2])
    root = t._reset(td, td.empty())
    assert flat(root["target_return"]) == [10.0, 10.0]
    next_td = t._step(root, td["next"])
    assert flat(next_td["target_return"]) == [9.0, 7.5]
    # a partial reset restarts only the rows under "_reset"
    state = TensorDict({"_reset": rlpipe.tensor([[True], [False]]), "target_return": next_td["target_return"]}, [2])
    assert flat(t._reset(state, td.empty())["target_return"]) == [10.0, 7.5]


def test_target_return_bad_arguments():
    with pytest.raises(ValueError, match="Mode can only be 'reduce' or 'constant'"):
        TargetReturn(1.0, mode="sum")
    with pytest.raises(TypeError, match="target_return must be a number"):
        TargetReturn("high")
    with pytest.raises(NotImplementedError, match="forward|parent"):
        TargetReturn(1.0).forward(TensorDict({}, []))


# ---- Reward2GoTransform ------------------------------------------------------------------------------------

def reward_batch():
    reward = rlpipe.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]]).unsqueeze(-1)
    done = rlpipe.tensor([[False, True, False, True], [False, False, False, True]]).unsqueeze(-1)
    return TensorDict({"next": {"reward": reward, "done": done}}, [2, 4])


def test_reward2go_by_hand():
    out = Reward2GoTransform(gamma=0.5, out_keys=["reward_to_go"]).inv(reward_batch())
    # row 0: episodes [1, 2] and [3, 4]: 1 + 0.5 * 2, 2, 3 + 0.5 * 4, 4; row 1: 1 + .5 + .25 + .125, ...
    assert arr(out["reward_to_go"])[..., 0].tolist() == [[2.0, 2.0, 5.0, 4.0], [1.875, 1.75, 1.5, 1.0]]
    assert flat(out["next", "reward"]) == [1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0]  # in key kept


def test_reward2go_default_keys_overwrite_the_reward_and_forward_is_identity():
    t = Reward2GoTransform()
    data = reward_batch()
    assert t(data) is data and flat(data["next", "reward"])[:2] == [1.0, 2.0]
    out = t.inv(data)
    assert arr(out["next", "reward"])[0, :, 0].tolist() == [3.0, 2.0, 7.0, 4.0]
    assert flat(data["next", "reward"])[:2] == [1.0, 2.0]  # inv works on a copy


def test_reward2go_needs_episode_ends_and_refuses_an_env():
    data = reward_batch()
    data["next", "done"] = rlpipe.zeros(2, 4, 1, dtype=rlpipe.bool)
    with pytest.raises(RuntimeError, match="No episode ends found"):
        Reward2GoTransform().inv(data)
    with pytest.raises(KeyError, match="Could not find any of the input keys"):
        Reward2GoTransform(in_keys=[("next", "missing")]).inv(reward_batch())
    with pytest.raises(ValueError, match="only an inverse transform"):
        TransformedEnv(tally_env(), Reward2GoTransform())
    with pytest.raises(ValueError, match="only an inverse transform"):
        TransformedEnv(tally_env(), Compose(Reward2GoTransform())).reset()
    env, inner = TransformedEnv(tally_env()), Compose(Reward2GoTransform())
    with pytest.raises(ValueError, match="only an inverse transform"):
        env.append_transform(inner)  # as torchrl: refused when the Compose joins the env
    assert len(env.transform) == 0 and inner.container is None
    with pytest.raises(ValueError, match="gamma must be one number"):
        Reward2GoTransform(gamma=[0.9, 0.8])


def test_reward2go_in_a_replay_buffer_on_write():
    from rlpipe.data import LazyTensorStorage, ReplayBuffer
    t = Reward2GoTransform(gamma=1.0, out_keys=["reward_to_go"])
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.append_transform(t.inv, invert=True)
    rb.extend(reward_batch()[1])
    assert sorted(flat(rb[:]["reward_to_go"])) == [1.0, 2.0, 3.0, 4.0]


def test_reward2go_appended_to_a_replay_buffer_runs_inv_on_write_as_torchrl():
    from rlpipe.data import LazyTensorStorage, ReplayBuffer
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.append_transform(Reward2GoTransform(gamma=0.5, out_keys=["reward_to_go"]))
    data = reward_batch()
    rb.extend(data)
    assert arr(rb[:]["reward_to_go"])[..., 0].tolist() == [[2.0, 2.0, 5.0, 4.0], [1.875, 1.75, 1.5, 1.0]]
    assert "reward_to_go" not in data.keys()  # the caller's data is left as it was


# ---- ActionScaling -----------------------------------------------------------------------------------------

def test_action_scaling_maps_unit_actions_to_the_env_range():
    base = TallyEnv(low=-2.0, high=6.0)
    env = TransformedEnv(GymEnv(base), ActionScaling())
    spec = env.action_spec
    assert isinstance(spec, Bounded) and flat(spec.low) == [-1.0, -1.0] and flat(spec.high) == [1.0, 1.0]
    t = env.transform
    assert flat(t.loc) == [2.0, 2.0] and flat(t.scale) == [4.0, 4.0]
    td = env.reset()
    td["action"] = rlpipe.tensor([-1.0, 0.5])
    env.step(td)
    assert base.actions[-1].tolist() == [-2.0, 4.0]
    # forward (a replay buffer's): env actions to the normalized space
    out = t(TensorDict({"action": rlpipe.tensor([6.0, 2.0])}, []))
    assert flat(out["action"]) == [1.0, 0.0]


def test_action_scaling_zero_one_range_and_explicit_loc_scale():
    env = TransformedEnv(tally_env(low=0.0, high=4.0), ActionScaling(standard_normal=False))
    assert flat(env.action_spec.low) == [0.0, 0.0] and flat(env.action_spec.high) == [1.0, 1.0]
    assert flat(env.transform.denormalize(rlpipe.tensor([0.25, 1.0]))) == [1.0, 4.0]
    t = ActionScaling(loc=1.0, scale=2.0)
    env = TransformedEnv(tally_env(low=-1.0, high=3.0), t)
    # the env's box [-1, 3] seen through (a - 1) / 2
    assert flat(env.action_spec.low) == [-1.0, -1.0] and flat(env.action_spec.high) == [1.0, 1.0]
    assert flat(t.normalize(rlpipe.tensor([5.0]))) == [2.0]


def test_action_scaling_from_stats_and_errors():
    t = ActionScaling.from_stats(mean=[1.0, 2.0], std=[0.5, 0.0])
    assert flat(t.loc) == [1.0, 2.0] and flat(t.scale) == [0.5, pytest.approx(1e-6)]
    with pytest.raises(ValueError, match="exactly one of"):
        ActionScaling.from_stats(mean=[1.0], std=[1.0], low=[0.0], high=[1.0])
    with pytest.raises(ValueError, match="both be provided"):
        ActionScaling(loc=1.0)
    with pytest.raises(ValueError, match="must not contain zero"):
        ActionScaling(loc=0.0, scale=[1.0, 0.0])
    with pytest.raises(ValueError, match="forward-only mode"):
        ActionScaling(in_keys_inv=[])
    with pytest.raises(ValueError, match="single action key"):
        ActionScaling(in_keys_inv=["a", "b"])
    with pytest.raises(RuntimeError, match="has not been initialized"):
        ActionScaling().normalize(rlpipe.zeros(2))
    with pytest.raises(RuntimeError, match="bounded continuous action spec"):
        TransformedEnv(tally_env(discrete=3), ActionScaling()).action_spec
    with pytest.raises(ValueError, match="does not match the loc/scale dimension"):
        ActionScaling(loc=[0.0, 0.0], scale=[1.0, 1.0]).normalize(rlpipe.zeros(3))


def test_action_scaling_state_dict_round_trip_updates_the_env():
    t = ActionScaling(loc=0.0, scale=1.0)
    env = TransformedEnv(tally_env(low=-2.0, high=2.0), t)
    assert flat(env.action_spec.high) == [2.0, 2.0]
    t.load_state_dict({"loc": rlpipe.tensor([0.0, 1.0]), "scale": rlpipe.tensor([2.0, 1.0])})
    assert flat(env.action_spec.low) == [-1.0, -3.0] and flat(env.action_spec.high) == [1.0, 1.0]
    assert sorted(t.state_dict()) == ["loc", "scale"]
    with pytest.raises(ValueError, match="must not contain zero"):
        t.scale = [1.0, 0.0]
    assert flat(t.scale) == [2.0, 1.0]


def test_action_scaling_forward_only_leaves_the_env_alone():
    base = TallyEnv()
    env = TransformedEnv(GymEnv(base), ActionScaling(in_keys_inv=[], loc=1.0, scale=2.0))
    assert flat(env.action_spec.high) == [2.0, 2.0]
    td = env.reset()
    td["action"] = rlpipe.tensor([0.5, -0.5])
    env.step(td)
    assert base.actions[-1].tolist() == [0.5, -0.5]


# ---- DiscreteActionProjection ------------------------------------------------------------------------------

def test_discrete_action_projection_keeps_small_actions_and_draws_big_ones():
    base = TallyEnv(discrete=3)
    env = TransformedEnv(GymEnv(base, categorical_action_encoding=False), DiscreteActionProjection(3, 5))
    spec = env.action_spec
    assert isinstance(spec, OneHot) and tuple(spec.shape) == (5,)
    td = env.reset()
    td["action"] = rlpipe.tensor([0, 0, 1, 0, 0])
    env.step(td)
    assert int(base.actions[-1]) == 2
    for _ in range(20):
        td["action"] = rlpipe.tensor([0, 0, 0, 0, 1])
        env.step(td)
        assert int(base.actions[-1]) in (0, 1, 2)
    t = DiscreteActionProjection(2, 4)
    assert arr(t.inv(TensorDict({"action": rlpipe.tensor([0, 1, 0, 0])}, []))["action"]).tolist() == [0, 1]
    assert arr(t(TensorDict({"action": rlpipe.tensor([0, 1])}, []))["action"]).tolist() == [0, 1, 0, 0]


def test_discrete_action_projection_errors():
    with pytest.raises(RuntimeError, match="greater or equal"):
        DiscreteActionProjection(5, 3)
    with pytest.raises(RuntimeError, match="must match self.max_actions=4"):
        DiscreteActionProjection(2, 4).inv(TensorDict({"action": rlpipe.tensor([0, 1, 0])}, []))


# ---- TrajCounter and TerminateTransform --------------------------------------------------------------------

def test_traj_counter_numbers_episodes():
    env = TransformedEnv(tally_env(length=2), TrajCounter())
    td = env.rollout(5, break_when_any_done=False)
    assert flat(td["traj_count"]) == [0, 0, 1, 1, 2]
    assert flat(td["next", "traj_count"]) == [0, 0, 1, 1, 2]
    assert env.observation_spec["traj_count"].dtype is rlpipe.int64
    td = env.rollout(1)
    assert flat(td["traj_count"]) == [3]
    assert env.transform.state_dict() == {"traj_count": 4}


def test_traj_counter_tensordict_reset_numbers_only_the_reset_rows():
    t = TrajCounter()
    env = TransformedEnv(GymEnv("RlpipeTestTally-v0", num_envs=3), t)
    assert flat(env.reset()["traj_count"]) == [0, 1, 2]
    partial = TensorDict({"_reset": rlpipe.tensor([[False], [True], [False]])}, [3])
    assert flat(t._reset(partial, TensorDict({}, [3]))["traj_count"]) == [0, 3, 0]


def test_traj_counter_on_a_vector_env_never_repeats_a_number():
    env = TransformedEnv(GymEnv("RlpipeTestTally-v0", num_envs=2, length=2), TrajCounter())
    td = env.rollout(4, break_when_any_done=False)
    # two envs reset together at start and after every second step: 0/1, then 2/3
    assert arr(td["traj_count"])[..., 0].tolist() == [[0, 0, 2, 2], [1, 1, 3, 3]]
    t = TrajCounter()
    t.load_state_dict({"traj_count": 7})
    assert t.state_dict() == {"traj_count": 7}
    with pytest.raises(RuntimeError, match="within an environment"):
        t(TensorDict({}, []))


def test_terminate_transform_ends_the_episode_when_stop_says_so():
    stop = TerminateTransform(lambda next_td: next_td["observation"] >= 2)
    env = TransformedEnv(tally_env(length=10), Compose(StepCounter(), stop))
    td = env.rollout(10)
    assert flat(td["next", "observation"]) == [1.0, 2.0]
    assert flat(td["next", "terminated"]) == [False, True] and flat(td["next", "done"]) == [False, True]
    td = env.rollout(5, break_when_any_done=False)
    assert flat(td["next", "step_count"]) == [1, 2, 1, 2, 1]  # the env was reset after each stop


def test_terminate_transform_errors():
    with pytest.raises(ValueError, match="must be a callable"):
        TerminateTransform(3)
    env = TransformedEnv(tally_env(), TerminateTransform(lambda td: rlpipe.ones(3, dtype=rlpipe.bool)))
    with pytest.raises(ValueError, match="does not broadcast"):
        env.rollout(2)


# ---- ActionDiscretizer -------------------------------------------------------------------------------------

def test_action_discretizer_median_values_by_hand():
    base = TallyEnv(low=-2.0, high=2.0)
    t = ActionDiscretizer([2, 4])
    env = TransformedEnv(GymEnv(base), t)
    spec = env.action_spec
    assert isinstance(spec, MultiCategorical) and flat(spec.nvec) == [2, 4]
    # interval midpoints of [-2, 2]: halves at -1, 1; quarters at -1.5, -0.5, 0.5, 1.5
    td = env.reset()
    td["action"] = rlpipe.tensor([1, 2])
    env.step(td)
    assert base.actions[-1].tolist() == [1.0, 0.5]
    td["action"] = rlpipe.tensor([0, 0])
    env.step(td)
    assert base.actions[-1].tolist() == [-1.0, -1.5]
    assert env.rollout(3)["action"].dtype is rlpipe.int64


def test_action_discretizer_low_high_one_hot_and_random():
    base = TallyEnv(low=0.0, high=4.0)
    env = TransformedEnv(GymEnv(base), ActionDiscretizer(4, sampling=ActionDiscretizer.SamplingStrategy.HIGH,
                                                         categorical=False))
    assert isinstance(env.action_spec, MultiOneHot) and tuple(env.action_spec.shape) == (8,)
    td = env.reset()
    td["action"] = rlpipe.tensor([1, 0, 0, 0, 0, 0, 0, 1])
    env.step(td)
    assert base.actions[-1].tolist() == [1.0, 4.0]  # the high ends of [0, 1] and [3, 4]
    env = TransformedEnv(GymEnv(base), ActionDiscretizer(2, sampling=ActionDiscretizer.SamplingStrategy.LOW))
    td = env.reset()
    td["action"] = rlpipe.tensor([1, 0])
    env.step(td)
    assert base.actions[-1].tolist() == [2.0, 0.0]
    env = TransformedEnv(GymEnv(base), ActionDiscretizer(2, sampling=3))
    td = env.reset()
    for _ in range(10):
        td["action"] = rlpipe.tensor([1, 0])
        env.step(td)
        a = base.actions[-1]
        assert 2.0 <= a[0] <= 4.0 and 0.0 <= a[1] <= 2.0  # the low end plus a jitter within the interval


def test_action_discretizer_errors():
    with pytest.raises(TypeError, match="must be Bounded"):
        TransformedEnv(tally_env(discrete=3), ActionDiscretizer(3)).action_spec
    with pytest.raises(ValueError, match="num_intervals must be a positive int"):
        ActionDiscretizer(0)
    with pytest.raises(ValueError, match="3 entries for an action of 2 elements"):
        TransformedEnv(tally_env(), ActionDiscretizer([2, 3, 4])).action_spec
    with pytest.raises(RuntimeError, match="without a parent env"):
        ActionDiscretizer(3).inv(TensorDict({"action": rlpipe.tensor([1, 2])}, []))


def test_action_discretizer_builds_its_values_from_the_parent_when_asked():
    t = ActionDiscretizer(2)
    env = TransformedEnv(GymEnv("RlpipeTestTally-v0", num_envs=2, low=0.0, high=2.0), t)
    t.intervals = None
    t._init()
    assert [v.tolist() for v in t.intervals] == [[0.5, 1.5], [0.5, 1.5]]
    out = t.inv(TensorDict({"action": rlpipe.tensor([[0, 1], [1, 1]])}, [2]))
    assert arr(out["action"]).tolist() == [[0.5, 1.5], [1.5, 1.5]]
    assert tuple(env.action_spec.shape) == (2, 2)


# ---- RandomTruncationTransform -----------------------------------------------------------------------------

def test_random_truncation_spreads_first_episodes_then_uses_max_horizon():
    rlpipe.manual_seed(0)
    env = TransformedEnv(GymEnv("RlpipeTestTally-v0", num_envs=6, length=100),
                         Compose(StepCounter(), RandomTruncationTransform(2, 4)))
    td = env.rollout(13, break_when_any_done=False)
    count, truncated = arr(td["next", "step_count"])[..., 0], arr(td["next", "truncated"])[..., 0]
    np.testing.assert_array_equal(arr(td["next", "done"])[..., 0], truncated)
    for row_count, row_trunc in zip(count, truncated):
        lengths = row_count[row_trunc].tolist()
        assert 1 <= lengths[0] <= 4 and lengths[1:] == [4] * (len(lengths) - 1)  # prob=0: later ones are full
    assert len({int(row[row_t][0]) for row, row_t in zip(count, truncated)}) > 1  # the envs are spread


def test_random_truncation_with_prob_one_draws_within_the_bounds_and_needs_a_step_counter():
    rlpipe.manual_seed(1)
    env = TransformedEnv(GymEnv("RlpipeTestTally-v0", num_envs=4, length=100),
                         Compose(StepCounter(), RandomTruncationTransform(2, 3, prob=1.0)))
    td = env.rollout(30, break_when_any_done=False)
    count, truncated = arr(td["next", "step_count"])[..., 0], arr(td["next", "truncated"])[..., 0]
    later = [length for row, row_t in zip(count, truncated) for length in row[row_t][1:].tolist()]
    assert set(later) == {2, 3}
    with pytest.raises(RuntimeError, match="requires a StepCounter earlier"):
        TransformedEnv(tally_env(), RandomTruncationTransform(2, 3)).done_spec
    with pytest.raises(ValueError, match=r"min_horizon \(5\) must be <= max_horizon \(3\)"):
        RandomTruncationTransform(5, 3)
    with pytest.raises(ValueError, match="prob must be in"):
        RandomTruncationTransform(1, 3, prob=1.5)


# ---- TimeMaxPool -------------------------------------------------------------------------------------------

def test_time_max_pool_by_hand_and_zeroed_at_reset():
    # obs 1, -2, 3, -4 per episode; a window of 3 that a reset fills with zeros
    env = TransformedEnv(tally_env(length=3, alternate=True), TimeMaxPool(["observation"], ["pooled"], T=3))
    td = env.rollout(7, break_when_any_done=False)
    assert flat(td["pooled"]) == [1.0, 1.0, 3.0, 1.0, 1.0, 3.0, 1.0]
    assert flat(td["next", "pooled"]) == [1.0, 3.0, 3.0, 1.0, 3.0, 3.0, 1.0]
    assert flat(td["next", "observation"])[:3] == [-2.0, 3.0, -4.0]  # the in key is kept
    assert "pooled" in env.observation_spec.keys()


def test_time_max_pool_errors():
    with pytest.raises(ValueError, match="greater or equal to one"):
        TimeMaxPool(T=0)
    with pytest.raises(ValueError, match="same number of elements"):
        TimeMaxPool(["a", "b"], ["c"])
    with pytest.raises(NotImplementedError, match="cannot be called independently"):
        TimeMaxPool()(TensorDict({}, []))


# ---- RandomCropTensorDict ----------------------------------------------------------------------------------

def test_random_crop_takes_consecutive_steps():
    data = TensorDict({"a": rlpipe.arange(20).reshape(2, 10), "b": rlpipe.arange(40).reshape(2, 10, 2)}, [2, 10])
    for _ in range(10):
        out = RandomCropTensorDict(3)(data)
        assert out.batch_size == (2, 3)
        a = arr(out["a"])
        assert (np.diff(a, axis=1) == 1).all() and a[0, 0] <= 7 and 10 <= a[1, 0] <= 17
        np.testing.assert_array_equal(arr(out["b"])[..., 0], 2 * a)


def test_random_crop_with_mask_stays_in_the_valid_steps():
    mask = rlpipe.tensor([[True] * 4 + [False] * 6, [True] * 10])
    data = TensorDict({"a": rlpipe.arange(20).reshape(2, 10), "mask": mask}, [2, 10])
    starts = {int(arr(RandomCropTensorDict(3, mask_key="mask")(data)["a"])[0, 0]) for _ in range(40)}
    assert starts == {0, 1}  # windows of 3 within the first 4 steps
    with pytest.raises(RuntimeError, match="minimum trajectory length is 4"):
        RandomCropTensorDict(5, mask_key="mask")(data)
    with pytest.raises(RuntimeError, match="Cannot sample trajectories of length 11"):
        RandomCropTensorDict(11)(data)
    with pytest.raises(RuntimeError, match="empty shape"):
        RandomCropTensorDict(1)(TensorDict({}, []))


# ---- ActionMask --------------------------------------------------------------------------------------------

class MaskEnv(gym.Env):
    """Four actions; the allowed ones start as [T, F, F, T] and rotate by one at each step. Taking
    a forbidden action is recorded in ``bad``."""

    def __init__(self):
        self.observation_space = gym.spaces.Dict({"observation": gym.spaces.Box(0.0, 100.0, (1,), np.float32),
                                                  "action_mask": gym.spaces.MultiBinary(4)})
        self.action_space = gym.spaces.Discrete(4)
        self.t, self.bad = 0, 0

    def _mask(self):
        return np.roll(np.array([1, 0, 0, 1], dtype=np.int8), self.t)

    def _obs(self):
        return {"observation": np.array([self.t], np.float32), "action_mask": self._mask()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.bad += int(not self._mask()[int(action)])
        self.t += 1
        return self._obs(), 0.0, self.t >= 6, False, {}


@pytest.mark.parametrize("categorical", [True, False])
def test_action_mask_random_actions_respect_the_mask(categorical):
    base = MaskEnv()
    env = TransformedEnv(GymEnv(base, categorical_action_encoding=categorical), ActionMask())
    rlpipe.manual_seed(0)
    td = env.rollout(60, break_when_any_done=False)
    assert base.bad == 0
    actions = arr(td["action"]) if categorical else arr(td["action"]).argmax(-1)
    masks = arr(td["action_mask"]).astype(bool)
    assert masks[np.arange(60), actions].all()
    assert len(set(actions.tolist())) == 4  # every action is allowed somewhere, and drawn
    spec = env.action_spec
    assert flat(spec.mask) == flat(td["next", "action_mask"][-1].bool())
    allowed = int(np.flatnonzero(spec.mask)[0])
    forbidden = int(np.flatnonzero(~spec.mask)[0])
    as_action = (lambda i: rlpipe.tensor(i)) if categorical else (lambda i: rlpipe.nn.functional.one_hot(
        rlpipe.tensor(i), 4).to(spec.dtype))
    assert spec.is_in(as_action(allowed)) and not spec.is_in(as_action(forbidden))


def test_action_mask_errors():
    with pytest.raises(ValueError, match="must be a nested key"):
        ActionMask(mask_key=3)
    with pytest.raises(ValueError, match="The action spec must be one of"):
        TransformedEnv(tally_env(), ActionMask()).action_spec
    with pytest.raises(KeyError, match="no mask entry 'action_mask'"):
        TransformedEnv(tally_env(discrete=3), ActionMask()).reset()
    with pytest.raises(RuntimeError, match="outside an env"):
        ActionMask()(TensorDict({}, []))
    with pytest.raises(RuntimeError, match="parent cannot be None"):
        ActionMask()._call(TensorDict({}, []))


# ---- ModuleTransform and BurnInTransform -------------------------------------------------------------------

def test_module_transform_runs_the_module_on_each_step_and_on_samples():
    double = TensorDictModule(lambda obs: obs * 2, in_keys=["observation"], out_keys=["double"])
    spec = Unbounded(shape=(1,))
    t = ModuleTransform(module=double, no_grad=True,
                        observation_spec_transform=lambda s: s.set("double", spec) or s)
    env = TransformedEnv(tally_env(length=5), t)
    td = env.rand_step(env.rand_step(env.reset())["next"])  # (as torchrl's, a reset's output is not transformed)
    assert flat(td["next", "double"]) == [4.0]
    assert "double" in env.observation_spec.keys()
    sample = t(TensorDict({"observation": rlpipe.tensor([[1.5]])}, [1]))
    assert flat(sample["double"]) == [3.0]
    assert t.in_keys == [("observation",)] and t.out_keys == [("double",)]


def test_module_transform_inverse_changes_the_action_the_env_gets():
    base = TallyEnv()
    halve = TensorDictModule(lambda a: a / 2, in_keys=["action"], out_keys=["action"])
    env = TransformedEnv(GymEnv(base), ModuleTransform(module_factory=lambda: halve, inverse=True))
    td = env.reset()
    td["action"] = rlpipe.tensor([1.0, -2.0])
    env.step(td)
    assert base.actions[-1].tolist() == [0.5, -1.0]
    with pytest.raises(ValueError, match="At least one of"):
        ModuleTransform()
    with pytest.raises(ValueError, match="Only one of"):
        ModuleTransform(module=halve, module_factory=lambda: halve)


def running_sum_module():
    # a stand-in for a recurrent module: next hidden = the first hidden + the observations so far
    return TensorDictModule(lambda obs, hidden: hidden[:, :1] + obs.cumsum(1), in_keys=["obs", "hidden"],
                            out_keys=[("next", "hidden")])


def test_burn_in_starts_the_kept_steps_from_the_burnt_in_state():
    obs = rlpipe.tensor([[1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 20.0, 30.0, 40.0, 50.0]]).unsqueeze(-1)
    hidden = rlpipe.zeros(2, 5, 1) + rlpipe.tensor([[100.0], [200.0]]).unsqueeze(1)
    data = TensorDict({"obs": obs, "hidden": hidden}, [2, 5])
    t = BurnInTransform(running_sum_module(), burn_in=2)
    assert t.out_keys == [("hidden",)]
    out = t(data)
    assert out.batch_size == (2, 3)
    # first kept step: the first hidden plus the two burnt-in observations; the later steps unchanged
    assert arr(out["hidden"])[..., 0].tolist() == [[103.0, 100.0, 100.0], [230.0, 200.0, 200.0]]
    assert arr(out["obs"])[..., 0].tolist() == [[3.0, 4.0, 5.0], [30.0, 40.0, 50.0]]
    assert BurnInTransform(running_sum_module(), burn_in=0)(data) is data


def test_burn_in_errors():
    with pytest.raises(ValueError, match="must be TensorDictModules"):
        BurnInTransform([lambda td: td], burn_in=1)
    with pytest.raises(RuntimeError, match="only be appended to a ReplayBuffer"):
        TransformedEnv(tally_env(), BurnInTransform(running_sum_module(), burn_in=1)).rollout(2)
    data = TensorDict({"obs": rlpipe.zeros(2, 2, 1), "hidden": rlpipe.zeros(2, 2, 1)}, [2, 2])
    with pytest.raises(ValueError, match="T > burn_in=2"):
        BurnInTransform(running_sum_module(), burn_in=2)(data)


# ---- NextStateReconstructor --------------------------------------------------------------------------------

def compact_sample():
    return TensorDict({"observation": rlpipe.tensor([[1.0], [2.0], [3.0], [4.0], [5.0], [6.0]]),
                       "collector": {"traj_ids": rlpipe.tensor([0, 0, 0, 1, 1, 1])},
                       "step_count": rlpipe.tensor([0, 1, 2, 0, 1, 3]),
                       "next": {"done": rlpipe.tensor([[False], [True], [False], [False], [False], [False]])}}, [6])


def test_next_state_reconstructor_by_hand():
    out = NextStateReconstructor()(compact_sample())
    # 1 -> 2 within trajectory 0; 2 ends an episode (done); 3 -> 4 crosses trajectories; 6 is last
    np.testing.assert_array_equal(arr(out["next", "observation"])[:, 0], [2.0, np.nan, np.nan, 5.0, 6.0, np.nan])
    out = NextStateReconstructor(["observation"], step_count_key="step_count", fill_value=-1.0)(compact_sample())
    assert flat(out["next", "observation"]) == [2.0, -1.0, -1.0, 5.0, -1.0, -1.0]  # 1 -> 3 skips a step


def test_next_state_reconstructor_errors():
    data = compact_sample()
    del data["collector"]
    with pytest.raises(KeyError, match="trajectory key"):
        NextStateReconstructor()(data)
    out = NextStateReconstructor(strict=False)(data)
    assert np.isnan(arr(out["next", "observation"])[1, 0]) and flat(out["next", "observation"])[2] == 4.0
    with pytest.raises(TypeError, match="non-floating dtype"):
        NextStateReconstructor(["step_count"])(compact_sample())
    with pytest.raises(ValueError, match="flat"):
        NextStateReconstructor()(TensorDict({}, [2, 3]))


# ---- gSDENoise ---------------------------------------------------------------------------------------------

def test_gsde_noise_is_drawn_at_reset_and_carried_through_the_episode():
    rlpipe.manual_seed(0)
    env = TransformedEnv(GymEnv("RlpipeTestTally-v0", num_envs=2, length=3), gSDENoise(state_dim=3, action_dim=2))
    assert tuple(env.observation_spec["_eps_gSDE"].shape) == (2, 2, 3)
    td = env.rollout(6, break_when_any_done=False)
    eps = arr(td["_eps_gSDE"])  # [env, step, 2, 3]
    assert eps.shape == (2, 6, 2, 3) and eps.std() > 0.3
    np.testing.assert_array_equal(eps[:, 1], eps[:, 0])
    np.testing.assert_array_equal(eps[:, 2], eps[:, 0])
    assert not np.isclose(eps[:, 3], eps[:, 0]).any()  # redrawn at each episode's reset
    np.testing.assert_array_equal(arr(td["next", "_eps_gSDE"]), eps)


def test_gsde_noise_without_dims_is_zero():
    env = TransformedEnv(tally_env(), gSDENoise())
    td = env.rollout(2)
    assert arr(td["_eps_gSDE"]).tolist() == [[0.0], [0.0]]
    with pytest.raises(NotImplementedError, match="TensorDictPrimer options"):
        gSDENoise(default_value=1.0)


def test_gsde_noise_forward_primes_a_sample():
    out = gSDENoise(state_dim=3, action_dim=2, shape=(4,))(TensorDict({"a": rlpipe.zeros(4)}, [4]))
    assert tuple(out["_eps_gSDE"].shape) == (4, 2, 3) and (arr(out["_eps_gSDE"]) != 0).all()
    with pytest.raises(RuntimeError, match="leading shape of the spec must match"):
        gSDENoise(shape=(2,))(TensorDict({"a": rlpipe.zeros(4)}, [4]))


# ---- in a collector ----------------------------------------------------------------------------------------

def test_episode_transforms_in_a_collector_over_vector_env_resets():
    from rlpipe.collectors import SyncDataCollector
    base = GymEnv("RlpipeTestTally-v0", num_envs=3, length=4)
    env = TransformedEnv(base, Compose(TrajCounter(), TargetReturn(20.0), ActionScaling()))
    collector = SyncDataCollector(env, frames_per_batch=24, total_frames=24)
    data = next(iter(collector))
    assert data.batch_size == (3, 8)
    assert arr(data["next", "traj_count"])[..., 0].tolist() == [[0] * 4 + [3] * 4, [1] * 4 + [4] * 4,
                                                                [2] * 4 + [5] * 4]
    assert arr(data["next", "target_return"])[..., 0].tolist() == [[19.0, 17.0, 14.0, 10.0] * 2] * 3
    assert (np.abs(arr(data["action"])) <= 1).all()


def test_compose_indexing_insert_and_append():
    target, counter = TargetReturn(5.0), TrajCounter()
    env = TransformedEnv(tally_env(length=2), Compose(target))
    env.append_transform(counter)
    env.insert_transform(0, StepCounter())
    assert env.transform[1] is target and env.transform[2] is counter
    td = env.rollout(3, break_when_any_done=False)
    assert flat(td["next", "target_return"]) == [4.0, 2.0, 4.0]
    assert flat(td["traj_count"]) == [0, 0, 1] and flat(td["next", "step_count"]) == [1, 2, 1]
    tail = env.transform[1:]
    assert isinstance(tail[0], TargetReturn) and tail[0] is not target and tail[1].state_dict() == {"traj_count": 2}
    with pytest.raises(AttributeError, match="already set"):
        Compose(target)


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_transforms_on_a_cuda_env_give_the_cpu_values():
    rollouts = []
    for device in ("cpu", "cuda"):
        rlpipe.manual_seed(0)
        env = TransformedEnv(GymEnv(TallyEnv(length=3, alternate=True), device=device),
                             Compose(TargetReturn(10.0), TrajCounter(), TimeMaxPool(T=2), ActionScaling(),
                                     gSDENoise()))
        td = env.rollout(5, break_when_any_done=False)
        assert td["target_return"].device.type == device
        rollouts.append({k: arr(v) for k, v in td.items(True, True)})
    for key, value in rollouts[0].items():
        if key != "action":  # (random actions, drawn on each device)
            np.testing.assert_array_equal(value, rollouts[1][key], err_msg=str(key))
