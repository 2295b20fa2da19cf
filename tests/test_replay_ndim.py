"""Replay storages with ndim > 1 (torchrl 0.14's ``LazyTensorStorage(..., ndim=2)``): a ``[B, T]``
batch is written time-first (``dim_extend = ndim - 1``), ``len()`` counts items, samplers draw
items, ``SliceSampler`` slices along time inside one lane. Expected values are worked out by hand
from the layout torchrl documents (storage ``[rows, B]``, rows written round-robin)."""
import numpy as np
import pytest

import rlpipe
from rlpipe.data import (LazyMemmapStorage, LazyTensorStorage, PrioritizedSampler, ReplayBuffer, SliceSampler,
                         TensorDictMaxValueWriter, TensorDictReplayBuffer)
from rlpipe.tensordict import TensorDict


def _batch(envs, steps, start=0):
    """``[envs, steps]``: obs = 100 * env + step, so any item tells where it came from."""
    obs = 100 * np.arange(envs)[:, None] + np.arange(start, start + steps)[None, :]
    return TensorDict({"obs": rlpipe.tensor(obs)}, [envs, steps])


def test_extend_is_time_first_and_len_counts_items():
    rb = ReplayBuffer(storage=LazyTensorStorage(10, ndim=2))
    index = rb.extend(_batch(4, 3))
    # 4 envs per row: max_size 10 rounds up to 3 rows of 4 = 12 items
    assert rb.storage.max_size == 12 and len(rb) == 12 and rb.storage.shape == (3, 4)
    assert rb.writer._cursor == 0  # 3 rows written into 3: back at row 0
    assert index.tolist()[:5] == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0]]
    assert rb[:]["obs"].tolist() == _batch(4, 3)["obs"].tolist()  # read back as written: [envs, T]
    assert rb.storage._storage["obs"][:, 1].tolist() == [100, 101, 102]  # time along dim 0, env 1


def test_rows_wrap_around():
    rb = ReplayBuffer(storage=LazyTensorStorage(6, ndim=2))
    rb.extend(_batch(2, 2))
    rb.extend(_batch(2, 2, start=2))  # rows 2, then 0
    assert rb.writer._cursor == 1 and len(rb) == 6
    assert rb.storage._storage["obs"][:, 0].tolist() == [3, 1, 2]
    assert rb[1]["obs"].tolist() == [103, 101, 102]  # env 1, storage rows in order


def test_index_and_write_items():
    rb = ReplayBuffer(storage=LazyTensorStorage(8, ndim=2))
    rb.extend(_batch(2, 4))
    rb[0, 1:3] = TensorDict({"obs": rlpipe.tensor([-1])}, [1])  # broadcast to the two items
    rb[:, 3] = TensorDict({"obs": rlpipe.tensor([-5, -6])}, [2])
    assert rb[:]["obs"].tolist() == [[0, -1, -1, -5], [100, 101, 102, -6]]
    assert rb.writer._cursor == 0  # in-place writes leave the cursor


def test_random_sample_index_points_at_the_items():
    rlpipe.manual_seed(0)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(12, ndim=2), batch_size=16)
    rb.extend(_batch(3, 4))
    sample = rb.sample()
    t, env = sample["index"][:, 0].tolist(), sample["index"][:, 1].tolist()
    assert sample["obs"].tolist() == [100 * e + s for s, e in zip(t, env)]


def test_slice_sampler_slices_along_time_in_one_lane():
    rlpipe.manual_seed(0)
    data = _batch(3, 10)
    data["traj"] = rlpipe.tensor(np.arange(3)[:, None].repeat(10, 1))
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(30, ndim=2),
                                sampler=SliceSampler(slice_len=4, traj_key="traj"), batch_size=12)
    rb.extend(data)
    for _ in range(5):
        obs = rb.sample()["obs"].reshape(3, 4).tolist()
        for piece in obs:
            assert piece == list(range(piece[0], piece[0] + 4))  # consecutive steps of one env
            assert piece[0] % 100 <= 6


def test_update_priority_takes_coordinates():
    rb = ReplayBuffer(storage=LazyTensorStorage(4, ndim=2), sampler=PrioritizedSampler(4, alpha=1.0, beta=1.0))
    rb.extend(_batch(2, 2))
    rb.update_priority(rlpipe.tensor([[1, 1]]), rlpipe.tensor([1000.0]))  # time 1, env 1: obs 101
    rlpipe.manual_seed(0)
    assert (rb.sample(64)["obs"] == 101).float().mean().item() > 0.9


