"""Non-tensor data in stacks, cats and tensorclass fields, with the behaviours recorded from tensordict
0.14.3 in the peer venv (each test names what tensordict gave)."""
import pytest

import rlpipe
from rlpipe.tensordict import (MetaData, NonTensorData, NonTensorStack, TensorDict, set_capture_non_tensor_stack,
                               tensorclass)


@tensorclass
class _Data:
    X: rlpipe.Tensor
    z: str


def _data(z):
    return _Data(X=rlpipe.ones(3, 4), z=z, batch_size=[3, 4])


def test_stack_of_equal_non_tensor_data_is_a_stack_by_default():
    # tensordict: torch.stack([NonTensorData('a')] * 2) -> NonTensorStack(['a', 'a'])
    out = rlpipe.stack([NonTensorData("a"), NonTensorData("a")])
    assert type(out) is NonTensorStack
    assert out.tolist() == ["a", "a"]


def test_stack_of_equal_non_tensor_data_captured():
    # tensordict, set_capture_non_tensor_stack(True): equal -> NonTensorData, different -> NonTensorStack
    a, b = NonTensorData("a", batch_size=[1]), NonTensorData("b", batch_size=[1])
    with set_capture_non_tensor_stack(True):
        same = rlpipe.stack([a, a])
        diff = rlpipe.stack([a, b])
    assert type(same) is NonTensorData and same.data == "a" and same.batch_size == rlpipe.Size([2, 1])
    assert type(diff) is NonTensorStack and diff.tolist() == [["a"], ["b"]]


def test_cat_of_equal_non_tensor_data_is_one():
    # tensordict: torch.cat of equal NonTensorData -> NonTensorData; of different ones -> NonTensorStack
    a, b = NonTensorData("a", batch_size=[1]), NonTensorData("b", batch_size=[1])
    same = rlpipe.cat([a, a])
    assert type(same) is NonTensorData and same.batch_size == rlpipe.Size([2])
    assert rlpipe.cat([a, b]).tolist() == ["a", "b"]


def test_tensorclass_field_of_a_stack_reads_as_nested_lists():
    # tensordict: d[1] = d2[1] makes z a NonTensorStack; d[1].z == ['b'] * 4, d[0].z == ['a'] * 4
    d, d2 = _data("a"), _data("b")
    d[1] = d2[1]
    assert d[1].z == ["b"] * 4
    assert d[0].z == ["a"] * 4
    stacked = rlpipe.stack([d2, d2])
    assert stacked.z == [[["b"] * 4] * 3] * 2


def test_writing_the_same_object_keeps_non_tensor_data():
    # tensordict: d[:2] = d2[:2] with the same z keeps z one NonTensorData
    d, d2 = _data("a"), _data("a")
    d[:2] = d2[:2].clone()
    assert type(d._tensordict.get("z")) is NonTensorData
    assert d[:2].z == "a"


def test_metadata_stacks_to_one_when_identical():
    # tensordict: MetaData stacks by identity (``is``) into one MetaData, else a NonTensorStack
    obj = ["x"]
    same = rlpipe.stack([MetaData(obj), MetaData(obj)])
    assert type(same) is MetaData and same.data is obj and same.batch_size == rlpipe.Size([2])
    assert type(rlpipe.stack([MetaData(["x"]), MetaData(["x"])])) is NonTensorStack


def test_typed_metadata():
    typed = MetaData[str]
    assert typed is MetaData[str] and issubclass(typed, MetaData)
    out = rlpipe.stack([typed("abc"), typed("abc")])
    assert isinstance(out, MetaData[str]) and out.data == "abc"


