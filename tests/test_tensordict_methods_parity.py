"""TensorDict methods as tensordict 0.14.3's own ``test/tensordict/test_methods.py`` exercises them on
plain TensorDicts (values and error texts checked against tensordict 0.14.3)."""
import importlib.util
import json
import warnings

import pytest

import rlpipe
from rlpipe.tensordict import TensorDict, _td


def _td4():
    return TensorDict({"a": rlpipe.arange(24.0).reshape(4, 3, 2, 1), "b": rlpipe.zeros(4, 3, 2, 1, 2)},
                      batch_size=[4, 3, 2, 1])


def test_methods_do_not_warn_when_the_module_is_imported_under_an_alias(tmp_path, monkeypatch):
    # an import alias (tensordict._td -> rlpipe.tensordict._td) rebinds the module's __spec__; a
    # relative import run inside a method would then warn "__package__ != __spec__.parent"
    monkeypatch.setattr(_td, "__spec__", importlib.util.spec_from_loader("tensordict._td", loader=None))
    td = _td4()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert td.to(rlpipe.float64)["a"].dtype == rlpipe.float64
        assert td.int()["a"].dtype == rlpipe.int32
        assert td.pad([0, 1])["a"].shape == (5, 3, 2, 1)
        td.memmap(tmp_path / "m")
        assert (TensorDict.load_memmap(tmp_path / "m")["a"] == td["a"]).all()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[
    pytest.mark.cuda, pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable")])])
def test_untyped_storage_is_the_block_views_share(device):
    # tensordict 0.14.3 / torch 2.13: a view's untyped_storage() is its base's block (same data_ptr,
    # the base's nbytes), a clone's is another block; element_size() is 1
    t = rlpipe.arange(10.0, device=device)
    view = t[2:5]
    storage = view.untyped_storage()
    assert isinstance(storage, rlpipe.UntypedStorage)
    assert storage.data_ptr() == t.untyped_storage().data_ptr() == t.data_ptr()
    assert storage.data_ptr() != view.data_ptr()
    assert storage.nbytes() == storage.size() == len(storage) == 40
    assert storage.element_size() == 1
    assert storage.device == t.device
    assert t.view(2, 5).t().untyped_storage().nbytes() == 40
    assert t.clone().untyped_storage().data_ptr() != storage.data_ptr()


def test_memmap_like_leaves_live_in_their_own_files(tmp_path):
    td = _td4()
    like = td.memmap_like(prefix=tmp_path, copy_existing=True)
    for key in td.keys(True):
        assert like[key].untyped_storage().data_ptr() != td[key].untyped_storage().data_ptr()
    assert like.is_memmap()


def test_backward_errors_name_keys_as_tensordict_does():
    # tensordict 0.14.3's texts: a root key as 'a', a nested one as ('n', 'a')
    x = rlpipe.randn(3, requires_grad=True)
    out = TensorDict({"a": x * 2, "n": {"a": x * 3}})
    with pytest.raises(KeyError, match=r"Missing gradient entry for key 'a' in the gradient tensordict"):
        out.backward(TensorDict(b=rlpipe.ones(3)))
    with pytest.raises(KeyError, match=r"Missing gradient entry for key \('n', 'a'\) in the gradient"):
        out.backward(TensorDict(a=rlpipe.ones(3)))
    with pytest.raises(TypeError, match="^gradient must be a TensorDictBase instance with entries matching the "
                                        "differentiable leaves of the tensordict, got Tensor instead.$"):
        out.backward(rlpipe.ones(3))
    with pytest.raises(RuntimeError, match=r"^grad can be implicitly created only for scalar outputs: the leaf at "
                                           r"key 'a' has shape \(3,\)\. Pass a gradient"):
        out.backward()
    with pytest.raises(RuntimeError, match=r"^Mismatch in shape: the gradient at key \('n', 'a'\) has shape "
                                           r"\(4,\) but the corresponding leaf has shape \(3,\)\.$"):
        out.backward(TensorDict({"a": rlpipe.ones(3), "n": {"a": rlpipe.ones(4)}}))
    assert x.grad is None  # every failed call left the graph untouched


# ---- memory-mapped TensorDicts: file names, empty leaves, sub-TensorDicts, load_memmap(out=) ----------
def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_memmap_names_files_as_tensordicts_robust_keys(tmp_path):
    # tensordict 0.14.3 writes exactly these names for these keys (unsafe characters as %XX)
    td = TensorDict({"robust/key": rlpipe.ones(2), "a b": rlpipe.zeros(2, 0), "n/x": {".": rlpipe.ones(2)},
                     "..": rlpipe.full((2,), 3.0)}, batch_size=[2])
    td.memmap(tmp_path, robust_key=True)
    assert _files(tmp_path) == ["%2E%2E.memmap", "meta.json", "n%2Fx/%2E.memmap", "n%2Fx/meta.json",
                                "robust%2Fkey.memmap"]
    loaded = TensorDict.load_memmap(tmp_path, robust_key=True)
    assert sorted(loaded.keys(True, True), key=str) == [("n/x", "."), "..", "a b", "robust/key"]
    assert loaded["..", ].tolist() == [3.0, 3.0] and loaded["n/x", "."].tolist() == [1.0, 1.0]


def test_empty_leaves_get_no_file_and_load_back(tmp_path):
    td = TensorDict({"e": rlpipe.empty(0, dtype=rlpipe.int64), "n": {"m": rlpipe.empty(0, 3, dtype=rlpipe.float64),
                                                                     "k": rlpipe.empty(2, 0, dtype=rlpipe.int16)}})
    td.memmap_(tmp_path)
    assert _files(tmp_path) == ["meta.json", "n/meta.json"]
    loaded = TensorDict.load_memmap(tmp_path)
    assert (loaded["e"].shape, loaded["e"].dtype) == ((0,), rlpipe.int64)
    assert (loaded["n", "m"].shape, loaded["n", "m"].dtype) == ((0, 3), rlpipe.float64)
    assert (loaded["n", "k"].shape, loaded["n", "k"].dtype) == ((2, 0), rlpipe.int16)


def test_a_leaf_whose_file_is_gone_is_left_out(tmp_path):
    TensorDict({"kept": rlpipe.ones(1), "gone": rlpipe.ones(1)}).memmap_(tmp_path)
    (tmp_path / "gone.memmap").unlink()
    assert list(TensorDict.load_memmap(tmp_path).keys()) == ["kept"]


def test_a_bad_empty_leaf_record_is_refused(tmp_path):
    TensorDict({"e": rlpipe.empty(0)}).memmap_(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    for bad in ({"shape": [0], "dtype": "FLOATING_NP"}, {"shape": [-1, 0], "dtype": "float32"},
                {"shape": "0", "dtype": "float32"}):
        meta["leaves"]["e"] = bad
        (tmp_path / "meta.json").write_text(json.dumps(meta))
        with pytest.raises(RuntimeError, match="load_memmap: .* holds no valid memory-mapped TensorDict"):
            TensorDict.load_memmap(tmp_path)


def test_an_older_memmap_folder_still_loads(tmp_path):
    # version 2 folders named files after the raw keys
    TensorDict({"a b": rlpipe.ones(2)}, [2]).memmap_(tmp_path)
    (tmp_path / "a%20b.memmap").rename(tmp_path / "a b.memmap")
    meta = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "version": 2}))
    assert TensorDict.load_memmap(tmp_path)["a b"].tolist() == [1.0, 1.0]
    meta["leaves"] = {"../x": {"shape": [2], "dtype": "float32"}}
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "version": 2}))
    with pytest.raises(RuntimeError, match=r"bad key '\.\./x'"):
        TensorDict.load_memmap(tmp_path)


