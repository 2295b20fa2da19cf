"""Names tensordict 0.14.3 offers that tensordict's own test suite imports at module level, with the
behaviour tensordict 0.14.3 gives them (values checked against tensordict 0.14.3)."""
import sys

import pytest

import rlpipe
from rlpipe.tensordict import TensorDict


def test_module_level_names_import():
    import rlpipe.tensordict as td_pkg
    from rlpipe._subclasses import FakeTensor, FakeTensorMode  # noqa: F401
    from rlpipe.tensordict._archive import _ArchiveReader  # noqa: F401
    from rlpipe.tensordict._lazy import _CustomOpTensorDict  # noqa: F401
    from rlpipe.tensordict.memmap import MemoryMappedTensor  # noqa: F401
    from rlpipe.tensordict.nn.params import TensorDictParams  # noqa: F401
    from rlpipe.tensordict.persistent import _has_h5
    from rlpipe.tensordict.tensorclass import NonTensorData, NonTensorDataBase, NonTensorStack  # noqa: F401
    assert _has_h5 is False
    for name in ["lazy_legacy", "lazy_stack", "load_memmap", "PersistentTensorDict", "is_leaf_nontensor",
                 "set_capture_non_tensor_stack", "TensorClass", "is_memmap_archive", "pack_memmap",
                 "refresh_archive_checksums", "unpack_memmap", "set_lazy_legacy", "dense_stack_tds"]:
        assert hasattr(td_pkg, name), name


def test_persistent_tensordict_raises_as_tensordict_does_without_h5py():
    import rlpipe.tensordict as td_pkg
    for build in (td_pkg.PersistentTensorDict, lambda: td_pkg.PersistentTensorDict.from_h5("x.h5"),
                  lambda: td_pkg.PersistentTensorDict.from_dict({}, filename="x.h5")):
        with pytest.raises(ModuleNotFoundError, match="Could not load h5py: rlpipe does not depend on h5py"):
            build()


def test_tensorclass_base_is_not_built_directly():
    # tensordict 0.14.3: NotImplementedError (an abstract base class); subclasses are tests/test_tensorclass.py's
    import rlpipe.tensordict as td_pkg
    with pytest.raises(NotImplementedError, match="TensorClass is an abstract base class"):
        td_pkg.TensorClass()


def test_out_of_scope_functions_raise():
    import rlpipe.tensordict as td_pkg
    with pytest.raises(ValueError, match="x does not look like a memory-mapped tensordict directory"):
        td_pkg.pack_memmap("x", "x.tdz")  # (tests/test_memmap_archive.py: the archives themselves)
    assert type(td_pkg.lazy_stack([TensorDict()])) is td_pkg.LazyStackedTensorDict


def test_tensorclass_decorates_and_builds():
    from rlpipe.tensordict import tensorclass

    @tensorclass
    class MyClass:
        x: int

    assert MyClass.__name__ == "MyClass"
    assert MyClass(x=1).x.item() == 1  # an int becomes a tensor, as in tensordict (no nocast)
    with pytest.raises(TypeError, match="expects a class"):
        tensorclass(3)
    # the submodule of the same name decorates too (an aliased import can rebind the attribute to it)
    module = sys.modules["rlpipe.tensordict.tensorclass"]
    assert module(MyClass).__name__ == "MyClass"


def test_lock_error_text():
    from rlpipe.tensordict.utils import _LOCK_ERROR
    assert _LOCK_ERROR == ("Cannot modify locked TensorDict. For in-place modification, consider using the "
                           "`set_()` method and make sure the key is present.")


def test_lazy_legacy_switch_is_context_manager_and_decorator():
    from rlpipe.tensordict.utils import lazy_legacy, set_lazy_legacy
    assert lazy_legacy() is False
    assert lazy_legacy(allow_none=True) is None
    with set_lazy_legacy(True):
        assert lazy_legacy() is True
    assert lazy_legacy() is False

    @set_lazy_legacy(True)
    def inside():
        return lazy_legacy()
    assert inside() is True
    assert lazy_legacy() is False


def test_is_leaf_nontensor():
    from rlpipe.tensordict.base import _NESTED_TENSORS_AS_LISTS, _is_leaf_nontensor
    # tensordict 0.14.3: True, False, False / True, False
    assert _is_leaf_nontensor(rlpipe.Tensor) is True
    assert _is_leaf_nontensor(TensorDict) is False
    assert _is_leaf_nontensor(int) is False
    assert _NESTED_TENSORS_AS_LISTS(rlpipe.Tensor) is True
    assert _NESTED_TENSORS_AS_LISTS(TensorDict) is False


