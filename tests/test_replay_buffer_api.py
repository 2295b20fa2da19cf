"""torchrl 0.14's replay-buffer API in rlpipe: writers, Storage.set/get/len, in-place writes,
prefetch/collate_fn, RandomSampler(replacement=), and the bugs torchrl's suite found. Expected
values measured on torchrl 0.14.1 (ListStorage wrap-around: len 3, items [3, 4, 2], cursor 2)."""
import numpy as np
import pytest

import rlpipe
from rlpipe.data import (ImmutableDatasetWriter, LazyTensorStorage, ListStorage, PrioritizedSampler, RandomSampler,
                         ReplayBuffer, RoundRobinWriter, SamplerWithoutReplacement, TensorDictMaxValueWriter,
                         TensorDictReplayBuffer, TensorDictRoundRobinWriter)
from rlpipe.data.replay_buffers import replay_buffers, samplers, storages, writers
from rlpipe.tensordict import TensorDict


def test_module_paths():
    assert replay_buffers.ReplayBuffer is ReplayBuffer and storages.ListStorage is ListStorage
    assert samplers.RandomSampler is RandomSampler and writers.RoundRobinWriter is RoundRobinWriter


@pytest.mark.parametrize("data", [[rlpipe.tensor(i) for i in range(5)], rlpipe.arange(5)])
def test_list_storage_wraps_around_as_torchrl(data):
    rb = ReplayBuffer(storage=ListStorage(3))
    assert rb.extend(data).tolist() == [0, 1, 2, 0, 1]
    assert len(rb) == 3 and [int(x) for x in rb.storage] == [3, 4, 2] and rb.writer._cursor == 2


def test_default_writers_and_index_entry():
    assert type(ReplayBuffer().writer) is RoundRobinWriter
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4))
    assert type(rb.writer) is TensorDictRoundRobinWriter
    data = TensorDict({"a": rlpipe.arange(6)}, [6])
    rb.extend(data)
    assert "index" not in data.keys()
    # rows 4 and 5 wrapped around to positions 0 and 1: "index" is the position, as in torchrl
    assert rb.storage[:]["index"].tolist() == [0, 1, 2, 3] and rb.storage[:]["a"].tolist() == [4, 5, 2, 3]
    assert rb.writer._cursor == 2 and rb.write_count == 6


def test_max_value_writer_keeps_the_top_items_like_torchrl_docstring():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(1), sampler=SamplerWithoutReplacement(), batch_size=1,
                                writer=TensorDictMaxValueWriter(rank_key="key"))
    for lo, expected in ((0, 9), (10, 19), (0, 19)):
        rb.extend(TensorDict({"key": rlpipe.arange(lo, lo + 10), "obs": rlpipe.arange(lo, lo + 10)}, [10]))
        assert rb.sample()["obs"].item() == expected
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictMaxValueWriter(rank_key="r"))
    index = rb.extend(TensorDict({"r": rlpipe.tensor([5., 1., 7., 3., 0.])}, [5]))
    # 3 replaces the lowest (1, at position 1), so row 1 ends up not stored; 0 is dropped (torchrl's result)
    assert index.tolist() == [0, -1, 2, 1, -1]
    assert sorted(rb[:]["r"].tolist()) == [3., 5., 7.]
    with pytest.raises(KeyError, match="rank key 'missing'"):
        TensorDictReplayBuffer(writer=TensorDictMaxValueWriter(rank_key="missing")).extend(
            TensorDict({"r": rlpipe.zeros(2)}, [2]))


def test_immutable_dataset_writer_refuses_writes():
    rb = ReplayBuffer(storage=LazyTensorStorage(4), writer=ImmutableDatasetWriter())
    with pytest.raises(RuntimeError, match="This dataset doesn't allow writing"):
        rb.extend(rlpipe.arange(3))
    assert len(rb) == 0


def test_storage_set_get_len_and_in_place_buffer_writes():
    storage = LazyTensorStorage(10)
    storage.set(rlpipe.arange(4), TensorDict({"a": rlpipe.zeros(4)}, [4]))
    assert len(storage) == 4 and storage.get(2)["a"].item() == 0
    storage[1] = TensorDict({"a": rlpipe.tensor(5.)}, [])
    assert storage[:]["a"].tolist() == [0, 5, 0, 0] and len(storage) == 4
    with pytest.raises(IndexError, match="outside the storage"):
        storage.set(12, TensorDict({"a": rlpipe.tensor(1.)}, []))
    lst = ListStorage(4)
    with pytest.raises(RuntimeError, match="items are appended one after the other"):
        lst.set(2, "x")
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=5)
    rb.extend(TensorDict({"a": rlpipe.zeros(10), "b": rlpipe.ones(10)}, [10]))
    rb.set_at_("a", rlpipe.tensor([99., 99.]), rlpipe.tensor([2, 5]))
    assert rb["a"].tolist() == [0, 0, 99, 0, 0, 99, 0, 0, 0, 0] and (rb["b"] == 1).all()
    rb.set_("a", rlpipe.full((10,), 42.))
    assert (rb["a"] == 42).all()
    rb.update_(TensorDict({"a": rlpipe.full((10,), 7.), "b": rlpipe.full((10,), 8.)}, [10]))
    assert (rb["a"] == 7).all() and (rb["b"] == 8).all()
    rb[0] = TensorDict({"a": rlpipe.tensor(1.), "b": rlpipe.tensor(2.)}, [])
    assert rb["a"][0].item() == 1 and rb.writer._cursor == 0


