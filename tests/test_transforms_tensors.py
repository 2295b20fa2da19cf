# ruff: noqa: SIM118 - TensorDict.keys() is the API
"""torchrl's transforms of entries and keys (``rlpipe.envs.transforms_tensors``).

The checks use a tiny deterministic Gymnasium env written here: at step ``t`` since its reset its
observations are ``grid = t * [[0, 1, 2], [3, 4, 5]]``, ``pos = [t, -t]`` and ``vel = [10 t]``,
the reward of the step that reaches ``t`` is ``t - 2`` (so -1, 0, 1, 2, ...) and it terminates at
``t == length``. Every expected value below is worked out from that by hand.
"""
import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.collectors import RandomPolicy, SyncDataCollector
from rlpipe.envs import (BinarizeReward, CatTensors, ClipTransform, Compose, DTypeCastTransform, ExcludeTransform,
                         ExpandAs, FiniteTensorDictCheck, FlattenAction, FlattenObservation, GymEnv, InitTracker,
                         LineariseRewards, PermuteTransform, RemoveEmptySpecs, RenameTransform, RewardClipping,
                         RewardScaling, SelectTransform, SignTransform, SqueezeTransform, Stack, StepCounter,
                         TensorDictPrimer, TransformedEnv, UnaryTransform, UnsqueezeTransform, VecNorm, VecNormV2)
from rlpipe.envs.specs import Binary, Bounded, Categorical, Composite, Unbounded
from rlpipe.envs.utils import check_env_specs


