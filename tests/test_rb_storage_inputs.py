"""Storage inputs as torchrl 0.14 takes them: ``device="auto"``, nested TensorDicts keeping their
batch sizes, extending with an empty TensorDict. Expected values recorded from torchrl 0.14.1."""
import pytest

import rlpipe
from rlpipe.data import LazyMemmapStorage, LazyTensorStorage, ListStorage, ReplayBuffer, TensorDictReplayBuffer
from rlpipe.tensordict import TensorDict


def _nested(n):
    return TensorDict({"a": rlpipe.zeros(n, 3),
                       "sub": TensorDict({"b": rlpipe.ones(n, 3, 2),
                                          "deeper": TensorDict({"c": rlpipe.ones(n, 3, 2)}, [n, 3, 2])}, [n, 3])},
                      [n])


@pytest.mark.parametrize("storage_type", [LazyTensorStorage, LazyMemmapStorage])
def test_device_auto_takes_the_first_batch_device(storage_type):
    storage = storage_type(10, device="auto")
    rb = ReplayBuffer(storage=storage)
    rb.extend(rlpipe.arange(3.0))
    assert storage.device == rlpipe.device("cpu")
    assert rb.sample(2).device == rlpipe.device("cpu")


@pytest.mark.parametrize("storage_type", [LazyTensorStorage, LazyMemmapStorage])
def test_nested_batch_sizes_survive_the_storage(storage_type, tmp_path):
    kwargs = {"scratch_dir": tmp_path / "s"} if storage_type is LazyMemmapStorage else {}
    rb = TensorDictReplayBuffer(storage=storage_type(10, **kwargs))
    rb.extend(_nested(4))
    items = rb[:2]
    assert tuple(items.batch_size) == (2,)
    assert tuple(items["sub"].batch_size) == (2, 3)
    assert tuple(items["sub", "deeper"].batch_size) == (2, 3, 2)
    assert tuple(rb.storage._storage["sub"].batch_size) == (10, 3)
    assert tuple(rb.sample(5)["sub"].batch_size) == (5, 3)
    if storage_type is LazyMemmapStorage:  # reopened from its files
        again = LazyMemmapStorage(10, scratch_dir=tmp_path / "s")
        assert tuple(again[:2]["sub"].batch_size) == (2, 3)


def test_extend_with_an_empty_tensordict():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    with pytest.raises(RuntimeError, match="extend: expected at least one element, got a batch of 0 items"):
        rb.extend(TensorDict({"a": rlpipe.zeros(0, 3)}, [0]))  # never written: nothing tells the structure
    rb.extend(TensorDict({"a": rlpipe.zeros(2, 3)}, [2]))
    index = rb.extend(TensorDict({"a": rlpipe.zeros(0, 3)}, [0]))
    assert index.tolist() == [] and index.dtype == rlpipe.int64
    assert len(rb) == 2 and rb.writer._cursor == 2
    plain = ReplayBuffer(storage=LazyTensorStorage(10))  # torchrl's plain writer refuses it
    plain.extend(rlpipe.zeros(2, 3))
    with pytest.raises(RuntimeError, match="expected at least one element"):
        plain.extend(rlpipe.zeros(0, 3))


def test_an_empty_nested_tensordict_is_kept():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(5))
    rb.extend(TensorDict({"a": rlpipe.zeros(3), "e": TensorDict({}, [3, 2])}, [3]))
    items = rb[:2]
    assert sorted(items.keys()) == ["a", "e", "index"]
    assert tuple(items["e"].batch_size) == (2, 2)


@pytest.mark.parametrize("storage_type", [LazyTensorStorage, LazyMemmapStorage, ListStorage])
def test_extend_with_a_lazy_stack(storage_type):
    from rlpipe.tensordict import LazyStackedTensorDict
    rlpipe.manual_seed(0)
    items = [TensorDict({"obs": rlpipe.rand(4, 8), "action": rlpipe.rand(2)}, []) for _ in range(10)]
    stacked = LazyStackedTensorDict.lazy_stack(items, dim=0)
    rb = ReplayBuffer(storage=storage_type(100), batch_size=5)
    assert rb.extend(stacked).tolist() == list(range(10))
    assert len(rb) == 10
    assert rb[:]["obs"].tolist() == stacked.to_tensordict()["obs"].tolist()
    assert tuple(rb.sample()["action"].shape) == (5, 2)
