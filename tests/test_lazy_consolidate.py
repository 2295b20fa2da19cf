"""consolidate() of lazy stacks and of TensorDicts holding tensorclasses (tensordict 0.14.3's layout),
and lazy_stack(out=) into a TensorDict that holds lazy stacks."""
import json
import pickle

import pytest

import rlpipe
from rlpipe.tensordict import LazyStackedTensorDict, NonTensorData, TensorDict, lazy_stack, tensorclass


@tensorclass
class Pair:
    """A tensorclass with a string and a tensor field, for nesting in TensorDicts."""
    a: str
    b: rlpipe.Tensor


def _ragged():
    """Two TensorDicts whose "a" differ in length (2 and 3), with a string and a nested entry."""
    return lazy_stack([TensorDict(a=rlpipe.arange(2.0), b={"c": rlpipe.ones(3)}, d="x"),
                       TensorDict(a=rlpipe.arange(3.0), b={"c": rlpipe.full((3,), 2.0)}, d="y")])


def test_lazy_consolidate_lays_out_leaves_as_tensordict():
    out = _ragged().consolidate()
    assert type(out) is LazyStackedTensorDict and out.is_consolidated() and out.is_locked
    meta = out._consolidated["metadata"]
    # the layout tensordict 0.14.3 writes for this stack (recorded in the peer venv)
    assert meta["cls"] == "LazyStackedTensorDict"
    assert meta["cls_metadata"] == {"stack_dim": 0, "stack_dim_name": None, "is_locked": False}
    assert meta["0"]["leaves"]["a"] == ("torch.float32", [2], 0, 8, 0)
    assert meta["0"]["b"]["leaves"]["c"] == ("torch.float32", [3], 8, 24, 4)
    assert meta["1"]["leaves"]["a"] == ("torch.float32", [3], 24, 40, 4)
    assert meta["1"]["b"]["leaves"]["c"] == ("torch.float32", [3], 40, 56, 4)
    assert meta["1"]["non_tensors"]["d"] == ("y", [], None)
    assert out._consolidated["storage"].shape == (56,)
    assert out.tensordicts[1]["a"].tolist() == [0.0, 1.0, 2.0] and out["d"] == ["x", "y"]


def test_lazy_consolidated_leaves_are_views_of_the_storage():
    out = _ragged().consolidate()
    out._consolidated["storage"].zero_()
    assert out.tensordicts[1]["a"].tolist() == [0.0, 0.0, 0.0]
    assert out["b", "c"].sum().item() == 0.0


def test_lazy_consolidate_round_trips_through_a_file_and_pickle(tmp_path):
    td = _ragged()
    path = tmp_path / "stack.bin"
    written = td.consolidate(filename=path)
    assert written.device == rlpipe.device("cpu")
    for back in (TensorDict.from_consolidated(path), LazyStackedTensorDict.from_consolidated(path),
                 pickle.loads(pickle.dumps(written))):
        assert type(back) is LazyStackedTensorDict and back.is_consolidated()
        assert [t.tolist() for t in back.get("a", as_list=True)] == [[0.0, 1.0], [0.0, 1.0, 2.0]]
        assert back["b", "c"].tolist() == [[1.0] * 3, [2.0] * 3] and back["d"] == ["x", "y"]
    # the file's metadata is tensordict's JSON (the length in the last 8 bytes)
    raw = path.read_bytes()
    length = int.from_bytes(raw[-8:], "little")
    assert json.loads(raw[-8 - length:-8])["0"]["cls"] == "TensorDict"


def test_nested_lazy_stacks_with_tensorclasses_consolidate():
    td = TensorDict(a=TensorDict(b=Pair(a="s", b=rlpipe.tensor([1.0, 2.0, 3.0]))),
                    c=TensorDict(d=NonTensorData("another")))
    stack = lazy_stack([td.clone(), td.clone()])
    stack = lazy_stack([stack.clone(), stack.clone()], -1)
    out = stack.consolidate()
    assert out.batch_size == (2, 2) and out.stack_dim == 1 and out.tensordicts[0].stack_dim == 0
    assert out._consolidated["storage"].shape == (64,)  # four padded [3] float32 leaves, as tensordict
    inner = out.tensordicts[1].tensordicts[0]
    assert type(inner["a", "b"]) is Pair and inner["a", "b"].a == "s"
    assert inner["a", "b"].b.tolist() == [1.0, 2.0, 3.0] and inner["c", "d"] == "another"
    assert (out == stack).all() and (pickle.loads(pickle.dumps(out)) == stack).all()


