"""torchrl 0.14 names the replay-buffer test suites import: trajectory boundaries, TensorStorage,
schedulers, PrioritizedSliceSampler, pytree helpers, and the names rlpipe does not implement
(which raise NotImplementedError). Expected values were measured on torchrl 0.14.1 / torch 2.13."""
import collections

import numpy as np
import pytest

import rlpipe as r
from rlpipe.data import (CompressedListStorage, ConsumingSampler, LazyStackStorage, PrioritizedSampler,
                         PrioritizedSliceSampler, ReplayBufferEnsemble, Sequence, TED2Flat, TensorDictReplayBuffer,
                         find_start_stop_traj)
from rlpipe.data.replay_buffers.sample_units import Transition
from rlpipe.data.replay_buffers.scheduler import LinearScheduler, SchedulerList, StepScheduler
from rlpipe.data.replay_buffers.storages import LazyTensorStorage, TensorStorage
from rlpipe.data.replay_buffers.utils import _boundary_distances_1d
from rlpipe.testing import get_default_devices
from rlpipe.utils._pytree import tree_flatten, tree_map, tree_unflatten


def _lists(out):
    return [x.tolist() for x in out]


def test_find_start_stop_traj_wraps_around_a_full_storage():  # torchrl's docstring example
    end = r.zeros(10, dtype=r.bool)
    end[2] = end[7] = True
    assert _lists(find_start_stop_traj(end=end, at_capacity=True, cursor=4)) == [[[8], [3], [5]], [[2], [4], [7]],
                                                                               [5, 2, 3]]
    ids = r.tensor([5, 5, 5, 0, 0, 1, 1, 1, 5, 5])
    assert _lists(find_start_stop_traj(trajectory=ids, at_capacity=True)) == [[[8], [3], [5]], [[2], [4], [7]],
                                                                              [5, 2, 3]]
    assert _lists(find_start_stop_traj(end=end, at_capacity=False)) == [[[0], [3], [8]], [[2], [7], [9]], [3, 5, 2]]


def test_find_start_stop_traj_lanes():
    end = r.zeros(6, 2, dtype=r.bool)
    end[1, 0] = end[4, 0] = end[3, 1] = True
    assert _lists(find_start_stop_traj(end=end, at_capacity=True, cursor=2)) == [
        [[5, 0], [2, 0], [3, 0], [4, 1], [3, 1]], [[1, 0], [2, 0], [4, 0], [2, 1], [3, 1]], [3, 1, 2, 5, 1]]


def test_find_start_stop_traj_bad_inputs():
    with pytest.raises(TypeError, match="Exactly one of `trajectory` and `end`"):
        find_start_stop_traj(at_capacity=False)
    with pytest.raises(RuntimeError, match="empty"):
        find_start_stop_traj(end=r.zeros(0, dtype=r.bool), at_capacity=False)
    with pytest.raises(RuntimeError, match="cursor should be an integer"):
        find_start_stop_traj(end=r.zeros(3, dtype=r.bool), at_capacity=True, cursor=1.5)


def test_boundary_distances_1d():
    out = _boundary_distances_1d(r.tensor([0, 3, 9]), r.tensor([8, 3, 5]), r.tensor([2, 4, 7]), 10)
    assert _lists(out) == [[2, 0, 1], [2, 1, 3]]


def test_unique_dim_and_bad_dim():
    values, inverse, counts = r.tensor([[1., 0.], [1., 0.], [0., 2.]]).unique(dim=1, return_inverse=True,
                                                                              return_counts=True)
    assert values.tolist() == [[0., 1.], [0., 1.], [2., 0.]] and inverse.tolist() == [1, 0]
    assert counts.tolist() == [1, 1]
    with pytest.raises(IndexError, match="Dimension out of range"):
        r.tensor([1, 2]).unique(dim=2)


def test_tensor_storage_starts_full_and_checks_arguments():
    storage = TensorStorage(r.arange(5) * 2)
    assert len(storage) == 5 and storage.get([1, 4]).tolist() == [2, 8]
    assert isinstance(LazyTensorStorage(3), TensorStorage)
    with pytest.raises(ValueError, match="Expected storage to be non-null"):
        TensorStorage(None)
    with pytest.raises(ValueError, match="The max-size and the storage shape mismatch"):
        TensorStorage(r.randn(3), max_size=4)