def test_list_to_stack_shapes():
    # tensordict: a list under an empty batch is a NonTensorStack of the list's shape; one whose leading
    # dims are not the batch's raises 'batch dimension mismatch'
    td = TensorDict()
    td["z"] = ["a", "b"]
    assert td.get("z").batch_size == rlpipe.Size([2])
    td = TensorDict(batch_size=[2, 3])
    td["z"] = [["a"] * 3] * 2
    assert td.get("z").batch_size == rlpipe.Size([2, 3])
    with pytest.raises(RuntimeError, match=r"batch dimension mismatch, got self.batch_size=.*2, 3.* and "
                                           r"value.shape=.*\[2\]"):
        td["y"] = ["a", "b"]
    assert "y" not in td.keys()
    td["y"] = [["b"] * 3] * 2  # still usable
    assert td["y"][1][2] == "b"


def test_batch_size_message_names_the_tensor():
    # tensordict: "the Tensor smth has shape torch.Size([1]) which is incompatible with the batch-size ..."
    td = TensorDict(a=rlpipe.zeros(3, 4), batch_size=[3, 4])
    with pytest.raises(RuntimeError, match=r"the Tensor smth has shape .*\[1\].* which is incompatible with "
                                           r"the batch-size .*\[3, 4\]"):
        td.set("z", TensorDict({"smth": rlpipe.zeros(1)}, []))
    assert list(td.keys()) == ["a"]


def test_update_replaces_non_tensor_data():
    # tensordict: a.update(b) takes b's string; a tensorclass update/replace too
    a = TensorDict(x=rlpipe.zeros(2), z="a", batch_size=[2])
    a.update(TensorDict(x=rlpipe.ones(2), z="b", batch_size=[2]))
    assert a["z"] == "b"
    d0, d1 = _data("a"), _data("b")
    d0.update(d1)
    assert d0.z == "b"
    replacement = d0.clone().zero_()
    replacement.z = "rep"
    assert d0.replace(replacement).z == "rep" and d0.z == "b"


def test_select_as_tensordict():
    t = _Data(X=rlpipe.ones(2), z="cat", batch_size=[2])
    kept = t.select("X")
    assert type(kept) is _Data and kept.z is None
    plain = t.select("X", as_tensordict=True)
    assert type(plain) is TensorDict and list(plain.keys()) == ["X"]
    td = TensorDict(a=rlpipe.zeros(3), b=rlpipe.ones(3))
    assert list(td.select("a", as_tensordict=True).keys()) == ["a"]


def test_module_level_cat_stack_and_is_non_tensor():
    from rlpipe import tensordict
    t = _Data(X=rlpipe.ones(2), z="cat", batch_size=[2])
    assert type(tensordict.cat([t, t])) is _Data and tensordict.cat([t, t]).batch_size == rlpipe.Size([4])
    assert tensordict.stack([t, t]).batch_size == rlpipe.Size([2, 2])
    assert tensordict.is_non_tensor(NonTensorData("x")) and tensordict.is_non_tensor(NonTensorStack("x"))
    assert not tensordict.is_non_tensor(TensorDict()) and not tensordict.is_non_tensor("x")


def test_lazy_stack_contains_and_empty_device():
    from rlpipe.tensordict import LazyStackedTensorDict
    td = TensorDict(c=rlpipe.zeros(1), batch_size=[1])
    stack = LazyStackedTensorDict.lazy_stack([td, td])
    assert td in stack and td.clone() not in stack  # identity, as tensordict
    assert "c" in stack and "zz" not in stack
    assert LazyStackedTensorDict(stack_dim=1, batch_size=[1, 2], device="cpu").device == rlpipe.device("cpu")
    assert LazyStackedTensorDict(stack_dim=0).device is None


def test_non_tensor_entries_compare_object_by_object():
    # tensordict: (a == b).z is a bool tensor of the batch's shape; TensorDict == tensorclass works too
    a, b, c = _Data(X=rlpipe.ones(3), z="q", batch_size=[3]), _Data(X=rlpipe.ones(3), z="q", batch_size=[3]), \
        _Data(X=rlpipe.ones(3), z="p", batch_size=[3])
    assert (a == b).z.tolist() == [True] * 3
    assert (a != b).z.tolist() == [False] * 3
    assert (a == c).z.tolist() == [False] * 3 and not (a == c).all()
    td = TensorDict(z="q", n={"w": "a"}, x=rlpipe.zeros(3), batch_size=[3])
    assert (td == td)["n", "w"].tolist() == [True] * 3
    plain = a.to_tensordict()
    assert (plain == a).all() and (a == plain).all()


