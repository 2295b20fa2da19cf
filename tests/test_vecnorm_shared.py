"""VecNorm / VecNormV2 statistics shared between processes: ``shared_td``/``shared_data``,
``VecNorm.build_td_for_shared_vecnorm`` and ``EnvCreator`` (torchrl 0.14.1's semantics)."""
import copy
import multiprocessing as mp

import numpy as np
import pytest

import rlpipe
from rlpipe.envs import EnvCreator, GymEnv, ParallelEnv, SerialEnv, TransformedEnv, VecNorm, VecNormV2
from rlpipe.tensordict import TensorDict

fork_only = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="shared statistics need fork")


def pendulum(cls=VecNorm, decay=0.99):
    return TransformedEnv(GymEnv("Pendulum-v1"), cls(in_keys=["observation"], out_keys=["obs_norm"], decay=decay))


def stats(env_or_creator):
    """The VecNorm statistics (torchrl's ``_extra_state`` layout), as arrays."""
    return {k: v.numpy().copy() for k, v in env_or_creator.state_dict()["_extra_state"].items()}


def observations_seen(rollout):
    """Every observation a rollout of non-batched workers showed its VecNorm: resets, then steps."""
    return np.concatenate([rollout["observation"][:, 0].numpy(), rollout["next", "observation"].numpy().reshape(-1, 3)])


@fork_only
def test_env_creator_workers_update_one_set_of_vecnorm_statistics():
    creator = EnvCreator(pendulum)  # (its first env was reset and stepped: count 1 + 0.99)
    np.testing.assert_allclose(stats(creator)["observation_count"], [1.99], rtol=1e-6)
    env = ParallelEnv(2, creator)
    env.set_seed(0)
    env.rollout(5)
    env.close()
    # 2 resets + 10 steps: 1.99 * 0.99**12 + sum(0.99**k, k < 12); torchrl 0.14.1 prints 13.1254 too
    want = 1.99 * 0.99 ** 12 + (1 - 0.99 ** 12) / 0.01
    np.testing.assert_allclose(stats(creator)["observation_count"], [want], rtol=1e-6)
    fresh = creator()  # a new env reads the statistics the workers wrote
    assert stats(fresh).keys() == {"observation_sum", "observation_ssq", "observation_count"}
    assert all(np.array_equal(stats(fresh)[k], v) for k, v in stats(creator).items())
    fresh.close()


