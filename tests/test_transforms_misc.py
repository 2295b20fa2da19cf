# ruff: noqa: SIM118 - TensorDict.keys() is the API
"""``DeviceCastTransform`` and ``Hash`` (torchrl 0.14.1's): hashes checked against ``hashlib``, the
device moves on TensorDicts, and what an env does with them."""
import hashlib

import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.envs import (Compose, ConditionalSkip, DeviceCastTransform, GymEnv, Hash, StepCounter, Timer,
                         TransformedEnv, check_env_specs)


def arr(t):
    return np.asarray(t.numpy())


def pendulum():
    return GymEnv(gym.make("Pendulum-v1"))


def sha(text):
    return list(hashlib.sha256(text.encode("utf-8")).digest())


def test_reproducible_hash_is_the_sha256_of_seed_and_string():
    out = Hash.reproducible_hash("abcdefg")
    assert out.dtype is rlpipe.uint8 and tuple(out.shape) == (32,) and out.tolist() == sha("abcdefg")
    assert Hash.reproducible_hash("abc", seed="s").tolist() == sha("sabc")
    assert Hash.reproducible_hash(None).tolist() == sha("")


def test_hash_of_strings_and_its_inverse():
    t = Hash(in_keys=["text"], out_keys=["hash"], in_keys_inv=["text"], out_keys_inv=["hash"])
    td = t(TensorDict({"text": "abcdefg"}))
    assert td["text"] == "abcdefg" and td["hash"].tolist() == sha("abcdefg")
    back = t.inv(TensorDict({"hash": td["hash"]}))
    assert back["text"] == "abcdefg"
    assert list(t.state_dict()["_repertoire"].values()) == ["abcdefg"]
    with pytest.raises(RuntimeError, match="An inverse transform was queried but the repertoire is None"):
        Hash(in_keys=["text"], out_keys=["hash"]).get_input_from_hash(td["hash"])
    with pytest.raises(ValueError, match="Hash function must return a tensor, but got <class 'int'>"):
        Hash(in_keys=["text"], out_keys=["hash"], hash_fn=lambda x: 3)(TensorDict({"text": "a"}))


def test_hash_in_an_env_of_a_tensor_observation():
    env = TransformedEnv(pendulum(), Hash(in_keys=["observation"], out_keys=["hashing"],
                                          hash_fn=lambda x: rlpipe.tensor(arr(x).round(3).sum())))
    assert "hashing" in env.observation_spec.keys() and "observation" in env.observation_spec.keys()
    check_env_specs(env)
    td = env.rollout(3)
    np.testing.assert_allclose(arr(td["next", "hashing"]), arr(td["next", "observation"]).round(3).sum(-1),
                               rtol=1e-5)


def test_device_cast_whole_moves_the_env_and_the_data():
    env = TransformedEnv(pendulum(), DeviceCastTransform("cpu"))
    assert env.device == rlpipe.device("cpu") and env.base_env.device is None
    assert env.transform.orig_device is None  # the base env's (host arrays, no device)
    assert env.rollout(2)["next", "observation"].device == rlpipe.device("cpu")
    check_env_specs(env)
    t = DeviceCastTransform("cpu", "cpu")
    assert t._call(TensorDict(device=None)).device == rlpipe.device("cpu")
    assert t._inv_call(TensorDict(device=None)).device == rlpipe.device("cpu")
    assert DeviceCastTransform("cpu")._inv_call(TensorDict(device=None)).device is None  # no origin known


def test_device_cast_some_entries():
    t = DeviceCastTransform("cpu", "cpu", in_keys=["a"], out_keys=["b"], in_keys_inv=["c"], out_keys_inv=["d"])
    td = TensorDict({"a": rlpipe.tensor(1.0), "d": rlpipe.tensor(2.0)}, [], device="cpu")
    out = t._call(td)
    assert out.device is None and sorted(out.keys()) == ["a", "b", "d"] and out["b"].tolist() == 1.0
    back = t._inv_call(td)
    assert back["c"].tolist() == 2.0 and back.device is None
    assert sorted(t._inv_call(TensorDict({"a": rlpipe.tensor(1.0)}, [])).keys()) == ["a"]  # no "d": nothing moves
    env = TransformedEnv(pendulum(), DeviceCastTransform("cpu", in_keys=["observation"]))
    with pytest.raises(NotImplementedError, match=r"in an env the whole env moves.*in_keys \['observation'\]"):
        _ = env.observation_spec
    with pytest.raises(ValueError, match="in_keys and out_keys must have the same length, got 1 and 2"):
        DeviceCastTransform("cpu", in_keys=["a"], out_keys=["b", "c"])


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_device_cast_moves_a_host_env_to_cuda():
    def policy(td):  # the same actions on both devices
        return td.set("action", rlpipe.full(tuple(td.batch_size) + (1,), 0.5, device=td.device))

    env = TransformedEnv(pendulum(), DeviceCastTransform("cuda"))
    env.set_seed(0)
    td = env.rollout(3, policy)
    assert env.device.type == "cuda" and td["next", "observation"].device.type == "cuda"
    assert td["action"].device.type == "cuda"
    check_env_specs(env)
    base = pendulum()
    base.set_seed(0)
    np.testing.assert_array_equal(arr(td["next", "observation"].cpu()),
                                  arr(base.rollout(3, policy)["next", "observation"]))


