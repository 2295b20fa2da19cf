"""LazyStackedTensorDict: lazy stacks of TensorDicts whose entries may differ in shape (tensordict 0.14)."""
import pytest

import rlpipe
from rlpipe.tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, lazy_stack


def _pair():
    """Two TensorDicts of batch size [3]: "obs" has 4 then 5 features, "b" holds 0..2 then 10..12."""
    a = TensorDict({"obs": rlpipe.zeros(3, 4), "b": rlpipe.arange(3.0), "n": {"c": rlpipe.ones(3, 2)}}, [3])
    b = TensorDict({"obs": rlpipe.ones(3, 5), "b": rlpipe.arange(10.0, 13.0), "n": {"c": rlpipe.zeros(3, 2)}}, [3])
    return a, b


def test_batch_size_stack_dim_and_tensordicts():
    a, b = _pair()
    s = lazy_stack([a, b])
    assert isinstance(s, LazyStackedTensorDict) and isinstance(s, TensorDictBase)
    assert s.batch_size == rlpipe.Size([2, 3]) and s.stack_dim == 0
    assert s.tensordicts[0] is a and s.tensordicts[1] is b
    s1 = TensorDict.lazy_stack([a, b], -1)
    assert s1.batch_size == rlpipe.Size([3, 2]) and s1.stack_dim == 1


def test_get_homogeneous_entry_stacks_it():
    s = lazy_stack([*_pair()], 1)
    assert s.get("b").tolist() == [[0.0, 10.0], [1.0, 11.0], [2.0, 12.0]]
    nested = s.get("n")
    assert isinstance(nested, LazyStackedTensorDict) and nested.batch_size == rlpipe.Size([3, 2])
    assert s.get(("n", "c")).shape == rlpipe.Size([3, 2, 2])
    assert s["n", "c"][0, 0].tolist() == [1.0, 1.0]


def test_get_heterogeneous_entry_raises_or_gives_list_or_padded():
    s = lazy_stack([*_pair()])
    with pytest.raises(RuntimeError, match="Failed to stack tensors within a tensordict"):
        s.get("obs")
    with pytest.raises(RuntimeError, match="Failed to stack tensors"):
        s["obs"]
    as_list = s.get("obs", as_list=True)
    assert [t.shape for t in as_list] == [rlpipe.Size([3, 4]), rlpipe.Size([3, 5])]
    x = lazy_stack([TensorDict({"x": rlpipe.ones(1)}), TensorDict({"x": rlpipe.ones(2) * 2})])
    assert x.get("x", as_padded_tensor=True).tolist() == [[1.0, 0.0], [2.0, 2.0]]
    assert x.get("x", as_padded_tensor=True, padding_side="left", padding_value=-1).tolist() == [[-1.0, 1.0],
                                                                                                 [2.0, 2.0]]
    with pytest.raises(TypeError, match="exclusive"):
        x.get("x", as_list=True, as_padded_tensor=True)
    with pytest.raises(RuntimeError, match="no nested tensors"):
        x.get("x", as_nested_tensor=True)
    with pytest.raises(ValueError, match="padding_side"):
        x.get("x", as_padded_tensor=True, padding_side="up")


def test_missing_key():
    s = lazy_stack([*_pair()])
    assert s.get("zz") is None
    assert s.get("zz", 7) == 7
    with pytest.raises(KeyError, match="zz"):
        s["zz"]


def test_keys_are_those_every_tensordict_has():
    a, b = _pair()
    b["only_b"] = rlpipe.zeros(3)
    s = lazy_stack([a, b])
    assert s.keys() == ["obs", "b", "n"]
    assert s.keys(True, True) == ["obs", "b", ("n", "c")]
    assert "b" in s and "only_b" not in s


def test_index_along_the_stack_dim():
    a, b = _pair()
    s = lazy_stack([a, b])
    assert s[1] is b
    assert s[-2] is a
    part = s[1:]
    assert isinstance(part, LazyStackedTensorDict) and part.batch_size == rlpipe.Size([1, 3])
    assert part.tensordicts[0] is b
    picked = s[[1, 0]]
    assert picked.tensordicts == [b, a]
    assert s[rlpipe.tensor([False, True])].tensordicts == [b]
    assert s[1, 2]["b"].item() == 12.0
    with pytest.raises(IndexError, match="out of bounds"):
        s[2]


