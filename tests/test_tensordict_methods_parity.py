"""TensorDict methods as tensordict 0.14.3's own ``test/tensordict/test_methods.py`` exercises them on
plain TensorDicts (values and error texts checked against tensordict 0.14.3)."""
import importlib.util
import warnings

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