def test_getitem_batch_size():
    from rlpipe.tensordict.utils import _getitem_batch_size
    size = rlpipe.Size([4, 3])
    # tensordict 0.14.3: torch.Size([4]), torch.Size([1, 4, 3]), torch.Size([1, 2, 3])
    assert _getitem_batch_size(size, (slice(None), 0)) == rlpipe.Size([4])
    assert _getitem_batch_size(size, None) == rlpipe.Size([1, 4, 3])
    assert _getitem_batch_size(size, rlpipe.tensor([[0, 1]])) == rlpipe.Size([1, 2, 3])


def test_convert_ellipsis_to_idx():
    from rlpipe.tensordict.utils import convert_ellipsis_to_idx
    full = slice(None)
    assert convert_ellipsis_to_idx((Ellipsis, 0), rlpipe.Size([4, 3, 2])) == (full, full, 0)
    assert convert_ellipsis_to_idx(Ellipsis, rlpipe.Size([4, 3])) == (full, full)
    # tensordict 0.14.3: None keeps its place and adds no batch dim to count
    assert convert_ellipsis_to_idx((None, Ellipsis, 0), [3, 4, 5]) == (None, full, full, 0)
    with pytest.raises(RuntimeError, match="An index can only have one ellipsis at most."):
        convert_ellipsis_to_idx((Ellipsis, 0, Ellipsis), [3, 4, 5])


def test_check_recursive_properties_and_str_to_index():
    from rlpipe.tensordict._td import _str_to_index
    from rlpipe.tensordict.utils import _check_recursive_properties
    td = TensorDict(a=rlpipe.zeros(3), b={"c": rlpipe.zeros(3)}, batch_size=[3])
    assert _check_recursive_properties(td) is True
    assert _str_to_index([0, 1]) == (0, 1)
    assert _str_to_index("1:3") == "1:3"


def test_dense_stack_tds():
    from rlpipe.tensordict.functional import dense_stack_tds
    td = TensorDict(a=rlpipe.zeros(3), b={"c": rlpipe.zeros(3)}, batch_size=[3])
    out = dense_stack_tds([td, td], 1)
    assert type(out) is TensorDict and out.batch_size == rlpipe.Size([3, 2])
    assert out["b", "c"].shape == rlpipe.Size([3, 2])


def test_printoptions_plain_summaries():
    from rlpipe.tensordict import get_printoptions, set_printoptions
    assert get_printoptions()["plain"] is False
    td = TensorDict(f=rlpipe.tensor([[1.5, 2.0], [3.25, -4.0]]), i=rlpipe.tensor([[3, -1], [7, 2]]),
                    e=rlpipe.zeros(2, 0), batch_size=[2])
    with set_printoptions(plain=True):
        text = repr(td)
    assert get_printoptions()["plain"] is False
    # tensordict 0.14.3 prints these three summaries for the same values
    assert "is_shared=False, [])" in text
    assert "is_shared=False, mean=0.6875, std=3.21)" in text
    assert "is_shared=False, min=-1, max=7)" in text
    assert "mean=" not in repr(td)


def _td3():
    return TensorDict(a=rlpipe.arange(3), b={"c": rlpipe.ones(3, 2)}, batch_size=[3])


def test_is_non_tensor_and_as_tensor():
    td = _td3()
    assert td.is_non_tensor("a") is False and td.is_non_tensor(("b", "c")) is False
    with pytest.raises(KeyError, match="zz"):
        td.is_non_tensor("zz")
    out = td.as_tensor()
    assert out is not td and out["a"] is td["a"] and out.batch_size == rlpipe.Size([3])


