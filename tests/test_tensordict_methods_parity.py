"""TensorDict methods as tensordict 0.14.3's own ``test/tensordict/test_methods.py`` exercises them on
plain TensorDicts (values and error texts checked against tensordict 0.14.3)."""
import importlib.util
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
