"""TensorDict behaviours that tensordict 0.14's test_generic.py checks (values taken from tensordict
0.14.3 or from the equivalent NumPy / bool-mask computation)."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import rlpipe
from rlpipe.tensordict import TensorDict

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(rlpipe.__file__)))


# ---- uint8 index: a mask, as in torch ------------------------------------------------------------
def test_uint8_index_is_a_mask():
    base = np.arange(60.0).reshape(3, 4, 5)
    mask = np.array([1, 0, 2], dtype=np.uint8)
    index = rlpipe.tensor(mask)
    td = TensorDict({"a": rlpipe.tensor(base), "n": {"b": rlpipe.tensor(base)}}, [3, 4, 5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that uint8 masks are deprecated
        sub = td[index]
    assert sub.batch_size == rlpipe.Size([2, 4, 5]) and sub["n"].batch_size == rlpipe.Size([2, 4, 5])
    np.testing.assert_array_equal(sub["a"].numpy(), base[mask.astype(bool)])
    np.testing.assert_array_equal(sub["n", "b"].numpy(), base[mask.astype(bool)])


def test_uint8_index_setitem_writes_the_masked_rows():
    base = np.arange(60.0).reshape(3, 4, 5)
    mask = rlpipe.tensor([1, 0, 2], dtype=rlpipe.uint8)
    td = TensorDict({"a": rlpipe.tensor(base)}, [3, 4, 5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        td[mask] = TensorDict({"a": -rlpipe.ones(2, 4, 5)}, [2, 4, 5])
    expected = base.copy()
    expected[[0, 2]] = -1
    np.testing.assert_array_equal(td["a"].numpy(), expected)


def test_uint8_mask_with_ellipsis_uses_its_dims():
    td = TensorDict({"a": rlpipe.zeros(3, 4, 5)}, [3, 4, 5])
    mask = rlpipe.ones(3, 4, dtype=rlpipe.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert td[mask, ...].batch_size == rlpipe.Size([12, 5])


def test_uint8_index_with_wrong_length_raises():
    td = TensorDict({"a": rlpipe.zeros(3, 4)}, [3, 4])
    with warnings.catch_warnings(), pytest.raises(IndexError):
        warnings.simplefilter("ignore")
        td[rlpipe.tensor([1, 0], dtype=rlpipe.uint8)]


# ---- TensorDict.pad(inplace=, safe=) -------------------------------------------------------------
def _td_to_pad():
    return TensorDict({"a": rlpipe.ones(3, 4, 1), "nested": {"c": rlpipe.ones(3, 4, 2)}}, [3, 4])


def test_pad_method_inplace_keeps_the_tensordicts():
    td = _td_to_pad()
    nested = td["nested"]
    out = td.pad([0, 1, 0, 2], value=0.0, inplace=True)
    assert out is td and td["nested"] is nested
    assert td.batch_size == rlpipe.Size([4, 6]) and nested.batch_size == rlpipe.Size([4, 6])
    expected = np.zeros((4, 6, 1))
    expected[:3, :4] = 1
    np.testing.assert_array_equal(td["a"].numpy(), expected)
    assert td["nested", "c"].shape == rlpipe.Size([4, 6, 2])


def test_pad_method_not_inplace_leaves_the_input():
    td = _td_to_pad()
    out = td.pad([1, 0], value=5.0)
    assert out is not td and td.batch_size == rlpipe.Size([3, 4])
    assert out.batch_size == rlpipe.Size([4, 4]) and (out["a"][0] == 5).all() and (out["a"][1:] == 1).all()


@pytest.mark.parametrize("safe", [True, False])
def test_pad_method_negative_size_raises_before_any_change(safe):
    td = _td_to_pad()
    a = td["a"]
    with pytest.raises(RuntimeError, match="negative output size"):
        td.pad([-10, 0, 0, 0], inplace=True, safe=safe)
    assert td["a"] is a and td.batch_size == rlpipe.Size([3, 4])


# ---- through an import alias (torch -> rlpipe), as peers' code runs ------------------------------
_ALIASED = """
import importlib, importlib.abc, importlib.util, sys, warnings

class Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in ("torch", "tensordict"):
            return importlib.util.spec_from_loader(fullname, self)
    def create_module(self, spec):
        root, _, rest = spec.name.partition(".")
        target = {"torch": "rlpipe", "tensordict": "rlpipe.tensordict"}[root]
        return importlib.import_module(target + ("." + rest if rest else ""))
    def exec_module(self, module):
        pass

sys.meta_path.insert(0, Alias())
warnings.simplefilter("error")
import tempfile
import torch
from tensordict._td import TensorDict
import tensordict._math, tensordict.functional  # the import replaces these modules' __spec__
td = TensorDict({"a": torch.ones(3, 4)}, [3, 4])
td.pad([0, 1], inplace=True)
torch.stack([td, td])
td.to(torch.float64)
with tempfile.TemporaryDirectory() as d:
    td.memmap_(d)
    TensorDict.load_memmap(d)
print("ok")
"""


def test_no_import_warning_through_an_import_alias():
    # a relative import inside a function warns (ImportWarning) once an alias finder has replaced
    # the module's __spec__; tensordict's tests turn every warning into an error
    env = dict(os.environ, PYTHONPATH=_ROOT)
    out = subprocess.run([sys.executable, "-c", _ALIASED], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