def test_constructor_keywords_and_sample_options():
    assert ReplayBuffer(prefetch=0).batch_size is None
    assert ReplayBuffer(prefetch=None, pin_memory=True, batch_size=2).batch_size == 2
    assert ReplayBuffer(prefetch=2, batch_size=2).batch_size == 2  # accepted; sampling stays in the calling thread
    with pytest.raises(ValueError, match="prefetch must be None or an int >= 0, got prefetch=-1"):
        ReplayBuffer(prefetch=-1)
    rb = ReplayBuffer(storage=ListStorage(5), collate_fn=lambda items: sorted(int(x) for x in items))
    rb.extend([rlpipe.tensor(i) for i in range(5)])
    picked = rb.sample(3)
    assert isinstance(picked, list) and picked == sorted(picked) and set(picked) <= set(range(5))
    td_rb = TensorDictReplayBuffer(storage=LazyTensorStorage(5), sampler=PrioritizedSampler(5, 0.7, 0.9))
    td_rb.extend(TensorDict({"a": rlpipe.arange(5)}, [5]))
    assert "priority_weight" in td_rb.sample(2).keys()
    assert "priority_weight" not in td_rb.sample(2, include_info=False).keys()
    assert isinstance(RandomSampler(replacement=False, drop_last=True), SamplerWithoutReplacement)
    assert type(RandomSampler()) is RandomSampler


def test_prioritized_sampler_with_the_default_storage_takes_more_than_max_capacity():
    rb = ReplayBuffer(sampler=PrioritizedSampler(5, alpha=0.7, beta=0.9), batch_size=4)
    rb.extend(rlpipe.arange(8))
    assert len(rb) == 8
    rb.update_priority(rlpipe.arange(8), rlpipe.tensor([0., 0, 0, 0, 0, 0, 0, 1]))
    rlpipe.manual_seed(0)
    assert set(rb.sample(50).tolist()) == {7}


def test_prioritized_reduction_and_max_priority_within_buffer():
    with pytest.raises(ValueError, match="reduction must be one of"):
        PrioritizedSampler(4, 0.5, 0.5, reduction="sum")
    sampler = PrioritizedSampler(4, 1.0, 0.5, eps=0.0, reduction="mean")
    rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=sampler)
    rb.extend(rlpipe.zeros(4, 2))
    sampler.update_priority(rlpipe.tensor([0, 1]), rlpipe.tensor([[1., 3.], [2., 6.]]))
    np.testing.assert_allclose(sampler._tree.leaves()[:2], [2., 4.])
    within = PrioritizedSampler(4, 1.0, 0.5, eps=0.0, max_priority_within_buffer=True)
    rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=within)
    rb.extend(rlpipe.zeros(2))
    within.update_priority(rlpipe.tensor([0, 1]), rlpipe.tensor([9., 2.]))
    assert within.default_priority == 9
    within.update_priority(rlpipe.tensor([0]), rlpipe.tensor([1.]))
    assert within.default_priority == 2  # the max among the stored items, not the max ever


def test_lazy_storages_log_their_shape_once_on_the_first_write():
    # torchrl 0.14.1 logs (INFO, its library logger) "Initialized LazyTensorStorage with
    # torch.Size([10]) shape" on a TensorDict's first extend, "Initialized LazyMemmapStorage with
    # torch.Size([10, 2]) shape" for a tensor, and nothing on later writes.
    import logging

    import rlpipe
    from rlpipe._utils import logger
    from rlpipe.data import LazyMemmapStorage, LazyTensorStorage, ReplayBuffer, TensorStorage

    messages = []

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    handler = Keep(level=logging.INFO)
    logger.addHandler(handler)
    try:
        rb = ReplayBuffer(storage=LazyTensorStorage(10))
        rb.extend(rlpipe.TensorDict({"a": rlpipe.zeros(3, 2)}, [3]))
        rb.extend(rlpipe.TensorDict({"a": rlpipe.zeros(3, 2)}, [3]))
        ReplayBuffer(storage=LazyMemmapStorage(10)).extend(rlpipe.zeros(3, 2))
        ReplayBuffer(storage=TensorStorage(rlpipe.zeros(4, 2))).extend(rlpipe.zeros(3, 2))
    finally:
        logger.removeHandler(handler)
    assert messages == ["Initialized LazyTensorStorage with rlpipe.Size([10]) shape",
                        "Initialized LazyMemmapStorage with rlpipe.Size([10, 2]) shape"]
