"""The small torchrl/tensordict/torch names that torchrl's tutorials reach for: ``GymEnv.from_pixels``,
``torch.has_cuda``, the files behind a memmap storage's tensors, ``tensordict.from_module``.

Expectations are hand-derived or recorded from torchrl 0.14.1 / tensordict 0.14.3 / torch 2.13.
"""
import os

import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.data import LazyMemmapStorage, LazyTensorStorage, ReplayBuffer
from rlpipe.envs import GymEnv, GymWrapper
from rlpipe.tensordict import MemoryMappedTensor, TensorDict, from_module, from_modules


class _Screen(gym.Env):
    """An env whose observation is an RGB image (torchrl counts it as "from pixels")."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, (4, 5, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        return np.zeros((4, 5, 3), np.uint8), {}

    def step(self, action):
        return np.ones((4, 5, 3), np.uint8), 0.0, False, False, {}


def test_gym_env_from_pixels_attributes_as_torchrl():
    """torchrl 0.14.1: CartPole gives from_pixels False, pixels_only True; asked for pixels with
    pixels_only=False, True and False; an image observation is from pixels by itself."""
    env = GymEnv("CartPole-v1")
    assert (env.from_pixels, env.pixels_only) == (False, True)
    env.close()
    env = GymEnv("CartPole-v1", from_pixels=True, pixels_only=False)
    assert (env.from_pixels, env.pixels_only) == (True, False)
    env.close()
    assert GymWrapper(_Screen()).from_pixels is True


def test_deprecated_has_cuda_flags_warn_and_answer():
    with pytest.warns(UserWarning, match="'has_cuda' is deprecated, please use 'rlpipe.cuda.is_available"):
        assert rlpipe.has_cuda is rlpipe.cuda.is_available()
    with pytest.warns(UserWarning, match="has_mps"):
        assert rlpipe.has_mps is False
    with pytest.warns(UserWarning, match="has_cudnn"):
        assert rlpipe.has_cudnn is False


def test_unknown_module_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'rlpipe' has no attribute 'has_tpu'"):
        rlpipe.has_tpu  # noqa: B018
    assert not hasattr(rlpipe, "no_such_name")


def _extended_memmap_buffer(tmp_path):
    rb = ReplayBuffer(storage=LazyMemmapStorage(6, scratch_dir=tmp_path))
    rb.extend(TensorDict(a=rlpipe.arange(3), b=TensorDict(c=rlpipe.ones(3, 2), batch_size=[3]), batch_size=[3]))
    return rb


def test_memmap_storage_tensors_name_their_files(tmp_path):
    """rb._storage._storage["a"].filename (rb_tutorial): a MemoryMappedTensor over the file that holds
    the column; the file's content is what was written."""
    storage = _extended_memmap_buffer(tmp_path)._storage._storage
    a, c = storage["a"], storage["b", "c"]
    assert isinstance(a, MemoryMappedTensor) and isinstance(c, MemoryMappedTensor)
    assert os.path.dirname(a.filename) == str(tmp_path) and a.filename != c.filename
    np.testing.assert_array_equal(np.load(a.filename), [0, 1, 2, 0, 0, 0])
    np.testing.assert_array_equal(np.load(c.filename)[:4], [[1, 1], [1, 1], [1, 1], [0, 0]])


def test_memmap_storage_tensors_write_through(tmp_path):
    """The named tensors are the storage itself: a write through one is sampled back."""
    rb = _extended_memmap_buffer(tmp_path)
    rb._storage._storage["a"][1] = 40
    assert rb[1]["a"].item() == 40
    assert np.load(rb._storage._storage["a"].filename)[1] == 40


def test_memmap_storage_reopened_names_the_same_files(tmp_path):
    first = _extended_memmap_buffer(tmp_path)._storage._storage["b", "c"].filename
    again = LazyMemmapStorage(6, scratch_dir=tmp_path)
    assert again._storage["b", "c"].filename == first


def test_memmap_tensor_storage_names_its_file(tmp_path):
    rb = ReplayBuffer(storage=LazyMemmapStorage(4, scratch_dir=tmp_path))
    rb.extend(rlpipe.tensor([1.5, 2.5]))
    np.testing.assert_array_equal(np.load(rb._storage._storage.filename), [1.5, 2.5, 0, 0])


def test_in_memory_storage_tensors_have_no_file():
    rb = ReplayBuffer(storage=LazyTensorStorage(4))
    rb.extend(TensorDict(a=rlpipe.arange(2), batch_size=[2]))
    assert not isinstance(rb._storage._storage["a"], MemoryMappedTensor)


def test_tensordict_from_module_function_is_locked_and_holds_the_parameters():
    """tensordict.from_module locks by default (TensorDict.from_module does not)."""
    net = nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 1))
    params = from_module(net)
    assert params.is_locked and not TensorDict.from_module(net).is_locked
    assert params["0", "weight"] is net[0].weight and params["2", "bias"] is net[2].bias
    assert sorted(params.keys(True, True)) == [("0", "bias"), ("0", "weight"), ("2", "bias"), ("2", "weight")]
    assert not from_module(net, lock=False).is_locked