def test_index_across_the_stack_dim():
    s = lazy_stack([*_pair()])
    col = s[:, 2]
    assert isinstance(col, LazyStackedTensorDict) and col.batch_size == rlpipe.Size([2]) and col.stack_dim == 0
    assert col["b"].tolist() == [2.0, 12.0]
    assert col.get("obs", as_list=True)[1].shape == rlpipe.Size([5])
    s1 = lazy_stack([*_pair()], 1)
    row = s1[1]
    assert isinstance(row, LazyStackedTensorDict) and row["b"].tolist() == [1.0, 11.0]
    assert type(s1[:, 0]) is TensorDict and s1[:, 0]["b"].tolist() == [0.0, 1.0, 2.0]
    assert s1[0:2, 1]["b"].tolist() == [11.0, 12.0][:0] + [10.0, 11.0]
    assert s[..., 0]["b"].tolist() == [0.0, 10.0]
    with pytest.raises(IndexError, match="too many indices"):
        s[0, 0, 0]


def test_any_index_numpy_takes():
    s = lazy_stack([*_pair()])  # "b": [[0, 1, 2], [10, 11, 12]]
    assert s[None].batch_size == rlpipe.Size([1, 2, 3]) and s[None]["b"].tolist() == [[[0.0, 1.0, 2.0],
                                                                                           [10.0, 11.0, 12.0]]]
    picked = s[[0, 1, 1], [2, 0, 2]]  # stack dim and another dim broadcast together: elements (0,2) (1,0) (1,2)
    assert isinstance(picked, LazyStackedTensorDict) and picked["b"].tolist() == [2.0, 10.0, 12.0]
    assert picked.get("obs", as_list=True)[1].shape == rlpipe.Size([5])
    grid = s[rlpipe.tensor([[1, 0], [0, 0]])]
    assert grid.batch_size == rlpipe.Size([2, 2, 3]) and grid["b"][0, 0].tolist() == [10.0, 11.0, 12.0]
    mask = rlpipe.tensor([[True, False, True], [False, True, False]])
    assert s[mask]["b"].tolist() == [0.0, 2.0, 11.0]
    s1 = lazy_stack([*_pair()], 1)  # batch [3, 2]
    # torch's rule: the int only removes its dim (NumPy would put the list's dim first): [3] here
    assert s1[:, 1, None].batch_size == rlpipe.Size([3, 1])
    assert s1[1, [1, 0]]["b"].tolist() == [11.0, 1.0]


def test_setitem_at_any_index():
    a, b = _pair()
    s = lazy_stack([a, b])
    s[rlpipe.tensor([[True, False, True], [False, True, False]])] = TensorDict({"b": rlpipe.tensor([-1.0, -2.0,
                                                                                                      -3.0])}, [3])
    assert a["b"].tolist() == [-1.0, 1.0, -2.0] and b["b"].tolist() == [10.0, -3.0, 12.0]
    s[[0, 1], [1, 2]] = 0.5
    assert a["b"].tolist() == [-1.0, 0.5, -2.0] and b["b"].tolist() == [10.0, -3.0, 0.5]


def test_set_and_setitem_write_into_the_stacked_tensordicts():
    a, b = _pair()
    s = lazy_stack([a, b])
    s["r"] = rlpipe.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert a["r"].tolist() == [1.0, 2.0, 3.0] and b["r"].tolist() == [4.0, 5.0, 6.0]
    s[:, 0] = TensorDict({"b": rlpipe.tensor([-1.0, -2.0])}, [2])
    assert a["b"].tolist() == [-1.0, 1.0, 2.0] and b["b"].tolist() == [-2.0, 11.0, 12.0]
    s[1] = TensorDict({"b": rlpipe.zeros(3)}, [3])
    assert b["b"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match="batch dimension mismatch for key 'bad'"):
        s["bad"] = rlpipe.zeros(3, 2)
    assert "bad" not in a.keys()
    s.set_("b", rlpipe.ones(2, 3))
    assert a["b"].tolist() == [1.0, 1.0, 1.0]


