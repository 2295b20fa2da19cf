"""Non-tensor data: strings and other Python objects as TensorDict entries (tensordict 0.14)."""
import json

import pytest

import rlpipe
from rlpipe.tensordict import (LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict, lazy_stack,
                               set_list_to_stack)
from rlpipe.tensordict.utils import is_non_tensor


def test_a_string_is_stored_as_non_tensor_data():
    td = TensorDict({"x": rlpipe.zeros(3)}, [3])
    td["s"] = "a string"
    assert isinstance(td.get("s"), NonTensorData) and td.get("s").batch_size == rlpipe.Size([3])
    assert td["s"] == "a string" and td.get("s").data == "a string"
    assert td.is_non_tensor("s") and not td.is_non_tensor("x") and is_non_tensor(td.get("s"))
    assert td[1]["s"] == "a string"
    assert list(td.keys(True, True)) == ["x"]  # as in tensordict: non-tensor entries are not leaves
    assert sorted(td.keys()) == ["s", "x"] and td._has_non_tensor


def test_set_and_get_non_tensor():
    td = TensorDict({}, [2])
    td.set_non_tensor("cfg", {"lr": 0.1, "names": ["a", "b"]})
    td.set_non_tensor("n", 3)  # a number too, as it is
    assert td.get_non_tensor("cfg") == {"lr": 0.1, "names": ["a", "b"]}
    assert td.get_non_tensor("n") == 3 and isinstance(td.get("n"), NonTensorData)
    td["none"] = None
    assert td["none"] is None and td.is_non_tensor("none")
    assert [k for k, _ in td.non_tensor_items()] == ["cfg", "n", "none"]
    assert list(td.filter_non_tensor_data().keys()) == []
    with pytest.raises(KeyError):
        td.is_non_tensor("missing")


def test_numbers_and_number_lists_stay_tensors():
    td = TensorDict({}, [3])
    td["l"] = [1, 2, 3]
    assert isinstance(td["l"], rlpipe.Tensor) and td["l"].tolist() == [1, 2, 3]
    with pytest.raises(RuntimeError, match="set_non_tensor stores it as it is"):
        td["n"] = 1


def test_a_list_of_strings_of_the_batch_length_is_a_stack():
    td = TensorDict({}, [3])
    td["l"] = ["a", "b", "c"]
    assert isinstance(td.get("l"), NonTensorStack) and td["l"] == ["a", "b", "c"]
    assert td[2]["l"] == "c" and td[1:]["l"] == ["b", "c"]
    with set_list_to_stack(False):
        td["m"] = ["a", "b", "c"]
    assert isinstance(td.get("m"), NonTensorData) and td[0]["m"] == ["a", "b", "c"]


def test_stack_gives_a_non_tensor_stack_that_follows_indexing():
    tds = [TensorDict({"s": f"x{i}", "v": rlpipe.zeros(2)}, []) for i in range(3)]
    st = rlpipe.stack(tds)
    assert isinstance(st.get("s"), NonTensorStack) and st["s"] == ["x0", "x1", "x2"]
    assert st[1]["s"] == "x1" and isinstance(st[1].get("s"), NonTensorData)
    assert st[[2, 0]]["s"] == ["x2", "x0"]
    assert st[rlpipe.tensor([True, False, True])]["s"] == ["x0", "x2"]
    assert st.reshape(3, 1)["s"] == [["x0"], ["x1"], ["x2"]]
    assert st.unsqueeze(0)["s"] == [["x0", "x1", "x2"]]
    assert st.flip(0)["s"] == ["x2", "x1", "x0"]
    assert rlpipe.cat([st, st[:1]])["s"] == ["x0", "x1", "x2", "x0"]
    same = rlpipe.stack([TensorDict({"s": "x"}, []) for _ in range(2)])
    assert isinstance(same.get("s"), NonTensorStack) and same["s"] == ["x", "x"]  # as tensordict 0.14


def test_clone_to_and_apply_keep_non_tensor_data():
    td = rlpipe.stack([TensorDict({"s": "a", "v": rlpipe.zeros(2)}, []), TensorDict({"s": "b", "v": rlpipe.ones(2)},
                                                                                      [])])
    td["t"] = "same"
    for out in (td.clone(), td.to("cpu"), td.to(rlpipe.float64), td.apply(lambda t: t + 1), td.detach(),
                td.exclude("v")):
        assert out["s"] == ["a", "b"] and out["t"] == "same"
    assert td.clone().get("s") is not td.get("s")


def test_write_at_an_index():
    data = TensorDict({}, [1, 4])
    data[0, 0] = TensorDict({"a": 0, "b": "first"}, [])
    assert data["b"] == "first"  # a new entry takes the value everywhere, as in tensordict
    data[0, 1] = TensorDict({"a": 0, "b": "second"}, [])
    assert data.get("b").tolist() == [["first", "second", "first", "first"]]
    stack = NonTensorStack("p", "q", "r")
    stack[1] = "z"
    assert stack.tolist() == ["p", "z", "r"]