def test_from_list():
    out = TensorDict.from_list([{"a": rlpipe.zeros(2)}, {"a": rlpipe.ones(2)}])
    # tensordict 0.14.3: batch [2], the dicts' own batch size [] (no auto batch size)
    assert out.batch_size == rlpipe.Size([2]) and out["a"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    out = TensorDict.from_list([{"a": rlpipe.zeros(2, 3)}, {"a": rlpipe.ones(2, 3)}], auto_batch_size=True)
    assert out.batch_size == rlpipe.Size([2, 2, 3])
    out = TensorDict.from_list([{"a": rlpipe.zeros(2, 3)}, {"a": rlpipe.ones(2, 3)}], batch_size=[2, 2])
    assert out.batch_size == rlpipe.Size([2, 2])
    with pytest.raises(ValueError, match=r"The provided batch size \(\[3\]\) does not match the length of the list "
                                         r"\(1\)"):
        TensorDict.from_list([{"a": rlpipe.zeros(2)}], batch_size=[3])


def test_namedtuple_and_tuple_round_trips():
    td = _td3()
    nt = td.to_namedtuple()
    assert type(nt).__name__ == "GenericDict" and nt._fields == ("a", "b") and nt.b._fields == ("c",)
    assert nt.a is td["a"]
    assert TensorDict.from_namedtuple(nt).batch_size == rlpipe.Size([])
    assert TensorDict.from_namedtuple(nt, auto_batch_size=True).batch_size == rlpipe.Size([3])
    back = TensorDict.from_namedtuple(nt, batch_size=[3])
    assert back["b", "c"].shape == rlpipe.Size([3, 2])
    out = TensorDict.from_tuple((rlpipe.zeros(3), (rlpipe.ones(3), rlpipe.ones(3))), auto_batch_size=True)
    assert out.batch_size == rlpipe.Size([3])
    assert list(out.keys(True)) == ["0", ("1", "0"), ("1", "1"), "1"]


def test_lazy_stack_method_builds_lazy_stacks():
    from rlpipe.tensordict import LazyStackedTensorDict
    assert type(TensorDict.lazy_stack([_td3(), _td3()])) is LazyStackedTensorDict
    assert type(TensorDict.from_list([{"a": rlpipe.zeros(2)}], lazy=True)) is LazyStackedTensorDict


def test_locked_nested_keys_are_cached_until_unlock():
    td = TensorDict(a=rlpipe.zeros(3), b={"c": rlpipe.zeros(3)}, batch_size=[3]).lock_()
    first = list(td.keys(True))
    # tensordict 0.14.3 fills the cache of a locked TensorDict when its nested keys are listed
    assert td._cache and first == ["a", ("b", "c"), "b"] and list(td.keys(True)) == first
    assert list(td.keys(True, True)) == ["a", ("b", "c")]
    td.unlock_()
    assert td._cache is None
    td["d"] = rlpipe.ones(3)
    assert list(td.keys(True)) == ["a", ("b", "c"), "b", "d"]


def _sub():
    src = TensorDict(a=rlpipe.zeros(2, 3, 4), b={"c": rlpipe.zeros(2, 3)}, batch_size=[2, 3])
    return src, src._get_sub_tensordict(1)


def test_sub_tensordict_removals_act_on_the_source():
    # tensordict 0.14.3: del/pop/clear/rename_key_ on a sub-TensorDict change its source
    src, sub = _sub()
    del sub["a"]
    assert list(src.keys()) == ["b"] and list(sub.keys()) == ["b"]
    src, sub = _sub()
    assert sub.pop(("b", "c")).shape == rlpipe.Size([3]) and list(src.keys(True)) == ["a", "b"]
    assert sub.pop("zz", None) is None
    with pytest.raises(KeyError, match="zz"):
        sub.pop("zz")
    src, sub = _sub()
    assert sub.clear() is sub and list(src.keys()) == []
    src, sub = _sub()
    sub.rename_key_("a", "z")
    assert list(src.keys()) == ["b", "z"] and src["z"].shape == rlpipe.Size([2, 3, 4])
    src, sub = _sub()
    src.lock_()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        del sub["a"]
    assert "a" in src.keys()


def test_sub_tensordict_indexed_assignment_writes_the_source():
    src, sub = _sub()
    sub[:2] = {"a": rlpipe.ones(2, 4), "b": {"c": rlpipe.ones(2)}}
    # tensordict 0.14.3: 8 ones in src["a"][1, :2], src["b", "c"][1] == [1, 1, 0]
    assert src["a"][1, :2].sum().item() == 8 and src["a"].sum().item() == 8
    assert src["b", "c"][1].tolist() == [1.0, 1.0, 0.0] and src["b", "c"][0].sum().item() == 0


def test_sub_tensordict_lock_batch_size_and_clone():
    src, sub = _sub()
    with pytest.raises(RuntimeError, match="Cannot lock a _SubTensorDict. Lock the parent tensordict instead."):
        sub.lock_()
    with pytest.raises(RuntimeError, match="Modifying the batch size of a lazy representation"):
        sub.auto_batch_size_()
    shallow = sub.clone(recurse=False)
    assert type(shallow) is type(sub) and shallow._source is not src and shallow._source["a"] is src["a"]
    deep = sub.clone()
    assert type(deep) is TensorDict and (deep == sub).all()
    src.lock_()
    assert sub.is_locked


@pytest.mark.parametrize("call, name", [(lambda s: s.exclude("a", inplace=True), "exclude"),
                                        (lambda s: s.flatten_keys(inplace=True), "exclude"),
                                        (lambda s: s.select("a", inplace=True), "select")])
def test_sub_tensordict_has_no_inplace_key_ops(call, name):
    src, sub = _sub()
    with pytest.raises(RuntimeError, match=f"Cannot call {name} inplace on a lazy tensordict."):
        call(sub)
    assert list(src.keys(True)) == ["a", ("b", "c"), "b"]
    assert list(sub.exclude("a").keys()) == ["b"] and list(sub.flatten_keys().keys()) == ["a", "b.c"]


def test_sub_tensordict_lock_state_follows_the_source():
    src, sub = _sub()
    with pytest.raises(RuntimeError, match="Cannot lock a _SubTensorDict. Lock the parent tensordict instead."):
        sub.is_locked = True
    sub.is_locked = False  # tensordict 0.14.3: unlocking an unlocked view is allowed
    assert sub.unlock_() is sub and not src.is_locked
    src.lock_()
    with pytest.raises(RuntimeError, match="Cannot unlock a _SubTensorDict. Unlock the parent tensordict instead."):
        sub.unlock_()
    assert src.is_locked and sub.is_locked


def test_memmap_existing_files_and_meta(tmp_path):
    import json
    td = TensorDict(a=rlpipe.ones(3), b={"c": rlpipe.ones(3)}, batch_size=[3]).memmap_(tmp_path / "x")
    # tensordict 0.14.3's meta.json records the batch size under "shape", nested ones too
    assert json.load(open(tmp_path / "x" / "meta.json"))["shape"] == [3]
    assert json.load(open(tmp_path / "x" / "b" / "meta.json"))["shape"] == [3]
    leaves = {key: td[key] for key in td.keys(True, True)}
    with pytest.raises(RuntimeError, match=r"A filename was provided but the tensor already has a file associated "
                                           r"\(.*a.memmap\). To copy the tensor onto the new location, pass "
                                           r"copy_existing=True."):
        td.memmap_(tmp_path / "y")
    assert not (tmp_path / "y").exists()
    again = td.memmap_()  # no prefix: already in files, nothing moves
    assert again is td and all(td[key] is value for key, value in leaves.items())
    copy = td.memmap_(tmp_path / "z", copy_existing=True)
    assert (copy == 1).all() and (tmp_path / "z" / "b" / "meta.json").exists()
    loaded = TensorDict.load_memmap(tmp_path / "z", device="cpu")
    assert (loaded == 1).all() and loaded.batch_size == rlpipe.Size([3])


def test_memmap_like_and_return_early(tmp_path):
    td = TensorDict(a=rlpipe.ones(3), b={"c": rlpipe.ones(3, 2)}, batch_size=[3])
    like = td.memmap_like(tmp_path / "like")
    # tensordict 0.14.3: zeros, same shapes and dtypes, memory-mapped and locked; the source untouched
    assert like.is_memmap() and like.is_locked and (like == 0).all() and (td == 1).all()
    assert like["b", "c"].shape == rlpipe.Size([3, 2]) and like["a"].dtype == td["a"].dtype
    future = td.memmap(tmp_path / "copy", return_early=True)
    assert (future.result() == 1).all() and future.result().is_memmap() and not td.is_memmap()


def test_sub_tensordict_cannot_be_memory_mapped():
    src, sub = _sub()
    with pytest.raises(RuntimeError, match="Converting a sub-tensordict values to memmap cannot be done."):
        sub.memmap_()
    assert not src.is_memmap()


def test_tensordict_assert_allclose_td_ignores_batch_sizes():
    from rlpipe.tensordict import assert_allclose_td as td_assert
    from rlpipe.tensordict.utils import assert_allclose_td as utils_assert
    assert td_assert is utils_assert
    # tensordict 0.14.3: True for the same leaves under different batch sizes
    assert td_assert(TensorDict(a=rlpipe.zeros(3)), TensorDict(a=rlpipe.zeros(3), batch_size=[3])) is True
    with pytest.raises(AssertionError):
        td_assert(TensorDict(a=rlpipe.zeros(3)), TensorDict(a=rlpipe.zeros(2), batch_size=[2]))
    with pytest.raises(KeyError):
        td_assert(TensorDict(a=rlpipe.zeros(3)), TensorDict(b=rlpipe.zeros(3)))
    from rlpipe.testing import assert_allclose_td as strict
    with pytest.raises(AssertionError, match="batch_size mismatch"):
        strict(TensorDict(a=rlpipe.zeros(3)), TensorDict(a=rlpipe.zeros(3), batch_size=[3]))


def test_sub_tensordict_nested_assignment_creates_missing_keys():
    src = TensorDict(n=TensorDict(a=rlpipe.zeros(2, 3), batch_size=[2, 3]), batch_size=[2])
    sub = src._get_sub_tensordict(1)
    sub["n"] = TensorDict(b=rlpipe.ones(3), batch_size=[3])
    # tensordict 0.14.3 creates ("n", "b") in the source: ones at index 1, zeros elsewhere
    assert src["n", "b"].tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]] and (src["n", "a"] == 0).all()


