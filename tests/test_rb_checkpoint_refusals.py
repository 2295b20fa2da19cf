"""Checkpoints of tensor and pytree storages as torchrl 0.14 treats them: ``state_dict`` refuses a
pytree storage, ``loads`` fills only a storage already written to, and the tree comes back.
Expected values recorded from torchrl 0.14.1."""
import pytest

import rlpipe
from rlpipe.data import LazyMemmapStorage, LazyTensorStorage, TensorStorage


def _tree(n, fill):
    return {"a": rlpipe.arange(n) * fill, "b": [rlpipe.ones(n, 2) * fill]}


def test_tensor_storage_of_a_pytree_gives_the_tree_back():
    storage = TensorStorage({"a": rlpipe.arange(4), "b": (rlpipe.ones(4, 2),)})
    items = storage.get([1, 2])
    assert isinstance(items, dict) and isinstance(items["b"], tuple)
    assert items["a"].tolist() == [1, 2]
    assert items["b"][0].tolist() == [[1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize("make", [lambda: TensorStorage(_tree(4, 1)),
                                  lambda: LazyTensorStorage(4)])
def test_state_dict_refuses_a_pytree_storage(make):
    storage = make()
    if not storage.initialized:
        storage.set(range(3), _tree(3, 1))
    with pytest.raises(TypeError, match="Objects of type dict are not supported by .*state_dict"):
        storage.state_dict()
    assert storage.get([2])["a"].tolist() == [2]  # still usable


@pytest.mark.parametrize("storage_type", [LazyTensorStorage, LazyMemmapStorage])
@pytest.mark.parametrize("kind", ["tensor", "pytree"])
def test_loads_refuses_a_never_written_storage(tmp_path, storage_type, kind):
    data = rlpipe.arange(3) if kind == "tensor" else _tree(3, 1)
    source = storage_type(4)
    source.set(range(3), data)
    source.dumps(tmp_path / "save")
    target = storage_type(4)
    with pytest.raises(RuntimeError, match="Cannot fill a non-initialized pytree-based TensorStorage"):
        target.loads(tmp_path / "save")
    assert len(target) == 0 and not target.initialized
    target.set(range(3), data * 0 if kind == "tensor" else _tree(3, 0))
    target.loads(tmp_path / "save")
    assert len(target) == 3
    got = target[:3]
    if kind == "tensor":
        assert got.tolist() == [0, 1, 2]
    else:
        assert got["a"].tolist() == [0, 1, 2] and isinstance(got["b"], list)
        assert got["b"][0].tolist() == [[1.0, 1.0]] * 3


def test_loads_of_a_tensordict_fills_a_never_written_storage(tmp_path):
    source = LazyTensorStorage(4)
    source.set(range(2), rlpipe.tensordict.TensorDict({"x": rlpipe.arange(2)}, [2]))
    source.dumps(tmp_path / "save")
    target = LazyTensorStorage(4)
    target.loads(tmp_path / "save")
    assert target[:2]["x"].tolist() == [0, 1]