class GridEnv(gym.Env):
    """Observations ``grid``, ``pos``, ``vel`` and reward as the module docstring says."""

    def __init__(self, length=4, action_dtype=np.float32, action_shape=(1,)):
        self.length = length
        box = lambda shape: gym.spaces.Box(-100.0, 100.0, shape=shape, dtype=np.float32)  # noqa: E731
        self.observation_space = gym.spaces.Dict({"grid": box((2, 3)), "pos": box((2,)), "vel": box((1,))})
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=action_shape, dtype=action_dtype)
        self.t = 0
        self.actions = []

    def _obs(self):
        t = self.t
        return {"grid": (t * np.arange(6, dtype=np.float32)).reshape(2, 3), "pos": np.array([t, -t], np.float32),
                "vel": np.array([10 * t], np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.actions.append(np.array(action))
        self.t += 1
        return self._obs(), float(self.t - 2), self.t >= self.length, False, {}


gym.register(id="RlpipeTfaGrid-v0", entry_point=GridEnv)


def arr(x):
    return np.array(x.detach().cpu().numpy())


def grid_env(*transforms, **kwargs):
    return TransformedEnv(GymEnv(GridEnv(**kwargs)), Compose(*transforms))


def rollout(env, steps=4, **kwargs):
    env.set_seed(0)
    check_env_specs(env)
    return env.rollout(steps, **kwargs)


# ---- InitTracker -----------------------------------------------------------------------------------------

def test_init_tracker_marks_each_first_step_through_autoresets():
    env = TransformedEnv(GymEnv("RlpipeTfaGrid-v0", num_envs=2, length=3), InitTracker())
    spec = env.observation_spec["is_init"]
    assert isinstance(spec, Categorical) and spec.dtype is rlpipe.bool and spec.shape == (2, 1)
    td = rollout(env, 7, break_when_any_done=False)
    # steps since reset: 0 1 2 | 0 1 2 | 0: is_init exactly where the env was just reset
    expected = [True, False, False, True, False, False, True]
    assert arr(td["is_init"])[..., 0].tolist() == [expected, expected]
    assert not arr(td["next", "is_init"]).any()
    np.testing.assert_array_equal(arr(td["is_init"])[..., 0], arr(td["pos"])[..., 0] == 0)


def test_init_tracker_in_a_collector_and_a_custom_key():
    env = TransformedEnv(GymEnv(GridEnv(length=3)), Compose(StepCounter(), InitTracker("first")))
    collector = SyncDataCollector(env, RandomPolicy(env.action_spec), frames_per_batch=7, total_frames=7)
    data = next(iter(collector))
    collector.shutdown()
    assert arr(data["first"])[:, 0].tolist() == [True, False, False, True, False, False, True]
    np.testing.assert_array_equal(arr(data["first"])[:, 0], arr(data["step_count"])[:, 0] == 0)


def test_init_tracker_tensordict_methods_and_errors():
    t = InitTracker()
    root = TensorDict({"done": rlpipe.zeros(3, 1, dtype=rlpipe.bool)}, [3])
    assert arr(t._reset(TensorDict(batch_size=[3]), root.clone())["is_init"]).all()
    partial = TensorDict({"_reset": rlpipe.tensor([[True], [False], [True]])}, [3])
    assert arr(t._reset(partial, root.clone())["is_init"])[:, 0].tolist() == [True, False, True]
    flat = TensorDict({"_reset": rlpipe.tensor([False, True, False])}, [3])
    assert arr(t._reset(flat, root.clone())["is_init"]).tolist() == [[False], [True], [False]]
    assert not arr(t._call(root.clone())["is_init"]).any()
    assert t.out_keys == [("is_init",)] and t.init_keys == ["is_init"]
    with pytest.raises(NotImplementedError, match="parent environment"):
        t(root)
    with pytest.raises(ValueError, match="init_key can only be of type str"):
        InitTracker(("a", "b"))


# ---- rewards --------------------------------------------------------------------------------------------

def test_reward_scaling_values_standard_normal_and_forward():
    td = rollout(grid_env(RewardScaling(loc=1.0, scale=2.0)))
    assert arr(td["next", "reward"])[:, 0].tolist() == [-1.0, 1.0, 3.0, 5.0]  # 2 * (t - 2) + 1
    td = rollout(grid_env(RewardScaling(loc=1.0, scale=2.0, standard_normal=True)))
    assert arr(td["next", "reward"])[:, 0].tolist() == [-1.0, -0.5, 0.0, 0.5]  # (t - 3) / 2
    t = RewardScaling(0.0, 0.0, in_keys=["r"], out_keys=["r2"])
    assert t.scale.item() == pytest.approx(1e-6)  # clamped
    out = t(TensorDict({"r": rlpipe.tensor([[2.0]])}, [1]))
    assert arr(out["r2"]).tolist() == [[pytest.approx(2e-6)]] and arr(out["r"]).tolist() == [[2.0]]
    assert sorted(RewardScaling(1.0, 2.0).state_dict()) == ["loc", "scale"]
    assert repr(RewardScaling(1.0, 2.0)) == "RewardScaling(loc=1.0000, scale=2.0000, keys=[('reward',)])"


def test_reward_scaling_and_clipping_errors():
    with pytest.raises(NotImplementedError, match="Bounded"):
        RewardScaling(0.0, 1.0)._transform_spec(Bounded(-1.0, 1.0, shape=(1,)))
    with pytest.raises(TypeError, match="loc must be a real number"):
        RewardScaling("a", 1.0)
    with pytest.raises(NotImplementedError, match="in place"):
        grid_env(RewardScaling(0.0, 1.0, out_keys=["scaled"])).observation_spec
    with pytest.raises(TypeError, match="at least one"):
        RewardClipping()
    with pytest.raises(ValueError, match="must not exceed"):
        RewardClipping(1.0, -1.0)


def test_reward_clipping_values_and_spec():
    env = grid_env(RewardClipping(-0.5, 1.0))
    spec = env.reward_spec
    assert isinstance(spec, Bounded) and arr(spec.low).tolist() == [-0.5] and arr(spec.high).tolist() == [1.0]
    assert arr(rollout(env)["next", "reward"])[:, 0].tolist() == [-0.5, 0.0, 1.0, 1.0]
    assert arr(rollout(grid_env(RewardClipping(clamp_min=0.0)))["next", "reward"])[:, 0].tolist() == [0, 0, 1, 2]
    assert arr(rollout(grid_env(RewardClipping(clamp_max=0.0)))["next", "reward"])[:, 0].tolist() == [-1, 0, 0, 0]


def test_binarize_reward_values_spec_and_shape_error():
    env = grid_env(BinarizeReward())
    assert isinstance(env.reward_spec, Binary) and env.reward_spec.shape == (1,)
    reward = rollout(env)["next", "reward"]
    assert reward.dtype is rlpipe.int8 and arr(reward)[:, 0].tolist() == [0, 0, 1, 1]
    with pytest.raises(RuntimeError, match="must be singleton"):
        BinarizeReward()(TensorDict({"reward": rlpipe.ones(2, 3)}, [2]))


def test_sign_transform_observations_reward_and_action():
    env = grid_env(SignTransform(in_keys=["pos", "reward"], in_keys_inv=["action"]))
    spec = env.observation_spec["pos"]
    assert isinstance(spec, Bounded) and arr(spec.low).tolist() == [-1, -1] and arr(spec.high).tolist() == [1, 1]
    assert isinstance(env.reward_spec, Bounded)
    td = rollout(env)
    assert arr(td["pos"]).tolist() == [[0, 0], [1, -1], [1, -1], [1, -1]]  # the reset observation too
    assert arr(td["next", "reward"])[:, 0].tolist() == [-1, 0, 1, 1]
    env.rollout(1, policy=lambda td: td.set("action", rlpipe.tensor([-0.25])))
    assert env.base_env._env.actions[-1].tolist() == [-1.0]  # the action reaches the env as its sign


# ---- values and shapes ----------------------------------------------------------------------------------

def test_clip_transform_values_specs_and_errors():
    env = grid_env(ClipTransform(in_keys=["pos"], low=-1.5, high=2.0))
    spec = env.observation_spec["pos"]
    eps = float(np.finfo(np.float32).resolution)
    np.testing.assert_allclose(arr(spec.low), [-1.5 - eps] * 2)
    np.testing.assert_allclose(arr(spec.high), [2.0 + eps] * 2)
    assert arr(rollout(env)["next", "pos"]).tolist() == [[1, -1], [2, -1.5], [2, -1.5], [2, -1.5]]
    high_only = ClipTransform(in_keys=["x"], high=0.0)(TensorDict({"x": rlpipe.tensor([-3.0, 3.0])}, []))
    assert arr(high_only["x"]).tolist() == [-3.0, 0.0]
    with pytest.raises(TypeError, match="Either one or both"):
        ClipTransform(in_keys=["x"])
    with pytest.raises(ValueError, match="strictly lower"):
        ClipTransform(in_keys=["x"], low=1.0, high=1.0)
    with pytest.raises(TypeError, match="must be scalars"):
        ClipTransform(in_keys=["x"], low=np.zeros(2))
    with pytest.raises(NotImplementedError, match="only hold 'action'"):
        grid_env(ClipTransform(in_keys_inv=["state"], low=0.0)).action_spec
    inverse = ClipTransform(in_keys_inv=["state"], low=0.0).inv(TensorDict({"state": rlpipe.tensor([-1.0, 1.0])}, []))
    assert arr(inverse["state"]).tolist() == [0.0, 1.0]  # outside an env any key is inverted
    assert isinstance(ClipTransform(low=0.0).transform_observation_spec(Unbounded(shape=(2,))), Bounded)  # a leaf


def test_unsqueeze_and_squeeze_observations_and_action():
    env = grid_env(UnsqueezeTransform(-2, in_keys=["pos"], in_keys_inv=["action"]))
    assert env.observation_spec["pos"].shape == (1, 2) and env.action_spec.shape == (1, 1)
    spec = env.observation_spec["pos"]
    assert arr(spec.low).tolist() == [[-100.0, -100.0]]
    td = rollout(env)
    assert td["pos"].shape == (4, 1, 2) and arr(td["next", "pos"])[1].tolist() == [[2.0, -2.0]]
    assert td["action"].shape == (4, 1, 1) and env.base_env._env.actions[-1].shape == (1,)
    env = grid_env(UnsqueezeTransform(-1, in_keys=["pos"]), SqueezeTransform(-1, in_keys=["pos"]))
    assert env.observation_spec["pos"].shape == (2,)
    assert arr(rollout(env)["pos"])[2].tolist() == [2.0, -2.0]
    positive = TransformedEnv(GymEnv("RlpipeTfaGrid-v0", num_envs=3),
                              UnsqueezeTransform(0, allow_positive_dim=True, in_keys=["vel"]))
    assert positive.transform.dim == 1 and positive.observation_spec["vel"].shape == (3, 1, 1)
    with pytest.raises(RuntimeError, match="allow_positive_dim"):
        UnsqueezeTransform(0, in_keys=["x"])
    with pytest.raises(TypeError, match="dim must be passed"):
        SqueezeTransform(in_keys=["x"])
    assert SqueezeTransform(squeeze_dim=-1).squeeze_dim == -1


def test_permute_transform_values_specs_and_inverse():
    env = grid_env(PermuteTransform([-1, -2], in_keys=["grid"]))
    assert env.observation_spec["grid"].shape == (3, 2)
    td = rollout(env)
    assert arr(td["grid"])[1].tolist() == [[0, 3], [1, 4], [2, 5]]  # t = 1: the transpose of [[0,1,2],[3,4,5]]
    t = PermuteTransform([-2, -3, -1])
    assert t._invert_permute([-2, -3, -1]) == [-2, -3, -1]
    assert t._invert_permute([-1, -3, -2]) == [-2, -1, -3]
    x = rlpipe.arange(24).reshape(2, 3, 4)
    assert t._apply_transform(x).shape == (3, 2, 4)
    assert arr(t._inv_apply_transform(t._apply_transform(x))).tolist() == arr(x).tolist()
    with pytest.raises(ValueError, match="tailing dims"):
        PermuteTransform([0, 1])


def test_flatten_observation_values_and_errors():
    env = grid_env(FlattenObservation(-2, -1, in_keys=["grid"]))
    assert env.observation_spec["grid"].shape == (6,)
    assert arr(rollout(env)["next", "grid"])[1].tolist() == [0, 2, 4, 6, 8, 10]
    assert FlattenObservation(-2, -1).in_keys == [("pixels",)]
    with pytest.raises(ValueError, match="first_dim should be smaller than 0"):
        FlattenObservation(0, -1)


def test_cat_tensors_keys_values_and_lazy_keys():
    env = grid_env(CatTensors(["vel", "pos"], out_key="obs"))
    assert set(env.observation_spec.keys()) == {"grid", "obs"} and env.observation_spec["obs"].shape == (3,)
    td = rollout(env)
    assert arr(td["next", "obs"])[1].tolist() == [2.0, -2.0, 20.0]  # sorted: pos, then vel
    assert "pos" not in td.keys() and "vel" not in td.keys()
    lazy = grid_env(CatTensors(del_keys=False))  # the one-feature-dim observations: pos and vel
    assert set(lazy.observation_spec.keys()) == {"grid", "pos", "vel", "observation_vector"}
    assert lazy.transform[0].in_keys == [("pos",), ("vel",)]
    out = CatTensors(["b", "a"], "c", dim=-2, unsqueeze_if_oor=True)(TensorDict({"a": rlpipe.zeros(1),
                                                                                "b": rlpipe.ones(1)}, []))
    assert arr(out["c"]).tolist() == [[0.0], [1.0]] and list(out.keys()) == ["c"]  # each gets a dim -2
    with pytest.raises(KeyError, match="expected input keys"):
        CatTensors(["a", "z"], "c")(TensorDict({"a": rlpipe.ones(2)}, []))
    with pytest.raises(ValueError, match="does not match the keys"):
        grid_env(CatTensors(["pos", "nope"])).observation_spec
    with pytest.raises(ValueError, match="dim=-1"):
        CatTensors(dim=0)
    leaf = Unbounded(shape=(3,))
    assert CatTensors(["a"], "b").transform_observation_spec(leaf) is leaf
    with pytest.raises(ValueError, match="multiple input keys"):
        CatTensors(["a", "c"], "b").transform_observation_spec(leaf)


def test_dtype_cast_automatic_keys_and_action():
    env = grid_env(DTypeCastTransform(rlpipe.float32, rlpipe.float64))
    assert all(spec.dtype is rlpipe.float64 for spec in env.observation_spec.values())
    assert env.reward_spec.dtype is rlpipe.float64 and env.action_spec.dtype is rlpipe.float64
    td = rollout(env)
    assert td["pos"].dtype is rlpipe.float64 and td["next", "reward"].dtype is rlpipe.float64
    assert td["action"].dtype is rlpipe.float64 and env.base_env._env.actions[-1].dtype == np.float32
    only = grid_env(DTypeCastTransform(rlpipe.float32, rlpipe.float64, in_keys=["vel"]))
    assert only.observation_spec["vel"].dtype is rlpipe.float64 and only.observation_spec["pos"].dtype is rlpipe.float32
    assert only.action_spec.dtype is rlpipe.float32
    loose = DTypeCastTransform(rlpipe.float32, rlpipe.int64)(TensorDict({"a": rlpipe.tensor([1.5]),
                                                                         "b": rlpipe.tensor([2])}, []))
    assert loose["a"].dtype is rlpipe.int64 and arr(loose["a"]).tolist() == [1]
    with pytest.raises(TypeError, match="expected rlpipe.float64"):
        grid_env(DTypeCastTransform(rlpipe.float64, rlpipe.float32, in_keys=["pos"])).observation_spec
    with pytest.raises(ValueError, match="out_keys were passed without in_keys"):
        DTypeCastTransform(rlpipe.float32, rlpipe.float64, out_keys=["x"])


# ---- keys -----------------------------------------------------------------------------------------------

def test_exclude_and_select_transforms():
    env = grid_env(ExcludeTransform("grid", ("pos",)))
    assert list(env.observation_spec.keys()) == ["vel"]
    td = rollout(env)
    assert "grid" not in td.keys() and "pos" not in td["next"].keys() and "reward" in td["next"].keys()
    env = grid_env(SelectTransform("pos"))
    assert list(env.observation_spec.keys()) == ["pos"]
    td = rollout(env)
    assert sorted(td["next"].keys()) == ["done", "pos", "reward", "terminated", "truncated"]
    assert sorted(SelectTransform("a")(TensorDict({"a": rlpipe.ones(1), "b": rlpipe.ones(1)}, [])).keys()) == ["a"]
    with pytest.raises(KeyError, match="not found in the environment outputs"):
        grid_env(ExcludeTransform("nope")).observation_spec
    with pytest.raises(NotImplementedError, match="cannot be removed"):
        ExcludeTransform("reward")
    with pytest.raises(NotImplementedError, match="keep_rewards"):
        SelectTransform("pos", keep_rewards=False)
    with pytest.raises(TypeError, match="excluded keys must be"):
        ExcludeTransform(3)


def test_compose_indexing_insert_and_append():
    env = grid_env(SignTransform(in_keys=["pos"]))
    env.append_transform(ClipTransform(in_keys=["vel"], high=15.0))
    env.insert_transform(0, RewardScaling(0.0, 10.0))
    assert [type(t).__name__ for t in env.transform] == ["RewardScaling", "SignTransform", "ClipTransform"]
    td = rollout(env)
    assert arr(td["next", "vel"])[:, 0].tolist() == [10, 15, 15, 15]
    assert arr(td["next", "reward"])[:, 0].tolist() == [-10, 0, 10, 20]
    assert isinstance(env.transform[1:], Compose) and len(env.transform[1:]) == 2
    assert isinstance(env.reward_spec, Unbounded)


# ---- TensorDictPrimer -----------------------------------------------------------------------------------

def test_primer_adds_entries_at_reset_and_carries_them_over():
    env = TransformedEnv(GymEnv("RlpipeTfaGrid-v0", num_envs=2),
                         TensorDictPrimer(h=Unbounded(shape=(3,)), c=Bounded(0.0, 1.0, shape=(1,)), expand_specs=True,
                                          default_value={"h": 2.0, "c": lambda: rlpipe.full((2, 1), 0.5)}))
    assert env.observation_spec["h"].shape == (2, 3) and env.observation_spec["c"].shape == (2, 1)
    td = rollout(env, 5, break_when_any_done=False)
    assert arr(td["h"]).tolist() == [[[2.0] * 3] * 5] * 2 and arr(td["next", "h"]).tolist() == arr(td["h"]).tolist()
    assert (arr(td["c"]) == 0.5).all()
    primer = env.transform
    root = TensorDict({"h": rlpipe.full((2, 3), 7.0), "c": rlpipe.zeros(2, 1)}, [2])
    nxt = primer._step(root, TensorDict({"c": rlpipe.ones(2, 1)}, [2]))
    assert (arr(nxt["h"]) == 7.0).all() and (arr(nxt["c"]) == 1.0).all()  # an entry already there is kept


def test_primer_random_forward_and_errors():
    primer = TensorDictPrimer({"x": Bounded(-1.0, 1.0, shape=(4, 2)), "shape": [4]}, random=True)
    out = primer(TensorDict(batch_size=[4]))
    assert out["x"].shape == (4, 2) and (np.abs(arr(out["x"])) <= 1.0).all() and len(set(arr(out["x"]).ravel())) > 1
    with pytest.raises(RuntimeError, match="leading shape of the spec"):
        primer(TensorDict(batch_size=[3]))
    with pytest.raises(RuntimeError, match="expand_specs wasn't specified"):
        unexpanded = TensorDictPrimer(h=Unbounded(shape=(3,)))
        TransformedEnv(GymEnv("RlpipeTfaGrid-v0", num_envs=2), unexpanded).observation_spec
    with pytest.raises(ValueError, match="incompatible"):
        TensorDictPrimer(h=Unbounded(shape=(3,)), random=True, default_value=1.0)
    with pytest.raises(ValueError, match="must match the primers keys"):
        TensorDictPrimer(h=Unbounded(shape=(3,)), default_value={"g": 1.0})
    with pytest.raises(ValueError, match="subtype of the TensorSpec"):
        TensorDictPrimer(h=3)
    with pytest.raises(ValueError, match="outside its spec"):
        TensorDictPrimer(h=Unbounded(shape=(3,)), default_value=lambda: rlpipe.zeros(2))(TensorDict(batch_size=[]))


# ---- VecNorm, VecNormV2 ---------------------------------------------------------------------------------

SQRT_1_5, STEP3 = 1.5 ** 0.5, 1.5 / 1.25 ** 0.5  # (x - mean) / std over {0, 1, 2} and over {0, 1, 2, 3}


@pytest.mark.parametrize("make", [lambda: VecNorm(["pos", "reward"], decay=1.0),
                                  lambda: VecNormV2(["pos", "reward"], decay=1.0)])
def test_vecnorms_without_decay_use_the_mean_and_std_of_everything_seen(make):
    env = grid_env(make())
    assert isinstance(env.observation_spec["pos"], Unbounded)  # was Bounded
    td = env.rollout(4)  # (no set_seed, no check_env_specs: each reset and step would count)
    # pos[0] seen so far: 0 (reset), 1, 2, 3: population statistics, the reset value included
    np.testing.assert_allclose(arr(td["next", "pos"])[:3, 0], [1.0, SQRT_1_5, STEP3], rtol=1e-5)
    np.testing.assert_allclose(arr(td["next", "pos"])[:3, 1], [-1.0, -SQRT_1_5, -STEP3], rtol=1e-5)
    # rewards -1, 0, 1, 2 (a reset has none): one value has no spread and gives 0
    np.testing.assert_allclose(arr(td["next", "reward"])[:3, 0], [0.0, 1.0, SQRT_1_5], rtol=1e-5, atol=1e-6)
    t = env.transform[0]
    np.testing.assert_allclose(arr(t.loc["pos"]).reshape(-1), [2.0, -2.0])  # mean of 0..4
    np.testing.assert_allclose(arr(t.scale["pos"]).reshape(-1), [2.0 ** 0.5] * 2, rtol=1e-5)


def test_vecnorm_v2_decay_bias_correction_and_batches():
    t = VecNormV2(["x"], decay=0.5)
    t(TensorDict({"x": rlpipe.tensor([0.0])}, []))
    out = t(TensorDict({"x": rlpipe.tensor([1.0])}, []))
    # loc = 0.5 * (0.5 * 0 + 0.5 * 0) ... = 0.25 * 0 + 0.5 * 1, corrected by 1 - 0.5 ** 2 = 0.75
    np.testing.assert_allclose(arr(t.loc["x"]), [2 / 3], rtol=1e-6)
    np.testing.assert_allclose(arr(t.scale["x"]), [(0.5 / 0.75 - 0.25 / 0.75) ** 0.5], rtol=1e-6)
    np.testing.assert_allclose(arr(out["x"]), [(1 - 2 / 3) / (1 / 3) ** 0.5], rtol=1e-5)
    per_env = VecNormV2(["x"], decay=1.0)
    per_env(TensorDict({"x": rlpipe.tensor([[0.0], [10.0]])}, [2]))
    per_env(TensorDict({"x": rlpipe.tensor([[2.0], [10.0]])}, [2]))
    assert arr(per_env.loc["x"]).tolist() == [[1.0], [10.0]]  # one statistic per batch element
    pooled = VecNormV2(["x"], decay=1.0, reduce_batch_dims=True)
    pooled(TensorDict({"x": rlpipe.tensor([[0.0], [10.0]])}, [2]))
    assert arr(pooled.loc["x"]).tolist() == [5.0] and int(pooled._count[("x",)]) == 2
    with pytest.raises(NotImplementedError, match="stateful=False"):
        VecNormV2(["x"], stateful=False)
    with pytest.raises(KeyError, match="not found"):
        pooled(TensorDict({"y": rlpipe.ones(2)}, [2]))


def test_vecnorm_legacy_counts_every_row_of_a_batch():
    t = VecNorm(["x"], decay=1.0)
    t(TensorDict({"x": rlpipe.tensor([[0.0], [2.0]])}, [2]))
    out = t(TensorDict({"x": rlpipe.tensor([[4.0], [6.0]])}, [2]))
    # mean of {0, 2, 4, 6} = 3, population std = sqrt(5)
    np.testing.assert_allclose(arr(out["x"])[:, 0], [1 / 5 ** 0.5, 3 / 5 ** 0.5], rtol=1e-6)
    assert arr(t._count[("x",)]).tolist() == [4.0] and arr(t._sum[("x",)]).tolist() == [12.0]
    assert isinstance(VecNorm(["x"], new_api=True), VecNormV2)
    with pytest.raises(RuntimeError, match="shared_td must be either in shared memory"):
        VecNorm(["x"], shared_td=TensorDict({"x_sum": rlpipe.zeros(1)}, []))
    with pytest.raises(ValueError, match="one shape per in key"):
        VecNorm(["x", "y"], shapes=[(1,)])


@pytest.mark.parametrize("cls", [VecNorm, VecNormV2])
def test_vecnorm_freeze_denorm_observation_norm_and_state(cls):
    t = cls(["x"], decay=1.0)
    with pytest.raises(RuntimeError, match="initialized"):
        t.frozen_copy()
    for value in (0.0, 2.0, 4.0):
        t(TensorDict({"x": rlpipe.tensor([value])}, []))
    frozen = t.frozen_copy()
    out = frozen(TensorDict({"x": rlpipe.tensor([8.0])}, []))
    np.testing.assert_allclose(arr(out["x"]), [(8 - 2) / (8 / 3) ** 0.5], rtol=1e-5)  # stats of {0, 2, 4}
    np.testing.assert_allclose(arr(frozen.loc["x"]).reshape(-1), [2.0])
    back = frozen.denorm(TensorDict({"x": rlpipe.tensor([1.5])}, []))
    np.testing.assert_allclose(arr(back["x"]), [1.5 * (8 / 3) ** 0.5 + 2], rtol=1e-5)
    norm = frozen.to_observation_norm()
    np.testing.assert_allclose(arr(norm(TensorDict({"x": rlpipe.tensor([8.0])}, []))["x"]), arr(out["x"]), rtol=1e-5)
    t(TensorDict({"x": rlpipe.tensor([6.0])}, []))  # the original goes on learning
    seen = [0.0, 2.0, 4.0, 6.0] if cls is VecNorm else [0.0, 2.0, 4.0]  # the old copy shares its sums
    np.testing.assert_allclose(arr(frozen.loc["x"]).reshape(-1), [np.mean(seen)])
    copy = cls(["x"], decay=1.0)
    copy.load_state_dict(t.state_dict())
    np.testing.assert_allclose(arr(copy.loc["x"]), arr(t.loc["x"]))
    with pytest.raises(KeyError, match="unexpected key"):
        copy.load_state_dict({"bogus": rlpipe.ones(1)})


# ---- LineariseRewards, UnaryTransform, FiniteTensorDictCheck --------------------------------------------

def test_linearise_rewards_values_specs_and_errors():
    t = LineariseRewards(["r"], weights=[1.0, -2.0, 0.5])
    out = t(TensorDict({"r": rlpipe.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, -2.0]])}, [2]))
    assert arr(out["r"]).tolist() == [[-1.5], [-3.0]]
    spec = t._transform_spec(Bounded(0.0, 1.0, shape=(3,)))
    assert spec.shape == (1,) and arr(spec.low).tolist() == [-2.0] and arr(spec.high).tolist() == [1.5]
    assert LineariseRewards(["r"])._transform_spec(Unbounded(shape=(4, 3))).shape == (4, 1)
    per_agent = Composite(a=Composite(r=Bounded(-1.0, 1.0, shape=(2,))), b=Composite(r=Unbounded(shape=(2,))))
    per_agent = LineariseRewards([("a", "r"), ("b", "r")]).transform_reward_spec(per_agent)
    assert arr(per_agent["a", "r"].high).tolist() == [2.0] and per_agent["b", "r"].shape == (1,)
    env = grid_env(LineariseRewards(["reward"], weights=[3.0]))
    assert arr(rollout(env)["next", "reward"])[:, 0].tolist() == [-3.0, 0.0, 3.0, 6.0]
    with pytest.raises(ValueError, match="unidimensional"):
        LineariseRewards(["r"], weights=[[1.0]])
    with pytest.raises(ValueError, match="rewards and weights should match"):
        t(TensorDict({"r": rlpipe.ones(2)}, []))
    with pytest.raises(NotImplementedError, match="discrete"):
        t._transform_spec(Categorical(3, shape=(3,)))