@pytest.mark.parametrize("name, args", [("permute", (1, 0)), ("unsqueeze", (0,)), ("squeeze", ()),
                                        ("transpose", (0, 1))])
def test_sub_tensordict_refuses_dense_only_shape_ops(name, args):
    sub = TensorDict(a=rlpipe.zeros(2, 3, 4, 5), batch_size=[2, 3, 4])._get_sub_tensordict(1)
    with pytest.raises(RuntimeError, match=f"Cannot call `{name}` on a sub-tensordict. Make it dense before calling "
                                           f"this method by calling `to_tensordict`."):
        getattr(sub, name)(*args)
    assert getattr(sub.to_tensordict(), name)(*args) is not None


def test_sub_tensordict_view_and_popitem():
    src, sub = _sub()
    with pytest.raises(RuntimeError, match="Cannot call `view` on a sub-tensordict. Call `reshape` instead."):
        sub.view(-1)
    assert sub.reshape(-1).batch_size == rlpipe.Size([3])
    with pytest.raises(NotImplementedError, match="popitem not implemented for class _SubTensorDict."):
        sub.popitem()
    assert list(src.keys()) == ["a", "b"]


def test_apply_out_replaces_the_leaves_of_out():
    td = TensorDict(a=rlpipe.zeros(3), c=rlpipe.arange(3), batch_size=[3])
    out = TensorDict(a=rlpipe.ones(3), c=rlpipe.arange(3), batch_size=[3])
    old_c = out["c"]
    # tensordict 0.14.3: out's "c" becomes a new float32 tensor [1.5, 2.5, 3.5]
    assert td.apply(lambda x: x + 1.5, out=out) is out
    assert out["c"] is not old_c and out["c"].dtype == rlpipe.float32 and out["c"].tolist() == [1.5, 2.5, 3.5]
    assert td.apply(lambda x: x.float(), out=td) is td and td["c"].dtype == rlpipe.float32
    locked = TensorDict(a=rlpipe.ones(3), batch_size=[3]).lock_()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        TensorDict(a=rlpipe.zeros(3), batch_size=[3]).apply(lambda x: x + 1, out=locked)
    assert (locked["a"] == 1).all()