@pytest.mark.parametrize("idx", [(slice(None), slice(0, 2)), (slice(None), slice(0, 2, None)), (rlpipe.tensor([0, 2]),),
                                 ([0, 2],), 1, (Ellipsis, 0), (slice(None), [True, False, True])])
def test_sub_tensordict_memmap_round_trip(tmp_path, idx):
    td = TensorDict({"a": rlpipe.randn(4, 3, 2), "b": {"c": rlpipe.randn(4, 3)}}, batch_size=[4, 3])
    sub = td._get_sub_tensordict(idx)
    mapped = sub.memmap(tmp_path / "sub", copy_existing=True)
    assert isinstance(mapped, _td._SubTensorDict) and mapped.is_locked
    assert sorted(_files(tmp_path / "sub")) == ["_source/a.memmap", "_source/b/c.memmap", "_source/b/meta.json",
                                                "_source/meta.json", "meta.json"]
    loaded = TensorDict.load_memmap(tmp_path / "sub")
    assert isinstance(loaded, _td._SubTensorDict)
    assert loaded.batch_size == sub.batch_size
    assert (loaded["a"] == sub["a"]).all() and (loaded["b", "c"] == sub["b", "c"]).all()
    assert (loaded._source == td).all()


def test_sub_tensordict_load_memmap_fills_the_whole_source(tmp_path):
    td = TensorDict({"a": rlpipe.randn(4, 3)}, batch_size=[4, 3])
    td._get_sub_tensordict((slice(None), slice(0, 2))).memmap(tmp_path / "sub")
    dest = TensorDict({"a": rlpipe.zeros(4, 3)}, batch_size=[4, 3])
    view = dest._get_sub_tensordict((slice(None), slice(0, 2)))
    assert view.load_memmap_(tmp_path / "sub") is view
    assert (dest["a"] == td["a"]).all()
    # a plain TensorDict folder fills the view's part only
    TensorDict({"a": rlpipe.ones(4, 2)}, [4, 2]).memmap(tmp_path / "plain")
    view.load_memmap_(tmp_path / "plain")
    assert (dest["a"][:, :2] == 1).all() and (dest["a"][:, 2] == td["a"][:, 2]).all()