def test_schedulers():
    sampler = PrioritizedSampler(10, 0.7, 0.4)
    linear = LinearScheduler(sampler, "beta", 1.0, 3)
    seen = []
    for _ in range(4):
        linear.step()
        seen.append(sampler.beta)
    assert seen == pytest.approx([0.6, 0.8, 1.0, 1.0])
    both = SchedulerList([StepScheduler(sampler, "beta", 0.5, n_steps=2, max_value=0.9)])
    seen = []
    for _ in range(4):
        both.step()
        seen.append(sampler.beta)
    assert seen == pytest.approx([0.9, 0.45, 0.45, 0.225])
    with pytest.raises(ValueError, match="does not have an attribute gamma"):
        LinearScheduler(sampler, "gamma", 1.0, 3)
    with pytest.raises(ValueError, match="Invalid mode"):
        StepScheduler(sampler, "beta", mode="other")
    with pytest.raises(TypeError, match="only supports Sampler class"):
        LinearScheduler(object(), "beta", 1.0, 3)


def _episodes():
    done = r.zeros(20, 1, dtype=r.bool)
    done[[4, 9, 14, 19]] = True
    return r.TensorDict({"a": r.arange(20), ("next", "done"): done}, [20])


def test_prioritized_slice_sampler_slices_and_weights():
    sampler = PrioritizedSliceSampler(max_capacity=20, alpha=1.0, beta=1.0, num_slices=4)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=sampler, batch_size=12)
    rb.extend(_episodes())
    priority = np.ones(20)
    priority[[5]] = 9.0  # position 5 starts a 3-step slice inside the second episode
    rb.update_priority(r.arange(20), r.tensor(priority))
    r.manual_seed(0)
    counts = collections.Counter()
    for _ in range(200):
        s = rb.sample()
        a = s["a"].view(4, 3)
        assert ((a[:, 1:] - a[:, :-1]) == 1).all() and ((a // 5).unique(dim=1).shape[1] == 1)
        counts.update(a[:, 0].tolist())
        w = s["priority_weight"].view(4, 3)
        assert (w == w[:, :1]).all()
    # the 12 positions that can start 3 steps (3 per episode): position 5 has 9/20 of the mass
    assert set(counts) <= {0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17}
    assert counts[5] / 800 == pytest.approx(9 / 20, abs=0.05)


def test_unavailable_names_raise():
    for cls in (ConsumingSampler, LazyStackStorage, CompressedListStorage, ReplayBufferEnsemble, TED2Flat, Sequence):
        with pytest.raises(NotImplementedError, match=f"{cls.__name__} is not available in rlpipe"):
            cls()
    index, info = Transition().expand("i", {"k": 1}, None)
    assert index == "i" and info == {"k": 1}


def test_pytree_and_devices():
    point = collections.namedtuple("point", "x y")
    tree = {"a": [1, (2, 3)], "b": {"c": None, "d": point(4, 5)}, 30: 6}
    leaves, spec = tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5, 6] and tree_unflatten(leaves, spec) == tree
    assert tree_map(lambda x, y: x * y, tree, tree)["b"]["d"] == point(16, 25)
    with pytest.raises(ValueError, match="holds 6 items"):
        tree_unflatten([1], spec)
    assert get_default_devices() == [r.device("cpu")]


def test_slice_sampler_follows_a_trajectory_around_a_full_storage():
    from rlpipe.data import SliceSampler
    done = r.zeros(14, 1, dtype=r.bool)
    done[5] = True
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), sampler=SliceSampler(slice_len=8), batch_size=8)
    rb.extend(r.TensorDict({"a": r.arange(14), ("next", "done"): done}, [14]))
    # positions 6..9 hold a=6..9 and 0..3 hold a=10..13 (the newest): one 8-step trajectory
    for _ in range(5):
        sample = rb.sample()
        assert sample["a"].tolist() == list(range(6, 14))
        assert sample["index"].tolist() == [6, 7, 8, 9, 0, 1, 2, 3]