def test_missing_arguments_and_device_messages():
    # Python's dataclass words, as tensordict's tensorclasses give them
    with pytest.raises(TypeError, match=r"missing 2 required positional arguments: 'X' and 'z'"):
        _Data(batch_size=[2])
    with pytest.raises(TypeError, match=r"missing 1 required positional argument: 'z'"):
        _Data(X=rlpipe.ones(2), batch_size=[2])
    d = _data("a")
    with pytest.raises(RuntimeError, match="device cannot be set using tensorclass.device = device"):
        d.device = rlpipe.device("cpu")
    assert d.device is None


def test_set_with_a_nested_tuple_key():
    @tensorclass
    class Outer:
        X: rlpipe.Tensor
        y: _Data = None

    outer = Outer(X=rlpipe.ones(3, 4), y=_data("a"), batch_size=[3, 4])
    outer.set(("y", ("z",)), "b")
    assert outer.y.z == "b"


def test_tensor_only_checks_annotations_and_options():
    from typing import Any, Optional

    from rlpipe.tensordict import TensorClass

    class Fine(TensorClass["tensor_only"]):
        a: rlpipe.Tensor
        b: Optional[rlpipe.LongTensor] = None
        c: rlpipe.Tensor | TensorDict | None = None
        meta: NonTensorData = None

    fine = Fine(a=1, meta={"k": "v"})
    assert isinstance(fine.a, rlpipe.Tensor)
    assert isinstance(fine.meta, NonTensorData) and fine.meta.data == {"k": "v"}  # kept whole, as tensordict
    for hint in (Any, rlpipe.Tensor | str):
        with pytest.raises(TypeError, match="tensor_only requires types to be Tensor, Tensor-subtrypes or None"):
            type("Bad", (TensorClass["tensor_only"],), {"__annotations__": {"a": hint}})
    with pytest.raises(TypeError, match="tensor_only cannot be combined with autocast or nocast"):
        tensorclass(type("Both", (), {"__annotations__": {"a": rlpipe.Tensor}}), tensor_only=True, autocast=True)


def test_autocast_to_numpy():
    import numpy as np

    @tensorclass(autocast=True)
    class Cast:
        arr: np.ndarray
        t: rlpipe.Tensor

    c = Cast(arr=1, t=1)
    assert isinstance(c.arr, np.ndarray) and c.arr.tolist() == 1
    assert isinstance(c.t, rlpipe.Tensor)


def test_dict_field_stays_one_object():
    # tensordict 0.14.3: a dict given to a field (whatever its annotation, without autocast) reads back as
    # that dict, shared by every element of the batch
    from dataclasses import field

    from rlpipe.tensordict import TensorClass

    class Cls(TensorClass):
        a: rlpipe.Tensor
        c: dict = field(default_factory=dict)

    obj = Cls(a=rlpipe.arange(3), c={"x": 1}, batch_size=[3])
    assert obj.c == {"x": 1}
    assert obj[0].c is obj[1].c
    assert type(Cls(a=rlpipe.arange(3), batch_size=[3]).c) is dict


def test_tensordict_classmethods_give_the_class():
    from typing import Any

    from rlpipe.tensordict import LazyStackedTensorDict, TensorClass

    class MC(TensorClass):
        foo: Any
        bar: Any

    class MCChild(MC):
        pass

    out = MC.from_list([{"foo": 1, "bar": 2}, {"foo": 3, "bar": 4}])
    assert type(out) is MC and out.foo.tolist() == [1, 3] and out.batch_size == rlpipe.Size([2])
    assert type(MCChild.from_list([{"foo": 1, "bar": 2}])) is MCChild
    keys = MC.fromkeys(["foo", "bar"], 0)
    assert type(keys) is MC and keys.bar.item() == 0
    mc = MC(foo=rlpipe.zeros(3), bar=rlpipe.ones(3), batch_size=[3])
    for name in ("stack", "cat", "lazy_stack", "maybe_dense_stack"):
        assert type(getattr(MC, name)([mc, mc])) is MC, name
    assert isinstance(MC.lazy_stack([mc, mc])._tensordict, LazyStackedTensorDict)
    assert MC.cat([mc, mc]).batch_size == rlpipe.Size([6])


