"""Lazy stacks against tensordict 0.14.3's behaviours (recorded in the peer venv)."""
import pytest

import rlpipe
from rlpipe.tensordict import LazyStackedTensorDict, TensorDict


@pytest.mark.parametrize("source_is_lazy", [True, False])
def test_update_batch_size(source_is_lazy):
    # tensordict: a lazy stack updated with update_batch_size=True takes the source's batch size
    td = TensorDict(a=rlpipe.zeros(3, 4), b=rlpipe.randn(3, 4), batch_size=[3, 4]).to_lazystack(0)
    source = TensorDict(a=rlpipe.ones(2, 4), b=rlpipe.randn(2, 4), batch_size=[2, 4])
    if source_is_lazy:
        source = source.to_lazystack(0)
    td.update(source, update_batch_size=True)
    assert isinstance(td, LazyStackedTensorDict) and td.batch_size == rlpipe.Size([2, 4])
    assert td["a"].tolist() == [[1.0] * 4] * 2
    assert (td["b"] == source["b"]).all()


def test_update_batch_size_of_a_locked_stack_is_refused():
    td = TensorDict(a=rlpipe.zeros(3), batch_size=[3]).to_lazystack(0).lock_()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        td.update(TensorDict(a=rlpipe.ones(2), batch_size=[2]), update_batch_size=True)
    assert td.batch_size == rlpipe.Size([3]) and td["a"].tolist() == [0.0] * 3


@pytest.mark.parametrize("dense_first", [False, True])
def test_cat_of_lazy_and_dense_stays_lazy(dense_first):
    # tensordict 0.14.3: cat along the stack dim of a lazy stack and a dense TensorDict is a lazy stack
    lazy = LazyStackedTensorDict(*[TensorDict(a=rlpipe.full((2, 3), float(i)), batch_size=[2, 3]) for i in range(2)],
                                 stack_dim=0)
    dense = TensorDict(a=rlpipe.arange(12.0).reshape(2, 2, 3), batch_size=[2, 2, 3])
    parts = [dense, lazy] if dense_first else [lazy, dense]
    res = rlpipe.cat(parts, 0)
    assert isinstance(res, LazyStackedTensorDict) and res.stack_dim == 0 and len(res.tensordicts) == 4
    assert res.batch_size == rlpipe.Size([4, 2, 3])
    assert res["a"].tolist() == rlpipe.cat([p["a"] for p in parts], 0).tolist()


def test_cat_of_lazy_and_dense_along_another_dim():
    lazy = LazyStackedTensorDict(*[TensorDict(a=rlpipe.full((2, 3), float(i)), batch_size=[2, 3]) for i in range(2)],
                                 stack_dim=0)
    dense = TensorDict(a=rlpipe.arange(18.0).reshape(2, 3, 3), batch_size=[2, 3, 3])
    res = rlpipe.cat([lazy, dense], 1)
    assert isinstance(res, LazyStackedTensorDict) and res.stack_dim == 0
    assert res.batch_size == rlpipe.Size([2, 5, 3])
    assert res["a"].tolist() == rlpipe.cat([lazy["a"], dense["a"]], 1).tolist()


def test_set_a_list_on_a_lazy_stack():
    # tensordict 0.14.3: a list that is not one tensor gives one item to each stacked TensorDict
    from rlpipe.tensordict import lazy_stack
    td = LazyStackedTensorDict(TensorDict(), TensorDict())
    td["a"] = ["0", "1"]
    assert td[0]["a"] == "0" and td[1]["a"] == "1"
    td["b"] = [rlpipe.ones((2,)) * 2, rlpipe.ones((1,))]
    assert td.get("b", as_padded_tensor=True).tolist() == [[2.0, 2.0], [1.0, 0.0]]
    td = lazy_stack([lazy_stack([TensorDict() for _ in range(2)]) for _ in range(3)], 1)
    shapes = [[1, 2, 3], [4, 5, 6]]
    td["a"] = [[rlpipe.ones(shapes[i][j]) for j in range(3)] for i in range(2)]
    assert [[td[i, j]["a"].shape[0] for j in range(3)] for i in range(2)] == shapes
    with pytest.raises(RuntimeError, match="batch dimension mismatch for key 'c': the list does not hold 3 items "
                                           "along the stack dim 1"):
        td["c"] = [["x"] * 2] * 2
    assert "c" not in td.keys()


def test_masked_setitem_broadcasts_a_smaller_tensordict():
    # tensordict 0.14.3: lazy[mask] = TensorDict(batch_size=[]) writes it at every picked element
    td = LazyStackedTensorDict(TensorDict({"a": rlpipe.ones(())}), TensorDict({"a": rlpipe.zeros(())}))
    assert td[rlpipe.tensor([True, False])].batch_size == rlpipe.Size([1])
    td[rlpipe.tensor([True, False])] = TensorDict({"a": 0.0})
    assert td["a"].tolist() == [0.0, 0.0]
    td[rlpipe.tensor([True, False])] = TensorDict({"b": 3.0})
    td[rlpipe.tensor([False, True])] = TensorDict({"b": 4.0})
    assert td["b"].tolist() == [3.0, 4.0]