@fork_only
@pytest.mark.parametrize("cls", [VecNorm, VecNormV2])
def test_env_creator_shared_sums_are_the_workers_observations(cls):
    creator = EnvCreator(pendulum, cls=cls, decay=1.0)
    before = stats(creator)
    env = ParallelEnv(2, creator)
    env.set_seed(1)
    seen = observations_seen(env.rollout(4))
    env.close()
    after = stats(creator)
    if cls is VecNorm:  # decay 1: plain sums, whatever order the workers wrote them in
        np.testing.assert_allclose(after["observation_sum"] - before["observation_sum"], seen.sum(0),
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(after["observation_ssq"] - before["observation_ssq"],
                                   (seen ** 2).sum(0), rtol=1e-4, atol=1e-4)
    else:  # decay 1: the running mean of every value, 2 of the first env + 2 resets + 8 steps
        assert int(after["count.-|-.observation"]) == 12
        np.testing.assert_allclose(after["loc.-|-.observation"] * 12 - before["loc.-|-.observation"] * 2,
                                   seen.sum(0), rtol=1e-4, atol=1e-4)


@fork_only
def test_torchrl_envs_tutorial_zeroes_the_shared_statistics_through_a_tensordict():
    """torchrl's torchrl_envs tutorial: ``sd = TensorDict(make_env.state_dict()); sd *= 0``, then the
    workers' updates are counted from zero (3 resets and 15 steps, decay 1)."""
    make_env = EnvCreator(lambda: TransformedEnv(GymEnv("CartPole-v1"), VecNorm(decay=1.0)))
    env = ParallelEnv(3, make_env)
    sd = TensorDict(make_env.state_dict())
    sd *= 0
    assert make_env.state_dict()["_extra_state"]["observation_count"].tolist() == [0.0]
    env.rollout(max_steps=5)
    env.close()
    state = stats(make_env)
    assert state["observation_count"].tolist() == [18.0] and state["reward_count"].tolist() == [15.0]
    assert state["reward_sum"].tolist() == [15.0] and state["reward_ssq"].tolist() == [15.0]  # CartPole pays 1


def test_env_creator_load_state_dict_writes_the_shared_statistics_in_place():
    creator = EnvCreator(pendulum)
    one, two = creator(), creator()
    creator.load_state_dict({"_extra_state": {"observation_count": rlpipe.tensor([7.0])}})
    assert stats(one)["observation_count"].tolist() == [7.0]
    one.rollout(1)  # one reset and one step: 7 * 0.99**2 + 0.99 + 1
    np.testing.assert_allclose(stats(two)["observation_count"], [7 * 0.99 ** 2 + 1.99], rtol=1e-6)
    assert one.transform.lock is two.transform.lock  # the first env's lock, as torchrl shares it
    expected = "unexpected keys \\['bogus'\\] \\(expected among \\['_extra_state.observation_count'"
    with pytest.raises(KeyError, match=expected):
        creator.load_state_dict({"bogus": rlpipe.ones(1)})
    assert stats(creator)["observation_count"].tolist() == pytest.approx([7 * 0.99 ** 2 + 1.99])
    one.close(), two.close()


def test_unshared_creator_and_plain_load_state_dict_copy():
    creator = EnvCreator(pendulum, share_memory=False)
    assert not any(v.is_shared() for v in creator.state_dict()["_extra_state"].values())
    env = creator()
    env.rollout(1)
    assert stats(env)["observation_count"] != pytest.approx(stats(creator)["observation_count"])
    env.close()


@fork_only
def test_shared_td_from_build_td_for_shared_vecnorm_across_processes():
    base = GymEnv("Pendulum-v1")
    td = VecNorm.build_td_for_shared_vecnorm(base, ["observation", "reward"])
    assert td.is_shared() and sorted(td.keys()) == ["observation_count", "observation_ssq", "observation_sum",
                                                    "reward_count", "reward_ssq", "reward_sum"]
    assert td["observation_sum"].shape == (3,) and td["reward_count"].tolist() == [0.0]
    on_disk = VecNorm.build_td_for_shared_vecnorm(base, ["observation"], memmap=True)
    assert on_disk.is_memmap() and VecNorm(["observation"], shared_td=on_disk)._count[("observation",)].tolist() == [0]
    lock = mp.Lock()  # one lock for the workers' updates (each VecNorm would make its own)

    def make():
        return TransformedEnv(GymEnv("Pendulum-v1"), VecNorm(shared_td=td, lock=lock, out_keys=["o", "reward"],
                                                             decay=1.0))
    par = ParallelEnv(2, make)  # (the workers inherit td's shared memory)
    par.set_seed(3)
    seen = observations_seen(par.rollout(3))
    par.close()
    assert td["observation_count"].tolist() == [8.0] and td["reward_count"].tolist() == [6.0]
    np.testing.assert_allclose(td["observation_sum"].numpy(), seen.sum(0), rtol=1e-5, atol=1e-5)
    base.close()


def test_two_vecnorms_on_one_shared_td_share_their_sums():
    td = TensorDict({"x_sum": rlpipe.zeros(1), "x_ssq": rlpipe.zeros(1), "x_count": rlpipe.zeros(1)}, [])
    td.share_memory_()
    first, second = VecNorm(["x"], shared_td=td, decay=1.0), VecNorm(["x"], shared_td=td, decay=1.0)
    first(TensorDict({"x": rlpipe.tensor([2.0])}, []))
    out = second(TensorDict({"x": rlpipe.tensor([4.0])}, []))
    assert td["x_sum"].tolist() == [6.0] and td["x_ssq"].tolist() == [20.0] and td["x_count"].tolist() == [2.0]
    np.testing.assert_allclose(out["x"].numpy(), [1.0], rtol=1e-5)  # (4 - 3) / sqrt(10 - 9)
    shared = TensorDict({"loc": {"x": rlpipe.zeros(1)}, "var": {"x": rlpipe.zeros(1)},
                         "count": {"x": rlpipe.zeros((), dtype=rlpipe.int64)}}, []).share_memory_()
    a, b = VecNormV2(["x"], shared_data=shared, decay=1.0), VecNormV2(["x"], shared_data=shared, decay=1.0)
    a(TensorDict({"x": rlpipe.tensor([2.0])}, []))
    b(TensorDict({"x": rlpipe.tensor([4.0])}, []))
    assert shared["loc", "x"].tolist() == [3.0] and shared["var", "x"].tolist() == [10.0]
    assert int(shared["count", "x"]) == 2 and a.initialized


def test_vecnorm_copies_get_locks_of_their_own():
    t = VecNorm(["x"], decay=1.0)
    t(TensorDict({"x": rlpipe.tensor([2.0])}, []))
    clone = copy.deepcopy(t)
    assert clone.lock is not t.lock and clone.lock.acquire(timeout=1)
    clone.lock.release()
    clone(TensorDict({"x": rlpipe.tensor([4.0])}, []))
    assert t.state_dict()["_extra_state"]["x_sum"].tolist() == [2.0]  # the copy's statistics are its own


def test_shared_statistics_errors():
    with pytest.raises(RuntimeError, match="shared_td must be either in shared memory"):
        VecNorm(["x"], shared_td=TensorDict({"x_sum": rlpipe.zeros(1)}, []))
    partial = TensorDict({"x_sum": rlpipe.zeros(1), "x_ssq": rlpipe.zeros(1)}, []).share_memory_()
    with pytest.raises(KeyError, match="key 'x' not present in the shared tensordict"):
        VecNorm(["x"], shared_td=partial)
    with pytest.raises(KeyError, match="lacks the in keys \\['y'\\]"):
        VecNormV2(["y"], shared_data=TensorDict({"loc": {"x": rlpipe.zeros(1)}, "var": {"x": rlpipe.zeros(1)},
                                                 "count": {"x": rlpipe.zeros(())}}, []))
    batched = SerialEnv(2, lambda: GymEnv("Pendulum-v1"))
    with pytest.raises(RuntimeError, match="non-batched environments. Got batch_size=\\[2\\]"):
        VecNorm.build_td_for_shared_vecnorm(batched)
    base = GymEnv("Pendulum-v1")
    with pytest.raises(KeyError, match="no observation or reward 'pixels'"):
        VecNorm.build_td_for_shared_vecnorm(base, ["pixels"])
    env = pendulum()
    with pytest.raises(KeyError, match="unexpected keys \\['other.x'\\]"):
        env.load_state_dict({"other.x": rlpipe.ones(1)})
    with pytest.raises(KeyError, match="unexpected statistic 'reward_sum'"):
        env.load_state_dict({"_extra_state": {"reward_sum": rlpipe.ones(1)}})
    env.rollout(2)  # still usable
    with pytest.raises(KeyError, match="missing key '_extra_state'"):
        env.load_state_dict({})
    v2 = VecNormV2(["x"])
    v2(TensorDict({"x": rlpipe.tensor([2.0])}, []))
    assert v2.state_dict()["initialized"].item() is True
    with pytest.raises(RuntimeError, match="void state-dict while the instance is initialized"):
        v2.load_state_dict({"_extra_state": {}})
    with pytest.raises(KeyError, match="unexpected keys \\['x'\\]"):
        base.load_state_dict({"x": rlpipe.ones(1)})
    assert base.state_dict() == {}
    env.close(), base.close()


def test_state_dict_before_data_warns_and_loads_as_torchrls():
    from rlpipe.envs import Compose
    composed = Compose(VecNorm(in_keys=["a", ("b", "c")], out_keys=["a_avg", ("b", "c_avg")], decay=1.0))
    with pytest.warns(UserWarning, match="Querying state_dict on an uninitialized"):
        empty = composed.state_dict()
    assert dict(empty) == {"transforms.0._extra_state": None} and composed[0]._td is None
    other = composed.clone()
    other.load_state_dict(empty)  # nothing to load, nothing learned: fine
    td = TensorDict({"a": rlpipe.tensor([1.0, 3.0]), ("b", "c"): rlpipe.tensor([2.0, 2.0])}, [2])
    other._step(td, td)
    with pytest.raises(KeyError, match="Could not find a tensordict in the state_dict."):
        other.load_state_dict(empty)
    state = other.state_dict()["transforms.0._extra_state"]
    assert sorted(state) == ["a_count", "a_ssq", "a_sum", "b-<.>-c_count", "b-<.>-c_ssq", "b-<.>-c_sum"]
    assert state["a_sum"].tolist() == 4.0 and state["b-<.>-c_ssq"].tolist() == 8.0  # 1 + 3, 2 * 2**2
    assert other[0]._td["b", "c_count"].tolist() == [2.0] and VecNorm.SEP == "-<.>-"
    v2 = VecNormV2(["x"])
    with pytest.warns(UserWarning, match="uninitialized"):
        sd = v2.state_dict()
    assert list(sd) == ["initialized", "_extra_state"] and sd["_extra_state"] == {}
    assert sd["initialized"].item() is False


@fork_only
def test_env_creator_workers_share_one_traj_counter():
    from rlpipe.envs import TrajCounter
    creator = EnvCreator(lambda: TransformedEnv(GymEnv("CartPole-v1"), TrajCounter()))
    env = ParallelEnv(2, creator)
    env.set_seed(0)
    numbers = env.rollout(3)["traj_count"].squeeze(-1).tolist()
    env.close()
    # torchrl 0.14.1 prints [[1, 1, 1], [2, 2, 2]]: the first env's reset took 0, the workers count on from one counter
    assert sorted(row[0] for row in numbers) == [1, 2] and all(len(set(row)) == 1 for row in numbers)
    assert int(creator.state_dict()["traj_count"]) == 3