def test_unary_transform_observations_and_action():
    env = grid_env(UnaryTransform(["pos"], ["pos2"], ["action"], ["action"], fn=lambda x: (x * 2).to(rlpipe.int64),
                                  inv_fn=lambda a: a.clamp(-0.5, 0.5)))
    spec = env.observation_spec["pos2"]
    assert isinstance(spec, Unbounded) and spec.dtype is rlpipe.int64 and spec.shape == (2,)
    td = rollout(env)
    assert arr(td["pos2"]).tolist() == [[0, 0], [2, -2], [4, -4], [6, -6]] and "pos" in td.keys()
    env.rollout(1, policy=lambda td: td.set("action", rlpipe.tensor([0.9])))
    assert env.base_env._env.actions[-1].tolist() == [0.5]
    with pytest.raises(TypeError, match="must be callables"):
        UnaryTransform(["a"], ["b"], fn=3)


def test_finite_tensordict_check():
    check = FiniteTensorDictCheck()
    data = TensorDict({"a": rlpipe.ones(2), "b": {"c": rlpipe.tensor([1.0, float("nan")])}}, [2])
    with pytest.raises(ValueError, match=r"\('b', 'c'\) holds NaN or inf"):
        check(data)
    assert check(TensorDict({"a": rlpipe.ones(2), "n": rlpipe.arange(2)}, [2]))["a"].shape == (2,)
    assert rollout(grid_env(FiniteTensorDictCheck()))["next", "pos"].shape == (4, 2)