def test_save_and_load_keep_the_class(tmp_path):
    m = _Data(X=rlpipe.rand(2, 3), z="t", batch_size=[2, 3])
    m.save(tmp_path)
    loaded = TensorDict.load(tmp_path)
    assert type(loaded) is _Data and loaded.z == "t" and (loaded == m).all()


def test_print_directory_tree(tmp_path):
    from rlpipe.tensordict.utils import print_directory_tree
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.bin").write_bytes(b"x" * 2048)
    (tmp_path / "g").write_text("hi")
    expected = f"Directory size: 2.00 KB\n{tmp_path.name}/\n    a/\n        f.bin\n    g"
    assert print_directory_tree(tmp_path) == expected
    assert print_directory_tree(tmp_path / "g", display_metadata=False) == "g"


def test_autocast_dicts_and_bad_keys():
    from typing import Optional

    @tensorclass(autocast=True)
    class Cast:
        td: TensorDict
        other: Optional[TensorDict] = None

    c = Cast(td={"a": 0.0}, other={"b": {"c": 1.0}})
    assert type(c.td) is TensorDict and c.td["a"].item() == 0.0  # autocast to the TensorDict annotation
    assert c.other == {"b": {"c": 1.0}}  # a union annotation: the dict is kept, as tensordict 0.14.3
    with pytest.raises(KeyError, match=r"Only NestedKeys are supported. Got key \('td', <class 'str'>\)"):
        c.get(("td", str))
    assert c.get(("td", "missing"), "else") == "else"


def test_assert_close():
    # tensordict 0.14: assert_close is assert_allclose_td; intersection=True compares the shared keys only
    from rlpipe.tensordict import assert_allclose_td, assert_close
    assert assert_close is assert_allclose_td
    a = TensorDict(x=rlpipe.zeros(2), y=rlpipe.ones(2))
    b = TensorDict(x=rlpipe.zeros(2))
    assert assert_close(a, b, intersection=True) is True
    with pytest.raises(AssertionError, match=r"keys mismatch.*only in actual: 'y'"):
        assert_close(a, b)
    with pytest.raises(AssertionError):
        assert_close(a, TensorDict(x=rlpipe.ones(2)), intersection=True)


def test_expand_of_non_tensor_data():
    # tensordict 0.14.3: NonTensorData.expand gives a NonTensorStack; MetaData stays MetaData
    d = NonTensorData(0, batch_size=(3,)).expand((2, 3))
    assert type(d) is NonTensorStack and d.tolist() == [[0] * 3] * 2
    assert type(NonTensorData(0, batch_size=(1,)).expand(2, 1)) is NonTensorStack
    m = MetaData(0, batch_size=(1,)).expand((2, 3))
    assert type(m) is MetaData and m.data == 0 and m.batch_size == rlpipe.Size([2, 3])


def test_stack_contiguous_gives_a_dense_result():
    from rlpipe.tensordict import LazyStackedTensorDict, lazy_stack
    from rlpipe.tensordict._torch_func import _stack
    parts = [lazy_stack([TensorDict(a=rlpipe.zeros(2)), TensorDict(a=rlpipe.ones(2))]) for _ in range(2)]
    assert isinstance(_stack(parts, 0), LazyStackedTensorDict)
    dense = _stack(parts, 0, contiguous=True)
    assert type(dense) is TensorDict
    assert dense["a"].tolist() == [[[0.0, 0.0], [1.0, 1.0]]] * 2


