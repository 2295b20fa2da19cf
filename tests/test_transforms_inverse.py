# ruff: noqa: SIM118 - TensorDict.keys() is the API
"""Key-wise transforms outside an env (torchrl's ``_call``/``inv``/``_apply_transform`` on a TensorDict,
as a replay buffer uses them) and their inverse keys: ``DoubleToFloat``, ``RenameTransform``,
``ObservationNorm``. Values worked by hand; behaviour as torchrl 0.14.1's (checked in the peer venv)."""
import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.envs.gym import GymEnv
from rlpipe.envs.transforms import DoubleToFloat, DTypeCastTransform, ObservationNorm, RenameTransform, TransformedEnv
from rlpipe.envs.utils import check_env_specs


def arr(t):
    return np.asarray(t.numpy())


def pendulum():
    return GymEnv(gym.make("Pendulum-v1"))


class Float64Env(gym.Env):
    """obs = the last action (float64), reward 0; records the actions it receives."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float64)
        self.received = []

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1), {}

    def step(self, action):
        self.received.append(np.asarray(action).dtype)
        return np.asarray(action, dtype=np.float64), 0.0, False, False, {}


def test_double_to_float_is_a_dtype_cast_with_any_inverse_keys():
    t = DoubleToFloat(in_keys=["obs"], in_keys_inv=["action", ("nested", "x")])
    assert isinstance(t, DTypeCastTransform) and t.dtype_in is rlpipe.float64 and t.dtype_out is rlpipe.float32
    td = TensorDict({"obs": rlpipe.tensor([0.5], dtype=rlpipe.float64),
                     "keep": rlpipe.tensor([0.25], dtype=rlpipe.float64)}, [1])
    t(td)
    assert td["obs"].dtype is rlpipe.float32 and td["keep"].dtype is rlpipe.float64
    td = TensorDict({"action": rlpipe.tensor([1.5]), ("nested", "x"): rlpipe.tensor([2.5])}, [1])
    out = t.inv(td)
    assert out["action"].dtype is rlpipe.float64 and out["nested", "x"].dtype is rlpipe.float64
    assert td["action"].dtype is rlpipe.float32  # inv leaves its input as it was
    assert arr(out["nested", "x"]).tolist() == [2.5]


def test_double_to_float_in_env_casts_frames_and_refuses_other_inputs():
    base = Float64Env()
    env = TransformedEnv(GymEnv(base), DoubleToFloat(in_keys=[], in_keys_inv=["action"]))
    check_env_specs(env)
    assert env.action_spec.dtype is rlpipe.float32 and env.observation_spec["observation"].dtype is rlpipe.float64
    td = env.rollout(3)
    assert td["action"].dtype is rlpipe.float32 and set(base.received) == {np.dtype(np.float64)}
    env = TransformedEnv(GymEnv(Float64Env()), DoubleToFloat())
    assert env.rollout(2)["next", "observation"].dtype is rlpipe.float32
    env = TransformedEnv(GymEnv(Float64Env()), DoubleToFloat(in_keys_inv=["state"]))
    with pytest.raises(NotImplementedError, match=r"in_keys_inv/out_keys_inv can only hold 'action'.*\['state'\]"):
        _ = env.action_spec
    assert isinstance(env.base_env.action_spec, rlpipe.envs.specs.Bounded)  # the base env is still usable


def test_rename_transform_call_and_inverse_outside_an_env():
    t = RenameTransform([("nested", "a")], ["b"], in_keys_inv=["c"], out_keys_inv=[("nested", "d")])
    td = TensorDict({("nested", "a"): rlpipe.tensor(1.0)}, [])
    t._call(td)
    assert "b" in td.keys() and ("nested", "a") not in td.keys(True, True)
    out = t.inv(TensorDict({("nested", "d"): rlpipe.tensor(2.0)}, []))
    assert arr(out["c"]).tolist() == 2.0 and ("nested", "d") not in out.keys(True, True)
    copy = RenameTransform(["a"], ["b"], ["a"], ["b"], create_copy=True)
    out = copy.inv(TensorDict({"b": rlpipe.tensor(3.0)}, []))
    assert sorted(out.keys()) == ["a", "b"]


def test_rename_transform_inverse_keys_refused_in_an_env():
    env = TransformedEnv(pendulum(), RenameTransform(["observation"], ["obs"], in_keys_inv=["action"],
                                                     out_keys_inv=["act"]))
    with pytest.raises(ValueError, match=r"in_keys_inv \['action'\] cannot be renamed: an rlpipe env has one input"):
        _ = env.action_spec
    with pytest.raises(ValueError, match="in_keys_inv and out_keys_inv must have the same length, got 1 and 2"):
        RenameTransform(["a"], ["b"], ["c"], ["d", "e"])


@pytest.mark.parametrize("standard_normal", [True, False])
def test_observation_norm_inverse_and_tensor_apply(standard_normal):
    t = ObservationNorm(loc=1.0, scale=0.5, in_keys=["obs"], in_keys_inv=["act"], standard_normal=standard_normal)
    forward = [(3.0 - 1.0) / 0.5] if standard_normal else [3.0 * 0.5 + 1.0]  # 4.0 or 2.5
    assert arr(t._apply_transform(rlpipe.tensor([3.0]))).tolist() == forward
    out = t.inv(TensorDict({"act": rlpipe.tensor([forward[0]])}, []))
    assert arr(out["act"]).tolist() == [3.0]
    td = TensorDict({"obs": rlpipe.tensor([3.0])}, [])
    assert arr(t._call(td)["obs"]).tolist() == forward


def test_observation_norm_errors():
    with pytest.raises(RuntimeError, match="Loc/Scale have not been initialized"):
        ObservationNorm(in_keys=["a"])._apply_transform(rlpipe.tensor([1.0]))
    with pytest.raises(ValueError, match="cat_dim must be part of or equal to reduce_dim"):  # checked first
        ObservationNorm(loc=0.0, scale=1.0).init_stats(num_iter=11, cat_dim=1)
    t = ObservationNorm(in_keys=["a"])
    with pytest.raises(ValueError, match="cat_dim must be part of or equal to reduce_dim, got cat_dim=1"):
        t.init_stats(num_iter=11, cat_dim=1)
    with pytest.raises(ValueError, match=r"cat_dim must be part of or equal to reduce_dim.*reduce_dim=\(0, 1\)"):
        t.init_stats(num_iter=11, cat_dim=2, reduce_dim=(0, 1))
    with pytest.raises(ValueError, match="cat_dim must be specified if reduce_dim is not an integer"):
        t.init_stats(num_iter=11, reduce_dim=(0, 1))
    env = TransformedEnv(pendulum(), ObservationNorm(loc=0.0, scale=1.0, in_keys_inv=["action"],
                                                     out_keys_inv=["action_inv"]))
    with pytest.raises(ValueError, match=r"in_keys_inv/out_keys_inv can only be \['action'\].*\['action_inv'\]"):
        _ = env.action_spec


def test_dtype_cast_inverse_without_inverse_keys_casts_every_dtype_out_entry():
    t = DTypeCastTransform(rlpipe.float64, rlpipe.float32, in_keys=["obs"])
    td = TensorDict({"a": rlpipe.tensor([1.0]), ("n", "b"): rlpipe.tensor([2.0]),
                     "i": rlpipe.tensor([3], dtype=rlpipe.int64)}, [1])
    out = t.inv(td)
    assert out["a"].dtype is rlpipe.float64 and out["n", "b"].dtype is rlpipe.float64
    assert out["i"].dtype is rlpipe.int64 and td["a"].dtype is rlpipe.float32
    only = DTypeCastTransform(rlpipe.float64, rlpipe.float32, in_keys_inv=["a"]).inv(td)
    assert only["a"].dtype is rlpipe.float64 and only["n", "b"].dtype is rlpipe.float32


def test_key_wise_transforms_without_inverse_keys_leave_actions_alone():
    """The collector's fast path: no per-step action hook for a transform with no inverse keys."""
    env = TransformedEnv(pendulum(), ObservationNorm(loc=0.0, scale=2.0))
    assert env._built().action_hooks == []
    env = TransformedEnv(pendulum(), RenameTransform(["observation"], ["obs"]))
    assert env._built().action_hooks == []
    env = TransformedEnv(pendulum(), ObservationNorm(loc=1.0, scale=2.0, in_keys_inv=["action"],
                                                     standard_normal=True))
    assert len(env._built().action_hooks) == 1
    # the policy acts in the normalized space: Pendulum's [-2, 2] as (x - 1) / 2 (torchrl 0.14.1: the same)
    assert env.action_spec.low.tolist() == [-1.5] and env.action_spec.high.tolist() == [0.5]
    base = pendulum()
    env.set_seed(0)
    base.set_seed(0)
    td = env.rollout(2, lambda td: td.set("action", rlpipe.tensor([0.25])))
    expected = base.rollout(2, lambda td: td.set("action", rlpipe.tensor([0.25 * 2.0 + 1.0])))
    np.testing.assert_allclose(arr(td["next", "observation"]), (arr(expected["next", "observation"]) - 1.0) / 2.0,
                               rtol=1e-6)


def test_dtype_cast_in_an_env_casts_frames_and_the_action_on_arrays():
    base = Float64Env()
    env = TransformedEnv(GymEnv(base), DTypeCastTransform(rlpipe.float64, rlpipe.float32))
    assert env.observation_spec["observation"].dtype is rlpipe.float32 and env.action_spec.dtype is rlpipe.float32
    assert len(env._built().action_hooks) == 1
    td = env.rollout(3, lambda td: td.set("action", rlpipe.tensor([0.5])))
    assert td["next", "observation"].dtype is rlpipe.float32 and td["next", "observation"].tolist() == [[0.5]] * 3
    assert set(base.received) == {np.dtype(np.float64)}
    assert TransformedEnv(GymEnv(Float64Env()), DTypeCastTransform(rlpipe.float64, rlpipe.float32,
                                                                   in_keys=["observation"]))._built().action_hooks == []