def test_index_codec_is_tensordicts():
    # json.dumps of tensordict 0.14.3's _index_to_str for the same index
    index = (slice(None), [0, 2], 1, rlpipe.tensor([True, False]), range(1, 3), Ellipsis, None)
    assert json.dumps(_td._index_to_str(index)) == (
        '["tuple", [["slice", {"start": null, "stop": null, "step": null}], ["list", [0, 2]], 1, '
        '["tensor", [true, false], "cpu"], ["range", {"start": 1, "stop": 3, "step": 1}], ["ellipsis"], null]]')
    back = _td._str_to_index(json.loads(json.dumps(_td._index_to_str(index))))
    assert back[:3] == (slice(None), [0, 2], 1) and back[4:] == (range(1, 3), Ellipsis, None)
    assert back[3].tolist() == [True, False] and back[3].dtype == rlpipe.bool
    # older, untagged metadata: a list of indices is a tuple
    legacy = [["slice", {"start": None, "stop": None, "step": None}], ["slice", {"start": 0, "stop": 2, "step": None}]]
    assert _td._str_to_index(legacy) == (slice(None), slice(0, 2))
    assert _td._str_to_index([0, 1]) == (0, 1) and _td._str_to_index([]) == () and _td._str_to_index(3) == 3


def test_a_sub_memmap_folder_with_a_bad_index_is_refused(tmp_path):
    TensorDict({"a": rlpipe.zeros(4, 3)}, [4, 3])._get_sub_tensordict(1).memmap(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    for bad in (9, ["tensor", [[1], [1, 2]], "cpu"], ["tensor", [0], "gpu"], ["slice", {"start": 0}]):
        (tmp_path / "meta.json").write_text(json.dumps({**meta, "index": bad}))
        with pytest.raises(RuntimeError, match="load_memmap: .* holds no valid memory-mapped TensorDict"):
            TensorDict.load_memmap(tmp_path)


def _stale_out():
    return TensorDict({"a": rlpipe.zeros(3), "stale": rlpipe.zeros(3),
                       "nested": {"b": rlpipe.zeros(3), "stale": rlpipe.zeros(3)}, "gone": {"c": rlpipe.zeros(3)}},
                      batch_size=[3])


def test_load_memmap_into_out_replaces_its_entries(tmp_path):
    # tensordict 0.14.3: out is returned with exactly the stored entries, its nested TensorDicts kept,
    # its old tensors untouched, unlocked and not memory-mapped
    TensorDict({"a": rlpipe.ones(3), "nested": {"b": rlpipe.ones(3)}, "new": {"d": rlpipe.ones(3)}},
               batch_size=[3]).memmap(tmp_path)
    out = _stale_out()
    nested, old_a = out["nested"], out["a"]
    loaded = TensorDict.load_memmap(tmp_path, out=out)
    assert loaded is out and loaded["nested"] is nested
    assert set(loaded.keys(True, True)) == {"a", ("nested", "b"), ("new", "d")}
    assert (loaded == 1).all() and (old_a == 0).all()
    assert not loaded.is_locked and not loaded.is_memmap()


def test_load_memmap_into_a_bad_out_fails_and_leaves_it_unchanged(tmp_path):
    TensorDict({"a": rlpipe.ones(3)}, batch_size=[3]).memmap(tmp_path)
    locked = _stale_out().lock_()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        TensorDict.load_memmap(tmp_path, out=locked)
    assert set(locked.keys()) == {"a", "stale", "nested", "gone"}
    with pytest.raises(RuntimeError, match=r"Cannot load a tensordict of batch size rlpipe.Size\(\[3\]\) into one of "
                                           r"batch size rlpipe.Size\(\[5\]\)"):
        TensorDict.load_memmap(tmp_path, out=TensorDict(batch_size=[5]))
    with pytest.raises(TypeError, match="cannot be loaded into a _SubTensorDict output"):
        TensorDict.load_memmap(tmp_path, out=TensorDict({"a": rlpipe.zeros(2, 3)}, [2, 3])._get_sub_tensordict(0))
    TensorDict({"a": rlpipe.ones(2, 3)}, [2, 3])._get_sub_tensordict(0).memmap(tmp_path / "sub")
    with pytest.raises(TypeError, match="^Loading a _SubTensorDict into a TensorDict output is not supported. "
                                        "Provide a _SubTensorDict as `out` or None.$"):
        TensorDict.load_memmap(tmp_path / "sub", out=TensorDict(batch_size=[3]))


# ---- tensor_split with negative indices and tensor arguments (the values torch 2.13 gives) ------------
@pytest.mark.parametrize("arg, expected", [
    ([-1], [[0, 1, 2], [3]]), ([-6], [[], [0, 1, 2, 3]]), ([6], [[0, 1, 2, 3], []]),
    ([3, 1], [[0, 1, 2], [], [1, 2, 3]]), ([2, 2, 1, 5], [[0, 1], [], [], [1, 2, 3], []]),
    (rlpipe.tensor(3), [[0, 1], [2], [3]]), (rlpipe.tensor([1, -1]), [[0], [1, 2], [3]]),
    (rlpipe.tensor([], dtype=rlpipe.int64), [[0, 1, 2, 3]])])
def test_tensor_split_like_torch(arg, expected):
    t = rlpipe.arange(4)
    assert [p.tolist() for p in rlpipe.tensor_split(t, arg)] == expected
    td = TensorDict({"a": t}, [4])
    assert [p["a"].tolist() for p in td.tensor_split(arg)] == expected


@pytest.mark.parametrize("arg, error", [
    (0, "^number of sections must be larger than 0, got 0$"),
    (-1, "^number of sections must be larger than 0, got -1$"),
    (rlpipe.tensor(0), "^number of sections must be larger than 0, got 0$"),
    (rlpipe.tensor([[1]]), "^tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                           "one-dimensional tensor, but got a tensor with 2 dims$"),
    (rlpipe.tensor(2.0), "^tensor_split expected tensor_indices_or_sections to have dtype of long, but got Float$")])
def test_tensor_split_errors_like_torch(arg, error):
    with pytest.raises(RuntimeError, match=error):
        rlpipe.tensor_split(rlpipe.arange(4), arg)