# ---- RemoveEmptySpecs, Stack ----------------------------------------------------------------------------

def test_remove_empty_specs_data_and_spec():
    data = TensorDict({"a": rlpipe.ones(2), "b": {"c": {}}, "d": {}}, [2])
    out = RemoveEmptySpecs()(data)
    assert list(out.keys(True)) == ["a"]
    env = grid_env(RemoveEmptySpecs())
    spec = env.observation_spec.clone()
    spec["empty"] = Composite(shape=())
    assert sorted(env.transform[0].transform_observation_spec(spec).keys()) == ["grid", "pos", "vel"]
    assert rollout(env)["next", "pos"].shape == (4, 2)


def test_stack_values_specs_and_inverse():
    env = grid_env(RenameTransform(["pos"], ["pos2"], create_copy=True), Stack(["pos", "pos2"], "both", dim=-2))
    spec = env.observation_spec["both"]
    assert spec.shape == (2, 2) and isinstance(spec, Bounded) and "pos" not in env.observation_spec.keys()
    assert arr(spec.low).tolist() == [[-100.0, -100.0]] * 2
    td = rollout(env)
    assert arr(td["next", "both"])[1].tolist() == [[2.0, -2.0], [2.0, -2.0]]  # pos at t = 2, twice
    data = TensorDict({"a": {"x": rlpipe.zeros(3)}, "b": rlpipe.ones(3)}, [])
    out = Stack([("a", "x"), "b"], "ab")(data)
    assert arr(out["ab"]).tolist() == [[0.0, 1.0]] * 3 and sorted(out.keys()) == ["ab"]  # empty parent "a" gone
    nested = TensorDict({"p": {"u": rlpipe.zeros(2)}, "q": {"u": rlpipe.ones(2)}}, [])
    both = Stack(["p", "q"], "pq", in_key_inv="pq", out_keys_inv=["p", "q"], dim=0, allow_positive_dim=True)
    out = both(nested)
    assert arr(out["pq", "u"]).tolist() == [[0.0, 0.0], [1.0, 1.0]]  # TensorDicts stack whole
    back = both.inv(out)
    assert arr(back["q", "u"]).tolist() == [1.0, 1.0] and "pq" not in back.keys()
    unstacked = Stack(["x", "y"], "xy", in_key_inv="xy", out_keys_inv=["x", "y"]).inv(
        TensorDict({"xy": rlpipe.tensor([[1.0, 2.0]])}, []))
    assert arr(unstacked["x"]).tolist() == [1.0] and arr(unstacked["y"]).tolist() == [2.0]
    with pytest.raises(ValueError, match="cannot be in in_keys"):
        Stack(["a", "b"], "a")
    with pytest.raises(ValueError, match="dim should be negative"):
        Stack(["a", "b"], "c", dim=0)
    with pytest.raises(ValueError, match="given together"):
        Stack(["a", "b"], "c", in_key_inv="c")
    with pytest.raises(NotImplementedError, match="one type, shape and dtype"):
        grid_env(Stack(["pos", "vel"], "both")).observation_spec


