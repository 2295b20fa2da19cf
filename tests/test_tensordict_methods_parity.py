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