def test_tensordict_from_modules_function_stacks():
    nets = [nn.Linear(3, 2) for _ in range(4)]
    params = from_modules(*nets)
    assert params.batch_size == (4,) and params["weight"].shape == (4, 2, 3)
    assert rlpipe.equal(params["bias"][2], nets[2].bias.detach())


def test_from_module_as_module_gives_the_module_parameters_in_a_tensordict_params():
    from rlpipe.tensordict import TensorDictParams
    linear = nn.Linear(1, 1)
    params = from_module(linear, as_module=True)
    assert isinstance(params, TensorDictParams)
    assert params["weight"] is linear.weight and params["bias"] is linear.bias


@pytest.fixture
def fresh_timeit(monkeypatch):
    from rlpipe._utils import timeit
    monkeypatch.setattr(timeit, "_REG", {})
    monkeypatch.setattr(timeit, "_MARKS", {})
    return timeit


def test_timeit_records_mean_and_total_per_name(fresh_timeit, monkeypatch):
    """A fake clock: blocks of 2 s and 4 s under one name give mean 3 s, total 6 s (torchrl's registry)."""
    timeit = fresh_timeit
    clock = iter([10.0, 12.0, 20.0, 24.0, 30.0, 30.5])
    monkeypatch.setattr("rlpipe._utils.time.perf_counter", lambda: next(clock))
    with timeit("step"):
        pass

    @timeit("step")
    def work():
        return 7

    assert work() == 7
    with timeit("other") as timer:
        pass
    assert timer.t0 == 30.0
    assert timeit.todict() == {"step": 3.0, "other": 0.5}
    assert timeit.todict(percall=False, prefix="time") == {"time/step": 6.0, "time/other": 0.5}
    assert timeit.print() == ("other took 500.0000 msec (total =  0.5000 sec since last reset).\n"
                              "step took 3000.0000 msec (total =  6.0000 sec since last reset).")
    timeit.erase()
    assert timeit.todict() == {"step": 0.0, "other": 0.0}


def test_timeit_marks_and_printevery(fresh_timeit, monkeypatch):
    timeit = fresh_timeit
    clock = iter([1.0, 1.25])
    monkeypatch.setattr("rlpipe._utils.time.perf_counter", lambda: next(clock))
    timeit.mark_start("io")
    timeit.mark_end("io")
    assert timeit.todict() == {"io": 0.25}
    printed = []
    monkeypatch.setattr(timeit, "print", classmethod(lambda cls, prefix=None: printed.append(prefix)))
    monkeypatch.setattr(timeit, "_printevery_count", 0)
    for _ in range(10):
        timeit.printevery(num_prints=2, total_count=10, prefix="p")
    assert printed == ["p", "p"]  # calls 0 and 5


def test_timeit_bad_uses_name_the_timer(fresh_timeit):
    timeit = fresh_timeit
    with pytest.raises(RuntimeError, match=r"timeit\('never'\).elapsed\(\): the timer was never started"):
        timeit("never").elapsed()
    with pytest.raises(KeyError, match=r"mark_end\('nope'\): no mark_start\('nope'\)"):
        timeit.mark_end("nope")
    assert rlpipe.timeit is timeit


def test_gym_wrapper_forwards_missing_attributes_to_the_wrapped_env():
    """torchrl_envs tutorial: env._env.foo = ...; env.foo (torchrl's wrappers forward attributes)."""
    env = GymEnv("Pendulum-v1")
    env._env.foo = "bar"
    env._env.get_something = lambda r: r + 1
    assert env.foo == "bar" and env.get_something(1) == 2
    assert env.spec.id == "Pendulum-v1"  # Gymnasium's own attribute
    with pytest.raises(AttributeError, match="'GymEnv' object and its wrapped env have no attribute 'nothing'"):
        env.nothing  # noqa: B018
    with pytest.raises(AttributeError, match="'GymEnv' object has no attribute '_private'"):
        env._private  # noqa: B018
    env.close()


def test_observation_norm_init_stats_with_dims_of_both_signs():
    """torchrl's DQN tutorial: cat_dim=0 with reduce_dim=[-1, -2, -4] (-4 is dim 0 of its 4-dim data)."""
    from rlpipe.envs import ObservationNorm, TransformedEnv
    env = TransformedEnv(GymEnv("Pendulum-v1"), ObservationNorm(in_keys=["observation"]))
    env.transform.init_stats(num_iter=20, cat_dim=0, reduce_dim=[-2])  # rollouts [T, 3]: -2 is dim 0
    assert tuple(env.transform.loc.shape) == (3,)
    other = TransformedEnv(GymEnv("Pendulum-v1"), ObservationNorm(in_keys=["observation"]))
    with pytest.raises(ValueError, match=r"cat_dim must be part of or equal to reduce_dim, got cat_dim=0 and "
                                         r"reduce_dim \[1\] \(the data has 2 dims\)"):
        other.transform.init_stats(num_iter=20, cat_dim=0, reduce_dim=[-1])
    assert not other.transform.initialized  # still usable