def test_tensorclass_entries_consolidate_and_compare():
    td = TensorDict(p=Pair(a="s", b=rlpipe.tensor([1.0, 2.0])))
    out = td.consolidate()
    assert type(out["p"]) is Pair and out["p"].b.tolist() == [1.0, 2.0]
    assert out._consolidated["metadata"]["p"]["cls"] is Pair
    equal = out == td
    assert type(equal["p"]) is Pair and equal.all()
    other = TensorDict(p=Pair(a="s", b=rlpipe.tensor([1.0, 5.0])))
    assert (td != other)["p"].b.tolist() == [False, True]


def test_a_tensorclass_cannot_be_written_to_a_consolidated_file(tmp_path):
    td = TensorDict(p=Pair(a="s", b=rlpipe.tensor([1.0])))
    with pytest.raises(TypeError, match="consolidate: the metadata cannot be written to a file as JSON"):
        td.consolidate(filename=tmp_path / "tc.bin")
    assert not (tmp_path / "tc.bin").exists()
    assert td["p"].b.tolist() == [1.0]  # td left usable


def test_unlocking_a_consolidated_lazy_stack_drops_the_storage():
    out = _ragged().consolidate()
    out.unlock_()
    assert not out.is_consolidated()
    out.tensordicts[0]["a"] = rlpipe.zeros(2)  # writable again


def test_only_non_tensor_entries_compare():
    td = TensorDict(c=TensorDict(d=NonTensorData("x")))
    assert (td == td.clone()).all()
    assert not (td == TensorDict(c=TensorDict(d=NonTensorData("y")))).all()


def test_lazy_stack_out_keeps_out_lazy_entries_in_place():
    parts = [TensorDict(ragged=lazy_stack([TensorDict(x=rlpipe.full((k,), float(i))) for k in (2, 3)]),
                        dense=rlpipe.full((2,), float(i)), batch_size=[]) for i in range(2)]
    out = parts[0].unsqueeze(0).expand(2).clone()  # "ragged": a lazy stack of x [2, 2] and x [2, 3]
    arrays = [td["x"]._data for td in out.get("ragged").tensordicts] + [out["dense"]._data]
    res = LazyStackedTensorDict.lazy_stack(parts, 0, out=out)
    assert res is out
    written = [td["x"]._data for td in out.get("ragged").tensordicts] + [out["dense"]._data]
    assert all(a is b for a, b in zip(arrays, written))  # filled in place, not replaced
    assert out["dense"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert [t.tolist() for t in out[1]["ragged"].get("x", as_list=True)] == [[1.0, 1.0], [1.0, 1.0, 1.0]]
    assert [t.tolist() for t in out[0]["ragged"].get("x", as_list=True)] == [[0.0, 0.0], [0.0, 0.0, 0.0]]


def test_rlpipe_save_keeps_consolidated_tensordicts_and_stacks_consolidated(tmp_path):
    dense = TensorDict(a=rlpipe.arange(3.0), s="text").consolidate()
    stack = _ragged().consolidate()
    for name, value in (("dense.pt", dense), ("stack.pt", stack)):
        rlpipe.save(value, tmp_path / name)
        back = rlpipe.load(tmp_path / name)
        assert type(back) is type(value) and back.is_consolidated() and back.is_locked
        assert back._consolidated["storage"].tolist() == value._consolidated["storage"].tolist()
    assert rlpipe.load(tmp_path / "dense.pt")["s"] == "text"
    assert [t.tolist() for t in rlpipe.load(tmp_path / "stack.pt").get("a", as_list=True)] == [[0.0, 1.0],
                                                                                                [0.0, 1.0, 2.0]]


def test_a_consolidated_tensorclass_entry_is_saved_entry_by_entry(tmp_path):
    td = TensorDict(p=Pair(a="s", b=rlpipe.tensor([1.0]))).consolidate()  # its metadata names a class
    rlpipe.save(td, tmp_path / "tc.pt")
    back = rlpipe.load(tmp_path / "tc.pt")
    assert not back.is_consolidated() and type(back["p"]) is Pair and back["p"].b.tolist() == [1.0]


def test_to_none_changes_nothing():
    td = TensorDict(a=rlpipe.ones(2))
    assert td.to(None) is td  # as tensordict: None names no device