def test_update_and_nested_writes():
    a, b = _pair()
    s = lazy_stack([a, b])
    s.update({"n": {"d": rlpipe.ones(2, 3)}, "e": rlpipe.zeros(2, 3, 1)})
    assert a["n", "d"].tolist() == [1.0, 1.0, 1.0] and b["e"].shape == rlpipe.Size([3, 1])
    s.update_(TensorDict({"b": rlpipe.full((2, 3), 5.0)}, [2, 3]))
    assert b["b"].tolist() == [5.0, 5.0, 5.0]
    with pytest.raises(KeyError):
        s.update_({"nope": rlpipe.zeros(2, 3)})


def test_apply_select_exclude_split_keys_clone_to():
    a, b = _pair()
    s = lazy_stack([a, b])
    doubled = s.apply(lambda t: t * 2)
    assert isinstance(doubled, LazyStackedTensorDict)
    assert doubled.get("obs", as_list=True)[1].tolist()[0] == [2.0] * 5
    assert a["obs"].sum().item() == 0.0 and b["obs"].sum().item() == 15.0  # untouched
    assert s.select("b").keys() == ["b"]
    assert s.exclude("obs", "n").keys() == ["b"]
    first, rest = s.split_keys(["b"])
    assert first.keys() == ["b"] and sorted(rest.keys()) == ["n", "obs"]
    c = s.clone()
    c.tensordicts[0]["b"] += 1
    assert a["b"].tolist() == [0.0, 1.0, 2.0]
    assert c.tensordicts[0] is not a
    moved = s.to(rlpipe.float64)
    assert moved.get("b").dtype is rlpipe.float64 and isinstance(moved, LazyStackedTensorDict)
    s.apply_(lambda t: t + 1)
    assert a["b"].tolist() == [1.0, 2.0, 3.0]


def test_unbind_permute_unsqueeze_squeeze():
    a, b = _pair()
    s = lazy_stack([a, b])
    assert s.unbind(0) == (a, b)
    cols = s.unbind(1)
    assert len(cols) == 3 and cols[2]["b"].tolist() == [2.0, 12.0]
    p = s.permute(1, 0)
    assert p.batch_size == rlpipe.Size([3, 2]) and p.stack_dim == 1 and p["b"][2].tolist() == [2.0, 12.0]
    u = s.unsqueeze(0)
    assert u.batch_size == rlpipe.Size([1, 2, 3]) and u.stack_dim == 1
    assert u.squeeze(0).batch_size == rlpipe.Size([2, 3])
    e = s.unsqueeze(2).expand(2, 3, 4)
    assert e["b"].shape == rlpipe.Size([2, 3, 4])


def test_densify_contiguous_to_tensordict():
    a, b = _pair()
    dense = lazy_stack([a.exclude("obs"), b.exclude("obs")]).contiguous()
    assert type(dense) is TensorDict and dense.batch_size == rlpipe.Size([2, 3])
    assert dense["n", "c"].shape == rlpipe.Size([2, 3, 2]) and type(dense["n"]) is TensorDict
    assert lazy_stack([a.exclude("obs"), b.exclude("obs")]).to_tensordict()["b"].tolist()[1] == [10.0, 11.0, 12.0]
    with pytest.raises(RuntimeError, match="Failed to stack"):
        lazy_stack([a, b]).densify()


def test_nested_lazy_stacks():
    a, b = _pair()
    inner = lazy_stack([a, b])
    outer = lazy_stack([inner, inner.clone()], 1)
    assert outer.batch_size == rlpipe.Size([2, 2, 3])
    assert outer[:, 0].tensordicts[0] is a
    assert outer.get("b")[1, 1].tolist() == [10.0, 11.0, 12.0]


def test_insert_append_extend():
    a, b = _pair()
    s = lazy_stack([a])
    s.append(b)
    assert s.batch_size == rlpipe.Size([2, 3]) and s[1] is b
    c = a.clone()
    s.insert(0, c)
    assert s.tensordicts == [c, a, b] and s.batch_size == rlpipe.Size([3, 3])
    with pytest.raises(ValueError, match="Batch sizes in tensordicts differs"):
        s.append(TensorDict({}, [4]))
    with pytest.raises(TypeError, match="TensorDictBase"):
        s.append({"a": 1})
    assert s.batch_size == rlpipe.Size([3, 3])