def test_timer_marks_resets_steps_and_policy_times():
    env = TransformedEnv(pendulum(), Compose(Timer(), StepCounter(max_steps=5)))
    assert {"time_step", "time_policy", "time_reset"} <= set(env.observation_spec.keys())
    check_env_specs(env)
    r = env.rollout(10, break_when_any_done=False)
    assert r["time_reset"].dtype is rlpipe.float32 and tuple(r["time_reset"].shape) == (10,)
    resets = arr(r["time_reset"]) > 0
    assert resets.tolist() == [True] + [False] * 4 + [True] + [False] * 4  # the reset at 0 and after step 5
    assert (arr(r["time_policy"])[resets] == 0).all() and (arr(r["time_step"])[resets] == 0).all()
    assert (arr(r["next", "time_reset"]) == 0).all() and (arr(r["next", "time_step"]) > 0).all()
    assert (arr(r["next", "time_policy"]) > 0).all()


def test_timer_on_a_vector_env_and_errors():
    env = TransformedEnv(GymEnv("CartPole-v1", num_envs=3), Compose(Timer(time_key="t"), StepCounter(max_steps=4)))
    r = env.rollout(10, break_when_any_done=False)
    assert tuple(r["t_reset"].shape) == (3, 10)
    assert (arr(r["t_reset"]) > 0).tolist() == [[k % 4 == 0 for k in range(10)]] * 3
    with pytest.raises(TypeError, match=r"Expected three out_keys. Got out_keys=\['a'\]"):
        Timer(out_keys=["a"])
    with pytest.raises(NotImplementedError, match="class Timer cannot be executed without a parent environment"):
        Compose(Timer())(TensorDict())


def test_conditional_skip_matches_torchrl():
    """Recorded from torchrl 0.14.1: the same env, seed and alternating actions (those > 0 skipped)."""
    env = TransformedEnv(pendulum(), Compose(StepCounter(step_count_key="inner"),
                                             ConditionalSkip(cond=lambda td: td["action"] > 0)))
    env.set_seed(0)
    calls = []

    def policy(td):
        calls.append(None)
        return td.set("action", rlpipe.tensor([1.0 if len(calls) % 2 == 0 else -1.0]))

    r = env.rollout(6, policy)
    assert r["inner"].squeeze(-1).tolist() == [0, 1, 1, 2, 2, 3]
    assert r["next", "inner"].squeeze(-1).tolist() == [1, 1, 2, 2, 3, 3]
    np.testing.assert_allclose(r["next", "reward"].squeeze(-1).tolist(),
                               [-8.412810325622559, 0.0, -8.871868133544922, 0.0, -9.435791015625, 0.0], rtol=1e-6)
    np.testing.assert_allclose(arr(r["next", "observation"])[:, 0],
                               [-0.9816151857376099, -0.9816151857376099, -0.9937349557876587, -0.9937349557876587,
                                -0.9997949004173279, -0.9997949004173279], rtol=1e-6)
    check_env_specs(env)


def test_conditional_skip_errors():
    env = TransformedEnv(GymEnv("CartPole-v1", num_envs=2),
                         Compose(ConditionalSkip(cond=lambda td: rlpipe.tensor([True, False]))))
    env.reset()
    with pytest.raises(NotImplementedError, match=r"envs \[\[0\]\] skip this step and the others do not"):
        env.rollout(2)
    env.transform.pop()
    assert env.rollout(2)["next", "reward"].shape[:2] == (2, 2)  # still usable
    with pytest.raises(TypeError, match="cond must be a callable, got int"):
        ConditionalSkip(cond=3)
    with pytest.raises(NotImplementedError, match="class ConditionalSkip cannot be executed without a parent"):
        ConditionalSkip(cond=lambda td: True)(TensorDict())
    td = ConditionalSkip(cond=lambda td: td["x"] > 0)._inv_call(TensorDict({"x": rlpipe.tensor([1.0, -1.0])}, [2]))
    assert td["_step"].tolist() == [False, True]