def test_typed_metadata_checks_its_data():
    # tensordict 0.14.3: MetaData[int]("a string") -> TypeError "Expected data of type int, got str"
    d = MetaData[int](0, batch_size=(3,))
    assert d.data == 0 and isinstance(d, MetaData[int]) and isinstance(d, MetaData)
    with pytest.raises(TypeError, match="Expected data of type int, got str"):
        MetaData[int]("a string")
    assert MetaData("anything").data == "anything"


def test_non_tensor_where_and_call():
    # tensordict 0.14.3: NonTensorStack.where picks objects element by element (into out when given)
    cond = rlpipe.tensor([True, False])
    mine = NonTensorStack(NonTensorData(["a"]), NonTensorData(["a"]))
    other = NonTensorStack(NonTensorData(["b"]), NonTensorData(["b"]))
    out = NonTensorStack(NonTensorData(["none"]), NonTensorData(["none"]))
    result = mine.where(condition=cond, other=other, out=out, pad=0)
    assert result is out and out.tolist() == [["a"], ["b"]]
    assert mine.where(cond, "x").tolist() == [["a"], "x"]
    with pytest.raises(TypeError, match="where: out must be a NonTensorStack for non-tensor data, got TensorDict"):
        mine.where(cond, other, out=TensorDict(batch_size=[2]))
    assert mine.tolist() == [["a"], ["a"]]
    # functions stored as non-tensor data are called by apply's function, as in tensordict
    funcs = TensorDict({"a": lambda x, y: x - y})
    got = TensorDict({"a": 0}).apply(lambda x, y, f: f(x, y), TensorDict({"a": 1}), funcs)
    assert got["a"].item() == -1


def test_nested_keys_walk_into_tensorclass_entries():
    # tensordict 0.14.3: a tensorclass entry's fields are nested keys of the TensorDict holding it
    from rlpipe.tensordict import TensorClass, lazy_stack

    class MC(TensorClass):
        a: rlpipe.Tensor

    x = TensorDict(b=MC.from_tensordict(lazy_stack([TensorDict(a=rlpipe.zeros(3)), TensorDict(a=rlpipe.ones(5))])))
    assert list(x.keys()) == ["b"] and list(x["b"].keys()) == ["a"]
    assert set(x.keys(include_nested=True)) == {"b", ("b", "a")}
    assert set(x.keys(include_nested=True, leaves_only=True)) == {("b", "a")}
    y = TensorDict(b=MC(a=rlpipe.arange(2.0), batch_size=[2]), batch_size=[2])
    assert y["b", "a"].tolist() == [0.0, 1.0]
    assert [k for k, _ in y.items(True, True)] == [("b", "a")]
    assert list(y.flatten_keys().keys()) == ["b.a"]


def test_deleted_field_reads_as_missing():
    # tensordict 0.14.3: after `del x.c`, hasattr(x, "c") is False until c is set again
    from rlpipe.tensordict import TensorClass

    class T(TensorClass["tensor_only"]):
        a: rlpipe.Tensor
        c: rlpipe.Tensor | None = None

    x = T(1)
    assert x.c is None
    x.c = 3
    assert isinstance(x.c, rlpipe.Tensor) and x.c.item() == 3
    del x.c
    assert not hasattr(x, "c") and "c" not in x._tensordict.keys()
    with pytest.raises(AttributeError, match="'T' object has no attribute 'c'"):
        x.c
    x.c = 4
    assert x.c.item() == 4


def test_bitwise_ops_on_bool_non_tensor_entries():
    # tensordict 0.14.3: (td | td) and (td ^ td) combine bool non-tensor entries object by object
    td = TensorDict({"1": 1, "nested": {"int": NonTensorData(3), "bool": NonTensorData(True), "s": "x"}})
    assert (td | td).get_non_tensor(("nested", "bool")).item() is True
    assert (td ^ td).get_non_tensor(("nested", "bool")).item() is False
    assert (td & td).get_non_tensor(("nested", "bool")).item() is True
    assert (td | td)["nested", "int"] == 3 and (td | td)["nested", "s"] == "x"  # not bools: kept
    assert (td | td)["1"].item() == 1