def test_construction_errors():
    a, _ = _pair()
    with pytest.raises(RuntimeError, match="batch sizes in tensordicts differs"):
        LazyStackedTensorDict(a, TensorDict({}, [4]))
    with pytest.raises(RuntimeError, match="Stack dim 3 is too big"):
        LazyStackedTensorDict(a, a, stack_dim=3)
    with pytest.raises(TypeError, match="expects TensorDicts, got dict at position 1"):
        LazyStackedTensorDict(a, {"x": 1})
    with pytest.raises(RuntimeError, match="items cannot be empty"):
        lazy_stack([])


def test_memmap_and_load_memmap(tmp_path):
    a, b = _pair()
    s = lazy_stack([a, b], 1)
    s.memmap_(tmp_path / "lz")
    assert s.is_locked
    loaded = TensorDict.load_memmap(tmp_path / "lz")
    assert isinstance(loaded, LazyStackedTensorDict) and loaded.stack_dim == 1
    assert loaded.batch_size == rlpipe.Size([3, 2])
    assert loaded.get("obs", as_list=True)[1].tolist()[0] == [1.0] * 5
    assert LazyStackedTensorDict.load_memmap(tmp_path / "lz").get("b")[:, 1].tolist() == [10.0, 11.0, 12.0]
    with pytest.raises(RuntimeError, match="not a lazy stack"):
        LazyStackedTensorDict.load_memmap(tmp_path / "lz" / "0")


def test_locked_stack_refuses_new_keys():
    s = lazy_stack([*_pair()]).lock_()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        s["new"] = rlpipe.zeros(2, 3)
    s.unlock_()
    s["new"] = rlpipe.zeros(2, 3)