def test_flatten_action_spec_inverse_and_forward():
    env = grid_env(FlattenAction(), action_shape=(2, 3))
    spec = env.action_spec
    assert spec.shape == (6,) and arr(spec.low).tolist() == [-1.0] * 6
    check_env_specs(env)
    env.rollout(1, policy=lambda td: td.set("action", rlpipe.arange(6, dtype=rlpipe.float32) / 10))
    np.testing.assert_allclose(env.base_env._env.actions[-1], [[0.0, 0.1, 0.2], [0.3, 0.4, 0.5]], rtol=1e-6)
    t = FlattenAction(action_shape=(2, 2))
    assert t(TensorDict({"action": rlpipe.ones(5, 2, 2)}, [5]))["action"].shape == (5, 4)
    back = t.inv(TensorDict({"action": rlpipe.arange(4.0)}, []))
    assert arr(back["action"]).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    with pytest.raises(RuntimeError, match="no stored unflatten shape"):
        FlattenAction().inv(TensorDict({"action": rlpipe.ones(4)}, []))
    assert t._inv_apply_transform(rlpipe.arange(4.0)).shape == (2, 2)
    two = FlattenAction(in_keys_inv=["a", "b"], action_shape=(2, 2))
    with pytest.raises(RuntimeError, match="disambiguate"):
        two._inv_apply_transform(rlpipe.arange(4.0))
    both = two.inv(TensorDict({"a": rlpipe.arange(4.0), "b": rlpipe.zeros(4)}, []))
    assert both["a"].shape == (2, 2) and both["b"].shape == (2, 2)
    with pytest.raises(ValueError, match="must be <= last_dim"):
        FlattenAction(-1, -2)
    with pytest.raises(RuntimeError, match="not compatible"):
        grid_env(FlattenAction(-3, -1)).action_spec


def test_expand_as_done_to_an_observation_and_errors():
    env = grid_env(ExpandAs("done", "pos", out_key="done_pos"), ExpandAs("vel", "reward", out_key="vel_r"))
    assert env.observation_spec["done_pos"].shape == (2,) and env.observation_spec["done_pos"].dtype is rlpipe.bool
    td = rollout(env)
    assert arr(td["done_pos"]).tolist() == [[False, False]] * 4
    assert arr(td["next", "done_pos"])[-1].tolist() == [True, True]  # terminated at t = 4
    assert arr(td["vel_r"]).tolist() == [[0.0], [10.0], [20.0], [30.0]]  # (already the reward's shape)
    out = ExpandAs("a", "b")(TensorDict({"a": rlpipe.tensor([1.0, 2.0]), "b": rlpipe.zeros(2, 3)}, [2]))
    assert arr(out["a"]).tolist() == [[1.0] * 3, [2.0] * 3]
    with pytest.raises(KeyError, match="'b' not found"):
        ExpandAs("a", "b")(TensorDict({"a": rlpipe.ones(2)}, [2]))
    with pytest.raises(NotImplementedError, match="keep their shapes"):
        grid_env(ExpandAs("done", "pos")).observation_spec
