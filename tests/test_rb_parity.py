"""Replay-buffer behaviour torchrl 0.14's own replay-buffer suites rely on (test_rb_core,
test_storages, test_samplers, test_prioritized). Expected values were read off torchrl 0.14.1
(the peer virtualenv) or worked out by hand; each test says which."""
import os
import warnings

import numpy as np
import pytest

import rlpipe
from rlpipe.data import (LazyMemmapStorage, LazyTensorStorage, ListStorage, RandomSampler, ReplayBuffer,
                         SamplerWithoutReplacement, TensorDictReplayBuffer)
from rlpipe.data.replay_buffers.storages import _MEMMAP_STORAGE_REGISTRY, TensorStorage
from rlpipe.tensordict import TensorDict


# ---- storages -------------------------------------------------------------------------------------
def test_extend_past_capacity_warns_and_keeps_the_last_rows():
    # torchrl 0.14.1: the rows kept are [3, 4, 2], cursor 2; its TensorStorage.set warns with this text
    rb = ReplayBuffer(storage=LazyTensorStorage(3))
    with pytest.warns(UserWarning, match="A cursor of length superior to the storage capacity was provided: 5 items"):
        rb.extend(rlpipe.arange(5))
    assert rb[:].tolist() == [3, 4, 2] and rb.writer._cursor == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rb.extend(rlpipe.arange(3))  # a batch that fits: no warning


def test_tensor_storage_exposes_its_whole_storage():
    storage = LazyTensorStorage(3)
    assert storage._storage is None
    storage.set(range(2), rlpipe.arange(2) + 5)
    assert storage._storage.shape == (3,) and storage._storage.tolist()[:2] == [5, 6]
    td_storage = LazyTensorStorage(4)
    td_storage.set(range(3), TensorDict({"a": rlpipe.arange(3)}, [3]))
    whole = td_storage._storage
    assert isinstance(whole, TensorDict) and whole.batch_size == (4,)
    assert whole[np.array([2, 0])]["a"].tolist() == [2, 0]


def test_init_allocates_from_one_item_without_writing():
    # torchrl 0.14.1: _init(td of batch [3]) on LazyTensorStorage(10) gives _storage [10, 3], len 0
    storage = LazyTensorStorage(10)
    storage._init(TensorDict({"a": rlpipe.zeros(3)}, [3]))
    assert storage._storage.shape == (10, 3) and len(storage) == 0
    with pytest.raises(RuntimeError, match="_init: this LazyTensorStorage is already initialized"):
        storage._init(TensorDict({"a": rlpipe.zeros(3)}, [3]))
    with pytest.raises(TypeError, match="_init: LazyTensorStorage stores TensorDicts or Tensors, got int"):
        LazyTensorStorage(2)._init(3)


def test_list_storage_set_takes_a_range_of_items():
    # torchrl 0.14.1: ListStorage(4).set(range(4), range(4)) holds 0..3
    storage = ListStorage(4)
    storage.set(range(4), range(4))
    assert len(storage) == 4 and storage.get(2) == 2 and storage.get([0, 1]) == [0, 1]
    with pytest.raises(TypeError, match="a ListStorage is extended with a list, a tuple, a range, or a"):
        storage.set(range(1), {"a": 1})


@pytest.mark.parametrize("cls", [LazyTensorStorage, LazyMemmapStorage])
def test_ndim_other_than_one_is_refused(cls):
    assert len(cls(4, ndim=1)) == 0
    with pytest.raises(NotImplementedError, match=f"{cls.__name__}: ndim=2 is not supported by rlpipe"):
        cls(4, ndim=2)
    with pytest.raises(NotImplementedError, match="TensorStorage: ndim=2 is not supported"):
        TensorStorage(rlpipe.zeros(3), ndim=2)


def test_memmap_cleanup(tmp_path):
    # torchrl 0.14.1: cleanup() True then False, the directory gone; a storage never written: False
    scratch = tmp_path / "storage"
    storage = LazyMemmapStorage(10, scratch_dir=scratch, auto_cleanup=True)
    assert storage in _MEMMAP_STORAGE_REGISTRY
    storage.set(range(2), TensorDict({"a": rlpipe.zeros(2)}, [2]))
    assert os.listdir(scratch)
    assert storage.cleanup() is True and not scratch.exists()
    assert storage.cleanup() is False and storage._cleaned_up is True
    fresh = LazyMemmapStorage(10)
    assert fresh._auto_cleanup is True and fresh._scratch_dir_is_temp is True and fresh.cleanup() is False
    kept = LazyMemmapStorage(10, scratch_dir=tmp_path / "kept")
    assert kept._auto_cleanup is False and kept not in _MEMMAP_STORAGE_REGISTRY
    kept.set(range(1), TensorDict({"a": rlpipe.zeros(1)}, [1]))
    assert kept.cleanup() is True and not (tmp_path / "kept").exists()  # an explicit cleanup still removes it
    with pytest.raises(NotImplementedError, match="shared_init=True"):
        LazyMemmapStorage(10, shared_init=True)


def test_memmap_auto_cleanup_when_collected(tmp_path):
    import gc
    scratch = tmp_path / "gone"
    storage = LazyMemmapStorage(10, scratch_dir=scratch, auto_cleanup=True)
    storage.set(range(1), TensorDict({"a": rlpipe.zeros(1)}, [1]))
    assert scratch.exists()
    del storage
    gc.collect()
    assert not scratch.exists()


# ---- samplers ---------------------------------------------------------------------------------------
def test_sampler_sample_returns_tensors():
    # torchrl 0.14.1: Sampler.sample returns an int64 Tensor index and a dict; _sample_list is a Tensor
    storage = ListStorage(4)
    storage.set(range(4), range(4))
    index, info = RandomSampler().sample(storage, 2)
    assert isinstance(index, rlpipe.Tensor) and index.dtype == rlpipe.int64 and info == {}
    sampler = SamplerWithoutReplacement()
    assert sampler._sample_list is None
    index, _ = sampler.sample(storage, 3)
    assert index.unique().numel() == 3
    assert isinstance(sampler._sample_list, rlpipe.Tensor) and sampler._sample_list.numel() == 1
    left = sampler._sample_list.tolist()
    assert sorted(left + index.tolist()) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"The batch size 5 is greater than the storage capacity"):
        SamplerWithoutReplacement(drop_last=True).sample(storage, 5)


def test_buffer_accepts_prefetch_and_samples_the_same():
    rlpipe.manual_seed(3)
    a = TensorDictReplayBuffer(storage=LazyTensorStorage(8), batch_size=4)
    a.extend(TensorDict({"x": rlpipe.arange(8)}, [8]))
    first = a.sample()["x"].tolist()
    rlpipe.manual_seed(3)
    b = TensorDictReplayBuffer(storage=LazyTensorStorage(8), batch_size=4, prefetch=3)
    b.extend(TensorDict({"x": rlpipe.arange(8)}, [8]))
    assert b.sample()["x"].tolist() == first
    with pytest.raises(ValueError, match="prefetch must be None or an int >= 0, got prefetch=1.5"):
        ReplayBuffer(prefetch=1.5)