def test_maybe_dense_stack_and_stack_of_different_shapes():
    a, b = _pair()
    dense = LazyStackedTensorDict.maybe_dense_stack([a.exclude("obs"), b.exclude("obs")])
    assert type(dense) is TensorDict
    lazy = TensorDict.maybe_dense_stack([a, b])
    assert isinstance(lazy, LazyStackedTensorDict)  # "obs" differs in shape
    # same keys, a nested entry that differs: dense at the top, lazy only there (tensordict's best intention)
    td0 = TensorDict({"x": rlpipe.zeros(2), "n": {"c": rlpipe.zeros(1)}, "s": "p"}, [])
    td1 = TensorDict({"x": rlpipe.ones(2), "n": {"c": rlpipe.zeros(2)}, "s": "q"}, [])
    best = LazyStackedTensorDict.maybe_dense_stack([td0, td1])
    assert type(best) is TensorDict and best["x"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert isinstance(best.get("n"), LazyStackedTensorDict) and best["s"] == ["p", "q"]
    assert isinstance(TensorDict.maybe_dense_stack([td0, td0.exclude("x")]), LazyStackedTensorDict)
    # as in tensordict 0.14 (lazy legacy off): a dense stack of different shapes is an error
    with pytest.raises(RuntimeError, match="cannot be joined"):
        rlpipe.stack([a, b])


def test_assert_allclose_td_compares_heterogeneous_stacks_pair_by_pair():
    from rlpipe.tensordict import assert_allclose_td
    a, b = _pair()
    assert assert_allclose_td(lazy_stack([a, b]), lazy_stack([a.clone(), b.clone()]))
    changed = b.clone()
    changed["obs"][0, 0] = 5.0
    with pytest.raises(AssertionError, match="key 'obs' does not match"):
        assert_allclose_td(lazy_stack([a, b]), lazy_stack([a, changed]))


def test_to_lazystack():
    td = TensorDict({"a": rlpipe.arange(6.0).reshape(2, 3)}, [2, 3])
    lz = td.to_lazystack(1)
    assert isinstance(lz, LazyStackedTensorDict) and lz.stack_dim == 1 and len(lz.tensordicts) == 3
    assert lz.to_lazystack(1) is lz
    swapped = lz.to_lazystack(0)
    assert swapped.stack_dim == 0 and swapped["a"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(RuntimeError, match="inplace=True"):
        lz.contiguous(inplace=True)


def test_cat_into_an_out_lazy_stack():
    a, b = _pair()
    out = lazy_stack([a.clone(), b.clone()])
    out.tensordicts[1]["obs"].zero_()
    result = rlpipe.cat([lazy_stack([a, b])], dim=0, out=out)
    assert result is out and out.tensordicts[1]["obs"].sum().item() == 15.0


def test_a_lazy_stack_inside_a_tensordict():
    a, b = _pair()
    parent = TensorDict({"lz": lazy_stack([a, b])}, [2])
    assert parent["lz", "n", "c"].shape == rlpipe.Size([2, 3, 2])  # a nested key read through the stack
    assert parent.get(("lz", "missing")) is None
    doubled = parent.apply(lambda x: x * 2)
    assert isinstance(doubled.get("lz"), LazyStackedTensorDict) and doubled["lz", "b"][1].tolist() == [20.0, 22.0,
                                                                                                        24.0]
    assert parent[1]["lz", "b"].tolist() == [10.0, 11.0, 12.0]


def test_lazy_stack_into_out_writes_in_place():
    a, b = _pair()
    out = TensorDict({"b": rlpipe.zeros(2, 3)}, [2, 3])
    target = out["b"]
    result = LazyStackedTensorDict.lazy_stack([a.select("b"), b.select("b")], out=out)
    assert result is out and out["b"] is target and target.tolist() == [[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]]


def test_from_list_lazy():
    out = TensorDict.from_list([{"a": rlpipe.zeros(2)}, {"a": rlpipe.zeros(3)}], lazy=True)
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == rlpipe.Size([2])


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_lazy_stack_on_cuda():
    a, b = _pair()
    s = lazy_stack([a, b]).to("cuda")
    assert s.device.type == "cuda" and s.get("b").device.type == "cuda"
    assert s.get("b").cpu().tolist() == [[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]]
    assert s[[1, 0], 1]["b"].cpu().tolist() == [11.0, 1.0]
    padded = lazy_stack([TensorDict({"x": rlpipe.ones(1)}), TensorDict({"x": rlpipe.ones(2)})]).to("cuda")
    assert padded.get("x", as_padded_tensor=True).cpu().tolist() == [[1.0, 0.0], [1.0, 1.0]]


def test_memmap_of_a_tensordict_holding_a_lazy_stack(tmp_path):
    # tensordict 0.14: the nested lazy stack is memory-mapped in its folder (one per stacked
    # TensorDict) and loads back as a lazy stack; text entries stay JSON
    stack = lazy_stack([TensorDict({"x": rlpipe.zeros(3), "s": "a"}, []),
                        TensorDict({"x": rlpipe.ones(2), "s": "b"}, [])])
    td = TensorDict({"ls": stack, "y": rlpipe.arange(2.0)}, [2])
    td.memmap_(tmp_path / "ckpt")
    assert td.is_locked and td["ls"].is_locked and td["ls"].tensordicts[0].is_memmap()
    back = TensorDict.load_memmap(tmp_path / "ckpt")
    assert isinstance(back["ls"], LazyStackedTensorDict) and back["ls"].stack_dim == 0
    assert [x.tolist() for x in back["ls"].get("x", as_list=True)] == [[0.0] * 3, [1.0] * 2]
    assert back["ls"][1].get_non_tensor("s") == "b" and back["y"].tolist() == [0.0, 1.0]
    td.unlock_()
    assert not td["ls"].is_locked
    bad = TensorDict({"ls": lazy_stack([TensorDict({"o": object()}, [])] * 2)}, [2])
    with pytest.raises(TypeError, match="'o'"):  # checked before any file is written
        bad.memmap_(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_nested_lazy_stacks_read_ragged_entries_as_lists_or_padded():
    # tensordict 0.14.3 gives a list of lists of lists and a [2, 2, 2, 4] padded tensor here
    inner = lazy_stack([TensorDict(a=rlpipe.ones(3)), TensorDict(a=rlpipe.full((4,), 2.0))])
    outer = lazy_stack([lazy_stack([inner, inner.copy()]), lazy_stack([inner, inner.copy()])])
    as_list = outer.get("a", as_list=True)
    assert [[[t.tolist() for t in row] for row in block] for block in as_list] == \
        [[[[1.0] * 3, [2.0] * 4]] * 2] * 2
    padded = outer.get("a", as_padded_tensor=True, padding_value=-1.0)
    assert padded.shape == (2, 2, 2, 4) and padded[1, 0, 0].tolist() == [1.0, 1.0, 1.0, -1.0]
    with pytest.raises(RuntimeError, match="Failed to stack tensors within a tensordict"):
        outer.get("a")


def test_new_zeros_of_a_lazy_stack():
    # tensordict 0.14.3's values for the same calls (test_nontensor.py's new_empty_setitem)
    from rlpipe.tensordict import NonTensorStack
    td = TensorDict(a=TensorDict(b=NonTensorStack("a", "b", "c").unsqueeze(-1), batch_size=(3,)),
                    batch_size=(3,)).to_lazystack()
    zeros = td.new_zeros((4,), empty_lazy=True)
    assert type(zeros) is LazyStackedTensorDict and zeros.batch_size == (4,) and zeros.stack_dim == 0
    zeros[rlpipe.tensor([True, True, False, True])] = td
    assert zeros.get(("a", "b")).tolist() == [["a"], ["b"], ["a"], ["c"]]
    ragged = lazy_stack([TensorDict(x=rlpipe.ones(2, 3), batch_size=[2]) for _ in range(2)])
    dense = ragged.new_zeros(5, 2)
    assert type(dense) is TensorDict and dense["x"].shape == (5, 2, 3) and dense["x"].sum().item() == 0
    assert ragged.new_full((2, 2), 7.0)["x"].unique().tolist() == [7.0]
    stack = ragged.new_ones((3, 2), empty_lazy=True)
    assert type(stack) is LazyStackedTensorDict and stack.batch_size == (3, 2) and stack.is_empty()


def test_a_string_set_on_a_lazy_stack_goes_to_every_stacked_tensordict():
    stack = lazy_stack([TensorDict(a=rlpipe.ones(2)), TensorDict(a=rlpipe.ones(3))])
    stack["s"] = "hello"  # tensordict 0.14.3: ['hello', 'hello'], a NonTensorData in each
    assert stack["s"] == ["hello", "hello"] and stack.tensordicts[1]["s"] == "hello"


def test_empty_recurse_keeps_non_tensor_data_and_update_inplace_replaces_it():
    from rlpipe.tensordict import NonTensorStack
    td = TensorDict(b=NonTensorStack("a", "b"), s="x", x=rlpipe.ones(2),
                    n=TensorDict(c=NonTensorStack("u", "v"), y=rlpipe.ones(2), batch_size=[2]), batch_size=[2])
    empty = td.empty(recurse=True)  # as tensordict 0.14.3: the tensors go, the non-tensor data stays
    assert sorted(map(str, empty.keys(True))) == sorted(map(str, ["b", "s", "n", ("n", "c")]))
    assert empty["b"] == ["a", "b"] and empty["s"] == "x" and empty["n", "c"] == ["u", "v"]
    target = TensorDict(s=NonTensorStack("old", "old"), x=rlpipe.zeros(2), batch_size=[2])
    x = target["x"]
    target.update(TensorDict(s=NonTensorStack("p", "q"), x=rlpipe.ones(2), batch_size=[2]), inplace=True)
    assert target["s"] == ["p", "q"] and target["x"] is x and x.tolist() == [1.0, 1.0]


def test_del_removes_a_key_from_the_stacked_tensordicts_that_have_it():
    """tensordict 0.14.3: ``del`` needs no stackable entries, and takes exclusive keys from their holders."""
    first = TensorDict(x=rlpipe.zeros(3), y=rlpipe.zeros(1))
    second = TensorDict(x=rlpipe.zeros(2))
    stack = LazyStackedTensorDict.lazy_stack([first, second])
    del stack["x"]  # shapes [3] and [2]: pop would have to stack them
    assert list(first.keys()) == ["y"] and list(second.keys()) == []
    assert stack.del_("y") is stack and list(first.keys()) == []
    with pytest.raises(KeyError, match="Key z not found in any of the stacked tensordicts."):
        del stack["z"]
