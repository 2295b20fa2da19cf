"""SliceSampler / SliceSamplerWithoutReplacement, checked by brute force: every slice lies inside
one trajectory and is contiguous, has the asked length, and a pass without replacement covers
every long-enough trajectory exactly once."""
import numpy as np
import pytest

import rlpipe
from rlpipe.data import (LazyTensorStorage, ReplayBuffer, SliceSampler, SliceSamplerWithoutReplacement,
                         TensorDictReplayBuffer)
from rlpipe.tensordict import TensorDict

LENGTHS = [5, 1, 7, 3, 9, 4]  # trajectory lengths, stored one after the other


def _episodes(lengths=LENGTHS, done_key=True):
    traj = np.repeat(np.arange(len(lengths)), lengths)
    done = np.zeros((len(traj), 1), dtype=bool)
    done[np.cumsum(lengths) - 1] = True
    td = TensorDict({"obs": rlpipe.arange(len(traj)), "traj": rlpipe.tensor(traj)}, [len(traj)])
    if done_key:
        td.set(("next", "done"), rlpipe.tensor(done))
    return td, traj


def _slices(sample, count):
    obs = sample["obs"].numpy()
    return np.split(obs, count) if len(obs) % count == 0 else None


@pytest.mark.parametrize("by", ["done", "traj_key"])
def test_every_slice_is_contiguous_inside_one_trajectory(by):
    data, traj = _episodes(done_key=by == "done")
    sampler = SliceSampler(num_slices=4, **({"traj_key": "traj"} if by == "traj_key" else {}))
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), sampler=sampler, batch_size=12)
    rb.extend(data)
    rlpipe.manual_seed(0)
    starts = set()
    for _ in range(200):
        sample = rb.sample()
        assert sample.batch_size == rlpipe.Size([12])
        for piece in _slices(sample, 4):
            assert len(piece) == 3 and (np.diff(piece) == 1).all()
            assert len(set(traj[piece])) == 1 and LENGTHS[traj[piece[0]]] >= 3
            starts.add(int(piece[0]))
        truncated = sample["next", "truncated"].numpy().reshape(4, 3)
        assert truncated[:, -1].all() and not truncated[:, :-1].any()
        assert (sample["next", "done"].numpy().reshape(4, 3)[:, -1]).all()
    # every start that leaves room for 3 steps inside a trajectory of length >= 3 shows up
    offsets = np.concatenate([[0], np.cumsum(LENGTHS)[:-1]])
    expected = {int(o + k) for o, n in zip(offsets, LENGTHS) for k in range(n - 2)}
    assert starts == expected


def test_slice_len_and_short_trajectories():
    data, traj = _episodes()
    rb = ReplayBuffer(storage=LazyTensorStorage(100), sampler=SliceSampler(slice_len=6, strict_length=False))
    rb.extend(data)
    rlpipe.manual_seed(1)
    possible = {min(a, 6) + min(b, 6) for a in LENGTHS for b in LENGTHS}
    sizes = {len(rb.sample(12, return_info=True)[1]["index"].numpy()) for _ in range(300)}
    assert sizes <= possible and 12 in sizes and 2 in sizes  # two 1-step trajectories: 2 items
    with pytest.raises(RuntimeError, match="Did not find a single trajectory with sufficient length"):
        strict = ReplayBuffer(storage=LazyTensorStorage(100), sampler=SliceSampler(slice_len=10))
        strict.extend(data)
        strict.sample(20)


def test_batch_size_must_divide_and_arguments_are_checked():
    data, _ = _episodes()
    rb = ReplayBuffer(storage=LazyTensorStorage(100), sampler=SliceSampler(num_slices=4))
    rb.extend(data)
    with pytest.raises(RuntimeError, match="batch_size=10 and num_slices=4"):
        rb.sample(10)
    with pytest.raises(TypeError, match="Either num_slices or slice_len"):
        SliceSampler()
    with pytest.raises(TypeError, match="Either num_slices or slice_len"):
        SliceSampler(num_slices=2, slice_len=2)
    with pytest.raises(RuntimeError, match="requires `cache_values`"):
        SliceSampler(num_slices=2, ends=rlpipe.zeros(4, dtype=rlpipe.bool))
    with pytest.raises(NotImplementedError, match="fragmented"):
        SliceSampler(num_slices=2, fragmented=True)
    with pytest.raises(ValueError, match="pad_output=True is incompatible with strict_length=True"):
        SliceSampler(num_slices=2, pad_output=True)


def test_static_ends_and_the_newest_item_ends_a_trajectory():
    td = TensorDict({"obs": rlpipe.arange(10)}, [10])
    ends = rlpipe.tensor([False, False, True, False, False, False, False, False, False, True])
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SliceSampler(num_slices=2, ends=ends, cache_values=True))
    rb.extend(td)
    for _ in range(50):
        obs = rb.sample(6)["obs"].numpy().reshape(2, 3)
        assert all(row[0] >= 3 or row[-1] <= 2 for row in obs)  # never across the end at 2
    # no done entry set at all: the last written item closes the only trajectory
    open_ended = TensorDict({"obs": rlpipe.arange(6), ("next", "done"): rlpipe.zeros(6, 1, dtype=rlpipe.bool)}, [6])
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SliceSampler(num_slices=1))
    rb.extend(open_ended)
    assert sorted({int(rb.sample(6)["obs"].numpy()[0]) for _ in range(20)}) == [0]


@pytest.mark.parametrize("drop_last", [False, True])
def test_without_replacement_covers_each_trajectory_once_per_pass(drop_last):
    data, traj = _episodes()
    eligible = [i for i, n in enumerate(LENGTHS) if n >= 2]  # 5 trajectories of length >= 2
    sampler = SliceSamplerWithoutReplacement(num_slices=2, drop_last=drop_last)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), sampler=sampler, batch_size=4)
    rb.extend(data)
    rlpipe.manual_seed(3)
    for _ in range(3):  # three passes
        seen = []
        while True:
            sample = rb.sample()
            obs = sample["obs"].numpy().reshape(-1, 2)
            assert all(len(set(traj[row])) == 1 and row[1] == row[0] + 1 for row in obs)
            seen.extend(int(traj[row[0]]) for row in obs)
            if sampler.ran_out:
                break
        if drop_last:
            assert len(seen) == 4 and len(set(seen)) == 4 and set(seen) <= set(eligible)
        else:
            assert sorted(seen) == eligible  # the last sample holds the one left over