def test_sub_tensordict_split_keys_inplace():
    src, sub = _sub()
    first, rest = sub.split_keys(["a"], inplace=True)
    # tensordict 0.14.3: the rest is the view itself, and "a" left the source
    assert rest is sub and list(first.keys()) == ["a"] and first["a"].shape == rlpipe.Size([3, 4])
    assert list(src.keys(True)) == [("b", "c"), "b"]
    src, sub = _sub()
    first, rest = sub.split_keys([("b", "c")])
    assert rest is not sub and list(src.keys(True)) == ["a", ("b", "c"), "b"] and list(rest.keys()) == ["a"]


def test_is_tensor_collection_class_check_and_sub_to_inplace():
    from rlpipe.tensordict.base import _is_tensor_collection
    assert _is_tensor_collection(TensorDict) is True and _is_tensor_collection(rlpipe.Tensor) is False
    src, sub = _sub()
    with pytest.raises(TypeError, match="Cannot send a _SubTensorDict instance to device/dtype inplace."):
        sub.to(rlpipe.float64, inplace=True)
    assert src["a"].dtype == rlpipe.float32
    assert sub.to(rlpipe.float64)["a"].dtype == rlpipe.float64


def test_sub_tensordict_cannot_replace_a_nested_tensordict_by_a_tensor():
    src, sub = _sub()
    with pytest.raises(ValueError, match="Tried to replace a tensordict with an incompatible object of type"):
        sub.update({"b": rlpipe.zeros(3)})
    assert isinstance(src["b"], TensorDict) and (src["b", "c"] == 0).all()


