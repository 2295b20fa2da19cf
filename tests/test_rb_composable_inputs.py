"""torchrl 0.14's composable-buffer inputs: ``ListStorage(compilable=..., device=...)``, ``add`` of
one pytree item into a tensor storage, and the max-value writer's refusal of non-TensorDicts."""
import pytest

import rlpipe
from rlpipe.data import (LazyMemmapStorage, LazyTensorStorage, ListStorage, ReplayBuffer, TensorDictMaxValueWriter,
                         TensorDictReplayBuffer)
from rlpipe.tensordict import TensorDict


def _tree():
    return {"a": rlpipe.tensor([7]), "b": {"c": [rlpipe.zeros(3), (rlpipe.ones(2),)]}, 30: rlpipe.zeros(2)}


@pytest.mark.parametrize("storage_type", [LazyTensorStorage, LazyMemmapStorage])
def test_add_one_pytree_item(storage_type):
    rb = ReplayBuffer(storage=storage_type(5), batch_size=3)
    assert rb.add(_tree()) == 0
    assert rb.add(_tree()) == 1
    sample = rb.sample()
    assert sorted(sample, key=str) == [30, "a", "b"]
    assert sample["a"].tolist() == [[7], [7], [7]]
    assert isinstance(sample["b"]["c"], list) and isinstance(sample["b"]["c"][1], tuple)
    assert tuple(sample["b"]["c"][1][0].shape) == (3, 2)


def test_list_storage_takes_torchrl_keywords():
    storage = ListStorage(4, compilable=True, device="cpu")
    rb = ReplayBuffer(storage=storage)
    rb.extend([rlpipe.tensor(1.0), {"x": rlpipe.tensor([2.0])}, "text"])
    assert storage.device == rlpipe.device("cpu")
    assert rb[0].device == rlpipe.device("cpu") and rb[2] == "text"
    assert ListStorage().device is None
    with pytest.raises(RuntimeError, match="device type 'tpu' is not supported"):
        ListStorage(4, device="tpu")


@pytest.mark.cuda
def test_list_storage_moves_items_to_its_device():
    from rlpipe import backends
    if not backends.cuda_available():
        pytest.skip("cuda backend unavailable (CuPy or a GPU missing)")
    rb = ReplayBuffer(storage=ListStorage(4, device="cuda"))
    rb.extend([rlpipe.tensor([1.0]), {"x": rlpipe.tensor([2.0])}, TensorDict({"y": rlpipe.zeros(2)}, [2])])
    assert rb[0].device.type == "cuda" and rb[1]["x"].device.type == "cuda"
    assert rb[2]["y"].device.type == "cuda"


def test_max_value_writer_refuses_other_data():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4), writer=TensorDictMaxValueWriter(rank_key="r"))
    with pytest.raises(RuntimeError, match="expects data to be a tensor collection .*, got dict"):
        rb.writer.extend(_tree())
    rb.extend(TensorDict({"r": rlpipe.arange(3.0)}, [3]))  # still usable
    assert len(rb) == 3