def test_state_dict_and_memmap_reopen_keep_the_layout(tmp_path):
    rb = ReplayBuffer(storage=LazyTensorStorage(6, ndim=2))
    rb.extend(_batch(2, 3))
    other = ReplayBuffer(storage=LazyTensorStorage(6, ndim=2))
    other.load_state_dict(rb.state_dict())
    assert other.storage.shape == (3, 2) and other[:]["obs"].tolist() == rb[:]["obs"].tolist()
    storage = LazyMemmapStorage(6, ndim=2, scratch_dir=tmp_path / "s")
    ReplayBuffer(storage=storage).extend(_batch(2, 3))
    reopened = LazyMemmapStorage(6, ndim=2, scratch_dir=tmp_path / "s")
    assert reopened.shape == (3, 2) and reopened[2]["obs"].tolist() == [2, 102]
    with pytest.raises(ValueError, match="holds a storage with ndim=2, this storage has ndim=1"):
        LazyMemmapStorage(6, scratch_dir=tmp_path / "s")


def test_bad_inputs_name_the_problem_and_leave_the_buffer_usable():
    rb = ReplayBuffer(storage=LazyTensorStorage(8, ndim=2))
    rb.extend(_batch(2, 2))
    with pytest.raises(ValueError, match=r"holds rows of \[2\] items .* got data of shape \[2, 3\]"):
        rb.extend(_batch(3, 2))  # 3 envs: rows of 3 (time-first [2, 3])
    one_dim = TensorDict({"obs": rlpipe.arange(4)}, [4])
    with pytest.raises(ValueError, match=r"extend: dim_extend=1 needs data with at least 2 batch dimensions, got "
                                         r"shape \[4\]"):
        rb.extend(one_dim)
    with pytest.raises(ValueError, match=r"extend: a storage with ndim=2 needs data with at least 2 batch "
                                         r"dimensions, got shape \[4\]"):
        ReplayBuffer(storage=LazyTensorStorage(8, ndim=2), dim_extend=0).extend(one_dim)
    with pytest.raises(ValueError, match=r"extend: a storage with ndim=2 needs data with 2 non-empty batch "
                                         r"dimensions .* got items per row \[0\]"):
        ReplayBuffer(storage=LazyTensorStorage(8, ndim=2), dim_extend=0).extend(_batch(2, 0))
    assert len(rb) == 4 and rb.extend(_batch(2, 1)).shape == (2, 2)
    with pytest.raises(ValueError, match="dim_extend must be a positive value, got dim_extend=-1"):
        ReplayBuffer(storage=LazyTensorStorage(8, ndim=2), dim_extend=-1)
    with pytest.raises(ValueError, match="TensorDictMaxValueWriter is not compatible with storages with more than "
                                         "one dimension"):
        ReplayBuffer(storage=LazyTensorStorage(8, ndim=2), writer=TensorDictMaxValueWriter())
    with pytest.raises(IndexError, match=r"does not fit the buffer's shape \[2, 3\]"):
        rb[5]


def test_pytree_items_come_back_as_the_same_tree():
    # torchrl's pytree storages: a dict/tuple/list of tensors is one item per leading row
    tree = {"x": (rlpipe.arange(6).reshape(3, 2), rlpipe.ones(3, 4)), "y": [{"z": rlpipe.arange(3)}, rlpipe.zeros(3)]}
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
    rb.extend(tree)
    back = rb[1:]
    assert isinstance(back["x"], tuple) and isinstance(back["y"], list) and isinstance(back["y"][0], dict)
    assert back["x"][0].tolist() == [[2, 3], [4, 5]] and back["y"][0]["z"].tolist() == [1, 2]
    wide = ReplayBuffer(storage=LazyTensorStorage(12, ndim=2))
    wide.extend({"a": rlpipe.arange(6).reshape(2, 3)})  # [envs, T], time-first inside
    assert len(wide) == 6 and wide[:]["a"].tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError, match=r"a tensor storage holds trees of tensors only, got leaves of type \['str'\]"):
        ReplayBuffer(storage=LazyTensorStorage(10)).extend({"a": rlpipe.zeros(2), "b": "text"})


def test_priority_key_gives_one_priority_per_item():
    from rlpipe.data import TensorDictPrioritizedReplayBuffer
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(4, ndim=2), batch_size=2,
                                           priority_key="p")
    rb.extend(TensorDict({"p": rlpipe.tensor([[1.0, 2.0], [3.0, 4.0]])}, [2, 2]))  # [envs, T]
    # time-first inside: item (t, env) at 2 * t + env holds p[env][t]
    assert [rb.sampler._sum_tree[i] for i in range(4)] == pytest.approx([1.0, 3.0, 2.0, 4.0])  # + eps
    sample = rb.sample()
    sample["p"] = rlpipe.full((2,), 9.0)
    rb.update_tensordict_priority(sample)
    t, env = sample["index"][:, 0].tolist(), sample["index"][:, 1].tolist()
    assert all(rb.sampler._sum_tree[2 * a + b] == pytest.approx(9.0) for a, b in zip(t, env))