def test_update_keys_to_update_tuple_is_a_sequence_of_keys():
    td = TensorDict(a=rlpipe.zeros(2), batch_size=[2])
    other = TensorDict({"My": {"father": {"was": rlpipe.ones(2), "a": rlpipe.ones(2)}, "relentlessly": rlpipe.ones(2)},
                        "x": rlpipe.ones(2)}, batch_size=[2])
    td.update(other, keys_to_update=(("My", ("father",), "was"), ("My", "relentlessly")))
    # tensordict 0.14.3: "My" was missing, so its entries on the way arrive, and "father" whole
    assert set(td.keys(True, True)) == {"a", ("My", "father", "was"), ("My", "father", "a"), ("My", "relentlessly")}
    td = TensorDict(a=rlpipe.zeros(2), My={"father": {"z": rlpipe.zeros(2)}}, batch_size=[2])
    td.update(other, keys_to_update=(("My", ("father",), "was"), ("My", "relentlessly")))
    # an existing nested TensorDict is filtered further: "a" of father does not arrive
    assert set(td.keys(True, True)) == {"a", ("My", "father", "was"), ("My", "father", "z"), ("My", "relentlessly")}
    assert (td["My", "father", "was"] == 1).all() and (td["My", "father", "z"] == 0).all()
    td = TensorDict(a=rlpipe.zeros(2), batch_size=[2])
    td.update(other, keys_to_update=("x",))
    assert set(td.keys(True, True)) == {"a", "x"}


def test_view_as_dtype():
    td = TensorDict(a=rlpipe.zeros(2, 3), b={"c": rlpipe.zeros(2)}, batch_size=[2])
    out = td.view(rlpipe.uint8, batch_size=[])
    # tensordict 0.14.3: batch [], a -> [2, 12] uint8, b.c -> [8]
    assert out.batch_size == rlpipe.Size([]) and out["a"].shape == rlpipe.Size([2, 12])
    assert out["a"].dtype == rlpipe.uint8 and out["b", "c"].shape == rlpipe.Size([8])
    assert td.view(dtype=rlpipe.int32, batch_size=[2])["a"].dtype == rlpipe.int32
    assert td.view(-1).batch_size == rlpipe.Size([2])
    sub = TensorDict(a=rlpipe.zeros(2, 3), batch_size=[2])._get_sub_tensordict(0)
    assert sub.view(rlpipe.uint8, batch_size=[])["a"].shape == rlpipe.Size([12])


def test_from_any():
    import collections
    import dataclasses

    class D(collections.UserDict):
        pass

    @dataclasses.dataclass
    class Data:
        a: int

    out = TensorDict.from_any(D(a=0))
    assert isinstance(out["a"], rlpipe.Tensor) and out["a"].item() == 0
    # tensordict 0.14.3: a list becomes a tensor, a tensor stays, auto_batch_size finds [3, 2]
    assert isinstance(TensorDict.from_any([[1, 2], [3, 4]]), rlpipe.Tensor)
    assert TensorDict.from_any({"a": rlpipe.zeros(3, 2)}, auto_batch_size=True).batch_size == rlpipe.Size([3, 2])
    tree = ([[-1, 0, 1], [2, 3, 4]], {"t": rlpipe.zeros(2), "tuple": (1, 2)}, {"dc": Data(a=0)})
    td = TensorDict.from_any(tree)
    assert td["1", "t"] is tree[1]["t"]
    assert set(td.keys(True, True)) == {"0", ("1", "t"), ("1", "tuple", "0"), ("1", "tuple", "1"), ("2", "dc", "a")}
    # tensordict makes a NonTensorStack of a ragged list; rlpipe has none: the tensor conversion fails
    with pytest.raises(RuntimeError, match="could not build a tensor from the data"):
        TensorDict.from_any({"ragged": [[1, 2], [3]]})