def test_non_tensor_data_and_stack_classes():
    d = NonTensorData("hello", batch_size=[3])
    assert d[0].data == "hello" and d.tolist() == ["hello"] * 3
    assert d.expand(2, 3).tolist() == [["hello"] * 3] * 2
    s = NonTensorStack("a", "b")
    assert s.batch_size == rlpipe.Size([2]) and s.tolist() == ["a", "b"] and s[1].data == "b"
    nested = NonTensorStack.from_list([["a", "b", "c"], ["d", "e", NonTensorData("f")]])
    assert nested.batch_size == rlpipe.Size([2, 3]) and nested[1, 2].data == "f" and nested[:, 0].tolist() == ["a",
                                                                                                           "d"]
    with pytest.raises(ValueError, match="ragged"):
        NonTensorStack.from_list([["a", "b"], "c"])


def test_comparison_is_object_by_object():
    s = NonTensorStack("a", "b")
    assert (s == NonTensorStack("a", "c")).tolist() == [True, False]
    assert (s != "a").tolist() == [False, True]
    assert (NonTensorData(3, batch_size=[2]) == NonTensorData(3, batch_size=[2])).tolist() == [True, True]


def test_consolidate_keeps_non_tensor_entries():
    td = rlpipe.stack([TensorDict({"s": "a", "v": rlpipe.zeros(2)}, []), TensorDict({"s": "b", "v": rlpipe.ones(2)},
                                                                                      [])])
    c = td.consolidate()
    assert c["s"] == ["a", "b"] and c[1]["s"] == "b" and c["v"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert c._consolidated["metadata"]["s"]["non_tensors"]["data"] == ["a", "b"]


def test_lazy_stack_of_non_tensor_entries():
    tds = [TensorDict({"s": f"x{i}", "obs": rlpipe.zeros(i + 1)}, []) for i in range(3)]
    lz = lazy_stack(tds)
    assert isinstance(lz, LazyStackedTensorDict)
    assert lz["s"] == ["x0", "x1", "x2"] and isinstance(lz.get("s"), NonTensorStack)
    assert lz[1]["s"] == "x1"


def test_memmap_stores_json_and_loads_it_back(tmp_path):
    td = rlpipe.stack([TensorDict({"s": "a", "cfg": {"k": 1}}, []), TensorDict({"s": "b", "cfg": {"k": 2}}, [])])
    td.set_non_tensor("meta", {"run": "r1", "seeds": [1, 2]})
    td.memmap_(tmp_path / "td")
    with open(tmp_path / "td" / "meta" / "meta.json") as f:
        assert json.load(f)["data"] == {"run": "r1", "seeds": [1, 2]}
    loaded = TensorDict.load_memmap(tmp_path / "td")
    assert loaded["s"] == ["a", "b"] and loaded["meta"] == {"run": "r1", "seeds": [1, 2]}
    assert loaded["cfg", "k"].tolist() == [1, 2] and loaded.is_locked
    assert loaded[1]["s"] == "b"


class _Opaque:
    pass


@pytest.mark.parametrize("value", [_Opaque(), (1, 2), {1: "int key"}, float("nan"), b"bytes"])
def test_memmap_refuses_what_json_cannot_store_unchanged(tmp_path, value):
    td = TensorDict({"x": rlpipe.zeros(2)}, [2])
    td.set_non_tensor("bad", value)
    with pytest.raises(TypeError, match="non-tensor entry 'bad' holds a .* JSON cannot store unchanged"):
        td.memmap_(tmp_path / "td")
    assert not (tmp_path / "td").exists()  # refused before anything was written
    assert not td.is_locked and td.get_non_tensor("bad") is value
    td.memmap_()  # anonymous memory maps need no JSON
    assert td.get_non_tensor("bad") is value


def test_load_memmap_of_corrupt_non_tensor_meta(tmp_path):
    td = TensorDict({}, [2])
    td["l"] = ["a", "b"]
    td.memmap_(tmp_path / "td")
    meta_path = tmp_path / "td" / "l" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["items"] = "not a list"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(RuntimeError, match="items must be a list"):
        TensorDict.load_memmap(tmp_path / "td")


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_non_tensor_entries_move_to_cuda():
    td = rlpipe.stack([TensorDict({"s": "a", "v": rlpipe.zeros(2)}, []), TensorDict({"s": "b", "v": rlpipe.ones(2)},
                                                                                      [])])
    moved = td.to("cuda")
    assert moved["v"].device.type == "cuda" and moved["s"] == ["a", "b"] and moved[1]["s"] == "b"
    assert moved.flip(0)["s"] == ["b", "a"]


def test_eq_and_ne_compare_non_tensor_data_with_tensors_by_value():
    three = NonTensorData(3, batch_size=[])
    assert rlpipe.eq(rlpipe.tensor(3), three).item() is True
    assert rlpipe.ne(three, rlpipe.tensor(3)).item() is False
    assert rlpipe.eq(three, rlpipe.tensor(4)).item() is False
    # a TensorDict rebuilt from to_dict() holds tensors where the original held NonTensorData numbers
    td = TensorDict({"n": {"int": NonTensorData(3), "str": NonTensorData("s")}})
    rebuilt = TensorDict.from_dict(td.to_dict(), auto_batch_size=True)
    assert isinstance(rebuilt["n"].get("int"), rlpipe.Tensor)
    assert (rebuilt == td).all() and (td == rebuilt).all()
    td["n", "int"] = NonTensorData(4)
    assert not (rebuilt == td).all()
